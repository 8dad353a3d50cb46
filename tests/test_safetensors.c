/* safetensors reader and writer: the reference golden byte vectors (ecosystem.md 3.1), a round
 * trip of every dtype (scalar and zero-size tensors included), metadata, conversions, malformed
 * files that must be refused with a message, and atomic saving (failures leave nothing, an
 * existing file is replaced whole or not at all). */
#include "testkit.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];

/* ---- helpers ---- */

static void path_in_tmp(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* The whole file at path (malloc'd), NULL when it cannot be read. */
static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    unsigned char *buf = malloc(1 << 16);
    *len = buf ? fread(buf, 1, 1 << 16, fp) : 0;
    fclose(fp);
    return buf;
}

/* Number of entries in the temp dir, "." and ".." not counted. */
static int tmp_entries(void)
{
    DIR *d = opendir(tmpdir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* n host-order elements of size bytes as the file holds them, little-endian (the same bytes on a
 * little-endian host), in a buffer the caller frees */
static unsigned char *le_copy(const void *host, size_t size, int64_t n)
{
    const uint16_t probe = 1;
    const bool big = *(const unsigned char *)&probe == 0;
    const unsigned char *in = host;
    unsigned char *out = malloc(n > 0 ? (size_t)n * size : 1);
    for (int64_t e = 0; out && e < n; e++)
        for (size_t b = 0; b < size; b++) out[(size_t)e * size + b] = in[(size_t)e * size + (big ? size - 1 - b : b)];
    return out;
}

/* attn_st_writer_add (which takes little-endian elements) of host-order data */
static attn_status add_host(attn_st_writer *w, const char *name, attn_dtype dtype, int ndim, const int64_t *shape,
                            const void *data)
{
    int64_t n = 1;
    for (int i = 0; i < ndim && shape; i++) n = shape[i] >= 0 ? n * shape[i] : -1;
    if (!data || n < 0 || n > 1 << 20 || !attn_dtype_size(dtype)) /* refused before its data is read */
        return attn_st_writer_add(w, name, dtype, ndim, shape, data);
    unsigned char *le = le_copy(data, attn_dtype_size(dtype), n);
    const attn_status st = attn_st_writer_add(w, name, dtype, ndim, shape, le);
    free(le);
    return st;
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int b = 0; b < 8; b++) p[b] = (unsigned char)(v >> (8 * b));
}

/* 0.0f .. 5.0f as little-endian float32 bytes. */
static const unsigned char FLOATS_0_TO_5[24] = {
    0, 0, 0,    0,    0, 0, 0x80, 0x3f, 0, 0, 0,    0x40, /* 0, 1, 2 */
    0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40, 0, 0, 0xa0, 0x40, /* 3, 4, 5 */
};

/* N | json | pad spaces | data, into out (at least 8 + n + data_len bytes); returns the size. */
static size_t build_file(unsigned char *out, uint64_t n, const char *json, const void *data, size_t data_len)
{
    size_t j = strlen(json);
    put_le64(out, n);
    memcpy(out + 8, json, j);
    for (size_t i = j; i < n; i++) out[8 + i] = ' ';
    size_t at = 8 + (n > j ? n : j);
    if (data_len) memcpy(out + at, data, data_len);
    return at + data_len;
}

/* ---- golden vectors ---- */

static void check_saved_bytes(const char *what, attn_st_writer *w, const unsigned char *expected, size_t expected_len)
{
    char path[128];
    path_in_tmp(path, sizeof path, "golden.safetensors");
    TK_OK(attn_st_writer_save(w, path));
    size_t len = 0;
    unsigned char *got = slurp(path, &len);
    TK_CHECK(got && len == expected_len && memcmp(got, expected, len) == 0,
             "%s: %zu bytes written, expected %zu identical bytes", what, len, expected_len);
    free(got);
    remove(path);
}

static void test_golden_empty(void)
{
    static const unsigned char expected[16] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    attn_st_writer *w = attn_st_writer_new();
    check_saved_bytes("empty dict", w, expected, sizeof expected);
    attn_st_writer_free(w);
    attn_st_file *f = attn_st_parse(expected, sizeof expected, "empty");
    TK_NOT_NULL(f);
    TK_CHECK(attn_st_count(f) == 0, "empty dict has %zu tensors", attn_st_count(f));
    attn_st_close(f);
}

/* One F32 tensor of 0..5 named name with shape (ndim, shape); json is the exact header text. */
static void test_golden_one(const char *name, int ndim, const int64_t *shape, const char *json, uint64_t n)
{
    unsigned char expected[256];
    size_t len = build_file(expected, n, json, FLOATS_0_TO_5, sizeof FLOATS_0_TO_5);
    attn_st_writer *w = attn_st_writer_new();
    const float values[6] = {0, 1, 2, 3, 4, 5};
    TK_OK(add_host(w, name, ATTN_DTYPE_F32, ndim, shape, values));
    check_saved_bytes(name, w, expected, len);
    attn_st_writer_free(w);

    attn_st_file *f = attn_st_parse(expected, len, name);
    TK_NOT_NULL(f);
    const attn_st_tensor *t = attn_st_find(f, name);
    TK_CHECK(t && t->dtype == ATTN_DTYPE_F32 && t->ndim == ndim && t->numel == 6 && t->nbytes == 24,
             "%s parsed back wrong", name);
    attn_tensor *x = attn_st_load(f, name, NULL);
    TK_NOT_NULL(x);
    if (x) tk_close(name, x->data, values, 6, 0.0f, 0.0f);
    attn_tensor_free(x);
    attn_st_close(f);
}

static void test_golden(void)
{
    test_golden_empty();
    const int64_t s3[3] = {1, 2, 3}, s4[4] = {1, 1, 2, 3};
    test_golden_one("attn.0", 3, s3, "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}", 64);
    test_golden_one("attn0", 4, s4, "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}", 72);
}

/* ---- round trip of every dtype ---- */

typedef struct dtype_case {
    const char *name;
    attn_dtype dtype;
    const void *data;
    int n;
    float expect[8];
} dtype_case;

static const double F64_DATA[4] = {1.5, -2.25, HUGE_VAL, -0.0};
static const int64_t I64_DATA[3] = {-5, 4611686018427387905LL, 7};
static const int32_t I32_DATA[3] = {-2147483647 - 1, 0, 123456};
static const uint8_t BOOL_DATA[3] = {1, 0, 1};
/* 1, -2, +inf, -inf, NaN, smallest subnormal 2^-24, largest subnormal, 65504 */
static const uint16_t F16_DATA[8] = {0x3c00, 0xc000, 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x03ff, 0x7bff};
/* 1, -2, +inf, NaN, subnormal 2^-133, 3.140625, -0 */
static const uint16_t BF16_DATA[7] = {0x3f80, 0xc000, 0x7f80, 0x7fc0, 0x0001, 0x4049, 0x8000};
static const int16_t I16_DATA[3] = {-32768, 1, 32767};
static const int8_t I8_DATA[3] = {-128, 0, 127};
static const uint8_t U8_DATA[3] = {0, 128, 255};

static void check_dtype_case(const attn_st_file *f, const dtype_case *c)
{
    const attn_st_tensor *t = attn_st_find(f, c->name);
    unsigned char *le = le_copy(c->data, attn_dtype_size(c->dtype), c->n);
    TK_CHECK(t && t->dtype == c->dtype && t->ndim == 1 && t->shape[0] == c->n &&
                 t->nbytes == (size_t)c->n * attn_dtype_size(c->dtype) && memcmp(t->data, le, t->nbytes) == 0,
             "%s: dtype, shape or bytes differ after the round trip", c->name);
    TK_CHECK(t && (uintptr_t)t->data % attn_dtype_size(c->dtype) == 0, "%s: data not aligned to its element size",
             c->name);
    attn_tensor *x = attn_st_load(f, c->name, NULL);
    TK_NOT_NULL(x);
    if (x) tk_close(c->name, x->data, c->expect, c->n, 0.0f, 0.0f);
    attn_tensor_free(x);
    free(le);
}

static void test_all_dtypes(void)
{
    const dtype_case cases[] = {
        {"f64", ATTN_DTYPE_F64, F64_DATA, 4, {1.5f, -2.25f, INFINITY, -0.0f}},
        {"i64", ATTN_DTYPE_I64, I64_DATA, 3, {-5.0f, 4611686018427387904.0f, 7.0f}},
        {"i32", ATTN_DTYPE_I32, I32_DATA, 3, {-2147483648.0f, 0.0f, 123456.0f}},
        {"bool", ATTN_DTYPE_BOOL, BOOL_DATA, 3, {1, 0, 1}},
        {"f16", ATTN_DTYPE_F16, F16_DATA, 8, {1, -2, INFINITY, -INFINITY, NAN, 0x1p-24f, 1023 * 0x1p-24f, 65504.0f}},
        {"bf16", ATTN_DTYPE_BF16, BF16_DATA, 7, {1, -2, INFINITY, NAN, 0x1p-133f, 3.140625f, -0.0f}},
        {"i16", ATTN_DTYPE_I16, I16_DATA, 3, {-32768, 1, 32767}},
        {"i8", ATTN_DTYPE_I8, I8_DATA, 3, {-128, 0, 127}},
        {"u8", ATTN_DTYPE_U8, U8_DATA, 3, {0, 128, 255}},
    };
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    attn_st_writer *w = attn_st_writer_new();
    /* a 1-byte type first, so the writer's alignment ordering has work to do */
    const int64_t odd_shape[1] = {3};
    TK_OK(add_host(w, "u8_first", ATTN_DTYPE_U8, 1, odd_shape, U8_DATA));
    for (int i = 0; i < n_cases; i++) {
        int64_t shape[1] = {cases[i].n};
        TK_OK(add_host(w, cases[i].name, cases[i].dtype, 1, shape, cases[i].data));
    }
    const float scalar = 2.5f;
    TK_OK(add_host(w, "scalar", ATTN_DTYPE_F32, 0, NULL, &scalar));
    const int64_t zero_shape[3] = {2, 0, 3};
    TK_OK(add_host(w, "empty", ATTN_DTYPE_F32, 3, zero_shape, NULL));
    TK_OK(add_host(w, "empty16", ATTN_DTYPE_F16, 3, zero_shape, NULL));
    const int64_t eight[8] = {1, 2, 1, 1, 1, 1, 1, 3};
    const float six[6] = {1, 2, 3, 4, 5, 6};
    TK_OK(add_host(w, "eight_dims", ATTN_DTYPE_F32, 8, eight, six));
    char path[128];
    path_in_tmp(path, sizeof path, "dtypes.safetensors");
    TK_OK(attn_st_writer_save(w, path));
    attn_st_writer_free(w);

    attn_st_file *f = attn_st_open(path);
    TK_NOT_NULL(f);
    if (!f) return;
    TK_CHECK(attn_st_count(f) == (size_t)n_cases + 5, "%zu tensors read", attn_st_count(f));
    TK_CHECK(attn_st_at(f, 0) && strcmp(attn_st_at(f, 0)->name, "u8_first") == 0 &&
                 strcmp(attn_st_at(f, 1)->name, "f64") == 0,
             "attn_st_at does not follow the order of insertion");
    for (int i = 0; i < n_cases; i++) check_dtype_case(f, &cases[i]);

    attn_tensor *s = attn_st_load(f, "scalar", NULL);
    TK_CHECK(s && s->ndim == 0 && s->numel == 1 && s->data[0] == 2.5f, "scalar round trip");
    attn_tensor_free(s);
    attn_ctx *ctx = attn_ctx_new(1);
    attn_tensor *e = attn_st_load(f, "empty", ctx);
    TK_CHECK(e && e->ndim == 3 && e->numel == 0 && e->shape[1] == 0, "zero-size round trip");
    const attn_st_tensor *e16 = attn_st_find(f, "empty16");
    TK_CHECK(e16 && e16->nbytes == 0 && e16->numel == 0, "zero-size F16 round trip");
    attn_ctx_free(ctx);

    const attn_st_tensor *t8 = attn_st_find(f, "eight_dims");
    TK_CHECK(t8 && t8->ndim == 8 && t8->shape[7] == 3 && t8->numel == 6, "8-dim round trip");
    TK_CHECK(attn_st_load(f, "eight_dims", NULL) == NULL && attn_last_status() == ATTN_ERR_SHAPE,
             "loading an 8-dim tensor into a 4-dim attn tensor must fail");
    printf("  8 dims: %s\n", attn_last_error());
    TK_CHECK(attn_st_load(f, "nope", NULL) == NULL && strstr(attn_last_error(), "nope"),
             "a missing tensor must fail with its name");
    attn_st_close(f);
    remove(path);

    /* a finite F64 value beyond float32's range would become inf unseen: refused, named */
    attn_st_writer *wb = attn_st_writer_new();
    const double big[3] = {3.4e38, -1e300, 0.0}; /* 3.4e38 still fits a float */
    TK_OK(add_host(wb, "mask", ATTN_DTYPE_F64, 1, (int64_t[]){3}, big));
    path_in_tmp(path, sizeof path, "f64_big.safetensors");
    TK_OK(attn_st_writer_save(wb, path));
    attn_st_writer_free(wb);
    f = attn_st_open(path);
    TK_CHECK(!f && attn_last_status() == ATTN_ERR_FORMAT &&
                 strstr(attn_last_error(), "\"mask\" (F64) has -1e+300 at index (1)"),
             "an F64 value beyond float range must be refused, naming the tensor and index: %s", attn_last_error());
    printf("  F64 beyond float: %s\n", attn_last_error());
    attn_st_close(f);
    remove(path);
}

/* ---- int64 loading, copy_into, add_tensor, metadata ---- */

static void test_conversions(void)
{
    attn_st_writer *w = attn_st_writer_new();
    const int64_t s3[1] = {3}, s23[2] = {2, 3};
    const float ints[3] = {-3.0f, 0.0f, 16777216.0f}, frac[3] = {1.0f, 2.5f, 3.0f};
    TK_OK(add_host(w, "i64", ATTN_DTYPE_I64, 1, s3, I64_DATA));
    TK_OK(add_host(w, "bool", ATTN_DTYPE_BOOL, 1, s3, BOOL_DATA));
    TK_OK(add_host(w, "f32_int", ATTN_DTYPE_F32, 1, s3, ints));
    TK_OK(add_host(w, "f32_frac", ATTN_DTYPE_F32, 1, s3, frac));
    attn_tensor *t = attn_tensor_alloc(2, s23);
    for (int i = 0; i < 6; i++) t->data[i] = (float)i * 0.5f - 1.0f;
    TK_OK(attn_st_writer_add_tensor(w, "tensor", t));
    TK_CHECK(add_host(w, "i64", ATTN_DTYPE_I64, 1, s3, I64_DATA) == ATTN_ERR_ARG, "a duplicate name must be refused");
    TK_CHECK(add_host(w, "__metadata__", ATTN_DTYPE_I64, 1, s3, I64_DATA) == ATTN_ERR_ARG,
             "__metadata__ cannot name a tensor");
    TK_CHECK(add_host(w, "bad\xff", ATTN_DTYPE_I64, 1, s3, I64_DATA) == ATTN_ERR_ARG,
             "a name that is not UTF-8 must be refused");
    const int64_t neg[1] = {-1};
    TK_CHECK(add_host(w, "neg", ATTN_DTYPE_I64, 1, neg, I64_DATA) == ATTN_ERR_ARG,
             "a negative dimension must be refused");
    TK_OK(attn_st_writer_set_metadata(w, "note", "first"));
    TK_OK(attn_st_writer_set_metadata(w, "note", "quote \" backslash \\ newline \n tab \t"));
    TK_OK(attn_st_writer_set_metadata(w, "unicode", "\xce\xb1\xce\xb2 \xe6\xb3\xa8\xe6\x84\x8f"));
    TK_OK(attn_st_writer_set_metadata(w, "empty", ""));
    char path[128];
    path_in_tmp(path, sizeof path, "conv.safetensors");
    TK_OK(attn_st_writer_save(w, path));
    attn_st_writer_free(w);

    attn_st_file *f = attn_st_open(path);
    TK_NOT_NULL(f);
    if (!f) return;
    const char *note = attn_st_metadata(f, "note"), *uni = attn_st_metadata(f, "unicode");
    TK_CHECK(note && strcmp(note, "quote \" backslash \\ newline \n tab \t") == 0, "metadata with escapes: got %s",
             note ? note : "(none)");
    TK_CHECK(uni && strcmp(uni, "\xce\xb1\xce\xb2 \xe6\xb3\xa8\xe6\x84\x8f") == 0, "UTF-8 metadata");
    TK_CHECK(attn_st_metadata(f, "empty") && !*attn_st_metadata(f, "empty"), "empty metadata value");
    TK_CHECK(attn_st_metadata(f, "missing") == NULL, "a missing key gives NULL");
    TK_CHECK(attn_st_count(f) == 5, "metadata is not a tensor (%zu tensors)", attn_st_count(f));

    int64_t n = 0;
    int64_t *v = attn_st_load_i64(f, "i64", &n);
    TK_CHECK(v && n == 3 && v[0] == -5 && v[1] == 4611686018427387905LL && v[2] == 7, "I64 loads exactly");
    free(v);
    v = attn_st_load_i64(f, "bool", &n);
    TK_CHECK(v && n == 3 && v[0] == 1 && v[1] == 0 && v[2] == 1, "BOOL loads as 0/1");
    free(v);
    v = attn_st_load_i64(f, "f32_int", &n);
    TK_CHECK(v && v[0] == -3 && v[2] == 16777216, "integral F32 loads as int64");
    free(v);
    v = attn_st_load_i64(f, "f32_frac", &n);
    TK_CHECK(!v && attn_last_status() == ATTN_ERR_FORMAT, "2.5 is not an int64");
    printf("  fractional ids: %s\n", attn_last_error());

    attn_tensor *u = attn_tensor_alloc(2, s23);
    TK_OK(attn_st_copy_into(f, "tensor", u));
    tk_close("copy_into", u->data, t->data, 6, 0.0f, 0.0f);
    attn_tensor *wrong = attn_tensor_alloc(1, s3);
    TK_CHECK(attn_st_copy_into(f, "tensor", wrong) == ATTN_ERR_SHAPE && strstr(attn_last_error(), "(2, 3)") &&
                 strstr(attn_last_error(), "(3)"),
             "copy_into a wrong shape must name both shapes: %s", attn_last_error());
    printf("  copy_into: %s\n", attn_last_error());
    attn_tensor_free(t);
    attn_tensor_free(u);
    attn_tensor_free(wrong);
    attn_st_close(f);
    remove(path);
}

/* ---- malformed files ---- */

static int n_refused;

static void expect_refused(const char *what, const unsigned char *bytes, size_t len)
{
    attn_clear_error();
    attn_st_file *f = attn_st_parse(bytes, len, what);
    TK_CHECK(f == NULL && attn_last_status() == ATTN_ERR_FORMAT && strlen(attn_last_error()) > 0 &&
                 strstr(attn_last_error(), what),
             "%s: expected a format error naming the input, got %s (%s)", what,
             f ? "a file" : attn_status_name(attn_last_status()), attn_last_error());
    printf("  refused: %s\n", attn_last_error());
    attn_st_close(f);
    n_refused++;
}

/* A header text (N = its length) and data_len zero bytes of data must be refused. */
static void refuse_json(const char *what, const char *json, size_t data_len)
{
    static unsigned char buf[1 << 14];
    static const unsigned char zeros[256];
    size_t len = build_file(buf, strlen(json), json, zeros, data_len);
    expect_refused(what, buf, len);
}

/* A valid header (N = n, or the text's length when n is 0) that must parse to n_tensors. */
static void accept_json(const char *what, const char *json, uint64_t n, size_t data_len, size_t n_tensors)
{
    static unsigned char buf[1 << 12];
    static const unsigned char zeros[256];
    size_t len = build_file(buf, n ? n : strlen(json), json, zeros, data_len);
    attn_st_file *f = attn_st_parse(buf, len, what);
    TK_CHECK(f && attn_st_count(f) == n_tensors, "%s: should be accepted: %s", what, attn_last_error());
    attn_st_close(f);
}

#define T(name, dtype, shape, b, e)                                                                                    \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" b "," e "]}"

static void test_malformed(void)
{
    unsigned char buf[64] = {0};
    expect_refused("empty file", buf, 0);
    put_le64(buf, 2);
    expect_refused("truncated file", buf, 5);
    put_le64(buf, 1000);
    memcpy(buf + 8, "{}", 2);
    expect_refused("header size beyond the file", buf, 10);
    put_le64(buf, 100000001);
    expect_refused("header size over 100MB", buf, 10);
    put_le64(buf, UINT64_MAX);
    expect_refused("header size 2^64-1", buf, 10);
    put_le64(buf, 0);
    expect_refused("header size zero", buf, 8);

    refuse_json("header not JSON", "{not json}", 0);
    refuse_json("header a JSON array", "[1, 2]", 0);
    refuse_json("header starting with a space", " {}", 0);
    refuse_json("garbage after the JSON object", "{} x", 0);
    refuse_json("header not UTF-8", "{\"\xc3\x28\":{}}", 0);
    refuse_json("raw control character in the header", "{\"a\x01\":{}}", 0);
    refuse_json("entry not an object", "{\"a\":5}", 0);
    refuse_json("missing dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    refuse_json("dtype not a string", "{\"a\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    refuse_json("unknown dtype", "{" T("a", "F128", "[1]", "0", "16") "}", 16);
    refuse_json("negative shape entry", "{" T("a", "F32", "[-1]", "0", "0") "}", 0);
    refuse_json("fractional shape entry", "{" T("a", "F32", "[2.5]", "0", "10") "}", 10);
    refuse_json("shape not an array", "{" T("a", "F32", "3", "0", "12") "}", 12);
    refuse_json("more than 8 dimensions", "{" T("a", "F32", "[1,1,1,1,1,1,1,1,1]", "0", "4") "}", 4);
    refuse_json("shape product overflowing int64", "{" T("a", "F32", "[4294967296,4294967296,4]", "0", "0") "}", 0);
    refuse_json("byte size overflowing int64", "{" T("a", "F64", "[1099511627776,4194304]", "0", "0") "}", 0);
    refuse_json("negative offset", "{" T("a", "U8", "[4]", "-1", "3") "}", 4);
    refuse_json("offsets ending before they begin", "{" T("a", "U8", "[0]", "8", "0") "}", 8);
    refuse_json("three data offsets", "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4,4]}}", 4);
    refuse_json("offsets overlapping", "{" T("a", "F32", "[2]", "0", "8") "," T("b", "F32", "[2]", "4", "12") "}", 12);
    refuse_json("hole between tensors", "{" T("a", "F32", "[2]", "0", "8") "," T("b", "F32", "[2]", "12", "20") "}",
                20);
    refuse_json("first tensor not at offset 0", "{" T("a", "F32", "[2]", "4", "12") "}", 12);
    refuse_json("offsets outside the buffer", "{" T("a", "F32", "[2,3]", "0", "24") "}", 8);
    refuse_json("byte size mismatch", "{" T("a", "F32", "[2,3]", "0", "20") "}", 20);
    refuse_json("duplicate names", "{" T("a", "F32", "[1]", "0", "4") "," T("a", "F32", "[1]", "4", "8") "}", 8);
    refuse_json("duplicate __metadata__", "{\"__metadata__\":{\"a\":\"1\"},\"__metadata__\":{\"b\":\"2\"}}", 0);
    refuse_json("metadata value not a string", "{\"__metadata__\":{\"k\":1}}", 0);
    refuse_json("metadata not an object", "{\"__metadata__\":\"x\"}", 0);
    refuse_json("duplicate metadata key", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0);
    refuse_json("a key twice in an entry (dtype)",
                "{\"a\":{\"dtype\":\"U8\",\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4);
    refuse_json("a key twice in an entry (shape)",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"shape\":[2],\"data_offsets\":[0,4]}}", 4);
    refuse_json("a key twice in an entry (data_offsets)",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4],\"data_offsets\":[0,2]}}", 4);
    refuse_json("trailing bytes after the last tensor", "{" T("a", "F32", "[1]", "0", "4") "}", 8);
    refuse_json("data bytes but no tensors", "{}", 4);

    static char deep[6000]; /* nesting far past cJSON's limit must fail cleanly */
    size_t at = (size_t)snprintf(deep, sizeof deep, "{\"a\":");
    for (int i = 0; i < 2500; i++) deep[at++] = '[';
    for (int i = 0; i < 2500; i++) deep[at++] = ']';
    deep[at++] = '}';
    deep[at] = '\0';
    refuse_json("deeply nested header", deep, 0);
    TK_CHECK(n_refused >= 15, "only %d malformed inputs tried", n_refused);

    /* valid but unusual */
    accept_json("header padded with mixed whitespace", "{}\n\t\r ", 7, 0, 0);
    accept_json("unpadded header", "{}", 2, 0, 0);
    accept_json("offsets listed out of order",
                "{" T("b", "F32", "[1]", "4", "8") "," T("a", "F32", "[1]", "0", "4") "}", 0, 8, 2);
    accept_json(
        "zero-size tensors sharing an offset",
        "{" T("z1", "F32", "[0]", "4", "4") "," T("a", "F32", "[]", "0", "4") "," T("z2", "I64", "[3,0]", "4", "4") "}",
        0, 4, 3);
    accept_json("extra keys in an entry", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2],\"x\":[1]}}",
                0, 2, 1);
}

/* ---- the header's JSON (src/io/json.c): RFC 8259's grammar, strings decoded ---- */

/* A header holding one U8 tensor of shape [0] named by the JSON string name_json. */
#define NAMED(name_json) "{" name_json ":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}"

static void expect_name(const char *what, const char *json, const char *name)
{
    static unsigned char buf[256];
    size_t len = build_file(buf, strlen(json), json, NULL, 0);
    attn_st_file *f = attn_st_parse(buf, len, what);
    const attn_st_tensor *t = f && attn_st_count(f) == 1 ? attn_st_at(f, 0) : NULL;
    TK_CHECK(t && strcmp(t->name, name) == 0, "%s: the name decodes to \"%s\", got \"%s\" (%s)", what, name,
             t ? t->name : "nothing", attn_last_error());
    attn_st_close(f);
}

static void test_json_grammar(void)
{
    /* counts are written as integers, as the reference parser's usize wants them */
    refuse_json("shape entry written 1.0", "{" T("a", "U8", "[1.0]", "0", "1") "}", 1);
    refuse_json("offset with an exponent", "{" T("a", "U8", "[1]", "0", "1e0") "}", 1);
    refuse_json("number with a leading zero", "{" T("a", "U8", "[01]", "0", "1") "}", 1);
    refuse_json("offset past 2^64", "{" T("a", "U8", "[0]", "0", "18446744073709551616") "}", 0);
    refuse_json("trailing comma in an array", "{" T("a", "U8", "[1,]", "0", "1") "}", 1);
    refuse_json("trailing comma in an object", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0],}}", 0);
    refuse_json("missing colon", "{\"a\" {}}", 0);
    refuse_json("single-quoted name", "{'a':{}}", 0);
    refuse_json("unterminated string", "{\"a", 0);
    refuse_json("misspelled literal", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0],\"x\":tru}}", 0);
    refuse_json("unknown escape", NAMED("\"\\x41\""), 0);
    refuse_json("lone high surrogate", NAMED("\"\\ud800\""), 0);
    refuse_json("lone low surrogate", NAMED("\"\\udc00\""), 0);
    refuse_json("high surrogate before a non-surrogate", NAMED("\"\\ud800\\u0041\""), 0);
    refuse_json("short \\u escape", NAMED("\"\\u00e\""), 0);

    expect_name("escapes in a name", NAMED("\"caf\\u00e9\\n\\\"\\\\\\/\""), "caf\xc3\xa9\n\"\\/");
    expect_name("surrogate pair in a name", NAMED("\"\\ud83d\\ude00\""), "\xf0\x9f\x98\x80");
    expect_name("raw UTF-8 in a name", NAMED("\"\xe4\xb8\x80\""), "\xe4\xb8\x80");
    accept_json("every kind of value in an extra key",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0],"
                "\"x\":[true, false, null, -1.5e3, 0.25E+2, \"s\", {}, [], {\"y\": [[]]}]}}",
                0, 0, 1);

    static unsigned char buf[128];
    const char *json = "{\"__metadata__\":{\"k\":\"a\\\"b\\\\c\\td\\u20ac\"}}";
    size_t len = build_file(buf, strlen(json), json, NULL, 0);
    attn_st_file *f = attn_st_parse(buf, len, "escaped metadata");
    const char *v = f ? attn_st_metadata(f, "k") : NULL;
    TK_CHECK(v && strcmp(v, "a\"b\\c\td\xe2\x82\xac") == 0, "metadata value decoded, got \"%s\"", v ? v : "nothing");
    attn_st_close(f);
}

