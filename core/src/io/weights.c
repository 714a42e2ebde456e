/* The model's parameters under the tutorial PyTorch state_dict() names: the list that a
 * config implies, reproducible initialisation, and safetensors load/save with errors that
 * name the tensor at fault. */
#include "clformer/weights.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/rng.h"
#include "io/safetensors_internal.h"
#include "io/weight_names.h"
#include "numeric/numeric_internal.h"

/* Elements converted at a time where a parameter is read in pieces (clf_weights_read's
 * callers, the tied-copy check). */
#define WEIGHTS_BLOCK ((int64_t)1 << 20)

/* ---- the parameter list ---- */

typedef struct spec_list {
    clf_weight_spec *v;
    int n, cap;
} spec_list;

static void add_spec(spec_list *l, int ndim, int64_t s0, int64_t s1, clf_init_kind init, int fan_in,
                     const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static void add_spec(spec_list *l, int ndim, int64_t s0, int64_t s1, clf_init_kind init, int fan_in,
                     const char *fmt, ...)
{
    clf_weight_spec *s = &l->v[l->n++]; /* capacity is computed up front */
    memset(s, 0, sizeof *s);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->name, sizeof s->name, fmt, ap);
    va_end(ap);
    s->ndim = ndim;
    s->shape[0] = s0;
    s->shape[1] = ndim == 2 ? s1 : 0;
    s->init = init;
    s->fan_in = fan_in;
}

/* nn.Linear(in, out[, bias]) named prefix.weight [out, in] and prefix.bias [out]. */
static void add_linear(spec_list *l, const char *prefix, int in, int out, int bias)
{
    add_spec(l, 2, out, in, CLF_INIT_XAVIER, in, "%s.weight", prefix);
    if (bias)
        add_spec(l, 1, out, 0, CLF_INIT_LINEAR_BIAS, in, "%s.bias", prefix);
}

/* A norm's alpha [d], and its bias [d] unless a plugin norm has none (RMSNorm). */
static void add_norm(spec_list *l, const char *prefix, const clf_model_config *cfg)
{
    add_spec(l, 1, cfg->d_model, 0, CLF_INIT_ONES, 0, "%s.alpha", prefix);
    if (clf_model_norm_has_bias(cfg))
        add_spec(l, 1, cfg->d_model, 0, CLF_INIT_ZEROS, 0, "%s.bias", prefix);
}

static void add_attention(spec_list *l, const char *prefix, int d, int bias)
{
    static const char *const w[] = {"w_q", "w_k", "w_v", "w_o"};
    char name[CLF_TENSOR_NAME_MAX + 8]; /* room for the suffix; add_spec truncates */
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, w[i]);
        add_linear(l, name, d, d, bias);
    }
}

static void add_block(spec_list *l, const char *stack, int layer, int cross,
                      const clf_model_config *cfg)
{
    char p[CLF_TENSOR_NAME_MAX];
    int d = cfg->d_model;
    snprintf(p, sizeof p, "%s.layers.%d.self_attention_block", stack, layer);
    add_attention(l, p, d, cfg->attention_bias);
    if (cross) {
        snprintf(p, sizeof p, "%s.layers.%d.cross_attention_block", stack, layer);
        add_attention(l, p, d, cfg->attention_bias);
    }
    snprintf(p, sizeof p, "%s.layers.%d.feed_forward_block.linear_1", stack, layer);
    add_linear(l, p, d, cfg->d_ff, 1);
    snprintf(p, sizeof p, "%s.layers.%d.feed_forward_block.linear_2", stack, layer);
    add_linear(l, p, cfg->d_ff, d, 1);
    if (clf_model_ffn_gated(cfg)) { /* the gate: u = f(x W1^T + b1) * (x W3^T + b3) */
        snprintf(p, sizeof p, "%s.layers.%d.feed_forward_block.linear_3", stack, layer);
        add_linear(l, p, d, cfg->d_ff, 1);
    }
    for (int r = 0; r < (cross ? 3 : 2); r++) {
        snprintf(p, sizeof p, "%s.layers.%d.residual_connections.%d.norm", stack, layer, r);
        add_norm(l, p, cfg);
    }
}

