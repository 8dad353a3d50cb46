/* attn tour, every step but seed 002's IMDB section (test_tour_imdb.c), run once with --save:
 *   - values: where the tutorial's PyTorch code is deterministic given its inputs, every input,
 *     weight and output the step saves matches tests/golden/tour_*.safetensors (written by
 *     make_golden_tour.py from the same PCG32 numbers) within 1e-5 + 1e-5 |ref|; seed 003's
 *     regression matches nw_seed003 (PyTorch running the tutorial) and prints its 20 lines exactly;
 *   - shapes: every shape line printed is PyTorch's shape of that tensor (or the one the tutorial
 *     states);
 *   - the √d_k demonstration agrees with the theory (Var(q.k) = d_k, 1 after scaling);
 *   - docs: the English tutorial holds every step's output as printed now (numbers within their
 *     last digit), links every figure written, and names code files and functions that exist (the
 *     Chinese one shows `attn tour --lang zh-CN`: tests/docs_commands.py holds it to that);
 *   - options: bad ones exit 2 before writing anything; missing --out-dir and --save folders are
 *     made. */
#include "testkit.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* docs/tutorial.zh-CN.md shows `attn tour --lang zh-CN`: tests/docs_commands.py holds it to that */
static const char *const docs[1] = {"docs/tutorial.md"};

/* Steps whose tutorial code is deterministic given its inputs; names NULL: every tensor. */
static const struct { const char *step, *golden, *names; } goldens[] = {
    {"000/demo", "tour_000_demo", NULL},
    {"002/1.2", "tour_002_1_2", NULL},
    {"002/2.1", "tour_002_2_1", NULL},
    {"002/2.2", "tour_002_2_2", NULL},
    {"002/3.2", "tour_002_3_2", NULL},
    {"002/3.3", "tour_002_3_3", NULL},
    {"002/4.2", "tour_002_4_2", NULL},
    {"002/4.3", "tour_002_4_3", NULL},
    {"002/5.2", "tour_002_5_2", NULL},
    {"002/5.3", "tour_002_5_3", NULL},
    {"003/nw-data", "nw_seed003", "x_train,y_train,x_test,y_true"},
    {"003/nw-fixed", "tour_003_nw_fixed", NULL},
    {"003/nw-train", "nw_seed003", "losses,w,y_hat"},
    {"003/masked-softmax", "tour_003_masked_softmax", NULL},
    {"003/additive", "tour_003_additive", NULL},
    {"003/dot", "tour_003_dot", NULL},
    {"003/multihead", "tour_003_multihead", NULL},
    {"003/positional", "tour_003_positional", NULL},
    {"003/transformer", "tour_003_transformer", NULL},
};

/* Printed shape lines "<label>: <shape>": the shape of a golden tensor, or as the tutorial says. */
static const struct { const char *step, *label, *golden, *tensor, *stated; } shapes[] = {
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
    {"003/nw-fixed", "attention weights (test queries x training keys)", "tour_003_nw_fixed",
     "attention_weights", NULL},
    {"003/bahdanau", "encoder outputs: the keys and values h_1..h_7", NULL, NULL, "(4, 7, 16)"}, /* D2L */
    {"003/bahdanau", "encoder hidden state: the first query s_0", NULL, NULL, "(2, 4, 16)"},
    {"003/bahdanau", "decoder output", NULL, NULL, "(4, 7, 10)"},
    {"003/multihead", "attention(X, Y, Y, valid_lens)", "tour_003_multihead", "output", NULL},
    {"003/multihead", "attention weights (batch, heads, queries, keys)", "tour_003_multihead",
     "attention_weights", NULL},
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

static void check_golden(const char *step, const char *golden, const char *names)
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
        if (a && b && attn_same_shape(a, b)) tk_close(what, a->data, b->data, a->numel, 1e-5f, 1e-5f);
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

/* The tutorial's own run prints these 20 lines (PyTorch's losses and w, formatted as it does). */
static void check_nw_lines(const char *out)
{
    char *block = tk_tour_step_output(out, "003/nw-train");
    attn_st_file *g = tk_golden("nw_seed003");
    attn_tensor *loss = g ? attn_st_load(g, "losses", NULL) : NULL, *w = g ? attn_st_load(g, "w", NULL) : NULL;
    int found = 0;
    const char *at = block;
    for (int e = 0; block && loss && w && e < 20; e++) {
        char line[96];
        snprintf(line, sizeof line, "epoch %02d, loss = %.4f, w = %.4f\n", e + 1, loss->data[e], w->data[e]);
        const char *p = strstr(at, line);
        if (p && p[-1] == '\n') {
            found++;
            at = p + strlen(line);
        } else {
            fprintf(stderr, "  missing or out of order: %s", line);
        }
    }
    TK_CHECK(found == 20, "003/nw-train prints the tutorial's 20 lines exactly, in order (%d of 20)", found);
    attn_tensor_free(loss);
    attn_tensor_free(w);
    attn_st_close(g);
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
            if (sscanf(l, "%31s", step) == 1) tk_tour_doc_check(docs[k], doc, step, out);
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
    static const char *const bad[] = {"--out-dir /etc/passwd/pics", "--save /etc/passwd/t", "--out-dir /etc/passwd",
                                      "999", "002/9.9", "--bogus", "--data /nonexistent", "--save", "--lang fr",
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
    TK_CHECK(tk_run("mkdir %s %s && %s tour --list | grep -v '^002/6' > %s/steps.txt", out_dir, save_dir, bin,
                    dir) == 0, "attn tour --list");
    char path[256];
    snprintf(path, sizeof path, "%s/steps.txt", dir);
    char *list = tk_read_text(path);
    TK_CHECK(tk_run("cd %s && %s tour $(cut -d' ' -f1 %s/steps.txt) --save %s > %s/tour.txt", out_dir, bin, dir,
                    save_dir, dir) == 0, "attn tour (every step but 002/6.x) runs");
    snprintf(path, sizeof path, "%s/tour.txt", dir);
    char *out = tk_read_text(path);
    if (list && out) {
        for (size_t k = 0; k < sizeof goldens / sizeof goldens[0]; k++)
            check_golden(goldens[k].step, goldens[k].golden, goldens[k].names);
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
