/* Elementwise helpers (kernels_internal.h): big blocks split over the threads so that no element's sum
 * depends on how many there are. */
#include "dispatch_internal.h" /* built once per level (attn_cpu_isa) */
#include "kernels_internal.h"

#define COL_BLOCK 64 /* columns per task of attn__col_sums_add */

void attn__add_into(float *y, const float *x, int64_t n, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void attn__col_sums_add(float *sums, const float *x, int64_t rows, int64_t cols, int threads)
{
    const int64_t blocks = (cols + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) num_threads(threads) if (blocks > 1 && rows * cols > ATTN_PARALLEL_MIN)
    for (int64_t blk = 0; blk < blocks; blk++) {
        const int64_t c0 = blk * COL_BLOCK, width = cols - c0 < COL_BLOCK ? cols - c0 : COL_BLOCK;
        float acc[COL_BLOCK]; /* (width) the block's sums, in registers rather than re-read
                               * from sums after every row (which may alias x for the compiler) */
        for (int64_t c = 0; c < width; c++) acc[c] = sums[c0 + c];
        if (width == COL_BLOCK)
            for (int64_t r = 0; r < rows; r++) {
                const float *xr = x + r * cols + c0;
                for (int c = 0; c < COL_BLOCK; c++) acc[c] += xr[c];
            }
        else
            for (int64_t r = 0; r < rows; r++) {
                const float *xr = x + r * cols + c0;
                for (int64_t c = 0; c < width; c++) acc[c] += xr[c];
            }
        for (int64_t c = 0; c < width; c++) sums[c0 + c] = acc[c];
    }
}
