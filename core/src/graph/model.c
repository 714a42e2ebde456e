/* The Transformer forward pass, lowered to a backend op list (see clformer/model.h).
 *
 * Notation in the comments: B batch, S source length, T target length, d d_model,
 * h heads, dk = d/h, F d_ff, V vocabulary. Activations are row-major [rows, features]
 * with rows = B*S (encoder) or B*T (decoder). */
#include "clformer/model.h"

#include "graph/autodiff.h"
#include "graph/model_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest device buffer the weights are packed into: big enough to keep the count of
 * buffers small, small enough to stay under every device's max allocation. */
#define CLF_WEIGHT_CHUNK_MAX ((size_t)1 << 30)
/* Byte alignment of each packed weight group (OpenCL base-address alignment is <= 128). */
#define CLF_WEIGHT_ALIGN 256

struct clf_model {
    clf_model_config cfg;
    const clf_backend_api *api;
    clf_backend *be;
    int n_weights;
    clf_weight_spec *specs; /* copy of the weight specs: names and shapes */
    clf_ptr *wdev;          /* per weight: where it lives on the device */
    clf_buffer **chunks;
    size_t *chunk_bytes;
    int n_chunks;
    clf_buffer **grad_chunks; /* training: one gradient buffer per weight chunk, same layout */
    clf_buffer **half_chunks; /* clf_model_enable_half_weights: per chunk, its GEMM matrices as
                                 F16 at half the byte offsets (other tensors: zeros) */
    size_t half_bytes;
    clf_buffer *pe; /* [max_len, d] */
    size_t weight_bytes;
    /* the forward graph of the last shape, reused while the shape stays */
    clf_graph g;
    int g_valid, g_batch, g_src, g_tgt;
    int v_src, v_tgt, v_src_mask, v_tgt_mask, v_enc, v_logits;
    clf_buffer *arena;
    size_t arena_cap;
};

void clf_positional_encoding(float *pe, int max_len, int d)
{
    /* As the tutorial: div_term = exp(arange(0, d, 2) * (-ln(10000)/d)), all float32 */
    const float k = (float)(-log(10000.0) / d);
    for (int i = 0; 2 * i < d; i++) {
        const float div = expf((float)(2 * i) * k);
        for (int pos = 0; pos < max_len; pos++) {
            const float arg = (float)pos * div;
            pe[(size_t)pos * d + 2 * i] = sinf(arg);
            if (2 * i + 1 < d)
                pe[(size_t)pos * d + 2 * i + 1] = cosf(arg);
        }
    }
}

/* ---------------------------------------------------------------------------------- */
/* weights on the device                                                               */

static int find_spec(const clf_model *m, const char *name)
{
    for (int i = 0; i < m->n_weights; i++)
        if (strcmp(m->specs[i].name, name) == 0)
            return i;
    return -1;
}