clf_status clf_weight_specs(const clf_model_config *cfg, clf_weight_spec **out, int *count)
{
    *out = NULL;
    *count = 0;
    const char *bad = cfg->src_vocab <= 0   ? "src_vocab"
                      : cfg->tgt_vocab <= 0 ? "tgt_vocab"
                      : cfg->d_model <= 0   ? "d_model"
                      : cfg->d_ff <= 0      ? "d_ff"
                                            : NULL;
    if (bad && (cfg->src_vocab == 0 || cfg->tgt_vocab == 0))
        return clf_error(CLF_ERR_INPUT,
                         "weights: model.%s is not set (an experiment YAML leaves it to its "
                         "vocabulary: use the config.yaml that clformer train writes)",
                         bad);
    if (bad)
        return clf_error(CLF_ERR_INPUT, "weights: model.%s must be > 0", bad);
    if ((cfg->activation_op_name[0] && !cfg->activation_op) ||
        (cfg->norm_op_name[0] && !cfg->norm_op)) /* clf_config_read's result, not resolved */
        return clf_error(CLF_ERR_INPUT,
                         "weights: op plugin '%s' is not resolved (call "
                         "clf_config_resolve_plugins first)",
                         cfg->activation_op_name[0] && !cfg->activation_op ? cfg->activation_op_name
                                                                           : cfg->norm_op_name);
    if (cfg->encoder_layers < 0 || cfg->decoder_layers < 0)
        return clf_error(CLF_ERR_INPUT, "weights: model.%s must be >= 0",
                         cfg->encoder_layers < 0 ? "encoder_layers" : "decoder_layers");
    /* upper bounds per part: attention 8, feed-forward 6, norms 2 per residual */
    long cap = 2 + 2 + 4 + (long)cfg->encoder_layers * (8 + 6 + 4) + 2 +
               (long)cfg->decoder_layers * (16 + 6 + 6) + 2 + 2;
    if (cap > 1000000)
        return clf_error(CLF_ERR_INPUT, "weights: %d encoder and %d decoder layers are too many",
                         cfg->encoder_layers, cfg->decoder_layers);
    if (cfg->tie_embeddings == CLF_TIE_ALL && cfg->src_vocab != cfg->tgt_vocab)
        return clf_error(CLF_ERR_INPUT,
                         "weights: model.tie_embeddings: all needs src_vocab == tgt_vocab (got "
                         "%d and %d)",
                         cfg->src_vocab, cfg->tgt_vocab);
    spec_list l = {malloc((size_t)cap * sizeof(clf_weight_spec)), 0, (int)cap};
    if (!l.v)
        return clf_error(CLF_ERR_NOMEM, "weights: out of memory");
    int d = cfg->d_model;
    /* a tied matrix is one parameter, tgt_embed.embedding.weight (clf_weights_tied_to); a
     * file may store it under any one of its names (stored_names) */
    if (cfg->tie_embeddings != CLF_TIE_ALL)
        add_spec(&l, 2, cfg->src_vocab, d, CLF_INIT_XAVIER, d, CLF_WN_SRC_EMBED);
    add_spec(&l, 2, cfg->tgt_vocab, d, CLF_INIT_XAVIER, d, CLF_WN_TGT_EMBED);
    /* learned positions are embeddings of the position index, initialised as the token
     * embeddings are (Xavier-uniform, as the reference model does for every matrix) */
    if (cfg->positional == CLF_POS_LEARNED) {
        const int rows = cfg->max_len + cfg->position_offset;
        add_spec(&l, 2, rows, d, CLF_INIT_XAVIER, d, CLF_WN_SRC_POS);
        add_spec(&l, 2, rows, d, CLF_INIT_XAVIER, d, CLF_WN_TGT_POS);
    }
    if (cfg->embed_norm) { /* LayerNorms on the embeddings (mBART's layernorm_embedding) */
        add_norm(&l, "encoder.embed.norm", cfg);
        add_norm(&l, "decoder.embed.norm", cfg);
    }
    for (int i = 0; i < cfg->encoder_layers; i++)
        add_block(&l, "encoder", i, 0, cfg);
    if (cfg->final_norm)
        add_norm(&l, "encoder.norm", cfg);
    for (int i = 0; i < cfg->decoder_layers; i++)
        add_block(&l, "decoder", i, 1, cfg);
    if (cfg->final_norm)
        add_norm(&l, "decoder.norm", cfg);
    if (cfg->tie_embeddings == CLF_TIE_NONE)
        add_linear(&l, "projection_layer.proj", d, cfg->tgt_vocab, 1);
    else /* the weight is tgt_embed's; the bias stays the projection's own */
        add_spec(&l, 1, cfg->tgt_vocab, 0, CLF_INIT_LINEAR_BIAS, d, CLF_WN_PROJ_BIAS);
    *out = l.v;
    *count = l.n;
    return CLF_OK;
}

