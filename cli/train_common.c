/* Shared pieces of the training subcommands (see train_common.h). */
#include "train_common.h"
#include "options.h"
#include "dist.h"
#include "train_guard.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_start(progress *p, const char *cmd, int64_t total_steps, int64_t done_steps, bool log_steps)
{
    const bool show = dist_rank() == 0;
    *p = (progress){.cmd = cmd,
                    .show = show,
                    .tty = show && isatty(STDERR_FILENO),
                    .log_steps = show && log_steps,
                    .start = now_seconds(),
                    .total_steps = total_steps,
                    .done_steps = done_steps};
    p->last_print = p->start;
}

static void format_eta(char *buf, size_t n, double seconds)
{
    long s = (long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, n, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else
        snprintf(buf, n, "%ldm%02lds", s / 60, s % 60);
}

void progress_step(progress *p, long epoch, int64_t batch, int64_t batches, double loss, double tokens)
{
    p->done_steps++;
    p->tokens += tokens;
    if (p->log_steps) {
        printf("step %" PRId64 " (epoch %ld, batch %" PRId64 "/%" PRId64 "): loss %.9g\n", p->done_steps, epoch + 1,
               batch + 1, batches, loss);
        fflush(stdout);
    }
    double t = now_seconds(), elapsed = t - p->start;
    bool last = batch + 1 == batches;
    if (!p->show || (!last && t - p->last_print < (p->tty ? 0.25 : 30.0))) return;
    p->last_print = t;
    char eta[32];
    format_eta(eta, sizeof eta, elapsed / (double)p->done_steps * (double)(p->total_steps - p->done_steps));
    fprintf(stderr, "%sattn %s: epoch %ld, step %" PRId64 "/%" PRId64 ", loss %.4f, %.0f tokens/s, ETA %s%s",
            p->tty ? "\r\033[K" : "", p->cmd, epoch + 1, batch + 1, batches, loss,
            elapsed > 0 ? p->tokens / elapsed : 0.0, eta, p->tty ? "" : "\n");
    p->line_open = p->tty;
    fflush(stderr);
}

void progress_end(progress *p)
{
    if (p->line_open) fputc('\n', stderr);
    p->line_open = false;
}

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

bool checkpoint_meta_long(const attn_st_file *f, const char *key, long *out)
{
    const char *v = attn_st_metadata(f, key);
    char *end;
    if (!v) return false;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno) return false;
    *out = x;
    return true;
}

double config_value(const config_field *field, const void *cfg)
{
    const char *at = (const char *)cfg + field->offset;
    switch (field->type) {
    case CONFIG_I64:
        return (double)*(const int64_t *)at;
    case CONFIG_INT:
        return *(const int *)at;
    case CONFIG_BOOL:
        return *(const bool *)at;
    case CONFIG_F32:
        return *(const float *)at;
    }
    return 0;
}

/* A field's value as metadata text: integers as digits, a float in 9 significant digits (which
 * give the float back exactly) */
static void config_text(const config_field *field, const void *cfg, char *out, size_t n)
{
    if (field->type == CONFIG_F32)
        snprintf(out, n, "%.9g", config_value(field, cfg));
    else
        snprintf(out, n, "%.0f", config_value(field, cfg));
}

/* ---- vocabularies inside the checkpoint ---- */

char *share_text(const char *text)
{
    uint64_t len = dist_rank() == 0 && text ? (uint64_t)strlen(text) + 1 : 0;
    dist_broadcast_bytes(&len, sizeof len);
    char *copy = len ? malloc((size_t)len) : NULL;
    bool ok = !len || copy; /* every rank must take part in the broadcast below */
    if (!dist_any(!ok)) {
        if (dist_rank() == 0 && len) memcpy(copy, text, (size_t)len);
        if (len) dist_broadcast_bytes(copy, (size_t)len);
        return copy;
    }
    free(copy);
    return NULL;
}

