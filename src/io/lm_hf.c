/* Hugging Face's layouts of attn_lm (what attn.h states): a folder of config.json and
 * model.safetensors, as GPT2LMHeadModel and LlamaForCausalLM save them.
 *   GPT2: "transformer.wte.weight", "transformer.wpe.weight", "transformer.h.<i>.{ln_1, attn.c_attn,
 *         attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}.{weight, bias}", "transformer.ln_f.*": attn's own
 *         names, but HF's Conv1D keeps its weights (in, out), the transpose of attn's Linear (out, in);
 *   LLAMA: "model.embed_tokens.weight", "model.layers.<i>.{input_layernorm, self_attn.{q,k,v,o}_proj,
 *         post_attention_layernorm, mlp.{gate,up,down}_proj}.weight", "model.norm.weight",
 *         "lm_head.weight"; rotated halves (HF's rotate_half): a model of pairs has its q and k rows
 *         reordered into halves on the way out. */
#include "io_internal.h"
#include "json_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CONFIG_MAX_BYTES (1 << 20)

typedef enum row_order {
    SAME,      /* attn's rows as HF's */
    TRANSPOSE, /* HF's Conv1D: (in, out) */
    HALVES,    /* q, k: HF's rotated halves from attn's pairs (a model of rope_interleaved) */
} row_order;

/* One parameter: attn's tensor and HF's name for it */
typedef struct hf_param {
    attn_tensor *t;
    char name[96];
    row_order order;
} hf_param;

/* Every parameter of m with its HF name, malloc'd (*n of them) */
static hf_param *hf_params(const attn_lm *m, int *n)
{
    const attn_lm_config *c = &m->cfg;
    hf_param *p = calloc((size_t)(16 * c->num_layers + 6), sizeof *p);
    if (!p) return attn__fail_null(ATTN_ERR_NOMEM, "hf: out of memory");
    int k = 0;
#define ADD(tensor, order_, ...)                                                                                       \
    (p[k].t = (tensor), p[k].order = (order_), snprintf(p[k++].name, sizeof p->name, __VA_ARGS__))
    if (c->style == ATTN_LM_GPT2) {
        ADD(m->wte, SAME, "transformer.wte.weight");
        ADD(m->wpe, SAME, "transformer.wpe.weight");
        for (int i = 0; i < c->num_layers; i++) {
            const attn_lm_block *b = &m->blocks[i];
            ADD(b->norm1.weight, SAME, "transformer.h.%d.ln_1.weight", i);
            ADD(b->norm1.bias, SAME, "transformer.h.%d.ln_1.bias", i);
            ADD(b->attn.in_proj_weight, TRANSPOSE, "transformer.h.%d.attn.c_attn.weight", i);
            ADD(b->attn.in_proj_bias, SAME, "transformer.h.%d.attn.c_attn.bias", i);
            ADD(b->attn.out_proj.weight, TRANSPOSE, "transformer.h.%d.attn.c_proj.weight", i);
            ADD(b->attn.out_proj.bias, SAME, "transformer.h.%d.attn.c_proj.bias", i);
            ADD(b->norm2.weight, SAME, "transformer.h.%d.ln_2.weight", i);
            ADD(b->norm2.bias, SAME, "transformer.h.%d.ln_2.bias", i);
            ADD(b->w_in.weight, TRANSPOSE, "transformer.h.%d.mlp.c_fc.weight", i);
            ADD(b->w_in.bias, SAME, "transformer.h.%d.mlp.c_fc.bias", i);
            ADD(b->w_out.weight, TRANSPOSE, "transformer.h.%d.mlp.c_proj.weight", i);
            ADD(b->w_out.bias, SAME, "transformer.h.%d.mlp.c_proj.bias", i);
        }
        ADD(m->norm_f.weight, SAME, "transformer.ln_f.weight");
        ADD(m->norm_f.bias, SAME, "transformer.ln_f.bias");
    } else {
        const row_order qk = c->rope_interleaved ? HALVES : SAME;
        ADD(m->wte, SAME, "model.embed_tokens.weight");
        for (int i = 0; i < c->num_layers; i++) {
            const attn_lm_block *b = &m->blocks[i];
            ADD(b->norm1.weight, SAME, "model.layers.%d.input_layernorm.weight", i);
            ADD(b->attn.q_proj_weight, qk, "model.layers.%d.self_attn.q_proj.weight", i);
            ADD(b->attn.k_proj_weight, qk, "model.layers.%d.self_attn.k_proj.weight", i);
            ADD(b->attn.v_proj_weight, SAME, "model.layers.%d.self_attn.v_proj.weight", i);
            ADD(b->attn.out_proj.weight, SAME, "model.layers.%d.self_attn.o_proj.weight", i);
            ADD(b->norm2.weight, SAME, "model.layers.%d.post_attention_layernorm.weight", i);
            ADD(b->w_in.weight, SAME, "model.layers.%d.mlp.gate_proj.weight", i);
            ADD(b->w_up.weight, SAME, "model.layers.%d.mlp.up_proj.weight", i);
            ADD(b->w_out.weight, SAME, "model.layers.%d.mlp.down_proj.weight", i);
        }
        ADD(m->norm_f.weight, SAME, "model.norm.weight");
        if (c->untied) ADD(m->output, SAME, "lm_head.weight");
    }
#undef ADD
    *n = k;
    return p;
}

