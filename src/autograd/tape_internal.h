/* Private: the autograd tape. Each differentiable op computes its forward, then, when grad is
 * enabled and an input requires grad, records a node: (backward fn, inputs, output, saved
 * state). attn_backward walks the nodes in reverse creation order. */
#ifndef ATTN_TAPE_H
#define ATTN_TAPE_H

#include "../core/core_internal.h"

/* Propagates node->out->grad into node->grad[i], the grads of the inputs that require grad (+=).
 * It reads node->out->grad and never writes it: attn_backward_from lends the caller's const dout
 * there. */
typedef attn_status (*attn_backward_fn)(attn_ctx *ctx, attn_node *node);

struct attn_node {
    const char *op; /* for messages */
    attn_backward_fn backward;
    attn_tensor *out;
    attn_tensor **in; /* n_in inputs, in the arena */
    float **grad;     /* n_in: in[i]'s grad buffer when it requires grad, else NULL; allocated by
                         attn_backward_from before the node's backward runs */
    int n_in;
    void *saved; /* op-specific state, zero-filled, in the arena */
};

/* true when the op must be recorded: grad enabled and some input requires grad. */
bool attn__needs_grad(const attn_ctx *ctx, attn_tensor *const *in, int n_in);
/* Records a node for out (which becomes requires_grad) with saved_bytes of zeroed state.
 * Returns NULL with an error set when memory runs out. */
attn_node *attn__record(attn_ctx *ctx, const char *op, attn_backward_fn backward, attn_tensor *out,
                        attn_tensor *const *in, int n_in, size_t saved_bytes);

#endif
