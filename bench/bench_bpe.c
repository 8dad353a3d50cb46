/* Byte-level BPE speed: every .txt file under a folder (an aclImdb tree: its reviews) read into
 * memory, a tokenizer trained on them (attn_bpe_trainer_add over each file, then finish), and all
 * of them encoded; prints one JSON line with the bytes, the merges learnt, and the seconds and MB/s
 * of counting, of merging, and of encoding (wall clock, one thread: the tokenizer is serial).
 *   bench_bpe DIR [--vocab N] (default 8192) */
#include <attn.h>
#include <attn_data.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef struct corpus {
    char *text;   /* the files back to back */
    size_t *ends; /* (n) each file's end */
    size_t len, cap, n, cap_n;
} corpus;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int add_file(corpus *c, const char *path, size_t size)
{
    if (c->len + size > c->cap) {
        size_t cap = (c->len + size) * 2;
        char *t = realloc(c->text, cap);
        if (!t) return 1;
        c->text = t, c->cap = cap;
    }
    if (c->n == c->cap_n) {
        size_t cap = c->cap_n ? 2 * c->cap_n : 1024;
        size_t *e = realloc(c->ends, cap * sizeof *e);
        if (!e) return 1;
        c->ends = e, c->cap_n = cap;
    }
    FILE *f = fopen(path, "rb");
    if (!f) return 1;
    size_t got = fread(c->text + c->len, 1, size, f);
    fclose(f);
    c->len += got;
    c->ends[c->n++] = c->len;
    return got != size;
}

static int walk(corpus *c, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 1;
    int bad = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        size_t n = strlen(e->d_name);
        if (S_ISDIR(st.st_mode))
            bad |= walk(c, path);
        else if (n > 4 && !strcmp(e->d_name + n - 4, ".txt") && strncmp(e->d_name, "urls_", 5))
            bad |= add_file(c, path, (size_t)st.st_size);
    }
    closedir(d);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_bpe DIR [--vocab N]\n");
        return 2;
    }
    long long vocab = 8192;
    if (argc == 4 && !strcmp(argv[2], "--vocab")) vocab = atoll(argv[3]);
    corpus c = {0};
    if (walk(&c, argv[1]) || !c.n) {
        fprintf(stderr, "bench_bpe: cannot read the .txt files under %s\n", argv[1]);
        return 1;
    }
    const double mb = (double)c.len / 1e6;
    double t0 = now();
    attn_bpe_trainer *t = attn_bpe_trainer_new();
    for (size_t i = 0, at = 0; t && i < c.n; at = c.ends[i++])
        if (attn_bpe_trainer_add(t, c.text + at, c.ends[i] - at) != ATTN_OK) return 1;
    double t1 = now();
    attn_bpe *b = attn_bpe_trainer_finish(t, vocab);
    double t2 = now();
    if (!b) {
        fprintf(stderr, "bench_bpe: %s\n", attn_last_error());
        return 1;
    }
    int64_t *ids = malloc(c.len * sizeof *ids), n_ids = 0;
    double t3 = now();
    for (size_t i = 0, at = 0; ids && i < c.n; at = c.ends[i++])
        n_ids += attn_bpe_encode(b, c.text + at, c.ends[i] - at, ids);
    double t4 = now();
    int64_t merges;
    attn_bpe_merges(b, &merges);
    printf("{\"bench\": \"bpe\", \"files\": %zu, \"mb\": %.2f, \"vocab\": %lld, \"merges\": %lld, \"tokens\": %lld, "
           "\"bytes_per_token\": %.3f, \"count_s\": %.3f, \"count_mb_s\": %.1f, \"merge_s\": %.3f, \"encode_s\": %.3f, "
           "\"encode_mb_s\": %.1f}\n",
           c.n, mb, vocab, (long long)merges, (long long)n_ids, (double)c.len / (double)n_ids, t1 - t0, mb / (t1 - t0),
           t2 - t1, t4 - t3, mb / (t4 - t3));
    attn_bpe_free(b);
    attn_bpe_trainer_free(t);
    free(ids), free(c.text), free(c.ends);
    return 0;
}