/* HF's row r of a HALVES tensor is attn's row pair_row(r) */
static int64_t pair_row(int64_t r, int64_t head)
{
    const int64_t h = r / head, j = r % head;
    return h * head + (j < head / 2 ? 2 * j : 2 * (j - head / 2) + 1);
}

/* HF's form of p's tensor into out (numel floats), and its shape */
static void to_hf(const hf_param *p, const attn_lm *m, float *out, int64_t *shape)
{
    const attn_tensor *t = p->t;
    const int64_t rows = t->ndim == 2 ? t->shape[0] : 1, cols = t->shape[t->ndim - 1];
    shape[0] = t->shape[0], shape[1] = t->ndim == 2 ? t->shape[1] : 0;
    if (p->order == TRANSPOSE) {
        shape[0] = cols, shape[1] = rows;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) out[c * rows + r] = t->data[r * cols + c];
    } else if (p->order == HALVES) {
        const int64_t head = m->cfg.d_model / m->cfg.num_heads;
        for (int64_t r = 0; r < rows; r++)
            memcpy(out + r * cols, t->data + pair_row(r, head) * cols, sizeof(float) * (size_t)cols);
    } else {
        memcpy(out, t->data, sizeof(float) * (size_t)t->numel);
    }
}

/* ---- config.json ---- */

