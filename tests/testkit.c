/* The test kit (see testkit.h). */
#include "testkit.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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

char *tk_read_text(const char *path)
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
    return buf;
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

bool tk_same_text(const char *what, const char *expected, const char *actual)
{
    const char *e = expected, *a = actual;
    while (*e || *a) {
        if (number_at(expected, e) && number_at(actual, a)) {
            char *e_end, *a_end;
            double ev = strtod(e, &e_end), av = strtod(a, &a_end);
            int d = decimals(e);
            double tol = d ? 1.5 * pow(10.0, -d) : 0.0;
            if (decimals(a) == d && fabs(ev - av) <= tol) {
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

void tk_tour_doc_check(const char *doc_name, const char *doc, const char *step, const char *out)
{
    char marker[64], command[64], what[160];
    snprintf(marker, sizeof marker, "<!-- tour %s -->", step);
    snprintf(command, sizeof command, "$ attn tour %s\n", step);
    char *block = tk_fenced_block(doc, marker), *actual = tk_tour_step_output(out, step);
    tk_check_at(block && !strncmp(block, command, strlen(command)), __FILE__, __LINE__,
                "%s: a block after \"%s\" starting \"%s\"", doc_name, marker, command);
    tk_check_at(actual != NULL, __FILE__, __LINE__, "attn tour printed step %s", step);
    snprintf(what, sizeof what, "%s, %s (bash docs/make_tutorial.sh regenerates it)", doc_name, step);
    if (block && actual && !strncmp(block, command, strlen(command)))
        tk_same_text(what, block + strlen(command), actual);
    free(block);
    free(actual);
}
