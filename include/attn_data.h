/* attn_data.h - the header of libattn_data (pkg-config attn-data; find_package(attn
 * COMPONENTS data): attn::data): text to token ids for the models of libattn. Tokenizers,
 * vocabularies, the IMDB and parallel-text loaders (plain or gzip: zlib), batches and BLEU.
 * Conventions, errors and ownership as in attn.h, which this header includes. */
#ifndef ATTN_DATA_H
#define ATTN_DATA_H

#include "attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================================
 * Data: tokenizers, vocabularies, loaders, BLEU
 *
 * Text is UTF-8 everywhere; invalid UTF-8 is an ATTN_ERR_FORMAT naming the byte offset (and
 * the file when there is one). Case rules are Python 3.11's (Unicode 14): the tokenizers are
 * defined by the Python code they reproduce, quoted per function.
 * ====================================================================================== */

/* ATTN_OK when s[0..len) is strict UTF-8 (no overlong forms, surrogates or code points above
 * U+10FFFF, like Python's decoder); else ATTN_ERR_FORMAT "<name>: invalid UTF-8 at byte offset
 * N (...)" saying what was expected there. */
ATTN_API attn_status attn_utf8_check(const char *s, size_t len, const char *name);
/* Python's str.lower() of s[0..len): Unicode simple lowercase mappings, U+0130 -> "i\u0307",
 * and the Greek final sigma (U+03A3 -> U+03C2 at the end of a cased word). A malloc'd,
 * NUL-terminated string the caller frees; NULL when s is not UTF-8. */
ATTN_API char *attn_utf8_lower(const char *s, size_t len);

/* A list of tokens. Zero-initialise (attn_tokens t = {0};), fill with attn_tokenize or
 * attn_tokens_push, release with attn_tokens_free. items[i] points into the list's own storage
 * and stays valid until the list is changed, cleared or freed. */
typedef struct attn_tokens {
    const char **items; /* count NUL-terminated UTF-8 tokens */
    int64_t count;
    char *store_; /* private: the tokens back to back */
    size_t store_len_, store_cap_;
    size_t *offs_; /* private: token i at store_ + offs_[i] */
    int64_t cap_;
} attn_tokens;

/* Copies s[0..len), which must be UTF-8 without NUL bytes (else ATTN_ERR_FORMAT, t unchanged). */
ATTN_API attn_status attn_tokens_push(attn_tokens *t, const char *s, size_t len);
ATTN_API void attn_tokens_clear(attn_tokens *t); /* count = 0; the memory is kept */
ATTN_API void attn_tokens_free(attn_tokens *t);  /* back to the zero state */

typedef enum attn_tokenizer {
    /* torchtext get_tokenizer("basic_english"): line.lower(), then in order ' -> " '  ",
     * " -> "", . -> " . ", "<br />" -> " ", , -> " , ", ( ) ! ? -> " ( " ..., ; : -> " ",
     * \s+ -> " ", then str.split(). */
    ATTN_TOKENIZER_BASIC_ENGLISH,
    /* re.findall(r"\w+|[^\w\s]", line.strip().lower()): runs of Unicode word characters
     * (str.isalnum() or "_": letters and numbers of any script, not combining marks), and
     * every other non-space character alone ("l'herbe" -> l ' herbe). The seq2seq tokenizer. */
    ATTN_TOKENIZER_WORDS,
    /* One token per code point, case kept, whitespace (str.isspace) dropped: for Chinese. */
    ATTN_TOKENIZER_CHARS,
    /* sacrebleu's 13a tokenizer (mteval-v13a), the one corpus BLEU uses; case kept. */
    ATTN_TOKENIZER_13A,
} attn_tokenizer;

ATTN_API const char *attn_tokenizer_name(attn_tokenizer kind); /* "basic_english", "words", ... */
/* *kind = the tokenizer of that name; ATTN_ERR_ARG naming the known ones for any other */
ATTN_API attn_status attn_tokenizer_parse(const char *name, attn_tokenizer *kind);
/* Appends the tokens of text[0..len) to out (out is not cleared). Invalid UTF-8 or a NUL byte
 * (tokens are C strings): ATTN_ERR_FORMAT "text: invalid UTF-8 at byte offset N ..." or "text: a
 * NUL byte at byte offset N ...", and out unchanged. */
