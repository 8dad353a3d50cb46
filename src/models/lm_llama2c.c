/* llama2.c's checkpoint files for a LLAMA-style attn_lm (format in attn.h):
 *   v0 (run.c's): int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (negative: an
 *      output of its own), max_seq_len | float32 tok_embeddings, attention_norm x L, wq x L, wk x L,
 *      wv x L, wo x L, ffn_norm x L, w1 x L, w2 x L, w3 x L, norm, freq_cis real and imaginary
 *      (max_seq_len, head / 2) each, [output]
 *   v1 (export.py's version1_export): uint32 "ak42" magic, int32 1, the 7 ints (vocab positive),
 *      uint8 shared classifier, zeros to 256 bytes | float32 attention_norm x L, ffn_norm x L, norm,
 *      tok_embeddings, wq x L, wk x L, wv x L, wo x L, w1 x L, w2 x L, w3 x L, [output]
 * Weights are PyTorch's Linear (out, in), little-endian. llama2.c rotates the pairs (2i, 2i + 1) of
 * each head: a model of rotated halves has its wq and wk rows reordered into pairs on the way out
 * (q k^T is the same under one reordering of both), and a loaded model rotates pairs. */
#include "lm_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAGIC_V1 0x616b3432u /* "ak42" */
#define HEADER_V1 256
#define HEADER_V0 28 /* 7 int32 */
#define ROPE_BASE 10000.0f
#define NORM_EPS 1e-5f

/* How a piece's rows sit in the file: row r of the file is the model's row row_of(r) */
typedef enum piece_kind {
    PLAIN,   /* the same rows */
    TOKENS,  /* an embedding's rows in the file's token order */
    ROTARY,  /* wq, wk: each head's rows in pairs (2i, 2i + 1) from halves (i, i + head / 2) */
    FREQ_RE, /* v0's cos(pos theta_i) table (max_seq_len, head / 2): written, skipped on reading */
    FREQ_IM, /* and sin */
} piece_kind;

typedef struct piece {
    char what[48]; /* messages: "layers.3.attention.wq.weight" */
    float *data;   /* (rows, cols) in the model; NULL for the frequency tables */
    int64_t rows, cols;
    piece_kind kind;
} piece;

typedef struct lm_file {
    const attn_lm *m;
    const int64_t *token_order; /* (V): file token i is the model's token_order[i]; NULL: the same */
    piece *pieces;              /* (n) in file order */
    int n;
} lm_file;

static void add(lm_file *f, piece_kind kind, attn_tensor *t, int64_t rows, int64_t cols, const char *fmt, int layer)
{
    piece *p = &f->pieces[f->n++];
    *p = (piece){.data = t ? t->data : NULL, .rows = rows, .cols = cols, .kind = kind};
    snprintf(p->what, sizeof p->what, fmt, layer);
}

/* The pieces of m in the order of `version` (f->pieces holds 9 L + 6) */
static void layout(lm_file *f, int version)
{
    const attn_lm_config *c = &f->m->cfg;
    const int64_t L = c->num_layers, E = c->d_model, V = c->vocab_size, F = c->ffn_hidden;
    const int64_t Ekv = E / c->num_heads * c->num_kv_heads;
    attn_lm_block *b = f->m->blocks;
    f->n = 0;
    if (version == 0) add(f, TOKENS, f->m->wte, V, E, "tok_embeddings.weight", 0);
    for (int i = 0; i < L; i++) add(f, PLAIN, b[i].norm1.weight, 1, E, "layers.%d.attention_norm.weight", i);
    if (version == 1) {
        for (int i = 0; i < L; i++) add(f, PLAIN, b[i].norm2.weight, 1, E, "layers.%d.ffn_norm.weight", i);
        add(f, PLAIN, f->m->norm_f.weight, 1, E, "norm.weight", 0);
        add(f, TOKENS, f->m->wte, V, E, "tok_embeddings.weight", 0);
    }
    for (int i = 0; i < L; i++) add(f, ROTARY, b[i].attn.q_proj_weight, E, E, "layers.%d.attention.wq.weight", i);
    for (int i = 0; i < L; i++) add(f, ROTARY, b[i].attn.k_proj_weight, Ekv, E, "layers.%d.attention.wk.weight", i);
    for (int i = 0; i < L; i++) add(f, PLAIN, b[i].attn.v_proj_weight, Ekv, E, "layers.%d.attention.wv.weight", i);
    for (int i = 0; i < L; i++) add(f, PLAIN, b[i].attn.out_proj.weight, E, E, "layers.%d.attention.wo.weight", i);
    if (version == 0)
        for (int i = 0; i < L; i++) add(f, PLAIN, b[i].norm2.weight, 1, E, "layers.%d.ffn_norm.weight", i);
    for (int i = 0; i < L; i++) add(f, PLAIN, b[i].w_in.weight, F, E, "layers.%d.feed_forward.w1.weight", i);
    for (int i = 0; i < L; i++) add(f, PLAIN, b[i].w_out.weight, E, F, "layers.%d.feed_forward.w2.weight", i);
    for (int i = 0; i < L; i++) add(f, PLAIN, b[i].w_up.weight, F, E, "layers.%d.feed_forward.w3.weight", i);
    if (version == 0) {
        add(f, PLAIN, f->m->norm_f.weight, 1, E, "norm.weight", 0);
        const int64_t half = E / c->num_heads / 2;
        add(f, FREQ_RE, NULL, c->context, half, "freq_cis_real", 0);
        add(f, FREQ_IM, NULL, c->context, half, "freq_cis_imag", 0);
    }
    if (c->untied) add(f, TOKENS, f->m->output, V, E, "output.weight", 0);
}

