/* Thread count for our OpenMP loops. OpenBLAS is pinned to one thread: our kernels call it from
 * inside parallel regions, and its own pool would oversubscribe the cores. Large GEMMs outside
 * parallel regions go through attn_gemm, which chooses the BLAS thread count per call. */
#include "core.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static int num_threads = 0; /* 0: not set, use the OpenMP default */

void attn_set_num_threads(int n)
{
    num_threads = n > 0 ? n : 0;
#ifdef _OPENMP
    if (n > 0) omp_set_num_threads(n);
#endif
}

int attn_get_num_threads(void)
{
#ifdef _OPENMP
    return num_threads > 0 ? num_threads : omp_get_max_threads();
#else
    return 1;
#endif
}
