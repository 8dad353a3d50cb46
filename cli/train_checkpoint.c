/* A training run in its checkpoint (train_common.h): the parameters, the optimizer's state, the
 * position and every rank's RNG saved together, checked against the run, and read back to resume. */
#include "train_common.h"
#include "dist.h"
#include "options.h"
#include "train_guard.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rank 0's RNG state has its own keys (run.rng_state, ...), as in checkpoints of one process;
 * rank r >= 1 has run.rank<r>.rng = "state inc has_spare spare". */
enum {
    RUN_KEYS = 7,
    VAL_LEN = 96
};

static void rank_rng_format(char *buf, const attn_rng *r)
{
    snprintf(buf, VAL_LEN, "%" PRIu64 " %" PRIu64 " %d %a", r->state, r->inc, r->has_spare, (double)r->spare);
}

static bool rank_rng_parse(const char *s, attn_rng *out)
{
    attn_rng r;
    double spare;
    if (!s || sscanf(s, "%" SCNu64 " %" SCNu64 " %d %la", &r.state, &r.inc, &r.has_spare, &spare) != 4) return false;
    r.spare = (float)spare;
    *out = r;
    return true;
}

/* Rank 0's metadata of a checkpoint: the run's position and RNG states (rngs[r]: rank r's), its
 * options and thread count, the model's keys and the vocabularies, as all[2i] = all[2i+1] */
typedef struct root_meta {
    char (*vals)[VAL_LEN];
    char (*names)[32];
    const char **all;
    int n_all;
} root_meta;

static void root_meta_free(root_meta *m)
{
    free(m->vals), free(m->names), free(m->all);
}

static attn_status root_meta_build(root_meta *m, const run_position *pos, const attn_rng *rngs, const char *const *kv,
                                   int n_kv, const checkpoint_extra *x)
{
    static const char *const keys[RUN_KEYS] = {"run.epoch",   "run.batch",         "run.global_batch", "run.rng_state",
                                               "run.rng_inc", "run.rng_has_spare", "run.rng_spare"};
    const int ranks = dist_size(), n_opts = x ? x->n_options : 0, n_vocabs = x ? x->n_vocabs : 0;
    const int n_run = RUN_KEYS + ranks - 1 + n_opts + 1; /* + run.threads */
    m->n_all = n_run + n_kv + n_vocabs;
    m->vals = malloc((size_t)n_run * sizeof *m->vals), m->names = malloc((size_t)(ranks + n_opts) * sizeof *m->names);
    m->all = malloc((size_t)(2 * m->n_all) * sizeof *m->all);
    if (!m->vals || !m->names || !m->all) return ATTN_ERR_NOMEM;
    char(*vals)[VAL_LEN] = m->vals, (*names)[32] = m->names;
    const char **all = m->all;
    snprintf(vals[0], VAL_LEN, "%ld", pos->epoch);
    snprintf(vals[1], VAL_LEN, "%" PRId64, pos->batch);
    snprintf(vals[2], VAL_LEN, "%" PRId64, pos->global_batch);
    snprintf(vals[3], VAL_LEN, "%" PRIu64, pos->rng.state);
    snprintf(vals[4], VAL_LEN, "%" PRIu64, pos->rng.inc);
    snprintf(vals[5], VAL_LEN, "%d", pos->rng.has_spare);
    snprintf(vals[6], VAL_LEN, "%a", (double)pos->rng.spare);
    for (int i = 0; i < RUN_KEYS; i++) all[2 * i] = keys[i], all[2 * i + 1] = vals[i];
    int at = RUN_KEYS;
    for (int r = 1; r < ranks; r++, at++) {
        snprintf(names[r], sizeof names[r], "run.rank%d.rng", r);
        rank_rng_format(vals[at], &rngs[r]);
        all[2 * at] = names[r], all[2 * at + 1] = vals[at];
    }
    for (int i = 0; i < n_opts; i++, at++) {
        snprintf(names[ranks + i], sizeof names[ranks + i], "run.%s", x->options[i].opt + 2); /* "--lr": run.lr */
        snprintf(vals[at], VAL_LEN, "%.17g", x->options[i].value);
        all[2 * at] = names[ranks + i], all[2 * at + 1] = vals[at];
    }
    snprintf(vals[at], VAL_LEN, "%d", cli_threads());
    all[2 * at] = "run.threads", all[2 * at + 1] = vals[at];
    at++;
    memcpy(all + 2 * at, kv, (size_t)(2 * n_kv) * sizeof *kv);
    at += n_kv;
    for (int i = 0; i < n_vocabs; i++, at++) all[2 * at] = x->vocab_keys[i], all[2 * at + 1] = x->vocab_texts[i];
    return ATTN_OK;
}

