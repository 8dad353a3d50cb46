/* attn translate: the model a run builds or reads back (its config from the vocabularies, the
 * vocabularies a checkpoint carries, --average and --average-kept, --resume's checks): the
 * checkpoint side of cmd_translate.c's actions. */
#include "translate.h"
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const translate_specials[4] = {"<unk>", "<pad>", "<bos>", "<eos>"};
const char *const translate_vocab_keys[2] = {"vocab.src", "vocab.tgt"};

char *translate_vocab_path(const char *checkpoint, const char *side)
{
    char suffix[16];
    snprintf(suffix, sizeof suffix, ".%s.vocab", side);
    return cli_checkpoint_sibling(checkpoint, suffix);
}

/* The sizes and special ids a model of these vocabularies has (an id -1: the token is missing). */
static void config_from_vocabs(const translate_run *run, attn_seq2seq_config *c)
{
    c->src_vocab = attn_vocab_size(run->src_vocab);
    c->tgt_vocab = attn_vocab_size(run->tgt_vocab);
    c->pad_id = attn_vocab_find(run->tgt_vocab, "<pad>");
    c->bos_id = attn_vocab_find(run->tgt_vocab, "<bos>");
    c->eos_id = attn_vocab_find(run->tgt_vocab, "<eos>");
}

/* The model of o; from: the checkpoint that sizes it (params_for), NULL for a new one */
int translate_build_model(translate_run *run, translate_options *o, const attn_st_file *from)
{
    attn_seq2seq_config *c = &o->model;
    config_from_vocabs(run, c);
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)o->train.seed);
    run->params = params_for(from);
    if (!run->params || attn_seq2seq_init(&run->model, run->params, c, &rng) != ATTN_OK)
        return model_build_failed("translate", from, o->train.checkpoint);
    run->model_ready = true;
    return CLI_OK;
}

/* true unless f carries vocabularies that are not the model's (a file without them, written by an
 * older attn, cannot tell). */
static bool same_vocabs(const attn_st_file *f, const translate_run *run)
{
    const attn_vocab *v[2] = {run->src_vocab, run->tgt_vocab};
    for (int i = 0; i < 2; i++) {
        const char *text = attn_st_metadata(f, translate_vocab_keys[i]);
        size_t len;
        char *mine = text ? attn_vocab_text(v[i], &len) : NULL;
        bool same = !text || (mine && !strcmp(mine, text));
        free(mine);
        if (!same) return false;
    }
    return true;
}

/* --average A,B,...: the parameters become the mean of --checkpoint's and those files' (checkpoint
 * averaging: the same model saved at several epochs of one run). */
static int average_checkpoints(translate_run *run, const translate_options *o)
{
    char *list = strdup(o->average), *save = NULL;
    const char **paths = calloc(strlen(o->average) / 2 + 1, sizeof *paths); /* at most one per 2 chars */
    int code = list && paths ? CLI_OK : cli_fail(CLI_ERR_DATA, "translate", "out of memory");
    int n = 0;
    for (char *path = list ? strtok_r(list, ",", &save) : NULL; code == CLI_OK && path;
         path = strtok_r(NULL, ",", &save)) {
        attn_seq2seq_config c = o->model;
        attn_st_file *f = checkpoint_open("translate", path, " (--average)");
        if (!f || (code = translate_read_config(f, path, &c)) != CLI_OK) {
            attn_st_close(f);
            code = CLI_ERR_DATA;
            break;
        }
        if (!translate_same_config(&c, &o->model) || !same_vocabs(f, run))
            code = cli_fail(CLI_ERR_DATA, "translate",
                            "--average: %s holds a different model%s than %s; expected "
                            "checkpoints of the same run",
                            path, translate_same_config(&c, &o->model) ? " (other vocabularies)" : "",
                            o->train.checkpoint);
        attn_st_close(f);
        paths[n++] = path;
    }
    if (code == CLI_OK && n == 0)
        code = cli_fail(CLI_ERR_USAGE, "translate",
                        "--average expects checkpoint files separated by commas, got \"%s\"", o->average);
    if (code == CLI_OK && attn_checkpoint_average(run->params, paths, n) != ATTN_OK)
        code = cli_fail(CLI_ERR_DATA, "translate", "--average: %s", attn_last_error());
    if (code == CLI_OK) printf("parameters: the mean of %d checkpoints\n", n + 1);
    free(paths);
    free(list);
    return code;
}

