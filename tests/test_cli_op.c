/* `attn op` end to end: runs the program ($ATTN_BIN, set by CMake for every test) on golden
 * inputs and compares the file it writes with PyTorch's values:
 *   - sdpa on tests/golden/attn_sdpa_*: plain, --causal, valid_lens (B) and (B, Lq), key padding,
 *     a bool attend mask and an F32 additive mask (stored as attend_mask / additive_mask: renamed
 *     to attn_mask in a temporary input file), --scale, 3-D inputs, --need-weights;
 *   - mha on attn_mha_cross (query/key/value renamed q/k/v) with --batch-first, and without it
 *     after transposing q, k, v, grad_out to (L, B, E) (out, dq, dk, dv transposed back); on
 *     attn_mha_kvdim (q/k/v_proj_weight); on mha_gqa_* (grouped- and multi-query attention: the
 *     key/value heads read off k_proj_weight's rows; test_mha_gqa's bound), with --window, --alibi and
 *     --softcap on mha_gqa_feat_*; on mech_mha_seed_names (seed 002's Wq/Wk/Wv/fc_out);
 *     with --rope-base (both layouts, --rope-dim, packed, mha) on cli_rope_*; on cli_mha_*: PyTorch's own masks as nn.MultiheadAttention takes them (bool attn_mask
 *     (L, S) and (B*H, L, S), true = not allowed; U8; float; bool and float key_padding_mask;
 *     unbatched (L, E) inputs with an (S) key_padding_mask);
 *   - additive, nw, linear (--shen, key padding) and conv_attention (torch and seed naming) on
 *     tests/golden/mech_* (tests/golden/make_golden_mechanisms.py).
 * Compared: out, weights (when asked), dq/dk/dv or dx against grad.<input>, grad.<param> against
 * torch's (seed-named gradients against the matching rows of in_proj_* / out_proj.*); every
 * tensor the program writes must be compared in full, every golden result must be written.
 * Tolerance, per tensor: |got - ref| <= rtol |ref_i| + atol max_j |ref_j| with the bound of each
 * golden file's family, as the test that reads it first: TK_TOL_SDPA for attn_sdpa_*, TK_TOL_MHA
 * for attn_mha_* and cli_mha_* (test_golden_attention.c says why), TK_TOL_MECH for mech_*
 * (test_golden_mechanisms.c; a key bias's gradient takes its weight gradient's scale,
 * tk_key_bias_scale).
 * Errors: an unknown mechanism and a missing --in exit 2 with a message; a missing input tensor
 * or parameter, or an input or grad_out of an integer or bool dtype (PyTorch takes no gradient
 * of those), exits 1 with a message naming it; `attn op --help` exits 0 and lists every
 * mechanism. Temporary files live in a mkdtemp directory, removed at the end. */
#define _POSIX_C_SOURCE 200809L
#include "testkit.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_MAP 4

/* A golden tensor's name -> the name attn op reads (to NULL: left out of the input file). */
typedef struct name_map {
    const char *from, *to;
} name_map;

typedef struct cli_case {
    const char *golden;        /* tests/golden/<golden>.safetensors */
    const char *args;          /* NAME and options */
    name_map renames[MAX_MAP]; /* any rename, or seq_first, means a temporary input file */
    bool seq_first;            /* q, k, v, grad_out stored (L, B, E) for mha without
                                   --batch-first; out, dq, dk, dv transposed back to compare */
} cli_case;

#define QKV_RENAMES                                                                                                    \
    {                                                                                                                  \
        {"query", "q"}, {"key", "k"},                                                                                  \
        {                                                                                                              \
            "value", "v"                                                                                               \
        }                                                                                                              \
    }

