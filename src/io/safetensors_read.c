/* safetensors reader: reads a whole file into one buffer, validates it as the reference parser
 * does (header size and JSON, entries, duplicate names, contiguous data with no holes or
 * overlaps, byte sizes, trailing bytes), and converts tensors to float32 or int64.
 *
 * File layout: N (u64 little-endian) | N bytes of JSON header | data buffer. Each header entry is
 *   "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
 * with offsets relative to the data buffer; "__metadata__" maps strings to strings.
 * Every violation returns NULL with ATTN_ERR_FORMAT and a message naming the file, the tensor
 * and what was expected against what was found. Nothing is read outside the buffer. */
#include "io_internal.h"
#include "json_internal.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_EXACT 9007199254740992u /* 2^53: JSON numbers above it are not exact doubles */

struct attn_st_file {
    char *label;          /* path or caller's name, for messages */
    unsigned char *bytes; /* (len) the whole file */
    size_t len;
    attn__json *header;             /* parsed header; tensor names and metadata point into it */
    const attn__json *metadata;     /* the "__metadata__" object, or NULL */
    attn_st_tensor *tensors;        /* (count) in header order */
    const attn_st_tensor **by_name; /* (count) sorted by name, for attn_st_find */
    size_t count;
};

/* ---- dtypes ---- */

static const struct {
    const char *name;
    size_t size;
} DTYPES[] = {
    [ATTN_DTYPE_F32] = {"F32", 4},   [ATTN_DTYPE_F64] = {"F64", 8},   [ATTN_DTYPE_I64] = {"I64", 8},
    [ATTN_DTYPE_I32] = {"I32", 4},   [ATTN_DTYPE_BOOL] = {"BOOL", 1}, [ATTN_DTYPE_F16] = {"F16", 2},
    [ATTN_DTYPE_BF16] = {"BF16", 2}, [ATTN_DTYPE_I16] = {"I16", 2},   [ATTN_DTYPE_I8] = {"I8", 1},
    [ATTN_DTYPE_U8] = {"U8", 1},
};
#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])

const char *attn_dtype_name(attn_dtype dt)
{
    return (size_t)dt < N_DTYPES ? DTYPES[dt].name : "unknown";
}

size_t attn_dtype_size(attn_dtype dt)
{
    return (size_t)dt < N_DTYPES ? DTYPES[dt].size : 0;
}

static bool dtype_from_name(const char *s, attn_dtype *dt)
{
    for (size_t i = 0; i < N_DTYPES; i++) {
        if (strcmp(s, DTYPES[i].name) == 0) {
            *dt = (attn_dtype)i;
            return true;
        }
    }
    return false;
}

/* ---- little-endian element decoding ---- */

static uint16_t le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint64_t le64(const unsigned char *p)
{
    return attn__le32(p) | (uint64_t)attn__le32(p + 4) << 32;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static double f64_from_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* IEEE half: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Exact in float32. */
static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0) { /* zero or subnormal: man * 2^-24 */
        float f = (float)man * 0x1p-24f;
        return sign ? -f : f;
    }
    if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | man << 13); /* inf, NaN */
    return f32_from_bits(sign | (exp + 112) << 23 | man << 13);            /* rebias 15 -> 127 */
}

/* bfloat16 is the top half of a float32. */
static float bf16_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

