/* ocl_gemm.c - GEMM through CLBlast, then our bias/relu epilogue kernel; products of a
 * few rows with a Linear layer's weight (B [n, k], as F16 in b_half or as F32) in our own
 * kernels; products of more rows with b_half in CLBlast's HGEMM on a GPU with cl_khr_fp16
 * (ocl_half_arith_mode).
 *
 * C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C, + bias[n], relu; all row-major.
 * CLBlast takes buffer offsets in elements, so operands stay (cl_mem, offset) pairs. */
#include "ocl_internal.h"

#include <clblast_c.h>

#include "clformer/fault.h"

/* Work-items per column of C in the gemm_rows kernels, at most: 32 lanes x 8 elements =
 * 256 neighbouring elements of a row of B per load (a warp on NVIDIA, half a wavefront on
 * AMD), and a 512..2048-wide row takes 2..8 loads per lane, few enough tree steps after. */
#define OCL_ROWS_LANES 32

/* What is the backend's own once the core (clformer/ops.h) has checked the sizes, the
 * leading dimensions, the operands A, B, C and bias and the aliasing: the bounds of b_half
 * (gemm only; absent for gemm_strided_batched, which ignores it), checked whenever it is
 * given (and k > 0) so that a wrong one fails whatever the shape. */
static clf_status check_b_half(clf_backend *be, const char *op, const clf_gemm_args *g,
                               clf_ptr b_half)
{
    const int b_rows = g->trans_b ? g->n : g->k, b_cols = g->trans_b ? g->k : g->n;
    const ocl_operand half = ocl_optional_half(
        "b_half", b_half,
        clf_span_elems((uint64_t)b_rows, (uint64_t)b_cols, (uint64_t)g->ldb, 1, 0));
    return g->k > 0 ? ocl_check_operands(be, op, &half, 1) : CLF_OK;
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

/* Whether gemm runs a gemm_rows kernel: A not transposed, B stored [n, k] (a Linear
 * layer's weight), 1..OCL_GEMM_FEW_ROWS rows, k > 0. */
static int few_rows(const clf_gemm_args *g, int batched)
{
    return !batched && !g->trans_a && g->trans_b && g->m >= 1 && g->m <= OCL_GEMM_FEW_ROWS &&
           g->k > 0;
}

/* The gemm_rows kernel of g: B from b_half or b, normalizing A first with ln_out or not. */
static ocl_kernel_id rows_kernel(const clf_gemm_args *g)
{
    if (g->b_half.buf)
        return g->ln_out.buf ? OCL_K_GEMM_ROWS_HALF_LN : OCL_K_GEMM_ROWS_HALF;
    return g->ln_out.buf ? OCL_K_GEMM_ROWS_FLOAT_LN : OCL_K_GEMM_ROWS_FLOAT;
}

/* C = alpha * A B^T + beta * C, + bias, relu in one launch of gemm_rows_half (B from
 * b_half, if given) or gemm_rows_float (see gemm.cl), or with ln_out of their _ln forms,
 * which layer-normalize A's rows first: `lanes` work-items per column of C, wg / lanes
 * columns per work-group. */
static clf_status gemm_rows(clf_backend *be, const char *op, const clf_gemm_args *g)
{
    const int ln = g->ln_out.buf != NULL;
    const ocl_kernel_id kid = rows_kernel(g);
    const size_t wg = be->wg[kid], chunks = ((size_t)g->k + 7) / 8;
    size_t lanes = 1; /* a power of two: enough for the row's 8-element chunks, if allowed */
    while (lanes < chunks && lanes * 2 <= OCL_ROWS_LANES && lanes * 2 <= wg)
        lanes *= 2;
    const size_t cols = wg / lanes, global = ((size_t)g->n + cols - 1) / cols * wg;
    /* B and its offset, counted in its own elements (halves or floats) */
    const ocl_kval b = ocl_kmem(ocl_mem(g->b_half.buf ? g->b_half : g->b));
    const ocl_kval b_off =
        ocl_kulong(g->b_half.buf ? (cl_ulong)(g->b_half.off / 2) : ocl_elems(g->b));
    const ocl_kval args[] = {OCL_KBUF(g->a),
                             ocl_kulong((cl_ulong)g->lda),
                             b,
                             b_off,
                             ocl_kulong((cl_ulong)g->ldb),
                             OCL_KBUF(g->c),
                             ocl_kulong((cl_ulong)g->ldc),
                             OCL_KBUF(g->bias),
                             ocl_khas(g->bias),
                             ocl_kbool(g->relu),
                             ocl_kint(g->m),
                             ocl_kint(g->n),
                             ocl_kint(g->k),
                             ocl_kfloat(g->alpha),
                             ocl_kfloat(g->beta),
                             ocl_kint((cl_int)lanes),
                             ocl_kfloats((size_t)g->m * wg)};
    /* the _ln kernels: the layernorm's operands, and A's normalized rows in local memory */
    const ocl_kval ln_args[] = {OCL_KBUF(g->ln_alpha),      OCL_KBUF(g->ln_beta),
                                ocl_kln_style(g->ln_style), ocl_kfloat(g->ln_eps),
                                OCL_KBUF(g->ln_out),        ocl_kfloats((size_t)g->m * g->k)};
    return ocl_run(be, op, be->kernels[kid], args, OCL_COUNT(args), ln ? ln_args : NULL,
                   ln ? OCL_COUNT(ln_args) : 0, 1, &global, &wg);
}

/* Whether gemm_rows normalizes A itself (the _ln kernels): a few-row product whose rows,
 * normalized, fit in local memory beside the kernel's sums. */
static int rows_take_layernorm(const clf_backend *be, const clf_gemm_args *g)
{
    return few_rows(g, 0) &&
           ((uint64_t)g->m * be->wg[rows_kernel(g)] + (uint64_t)g->m * (uint64_t)g->k) *
                   sizeof(cl_float) <=
               be->local_mem;
}

/* The F16 bits of 1.0 and 0.0: HGEMM's alpha and beta (the epilogue applies the caller's). */
#define OCL_HALF_ONE  ((cl_half)0x3c00)
#define OCL_HALF_ZERO ((cl_half)0)

/* gemm_half's scratch: A as F16 [m, k] from half 0, the product [m, n] from half *p_off
 * (128-byte aligned). Returns its size in halves. */
static uint64_t hgemm_scratch_halves(const clf_gemm_args *g, uint64_t *p_off)
{
    *p_off = ((uint64_t)g->m * (uint64_t)g->k + 63) / 64 * 64;
    return *p_off + (uint64_t)g->m * (uint64_t)g->n;
}

/* Whether gemm runs gemm_half: a Linear layer's product (A not transposed, B [n, k]) of
 * more rows than gemm_rows takes, given b_half, where the backend multiplies in F16 (a GPU
 * with cl_khr_fp16, or $CLF_OPENCL_HGEMM: be->half_arith), whose scratch fits one
 * allocation. Elsewhere it runs in CLBlast's SGEMM from b. */
static int takes_hgemm(const clf_backend *be, const clf_gemm_args *g, int batched)
{
    uint64_t p_off;
    return !batched && be->half_arith && g->b_half.buf && !g->trans_a && g->trans_b && g->k > 0 &&
           hgemm_scratch_halves(g, &p_off) * 2 <= be->max_alloc;
}

/* C = alpha * A B^T + beta * C, + bias, relu from b_half in half-precision arithmetic: A
 * rounded to F16 into the scratch (half_pack), CLBlast's HGEMM (F16 products and sums) into
 * the scratch (hgemm_scratch_halves), then alpha, beta, the bias and relu in F32
 * (half_unpack). */
static clf_status gemm_half(clf_backend *be, const char *op, const clf_gemm_args *g)
{
    const uint64_t a_elems = (uint64_t)g->m * (uint64_t)g->k;
    const uint64_t p_elems = (uint64_t)g->m * (uint64_t)g->n;
    uint64_t p_off;
    const uint64_t halves = hgemm_scratch_halves(g, &p_off);
    cl_mem s = NULL;
    clf_status st = ocl_scratch(be, op, (size_t)halves * 2, &s);
    if (st != CLF_OK)
        return st;
    const ocl_kval pack[] = {OCL_KBUF(g->a), ocl_kulong((cl_ulong)g->lda),
                             ocl_kint(g->m), ocl_kint(g->k),
                             ocl_kmem(s),    ocl_kulong(0)};
    if ((st = ocl_run_elementwise(be, op, be->kernels[OCL_K_HALF_PACK], be->wg[OCL_K_HALF_PACK],
                                  pack, OCL_COUNT(pack), a_elems)) != CLF_OK)
        return st;
    /* CLF_FAULT=opencl_enqueue:N: the launch fails as a device out of resources would */
    const CLBlastStatusCode cs =
        clf_fault_hit(CLF_FAULT_OPENCL_ENQUEUE)
            ? CLBlastOpenCLOutOfResources
            : CLBlastHgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                           (size_t)g->m, (size_t)g->n, (size_t)g->k, OCL_HALF_ONE, s, 0,
                           (size_t)g->k, g->b_half.buf->mem, g->b_half.off / 2, (size_t)g->ldb,
                           OCL_HALF_ZERO, s, (size_t)p_off, (size_t)g->n, &be->queue, NULL);
    if (cs != CLBlastSuccess)
        return ocl_fail_clblast(op, "CLBlastHgemm", cs);
    const ocl_kval unpack[] = {
        ocl_kmem(s),        ocl_kulong((cl_ulong)p_off),  ocl_kint(g->m),     ocl_kint(g->n),
        OCL_KBUF(g->c),     ocl_kulong((cl_ulong)g->ldc), OCL_KBUF(g->bias),  ocl_khas(g->bias),
        ocl_kbool(g->relu), ocl_kfloat(g->alpha),         ocl_kfloat(g->beta)};
    return ocl_run_elementwise(be, op, be->kernels[OCL_K_HALF_UNPACK], be->wg[OCL_K_HALF_UNPACK],
                               unpack, OCL_COUNT(unpack), p_elems);
}

