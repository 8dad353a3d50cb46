/* Decoding benchmark: a trained translation checkpoint (attn translate train) decodes a whole
 * split the way `attn translate eval` does (greedy over batches of 100 sentences, or beam search
 * sentence by sentence, max_out = source length + 10), timed around the decoding calls alone.
 * Prints one JSON line (sentences, wall and CPU seconds, sentences/s) and writes every sentence's token ids,
 * one line each, to --out, so two decoders can be compared token for token
 * (bench/decode_speed.sh runs it with both and with an older build).
 *   bench_decode --checkpoint CK [--data DIR] [--src en] [--tgt fr] [--split NAME] [--beam K]
 *                [--length-penalty A] [--threads N] [--decoder default|ref] [--out FILE]
 *                [--limit N] (the first N sentences only)
 * --decoder default decodes with attn_seq2seq_decode's CACHED decoder, ref with RECOMPUTE. A build
 * with -DBENCH_DECODE_DEFAULT_ONLY, against a library of a revision from before
 * attn_seq2seq_decode (bench/decode_speed.sh's BASE_REV), calls that library's attn_seq2seq_greedy
 * and attn_seq2seq_beam instead and takes only the default. */
#include <attn.h>
#include <attn_data.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct options {
    const char *checkpoint, *data, *src, *tgt, *split, *decoder, *out;
    int beam, threads;
    long limit;
    float alpha;
} options;

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_decode: %s: %s\n", what, attn_last_error());
    return 1;
}

static int parse(options *o, int argc, char **argv)
{
    *o = (options){.data = "data/multi30k",
                   .src = "en",
                   .tgt = "fr",
                   .split = "test_2016_flickr",
                   .decoder = "default",
                   .beam = 4,
                   .threads = 2,
                   .alpha = 0.6f};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **strs[] = {&o->checkpoint, &o->data, &o->src, &o->tgt, &o->split, &o->decoder, &o->out};
        const char *names[] = {"--checkpoint", "--data", "--src", "--tgt", "--split", "--decoder", "--out"};
        bool known = false;
        for (int k = 0; k < 7 && !known; k++)
            if (!strcmp(a, names[k]) && v) *strs[k] = v, known = true;
        if (!known && v && !strcmp(a, "--beam")) o->beam = atoi(v), known = true;
        if (!known && v && !strcmp(a, "--threads")) o->threads = atoi(v), known = true;
        if (!known && v && !strcmp(a, "--limit")) o->limit = atol(v), known = true;
        if (!known && v && !strcmp(a, "--length-penalty")) o->alpha = (float)atof(v), known = true;
        if (!known) {
            fprintf(stderr,
                    "bench_decode: unknown option or missing value: %s (see the comment at the "
                    "top of bench/bench_decode.c)\n",
                    a);
            return 2;
        }
        i++;
    }
    bool ref = !strcmp(o->decoder, "ref");
#ifdef BENCH_DECODE_DEFAULT_ONLY
    if (ref) return fprintf(stderr, "bench_decode: this build has only the library's default decoder\n"), 2;
#endif
    if (!o->checkpoint || o->beam < 1 || o->beam > 64 || o->threads < 1 || (!ref && strcmp(o->decoder, "default")))
        return fprintf(stderr, "bench_decode: --checkpoint, --beam in [1, 64], --threads >= 1 and "
                               "--decoder default|ref expected\n"),
               2;
    return 0;
}

/* One batch decoded as attn translate eval decodes it: greedy (beam 1) to out_width tokens, or beam
 * search with each sentence's limit its length + 10 (out rows of out_width) */
