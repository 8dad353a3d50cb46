/* The test kit: checks that set the exit status, closeness with atol + rtol*|ref|, golden files
 * written by tests/golden/make_golden.py, and central finite-difference gradient checks. */
#ifndef ATTN_TESTKIT_H
#define ATTN_TESTKIT_H

#include "attn.h"
/* the libraries beside the core, when this build has them (CMakeLists.txt) */
#ifdef ATTN_TEST_DATA
#include "attn_data.h"
#endif
#ifdef ATTN_TEST_PLOT
#include "attn_plot.h"
#endif

#include <stdio.h>

/* Counts a check; on failure prints file:line and the message. */
#define TK_CHECK(cond, ...) tk_check_at((cond), __FILE__, __LINE__, __VA_ARGS__)
void tk_check_at(bool ok, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* A call that must succeed: prints attn_last_error() when it did not. */
#define TK_OK(expr) tk_check_at((expr) == ATTN_OK, __FILE__, __LINE__, "%s failed: %s", #expr, attn_last_error())
#define TK_NOT_NULL(ptr) tk_check_at((ptr) != NULL, __FILE__, __LINE__, "%s is NULL: %s", #ptr, attn_last_error())

/* Prints "<test>: N checks passed, N failed" (after the worst margin of the scaled comparisons,
 * when the test made any) and returns the process exit status. */
int tk_finish(const char *test_name);

/* |actual - expected| <= atol + rtol * |expected| everywhere (NaN never passes unless both NaN).
 * Prints the worst element on failure. Counts as one check. */
bool tk_close(const char *what, const float *actual, const float *expected, int64_t n, float atol, float rtol);

/* ---- golden comparisons, scaled by the tensor ----
 * A golden tensor ref (torch's result) and ours agree when, element by element,
 *     |got_i - ref_i| <= rtol * |ref_i| + atol * max_j |ref_j|.
 * The bound follows from the float32 error of the computation, never from one host's results.
 * With u = 2^-24 (float32's unit roundoff), a sum of K terms added in any order is off by at most
 * K * u * sum_k |term_k| (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., 3.1);
 * rounding errors that behave as independent random variables add up to at most
 * lambda * sqrt(K) * u * sum_k |term_k| with probability at least 1 - 2K exp(-lambda^2 (1-u)^2 / 2)
 * (Higham and Mary, A new approach to probabilistic rounding error analysis, SIAM J. Sci. Comput.
 * 41 (2019)). Through a chain of such sums (a model's forward, backward and the sums of a weight
 * gradient), K becomes n, the number of roundings on the longest path from the inputs to the
 * result. Where terms cancel, sum |term_k| is far above |ref_i| (an element of 0.014 made of terms
 * of total size 9.9), so it is bounded by cond times the tensor's largest |ref_j|: the atol term.
 * rtol covers an element's own few roundings (function values, the last products). Two float32
 * sides (the golden is torch's own float32) double both; a float64 golden rounded to float32
 * leaves one side. Each test states its n, cond and sides beside its bound. */
typedef struct tk_tol {
    double rtol;  /* times |ref_i| */
    double atol;  /* times the scale */
    double scale; /* 0: max_j |ref_j|, the tensor's largest value; else this absolute scale, for a
                     result whose terms are not the size of its value (the test says why) */
} tk_tol;

/* float32's unit roundoff, 2^-24 */
#define TK_U (1.0 / 16777216.0)
/* lambda of the probabilistic bound: at n = 2000, 2n exp(-lambda^2 (1-u)^2 / 2) < 1e-10 */
#define TK_LAMBDA 8.0
/* The error every scaled comparison must still catch: this fraction of the scale (the tensor's
 * largest |value|) added to the one element whose bound is loosest, against the sign of the error
 * already there. Every comparison checks that too (one more check): a bound that would let it
 * through fails the test. */
#define TK_PLANTED 2e-4

/* The bound of a float32 computation compared on `sides` sides (1 or 2, above), whose results are
 * reached through at most n roundings on any path (a K-term sum in an unknown order counts K),
 * with sum |term| <= cond * scale, and `ulps` roundings of an element's own:
 *     rtol = sides * ulps * u,   atol = sides * min(n, TK_LAMBDA * sqrt(n)) * cond * u
 * (n: the worst case, always true; lambda * sqrt(n): the probabilistic bound, the smaller from
 * n = 64 on). scale 0: the tensor's largest |ref_j|. */
tk_tol tk_tol_of(double sides, double n, double cond, double ulps);

/* max_i |v_i| over the finite values of v (n of them); 0 when there are none. */
double tk_max_abs(const float *v, int64_t n);

/* How many of got's n values lie outside the bound around ref (counts no check). */
int64_t tk_scaled_outside(const float *got, const float *ref, int64_t n, tk_tol tol);

/* got against ref (n values) with the bound above: one check, plus one for the planted error.
 * Prints the worst element on failure. Every call records its margin (the largest
 * |got_i - ref_i| / bound_i: 1 is at the bound); tk_finish prints the worst one, and with
 * ATTN_TEST_MARGINS=1 in the environment every comparison prints its own. */
bool tk_close_scaled(const char *what, const float *got, const float *ref, int64_t n, tk_tol tol);
/* The same against the golden tensor `name` of f (sizes must match). */
bool tk_golden_close_scaled(attn_st_file *f, const char *name, const float *got, int64_t n, tk_tol tol);

/* The bounds of golden files that two tests read (test_cli_op too): the derivations are in
 * test_golden_attention.c (attn_sdpa_*; attn_mha_* and cli_mha_*) and
 * test_golden_mechanisms.c (mech_*). */
#define TK_TOL_SDPA tk_tol_of(2, 64, 4, 8)
#define TK_TOL_MHA tk_tol_of(2, 160, 4, 8)
#define TK_TOL_MECH tk_tol_of(2, 160, 4, 8)
/* A key projection's bias gradient is 0 in exact arithmetic wherever a softmax over the keys
 * ignores a shift of them all (dot-product attention: a bias b_k adds q . b_k to a whole row of
 * scores; EfficientAttention: the softmax over positions ignores a shift of a key channel), so
 * both goldens and ours are rounding noise of a sum over positions of the key rows' gradients dK.
 * The weight gradient beside it sums the same rows times inputs x ~ N(0, 1), so its largest value
 * is the size of those terms: the scale of the bias gradient's bound. For golden tensor `name`
 * ("grad.<...>to_key.bias" or "grad.<...>Wk.bias", the seed's names) it returns that weight
 * gradient's max |value| in g; 0 for any other name (the tensor's own max is the scale). */
double tk_key_bias_scale(attn_st_file *g, const char *name);

/* Golden files: tests/golden/<name>.safetensors. */
attn_st_file *tk_golden(const char *name);
/* A golden tensor as float32 on the heap (NULL + failed check when missing). */
attn_tensor *tk_golden_tensor(attn_st_file *f, const char *name);
/* Compares actual (n floats) with the golden tensor `name`: sizes must match. */
bool tk_golden_close(attn_st_file *f, const char *name, const float *actual, int64_t n, float atol, float rtol);

/* Finite differences. forward builds the output from the inputs in ctx (grad on, training as
 * the ctx says); the check uses loss = sum(out * r) for a fixed random r, and compares the
 * analytic gradient of every input with requires_grad against the central difference with step
 * eps, on every element of an input of up to 64 elements, else on every (numel / 64)-th. The
 * ctx RNG is reseeded before every forward, so dropout masks repeat. */
typedef attn_tensor *(*tk_forward_fn)(attn_ctx *ctx, attn_tensor **inputs, void *user);
bool tk_gradcheck(const char *what, tk_forward_fn forward, attn_tensor **inputs, int n_inputs, void *user, float eps,
                  float atol, float rtol);
/* Threads of the ctx tk_gradcheck makes (0, the start: attn_default_num_threads()). */
void tk_gradcheck_set_threads(int n);

/* A heap tensor filled with N(0, 1) from seed, requires_grad set. */
attn_tensor *tk_randn(uint64_t seed, int ndim, const int64_t *shape);

/* ---- the program and its text ---- */

/* Runs a shell command (printf format); its exit status, or -1 when it did not exit. */
int tk_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A whole file, NUL-terminated, malloc'd; NULL when it cannot be read. */
char *tk_read_text(const char *path);
/* The whole file's bytes (malloc'd, NUL after them) and their count in *n (may be NULL); NULL if
 * it cannot be read */
char *tk_read_bytes(const char *path, size_t *n);
/* path replaced by data (n bytes); false on any failure */
bool tk_write_bytes(const char *path, const void *data, size_t n);
/* A few ulps: how near a rounding boundary a value must lie for its printing to differ by a
 * last digit between two runs of this program on two hosts (capped by the value's bound). Those
 * runs differ by float32 rounding of the same computation: the values attn tour prints differ
 * between every ISA level, oneDNN capped at AVX2 and one thread by at most 13 ulps (000/demo's
 * attention weights under ONEDNN_MAX_CPU_ISA=AVX2); 64 leaves a factor of 5 and is still ~2% of a
 * half unit of the 4th decimal of 0.2 (3,300 ulps): a value farther from a boundary prints the
 * same everywhere. */
#define TK_PRINTED_ULPS 64

/* Values a printed number may stand for, with the bound of their computation (tol.scale 0: the
 * largest |value| of the n), capped at `ulps` ulps of each value when ulps > 0. */
typedef struct tk_values {
    const float *v;
    int64_t n;
    tk_tol tol;
    double ulps;
} tk_values;

/* Whether a number printed with `decimals` decimals may read `a` on one host and `b` on another:
 * they are one unit of the last digit apart, and a value of near (n_near sets) that prints as one
 * of them lies within its bound of the rounding boundary between them, so that its float32 error
 * can carry it across; anywhere else the printing is determined and must be the same. Where it
 * returns true, prints a note naming the value and its distance from the boundary in ulps (of
 * float32). */
bool tk_printed_near_boundary(double a, double b, int decimals, const tk_values *near, int n_near);

/* Whether actual reads as expected: the same characters, except that a number may read one unit
 * of its last digit apart where tk_printed_near_boundary allows it for the values in near (none:
 * every number as printed; numbers equal in value, such as 0.0000 and -0.0000, are equal). On a
 * mismatch prints `what` and the first line that differs. One check. */
bool tk_same_text(const char *what, const char *expected, const char *actual, const tk_values *near, int n_near);
/* The lines of the fenced block (```...```) that follows the line `marker` in doc, malloc'd;
 * NULL when there is none. */
char *tk_fenced_block(const char *doc, const char *marker);
/* The block of `attn tour` output for one step: from its "== <step>  " line to the next step,
 * without the blank line between; malloc'd, NULL when the step is not in out. */
char *tk_tour_step_output(const char *out, const char *step);
/* The docs' record of a step (doc_name holds doc): the block after "<!-- tour <step> -->" starts
 * with "$ attn tour <step>" and reads as the step's part of out (tk_same_text), a last digit
 * apart only where a value of saved (the step's `attn tour --save` file of this run; NULL: none)
 * lies within TK_PRINTED_ULPS ulps, and within tol of its computation, of the rounding boundary
 * (the docs were printed by this program on another host, whose value may lie across it). */
void tk_tour_doc_check(const char *doc_name, const char *doc, const char *step, const char *out, attn_st_file *saved,
                       tk_tol tol);

/* A file's little-endian int32 at b + at, and the same written (an int32 or a float32's bits),
 * whatever the host's byte order */
static inline int32_t tk_le32_at(const unsigned char *b, long at)
{
    return (int32_t)((uint32_t)b[at] | (uint32_t)b[at + 1] << 8 | (uint32_t)b[at + 2] << 16 |
                     (uint32_t)b[at + 3] << 24);
}
static inline void tk_put_le32(unsigned char *b, long at, uint32_t v)
{
    for (int k = 0; k < 4; k++) b[at + k] = (unsigned char)(v >> 8 * k);
}

#endif
