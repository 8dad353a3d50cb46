/* attn lm's corpus: documents from a text file, a folder of .txt files or an aclImdb folder, one
 * stream of token ids (<|endoftext|> before each document), and the tokenizer as checkpoint text. */
#include "lm.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_DOC_BYTES (64u << 20) /* one document; a corpus is many */

void lm_docs_free(lm_docs *d)
{
    for (int64_t i = 0; i < d->count; i++) free(d->text[i]);
    free(d->text), free(d->len);
    memset(d, 0, sizeof *d);
}

/* Appends text[0..n) as a document (copied, "<br />" as a newline) */
static int add_doc(lm_docs *d, const char *text, size_t n)
{
    if ((d->count & (d->count - 1)) == 0) { /* grow at powers of two */
        size_t cap = d->count ? 2 * (size_t)d->count : 64;
        char **t = realloc(d->text, cap * sizeof *t);
        if (t) d->text = t;
        size_t *l = realloc(d->len, cap * sizeof *l);
        if (l) d->len = l;
        if (!t || !l) return cli_fail(CLI_ERR_DATA, "lm", "out of memory for %lld documents", (long long)d->count);
    }
    char *copy = malloc(n + 1);
    if (!copy) return cli_fail(CLI_ERR_DATA, "lm", "out of memory");
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (text[i] == '<' && n - i >= 6 && !memcmp(text + i, "<br />", 6)) {
            copy[out++] = '\n';
            i += 5;
        } else {
            copy[out++] = text[i];
        }
    }
    copy[out] = '\0';
    d->text[d->count] = copy, d->len[d->count++] = out, d->bytes += out;
    return CLI_OK;
}

/* The bytes of the regular file at path, malloc'd (NUL after them) */
static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_DOC_BYTES * 16ull) {
        cli_fail(CLI_ERR_DATA, "lm", "%s: %s", path,
                 !f                     ? strerror(errno)
                 : !S_ISREG(st.st_mode) ? "not a regular file"
                                        : "larger than 1 GiB");
        if (f) fclose(f);
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    bool bad = !buf || ferror(f) || got != (size_t)st.st_size;
    fclose(f);
    if (bad) {
        cli_fail(CLI_ERR_DATA, "lm", "%s: %s", path,
                 buf ? "read failed (the file changed while read)" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[got] = '\0';
    *len = got;
    return buf;
}

/* --text FILE: paragraphs (blocks of lines between empty lines) as documents */
static int load_text_file(lm_docs *d, const char *path)
{
    size_t n;
    char *buf = read_all(path, &n);
    if (!buf) return CLI_ERR_DATA;
    int code = CLI_OK;
    size_t start = 0;
    for (size_t i = 0; code == CLI_OK && i <= n; i++) {
        const bool blank = i + 1 < n && buf[i] == '\n' && buf[i + 1] == '\n';
        if (i == n || blank) {
            size_t a = start, b = i;
            while (a < b && buf[a] == '\n') a++;
            if (b > a) code = add_doc(d, buf + a, b - a);
            start = i + 1;
        }
    }
    free(buf);
    return code;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Every .txt file under dir, in name order, as documents */
static int load_txt_tree(lm_docs *d, const char *dir, int depth)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, by_name);
    if (n < 0) return cli_fail(CLI_ERR_DATA, "lm", "%s: %s", dir, strerror(errno));
    int code = CLI_OK;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        const size_t len = strlen(name);
        char path[4096];
        struct stat st;
        if (code == CLI_OK && name[0] != '.' && snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path &&
            stat(path, &st) == 0) {
            if (S_ISDIR(st.st_mode) && depth < 8) {
                code = load_txt_tree(d, path, depth + 1);
            } else if (S_ISREG(st.st_mode) && len > 4 && !strcmp(name + len - 4, ".txt") && strncmp(name, "urls_", 5)) {
                size_t m;
                char *text = read_all(path, &m);
                code = text ? add_doc(d, text, m) : CLI_ERR_DATA;
                free(text);
            }
        }
        free(names[i]);
    }
    free(names);
    return code;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* An aclImdb folder: the reviews of split (train: train/{neg,pos} and train/unsup when there) */
static int load_imdb(lm_docs *d, const char *root, const char *split)
{
    attn_labeled_texts t = {0};
    if (attn_imdb_load(&t, root, split) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, "lm", "--data %s: %s", root, attn_last_error());
    int code = CLI_OK;
    for (int64_t i = 0; code == CLI_OK && i < t.count; i++) code = add_doc(d, t.texts[i], strlen(t.texts[i]));
    attn_labeled_texts_free(&t);
    char unsup[4096];
    snprintf(unsup, sizeof unsup, "%s/train/unsup", root);
    if (code == CLI_OK && !strcmp(split, "train") && is_dir(unsup)) code = load_txt_tree(d, unsup, 7);
    return code;
}

int lm_docs_load(lm_docs *out, const lm_options *o, const char *split)
{
    memset(out, 0, sizeof *out);
    int code;
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/train/pos", o->data ? o->data : "");
    if (o->text) {
        code = load_text_file(out, o->text);
    } else if (is_dir(probe)) {
        return load_imdb(out, o->data, split);
    } else {
        code = load_txt_tree(out, o->data, 0);
    }
    if (code != CLI_OK) return code;
    if (out->count < 2)
        return cli_fail(CLI_ERR_DATA, "lm",
                        "%s: %lld documents; expected at least 2 (one to train on, one to validate)",
                        o->text ? o->text : o->data, (long long)out->count);
    /* not an aclImdb folder: the first 95% of the documents train, the rest test */
    const bool train = !strcmp(split, "train");
    const int64_t cut = out->count - (out->count + 19) / 20, from = train ? 0 : cut, to = train ? cut : out->count;
    out->bytes = 0;
    for (int64_t i = 0; i < out->count; i++) {
        if (i < from || i >= to)
            free(out->text[i]);
        else
            out->bytes += out->len[i];
    }
    memmove(out->text, out->text + from, (size_t)(to - from) * sizeof *out->text);
    memmove(out->len, out->len + from, (size_t)(to - from) * sizeof *out->len);
    out->count = to - from;
    return CLI_OK;
}

void lm_stream_free(lm_stream *s)
{
    free(s->ids);
    memset(s, 0, sizeof *s);
}

int lm_stream_build(lm_stream *out, const lm_tokenizer *t, const lm_docs *docs)
{
    memset(out, 0, sizeof *out);
    const int64_t eot = lm_tok_start(t), D = docs->count;
    int64_t *counts = calloc((size_t)D + 1, sizeof *counts); /* (D) each document's ids, then offsets */
    int64_t **ids = calloc((size_t)D + 1, sizeof *ids);      /* (D) each document's ids */
    bool failed = !counts || !ids;
#pragma omp parallel for schedule(dynamic, 16) num_threads(cli_threads())
    for (int64_t i = 0; i < D; i++) {
        if (failed) continue;
        if (!(ids[i] = malloc((docs->len[i] + 1) * sizeof **ids)) ||
            (counts[i] = lm_tok_encode(t, docs->text[i], docs->len[i], ids[i])) < 0)
            failed = true;
    }
    int64_t total = 0;
    for (int64_t i = 0; !failed && i < D; i++) total += 1 + counts[i];
    out->ids = failed ? NULL : malloc((size_t)(total ? total : 1) * sizeof *out->ids);
    int code = out->ids ? CLI_OK : cli_fail(CLI_ERR_DATA, "lm", "out of memory for the token stream");
    for (int64_t i = 0, at = 0; code == CLI_OK && i < D; i++) {
        out->ids[at++] = (int32_t)eot;
        for (int64_t k = 0; k < counts[i]; k++) out->ids[at++] = (int32_t)ids[i][k];
    }
    for (int64_t i = 0; ids && i < D; i++) free(ids[i]);
    free(ids), free(counts);
    out->n = code == CLI_OK ? total : 0, out->bytes = (int64_t)docs->bytes, out->docs = D;
    return code;
}

/* ---- token files ---- */

static int write_file(const char *dir, const char *name, const void *head, size_t head_bytes, const void *data,
                      size_t bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(head, 1, head_bytes, f) == head_bytes && fwrite(data, 1, bytes, f) == bytes;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) remove(path);
    return ok ? CLI_OK : cli_fail(CLI_ERR_DATA, "lm", "--export-tokens: %s: %s", path, strerror(errno));
}

