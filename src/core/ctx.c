/* The ctx: arena, tape, modes and the dropout RNG of one training or inference loop. */
#include "core_internal.h"

#include <stdlib.h>
#include <strings.h>

attn_ctx *attn_ctx_new(uint64_t seed)
{
    attn_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return attn__fail_null(ATTN_ERR_NOMEM, "could not allocate a ctx");
    attn_rng_seed(&ctx->rng, seed);
    ctx->grad_enabled = true;
    ctx->training = true;
    ctx->num_threads = attn_default_num_threads();
    if (attn__threads_check(ctx->num_threads, "attn_ctx_new") != ATTN_OK) {
        free(ctx);
        return NULL;
    }
    return ctx;
}

void attn_ctx_free(attn_ctx *ctx)
{
    if (!ctx) return;
    attn__arena_release(&ctx->arena);
    free(ctx->tape);
    free(ctx->bf16_words);
    free(ctx);
}

void attn_ctx_reset(attn_ctx *ctx)
{
    if (!ctx) {
        attn__null_arg("attn_ctx_reset");
        return;
    }
    attn__arena_reset(&ctx->arena);
    ctx->tape_len = 0;
    ctx->tape_consumed = false;
}

attn_status attn_ctx_set_grad_enabled(attn_ctx *ctx, bool on)
{
    if (!ctx) return attn__null_arg("attn_ctx_set_grad_enabled");
    ctx->grad_enabled = on;
    return ATTN_OK;
}

attn_status attn_ctx_set_training(attn_ctx *ctx, bool on)
{
    if (!ctx) return attn__null_arg("attn_ctx_set_training");
    ctx->training = on;
    return ATTN_OK;
}

static const char *const precision_names[] = {"highest", "high", "medium"};
enum {
    PRECISIONS = (int)(sizeof precision_names / sizeof precision_names[0])
};

attn_status attn_ctx_set_matmul_precision(attn_ctx *ctx, attn_precision precision)
{
    if (!ctx) return attn__null_arg("attn_ctx_set_matmul_precision");
    if ((unsigned)precision >= PRECISIONS)
        return attn__fail(ATTN_ERR_ARG, "attn_ctx_set_matmul_precision: %d is not an attn_precision", (int)precision);
    ctx->matmul_precision = precision;
    return ATTN_OK;
}

attn_precision attn_ctx_matmul_precision(const attn_ctx *ctx)
{
    return ctx ? ctx->matmul_precision : (attn__null_arg("attn_ctx_matmul_precision"), ATTN_PRECISION_HIGHEST);
}

const char *attn_precision_name(attn_precision precision)
{
    return (unsigned)precision < PRECISIONS ? precision_names[precision] : "?";
}

attn_status attn_precision_from_name(const char *name, attn_precision *precision)
{
    if (!name || !precision) return attn__null_arg("attn_precision_from_name");
    for (int i = 0; i < PRECISIONS; i++)
        if (!strcasecmp(name, precision_names[i])) {
            *precision = (attn_precision)i;
            return ATTN_OK;
        }
    return attn__fail(ATTN_ERR_ARG, "attn_precision_from_name: \"%s\" is not highest, high or medium", name);
}

/* Getters: a NULL ctx records ATTN_ERR_ARG and reads as false, NULL or 0. */
bool attn_ctx_grad_enabled(const attn_ctx *ctx)
{
    return ctx ? ctx->grad_enabled : (attn__null_arg("attn_ctx_grad_enabled"), false);
}
bool attn_ctx_training(const attn_ctx *ctx)
{
    return ctx ? ctx->training : (attn__null_arg("attn_ctx_training"), false);
}
attn_rng *attn_ctx_rng(attn_ctx *ctx)
{
    return ctx ? &ctx->rng : (attn__null_arg("attn_ctx_rng"), NULL);
}
size_t attn_ctx_bytes_used(const attn_ctx *ctx)
{
    return ctx ? ctx->arena.used : (attn__null_arg("attn_ctx_bytes_used"), 0);
}
size_t attn_ctx_bytes_peak(const attn_ctx *ctx)
{
    return ctx ? ctx->arena.peak : (attn__null_arg("attn_ctx_bytes_peak"), 0);
}