const char *clf_weights_tied_to(const clf_model_config *cfg, const char *name)
{
    if (cfg->tie_embeddings != CLF_TIE_NONE && strcmp(name, CLF_WN_PROJ_WEIGHT) == 0)
        return CLF_WN_TGT_EMBED;
    if (cfg->tie_embeddings == CLF_TIE_ALL && strcmp(name, CLF_WN_SRC_EMBED) == 0)
        return CLF_WN_TGT_EMBED;
    return NULL;
}

/* The names a file may store a parameter under, in the order they are looked for: its own,
 * then each name tied to it (clf_weights_tied_to). A tied matrix needs only one of them:
 * safetensors' save_model keeps a single name for a shared tensor (projection_layer.proj
 * .weight, the first in sorted order), PyTorch's state_dict() lists them all. */
#define TIED_NAMES_MAX 3
static int stored_names(const clf_model_config *cfg, const char *name,
                        const char *names[TIED_NAMES_MAX])
{
    static const char *const aliases[] = {CLF_WN_PROJ_WEIGHT, CLF_WN_SRC_EMBED};
    int n = 0;
    names[n++] = name;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        const char *to = clf_weights_tied_to(cfg, aliases[i]);
        if (to && strcmp(to, name) == 0)
            names[n++] = aliases[i];
    }
    return n;
}

int64_t clf_weight_spec_numel(const clf_weight_spec *s)
{
    return s->ndim == 2 ? s->shape[0] * s->shape[1] : s->shape[0];
}

/* ---- the container ---- */

/* clf_weights_map's file: parameter i is read from t[i], a tensor of the mapping f */
struct clf_weights_source {
    char *path;
    clf_safetensors *f;
    const clf_tensor **t;
};

static void source_free(struct clf_weights_source *s)
{
    if (!s)
        return;
    clf_safetensors_close(s->f);
    free(s->t);
    free(s->path);
    free(s);
}

void clf_weights_free(clf_weights *w)
{
    if (!w)
        return;
    source_free(w->source);
    if (w->data)
        for (int i = 0; i < w->count; i++)
            free(w->data[i]);
    free(w->data);
    free(w->specs);
    free(w);
}

/* A clf_weights with specs for cfg: with_data, uninitialised data; else data[i] NULL. */
static clf_status weights_new(const clf_model_config *cfg, int with_data, clf_weights **out)
{
    clf_status st;
    *out = NULL;
    clf_weights *w = calloc(1, sizeof *w);
    if (!w)
        return clf_error(CLF_ERR_NOMEM, "weights: out of memory");
    if ((st = clf_weight_specs(cfg, &w->specs, &w->count)) != CLF_OK) {
        free(w);
        return st;
    }
    w->data = calloc((size_t)w->count, sizeof(float *));
    if (!w->data)
        goto nomem;
    for (int i = 0; with_data && i < w->count; i++) {
        int64_t n = clf_weight_spec_numel(&w->specs[i]);
        if ((uint64_t)n > SIZE_MAX / sizeof(float) || !(w->data[i] = malloc((size_t)n * 4)))
            goto nomem;
    }
    *out = w;
    return CLF_OK;
nomem:
    clf_weights_free(w);
    return clf_error(CLF_ERR_NOMEM, "weights: out of memory allocating the parameters");
}

int clf_weights_find(const clf_weights *w, const char *name)
{
    for (int i = 0; i < w->count; i++)
        if (strcmp(w->specs[i].name, name) == 0)
            return i;
    return -1;
}

/* ---- initialisation ---- */

clf_status clf_weights_init(const clf_model_config *cfg, uint64_t seed, clf_weights **out)
{
    clf_status st;
    clf_weights *w;
    if ((st = weights_new(cfg, 1, &w)) != CLF_OK)
        return st;
    /* one generator, tensors in spec order, elements row-major; ones/zeros draw nothing */
    clf_rng rng;
    clf_rng_seed(&rng, seed);
    for (int i = 0; i < w->count; i++) {
        const clf_weight_spec *s = &w->specs[i];
        int64_t n = clf_weight_spec_numel(s);
        float *x = w->data[i];
        float a = 0;
        switch (s->init) {
        case CLF_INIT_XAVIER: /* fan_in = shape[1], fan_out = shape[0] */
            a = (float)sqrt(6.0 / ((double)s->shape[1] + (double)s->shape[0]));
            break;
        case CLF_INIT_LINEAR_BIAS:
            a = (float)(1.0 / sqrt((double)s->fan_in));
            break;
        case CLF_INIT_ONES:
        case CLF_INIT_ZEROS:
            for (int64_t j = 0; j < n; j++)
                x[j] = s->init == CLF_INIT_ONES ? 1.0f : 0.0f;
            continue;
        }
        for (int64_t j = 0; j < n; j++)
            x[j] = clf_rng_uniform_range(&rng, -a, a);
    }
    *out = w;
    return CLF_OK;
}