attn_vocab *checkpoint_vocab(const char *cmd, const attn_st_file *f, const char *path, const char *key,
                             const char *legacy)
{
    const char *text = attn_st_metadata(f, key);
    attn_vocab *v = NULL;
    if (text) {
        char name[PATH_MAX + 64];
        snprintf(name, sizeof name, "%s: metadata %s", path, key);
        v = attn_vocab_parse(text, strlen(text), name);
    } else if (legacy) { /* written before the vocabularies went inside: the file beside it */
        fprintf(stderr, "attn %s: note: %s carries no vocabulary (an older attn wrote it); reading %s beside it\n", cmd,
                path, legacy);
        v = attn_vocab_load(legacy);
    } else {
        attn_set_error(ATTN_ERR_FORMAT, "%s: metadata %s is missing", path, key);
    }
    if (!v) cli_fail(CLI_ERR_DATA, cmd, "%s", attn_last_error());
    return v;
}

bool vocab_has_specials(const char *cmd, const char *path, const char *which, const attn_vocab *v,
                        const char *const *specials, int n)
{
    for (int i = 0; i < n; i++) {
        const int64_t at = attn_vocab_find(v, specials[i]);
        if (at == i) continue;
        char list[128] = "", found[64];
        for (int j = 0; j < n; j++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "", specials[j]);
        if (at < 0)
            snprintf(found, sizeof found, "no %s", specials[i]);
        else
            snprintf(found, sizeof found, "%s at id %lld", specials[i], (long long)at);
        cli_fail(CLI_ERR_DATA, cmd,
                 "%s: its %svocabulary has %s; expected the specials %s first, in that order "
                 "(as attn builds them)",
                 path, which, found, list);
        return false;
    }
    return true;
}

/* ---- the lock of a training run on its checkpoint ---- */

#define LOCK_MARKER "attn training lock\n"

/* The pid a lock file names (0 when it names none). */
static long lock_pid(int fd)
{
    char buf[96] = {0};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    const char *at = n > 0 ? strstr(buf, "pid ") : NULL;
    return at ? strtol(at + 4, NULL, 10) : 0;
}

int checkpoint_lock_take(const char *cmd, const char *checkpoint, checkpoint_lock *l)
{
    *l = (checkpoint_lock){.fd = -1};
    if (dist_rank() != 0) return CLI_OK; /* rank 0 writes the checkpoint */
    if (!(l->path = cli_checkpoint_sibling(checkpoint, ".lock"))) return cli_fail(CLI_ERR_DATA, cmd, "out of memory");
    for (int tries = 0; tries < 16; tries++) {
        bool created = true;
        int fd = open(l->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST) {
            created = false;
            fd = open(l->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
            if (fd < 0 && errno == ENOENT) continue; /* removed meanwhile: again */
        }
        if (fd < 0)
            return cli_fail(CLI_ERR_DATA, cmd, "%s: cannot lock it for this run (%s): %s", checkpoint, l->path,
                            errno == ELOOP ? "it is a symbolic link" : strerror(errno));
        /* An empty file is a lock whose run was killed between creating it and writing its line
         * (or one being written now: the flock below decides); it holds nothing to lose. */
        struct stat st, now;
        char head[sizeof LOCK_MARKER] = {0};
        if (!created && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
                         (st.st_size != 0 && (pread(fd, head, sizeof head - 1, 0) != (ssize_t)(sizeof head - 1) ||
                                              memcmp(head, LOCK_MARKER, sizeof head - 1) != 0)))) {
            close(fd);
            return cli_fail(CLI_ERR_DATA, cmd,
                            "%s: %s exists and is not an attn lock file; it is left as it is: "
                            "move it away or choose another --checkpoint",
                            checkpoint, l->path);
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int err = errno;
            long pid = lock_pid(fd);
            close(fd);
            char who[32] = ""; /* none yet while that run writes its line */
            if (pid > 0) snprintf(who, sizeof who, " (pid %ld)", pid);
            if (err == EWOULDBLOCK)
                return cli_fail(CLI_ERR_DATA, cmd,
                                "%s: another run%s is training into this checkpoint "
                                "(it holds %s); two runs would overwrite each other's: wait for it, or choose "
                                "another --checkpoint",
                                checkpoint, who, l->path);
            return cli_fail(CLI_ERR_DATA, cmd, "%s: cannot lock %s: %s", checkpoint, l->path, strerror(err));
        }
        if (fstat(fd, &st) != 0 || stat(l->path, &now) != 0 || st.st_dev != now.st_dev || st.st_ino != now.st_ino) {
            close(fd); /* the file we locked was removed or replaced: again */
            continue;
        }
        /* the line written over the old one, then the rest cut: a kill between the two leaves the
         * marker first, never an empty or foreign-looking file */
        char text[96];
        int n = snprintf(text, sizeof text, LOCK_MARKER "pid %ld\n", (long)getpid());
        if (pwrite(fd, text, (size_t)n, 0) != n || ftruncate(fd, n) != 0) {
            int err = errno;
            if (created) unlink(l->path);
            close(fd);
            return cli_fail(CLI_ERR_DATA, cmd, "%s: cannot write %s: %s", checkpoint, l->path, strerror(err));
        }
        l->fd = fd;
        return CLI_OK;
    }
    return cli_fail(CLI_ERR_DATA, cmd, "%s: cannot lock %s: it keeps being replaced", checkpoint, l->path);
}

