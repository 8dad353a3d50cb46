/* The leaf modules: Linear, Embedding, LayerNorm and Conv1d, each a pair of init (register named
 * parameters, initialised with PyTorch 1.13's distributions) and forward (one op).
 *   Linear(in, out):        weight (out, in) ~ U(-1/sqrt(in), 1/sqrt(in))   (kaiming_uniform,
 *                           a = sqrt 5), bias (out) ~ the same U;  y = x W^T + b
 *   Embedding(num, dim):    weight (num, dim) ~ N(0, 1), row padding_idx zero;  y = W[ids]
 *   LayerNorm(dim, eps):    weight (dim) = 1, bias (dim) = 0;  y = norm(x) * weight + bias
 *   Conv1d(in, out, k, p):  weight (out, in, k), bias (out) ~ U(+-1/sqrt(in * k));  y = conv(x)
 * Names are "<prefix>.weight" and "<prefix>.bias", or "weight"/"bias" for an empty prefix.
 * Weights are drawn before biases, each in row-major order, from the caller's rng; with rng NULL
 * nothing is drawn (the values stay 0, LayerNorm's 1 and 0): for loading a state_dict.
 */
#include "../core/core_internal.h"
#include "nn_internal.h"

#include <math.h>
#include <stdio.h>

void attn__param_name(char *out, size_t n, const char *prefix, const char *name)
{
    snprintf(out, n, "%s%s%s", prefix, *prefix ? "." : "", name);
}

/* Registers "<prefix>.<leaf>" (or "<leaf>") in p. */
static attn_tensor *add_param(attn_params *p, const char *prefix, const char *leaf, int ndim, const int64_t *shape)
{
    char name[512];
    bool bare = !prefix || !*prefix;
    int n = snprintf(name, sizeof name, "%s%s%s", bare ? "" : prefix, bare ? "" : ".", leaf);
    if (n < 0 || (size_t)n >= sizeof name)
        return attn__fail_null(ATTN_ERR_ARG, "parameter name \"%s.%s\" is longer than %zu bytes", bare ? "" : prefix,
                               leaf, sizeof name - 1);
    return attn_params_add(p, name, ndim, shape);
}

/* weight and optional bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as torch's Linear/Conv1d
 * reset_parameters (kaiming_uniform with a = sqrt 5 gives exactly this bound). */
static attn_status add_fan_in_uniform(attn_tensor **weight, attn_tensor **bias, attn_params *p, const char *prefix,
                                      int ndim, const int64_t *shape, bool with_bias, int64_t fan_in, attn_rng *rng)
{
    float bound = (float)(1.0 / sqrt((double)fan_in));
    *weight = add_param(p, prefix, "weight", ndim, shape);
    if (!*weight) return attn_last_status();
    if (rng) attn_tensor_fill_uniform(*weight, rng, -bound, bound);
    *bias = NULL;
    if (!with_bias) return ATTN_OK;
    *bias = add_param(p, prefix, "bias", 1, shape);
    if (!*bias) return attn_last_status();
    if (rng) attn_tensor_fill_uniform(*bias, rng, -bound, bound);
    return ATTN_OK;
}

/* ---- Linear ---- */

static attn_status init_linear(attn_linear_layer *m, attn_params *p, const char *prefix, int64_t in_features,
                               int64_t out_features, bool bias, attn_rng *rng)
{
    if (!m || !p) return attn__fail(ATTN_ERR_ARG, "attn_linear_init: module or params is NULL");
    if (in_features < 1 || out_features < 1)
        return attn__fail(ATTN_ERR_ARG, "attn_linear_init(%s): in %lld, out %lld, expected >= 1", prefix ? prefix : "",
                          (long long)in_features, (long long)out_features);
    m->in_features = in_features;
    m->out_features = out_features;
    int64_t shape[2] = {out_features, in_features};
    return add_fan_in_uniform(&m->weight, &m->bias, p, prefix, 2, shape, bias, in_features, rng);
}

attn_status attn_linear_init(attn_linear_layer *m, attn_params *p, const char *prefix, int64_t in_features,
                             int64_t out_features, bool bias, attn_rng *rng)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    return attn__params_settle(p, n0, init_linear(m, p, prefix, in_features, out_features, bias, rng));
}

attn_tensor *attn_linear_forward(attn_ctx *ctx, const attn_linear_layer *m, attn_tensor *x)
{
    if (!m) return attn__fail_null(ATTN_ERR_ARG, "attn_linear_forward: module is NULL");
    return attn_linear(ctx, x, m->weight, m->bias);
}

/* ---- Embedding ---- */

