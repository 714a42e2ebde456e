/* clformer serve: request parsing and response JSON (serve_api.h). JSON through Jansson;
 * form bodies parsed by libmicrohttpd's post processor (serve_http.c), their fields
 * collected and read here. */
#include "serve_api.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Nesting depth a request body may have: the formats need 3 (an object, an array, its
 * strings); more is refused before Jansson recurses. */
#define SERVE_JSON_DEPTH 8

void serve_limits_default(serve_limits *l)
{
    l->max_sentences = 128;
    l->max_chars = 10000;
}

static int fail(char *why, size_t why_len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *why, size_t why_len, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
    /* one line: a control byte quoted from the body (Jansson's "near '...'") becomes '?' */
    for (char *p = why; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return code;
}

size_t serve_utf8_chars(const char *text, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)text[i] & 0xC0) != 0x80;
    return n;
}

void serve_request_free(serve_request *req)
{
    if (!req)
        return;
    for (int i = 0; i < req->n && req->text; i++)
        free(req->text[i]);
    free(req->text);
    free(req->len);
    free(req->model);
    free(req->source);
    free(req->target);
    free(req->api_key);
    memset(req, 0, sizeof *req);
}

static void request_init(serve_request *req, serve_api_kind kind)
{
    memset(req, 0, sizeof *req);
    req->kind = kind;
    req->beam = -1;
    req->n_best = -1;
    req->max_len = 0;
    req->length_penalty = -2.0f;
}

static char *dup_bytes(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Room for n sentences; 413 past the limit. */
static int alloc_sentences(serve_request *req, size_t n, const serve_limits *lim, char *why,
                           size_t why_len)
{
    if (n > (size_t)lim->max_sentences)
        return fail(why, why_len, 413, "%zu sentences, more than the limit of %d", n,
                    lim->max_sentences);
    req->text = calloc(n ? n : 1, sizeof *req->text);
    req->len = calloc(n ? n : 1, sizeof *req->len);
    if (!req->text || !req->len)
        return fail(why, why_len, 500, "out of memory");
    return 0;
}

/* Appends sentence text[0..len) as req->text[req->n]; 413 past max_chars. */
static int add_sentence(serve_request *req, const char *name, const char *text, size_t len,
                        const serve_limits *lim, char *why, size_t why_len)
{
    size_t chars = serve_utf8_chars(text, len);
    if (chars > (size_t)lim->max_chars)
        return fail(why, why_len, 413, "%s[%d]: %zu characters, more than the limit of %d", name,
                    req->n, chars, lim->max_chars);
    if (!(req->text[req->n] = dup_bytes(text, len)))
        return fail(why, why_len, 500, "out of memory");
    req->len[req->n++] = len;
    return 0;
}

/* A string field that names something (model, language, key): *out malloc'd. */
static int name_field(const char *field, const char *s, size_t len, char **out, char *why,
                      size_t why_len)
{
    if (len == 0 || len > SERVE_NAME_MAX || memchr(s, '\0', len))
        return fail(why, why_len, 400, "'%s': expected a name of 1 to %d bytes", field,
                    SERVE_NAME_MAX);
    if (*out)
        return fail(why, why_len, 400, "'%s' given twice", field);
    if (!(*out = dup_bytes(s, len)))
        return fail(why, why_len, 500, "out of memory");
    return 0;
}

/* An integer option in [lo, hi], from a JSON integer or (LibreTranslate sends form values
 * as text) a decimal string. */
static int int_field(const char *field, json_t *v, int lo, int hi, int *out, char *why,
                     size_t why_len)
{
    long long x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end = NULL;
        if (json_string_length(v) == 0 || json_string_length(v) > 12)
            return fail(why, why_len, 400, "'%s': expected an integer", field);
        x = strtoll(s, &end, 10);
        if (*end != '\0')
            return fail(why, why_len, 400, "'%s': expected an integer", field);
    } else {
        return fail(why, why_len, 400, "'%s': expected an integer", field);
    }
    if (x < lo || x > hi)
        return fail(why, why_len, 400, "'%s': %lld is out of the range %d..%d", field, x, lo, hi);
    *out = (int)x;
    return 0;
}