void attn__st_to_f32(float *out, const attn_st_tensor *t)
{
    const unsigned char *p = t->data;
    size_t n = (size_t)t->numel;
    switch (t->dtype) {
    case ATTN_DTYPE_F32:
        for (size_t i = 0; i < n; i++) out[i] = f32_from_bits(attn__le32(p + 4 * i));
        break;
    case ATTN_DTYPE_F64:
        for (size_t i = 0; i < n; i++) out[i] = (float)f64_from_bits(le64(p + 8 * i));
        break;
    case ATTN_DTYPE_I64:
        for (size_t i = 0; i < n; i++) out[i] = (float)(int64_t)le64(p + 8 * i);
        break;
    case ATTN_DTYPE_I32:
        for (size_t i = 0; i < n; i++) out[i] = (float)(int32_t)attn__le32(p + 4 * i);
        break;
    case ATTN_DTYPE_I16:
        for (size_t i = 0; i < n; i++) out[i] = (float)(int16_t)le16(p + 2 * i);
        break;
    case ATTN_DTYPE_I8:
        for (size_t i = 0; i < n; i++) out[i] = (float)(int8_t)p[i];
        break;
    case ATTN_DTYPE_U8:
        for (size_t i = 0; i < n; i++) out[i] = (float)p[i];
        break;
    case ATTN_DTYPE_BOOL:
        for (size_t i = 0; i < n; i++) out[i] = p[i] ? 1.0f : 0.0f;
        break;
    case ATTN_DTYPE_F16:
        for (size_t i = 0; i < n; i++) out[i] = f16_to_f32(le16(p + 2 * i));
        break;
    case ATTN_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) out[i] = bf16_to_f32(le16(p + 2 * i));
        break;
    }
}

/* The element at p of a float dtype, exactly, as a double */
static double float_at(attn_dtype dtype, const unsigned char *p)
{
    switch (dtype) {
    case ATTN_DTYPE_F64:
        return f64_from_bits(le64(p));
    case ATTN_DTYPE_F16:
        return f16_to_f32(le16(p));
    case ATTN_DTYPE_BF16:
        return bf16_to_f32(le16(p));
    default:
        return f32_from_bits(attn__le32(p));
    }
}

/* Element i as int64: integer dtypes exactly, float dtypes when they hold an integer in range. */
static bool element_i64(const attn_st_tensor *t, size_t i, int64_t *out, double *as_float)
{
    const unsigned char *p = (const unsigned char *)t->data + i * attn_dtype_size(t->dtype);
    double d;
    switch (t->dtype) {
    case ATTN_DTYPE_I64:
        *out = (int64_t)le64(p);
        return true;
    case ATTN_DTYPE_I32:
        *out = (int32_t)attn__le32(p);
        return true;
    case ATTN_DTYPE_I16:
        *out = (int16_t)le16(p);
        return true;
    case ATTN_DTYPE_I8:
        *out = (int8_t)p[0];
        return true;
    case ATTN_DTYPE_U8:
        *out = p[0];
        return true;
    case ATTN_DTYPE_BOOL:
        *out = p[0] != 0;
        return true;
    case ATTN_DTYPE_F32:
    case ATTN_DTYPE_F64:
    case ATTN_DTYPE_F16:
    case ATTN_DTYPE_BF16:
        d = float_at(t->dtype, p);
        break;
    default:
        return false;
    }
    *as_float = d;
    if (!(d >= -0x1p63 && d < 0x1p63) || d != (double)(int64_t)d) return false;
    *out = (int64_t)d;
    return true;
}

/* ---- text helpers ---- */

bool attn__utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            len = 2, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i < len) return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return false;
            cp = cp << 6 | (s[i + k] & 0x3fu);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += len;
    }
    return true;
}

static bool json_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* ---- header validation ---- */

/* A JSON number that is a non-negative integer, written as one (as the reference parser's
 * usize wants), up to 2^53 so that any JSON reader holds it exactly. */
static bool json_count(const attn__json *v, uint64_t *out)
{
    return attn__json_count(v, ST_MAX_EXACT, out);
}