/* Rank 0: the file, with rngs[r] the RNG state of rank r. */
static attn_status save_root(const char *path, const attn_params *p, const attn_optim *opt, const run_position *pos,
                             const attn_rng *rngs, const char *const *kv, int n_kv, const checkpoint_extra *x)
{
    root_meta m = {0};
    attn_status st = root_meta_build(&m, pos, rngs, kv, n_kv, x);
    if (st == ATTN_OK) st = attn_checkpoint_save(path, p, opt, m.all, m.n_all);
    root_meta_free(&m);
    return st;
}

int run_checkpoint_fits(const char *cmd, const char *path, const attn_params *p, const attn_optim *opt,
                        const run_position *pos, const char *const *kv, int n_kv, const checkpoint_extra *x)
{
    size_t bytes = 0;
    attn_status st = ATTN_OK;
    if (dist_rank() == 0) { /* every rank's RNG as rank 0's: the same length within a few digits */
        attn_rng *rngs = malloc((size_t)dist_size() * sizeof *rngs);
        root_meta m = {0};
        for (int r = 0; rngs && r < dist_size(); r++) rngs[r] = pos->rng;
        st = rngs ? root_meta_build(&m, pos, rngs, kv, n_kv, x) : ATTN_ERR_NOMEM;
        if (st == ATTN_OK) st = attn_checkpoint_header_bytes(p, opt, m.all, m.n_all, &bytes);
        root_meta_free(&m);
        free(rngs);
    }
    /* room for the numbers that grow as the run goes (steps, epochs, positions) */
    const bool over = st == ATTN_OK && bytes + 4096 > ATTN_ST_MAX_HEADER;
    if (dist_any(st != ATTN_OK || over)) {
        if (st != ATTN_OK)
            return cli_fail(CLI_ERR_DATA, cmd, "%s", st == ATTN_ERR_NOMEM ? "out of memory" : attn_last_error());
        if (over)
            return cli_fail(CLI_ERR_DATA, cmd,
                            "%s: its header would be %zu bytes (the vocabularies in its metadata), over the %u that "
                            "safetensors readers take: the checkpoint could not be read back, so nothing is trained; "
                            "use a smaller vocabulary",
                            path, bytes, ATTN_ST_MAX_HEADER);
        return CLI_ERR_DATA; /* another rank failed and said why */
    }
    return CLI_OK;
}

attn_status run_checkpoint_save(const char *path, const attn_params *p, const attn_optim *opt, const run_position *pos,
                                const char *const *kv, int n_kv, const checkpoint_extra *x)
{
    /* NaN or Inf parameters never replace a good checkpoint (every rank holds the same ones) */
    if (train_guard_params(p, path, pos->epoch, pos->batch) != ATTN_OK) return attn_last_status();
    const bool root = dist_rank() == 0;
    attn_rng *rngs = root ? malloc((size_t)dist_size() * sizeof *rngs) : NULL;
    if (root && !rngs) return ATTN_ERR_NOMEM; /* the others wait in the gather until the job stops */
    dist_gather(&pos->rng, rngs, sizeof pos->rng);
    attn_status st = root ? save_root(path, p, opt, pos, rngs, kv, n_kv, x) : ATTN_OK;
    free(rngs);
    return st;
}

