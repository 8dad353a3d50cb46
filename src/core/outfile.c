/* Output files, the one way every writer of the library (safetensors, vocabularies, pictures)
 * puts bytes on disk:
 *   - a regular file, or a path that does not exist yet, is written to a temporary file in the
 *     same folder, synced, and renamed onto it: it appears complete or not at all, and keeps the
 *     old file's permissions;
 *   - a symlink is followed (up to 40 links): its final target is replaced, the link stays;
 *   - a device or FIFO, reached through any links (/proc/<pid>/fd/N included), is opened and
 *     written in place, never replaced; a FIFO gets READER_WAIT_MS for a reader to open it, then
 *     fails ("no reader") rather than block; a folder or socket is refused;
 *   - a name of one of this process's descriptors ("/dev/stdout", "/dev/stderr", "/dev/fd/N",
 *     "/proc/self/fd/N", "/proc/thread-self/fd/N", "/proc/<pid>/fd/N", or a link to one) is written
 *     through that descriptor, at its offset, as the shell's redirection would: a log opened for
 *     append gets the bytes appended, never replaced;
 *   - the temporary file is made so that nothing but this library can take it for its own: where
 *     the file system allows, it is an unnamed file (O_TMPFILE) that gets a name only once it is
 *     complete, just before the rename, so a writer killed while writing leaves nothing behind;
 *     elsewhere it is created (O_EXCL: never an existing file) as "<name>.tmp.<pid>.<16 random hex
 *     digits>", <name> cut so that it fits NAME_MAX. Opening the same output again removes files
 *     of exactly that form (a name only this library makes) that are regular files of this user
 *     whose process no longer runs; a "<name>.tmp.<digits>" of anyone else is never touched. */
#define _GNU_SOURCE /* O_TMPFILE */
#include "core_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_LINKS 40
#define READER_WAIT_MS 2000 /* a FIFO's reader may start along with us */
#define TEMP_RANDOM 16      /* hex digits of a temporary name's random part */

/* The folder part of path ("." when none) and the name after the last slash (malloc'd). */
static attn_status split_path(const char *path, char **dir, char **name)
{
    const char *slash = strrchr(path, '/');
    *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    *name = strdup(slash ? slash + 1 : path);
    if (!*dir || !*name) {
        free(*dir);
        free(*name);
        return attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", path);
    }
    return ATTN_OK;
}

/* The descriptor path names when it is one of this process's, else -1; INT_MAX (never open) for
 * an N past any descriptor. "/dev/stdout" and "/dev/stderr", and N in any folder that is this
 * process's descriptor table however it is spelled: /dev/fd, /proc/self/fd, /proc/thread-self/fd,
 * /proc/<pid>/fd, /proc/<pid>/task/<tid>/fd, or a link to one (their real paths are
 * /proc/<pid>/fd and /proc/<pid>/task/<tid>/fd). Such a name is a descriptor, never a link to the
 * file behind it: that file may be a log opened for append, or deleted (a link reads
 * "<name> (deleted)"). */
static int descriptor_named(const char *path)
{
    if (!strcmp(path, "/dev/stdout")) return STDOUT_FILENO;
    if (!strcmp(path, "/dev/stderr")) return STDERR_FILENO;
    const char *slash = strrchr(path, '/'), *n = slash ? slash + 1 : NULL;
    if (!n || !*n || strspn(n, "0123456789") != strlen(n)) return -1;
    char folder[PATH_MAX], real[PATH_MAX], own[32];
    if (snprintf(folder, sizeof folder, "%.*s", (int)(slash - path) + (slash == path), path) >= (int)sizeof folder ||
        !realpath(folder, real))
        return -1;
    const int own_len = snprintf(own, sizeof own, "/proc/%ld/", (long)getpid());
    if (strncmp(real, own, (size_t)own_len) != 0) return -1;
    const char *rest = real + own_len;
    if (!strncmp(rest, "task/", 5)) {
        rest += 5;
        const size_t tid = strspn(rest, "0123456789");
        if (tid == 0) return -1;
        rest += tid + 1;
        if (rest[-1] != '/') return -1;
    }
    if (strcmp(rest, "fd") != 0) return -1;
    return strlen(n) > 9 ? INT_MAX : atoi(n);
}

/* The end of path's symlink chain (malloc'd; path itself when it is not a link), and its stat in
 * *st (*exists false when nothing is there: a new file, or a dangling link's target). A link that
 * reaches a name of one of this process's descriptors (descriptor_named) ends there, *descriptor
 * set to it (else -1). */
