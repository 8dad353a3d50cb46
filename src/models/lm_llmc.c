/* llm.c's files for a GPT2-style attn_lm (format in attn.h): the version 3 checkpoint that its
 * train_gpt2.c and test_gpt2.c read (a 256-int32 header, then the parameters in one order, the
 * embedding padded to padded_vocab_size rows), and test_gpt2.c's debug state (a batch, its logits,
 * its loss and every gradient, laid out as the parameters). Little-endian. */
#include "lm_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MODEL_MAGIC 20240326
#define MODEL_VERSION 3 /* float32 (5 is bf16) */
#define STATE_MAGIC 20240327
#define STATE_VERSION 2
#define HEADER_INTS 256
#define PAD_VOCAB 128 /* llm.c pads the vocabulary to a multiple of 128 */
#define NORM_EPS 1e-5f

/* One tensor of the layout: rows x cols floats of t (its data, or its grad), or zeros (t NULL:
 * the embedding's padded rows, skipped on reading but for a finite check) */
typedef struct piece {
    const char *what;
    attn_tensor *t;
    int64_t rows, cols;
} piece;

/* The pieces of m in llm.c's order (16 kinds, each over the layers), malloc'd, *n of them (NULL and
 * ATTN_ERR_NOMEM when memory runs out) */
static piece *layout(const attn_lm *m, int64_t padded_vocab, int *count)
{
    piece *p = malloc(sizeof *p * (size_t)(12 * m->cfg.num_layers + 5));
    if (!p) return attn__fail_null(ATTN_ERR_NOMEM, "llm.c's layout: out of memory");
    const int64_t L = m->cfg.num_layers, C = m->cfg.d_model, V = m->cfg.vocab_size;
    int n = 0;
    p[n++] = (piece){"wte", m->wte, V, C};
    p[n++] = (piece){"wte's padded rows", NULL, padded_vocab - V, C};
    p[n++] = (piece){"wpe", m->wpe, m->cfg.context, C};
    const attn_lm_block *b = m->blocks;
#define EACH(name, field, rows, cols)                                                                                  \
    for (int64_t i = 0; i < L; i++) p[n++] = (piece){name, b[i].field, rows, cols}
    EACH("ln1w", norm1.weight, 1, C);
    EACH("ln1b", norm1.bias, 1, C);
    EACH("qkvw", attn.in_proj_weight, 3 * C, C);
    EACH("qkvb", attn.in_proj_bias, 1, 3 * C);
    EACH("attprojw", attn.out_proj.weight, C, C);
    EACH("attprojb", attn.out_proj.bias, 1, C);
    EACH("ln2w", norm2.weight, 1, C);
    EACH("ln2b", norm2.bias, 1, C);
    EACH("fcw", w_in.weight, 4 * C, C);
    EACH("fcb", w_in.bias, 1, 4 * C);
    EACH("fcprojw", w_out.weight, C, 4 * C);
    EACH("fcprojb", w_out.bias, 1, C);
#undef EACH
    p[n++] = (piece){"lnfw", m->norm_f.weight, 1, C};
    p[n++] = (piece){"lnfb", m->norm_f.bias, 1, C};
    *count = n;
    return p;
}

static int64_t padded(int64_t V)
{
    return (V + PAD_VOCAB - 1) / PAD_VOCAB * PAD_VOCAB;
}

/* n floats little-endian (x NULL: zeros); 0 or errno */
static int write_floats(FILE *fp, const float *x, int64_t n)
{
    unsigned char buf[4096];
    for (int64_t at = 0; at < n;) {
        const int64_t k = n - at < 1024 ? n - at : 1024;
        for (int64_t i = 0; i < k; i++) {
            uint32_t u = 0;
            if (x) memcpy(&u, &x[at + i], 4);
            attn__put_le32(buf + 4 * i, u);
        }
        if (fwrite(buf, 4, (size_t)k, fp) != (size_t)k) return errno ? errno : EIO;
        at += k;
    }
    return 0;
}

/* The parameters (or their gradients) in llm.c's order; 0 or errno */
static int write_pieces(FILE *fp, const attn_lm *m, bool grads)
{
    int n;
    piece *p = layout(m, padded(m->cfg.vocab_size), &n);
    int err = p ? 0 : ENOMEM;
    for (int k = 0; p && k < n && !err; k++) {
        const float *x = !p[k].t ? NULL : grads ? p[k].t->grad : p[k].t->data;
        err = write_floats(fp, x, p[k].rows * p[k].cols);
    }
    free(p);
    return err;
}

