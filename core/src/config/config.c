/* YAML -> validated clf_config: the tables of keys of each section, the defaults, the
 * checks across keys (the memory a model implies among them) and the entry points that
 * parse; the walk of the document is config_yaml.c, loading the plugins it names after
 * parsing is config_resolve.c, and the way back is config_dump.c.
 *
 * The keys of each section are described by a table of `field`s (name, kind, where the
 * value lives in clf_config, its range or valid names); clf_cfg_parse_map walks a node
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

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/fs.h"
#include "config/config_yaml.h"

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
static const char *const positional_names[] = {"sinusoidal", "learned", "sinusoidal_split",
                                               "sinusoidal_fairseq", NULL};
static const char *const lang_place_names[] = {"none", "before", "after",
                                               NULL};                 /* clf_lang_place */
static const char *const tgt_lang_names[] = {"none", "forced", NULL}; /* clf_target_language */
static const char *const tie_names[] = {"none", "decoder", "all", NULL};
static const char *const backend_names[] = {"cpu", "opencl", "auto", NULL};
static const char *const opt_names[] = {"adam", "adamw", NULL};
static const char *const sched_names[] = {"constant", "noam", "inverse_sqrt", NULL};
static const char *const beam_style_names[] = {"gnmt", "hf", NULL};        /* clf_beam_style */
static const char *const precision_names[] = {"f32", "bf16", "f16", NULL}; /* clf_precision */

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
    INT("position_offset", model.position_offset, 0, CFG_SIZE_MAX),
    BOOL("embed_norm", model.embed_norm),
    ENUM("tie_embeddings", model.tie_embeddings, "tie_embeddings", tie_names),
    {.key = "embed_scale",
     .kind = F_EMBED_SCALE,
     .off = AT(model.embed_scale),
     .fmin = 0.0,
     .fmin_open = 1,
     .fmax = HUGE_VAL},
    INT("bos_id", model.bos_id, -1, CFG_SIZE_MAX),
    INT("eos_id", model.eos_id, -1, CFG_SIZE_MAX),
    INT("unk_id", model.unk_id, -1, CFG_SIZE_MAX),
    INT("decoder_start_id", model.decoder_start_id, -1, CFG_SIZE_MAX),
    BOOL("source_bos", model.source_bos),
    BOOL("source_eos", model.source_eos),
    ENUM("source_language", model.source_language, "language token place", lang_place_names),
    ENUM("target_language", model.target_language, "target language", tgt_lang_names),
    INT("specials_from", model.specials_from, -1, CFG_SIZE_MAX),
    BOOL("clean_up_spaces", model.clean_up_spaces),
    BOOL("fixed_output_bias", model.fixed_output_bias),
    {.key = "banned_ids", .kind = F_ID_LIST, .imin = 0, .imax = CFG_SIZE_MAX},
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

static const field loss_scale_fields[] = {
    FLOAT("init", train.loss_scale_init, 0.0, 1, HUGE_VAL, 0),
    INT("window", train.loss_scale_window, 1, INT_MAX),
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
    ENUM("precision", train.precision, "precision", precision_names),
    MAP("loss_scale", loss_scale_fields),
    INT("log_every", train.log_every, 1, INT_MAX),
    INT("validate_every", train.validate_every, 0, INT_MAX),
    MAP("checkpoint", checkpoint_fields),
    STRING("source_lang", F_PATH, train.source_lang),
    STRING("target_lang", F_PATH, train.target_lang),
    END,
};

/* translate's settings; the ranges are those of its flags */
static const field generate_fields[] = {
    INT("beam", generate.beam, 1, INT_MAX),
    ENUM("beam_style", generate.beam_style, "beam style", beam_style_names),
    {.key = "length_penalty",
     .kind = F_AUTO_FLOAT,
     .off = AT(generate.length_penalty),
     .fmin = 0.0,
     .fmax = 100.0},
    INT("max_len", generate.max_len, 0, CFG_SIZE_MAX),
    BOOL("forced_eos", generate.forced_eos),
    BOOL("early_stopping", generate.early_stopping),
    END,
};

