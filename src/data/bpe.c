/* Byte-level BPE (GPT-2's scheme, trained here): text is split into pieces by GPT-2's pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (a byte that starts no valid UTF-8 sequence counts as one character of none of the classes),
 * each piece starts as its bytes (tokens 0..255) and merges pairs of adjacent tokens by rank;
 * merge i makes token 256 + i, and <|endoftext|> is the last id. Training counts the pieces of a
 * corpus and takes, merge after merge, the most frequent adjacent pair (ties: the smaller pair of
 * ids) until the vocabulary is full or no pair occurs twice. Every byte string encodes, and
 * decoding gives it back byte for byte. */
#include "data_internal.h"

#include <stdlib.h>
#include <string.h>

#define N_BYTES 256
#define MIN_PAIR_COUNT 2
static const char EOT_TEXT[] = "<|endoftext|>";

/* ---- pre-splitting ---- */

typedef enum char_class {
    CC_LETTER,
    CC_NUMBER,
    CC_SPACE,
    CC_OTHER
} char_class;

/* The character at s[i] (i < n): its class, and in *len its bytes (1 for a byte that starts no
 * strict UTF-8 sequence: no overlong forms, surrogates or code points past U+10FFFF) */
static char_class char_at(const uint8_t *s, size_t n, size_t i, size_t *len)
{
    const uint8_t c = s[i];
    uint32_t cp = c;
    size_t need = 0;
    *len = 1;
    if (c < 0x80) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CC_LETTER;
        if (c >= '0' && c <= '9') return CC_NUMBER;
        return (c >= 0x09 && c <= 0x0D) || c == ' ' ? CC_SPACE : CC_OTHER;
    }
    if (c >= 0xC2 && c <= 0xDF)
        need = 1, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        need = 2, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        need = 3, cp = c & 0x07;
    else
        return CC_OTHER;
    if (i + need >= n) return CC_OTHER;
    for (size_t k = 1; k <= need; k++) {
        if ((s[i + k] & 0xC0) != 0x80) return CC_OTHER;
        cp = cp << 6 | (s[i + k] & 0x3F);
    }
    if ((need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
        return CC_OTHER;
    *len = need + 1;
    return attn__is_letter(cp)      ? CC_LETTER
           : attn__is_number(cp)    ? CC_NUMBER
           : attn__is_bpe_space(cp) ? CC_SPACE
                                    : CC_OTHER;
}

/* The end of the run of characters of class cls from i (OTHER: of none of the other classes) */
static size_t run_end(const uint8_t *s, size_t n, size_t i, char_class cls)
{
    size_t len;
    while (i < n && char_at(s, n, i, &len) == cls) i += len;
    return i;
}

/* The end of the piece that starts at i < n */
static size_t piece_end(const uint8_t *s, size_t n, size_t i)
{
    size_t len;
    if (s[i] == '\'' && i + 1 < n) { /* 's 't 'm 'd 're 've 'll */
        const uint8_t a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
    if (s[i] == ' ' && i + 1 < n) { /* " ?" before a run of letters, numbers or others */
        const char_class next = char_at(s, n, i + 1, &len);
        if (next != CC_SPACE) return run_end(s, n, i + 1, next);
    }
    const char_class cls = char_at(s, n, i, &len);
    if (cls != CC_SPACE) return run_end(s, n, i, cls);
    size_t j = i, last = 0; /* \s+(?!\S): the run but its last character when a non-space follows */
    while (j < n && char_at(s, n, j, &len) == CC_SPACE) last = len, j += len;
    return j < n && j - i > last ? j - last : j;
}

int64_t attn_bpe_pieces(const char *text, size_t len, size_t *ends)
{
    if (!text && len) {
        attn__fail(ATTN_ERR_ARG, "bpe_pieces: NULL text");
        return -1;
    }
    int64_t count = 0;
    for (size_t i = 0; i < len; count++) {
        i = piece_end((const uint8_t *)text, len, i);
        if (ends) ends[count] = i;
    }
    return count;
}

/* ---- pair tables: open addressing over 64-bit keys (a << 32 | b) ---- */

typedef struct pair_map {
    uint64_t *keys; /* (cap) 0 = empty; keys are stored + 1 */
    int64_t *vals;  /* (cap) */
    size_t cap, used;
} pair_map;

static uint64_t pair_key(int64_t a, int64_t b)
{
    return (uint64_t)a << 32 | (uint64_t)b;
}

static size_t slot_of(const pair_map *m, uint64_t key)
{
    uint64_t h = (key + 1) * 0x9E3779B97F4A7C15ull;
    size_t at = (size_t)(h >> 20) & (m->cap - 1);
    while (m->keys[at] && m->keys[at] != key + 1) at = (at + 1) & (m->cap - 1);
    return at;
}

static attn_status map_grow(pair_map *m)
{
    pair_map bigger = {calloc(m->cap ? 2 * m->cap : 1024, sizeof(uint64_t)),
                       malloc((m->cap ? 2 * m->cap : 1024) * sizeof(int64_t)), m->cap ? 2 * m->cap : 1024, 0};
    if (!bigger.keys || !bigger.vals) {
        free(bigger.keys), free(bigger.vals);
        return attn__fail(ATTN_ERR_NOMEM, "bpe: out of memory");
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i]) {
            size_t at = slot_of(&bigger, m->keys[i] - 1);
            bigger.keys[at] = m->keys[i], bigger.vals[at] = m->vals[i], bigger.used++;
        }
    free(m->keys), free(m->vals);
    *m = bigger;
    return ATTN_OK;
}

/* The value of key, or -1 */
static int64_t map_get(const pair_map *m, uint64_t key)
{
    if (!m->cap) return -1;
    size_t at = slot_of(m, key);
    return m->keys[at] ? m->vals[at] : -1;
}

/* Sets key's value (it must not be there yet) */
static attn_status map_put(pair_map *m, uint64_t key, int64_t val)
{
    if (4 * (m->used + 1) > 3 * m->cap && map_grow(m) != ATTN_OK) return attn_last_status();
    size_t at = slot_of(m, key);
    m->keys[at] = key + 1, m->vals[at] = val, m->used++;
    return ATTN_OK;
}

static void map_free(pair_map *m)
{
    free(m->keys), free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- the tokenizer ---- */

struct attn_bpe {
    int64_t n_merges;
    int64_t *merges; /* (n_merges, 2) */
    pair_map rank;   /* pair -> merge index */
    pair_map whole;  /* hash of a token's bytes -> the token, for tokens that encode to themselves */
    size_t *tok_off; /* (V + 1) token t's bytes are tok_bytes[tok_off[t], tok_off[t+1]) */
    char *tok_bytes;
};

void attn_bpe_free(attn_bpe *b)
{
    if (!b) return;
    free(b->merges), free(b->tok_off), free(b->tok_bytes);
    map_free(&b->rank);
    map_free(&b->whole);
    free(b);
}

static uint64_t bytes_hash(const uint8_t *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h >> 1; /* keys stay below 2^63: pair_map stores key + 1 */
}

/* The bytes of every token: merged ones as their halves' bytes, <|endoftext|> as its text */
static attn_status token_bytes(attn_bpe *b)
{
    const int64_t V = N_BYTES + b->n_merges + 1;
    size_t *len = malloc((size_t)V * sizeof *len); /* (V) */
    if (!len) return attn__fail(ATTN_ERR_NOMEM, "bpe: out of memory");
    size_t total = 0;
    for (int64_t t = 0; t < V; t++) {
        len[t] = t < N_BYTES  ? 1
                 : t == V - 1 ? sizeof EOT_TEXT - 1
                              : len[b->merges[2 * (t - N_BYTES)]] + len[b->merges[2 * (t - N_BYTES) + 1]];
        total += len[t];
    }
    if (!(b->tok_bytes = malloc(total))) {
        free(len);
        return attn__fail(ATTN_ERR_NOMEM, "bpe: out of memory for %zu bytes of tokens", total);
    }
    b->tok_off[0] = 0;
    for (int64_t t = 0; t < V; t++) {
        char *at = b->tok_bytes + b->tok_off[t];
        if (t < N_BYTES) {
            *at = (char)t;
        } else if (t == V - 1) {
            memcpy(at, EOT_TEXT, len[t]);
        } else {
            const int64_t x = b->merges[2 * (t - N_BYTES)], y = b->merges[2 * (t - N_BYTES) + 1];
            memcpy(at, b->tok_bytes + b->tok_off[x], len[x]);
            memcpy(at + len[x], b->tok_bytes + b->tok_off[y], len[y]);
        }
        b->tok_off[t + 1] = b->tok_off[t] + len[t];
    }
    free(len);
    return ATTN_OK;
}

static int64_t encode_merges(const attn_bpe *b, const uint8_t *s, size_t n, int64_t *ids);

/* b->whole: each merged token whose bytes the merges encode to that token alone (most are; one that
 * a lower-ranked merge across its halves' seam would split is not), keyed by its bytes' hash (a
 * token whose hash another took keeps the slow path) */
static attn_status whole_tokens(attn_bpe *b)
{
    size_t longest = 1;
    for (int64_t t = N_BYTES; t < N_BYTES + b->n_merges; t++)
        if (b->tok_off[t + 1] - b->tok_off[t] > longest) longest = b->tok_off[t + 1] - b->tok_off[t];
    int64_t *ids = malloc(longest * sizeof *ids);
    if (!ids) return attn__fail(ATTN_ERR_NOMEM, "bpe: out of memory");
    attn_status st = ATTN_OK;
    for (int64_t t = N_BYTES; t < N_BYTES + b->n_merges && st == ATTN_OK; t++) {
        const uint8_t *s = (const uint8_t *)b->tok_bytes + b->tok_off[t];
        const size_t n = b->tok_off[t + 1] - b->tok_off[t];
        const uint64_t h = bytes_hash(s, n);
        if (encode_merges(b, s, n, ids) == 1 && ids[0] == t && map_get(&b->whole, h) < 0) st = map_put(&b->whole, h, t);
    }
    free(ids);
    return st;
}

attn_bpe *attn_bpe_from_merges(const int64_t *merges, int64_t n_merges)
{
    if ((!merges && n_merges) || n_merges < 0 || n_merges > ATTN_BPE_MAX_MERGES)
        return attn__fail_null(ATTN_ERR_ARG, "bpe: %lld merges; expected 0 to %d", (long long)n_merges,
                               ATTN_BPE_MAX_MERGES);
    attn_bpe *b = calloc(1, sizeof *b);
    const int64_t V = N_BYTES + n_merges + 1;
    if (b) {
        b->n_merges = n_merges;
        b->merges = malloc((size_t)(2 * n_merges + 1) * sizeof *b->merges);
        b->tok_off = malloc((size_t)(V + 1) * sizeof *b->tok_off);
    }
    if (!b || !b->merges || !b->tok_off) {
        attn_bpe_free(b);
        return attn__fail_null(ATTN_ERR_NOMEM, "bpe: out of memory for %lld merges", (long long)n_merges);
    }
    for (int64_t i = 0; i < n_merges; i++) {
        const int64_t x = merges[2 * i], y = merges[2 * i + 1], id = N_BYTES + i;
        const char *why = x < 0 || y < 0 || x >= id || y >= id     ? "refers to a token not made before it"
                          : map_get(&b->rank, pair_key(x, y)) >= 0 ? "repeats an earlier merge"
                                                                   : NULL;
        if (why) {
            attn_bpe_free(b);
            return attn__fail_null(ATTN_ERR_FORMAT, "bpe: merge %lld (%lld, %lld) %s", (long long)i, (long long)x,
                                   (long long)y, why);
        }
        if (map_put(&b->rank, pair_key(x, y), i) != ATTN_OK) {
            attn_bpe_free(b);
            return NULL;
        }
        b->merges[2 * i] = x, b->merges[2 * i + 1] = y;
    }
    if (token_bytes(b) != ATTN_OK || whole_tokens(b) != ATTN_OK) {
        attn_bpe_free(b);
        return NULL;
    }
    return b;
}

const int64_t *attn_bpe_merges(const attn_bpe *b, int64_t *n_merges)
{
    if (!b || !n_merges) return attn__fail_null(ATTN_ERR_ARG, "bpe_merges: NULL argument");
    *n_merges = b->n_merges;
    return b->merges;
}

int64_t attn_bpe_vocab_size(const attn_bpe *b)
{
    if (!b) {
        attn__fail(ATTN_ERR_ARG, "bpe_vocab_size: NULL tokenizer");
        return -1;
    }
    return N_BYTES + b->n_merges + 1;
}

int64_t attn_bpe_eot(const attn_bpe *b)
{
    if (!b) {
        attn__fail(ATTN_ERR_ARG, "bpe_eot: NULL tokenizer");
        return -1;
    }
    return N_BYTES + b->n_merges;
}

const char *attn_bpe_token_bytes(const attn_bpe *b, int64_t id, size_t *len)
{
    if (!b || !len) return attn__fail_null(ATTN_ERR_ARG, "bpe_token_bytes: NULL argument");
    if (id < 0 || id > N_BYTES + b->n_merges)
        return attn__fail_null(ATTN_ERR_ARG, "bpe_token_bytes: id %lld is outside [0, %lld)", (long long)id,
                               (long long)(N_BYTES + b->n_merges + 1));
    *len = b->tok_off[id + 1] - b->tok_off[id];
    return b->tok_bytes + b->tok_off[id];
}

/* ---- encoding ---- */

/* Every occurrence of the adjacent pair (x, y) in ids[0..len), left to right, becomes made;
 * returns the new length */
static int64_t merge_pair(int64_t *ids, int64_t len, int64_t x, int64_t y, int64_t made)
{
    int64_t out = 0;
    for (int64_t i = 0; i < len; i++) {
        if (i + 1 < len && ids[i] == x && ids[i + 1] == y) {
            ids[out++] = made;
            i++;
        } else {
            ids[out++] = ids[i];
        }
    }
    return out;
}

/* encode_piece by the merges themselves */
static int64_t encode_merges(const attn_bpe *b, const uint8_t *s, size_t n, int64_t *ids)
{
    for (size_t i = 0; i < n; i++) ids[i] = s[i];
    int64_t len = (int64_t)n;
    while (len > 1) { /* merge every occurrence of the adjacent pair of lowest rank */
        int64_t best = -1;
        for (int64_t i = 0; i + 1 < len; i++) {
            const int64_t r = map_get(&b->rank, pair_key(ids[i], ids[i + 1]));
            if (r >= 0 && (best < 0 || r < best)) best = r;
        }
        if (best < 0) break;
        const int64_t x = b->merges[2 * best], y = b->merges[2 * best + 1], made = N_BYTES + best;
        len = merge_pair(ids, len, x, y, made);
    }
    return len;
}

/* One piece's bytes -> its tokens in ids (at most n); returns how many. A piece that is a token
 * whose own bytes encode to it alone (b->whole) is that token: the merges' result, looked up. */
static int64_t encode_piece(const attn_bpe *b, const uint8_t *s, size_t n, int64_t *ids)
{
    const int64_t t = n > 1 ? map_get(&b->whole, bytes_hash(s, n)) : -1;
    if (t >= 0 && b->tok_off[t + 1] - b->tok_off[t] == n && !memcmp(b->tok_bytes + b->tok_off[t], s, n)) {
        ids[0] = t;
        return 1;
    }
    return encode_merges(b, s, n, ids);
}

int64_t attn_bpe_encode(const attn_bpe *b, const char *text, size_t len, int64_t *ids)
{
    if (!b || (!text && len) || (!ids && len)) {
        attn__fail(ATTN_ERR_ARG, "bpe_encode: NULL argument");
        return -1;
    }
    const uint8_t *s = (const uint8_t *)text;
    int64_t count = 0;
    for (size_t i = 0; i < len;) {
        const size_t end = piece_end(s, len, i);
        count += encode_piece(b, s + i, end - i, ids + count);
        i = end;
    }
    return count;
}

int64_t attn_bpe_decode(const attn_bpe *b, const int64_t *ids, int64_t n, char *out, int64_t cap)
{
    if (!b || (!ids && n) || n < 0 || cap < 0 || (!out && cap)) {
        attn__fail(ATTN_ERR_ARG, "bpe_decode: NULL argument or negative count");
        return -1;
    }
    int64_t need = 0, written = 0; /* out holds the first `written` bytes, whole tokens only */
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] > N_BYTES + b->n_merges) {
            attn__fail(ATTN_ERR_ARG, "bpe_decode: ids[%lld] = %lld is outside [0, %lld)", (long long)i,
                       (long long)ids[i], (long long)(N_BYTES + b->n_merges + 1));
            return -1;
        }
        const size_t l = b->tok_off[ids[i] + 1] - b->tok_off[ids[i]];
        if (need + (int64_t)l <= cap && need == written) {
            memcpy(out + need, b->tok_bytes + b->tok_off[ids[i]], l);
            written += (int64_t)l;
        }
        need += (int64_t)l;
    }
    return need;
}