/* The index of the weight chunk that is buffer buf, or -1 (the PE table, activations). */
static int chunk_holding(const clf_model *m, const clf_buffer *buf)
{
    for (int c = 0; c < m->n_chunks; c++)
        if (m->chunks[c] == buf)
            return c;
    return -1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The packing groups: each attention block's w_q, w_k, w_v (and their biases) go side by
 * side, so [Wq;Wk;Wv] is one [3d, d] matrix for the fused self-attention projection and
 * [Wk;Wv] one [2d, d] matrix for the cross-attention keys and values. Every other tensor
 * is a group of its own. group_of[i] lists the members starting at a group's leader. */
static int weight_group(const clf_model *m, int i, int members[3])
{
    const char *name = m->specs[i].name;
    const char *kinds[2] = {".w_q.weight", ".w_q.bias"};
    for (int k = 0; k < 2; k++) {
        if (!ends_with(name, kinds[k]))
            continue;
        char other[CLF_TENSOR_NAME_MAX];
        size_t stem = strlen(name) - strlen(kinds[k]);
        members[0] = i;
        for (int j = 1; j < 3; j++) {
            snprintf(other, sizeof other, "%.*s.w_%c.%s", (int)stem, name, j == 1 ? 'k' : 'v',
                     k == 0 ? "weight" : "bias");
            members[j] = find_spec(m, other);
            if (members[j] < 0)
                return 1; /* not a full block: pack alone */
        }
        return 3;
    }
    if (ends_with(name, ".w_k.weight") || ends_with(name, ".w_v.weight") ||
        ends_with(name, ".w_k.bias") || ends_with(name, ".w_v.bias")) {
        char q[CLF_TENSOR_NAME_MAX];
        snprintf(q, sizeof q, "%s", name);
        q[strlen(q) - (ends_with(name, "weight") ? 8 : 6)] = 'q';
        if (find_spec(m, q) >= 0)
            return 0; /* packed with its w_q */
    }
    members[0] = i;
    return 1;
}

static size_t align_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

static clf_status upload_weights(clf_model *m, const clf_weights *w)
{
    clf_status st = CLF_OK;
    uint64_t limit = m->api->max_alloc ? m->api->max_alloc(m->be) : 0;
    size_t cap = CLF_WEIGHT_CHUNK_MAX;
    if (limit && limit < cap)
        cap = (size_t)limit;
    /* pass 1: assign (chunk, offset) per weight; pass 2: allocate and upload */
    int *chunk_of = calloc((size_t)m->n_weights, sizeof(int));
    size_t *chunk_size = calloc((size_t)m->n_weights + 1, sizeof(size_t));
    if (!chunk_of || !chunk_size) {
        st = clf_error(CLF_ERR_NOMEM, "weights: out of host memory");
        goto fail;
    }
    int chunk = 0;
    size_t used = 0;
    for (int i = 0; i < m->n_weights; i++) {
        int members[3];
        int n = weight_group(m, i, members);
        if (n == 0)
            continue;
        size_t bytes = 0;
        for (int j = 0; j < n; j++)
            bytes += (size_t)clf_weight_spec_numel(&m->specs[members[j]]) * sizeof(float);
        if (bytes > cap) {
            st = clf_error(CLF_ERR_NOMEM,
                           "weights: tensor '%s' needs %zu bytes on the device, more than its "
                           "largest allocation (%zu bytes)",
                           m->specs[i].name, bytes, cap);
            goto fail;
        }
        if (used && align_up(used, CLF_WEIGHT_ALIGN) + bytes > cap) {
            chunk_size[chunk++] = used;
            used = 0;
        }
        used = align_up(used, CLF_WEIGHT_ALIGN);
        for (int j = 0; j < n; j++) {
            chunk_of[members[j]] = chunk;
            m->wdev[members[j]].off = used;
            used += (size_t)clf_weight_spec_numel(&m->specs[members[j]]) * sizeof(float);
        }
    }
    chunk_size[chunk++] = used;
    m->chunks = calloc((size_t)chunk, sizeof(clf_buffer *));
    m->chunk_bytes = calloc((size_t)chunk, sizeof(size_t));
    if (!m->chunks || !m->chunk_bytes) {
        st = clf_error(CLF_ERR_NOMEM, "weights: out of host memory");
        goto fail;
    }
    m->n_chunks = chunk;
    for (int c = 0; c < chunk; c++) {
        size_t bytes = chunk_size[c] ? chunk_size[c] : 4;
        m->chunk_bytes[c] = bytes;
        if ((st = m->api->alloc(m->be, bytes, &m->chunks[c])) != CLF_OK) {
            clf_error_context(st, "weights: allocating %zu bytes", bytes);
            goto fail;
        }
        m->weight_bytes += bytes;
    }
    for (int i = 0; i < m->n_weights; i++) {
        m->wdev[i].buf = m->chunks[chunk_of[i]];
        size_t bytes = (size_t)clf_weight_spec_numel(&m->specs[i]) * sizeof(float);
        if ((st = m->api->upload(m->be, m->wdev[i], w->data[i], bytes)) != CLF_OK) {
            clf_error_context(st, "weights: uploading '%s'", m->specs[i].name);
            goto fail;
        }
    }
fail:
    free(chunk_of);
    free(chunk_size);
    return st;
}

static clf_status check_weights_match(const clf_model *m, const clf_weights *w)
{
    if (w->count != m->n_weights)
        return clf_error(CLF_ERR_INPUT, "weights: %d tensors given, the config needs %d", w->count,
                         m->n_weights);
    for (int i = 0; i < m->n_weights; i++) {
        const clf_weight_spec *a = &m->specs[i], *b = &w->specs[i];
        if (strcmp(a->name, b->name) != 0 || a->ndim != b->ndim ||
            clf_weight_spec_numel(a) != clf_weight_spec_numel(b))
            return clf_error(CLF_ERR_INPUT, "weights: tensor %d is '%s', the config needs '%s'", i,
                             b->name, a->name);
    }
    return CLF_OK;
}

/* The plugin ops the model uses, checked (and, on OpenCL, compiled) on this backend
 * before anything runs; with training, their backward forms too. Errors name the
 * plugin, the op and the backend. */
static clf_status prepare_plugin_ops(const clf_model_config *cfg, const clf_backend_api *api,
                                     clf_backend *be, int training)
{
    const clf_plugin_op *used[2] = {cfg->activation_op, cfg->norm_op};
    const clf_op fwd[2] = {CLF_OP_ACTIVATION, CLF_OP_NORM};
    const clf_op bwd[2] = {CLF_OP_ACTIVATION_BACKWARD, CLF_OP_NORM_BACKWARD};
    for (int k = 0; k < 2; k++) {
        if (!used[k])
            continue;
        clf_status st = clf_backend_require(api, be, training ? bwd[k] : fwd[k]);
        if (st == CLF_OK)
            st = api->plugin_prepare(be, used[k]);
        if (st != CLF_OK)
            return clf_error_context(st, "model: %s '%s' of plugin %s",
                                     k == 0 ? "activation" : "layernorm style", used[k]->name,
                                     clf_plugin_path_of(used[k]));
    }
    return CLF_OK;
}

static const clf_op model_ops[] = {CLF_OP_GEMM,  CLF_OP_LAYERNORM, CLF_OP_ATTENTION,
                                   CLF_OP_EMBED, CLF_OP_ADD,       CLF_OP_SOFTMAX};

clf_status clf_model_create(const clf_model_config *cfg, const clf_weights *w,
                            const clf_backend_api *api, clf_backend *be, clf_model **out)
{
    clf_status st = CLF_OK;
    float *pe_host = NULL;
    clf_model *m = calloc(1, sizeof *m);
    *out = NULL;
    if (!m)
        return clf_error(CLF_ERR_NOMEM, "model: out of host memory");
    m->cfg = *cfg;
    m->api = api;
    m->be = be;
    clf_graph_init(&m->g);
    for (size_t i = 0; i < sizeof model_ops / sizeof model_ops[0]; i++)
        if ((st = clf_backend_require(api, be, model_ops[i])) != CLF_OK)
            goto fail;
    if ((st = prepare_plugin_ops(cfg, api, be, 0)) != CLF_OK)
        goto fail;
    if (cfg->positional == CLF_POS_SINUSOIDAL && cfg->d_model % 2 != 0) {
        st = clf_error(CLF_ERR_INPUT,
                       "model: d_model %d must be even for positional: sinusoidal (sin/cos "
                       "pairs)",
                       cfg->d_model);
        goto fail;
    }
    if ((st = clf_weight_specs(cfg, &m->specs, &m->n_weights)) != CLF_OK)
        goto fail;
    if ((st = check_weights_match(m, w)) != CLF_OK)
        goto fail;
    m->wdev = calloc((size_t)m->n_weights, sizeof(clf_ptr));
    if (!m->wdev) {
        st = clf_error(CLF_ERR_NOMEM, "model: out of host memory");
        goto fail;
    }
    if ((st = upload_weights(m, w)) != CLF_OK)
        goto fail;
    if (cfg->positional == CLF_POS_LEARNED) { /* the tables are weights: no fixed table */
        *out = m;
        return CLF_OK;
    }
    size_t pe_bytes = (size_t)cfg->max_len * cfg->d_model * sizeof(float);
    pe_host = malloc(pe_bytes);
    if (!pe_host) {
        st = clf_error(CLF_ERR_NOMEM, "model: out of host memory");
        goto fail;
    }
    clf_positional_encoding(pe_host, cfg->max_len, cfg->d_model);
    if ((st = api->alloc(be, pe_bytes, &m->pe)) != CLF_OK ||
        (st = api->upload(be, (clf_ptr){m->pe, 0}, pe_host, pe_bytes)) != CLF_OK) {
        clf_error_context(st, "model: positional-encoding table");
        goto fail;
    }
    m->weight_bytes += pe_bytes;
    free(pe_host);
    *out = m;
    return CLF_OK;
fail:
    free(pe_host);
    clf_model_free(m);
    return st;
}

void clf_model_free(clf_model *m)
{
    if (!m)
        return;
    if (m->api) {
        for (int c = 0; c < m->n_chunks; c++) {
            if (m->chunks[c])
                m->api->free(m->be, m->chunks[c]);
            if (m->grad_chunks && m->grad_chunks[c])
                m->api->free(m->be, m->grad_chunks[c]);
            if (m->half_chunks && m->half_chunks[c])
                m->api->free(m->be, m->half_chunks[c]);
        }
        if (m->pe)
            m->api->free(m->be, m->pe);
        if (m->arena)
            m->api->free(m->be, m->arena);
    }
    clf_graph_free(&m->g);
    free(m->chunks);
    free(m->chunk_bytes);
    free(m->grad_chunks);
    free(m->half_chunks);
    free(m->wdev);
    free(m->specs);
    free(m);
}

/* ---------------------------------------------------------------------------------- */
/* graph building                                                                      */

typedef struct builder {
    clf_model *m;
    clf_graph *g;
    int *wval; /* weight index -> graph value, -1 until first used */
    int pe;    /* graph value of the sinusoidal PE table; -1 with learned positions */
    int d, dk;
    /* training: single-assignment residuals (the backward pass needs every input kept)
     * and dropout; n_dropout numbers the dropout sites */
    int training;
    float p_residual, p_embedding, p_attention, p_ffn; /* dropout rates, 0 at inference */
    int n_dropout;
} builder;

/* The graph value of weight `name` spanning `count` packed tensors from it (count 3 for
 * [Wq;Wk;Wv]); -1 when the model has no such tensor (a bias with attention_bias off). */
static int weight_span(builder *b, const char *name, int count)
{
    /* a tied matrix is one weight, hence one graph value for all its uses: autodiff then
     * accumulates every use's gradient into its one gradient buffer */
    const char *tied = clf_weights_tied_to(&b->m->cfg, name);
    int i = find_spec(b->m, tied ? tied : name);
    if (i < 0)
        return -1;
    if (count == 1 && b->wval[i] >= 0)
        return b->wval[i];
    /* the packed members of a group all have the leader's shape */
    size_t bytes = (size_t)count * (size_t)clf_weight_spec_numel(&b->m->specs[i]) * sizeof(float);
    int v = clf_graph_external(b->g, b->m->wdev[i], bytes, name);
    if (count == 1)
        b->wval[i] = v;
    return v;
}

static int weightf(builder *b, int count, const char *fmt, const char *prefix, const char *suffix)
{
    char name[CLF_TENSOR_NAME_MAX];
    snprintf(name, sizeof name, fmt, prefix, suffix);
    return weight_span(b, name, count);
}

static int required(builder *b, int v, const char *prefix, const char *what)
{
    if (v < 0 && b->g->status == CLF_OK)
        b->g->status = clf_error(CLF_ERR_INTERNAL, "model: weight %s%s missing", prefix, what);
    return v;
}

static int activation(builder *b, size_t elems, const char *label)
{
    return clf_graph_value(b->g, CLF_VALUE_ACTIVATION, elems * sizeof(float), label);
}

/* Training: a new value dropout(x[n]) at rate p (inverted dropout; the node's tag numbers
 * the site so that the trainer gives it, and its backward twin, one seed per step). At
 * inference, or with p = 0, x itself. */
static int dropout(builder *b, int x, size_t n, float p, const char *label)
{
    if (!b->training || p <= 0.0f)
        return x;
    int y = activation(b, n, "dropped");
    clf_dropout_args a = {.n = n, .p = p};
    clf_node *nd = clf_graph_node(b->g, CLF_OP_DROPOUT, &a, sizeof a, label);
    if (nd)
        nd->tag = b->n_dropout++;
    clf_graph_bind(b->g, nd, offsetof(clf_dropout_args, out), y, 0);
    clf_graph_bind(b->g, nd, offsetof(clf_dropout_args, x), x, 0);
    return y;
}

/* out[n] = x[n] + y[n]; out may be x (in place) */
static void add_into(builder *b, int out, int x, int y, size_t n, const char *label)
{
    clf_add_args a = {.n = n};
    clf_node *nd = clf_graph_node(b->g, CLF_OP_ADD, &a, sizeof a, label);
    clf_graph_bind(b->g, nd, offsetof(clf_add_args, out), out, 0);
    clf_graph_bind(b->g, nd, offsetof(clf_add_args, a), x, 0);
    clf_graph_bind(b->g, nd, offsetof(clf_add_args, b), y, 0);
}

/* The F16 twin of weight value w (clf_model_enable_half_weights), or -1 without one. */
static int half_of(builder *b, int w)
{
    const clf_model *m = b->m;
    if (!m->half_chunks || w < 0 || b->g->values[w].kind != CLF_VALUE_EXTERNAL)
        return -1;
    const clf_value *v = &b->g->values[w];
    int c = chunk_holding(m, v->ext.buf);
    return c < 0 ? -1
                 : clf_graph_external(b->g, (clf_ptr){m->half_chunks[c], v->ext.off / 2},
                                      v->bytes / 2, "weight (F16)");
}

/* y[M, N] (= or +=) x[M, K] · W[N, K]^T + bias[N], then relu if asked.
 * x and y start at elements x_off / y_off of their values and have row strides x_ld / y_ld;
 * accumulate adds to what y holds (the residual add fused into the GEMM, beta = 1). */
static void linear(builder *b, const char *label, int y, size_t y_off, int y_ld, int x,
                   size_t x_off, int x_ld, int w, int bias, int M, int N, int K, int relu,
                   int accumulate)
{
    clf_gemm_args a = {.trans_a = 0,
                       .trans_b = 1,
                       .m = M,
                       .n = N,
                       .k = K,
                       .alpha = 1.0f,
                       .beta = accumulate ? 1.0f : 0.0f,
                       .lda = x_ld,
                       .ldb = K,
                       .ldc = y_ld,
                       .relu = relu};
    clf_node *n = clf_graph_node(b->g, CLF_OP_GEMM, &a, sizeof a, label);
    clf_graph_bind(b->g, n, offsetof(clf_gemm_args, a), x, x_off);
    clf_graph_bind(b->g, n, offsetof(clf_gemm_args, b), w, 0);
    clf_graph_bind(b->g, n, offsetof(clf_gemm_args, c), y, y_off);
    if (bias >= 0)
        clf_graph_bind(b->g, n, offsetof(clf_gemm_args, bias), bias, 0);
    /* inference only: training changes the weights, and the F16 copy is a snapshot */
    int wh = b->training ? -1 : half_of(b, w);
    if (wh >= 0)
        clf_graph_bind(b->g, n, offsetof(clf_gemm_args, b_half), wh, 0);
}

/* out[rows, d] = alpha * n(x[rows, d]) + beta with n a plugin's norm (layernorm.style:
 * NAME); beta only when the norm has one */
static void plugin_norm(builder *b, const char *prefix, int out, int x, int rows)
{
    const clf_model_config *c = &b->m->cfg;
    clf_norm_args a = {.op = c->norm_op, .rows = rows, .cols = b->d, .eps = c->ln_eps};
    int alpha = required(b, weightf(b, 1, "%s%s", prefix, ".alpha"), prefix, ".alpha");
    int beta = -1;
    if (c->norm_op->norm_has_bias &&
        (beta = required(b, weightf(b, 1, "%s%s", prefix, ".bias"), prefix, ".bias")) < 0)
        return;
    if (alpha < 0)
        return;
    clf_node *n = clf_graph_node(b->g, CLF_OP_NORM, &a, sizeof a, prefix);
    clf_graph_bind(b->g, n, offsetof(clf_norm_args, out), out, 0);
    clf_graph_bind(b->g, n, offsetof(clf_norm_args, x), x, 0);
    clf_graph_bind(b->g, n, offsetof(clf_norm_args, alpha), alpha, 0);
    if (beta >= 0)
        clf_graph_bind(b->g, n, offsetof(clf_norm_args, beta), beta, 0);
}

/* out[rows, d] = LN(x[rows, d]) with the parameters <prefix>.alpha / <prefix>.bias */
static void layernorm(builder *b, const char *prefix, int out, int x, int rows)
{
    const clf_model_config *c = &b->m->cfg;
    if (c->norm_op) {
        plugin_norm(b, prefix, out, x, rows);
        return;
    }
    clf_layernorm_args a = {.rows = rows, .cols = b->d, .style = c->ln_style, .eps = c->ln_eps};
    int alpha = required(b, weightf(b, 1, "%s%s", prefix, ".alpha"), prefix, ".alpha");
    int beta = required(b, weightf(b, 1, "%s%s", prefix, ".bias"), prefix, ".bias");
    if (alpha < 0 || beta < 0)
        return;
    clf_node *n = clf_graph_node(b->g, CLF_OP_LAYERNORM, &a, sizeof a, prefix);
    clf_graph_bind(b->g, n, offsetof(clf_layernorm_args, out), out, 0);
    clf_graph_bind(b->g, n, offsetof(clf_layernorm_args, x), x, 0);
    clf_graph_bind(b->g, n, offsetof(clf_layernorm_args, alpha), alpha, 0);
    clf_graph_bind(b->g, n, offsetof(clf_layernorm_args, beta), beta, 0);
}

/* One attention site of a sublayer: where the queries and keys/values come from. */
typedef struct attention_site {
    int B, Tq, Tk;
    int kv_src; /* cross-attention: the encoder output [B*S, d]; -1 for self-attention */
    int mask;   /* I32 [B, Tk] key mask value; -1: no mask */
    int causal;
    /* Decoding with a KV cache (Tq = 1): keys and values are read from `cache`, this
     * layer's block of [slots, cache_len, 2d] rows (k|v side by side) starting at element
     * cache_off; slot b holds sentence b. Self-attention first writes this step's k|v at
     * row write_pos of each slot; cross-attention (write_pos < 0) only reads. */
    int has_cache;
    int cache;
    size_t cache_off;
    int cache_len, write_pos;
    int probs; /* value receiving the softmax [B, h, Tq, Tk], or -1 */
} attention_site;

/* The attention node of a block (q, k, v at their values and offsets, the site's optional
 * mask and probs), then y[B*q_len, d] (= or +=) ctx · Wo^T (+ bo). Shared by the full
 * pass and the cached decoding step, which differ only in where q, k and v come from. */
static void attend_and_project(builder *b, const char *prefix, const clf_attention_args *a,
                               const attention_site *s, int q, size_t q_off, int kv, size_t k_off,
                               size_t v_off, int ctx, int y, int accumulate)
{
    const int d = b->d, rows = a->batch * a->q_len;
    char label[96];
    clf_node *n = clf_graph_node(b->g, CLF_OP_ATTENTION, a, sizeof *a, prefix);
    if (n && b->training && b->p_attention > 0.0f) {
        /* dropout on the softmax weights: a site of its own, seeded like a dropout node */
        n->args.attention.dropout_p = b->p_attention;
        n->tag = b->n_dropout++;
    }
    clf_graph_bind(b->g, n, offsetof(clf_attention_args, q), q, q_off);
    clf_graph_bind(b->g, n, offsetof(clf_attention_args, k), kv, k_off);
    clf_graph_bind(b->g, n, offsetof(clf_attention_args, v), kv, v_off);
    clf_graph_bind(b->g, n, offsetof(clf_attention_args, out), ctx, 0);
    if (s->mask >= 0)
        clf_graph_bind(b->g, n, offsetof(clf_attention_args, key_mask), s->mask, 0);
    if (s->probs >= 0)
        clf_graph_bind(b->g, n, offsetof(clf_attention_args, probs), s->probs, 0);
    int wo = required(b, weightf(b, 1, "%s%s", prefix, ".w_o.weight"), prefix, ".w_o");
    int bo = weightf(b, 1, "%s%s", prefix, ".w_o.bias");
    snprintf(label, sizeof label, "%s.w_o", prefix);
    linear(b, label, y, 0, d, ctx, 0, d, wo, bo, rows, d, d, 0, accumulate);
}

/* One decoding step of an attention block with the KV cache (see attention_site):
 *   q [B, d] = x · Wq^T (+ bq)
 *   self:  cache[b, write_pos, 0:2d] = x[b] · [Wk;Wv]^T (+ [bk;bv])  (the GEMM writes
 *          straight into the cache: row b lands cache_len rows after row b-1)
 *   ctx [B, d] = attention of q over cache[b, 0:Tk]
 *   y [B, d] (= or +=) ctx · Wo^T (+ bo) */
static void attention_block_cached(builder *b, const char *prefix, const attention_site *s, int x,
                                   int y, int accumulate)
{
    const int d = b->d, B = s->B;
    const size_t row2 = 2 * (size_t)d, slot = (size_t)s->cache_len * row2;
    char label[96];
    int wq = required(b, weightf(b, 1, "%s%s", prefix, ".w_q.weight"), prefix, ".w_q");
    int bq = weightf(b, 1, "%s%s", prefix, ".w_q.bias");
    int q = activation(b, (size_t)B * d, "q");
    int ctx = activation(b, (size_t)B * d, "ctx");
    snprintf(label, sizeof label, "%s.w_q", prefix);
    linear(b, label, q, 0, d, x, 0, d, wq, bq, B, d, d, 0, 0);
    if (s->write_pos >= 0) {
        int wkv = required(b, weightf(b, 2, "%s%s", prefix, ".w_k.weight"), prefix, ".w_k");
        int bkv = weightf(b, 2, "%s%s", prefix, ".w_k.bias");
        snprintf(label, sizeof label, "%s.w_kv", prefix);
        linear(b, label, s->cache, s->cache_off + (size_t)s->write_pos * row2, (int)slot, x, 0, d,
               wkv, bkv, B, 2 * d, d, 0, 0);
    }
    clf_attention_args a = {.batch = B,
                            .heads = b->m->cfg.heads,
                            .q_len = 1,
                            .kv_len = s->Tk,
                            .head_dim = b->dk,
                            .q_ld = d,
                            .k_ld = 2 * d,
                            .v_ld = 2 * d,
                            .out_ld = d,
                            .q_bstride = (size_t)d,
                            .kv_bstride = slot,
                            .out_bstride = (size_t)d,
                            .key_mask_stride = (size_t)s->Tk,
                            .scale = (float)(1.0 / sqrt((double)b->dk))};
    attend_and_project(b, prefix, &a, s, q, 0, s->cache, s->cache_off, s->cache_off + (size_t)d,
                       ctx, y, accumulate);
}

/* ctx[B*Tq, d] = concat_h softmax(q_h k_h^T / sqrt(dk), masked) v_h, where
 *   self-attention:  [q|k|v] [B*Tq, 3d] = x · [Wq;Wk;Wv]^T (+ [bq;bk;bv])
 *   cross-attention: q [B*Tq, d] = x · Wq^T,  [k|v] [B*Tk, 2d] = enc · [Wk;Wv]^T
 * then y[B*Tq, d] (= or +=) ctx · Wo^T (+ bo). */
static void attention_block(builder *b, const char *prefix, const attention_site *s, int x, int y,
                            int accumulate)
{
    if (s->has_cache) {
        attention_block_cached(b, prefix, s, x, y, accumulate);
        return;
    }
    const int d = b->d, B = s->B, Tq = s->Tq, Tk = s->Tk;
    const size_t rq = (size_t)B * Tq, rk = (size_t)B * Tk;
    char label[96];
    int ctx = activation(b, rq * d, "ctx");
    clf_attention_args a = {.batch = B,
                            .heads = b->m->cfg.heads,
                            .q_len = Tq,
                            .kv_len = Tk,
                            .head_dim = b->dk,
                            .out_ld = d,
                            .out_bstride = (size_t)Tq * d,
                            .key_mask_stride = (size_t)Tk,
                            .causal = s->causal,
                            .q_pos0 = 0,
                            /* the tutorial divides by sqrt(dk); 1/sqrt(dk) is within 1 ulp */
                            .scale = (float)(1.0 / sqrt((double)b->dk))};
    int q, kv;
    size_t q_off, k_off, v_off;
    if (s->kv_src < 0) {
        int wqkv = required(b, weightf(b, 3, "%s%s", prefix, ".w_q.weight"), prefix, ".w_q");
        int bqkv = weightf(b, 3, "%s%s", prefix, ".w_q.bias");
        q = kv = activation(b, rq * 3 * d, "qkv");
        snprintf(label, sizeof label, "%s.w_qkv", prefix);
        linear(b, label, q, 0, 3 * d, x, 0, d, wqkv, bqkv, (int)rq, 3 * d, d, 0, 0);
        q_off = 0, k_off = (size_t)d, v_off = 2 * (size_t)d;
        a.q_ld = a.k_ld = a.v_ld = 3 * d;
        a.q_bstride = a.kv_bstride = (size_t)Tq * 3 * d;
    } else {
        int wq = required(b, weightf(b, 1, "%s%s", prefix, ".w_q.weight"), prefix, ".w_q");
        int bq = weightf(b, 1, "%s%s", prefix, ".w_q.bias");
        int wkv = required(b, weightf(b, 2, "%s%s", prefix, ".w_k.weight"), prefix, ".w_k");
        int bkv = weightf(b, 2, "%s%s", prefix, ".w_k.bias");
        q = activation(b, rq * d, "q");
        kv = activation(b, rk * 2 * d, "kv");
        snprintf(label, sizeof label, "%s.w_q", prefix);
        linear(b, label, q, 0, d, x, 0, d, wq, bq, (int)rq, d, d, 0, 0);
        snprintf(label, sizeof label, "%s.w_kv", prefix);
        linear(b, label, kv, 0, 2 * d, s->kv_src, 0, d, wkv, bkv, (int)rk, 2 * d, d, 0, 0);
        q_off = 0, k_off = 0, v_off = (size_t)d;
        a.q_ld = d;
        a.k_ld = a.v_ld = 2 * d;
        a.q_bstride = (size_t)Tq * d;
        a.kv_bstride = (size_t)Tk * 2 * d;
    }
    attend_and_project(b, prefix, &a, s, q, q_off, kv, k_off, v_off, ctx, y, accumulate);
}

/* The FFN's hidden layer u[R, F] from x[R, d] for a plugin activation f:
 *   u = f(x W1^T + b1)                   (activation)
 *   u = f(x W1^T + b1) * (x W3^T + b3)   (gated activation: swiglu, geglu)
 * At inference f runs in place on the first GEMM's output; training keeps it (the
 * backward pass reads f's input). */
static int plugin_ffn_hidden(builder *b, const char *prefix, int rows, int x, int w1, int b1)
{
    const clf_model_config *c = &b->m->cfg;
    const int d = b->d, F = c->d_ff;
    const size_t n = (size_t)rows * F;
    char label[96];
    int h = activation(b, n, "ffn_pre_activation");
    snprintf(label, sizeof label, "%s.linear_1", prefix);
    linear(b, label, h, 0, F, x, 0, d, w1, b1, rows, F, d, 0, 0);
    int gate = -1;
    if (clf_model_ffn_gated(c)) {
        int w3 =
            required(b, weightf(b, 1, "%s%s", prefix, ".linear_3.weight"), prefix, ".linear_3");
        int b3 = required(b, weightf(b, 1, "%s%s", prefix, ".linear_3.bias"), prefix, ".linear_3");
        gate = activation(b, n, "ffn_gate");
        snprintf(label, sizeof label, "%s.linear_3", prefix);
        linear(b, label, gate, 0, F, x, 0, d, w3, b3, rows, F, d, 0, 0);
    }
    int u = b->training ? activation(b, n, "ffn_hidden") : h;
    clf_activation_args a = {.op = c->activation_op, .n = n};
    snprintf(label, sizeof label, "%s.%s", prefix, c->activation_op->name);
    clf_node *nd = clf_graph_node(b->g, CLF_OP_ACTIVATION, &a, sizeof a, label);
    clf_graph_bind(b->g, nd, offsetof(clf_activation_args, out), u, 0);
    clf_graph_bind(b->g, nd, offsetof(clf_activation_args, x), h, 0);
    if (gate >= 0)
        clf_graph_bind(b->g, nd, offsetof(clf_activation_args, gate), gate, 0);
    return u;
}

/* u[R, F] = act(x[R, d] · W1^T + b1);  y[R, d] (= or +=) u · W2^T + b2
 * (relu fused into the GEMM; a plugin activation, gated or not, as plugin_ffn_hidden) */
static void feed_forward_block(builder *b, const char *prefix, int rows, int x, int y,
                               int accumulate)
{
    const int d = b->d, F = b->m->cfg.d_ff;
    char label[96];
    int w1 = required(b, weightf(b, 1, "%s%s", prefix, ".linear_1.weight"), prefix, ".linear_1");
    int b1 = required(b, weightf(b, 1, "%s%s", prefix, ".linear_1.bias"), prefix, ".linear_1");
    int w2 = required(b, weightf(b, 1, "%s%s", prefix, ".linear_2.weight"), prefix, ".linear_2");
    int b2 = required(b, weightf(b, 1, "%s%s", prefix, ".linear_2.bias"), prefix, ".linear_2");
    int u;
    if (b->m->cfg.activation == CLF_ACT_PLUGIN) {
        u = plugin_ffn_hidden(b, prefix, rows, x, w1, b1);
    } else {
        u = activation(b, (size_t)rows * F, "ffn_hidden");
        snprintf(label, sizeof label, "%s.linear_1", prefix);
        linear(b, label, u, 0, F, x, 0, d, w1, b1, rows, F, d, 1, 0);
    }
    /* the tutorial's linear_2(dropout(relu(linear_1(x)))) */
    u = dropout(b, u, (size_t)rows * F, b->p_ffn, prefix);
    snprintf(label, sizeof label, "%s.linear_2", prefix);
    linear(b, label, y, 0, d, u, 0, F, w2, b2, rows, d, F, 0, accumulate);
}

/* The function f of a residual sublayer: attention (self or cross) or feed-forward. */
typedef struct sublayer {
    const char *prefix; /* e.g. "decoder.layers.0.cross_attention_block" */
    int is_ffn;
    attention_site site;
} sublayer;

static void run_sublayer(builder *b, const sublayer *f, int rows, int x, int y, int accumulate)
{
    if (f->is_ffn)
        feed_forward_block(b, f->prefix, rows, x, y, accumulate);
    else
        attention_block(b, f->prefix, &f->site, x, y, accumulate);
}

/* One residual connection around f on the stream h[rows, d]; returns the new stream:
 *   pre:    h + f(LN(h))    f's last GEMM accumulates into h (beta = 1)
 *   post:   LN(h + f(h))    likewise, then a LayerNorm into a new value
 *   branch: h + LN(f(h))    f into a temporary, LayerNorm, then an add into h
 * Dropout is the identity at inference. */
/* The training form of residual(): every step writes a new value (the backward pass
 * reads the stream before and after each sublayer), and the sublayer's output passes
 * through dropout before it joins the stream, as in the paper:
 *   pre:    h + drop(f(LN(h)))    post: LN(h + drop(f(h)))    branch: h + LN(drop(f(h))) */
static int residual_training(builder *b, const char *norm_prefix, int h, int rows,
                             const sublayer *f)
{
    const size_t n = (size_t)rows * b->d;
    int t = activation(b, n, "sublayer_out");
    int out = activation(b, n, "stream");
    switch (b->m->cfg.norm) {
    case CLF_NORM_PRE: {
        int x = activation(b, n, "normed");
        layernorm(b, norm_prefix, x, h, rows);
        run_sublayer(b, f, rows, x, t, 0);
        add_into(b, out, h, dropout(b, t, n, b->p_residual, f->prefix), n, norm_prefix);
        return out;
    }
    case CLF_NORM_POST: {
        int sum = activation(b, n, "residual_sum");
        run_sublayer(b, f, rows, h, t, 0);
        add_into(b, sum, h, dropout(b, t, n, b->p_residual, f->prefix), n, norm_prefix);
        layernorm(b, norm_prefix, out, sum, rows);
        return out;
    }
    case CLF_NORM_BRANCH:
    default: {
        int u = activation(b, n, "branch_normed");
        run_sublayer(b, f, rows, h, t, 0);
        layernorm(b, norm_prefix, u, dropout(b, t, n, b->p_residual, f->prefix), rows);
        add_into(b, out, h, u, n, norm_prefix);
        return out;
    }
    }
}

static int residual(builder *b, const char *norm_prefix, int h, int rows, const sublayer *f)
{
    const size_t n = (size_t)rows * b->d;
    if (b->training)
        return residual_training(b, norm_prefix, h, rows, f);
    switch (b->m->cfg.norm) {
    case CLF_NORM_PRE: {
        int x = activation(b, n, "normed");
        layernorm(b, norm_prefix, x, h, rows);
        run_sublayer(b, f, rows, x, h, 1);
        return h;
    }
    case CLF_NORM_POST: {
        int out = activation(b, n, "stream");
        run_sublayer(b, f, rows, h, h, 1);
        layernorm(b, norm_prefix, out, h, rows);
        return out;
    }
    case CLF_NORM_BRANCH:
    default: {
        int t = activation(b, n, "branch");
        int u = activation(b, n, "branch_normed");
        run_sublayer(b, f, rows, h, t, 0);
        layernorm(b, norm_prefix, u, t, rows);
        add_into(b, h, h, u, n, norm_prefix);
        return h;
    }
    }
}

/* h[B*L, d] = table[ids] * sqrt(d) + pe[pos0..pos0+L), where pe is the sinusoidal table or,
 * with positional: learned, the weight pos_name [max_len, d]: the embed op adds either the
 * same way, and autodiff gives the learned one its gradient (see backward_embed). */
static int embedding(builder *b, const char *table_name, const char *pos_name, int ids, int B,
                     int L, int pos0, int vocab)
{
    const int d = b->d;
    int h = activation(b, (size_t)B * L * d, "stream");
    int table = required(b, weight_span(b, table_name, 1), table_name, "");
    int pe = b->m->cfg.positional == CLF_POS_LEARNED
                 ? required(b, weight_span(b, pos_name, 1), pos_name, "")
                 : b->pe;
    clf_embed_args a = {.rows = B * L,
                        .seq_len = L,
                        .pos0 = pos0,
                        .dim = d,
                        .vocab = vocab,
                        .scale = (float)sqrt((double)d)};
    clf_node *n = clf_graph_node(b->g, CLF_OP_EMBED, &a, sizeof a, table_name);
    clf_graph_bind(b->g, n, offsetof(clf_embed_args, out), h, 0);
    clf_graph_bind(b->g, n, offsetof(clf_embed_args, ids), ids, 0);
    clf_graph_bind(b->g, n, offsetof(clf_embed_args, table), table, 0);
    clf_graph_bind(b->g, n, offsetof(clf_embed_args, pe), pe, 0);
    return dropout(b, h, (size_t)B * L * d, b->p_embedding, table_name);
}

/* enc[B*S, d]: embedding, N x (self-attention, feed-forward), optional final norm */
static int encoder(builder *b, int src, int src_mask, int B, int S)
{
    const clf_model_config *c = &b->m->cfg;
    char p[3][96];
    int h = embedding(b, "src_embed.embedding.weight", "src_pos.embedding.weight", src, B, S, 0,
                      c->src_vocab);
    for (int i = 0; i < c->encoder_layers; i++) {
        snprintf(p[0], sizeof p[0], "encoder.layers.%d.self_attention_block", i);
        snprintf(p[1], sizeof p[1], "encoder.layers.%d.feed_forward_block", i);
        sublayer attn = {
            .prefix = p[0],
            .site = {.B = B, .Tq = S, .Tk = S, .kv_src = -1, .mask = src_mask, .probs = -1}};
        sublayer ffn = {.prefix = p[1], .is_ffn = 1};
        for (int r = 0; r < 2; r++) {
            snprintf(p[2], sizeof p[2], "encoder.layers.%d.residual_connections.%d.norm", i, r);
            h = residual(b, p[2], h, B * S, r == 0 ? &attn : &ffn);
        }
    }
    if (c->final_norm) {
        int out = activation(b, (size_t)B * S * b->d, "encoder_out");
        layernorm(b, "encoder.norm", out, h, B * S);
        h = out;
    }
    return h;
}

/* What the decoder reads. The full pass has T rows per sentence, a target key mask and
 * the encoder output; a decoding step has one row per sentence at position pos0 and reads
 * keys and values from the caches (see clf_model_build_step_graph). */
typedef struct decoder_spec {
    int B, S, T;
    int ids;      /* I32 [B*T] */
    int tgt_mask; /* I32 [B, T] (full pass) */
    int enc;      /* [B*S, d] (full pass) */
    int src_mask; /* I32 [B, S] */
    int pos0;
    /* decoding step */
    int has_cache;
    int self_cache, cross_cache; /* values: all layers' blocks, [L, slots, len, 2d] */
    int slots, self_len;
    int probs; /* the last layer's cross-attention softmax, or -1 */
} decoder_spec;

/* dec[B*T, d]: embedding, N x (masked self-attention, cross-attention, feed-forward),
 * optional final norm */
static int decoder(builder *b, const decoder_spec *ds)
{
    const clf_model_config *c = &b->m->cfg;
    const int B = ds->B, S = ds->S, T = ds->T, L = c->decoder_layers;
    const size_t row2 = 2 * (size_t)b->d;
    char p[4][96];
    int h = embedding(b, "tgt_embed.embedding.weight", "tgt_pos.embedding.weight", ds->ids, B, T,
                      ds->pos0, c->tgt_vocab);
    for (int i = 0; i < L; i++) {
        snprintf(p[0], sizeof p[0], "decoder.layers.%d.self_attention_block", i);
        snprintf(p[1], sizeof p[1], "decoder.layers.%d.cross_attention_block", i);
        snprintf(p[2], sizeof p[2], "decoder.layers.%d.feed_forward_block", i);
        sublayer self = {.prefix = p[0],
                         .site = {.B = B,
                                  .Tq = T,
                                  .Tk = T,
                                  .kv_src = -1,
                                  .mask = ds->tgt_mask,
                                  .causal = 1,
                                  .probs = -1}};
        sublayer cross = {
            .prefix = p[1],
            .site = {
                .B = B, .Tq = T, .Tk = S, .kv_src = ds->enc, .mask = ds->src_mask, .probs = -1}};
        if (ds->has_cache) {
            /* the step at position pos0 attends to positions 0..pos0 (no pads there) */
            self.site = (attention_site){.B = B,
                                         .Tq = 1,
                                         .Tk = ds->pos0 + 1,
                                         .kv_src = -1,
                                         .mask = -1,
                                         .has_cache = 1,
                                         .cache = ds->self_cache,
                                         .cache_off = (size_t)i * ds->slots * ds->self_len * row2,
                                         .cache_len = ds->self_len,
                                         .write_pos = ds->pos0,
                                         .probs = -1};
            cross.site = (attention_site){.B = B,
                                          .Tq = 1,
                                          .Tk = S,
                                          .kv_src = -1,
                                          .mask = ds->src_mask,
                                          .has_cache = 1,
                                          .cache = ds->cross_cache,
                                          .cache_off = (size_t)i * ds->slots * S * row2,
                                          .cache_len = S,
                                          .write_pos = -1,
                                          .probs = -1};
        }
        if (i == L - 1)
            cross.site.probs = ds->probs;
        sublayer ffn = {.prefix = p[2], .is_ffn = 1};
        const sublayer *order[3] = {&self, &cross, &ffn};
        for (int r = 0; r < 3; r++) {
            snprintf(p[3], sizeof p[3], "decoder.layers.%d.residual_connections.%d.norm", i, r);
            h = residual(b, p[3], h, B * T, order[r]);
        }
    }
    if (c->final_norm) {
        int out = activation(b, (size_t)B * T * b->d, "decoder_out");
        layernorm(b, "decoder.norm", out, h, B * T);
        h = out;
    }
    return h;
}

/* Starts a graph: the weight-value map and the PE table. */
static clf_status builder_begin(clf_model *m, clf_graph *g, builder *b)
{
    const clf_model_config *c = &m->cfg;
    clf_graph_init(g);
    *b = (builder){.m = m, .g = g, .d = c->d_model, .dk = c->d_model / c->heads};
    b->wval = malloc(sizeof(int) * (size_t)m->n_weights);
    if (!b->wval)
        return clf_error(CLF_ERR_NOMEM, "model: out of host memory");
    for (int i = 0; i < m->n_weights; i++)
        b->wval[i] = -1;
    b->pe = m->pe ? clf_graph_external(g, (clf_ptr){m->pe, 0},
                                       (size_t)c->max_len * b->d * sizeof(float), "pe")
                  : -1;
    return CLF_OK;
}

/* Plans the graph built with b; frees it on error. */
static clf_status builder_end(builder *b)
{
    free(b->wval);
    b->wval = NULL;
    clf_status st = clf_graph_plan(b->g);
    if (st != CLF_OK)
        clf_graph_free(b->g);
    return st;
}

/* out[rows, V] = dec · Wp^T + bp, then log_softmax over V if asked; dec's rows start at
 * element dec_off, dec_ld apart */
static void projection(builder *b, int out, int dec, size_t dec_off, int dec_ld, int rows,
                       int log_softmax)
{
    const int d = b->d, V = b->m->cfg.tgt_vocab;
    int wp = required(b, weight_span(b, "projection_layer.proj.weight", 1), "projection", "");
    int bp = weight_span(b, "projection_layer.proj.bias", 1);
    linear(b, "projection_layer.proj", out, 0, V, dec, dec_off, dec_ld, wp, bp, rows, V, d, 0, 0);
    if (log_softmax) {
        clf_softmax_args a = {.rows = rows, .cols = V, .log = 1};
        clf_node *n = clf_graph_node(b->g, CLF_OP_SOFTMAX, &a, sizeof a, "log_softmax");
        clf_graph_bind(b->g, n, offsetof(clf_softmax_args, out), out, 0);
        clf_graph_bind(b->g, n, offsetof(clf_softmax_args, x), out, 0);
    }
}

/* The inputs of a full pass (I32 ids and key masks of both sides), then the encoder and
 * the decoder over them: returns dec [B*T, d]; *enc gets the encoder output. */
typedef struct full_pass {
    int src, tgt, src_mask, tgt_mask;
} full_pass;

static int encode_decode(builder *b, int B, int S, int T, full_pass *in, int *enc)
{
    clf_graph *g = b->g;
    in->src = clf_graph_value(g, CLF_VALUE_INPUT, (size_t)B * S * 4, "src");
    in->tgt = clf_graph_value(g, CLF_VALUE_INPUT, (size_t)B * T * 4, "tgt");
    in->src_mask = clf_graph_value(g, CLF_VALUE_INPUT, (size_t)B * S * 4, "src_mask");
    in->tgt_mask = clf_graph_value(g, CLF_VALUE_INPUT, (size_t)B * T * 4, "tgt_mask");
    *enc = encoder(b, in->src, in->src_mask, B, S);
    decoder_spec ds = {.B = B,
                       .S = S,
                       .T = T,
                       .ids = in->tgt,
                       .tgt_mask = in->tgt_mask,
                       .enc = *enc,
                       .src_mask = in->src_mask,
                       .probs = -1};
    return decoder(b, &ds);
}

clf_status clf_model_build_forward_graph(clf_model *m, int B, int S, int T, clf_graph *g)
{
    const clf_model_config *c = &m->cfg;
    const int V = c->tgt_vocab;
    builder b;
    clf_status st = builder_begin(m, g, &b);
    if (st != CLF_OK)
        return st;
    full_pass in;
    int enc, dec = encode_decode(&b, B, S, T, &in, &enc);
    m->v_src = in.src, m->v_tgt = in.tgt, m->v_src_mask = in.src_mask, m->v_tgt_mask = in.tgt_mask;

    /* logits[B*T, V] = dec · Wp^T + bp, then log_softmax over V if configured */
    int logits = clf_graph_value(g, CLF_VALUE_OUTPUT, (size_t)B * T * V * sizeof(float), "logits");
    projection(&b, logits, dec, 0, c->d_model, B * T, c->output == CLF_OUTPUT_LOG_SOFTMAX);
    if (g->status == CLF_OK)
        g->values[enc].kind = CLF_VALUE_OUTPUT; /* kept alive to be downloaded */
    m->v_enc = enc;
    m->v_logits = logits;
    return builder_end(&b);
}

clf_status clf_model_build_encoder_graph(clf_model *m, int B, int S, clf_ptr src_mask,
                                         const clf_kv_cache *cross, clf_ptr enc_out, clf_graph *g,
                                         int *v_src)
{
    const clf_model_config *c = &m->cfg;
    const int d = c->d_model;
    const size_t row2 = 2 * (size_t)d;
    builder b;
    clf_status st = builder_begin(m, g, &b);
    if (st != CLF_OK)
        return st;
    *v_src = clf_graph_value(g, CLF_VALUE_INPUT, (size_t)B * S * 4, "src");
    int mask = clf_graph_external(g, src_mask, (size_t)B * S * 4, "src_mask");
    int kv = clf_graph_external(g, cross->base, cross->bytes, "cross_kv_cache");
    int enc = encoder(&b, *v_src, mask, B, S);
    if (enc_out.buf) {
        int dst = clf_graph_external(g, enc_out, (size_t)B * S * d * 4, "encoder_out");
        clf_add_args a = {.n = (size_t)B * S * d * 4};
        clf_node *n = clf_graph_node(g, CLF_NODE_COPY, &a, sizeof a, "encoder_out");
        clf_graph_bind(g, n, offsetof(clf_add_args, out), dst, 0);
        clf_graph_bind(g, n, offsetof(clf_add_args, a), enc, 0);
    }
    for (int i = 0; i < c->decoder_layers; i++) {
        char prefix[96], label[112];
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.cross_attention_block", i);
        snprintf(label, sizeof label, "%s.w_kv", prefix);
        int wkv = required(&b, weightf(&b, 2, "%s%s", prefix, ".w_k.weight"), prefix, ".w_k");
        int bkv = weightf(&b, 2, "%s%s", prefix, ".w_k.bias");
        /* [B*S, 2d]: slot b's S rows are contiguous, so one GEMM fills the layer's block */
        linear(&b, label, kv, (size_t)i * cross->slots * cross->len * row2, (int)row2, enc, 0, d,
               wkv, bkv, B * S, 2 * d, d, 0, 0);
    }
    return builder_end(&b);
}

clf_status clf_model_build_step_graph(clf_model *m, const clf_step_spec *s, clf_graph *g,
                                      clf_step_values *v)
{
    const clf_model_config *c = &m->cfg;
    const int A = s->rows, V = c->tgt_vocab, d = c->d_model;
    const int T = s->use_cache ? 1 : s->pos + 1;
    builder b;
    clf_status st = builder_begin(m, g, &b);
    if (st != CLF_OK)
        return st;
    v->ids = clf_graph_value(g, CLF_VALUE_INPUT, (size_t)A * T * 4, "ids");
    decoder_spec ds = {
        .B = A,
        .S = s->src_len,
        .T = 1,
        .ids = v->ids,
        .tgt_mask = -1,
        .enc = -1,
        .src_mask =
            clf_graph_external(g, s->src_mask, (size_t)s->cross.slots * s->src_len * 4, "src_mask"),
        .pos0 = s->pos,
        .has_cache = 1,
        .self_cache = clf_graph_external(g, s->self.base, s->self.bytes, "self_kv"),
        .cross_cache = clf_graph_external(g, s->cross.base, s->cross.bytes, "cross_kv"),
        .slots = s->self.slots,
        .self_len = s->self.len,
        .probs = -1};
    v->attention = -1;
    if (s->want_attention)
        ds.probs = v->attention =
            clf_graph_value(g, CLF_VALUE_OUTPUT,
                            (size_t)A * c->heads * T * s->src_len * sizeof(float), "attention");
    if (!s->use_cache) {
        ds.T = T;
        ds.pos0 = 0;
        ds.has_cache = 0;
        ds.enc = clf_graph_external(g, s->enc, (size_t)s->cross.slots * s->src_len * d * 4, "enc");
    }
    int dec = decoder(&b, &ds);
    /* only each sentence's last position is projected: rows T*d apart from (T-1)*d */
    size_t last_off = (size_t)(T - 1) * d;
    int last_ld = T * d;
    if (s->log_probs) {
        v->out = clf_graph_value(g, CLF_VALUE_OUTPUT, (size_t)A * V * sizeof(float), "log_probs");
        projection(&b, v->out, dec, last_off, last_ld, A, 1);
    } else {
        int logits = activation(&b, (size_t)A * V, "logits");
        projection(&b, logits, dec, last_off, last_ld, A, 0);
        v->out = clf_graph_value(g, CLF_VALUE_OUTPUT, (size_t)A * 4, "next_ids");
        clf_softmax_args a = {.rows = A, .cols = V}; /* argmax reuses the softmax layout */
        clf_node *n = clf_graph_node(g, CLF_OP_ARGMAX, &a, sizeof a, "argmax");
        clf_graph_bind(g, n, offsetof(clf_softmax_args, out), v->out, 0);
        clf_graph_bind(g, n, offsetof(clf_softmax_args, x), logits, 0);
    }
    return builder_end(&b);
}

/* ---------------------------------------------------------------------------------- */
/* training                                                                            */

clf_status clf_model_enable_grads(clf_model *m)
{
    if (m->grad_chunks)
        return CLF_OK;
    clf_status pst = prepare_plugin_ops(&m->cfg, m->api, m->be, 1);
    if (pst != CLF_OK)
        return pst;
    m->grad_chunks = calloc((size_t)m->n_chunks, sizeof(clf_buffer *));
    if (!m->grad_chunks)
        return clf_error(CLF_ERR_NOMEM, "model: out of host memory");
    for (int c = 0; c < m->n_chunks; c++) {
        clf_status st = m->api->alloc(m->be, m->chunk_bytes[c], &m->grad_chunks[c]);
        if (st == CLF_OK)
            st = m->api->fill(m->be, (clf_ptr){m->grad_chunks[c], 0}, 0.0f, m->chunk_bytes[c] / 4);
        if (st != CLF_OK)
            return clf_error_context(st, "model: gradient buffer of %zu bytes", m->chunk_bytes[c]);
    }
    return CLF_OK;
}

/* The gradient of a weight sits at the weight's offset in the chunk's gradient twin. */
static clf_ptr grad_of_weight(void *user, clf_ptr param)
{
    const clf_model *m = user;
    int c = chunk_holding(m, param.buf);
    return c < 0 ? (clf_ptr){0} /* the PE table */ : (clf_ptr){m->grad_chunks[c], param.off};
}

clf_status clf_model_build_train_graph(clf_model *m, const clf_train_graph_spec *s, clf_graph *g,
                                       clf_train_values *v)
{
    const clf_model_config *c = &m->cfg;
    const int B = s->B, S = s->S, T = s->T, V = c->tgt_vocab;
    builder b;
    if (s->backward && !m->grad_chunks)
        return clf_error(CLF_ERR_INTERNAL, "model: training graph before clf_model_enable_grads");
    clf_status st = builder_begin(m, g, &b);
    if (st != CLF_OK)
        return st;
    b.training = 1;
    if (s->dropout) {
        b.p_residual = c->dropout;
        b.p_embedding = c->dropout_embedding;
        b.p_attention = c->dropout_attention;
        b.p_ffn = c->dropout_ffn;
    }
    full_pass in;
    int enc, dec = encode_decode(&b, B, S, T, &in, &enc);
    (void)enc;
    v->src = in.src, v->tgt = in.tgt, v->src_mask = in.src_mask, v->tgt_mask = in.tgt_mask;
    v->labels = clf_graph_value(g, CLF_VALUE_INPUT, (size_t)B * T * 4, "labels");
    /* logits [B*T, V]; the loss's gradient overwrites them in place (dlogits) */
    int logits = activation(&b, (size_t)B * T * V, "logits");
    projection(&b, logits, dec, 0, c->d_model, B * T, 0);
    v->loss = clf_graph_value(g, CLF_VALUE_OUTPUT, (size_t)B * T * sizeof(float), "loss");
    v->n_dropout = b.n_dropout;
    v->ce_node = g->n_nodes;
    clf_cross_entropy_args ce = {.rows = B * T,
                                 .cols = V,
                                 .ignore_index = c->pad_id,
                                 .label_smoothing = s->label_smoothing,
                                 .grad_scale = 1.0f};
    clf_node *n = clf_graph_node(g, CLF_OP_CROSS_ENTROPY, &ce, sizeof ce, "cross_entropy");
    clf_graph_bind(g, n, offsetof(clf_cross_entropy_args, loss), v->loss, 0);
    clf_graph_bind(g, n, offsetof(clf_cross_entropy_args, logits), logits, 0);
    clf_graph_bind(g, n, offsetof(clf_cross_entropy_args, targets), v->labels, 0);
    if (s->backward) {
        clf_graph_bind(g, n, offsetof(clf_cross_entropy_args, dlogits), logits, 0);
        size_t rows = (size_t)B * (S > T ? S : T);
        int ones = clf_graph_external(g, s->ones, rows * sizeof(float), "ones");
        clf_backward_spec bs = {.n_forward = v->ce_node,
                                .seed_value = logits,
                                .seed_grad = logits,
                                .ones = ones,
                                .grad_of = grad_of_weight,
                                .user = m};
        if (g->status == CLF_OK && (st = clf_graph_append_backward(g, &bs)) != CLF_OK) {
            free(b.wval);
            clf_graph_free(g);
            return st;
        }
    }
    return builder_end(&b);
}

int clf_model_chunk_count(const clf_model *m)
{
    return m->n_chunks;
}

void clf_model_chunk(const clf_model *m, int c, clf_buffer **weights, clf_buffer **grads,
                     size_t *bytes)
{
    *weights = m->chunks[c];
    *grads = m->grad_chunks ? m->grad_chunks[c] : NULL;
    *bytes = m->chunk_bytes[c];
}

int clf_model_weight_count(const clf_model *m)
{
    return m->n_weights;
}

const clf_weight_spec *clf_model_weight_spec(const clf_model *m, int i)
{
    return &m->specs[i];
}

void clf_model_weight_place(const clf_model *m, int i, int *chunk, size_t *off)
{
    *chunk = chunk_holding(m, m->wdev[i].buf); /* every weight lives in a chunk */
    *off = m->wdev[i].off;
}

const clf_model_config *clf_model_config_of(const clf_model *m)
{
    return &m->cfg;
}

void clf_model_backend_of(const clf_model *m, const clf_backend_api **api, clf_backend **be)
{
    *api = m->api;
    *be = m->be;
}

/* ---------------------------------------------------------------------------------- */
/* running                                                                             */

static clf_status check_ids(const int32_t *ids, size_t n, int vocab, const char *what,
                            const char *side)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return clf_error(CLF_ERR_INPUT,
                             "%s: %s: token id %d at position %zu is outside the "
                             "vocabulary [0, %d)",
                             what, side, ids[i], i, vocab);
    return CLF_OK;
}

