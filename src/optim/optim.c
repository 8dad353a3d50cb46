/* Optimizers with torch.optim 1.13's single-tensor update rules, one flat loop over the packed
 * parameter block (every parameter shares the hyper-parameters, so this equals torch's loop
 * over tensors). Per element, with g the gradient, p the parameter and t the step (from 1):
 *   SGD:   d = g + wd p;  momentum: buf = d (t = 1) or mom buf + (1 - dampening) d,
 *          d = nesterov ? d + mom buf : buf;   p -= lr d
 *   Adam:  g += wd p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *          p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 *   AdamW: p *= 1 - lr wd first, then Adam without the wd term.
 * As in torch, scalars are Python doubles (bias corrections computed in double) cast to float
 * where they meet a tensor (this file is built with -ffp-contract=off, so that 1 - lr wd rounds as
 * torch's does), and every tensor op is float32 in torch's order: the element updates are kernels
 * (kernels/optim_update.c), bit-identical to torch's CPU kernels at the levels with FMA
 * (test_optim checks torch's own bits).
 * The state is one block of n_bufs x numel floats, each buffer laid out like the data block:
 * SGD with momentum: momentum_buffer; Adam/AdamW: exp_avg, then exp_avg_sq.
 * A parameter that received no gradient has a zero gradient here (torch would skip it when
 * its .grad is None); the difference shows only for weight decay and Adam's moments.
 */
#include "../core/core_internal.h"
#include "../kernels/kernels_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hyper {
    double lr, weight_decay, momentum, dampening, beta1, beta2, eps;
} hyper;

struct attn_optim {
    attn_params *params;   /* not owned */
    attn_optim_config cfg; /* as given; lr follows attn_optim_set_lr */
    hyper h;               /* cfg's values as the decimals they were written as */
    int64_t steps;
    int64_t numel;
    int n_bufs;      /* 0, 1 (SGD momentum) or 2 (Adam: exp_avg, exp_avg_sq) */
    int num_threads; /* OpenMP threads of the update loop */
    float *state;    /* (n_bufs, numel) */
    char **names;    /* (n_bufs * param count) state names, param-major */
};

/* The shortest decimal that reads back as f, as a double: 0.999f -> 0.999, so 1 - beta2 is
 * the 0.001 torch computes from the Python float rather than 0.00099998713. */
static double as_decimal(float f)
{
    if (!isfinite(f)) return f;
    char buf[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f) return strtod(buf, NULL);
    }
    return f;
}

attn_optim_config attn_optim_defaults(attn_optim_kind kind)
{
    attn_optim_config c = {kind, 1e-3f, 0.0f, 0.0f, 0.0f, false, 0.9f, 0.999f, 1e-8f};
    if (kind == ATTN_OPTIM_SGD) c.lr = NAN; /* torch's `required`: attn_optim_new refuses NaN */
    if (kind == ATTN_OPTIM_ADAMW) c.weight_decay = 1e-2f;
    return c;
}

static const char *kind_name(attn_optim_kind kind)
{
    switch (kind) {
    case ATTN_OPTIM_SGD:
        return "SGD";
    case ATTN_OPTIM_ADAM:
        return "Adam";
    case ATTN_OPTIM_ADAMW:
        return "AdamW";
    }
    return "?";
}

/* torch.optim's own checks (written so that NaN fails them). */
static attn_status check_config(const attn_optim_config *c)
{
    if (c->kind != ATTN_OPTIM_SGD && c->kind != ATTN_OPTIM_ADAM && c->kind != ATTN_OPTIM_ADAMW)
        return attn__fail(ATTN_ERR_ARG, "attn_optim_new: unknown optimizer kind %d", (int)c->kind);
    const char *k = kind_name(c->kind);
    if (!(c->lr >= 0.0f))
        return attn__fail(ATTN_ERR_ARG, "attn_optim_new: %s lr %g, expected >= 0%s", k, (double)c->lr,
                          isnan(c->lr) ? " (SGD's lr must be set)" : "");
    if (!(c->weight_decay >= 0.0f))
        return attn__fail(ATTN_ERR_ARG, "attn_optim_new: %s weight_decay %g, expected >= 0", k,
                          (double)c->weight_decay);
    if (c->kind == ATTN_OPTIM_SGD) {
        if (!(c->momentum >= 0.0f) || !isfinite(c->dampening))
            return attn__fail(ATTN_ERR_ARG,
                              "attn_optim_new: SGD momentum %g, dampening %g, expected momentum >= 0 "
                              "and a finite dampening",
                              (double)c->momentum, (double)c->dampening);
        if (c->nesterov && (c->momentum <= 0.0f || c->dampening != 0.0f))
            return attn__fail(ATTN_ERR_ARG,
                              "attn_optim_new: SGD nesterov requires momentum > 0 and dampening 0 "
                              "(momentum %g, dampening %g)",
                              (double)c->momentum, (double)c->dampening);
        return ATTN_OK;
    }
    if (!(c->eps >= 0.0f))
        return attn__fail(ATTN_ERR_ARG, "attn_optim_new: %s eps %g, expected >= 0", k, (double)c->eps);
    if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f) || !(c->beta2 >= 0.0f && c->beta2 < 1.0f))
        return attn__fail(ATTN_ERR_ARG, "attn_optim_new: %s betas (%g, %g), expected each in [0, 1)", k,
                          (double)c->beta1, (double)c->beta2);
    return ATTN_OK;
}

