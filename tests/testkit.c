/* The test kit (see testkit.h). */
#include "testkit.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int checks_passed, checks_failed;

/* The worst margin of the scaled comparisons so far (tk_close_scaled). */
static int margins_seen;
static double worst_margin = -1.0;
static char worst_margin_what[200];

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
    if (margins_seen > 0)
        printf("%s: worst margin %.3g of the tolerance over %d scaled comparisons (%s)\n", test_name, worst_margin,
               margins_seen, worst_margin_what);
    printf("%s: %d checks passed, %d failed\n", test_name, checks_passed, checks_failed);
    return checks_failed == 0 && checks_passed > 0 ? 0 : 1;
}

bool tk_close(const char *what, const float *actual, const float *expected, int64_t n, float atol, float rtol)
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
            what, (long long)bad, (long long)n, atol, rtol, (long long)worst, actual[worst], expected[worst]);
    return false;
}

/* One element within its bound (NaN only against NaN, an infinity only against itself). */
static bool within(double got, double ref, double bound)
{
    if (isnan(got) || isnan(ref)) return isnan(got) && isnan(ref);
    if (isinf(got) || isinf(ref)) return got == ref;
    return fabs(got - ref) <= bound;
}

tk_tol tk_tol_of(double sides, double n, double cond, double ulps)
{
    const double steps = fmin(n, TK_LAMBDA * sqrt(n));
    return (tk_tol){.rtol = sides * ulps * TK_U, .atol = sides * steps * cond * TK_U};
}

double tk_max_abs(const float *ref, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(ref[i]) && fabs(ref[i]) > m) m = fabs(ref[i]);
    return m;
}

int64_t tk_scaled_outside(const float *got, const float *ref, int64_t n, tk_tol tol)
{
    const double scale = tol.scale > 0.0 ? tol.scale : tk_max_abs(ref, n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += !within(got[i], ref[i], tol.rtol * fabs(ref[i]) + tol.atol * scale);
    return bad;
}

/* Whether the planted error is caught: TK_PLANTED * size added to element i (the loosest),
 * against the sign of the error already there, must fall outside that element's bound. */
static bool planted_caught(const float *got, const float *ref, int64_t i, double bound, double size)
{
    const double e = (double)got[i] - ref[i];
    return !within((double)got[i] - (e < 0 ? -1.0 : 1.0) * TK_PLANTED * size, ref[i], bound);
}

bool tk_close_scaled(const char *what, const float *got, const float *ref, int64_t n, tk_tol tol)
{
    const double max_ref = tk_max_abs(ref, n);
    const double scale = tol.scale > 0.0 ? tol.scale : max_ref;
    int64_t bad = 0, worst = -1, loosest = -1;
    double margin = 0.0, worst_err = 0.0, loosest_slack = -1.0, loosest_bound = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double bound = tol.rtol * fabs(ref[i]) + tol.atol * scale;
        const bool ok = within(got[i], ref[i], bound);
        const double err = isfinite(got[i]) && isfinite(ref[i]) ? fabs((double)got[i] - ref[i]) : 0.0;
        const double m = !ok ? INFINITY : err > 0.0 ? err / bound : 0.0;
        bad += !ok;
        if (worst < 0 || m > margin || (!ok && err > worst_err)) {
            worst = i;
            margin = m;
            worst_err = err;
        }
        if (isfinite(ref[i]) && bound + err > loosest_slack) { /* where a planted error hides best */
            loosest = i;
            loosest_slack = bound + err;
            loosest_bound = bound;
        }
    }
    if (bad == 0) {
        checks_passed++;
    } else {
        checks_failed++;
        fprintf(stderr,
                "FAIL %s: %lld of %lld elements outside |got - ref| <= %.3g |ref| + %.3g * %.6g "
                "(%s); worst [%lld]: got %.9g, expected %.9g\n",
                what, (long long)bad, (long long)n, tol.rtol, tol.atol, scale, tol.scale > 0.0 ? "scale" : "max |ref|",
                (long long)worst, got[worst], ref[worst]);
    }
    /* The planted error is TK_PLANTED of the tensor's largest |value|; a golden that lies within
     * its bound of 0 everywhere (a result that is 0 in exact arithmetic, its golden rounding noise)
     * takes TK_PLANTED of the scale given instead. */
    const double size = max_ref <= tol.atol * scale ? scale : max_ref;
    if (loosest >= 0 && size > 0.0)
        tk_check_at(planted_caught(got, ref, loosest, loosest_bound, size), __FILE__, __LINE__,
                    "%s: the bound (%.3g |ref| + %.3g * %.6g) lets through an error of %g * %.6g at "
                    "[%lld]",
                    what, tol.rtol, tol.atol, scale, TK_PLANTED, size, (long long)loosest);
    const char *env = getenv("ATTN_TEST_MARGINS");
    if (env && *env && strcmp(env, "0") != 0 && worst >= 0)
        printf("margin %.3g  %s  [%lld]: |got - ref| %.3g = %.3g u * scale %.6g; |ref_i| %.6g\n", margin, what,
               (long long)worst, worst_err, scale > 0 ? worst_err / scale / TK_U : 0.0, scale, fabs(ref[worst]));
    margins_seen++;
    if (worst >= 0 && margin > worst_margin) {
        worst_margin = margin;
        snprintf(worst_margin_what, sizeof worst_margin_what, "%s [%lld]", what, (long long)worst);
    }
    return bad == 0;
}