/* the languages a model translates from and to, informative */
static const field languages_fields[] = {
    {.key = "source",
     .kind = F_LANGUAGES,
     .off = AT(languages.source),
     .off2 = AT(languages.n_source)},
    {.key = "target",
     .kind = F_LANGUAGES,
     .off = AT(languages.target),
     .off2 = AT(languages.n_target)},
    STRING("token_prefix", F_PATH, languages.token_prefix),
    STRING("token_suffix", F_PATH, languages.token_suffix),
    END,
};

static const field top_fields[] = {
    {.key = "plugins", .kind = F_PLUGINS},
    MAP("model", model_fields),
    MAP("backend", backend_fields),
    {.key = "train", .kind = F_MAP, .sub = train_fields, .off = AT(train.present), .flag = 1},
    {.key = "generate",
     .kind = F_MAP,
     .sub = generate_fields,
     .off = AT(generate.present),
     .flag = 1},
    {.key = "languages",
     .kind = F_MAP,
     .sub = languages_fields,
     .off = AT(languages.present),
     .flag = 1},
    END,
};

/* ---- checks across keys, and resolution -------------------------------------------- */

static clf_status resolve_model(parse_ctx *c)
{
    clf_model_config *m = &c->cfg->model;
    const yaml_mark_t *model = clf_cfg_seen_mark(c, "model");
    if (!model)
        return clf_cfg_fail_at(
            c, c->root_mark, "model",
            "missing section: a config needs 'model:' with at least src_vocab and "
            "tgt_vocab");
    /* an experiment (train:) may leave the sizes to its vocabularies: clformer train fills
     * them in (0 until then) and writes them into the resolved config.yaml */
    const int sizes_optional = clf_cfg_seen_mark(c, "train") != NULL;
    if (!clf_cfg_seen_mark(c, "model.src_vocab") && !sizes_optional)
        return clf_cfg_fail_at(c, *model, "model.src_vocab", "required key missing");
    if (!clf_cfg_seen_mark(c, "model.tgt_vocab") && !sizes_optional)
        return clf_cfg_fail_at(c, *model, "model.tgt_vocab", "required key missing");
    const yaml_mark_t *layers = clf_cfg_seen_mark(c, "model.layers");
    static const char *const split[2] = {"model.encoder_layers", "model.decoder_layers"};
    for (int i = 0; layers && i < 2; i++) {
        const yaml_mark_t *other = clf_cfg_seen_mark(c, split[i]);
        if (other)
            return clf_cfg_fail_at(c, *other, split[i],
                                   "conflicts with model.layers at line %zu (give layers, or "
                                   "encoder_layers and decoder_layers)",
                                   layers->line + 1);
    }
    if (m->d_model % m->heads != 0)
        return clf_cfg_fail_at(c, clf_cfg_mark_of(c, "model.heads", "model.d_model", "model"),
                               "model.heads", "d_model %d is not divisible by heads %d", m->d_model,
                               m->heads);
    /* the sinusoidal table pairs sin and cos columns: refused here, with the line, rather
     * than when a model is made from the config */
    if (m->positional == CLF_POS_SINUSOIDAL && m->d_model % 2 != 0)
        return clf_cfg_fail_at(c, clf_cfg_mark_of(c, "model.d_model", "model", NULL),
                               "model.d_model",
                               "%d must be even for positional: sinusoidal (sin/cos pairs); use "
                               "an even d_model or positional: learned",
                               m->d_model);
    if ((m->src_vocab && m->pad_id >= m->src_vocab) || (m->tgt_vocab && m->pad_id >= m->tgt_vocab))
        return clf_cfg_fail_at(c, clf_cfg_mark_of(c, "model.pad_id", "model.src_vocab", "model"),
                               "model.pad_id",
                               "%d is not an id of the vocabularies (src_vocab %d, tgt_vocab %d)",
                               m->pad_id, m->src_vocab, m->tgt_vocab);
    /* one matrix for both embeddings means one vocabulary (0: left to a train: section's
     * vocabularies, checked when they are known) */
    if (m->tie_embeddings == CLF_TIE_ALL && m->src_vocab && m->tgt_vocab &&
        m->src_vocab != m->tgt_vocab)
        return clf_cfg_fail_at(
            c, clf_cfg_mark_of(c, "model.tie_embeddings", "model", NULL), "model.tie_embeddings",
            "all shares one matrix between source and target embeddings, which needs "
            "src_vocab == tgt_vocab (got %d and %d); use decoder, or one vocabulary",
            m->src_vocab, m->tgt_vocab);
    /* special ids must be ids of the vocabularies they are used in */
    static const char *const id_keys[] = {"model.bos_id", "model.eos_id", "model.unk_id",
                                          "model.decoder_start_id"};
    const int ids[] = {m->bos_id, m->eos_id, m->unk_id, m->decoder_start_id};
    for (int i = 0; i < 4; i++) {
        const int limit = i == 3 ? m->tgt_vocab
                          : m->src_vocab && m->tgt_vocab
                              ? (m->src_vocab < m->tgt_vocab ? m->src_vocab : m->tgt_vocab)
                              : m->src_vocab + m->tgt_vocab;
        if (limit && ids[i] >= limit)
            return clf_cfg_fail_at(c, clf_cfg_mark_of(c, id_keys[i], "model", NULL), id_keys[i],
                                   "%d is not an id of the vocabularies (src_vocab %d, tgt_vocab "
                                   "%d)",
                                   ids[i], m->src_vocab, m->tgt_vocab);
    }
    for (int i = 0; i < m->n_banned_ids; i++)
        if (m->tgt_vocab && m->banned_ids[i] >= m->tgt_vocab)
            return clf_cfg_fail_at(c, clf_cfg_mark_of(c, "model.banned_ids", "model", NULL),
                                   "model.banned_ids", "%d is not an id of tgt_vocab %d",
                                   m->banned_ids[i], m->tgt_vocab);
    if (m->specials_from >= 0 && m->tgt_vocab && m->specials_from > m->tgt_vocab)
        return clf_cfg_fail_at(c, clf_cfg_mark_of(c, "model.specials_from", "model", NULL),
                               "model.specials_from", "%d is past tgt_vocab %d", m->specials_from,
                               m->tgt_vocab);
    /* a language token needs the codes it may be made of */
    const clf_languages_config *l = &c->cfg->languages;
    if (m->source_language != CLF_LANG_NONE && l->n_source == 0)
        return clf_cfg_fail_at(c, clf_cfg_mark_of(c, "model.source_language", "model", NULL),
                               "model.source_language",
                               "%s needs the codes of languages.source (none given)",
                               clf_lang_place_name(m->source_language));
    if (m->target_language != CLF_TGT_LANG_NONE && l->n_target == 0)
        return clf_cfg_fail_at(c, clf_cfg_mark_of(c, "model.target_language", "model", NULL),
                               "model.target_language",
                               "%s needs the codes of languages.target (none given)",
                               clf_target_language_name(m->target_language));
    if (m->final_norm_auto)
        m->final_norm = m->norm == CLF_NORM_PRE;
    return CLF_OK;
}

