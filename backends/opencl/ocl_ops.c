/* ocl_ops.c - the ops that run our own kernels: layernorm, attention, embed, add,
 * softmax, argmax. Each checks its operands against their buffers, then sets the kernel
 * arguments (buffers plus element offsets) and enqueues; nothing waits. */
#include "ocl_internal.h"

#include <stdio.h>

clf_status ocl_check_ln_shape(const char *op, int rows, int cols, clf_ln_style style)
{
    if (rows < 0 || cols <= 0)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: bad shape rows=%d cols=%d", op, rows, cols);
    if (style != CLF_LN_TUTORIAL && style != CLF_LN_STANDARD)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: unknown style %d", op, (int)style);
    if (style == CLF_LN_TUTORIAL && cols < 2)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: the tutorial style needs cols >= 2 (unbiased std)", op);
    return CLF_OK;
}

/* out[r,:] = LN(x[r,:] + residual[r,:]) (see clf_layernorm_args); one work-group a row. */
clf_status ocl_layernorm(clf_backend *be, const clf_layernorm_args *a)
{
    const char *op = "layernorm";
    clf_status st;
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    if ((st = ocl_check_ln_shape(op, a->rows, a->cols, a->style)) != CLF_OK)
        return st;
    if (a->rows == 0)
        return CLF_OK;
    uint64_t n = (uint64_t)a->rows * (uint64_t)a->cols;
    if ((st = ocl_check_operand(be, op, "out", a->out, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "x", a->x, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "residual", a->residual, n, 0)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "sum_out", a->sum_out, n, 0)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "alpha", a->alpha, (uint64_t)a->cols, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "beta", a->beta, (uint64_t)a->cols, 1)) != CLF_OK)
        return st;
    if (a->out.buf == a->x.buf && a->out.off == a->x.off)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: out may not alias x", op);

    cl_mem out = ocl_mem(a->out), x = ocl_mem(a->x), res = ocl_mem(a->residual),
           sum = ocl_mem(a->sum_out), alpha = ocl_mem(a->alpha), beta = ocl_mem(a->beta);
    cl_ulong out_off = ocl_elems(a->out), x_off = ocl_elems(a->x), res_off = ocl_elems(a->residual),
             sum_off = ocl_elems(a->sum_out), alpha_off = ocl_elems(a->alpha),
             beta_off = ocl_elems(a->beta);
    cl_int has_res = a->residual.buf != NULL, has_sum = a->sum_out.buf != NULL, cols = a->cols,
           style = a->style == CLF_LN_STANDARD;
    cl_float eps = a->eps;
    size_t wg = be->wg[OCL_K_LAYERNORM];
    const ocl_arg args[] = {
        {sizeof out, &out},         {sizeof out_off, &out_off},   {sizeof x, &x},
        {sizeof x_off, &x_off},     {sizeof res, &res},           {sizeof res_off, &res_off},
        {sizeof has_res, &has_res}, {sizeof sum, &sum},           {sizeof sum_off, &sum_off},
        {sizeof has_sum, &has_sum}, {sizeof alpha, &alpha},       {sizeof alpha_off, &alpha_off},
        {sizeof beta, &beta},       {sizeof beta_off, &beta_off}, {sizeof cols, &cols},
        {sizeof style, &style},     {sizeof eps, &eps},           {wg * sizeof(cl_float), NULL},
    };
    size_t global = (size_t)a->rows * wg;
    return ocl_launch(be, op, OCL_K_LAYERNORM, args, sizeof args / sizeof args[0], 1, &global, &wg);
}

