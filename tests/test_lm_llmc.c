/* llm.c's files (attn_lm_save_llmc, attn_lm_load_llmc, attn_lm_save_llmc_state):
 *   - a golden checkpoint laid out from llm.c's train_gpt2.py (tests/golden/make_golden_lm_files.py:
 *     the vocabulary padded to 128 rows) loads and gives torch's logits within test_golden_lm's
 *     bound (one side), and saved again is the same file byte for byte;
 *   - a model saved and loaded: every parameter bit for bit, the header's ints, the padded rows zero;
 *   - the debug state: header, the batch, the logits, the loss and every gradient bit for bit at
 *     their places (the padded rows' gradients zero); refused before a backward;
 *   - refusals naming what, the registry as it was: a LLAMA model, another eps, another FFN width; on
 *     loading, files cut at several places, another magic, version 5 (bf16), sizes that do not give
 *     the file's size, a padded vocabulary below the vocabulary, a NaN weight. */
#include "testkit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* whether the file's n little-endian float32 at b hold x's bits */
static bool same_floats(const unsigned char *b, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        if ((uint32_t)tk_le32_at(b, 4 * (long)i) != u) return false;
    }
    return true;
}

static char dir[64];

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

static void test_golden(void)
{
    attn_st_file *g = tk_golden("llmc_gpt2");
    attn_params *p = attn_params_new();
    attn_lm m;
    attn_status st = attn_lm_load_llmc(&m, p, "tests/golden/llmc_gpt2.bin");
    TK_CHECK(st == ATTN_OK, "load: %s", attn_last_error());
    int64_t n = 0;
    int64_t *ids = g ? attn_st_load_i64(g, "ids", &n) : NULL;
    if (st == ATTN_OK && ids) {
        attn_ctx *ctx = attn_ctx_new(0);
        attn_tensor *y = attn_lm_forward(ctx, &m, ids, (int64_t[]){0, n}, 1);
        const double rounds =
            2.0 * (double)m.cfg.num_layers * (3.0 * m.cfg.d_model + (double)m.cfg.ffn_hidden + 2.0 * n) +
            2.0 * m.cfg.d_model;
        TK_CHECK(y != NULL, "forward: %s", attn_last_error());
        if (y) tk_golden_close_scaled(g, "logits", y->data, y->numel, tk_tol_of(1, rounds, 4, 8));
        attn_ctx_free(ctx);
        const char *again = path_of("again.bin");
        TK_CHECK(attn_lm_save_llmc(&m, again) == ATTN_OK, "save: %s", attn_last_error());
        long na = 0, nb = 0;
        unsigned char *a = slurp(again, &na), *b = slurp("tests/golden/llmc_gpt2.bin", &nb);
        TK_CHECK(a && b && na == nb && !memcmp(a, b, (size_t)na), "saved again: the golden file byte for byte");
        free(a), free(b);
        remove(again);
    }
    free(ids);
    attn_lm_free(&m);
    attn_params_free(p);
    attn_st_close(g);
}

typedef struct model {
    attn_params *p;
    attn_lm m;
} model;

static bool make(model *o, attn_lm_config c, uint64_t seed)
{
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    o->p = attn_params_new();
    attn_status st = attn_lm_init(&o->m, o->p, &c, &rng);
    TK_CHECK(st == ATTN_OK, "init: %s", attn_last_error());
    for (size_t i = 0; st == ATTN_OK && i < attn_params_count(o->p); i++) /* norms and biases not 1 and 0 */
        attn_tensor_fill_normal(attn_params_at(o->p, i), &rng, 0.5f, 0.2f);
    return st == ATTN_OK;
}

static void drop(model *o)
{
    attn_lm_free(&o->m);
    attn_params_free(o->p);
}

static const attn_lm_config GPT2 = {
    .style = ATTN_LM_GPT2, .vocab_size = 200, .context = 10, .d_model = 16, .num_layers = 2, .num_heads = 2};

