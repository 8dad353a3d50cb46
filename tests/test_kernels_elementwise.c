/* The threaded elementwise kernels against their one-thread twins:
 *   - attn__dropout_mask against attn__dropout_mask_ref bit for bit (lengths around its block of
 *     64 and past the threading threshold; p 1e-7, 0.1, 0.5, 0.999, 1), the same mask on 1 and 2
 *     threads, a kept fraction within 5 standard deviations of 1 - p, different keys giving
 *     different masks, and the fused attention's dropout drawing the same bits for the same key;
 *   - attn__col_sums_add and attn__add_into against plain loops, bit for bit (same order of sums);
 *   - attn__cross_entropy_rows (+ backward) against the double-precision twin on rows of 1, 7, 17
 *     and 6434 classes with label smoothing 0 and 0.1, ignored rows, logits of +-80, a row of
 *     -inf with one finite logit, and a NaN row (NaN in both).
 * Cross-entropy tolerance: loss atol 2e-6 + rtol 2e-6 per row (the fast sum of exps is float:
 * ~sqrt(C) 2^-24 relative, log of it 1e-6 at C = 6434), gradient atol 1e-7 + rtol 2e-5 with
 * scale 1 (2-ulp exp, the float sum, the division). */
#include "testkit.h"
#include "kernels/attention_internal.h"
#include "kernels/kernels_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void dropout_masks(void)
{
    const int64_t lens[] = {1, 63, 64, 65, 1000, 200003};
    const float ps[] = {1e-7f, 0.1f, 0.5f, 0.999f, 1.0f};
    uint8_t *fast = malloc(200003), *ref = malloc(200003), *two = malloc(200003);
    int mismatches = 0, total = 0;
    for (int li = 0; li < 6; li++)
        for (int pi = 0; pi < 5; pi++) {
            const int64_t n = lens[li];
            attn__dropout_mask(fast, n, 0x1234u + (uint64_t)pi, ps[pi], 1);
            attn__dropout_mask(two, n, 0x1234u + (uint64_t)pi, ps[pi], 2);
            attn__dropout_mask_ref(ref, n, 0x1234u + (uint64_t)pi, ps[pi]);
            mismatches += memcmp(fast, ref, (size_t)n) != 0 || memcmp(two, ref, (size_t)n) != 0;
            total++;
            if (n < 200003) continue;
            int64_t kept = 0;
            for (int64_t i = 0; i < n; i++) kept += ref[i];
            double q = 1.0 - ps[pi], sd = sqrt((double)n * q * (1.0 - q));
            TK_CHECK(fabs((double)kept - (double)n * q) <= 5.0 * sd + 1.0,
                     "dropout p %g: kept %lld of %lld, expected %.0f +- %.0f", (double)ps[pi], (long long)kept,
                     (long long)n, (double)n * q, 5.0 * sd);
        }
    TK_CHECK(mismatches == 0, "dropout masks: %d of %d differ from the reference or between thread counts", mismatches,
             total);
    attn__dropout_mask(fast, 1000, 1, 0.5f, 2);
    attn__dropout_mask(two, 1000, 2, 0.5f, 2);
    TK_CHECK(memcmp(fast, two, 1000) != 0, "dropout masks: keys 1 and 2 give the same mask");
    /* the fused attention's element (b, h, i, j) is index ((b H + h) Lq + i) Lk + j of one mask */
    sdpa_problem p = {.batch = 2, .heads = 3, .lq = 5, .lk = 7, .dropout_p = 0.3f, .dropout_seed = 99};
    attn__dropout_mask(fast, 2 * 3 * 5 * 7, 99, 0.3f, 2);
    int same = 0;
    for (int64_t idx = 0; idx < 2 * 3 * 5 * 7; idx++) {
        int64_t j = idx % 7, i = idx / 7 % 5, h = idx / 35 % 3, b = idx / 105;
        same += (sdpa_dropout_scale(&p, b, h, i, j) != 0.0f) == fast[idx];
    }
    TK_CHECK(same == 210, "the fused attention's dropout differs from attn__dropout_mask at %d of 210", 210 - same);
    free(fast), free(ref), free(two);
}