static attn_status decode_batch(attn_ctx *ctx, const attn_seq2seq *m, const options *o, bool ref, const int64_t *src,
                                const int64_t *lens, int64_t n, int64_t width, int64_t out_width, int64_t *out,
                                int64_t *out_lens)
{
    int64_t max_out[100];
    for (int64_t i = 0; i < n; i++) max_out[i] = lens[i] + out_width - width;
#ifdef BENCH_DECODE_DEFAULT_ONLY /* the older library's calls, one beam search per sentence */
    (void)ref;
    if (o->beam == 1) return attn_seq2seq_greedy(ctx, m, src, lens, n, width, out_width, out, out_lens);
    attn_status st = ATTN_OK;
    for (int64_t i = 0; st == ATTN_OK && i < n; i++)
        st = attn_seq2seq_beam(ctx, m, src + i * width, lens[i], o->beam, o->alpha, max_out[i], out + i * out_width,
                               &out_lens[i], NULL);
    return st;
#else
    const attn_seq2seq_decode_opts d = {.beam_size = o->beam,
                                        .length_penalty = o->alpha,
                                        .max_out = o->beam > 1 ? max_out : NULL,
                                        .impl = ref ? ATTN_SEQ2SEQ_DECODE_RECOMPUTE : ATTN_SEQ2SEQ_DECODE_CACHED};
    return attn_seq2seq_decode(ctx, m, src, lens, n, width, &d, out_width, out, out_lens);
#endif
}

/* The model described by the checkpoint's metadata (attn translate's keys), with its weights. */
static int load_model(attn_seq2seq *m, attn_params **p, const char *path)
{
    attn_st_file *f = attn_st_open(path);
    if (!f) return fail(path);
    const char *keys[12] = {"kind",       "src_vocab",  "tgt_vocab", "d_model", "num_heads", "dim_feedforward",
                            "enc_layers", "dec_layers", "max_len",   "pad_id",  "bos_id",    "eos_id"};
    long v[12];
    bool ok = true;
    for (int i = 0; i < 12 && ok; i++) {
        const char *s = attn_st_metadata(f, keys[i]);
        ok = s != NULL;
        if (ok) v[i] = strtol(s, NULL, 10);
    }
    attn_st_close(f);
    if (!ok) return fprintf(stderr, "bench_decode: %s is not a translation checkpoint\n", path), 1;
    attn_seq2seq_config c = {.kind = (attn_seq2seq_kind)v[0],
                             .src_vocab = v[1],
                             .tgt_vocab = v[2],
                             .d_model = v[3],
                             .num_heads = v[4],
                             .dim_feedforward = v[5],
                             .enc_layers = (int)v[6],
                             .dec_layers = (int)v[7],
                             .max_len = v[8],
                             .pad_id = v[9],
                             .bos_id = v[10],
                             .eos_id = v[11]};
    attn_rng rng;
    attn_rng_seed(&rng, 0);
    *p = attn_params_new();
    if (!*p || attn_seq2seq_init(m, *p, &c, &rng) != ATTN_OK) return fail("model");
    return attn_checkpoint_load(path, *p, NULL, false) == ATTN_OK ? 0 : fail(path);
}

/* The vocabulary the checkpoint carries (metadata vocab.<side>), or, in one an older attn wrote,
 * the file beside it. */
static attn_vocab *load_vocab(const char *checkpoint, const char *side)
{
    char key[32], path[4096];
    snprintf(key, sizeof key, "vocab.%s", side);
    attn_st_file *f = attn_st_open(checkpoint);
    const char *text = f ? attn_st_metadata(f, key) : NULL;
    attn_vocab *v = text ? attn_vocab_parse(text, strlen(text), checkpoint) : NULL;
    attn_st_close(f);
    if (text) return v;
    snprintf(path, sizeof path, "%s.%s.vocab", checkpoint, side);
    return attn_vocab_load(path);
}