void checkpoint_lock_release(checkpoint_lock *l)
{
    if (l->fd >= 0) {
        struct stat st, now; /* still ours at that name: removed while held, so no one else holds it */
        if (fstat(l->fd, &st) == 0 && stat(l->path, &now) == 0 && st.st_dev == now.st_dev && st.st_ino == now.st_ino)
            unlink(l->path);
        close(l->fd);
    }
    free(l->path);
    *l = (checkpoint_lock){.fd = -1};
}

int config_check_resumed(const char *cmd, const attn_st_file *f, const char *path, const char *model_name,
                         const char *what, const config_field *fields, int n_fields, const void *cfg, void *saved,
                         const char *max_len_note)
{
    int code = config_read(cmd, f, path, model_name, what, fields, n_fields, saved);
    for (int i = 0; code == CLI_OK && i < n_fields; i++) {
        const char *key = fields[i].key;
        char was[32], now[32];
        config_text(&fields[i], saved, was, sizeof was), config_text(&fields[i], cfg, now, sizeof now);
        if (config_value(&fields[i], saved) != config_value(&fields[i], cfg))
            code = cli_fail(CLI_ERR_USAGE, cmd,
                            "resume: %s has %s %s in its metadata, these options give %s%s: "
                            "resume with the options it was trained with",
                            path, key, was, now, max_len_note && !strcmp(key, "max_len") ? max_len_note : "");
    }
    return code;
}

const char *const *config_kv(const char *model_name, const config_field *fields, int n_fields, const void *cfg, int *n)
{
    static char vals[CONFIG_MAX_FIELDS][32];
    static const char *kv[2 * (CONFIG_MAX_FIELDS + 1)];
    kv[0] = "model";
    kv[1] = model_name;
    for (int i = 0; i < n_fields && i < CONFIG_MAX_FIELDS; i++) {
        config_text(&fields[i], cfg, vals[i], sizeof vals[i]);
        kv[2 * i + 2] = fields[i].key;
        kv[2 * i + 3] = vals[i];
    }
    *n = n_fields + 1;
    return kv;
}

attn_params *params_for(const attn_st_file *f)
{
    attn_params *p = attn_params_new();
    int64_t held = 0;
    for (size_t i = 0; f && i < attn_st_count(f); i++) held += attn_st_at(f, i)->numel; /* sums bytes: no overflow */
    if (p && f) attn_params_set_max_numel(p, held > 0 ? held : 1);
    return p;
}