/* The header bytes: UTF-8, no raw control characters, starts with '{'. */
static attn_status check_header_text(const char *label, const unsigned char *h, size_t n)
{
    if (n == 0) return attn__fail(ATTN_ERR_FORMAT, "%s: the header is empty, expected a JSON object", label);
    if (h[0] != '{')
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: the header must be a JSON object starting with "
                          "'{', found byte 0x%02x",
                          label, h[0]);
    for (size_t i = 0; i < n; i++) {
        if (h[i] < 0x20 && !json_space(h[i]))
            return attn__fail(ATTN_ERR_FORMAT,
                              "%s: header byte %zu is the control character "
                              "0x%02x, which JSON does not allow",
                              label, i, h[i]);
    }
    if (!attn__utf8_valid(h, n)) return attn__fail(ATTN_ERR_FORMAT, "%s: the header is not valid UTF-8", label);
    for (size_t i = 0; i + 1 < n; i++) { /* a name or value would end at a \u0000 without a word */
        if (h[i] != '\\') continue;
        if (h[i + 1] == 'u' && i + 5 < n && !memcmp(h + i + 2, "0000", 4))
            return attn__fail(ATTN_ERR_FORMAT,
                              "%s: the header holds \\u0000 (a NUL character) at byte %zu; "
                              "names and metadata are text without NUL",
                              label, i);
        i++; /* the escaped character */
    }
    return ATTN_OK;
}

static attn_status parse_shape(const char *label, const char *name, const attn__json *shape, attn_st_tensor *t)
{
    if (!shape || shape->kind != ATTN__JSON_ARRAY)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: tensor \"%s\": \"shape\" must be an array of "
                          "integers, found %s",
                          label, name, shape ? "another value" : "nothing");
    if (shape->count > ATTN_ST_MAX_DIMS)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: tensor \"%s\": shape has %zu dimensions, at most "
                          "%d are supported",
                          label, name, shape->count, ATTN_ST_MAX_DIMS);
    t->ndim = 0;
    for (const attn__json *d = shape->first; d; d = d->next) {
        uint64_t v;
        if (!json_count(d, &v)) {
            if (d->kind == ATTN__JSON_NUMBER)
                return attn__fail(ATTN_ERR_FORMAT,
                                  "%s: tensor \"%s\": shape entry %d must be "
                                  "a non-negative integer (up to 2^53), found %.*s",
                                  label, name, t->ndim, (int)d->number_len, d->number);
            return attn__fail(ATTN_ERR_FORMAT,
                              "%s: tensor \"%s\": shape entry %d must be a "
                              "non-negative integer, found a non-number",
                              label, name, t->ndim);
        }
        t->shape[t->ndim++] = (int64_t)v;
    }
    return ATTN_OK;
}

/* data_offsets: [begin, end], integers, begin <= end. */
static attn_status parse_offsets(const char *label, const char *name, const attn__json *offs, uint64_t *begin,
                                 uint64_t *end)
{
    if (!offs || offs->kind != ATTN__JSON_ARRAY || offs->count != 2 || !json_count(offs->first, begin) ||
        !json_count(offs->first->next, end))
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: tensor \"%s\": \"data_offsets\" must be "
                          "[begin, end] with non-negative integers",
                          label, name);
    if (*begin > *end)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: tensor \"%s\": data_offsets [%llu, %llu] end "
                          "before they begin",
                          label, name, (unsigned long long)*begin, (unsigned long long)*end);
    return ATTN_OK;
}

/* numel and nbytes of t with overflow checks; nbytes must equal end - begin. */
static attn_status check_size(const char *label, const attn_st_tensor *t, uint64_t begin, uint64_t end, int64_t *numel)
{
    char sh[160];
    int64_t n = 1, bytes;
    for (int i = 0; i < t->ndim; i++) {
        if (!attn__mul_ok(n, t->shape[i], &n))
            return attn__fail(ATTN_ERR_FORMAT,
                              "%s: tensor \"%s\": shape %s has more elements "
                              "than int64 can count",
                              label, t->name, attn__dims_str(sh, sizeof sh, t->ndim, t->shape));
    }
    if (!attn__mul_ok(n, (int64_t)attn_dtype_size(t->dtype), &bytes))
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: tensor \"%s\": %s shape %s takes more bytes "
                          "than int64 can count",
                          label, t->name, attn_dtype_name(t->dtype), attn__dims_str(sh, sizeof sh, t->ndim, t->shape));
    if ((uint64_t)bytes != end - begin)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: tensor \"%s\": data_offsets [%llu, %llu] give "
                          "%llu bytes, but %s shape %s needs %lld",
                          label, t->name, (unsigned long long)begin, (unsigned long long)end,
                          (unsigned long long)(end - begin), attn_dtype_name(t->dtype),
                          attn__dims_str(sh, sizeof sh, t->ndim, t->shape), (long long)bytes);
    *numel = n;
    return ATTN_OK;
}