static attn_status write_config(const attn_lm *m, const char *path)
{
    const attn_lm_config *c = &m->cfg;
    char text[2048];
    if (c->style == ATTN_LM_GPT2)
        snprintf(
            text, sizeof text,
            "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n  \"vocab_size\": %lld,\n"
            "  \"n_positions\": %lld,\n  \"n_embd\": %lld,\n  \"n_layer\": %lld,\n  \"n_head\": %lld,\n"
            "  \"n_inner\": %lld,\n  \"activation_function\": \"gelu_new\",\n  \"layer_norm_epsilon\": %.9g,\n"
            "  \"scale_attn_weights\": true,\n  \"tie_word_embeddings\": true,\n  \"torch_dtype\": \"float32\"\n}\n",
            (long long)c->vocab_size, (long long)c->context, (long long)c->d_model, (long long)c->num_layers,
            (long long)c->num_heads, (long long)c->ffn_hidden, (double)c->norm_eps);
    else
        snprintf(
            text, sizeof text,
            "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n  \"vocab_size\": %lld,\n"
            "  \"max_position_embeddings\": %lld,\n  \"hidden_size\": %lld,\n  \"intermediate_size\": %lld,\n"
            "  \"num_hidden_layers\": %lld,\n  \"num_attention_heads\": %lld,\n  \"num_key_value_heads\": %lld,\n"
            "  \"head_dim\": %lld,\n  \"hidden_act\": \"silu\",\n  \"rms_norm_eps\": %.9g,\n  \"rope_theta\": %.9g,\n"
            "  \"rope_scaling\": null,\n  \"attention_bias\": false,\n  \"mlp_bias\": false,\n"
            "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"float32\"\n}\n",
            (long long)c->vocab_size, (long long)c->context, (long long)c->d_model, (long long)c->ffn_hidden,
            (long long)c->num_layers, (long long)c->num_heads, (long long)c->num_kv_heads,
            (long long)(c->d_model / c->num_heads), (double)c->norm_eps, (double)c->rope_base,
            c->untied ? "false" : "true");
    attn__outfile out;
    attn_status st = attn__outfile_open(&out, path);
    if (st != ATTN_OK) return st;
    const size_t n = strlen(text);
    const int err = fwrite(text, 1, n, out.fp) == n ? 0 : errno;
    return attn__outfile_close(&out, err ? attn__outfile_write_error(&out, err) : ATTN_OK);
}

/* A member as an integer >= 1 (required), a number, a bool or a string; `bad` names the problem */
typedef struct reader {
    const attn__json *root;
    const char *path;
    const char *bad; /* the first problem, for the message */
    char why[160];
} reader;

static int64_t need_int(reader *r, const char *key)
{
    const attn__json *v = attn__json_member(r->root, key);
    uint64_t x = 0;
    if (!r->bad && (!v || !attn__json_count(v, INT32_MAX, &x) || x < 1))
        snprintf(r->why, sizeof r->why, "\"%s\" must be an integer in [1, %d]", key, INT32_MAX), r->bad = r->why;
    return (int64_t)x;
}

static double number(reader *r, const char *key, double fallback)
{
    const attn__json *v = attn__json_member(r->root, key);
    if (!v || v->kind == ATTN__JSON_NULL) return fallback;
    char buf[64];
    double x = NAN;
    if (v->kind == ATTN__JSON_NUMBER && v->number_len < sizeof buf) {
        memcpy(buf, v->number, v->number_len), buf[v->number_len] = '\0';
        x = strtod(buf, NULL);
    }
    if (!r->bad && !(isfinite(x) && x > 0))
        snprintf(r->why, sizeof r->why, "\"%s\" must be a positive number", key), r->bad = r->why;
    return x;
}

/* The member key, when present and not null, must be `want` (a bool or a string) */
static void must_be(reader *r, const char *key, const char *want)
{
    const attn__json *v = attn__json_member(r->root, key);
    if (r->bad || !v || v->kind == ATTN__JSON_NULL) return;
    const bool ok = v->kind == ATTN__JSON_BOOL     ? !strcmp(want, v->boolean ? "true" : "false")
                    : v->kind == ATTN__JSON_STRING ? !strcmp(want, v->string)
                                                   : false;
    if (!ok) snprintf(r->why, sizeof r->why, "\"%s\" is not %s, which attn implements", key, want), r->bad = r->why;
}

static bool flag(const reader *r, const char *key, bool fallback)
{
    const attn__json *v = attn__json_member(r->root, key);
    return v && v->kind == ATTN__JSON_BOOL ? v->boolean : fallback;
}