/* ---- open and save failures, atomic replacement ---- */

static void test_open_errors(void)
{
    char path[128];
    path_in_tmp(path, sizeof path, "does-not-exist.safetensors");
    TK_CHECK(attn_st_open(path) == NULL && attn_last_status() == ATTN_ERR_IO && strstr(attn_last_error(), path),
             "a missing file is an I/O error naming it");
    printf("  open: %s\n", attn_last_error());
    TK_CHECK(attn_st_open(tmpdir) == NULL && attn_last_status() == ATTN_ERR_IO, "a directory is refused");
    printf("  open: %s\n", attn_last_error());
    path_in_tmp(path, sizeof path, "fifo");
    if (mkfifo(path, 0600) == 0) { /* must be refused at once, not block waiting for a writer */
        TK_CHECK(attn_st_open(path) == NULL && attn_last_status() == ATTN_ERR_IO, "a FIFO is refused");
        printf("  open: %s\n", attn_last_error());
        remove(path);
    }
}

static attn_st_writer *writer_with_value(float value, int64_t n)
{
    attn_st_writer *w = attn_st_writer_new();
    float *data = malloc((size_t)n * sizeof *data);
    for (int64_t i = 0; i < n; i++) data[i] = value;
    TK_OK(add_host(w, "x", ATTN_DTYPE_F32, 1, &n, data));
    free(data);
    return w;
}

