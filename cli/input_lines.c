/* Lines of standard input, read the one way every command reads them (cli.h). */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int cli_stdin_line(const char *cmd, char **line, size_t *cap, long line_no, int *code)
{
    errno = 0;
    clearerr(stdin);
    ssize_t len = getline(line, cap, stdin);
    if (len < 0) {
        if (!ferror(stdin)) return 0; /* the end */
        int err = errno ? errno : EIO;
        *code = cli_fail(CLI_ERR_DATA, cmd, "standard input: cannot read line %ld: %s", line_no, strerror(err));
        return -1;
    }
    if (len > 0 && (*line)[len - 1] == '\n') (*line)[--len] = '\0';
    if (memchr(*line, '\0', (size_t)len)) { /* a C string would end there */
        *code = cli_fail(CLI_ERR_DATA, cmd, "standard input, line %ld: a NUL byte at byte offset %zu; expected text",
                         line_no, strlen(*line));
        return -1;
    }
    return 1;
}
