/* What every attn bench workload shares (bench.h): the names of the modes and random inputs. */
#include "bench.h"

const char *const bench_mode_names[] = {"fwd", "fwdbwd", NULL};

attn_tensor *bench_randn(attn_rng *rng, int ndim, const int64_t *shape, bool requires_grad)
{
    attn_tensor *t = attn_tensor_alloc(ndim, shape);
    if (t) {
        attn_tensor_fill_normal(t, rng, 0, 1);
        attn_tensor_set_requires_grad(t, requires_grad);
    }
    return t;
}
