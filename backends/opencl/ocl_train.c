/* ocl_train.c - the training ops other than attention_backward: relu_backward,
 * layernorm_backward, embed_backward, dropout, cross_entropy, adam, sum_squares, fill.
 * Each checks its operands against their buffers, then sets the kernel arguments
 * (buffers plus element offsets) and enqueues; nothing waits. Reductions never use atomics
 * and always add in a fixed order, so every op gives the same bits run after run. */
#include "ocl_internal.h"

/* Columns per work-group of layernorm_backward_params: 32 neighbouring floats are one
 * 128-byte line (coalesced loads); the rest of the work-group splits the rows. */
#define OCL_PARAMS_COLS 32

/* dx[i] = y[i] > 0 ? dy[i] : 0, i < n */
clf_status ocl_relu_backward(clf_backend *be, clf_ptr dx, clf_ptr dy, clf_ptr y, size_t n)
{
    const char *op = "relu_backward";
    clf_status st;
    if (n == 0)
        return CLF_OK;
    if ((st = ocl_check_operand(be, op, "dx", dx, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "dy", dy, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "y", y, n, 1)) != CLF_OK)
        return st;
    if (ocl_partial_overlap(dx, dy, 4 * (uint64_t)n) || ocl_partial_overlap(dx, y, 4 * (uint64_t)n))
        return clf_error(CLF_ERR_INPUT, "opencl: %s: dx partly overlaps dy or y", op);
    cl_mem mdx = ocl_mem(dx), mdy = ocl_mem(dy), my = ocl_mem(y);
    cl_ulong dxo = ocl_elems(dx), dyo = ocl_elems(dy), yo = ocl_elems(y), nn = n;
    const ocl_arg args[] = {
        {sizeof mdx, &mdx}, {sizeof dxo, &dxo}, {sizeof mdy, &mdy}, {sizeof dyo, &dyo},
        {sizeof my, &my},   {sizeof yo, &yo},   {sizeof nn, &nn},
    };
    return ocl_launch_elementwise(be, op, OCL_K_RELU_BACKWARD, args, sizeof args / sizeof args[0],
                                  n);
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
    if ((st = ocl_check_ln_shape(op, a->rows, a->cols, a->style)) != CLF_OK)
        return st;
    if (a->rows == 0)
        return CLF_OK;
    uint64_t n = (uint64_t)a->rows * (uint64_t)a->cols, c = (uint64_t)a->cols;
    if ((st = ocl_check_operand(be, op, "dx", a->dx, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "dy", a->dy, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "x", a->x, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "alpha", a->alpha, c, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "dalpha", a->dalpha, c, 0)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "dbeta", a->dbeta, c, 0)) != CLF_OK)
        return st;
    if (ocl_overlap(a->dx, 4 * n, a->dy, 4 * n) || ocl_overlap(a->dx, 4 * n, a->x, 4 * n))
        return clf_error(CLF_ERR_INPUT, "opencl: %s: dx may not alias dy or x", op);

    const int params = a->dalpha.buf != NULL || a->dbeta.buf != NULL;
    cl_mem stats = NULL;
    if (params &&
        (st = ocl_scratch(be, op, (size_t)a->rows * 3 * sizeof(cl_float), &stats)) != CLF_OK)
        return st;
    cl_mem dx = ocl_mem(a->dx), dy = ocl_mem(a->dy), x = ocl_mem(a->x), alpha = ocl_mem(a->alpha),
           dalpha = ocl_mem(a->dalpha), dbeta = ocl_mem(a->dbeta);
    cl_ulong dx_off = ocl_elems(a->dx), dy_off = ocl_elems(a->dy), x_off = ocl_elems(a->x),
             alpha_off = ocl_elems(a->alpha), dalpha_off = ocl_elems(a->dalpha),
             dbeta_off = ocl_elems(a->dbeta);
    cl_int has_stats = params, cols = a->cols, rows = a->rows, style = a->style == CLF_LN_STANDARD,
           accumulate = a->accumulate != 0, has_dalpha = a->dalpha.buf != NULL,
           has_dbeta = a->dbeta.buf != NULL;
    cl_float eps = a->eps;
    size_t wg = be->wg[OCL_K_LAYERNORM_BACKWARD];
    const ocl_arg args[] = {
        {sizeof dx, &dx},
        {sizeof dx_off, &dx_off},
        {sizeof dy, &dy},
        {sizeof dy_off, &dy_off},
        {sizeof x, &x},
        {sizeof x_off, &x_off},
        {sizeof alpha, &alpha},
        {sizeof alpha_off, &alpha_off},
        {sizeof stats, &stats},
        {sizeof has_stats, &has_stats},
        {sizeof cols, &cols},
        {sizeof style, &style},
        {sizeof eps, &eps},
        {sizeof accumulate, &accumulate},
        {wg * sizeof(cl_float), NULL},
    };
    size_t global = (size_t)a->rows * wg;
    if ((st = ocl_launch(be, op, OCL_K_LAYERNORM_BACKWARD, args, sizeof args / sizeof args[0], 1,
                         &global, &wg)) != CLF_OK ||
        !params)
        return st;

    size_t pwg = be->wg[OCL_K_LAYERNORM_BACKWARD_PARAMS];
    size_t lx = pwg < OCL_PARAMS_COLS ? pwg : OCL_PARAMS_COLS, ly = pwg / lx;
    const ocl_arg pargs[] = {
        {sizeof dy, &dy},
        {sizeof dy_off, &dy_off},
        {sizeof x, &x},
        {sizeof x_off, &x_off},
        {sizeof stats, &stats},
        {sizeof dalpha, &dalpha},
        {sizeof dalpha_off, &dalpha_off},
        {sizeof has_dalpha, &has_dalpha},
        {sizeof dbeta, &dbeta},
        {sizeof dbeta_off, &dbeta_off},
        {sizeof has_dbeta, &has_dbeta},
        {sizeof rows, &rows},
        {sizeof cols, &cols},
        {pwg * sizeof(cl_float), NULL},
        {pwg * sizeof(cl_float), NULL},
    };
    size_t pglobal[2] = {((size_t)a->cols + lx - 1) / lx * lx, ly}, plocal[2] = {lx, ly};
    return ocl_launch(be, op, OCL_K_LAYERNORM_BACKWARD_PARAMS, pargs,
                      sizeof pargs / sizeof pargs[0], 2, pglobal, plocal);
}

