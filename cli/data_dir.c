/* Where the shipped data is, so that `attn classify train` works from any folder (cli.h). */
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef ATTN_BIN_TO_DATA
#define ATTN_BIN_TO_DATA "../share/attn" /* bin/attn -> share/attn (set by CMake) */
#endif

enum {
    MAX_NAMES = 4
};

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The folder holding the running program, or "" when /proc/self/exe cannot tell. */
static void program_dir(char *dir, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", dir, len - 1);
    dir[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        dir[0] = '\0';
}

/* <base>/<name> into out, without ".." when it exists; true when it is a folder. */
static bool candidate(char *out, size_t len, const char *base, const char *name)
{
    char path[PATH_MAX + 64], real[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s", base, name);
    if (n < 0 || (size_t)n >= sizeof path || !is_dir(path)) return false;
    const char *best = realpath(path, real) ? real : path;
    if (strlen(best) >= len) return false;
    memcpy(out, best, strlen(best) + 1);
    return true;
}

static const char *resolve(const char *name, char *out, size_t len)
{
    const char *env = getenv("ATTN_DATA_DIR");
    if (env && *env) { /* an explicit choice: no fallback, the loader's message names it */
        snprintf(out, len, "%s/%s", env, name);
        return out;
    }
    char dir[PATH_MAX], base[PATH_MAX + 32];
    program_dir(dir, sizeof dir);
    if (*dir) {
        snprintf(base, sizeof base, "%s/data", dir); /* the build tree: build/data -> data/ */
        if (candidate(out, len, base, name)) return out;
        snprintf(base, sizeof base, "%s/" ATTN_BIN_TO_DATA, dir); /* installed: ../share/attn */
        if (candidate(out, len, base, name)) return out;
    }
#ifdef ATTN_INSTALL_DATADIR
    if (candidate(out, len, ATTN_INSTALL_DATADIR, name)) return out;
#endif
    snprintf(out, len, "data/%s", name); /* the current folder, as a last resort */
    return out;
}

const char *cli_default_data(const char *name)
{
    static struct {
        const char *name;
        char path[PATH_MAX];
    } cache[MAX_NAMES]; /* one lookup per name and process */
    for (int i = 0; i < MAX_NAMES; i++) {
        if (cache[i].name && !strcmp(cache[i].name, name)) return cache[i].path;
        if (!cache[i].name) {
            cache[i].name = name;
            return resolve(name, cache[i].path, sizeof cache[i].path);
        }
    }
    static char spare[PATH_MAX];
    return resolve(name, spare, sizeof spare);
}