static int string_field(const char *field, json_t *v, char **out, char *why, size_t why_len)
{
    if (!json_is_string(v))
        return fail(why, why_len, 400, "'%s': expected a string", field);
    return name_field(field, json_string_value(v), json_string_length(v), out, why, why_len);
}

/* The sentences of a JSON value: a string (only where one_ok) or an array of strings. */
static int sentences_field(serve_request *req, const char *field, json_t *v, int one_ok,
                           const serve_limits *lim, char *why, size_t why_len)
{
    int rc;
    if (one_ok && json_is_string(v)) {
        if ((rc = alloc_sentences(req, 1, lim, why, why_len)))
            return rc;
        return add_sentence(req, field, json_string_value(v), json_string_length(v), lim, why,
                            why_len);
    }
    if (!json_is_array(v))
        return fail(why, why_len, 400, "'%s': expected %san array of strings", field,
                    one_ok ? "a string or " : "");
    if ((rc = alloc_sentences(req, json_array_size(v), lim, why, why_len)))
        return rc;
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s)
    {
        if (!json_is_string(s))
            return fail(why, why_len, 400, "'%s[%zu]': expected a string", field, i);
        if ((rc = add_sentence(req, field, json_string_value(s), json_string_length(s), lim, why,
                               why_len)))
            return rc;
    }
    if (one_ok)
        req->q_array = 1;
    return 0;
}

/* The nesting depth of body's JSON, counted over brackets outside strings; over max: refused
 * before Jansson parses (its recursion is bounded only by its own large limit). */
static int json_too_deep(const char *body, size_t len, int max)
{
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = body[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > max)
                return 1;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return 0;
}

static int parse_json(serve_api_kind kind, const char *body, size_t len, const serve_limits *lim,
                      serve_request *req, char *why, size_t why_len)
{
    if (json_too_deep(body, len, SERVE_JSON_DEPTH))
        return fail(why, why_len, 400, "bad JSON: nested deeper than %d", SERVE_JSON_DEPTH);
    json_error_t err;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
    if (!root)
        return fail(why, why_len, 400, "bad JSON at byte %d: %s", err.position, err.text);
    int rc = 0;
    const char *key;
    json_t *v, *sentences = NULL;
    if (!json_is_object(root)) {
        rc = fail(why, why_len, 400, "expected a JSON object");
        goto done;
    }
    json_object_foreach(root, key, v)
    {
        if (strcmp(key, "source") == 0)
            rc = string_field(key, v, &req->source, why, why_len);
        else if (strcmp(key, "target") == 0)
            rc = string_field(key, v, &req->target, why, why_len);
        else if (strcmp(key, "api_key") == 0)
            rc = string_field(key, v, &req->api_key, why, why_len);
        else if (kind == SERVE_API_LIBRE && strcmp(key, "q") == 0)
            sentences = v;
        else if (kind == SERVE_API_LIBRE && strcmp(key, "format") == 0) {
            if (!json_is_string(v))
                rc = fail(why, why_len, 400, "'format': expected a string");
            else if (strcmp(json_string_value(v), "text") != 0)
                rc = fail(why, why_len, 400, "'format': only \"text\" is supported");
        } else if (kind == SERVE_API_LIBRE && strcmp(key, "alternatives") == 0)
            rc = int_field(key, v, 0, SERVE_ALTERNATIVES_MAX, &req->alternatives, why, why_len);
        else if (kind == SERVE_API_NATIVE && strcmp(key, "model") == 0)
            rc = string_field(key, v, &req->model, why, why_len);
        else if (kind == SERVE_API_NATIVE && strcmp(key, "sentences") == 0)
            sentences = v;
        else if (kind == SERVE_API_NATIVE && strcmp(key, "beam") == 0)
            rc = int_field(key, v, 1, SERVE_BEAM_MAX, &req->beam, why, why_len);
        else if (kind == SERVE_API_NATIVE && strcmp(key, "n_best") == 0)
            rc = int_field(key, v, 1, SERVE_BEAM_MAX, &req->n_best, why, why_len);
        else if (kind == SERVE_API_NATIVE && strcmp(key, "max_len") == 0)
            rc = int_field(key, v, 1, SERVE_MAX_LEN_MAX, &req->max_len, why, why_len);
        else if (kind == SERVE_API_NATIVE && strcmp(key, "length_penalty") == 0) {
            double a = json_number_value(v);
            if (!json_is_number(v) || !(a >= 0.0 && a <= 10.0))
                rc = fail(why, why_len, 400, "'length_penalty': expected a number in 0..10");
            else
                req->length_penalty = (float)a;
        } else if (kind == SERVE_API_LIBRE)
            continue; /* LibreTranslate ignores what it does not know */
        else
            rc = fail(why, why_len, 400, "unknown field '%s'", key);
        if (rc)
            goto done;
    }
    if (!sentences) {
        rc = fail(why, why_len, 400, "missing '%s'", kind == SERVE_API_LIBRE ? "q" : "sentences");
        goto done;
    }
    rc = sentences_field(req, kind == SERVE_API_LIBRE ? "q" : "sentences", sentences,
                         kind == SERVE_API_LIBRE, lim, why, why_len);
    if (rc == 0 && kind == SERVE_API_LIBRE && req->n == 0)
        rc = fail(why, why_len, 400, "'q': empty");
    if (rc == 0 && req->beam > 0 && req->n_best > req->beam)
        rc = fail(why, why_len, 400, "'n_best': %d is more than 'beam' %d", req->n_best, req->beam);
done:
    json_decref(root);
    return rc;
}

