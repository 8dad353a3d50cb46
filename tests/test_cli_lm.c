/* attn lm end to end on a tiny corpus written here, GPT-2 style and Llama style (GQA, untied):
 * train writes one checkpoint (model and tokenizer) and leaves no lock; eval prints loss,
 * perplexity and bits per byte; generate with one --sample-seed gives one text, starts with the
 * prompt's bytes (a NUL and invalid UTF-8 from stdin included), stops at --max-new-tokens (0: the
 * prompt alone) or at a full context; a prompt past the context is exit 2 naming --truncate, and
 * takes its last tokens with it; explain draws a picture. Hostile: --top-p 0 or nan, a negative
 * --temperature, PROMPT arguments to train, are exit 2 before any work; a checkpoint of another
 * model, one without a tokenizer, and tokenizers with a repeated merge, a merge of an id not made
 * yet, a line that is not two ids, and more ids than the model: exit 1 naming the problem, and
 * nothing is left behind. A run of 6 steps, and one of 3 resumed to 6, give the same losses and the
 * same checkpoint bytes. export: a llama model as llama2.c's files (they load back, the tokenizer
 * in llama2.c's id layout); a gpt2 model and another rotary base refused with nothing written.
 * import of those files, generate with the imported tokenizer, train --init-from and its resume
 * (and a resume without it refused), exported back byte for byte; through Hugging Face's layout
 * and back, the same folder; cut models and tokenizers and a NaN weight refused, nothing left. */
#include "testkit.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *bin;
static char dir[64];

/* attn lm ARGS > out.txt 2> err.txt; the exit status */
static int lm(const char *args)
{
    return tk_run("%s lm %s > %s/out.txt 2> %s/err.txt", bin, args, dir, dir);
}

static char *file_text(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *t = tk_read_text(path);
    return t ? t : calloc(1, 1);
}

static void write_corpus(void)
{
    static const char *const subj[] = {"The film", "This movie", "The story", "The actor", "Every scene"};
    static const char *const pred[] = {"was great", "is boring", "made me laugh", "is a classic", "was too long"};
    char path[256];
    snprintf(path, sizeof path, "%s/corpus.txt", dir);
    FILE *f = fopen(path, "w");
    TK_CHECK(f != NULL, "write the corpus");
    if (!f) return;
    for (int d = 0; d < 60; d++) {
        for (int s = 0; s < 4; s++) fprintf(f, "%s %s. ", subj[(d + s) % 5], pred[(d * 3 + s) % 5]);
        fputs("\n\n", f);
    }
    fclose(f);
}

/* Only the files we expect in dir (no temporary or lock file left) */
static void nothing_left(const char *when)
{
    DIR *d = opendir(dir);
    int stray = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *n = e->d_name;
        if (n[0] == '.' || !strcmp(n, "corpus.txt") || !strcmp(n, "out.txt") || !strcmp(n, "err.txt") ||
            !strcmp(n, "prompt.bin") || !strncmp(n, "lm", 2) || !strncmp(n, "bad", 3))
            continue;
        stray++;
        printf("left behind: %s\n", n);
    }
    if (d) closedir(d);
    TK_CHECK(stray == 0, "%s: nothing else in the folder", when);
}

/* A copy of checkpoint lm.safetensors as bad.safetensors with metadata key set to value (NULL:
 * left out), the rest as it was */