ATTN_API attn_status attn_tokenize(attn_tokens *out, attn_tokenizer kind, const char *text, size_t len);
/* The inverse of ATTN_TOKENIZER_WORDS used for sacrebleu-style scoring (as the Multi30k PyTorch
 * anchor): join with spaces; drop the space before . , ! ? ; : ) ] } %, after ( [ {, around '
 * and -, inside " ... "; uppercase the first character (str.upper). Malloc'd; NULL on failure. */
ATTN_API char *attn_detokenize(const char *const *tokens, int64_t n);

/* ---- Token counts and vocabularies ---- */

typedef struct attn_counter attn_counter; /* token -> count */
ATTN_API attn_counter *attn_counter_new(void);
ATTN_API void attn_counter_free(attn_counter *c);
/* Counts tokens[0..n); a token that is not UTF-8 is ATTN_ERR_FORMAT (the ones before it stay
 * counted). */
ATTN_API attn_status attn_counter_add(attn_counter *c, const char *const *tokens, int64_t n);
ATTN_API int64_t attn_counter_get(const attn_counter *c, const char *token); /* 0 if unseen */
ATTN_API int64_t attn_counter_distinct(const attn_counter *c);
ATTN_API int64_t attn_counter_total(const attn_counter *c); /* tokens counted, repeats included */

/* A vocabulary: ids 0..size-1 <-> tokens, with a hash table for lookups. Unknown tokens map to
 * the unk id: the id of "<unk>" when the vocabulary has it, else -1 until attn_vocab_set_unk. */
typedef struct attn_vocab attn_vocab;
/* torchtext build_vocab_from_iterator(min_freq, specials, special_first=True, max_tokens):
 * tokens ordered by count descending, ties by byte order (= code point order, as Python's
 * sorted); the list is cut to max_size - n_specials entries (max_size <= 0: no cut), the
 * specials are taken out of it, tokens below min_freq dropped, and the specials put first in
 * the order given. Duplicate specials are an error. Every token of a vocabulary is UTF-8
 * (ATTN_ERR_FORMAT otherwise), so that attn_vocab_save and attn_vocab_load give it back. */
ATTN_API attn_vocab *attn_vocab_build(const attn_counter *c, const char *const *specials, int n_specials,
                                      int64_t min_freq, int64_t max_size);
/* tokens[i] gets id i; duplicates are an error. */
ATTN_API attn_vocab *attn_vocab_from_tokens(const char *const *tokens, int64_t n);
ATTN_API void attn_vocab_free(attn_vocab *v);
/* Text file, one token per line, line i (from 0) = id i, each line ends with "\n". Saved
 * as an output file (see "Output files" in attn.h); a token holding "\n" or "\r" cannot be saved
 * (ATTN_ERR_ARG). Load also reads lines ending in "\r\n". */
ATTN_API attn_status attn_vocab_save(const attn_vocab *v, const char *path);
ATTN_API attn_vocab *attn_vocab_load(const char *path); /* errors name the path and line */
/* The same text in memory: what attn_vocab_save would write (malloc'd, NUL-terminated, *len
 * bytes; the caller frees it), and a vocabulary read from such text (name: for messages, as the
 * path is), e.g. to carry a vocabulary inside a checkpoint's metadata. */
ATTN_API char *attn_vocab_text(const attn_vocab *v, size_t *len);
ATTN_API attn_vocab *attn_vocab_parse(const char *text, size_t len, const char *name);
ATTN_API int64_t attn_vocab_size(const attn_vocab *v);
ATTN_API const char *attn_vocab_token(const attn_vocab *v, int64_t id);   /* NULL out of range */
ATTN_API int64_t attn_vocab_find(const attn_vocab *v, const char *token); /* -1 if absent */
ATTN_API int64_t attn_vocab_id(const attn_vocab *v, const char *token);   /* unk if absent */
ATTN_API int64_t attn_vocab_unk(const attn_vocab *v);
ATTN_API attn_status attn_vocab_set_unk(attn_vocab *v, int64_t id); /* -1: no unk */
/* ids[i] = attn_vocab_id(tokens[i]); ATTN_ERR_ARG naming the token when it is unknown and the
 * vocabulary has no unk. */