/* ---- loading ---- */

/* Why the config wants a tensor, for the "is missing" message. */
static void need_reason(const clf_model_config *cfg, const clf_weight_spec *s, char *buf,
                        size_t size)
{
    char shape[64];
    clf_shape_str(s->shape, s->ndim, shape, sizeof shape);
    const char *name = s->name;
    const unsigned kinds = clf_weight_name_kinds(name);
    if (kinds & CLF_WK_ATTENTION_BIAS)
        snprintf(buf, size, "shape %s, attention_bias: true", shape);
    else if (kinds & CLF_WK_POSITIONAL)
        snprintf(buf, size, "shape %s, positional: learned", shape);
    else if (kinds & CLF_WK_FINAL_NORM)
        snprintf(buf, size, "shape %s, final_norm: true", shape);
    else if (clf_weight_name_layer(name, "encoder") >= 0)
        snprintf(buf, size, "shape %s, encoder_layers: %d", shape, cfg->encoder_layers);
    else if (clf_weight_name_layer(name, "decoder") >= 0)
        snprintf(buf, size, "shape %s, decoder_layers: %d", shape, cfg->decoder_layers);
    else
        snprintf(buf, size, "shape %s", shape);
    /* a tied matrix: every name it may be stored under */
    const char *names[TIED_NAMES_MAX];
    const int n = stored_names(cfg, name, names);
    if (n > 1) {
        size_t u = strlen(buf);
        snprintf(buf + u, size - u, "; tie_embeddings: %s stores it under any one of",
                 clf_tie_name(cfg->tie_embeddings));
        for (int i = 0; i < n; i++) {
            const char *sep = i == 0 ? "" : i == n - 1 ? " or" : ",";
            u = strlen(buf);
            snprintf(buf + u, size - u, "%s '%s'", sep, names[i]);
        }
    }
}

/* The config values a tensor's shape follows from, for the "has shape" message. */
static void shape_reason(const clf_model_config *cfg, const char *name, char *buf, size_t size)
{
    const unsigned kinds = clf_weight_name_kinds(name);
    if (kinds & CLF_WK_POSITIONAL)
        snprintf(buf, size, "max_len %d, d_model %d", cfg->max_len, cfg->d_model);
    else if (kinds & CLF_WK_SRC_EMBED)
        snprintf(buf, size, "src_vocab %d, d_model %d", cfg->src_vocab, cfg->d_model);
    else if (kinds & CLF_WK_TGT_VOCAB)
        snprintf(buf, size, "tgt_vocab %d, d_model %d", cfg->tgt_vocab, cfg->d_model);
    else if (kinds & CLF_WK_FEED_FORWARD)
        snprintf(buf, size, "d_model %d, d_ff %d", cfg->d_model, cfg->d_ff);
    else
        snprintf(buf, size, "d_model %d", cfg->d_model);
}

