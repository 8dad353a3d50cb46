/* Option parsing shared by the subcommands: numbers are checked for form and range, and every
 * problem names the option and what was expected. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_fail(int code, const char *cmd, const char *fmt, ...)
{
    fprintf(stderr, "attn %s: ", cmd);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

bool cli_integer_form(const char *s)
{
    s += *s == '-';
    return *s && !s[strspn(s, "0123456789")];
}

bool cli_parse_long(const char *cmd, const char *opt, const char *value, long min, long max, long *out)
{
    errno = 0;
    long v = strtol(value, NULL, 10);
    if (!cli_integer_form(value) || errno) {
        cli_fail(CLI_ERR_USAGE, cmd, "%s expects an integer, got \"%s\"", opt, value);
        return false;
    }
    if (v < min || v > max) {
        cli_fail(CLI_ERR_USAGE, cmd, "%s must be in [%ld, %ld], got %ld", opt, min, max, v);
        return false;
    }
    *out = v;
    return true;
}
