/* Private to src/io: what the safetensors reader shares with the writer and with checkpoints.
 * Not installed. */
#ifndef ATTN_IO_H
#define ATTN_IO_H

#include "../core/core.h"

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
attn_status attn__st_check_shape(const attn_st_file *f, const attn_st_tensor *t, int ndim,
                                 const int64_t *shape);

#endif