static const cli_case cases[] = {
    {.golden = "attn_sdpa_plain", .args = "sdpa"},
    {.golden = "attn_sdpa_plain", .args = "sdpa --need-weights"},
    {.golden = "attn_sdpa_causal", .args = "sdpa --causal"},
    {.golden = "attn_sdpa_causal_q5k7", .args = "sdpa --causal --need-weights"},
    {.golden = "attn_sdpa_lens_batch", .args = "sdpa --need-weights"},
    {.golden = "attn_sdpa_lens_query", .args = "sdpa"},
    {.golden = "attn_sdpa_key_padding", .args = "sdpa --need-weights"},
    {.golden = "attn_sdpa_attend", .args = "sdpa --need-weights", .renames = {{"attend_mask", "attn_mask"}}},
    {.golden = "attn_sdpa_additive", .args = "sdpa --impl ref", .renames = {{"additive_mask", "attn_mask"}}},
    {.golden = "attn_sdpa_scale", .args = "sdpa --scale 0.3"},
    {.golden = "attn_sdpa_3d", .args = "sdpa --need-weights"},
    {.golden = "attn_mha_cross", .args = "mha --batch-first --num-heads 4 --need-weights", .renames = QKV_RENAMES},
    {.golden = "attn_mha_cross", .args = "mha --num-heads 4 --need-weights", .renames = QKV_RENAMES, .seq_first = true},
    {.golden = "attn_mha_kvdim", .args = "mha --batch-first --num-heads 4", .renames = QKV_RENAMES},
    {.golden = "mha_gqa_mqa_cross_mask", .args = "mha --batch-first --num-heads 4", .renames = QKV_RENAMES},
    {.golden = "mha_gqa_nobias_kpm_mask", .args = "mha --batch-first --num-heads 8", .renames = QKV_RENAMES},
    {.golden = "mha_gqa_feat_softcap_cross_mask",
     .args = "mha --batch-first --num-heads 4 --softcap 2.5",
     .renames = QKV_RENAMES},
    {.golden = "mha_gqa_feat_all_mqa",
     .args = "mha --num-heads 4 --window 3,2 --softcap 2 --alibi",
     .renames = QKV_RENAMES,
     .seq_first = true},
    /* nn.MultiheadAttention's own masks, as it takes them (bool attn_mask true = not allowed) */
    {.golden = "cli_mha_bool_kpm",
     .args = "mha --batch-first --num-heads 4 --need-weights "
             "--no-average-weights",
     .renames = QKV_RENAMES},
    {.golden = "cli_mha_bool_kpm",
     .args = "mha --num-heads 4 --need-weights --no-average-weights",
     .renames = QKV_RENAMES,
     .seq_first = true},
    {.golden = "cli_mha_bool3d_kpm",
     .args = "mha --batch-first --num-heads 4 --need-weights "
             "--no-average-weights --impl ref",
     .renames = QKV_RENAMES},
    {.golden = "cli_mha_uint8", .args = "mha --batch-first --num-heads 4 --need-weights", .renames = QKV_RENAMES},
    {.golden = "cli_mha_float_kpm", .args = "mha --batch-first --num-heads 4 --need-weights", .renames = QKV_RENAMES},
    {.golden = "cli_mha_float_bool_kpm",
     .args = "mha --batch-first --num-heads 4 --need-weights",
     .renames = QKV_RENAMES},
    {.golden = "cli_mha_unbatched_float_kpm",
     .args = "mha --num-heads 4 --need-weights",
     .renames = QKV_RENAMES}, /* (L, E) inputs, a float (S) key_padding_mask */
    /* rotary positions (tests/golden/make_golden_cli_rope.py): both layouts, partial, 3-D with a
     * window, packed (each sequence from position 0), the MHA's heads */
    {.golden = "cli_rope_sdpa_halves", .args = "sdpa --enable-gqa --rope-base 10000"},
    {.golden = "cli_rope_sdpa_interleaved_partial",
     .args = "sdpa --causal --rope-base 500 --rope-layout interleaved --rope-dim 8"},
    {.golden = "cli_rope_sdpa_3d_window", .args = "sdpa --window 2,1 --rope-base 10000 --rope-dim 4"},
    {.golden = "cli_rope_sdpa_packed", .args = "sdpa --causal --enable-gqa --rope-base 10000"},
    {.golden = "cli_rope_mha_gqa", .args = "mha --batch-first --num-heads 4 --rope-base 1000"},
    {.golden = "mech_mha_seed_names", .args = "mha --batch-first --num-heads 2 --need-weights --no-average-weights"},
    {.golden = "mech_additive_lens_batch", .args = "additive --need-weights"},
    {.golden = "mech_additive_lens_query", .args = "additive --need-weights"},
    {.golden = "mech_nw_learned", .args = "nw --need-weights"},
    {.golden = "mech_nw_fixed", .args = "nw --need-weights"},
    {.golden = "mech_linear_efficient", .args = "linear"},
    {.golden = "mech_linear_shen", .args = "linear --shen"},
    {.golden = "mech_linear_padding", .args = "linear"},
    {.golden = "mech_conv_attention", .args = "conv_attention --num-heads 2 --need-weights --no-average-weights"},
    {.golden = "mech_conv_attention_seed", .args = "conv_attention --num-heads 2 --need-weights --no-average-weights"},
};

