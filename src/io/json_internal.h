/* Private to src/io: the JSON parser of safetensors headers (json.c). Our own, so that the core
 * library depends on nothing but libm, the GEMM library and OpenMP: the header is one object of
 * small objects, and a validating parser of RFC 8259 is shorter than the dependency it replaces.
 * Not installed. */
#ifndef ATTN_IO_JSON_INTERNAL_H
#define ATTN_IO_JSON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Arrays and objects nested deeper than this are refused (a safetensors header needs 3). */
#define ATTN__JSON_MAX_DEPTH 64

typedef enum attn__json_kind {
    ATTN__JSON_NULL,
    ATTN__JSON_BOOL,
    ATTN__JSON_NUMBER,
    ATTN__JSON_STRING,
    ATTN__JSON_ARRAY,
    ATTN__JSON_OBJECT,
} attn__json_kind;

/* One value. Arrays and objects list their items from `first` through `next`, in the text's
 * order; an object keeps every member, duplicate names included (the caller decides). */
typedef struct attn__json attn__json;
struct attn__json {
    attn__json_kind kind;
    char *name;         /* an object member's name (decoded UTF-8, NUL-terminated), else NULL */
    char *string;       /* STRING: the decoded value, NUL-terminated (\u0000 is refused) */
    const char *number; /* NUMBER: its text in the parsed buffer (number_len bytes), as written */
    size_t number_len;
    bool boolean;      /* BOOL: its value */
    attn__json *first; /* ARRAY, OBJECT: the first item, or NULL */
    attn__json *next;  /* the next item of the enclosing array or object */
    size_t count;      /* ARRAY, OBJECT: the number of items */
};

/* Parses one JSON value from text[0..len), which must be followed by nothing but whitespace.
 * Returns the value (free with attn__json_free), or NULL with why[0..why_len) saying what was
 * wrong and at which byte (or that memory ran out). */
attn__json *attn__json_parse(const char *text, size_t len, char *why, size_t why_len);
void attn__json_free(attn__json *v);

/* The first member of object obj named name, or NULL (also when obj is not an object). */
const attn__json *attn__json_member(const attn__json *obj, const char *name);
/* true when v is a number written as decimal digits alone (no sign, fraction or exponent) whose
 * value is at most max (<= 2^64 - 1): then *out is that value. */
bool attn__json_count(const attn__json *v, uint64_t max, uint64_t *out);

#endif