/* Why a tensor of the file is not one of the model's, for the "unexpected" message. */
static void extra_reason(const clf_model_config *cfg, const char *name, char *buf, size_t size)
{
    const unsigned kinds = clf_weight_name_kinds(name);
    int ei = clf_weight_name_layer(name, "encoder"), di = clf_weight_name_layer(name, "decoder");
    if ((kinds & CLF_WK_ATTENTION_BIAS) && !cfg->attention_bias)
        snprintf(buf, size,
                 "the file has attention biases but the config has attention_bias: false");
    else if ((kinds & CLF_WK_POSITIONAL) && cfg->positional != CLF_POS_LEARNED)
        snprintf(buf, size,
                 "the file has learned positional embeddings but the config has positional: "
                 "sinusoidal");
    else if ((kinds & CLF_WK_FINAL_NORM) && !cfg->final_norm)
        snprintf(buf, size,
                 "the file has a final norm but final_norm is off for this config; set "
                 "final_norm: true (auto turns it off for norm: post and branch)");
    else if ((kinds & CLF_WK_FFN_GATE) && !clf_model_ffn_gated(cfg))
        snprintf(buf, size,
                 "the file has a gated feed-forward (linear_3) but activation %s is not gated "
                 "(swiglu and geglu are)",
                 clf_model_activation_name(cfg));
    else if ((kinds & CLF_WK_NORM_BIAS) && !clf_model_norm_has_bias(cfg))
        snprintf(buf, size, "the file has norm biases but layernorm style %s has none",
                 clf_model_norm_style_name(cfg));
    else if (ei >= cfg->encoder_layers)
        snprintf(buf, size, "the file has more encoder layers than encoder_layers: %d",
                 cfg->encoder_layers);
    else if (di >= cfg->decoder_layers)
        snprintf(buf, size, "the file has more decoder layers than decoder_layers: %d",
                 cfg->decoder_layers);
    else if (kinds & CLF_WK_DATA_PARALLEL)
        snprintf(buf, size, "names start with 'module.' (saved from nn.DataParallel): strip it");
    else
        snprintf(buf, size, "names must be the tutorial's state_dict() names");
}

static int shape_matches(const clf_tensor *t, const clf_weight_spec *s)
{
    if (t->ndim != s->ndim)
        return 0;
    for (int i = 0; i < s->ndim; i++)
        if (t->shape[i] != s->shape[i])
            return 0;
    return 1;
}

/* dst = t (F32, F16 or BF16) as F32, every value checked finite in the same pass: a NaN or
 * infinity in a weight silently breaks every output, so it is refused here, naming the
 * tensor and the flat index of the first one. */
/* Elements [first, first + count) of t (F32, F16 or BF16) as F32 into dst, checked finite;
 * an error names path, the tensor and the element's index in it. */
static clf_status load_span(const char *path, const clf_tensor *t, int64_t first, int64_t count,
                            float *dst)
{
    const size_t size = clf_dtype_size(t->dtype);
    clf_tensor v = *t;
    v.ndim = 1;
    v.shape[0] = count;
    v.data = (unsigned char *)t->data + (size_t)first * size;
    v.nbytes = (size_t)count * size;
    int64_t bad = -1;
    clf_status st = clf_tensor_to_f32_finite(&v, dst, &bad);
    if (st != CLF_OK)
        return clf_error_context(st, "%s", path);
    if (bad >= 0)
        return clf_error(CLF_ERR_INPUT,
                         "%s: tensor '%s' holds a non-finite value (%s) at index %lld", path,
                         t->name, clf_nonfinite_name(dst[bad]), (long long)(first + bad));
    return CLF_OK;
}

/* The tensor of f that holds parameter name: the first of its stored_names that f has;
 * NULL when f has none of them. */
static const clf_tensor *find_stored(const clf_safetensors *f, const clf_model_config *cfg,
                                     const char *name)
{
    const char *names[TIED_NAMES_MAX];
    const int n = stored_names(cfg, name, names);
    for (int i = 0; i < n; i++) {
        const clf_tensor *t = clf_safetensors_find(f, names[i]);
        if (t)
            return t;
    }
    return NULL;
}

/* A file may hold a tied matrix under more than one of its names (PyTorch's state_dict()
 * of a tied model lists every alias): t, another than the one it was loaded from (named
 * from), is accepted when it is the same matrix, refused when not, since then the file is
 * not a tied model. */
static clf_status check_tied_copy(const char *path, const clf_model_config *cfg,
                                  const clf_weights *w, const clf_tensor *t, const char *tied,
                                  const char *from)
{
    int k = clf_weights_find(w, tied);
    const clf_weight_spec *s = &w->specs[k];
    const int64_t n = clf_weight_spec_numel(s);
    const int64_t block = n < WEIGHTS_BLOCK ? (n > 0 ? n : 1) : WEIGHTS_BLOCK;
    const char *how = clf_tie_name(cfg->tie_embeddings);
    if (!shape_matches(t, s) ||
        (t->dtype != CLF_F32 && t->dtype != CLF_F16 && t->dtype != CLF_BF16))
        return clf_error(CLF_ERR_INPUT,
                         "%s: tensor '%s' is not a copy of '%s', which it is tied to "
                         "(tie_embeddings: %s): shape or dtype differs",
                         path, t->name, from, how);
    /* compared a block at a time: w may hold the tied tensor or only map it */
    float *copy = malloc(2 * (size_t)block * sizeof(float)), *mine = copy + block;
    if (!copy)
        return clf_error(CLF_ERR_NOMEM, "weights: out of memory");
    clf_status st = CLF_OK;
    for (int64_t e = 0; st == CLF_OK && e < n; e += block) {
        const int64_t len = n - e < block ? n - e : block;
        if ((st = load_span(path, t, e, len, copy)) == CLF_OK &&
            (st = clf_weights_read(w, k, e, len, mine)) == CLF_OK &&
            memcmp(copy, mine, (size_t)len * sizeof(float)) != 0)
            st = clf_error(CLF_ERR_INPUT,
                           "%s: tensor '%s' differs from '%s', which it is tied to "
                           "(tie_embeddings: %s): the file is not a tied model",
                           path, t->name, from, how);
    }
    free(copy);
    return st;
}

