/* See fuzz_common.h. */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char dir[64];

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_dir(void)
{
    if (dir[0]) nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fuzz_dir(void)
{
    if (dir[0]) return dir;
    struct stat st;
    const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/attn-fuzz.XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(remove_dir);
    return dir;
}

const char *fuzz_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", fuzz_dir(), name);
    return buf;
}

bool fuzz_write(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

bool fuzz_write_gz(const char *path, const void *data, size_t n)
{
    gzFile f = gzopen(path, "wb");
    if (!f) return false;
    bool ok = n == 0 || gzwrite(f, data, (unsigned)n) == (int)n;
    return gzclose(f) == Z_OK && ok;
}

void fuzz_require(bool cond, const char *what)
{
    if (cond) return;
    fprintf(stderr, "fuzz: invariant broken: %s (last error: %s)\n", what, attn_last_error());
    abort();
}