static attn_status read_config(const char *path, attn_lm_config *c)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return attn__fail(ATTN_ERR_IO, "%s: %s", path, strerror(errno));
    char *text = malloc(CONFIG_MAX_BYTES + 1);
    const size_t n = text ? fread(text, 1, CONFIG_MAX_BYTES + 1, fp) : 0;
    fclose(fp);
    if (!text) return attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", path);
    if (n > CONFIG_MAX_BYTES) {
        free(text);
        return attn__fail(ATTN_ERR_FORMAT, "%s: more than %d bytes; a config.json is a few hundred", path,
                          CONFIG_MAX_BYTES);
    }
    char why[160];
    attn__json *root = attn__json_parse(text, n, why, sizeof why); /* its numbers point into text */
    if (!root) {
        free(text);
        return attn__fail(ATTN_ERR_FORMAT, "%s: %s", path, why);
    }
    reader r = {.root = root, .path = path};
    const attn__json *type = attn__json_member(root, "model_type");
    const char *kind = type && type->kind == ATTN__JSON_STRING ? type->string : "";
    *c = (attn_lm_config){0};
    if (!strcmp(kind, "gpt2")) {
        c->style = ATTN_LM_GPT2;
        c->vocab_size = need_int(&r, "vocab_size"), c->context = need_int(&r, "n_positions");
        c->d_model = need_int(&r, "n_embd"), c->num_layers = need_int(&r, "n_layer"),
        c->num_heads = need_int(&r, "n_head");
        const attn__json *inner = attn__json_member(root, "n_inner");
        c->ffn_hidden = inner && inner->kind != ATTN__JSON_NULL ? need_int(&r, "n_inner") : 4 * c->d_model;
        c->norm_eps = (float)number(&r, "layer_norm_epsilon", 1e-5);
        const attn__json *act = attn__json_member(root, "activation_function");
        if (!r.bad && act &&
            !(act->kind == ATTN__JSON_STRING &&
              (!strcmp(act->string, "gelu_new") || !strcmp(act->string, "gelu_pytorch_tanh"))))
            r.bad = "\"activation_function\" is not gelu_new (GELU's tanh form), which attn implements";
        must_be(&r, "scale_attn_weights", "true");
        must_be(&r, "scale_attn_by_inverse_layer_idx", "false");
        must_be(&r, "add_cross_attention", "false");
        must_be(&r, "tie_word_embeddings", "true");
    } else if (!strcmp(kind, "llama")) {
        c->style = ATTN_LM_LLAMA;
        c->vocab_size = need_int(&r, "vocab_size"), c->context = need_int(&r, "max_position_embeddings");
        c->d_model = need_int(&r, "hidden_size"), c->ffn_hidden = need_int(&r, "intermediate_size");
        c->num_layers = need_int(&r, "num_hidden_layers"), c->num_heads = need_int(&r, "num_attention_heads");
        c->num_kv_heads =
            attn__json_member(root, "num_key_value_heads") ? need_int(&r, "num_key_value_heads") : c->num_heads;
        c->norm_eps = (float)number(&r, "rms_norm_eps", 1e-6), c->rope_base = (float)number(&r, "rope_theta", 10000.0);
        c->untied = !flag(&r, "tie_word_embeddings", false);
        const attn__json *head = attn__json_member(root, "head_dim");
        if (!r.bad && head && head->kind != ATTN__JSON_NULL && c->num_heads > 0 &&
            need_int(&r, "head_dim") != c->d_model / c->num_heads)
            r.bad = "\"head_dim\" is not hidden_size / num_attention_heads, which attn implements";
        must_be(&r, "hidden_act", "silu");
        must_be(&r, "attention_bias", "false");
        must_be(&r, "mlp_bias", "false");
        const attn__json *scaling = attn__json_member(root, "rope_scaling");
        if (!r.bad && scaling && scaling->kind != ATTN__JSON_NULL)
            r.bad = "\"rope_scaling\" is set; attn implements plain rotary positions (null)";
    } else {
        r.bad = "\"model_type\" is neither \"gpt2\" (GPT2LMHeadModel) nor \"llama\" (LlamaForCausalLM)";
    }
    attn__json_free(root);
    free(text);
    if (r.bad) return attn__fail(ATTN_ERR_FORMAT, "%s: %s", path, r.bad);
    return ATTN_OK;
}

/* ---- the folder ---- */