int main(int argc, char **argv)
{
    options o;
    int code = parse(&o, argc, argv);
    if (code) return code;
    attn_seq2seq m = {0};
    attn_params *p = NULL;
    if (load_model(&m, &p, o.checkpoint)) return 1;
    attn_vocab *sv = load_vocab(o.checkpoint, "src");
    if (!sv) return fail("source vocabulary");
    char sp[4096], tp[4096];
    snprintf(sp, sizeof sp, "%s/%s.%s.gz", o.data, o.split, o.src);
    snprintf(tp, sizeof tp, "%s/%s.%s.gz", o.data, o.split, o.tgt);
    attn_text_pairs pairs = {0};
    attn_id_seqs ids = {0};
    if (attn_pairs_load(&pairs, sp, tp) != ATTN_OK) return fail("data");
    const int64_t n_texts = o.limit > 0 && pairs.count > o.limit ? o.limit : pairs.count;
    if (attn_encode_texts(&ids, sv, ATTN_TOKENIZER_WORDS, (const char *const *)pairs.src, n_texts) != ATTN_OK)
        return fail("encode");
    FILE *out_file = o.out ? fopen(o.out, "w") : NULL;
    if (o.out && !out_file) return perror(o.out), 1;
    const bool ref = !strcmp(o.decoder, "ref");
    const attn_seq2seq_config *c = &m.cfg;
    const int64_t bs = 100, max_extra = 10, n_all = ids.count;
    attn_pad_opts pad = {.pad_id = c->pad_id, .bos_id = -1, .eos_id = c->eos_id};
    attn_ctx *ctx = attn_ctx_new(0);
    if (ctx && attn_ctx_set_num_threads(ctx, o.threads) != ATTN_OK) return fail("threads");
    int64_t rows[100], lens[100], out_lens[100];
    int64_t *src = malloc((size_t)(bs * c->max_len) * sizeof *src);
    int64_t *out = malloc((size_t)(bs * (c->max_len + max_extra)) * sizeof *out);
    if (!ctx || !src || !out) return fprintf(stderr, "bench_decode: out of memory\n"), 1;
    double seconds = 0, cpu_seconds = 0; /* wall and CPU time (all threads) of the decoding calls */
    int64_t tokens = 0;
    for (int64_t start = 0; start < n_all; start += bs) { /* as translate_evaluate */
        const int64_t n = n_all - start < bs ? n_all - start : bs;
        for (int64_t i = 0; i < n; i++) rows[i] = start + i;
        int64_t width = attn_batch_width(&ids, rows, n, 1, c->max_len);
        if (width < 1) width = 1;
        if (attn_batch_pad(src, lens, &ids, rows, &pad, n, width) != ATTN_OK) return fail("pad");
        for (int64_t i = 0; i < n; i++) lens[i] = lens[i] < 1 ? 1 : lens[i];
        const int64_t max_out = width + max_extra;
        double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        attn_status st = decode_batch(ctx, &m, &o, ref, src, lens, n, width, max_out, out, out_lens);
        seconds += clock_s(CLOCK_MONOTONIC) - t0;
        cpu_seconds += clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (st != ATTN_OK) return fail("decode");
        for (int64_t i = 0; i < n; i++) {
            tokens += out_lens[i];
            for (int64_t t = 0; out_file && t < out_lens[i]; t++)
                fprintf(out_file, "%s%lld", t ? " " : "", (long long)out[i * max_out + t]);
            if (out_file) fputc('\n', out_file);
        }
    }
    if (out_file && fclose(out_file)) return perror(o.out), 1;
    printf("{\"decoder\":\"%s\",\"beam\":%d,\"threads\":%d,\"sentences\":%lld,\"tokens\":%lld,"
           "\"seconds\":%.3f,\"cpu_seconds\":%.3f,\"sentences_per_s\":%.2f}\n",
           o.decoder, o.beam, o.threads, (long long)n_all, (long long)tokens, seconds, cpu_seconds, n_all / seconds);
    free(src);
    free(out);
    attn_ctx_free(ctx);
    attn_id_seqs_free(&ids);
    attn_text_pairs_free(&pairs);
    attn_vocab_free(sv);
    attn_seq2seq_free(&m);
    attn_params_free(p);
    return 0;
}