/* Errors and help: `attn <args> [--in IN] [--out OUT]`. */
typedef struct error_case {
    const char *what;
    const char *args;
    const char *golden; /* the input file is made from it (renames applied); NULL: none */
    name_map renames[MAX_MAP];
    enum {
        NO_FILES,
        OUT_ONLY,
        IN_OUT
    } files;             /* which of --in IN --out OUT are given */
    int status;          /* expected exit status */
    const char *says[7]; /* the output must contain each (up to a NULL) */
} error_case;

static const error_case error_cases[] = {
    {.what = "unknown mechanism",
     .args = "op bogus",
     .golden = "attn_sdpa_plain",
     .files = IN_OUT,
     .status = 2,
     .says = {"unknown mechanism", "\"bogus\""}},
    {.what = "missing --in", .args = "op sdpa", .files = OUT_ONLY, .status = 2, .says = {"--in"}},
    {.what = "missing input tensor",
     .args = "op sdpa",
     .golden = "attn_sdpa_plain",
     .renames = {{"k", NULL}},
     .files = IN_OUT,
     .status = 1,
     .says = {"\"k\""}},
    {.what = "missing parameter",
     .args = "op additive",
     .golden = "mech_additive_lens_batch",
     .renames = {{"W_k.weight", NULL}},
     .files = IN_OUT,
     .status = 1,
     .says = {"\"W_k.weight\""}},
    {.what = "integer input",
     .args = "op linear",
     .golden = "mech_linear_padding",
     .renames = {{"x", NULL}, {"key_padding_mask", "x"}},
     .files = IN_OUT,
     .status = 1,
     .says = {"\"x\" is BOOL", "F32"}},
    {.what = "integer grad_out",
     .args = "op sdpa",
     .golden = "attn_sdpa_lens_batch",
     .renames = {{"grad_out", NULL}, {"valid_lens", "grad_out"}},
     .files = IN_OUT,
     .status = 1,
     .says = {"\"grad_out\" is I64"}},
    {.what = "help",
     .args = "op --help",
     .files = NO_FILES,
     .status = 0,
     .says = {"\n  sdpa ", "\n  mha ", "\n  additive ", "\n  nw ", "\n  linear ", "\n  conv_attention "}},
};

/* Golden result -> program output names. */
static const name_map input_grads[] = {{"grad.q", "dq"},     {"grad.k", "dk"},   {"grad.v", "dv"},    {"grad.x", "dx"},
                                       {"grad.query", "dq"}, {"grad.key", "dk"}, {"grad.value", "dv"}};
/* Seed 002's MHA names: block `block` of our parameter `ours` (blocks of the seed tensor's size). */
static const struct {
    const char *seed, *ours;
    int block;
} seed_aliases[] = {
    {"Wq.weight", "in_proj_weight", 0},      {"Wk.weight", "in_proj_weight", 1},  {"Wv.weight", "in_proj_weight", 2},
    {"Wq.bias", "in_proj_bias", 0},          {"Wk.bias", "in_proj_bias", 1},      {"Wv.bias", "in_proj_bias", 2},
    {"fc_out.weight", "out_proj.weight", 0}, {"fc_out.bias", "out_proj.bias", 0},
};

static const char *attn_bin;
static char tmp_dir[] = "/tmp/attn_test_cli_op_XXXXXX";

/* ---- files and the program ---- */

static bool is_result(const char *name)
{
    return !strcmp(name, "out") || !strcmp(name, "weights") || !strncmp(name, "grad.", 5);
}