/* The model's row for the file's row r of p */
static int64_t row_of(const lm_file *f, const piece *p, int64_t r)
{
    if (p->kind == TOKENS) return f->token_order ? f->token_order[r] : r;
    if (p->kind != ROTARY || f->m->cfg.rope_interleaved) return r;
    const int64_t head = f->m->cfg.d_model / f->m->cfg.num_heads, h = r / head, i = r % head;
    return h * head + (i % 2 ? head / 2 : 0) + i / 2;
}

/* v0's frequency tables as llama2.c's model.py makes them: theta_i = base^(-2i / head) */
static void freq_row(const lm_file *f, const piece *p, int64_t pos, float *out)
{
    const double head = (double)(2 * p->cols);
    for (int64_t i = 0; i < p->cols; i++) {
        const float theta = (float)(1.0 / pow(ROPE_BASE, (double)(2 * i) / head)), angle = (float)pos * theta;
        out[i] = p->kind == FREQ_RE ? cosf(angle) : sinf(angle);
    }
    (void)f;
}

static bool host_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static void swap_floats(float *x, int64_t n) /* little-endian <-> host on a big-endian host */
{
    if (host_little_endian()) return;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u = __builtin_bswap32(u);
        memcpy(&x[i], &u, 4);
    }
}

/* token_order (V entries) must be a permutation of [0, V) */
static attn_status check_order(const int64_t *order, int64_t V, const char *who)
{
    if (!order) return ATTN_OK;
    unsigned char *seen = calloc((size_t)V, 1);
    if (!seen) return attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", who);
    int64_t bad = -1;
    for (int64_t i = 0; i < V && bad < 0; i++) {
        if (order[i] < 0 || order[i] >= V || seen[order[i]])
            bad = i;
        else
            seen[order[i]] = 1;
    }
    free(seen);
    if (bad >= 0)
        return attn__fail(ATTN_ERR_ARG, "%s: token_order[%lld] = %lld; expected a permutation of 0..%lld", who,
                          (long long)bad, (long long)order[bad], (long long)V - 1);
    return ATTN_OK;
}

static attn_status check_exportable(const attn_lm *m)
{
    const attn_lm_config *c = &m->cfg;
    const char *bad = NULL;
    if (c->style != ATTN_LM_LLAMA)
        bad = "llama2.c holds LLAMA-style models (a GPT2 model goes to llm.c's format)";
    else if (c->rope_base != ROPE_BASE)
        bad = "llama2.c's run.c rotates with base 10000 alone";
    else if (c->norm_eps != NORM_EPS)
        bad = "llama2.c's run.c normalises with eps 1e-5 alone";
    else if (c->vocab_size > INT32_MAX || c->context > INT32_MAX || c->d_model > INT32_MAX || c->ffn_hidden > INT32_MAX)
        bad = "a size is past llama2.c's int32 header";
    if (bad) return attn__fail(ATTN_ERR_ARG, "lm_save_llama2c: %s", bad);
    return ATTN_OK;
}

