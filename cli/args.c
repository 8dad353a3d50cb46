/* Option parsing shared by the subcommands: numbers are checked for form and range, and every
 * problem names the option and what was expected. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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

const char *cli_value(const char *cmd, int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        cli_fail(CLI_ERR_USAGE, cmd, "option %s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

bool cli_parse_long(const char *cmd, const char *opt, const char *value, long min, long max,
                    long *out)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno || end == value || *end) {
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

bool cli_parse_float(const char *cmd, const char *opt, const char *value, double min, double max,
                     double *out)
{
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (errno || end == value || *end || !isfinite(v)) {
        cli_fail(CLI_ERR_USAGE, cmd, "%s expects a finite number, got \"%s\"", opt, value);
        return false;
    }
    if (v < min || v > max) {
        cli_fail(CLI_ERR_USAGE, cmd, "%s must be in [%g, %g], got %g", opt, min, max, v);
        return false;
    }
    *out = v;
    return true;
}