/* ---- weight types, int8 matrices ---- */

static const char *const weight_type_names[] = {"f32", "f16", "bf16", "int8"};

const char *clf_weight_type_name(clf_weight_type t)
{
    return (int)t >= 0 && t <= CLF_WEIGHT_INT8 ? weight_type_names[t] : "?";
}

clf_status clf_weight_type_parse(const char *s, clf_weight_type *out)
{
    for (int i = 0; i <= CLF_WEIGHT_INT8; i++)
        if (s && strcmp(s, weight_type_names[i]) == 0) {
            *out = (clf_weight_type)i;
            return CLF_OK;
        }
    return clf_error(CLF_ERR_INPUT, "weight type '%s' is not one of f32, f16, bf16, int8",
                     s ? s : "");
}

/* 1 when name is "<x>.scale" and <x> is an I8 tensor of f (then it belongs to <x>). */
static int is_scale_of_i8(const clf_safetensors *f, const char *name)
{
    const size_t n = strlen(name), sl = strlen(CLF_SCALE_SUFFIX);
    char base[CLF_TENSOR_NAME_MAX];
    if (n <= sl || n - sl >= sizeof base || strcmp(name + n - sl, CLF_SCALE_SUFFIX) != 0)
        return 0;
    memcpy(base, name, n - sl);
    base[n - sl] = '\0';
    const clf_tensor *t = clf_safetensors_find(f, base);
    return t && t->dtype == CLF_I8;
}

/* The scales "<t>.scale" of I8 tensor t (F32 [rows]) into *out, checked but for their
 * values (dequantize_span checks those). */
static clf_status i8_scales(const char *path, const clf_safetensors *f, const clf_tensor *t,
                            const clf_tensor **out)
{
    char sname[CLF_TENSOR_NAME_MAX + 8], a[160];
    snprintf(sname, sizeof sname, "%s%s", t->name, CLF_SCALE_SUFFIX);
    const clf_tensor *sc = clf_safetensors_find(f, sname);
    const int64_t rows = t->shape[0];
    if (!sc)
        return clf_error(CLF_ERR_INPUT,
                         "%s: tensor '%s' is I8 but its scales '%s' (F32 [%lld]) are missing", path,
                         t->name, sname, (long long)rows);
    if (sc->dtype != CLF_F32)
        return clf_error(CLF_ERR_INPUT,
                         "%s: tensor '%s' has dtype %s; the scales of an I8 "
                         "tensor must be F32",
                         path, sname, clf_dtype_name(sc->dtype));
    if (sc->ndim != 1 || sc->shape[0] != rows)
        return clf_error(CLF_ERR_INPUT,
                         "%s: tensor '%s' has shape %s; '%s' (I8, %lld rows) "
                         "needs [%lld]",
                         path, sname, clf_shape_str(sc->shape, sc->ndim, a, sizeof a), t->name,
                         (long long)rows, (long long)rows);
    *out = sc;
    return CLF_OK;
}

/* Elements [first, first + count) of t (I8 [rows, k]) times "<t>.scale" (F32 [rows]) per
 * row into dst, each scale and each value checked. */
