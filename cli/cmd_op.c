/* attn op NAME --in IN.safetensors --out OUT.safetensors: runs one attention mechanism on tensors
 * read from a file and writes its outputs (and gradients, when grad_out is given), so any result
 * can be compared with PyTorch on identical inputs. */
#include "cli.h"
#include "op_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(void)
{
    printf(
        "usage: attn op NAME --in IN.safetensors --out OUT.safetensors [options]\n\n"
        "Runs one mechanism on named tensors from IN and writes the results to OUT.\n\n"
        "NAME     inputs                         parameters (PyTorch state_dict names)\n"
        "  sdpa   q (B,H,Lq,D) or (B,Lq,D), k, v   -\n"
        "  mha    q, k, v: (L,B,E), or (B,L,E)    in_proj_weight, in_proj_bias, out_proj.weight,\n"
        "         with --batch-first             out_proj.bias (or q_proj_weight, k_proj_weight,\n"
        "                                        v_proj_weight when kdim/vdim differ; or seed\n"
        "                                        002's Wq.*, Wk.*, Wv.*, fc_out.*)\n"
        "  additive q (B,Lq,qs), k (B,Lk,ks), v  W_q.weight, W_k.weight, w_v.weight\n"
        "  nw     q (n), k (n,m), v (n,m)        w (optional: absent = fixed Gaussian kernel)\n"
        "  linear x (B,L,E)                      to_query.*, to_key.*, to_value.*\n"
        "  conv_attention x (B,L,E)              attention.* (as mha), conv.weight, conv.bias,\n"
        "                                        norm.weight, norm.bias\n\n"
        "masks (optional inputs):\n"
        "  attn_mask         BOOL: true = may attend, or F32: added to the scores;\n"
        "                    broadcastable to (B,H,Lq,Lk) (sdpa, mha, conv_attention)\n"
        "  key_padding_mask  BOOL (B,Lk): true = padding (PyTorch's polarity) (sdpa, mha, linear,\n"
        "                    conv_attention)\n"
        "  valid_lens        I64 (B) or (B,Lq): keys j >= len masked (sdpa, mha, additive)\n"
        "  grad_out          the upstream gradient of out: adds dq, dk, dv (dx) and\n"
        "                    grad.<param name> to OUT\n\n"
        "options:\n"
        "  --causal              top-left aligned causal mask (sdpa, mha, conv_attention)\n"
        "  --scale S             score scale (sdpa; default 1/sqrt(D))\n"
        "  --num-heads N         heads (mha, conv_attention; required)\n"
        "  --need-weights        also write `weights`\n"
        "  --no-average-weights  per-head weights (B,H,Lq,Lk) instead of the mean (mha)\n"
        "  --batch-first         mha inputs are (B,L,E) (default: PyTorch's (L,B,E))\n"
        "  --shen                linear: Shen et al.'s variant (softmax of Q over features)\n"
        "  --impl ref|fused      SDPA kernel (default fused; weights force ref)\n"
        "  --threads N           threads (default: OpenMP's)\n\n"
        "outputs: out, weights (when asked), dq dk dv or dx, grad.<param name>\n"
        "Fully masked query rows give 0 here (PyTorch 1.13 gives NaN).\n");
}

static int parse_args(int argc, char **argv, op_args *a)
{
    memset(a, 0, sizeof *a);
    a->average_weights = true;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            help();
            return -1;
        } else if (!strcmp(o, "--causal")) a->causal = true;
        else if (!strcmp(o, "--need-weights")) a->need_weights = true;
        else if (!strcmp(o, "--no-average-weights")) a->average_weights = false;
        else if (!strcmp(o, "--batch-first")) a->batch_first = true;
        else if (!strcmp(o, "--shen")) a->shen = true;
        else if (!strcmp(o, "--in") || !strcmp(o, "--out") || !strcmp(o, "--impl")) {
            if (!(v = cli_value("op", argc, argv, &i))) return CLI_ERR_USAGE;
            if (!strcmp(o, "--in")) a->in_path = v;
            else if (!strcmp(o, "--out")) a->out_path = v;
            else if (!strcmp(v, "ref")) a->impl = ATTN_SDPA_REF;
            else if (!strcmp(v, "fused")) a->impl = ATTN_SDPA_FUSED;
            else return cli_fail(CLI_ERR_USAGE, "op", "--impl expects ref or fused, got \"%s\"", v);
        } else if (!strcmp(o, "--scale")) {
            double s;
            if (!(v = cli_value("op", argc, argv, &i)) || !cli_parse_float("op", o, v, 1e-30, 1e30, &s))
                return CLI_ERR_USAGE;
            a->scale = (float)s;
        } else if (!strcmp(o, "--num-heads") || !strcmp(o, "--threads")) {
            long n;
            if (!(v = cli_value("op", argc, argv, &i)) || !cli_parse_long("op", o, v, 1, 4096, &n))
                return CLI_ERR_USAGE;
            if (!strcmp(o, "--threads")) cli_set_threads((int)n);
            else a->num_heads = n;
        } else if (o[0] == '-') {
            return cli_fail(CLI_ERR_USAGE, "op", "unknown option \"%s\" (see attn op --help)", o);
        } else if (!a->name) {
            a->name = o;
        } else {
            return cli_fail(CLI_ERR_USAGE, "op", "unexpected argument \"%s\"", o);
        }
    }
    if (!a->name) return cli_fail(CLI_ERR_USAGE, "op", "missing NAME (see attn op --help)");
    if (!a->in_path || !a->out_path)
        return cli_fail(CLI_ERR_USAGE, "op", "--in and --out are required (see attn op --help)");
    return CLI_OK;
}

int cmd_op(int argc, char **argv)
{
    op_args a;
    int code = parse_args(argc, argv, &a);
    if (code != CLI_OK) return code < 0 ? CLI_OK : code;
    const op_mechanism *mech = op_find(a.name);
    if (!mech)
        return cli_fail(CLI_ERR_USAGE, "op",
                        "unknown mechanism \"%s\"; expected sdpa, mha, additive, nw, linear or "
                        "conv_attention",
                        a.name);
    op_run run = {0};
    run.args = &a;
    run.file = attn_st_open(a.in_path);
    run.ctx = cli_ctx_new(0);
    run.params = attn_params_new();
    run.writer = attn_st_writer_new();
    code = CLI_ERR_DATA;
    if (run.file && run.ctx && run.params && run.writer) {
        attn_ctx_set_training(run.ctx, false);
        code = op_execute(&run, mech);
    } else {
        cli_fail(CLI_ERR_DATA, "op", "%s", attn_last_error());
    }
    if (code == CLI_OK && attn_st_writer_save(run.writer, a.out_path) != ATTN_OK)
        code = cli_fail(CLI_ERR_DATA, "op", "%s", attn_last_error());
    op_run_free(&run);
    return code;
}
