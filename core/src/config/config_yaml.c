/* Walking a configuration's YAML document (libyaml's document API) against the tables of
 * keys of config.c: scalars of each kind with their ranges, nested mappings, unknown and
 * duplicate keys with a likely typo named, and every error at the position of the node
 * at fault. */
#include "config/config_yaml.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Scalars quoted in messages are cut to this many characters. */
#define CFG_EXCERPT_MAX 40

/* ---- messages ---------------------------------------------------------------------- */

clf_status clf_cfg_fail_at(const parse_ctx *c, yaml_mark_t m, const char *key, const char *fmt, ...)
{
    char why[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (key)
        return clf_error(CLF_ERR_INPUT, "%s:%zu:%zu: %s: %s", c->name, m.line + 1, m.column + 1,
                         key, why);
    return clf_error(CLF_ERR_INPUT, "%s:%zu:%zu: %s", c->name, m.line + 1, m.column + 1, why);
}

static const char *clf_cfg_scalar_text(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

int clf_cfg_is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *s = clf_cfg_scalar_text(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

/* What a node is, for "expected X, got <this>": 'abc', a mapping, nothing, ... */
const char *clf_cfg_describe(const yaml_node_t *n, char *buf, size_t size)
{
    if (n->type == YAML_MAPPING_NODE)
        return "a mapping";
    if (n->type == YAML_SEQUENCE_NODE)
        return "a sequence";
    if (n->type != YAML_SCALAR_NODE)
        return "nothing";
    if (clf_cfg_is_null(n))
        return *clf_cfg_scalar_text(n) ? "null" : "nothing";
    char excerpt[CFG_EXCERPT_MAX + 4];
    size_t len = n->data.scalar.length, k = 0;
    for (; k < len && k < CFG_EXCERPT_MAX; k++) {
        unsigned char ch = n->data.scalar.value[k];
        excerpt[k] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch; /* keep the message one line */
    }
    if (k < len)
        memcpy(excerpt + k, "...", 3), k += 3;
    excerpt[k] = '\0';
    snprintf(buf, size, "%s'%s'",
             n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? "" : "the quoted string ", excerpt);
    return buf;
}

/* The items of the sequence v (the value of key): *items and *count; when v is not a
 * sequence, the error "expected <expected>, got <what v is>" at v. */
static clf_status clf_cfg_sequence(const parse_ctx *c, const yaml_node_t *v, const char *key,
                                   const char *expected, const yaml_node_item_t **items,
                                   long *count)
{
    char buf[96];
    *items = NULL;
    *count = 0;
    if (v->type != YAML_SEQUENCE_NODE)
        return clf_cfg_fail_at(c, v->start_mark, key, "expected %s, got %s", expected,
                               clf_cfg_describe(v, buf, sizeof buf));
    *items = v->data.sequence.items.start;
    *count = v->data.sequence.items.top - *items;
    return CLF_OK;
}

/* Item i of a sequence (items from clf_cfg_sequence) that is the value of key, with its key
 * for messages, "key[i]", written into item_key. */
static const yaml_node_t *clf_cfg_item(const parse_ctx *c, const yaml_node_item_t *items, long i,
                                       const char *key, char item_key[CFG_ITEM_KEY_MAX])
{
    snprintf(item_key, CFG_ITEM_KEY_MAX, "%s[%ld]", key, i);
    return yaml_document_get_node(c->doc, items[i]);
}

/* "a, b or c" */
static void clf_cfg_join_names(const char *const *names, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; names[i] && used < size; i++) {
        const char *sep = i == 0 ? "" : names[i + 1] ? ", " : " or ";
        int n = snprintf(buf + used, size - used, "%s%s", sep, names[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* Optimal-string-alignment distance (edits, adjacent swaps count 1), case-insensitive;
 * -1 when a string is too long to bother. */
static int edit_distance(const char *a, const char *b)
{
    enum { N = 48 };
    size_t la = strlen(a), lb = strlen(b);
    if (la >= N || lb >= N)
        return -1;
    int d[N][N];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            int ai = tolower((unsigned char)a[i - 1]), bj = tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + (ai != bj);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ai == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == bj && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

/* The valid name closest to s, if it is close enough to be a likely typo. The names are
 * pointers `stride` bytes apart, ending with NULL: a names[] list, or the keys of a field
 * table. */
static const char *closest(const char *s, const char *const *names, size_t stride)
{
    const char *best = NULL;
    int best_d = INT_MAX;
    for (const char *const *p = names; *p; p = (const char *const *)((const char *)p + stride)) {
        int d = edit_distance(s, *p), limit = strlen(*p) <= 4 ? 1 : 2;
        if (d >= 0 && d <= limit && d < best_d)
            best = *p, best_d = d;
    }
    return best;
}

static clf_status fail_unknown_name(const parse_ctx *c, const yaml_node_t *n, const char *key,
                                    const char *noun, const char *const *names)
{
    char list[256];
    clf_cfg_join_names(names, list, sizeof list);
    int count = 0;
    while (names[count])
        count++;
    /* with one or two valid names the list says it all */
    const char *near = count > 2 ? closest(clf_cfg_scalar_text(n), names, sizeof *names) : NULL;
    if (near)
        return clf_cfg_fail_at(c, n->start_mark, key,
                               "unknown %s '%s' (did you mean '%s'? expected %s)", noun,
                               clf_cfg_scalar_text(n), near, list);
    return clf_cfg_fail_at(c, n->start_mark, key, "unknown %s '%s' (expected %s)", noun,
                           clf_cfg_scalar_text(n), list);
}

/* ---- scalars ----------------------------------------------------------------------- */

/* A plain scalar that is not null. */
static int clf_cfg_is_plain(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           !clf_cfg_is_null(n);
}

/* Strict integer: -?[0-9]+, in range for long long. */
static int text_to_llong(const char *s, long long *out)
{
    const char *p = s + (*s == '-');
    if (!isdigit((unsigned char)*p))
        return 0;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q))
            return 0;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || !end || *end)
        return 0;
    *out = v;
    return 1;
}

static clf_status parse_integer(const parse_ctx *c, const yaml_node_t *n, const char *key,
                                long long lo, long long hi, long long *out)
{
    char buf[96];
    long long v;
    if (!clf_cfg_is_plain(n))
        return clf_cfg_fail_at(c, n->start_mark, key, "expected an integer, got %s",
                               clf_cfg_describe(n, buf, sizeof buf));
    if (!text_to_llong(clf_cfg_scalar_text(n), &v)) {
        const char *s = clf_cfg_scalar_text(n);
        int looks_integral = 1;
        for (const char *q = s + (*s == '-'); *q; q++)
            looks_integral &= isdigit((unsigned char)*q) != 0;
        if (looks_integral && *s)
            return clf_cfg_fail_at(c, n->start_mark, key, "integer %s is out of range", s);
        return clf_cfg_fail_at(c, n->start_mark, key, "expected an integer, got %s",
                               clf_cfg_describe(n, buf, sizeof buf));
    }
    if (v < lo) {
        if (lo == 1)
            return clf_cfg_fail_at(c, n->start_mark, key, "must be > 0, got %lld", v);
        return clf_cfg_fail_at(c, n->start_mark, key, "must be >= %lld, got %lld", lo, v);
    }
    if (v > hi)
        return clf_cfg_fail_at(c, n->start_mark, key, "must be <= %lld, got %lld", hi, v);
    *out = v;
    return CLF_OK;
}

static clf_status parse_float(const parse_ctx *c, const yaml_node_t *n, const char *key,
                              const field *f, float *out)
{
    char buf[96];
    if (!clf_cfg_is_plain(n))
        return clf_cfg_fail_at(c, n->start_mark, key, "expected a number, got %s",
                               clf_cfg_describe(n, buf, sizeof buf));
    /* strtod alone would take "inf", "nan", hex floats and leading blanks */
    const char *s = clf_cfg_scalar_text(n);
    int digits = 0, ok = 1;
    for (const char *q = s; *q; q++) {
        digits += isdigit((unsigned char)*q) != 0;
        ok &= isdigit((unsigned char)*q) || strchr(".eE+-", *q) != NULL;
    }
    char *end = NULL;
    double d = ok && digits ? strtod(s, &end) : 0.0;
    if (!ok || !digits || !end || *end)
        return clf_cfg_fail_at(c, n->start_mark, key, "expected a number, got %s",
                               clf_cfg_describe(n, buf, sizeof buf));
    float v = (float)d;
    if (!isfinite(v))
        return clf_cfg_fail_at(c, n->start_mark, key, "number %s is out of range", s);
    int low = f->fmin_open ? !(v > f->fmin) : !(v >= f->fmin);
    int high = f->fmax_open ? !(v < f->fmax) : !(v <= f->fmax);
    if (low || high) {
        if (isfinite(f->fmax))
            return clf_cfg_fail_at(c, n->start_mark, key, "must be in %c%g, %g%c, got %s",
                                   f->fmin_open ? '(' : '[', f->fmin, f->fmax,
                                   f->fmax_open ? ')' : ']', s);
        return clf_cfg_fail_at(c, n->start_mark, key, "must be %s %g, got %s",
                               f->fmin_open ? ">" : ">=", f->fmin, s);
    }
    *out = v;
    return CLF_OK;
}

/* true/false/yes/no, any case; -1 otherwise */
static int bool_value(const yaml_node_t *n)
{
    if (!clf_cfg_is_plain(n))
        return -1;
    const char *s = clf_cfg_scalar_text(n);
    if (!strcasecmp(s, "true") || !strcasecmp(s, "yes"))
        return 1;
    if (!strcasecmp(s, "false") || !strcasecmp(s, "no"))
        return 0;
    return -1;
}

/* A string scalar into char[size]; null gives "" when nullable. */
static clf_status clf_cfg_parse_string(const parse_ctx *c, const yaml_node_t *n, const char *key,
                                       int nullable, char *dst, size_t size)
{
    char buf[96];
    if (nullable && clf_cfg_is_null(n)) {
        memset(dst, 0, size);
        return CLF_OK;
    }
    if (n->type != YAML_SCALAR_NODE || clf_cfg_is_null(n))
        return clf_cfg_fail_at(c, n->start_mark, key, "expected a string, got %s",
                               clf_cfg_describe(n, buf, sizeof buf));
    size_t len = n->data.scalar.length;
    if (strlen(clf_cfg_scalar_text(n)) != len)
        return clf_cfg_fail_at(c, n->start_mark, key, "contains a NUL character");
    if (len >= size)
        return clf_cfg_fail_at(c, n->start_mark, key, "too long (%zu characters, at most %zu)", len,
                               size - 1);
    memset(dst, 0, size); /* zero the tail too: equal configs are equal bytes */
    memcpy(dst, clf_cfg_scalar_text(n), len);
    return CLF_OK;
}

/* ---- mappings ---------------------------------------------------------------------- */

static void note_seen(parse_ctx *c, const char *key, yaml_mark_t mark)
{
    if (c->n_seen >= CFG_SEEN_MAX)
        return;
    seen_key *s = &c->seen[c->n_seen++];
    snprintf(s->key, sizeof s->key, "%s", key);
    s->mark = mark;
}

const yaml_mark_t *clf_cfg_seen_mark(const parse_ctx *c, const char *key)
{
    for (int i = 0; i < c->n_seen; i++)
        if (!strcmp(c->seen[i].key, key))
            return &c->seen[i].mark;
    return NULL;
}

/* The mark of the first of the keys that was seen, else the root's. */
yaml_mark_t clf_cfg_mark_of(const parse_ctx *c, const char *k1, const char *k2, const char *k3)
{
    const char *keys[3] = {k1, k2, k3};
    for (int i = 0; i < 3; i++) {
        const yaml_mark_t *m = keys[i] ? clf_cfg_seen_mark(c, keys[i]) : NULL;
        if (m)
            return *m;
    }
    return c->root_mark;
}

/* ---- values, one parser per kind of field ------------------------------------------ */

/* Where field f's value lives in the config being filled. */
static void *value_at(const parse_ctx *c, size_t off)
{
    return (char *)c->cfg + off;
}

static clf_status value_int(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    long long iv = 0;
    clf_status st = parse_integer(c, v, key, f->imin, f->imax, &iv);
    if (st == CLF_OK)
        *(int *)value_at(c, f->off) = (int)iv;
    return st;
}

static clf_status value_llong(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    long long iv = 0;
    clf_status st = parse_integer(c, v, key, f->imin, f->imax, &iv);
    if (st == CLF_OK)
        *(long long *)value_at(c, f->off) = iv;
    return st;
}

/* model.layers: both stacks */
static clf_status value_layers(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    long long iv = 0;
    clf_status st = parse_integer(c, v, key, f->imin, f->imax, &iv);
    if (st == CLF_OK)
        c->cfg->model.encoder_layers = c->cfg->model.decoder_layers = (int)iv;
    return st;
}

static clf_status value_float(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    float fv = 0.0f;
    clf_status st = parse_float(c, v, key, f, &fv);
    if (st == CLF_OK)
        *(float *)value_at(c, f->off) = fv;
    return st;
}

static clf_status value_bool(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    char buf[96];
    int b = bool_value(v);
    if (b < 0)
        return clf_cfg_fail_at(c, v->start_mark, key, "expected true or false, got %s",
                               clf_cfg_describe(v, buf, sizeof buf));
    *(int *)value_at(c, f->off) = b;
    return CLF_OK;
}

/* model.final_norm: auto, true or false */
static clf_status value_final_norm(parse_ctx *c, const yaml_node_t *v, const field *f,
                                   const char *key)
{
    char buf[96];
    (void)f;
    if (clf_cfg_is_plain(v) && !strcmp(clf_cfg_scalar_text(v), "auto")) {
        c->cfg->model.final_norm_auto = 1;
        return CLF_OK;
    }
    int b = bool_value(v);
    if (b < 0)
        return clf_cfg_fail_at(c, v->start_mark, key, "expected auto, true or false, got %s",
                               clf_cfg_describe(v, buf, sizeof buf));
    c->cfg->model.final_norm_auto = 0;
    c->cfg->model.final_norm = b;
    return CLF_OK;
}

/* F_ENUM (its index) and F_NAME (the text): one of f->names */
static clf_status value_name(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    char buf[96];
    if (v->type != YAML_SCALAR_NODE || clf_cfg_is_null(v)) {
        char list[256];
        clf_cfg_join_names(f->names, list, sizeof list);
        return clf_cfg_fail_at(c, v->start_mark, key, "expected %s, got %s", list,
                               clf_cfg_describe(v, buf, sizeof buf));
    }
    for (int i = 0; f->names[i]; i++) {
        if (strcmp(clf_cfg_scalar_text(v), f->names[i]))
            continue;
        if (f->kind == F_NAME)
            return clf_cfg_parse_string(c, v, key, 0, value_at(c, f->off), f->size);
        *(int *)value_at(c, f->off) = i;
        return CLF_OK;
    }
    return fail_unknown_name(c, v, key, f->noun, f->names);
}

static clf_status value_path(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    return clf_cfg_parse_string(c, v, key, 1, value_at(c, f->off), f->size);
}

/* backend.device: an index >= 0 or a name substring */
static clf_status value_device(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    long long iv = 0;
    if (clf_cfg_is_plain(v) && text_to_llong(clf_cfg_scalar_text(v), &iv) && iv < 0)
        return clf_cfg_fail_at(c, v->start_mark, key,
                               "a device index must be >= 0, got %lld (or give a name substring)",
                               iv);
    return clf_cfg_parse_string(c, v, key, 1, value_at(c, f->off), f->size);
}

/* F_EMBED_SCALE and F_AUTO_FLOAT: a word for a value computed later (stored as 0 / -1), or
 * a number */
static clf_status value_word_or_float(parse_ctx *c, const yaml_node_t *v, const field *f,
                                      const char *key)
{
    char buf[96];
    const int is_auto = f->kind == F_AUTO_FLOAT;
    const char *word = is_auto ? "auto" : "sqrt_d_model";
    if (clf_cfg_is_plain(v) && !strcmp(clf_cfg_scalar_text(v), word)) {
        *(float *)value_at(c, f->off) = is_auto ? -1.0f : 0.0f;
        return CLF_OK;
    }
    if (!clf_cfg_is_plain(v) || !*clf_cfg_scalar_text(v) ||
        strspn(clf_cfg_scalar_text(v), "0123456789.eE+-") != strlen(clf_cfg_scalar_text(v)))
        return clf_cfg_fail_at(c, v->start_mark, key, "expected %s or a number %s, got %s", word,
                               is_auto ? "in [0, 100]" : "> 0",
                               clf_cfg_describe(v, buf, sizeof buf));
    return value_float(c, v, f, key);
}

/* model.banned_ids */
static clf_status value_id_list(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    const yaml_node_item_t *items;
    long count;
    long long iv = 0;
    clf_status st = clf_cfg_sequence(c, v, key, "a list of ids like [58100]", &items, &count);
    if (st != CLF_OK)
        return st;
    if (count > CLF_BANNED_IDS_MAX)
        return clf_cfg_fail_at(c, v->start_mark, key, "at most %d ids, got %ld", CLF_BANNED_IDS_MAX,
                               count);
    clf_model_config *m = &c->cfg->model;
    for (long i = 0; i < count; i++) {
        char item_key[CFG_ITEM_KEY_MAX];
        const yaml_node_t *item = clf_cfg_item(c, items, i, key, item_key);
        if ((st = parse_integer(c, item, item_key, 0, f->imax, &iv)) != CLF_OK)
            return st;
        m->banned_ids[i] = (int)iv;
    }
    m->n_banned_ids = (int)count;
    return CLF_OK;
}

/* languages.source / languages.target: a list of language codes (BCP 47 like: letters,
 * digits, '-' and '_'), or one code alone */
static clf_status value_languages(parse_ctx *c, const yaml_node_t *v, const field *f,
                                  const char *key)
{
    char(*codes)[CLF_LANGUAGE_CODE_MAX] = value_at(c, f->off);
    int *n = value_at(c, f->off2);
    const yaml_node_item_t *items = NULL;
    long count = 1;
    clf_status st;
    if (v->type != YAML_SCALAR_NODE &&
        (st = clf_cfg_sequence(c, v, key, "a list of language codes like [en, de]", &items,
                               &count)) != CLF_OK)
        return st;
    if (count > CLF_LANGUAGES_MAX)
        return clf_cfg_fail_at(c, v->start_mark, key, "at most %d languages, got %ld",
                               CLF_LANGUAGES_MAX, count);
    for (long i = 0; i < count; i++) {
        char item_key[CFG_ITEM_KEY_MAX];
        const yaml_node_t *item = items ? clf_cfg_item(c, items, i, key, item_key) : v;
        if (!items)
            snprintf(item_key, sizeof item_key, "%s", key);
        if ((st = clf_cfg_parse_string(c, item, item_key, 0, codes[i], CLF_LANGUAGE_CODE_MAX)) !=
            CLF_OK)
            return st;
        const size_t len = strlen(codes[i]);
        if (len == 0 || strspn(codes[i], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_") != len)
            return clf_cfg_fail_at(c, item->start_mark, item_key,
                                   "expected a language code like en or pt-BR (letters, digits, "
                                   "'-', '_'), got '%s'",
                                   codes[i]);
    }
    *n = (int)count;
    return CLF_OK;
}

/* train.optimizer.betas: [beta1, beta2] */
static clf_status value_betas(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    const yaml_node_item_t *items;
    long count;
    clf_status st =
        clf_cfg_sequence(c, v, key, "two numbers [beta1, beta2] like [0.9, 0.98]", &items, &count);
    if (st != CLF_OK)
        return st;
    if (count != 2)
        return clf_cfg_fail_at(c, v->start_mark, key,
                               "expected two numbers [beta1, beta2], got %ld of them", count);
    float *dst[2] = {&c->cfg->train.beta1, &c->cfg->train.beta2};
    for (int i = 0; i < 2; i++) {
        char item_key[CFG_ITEM_KEY_MAX];
        const yaml_node_t *item = clf_cfg_item(c, items, i, key, item_key);
        if ((st = parse_float(c, item, item_key, f, dst[i])) != CLF_OK)
            return st;
    }
    return CLF_OK;
}

/* `train: file.tsv` (source<TAB>target lines) or `train: [src.txt, tgt.txt]` */
static clf_status value_data(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    char *paths[2] = {value_at(c, f->off), value_at(c, f->off2)};
    if (v->type != YAML_SEQUENCE_NODE) {
        memset(paths[1], 0, f->size);
        return clf_cfg_parse_string(c, v, key, 1, paths[0], f->size);
    }
    const yaml_node_item_t *items;
    long count;
    clf_status st = clf_cfg_sequence(c, v, key, "a list", &items, &count);
    if (st != CLF_OK)
        return st; /* cannot fail: v is a sequence */
    if (count != 2)
        return clf_cfg_fail_at(c, v->start_mark, key,
                               "expected a TSV file or two line-aligned files [source, target], "
                               "got %ld file%s",
                               count, count == 1 ? "" : "s");
    for (int i = 0; i < 2; i++) {
        char item_key[CFG_ITEM_KEY_MAX];
        const yaml_node_t *item = clf_cfg_item(c, items, i, key, item_key);
        if ((st = clf_cfg_parse_string(c, item, item_key, 0, paths[i], f->size)) != CLF_OK)
            return st;
        if (!paths[i][0])
            return clf_cfg_fail_at(c, item->start_mark, item_key, "expected a file name, got ''");
    }
    return CLF_OK;
}

static clf_config_pos pos_of(yaml_mark_t m)
{
    return (clf_config_pos){(int)m.line + 1, (int)m.column + 1};
}

/* model.activation / model.layernorm.style: a built-in name (its enum index), or the name
 * of an op plugin, recorded with its position for clf_config_resolve_plugins (the
 * `plugins:` list may come after the model, and parsing loads nothing). */
static clf_status value_opname(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    char buf[96];
    clf_model_config *m = &c->cfg->model;
    const int norm = f->flag == OPNAME_NORM;
    char *slot = norm ? m->norm_op_name : m->activation_op_name;
    if (!clf_cfg_is_plain(v)) {
        char list[256];
        clf_cfg_join_names(f->names, list, sizeof list);
        return clf_cfg_fail_at(c, v->start_mark, key, "expected %s or an op plugin's name, got %s",
                               list, clf_cfg_describe(v, buf, sizeof buf));
    }
    const char *name = clf_cfg_scalar_text(v);
    memset(slot, 0, CLF_PLUGIN_NAME_MAX);
    for (int i = 0; f->names[i]; i++) {
        if (!strcmp(name, f->names[i])) {
            *(int *)value_at(c, f->off) = i;
            return CLF_OK;
        }
    }
    if (strlen(name) >= CLF_PLUGIN_NAME_MAX)
        return clf_cfg_fail_at(c, v->start_mark, key, "'%.40s...' is too long for an op name",
                               name);
    /* a line break or other control byte in a plain scalar would break the dump's YAML;
     * no op can be named so (clformer/plugin.h), and the name is not echoed */
    for (const char *p = name; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return clf_cfg_fail_at(c, v->start_mark, key,
                                   "an op name cannot hold a control character (byte 0x%02x at "
                                   "%d)",
                                   (unsigned char)*p, (int)(p - name));
    memcpy(slot, name, strlen(name));
    if (norm) {
        c->cfg->norm_pos = pos_of(v->start_mark);
    } else {
        c->cfg->activation_pos = pos_of(v->start_mark);
        m->activation = CLF_ACT_PLUGIN;
    }
    return CLF_OK;
}

/* The top-level `plugins:` list: each entry (a path relative to the YAML's directory, or a
 * bare name) kept as written, with its position, for clf_config_resolve_plugins. */
static clf_status value_plugins(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    clf_config *cfg = c->cfg;
    (void)f;
    if (clf_cfg_is_null(v))
        return CLF_OK;
    const yaml_node_item_t *items;
    long count;
    clf_status st =
        clf_cfg_sequence(c, v, key, "a list of plugin paths like [./x.so]", &items, &count);
    if (st != CLF_OK)
        return st;
    if (count > CLF_CONFIG_PLUGINS_MAX)
        return clf_cfg_fail_at(c, v->start_mark, key, "%ld plugins, at most %d", count,
                               CLF_CONFIG_PLUGINS_MAX);
    for (long i = 0; i < count; i++) {
        char item_key[CFG_ITEM_KEY_MAX];
        const yaml_node_t *item = clf_cfg_item(c, items, i, key, item_key);
        char *entry = cfg->plugins[cfg->n_plugins];
        if ((st = clf_cfg_parse_string(c, item, item_key, 0, entry, CLF_PATH_MAX)) != CLF_OK)
            return st;
        if (!entry[0])
            return clf_cfg_fail_at(c, item->start_mark, item_key,
                                   "expected a plugin path or name, got ''");
        cfg->plugin_pos[cfg->n_plugins++] = pos_of(item->start_mark);
    }
    return CLF_OK;
}

/* model.dropout: a rate for the paper's two sites, or a mapping of sites */
static clf_status value_dropout(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    float fv = 0.0f;
    if (v->type == YAML_MAPPING_NODE)
        return clf_cfg_parse_map(c, v, f->sub, key);
    clf_status st = parse_float(c, v, key, f, &fv);
    if (st == CLF_OK)
        c->cfg->model.dropout = c->cfg->model.dropout_embedding = fv;
    return st;
}

static clf_status value_map(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    if (f->flag)
        *(int *)value_at(c, f->off) = 1;
    if (clf_cfg_is_null(v)) /* `train:` with nothing under it: all defaults */
        return CLF_OK;
    return clf_cfg_parse_map(c, v, f->sub, key);
}

typedef clf_status (*value_parser)(parse_ctx *c, const yaml_node_t *v, const field *f,
                                   const char *key);

static const value_parser value_parsers[] = {
    [F_INT] = value_int,         [F_LLONG] = value_llong,
    [F_FLOAT] = value_float,     [F_BOOL] = value_bool,
    [F_ENUM] = value_name,       [F_NAME] = value_name,
    [F_PATH] = value_path,       [F_DEVICE] = value_device,
    [F_LAYERS] = value_layers,   [F_FINAL_NORM] = value_final_norm,
    [F_BETAS] = value_betas,     [F_DATA] = value_data,
    [F_OPNAME] = value_opname,   [F_PLUGINS] = value_plugins,
    [F_DROPOUT] = value_dropout, [F_EMBED_SCALE] = value_word_or_float,
    [F_ID_LIST] = value_id_list, [F_AUTO_FLOAT] = value_word_or_float,
    [F_MAP] = value_map,         [F_LANGUAGES] = value_languages,
};

static clf_status parse_value(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    const size_t n = sizeof value_parsers / sizeof value_parsers[0];
    if ((size_t)f->kind < n && value_parsers[f->kind])
        return value_parsers[f->kind](c, v, f, key);
    return clf_error(CLF_ERR_INTERNAL, "config: field kind %d not handled", (int)f->kind);
}

static clf_status fail_unknown_key(const parse_ctx *c, const yaml_node_t *k, const char *key,
                                   const field *fields)
{
    const char *near = closest(clf_cfg_scalar_text(k), &fields[0].key, sizeof *fields);
    if (near)
        return clf_cfg_fail_at(c, k->start_mark, key, "unknown key '%s' (did you mean '%s'?)",
                               clf_cfg_scalar_text(k), near);
    char list[512];
    size_t used = 0;
    list[0] = '\0';
    for (const field *f = fields; f->key && used < sizeof list; f++) {
        int n = snprintf(list + used, sizeof list - used, "%s%s", f == fields ? "" : ", ", f->key);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return clf_cfg_fail_at(c, k->start_mark, key, "unknown key '%s' (valid keys: %s)",
                           clf_cfg_scalar_text(k), list);
}

/* Walks a mapping node against fields; prefix is the key path of the mapping ("" at the
 * top, "train.optimizer" below). */
clf_status clf_cfg_parse_map(parse_ctx *c, const yaml_node_t *map, const field *fields,
                             const char *prefix)
{
    char buf[96], key[CFG_KEY_MAX];
    const char *where = *prefix ? prefix : NULL;
    if (map->type != YAML_MAPPING_NODE)
        return clf_cfg_fail_at(c, map->start_mark, where, "expected a mapping, got %s",
                               clf_cfg_describe(map, buf, sizeof buf));
    yaml_node_pair_t *start = map->data.mapping.pairs.start, *top = map->data.mapping.pairs.top;
    for (yaml_node_pair_t *p = start; p < top; p++) {
        const yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        const yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return clf_cfg_fail_at(c, k->start_mark, where, "expected a key name, got %s",
                                   clf_cfg_describe(k, buf, sizeof buf));
        const char *name = clf_cfg_scalar_text(k);
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", name);
        for (yaml_node_pair_t *q = start; q < p; q++) {
            const yaml_node_t *kq = yaml_document_get_node(c->doc, q->key);
            if (kq->type == YAML_SCALAR_NODE && !strcmp(clf_cfg_scalar_text(kq), name))
                return clf_cfg_fail_at(c, k->start_mark, key, "duplicate key (first at line %zu)",
                                       kq->start_mark.line + 1);
        }
        const field *f = fields;
        while (f->key && strcmp(f->key, name))
            f++;
        if (!f->key)
            return fail_unknown_key(c, k, key, fields);
        /* an empty value has no position of its own: point at its key */
        note_seen(c, key, clf_cfg_is_null(v) ? k->start_mark : v->start_mark);
        clf_status st = parse_value(c, v, f, key);
        if (st != CLF_OK)
            return st;
    }
    return CLF_OK;
}

/* libyaml's complaint, at its position. */
clf_status clf_cfg_fail_yaml(const parse_ctx *c, const yaml_parser_t *p, const char *text,
                             size_t len)
{
    if (p->error == YAML_MEMORY_ERROR)
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory while parsing", c->name);
    const char *problem = p->problem ? p->problem : "syntax error";
    if (p->error == YAML_READER_ERROR) {
        /* the reader reports a byte offset; count lines up to it */
        yaml_mark_t m = {0, 0, 0};
        for (size_t i = 0; i < p->problem_offset && i < len; i++) {
            if (text[i] == '\n')
                m.line++, m.column = 0;
            else
                m.column++;
        }
        if (p->problem_value >= 0)
            return clf_cfg_fail_at(c, m, NULL, "invalid YAML: %s (byte 0x%02x)", problem,
                                   (unsigned)p->problem_value);
        return clf_cfg_fail_at(c, m, NULL, "invalid YAML: %s", problem);
    }
    if (p->context)
        return clf_cfg_fail_at(c, p->problem_mark, NULL,
                               "invalid YAML: %s (%s at line %zu, column %zu)", problem, p->context,
                               p->context_mark.line + 1, p->context_mark.column + 1);
    return clf_cfg_fail_at(c, p->problem_mark, NULL, "invalid YAML: %s", problem);
}

/* ---- size of the document ---------------------------------------------------------- */

typedef struct expand_ctx {
    const parse_ctx *c;
    size_t *size;           /* [node id] expanded size once known, else 0 */
    unsigned char *walking; /* [node id] 1 while its children are being counted */
} expand_ctx;

/* Expanded size of node id (itself and, through aliases, all it contains) into *out; a
 * node reached again through an alias is counted again, from its memo. */
static clf_status expand(expand_ctx *e, int id, int depth, size_t *out)
{
    yaml_node_t *n = yaml_document_get_node(e->c->doc, id);
    *out = 0;
    if (!n)
        return CLF_OK;
    if (depth > CFG_DEPTH_MAX)
        return clf_cfg_fail_at(e->c, n->start_mark, NULL,
                               "nested deeper than the limit of %d levels", CFG_DEPTH_MAX);
    if (e->walking[id])
        return clf_cfg_fail_at(e->c, n->start_mark, NULL,
                               "an alias inside the node it names (a recursive alias)");
    size_t size = e->size[id];
    if (size == 0) {
        size = 1;
        e->walking[id] = 1;
        yaml_node_item_t *item = NULL, *item_end = NULL;
        yaml_node_pair_t *pair = NULL, *pair_end = NULL;
        if (n->type == YAML_SEQUENCE_NODE) {
            item = n->data.sequence.items.start;
            item_end = n->data.sequence.items.top;
        } else if (n->type == YAML_MAPPING_NODE) {
            pair = n->data.mapping.pairs.start;
            pair_end = n->data.mapping.pairs.top;
        }
        clf_status st = CLF_OK;
        for (; item && item < item_end && st == CLF_OK; item++) {
            size_t s = 0;
            st = expand(e, *item, depth + 1, &s);
            size += s;
        }
        for (; pair && pair < pair_end && st == CLF_OK; pair++) {
            size_t k = 0, v = 0;
            if ((st = expand(e, pair->key, depth + 1, &k)) == CLF_OK)
                st = expand(e, pair->value, depth + 1, &v);
            size += k + v;
        }
        e->walking[id] = 0;
        if (st != CLF_OK)
            return st;
        if (size > CFG_NODES_MAX)
            size = CFG_NODES_MAX + 1; /* saturated: sums of these cannot overflow */
        e->size[id] = size;
    }
    if (size > CFG_NODES_MAX)
        return clf_cfg_fail_at(e->c, n->start_mark, NULL,
                               "expands to more than the limit of %d nodes (aliases count as "
                               "the nodes they stand for)",
                               CFG_NODES_MAX);
    *out = size;
    return CLF_OK;
}

clf_status clf_cfg_check_size(const parse_ctx *c)
{
    const size_t n = (size_t)(c->doc->nodes.top - c->doc->nodes.start);
    expand_ctx e = {.c = c, .size = calloc(n + 1, sizeof *e.size), .walking = calloc(n + 1, 1)};
    clf_status st;
    size_t total = 0;
    if (!e.size || !e.walking)
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory", c->name);
    else
        st = expand(&e, 1, 1, &total); /* node 1 is the root */
    free(e.size);
    free(e.walking);
    return st;
}