ATTN_API attn_status attn_vocab_encode(const attn_vocab *v, int64_t *ids, const char *const *tokens, int64_t n);

/* ---- Id sequences, padding and batches ---- */

/* Ragged sequences of ids. Zero-initialise; release with attn_id_seqs_free. */
typedef struct attn_id_seqs {
    int64_t count;
    int64_t *offsets; /* count + 1 entries: sequence i = ids[offsets[i] .. offsets[i + 1]) */
    int64_t *ids;
    int64_t cap_seqs_, cap_ids_; /* private */
} attn_id_seqs;

ATTN_API attn_status attn_id_seqs_push(attn_id_seqs *s, const int64_t *ids, int64_t n);
/* The length of sequence i; -1 (error recorded) when i is outside 0..count-1. */
ATTN_API int64_t attn_id_seqs_len(const attn_id_seqs *s, int64_t i);
ATTN_API void attn_id_seqs_free(attn_id_seqs *s);
/* Tokenizes texts[i] with kind and appends its ids (unknown -> unk) to out, for i < n; on an
 * error out keeps none of them. */
ATTN_API attn_status attn_encode_texts(attn_id_seqs *out, const attn_vocab *v, attn_tokenizer kind,
                                       const char *const *texts, int64_t n);

typedef struct attn_pad_opts {
    int64_t pad_id;
    int64_t bos_id; /* >= 0: put before the ids (decoder input <bos> + y) */
    int64_t eos_id; /* >= 0: put after the ids (x + <eos>) */
} attn_pad_opts;

/* row[0..width) = ([bos] + ids[0..len) + [eos]) cut to width, then pad_id; returns the length a
 * mask needs, min(len + (bos >= 0) + (eos >= 0), width), whatever the ids (D2L's valid_len, the
 * count of entries != pad, is less when an id in ids is pad_id). A cut sequence loses its <eos>,
 * as D2L's truncate_pad. -1 (error recorded) for a negative len or width. */
ATTN_API int64_t attn_pad_ids(int64_t *row, const int64_t *ids, int64_t len, const attn_pad_opts *opts, int64_t width);
/* The rows rows[0..n) of s (NULL: 0..n-1) padded into out (n, width); lengths (n) may be NULL. */
ATTN_API attn_status attn_batch_pad(int64_t *out, int64_t *lengths, const attn_id_seqs *s, const int64_t *rows,
                                    const attn_pad_opts *opts, int64_t n, int64_t width);
/* The width that holds the longest of those rows plus `extra` (<bos>/<eos>), capped at
 * max_len when max_len > 0. -1 (error recorded) for a row outside s, n < 0 or extra < 0. */
ATTN_API int64_t attn_batch_width(const attn_id_seqs *s, const int64_t *rows, int64_t n, int64_t extra,
                                  int64_t max_len);

/* An epoch's batches: batch b holds the example indices rows[offsets[b] .. offsets[b + 1]). */
typedef struct attn_batches {
    int64_t count;
    int64_t *offsets; /* count + 1 */
    int64_t *rows;
} attn_batches;

/* 0..n-1 shuffled with rng (NULL: in order), cut into batches of batch_size (the last may be
 * short): DataLoader(shuffle=True) with its own seeded generator. */
ATTN_API attn_status attn_batches_plain(attn_batches *out, int64_t n, int64_t batch_size, attn_rng *rng);
/* Length bucketing as the Multi30k PyTorch anchor: shuffle 0..n-1, cut into pools of
 * batch_size * pool_batches, sort each pool stably by (src length, tgt length) (tgt may be
 * NULL), cut each pool into batches of batch_size, shuffle the batch order. */
ATTN_API attn_status attn_batches_bucketed(attn_batches *out, const attn_id_seqs *src, const attn_id_seqs *tgt,
                                           int64_t batch_size, int64_t pool_batches, attn_rng *rng);
