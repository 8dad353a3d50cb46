/* attn bench peak: fused multiply-adds from registers on every thread (bench_peak.h). */
#include "bench_peak.h"

#include <pthread.h>

/* The widest vectors the build targets, as the library's kernels choose them (their simd.h):
 * 16 lanes with AVX-512, 8 with AVX2 + FMA, else 4. GCC's vector extension; in GNU C
 * (-ffp-contract=fast) a * m + c compiles to one fused multiply-add where the CPU has one. */
#if defined(__AVX512F__)
enum { VF_LANES = 16 };
#elif defined(__AVX2__) && defined(__FMA__)
enum { VF_LANES = 8 };
#else
enum { VF_LANES = 4 };
#endif
typedef float vf __attribute__((vector_size(VF_LANES * sizeof(float))));

static inline vf vf_set1(float x) { return (vf){0} + x; }
static inline vf vf_fma(vf a, vf b, vf c) { return a * b + c; }

/* 12 independent chains in named registers: enough to keep 2 FMA pipes of latency 4-6 busy */
enum { PEAK_CHAINS = 12 };
static const long peak_iters = 20000000;

static void *peak_thread(void *out)
{
    const vf m = vf_set1(0.999999f), c = vf_set1(1e-6f);
    vf a0 = vf_set1(0.f), a1 = vf_set1(1.f), a2 = vf_set1(2.f), a3 = vf_set1(3.f);
    vf a4 = vf_set1(4.f), a5 = vf_set1(5.f), a6 = vf_set1(6.f), a7 = vf_set1(7.f);
    vf a8 = vf_set1(8.f), a9 = vf_set1(9.f), a10 = vf_set1(10.f), a11 = vf_set1(11.f);
    for (long i = 0; i < peak_iters; i++) {
        a0 = vf_fma(a0, m, c), a1 = vf_fma(a1, m, c), a2 = vf_fma(a2, m, c), a3 = vf_fma(a3, m, c);
        a4 = vf_fma(a4, m, c), a5 = vf_fma(a5, m, c), a6 = vf_fma(a6, m, c), a7 = vf_fma(a7, m, c);
        a8 = vf_fma(a8, m, c), a9 = vf_fma(a9, m, c), a10 = vf_fma(a10, m, c), a11 = vf_fma(a11, m, c);
    }
    vf sum = (a0 + a1) + (a2 + a3) + (a4 + a5) + (a6 + a7) + (a8 + a9) + (a10 + a11);
    *(float *)out = sum[0];
    return NULL;
}

double bench_peak_flop_per_thread(void) { return 2.0 * PEAK_CHAINS * VF_LANES * (double)peak_iters; }

bool bench_peak_fma(int threads)
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
