/* attn tour: the tutorials' listings, one step each (tour.h), run alone (attn tour 002/3.2), by
 * seed (attn tour 003) or all in order (attn tour). Options are checked before any step runs. */
#include "tour.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const tour_step steps[] = {
    {"000/demo", "代码实现 · ScaledDotProductAttention(d_k=64) on random Q, K, V",
     "代码实现 · 随机 Q、K、V 上的 ScaledDotProductAttention(d_k=64)", tour_000_demo},
    {"002/1.2", "Self-Attention核心思想 · the input x and SelfAttention(8): Q, K, V",
     "Self-Attention核心思想 · 输入 x 经 SelfAttention(8) 得到 Q、K、V", tour_002_qkv},
    {"002/2.1", "数学原理详解 · scaled_dot_product_attention(Q, K, V)",
     "数学原理详解 · scaled_dot_product_attention(Q, K, V)", tour_002_sdpa},
    {"002/2.2", "注意力权重可视化 · the weights as a heatmap", "注意力权重可视化 · 把权重画成热力图", tour_002_heatmap},
    {"002/3.2", "完整多头注意力实现 · MultiHeadAttention(8, 2)", "完整多头注意力实现 · MultiHeadAttention(8, 2)",
     tour_002_mha},
    {"002/3.3", "多头注意力可视化 · one heatmap per head", "多头注意力可视化 · 每个头一张热力图", tour_002_heads},
    {"002/4.2", "三种注意力模式 · encoder self, masked decoder self and cross attention",
     "三种注意力模式 · 编码器自注意力、带掩码的解码器自注意力、交叉注意力", tour_002_modes},
    {"002/4.3", "完整Transformer层实现 · TransformerBlock(8, 2, 32)",
     "完整Transformer层实现 · TransformerBlock(8, 2, 32)", tour_002_block},
    {"002/5.2", "自注意力与卷积的融合 · ConvAttention(8, 2)", "自注意力与卷积的融合 · ConvAttention(8, 2)",
     tour_002_conv},
    {"002/5.3", "高效注意力实现 · EfficientAttention(8)", "高效注意力实现 · EfficientAttention(8)", tour_002_efficient},
    {"002/6.1", "数据准备 · IMDB, basic_english, the vocabulary, collate_batch",
     "数据准备 · IMDB、basic_english 分词器、词表、collate_batch", tour_002_data},
    {"002/6.2", "基于Self-Attention的分类模型 · AttentionClassifier",
     "基于Self-Attention的分类模型 · AttentionClassifier", tour_002_model},
    {"002/6.3", "训练与注意力可视化 · a short training run and visualize_attention",
     "训练与注意力可视化 · 一次简短的训练和 visualize_attention", tour_002_train},
    {"003/nw-data", "Nadaraya-Watson 核回归 · the training data and the true function",
     "Nadaraya-Watson 核回归 · 训练数据与真实函数", tour_003_nw_data},
    {"003/nw-fixed", "Nadaraya-Watson 核回归 · the fixed Gaussian kernel (non-parametric)",
     "Nadaraya-Watson 核回归 · 固定的高斯核（非参数）", tour_003_nw_fixed},
    {"003/nw-train", "Nadaraya-Watson 核回归 · NWKernelRegression trained by SGD (parametric)",
     "Nadaraya-Watson 核回归 · 用 SGD 训练 NWKernelRegression（带参数）", tour_003_nw_train},
    {"003/masked-softmax", "注意力评分函数 · masked softmax", "注意力评分函数 · 掩蔽 softmax", tour_003_masked_softmax},
    {"003/additive", "加性注意力 · additive attention", "加性注意力 · AdditiveAttention", tour_003_additive},
    {"003/dot", "缩放点积注意力 · scaled dot-product attention", "缩放点积注意力 · DotProductAttention", tour_003_dot},
    {"003/sqrt-d", "缩放点积注意力 · why divide by √d: variance of q·k, softmax saturation",
     "缩放点积注意力 · 为什么除以 √d：q·k 的方差与 softmax 的饱和", tour_003_sqrt_d},
    {"003/bahdanau", "Bahdanau 注意力 · a GRU encoder-decoder with additive attention",
     "Bahdanau 注意力 · 带加性注意力的 GRU 编码器-解码器", tour_003_bahdanau},
    {"003/multihead", "多头注意力 · multi-head attention and self-attention", "多头注意力 · 多头注意力与自注意力",
     tour_003_multihead},
    {"003/positional", "自注意力和位置编码 · the sinusoidal positional encoding", "自注意力和位置编码 · 正弦位置编码",
     tour_003_positional},
    {"003/transformer", "Transformer · FFN, Add & Norm, encoder block, masked decoder block",
     "Transformer · FFN、Add & Norm、编码器块、带掩码的解码器块", tour_003_transformer},
};
enum {
    N_STEPS = sizeof steps / sizeof steps[0]
};

