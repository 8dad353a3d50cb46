/* The aclImdb loader: root/<split>/{neg,pos}/<id>_<rating>.txt, label from the folder (neg 0,
 * pos 1), id and rating from the file name; everything else in those folders and beside them
 * (unsup/, *.feat, urls_*.txt, README) is ignored, and so is (counted, never opened) an entry
 * named like a review that is not a regular file. Each folder's reviews are sorted by id. */
#include "data_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LAYOUT "an aclImdb folder with {train,test}/{neg,pos}/<id>_<rating>.txt"

typedef struct review_name {
    char *name;
    int64_t id;
    int32_t rating;
} review_name;

/* "<digits>_<digits>.txt" -> id, rating; false for any other name. */
static bool parse_name(const char *name, int64_t *id, int32_t *rating)
{
    int64_t a = 0, b = 0;
    int na = 0, nb = 0;
    const char *p = name;
    for (; *p >= '0' && *p <= '9' && na < 18; p++, na++) a = a * 10 + (*p - '0');
    if (na == 0 || *p++ != '_') return false;
    for (; *p >= '0' && *p <= '9' && nb < 9; p++, nb++) b = b * 10 + (*p - '0');
    if (nb == 0 || strcmp(p, ".txt") != 0) return false;
    *id = a;
    *rating = (int32_t)b;
    return true;
}

static int review_cmp(const void *x, const void *y)
{
    const review_name *a = x, *b = y;
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    if (a->rating != b->rating) return a->rating < b->rating ? -1 : 1;
    return strcmp(a->name, b->name);
}

static char *path_join(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *p = malloc(na + nb + 2);
    if (!p) return attn__fail_null(ATTN_ERR_NOMEM, "path %s/%s: out of memory", a, b);
    memcpy(p, a, na);
    p[na] = '/';
    memcpy(p + na + 1, b, nb + 1);
    return p;
}

static void free_names(review_name *names, size_t n)
{
    for (size_t i = 0; i < n; i++) free(names[i].name);
    free(names);
}

/* Records an entry named like a review that is not a regular file (left out). */
static void note_skipped(attn_labeled_texts *d, const char *dir, const char *name, const char *kind)
{
    if (d->skipped++ > 0) return;
    size_t n = strlen(dir) + strlen(name) + strlen(kind) + 8;
    if ((d->skipped_first = malloc(n))) snprintf(d->skipped_first, n, "%s/%s (%s)", dir, name, kind);
}

/* The review files of dir, sorted by (id, rating, name); entries named like reviews that are not
 * regular files (folders, FIFOs, devices, broken links) are counted in d and left out. */
static attn_status list_reviews(attn_labeled_texts *d, const char *dir, review_name **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    DIR *dd = opendir(dir);
    if (!dd) return attn__fail(ATTN_ERR_IO, "%s: cannot open the folder (%s); expected " LAYOUT, dir, strerror(errno));
    review_name *names = NULL;
    size_t n = 0, cap = 0;
    attn_status st = ATTN_OK;
    for (struct dirent *e; st == ATTN_OK && (e = readdir(dd)) != NULL;) {
        review_name r = {0};
        if (!parse_name(e->d_name, &r.id, &r.rating)) continue;
        struct stat info;
        if (fstatat(dirfd(dd), e->d_name, &info, 0) != 0) {
            note_skipped(d, dir, e->d_name, errno == ENOENT ? "a broken link" : strerror(errno));
            continue;
        }
        if (!S_ISREG(info.st_mode)) {
            note_skipped(d, dir, e->d_name, attn__file_kind(info.st_mode));
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            review_name *grown = realloc(names, cap * sizeof *names);
            if (!grown)
                st = attn__fail(ATTN_ERR_NOMEM, "%s: listing %zu files", dir, cap);
            else
                names = grown;
        }
        if (st == ATTN_OK && !(r.name = strdup(e->d_name))) st = attn__fail(ATTN_ERR_NOMEM, "%s: listing", dir);
        if (st == ATTN_OK) names[n++] = r;
    }
    closedir(dd);
    if (st == ATTN_OK && n == 0)
        st = attn__fail(ATTN_ERR_FORMAT,
                        "%s: no reviews; expected files named <id>_<rating>.txt "
                        "(" LAYOUT ")",
                        dir);
    if (st != ATTN_OK) {
        free_names(names, n);
        return st;
    }
    qsort(names, n, sizeof *names, review_cmp);
    *out = names;
    *count = n;
    return ATTN_OK;
}

