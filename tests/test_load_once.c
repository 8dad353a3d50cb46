/* Loading costs its size once (issue 37, item 4):
 *   - attn_st_view gives a tensor over the file's own bytes where the tensor is F32 and aligned
 *     (files of attn and of safetensors' Python pad their header to 8 bytes), and a converted copy
 *     equal to attn_st_load's elsewhere (F16, a header of odd length);
 *   - attn_backward_from reads dout in place: the same gradients, bit for bit, with dout in a
 *     read-only page (a write would fault) through an encoder layer (linear, layer norm, the
 *     attention, the FFN, residuals), the packed attention and a reshape, and out->grad NULL again
 *     afterwards; a leaf, or an out that holds a gradient, gets dout added as before. */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A safetensors file in memory: header padded with `pad` spaces, then tensor "a" F32 (6) and "h" F16 (2) */
static attn_st_file *file_with_pad(int pad, unsigned char *buf, size_t *len)
{
    const char *json = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                       "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[24,28]}}";
    const size_t n = strlen(json) + (size_t)pad;
    for (int b = 0; b < 8; b++) buf[b] = (unsigned char)(n >> (8 * b));
    memcpy(buf + 8, json, strlen(json));
    memset(buf + 8 + strlen(json), ' ', (size_t)pad);
    const float a[6] = {1, -2, 3.5f, 0.25f, -0.5f, 8};
    for (int i = 0; i < 6; i++) { /* little-endian, as the file holds them on any host */
        uint32_t u;
        memcpy(&u, &a[i], sizeof u);
        for (int b = 0; b < 4; b++) buf[8 + n + 4 * i + b] = (unsigned char)(u >> 8 * b);
    }
    const uint16_t h[2] = {0x3c00, 0xc000}; /* 1, -2 */
    for (int i = 0; i < 2; i++)
        buf[8 + n + 24 + 2 * i] = (unsigned char)h[i], buf[8 + n + 25 + 2 * i] = (unsigned char)(h[i] >> 8);
    *len = 8 + n + 28;
    return attn_st_parse(buf, *len, "view test");
}

static void test_views(void)
{
    attn_ctx *ctx = attn_ctx_new(0);
    for (int pad = 0; pad < 8; pad++) {
        unsigned char buf[512];
        size_t len;
        attn_st_file *f = file_with_pad(pad, buf, &len);
        TK_NOT_NULL(f);
        if (!f) continue;
        const attn_st_tensor *a = attn_st_find(f, "a");
        const uint16_t probe = 1; /* a big-endian host converts: a view is the file's bytes on a little-endian one */
        const bool aligned = (uintptr_t)a->data % sizeof(float) == 0 && *(const unsigned char *)&probe == 1;
        attn_tensor *v = attn_st_view(f, "a", ctx), *l = attn_st_load(f, "a", ctx);
        TK_CHECK(v && l && v->numel == 6 && v->ndim == 2 && memcmp(v->data, l->data, 6 * sizeof(float)) == 0,
                 "header + %d: the view holds what attn_st_load gives", pad);
        TK_CHECK(v && (v->data == (const float *)a->data) == aligned, "header + %d: %s", pad,
                 aligned ? "an aligned F32 tensor is the file's bytes"
                         : "a misaligned one (or any on a big-endian host) is a copy");
        attn_tensor *h = attn_st_view(f, "h", ctx);
        TK_CHECK(h && h->data != (const void *)attn_st_find(f, "h")->data && h->data[0] == 1.0f && h->data[1] == -2.0f,
                 "header + %d: an F16 tensor is converted", pad);
        TK_CHECK(!attn_st_view(f, "none", ctx) && strstr(attn_last_error(), "none"), "a missing name is refused");
        attn_st_close(f);
        attn_ctx_reset(ctx);
    }
    attn_ctx_free(ctx);
}

/* dout in a read-only page of its own */
static float *read_only_copy(const float *src, size_t n, size_t *bytes)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    *bytes = (n * sizeof(float) + page - 1) / page * page;
    float *p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    memcpy(p, src, n * sizeof(float));
    mprotect(p, *bytes, PROT_READ);
    return p;
}

typedef attn_tensor *(*graph_fn)(attn_ctx *ctx, attn_tensor *x, void *user);

