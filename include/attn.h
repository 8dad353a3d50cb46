/* attn.h - the header of libattn, the core: tensors, autograd, differentiable ops, modules,
 * models, optimizers and safetensors I/O for attention mechanisms and small Transformers, in C11.
 * It depends on libm, the GEMM library and OpenMP alone. Two libraries beside it have headers
 * of their own, each of which includes this one: attn_data.h (libattn_data: tokenizers,
 * vocabularies, loaders, batches, BLEU; zlib) and attn_plot.h (libattn_plot: heatmaps and line
 * plots; cairo, Pango). A program that uses them includes them too and links them (pkg-config
 * attn-data, attn-plot; find_package(attn COMPONENTS data plot): attn::data, attn::plot); one
 * that uses the core alone links none of their dependencies. What this header says of
 * conventions (names, errors, NULL, threads, ownership, output files) holds in all three.
 *
 * Naming (every public name follows it):
 *   - Functions are attn_<noun>_<verb> (attn_tensor_alloc, attn_mha_forward, attn_params_load);
 *     a differentiable op is attn_<op> (attn_matmul, attn_softmax); a module has attn_<module>_init
 *     and attn_<module>_forward, its struct attn_<module>_layer; setters are attn_<noun>_set_<what>
 *     and return attn_status; getters have no verb (attn_ctx_num_threads, attn_vocab_size).
 *   - Types are attn_<noun> (attn_tensor, attn_ctx); enum values and macros are ATTN_<ENUM>_<VALUE>
 *     (ATTN_SDPA_FUSED, ATTN_ERR_SHAPE). Struct fields ending in '_' are private.
 *   - Objects made by attn_<noun>_new or _alloc are released by the matching _free; objects the
 *     caller declares (attn_tokens, attn_id_seqs, ...) are zero-initialised and released by _free.
 *   - Parameters follow PyTorch's state_dict names; options mirror the PyTorch API they name.
 *
 * Versions and ABI: ATTN_VERSION_NUMBER (MAJOR * 10000 + MINOR * 100 + PATCH) is the header's
 * version, attn_version_number() the library's; a program can compare them at start. While the
 * major version is 0, every minor release may change the API and the ABI (a change is listed in
 * the commit that makes it), and patch releases change neither: the shared library's soname
 * carries MAJOR.MINOR (libattn.so.0.3), and find_package(attn 0.3) accepts only 0.3.x, so a
 * program built against 0.2 never loads 0.3 by mistake. From 1.0 on, the usual rule: the ABI
 * changes only with the major version.
 *
 * Conventions (read once, they hold everywhere):
 *   - Tensors are float32, row-major, up to 4 dimensions, in PyTorch's dimension order
 *     (the last dimension is contiguous; matmul(A, B) = A @ B; Linear weights are (out, in)).
 *   - Negative dims count from the end, as in PyTorch (-1 = last).
 *   - Every function that can fail returns NULL or an attn_status, and the reason is kept in
 *     attn_last_error() (per thread, until the next failure or attn_clear_error). The library
 *     never exits or aborts on bad input.
 *   - Arguments: a NULL where an object is needed (any pointer not documented as optional,
 *     "may be NULL" / "or NULL") is ATTN_ERR_ARG: functions returning attn_status return it,
 *     those returning a pointer return NULL, those returning a count, bool or number return 0,
 *     false, -1 or NaN; each records ATTN_ERR_ARG. *_free functions and attn_st_close accept
 *     NULL and do nothing. An op given a NULL tensor returns NULL and records ATTN_ERR_ARG unless
 *     a failure is recorded already: the NULL then is a failed op's result, whose message is
 *     kept, so a chain of ops can be checked at its end (attn_clear_error() first to tell the
 *     two apart). tests/test_api_null.c calls every function below with NULLs.
 *   - Activations live in an attn_ctx (an arena, reset after every step); parameters live in an
 *     attn_params registry with PyTorch state_dict names. Ownership is stated per function. An op
 *     records (for backward) only tensors of its own ctx, parameters and the caller's tensors
 *     (attn_tensor_alloc): a tensor of another ctx that requires grad, in an op whose ctx has grad
 *     on, is ATTN_ERR_ARG (its gradient would live in this ctx's arena), and so is attn_backward
 *     on an output made in another ctx; with grad off a ctx may read another's tensors (as the
 *     decoders read their encoder's outputs).
 *     Pointers a function hands out stay valid until the call named beside it ("valid until
 *     attn_ctx_reset"); the calls that invalidate memory say so (INVALIDATES).
 *   - Threads: the library has no mutable global state; the error message is per thread and
 *     each ctx and optimizer carries its own OpenMP thread count. So threads that each use their
 *     own objects (ctx, params, modules, optimizer, writer, ...) never interfere: two threads
 *     may train two models at once, each bit-identical to its run alone (tests/test_threads.c,
 *     also under ThreadSanitizer). What may be shared, read-only, by threads at once: an
 *     attn_st_file, an attn_vocab (lookups), const tensors, and a params registry with its
 *     modules while every thread only runs forwards with grad off in its own ctx (a backward
 *     writes .grad: training needs a registry per thread). Everything else is one thread's at
 *     a time: a ctx, an optimizer, an attn_rng, a writer, a counter, tokens and id_seqs. The
 *     libraries below have their own rules: OpenBLAS (one thread, called from both in the test)
 *     and, for the plot functions, cairo, Pango and fontconfig (not covered by the test).
 */
#ifndef ATTN_H
#define ATTN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define ATTN_API
#else
#define ATTN_API __attribute__((visibility("default")))
#endif
#if defined(__GNUC__)
#define ATTN_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define ATTN_PRINTF(fmt, args)
#endif

#define ATTN_VERSION_MAJOR 0
#define ATTN_VERSION_MINOR 3
#define ATTN_VERSION_PATCH 0
#define ATTN_VERSION_NUMBER (ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 + ATTN_VERSION_PATCH) /* 300 */
ATTN_API const char *attn_version(void); /* the library's version, "0.3.0" */
ATTN_API int attn_version_number(void);  /* the library's ATTN_VERSION_NUMBER, 300 */

/* ======================================================================================
 * Errors
 * ====================================================================================== */

typedef enum attn_status {
    ATTN_OK = 0,
    ATTN_ERR_ARG,     /* invalid argument: NULL where a value is needed, option out of range */
    ATTN_ERR_SHAPE,   /* shapes that do not fit together (the message names both) */
    ATTN_ERR_NOMEM,   /* allocation failed or a size overflowed */
    ATTN_ERR_IO,      /* open/read/write/rename failed (the message names the path) */
    ATTN_ERR_FORMAT,  /* a malformed file (the message names what was expected) */
    ATTN_ERR_NUMERIC, /* NaN or Inf where a finite number is required */
    ATTN_ERR_STATE,   /* call out of order, e.g. backward twice on one graph */
} attn_status;

ATTN_API const char *attn_last_error(void);  /* message of the last failure in this thread;
                                                 the string changes with the next failure */
ATTN_API attn_status attn_last_status(void); /* its status; ATTN_OK after attn_clear_error */
ATTN_API void attn_clear_error(void);
ATTN_API const char *attn_status_name(attn_status s); /* "shape error", ... */
/* Records a failure (status and printf-style message) for attn_last_error() in this thread, as
 * the library's own functions do, so that code built on libattn reports through one channel;
 * returns status. */
ATTN_API attn_status attn_set_error(attn_status status, const char *fmt, ...) ATTN_PRINTF(2, 3);

/* ======================================================================================
 * Output files. Every file the library writes (safetensors, vocabularies, pictures) appears
 * complete or not at all: a regular file (or a new one) is written to a temporary file in the
 * same folder, synced and renamed onto it, keeping its permissions. The temporary file has no
 * name while it is written (O_TMPFILE) where the file system allows, and is named only to be
 * renamed; elsewhere it is "<name>.tmp.<pid>.<16 random hex digits>" (the name cut to fit
 * NAME_MAX), created O_EXCL. A symlink's final target is replaced, never the link; a device or FIFO (also
 * through links such as /proc/<pid>/fd/N) is opened and written in place, never replaced, and a
 * FIFO that no reader opens within 2 s fails (ATTN_ERR_IO) rather than blocks; a folder or
 * socket is refused. One of the process's own descriptors named as such ("/dev/stdout",
 * "/dev/stderr", "/dev/fd/N", "/proc/self/fd/N") is written through that descriptor at its
 * offset, as a shell redirection would: a log opened with >> gets the bytes appended. A named
 * temporary file a killed writer left is removed the next time the same output is written: a
 * regular file of this user of exactly that form whose process no longer runs; no other file is
 * ever removed.
 * ====================================================================================== */

/* ATTN_OK when path could be written now (its folder exists and is writable, it is not a
 * folder, its name fits), without creating anything: for checking outputs before a long run. */
ATTN_API attn_status attn_output_check(const char *path);

/* ======================================================================================
 * Threads: each ctx has its own thread count for the OpenMP loops of the ops run in it (see
 * attn_ctx_set_num_threads); the optimizer has its own (attn_optim_set_num_threads). There is
 * no process-wide setting. A count is proven before it is taken (attn_ctx_new, and the setters):
 * its threads are started at once, so that OpenMP (libgomp, which ends the process when it cannot
 * start a thread) is never asked for more than can run; a count that cannot start is
 * ATTN_ERR_NOMEM, the old count kept. The GEMM library runs on the calling thread alone (oneDNN: for each
 * call; OpenBLAS: set to one thread once, on first use, which a program that also calls OpenBLAS
 * shares): our loops split large products over the ctx's threads themselves.
 * ====================================================================================== */

#define ATTN_MAX_THREADS 1024

/* The count a new ctx or optimizer starts with: OpenMP's omp_get_max_threads() in the calling
 * thread (OMP_NUM_THREADS, or the cores), 1 in a build without OpenMP. */
ATTN_API int attn_default_num_threads(void);
/* The GEMM library this build calls (CMake ATTN_GEMM), e.g. "oneDNN 2.6.3 dnnl_sgemm" or
 * "OpenBLAS cblas_sgemm (Haswell kernels)". A static string. */
ATTN_API const char *attn_gemm_backend(void);

/* ======================================================================================
 * CPU kernels chosen at run time. The library's own kernels (the fused attention and its tile
 * GEMM, softmax, layer norm, cross-entropy, dropout masks, sums) are built for each level below
 * of the architecture the library is built for (x86-64 and aarch64), and the best one that the
 * CPU and the operating system support (x86: cpuid and XCR0; Linux on aarch64: the auxiliary
 * vector's HWCAP) is chosen once, thread-safely, at the first kernel call. ATTN_CPU_ISA=<name> in
 * the environment caps the choice, as does attn_cpu_isa_set_max before that first call; a cap
 * above what the CPU has changes nothing, and an unknown value, or another architecture's level,
 * is ignored (the attn program refuses it). The levels of one architecture are ordered as below,
 * and the one chosen is the highest the CPU supports at or under the cap (on aarch64 a CPU can
 * have neon_bf16 without sve, or sve without neon_bf16); a level of another architecture is never
 * supported. Results at two levels can differ in their
 * last bits (lanes sum in other orders, FMAs round once); one level gives the same bits run after
 * run. The GEMM library chooses its own kernels (oneDNN: ONEDNN_MAX_CPU_ISA). A build with
 * ATTN_NATIVE (-march=native), or for any other architecture, has one level: the one its compiler
 * flags give.
 * ====================================================================================== */

typedef enum attn_isa {
    ATTN_ISA_BASELINE,    /* every architecture: the portable C of the kernels, 4-lane vectors (x86:
                           * x86-64-v2, SSE4.2) */
    ATTN_ISA_AVX2,        /* x86-64-v3: AVX2 + FMA, 8 lanes */
    ATTN_ISA_AVX512,      /* x86-64-v4: AVX-512 F, BW, CD, DQ and VL, 16 lanes */
    ATTN_ISA_AVX512_BF16, /* x86-64-v4 and AVX512_BF16 */
    ATTN_ISA_NEON,        /* aarch64 (ARMv8.0-A): AdvSIMD kernels, 4 lanes */
    ATTN_ISA_SVE,         /* aarch64 with SVE: the neon level's kernels, and the tile products in
                           * vector-length-agnostic SVE */
    ATTN_ISA_NEON_BF16,   /* aarch64 with BF16 (ARMv8.6-A's FEAT_BF16, HWCAP2_BF16): the neon level's
                           * kernels, and MEDIUM's attention products through BFDOT (with or
                           * without SVE) */
} attn_isa;
#define ATTN_ISA_COUNT 7

/* The level the kernels run at (chosen on the first call of this or of any kernel). */
ATTN_API attn_isa attn_cpu_isa(void);
/* true when this build has the level's kernels and this CPU and OS can run them (a cap does not
 * change it). */
ATTN_API bool attn_cpu_isa_supported(attn_isa level);
/* true when the level is one of this build's architecture (baseline is every architecture's),
 * whether or not this CPU has it. */
ATTN_API bool attn_isa_this_arch(attn_isa level);
/* Caps the level before the first kernel call: ATTN_ERR_STATE once the level is chosen (even when
 * it equals max), ATTN_ERR_ARG for a value outside attn_isa or a level of another architecture.
 * Overrides ATTN_CPU_ISA. */
ATTN_API attn_status attn_cpu_isa_set_max(attn_isa max);
/* "baseline", "avx2", "avx512", "avx512_bf16", "neon", "sve", "neon_bf16" (a static string; "?"
 * outside attn_isa). */
ATTN_API const char *attn_isa_name(attn_isa level);
/* The level a name gives (the names of attn_isa_name, any case, of any architecture);
 * ATTN_ERR_ARG for another name, *level unchanged. */
ATTN_API attn_status attn_isa_from_name(const char *name, attn_isa *level);

