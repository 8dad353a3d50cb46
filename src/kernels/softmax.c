/* Softmax and log-softmax over the last dim of a (rows, cols) block, forward and backward.
 *   softmax:     y = exp(x - max) / sum exp(x - max)      dx += y * (dy - sum(dy * y))
 *   log_softmax: y = x - max - log sum exp(x - max)       dx += dy - exp(y) * sum(dy)
 * A row of all -inf (every key masked) gives 0 (softmax) or -inf (log_softmax) and gradient 0.
 *
 * Two versions of each. *_ref is the formula as written, one row at a time, sums in double; it
 * is kept forever and the fast one is tested against it. The fast one runs rows in parallel
 * (OpenMP, big blocks only) and keeps each row in LANES independent partial sums and maxima
 * with fixed-count inner loops, which -O2 vectorises without reassociating anything (no
 * -ffast-math), with the plain-arithmetic exp of vmath_internal.h so that it vectorises too. */
#include "dispatch_internal.h" /* built once per level (attn_cpu_isa) */
#include "kernels_internal.h"
#include "vmath_internal.h"

#include <math.h>
#include <string.h>

#define LANES VMATH_LANES

/* ---- reference ---- */

static float row_max_ref(const float *x, int64_t n)
{
    float m = -INFINITY;
    for (int64_t c = 0; c < n; c++) m = x[c] > m || x[c] != x[c] ? x[c] : m; /* NaN sticks */
    return m;
}

void attn__softmax_rows_ref(float *y, const float *x, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float max = row_max_ref(xr, cols);
        if (max == -INFINITY) { /* fully masked row */
            for (int64_t c = 0; c < cols; c++) yr[c] = 0.0f;
            continue;
        }
        double sum = 0.0;
        for (int64_t c = 0; c < cols; c++) {
            yr[c] = expf(xr[c] - max);
            sum += yr[c];
        }
        for (int64_t c = 0; c < cols; c++) yr[c] = (float)(yr[c] / sum);
    }
}

void attn__log_softmax_rows_ref(float *y, const float *x, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float max = row_max_ref(xr, cols);
        if (max == -INFINITY) {
            for (int64_t c = 0; c < cols; c++) yr[c] = -INFINITY;
            continue;
        }
        double sum = 0.0;
        for (int64_t c = 0; c < cols; c++) sum += exp((double)xr[c] - max);
        float lse = (float)log(sum);
        for (int64_t c = 0; c < cols; c++) yr[c] = (xr[c] - max) - lse;
    }
}

void attn__softmax_rows_backward_ref(float *dx, const float *dy, const float *y, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *dyr = dy + r * cols, *yr = y + r * cols;
        double dot = 0.0; /* sum dy * y */
        for (int64_t c = 0; c < cols; c++) dot += (double)dyr[c] * yr[c];
        for (int64_t c = 0; c < cols; c++) dx[r * cols + c] += yr[c] * (dyr[c] - (float)dot);
    }
}

void attn__log_softmax_rows_backward_ref(float *dx, const float *dy, const float *y, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *dyr = dy + r * cols, *yr = y + r * cols;
        if (row_max_ref(yr, cols) == -INFINITY) continue; /* fully masked row: no gradient */
        double sum = 0.0;                                 /* sum dy */
        for (int64_t c = 0; c < cols; c++) sum += dyr[c];
        for (int64_t c = 0; c < cols; c++) dx[r * cols + c] += dyr[c] - expf(yr[c]) * (float)sum;
    }
}

/* ---- fast ---- */

static float lanes_sum(const float *s)
{
    float sum = 0.0f;
    for (int k = 0; k < LANES; k++) sum += s[k];
    return sum;
}

static void row_scale(float *y, float a, int64_t n)
{
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) y[c + k] *= a;
    for (; c < n; c++) y[c] *= a;
}

static void row_shift(float *restrict y, const float *restrict x, float b, int64_t n)
{
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) y[c + k] = x[c + k] + b;
    for (; c < n; c++) y[c] = x[c] + b;
}

static void row_fill(float *y, float v, int64_t n)
{
    for (int64_t c = 0; c < n; c++) y[c] = v;
}

static void softmax_row(float *restrict y, const float *restrict x, int64_t n)
{
    float max = attn__row_max(x, n);
    if (max == -INFINITY) {
        row_fill(y, 0.0f, n);
        return;
    }
    float sum = attn__exp_shift_sum(y, x, max, n);
    row_scale(y, 1.0f / sum, n);
}

static void log_softmax_row(float *restrict y, const float *restrict x, int64_t n)
{
    float max = attn__row_max(x, n);
    if (max == -INFINITY) {
        row_fill(y, -INFINITY, n);
        return;
    }
    float lse = max + logf(attn__exp_shift_sum(NULL, x, max, n));
    row_shift(y, x, -lse, n);
}

/* sum a * b */
static float row_dot(const float *a, const float *b, int64_t n)
{
    float s[LANES] = {0};
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) s[k] += a[c + k] * b[c + k];
    for (; c < n; c++) s[0] += a[c] * b[c];
    return lanes_sum(s);
}

static float row_sum(const float *a, int64_t n)
{
    float s[LANES] = {0};
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) s[k] += a[c + k];
    for (; c < n; c++) s[0] += a[c];
    return lanes_sum(s);
}

static void softmax_row_backward(float *restrict dx, const float *restrict dy, const float *restrict y, int64_t n)
{
    float dot = row_dot(dy, y, n);
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) dx[c + k] += y[c + k] * (dy[c + k] - dot);
    for (; c < n; c++) dx[c] += y[c] * (dy[c] - dot);
}

static void log_softmax_row_backward(float *restrict dx, const float *restrict dy, const float *restrict y, int64_t n)
{
    if (attn__row_max(y, n) == -INFINITY) return; /* fully masked row: no gradient */
    float sum = row_sum(dy, n);
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) dx[c + k] += dy[c + k] - attn_exp_nonpos(y[c + k]) * sum;
    for (; c < n; c++) dx[c] += dy[c] - attn_exp_nonpos(y[c]) * sum;
}

void attn__softmax_rows(float *y, const float *x, int64_t rows, int64_t cols, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads) if (rows > 1 && rows * cols >= ATTN_PARALLEL_MIN / 2)
    for (int64_t r = 0; r < rows; r++) softmax_row(y + r * cols, x + r * cols, cols);
}

void attn__log_softmax_rows(float *y, const float *x, int64_t rows, int64_t cols, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads) if (rows > 1 && rows * cols >= ATTN_PARALLEL_MIN / 2)
    for (int64_t r = 0; r < rows; r++) log_softmax_row(y + r * cols, x + r * cols, cols);
}

void attn__softmax_rows_backward(float *dx, const float *dy, const float *y, int64_t rows, int64_t cols, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads) if (rows > 1 && rows * cols >= ATTN_PARALLEL_MIN / 2)
    for (int64_t r = 0; r < rows; r++) softmax_row_backward(dx + r * cols, dy + r * cols, y + r * cols, cols);
}

void attn__log_softmax_rows_backward(float *dx, const float *dy, const float *y, int64_t rows, int64_t cols,
                                     int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads) if (rows > 1 && rows * cols >= ATTN_PARALLEL_MIN / 2)
    for (int64_t r = 0; r < rows; r++) log_softmax_row_backward(dx + r * cols, dy + r * cols, y + r * cols, cols);
}
