/* attn bench peak: fused multiply-adds from registers on every thread (bench_peak.h), in the
 * vectors of one level: BENCH_PEAK_LEVEL (a level of src/kernels/levels_internal.h, compiled with
 * that level's options) names the copy bench_peak_<level>; without it, the compiler flags' level, as
 * bench_peak_build (a build without run-time dispatch: float32 FMAs in its widest vectors). The
 * avx512_bf16 copy runs VDPBF16PS (two bf16 products and two sums per float32 lane): the ceiling
 * of MEDIUM precision's products. */
#include "bench_peak.h"

#include <pthread.h>

/* The widest vectors the flags allow, as the library's kernels choose them (src/kernels/simd_internal.h):
 * 16 lanes with AVX-512, 8 with AVX2 + FMA, else 4 (the sve level's loop too: 128 bits, the
 * least an SVE CPU has). GCC's vector extension; in GNU C (-ffp-contract=fast) a * m + c compiles
 * to one fused multiply-add where the CPU has one. */
#if defined(__AVX512BF16__) && !defined(ATTN_PORTABLE_SIMD)
#include <immintrin.h>
#define BF16_LOOP
enum {
    VF_LANES = 16
};
#define FLAGS_LEVEL ATTN_ISA_AVX512_BF16
#elif defined(__AVX512F__) && !defined(ATTN_PORTABLE_SIMD)
enum {
    VF_LANES = 16
};
#define FLAGS_LEVEL ATTN_ISA_AVX512
#elif defined(__AVX2__) && defined(__FMA__) && !defined(ATTN_PORTABLE_SIMD)
enum {
    VF_LANES = 8
};
#define FLAGS_LEVEL ATTN_ISA_AVX2
#else
enum {
    VF_LANES = 4
};
#if defined(__aarch64__) && defined(__ARM_FEATURE_SVE) && !defined(ATTN_PORTABLE_SIMD)
#define FLAGS_LEVEL ATTN_ISA_SVE
#elif defined(__aarch64__) && !defined(ATTN_PORTABLE_SIMD)
#define FLAGS_LEVEL ATTN_ISA_NEON
#else
#define FLAGS_LEVEL ATTN_ISA_BASELINE
#endif
#endif
typedef float vf __attribute__((vector_size(VF_LANES * sizeof(float))));

/* 12 independent chains in named registers: enough to keep 2 FMA pipes of latency 4-6 busy */
enum {
    PEAK_CHAINS = 12,
    PEAK_ITERS = 20000000
};

/* Opaque to the optimiser: a value it cannot know, so that no chain is folded. (A chain starting
 * at 1.0 is a fixed point of x * 0.999999 + 1e-6 in float32, which GCC computes at compile time
 * and drops from the loop.) */
static inline vf opaque(vf x)
{
#if defined(__aarch64__)
    __asm__("" : "+w"(x)); /* a vector register */
#else
    __asm__("" : "+x"(x));
#endif
    return x;
}

#if defined(BF16_LOOP)
enum {
    FLOP_PER_LANE = 4,
    BF16_CHAINS = 24
}; /* a pair: two multiplies, two adds; 24 chains in 32
                                                  registers: VDPBF16PS's latency is longer */
static inline __m512 chain(__m512 acc, __m512bh a, __m512bh b)
{
    return _mm512_dpbf16_ps(acc, a, b);
}

static void *peak_thread(void *out)
{
    __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f7f3f7f), b = (__m512bh)_mm512_set1_epi32(0x3c003c00);
    __asm__("" : "+v"(a), "+v"(b));
    __m512 c[BF16_CHAINS];
    for (int i = 0; i < BF16_CHAINS; i++) {
        c[i] = _mm512_set1_ps((float)i);
        __asm__("" : "+v"(c[i]));
    }
    for (long i = 0; i < PEAK_ITERS / 2; i++)
#pragma GCC unroll 24
        for (int j = 0; j < BF16_CHAINS; j++) c[j] = chain(c[j], a, b);
    __m512 sum = c[0];
    for (int i = 1; i < BF16_CHAINS; i++) sum = _mm512_add_ps(sum, c[i]);
    *(float *)out = _mm512_cvtss_f32(sum);
    return NULL;
}
#else
enum {
    FLOP_PER_LANE = 2
}; /* a fused multiply-add */

static void *peak_thread(void *out)
{
    const vf m = opaque((vf){0} + 0.999999f), c = opaque((vf){0} + 1e-6f);
    vf a0 = opaque((vf){0} + 0.f), a1 = opaque((vf){0} + 1.f), a2 = opaque((vf){0} + 2.f);
    vf a3 = opaque((vf){0} + 3.f), a4 = opaque((vf){0} + 4.f), a5 = opaque((vf){0} + 5.f);
    vf a6 = opaque((vf){0} + 6.f), a7 = opaque((vf){0} + 7.f), a8 = opaque((vf){0} + 8.f);
    vf a9 = opaque((vf){0} + 9.f), a10 = opaque((vf){0} + 10.f), a11 = opaque((vf){0} + 11.f);
    for (long i = 0; i < PEAK_ITERS; i++) {
        a0 = a0 * m + c, a1 = a1 * m + c, a2 = a2 * m + c, a3 = a3 * m + c;
        a4 = a4 * m + c, a5 = a5 * m + c, a6 = a6 * m + c, a7 = a7 * m + c;
        a8 = a8 * m + c, a9 = a9 * m + c, a10 = a10 * m + c, a11 = a11 * m + c;
    }
    vf sum = (a0 + a1) + (a2 + a3) + (a4 + a5) + (a6 + a7) + (a8 + a9) + (a10 + a11);
    *(float *)out = sum[0];
    return NULL;
}
#endif

static bool peak_run(int threads)
{
    pthread_t ids[BENCH_PEAK_MAX_THREADS];
    float sinks[BENCH_PEAK_MAX_THREADS]; /* each thread's result, so the loop is not optimised away */
    int started = 0;
    while (started < threads && started < BENCH_PEAK_MAX_THREADS &&
           !pthread_create(&ids[started], NULL, peak_thread, &sinks[started]))
        started++;
    for (int i = 0; i < started; i++) pthread_join(ids[i], NULL);
    return started == threads;
}

#define PEAK_PASTE_(a, b) a##b
#define PEAK_PASTE(a, b) PEAK_PASTE_(a, b)
#ifdef BENCH_PEAK_LEVEL
#define PEAK_LOOP PEAK_PASTE(bench_peak_, BENCH_PEAK_LEVEL)
#else
#define PEAK_LOOP bench_peak_build
#endif
extern const bench_peak_loop PEAK_LOOP;
const bench_peak_loop PEAK_LOOP = {FLAGS_LEVEL, VF_LANES,
                                   (double)FLOP_PER_LANE *PEAK_CHAINS *VF_LANES *(double)PEAK_ITERS, peak_run};