static clf_status resolve_train(parse_ctx *c)
{
    clf_train_config *t = &c->cfg->train;
    if (!t->present)
        return CLF_OK;
    if (!t->data_train[0])
        return clf_cfg_fail_at(c, clf_cfg_mark_of(c, "train.data", "train", NULL),
                               "train.data.train",
                               "required key missing (a file of source<TAB>target lines, or "
                               "[source file, target file])");
    if (t->steps == 0 && t->epochs == 0)
        return clf_cfg_fail_at(c, clf_cfg_mark_of(c, "train.epochs", "train.steps", "train"),
                               "train.epochs", "steps and epochs are both 0: set one of them > 0");
    if ((t->schedule == CLF_SCHED_NOAM || t->schedule == CLF_SCHED_INVERSE_SQRT) && t->warmup <= 0)
        return clf_cfg_fail_at(
            c, clf_cfg_mark_of(c, "train.schedule.warmup", "train.schedule", "train"),
            "train.schedule.warmup", "schedule %s needs warmup > 0", sched_names[t->schedule]);
    const yaml_mark_t *max_len = clf_cfg_seen_mark(c, "train.max_len");
    int model_max = c->cfg->model.max_len;
    if (!max_len && t->max_len > model_max)
        t->max_len = model_max; /* the default never exceeds the positional-encoding table */
    if (t->max_len > model_max)
        return clf_cfg_fail_at(c, *max_len, "train.max_len",
                               "%d exceeds model.max_len %d (the positional-encoding table)",
                               t->max_len, model_max);
    /* vocabularies default to files beside the checkpoints */
    char *vocab[2] = {t->vocab_src, t->vocab_tgt};
    static const char *const file[2] = {"src.json", "tgt.json"};
    for (int i = 0; i < 2; i++) {
        if (vocab[i][0])
            continue;
        int n = snprintf(vocab[i], CLF_PATH_MAX, "%s/%s", t->checkpoint_dir, file[i]);
        if (n < 0 || n >= CLF_PATH_MAX)
            return clf_cfg_fail_at(c, clf_cfg_mark_of(c, "train.checkpoint.dir", "train", NULL),
                                   "train.checkpoint.dir", "too long to hold the vocabularies");
    }
    return CLF_OK;
}

