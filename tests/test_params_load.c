/* PyTorch state_dicts (attn_params_load, attn_params_load_file, attn_params_save) on the files
 * tests/golden/make_golden_state_dict.py wrote from torch.nn modules with
 * tools/safetensors_convert.py:
 *   - strict loads put every tensor in place bit for bit; modules built with rng NULL skip the
 *     random init (zeros, LayerNorm's ones);
 *   - a strict load names every missing, unexpected and wrong-shape key, not just the first, and
 *     changes nothing; a non-strict load reports what it loaded and still refuses a wrong shape;
 *   - a prefix maps "layers.1." of a whole encoder onto a layer registered without it;
 *   - NaN or Inf in a file is refused naming the tensor and the index;
 *   - F64 and F16 files load (converted); attn_params_save writes F32 under the prefix with
 *     metadata format "pt" and reads back bit-identical.
 * (examples/pytorch_weights.c runs the loaded modules against PyTorch's outputs.) */
#include "testkit.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[64];

static const attn_transformer_config post_ln = {
    .d_model = 16, .num_heads = 4, .dim_feedforward = 32, .dropout = 0.1f, .ffn_dropout = true};

static const char *tmp_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
    return buf;
}

/* An nn.MultiheadAttention(16, 4) without random init, in a new registry. */
static attn_params *mha_params(attn_mha_layer *m)
{
    attn_params *p = attn_params_new();
    if (!p || attn_mha_init(m, p, "", 16, 4, 0, 0, true, 0.0f, NULL) != ATTN_OK) {
        TK_CHECK(false, "mha init: %s", attn_last_error());
        attn_params_free(p);
        return NULL;
    }
    return p;
}

/* Every parameter equals the file's tensor prefix + name, bit for bit. */
static bool equals_file(const attn_params *p, const attn_st_file *f, const char *prefix)
{
    for (size_t i = 0; i < attn_params_count(p); i++) {
        char key[256];
        snprintf(key, sizeof key, "%s%s", prefix, attn_params_name(p, i));
        attn_tensor *ref = attn_st_load(f, key, NULL);
        const attn_tensor *t = attn_params_at(p, i);
        bool same = ref && ref->numel == t->numel && memcmp(ref->data, t->data, (size_t)t->numel * sizeof(float)) == 0;
        attn_tensor_free(ref);
        if (!same) return false;
    }
    return true;
}

static bool all_zero(const attn_params *p)
{
    for (size_t i = 0; i < attn_params_count(p); i++)
        for (int64_t e = 0; e < attn_params_at(p, i)->numel; e++)
            if (attn_params_at(p, i)->data[e] != 0.0f) return false;
    return true;
}

/* A copy of golden file `src` without the tensors in `drop` (NULL-terminated), with `extra`
 * (F32 (2)) added when not NULL, tensor `reshape` (when not NULL) written as (numel) 1-D, and
 * element 3 of tensor `poison` (when not NULL) set to `value`. */
static void rewrite(const char *src, const char *dst, const char *const *drop, const char *extra, const char *reshape,
                    const char *poison, float value)
{
    attn_st_file *f = attn_st_open(src);
    attn_st_writer *w = attn_st_writer_new();
    attn_status st = f && w ? ATTN_OK : attn_last_status();
    for (size_t i = 0; st == ATTN_OK && i < attn_st_count(f); i++) {
        const attn_st_tensor *t = attn_st_at(f, i);
        bool dropped = false;
        for (const char *const *d = drop; d && *d; d++) dropped = dropped || !strcmp(*d, t->name);
        if (dropped) continue;
        attn_tensor *v = attn_st_load(f, t->name, NULL);
        if (!v) {
            st = attn_last_status();
            break;
        }
        if (poison && !strcmp(poison, t->name)) v->data[3] = value;
        if (reshape && !strcmp(reshape, t->name)) v->ndim = 1, v->shape[0] = v->numel;
        st = attn_st_writer_add_tensor(w, t->name, v);
        attn_tensor_free(v);
    }
    if (st == ATTN_OK && extra)
        st = attn_st_writer_add(w, extra, ATTN_DTYPE_F32, 1, (int64_t[]){2}, (float[]){1.0f, 2.0f});
    if (st == ATTN_OK) st = attn_st_writer_save(w, dst);
    TK_CHECK(st == ATTN_OK, "rewrite %s: %s", dst, attn_last_error());
    attn_st_writer_free(w);
    attn_st_close(f);
}

