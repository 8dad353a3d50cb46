/* attn lm generate and explain: a prompt (after the start, <|endoftext|> or llama2.c's BOS, where
 * every document starts)
 * continued token by token through the key/value-cache decoder, greedy or sampled (temperature,
 * top-k, top-p, a seed: the same seed, the same text), streamed to stdout as tokens come; and the
 * attention of every layer and head over a prompt as a grid of heatmaps, tokens as labels. */
#include "lm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The prompt's ids after the start into *ids (malloc'd), *n of them, within `room` tokens:
 * longer is an error, or with --truncate its last tokens */
static int prompt_ids(const lm_run *run, const char *prompt, size_t len, int64_t room, int64_t **ids, int64_t *n)
{
    int64_t *all = malloc((len + 2) * sizeof *all);
    if (!all) return cli_fail(CLI_ERR_DATA, "lm", "out of memory");
    all[0] = lm_tok_start(&run->tok);
    const int64_t got = lm_tok_encode(&run->tok, prompt, len, all + 1);
    if (got < 0) {
        free(all);
        return cli_fail(CLI_ERR_DATA, "lm", "%s", attn_last_error());
    }
    *n = 1 + got;
    if (*n > room && !run->opt->truncate) {
        free(all);
        return cli_fail(CLI_ERR_USAGE, "lm",
                        "the prompt is %lld tokens (with the start before it); the model's context leaves room "
                        "for %lld; shorten it, or --truncate to keep its last tokens",
                        (long long)*n, (long long)room);
    }
    if (*n > room) { /* --truncate: the start token dropped too, as the text's start is */
        memmove(all, all + *n - room, (size_t)room * sizeof *all);
        *n = room;
    }
    *ids = all;
    return CLI_OK;
}

typedef struct scored {
    float logit;
    int64_t id;
} scored;

/* descending by logit, ties by id: one order on every host */
static int by_logit(const void *pa, const void *pb)
{
    const scored *a = pa, *b = pb;
    return a->logit > b->logit ? -1 : a->logit < b->logit ? 1 : (a->id > b->id) - (a->id < b->id);
}

/* The next token from logits (V): the argmax when greedy (or temperature 0); else softmax(logits /
 * temperature) over the top_k largest (0: all), cut to the smallest head whose mass reaches top_p,
 * drawn with rng. s is scratch of V entries. */
static int64_t pick(const float *logits, int64_t V, const lm_options *o, attn_rng *rng, scored *s)
{
    int64_t best = 0;
    for (int64_t v = 1; v < V; v++) best = logits[v] > logits[best] ? v : best;
    if (o->greedy || o->temperature == 0.0) return best;
    for (int64_t v = 0; v < V; v++) s[v] = (scored){logits[v], v};
    int64_t keep = o->top_k > 0 && o->top_k < V ? o->top_k : V;
    if (keep < V || o->top_p < 1.0) qsort(s, (size_t)V, sizeof *s, by_logit);
    double sum = 0.0;
    for (int64_t i = 0; i < keep; i++) sum += exp(((double)s[i].logit - logits[best]) / o->temperature);
    if (o->top_p < 1.0) {
        double mass = 0.0;
        int64_t cut = 0;
        while (cut < keep && mass < o->top_p * sum)
            mass += exp(((double)s[cut++].logit - logits[best]) / o->temperature);
        keep = cut, sum = mass;
    }
    double u = attn_rng_uniform(rng) * sum;
    for (int64_t i = 0; i < keep; i++)
        if ((u -= exp(((double)s[i].logit - logits[best]) / o->temperature)) < 0) return s[i].id;
    return s[keep - 1].id;
}

int lm_generate(lm_run *run, const char *prompt, size_t len)
{
    const lm_options *o = run->opt;
    const attn_lm *m = &run->model;
    const int64_t V = m->cfg.vocab_size, C = m->cfg.context, eot = lm_tok_start(&run->tok);
    int64_t *ids = NULL, n = 0;
    int code = prompt_ids(run, prompt, len, C, &ids, &n);
    if (code != CLI_OK) return code;
    attn_lm_decoder *d = attn_lm_decoder_new(m, 1, C);
    float *logits = malloc((size_t)V * sizeof *logits);
    scored *order = malloc((size_t)V * sizeof *order);
    if (!d || !logits || !order) code = cli_fail(CLI_ERR_DATA, "lm", "%s", d ? "out of memory" : attn_last_error());
    if (code == CLI_OK) attn_lm_decoder_set_num_threads(d, cli_threads());
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)o->sample_seed);
    if (o->ids)
        for (int64_t i = 1; i < n; i++) printf("%s%lld", i > 1 ? " " : "", (long long)ids[i]);
    else
        fwrite(prompt, 1, len, stdout);
    int64_t count = n, made = 0, prev = ids[n - 1];
    while (code == CLI_OK && made < o->max_new_tokens) {
        if (attn_lm_decoder_feed(d, logits, ids, &count) != ATTN_OK) {
            code = cli_fail(CLI_ERR_DATA, "lm", "%s", attn_last_error());
            break;
        }
        const int64_t next = pick(logits, V, o, &rng, order);
        if (next == eot) break;
        size_t bytes;
        const char *text = lm_tok_bytes(&run->tok, prev, next, &bytes);
        if (o->ids)
            printf("%s%lld", made || n > 1 ? " " : "", (long long)next);
        else
            fwrite(text, 1, bytes, stdout);
        prev = next;
        fflush(stdout);
        made++;
        if (attn_lm_decoder_length(d, 0) >= C) break; /* the context is full */
        ids[0] = next, count = 1;
    }
    if (code == CLI_OK) putchar('\n');
    attn_lm_decoder_free(d);
    free(ids), free(logits), free(order);
    return code;
}

