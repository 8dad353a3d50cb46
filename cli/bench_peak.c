/* attn bench peak: fused multiply-adds from registers on every thread (bench_peak.h). */
#include "bench_peak.h"

#include <pthread.h>

#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 peak_vec; /* 16 lanes */
#define PEAK_SET(x) _mm512_set1_ps(x)
#define PEAK_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define PEAK_SINK(a) _mm512_reduce_add_ps(a)
enum { PEAK_LANES = 16 };
#elif defined(__FMA__)
#include <immintrin.h>
typedef __m256 peak_vec; /* 8 lanes */
#define PEAK_SET(x) _mm256_set1_ps(x)
#define PEAK_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define PEAK_SINK(a) _mm256_cvtss_f32(a)
enum { PEAK_LANES = 8 };
#else
typedef float peak_vec; /* no FMA instructions: multiply-adds the compiler schedules */
#define PEAK_SET(x) (x)
#define PEAK_FMA(a, b, c) ((a) * (b) + (c))
#define PEAK_SINK(a) (a)
enum { PEAK_LANES = 1 };
#endif

/* 12 independent chains in named registers: enough to keep 2 FMA pipes of latency 4-6 busy */
enum { PEAK_CHAINS = 12 };
static const long peak_iters = 20000000;

static void *peak_thread(void *out)
{
    const peak_vec m = PEAK_SET(0.999999f), c = PEAK_SET(1e-6f);
    peak_vec a0 = PEAK_SET(0.f), a1 = PEAK_SET(1.f), a2 = PEAK_SET(2.f), a3 = PEAK_SET(3.f), a4 = PEAK_SET(4.f),
             a5 = PEAK_SET(5.f), a6 = PEAK_SET(6.f), a7 = PEAK_SET(7.f), a8 = PEAK_SET(8.f), a9 = PEAK_SET(9.f),
             a10 = PEAK_SET(10.f), a11 = PEAK_SET(11.f);
    for (long i = 0; i < peak_iters; i++) {
        a0 = PEAK_FMA(a0, m, c), a1 = PEAK_FMA(a1, m, c), a2 = PEAK_FMA(a2, m, c), a3 = PEAK_FMA(a3, m, c);
        a4 = PEAK_FMA(a4, m, c), a5 = PEAK_FMA(a5, m, c), a6 = PEAK_FMA(a6, m, c), a7 = PEAK_FMA(a7, m, c);
        a8 = PEAK_FMA(a8, m, c), a9 = PEAK_FMA(a9, m, c), a10 = PEAK_FMA(a10, m, c), a11 = PEAK_FMA(a11, m, c);
    }
    *(float *)out = PEAK_SINK(a0) + PEAK_SINK(a1) + PEAK_SINK(a2) + PEAK_SINK(a3) + PEAK_SINK(a4) +
                    PEAK_SINK(a5) + PEAK_SINK(a6) + PEAK_SINK(a7) + PEAK_SINK(a8) + PEAK_SINK(a9) +
                    PEAK_SINK(a10) + PEAK_SINK(a11);
    return NULL;
}

double bench_peak_flop_per_thread(void) { return 2.0 * PEAK_CHAINS * PEAK_LANES * (double)peak_iters; }

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