/* Bounds of the attention operands (see clf_attention_args for the layout). */
static clf_status check_attention(clf_backend *be, const char *op, const clf_attention_args *a)
{
    clf_status st;
    uint64_t B = (uint64_t)a->batch, Tq = (uint64_t)a->q_len, Tk = (uint64_t)a->kv_len,
             width = (uint64_t)a->heads * (uint64_t)a->head_dim;
    if (a->q_ld < 0 || a->k_ld < 0 || a->v_ld < 0 || a->out_ld < 0 || (uint64_t)a->q_ld < width ||
        (uint64_t)a->k_ld < width || (uint64_t)a->v_ld < width || (uint64_t)a->out_ld < width)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: row strides q_ld=%d k_ld=%d v_ld=%d out_ld=%d must be at "
                         "least heads * head_dim = %llu",
                         op, a->q_ld, a->k_ld, a->v_ld, a->out_ld, (unsigned long long)width);
    if ((st = ocl_check_operand(be, op, "q", a->q,
                                ocl_extent(Tq, width, (uint64_t)a->q_ld, B, a->q_bstride), 1)) !=
            CLF_OK ||
        (st = ocl_check_operand(be, op, "k", a->k,
                                ocl_extent(Tk, width, (uint64_t)a->k_ld, B, a->kv_bstride), 1)) !=
            CLF_OK ||
        (st = ocl_check_operand(be, op, "v", a->v,
                                ocl_extent(Tk, width, (uint64_t)a->v_ld, B, a->kv_bstride), 1)) !=
            CLF_OK ||
        (st = ocl_check_operand(be, op, "out", a->out,
                                ocl_extent(Tq, width, (uint64_t)a->out_ld, B, a->out_bstride),
                                1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "key_mask", a->key_mask,
                                ocl_extent(1, Tk, Tk, B, a->key_mask_stride), 0)) != CLF_OK)
        return st;
    uint64_t np = B * (uint64_t)a->heads * Tq * Tk; /* ints: no overflow in 64 bits */
    return ocl_check_operand(be, op, "probs", a->probs, np, 0);
}

clf_status ocl_check_attention_dropout(const char *op, const clf_attention_args *a)
{
    if (!(a->dropout_p >= 0.0f && a->dropout_p < 1.0f)) /* NaN fails too */
        return clf_error(CLF_ERR_INPUT, "opencl: %s: dropout_p = %g is outside [0, 1)", op,
                         (double)a->dropout_p);
    return CLF_OK;
}

ocl_attn_dropout ocl_attention_dropout(const clf_attention_args *a)
{
    ocl_attn_dropout dr = {a->dropout_seed, clf_dropout_threshold(a->dropout_p), 1.0f};
    if (dr.threshold) /* the expression of clf_attention_args, in float, as the CPU has it */
        dr.scale = 1.0f / (1.0f - a->dropout_p);
    return dr;
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
    if ((st = ocl_check_attention_dropout(op, a)) != CLF_OK)
        return st;
    /* kv_len 0 would be a softmax over no keys */
    if (a->batch < 0 || a->heads <= 0 || a->q_len < 0 || a->kv_len <= 0 || a->head_dim <= 0)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: bad shape batch=%d heads=%d q_len=%d kv_len=%d "
                         "head_dim=%d",
                         op, a->batch, a->heads, a->q_len, a->kv_len, a->head_dim);
    if ((st = check_attention(be, op, a)) != CLF_OK || a->batch == 0 || a->q_len == 0)
        return st;

    const int probs = a->probs.buf != NULL;
    const ocl_kernel_id kid = probs ? OCL_K_ATTENTION_PROBS : OCL_K_ATTENTION;
    size_t wg = be->wg[kid];
    /* local scratch: q and the accumulator [head_dim] each, p and red [wg] each */
    uint64_t local_bytes = ((probs ? 1 : 2) * (uint64_t)a->head_dim + (probs ? 1 : 2) * wg) * 4;
    if (local_bytes > be->local_mem)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: head_dim %d needs %llu bytes of local memory, the device "
                         "has %llu",
                         op, a->head_dim, (unsigned long long)local_bytes,
                         (unsigned long long)be->local_mem);

    cl_mem q = ocl_mem(a->q), k = ocl_mem(a->k), v = ocl_mem(a->v), out = ocl_mem(a->out),
           mask = ocl_mem(a->key_mask), pr = ocl_mem(a->probs);
    cl_ulong q_off = ocl_elems(a->q), q_ld = (cl_ulong)a->q_ld, q_bs = a->q_bstride,
             k_off = ocl_elems(a->k), k_ld = (cl_ulong)a->k_ld, v_off = ocl_elems(a->v),
             v_ld = (cl_ulong)a->v_ld, kv_bs = a->kv_bstride, out_off = ocl_elems(a->out),
             out_ld = (cl_ulong)a->out_ld, out_bs = a->out_bstride,
             mask_off = ocl_elems(a->key_mask), mask_stride = a->key_mask_stride,
             pr_off = ocl_elems(a->probs);
    cl_int has_mask = a->key_mask.buf != NULL, kv_len = a->kv_len, hd = a->head_dim,
           causal = a->causal != 0, q_pos0 = a->q_pos0;
    cl_float scale = a->scale;
    ocl_attn_dropout dr = ocl_attention_dropout(a);
    size_t hd_bytes = (size_t)a->head_dim * sizeof(cl_float), wg_bytes = wg * sizeof(cl_float);
    const ocl_arg common[] = {
        {sizeof q, &q},
        {sizeof q_off, &q_off},
        {sizeof q_ld, &q_ld},
        {sizeof q_bs, &q_bs},
        {sizeof k, &k},
        {sizeof k_off, &k_off},
        {sizeof k_ld, &k_ld},
        {sizeof v, &v},
        {sizeof v_off, &v_off},
        {sizeof v_ld, &v_ld},
        {sizeof kv_bs, &kv_bs},
        {sizeof out, &out},
        {sizeof out_off, &out_off},
        {sizeof out_ld, &out_ld},
        {sizeof out_bs, &out_bs},
        {sizeof mask, &mask},
        {sizeof mask_off, &mask_off},
        {sizeof mask_stride, &mask_stride},
        {sizeof has_mask, &has_mask},
        {sizeof kv_len, &kv_len},
        {sizeof hd, &hd},
        {sizeof causal, &causal},
        {sizeof q_pos0, &q_pos0},
        {sizeof scale, &scale},
        {sizeof dr.seed, &dr.seed},
        {sizeof dr.threshold, &dr.threshold},
        {sizeof dr.scale, &dr.scale},
    };
    enum { NCOMMON = sizeof common / sizeof common[0] };
    ocl_arg args[NCOMMON + 4];
    int n = NCOMMON;
    for (int i = 0; i < NCOMMON; i++)
        args[i] = common[i];
    if (probs) {
        args[n++] = (ocl_arg){sizeof pr, &pr};
        args[n++] = (ocl_arg){sizeof pr_off, &pr_off};
        args[n++] = (ocl_arg){hd_bytes, NULL}; /* qs */
        args[n++] = (ocl_arg){wg_bytes, NULL}; /* red */
    } else {
        args[n++] = (ocl_arg){hd_bytes, NULL}; /* qs */
        args[n++] = (ocl_arg){hd_bytes, NULL}; /* acc */
        args[n++] = (ocl_arg){wg_bytes, NULL}; /* p */
        args[n++] = (ocl_arg){wg_bytes, NULL}; /* red */
    }
    size_t global[3] = {(size_t)a->q_len * wg, (size_t)a->heads, (size_t)a->batch};
    size_t local[3] = {wg, 1, 1};
    return ocl_launch(be, op, kid, args, n, 3, global, local);
}