bool tk_golden_close_scaled(attn_st_file *f, const char *name, const float *got, int64_t n, tk_tol tol)
{
    attn_tensor *ref = tk_golden_tensor(f, name);
    if (!ref) return false;
    bool ok = false;
    if (!got)
        tk_check_at(false, __FILE__, __LINE__, "%s: no value computed", name);
    else if (ref->numel != n)
        tk_check_at(false, __FILE__, __LINE__, "%s: %lld values computed, golden has %lld", name, (long long)n,
                    (long long)ref->numel);
    else
        ok = tk_close_scaled(name, got, ref->data, n, tol);
    attn_tensor_free(ref);
    return ok;
}

double tk_key_bias_scale(attn_st_file *g, const char *name)
{
    static const char *const key_biases[] = {"to_key.bias", "Wk.bias"};
    const size_t n = strlen(name);
    for (size_t i = 0; i < sizeof key_biases / sizeof *key_biases; i++) {
        const size_t m = strlen(key_biases[i]);
        if (n < m || strcmp(name + n - m, key_biases[i]) != 0) continue;
        char weight[256];
        snprintf(weight, sizeof weight, "%.*sweight", (int)(n - strlen("bias")), name);
        attn_tensor *w = tk_golden_tensor(g, weight);
        double scale = w ? tk_max_abs(w->data, w->numel) : 0.0;
        attn_tensor_free(w);
        return scale;
    }
    return 0.0;
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

bool tk_golden_close(attn_st_file *f, const char *name, const float *actual, int64_t n, float atol, float rtol)
{
    attn_tensor *ref = tk_golden_tensor(f, name);
    if (!ref) return false;
    bool ok;
    if (!actual) {
        tk_check_at(false, __FILE__, __LINE__, "%s: no value computed", name);
        ok = false;
    } else if (ref->numel != n) {
        tk_check_at(false, __FILE__, __LINE__, "%s: %lld values computed, golden has %lld", name, (long long)n,
                    (long long)ref->numel);
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

void tk_gradcheck_set_threads(int n)
{
    gradcheck_threads = n;
}

/* loss = sum(out * r) in double, from a fresh forward. */
static double probe_loss(attn_ctx *ctx, tk_forward_fn forward, attn_tensor **inputs, void *user, const float *r,
                         int64_t n)
{
    attn_ctx_reset(ctx);
    attn_rng_seed(attn_ctx_rng(ctx), GRADCHECK_SEED);
    attn_tensor *out = forward(ctx, inputs, user);
    if (!out || out->numel != n) return NAN;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)out->data[i] * r[i];
    return s;
}

bool tk_gradcheck(const char *what, tk_forward_fn forward, attn_tensor **inputs, int n_inputs, void *user, float eps,
                  float atol, float rtol)
{
    attn_ctx *ctx = attn_ctx_new(GRADCHECK_SEED);
    attn_ctx_set_num_threads(ctx, gradcheck_threads);
    attn_rng_seed(attn_ctx_rng(ctx), GRADCHECK_SEED);
    for (int i = 0; i < n_inputs; i++) attn_tensor_zero_grad(inputs[i]);
    attn_tensor *out = forward(ctx, inputs, user);
    if (!out) {
        tk_check_at(false, __FILE__, __LINE__, "gradcheck %s: forward failed: %s", what, attn_last_error());
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
                    fprintf(stderr, "  %s input %d [%lld]: analytic %.7g, numeric %.7g\n", what, i, (long long)j,
                            analytic[j], numeric);
                bad++;
            }
        }
        tk_check_at(bad == 0, __FILE__, __LINE__,
                    "gradcheck %s input %d: %lld of %lld elements off (eps %g, atol %g, rtol %g)", what, i,
                    (long long)bad, (long long)checked, eps, atol, rtol);
        ok = ok && bad == 0;
        free(analytic);
    }
    free(r);
    attn_ctx_free(ctx);
    return ok;
}

