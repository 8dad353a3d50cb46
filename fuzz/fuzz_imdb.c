/* The aclImdb loader (attn_imdb_load) on a folder built from the input:
 *   byte 0        flags: 1 = also a valid review 0_1.txt in neg/, 2 = write the review
 *                 gzip-compressed, 4 = a second copy under pos/ as 7_8.txt
 *   up to '\n'    the review's file name in train/neg/ (at most 64 bytes; '/' and NUL become '_')
 *   the rest      the review's bytes
 * Invariants: success gives UTF-8 texts with labels 0/1, ratings from the names and ids in
 * order; failure gives a message and an empty result. The texts then go through the
 * classifier's tokenizer. */
#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const unsigned flags = data[0];
    const uint8_t *p = data + 1, *end = data + size;
    const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
    size_t name_len = nl ? (size_t)(nl - p) : 0;
    if (name_len > 64) name_len = 64;
    char name[80];
    for (size_t i = 0; i < name_len; i++) name[i] = p[i] == '/' || p[i] == '\0' ? '_' : (char)p[i];
    name[name_len] = '\0';
    if (!strcmp(name, "") || !strcmp(name, ".") || !strcmp(name, "..")) strcpy(name, "5_3.txt");
    const uint8_t *text = nl ? nl + 1 : p;
    const size_t text_len = (size_t)(end - text);

    char root[128], neg[160], pos[160], file[320], valid[320], copy[320];
    fuzz_path(root, sizeof root, "imdb");
    snprintf(neg, sizeof neg, "%s/train/neg", root);
    snprintf(pos, sizeof pos, "%s/train/pos", root);
    char train[144];
    snprintf(train, sizeof train, "%s/train", root);
    mkdir(root, 0700);
    mkdir(train, 0700);
    mkdir(neg, 0700);
    mkdir(pos, 0700);
    snprintf(file, sizeof file, "%s/%s", neg, name);
    snprintf(valid, sizeof valid, "%s/0_1.txt", neg);
    snprintf(copy, sizeof copy, "%s/7_8.txt", pos);
    bool ok = flags & 2 ? fuzz_write_gz(file, text, text_len) : fuzz_write(file, text, text_len);
    if (ok && (flags & 1)) ok = fuzz_write(valid, "A fine film.\n", 13);
    if (ok && (flags & 4)) ok = fuzz_write(copy, text, text_len);
    if (ok) {
        attn_labeled_texts d = {0};
        attn_status st = attn_imdb_load(&d, root, "train");
        if (st == ATTN_OK) {
            fuzz_require(d.count >= 1, "a loaded split without reviews");
            for (int64_t i = 0; i < d.count; i++) {
                fuzz_require(d.labels[i] == 0 || d.labels[i] == 1, "label");
                fuzz_require(i == 0 || d.labels[i] > d.labels[i - 1] ||
                                 (d.labels[i] == d.labels[i - 1] && d.ids[i] >= d.ids[i - 1]),
                             "order: neg then pos, each by id");
                size_t n = strlen(d.texts[i]);
                fuzz_require(attn_utf8_check(d.texts[i], n, "review") == ATTN_OK, "a review is not UTF-8");
                attn_tokens t = {0};
                fuzz_require(attn_tokenize(&t, ATTN_TOKENIZER_BASIC_ENGLISH, d.texts[i], n) == ATTN_OK,
                             "tokenize a loaded review");
                attn_tokens_free(&t);
            }
        } else {
            fuzz_require(d.count == 0 && d.texts == NULL && attn_last_error()[0], "a failed load left data");
        }
        attn_labeled_texts_free(&d);
    }
    remove(file);
    remove(valid);
    remove(copy);
    return 0;
}