/* ======================================================================================
 * Random numbers: explicit state, never global. PCG32 (O'Neill), 64-bit state.
 * ====================================================================================== */

typedef struct attn_rng {
    uint64_t state;
    uint64_t inc;
    int has_spare; /* Box-Muller makes normals in pairs */
    float spare;
} attn_rng;

ATTN_API attn_status attn_rng_seed(attn_rng *rng, uint64_t seed);
ATTN_API uint32_t attn_rng_u32(attn_rng *rng);
ATTN_API uint32_t attn_rng_below(attn_rng *rng, uint32_t n);                     /* uniform in [0, n), unbiased */
ATTN_API float attn_rng_uniform(attn_rng *rng);                                  /* uniform in [0, 1) */
ATTN_API float attn_rng_normal(attn_rng *rng);                                   /* N(0, 1) */
ATTN_API bool attn_rng_bernoulli(attn_rng *rng, float p);                        /* true with probability p */
ATTN_API attn_status attn_rng_shuffle(attn_rng *rng, int64_t *items, int64_t n); /* Fisher-Yates */

/* ======================================================================================
 * Tensors
 * ====================================================================================== */

#define ATTN_MAX_DIMS 4

typedef struct attn_node attn_node; /* a recorded op on the tape (private) */

typedef struct attn_tensor {
    float *data;                  /* (shape...) row-major, numel floats */
    float *grad;                  /* same shape; NULL until a backward reaches it */
    int64_t shape[ATTN_MAX_DIMS]; /* shape[0..ndim-1]; unused entries are 1 */
    int ndim;                     /* 0 (a scalar) to ATTN_MAX_DIMS */
    int64_t numel;
    bool requires_grad; /* a leaf to differentiate, or the output of such an op */
    attn_node *node;    /* the op that produced it; NULL for leaves */
    uint8_t storage;    /* private: where data and grad were allocated */
} attn_tensor;

typedef struct attn_ctx attn_ctx;

/* A tensor in the ctx arena: valid until attn_ctx_reset/attn_ctx_free; do not free it. */
ATTN_API attn_tensor *attn_tensor_empty(attn_ctx *ctx, int ndim, const int64_t *shape);
ATTN_API attn_tensor *attn_tensor_zeros(attn_ctx *ctx, int ndim, const int64_t *shape);
ATTN_API attn_tensor *attn_tensor_from(attn_ctx *ctx, int ndim, const int64_t *shape,
                                       const float *data); /* copies data */
/* A heap tensor owned by the caller: free with attn_tensor_free (also frees its grad). */
ATTN_API attn_tensor *attn_tensor_alloc(int ndim, const int64_t *shape); /* zero-filled */
ATTN_API void attn_tensor_free(attn_tensor *t);

ATTN_API attn_status attn_tensor_set_requires_grad(attn_tensor *t, bool on);
ATTN_API void attn_tensor_zero_grad(attn_tensor *t);
/* N(mean, std^2) and U[lo, hi) draws; ATTN_ERR_ARG (t unchanged) for a non-finite argument, a
 * negative std or lo > hi, as torch's normal_ and uniform_ refuse them. */
ATTN_API attn_status attn_tensor_fill_normal(attn_tensor *t, attn_rng *rng, float mean, float std);
ATTN_API attn_status attn_tensor_fill_uniform(attn_tensor *t, attn_rng *rng, float lo, float hi);
/* ATTN_OK when every element is finite; else ATTN_ERR_NUMERIC, and attn_last_error() names the
 * tensor (`name`, may be NULL) and its first NaN or Inf element: tensor "q" has NaN at index
 * (0, 0, 1, 0); expected finite values. */
ATTN_API attn_status attn_tensor_check_finite(const attn_tensor *t, const char *name);
/* "(2, 10, 64)" into buf; returns buf. */
ATTN_API const char *attn_shape_str(const attn_tensor *t, char *buf, size_t len);
ATTN_API bool attn_same_shape(const attn_tensor *a, const attn_tensor *b);

/* ======================================================================================
 * Context: arena for activations, the autograd tape, training/no-grad modes, dropout RNG.
 * ====================================================================================== */

/* NULL on allocation failure, or when the default thread count cannot start here */
ATTN_API attn_ctx *attn_ctx_new(uint64_t seed);
ATTN_API void attn_ctx_free(attn_ctx *ctx);
/* Drops every activation and the tape, keeps the memory for the next step (no page faults).
 * INVALIDATES every tensor made in ctx (and their ->grad) and every *weights it handed out. */
ATTN_API void attn_ctx_reset(attn_ctx *ctx);
ATTN_API attn_status attn_ctx_set_grad_enabled(attn_ctx *ctx, bool on); /* off: inference, no tape */
ATTN_API bool attn_ctx_grad_enabled(const attn_ctx *ctx);
ATTN_API attn_status attn_ctx_set_training(attn_ctx *ctx, bool on); /* dropout active when on */
ATTN_API bool attn_ctx_training(const attn_ctx *ctx);
ATTN_API attn_rng *attn_ctx_rng(attn_ctx *ctx);           /* used by dropout */
ATTN_API size_t attn_ctx_bytes_used(const attn_ctx *ctx); /* arena bytes in use now */
ATTN_API size_t attn_ctx_bytes_peak(const attn_ctx *ctx); /* most ever in use */
/* Threads for the ops run in ctx from now on (n in [1, ATTN_MAX_THREADS]; n <= 0: the
 * default, attn_default_num_threads()). A build without OpenMP runs serially whatever n is.
 * Same seed + same thread count = bit-identical results. */
ATTN_API attn_status attn_ctx_set_num_threads(attn_ctx *ctx, int n);
ATTN_API int attn_ctx_num_threads(const attn_ctx *ctx); /* 0 for a NULL ctx */

/* The precision of the float32 matrix products of the ops run in ctx from now on, as PyTorch's
 * torch.set_float32_matmul_precision (a setting of the run, never stored with a model):
 *   HIGHEST: float32 products and sums (the default).
 *   HIGH:    as HIGHEST (PyTorch's HIGH is TF32 or three bf16 passes where the hardware makes
 *            them faster than float32; on these CPUs neither is).
 *   MEDIUM:  where the kernels run at a level with bf16 dot products, avx512_bf16 or neon_bf16
 *            (attn_bf16_products), the products of attn_linear, attn_matmul, attn_conv1d (through
 *            the GEMM library's bf16 matmul: oneDNN's; OpenBLAS has none, and they stay float32)
 *            and, where the CPU's bf16 dot products outrun its float32 FMAs (attn_bf16_attention),
 *            the fused attention (S = Q K^T, O = P V and their backward products) take their
 *            operands rounded to bf16 (round to nearest even, unit roundoff u = 2^-8) and sum in
 *            float32 (at neon_bf16 as BFDOT sums: each rounded to odd, whose error is within the
 *            bound below too); softmax statistics, masks, dropout, layer
 *            norm, losses, reductions and the optimizer stay float32. Elsewhere MEDIUM runs as
 *            HIGHEST, as PyTorch does. Error: an element sum_k a_k b_k of a product is within
 *            (2u + 2^-23 + K 2^-24) sum_k |a_k b_k| of the float32 one (2u from rounding a and b,
 *            K 2^-24 from float32 sums of K terms); in attention each score carries that error times
 *            the scale, P's relative error is at most about twice the largest score error of its
 *            row, and O = P V adds 2u more (P is rounded too). Masked rows, NaN, inf and large
 *            scores behave as at HIGHEST (bf16 has float32's exponent range). The attention kernel
 *            that returns weights (attn_sdpa with weights, ATTN_SDPA_REF) and the seq2seq decoders
 *            (their own ctxs) stay float32; products of fewer than 16^3 multiply-adds too. */
typedef enum attn_precision {
    ATTN_PRECISION_HIGHEST,
    ATTN_PRECISION_HIGH,
    ATTN_PRECISION_MEDIUM,
} attn_precision;
ATTN_API attn_status attn_ctx_set_matmul_precision(attn_ctx *ctx, attn_precision precision);
ATTN_API attn_precision attn_ctx_matmul_precision(const attn_ctx *ctx); /* HIGHEST for a NULL ctx */
/* true when MEDIUM takes bf16 operands here: the kernels run at the avx512_bf16 or neon_bf16 level. */
ATTN_API bool attn_bf16_products(void);
/* true when MEDIUM also gives the fused attention's tile products bf16 operands: attn_bf16_products
 * on a CPU whose VDPBF16PS does more multiply-adds per cycle than float32 FMAs (AMD's Zen 4 and
 * Zen 5: twice as many), or one with AMX tiles the OS lets this process use (Intel's Xeons since
 * Sapphire Rapids; their VDPBF16PS runs at half their AVX-512 FMA rate, their TDPBF16PS at over
 * ten times it), or at neon_bf16 (BFDOT does two multiply-adds per lane where FMLA does one; not
 * timed on ARM hardware). AMX sums a product's pairs in its own order (attn_bf16_amx), BFDOT
 * rounds its sums to odd: other bits than VDPBF16PS's, within the same bound. Elsewhere the
 * attention stays float32. */
ATTN_API bool attn_bf16_attention(void);
/* true when attn_bf16_attention's products run on AMX tiles (TDPBF16PS) */
ATTN_API bool attn_bf16_amx(void);
/* "highest", "high", "medium"; "?" outside attn_precision */
ATTN_API const char *attn_precision_name(attn_precision precision);
/* The precision a name gives (any case); ATTN_ERR_ARG for another name, *precision unchanged. */
ATTN_API attn_status attn_precision_from_name(const char *name, attn_precision *precision);

/* ======================================================================================
 * Autograd
 * ====================================================================================== */

/* Reverse-mode sweep from a one-element loss (its gradient seeded with 1). Gradients of every
 * tensor with requires_grad accumulate into ->grad. One backward per recorded graph. */
ATTN_API attn_status attn_backward(attn_ctx *ctx, attn_tensor *loss);
/* The same, seeded with dout (out->numel floats) instead of 1: a vector-Jacobian product. dout is
 * read where it is, never written or copied (an op's output of gigabytes costs no second copy):
 * during the sweep out->grad is dout, and afterwards NULL again. (An out that is a leaf, or that
 * already holds a gradient, gets dout added into its ->grad, as attn_backward seeds a loss.) */
ATTN_API attn_status attn_backward_from(attn_ctx *ctx, attn_tensor *out, const float *dout);

/* ---- Parameter registry: named leaves in PyTorch state_dict order and names ---- */

typedef struct attn_params attn_params;

ATTN_API attn_params *attn_params_new(void);
ATTN_API void attn_params_free(attn_params *p); /* frees every parameter tensor too */
/* A zero-filled parameter with requires_grad; owned by the registry. Duplicate names fail. */
ATTN_API attn_tensor *attn_params_add(attn_params *p, const char *name, int ndim, const int64_t *shape);
/* The most elements the registry's parameters may hold together (0, the start: no limit beyond
 * memory): an attn_params_add past it fails with ATTN_ERR_FORMAT before allocating. For a model
 * whose sizes come from a file's metadata, the elements of the file's tensors bound it, so an
 * edited header cannot make the model allocate more than the file holds. */
ATTN_API attn_status attn_params_set_max_numel(attn_params *p, int64_t max_numel);
ATTN_API attn_tensor *attn_params_get(const attn_params *p, const char *name); /* NULL if none */
ATTN_API size_t attn_params_count(const attn_params *p);
ATTN_API attn_tensor *attn_params_at(const attn_params *p, size_t i);
ATTN_API const char *attn_params_name(const attn_params *p, size_t i); /* valid until _free */
ATTN_API int64_t attn_params_numel(const attn_params *p);              /* all parameters together */
/* Moves every parameter's data into one block and every grad into another (done by
 * attn_optim_new; no parameter can be added afterwards). The attn_tensor pointers stay valid,
 * with the same values, but INVALIDATES their old ->data and ->grad: re-read t->data after
 * pack (or attn_optim_new) rather than keeping a float pointer from before. */
ATTN_API attn_status attn_params_pack(attn_params *p);
ATTN_API float *attn_params_grad_block(attn_params *p); /* after pack: numel floats */
ATTN_API float *attn_params_data_block(attn_params *p); /* after pack: numel floats */
/* Zeroes every gradient (after pack: one block, cleared over attn_default_num_threads() threads). */
ATTN_API void attn_params_zero_grad(attn_params *p);

/* ======================================================================================
 * Differentiable ops. Each returns a tensor in ctx's arena, or NULL with attn_last_error().
 * ====================================================================================== */

/* C = op(A) @ op(B), op = transpose of the last two dims when asked. A (..., M, K),
 * B (..., K, N) or (K, N): batch dims must be equal, or B has none (shared). */
