/* attn tour, every step but seed 002's IMDB section (test_tour_imdb.c), run once with --save:
 *   - values: where the tutorial's PyTorch code is deterministic given its inputs, every input,
 *     weight and output the step saves matches tests/golden/tour_*.safetensors (written by
 *     make_golden_tour.py from the same PCG32 numbers) per tensor within the bound of its step
 *     (the table below says why); seed 003's regression matches nw_seed003 (PyTorch running the
 *     tutorial) and prints its 20 lines as the tutorial does (a last digit may differ only where
 *     PyTorch's value lies within float32 noise of a rounding boundary);
 *   - shapes: every shape line printed is PyTorch's shape of that tensor (or the one the tutorial
 *     states);
 *   - the √d_k demonstration agrees with the theory (Var(q.k) = d_k, 1 after scaling);
 *   - docs: the English tutorial holds every step's output as printed now (a last digit apart only
 *     where a value the step saved lies within a few ulps of the rounding boundary: the docs were
 *     printed on another host), links every figure written, and names code files and functions
 *     that exist (the Chinese one shows `attn tour --lang zh-CN`: tests/docs_commands.py holds it
 *     to that);
 *   - options: bad ones exit 2 before writing anything; missing --out-dir and --save folders are
 *     made. */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* docs/tutorial.zh-CN.md shows `attn tour --lang zh-CN`: tests/docs_commands.py holds it to that */
static const char *const docs[1] = {"docs/tutorial.md"};

/* Steps whose tutorial code is deterministic given its inputs; names NULL: every tensor.
 * Bound per tensor: |got - ref| <= rtol |ref_i| + atol max_j |ref_j|, tk_tol_of(2, n, cond, 8)
 * (testkit.h): both sides float32 (the golden is torch's own), n roundings on the longest path of
 * the step's forward (a K-term sum counts K), cond 4 (softmax-weighted means of O(1) values), 8
 * roundings of an element's own. Inputs and weights are PCG32 draws both sides make alike, so they
 * match to the last bit or within those roundings. Before: 1e-5 absolute + 1e-5 |ref_i| for all.
 *   000/demo: q k^T over d_k 64, softmax and @ v over 10 keys: 90;
 *   002 steps: embed 8, 2 heads of 4, 4 tokens: a projection 8 (1.2: 10); one attention 8 + 4 + 4
 *     after it (2.x: 30); multi-head with fc_out (3.x, 4.2: 30); the TransformerBlock, its
 *     LayerNorms (8) and FFN (8, 32) (4.3: 90); a conv of 3 taps x 8 channels before (5.2: 60);
 *     EfficientAttention's two softmaxes and context (5.3: 32);
 *   003/nw-*: the data (2 sin x + x^0.8: 4, cond 1); the fixed kernel's softmax over 50 keys and
 *     the weighted sum (110); 20 epochs of training, each ~150 deep (3000, cond 2: squared errors
 *     and softmax weights, positive terms);
 *   003/masked-softmax 8; additive (W_q 20, W_k 2, w_v 8, 10 keys) 60; dot 30; multihead (D2L's,
 *     100 hidden, 5 heads of 20, 6 keys, W_o 100) 240;
 *   003/positional: sin and cos of angles i / 10000^(2j/32) up to 59 made in 3 roundings: an
 *     angle's error is u * 59 per rounding against values of at most 1, so n 3, cond 60;
 *   003/transformer: D2L's encoder block (24 wide, 8 heads of 3, FFN 48) then a decoder block with
 *     causal self-attention over up to 100 keys and cross-attention to the encoder: 700. */