ATTN_API void attn_batches_free(attn_batches *b);

/* ---- Datasets ---- */

/* Labelled reviews. Release with attn_labeled_texts_free. */
typedef struct attn_labeled_texts {
    int64_t count;
    char **texts;        /* NUL-terminated UTF-8, as in the file */
    int32_t *labels;     /* 1 = pos, 0 = neg */
    int32_t *ratings;    /* the <rating> of <id>_<rating>.txt (1-4 neg, 7-10 pos in aclImdb) */
    int64_t *ids;        /* the <id> */
    int64_t skipped;     /* entries named like reviews that are not regular files (folders, FIFOs,
                         devices, broken links): left out, never opened */
    char *skipped_first; /* the first of them, "<path> (<kind>)"; NULL when none */
} attn_labeled_texts;

/* aclImdb layout: root/<split>/{neg,pos}/<id>_<rating>.txt (split "train" or "test"); every
 * other file or folder is ignored (unsup/, *.feat, urls_*.txt), and entries named like reviews
 * that are not regular files are counted in out->skipped and left out. Order: neg then pos, each
 * by numeric id (as the IMDB PyTorch anchor). A missing folder is ATTN_ERR_IO naming it; a folder
 * without reviews ATTN_ERR_FORMAT; a review that is not UTF-8 ATTN_ERR_FORMAT naming the file
 * and byte offset. */
ATTN_API attn_status attn_imdb_load(attn_labeled_texts *out, const char *root, const char *split);
ATTN_API void attn_labeled_texts_free(attn_labeled_texts *d);

/* Sentence pairs (src[i] translates to tgt[i]). Release with attn_text_pairs_free. Lines end
 * at "\n" (a "\r" before it is dropped, no empty last line); U+202F and U+00A0 become spaces. */
typedef struct attn_text_pairs {
    int64_t count;
    char **src, **tgt; /* NUL-terminated UTF-8 */
} attn_text_pairs;

/* Two line-aligned files, plain or gzip (e.g. Multi30k train.en.gz / train.fr.gz). Different
 * line counts: ATTN_ERR_FORMAT naming both files and counts. A path that is not a regular file
 * (FIFO, device, folder) is ATTN_ERR_IO naming it, without blocking. */
ATTN_API attn_status attn_pairs_load(attn_text_pairs *out, const char *src_path, const char *tgt_path);
/* One tab-separated file (plain or gzip), the first two fields of each line (Tatoeba /
 * manythings eng-fra: English, French, attribution). Blank lines are skipped; a line without a
 * tab is ATTN_ERR_FORMAT naming the file and line. */
ATTN_API attn_status attn_pairs_load_tsv(attn_text_pairs *out, const char *path);
ATTN_API void attn_text_pairs_free(attn_text_pairs *p);

/* ---- BLEU ---- */

/* Corpus BLEU-4 as sacrebleu (no smoothing, one reference): clipped n-gram matches and totals
 * summed over the corpus, then BLEU = BP * exp(mean_n log p_n), BP = exp(1 - ref/hyp) when
 * hyp < ref (0 for an empty corpus hypothesis), else 1 (both empty too), and 0 when some p_n is
 * 0. Zero-initialise. */
typedef struct attn_bleu_stats {
    int64_t matches[4], totals[4];
    int64_t hyp_len, ref_len;
} attn_bleu_stats;

/* Adds one sentence pair given as tokens. */
ATTN_API attn_status attn_bleu_add_tokens(attn_bleu_stats *s, const char *const *hyp, int64_t n_hyp,
                                          const char *const *ref, int64_t n_ref);
/* Adds one pair of raw strings, each stripped of trailing whitespace (str.rstrip()) and put
 * through the 13a tokenizer, as sacrebleu does (its default; for -lc pass attn_utf8_lower
 * copies). */
ATTN_API attn_status attn_bleu_add(attn_bleu_stats *s, const char *hyp, const char *ref);
/* The score in [0, 100]; precisions (4, in %, may be NULL) and bp (may be NULL) as sacrebleu
 * reports them. NaN (error recorded) for stats no sentences could have given (a negative
 * count, more matches than n-grams). */