ATTN_API attn_tensor *attn_matmul(attn_ctx *ctx, attn_tensor *a, attn_tensor *b, bool trans_a, bool trans_b);
/* Elementwise with NumPy/PyTorch broadcasting. */
ATTN_API attn_tensor *attn_add(attn_ctx *ctx, attn_tensor *a, attn_tensor *b);
ATTN_API attn_tensor *attn_sub(attn_ctx *ctx, attn_tensor *a, attn_tensor *b);
ATTN_API attn_tensor *attn_mul(attn_ctx *ctx, attn_tensor *a, attn_tensor *b);
ATTN_API attn_tensor *attn_div(attn_ctx *ctx, attn_tensor *a, attn_tensor *b);
ATTN_API attn_tensor *attn_scale(attn_ctx *ctx, attn_tensor *x, float s); /* s * x */
ATTN_API attn_tensor *attn_bias_add(attn_ctx *ctx, attn_tensor *x, attn_tensor *bias);
/* x (..., C) + bias (C) */
ATTN_API attn_tensor *attn_relu(attn_ctx *ctx, attn_tensor *x); /* max(x, 0); NaN stays NaN */
ATTN_API attn_tensor *attn_gelu(attn_ctx *ctx, attn_tensor *x); /* x * Phi(x), exact erf */
/* GPT-2's GELU, torch's F.gelu(x, approximate='tanh'): x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2 */
ATTN_API attn_tensor *attn_gelu_tanh(attn_ctx *ctx, attn_tensor *x);
ATTN_API attn_tensor *attn_silu(attn_ctx *ctx, attn_tensor *x); /* x * sigmoid(x), torch's F.silu */
ATTN_API attn_tensor *attn_tanh(attn_ctx *ctx, attn_tensor *x);
ATTN_API attn_tensor *attn_sigmoid(attn_ctx *ctx, attn_tensor *x); /* 1 / (1 + exp(-x)) */
ATTN_API attn_tensor *attn_exp(attn_ctx *ctx, attn_tensor *x);
/* softmax(x)_i = exp(x_i - max) / sum_j exp(x_j - max) along dim; an all -inf slice gives 0,
 * and -inf from log_softmax, both with gradient 0 (torch gives NaN for both: a fully masked
 * row). */
ATTN_API attn_tensor *attn_softmax(attn_ctx *ctx, attn_tensor *x, int dim);
ATTN_API attn_tensor *attn_log_softmax(attn_ctx *ctx, attn_tensor *x, int dim);
/* (x - mean) / sqrt(var + eps) * weight + bias over the last dim; weight/bias may be NULL. */
ATTN_API attn_tensor *attn_layer_norm(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, attn_tensor *bias, float eps);
/* RMSNorm (Llama's): x / sqrt(mean(x^2) + eps) * weight over the last dim; weight may be NULL. */
ATTN_API attn_tensor *attn_rms_norm(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, float eps);
/* Training: x times 0 with probability p, else times 1/(1-p) (ctx RNG), a product as in torch
 * (a dropped NaN or inf is NaN). Eval: identity. */
ATTN_API attn_tensor *attn_dropout(attn_ctx *ctx, attn_tensor *x, float p);
/* weight (V, E) rows gathered by ids (ndim dims); out (ids shape..., E). padding_idx < 0:
 * none; otherwise that row gets no gradient. An id outside [0, V) is an error. */
ATTN_API attn_tensor *attn_embedding(attn_ctx *ctx, attn_tensor *weight, const int64_t *ids, int ndim,
                                     const int64_t *shape, int64_t padding_idx);
/* x (..., in) @ weight (out, in)^T + bias (out); bias may be NULL. */
ATTN_API attn_tensor *attn_linear(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, attn_tensor *bias);
/* x (B, Cin, L), weight (Cout, Cin, K), bias (Cout) or NULL, stride 1, zero padding on both
 * sides; out (B, Cout, L + 2*padding - K + 1). */
ATTN_API attn_tensor *attn_conv1d(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, attn_tensor *bias,
                                  int64_t padding);
ATTN_API attn_tensor *attn_sum(attn_ctx *ctx, attn_tensor *x, int dim, bool keepdim);
ATTN_API attn_tensor *attn_mean(attn_ctx *ctx, attn_tensor *x, int dim, bool keepdim);
ATTN_API attn_tensor *attn_sum_all(attn_ctx *ctx, attn_tensor *x);  /* scalar (ndim 0) */
ATTN_API attn_tensor *attn_mean_all(attn_ctx *ctx, attn_tensor *x); /* scalar (ndim 0) */
/* Same data in a new shape; one entry may be -1 (inferred). No copy. */
ATTN_API attn_tensor *attn_reshape(attn_ctx *ctx, attn_tensor *x, int ndim, const int64_t *shape);
ATTN_API attn_tensor *attn_transpose(attn_ctx *ctx, attn_tensor *x, int dim0, int dim1);
/* out.shape[i] = x.shape[perm[i]] (a copy, contiguous). */
ATTN_API attn_tensor *attn_permute(attn_ctx *ctx, attn_tensor *x, const int *perm);
ATTN_API attn_tensor *attn_concat(attn_ctx *ctx, attn_tensor *const *xs, int n, int dim);
/* Splits x along dim into n parts of the given sizes (summing to x.shape[dim]) into outs. */
ATTN_API attn_status attn_split(attn_ctx *ctx, attn_tensor *x, int dim, const int64_t *sizes, int n,
                                attn_tensor **outs);
/* x.narrow(dim, start, length): a slice along one dim (a view without copy when dim is the
 * outermost). */
ATTN_API attn_tensor *attn_narrow(attn_ctx *ctx, attn_tensor *x, int dim, int64_t start, int64_t length);
/* Head split/merge: (B, L, H*D) <-> (B, H, L, D). */
ATTN_API attn_tensor *attn_split_heads(attn_ctx *ctx, attn_tensor *x, int64_t num_heads);
ATTN_API attn_tensor *attn_merge_heads(attn_ctx *ctx, attn_tensor *x);
/* Mean over non-ignored rows of -log softmax(logits)[target], with label smoothing as
 * torch.nn.functional.cross_entropy: logits (N, C), target (N) class indices. With no row
 * left (all ignored, or N = 0) the loss is NaN and its gradient 0, as torch's. */
ATTN_API attn_tensor *attn_cross_entropy(attn_ctx *ctx, attn_tensor *logits, const int64_t *target,
                                         int64_t ignore_index, float label_smoothing);
ATTN_API attn_tensor *attn_mse_loss(attn_ctx *ctx, attn_tensor *pred, attn_tensor *target);
/* mean((pred - target)^2) */

/* ======================================================================================
 * Attention
 * ====================================================================================== */

/* D2L's valid_lens: keys j >= len are masked. data NULL: none. shape (B) (ndim 1: one length per
 * batch row) or (B, Lq) (ndim 2: one per query); every entry >= 0 (larger than Lk: no mask). A
 * length of 0 masks every key: the row gets 0, as any fully masked row (D2L's masked_softmax,
 * filling -1e6, gives it uniform weights 1/Lk). */
typedef struct attn_lens {
    const int64_t *data;
    int ndim;
    int64_t shape[2];
} attn_lens;

/* Masks; every field is optional and says its polarity in its name. They combine: a key is
 * visible when no mask hides it. Every array comes with its shape, which is checked against
 * (B, H, Lq, Lk) before anything is read (ATTN_ERR_SHAPE naming both); arrays are copied, so they
 * need not outlive the call. A query row whose keys are all masked gets output 0, weights 0 and
 * gradient 0 (PyTorch 1.13 gives NaN there; PyTorch >= 2.5 SDPA gives 0).
 *
 * Which field takes which PyTorch mask:
 *   F.scaled_dot_product_attention(attn_mask=bool)       -> attend   (True = may attend)
 *   nn.MultiheadAttention / nn.Transformer* attn_mask,
 *     src_mask, tgt_mask, memory_mask (bool)              -> blocked  (True = not allowed)
 *   any of them as a float mask                           -> additive (added to the scores)
 *   key_padding_mask, *_key_padding_mask (bool)           -> key_padding (True = padding)
 *   is_causal=True                                        -> causal
 * The bool arrays hold one byte per element, nonzero = true. The attend, blocked and additive
 * shapes have 1 to 4 dims, right-aligned against (B, H, Lq, Lk) as PyTorch broadcasts: each
 * dim 1 or equal to the one it meets. With 3-D q, k, v (one head) they have 1 to 3 dims and
 * meet (B, Lq, Lk), the shape of q @ k^T, as F.scaled_dot_product_attention broadcasts them
 * there. */
typedef struct attn_mask {
    bool causal;           /* top-left aligned: query i sees keys j <= i (Lq != Lk allowed) */
    const uint8_t *attend; /* 1 = may attend (F.scaled_dot_product_attention's polarity) */
    int attend_ndim;
    int64_t attend_shape[4];
    const uint8_t *blocked; /* 1 = masked (nn.MultiheadAttention's bool attn_mask polarity) */
    int blocked_ndim;
    int64_t blocked_shape[4];
    const float *additive; /* added to the scaled scores (0 keeps, -inf blocks); no NaN, +inf */
    int additive_ndim;
    int64_t additive_shape[4];
    attn_lens valid_lens;         /* D2L valid_lens (B) or (B, Lq) */
    const uint8_t *key_padding;   /* 1 = padding (PyTorch's key_padding_mask polarity) */
    int64_t key_padding_shape[2]; /* must be (B, Lk) */
} attn_mask;

typedef enum attn_sdpa_impl {
    ATTN_SDPA_AUTO,  /* fused unless weights are requested */
    ATTN_SDPA_FUSED, /* tiled, online softmax, O(L d) memory; backward recomputes from lse */
    ATTN_SDPA_REF,   /* materialises (B, H, Lq, Lk) weights; the reference twin */
} attn_sdpa_impl;

/* FlashAttention's local window (window_size = (left, right)), aligned to the bottom right as
 * FlashAttention's causal mask is: query i sees keys j with
 *   i + Lk - Lq - left <= j <= i + Lk - Lq + right,
 * a bound of -1 leaving that side open. A window of W keys ending at the diagonal (Mistral's) is
 * (W - 1, 0); (-1, 0) is FlashAttention's causal. It combines with the masks above (mask.causal
 * stays top-left, as PyTorch's is_causal; when Lq = Lk the two alignments agree). */
typedef struct attn_window {
    bool on;             /* false (the zero value): no window */
    int64_t left, right; /* keys before / after the aligned diagonal; -1: unbounded */
} attn_window;

/* FlexAttention's score_mod and mask_mod (torch.nn.attention.flex_attention) as C callbacks, for
 * attn_score_features.mods. Indices: b the batch row, h the query head (under GQA too; 0 for 3-D
 * inputs), q in [0, Lq) and kv in [0, Lk) the positions; user is mods.user.
 *   score_mod(score, b, h, q, kv, user): the new score of a pair from its scaled score
 *     s = scale q . k (what FlexAttention's score_mod sees). With it, score_mod_grad(score, ...)
 *     returns d score_mod / d score at the same arguments, for the backward; attn_sdpa refuses a
 *     score_mod without it when q, k or v needs a gradient (ATTN_ERR_ARG), and a score_mod_grad
 *     without score_mod.
 *   mask_mod(b, h, q, kv, user): true = the pair is kept (FlexAttention's polarity; false hides it
 *     as a masked key).
 *   mask_block(b, h, q_begin, q_end, kv_begin, kv_end, user): optional, what holds for every pair of
 *     the block [q_begin, q_end) x [kv_begin, kv_end): ATTN_BLOCK_EMPTY (all hidden: the fused
 *     kernel skips the block), ATTN_BLOCK_FULL (all kept: mask_mod is not called there) or
 *     ATTN_BLOCK_PARTIAL (mask_mod decides; any other value counts as PARTIAL). Blocks are the
 *     fused kernel's tiles, ATTN_MASK_BLOCK_Q queries by ATTN_MASK_BLOCK_KV keys from (0, 0), cut at
 *     Lq and Lk; the reference kernel consults it the same way, so the answer is part of the mask
 *     (alone, without mask_mod, it is a block-sparse mask). One that agrees with mask_mod changes
 *     nothing but the time: without it mask_mod is called on every pair of every block that the
 *     other masks leave visible, so a sparse mask_mod costs O(Lq Lk) calls.
 * Order: s = scale q . k -> score_mod -> softcap -> ALiBi and the additive mask -> every mask
 * (mask_mod, mask_block and the others) -> softmax. So softcap, ALiBi, causal and the window, each
 * expressed through the callbacks and used alone, give what the built-in forms give (with both,
 * the built-in softcap caps score_mod's value).
 * Contract: pure functions of their arguments (user only read), called from several threads at
 * once, in no particular order, any number of times per pair (the backward calls them again);
 * score_mod and score_mod_grad are called for every kept pair (and maybe for pairs that the
 * attend, blocked, key_padding or additive masks hide), mask_mod for pairs that causal,
 * valid_lens and the window leave visible. A NaN from score_mod gives its query row NaN, as a NaN
 * in q does; -inf hides the pair (softcap keeps it -inf; its gradient is then 0). The functions and what user points to
 * must stay valid until the backward of the call has run (the tape keeps the pointers).
 * Cost: a call per kept pair (two in the backward) where the built-in forms run in vectors, so
 * prefer those where they exist: ALiBi through score_mod took ~2x the built-in time, a window of
 * 256 through mask_mod and mask_block ~2x, causal ~1.2x, softcap with libm's tanhf ~8x (L 1024
 * and 2048, bench/compare_mods.sh). attn op sdpa cannot take them (C functions do not come from
 * a file). */
typedef float (*attn_score_mod_fn)(float score, int64_t b, int64_t h, int64_t q, int64_t kv, void *user);
typedef bool (*attn_mask_mod_fn)(int64_t b, int64_t h, int64_t q, int64_t kv, void *user);
typedef enum attn_block_kind {
    ATTN_BLOCK_PARTIAL, /* mask_mod decides each pair (kept when there is no mask_mod) */
    ATTN_BLOCK_EMPTY,   /* every pair hidden */
    ATTN_BLOCK_FULL,    /* every pair kept (by these callbacks; other masks still apply) */
} attn_block_kind;
typedef int (*attn_mask_block_fn)(int64_t b, int64_t h, int64_t q_begin, int64_t q_end, int64_t kv_begin,
                                  int64_t kv_end, void *user);
enum {
    ATTN_MASK_BLOCK_Q = 64,
    ATTN_MASK_BLOCK_KV = 128
};
typedef struct attn_score_mods {
    attn_score_mod_fn score_mod;      /* NULL: none */
    attn_score_mod_fn score_mod_grad; /* d score_mod / d score; needed with score_mod for gradients */
    attn_mask_mod_fn mask_mod;        /* NULL: every pair kept */
    attn_mask_block_fn mask_block;    /* NULL: every block PARTIAL */
    void *user;
} attn_score_mods;

