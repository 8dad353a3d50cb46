/* The ctx: arena, tape, modes and the dropout RNG of one training or inference loop. */
#include "core.h"

#include <stdlib.h>

attn_ctx *attn_ctx_new(uint64_t seed)
{
    attn_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return attn__fail_null(ATTN_ERR_NOMEM, "could not allocate a ctx");
    attn_rng_seed(&ctx->rng, seed);
    ctx->grad_enabled = true;
    ctx->training = true;
    ctx->num_threads = attn_default_num_threads();
    return ctx;
}

void attn_ctx_free(attn_ctx *ctx)
{
    if (!ctx) return;
    attn_arena_release(&ctx->arena);
    free(ctx->tape);
    free(ctx);
}

void attn_ctx_reset(attn_ctx *ctx)
{
    if (!ctx) return;
    attn_arena_reset(&ctx->arena);
    ctx->tape_len = 0;
    ctx->tape_consumed = false;
}

void attn_ctx_set_grad_enabled(attn_ctx *ctx, bool on) { ctx->grad_enabled = on; }
bool attn_ctx_grad_enabled(const attn_ctx *ctx) { return ctx->grad_enabled; }
void attn_ctx_set_training(attn_ctx *ctx, bool on) { ctx->training = on; }
bool attn_ctx_training(const attn_ctx *ctx) { return ctx->training; }
attn_rng *attn_ctx_rng(attn_ctx *ctx) { return &ctx->rng; }
size_t attn_ctx_bytes_used(const attn_ctx *ctx) { return ctx->arena.used; }
size_t attn_ctx_bytes_peak(const attn_ctx *ctx) { return ctx->arena.peak; }