static int cmp_json_keys(const void *a, const void *b)
{
    return strcmp((*(const attn__json *const *)a)->name, (*(const attn__json *const *)b)->name);
}

/* Duplicate keys of one JSON object (the parser keeps them as separate items). */
static attn_status check_unique_keys(const char *label, const attn__json *obj, const char *what)
{
    size_t n = obj->count, i = 0;
    if (n < 2) return ATTN_OK;
    const attn__json **keys = malloc(n * sizeof *keys); /* (n) */
    if (!keys) return attn__fail(ATTN_ERR_NOMEM, "%s: out of memory checking the header", label);
    for (const attn__json *it = obj->first; it; it = it->next) keys[i++] = it;
    qsort(keys, n, sizeof *keys, cmp_json_keys);
    attn_status s = ATTN_OK;
    for (i = 1; i < n && s == ATTN_OK; i++) {
        if (strcmp(keys[i - 1]->name, keys[i]->name) == 0)
            s = attn__fail(ATTN_ERR_FORMAT, "%s: %s \"%s\" appears more than once", label, what, keys[i]->name);
    }
    free(keys);
    return s;
}

/* One tensor entry; its offsets go to *begin, *end (checked against the layout later). */
static attn_status parse_entry(const char *label, const attn__json *item, attn_st_tensor *t, uint64_t *begin,
                               uint64_t *end)
{
    const char *name = item->name;
    t->name = name;
    if (item->kind != ATTN__JSON_OBJECT)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: tensor \"%s\": expected an object with dtype, "
                          "shape and data_offsets",
                          label, name);
    char what[96]; /* a key twice in the entry: Python's json would take the last, this reader the first */
    snprintf(what, sizeof what, "tensor \"%.64s\": key", name);
    if (check_unique_keys(label, item, what) != ATTN_OK) return attn_last_status();
    const attn__json *dt = attn__json_member(item, "dtype");
    if (!dt || dt->kind != ATTN__JSON_STRING)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: tensor \"%s\": \"dtype\" must be a string, "
                          "found %s",
                          label, name, dt ? "another value" : "nothing");
    if (!dtype_from_name(dt->string, &t->dtype))
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: tensor \"%s\": dtype \"%s\" is not one of F32, "
                          "F64, I64, I32, BOOL, F16, BF16, I16, I8, U8",
                          label, name, dt->string);
    attn_status s = parse_shape(label, name, attn__json_member(item, "shape"), t);
    if (s == ATTN_OK) s = parse_offsets(label, name, attn__json_member(item, "data_offsets"), begin, end);
    if (s == ATTN_OK) s = check_size(label, t, *begin, *end, &t->numel);
    if (s == ATTN_OK) t->nbytes = (size_t)(*end - *begin);
    return s;
}

static attn_status check_metadata(const char *label, const attn__json *meta)
{
    if (meta->kind != ATTN__JSON_OBJECT)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: \"__metadata__\" must be an object of string "
                          "values",
                          label);
    for (const attn__json *kv = meta->first; kv; kv = kv->next) {
        if (kv->kind != ATTN__JSON_STRING)
            return attn__fail(ATTN_ERR_FORMAT,
                              "%s: metadata \"%s\": the value must be a "
                              "string",
                              label, kv->name);
    }
    return ATTN_OK;
}

/* Every value is read as float32: an F64 tensor's finite values must stay finite there (a -1e300
 * mask value would silently become -inf and mask its row). Infinities and NaN pass as they are. */