/* What changes the scores before the softmax beyond the masks of attn_mask: the built-in score
 * modifiers and the callbacks, one struct that attn_sdpa, attn_sdpa_varlen and the multi-head
 * layers take alike (attn_sdpa_opts.features, attn_varlen_opts.features, attn_mha_opts.features).
 * The zero value: none. Order on each scaled score: mods.score_mod, softcap, ALiBi, the masks. */
typedef struct attn_score_features {
    attn_window window; /* FlashAttention's local window (above); on false: none */
    /* ALiBi slopes, (H) (alibi_ndim 1: every batch or sequence) or (B, H) (2): the bias
     * -slope |i + Lk - Lq - j| is added to each scaled (capped) score, FlashAttention's
     * alibi_slopes; positive slopes (attn_alibi_slopes: the paper's). Finite values; NULL: none.
     * Copied. */
    const float *alibi_slopes;
    int alibi_ndim;
    int64_t alibi_shape[2];
    /* > 0: each scaled score s becomes softcap tanh(s / softcap) before ALiBi and the masks
     * (Gemma 2's logit soft-capping), within 3.5 ulp of it for any softcap; 0: none. A normal float32
     * (FLT_MIN to FLT_MAX) or 0: a denormal, negative, infinite or NaN softcap is ATTN_ERR_ARG */
    float softcap;
    attn_score_mods mods; /* score and mask callbacks (above); zero: none */
} attn_score_features;

typedef struct attn_sdpa_opts {
    float scale; /* 0: 1/sqrt(D) */
    attn_mask mask;
    float dropout_p; /* on the attention weights, only while the ctx is training */
    attn_sdpa_impl impl;
    /* Grouped-query attention, as PyTorch's enable_gqa: k and v (B, H_kv, Lk, .) with H_kv dividing
     * H; query head h attends with key/value head h / (H / H_kv) (PyTorch's repeat_interleave).
     * Without it the heads must be equal. 4-D inputs only. */
    bool enable_gqa;
    attn_score_features features; /* window, ALiBi, softcap, callbacks (above); zero: none */
} attn_sdpa_opts;

/* slopes (heads): ALiBi's slopes as the paper's code makes them: for heads a power of 2,
 * 2^(-8 (i + 1) / heads); otherwise those of the largest power of 2 below, then every other slope
 * of twice that power until there are heads. ATTN_ERR_ARG for heads < 1 or NULL. */
ATTN_API attn_status attn_alibi_slopes(float *slopes, int64_t heads);

/* Scaled dot-product attention: out = dropout(softmax(scale Q K^T + mask)) V.
 * q (B, H, Lq, D), k (B, H, Lk, D), v (B, H, Lk, Dv) -> out (B, H, Lq, Dv); 3-D inputs (B, L, D)
 * are one head. When weights is not NULL, *weights receives the softmax probabilities
 * (B, H, Lq, Lk) (before dropout, not differentiable) and the reference path runs. opts NULL
 * means defaults. Differentiable in q, k and v. NaN in q or k makes the output rows it reaches
 * NaN, as in PyTorch (it is never taken for a masked key). */
ATTN_API attn_tensor *attn_sdpa(attn_ctx *ctx, attn_tensor *q, attn_tensor *k, attn_tensor *v,
                                const attn_sdpa_opts *opts, attn_tensor **weights);

/* The options of attn_sdpa_varlen; the zero value is plain attention with scale 1/sqrt(D). */
typedef struct attn_varlen_opts {
    float scale; /* 0: 1/sqrt(D) */
    /* FlashAttention's causal mask, bottom-right aligned in each sequence: query i of sequence b
     * sees keys j <= i + Lk_b - Lq_b (with Lq_b = Lk_b, PyTorch's is_causal); the same as a
     * window's right bound 0, with which it combines */
    bool causal;
    bool enable_gqa;     /* k and v may have H_kv heads dividing H, as attn_sdpa's */
    float dropout_p;     /* on the attention weights, only while the ctx is training */
    attn_sdpa_impl impl; /* AUTO and FUSED: the fused kernel; REF: its reference twin */
    /* as attn_sdpa's, in each sequence's own frame: the window per sequence, ALiBi's (batch, H)
     * slopes per sequence, and the callbacks' b the sequence's index, q and kv positions in it
     * (mask_block's blocks from its first query and key) */
    attn_score_features features;
} attn_varlen_opts;

/* Scaled dot-product attention over a batch of sequences of different lengths packed end to end,
 * without padding (FlashAttention's flash_attn_varlen_func):
 *   q (total_q, H, D), k (total_k, H_kv, D), v (total_k, H_kv, Dv) -> out (total_q, H, Dv),
 * sequence b's queries in rows [cu_seqlens_q[b], cu_seqlens_q[b+1]) of q and its keys and values
 * in rows [cu_seqlens_k[b], cu_seqlens_k[b+1]) of k and v; each sequence attends to its own keys
 * only, with attn_sdpa's math and the masks of opts applied in its own (Lq_b, Lk_b) frame.
 * cu_seqlens_q and cu_seqlens_k hold batch + 1 offsets each: 0 first, non-decreasing, q's and k's
 * row counts last (ATTN_ERR_ARG or ATTN_ERR_SHAPE naming the first offset that is not). A
 * sequence of no keys gives its queries 0. Offsets and slopes are copied. Differentiable in q, k
 * and v; opts NULL means defaults. */
ATTN_API attn_tensor *attn_sdpa_varlen(attn_ctx *ctx, attn_tensor *q, attn_tensor *k, attn_tensor *v,
                                       const int64_t *cu_seqlens_q, const int64_t *cu_seqlens_k, int64_t batch,
                                       const attn_varlen_opts *opts);

/* ======================================================================================
 * Modules (nn): named parameters initialised as PyTorch does, from the rng every *_init
 * takes. rng NULL skips the random init (those parameters stay 0; LayerNorm's ones and zeros
 * and the zeroed biases are set as usual): for modules whose values come from a file
 * (attn_params_load, attn_checkpoint_load).
 * ====================================================================================== */

typedef struct attn_linear_layer {
    attn_tensor *weight; /* (out, in) */
    attn_tensor *bias;   /* (out) or NULL */
    int64_t in_features, out_features;
} attn_linear_layer;
/* Registers "<prefix>.weight" and "<prefix>.bias"; kaiming_uniform(a=sqrt 5) = U(+-1/sqrt in),
 * bias U(+-1/sqrt in). */
ATTN_API attn_status attn_linear_init(attn_linear_layer *m, attn_params *p, const char *prefix, int64_t in_features,
                                      int64_t out_features, bool bias, attn_rng *rng);
ATTN_API attn_tensor *attn_linear_forward(attn_ctx *ctx, const attn_linear_layer *m, attn_tensor *x);

typedef struct attn_embedding_layer {
    attn_tensor *weight;                                /* (num, dim), N(0, 1); the padding row zero */
    int64_t num_embeddings, embedding_dim, padding_idx; /* padding_idx < 0: none */
} attn_embedding_layer;
ATTN_API attn_status attn_embedding_init(attn_embedding_layer *m, attn_params *p, const char *prefix, int64_t num,
                                         int64_t dim, int64_t padding_idx, attn_rng *rng);
ATTN_API attn_tensor *attn_embedding_forward(attn_ctx *ctx, const attn_embedding_layer *m, const int64_t *ids, int ndim,
                                             const int64_t *shape);

typedef struct attn_layer_norm_layer {
    attn_tensor *weight, *bias; /* (dim) ones / zeros */
    int64_t dim;
    float eps;
} attn_layer_norm_layer;
ATTN_API attn_status attn_layer_norm_init(attn_layer_norm_layer *m, attn_params *p, const char *prefix, int64_t dim,
                                          float eps);
ATTN_API attn_tensor *attn_layer_norm_forward(attn_ctx *ctx, const attn_layer_norm_layer *m, attn_tensor *x);

typedef struct attn_conv1d_layer {
    attn_tensor *weight; /* (out, in, k), U(+-1/sqrt(in*k)) */
    attn_tensor *bias;   /* (out) or NULL */
    int64_t in_channels, out_channels, kernel_size, padding;
} attn_conv1d_layer;
ATTN_API attn_status attn_conv1d_init(attn_conv1d_layer *m, attn_params *p, const char *prefix, int64_t in_channels,
                                      int64_t out_channels, int64_t kernel_size, int64_t padding, bool bias,
                                      attn_rng *rng);
ATTN_API attn_tensor *attn_conv1d_forward(attn_ctx *ctx, const attn_conv1d_layer *m, attn_tensor *x);

/* Multi-head attention with torch.nn.MultiheadAttention's math and state_dict names, always
 * batch first: "<prefix>.in_proj_weight" (3E, E) and "<prefix>.in_proj_bias" (3E), or, when
 * kdim or vdim differ from E, "<prefix>.q_proj_weight" (E, E), "k_proj_weight" (E, kdim),
 * "v_proj_weight" (E, vdim); "<prefix>.out_proj.weight" (E, E), "<prefix>.out_proj.bias".
 * Init as PyTorch: xavier_uniform projections, zero biases, out_proj weight as a Linear.
 * With num_kv_heads < num_heads (attn_mha_init_gqa: grouped-query attention, as attn_sdpa's
 * enable_gqa) K and V are Ekv = num_kv_heads E / num_heads wide: "k_proj_weight" (Ekv, kdim),
 * "v_proj_weight" (Ekv, vdim) beside "q_proj_weight" (E, E), and "in_proj_bias" (E + 2 Ekv), q's
 * bias first, then k's, then v's. */
typedef struct attn_mha_layer {
    int64_t embed_dim, num_heads, kdim, vdim;
    float dropout;                                              /* on the attention weights while training */
    attn_tensor *in_proj_weight;                                /* (3E, E) or NULL */
    attn_tensor *q_proj_weight, *k_proj_weight, *v_proj_weight; /* or NULL */
    attn_tensor *in_proj_bias;                                  /* (3E), (E + 2 Ekv) or NULL */
    attn_linear_layer out_proj;
    int64_t num_kv_heads; /* key/value heads, dividing num_heads (0: num_heads) */
} attn_mha_layer;

ATTN_API attn_status attn_mha_init(attn_mha_layer *m, attn_params *p, const char *prefix, int64_t embed_dim,
                                   int64_t num_heads, int64_t kdim, int64_t vdim, bool bias, float dropout,
                                   attn_rng *rng);
/* attn_mha_init with num_kv_heads key/value heads (a divisor of num_heads; num_heads: the same
 * layer as attn_mha_init's, 1: multi-query attention). ATTN_ERR_ARG for any other count. */
ATTN_API attn_status attn_mha_init_gqa(attn_mha_layer *m, attn_params *p, const char *prefix, int64_t embed_dim,
                                       int64_t num_heads, int64_t num_kv_heads, int64_t kdim, int64_t vdim, bool bias,
                                       float dropout, attn_rng *rng);

typedef struct attn_mha_opts {
    attn_mask mask;       /* as attn_sdpa; nn.MultiheadAttention's bool attn_mask goes in
                             .blocked. A 3-D attend, blocked or additive mask must be
                             PyTorch's per-head (B*H, Lq, Lk), read as (B, H, Lq, Lk) */
    bool average_weights; /* true: *weights (B, Lq, Lk) averaged over heads; false (B, H, Lq, Lk) */
    attn_sdpa_impl impl;
    /* rotary position embeddings (attn_rope) on each head's q and k after their projections;
     * NULL: none. Its layout, base and rotary_dim apply; the positions are each sequence's
     * 0, 1, 2, ... (Lq of the queries, Lk of the keys): position_dim and positions are ignored */
    const struct attn_rope_opts *rope;
    /* the attention's window, ALiBi slopes, softcap and score/mask callbacks, as attn_sdpa takes
     * them on the heads (B, H, Lq, Lk); NULL: none */
    const attn_score_features *features;
} attn_mha_opts;

/* query (B, Lq, E), key (B, Lk, kdim), value (B, Lk, vdim) -> (B, Lq, E). Self-attention passes
 * the same tensor three times. weights (may be NULL) receives the attention weights. Unbatched,
 * as nn.MultiheadAttention takes it: query (Lq, E), key (Lk, kdim), value (Lk, vdim) -> (Lq, E),
 * weights (Lq, Lk) or (H, Lq, Lk); the masks are those of B = 1 (key_padding (1, Lk), a 3-D
 * mask (H, Lq, Lk)). */
ATTN_API attn_tensor *attn_mha_forward(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *query, attn_tensor *key,
                                       attn_tensor *value, const attn_mha_opts *opts, attn_tensor **weights);

/* Self-attention of the layer over sequences packed end to end, without padding: x (total, E)
 * holds `batch` sequences, sequence b in rows [cu_seqlens[b], cu_seqlens[b+1]) (attn_sdpa_varlen's
 * offsets, checked there) -> (total, E). The projections run on the total rows only; each sequence
 * attends to its own tokens (causal: each token to those up to it), what attn_mha_forward gives
 * the same sequences padded, with their padding keys masked, at their rows. Needs kdim = vdim = E;
 * num_kv_heads and dropout as attn_mha_forward. */
ATTN_API attn_tensor *attn_mha_forward_packed(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *x,
                                              const int64_t *cu_seqlens, int64_t batch, bool causal);
/* Cross-attention of packed sequences: query (total_q, E) holds `batch` sequences at cu_seqlens_q,
 * memory (total_k, kdim) the keys and values of each at cu_seqlens_k (kdim = vdim) -> (total_q, E):
 * query sequence b attends to memory sequence b alone, what attn_mha_forward gives the padded
 * sequences with the memory's padding masked, at their rows (a memory sequence of no rows gives
 * its queries the output projection's bias). */
