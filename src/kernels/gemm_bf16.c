/* GEMM with bf16 operands and float32 sums (ATTN_PRECISION_MEDIUM, kernels_internal.h): A and B rounded to
 * bf16 by attn__bf16_pack_row_pairs (the kernels' level; in pair words, which are bf16 arrays in
 * memory order), then oneDNN's matmul primitive on them (its bf16 GEMM kernels, VDPBF16PS on an
 * AVX512_BF16 CPU), the product scaled by alpha and added to beta C by the primitive's own
 * attributes. The primitive leaves the sizes and the row strides to run time, so one serves every
 * shape: making one costs 0.3 ms, and a training run's shapes change with every batch (a primitive
 * per shape made the translator's MEDIUM steps spend more on making them than bf16 saved). Which
 * of each matrix's strides is 1 (its transpose) stays fixed: with both left to run time oneDNN 2.6
 * takes its scalar reference, a hundred times slower, and a primitive whose kernels are the
 * reference is never used. Cached by the transposes, alpha, beta and the thread count, for the
 * process (16 keys; past them a call makes and destroys its own). Built once (not per level):
 * oneDNN chooses its own kernels. */
#include "kernels_internal.h"

#include <pthread.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(ATTN_GEMM_DNNL)
#include <oneapi/dnnl/dnnl.h>

/* A cached primitive: what is fixed when it is made (its kernels may split the work for the
 * thread count of that moment: the count is part of the key) */
typedef struct gemm_key {
    bool trans_a, trans_b;
    float alpha, beta;
    int threads;
} gemm_key;

enum {
    CACHE_SIZE = 16
};
static struct {
    bool made; /* the entry holds a key and its answer, kept for the process: a thread
                              may be running the primitive, so none is ever destroyed */
    gemm_key key;
    dnnl_primitive_t prim; /* NULL: oneDNN declined the key (not asked again) */
} cache[CACHE_SIZE];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine; /* NULL when oneDNN has no CPU engine */

static void engine_init(void)
{
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) engine = NULL;
}

/* The memory descriptors of A (M, K), B (K, N) bf16 and C (M, N) float32, their strides in
 * elements; every entry DNNL_RUNTIME_DIM_VAL for the primitive's own */
static bool describe(dnnl_memory_desc_t md[3], const int64_t dims[3], const int64_t strides[3][2])
{
    const dnnl_dims_t a_dims = {dims[0], dims[2]}, b_dims = {dims[2], dims[1]}, c_dims = {dims[0], dims[1]};
    const dnnl_dims_t a_st = {strides[0][0], strides[0][1]}, b_st = {strides[1][0], strides[1][1]};
    const dnnl_dims_t c_st = {strides[2][0], strides[2][1]};
    return dnnl_memory_desc_init_by_strides(&md[0], 2, a_dims, dnnl_bf16, a_st) == dnnl_success &&
           dnnl_memory_desc_init_by_strides(&md[1], 2, b_dims, dnnl_bf16, b_st) == dnnl_success &&
           dnnl_memory_desc_init_by_strides(&md[2], 2, c_dims, dnnl_f32, c_st) == dnnl_success;
}

/* dst = alpha src weights + beta dst, the sizes and row strides given at run time; NULL when oneDNN
 * will not, or only with its reference kernels */
static dnnl_primitive_t make_primitive(const gemm_key *g)
{
    const int64_t any = DNNL_RUNTIME_DIM_VAL, dims[3] = {any, any, any};
    const int64_t strides[3][2] = {
        {g->trans_a ? 1 : any, g->trans_a ? any : 1}, {g->trans_b ? 1 : any, g->trans_b ? any : 1}, {any, 1}};
    dnnl_memory_desc_t md[3];
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_matmul_desc_t desc;
    bool ok = describe(md, dims, strides) &&
              dnnl_matmul_desc_init(&desc, &md[0], &md[1], NULL, &md[2]) == dnnl_success &&
              dnnl_primitive_attr_create(&attr) == dnnl_success &&
              (g->alpha == 1.0f || dnnl_primitive_attr_set_output_scales(attr, 1, 0, &g->alpha) == dnnl_success);
    if (ok && g->beta != 0.0f)
        ok = dnnl_post_ops_create(&post) == dnnl_success && dnnl_post_ops_append_sum(post, g->beta) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, post) == dnnl_success;
    const char *impl = "";
    if (ok)
        ok = dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL) == dnnl_success &&
             dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
             strncmp(impl, "ref", 3) != 0 && dnnl_primitive_create(&prim, pd) == dnnl_success;
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (post) dnnl_post_ops_destroy(post);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return ok ? prim : NULL;
}

/* The cached primitive for g, made on a miss; NULL when oneDNN will not make it. */
static bool same_key(const gemm_key *a, const gemm_key *b)
{
    return a->trans_a == b->trans_a && a->trans_b == b->trans_b && a->alpha == b->alpha && a->beta == b->beta &&
           a->threads == b->threads;
}

/* The primitive for g: the cache's, made on a miss; with the cache full, one of the caller's own
 * (*owned: destroy it after use). NULL when oneDNN will not make it. */
