/* The safetensors reader (attn_st_parse) on arbitrary bytes. Whatever it accepts must be usable:
 * every tensor found by name, converted to float32 and int64 without reading outside the buffer,
 * written back by the writer and read again with the same names, shapes and bytes, and loaded as
 * a checkpoint (non-strict) into parameters of its own shapes. */
#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void round_trip(const attn_st_file *f)
{
    size_t n = attn_st_count(f), bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += attn_st_at(f, i)->nbytes;
    if (n > 64 || bytes > (1u << 20)) return;
    attn_st_writer *w = attn_st_writer_new();
    fuzz_require(w != NULL, "writer");
    for (size_t i = 0; i < n; i++) {
        const attn_st_tensor *t = attn_st_at(f, i);
        fuzz_require(attn_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data) == ATTN_OK,
                     "a tensor the reader accepted is refused by the writer");
    }
    const char *format = attn_st_metadata(f, "format");
    if (format) attn_st_writer_set_metadata(w, "format", format);
    const char *version = attn_st_metadata(f, "version");
    if (version) attn_st_writer_set_metadata(w, "version", version);
    char path[128];
    fuzz_path(path, sizeof path, "round.safetensors");
    attn_status st = attn_st_writer_save(w, path);
    attn_st_writer_free(w);
    if (st != ATTN_OK) return; /* e.g. a full /dev/shm */
    attn_st_file *g = attn_st_open(path);
    fuzz_require(g != NULL, "the writer's file does not read back");
    fuzz_require(attn_st_count(g) == n, "tensor count changed in the round trip");
    for (size_t i = 0; i < n; i++) {
        const attn_st_tensor *a = attn_st_at(f, i), *b = attn_st_find(g, a->name);
        fuzz_require(b && b->dtype == a->dtype && b->ndim == a->ndim && b->nbytes == a->nbytes &&
                         !memcmp(b->shape, a->shape, (size_t)a->ndim * sizeof(int64_t)) &&
                         (a->nbytes == 0 || !memcmp(a->data, b->data, a->nbytes)),
                     "a tensor changed in the round trip");
    }
    attn_st_close(g);
    /* the file as a checkpoint: parameters of the file's own shapes, non-strict */
    attn_params *p = attn_params_new();
    for (size_t i = 0; p && i < n; i++) {
        const attn_st_tensor *t = attn_st_at(f, i);
        if (t->ndim <= ATTN_MAX_DIMS) attn_params_add(p, t->name, t->ndim, t->shape);
    }
    if (p) attn_checkpoint_load(path, p, NULL, false);
    attn_params_free(p);
    remove(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    attn_st_file *f = attn_st_parse(data, size, "fuzz");
    if (!f) {
        fuzz_require(attn_last_status() != ATTN_OK && attn_last_error()[0], "NULL without a message");
        return 0;
    }
    for (size_t i = 0; i < attn_st_count(f); i++) {
        const attn_st_tensor *t = attn_st_at(f, i);
        fuzz_require(attn_st_find(f, t->name) != NULL, "a tensor is not found by its name");
        fuzz_require(t->nbytes == (size_t)t->numel * attn_dtype_size(t->dtype), "nbytes != numel * size");
        attn_tensor *x = attn_st_load(f, t->name, NULL);
        fuzz_require(x != NULL || t->ndim > ATTN_MAX_DIMS, "attn_st_load refused a tensor of <= 4 dims");
        attn_tensor_free(x);
        int64_t numel = -1;
        int64_t *ids = attn_st_load_i64(f, t->name, &numel);
        fuzz_require(!ids || numel == t->numel, "attn_st_load_i64 count");
        free(ids);
    }
    attn_st_metadata(f, "format");
    attn_st_find(f, "__metadata__");
    round_trip(f);
    attn_st_close(f);
    return 0;
}
