/* Sizes are checked before allocation and a failed allocation is an error returned to the
 * caller: absurd shapes (element counts that overflow int64 or size_t, B*H*L*L attention
 * weights at huge L, sizes hidden behind a zero dimension) give NULL with ATTN_ERR_NOMEM (or
 * ATTN_ERR_SHAPE), never a crash, and the ctx stays usable afterwards. */
#include "testkit.h"

#include <stdint.h>
#include <string.h>

/* Under AddressSanitizer a request above its limit aborts unless allocator_may_return_null is
 * set; libc's malloc returns NULL, which is what the library must handle. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

static void expect_fail(const void *ptr, const char *what)
{
    attn_status s = attn_last_status();
    TK_CHECK(ptr == NULL, "%s: expected NULL", what);
    TK_CHECK(s == ATTN_ERR_NOMEM || s == ATTN_ERR_SHAPE,
             "%s: status %s (%s), expected an "
             "out-of-memory or shape error",
             what, attn_status_name(s), attn_last_error());
    TK_CHECK(strlen(attn_last_error()) > 0, "%s: no message", what);
}

/* The ctx still works after a refused allocation. */
static void ctx_still_works(attn_ctx *ctx)
{
    attn_tensor *t = attn_tensor_zeros(ctx, 2, (int64_t[]){3, 4});
    TK_NOT_NULL(t);
    if (t) TK_CHECK(t->numel == 12 && t->data[11] == 0.0f, "small tensor after a failure");
    attn_ctx_reset(ctx);
}

