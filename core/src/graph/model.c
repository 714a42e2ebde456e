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

/* owned: NULL, or w->data when w's tensors are to be freed as they reach the device
 * (clf_model_create_consuming) */
static clf_status upload_weights(clf_model *m, const clf_weights *w, float **owned)
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
    if ((st = name_index_build(m)) != CLF_OK)
        goto fail;
    if ((st = check_weights_match(m, w)) != CLF_OK)
        goto fail;
    m->wdev = calloc((size_t)m->n_weights, sizeof(clf_ptr));
    if (!m->wdev) {
        st = clf_error(CLF_ERR_NOMEM, "model: out of host memory");
        goto fail;
    }
    if ((st = upload_weights(m, w, owned)) != CLF_OK)
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
    return model_create(cfg, w, NULL, api, be, out);
}

clf_status clf_model_create_consuming(const clf_model_config *cfg, clf_weights *w,
                                      const clf_backend_api *api, clf_backend *be, clf_model **out)
{
    return model_create(cfg, w, w->data, api, be, out);
}

/* Frees the low-precision copy, if any. */
static void lowp_free(clf_model *m)
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
        lowp_free(m);
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
    free(m->specs);
    free(m->name_slot);
    free(m);
}

/* ---------------------------------------------------------------------------------- */
/* training and decoding: gradients, F16 weights                                       */

/* training                                                                            */

/* After the upload (status st) of weight `name`'s `type` copy from a host buffer: the
 * upload may be queued, and the buffer is reused for the next matrix once it is done. */
static clf_status upload_done(clf_model *m, clf_status st, clf_weight_type type, const char *name)
{
    if (st == CLF_OK)
        st = m->api->synchronize(m->be);
    if (st != CLF_OK)
        clf_error_context(st, "model: uploading the %s copy of '%s'", clf_weight_type_name(type),
                          name);
    return st;
}

/* The first weight after i (from -1) that is one of the products' matrices
 * (clf_model_is_gemm_matrix) in chunk c, -1 after the last: the weights a low-precision
 * twin of the chunk converts. */
static int next_matrix(const clf_model *m, int c, int i)
{
    while (++i < m->n_weights)
        if (m->wdev[i].buf == m->chunks[c] && clf_model_is_gemm_matrix(m, i))
            return i;
    return -1;
}

/* Reads weight i (count floats) from the device into mat, for its `type` copy: the weights
 * as they are now (loaded, or trained in this process). */
static clf_status read_back(clf_model *m, int i, size_t count, clf_weight_type type, float *mat)
{
    clf_status st = clf_op_download(m->api, m->be, mat, m->wdev[i], count * sizeof *mat);
    if (st == CLF_OK)
        st = m->api->synchronize(m->be);
    if (st != CLF_OK)
        clf_error_context(st, "model: reading '%s' back for %s", m->specs[i].name,
                          clf_weight_type_name(type));
    return st;
}

/* The error of a conversion to type that has no host memory for a matrix. */
static clf_status host_nomem(clf_weight_type type)
{
    return clf_error(CLF_ERR_NOMEM, "model: out of host memory for the %s weights",
                     clf_weight_type_name(type));
}

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