/* The vocabularies checkpoint f carries (or, written by an older attn, the files beside it), each
 * with the specials attn puts first. */
static int load_vocabs(translate_run *run, const attn_st_file *f, const char *checkpoint)
{
    static const char *const sides[2] = {"src", "tgt"}, *const which[2] = {"source ", "target "};
    attn_vocab **v[2] = {&run->src_vocab, &run->tgt_vocab};
    for (int i = 0; i < 2; i++) {
        char *legacy = translate_vocab_path(checkpoint, sides[i]);
        if (!legacy) return cli_fail(CLI_ERR_DATA, "translate", "out of memory");
        *v[i] = checkpoint_vocab("translate", f, checkpoint, translate_vocab_keys[i], legacy);
        free(legacy);
        if (!*v[i] || !vocab_has_specials("translate", checkpoint, which[i], *v[i], translate_specials, 4))
            return CLI_ERR_DATA;
    }
    return CLI_OK;
}

/* --beam against the target vocabulary, before any work: a beam keeps that many distinct tokens. */
int translate_check_beam(const translate_options *o, const translate_run *run)
{
    const int64_t v = attn_vocab_size(run->tgt_vocab);
    if (o->beam <= v) return CLI_OK;
    return cli_fail(CLI_ERR_USAGE, "translate",
                    "--beam %ld is more than the %lld tokens of the target vocabulary; "
                    "expected at most %lld",
                    o->beam, (long long)v, (long long)v);
}

/* eval/translate: the saved model and vocabularies, from one reading of the checkpoint. */
int translate_load_model(translate_run *run, translate_options *o)
{
    attn_st_file *f = checkpoint_open("translate", o->train.checkpoint, " (train a model first: attn translate train)");
    if (!f) return CLI_ERR_DATA;
    int code = translate_read_config(f, o->train.checkpoint, &o->model);
    if (code == CLI_OK) code = load_vocabs(run, f, o->train.checkpoint);
    attn_seq2seq_config files = o->model, *m = &o->model;
    if (code == CLI_OK) config_from_vocabs(run, &files);
    if (code == CLI_OK && !translate_same_config(&files, m))
        code =
            cli_fail(CLI_ERR_DATA, "translate",
                     "%s: its vocabularies (%lld and %lld tokens; <pad> %lld, "
                     "<bos> %lld, <eos> %lld; -1: missing) do not fit its metadata (%lld and %lld; %lld, %lld, %lld)",
                     o->train.checkpoint, (long long)files.src_vocab, (long long)files.tgt_vocab,
                     (long long)files.pad_id, (long long)files.bos_id, (long long)files.eos_id, (long long)m->src_vocab,
                     (long long)m->tgt_vocab, (long long)m->pad_id, (long long)m->bos_id, (long long)m->eos_id);
    if (code == CLI_OK) code = translate_check_beam(o, run);
    if (code == CLI_OK) code = translate_build_model(run, o, f);
    if (code == CLI_OK && attn_checkpoint_load_file(f, run->params, NULL, true) != ATTN_OK)
        code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
    attn_st_close(f);
    return code == CLI_OK && o->average ? average_checkpoints(run, o) : code;
}

/* --average-kept: the parameters become the mean of the last --keep-epochs epoch files kept beside
 * the checkpoint, back from the last one this process saved while they exist; no such file: the
 * final parameters stay. Rank 0 (the one that scores). */
