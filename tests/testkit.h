/* The test kit: checks that set the exit status, closeness with atol + rtol*|ref|, golden files
 * written by tests/golden/make_golden.py, and central finite-difference gradient checks. */
#ifndef ATTN_TESTKIT_H
#define ATTN_TESTKIT_H

#include "attn.h"

#include <stdio.h>

/* Counts a check; on failure prints file:line and the message. */
#define TK_CHECK(cond, ...) tk_check_at((cond), __FILE__, __LINE__, __VA_ARGS__)
void tk_check_at(bool ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A call that must succeed: prints attn_last_error() when it did not. */
#define TK_OK(expr) tk_check_at((expr) == ATTN_OK, __FILE__, __LINE__, "%s failed: %s", #expr, attn_last_error())
#define TK_NOT_NULL(ptr) tk_check_at((ptr) != NULL, __FILE__, __LINE__, "%s is NULL: %s", #ptr, attn_last_error())

/* Prints "<test>: N checks passed, N failed" and returns the process exit status. */
int tk_finish(const char *test_name);

/* |actual - expected| <= atol + rtol * |expected| everywhere (NaN never passes unless both NaN).
 * Prints the worst element on failure. Counts as one check. */
bool tk_close(const char *what, const float *actual, const float *expected, int64_t n, float atol,
              float rtol);

/* Golden files: tests/golden/<name>.safetensors. */
attn_st_file *tk_golden(const char *name);
/* A golden tensor as float32 on the heap (NULL + failed check when missing). */
attn_tensor *tk_golden_tensor(attn_st_file *f, const char *name);
/* Compares actual (n floats) with the golden tensor `name`: sizes must match. */
bool tk_golden_close(attn_st_file *f, const char *name, const float *actual, int64_t n, float atol,
                     float rtol);

/* Finite differences. forward builds the output from the inputs in ctx (grad on, training as
 * the ctx says); the check uses loss = sum(out * r) for a fixed random r, and compares the
 * analytic gradient of every input with requires_grad against the central difference with step
 * eps, on at most max_elems elements per input. The ctx RNG is reseeded before every forward, so
 * dropout masks repeat. */
typedef attn_tensor *(*tk_forward_fn)(attn_ctx *ctx, attn_tensor **inputs, void *user);
bool tk_gradcheck(const char *what, tk_forward_fn forward, attn_tensor **inputs, int n_inputs,
                  void *user, float eps, float atol, float rtol);
/* Threads of the ctx tk_gradcheck makes (0, the start: attn_default_num_threads()). */
void tk_gradcheck_set_threads(int n);

/* A heap tensor filled with N(0, 1) from seed, requires_grad set. */
attn_tensor *tk_randn(uint64_t seed, int ndim, const int64_t *shape);

/* ---- the program and its text ---- */

/* Runs a shell command (printf format); its exit status, or -1 when it did not exit. */
int tk_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A whole file, NUL-terminated, malloc'd; NULL when it cannot be read. */
char *tk_read_text(const char *path);
/* Whether actual reads as expected: the same characters, except that a number may differ from
 * the expected one by 1.5 units of the last digit expected shows (a number without decimals
 * must be equal). On a mismatch prints `what` and the first line that differs. One check. */
bool tk_same_text(const char *what, const char *expected, const char *actual);
/* The lines of the fenced block (```...```) that follows the line `marker` in doc, malloc'd;
 * NULL when there is none. */
char *tk_fenced_block(const char *doc, const char *marker);
/* The block of `attn tour` output for one step: from its "== <step>  " line to the next step,
 * without the blank line between; malloc'd, NULL when the step is not in out. */
char *tk_tour_step_output(const char *out, const char *step);
/* The docs' record of a step (doc_name holds doc): the block after "<!-- tour <step> -->" starts
 * with "$ attn tour <step>" and reads as the step's part of out (tk_same_text). */
void tk_tour_doc_check(const char *doc_name, const char *doc, const char *step, const char *out);

#endif
