/* ocl_ops.c - the ops that run our own kernels: layernorm, attention, embed, add,
 * softmax, argmax, topk, beam_choose. Each sets the kernel arguments (buffers plus element
 * offsets) and enqueues; nothing waits. The core has checked the arguments (clformer/ops.h). */
#include "ocl_internal.h"

#include <stdio.h>

/* out[r,:] = LN(x[r,:] + residual[r,:]) (see clf_layernorm_args); one work-group a row. */
clf_status ocl_layernorm(clf_backend *be, const clf_layernorm_args *a)
{
    const char *op = "layernorm";
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    /* shape, operands and aliasing: checked by the core (clformer/ops.h) */
    if (a->rows == 0)
        return CLF_OK;

    size_t wg = be->wg[OCL_K_LAYERNORM];
    const ocl_kval args[] = {OCL_KBUF(a->out),        OCL_KBUF(a->x),       OCL_KBUF(a->residual),
                             ocl_khas(a->residual),   OCL_KBUF(a->sum_out), ocl_khas(a->sum_out),
                             OCL_KBUF(a->alpha),      OCL_KBUF(a->beta),    ocl_kint(a->cols),
                             ocl_kln_style(a->style), ocl_kfloat(a->eps),   ocl_kfloats(wg)};
    return ocl_run_rows(be, op, be->kernels[OCL_K_LAYERNORM], wg, args, OCL_COUNT(args), a->rows);
}

clf_status ocl_check_attention_local(clf_backend *be, const char *op, int head_dim, int vectors,
                                     size_t wg, int tiles)
{
    uint64_t bytes = ((uint64_t)vectors * (uint64_t)head_dim + (uint64_t)tiles * wg) * 4;
    if (bytes > be->local_mem)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: head_dim %d needs %llu bytes of local memory, the device "
                         "has %llu",
                         op, head_dim, (unsigned long long)bytes,
                         (unsigned long long)be->local_mem);
    return CLF_OK;
}

clf_status ocl_run_attention(clf_backend *be, const char *op, cl_kernel k, size_t wg,
                             const clf_attention_args *f, clf_ptr out, int by_key,
                             const ocl_kval *tail, int ntail)
{
    /* dropout: threshold 0 keeps every element; the scale is the expression of
     * clf_attention_args, in float, as the CPU has it */
    const cl_uint threshold = clf_dropout_threshold(f->dropout_p);
    const cl_float keep_scale = threshold ? 1.0f / (1.0f - f->dropout_p) : 1.0f;
    /* a line per group of the kernels' parameters */
    /* clang-format off */
    const ocl_kval head[] = {
        OCL_KBUF(f->q), ocl_kulong(f->q_ld), ocl_kulong(f->q_bstride),
        OCL_KBUF(f->k), ocl_kulong(f->k_ld),
        OCL_KBUF(f->v), ocl_kulong(f->v_ld), ocl_kulong(f->kv_bstride),
        OCL_KBUF(out), ocl_kulong(f->out_ld), ocl_kulong(f->out_bstride),
        OCL_KBUF(f->key_mask), ocl_kulong(f->key_mask_stride), ocl_khas(f->key_mask),
        ocl_kint(by_key ? f->q_len : f->kv_len), ocl_kint(f->head_dim), ocl_kbool(f->causal),
        ocl_kint(f->q_pos0), ocl_kfloat(f->scale),
        ocl_kulong(f->dropout_seed), ocl_kuint(threshold), ocl_kfloat(keep_scale),
    };
    /* clang-format on */
    size_t global[3] = {(size_t)(by_key ? f->kv_len : f->q_len) * wg, (size_t)f->heads,
                        (size_t)f->batch};
    size_t local[3] = {wg, 1, 1};
    return ocl_run(be, op, k, head, OCL_COUNT(head), tail, ntail, 3, global, local);
}

/* q, k, v, out: heads split from the feature dim (layout: clf_attention_args).
 * out_i = sum_j w_j v_j, w = softmax_j(scale q_i . k_j, -1e9 where masked), times
 * keep(e) / (1 - p) with dropout (e = ((b * heads + h) * q_len + i) * kv_len + j).
 * Fused kernel (online softmax); with probs requested, the two-step kernel that stores
 * the softmax before dropout. One work-group per (query, head, batch). */
clf_status ocl_attention(clf_backend *be, const clf_attention_args *a)
{
    const char *op = "attention";
    clf_status st;
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    /* dropout_p, shape, strides and operands: checked by the core (clformer/ops.h) */
    if (a->batch == 0 || a->q_len == 0)
        return CLF_OK;

    const int probs = a->probs.buf != NULL;
    const ocl_kernel_id kid = probs ? OCL_K_ATTENTION_PROBS : OCL_K_ATTENTION;
    size_t wg = be->wg[kid];
    /* local scratch: qs [head_dim] and red [wg] with probs; fused, qs and acc [head_dim], p
     * and red [wg] */
    const int pairs = probs ? 1 : 2;
    if ((st = ocl_check_attention_local(be, op, a->head_dim, pairs, wg, pairs)) != CLF_OK)
        return st;
    const ocl_kval qs = ocl_kfloats((size_t)a->head_dim), tile = ocl_kfloats(wg);
    /* the row table (absent: has_rows 0, and the kernel reads no row of it), then the
     * appended rows (absent: has_new 0), then the position on the device (has_pos 0) */
#define OCL_ROWS                                                                                   \
    OCL_KBUF(a->kv_rows), ocl_kulong((cl_ulong)a->kv_rows_ld), ocl_khas(a->kv_rows),               \
        ocl_kint(a->kv_entries), OCL_KBUF(a->k_new), OCL_KBUF(a->v_new),                           \
        ocl_kulong((cl_ulong)a->new_ld), ocl_kint(a->new_pos), ocl_khas(a->k_new),                 \
        OCL_KBUF(a->pos_add), ocl_khas(a->pos_add), ocl_kint(a->pos_add_max)
    const ocl_kval with_probs[] = {OCL_ROWS, OCL_KBUF(a->probs), qs, tile},
                   fused[] = {OCL_ROWS, qs, qs, tile, tile};
#undef OCL_ROWS
    return ocl_run_attention(be, op, be->kernels[kid], wg, a, a->out, 0, probs ? with_probs : fused,
                             probs ? OCL_COUNT(with_probs) : OCL_COUNT(fused));
}