/* ---- training ---- */

/* Distinct pieces of the corpus with their counts: bytes in one buffer, a hash of (offset, len) */
struct attn_bpe_trainer {
    attn__buf bytes;   /* the distinct pieces back to back */
    size_t *off, *len; /* (n) */
    int64_t *count;    /* (n) */
    int64_t n, cap;
    int64_t *slots; /* (n_slots) piece index + 1, 0 empty */
    size_t n_slots;
};

attn_bpe_trainer *attn_bpe_trainer_new(void)
{
    attn_bpe_trainer *t = calloc(1, sizeof *t);
    return t ? t : attn__fail_null(ATTN_ERR_NOMEM, "bpe_trainer_new: out of memory");
}

void attn_bpe_trainer_free(attn_bpe_trainer *t)
{
    if (!t) return;
    attn__buf_free(&t->bytes);
    free(t->off), free(t->len), free(t->count), free(t->slots);
    free(t);
}

static size_t piece_slot(const attn_bpe_trainer *t, const uint8_t *s, size_t n, uint64_t h)
{
    size_t at = (size_t)h & (t->n_slots - 1);
    for (; t->slots[at]; at = (at + 1) & (t->n_slots - 1)) {
        const int64_t k = t->slots[at] - 1;
        if (t->len[k] == n && !memcmp(t->bytes.data + t->off[k], s, n)) break;
    }
    return at;
}

