/* A byte-level BPE tokenizer as other programs' tokenizer files (formats in attn_data.h):
 *   - llama2.c's tokenizer.bin: the ids laid out as llama2.c's code expects them (1 its BOS, where
 *     every prompt starts and generation stops; the bytes at 3 + byte, where its encoder falls back
 *     for a character it cannot find), and scores that make its encoder (merge the adjacent pair of
 *     the highest score first) take attn's merges in attn's order;
 *   - llm.c's gpt2_tokenizer.bin, which its programs decode samples with: attn's ids as they are. */
#include "data_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BOS_PIECE "\n<s>\n" /* what llama2.c's tokenizer.py writes for the BOS id */

attn_status attn_bpe_llama2c_order(const attn_bpe *b, int64_t *token_order)
{
    if (!b || !token_order) return attn__fail(ATTN_ERR_ARG, "bpe_llama2c_order: NULL argument");
    const int64_t V = attn_bpe_vocab_size(b), merges = V - 257;
    if (merges < 2)
        return attn__fail(ATTN_ERR_ARG,
                          "bpe_llama2c_order: %lld merges; llama2.c's ids 0 and 2 need two (a --vocab of 259 or more)",
                          (long long)merges);
    token_order[0] = 256, token_order[1] = attn_bpe_eot(b), token_order[2] = 257;
    for (int64_t i = 0; i < 256; i++) token_order[3 + i] = i;
    for (int64_t i = 259; i < V; i++) token_order[i] = i - 1; /* merges 2.. (ids 258..) */
    return ATTN_OK;
}

/* float score, int32 len, the bytes; 0 or errno */
static int write_token(FILE *fp, float score, const char *bytes, size_t len)
{
    unsigned char head[8];
    uint32_t bits;
    memcpy(&bits, &score, 4);
    attn__put_le32(head, bits), attn__put_le32(head + 4, (uint32_t)len);
    return fwrite(head, 1, 8, fp) == 8 && fwrite(bytes, 1, len, fp) == len ? 0 : errno;
}

attn_status attn_bpe_save_llama2c(const attn_bpe *b, const char *path)
{
    if (!b || !path) return attn__fail(ATTN_ERR_ARG, "bpe_save_llama2c: NULL argument");
    const int64_t V = attn_bpe_vocab_size(b);
    int64_t *order = malloc(sizeof *order * (size_t)V);
    if (!order) return attn__fail(ATTN_ERR_NOMEM, "bpe_save_llama2c: out of memory");
    if (attn_bpe_llama2c_order(b, order) != ATTN_OK) {
        free(order);
        return attn_last_status();
    }
    uint32_t longest = sizeof BOS_PIECE - 1;
    for (int64_t id = 0; id < V - 1; id++) {
        size_t len;
        attn_bpe_token_bytes(b, id, &len);
        if (len > longest) longest = (uint32_t)len;
    }
    attn__outfile out;
    attn_status st = attn__outfile_open(&out, path);
    if (st != ATTN_OK) {
        free(order);
        return st;
    }
    unsigned char head[4];
    attn__put_le32(head, longest);
    int err = fwrite(head, 1, 4, out.fp) == 4 ? 0 : errno;
    for (int64_t i = 0; i < V && !err; i++) {
        const int64_t id = order[i];
        if (id == attn_bpe_eot(b)) {
            err = write_token(out.fp, 0.0f, BOS_PIECE, sizeof BOS_PIECE - 1);
            continue;
        }
        size_t len;
        const char *bytes = attn_bpe_token_bytes(b, id, &len);
        err = write_token(out.fp, id < 256 ? 0.0f : -(float)(id - 256), bytes, len); /* the earliest merge highest */
    }
    free(order);
    return attn__outfile_close(&out, err ? attn__outfile_write_error(&out, err) : ATTN_OK);
}

attn_status attn_bpe_save_llmc(const attn_bpe *b, const char *path)
{
    if (!b || !path) return attn__fail(ATTN_ERR_ARG, "bpe_save_llmc: NULL argument");
    const int64_t V = attn_bpe_vocab_size(b), eot = attn_bpe_eot(b);
    for (int64_t id = 0; id < eot; id++) {
        size_t len;
        attn_bpe_token_bytes(b, id, &len);
        if (len > 255)
            return attn__fail(ATTN_ERR_ARG, "bpe_save_llmc: token %lld is %zu bytes; llm.c's file holds 255 at most",
                              (long long)id, len);
    }
    unsigned char head[1024] = {0};
    attn__put_le32(head, 20240328), attn__put_le32(head + 4, 2), attn__put_le32(head + 8, (uint32_t)V),
        attn__put_le32(head + 12, (uint32_t)eot);
    attn__outfile out;
    attn_status st = attn__outfile_open(&out, path);
    if (st != ATTN_OK) return st;
    int err = fwrite(head, 1, sizeof head, out.fp) == sizeof head ? 0 : errno;
    for (int64_t id = 0; id < V && !err; id++) {
        static const char eot_text[] = "<|endoftext|>";
        size_t len = sizeof eot_text - 1;
        const char *bytes = id == eot ? eot_text : attn_bpe_token_bytes(b, id, &len);
        const unsigned char n = (unsigned char)len;
        if (fwrite(&n, 1, 1, out.fp) != 1 || fwrite(bytes, 1, len, out.fp) != len) err = errno ? errno : EIO;
    }
    return attn__outfile_close(&out, err ? attn__outfile_write_error(&out, err) : ATTN_OK);
}