int main(void)
{
    attn_ctx *ctx = attn_ctx_new(0);
    TK_NOT_NULL(ctx);
    if (!ctx) return tk_finish("test_alloc_limits");

    /* element counts that overflow int64 */
    const int64_t huge[4] = {INT64_C(1) << 32, INT64_C(1) << 32, 4, 1};
    attn_clear_error();
    expect_fail(attn_tensor_empty(ctx, 3, huge), "attn_tensor_empty 2^66 elements");
    expect_fail(attn_tensor_alloc(3, huge), "attn_tensor_alloc 2^66 elements");
    /* counts that fit int64 but not size_t bytes (x4) */
    const int64_t big62[1] = {INT64_C(1) << 62};
    expect_fail(attn_tensor_empty(ctx, 1, big62), "attn_tensor_empty 2^62 elements");
    /* 2^46 floats = 256 TiB: beyond any address space, so malloc must fail */
    const int64_t tib[4] = {1 << 10, 1 << 10, 1 << 10, 1 << 16};
    expect_fail(attn_tensor_empty(ctx, 4, tib), "attn_tensor_empty 2^46 elements");
    expect_fail(attn_tensor_alloc(4, tib), "attn_tensor_alloc 2^46 elements");
    /* 2^40 elements (4 TiB): NULL with an error, or (with overcommit) a usable tensor */
    const int64_t e40[4] = {1 << 10, 1 << 10, 1 << 10, 1 << 10};
    attn_tensor *t40 = attn_tensor_alloc(4, e40);
    if (t40) {
        TK_CHECK(t40->numel == INT64_C(1) << 40, "2^40 elements");
        attn_tensor_free(t40);
    } else {
        expect_fail(t40, "attn_tensor_alloc 2^40 elements");
    }
    attn_tensor *e40t = attn_tensor_empty(ctx, 4, e40);
    if (!e40t) expect_fail(e40t, "attn_tensor_empty 2^40 elements");
    attn_ctx_reset(ctx);
    ctx_still_works(ctx);

    /* a parameter registry refuses a total that overflows */
    attn_params *p = attn_params_new();
    TK_NOT_NULL(p);
    if (p) {
        expect_fail(attn_params_add(p, "huge", 1, big62), "attn_params_add 2^62");
        attn_params_free(p);
    }

    /* SDPA weights (B, H, L, L) at huge L: q, k, v (1, 1, L, 1) are 64 MiB each, the weights
     * 2^48 floats; the reference path (weights requested) must refuse, not crash */
    const int64_t L = INT64_C(1) << 24;
    attn_tensor *q = attn_tensor_zeros(ctx, 4, (int64_t[]){1, 1, L, 1});
    attn_tensor *k = attn_tensor_zeros(ctx, 4, (int64_t[]){1, 1, L, 1});
    attn_tensor *v = attn_tensor_zeros(ctx, 4, (int64_t[]){1, 1, L, 1});
    TK_CHECK(q && k && v, "64 MiB inputs: %s", attn_last_error());
    if (q && k && v) {
        attn_tensor *w = NULL;
        attn_clear_error();
        attn_tensor *out = attn_sdpa(ctx, q, k, v, NULL, &w);
        expect_fail(out, "sdpa weights (1, 1, 2^24, 2^24)");
        TK_CHECK(w == NULL, "no weights on failure");
    }
    attn_ctx_reset(ctx);
    ctx_still_works(ctx);

    /* a zero dimension after an overflowing prefix is still refused */
    const int64_t hidden[4] = {INT64_C(1) << 30, INT64_C(1) << 30, INT64_C(1) << 30, 0};
    expect_fail(attn_tensor_empty(ctx, 4, hidden), "attn_tensor_empty (2^30, 2^30, 2^30, 0)");
    /* tensors a caller built by hand: D = 0 hides B*H*L = 2^90; the (B, H, Lq) buffers of sdpa
     * must not be sized from a wrapped product */
    float dummy[1] = {0};
    attn_tensor q0 = {
        .data = dummy, .ndim = 4, .numel = 0, .shape = {INT64_C(1) << 30, INT64_C(1) << 30, INT64_C(1) << 30, 0}};
    attn_tensor k0 = q0, v0 = q0;
    attn_clear_error();
    expect_fail(attn_sdpa(ctx, &q0, &k0, &v0, NULL, NULL), "sdpa with D = 0 and B*H*L = 2^90");
    attn_tensor *w0 = NULL;
    expect_fail(attn_sdpa(ctx, &q0, &k0, &v0, NULL, &w0), "sdpa ref with D = 0 and B*H*L = 2^90");
    attn_ctx_reset(ctx);
    /* no elements, but D = 2^60: the fused kernel's scratch size does not fit in 64 bits (every
     * term of it must be computed with an overflow check: UBSan catches the first that is not) */
    attn_tensor *qd = attn_tensor_zeros(ctx, 4, (int64_t[]){1, 1, 0, INT64_C(1) << 60});
    attn_tensor *kd = attn_tensor_zeros(ctx, 4, (int64_t[]){1, 1, 0, INT64_C(1) << 60});
    TK_CHECK(qd && kd, "empty q and k with D = 2^60: %s", attn_last_error());
    if (qd && kd) {
        attn_clear_error();
        expect_fail(attn_sdpa(ctx, qd, kd, kd, NULL, NULL), "sdpa with Lq = Lk = 0 and D = 2^60");
        TK_CHECK(strstr(attn_last_error(), "2^60") || strstr(attn_last_error(), "1152921504606846976"),
                 "the message names the sizes: %s", attn_last_error());
    }
    attn_ctx_reset(ctx);
    ctx_still_works(ctx);

    /* softmax, matmul and layer norm on a tensor whose result would not fit */
    attn_tensor *a = attn_tensor_zeros(ctx, 2, (int64_t[]){1 << 24, 1});
    attn_tensor *b = attn_tensor_zeros(ctx, 2, (int64_t[]){1, 1 << 24});
    TK_CHECK(a && b, "operands");
    if (a && b) { /* (2^24, 1) @ (1, 2^24) = 2^48 floats (1 PiB) */
        attn_clear_error();
        attn_tensor *c = attn_matmul(ctx, a, b, false, false);
        expect_fail(c, "matmul with a 2^48-element result");
    }
    attn_ctx_reset(ctx);
    ctx_still_works(ctx);

    /* conv1d im2col (B, Cin*K, Lout) beyond memory */
    attn_tensor *x = attn_tensor_zeros(ctx, 3, (int64_t[]){1, 1 << 12, 1 << 12});
    attn_tensor *wt = attn_tensor_zeros(ctx, 3, (int64_t[]){1, 1 << 12, 1 << 12});
    if (x && wt) { /* padding 2^40: Lout = 2^41 + 1, col (1, 2^24, 2^41) overflows */
        attn_clear_error();
        expect_fail(attn_conv1d(ctx, x, wt, NULL, INT64_C(1) << 40), "conv1d im2col 2^65 floats");
    }
    attn_ctx_reset(ctx);
    ctx_still_works(ctx);

    attn_ctx_free(ctx);
    return tk_finish("test_alloc_limits");
}