static bool is_sequence(const char *name) /* the (L, B, E) tensors of seq-first mha */
{
    static const char *const names[] = {"q", "k", "v", "grad_out", "out", "dq", "dk", "dv"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(name, names[i])) return true;
    return false;
}

/* (d0, d1, inner) -> (d1, d0, inner) */
static void transpose01(float *dst, const float *src, const int64_t shape[3])
{
    for (int64_t a = 0; a < shape[0]; a++)
        for (int64_t b = 0; b < shape[1]; b++)
            memcpy(dst + (b * shape[0] + a) * shape[2], src + (a * shape[1] + b) * shape[2],
                   (size_t)shape[2] * sizeof(float));
}

/* The input file: every golden tensor but the results, renamed (or left out), transposed when
 * seq_first. */
static bool write_input(const char *path, attn_st_file *g, const name_map *renames, bool seq_first)
{
    attn_st_writer *w = attn_st_writer_new();
    bool ok = w != NULL;
    for (size_t i = 0; ok && i < attn_st_count(g); i++) {
        const attn_st_tensor *st = attn_st_at(g, i);
        const char *name = st->name;
        if (is_result(name)) continue;
        bool keep = true;
        for (int j = 0; j < MAX_MAP && renames[j].from; j++)
            if (!strcmp(name, renames[j].from)) { /* the first match only */
                keep = renames[j].to != NULL;
                name = renames[j].to;
                break;
            }
        if (!keep) continue;
        if (seq_first && is_sequence(name) && st->ndim == 3) {
            attn_tensor *t = attn_st_load(g, st->name, NULL);
            float *tr = t ? malloc((size_t)t->numel * sizeof(float)) : NULL;
            if (tr) transpose01(tr, t->data, st->shape);
            int64_t shape[3] = {st->shape[1], st->shape[0], st->shape[2]};
            ok = tr && attn_st_writer_add(w, name, ATTN_DTYPE_F32, 3, shape, tr) == ATTN_OK;
            free(tr);
            attn_tensor_free(t);
        } else {
            ok = attn_st_writer_add(w, name, st->dtype, st->ndim, st->shape, st->data) == ATTN_OK;
        }
    }
    ok = ok && attn_st_writer_save(w, path) == ATTN_OK;
    TK_CHECK(ok, "writing %s: %s", path, attn_last_error());
    attn_st_writer_free(w);
    return ok;
}

/* Runs `attn <args>` with stdout and stderr into log; returns the exit status (-1 if none). */
static int run_attn(const char *args, const char *log)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", attn_bin, args, log);
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 16);
    if (buf) buf[fread(buf, 1, (1 << 16) - 1, f)] = '\0';
    fclose(f);
    return buf;
}

static void remove_tmp_dir(void)
{
    DIR *d = opendir(tmp_dir);
    if (!d) return;
    struct dirent *e;
    char path[sizeof tmp_dir + 300];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", tmp_dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(tmp_dir);
}

/* ---- comparing the program's output with the golden results ---- */

typedef struct target {
    char name[160]; /* in the program's output */
    int64_t block;  /* the golden values are block `block` (of their size) of it */
    bool alias;     /* a block of the tensor, not all of it */
} target;

/* Where golden result `name` lives in the program's output; false: not compared (weights that
 * were not asked for). */
static bool target_of(const char *name, bool weights_asked, target *t)
{
    t->block = 0;
    t->alias = false;
    snprintf(t->name, sizeof t->name, "%s", name);
    if (!strcmp(name, "weights")) return weights_asked;
    for (size_t i = 0; i < sizeof input_grads / sizeof *input_grads; i++)
        if (!strcmp(name, input_grads[i].from)) {
            snprintf(t->name, sizeof t->name, "%s", input_grads[i].to);
            return true;
        }
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof seed_aliases / sizeof *seed_aliases; i++) {
        size_t m = strlen(seed_aliases[i].seed);
        /* "grad.<prefix>Wq.weight": the seed name after "grad." or after a '.' */
        if (n > m && !strcmp(name + n - m, seed_aliases[i].seed) && name[n - m - 1] == '.') {
            snprintf(t->name, sizeof t->name, "%.*s%s", (int)(n - m), name, seed_aliases[i].ours);
            t->block = seed_aliases[i].block;
            t->alias = !strncmp(seed_aliases[i].ours, "in_proj", 7); /* a third of it */
            return true;
        }
    }
    return true;
}