ATTN_API double attn_bleu_score(const attn_bleu_stats *s, double *precisions, double *bp);
/* D2L's bleu(pred_seq, label_seq, k) (d2l 1.0) on token lists, in [0, 1]:
 * exp(min(0, 1 - len_label / len_pred)) * prod_{n=1}^{min(k, len_pred)} p_n^(1/2^n), with p_n
 * the clipped n-gram precision. An empty prediction scores 0; a NULL token gives NaN. */
ATTN_API double attn_bleu_d2l(const char *const *pred, int64_t n_pred, const char *const *label, int64_t n_label,
                              int k);

/* ---- byte-level BPE (GPT-2's scheme), trained by attn ----
 * Text is split into pieces by GPT-2's pattern (regex module syntax)
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * over UTF-8, where a byte that starts no valid UTF-8 sequence is a character of none of those
 * classes; each piece starts as its bytes (ids 0..255) and takes the merges in rank order (merge i
 * joins two adjacent ids into id 256 + i). Id 256 + merges is <|endoftext|>, which text never
 * encodes to (it marks where documents end). Every byte string encodes, and decoding its ids gives
 * it back byte for byte; the text "<|endoftext|>" is encoded as ordinary bytes. */
enum {
    ATTN_BPE_MAX_MERGES = 1 << 20
};
typedef struct attn_bpe attn_bpe;
typedef struct attn_bpe_trainer attn_bpe_trainer;

/* Training: the trainer counts the distinct pieces of every text added; finish learns merges from
 * them, each the most frequent adjacent pair of ids over the corpus at its turn (ties: the smaller
 * pair (first id, then second)), until vocab_size ids (bytes, merges and <|endoftext|>) or no pair
 * occurs twice (fewer merges then). The trainer stays usable; the tokenizer is the caller's. */
ATTN_API attn_bpe_trainer *attn_bpe_trainer_new(void);
ATTN_API attn_status attn_bpe_trainer_add(attn_bpe_trainer *t, const char *text, size_t len);
ATTN_API attn_bpe *attn_bpe_trainer_finish(const attn_bpe_trainer *t, int64_t vocab_size);
ATTN_API void attn_bpe_trainer_free(attn_bpe_trainer *t); /* NULL is fine */
/* A tokenizer from its merges (n_merges, 2) (as attn_bpe_merges gives them): ATTN_ERR_FORMAT for a
 * merge that names an id not made before it or repeats an earlier one. */
ATTN_API attn_bpe *attn_bpe_from_merges(const int64_t *merges, int64_t n_merges);
ATTN_API void attn_bpe_free(attn_bpe *b); /* NULL is fine */
/* The merges (*n_merges, 2), owned by b */
ATTN_API const int64_t *attn_bpe_merges(const attn_bpe *b, int64_t *n_merges);
ATTN_API int64_t attn_bpe_vocab_size(const attn_bpe *b); /* 256 + merges + 1 */
ATTN_API int64_t attn_bpe_eot(const attn_bpe *b);        /* <|endoftext|>'s id, the last */
/* text[0..len) -> ids (room for len: a byte gives at most one id); returns the count, -1 on error */
ATTN_API int64_t attn_bpe_encode(const attn_bpe *b, const char *text, size_t len, int64_t *ids);
/* ids (n) -> their bytes into out (cap bytes; whole tokens while they fit); returns the bytes all
 * of them take (more than cap: decode again with that room), -1 for an id outside the vocabulary */
ATTN_API int64_t attn_bpe_decode(const attn_bpe *b, const int64_t *ids, int64_t n, char *out, int64_t cap);
/* Token id's bytes (*len of them, not NUL-terminated), owned by b */
ATTN_API const char *attn_bpe_token_bytes(const attn_bpe *b, int64_t id, size_t *len);
/* The pre-split alone: the pieces of text[0..len), each's end offset in ends (room for len; may be
 * NULL to count); returns the count */
ATTN_API int64_t attn_bpe_pieces(const char *text, size_t len, size_t *ends);