static attn_status trainer_grow(attn_bpe_trainer *t)
{
    const int64_t cap = t->cap ? 2 * t->cap : 4096;
    size_t *off = realloc(t->off, (size_t)cap * sizeof *off);
    if (off) t->off = off;
    size_t *len = realloc(t->len, (size_t)cap * sizeof *len);
    if (len) t->len = len;
    int64_t *count = realloc(t->count, (size_t)cap * sizeof *count);
    if (count) t->count = count;
    int64_t *slots = calloc((size_t)cap * 2, sizeof *slots);
    if (!off || !len || !count || !slots) {
        free(slots);
        return attn__fail(ATTN_ERR_NOMEM, "bpe_trainer: out of memory for %lld distinct pieces", (long long)cap);
    }
    free(t->slots);
    t->slots = slots, t->n_slots = (size_t)cap * 2, t->cap = cap;
    for (int64_t k = 0; k < t->n; k++) {
        const uint8_t *s = (const uint8_t *)t->bytes.data + t->off[k];
        t->slots[piece_slot(t, s, t->len[k], bytes_hash(s, t->len[k]))] = k + 1;
    }
    return ATTN_OK;
}

static attn_status count_piece(attn_bpe_trainer *t, const uint8_t *s, size_t n)
{
    if (t->n == t->cap && trainer_grow(t) != ATTN_OK) return attn_last_status();
    const uint64_t h = bytes_hash(s, n);
    const size_t at = piece_slot(t, s, n, h);
    if (t->slots[at]) {
        t->count[t->slots[at] - 1]++;
        return ATTN_OK;
    }
    const size_t off = t->bytes.len;
    if (attn__buf_append(&t->bytes, (const char *)s, n) != ATTN_OK) return attn_last_status();
    t->off[t->n] = off, t->len[t->n] = n, t->count[t->n] = 1;
    t->slots[at] = ++t->n;
    return ATTN_OK;
}