static ptrdiff_t index_of(const attn_st_file *f, const attn_st_tensor *t)
{
    for (size_t i = 0; i < attn_st_count(f); i++)
        if (attn_st_at(f, i) == t) return (ptrdiff_t)i;
    return -1;
}

/* Golden result `name` against the program's output; covered[] counts compared values. */
static void compare_one(const cli_case *c, attn_st_file *g, attn_st_file *out, const char *name, int64_t *covered)
{
    target t;
    if (!target_of(name, strstr(c->args, "--need-weights") != NULL, &t)) return;
    const attn_st_tensor *st = attn_st_find(out, t.name);
    TK_CHECK(st != NULL, "%s (%s): attn op wrote no %s (for torch's %s)", c->golden, c->args, t.name, name);
    if (!st) return;
    attn_tensor *ref = tk_golden_tensor(g, name), *got = attn_st_load(out, t.name, NULL);
    TK_NOT_NULL(got);
    if (ref && got && c->seq_first && is_sequence(t.name) && got->ndim == 3) {
        attn_tensor *back = attn_tensor_alloc(3, (int64_t[]){got->shape[1], got->shape[0], got->shape[2]});
        if (back) transpose01(back->data, got->data, got->shape);
        attn_tensor_free(got);
        got = back;
    }
    if (ref && got) {
        char what[300], gs[64], rs[64];
        snprintf(what, sizeof what, "%s (attn op %s): %s vs torch's %s", c->golden, c->args, t.name, name);
        int64_t offset = t.block * ref->numel;
        bool whole = !t.alias;
        bool fits = whole ? attn_same_shape(got, ref) : offset + ref->numel <= got->numel;
        TK_CHECK(fits, "%s: shape %s, torch has %s (block %lld)", what, attn_shape_str(got, gs, sizeof gs),
                 attn_shape_str(ref, rs, sizeof rs), (long long)t.block);
        if (fits) {
            tk_tol tol = !strncmp(c->golden, "attn_sdpa_", 10) ? TK_TOL_SDPA
                         : !strncmp(c->golden, "mech_", 5)     ? TK_TOL_MECH
                         : !strncmp(c->golden, "mha_gqa_", 8) || !strncmp(c->golden, "cli_rope_", 9)
                             ? tk_tol_of(1, 160, 4, 8) /* test_mha_gqa's: a float64 golden, rope's few roundings */
                             : TK_TOL_MHA;
            tol.scale = tk_key_bias_scale(g, name);
            tk_close_scaled(what, got->data + offset, ref->data, ref->numel, tol);
            covered[index_of(out, st)] += ref->numel;
        }
    }
    attn_tensor_free(ref);
    attn_tensor_free(got);
}

static void compare_all(const cli_case *c, attn_st_file *g, attn_st_file *out)
{
    size_t n = attn_st_count(out);
    int64_t *covered = calloc(n ? n : 1, sizeof *covered);
    if (!covered) return;
    for (size_t i = 0; i < attn_st_count(g); i++) {
        const char *name = attn_st_at(g, i)->name;
        if (is_result(name)) compare_one(c, g, out, name, covered);
    }
    for (size_t i = 0; i < n; i++) {
        const attn_st_tensor *st = attn_st_at(out, i);
        TK_CHECK(covered[i] == st->numel, "%s (attn op %s): output %s: %lld of %lld values have a torch twin",
                 c->golden, c->args, st->name, (long long)covered[i], (long long)st->numel);
    }
    free(covered);
}

/* ---- the cases ---- */

static void golden_path(char *buf, size_t n, const char *golden)
{
    snprintf(buf, n, "tests/golden/%s.safetensors", golden);
}