/* the decoder has model.max_len positions, the first the start token's */
static clf_status resolve_generate(parse_ctx *c)
{
    const clf_generate_config *g = &c->cfg->generate;
    const int cap = c->cfg->model.max_len - 1;
    if (g->max_len > cap)
        return clf_cfg_fail_at(c, clf_cfg_mark_of(c, "generate.max_len", "generate", NULL),
                               "generate.max_len",
                               "%d is more than model.max_len - 1 = %d (the decoder's positions "
                               "after the start token)",
                               g->max_len, cap);
    return CLF_OK;
}

/* ---- the memory a model's config implies --------------------------------------------- */

/* bytes for a message: "32 GiB", "16.50 GiB", "3 MiB", "0.31 MiB"; a value just over a
 * whole number keeps the digits that show it ("16.000002 GiB", not "16.00 GiB") */
static const char *gib(double bytes, char *buf, size_t size)
{
    const int big = bytes >= (double)(1ll << 30);
    const double v = bytes / (double)(1ll << (big ? 30 : 20));
    int prec = v == floor(v) ? 0 : 2;
    while (prec && prec < 9 && floor(v * pow(10, prec) + 0.5) == floor(v) * pow(10, prec))
        prec++;
    snprintf(buf, size, "%.*f %s", prec, v, big ? "GiB" : "MiB");
    return buf;
}

/* One product of two keys (a table of a x b floats) over CLF_CONFIG_MODEL_BYTES_MAX: 1, with
 * the reason naming both keys in why: "max_len 16777216 x d_model 512 = 32 GiB of
 * positional table exceeds the limit of 16 GiB". */
static int product_over(const char *a_name, int a, const char *b_name, int b, const char *what,
                        char *why, size_t size)
{
    char bytes[32], limit[32];
    const double n = (double)a * (double)b * sizeof(float);
    if (n <= (double)CLF_CONFIG_MODEL_BYTES_MAX)
        return 0;
    snprintf(why, size, "%s %d x %s %d = %s of %s exceeds the limit of %s", a_name, a, b_name, b,
             gib(n, bytes, sizeof bytes), what,
             gib((double)CLF_CONFIG_MODEL_BYTES_MAX, limit, sizeof limit));
    return 1;
}

/* The rule: what a model's config makes clformer allocate at load, checked before anything
 * is: the positional table (computed at load, or two learned tables), the embeddings and
 * output projection, and the weight matrices in all (biases and norms, O(d_model) each, left
 * out). An activation that is an op plugin's name counts as gated (linear_3), the most it
 * can need, as parsing does not load the plugin. Vocabularies of 0 (left to a train:
 * section's vocabularies) count nothing. Over the limit: 1, with the key to report in *key,
 * the key whose place in the file to report in *at, and the reason in why. */