void serve_form_free(serve_form *f)
{
    for (int i = 0; f->fields && i < f->n; i++) {
        free(f->fields[i].key);
        free(f->fields[i].value);
    }
    free(f->fields);
    memset(f, 0, sizeof *f);
}

int serve_form_add(serve_form *f, const char *key, const char *data, uint64_t off, size_t size,
                   const serve_limits *lim, char *why, size_t why_len)
{
    if (!key || !*key)
        return fail(why, why_len, 400, "a form field without a name");
    serve_form_field *last = f->n > 0 ? &f->fields[f->n - 1] : NULL;
    const int same = last && strcmp(last->key, key) == 0;
    if (off > 0 && !(same && off == last->len))
        return fail(why, why_len, 400, "form field '%s': bytes at offset %llu continue no field",
                    key, (unsigned long long)off);
    if (off == 0 && !(same && last->len == 0)) { /* a new field */
        const int most = lim->max_sentences + SERVE_FORM_OTHER_MAX;
        if (f->n >= most)
            return fail(why, why_len, 413, "more than %d form fields", most);
        if (f->n == f->cap) {
            int cap = f->cap ? 2 * f->cap : 8;
            serve_form_field *p = realloc(f->fields, sizeof *p * (size_t)cap);
            if (!p)
                return fail(why, why_len, 500, "out of memory");
            f->fields = p;
            f->cap = cap;
        }
        last = &f->fields[f->n];
        *last = (serve_form_field){0};
        if (!(last->key = strdup(key)) || !(last->value = malloc(1))) {
            free(last->key);
            free(last->value);
            return fail(why, why_len, 500, "out of memory");
        }
        last->value[0] = '\0';
        last->cap = 1;
        f->n++;
    }
    if (size > last->cap - 1 - last->len) {
        size_t cap = last->cap;
        while (cap - 1 - last->len < size)
            cap *= 2;
        char *v = realloc(last->value, cap);
        if (!v)
            return fail(why, why_len, 500, "out of memory");
        last->value = v;
        last->cap = cap;
    }
    if (size > 0)
        memcpy(last->value + last->len, data, size);
    last->len += size;
    last->value[last->len] = '\0';
    return 0;
}