static const struct {
    const char *step, *golden, *names;
    double n, cond;
} goldens[] = {
    {"000/demo", "tour_000_demo", NULL, 90, 4},
    {"002/1.2", "tour_002_1_2", NULL, 10, 4},
    {"002/2.1", "tour_002_2_1", NULL, 30, 4},
    {"002/2.2", "tour_002_2_2", NULL, 30, 4},
    {"002/3.2", "tour_002_3_2", NULL, 30, 4},
    {"002/3.3", "tour_002_3_3", NULL, 30, 4},
    {"002/4.2", "tour_002_4_2", NULL, 30, 4},
    {"002/4.3", "tour_002_4_3", NULL, 90, 4},
    {"002/5.2", "tour_002_5_2", NULL, 60, 4},
    {"002/5.3", "tour_002_5_3", NULL, 32, 4},
    {"003/nw-data", "nw_seed003", "x_train,y_train,x_test,y_true", 4, 1},
    {"003/nw-fixed", "tour_003_nw_fixed", NULL, 110, 4},
    {"003/nw-train", "nw_seed003", "losses,w,y_hat", 3000, 2},
    {"003/masked-softmax", "tour_003_masked_softmax", NULL, 8, 4},
    {"003/additive", "tour_003_additive", NULL, 60, 4},
    {"003/dot", "tour_003_dot", NULL, 30, 4},
    {"003/multihead", "tour_003_multihead", NULL, 240, 4},
    {"003/positional", "tour_003_positional", NULL, 3, 60},
    {"003/transformer", "tour_003_transformer", NULL, 700, 4},
};

/* Steps with no golden file: their bounds, for the docs' printed numbers.
 *   003/sqrt-d: variances and softmax maxima of 1000 scores q.k over d_k <= 512: 512 + 2 x 1000
 *     roundings, sums of positive terms (cond 1): 2500;
 *   003/bahdanau: saves nothing (its numbers print as they are). */
static const struct {
    const char *step;
    double n, cond;
} other_steps[] = {
    {"003/sqrt-d", 2500, 1},
    {"003/bahdanau", 1, 1},
};

/* The bound of a step's values (the tables above say why). */
static tk_tol step_tol(const char *step)
{
    for (size_t k = 0; k < sizeof goldens / sizeof goldens[0]; k++)
        if (!strcmp(goldens[k].step, step)) return tk_tol_of(2, goldens[k].n, goldens[k].cond, 8);
    for (size_t k = 0; k < sizeof other_steps / sizeof other_steps[0]; k++)
        if (!strcmp(other_steps[k].step, step)) return tk_tol_of(2, other_steps[k].n, other_steps[k].cond, 8);
    TK_CHECK(false, "%s has no bound in test_tour.c's tables", step);
    return (tk_tol){0};
}

