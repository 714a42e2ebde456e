/* YAML -> validated clf_config (libyaml document API); the way back is config_dump.c.
 *
 * The keys of each section are described by a table of `field`s (name, kind, where the
 * value lives in clf_config, its range or valid names); parse_map walks a mapping node
 * against such a table. Every error is one line "<name>:<line>:<col>: <key.path>: <why>"
 * with the 1-based position of the offending node (the key for unknown or duplicate keys,
 * the value otherwise). Checks that involve several keys (d_model % heads, required keys,
 * layers vs encoder_layers, ...) run after the walk in resolve(), which finds the
 * positions of the keys it names in the list of keys seen.
 *
 * train.data.train and .valid are a TSV path or a [source, target] pair of paths.
 * Paths (train.data, train.vocab, train.init, train.checkpoint.dir) are stored as written:
 * a relative path is relative to the working directory of the process, not to the YAML. */
#include "clformer/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "runtime/search_path.h"

/* Largest vocabulary, length or width accepted: ids stay exact in float (2^24) and any
 * single size fits an int with room to spare. */
#define CFG_SIZE_MAX (1 << 24)
/* Layers per stack: far beyond any real model, small enough to catch a typo like 60000. */
#define CFG_LAYERS_MAX 1024
/* A config is a few hundred bytes; refuse to slurp a mistaken multi-gigabyte file. */
#define CFG_FILE_MAX (16 << 20)
/* The tables below have ~60 keys in all; each may be seen once. */
#define CFG_SEEN_MAX 128
#define CFG_KEY_MAX  96
/* Scalars quoted in messages are cut to this many characters. */
#define CFG_EXCERPT_MAX 40

typedef enum field_kind {
    F_INT,        /* int, range [imin, imax] */
    F_LLONG,      /* long long, range [imin, imax] */
    F_FLOAT,      /* float, range fmin..fmax, open ends where *_open */
    F_BOOL,       /* int 0/1 from true/false/yes/no */
    F_ENUM,       /* int index into names */
    F_NAME,       /* char[size], one of names */
    F_PATH,       /* char[size]; null = "" */
    F_DEVICE,     /* char[size]; an integer >= 0 or a name substring; null = "" */
    F_LAYERS,     /* sets model.encoder_layers and model.decoder_layers */
    F_FINAL_NORM, /* auto | true | false */
    F_BETAS,      /* [beta1, beta2], each in fmin..fmax */
    F_DATA,       /* a TSV path into off, or [source, target] paths into off and off2 */
    F_OPNAME,     /* int index into names at off, or an op plugin's name (flag: OPNAME_*) */
    F_PLUGINS,    /* the top-level plugins: list, loaded while parsing */
    F_DROPOUT,    /* model.dropout: a rate for the paper's sites, or a map of sites (sub) */
    F_MAP         /* a nested mapping with keys `sub`; flag: set the int at off to 1 */
} field_kind;

typedef struct field {
    const char *key;
    field_kind kind;
    size_t off;  /* where the value lives in clf_config */
    size_t off2; /* F_DATA: where the target file's path goes */
    size_t size; /* char arrays: capacity */
    long long imin, imax;
    double fmin, fmax;
    int fmin_open, fmax_open;
    const char *noun;         /* F_ENUM/F_NAME: "norm" in "unknown norm 'x'" */
    const char *const *names; /* F_ENUM/F_NAME: valid values, NULL-terminated */
    const struct field *sub;  /* F_MAP: its keys, ending with {NULL} */
    int flag; /* F_MAP: 1 = the section has a `present` int at off; F_OPNAME: OPNAME_* */
} field;

// clang-format off
#define AT(m)     offsetof(clf_config, m)
#define SIZEOF(m) sizeof(((clf_config *)0)->m)
#define INT(k, m, lo, hi)   {.key = k, .kind = F_INT, .off = AT(m), .imin = lo, .imax = hi}
#define LLONG(k, m, lo, hi) {.key = k, .kind = F_LLONG, .off = AT(m), .imin = lo, .imax = hi}
#define FLOAT(k, m, lo, lo_open, hi, hi_open)                                                      \
    {.key = k, .kind = F_FLOAT, .off = AT(m), .fmin = lo, .fmin_open = lo_open, .fmax = hi,        \
     .fmax_open = hi_open}
#define BOOL(k, m)             {.key = k, .kind = F_BOOL, .off = AT(m)}
#define ENUM(k, m, what, list) {.key = k, .kind = F_ENUM, .off = AT(m), .noun = what, .names = list}
#define STRING(k, kind_, m)    {.key = k, .kind = kind_, .off = AT(m), .size = SIZEOF(m)}
#define MAP(k, fields)         {.key = k, .kind = F_MAP, .sub = fields}
#define DATA(k, m, m2)                                                                             \
    {.key = k, .kind = F_DATA, .off = AT(m), .off2 = AT(m2), .size = SIZEOF(m)}
#define END                    {.key = NULL}
// clang-format on

/* Index = enum value. */
static const char *const norm_names[] = {"pre", "post", "branch", NULL};
static const char *const ln_names[] = {"tutorial", "standard", NULL};
static const char *const act_names[] = {"relu", NULL};
static const char *const output_names[] = {"logits", "log_softmax", NULL};
static const char *const positional_names[] = {"sinusoidal", "learned", NULL};
static const char *const tie_names[] = {"none", "decoder", "all", NULL};
static const char *const backend_names[] = {"cpu", "opencl", "auto", NULL};
static const char *const opt_names[] = {"adam", "adamw", NULL};
static const char *const sched_names[] = {"constant", "noam", "inverse_sqrt", NULL};

/* F_OPNAME: which plugin-op slot a name that is not built in goes to */
enum { OPNAME_ACTIVATION = 1, OPNAME_NORM = 2 };