static attn_status check_f64_range(const char *label, const attn_st_tensor *t)
{
    if (t->dtype != ATTN_DTYPE_F64) return ATTN_OK;
    const unsigned char *p = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
        const double d = f64_from_bits(le64(p + 8 * i));
        if (!isfinite(d) || !isinf((float)d)) continue;
        int64_t coord[ATTN_ST_MAX_DIMS] = {0}, flat = i;
        for (int k = t->ndim - 1; k >= 0; k--) {
            coord[k] = t->shape[k] ? flat % t->shape[k] : 0;
            flat = t->shape[k] ? flat / t->shape[k] : 0;
        }
        char index[8 + 21 * ATTN_ST_MAX_DIMS];
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: tensor \"%s\" (F64) has %g at index %s, beyond float32's range "
                          "(+-3.4e38) in which attn computes; expected finite float32 values (or +-inf itself)",
                          label, t->name, d, attn__dims_str(index, sizeof index, t->ndim, coord));
    }
    return ATTN_OK;
}

typedef struct st_span {
    uint64_t begin, end;
    size_t index; /* into the tensors, header order */
} st_span;

static int cmp_spans(const void *a, const void *b)
{
    const st_span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Sorted by offsets the tensors must tile [0, data_len) exactly. */
static attn_status check_layout(const char *label, const attn_st_tensor *tensors, st_span *spans, size_t count,
                                uint64_t data_len)
{
    qsort(spans, count, sizeof *spans, cmp_spans);
    uint64_t at = 0;
    for (size_t i = 0; i < count; i++) {
        const st_span *s = &spans[i];
        const char *name = tensors[s->index].name;
        if (s->begin > at)
            return attn__fail(ATTN_ERR_FORMAT,
                              "%s: tensor \"%s\": data_offsets [%llu, %llu] "
                              "leave a hole: expected it to begin at %llu (%s%s%s)",
                              label, name, (unsigned long long)s->begin, (unsigned long long)s->end,
                              (unsigned long long)at, i ? "where \"" : "the start of the data",
                              i ? tensors[spans[i - 1].index].name : "", i ? "\" ends" : "");
        if (s->begin < at)
            return attn__fail(ATTN_ERR_FORMAT,
                              "%s: tensor \"%s\": data_offsets [%llu, %llu] "
                              "overlap tensor \"%s\" [%llu, %llu]",
                              label, name, (unsigned long long)s->begin, (unsigned long long)s->end,
                              tensors[spans[i - 1].index].name, (unsigned long long)spans[i - 1].begin,
                              (unsigned long long)at);
        if (s->end > data_len)
            return attn__fail(ATTN_ERR_FORMAT,
                              "%s: tensor \"%s\": data_offsets [%llu, %llu] "
                              "run past the end of the data: the file has %llu data bytes",
                              label, name, (unsigned long long)s->begin, (unsigned long long)s->end,
                              (unsigned long long)data_len);
        at = s->end;
    }
    if (at != data_len)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: %llu trailing bytes after the last tensor (the "
                          "tensors end at %llu, the file has %llu data bytes)",
                          label, (unsigned long long)(data_len - at), (unsigned long long)at,
                          (unsigned long long)data_len);
    return ATTN_OK;
}

static int cmp_tensor_names(const void *a, const void *b)
{
    return strcmp((*(const attn_st_tensor *const *)a)->name, (*(const attn_st_tensor *const *)b)->name);
}

/* Every entry of the header object into f->tensors; offsets checked as a whole at the end. */
static attn_status parse_entries(attn_st_file *f, size_t header_len)
{
    size_t n_items = f->header->count;
    f->tensors = calloc(n_items ? n_items : 1, sizeof *f->tensors);    /* (n_items) */
    f->by_name = malloc((n_items ? n_items : 1) * sizeof *f->by_name); /* (n_items) */
    st_span *spans = malloc((n_items ? n_items : 1) * sizeof *spans);  /* (n_items) */
    attn_status s = ATTN_OK;
    if (!f->tensors || !f->by_name || !spans)
        s = attn__fail(ATTN_ERR_NOMEM, "%s: out of memory reading the header", f->label);
    for (const attn__json *item = f->header->first; item && s == ATTN_OK; item = item->next) {
        if (strcmp(item->name, "__metadata__") == 0) {
            f->metadata = item;
            s = check_metadata(f->label, item);
            if (s == ATTN_OK) s = check_unique_keys(f->label, item, "metadata key");
            continue;
        }
        attn_st_tensor *t = &f->tensors[f->count];
        st_span *sp = &spans[f->count];
        s = parse_entry(f->label, item, t, &sp->begin, &sp->end);
        sp->index = f->count++;
    }
    if (s == ATTN_OK) s = check_unique_keys(f->label, f->header, "name");
    uint64_t data_len = f->len - 8 - header_len;
    if (s == ATTN_OK) s = check_layout(f->label, f->tensors, spans, f->count, data_len);
    for (size_t i = 0; s == ATTN_OK && i < f->count; i++) {
        f->tensors[spans[i].index].data = f->bytes + 8 + header_len + spans[i].begin;
        f->by_name[i] = &f->tensors[i];
    }
    if (s == ATTN_OK) qsort(f->by_name, f->count, sizeof *f->by_name, cmp_tensor_names);
    for (size_t i = 0; s == ATTN_OK && i < f->count; i++) s = check_f64_range(f->label, &f->tensors[i]);
    free(spans);
    return s;
}

/* The size prefix, the header JSON and everything it describes. */
static attn_status parse_file(attn_st_file *f)
{
    if (f->len < 8)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: %zu bytes is too short for a safetensors file "
                          "(the 8-byte header size alone is missing)",
                          f->label, f->len);
    uint64_t n = le64(f->bytes);
    if (n > ATTN_ST_MAX_HEADER)
        return attn__fail(ATTN_ERR_FORMAT, "%s: header size %llu is over the limit of %u bytes", f->label,
                          (unsigned long long)n, ATTN_ST_MAX_HEADER);
    if (n > f->len - 8)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: header size %llu runs past the end of the file "
                          "(%zu bytes after the size)",
                          f->label, (unsigned long long)n, f->len - 8);
    const unsigned char *h = f->bytes + 8;
    attn_status s = check_header_text(f->label, h, (size_t)n);
    if (s != ATTN_OK) return s;
    char why[200];
    f->header = attn__json_parse((const char *)h, (size_t)n, why, sizeof why);
    if (!f->header)
        return attn__fail(ATTN_ERR_FORMAT, "%s: the header is not valid JSON: %s of the header", f->label, why);
    return parse_entries(f, (size_t)n);
}

