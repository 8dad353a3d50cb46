/* Data-parallel training across processes: the ranks of an MPI job (mpirun -np N attn ...).
 * Rank 0 reports and writes files; every rank trains on its own shard of every batch and the
 * gradients are averaged after each backward. Built without MPI (ATTN_MPI off), or started
 * without an MPI launcher, the process is rank 0 of 1 and every collective returns at once.
 * Any MPI failure (a rank that died, a broken link) stops the whole job: MPI's default error
 * handler, MPI_ERRORS_ARE_FATAL, is kept. */
#ifndef ATTN_CLI_DIST_H
#define ATTN_CLI_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Joins the MPI job when an MPI launcher started this process (mpirun/mpiexec of OpenMPI or
 * MPICH, srun: it sees OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK); otherwise MPI is never
 * initialised. On ranks other than 0, stdout goes to /dev/null: rank 0 alone reports. False
 * (with a message) when a launcher started several ranks of an attn built without MPI. */
bool dist_init(int *argc, char ***argv);
/* Ends the job with exit status code: MPI_Finalize when code is 0; otherwise, with more than
 * one rank, names this rank on stderr and stops every rank with MPI_Abort (the others may be
 * waiting in a collective for this one). Returns code. */
int dist_finish(int code);

int dist_rank(void); /* 0 .. dist_size() - 1 */
int dist_size(void);

/* Rank 0's n floats / bytes copied to every rank. */
void dist_broadcast_floats(float *data, int64_t n);
void dist_broadcast_bytes(void *data, size_t bytes);
/* v[0..n) summed over the ranks, in place on every rank. */
void dist_sum(double *v, int n);
/* grad <- sum over ranks r of grad_r * weight_r / total_weight, on every rank. With grad_r the
 * gradient of rank r's mean loss over its weight_r examples (or tokens) and total_weight their
 * sum, this is the gradient of the mean loss over the global batch, shards even or not. */
void dist_average_grads(float *grad, int64_t n, double weight, double total_weight);
/* True on every rank when flag is true on any rank. */
bool dist_any(bool flag);
/* Each rank's `bytes` at mine, in rank order into all (dist_size() * bytes) on rank 0. */
void dist_gather(const void *mine, void *all, size_t bytes);
/* The reverse: rank r receives all + r * bytes (all is read on rank 0 only). */
void dist_scatter(const void *all, void *mine, size_t bytes);

#endif
