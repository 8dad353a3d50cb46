/* Thread counts. There is no process-wide setting: each ctx carries the count its ops use
 * (num_threads clauses on every parallel region, and the GEMM's split), set from OpenMP's
 * default when the ctx is made. OpenBLAS is pinned to one thread once (kernels/gemm.c). */
#include "core.h"

#ifdef _OPENMP
#include <omp.h>
#endif

int attn_default_num_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

attn_status attn_ctx_set_num_threads(attn_ctx *ctx, int n)
{
    if (!ctx) return attn__fail(ATTN_ERR_ARG, "attn_ctx_set_num_threads: ctx is NULL");
    if (n > ATTN_MAX_THREADS)
        return attn__fail(ATTN_ERR_ARG, "attn_ctx_set_num_threads: %d threads, at most %d", n,
                          ATTN_MAX_THREADS);
#ifdef _OPENMP
    ctx->num_threads = n > 0 ? n : attn_default_num_threads();
#else
    ctx->num_threads = 1; /* serial build: the loops run on the calling thread */
#endif
    return ATTN_OK;
}

int attn_ctx_num_threads(const attn_ctx *ctx)
{
    if (!ctx) {
        attn__fail(ATTN_ERR_ARG, "attn_ctx_num_threads: ctx is NULL");
        return 0;
    }
    return ctx->num_threads;
}