/* llama2.c's tokenizer.bin: uint32 the longest token's bytes, then for each id float32 score,
 * int32 length, the bytes (little-endian; as many ids as the model has, which run.c takes from its
 * checkpoint). attn_bpe_llama2c_order gives the file's ids (token_order: vocab_size entries, file id
 * i is attn's token_order[i]): 1 is <|endoftext|> (llama2.c's BOS, written "\n<s>\n": every
 * prompt starts after it and generation stops at it, as attn's do), 3 + b is byte b (run.c's
 * fallback for a character it does not find), 0 and 2 are the first two merges (llama2.c's
 * <unk> and EOS, which run.c's generation never makes), then the other merges in order; it needs
 * two merges (ATTN_ERR_ARG). A merge of rank r scores -r (run.c merges the highest score first,
 * so attn's order), the others 0. Pass the same order to attn_lm_save_llama2c. run.c's encoder
 * starts from a dummy space and whole UTF-8 characters, with no pre-split: on ASCII text with
 * single spaces it gives attn's ids; its printing skips lone non-printable bytes. */
ATTN_API attn_status attn_bpe_llama2c_order(const attn_bpe *b, int64_t *token_order);
ATTN_API attn_status attn_bpe_save_llama2c(const attn_bpe *b, const char *path);
/* llm.c's gpt2_tokenizer.bin (version 2), which its programs decode samples with: uint32 x 256
 * (20240328, 2, vocab_size, <|endoftext|>'s id, zeros), then per id uint8 length and its bytes
 * (<|endoftext|> as that text); ATTN_ERR_ARG for a token past 255 bytes. */
ATTN_API attn_status attn_bpe_save_llmc(const attn_bpe *b, const char *path);

/* A llama2.c tokenizer.bin (any: Llama 2's own, or attn_bpe_save_llama2c's) of vocab_size ids
 * (the model's: the file has no count; >= 259, for <unk>, BOS, EOS and the bytes at 3 + b). The
 * file must hold exactly that many tokens, none longer than its header's longest (ATTN_ERR_FORMAT
 * naming name). Pieces are strings up to their first NUL, as run.c reads them; of equal pieces the
 * first id is the one found. */
typedef struct attn_llama2c_vocab attn_llama2c_vocab;
ATTN_API attn_llama2c_vocab *attn_llama2c_vocab_read(const void *data, size_t size, int64_t vocab_size,
                                                     const char *name);
ATTN_API attn_llama2c_vocab *attn_llama2c_vocab_load(const char *path, int64_t vocab_size);
ATTN_API void attn_llama2c_vocab_free(attn_llama2c_vocab *v); /* NULL is fine */
ATTN_API int64_t attn_llama2c_vocab_size(const attn_llama2c_vocab *v);
/* The file's bytes as read (*size of them; owned by v), and those bytes written to path */
ATTN_API const void *attn_llama2c_vocab_bytes(const attn_llama2c_vocab *v, size_t *size);
ATTN_API attn_status attn_llama2c_vocab_save(const attn_llama2c_vocab *v, const char *path);
/* run.c's encode: BOS (1) first when bos; then, for text not empty, the id of " " (byte fallback
 * when the vocabulary has none, where run.c would write -1); each UTF-8 character (a byte and up to
 * 3 continuation bytes after it) as its piece, or its bytes at 3 + b when it is not one; then the
 * adjacent pair whose joined piece scores highest (above -1e10) merged, the leftmost of equal
 * scores, until no joined pair is a piece. ids needs room for len + 2; returns the count, -1 on
 * error. A NUL byte is encoded as its byte here; run.c's C string ends at it. */
ATTN_API int64_t attn_llama2c_encode(const attn_llama2c_vocab *v, const char *text, size_t len, bool bos, int64_t *ids);
/* run.c's decode: token id's bytes after token prev (*len of them; owned by v): without its leading
 * space after BOS (prev 1), and a piece "<0xHH>" is the byte HH. (run.c also prints nothing for a
 * lone byte that is neither printable nor white space; attn prints every byte.) */
ATTN_API const char *attn_llama2c_piece(const attn_llama2c_vocab *v, int64_t prev, int64_t id, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_DATA_H */