/* out[r,:] = table[ids[r],:] * scale + pe[pos0 + r % seq_len, :] */
clf_status ocl_embed(clf_backend *be, const clf_embed_args *a)
{
    const char *op = "embed";
    clf_status st;
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    if (a->rows < 0 || a->dim <= 0 || a->vocab <= 0 || a->seq_len <= 0 || a->pos0 < 0)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: bad shape rows=%d dim=%d vocab=%d seq_len=%d pos0=%d", op,
                         a->rows, a->dim, a->vocab, a->seq_len, a->pos0);
    if (a->rows == 0)
        return CLF_OK;
    uint64_t dim = (uint64_t)a->dim;
    uint64_t pe_rows = (uint64_t)a->pos0 + (uint64_t)(a->rows < a->seq_len ? a->rows : a->seq_len);
    if ((st = ocl_check_operand(be, op, "out", a->out, (uint64_t)a->rows * dim, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "ids", a->ids, (uint64_t)a->rows, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "table", a->table, (uint64_t)a->vocab * dim, 1)) !=
            CLF_OK ||
        (st = ocl_check_operand(be, op, "pe", a->pe, pe_rows * dim, 0)) != CLF_OK)
        return st;
    cl_mem out = ocl_mem(a->out), ids = ocl_mem(a->ids), table = ocl_mem(a->table),
           pe = ocl_mem(a->pe);
    cl_ulong out_off = ocl_elems(a->out), ids_off = ocl_elems(a->ids),
             table_off = ocl_elems(a->table), pe_off = ocl_elems(a->pe);
    cl_int has_pe = a->pe.buf != NULL, rows = a->rows, seq_len = a->seq_len, pos0 = a->pos0,
           d = a->dim, vocab = a->vocab;
    cl_float scale = a->scale;
    const ocl_arg args[] = {
        {sizeof out, &out},
        {sizeof out_off, &out_off},
        {sizeof ids, &ids},
        {sizeof ids_off, &ids_off},
        {sizeof table, &table},
        {sizeof table_off, &table_off},
        {sizeof pe, &pe},
        {sizeof pe_off, &pe_off},
        {sizeof has_pe, &has_pe},
        {sizeof rows, &rows},
        {sizeof seq_len, &seq_len},
        {sizeof pos0, &pos0},
        {sizeof d, &d},
        {sizeof vocab, &vocab},
        {sizeof scale, &scale},
    };
    return ocl_launch_elementwise(be, op, OCL_K_EMBED, args, sizeof args / sizeof args[0],
                                  (uint64_t)a->rows * dim);
}

