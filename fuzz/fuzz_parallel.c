/* The parallel-text loader on files built from the input: the bytes before the first NUL are the
 * source file, the bytes after it the target file (no NUL: both the same), each written plain
 * and gzip-compressed, and the whole input as a tab-separated file (plain and gzip; the raw
 * bytes may themselves be a gzip stream, truncated or not). Invariants: success gives pairs of
 * UTF-8 lines without "\n"; two-file loads have as many pairs as lines; failure gives a message
 * and an empty result. */
#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(attn_status st, const attn_text_pairs *p)
{
    if (st != ATTN_OK) {
        fuzz_require(p->count == 0 && p->src == NULL && attn_last_error()[0], "a failed load left pairs");
        return;
    }
    fuzz_require(p->count >= 1, "no pairs");
    for (int64_t i = 0; i < p->count; i++) {
        const char *s[2] = {p->src[i], p->tgt[i]};
        for (int k = 0; k < 2; k++) {
            fuzz_require(s[k] != NULL, "a NULL line");
            fuzz_require(strchr(s[k], '\n') == NULL, "a line holds a newline");
            fuzz_require(attn_utf8_check(s[k], strlen(s[k]), "line") == ATTN_OK, "a line is not UTF-8");
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    const uint8_t *a = data, *b = nul ? nul + 1 : data;
    const size_t na = nul ? (size_t)(nul - data) : size, nb = nul ? size - na - 1 : size;
    char src[128], tgt[128], srcz[128], tgtz[128], tsv[128], tsvz[128];
    fuzz_path(src, sizeof src, "train.en");
    fuzz_path(tgt, sizeof tgt, "train.fr");
    fuzz_path(srcz, sizeof srcz, "train.en.gz");
    fuzz_path(tgtz, sizeof tgtz, "train.fr.gz");
    fuzz_path(tsv, sizeof tsv, "fra.txt");
    fuzz_path(tsvz, sizeof tsvz, "fra.txt.gz");
    attn_text_pairs p = {0};
    if (fuzz_write(src, a, na) && fuzz_write(tgt, b, nb)) {
        attn_status st = attn_pairs_load(&p, src, tgt);
        check(st, &p);
        attn_text_pairs_free(&p);
    }
    if (fuzz_write_gz(srcz, a, na) && fuzz_write_gz(tgtz, b, nb)) {
        attn_status st = attn_pairs_load(&p, srcz, tgtz);
        check(st, &p);
        attn_text_pairs_free(&p);
    }
    if (fuzz_write(tsv, data, size)) {
        attn_status st = attn_pairs_load_tsv(&p, tsv);
        check(st, &p);
        attn_text_pairs_free(&p);
    }
    if (fuzz_write_gz(tsvz, data, size)) {
        attn_status st = attn_pairs_load_tsv(&p, tsvz);
        check(st, &p);
        attn_text_pairs_free(&p);
    }
    remove(src);
    remove(tgt);
    remove(srcz);
    remove(tgtz);
    remove(tsv);
    remove(tsvz);
    return 0;
}
