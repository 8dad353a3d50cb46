/* Error reporting: a status and a message per thread, set by the failing function. */
#include "core_internal.h"

#include <stdio.h>

static _Thread_local attn_status last_status = ATTN_OK;
static _Thread_local char last_message[4096] = "";

static void set_message(attn_status status, const char *fmt, va_list ap)
{
    last_status = status;
    vsnprintf(last_message, sizeof last_message, fmt, ap);
}

attn_status attn__fail(attn_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(status, fmt, ap);
    va_end(ap);
    return status;
}

void *attn__fail_null(attn_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(status, fmt, ap);
    va_end(ap);
    return NULL;
}

attn_status attn_set_error(attn_status status, const char *fmt, ...)
{
    if (!fmt) fmt = "(no message)";
    va_list ap;
    va_start(ap, fmt);
    set_message(status, fmt, ap);
    va_end(ap);
    return status;
}

attn_status attn__null_arg(const char *fn)
{
    return attn__fail(ATTN_ERR_ARG, "%s: a required argument is NULL", fn);
}

void *attn__null_input(const char *fn)
{
    if (last_status == ATTN_OK) attn__null_arg(fn);
    return NULL;
}

const char *attn_last_error(void)
{
    return last_message;
}

attn_status attn_last_status(void)
{
    return last_status;
}

void attn_clear_error(void)
{
    last_status = ATTN_OK;
    last_message[0] = '\0';
}

const char *attn_status_name(attn_status s)
{
    switch (s) {
    case ATTN_OK:
        return "ok";
    case ATTN_ERR_ARG:
        return "invalid argument";
    case ATTN_ERR_SHAPE:
        return "shape error";
    case ATTN_ERR_NOMEM:
        return "out of memory";
    case ATTN_ERR_IO:
        return "I/O error";
    case ATTN_ERR_FORMAT:
        return "format error";
    case ATTN_ERR_NUMERIC:
        return "numeric error";
    case ATTN_ERR_STATE:
        return "state error";
    }
    return "unknown status";
}

const char *attn_version(void)
{
    return ATTN_VERSION_STRING;
}

int attn_version_number(void)
{
    return ATTN_VERSION_NUMBER;
}