static void sums(void)
{
    const int64_t rows = 1031, cols = 203;
    float *x = malloc((size_t)(rows * cols) * sizeof(float));
    float fast[203], ref[203], *y = malloc((size_t)(rows * cols) * sizeof(float)),
                               *y_ref = malloc((size_t)(rows * cols) * sizeof(float));
    attn_rng rng;
    attn_rng_seed(&rng, 3);
    for (int64_t i = 0; i < rows * cols; i++) x[i] = attn_rng_normal(&rng), y[i] = y_ref[i] = attn_rng_normal(&rng);
    for (int64_t c = 0; c < cols; c++) fast[c] = ref[c] = (float)c;
    attn__col_sums_add(fast, x, rows, cols, 2);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) ref[c] += x[r * cols + c];
    TK_CHECK(!memcmp(fast, ref, sizeof fast), "attn__col_sums_add differs from the row-by-row loop");
    attn__add_into(y, x, rows * cols, 2);
    for (int64_t i = 0; i < rows * cols; i++) y_ref[i] += x[i];
    TK_CHECK(!memcmp(y, y_ref, (size_t)(rows * cols) * sizeof(float)), "attn__add_into differs from the loop");
    free(x), free(y), free(y_ref);
}

/* One batch of rows with C classes: fast against reference, forward and backward. */
static void cross_entropy_case(int64_t classes, double eps)
{
    enum {
        ROWS = 9
    };
    float *z = malloc((size_t)(ROWS * classes) * sizeof(float));
    float *dz = calloc((size_t)(ROWS * classes), sizeof(float)),
          *dz_ref = calloc((size_t)(ROWS * classes), sizeof(float));
    int64_t t[ROWS];
    float max[ROWS], max_ref[ROWS];
    double sum[ROWS], sum_ref[ROWS], loss[ROWS], loss_ref[ROWS];
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)classes);
    for (int64_t r = 0; r < ROWS; r++) {
        for (int64_t c = 0; c < classes; c++)
            z[r * classes + c] = r == 3   ? 80.0f * attn_rng_normal(&rng) /* huge logits */
                                 : r == 4 ? (c == classes / 2 ? 1.5f : -INFINITY)
                                          : 3.0f * attn_rng_normal(&rng);
        t[r] = r == 5 ? -100 : (int64_t)attn_rng_below(&rng, (uint32_t)classes); /* row 5 ignored */
        if (r == 4) t[r] = classes / 2;
    }
    attn__cross_entropy_rows(max, sum, loss, z, t, ROWS, classes, -100, eps, 2);
    attn__cross_entropy_rows_ref(max_ref, sum_ref, loss_ref, z, t, ROWS, classes, -100, eps);
    char what[96];
    float lf[ROWS], lr[ROWS];
    for (int r = 0; r < ROWS; r++) lf[r] = (float)loss[r], lr[r] = (float)loss_ref[r];
    snprintf(what, sizeof what, "cross entropy C %lld eps %g: loss", (long long)classes, eps);
    tk_close(what, lf, lr, ROWS, 2e-6f, 2e-6f);
    attn__cross_entropy_rows_backward(dz, z, max, sum, t, ROWS, classes, -100, eps, 1.0, 2);
    attn__cross_entropy_rows_backward_ref(dz_ref, z, max_ref, sum_ref, t, ROWS, classes, -100, eps, 1.0);
    snprintf(what, sizeof what, "cross entropy C %lld eps %g: gradient", (long long)classes, eps);
    tk_close(what, dz, dz_ref, ROWS * classes, 1e-7f, 2e-5f);
    /* a NaN logit: NaN loss and gradients in both */
    z[2 * classes] = NAN;
    attn__cross_entropy_rows(max, sum, loss, z, t, ROWS, classes, -100, eps, 2);
    attn__cross_entropy_rows_ref(max_ref, sum_ref, loss_ref, z, t, ROWS, classes, -100, eps);
    TK_CHECK(isnan(loss[2]) && isnan(loss_ref[2]), "cross entropy C %lld: a NaN logit gives loss %g (reference %g)",
             (long long)classes, loss[2], loss_ref[2]);
    free(z), free(dz), free(dz_ref);
}

int main(void)
{
    dropout_masks();
    sums();
    const int64_t classes[] = {1, 7, 17, 6434};
    for (int i = 0; i < 4; i++) {
        cross_entropy_case(classes[i], 0.0);
        cross_entropy_case(classes[i], 0.1);
    }
    return tk_finish("test_kernels_elementwise");
}