static float value_at(const char *path)
{
    attn_st_file *f = attn_st_open(path);
    attn_tensor *x = f ? attn_st_load(f, "x", NULL) : NULL;
    float v = x ? x->data[0] : NAN;
    attn_tensor_free(x);
    attn_st_close(f);
    return v;
}

static void test_save_errors(void)
{
    const char *bad = "/nonexistent/dir/x.safetensors";
    attn_st_writer *w = writer_with_value(1.0f, 4);
    TK_CHECK(attn_st_writer_save(w, bad) == ATTN_ERR_IO && strstr(attn_last_error(), bad),
             "an unwritable path is an I/O error naming it");
    printf("  save: %s\n", attn_last_error());
    struct stat st;
    TK_CHECK(stat(bad, &st) != 0, "nothing may exist at the unwritable path");

    /* rename onto a directory fails after the temp file was written: it must be removed */
    char dir[128], inner[160];
    path_in_tmp(dir, sizeof dir, "a-directory");
    snprintf(inner, sizeof inner, "%s/keep", dir);
    mkdir(dir, 0700);
    FILE *fp = fopen(inner, "w");
    if (fp) fclose(fp);
    int before = tmp_entries();
    TK_CHECK(attn_st_writer_save(w, dir) == ATTN_ERR_IO, "saving onto a directory must fail");
    printf("  save: %s\n", attn_last_error());
    TK_CHECK(tmp_entries() == before, "a failed save left a temp file (%d entries, %d before)", tmp_entries(), before);
    remove(inner);
    rmdir(dir);

    /* replacing an existing file */
    char path[128];
    path_in_tmp(path, sizeof path, "replace.safetensors");
    TK_OK(attn_st_writer_save(w, path));
    attn_st_writer *w2 = writer_with_value(2.0f, 4);
    TK_OK(attn_st_writer_save(w2, path));
    TK_CHECK(value_at(path) == 2.0f, "saving over a file replaces it");
    TK_CHECK(tmp_entries() == 1, "a save left %d entries in the directory, expected 1", tmp_entries());

    /* a write that fails midway (file size limit, as a full disk would) keeps the old file */
    attn_st_writer *big = writer_with_value(3.0f, 1 << 16);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 4096;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &lim);
    attn_status s = attn_st_writer_save(big, path);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    TK_CHECK(s == ATTN_ERR_IO && strstr(attn_last_error(), path),
             "a failed write must be an I/O error naming the path, got %s", attn_last_error());
    printf("  save: %s\n", attn_last_error());
    TK_CHECK(value_at(path) == 2.0f, "a failed save must leave the old file as it was");
    TK_CHECK(tmp_entries() == 1, "a failed save left %d entries in the directory, expected 1", tmp_entries());
    remove(path);
    attn_st_writer_free(w);
    attn_st_writer_free(w2);
    attn_st_writer_free(big);

    /* a header past ATTN_ST_MAX_HEADER, which the reader would refuse, is never written */
    attn_st_writer *wide = writer_with_value(1.0f, 4);
    const size_t n = ATTN_ST_MAX_HEADER;
    char *value = malloc(n + 1);
    size_t bytes = 0;
    if (value) {
        memset(value, 'x', n), value[n] = '\0';
        TK_OK(attn_st_writer_set_metadata(wide, "vocab", value));
        TK_OK(attn_st_writer_header_bytes(wide, &bytes));
        TK_CHECK(bytes > ATTN_ST_MAX_HEADER, "the header of a %zu-byte value measures %zu bytes", n, bytes);
        TK_CHECK(attn_st_writer_save(wide, path) == ATTN_ERR_ARG && strstr(attn_last_error(), "over the"),
                 "a header of %zu bytes must be refused, got: %s", bytes, attn_last_error());
        printf("  save: %.160s\n", attn_last_error());
        TK_CHECK(stat(path, &st) != 0 && tmp_entries() == 0, "the refused save wrote something");
        value[n - 200] = '\0'; /* just under: written and read back */
        TK_OK(attn_st_writer_set_metadata(wide, "vocab", value));
        TK_OK(attn_st_writer_save(wide, path));
        attn_st_file *f = attn_st_open(path);
        TK_CHECK(f && strlen(attn_st_metadata(f, "vocab")) == n - 200, "a header just under the limit reads back");
        attn_st_close(f);
        remove(path);
    }
    free(value);
    attn_st_writer_free(wide);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn-st-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_golden();
    test_all_dtypes();
    test_conversions();
    test_malformed();
    test_json_grammar();
    test_open_errors();
    test_save_errors();
    TK_CHECK(tmp_entries() == 0, "the tests left %d files behind", tmp_entries());
    rmdir(tmpdir);
    return tk_finish("test_safetensors");
}