static const field layernorm_fields[] = {
    {.key = "style",
     .kind = F_OPNAME,
     .off = AT(model.ln_style),
     .noun = "style",
     .names = ln_names,
     .flag = OPNAME_NORM},
    FLOAT("eps", model.ln_eps, 0.0, 1, HUGE_VAL, 0),
    END,
};

static const field dropout_fields[] = {
    FLOAT("residual", model.dropout, 0.0, 0, 1.0, 1),
    FLOAT("embedding", model.dropout_embedding, 0.0, 0, 1.0, 1),
    FLOAT("attention", model.dropout_attention, 0.0, 0, 1.0, 1),
    FLOAT("ffn", model.dropout_ffn, 0.0, 0, 1.0, 1),
    END,
};

static const field model_fields[] = {
    INT("src_vocab", model.src_vocab, 1, CFG_SIZE_MAX),
    INT("tgt_vocab", model.tgt_vocab, 1, CFG_SIZE_MAX),
    INT("max_len", model.max_len, 1, CFG_SIZE_MAX),
    INT("d_model", model.d_model, 1, CFG_SIZE_MAX),
    {.key = "layers", .kind = F_LAYERS, .imin = 1, .imax = CFG_LAYERS_MAX},
    INT("encoder_layers", model.encoder_layers, 1, CFG_LAYERS_MAX),
    INT("decoder_layers", model.decoder_layers, 1, CFG_LAYERS_MAX),
    INT("heads", model.heads, 1, CFG_SIZE_MAX),
    INT("d_ff", model.d_ff, 1, CFG_SIZE_MAX),
    ENUM("norm", model.norm, "norm", norm_names),
    {.key = "final_norm", .kind = F_FINAL_NORM},
    MAP("layernorm", layernorm_fields),
    BOOL("attention_bias", model.attention_bias),
    {.key = "activation",
     .kind = F_OPNAME,
     .off = AT(model.activation),
     .noun = "activation",
     .names = act_names,
     .flag = OPNAME_ACTIVATION},
    ENUM("output", model.output, "output", output_names),
    {.key = "dropout",
     .kind = F_DROPOUT,
     .off = AT(model.dropout),
     .fmin = 0.0,
     .fmax = 1.0,
     .fmax_open = 1,
     .sub = dropout_fields},
    INT("pad_id", model.pad_id, 0, CFG_SIZE_MAX),
    ENUM("positional", model.positional, "positional encoding", positional_names),
    ENUM("tie_embeddings", model.tie_embeddings, "tie_embeddings", tie_names),
    END,
};

static const field backend_fields[] = {
    {.key = "name",
     .kind = F_NAME,
     .off = AT(backend.name),
     .size = SIZEOF(backend.name),
     .noun = "backend",
     .names = backend_names},
    STRING("device", F_DEVICE, backend.device),
    INT("threads", backend.threads, 0, INT_MAX),
    END,
};

static const field data_fields[] = {
    DATA("train", train.data_train, train.data_train_tgt),
    DATA("valid", train.data_valid, train.data_valid_tgt),
    END,
};

static const field vocab_fields[] = {
    STRING("src", F_PATH, train.vocab_src),
    STRING("tgt", F_PATH, train.vocab_tgt),
    INT("min_frequency", train.min_frequency, 1, INT_MAX),
    END,
};

static const field optimizer_fields[] = {
    ENUM("name", train.optimizer, "optimizer", opt_names),
    FLOAT("lr", train.lr, 0.0, 1, HUGE_VAL, 0),
    {.key = "betas", .kind = F_BETAS, .fmin = 0.0, .fmax = 1.0, .fmax_open = 1},
    FLOAT("eps", train.adam_eps, 0.0, 1, HUGE_VAL, 0),
    FLOAT("weight_decay", train.weight_decay, 0.0, 0, HUGE_VAL, 0),
    END,
};

static const field schedule_fields[] = {
    ENUM("name", train.schedule, "schedule", sched_names),
    INT("warmup", train.warmup, 0, INT_MAX),
    END,
};

static const field checkpoint_fields[] = {
    STRING("dir", F_PATH, train.checkpoint_dir),
    INT("every", train.checkpoint_every, 0, INT_MAX),
    INT("keep", train.checkpoint_keep, 1, INT_MAX),
    END,
};

static const field train_fields[] = {
    MAP("data", data_fields),
    MAP("vocab", vocab_fields),
    STRING("init", F_PATH, train.init),
    LLONG("seed", train.seed, 0, LLONG_MAX),
    BOOL("shuffle", train.shuffle),
    INT("batch_size", train.batch_size, 1, INT_MAX),
    INT("batch_tokens", train.batch_tokens, 0, INT_MAX),
    INT("max_len", train.max_len, 1, CFG_SIZE_MAX),
    LLONG("steps", train.steps, 0, LLONG_MAX),
    INT("epochs", train.epochs, 0, INT_MAX),
    INT("accumulate", train.accumulate, 1, INT_MAX),
    MAP("optimizer", optimizer_fields),
    MAP("schedule", schedule_fields),
    FLOAT("label_smoothing", train.label_smoothing, 0.0, 0, 1.0, 1),
    FLOAT("clip_norm", train.clip_norm, 0.0, 0, HUGE_VAL, 0),
    INT("log_every", train.log_every, 1, INT_MAX),
    INT("validate_every", train.validate_every, 0, INT_MAX),
    MAP("checkpoint", checkpoint_fields),
    END,
};

static const field top_fields[] = {
    {.key = "plugins", .kind = F_PLUGINS},
    MAP("model", model_fields),
    MAP("backend", backend_fields),
    {.key = "train", .kind = F_MAP, .sub = train_fields, .off = AT(train.present), .flag = 1},
    END,
};

typedef struct seen_key {
    char key[CFG_KEY_MAX]; /* "model.heads" */
    yaml_mark_t mark;      /* of its value */
} seen_key;

