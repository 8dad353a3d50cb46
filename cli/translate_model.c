/* attn translate: the model config as checkpoint metadata (its ranges, reading it back, comparing
 * two) and the options a resumed run must keep. */
#include "translate.h"

#include <stddef.h>

/* The model config in checkpoint metadata; the ranges are those of the options that set it. */
_Static_assert(sizeof(attn_seq2seq_kind) == sizeof(int), "enums are read as int");
_Static_assert(ATTN_GRU_MAX_LAYERS == 8, "translate_read_config's message names the GRU's most layers");
#define C(field) offsetof(attn_seq2seq_config, field)
static const config_field config_fields[] = {
    {"kind", CONFIG_INT, C(kind), 0, ATTN_SEQ2SEQ_BAHDANAU},
    {"src_vocab", CONFIG_I64, C(src_vocab), 4, 100000000},
    {"tgt_vocab", CONFIG_I64, C(tgt_vocab), 4, 100000000},
    {"d_model", CONFIG_I64, C(d_model), 2, 8192},
    {"num_heads", CONFIG_I64, C(num_heads), 1, 256},
    {"dim_feedforward", CONFIG_I64, C(dim_feedforward), 1, 65536},
    {"enc_layers", CONFIG_INT, C(enc_layers), 1, 64},
    {"dec_layers", CONFIG_INT, C(dec_layers), 1, 64},
    {"max_len", CONFIG_I64, C(max_len), 2, 100002},
    {"pad_id", CONFIG_I64, C(pad_id), 0, 100000000},
    {"bos_id", CONFIG_I64, C(bos_id), 0, 100000000},
    {"eos_id", CONFIG_I64, C(eos_id), 0, 100000000},
    {"rope_base", CONFIG_F32, C(rope_base), 0, 10000000, .optional = true},
};
#undef C
#define N_CONFIG_FIELDS (int)(sizeof config_fields / sizeof config_fields[0])
const config_schema translate_schema = {"translate",   "attn-seq2seq",  "translation",
                                        config_fields, N_CONFIG_FIELDS, " (--max-len + 2)"};

const run_option *translate_run_options(const translate_options *o, int *n)
{
    static _Thread_local run_option opts[8];
    opts[0] = (run_option){"--seed", (double)o->train.seed};
    opts[1] = (run_option){"--lr", o->train.lr};
    opts[2] = (run_option){"--dropout", (double)o->model.dropout};
    opts[3] = (run_option){"--label-smoothing", o->label_smoothing};
    opts[4] = (run_option){"--warmup", (double)o->warmup};
    opts[5] = (run_option){"--min-freq", (double)o->min_freq};
    opts[6] = (run_option){"--matmul-precision", (double)o->train.matmul_precision};
    opts[7] = (run_option){"--no-pack", o->no_pack ? 1.0 : 0.0}; /* dropout draws differ */
    *n = 8;
    return opts;
}

/* The config of a saved model (checkpoint f at path), range-checked and consistent before anything
 * is built from it. */
int translate_read_config(const attn_st_file *f, const char *path, attn_seq2seq_config *c)
{
    int code = config_read(&translate_schema, f, path, c);
    if (code != CLI_OK) return code;
    const char *why = c->kind == ATTN_SEQ2SEQ_TRANSFORMER && c->d_model % c->num_heads
                          ? "num_heads does not divide d_model"
                      : c->kind == ATTN_SEQ2SEQ_BAHDANAU &&
                              (c->enc_layers > ATTN_GRU_MAX_LAYERS || c->dec_layers > ATTN_GRU_MAX_LAYERS)
                          ? "the Bahdanau GRU has at most 8 layers"
                      : c->pad_id >= c->tgt_vocab || c->bos_id >= c->tgt_vocab || c->eos_id >= c->tgt_vocab
                          ? "pad_id, bos_id and eos_id must be below tgt_vocab"
                          : NULL;
    return why ? cli_fail(CLI_ERR_DATA, "translate", "%s: metadata: %s", path, why) : CLI_OK;
}

/* Every field a checkpoint stores (config_fields) equal: a new field is compared as soon as it is stored */
bool translate_same_config(const attn_seq2seq_config *a, const attn_seq2seq_config *b)
{
    for (int i = 0; i < N_CONFIG_FIELDS; i++)
        if (config_value(&config_fields[i], a) != config_value(&config_fields[i], b)) return false;
    return true;
}