/* ---- the program and its text ---- */

int tk_run(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof cmd) return -1;
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

char *tk_read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
        len += got;
        if (len + 1 == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    if (n) *n = len;
    return buf;
}

char *tk_read_text(const char *path)
{
    return tk_read_bytes(path, NULL);
}

bool tk_write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    const bool ok = f && fwrite(data, 1, n, f) == n;
    return f && fclose(f) == 0 && ok;
}

/* A number starts at p: a digit, or a minus before one, not inside a word like "x1". */
static bool number_at(const char *start, const char *p)
{
    bool word_before = p > start && (isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '.');
    return !word_before && (isdigit((unsigned char)*p) || (*p == '-' && isdigit((unsigned char)p[1])));
}

/* Digits after the decimal point of the number at p (0 for an integer). */
static int decimals(const char *p)
{
    p += *p == '-';
    while (isdigit((unsigned char)*p)) p++;
    int n = 0;
    if (*p == '.')
        while (isdigit((unsigned char)p[1 + n])) n++;
    return n;
}

static void print_line(const char *label, const char *start, const char *at)
{
    const char *b = at;
    while (b > start && b[-1] != '\n') b--;
    const char *e = strchr(at, '\n');
    fprintf(stderr, "  %s: %.*s\n", label, (int)(e ? e - b : (long)strlen(b)), b);
}

bool tk_printed_near_boundary(double a, double b, int decimals, const tk_values *near, int n_near)
{
    const double unit = pow(10.0, -decimals), boundary = (a + b) / 2;
    if (decimals <= 0 || fabs(fabs(a - b) - unit) > 1e-3 * unit) return false; /* not one unit apart */
    for (int s = 0; s < n_near; s++) {
        const tk_values *set = &near[s];
        const double scale = set->tol.scale > 0.0 ? set->tol.scale : tk_max_abs(set->v, set->n);
        for (int64_t i = 0; i < set->n; i++) {
            const double v = set->v[i], ulp = nextafterf(fabsf(set->v[i]), INFINITY) - fabsf(set->v[i]);
            double bound = set->tol.rtol * fabs(v) + set->tol.atol * scale;
            if (set->ulps > 0.0) bound = fmin(bound, set->ulps * ulp);
            char text[64];
            snprintf(text, sizeof text, "%.*f", decimals, v);
            const double shown = strtod(text, NULL);
            if ((shown != a && shown != b) || !(fabs(v - boundary) <= bound)) continue;
            printf("note: %.*f for %.*f: the value %.9g lies %.2g ulps from the boundary %.*f "
                   "(its bound: %.3g ulps)\n",
                   decimals, b, decimals, a, v, fabs(v - boundary) / ulp, decimals + 1, boundary, bound / ulp);
            return true;
        }
    }
    return false;
}

