/* Products of many rows in BF16 arithmetic, on a CPU that multiplies BF16 natively
 * (AVX512_BF16: vdpbf16ps; AMX where oneDNN finds it): those against BF16 weights
 * (clf_gemm_args.b_bf16, trans_a = 0, trans_b = 1) and those that ask for it
 * (clf_gemm_args.bf16_arith, any trans_a / trans_b: the precision setting's products,
 * forward and backward):
 *
 *   C[i,j] = relu?(alpha * sum_p bf16(op(A)[i,p]) bf16(op(B)[p,j]) + beta * C[i,j] + bias[j])
 *
 * A is rounded to BF16 here (to nearest, ties to even), B too unless b_bf16 holds it; the
 * products are exact in F32 and summed in F32 by oneDNN's matmul (cpu_dnnl.c), whose
 * strided memory descriptors read a transposed operand in place; the epilogue is F32. Such a CPU
 * runs a BF16 product at twice the F32 rate or more, and reads half the weight bytes; the few-row
 * products stay with cpu_gemv.c (bound by reading the weights, not by arithmetic).
 * Where the CPU lacks the instructions, oneDNN would emulate them slower than SGEMM, so
 * the backend says no (supports(CLF_OP_GEMM_BF16_ARITH) = 0) and multiplies the F32 weights. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

clf_status cpu_bf16_arith_choose(int *on)
{
    *on = 0;
    const char *env = getenv("CLF_CPU_BF16_ARITH");
    if (env && env[0] && strcmp(env, "off") != 0 && strcmp(env, "on") != 0)
        return clf_error(CLF_ERR_INPUT,
                         "cpu: CLF_CPU_BF16_ARITH='%s' is not 'on' or 'off' (unset: on where "
                         "the CPU has AVX512_BF16)",
                         env);
    if (env && strcmp(env, "off") == 0)
        return CLF_OK;
#if CPU_X86
    __builtin_cpu_init();
    *on = __builtin_cpu_supports("avx512bf16");
#endif
    return CLF_OK;
}

int cpu_gemm_bf16_applies(const clf_backend *be, const clf_gemm_args *a)
{
    return be->bf16_arith && a->m > CPU_GEMV_MAX_ROWS && a->k > 0 &&
           (a->bf16_arith || (a->b_bf16.buf && !a->trans_a && a->trans_b));
}

/* x rounded to BF16 (the high half of its bits), to nearest with ties to even; NaN stays
 * a (quiet) NaN: clf_float_to_bf16's rule (clformer/numeric.h, which a backend does not
 * include), written here so that the loop below vectorises. */
static inline uint16_t to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* dst [rows, cols] (dense) = src's rows rounded to BF16, rows ld apart */
static void round_rows(const clf_backend *be, const float *src, int rows, int cols, int ld,
                       uint16_t *dst)
{
#pragma omp parallel for num_threads(be->threads)                                                  \
    schedule(static) if ((size_t)rows * cols > CPU_PAR_MIN)
    for (int i = 0; i < rows; i++) {
        const float *x = src + (size_t)i * ld;
        uint16_t *y = dst + (size_t)i * cols;
#pragma omp simd
        for (int p = 0; p < cols; p++)
            y[p] = to_bf16(x[p]);
    }
}

clf_status cpu_gemm_bf16(clf_backend *be, const clf_gemm_args *a)
{
    cpu_dnnl *q = be->dnnl;
    const int m = a->m, n = a->n, k = a->k;
    /* the stored matrices: A [m, k] or, transposed, [k, m]; B [k, n] or [n, k] */
    const int a_rows = a->trans_a ? k : m, a_cols = a->trans_a ? m : k;
    const int b_rows = a->trans_b ? n : k, b_cols = a->trans_b ? k : n;
    cpu_matmul_shape sh = {.m = m,
                           .n = n,
                           .k = k,
                           .trans_a = a->trans_a,
                           .trans_b = a->trans_b,
                           .lda = a_cols,
                           .ldb = a->ldb};
    clf_status st = CLF_OK;
    if (a->b_bf16.buf)
        st = check_span_aligned("gemm", "b_bf16", a->b_bf16,
                                2 * span2d((size_t)b_rows, (size_t)b_cols, (size_t)a->ldb), 2);
    else
        st = cpu_grow(&q->wsrc, &q->wsrc_cap, (size_t)b_rows * (size_t)b_cols, sizeof(uint16_t),
                      "gemm (bf16)");
    if (st == CLF_OK)
        st = cpu_grow(&q->src, &q->src_cap, (size_t)a_rows * (size_t)a_cols, sizeof(uint16_t),
                      "gemm (bf16)");
    if (st == CLF_OK)
        st = cpu_grow(&q->acc, &q->acc_cap, (size_t)m * (size_t)n, sizeof(float), "gemm (bf16)");
    if (st != CLF_OK)
        return st;
    round_rows(be, fptr(a->a), a_rows, a_cols, a->lda, q->src);
    const void *wei;
    if (a->b_bf16.buf) {
        wei = a->b_bf16.buf->data + a->b_bf16.off;
    } else {
        round_rows(be, fptr(a->b), b_rows, b_cols, a->ldb, q->wsrc);
        wei = q->wsrc;
        sh.ldb = b_cols;
    }
    if ((st = cpu_dnnl_matmul(q, CPU_MATMUL_BF16, &sh, q->src, wei, q->acc, be->threads)) != CLF_OK)
        return st;
    const float *bias = a->bias.buf ? fptr(a->bias) : NULL;
    float *C = fptr(a->c);
    const float *acc = q->acc;
    const float alpha = a->alpha, beta = a->beta;
    const int relu = a->relu;
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((size_t)m * n > CPU_PAR_MIN)
    for (int i = 0; i < m; i++) {
        float *c = C + (size_t)i * a->ldc;
        const float *r = acc + (size_t)i * n;
        if (beta != 0.0f) /* beta = 0 must not read C (it may hold NaN) */
#pragma omp simd
            for (int j = 0; j < n; j++)
                c[j] = alpha * r[j] + beta * c[j];
        else
#pragma omp simd
            for (int j = 0; j < n; j++)
                c[j] = alpha * r[j];
        cpu_bias_relu_row(c, n, bias, relu);
    }
    return CLF_OK;
}
