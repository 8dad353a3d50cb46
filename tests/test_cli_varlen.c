/* `attn op sdpa` on packed sequences, end to end: an input file with q (total_q, H, D), k and v
 * (total_k, H_kv, .), grad_out and the offsets cu_seqlens_q (I32, as FlashAttention takes them)
 * and cu_seqlens_k (I64) runs attn_sdpa_varlen with --causal (bottom-right per sequence),
 * --enable-gqa, --window, --alibi and --softcap; out, dq, dk, dv are compared with the library's
 * call on the same inputs and options (the same code on one thread: within the float32 bound of
 * two sides, tk_tol_of(2, D + Lk + Dv + Lq + 16, 4, 8), as test_attention_varlen). Refusals exit 1
 * with a message naming the problem: one offsets tensor without the other, float offsets, a mask
 * beside them, --need-weights, and shapes the library refuses (its message). Temporary files live in a mkdtemp
 * directory, removed at the end. */
#define _POSIX_C_SOURCE 200809L
#include "testkit.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmp_dir[] = "/tmp/attn_cli_varlen_XXXXXX";
static const char *attn_bin;

enum {
    B = 3,
    H = 4,
    HKV = 2,
    D = 8,
    DV = 6,
    TQ = 23,
    TK = 30
};
static const int32_t cu_q32[B + 1] = {0, 7, 7, 23};
static const int64_t cu_q[B + 1] = {0, 7, 7, 23}, cu_k[B + 1] = {0, 9, 12, 30};

/* Writes IN with q, k, v, grad_out and the tensors `extra` asks for; false on failure */
static bool write_input(const char *path, attn_tensor *const t[4], bool with_q, bool with_k, bool float_q, bool lens)
{
    attn_st_writer *w = attn_st_writer_new();
    static const char *const names[4] = {"q", "k", "v", "grad_out"};
    bool ok = w != NULL;
    for (int i = 0; ok && i < 4; i++) ok = attn_st_writer_add_tensor(w, names[i], t[i]) == ATTN_OK;
    const float cu_f[B + 1] = {0, 7, 7, 23};
    const int64_t n = B + 1, three = B, lens_v[B] = {7, 0, 16};
    if (ok && with_q)
        ok = float_q ? attn_st_writer_add(w, "cu_seqlens_q", ATTN_DTYPE_F32, 1, &n, cu_f) == ATTN_OK
                     : attn_st_writer_add(w, "cu_seqlens_q", ATTN_DTYPE_I32, 1, &n, cu_q32) == ATTN_OK;
    if (ok && with_k) ok = attn_st_writer_add(w, "cu_seqlens_k", ATTN_DTYPE_I64, 1, &n, cu_k) == ATTN_OK;
    if (ok && lens) ok = attn_st_writer_add(w, "valid_lens", ATTN_DTYPE_I64, 1, &three, lens_v) == ATTN_OK;
    ok = ok && attn_st_writer_save(w, path) == ATTN_OK;
    attn_st_writer_free(w);
    return ok;
}

