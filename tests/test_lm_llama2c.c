/* llama2.c's checkpoints (attn_lm_save_llama2c, attn_lm_load_llama2c):
 *   - a model of llama2.c's pairs (GQA, untied; and tied) saved as version 0 and 1 loads back with
 *     every parameter bit for bit and the same config; the header's ints, the shared-classifier
 *     sign (v0) or byte (v1) and the file's size are llama2.c's;
 *   - a model of rotated halves saved and loaded (now rotating pairs) gives the same logits, up to
 *     the rounding of the head sums taken in another order (test_golden_lm's bound on both sides),
 *     its wq and wk rows reordered into pairs and nothing else changed;
 *   - a token order moves the embedding's and the output's rows, and the same order loads them back;
 *   - refusals, each naming what, with the registry and the output file as they were: a GPT2 model,
 *     another rotary base or eps, version 2, an order that is no permutation, a missing folder; on
 *     loading, files cut at several places, headers whose sizes do not give the file's size or that
 *     are not a model, a NaN weight, version 2, a folder, a missing file.
 *   - golden files (tests/golden/make_golden_lm_files.py: version 0 GQA untied, version 1 tied, laid
 *     out from llama2.c's export.py, the logits of make_golden_lm.py's composition of llama2.c's
 *     model in float64) load and give torch's logits within test_golden_lm's bound (one side). */
#include "testkit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

typedef struct model {
    attn_params *p;
    attn_lm m;
} model;

static attn_lm_config llama(int64_t kv_heads, bool untied, bool interleaved)
{
    return (attn_lm_config){.style = ATTN_LM_LLAMA,
                            .vocab_size = 37,
                            .context = 16,
                            .d_model = 24,
                            .num_layers = 2,
                            .num_heads = 4,
                            .num_kv_heads = kv_heads,
                            .untied = untied,
                            .rope_interleaved = interleaved};
}

/* A model of c with N(0, 0.2) weights and norms of 1 + N(0, 0.1), so that every tensor differs */
static bool make(model *o, const attn_lm_config *c, uint64_t seed)
{
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    o->p = attn_params_new();
    attn_status st = attn_lm_init(&o->m, o->p, c, &rng);
    TK_CHECK(st == ATTN_OK, "init: %s", attn_last_error());
    for (size_t i = 0; st == ATTN_OK && i < attn_params_count(o->p); i++) {
        attn_tensor *t = attn_params_at(o->p, i);
        const bool norm = t->ndim == 1;
        attn_tensor_fill_normal(t, &rng, norm ? 1.0f : 0.0f, norm ? 0.1f : 0.2f);
    }
    return st == ATTN_OK;
}

static void drop(model *o)
{
    attn_lm_free(&o->m);
    attn_params_free(o->p);
    o->p = NULL;
}