clf_status clf_model_check_batch(const clf_model *m, const char *what, int B, int S, int T,
                                 const int32_t *src, const int32_t *tgt, const int32_t *labels)
{
    const clf_model_config *c = &m->cfg;
    clf_status st;
    if (B < 1 || S < 1 || T < 1)
        return clf_error(CLF_ERR_INPUT, "%s: empty batch (batch %d, src_len %d, tgt_len %d)", what,
                         B, S, T);
    if (S > c->max_len || T > c->max_len)
        return clf_error(CLF_ERR_INPUT,
                         "%s: sequence length %d exceeds model.max_len %d (the "
                         "positional-encoding table)",
                         what, S > T ? S : T, c->max_len);
    if ((st = check_ids(src, (size_t)B * S, c->src_vocab, what, "src")) != CLF_OK ||
        (st = check_ids(tgt, (size_t)B * T, c->tgt_vocab, what, "tgt")) != CLF_OK ||
        (labels && (st = check_ids(labels, (size_t)B * T, c->tgt_vocab, what, "labels")) != CLF_OK))
        return st;
    return CLF_OK;
}

clf_status clf_model_upload_ids(const clf_model *m, clf_ptr ids_dst, clf_ptr mask_dst,
                                const int32_t *ids, size_t n)
{
    clf_status st = m->api->upload(m->be, ids_dst, ids, n * 4);
    if (st != CLF_OK || !mask_dst.buf)
        return st;
    int32_t *mask = malloc(n * sizeof(int32_t));
    if (!mask)
        return clf_error(CLF_ERR_NOMEM, "model: out of host memory");
    for (size_t i = 0; i < n; i++)
        mask[i] = ids[i] != m->cfg.pad_id; /* key mask: (ids != pad) */
    st = m->api->upload(m->be, mask_dst, mask, n * 4);
    free(mask);
    return st;
}