typedef struct parse_ctx {
    const char *name; /* the path, for messages */
    yaml_document_t *doc;
    clf_config *cfg;
    yaml_mark_t root_mark;
    seen_key seen[CFG_SEEN_MAX];
    int n_seen;
    const char *plugin_dir; /* searched first for op plugins; "" = the default path only */
    /* names of model.activation / model.layernorm.style that are not built in, resolved
     * against the plugins once the whole file is read */
    char activation_op[CLF_PLUGIN_NAME_MAX], norm_op[CLF_PLUGIN_NAME_MAX];
} parse_ctx;

/* ---- messages ---------------------------------------------------------------------- */

static clf_status fail_at(const parse_ctx *c, yaml_mark_t m, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static clf_status fail_at(const parse_ctx *c, yaml_mark_t m, const char *key, const char *fmt, ...)
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

static const char *scalar_text(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

static int is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *s = scalar_text(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

/* What a node is, for "expected X, got <this>": 'abc', a mapping, nothing, ... */
static const char *describe(const yaml_node_t *n, char *buf, size_t size)
{
    if (n->type == YAML_MAPPING_NODE)
        return "a mapping";
    if (n->type == YAML_SEQUENCE_NODE)
        return "a sequence";
    if (n->type != YAML_SCALAR_NODE)
        return "nothing";
    if (is_null(n))
        return *scalar_text(n) ? "null" : "nothing";
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

/* "a, b or c" */
static void join_names(const char *const *names, char *buf, size_t size)
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
    join_names(names, list, sizeof list);
    int count = 0;
    while (names[count])
        count++;
    /* with one or two valid names the list says it all */
    const char *near = count > 2 ? closest(scalar_text(n), names, sizeof *names) : NULL;
    if (near)
        return fail_at(c, n->start_mark, key, "unknown %s '%s' (did you mean '%s'? expected %s)",
                       noun, scalar_text(n), near, list);
    return fail_at(c, n->start_mark, key, "unknown %s '%s' (expected %s)", noun, scalar_text(n),
                   list);
}

/* ---- scalars ----------------------------------------------------------------------- */

static int is_plain_value(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           !is_null(n);
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
    if (!is_plain_value(n))
        return fail_at(c, n->start_mark, key, "expected an integer, got %s",
                       describe(n, buf, sizeof buf));
    if (!text_to_llong(scalar_text(n), &v)) {
        const char *s = scalar_text(n);
        int looks_integral = 1;
        for (const char *q = s + (*s == '-'); *q; q++)
            looks_integral &= isdigit((unsigned char)*q) != 0;
        if (looks_integral && *s)
            return fail_at(c, n->start_mark, key, "integer %s is out of range", s);
        return fail_at(c, n->start_mark, key, "expected an integer, got %s",
                       describe(n, buf, sizeof buf));
    }
    if (v < lo) {
        if (lo == 1)
            return fail_at(c, n->start_mark, key, "must be > 0, got %lld", v);
        return fail_at(c, n->start_mark, key, "must be >= %lld, got %lld", lo, v);
    }
    if (v > hi)
        return fail_at(c, n->start_mark, key, "must be <= %lld, got %lld", hi, v);
    *out = v;
    return CLF_OK;
}

static clf_status parse_float(const parse_ctx *c, const yaml_node_t *n, const char *key,
                              const field *f, float *out)
{
    char buf[96];
    if (!is_plain_value(n))
        return fail_at(c, n->start_mark, key, "expected a number, got %s",
                       describe(n, buf, sizeof buf));
    /* strtod alone would take "inf", "nan", hex floats and leading blanks */
    const char *s = scalar_text(n);
    int digits = 0, ok = 1;
    for (const char *q = s; *q; q++) {
        digits += isdigit((unsigned char)*q) != 0;
        ok &= isdigit((unsigned char)*q) || strchr(".eE+-", *q) != NULL;
    }
    char *end = NULL;
    double d = ok && digits ? strtod(s, &end) : 0.0;
    if (!ok || !digits || !end || *end)
        return fail_at(c, n->start_mark, key, "expected a number, got %s",
                       describe(n, buf, sizeof buf));
    float v = (float)d;
    if (!isfinite(v))
        return fail_at(c, n->start_mark, key, "number %s is out of range", s);
    int low = f->fmin_open ? !(v > f->fmin) : !(v >= f->fmin);
    int high = f->fmax_open ? !(v < f->fmax) : !(v <= f->fmax);
    if (low || high) {
        if (isfinite(f->fmax))
            return fail_at(c, n->start_mark, key, "must be in %c%g, %g%c, got %s",
                           f->fmin_open ? '(' : '[', f->fmin, f->fmax, f->fmax_open ? ')' : ']', s);
        return fail_at(c, n->start_mark, key, "must be %s %g, got %s",
                       f->fmin_open ? ">" : ">=", f->fmin, s);
    }
    *out = v;
    return CLF_OK;
}

/* true/false/yes/no, any case; -1 otherwise */
static int bool_value(const yaml_node_t *n)
{
    if (!is_plain_value(n))
        return -1;
    const char *s = scalar_text(n);
    if (!strcasecmp(s, "true") || !strcasecmp(s, "yes"))
        return 1;
    if (!strcasecmp(s, "false") || !strcasecmp(s, "no"))
        return 0;
    return -1;
}

/* A string scalar into char[size]; null gives "" when nullable. */
static clf_status parse_string(const parse_ctx *c, const yaml_node_t *n, const char *key,
                               int nullable, char *dst, size_t size)
{
    char buf[96];
    if (nullable && is_null(n)) {
        memset(dst, 0, size);
        return CLF_OK;
    }
    if (n->type != YAML_SCALAR_NODE || is_null(n))
        return fail_at(c, n->start_mark, key, "expected a string, got %s",
                       describe(n, buf, sizeof buf));
    size_t len = n->data.scalar.length;
    if (strlen(scalar_text(n)) != len)
        return fail_at(c, n->start_mark, key, "contains a NUL character");
    if (len >= size)
        return fail_at(c, n->start_mark, key, "too long (%zu characters, at most %zu)", len,
                       size - 1);
    memset(dst, 0, size); /* zero the tail too: equal configs are equal bytes */
    memcpy(dst, scalar_text(n), len);
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

static const yaml_mark_t *seen_mark(const parse_ctx *c, const char *key)
{
    for (int i = 0; i < c->n_seen; i++)
        if (!strcmp(c->seen[i].key, key))
            return &c->seen[i].mark;
    return NULL;
}

/* The mark of the first of the keys that was seen, else the root's. */
static yaml_mark_t mark_of(const parse_ctx *c, const char *k1, const char *k2, const char *k3)
{
    const char *keys[3] = {k1, k2, k3};
    for (int i = 0; i < 3; i++) {
        const yaml_mark_t *m = keys[i] ? seen_mark(c, keys[i]) : NULL;
        if (m)
            return *m;
    }
    return c->root_mark;
}

static clf_status parse_map(parse_ctx *c, const yaml_node_t *map, const field *fields,
                            const char *prefix);

/* model.activation / model.layernorm.style: a built-in name (its enum index), or a name
 * kept for an op plugin, resolved by resolve_plugin_ops() after the whole file is read
 * (the `plugins:` list may come after the model). */
static clf_status parse_opname(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    char buf[96];
    char *slot = f->flag == OPNAME_NORM ? c->norm_op : c->activation_op;
    if (!is_plain_value(v)) {
        char list[256];
        join_names(f->names, list, sizeof list);
        return fail_at(c, v->start_mark, key, "expected %s or an op plugin's name, got %s", list,
                       describe(v, buf, sizeof buf));
    }
    const char *name = scalar_text(v);
    memset(slot, 0, CLF_PLUGIN_NAME_MAX);
    for (int i = 0; f->names[i]; i++) {
        if (!strcmp(name, f->names[i])) {
            *(int *)((char *)c->cfg + f->off) = i;
            return CLF_OK;
        }
    }
    if (strlen(name) >= CLF_PLUGIN_NAME_MAX)
        return fail_at(c, v->start_mark, key, "'%.40s...' is too long for an op name", name);
    memcpy(slot, name, strlen(name));
    return CLF_OK;
}

/* The directory part of the YAML's path ("." when it has none). */
static void yaml_dir(const parse_ctx *c, char *dir, size_t size)
{
    const char *slash = strrchr(c->name, '/');
    if (!slash || c->name[0] == '<')
        snprintf(dir, size, ".");
    else if (slash == c->name)
        snprintf(dir, size, "/");
    else
        snprintf(dir, size, "%.*s", (int)(slash - c->name), c->name);
}

/* One entry of `plugins:`: a path (relative to the YAML's directory) or a bare name
 * (clformer-plugin-<name>.so on the search path). Loads it; its absolute path goes to out. */
static clf_status load_listed_plugin(parse_ctx *c, const yaml_node_t *item, const char *key,
                                     char *out, size_t size)
{
    char text[CLF_PATH_MAX], path[CLF_PATH_MAX * 2 + 32], msg[1024];
    clf_status st = parse_string(c, item, key, 0, text, sizeof text);
    if (st != CLF_OK)
        return st;
    if (!text[0])
        return fail_at(c, item->start_mark, key, "expected a plugin path or name, got ''");
    if (!strchr(text, '/')) {
        char file[CLF_PATH_MAX + 32];
        snprintf(file, sizeof file, "clformer-plugin-%s.so", text);
        if (!clf_search_path_find(c->plugin_dir, file, path, sizeof path, NULL, 0))
            return fail_at(c, item->start_mark, key,
                           "no clformer-plugin-%s.so on the plugin search path (give a path "
                           "with a '/', or set --plugin-dir or CLF_PLUGIN_PATH)",
                           text);
    } else if (text[0] == '/') {
        snprintf(path, sizeof path, "%s", text);
    } else {
        char dir[CLF_PATH_MAX];
        yaml_dir(c, dir, sizeof dir);
        snprintf(path, sizeof path, "%s/%s", dir, text);
    }
    if ((st = clf_plugin_load_file(path, NULL)) != CLF_OK) {
        snprintf(msg, sizeof msg, "%s", clf_last_error());
        return fail_at(c, item->start_mark, key, "%s", msg);
    }
    char real[PATH_MAX];
    if (!realpath(path, real) || strlen(real) >= size)
        return fail_at(c, item->start_mark, key, "%s: cannot resolve the path", path);
    snprintf(out, size, "%s", real);
    return CLF_OK;
}

static clf_status parse_plugins(parse_ctx *c, const yaml_node_t *v, const char *key)
{
    char buf[96];
    clf_config *cfg = c->cfg;
    if (is_null(v))
        return CLF_OK;
    if (v->type != YAML_SEQUENCE_NODE)
        return fail_at(c, v->start_mark, key,
                       "expected a list of plugin paths like [./x.so], got %s",
                       describe(v, buf, sizeof buf));
    yaml_node_item_t *items = v->data.sequence.items.start;
    long count = v->data.sequence.items.top - items;
    if (count > CLF_CONFIG_PLUGINS_MAX)
        return fail_at(c, v->start_mark, key, "%ld plugins, at most %d", count,
                       CLF_CONFIG_PLUGINS_MAX);
    for (long i = 0; i < count; i++) {
        char item_key[CFG_KEY_MAX + 24];
        snprintf(item_key, sizeof item_key, "%s[%d]", key, (int)i);
        const yaml_node_t *item = yaml_document_get_node(c->doc, items[i]);
        clf_status st = load_listed_plugin(c, item, item_key, cfg->plugins[cfg->n_plugins],
                                           sizeof cfg->plugins[0]);
        if (st != CLF_OK)
            return st;
        cfg->n_plugins++;
    }
    return CLF_OK;
}

static clf_status parse_value(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    char buf[96];
    char *base = (char *)c->cfg;
    clf_status st = CLF_OK;
    long long iv = 0;
    float fv = 0.0f;
    int b;
    switch (f->kind) {
    case F_INT:
        if ((st = parse_integer(c, v, key, f->imin, f->imax, &iv)) == CLF_OK)
            *(int *)(base + f->off) = (int)iv;
        return st;
    case F_LLONG:
        if ((st = parse_integer(c, v, key, f->imin, f->imax, &iv)) == CLF_OK)
            *(long long *)(base + f->off) = iv;
        return st;
    case F_LAYERS:
        if ((st = parse_integer(c, v, key, f->imin, f->imax, &iv)) == CLF_OK)
            c->cfg->model.encoder_layers = c->cfg->model.decoder_layers = (int)iv;
        return st;
    case F_FLOAT:
        if ((st = parse_float(c, v, key, f, &fv)) == CLF_OK)
            *(float *)(base + f->off) = fv;
        return st;
    case F_BOOL:
        if ((b = bool_value(v)) < 0)
            return fail_at(c, v->start_mark, key, "expected true or false, got %s",
                           describe(v, buf, sizeof buf));
        *(int *)(base + f->off) = b;
        return CLF_OK;
    case F_FINAL_NORM:
        if (is_plain_value(v) && !strcmp(scalar_text(v), "auto")) {
            c->cfg->model.final_norm_auto = 1;
            return CLF_OK;
        }
        if ((b = bool_value(v)) < 0)
            return fail_at(c, v->start_mark, key, "expected auto, true or false, got %s",
                           describe(v, buf, sizeof buf));
        c->cfg->model.final_norm_auto = 0;
        c->cfg->model.final_norm = b;
        return CLF_OK;
    case F_ENUM:
    case F_NAME:
        if (v->type != YAML_SCALAR_NODE || is_null(v)) {
            char list[256];
            join_names(f->names, list, sizeof list);
            return fail_at(c, v->start_mark, key, "expected %s, got %s", list,
                           describe(v, buf, sizeof buf));
        }
        for (int i = 0; f->names[i]; i++) {
            if (!strcmp(scalar_text(v), f->names[i])) {
                if (f->kind == F_ENUM)
                    *(int *)(base + f->off) = i;
                else
                    return parse_string(c, v, key, 0, base + f->off, f->size);
                return CLF_OK;
            }
        }
        return fail_unknown_name(c, v, key, f->noun, f->names);
    case F_PATH:
        return parse_string(c, v, key, 1, base + f->off, f->size);
    case F_DEVICE:
        if (is_plain_value(v) && text_to_llong(scalar_text(v), &iv) && iv < 0)
            return fail_at(c, v->start_mark, key,
                           "a device index must be >= 0, got %lld (or give a name substring)", iv);
        return parse_string(c, v, key, 1, base + f->off, f->size);
    case F_BETAS: {
        if (v->type != YAML_SEQUENCE_NODE)
            return fail_at(c, v->start_mark, key,
                           "expected two numbers [beta1, beta2] like [0.9, 0.98], got %s",
                           describe(v, buf, sizeof buf));
        yaml_node_item_t *items = v->data.sequence.items.start;
        long count = v->data.sequence.items.top - items;
        if (count != 2)
            return fail_at(c, v->start_mark, key,
                           "expected two numbers [beta1, beta2], got %ld of them", count);
        float *dst[2] = {&c->cfg->train.beta1, &c->cfg->train.beta2};
        for (int i = 0; i < 2; i++) {
            char item_key[CFG_KEY_MAX + 8];
            snprintf(item_key, sizeof item_key, "%s[%d]", key, i);
            const yaml_node_t *item = yaml_document_get_node(c->doc, items[i]);
            if ((st = parse_float(c, item, item_key, f, dst[i])) != CLF_OK)
                return st;
        }
        return CLF_OK;
    }
    case F_DATA: {
        /* `train: file.tsv` (source<TAB>target lines) or `train: [src.txt, tgt.txt]` */
        char *paths[2] = {base + f->off, base + f->off2};
        if (v->type != YAML_SEQUENCE_NODE) {
            memset(paths[1], 0, f->size);
            return parse_string(c, v, key, 1, paths[0], f->size);
        }
        yaml_node_item_t *items = v->data.sequence.items.start;
        long count = v->data.sequence.items.top - items;
        if (count != 2)
            return fail_at(c, v->start_mark, key,
                           "expected a TSV file or two line-aligned files [source, target], got "
                           "%ld file%s",
                           count, count == 1 ? "" : "s");
        for (int i = 0; i < 2; i++) {
            char item_key[CFG_KEY_MAX + 8];
            snprintf(item_key, sizeof item_key, "%s[%d]", key, i);
            const yaml_node_t *item = yaml_document_get_node(c->doc, items[i]);
            if ((st = parse_string(c, item, item_key, 0, paths[i], f->size)) != CLF_OK)
                return st;
            if (!paths[i][0])
                return fail_at(c, item->start_mark, item_key, "expected a file name, got ''");
        }
        return CLF_OK;
    }
    case F_OPNAME:
        return parse_opname(c, v, f, key);
    case F_DROPOUT:
        if (v->type == YAML_MAPPING_NODE)
            return parse_map(c, v, f->sub, key);
        if ((st = parse_float(c, v, key, f, &fv)) == CLF_OK)
            c->cfg->model.dropout = c->cfg->model.dropout_embedding = fv;
        return st;
    case F_PLUGINS:
        return parse_plugins(c, v, key);
    case F_MAP:
        if (f->flag)
            *(int *)(base + f->off) = 1;
        if (is_null(v)) /* `train:` with nothing under it: all defaults */
            return CLF_OK;
        return parse_map(c, v, f->sub, key);
    }
    return clf_error(CLF_ERR_INTERNAL, "config: field kind %d not handled", (int)f->kind);
}

static clf_status fail_unknown_key(const parse_ctx *c, const yaml_node_t *k, const char *key,
                                   const field *fields)
{
    const char *near = closest(scalar_text(k), &fields[0].key, sizeof *fields);
    if (near)
        return fail_at(c, k->start_mark, key, "unknown key '%s' (did you mean '%s'?)",
                       scalar_text(k), near);
    char list[512];
    size_t used = 0;
    list[0] = '\0';
    for (const field *f = fields; f->key && used < sizeof list; f++) {
        int n = snprintf(list + used, sizeof list - used, "%s%s", f == fields ? "" : ", ", f->key);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return fail_at(c, k->start_mark, key, "unknown key '%s' (valid keys: %s)", scalar_text(k),
                   list);
}

/* Walks a mapping node against fields; prefix is the key path of the mapping ("" at the
 * top, "train.optimizer" below). */
static clf_status parse_map(parse_ctx *c, const yaml_node_t *map, const field *fields,
                            const char *prefix)
{
    char buf[96], key[CFG_KEY_MAX];
    const char *where = *prefix ? prefix : NULL;
    if (map->type != YAML_MAPPING_NODE)
        return fail_at(c, map->start_mark, where, "expected a mapping, got %s",
                       describe(map, buf, sizeof buf));
    yaml_node_pair_t *start = map->data.mapping.pairs.start, *top = map->data.mapping.pairs.top;
    for (yaml_node_pair_t *p = start; p < top; p++) {
        const yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        const yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return fail_at(c, k->start_mark, where, "expected a key name, got %s",
                           describe(k, buf, sizeof buf));
        const char *name = scalar_text(k);
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", name);
        for (yaml_node_pair_t *q = start; q < p; q++) {
            const yaml_node_t *kq = yaml_document_get_node(c->doc, q->key);
            if (kq->type == YAML_SCALAR_NODE && !strcmp(scalar_text(kq), name))
                return fail_at(c, k->start_mark, key, "duplicate key (first at line %zu)",
                               kq->start_mark.line + 1);
        }
        const field *f = fields;
        while (f->key && strcmp(f->key, name))
            f++;
        if (!f->key)
            return fail_unknown_key(c, k, key, fields);
        /* an empty value has no position of its own: point at its key */
        note_seen(c, key, is_null(v) ? k->start_mark : v->start_mark);
        clf_status st = parse_value(c, v, f, key);
        if (st != CLF_OK)
            return st;
    }
    return CLF_OK;
}

/* ---- checks across keys, and resolution -------------------------------------------- */

static clf_status resolve_model(parse_ctx *c)
{
    clf_model_config *m = &c->cfg->model;
    const yaml_mark_t *model = seen_mark(c, "model");
    if (!model)
        return fail_at(c, c->root_mark, "model",
                       "missing section: a config needs 'model:' with at least src_vocab and "
                       "tgt_vocab");
    /* an experiment (train:) may leave the sizes to its vocabularies: clformer train fills
     * them in (0 until then) and writes them into the resolved config.yaml */
    const int sizes_optional = seen_mark(c, "train") != NULL;
    if (!seen_mark(c, "model.src_vocab") && !sizes_optional)
        return fail_at(c, *model, "model.src_vocab", "required key missing");
    if (!seen_mark(c, "model.tgt_vocab") && !sizes_optional)
        return fail_at(c, *model, "model.tgt_vocab", "required key missing");
    const yaml_mark_t *layers = seen_mark(c, "model.layers");
    static const char *const split[2] = {"model.encoder_layers", "model.decoder_layers"};
    for (int i = 0; layers && i < 2; i++) {
        const yaml_mark_t *other = seen_mark(c, split[i]);
        if (other)
            return fail_at(c, *other, split[i],
                           "conflicts with model.layers at line %zu (give layers, or "
                           "encoder_layers and decoder_layers)",
                           layers->line + 1);
    }
    if (m->d_model % m->heads != 0)
        return fail_at(c, mark_of(c, "model.heads", "model.d_model", "model"), "model.heads",
                       "d_model %d is not divisible by heads %d", m->d_model, m->heads);
    if ((m->src_vocab && m->pad_id >= m->src_vocab) || (m->tgt_vocab && m->pad_id >= m->tgt_vocab))
        return fail_at(c, mark_of(c, "model.pad_id", "model.src_vocab", "model"), "model.pad_id",
                       "%d is not an id of the vocabularies (src_vocab %d, tgt_vocab %d)",
                       m->pad_id, m->src_vocab, m->tgt_vocab);
    /* one matrix for both embeddings means one vocabulary (0: left to a train: section's
     * vocabularies, checked when they are known) */
    if (m->tie_embeddings == CLF_TIE_ALL && m->src_vocab && m->tgt_vocab &&
        m->src_vocab != m->tgt_vocab)
        return fail_at(c, mark_of(c, "model.tie_embeddings", "model", NULL), "model.tie_embeddings",
                       "all shares one matrix between source and target embeddings, which needs "
                       "src_vocab == tgt_vocab (got %d and %d); use decoder, or one vocabulary",
                       m->src_vocab, m->tgt_vocab);
    if (m->final_norm_auto)
        m->final_norm = m->norm == CLF_NORM_PRE;
    return CLF_OK;
}

/* A model.activation or model.layernorm.style name that is not built in: an op of a
 * plugin the YAML lists, else of one on the search path. */
static clf_status resolve_plugin_op(parse_ctx *c, const char *key, const char *name, int norm,
                                    const char *const *builtins, const clf_plugin_op **out)
{
    char msg[1024], list[128];
    yaml_mark_t m = mark_of(c, key, "model", NULL);
    clf_status st = clf_plugin_find(name, c->plugin_dir, out);
    if (st != CLF_OK) {
        snprintf(msg, sizeof msg, "%s", clf_last_error());
        return fail_at(c, m, key, "looking for '%s' in the plugins: %s", name, msg);
    }
    join_names(builtins, list, sizeof list);
    if (!*out)
        return fail_at(c, m, key,
                       "unknown %s '%s': not built in (%s) and no plugin provides it (list "
                       "its .so under plugins:, or put it in --plugin-dir or CLF_PLUGIN_PATH)",
                       norm ? "norm style" : "activation", name, list);
    int is_norm = (*out)->kind == CLF_PLUGIN_NORM;
    if (is_norm != norm)
        return fail_at(c, m, key, "'%s' is a %s op of %s, not %s", name,
                       clf_plugin_kind_name((*out)->kind), clf_plugin_path_of(*out),
                       norm ? "a norm style" : "an activation");
    return CLF_OK;
}

static clf_status resolve_plugin_ops(parse_ctx *c)
{
    clf_model_config *m = &c->cfg->model;
    clf_status st;
    m->activation_op = NULL;
    m->norm_op = NULL;
    if (c->activation_op[0]) {
        if ((st = resolve_plugin_op(c, "model.activation", c->activation_op, 0, act_names,
                                    &m->activation_op)) != CLF_OK)
            return st;
        m->activation = CLF_ACT_PLUGIN;
    }
    if (c->norm_op[0] && (st = resolve_plugin_op(c, "model.layernorm.style", c->norm_op, 1,
                                                 ln_names, &m->norm_op)) != CLF_OK)
        return st;
    return CLF_OK;
}

static clf_status resolve_train(parse_ctx *c)
{
    clf_train_config *t = &c->cfg->train;
    if (!t->present)
        return CLF_OK;
    if (!t->data_train[0])
        return fail_at(c, mark_of(c, "train.data", "train", NULL), "train.data.train",
                       "required key missing (a file of source<TAB>target lines, or "
                       "[source file, target file])");
    if (t->steps == 0 && t->epochs == 0)
        return fail_at(c, mark_of(c, "train.epochs", "train.steps", "train"), "train.epochs",
                       "steps and epochs are both 0: set one of them > 0");
    if ((t->schedule == CLF_SCHED_NOAM || t->schedule == CLF_SCHED_INVERSE_SQRT) && t->warmup <= 0)
        return fail_at(c, mark_of(c, "train.schedule.warmup", "train.schedule", "train"),
                       "train.schedule.warmup", "schedule %s needs warmup > 0",
                       sched_names[t->schedule]);
    const yaml_mark_t *max_len = seen_mark(c, "train.max_len");
    int model_max = c->cfg->model.max_len;
    if (!max_len && t->max_len > model_max)
        t->max_len = model_max; /* the default never exceeds the positional-encoding table */
    if (t->max_len > model_max)
        return fail_at(c, *max_len, "train.max_len",
                       "%d exceeds model.max_len %d (the positional-encoding table)", t->max_len,
                       model_max);
    /* vocabularies default to files beside the checkpoints */
    char *vocab[2] = {t->vocab_src, t->vocab_tgt};
    static const char *const file[2] = {"src.json", "tgt.json"};
    for (int i = 0; i < 2; i++) {
        if (vocab[i][0])
            continue;
        int n = snprintf(vocab[i], CLF_PATH_MAX, "%s/%s", t->checkpoint_dir, file[i]);
        if (n < 0 || n >= CLF_PATH_MAX)
            return fail_at(c, mark_of(c, "train.checkpoint.dir", "train", NULL),
                           "train.checkpoint.dir", "too long to hold the vocabularies");
    }
    return CLF_OK;
}

/* ---- entry points ------------------------------------------------------------------ */

static void set_text(char *dst, size_t size, const char *src)
{
    memset(dst, 0, size);
    snprintf(dst, size, "%s", src);
}

void clf_config_defaults(clf_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    clf_model_config *m = &cfg->model;
    m->src_vocab = m->tgt_vocab = 0;
    m->max_len = 256;
    m->d_model = 512;
    m->encoder_layers = m->decoder_layers = 6;
    m->heads = 8;
    m->d_ff = 2048;
    m->norm = CLF_NORM_PRE;
    m->final_norm = 1;
    m->final_norm_auto = 1;
    m->ln_style = CLF_LN_TUTORIAL;
    m->ln_eps = 1.0e-6f;
    m->attention_bias = 0;
    m->activation = CLF_ACT_RELU;
    m->output = CLF_OUTPUT_LOGITS;
    m->dropout = 0.1f;
    m->dropout_embedding = 0.1f;
    m->dropout_attention = 0.0f;
    m->dropout_ffn = 0.0f;
    m->pad_id = 1;
    m->positional = CLF_POS_SINUSOIDAL;
    m->tie_embeddings = CLF_TIE_NONE;
    set_text(cfg->backend.name, sizeof cfg->backend.name, "cpu");
    cfg->backend.threads = 0;
    clf_train_config *t = &cfg->train;
    t->min_frequency = 2;
    t->seed = 1;
    t->shuffle = 1;
    t->batch_size = 32;
    t->batch_tokens = 0;
    t->max_len = 128;
    t->steps = 0;
    t->epochs = 10;
    t->accumulate = 1;
    t->optimizer = CLF_OPT_ADAM;
    t->lr = 1.0e-4f;
    t->beta1 = 0.9f;
    t->beta2 = 0.98f;
    t->adam_eps = 1.0e-9f;
    t->weight_decay = 0.0f;
    t->schedule = CLF_SCHED_CONSTANT;
    t->warmup = 0;
    t->label_smoothing = 0.1f;
    t->clip_norm = 0.0f;
    t->log_every = 50;
    t->validate_every = 500;
    set_text(t->checkpoint_dir, sizeof t->checkpoint_dir, "runs/default");
    t->checkpoint_every = 500;
    t->checkpoint_keep = 3;
}

/* libyaml's complaint, at its position. */
static clf_status fail_yaml(const parse_ctx *c, const yaml_parser_t *p, const char *text,
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
            return fail_at(c, m, NULL, "invalid YAML: %s (byte 0x%02x)", problem,
                           (unsigned)p->problem_value);
        return fail_at(c, m, NULL, "invalid YAML: %s", problem);
    }
    if (p->context)
        return fail_at(c, p->problem_mark, NULL, "invalid YAML: %s (%s at line %zu, column %zu)",
                       problem, p->context, p->context_mark.line + 1, p->context_mark.column + 1);
    return fail_at(c, p->problem_mark, NULL, "invalid YAML: %s", problem);
}

static clf_status parse_text(const char *text, size_t len, const char *name, const char *plugin_dir,
                             clf_config *cfg)
{
    clf_status st = CLF_OK;
    yaml_parser_t parser;
    yaml_document_t doc, extra;
    int have_doc = 0, have_extra = 0;
    parse_ctx *c = calloc(1, sizeof *c);
    clf_config_defaults(cfg);
    set_text(cfg->path, sizeof cfg->path, name);
    if (!c)
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory", name);
    c->name = name;
    c->cfg = cfg;
    c->plugin_dir = plugin_dir ? plugin_dir : "";
    c->doc = &doc;
    if (!yaml_parser_initialize(&parser)) {
        free(c);
        return clf_error(CLF_ERR_NOMEM, "%s: cannot create a YAML parser", name);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        st = fail_yaml(c, &parser, text, len);
        goto fail;
    }
    have_doc = 1;
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root || is_null(root)) {
        st = fail_at(c, (yaml_mark_t){0, 0, 0}, NULL,
                     "empty configuration: expected a mapping with a 'model:' section");
        goto fail;
    }
    c->root_mark = root->start_mark;
    if (!yaml_parser_load(&parser, &extra)) {
        st = fail_yaml(c, &parser, text, len);
        goto fail;
    }
    have_extra = 1;
    const yaml_node_t *second = yaml_document_get_root_node(&extra);
    if (second) {
        st = fail_at(c, second->start_mark, NULL,
                     "a second YAML document: a configuration is one document");
        goto fail;
    }
    if (root->type != YAML_MAPPING_NODE) {
        char buf[96];
        st = fail_at(c, root->start_mark, NULL,
                     "expected a mapping with a 'model:' section at the top level, got %s",
                     describe(root, buf, sizeof buf));
        goto fail;
    }
    if ((st = parse_map(c, root, top_fields, "")) != CLF_OK)
        goto fail;
    if ((st = resolve_model(c)) != CLF_OK)
        goto fail;
    if ((st = resolve_plugin_ops(c)) != CLF_OK)
        goto fail;
    st = resolve_train(c);
fail:
    if (have_extra)
        yaml_document_delete(&extra);
    if (have_doc)
        yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    free(c);
    return st;
}

clf_status clf_config_parse_string(const char *text, const char *name, clf_config *cfg)
{
    if (!name)
        name = "<string>";
    if (!text || !cfg)
        return clf_error(CLF_ERR_INPUT, "%s: no configuration text", name);
    return parse_text(text, strlen(text), name, NULL, cfg);
}

clf_status clf_config_load(const char *path, clf_config *cfg)
{
    return clf_config_load_with_plugins(path, NULL, cfg);
}

clf_status clf_config_load_with_plugins(const char *path, const char *plugin_dir, clf_config *cfg)
{
    clf_status st = CLF_OK;
    char *text = NULL;
    size_t len = 0, cap = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return clf_error(CLF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *grown = realloc(text, cap);
            if (!grown) {
                st = clf_error(CLF_ERR_NOMEM, "%s: out of memory reading the file", path);
                goto fail;
            }
            text = grown;
        }
        size_t n = fread(text + len, 1, cap - len - 1, f);
        len += n;
        if (len > CFG_FILE_MAX) {
            st = clf_error(CLF_ERR_INPUT, "%s: larger than %d bytes: not a configuration", path,
                           CFG_FILE_MAX);
            goto fail;
        }
        if (n == 0)
            break;
    }
    if (ferror(f)) {
        st = clf_error(CLF_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        goto fail;
    }
    text[len] = '\0';
    st = parse_text(text, len, path, plugin_dir, cfg);
fail:
    free(text);
    fclose(f);
    return st;
}

/* ---- names ------------------------------------------------------------------------- */

static const char *name_or(const char *const *names, int count, int i)
{
    return i >= 0 && i < count ? names[i] : "unknown";
}

const char *clf_norm_place_name(clf_norm_place n)
{
    return name_or(norm_names, 3, (int)n);
}

const char *clf_ln_style_name(clf_ln_style s)
{
    return name_or(ln_names, 2, (int)s);
}

const char *clf_activation_name(clf_activation a)
{
    return name_or(act_names, 1, (int)a);
}

const char *clf_model_activation_name(const clf_model_config *m)
{
    if (m->activation == CLF_ACT_PLUGIN)
        return m->activation_op ? m->activation_op->name : "unknown";
    return clf_activation_name(m->activation);
}

const char *clf_model_norm_style_name(const clf_model_config *m)
{
    return m->norm_op ? m->norm_op->name : clf_ln_style_name(m->ln_style);
}

int clf_model_ffn_gated(const clf_model_config *m)
{
    return m->activation == CLF_ACT_PLUGIN && m->activation_op &&
           m->activation_op->kind == CLF_PLUGIN_GATED_ACTIVATION;
}

int clf_model_norm_has_bias(const clf_model_config *m)
{
    return m->norm_op ? m->norm_op->norm_has_bias != 0 : 1;
}

const char *clf_output_name(clf_output o)
{
    return name_or(output_names, 2, (int)o);
}

const char *clf_positional_name(clf_positional p)
{
    return name_or(positional_names, 2, (int)p);
}

const char *clf_tie_name(clf_tie t)
{
    return name_or(tie_names, 3, (int)t);
}

const char *clf_optimizer_name(clf_optimizer_kind o)
{
    return name_or(opt_names, 2, (int)o);
}

const char *clf_schedule_name(clf_schedule_kind s)
{
    return name_or(sched_names, 3, (int)s);
}