int lm_export_tokens(const char *dir, const lm_tokenizer *t, const lm_stream *train, const lm_stream *val)
{
    const int64_t V = lm_tok_size(t);
    if (V > 65536)
        return cli_fail(CLI_ERR_USAGE, "lm", "--export-tokens: llm.c's files hold ids below 65536, not %lld",
                        (long long)V);
    const lm_stream *s[2] = {train, val};
    static const char *const names[2] = {"train.bin", "val.bin"};
    int code = CLI_OK;
    for (int k = 0; k < 2 && code == CLI_OK; k++) {
        int32_t head[256] = {20240520, 1, (int32_t)s[k]->n};
        uint16_t *ids = malloc((size_t)(s[k]->n ? s[k]->n : 1) * sizeof *ids);
        if (!ids || s[k]->n > INT32_MAX)
            code = cli_fail(CLI_ERR_DATA, "lm", "--export-tokens: %lld ids", (long long)s[k]->n);
        for (int64_t i = 0; code == CLI_OK && i < s[k]->n; i++) ids[i] = (uint16_t)s[k]->ids[i];
        if (code == CLI_OK) code = write_file(dir, names[k], head, sizeof head, ids, (size_t)s[k]->n * sizeof *ids);
        free(ids);
    }
    int32_t *bytes = code == CLI_OK ? malloc((size_t)V * sizeof *bytes) : NULL;
    char *all = NULL;
    size_t n_all = 0;
    for (int64_t id = 0; bytes && id < V; id++) { /* every token's bytes, after no particular token */
        size_t len;
        const char *b = lm_tok_bytes(t, -1, id, &len);
        char *more = realloc(all, n_all + len + 1);
        if (!more) {
            free(bytes), bytes = NULL;
            break;
        }
        all = more;
        memcpy(all + n_all, b, len);
        n_all += len, bytes[id] = (int32_t)len;
    }
    if (code == CLI_OK && !bytes) code = cli_fail(CLI_ERR_DATA, "lm", "out of memory");
    if (code == CLI_OK) code = write_file(dir, "token_bytes.bin", "", 0, bytes, (size_t)V * sizeof *bytes);
    if (code == CLI_OK) code = write_file(dir, "vocab_bytes.bin", "", 0, all, n_all); /* back to back */
    free(bytes), free(all);
    if (code == CLI_OK) printf("wrote %s/train.bin, val.bin, token_bytes.bin and vocab_bytes.bin\n", dir);
    return code;
}
