/* The checks a command's option table implies for its paths (options.h: the path kinds), made for
 * one action before any work: each path by its kind, then no two options naming one file and no
 * output among what the run reads. */
#include "options.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_make_dir(const char *cmd, const char *opt, const char *dir)
{
    struct stat st;
    if (stat(dir, &st) == 0) return CLI_OK;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return cli_fail(CLI_ERR_DATA, cmd, "%s %s: cannot make %s: %s", opt, dir, path, strerror(errno));
        *p = c;
        if (!c) break;
    }
    return CLI_OK;
}

bool cli_check_output_dir(const char *cmd, const char *opt, const char *dir)
{
    struct stat st;
    if (!*dir) {
        cli_fail(CLI_ERR_USAGE, cmd, "%s is empty; expected a folder", opt);
        return false;
    }
    if (strlen(dir) > PATH_MAX - 64) {
        cli_fail(CLI_ERR_USAGE, cmd, "%s: the path is too long", opt);
        return false;
    }
    for (const char *part = dir; *part;) { /* each folder's name must fit NAME_MAX, as mkdir will need */
        const size_t len = strcspn(part, "/");
        if (len > NAME_MAX)
            return cli_fail(CLI_ERR_USAGE, cmd, "%s: a folder name of %zu bytes; at most %d fit", opt, len, NAME_MAX),
                   false;
        part += len + (part[len] == '/');
    }
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", dir);
    while (stat(parent, &st) != 0) { /* up to the nearest part that exists */
        char *slash = strrchr(parent, '/');
        while (slash && slash > parent && slash[1] == '\0') { /* "a/b/" */
            *slash = '\0';
            slash = strrchr(parent, '/');
        }
        if (!slash)
            snprintf(parent, sizeof parent, ".");
        else if (slash == parent)
            parent[1] = '\0'; /* "/" */
        else
            *slash = '\0';
    }
    if (!S_ISDIR(st.st_mode))
        return cli_fail(CLI_ERR_USAGE, cmd, "%s %s: %s is not a folder", opt, dir, strcmp(parent, dir) ? parent : "it"),
               false;
    if (access(parent, W_OK | X_OK) != 0)
        return cli_fail(CLI_ERR_USAGE, cmd, "%s %s: %s is not writable", opt, dir,
                        strcmp(parent, dir) ? parent : "the folder"),
               false;
    return true;
}

/* The paths of one action, sorted by what the run does with them. */
typedef struct path_roles {
    cli_path *in, *out, *out_dirs; /* read (files and folders); files written; folders written */
    int n_in, n_out, n_out_dirs;
    cli_path trained; /* the checkpoint train writes: what is there now is checked last */
    char *lists;      /* the copies that CLI_IN_FILES items point into, one after the other */
    char *lock;       /* the trained checkpoint's lock (cli_checkpoint_sibling), an output too */
} path_roles;

static const char *value_of(const cli_option *o, const void *opts)
{
    return *(const char *const *)((const char *)opts + o->offset);
}

/* --resume, where the table has it: the train action reads its checkpoint first. */
static bool resuming(const cli_spec *spec, const void *opts)
{
    for (size_t i = 0; i < spec->n_options; i++) {
        const cli_option *o = &spec->options[i];
        if (o->name && o->type == CLI_FLAG && !strcmp(o->name, "--resume"))
            return *(const bool *)((const char *)opts + o->offset);
    }
    return false;
}

