/* Private to src/io: what the safetensors reader shares with the writer, checkpoints and state_dicts.
 * Not installed. */
#ifndef ATTN_IO_H
#define ATTN_IO_H

#include "../core/core_internal.h"

/* true when s[0..n) is well-formed UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF). */
bool attn__utf8_valid(const unsigned char *s, size_t n);

/* Converts t's numel elements (any dtype, little-endian, maybe unaligned) to float32 into out
 * (numel floats). Cannot fail: the tensor was validated when its file was parsed. */
void attn__st_to_f32(float *out, const attn_st_tensor *t);

/* The path (or the caller's name) f was opened with, for messages. */
const char *attn__st_label(const attn_st_file *f);

/* ATTN_OK when t has exactly the shape (ndim, shape); else ATTN_ERR_SHAPE with a message naming
 * f's file, the tensor and both shapes. */
attn_status attn__st_check_shape(const attn_st_file *f, const attn_st_tensor *t, int ndim, const int64_t *shape);

/* ---- loads into parameters (load_match.c): state_dicts, checkpoints, averaging ---- */

/* One destination: a parameter or an optimizer state buffer. */
typedef struct attn__load_item {
    const char *key; /* its name in the file */
    int ndim;
    const int64_t *shape;
    float *dst;                /* numel floats */
    const attn_st_tensor *src; /* set by attn__load_match: the file's tensor, NULL when absent */
} attn__load_item;

typedef struct attn__load_rules {
    bool require_all;                                  /* a destination absent from the file is an error */
    bool (*known)(const char *name, const void *user); /* NULL: file tensors with nowhere to go
                                  are skipped; else those it rejects are errors */
    const void *user;
} attn__load_rules;

/* Finds every item's tensor in f; wrong shapes, and what the rules refuse, make one error that
 * names every tensor concerned ("<label>: the file does not fit the parameters<context>: missing
 * N: ...; unexpected N: ...; wrong shape N: ..."): ATTN_ERR_FORMAT, or ATTN_ERR_SHAPE when only
 * shapes differ. */
attn_status attn__load_match(const attn_st_file *f, const char *label, const char *context, attn__load_item *items,
                             size_t n, const attn__load_rules *rules);
/* ATTN_ERR_NUMERIC naming the tensor and index of the first NaN or Inf among the items found. */
attn_status attn__load_finite(const attn__load_item *items, size_t n, const char *label);
/* Copies every item found (converted to float32). */
void attn__load_copy(const attn__load_item *items, size_t n);

#endif