/* Printed shape lines "<label>: <shape>": the shape of a golden tensor, or as the tutorial says. */
static const struct {
    const char *step, *label, *golden, *tensor, *stated;
} shapes[] = {
    {"000/demo", "输出形状 (output shape)", NULL, NULL, "(2, 10, 64)"}, /* the listing's comments */
    {"000/demo", "注意力权重形状 (attention weights shape)", NULL, NULL, "(2, 10, 10)"},
    {"002/1.2", "输入序列形状 (input shape)", "tour_002_1_2", "x", NULL},
    {"002/1.2", "Query形状 (Query shape)", "tour_002_1_2", "Q", NULL},
    {"002/1.2", "Key形状 (Key shape)", "tour_002_1_2", "K", NULL},
    {"002/1.2", "Value形状 (Value shape)", "tour_002_1_2", "V", NULL},
    {"002/2.1", "注意力输出形状 (attention output shape)", "tour_002_2_1", "output", NULL},
    {"002/2.1", "注意力权重形状 (attention weights shape)", "tour_002_2_1", "attn_weights", NULL},
    {"002/3.2", "多头注意力输出形状 (multi-head output shape)", "tour_002_3_2", "output", NULL},
    {"002/3.2", "多头注意力权重形状 (multi-head weights shape)", "tour_002_3_2", "attn_weights", NULL},
    {"002/4.2", "src", "tour_002_4_2", "src", NULL},
    {"002/4.2", "tgt", "tour_002_4_2", "tgt", NULL},
    {"002/4.2", "编码器自注意力 encoder_output", "tour_002_4_2", "encoder_output", NULL},
    {"002/4.2", "解码器自注意力 decoder_output", "tour_002_4_2", "decoder_output", NULL},
    {"002/4.2", "编码器-解码器注意力 cross_output", "tour_002_4_2", "cross_output", NULL},
    {"002/4.3", "Transformer层输出形状 (TransformerBlock output shape)", "tour_002_4_3", "output", NULL},
    {"002/5.2", "卷积注意力输出形状 (ConvAttention output shape)", "tour_002_5_2", "output", NULL},
    {"002/5.3", "高效注意力输出形状 (EfficientAttention output shape)", "tour_002_5_3", "output", NULL},
    {"003/nw-data", "x_train", "nw_seed003", "x_train", NULL},
    {"003/nw-data", "y_train", "nw_seed003", "y_train", NULL},
    {"003/nw-data", "x_test", "nw_seed003", "x_test", NULL},
    {"003/nw-fixed", "attention weights (test queries x training keys)", "tour_003_nw_fixed", "attention_weights",
     NULL},
    {"003/bahdanau", "encoder outputs: the keys and values h_1..h_7", NULL, NULL, "(4, 7, 16)"}, /* D2L */
    {"003/bahdanau", "encoder hidden state: the first query s_0", NULL, NULL, "(2, 4, 16)"},
    {"003/bahdanau", "decoder output", NULL, NULL, "(4, 7, 10)"},
    {"003/multihead", "attention(X, Y, Y, valid_lens)", "tour_003_multihead", "output", NULL},
    {"003/multihead", "attention weights (batch, heads, queries, keys)", "tour_003_multihead", "attention_weights",
     NULL},
    {"003/multihead", "self-attention: attention(X, X, X, valid_lens)", "tour_003_multihead", "self.output", NULL},
    {"003/positional", "P = PositionalEncoding(32).P[:, :60, :]", "tour_003_positional", "P", NULL},
    {"003/transformer", "ffn(torch.ones((2, 3, 4)))", "tour_003_transformer", "ffn_output", NULL},
    {"003/transformer", "add_norm(torch.ones((2, 3, 4)), torch.ones((2, 3, 4)))", "tour_003_transformer",
     "add_norm_output", NULL},
    {"003/transformer", "TransformerEncoderBlock(24, 48, 8, 0.5)(X, valid_lens)", "tour_003_transformer",
     "encoder_output", NULL},
    {"003/transformer", "TransformerDecoderBlock(24, 48, 8, 0.5, 0)(X, state)", "tour_003_transformer",
     "decoder_output", NULL},
};

static char dir[64], out_dir[96], save_dir[96];

/* The saved tensors of a step (file names as attn tour writes them). */
static attn_st_file *saved(const char *step)
{
    char path[256], stem[64];
    snprintf(stem, sizeof stem, "%s", step);
    for (char *p = stem; *p; p++)
        if (*p == '/' || *p == '.' || *p == '-') *p = '_';
    snprintf(path, sizeof path, "%s/%s.safetensors", save_dir, stem);
    return attn_st_open(path);
}