ATTN_API attn_tensor *attn_mha_forward_packed_cross(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *query,
                                                    attn_tensor *memory, const int64_t *cu_seqlens_q,
                                                    const int64_t *cu_seqlens_k, int64_t batch);

/* Softmax over the last dim of scores (B, Lq, Lk) with D2L's valid_lens ((B) or (B, Lq); NULL
 * or no data: none): keys j >= len get weight 0; a row with len 0 is all 0 (D2L would give
 * 1/Lk). */
ATTN_API attn_tensor *attn_masked_softmax(attn_ctx *ctx, attn_tensor *scores, const attn_lens *valid_lens);

/* Additive attention scores, fused: s[b,i,j] = sum_h wv[h] tanh(qp[b,i,h] + kp[b,j,h]) for
 * qp (B, Lq, h), kp (B, Lk, h), wv (h values); no (B, Lq, Lk, h) tensor is made. */
ATTN_API attn_tensor *attn_additive_scores(attn_ctx *ctx, attn_tensor *qp, attn_tensor *kp, attn_tensor *wv);

/* D2L's AdditiveAttention: "W_q.weight" (h, q_size), "W_k.weight" (h, k_size), "w_v.weight"
 * (1, h), all without bias (Linear init); dropout on the weights while training.
 *   out = dropout(masked_softmax(w_v tanh(W_q q + W_k k))) @ values */
typedef struct attn_additive_layer {
    attn_linear_layer W_q, W_k, w_v;
    float dropout;
} attn_additive_layer;
ATTN_API attn_status attn_additive_init(attn_additive_layer *m, attn_params *p, const char *prefix, int64_t query_size,
                                        int64_t key_size, int64_t num_hiddens, float dropout, attn_rng *rng);
/* queries (B, Lq, q_size), keys (B, Lk, k_size), values (B, Lk, v) -> (B, Lq, v); weights (may
 * be NULL) receives (B, Lq, Lk). */
ATTN_API attn_tensor *attn_additive_forward(attn_ctx *ctx, const attn_additive_layer *m, attn_tensor *queries,
                                            attn_tensor *keys, attn_tensor *values, const attn_lens *valid_lens,
                                            attn_tensor **weights);

/* Nadaraya-Watson kernel regression as attention pooling (seed 003):
 *   scores[i,j] = -0.5 ((q_i - k_ij) w)^2,  a = softmax_j(scores),  y_i = sum_j a_ij v_ij
 * queries (n), keys and values (n, m); w a one-element tensor (the learnable width) or NULL for
 * the fixed Gaussian kernel (w = 1). weights (may be NULL) receives a (n, m). */
ATTN_API attn_tensor *attn_nw_forward(attn_ctx *ctx, attn_tensor *w, attn_tensor *queries, attn_tensor *keys,
                                      attn_tensor *values, attn_tensor **weights);
/* Leave-one-out keys as seed 003 builds them: from x (n) the (n, n-1) matrix whose row i is x
 * without x_i. In ctx's arena, not differentiable. */
ATTN_API attn_tensor *attn_nw_leave_one_out(attn_ctx *ctx, const attn_tensor *x);

/* Linear ("efficient") attention of seed 002: "to_query", "to_key", "to_value" Linear(E, E).
 *   EFFICIENT (seed 002): K' = softmax over the sequence (dim 1), out = Q (K'^T V)
 *   SHEN (Shen et al. 2021): also Q' = softmax over features, out = Q' (K'^T V)
 * Of the mask (may be NULL) only key_padding (B, L), 1 = padding, applies: those keys get weight 0
 * in the sequence softmax; any other mask is ATTN_ERR_ARG (the layer has no (L, L) scores). */
typedef enum attn_linear_attention_kind {
    ATTN_LINEAR_ATTENTION_EFFICIENT,
    ATTN_LINEAR_ATTENTION_SHEN,
} attn_linear_attention_kind;
typedef struct attn_linear_attention_layer {
    attn_linear_layer to_query, to_key, to_value;
    attn_linear_attention_kind kind;
} attn_linear_attention_layer;
ATTN_API attn_status attn_linear_attention_init(attn_linear_attention_layer *m, attn_params *p, const char *prefix,
                                                int64_t embed_dim, attn_linear_attention_kind kind, attn_rng *rng);
/* x (B, L, E) -> (B, L, E) */
ATTN_API attn_tensor *attn_linear_attention_forward(attn_ctx *ctx, const attn_linear_attention_layer *m, attn_tensor *x,
                                                    const attn_mask *mask);

/* Seed 002's ConvAttention: LayerNorm(MHA(x, x, x) + Conv1d(x^T)^T), Conv1d(E, E, k, padding
 * k/2). Names "<prefix>.attention.*" (attn_mha_layer names), "<prefix>.conv.weight/bias",
 * "<prefix>.norm.weight/bias". */
typedef struct attn_conv_attention_layer {
    attn_mha_layer attention;
    attn_conv1d_layer conv;
    attn_layer_norm_layer norm;
} attn_conv_attention_layer;
ATTN_API attn_status attn_conv_attention_init(attn_conv_attention_layer *m, attn_params *p, const char *prefix,
                                              int64_t embed_dim, int64_t num_heads, int64_t kernel_size, attn_rng *rng);
/* x (B, L, E) -> (B, L, E); mask applies to the attention path. */
ATTN_API attn_tensor *attn_conv_attention_forward(attn_ctx *ctx, const attn_conv_attention_layer *m, attn_tensor *x,
                                                  const attn_mha_opts *opts, attn_tensor **weights);

/* ---- GRU (torch.nn.GRU, batch first) ----
 * Per layer l: "<prefix>.weight_ih_l<l>" (3H, in), "weight_hh_l<l>" (3H, H), "bias_ih_l<l>",
 * "bias_hh_l<l>"; gates in PyTorch's order r, z, n:
 *   r = sigmoid(W_ir x + b_ir + W_hr h + b_hr),  z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
 *   n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),  h' = (1 - z) * n + z * h
 * Init U(+-1/sqrt(H)) for every weight and bias; dropout between layers while training. */
enum {
    ATTN_GRU_MAX_LAYERS = 8
}; /* the most layers attn_gru_init takes */
typedef struct attn_gru_layer {
    int64_t input_size, hidden_size;
    int num_layers;
    float dropout;
    attn_tensor *w_ih[ATTN_GRU_MAX_LAYERS], *w_hh[ATTN_GRU_MAX_LAYERS]; /* per layer */
    attn_tensor *b_ih[ATTN_GRU_MAX_LAYERS], *b_hh[ATTN_GRU_MAX_LAYERS];
} attn_gru_layer;
ATTN_API attn_status attn_gru_init(attn_gru_layer *m, attn_params *p, const char *prefix, int64_t input_size,
                                   int64_t hidden_size, int num_layers, float dropout, attn_rng *rng);
/* x (B, T, in), h0 (num_layers, B, H) or NULL (zeros) -> outputs (B, T, H) of the last layer;
 * *h_n (may be NULL) receives (num_layers, B, H). */
ATTN_API attn_tensor *attn_gru_forward(attn_ctx *ctx, const attn_gru_layer *m, attn_tensor *x, attn_tensor *h0,
                                       attn_tensor **h_n);

/* ---- Positional encodings ---- */

typedef enum attn_pe_layout {
    ATTN_PE_INTERLEAVED,  /* P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = cos(...) (paper, D2L) */
    ATTN_PE_CONCATENATED, /* the same angles as [sin ..., cos ...] halves (not tensor2tensor's
                             frequencies, 1/10000^(j/(d/2 - 1))) */
} attn_pe_layout;

/* The (max_len, d) sinusoidal table in ctx's arena (not differentiable). */
ATTN_API attn_tensor *attn_sinusoidal_table(attn_ctx *ctx, int64_t max_len, int64_t d, attn_pe_layout layout);
/* x (B, L, E) + table[:L] (table (max_len, E), L <= max_len). */
ATTN_API attn_tensor *attn_add_positions(attn_ctx *ctx, attn_tensor *x, attn_tensor *table);

/* Rotary position embeddings, forward and backward. Each row of x (its last dim, d) at position
 * p rotates the pairs (a, b) of its first rotary_dim dims by theta_i = p base^(-2i / rotary_dim):
 *   (a, b) -> (a cos theta_i - b sin theta_i, a sin theta_i + b cos theta_i);
 * the dims past rotary_dim pass through. Applied to q and k before attention, it makes their
 * scores depend on positions through p_q - p_k alone. */
typedef enum attn_rope_layout {
    ATTN_ROPE_INTERLEAVED, /* pairs (2i, 2i + 1): GPT-J, ggml's normal mode */
    ATTN_ROPE_HALVES,      /* pairs (i, i + rotary_dim / 2): GPT-NeoX, Llama's rotate_half */
} attn_rope_layout;
#define ATTN_ROPE_MAX_DIM 8192
typedef struct attn_rope_opts {
    attn_rope_layout layout;
    float base;               /* 10000 in most models; > 1 */
    int64_t rotary_dim;       /* even, <= d; 0: d */
    int position_dim;         /* the dim of x that holds positions: (B, H, L, D) 2, (B, L, H, D) 1,
                                 a packed batch (total, H, D) 0; any dim before the last */
    const int64_t *positions; /* (n_positions) the position of each index of that dim, >= 0 (a packed
                                 batch: each token's place in its sequence); NULL: 0, 1, 2, ... */
    int64_t n_positions;      /* x's size along position_dim when positions is given */
} attn_rope_opts;
/* x (..., d) -> the same shape; positions copied. */
ATTN_API attn_tensor *attn_rope(attn_ctx *ctx, attn_tensor *x, const attn_rope_opts *opts);

/* Seed 002's learned encoding: a parameter "<prefix>" of shape (1, max_len, E) ~ N(0, 1);
 * forward adds its first L positions. */
typedef struct attn_learned_pe {
    attn_tensor *table; /* (1, max_len, E) */
} attn_learned_pe;
ATTN_API attn_status attn_learned_pe_init(attn_learned_pe *m, attn_params *p, const char *name, int64_t max_len,
                                          int64_t dim, attn_rng *rng);
ATTN_API attn_tensor *attn_learned_pe_forward(attn_ctx *ctx, const attn_learned_pe *m, attn_tensor *x);

/* ---- Transformer layers (torch.nn.TransformerEncoderLayer / DecoderLayer names) ---- */

typedef struct attn_transformer_config {
    int64_t d_model, num_heads, dim_feedforward;
    float dropout;    /* residual branches, attention weights and (ffn_dropout) inside the FFN */
    bool norm_first;  /* pre-LN; false: post-LN (the paper, D2L, seed 002, PyTorch default) */
    bool gelu;        /* FFN activation; false: ReLU */
    bool ffn_dropout; /* dropout after the activation inside the FFN (PyTorch: yes; seed 002: no) */
    float eps;        /* LayerNorm eps; 0: 1e-5 */
    /* rotary positions in the layer's self-attention (attn_mha_opts.rope; a decoder layer's
     * cross-attention takes none) when rope_base > 1, with rope_layout and rope_dim (even,
     * <= d_model / num_heads; 0: all of it); 0: none */
    float rope_base;
    attn_rope_layout rope_layout;
    int64_t rope_dim;
} attn_transformer_config;

/* "self_attn.*", "linear1.*" (F, E), "linear2.*" (E, F), "norm1.*", "norm2.*" */
typedef struct attn_encoder_layer {
    attn_transformer_config cfg;
    attn_mha_layer self_attn;
    attn_linear_layer linear1, linear2;
    attn_layer_norm_layer norm1, norm2;
} attn_encoder_layer;
ATTN_API attn_status attn_encoder_layer_init(attn_encoder_layer *m, attn_params *p, const char *prefix,
                                             const attn_transformer_config *cfg, attn_rng *rng);
/* post-LN: x = norm1(x + drop(attn(x))); x = norm2(x + drop(ffn(x)));
 * pre-LN:  x = x + drop(attn(norm1(x))); x = x + drop(ffn(norm2(x))).
 * x (B, L, E); weights (may be NULL) receives per-head (B, H, L, L). One sequence unbatched, as
 * torch takes it: x (L, E), weights (H, L, L), the masks those of B = 1. */
ATTN_API attn_tensor *attn_encoder_layer_forward(attn_ctx *ctx, const attn_encoder_layer *m, attn_tensor *x,
                                                 const attn_mask *mask, attn_tensor **weights);
/* The layer over sequences packed end to end (attn_mha_forward_packed): x (total, E) holds
 * `batch` sequences at cu_seqlens -> (total, E), what attn_encoder_layer_forward gives the padded
 * sequences with their padding masked, at their rows; rotary positions (cfg.rope_base) count from
 * 0 in each sequence. */
ATTN_API attn_tensor *attn_encoder_layer_forward_packed(attn_ctx *ctx, const attn_encoder_layer *m, attn_tensor *x,
                                                        const int64_t *cu_seqlens, int64_t batch);

/* Adds "multihead_attn.*" (cross-attention) and "norm3.*" */
typedef struct attn_decoder_layer {
    attn_transformer_config cfg;
    attn_mha_layer self_attn, multihead_attn;
    attn_linear_layer linear1, linear2;
    attn_layer_norm_layer norm1, norm2, norm3;
} attn_decoder_layer;
ATTN_API attn_status attn_decoder_layer_init(attn_decoder_layer *m, attn_params *p, const char *prefix,
                                             const attn_transformer_config *cfg, attn_rng *rng);
/* x (B, Lt, E) attends to itself under self_mask (usually causal + target padding) and to
 * memory (B, Ls, E) under cross_mask (source padding). Weights (may be NULL): per-head. Unbatched:
 * x (Lt, E) and memory (Ls, E), the masks those of B = 1. */