clf_status clf_model_copy16(clf_model *m, int c, clf_weight_type type, clf_buffer *dst)
{
    const int f16 = type == CLF_WEIGHT_F16;
    size_t largest = 1;
    for (int i = next_matrix(m, c, -1); i >= 0; i = next_matrix(m, c, i)) {
        const size_t numel = (size_t)clf_weight_spec_numel(&m->specs[i]);
        largest = numel > largest ? numel : largest;
    }
    clf_status st = CLF_OK;
    float *mat = malloc(largest * sizeof *mat);
    uint16_t *h = malloc(largest * sizeof *h);
    if (!mat || !h) {
        st = host_nomem(type);
        goto fail;
    }
    for (int i = next_matrix(m, c, -1); i >= 0; i = next_matrix(m, c, i)) {
        const clf_weight_spec *sp = &m->specs[i];
        const size_t count = (size_t)clf_weight_spec_numel(sp);
        if ((st = read_back(m, i, count, type, mat)) != CLF_OK)
            goto fail;
        for (size_t e = 0; e < count; e++) {
            if (!(f16 ? clf_float_fits_half(mat[e]) : clf_float_fits_bf16(mat[e]))) {
                st = clf_unfit_error(NULL, sp->name, (int64_t)e, mat[e], f16 ? CLF_F16 : CLF_BF16);
                goto fail;
            }
            h[e] = f16 ? clf_float_to_half(mat[e]) : clf_float_to_bf16(mat[e]);
        }
        const clf_ptr at = {dst, m->wdev[i].off / 2};
        st = clf_op_upload(m->api, m->be, at, h, count * sizeof *h);
        if ((st = upload_done(m, st, type, sp->name)) != CLF_OK)
            goto fail;
    }
fail:
    free(mat);
    free(h);
    return st;
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

/* Makes m->lowp_chunks[c], the twin of chunk c as type: F16/BF16 halves at half the
 * offsets (clf_model_copy16), or int8 at a quarter of them and the {scale, sum} pairs from
 * m->lowp_scale_off[c] (m->lowp_row filled for the chunk's matrices). One matrix at a time:
 * read from the device, converted, written back to its place in the twin, so that the
 * host holds one matrix and its conversion, never a chunk. The twin's bytes under the other
 * weights are never written (nothing reads them), so on the CPU they are never resident. */
static clf_status lowp_make(clf_model *m, int c, clf_weight_type type)
{
    const size_t n = m->chunk_bytes[c] / sizeof(float);
    size_t rows = 0, largest = 1, most_rows = 1, bytes;
    clf_status st = CLF_OK;
    float *mat = NULL, *sc = NULL;
    unsigned char *conv = NULL;
    if (type != CLF_WEIGHT_INT8) {
        bytes = n * sizeof(uint16_t);
        if ((st = m->api->alloc(m->be, bytes, &m->lowp_chunks[c])) != CLF_OK)
            return clf_error_context(st, "model: %s weights: allocating %zu bytes",
                                     clf_weight_type_name(type), bytes);
        m->lowp_bytes += bytes;
        return clf_model_copy16(m, c, type, m->lowp_chunks[c]);
    }
    for (int i = next_matrix(m, c, -1); i >= 0; i = next_matrix(m, c, i)) {
        const size_t numel = (size_t)clf_weight_spec_numel(&m->specs[i]);
        largest = numel > largest ? numel : largest;
        most_rows =
            (size_t)m->specs[i].shape[0] > most_rows ? (size_t)m->specs[i].shape[0] : most_rows;
    }
    /* number the rows of the chunk's matrices in the order of their offsets */
    size_t next_off = 0;
    for (;;) {
        int best = -1;
        for (int i = next_matrix(m, c, -1); i >= 0; i = next_matrix(m, c, i))
            if (m->wdev[i].off >= next_off && (best < 0 || m->wdev[i].off < m->wdev[best].off))
                best = i;
        if (best < 0)
            break;
        m->lowp_row[best] = rows;
        rows += (size_t)m->specs[best].shape[0];
        next_off = m->wdev[best].off + 1;
    }
    m->lowp_scale_off[c] = (n + 63) / 64 * 64;
    bytes = m->lowp_scale_off[c] + 8 * rows;
    if ((st = m->api->alloc(m->be, bytes, &m->lowp_chunks[c])) != CLF_OK)
        return clf_error_context(st, "model: %s weights: allocating %zu bytes",
                                 clf_weight_type_name(type), bytes);
    m->lowp_bytes += bytes;
    /* a matrix converted: int8 values then its rows' {scale, sum} pairs (sc: the scales);
     * sized once for the chunk's largest */
    mat = malloc(largest * sizeof *mat);
    conv = malloc(largest + 8 * most_rows);
    sc = malloc(most_rows * sizeof *sc);
    if (!mat || !conv || !sc) {
        st = host_nomem(type);
        goto fail;
    }
    for (int i = next_matrix(m, c, -1); i >= 0; i = next_matrix(m, c, i)) {
        const clf_weight_spec *sp = &m->specs[i];
        const size_t first = m->wdev[i].off / sizeof(float);
        const size_t count = (size_t)clf_weight_spec_numel(sp);
        clf_ptr at = {m->lowp_chunks[c], 0};
        if ((st = read_back(m, i, count, type, mat)) != CLF_OK)
            goto fail;
        const int64_t R = sp->shape[0], K = sp->shape[1];
        int8_t *q = (int8_t *)(void *)conv;
        unsigned char *pairs = conv + count;
        int64_t bad = clf_quantize_rows_i8(mat, R, K, q, sc);
        if (bad >= 0) {
            st = clf_unfit_error(NULL, sp->name, bad, mat[bad], CLF_I8);
            goto fail;
        }
        for (int64_t r = 0; r < R; r++) {
            int32_t sum = 0;
            for (int64_t p = 0; p < K; p++)
                sum += q[r * K + p];
            memcpy(pairs + 8 * r, &sc[r], 4);
            memcpy(pairs + 8 * r + 4, &sum, 4);
        }
        at.off = first;
        if ((st = clf_op_upload(m->api, m->be, at, q, count)) == CLF_OK) {
            at.off = m->lowp_scale_off[c] + 8 * m->lowp_row[i];
            st = clf_op_upload(m->api, m->be, at, pairs, 8 * (size_t)R);
        }
        if ((st = upload_done(m, st, type, sp->name)) != CLF_OK)
            goto fail;
    }
fail:
    free(sc);
    free(mat);
    free(conv);
    return st;
}

/* (chunk, off, i) order for qsort */
static int lowp_mat_cmp(const void *pa, const void *pb)
{
    const clf_lowp_mat *a = pa, *b = pb;
    if (a->chunk != b->chunk)
        return a->chunk < b->chunk ? -1 : 1;
    if (a->off != b->off)
        return a->off < b->off ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* Fills m->lowp_mat (see graph_private.h). */
static clf_status lowp_mat_build(clf_model *m)
{
    m->lowp_mat = malloc((size_t)(m->n_weights ? m->n_weights : 1) * sizeof *m->lowp_mat);
    if (!m->lowp_mat)
        return clf_error(CLF_ERR_NOMEM, "model: out of host memory");
    m->n_lowp_mat = 0;
    for (int i = 0; i < m->n_weights; i++)
        if (clf_model_is_gemm_matrix(m, i))
            m->lowp_mat[m->n_lowp_mat++] = (clf_lowp_mat){
                .chunk = clf_model_chunk_holding(m, m->wdev[i].buf), .i = i, .off = m->wdev[i].off};
    qsort(m->lowp_mat, (size_t)m->n_lowp_mat, sizeof *m->lowp_mat, lowp_mat_cmp);
    return CLF_OK;
}

/* The weight index of the GEMM matrix at byte off of chunk c, or -1; the lowest index when
 * several start there (as a scan of the weights in order would find). */
static int lowp_mat_at(const clf_model *m, int c, size_t off)
{
    const clf_lowp_mat key = {.chunk = c, .i = -1, .off = off};
    int lo = 0, hi = m->n_lowp_mat; /* first entry not below key: in [lo, hi] */
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (lowp_mat_cmp(&m->lowp_mat[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < m->n_lowp_mat && m->lowp_mat[lo].chunk == c && m->lowp_mat[lo].off == off)
        return m->lowp_mat[lo].i;
    return -1;
}

clf_status clf_model_lowp_set(clf_model *m, clf_weight_type type)
{
    if (type == m->lowp_type)
        return CLF_OK;
    if (m->f32_released)
        return clf_error(CLF_ERR_UNSUPPORTED,
                         "model: cannot switch to %s weights: the F32 weights were given back "
                         "for int8 inference (clf_model_release_f32); load them again",
                         clf_weight_type_name(type));
    clf_status st = CLF_OK;
    if ((int)type < 0 || type > CLF_WEIGHT_INT8)
        return clf_error(CLF_ERR_INPUT, "model: unknown weight type %d", (int)type);
    if (type == CLF_WEIGHT_BF16 || type == CLF_WEIGHT_INT8) {
        const clf_op need = type == CLF_WEIGHT_BF16 ? CLF_OP_GEMM_BF16 : CLF_OP_GEMM_I8;
        if (!m->api->supports(m->be, need))
            return clf_error(CLF_ERR_UNSUPPORTED,
                             "the %s backend cannot multiply with %s weights (use --weight-type "
                             "f32 or f16 there, or the cpu backend)",
                             m->api->name, clf_weight_type_name(type));
    }
    lowp_free(m);
    m->g_valid = 0; /* the cached forward graph was built with the previous copy */
    if (type == CLF_WEIGHT_F32)
        return CLF_OK;
    m->lowp_chunks = calloc((size_t)m->n_chunks, sizeof *m->lowp_chunks);
    m->lowp_scale_off = calloc((size_t)m->n_chunks, sizeof *m->lowp_scale_off);
    m->lowp_row = calloc((size_t)m->n_weights, sizeof *m->lowp_row);
    if (!m->lowp_chunks || !m->lowp_scale_off || !m->lowp_row) {
        st = clf_error(CLF_ERR_NOMEM, "model: out of host memory");
        goto fail;
    }
    if ((st = lowp_mat_build(m)) != CLF_OK)
        goto fail;
    m->lowp_type = type;
    for (int c = 0; c < m->n_chunks; c++)
        if ((st = lowp_make(m, c, type)) != CLF_OK)
            goto fail;
    return CLF_OK;
fail:
    lowp_free(m);
    return st;
}

/* Weight i's F32 bytes are read by nothing once the int8 copy exists: a matrix that only
 * linear layers multiply with (not an embedding table, which the embedding op reads, tied
 * to the projection or not). */
static int f32_unread_under_int8(const clf_model *m, int i)
{
    return clf_model_is_gemm_matrix(m, i) &&
           !(clf_weight_name_kinds(m->specs[i].name) & CLF_WK_EMBEDDING_TABLE);
}

clf_status clf_model_release_f32(clf_model *m, size_t *freed)
{
    size_t total = 0;
    if (freed)
        *freed = 0;
    if (m->lowp_type != CLF_WEIGHT_INT8)
        return clf_error(CLF_ERR_INPUT,
                         "model: only int8 weights replace the F32 matrices in every product "
                         "(this model multiplies with %s)",
                         clf_weight_type_name(m->lowp_type));
    if (m->grad_chunks)
        return clf_error(CLF_ERR_INPUT, "model: a model being trained keeps its F32 weights");
    /* marked first: from the first discard on the bytes may be gone, whatever it returns */
    m->f32_released = 1;
    /* runs of matrices that follow each other without a gap (a packed [Wq;Wk;Wv], an FFN's
     * two), so that the pages they share are given back too; m->lowp_mat is in place order */
    for (int a = 0; a < m->n_lowp_mat;) {
        const int i = m->lowp_mat[a].i;
        if (!f32_unread_under_int8(m, i)) {
            a++;
            continue;
        }
        const clf_ptr start = m->wdev[i];
        size_t bytes = 0;
        int b = a;
        while (b < m->n_lowp_mat && m->lowp_mat[b].chunk == m->lowp_mat[a].chunk &&
               m->lowp_mat[b].off == start.off + bytes &&
               f32_unread_under_int8(m, m->lowp_mat[b].i)) {
            bytes += (size_t)clf_weight_spec_numel(&m->specs[m->lowp_mat[b].i]) * sizeof(float);
            b++;
        }
        size_t f = 0;
        const clf_status st = clf_op_discard(m->api, m->be, start, bytes, &f);
        if (st != CLF_OK)
            return clf_error_context(st, "model: giving back the F32 copy of '%s'",
                                     m->specs[i].name);
        total += f;
        a = b;
    }
    m->released_bytes += total;
    if (freed)
        *freed = total;
    return CLF_OK;
}

int clf_model_lowp_twin(const clf_model *m, clf_ptr w, size_t bytes, clf_lowp_twin *t)
{
    memset(t, 0, sizeof *t);
    const int c = m->lowp_chunks ? clf_model_chunk_holding(m, w.buf) : -1;
    if (c < 0)
        return 0;
    if (m->lowp_type != CLF_WEIGHT_INT8) {
        t->field = m->lowp_type == CLF_WEIGHT_F16 ? offsetof(clf_gemm_args, b_half)
                                                  : offsetof(clf_gemm_args, b_bf16);
        t->w = (clf_ptr){m->lowp_chunks[c], w.off / 2};
        t->w_bytes = bytes / 2;
        return 1;
    }
    /* the value starts at a matrix (a packed one at its first member) */
    const int i = lowp_mat_at(m, c, w.off);
    if (i < 0)
        return 0;
    const size_t rows = bytes / sizeof(float) / (size_t)m->specs[i].shape[1];
    t->field = offsetof(clf_gemm_args, b_i8);
    t->w = (clf_ptr){m->lowp_chunks[c], w.off / 4};
    t->w_bytes = bytes / 4;
    t->scale = (clf_ptr){m->lowp_chunks[c], m->lowp_scale_off[c] + 8 * m->lowp_row[i]};
    t->scale_bytes = 8 * rows;
    return 1;
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