static bool wanted(const char *names, const char *name)
{
    if (!names) return true;
    size_t n = strlen(name);
    for (const char *p = strstr(names, name); p; p = strstr(p + 1, name))
        if ((p == names || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return true;
    return false;
}

static void check_golden(const char *step, const char *golden, const char *names, tk_tol tol)
{
    attn_st_file *ours = saved(step), *ref = tk_golden(golden);
    TK_CHECK(ours != NULL, "%s: no saved tensors: %s", step, attn_last_error());
    for (size_t i = 0; ours && ref && i < attn_st_count(ref); i++) {
        const attn_st_tensor *r = attn_st_at(ref, i);
        if (!wanted(names, r->name)) continue;
        attn_tensor *a = attn_st_find(ours, r->name) ? attn_st_load(ours, r->name, NULL) : NULL;
        attn_tensor *b = attn_st_load(ref, r->name, NULL);
        char what[160], sa[64], sb[64];
        snprintf(what, sizeof what, "%s %s", step, r->name);
        TK_CHECK(a && b && attn_same_shape(a, b), "%s: shape %s, PyTorch %s", what,
                 a ? attn_shape_str(a, sa, sizeof sa) : "missing", b ? attn_shape_str(b, sb, sizeof sb) : "?");
        if (a && b && attn_same_shape(a, b)) tk_close_scaled(what, a->data, b->data, a->numel, tol);
        attn_tensor_free(a);
        attn_tensor_free(b);
    }
    attn_st_close(ours);
    attn_st_close(ref);
}

static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = strstr(text, line); p; p = strstr(p + 1, line))
        if ((p == text || p[-1] == '\n') && p[n] == '\n') return true;
    return false;
}

static void check_shape_line(const char *out, int k)
{
    char *block = tk_tour_step_output(out, shapes[k].step), line[256], shape[64];
    snprintf(shape, sizeof shape, "%s", shapes[k].stated ? shapes[k].stated : "?");
    if (shapes[k].golden) {
        attn_st_file *g = tk_golden(shapes[k].golden);
        const attn_st_tensor *t = g ? attn_st_find(g, shapes[k].tensor) : NULL;
        size_t n = (size_t)snprintf(shape, sizeof shape, "(");
        for (int d = 0; t && d < t->ndim; d++)
            n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        snprintf(shape + n, sizeof shape - n, ")");
        attn_st_close(g);
    }
    snprintf(line, sizeof line, "%s: %s", shapes[k].label, shape);
    TK_CHECK(block && has_line(block, line), "%s prints \"%s\"", shapes[k].step, line);
    free(block);
}

/* The tutorial's own run prints these 20 lines (PyTorch's losses and w, formatted as it does).
 * Where PyTorch's value r and ours v print differently, the line may show ours: then a rounding
 * boundary lies between them, so r is within |v - r| of it, and |v - r| must be within the bound
 * of the computation (the 003/nw-train row of the table above): the allowance is as wide as
 * this host's own difference, a few ulps, and applies nowhere else. (Epoch 15's w = 2.363550663
 * lies 2.8 ulps above the boundary 2.36355.) */
static void check_nw_lines(const char *out)
{
    char *block = tk_tour_step_output(out, "003/nw-train");
    attn_st_file *g = tk_golden("nw_seed003"), *f = saved("003/nw-train");
    attn_tensor *ref[2] = {0}, *ours[2] = {0};
    static const char *const names[2] = {"losses", "w"};
    const tk_tol tol = step_tol("003/nw-train");
    for (int i = 0; i < 2; i++) {
        ref[i] = g ? attn_st_load(g, names[i], NULL) : NULL;
        ours[i] = f ? attn_st_load(f, names[i], NULL) : NULL;
    }
    bool have = block && ref[0] && ref[1] && ours[0] && ours[1] && ref[0]->numel == 20 && ref[1]->numel == 20 &&
                ours[0]->numel == 20 && ours[1]->numel == 20;
    TK_CHECK(have, "003/nw-train: PyTorch's and the saved losses and w, 20 epochs");
    int found = 0, ours_only = 0;
    const char *at = block;
    for (int e = 0; have && e < 20; e++) {
        char line[96], mine[96];
        snprintf(line, sizeof line, "epoch %02d, loss = %.4f, w = %.4f\n", e + 1, ref[0]->data[e], ref[1]->data[e]);
        snprintf(mine, sizeof mine, "epoch %02d, loss = %.4f, w = %.4f\n", e + 1, ours[0]->data[e], ours[1]->data[e]);
        bool within = true;
        for (int i = 0; i < 2; i++) {
            const double r = ref[i]->data[e], v = ours[i]->data[e];
            const double bound = tol.rtol * fabs(r) + tol.atol * tk_max_abs(ref[i]->data, 20);
            within = within && fabs(v - r) <= bound;
        }
        const char *p = strstr(at, line), *q = strcmp(line, mine) && within ? strstr(at, mine) : NULL;
        if (p && p[-1] == '\n') {
            found++;
            at = p + strlen(line);
        } else if (q && q[-1] == '\n') {
            found++;
            ours_only++;
            at = q + strlen(mine);
            printf("note: 003/nw-train prints %.*s where PyTorch's run prints %s", (int)strlen(mine) - 1, mine, line);
        } else {
            fprintf(stderr, "  missing or out of order: %s", line);
        }
    }
    TK_CHECK(found == 20,
             "003/nw-train prints the tutorial's 20 lines, in order (%d of 20; %d where "
             "PyTorch's value and ours straddle a rounding boundary)",
             found, ours_only);
    for (int i = 0; i < 2; i++) {
        attn_tensor_free(ref[i]);
        attn_tensor_free(ours[i]);
    }
    attn_st_close(g);
    attn_st_close(f);
    free(block);
}

