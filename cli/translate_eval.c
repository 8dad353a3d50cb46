/* attn translate: padded batches, the loss (packed or padded), the validation loss, and decoding (greedy or beam search) of a
 * split scored with corpus BLEU (sacrebleu 13a on detokenised text, lowercased, and on tokens). */
#include "dist.h"
#include "translate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool translate_packs(const translate_run *run)
{
    return run->model.cfg.kind == ATTN_SEQ2SEQ_TRANSFORMER && !run->opt->no_pack;
}

attn_tensor *translate_loss(attn_ctx *ctx, const translate_run *run, const translate_batch *b)
{
    const attn_seq2seq_config *c = &run->model.cfg;
    if (translate_packs(run)) {
        attn_tensor *logits = attn_seq2seq_forward_packed(ctx, &run->model, b->src_packed, b->cu_src, b->tgt_in_packed,
                                                          b->cu_tgt, b->n); /* (total_t, V) */
        return attn_cross_entropy(ctx, logits, b->tgt_out_packed, c->pad_id, (float)run->opt->label_smoothing);
    }
    attn_tensor *logits = attn_seq2seq_forward(ctx, &run->model, b->src, b->src_lens, b->n, b->src_width, b->tgt_in,
                                               b->tgt_lens, b->tgt_width, NULL);
    attn_tensor *flat = attn_reshape(ctx, logits, 2, (int64_t[]){b->n * b->tgt_width, c->tgt_vocab});
    return attn_cross_entropy(ctx, flat, b->tgt_out, c->pad_id, (float)run->opt->label_smoothing);
}

void translate_batch_free(translate_batch *b)
{
    free(b->src);
    free(b->src_lens);
    free(b->tgt_in);
    free(b->tgt_out);
    free(b->tgt_lens);
    free(b->cu_src), free(b->cu_tgt), free(b->src_packed), free(b->tgt_in_packed), free(b->tgt_out_packed);
    memset(b, 0, sizeof *b);
}

/* The padded rows' first src_lens / tgt_lens ids end to end (each length in [1, width]) */
static attn_status pack(translate_batch *b)
{
    const int64_t n = b->n;
    b->cu_src = malloc((size_t)(n + 1) * sizeof *b->cu_src);
    b->cu_tgt = malloc((size_t)(n + 1) * sizeof *b->cu_tgt);
    if (!b->cu_src || !b->cu_tgt) return ATTN_ERR_NOMEM;
    b->cu_src[0] = b->cu_tgt[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        b->cu_src[i + 1] = b->cu_src[i] + b->src_lens[i];
        b->cu_tgt[i + 1] = b->cu_tgt[i] + (b->tgt_lens[i] > 0 ? b->tgt_lens[i] : 1);
    }
    b->src_packed = malloc((size_t)b->cu_src[n] * sizeof *b->src_packed);
    b->tgt_in_packed = malloc((size_t)b->cu_tgt[n] * sizeof *b->tgt_in_packed);
    b->tgt_out_packed = malloc((size_t)b->cu_tgt[n] * sizeof *b->tgt_out_packed);
    if (!b->src_packed || !b->tgt_in_packed || !b->tgt_out_packed) return ATTN_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) {
        const int64_t ls = b->cu_src[i + 1] - b->cu_src[i], lt = b->cu_tgt[i + 1] - b->cu_tgt[i];
        memcpy(b->src_packed + b->cu_src[i], b->src + i * b->src_width, (size_t)ls * sizeof *b->src);
        memcpy(b->tgt_in_packed + b->cu_tgt[i], b->tgt_in + i * b->tgt_width, (size_t)lt * sizeof *b->tgt_in);
        memcpy(b->tgt_out_packed + b->cu_tgt[i], b->tgt_out + i * b->tgt_width, (size_t)lt * sizeof *b->tgt_out);
    }
    return ATTN_OK;
}