static void damaged_copy(const char *key, const char *value, const char *model)
{
    static const char *const keys[] = {"format",     "version",   "model",      "style",        "vocab_size",
                                       "context",    "d_model",   "num_layers", "num_heads",    "num_kv_heads",
                                       "ffn_hidden", "rope_base", "untied",     "tokenizer.bpe"};
    char path[256];
    snprintf(path, sizeof path, "%s/lm.safetensors", dir);
    attn_st_file *f = attn_st_open(path);
    attn_st_writer *w = attn_st_writer_new();
    TK_CHECK(f && w, "open %s: %s", path, attn_last_error());
    if (!f || !w) return;
    for (size_t i = 0; i < attn_st_count(f); i++) {
        const attn_st_tensor *t = attn_st_at(f, i);
        attn_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data);
    }
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *v = !strcmp(keys[i], key)                ? value
                        : !strcmp(keys[i], "model") && model ? model
                                                             : attn_st_metadata(f, keys[i]);
        if (v) attn_st_writer_set_metadata(w, keys[i], v);
    }
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    TK_CHECK(attn_st_writer_save(w, path) == ATTN_OK, "write %s: %s", path, attn_last_error());
    attn_st_writer_free(w);
    attn_st_close(f);
}

static void expect_refused(const char *what, const char *args, int code, const char *needle)
{
    int st = lm(args);
    char *err = file_text("err.txt");
    TK_CHECK(st == code && strstr(err, needle), "%s: exit %d (want %d), stderr names \"%s\": %s", what, st, code,
             needle, err);
    free(err);
}