/* out[i] = a[i] + b[i], i < n */
clf_status ocl_add(clf_backend *be, clf_ptr out, clf_ptr a, clf_ptr b, size_t n)
{
    const char *op = "add";
    clf_status st;
    if (n == 0)
        return CLF_OK;
    if ((st = ocl_check_operand(be, op, "out", out, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "a", a, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "b", b, n, 1)) != CLF_OK)
        return st;
    cl_mem mo = ocl_mem(out), ma = ocl_mem(a), mb = ocl_mem(b);
    cl_ulong oo = ocl_elems(out), ao = ocl_elems(a), bo = ocl_elems(b), nn = n;
    const ocl_arg args[] = {
        {sizeof mo, &mo}, {sizeof oo, &oo}, {sizeof ma, &ma}, {sizeof ao, &ao},
        {sizeof mb, &mb}, {sizeof bo, &bo}, {sizeof nn, &nn},
    };
    return ocl_launch_elementwise(be, op, OCL_K_ADD, args, sizeof args / sizeof args[0], n);
}

/* Checks a [rows, cols] row op's sizes and operands (out_elems: per row). */
static clf_status check_rows(clf_backend *be, const char *op, clf_ptr out, clf_ptr x, int rows,
                             int cols, uint64_t out_per_row)
{
    clf_status st;
    if (rows < 0 || cols <= 0)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: bad shape rows=%d cols=%d", op, rows, cols);
    if (rows == 0)
        return CLF_OK;
    if ((st = ocl_check_operand(be, op, "out", out, (uint64_t)rows * out_per_row, 1)) != CLF_OK)
        return st;
    return ocl_check_operand(be, op, "x", x, (uint64_t)rows * (uint64_t)cols, 1);
}

/* out[r,:] = softmax(x[r,:]) or log_softmax; one work-group a row. */
clf_status ocl_softmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols, int log)
{
    const char *op = log ? "log_softmax" : "softmax";
    clf_status st = check_rows(be, op, out, x, rows, cols, (uint64_t)(cols > 0 ? cols : 0));
    if (st != CLF_OK || rows == 0)
        return st;
    cl_mem mo = ocl_mem(out), mx = ocl_mem(x);
    cl_ulong oo = ocl_elems(out), xo = ocl_elems(x);
    cl_int c = cols, lg = log != 0;
    size_t wg = be->wg[OCL_K_SOFTMAX];
    const ocl_arg args[] = {
        {sizeof mo, &mo},
        {sizeof oo, &oo},
        {sizeof mx, &mx},
        {sizeof xo, &xo},
        {sizeof c, &c},
        {sizeof lg, &lg},
        {wg * sizeof(cl_float), NULL},
    };
    size_t global = (size_t)rows * wg;
    return ocl_launch(be, op, OCL_K_SOFTMAX, args, sizeof args / sizeof args[0], 1, &global, &wg);
}

/* out[r] = index of the first maximum of x[r,:] (I32). */
clf_status ocl_argmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols)
{
    const char *op = "argmax";
    clf_status st = check_rows(be, op, out, x, rows, cols, 1);
    if (st != CLF_OK || rows == 0)
        return st;
    cl_mem mo = ocl_mem(out), mx = ocl_mem(x);
    cl_ulong oo = ocl_elems(out), xo = ocl_elems(x);
    cl_int c = cols;
    size_t wg = be->wg[OCL_K_ARGMAX];
    const ocl_arg args[] = {
        {sizeof mo, &mo},
        {sizeof oo, &oo},
        {sizeof mx, &mx},
        {sizeof xo, &xo},
        {sizeof c, &c},
        {wg * sizeof(cl_float), NULL},
        {wg * sizeof(cl_int), NULL},
    };
    size_t global = (size_t)rows * wg;
    return ocl_launch(be, op, OCL_K_ARGMAX, args, sizeof args / sizeof args[0], 1, &global, &wg);
}
