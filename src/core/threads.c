/* Thread counts. There is no process-wide setting: each ctx carries the count its ops use
 * (num_threads clauses on every parallel region, and the GEMM's split), set from OpenMP's
 * default when the ctx is made. OpenBLAS is pinned to one thread once (kernels/gemm.c).
 *
 * libgomp ends the process ("Thread creation failed") when it cannot start the threads of a
 * parallel region, which a small address space or process limit makes happen at counts that
 * ATTN_MAX_THREADS allows. So a count is proven before it is taken: its threads are started
 * at once and joined (with the stack size libgomp gives its own: the default, or OMP_STACKSIZE),
 * and then one empty parallel region of that count makes libgomp start its own team, which it
 * keeps for later regions of that count or fewer; a count that cannot start is an error returned
 * to the caller instead. Above OMP_THREAD_LIMIT, no team grows: the limit is what is proven. */
#include "core_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

int attn_default_num_threads(void)
{
#ifdef _OPENMP
    int n = omp_get_max_threads();
    return n < 1 ? 1 : n > ATTN_MAX_THREADS ? ATTN_MAX_THREADS : n;
#else
    return 1;
#endif
}

#ifdef _OPENMP
typedef struct gate {
    pthread_mutex_t lock;
    pthread_cond_t open;
    bool go;
} gate;

static void *wait_at_gate(void *arg)
{
    gate *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->go) pthread_cond_wait(&g->open, &g->lock);
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

/* OMP_STACKSIZE (or GOMP_STACKSIZE) as libgomp reads it: a number, K when no unit follows;
 * 0 when neither is set or readable. */
static size_t omp_stacksize(void)
{
    const char *s = getenv("OMP_STACKSIZE");
    if (!s) s = getenv("GOMP_STACKSIZE");
    if (!s) return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    while (*end == ' ') end++;
    unsigned shift = *end == 'B' || *end == 'b'   ? 0
                     : *end == 'M' || *end == 'm' ? 20
                     : *end == 'G' || *end == 'g' ? 30
                                                  : 10;
    return errno || end == s || v > (SIZE_MAX >> shift) ? 0 : (size_t)(v << shift);
}

/* ATTN_OK when n threads can run at once here (the caller's and n - 1 more); libgomp's team of
 * n is then started. who names the caller in the message. */
static attn_status threads_start(int n, const char *who)
{
    const int limit = omp_get_thread_limit(); /* OMP_THREAD_LIMIT: no team is larger */
    if (n > limit) n = limit;
    if (n <= 1) return ATTN_OK;
    pthread_t *ids = malloc((size_t)(n - 1) * sizeof *ids);
    if (!ids) return attn__fail(ATTN_ERR_NOMEM, "%s: out of memory for %d threads", who, n);
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    size_t stack = omp_stacksize();
    if (stack) pthread_attr_setstacksize(&attr, stack);
    int started = 0, err = 0;
    while (started < n - 1 && (err = pthread_create(&ids[started], &attr, wait_at_gate, &g)) == 0) started++;
    pthread_mutex_lock(&g.lock);
    g.go = true;
    pthread_cond_broadcast(&g.open);
    pthread_mutex_unlock(&g.lock);
    for (int i = 0; i < started; i++) pthread_join(ids[i], NULL);
    pthread_attr_destroy(&attr);
    free(ids);
    if (err)
        return attn__fail(ATTN_ERR_NOMEM, "%s: %d threads cannot run here: only %d could start (%s); use fewer", who, n,
                          started + 1, strerror(err));
    int volatile team = 0; /* libgomp starts the team now, while we know it can */
#pragma omp parallel num_threads(n)
    {
#pragma omp master
        team = omp_get_num_threads();
    }
    (void)team;
    return ATTN_OK;
}
#endif

attn_status attn__threads_check(int n, const char *who)
{
#ifdef _OPENMP
    return threads_start(n, who);
#else
    (void)n, (void)who;
    return ATTN_OK;
#endif
}

attn_status attn_ctx_set_num_threads(attn_ctx *ctx, int n)
{
    if (!ctx) return attn__fail(ATTN_ERR_ARG, "attn_ctx_set_num_threads: ctx is NULL");
    if (n > ATTN_MAX_THREADS)
        return attn__fail(ATTN_ERR_ARG, "attn_ctx_set_num_threads: %d threads, at most %d", n, ATTN_MAX_THREADS);
#ifdef _OPENMP
    if (n <= 0) n = attn_default_num_threads();
    if (attn__threads_check(n, "attn_ctx_set_num_threads") != ATTN_OK) return attn_last_status();
    ctx->num_threads = n;
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