static void test_style(const char *style)
{
    char args[1024];
    snprintf(args, sizeof args,
             "train --text %s/corpus.txt --vocab 300 --context 16 --d-model 16 --layers 2 --heads 4 %s "
             "--max-steps 4 --batch-size 4 --warmup 2 --val-tokens 256 --threads 2 --checkpoint %s/lm.safetensors",
             dir, style, dir);
    int st = lm(args);
    char *out = file_text("out.txt"), *err = file_text("err.txt");
    TK_CHECK(st == 0 && strstr(out, "tokenizer: 300 ids") && strstr(out, "bits per byte"), "train %s: exit %d: %s%s",
             style, st, out, err);
    free(out), free(err);
    nothing_left("after train");

    char ck[128];
    snprintf(ck, sizeof ck, "--checkpoint %s/lm.safetensors", dir);
    snprintf(args, sizeof args, "eval --text %s/corpus.txt %s", dir, ck);
    st = lm(args);
    out = file_text("out.txt");
    TK_CHECK(st == 0 && strstr(out, "perplexity") && strstr(out, "bits per byte"), "eval: exit %d: %s", st, out);
    free(out);

    char *texts[2];
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "generate %s --sample-seed 7 --max-new-tokens 8 The film", ck);
        st = lm(args);
        texts[i] = file_text("out.txt");
        TK_CHECK(st == 0 && !strncmp(texts[i], "The film", 8), "generate: exit %d: %s", st, texts[i]);
    }
    TK_CHECK(!strcmp(texts[0], texts[1]), "one seed, one text: \"%s\" and \"%s\"", texts[0], texts[1]);
    free(texts[0]), free(texts[1]);

    snprintf(args, sizeof args, "generate %s --max-new-tokens 0 The film", ck);
    st = lm(args);
    out = file_text("out.txt");
    TK_CHECK(st == 0 && !strcmp(out, "The film\n"), "--max-new-tokens 0: the prompt alone: exit %d, \"%s\"", st, out);
    free(out);
    snprintf(args, sizeof args, "generate %s --greedy --max-new-tokens 1000000 The", ck);
    st = lm(args);
    out = file_text("out.txt");
    TK_CHECK(st == 0 && strlen(out) < 16 * 40, "--max-new-tokens huge: stops at the full context: exit %d (%zu bytes)",
             st, strlen(out));
    free(out);

    /* a NUL and invalid UTF-8 in the prompt, from stdin: the same bytes come out first */
    char path[256];
    snprintf(path, sizeof path, "%s/prompt.bin", dir);
    FILE *f = fopen(path, "wb");
    static const char raw[] = {'T', 'h', 'e', 0, '\xff', '\xc3', ' ', 'f'};
    if (f) fwrite(raw, 1, sizeof raw, f), fclose(f);
    st = tk_run("%s lm generate %s --max-new-tokens 3 < %s > %s/out.txt 2> %s/err.txt", bin, ck, path, dir, dir);
    snprintf(path, sizeof path, "%s/out.txt", dir);
    f = fopen(path, "rb");
    char got[sizeof raw] = {0};
    size_t n = f ? fread(got, 1, sizeof got, f) : 0;
    if (f) fclose(f);
    TK_CHECK(st == 0 && n == sizeof raw && !memcmp(got, raw, sizeof raw),
             "a NUL and invalid UTF-8 in the prompt: exit %d", st);

    snprintf(args, sizeof args,
             "generate %s The film was great the film was great the film was great the film was great the film", ck);
    expect_refused("a prompt past the context", args, 2, "--truncate");
    snprintf(args, sizeof args,
             "generate %s --truncate --max-new-tokens 2 The film was great the film was great the film was great the "
             "film was great the film",
             ck);
    TK_CHECK(lm(args) == 0, "--truncate keeps the prompt's last tokens");
    snprintf(args, sizeof args, "explain %s --out %s/lm_attention.png The film was great", ck, dir);
    st = lm(args);
    snprintf(path, sizeof path, "%s/lm_attention.png", dir);
    TK_CHECK(st == 0 && access(path, F_OK) == 0, "explain draws %s: exit %d", path, st);

    snprintf(args, sizeof args, "generate %s --top-p 0 x", ck);
    expect_refused("--top-p 0", args, 2, "--top-p");
    snprintf(args, sizeof args, "generate %s --top-p nan x", ck);
    expect_refused("--top-p nan", args, 2, "--top-p");
    snprintf(args, sizeof args, "generate %s --temperature -1 x", ck);
    expect_refused("a negative --temperature", args, 2, "--temperature");
    expect_refused("train with a PROMPT", "train hello", 2, "PROMPT");

    static const struct {
        const char *what, *value, *needle;
    } tokenizers[] = {
        {"a repeated merge", "attn-bpe 1\n97 98\n97 98\n", "repeats"},
        {"a merge of an id not made yet", "attn-bpe 1\n97 300\n", "not made before"},
        {"a line that is not two ids", "attn-bpe 1\n97\n98 99\n", "line 2"},
        {"another header", "bpe 2\n", "attn-bpe 1"},
        {"fewer ids than the model", "attn-bpe 1\n97 98\n", "tokenizer has 258 ids"},
        {"no tokenizer", NULL, "no tokenizer"},
    };
    for (size_t i = 0; i < sizeof tokenizers / sizeof *tokenizers; i++) {
        damaged_copy("tokenizer.bpe", tokenizers[i].value, NULL);
        snprintf(args, sizeof args, "generate --checkpoint %s/bad.safetensors x", dir);
        expect_refused(tokenizers[i].what, args, 1, tokenizers[i].needle);
    }
    damaged_copy("", NULL, "attn-classifier");
    snprintf(args, sizeof args, "generate --checkpoint %s/bad.safetensors x", dir);
    expect_refused("a checkpoint of another model", args, 1, "classifier");
    nothing_left("after the refusals");
}

/* The "loss" of each --log-steps line of out.txt, in order, into buf */
static void step_losses(char *buf, size_t cap)
{
    char *out = file_text("out.txt"), *at = out;
    size_t used = 0;
    buf[0] = '\0';
    while ((at = strstr(at, "\nstep ")) != NULL) {
        const char *loss = strstr(at, ": loss ");
        const char *end = loss ? strchr(loss, '\n') : NULL;
        if (!loss || !end) break;
        used += (size_t)snprintf(buf + used, cap - used, "%.*s;", (int)(end - loss - 7), loss + 7);
        at += 6;
    }
    free(out);
}