static dnnl_primitive_t primitive_for(const gemm_key *g, bool *owned)
{
    *owned = false;
    pthread_mutex_lock(&cache_lock);
    int slot = -1;
    for (int i = 0; i < CACHE_SIZE; i++) {
        if (cache[i].made && same_key(&cache[i].key, g)) {
            dnnl_primitive_t p = cache[i].prim;
            pthread_mutex_unlock(&cache_lock);
            return p;
        }
        if (!cache[i].made && slot < 0) slot = i;
    }
    dnnl_primitive_t p = make_primitive(g);
    if (slot >= 0)
        cache[slot].made = true, cache[slot].key = *g, cache[slot].prim = p;
    else
        *owned = p != NULL;
    pthread_mutex_unlock(&cache_lock);
    return p;
}

/* rows x cols floats, row stride ld, into pair words (the bf16 array's rows 2 ceil(cols / 2) long) */
static void to_bf16(uint32_t *dst, const float *src, int64_t ld, int64_t rows, int64_t cols, int threads)
{
    const int64_t words = (cols + 1) / 2, block = 64;
#pragma omp parallel for schedule(static) num_threads(threads) if (rows * cols > ATTN_PARALLEL_MIN)
    for (int64_t r0 = 0; r0 < rows; r0 += block)
        attn__bf16_pack_row_pairs(dst + r0 * words, words, src + r0 * ld, ld, rows - r0 < block ? rows - r0 : block,
                                  cols);
}

bool attn__gemm_bf16(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb, int64_t m,
                     int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha, float beta, uint32_t *scratch,
                     int threads)
{
    pthread_once(&engine_once, engine_init);
    if (!engine || m == 0 || n == 0 || k == 0) return false;
#ifdef _OPENMP
    if (omp_in_parallel()) threads = 1;
    /* oneDNN spreads over omp_get_max_threads(), when it makes a primitive and when it runs one:
     * the ctx's count for this call */
    const int before = omp_get_max_threads();
    if (threads != before) omp_set_num_threads(threads);
#endif
    /* the stored matrices: A (M, K) or (K, M), B (K, N) or (N, K), their bf16 copies' rows
     * 2 ceil(cols / 2) apart */
    const int64_t a_r = trans_a ? k : m, a_c = trans_a ? m : k, b_r = trans_b ? n : k, b_c = trans_b ? k : n;
    const int64_t a_ld = 2 * ((a_c + 1) / 2), b_ld = 2 * ((b_c + 1) / 2);
    const gemm_key g = {trans_a, trans_b, alpha, beta, threads};
    bool owned;
    dnnl_primitive_t prim = primitive_for(&g, &owned);
    uint32_t *a16 = scratch, *b16 = scratch + a_r * ((a_c + 1) / 2);
    const int64_t dims[3] = {m, n, k};
    const int64_t strides[3][2] = {
        {trans_a ? 1 : a_ld, trans_a ? a_ld : 1}, {trans_b ? 1 : b_ld, trans_b ? b_ld : 1}, {ldc, 1}};
    dnnl_memory_desc_t md[3];
    dnnl_memory_t am = NULL, bm = NULL, cm = NULL;
    dnnl_stream_t stream = NULL;
    bool ok = prim && describe(md, dims, strides) && dnnl_memory_create(&am, &md[0], engine, a16) == dnnl_success &&
              dnnl_memory_create(&bm, &md[1], engine, b16) == dnnl_success &&
              dnnl_memory_create(&cm, &md[2], engine, c) == dnnl_success &&
              dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success;
    if (ok) {
        to_bf16(a16, a, lda, a_r, a_c, threads);
        to_bf16(b16, b, ldb, b_r, b_c, threads);
        const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
        ok = dnnl_primitive_execute(prim, stream, 3, args) == dnnl_success && dnnl_stream_wait(stream) == dnnl_success;
    }
#ifdef _OPENMP
    if (threads != before) omp_set_num_threads(before);
#endif
    if (owned) dnnl_primitive_destroy(prim);
    if (stream) dnnl_stream_destroy(stream);
    if (am) dnnl_memory_destroy(am);
    if (bm) dnnl_memory_destroy(bm);
    if (cm) dnnl_memory_destroy(cm);
    return ok; /* false: oneDNN failed before its kernels ran (a scratchpad it could not allocate),
                * and the caller's float32 GEMM gives C from the same inputs */
}

#else /* OpenBLAS has no bf16 GEMM in Debian's build: MEDIUM's products of the layers stay float32 */

bool attn__gemm_bf16(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb, int64_t m,
                     int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha, float beta, uint32_t *scratch,
                     int threads)
{
    (void)c, (void)ldc, (void)a, (void)lda, (void)b, (void)ldb, (void)m, (void)n, (void)k, (void)trans_a;
    (void)trans_b, (void)alpha, (void)beta, (void)scratch, (void)threads;
    return false;
}

#endif

int64_t attn__gemm_bf16_scratch_words(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b)
{
    const int64_t a = trans_a ? k * ((m + 1) / 2) : m * ((k + 1) / 2),
                  b = trans_b ? n * ((k + 1) / 2) : k * ((n + 1) / 2);
    return a + b;
}
