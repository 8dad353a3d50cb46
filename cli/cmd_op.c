/* attn op NAME --in IN.safetensors --out OUT.safetensors: runs one attention mechanism on tensors
 * read from a file and writes its outputs (and gradients, when grad_out is given), so any result
 * can be compared with PyTorch on identical inputs. */
#include "op_io.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const impl_names[] = {"auto", "fused", "ref", NULL}; /* attn_sdpa_impl order */
static const char *const rope_layouts[] = {"halves", "interleaved", NULL};

#define O(kind, field) CLI_OPT_AT(op_args, kind, field)
static const cli_option options[] = {
    {"--in", "IN.safetensors", O(CLI_IN_FILE, in_path), 0, 0, NULL, NULL,
     "the inputs, parameters and masks (required)"},
    {"--out", "OUT.safetensors", O(CLI_OUT_FILE, out_path), 0, 0, NULL, NULL, "the results (required)"},
    {"--causal", NULL, O(CLI_FLAG, causal), 0, 0, NULL, NULL,
     "top-left aligned causal mask (sdpa, mha, conv_attention)"},
    {"--scale", "S", O(CLI_FLOAT, scale), 1e-30, 1e30, NULL, NULL, "score scale (sdpa; default 1/sqrt(D))"},
    {"--enable-gqa", NULL, O(CLI_FLAG, enable_gqa), 0, 0, NULL, NULL,
     "sdpa: k and v may have fewer heads, dividing q's (PyTorch's enable_gqa)"},
    CLI_FEATURE_OPTIONS(op_args, features, "sdpa, mha", " (a tensor alibi_slopes, (H) or (B,H), in IN gives others)"),
    {"--rope-base", "B", O(CLI_FLOAT, rope_base), 1, 1e9, NULL, NULL,
     "sdpa, mha: rotary positions on q and k, base B > 1 (positions 0, 1, ... of each sequence)"},
    {"--rope-layout", NULL, O(CLI_CHOICE, rope_layout), 0, 0, rope_layouts, "halves",
     "with --rope-base: the pairs turned, (i, i + d/2) as GPT-NeoX and Llama or (2i, 2i + 1) as GPT-J"},
    {"--rope-dim", "N", O(CLI_LONG, rope_dim), 2, ATTN_ROPE_MAX_DIM, NULL, NULL,
     "with --rope-base: rotate the first N dims of each head (even; default all)"},
    {"--num-heads", "N", O(CLI_LONG, num_heads), 1, 4096, NULL, NULL, "heads (mha, conv_attention; required there)"},
    {"--need-weights", NULL, O(CLI_FLAG, need_weights), 0, 0, NULL, NULL, "also write `weights`"},
    {"--no-average-weights", NULL, O(CLI_FLAG, per_head_weights), 0, 0, NULL, NULL,
     "per-head weights (B,H,Lq,Lk) instead of the mean (mha, conv_attention)"},
    {"--batch-first", NULL, O(CLI_FLAG, batch_first), 0, 0, NULL, NULL,
     "mha inputs are (B,L,E) (default: PyTorch's (L,B,E))"},
    {"--shen", NULL, O(CLI_FLAG, shen), 0, 0, NULL, NULL, "linear: Shen et al.'s variant (softmax of Q over features)"},
    {"--impl", NULL, O(CLI_CHOICE, impl), 0, 0, impl_names, "auto",
     "SDPA kernel (auto: fused unless weights are asked)"},
    {"--threads", "N", O(CLI_LONG, threads), 1, 1024, NULL, NULL, "threads (default: all cores)"},
    CLI_PRECISION_OPTION(op_args, matmul_precision),
};
#undef O