static void test_resume(void)
{
    char args[1024], whole[2048], parts[2048], more[1024];
    const char *common = "train --vocab 300 --context 16 --d-model 16 --layers 1 --heads 2 --batch-size 4 --warmup 2 "
                         "--val-tokens 256 --threads 2 --log-steps --epochs 1 --dropout 0.1";
    snprintf(args, sizeof args, "%s --text %s/corpus.txt --max-steps 6 --checkpoint %s/lm_whole.safetensors", common,
             dir, dir);
    TK_CHECK(lm(args) == 0, "6 steps at once");
    step_losses(whole, sizeof whole);
    snprintf(args, sizeof args, "%s --text %s/corpus.txt --max-steps 3 --checkpoint %s/lm_part.safetensors", common,
             dir, dir);
    TK_CHECK(lm(args) == 0, "3 steps");
    step_losses(parts, sizeof parts);
    snprintf(args, sizeof args, "%s --text %s/corpus.txt --max-steps 6 --resume --checkpoint %s/lm_part.safetensors",
             common, dir, dir);
    TK_CHECK(lm(args) == 0, "resumed to 6 steps");
    step_losses(more, sizeof more);
    strncat(parts, more, sizeof parts - strlen(parts) - 1);
    TK_CHECK(strlen(whole) > 6 && !strcmp(whole, parts), "3 steps + resume == 6 steps: \"%s\" and \"%s\"", whole,
             parts);
    TK_CHECK(tk_run("cmp -s %s/lm_whole.safetensors %s/lm_part.safetensors", dir, dir) == 0,
             "and the same checkpoint bytes");
}

/* export of the checkpoint lm.safetensors: want_ok, or exit 1 naming needle with nothing written */
static void test_export(bool want_ok, const char *needle)
{
    char args[1024];
    snprintf(args, sizeof args,
             "export --checkpoint %s/lm.safetensors --model-out %s/lm_model.bin --tokenizer-out %s/lm_tokenizer.bin",
             dir, dir, dir);
    if (!want_ok) {
        expect_refused(needle, args, 1, needle);
        TK_CHECK(tk_run("test -e %s/lm_model.bin || test -e %s/lm_tokenizer.bin", dir, dir) != 0,
                 "a refused export writes nothing");
        return;
    }
    int st = lm(args);
    char *out = file_text("out.txt"), *err = file_text("err.txt");
    TK_CHECK(st == 0 && strstr(out, "llama2.c version 0, 300 ids"), "export: exit %d: %s%s", st, out, err);
    free(out), free(err);
    char path[256];
    snprintf(path, sizeof path, "%s/lm_model.bin", dir);
    attn_params *p = attn_params_new();
    attn_lm m;
    TK_CHECK(attn_lm_load_llama2c(&m, p, path, NULL) == ATTN_OK && m.cfg.vocab_size == 300 && m.cfg.context == 16,
             "the exported model loads: %s", attn_last_error());
    attn_lm_free(&m);
    attn_params_free(p);
    snprintf(path, sizeof path, "%s/lm_tokenizer.bin", dir);
    FILE *f = fopen(path, "rb");
    uint32_t longest = 0;
    int ids = 0, bos = 0, byte_a = 0;
    if (f && fread(&longest, 4, 1, f) == 1) {
        struct {
            float score;
            int32_t len;
        } e;
        char piece[64];
        for (;
             fread(&e, 8, 1, f) == 1 && e.len >= 0 && e.len < 64 && fread(piece, 1, (size_t)e.len, f) == (size_t)e.len;
             ids++) {
            bos += ids == 1 && e.len == 5 && !memcmp(piece, "\n<s>\n", 5);
            byte_a += ids == 3 + 'a' && e.len == 1 && piece[0] == 'a';
        }
        TK_CHECK(feof(f) && ids == 300 && bos && byte_a && longest >= 5,
                 "the tokenizer: 300 ids (%d), BOS at 1, byte 'a' at 3 + 'a', nothing after", ids);
    }
    TK_CHECK(f != NULL, "the tokenizer file is there");
    if (f) fclose(f);
    expect_refused("export with a PROMPT", "export --model-out x.bin hello", 2, "PROMPT");
    expect_refused("export without --model-out", "export", 2, "--model-out");
    tk_run("rm -f %s/lm_model.bin %s/lm_tokenizer.bin", dir, dir);
}