static attn_status check_exportable(const attn_lm *m, const char *who)
{
    const attn_lm_config *c = &m->cfg;
    const char *bad = NULL;
    if (c->style != ATTN_LM_GPT2)
        bad = "llm.c holds GPT2-style models (a LLAMA model goes to llama2.c's format)";
    else if (c->norm_eps != NORM_EPS)
        bad = "llm.c normalises with eps 1e-5 alone";
    else if (c->ffn_hidden != 4 * c->d_model)
        bad = "llm.c's feed-forward width is 4 d_model";
    else if (padded(c->vocab_size) > INT32_MAX || c->context > INT32_MAX || c->d_model > INT32_MAX)
        bad = "a size is past llm.c's int32 header";
    if (bad) return attn__fail(ATTN_ERR_ARG, "%s: %s", who, bad);
    return ATTN_OK;
}

attn_status attn_lm_save_llmc(const attn_lm *m, const char *path)
{
    if (!m || !path || !m->blocks) return attn__fail(ATTN_ERR_ARG, "lm_save_llmc: NULL argument");
    if (check_exportable(m, "lm_save_llmc") != ATTN_OK) return attn_last_status();
    const attn_lm_config *c = &m->cfg;
    unsigned char h[4 * HEADER_INTS] = {0};
    const int32_t ints[8] = {MODEL_MAGIC,
                             MODEL_VERSION,
                             (int32_t)c->context,
                             (int32_t)c->vocab_size,
                             (int32_t)c->num_layers,
                             (int32_t)c->num_heads,
                             (int32_t)c->d_model,
                             (int32_t)padded(c->vocab_size)};
    for (int i = 0; i < 8; i++) attn__put_le32(h + 4 * i, (uint32_t)ints[i]);
    attn__outfile out;
    attn_status st = attn__outfile_open(&out, path);
    if (st != ATTN_OK) return st;
    int err = fwrite(h, 1, sizeof h, out.fp) == sizeof h ? 0 : errno;
    if (!err) err = write_pieces(out.fp, m, false);
    return attn__outfile_close(&out, err ? attn__outfile_write_error(&out, err) : ATTN_OK);
}

attn_status attn_lm_save_llmc_state(const attn_lm *m, const char *path, const int64_t *x, const int64_t *y, int64_t B,
                                    int64_t T, const float *logits, float loss)
{
    if (!m || !path || !m->blocks || !x || !y || !logits)
        return attn__fail(ATTN_ERR_ARG, "lm_save_llmc_state: NULL argument");
    if (check_exportable(m, "lm_save_llmc_state") != ATTN_OK) return attn_last_status();
    if (B < 1 || T < 1 || T > m->cfg.context || B > INT32_MAX / T)
        return attn__fail(ATTN_ERR_ARG, "lm_save_llmc_state: B %lld, T %lld; expected B >= 1 and 1 <= T <= %lld",
                          (long long)B, (long long)T, (long long)m->cfg.context);
    int n;
    piece *p = layout(m, padded(m->cfg.vocab_size), &n);
    if (!p) return attn_last_status();
    const piece *bare = NULL;
    for (int k = 0; k < n && !bare; k++)
        if (p[k].t && !p[k].t->grad) bare = &p[k];
    if (bare) {
        attn__fail(ATTN_ERR_STATE, "lm_save_llmc_state: %s has no gradient (run the backward first)", bare->what);
        free(p);
        return ATTN_ERR_STATE;
    }
    free(p);
    unsigned char h[4 * HEADER_INTS] = {0};
    attn__put_le32(h, (uint32_t)STATE_MAGIC), attn__put_le32(h + 4, (uint32_t)STATE_VERSION),
        attn__put_le32(h + 8, (uint32_t)(int32_t)B), attn__put_le32(h + 12, (uint32_t)(int32_t)T);
    attn__outfile out;
    attn_status st = attn__outfile_open(&out, path);
    if (st != ATTN_OK) return st;
    int err = fwrite(h, 1, sizeof h, out.fp) == sizeof h ? 0 : errno;
    for (int k = 0; k < 2 && !err; k++) {
        const int64_t *ids = k ? y : x;
        for (int64_t i = 0; i < B * T && !err; i++) {
            unsigned char b[4];
            attn__put_le32(b, (uint32_t)(int32_t)ids[i]);
            if (fwrite(b, 1, 4, out.fp) != 4) err = errno ? errno : EIO;
        }
    }
    if (!err) err = write_floats(out.fp, logits, B * T * m->cfg.vocab_size);
    if (!err) err = write_floats(out.fp, &loss, 1);
    if (!err) err = write_pieces(out.fp, m, true);
    return attn__outfile_close(&out, err ? attn__outfile_write_error(&out, err) : ATTN_OK);
}

/* ---- reading ---- */