static char *resolve_links(const char *path, struct stat *st, bool *exists, int *descriptor)
{
    char *at = strdup(path);
    *descriptor = -1;
    for (int hops = 0; at; hops++) {
        if ((*descriptor = descriptor_named(at)) >= 0) return at;
        if (lstat(at, st) != 0) {
            if (errno != ENOENT) {
                attn__fail(ATTN_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
                free(at);
                return NULL;
            }
            *exists = false;
            return at;
        }
        if (!S_ISLNK(st->st_mode)) {
            *exists = true;
            return at;
        }
        if (hops == MAX_LINKS) {
            attn__fail(ATTN_ERR_IO, "%s: cannot write: more than %d symbolic links", path, MAX_LINKS);
            free(at);
            return NULL;
        }
        char link[PATH_MAX];
        ssize_t n = readlink(at, link, sizeof link - 1);
        if (n < 0) {
            attn__fail(ATTN_ERR_IO, "%s: cannot read the link %s: %s", path, at, strerror(errno));
            free(at);
            return NULL;
        }
        link[n] = '\0';
        char *next;
        const char *slash = strrchr(at, '/');
        if (link[0] == '/' || !slash) { /* absolute, or relative to the current folder */
            next = strdup(link);
        } else { /* relative to the link's folder */
            size_t dir_len = (size_t)(slash - at) + 1;
            next = malloc(dir_len + (size_t)n + 1);
            if (next) {
                memcpy(next, at, dir_len);
                memcpy(next + dir_len, link, (size_t)n + 1);
            }
        }
        free(at);
        at = next;
    }
    attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", path);
    return NULL;
}

/* "<name cut to fit>.tmp." into buf (the pid and the random part follow). */
static void temp_prefix(char *buf, size_t len, const char *name)
{
    const size_t suffix = strlen(".tmp.") + 20 + 1 + TEMP_RANDOM; /* pid (at most 20 digits) . random */
    size_t keep = strlen(name);
    if (keep + suffix > NAME_MAX) keep = NAME_MAX - suffix;
    snprintf(buf, len, "%.*s.tmp.", (int)keep, name);
}

/* TEMP_RANDOM lowercase hex digits from the kernel's random source (the clock and pid when it
 * has none to give) into buf, NUL-terminated. */
static void temp_random(char buf[TEMP_RANDOM + 1])
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = ((uint64_t)ts.tv_nsec << 20 ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid() << 40) * 0x9E3779B97F4A7C15u;
    }
    snprintf(buf, TEMP_RANDOM + 1, "%016llx", (unsigned long long)r);
}

/* true when name, after prefix, is "<pid>.<TEMP_RANDOM lowercase hex digits>" with a pid in
 * range (*pid): the only names this library gives its temporary files. */
static bool temp_name_form(const char *name, size_t prefix_len, long long *pid)
{
    const char *digits = name + prefix_len, *dot = strchr(digits, '.');
    if (!dot || dot == digits || (size_t)(dot - digits) > 10 || strspn(digits, "0123456789") != (size_t)(dot - digits))
        return false;
    const char *hex = dot + 1;
    if (strlen(hex) != TEMP_RANDOM || strspn(hex, "0123456789abcdef") != TEMP_RANDOM) return false;
    *pid = strtoll(digits, NULL, 10);
    return *pid > 0 && *pid <= INT_MAX;
}

/* Removes dir/<prefix><pid>.<random> files left by a killed writer: the name only this library
 * makes, a regular file (not a link) of this user, and its process no longer runs. */
static void remove_stale_temps(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d) return;
    const size_t n = strlen(prefix);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        long long pid;
        if (strncmp(e->d_name, prefix, n) != 0 || !temp_name_form(e->d_name, n, &pid)) continue;
        if (pid == (long long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to judge */
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

static const char *kind_of(mode_t mode)
{
    return S_ISDIR(mode)    ? "a folder"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a regular file";
}

/* Written in place rather than replaced: a device or FIFO. */
static bool in_place(mode_t mode)
{
    return S_ISCHR(mode) || S_ISBLK(mode) || S_ISFIFO(mode);
}

/* ATTN_OK when descriptor fd (named by path) is open for writing. */
static attn_status descriptor_writable(const char *path, int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return attn__fail(ATTN_ERR_IO, "%s: cannot write: descriptor %d is not open", path, fd);
    if ((flags & O_ACCMODE) == O_RDONLY)
        return attn__fail(ATTN_ERR_IO, "%s: cannot write: descriptor %d is open for reading only", path, fd);
    return ATTN_OK;
}

/* Writes go to a duplicate of descriptor fd, which shares its offset. */
static attn_status open_descriptor(attn__outfile *o, const char *path, int fd)
{
    if (descriptor_writable(path, fd) != ATTN_OK) return attn_last_status();
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0 || !(o->fp = fdopen(copy, "wb"))) {
        attn_status s = attn__fail(ATTN_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        if (copy >= 0) close(copy);
        return s;
    }
    return ATTN_OK;
}

/* Opens a device or FIFO for writing in place. A FIFO is opened without blocking, polled until
 * a reader has it open (at most READER_WAIT_MS), and made blocking for the writes. */
static attn_status open_in_place(attn__outfile *o, const char *path, mode_t mode)
{
    int fd;
    for (int waited = 0;; waited += 10) {
        fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
        if (fd >= 0 || errno != ENXIO || !S_ISFIFO(mode) || waited >= READER_WAIT_MS) break;
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000000L}, NULL);
    }
    if (fd < 0 && errno == ENXIO && S_ISFIFO(mode))
        return attn__fail(ATTN_ERR_IO, "%s: cannot write: the FIFO has no reader (waited %d ms)", path, READER_WAIT_MS);
    int flags = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 || !(o->fp = fdopen(fd, "wb"))) {
        attn_status s = attn__fail(ATTN_ERR_IO, "%s: cannot write (%s): %s", path, kind_of(mode), strerror(errno));
        if (fd >= 0) close(fd);
        return s;
    }
    return ATTN_OK;
}