/* out[r,:] = table[ids[r],:] * scale + pe[pos0 + r % seq_len, :] */
clf_status ocl_embed(clf_backend *be, const clf_embed_args *a)
{
    const char *op = "embed";
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    /* shape and operands: checked by the core (clformer/ops.h) */
    const ocl_kval args[] = {OCL_KBUF(a->out),     OCL_KBUF(a->ids),        OCL_KBUF(a->table),
                             OCL_KBUF(a->pe),      ocl_khas(a->pe),         ocl_kint(a->rows),
                             ocl_kint(a->seq_len), ocl_kint(a->pos0),       ocl_kint(a->dim),
                             ocl_kint(a->vocab),   ocl_kfloat(a->scale),    OCL_KBUF(a->pos_add),
                             ocl_khas(a->pos_add), ocl_kint(a->pos_add_max)};
    return ocl_run_elementwise(be, op, be->kernels[OCL_K_EMBED], be->wg[OCL_K_EMBED], args,
                               OCL_COUNT(args), (uint64_t)a->rows * (uint64_t)a->dim);
}

/* out[i] = a[i] + b[i], i < n (add, softmax, argmax: shapes and operands checked by the
 * core, clformer/ops.h) */
clf_status ocl_add(clf_backend *be, clf_ptr out, clf_ptr a, clf_ptr b, size_t n)
{
    const char *op = "add";
    const ocl_kval args[] = {OCL_KBUF(out), OCL_KBUF(a), OCL_KBUF(b), ocl_kulong(n)};
    return ocl_run_elementwise(be, op, be->kernels[OCL_K_ADD], be->wg[OCL_K_ADD], args,
                               OCL_COUNT(args), n);
}

/* out[r,:] = softmax(x[r,:]) or log_softmax; one work-group a row. */
clf_status ocl_softmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols, int log)
{
    const char *op = log ? "log_softmax" : "softmax";
    size_t wg = be->wg[OCL_K_SOFTMAX];
    const ocl_kval args[] = {OCL_KBUF(out), OCL_KBUF(x), ocl_kint(cols), ocl_kbool(log),
                             ocl_kfloats(wg)};
    return ocl_run_rows(be, op, be->kernels[OCL_K_SOFTMAX], wg, args, OCL_COUNT(args), rows);
}

/* out[r] = index of the first maximum of x[r,:] (I32). */
clf_status ocl_argmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols)
{
    const char *op = "argmax";
    size_t wg = be->wg[OCL_K_ARGMAX];
    const ocl_kval args[] = {OCL_KBUF(out), OCL_KBUF(x), ocl_kint(cols), ocl_kfloats(wg),
                             ocl_klocal(wg * sizeof(cl_int))};
    return ocl_run_rows(be, op, be->kernels[OCL_K_ARGMAX], wg, args, OCL_COUNT(args), rows);
}

/* val, idx [rows, k]: each row's k best of base + x, or of base + log_softmax(x)
 * (clf_topk_args), k rounds of an argmax-like reduction per row. */
clf_status ocl_topk(clf_backend *be, const clf_topk_args *a)
{
    const char *op = "topk";
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    size_t wg = be->wg[OCL_K_TOPK];
    const ocl_kval args[] = {OCL_KBUF(a->val),  OCL_KBUF(a->idx),
                             OCL_KBUF(a->x),    OCL_KBUF(a->base),
                             ocl_khas(a->base), ocl_kbool(a->log_softmax),
                             ocl_kint(a->cols), ocl_kint(a->k),
                             ocl_kfloats(wg),   ocl_klocal(wg * sizeof(cl_int))};
    return ocl_run_rows(be, op, be->kernels[OCL_K_TOPK], wg, args, OCL_COUNT(args), a->rows);
}

/* Beam search's next beams (clf_beam_args): one work-group a sentence, its first work-item
 * choosing, the group copying the row tables. */
clf_status ocl_beam_choose(clf_backend *be, const clf_beam_args *a)
{
    const char *op = "beam_choose";
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    const ocl_kval args[] = {OCL_KBUF(a->choices), OCL_KBUF(a->ids),    OCL_KBUF(a->rows_out),
                             OCL_KBUF(a->val),     OCL_KBUF(a->idx),    OCL_KBUF(a->base),
                             OCL_KBUF(a->rows_in), OCL_KBUF(a->banned), ocl_kint(a->n_banned),
                             ocl_kint(a->K),       ocl_kint(a->top_k),  ocl_kint(a->eos_id),
                             ocl_kint(a->ld),      ocl_kint(a->pos)};
    return ocl_run_rows(be, op, be->kernels[OCL_K_BEAM_CHOOSE], be->wg[OCL_K_BEAM_CHOOSE], args,
                        OCL_COUNT(args), a->n);
}