typedef struct tour_options {
    const char *out_dir, *save_dir, *data_dir;
    bool data_given, list;
    int lang; /* index into lang_names */
    bool selected[N_STEPS];
    int order[N_STEPS], n_order; /* steps in the order asked */
} tour_options;

static const char *const lang_names[] = {"auto", "en", "zh-CN", NULL};
enum {
    LANG_AUTO,
    LANG_EN,
    LANG_ZH
};

#define O(kind, field) CLI_OPT_AT(tour_options, kind, field)
static const cli_option options[] = {
    {"--list", NULL, O(CLI_FLAG, list), 0, 0, NULL, NULL, "the steps, one a line"},
    {"--out-dir", "DIR", O(CLI_OUT_DIR, out_dir), 0, 0, NULL, ".", "where figures go (made when missing)"},
    {"--save", "DIR", O(CLI_OUT_DIR, save_dir), 0, 0, NULL, NULL,
     "also write each step's inputs, weights and outputs to DIR/<step>.safetensors (e.g. 002_3_2.safetensors; "
     "DIR made when missing)"},
    {"--data", "DIR", O(CLI_IN_DIR, data_dir), 0, 0, NULL, NULL,
     "aclImdb root for tutorial 002 section 6 (default the shipped aclImdb_mini)"},
    {"--lang", NULL, O(CLI_CHOICE, lang), 0, 0, lang_names, "auto",
     "the language of the titles and notes (auto: Chinese when LC_ALL, LC_MESSAGES or LANG starts with zh)"},
};
#undef O

const cli_spec tour_spec = {
    .cmd = "tour",
    .synopsis = "[STEP ...] [options]",
    .about = "Runs the code listings of the three tutorials (000, 002, 003: docs/seeds.md) one step\n"
             "each, with deterministic weights: prints what the listing prints and draws its figures.\n"
             "STEP is an id (attn tour 002/3.2) or a tutorial (attn tour 003); none: every step in order.",
    CLI_OPTIONS(options),
    .notes = "docs/tutorial.md (English) and docs/tutorial.zh-CN.md (attn tour --lang zh-CN) map every section\n"
             "to its step; docs/seeds.md names the three tutorials and where they are published.\n",
};

/* --lang auto: the locale's language, as gettext reads it (LC_ALL, then LC_MESSAGES, then LANG). */
static bool locale_is_chinese(void)
{
    static const char *const vars[3] = {"LC_ALL", "LC_MESSAGES", "LANG"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return !strncmp(v, "zh", 2);
    }
    return false;
}

/* Selects a step id or every step of a seed ("003"); false when nothing matches. */
static bool select_steps(tour_options *o, const char *arg)
{
    size_t n = strlen(arg);
    bool any = false;
    for (int i = 0; i < N_STEPS; i++) {
        bool match = !strcmp(steps[i].id, arg) || (n == 3 && !strncmp(steps[i].id, arg, 3));
        if (!match) continue;
        any = true;
        if (!o->selected[i]) o->order[o->n_order++] = i;
        o->selected[i] = true;
    }
    return any;
}