/* dtable[ids[r], :] += scale * dout[r, :], rows in increasing r; one work-item a column. */
clf_status ocl_embed_backward(clf_backend *be, const clf_embed_backward_args *a)
{
    const char *op = "embed_backward";
    clf_status st;
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    if (a->rows < 0 || a->dim <= 0 || a->vocab <= 0)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: bad shape rows=%d dim=%d vocab=%d", op,
                         a->rows, a->dim, a->vocab);
    if (a->rows == 0)
        return CLF_OK;
    uint64_t dim = (uint64_t)a->dim;
    if ((st = ocl_check_operand(be, op, "dtable", a->dtable, (uint64_t)a->vocab * dim, 1)) !=
            CLF_OK ||
        (st = ocl_check_operand(be, op, "dout", a->dout, (uint64_t)a->rows * dim, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "ids", a->ids, (uint64_t)a->rows, 1)) != CLF_OK)
        return st;
    cl_mem dtable = ocl_mem(a->dtable), dout = ocl_mem(a->dout), ids = ocl_mem(a->ids);
    cl_ulong dtable_off = ocl_elems(a->dtable), dout_off = ocl_elems(a->dout),
             ids_off = ocl_elems(a->ids);
    cl_int rows = a->rows, d = a->dim, vocab = a->vocab;
    cl_float scale = a->scale;
    const ocl_arg args[] = {
        {sizeof dtable, &dtable}, {sizeof dtable_off, &dtable_off},
        {sizeof dout, &dout},     {sizeof dout_off, &dout_off},
        {sizeof ids, &ids},       {sizeof ids_off, &ids_off},
        {sizeof rows, &rows},     {sizeof d, &d},
        {sizeof vocab, &vocab},   {sizeof scale, &scale},
    };
    size_t wg = be->wg[OCL_K_EMBED_BACKWARD];
    size_t global = ((size_t)a->dim + wg - 1) / wg * wg;
    return ocl_launch(be, op, OCL_K_EMBED_BACKWARD, args, sizeof args / sizeof args[0], 1, &global,
                      &wg);
}