attn_status translate_batch_fill(translate_batch *b, const translate_run *run, const translate_split *split,
                                 const int64_t *rows, int64_t n, bool for_loss)
{
    const attn_seq2seq_config *c = &run->model.cfg;
    const int64_t cap = c->max_len; /* ids + one special fit */
    int64_t sw = attn_batch_width(&split->src, rows, n, 1, cap), tw = attn_batch_width(&split->tgt, rows, n, 1, cap);
    if (sw < 1) sw = 1;
    if (tw < 1) tw = 1;
    translate_batch_free(b);
    b->src = malloc((size_t)(n * sw) * sizeof *b->src);
    b->tgt_in = malloc((size_t)(n * tw) * sizeof *b->tgt_in);
    b->tgt_out = malloc((size_t)(n * tw) * sizeof *b->tgt_out);
    b->src_lens = malloc((size_t)n * sizeof *b->src_lens);
    b->tgt_lens = malloc((size_t)n * sizeof *b->tgt_lens);
    if (!b->src || !b->tgt_in || !b->tgt_out || !b->src_lens || !b->tgt_lens) return ATTN_ERR_NOMEM;
    b->n = n, b->src_width = sw, b->tgt_width = tw;
    attn_pad_opts src = {.pad_id = c->pad_id, .bos_id = -1, .eos_id = c->eos_id};
    attn_pad_opts in = {.pad_id = c->pad_id, .bos_id = c->bos_id, .eos_id = -1};
    attn_pad_opts out = {.pad_id = c->pad_id, .bos_id = -1, .eos_id = c->eos_id};
    if (attn_batch_pad(b->src, b->src_lens, &split->src, rows, &src, n, sw) != ATTN_OK ||
        attn_batch_pad(b->tgt_in, b->tgt_lens, &split->tgt, rows, &in, n, tw) != ATTN_OK ||
        attn_batch_pad(b->tgt_out, NULL, &split->tgt, rows, &out, n, tw) != ATTN_OK)
        return attn_last_status();
    b->tokens = 0;
    for (int64_t i = 0; i < n; i++) {
        if (b->src_lens[i] < 1) b->src_lens[i] = 1;
        b->tokens += b->src_lens[i] + b->tgt_lens[i];
    }
    return for_loss && translate_packs(run) ? pack(b) : ATTN_OK; /* decoding reads the padded rows */
}

int translate_val_loss(translate_run *run, const translate_split *split, double *loss)
{
    attn_ctx *ctx = cli_ctx_new(0);
    int64_t *rows = malloc(128 * sizeof *rows);
    translate_batch b = {0};
    int code = ctx && rows ? CLI_OK : cli_fail(CLI_ERR_DATA, "translate", "out of memory");
    double sum = 0, count = 0;
    if (ctx) {
        attn_ctx_set_grad_enabled(ctx, false);
        attn_ctx_set_training(ctx, false);
    }
    /* under mpirun each rank scores every dist_size()-th batch; the sums are added at the end */
    for (int64_t start = 128 * dist_rank(); code == CLI_OK && start < split->src.count; start += 128 * dist_size()) {
        int64_t n = split->src.count - start < 128 ? split->src.count - start : 128;
        for (int64_t i = 0; i < n; i++) rows[i] = start + i;
        attn_tensor *l =
            translate_batch_fill(&b, run, split, rows, n, true) == ATTN_OK ? translate_loss(ctx, run, &b) : NULL;
        if (!l) {
            code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
            break;
        }
        int64_t tokens = 0;
        for (int64_t i = 0; i < n * b.tgt_width; i++) tokens += b.tgt_out[i] != run->model.cfg.pad_id;
        sum += l->data[0] * (double)tokens;
        count += (double)tokens;
        attn_ctx_reset(ctx);
    }
    double sums[2] = {sum, count};
    if (code == CLI_OK) dist_sum(sums, 2);
    *loss = sums[1] > 0 ? sums[0] / sums[1] : 0;
    translate_batch_free(&b);
    free(rows);
    attn_ctx_free(ctx);
    return code;
}

char *translate_detok(const translate_run *run, const int64_t *ids, int64_t n, attn_tokens *scratch)
{
    attn_tokens_clear(scratch);
    for (int64_t i = 0; i < n; i++) {
        const char *t = attn_vocab_token(run->tgt_vocab, ids[i]);
        if (t && ids[i] != run->model.cfg.pad_id && ids[i] != run->model.cfg.bos_id && ids[i] != run->model.cfg.eos_id)
            attn_tokens_push(scratch, t, strlen(t));
    }
    return attn_detokenize(scratch->items, scratch->count);
}

