/* The JSON writer helpers of json.h: a growable buffer and string quoting. */
#include "io/json.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void clf_json_buf_init(clf_json_buf *b)
{
    memset(b, 0, sizeof *b);
}

void clf_json_buf_free(clf_json_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

static int buf_reserve(clf_json_buf *b, size_t extra)
{
    if (b->failed)
        return -1;
    if (extra > SIZE_MAX - b->len - 1) {
        b->failed = 1;
        return -1;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *n = realloc(b->data, cap);
    if (!n) {
        b->failed = 1;
        return -1;
    }
    b->data = n;
    b->cap = cap;
    return 0;
}

void clf_json_buf_append(clf_json_buf *b, const char *s, size_t n)
{
    if (buf_reserve(b, n) != 0)
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void clf_json_buf_puts(clf_json_buf *b, const char *s)
{
    clf_json_buf_append(b, s, strlen(s));
}

void clf_json_buf_printf(clf_json_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || buf_reserve(b, (size_t)n) != 0) {
        b->failed = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* The escape for byte c, or NULL when it is copied as is; buf holds \u00XX forms. */
static const char *escape_of(unsigned char c, char buf[8])
{
    switch (c) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\b':
        return "\\b";
    case '\f':
        return "\\f";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    default:
        if (c < 0x20) {
            snprintf(buf, 8, "\\u%04x", c);
            return buf;
        }
        return NULL;
    }
}

void clf_json_buf_string(clf_json_buf *b, const char *s, size_t n)
{
    char tmp[8];
    clf_json_buf_append(b, "\"", 1);
    size_t run = 0; /* start of the pending unescaped run */
    for (size_t i = 0; i < n; i++) {
        const char *e = escape_of((unsigned char)s[i], tmp);
        if (!e)
            continue;
        clf_json_buf_append(b, s + run, i - run);
        clf_json_buf_puts(b, e);
        run = i + 1;
    }
    clf_json_buf_append(b, s + run, n - run);
    clf_json_buf_append(b, "\"", 1);
}

int clf_json_fwrite_string(FILE *f, const char *s, size_t n)
{
    char tmp[8];
    if (fputc('"', f) == EOF)
        return -1;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e = escape_of((unsigned char)s[i], tmp);
        if (!e)
            continue;
        if (fwrite(s + run, 1, i - run, f) != i - run || fputs(e, f) == EOF)
            return -1;
        run = i + 1;
    }
    if (fwrite(s + run, 1, n - run, f) != n - run || fputc('"', f) == EOF)
        return -1;
    return 0;
}