/* Takes ownership of bytes (malloc'd, len bytes) and label; frees both on failure. */
static attn_st_file *parse_owned(unsigned char *bytes, size_t len, char *label)
{
    attn_st_file *f = calloc(1, sizeof *f);
    if (!f) {
        free(bytes);
        free(label);
        return attn__fail_null(ATTN_ERR_NOMEM, "out of memory opening a safetensors file");
    }
    f->bytes = bytes;
    f->len = len;
    f->label = label;
    if (parse_file(f) != ATTN_OK) {
        attn_st_close(f);
        return NULL;
    }
    return f;
}

/* ---- public: open, parse, close ---- */

/* want bytes from fd into buf; false (with an error naming path) on failure or a short file. */
static bool read_fully(int fd, unsigned char *buf, size_t want, const char *path)
{
    size_t got = 0;
    while (got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            attn__fail(ATTN_ERR_IO, "%s: read failed after %zu of %zu bytes: %s", path, got, want,
                       r < 0 ? strerror(errno) : "the file shrank");
            return false;
        }
        got += (size_t)r;
    }
    return true;
}

/* The whole regular file at path into one malloc'd buffer of *len bytes (+1, so never
 * malloc(0)): read once, into memory this library owns, where it is checked and from where every
 * tensor is taken. (A mapping of the file would fault with SIGBUS when another process truncates
 * it, and would show values that change after they were checked.) O_NONBLOCK keeps a FIFO from
 * blocking the open; it is refused next. */
