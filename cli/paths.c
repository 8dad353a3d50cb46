/* The checks every command makes of its paths before any work (options.h): files it writes,
 * pictures, files and folders it reads, and no two options naming one file. */
#include "options.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A file the command will write: `check` (the library's own) says why not; `expected` names
 * what an empty path should have been. */
static bool check_written(const char *cmd, const char *opt, const char *path, const char *expected,
                          attn_status (*check)(const char *))
{
    if (!path || !*path) {
        cli_fail(CLI_ERR_USAGE, cmd, "%s is empty; expected %s", opt, expected);
        return false;
    }
    if (check(path) == ATTN_OK) return true;
    cli_fail(CLI_ERR_USAGE, cmd, "%s %s", opt, attn_last_error());
    return false;
}

bool cli_check_output(const char *cmd, const char *opt, const char *path)
{
    return check_written(cmd, opt, path, "a file name", attn_output_check);
}

/* true when the file at path starts as an attn checkpoint does (a safetensors header whose
 * metadata says format attn-checkpoint); only the header is read. */
bool cli_looks_like_checkpoint(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    unsigned char len[8];
    bool yes = false;
    if (fd >= 0 && read(fd, len, 8) == 8) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = n << 8 | len[i];
        char *head = n > 0 && n <= 100000000 ? malloc((size_t)n + 1) : NULL;
        ssize_t got = head ? read(fd, head, (size_t)n) : -1;
        if (got > 0) {
            head[got] = '\0';
            yes = strstr(head, "\"format\":\"attn-checkpoint\"") != NULL;
        }
        free(head);
    }
    if (fd >= 0) close(fd);
    return yes;
}

bool cli_check_checkpoint(const char *cmd, const char *opt, const char *path)
{
    struct stat st;
    if (path && *path && stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        cli_fail(CLI_ERR_USAGE, cmd,
                 "%s %s: it is not a regular file; a checkpoint must be one (it is replaced "
                 "whole, and locked while a run trains it)",
                 opt, path);
        return false;
    }
    if (path && *path && stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        !cli_looks_like_checkpoint(path)) {
        cli_fail(CLI_ERR_USAGE, cmd,
                 "%s %s: the file there is not an attn checkpoint, and training would replace it; "
                 "expected a new name or a checkpoint",
                 opt, path);
        return false;
    }
    return cli_check_output(cmd, opt, path);
}

/* The file an output path will write: the end of its symlinks (malloc'd; path itself when it is
 * not a link; NULL when a link cannot be read). */
static char *written_file(const char *path)
{
    char *at = strdup(path);
    for (int hops = 0; at && hops < 40; hops++) {
        struct stat st;
        if (lstat(at, &st) != 0 || !S_ISLNK(st.st_mode)) return at;
        char link[PATH_MAX];
        ssize_t n = readlink(at, link, sizeof link - 1);
        if (n < 0) break;
        link[n] = '\0';
        const char *slash = strrchr(at, '/');
        char *next = NULL;
        if (link[0] == '/' || !slash) {
            next = strdup(link);
        } else if ((next = malloc((size_t)(slash - at) + 2 + (size_t)n))) {
            memcpy(next, at, (size_t)(slash - at) + 1);
            memcpy(next + (slash - at) + 1, link, (size_t)n + 1);
        }
        free(at);
        at = next;
    }
    free(at);
    return NULL;
}

char *cli_checkpoint_sibling(const char *checkpoint, const char *suffix)
{
    char *end = written_file(checkpoint); /* a dangling link too: beside the file it will write */
    const char *file = end ? end : checkpoint;
    size_t n = strlen(file) + strlen(suffix) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s", file, suffix);
    free(end);
    return p;
}

bool cli_check_fits(const char *cmd, double bytes, const char *what)
{
    const double memory = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (memory <= 0 || bytes <= memory) return true;
    cli_fail(CLI_ERR_USAGE, cmd, "%s need about %.1f GB of memory; this machine has %.1f GB", what, bytes / 1e9,
             memory / 1e9);
    return false;
}

bool cli_check_picture(const char *cmd, const char *opt, const char *path)
{
    return check_written(cmd, opt, path, "a .png, .svg or .pdf file name", attn_plot_path_check);
}

