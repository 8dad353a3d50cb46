/* attn plot heatmap: the colour scale is the data's range unless --range unit asks for [0, 1]
 * (the documented default); --grid panels are titled "head 1", "head 2", ... or --panel-titles;
 * seed 002's picture (token labels, axis titles, values in the cells) is drawn as asked. Checked
 * on SVG output, which carries every text drawn as a <text> element. An empty --tensor or
 * --labels, and an --index item that is not an integer, exit 2 naming the option. */
#include "testkit.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/attn_cli_plot_XXXXXX";

/* Whether the SVG at name holds the text exactly (a whole <text> element). */
static bool svg_has(const char *name, const char *text)
{
    char path[128], needle[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(needle, sizeof needle, "\">%s</text>", text);
    char *svg = tk_read_text(path);
    bool found = svg && strstr(svg, needle);
    free(svg);
    return found;
}

/* Whether `attn plot heatmap ARGS` exits 2 with a message that holds needle. */
static bool refused(const char *bin, const char *args, const char *needle)
{
    char err[128];
    snprintf(err, sizeof err, "%s/err.log", dir);
    int status = tk_run("%s plot heatmap %s --out %s/no.svg > /dev/null 2> %s", bin, args, dir, err);
    char *text = tk_read_text(err);
    bool ok = status == 2 && text && strstr(text, needle);
    free(text);
    return ok;
}

int main(void)
{
    const char *bin = getenv("ATTN_BIN");
    TK_CHECK(bin != NULL && mkdtemp(dir) != NULL, "ATTN_BIN is set (run through ctest) and mkdtemp");
    if (!bin) return tk_finish("test_cli_plot");
    float w[2 * 3 * 3]; /* two heads of 3 x 3, values 10 .. 27 */
    for (int i = 0; i < 18; i++) w[i] = 10.0f + (float)i;
    attn_st_writer *wr = attn_st_writer_new();
    char in[128];
    snprintf(in, sizeof in, "%s/w.safetensors", dir);
    TK_OK(attn_st_writer_add(wr, "w", ATTN_DTYPE_F32, 3, (int64_t[]){2, 3, 3}, w));
    TK_OK(attn_st_writer_save(wr, in));
    attn_st_writer_free(wr);

    TK_CHECK(tk_run("%s plot heatmap --in %s --tensor w --grid --out %s/auto.svg >/dev/null", bin, in, dir) == 0,
             "plot --grid");
    TK_CHECK(svg_has("auto.svg", "head 1") && svg_has("auto.svg", "head 2"), "panels titled head 1, head 2");
    TK_CHECK(svg_has("auto.svg", "20") && !svg_has("auto.svg", "1.0"),
             "the default colour scale spans the data (10 .. 27), not [0, 1]");
    TK_CHECK(tk_run("%s plot heatmap --in %s --tensor w --grid --range unit --panel-titles a,b --out %s/unit.svg "
                    ">/dev/null",
                    bin, in, dir) == 0,
             "plot --range unit --panel-titles");
    TK_CHECK(svg_has("unit.svg", "1.0") && svg_has("unit.svg", "a") && svg_has("unit.svg", "b") &&
                 !svg_has("unit.svg", "head 1"),
             "--range unit draws [0, 1]; --panel-titles replaces head i");
    TK_CHECK(tk_run("%s plot heatmap --in %s --tensor w --index 1 --labels 词1,词2,词3 --xlabel Key位置 "
                    "--ylabel Query位置 --values on --out %s/seed.svg >/dev/null",
                    bin, in, dir) == 0,
             "plot with seed 002's labels");
    TK_CHECK(svg_has("seed.svg", "词3") && svg_has("seed.svg", "Key位置") && svg_has("seed.svg", "Query位置") &&
                 svg_has("seed.svg", "27.00"),
             "token labels, axis titles and the values in the cells");
    TK_CHECK(tk_run("%s plot heatmap --in %s --tensor w --grid --panel-titles a --out %s/bad.svg 2>/dev/null", bin, in,
                    dir) == 2,
             "--panel-titles of the wrong count exits 2");
    char bad[160];
    snprintf(bad, sizeof bad, "%s/bad.svg", dir);
    TK_CHECK(access(bad, F_OK) != 0, "and writes nothing");
    static const struct {
        const char *args, *needle;
    } bad_args[] = {
        {"--tensor ''", "--tensor is empty"},
        {"--tensor w --labels ''", "--labels is empty"},
        {"--tensor w --index 1,", "--index expects an integer"},
        {"--tensor w --index 0,,1", "--index expects an integer"},
        {"--tensor w --index ' 1'", "--index expects an integer"},
        {"--tensor w --index +1", "--index expects an integer"},
    };
    for (size_t i = 0; i < sizeof bad_args / sizeof bad_args[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "--in %s %s", in, bad_args[i].args);
        TK_CHECK(refused(bin, args, bad_args[i].needle), "plot %s: exit 2 with \"%s\"", args, bad_args[i].needle);
    }
    tk_run("rm -rf %s", dir);
    return tk_finish("test_cli_plot");
}