static clf_status dequantize_span(const char *path, const clf_safetensors *f, const clf_tensor *t,
                                  int64_t first, int64_t count, float *dst)
{
    const clf_tensor *sc = NULL;
    clf_status st = i8_scales(path, f, t, &sc);
    if (st != CLF_OK)
        return st;
    const int64_t k = t->shape[1];
    const unsigned char *q = t->data, *sp = sc->data;
    for (int64_t e = first; e < first + count;) {
        const int64_t r = e / k, end = (r + 1) * k < first + count ? (r + 1) * k : first + count;
        float s;
        memcpy(&s, sp + 4 * r, 4);
        if (!(s >= 0.0f) || !isfinite(s))
            return clf_error(CLF_ERR_INPUT,
                             "%s: tensor '%s%s' element %lld is %g; a scale must be finite and "
                             ">= 0",
                             path, t->name, CLF_SCALE_SUFFIX, (long long)r, (double)s);
        float *d = dst + (e - first);
        for (int64_t p = e; p < end; p++)
            d[p - e] = (float)(int8_t)q[p] * s;
        const int64_t bad = clf_first_nonfinite(d, (size_t)(end - e));
        if (bad >= 0) /* a finite scale so large that q * scale overflows */
            return clf_error(CLF_ERR_INPUT,
                             "%s: tensor '%s' holds a non-finite value (%s) at index %lld once "
                             "dequantized: its scale %g is too large",
                             path, t->name, clf_nonfinite_name(d[bad]), (long long)(e + bad),
                             (double)s);
        e = end;
    }
    return CLF_OK;
}

/* Elements [first, first + count) of parameter i from w's file. */
static clf_status source_read(const clf_weights *w, int i, int64_t first, int64_t count, float *dst)
{
    const struct clf_weights_source *src = w->source;
    const clf_tensor *t = src->t[i];
    clf_status st = t->dtype == CLF_I8 ? dequantize_span(src->path, src->f, t, first, count, dst)
                                       : load_span(src->path, t, first, count, dst);
    /* read to its end: its pages need not stay resident */
    if (st == CLF_OK && first + count == clf_weight_spec_numel(&w->specs[i]))
        clf_safetensors_drop_pages(src->f, t);
    return st;
}

clf_status clf_weights_read(const clf_weights *w, int i, int64_t first, int64_t count, float *dst)
{
    if (!w || i < 0 || i >= w->count || !dst)
        return clf_error(CLF_ERR_INPUT, "clf_weights_read: no parameter %d", i);
    const int64_t n = clf_weight_spec_numel(&w->specs[i]);
    if (first < 0 || count < 0 || first > n || count > n - first)
        return clf_error(CLF_ERR_INPUT,
                         "clf_weights_read: elements [%lld, %lld) are outside '%s' (%lld elements)",
                         (long long)first, (long long)(first + count), w->specs[i].name,
                         (long long)n);
    if (w->data && w->data[i]) {
        memcpy(dst, w->data[i] + first, (size_t)count * sizeof(float));
        return CLF_OK;
    }
    if (!w->source)
        return clf_error(CLF_ERR_INPUT, "clf_weights_read: '%s' holds no values", w->specs[i].name);
    return count > 0 ? source_read(w, i, first, count, dst) : CLF_OK;
}