int translate_evaluate(translate_run *run, const translate_split *split, const char *name)
{
    if (dist_rank() != 0) return CLI_OK; /* under mpirun, rank 0 alone decodes and reports */
    const int64_t bs = 100, n_all = split->src.count, max_extra = 10, beam = run->opt->beam;
    attn_ctx *ctx = cli_ctx_new(0);
    translate_batch b = {0};
    int64_t rows[100], *out = NULL, out_lens[100], limits[100];
    attn_tokens scratch = {0}, hyp_tok = {0}, ref_tok = {0};
    attn_bleu_stats cased = {0}, lower = {0}, tokens = {0};
    int code = ctx ? CLI_OK : cli_fail(CLI_ERR_DATA, "translate", "out of memory");
    double t0 = now_seconds();
    for (int64_t start = 0; code == CLI_OK && start < n_all; start += bs) {
        int64_t n = n_all - start < bs ? n_all - start : bs;
        for (int64_t i = 0; i < n; i++) rows[i] = start + i;
        if (translate_batch_fill(&b, run, split, rows, n, false) != ATTN_OK) break;
        int64_t max_out = b.src_width + max_extra;
        free(out);
        out = malloc((size_t)(n * max_out) * sizeof *out);
        for (int64_t i = 0; i < n; i++) limits[i] = b.src_lens[i] + max_extra; /* each sentence's own */
        /* greedy: the batch's widest limit for all; beam: the batch's searches together, each as it
         * would run alone, with its own limit */
        const attn_seq2seq_decode_opts dopts = {.beam_size = (int)beam,
                                                .length_penalty = (float)run->opt->length_penalty,
                                                .max_out = beam > 1 ? limits : NULL};
        attn_status st = out ? attn_seq2seq_decode(ctx, &run->model, b.src, b.src_lens, n, b.src_width, &dopts, max_out,
                                                   out, out_lens)
                             : ATTN_ERR_NOMEM;
        if (st != ATTN_OK) {
            code = cli_fail(CLI_ERR_DATA, "translate", "%s", out ? attn_last_error() : "out of memory");
            break;
        }
        for (int64_t i = 0; code == CLI_OK && i < n; i++) {
            char *hyp = translate_detok(run, out + i * max_out, out_lens[i], &scratch);
            const char *ref = split->text.tgt[start + i];
            char *hl = hyp ? attn_utf8_lower(hyp, strlen(hyp)) : NULL, *rl = attn_utf8_lower(ref, strlen(ref));
            attn_tokens_clear(&hyp_tok);
            attn_tokens_clear(&ref_tok);
            if (!hyp || !hl || !rl || attn_bleu_add(&cased, hyp, ref) != ATTN_OK ||
                attn_bleu_add(&lower, hl, rl) != ATTN_OK ||
                attn_tokenize(&hyp_tok, ATTN_TOKENIZER_WORDS, hyp, strlen(hyp)) != ATTN_OK ||
                attn_tokenize(&ref_tok, ATTN_TOKENIZER_WORDS, ref, strlen(ref)) != ATTN_OK ||
                attn_bleu_add_tokens(&tokens, hyp_tok.items, hyp_tok.count, ref_tok.items, ref_tok.count) != ATTN_OK)
                code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
            if (code == CLI_OK && start + i < 3) printf("  %s\n  -> %s\n", split->text.src[start + i], hyp);
            free(hyp);
            free(hl);
            free(rl);
        }
    }
    if (code == CLI_OK) {
        double p[4], bp;
        char decoding[32] = "greedy";
        if (beam > 1) snprintf(decoding, sizeof decoding, "beam %lld", (long long)beam);
        double bleu = attn_bleu_score(&cased, p, &bp);
        printf("%s: BLEU %.2f (sacrebleu-style 13a, cased; %.1f/%.1f/%.1f/%.1f, BP %.3f), lowercased %.2f, "
               "on lowercased tokens %.2f; %lld sentences, %s, %.0f s\n",
               name, bleu, p[0], p[1], p[2], p[3], bp, attn_bleu_score(&lower, NULL, NULL),
               attn_bleu_score(&tokens, NULL, NULL), (long long)n_all, decoding, now_seconds() - t0);
    }
    free(out);
    translate_batch_free(&b);
    attn_tokens_free(&scratch);
    attn_tokens_free(&hyp_tok);
    attn_tokens_free(&ref_tok);
    attn_ctx_free(ctx);
    return code;
}