ATTN_API attn_tensor *attn_decoder_layer_forward(attn_ctx *ctx, const attn_decoder_layer *m, attn_tensor *x,
                                                 attn_tensor *memory, const attn_mask *self_mask,
                                                 const attn_mask *cross_mask, attn_tensor **self_weights,
                                                 attn_tensor **cross_weights);
/* Packed: x (total_t, E) holds `batch` target sequences at cu_seqlens_t, each attending causally to
 * itself and to memory sequence b of memory (total_s, E) at cu_seqlens_s -> (total_t, E), what
 * attn_decoder_layer_forward gives the padded sequences under causal + target padding and source
 * padding masks, at their rows. */
ATTN_API attn_tensor *attn_decoder_layer_forward_packed(attn_ctx *ctx, const attn_decoder_layer *m, attn_tensor *x,
                                                        const int64_t *cu_seqlens_t, attn_tensor *memory,
                                                        const int64_t *cu_seqlens_s, int64_t batch);

/* ======================================================================================
 * Models of the seeds
 * ====================================================================================== */

/* Seed 002's AttentionClassifier: Embedding(V, E) + positions + one attention layer (or N
 * Transformer blocks) + mean over the sequence + Linear(E, hidden) - ReLU - Dropout - Linear.
 * Parameter names follow the seed: "embedding.weight", "pos_encoding" (1, max_len, E),
 * "attention.*", "blocks.<i>.*", "classifier.0.*", "classifier.3.*". */
typedef enum attn_classifier_attention {
    ATTN_CLASSIFIER_SOFTMAX,  /* multi-head scaled dot-product (the seed) */
    ATTN_CLASSIFIER_LINEAR,   /* seed 002's EfficientAttention */
    ATTN_CLASSIFIER_CONV,     /* seed 002's ConvAttention */
    ATTN_CLASSIFIER_ADDITIVE, /* additive attention, self (queries = keys = values) */
} attn_classifier_attention;

typedef struct attn_classifier_config {
    int64_t vocab_size, embed_dim, num_heads, hidden_dim, num_classes, max_len;
    attn_classifier_attention attention;
    int num_blocks;          /* 0: the seed's single attention layer; N: N Transformer blocks */
    bool norm_first;         /* blocks: pre-LN (default post-LN, as the seed's TransformerBlock) */
    bool sinusoidal;         /* sinusoidal positions instead of the learned table */
    float dropout;           /* the classifier head's dropout (seed: 0.5) */
    float block_dropout;     /* inside Transformer blocks (seed: 0.1) */
    int64_t additive_hidden; /* additive attention's hidden size (0: embed_dim) */
    bool mask_padding;       /* keys at padding positions masked and the mean over real tokens
                               only; false = the seed (attends to and averages the padding) */
    bool pack;               /* with mask_padding, and blocks or the softmax attention: each batch's
                               sequences packed end to end (attn_mha_forward_packed, the blocks'
                               attn_encoder_layer_forward_packed), no padding computed; the same
                               model as without (equal up to float32 rounding; the blocks'
                               dropout draws differ). A way of running, not stored with the model */
    int64_t ngram_buckets;   /* > 0: a linear bag of n-grams beside the attention (fastText's
                               features, "ngrams.weight" (vocab_size + ngram_buckets, classes),
                               zeros at init): each of a sequence's n real tokens indexes its row
                               (its id), each of its n - 1 bigrams (a, b) the row vocab_size +
                               attn_classifier_bigram_bucket(a, b); the rows' sum times
                               ATTN_CLASSIFIER_NGRAM_GAIN / sqrt(2n - 1) is added to the logits.
                               0: none (the seed) */
} attn_classifier_config;

/* The seed's hyper-parameters: E 128, 4 heads, hidden 256, 2 classes, max_len 512, dropout 0.5. */
ATTN_API attn_classifier_config attn_classifier_defaults(int64_t vocab_size);
/* The n-gram bag's gain: Adam moves each row of the table by about lr per step, whatever its
 * gradient's size, so the gain sets how fast the bag learns beside the attention (IMDB's
 * validation split after one epoch, docs/results.md: gain 1 83.5%, 4 85.2%, 16 88.5%) */
#define ATTN_CLASSIFIER_NGRAM_GAIN 16.0f
/* The bucket in [0, buckets) of the bigram of ids (a, b), both in [0, vocab_size): splitmix64's
 * finaliser of a * vocab_size + b (in uint64_t arithmetic), modulo buckets (-1 for arguments out
 * of range). */
ATTN_API int64_t attn_classifier_bigram_bucket(int64_t a, int64_t b, int64_t vocab_size, int64_t buckets);

typedef struct attn_classifier {
    attn_classifier_config cfg;
    attn_embedding_layer embedding;
    attn_learned_pe pos;
    attn_mha_layer mha;
    attn_linear_attention_layer linear;
    attn_conv_attention_layer conv;
    attn_additive_layer additive;
    attn_encoder_layer *blocks; /* (num_blocks), owned */
    attn_linear_layer fc1, fc2;
    attn_tensor *ngrams; /* (vocab_size + ngram_buckets, classes), NULL without ngram_buckets */
} attn_classifier;

ATTN_API attn_status attn_classifier_init(attn_classifier *m, attn_params *p, const attn_classifier_config *cfg,
                                          attn_rng *rng);
ATTN_API void attn_classifier_free(attn_classifier *m); /* the blocks array; params stay in p */
/* ids (B, L) with lengths (B), each in [1, L] (tokens past a length are padding) -> logits (B, classes).
 * weights (may be NULL) receives the (last) attention layer's weights averaged over heads
 * (B, L, L), when the variant has weights (not linear). */
ATTN_API attn_tensor *attn_classifier_forward(attn_ctx *ctx, const attn_classifier *m, const int64_t *ids,
                                              const int64_t *lengths, int64_t batch, int64_t len,
                                              attn_tensor **weights);

/* Sequence-to-sequence translation models.
 *   TRANSFORMER (seed 003 / D2L / "Attention Is All You Need", post-LN): x = emb * sqrt(d) + PE,
 *     dropout, encoder layers; decoder layers with causal self-attention and cross-attention;
 *     "generator" Linear(d, V_tgt). Names "src_embedding.weight", "tgt_embedding.weight",
 *     "encoder.layers.<i>.*", "decoder.layers.<i>.*", "generator.*".
 *   BAHDANAU (D2L Seq2SeqAttentionDecoder): GRU encoder; per target step the query is the last
 *     layer's hidden state, context = additive attention over the encoder outputs, the GRU input
 *     is cat(context, embedding). Names "encoder.embedding.weight", "encoder.rnn.*",
 *     "decoder.embedding.weight", "decoder.attention.*", "decoder.rnn.*", "decoder.dense.*". */
typedef enum attn_seq2seq_kind {
    ATTN_SEQ2SEQ_TRANSFORMER,
    ATTN_SEQ2SEQ_BAHDANAU
} attn_seq2seq_kind;

typedef struct attn_seq2seq_config {
    attn_seq2seq_kind kind;
    int64_t src_vocab, tgt_vocab;
    int64_t d_model; /* transformer width; Bahdanau: embedding and hidden size */
    int64_t num_heads, dim_feedforward;
    int enc_layers, dec_layers;
    float dropout;
    int64_t max_len; /* longest sequence the positional table covers */
    int64_t pad_id, bos_id, eos_id;
    /* Transformer: rotary positions (attn_rope, rotated halves over each head, this base > 1) in
     * every self-attention, encoder's and decoder's, in place of the sinusoidal table; 0: the
     * table (the paper) */
    float rope_base;
} attn_seq2seq_config;

typedef struct attn_seq2seq {
    attn_seq2seq_config cfg;
    attn_embedding_layer src_embedding, tgt_embedding;
    attn_encoder_layer *enc;         /* (enc_layers) transformer, owned */
    attn_decoder_layer *dec;         /* (dec_layers) transformer, owned */
    attn_linear_layer generator;     /* transformer: d -> V_tgt; Bahdanau: the dense layer */
    attn_gru_layer enc_rnn, dec_rnn; /* Bahdanau */
    attn_additive_layer attention;   /* Bahdanau */
} attn_seq2seq;

ATTN_API attn_status attn_seq2seq_init(attn_seq2seq *m, attn_params *p, const attn_seq2seq_config *cfg, attn_rng *rng);
ATTN_API void attn_seq2seq_free(attn_seq2seq *m);
/* Teacher forcing: src (B, S) with src_lens, tgt_in (B, T) (<bos> first) with tgt_lens (lengths in
 * [0, S] and [0, T]) ->
 * logits (B, T, V_tgt). cross_weights (may be NULL): the last decoder layer's cross-attention,
 * per head (B, H, T, S) (Bahdanau: (B, 1, T, S)). */
ATTN_API attn_tensor *attn_seq2seq_forward(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src,
                                           const int64_t *src_lens, int64_t batch, int64_t src_len,
                                           const int64_t *tgt_in, const int64_t *tgt_lens, int64_t tgt_len,
                                           attn_tensor **cross_weights);
/* Teacher forcing over pairs packed end to end, without padding (Transformer only): src
 * (total_s) ids with sequence b at [cu_src[b], cu_src[b+1]), tgt_in (total_t) at cu_tgt (batch + 1
 * offsets each, every length in [1, max_len]) -> logits (total_t, V_tgt), what attn_seq2seq_forward
 * gives the same pairs padded, at their rows (equal up to float32 rounding; dropout draws
 * differ). */
ATTN_API attn_tensor *attn_seq2seq_forward_packed(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src,
                                                  const int64_t *cu_src, const int64_t *tgt_in, const int64_t *cu_tgt,
                                                  int64_t batch);
/* Step-by-step decoding, for a search of the caller's own: the source is encoded once, then each
 * step feeds every row's latest token and returns the next token's logits. Rows: `beams`
 * consecutive rows per source sentence (R = batch * beams; row r decodes sentence r / beams).
 *   CACHED: the Transformer keeps each layer's self-attention keys and values of the tokens fed
 *     so far and its cross-attention keys and values of the source (computed once), and runs the
 *     decoder and the generator on the newest position only; Bahdanau carries the GRU state and
 *     the encoder outputs projected by W_k once. O(t) work at step t.
 *   RECOMPUTE: the reference twin: keeps the tokens and runs the teacher-forced decoder over the
 *     whole prefix at every step (O(t^2) work), as attn_seq2seq_forward would.
 * Both give the same logits up to float32 rounding (the GEMMs round rows differently as their
 * row counts differ; tests/test_seq2seq_decoder.c bounds the difference). Runs without grad and
 * without dropout, whatever the mode of any ctx. */
typedef enum attn_seq2seq_decode_impl {
    ATTN_SEQ2SEQ_DECODE_CACHED,
    ATTN_SEQ2SEQ_DECODE_RECOMPUTE,
} attn_seq2seq_decode_impl;

typedef struct attn_seq2seq_decoder attn_seq2seq_decoder; /* opaque */

/* Encodes src (B, S) with src_lens (B) (each in [1, S]; ids past a length are padding) and makes
 * room for max_steps steps (1 <= max_steps <= cfg.max_len, the positions the model knows).
 * Returns a decoder owned by the caller (attn_seq2seq_decoder_free), or NULL with
 * attn_last_error(). m must outlive it; src and src_lens are not kept. */
ATTN_API attn_seq2seq_decoder *attn_seq2seq_decoder_new(const attn_seq2seq *m, const int64_t *src,
                                                        const int64_t *src_lens, int64_t batch, int64_t src_len,
                                                        int64_t beams, int64_t max_steps,
                                                        attn_seq2seq_decode_impl impl);
/* One step: tokens (R) are each row's latest token (<bos> at the first step); logits (R, V_tgt)
 * receive the scores of each row's next token. ATTN_ERR_STATE after max_steps steps. A failed
 * step leaves the decoder as it was. */
ATTN_API attn_status attn_seq2seq_decoder_step(attn_seq2seq_decoder *d, float *logits, const int64_t *tokens);
/* Beam re-selection: row r continues the hypothesis that row parents[r] held (parents (R), each
 * a row of the same sentence: parents[r] / beams == r / beams); rows may be repeated or dropped. */
ATTN_API attn_status attn_seq2seq_decoder_reorder(attn_seq2seq_decoder *d, const int64_t *parents);
/* Keeps the sentences keep[0..n) (ascending, each below the current batch) with their rows and
 * drops the others (e.g. those whose search has ended, so that no step is spent on them): the
 * decoder then holds n sentences, numbered in keep's order, and n x beams rows. */
ATTN_API attn_status attn_seq2seq_decoder_select(attn_seq2seq_decoder *d, const int64_t *keep, int64_t n);
/* Threads of the decoder's steps (n <= 0: attn_default_num_threads(), the count it starts with). */
ATTN_API attn_status attn_seq2seq_decoder_set_num_threads(attn_seq2seq_decoder *d, int n);
ATTN_API void attn_seq2seq_decoder_free(attn_seq2seq_decoder *d); /* NULL is fine */

enum {
    ATTN_BEAM_MAX = 64
}; /* the widest beam search */
/* How attn_seq2seq_decode searches; the zero value is greedy decoding with the CACHED decoder. */
typedef struct attn_seq2seq_decode_opts {
    int beam_size;                 /* 0 or 1: greedy, every sentence at once; 2..ATTN_BEAM_MAX: beam search */
    float length_penalty;          /* beam search: alpha of the penalty ((5 + len) / 6)^alpha, finite */
    const int64_t *max_out;        /* (B) each sentence's limit, each in [1, out_width]; NULL: out_width */
    attn_seq2seq_decode_impl impl; /* CACHED, or RECOMPUTE: the reference twin */
    /* batch 1 only (may be NULL): *cross_weights receives the answer's cross-attention, per head
     * (H, out_len + 1, S) (Bahdanau: (1, ...)), in ctx's arena */
    attn_tensor **cross_weights;
} attn_seq2seq_decode_opts;