int serve_parse_form(serve_api_kind kind, const serve_form *f, const serve_limits *lim,
                     serve_request *req, char *why, size_t why_len)
{
    request_init(req, kind);
    int rc = 0, n_q = 0;
    json_t *alternatives = NULL;
    if (kind != SERVE_API_LIBRE) {
        rc = fail(why, why_len, 400, "expected a JSON body (Content-Type: application/json)");
        goto done;
    }
    for (int i = 0; i < f->n; i++)
        n_q += strcmp(f->fields[i].key, "q") == 0;
    if ((rc = alloc_sentences(req, (size_t)n_q, lim, why, why_len)))
        goto done;
    for (int i = 0; i < f->n && rc == 0; i++) {
        const char *key = f->fields[i].key, *val = f->fields[i].value;
        const size_t vlen = f->fields[i].len;
        if (strcmp(key, "q") == 0)
            rc = add_sentence(req, "q", val, vlen, lim, why, why_len);
        else if (strcmp(key, "source") == 0)
            rc = name_field(key, val, vlen, &req->source, why, why_len);
        else if (strcmp(key, "target") == 0)
            rc = name_field(key, val, vlen, &req->target, why, why_len);
        else if (strcmp(key, "api_key") == 0)
            rc = name_field(key, val, vlen, &req->api_key, why, why_len);
        else if (strcmp(key, "format") == 0) {
            if (vlen != 4 || strcmp(val, "text") != 0)
                rc = fail(why, why_len, 400, "'format': only \"text\" is supported");
        } else if (strcmp(key, "alternatives") == 0) {
            json_decref(alternatives);
            if (!(alternatives = json_stringn(val, vlen)))
                rc = fail(why, why_len, 400, "'alternatives': expected an integer");
            else
                rc = int_field(key, alternatives, 0, SERVE_ALTERNATIVES_MAX, &req->alternatives,
                               why, why_len);
        }
    }
    if (rc == 0 && (n_q == 0 || (n_q == 1 && req->len[0] == 0)))
        rc = fail(why, why_len, 400, "missing 'q'");
    req->q_array = n_q > 1;
done:
    json_decref(alternatives);
    if (rc) {
        serve_request_free(req);
        request_init(req, kind);
    }
    return rc;
}

int serve_parse_request(serve_api_kind kind, const char *body, size_t len, const serve_limits *lim,
                        serve_request *req, char *why, size_t why_len)
{
    request_init(req, kind);
    int rc = parse_json(kind, body, len, lim, req, why, why_len);
    if (rc) {
        serve_request_free(req);
        request_init(req, kind);
    }
    return rc;
}

/* The entry of list (an array of objects) whose field of one of names[0..n) is code, else
 * NULL. */
static const json_t *iso_entry(const json_t *list, const char *const *names, int n,
                               const char *code)
{
    size_t i;
    const json_t *e;
    json_array_foreach(list, i, e)
    {
        for (int k = 0; k < n; k++) {
            const char *v = json_string_value(json_object_get(e, names[k]));
            if (v && strcmp(v, code) == 0)
                return e;
        }
    }
    return NULL;
}

const char *serve_language_name(const json_t *iso3, const json_t *iso2, const char *code)
{
    static const char *const keys3[] = {"alpha_2", "alpha_3"};
    static const char *const keys2[] = {"alpha_2", "alpha_3", "bibliographic"};
    const json_t *e = NULL;
    if (json_is_object(iso3))
        e = iso_entry(json_object_get(iso3, "639-3"), keys3, 2, code);
    if (!json_string_value(json_object_get(e, "name")) && json_is_object(iso2))
        e = iso_entry(json_object_get(iso2, "639-2"), keys2, 3, code);
    const char *name = json_string_value(json_object_get(e, "name"));
    return name && *name ? name : NULL;
}

/* ---- sentences of a text ---- */

static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* The bytes of a sentence end at t[i] (. ! ? or U+3002, U+FF01, U+FF1F), else 0. */
static size_t sentence_end(const char *t, size_t len, size_t i)
{
    static const char *const wide[] = {"\xe3\x80\x82", "\xef\xbc\x81", "\xef\xbc\x9f"};
    if (t[i] == '.' || t[i] == '!' || t[i] == '?')
        return 1;
    for (int k = 0; k < 3; k++)
        if (len - i >= 3 && memcmp(t + i, wide[k], 3) == 0)
            return 3;
    return 0;
}

/* The bytes of a closing quote or bracket at t[i], else 0. */
static size_t closing(const char *t, size_t len, size_t i)
{
    static const char *const wide[] = {"\xe2\x80\x9d", "\xe2\x80\x99", "\xc2\xbb", "\xe3\x80\x8d",
                                       "\xe3\x80\x8f"}; /* ” ’ » 」 』 */
    if (t[i] == '"' || t[i] == '\'' || t[i] == ')' || t[i] == ']')
        return 1;
    for (int k = 0; k < 5; k++) {
        size_t n = strlen(wide[k]);
        if (len - i >= n && memcmp(t + i, wide[k], n) == 0)
            return n;
    }
    return 0;
}

/* Where the sentence that starts at `from` ends (exclusive), and the whitespace after it
 * (*sep_end: where the next one starts). */