attn_status attn_bpe_trainer_add(attn_bpe_trainer *t, const char *text, size_t len)
{
    if (!t || (!text && len)) return attn__fail(ATTN_ERR_ARG, "bpe_trainer_add: NULL argument");
    const uint8_t *s = (const uint8_t *)text;
    for (size_t i = 0; i < len;) {
        const size_t end = piece_end(s, len, i);
        if (end - i > 1 && count_piece(t, s + i, end - i) != ATTN_OK) return attn_last_status();
        i = end; /* a piece of one byte has no pair to count */
    }
    return ATTN_OK;
}

/* The merge loop's state: each distinct piece as tokens (sym[start[w] .. start[w] + n[w])), each
 * adjacent pair's count over the corpus and the pieces it may occur in, and a max-heap of
 * (count, pair) whose entries go stale as counts change (checked when popped). */
typedef struct pair_stat {
    uint64_t key;
    int64_t count;
    int64_t *words; /* pieces it occurred in when counted (may repeat; a piece may have lost it since) */
    int64_t n_words, cap_words;
} pair_stat;

typedef struct heap_item {
    int64_t count;
    uint64_t key;
} heap_item;

typedef struct merge_state {
    const attn_bpe_trainer *t;
    int64_t *sym, *start, *n; /* (total bytes), (pieces), (pieces) */
    pair_map index;           /* pair -> its pair_stat */
    pair_stat *stats;
    int64_t n_stats, cap_stats;
    heap_item *heap;
    int64_t n_heap, cap_heap;
    int64_t *seen;                               /* (pieces) the merge that last rewrote it */
    int64_t *touched;                            /* pairs whose count rose in this merge */
    int64_t n_touched, cap_touched, *touched_at; /* touched_at (stats): the merge that touched it */
} merge_state;