/* Decodes a batch: src (B, S) with src_lens (B), each in [1, S] (ids past a length are padding);
 * out (B, out_width) receives each sentence's tokens without <eos>, then pad_id, and out_lens (B)
 * their counts. A sentence stops at <eos> or at its limit, min(limit, cfg.max_len - 1) tokens.
 * Greedy decoding takes each step's argmax; beam search (beam_size k) keeps the k best hypotheses
 * by log-probability and stops once k of them have ended, the answer being the ended one of best
 * penalised score (len in the penalty counts the generated tokens, <eos> included). Beam searches
 * of a batch run together in one decoder of B x k rows, each as it would run alone (the
 * Transformer masks padding and decodes the batch at once, equal to one sentence alone up to
 * float32 rounding; D2L's GRU encoder reads padding, so Bahdanau sentences are decoded in groups of
 * one length, unpadded). RESETS ctx first (INVALIDATES every tensor made in it before the call, as
 * attn_ctx_reset), runs with grad and training off and gives ctx its modes back at the end;
 * decodes on ctx's thread count. opts NULL: greedy, CACHED. */
ATTN_API attn_status attn_seq2seq_decode(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src,
                                         const int64_t *src_lens, int64_t batch, int64_t src_len,
                                         const attn_seq2seq_decode_opts *opts, int64_t out_width, int64_t *out,
                                         int64_t *out_lens);

/* ======================================================================================
 * Language models: a decoder-only Transformer (seed 002 section 4.2's masked self-attention,
 * stacked), in GPT-2's style or Llama's, trained on documents packed end to end.
 *   x = wte[ids] (+ wpe[position])            position: each token's place in its sequence
 *   block i: x = x + drop(attn(norm1(x)));  x = x + drop(ffn(norm2(x)))     (pre-norm)
 *            attn: causal self-attention within each sequence (LLAMA: q and k rotated, GQA)
 *            ffn:  GPT2 c_proj(gelu_tanh(c_fc x));  LLAMA w2(silu(w1 x) * w3 x)
 *   logits = norm_f(x) output^T,  output = wte (tied) or its own (LLAMA untied)
 * Names: GPT2 nanoGPT's (Linear weights (out, in)): "transformer.wte.weight", "transformer.wpe.weight",
 * "transformer.h.<i>.ln_1.*", ".attn.c_attn.*" (3E, E), ".attn.c_proj.*", ".ln_2.*", ".mlp.c_fc.*"
 * (F, E), ".mlp.c_proj.*", "transformer.ln_f.*"; LLAMA llama2.c's: "tok_embeddings.weight",
 * "layers.<i>.attention_norm.weight", ".attention.wq.weight" (E, E), ".wk.weight" and ".wv.weight"
 * (Hkv E / H, E), ".wo.weight", ".ffn_norm.weight", ".feed_forward.w1.weight" (F, E), ".w2.weight"
 * (E, F), ".w3.weight" (F, E), "norm.weight", "output.weight" (untied only). A tied output is
 * stored once, as the embedding. Init as nanoGPT and llama2.c: N(0, 0.02) weights and embeddings,
 * N(0, 0.02 / sqrt(2 layers)) for c_proj (GPT2) or wo and w3 (LLAMA), zero biases, unit norms.
 * ====================================================================================== */

typedef enum attn_lm_style {
    ATTN_LM_GPT2,  /* learned positions, LayerNorm with bias, GELU (tanh), biases, tied output */
    ATTN_LM_LLAMA, /* RoPE, RMSNorm, SwiGLU, GQA, no biases, tied or untied output */
} attn_lm_style;

typedef struct attn_lm_config {
    attn_lm_style style;
    int64_t vocab_size;
    int64_t context; /* the most tokens of one sequence (GPT2: wpe's rows) */
    int64_t d_model, num_layers, num_heads;
    int64_t num_kv_heads;  /* LLAMA: key/value heads, dividing num_heads (0: num_heads); GPT2: 0 */
    int64_t ffn_hidden;    /* 0: GPT2 4 d_model; LLAMA llama2.c's rule, 2/3 of 4 d_model rounded up to
                             a multiple of multiple_of */
    int64_t multiple_of;   /* LLAMA's rounding of ffn_hidden (0: 32, llama2.c's train.py) */
    float norm_eps;        /* 0: 1e-5 */
    float rope_base;       /* LLAMA (0: 10000), > 1 */
    bool rope_interleaved; /* LLAMA: pairs (2i, 2i + 1) as Meta's and llama2.c's code; false: halves
                              (i, i + d/2), Hugging Face's rotate_half */
    bool untied;           /* LLAMA: "output.weight" of its own; GPT2 is always tied */
    float dropout;         /* embeddings, attention weights and residual branches, while training */
} attn_lm_config;

/* One block: norm1, norm2 (GPT2 LayerNorm; LLAMA RMSNorm, bias NULL), the attention, and the FFN's
 * linears: w_in (GPT2 c_fc, LLAMA w1: the activated one), w_up (LLAMA w3, the factor; GPT2 unused),
 * w_out (GPT2 c_proj, LLAMA w2). */
typedef struct attn_lm_block {
    attn_layer_norm_layer norm1, norm2;
    attn_mha_layer attn;
    attn_linear_layer w_in, w_up, w_out;
} attn_lm_block;

typedef struct attn_lm {
    attn_lm_config cfg;    /* with its zeros resolved (ffn_hidden, norm_eps, ...) */
    attn_tensor *wte;      /* (V, E) */
    attn_tensor *wpe;      /* (context, E) GPT2; NULL for LLAMA */
    attn_lm_block *blocks; /* (num_layers), owned */
    attn_layer_norm_layer norm_f;
    attn_tensor *output; /* (V, E): wte, or LLAMA's untied "output.weight" */
} attn_lm;

/* The FFN width cfg gives (its ffn_hidden, or the style's rule); 0 for a config without d_model. */
ATTN_API int64_t attn_lm_ffn_hidden(const attn_lm_config *cfg);
/* Registers the model's parameters in p (rng NULL: no random init) and checks the config
 * (ATTN_ERR_ARG naming the field). attn_lm_free frees the blocks' array; params stay in p. */
ATTN_API attn_status attn_lm_init(attn_lm *m, attn_params *p, const attn_lm_config *cfg, attn_rng *rng);
ATTN_API void attn_lm_free(attn_lm *m);
/* ids (total) holds `batch` sequences packed end to end, sequence b in [cu_seqlens[b],
 * cu_seqlens[b+1]), each of at most cfg.context tokens, ids in [0, V) -> logits (total, V). Each
 * sequence attends causally to itself alone and counts its positions from 0: the model of each
 * sequence run alone. Differentiable in the parameters. */
ATTN_API attn_tensor *attn_lm_forward(attn_ctx *ctx, const attn_lm *m, const int64_t *ids, const int64_t *cu_seqlens,
                                      int64_t batch);
/* The same forward that also gives each layer's attention weights: *weights (may be NULL)
 * receives (layers, H, n, n) for one sequence ids (n), in ctx's arena (the unfused path). */
ATTN_API attn_tensor *attn_lm_forward_weights(attn_ctx *ctx, const attn_lm *m, const int64_t *ids, int64_t n,
                                              attn_tensor **weights);

/* Decoding with a key/value cache: `rows` independent sequences, each up to `capacity` tokens
 * (<= cfg.context). attn_lm_decoder_feed appends counts[r] tokens to row r (tokens holds them row
 * after row, sum counts in all; a count may be 0) and writes the logits of each row's last token
 * so far into logits (rows, V) (a row of no tokens yet: zeros): a prompt is fed whole, then one
 * token per step, each row at its own length. The logits equal the last row of attn_lm_forward
 * over the row's tokens up to float32 rounding. ATTN_ERR_ARG when a row would pass capacity (the
 * decoder is left as it was). Inference only: no grad, no dropout. m must outlive the decoder. */
typedef struct attn_lm_decoder attn_lm_decoder;
ATTN_API attn_lm_decoder *attn_lm_decoder_new(const attn_lm *m, int64_t rows, int64_t capacity);
ATTN_API attn_status attn_lm_decoder_feed(attn_lm_decoder *d, float *logits, const int64_t *tokens,
                                          const int64_t *counts);
ATTN_API int64_t attn_lm_decoder_length(const attn_lm_decoder *d, int64_t row); /* tokens fed to row, or -1 */
ATTN_API attn_status attn_lm_decoder_set_num_threads(attn_lm_decoder *d, int n);
ATTN_API void attn_lm_decoder_free(attn_lm_decoder *d); /* NULL is fine */

/* llama2.c's checkpoints (its run.c reads version 0; its export.py writes 0 and 1), little-endian:
 *   v0: int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (negative: an output of
 *       its own), max_seq_len; float32 tok_embeddings, then per kind over the layers attention_norm,
 *       wq, wk, wv, wo, ffn_norm, w1, w2, w3; norm; two (max_seq_len, head / 2) tables of the rotary
 *       cos and sin (run.c skips them); output.weight when untied
 *   v1: uint32 0x616b3432 ("ak42"), int32 1, the 7 ints (vocab_size positive), uint8 1 when the
 *       output is the embedding, zeros to byte 256; float32 attention_norm x L, ffn_norm x L, norm,
 *       tok_embeddings, wq x L, wk x L, wv x L, wo x L, w1 x L, w2 x L, w3 x L, output when untied
 * Every matrix is (out, in) as PyTorch's Linear, as attn_lm's. attn_lm_save_llama2c takes a LLAMA
 * model of rope_base 10000 and norm_eps 1e-5 (run.c's constants; ATTN_ERR_ARG otherwise); a model of
 * rotated halves has its wq and wk rows reordered into llama2.c's pairs (the same scores).
 * token_order (V entries, NULL: the same ids) puts the model's token token_order[i] at the file's
 * id i, embedding and output alike; it must be a permutation. attn_lm_load_llama2c registers a LLAMA
 * model (pairs rotated, base 10000, eps 1e-5, untied when the file has an output) in p and fills it,
 * with token_order as for saving (file id i is the model's token_order[i]). A header whose sizes
 * do not give the file's exact size, a version other than 0 or 1, or a weight that is NaN or Inf is
 * ATTN_ERR_FORMAT or ATTN_ERR_NUMERIC naming what, before any allocation that the sizes make; on any
 * failure p is left as it was and m holds nothing. The file is written as attn_st_save writes. */
ATTN_API attn_status attn_lm_save_llama2c(const attn_lm *m, const char *path, int version, const int64_t *token_order);
ATTN_API attn_status attn_lm_load_llama2c(attn_lm *m, attn_params *p, const char *path, const int64_t *token_order);

/* llm.c's GPT-2 checkpoint (version 3, float32, as its train_gpt2.c and test_gpt2.c read it),
 * little-endian: int32 x 256 (20240326, 3, max_seq_len, vocab_size, num_layers, num_heads,
 * channels, padded_vocab_size, zeros), then float32 wte (padded_vocab_size, C: the rows past
 * vocab_size zeros), wpe (max_seq_len, C), and over the layers ln1w, ln1b, qkvw (3C, C), qkvb,
 * attprojw (C, C), attprojb, ln2w, ln2b, fcw (4C, C), fcb, fcprojw (C, 4C), fcprojb, then lnfw, lnfb.
 * attn_lm_save_llmc takes a GPT2 model of norm_eps 1e-5 and ffn_hidden 4 d_model (llm.c's; ATTN_ERR_ARG
 * otherwise) and pads the vocabulary to a multiple of 128, as llm.c's train_gpt2.py does;
 * attn_lm_load_llmc registers and fills one (the padded rows read, checked finite and dropped),
 * with the refusals of attn_lm_load_llama2c. attn_lm_save_llmc_state writes test_gpt2.c's debug
 * state for the batch x, y (B, T) whose logits (B, T, V) and mean loss the caller computed, and
 * the model's gradients of that loss (ATTN_ERR_STATE without them): int32 x 256 (20240327, 2, B, T,
 * zeros), int32 x, int32 y, float32 logits, the loss, the gradients laid out as the checkpoint. */
ATTN_API attn_status attn_lm_save_llmc(const attn_lm *m, const char *path);
/* Hugging Face's layouts, a folder of config.json and model.safetensors as GPT2LMHeadModel and
 * LlamaForCausalLM save them (float32; loading takes any dtype attn_st_load does):
 *   GPT2: attn's names under "transformer.", the c_attn, c_proj and c_fc weights transposed (HF's
 *         Conv1D keeps (in, out)); config n_positions, n_embd, n_layer, n_head, n_inner (null: 4
 *         n_embd), layer_norm_epsilon; activation_function gelu_new (or gelu_pytorch_tanh),
 *         scale_attn_weights true, no cross-attention, no scaling by layer, tied. Names without
 *         "transformer." (GPT2Model's) load too; lm_head.weight (tied) and the attn.bias buffers
 *         are passed over;
 *   LLAMA: model.embed_tokens, model.layers.<i>.{input_layernorm, self_attn.{q,k,v,o}_proj,
 *         post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head (untied) weights;
 *         config hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
 *         num_key_value_heads, max_position_embeddings, rms_norm_eps, rope_theta,
 *         tie_word_embeddings; hidden_act silu, no attention or MLP bias, rope_scaling null,
 *         head_dim hidden_size / heads. HF rotates halves: a model of pairs has its q and k rows
 *         reordered into halves on the way out (the same scores), and a loaded model rotates halves.
 * A config field of another value than these is ATTN_ERR_FORMAT naming it; so is a tensor that is
 * missing, of another shape, of an integer or bool dtype, or no parameter, and a config whose sizes the file's tensors do not
 * hold (checked before the model is allocated); a NaN or Inf weight is ATTN_ERR_NUMERIC; on failure
 * p is as it was. attn_lm_save_hf writes both files into dir (which must exist), each as
 * attn_st_save writes. */
