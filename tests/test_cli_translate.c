/* attn translate end to end on a tiny corpus written here: train --keep-epochs K keeps the
 * parameters of the last K epochs and removes older ones; eval --average of a checkpoint with
 * itself decodes exactly as the checkpoint alone (the mean of equal parameters is those
 * parameters: a wrong sum or divisor changes the output); averaging epochs runs and says so; a
 * checkpoint of another model is refused with a message naming it. Refused before any work with
 * exit 2: an empty --src or --split, a --keep-epochs file that is a folder (nothing trained). A
 * resume from a copy whose metadata is damaged (RNG state, global batch, max_len out of range:
 * exit 1) or holds another max_len than the options give (exit 2) names the key and value. */
#define _GNU_SOURCE /* memmem */
#include "testkit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static int run(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool exists(const char *dir, const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* The whole of dir/name as a malloc'd string ("" when missing). */
static char *slurp(const char *dir, const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    char *buf = calloc(1 << 16, 1);
    if (f && buf) buf[fread(buf, 1, (1 << 16) - 1, f)] = '\0';
    if (f) fclose(f);
    return buf;
}

/* The BLEU line of an eval log without its trailing ", N s" (the time). */
static void bleu_line(const char *log, char *out, size_t cap)
{
    const char *at = strstr(log, "test_2016_flickr: BLEU");
    out[0] = '\0';
    if (!at) return;
    size_t n = strcspn(at, "\n");
    snprintf(out, cap, "%.*s", (int)n, at);
    char *comma = strrchr(out, ',');
    if (comma) *comma = '\0';
}

static void write_corpus(const char *dir)
{
    const char *en_noun[] = {"man", "woman", "dog", "cat", "child"},
               *fr_noun[] = {"homme", "femme", "chien", "chat", "enfant"};
    const char *en_verb[] = {"runs", "sleeps", "eats", "plays"}, *fr_verb[] = {"court", "dort", "mange", "joue"};
    const char *splits[] = {"train", "val", "test_2016_flickr"};
    for (int s = 0; s < 3; s++) {
        char en_path[600], fr_path[600];
        snprintf(en_path, sizeof en_path, "%s/%s.en.gz", dir, splits[s]);
        snprintf(fr_path, sizeof fr_path, "%s/%s.fr.gz", dir, splits[s]);
        gzFile en = gzopen(en_path, "wb"), fr = gzopen(fr_path, "wb");
        TK_CHECK(en && fr, "cannot write the corpus in %s", dir);
        if (!en || !fr) return;
        int count = s == 0 ? 60 : 12;
        for (int i = 0; i < count; i++) {
            int n = (i + s) % 5, v = (i / 5 + s) % 4;
            gzprintf(en, "A %s %s in the park.\n", en_noun[n], en_verb[v]);
            gzprintf(fr, "Un %s %s dans le parc.\n", fr_noun[n], fr_verb[v]);
        }
        gzclose(en);
        gzclose(fr);
    }
}

/* Copies dir/ck.safetensors (its vocabularies inside) to dir/bad.safetensors with metadata key = value:
 * the JSON header rewritten after its new length (the tensors' offsets count from its end). */