const cli_spec op_spec = {
    .cmd = "op",
    .synopsis = "NAME --in IN.safetensors --out OUT.safetensors [options]",
    .about = "Runs one mechanism on named tensors from IN and writes the results to OUT, so any\n"
             "result can be compared with PyTorch on identical inputs.",
    .actions = "  sdpa              q (B,H,Lq,D) or (B,Lq,D), k, v; no parameters; or packed sequences:\n"
               "                    q (total_q,H,D), k, v (total_k,H_kv,.) with cu_seqlens_q, cu_seqlens_k\n"
               "  mha               q, k, v: (L,B,E), (B,L,E) with --batch-first, or (L,E) unbatched;\n"
               "                    in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias (or\n"
               "                    q_proj_weight, k_proj_weight, v_proj_weight when kdim/vdim differ or\n"
               "                    for grouped-query attention (k_proj_weight, v_proj_weight with\n"
               "                    H_kv E/H rows); or seed 002's Wq.*, Wk.*, Wv.*, fc_out.*)\n"
               "  additive          q (B,Lq,qs), k (B,Lk,ks), v; W_q.weight, W_k.weight, w_v.weight\n"
               "  nw                q (n), k (n,m), v (n,m); w (optional: absent = fixed Gaussian kernel)\n"
               "  linear            x (B,L,E); to_query.*, to_key.*, to_value.*\n"
               "  conv_attention    x (B,L,E); attention.* (as mha), conv.weight, conv.bias, norm.weight,\n"
               "                    norm.bias\n",
    CLI_OPTIONS(options),
    .notes = "Masks (optional inputs; a mask the mechanism does not take is an error):\n"
             "  attn_mask         sdpa: as F.scaled_dot_product_attention: BOOL, true = may attend,\n"
             "                    or a float dtype, added to the scores; broadcastable to (B,H,Lq,Lk),\n"
             "                    or to (B,Lq,Lk) when q, k, v are 3-D\n"
             "                    mha, conv_attention: as nn.MultiheadAttention: BOOL, true = NOT\n"
             "                    allowed to attend (U8 read as BOOL, as torch 1.13 does), or a float\n"
             "                    dtype, added; (L,S), (B*H,L,S) or any shape broadcastable to\n"
             "                    (B,H,Lq,Lk)\n"
             "  key_padding_mask  BOOL (B,Lk), true = padding (sdpa, mha, linear, conv_attention;\n"
             "                    (Lk) for unbatched mha inputs);\n"
             "                    mha and conv_attention also add a float one to the scores, as\n"
             "                    torch >= 2.0 does (1.13 ORs it with a BOOL attn_mask)\n"
             "  valid_lens        an integer dtype, (B) or (B,Lq): keys j >= len masked (D2L)\n"
             "                    (sdpa, mha, additive, conv_attention)\n"
             "  cu_seqlens_q,     sdpa on packed sequences (FlashAttention's varlen call): integer (B+1)\n"
             "  cu_seqlens_k      offsets, 0 first, the rows of q and of k, v last; sequence b is rows\n"
             "                    [cu[b], cu[b+1]). No other mask; --causal is bottom-right in each\n"
             "                    sequence (FlashAttention's); --window, --alibi, --softcap as above\n"
             "  grad_out          the upstream gradient of out: adds dq, dk, dv (dx) and\n"
             "                    grad.<param name> to OUT\n"
             "Outputs: out, weights (when asked), dq dk dv or dx, grad.<param name>.\n"
             "Fully masked query rows give 0 here (PyTorch 1.13 gives NaN; D2L's masked_softmax\n"
             "gives a row whose valid length is 0 uniform weights).\n"
             "The library's score and mask callbacks (FlexAttention's score_mod and mask_mod,\n"
             "attn_sdpa_opts.mods) are C functions, which no file can carry: this command takes\n"
             "their built-in forms instead (--causal, --window, --alibi, --softcap, attn_mask).\n",
};

