/* attn tour 002/6.1-6.3, seed 002's IMDB section, on the shipped mini set: the shapes the
 * tutorial's pipeline gives (labels (32), texts (32, 512)), the vocabulary of the PyTorch anchor
 * (31,891 entries with <unk> 0 and <pad> 1, data/README.md), the AttentionClassifier's parameter
 * count, the attention picture, and the English tutorial holding the output as printed now (the
 * Chinese one: tests/docs_commands.py), every number as printed: the only decimals, 6.3's losses
 * and accuracies, are not among the values --save writes, so no last digit may differ. */
#include "testkit.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* docs/tutorial.zh-CN.md shows `attn tour --lang zh-CN`: tests/docs_commands.py holds it to that */
static const char *const docs[1] = {"docs/tutorial.md"};
static const char *const steps[3] = {"002/6.1", "002/6.2", "002/6.3"};

/* Lines each step must print. */
static const struct {
    const char *step, *line;
} expected[] = {
    {"002/6.1", "train reviews: 2500 (1250 pos, 1250 neg)"},
    {"002/6.1", "len(vocab): 31891   vocab['<unk>'] = 0   vocab['<pad>'] = 1"},
    {"002/6.1", "first batch: labels (32), texts (32, 512), texts[0, :8] ="},
    {"002/6.2", "  embedding.weight             (31891, 128)"},
    {"002/6.2", "  pos_encoding                 (1, 512, 128)"},
    /* 31891 x 128 + 512 x 128 + 4 x (128 x 128 + 128) + (128 x 256 + 256) + (256 x 2 + 2) */
    {"002/6.2", "  parameters: 4247170"},
    {"002/6.3", "visualize_attention: attn_weights, mean over the 4 heads: (1, 11, 11)"},
    {"002/6.3", "wrote 002_6.3_attention.png"},
};

int main(void)
{
    const char *bin = getenv("ATTN_BIN");
    char root[PATH_MAX], dir[] = "/tmp/attn_tour_imdb_XXXXXX", path[PATH_MAX + 64];
    TK_CHECK(bin && getcwd(root, sizeof root), "ATTN_BIN is set (run through ctest)");
    TK_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    if (!bin) return tk_finish("test_tour_imdb");
    TK_CHECK(
        tk_run("cd %s && %s tour 002/6.1 002/6.2 002/6.3 --data %s/data/aclImdb_mini > tour.txt", dir, bin, root) == 0,
        "attn tour 002/6.1 002/6.2 002/6.3 runs");
    snprintf(path, sizeof path, "%s/tour.txt", dir);
    char *out = tk_read_text(path);
    for (size_t k = 0; out && k < sizeof expected / sizeof expected[0]; k++) {
        char *block = tk_tour_step_output(out, expected[k].step);
        TK_CHECK(block && strstr(block, expected[k].line), "%s prints \"%s\"", expected[k].step, expected[k].line);
        free(block);
    }
    snprintf(path, sizeof path, "%s/002_6.3_attention.png", dir);
    char *png = tk_read_text(path);
    TK_CHECK(png && !memcmp(png, "\x89PNG", 4), "%s is a PNG", path);
    free(png);
    for (size_t d = 0; out && d < sizeof docs / sizeof docs[0]; d++) {
        char *doc = tk_read_text(docs[d]);
        TK_CHECK(doc && strstr(doc, "](tour/002_6.3_attention.png)"), "%s links the attention picture", docs[d]);
        /* no values for a last digit: the decimals these steps print are not saved */
        for (int s = 0; doc && s < 3; s++) tk_tour_doc_check(docs[d], doc, steps[s], out, NULL, (tk_tol){0});
        free(doc);
    }
    free(out);
    tk_run("rm -rf %s", dir);
    return tk_finish("test_tour_imdb");
}