/* "exp_avg.<param>" etc. for every state buffer of every parameter, param-major. */
static attn_status make_names(attn_optim *o)
{
    static const char *const adam[2] = {"exp_avg", "exp_avg_sq"};
    size_t count = attn_params_count(o->params), n = count * (size_t)o->n_bufs;
    o->names = calloc(n ? n : 1, sizeof *o->names);
    if (!o->names) return attn__fail(ATTN_ERR_NOMEM, "attn_optim_new: out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *kind = o->n_bufs == 1 ? "momentum_buffer" : adam[i % 2];
        const char *param = attn_params_name(o->params, i / (size_t)o->n_bufs);
        size_t len = strlen(kind) + strlen(param) + 2;
        o->names[i] = malloc(len);
        if (!o->names[i]) return attn__fail(ATTN_ERR_NOMEM, "attn_optim_new: out of memory");
        snprintf(o->names[i], len, "%s.%s", kind, param);
    }
    return ATTN_OK;
}

attn_optim *attn_optim_new(attn_params *p, const attn_optim_config *cfg)
{
    if (!p || !cfg) return attn__fail_null(ATTN_ERR_ARG, "attn_optim_new: params or config is NULL");
    if (check_config(cfg) != ATTN_OK || attn_params_pack(p) != ATTN_OK) return NULL;
    attn_optim *o = calloc(1, sizeof *o);
    if (!o) return attn__fail_null(ATTN_ERR_NOMEM, "attn_optim_new: out of memory");
    o->params = p;
    o->cfg = *cfg;
    o->h = (hyper){as_decimal(cfg->lr),        as_decimal(cfg->weight_decay), as_decimal(cfg->momentum),
                   as_decimal(cfg->dampening), as_decimal(cfg->beta1),        as_decimal(cfg->beta2),
                   as_decimal(cfg->eps)};
    o->numel = attn_params_numel(p);
    o->num_threads = attn_default_num_threads();
    o->n_bufs = cfg->kind != ATTN_OPTIM_SGD ? 2 : cfg->momentum != 0.0f ? 1 : 0;
    size_t floats = (size_t)o->n_bufs * (size_t)o->numel;
    o->state = calloc(floats ? floats : 1, sizeof(float));
    if (!o->state) {
        attn_optim_free(o);
        return attn__fail_null(ATTN_ERR_NOMEM,
                               "attn_optim_new: could not allocate %zu floats of "
                               "state",
                               floats);
    }
    if (make_names(o) != ATTN_OK) {
        attn_optim_free(o);
        return NULL;
    }
    return o;
}

void attn_optim_free(attn_optim *opt)
{
    if (!opt) return;
    if (opt->names) {
        size_t n = attn_params_count(opt->params) * (size_t)opt->n_bufs;
        for (size_t i = 0; i < n; i++) free(opt->names[i]);
        free(opt->names);
    }
    free(opt->state);
    free(opt);
}

static void sgd_step(attn_optim *o, float *p, const float *g, int64_t n)
{
    const attn_sgd_consts k = {.weight_decay = (float)o->h.weight_decay,
                               .momentum = (float)o->h.momentum,
                               .keep = (float)(1.0 - o->h.dampening),
                               .neg_lr = (float)-o->h.lr,
                               .first = o->steps == 0,
                               .nesterov = o->cfg.nesterov};
    attn__sgd_update(p, o->state, g, n, &k, o->num_threads); /* state: (numel) momentum_buffer */
}

