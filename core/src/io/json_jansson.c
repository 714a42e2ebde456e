/* Jansson under clformer's JSON rules (see json_jansson.h): the rules Jansson does not have
 * (byte order mark, nesting depth, integers beyond int64), and Jansson's error reports
 * turned into clformer's messages.
 *
 * Jansson reports an error as a message, "<what> near '<token>'" (the token named when it
 * is at most 20 bytes) or "<what> near end of file", and the number of bytes it had read,
 * which is where the offending token ends. The offending token starts that many bytes
 * before; for a longer token it is found back from there (a string token starts at the
 * nearest '"' not escaped by a backslash). The input itself is never parsed here: the bytes
 * around the place Jansson names only pick the words of the message. */
#include "io/json_jansson.h"
#include "clformer/fs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOAD_FLAGS (JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL)

/* Integers beyond int64 are re-read as reals, one more parse each (see splice_real): more
 * than this many in one document is refused rather than costing that many parses. */
#define MAX_BIG_INTEGERS 16

/* The text Jansson read: the caller's, less a byte order mark, plus ".0" after each integer
 * beyond int64 (the splices, ascending offsets into this text). */
typedef struct source {
    const char *name;
    const char *text;
    size_t len;
    size_t bom; /* bytes skipped before text */
    size_t splice[MAX_BIG_INTEGERS];
    int n_splice;
    const char *orig; /* the caller's text, for line and column */
    size_t orig_len;
} source;

/* Offset in the caller's text of offset off in s->text. */
static size_t caller_offset(const source *s, size_t off)
{
    size_t o = off;
    for (int i = 0; i < s->n_splice; i++)
        if (off >= s->splice[i] + 2)
            o -= 2;
        else if (off > s->splice[i])
            o -= off - s->splice[i];
    return o + s->bom;
}