static void test_round_trip_and_state(void)
{
    model a, b = {.p = attn_params_new()};
    if (!make(&a, GPT2, 3)) return;
    char path[128], state[128];
    snprintf(path, sizeof path, "%s", path_of("model.bin"));
    snprintf(state, sizeof state, "%s", path_of("state.bin"));
    TK_CHECK(attn_lm_save_llmc(&a.m, path) == ATTN_OK, "save: %s", attn_last_error());
    TK_CHECK(attn_lm_load_llmc(&b.m, b.p, path) == ATTN_OK, "load: %s", attn_last_error());
    bool same = attn_params_count(a.p) == attn_params_count(b.p);
    for (size_t i = 0; same && i < attn_params_count(a.p); i++) {
        const attn_tensor *x = attn_params_at(a.p, i), *y = attn_params_get(b.p, attn_params_name(a.p, i));
        same = y && y->numel == x->numel && !memcmp(x->data, y->data, sizeof(float) * (size_t)x->numel);
    }
    TK_CHECK(same, "every parameter back bit for bit");
    long n = 0;
    unsigned char *bytes = slurp(path, &n);
    const int64_t C = 16, Vp = 256, L = 2, T = 10;
    if (bytes) {
        const int32_t want[8] = {20240326, 3, 10, 200, 2, 2, 16, 256};
        bool head = true;
        for (int i = 0; i < 8; i++) head = head && tk_le32_at(bytes, 4 * i) == want[i];
        TK_CHECK(head, "the header: magic, version, max_seq_len, vocab, layers, heads, channels, padded vocab");
        TK_CHECK(n == 4 * (256 + Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C), "%ld bytes", n);
        bool zeros = true;
        for (long i = 1024 + 4 * 200 * C; i < 1024 + 4 * Vp * C; i++) zeros = zeros && bytes[i] == 0;
        TK_CHECK(zeros, "the padded rows are zeros");
    }

    /* the debug state of one batch */
    const int64_t B = 2, x[20] = {1, 5, 9, 199, 0, 17, 17, 2, 30, 8, 11, 4, 150, 151, 3, 3, 3, 3, 90, 91};
    int64_t y[20];
    for (int i = 0; i < 20; i++) y[i] = (x[i] * 7 + 1) % 200;
    TK_CHECK(attn_lm_save_llmc_state(&a.m, state, x, y, B, T, a.m.wte->data, 1.0f) == ATTN_ERR_STATE,
             "before a backward: %s", attn_last_error());
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *logits = attn_lm_forward(ctx, &a.m, x, (int64_t[]){0, T, 2 * T}, B);
    attn_tensor *loss = logits ? attn_cross_entropy(ctx, logits, y, -100, 0.0f) : NULL;
    TK_CHECK(loss && attn_backward(ctx, loss) == ATTN_OK, "backward: %s", attn_last_error());
    if (loss) {
        TK_CHECK(attn_lm_save_llmc_state(&a.m, state, x, y, B, T, logits->data, loss->data[0]) == ATTN_OK, "state: %s",
                 attn_last_error());
        long ns = 0;
        unsigned char *s = slurp(state, &ns);
        const long at_logits = 1024 + 4 * 2 * B * T, at_loss = at_logits + 4 * B * T * 200, at_grads = at_loss + 4;
        TK_CHECK(s && ns == at_grads + n - 1024, "the state's size: %ld", ns);
        if (s && ns == at_grads + n - 1024) {
            bool ok = tk_le32_at(s, 0) == 20240327 && tk_le32_at(s, 4) == 2 && tk_le32_at(s, 8) == B &&
                      tk_le32_at(s, 12) == T;
            for (int i = 0; i < 20; i++)
                ok = ok && tk_le32_at(s, 1024 + 4 * i) == x[i] && tk_le32_at(s, 1024 + 80 + 4 * i) == y[i];
            TK_CHECK(ok, "the state's header and batch");
            TK_CHECK(same_floats(s + at_logits, logits->data, logits->numel) && same_floats(s + at_loss, loss->data, 1),
                     "the logits and the loss");
            TK_CHECK(same_floats(s + at_grads, a.m.wte->grad, 200 * 16), "wte's gradient first");
            bool zeros = true;
            for (long i = at_grads + 4 * 200 * C; i < at_grads + 4 * Vp * C; i++) zeros = zeros && s[i] == 0;
            TK_CHECK(zeros, "the padded rows' gradients zeros");
            const attn_tensor *lnfb = a.m.norm_f.bias;
            TK_CHECK(same_floats(s + ns - 4 * C, lnfb->grad, C), "lnfb's gradient last");
            const attn_tensor *qkvw1 = a.m.blocks[1].attn.in_proj_weight;
            const long at_qkvw1 = at_grads + 4 * (Vp * C + T * C + 2 * L * C + 3 * C * C);
            TK_CHECK(same_floats(s + at_qkvw1, qkvw1->grad, 3 * C * C),
                     "layer 1's qkvw gradient after ln1w, ln1b and layer 0's");
        }
        free(s);
    }
    attn_ctx_free(ctx);
    remove(state);

    /* refusals */
    attn_lm_config c = GPT2;
    model l;
    c.style = ATTN_LM_LLAMA;
    if (make(&l, c, 4)) {
        TK_CHECK(attn_lm_save_llmc(&l.m, path_of("x.bin")) == ATTN_ERR_ARG && strstr(attn_last_error(), "llama2.c"),
                 "a LLAMA model: %s", attn_last_error());
        drop(&l);
    }
    c = GPT2, c.ffn_hidden = 40;
    if (make(&l, c, 5)) {
        TK_CHECK(attn_lm_save_llmc(&l.m, path_of("x.bin")) == ATTN_ERR_ARG && strstr(attn_last_error(), "4 d_model"),
                 "another FFN width: %s", attn_last_error());
        drop(&l);
    }
    a.m.cfg.norm_eps = 1e-6f;
    TK_CHECK(attn_lm_save_llmc(&a.m, path_of("x.bin")) == ATTN_ERR_ARG && strstr(attn_last_error(), "eps"),
             "another eps: %s", attn_last_error());
    TK_CHECK(access(path_of("x.bin"), F_OK) != 0, "refused saves write nothing");
    if (bytes) {
        const char *bad = path_of("bad.bin");
        static const long cuts[] = {0, 100, 1024, 5000, -4};
        for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
            spill(bad, bytes, cuts[i] < 0 ? n + cuts[i] : cuts[i]);
            attn_params *p = attn_params_new();
            attn_lm m;
            TK_CHECK(attn_lm_load_llmc(&m, p, bad) == ATTN_ERR_FORMAT && attn_params_count(p) == 0, "cut at %ld: %s",
                     cuts[i], attn_last_error());
            attn_params_free(p);
        }
        static const struct {
            const char *what, *needle;
            long at;
            int32_t value;
        } edits[] = {{"another magic", "magic", 0, 20240520}, {"version 5", "version 5", 4, 5},
                     {"layers claim more", "needs", 16, 3},   {"padded below the vocabulary", "padded", 28, 128},
                     {"no heads", "num_heads = 0", 20, 0},    {"a NaN weight", "NaN", 1024 + 4 * 37, 0x7fc00000}};
        unsigned char *e = malloc((size_t)n);
        for (size_t i = 0; e && i < sizeof edits / sizeof *edits; i++) {
            memcpy(e, bytes, (size_t)n);
            tk_put_le32(e, edits[i].at, (uint32_t)edits[i].value);
            spill(bad, e, n);
            attn_params *p = attn_params_new();
            attn_lm m;
            attn_status st = attn_lm_load_llmc(&m, p, bad);
            TK_CHECK(st != ATTN_OK && strstr(attn_last_error(), edits[i].needle) && attn_params_count(p) == 0, "%s: %s",
                     edits[i].what, attn_last_error());
            attn_params_free(p);
        }
        free(e);
        remove(bad);
    }
    free(bytes);
    remove(path);
    drop(&a), drop(&b);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/attn-llmc-XXXXXX");
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    test_golden();
    test_round_trip_and_state();
    TK_CHECK(rmdir(dir) == 0, "the test left files in %s", dir);
    return tk_finish("test_lm_llmc");
}