static void test_strict_mha(void)
{
    attn_mha_layer m;
    attn_params *p = mha_params(&m);
    if (!p) return;
    TK_CHECK(all_zero(p), "rng NULL: no random init, every MHA parameter is 0");
    TK_OK(attn_params_load(p, "tests/golden/sd_mha.safetensors", NULL, true));
    attn_st_file *f = attn_st_open("tests/golden/sd_mha.safetensors");
    TK_CHECK(f && equals_file(p, f, ""), "strict load: every tensor in place, bit for bit");
    attn_st_close(f);
    attn_params_free(p);
}

static void test_strict_errors(void)
{
    char path[128];
    attn_mha_layer m;
    attn_params *p = mha_params(&m);
    if (!p) return;
    /* one missing key */
    const char *drop_bias[] = {"in_proj_bias", NULL};
    rewrite("tests/golden/sd_mha.safetensors", tmp_path(path, sizeof path, "missing.safetensors"), drop_bias, NULL,
            NULL, NULL, 0);
    attn_clear_error();
    attn_status st = attn_params_load(p, path, NULL, true);
    TK_CHECK(st == ATTN_ERR_FORMAT && strstr(attn_last_error(), "missing 1: \"in_proj_bias\""),
             "strict load of a file without in_proj_bias fails naming it: %s", attn_last_error());
    TK_CHECK(all_zero(p), "nothing changed after the failed load");
    /* not strict: the others load, in_proj_bias keeps its value */
    bool loaded[4] = {true, true, true, true};
    attn_st_file *f = attn_st_open(path);
    TK_OK(attn_params_load_file(p, f, NULL, false, loaded));
    TK_CHECK(!loaded[1] && loaded[0] && loaded[2] && loaded[3],
             "non-strict: loaded[] says in_proj_bias (index 1) was not in the file");
    attn_st_close(f);
    unlink(path);

    /* every problem at once: 2 missing, 1 unexpected, 1 wrong shape */
    const char *drop_two[] = {"in_proj_bias", "out_proj.bias", NULL};
    rewrite("tests/golden/sd_mha.safetensors", tmp_path(path, sizeof path, "all.safetensors"), drop_two, "extra.weight",
            "out_proj.weight", NULL, 0);
    attn_params *q = mha_params(&m);
    st = q ? attn_params_load(q, path, NULL, true) : ATTN_ERR_NOMEM;
    const char *msg = attn_last_error();
    TK_CHECK(st == ATTN_ERR_FORMAT && strstr(msg, "\"in_proj_bias\"") && strstr(msg, "\"out_proj.bias\"") &&
                 strstr(msg, "unexpected 1: \"extra.weight\"") &&
                 strstr(msg, "\"out_proj.weight\" (256) in the file, (16, 16) in the module"),
             "strict names every missing, unexpected and wrong-shape key: %s", msg);
    TK_CHECK(q && all_zero(q), "nothing changed");
    /* not strict: missing and unexpected are fine, the wrong shape is not (as torch) */
    st = q ? attn_params_load(q, path, NULL, false) : ATTN_ERR_NOMEM;
    TK_CHECK(st == ATTN_ERR_SHAPE && strstr(attn_last_error(), "wrong shape 1: \"out_proj.weight\""),
             "non-strict still refuses a wrong shape: %s", attn_last_error());
    attn_params_free(q);
    unlink(path);
    attn_params_free(p);
}

static void test_prefix(void)
{
    attn_encoder_layer layer;
    attn_params *p = attn_params_new();
    TK_OK(attn_encoder_layer_init(&layer, p, "", &post_ln, NULL));
    TK_CHECK(layer.norm1.weight->data[0] == 1.0f && layer.linear1.weight->data[0] == 0.0f,
             "rng NULL: LayerNorm weight 1, Linear weight 0");
    /* the second layer of a 2-layer nn.TransformerEncoder (pre-LN GELU; shapes are the same) */
    TK_OK(attn_params_load(p, "tests/golden/sd_encoder.safetensors", "layers.1.", true));
    attn_st_file *f = attn_st_open("tests/golden/sd_encoder.safetensors");
    TK_CHECK(f && equals_file(p, f, "layers.1."), "prefix layers.1.: that layer's tensors, bit for bit");
    TK_CHECK(f && !equals_file(p, f, "layers.0."), "... not layer 0's");
    attn_st_close(f);
    attn_status st = attn_params_load(p, "tests/golden/sd_encoder.safetensors", "layers.2.", true);
    TK_CHECK(st == ATTN_ERR_FORMAT && strstr(attn_last_error(), "\"layers.2.self_attn.in_proj_weight\"") &&
                 strstr(attn_last_error(), "under prefix \"layers.2.\"") && strstr(attn_last_error(), "missing 12:"),
             "a prefix the file lacks: every key missing, named with the prefix: %s", attn_last_error());
    /* a whole-file strict load into one layer: layer 0's 12 keys fit, layer 1's are unexpected */
    attn_params *q = attn_params_new();
    attn_encoder_layer l0;
    TK_OK(attn_encoder_layer_init(&l0, q, "layers.0", &post_ln, NULL));
    st = attn_params_load(q, "tests/golden/sd_encoder.safetensors", NULL, true);
    TK_CHECK(st == ATTN_ERR_FORMAT && strstr(attn_last_error(), "unexpected 12:"),
             "registered as layers.0, strict without prefix: layer 1's 12 keys unexpected: %s", attn_last_error());
    TK_OK(attn_params_load(q, "tests/golden/sd_encoder.safetensors", NULL, false));
    attn_params_free(q);
    attn_params_free(p);
}

