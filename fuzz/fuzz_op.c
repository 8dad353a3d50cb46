/* `attn op` on arbitrary inputs: the bytes describe a mechanism, its options and up to 12 named
 * tensors (inputs, masks, lengths, parameters, grad_out) of any dtype, rank and small shape; they
 * are written as a safetensors file and the program's own entry point (cmd_op) runs on it. Every
 * mechanism and every optional tensor is reachable, with shapes that fit and shapes that do not.
 * Invariants: no sanitizer report and no leak; a success writes an output file that reads back
 * with `out`; a failure leaves no output and no temporary file behind.
 *
 * Input layout: [mechanism] [flags] [heads] [scale] then records of
 *   [name] [dtype] [ndim] [dims x ndim] [value mode] [values...]
 * name, dtype and mechanism are indexes into the tables below (mod their size), dims are 0..6,
 * values are small (int8 / 16) or raw bytes depending on the mode byte. */
#include "fuzz_common.h"

#include "../cli/cli.h"

int cmd_op(int argc, char **argv); /* cli/cmd_op.c; the program's COMMANDS row (cli/main.c) declares it there */

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const mechanisms[] = {"sdpa", "mha", "additive", "nw", "linear", "conv_attention"};
static const char *const names[] = {
    "q",
    "k",
    "v",
    "x",
    "attn_mask",
    "key_padding_mask",
    "valid_lens",
    "grad_out",
    "w",
    "in_proj_weight",
    "in_proj_bias",
    "out_proj.weight",
    "out_proj.bias",
    "q_proj_weight",
    "k_proj_weight",
    "v_proj_weight",
    "Wq.weight",
    "Wq.bias",
    "Wk.weight",
    "Wk.bias",
    "Wv.weight",
    "Wv.bias",
    "fc_out.weight",
    "fc_out.bias",
    "W_q.weight",
    "W_k.weight",
    "w_v.weight",
    "to_query.weight",
    "to_query.bias",
    "to_key.weight",
    "to_key.bias",
    "to_value.weight",
    "to_value.bias",
    "conv.weight",
    "conv.bias",
    "norm.weight",
    "norm.bias",
    "attention.in_proj_weight",
    "attention.in_proj_bias",
    "attention.out_proj.weight",
    "attention.out_proj.bias",
    "attention.Wq.weight",
    "attention.Wk.weight",
    "attention.Wv.weight",
    "attention.fc_out.weight",
};
static const attn_dtype dtypes[] = {ATTN_DTYPE_F32,  ATTN_DTYPE_F32, ATTN_DTYPE_F32, ATTN_DTYPE_BOOL,
                                    ATTN_DTYPE_I64,  ATTN_DTYPE_U8,  ATTN_DTYPE_F64, ATTN_DTYPE_F16,
                                    ATTN_DTYPE_BF16, ATTN_DTYPE_I32, ATTN_DTYPE_I8,  ATTN_DTYPE_I16};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

typedef struct reader {
    const uint8_t *p;
    size_t left;
} reader;

static uint8_t next(reader *r)
{
    if (!r->left) return 0;
    r->left--;
    return *r->p++;
}

/* One element of dtype from the stream: small values (b / 16, 0 or 1 for BOOL) or raw bytes. */
static void element(reader *r, attn_dtype dt, bool raw, uint8_t *out)
{
    size_t size = attn_dtype_size(dt);
    if (raw) {
        for (size_t i = 0; i < size; i++) out[i] = next(r);
        return;
    }
    int8_t b = (int8_t)next(r);
    float f = (float)b / 16.0f;
    double d = f;
    int64_t i64 = b;
    switch (dt) {
    case ATTN_DTYPE_F32:
        memcpy(out, &f, 4);
        break;
    case ATTN_DTYPE_F64:
        memcpy(out, &d, 8);
        break;
    case ATTN_DTYPE_F16: {
        uint16_t h = (uint16_t)(b < 0 ? 0xbc00 : 0x3c00);
        memcpy(out, &h, 2);
        break;
    } /* +-1 */
    case ATTN_DTYPE_BF16: {
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t h = (uint16_t)(u >> 16);
        memcpy(out, &h, 2);
        break;
    }
    case ATTN_DTYPE_BOOL:
        out[0] = (uint8_t)(b & 1);
        break;
    default:
        memcpy(out, &i64, size);
        break; /* little-endian: the low bytes */
    }
}

static bool no_temp_files(void)
{
    DIR *d = opendir(fuzz_dir());
    bool clean = true;
    for (struct dirent *e; d && (e = readdir(d));) clean = clean && !strstr(e->d_name, ".tmp");
    if (d) closedir(d);
    return clean;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size};
    const char *mech = mechanisms[next(&r) % COUNT(mechanisms)];
    uint8_t flags = next(&r), heads = next(&r) % 5, scale = next(&r);
    attn_st_writer *w = attn_st_writer_new();
    fuzz_require(w != NULL, "writer");
    for (int t = 0; t < 12 && r.left; t++) {
        const char *name = names[next(&r) % COUNT(names)];
        attn_dtype dt = dtypes[next(&r) % COUNT(dtypes)];
        int ndim = next(&r) % 5;
        int64_t shape[4], numel = 1;
        for (int d = 0; d < ndim; d++) numel *= shape[d] = next(&r) % 7;
        bool raw = next(&r) & 1;
        size_t bytes = (size_t)numel * attn_dtype_size(dt);
        uint8_t *values = calloc(bytes ? bytes : 1, 1);
        fuzz_require(values != NULL, "alloc");
        for (int64_t e = 0; e < numel; e++) element(&r, dt, raw, values + (size_t)e * attn_dtype_size(dt));
        attn_st_writer_add(w, name, dt, ndim, shape, values); /* a duplicate name is skipped */
        free(values);
    }
    char in[128], out[128];
    fuzz_path(in, sizeof in, "in.safetensors");
    fuzz_path(out, sizeof out, "out.safetensors");
    attn_status st = attn_st_writer_save(w, in);
    attn_st_writer_free(w);
    if (st != ATTN_OK) return 0;
    unlink(out);

    char heads_text[8], scale_text[16];
    snprintf(heads_text, sizeof heads_text, "%d", heads);
    snprintf(scale_text, sizeof scale_text, "%g", 0.05 * (scale % 40 + 1));
    const char *argv[24] = {"op", mech, "--in", in, "--out", out, "--threads", "1"};
    int argc = 8;
    static const char *const flag_options[] = {"--causal", "--need-weights", "--no-average-weights", "--batch-first",
                                               "--shen"};
    for (int b = 0; b < 5; b++)
        if (flags & (1 << b)) argv[argc++] = flag_options[b];
    if (flags & 0x20) argv[argc++] = "--impl", argv[argc++] = flags & 0x40 ? "ref" : "fused";
    if (heads) argv[argc++] = "--num-heads", argv[argc++] = heads_text;
    if (scale & 0x80) argv[argc++] = "--scale", argv[argc++] = scale_text;

    int code = cmd_op(argc, (char **)argv);
    fuzz_require(code == CLI_OK || code == CLI_ERR_DATA || code == CLI_ERR_USAGE, "an exit status outside 0-2");
    if (code == CLI_OK) {
        attn_st_file *f = attn_st_open(out);
        fuzz_require(f && attn_st_find(f, "out"), "a success without an output holding `out`");
        attn_st_close(f);
    } else {
        fuzz_require(access(out, F_OK) != 0, "a failed run left its output behind");
    }
    fuzz_require(no_temp_files(), "a temporary file was left behind");
    attn_clear_error();
    return 0;
}
