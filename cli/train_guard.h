/* Training safety: non-finite parameters never reach a checkpoint, and a test hook that makes
 * them so at a chosen step (tests/robustness.sh checks that training stops with the step number
 * and that the last good checkpoint still loads). */
#ifndef ATTN_CLI_TRAIN_GUARD_H
#define ATTN_CLI_TRAIN_GUARD_H

#include "cli.h"

/* ATTN_OK, or ATTN_ERR_NUMERIC (message in attn_last_error(), naming the parameter, the position
 * and path) when a parameter holds NaN or Inf: the checkpoint at path must not be replaced.
 * epoch counts from 0; batch is the number of batches of that epoch done (0: the epoch's end). */
attn_status train_guard_params(const attn_params *p, const char *path, long epoch, int64_t batch);

/* Test hook: when the environment has ATTN_TEST_NAN_AFTER_STEP=N, the parameters become NaN
 * right after the update of global step N (counted from 1 over all epochs), as an exploding
 * update would leave them. Returns true when it fired. */
bool train_guard_fault(attn_params *p, int64_t global_step);

#endif