static void test_nonfinite(void)
{
    char path[128];
    attn_mha_layer m;
    attn_params *p = mha_params(&m);
    if (!p) return;
    const float bad[2] = {NAN, -INFINITY};
    for (int k = 0; k < 2; k++) {
        rewrite("tests/golden/sd_mha.safetensors", tmp_path(path, sizeof path, "nan.safetensors"), NULL, NULL, NULL,
                "out_proj.weight", bad[k]);
        attn_status st = attn_params_load(p, path, NULL, false);
        TK_CHECK(st == ATTN_ERR_NUMERIC && strstr(attn_last_error(), "\"out_proj.weight\"") &&
                     strstr(attn_last_error(), k ? "-Inf at index (0, 3)" : "NaN at index (0, 3)"),
                 "non-finite values refused naming the tensor and index: %s", attn_last_error());
        TK_CHECK(all_zero(p), "nothing changed");
        unlink(path);
    }
    attn_params_free(p);
}

/* IEEE binary16 bits of f, rounded to nearest even (portable C: _Float16 is not on every target) */
static uint16_t f16_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint16_t sign = (uint16_t)(x >> 16 & 0x8000);
    x &= 0x7fffffff;
    if (x > 0x7f800000) return sign | 0x7e00;  /* NaN */
    if (x >= 0x477ff000) return sign | 0x7c00; /* 65520 and above round to infinity */
    if (x < 0x38800000)                        /* a binary16 subnormal: a multiple of 2^-24 */
        return sign | (uint16_t)lrintf(fabsf(f) * 16777216.0f);
    return sign | (uint16_t)((x + 0xfff + (x >> 13 & 1) - 0x38000000) >> 13);
}

/* F64 and F16 copies of sd_mha load, converted (F16 rounds, so within its precision). */
static void test_dtypes(void)
{
    const attn_dtype kinds[2] = {ATTN_DTYPE_F64, ATTN_DTYPE_F16};
    attn_st_file *f = attn_st_open("tests/golden/sd_mha.safetensors");
    for (int k = 0; f && k < 2; k++) {
        char path[128];
        attn_st_writer *w = attn_st_writer_new();
        for (size_t i = 0; i < attn_st_count(f); i++) {
            const attn_st_tensor *t = attn_st_at(f, i);
            attn_tensor *v = attn_st_load(f, t->name, NULL);
            unsigned char *buf = malloc((size_t)v->numel * 8); /* little-endian elements, whatever the host */
            for (int64_t e = 0; e < v->numel; e++) {
                uint64_t bits = f16_bits(v->data[e]);
                if (k == 0) {
                    const double d = v->data[e];
                    memcpy(&bits, &d, sizeof bits);
                }
                for (int b = 0; b < (k == 0 ? 8 : 2); b++)
                    buf[e * (k == 0 ? 8 : 2) + b] = (unsigned char)(bits >> 8 * b);
            }
            TK_OK(attn_st_writer_add(w, t->name, kinds[k], v->ndim, v->shape, buf));
            free(buf);
            attn_tensor_free(v);
        }
        TK_OK(attn_st_writer_save(w, tmp_path(path, sizeof path, "dtype.safetensors")));
        attn_st_writer_free(w);
        attn_mha_layer m;
        attn_params *p = mha_params(&m);
        TK_OK(attn_params_load(p, path, NULL, true));
        attn_tensor *ref = attn_st_load(f, "in_proj_weight", NULL);
        tk_close(k ? "F16 file" : "F64 file", m.in_proj_weight->data, ref->data, ref->numel, k ? 1e-3f : 0.0f,
                 k ? 1e-3f : 0.0f);
        attn_tensor_free(ref);
        attn_params_free(p);
        unlink(path);
    }
    attn_st_close(f);
}