ATTN_API attn_status attn_lm_save_hf(const attn_lm *m, const char *dir);
ATTN_API attn_status attn_lm_load_hf(attn_lm *m, attn_params *p, const char *dir);
ATTN_API attn_status attn_lm_load_llmc(attn_lm *m, attn_params *p, const char *path);
ATTN_API attn_status attn_lm_save_llmc_state(const attn_lm *m, const char *path, const int64_t *x, const int64_t *y,
                                             int64_t B, int64_t T, const float *logits, float loss);

/* ======================================================================================
 * Optimizers: the exact update rules of torch.optim (1.13, single-tensor path).
 * ====================================================================================== */

typedef enum attn_optim_kind {
    ATTN_OPTIM_SGD,
    ATTN_OPTIM_ADAM,  /* weight decay added to the gradient (L2) */
    ATTN_OPTIM_ADAMW, /* weight decay applied to the parameter (decoupled) */
} attn_optim_kind;

typedef struct attn_optim_config {
    attn_optim_kind kind;
    float lr;
    float weight_decay;
    float momentum, dampening; /* SGD */
    bool nesterov;             /* SGD */
    float beta1, beta2, eps;   /* Adam, AdamW */
} attn_optim_config;

/* torch.optim's defaults for kind (SGD lr must still be set; AdamW weight_decay 0.01). */
ATTN_API attn_optim_config attn_optim_defaults(attn_optim_kind kind);

typedef struct attn_optim attn_optim;
/* Packs p (attn_params_pack) and allocates the state in one block. */
ATTN_API attn_optim *attn_optim_new(attn_params *p, const attn_optim_config *cfg);
ATTN_API void attn_optim_free(attn_optim *opt);
ATTN_API attn_status attn_optim_step(attn_optim *opt); /* uses the lr set for this step */
/* Threads of the update loop (n <= 0: attn_default_num_threads(), the count it starts with);
 * the update is elementwise, so the result does not depend on it. */
ATTN_API attn_status attn_optim_set_num_threads(attn_optim *opt, int n);
ATTN_API attn_status attn_optim_set_lr(attn_optim *opt, float lr); /* lr >= 0, else refused */
ATTN_API float attn_optim_lr(const attn_optim *opt);               /* the lr set (NaN for NULL) */
ATTN_API int64_t attn_optim_step_count(const attn_optim *opt);     /* steps taken */
/* The state as named tensors ("exp_avg.<param>", "exp_avg_sq.<param>", "momentum_buffer.<param>")
 * for checkpoints; the step count travels as metadata. Pointers into the optimizer, valid until
 * attn_optim_free. */
ATTN_API size_t attn_optim_state_count(const attn_optim *opt);
ATTN_API attn_status attn_optim_state_at(const attn_optim *opt, size_t i, const char **name, float **data,
                                         int64_t *numel);
ATTN_API attn_status attn_optim_set_step_count(attn_optim *opt, int64_t steps); /* >= 0 */

/* torch.nn.utils.clip_grad_norm_: scales every grad by min(1, max_norm / (norm + 1e-6)).
 * Returns the total 2-norm before clipping (NaN/Inf if a gradient is not finite). Runs on the
 * calling thread (one sum in double, in parameter order): a norm that float32 overflows or
 * underflows (torch then gives inf and zeroes the grads, or 0) comes out as torch in float64. */
ATTN_API float attn_clip_grad_norm(attn_params *p, float max_norm);

/* Learning-rate schedules, step counted from 1. */
typedef enum attn_lr_kind {
    ATTN_LR_CONSTANT,      /* base_lr */
    ATTN_LR_LINEAR_WARMUP, /* base_lr * min(1, step / warmup_steps) */
    ATTN_LR_INV_SQRT,      /* d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (Vaswani et al.),
                              times base_lr as a factor (1 for the paper's rule) */
    ATTN_LR_CUSTOM,        /* fn(step, user) */
} attn_lr_kind;

typedef struct attn_lr_schedule {
    attn_lr_kind kind;
    float base_lr;
    int64_t warmup_steps;
    int64_t d_model;
    float (*fn)(int64_t step, void *user);
    void *user;
} attn_lr_schedule;

ATTN_API float attn_lr_at(const attn_lr_schedule *s, int64_t step);

/* ======================================================================================
 * safetensors: read (validated as the spec says) and write (atomically).
 * ====================================================================================== */

typedef enum attn_dtype {
    ATTN_DTYPE_F32,
    ATTN_DTYPE_F64,
    ATTN_DTYPE_I64,
    ATTN_DTYPE_I32,
    ATTN_DTYPE_BOOL,
    ATTN_DTYPE_F16,
    ATTN_DTYPE_BF16,
    ATTN_DTYPE_I16,
    ATTN_DTYPE_I8,
    ATTN_DTYPE_U8,
} attn_dtype;

#define ATTN_ST_MAX_DIMS 8

typedef struct attn_st_tensor {
    const char *name;
    attn_dtype dtype;
    int ndim;
    int64_t shape[ATTN_ST_MAX_DIMS];
    int64_t numel;
    const void *data; /* nbytes bytes inside the file buffer; may be unaligned: memcpy it */
    size_t nbytes;
} attn_st_tensor;

typedef struct attn_st_file attn_st_file;

ATTN_API const char *attn_dtype_name(attn_dtype dt); /* "F32", ... */
ATTN_API size_t attn_dtype_size(attn_dtype dt);
/* Reads and validates a whole file; NULL with a message naming the path and the problem. */
ATTN_API attn_st_file *attn_st_open(const char *path);
/* The same on bytes in memory (copied); name is used in messages. */
ATTN_API attn_st_file *attn_st_parse(const void *bytes, size_t len, const char *name);
/* INVALIDATES every attn_st_tensor (name, data) and metadata string taken from f; tensors
 * loaded with attn_st_load are copies and stay. */
ATTN_API void attn_st_close(attn_st_file *f);
ATTN_API size_t attn_st_count(const attn_st_file *f);
ATTN_API const attn_st_tensor *attn_st_at(const attn_st_file *f, size_t i); /* header order */
ATTN_API const attn_st_tensor *attn_st_find(const attn_st_file *f, const char *name);
ATTN_API const char *attn_st_metadata(const attn_st_file *f, const char *key); /* or NULL */
/* Tensor `name` converted to float32 (from any dtype above), in ctx's arena, or on the heap
 * when ctx is NULL (then free with attn_tensor_free). Error if missing or if it has more than
 * ATTN_MAX_DIMS dims. */
ATTN_API attn_tensor *attn_st_load(const attn_st_file *f, const char *name, attn_ctx *ctx);
/* Tensor `name` without a copy where it can be: a tensor in ctx whose data are the file's own
 * bytes when the tensor is F32, little-endian as this host, and float-aligned in memory (files
 * written by attn and by safetensors' Python pad their header to 8 bytes, so every F32 tensor
 * is); otherwise a copy, as attn_st_load into ctx. Loading then costs the file's size once. The
 * data must not be written (they are f's), and are valid while f is open and until ctx is reset.
 * ctx must not be NULL. */
ATTN_API attn_tensor *attn_st_view(const attn_st_file *f, const char *name, attn_ctx *ctx);
/* Tensor `name` as int64 (from an integer dtype, BOOL, or a float dtype holding integers) into a
 * malloc'd array the caller frees; *numel receives the count. */
ATTN_API int64_t *attn_st_load_i64(const attn_st_file *f, const char *name, int64_t *numel);
/* Copies a tensor's values into t (shapes must match exactly, else the message names both). */
ATTN_API attn_status attn_st_copy_into(const attn_st_file *f, const char *name, attn_tensor *t);

typedef struct attn_st_writer attn_st_writer;
ATTN_API attn_st_writer *attn_st_writer_new(void);
ATTN_API void attn_st_writer_free(attn_st_writer *w);
/* Adds a tensor: data is numel little-endian elements of dtype, copied now. Duplicate names are
 * an error. */
ATTN_API attn_status attn_st_writer_add(attn_st_writer *w, const char *name, attn_dtype dtype, int ndim,
                                        const int64_t *shape, const void *data);
/* The same without a copy: data must stay valid and unchanged until save or free (for large
 * outputs; the bytes are written as they are in memory, little-endian on this host). */
ATTN_API attn_status attn_st_writer_add_ref(attn_st_writer *w, const char *name, attn_dtype dtype, int ndim,
                                            const int64_t *shape, const void *data);
ATTN_API attn_status attn_st_writer_add_tensor(attn_st_writer *w, const char *name, const attn_tensor *t);
ATTN_API attn_status attn_st_writer_set_metadata(attn_st_writer *w, const char *key,
                                                 const char *value); /* replaces an old value */
/* Writes the file as an output file (see "Output files"): a crash never leaves it half-written.
 * A header of more than ATTN_ST_MAX_HEADER bytes, which no safetensors reader takes, is
 * ATTN_ERR_ARG and writes nothing. */
ATTN_API attn_status attn_st_writer_save(attn_st_writer *w, const char *path);
/* The bytes of the header attn_st_writer_save would write now (the JSON with its padding). */
ATTN_API attn_status attn_st_writer_header_bytes(attn_st_writer *w, size_t *bytes);
/* The largest header a safetensors file may have (the reference parser's MAX_HEADER_SIZE): the
 * reader refuses a file that declares more, and the writer never writes more. */
#define ATTN_ST_MAX_HEADER 100000000u

/* PyTorch state_dicts: a safetensors file of named tensors, as safetensors.torch.save_file(
 * module.state_dict()) writes it, or tools/safetensors_convert.py from a torch.save file (torch
 * 1.13 has no safetensors package). The file key of each parameter is prefix + its name (prefix
 * NULL or "": none), so prefix "encoder.layers.0." loads that layer of a whole model's file
 * into a module registered without it. Any dtype the reader knows is converted to float32.
 * strict (torch's load_state_dict(strict=True)): every parameter must have its key, and no key
 * starting with prefix may be left over; not strict: parameters without a key keep their values
 * and other keys are ignored. Always: the shapes must be equal and the values finite. Every
 * problem is named in the message (missing, unexpected and wrong-shape keys, all of them as
 * far as the message holds; the first tensor with NaN or Inf and where), and nothing changes
 * unless the whole file checks out. Modules built with rng NULL skip the random init that a
 * strict load overwrites anyway. Unlike attn_checkpoint_load, no attn metadata is needed. */
ATTN_API attn_status attn_params_load(attn_params *p, const char *path, const char *prefix, bool strict);
/* The same from an open file (e.g. one that also holds inputs); loaded (may be NULL;
 * attn_params_count(p) entries) receives which parameters the file provided. */
ATTN_API attn_status attn_params_load_file(attn_params *p, const attn_st_file *f, const char *prefix, bool strict,
                                           bool *loaded);
/* Every parameter as F32 under prefix + its name, metadata format "pt": a file that
 * safetensors.torch.load_file (or tools/safetensors_convert.py, then torch.load) reads back
 * into the module's load_state_dict. Written atomically as attn_st_writer_save. */
ATTN_API attn_status attn_params_save(const attn_params *p, const char *path, const char *prefix);

/* Checkpoints: every parameter under its name, plus the optimizer state when opt is not NULL.
 * __metadata__ carries format "attn-checkpoint", version, the step count (with opt) and the
 * caller's key/values (meta_kv[2i] = meta_kv[2i+1]; format, version and step are reserved). */
ATTN_API attn_status attn_checkpoint_save(const char *path, const attn_params *p, const attn_optim *opt,
                                          const char *const *meta_kv, int n_meta);
/* The header bytes attn_checkpoint_save would write for the same arguments, measured without
 * copying a tensor or touching a file: a program can refuse, before it trains, a run whose
 * checkpoint would exceed ATTN_ST_MAX_HEADER (a vocabulary of millions of words in metadata). */
ATTN_API attn_status attn_checkpoint_header_bytes(const attn_params *p, const attn_optim *opt,
                                                  const char *const *meta_kv, int n_meta, size_t *bytes);
/* Loads by name into p (and opt when not NULL). strict: every parameter (and, with opt, every
 * optimizer state buffer and the step) must be present, and every tensor in the file must be one
 * of them (without opt, the optimizer state of p's parameters is skipped: a training checkpoint
 * loads strictly for inference); non-strict skips what is missing or unknown. Always: a wrong
 * shape, or a NaN or Inf anywhere in what is loaded, is refused. One error names every missing,
 * unexpected and mis-shaped tensor (ATTN_ERR_FORMAT; ATTN_ERR_SHAPE when only shapes differ;
 * ATTN_ERR_NUMERIC for a non-finite value). Nothing changes unless the whole file checks out. */
ATTN_API attn_status attn_checkpoint_load(const char *path, attn_params *p, attn_optim *opt, bool strict);
/* The same from a file opened once (attn_st_open), so that its metadata and its tensors come
 * from one reading of it, even when another process replaces the file meanwhile. */
ATTN_API attn_status attn_checkpoint_load_file(const attn_st_file *f, attn_params *p, attn_optim *opt, bool strict);
/* Checkpoint averaging: p becomes the mean of its own values and those of the same-named
 * parameters in the n checkpoint files (the same model saved at several points of a run). Every
 * parameter must be in every file with its shape and finite values; nothing changes unless every
 * file checks out. Sums are kept in double. */
ATTN_API attn_status attn_checkpoint_average(attn_params *p, const char *const *paths, int n);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_H */
