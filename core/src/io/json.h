/* json.h - a small strict JSON parser (RFC 8259) with a read-only DOM, and a writer helper.
 * Internal to libclformer: used for safetensors headers and tokenizers-library vocab files.
 *
 * Strict: no comments, no trailing commas, no NaN/Infinity, no control characters or
 * invalid UTF-8 in strings, no lone surrogates, no duplicate keys in one object. A leading
 * UTF-8 byte order mark is skipped (RFC 8259 allows parsers to ignore it). Strings are
 * returned as UTF-8 with every escape decoded (\uXXXX surrogate pairs included); a string
 * may hold "\u0000", so its exact length is in `len`.
 *
 * Errors (CLF_ERR_INPUT through clf_error) read
 *   "<name>: invalid JSON at byte 17 (line 2, column 5): expected ':' after an object key"
 *
 *     clf_json_doc *doc;
 *     if ((st = clf_json_parse(text, len, path, &doc)) != CLF_OK) return st;
 *     const clf_json *v = clf_json_get(clf_json_root(doc), "model");
 *     ...
 *     clf_json_free(doc);
 */
#ifndef CLF_JSON_H
#define CLF_JSON_H

#include <stdint.h>
#include <stdio.h>

#include "clformer/status.h"

typedef enum clf_json_type {
    CLF_JSON_NULL = 0,
    CLF_JSON_BOOL,
    CLF_JSON_NUMBER,
    CLF_JSON_STRING,
    CLF_JSON_ARRAY,
    CLF_JSON_OBJECT
} clf_json_type;

/* One value. Every pointer is owned by the document and lives until clf_json_free. */
typedef struct clf_json {
    clf_json_type type;
    size_t offset;          /* byte offset of the value's first character in the text */
    int boolean;            /* BOOL: 0 or 1 */
    double number;          /* NUMBER: the value as a double */
    int is_int;             /* NUMBER: 1 when written without fraction/exponent and it fits int64 */
    int64_t ival;           /* NUMBER with is_int: the exact value */
    const char *str;        /* STRING: UTF-8, NUL-terminated */
    size_t len;             /* STRING: length in bytes, without the terminating NUL */
    size_t count;           /* ARRAY: elements, OBJECT: members */
    struct clf_json *items; /* ARRAY: the elements; OBJECT: the member values, in order */
    const char **keys;      /* OBJECT: keys[i] (NUL-terminated UTF-8) names items[i] */
    const size_t *key_lens; /* OBJECT: exact key lengths (a key may hold "\u0000") */
} clf_json;

typedef struct clf_json_doc clf_json_doc;

/* Parses text[0..len) (no NUL needed). name prefixes error messages (a path, or "header").
 * On success *out holds the document; on failure *out is NULL. */
clf_status clf_json_parse(const char *text, size_t len, const char *name, clf_json_doc **out);
/* Reads and parses a whole file; CLF_ERR_IO when it cannot be read. */
clf_status clf_json_parse_file(const char *path, clf_json_doc **out);
const clf_json *clf_json_root(const clf_json_doc *doc);
void clf_json_free(clf_json_doc *doc); /* NULL is fine */

/* Member of an object by key (first match), or NULL (also when v is not an object). */
const clf_json *clf_json_get(const clf_json *obj, const char *key);
/* Element i of an array, or NULL when out of range or v is not an array. */
const clf_json *clf_json_at(const clf_json *arr, size_t i);
/* "null", "boolean", "number", "string", "array", "object": for messages. */
const char *clf_json_type_name(clf_json_type t);
/* 1-based line and column (in bytes) of offset in text, for messages about a value. */
void clf_json_line_col(const char *text, size_t len, size_t offset, int *line, int *col);

/* ---- writing ---- */

/* A growable byte buffer. After an allocation failure it stays as it was and `failed` is
 * set, so a writer may append many pieces and check once at the end. */
typedef struct clf_json_buf {
    char *data; /* NUL-terminated when not NULL */
    size_t len, cap;
    int failed;
} clf_json_buf;

void clf_json_buf_init(clf_json_buf *b);
void clf_json_buf_free(clf_json_buf *b);
void clf_json_buf_append(clf_json_buf *b, const char *s, size_t n);
void clf_json_buf_puts(clf_json_buf *b, const char *s);
void clf_json_buf_printf(clf_json_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends s[0..n) as a quoted JSON string: '"', '\\' and control characters escaped
 * (\n \t ... or \u00XX), other bytes (UTF-8) copied unchanged. */
void clf_json_buf_string(clf_json_buf *b, const char *s, size_t n);

/* The same quoting straight to a stream; returns 0, or -1 on a write error. */
int clf_json_fwrite_string(FILE *f, const char *s, size_t n);

#endif