clf_status clf_model_forward(clf_model *m, const clf_forward_io *io)
{
    const clf_model_config *c = &m->cfg;
    const int B = io->batch, S = io->src_len, T = io->tgt_len;
    clf_status st;
    if ((st = clf_model_check_batch(m, "forward", B, S, T, io->src, io->tgt, NULL)) != CLF_OK)
        return st;
    if (!m->g_valid || m->g_batch != B || m->g_src != S || m->g_tgt != T) {
        clf_graph_free(&m->g);
        m->g_valid = 0;
        if ((st = clf_model_build_forward_graph(m, B, S, T, &m->g)) != CLF_OK)
            return st;
        if ((st = clf_graph_reserve_arena(&m->g, m->api, m->be, &m->arena, &m->arena_cap,
                                          "forward")) != CLF_OK)
            return st;
        m->g_valid = 1;
        m->g_batch = B, m->g_src = S, m->g_tgt = T;
    }
#define GRAPH_PTR(v) clf_graph_ptr(&m->g, m->arena, (v))
    if ((st = clf_model_upload_ids(m, GRAPH_PTR(m->v_src), GRAPH_PTR(m->v_src_mask), io->src,
                                   (size_t)B * S)) != CLF_OK ||
        (st = clf_model_upload_ids(m, GRAPH_PTR(m->v_tgt), GRAPH_PTR(m->v_tgt_mask), io->tgt,
                                   (size_t)B * T)) != CLF_OK)
#undef GRAPH_PTR
        return st;
    if ((st = clf_graph_run(&m->g, m->api, m->be, m->arena)) != CLF_OK)
        return clf_error_context(st, "forward");
    if (io->encoder_out &&
        (st = m->api->download(m->be, io->encoder_out, clf_graph_ptr(&m->g, m->arena, m->v_enc),
                               (size_t)B * S * c->d_model * sizeof(float))) != CLF_OK)
        return st;
    if (io->logits &&
        (st = m->api->download(m->be, io->logits, clf_graph_ptr(&m->g, m->arena, m->v_logits),
                               (size_t)B * T * c->tgt_vocab * sizeof(float))) != CLF_OK)
        return st;
    return m->api->synchronize(m->be);
}