/* Room for `more` reviews in d. */
static attn_status grow(attn_labeled_texts *d, size_t more)
{
    size_t n = (size_t)d->count + more;
    char **texts = realloc(d->texts, n * sizeof *texts);
    if (texts) d->texts = texts;
    int32_t *labels = texts ? realloc(d->labels, n * sizeof *labels) : NULL;
    if (labels) d->labels = labels;
    int32_t *ratings = labels ? realloc(d->ratings, n * sizeof *ratings) : NULL;
    if (ratings) d->ratings = ratings;
    int64_t *ids = ratings ? realloc(d->ids, n * sizeof *ids) : NULL;
    if (ids) d->ids = ids;
    return ids ? ATTN_OK : attn__fail(ATTN_ERR_NOMEM, "aclImdb: room for %zu reviews", n);
}

static attn_status read_review(attn_labeled_texts *d, const char *dir, const review_name *r, int32_t label)
{
    char *path = path_join(dir, r->name), *text = NULL;
    size_t len = 0;
    attn_status st = path ? attn__read_file(path, &text, &len) : attn_last_status();
    if (st == ATTN_OK) st = attn__text_check(text, len, path);
    if (st == ATTN_OK) {
        d->texts[d->count] = text;
        d->labels[d->count] = label;
        d->ratings[d->count] = r->rating;
        d->ids[d->count++] = r->id;
    } else {
        free(text);
    }
    free(path);
    return st;
}

static attn_status load_folder(attn_labeled_texts *d, const char *dir, int32_t label)
{
    review_name *names;
    size_t n;
    attn_status st = list_reviews(d, dir, &names, &n);
    if (st != ATTN_OK) return st;
    st = grow(d, n);
    for (size_t i = 0; i < n && st == ATTN_OK; i++) st = read_review(d, dir, &names[i], label);
    free_names(names, n);
    return st;
}

attn_status attn_imdb_load(attn_labeled_texts *out, const char *root, const char *split)
{
    if (!out || !root || !split || !*split) return attn__fail(ATTN_ERR_ARG, "attn_imdb_load: NULL root or empty split");
    *out = (attn_labeled_texts){0};
    DIR *r = opendir(root);
    if (!r) return attn__fail(ATTN_ERR_IO, "%s: cannot open the folder (%s); expected " LAYOUT, root, strerror(errno));
    closedir(r);
    static const char *const folders[2] = {"neg", "pos"};
    char *split_dir = path_join(root, split);
    attn_status st = split_dir ? ATTN_OK : attn_last_status();
    for (int32_t label = 0; label < 2 && st == ATTN_OK; label++) {
        char *dir = path_join(split_dir, folders[label]);
        st = dir ? load_folder(out, dir, label) : attn_last_status();
        free(dir);
    }
    free(split_dir);
    if (st == ATTN_OK && out->skipped && !out->skipped_first) st = attn__fail(ATTN_ERR_NOMEM, "aclImdb: out of memory");
    if (st != ATTN_OK) attn_labeled_texts_free(out);
    return st;
}

void attn_labeled_texts_free(attn_labeled_texts *d)
{
    if (!d) return;
    for (int64_t i = 0; i < d->count; i++) free(d->texts[i]);
    free(d->texts);
    free(d->labels);
    free(d->ratings);
    free(d->ids);
    free(d->skipped_first);
    *d = (attn_labeled_texts){0};
}