attn_status attn_lm_save_llama2c(const attn_lm *m, const char *path, int version, const int64_t *token_order)
{
    if (!m || !path || !m->blocks) return attn__fail(ATTN_ERR_ARG, "lm_save_llama2c: NULL argument");
    if (version != 0 && version != 1)
        return attn__fail(ATTN_ERR_ARG, "lm_save_llama2c: version %d; expected 0 (run.c's) or 1", version);
    if (check_exportable(m) != ATTN_OK || check_order(token_order, m->cfg.vocab_size, "lm_save_llama2c") != ATTN_OK)
        return attn_last_status();
    const attn_lm_config *c = &m->cfg;
    lm_file f = {.m = m, .token_order = token_order, .pieces = calloc((size_t)(9 * c->num_layers + 6), sizeof(piece))};
    float *row = malloc(sizeof(float) * (size_t)(c->d_model > c->ffn_hidden ? c->d_model : c->ffn_hidden));
    if (!f.pieces || !row) {
        free(f.pieces), free(row);
        return attn__fail(ATTN_ERR_NOMEM, "lm_save_llama2c: out of memory");
    }
    layout(&f, version);
    unsigned char header[HEADER_V1] = {0};
    const int32_t ints[7] = {
        (int32_t)c->d_model,      (int32_t)c->ffn_hidden,
        (int32_t)c->num_layers,   (int32_t)c->num_heads,
        (int32_t)c->num_kv_heads, (int32_t)(version == 0 && c->untied ? -c->vocab_size : c->vocab_size),
        (int32_t)c->context};
    size_t at = 0;
    if (version == 1) attn__put_le32(header, MAGIC_V1), attn__put_le32(header + 4, 1), at = 8;
    for (int i = 0; i < 7; i++) attn__put_le32(header + at + 4 * i, (uint32_t)ints[i]);
    if (version == 1) header[at + 28] = !c->untied;

    attn__outfile out;
    attn_status st = attn__outfile_open(&out, path);
    if (st != ATTN_OK) {
        free(f.pieces), free(row);
        return st;
    }
    if (fwrite(header, 1, version ? HEADER_V1 : HEADER_V0, out.fp) != (version ? HEADER_V1 : HEADER_V0))
        st = attn__outfile_write_error(&out, errno);
    for (int k = 0; k < f.n && st == ATTN_OK; k++) {
        const piece *p = &f.pieces[k];
        for (int64_t r = 0; r < p->rows && st == ATTN_OK; r++) {
            if (p->data)
                memcpy(row, p->data + row_of(&f, p, r) * p->cols, sizeof(float) * (size_t)p->cols);
            else
                freq_row(&f, p, r, row);
            swap_floats(row, p->cols);
            if (fwrite(row, sizeof(float), (size_t)p->cols, out.fp) != (size_t)p->cols)
                st = attn__outfile_write_error(&out, errno);
        }
    }
    st = attn__outfile_close(&out, st);
    free(f.pieces);
    free(row);
    return st;
}

/* ---- reading ---- */

/* The config a header gives, checked against the file's size (before anything is allocated) */
static attn_status read_header(FILE *fp, const char *path, int64_t file_bytes, attn_lm_config *c, int *version)
{
    unsigned char h[HEADER_V1] = {0};
    const size_t got = fread(h, 1, sizeof h, fp);
    if (got < HEADER_V0)
        return attn__fail(ATTN_ERR_FORMAT, "%s: %zu bytes; a llama2.c checkpoint starts with a header of 28 or 256",
                          path, got);
    size_t at = 0;
    *version = 0;
    if (attn__le32(h) == MAGIC_V1) {
        if (got < HEADER_V1)
            return attn__fail(ATTN_ERR_FORMAT, "%s: a version 1 header is 256 bytes; the file has %zu", path, got);
        const int32_t v = (int32_t)attn__le32(h + 4);
        if (v != 1)
            return attn__fail(ATTN_ERR_FORMAT, "%s: llama2.c version %d; expected 0 or 1 (float32)", path, (int)v);
        *version = 1, at = 8;
    }
    int64_t x[7];
    for (int i = 0; i < 7; i++) x[i] = (int32_t)attn__le32(h + at + 4 * i);
    const bool shared = *version == 1 ? h[at + 28] != 0 : x[5] > 0;
    if (*version == 0 && x[5] < 0) x[5] = -x[5];
    static const char *const names[7] = {"dim",        "hidden_dim", "n_layers",   "n_heads",
                                         "n_kv_heads", "vocab_size", "max_seq_len"};
    for (int i = 0; i < 7; i++)
        if (x[i] < 1)
            return attn__fail(ATTN_ERR_FORMAT, "%s: header %s = %lld; expected >= 1", path, names[i], (long long)x[i]);
    if (x[0] % x[3] || x[3] % x[4] || (x[0] / x[3]) % 2)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: header dim %lld, n_heads %lld, n_kv_heads %lld; expected n_heads dividing dim into "
                          "even heads, n_kv_heads dividing n_heads",
                          path, (long long)x[0], (long long)x[3], (long long)x[4]);
    *c = (attn_lm_config){.style = ATTN_LM_LLAMA,
                          .d_model = x[0],
                          .ffn_hidden = x[1],
                          .num_layers = x[2],
                          .num_heads = x[3],
                          .num_kv_heads = x[4],
                          .vocab_size = x[5],
                          .context = x[6],
                          .norm_eps = NORM_EPS,
                          .rope_base = ROPE_BASE,
                          .rope_interleaved = true,
                          .untied = !shared};
    const __int128 E = x[0], F = x[1], L = x[2], V = x[5], T = x[6], Ekv = x[0] / x[3] * x[4];
    __int128 floats = V * E + L * (2 * E + 2 * E * E + 2 * E * Ekv + 3 * E * F) + E + (shared ? 0 : V * E);
    if (*version == 0) floats += T * (E / x[3]); /* the two frequency tables */
    const __int128 want = floats * 4 + (*version ? HEADER_V1 : HEADER_V0);
    if (want != file_bytes)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: the header (dim %lld, hidden_dim %lld, n_layers %lld, n_heads %lld, n_kv_heads %lld, "
                          "vocab_size %lld%s, max_seq_len %lld) needs %.0f bytes; the file has %lld",
                          path, (long long)x[0], (long long)x[1], (long long)x[2], (long long)x[3], (long long)x[4],
                          (long long)x[5], shared ? "" : ", an output of its own", (long long)x[6], (double)want,
                          (long long)file_bytes);
    return fseek(fp, *version ? HEADER_V1 : HEADER_V0, SEEK_SET) == 0
               ? ATTN_OK
               : attn__fail(ATTN_ERR_IO, "%s: %s", path, strerror(errno));
}