static int model_bytes_over(const clf_model_config *m, const char **key, const char **at, char *why,
                            size_t size)
{
    static const struct {
        const char *key, *name, *what;
    } products[3] = {{"model.max_len", "max_len", "positional table"},
                     {"model.src_vocab", "src_vocab", "source embedding"},
                     {"model.tgt_vocab", "tgt_vocab", "target embedding"}};
    const int sizes[3] = {m->max_len + m->position_offset, m->src_vocab, m->tgt_vocab};
    for (int i = 0; i < 3; i++)
        if (product_over(products[i].name, sizes[i], "d_model", m->d_model, products[i].what, why,
                         size)) {
            *key = *at = products[i].key;
            return 1;
        }
    const double d = m->d_model, f = 4.0; /* bytes of an F32 */
    const double pos = (m->positional == CLF_POS_LEARNED ? 2.0 : 1.0) *
                       ((double)m->max_len + m->position_offset) * d * f;
    const double emb = ((m->tie_embeddings == CLF_TIE_ALL ? 0.0 : m->src_vocab) +
                        (m->tie_embeddings == CLF_TIE_NONE ? 2.0 : 1.0) * m->tgt_vocab) *
                       d * f;
    const double ffn = (m->activation_op_name[0] ? 3.0 : 2.0) * d * m->d_ff;
    const double layers =
        (m->encoder_layers * (4.0 * d * d + ffn) + m->decoder_layers * (8.0 * d * d + ffn)) * f;
    if (pos + emb + layers <= (double)CLF_CONFIG_MODEL_BYTES_MAX)
        return 0;
    char total[32], b_pos[32], b_emb[32], b_layers[32], limit[32];
    snprintf(why, size,
             "the weights and tables come to %s (positional %s: max_len %d x d_model; embeddings "
             "%s: src_vocab %d, tgt_vocab %d x d_model; layers %s: %d encoder, %d decoder of "
             "d_model %d, d_ff %d), more than the limit of %s",
             gib(pos + emb + layers, total, sizeof total), gib(pos, b_pos, sizeof b_pos),
             m->max_len, gib(emb, b_emb, sizeof b_emb), m->src_vocab, m->tgt_vocab,
             gib(layers, b_layers, sizeof b_layers), m->encoder_layers, m->decoder_layers,
             m->d_model, m->d_ff, gib((double)CLF_CONFIG_MODEL_BYTES_MAX, limit, sizeof limit));
    *key = "model";
    *at = "model.d_model";
    return 1;
}

/* The rule at parse time, the error at the key's line and column. */
static clf_status check_model_bytes(parse_ctx *c)
{
    const char *key = NULL, *at = NULL;
    char why[512];
    if (!model_bytes_over(&c->cfg->model, &key, &at, why, sizeof why))
        return CLF_OK;
    return clf_cfg_fail_at(c, clf_cfg_mark_of(c, at, "model.d_model", "model"), key, "%s", why);
}

clf_status clf_config_check_model_bytes(const clf_config *cfg)
{
    const char *key = NULL, *at = NULL;
    char why[512];
    if (!cfg)
        return clf_error(CLF_ERR_INPUT, "config: no configuration to check");
    if (!model_bytes_over(&cfg->model, &key, &at, why, sizeof why))
        return CLF_OK;
    return clf_error(CLF_ERR_INPUT, "%s: %s: %s", cfg->path, key, why);
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
    m->embed_scale = 0.0f;
    m->bos_id = m->eos_id = m->unk_id = m->decoder_start_id = -1;
    m->source_bos = m->source_eos = 1;
    m->source_language = CLF_LANG_NONE;
    m->target_language = CLF_TGT_LANG_NONE;
    m->specials_from = -1;
    m->position_offset = 0;
    m->embed_norm = 0;
    m->n_banned_ids = 0;
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
    t->precision = CLF_PRECISION_F32;
    t->loss_scale_init = 65536.0f;
    t->loss_scale_window = 2000;
    t->log_every = 50;
    t->validate_every = 500;
    set_text(t->checkpoint_dir, sizeof t->checkpoint_dir, "runs/default");
    t->checkpoint_every = 500;
    t->checkpoint_keep = 3;
    clf_generate_config *g = &cfg->generate;
    g->beam = 1;
    g->beam_style = 0;
    g->length_penalty = -1.0f;
    g->max_len = 0;
    g->forced_eos = 0;
    g->early_stopping = 0;
}