/* Var(q.k) = d_k and Var(q.k / sqrt(d_k)) = 1 within 20 % (1000 scores each); unscaled, the
 * softmax saturates as d_k grows, scaled it does not. */
static void check_sqrt_d(void)
{
    attn_st_file *f = saved("003/sqrt-d");
    static const char *const names[5] = {"d_k", "var_raw", "var_scaled", "max_weight_raw", "max_weight_scaled"};
    attn_tensor *t[5] = {0};
    for (int i = 0; f && i < 5; i++) t[i] = attn_st_load(f, names[i], NULL);
    TK_CHECK(f && t[4] && t[0]->numel == t[4]->numel, "003/sqrt-d saves its measurements");
    for (int64_t i = 0; f && t[4] && i < t[0]->numel; i++) {
        double d = t[0]->data[i];
        TK_CHECK(t[1]->data[i] > 0.8 * d && t[1]->data[i] < 1.2 * d, "Var(q.k) %g at d_k %g", t[1]->data[i], d);
        TK_CHECK(t[2]->data[i] > 0.8 && t[2]->data[i] < 1.2, "Var(q.k/sqrt d_k) %g at d_k %g", t[2]->data[i], d);
        TK_CHECK(t[4]->data[i] < 0.5, "scaled: largest weight %g at d_k %g", t[4]->data[i], d);
    }
    int64_t last = t[0] ? t[0]->numel - 1 : 0;
    TK_CHECK(t[3] && t[3]->data[last] > 0.9 && t[3]->data[last] > t[3]->data[0],
             "unscaled, the softmax saturates as d_k grows");
    for (int i = 0; i < 5; i++) attn_tensor_free(t[i]);
    attn_st_close(f);
}

/* Every step of --list has its output in both docs, the same as printed now (steps of the IMDB
 * section are compared by test_tour_imdb); the figures written are linked from both. */
static void check_docs(const char *out, const char *list)
{
    for (size_t k = 0; k < sizeof docs / sizeof docs[0]; k++) {
        char *doc = tk_read_text(docs[k]);
        TK_CHECK(doc != NULL, "%s is readable", docs[k]);
        if (!doc) continue;
        for (const char *l = list; *l && strchr(l, '\n'); l = strchr(l, '\n') + 1) {
            char step[32];
            if (sscanf(l, "%31s", step) != 1) continue;
            attn_st_file *values = saved(step);
            tk_tour_doc_check(docs[k], doc, step, out, values, step_tol(step));
            attn_st_close(values);
        }
        for (const char *w = strstr(out, "\nwrote "); w; w = strstr(w + 1, "\nwrote ")) {
            char name[64], link[96], path[192];
            sscanf(w + 7, "%63s", name);
            snprintf(link, sizeof link, "](tour/%s)", name);
            snprintf(path, sizeof path, "%s/%s", out_dir, name);
            TK_CHECK(strstr(doc, link) != NULL, "%s links %s", docs[k], link);
            char *png = tk_read_text(path);
            TK_CHECK(png && !memcmp(png, "\x89PNG", 4), "%s is a PNG", path);
            free(png);
        }
        /* code named as [`function`](../path): the file exists and defines it */
        for (const char *p = strstr(doc, "[`"); p; p = strstr(p + 1, "[`")) {
            char fn[64], path[128];
            if (sscanf(p, "[`%63[^`]`](../%127[^)])", fn, path) != 2) continue;
            char *src = tk_read_text(path);
            TK_CHECK(src && strstr(src, fn), "%s: %s is in %s", docs[k], fn, path);
            free(src);
        }
        free(doc);
    }
}