/* An input path that names an existing, readable file (or folder); hint after the reason */
static bool check_input(const char *cmd, const char *opt, const char *path, bool folder, const char *hint)
{
    if (!path || !*path) {
        cli_fail(CLI_ERR_USAGE, cmd, "%s is empty; expected a %s", opt, folder ? "folder" : "file");
        return false;
    }
    struct stat st;
    const char *why = stat(path, &st) != 0                             ? strerror(errno)
                      : folder && !S_ISDIR(st.st_mode)                 ? "is not a folder"
                      : !folder && S_ISDIR(st.st_mode)                 ? "is a folder; expected a file"
                      : !folder && !S_ISREG(st.st_mode)                ? "is not a regular file"
                      : access(path, folder ? R_OK | X_OK : R_OK) != 0 ? strerror(errno)
                                                                       : NULL;
    if (why) cli_fail(CLI_ERR_USAGE, cmd, "%s %s: %s%s", opt, path, why, hint ? hint : "");
    return !why;
}

bool cli_check_input_file(const char *cmd, const char *opt, const char *path, const char *hint)
{
    return check_input(cmd, opt, path, false, hint);
}

bool cli_check_input_dir(const char *cmd, const char *opt, const char *path)
{
    return check_input(cmd, opt, path, true, NULL);
}

/* The file a path names, for telling two paths apart: an existing file by its device and inode
 * (through symlinks, as the outputs are written); a new one, or a dangling link's target, by the
 * real path of the folder it will be written in and its name. */
typedef struct file_id {
    bool exists, regular;
    dev_t dev;
    ino_t ino;
    char where[PATH_MAX + 1];
} file_id;

static void identify(const char *path, file_id *id)
{
    struct stat st;
    memset(id, 0, sizeof *id);
    if (stat(path, &st) == 0) {
        id->exists = true, id->regular = S_ISREG(st.st_mode), id->dev = st.st_dev, id->ino = st.st_ino;
        return;
    }
    char *end = written_file(path);
    const char *file = end ? end : path, *slash = strrchr(file, '/');
    char folder[PATH_MAX];
    int n = slash ? snprintf(folder, sizeof folder, "%.*s", (int)(slash - file) + (slash == file), file)
                  : snprintf(folder, sizeof folder, ".");
    char real[PATH_MAX];
    if (n < 0 || (size_t)n >= sizeof folder || !realpath(folder, real))
        snprintf(id->where, sizeof id->where, "%s", file); /* unresolvable: the text itself */
    else
        snprintf(id->where, sizeof id->where, "%s/%s", real, slash ? slash + 1 : file);
    free(end);
}

bool cli_check_distinct(const char *cmd, const cli_path *paths, int n)
{
    file_id *ids = calloc((size_t)n, sizeof *ids);
    if (!ids) {
        cli_fail(CLI_ERR_DATA, cmd, "out of memory");
        return false;
    }
    for (int i = 0; i < n; i++)
        if (paths[i].path && *paths[i].path) identify(paths[i].path, &ids[i]);
    bool ok = true;
    for (int i = 0; ok && i < n; i++)
        for (int j = 0; ok && j < i; j++) {
            if (!paths[i].path || !*paths[i].path || !paths[j].path || !*paths[j].path) continue;
            const file_id *a = &ids[i], *b = &ids[j];
            /* two outputs to one device or FIFO (/dev/null) destroy nothing */
            bool same = a->exists ? b->exists && a->regular && a->dev == b->dev && a->ino == b->ino
                                  : !b->exists && !strcmp(a->where, b->where);
            if (same) {
                cli_fail(CLI_ERR_USAGE, cmd, "%s %s: the same file as %s %s; expected another name", paths[i].opt,
                         paths[i].path, paths[j].opt, paths[j].path);
                ok = false;
            }
        }
    free(ids);
    return ok;
}

/* The input folder (by device and inode) that holds folder `real` (a real path) or one of its
 * parents, or -1. */
static int holding_input(const char *real, const struct stat *in_st, const bool *is_dir, int n_in)
{
    char at[PATH_MAX];
    snprintf(at, sizeof at, "%s", real);
    for (;;) {
        struct stat st;
        if (stat(at, &st) == 0)
            for (int j = 0; j < n_in; j++)
                if (is_dir[j] && st.st_dev == in_st[j].st_dev && st.st_ino == in_st[j].st_ino) return j;
        char *slash = strrchr(at, '/');
        if (!slash || !strcmp(at, "/")) return -1;
        slash[slash == at] = '\0'; /* "/a/b" -> "/a", "/a" -> "/" */
    }
}

