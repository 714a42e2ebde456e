/* ocl_train.c - the training ops other than attention_backward: relu_backward,
 * layernorm_backward, embed_backward, dropout, cross_entropy, adam, sum_squares, fill.
 * Each sets the kernel arguments (buffers plus element offsets) and enqueues; nothing
 * waits. The core has checked the arguments (clformer/ops.h). Reductions never use atomics
 * and always add in a fixed order, so every op gives the same bits run after run. */
#include "ocl_internal.h"

/* dx[i] = y[i] > 0 ? dy[i] : 0, i < n */
clf_status ocl_relu_backward(clf_backend *be, clf_ptr dx, clf_ptr dy, clf_ptr y, size_t n)
{
    const char *op = "relu_backward";
    const ocl_kval args[] = {OCL_KBUF(dx), OCL_KBUF(dy), OCL_KBUF(y), ocl_kulong(n)};
    return ocl_run_elementwise(be, op, be->kernels[OCL_K_RELU_BACKWARD],
                               be->wg[OCL_K_RELU_BACKWARD], args, OCL_COUNT(args), n);
}

/* dx (=, +=) and dalpha, dbeta (+=) of out = LN(x) (see clf_layernorm_backward_args).
 * One work-group per row for dx; then, when a parameter gradient is wanted, a kernel over
 * columns that sums the rows in a fixed order from the row statistics the first one left
 * in the scratch buffer. */
clf_status ocl_layernorm_backward(clf_backend *be, const clf_layernorm_backward_args *a)
{
    const char *op = "layernorm_backward";
    clf_status st;
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    /* shape, operands and aliasing: checked by the core (clformer/ops.h) */
    if (a->rows == 0)
        return CLF_OK;

    const int params = a->dalpha.buf != NULL || a->dbeta.buf != NULL;
    cl_mem stats = NULL;
    if (params &&
        (st = ocl_scratch(be, op, (size_t)a->rows * 3 * sizeof(cl_float), &stats)) != CLF_OK)
        return st;
    size_t wg = be->wg[OCL_K_LAYERNORM_BACKWARD];
    const ocl_kval args[] = {OCL_KBUF(a->dx),          OCL_KBUF(a->dy),         OCL_KBUF(a->x),
                             OCL_KBUF(a->alpha),       ocl_kmem(stats),         ocl_kbool(params),
                             ocl_kint(a->cols),        ocl_kln_style(a->style), ocl_kfloat(a->eps),
                             ocl_kbool(a->accumulate), ocl_kfloats(wg)};
    if ((st = ocl_run_rows(be, op, be->kernels[OCL_K_LAYERNORM_BACKWARD], wg, args, OCL_COUNT(args),
                           a->rows)) != CLF_OK ||
        !params)
        return st;
    const ocl_kval head[] = {OCL_KBUF(a->dy), OCL_KBUF(a->x), ocl_kmem(stats)};
    return ocl_run_param_grads(be, op, be->kernels[OCL_K_LAYERNORM_BACKWARD_PARAMS],
                               be->wg[OCL_K_LAYERNORM_BACKWARD_PARAMS], head, OCL_COUNT(head),
                               a->dalpha, a->dbeta, a->rows, a->cols);
}

/* dtable[ids[r], :] += scale * dout[r, :], rows in increasing r; one work-item a column. */
clf_status ocl_embed_backward(clf_backend *be, const clf_embed_backward_args *a)
{
    const char *op = "embed_backward";
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    const ocl_kval args[] = {OCL_KBUF(a->dtable), OCL_KBUF(a->dout), OCL_KBUF(a->ids),
                             ocl_kint(a->rows),   ocl_kint(a->dim),  ocl_kint(a->vocab),
                             ocl_kfloat(a->scale)};
    size_t wg = be->wg[OCL_K_EMBED_BACKWARD];
    size_t global = ((size_t)a->dim + wg - 1) / wg * wg;
    return ocl_run(be, op, be->kernels[OCL_K_EMBED_BACKWARD], args, OCL_COUNT(args), NULL, 0, 1,
                   &global, &wg);
}

/* Inverted dropout with the mask of clf_dropout_bits / clf_dropout_threshold. */
clf_status ocl_dropout(clf_backend *be, const clf_dropout_args *a)
{
    const char *op = "dropout";
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    const cl_uint threshold = clf_dropout_threshold(a->p);
    /* the expression of clf_dropout_args, in float, so both backends scale by the same bits */
    const cl_float keep_scale = 1.0f / (1.0f - a->p);
    const ocl_kval args[] = {OCL_KBUF(a->out),    OCL_KBUF(a->x),       ocl_kulong(a->n),
                             ocl_kulong(a->seed), ocl_kuint(threshold), ocl_kfloat(keep_scale)};
    return ocl_run_elementwise(be, op, be->kernels[OCL_K_DROPOUT], be->wg[OCL_K_DROPOUT], args,
                               OCL_COUNT(args), a->n);
}