int run_options_check(const char *cmd, const attn_st_file *f, const char *path, const run_option *opts, int n)
{
    char differ[512] = "", saved[512] = "";
    for (int i = 0; i < n; i++) {
        char key[40];
        snprintf(key, sizeof key, "run.%s", opts[i].opt + 2);
        const char *text = attn_st_metadata(f, key);
        char *end = NULL;
        const double was = text ? strtod(text, &end) : 0;
        if (!text) continue; /* written before the run's options were kept: nothing to hold it to */
        if (end == text || *end || !isfinite(was))
            return cli_fail(CLI_ERR_DATA, cmd,
                            "resume: %s: metadata %s is \"%s\", which no training command "
                            "writes (a damaged file)",
                            path, key, text);
        if (was == opts[i].value) continue;
        snprintf(differ + strlen(differ), sizeof differ - strlen(differ), "%s%s %g", *differ ? ", " : "", opts[i].opt,
                 opts[i].value);
        snprintf(saved + strlen(saved), sizeof saved - strlen(saved), "%s%s %g", *saved ? ", " : "", opts[i].opt, was);
    }
    if (*differ)
        return cli_fail(CLI_ERR_USAGE, cmd,
                        "resume: %s was trained with %s; these options give %s, and a resumed run "
                        "gives the same losses as an uninterrupted one only with the same: resume with the options "
                        "it was trained with (--epochs, --max-steps, --checkpoint-every, --log-steps, --plot-loss "
                        "and --threads may change)",
                        path, saved, differ);
    long threads;
    if (checkpoint_meta_long(f, "run.threads", &threads) && threads != cli_threads())
        printf("note: %s was trained with %ld threads, this run has %d: its losses may differ from an "
               "uninterrupted run's in the last digits\n",
               path, threads, cli_threads());
    return CLI_OK;
}

typedef struct rank_rng {
    attn_rng rng;
    int have; /* the checkpoint has this rank's state */
} rank_rng;

/* A metadata value as an unsigned 64-bit integer: digits only, in range. */
static bool meta_u64(const attn_st_file *f, const char *key, uint64_t *out)
{
    const char *v = attn_st_metadata(f, key);
    char *end;
    if (!v || !isdigit((unsigned char)*v)) return false;
    errno = 0;
    *out = strtoull(v, &end, 10);
    return !*end && !errno;
}

/* Rank 0's RNG state from its own keys: NULL, or the key that is missing or holds what no training
 * command writes (inc is odd, has_spare 0 or 1, spare a finite float). */
static const char *root_rng_read(const attn_st_file *f, attn_rng *out)
{
    const char *spare = attn_st_metadata(f, "run.rng_spare");
    char *end = NULL;
    const float s = spare ? (float)strtod(spare, &end) : 0.0f;
    long has_spare;
    if (!meta_u64(f, "run.rng_state", &out->state)) return "run.rng_state";
    if (!meta_u64(f, "run.rng_inc", &out->inc) || !(out->inc & 1)) return "run.rng_inc";
    if (!checkpoint_meta_long(f, "run.rng_has_spare", &has_spare) || (has_spare != 0 && has_spare != 1))
        return "run.rng_has_spare";
    if (!spare || end == spare || *end || !isfinite(s)) return "run.rng_spare";
    out->has_spare = (int)has_spare;
    out->spare = s;
    return NULL;
}

