/* A strict recursive-descent JSON parser into an arena-allocated DOM. See json.h for what
 * "strict" means here; the writer helpers are in json_write.c. */
#include "io/json.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Deeper nesting is refused rather than risking the C stack (real files nest < 10). */
#define JSON_MAX_DEPTH 512
/* Arena chunks: big enough that a vocab file needs few mallocs, small for a header. */
#define ARENA_CHUNK 65536
/* Objects with more members than this are checked for duplicate keys with a hash table. */
#define DUP_LINEAR_MAX 16

/* ---- arena ---- */

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, size;
    _Alignas(16) unsigned char mem[];
} arena_chunk;

struct clf_json_doc {
    arena_chunk *chunks;
    clf_json root;
};

static void *arena_alloc(clf_json_doc *doc, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    arena_chunk *c = doc->chunks;
    if (!c || c->size - c->used < n) {
        size_t size = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        c = malloc(sizeof *c + size);
        if (!c)
            return NULL;
        c->size = size;
        c->used = 0;
        c->next = doc->chunks;
        doc->chunks = c;
    }
    void *p = c->mem + c->used;
    c->used += n;
    return p;
}

/* ---- parser state ---- */

typedef struct key_entry {
    const char *key;
    size_t len;
    size_t offset;
} key_entry;

typedef struct parser {
    const unsigned char *p, *end, *start;
    const char *name;
    clf_json_doc *doc;
    /* children of the containers being parsed, shared by every level */
    clf_json *stack;
    size_t stack_len, stack_cap;
    key_entry *keys;
    size_t keys_len, keys_cap;
    int depth;
    clf_status st;
} parser;

