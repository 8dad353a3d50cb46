/* Arena for activations: bump allocation from 64-byte aligned chunks. A reset keeps every chunk
 * and starts again from the first, so a training loop settles after its largest step into
 * chunks whose pages stay mapped (no page faults on freshly mapped memory, unlike per-tensor
 * malloc of big buffers, or a reset that traded its chunks for one block as large as all of
 * them, mapped afresh and faulted in page by page all over again: 1.5 GB in a translator's
 * first steps). A new chunk is as large as all before it, so there are few. */
#include "core_internal.h"

#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 64
#define ARENA_MIN_CHUNK ((size_t)1 << 20)

struct attn_arena_chunk {
    attn_arena_chunk *next;
    size_t size; /* usable bytes after the aligned start */
    size_t used;
    void *raw; /* what malloc returned */
    unsigned char *base;
};

static attn_arena_chunk *chunk_new(size_t size)
{
    attn_arena_chunk *c = malloc(sizeof *c);
    if (!c) return NULL;
    c->raw = malloc(size + ARENA_ALIGN);
    if (!c->raw) {
        free(c);
        return NULL;
    }
    c->base = (unsigned char *)(((uintptr_t)c->raw + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1));
    c->size = size;
    c->used = 0;
    c->next = NULL;
    return c;
}

void *attn__arena_alloc(attn_arena *a, size_t bytes)
{
    if (bytes > SIZE_MAX / 2) return attn__fail_null(ATTN_ERR_NOMEM, "arena: request of %zu bytes is too large", bytes);
    size_t need = (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (need == 0) need = ARENA_ALIGN;
    attn_arena_chunk *c = a->cur;
    while (c && c->size - c->used < need)
        c = c->next; /* chunks after cur are empty since the
                                                        * reset; what one too small leaves waits */
    if (!c) {
        size_t size = a->capacity > ARENA_MIN_CHUNK ? a->capacity : ARENA_MIN_CHUNK;
        if (size < need) size = need;
        c = chunk_new(size);
        if (!c) return attn__fail_null(ATTN_ERR_NOMEM, "arena: could not allocate %zu bytes for activations", size);
        if (a->tail)
            a->tail->next = c;
        else
            a->head = c;
        a->tail = c;
        a->capacity += size;
    }
    a->cur = c;
    void *p = c->base + c->used;
    c->used += need;
    a->used += need;
    if (a->used > a->peak) a->peak = a->used;
    return p;
}

/* Big blocks (the gradients of logits, of activations, of every parameter) are cleared in
 * CLEAR_CHUNK pieces spread over the threads, so a step does not wait on one thread's memset. */
#define CLEAR_CHUNK ((size_t)1 << 16)
#define CLEAR_PARALLEL_MIN ((size_t)1 << 20)

void attn__clear(void *p, size_t bytes, int threads)
{
    unsigned char *b = p;
    const int64_t chunks = (int64_t)((bytes + CLEAR_CHUNK - 1) / CLEAR_CHUNK);
#pragma omp parallel for schedule(static) num_threads(threads) if (bytes >= CLEAR_PARALLEL_MIN)
    for (int64_t c = 0; c < chunks; c++) {
        size_t off = (size_t)c * CLEAR_CHUNK;
        memset(b + off, 0, bytes - off < CLEAR_CHUNK ? bytes - off : CLEAR_CHUNK);
    }
}

float *attn__calloc_floats(size_t n)
{
    if (n > SIZE_MAX / sizeof(float) - ARENA_ALIGN) return NULL;
    const size_t bytes = ((n ? n : 1) * sizeof(float) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    float *p = aligned_alloc(ARENA_ALIGN, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

void *attn__arena_calloc(attn_arena *a, size_t bytes, int threads)
{
    void *p = attn__arena_alloc(a, bytes);
    if (p) attn__clear(p, bytes, threads);
    return p;
}

void attn__arena_reset(attn_arena *a)
{
    for (attn_arena_chunk *c = a->head; c; c = c->next) c->used = 0;
    a->cur = a->head;
    a->used = 0;
}

bool attn__arena_owns(const attn_arena *a, const void *p)
{
    const unsigned char *q = p;
    for (const attn_arena_chunk *c = a->head; c; c = c->next)
        if (q >= c->base && q < c->base + c->used) return true;
    return false;
}

void attn__arena_release(attn_arena *a)
{
    attn_arena_chunk *c = a->head;
    while (c) {
        attn_arena_chunk *next = c->next;
        free(c->raw);
        free(c);
        c = next;
    }
    a->head = a->tail = a->cur = NULL;
    a->capacity = 0;
    a->used = 0;
}