static attn_status init_embedding(attn_embedding_layer *m, attn_params *p, const char *prefix, int64_t num, int64_t dim,
                                  int64_t padding_idx, attn_rng *rng)
{
    if (!m || !p) return attn__fail(ATTN_ERR_ARG, "attn_embedding_init: module or params is NULL");
    if (num < 1 || dim < 1)
        return attn__fail(ATTN_ERR_ARG, "attn_embedding_init(%s): num %lld, dim %lld, expected >= 1",
                          prefix ? prefix : "", (long long)num, (long long)dim);
    if (padding_idx >= num)
        return attn__fail(ATTN_ERR_ARG,
                          "attn_embedding_init(%s): padding_idx %lld is outside [0, %lld) (use a "
                          "negative value for none)",
                          prefix ? prefix : "", (long long)padding_idx, (long long)num);
    int64_t shape[2] = {num, dim};
    m->weight = add_param(p, prefix, "weight", 2, shape);
    if (!m->weight) return attn_last_status();
    if (rng) attn_tensor_fill_normal(m->weight, rng, 0.0f, 1.0f);
    m->num_embeddings = num;
    m->embedding_dim = dim;
    m->padding_idx = padding_idx < 0 ? -1 : padding_idx;
    if (m->padding_idx >= 0)
        for (int64_t j = 0; j < dim; j++) m->weight->data[m->padding_idx * dim + j] = 0.0f;
    return ATTN_OK;
}

attn_status attn_embedding_init(attn_embedding_layer *m, attn_params *p, const char *prefix, int64_t num, int64_t dim,
                                int64_t padding_idx, attn_rng *rng)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    return attn__params_settle(p, n0, init_embedding(m, p, prefix, num, dim, padding_idx, rng));
}

attn_tensor *attn_embedding_forward(attn_ctx *ctx, const attn_embedding_layer *m, const int64_t *ids, int ndim,
                                    const int64_t *shape)
{
    if (!m) return attn__fail_null(ATTN_ERR_ARG, "attn_embedding_forward: module is NULL");
    return attn_embedding(ctx, m->weight, ids, ndim, shape, m->padding_idx);
}

/* ---- LayerNorm ---- */

static attn_status init_layer_norm(attn_layer_norm_layer *m, attn_params *p, const char *prefix, int64_t dim, float eps)
{
    if (!m || !p) return attn__fail(ATTN_ERR_ARG, "attn_layer_norm_init: module or params is NULL");
    if (dim < 1 || !(eps >= 0.0f))
        return attn__fail(ATTN_ERR_ARG,
                          "attn_layer_norm_init(%s): dim %lld, eps %g, expected "
                          "dim >= 1 and eps >= 0",
                          prefix ? prefix : "", (long long)dim, (double)eps);
    m->weight = add_param(p, prefix, "weight", 1, &dim);
    if (!m->weight) return attn_last_status();
    m->bias = add_param(p, prefix, "bias", 1, &dim);
    if (!m->bias) return attn_last_status();
    for (int64_t j = 0; j < dim; j++) m->weight->data[j] = 1.0f; /* the bias stays 0 */
    m->dim = dim;
    m->eps = eps;
    return ATTN_OK;
}

attn_status attn_layer_norm_init(attn_layer_norm_layer *m, attn_params *p, const char *prefix, int64_t dim, float eps)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    return attn__params_settle(p, n0, init_layer_norm(m, p, prefix, dim, eps));
}

attn_tensor *attn_layer_norm_forward(attn_ctx *ctx, const attn_layer_norm_layer *m, attn_tensor *x)
{
    if (!m) return attn__fail_null(ATTN_ERR_ARG, "attn_layer_norm_forward: module is NULL");
    return attn_layer_norm(ctx, x, m->weight, m->bias, m->eps);
}

/* ---- Conv1d ---- */

static attn_status init_conv1d(attn_conv1d_layer *m, attn_params *p, const char *prefix, int64_t in_channels,
                               int64_t out_channels, int64_t kernel_size, int64_t padding, bool bias, attn_rng *rng)
{
    if (!m || !p) return attn__fail(ATTN_ERR_ARG, "attn_conv1d_init: module or params is NULL");
    if (in_channels < 1 || out_channels < 1 || kernel_size < 1 || padding < 0)
        return attn__fail(ATTN_ERR_ARG,
                          "attn_conv1d_init(%s): in %lld, out %lld, kernel %lld, padding %lld; "
                          "expected sizes >= 1 and padding >= 0",
                          prefix ? prefix : "", (long long)in_channels, (long long)out_channels, (long long)kernel_size,
                          (long long)padding);
    int64_t fan_in;
    if (!attn__mul_ok(in_channels, kernel_size, &fan_in))
        return attn__fail(ATTN_ERR_NOMEM, "attn_conv1d_init(%s): in * kernel overflows", prefix ? prefix : "");
    m->in_channels = in_channels;
    m->out_channels = out_channels;
    m->kernel_size = kernel_size;
    m->padding = padding;
    int64_t shape[3] = {out_channels, in_channels, kernel_size};
    return add_fan_in_uniform(&m->weight, &m->bias, p, prefix, 3, shape, bias, fan_in, rng);
}

attn_status attn_conv1d_init(attn_conv1d_layer *m, attn_params *p, const char *prefix, int64_t in_channels,
                             int64_t out_channels, int64_t kernel_size, int64_t padding, bool bias, attn_rng *rng)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    return attn__params_settle(p, n0,
                               init_conv1d(m, p, prefix, in_channels, out_channels, kernel_size, padding, bias, rng));
}

attn_tensor *attn_conv1d_forward(attn_ctx *ctx, const attn_conv1d_layer *m, attn_tensor *x)
{
    if (!m) return attn__fail_null(ATTN_ERR_ARG, "attn_conv1d_forward: module is NULL");
    return attn_conv1d(ctx, x, m->weight, m->bias, m->padding);
}
