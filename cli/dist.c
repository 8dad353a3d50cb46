/* The ranks of an MPI job for data-parallel training (see dist.h). The only file that includes
 * <mpi.h>: each function handles the one-process case first, so the build without MPI
 * (ATTN_WITH_MPI undefined) is the same code minus the MPI calls. */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ATTN_WITH_MPI
#include <mpi.h>

enum {
    CHUNK = 1 << 30
}; /* MPI counts are int: larger buffers go in pieces */
#endif

static int rank_id = 0, rank_count = 1;

/* The size an MPI launcher announced in the environment (0: none). */
static long launcher_size(void)
{
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(names[i]);
        if (v) return strtol(v, NULL, 10);
    }
    return getenv("PMIX_RANK") ? 1 : 0;
}

bool dist_init(int *argc, char ***argv)
{
#ifdef ATTN_WITH_MPI
    if (launcher_size() == 0) return true;
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_id);
    MPI_Comm_size(MPI_COMM_WORLD, &rank_count);
    if (rank_id != 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "attn: rank %d cannot send its stdout to /dev/null\n", rank_id);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return true;
#else
    (void)argc, (void)argv;
    if (launcher_size() <= 1) return true;
    fprintf(stderr,
            "attn: started as one of %ld MPI ranks, but this attn was built without MPI; "
            "install libopenmpi-dev and rebuild (cmake -DATTN_MPI=ON) to train across processes\n",
            launcher_size());
    return false;
#endif
}

int dist_finish(int code)
{
#ifdef ATTN_WITH_MPI
    int on = 0;
    MPI_Initialized(&on);
    if (!on) return code;
    if (code != 0 && rank_count > 1) {
        fprintf(stderr, "attn: rank %d of %d stopped with exit status %d; stopping every rank\n", rank_id, rank_count,
                code);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    MPI_Finalize();
#endif
    return code;
}

int dist_rank(void)
{
    return rank_id;
}
int dist_size(void)
{
    return rank_count;
}

void dist_broadcast_bytes(void *data, size_t bytes)
{
    if (rank_count == 1) return;
#ifdef ATTN_WITH_MPI
    for (size_t at = 0; at < bytes; at += CHUNK)
        MPI_Bcast((char *)data + at, (int)(bytes - at < CHUNK ? bytes - at : CHUNK), MPI_BYTE, 0, MPI_COMM_WORLD);
#else
    (void)data, (void)bytes;
#endif
}

void dist_broadcast_floats(float *data, int64_t n)
{
    dist_broadcast_bytes(data, (size_t)n * sizeof *data);
}

void dist_sum(double *v, int n)
{
    if (rank_count == 1) return;
#ifdef ATTN_WITH_MPI
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
    (void)v, (void)n;
#endif
}

void dist_average_grads(float *grad, int64_t n, double weight, double total_weight)
{
    if (rank_count == 1) return;
    const float scale = (float)(weight / total_weight);
    for (int64_t i = 0; i < n; i++) grad[i] *= scale;
#ifdef ATTN_WITH_MPI
    for (int64_t at = 0; at < n; at += CHUNK)
        MPI_Allreduce(MPI_IN_PLACE, grad + at, (int)(n - at < CHUNK ? n - at : CHUNK), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
#endif
}

bool dist_any(bool flag)
{
    int v = flag;
#ifdef ATTN_WITH_MPI
    if (rank_count > 1) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
#endif
    return v != 0;
}

/* dist_gather (from each rank's bytes to rank 0's all, in rank order) and dist_scatter (back) */
static void exchange(const void *from, void *to, size_t bytes, bool gather)
{
    if (rank_count == 1) {
        memcpy(to, from, bytes);
        return;
    }
#ifdef ATTN_WITH_MPI
    if (gather)
        MPI_Gather(from, (int)bytes, MPI_BYTE, to, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    else
        MPI_Scatter(from, (int)bytes, MPI_BYTE, to, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
#else
    (void)gather;
#endif
}

void dist_gather(const void *mine, void *all, size_t bytes)
{
    exchange(mine, all, bytes, true);
}

void dist_scatter(const void *all, void *mine, size_t bytes)
{
    exchange(all, mine, bytes, false);
}
