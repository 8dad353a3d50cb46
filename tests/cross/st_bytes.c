/* scripts/cross_test.sh: the same tensors written on any host (float32 from an attn_tensor, int64
 * from little-endian bytes, metadata), read back and printed. The files two hosts of either byte
 * order write must be equal byte for byte. Usage: st_bytes OUT.safetensors */
#include <attn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: st_bytes OUT.safetensors\n");
        return 2;
    }
    attn_tensor *t = attn_tensor_alloc(2, (int64_t[]){2, 3}); /* (2, 3) */
    for (int i = 0; t && i < 6; i++) t->data[i] = 0.5f * (float)i - 1.25f;
    const unsigned char ids_le[16] = {1, 0, 0, 0, 0, 0, 0, 0x80, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    attn_st_writer *w = attn_st_writer_new();
    attn_st_file *f = NULL;
    attn_tensor *back = NULL;
    int64_t n = 0, *ids = NULL;
    int code = 1;
    if (t && w && attn_st_writer_add_tensor(w, "weights", t) == ATTN_OK &&
        attn_st_writer_add(w, "ids", ATTN_DTYPE_I64, 1, (int64_t[]){2}, ids_le) == ATTN_OK &&
        attn_st_writer_set_metadata(w, "format", "pt") == ATTN_OK && attn_st_writer_save(w, argv[1]) == ATTN_OK &&
        (f = attn_st_open(argv[1])) && (back = attn_st_load(f, "weights", NULL)) &&
        (ids = attn_st_load_i64(f, "ids", &n)) && n == 2) {
        for (int i = 0; i < 6; i++) printf("%g ", (double)back->data[i]);
        printf("| %lld %lld\n", (long long)ids[0], (long long)ids[1]);
        code = 0;
    } else {
        fprintf(stderr, "st_bytes: %s\n", attn_last_error());
    }
    free(ids);
    attn_tensor_free(back);
    attn_st_close(f);
    attn_st_writer_free(w);
    attn_tensor_free(t);
    return code;
}
