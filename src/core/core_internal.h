/* Private core of libattn: error reporting, the arena, the ctx, size arithmetic and shape
 * helpers shared by every layer above. Not installed. */
#ifndef ATTN_CORE_H
#define ATTN_CORE_H

#include "attn.h"

#include <stdarg.h>
#include <stdio.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* The calling thread's number in its OpenMP team and the team's size (0 and 1 without OpenMP, or
 * outside a parallel region) */
static inline int attn__thread_num(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}
static inline int attn__team_size(void)
{
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* Marks the few internals that libattn_data and libattn_plot call: exported from libattn.so for
 * them (the shared libraries beside it link it), as every other internal is hidden. Their attn__
 * prefix says what they are: private, no promise of ABI, for the sibling libraries alone. */
#define ATTN__SIBLING __attribute__((visibility("default")))

/* ---- little-endian words of the file formats, whatever the host's byte order ---- */

static inline uint32_t attn__le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void attn__put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* ---- errors ---- */

/* Records status and a printf-style message for attn_last_error(); returns status. */
/* A growable NUL-terminated byte string (buf.c). An append that cannot grow it returns the error
 * and sets failed, which sticks: later appends do nothing, so a builder may append freely and
 * look once at the end. */
typedef struct attn__buf {
    char *data;
    size_t len, cap;
    bool failed;
} attn__buf;

/* Room for `more` bytes past len (plus a NUL); ATTN_ERR_NOMEM when that fails. */
ATTN__SIBLING attn_status attn__buf_reserve(attn__buf *b, size_t more);
ATTN__SIBLING attn_status attn__buf_append(attn__buf *b, const char *s, size_t n);
ATTN__SIBLING void attn__buf_free(attn__buf *b);

ATTN__SIBLING attn_status attn__fail(attn_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for functions that return a pointer: always NULL. */
ATTN__SIBLING void *attn__fail_null(attn_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ATTN_ERR_SHAPE for an op's three inputs that do not fit one another: "OP: NAME0 [2, 3], NAME1
 * [..], NAME2 [..] do not fit; expected " then the printf-formatted rest */
attn_status attn__fail_inputs(const char *op, const char *const names[3], const attn_tensor *const in[3],
                              const char *expected, ...) __attribute__((format(printf, 4, 5)));

/* The NULL contract of attn.h for functions given a NULL where an object is needed. */
ATTN__SIBLING attn_status attn__null_arg(const char *fn); /* records ATTN_ERR_ARG "<fn>: ..."; returns it */
/* Ops given a NULL input return NULL and record ATTN_ERR_ARG, unless a failure is recorded
 * already: the NULL then comes from a failed op upstream, whose message is kept. */
void *attn__null_input(const char *fn);

/* ---- sizes: overflow-checked products ---- */

/* a * b into *out; false when it overflows int64 or either is negative. */
ATTN__SIBLING bool attn__mul_ok(int64_t a, int64_t b, int64_t *out);
/* numel of a shape; ATTN_ERR_SHAPE on a negative dim or ndim out of range, ATTN_ERR_NOMEM on
 * overflow. `what` names the tensor in the message. */
attn_status attn__shape_numel(int ndim, const int64_t *shape, int64_t *numel, const char *what);

/* Elements per task of the flat loops over whole tensors (binary and unary ops, Adam): blocks
 * of a fixed size for the threads, each a loop the compiler vectorises whole. */
#define ATTN_FLAT_BLOCK 16384

/* ---- arena: bump allocation in 64-byte aligned chunks, kept over resets ---- */

typedef struct attn_arena_chunk attn_arena_chunk;

typedef struct attn_arena {
    attn_arena_chunk *head; /* oldest chunk first */
    attn_arena_chunk *tail; /* newest chunk */
    attn_arena_chunk *cur;  /* the chunk allocations are taken from; those after it are empty */
    size_t used;            /* bytes handed out since the last reset */
    size_t peak;            /* most bytes ever handed out between resets */
    size_t capacity;        /* bytes in all chunks */
} attn_arena;

void *attn__arena_alloc(attn_arena *a, size_t bytes); /* NULL + error on failure */
/* Zero-filled, cleared over `threads` threads (the ctx's count) from 1 MiB on. */
void *attn__arena_calloc(attn_arena *a, size_t bytes, int threads);
/* memset(p, 0, bytes), spread over `threads` threads from 1 MiB on (gradients, activations) */
void attn__clear(void *p, size_t bytes, int threads);
/* n zeroed floats on the heap, 64-byte aligned (the vector loads of a row never straddle a cache
 * line where rows are whole vectors); free() frees them; NULL (no error set) when out of memory */
float *attn__calloc_floats(size_t n);
void attn__arena_reset(attn_arena *a);
void attn__arena_release(attn_arena *a);
/* true when p lies in what the arena handed out since its last reset */
bool attn__arena_owns(const attn_arena *a, const void *p);

/* ---- threads ---- */

/* ATTN_OK when n threads can run at once here; OpenMP's team of n is then started, so that no
 * later region of n or fewer threads makes libgomp end the process for want of a thread. Else
 * ATTN_ERR_NOMEM naming who. */
attn_status attn__threads_check(int n, const char *who);

/* ---- ctx ---- */

struct attn_ctx {
    attn_arena arena;
    attn_rng rng;
    bool grad_enabled;
    bool training;
    attn_node **tape; /* recorded ops in creation order (malloc'd, reused across steps) */
    size_t tape_len, tape_cap;
    bool tape_consumed;              /* a backward already ran over this tape */
    int num_threads;                 /* OpenMP threads of every op run in this ctx (1 without OpenMP) */
    attn_precision matmul_precision; /* of the ops' products (attn_ctx_set_matmul_precision) */
    uint32_t *bf16_words;            /* (bf16_cap) the bf16 copies of a MEDIUM GEMM's operands, reused */
    size_t bf16_cap;
};

/* ---- tensors ---- */

enum attn_storage {
    ATTN_STORAGE_ARENA = 0, /* struct, data and grad in the ctx arena */
    ATTN_STORAGE_HEAP = 1,  /* attn_tensor_alloc: struct, data and grad malloc'd */
    ATTN_STORAGE_PARAM = 2, /* owned by an attn_params registry */
    ATTN_STORAGE_VIEW = 3,  /* arena struct sharing another tensor's data (reshape) */
};

/* A tensor of x's shape in the arena (uninitialised data). */
attn_tensor *attn__empty_like(attn_ctx *ctx, const attn_tensor *x);
/* A tensor of ctx (its struct in the arena, ATTN_STORAGE_VIEW) over data it does not own. */
attn_tensor *attn__tensor_view(attn_ctx *ctx, int ndim, const int64_t *shape, float *data);
/* A module init that failed takes back the parameters it registered: attn__params_settle(p, n0,
 * st) with n0 = the count before it (attn_params_count) removes those past n0 when st is an
 * error, and returns st; the error message stays. */
attn_status attn__params_settle(attn_params *p, size_t n0, attn_status st);
/* true when t's gradient would live in another ctx than ctx: t was made in another ctx's arena
 * (or in ctx before its last reset), and is not a parameter or the caller's own tensor. */
bool attn__foreign(const attn_ctx *ctx, const attn_tensor *t);
/* The gradient buffer of t, zero-filled on first use; NULL (with error) if allocation fails. */
float *attn__grad(attn_ctx *ctx, attn_tensor *t);
/* "(2, 3)" (or "()" for ndim 0) of any shape into buf; returns buf. */
const char *attn__dims_str(char *buf, size_t len, int ndim, const int64_t *shape);
/* Normalises a possibly negative dim; -1 (with error naming `op`) when out of range. */
int attn__dim(int dim, int ndim, const char *op);
/* Product of shape[from..to) */
int64_t attn__prod(const int64_t *shape, int from, int to);
/* true when every element is finite. */
bool attn__all_finite(const float *x, int64_t n);
/* ATTN_ERR_NUMERIC for the non-finite `value` at flat index `flat` of a (shape) tensor:
 * "<label>: tensor "<name>" has NaN at index (0, 3); expected finite values" (label, name: NULL
 * leaves them out). ndim <= ATTN_ST_MAX_DIMS. */
attn_status attn__fail_nonfinite(const char *label, const char *name, float value, int ndim, const int64_t *shape,
                                 int64_t flat);

/* ---- output files (outfile.c): regular files replaced atomically, devices and FIFOs written in
 * place, symlink targets replaced, temporary names within NAME_MAX ---- */

typedef struct attn__outfile {
    FILE *fp;         /* write here between open and close */
    const char *path; /* as the caller gave it (messages) */
    char *target;     /* the file that receives the bytes: path, or the end of its symlinks */
    char *tmp;        /* renamed onto target at close; NULL when target is written directly */
    bool unnamed;     /* the temporary file is unnamed (O_TMPFILE) until close links it as tmp */
} attn__outfile;

/* Opens path for writing; on failure nothing is created and the message names path. */
ATTN__SIBLING attn_status attn__outfile_open(attn__outfile *o, const char *path);
/* s: the status of the writing. ATTN_OK: flush, sync and rename onto the target (the first
 * failure is returned); otherwise the temporary file is removed and s returned. */
ATTN__SIBLING attn_status attn__outfile_close(attn__outfile *o, attn_status s);
/* The status (ATTN_ERR_IO, the message naming the path) for a write that failed with err. */
ATTN__SIBLING attn_status attn__outfile_write_error(attn__outfile *o, int err);

/* ---- masks and lengths passed as arrays: checked against the shapes they apply to ---- */

/* valid_lens (NULL or no data: none) is (batch) or (batch, lq) with entries >= 0. op names the
 * caller in messages. */
attn_status attn__lens_check(const attn_lens *lens, int64_t batch, int64_t lq, const char *op);
/* m->key_padding (NULL: none) has key_padding_shape (batch, lk). */
attn_status attn__key_padding_check(const attn_mask *m, int64_t batch, int64_t lk, const char *op);
/* The offsets of sequences packed end to end (attn_sdpa_varlen's cu_seqlens; `name` in messages):
 * batch + 1 of them, 0 first, non-decreasing, `total` (the rows of `rows`) last. */
attn_status attn__cu_seqlens_check(const int64_t *cu, int64_t batch, int64_t total, const char *op, const char *name,
                                   const char *rows);
/* Each packed row's place in its sequence, (cu[batch]) in the arena, for checked offsets. */
int64_t *attn__cu_positions(attn_ctx *ctx, const int64_t *cu, int64_t batch);

#endif
