/* What the CPU backend's files share: the buffer and backend structs, the operand checks,
 * the training ops (cpu_train.c, cpu_attention_backward.c) and the plugin ops
 * (cpu_plugin.c) that cpu_backend.c puts in its api table. Nothing here is exported: the
 * target builds with hidden visibility, so only clf_backend_entry leaves the .so. */
#ifndef CLF_CPU_INTERNAL_H
#define CLF_CPU_INTERNAL_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "clformer/backend.h"

#define MASKED_SCORE (-1e9f) /* what masked_fill(mask == 0, -1e9) writes */

struct clf_buffer {
    size_t size; /* bytes */
    unsigned char *data;
};

struct clf_backend {
    int threads;
};

/* ---- operand checks ---- */

/* Checks that [ptr.off, ptr.off + bytes) lies inside ptr.buf and is 4-byte aligned. */
static inline clf_status check_span(const char *op, const char *operand, clf_ptr p, size_t bytes)
{
    if (!p.buf)
        return clf_error(CLF_ERR_INPUT, "cpu: %s: operand '%s' is missing", op, operand);
    if (p.off % 4 != 0)
        return clf_error(CLF_ERR_INPUT, "cpu: %s: operand '%s' offset %zu is not 4-byte aligned",
                         op, operand, p.off);
    if (p.off > p.buf->size || bytes > p.buf->size - p.off)
        return clf_error(CLF_ERR_INPUT,
                         "cpu: %s: operand '%s' needs bytes [%zu, %zu) but its buffer holds %zu",
                         op, operand, p.off, p.off + bytes, p.buf->size);
    return CLF_OK;
}

/* The shape rules layernorm and its backward share (clf_check_ln_shape). */
static inline clf_status check_ln_shape(const char *op, int rows, int cols, clf_ln_style style)
{
    return clf_check_ln_shape("cpu", op, rows, cols, style);
}

/* 1 when the byte ranges [a.off, a.off + abytes) and [b.off, b.off + bbytes) overlap. */
static inline int spans_overlap(clf_ptr a, size_t abytes, clf_ptr b, size_t bbytes)
{
    return a.buf && a.buf == b.buf && abytes && bbytes && a.off < b.off + bbytes &&
           b.off < a.off + abytes;
}

static inline float *fptr(clf_ptr p)
{
    return (float *)(void *)(p.buf->data + p.off);
}
static inline int32_t *iptr(clf_ptr p)
{
    return (int32_t *)(void *)(p.buf->data + p.off);
}

/* Elements spanned by `rows` rows of `cols` elements `ld` apart (0 when empty). */
static inline size_t span2d(size_t rows, size_t cols, size_t ld)
{
    return rows && cols ? (rows - 1) * ld + cols : 0;
}

/* ---- attention ---- */

/* s[j] = P(b, h, i, j) for j < kv_len: the masked, scaled softmax of one query row over the
 * keys. q is query i's head slice, kb key 0's head slice (keys k_ld apart), mask the
 * batch's key mask or NULL. The forward (cpu_attention) and the backward, which
 * recomputes the probabilities, share it so that both see the same bits. */
static inline void attention_probs_row(const clf_attention_args *a, const float *q, const float *kb,
                                       const int32_t *mask, int i, float *s)
{
    int Tk = a->kv_len, D = a->head_dim;
    float mx = -FLT_MAX;
    for (int j = 0; j < Tk; j++) {
        int masked = (mask && mask[j] == 0) || (a->causal && j > a->q_pos0 + i);
        float dot = 0.0f;
        if (!masked) {
            const float *k = kb + (size_t)j * a->k_ld;
#pragma omp simd reduction(+ : dot)
            for (int d = 0; d < D; d++)
                dot += q[d] * k[d];
            dot *= a->scale;
        }
        s[j] = masked ? MASKED_SCORE : dot;
        mx = s[j] > mx ? s[j] : mx;
    }
    double denom = 0.0;
    for (int j = 0; j < Tk; j++) {
        s[j] = expf(s[j] - mx);
        denom += s[j];
    }
    float inv = (float)(1.0 / denom);
    for (int j = 0; j < Tk; j++)
        s[j] *= inv;
}

/* Dropout on the attention probabilities (clf_attention_args.dropout_p): element
 * e = ((b * heads + h) * q_len + i) * kv_len + j is kept when clf_dropout_bits(seed, e) >=
 * threshold, and a kept weight is multiplied by scale = 1.0f / (1.0f - p). on = 0 (p = 0,
 * or a p so small that its threshold is 0 and its scale 1.0f) skips the hash: every
 * element is kept unscaled, which is what the mask would give. */
typedef struct attn_dropout {
    int on;
    uint32_t threshold;
    float scale;
    uint64_t seed;
} attn_dropout;

static inline attn_dropout attention_dropout(const clf_attention_args *a)
{
    attn_dropout dr = {0, 0, 1.0f, a->dropout_seed};
    dr.threshold = clf_dropout_threshold(a->dropout_p);
    dr.on = dr.threshold != 0;
    if (dr.on)
        dr.scale = 1.0f / (1.0f - a->dropout_p);
    return dr;
}

/* scale if element e is kept, else 0 (dr->on). */
static inline float attention_keep(const attn_dropout *dr, uint64_t e)
{
    return clf_dropout_bits(dr->seed, e) >= dr->threshold ? dr->scale : 0.0f;
}

/* CLF_ERR_INPUT unless 0 <= dropout_p < 1 (NaN fails too). */
static inline clf_status check_attention_dropout(const char *op, const clf_attention_args *a)
{
    if (!(a->dropout_p >= 0.0f && a->dropout_p < 1.0f))
        return clf_error(CLF_ERR_INPUT, "cpu: %s: dropout_p=%g is outside [0, 1)", op,
                         (double)a->dropout_p);
    return CLF_OK;
}

/* ---- training ops (ABI 2), semantics in clformer/backend.h ---- */

clf_status cpu_relu_backward(clf_backend *be, clf_ptr dx, clf_ptr dy, clf_ptr y, size_t n);
clf_status cpu_layernorm_backward(clf_backend *be, const clf_layernorm_backward_args *a);
clf_status cpu_attention_backward(clf_backend *be, const clf_attention_backward_args *a);
clf_status cpu_embed_backward(clf_backend *be, const clf_embed_backward_args *a);
clf_status cpu_dropout(clf_backend *be, const clf_dropout_args *a);
clf_status cpu_cross_entropy(clf_backend *be, const clf_cross_entropy_args *a);
clf_status cpu_adam(clf_backend *be, const clf_adam_args *a);
clf_status cpu_sum_squares(clf_backend *be, clf_ptr out, clf_ptr x, size_t n);
clf_status cpu_fill(clf_backend *be, clf_ptr out, float value, size_t n);

/* ---- plugin ops (ABI 3, cpu_plugin.c), semantics in clformer/backend.h ---- */

clf_status cpu_plugin_prepare(clf_backend *be, const clf_plugin_op *op);
clf_status cpu_plugin_activation(clf_backend *be, const clf_activation_args *a);
clf_status cpu_plugin_activation_backward(clf_backend *be, const clf_activation_backward_args *a);
clf_status cpu_plugin_norm(clf_backend *be, const clf_norm_args *a);
clf_status cpu_plugin_norm_backward(clf_backend *be, const clf_norm_backward_args *a);

#endif