static clf_status parse_text(const char *text, size_t len, const char *name, clf_config *cfg)
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
    c->doc = &doc;
    if (!yaml_parser_initialize(&parser)) {
        free(c);
        return clf_error(CLF_ERR_NOMEM, "%s: cannot create a YAML parser", name);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        st = clf_cfg_fail_yaml(c, &parser, text, len);
        goto fail;
    }
    have_doc = 1;
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root || clf_cfg_is_null(root)) {
        st = clf_cfg_fail_at(c, (yaml_mark_t){0, 0, 0}, NULL,
                             "empty configuration: expected a mapping with a 'model:' section");
        goto fail;
    }
    c->root_mark = root->start_mark;
    if ((st = clf_cfg_check_size(c)) != CLF_OK)
        goto fail;
    if (!yaml_parser_load(&parser, &extra)) {
        st = clf_cfg_fail_yaml(c, &parser, text, len);
        goto fail;
    }
    have_extra = 1;
    const yaml_node_t *second = yaml_document_get_root_node(&extra);
    if (second) {
        st = clf_cfg_fail_at(c, second->start_mark, NULL,
                             "a second YAML document: a configuration is one document");
        goto fail;
    }
    if (root->type != YAML_MAPPING_NODE) {
        char buf[96];
        st = clf_cfg_fail_at(c, root->start_mark, NULL,
                             "expected a mapping with a 'model:' section at the top level, got %s",
                             clf_cfg_describe(root, buf, sizeof buf));
        goto fail;
    }
    if ((st = clf_cfg_parse_map(c, root, top_fields, "")) != CLF_OK)
        goto fail;
    if ((st = resolve_model(c)) != CLF_OK)
        goto fail;
    if ((st = resolve_train(c)) != CLF_OK)
        goto fail;
    if ((st = resolve_generate(c)) != CLF_OK)
        goto fail;
    st = check_model_bytes(c);
fail:
    if (have_extra)
        yaml_document_delete(&extra);
    if (have_doc)
        yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    free(c);
    return st;
}

clf_status clf_config_read_string(const char *text, const char *name, clf_config *cfg)
{
    if (!name)
        name = "<string>";
    if (!text || !cfg)
        return clf_error(CLF_ERR_INPUT, "%s: no configuration text", name);
    const size_t len = strlen(text);
    if (len > CFG_FILE_MAX)
        return clf_error(CLF_ERR_INPUT, "%s: %zu bytes, more than the limit of %d", name, len,
                         CFG_FILE_MAX);
    return parse_text(text, len, name, cfg);
}

clf_status clf_config_read(const char *path, clf_config *cfg)
{
    char *text = NULL;
    size_t len = 0;
    clf_status st = clf_fs_read_all(path, CFG_FILE_MAX, &text, &len);
    if (st == CLF_OK)
        st = parse_text(text, len, path, cfg);
    free(text);
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
        return m->activation_op           ? m->activation_op->name
               : m->activation_op_name[0] ? m->activation_op_name
                                          : "unknown";
    return clf_activation_name(m->activation);
}