clf_status clf_model_rerun(clf_model *m, unsigned op_mask)
{
    if (!m->g_valid)
        return clf_error(CLF_ERR_INTERNAL, "model: rerun before any forward");
    clf_status st = clf_graph_run_ops(&m->g, m->api, m->be, m->arena, op_mask);
    if (st != CLF_OK)
        return st;
    return m->api->synchronize(m->be);
}

const clf_graph *clf_model_last_graph(const clf_model *m)
{
    return m->g_valid ? &m->g : NULL;
}

/* The tensors that linear layers multiply with: every matrix but the embedding tables,
 * plus the table the output projection is tied to (if it is). */
static int is_gemm_matrix(const clf_model *m, int i)
{
    const clf_weight_spec *s = &m->specs[i];
    if (s->ndim != 2)
        return 0;
    if (!ends_with(s->name, ".embedding.weight"))
        return 1;
    const char *proj = clf_weights_tied_to(&m->cfg, "projection_layer.proj.weight");
    return proj && strcmp(proj, s->name) == 0;
}

clf_status clf_model_enable_half_weights(clf_model *m)
{
    if (m->half_chunks)
        return CLF_OK;
    clf_status st = CLF_OK;
    float *f32 = NULL;
    uint16_t *f16 = NULL;
    clf_buffer **half = calloc((size_t)m->n_chunks, sizeof *half);
    if (!half)
        return clf_error(CLF_ERR_NOMEM, "model: out of host memory");
    for (int c = 0; c < m->n_chunks; c++) {
        const size_t n = m->chunk_bytes[c] / sizeof(float);
        f32 = malloc(m->chunk_bytes[c]);
        f16 = calloc(n, sizeof *f16); /* n >= 1: a chunk holds at least 4 bytes */
        if (!f32 || !f16) {
            st = clf_error(CLF_ERR_NOMEM, "model: out of host memory for the F16 weights");
            goto fail;
        }
        /* from the device: the weights as they are now (loaded, or trained in this process) */
        if ((st = m->api->download(m->be, f32, (clf_ptr){m->chunks[c], 0}, m->chunk_bytes[c])) !=
                CLF_OK ||
            (st = m->api->synchronize(m->be)) != CLF_OK) {
            clf_error_context(st, "model: reading the weights back for F16");
            goto fail;
        }
        for (int i = 0; i < m->n_weights; i++) {
            if (m->wdev[i].buf != m->chunks[c] || !is_gemm_matrix(m, i))
                continue;
            const size_t first = m->wdev[i].off / sizeof(float);
            const size_t count = (size_t)clf_weight_spec_numel(&m->specs[i]);
            for (size_t e = first; e < first + count; e++) {
                if (!clf_float_fits_half(f32[e])) {
                    st = clf_error(CLF_ERR_INPUT,
                                   "weights: '%s' element %zu is %g, which F16 cannot hold "
                                   "(|x| < 65520): use F32 weights for this model",
                                   m->specs[i].name, e - first, (double)f32[e]);
                    goto fail;
                }
                f16[e] = clf_float_to_half(f32[e]);
            }
        }
        const size_t bytes = n * sizeof *f16;
        if ((st = m->api->alloc(m->be, bytes, &half[c])) != CLF_OK) {
            clf_error_context(st, "model: F16 weights: allocating %zu bytes", bytes);
            goto fail;
        }
        if ((st = m->api->upload(m->be, (clf_ptr){half[c], 0}, f16, bytes)) != CLF_OK ||
            (st = m->api->synchronize(m->be)) != CLF_OK) {
            clf_error_context(st, "model: uploading the F16 weights");
            goto fail;
        }
        m->half_bytes += bytes;
        free(f32);
        free(f16);
        f32 = NULL;
        f16 = NULL;
    }
    m->half_chunks = half;
    m->g_valid = 0; /* the cached forward graph was built without the F16 twins */
    return CLF_OK;
fail:
    free(f32);
    free(f16);
    for (int c = 0; c < m->n_chunks; c++)
        if (half[c])
            m->api->free(m->be, half[c]);
    free(half);
    m->half_bytes = 0;
    return st;
}