bool cli_check_apart(const char *cmd, const cli_path *outputs, int n_out, const cli_path *inputs, int n_in)
{
    struct stat *in_st = calloc((size_t)(n_in ? n_in : 1), sizeof *in_st);
    bool *is_dir = calloc((size_t)(n_in ? n_in : 1), sizeof *is_dir), *there = calloc((size_t)(n_in ? n_in : 1), 1);
    if (!in_st || !is_dir || !there) {
        free(in_st), free(is_dir), free(there);
        {
            cli_fail(CLI_ERR_DATA, cmd, "out of memory");
            return false;
        }
    }
    for (int j = 0; j < n_in; j++)
        if (inputs[j].path && *inputs[j].path && stat(inputs[j].path, &in_st[j]) == 0)
            there[j] = true, is_dir[j] = S_ISDIR(in_st[j].st_mode);
    bool ok = true;
    for (int i = 0; ok && i < n_out; i++) {
        const cli_path *o = &outputs[i];
        if (!o->path || !*o->path) continue;
        struct stat st;
        const bool exists = stat(o->path, &st) == 0;
        if (exists && !S_ISREG(st.st_mode)) continue; /* a device or FIFO is written in place, never replaced */
        for (int j = 0; ok && exists && j < n_in; j++)
            if (there[j] && !is_dir[j] && st.st_dev == in_st[j].st_dev && st.st_ino == in_st[j].st_ino) {
                cli_fail(CLI_ERR_USAGE, cmd,
                         "%s %s: the same file as %s %s, which this run reads; expected "
                         "another name",
                         o->opt, o->path, inputs[j].opt, inputs[j].path);
                ok = false;
            }
        char *file = ok ? written_file(o->path) : NULL;
        if (!file) continue; /* an unreadable link: the write names it */
        const char *slash = strrchr(file, '/');
        char folder[PATH_MAX], real[PATH_MAX];
        int n = slash ? snprintf(folder, sizeof folder, "%.*s", (int)(slash - file) + (slash == file), file)
                      : snprintf(folder, sizeof folder, ".");
        int j = n > 0 && (size_t)n < sizeof folder && realpath(folder, real) ? holding_input(real, in_st, is_dir, n_in)
                                                                             : -1;
        if (j >= 0) {
            cli_fail(CLI_ERR_USAGE, cmd,
                     "%s %s: inside the folder %s %s, which this run reads; expected a "
                     "file outside it",
                     o->opt, o->path, inputs[j].opt, inputs[j].path);
            ok = false;
        }
        free(file);
    }
    free(in_st);
    free(is_dir);
    free(there);
    return ok;
}

bool cli_check_folder_apart(const char *cmd, const char *opt, const char *dir, const cli_path *inputs, int n_in)
{
    char at[PATH_MAX], real[PATH_MAX];
    if (!dir || !*dir || snprintf(at, sizeof at, "%s", dir) >= (int)sizeof at) return true; /* checked elsewhere */
    struct stat st;
    while (stat(at, &st) != 0) { /* the nearest part that exists: the rest is made inside it */
        char *slash = strrchr(at, '/');
        while (slash && slash > at && slash[1] == '\0') *slash = '\0', slash = strrchr(at, '/');
        if (!slash)
            snprintf(at, sizeof at, ".");
        else if (slash == at)
            at[1] = '\0';
        else
            *slash = '\0';
    }
    struct stat *in_st = calloc((size_t)(n_in ? n_in : 1), sizeof *in_st);
    bool *is_dir = calloc((size_t)(n_in ? n_in : 1), sizeof *is_dir);
    if (!in_st || !is_dir) {
        free(in_st), free(is_dir);
        {
            cli_fail(CLI_ERR_DATA, cmd, "out of memory");
            return false;
        }
    }
    for (int j = 0; j < n_in; j++)
        is_dir[j] =
            inputs[j].path && *inputs[j].path && stat(inputs[j].path, &in_st[j]) == 0 && S_ISDIR(in_st[j].st_mode);
    int j = realpath(at, real) ? holding_input(real, in_st, is_dir, n_in) : -1;
    if (j >= 0)
        cli_fail(CLI_ERR_USAGE, cmd,
                 "%s %s: inside the folder %s %s, which this run reads; expected a folder "
                 "outside it",
                 opt, dir, inputs[j].opt, inputs[j].path);
    free(in_st);
    free(is_dir);
    return j < 0;
}