static clf_status perr(parser *ps, const unsigned char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static clf_status perr(parser *ps, const unsigned char *at, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    size_t off = (size_t)(at - ps->start);
    int line, col;
    clf_json_line_col((const char *)ps->start, (size_t)(ps->end - ps->start), off, &line, &col);
    ps->st = clf_error(CLF_ERR_INPUT, "%s: invalid JSON at byte %zu (line %d, column %d): %s",
                       ps->name, off, line, col, why);
    return ps->st;
}

static clf_status nomem(parser *ps)
{
    ps->st = clf_error(CLF_ERR_NOMEM, "%s: out of memory while parsing JSON", ps->name);
    return ps->st;
}

void clf_json_line_col(const char *text, size_t len, size_t offset, int *line, int *col)
{
    int l = 1, c = 1;
    for (size_t i = 0; i < offset && i < len; i++) {
        if (text[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

/* Describes the byte at p for an "unexpected ..." message. */
static const char *describe(parser *ps, const unsigned char *p, char *buf, size_t size)
{
    if (p >= ps->end)
        return "end of input";
    if (*p >= 0x21 && *p < 0x7f)
        snprintf(buf, size, "character '%c'", *p);
    else
        snprintf(buf, size, "byte 0x%02X", *p);
    return buf;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static clf_status parse_value(parser *ps, clf_json *out);

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Reads the 4 hex digits after "\u" at p (p points at the 'u'). */
static clf_status read_u16(parser *ps, const unsigned char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 1; i <= 4; i++) {
        int h = p + i < ps->end ? hexval(p[i]) : -1;
        if (h < 0)
            return perr(ps, p - 1, "\\u must be followed by 4 hex digits");
        v = v * 16 + (unsigned)h;
    }
    *out = v;
    return CLF_OK;
}

static size_t put_utf8(unsigned char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence at p (lead byte >= 0x80), or 0 when invalid. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
    unsigned char c = p[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        if (c == 0xF4)
            hi = 0x8F; /* > U+10FFFF */
    } else {
        return 0;
    }
    if ((size_t)(end - p) < n)
        return 0;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

/* ps->p at the opening quote. Decodes into the arena: *s, *len. */
static clf_status parse_string(parser *ps, const char **s, size_t *len)
{
    const unsigned char *open = ps->p;
    const unsigned char *q = open + 1;
    /* find the closing quote: the decoded string is never longer than the raw one */
    while (q < ps->end && *q != '"') {
        if (*q == '\\')
            q++;
        q++;
    }
    if (q >= ps->end)
        return perr(ps, open, "string not terminated");
    unsigned char *o = arena_alloc(ps->doc, (size_t)(q - open));
    if (!o)
        return nomem(ps);
    unsigned char *o0 = o;
    const unsigned char *p = open + 1;
    while (p < q) {
        unsigned char c = *p;
        if (c == '\\') {
            unsigned char e = p[1];
            switch (e) {
            case '"':
            case '\\':
            case '/':
                *o++ = e;
                p += 2;
                continue;
            case 'b':
                *o++ = '\b';
                p += 2;
                continue;
            case 'f':
                *o++ = '\f';
                p += 2;
                continue;
            case 'n':
                *o++ = '\n';
                p += 2;
                continue;
            case 'r':
                *o++ = '\r';
                p += 2;
                continue;
            case 't':
                *o++ = '\t';
                p += 2;
                continue;
            case 'u': {
                unsigned cp = 0;
                if (read_u16(ps, p + 1, &cp) != CLF_OK)
                    return ps->st;
                if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return perr(ps, p, "lone low surrogate \\u%04X", cp);
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo = 0;
                    if (p + 6 >= q || p[6] != '\\' || p[7] != 'u')
                        return perr(ps, p, "high surrogate \\u%04X not followed by a low one", cp);
                    if (read_u16(ps, p + 7, &lo) != CLF_OK)
                        return ps->st;
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return perr(ps, p, "high surrogate \\u%04X followed by \\u%04X", cp, lo);
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
                o += put_utf8(o, cp);
                p += 6;
                continue;
            }
            default: {
                char d[32];
                return perr(ps, p, "invalid escape in string: '\\' followed by %s",
                            describe(ps, p + 1, d, sizeof d));
            }
            }
        }
        if (c < 0x20)
            return perr(ps, p, "control character 0x%02X in string (escape it as \\u%04X)", c, c);
        if (c < 0x80) {
            *o++ = c;
            p++;
            continue;
        }
        size_t n = utf8_seq(p, q);
        if (n == 0)
            return perr(ps, p, "invalid UTF-8 byte 0x%02X in string", c);
        memcpy(o, p, n);
        o += n;
        p += n;
    }
    *o = '\0';
    *s = (const char *)o0;
    *len = (size_t)(o - o0);
    ps->p = q + 1;
    return CLF_OK;
}

/* Converts a validated decimal number token to double, independent of the C locale. */
static int to_double(const char *tok, size_t n, double *out)
{
    char small[64];
    char *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf)
        return -1;
    memcpy(buf, tok, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (*end == '.') {
        /* a locale whose decimal point is not '.': use its own */
        const char *dp = localeconv()->decimal_point;
        if (dp && strlen(dp) == 1) {
            *end = dp[0];
            errno = 0;
            v = strtod(buf, &end);
        }
    }
    int ok = *end == '\0' && !(errno == ERANGE && isinf(v));
    if (buf != small)
        free(buf);
    *out = v;
    return ok ? 0 : 1;
}

static clf_status parse_number(parser *ps, clf_json *out)
{
    const unsigned char *s = ps->p, *p = ps->p;
    int neg = 0, integral = 1;
    if (p < ps->end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= ps->end || *p < '0' || *p > '9')
        return perr(ps, p, "expected a digit in number");
    if (*p == '0') {
        p++;
        if (p < ps->end && *p >= '0' && *p <= '9')
            return perr(ps, s, "leading zeros are not allowed in numbers");
    } else {
        while (p < ps->end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < ps->end && *p == '.') {
        integral = 0;
        p++;
        if (p >= ps->end || *p < '0' || *p > '9')
            return perr(ps, p, "expected a digit after the decimal point");
        while (p < ps->end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < ps->end && (*p == 'e' || *p == 'E')) {
        integral = 0;
        p++;
        if (p < ps->end && (*p == '+' || *p == '-'))
            p++;
        if (p >= ps->end || *p < '0' || *p > '9')
            return perr(ps, p, "expected a digit in the exponent");
        while (p < ps->end && *p >= '0' && *p <= '9')
            p++;
    }
    out->type = CLF_JSON_NUMBER;
    if (integral) {
        /* exact int64 when it fits (accumulated negatively: INT64_MIN fits too) */
        int64_t v = 0;
        int fits = 1;
        for (const unsigned char *d = s + neg; d < p; d++) {
            int digit = *d - '0';
            if (v < (INT64_MIN + digit) / 10) {
                fits = 0;
                break;
            }
            v = v * 10 - digit;
        }
        if (fits && !neg && v == INT64_MIN)
            fits = 0;
        if (fits) {
            out->is_int = 1;
            out->ival = neg ? v : -v;
            out->number = (double)out->ival;
            ps->p = p;
            return CLF_OK;
        }
    }
    int r = to_double((const char *)s, (size_t)(p - s), &out->number);
    if (r < 0)
        return nomem(ps);
    if (r > 0)
        return perr(ps, s, "number %.*s is out of range", (int)(p - s > 40 ? 40 : p - s), s);
    ps->p = p;
    return CLF_OK;
}

static clf_status push_child(parser *ps, const clf_json *v)
{
    if (ps->stack_len == ps->stack_cap) {
        size_t cap = ps->stack_cap ? ps->stack_cap * 2 : 64;
        clf_json *n = realloc(ps->stack, cap * sizeof *n);
        if (!n)
            return nomem(ps);
        ps->stack = n;
        ps->stack_cap = cap;
    }
    ps->stack[ps->stack_len++] = *v;
    return CLF_OK;
}

static clf_status push_key(parser *ps, const char *key, size_t len, size_t offset)
{
    if (ps->keys_len == ps->keys_cap) {
        size_t cap = ps->keys_cap ? ps->keys_cap * 2 : 64;
        key_entry *n = realloc(ps->keys, cap * sizeof *n);
        if (!n)
            return nomem(ps);
        ps->keys = n;
        ps->keys_cap = cap;
    }
    ps->keys[ps->keys_len++] = (key_entry){key, len, offset};
    return CLF_OK;
}

/* Moves stack[base..] (and keys[kbase..] for objects) into the arena as out's children. */
static clf_status take_children(parser *ps, clf_json *out, size_t base, size_t kbase)
{
    size_t n = ps->stack_len - base;
    out->count = n;
    if (n == 0)
        return CLF_OK;
    out->items = arena_alloc(ps->doc, n * sizeof(clf_json));
    if (!out->items)
        return nomem(ps);
    memcpy(out->items, ps->stack + base, n * sizeof(clf_json));
    ps->stack_len = base;
    if (out->type == CLF_JSON_OBJECT) {
        const char **keys = arena_alloc(ps->doc, n * sizeof(char *));
        size_t *lens = arena_alloc(ps->doc, n * sizeof(size_t));
        if (!keys || !lens)
            return nomem(ps);
        for (size_t i = 0; i < n; i++) {
            keys[i] = ps->keys[kbase + i].key;
            lens[i] = ps->keys[kbase + i].len;
        }
        out->keys = keys;
        out->key_lens = lens;
        ps->keys_len = kbase;
    }
    return CLF_OK;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static int same_key(const key_entry *a, const key_entry *b)
{
    return a->len == b->len && memcmp(a->key, b->key, a->len) == 0;
}

static clf_status dup_error(parser *ps, const key_entry *k)
{
    return perr(ps, ps->start + k->offset, "duplicate key \"%.*s\" in object",
                (int)(k->len > 80 ? 80 : k->len), k->key);
}

/* Refuses an object whose keys[kbase..] repeat a key. */
static clf_status check_duplicates(parser *ps, size_t kbase)
{
    size_t n = ps->keys_len - kbase;
    const key_entry *k = ps->keys + kbase;
    if (n <= DUP_LINEAR_MAX) {
        for (size_t i = 1; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (same_key(&k[i], &k[j]))
                    return dup_error(ps, &k[i]);
        return CLF_OK;
    }
    size_t cap = 1;
    while (cap < 2 * n)
        cap *= 2;
    size_t *slot = malloc(cap * sizeof *slot); /* index + 1; 0 = empty */
    if (!slot)
        return nomem(ps);
    memset(slot, 0, cap * sizeof *slot);
    clf_status st = CLF_OK;
    for (size_t i = 0; i < n && st == CLF_OK; i++) {
        size_t h = (size_t)hash_bytes(k[i].key, k[i].len) & (cap - 1);
        while (slot[h]) {
            if (same_key(&k[i], &k[slot[h] - 1])) {
                st = dup_error(ps, &k[i]);
                break;
            }
            h = (h + 1) & (cap - 1);
        }
        slot[h] = i + 1;
    }
    free(slot);
    return st;
}

static clf_status parse_array(parser *ps, clf_json *out)
{
    size_t base = ps->stack_len;
    out->type = CLF_JSON_ARRAY;
    ps->p++; /* '[' */
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return CLF_OK;
    }
    for (;;) {
        clf_json v;
        skip_ws(ps);
        if (parse_value(ps, &v) != CLF_OK || push_child(ps, &v) != CLF_OK)
            return ps->st;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == ']')
                return perr(ps, ps->p, "trailing comma before ']'");
            continue;
        }
        if (ps->p < ps->end && *ps->p == ']') {
            ps->p++;
            break;
        }
        char d[32];
        return perr(ps, ps->p, "expected ',' or ']' in array, found %s",
                    describe(ps, ps->p, d, sizeof d));
    }
    return take_children(ps, out, base, 0);
}

static clf_status parse_object(parser *ps, clf_json *out)
{
    size_t base = ps->stack_len, kbase = ps->keys_len;
    char d[32];
    out->type = CLF_JSON_OBJECT;
    ps->p++; /* '{' */
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return CLF_OK;
    }
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"')
            return perr(ps, ps->p, "expected a string key in object, found %s",
                        describe(ps, ps->p, d, sizeof d));
        size_t koff = (size_t)(ps->p - ps->start);
        const char *key;
        size_t klen;
        if (parse_string(ps, &key, &klen) != CLF_OK || push_key(ps, key, klen, koff) != CLF_OK)
            return ps->st;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':')
            return perr(ps, ps->p, "expected ':' after an object key, found %s",
                        describe(ps, ps->p, d, sizeof d));
        ps->p++;
        skip_ws(ps);
        clf_json v;
        if (parse_value(ps, &v) != CLF_OK || push_child(ps, &v) != CLF_OK)
            return ps->st;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == '}')
                return perr(ps, ps->p, "trailing comma before '}'");
            continue;
        }
        if (ps->p < ps->end && *ps->p == '}') {
            ps->p++;
            break;
        }
        return perr(ps, ps->p, "expected ',' or '}' in object, found %s",
                    describe(ps, ps->p, d, sizeof d));
    }
    if (check_duplicates(ps, kbase) != CLF_OK)
        return ps->st;
    return take_children(ps, out, base, kbase);
}

static int match_word(parser *ps, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, w, n) != 0)
        return 0;
    ps->p += n;
    return 1;
}

