/* The YAML walk of a configuration, shared by config.c (the tables of keys, defaults,
 * checks across keys, entry points) and config_yaml.c (walking the document against the
 * tables, a parser per kind of value, messages with positions). Parsing only records the
 * `plugins:` list and op-plugin names; config_resolve.c loads and finds them after. Not
 * installed. */
#ifndef CLF_CONFIG_YAML_H
#define CLF_CONFIG_YAML_H

#include <stddef.h>
#include <yaml.h>

#include "clformer/config.h"

/* The reader's limits (README, "Limits"); each refused with "<file>:<line>:<col>: ..." or,
 * for the file's size, "<file>: N bytes, more than the limit of ...".
 * A config is a few hundred bytes; refuse to slurp a mistaken multi-gigabyte file (checked
 * before it is read, by clf_fs_read_all). */
#define CFG_FILE_MAX (1 << 20)
/* Nodes of the document with each alias counted as the nodes it stands for (a real config
 * has ~100): a few bytes of aliases cannot expand into billions of nodes for the walk. */
#define CFG_NODES_MAX 10000
/* Mappings and sequences nested deeper than this are refused (a config nests 4 deep). */
#define CFG_DEPTH_MAX 64
/* Largest vocabulary, length or width accepted: ids stay exact in float (2^24) and any
 * single size fits an int with room to spare. */
#define CFG_SIZE_MAX (1 << 24)
/* Layers per stack: far beyond any real model, small enough to catch a typo like 60000. */
#define CFG_LAYERS_MAX 1024

/* The tables of config.c have ~60 keys in all; each may be seen once. */
#define CFG_SEEN_MAX 128
#define CFG_KEY_MAX  96
/* A key with a sequence index: "model.banned_ids[12]" */
#define CFG_ITEM_KEY_MAX (CFG_KEY_MAX + 24)

typedef enum field_kind {
    F_INT,         /* int, range [imin, imax] */
    F_LLONG,       /* long long, range [imin, imax] */
    F_FLOAT,       /* float, range fmin..fmax, open ends where *_open */
    F_BOOL,        /* int 0/1 from true/false/yes/no */
    F_ENUM,        /* int index into names */
    F_NAME,        /* char[size], one of names */
    F_PATH,        /* char[size]; null = "" */
    F_DEVICE,      /* char[size]; an integer >= 0 or a name substring; null = "" */
    F_LAYERS,      /* sets model.encoder_layers and model.decoder_layers */
    F_FINAL_NORM,  /* auto | true | false */
    F_BETAS,       /* [beta1, beta2], each in fmin..fmax */
    F_DATA,        /* a TSV path into off, or [source, target] paths into off and off2 */
    F_OPNAME,      /* int index into names at off, or an op plugin's name (flag: OPNAME_*) */
    F_PLUGINS,     /* the top-level plugins: list, recorded as written */
    F_DROPOUT,     /* model.dropout: a rate for the paper's sites, or a map of sites (sub) */
    F_EMBED_SCALE, /* model.embed_scale: sqrt_d_model or a number > 0 */
    F_ID_LIST,     /* model.banned_ids: a list of ids >= 0 */
    F_AUTO_FLOAT,  /* float at off: auto (stored as -1) or a number in fmin..fmax */
    F_LANGUAGES,   /* languages.source/target: codes into char[][CLF_LANGUAGE_CODE_MAX] at off,
                      their count at off2 */
    F_MAP          /* a nested mapping with keys `sub`; flag: set the int at off to 1 */
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

/* F_OPNAME: which plugin-op slot a name that is not built in goes to */
enum { OPNAME_ACTIVATION = 1, OPNAME_NORM = 2 };

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
} parse_ctx;

/* Every error: "<name>:<line>:<col>: <key.path>: <why>" (without the key when NULL), with
 * the 1-based position of mark m. */
clf_status clf_cfg_fail_at(const parse_ctx *c, yaml_mark_t m, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* libyaml's complaint, at its position. */
clf_status clf_cfg_fail_yaml(const parse_ctx *c, const yaml_parser_t *p, const char *text,
                             size_t len);

/* An empty or ~/null plain scalar. */
int clf_cfg_is_null(const yaml_node_t *n);
/* What a node is, for "expected X, got <this>": 'abc', a mapping, nothing, ... */
const char *clf_cfg_describe(const yaml_node_t *n, char *buf, size_t size);

/* Refuses a document nested deeper than CFG_DEPTH_MAX, expanding (aliases counted as what
 * they stand for) to more than CFG_NODES_MAX nodes, or with an alias inside the node it
 * names; before anything walks it. */
clf_status clf_cfg_check_size(const parse_ctx *c);

/* Walks a mapping node against fields; prefix is the key path of the mapping ("" at the
 * top, "train.optimizer" below). */
clf_status clf_cfg_parse_map(parse_ctx *c, const yaml_node_t *map, const field *fields,
                             const char *prefix);
/* Where the value of key (a path like "model.heads") was, or NULL when it was not given. */
const yaml_mark_t *clf_cfg_seen_mark(const parse_ctx *c, const char *key);
/* The mark of the first of the keys that was seen, else the root's. */
yaml_mark_t clf_cfg_mark_of(const parse_ctx *c, const char *k1, const char *k2, const char *k3);

#endif
