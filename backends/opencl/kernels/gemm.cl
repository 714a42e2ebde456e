/* gemm.cl - our own GEMM kernels: a few rows times a weight matrix, stored as F16 or F32.
 *
 * Every other GEMM runs in CLBlast. A decoding step multiplies 1..CLF_GEMM_FEW_ROWS rows
 * (batch 1, a small beam) by each weight matrix W [n, k]: the time is that of reading W
 * once, which CLBlast's GEMV and GEMM, tiled for large products, are far from
 * (bench/RESULTS.md, "OpenCL on an NVIDIA H100"). gemm_rows_half reads gemm's b_half (W as
 * IEEE binary16: half the bytes), gemm_rows_float reads b. Halves are read with vload_half / vloada_half8, which
 * OpenCL 1.1+ has without cl_khr_fp16 (NVIDIA has no cl_khr_fp16); all arithmetic is F32.
 *
 * On a device with cl_khr_fp16, a product of more rows with b_half runs in CLBlast's HGEMM,
 * which takes F16 operands and gives an F16 result: half_pack rounds A to F16 before it and
 * half_unpack applies the epilogue in F32 after it (ocl_gemm.c). Both only store and load
 * halves (vstore_half_rte, vload_half), so they build on every device. */

#ifndef CLF_GEMM_FEW_ROWS
#define CLF_GEMM_FEW_ROWS 7 /* the host sets it; rows of A one launch takes at most */
#endif

/* Elements per vector load: 8 halves = 16 bytes, 8 floats = 32 bytes, the widest loads of
 * one work-item that neighbouring work-items turn into whole 128-byte lines. */
#define GEMM_ROWS_VEC 8

/* C [m, n] = alpha * A [m, k] · B [n, k]^T + beta * C, then + bias[j], then relu.
 * m <= CLF_GEMM_FEW_ROWS; A rows lda apart (F32); B rows ldb apart (F16 or F32); C rows
 * ldc apart; bias [n] (has_bias). beta == 0 does not read C (NaN there is dropped, as in
 * BLAS).
 *
 * Each column j of C gets `lanes` work-items (a power of two dividing the work-group). Lane
 * l reads the 8-element chunks l, l + lanes, ... of row j of B (neighbouring lanes read
 * neighbouring bytes: coalesced) and the same columns of the m rows of A, keeping one F32
 * partial sum per row (ROWS_ADD1, ROWS_ADD8). The lanes of a column then add their sums in a
 * tree in local memory and lanes 0..m-1 write C[r, j] (rows_finish). Every sum runs in an order
 * fixed by the shapes and the work-group size.
 * red: [m * local size] floats. */

/* acc[r] += A[r, p] * bv for r < m (unrolled to CLF_GEMM_FEW_ROWS: acc stays in registers) */
#define ROWS_ADD1(acc, ar, lda, p, bv, m)                                                          \
    for (int r = 0; r < CLF_GEMM_FEW_ROWS; r++)                                                    \
        if (r < (m))                                                                               \
            (acc)[r] += (ar)[r * (lda) + (p)] * (bv);

/* acc[r] += dot(A[r, p .. p + 7], bv) for r < m */
#define ROWS_ADD8(acc, ar, lda, p, bv, m)                                                          \
    for (int r = 0; r < CLF_GEMM_FEW_ROWS; r++) {                                                  \
        if (r < (m)) {                                                                             \
            const float8 av = vload8(0, (ar) + r * (lda) + (p));                                   \
            (acc)[r] += dot(av.lo, (bv).lo) + dot(av.hi, (bv).hi);                                 \
        }                                                                                          \
    }

/* The column of C this work-item sums for, and in *lane its lane among the column's
 * `lanes` (neighbouring work-items). */
ulong rows_column(int lanes, int *lane)
{
    const uint lid = get_local_id(0);
    *lane = (int)(lid & (uint)(lanes - 1));
    return get_group_id(0) * (ulong)(get_local_size(0) / (uint)lanes) + lid / (uint)lanes;
}

/* relu?(alpha * prod + beta * *cp + bias[j]), what every gemm kernel writes to C; beta == 0
 * does not read C (NaN there is dropped, as in BLAS). */
float gemm_epilogue(float prod, __global const float *cp, __global const float *bias,
                    ulong bias_off, ulong j, int has_bias, int relu, float alpha, float beta)
{
    float v = alpha * prod;
    if (beta != 0.0f)
        v += beta * *cp;
    if (has_bias)
        v += bias[bias_off + j];
    return relu ? fmax(v, 0.0f) : v;
}