static clf_status parse_value(parser *ps, clf_json *out)
{
    memset(out, 0, sizeof *out);
    out->offset = (size_t)(ps->p - ps->start);
    if (ps->p >= ps->end)
        return perr(ps, ps->p, "unexpected end of input, expected a value");
    char d[32];
    clf_status st;
    switch (*ps->p) {
    case '{':
    case '[':
        if (ps->depth >= JSON_MAX_DEPTH)
            return perr(ps, ps->p, "nesting deeper than %d levels", JSON_MAX_DEPTH);
        ps->depth++;
        st = *ps->p == '{' ? parse_object(ps, out) : parse_array(ps, out);
        ps->depth--;
        return st;
    case '"':
        out->type = CLF_JSON_STRING;
        return parse_string(ps, &out->str, &out->len);
    case 't':
    case 'f':
    case 'n':
        if (match_word(ps, "true")) {
            out->type = CLF_JSON_BOOL;
            out->boolean = 1;
            return CLF_OK;
        }
        if (match_word(ps, "false")) {
            out->type = CLF_JSON_BOOL;
            return CLF_OK;
        }
        if (match_word(ps, "null")) {
            out->type = CLF_JSON_NULL;
            return CLF_OK;
        }
        break;
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
            return parse_number(ps, out);
        break;
    }
    return perr(ps, ps->p, "unexpected %s, expected a value", describe(ps, ps->p, d, sizeof d));
}