bool tk_same_text(const char *what, const char *expected, const char *actual, const tk_values *near, int n_near)
{
    const char *e = expected, *a = actual;
    while (*e || *a) {
        if (number_at(expected, e) && number_at(actual, a)) {
            char *e_end, *a_end;
            double ev = strtod(e, &e_end), av = strtod(a, &a_end);
            int d = decimals(e);
            if (decimals(a) == d && (ev == av || tk_printed_near_boundary(ev, av, d, near, n_near))) {
                e = e_end;
                a = a_end;
                continue;
            }
        } else if (*e == *a) {
            e++;
            a++;
            continue;
        }
        int line = 1;
        for (const char *q = expected; q < e; q++) line += *q == '\n';
        checks_failed++;
        fprintf(stderr, "FAIL %s: the text differs at line %d\n", what, line);
        print_line("expected", expected, e);
        print_line("actual  ", actual, a);
        return false;
    }
    checks_passed++;
    return true;
}

/* The start of the line that begins with prefix (at the start of text or after a newline). */
static const char *line_starting(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, prefix, n)) return p;
    return NULL;
}

char *tk_fenced_block(const char *doc, const char *marker)
{
    char line[256];
    snprintf(line, sizeof line, "%s\n```", marker);
    const char *m = line_starting(doc, line);
    const char *body = m ? strchr(m + strlen(line), '\n') : NULL;
    const char *end = body ? strstr(body, "\n```") : NULL;
    return end ? strndup(body + 1, (size_t)(end - body)) : NULL;
}

char *tk_tour_step_output(const char *out, const char *step)
{
    char head[128];
    snprintf(head, sizeof head, "== %s  ", step);
    const char *b = line_starting(out, head);
    if (!b) return NULL;
    const char *e = strstr(b, "\n\n== ");
    return strndup(b, e ? (size_t)(e - b) + 1 : strlen(b));
}

void tk_tour_doc_check(const char *doc_name, const char *doc, const char *step, const char *out, attn_st_file *saved,
                       tk_tol tol)
{
    char marker[64], command[64], what[160];
    snprintf(marker, sizeof marker, "<!-- tour %s -->", step);
    snprintf(command, sizeof command, "$ attn tour %s\n", step);
    char *block = tk_fenced_block(doc, marker), *actual = tk_tour_step_output(out, step);
    tk_check_at(block && !strncmp(block, command, strlen(command)), __FILE__, __LINE__,
                "%s: a block after \"%s\" starting \"%s\"", doc_name, marker, command);
    tk_check_at(actual != NULL, __FILE__, __LINE__, "attn tour printed step %s", step);
    /* every tensor the step saved, each with its own scale */
    const size_t n_saved = saved ? attn_st_count(saved) : 0;
    attn_tensor **loaded = calloc(n_saved ? n_saved : 1, sizeof *loaded);
    tk_values *near = calloc(n_saved ? n_saved : 1, sizeof *near);
    int n_near = 0;
    for (size_t i = 0; loaded && near && i < n_saved; i++)
        if ((loaded[i] = attn_st_load(saved, attn_st_at(saved, i)->name, NULL)) != NULL)
            near[n_near++] = (tk_values){loaded[i]->data, loaded[i]->numel, tol, TK_PRINTED_ULPS};
    snprintf(what, sizeof what, "%s, %s (bash docs/make_tutorial.sh regenerates it)", doc_name, step);
    if (block && actual && !strncmp(block, command, strlen(command)))
        tk_same_text(what, block + strlen(command), actual, near, n_near);
    for (size_t i = 0; loaded && i < n_saved; i++) attn_tensor_free(loaded[i]);
    free(loaded);
    free(near);
    free(block);
    free(actual);
}