/* Rank 0: parameters, optimizer and position from the checkpoint, and every rank's RNG state. */
static int load_root(const char *cmd, const attn_st_file *f, const char *path, attn_params *p, attn_optim *opt,
                     run_position *pos, rank_rng *rngs)
{
    if (attn_checkpoint_load_file(f, p, opt, true) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, cmd, "resume: %s", attn_last_error());
    long epoch, global = 0, batch;
    const bool has_global = attn_st_metadata(f, "run.global_batch") != NULL; /* older files lack it */
    const char *bad = !checkpoint_meta_long(f, "run.epoch", &epoch)   ? "run.epoch"
                      : !checkpoint_meta_long(f, "run.batch", &batch) ? "run.batch"
                      : has_global && (!checkpoint_meta_long(f, "run.global_batch", &global) || global < 1)
                          ? "run.global_batch"
                          : root_rng_read(f, &pos->rng);
    const char *text = bad ? attn_st_metadata(f, bad) : NULL;
    int code = CLI_OK;
    if (bad && !text) {
        code = cli_fail(CLI_ERR_DATA, cmd,
                        "resume: %s has no run position (run.epoch, run.batch, run.rng_*); "
                        "it was not written by a training command",
                        path);
    } else if (bad) {
        code = cli_fail(CLI_ERR_DATA, cmd,
                        "resume: %s: metadata %s is \"%s\", which no training command writes "
                        "(a damaged file)",
                        path, bad, text);
    } else if (epoch < 0 || epoch > 100000 || batch < 0 || batch > pos->per_epoch) {
        /* batch = per_epoch: the epoch's last step was saved (--checkpoint-every), not its end */
        code = cli_fail(CLI_ERR_DATA, cmd,
                        "resume: %s: run position epoch %ld, batch %ld is out of range "
                        "(epoch in [0, 100000], batch in [0, %lld]: an epoch of this data has %lld batches)",
                        path, epoch, batch, (long long)pos->per_epoch, (long long)pos->per_epoch);
    } else if (has_global && global != pos->global_batch) {
        code = cli_fail(CLI_ERR_USAGE, cmd,
                        "resume: %s was written with a global batch of %ld examples "
                        "(--batch-size x ranks); this run has %lld x %d = %lld: resume with the same product",
                        path, global, (long long)(pos->global_batch / dist_size()), dist_size(),
                        (long long)pos->global_batch);
    } else {
        pos->epoch = epoch;
        pos->batch = batch;
        rngs[0] = (rank_rng){.rng = pos->rng, .have = 1};
        int missing = 0;
        for (int r = 1; r < dist_size(); r++) {
            char key[32];
            snprintf(key, sizeof key, "run.rank%d.rng", r);
            rngs[r].have = rank_rng_parse(attn_st_metadata(f, key), &rngs[r].rng);
            missing += !rngs[r].have;
        }
        if (missing)
            printf("note: %s has no dropout RNG state for %d of the %d ranks (it was written by fewer); "
                   "they start fresh streams\n",
                   path, missing, dist_size());
    }
    return code;
}

/* Rank 0's parameters, optimizer state and step count, and run position, on every rank. */
static void share_run(attn_params *p, attn_optim *opt, run_position *pos)
{
    dist_broadcast_floats(attn_params_data_block(p), attn_params_numel(p));
    for (size_t i = 0; i < attn_optim_state_count(opt); i++) {
        const char *name;
        float *data;
        int64_t numel;
        if (attn_optim_state_at(opt, i, &name, &data, &numel) == ATTN_OK) dist_broadcast_floats(data, numel);
    }
    int64_t where[3] = {attn_optim_step_count(opt), pos->epoch, pos->batch};
    dist_broadcast_bytes(where, sizeof where);
    attn_optim_set_step_count(opt, where[0]);
    pos->epoch = (long)where[1];
    pos->batch = where[2];
}

int run_start(const char *cmd, bool resume, const attn_st_file *f, const char *path, attn_params *p, attn_optim *opt,
              run_position *pos)
{
    rank_rng *rngs = calloc((size_t)dist_size(), sizeof *rngs), mine = {0};
    int code = rngs ? CLI_OK : cli_fail(CLI_ERR_DATA, cmd, "out of memory");
    /* a failure on rank 0 leaves the others in share_run until dist_finish stops the job */
    if (code == CLI_OK && resume && dist_rank() == 0) code = load_root(cmd, f, path, p, opt, pos, rngs);
    if (code == CLI_OK) {
        share_run(p, opt, pos);
        if (resume) {
            dist_scatter(rngs, &mine, sizeof mine);
            if (mine.have) pos->rng = mine.rng;
        }
    }
    free(rngs);
    return code;
}