static bool edit_copy(const char *dir, const char *key, const char *value)
{
    char path[600], needle[96];
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    FILE *f = fopen(path, "rb");
    long size = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    unsigned char *buf = size > 8 ? malloc((size_t)size) : NULL;
    bool ok = buf && fseek(f, 0, SEEK_SET) == 0 && fread(buf, 1, (size_t)size, f) == (size_t)size;
    if (f) fclose(f);
    uint64_t n = 0;
    for (int i = 7; ok && i >= 0; i--) n = n << 8 | buf[i];
    snprintf(needle, sizeof needle, "\"%s\":\"", key);
    char *at = ok && n <= (uint64_t)size - 8 ? memmem(buf + 8, (size_t)n, needle, strlen(needle)) : NULL;
    if (at) {
        char *from = at + strlen(needle), *to = strchr(from, '"');
        uint64_t len = n - (uint64_t)(to - from) + strlen(value);
        unsigned char head[8];
        for (int i = 0; i < 8; i++) head[i] = (unsigned char)(len >> (8 * i));
        snprintf(path, sizeof path, "%s/bad.safetensors", dir);
        FILE *out = fopen(path, "wb");
        ok = out && fwrite(head, 1, 8, out) == 8 && fwrite(buf + 8, 1, (size_t)(from - (char *)buf - 8), out) &&
             fputs(value, out) >= 0 && fwrite(to, 1, (size_t)((char *)buf + size - to), out);
        if (out) ok = fclose(out) == 0 && ok;
    }
    free(buf);
    return at && ok; /* the vocabularies are inside: copied with the rest */
}

/* The exit status of `attn translate ARGS` (stderr in dir/err.log), and whether that log holds
 * every needle. */
static int refused(const char *bin, const char *dir, const char *args, const char *n1, const char *n2, bool *named)
{
    int status = tk_run("%s translate %s > /dev/null 2> %s/err.log", bin, args, dir);
    char *err = slurp(dir, "err.log");
    *named = err && strstr(err, n1) && (!n2 || strstr(err, n2));
    free(err);
    return status;
}