static char *join(const char *dir, const char *name)
{
    const size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

attn_status attn_lm_save_hf(const attn_lm *m, const char *dir)
{
    if (!m || !dir || !m->blocks) return attn__fail(ATTN_ERR_ARG, "lm_save_hf: NULL argument");
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return attn__fail(ATTN_ERR_IO, "%s: not a folder (make it first)", dir);
    int n = 0;
    hf_param *p = hf_params(m, &n);
    char *weights = join(dir, "model.safetensors"), *config = join(dir, "config.json");
    attn_st_writer *w = attn_st_writer_new();
    float *buf = NULL;
    attn_status st = p && weights && config && w ? ATTN_OK : attn__fail(ATTN_ERR_NOMEM, "lm_save_hf: out of memory");
    if (st == ATTN_OK) st = attn_st_writer_set_metadata(w, "format", "pt");
    for (int k = 0; k < n && st == ATTN_OK; k++) {
        float *more = realloc(buf, sizeof(float) * (size_t)p[k].t->numel);
        if (!more) {
            st = attn__fail(ATTN_ERR_NOMEM, "lm_save_hf: out of memory");
            break;
        }
        buf = more;
        int64_t shape[2];
        to_hf(&p[k], m, buf, shape);
        for (int64_t i = 0; i < p[k].t->numel; i++) { /* the file's little-endian float32, on any host */
            uint32_t u;
            memcpy(&u, &buf[i], sizeof u);
            attn__put_le32((unsigned char *)&buf[i], u);
        }
        st = attn_st_writer_add(w, p[k].name, ATTN_DTYPE_F32, p[k].t->ndim, shape, buf); /* copied */
    }
    if (st == ATTN_OK) st = attn_st_writer_save(w, weights);
    if (st == ATTN_OK) st = write_config(m, config);
    attn_st_writer_free(w);
    free(buf), free(p), free(weights), free(config);
    return st;
}

static bool ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* Tensors the file may hold beside the parameters: buffers older transformers saved, and a tied
 * output's copy */
static bool ignorable(const char *name, const attn_lm *m)
{
    return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias") ||
           ends_with(name, ".rotary_emb.inv_freq") || (!m->cfg.untied && !strcmp(name, "lm_head.weight"));
}

/* p's tensor from f (HF's name, or GPT2's without "transformer."), into attn's rows */
static attn_status fill(const attn_st_file *f, const char *path, const hf_param *p, const attn_lm *m)
{
    const char *name = p->name;
    const attn_st_tensor *t = attn_st_find(f, name);
    if (!t && !strncmp(name, "transformer.", 12)) t = attn_st_find(f, name += 12);
    if (!t) return attn__fail(ATTN_ERR_FORMAT, "%s: no tensor %s", path, p->name);
    if (t->dtype != ATTN_DTYPE_F32 && t->dtype != ATTN_DTYPE_F64 && t->dtype != ATTN_DTYPE_F16 &&
        t->dtype != ATTN_DTYPE_BF16)
        return attn__fail(ATTN_ERR_FORMAT, "%s: tensor %s is %s; expected a float dtype (F32, F64, F16, BF16)", path,
                          name, attn_dtype_name(t->dtype));
    const attn_tensor *dst = p->t;
    const int64_t rows = dst->ndim == 2 ? dst->shape[0] : 1, cols = dst->shape[dst->ndim - 1];
    const bool tr = p->order == TRANSPOSE;
    const bool fits =
        t->ndim == dst->ndim &&
        (dst->ndim == 1 ? t->shape[0] == cols : t->shape[0] == (tr ? cols : rows) && t->shape[1] == (tr ? rows : cols));
    if (!fits) {
        char a[64], b[64];
        attn_tensor view = *dst;
        if (tr) view.shape[0] = cols, view.shape[1] = rows;
        return attn__fail(ATTN_ERR_SHAPE, "%s: %s is %s; the config gives %s", path, name,
                          attn_shape_str(&(attn_tensor){.ndim = t->ndim, .shape = {t->shape[0], t->shape[1]}}, a, 64),
                          attn_shape_str(&view, b, 64));
    }
    attn_tensor *src = attn_st_load(f, name, NULL); /* float32 from any dtype */
    if (!src) return attn_last_status();
    attn_status st = attn_tensor_check_finite(src, name);
    if (st == ATTN_OK) {
        if (tr)
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < cols; c++) dst->data[r * cols + c] = src->data[c * rows + r];
        else
            memcpy(dst->data, src->data, sizeof(float) * (size_t)dst->numel);
    }
    attn_tensor_free(src);
    (void)m;
    return st;
}