/* Options that do not apply to the mechanism are errors, as are missing required ones. */
static int validate(op_args *a, const op_mechanism *mech)
{
    const char *n = mech->name;
    bool heads = !strcmp(n, "mha") || !strcmp(n, "conv_attention");
    if (a->causal && !(mech->masks & OP_CAUSAL))
        return cli_fail(CLI_ERR_USAGE, "op", "--causal does not apply to %s", n);
    if (a->scale != 0 && strcmp(n, "sdpa")) return cli_fail(CLI_ERR_USAGE, "op", "--scale applies to sdpa only");
    if (a->enable_gqa && strcmp(n, "sdpa"))
        return cli_fail(CLI_ERR_USAGE, "op",
                        "--enable-gqa applies to sdpa (mha reads its key/value heads off "
                        "k_proj_weight)");
    if ((cli_features_given(&a->features) || a->rope_base != 0) && strcmp(n, "sdpa") && strcmp(n, "mha"))
        return cli_fail(CLI_ERR_USAGE, "op", "--window, --alibi, --softcap and --rope-base apply to sdpa and mha");
    if (a->rope_base != 0 && a->rope_base <= 1.0f)
        return cli_fail(CLI_ERR_USAGE, "op", "--rope-base %g: expected a base above 1", (double)a->rope_base);
    if (a->rope_dim != 0 && a->rope_base == 0)
        return cli_fail(CLI_ERR_USAGE, "op", "--rope-dim applies with --rope-base");
    if (a->rope_dim % 2)
        return cli_fail(CLI_ERR_USAGE, "op", "--rope-dim %ld: expected an even count (dims turn in pairs)",
                        a->rope_dim);
    if (a->impl != 0 && strcmp(n, "sdpa") && !heads)
        return cli_fail(CLI_ERR_USAGE, "op", "--impl (the SDPA kernel) applies to sdpa, mha and conv_attention only");
    if (a->need_weights && !strcmp(n, "linear"))
        return cli_fail(CLI_ERR_USAGE, "op", "--need-weights: linear attention has no (Lq, Lk) weights to write");
    if (a->shen && strcmp(n, "linear")) return cli_fail(CLI_ERR_USAGE, "op", "--shen applies to linear only");
    if (a->batch_first && strcmp(n, "mha")) return cli_fail(CLI_ERR_USAGE, "op", "--batch-first applies to mha only");
    if (a->per_head_weights && !heads)
        return cli_fail(CLI_ERR_USAGE, "op", "--no-average-weights applies to mha and conv_attention only");
    if (heads && a->num_heads < 1) return cli_fail(CLI_ERR_USAGE, "op", "%s needs --num-heads", n);
    if (!heads && a->num_heads > 0) return cli_fail(CLI_ERR_USAGE, "op", "--num-heads does not apply to %s", n);
    if (!a->in_path || !a->out_path)
        return cli_fail(CLI_ERR_USAGE, "op", "--in and --out are required (see attn op --help)");
    const int code = cli_features_check("op", &a->features);
    return code != CLI_OK ? code : cli_check_paths(&op_spec, a, NULL);
}

int cmd_op(int argc, char **argv)
{
    op_args a = {0};
    int n_names = 0;
    const char **names = calloc((size_t)argc, sizeof *names); /* NAME, and anything unexpected */
    if (!names) return cli_fail(CLI_ERR_DATA, "op", "out of memory");
    int code = cli_parse(&op_spec, &a, argc, argv, 1, names, &n_names);
    if (code == CLI_OK && n_names != 1)
        code = n_names ? cli_fail(CLI_ERR_USAGE, "op", "unexpected argument \"%s\"", names[1])
                       : cli_fail(CLI_ERR_USAGE, "op", "missing NAME (see attn op --help)");
    a.name = names[0];
    free(names);
    if (code != CLI_OK) return code == CLI_HELP_SHOWN ? CLI_OK : code;
    const op_mechanism *mech = op_find(a.name);
    if (!mech)
        return cli_fail(CLI_ERR_USAGE, "op",
                        "unknown mechanism \"%s\"; expected sdpa, mha, additive, nw, linear or "
                        "conv_attention",
                        a.name);
    if ((code = validate(&a, mech)) != CLI_OK) return code;
    if (a.threads > 0) cli_set_threads((int)a.threads);
    cli_set_matmul_precision((attn_precision)a.matmul_precision);
    op_run run = {0};
    run.args = &a;
    run.mech = mech;
    attn_rng_seed(&run.rng, 0);
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
