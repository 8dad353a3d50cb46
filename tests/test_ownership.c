/* The library's promises about its objects, through the public header alone (so that the same
 * file also runs against an older library): every op and attn_backward check which ctx a tensor
 * belongs to, thread counts are checked before they are taken, and a registry's cost per
 * parameter does not grow with its size.
 *   - a tensor of ctx A that requires grad, in an op of ctx B with grad on: ATTN_ERR_ARG (its
 *     gradient would live in B's arena and dangle once B is reset or freed);
 *   - the same tensor read in an op of a ctx with grad off (as the decoders read their encoder's
 *     outputs): allowed, nothing is recorded;
 *   - attn_backward(B, loss) for a loss computed in A: ATTN_ERR_ARG, A's graph untouched, and
 *     attn_backward(A, loss) still works;
 *   - attn_ctx_set_num_threads above ATTN_MAX_THREADS: ATTN_ERR_ARG, the count kept;
 *   - 100,000 parameters registered and looked up: seconds at most (a scan per registration
 *     took minutes).
 * Usage: test_ownership [CASE]   CASE one of foreign_op, grad_off, foreign_backward,
 * threads, registration (default: all). Exit 0 when every case checked holds. */
#include "attn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures;

static void check(bool ok, const char *what)
{
    if (!ok) {
        failures++;
        printf("FAIL: %s (last error: %s)\n", what, attn_last_error());
    }
}

/* A (2, 3) tensor of ctx that requires grad. */
static attn_tensor *leaf(attn_ctx *ctx)
{
    const float v[6] = {1, 2, 3, 4, 5, 6};
    attn_tensor *t = attn_tensor_from(ctx, 2, (int64_t[]){2, 3}, v);
    if (t) attn_tensor_set_requires_grad(t, true);
    return t;
}

static void foreign_op(void)
{
    attn_ctx *a = attn_ctx_new(1), *b = attn_ctx_new(2);
    attn_tensor *x = leaf(a);
    attn_clear_error();
    attn_tensor *y = attn_scale(b, x, 2.0f);
    check(!y && attn_last_status() == ATTN_ERR_ARG, "an op of ctx B refuses a tensor of ctx A that requires grad");
    attn_tensor *z = attn_add(b, x, x);
    check(!z, "attn_add in ctx B refuses two tensors of ctx A");
    attn_ctx_free(b);
    attn_ctx_free(a);
}

static void grad_off(void)
{
    attn_ctx *a = attn_ctx_new(1), *b = attn_ctx_new(2);
    attn_tensor *x = leaf(a);
    attn_ctx_set_grad_enabled(b, false);
    attn_tensor *y = attn_scale(b, x, 2.0f);
    check(y && y->data[5] == 12.0f && !y->requires_grad, "a ctx with grad off reads a tensor of another ctx");
    attn_ctx_free(b);
    attn_ctx_free(a);
}

static void foreign_backward(void)
{
    attn_ctx *a = attn_ctx_new(1), *b = attn_ctx_new(2);
    attn_params *p = attn_params_new();
    attn_tensor *w = attn_params_add(p, "w", 2, (int64_t[]){2, 3});
    attn_tensor *loss = attn_sum_all(a, attn_scale(a, w, 3.0f));
    check(loss != NULL, "a loss in ctx A");
    attn_clear_error();
    attn_status s = attn_backward(b, loss);
    check(s == ATTN_ERR_ARG, "attn_backward in ctx B refuses a loss computed in ctx A");
    check(!w->grad || w->grad[0] == 0.0f, "nothing flowed into the parameter");
    check(attn_backward(a, loss) == ATTN_OK && w->grad && w->grad[0] == 3.0f, "attn_backward in ctx A still works");
    attn_params_free(p);
    attn_ctx_free(b);
    attn_ctx_free(a);
}

static void threads(void)
{
    attn_ctx *a = attn_ctx_new(1);
    int before = attn_ctx_num_threads(a);
    check(attn_ctx_set_num_threads(a, ATTN_MAX_THREADS + 1) == ATTN_ERR_ARG && attn_ctx_num_threads(a) == before,
          "a count above ATTN_MAX_THREADS is refused and the count kept");
    check(attn_ctx_set_num_threads(a, 1) == ATTN_OK && attn_ctx_num_threads(a) == 1, "one thread");
    attn_ctx_free(a);
}

static void registration(void)
{
    enum {
        N = 100000
    };
    attn_params *p = attn_params_new();
    clock_t t0 = clock();
    bool ok = p != NULL;
    char name[64];
    for (int i = 0; ok && i < N; i++) {
        snprintf(name, sizeof name, "encoder.layers.%d.self_attn.in_proj_weight", i);
        ok = attn_params_add(p, name, 1, (int64_t[]){1}) != NULL;
    }
    check(ok && attn_params_count(p) == N, "100000 parameters registered");
    snprintf(name, sizeof name, "encoder.layers.%d.self_attn.in_proj_weight", N / 2);
    check(attn_params_get(p, name) == attn_params_at(p, N / 2), "found by name");
    check(attn_params_add(p, name, 1, (int64_t[]){1}) == NULL, "a duplicate name is refused");
    check(attn_params_get(p, "nowhere") == NULL, "an unknown name is not found");
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("registration: %d parameters in %.2f s\n", N, secs);
    check(secs < 10.0, "100000 parameters within 10 s of CPU time");
    attn_params_free(p);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {{"foreign_op", foreign_op},
                 {"grad_off", grad_off},
                 {"foreign_backward", foreign_backward},
                 {"threads", threads},
                 {"registration", registration}};
    int ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (argc < 2 || !strcmp(argv[1], cases[i].name)) {
            cases[i].run();
            ran++;
        }
    if (!ran) {
        fprintf(stderr, "test_ownership: unknown case \"%s\"\n", argv[1]);
        return 2;
    }
    printf("test_ownership: %d case%s, %d failure%s\n", ran, ran == 1 ? "" : "s", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
