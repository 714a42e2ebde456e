/* The CPU backend's F32 products: gemm and gemm_strided_batched through CBLAS (OpenBLAS),
 * with the bias/relu epilogue. A product of a few rows runs as matrix-vector products
 * (gemm_rows_as_gemv); one that reads the weights' int8 copy goes to cpu_gemm_i8.c, a
 * few-row one that reads their F16 or BF16 copy, or on an AVX2 CPU their F32 matrix, to
 * cpu_gemv.c, and one of many rows
 * that reads their BF16 copy or asks for BF16 arithmetic (bf16_arith), on a CPU with it, to
 * cpu_gemm_bf16.c. */
#include <cblas.h>
#include <string.h>

#include "clformer/backend.h"
#include "cpu_internal.h"

/* The slice of B that the matrix-vector products of all rows share before moving on:
 * about 1 MiB, so rows 2..m read it from L2 rather than from memory. */
#define CPU_GEMV_BLOCK_BYTES (1 << 20)

/* C[m,n] (+)= op(A) op(B) for m <= CPU_GEMV_MAX_ROWS as SGEMVs, B cut into blocks of
 * output columns (rows of B when trans_b, the layout of a linear layer's weight). */
static void gemm_rows_as_gemv(const clf_gemm_args *a, const float *A, const float *B, float *C)
{
    int incx = a->trans_a ? a->lda : 1;
    int block = (int)(CPU_GEMV_BLOCK_BYTES / (sizeof(float) * (size_t)a->k));
    if (block < 1)
        block = 1;
    if (a->beta == 0.0f) /* beta = 0 must not read C (it may hold NaN): clear it first */
        for (int i = 0; i < a->m; i++)
            memset(C + (size_t)i * a->ldc, 0, sizeof(float) * (size_t)a->n);
    for (int j0 = 0; j0 < a->n; j0 += block) {
        int nj = a->n - j0 < block ? a->n - j0 : block;
        for (int i = 0; i < a->m; i++) {
            const float *x = A + (a->trans_a ? (size_t)i : (size_t)i * a->lda);
            float *y = C + (size_t)i * a->ldc + j0;
            if (a->trans_b) /* B[n,k]: y = B[j0:j0+nj, :] x */
                cblas_sgemv(CblasRowMajor, CblasNoTrans, nj, a->k, a->alpha,
                            B + (size_t)j0 * a->ldb, a->ldb, x, incx, a->beta, y, 1);
            else /* B[k,n]: y = B[:, j0:j0+nj]^T x */
                cblas_sgemv(CblasRowMajor, CblasTrans, a->k, nj, a->alpha, B + j0, a->ldb, x, incx,
                            a->beta, y, 1);
        }
    }
}

/* C[m,n] (+)= op(A) op(B) for one matrix, then the bias/relu epilogue. */
static void gemm_one(clf_backend *be, const clf_gemm_args *a, const float *A, const float *B,
                     float *C)
{
    if (a->k > 0 && a->m <= CPU_GEMV_MAX_ROWS) {
        gemm_rows_as_gemv(a, A, B, C);
    } else if (a->k > 0) {
        cblas_sgemm(CblasRowMajor, a->trans_a ? CblasTrans : CblasNoTrans,
                    a->trans_b ? CblasTrans : CblasNoTrans, a->m, a->n, a->k, a->alpha, A, a->lda,
                    B, a->ldb, a->beta, C, a->ldc);
    } else {
        /* k == 0: the product is empty, C = beta * C (BLAS may reject k = 0). */
        for (int i = 0; i < a->m; i++)
            for (int j = 0; j < a->n; j++)
                C[(size_t)i * a->ldc + j] =
                    a->beta == 0.0f ? 0.0f : a->beta * C[(size_t)i * a->ldc + j];
    }
    if (!a->bias.buf && !a->relu)
        return;
    const float *bias = a->bias.buf ? fptr(a->bias) : NULL;
    int relu = a->relu;
#pragma omp parallel for num_threads(be->threads)                                                  \
    schedule(static) if (a->m * (size_t)a->n > CPU_PAR_MIN)
    for (int i = 0; i < a->m; i++)
        cpu_bias_relu_row(C + (size_t)i * a->ldc, a->n, bias, relu);
}

clf_status cpu_gemm(clf_backend *be, const clf_gemm_args *a)
{
    CPU_REQUIRE_ARGS("gemm", a);
    /* sizes, leading dimensions, bounds and aliasing: checked by the core (clformer/ops.h);
     * b_half, b_bf16 and b_i8 where a path reads them */
    if (a->m == 0 || a->n == 0)
        return CLF_OK;
    if (a->ln_out.buf) { /* A's rows layer-normalized into ln_out, then the product of those */
        const clf_layernorm_args ln = clf_gemm_layernorm(a);
        const clf_gemm_args g = clf_gemm_after_layernorm(a);
        clf_status st = cpu_layernorm(be, &ln);
        return st != CLF_OK ? st : cpu_gemm(be, &g);
    }
    if (cpu_gemm_i8_applies(a))
        return cpu_gemm_i8(be, a);
    if (cpu_gemm_bf16_applies(be, a))
        return cpu_gemm_bf16(be, a);
    if (be->read_half && cpu_gemv_bf16_applies(a))
        return cpu_gemv_bf16(be, a);
    if (be->read_half && cpu_gemv_half_applies(a))
        return cpu_gemv_half(be, a);
    if (cpu_gemv_f32_applies(be, a))
        return cpu_gemv_f32(be, a);
    gemm_one(be, a, a->k ? fptr(a->a) : NULL, a->k ? fptr(a->b) : NULL, fptr(a->c));
    return CLF_OK;
}

clf_status cpu_gemm_strided_batched(clf_backend *be, const clf_gemm_args *a)
{
    CPU_REQUIRE_ARGS("gemm_strided_batched", a);
    /* sizes, strides, bounds and aliasing: checked by the core (clformer/ops.h) */
    if (a->batch <= 0 || a->m == 0 || a->n == 0)
        return CLF_OK;
    for (int b = 0; b < a->batch; b++)
        gemm_one(be, a, a->k ? fptr(a->a) + (size_t)b * a->stride_a : NULL,
                 a->k ? fptr(a->b) + (size_t)b * a->stride_b : NULL,
                 fptr(a->c) + (size_t)b * a->stride_c);
    return CLF_OK;
}