/* The gradients of x and the module's parameters from backward_from(out, dout): once with dout in
 * ordinary memory, once read-only; they must be the same bits, and out->grad NULL after */
static void lend_check(const char *what, graph_fn graph, void *user, attn_params *p, attn_tensor *x)
{
    float *grads[2] = {NULL, NULL};
    int64_t total = x->numel + (p ? attn_params_numel(p) : 0);
    for (int run = 0; run < 2; run++) {
        attn_ctx *ctx = attn_ctx_new(3);
        attn_ctx_set_training(ctx, false);
        attn_tensor_zero_grad(x);
        if (p) attn_params_zero_grad(p);
        attn_tensor *out = graph(ctx, x, user);
        TK_NOT_NULL(out);
        if (!out) return;
        float *dout = malloc(sizeof(float) * (size_t)out->numel);
        attn_rng rng;
        attn_rng_seed(&rng, 11);
        for (int64_t i = 0; i < out->numel; i++) dout[i] = attn_rng_normal(&rng);
        size_t bytes = 0;
        float *ro = run ? read_only_copy(dout, (size_t)out->numel, &bytes) : dout;
        TK_CHECK(attn_backward_from(ctx, out, ro) == ATTN_OK, "%s: backward_from: %s", what, attn_last_error());
        TK_CHECK(!out->grad, "%s: out->grad is NULL after the sweep (dout was lent, not copied)", what);
        grads[run] = calloc((size_t)total, sizeof(float));
        if (x->grad) memcpy(grads[run], x->grad, sizeof(float) * (size_t)x->numel);
        for (size_t i = 0, at = (size_t)x->numel; p && i < attn_params_count(p); i++) {
            const attn_tensor *t = attn_params_at(p, i);
            if (t->grad) memcpy(grads[run] + at, t->grad, sizeof(float) * (size_t)t->numel);
            at += (size_t)t->numel;
        }
        if (run) munmap(ro, bytes);
        free(dout);
        attn_ctx_free(ctx);
    }
    TK_CHECK(memcmp(grads[0], grads[1], sizeof(float) * (size_t)total) == 0 && tk_max_abs(grads[0], total) > 0,
             "%s: the same gradients with dout read-only", what);
    free(grads[0]), free(grads[1]);
}

static attn_tensor *encoder_graph(attn_ctx *ctx, attn_tensor *x, void *user)
{
    return attn_encoder_layer_forward(ctx, user, x, NULL, NULL);
}

static attn_tensor *packed_graph(attn_ctx *ctx, attn_tensor *x, void *user)
{
    (void)user;
    const int64_t cu[3] = {0, 3, 7};
    attn_varlen_opts o = {.causal = true};
    attn_tensor *r = attn_reshape(ctx, x, 3, (int64_t[]){7, 2, 4});
    return attn_reshape(ctx, attn_sdpa_varlen(ctx, r, r, r, cu, cu, 2, &o), 2, (int64_t[]){7, 8});
}

static void test_lend(void)
{
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    attn_params *p = attn_params_new();
    attn_transformer_config cfg = {.d_model = 8, .num_heads = 2, .dim_feedforward = 12};
    attn_encoder_layer layer;
    TK_OK(attn_encoder_layer_init(&layer, p, "enc", &cfg, &rng));
    attn_tensor *x = tk_randn(7, 3, (int64_t[]){2, 5, 8});
    lend_check("encoder layer", encoder_graph, &layer, p, x);
    attn_tensor *xp = tk_randn(8, 2, (int64_t[]){7, 8});
    lend_check("packed causal attention", packed_graph, NULL, NULL, xp);

    /* a leaf, and an out holding a gradient already: dout added into its ->grad */
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *leaf = tk_randn(9, 1, (int64_t[]){3});
    const float d[3] = {1, 2, 3};
    attn_tensor_zero_grad(leaf);
    TK_CHECK(attn_backward_from(ctx, leaf, d) == ATTN_OK && leaf->grad && leaf->grad[2] == 3.0f,
             "a leaf's grad receives dout");
    attn_ctx_free(ctx);
    attn_tensor_free(leaf), attn_tensor_free(x), attn_tensor_free(xp);
    attn_params_free(p);
}

int main(void)
{
    test_views();
    test_lend();
    return tk_finish("test_load_once");
}
