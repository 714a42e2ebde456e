/* ocl_gemm.c - GEMM through CLBlast, then our bias/relu epilogue kernel.
 *
 * C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C, + bias[n], relu; all row-major.
 * CLBlast takes buffer offsets in elements, so operands stay (cl_mem, offset) pairs. */
#include "ocl_internal.h"

#include <clblast_c.h>

/* Validates sizes and leading dimensions and bounds-checks A, B, C and bias for batch
 * matrices (batch 1 for plain gemm). */
static clf_status check_gemm(clf_backend *be, const char *op, const clf_gemm_args *g, int batch,
                             uint64_t sa, uint64_t sb, uint64_t sc)
{
    if (g->m < 0 || g->n < 0 || g->k < 0 || batch < 0)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: negative size m=%d n=%d k=%d batch=%d", op,
                         g->m, g->n, g->k, batch);
    /* stored shapes: A [m,k] or [k,m]; B [k,n] or [n,k]; C [m,n] */
    int a_rows = g->trans_a ? g->k : g->m, a_cols = g->trans_a ? g->m : g->k;
    int b_rows = g->trans_b ? g->n : g->k, b_cols = g->trans_b ? g->k : g->n;
    if (g->lda < (a_cols > 1 ? a_cols : 1) || g->ldb < (b_cols > 1 ? b_cols : 1) ||
        g->ldc < (g->n > 1 ? g->n : 1))
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: leading dimension too small: lda=%d (needs >= %d), "
                         "ldb=%d (needs >= %d), ldc=%d (needs >= %d)",
                         op, g->lda, a_cols, g->ldb, b_cols, g->ldc, g->n);
    if (g->m == 0 || g->n == 0 || batch == 0)
        return CLF_OK; /* nothing is read or written */
    /* A and B are read only when k > 0 (k = 0 leaves C = beta * C + bias) */
    const ocl_operand operands[] = {ocl_required("a", g->a,
                                                 ocl_extent((uint64_t)a_rows, (uint64_t)a_cols,
                                                            (uint64_t)g->lda, (uint64_t)batch, sa)),
                                    ocl_required("b", g->b,
                                                 ocl_extent((uint64_t)b_rows, (uint64_t)b_cols,
                                                            (uint64_t)g->ldb, (uint64_t)batch, sb)),
                                    ocl_required("c", g->c,
                                                 ocl_extent((uint64_t)g->m, (uint64_t)g->n,
                                                            (uint64_t)g->ldc, (uint64_t)batch, sc)),
                                    ocl_optional("bias", g->bias, (uint64_t)g->n)};
    const int skip = g->k > 0 ? 0 : 2;
    return ocl_check_operands(be, op, operands + skip, OCL_COUNT(operands) - skip);
}

/* c = prescale(c) + bias, relu, over batch matrices (see bias_relu in elementwise.cl). */
static clf_status epilogue(clf_backend *be, const char *op, const clf_gemm_args *g, int batch,
                           uint64_t sc, int prescale)
{
    const ocl_kval args[] = {OCL_KBUF(g->c),     ocl_kulong((cl_ulong)g->ldc),
                             ocl_kulong(sc),     ocl_kint(g->m),
                             ocl_kint(g->n),     ocl_kint(batch),
                             OCL_KBUF(g->bias),  ocl_khas(g->bias),
                             ocl_kbool(g->relu), ocl_kbool(prescale),
                             ocl_kfloat(g->beta)};
    return ocl_run_elementwise(be, op, be->kernels[OCL_K_BIAS_RELU], be->wg[OCL_K_BIAS_RELU], args,
                               OCL_COUNT(args), (uint64_t)g->m * (uint64_t)g->n * (uint64_t)batch);
}

static clf_status gemm_common(clf_backend *be, const clf_gemm_args *g, int batched)
{
    const char *op = batched ? "gemm_strided_batched" : "gemm";
    if (!g)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    int batch = batched ? g->batch : 1;
    uint64_t sa = batched ? g->stride_a : 0, sb = batched ? g->stride_b : 0,
             sc = batched ? g->stride_c : 0;
    clf_status st;
    if ((st = check_gemm(be, op, g, batch, sa, sb, sc)) != CLF_OK)
        return st;
    if (g->m == 0 || g->n == 0 || batch == 0)
        return CLF_OK;
    if (g->k == 0) /* CLBlast refuses k = 0; C = beta * C is all there is to do */
        return epilogue(be, op, g, batch, sc, 1);
    CLBlastStatusCode cs;

    if (g->m == 1 && !batched) {
        /* One row (a decoding step at batch 1): a matrix-vector product. CLBlast's GEMM
         * tiles m as well, so a single row leaves most of each work-group idle while
         * the step is bound by reading the weights once. CLBlast's GEMV computes
         * beta * y even for beta = 0 (NaN * 0 = NaN), so C is cleared first. */
        if (g->beta == 0.0f && (st = ocl_fill(be, g->c, 0.0f, (size_t)g->n)) != CLF_OK)
            return st;
        size_t incx = g->trans_a ? (size_t)g->lda : 1;
        cs = CLBlastSgemv(
            CLBlastLayoutRowMajor, g->trans_b ? CLBlastTransposeNo : CLBlastTransposeYes,
            (size_t)(g->trans_b ? g->n : g->k), (size_t)(g->trans_b ? g->k : g->n), g->alpha,
            g->b.buf->mem, g->b.off / 4, (size_t)g->ldb, g->a.buf->mem, g->a.off / 4, incx, g->beta,
            g->c.buf->mem, g->c.off / 4, 1, &be->queue, NULL);
        if (cs != CLBlastSuccess)
            return ocl_fail_clblast(op, "CLBlastSgemv", cs);
        return g->bias.buf || g->relu ? epilogue(be, op, g, batch, sc, 0) : CLF_OK;
    }
    CLBlastTranspose ta = g->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastTranspose tb = g->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo;
    if (batched)
        cs = CLBlastSgemmStridedBatched(
            CLBlastLayoutRowMajor, ta, tb, (size_t)g->m, (size_t)g->n, (size_t)g->k, g->alpha,
            g->a.buf->mem, g->a.off / 4, (size_t)g->lda, g->stride_a, g->b.buf->mem, g->b.off / 4,
            (size_t)g->ldb, g->stride_b, g->beta, g->c.buf->mem, g->c.off / 4, (size_t)g->ldc,
            g->stride_c, (size_t)batch, &be->queue, NULL);
    else
        cs = CLBlastSgemm(CLBlastLayoutRowMajor, ta, tb, (size_t)g->m, (size_t)g->n, (size_t)g->k,
                          g->alpha, g->a.buf->mem, g->a.off / 4, (size_t)g->lda, g->b.buf->mem,
                          g->b.off / 4, (size_t)g->ldb, g->beta, g->c.buf->mem, g->c.off / 4,
                          (size_t)g->ldc, &be->queue, NULL);
    if (cs != CLBlastSuccess)
        return ocl_fail_clblast(op, batched ? "CLBlastSgemmStridedBatched" : "CLBlastSgemm", cs);
    if (g->bias.buf || g->relu)
        return epilogue(be, op, g, batch, sc, 0);
    return CLF_OK;
}

clf_status ocl_gemm(clf_backend *be, const clf_gemm_args *a)
{
    return gemm_common(be, a, 0);
}

clf_status ocl_gemm_strided_batched(clf_backend *be, const clf_gemm_args *a)
{
    return gemm_common(be, a, 1);
}