static void check_bad_options(const char *bin)
{
    static const char *const bad[] = {"--out-dir /etc/passwd/pics",
                                      "--save /etc/passwd/t",
                                      "--out-dir /etc/passwd",
                                      "999",
                                      "002/9.9",
                                      "--bogus",
                                      "--data /nonexistent",
                                      "--save",
                                      "--lang fr",
                                      "--out-dir pics --lang fr"};
    char empty[128];
    snprintf(empty, sizeof empty, "%s/empty", dir);
    TK_CHECK(tk_run("mkdir %s", empty) == 0, "mkdir %s", empty);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = tk_run("cd %s && %s tour 002/2.2 %s >/dev/null 2>&1", empty, bin, bad[i]);
        TK_CHECK(rc == 2, "attn tour 002/2.2 %s exits 2, got %d", bad[i], rc);
    }
    TK_CHECK(tk_run("[ -z \"$(ls -A %s)\" ]", empty) == 0, "nothing written by the refused runs");
    /* missing folders are made (a user pastes `--out-dir pics` into any folder) */
    TK_CHECK(tk_run("cd %s && %s tour 002/2.2 --out-dir pics/a --save t/b >/dev/null", empty, bin) == 0,
             "attn tour 002/2.2 --out-dir pics/a --save t/b in an empty folder");
    TK_CHECK(tk_run("test -s %s/pics/a/002_2.2_weights.png && test -s %s/t/b/002_2_2.safetensors", empty, empty) == 0,
             "the picture and the tensors are in the folders made for them");
}

int main(void)
{
    const char *bin = getenv("ATTN_BIN");
    TK_CHECK(bin != NULL, "ATTN_BIN is set (run through ctest)");
    if (!bin) return tk_finish("test_tour");
    snprintf(dir, sizeof dir, "/tmp/attn_tour_XXXXXX");
    TK_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    snprintf(save_dir, sizeof save_dir, "%s/save", dir);
    TK_CHECK(tk_run("mkdir %s %s && %s tour --list | grep -v '^002/6' > %s/steps.txt", out_dir, save_dir, bin, dir) ==
                 0,
             "attn tour --list");
    char path[256];
    snprintf(path, sizeof path, "%s/steps.txt", dir);
    char *list = tk_read_text(path);
    TK_CHECK(tk_run("cd %s && %s tour $(cut -d' ' -f1 %s/steps.txt) --save %s > %s/tour.txt", out_dir, bin, dir,
                    save_dir, dir) == 0,
             "attn tour (every step but 002/6.x) runs");
    snprintf(path, sizeof path, "%s/tour.txt", dir);
    char *out = tk_read_text(path);
    if (list && out) {
        for (size_t k = 0; k < sizeof goldens / sizeof goldens[0]; k++)
            check_golden(goldens[k].step, goldens[k].golden, goldens[k].names, step_tol(goldens[k].step));
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) check_shape_line(out, (int)k);
        check_nw_lines(out);
        check_sqrt_d();
        check_docs(out, list);
    }
    check_bad_options(bin);
    free(list);
    free(out);
    tk_run("rm -rf %s", dir);
    return tk_finish("test_tour");
}