/* a before b in the heap: the larger count, ties the smaller pair */
static bool heap_above(heap_item a, heap_item b)
{
    return a.count > b.count || (a.count == b.count && a.key < b.key);
}

static attn_status heap_push(merge_state *m, int64_t count, uint64_t key)
{
    if (m->n_heap == m->cap_heap) {
        const int64_t cap = m->cap_heap ? 2 * m->cap_heap : 4096;
        heap_item *h = realloc(m->heap, (size_t)cap * sizeof *h);
        if (!h) return attn__fail(ATTN_ERR_NOMEM, "bpe_trainer: out of memory");
        m->heap = h, m->cap_heap = cap;
    }
    int64_t i = m->n_heap++;
    m->heap[i] = (heap_item){count, key};
    while (i > 0 && heap_above(m->heap[i], m->heap[(i - 1) / 2])) {
        heap_item up = m->heap[(i - 1) / 2];
        m->heap[(i - 1) / 2] = m->heap[i], m->heap[i] = up, i = (i - 1) / 2;
    }
    return ATTN_OK;
}

static heap_item heap_pop(merge_state *m)
{
    heap_item top = m->heap[0];
    m->heap[0] = m->heap[--m->n_heap];
    for (int64_t i = 0;;) {
        int64_t l = 2 * i + 1, r = l + 1, best = i;
        if (l < m->n_heap && heap_above(m->heap[l], m->heap[best])) best = l;
        if (r < m->n_heap && heap_above(m->heap[r], m->heap[best])) best = r;
        if (best == i) break;
        heap_item down = m->heap[best];
        m->heap[best] = m->heap[i], m->heap[i] = down, i = best;
    }
    return top;
}