static char *path_of(const char *name)
{
    static char buf[4][128];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

static unsigned char *slurp(const char *path, long *n)
{
    size_t len = 0;
    unsigned char *b = (unsigned char *)tk_read_bytes(path, &len);
    *n = (long)len;
    return b;
}

static void spill(const char *path, const unsigned char *b, long n)
{
    TK_CHECK(tk_write_bytes(path, b, (size_t)n), "write %s", path);
}

/* Every parameter of a is in b, bit for bit */
static void same_params(const model *a, const model *b, const char *what)
{
    TK_CHECK(attn_params_count(a->p) == attn_params_count(b->p), "%s: %zu parameters, loaded %zu", what,
             attn_params_count(a->p), attn_params_count(b->p));
    for (size_t i = 0; i < attn_params_count(a->p); i++) {
        const char *name = attn_params_name(a->p, i);
        const attn_tensor *x = attn_params_at(a->p, i), *y = attn_params_get(b->p, name);
        TK_CHECK(y && y->numel == x->numel && !memcmp(x->data, y->data, sizeof(float) * (size_t)x->numel),
                 "%s: %s bit for bit", what, name);
    }
}

static float *logits_of(const model *o, const int64_t *ids, int64_t n)
{
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *y = attn_lm_forward(ctx, &o->m, ids, (int64_t[]){0, n}, 1);
    float *out = y ? malloc(sizeof(float) * (size_t)y->numel) : NULL;
    if (out) memcpy(out, y->data, sizeof(float) * (size_t)y->numel);
    TK_CHECK(out != NULL, "forward: %s", attn_last_error());
    attn_ctx_free(ctx);
    return out;
}

static void test_round_trips(void)
{
    static const struct {
        const char *what;
        int64_t kv_heads;
        bool untied;
    } cases[] = {{"GQA, untied", 2, true}, {"tied", 0, false}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (int version = 0; version <= 1; version++) {
            char what[96];
            snprintf(what, sizeof what, "%s, version %d", cases[k].what, version);
            attn_lm_config c = llama(cases[k].kv_heads, cases[k].untied, true);
            model a, b;
            if (!make(&a, &c, 10 + k)) return;
            const char *path = path_of("rt.bin");
            attn_status st = attn_lm_save_llama2c(&a.m, path, version, NULL);
            TK_CHECK(st == ATTN_OK, "%s: save: %s", what, attn_last_error());
            b.p = attn_params_new();
            st = attn_lm_load_llama2c(&b.m, b.p, path, NULL);
            TK_CHECK(st == ATTN_OK, "%s: load: %s", what, attn_last_error());
            if (st == ATTN_OK) {
                same_params(&a, &b, what);
                const attn_lm_config *x = &a.m.cfg, *y = &b.m.cfg;
                TK_CHECK(y->vocab_size == x->vocab_size && y->context == x->context && y->d_model == x->d_model &&
                             y->num_layers == x->num_layers && y->num_heads == x->num_heads &&
                             y->num_kv_heads == x->num_kv_heads && y->ffn_hidden == x->ffn_hidden &&
                             y->untied == x->untied && y->rope_interleaved && y->rope_base == 10000.0f &&
                             y->norm_eps == 1e-5f,
                         "%s: the loaded config", what);
            }
            long n = 0;
            unsigned char *bytes = slurp(path, &n);
            const long at = version ? 8 : 0, E = 24, L = 2, V = 37, T = 16;
            if (bytes) {
                const int32_t want[7] = {24, (int32_t)a.m.cfg.ffn_hidden,   2,
                                         4,  (int32_t)a.m.cfg.num_kv_heads, version == 0 && c.untied ? -37 : 37,
                                         16};
                bool ints = true;
                for (int i = 0; i < 7; i++) ints = ints && tk_le32_at(bytes, at + 4 * i) == want[i];
                TK_CHECK(ints, "%s: the header's 7 ints (vocab_size %d)", what, tk_le32_at(bytes, at + 20));
                if (version == 1)
                    TK_CHECK(tk_le32_at(bytes, 0) == 0x616b3432 && tk_le32_at(bytes, 4) == 1 && bytes[36] == !c.untied,
                             "%s: magic, version and shared-classifier byte", what);
                const long kv = E / 4 * a.m.cfg.num_kv_heads, Fh = a.m.cfg.ffn_hidden;
                const long floats = V * E * (c.untied ? 2 : 1) + L * (2 * E + 2 * E * E + 2 * E * kv + 3 * E * Fh) + E +
                                    (version ? 0 : T * (E / 4));
                TK_CHECK(n == floats * 4 + (version ? 256 : 28), "%s: %ld bytes, expected %ld", what, n,
                         floats * 4 + (version ? 256 : 28));
            }
            free(bytes);
            drop(&a), drop(&b);
            remove(path);
        }
}

/* Halves saved, pairs loaded: the same model */
static void test_halves(void)
{
    attn_lm_config c = llama(2, true, false);
    model a, b;
    if (!make(&a, &c, 21)) return;
    const char *path = path_of("halves.bin");
    TK_CHECK(attn_lm_save_llama2c(&a.m, path, 0, NULL) == ATTN_OK, "halves: save: %s", attn_last_error());
    b.p = attn_params_new();
    if (attn_lm_load_llama2c(&b.m, b.p, path, NULL) != ATTN_OK) {
        TK_CHECK(false, "halves: load: %s", attn_last_error());
        drop(&a), drop(&b);
        return;
    }
    const int64_t head = 6;
    bool rows = true, rest = true;
    for (size_t i = 0; i < attn_params_count(a.p); i++) {
        const char *name = attn_params_name(a.p, i);
        const attn_tensor *x = attn_params_at(a.p, i), *y = attn_params_get(b.p, name);
        if (!y || y->numel != x->numel) {
            rest = false;
            continue;
        }
        if (!strstr(name, ".wq.") && !strstr(name, ".wk.")) {
            rest = rest && !memcmp(x->data, y->data, sizeof(float) * (size_t)x->numel);
            continue;
        }
        const int64_t E = x->shape[1];
        for (int64_t r = 0; r < x->shape[0]; r++) { /* pair row 2i and 2i + 1 of a head: halves row i, i + 3 */
            const int64_t h = r / head, k = r % head, from = h * head + (k % 2 ? head / 2 : 0) + k / 2;
            rows = rows && !memcmp(y->data + r * E, x->data + from * E, sizeof(float) * (size_t)E);
        }
    }
    TK_CHECK(rows, "halves: wq and wk rows in llama2.c's pairs");
    TK_CHECK(rest, "halves: every other parameter bit for bit");
    const int64_t ids[12] = {1, 5, 9, 36, 0, 17, 17, 2, 30, 8, 11, 4};
    float *ya = logits_of(&a, ids, 12), *yb = logits_of(&b, ids, 12);
    /* both sides float32: test_golden_lm's roundings on the longest path, twice */
    const double n = 2.0 * 2 * (3.0 * 24 + (double)a.m.cfg.ffn_hidden + 2.0 * 12) + 2.0 * 24;
    if (ya && yb) tk_close_scaled("halves: logits before and after", yb, ya, 12 * 37, tk_tol_of(2, n, 4, 8));
    free(ya), free(yb);
    drop(&a), drop(&b);
    remove(path);
}

static void test_token_order(void)
{
    attn_lm_config c = llama(0, true, true);
    model a, b, d;
    if (!make(&a, &c, 31)) return;
    int64_t order[37];
    for (int i = 0; i < 37; i++) order[i] = (i * 10 + 3) % 37; /* 10 is prime to 37: a permutation */
    const char *path = path_of("order.bin");
    TK_CHECK(attn_lm_save_llama2c(&a.m, path, 1, order) == ATTN_OK, "order: save: %s", attn_last_error());
    b.p = attn_params_new(), d.p = attn_params_new();
    TK_CHECK(attn_lm_load_llama2c(&b.m, b.p, path, order) == ATTN_OK, "order: load with it: %s", attn_last_error());
    same_params(&a, &b, "the same order back");
    TK_CHECK(attn_lm_load_llama2c(&d.m, d.p, path, NULL) == ATTN_OK, "order: load as the file's ids: %s",
             attn_last_error());
    bool moved = d.m.wte && d.m.output;
    for (int i = 0; moved && i < 37; i++)
        moved = !memcmp(d.m.wte->data + i * 24, a.m.wte->data + order[i] * 24, 24 * sizeof(float)) &&
                !memcmp(d.m.output->data + i * 24, a.m.output->data + order[i] * 24, 24 * sizeof(float));
    TK_CHECK(moved, "order: the file's token i is the model's token order[i], embedding and output");
    drop(&a), drop(&b), drop(&d);
    remove(path);
}

/* attn_lm_load_llama2c on path fails with status `want`, a message holding `needle`, p as it was */
static void refused_load(const char *what, const char *path, attn_status want, const char *needle)
{
    attn_params *p = attn_params_new();
    attn_params_add(p, "kept", 1, (int64_t[]){3});
    attn_lm m;
    attn_status st = attn_lm_load_llama2c(&m, p, path, NULL);
    TK_CHECK(st == want && strstr(attn_last_error(), needle), "%s: status %d (want %d), \"%s\" (want \"%s\")", what,
             (int)st, (int)want, attn_last_error(), needle);
    TK_CHECK(attn_params_count(p) == 1 && attn_params_get(p, "kept") && m.blocks == NULL,
             "%s: the registry as it was, the model empty", what);
    attn_lm_free(&m);
    attn_params_free(p);
}

static void test_refusals(void)
{
    model a, g;
    attn_lm_config c = llama(2, true, true);
    if (!make(&a, &c, 41)) return;
    const char *good = path_of("good.bin"), *bad = path_of("bad.bin");
    TK_CHECK(attn_lm_save_llama2c(&a.m, good, 0, NULL) == ATTN_OK, "save: %s", attn_last_error());

    attn_lm_config gc = {
        .style = ATTN_LM_GPT2, .vocab_size = 37, .context = 16, .d_model = 24, .num_layers = 1, .num_heads = 4};
    if (make(&g, &gc, 42)) {
        TK_CHECK(attn_lm_save_llama2c(&g.m, bad, 0, NULL) == ATTN_ERR_ARG && strstr(attn_last_error(), "llm.c"),
                 "a GPT2 model: %s", attn_last_error());
        drop(&g);
    }
    a.m.cfg.rope_base = 500000.0f;
    TK_CHECK(attn_lm_save_llama2c(&a.m, bad, 0, NULL) == ATTN_ERR_ARG && strstr(attn_last_error(), "10000"),
             "rope_base 500000: %s", attn_last_error());
    a.m.cfg.rope_base = 10000.0f, a.m.cfg.norm_eps = 1e-6f;
    TK_CHECK(attn_lm_save_llama2c(&a.m, bad, 0, NULL) == ATTN_ERR_ARG && strstr(attn_last_error(), "eps"),
             "norm_eps 1e-6: %s", attn_last_error());
    a.m.cfg.norm_eps = 1e-5f;
    TK_CHECK(attn_lm_save_llama2c(&a.m, bad, 2, NULL) == ATTN_ERR_ARG && strstr(attn_last_error(), "version 2"),
             "version 2: %s", attn_last_error());
    int64_t order[37];
    for (int i = 0; i < 37; i++) order[i] = i;
    order[5] = 4;
    TK_CHECK(attn_lm_save_llama2c(&a.m, bad, 0, order) == ATTN_ERR_ARG && strstr(attn_last_error(), "token_order[5]"),
             "an order with a token twice: %s", attn_last_error());
    TK_CHECK(attn_lm_save_llama2c(&a.m, path_of("no/such/folder.bin"), 0, NULL) == ATTN_ERR_IO, "a missing folder: %s",
             attn_last_error());
    struct stat sb;
    TK_CHECK(stat(bad, &sb) != 0, "no file is left by the refused saves");

    long n = 0;
    unsigned char *bytes = slurp(good, &n);
    if (bytes) {
        static const long cuts[] = {0, 12, 28, 1000, -4};
        for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
            const long len = cuts[i] < 0 ? n + cuts[i] : cuts[i];
            char what[64];
            snprintf(what, sizeof what, "cut at %ld bytes", len);
            spill(bad, bytes, len);
            refused_load(what, bad, ATTN_ERR_FORMAT, "bad.bin");
        }
        unsigned char *edit = malloc((size_t)n);
        static const struct {
            const char *what, *needle;
            long at;
            int32_t value;
        } headers[] = {
            {"dim claims more", "needs", 0, 48},
            {"layers claim more", "needs", 8, 200},
            {"no heads", "n_heads = 0", 12, 0},
            {"kv heads not dividing", "n_kv_heads", 16, 3},
            {"odd head width", "even heads", 12, 8},
            {"vocab INT32_MIN", "vocab_size", 20, INT32_MIN},
            {"a tied file with an output", "needs", 20, 37},
            {"max_seq_len -1", "max_seq_len", 24, -1},
        };
        for (size_t i = 0; edit && i < sizeof headers / sizeof *headers; i++) {
            memcpy(edit, bytes, (size_t)n);
            tk_put_le32(edit, headers[i].at, (uint32_t)headers[i].value);
            spill(bad, edit, n);
            refused_load(headers[i].what, bad, ATTN_ERR_FORMAT, headers[i].needle);
        }
        if (edit) { /* a NaN halfway through the weights */
            memcpy(edit, bytes, (size_t)n);
            tk_put_le32(edit, n / 8 * 4, 0x7fc00000); /* a NaN at a float boundary: the header is 28 bytes */
            spill(bad, edit, n);
            refused_load("a NaN weight", bad, ATTN_ERR_NUMERIC, "NaN");
            memcpy(edit, bytes, (size_t)n);
            tk_put_le32(edit, 0, 0x616b3432);
            tk_put_le32(edit, 4, 2);
            spill(bad, edit, n);
            refused_load("version 2", bad, ATTN_ERR_FORMAT, "version 2");
        }
        free(edit);
        free(bytes);
    }
    refused_load("a folder", dir, ATTN_ERR_IO, "not a regular file");
    refused_load("a missing file", path_of("missing.bin"), ATTN_ERR_IO, "missing.bin");
    remove(bad), remove(good);
    drop(&a);
}

static void test_goldens(void)
{
    static const char *const cases[] = {"v0_gqa_untied", "v1_tied"};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char name[64], bin[96];
        snprintf(name, sizeof name, "llama2c_%s", cases[k]);
        snprintf(bin, sizeof bin, "tests/golden/%s.bin", name);
        attn_st_file *g = tk_golden(name);
        model o = {.p = attn_params_new()};
        attn_status st = attn_lm_load_llama2c(&o.m, o.p, bin, NULL);
        TK_CHECK(st == ATTN_OK, "%s: load: %s", name, attn_last_error());
        int64_t n = 0;
        int64_t *ids = g ? attn_st_load_i64(g, "ids", &n) : NULL;
        if (st == ATTN_OK && ids) {
            float *y = logits_of(&o, ids, n);
            const attn_lm_config *c = &o.m.cfg;
            const double rounds =
                2.0 * (double)c->num_layers * (3.0 * c->d_model + (double)c->ffn_hidden + 2.0 * n) + 2.0 * c->d_model;
            if (y) tk_golden_close_scaled(g, "logits", y, n * c->vocab_size, tk_tol_of(1, rounds, 4, 8));
            free(y);
            /* written back in the file's version: the same bytes (version 0's rotary tables, which
             * run.c skips, are the float32 cos and sin of another library: equal up to their rounding) */
            const int version = strstr(name, "_v1") ? 1 : 0;
            const char *again = path_of("again.bin");
            TK_CHECK(attn_lm_save_llama2c(&o.m, again, version, NULL) == ATTN_OK, "%s: save: %s", name,
                     attn_last_error());
            long na = 0, nb = 0;
            unsigned char *a = slurp(again, &na), *b = slurp(bin, &nb);
            const long tables = version ? 0 : 4 * c->context * (c->d_model / c->num_heads),
                       out = c->untied ? 4 * c->vocab_size * c->d_model : 0;
            bool same = a && b && na == nb && !memcmp(a, b, (size_t)(na - tables - out)) &&
                        !memcmp(a + na - out, b + nb - out, (size_t)out);
            for (long i = na - tables - out; same && i < na - out; i += 4) {
                float x, z;
                const uint32_t xa = (uint32_t)tk_le32_at(a, i), zb = (uint32_t)tk_le32_at(b, i);
                memcpy(&x, &xa, 4), memcpy(&z, &zb, 4);
                same = fabsf(x - z) <= 2.4e-7f;
            }
            TK_CHECK(same, "%s: saved again, the file's bytes (%ld and %ld)", name, na, nb);
            free(a), free(b);
            remove(again);
        }
        free(ids);
        drop(&o);
        attn_st_close(g);
    }
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/attn-llama2c-XXXXXX");
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    test_goldens();
    test_round_trips();
    test_halves();
    test_token_order();
    test_refusals();
    TK_CHECK(rmdir(dir) == 0, "the test left files in %s", dir);
    return tk_finish("test_lm_llama2c");
}