static void end_to_end(attn_tensor *const t[4])
{
    char in[128], out[128];
    snprintf(in, sizeof in, "%s/in.safetensors", tmp_dir), snprintf(out, sizeof out, "%s/out.safetensors", tmp_dir);
    TK_CHECK(write_input(in, t, true, true, false, false), "input file written: %s", attn_last_error());
    int rc = tk_run("%s op sdpa --in %s --out %s --causal --enable-gqa --window 5,-1 --alibi --softcap 3 --threads 1",
                    attn_bin, in, out);
    TK_CHECK(rc == 0, "attn op sdpa on packed sequences exits 0 (got %d)", rc);
    attn_st_file *f = rc == 0 ? attn_st_open(out) : NULL;
    if (!f) return;
    /* the library's call with the same options */
    float slopes[H];
    TK_OK(attn_alibi_slopes(slopes, H));
    attn_varlen_opts o = {.causal = true,
                          .features.window = {true, 5, -1},
                          .enable_gqa = true,
                          .features.alibi_slopes = slopes,
                          .features.alibi_ndim = 1,
                          .features.alibi_shape = {H},
                          .features.softcap = 3.0f};
    attn_ctx *ctx = attn_ctx_new(1);
    TK_OK(attn_ctx_set_num_threads(ctx, 1));
    for (int i = 0; i < 3; i++) attn_tensor_zero_grad(t[i]);
    attn_tensor *want = attn_sdpa_varlen(ctx, t[0], t[1], t[2], cu_q, cu_k, B, &o);
    TK_CHECK(want && attn_backward_from(ctx, want, t[3]->data) == ATTN_OK, "library call: %s", attn_last_error());
    const tk_tol tol = tk_tol_of(2, D + 18 + DV + 16 + 16, 4, 8); /* the longest sequence: Lq 16, Lk 18 */
    if (want) {
        const char *names[4] = {"out", "dq", "dk", "dv"};
        const float *ref[4] = {want->data, t[0]->grad, t[1]->grad, t[2]->grad};
        for (int i = 0; i < 4; i++) {
            attn_tensor *got = tk_golden_tensor(f, names[i]);
            const int64_t n = i == 0 ? want->numel : t[i - 1]->numel;
            TK_CHECK(got && got->numel == n, "%s written with %lld values", names[i], (long long)n);
            if (got && got->numel == n) tk_close_scaled(names[i], got->data, ref[i], n, tol);
            attn_tensor_free(got);
        }
        const attn_st_tensor *o_shape = attn_st_find(f, "out");
        TK_CHECK(o_shape && o_shape->ndim == 3 && o_shape->shape[0] == TQ && o_shape->shape[1] == H &&
                     o_shape->shape[2] == DV,
                 "out is (total_q, H, Dv) = (%d, %d, %d)", TQ, H, DV);
    }
    attn_ctx_free(ctx);
    attn_st_close(f);
    unlink(out);
}

/* IN as described runs `attn op sdpa ARGS` to exit 1 with `needle` on stderr, writing nothing */
static void refused(attn_tensor *const t[4], bool with_q, bool with_k, bool float_q, bool lens, const char *args,
                    const char *needle, const char *what)
{
    char in[128], out[128], err[128];
    snprintf(in, sizeof in, "%s/bad.safetensors", tmp_dir),
        snprintf(out, sizeof out, "%s/bad_out.safetensors", tmp_dir);
    snprintf(err, sizeof err, "%s/stderr.txt", tmp_dir);
    TK_CHECK(write_input(in, t, with_q, with_k, float_q, lens), "%s: input written", what);
    int rc = tk_run("%s op sdpa --in %s --out %s %s 2> %s", attn_bin, in, out, args, err);
    char *text = tk_read_text(err);
    TK_CHECK(rc == 1 && text && strstr(text, needle), "%s: exit 1 (got %d) naming \"%s\" (stderr: %s)", what, rc,
             needle, text ? text : "(none)");
    TK_CHECK(access(out, F_OK) != 0, "%s: nothing written", what);
    free(text);
    unlink(in), unlink(err), unlink(out);
}

int main(void)
{
    attn_bin = getenv("ATTN_BIN");
    TK_CHECK(attn_bin && *attn_bin, "ATTN_BIN is not set: it names the attn program (CMake sets it for every test)");
    if (!attn_bin || !*attn_bin || !mkdtemp(tmp_dir)) return tk_finish("test_cli_varlen");
    attn_tensor *t[4] = {tk_randn(1, 3, (int64_t[]){TQ, H, D}), tk_randn(2, 3, (int64_t[]){TK, HKV, D}),
                         tk_randn(3, 3, (int64_t[]){TK, HKV, DV}), tk_randn(4, 3, (int64_t[]){TQ, H, DV})};
    end_to_end(t);
    refused(t, true, false, false, false, "--enable-gqa", "not cu_seqlens_k", "cu_seqlens_q alone");
    refused(t, true, true, true, false, "--enable-gqa", "cu_seqlens_q is F32", "float offsets");
    refused(t, true, true, false, true, "--enable-gqa", "take no attn_mask, key_padding_mask or valid_lens",
            "valid_lens beside the offsets");
    refused(t, true, true, false, false, "--enable-gqa --need-weights", "take no --need-weights", "--need-weights");
    refused(t, true, true, false, false, "", "k (total_k, H, D)", "fewer key heads without --enable-gqa");
    for (int i = 0; i < 4; i++) attn_tensor_free(t[i]);
    rmdir(tmp_dir);
    return tk_finish("test_cli_varlen");
}