/* Inverted dropout with the mask of clf_dropout_bits / clf_dropout_threshold. */
clf_status ocl_dropout(clf_backend *be, const clf_dropout_args *a)
{
    const char *op = "dropout";
    clf_status st;
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    if (!(a->p >= 0.0f && a->p < 1.0f)) /* NaN fails too */
        return clf_error(CLF_ERR_INPUT, "opencl: %s: p = %g is outside [0, 1)", op, (double)a->p);
    if (a->n == 0)
        return CLF_OK;
    if ((st = ocl_check_operand(be, op, "out", a->out, a->n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "x", a->x, a->n, 1)) != CLF_OK)
        return st;
    if (ocl_partial_overlap(a->out, a->x, 4 * (uint64_t)a->n))
        return clf_error(CLF_ERR_INPUT, "opencl: %s: out partly overlaps x", op);
    cl_mem out = ocl_mem(a->out), x = ocl_mem(a->x);
    cl_ulong out_off = ocl_elems(a->out), x_off = ocl_elems(a->x), n = a->n, seed = a->seed;
    cl_uint threshold = clf_dropout_threshold(a->p);
    /* the expression of clf_dropout_args, in float, so both backends scale by the same bits */
    cl_float keep_scale = 1.0f / (1.0f - a->p);
    const ocl_arg args[] = {
        {sizeof out, &out},
        {sizeof out_off, &out_off},
        {sizeof x, &x},
        {sizeof x_off, &x_off},
        {sizeof n, &n},
        {sizeof seed, &seed},
        {sizeof threshold, &threshold},
        {sizeof keep_scale, &keep_scale},
    };
    return ocl_launch_elementwise(be, op, OCL_K_DROPOUT, args, sizeof args / sizeof args[0], a->n);
}