static attn_status read_pieces(FILE *fp, const char *path, const lm_file *f)
{
    for (int k = 0; k < f->n; k++) {
        const piece *p = &f->pieces[k];
        if (!p->data) { /* the frequency tables: llama2.c's run.c skips them too */
            if (fseek(fp, (long)(sizeof(float) * (size_t)(p->rows * p->cols)), SEEK_CUR) != 0)
                return attn__fail(ATTN_ERR_IO, "%s: %s", path, strerror(errno));
            continue;
        }
        for (int64_t r = 0; r < p->rows; r++) {
            float *dst = p->data + row_of(f, p, r) * p->cols;
            if (fread(dst, sizeof(float), (size_t)p->cols, fp) != (size_t)p->cols)
                return attn__fail(ATTN_ERR_FORMAT, "%s: ends inside %s", path, p->what);
            swap_floats(dst, p->cols);
        }
        if (!attn__all_finite(p->data, p->rows * p->cols)) {
            int64_t i = 0;
            while (isfinite(p->data[i])) i++;
            return attn__fail_nonfinite(path, p->what, p->data[i], 2, (int64_t[]){p->rows, p->cols}, i);
        }
    }
    return ATTN_OK;
}

static attn_status load(attn_lm *m, attn_params *p, const char *path, const int64_t *token_order, FILE *fp)
{
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0) return attn__fail(ATTN_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return attn__fail(ATTN_ERR_IO, "%s: not a regular file", path);
    attn_lm_config c;
    int version = 0;
    if (read_header(fp, path, (int64_t)sb.st_size, &c, &version) != ATTN_OK) return attn_last_status();
    if (check_order(token_order, c.vocab_size, "lm_load_llama2c") != ATTN_OK) return attn_last_status();
    if (attn_lm_init(m, p, &c, NULL) != ATTN_OK) return attn_last_status();
    lm_file f = {.m = m, .token_order = token_order, .pieces = calloc((size_t)(9 * c.num_layers + 6), sizeof(piece))};
    if (!f.pieces) return attn__fail(ATTN_ERR_NOMEM, "lm_load_llama2c: out of memory");
    layout(&f, version);
    attn_status st = read_pieces(fp, path, &f);
    free(f.pieces);
    return st;
}

attn_status attn_lm_load_llama2c(attn_lm *m, attn_params *p, const char *path, const int64_t *token_order)
{
    if (m) memset(m, 0, sizeof *m);
    if (!m || !p || !path) return attn__fail(ATTN_ERR_ARG, "lm_load_llama2c: NULL argument");
    FILE *fp = fopen(path, "rb");
    if (!fp) return attn__fail(ATTN_ERR_IO, "%s: %s", path, strerror(errno));
    const size_t n0 = attn_params_count(p);
    attn_status st = attn__params_settle(p, n0, load(m, p, path, token_order, fp));
    fclose(fp);
    if (st != ATTN_OK) attn_lm_free(m);
    return st;
}