void clf_model_memory_usage(const clf_model *m, clf_model_memory *mem)
{
    mem->weight_bytes = m->weight_bytes + m->half_bytes;
    mem->arena_bytes = m->arena_cap;
}

double clf_model_forward_flops(const clf_model_config *c, int B, int S, int T)
{
    const double d = c->d_model, F = c->d_ff, V = c->tgt_vocab;
    const double rs = (double)B * S, rt = (double)B * T;
    /* 2 FLOPs per multiply-add. Attention: QK^T and PV, each B*Tq*Tk*d multiply-adds. */
    double enc =
        2 * rs * d * 3 * d + 2 * 2 * (double)B * S * S * d + 2 * rs * d * d + 2 * 2 * rs * d * F;
    double dec_self = 2 * rt * d * 3 * d + 2 * 2 * (double)B * T * T * d + 2 * rt * d * d;
    double dec_cross =
        2 * rt * d * d + 2 * rs * 2 * d * d + 2 * 2 * (double)B * T * S * d + 2 * rt * d * d;
    double dec_ffn = 2 * 2 * rt * d * F;
    if (clf_model_ffn_gated(c)) { /* linear_3: one more d x F GEMM per FFN */
        enc += 2 * rs * d * F;
        dec_ffn += 2 * rt * d * F;
    }
    return c->encoder_layers * enc + c->decoder_layers * (dec_self + dec_cross + dec_ffn) +
           2 * rt * d * V;
}