/* Label-smoothed cross-entropy and its gradient; one work-group per row. */
clf_status ocl_cross_entropy(clf_backend *be, const clf_cross_entropy_args *a)
{
    const char *op = "cross_entropy";
    clf_status st;
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    if (a->rows < 0 || a->cols <= 0)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: bad shape rows=%d cols=%d", op, a->rows,
                         a->cols);
    if (!(a->label_smoothing >= 0.0f && a->label_smoothing <= 1.0f))
        return clf_error(CLF_ERR_INPUT, "opencl: %s: label_smoothing = %g is outside [0, 1]", op,
                         (double)a->label_smoothing);
    if (a->rows == 0)
        return CLF_OK;
    uint64_t n = (uint64_t)a->rows * (uint64_t)a->cols;
    if ((st = ocl_check_operand(be, op, "loss", a->loss, (uint64_t)a->rows, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "dlogits", a->dlogits, n, 0)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "logits", a->logits, n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "targets", a->targets, (uint64_t)a->rows, 1)) != CLF_OK)
        return st;
    if (ocl_partial_overlap(a->dlogits, a->logits, 4 * n))
        return clf_error(CLF_ERR_INPUT, "opencl: %s: dlogits partly overlaps logits", op);
    if (ocl_overlap(a->loss, 4 * (uint64_t)a->rows, a->logits, 4 * n) ||
        ocl_overlap(a->loss, 4 * (uint64_t)a->rows, a->dlogits, 4 * n))
        return clf_error(CLF_ERR_INPUT, "opencl: %s: loss overlaps the logits", op);
    cl_mem loss = ocl_mem(a->loss), dl = ocl_mem(a->dlogits), logits = ocl_mem(a->logits),
           targets = ocl_mem(a->targets);
    cl_ulong loss_off = ocl_elems(a->loss), dl_off = ocl_elems(a->dlogits),
             logits_off = ocl_elems(a->logits), targets_off = ocl_elems(a->targets);
    cl_int has_dl = a->dlogits.buf != NULL, cols = a->cols, ignore = a->ignore_index;
    cl_float ls = a->label_smoothing, grad_scale = a->grad_scale;
    size_t wg = be->wg[OCL_K_CROSS_ENTROPY];
    const ocl_arg args[] = {
        {sizeof loss, &loss},
        {sizeof loss_off, &loss_off},
        {sizeof dl, &dl},
        {sizeof dl_off, &dl_off},
        {sizeof has_dl, &has_dl},
        {sizeof logits, &logits},
        {sizeof logits_off, &logits_off},
        {sizeof targets, &targets},
        {sizeof targets_off, &targets_off},
        {sizeof cols, &cols},
        {sizeof ignore, &ignore},
        {sizeof ls, &ls},
        {sizeof grad_scale, &grad_scale},
        {wg * sizeof(cl_float), NULL},
    };
    size_t global = (size_t)a->rows * wg;
    return ocl_launch(be, op, OCL_K_CROSS_ENTROPY, args, sizeof args / sizeof args[0], 1, &global,
                      &wg);
}

/* One Adam / AdamW step (see clf_adam_args). */
clf_status ocl_adam(clf_backend *be, const clf_adam_args *a)
{
    const char *op = "adam";
    clf_status st;
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    if (!(a->bias_correction1 > 0.0f && a->sqrt_bias_correction2 > 0.0f))
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: bias corrections %g and %g must be positive (step >= 1)", op,
                         (double)a->bias_correction1, (double)a->sqrt_bias_correction2);
    if (a->n == 0)
        return CLF_OK;
    if ((st = ocl_check_operand(be, op, "param", a->param, a->n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "grad", a->grad, a->n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "m", a->m, a->n, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "v", a->v, a->n, 1)) != CLF_OK)
        return st;
    const clf_ptr all[4] = {a->param, a->grad, a->m, a->v};
    const uint64_t bytes = 4 * (uint64_t)a->n;
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            if (ocl_overlap(all[i], bytes, all[j], bytes))
                return clf_error(CLF_ERR_INPUT, "opencl: %s: param, grad, m and v may not overlap",
                                 op);
    cl_mem param = ocl_mem(a->param), grad = ocl_mem(a->grad), m = ocl_mem(a->m), v = ocl_mem(a->v);
    cl_ulong param_off = ocl_elems(a->param), grad_off = ocl_elems(a->grad),
             m_off = ocl_elems(a->m), v_off = ocl_elems(a->v), n = a->n;
    /* PyTorch forms these scalars in double (Python floats) and rounds each once */
    cl_float neg_step = (cl_float)(-((double)a->lr / (double)a->bias_correction1)),
             decay = (cl_float)(1.0 - (double)a->lr * (double)a->weight_decay),
             one_beta1 = (cl_float)(1.0 - (double)a->beta1),
             one_beta2 = (cl_float)(1.0 - (double)a->beta2);
    cl_float beta1 = a->beta1, beta2 = a->beta2, eps = a->eps, wd = a->weight_decay,
             grad_scale = a->grad_scale, sqrt_bc2 = a->sqrt_bias_correction2;
    cl_int decoupled = a->decoupled != 0;
    const ocl_arg args[] = {
        {sizeof param, &param},
        {sizeof param_off, &param_off},
        {sizeof grad, &grad},
        {sizeof grad_off, &grad_off},
        {sizeof m, &m},
        {sizeof m_off, &m_off},
        {sizeof v, &v},
        {sizeof v_off, &v_off},
        {sizeof n, &n},
        {sizeof beta1, &beta1},
        {sizeof beta2, &beta2},
        {sizeof one_beta1, &one_beta1},
        {sizeof one_beta2, &one_beta2},
        {sizeof eps, &eps},
        {sizeof wd, &wd},
        {sizeof grad_scale, &grad_scale},
        {sizeof neg_step, &neg_step},
        {sizeof sqrt_bc2, &sqrt_bc2},
        {sizeof decay, &decay},
        {sizeof decoupled, &decoupled},
    };
    return ocl_launch_elementwise(be, op, OCL_K_ADAM, args, sizeof args / sizeof args[0], a->n);
}