static clf_status fail_at(const source *s, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static clf_status fail_at(const source *s, size_t off, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    size_t at = caller_offset(s, off);
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < s->orig_len; i++) {
        if (s->orig[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return clf_error(CLF_ERR_INPUT, "%s: invalid JSON at byte %zu (line %d, column %d): %s",
                     s->name, at, line, col, why);
}

/* "character 'x'", "byte 0xXX" or "end of input", for "found ..." in messages. */
static const char *describe(const source *s, size_t at, char *buf, size_t size)
{
    if (at >= s->len)
        return "end of input";
    unsigned char c = (unsigned char)s->text[at];
    if (c >= 0x21 && c < 0x7f)
        snprintf(buf, size, "character '%c'", c);
    else
        snprintf(buf, size, "byte 0x%02X", c);
    return buf;
}

/* The nearest '"' before offset end that no backslash escapes: where the string token that
 * runs through end - 1 starts. */
static size_t quote_before(const source *s, size_t end)
{
    for (size_t j = end; j-- > 0;) {
        if (s->text[j] != '"')
            continue;
        size_t slashes = 0;
        while (slashes < j && s->text[j - 1 - slashes] == '\\')
            slashes++;
        if (slashes % 2 == 0)
            return j;
    }
    return 0;
}

static int is_word_byte(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
           c == '+' || c == '.';
}

/* Where the token that Jansson stopped after (at end) starts. near_len: the length of the
 * token Jansson named, or -1 when it named none; in_string: the error is inside a string
 * token that did not end. */
static size_t token_start(const source *s, size_t end, long near_len, int in_string)
{
    if (near_len >= 0 && (size_t)near_len <= end)
        return end - (size_t)near_len;
    if (in_string)
        return quote_before(s, end);
    if (end > 0 && s->text[end - 1] == '"')
        return quote_before(s, end - 1);
    while (end > 0 && is_word_byte(s->text[end - 1]))
        end--;
    return end;
}

/* Jansson's message split into what went wrong and the token it names. */
typedef struct jansson_report {
    char what[JSON_ERROR_TEXT_LENGTH];
    long near_len; /* -1: no token named */
    int at_eof;    /* "near end of file": the token was the end of the input */
    size_t pos;    /* bytes Jansson had read */
} jansson_report;

static void split_report(const source *s, const json_error_t *e, jansson_report *r)
{
    snprintf(r->what, sizeof r->what, "%s", e->text);
    r->near_len = -1;
    r->at_eof = 0;
    r->pos = e->position < 0 ? 0 : (size_t)e->position;
    if (r->pos > s->len)
        r->pos = s->len;
    char *near = strstr(r->what, " near ");
    if (!near)
        return;
    if (strcmp(near, " near end of file") == 0) {
        r->at_eof = 1;
    } else if (near[6] == '\'') {
        size_t n = strlen(near + 7);
        r->near_len = n > 0 ? (long)n - 1 : 0; /* less the closing quote */
    }
    *near = '\0';
}

/* A token where a value should start: a number Jansson could not read, or anything else. */
static clf_status bad_value(const source *s, const jansson_report *r)
{
    char d[32];
    if (r->at_eof)
        return fail_at(s, r->pos, "unexpected end of input, expected a value");
    size_t start = token_start(s, r->pos, r->near_len, 0);
    const char *tok = s->text + start;
    size_t n = r->pos - start;
    char last = n ? tok[n - 1] : 0;
    if (n && (tok[0] == '-' || (tok[0] >= '0' && tok[0] <= '9'))) {
        if (n == 1 && tok[0] == '-')
            return fail_at(s, r->pos, "expected a digit in number");
        if (last == '.')
            return fail_at(s, r->pos, "expected a digit after the decimal point");
        if (last == 'e' || last == 'E' || last == '+' || last == '-')
            return fail_at(s, r->pos, "expected a digit in the exponent");
        if (r->pos < s->len && s->text[r->pos] >= '0' && s->text[r->pos] <= '9')
            return fail_at(s, start, "leading zeros are not allowed in numbers");
    }
    if (n == 1 && tok[0] == ']') {
        size_t p = start;
        while (p > 0 && (s->text[p - 1] == ' ' || s->text[p - 1] == '\t' ||
                         s->text[p - 1] == '\n' || s->text[p - 1] == '\r'))
            p--;
        if (p > 0 && s->text[p - 1] == ',')
            return fail_at(s, start, "trailing comma before ']'");
    }
    return fail_at(s, start, "unexpected %s, expected a value", describe(s, start, d, sizeof d));
}

/* "invalid escape": a backslash followed by a byte that starts no escape, or "\u" without
 * four hex digits. Jansson stopped just after the offending byte. */
static clf_status bad_escape(const source *s, const jansson_report *r)
{
    char d[32];
    size_t begin = token_start(s, r->pos, r->near_len, 1);
    for (size_t j = r->pos; j-- > begin && j + 6 >= r->pos;)
        if (s->text[j] == '\\' && j + 1 < r->pos && s->text[j + 1] == 'u')
            return fail_at(s, j, "\\u must be followed by 4 hex digits");
    if (r->pos >= s->len) /* the input ended after the backslash */
        return fail_at(s, begin, "string not terminated");
    size_t at = r->pos >= 2 ? r->pos - 2 : 0;
    return fail_at(s, at, "invalid escape in string: '\\' followed by %s",
                   describe(s, r->pos - 1, d, sizeof d));
}

/* A duplicate key, or one holding "\u0000" (nul_key): the key token Jansson stopped after,
 * decoded by Jansson for the message. */
static clf_status key_error(const source *s, const jansson_report *r, int nul_key)
{
    size_t start = token_start(s, r->pos, r->near_len, 0);
    json_t *key =
        json_loadb(s->text + start, r->pos - start, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    const char *k = json_is_string(key) ? json_string_value(key) : "";
    size_t n = json_is_string(key) ? json_string_length(key) : 0;
    int shown = (int)(n > 80 ? 80 : n);
    clf_status st =
        nul_key
            ? fail_at(s, start, "object key \"%.*s\" contains a NUL character (\\u0000)", shown, k)
            : fail_at(s, start, "duplicate key \"%.*s\" in object", shown, k);
    json_decref(key);
    return st;
}

/* Turns Jansson's report into clformer's message. */
static clf_status report(const source *s, const json_error_t *e)
{
    if (json_error_code(e) == json_error_out_of_memory)
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory while parsing JSON", s->name);
    jansson_report r;
    split_report(s, e, &r);
    const char *w = r.what;
    char d[32];
    size_t start = r.at_eof ? r.pos : token_start(s, r.pos, r.near_len, 0);
    unsigned a = 0, b = 0;

    if (strcmp(w, "unexpected token") == 0 || strcmp(w, "invalid token") == 0)
        return bad_value(s, &r);
    if (strcmp(w, "']' expected") == 0)
        return fail_at(s, start, "expected ',' or ']' in array, found %s",
                       describe(s, start, d, sizeof d));
    if (strcmp(w, "'}' expected") == 0)
        return fail_at(s, start, "expected ',' or '}' in object, found %s",
                       describe(s, start, d, sizeof d));
    if (strcmp(w, "':' expected") == 0)
        return fail_at(s, start, "expected ':' after an object key, found %s",
                       describe(s, start, d, sizeof d));
    if (strcmp(w, "string or '}' expected") == 0) {
        /* '{' '}' is an empty object, so a '}' here follows a comma */
        if (!r.at_eof && r.pos - start == 1 && s->text[start] == '}')
            return fail_at(s, start, "trailing comma before '}'");
        return fail_at(s, start, "expected a string key in object, found %s",
                       describe(s, start, d, sizeof d));
    }
    if (strcmp(w, "end of file expected") == 0)
        return fail_at(s, start, "unexpected %s after the value", describe(s, start, d, sizeof d));
    if (strcmp(w, "premature end of input") == 0)
        return fail_at(s, token_start(s, r.pos, r.near_len, 1), "string not terminated");
    if (strcmp(w, "invalid escape") == 0)
        return bad_escape(s, &r);
    if (strcmp(w, "unexpected newline") == 0 || strncmp(w, "control character 0x", 20) == 0) {
        unsigned c = r.pos < s->len ? (unsigned char)s->text[r.pos] : 0;
        return fail_at(s, r.pos, "control character 0x%02X in string (escape it as \\u%04X)", c, c);
    }
    if (sscanf(w, "unable to decode byte 0x%x", &a) == 1)
        return fail_at(s, r.pos, "invalid UTF-8 byte 0x%02X%s", a,
                       r.near_len > 0 && s->text[token_start(s, r.pos, r.near_len, 0)] == '"'
                           ? " in string"
                           : "");
    if (sscanf(w, "invalid Unicode '\\u%4X\\u%4X'", &a, &b) == 2)
        return fail_at(s, token_start(s, r.pos, r.near_len, 1),
                       "high surrogate \\u%04X followed by \\u%04X", a, b);
    if (sscanf(w, "invalid Unicode '\\u%4X'", &a) == 1)
        return fail_at(s, token_start(s, r.pos, r.near_len, 1),
                       a >= 0xDC00 ? "lone low surrogate \\u%04X"
                                   : "high surrogate \\u%04X not followed by a low one",
                       a);
    if (strcmp(w, "duplicate object key") == 0)
        return key_error(s, &r, 0);
    if (strcmp(w, "NUL byte in object key not supported") == 0)
        return key_error(s, &r, 1);
    if (strcmp(w, "real number overflow") == 0 || strncmp(w, "too big ", 8) == 0) {
        size_t n = r.pos - start;
        return fail_at(s, start, "number %.*s is out of range", (int)(n > 40 ? 40 : n),
                       s->text + start);
    }
    if (strcmp(w, "maximum parsing depth reached") == 0)
        return fail_at(s, start, "nesting deeper than %d levels", CLF_JSON_MAX_DEPTH);
    return fail_at(s, r.pos, "%s", e->text); /* a report this table does not know */
}

/* Jansson refuses an integer beyond int64 ("too big integer"); clformer reads it as a real,
 * as its own parser did. Jansson stopped just after the integer: the text is read again with
 * ".0" there. Returns 0 when spliced, -1 when out of memory. */
static int splice_real(source *s, char **copy, size_t at)
{
    char *n = malloc(s->len + 3);
    if (!n)
        return -1;
    memcpy(n, s->text, at);
    memcpy(n + at, ".0", 2);
    memcpy(n + at + 2, s->text + at, s->len - at);
    n[s->len + 2] = '\0';
    free(*copy);
    *copy = n;
    s->text = n;
    s->len += 2;
    s->splice[s->n_splice++] = at;
    return 0;
}

/* The limits Jansson does not have, checked on the text before Jansson allocates anything
 * for it: containers nest at most CLF_JSON_MAX_DEPTH deep, a string (key or value) holds at
 * most CLF_JSON_STRING_MAX bytes as written. A text that is not JSON may pass or fail here
 * (an unclosed '[' counts as one level); Jansson then names what is wrong with it. */
static clf_status check_limits(const source *s)
{
    size_t depth = 0;
    for (size_t i = 0; i < s->len; i++) {
        const char c = s->text[i];
        if (c == '[' || c == '{') {
            if (++depth > CLF_JSON_MAX_DEPTH)
                return fail_at(s, i, "nesting deeper than %d levels", CLF_JSON_MAX_DEPTH);
        } else if (c == ']' || c == '}') {
            depth -= depth > 0;
        } else if (c == '"') {
            const size_t start = i++;
            while (i < s->len && s->text[i] != '"')
                i += s->text[i] == '\\' ? 2 : 1;
            const size_t bytes = (i < s->len ? i : s->len) - start - 1;
            if (bytes > CLF_JSON_STRING_MAX)
                return fail_at(s, start, "a string of %zu bytes, more than the limit of %d", bytes,
                               CLF_JSON_STRING_MAX);
        }
    }
    return CLF_OK;
}

clf_status clf_json_parse(const char *text, size_t len, const char *name, json_t **out)
{
    *out = NULL;
    source s = {
        .name = name ? name : "JSON", .text = text, .len = len, .orig = text, .orig_len = len};
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        s.bom = 3;
        s.text += 3;
        s.len -= 3;
    }
    /* JSON allows a NUL byte nowhere (a string writes it \u0000). Jansson 2.14 loses one
     * that follows a number, having put it back as its look-ahead byte: "[1, 2<NUL>]" would
     * read as [1, 2]. */
    const char *nul = memchr(s.text, '\0', s.len);
    if (nul)
        return fail_at(&s, (size_t)(nul - s.text), "unexpected byte 0x00 (NUL)");
    clf_status st = check_limits(&s);
    if (st != CLF_OK)
        return st;
    char *copy = NULL;
    for (;;) {
        json_error_t e;
        json_t *root = json_loadb(s.text, s.len, LOAD_FLAGS, &e);
        if (root) {
            *out = root;
            st = CLF_OK;
            break;
        }
        int big = json_error_code(&e) == json_error_numeric_overflow &&
                  strncmp(e.text, "too big ", 8) == 0;
        if (!big || s.n_splice == MAX_BIG_INTEGERS) {
            st = report(&s, &e);
            break;
        }
        if (splice_real(&s, &copy, (size_t)e.position) != 0) {
            st = clf_error(CLF_ERR_NOMEM, "%s: out of memory while parsing JSON", s.name);
            break;
        }
    }
    free(copy);
    return st;
}

clf_status clf_json_parse_file(const char *path, size_t max_len, json_t **out)
{
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    clf_status st = clf_fs_read_all(path, max_len, &buf, &len);
    if (st == CLF_OK)
        st = clf_json_parse(buf, len, path, out);
    free(buf);
    return st;
}

const char *clf_json_type_name(const json_t *v)
{
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
        return "null";
    }
    return "?";
}