/* The stat of pair key, made when absent; NULL when out of memory */
static pair_stat *stat_of(merge_state *m, uint64_t key)
{
    int64_t i = map_get(&m->index, key);
    if (i >= 0) return &m->stats[i];
    if (m->n_stats == m->cap_stats) {
        const int64_t cap = m->cap_stats ? 2 * m->cap_stats : 4096;
        pair_stat *s = realloc(m->stats, (size_t)cap * sizeof *s);
        int64_t *at = realloc(m->touched_at, (size_t)cap * sizeof *at);
        if (s) m->stats = s;
        if (at) m->touched_at = at;
        if (!s || !at) return attn__fail_null(ATTN_ERR_NOMEM, "bpe_trainer: out of memory");
        m->cap_stats = cap;
    }
    if (map_put(&m->index, key, m->n_stats) != ATTN_OK) return NULL;
    m->stats[m->n_stats] = (pair_stat){.key = key};
    m->touched_at[m->n_stats] = -1;
    return &m->stats[m->n_stats++];
}

/* Adds piece w's pairs times sign (its count each); on adding, w joins each pair's pieces and
 * the pairs are marked touched by merge `round` */
static attn_status count_pairs(merge_state *m, int64_t w, int64_t sign, int64_t round)
{
    const int64_t *s = m->sym + m->start[w], c = m->t->count[w];
    for (int64_t i = 0; i + 1 < m->n[w]; i++) {
        pair_stat *p = stat_of(m, pair_key(s[i], s[i + 1]));
        if (!p) return attn_last_status();
        p->count += sign * c;
        if (sign < 0) continue;
        if (!p->n_words || p->words[p->n_words - 1] != w) {
            if (p->n_words == p->cap_words) {
                const int64_t cap = p->cap_words ? 2 * p->cap_words : 4;
                int64_t *words = realloc(p->words, (size_t)cap * sizeof *words);
                if (!words) return attn__fail(ATTN_ERR_NOMEM, "bpe_trainer: out of memory");
                p->words = words, p->cap_words = cap;
            }
            p->words[p->n_words++] = w;
        }
        const int64_t at = p - m->stats;
        if (m->touched_at[at] != round) {
            if (m->n_touched == m->cap_touched) {
                const int64_t cap = m->cap_touched ? 2 * m->cap_touched : 1024;
                int64_t *t = realloc(m->touched, (size_t)cap * sizeof *t);
                if (!t) return attn__fail(ATTN_ERR_NOMEM, "bpe_trainer: out of memory");
                m->touched = t, m->cap_touched = cap;
            }
            m->touched_at[at] = round;
            m->touched[m->n_touched++] = at;
        }
    }
    return ATTN_OK;
}