/* Each path by its kind; every path given lands in r. */
static bool check_each(const cli_spec *spec, const void *opts, const char *action, path_roles *r)
{
    const char *cmd = spec->cmd;
    const bool trains = action && (!strcmp(action, "train") || !strcmp(action, "import")); /* write --checkpoint */
    char *list_at = r->lists;
    for (size_t i = 0; i < spec->n_options; i++) {
        const cli_option *o = &spec->options[i];
        const char *v = o->name && cli_opt_is_path(o->type) && cli_option_applies(o, action) ? value_of(o, opts) : NULL;
        if (!v) continue;
        const cli_path p = {o->name, v};
        bool ok = true;
        switch (o->type) {
        case CLI_IN_FILE:
            ok = cli_check_input_file(cmd, o->name, v, NULL);
            r->in[r->n_in++] = p;
            break;
        case CLI_IN_FILES: { /* "a,b,c": each a file, at least one */
            int items = 0;
            strcpy(list_at, v);
            char *save = NULL;
            for (char *item = strtok_r(list_at, ",", &save); ok && item; item = strtok_r(NULL, ",", &save), items++) {
                ok = cli_check_input_file(cmd, o->name, item, NULL);
                r->in[r->n_in++] = (cli_path){o->name, item};
            }
            list_at += strlen(v) + 1;
            if (ok && !items) {
                cli_fail(CLI_ERR_USAGE, cmd, "%s expects files separated by commas, got \"%s\"", o->name, v);
                ok = false;
            }
            break;
        }
        case CLI_IN_DIR:
            ok = cli_check_input_dir(cmd, o->name, v);
            r->in[r->n_in++] = p;
            break;
        case CLI_OUT_FILE:
            ok = cli_check_output(cmd, o->name, v);
            r->out[r->n_out++] = p;
            break;
        case CLI_PICTURE:
            ok = cli_check_picture(cmd, o->name, v);
            r->out[r->n_out++] = p;
            break;
        case CLI_OUT_DIR:
            ok = cli_check_output_dir(cmd, o->name, v);
            r->out_dirs[r->n_out_dirs++] = p;
            break;
        case CLI_CHECKPOINT: { /* written by train, read first with --resume; read by the other actions */
            char hint[96] = "";
            if (!trains) snprintf(hint, sizeof hint, " (train a model first: attn %s train)", cmd);
            ok = (trains && !resuming(spec, opts)) || cli_check_input_file(cmd, o->name, v, hint);
            if (trains) { /* the checkpoint, and its lock beside the file it names: no other output may be either */
                r->out[r->n_out++] = r->trained = p;
                if (ok && !(r->lock = cli_checkpoint_sibling(v, ".lock"))) {
                    cli_fail(CLI_ERR_DATA, cmd, "out of memory");
                    return false;
                }
                if (ok) r->out[r->n_out++] = (cli_path){"(the lock of --checkpoint)", r->lock};
            } else
                r->in[r->n_in++] = p;
            break;
        }
        default:
            break;
        }
        if (!ok) return false;
    }
    return true;
}

int cli_check_paths(const cli_spec *spec, const void *opts, const char *action)
{
    size_t slots = 2, text = 1; /* one per path and CLI_IN_FILES item, and a lock; the lists' copies */
    for (size_t i = 0; i < spec->n_options; i++) {
        const cli_option *o = &spec->options[i];
        const char *v = o->name && cli_opt_is_path(o->type) ? value_of(o, opts) : NULL;
        if (!v) continue;
        slots++;
        if (o->type != CLI_IN_FILES) continue;
        text += strlen(v) + 1;
        for (const char *c = v; *c; c++) slots += *c == ',';
    }
    path_roles r = {.in = calloc(slots, sizeof *r.in),
                    .out = calloc(slots, sizeof *r.out),
                    .out_dirs = calloc(slots, sizeof *r.out_dirs),
                    .lists = malloc(text)};
    bool ok = r.in && r.out && r.out_dirs && r.lists;
    if (!ok) cli_fail(CLI_ERR_DATA, spec->cmd, "out of memory");
    ok = ok && check_each(spec, opts, action, &r);
    ok = ok && cli_check_distinct(spec->cmd, r.out, r.n_out) &&
         cli_check_apart(spec->cmd, r.out, r.n_out, r.in, r.n_in) &&
         (!r.trained.path || cli_check_checkpoint(spec->cmd, r.trained.opt, r.trained.path));
    for (int i = 0; ok && i < r.n_out_dirs; i++)
        ok = cli_check_folder_apart(spec->cmd, r.out_dirs[i].opt, r.out_dirs[i].path, r.in, r.n_in);
    free(r.in);
    free(r.out);
    free(r.out_dirs);
    free(r.lists);
    free(r.lock);
    return ok ? CLI_OK : CLI_ERR_USAGE;
}