static clf_status gemm_common(clf_backend *be, const clf_gemm_args *g, int batched)
{
    const char *op = batched ? "gemm_strided_batched" : "gemm";
    if (!g)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    int batch = batched ? g->batch : 1;
    const uint64_t sc = batched ? g->stride_c : 0;
    clf_status st;
    if ((st = check_b_half(be, op, g, batched ? (clf_ptr){0} : g->b_half)) != CLF_OK || g->m == 0 ||
        g->n == 0 || batch == 0)
        return st;
    if (!batched && g->ln_out.buf) {
        if (rows_take_layernorm(be, g)) /* one launch: the kernel normalizes A's rows itself */
            return gemm_rows(be, op, g);
        /* else A's rows layer-normalized into ln_out first */
        const clf_layernorm_args ln = clf_gemm_layernorm(g);
        const clf_gemm_args h = clf_gemm_after_layernorm(g);
        if ((st = ocl_layernorm(be, &ln)) != CLF_OK)
            return st;
        return gemm_common(be, &h, 0);
    }
    if (few_rows(g, batched))
        return gemm_rows(be, op, g);
    if (be->recording) /* CLBlast queues its kernels itself: the call is recorded */
        return ocl_capture_gemm(be, op, g, batched ? ocl_gemm_strided_batched : ocl_gemm);
    if (takes_hgemm(be, g, batched))
        return gemm_half(be, op, g);
    if (g->k == 0) /* CLBlast refuses k = 0; C = beta * C is all there is to do */
        return epilogue(be, op, g, batch, sc, 1);
    CLBlastStatusCode cs;

    if (g->m == 1 && !batched) {
        /* One row that few_rows leaves out (A transposed, or B stored [k, n]): a
         * matrix-vector product. CLBlast's GEMM tiles m as well, so a single row leaves
         * most of each work-group idle. CLBlast's GEMV computes
         * beta * y even for beta = 0 (NaN * 0 = NaN), so C is cleared first. */
        if (g->beta == 0.0f && (st = ocl_fill(be, g->c, 0.0f, (size_t)g->n)) != CLF_OK)
            return st;
        size_t incx = g->trans_a ? (size_t)g->lda : 1;
        /* CLF_FAULT=opencl_enqueue:N: the launch fails as a device out of resources would */
        cs = clf_fault_hit(CLF_FAULT_OPENCL_ENQUEUE)
                 ? CLBlastOpenCLOutOfResources
                 : CLBlastSgemv(CLBlastLayoutRowMajor,
                                g->trans_b ? CLBlastTransposeNo : CLBlastTransposeYes,
                                (size_t)(g->trans_b ? g->n : g->k),
                                (size_t)(g->trans_b ? g->k : g->n), g->alpha, g->b.buf->mem,
                                g->b.off / 4, (size_t)g->ldb, g->a.buf->mem, g->a.off / 4, incx,
                                g->beta, g->c.buf->mem, g->c.off / 4, 1, &be->queue, NULL);
        if (cs != CLBlastSuccess)
            return ocl_fail_clblast(op, "CLBlastSgemv", cs);
        return g->bias.buf || g->relu ? epilogue(be, op, g, batch, sc, 0) : CLF_OK;
    }
    CLBlastTranspose ta = g->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastTranspose tb = g->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo;
    if (clf_fault_hit(CLF_FAULT_OPENCL_ENQUEUE))
        cs = CLBlastOpenCLOutOfResources;
    else if (batched)
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