static void run_case(size_t i)
{
    const cli_case *c = &cases[i];
    char golden[256], in[256], out[256], log[256], args[1024];
    golden_path(golden, sizeof golden, c->golden);
    snprintf(out, sizeof out, "%s/out_%zu.safetensors", tmp_dir, i);
    snprintf(log, sizeof log, "%s/log_%zu.txt", tmp_dir, i);
    attn_st_file *g = attn_st_open(golden);
    TK_CHECK(g != NULL, "golden %s: %s", golden, attn_last_error());
    if (!g) return;
    if (c->renames[0].from || c->seq_first) {
        snprintf(in, sizeof in, "%s/in_%zu.safetensors", tmp_dir, i);
        if (!write_input(in, g, c->renames, c->seq_first)) {
            attn_st_close(g);
            return;
        }
    } else {
        snprintf(in, sizeof in, "%s", golden);
    }
    snprintf(args, sizeof args, "op %s --in '%s' --out '%s'", c->args, in, out);
    int status = run_attn(args, log);
    char *text = read_text(log);
    TK_CHECK(status == 0, "attn %s: exit status %d: %s", args, status, text ? text : "");
    free(text);
    attn_st_file *o = status == 0 ? attn_st_open(out) : NULL;
    TK_CHECK(status != 0 || o != NULL, "attn %s: output: %s", args, attn_last_error());
    if (o) compare_all(c, g, o);
    attn_st_close(o);
    attn_st_close(g);
}

static void run_error_case(size_t i)
{
    const error_case *e = &error_cases[i];
    char in[256], out[256], log[256], args[1024];
    snprintf(in, sizeof in, "%s/err_in_%zu.safetensors", tmp_dir, i);
    snprintf(out, sizeof out, "%s/err_out_%zu.safetensors", tmp_dir, i);
    snprintf(log, sizeof log, "%s/err_log_%zu.txt", tmp_dir, i);
    if (e->golden) {
        char golden[256];
        golden_path(golden, sizeof golden, e->golden);
        attn_st_file *g = attn_st_open(golden);
        TK_CHECK(g != NULL, "golden %s: %s", golden, attn_last_error());
        bool ok = g && write_input(in, g, e->renames, false);
        attn_st_close(g);
        if (!ok) return;
    }
    if (e->files == IN_OUT)
        snprintf(args, sizeof args, "%s --in '%s' --out '%s'", e->args, in, out);
    else
        snprintf(args, sizeof args, "%s%s%s%s", e->args, e->files == OUT_ONLY ? " --out '" : "",
                 e->files == OUT_ONLY ? out : "", e->files == OUT_ONLY ? "'" : "");
    int status = run_attn(args, log);
    char *text = read_text(log);
    TK_CHECK(status == e->status, "%s: attn %s: exit status %d, expected %d: %s", e->what, args, status, e->status,
             text ? text : "");
    for (size_t j = 0; j < sizeof e->says / sizeof *e->says && e->says[j]; j++)
        TK_CHECK(text && strstr(text, e->says[j]),
                 "%s: attn %s: the output should contain "
                 "\"%s\": %s",
                 e->what, args, e->says[j], text ? text : "(none)");
    if (e->status != 0 && e->files != NO_FILES)
        TK_CHECK(access(out, F_OK) != 0, "%s: attn %s failed but wrote %s", e->what, args, out);
    free(text);
}

int main(void)
{
    attn_bin = getenv("ATTN_BIN");
    TK_CHECK(attn_bin && *attn_bin, "ATTN_BIN is not set: it names the attn program (CMake sets "
                                    "it for every test; run through ctest, or export it)");
    if (!attn_bin || !*attn_bin) return tk_finish("test_cli_op");
    bool runnable = access(attn_bin, X_OK) == 0, have_dir = mkdtemp(tmp_dir) != NULL;
    TK_CHECK(runnable, "ATTN_BIN=%s is not an executable", attn_bin);
    TK_CHECK(have_dir, "mkdtemp %s failed", tmp_dir);
    if (!runnable || !have_dir) {
        if (have_dir) rmdir(tmp_dir);
        return tk_finish("test_cli_op");
    }
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(i);
    for (size_t i = 0; i < sizeof error_cases / sizeof *error_cases; i++) run_error_case(i);
    remove_tmp_dir();
    printf("test_cli_op: %zu golden runs, %zu error/help runs\n", sizeof cases / sizeof *cases,
           sizeof error_cases / sizeof *error_cases);
    return tk_finish("test_cli_op");
}