static int parse(int argc, char **argv, tour_options *o)
{
    memset(o, 0, sizeof *o);
    const char **args = calloc((size_t)argc, sizeof *args); /* the STEP arguments */
    int n_args = 0;
    int code =
        args ? cli_parse(&tour_spec, o, argc, argv, 1, args, &n_args) : cli_fail(CLI_ERR_DATA, "tour", "out of memory");
    for (int i = 0; code == CLI_OK && i < n_args; i++)
        if (!select_steps(o, args[i]))
            code = cli_fail(CLI_ERR_USAGE, "tour", "unknown step \"%s\" (attn tour --list shows them)", args[i]);
    free(args);
    if (code != CLI_OK) return code;
    if (o->n_order == 0)
        for (int i = 0; i < N_STEPS; i++) o->order[o->n_order++] = i;
    if (cli_check_paths(&tour_spec, o, NULL) != CLI_OK) return CLI_ERR_USAGE; /* --data, when given */
    if (o->lang == LANG_AUTO) o->lang = locale_is_chinese() ? LANG_ZH : LANG_EN;
    o->data_given = o->data_dir != NULL;
    if (o->data_given) return CLI_OK;
    /* the shipped reviews, which only some steps read: no figure or tensor file goes among them */
    o->data_dir = cli_default_data("aclImdb_mini");
    const cli_path data = {"--data", o->data_dir};
    if (!cli_check_folder_apart("tour", "--out-dir", o->out_dir, &data, 1) ||
        (o->save_dir && !cli_check_folder_apart("tour", "--save", o->save_dir, &data, 1)))
        return CLI_ERR_USAGE;
    return CLI_OK;
}

/* 002/3.2 -> 002_3_2 */
static void file_stem(const char *id, char *out, size_t len)
{
    snprintf(out, len, "%s", id);
    for (char *p = out; *p; p++)
        if (*p == '/' || *p == '.' || *p == '-') *p = '_';
}

static int save_step(tour_run *t, const char *save_dir)
{
    char stem[64], path[PATH_MAX];
    file_stem(t->step, stem, sizeof stem);
    snprintf(path, sizeof path, "%s/%s.safetensors", save_dir, stem);
    attn_status st = t->save_status;
    if (st == ATTN_OK) st = attn_st_writer_set_metadata(t->saved, "format", "attn-tour");
    if (st == ATTN_OK) st = attn_st_writer_set_metadata(t->saved, "step", t->step);
    if (st == ATTN_OK) st = attn_st_writer_save(t->saved, path);
    return st == ATTN_OK ? CLI_OK : tour_fail(t);
}

static int run_step(tour_run *t, const tour_step *s, const char *save_dir)
{
    attn_ctx_reset(t->ctx);
    attn_ctx_set_grad_enabled(t->ctx, false);
    attn_ctx_set_training(t->ctx, false);
    attn_rng_seed(&t->rng, TOUR_SEED);
    attn_rng_seed(attn_ctx_rng(t->ctx), TOUR_SEED); /* dropout */
    t->step = s->id;
    t->save_status = ATTN_OK;
    if (save_dir && !(t->saved = attn_st_writer_new())) return tour_fail(t);
    printf("== %s  %s\n", s->id, t->zh ? s->title_zh : s->title);
    int code = s->run(t);
    fflush(stdout);
    if (code == CLI_OK && save_dir) code = save_step(t, save_dir);
    attn_st_writer_free(t->saved);
    t->saved = NULL;
    return code;
}

int cmd_tour(int argc, char **argv)
{
    tour_options o;
    int code = parse(argc, argv, &o);
    if (code != CLI_OK) return code == CLI_HELP_SHOWN ? CLI_OK : code;
    if (o.list) {
        for (int k = 0; k < o.n_order; k++)
            printf("%-18s %s\n", steps[o.order[k]].id,
                   o.lang == LANG_ZH ? steps[o.order[k]].title_zh : steps[o.order[k]].title);
        return CLI_OK;
    }
    /* the folders, made only now that every option is known to be good */
    if ((code = cli_make_dir("tour", "--out-dir", o.out_dir)) != CLI_OK ||
        (o.save_dir && (code = cli_make_dir("tour", "--save", o.save_dir)) != CLI_OK))
        return code;
    tour_run t = {.out_dir = o.out_dir,
                  .data_dir = o.data_dir,
                  .data_given = o.data_given,
                  .ctx = cli_ctx_new(TOUR_SEED),
                  .zh = o.lang == LANG_ZH};
    if (!t.ctx) return cli_fail(CLI_ERR_DATA, "tour", "%s", attn_last_error());
    for (int k = 0; k < o.n_order && code == CLI_OK; k++) {
        if (k) printf("\n");
        code = run_step(&t, &steps[o.order[k]], o.save_dir);
    }
    attn_ctx_free(t.ctx);
    return code;
}
