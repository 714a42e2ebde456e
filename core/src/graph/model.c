/* The model on a backend: its weights packed into device chunks (with their gradient and
 * F16 twins), the positional-encoding table, and what the trainer and the decoder read
 * of it. Building graphs over it is model_build.c (the layers) and model_graphs.c (the
 * graphs callers ask for); running them is model_run.c. */
#include "clformer/model.h"

#include "clformer/hash.h"

#include "graph/graph_private.h"
#include "io/weight_names.h"
#include "numeric/numeric_internal.h"

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

void clf_positional_encoding_split(float *pe, int max_len, int d)
{
    const int half = (d + 1) / 2; /* the sin columns: those of the even j of [0, d) */
    for (int pos = 0; pos < max_len; pos++)
        for (int j = 0; j < d; j++) {
            const double arg = (double)pos / pow(10000.0, (double)(2 * (j / 2)) / (double)d);
            const int col = j % 2 == 0 ? j / 2 : half + j / 2;
            pe[(size_t)pos * d + col] = (float)(j % 2 == 0 ? sin(arg) : cos(arg));
        }
}

void clf_positional_encoding_fairseq(float *pe, int rows, int d)
{
    /* as fairseq's get_embedding, all float32: emb = exp(arange(half) * -(ln(10000) /
     * (half - 1))), then [sin(pos * emb) | cos(pos * emb)], an odd d's last column 0 */
    const int half = d / 2;
    const float k = half > 1 ? (float)(log(10000.0) / (half - 1)) : 0.0f;
    for (int i = 0; i < half; i++) {
        const float freq = expf((float)i * -k);
        for (int pos = 0; pos < rows; pos++) {
            const float arg = (float)pos * freq;
            pe[(size_t)pos * d + i] = sinf(arg);
            pe[(size_t)pos * d + half + i] = cosf(arg);
        }
    }
    if (d % 2)
        for (int pos = 0; pos < rows; pos++)
            pe[(size_t)pos * d + d - 1] = 0.0f;
}

/* ---------------------------------------------------------------------------------- */
/* weights on the device                                                               */

/* The first slot to probe for name in the name index. */
static size_t name_home(const clf_model *m, const char *name)
{
    return (size_t)clf_hash_fnv1a64(CLF_FNV1A64_OFFSET, name, strlen(name)) & m->name_mask;
}

/* Builds m->name_slot over m->specs (see graph_private.h). A name that occurs twice keeps
 * its first index, as a scan of the names in order would find. */
static clf_status name_index_build(clf_model *m)
{
    size_t cap = 2;
    while (cap < 2 * (size_t)m->n_weights)
        cap *= 2;
    m->name_slot = malloc(cap * sizeof *m->name_slot);
    if (!m->name_slot)
        return clf_error(CLF_ERR_NOMEM, "model: out of host memory");
    m->name_mask = cap - 1;
    for (size_t s = 0; s < cap; s++)
        m->name_slot[s] = -1;
    for (int i = 0; i < m->n_weights; i++) {
        size_t s = name_home(m, m->specs[i].name);
        while (m->name_slot[s] >= 0 &&
               strcmp(m->specs[m->name_slot[s]].name, m->specs[i].name) != 0)
            s = (s + 1) & m->name_mask;
        if (m->name_slot[s] < 0)
            m->name_slot[s] = i;
    }
    return CLF_OK;
}

/* The index of the weight named name, or -1. The table is at most half full, so a probe
 * sequence ends at an empty slot. */
int clf_model_spec_index(const clf_model *m, const char *name)
{
    if (!m->name_slot)
        return -1; /* no specs yet */
    for (size_t s = name_home(m, name); m->name_slot[s] >= 0; s = (s + 1) & m->name_mask)
        if (strcmp(m->specs[m->name_slot[s]].name, name) == 0)
            return m->name_slot[s];
    return -1;
}