/* The step's constants from the hyper-parameters and the step number t (from 1), then the update. */
static void adam_step(attn_optim *o, float *p, const float *g, int64_t n, double t)
{
    const hyper *h = &o->h;
    const double bc1 = 1.0 - pow(h->beta1, t), bc2 = 1.0 - pow(h->beta2, t);
    const attn_adam_consts k = {.wd = (float)h->weight_decay,
                                .decay = (float)(1.0 - h->lr * h->weight_decay),
                                .b1 = (float)h->beta1,
                                .a1 = (float)(1.0 - h->beta1),
                                .b2 = (float)h->beta2,
                                .a2 = (float)(1.0 - h->beta2),
                                .bc2_sqrt = (float)sqrt(bc2),
                                .eps = (float)h->eps,
                                .neg_step = (float)-(h->lr / bc1),
                                .adamw = o->cfg.kind == ATTN_OPTIM_ADAMW};
    attn__adam_update(p, o->state, o->state + n, g, n, &k, o->num_threads); /* (numel) exp_avg, exp_avg_sq */
}

attn_status attn_optim_step(attn_optim *opt)
{
    if (!opt) return attn__fail(ATTN_ERR_ARG, "attn_optim_step: optimizer is NULL");
    if (opt->steps == INT64_MAX)
        return attn__fail(ATTN_ERR_STATE, "attn_optim_step: the step count is already %lld, the largest",
                          (long long)opt->steps);
    float *p = attn_params_data_block(opt->params);
    const float *g = attn_params_grad_block(opt->params);
    if (opt->cfg.kind == ATTN_OPTIM_SGD)
        sgd_step(opt, p, g, opt->numel);
    else
        adam_step(opt, p, g, opt->numel, (double)(opt->steps + 1));
    opt->steps++;
    return ATTN_OK;
}

attn_status attn_optim_set_num_threads(attn_optim *opt, int n)
{
    if (!opt) return attn__fail(ATTN_ERR_ARG, "attn_optim_set_num_threads: optimizer is NULL");
    if (n > ATTN_MAX_THREADS)
        return attn__fail(ATTN_ERR_ARG, "attn_optim_set_num_threads: %d threads, at most %d", n, ATTN_MAX_THREADS);
    if (n <= 0) n = attn_default_num_threads();
    if (attn__threads_check(n, "attn_optim_set_num_threads") != ATTN_OK) return attn_last_status();
    opt->num_threads = n;
    return ATTN_OK;
}

/* A negative or NaN lr is refused (the lr is kept). */
attn_status attn_optim_set_lr(attn_optim *opt, float lr)
{
    if (!opt) return attn__null_arg("attn_optim_set_lr");
    if (!(lr >= 0.0f))
        return attn__fail(ATTN_ERR_ARG, "attn_optim_set_lr: lr %g, expected >= 0; kept %g", (double)lr,
                          (double)opt->cfg.lr);
    opt->cfg.lr = lr;
    opt->h.lr = as_decimal(lr);
    return ATTN_OK;
}

float attn_optim_lr(const attn_optim *opt)
{
    return opt ? opt->cfg.lr : (attn__null_arg("attn_optim_lr"), NAN);
}

int64_t attn_optim_step_count(const attn_optim *opt)
{
    return opt ? opt->steps : (attn__null_arg("attn_optim_step_count"), 0);
}

/* Restoring a count of 0 makes SGD's next step start its momentum buffers afresh, as torch's
 * empty state would. A negative count is refused. */
attn_status attn_optim_set_step_count(attn_optim *opt, int64_t steps)
{
    if (!opt) return attn__null_arg("attn_optim_set_step_count");
    if (steps < 0) return attn__fail(ATTN_ERR_ARG, "attn_optim_set_step_count: %lld, expected >= 0", (long long)steps);
    opt->steps = steps;
    return ATTN_OK;
}

size_t attn_optim_state_count(const attn_optim *opt)
{
    return opt ? attn_params_count(opt->params) * (size_t)opt->n_bufs : (attn__null_arg("attn_optim_state_count"), 0);
}

attn_status attn_optim_state_at(const attn_optim *opt, size_t i, const char **name, float **data, int64_t *numel)
{
    size_t count = attn_optim_state_count(opt);
    if (!opt || i >= count)
        return attn__fail(ATTN_ERR_ARG,
                          "attn_optim_state_at: index %zu, the optimizer has %zu "
                          "state tensors",
                          i, count);
    size_t param = i / (size_t)opt->n_bufs, buf = i % (size_t)opt->n_bufs;
    attn_tensor *t = attn_params_at(opt->params, param);
    int64_t offset = t->data - attn_params_data_block(opt->params);
    if (name) *name = opt->names[i];
    if (data) *data = opt->state + (int64_t)buf * opt->numel + offset;
    if (numel) *numel = t->numel;
    return ATTN_OK;
}
