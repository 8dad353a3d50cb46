/* The lock of a training run on its checkpoint (train_common.h). */
#include "train_common.h"
#include "options.h"
#include "dist.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

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