int main(void)
{
    const char *bin = getenv("ATTN_BIN");
    TK_CHECK(bin != NULL, "ATTN_BIN is not set (run through ctest)");
    if (!bin) return tk_finish("test_cli_translate");
    char dir[] = "/tmp/attn_translate_XXXXXX", cmd[2048];
    TK_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char data[sizeof dir + 8]; /* the corpus in a folder of its own: no output goes among the inputs */
    snprintf(data, sizeof data, "%s/data", dir);
    TK_CHECK(mkdir(data, 0700) == 0, "mkdir %s", data);
    write_corpus(data);
    const char *tiny =
        "--heads 2 --ffn 16 --layers 1 --batch-size 8 --min-freq 1 --threads 1 --beam 2 --warmup 8 --dropout 0";

    snprintf(cmd, sizeof cmd,
             "%s translate train --data %s --d-model 16 %s --epochs 8 --keep-epochs 2 "
             "--checkpoint %s/ck.safetensors > %s/train.log 2>&1",
             bin, data, tiny, dir, dir);
    TK_CHECK(run(cmd) == 0, "training failed: %s", cmd);
    TK_CHECK(!exists(dir, "ck.safetensors.epoch6"), "--keep-epochs 2 left epoch 6's file behind");
    TK_CHECK(exists(dir, "ck.safetensors.epoch7") && exists(dir, "ck.safetensors.epoch8"),
             "--keep-epochs 2 did not keep epochs 7 and 8");

    snprintf(cmd, sizeof cmd, "%s translate eval --data %s --checkpoint %s/ck.safetensors --beam 2 > %s/alone.log 2>&1",
             bin, data, dir, dir);
    TK_CHECK(run(cmd) == 0, "eval failed: %s", cmd);
    snprintf(cmd, sizeof cmd,
             "%s translate eval --data %s --checkpoint %s/ck.safetensors --beam 2 "
             "--average %s/ck.safetensors > %s/self.log 2>&1",
             bin, data, dir, dir, dir);
    TK_CHECK(run(cmd) == 0, "eval --average failed: %s", cmd);
    char *alone = slurp(dir, "alone.log"), *self = slurp(dir, "self.log");
    char a[512], b[512];
    bleu_line(alone, a, sizeof a);
    bleu_line(self, b, sizeof b);
    printf("alone:        %s\nwith itself:  %s\n", a, b);
    TK_CHECK(a[0] && !strcmp(a, b), "the mean of a checkpoint with itself decodes differently:\n  %s\n  %s", a, b);
    TK_CHECK(strstr(self, "the mean of 2 checkpoints") != NULL, "eval --average does not say what it averaged");

    snprintf(cmd, sizeof cmd,
             "%s translate eval --data %s --checkpoint %s/ck.safetensors --beam 2 --average "
             "%s/ck.safetensors.epoch7,%s/ck.safetensors.epoch8 > %s/epochs.log 2>&1",
             bin, data, dir, dir, dir, dir);
    TK_CHECK(run(cmd) == 0, "eval --average of the kept epochs failed: %s", cmd);
    char *epochs = slurp(dir, "epochs.log");
    TK_CHECK(strstr(epochs, "the mean of 3 checkpoints") && strstr(epochs, "test_2016_flickr: BLEU"),
             "eval --average of 3 checkpoints: %s", epochs);

    snprintf(
        cmd, sizeof cmd,
        "%s translate train --data %s --d-model 8 %s --epochs 1 --checkpoint %s/other.safetensors "
        "> /dev/null 2>&1 && %s translate eval --data %s --checkpoint %s/ck.safetensors --average %s/other.safetensors "
        "> %s/mismatch.log 2>&1",
        bin, data, tiny, dir, bin, data, dir, dir, dir);
    TK_CHECK(run(cmd) == 1, "a checkpoint of another model was not refused with exit status 1: %s", cmd);
    char *mismatch = slurp(dir, "mismatch.log");
    TK_CHECK(strstr(mismatch, "other.safetensors holds a different model than") != NULL,
             "the refusal does not name the file: %s", mismatch);

    /* empty names and an epoch file that cannot be written: exit 2 before any work */
    char args[1024];
    bool named;
    snprintf(args, sizeof args, "eval --data %s --checkpoint %s/ck.safetensors --src ''", data, dir);
    TK_CHECK(refused(bin, dir, args, "--src is empty", NULL, &named) == 2 && named, "an empty --src: %s", args);
    snprintf(args, sizeof args, "train --data %s --d-model 16 %s --split '' --checkpoint %s/e.safetensors", data, tiny,
             dir);
    TK_CHECK(refused(bin, dir, args, "--split is empty", NULL, &named) == 2 && named, "an empty --split: %s", args);
    snprintf(cmd, sizeof cmd, "mkdir %s/kf.safetensors.epoch1", dir);
    run(cmd);
    snprintf(args, sizeof args,
             "train --data %s --d-model 16 %s --epochs 1 --keep-epochs 1 --checkpoint "
             "%s/kf.safetensors",
             data, tiny, dir);
    TK_CHECK(refused(bin, dir, args, "--keep-epochs", "kf.safetensors.epoch1", &named) == 2 && named &&
                 !exists(dir, "kf.safetensors"),
             "an epoch file that is a folder is refused before training: %s", args);

    /* resume from a damaged run position or another model's metadata: refused, naming the key */
    static const struct {
        const char *key, *value;
        int status;
    } damaged[] = {
        {"run.rng_state", "abc", 1}, {"run.rng_spare", "nan", 1}, {"run.global_batch", "0", 1},
        {"max_len", "1", 1},         {"max_len", "40", 2},
    };
    for (size_t i = 0; i < sizeof damaged / sizeof damaged[0]; i++) {
        TK_CHECK(edit_copy(dir, damaged[i].key, damaged[i].value), "cannot write a copy with %s", damaged[i].key);
        snprintf(args, sizeof args,
                 "train --data %s --d-model 16 %s --epochs 9 --resume --checkpoint "
                 "%s/bad.safetensors",
                 data, tiny, dir);
        int status = refused(bin, dir, args, damaged[i].key, damaged[i].value, &named);
        TK_CHECK(status == damaged[i].status && named, "resume with %s = \"%s\": exit %d (expected %d, naming both)",
                 damaged[i].key, damaged[i].value, status, damaged[i].status);
    }

    free(alone), free(self), free(epochs), free(mismatch);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    run(cmd);
    return tk_finish("test_cli_translate");
}