static void test_save(void)
{
    char path[128];
    attn_encoder_layer layer;
    attn_params *p = attn_params_new();
    TK_OK(attn_encoder_layer_init(&layer, p, "", &post_ln, NULL));
    TK_OK(attn_params_load(p, "tests/golden/sd_encoder_layer.safetensors", NULL, true));
    TK_OK(attn_params_save(p, tmp_path(path, sizeof path, "saved.safetensors"), "encoder.layers.0."));
    attn_st_file *f = attn_st_open(path);
    const attn_st_tensor *t = f ? attn_st_find(f, "encoder.layers.0.self_attn.in_proj_weight") : NULL;
    TK_CHECK(t && t->dtype == ATTN_DTYPE_F32 && attn_st_count(f) == attn_params_count(p) &&
                 attn_st_metadata(f, "format") && !strcmp(attn_st_metadata(f, "format"), "pt"),
             "saved: F32 under the prefix, one tensor per parameter, format \"pt\"");
    TK_CHECK(f && equals_file(p, f, "encoder.layers.0."), "saved values bit for bit");
    attn_st_close(f);
    attn_params *q = attn_params_new();
    attn_encoder_layer again;
    TK_OK(attn_encoder_layer_init(&again, q, "", &post_ln, NULL));
    TK_OK(attn_params_load(q, path, "encoder.layers.0.", true));
    attn_st_file *g = attn_st_open("tests/golden/sd_encoder_layer.safetensors");
    TK_CHECK(g && equals_file(q, g, ""), "save then load: PyTorch's values, bit for bit");
    attn_st_close(g);
    unlink(path);
    attn_params_free(q);
    attn_params_free(p);
}

static void test_null_arguments(void)
{
    attn_params *p = attn_params_new();
    TK_CHECK(attn_params_load(NULL, "x", NULL, true) == ATTN_ERR_ARG, "load: NULL params");
    TK_CHECK(attn_params_load(p, NULL, NULL, true) == ATTN_ERR_ARG, "load: NULL path");
    TK_CHECK(attn_params_load_file(p, NULL, NULL, true, NULL) == ATTN_ERR_ARG, "load_file: NULL file");
    TK_CHECK(attn_params_save(NULL, "x", NULL) == ATTN_ERR_ARG, "save: NULL params");
    TK_CHECK(attn_params_save(p, NULL, NULL) == ATTN_ERR_ARG, "save: NULL path");
    TK_CHECK(attn_params_load(p, "tests/golden/no_such.safetensors", NULL, true) == ATTN_ERR_IO,
             "load: a missing file is an I/O error");
    attn_params_free(p);
}

/* attn_params_set_max_numel: a registration past the limit fails before it allocates, naming the
 * parameter; the registry stays as it was */
static void test_max_numel(void)
{
    attn_params *p = attn_params_new();
    TK_OK(attn_params_set_max_numel(p, 100));
    TK_NOT_NULL(attn_params_add(p, "a", 2, (int64_t[]){8, 8}));
    TK_CHECK(!attn_params_add(p, "b", 2, (int64_t[]){1000000000, 1000}) && attn_last_status() == ATTN_ERR_FORMAT &&
                 strstr(attn_last_error(), "\"b\""),
             "a parameter past the limit is refused, naming it: %s", attn_last_error());
    TK_CHECK(attn_params_count(p) == 1 && attn_params_numel(p) == 64,
             "the refused parameter left the registry as it was");
    TK_NOT_NULL(attn_params_add(p, "c", 1, (int64_t[]){36})); /* exactly at the limit */
    TK_CHECK(!attn_params_add(p, "d", 1, (int64_t[]){1}), "one element past the limit is refused");
    TK_CHECK(attn_params_set_max_numel(p, -1) == ATTN_ERR_ARG, "a negative limit is refused");
    attn_params_free(p);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn-sd-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_strict_mha();
    test_strict_errors();
    test_prefix();
    test_nonfinite();
    test_dtypes();
    test_save();
    test_null_arguments();
    test_max_numel();
    TK_CHECK(rmdir(tmpdir) == 0, "the test left files in %s", tmpdir);
    return tk_finish("test_params_load");
}
