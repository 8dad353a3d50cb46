/* attn lm's tokenizer: attn's byte-level BPE (learnt by train) or a llama2.c tokenizer.bin (brought
 * in by import), one interface for the corpus, training, generation and export, and the text each
 * is kept as in a checkpoint:
 *   tokenizer.bpe      "attn-bpe 1\n" then "A B\n" per merge
 *   tokenizer.llama2c  "attn-llama2c 1\n" then the tokenizer.bin's bytes in hexadecimal */
#include "lm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char BPE_KEY[] = "tokenizer.bpe", L2C_KEY[] = "tokenizer.llama2c";
static const char BPE_HEAD[] = "attn-bpe 1\n", L2C_HEAD[] = "attn-llama2c 1\n";

const char *lm_tok_key(const lm_tokenizer *t)
{
    return t->l2c ? L2C_KEY : BPE_KEY;
}

int64_t lm_tok_size(const lm_tokenizer *t)
{
    return t->l2c ? attn_llama2c_vocab_size(t->l2c) : attn_bpe_vocab_size(t->bpe);
}

int64_t lm_tok_start(const lm_tokenizer *t)
{
    return t->l2c ? 1 : attn_bpe_eot(t->bpe);
}

int64_t lm_tok_encode(const lm_tokenizer *t, const char *text, size_t len, int64_t *ids)
{
    return t->l2c ? attn_llama2c_encode(t->l2c, text, len, false, ids) : attn_bpe_encode(t->bpe, text, len, ids);
}

const char *lm_tok_bytes(const lm_tokenizer *t, int64_t prev, int64_t id, size_t *len)
{
    if (id == lm_tok_start(t)) return *len = 0, "";
    return t->l2c ? attn_llama2c_piece(t->l2c, prev, id, len) : attn_bpe_token_bytes(t->bpe, id, len);
}

void lm_tok_free(lm_tokenizer *t)
{
    attn_bpe_free(t->bpe);
    attn_llama2c_vocab_free(t->l2c);
    free(t->text);
    memset(t, 0, sizeof *t);
}

/* ---- attn's BPE as text ---- */

static char *bpe_text(const attn_bpe *b)
{
    int64_t n;
    const int64_t *m = attn_bpe_merges(b, &n);
    char *text = m ? malloc((size_t)n * 16 + 32) : NULL;
    if (!text) return NULL;
    size_t at = (size_t)sprintf(text, "%s", BPE_HEAD);
    for (int64_t i = 0; i < n; i++)
        at += (size_t)sprintf(text + at, "%lld %lld\n", (long long)m[2 * i], (long long)m[2 * i + 1]);
    return text;
}

static attn_bpe *bpe_parse(const char *text, const char *path)
{
    if (strncmp(text, BPE_HEAD, sizeof BPE_HEAD - 1)) {
        cli_fail(CLI_ERR_DATA, "lm", "%s: metadata tokenizer.bpe does not start with \"attn-bpe 1\"", path);
        return NULL;
    }
    const char *p = text + sizeof BPE_HEAD - 1;
    int64_t lines = 0;
    for (const char *q = p; *q; q++) lines += *q == '\n';
    if (lines > ATTN_BPE_MAX_MERGES) {
        cli_fail(CLI_ERR_DATA, "lm", "%s: tokenizer.bpe has %lld merges; at most %d", path, (long long)lines,
                 ATTN_BPE_MAX_MERGES);
        return NULL;
    }
    int64_t *merges = malloc((size_t)(2 * lines + 1) * sizeof *merges), n = 0;
    if (!merges) {
        cli_fail(CLI_ERR_DATA, "lm", "out of memory");
        return NULL;
    }
    while (*p) {
        long long a, b;
        int used = 0;
        if (sscanf(p, "%lld %lld%n", &a, &b, &used) != 2 || p[used] != '\n' || memchr(p, '\n', (size_t)used) || a < 0 ||
            b < 0 || a > INT32_MAX || b > INT32_MAX) {
            cli_fail(CLI_ERR_DATA, "lm", "%s: tokenizer.bpe line %lld: expected two token ids", path, (long long)n + 2);
            free(merges);
            return NULL;
        }
        merges[2 * n] = a, merges[2 * n + 1] = b, n++;
        p += used + 1;
    }
    attn_bpe *bpe = attn_bpe_from_merges(merges, n);
    if (!bpe) cli_fail(CLI_ERR_DATA, "lm", "%s: tokenizer.bpe: %s", path, attn_last_error());
    free(merges);
    return bpe;
}