static size_t next_cut(const char *t, size_t len, size_t from, size_t *sep_end)
{
    size_t i = from, end = len;
    while (i < len) {
        if (t[i] == '\n' || t[i] == '\r') {
            end = i;
            break;
        }
        size_t e = sentence_end(t, len, i);
        if (e) {
            size_t j = i + e, c;
            while (j < len && (c = closing(t, len, j)))
                j += c;
            if (j < len && is_space((unsigned char)t[j])) {
                end = j;
                break;
            }
            i = j;
            continue;
        }
        i++;
    }
    while (end > from && is_space((unsigned char)t[end - 1])) /* trailing spaces: the sep's */
        end--;
    size_t j = end;
    while (j < len && is_space((unsigned char)t[j]))
        j++;
    *sep_end = j;
    return end;
}

void serve_split_free(serve_split *sp)
{
    for (int i = 0; sp->pieces && i < sp->n_pieces; i++)
        free(sp->pieces[i].sep);
    free(sp->pieces);
    free(sp->first);
    free(sp->count);
    memset(sp, 0, sizeof *sp);
}

/* Appends a piece to sp (and, when len > 0, its sentence to the arrays). 0: out of memory. */
static int add_piece(serve_split *sp, int *cap, char ***text, size_t **lens, int *n_text,
                     int *cap_text, const char *t, size_t len, const char *sep, size_t sep_len)
{
    if (sp->n_pieces == *cap) {
        int c = *cap ? 2 * *cap : 16;
        serve_piece *p = realloc(sp->pieces, sizeof *p * (size_t)c);
        if (!p)
            return 0;
        sp->pieces = p;
        *cap = c;
    }
    serve_piece *p = &sp->pieces[sp->n_pieces];
    p->sentence = -1;
    p->sep_len = sep_len;
    if (!(p->sep = malloc(sep_len + 1)))
        return 0;
    memcpy(p->sep, sep, sep_len);
    p->sep[sep_len] = '\0';
    sp->n_pieces++;
    if (len == 0)
        return 1;
    if (*n_text == *cap_text) {
        int c = *cap_text ? 2 * *cap_text : 16;
        char **tx = realloc(*text, sizeof *tx * (size_t)c);
        if (!tx)
            return 0;
        *text = tx;
        size_t *ln = realloc(*lens, sizeof *ln * (size_t)c);
        if (!ln)
            return 0;
        *lens = ln;
        *cap_text = c;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return 0;
    memcpy(copy, t, len);
    copy[len] = '\0';
    (*text)[*n_text] = copy;
    (*lens)[*n_text] = len;
    p->sentence = (*n_text)++;
    return 1;
}

int serve_split_request(serve_request *q, int max_sentences, serve_split *sp, char *why,
                        size_t why_len)
{
    memset(sp, 0, sizeof *sp);
    char **text = NULL;
    size_t *lens = NULL;
    int n_text = 0, cap_text = 0, cap = 0;
    sp->n_items = q->n;
    sp->first = calloc(q->n > 0 ? (size_t)q->n : 1, sizeof *sp->first);
    sp->count = calloc(q->n > 0 ? (size_t)q->n : 1, sizeof *sp->count);
    if (!sp->first || !sp->count)
        goto nomem;
    for (int i = 0; i < q->n; i++) {
        const char *t = q->text[i];
        const size_t len = q->len[i];
        sp->first[i] = sp->n_pieces;
        size_t at = 0;
        while (at < len && is_space((unsigned char)t[at])) /* leading whitespace, kept */
            at++;
        if (at > 0 && !add_piece(sp, &cap, &text, &lens, &n_text, &cap_text, t, 0, t, at))
            goto nomem;
        while (at < len) {
            size_t sep_end, end = next_cut(t, len, at, &sep_end);
            if (!add_piece(sp, &cap, &text, &lens, &n_text, &cap_text, t + at, end - at, t + end,
                           sep_end - end))
                goto nomem;
            if (n_text > max_sentences) {
                snprintf(why, why_len,
                         "'q' holds more than %d sentences (split at line breaks and sentence "
                         "ends; the server's --max-sentences)",
                         max_sentences);
                for (int k = 0; k < n_text; k++)
                    free(text[k]);
                free(text);
                free(lens);
                serve_split_free(sp);
                return 413;
            }
            at = sep_end;
        }
        sp->count[i] = sp->n_pieces - sp->first[i];
    }
    for (int i = 0; i < q->n; i++)
        free(q->text[i]);
    free(q->text);
    free(q->len);
    q->text = text;
    q->len = lens;
    q->n = n_text;
    return 0;
nomem:
    for (int k = 0; k < n_text; k++)
        free(text[k]);
    free(text);
    free(lens);
    serve_split_free(sp);
    snprintf(why, why_len, "out of memory");
    return 500;
}

char *serve_split_join(const serve_split *sp, int item, const char *const *text)
{
    size_t n = 1;
    const serve_piece *p = sp->count[item] > 0 ? sp->pieces + sp->first[item] : NULL;
    for (int k = 0; k < sp->count[item]; k++)
        n += (p[k].sentence >= 0 ? strlen(text[p[k].sentence]) : 0) + p[k].sep_len;
    char *out = malloc(n), *w = out;
    if (!out)
        return NULL;
    for (int k = 0; k < sp->count[item]; k++) {
        if (p[k].sentence >= 0) {
            size_t m = strlen(text[p[k].sentence]);
            memcpy(w, text[p[k].sentence], m);
            w += m;
        }
        memcpy(w, p[k].sep, p[k].sep_len);
        w += p[k].sep_len;
    }
    *w = '\0';
    return out;
}

char *serve_json_line(json_t *json)
{
    if (!json)
        return NULL;
    char *s = json_dumps(json, JSON_COMPACT);
    json_decref(json);
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *line = realloc(s, n + 2);
    if (!line) {
        free(s);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = '\0';
    return line;
}

char *serve_error_json(const char *message)
{
    /* a message naming a request's bytes might not be UTF-8: Jansson would refuse it */
    json_t *s = json_string(message);
    if (!s)
        s = json_string("(the error message is not valid UTF-8)");
    return serve_json_line(json_pack("{s:o}", "error", s));
}

char *serve_libre_response(const serve_request *req, const serve_result *res, const char *detected)
{
    json_t *root = json_object(), *texts = json_array(), *alts = json_array();
    if (!root || !texts || !alts)
        goto fail;
    for (int i = 0; i < req->n; i++) {
        json_t *alt = json_array();
        if (!alt || json_array_append_new(alts, alt) ||
            json_array_append_new(texts, json_string(res[i].n_hyps > 0 ? res[i].text[0] : "")))
            goto fail;
        for (int h = 1; h < res[i].n_hyps && h <= req->alternatives; h++)
            if (json_array_append_new(alt, json_string(res[i].text[h])))
                goto fail;
    }
    if (json_object_set(root, "translatedText", req->q_array ? texts : json_array_get(texts, 0)))
        goto fail;
    if (req->alternatives > 0 &&
        json_object_set(root, "alternatives", req->q_array ? alts : json_array_get(alts, 0)))
        goto fail;
    if (detected &&
        json_object_set_new(root, "detectedLanguage",
                            json_pack("{s:i,s:s}", "confidence", 100, "language", detected)))
        goto fail;
    json_decref(texts);
    json_decref(alts);
    return serve_json_line(root);
fail:
    json_decref(root);
    json_decref(texts);
    json_decref(alts);
    return NULL;
}

char *serve_native_response(const char *model, const serve_result *res, int n)
{
    json_t *root = json_pack("{s:s,s:[]}", "model", model, "translations");
    if (!root)
        return NULL;
    json_t *list = json_object_get(root, "translations");
    for (int i = 0; i < n; i++) {
        json_t *hyps = json_array();
        if (!hyps || json_array_append_new(list, json_pack("{s:s,s:o}", "text",
                                                           res[i].n_hyps > 0 ? res[i].text[0] : "",
                                                           "hypotheses", hyps)))
            goto fail;
        for (int h = 0; h < res[i].n_hyps; h++)
            /* a score JSON cannot hold (-inf: no finite path) is null */
            if (json_array_append_new(hyps, json_pack("{s:s,s:o}", "text", res[i].text[h], "score",
                                                      isfinite(res[i].score[h])
                                                          ? json_real(res[i].score[h])
                                                          : json_null())))
                goto fail;
    }
    return serve_json_line(root);
fail:
    json_decref(root);
    return NULL;
}