/* The index of the weight chunk that is buffer buf, or -1 (the PE table, activations). */
int clf_model_chunk_holding(const clf_model *m, const clf_buffer *buf)
{
    for (int c = 0; c < m->n_chunks; c++)
        if (m->chunks[c] == buf)
            return c;
    return -1;
}

/* The packing groups: each attention block's w_q, w_k, w_v (and their biases) go side by
 * side, so [Wq;Wk;Wv] is one [3d, d] matrix for the fused self-attention projection and
 * [Wk;Wv] one [2d, d] matrix for the cross-attention keys and values. Every other tensor
 * is a group of its own. group_of[i] lists the members starting at a group's leader. */
static int weight_group(const clf_model *m, int i, int members[3])
{
    const char *name = m->specs[i].name;
    const unsigned kinds = clf_weight_name_kinds(name);
    char other[CLF_TENSOR_NAME_MAX];
    if (kinds & CLF_WK_ATTENTION_Q) {
        members[0] = i;
        for (int j = 1; j < 3; j++) {
            clf_weight_name_qkv(name, j == 1 ? 'k' : 'v', other, sizeof other);
            members[j] = clf_model_spec_index(m, other);
            if (members[j] < 0)
                return 1; /* not a full block: pack alone */
        }
        return 3;
    }
    if ((kinds & CLF_WK_ATTENTION_KV) && clf_weight_name_qkv(name, 'q', other, sizeof other) &&
        clf_model_spec_index(m, other) >= 0)
        return 0; /* packed with its w_q */
    members[0] = i;
    return 1;
}

static size_t align_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

/* Weight i of mapped weights w (data[i] NULL) converted and uploaded a block of stage
 * (stage_len floats) at a time. */
static clf_status upload_mapped(clf_model *m, const clf_weights *w, int i, float *stage,
                                int64_t stage_len)
{
    const int64_t n = clf_weight_spec_numel(&m->specs[i]);
    for (int64_t e = 0; e < n; e += stage_len) {
        const int64_t len = n - e < stage_len ? n - e : stage_len;
        clf_status st = clf_weights_read(w, i, e, len, stage);
        if (st != CLF_OK)
            return st; /* names the file and the tensor */
        const clf_ptr at = {m->wdev[i].buf, m->wdev[i].off + (size_t)e * sizeof(float)};
        st = clf_op_upload(m->api, m->be, at, stage, (size_t)len * sizeof(float));
        if (st == CLF_OK) /* the stage is reused once the upload is done */
            st = m->api->synchronize(m->be);
        if (st != CLF_OK)
            return clf_error_context(st, "weights: uploading '%s'", m->specs[i].name);
    }
    return CLF_OK;
}

/* The floats a mapped weight is converted through at a time (upload_mapped). */
#define CLF_UPLOAD_STAGE ((int64_t)1 << 20)

/* owned: NULL, or w->data when w's tensors are to be freed as they reach the device
 * (clf_model_create_consuming); defer: m->deferred, the weights to leave off the device
 * (clf_model_create_from) */
static clf_status upload_weights(clf_model *m, const clf_weights *w, float **owned,
                                 const unsigned char *defer)
{
    float *stage = NULL;
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
        if (defer && defer[i])
            continue;
        if (!w->data[i]) {
            if (!stage && !(stage = malloc((size_t)CLF_UPLOAD_STAGE * sizeof *stage))) {
                st = clf_error(CLF_ERR_NOMEM, "weights: out of host memory");
                goto fail;
            }
            if ((st = upload_mapped(m, w, i, stage, CLF_UPLOAD_STAGE)) != CLF_OK)
                goto fail;
            continue;
        }
        if ((st = clf_op_upload(m->api, m->be, m->wdev[i], w->data[i], bytes)) != CLF_OK) {
            clf_error_context(st, "weights: uploading '%s'", m->specs[i].name);
            goto fail;
        }
        if (owned) { /* an upload may be queued: the host's copy goes once it is done */
            if ((st = m->api->synchronize(m->be)) != CLF_OK) {
                clf_error_context(st, "weights: uploading '%s'", m->specs[i].name);
                goto fail;
            }
            free(owned[i]);
            owned[i] = NULL;
        }
    }
