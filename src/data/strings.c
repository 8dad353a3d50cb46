/* The string hash table (interned keys with dense ids, open
 * addressing with linear probing, FNV-1a hashes) behind token counters and vocabularies. */
#include "data_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- hash table ---- */

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

const char *attn__strtab_key(const attn__strtab *t, int64_t id)
{
    return t->text.data + t->offsets[id];
}

static bool key_equals(const attn__strtab *t, int64_t id, const char *s, size_t len)
{
    const char *k = attn__strtab_key(t, id);
    return memcmp(k, s, len) == 0 && k[len] == '\0';
}

/* The slot holding key (hash h) or the empty slot where it would go. */
static size_t probe(const attn__strtab *t, uint64_t h, const char *s, size_t len)
{
    size_t mask = t->nslots - 1, i = (size_t)h & mask;
    while (t->slots[i]) {
        int64_t id = t->slots[i] - 1;
        if (t->hashes[id] == h && key_equals(t, id, s, len)) return i;
        i = (i + 1) & mask;
    }
    return i;
}

int64_t attn__strtab_find(const attn__strtab *t, const char *s, size_t len)
{
    if (!t->nslots) return -1;
    size_t i = probe(t, hash_bytes(s, len), s, len);
    return t->slots[i] - 1;
}

/* Doubles the slot array (kept at most half full) and re-inserts every key. */
static attn_status grow_slots(attn__strtab *t)
{
    size_t n = t->nslots ? t->nslots * 2 : 64;
    int64_t *slots = calloc(n, sizeof *slots);
    if (!slots) return attn__fail(ATTN_ERR_NOMEM, "string table: cannot allocate %zu slots", n);
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
    for (int64_t id = 0; id < t->count; id++) {
        size_t i = (size_t)t->hashes[id] & (n - 1);
        while (t->slots[i]) i = (i + 1) & (n - 1);
        t->slots[i] = id + 1;
    }
    return ATTN_OK;
}

static attn_status grow_entries(attn__strtab *t)
{
    int64_t cap = t->cap ? t->cap * 2 : 64;
    size_t *offsets = realloc(t->offsets, (size_t)cap * sizeof *offsets);
    if (offsets) t->offsets = offsets;
    uint64_t *hashes = offsets ? realloc(t->hashes, (size_t)cap * sizeof *hashes) : NULL;
    if (!hashes) return attn__fail(ATTN_ERR_NOMEM, "string table: cannot grow to %lld keys", (long long)cap);
    t->hashes = hashes;
    t->cap = cap;
    return ATTN_OK;
}

int64_t attn__strtab_intern(attn__strtab *t, const char *s, size_t len, bool *added)
{
    *added = false;
    if ((size_t)(t->count + 1) * 2 > t->nslots && grow_slots(t) != ATTN_OK) return -1;
    uint64_t h = hash_bytes(s, len);
    size_t i = probe(t, h, s, len);
    if (t->slots[i]) return t->slots[i] - 1;
    if (t->count == t->cap && grow_entries(t) != ATTN_OK) return -1;
    size_t off = t->text.len;
    if (attn__buf_append(&t->text, s, len) != ATTN_OK) return -1;
    t->text.len++; /* keep the NUL between keys */
    t->offsets[t->count] = off;
    t->hashes[t->count] = h;
    t->slots[i] = ++t->count;
    *added = true;
    return t->count - 1;
}

void attn__strtab_free(attn__strtab *t)
{
    attn__buf_free(&t->text);
    free(t->offsets);
    free(t->hashes);
    free(t->slots);
    *t = (attn__strtab){0};
}
