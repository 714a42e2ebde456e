/* A model's low-precision twins of its GEMM matrices (clf_model_set_weight_type): F16 or
 * BF16 halves at half the F32 offsets, int8 at a quarter with per-row {scale, sum} pairs;
 * the BF16 copy of precision bf16 (clf_model_copy16); which F32 matrices int8 inference
 * gives back (clf_model_release_f32); and the twin a product binds (clf_model_lowp_twin). */
#include "clformer/model.h"

#include "graph/graph_private.h"
#include "numeric/numeric_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* Elements [first, first + count) of matrix i as F32 into mat, for its `type` copy: from
 * the weights being consumed when the matrix was left off the device (m->deferred), else
 * read back from the device (the weights as they are now: loaded, or trained here). */
static clf_status matrix_read(clf_model *m, int i, size_t first, size_t count, clf_weight_type type,
                              float *mat)
{
    if (m->deferred && m->deferred[i])
        return m->pending ? clf_weights_read(m->pending, i, (int64_t)first, (int64_t)count, mat)
                          : clf_error(CLF_ERR_UNSUPPORTED,
                                      "model: '%s' has only its int8 copy (it was quantized "
                                      "from the file at load); load the model again",
                                      m->specs[i].name);
    const clf_ptr at = {m->wdev[i].buf, m->wdev[i].off + first * sizeof *mat};
    clf_status st = clf_op_download(m->api, m->be, mat, at, count * sizeof *mat);
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

/* The elements a matrix is converted to F16/BF16 through at a time (clf_model_copy16). */
#define HALF_BLOCK ((size_t)1 << 20)

clf_status clf_model_copy16(clf_model *m, int c, clf_weight_type type, clf_buffer *dst)
{
    const int f16 = type == CLF_WEIGHT_F16;
    clf_status st = CLF_OK;
    float *mat = malloc(HALF_BLOCK * sizeof *mat);
    uint16_t *h = malloc(HALF_BLOCK * sizeof *h);
    if (!mat || !h) {
        st = host_nomem(type);
        goto fail;
    }
    for (int i = next_matrix(m, c, -1); i >= 0; i = next_matrix(m, c, i)) {
        const clf_weight_spec *sp = &m->specs[i];
        const size_t count = (size_t)clf_weight_spec_numel(sp);
        for (size_t first = 0; first < count; first += HALF_BLOCK) {
            const size_t len = count - first < HALF_BLOCK ? count - first : HALF_BLOCK;
            if ((st = matrix_read(m, i, first, len, type, mat)) != CLF_OK)
                goto fail;
            for (size_t e = 0; e < len; e++) {
                if (!(f16 ? clf_float_fits_half(mat[e]) : clf_float_fits_bf16(mat[e]))) {
                    st = clf_unfit_error(NULL, sp->name, (int64_t)(first + e), mat[e],
                                         f16 ? CLF_F16 : CLF_BF16);
                    goto fail;
                }
                h[e] = f16 ? clf_float_to_half(mat[e]) : clf_float_to_bf16(mat[e]);
            }
            const clf_ptr at = {dst, m->wdev[i].off / 2 + first * sizeof *h};
            st = clf_op_upload(m->api, m->be, at, h, len * sizeof *h);
            if ((st = upload_done(m, st, type, sp->name)) != CLF_OK)
                goto fail;
        }
    }
fail:
    free(mat);
    free(h);
    return st;
}

/* The elements of a matrix int8 quantizes at a time (whole rows, at least one). */
#define I8_BLOCK ((size_t)1 << 20)

/* Makes m->lowp_chunks[c], the twin of chunk c as type: F16/BF16 halves at half the
 * offsets (clf_model_copy16), or int8 at a quarter of them and the {scale, sum} pairs from
 * m->lowp_scale_off[c] (m->lowp_row filled for the chunk's matrices). int8 a block of rows
 * at a time: read (matrix_read), quantized, written to its place in the twin, so that the
 * host holds one block and its conversion. The twin's bytes under the other weights are
 * never written (nothing reads them), so on the CPU they are never resident. */
static clf_status lowp_make(clf_model *m, int c, clf_weight_type type)
{
    const size_t n = m->chunk_bytes[c] / sizeof(float);
    size_t rows = 0, block_rows = 1, bytes;
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
    /* rows a block: I8_BLOCK elements of the chunk's widest matrix, at least one row */
    size_t widest = 1;
    for (int i = next_matrix(m, c, -1); i >= 0; i = next_matrix(m, c, i))
        widest = (size_t)m->specs[i].shape[1] > widest ? (size_t)m->specs[i].shape[1] : widest;
    block_rows = I8_BLOCK / widest > 0 ? I8_BLOCK / widest : 1;
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
    /* a block converted: int8 values then its rows' {scale, sum} pairs (sc: the scales) */
    mat = malloc(block_rows * widest * sizeof *mat);
    conv = malloc(block_rows * widest + 8 * block_rows);
    sc = malloc(block_rows * sizeof *sc);
    if (!mat || !conv || !sc) {
        st = host_nomem(type);
        goto fail;
    }
    for (int i = next_matrix(m, c, -1); i >= 0; i = next_matrix(m, c, i)) {
        const clf_weight_spec *sp = &m->specs[i];
        const int64_t R = sp->shape[0], K = sp->shape[1];
        for (int64_t r0 = 0; r0 < R; r0 += (int64_t)block_rows) {
            const int64_t nr = R - r0 < (int64_t)block_rows ? R - r0 : (int64_t)block_rows;
            const size_t first = (size_t)(r0 * K), count = (size_t)(nr * K);
            if ((st = matrix_read(m, i, first, count, type, mat)) != CLF_OK)
                goto fail;
            int8_t *q = (int8_t *)(void *)conv;
            unsigned char *pairs = conv + count;
            int64_t bad = clf_quantize_rows_i8(mat, nr, K, q, sc);
            if (bad >= 0) {
                st = clf_unfit_error(NULL, sp->name, (int64_t)first + bad, mat[bad], CLF_I8);
                goto fail;
            }
            for (int64_t r = 0; r < nr; r++) {
                int32_t sum = 0;
                for (int64_t p = 0; p < K; p++)
                    sum += q[r * K + p];
                memcpy(pairs + 8 * r, &sc[r], 4);
                memcpy(pairs + 8 * r + 4, &sum, 4);
            }
            clf_ptr at = {m->lowp_chunks[c], m->wdev[i].off / sizeof(float) + first};
            if ((st = clf_op_upload(m->api, m->be, at, q, count)) == CLF_OK) {
                at.off = m->lowp_scale_off[c] + 8 * (m->lowp_row[i] + (size_t)r0);
                st = clf_op_upload(m->api, m->be, at, pairs, 8 * (size_t)nr);
            }
            if ((st = upload_done(m, st, type, sp->name)) != CLF_OK)
                goto fail;
        }
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
    clf_model_lowp_free(m);
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
    clf_model_lowp_free(m);
    return st;
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
        if (!clf_model_f32_unread_under_int8(m, i)) {
            a++;
            continue;
        }
        const clf_ptr start = m->wdev[i];
        size_t bytes = 0;
        int b = a;
        while (b < m->n_lowp_mat && m->lowp_mat[b].chunk == m->lowp_mat[a].chunk &&
               m->lowp_mat[b].off == start.off + bytes &&
               clf_model_f32_unread_under_int8(m, m->lowp_mat[b].i)) {
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