/* Merge `round` of (x, y) into token made, in every piece that may hold the pair */
static attn_status apply_merge(merge_state *m, int64_t round, int64_t x, int64_t y, int64_t made)
{
    pair_stat *p = &m->stats[map_get(&m->index, pair_key(x, y))];
    const int64_t n_words = p->n_words;
    int64_t *words = p->words; /* count_pairs below may grow other pairs' lists, not this one's */
    p->words = NULL, p->n_words = p->cap_words = 0;
    m->n_touched = 0;
    attn_status st = ATTN_OK;
    for (int64_t k = 0; k < n_words && st == ATTN_OK; k++) {
        const int64_t w = words[k];
        int64_t *s = m->sym + m->start[w], len = m->n[w];
        if (m->seen[w] == round) continue;
        m->seen[w] = round;
        bool has = false;
        for (int64_t i = 0; i + 1 < len && !has; i++) has = s[i] == x && s[i + 1] == y;
        if (!has) continue;
        if ((st = count_pairs(m, w, -1, round)) != ATTN_OK) break;
        m->n[w] = merge_pair(s, len, x, y, made);
        st = count_pairs(m, w, +1, round);
    }
    free(words);
    for (int64_t k = 0; k < m->n_touched && st == ATTN_OK; k++) {
        const pair_stat *q = &m->stats[m->touched[k]];
        if (q->count >= MIN_PAIR_COUNT) st = heap_push(m, q->count, q->key);
    }
    return st;
}