fail:
    free(stage);
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

static clf_status model_create(const clf_model_config *cfg, const clf_weights *w, float **owned,
                               int defer_int8, const clf_backend_api *api, clf_backend *be,
                               clf_model **out)
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
    if ((st = name_index_build(m)) != CLF_OK)
        goto fail;
    if ((st = check_weights_match(m, w)) != CLF_OK)
        goto fail;
    m->wdev = calloc((size_t)m->n_weights, sizeof(clf_ptr));
    if (!m->wdev) {
        st = clf_error(CLF_ERR_NOMEM, "model: out of host memory");
        goto fail;
    }
    if (defer_int8) {
        if (!(m->deferred = calloc((size_t)m->n_weights, 1))) {
            st = clf_error(CLF_ERR_NOMEM, "model: out of host memory");
            goto fail;
        }
        for (int i = 0; i < m->n_weights; i++)
            m->deferred[i] = (unsigned char)clf_model_f32_unread_under_int8(m, i);
        m->pending = w;
    }
    if ((st = upload_weights(m, w, owned, m->deferred)) != CLF_OK)
        goto fail;
    if (cfg->positional == CLF_POS_LEARNED) { /* the tables are weights: no fixed table */
        *out = m;
        return CLF_OK;
    }
    /* position_offset rows before position 0 (model.position_offset) */
    const int pe_rows = cfg->max_len + cfg->position_offset;
    size_t pe_bytes = (size_t)pe_rows * cfg->d_model * sizeof(float);
    pe_host = malloc(pe_bytes);
    if (!pe_host) {
        st = clf_error(CLF_ERR_NOMEM, "model: out of host memory");
        goto fail;
    }
    if (cfg->positional == CLF_POS_SINUSOIDAL_SPLIT)
        clf_positional_encoding_split(pe_host, pe_rows, cfg->d_model);
    else if (cfg->positional == CLF_POS_SINUSOIDAL_FAIRSEQ)
        clf_positional_encoding_fairseq(pe_host, pe_rows, cfg->d_model);
    else
        clf_positional_encoding(pe_host, pe_rows, cfg->d_model);
    if ((st = api->alloc(be, pe_bytes, &m->pe)) != CLF_OK ||
        (st = clf_op_upload(api, be, (clf_ptr){m->pe, 0}, pe_host, pe_bytes)) != CLF_OK) {
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

clf_status clf_model_create(const clf_model_config *cfg, const clf_weights *w,
                            const clf_backend_api *api, clf_backend *be, clf_model **out)
{
    return model_create(cfg, w, NULL, 0, api, be, out);
}

clf_status clf_model_create_consuming(const clf_model_config *cfg, clf_weights *w,
                                      const clf_backend_api *api, clf_backend *be, clf_model **out)
{
    return model_create(cfg, w, w->data, 0, api, be, out);
}

clf_status clf_model_create_from(const clf_model_config *cfg, clf_weights *w, int defer_int8,
                                 const clf_backend_api *api, clf_backend *be, clf_model **out)
{
    return model_create(cfg, w, w->data, defer_int8, api, be, out);
}

/* Frees the low-precision copy, if any. */
void clf_model_lowp_free(clf_model *m)
{
    if (m->lowp_chunks)
        for (int c = 0; c < m->n_chunks; c++)
            if (m->lowp_chunks[c])
                m->api->free(m->be, m->lowp_chunks[c]);
    free(m->lowp_chunks);
    free(m->lowp_scale_off);
    free(m->lowp_row);
    free(m->lowp_mat);
    m->lowp_chunks = NULL;
    m->lowp_scale_off = NULL;
    m->lowp_row = NULL;
    m->lowp_mat = NULL;
    m->n_lowp_mat = 0;
    m->lowp_bytes = 0;
    m->lowp_type = CLF_WEIGHT_F32;
}

void clf_model_arith_free(clf_model *m)
{
    if (m->arith_chunks)
        for (int c = 0; c < m->n_chunks; c++)
            if (m->arith_chunks[c])
                m->api->free(m->be, m->arith_chunks[c]);
    free(m->arith_chunks);
    m->arith_chunks = NULL;
    m->arith_bytes = 0;
    m->arith_on = 0;
}

/* The tensors that linear layers multiply with: every matrix but the embedding tables,
 * plus the table the output projection is tied to (if it is). */
int clf_model_is_gemm_matrix(const clf_model *m, int i)
{
    const clf_weight_spec *s = &m->specs[i];
    if (s->ndim != 2)
        return 0;
    if (!(clf_weight_name_kinds(s->name) & CLF_WK_EMBEDDING_TABLE))
        return 1;
    const char *proj = clf_weights_tied_to(&m->cfg, CLF_WN_PROJ_WEIGHT);
    return proj && strcmp(proj, s->name) == 0;
}

/* Weight i's F32 bytes are read by nothing once the int8 copy exists: a matrix that only
 * linear layers multiply with (not an embedding table, which the embedding op reads, tied
 * to the projection or not). */
int clf_model_f32_unread_under_int8(const clf_model *m, int i)
{
    return clf_model_is_gemm_matrix(m, i) &&
           !(clf_weight_name_kinds(m->specs[i].name) & CLF_WK_EMBEDDING_TABLE);
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
        }
        clf_model_lowp_free(m);
        clf_model_arith_free(m);
        if (m->pe)
            m->api->free(m->be, m->pe);
        if (m->arena)
            m->api->free(m->be, m->arena);
    }
    clf_graph_free(&m->g);
    free(m->chunks);
    free(m->chunk_bytes);
    free(m->grad_chunks);
    free(m->wdev);
    free(m->deferred);
    free(m->specs);
    free(m->name_slot);
    free(m);
}