/* The parameters c gives must be in f (so that no config sizes an allocation past the file's) */
static attn_status check_sizes(const attn_lm_config *c, const attn_st_file *f, const char *config, const char *weights)
{
    __int128 held = 0;
    for (size_t i = 0; i < attn_st_count(f); i++) held += attn_st_at(f, i)->numel;
    const __int128 V = c->vocab_size, E = c->d_model, F = c->ffn_hidden, L = c->num_layers, T = c->context;
    const __int128 Ekv = c->num_heads > 0 ? E / c->num_heads * c->num_kv_heads : 0;
    const __int128 want = c->style == ATTN_LM_GPT2
                              ? V * E + T * E + L * (4 * E * E + 2 * E * F + 9 * E + F) + 2 * E
                              : V * E * (c->untied ? 2 : 1) + L * (2 * E * E + 2 * E * Ekv + 3 * E * F + 2 * E) + E;
    if (want > held)
        return attn__fail(ATTN_ERR_FORMAT, "%s gives %.0f parameters; %s holds %.0f values", config, (double)want,
                          weights, (double)held);
    return ATTN_OK;
}

static attn_status load(attn_lm *m, attn_params *p, const char *dir)
{
    char *config = join(dir, "config.json"), *weights = join(dir, "model.safetensors");
    attn_lm_config c;
    attn_st_file *f = NULL;
    hf_param *params = NULL;
    int n = 0;
    attn_status st =
        config && weights ? read_config(config, &c) : attn__fail(ATTN_ERR_NOMEM, "lm_load_hf: out of memory");
    if (st == ATTN_OK && !(f = attn_st_open(weights))) st = attn_last_status();
    if (st == ATTN_OK) st = check_sizes(&c, f, config, weights);
    if (st == ATTN_OK) st = attn_lm_init(m, p, &c, NULL);
    if (st == ATTN_OK && !(params = hf_params(m, &n))) st = attn_last_status();
    for (int k = 0; k < n && st == ATTN_OK; k++) st = fill(f, weights, &params[k], m);
    for (size_t i = 0; f && st == ATTN_OK && i < attn_st_count(f); i++) { /* nothing else but known buffers */
        const char *name = attn_st_at(f, i)->name;
        bool known = ignorable(name, m);
        for (int k = 0; k < n && !known; k++)
            known = !strcmp(name, params[k].name) ||
                    (!strncmp(params[k].name, "transformer.", 12) && !strcmp(name, params[k].name + 12));
        if (!known)
            st = attn__fail(ATTN_ERR_FORMAT, "%s: tensor %s is no parameter of this %s model", weights, name,
                            c.style == ATTN_LM_GPT2 ? "GPT2LMHeadModel" : "LlamaForCausalLM");
    }
    attn_st_close(f);
    free(params), free(config), free(weights);
    return st;
}

attn_status attn_lm_load_hf(attn_lm *m, attn_params *p, const char *dir)
{
    if (m) memset(m, 0, sizeof *m);
    if (!m || !p || !dir) return attn__fail(ATTN_ERR_ARG, "lm_load_hf: NULL argument");
    const size_t n0 = attn_params_count(p);
    attn_status st = attn__params_settle(p, n0, load(m, p, dir));
    if (st != ATTN_OK) attn_lm_free(m);
    return st;
}