/* The exported lm_model.bin and lm_tokenizer.bin imported, used, tuned and exported back: the same
 * files; hostile imports refused with nothing left */
static void test_import(void)
{
    char args[1024];
    snprintf(args, sizeof args,
             "export --checkpoint %s/lm.safetensors --model-out %s/lm_model.bin --tokenizer-out %s/lm_tokenizer.bin",
             dir, dir, dir);
    TK_CHECK(lm(args) == 0, "export");
    snprintf(
        args, sizeof args,
        "import --model-in %s/lm_model.bin --tokenizer-in %s/lm_tokenizer.bin --checkpoint %s/lm_imported.safetensors",
        dir, dir, dir);
    int st = lm(args);
    char *out = file_text("out.txt");
    TK_CHECK(st == 0 && strstr(out, "300 ids"), "import: exit %d: %s", st, out);
    free(out);
    snprintf(
        args, sizeof args,
        "export --checkpoint %s/lm_imported.safetensors --model-out %s/lm_back.bin --tokenizer-out %s/lm_back_tok.bin",
        dir, dir, dir);
    TK_CHECK(lm(args) == 0, "export the imported model");
    TK_CHECK(tk_run("cmp -s %s/lm_model.bin %s/lm_back.bin && cmp -s %s/lm_tokenizer.bin %s/lm_back_tok.bin", dir, dir,
                    dir, dir) == 0,
             "imported and exported back: the same model and tokenizer files byte for byte");
    /* through Hugging Face's layout: the imported model (rotary pairs) as halves, imported again, and
     * exported again: the same folder */
    snprintf(args, sizeof args, "export --checkpoint %s/lm_imported.safetensors --format hf --hf-out %s/lm_hf1", dir,
             dir);
    st = lm(args);
    out = file_text("out.txt");
    TK_CHECK(st == 0 && strstr(out, "LlamaForCausalLM"), "export --format hf: exit %d: %s", st, out);
    free(out);
    snprintf(args, sizeof args,
             "import --hf-in %s/lm_hf1 --tokenizer-in %s/lm_tokenizer.bin --checkpoint %s/lm_fromhf.safetensors", dir,
             dir, dir);
    TK_CHECK(lm(args) == 0, "import --hf-in");
    snprintf(args, sizeof args, "export --checkpoint %s/lm_fromhf.safetensors --format hf --hf-out %s/lm_hf2", dir,
             dir);
    TK_CHECK(lm(args) == 0, "and exported again");
    TK_CHECK(tk_run("cmp -s %s/lm_hf1/model.safetensors %s/lm_hf2/model.safetensors && cmp -s %s/lm_hf1/config.json "
                    "%s/lm_hf2/config.json",
                    dir, dir, dir, dir) == 0,
             "Hugging Face's folder, imported and exported again: the same files");
    snprintf(args, sizeof args,
             "export --checkpoint %s/lm_fromhf.safetensors --format hf --hf-out %s/x --model-out %s/y", dir, dir, dir);
    expect_refused("--format hf with --model-out", args, 2, "--hf-out DIR alone");
    snprintf(args, sizeof args,
             "import --hf-in %s/lm_hf1 --model-in %s/lm_model.bin --tokenizer-in %s/lm_tokenizer.bin "
             "--checkpoint %s/x.safetensors",
             dir, dir, dir, dir);
    expect_refused("import of two models", args, 2, "(one)");
    tk_run("rm -rf %s/lm_hf1 %s/lm_hf2 %s/lm_fromhf.safetensors", dir, dir, dir);

    snprintf(args, sizeof args, "generate --checkpoint %s/lm_imported.safetensors --greedy --max-new-tokens 5 The film",
             dir);
    st = lm(args);
    out = file_text("out.txt");
    TK_CHECK(st == 0 && !strncmp(out, "The film", 8), "generate with the imported tokenizer: exit %d: %s", st, out);
    free(out);
    const char *tune = "train --text %s/corpus.txt --init-from %s/lm_imported.safetensors --batch-size 4 --warmup 2 "
                       "--val-tokens 256 --threads 2 --checkpoint %s/lm_tuned.safetensors --max-steps %d%s";
    snprintf(args, sizeof args, tune, dir, dir, dir, 2, "");
    st = lm(args);
    out = file_text("out.txt");
    TK_CHECK(st == 0 && strstr(out, "llama, 2 layers, d 16") && !strstr(out, "tokenizer:"),
             "train --init-from: the imported model and tokenizer tuned: exit %d: %s", st, out);
    free(out);
    snprintf(args, sizeof args, tune, dir, dir, dir, 3, " --resume");
    TK_CHECK(lm(args) == 0, "and resumed");
    snprintf(args, sizeof args,
             "train --text %s/corpus.txt --resume --max-steps 4 --threads 2 --checkpoint %s/lm_tuned.safetensors", dir,
             dir);
    expect_refused("resumed without --init-from", args, 2, "--init-from");
    nothing_left("after import and tuning");

    /* hostile files: exit 1 naming the problem, no checkpoint and no lock */
    tk_run("head -c 1000 %s/lm_model.bin > %s/bad_model.bin", dir, dir);
    snprintf(args, sizeof args,
             "import --model-in %s/bad_model.bin --tokenizer-in %s/lm_tokenizer.bin --checkpoint %s/out.safetensors",
             dir, dir, dir);
    expect_refused("a cut model", args, 1, "needs");
    tk_run("head -c 2000 %s/lm_tokenizer.bin > %s/bad_tok.bin", dir, dir);
    snprintf(args, sizeof args,
             "import --model-in %s/lm_model.bin --tokenizer-in %s/bad_tok.bin --checkpoint %s/out.safetensors", dir,
             dir, dir);
    expect_refused("a cut tokenizer", args, 1, "bad_tok.bin");
    tk_run("cp %s/lm_model.bin %s/bad_nan.bin && printf '\\000\\000\\300\\177' | dd of=%s/bad_nan.bin bs=1 "
           "seek=2000 conv=notrunc 2>/dev/null",
           dir, dir, dir);
    snprintf(args, sizeof args,
             "import --model-in %s/bad_nan.bin --tokenizer-in %s/lm_tokenizer.bin --checkpoint %s/out.safetensors", dir,
             dir, dir);
    expect_refused("a NaN weight", args, 1, "NaN");
    snprintf(args, sizeof args, "import --model-in %s/lm_model.bin --checkpoint %s/out.safetensors", dir, dir);
    expect_refused("no --tokenizer-in", args, 2, "--tokenizer-in");
    TK_CHECK(tk_run("test -e %s/out.safetensors || test -e %s/out.safetensors.lock", dir, dir) != 0,
             "refused imports leave no checkpoint and no lock");
    tk_run("rm -f %s/lm_*.bin %s/bad_*.bin %s/lm_imported.safetensors %s/lm_tuned.safetensors", dir, dir, dir, dir);
}

int main(void)
{
    bin = getenv("ATTN_BIN");
    TK_CHECK(bin != NULL, "ATTN_BIN is not set (run through ctest)");
    snprintf(dir, sizeof dir, "/tmp/attn_lm_XXXXXX");
    if (!bin || !mkdtemp(dir)) return tk_finish("test_cli_lm");
    write_corpus();
    test_style("--style gpt2");
    test_export(false, "gpt2-style");
    test_style("--style llama --kv-heads 2 --untied --rope-base 500");
    test_export(false, "another rotary base");
    test_style("--style llama --kv-heads 2");
    test_export(true, NULL);
    test_import();
    test_resume();
    tk_run("rm -rf %s", dir);
    return tk_finish("test_cli_lm");
}