/* A token as a tick label: its bytes, with a space shown as U+2423, newline and tab escaped, a byte
 * that is not UTF-8 as \xNN; into out (room n) */
static void token_label(const lm_tokenizer *t, int64_t prev, int64_t id, char *out, size_t n)
{
    size_t len, at = 0;
    const unsigned char *s = (const unsigned char *)lm_tok_bytes(t, prev, id, &len);
    for (size_t i = 0; s && i < len && at + 8 < n; i++) {
        const unsigned char c = s[i];
        size_t seq = c < 0x80                 ? 1
                     : c >= 0xC2 && c <= 0xDF ? 2
                     : c >= 0xE0 && c <= 0xEF ? 3
                     : c >= 0xF0 && c <= 0xF4 ? 4
                                              : 0;
        bool whole = seq > 0 && i + seq <= len;
        for (size_t k = 1; whole && k < seq; k++) whole = (s[i + k] & 0xC0) == 0x80;
        if (c == ' ')
            at += (size_t)snprintf(out + at, n - at, "\u2423");
        else if (c == '\n')
            at += (size_t)snprintf(out + at, n - at, "\\n");
        else if (c == '\t')
            at += (size_t)snprintf(out + at, n - at, "\\t");
        else if (c < 0x20 || c == 0x7F || !whole)
            at += (size_t)snprintf(out + at, n - at, "\\x%02X", c);
        else {
            memcpy(out + at, s + i, seq);
            at += seq, i += seq - 1;
        }
    }
    out[at] = '\0';
}

int lm_explain(lm_run *run, const char *prompt, size_t len)
{
    const attn_lm *m = &run->model;
    const int64_t L = m->cfg.num_layers, H = m->cfg.num_heads;
    int64_t *ids = NULL, n = 0;
    int code = prompt_ids(run, prompt, len, m->cfg.context, &ids, &n);
    if (code != CLI_OK) return code;
    attn_ctx *ctx = cli_ctx_new(0);
    char *labels = malloc((size_t)n * 64), **ticks = malloc((size_t)n * sizeof *ticks);
    char *titles = malloc((size_t)(L * H) * 32), **panel = malloc((size_t)(L * H) * sizeof *panel);
    attn_tensor *w = NULL;
    if (!ctx || !labels || !ticks || !titles || !panel) code = cli_fail(CLI_ERR_DATA, "lm", "out of memory");
    if (code == CLI_OK) attn_ctx_set_grad_enabled(ctx, false);
    if (code == CLI_OK && !attn_lm_forward_weights(ctx, m, ids, n, &w))
        code = cli_fail(CLI_ERR_DATA, "lm", "%s", attn_last_error());
    if (code == CLI_OK) {
        for (int64_t i = 0; i < n; i++) {
            ticks[i] = labels + 64 * i;
            token_label(&run->tok, i ? ids[i - 1] : -1, ids[i], ticks[i], 64);
        }
        for (int64_t l = 0; l < L; l++)
            for (int64_t h = 0; h < H; h++) {
                panel[l * H + h] = titles + 32 * (l * H + h);
                snprintf(panel[l * H + h], 32, "layer %d, head %d", (int)(l + 1) % 1000, (int)(h + 1) % 1000);
            }
        attn_heatmap_opts ho = {.title = "attn lm: causal self-attention of each layer and head",
                                .xlabel = "key (earlier tokens)",
                                .ylabel = "query",
                                .xticks = (const char *const *)ticks,
                                .yticks = (const char *const *)ticks,
                                .annotate = -1};
        if (attn_plot_heatmap_heads(run->opt->out, w->data, L * H, n, n, (const char *const *)panel, &ho) != ATTN_OK)
            code = cli_fail(CLI_ERR_DATA, "lm", "%s", attn_last_error());
        else
            printf("%lld tokens, %lld layers x %lld heads: wrote %s\n", (long long)n, (long long)L, (long long)H,
                   run->opt->out);
    }
    attn_ctx_free(ctx);
    free(ids), free(labels), free(ticks), free(titles), free(panel);
    return code;
}