attn_status attn__outfile_open(attn__outfile *o, const char *path)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    if (!path || !*path) return attn__fail(ATTN_ERR_ARG, "output path is empty");
    const int named = descriptor_named(path);
    if (named >= 0) return open_descriptor(o, path, named);
    struct stat st;
    if (stat(path, &st) == 0 && in_place(st.st_mode)) return open_in_place(o, path, st.st_mode);
    bool exists = false;
    int descriptor;
    if (!(o->target = resolve_links(path, &st, &exists, &descriptor))) return attn_last_status();
    if (descriptor >= 0) { /* a link to one of this process's descriptors */
        free(o->target);
        o->target = NULL;
        return open_descriptor(o, path, descriptor);
    }
    if (exists && !S_ISREG(st.st_mode)) {
        attn_status s = attn__fail(ATTN_ERR_IO, "%s: cannot write: it is %s", path, kind_of(st.st_mode));
        free(o->target);
        o->target = NULL;
        return s;
    }
    char *dir, *name;
    if (split_path(o->target, &dir, &name) != ATTN_OK) {
        free(o->target);
        o->target = NULL;
        return attn_last_status();
    }
    attn_status s = ATTN_OK;
    char prefix[NAME_MAX + 1];
    temp_prefix(prefix, sizeof prefix, name);
    if (!*name) s = attn__fail(ATTN_ERR_IO, "%s: cannot write: the path names a folder", path);
    size_t len = strlen(dir) + 1 + strlen(prefix) + 22 + TEMP_RANDOM;
    if (s == ATTN_OK && !(o->tmp = malloc(len))) s = attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", path);
    if (s == ATTN_OK) {
        remove_stale_temps(dir, prefix);
        int fd = -1;
        for (int tries = 0; fd < 0 && tries < 8; tries++) {
            char random[TEMP_RANDOM + 1];
            temp_random(random);
            snprintf(o->tmp, len, "%s/%s%ld.%s", dir, prefix, (long)getpid(), random);
            if (tries == 0 && access("/proc/self/fd", X_OK) == 0) { /* unnamed until complete */
                fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
                o->unnamed = fd >= 0;
                if (fd >= 0) break;
            }
            fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
            if (fd < 0 && errno != EEXIST) break;
        }
        if (fd >= 0 && exists) { /* keep the replaced file's permissions and, when allowed, owner */
            if (fchown(fd, st.st_uid, st.st_gid) != 0) { /* not ours to give: keep our own */
            }
            fchmod(fd, st.st_mode & 07777);
        }
        if (fd < 0 || !(o->fp = fdopen(fd, "wb"))) {
            s = attn__fail(ATTN_ERR_IO, "%s: cannot write (via %s): %s", path, o->tmp, strerror(errno));
            if (fd >= 0) {
                close(fd);
                if (!o->unnamed) unlink(o->tmp);
            }
        }
    }
    free(dir);
    free(name);
    if (s != ATTN_OK) {
        free(o->tmp);
        free(o->target);
        o->tmp = o->target = NULL;
    }
    return s;
}

/* fsync of the folder holding path, so the rename survives a crash; 0 or errno. */
static int sync_parent_dir(const char *path)
{
    char *dir, *name;
    if (split_path(path, &dir, &name) != ATTN_OK) return ENOMEM;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;
    free(dir);
    free(name);
    if (fd < 0) return 0;
    if (fsync(fd) != 0 && errno != EINVAL) err = errno;
    close(fd);
    return err;
}

/* The unnamed temporary file, complete and synced, gets its name o->tmp (a new random part if
 * that name exists): 0, or the errno. */
