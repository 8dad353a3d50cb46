/* The tape and the reverse sweep. */
#include "tape_internal.h"

#include <stdlib.h>
#include <string.h>

bool attn__needs_grad(const attn_ctx *ctx, attn_tensor *const *in, int n_in)
{
    if (!ctx->grad_enabled) return false;
    for (int i = 0; i < n_in; i++)
        if (in[i] && in[i]->requires_grad) return true;
    return false;
}

attn_node *attn__record(attn_ctx *ctx, const char *op, attn_backward_fn backward, attn_tensor *out,
                        attn_tensor *const *in, int n_in, size_t saved_bytes)
{
    for (int i = 0; i < n_in; i++) /* a gradient in this arena would outlive a reset of the other ctx */
        if (in[i] && in[i]->requires_grad && attn__foreign(ctx, in[i]))
            return attn__fail_null(ATTN_ERR_ARG,
                                   "%s: input %d requires grad and was made in another ctx (or in "
                                   "this one before attn_ctx_reset); an op records only tensors of its own ctx, "
                                   "parameters and the caller's tensors",
                                   op, i + 1);
    if (ctx->tape_len == ctx->tape_cap) {
        size_t cap = ctx->tape_cap ? ctx->tape_cap * 2 : 256;
        attn_node **tape = realloc(ctx->tape, cap * sizeof *tape);
        if (!tape) return attn__fail_null(ATTN_ERR_NOMEM, "%s: could not grow the tape", op);
        ctx->tape = tape;
        ctx->tape_cap = cap;
    }
    attn_node *node = attn__arena_alloc(&ctx->arena, sizeof *node);
    attn_tensor **ins = attn__arena_alloc(&ctx->arena, (size_t)n_in * sizeof *ins);
    float **grad = attn__arena_calloc(&ctx->arena, (size_t)n_in * sizeof *grad, 1);
    void *saved = saved_bytes ? attn__arena_calloc(&ctx->arena, saved_bytes, 1) : NULL;
    if (!node || !ins || !grad || (saved_bytes && !saved)) return NULL;
    memcpy(ins, in, (size_t)n_in * sizeof *ins);
    node->op = op;
    node->backward = backward;
    node->out = out;
    node->in = ins;
    node->grad = grad;
    node->n_in = n_in;
    node->saved = saved;
    out->requires_grad = true;
    out->node = node;
    ctx->tape[ctx->tape_len++] = node;
    return node;
}

/* node->grad: the grad buffers of the node's inputs that require grad */
static attn_status node_grads(attn_ctx *ctx, attn_node *node)
{
    for (int i = 0; i < node->n_in; i++) {
        attn_tensor *t = node->in[i];
        const bool wanted = t && t->requires_grad;
        node->grad[i] = wanted ? attn__grad(ctx, t) : NULL;
        if (wanted && !node->grad[i]) return attn_last_status();
    }
    return ATTN_OK;
}

attn_status attn_backward_from(attn_ctx *ctx, attn_tensor *out, const float *dout)
{
    if (!ctx || !out) return attn__fail(ATTN_ERR_ARG, "attn_backward: ctx or output is NULL");
    if (attn__foreign(ctx, out))
        return attn__fail(ATTN_ERR_ARG, "attn_backward: the output was made in another ctx (or in this one before "
                                        "attn_ctx_reset); differentiate it in the ctx its ops ran in");
    if (ctx->tape_consumed)
        return attn__fail(ATTN_ERR_STATE, "attn_backward: this graph was already differentiated; run the forward "
                                          "again (after attn_ctx_reset) before another backward");
    if (!out->requires_grad)
        return attn__fail(ATTN_ERR_STATE, "attn_backward: the output does not depend on any tensor that requires "
                                          "grad (or grad was disabled during the forward)");
    const bool lend = dout && out->node && !out->grad; /* dout is out's gradient for the sweep, read in place */
    if (lend) {
        out->grad = (float *)(uintptr_t)dout; /* the backward functions only read it (tape_internal.h) */
    } else {
        float *g = attn__grad(ctx, out);
        if (!g) return attn_last_status();
        if (dout)
            for (int64_t i = 0; i < out->numel; i++) g[i] += dout[i];
        else
            for (int64_t i = 0; i < out->numel; i++) g[i] += 1.0f;
    }
    ctx->tape_consumed = true;
    attn_status st = ATTN_OK;
    for (size_t k = ctx->tape_len; st == ATTN_OK && k-- > 0;) {
        attn_node *node = ctx->tape[k];
        if (!node->out->grad) continue; /* nothing flowed into this op */
        st = node_grads(ctx, node);
        if (st == ATTN_OK) st = node->backward(ctx, node);
    }
    if (lend) out->grad = NULL;
    return st;
}

attn_status attn_backward(attn_ctx *ctx, attn_tensor *loss)
{
    if (loss && loss->numel != 1) {
        char buf[64];
        return attn__fail(ATTN_ERR_SHAPE,
                          "attn_backward: the loss has shape %s, expected one element (use "
                          "attn_backward_from to seed a tensor)",
                          attn_shape_str(loss, buf, sizeof buf));
    }
    return attn_backward_from(ctx, loss, NULL);
}