int model_build_failed(const char *cmd, const attn_st_file *f, const char *path)
{
    if (f && attn_last_status() == ATTN_ERR_FORMAT)
        return cli_fail(CLI_ERR_DATA, cmd, "%s: its metadata describes a larger model than its tensors hold: %s", path,
                        attn_last_error());
    return cli_fail(CLI_ERR_DATA, cmd, "%s", attn_last_error());
}

attn_st_file *checkpoint_open(const char *cmd, const char *path, const char *hint)
{
    attn_st_file *f = attn_st_open(path);
    if (!f) cli_fail(CLI_ERR_DATA, cmd, "%s%s", attn_last_error(), hint ? hint : "");
    return f;
}

int checkpoint_model_check(const char *cmd, const attn_st_file *f, const char *path, const char *model_name,
                           const char *what)
{
    const char *model = attn_st_metadata(f, "model");
    if (model && !strcmp(model, model_name)) return CLI_OK;
    if (model)
        return cli_fail(CLI_ERR_DATA, cmd, "%s is not a %s checkpoint: its metadata says model=%s, expected %s", path,
                        what, model, model_name);
    return cli_fail(CLI_ERR_DATA, cmd, "%s is not a %s checkpoint (its metadata lacks model=%s)", path, what,
                    model_name);
}

int config_read(const char *cmd, const attn_st_file *f, const char *path, const char *model_name, const char *what,
                const config_field *fields, int n_fields, void *cfg)
{
    int code = checkpoint_model_check(cmd, f, path, model_name, what);
    for (int i = 0; code == CLI_OK && i < n_fields; i++) {
        const config_field *c = &fields[i];
        const char *text = attn_st_metadata(f, c->key);
        long whole = 0;
        double v = 0.0;
        char *end = NULL;
        bool read = c->type == CONFIG_F32 ? text && (v = strtod(text, &end), end != text && !*end && isfinite(v))
                                          : checkpoint_meta_long(f, c->key, &whole);
        if (c->type != CONFIG_F32) v = (double)whole;
        if (c->optional && !text) {
            v = c->absent; /* written before the field was */
        } else if (!read) {
            code = cli_fail(CLI_ERR_DATA, cmd, "%s: metadata %s is %s%s%s; expected %s in [%ld, %ld]", path, c->key,
                            text ? "\"" : "", text ? text : "missing", text ? "\"" : "",
                            c->type == CONFIG_F32 ? "a number" : "an integer", c->min, c->max);
        } else if (v < (double)c->min || v > (double)c->max) {
            code = cli_fail(CLI_ERR_DATA, cmd, "%s: metadata %s = %s is out of range [%ld, %ld]", path, c->key, text,
                            c->min, c->max);
        } else {
            char *at = (char *)cfg + c->offset;
            if (c->type == CONFIG_I64)
                *(int64_t *)at = (int64_t)v;
            else if (c->type == CONFIG_INT)
                *(int *)at = (int)v;
            else if (c->type == CONFIG_F32)
                *(float *)at = (float)v;
            else
                *(bool *)at = v != 0;
        }
    }
    return code;
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

const int64_t *batch_shard(const attn_batches *batches, int64_t b, int64_t per_rank, int64_t *n)
{
    const int64_t start = batches->offsets[b], len = batches->offsets[b + 1] - start;
    int64_t first = (int64_t)dist_rank() * per_rank;
    if (first > len) first = len;
    *n = len - first < per_rank ? len - first : per_rank;
    return batches->rows + start + first;
}

uint64_t rank_dropout_seed(long seed)
{
    return (uint64_t)seed + 17 + (uint64_t)dist_rank() * 0x9E3779B97F4A7C15u;
}

const char *train_last_good(const train_options *t)
{
    if (!t->checkpoint) return "(none: no --checkpoint)";
    return access(t->checkpoint, F_OK) == 0 ? t->checkpoint : "(none: none was written yet)";
}