const char *clf_model_norm_style_name(const clf_model_config *m)
{
    if (m->norm_op)
        return m->norm_op->name;
    return m->norm_op_name[0] ? m->norm_op_name : clf_ln_style_name(m->ln_style);
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

clf_status clf_model_framing(const clf_model_config *mc, const clf_framing *vocab, clf_framing *out)
{
    if (!mc || !out)
        return clf_error(CLF_ERR_INPUT, "model framing: invalid arguments");
    /* no vocabulary: clf_tokenizer_build's ids ([UNK] 0, [PAD] 1, [SOS] 2, [EOS] 3) */
    const clf_framing built = {2, 3, 1, 2, 3, 1, -1, CLF_LANG_NONE, -1, 0};
    const clf_framing *v = vocab ? vocab : &built;
    *out = (clf_framing){.src_bos = !mc->source_bos   ? -1
                                    : mc->bos_id >= 0 ? mc->bos_id
                                                      : v->src_bos,
                         .src_eos = !mc->source_eos   ? -1
                                    : mc->eos_id >= 0 ? mc->eos_id
                                                      : v->src_eos,
                         .src_pad = mc->pad_id,
                         .tgt_start = mc->decoder_start_id >= 0 ? mc->decoder_start_id
                                      : mc->bos_id >= 0         ? mc->bos_id
                                                                : v->tgt_start,
                         .tgt_eos = mc->eos_id >= 0 ? mc->eos_id : v->tgt_eos,
                         .tgt_pad = mc->pad_id,
                         /* the place is the model's, the language the caller's */
                         .src_lang = -1,
                         .src_lang_place = mc->source_language,
                         /* the target's language, when forced, the caller's too */
                         .tgt_lang = -1};
    if (mc->source_bos && out->src_bos < 0)
        return clf_error(CLF_ERR_INPUT, "the source vocabulary has no [SOS] token (set "
                                        "model.bos_id, or model.source_bos: false)");
    if (mc->source_eos && out->src_eos < 0)
        return clf_error(CLF_ERR_INPUT, "the source vocabulary has no [EOS] token (set "
                                        "model.eos_id, or model.source_eos: false)");
    if (out->tgt_start < 0)
        return clf_error(CLF_ERR_INPUT, "the target vocabulary has no [SOS] token (set "
                                        "model.decoder_start_id or model.bos_id)");
    if (out->tgt_eos < 0)
        return clf_error(CLF_ERR_INPUT,
                         "the target vocabulary has no [EOS] token (set model.eos_id)");
    /* a vocabulary's own pad must be the model's: its [PAD] rows are masked as pad_id's */
    if (vocab && vocab->src_pad >= 0 && vocab->src_pad != mc->pad_id)
        return clf_error(CLF_ERR_INPUT,
                         "the source vocabulary's [PAD] is id %d but model.pad_id is %d",
                         (int)vocab->src_pad, mc->pad_id);
    if (vocab && vocab->tgt_pad >= 0 && vocab->tgt_pad != mc->pad_id)
        return clf_error(CLF_ERR_INPUT,
                         "the target vocabulary's [PAD] is id %d but model.pad_id is %d",
                         (int)vocab->tgt_pad, mc->pad_id);
    return CLF_OK;
}

const char *clf_output_name(clf_output o)
{
    return name_or(output_names, 2, (int)o);
}

const char *clf_positional_name(clf_positional p)
{
    return name_or(positional_names, 4, (int)p);
}

const char *clf_lang_place_name(clf_lang_place p)
{
    return name_or(lang_place_names, 3, (int)p);
}

const char *clf_target_language_name(clf_target_language t)
{
    return name_or(tgt_lang_names, 2, (int)t);
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

const char *clf_beam_style_name(int style)
{
    return name_or(beam_style_names, 2, style);
}

const char *clf_precision_name(clf_precision p)
{
    return name_or(precision_names, 3, (int)p);
}

clf_status clf_precision_parse(const char *s, clf_precision *out)
{
    for (int i = 0; precision_names[i]; i++)
        if (s && strcmp(s, precision_names[i]) == 0) {
            *out = (clf_precision)i;
            return CLF_OK;
        }
    return clf_error(CLF_ERR_INPUT, "precision '%s' is not one of f32, bf16, f16", s ? s : "");
}