clf_status clf_json_parse(const char *text, size_t len, const char *name, clf_json_doc **out)
{
    *out = NULL;
    parser ps = {0};
    ps.start = ps.p = (const unsigned char *)text;
    ps.end = ps.start + len;
    ps.name = name ? name : "JSON";
    ps.doc = calloc(1, sizeof *ps.doc);
    if (!ps.doc)
        return nomem(&ps);
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        ps.p += 3;
    skip_ws(&ps);
    if (parse_value(&ps, &ps.doc->root) == CLF_OK) {
        skip_ws(&ps);
        if (ps.p < ps.end) {
            char d[32];
            perr(&ps, ps.p, "unexpected %s after the value", describe(&ps, ps.p, d, sizeof d));
        }
    }
    free(ps.stack);
    free(ps.keys);
    if (ps.st != CLF_OK) {
        clf_json_free(ps.doc);
        return ps.st;
    }
    *out = ps.doc;
    return CLF_OK;
}

clf_status clf_json_parse_file(const char *path, clf_json_doc **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return clf_error(CLF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 65536) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *n = realloc(buf, ncap);
            if (!n) {
                free(buf);
                fclose(f);
                return clf_error(CLF_ERR_NOMEM, "%s: out of memory reading the file", path);
            }
            buf = n;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    int saved = errno;
    fclose(f);
    if (bad) {
        free(buf);
        return clf_error(CLF_ERR_IO, "%s: cannot read: %s", path, strerror(saved));
    }
    clf_status st = clf_json_parse(buf, len, path, out);
    free(buf);
    return st;
}

const clf_json *clf_json_root(const clf_json_doc *doc)
{
    return doc ? &doc->root : NULL;
}

void clf_json_free(clf_json_doc *doc)
{
    if (!doc)
        return;
    arena_chunk *c = doc->chunks;
    while (c) {
        arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(doc);
}

const clf_json *clf_json_get(const clf_json *obj, const char *key)
{
    if (!obj || obj->type != CLF_JSON_OBJECT)
        return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < obj->count; i++)
        if (obj->key_lens[i] == n && memcmp(obj->keys[i], key, n) == 0)
            return &obj->items[i];
    return NULL;
}

const clf_json *clf_json_at(const clf_json *arr, size_t i)
{
    if (!arr || arr->type != CLF_JSON_ARRAY || i >= arr->count)
        return NULL;
    return &arr->items[i];
}

const char *clf_json_type_name(clf_json_type t)
{
    switch (t) {
    case CLF_JSON_NULL:
        return "null";
    case CLF_JSON_BOOL:
        return "boolean";
    case CLF_JSON_NUMBER:
        return "number";
    case CLF_JSON_STRING:
        return "string";
    case CLF_JSON_ARRAY:
        return "array";
    case CLF_JSON_OBJECT:
        return "object";
    }
    return "?";
}
