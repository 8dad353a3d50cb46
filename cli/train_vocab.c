/* Vocabularies inside a checkpoint and shared between ranks (train_common.h). */
#include "train_common.h"
#include "dist.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- vocabularies inside the checkpoint ---- */

char *share_text(const char *text)
{
    uint64_t len = dist_rank() == 0 && text ? (uint64_t)strlen(text) + 1 : 0;
    dist_broadcast_bytes(&len, sizeof len);
    char *copy = len ? malloc((size_t)len) : NULL;
    bool ok = !len || copy; /* every rank must take part in the broadcast below */
    if (!dist_any(!ok)) {
        if (dist_rank() == 0 && len) memcpy(copy, text, (size_t)len);
        if (len) dist_broadcast_bytes(copy, (size_t)len);
        return copy;
    }
    free(copy);
    return NULL;
}

attn_vocab *checkpoint_vocab(const char *cmd, const attn_st_file *f, const char *path, const char *key,
                             const char *legacy)
{
    const char *text = attn_st_metadata(f, key);
    attn_vocab *v = NULL;
    if (text) {
        char name[PATH_MAX + 64];
        snprintf(name, sizeof name, "%s: metadata %s", path, key);
        v = attn_vocab_parse(text, strlen(text), name);
    } else if (legacy) { /* written before the vocabularies went inside: the file beside it */
        fprintf(stderr, "attn %s: note: %s carries no vocabulary (an older attn wrote it); reading %s beside it\n", cmd,
                path, legacy);
        v = attn_vocab_load(legacy);
    } else {
        attn_set_error(ATTN_ERR_FORMAT, "%s: metadata %s is missing", path, key);
    }
    if (!v) cli_fail(CLI_ERR_DATA, cmd, "%s", attn_last_error());
    return v;
}

bool vocab_has_specials(const char *cmd, const char *path, const char *which, const attn_vocab *v,
                        const char *const *specials, int n)
{
    for (int i = 0; i < n; i++) {
        const int64_t at = attn_vocab_find(v, specials[i]);
        if (at == i) continue;
        char list[128] = "", found[64];
        for (int j = 0; j < n; j++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "", specials[j]);
        if (at < 0)
            snprintf(found, sizeof found, "no %s", specials[i]);
        else
            snprintf(found, sizeof found, "%s at id %lld", specials[i], (long long)at);
        cli_fail(CLI_ERR_DATA, cmd,
                 "%s: its %svocabulary has %s; expected the specials %s first, in that order "
                 "(as attn builds them)",
                 path, which, found, list);
        return false;
    }
    return true;
}
