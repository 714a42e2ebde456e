/* Thread-local error message: one line, set by clf_error, read by clf_last_error. */
#include "clformer/status.h"

#include <stdio.h>
#include <string.h>

/* Long enough for a path, a tensor name and two shapes. */
#define CLF_ERROR_MAX 1024

static _Thread_local char clf_error_message[CLF_ERROR_MAX];

clf_status clf_verror(clf_status st, const char *fmt, va_list ap)
{
    vsnprintf(clf_error_message, sizeof clf_error_message, fmt, ap);
    return st;
}

clf_status clf_error(clf_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    clf_verror(st, fmt, ap);
    va_end(ap);
    return st;
}

clf_status clf_error_context(clf_status st, const char *fmt, ...)
{
    char prefix[CLF_ERROR_MAX], old[CLF_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, clf_error_message, sizeof old);
    /* truncation of an over-long message is acceptable: it stays one line */
    size_t n = strlen(prefix);
    if (n > sizeof clf_error_message - 3)
        n = sizeof clf_error_message - 3;
    memcpy(clf_error_message, prefix, n);
    memcpy(clf_error_message + n, ": ", 2);
    size_t rest = sizeof clf_error_message - n - 3;
    size_t m = strlen(old);
    if (m > rest)
        m = rest;
    memcpy(clf_error_message + n + 2, old, m);
    clf_error_message[n + 2 + m] = '\0';
    return st;
}

const char *clf_last_error(void)
{
    return clf_error_message;
}

void clf_clear_error(void)
{
    clf_error_message[0] = '\0';
}

int clf_status_exit_code(clf_status st)
{
    switch (st) {
    case CLF_OK:
        return 0;
    case CLF_ERR_INPUT:
    case CLF_ERR_IO:
        return 2;
    case CLF_ERR_BACKEND:
    case CLF_ERR_UNSUPPORTED:
    case CLF_ERR_NOMEM:
        return 3;
    default:
        return 1;
    }
}

const char *clf_status_name(clf_status st)
{
    switch (st) {
    case CLF_OK:
        return "ok";
    case CLF_ERR_INPUT:
        return "bad input";
    case CLF_ERR_IO:
        return "I/O error";
    case CLF_ERR_BACKEND:
        return "backend failure";
    case CLF_ERR_UNSUPPORTED:
        return "unsupported";
    case CLF_ERR_NOMEM:
        return "out of memory";
    default:
        return "internal error";
    }
}