/* Label-smoothed cross-entropy and its gradient; one work-group per row. */
clf_status ocl_cross_entropy(clf_backend *be, const clf_cross_entropy_args *a)
{
    const char *op = "cross_entropy";
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    size_t wg = be->wg[OCL_K_CROSS_ENTROPY];
    const ocl_kval args[] = {OCL_KBUF(a->loss),         OCL_KBUF(a->dlogits),
                             ocl_khas(a->dlogits),      OCL_KBUF(a->logits),
                             OCL_KBUF(a->targets),      ocl_kint(a->cols),
                             ocl_kint(a->ignore_index), ocl_kfloat(a->label_smoothing),
                             ocl_kfloat(a->grad_scale), ocl_kfloats(wg)};
    return ocl_run_rows(be, op, be->kernels[OCL_K_CROSS_ENTROPY], wg, args, OCL_COUNT(args),
                        a->rows);
}

/* One Adam / AdamW step (see clf_adam_args). */
clf_status ocl_adam(clf_backend *be, const clf_adam_args *a)
{
    const char *op = "adam";
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    /* PyTorch forms these scalars in double (Python floats) and rounds each once */
    const cl_float neg_step = (cl_float)(-((double)a->lr / (double)a->bias_correction1)),
                   decay = (cl_float)(1.0 - (double)a->lr * (double)a->weight_decay),
                   one_beta1 = (cl_float)(1.0 - (double)a->beta1),
                   one_beta2 = (cl_float)(1.0 - (double)a->beta2);
    const ocl_kval args[] = {
        OCL_KBUF(a->param),
        OCL_KBUF(a->grad),
        OCL_KBUF(a->m),
        OCL_KBUF(a->v),
        ocl_kulong(a->n),
        ocl_kfloat(a->beta1),
        ocl_kfloat(a->beta2),
        ocl_kfloat(one_beta1),
        ocl_kfloat(one_beta2),
        ocl_kfloat(a->eps),
        ocl_kfloat(a->weight_decay),
        ocl_kfloat(a->grad_scale),
        ocl_kfloat(neg_step),
        ocl_kfloat(a->sqrt_bias_correction2),
        ocl_kfloat(decay),
        ocl_kbool(a->decoupled),
    };
    return ocl_run_elementwise(be, op, be->kernels[OCL_K_ADAM], be->wg[OCL_K_ADAM], args,
                               OCL_COUNT(args), a->n);
}

/* out[0] = sum_i x[i]^2 in two stages: per-work-group partial sums into the scratch
 * buffer, then one work-group adds them. n = 0 gives 0. */
clf_status ocl_sum_squares(clf_backend *be, clf_ptr out, clf_ptr x, size_t n)
{
    const char *op = "sum_squares";
    clf_status st;
    size_t wg = be->wg[OCL_K_SUM_SQUARES_PARTIAL], fwg = be->wg[OCL_K_SUM_SQUARES_FINAL];
    uint64_t groups = ((uint64_t)n + wg - 1) / wg;
    if (groups > be->max_groups)
        groups = be->max_groups;
    if (groups == 0)
        groups = 1;
    cl_mem partial = NULL;
    if ((st = ocl_scratch(be, op, (size_t)groups * sizeof(cl_float), &partial)) != CLF_OK)
        return st;
    const ocl_kval args[] = {OCL_KBUF(x), ocl_kulong(n), ocl_kmem(partial), ocl_kfloats(wg)};
    size_t global = (size_t)groups * wg;
    if ((st = ocl_run(be, op, be->kernels[OCL_K_SUM_SQUARES_PARTIAL], args, OCL_COUNT(args), NULL,
                      0, 1, &global, &wg)) != CLF_OK)
        return st;
    const ocl_kval fargs[] = {OCL_KBUF(out), ocl_kmem(partial), ocl_kuint((cl_uint)groups),
                              ocl_kfloats(fwg)};
    return ocl_run(be, op, be->kernels[OCL_K_SUM_SQUARES_FINAL], fargs, OCL_COUNT(fargs), NULL, 0,
                   1, &fwg, &fwg);
}

/* out[i] = value, i < n: the driver's own fill (offsets are multiples of the 4-byte
 * pattern, as clEnqueueFillBuffer requires). */
clf_status ocl_fill(clf_backend *be, clf_ptr out, float value, size_t n)
{
    const char *op = "fill";
    if (be->recording)
        return ocl_capture_refuse(be, op, "a fill");
    const cl_float pattern = value;
    cl_int err = clEnqueueFillBuffer(be->queue, out.buf->mem, &pattern, sizeof pattern, out.off,
                                     n * sizeof pattern, 0, NULL, NULL);
    return err == CL_SUCCESS ? CLF_OK : ocl_fail(op, "clEnqueueFillBuffer", err);
}
