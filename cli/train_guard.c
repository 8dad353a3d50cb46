/* Training safety (see train_guard.h). */
#include "train_guard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

attn_status train_guard_params(const attn_params *p, const char *path, long epoch, int64_t batch)
{
    for (size_t i = 0; i < attn_params_count(p); i++) {
        const attn_tensor *t = attn_params_at(p, i);
        int64_t e = 0;
        while (e < t->numel && isfinite(t->data[e])) e++;
        if (e == t->numel) continue;
        char where[64];
        if (batch > 0)
            snprintf(where, sizeof where, "epoch %ld, step %lld", epoch + 1, (long long)batch);
        else
            snprintf(where, sizeof where, "end of epoch %ld", epoch);
        return attn_set_error(ATTN_ERR_NUMERIC,
                              "%s: parameter \"%s\" holds NaN or Inf after the update "
                              "(diverged; try a lower --lr); stopped without saving, %s keeps the last "
                              "good checkpoint",
                              where, attn_params_name(p, i), path ? path : "(no checkpoint)");
    }
    return ATTN_OK;
}

bool train_guard_fault(attn_params *p, int64_t global_step)
{
    static long at = -2;
    if (at == -2) {
        const char *e = getenv("ATTN_TEST_NAN_AFTER_STEP");
        at = e ? strtol(e, NULL, 10) : -1;
    }
    if (at < 1 || global_step != at || attn_params_count(p) == 0) return false;
    attn_tensor *t = attn_params_at(p, 0);
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = NAN;
    return true;
}
