/* Sharding a batch between ranks, each rank's dropout seed, and the last good checkpoint
 * (train_common.h). */
#include "train_common.h"
#include "dist.h"

#include <unistd.h>

const int64_t *batch_shard(const attn_batches *batches, int64_t b, int64_t per_rank, int64_t *n)
{
    const int64_t start = batches->offsets[b], len = batches->offsets[b + 1] - start;
    int64_t first = (int64_t)dist_rank() * per_rank;
    if (first > len) first = len;
    *n = len - first < per_rank ? len - first : per_rank;
    return batches->rows + start + first;
}

uint64_t rank_dropout_seed(long seed)
{
    return (uint64_t)seed + 17 + (uint64_t)dist_rank() * 0x9E3779B97F4A7C15u;
}

const char *train_last_good(const train_options *t)
{
    if (!t->checkpoint) return "(none: no --checkpoint)";
    return access(t->checkpoint, F_OK) == 0 ? t->checkpoint : "(none: none was written yet)";
}