int lm_tok_set_bpe(lm_tokenizer *t, const attn_bpe *learnt, const char *text, const char *path)
{
    lm_tok_free(t);
    t->text = learnt ? bpe_text(learnt) : strdup(text);
    if (!t->text) return cli_fail(CLI_ERR_DATA, "lm", "out of memory");
    return (t->bpe = bpe_parse(t->text, path)) ? CLI_OK : CLI_ERR_DATA;
}

/* ---- llama2.c's tokenizer.bin as text ---- */

static char *hex_text(const unsigned char *bytes, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    char *text = malloc(sizeof L2C_HEAD + 2 * n);
    if (!text) return NULL;
    char *at = text + sprintf(text, "%s", L2C_HEAD);
    for (size_t i = 0; i < n; i++) *at++ = digits[bytes[i] >> 4], *at++ = digits[bytes[i] & 15];
    *at = '\0';
    return text;
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int l2c_parse(lm_tokenizer *t, const char *path, int64_t vocab)
{
    const char *hex = t->text + sizeof L2C_HEAD - 1;
    const size_t digits = strlen(hex);
    unsigned char *bytes = malloc(digits / 2 + 1);
    if (!bytes) return cli_fail(CLI_ERR_DATA, "lm", "out of memory");
    size_t n = 0;
    for (; n < digits / 2 && hex_value(hex[2 * n]) >= 0 && hex_value(hex[2 * n + 1]) >= 0; n++)
        bytes[n] = (unsigned char)(16 * hex_value(hex[2 * n]) + hex_value(hex[2 * n + 1]));
    int code = CLI_OK;
    if (digits % 2 || n != digits / 2)
        code =
            cli_fail(CLI_ERR_DATA, "lm", "%s: tokenizer.llama2c: byte %zu is not two lower-case hex digits", path, n);
    else if (!(t->l2c = attn_llama2c_vocab_read(bytes, n, vocab, path)))
        code = cli_fail(CLI_ERR_DATA, "lm", "%s", attn_last_error());
    free(bytes);
    return code;
}

int lm_tok_set_llama2c(lm_tokenizer *t, const char *file, int64_t vocab)
{
    lm_tok_free(t);
    if (!(t->l2c = attn_llama2c_vocab_load(file, vocab))) return cli_fail(CLI_ERR_DATA, "lm", "%s", attn_last_error());
    size_t n;
    const void *bytes = attn_llama2c_vocab_bytes(t->l2c, &n);
    return (t->text = hex_text(bytes, n)) ? CLI_OK : cli_fail(CLI_ERR_DATA, "lm", "out of memory");
}

int lm_tok_from_checkpoint(lm_tokenizer *t, const attn_st_file *f, const char *path, int64_t vocab)
{
    lm_tok_free(t);
    const char *bpe = attn_st_metadata(f, BPE_KEY), *l2c = attn_st_metadata(f, L2C_KEY);
    if (!bpe && !l2c)
        return cli_fail(CLI_ERR_DATA, "lm", "%s: no tokenizer (metadata tokenizer.bpe or tokenizer.llama2c)", path);
    if (bpe && l2c)
        return cli_fail(CLI_ERR_DATA, "lm", "%s: two tokenizers (tokenizer.bpe and tokenizer.llama2c)", path);
    int code;
    if (bpe) {
        code = lm_tok_set_bpe(t, NULL, bpe, path);
    } else if (strncmp(l2c, L2C_HEAD, sizeof L2C_HEAD - 1)) {
        code =
            cli_fail(CLI_ERR_DATA, "lm", "%s: metadata tokenizer.llama2c does not start with \"attn-llama2c 1\"", path);
    } else {
        code = (t->text = strdup(l2c)) ? l2c_parse(t, path, vocab) : cli_fail(CLI_ERR_DATA, "lm", "out of memory");
    }
    if (code == CLI_OK && lm_tok_size(t) != vocab)
        code = cli_fail(CLI_ERR_DATA, "lm", "%s: the tokenizer has %lld ids, the model %lld", path,
                        (long long)lm_tok_size(t), (long long)vocab);
    if (code != CLI_OK) lm_tok_free(t);
    return code;
}

int lm_tok_save_llama2c(const lm_tokenizer *t, const char *path, int64_t *token_order)
{
    const int64_t V = lm_tok_size(t);
    if (t->l2c) {
        for (int64_t i = 0; i < V; i++) token_order[i] = i;
        return !path || attn_llama2c_vocab_save(t->l2c, path) == ATTN_OK ? CLI_OK : CLI_ERR_DATA;
    }
    if (attn_bpe_llama2c_order(t->bpe, token_order) != ATTN_OK) return CLI_ERR_DATA;
    return !path || attn_bpe_save_llama2c(t->bpe, path) == ATTN_OK ? CLI_OK : CLI_ERR_DATA;
}