clf_status clf_weights_map(const char *path, const clf_model_config *cfg, clf_weights **out)
{
    clf_status st;
    clf_safetensors *f = NULL;
    clf_weights *w = NULL;
    struct clf_weights_source *src = NULL;
    char a[160], b[160], why[320];
    *out = NULL;
    if ((st = clf_safetensors_open(path, &f)) != CLF_OK)
        return st; /* names the file and what is wrong with it */
    if ((st = weights_new(cfg, 0, &w)) != CLF_OK)
        goto fail;
    if (!(src = calloc(1, sizeof *src)) || !(src->path = strdup(path)) ||
        !(src->t = calloc((size_t)(w->count ? w->count : 1), sizeof *src->t))) {
        st = clf_error(CLF_ERR_NOMEM, "weights: out of memory");
        goto fail;
    }
    for (int i = 0; i < w->count; i++) {
        const clf_weight_spec *s = &w->specs[i];
        const clf_tensor *t = find_stored(f, cfg, s->name), *sc;
        if (!t) {
            need_reason(cfg, s, why, sizeof why);
            st = clf_error(CLF_ERR_INPUT, "%s: tensor '%s' is missing (the config needs it: %s)",
                           path, s->name, why);
            goto fail;
        }
        if (!shape_matches(t, s)) {
            clf_shape_str(t->shape, t->ndim, a, sizeof a);
            clf_shape_str(s->shape, s->ndim, b, sizeof b);
            shape_reason(cfg, s->name, why, sizeof why);
            st = clf_error(CLF_ERR_INPUT, "%s: tensor '%s' has shape %s, the config needs %s (%s)",
                           path, t->name, a, b, why);
            goto fail;
        }
        src->t[i] = t;
        if (t->dtype == CLF_I8 && s->ndim == 2) {
            if ((st = i8_scales(path, f, t, &sc)) != CLF_OK)
                goto fail;
            w->stored_type = CLF_WEIGHT_INT8;
            continue;
        }
        if (t->dtype != CLF_F32 && t->dtype != CLF_F16 && t->dtype != CLF_BF16) {
            st = clf_error(CLF_ERR_INPUT,
                           "%s: tensor '%s' has dtype %s; weights must be F32, F16 or BF16 (or "
                           "I8 matrices with their scales)",
                           path, t->name, clf_dtype_name(t->dtype));
            goto fail;
        }
    }
    src->f = f;
    w->source = src;
    f = NULL;
    src = NULL;
    const clf_safetensors *mf = w->source->f;
    for (int i = 0; i < clf_safetensors_count(mf); i++) {
        const clf_tensor *t = clf_safetensors_at(mf, i);
        const char *name = t->name;
        /* optimizer state of a checkpoint, and the PE buffers the tutorial's
         * PositionalEncoding registers in state_dict() (clformer computes the table) */
        if ((clf_weight_name_kinds(name) & CLF_WK_NOT_PARAMETER) ||
            clf_weights_find(w, name) >= 0 || is_scale_of_i8(mf, name))
            continue;
        const char *tied = clf_weights_tied_to(cfg, name);
        if (tied) {
            const clf_tensor *from = find_stored(mf, cfg, tied); /* what tied is read from */
            if (from != t && (st = check_tied_copy(path, cfg, w, t, tied, from->name)) != CLF_OK)
                goto fail;
            continue;
        }
        extra_reason(cfg, name, why, sizeof why);
        st = clf_error(CLF_ERR_INPUT, "%s: unexpected tensor '%s' (not part of this model; %s)",
                       path, name, why);
        goto fail;
    }
    const char *meta = clf_safetensors_meta(mf, CLF_WEIGHT_TYPE_META);
    clf_weight_type mt;
    if (meta && clf_weight_type_parse(meta, &mt) == CLF_OK)
        w->stored_type = mt;
    *out = w;
    return CLF_OK;
fail:
    source_free(src);
    clf_safetensors_close(f);
    clf_weights_free(w);
    return st;
}

clf_status clf_weights_load(const char *path, const clf_model_config *cfg, clf_weights **out)
{
    clf_weights *w = NULL;
    clf_status st = clf_weights_map(path, cfg, &w);
    *out = NULL;
    if (st != CLF_OK)
        return st;
    for (int i = 0; i < w->count; i++) {
        const int64_t n = clf_weight_spec_numel(&w->specs[i]);
        if ((uint64_t)n > SIZE_MAX / sizeof(float) || !(w->data[i] = malloc((size_t)n * 4))) {
            st = clf_error(CLF_ERR_NOMEM, "weights: out of memory allocating the parameters");
            goto fail;
        }
        if ((st = source_read(w, i, 0, n, w->data[i])) != CLF_OK)
            goto fail;
    }
    source_free(w->source); /* every value is converted: the file is no longer needed */
    w->source = NULL;
    *out = w;
    return CLF_OK;
fail:
    clf_weights_free(w);
    return st;
}

/* ---- saving ---- */

clf_status clf_weights_as_tensors(const clf_weights *w, clf_tensor **out)
{
    *out = NULL;
    clf_tensor *t = calloc(w->count ? (size_t)w->count : 1, sizeof *t);
    if (!t)
        return clf_error(CLF_ERR_NOMEM, "weights: out of memory");
    for (int i = 0; i < w->count; i++) {
        const clf_weight_spec *s = &w->specs[i];
        snprintf(t[i].name, sizeof t[i].name, "%s", s->name);
        t[i].dtype = CLF_F32;
        t[i].ndim = s->ndim;
        for (int d = 0; d < s->ndim; d++)
            t[i].shape[d] = s->shape[d];
        t[i].data = w->data[i];
        t[i].nbytes = (size_t)clf_weight_spec_numel(s) * sizeof(float);
    }
    *out = t;
    return CLF_OK;
}

clf_status clf_weights_save(const clf_weights *w, const char *path, const char *const *meta,
                            int n_meta)
{
    clf_status st;
    clf_tensor *t;
    if ((st = clf_weights_as_tensors(w, &t)) != CLF_OK)
        return st;
    st = clf_safetensors_write(path, t, w->count, meta, n_meta);
    free(t);
    return st;
}