static attn_status read_header(FILE *fp, const char *path, int64_t file_bytes, attn_lm_config *c, int64_t *vp)
{
    unsigned char h[4 * HEADER_INTS];
    if (fread(h, 1, sizeof h, fp) != sizeof h)
        return attn__fail(ATTN_ERR_FORMAT, "%s: %lld bytes; an llm.c checkpoint starts with a header of 1024", path,
                          (long long)file_bytes);
    if ((int32_t)attn__le32(h) != MODEL_MAGIC)
        return attn__fail(ATTN_ERR_FORMAT, "%s: magic %d; an llm.c GPT-2 checkpoint's is %d", path,
                          (int32_t)attn__le32(h), MODEL_MAGIC);
    if ((int32_t)attn__le32(h + 4) != MODEL_VERSION)
        return attn__fail(ATTN_ERR_FORMAT, "%s: llm.c version %d; expected 3 (float32; 5, bf16, is not read)", path,
                          (int32_t)attn__le32(h + 4));
    int64_t x[6];
    static const char *const names[6] = {"max_seq_len", "vocab_size", "num_layers",
                                         "num_heads",   "channels",   "padded_vocab_size"};
    for (int i = 0; i < 6; i++) {
        x[i] = (int32_t)attn__le32(h + 8 + 4 * i);
        if (x[i] < 1)
            return attn__fail(ATTN_ERR_FORMAT, "%s: header %s = %lld; expected >= 1", path, names[i], (long long)x[i]);
    }
    if (x[5] < x[1] || x[4] % x[3])
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: header vocab_size %lld, padded_vocab_size %lld, channels %lld, num_heads %lld; expected "
                          "a padded size >= the vocabulary and heads dividing the channels",
                          path, (long long)x[1], (long long)x[5], (long long)x[4], (long long)x[3]);
    const __int128 T = x[0], L = x[2], C = x[4], Vp = x[5];
    const __int128 want = 4 * (HEADER_INTS + Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C);
    if (want != file_bytes)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: the header (max_seq_len %lld, vocab_size %lld, num_layers %lld, num_heads %lld, "
                          "channels %lld, padded_vocab_size %lld) needs %.0f bytes; the file has %lld",
                          path, (long long)x[0], (long long)x[1], (long long)x[2], (long long)x[3], (long long)x[4],
                          (long long)x[5], (double)want, (long long)file_bytes);
    *c = (attn_lm_config){.style = ATTN_LM_GPT2,
                          .context = x[0],
                          .vocab_size = x[1],
                          .num_layers = x[2],
                          .num_heads = x[3],
                          .d_model = x[4],
                          .ffn_hidden = 4 * x[4],
                          .norm_eps = NORM_EPS};
    *vp = x[5];
    return ATTN_OK;
}

static attn_status read_pieces(FILE *fp, const char *path, const attn_lm *m, int64_t vp)
{
    int n;
    piece *p = layout(m, vp, &n);
    if (!p) return attn_last_status();
    attn_status st = ATTN_OK;
    float scratch[1024];
    for (int k = 0; k < n && st == ATTN_OK; k++) {
        const int64_t count = p[k].rows * p[k].cols;
        for (int64_t at = 0; at < count && st == ATTN_OK;) {
            const int64_t chunk = count - at < 1024 ? count - at : 1024;
            float *dst = p[k].t ? p[k].t->data + at : scratch;
            unsigned char buf[4096];
            if (fread(buf, 4, (size_t)chunk, fp) != (size_t)chunk) {
                st = attn__fail(ATTN_ERR_FORMAT, "%s: ends inside %s", path, p[k].what);
                break;
            }
            for (int64_t i = 0; i < chunk && st == ATTN_OK; i++) {
                const uint32_t u = attn__le32(buf + 4 * i);
                memcpy(&dst[i], &u, 4);
                if (!isfinite(dst[i]))
                    st = attn__fail_nonfinite(path, p[k].what, dst[i], 2, (int64_t[]){p[k].rows, p[k].cols}, at + i);
            }
            at += chunk;
        }
    }
    free(p);
    return st;
}

static attn_status load(attn_lm *m, attn_params *p, const char *path, FILE *fp)
{
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0) return attn__fail(ATTN_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return attn__fail(ATTN_ERR_IO, "%s: not a regular file", path);
    attn_lm_config c;
    int64_t vp = 0;
    if (read_header(fp, path, (int64_t)sb.st_size, &c, &vp) != ATTN_OK) return attn_last_status();
    if (attn_lm_init(m, p, &c, NULL) != ATTN_OK) return attn_last_status();
    return read_pieces(fp, path, m, vp);
}

attn_status attn_lm_load_llmc(attn_lm *m, attn_params *p, const char *path)
{
    if (m) memset(m, 0, sizeof *m);
    if (!m || !p || !path) return attn__fail(ATTN_ERR_ARG, "lm_load_llmc: NULL argument");
    FILE *fp = fopen(path, "rb");
    if (!fp) return attn__fail(ATTN_ERR_IO, "%s: %s", path, strerror(errno));
    const size_t n0 = attn_params_count(p);
    attn_status st = attn__params_settle(p, n0, load(m, p, path, fp));
    fclose(fp);
    if (st != ATTN_OK) attn_lm_free(m);
    return st;
}