/* out[0] = sum_i x[i]^2 in two stages: per-work-group partial sums into the scratch
 * buffer, then one work-group adds them. n = 0 gives 0. */
clf_status ocl_sum_squares(clf_backend *be, clf_ptr out, clf_ptr x, size_t n)
{
    const char *op = "sum_squares";
    clf_status st;
    if ((st = ocl_check_operand(be, op, "out", out, 1, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "x", x, n, n > 0)) != CLF_OK)
        return st;
    size_t wg = be->wg[OCL_K_SUM_SQUARES_PARTIAL], fwg = be->wg[OCL_K_SUM_SQUARES_FINAL];
    uint64_t groups = ((uint64_t)n + wg - 1) / wg;
    if (groups > be->max_groups)
        groups = be->max_groups;
    if (groups == 0)
        groups = 1;
    cl_mem partial = NULL;
    if ((st = ocl_scratch(be, op, (size_t)groups * sizeof(cl_float), &partial)) != CLF_OK)
        return st;
    cl_mem mx = ocl_mem(x), mo = ocl_mem(out);
    cl_ulong xo = ocl_elems(x), oo = ocl_elems(out), nn = n;
    cl_uint ng = (cl_uint)groups;
    const ocl_arg args[] = {
        {sizeof mx, &mx},
        {sizeof xo, &xo},
        {sizeof nn, &nn},
        {sizeof partial, &partial},
        {wg * sizeof(cl_float), NULL},
    };
    size_t global = (size_t)groups * wg;
    if ((st = ocl_launch(be, op, OCL_K_SUM_SQUARES_PARTIAL, args, sizeof args / sizeof args[0], 1,
                         &global, &wg)) != CLF_OK)
        return st;
    const ocl_arg fargs[] = {
        {sizeof mo, &mo},
        {sizeof oo, &oo},
        {sizeof partial, &partial},
        {sizeof ng, &ng},
        {fwg * sizeof(cl_float), NULL},
    };
    return ocl_launch(be, op, OCL_K_SUM_SQUARES_FINAL, fargs, sizeof fargs / sizeof fargs[0], 1,
                      &fwg, &fwg);
}

/* out[i] = value, i < n: the driver's own fill (offsets are multiples of the 4-byte
 * pattern, as clEnqueueFillBuffer requires). */
clf_status ocl_fill(clf_backend *be, clf_ptr out, float value, size_t n)
{
    const char *op = "fill";
    clf_status st;
    if (n == 0)
        return CLF_OK;
    if ((st = ocl_check_operand(be, op, "out", out, n, 1)) != CLF_OK)
        return st;
    const cl_float pattern = value;
    cl_int err = clEnqueueFillBuffer(be->queue, out.buf->mem, &pattern, sizeof pattern, out.off,
                                     n * sizeof pattern, 0, NULL, NULL);
    return err == CL_SUCCESS ? CLF_OK : ocl_fail(op, "clEnqueueFillBuffer", err);
}