static unsigned char *read_whole_file(const char *path, size_t *len)
{
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return attn__fail_null(ATTN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    unsigned char *buf = NULL;
    if (fstat(fd, &st) != 0) {
        attn__fail(ATTN_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        attn__fail(ATTN_ERR_IO, "%s: not a regular file%s", path, S_ISDIR(st.st_mode) ? " (a directory)" : "");
    } else if ((uint64_t)st.st_size >= SIZE_MAX) {
        attn__fail(ATTN_ERR_NOMEM, "%s: cannot hold %lld bytes in memory", path, (long long)st.st_size);
    } else {
        size_t size = (size_t)st.st_size;
        if (!(buf = malloc(size + 1))) {
            attn__fail(ATTN_ERR_NOMEM, "%s: cannot hold %zu bytes in memory", path, size);
        } else if (!read_fully(fd, buf, size, path)) {
            free(buf);
            buf = NULL;
        }
        if (buf) *len = size;
    }
    close(fd);
    return buf;
}

attn_st_file *attn_st_open(const char *path)
{
    if (!path) return attn__fail_null(ATTN_ERR_ARG, "attn_st_open: path is NULL");
    size_t len = 0;
    unsigned char *bytes = read_whole_file(path, &len);
    if (!bytes) return NULL;
    char *label = strdup(path);
    if (!label) {
        free(bytes);
        return attn__fail_null(ATTN_ERR_NOMEM, "%s: out of memory", path);
    }
    return parse_owned(bytes, len, label);
}

attn_st_file *attn_st_parse(const void *bytes, size_t len, const char *name)
{
    if (!name) name = "<memory>";
    if (!bytes && len) return attn__fail_null(ATTN_ERR_ARG, "%s: bytes is NULL", name);
    unsigned char *copy = malloc(len ? len : 1);
    char *label = strdup(name);
    if (!copy || !label) {
        free(copy);
        free(label);
        return attn__fail_null(ATTN_ERR_NOMEM, "%s: cannot copy %zu bytes", name, len);
    }
    if (len) memcpy(copy, bytes, len);
    return parse_owned(copy, len, label);
}

void attn_st_close(attn_st_file *f)
{
    if (!f) return;
    attn__json_free(f->header);
    free(f->tensors);
    free(f->by_name);
    free(f->bytes);
    free(f->label);
    free(f);
}

/* ---- public: lookup ---- */

size_t attn_st_count(const attn_st_file *f)
{
    return f ? f->count : (attn__null_arg("attn_st_count"), 0);
}

const attn_st_tensor *attn_st_at(const attn_st_file *f, size_t i)
{
    if (!f || i >= f->count)
        return attn__fail_null(ATTN_ERR_ARG, "attn_st_at: index %zu, the file has %zu tensors", i, f ? f->count : 0);
    return &f->tensors[i];
}

const attn_st_tensor *attn_st_find(const attn_st_file *f, const char *name)
{
    if (!f || !name) {
        attn__null_arg("attn_st_find");
        return NULL;
    } /* absent: NULL, no error */
    attn_st_tensor key = {.name = name};
    const attn_st_tensor *pkey = &key;
    const attn_st_tensor **hit = bsearch(&pkey, f->by_name, f->count, sizeof *f->by_name, cmp_tensor_names);
    return hit ? *hit : NULL;
}

const char *attn_st_metadata(const attn_st_file *f, const char *key)
{
    if (!f || !key) {
        attn__null_arg("attn_st_metadata");
        return NULL;
    }
    if (!f->metadata) return NULL;
    const attn__json *v = attn__json_member(f->metadata, key);
    return v ? v->string : NULL;
}

/* ---- public: conversion ---- */

/* Tensor `name` of f, or NULL with an error naming both. */
static const attn_st_tensor *find_or_fail(const attn_st_file *f, const char *name, const char *fn)
{
    if (!f || !name) return attn__fail_null(ATTN_ERR_ARG, "%s: file or name is NULL", fn);
    const attn_st_tensor *t = attn_st_find(f, name);
    if (!t) return attn__fail_null(ATTN_ERR_ARG, "%s: no tensor named \"%s\"", f->label, name);
    return t;
}

const char *attn__st_label(const attn_st_file *f)
{
    return f->label;
}

attn_status attn__st_check_shape(const attn_st_file *f, const attn_st_tensor *t, int ndim, const int64_t *shape)
{
    bool same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (same) return ATTN_OK;
    char a[160], b[160];
    return attn__fail(ATTN_ERR_SHAPE,
                      "%s: tensor \"%s\" has shape %s in the file, but its "
                      "destination has shape %s",
                      f->label, t->name, attn__dims_str(a, sizeof a, t->ndim, t->shape),
                      attn__dims_str(b, sizeof b, ndim, shape));
}

attn_tensor *attn_st_load(const attn_st_file *f, const char *name, attn_ctx *ctx)
{
    const attn_st_tensor *st = find_or_fail(f, name, "attn_st_load");
    if (!st) return NULL;
    if (st->ndim > ATTN_MAX_DIMS)
        return attn__fail_null(ATTN_ERR_SHAPE,
                               "%s: tensor \"%s\" has %d dimensions; attn "
                               "tensors have at most %d",
                               f->label, name, st->ndim, ATTN_MAX_DIMS);
    attn_tensor *t = ctx ? attn_tensor_empty(ctx, st->ndim, st->shape) : attn_tensor_alloc(st->ndim, st->shape);
    if (t) attn__st_to_f32(t->data, st);
    return t;
}

attn_tensor *attn_st_view(const attn_st_file *f, const char *name, attn_ctx *ctx)
{
    if (!ctx) return attn__fail_null(ATTN_ERR_ARG, "attn_st_view: ctx is NULL");
    const attn_st_tensor *st = find_or_fail(f, name, "attn_st_view");
    if (!st) return NULL;
    const uint16_t one = 1;
    const bool little = *(const unsigned char *)&one == 1;
    if (st->dtype != ATTN_DTYPE_F32 || !little || (uintptr_t)st->data % _Alignof(float) != 0 ||
        st->ndim > ATTN_MAX_DIMS)
        return attn_st_load(f, name, ctx); /* converted, or the message of too many dims */
    return attn__tensor_view(ctx, st->ndim, st->shape, (float *)(uintptr_t)st->data);
}

int64_t *attn_st_load_i64(const attn_st_file *f, const char *name, int64_t *numel)
{
    const attn_st_tensor *st = find_or_fail(f, name, "attn_st_load_i64");
    if (!st) return NULL;
    size_t n = (size_t)st->numel;
    if (n > SIZE_MAX / sizeof(int64_t))
        return attn__fail_null(ATTN_ERR_NOMEM, "%s: tensor \"%s\" is too large", f->label, name);
    int64_t *out = malloc((n ? n : 1) * sizeof *out); /* (numel) */
    if (!out) return attn__fail_null(ATTN_ERR_NOMEM, "%s: tensor \"%s\": cannot allocate %zu int64", f->label, name, n);
    for (size_t i = 0; i < n; i++) {
        double d = 0.0;
        if (!element_i64(st, i, &out[i], &d)) {
            free(out);
            return attn__fail_null(ATTN_ERR_FORMAT,
                                   "%s: tensor \"%s\" (%s): element %zu is %g, "
                                   "not an integer in int64 range",
                                   f->label, name, attn_dtype_name(st->dtype), i, d);
        }
    }
    if (numel) *numel = st->numel;
    return out;
}

attn_status attn_st_copy_into(const attn_st_file *f, const char *name, attn_tensor *t)
{
    if (!t) return attn__fail(ATTN_ERR_ARG, "attn_st_copy_into: destination tensor is NULL");
    const attn_st_tensor *st = find_or_fail(f, name, "attn_st_copy_into");
    if (!st) return attn_last_status();
    attn_status s = attn__st_check_shape(f, st, t->ndim, t->shape);
    if (s == ATTN_OK) attn__st_to_f32(t->data, st);
    return s;
}