static void merge_state_free(merge_state *m)
{
    for (int64_t i = 0; i < m->n_stats; i++) free(m->stats[i].words);
    free(m->stats), free(m->touched_at), free(m->touched), free(m->heap);
    free(m->sym), free(m->start), free(m->n), free(m->seen);
    map_free(&m->index);
}

/* The merges (n_merges, 2) learnt from t's pieces, at most want of them */
static attn_status learn_merges(const attn_bpe_trainer *t, int64_t want, int64_t *merges, int64_t *n_merges)
{
    merge_state m = {.t = t};
    const int64_t W = t->n;
    m.sym = malloc((t->bytes.len + 1) * sizeof *m.sym);
    m.start = malloc((size_t)(W + 1) * sizeof *m.start);
    m.n = malloc((size_t)(W + 1) * sizeof *m.n);
    m.seen = malloc((size_t)(W + 1) * sizeof *m.seen);
    attn_status st =
        m.sym && m.start && m.n && m.seen ? ATTN_OK : attn__fail(ATTN_ERR_NOMEM, "bpe_trainer: out of memory");
    for (int64_t w = 0; w < W && st == ATTN_OK; w++) {
        m.start[w] = (int64_t)t->off[w], m.n[w] = (int64_t)t->len[w], m.seen[w] = -1;
        for (size_t i = 0; i < t->len[w]; i++) m.sym[t->off[w] + i] = (uint8_t)t->bytes.data[t->off[w] + i];
        st = count_pairs(&m, w, +1, -1);
    }
    for (int64_t i = 0; i < m.n_stats && st == ATTN_OK; i++)
        if (m.stats[i].count >= MIN_PAIR_COUNT) st = heap_push(&m, m.stats[i].count, m.stats[i].key);
    *n_merges = 0;
    while (st == ATTN_OK && *n_merges < want && m.n_heap > 0) {
        const heap_item top = heap_pop(&m);
        const pair_stat *p = &m.stats[map_get(&m.index, top.key)];
        if (p->count != top.count) { /* stale: its count fell since it was pushed */
            if (p->count >= MIN_PAIR_COUNT) st = heap_push(&m, p->count, p->key);
            continue;
        }
        const int64_t x = (int64_t)(top.key >> 32), y = (int64_t)(top.key & 0xFFFFFFFFu), round = *n_merges;
        merges[2 * round] = x, merges[2 * round + 1] = y;
        ++*n_merges;
        st = apply_merge(&m, round, x, y, N_BYTES + round);
    }
    merge_state_free(&m);
    return st;
}

attn_bpe *attn_bpe_trainer_finish(const attn_bpe_trainer *t, int64_t vocab_size)
{
    if (!t) return attn__fail_null(ATTN_ERR_ARG, "bpe_trainer_finish: NULL trainer");
    if (vocab_size < N_BYTES + 1 || vocab_size > N_BYTES + 1 + ATTN_BPE_MAX_MERGES)
        return attn__fail_null(ATTN_ERR_ARG,
                               "bpe_trainer_finish: vocab_size %lld; expected %d (the bytes and "
                               "<|endoftext|>) to %d",
                               (long long)vocab_size, N_BYTES + 1, N_BYTES + 1 + ATTN_BPE_MAX_MERGES);
    const int64_t want = vocab_size - N_BYTES - 1;
    int64_t *merges = malloc((size_t)(2 * want + 1) * sizeof *merges), n = 0;
    if (!merges) return attn__fail_null(ATTN_ERR_NOMEM, "bpe_trainer_finish: out of memory");
    attn_bpe *b = learn_merges(t, want, merges, &n) == ATTN_OK ? attn_bpe_from_merges(merges, n) : NULL;
    free(merges);
    return b;
}