static int link_unnamed(attn__outfile *o)
{
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fileno(o->fp));
    const size_t at = strlen(o->tmp) - TEMP_RANDOM;
    for (int tries = 0; tries < 8; tries++) {
        if (linkat(AT_FDCWD, self, AT_FDCWD, o->tmp, AT_SYMLINK_FOLLOW) == 0) return 0;
        if (errno != EEXIST) return errno;
        char random[TEMP_RANDOM + 1];
        temp_random(random);
        memcpy(o->tmp + at, random, TEMP_RANDOM);
    }
    return EEXIST;
}

attn_status attn__outfile_close(attn__outfile *o, attn_status s)
{
    if (!o->fp) return s;
    int err = 0;
    errno = 0;
    bool named = o->tmp && !o->unnamed; /* a name to remove on failure */
    if (s == ATTN_OK) {
        if (fflush(o->fp) != 0)
            err = errno ? errno : EIO;
        else if (o->tmp && fsync(fileno(o->fp)) != 0)
            err = errno;
        else if (o->unnamed && (err = link_unnamed(o)) == 0)
            named = true;
    }
    if (fclose(o->fp) != 0 && s == ATTN_OK && !err) err = errno ? errno : EIO;
    o->fp = NULL;
    if (s == ATTN_OK && !err && o->tmp && rename(o->tmp, o->target) != 0) err = errno;
    if (s == ATTN_OK && err)
        s = o->tmp ? attn__fail(ATTN_ERR_IO, "%s: cannot write (via %s): %s", o->path, o->tmp, strerror(err))
                   : attn__fail(ATTN_ERR_IO, "%s: cannot write: %s", o->path, strerror(err));
    if (named && s != ATTN_OK) unlink(o->tmp);
    if (s == ATTN_OK && o->tmp && (err = sync_parent_dir(o->target)) != 0)
        s = attn__fail(ATTN_ERR_IO, "%s: written, but syncing its folder failed: %s", o->path, strerror(err));
    free(o->tmp);
    free(o->target);
    o->tmp = o->target = NULL;
    return s;
}

attn_status attn__outfile_write_error(attn__outfile *o, int err)
{
    return o->tmp ? attn__fail(ATTN_ERR_IO, "%s: cannot write (via %s): %s", o->path, o->tmp, strerror(err))
                  : attn__fail(ATTN_ERR_IO, "%s: cannot write: %s", o->path, strerror(err));
}

attn_status attn_output_check(const char *path)
{
    if (!path || !*path) return attn__fail(ATTN_ERR_ARG, "output path is empty");
    if (strlen(path) >= PATH_MAX)
        return attn__fail(ATTN_ERR_ARG, "%.64s...: the path has %zu bytes; at most %d fit", path, strlen(path),
                          PATH_MAX - 1);
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    if (strlen(base) > NAME_MAX)
        return attn__fail(ATTN_ERR_ARG, "%.64s...: the file name has %zu bytes; at most %d fit", path, strlen(base),
                          NAME_MAX);
    const int named = descriptor_named(path);
    if (named >= 0) return descriptor_writable(path, named);
    struct stat st;
    if (stat(path, &st) == 0 && in_place(st.st_mode))
        return access(path, W_OK) == 0
                   ? ATTN_OK
                   : attn__fail(ATTN_ERR_IO, "%s: cannot write (%s): %s", path, kind_of(st.st_mode), strerror(errno));
    bool exists = false;
    int descriptor;
    char *target = resolve_links(path, &st, &exists, &descriptor);
    if (!target) return attn_last_status();
    if (descriptor >= 0) { /* a link to one of this process's descriptors */
        free(target);
        return descriptor_writable(path, descriptor);
    }
    attn_status s = ATTN_OK;
    char *dir = NULL, *name = NULL;
    if (exists && !S_ISREG(st.st_mode)) {
        s = attn__fail(ATTN_ERR_IO, "%s: cannot write: it is %s", path, kind_of(st.st_mode));
    } else if ((s = split_path(target, &dir, &name)) == ATTN_OK) {
        struct stat ds;
        if (!*name)
            s = attn__fail(ATTN_ERR_IO, "%s: cannot write: the path names a folder", path);
        else if (strlen(name) > NAME_MAX)
            s = attn__fail(ATTN_ERR_IO, "%s: cannot write: the file name has %zu bytes; at most %d fit", path,
                           strlen(name), NAME_MAX);
        else if (stat(dir, &ds) != 0)
            s = attn__fail(ATTN_ERR_IO, "%s: cannot write: folder %s: %s", path, dir, strerror(errno));
        else if (!S_ISDIR(ds.st_mode))
            s = attn__fail(ATTN_ERR_IO, "%s: cannot write: %s is not a folder", path, dir);
        else if (access(dir, W_OK | X_OK) != 0)
            s = attn__fail(ATTN_ERR_IO, "%s: cannot write in folder %s: %s", path, dir, strerror(errno));
    }
    free(dir);
    free(name);
    free(target);
    return s;
}