int translate_average_kept(translate_run *run, const translate_options *o)
{
    const long last = run->last_kept_epoch;
    const size_t len = strlen(o->train.checkpoint) + 32;
    char *names = malloc((size_t)o->keep_epochs * len);
    const char **paths = malloc((size_t)o->keep_epochs * sizeof *paths);
    int code = names && paths ? CLI_OK : cli_fail(CLI_ERR_DATA, "translate", "out of memory");
    long n = 0; /* paths[0]: epoch last, paths[i]: epoch last - i */
    for (; code == CLI_OK && n < o->keep_epochs && last - n >= 1; n++) {
        char *path = names + (size_t)n * len;
        snprintf(path, len, "%s.epoch%ld", o->train.checkpoint, last - n);
        if (!cli_looks_like_checkpoint(path)) break;
        paths[n] = path;
    }
    attn_st_file *f = code == CLI_OK && n > 0 ? checkpoint_open("translate", paths[0], NULL) : NULL;
    if (code == CLI_OK && n > 0 && (!f || attn_checkpoint_load_file(f, run->params, NULL, true) != ATTN_OK))
        code = cli_fail(CLI_ERR_DATA, "translate", "--average-kept: %s", f ? attn_last_error() : paths[0]);
    attn_st_close(f);
    if (code == CLI_OK && n > 1 && attn_checkpoint_average(run->params, paths + 1, (int)n - 1) != ATTN_OK)
        code = cli_fail(CLI_ERR_DATA, "translate", "--average-kept: %s", attn_last_error());
    if (code == CLI_OK && n > 0)
        printf("parameters: the mean of epochs %ld to %ld (%s.epochN)\n", last - n + 1, last, o->train.checkpoint);
    else if (code == CLI_OK)
        printf("parameters: the final ones (--average-kept: no epoch file kept)\n");
    free(paths);
    free(names);
    return code;
}

/* --resume: the checkpoint, read once on rank 0, must hold the model and the run these options
 * make; its vocabularies (every id keeps its row) go to every rank. */
int translate_open_resumed(translate_run *run, translate_options *o)
{
    const char *ck = o->train.checkpoint;
    char *text[2] = {NULL, NULL};
    int code = CLI_OK;
    if (dist_rank() == 0) {
        size_t len;
        if (!(run->resume = checkpoint_open("translate", ck, NULL))) return CLI_ERR_DATA;
        if ((code = checkpoint_model_check(&translate_schema, run->resume, ck)) != CLI_OK ||
            (code = load_vocabs(run, run->resume, ck)) != CLI_OK)
            return code; /* the others wait in share_text */
        if (!(text[0] = attn_vocab_text(run->src_vocab, &len)) || !(text[1] = attn_vocab_text(run->tgt_vocab, &len)))
            code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
        config_from_vocabs(run, &o->model);
        attn_seq2seq_config saved = o->model; /* the model these options build must be the saved one */
        int n;
        const run_option *ro = translate_run_options(o, &n);
        if (code == CLI_OK) code = config_check_resumed(&translate_schema, run->resume, ck, &o->model, &saved);
        if (code == CLI_OK) code = run_options_check("translate", run->resume, ck, ro, n);
        if (code != CLI_OK) {
            free(text[0]);
            free(text[1]);
            return code;
        }
    }
    attn_vocab **v[2] = {&run->src_vocab, &run->tgt_vocab};
    for (int i = 0; i < 2; i++) {
        run->vocab_text[i] = share_text(text[i]);
        free(text[i]);
    }
    for (int i = 0; i < 2; i++) {
        if (!run->vocab_text[i]) return cli_fail(CLI_ERR_DATA, "translate", "out of memory");
        if (!*v[i] && !(*v[i] = attn_vocab_parse(run->vocab_text[i], strlen(run->vocab_text[i]), ck)))
            return cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
    }
    return CLI_OK;
}