/* The lanes' sums added in a tree, then the epilogue: lanes 0..m-1 of column j write
 * C[r, j]. Every work-item takes part (the barriers); those past n write nothing. */
void rows_finish(const float *acc, __local float *red, int lane, int lanes, ulong j, int m,
                 int n, __global float *c, ulong c_off, ulong ldc, __global const float *bias,
                 ulong bias_off, int has_bias, int relu, float alpha, float beta)
{
    const uint lid = get_local_id(0), wg = get_local_size(0);
    for (int r = 0; r < CLF_GEMM_FEW_ROWS; r++)
        if (r < m)
            red[r * wg + lid] = acc[r];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = lanes / 2; s > 0; s /= 2) {
        if (lane < s)
            for (int r = 0; r < m; r++)
                red[r * wg + lid] += red[r * wg + lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (j >= (ulong)n)
        return;
    for (int r = lane; r < m; r += lanes) {
        __global float *cp = c + c_off + r * ldc + j;
        *cp = gemm_epilogue(red[r * wg + lid - lane], cp, bias, bias_off, j, has_bias, relu,
                            alpha, beta);
    }
}

/* A's m rows layer-normalized (the layernorm op's rule, common.cl) into an [m * k] in local
 * memory, for the product to read; work-group 0 also writes them to ln_out [m, k] (gemm's
 * ln_out: later ops read them). Every work-item calls it (the reductions' barriers). */
void rows_normalize(__global const float *a, ulong lda, int m, int k,
                    __global const float *alpha, __global const float *beta, int style, float eps,
                    __global float *ln_out, __local float *an, __local float *red)
{
    const int lid = get_local_id(0), wg = get_local_size(0);
    const int writes = get_group_id(0) == 0;
    for (int r = 0; r < m; r++) {
        __global const float *xr = a + r * lda;
        float mean, corr;
        const float div = ln_row_stats(xr, k, style, eps, red, &mean, &corr);
        for (int c = lid; c < k; c += wg) {
            const float v = ln_value(xr[c], mean, corr, div, alpha[c], beta[c]);
            an[r * k + c] = v;
            if (writes)
                ln_out[r * k + c] = v;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* Where the product reads A: a's rows lda apart, or (the _ln kernels) the rows that
 * rows_normalize left in local memory, k apart. */
#define A_FROM_GLOBAL                                                                              \
    __global const float *ar = a + a_off;                                                          \
    const ulong ald = lda;
#define A_NORMALIZED                                                                               \
    rows_normalize(a + a_off, lda, m, k, ln_alpha + la_off, ln_beta + lb_off, ln_style, ln_eps,    \
                   ln_out + lo_off, an, red);                                                      \
    __local const float *ar = an;                                                                  \
    const ulong ald = (ulong)k;
#define NO_LN_PARAMS
#define LN_PARAMS                                                                                  \
    , __global const float *ln_alpha, ulong la_off, __global const float *ln_beta, ulong lb_off,   \
        int ln_style, float ln_eps, __global float *ln_out, ulong lo_off, __local float *an

/* One kernel of each B type and A source: T the element, LOAD1(p, b) one element as a float,
 * LOAD8(p, b) the 8 elements from p as a float8, HEAD(row) how many elements of the row
 * starting at element `row` come before the first aligned 8-element chunk (read one at a
 * time); A_SOURCE (A_FROM_GLOBAL or A_NORMALIZED) and its extra parameters. The work items
 * past n still take part in rows_finish's barriers (and rows_normalize's). */
#define GEMM_ROWS_KERNEL(name, T, HEAD, LOAD1, LOAD8, A_SOURCE, EXTRA_PARAMS)                      \
    __kernel void name(__global const float *a, ulong a_off, ulong lda, __global const T *bsrc,    \
                       ulong b_off, ulong ldb, __global float *c, ulong c_off, ulong ldc,          \
                       __global const float *bias, ulong bias_off, int has_bias, int relu, int m,  \
                       int n, int k, float alpha, float beta, int lanes,                           \
                       __local float *red EXTRA_PARAMS)                                            \
    {                                                                                              \
        int lane;                                                                                  \
        const ulong j = rows_column(lanes, &lane);                                                 \
        A_SOURCE                                                                                   \
        float acc[CLF_GEMM_FEW_ROWS] = {0.0f};                                                     \
        if (j < (ulong)n) {                                                                        \
            const ulong row = b_off + j * ldb;                                                     \
            const int head = min(HEAD(row), k);                                                    \
            const int chunks = (k - head) / GEMM_ROWS_VEC, tail = head + chunks * GEMM_ROWS_VEC;   \
            __global const T *b = bsrc + row;                                                      \
            for (int p = lane; p < head; p += lanes) {                                             \
                const float bv = LOAD1(p, b);                                                      \
                ROWS_ADD1(acc, ar, ald, p, bv, m)                                                  \
            }                                                                                      \
            for (int q = lane; q < chunks; q += lanes) {                                           \
                const int p = head + q * GEMM_ROWS_VEC;                                            \
                const float8 bv = LOAD8(p, b);                                                     \
                ROWS_ADD8(acc, ar, ald, p, bv, m)                                                  \
            }                                                                                      \
            for (int p = tail + lane; p < k; p += lanes) {                                         \
                const float bv = LOAD1(p, b);                                                      \
                ROWS_ADD1(acc, ar, ald, p, bv, m)                                                  \
            }                                                                                      \
        }                                                                                          \
        rows_finish(acc, red, lane, lanes, j, m, n, c, c_off, ldc, bias, bias_off, has_bias,       \
                    relu, alpha, beta);                                                            \
    }

/* B as F16. vloada_half8 needs a 16-byte aligned address and row j starts at any element
 * (b_off + j * ldb), so the elements before its first multiple of 8 (the head) and after its
 * last whole chunk are read one at a time (a buffer itself starts at least 128-byte aligned:
 * CL_DEVICE_MEM_BASE_ADDR_ALIGN). */
#define HALF_HEAD(row) ((GEMM_ROWS_VEC - (int)((row) % GEMM_ROWS_VEC)) % GEMM_ROWS_VEC)
#define HALF_LOAD1(p, b) vload_half((p), (b))
#define HALF_LOAD8(p, b) vloada_half8(0, (b) + (p))
GEMM_ROWS_KERNEL(gemm_rows_half, half, HALF_HEAD, HALF_LOAD1, HALF_LOAD8, A_FROM_GLOBAL,
                 NO_LN_PARAMS)
GEMM_ROWS_KERNEL(gemm_rows_half_ln, half, HALF_HEAD, HALF_LOAD1, HALF_LOAD8, A_NORMALIZED,
                 LN_PARAMS)

/* B as F32: vload8 needs only a float's alignment, so there is no head; the k % 8 last
 * elements are read one at a time. */
#define FLOAT_HEAD(row) 0
#define FLOAT_LOAD1(p, b) (b)[p]
#define FLOAT_LOAD8(p, b) vload8(0, (b) + (p))
GEMM_ROWS_KERNEL(gemm_rows_float, float, FLOAT_HEAD, FLOAT_LOAD1, FLOAT_LOAD8, A_FROM_GLOBAL,
                 NO_LN_PARAMS)
GEMM_ROWS_KERNEL(gemm_rows_float_ln, float, FLOAT_HEAD, FLOAT_LOAD1, FLOAT_LOAD8, A_NORMALIZED,
                 LN_PARAMS)

/* out[i * k + p] = A[i, p] rounded to the nearest F16, for i < m, p < k: HGEMM's packed A
 * (rows lda apart in a, k apart in out). */
__kernel void half_pack(__global const float *a, ulong a_off, ulong lda, int m, int k,
                        __global half *out, ulong out_off)
{
    const ulong total = (ulong)m * (ulong)k;
    for (ulong t = get_global_id(0); t < total; t += get_global_size(0)) {
        const ulong i = t / (ulong)k, p = t % (ulong)k;
        vstore_half_rte(a[a_off + i * lda + p], out_off + t, out);
    }
}

/* C[i, j] = relu?(alpha * P[i, j] + beta * C[i, j] + bias[j]) for i < m, j < n, with P the
 * HGEMM's F16 product [m, n] (rows n apart); in F32. beta == 0 does not read C. */
__kernel void half_unpack(__global const half *prod, ulong prod_off, int m, int n,
                          __global float *c, ulong c_off, ulong ldc, __global const float *bias,
                          ulong bias_off, int has_bias, int relu, float alpha, float beta)
{
    const ulong total = (ulong)m * (ulong)n;
    for (ulong t = get_global_id(0); t < total; t += get_global_size(0)) {
        const ulong i = t / (ulong)n, j = t % (ulong)n;
        __global float *cp = c + c_off + i * ldc + j;
        *cp = gemm_epilogue(vload_half(prod_off + t, prod), cp, bias, bias_off, j, has_bias,
                            relu, alpha, beta);
    }
}
