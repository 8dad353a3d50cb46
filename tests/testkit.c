/* The test kit (see testkit.h). */
#include "testkit.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int checks_passed, checks_failed;

void tk_check_at(bool ok, const char *file, int line, const char *fmt, ...)
{
    if (ok) {
        checks_passed++;
        return;
    }
    checks_failed++;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int tk_finish(const char *test_name)
{
    printf("%s: %d checks passed, %d failed\n", test_name, checks_passed, checks_failed);
    return checks_failed == 0 && checks_passed > 0 ? 0 : 1;
}

bool tk_close(const char *what, const float *actual, const float *expected, int64_t n, float atol,
              float rtol)
{
    int64_t worst = -1, bad = 0;
    double worst_excess = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double a = actual[i], e = expected[i];
        if (isnan(a) && isnan(e)) continue;
        double tol = atol + rtol * fabs(e);
        double err = fabs(a - e);
        if (!(err <= tol) && !(isinf(a) && a == e)) {
            bad++;
            double excess = isnan(err) ? INFINITY : err - tol;
            if (worst < 0 || excess > worst_excess) {
                worst = i;
                worst_excess = excess;
            }
        }
    }
    if (bad == 0) {
        checks_passed++;
        return true;
    }
    checks_failed++;
    fprintf(stderr,
            "FAIL %s: %lld of %lld elements differ (atol %g + rtol %g); worst [%lld]: got %.9g, "
            "expected %.9g\n",
            what, (long long)bad, (long long)n, atol, rtol, (long long)worst, actual[worst],
            expected[worst]);
    return false;
}

attn_st_file *tk_golden(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "tests/golden/%s.safetensors", name);
    attn_st_file *f = attn_st_open(path);
    tk_check_at(f != NULL, __FILE__, __LINE__, "golden file %s: %s", path, attn_last_error());
    return f;
}

attn_tensor *tk_golden_tensor(attn_st_file *f, const char *name)
{
    if (!f) return NULL;
    attn_tensor *t = attn_st_load(f, name, NULL);
    tk_check_at(t != NULL, __FILE__, __LINE__, "golden tensor %s: %s", name, attn_last_error());
    return t;
}

bool tk_golden_close(attn_st_file *f, const char *name, const float *actual, int64_t n, float atol,
                     float rtol)
{
    attn_tensor *ref = tk_golden_tensor(f, name);
    if (!ref) return false;
    bool ok;
    if (!actual) {
        tk_check_at(false, __FILE__, __LINE__, "%s: no value computed", name);
        ok = false;
    } else if (ref->numel != n) {
        tk_check_at(false, __FILE__, __LINE__, "%s: %lld values computed, golden has %lld", name,
                    (long long)n, (long long)ref->numel);
        ok = false;
    } else {
        ok = tk_close(name, actual, ref->data, n, atol, rtol);
    }
    attn_tensor_free(ref);
    return ok;
}

attn_tensor *tk_randn(uint64_t seed, int ndim, const int64_t *shape)
{
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    attn_tensor *t = attn_tensor_alloc(ndim, shape);
    if (!t) return NULL;
    attn_tensor_fill_normal(t, &rng, 0.0f, 1.0f);
    attn_tensor_set_requires_grad(t, true);
    return t;
}

#define GRADCHECK_SEED 4242u

static int gradcheck_threads = 0; /* 0: the ctx's default */

void tk_gradcheck_set_threads(int n) { gradcheck_threads = n; }

/* loss = sum(out * r) in double, from a fresh forward. */
static double probe_loss(attn_ctx *ctx, tk_forward_fn forward, attn_tensor **inputs, void *user,
                         const float *r, int64_t n)
{
    attn_ctx_reset(ctx);
    attn_rng_seed(attn_ctx_rng(ctx), GRADCHECK_SEED);
    attn_tensor *out = forward(ctx, inputs, user);
    if (!out || out->numel != n) return NAN;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)out->data[i] * r[i];
    return s;
}

bool tk_gradcheck(const char *what, tk_forward_fn forward, attn_tensor **inputs, int n_inputs,
                  void *user, float eps, float atol, float rtol)
{
    attn_ctx *ctx = attn_ctx_new(GRADCHECK_SEED);
    attn_ctx_set_num_threads(ctx, gradcheck_threads);
    attn_rng_seed(attn_ctx_rng(ctx), GRADCHECK_SEED);
    for (int i = 0; i < n_inputs; i++) attn_tensor_zero_grad(inputs[i]);
    attn_tensor *out = forward(ctx, inputs, user);
    if (!out) {
        tk_check_at(false, __FILE__, __LINE__, "gradcheck %s: forward failed: %s", what,
                    attn_last_error());
        attn_ctx_free(ctx);
        return false;
    }
    int64_t n = out->numel;
    float *r = malloc((size_t)n * sizeof(float));
    attn_rng rng;
    attn_rng_seed(&rng, 777);
    for (int64_t i = 0; i < n; i++) r[i] = attn_rng_normal(&rng);
    bool ok = attn_backward_from(ctx, out, r) == ATTN_OK;
    if (!ok) tk_check_at(false, __FILE__, __LINE__, "gradcheck %s: backward failed: %s", what, attn_last_error());

    attn_ctx_set_grad_enabled(ctx, false);
    for (int i = 0; ok && i < n_inputs; i++) {
        attn_tensor *x = inputs[i];
        if (!x->requires_grad) continue;
        if (!x->grad) {
            tk_check_at(false, __FILE__, __LINE__, "gradcheck %s: input %d got no gradient", what, i);
            ok = false;
            break;
        }
        float *analytic = malloc((size_t)x->numel * sizeof(float));
        memcpy(analytic, x->grad, (size_t)x->numel * sizeof(float));
        int64_t stride = x->numel > 64 ? x->numel / 64 : 1; /* at most ~64 elements per input */
        int64_t bad = 0, checked = 0;
        for (int64_t j = 0; j < x->numel; j += stride, checked++) {
            float saved = x->data[j];
            x->data[j] = saved + eps;
            double up = probe_loss(ctx, forward, inputs, user, r, n);
            x->data[j] = saved - eps;
            double down = probe_loss(ctx, forward, inputs, user, r, n);
            x->data[j] = saved;
            double numeric = (up - down) / (2.0 * eps);
            double err = fabs(numeric - analytic[j]);
            if (!(err <= atol + rtol * fabs(numeric))) {
                if (bad < 3)
                    fprintf(stderr, "  %s input %d [%lld]: analytic %.7g, numeric %.7g\n", what, i,
                            (long long)j, analytic[j], numeric);
                bad++;
            }
        }
        tk_check_at(bad == 0, __FILE__, __LINE__,
                    "gradcheck %s input %d: %lld of %lld elements off (eps %g, atol %g, rtol %g)",
                    what, i, (long long)bad, (long long)checked, eps, atol, rtol);
        ok = ok && bad == 0;
        free(analytic);
    }
    free(r);
    attn_ctx_free(ctx);
    return ok;
}