/* ---------------------------------------------------------------------------------- */
/* training: gradients                                                                 */

clf_status clf_model_enable_grads(clf_model *m)
{
    if (m->grad_chunks)
        return CLF_OK;
    if (m->f32_released)
        return clf_error(CLF_ERR_UNSUPPORTED,
                         "model: training needs the F32 weights, which this model gave back "
                         "for int8 inference (clf_model_release_f32)");
    clf_status pst = prepare_plugin_ops(&m->cfg, m->api, m->be, 1);
    if (pst != CLF_OK)
        return pst;
    m->grad_chunks = calloc((size_t)m->n_chunks, sizeof(clf_buffer *));
    if (!m->grad_chunks)
        return clf_error(CLF_ERR_NOMEM, "model: out of host memory");
    for (int c = 0; c < m->n_chunks; c++) {
        clf_status st = m->api->alloc(m->be, m->chunk_bytes[c], &m->grad_chunks[c]);
        if (st == CLF_OK)
            st = clf_op_fill(m->api, m->be, (clf_ptr){m->grad_chunks[c], 0}, 0.0f,
                             m->chunk_bytes[c] / 4);
        if (st != CLF_OK)
            return clf_error_context(st, "model: gradient buffer of %zu bytes", m->chunk_bytes[c]);
    }
    return CLF_OK;
}

/* ---------------------------------------------------------------------------------- */
/* accessors                                                                           */

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
    *chunk = clf_model_chunk_holding(m, m->wdev[i].buf); /* every weight lives in a chunk */
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

void clf_model_memory_usage(const clf_model *m, clf_model_memory *mem)
{
    mem->weight_bytes = m->weight_bytes + m->lowp_bytes + m->arith_bytes - m->released_bytes;
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
