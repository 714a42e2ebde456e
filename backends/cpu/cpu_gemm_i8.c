/* Products against int8 weights (clf_gemm_args.b_i8, b_scale):
 *
 *   C[i,j] = relu?(alpha * sa[i] * s[j] * (sum_p ua[i,p] W[j,p] - z * wsum[j])
 *                  + beta * C[i,j] + bias[j])
 *   A [m, k] rows lda apart, W = b_i8 [n, k] rows ldb apart (y = x W^T), s[j] and wsum[j]
 *   from b_scale ({F32 scale, I32 sum of row j's int8 values} per row).
 *
 * A is quantized per row here, at run time: sa[i] = max_p |A[i,p]| / qmax, qa = round(A /
 * sa) in [-qmax, qmax], stored unsigned as ua = qa + z (z = qmax + 1 would not fit a u8
 * at qmax 127, so z = 128 there and 64 at qmax 64). Unsigned activations times signed
 * weights is the product x86 has (vpmaddubsw, and VNNI's vpdpbusd); oneDNN's matmul
 * computes sum_p ua W in int32, and the z * wsum term (the sums are made with the weights,
 * once) takes the offset back out, exactly. Without VNNI, vpmaddubsw adds two u8 x s8
 * products into 16 bits with saturation: 2 * 128 * 127 = 32512 fits, 2 * 255 * 127 does
 * not, so qmax is 64 there (7-bit activations) and 127 with AVX-512 VNNI.
 *
 * Why oneDNN: Debian's OpenBLAS 0.3.21 has no integer GEMM, and oneDNN's u8 x s8 -> s32
 * matmul runs the model's shapes faster than OpenBLAS's SGEMM from 32 rows on, and faster
 * than the kernel below, which we keep for the few-row products only (see there;
 * bench/RESULTS.md; with VNNI, cpu_gemm_i8_vnni.c's kernel runs those). oneDNN's own s8 x s8 path
 * is slower than u8 x s8 (it adds 128 and the compensation per call), so the offset is ours. A
 * matmul primitive is made once per shape (m, n, k, lda, ldb) and kept in a small cache of the
 * backend: making one costs about as much as running it.
 *
 * With AVX-512 VNNI and k a multiple of 64, the weights' 64-row blocks are first rewritten
 * in place in oneDNN's packed layout (cpu_i8_pack.c): oneDNN then reads them without
 * copying, and the VNNI kernel's packed form runs the few-row products; the last n % 64
 * rows stay as stored and take the row kernel. Same exact sums either way. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

int cpu_i8_choose_qmax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512vnni"))
        return 127;
#endif
    return 64;
}

/* ---- few rows: a kernel of our own ----
 *
 * oneDNN 2.6's matmul is slow for the products of a few rows that decoding at batch 1, with
 * a small beam or a batch that has lost most of its sentences makes, where the product is
 * bound by reading the int8 weights once: this kernel took 0.6-0.95x oneDNN's time at 8 to
 * 32 rows on the base model's shapes (bench/gemm_int8.c, bench/RESULTS.md), and runs up to
 * CPU_I8_FEW_ROWS rows. It uses the 7-bit activations only (vpmaddubsw's pair
 * sums of u8 <= 128 times s8 fit 16 bits), so with VNNI (8-bit activations) oneDNN runs
 * every product. acc[i][j] = sum_p ua[i,p] W[j,p], exactly as oneDNN's. */

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define I8_AVX2 __attribute__((target("avx2")))

I8_AVX2 static inline int32_t hsum8(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* acc[i0+i][j0+r] for MR rows of ua (rows ldu apart) and NR rows of w (rows ldw apart);
 * 32 columns at a time, then the k % 32 last ones in scalar code. */
I8_AVX2 static inline __attribute__((always_inline)) void
few_tile(const uint8_t *ua, size_t ldu, const int8_t *w, size_t ldw, int k, int i0, int j0,
         const int MR, const int NR, int32_t *acc, size_t ldacc)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i t[4][2];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
        for (int r = 0; r < NR; r++)
            t[i][r] = _mm256_setzero_si256();
    const uint8_t *a = ua + (size_t)i0 * ldu;
    const int8_t *wr = w + (size_t)j0 * ldw;
    const int k32 = k & ~31;
    for (int p = 0; p < k32; p += 32) {
        if (i0 == 0 && (p & 63) == 0) /* the next NR rows, fetched ahead (see one_row4) */
#pragma GCC unroll 2
            for (int r = 0; r < NR; r++)
                _mm_prefetch((const char *)(wr + (size_t)(NR + r) * ldw + p), _MM_HINT_T0);
        __m256i b[2];
#pragma GCC unroll 2
        for (int r = 0; r < NR; r++)
            b[r] = _mm256_loadu_si256((const __m256i *)(const void *)(wr + (size_t)r * ldw + p));
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) {
            const __m256i x =
                _mm256_loadu_si256((const __m256i *)(const void *)(a + (size_t)i * ldu + p));
#pragma GCC unroll 2
            for (int r = 0; r < NR; r++)
                t[i][r] = _mm256_add_epi32(t[i][r],
                                           _mm256_madd_epi16(_mm256_maddubs_epi16(x, b[r]), ones));
        }
    }
    for (int i = 0; i < MR; i++)
        for (int r = 0; r < NR; r++) {
            int32_t v = hsum8(t[i][r]);
            for (int p = k32; p < k; p++)
                v += (int32_t)a[(size_t)i * ldu + p] * wr[(size_t)r * ldw + p];
            acc[(size_t)(i0 + i) * ldacc + j0 + r] = v;
        }
}

/* rows [0, m) against W rows j0 .. j0 + NR */
I8_AVX2 static inline __attribute__((always_inline)) void
few_rows(const uint8_t *ua, size_t ldu, int m, const int8_t *w, size_t ldw, int k, int j0,
         const int NR, int32_t *acc, size_t ldacc)
{
    int i0 = 0;
    for (; i0 + 4 <= m; i0 += 4)
        few_tile(ua, ldu, w, ldw, k, i0, j0, 4, NR, acc, ldacc);
    switch (m - i0) {
    case 3:
        few_tile(ua, ldu, w, ldw, k, i0, j0, 3, NR, acc, ldacc);
        break;
    case 2:
        few_tile(ua, ldu, w, ldw, k, i0, j0, 2, NR, acc, ldacc);
        break;
    case 1:
        few_tile(ua, ldu, w, ldw, k, i0, j0, 1, NR, acc, ldacc);
        break;
    default:
        break;
    }
}

/* One row of activations (decoding at batch 1): acc[j0 .. j0 + 3] for four rows of w at a
 * time, the four sums reduced together at the end (a horizontal sum of each accumulator
 * apart, and the stack traffic of the general tile, cost as much as the 16 steps of the
 * loop over a 512-wide row). */
I8_AVX2 static void one_row4(const uint8_t *ua, const int8_t *w, size_t ldw, int k, int j0,
                             int32_t *acc)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i t0 = _mm256_setzero_si256(), t1 = t0, t2 = t0, t3 = t0;
    const int8_t *w0 = w + (size_t)j0 * ldw, *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;
    const int k32 = k & ~31;
    /* The next four rows, fetched ahead into L1 while these are summed: the hardware
     * prefetchers see four short streams (512 bytes each at the model's k) and start each
     * too late (bench/gemm_int8.c). A prefetch past the matrix's end is harmless: it never faults.
     */
    const int8_t *next = w3 + ldw;
    for (int p = 0; p < k32; p += 32) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(ua + p));
        if ((p & 63) == 0) {
            _mm_prefetch((const char *)(next + p), _MM_HINT_T0);
            _mm_prefetch((const char *)(next + ldw + p), _MM_HINT_T0);
            _mm_prefetch((const char *)(next + 2 * ldw + p), _MM_HINT_T0);
            _mm_prefetch((const char *)(next + 3 * ldw + p), _MM_HINT_T0);
        }
#define I8_ROW(t, wr)                                                                              \
    t = _mm256_add_epi32(                                                                          \
        t, _mm256_madd_epi16(_mm256_maddubs_epi16(                                                 \
                                 x, _mm256_loadu_si256((const __m256i *)(const void *)(wr + p))),  \
                             ones))
        I8_ROW(t0, w0);
        I8_ROW(t1, w1);
        I8_ROW(t2, w2);
        I8_ROW(t3, w3);
#undef I8_ROW
    }
    /* lanes of t0..t3 summed pairwise, then the two halves: {sum t0, sum t1, sum t2, sum t3} */
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(t0, t1), _mm256_hadd_epi32(t2, t3));
    __m128i r = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    int32_t out[4];
    _mm_storeu_si128((__m128i *)(void *)out, r);
    for (int p = k32; p < k; p++) {
        out[0] += (int32_t)ua[p] * w0[p];
        out[1] += (int32_t)ua[p] * w1[p];
        out[2] += (int32_t)ua[p] * w2[p];
        out[3] += (int32_t)ua[p] * w3[p];
    }
    memcpy(acc + j0, out, sizeof out);
}

I8_AVX2 static void few_range(const uint8_t *ua, size_t ldu, int m, const int8_t *w, size_t ldw,
                              int k, int j0, int j1, int32_t *acc, size_t ldacc)
{
    int j = j0;
    if (m == 1)
        for (; j + 4 <= j1; j += 4)
            one_row4(ua, w, ldw, k, j, acc);
    for (; j + 2 <= j1; j += 2)
        few_rows(ua, ldu, m, w, ldw, k, j, 2, acc, ldacc);
    if (j < j1)
        few_rows(ua, ldu, m, w, ldw, k, j, 1, acc, ldacc);
}

/* Below this many weights a product runs on one thread. */
#define I8_PARALLEL_MIN ((size_t)1 << 15)

static void few_product(clf_backend *be, const clf_gemm_args *a, const uint8_t *ua, int32_t *acc)
{
    const int n = a->n;
    const int8_t *w = (const int8_t *)(const void *)(a->b_i8.buf->data + a->b_i8.off);
    int threads = (size_t)n * (size_t)a->k >= I8_PARALLEL_MIN ? be->threads : 1;
    int per = ((n + threads - 1) / threads + 7) / 8 * 8; /* whole pairs of W rows */
    threads = (n + per - 1) / per;
#pragma omp parallel for num_threads(threads) schedule(static, 1) if (threads > 1)
    for (int t = 0; t < threads; t++) {
        const int j0 = t * per, j1 = j0 + per < n ? j0 + per : n;
        few_range(ua, (size_t)a->lda, a->m, w, (size_t)a->ldb, a->k, j0, j1, acc, (size_t)n);
    }
}
#endif

/* ---- the elementwise loops: the epilogue and the activations' quantization ----
 *
 * Each is written once (an always-inline body) and compiled for each kernel level, chosen
 * by be->isa: the backend is built for baseline x86-64, where these loops would be SSE2
 * (bench/RESULTS.md: an output layer's epilogue). Each element's arithmetic is the same at
 * every level (no sums across elements; the beta term a statement of its own, so no
 * compiler fuses a multiply-add), so the results are too. */

/* Row i of C, columns [j0, j1): c[j] = relu?(si * scale[j] * (r[j] - zero * wsum[j])
 * (+ beta * c[j]) (+ bias[j])), r the row's int32 sums indexed by column; scale and wsum
 * read as the pairs b_scale stores (4-byte aligned, checked by the caller). The terms are
 * added one statement at a time, in the order cpu_bias_relu_row adds them to a row. */
static inline __attribute__((always_inline)) void
epilogue_row_body(float *c, const int32_t *r, const unsigned char *ws, float si, float beta,
                  const float *bias, int relu, int zero, int j0, int j1)
{
    const float *scale = (const float *)(const void *)ws;
    const int32_t *wsum = (const int32_t *)(const void *)ws;
    const int has_beta = beta != 0.0f, has_bias = bias != NULL; /* beta 0: C is not read */
#pragma omp simd
    for (int j = j0; j < j1; j++) {
        float v = si * scale[2 * j] * (float)(r[j] - zero * wsum[2 * j + 1]);
        if (has_beta) {
            const float old = beta * c[j];
            v = v + old;
        }
        if (has_bias)
            v = v + bias[j];
        if (relu)
            v = v > 0.0f ? v : 0.0f;
        c[j] = v;
    }
}

/* Row x [k] quantized: u[p] = round(x[p] / s) + zero; returns s = max_p |x[p]| / qmax. */
static inline __attribute__((always_inline)) float
quantize_row_body(const float *x, int k, float qmax, int zero, uint8_t *u)
{
    float amax = 0.0f;
#pragma omp simd reduction(max : amax)
    for (int p = 0; p < k; p++)
        amax = fabsf(x[p]) > amax ? fabsf(x[p]) : amax;
    /* a zero row (or one of NaN: amax stays 0) quantizes to zeros with scale 0 */
    const float s = amax / qmax, inv = amax > 0.0f ? qmax / amax : 0.0f;
    /* rounding half away from zero, in SIMD (lrintf is a libm call per element, a visible
     * part of an int8 beam search's profile); the clamp also sends NaN to -qmax, so the
     * conversion to int is always defined */
#pragma omp simd
    for (int p = 0; p < k; p++) {
        float v = x[p] * inv;
        v = v >= -qmax ? v : -qmax;
        v = v <= qmax ? v : qmax;
        u[p] = (uint8_t)((int)(v + (v >= 0.0f ? 0.5f : -0.5f)) + zero);
    }
    return s;
}

#define I8_ROW_LOOPS(SUFFIX, TARGET)                                                               \
    TARGET static void epilogue_row_##SUFFIX(float *c, const int32_t *r, const unsigned char *ws,  \
                                             float si, float beta, const float *bias, int relu,    \
                                             int zero, int j0, int j1)                             \
    {                                                                                              \
        epilogue_row_body(c, r, ws, si, beta, bias, relu, zero, j0, j1);                           \
    }                                                                                              \
    TARGET static float quantize_row_##SUFFIX(const float *x, int k, float qmax, int zero,         \
                                              uint8_t *u)                                          \
    {                                                                                              \
        return quantize_row_body(x, k, qmax, zero, u);                                             \
    }

I8_ROW_LOOPS(generic, )
#if CPU_X86
I8_ROW_LOOPS(avx2, __attribute__((target("avx2"))))
I8_ROW_LOOPS(avx512, __attribute__((target("avx512f,avx512bw,avx512vl,avx2"))))
#endif

static void epilogue_row(cpu_isa isa, float *c, const int32_t *r, const unsigned char *ws, float si,
                         float beta, const float *bias, int relu, int zero, int j0, int j1)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512)
        epilogue_row_avx512(c, r, ws, si, beta, bias, relu, zero, j0, j1);
    else if (isa == CPU_ISA_AVX2)
        epilogue_row_avx2(c, r, ws, si, beta, bias, relu, zero, j0, j1);
    else
#endif
        epilogue_row_generic(c, r, ws, si, beta, bias, relu, zero, j0, j1);
    (void)isa;
}

static float quantize_row(cpu_isa isa, const float *x, int k, float qmax, int zero, uint8_t *u)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512)
        return quantize_row_avx512(x, k, qmax, zero, u);
    if (isa == CPU_ISA_AVX2)
        return quantize_row_avx2(x, k, qmax, zero, u);
#endif
    (void)isa;
    return quantize_row_generic(x, k, qmax, zero, u);
}

/* C's columns [j0, j1) (the top's formula) from the integer sums r: row i's column j0 at
 * r[i * ldr]. */
static void epilogue(clf_backend *be, const clf_gemm_args *a, const float *sa, int zero,
                     const int32_t *r, size_t ldr, int j0, int j1)
{
    /* b_scale: per row {F32 scale, I32 sum} */
    const unsigned char *ws = a->b_scale.buf->data + a->b_scale.off;
    const float *bias = a->bias.buf ? fptr(a->bias) : NULL;
    float *C = fptr(a->c);
    const int m = a->m, relu = a->relu;
#pragma omp parallel for num_threads(be->threads)                                                  \
    schedule(static) if ((size_t)m * (size_t)(j1 - j0) > CPU_PAR_MIN)
    for (int i = 0; i < m; i++)
        epilogue_row(be->isa, C + (size_t)i * a->ldc, r + (size_t)i * ldr - j0, ws,
                     a->alpha * sa[i], a->beta, bias, relu, zero, j0, j1);
}

/* The product on weights whose first `packed` rows are packed (cpu_i8_pack.c): those
 * through the VNNI kernel (few rows) or oneDNN, the few (< 64) after them as stored, each
 * part's epilogue after it. */
static clf_status packed_product(clf_backend *be, const clf_gemm_args *a, const uint8_t *qa,
                                 const float *sa, int zero, int packed)
{
    cpu_dnnl *q = be->dnnl;
    const int m = a->m, n = a->n, k = a->k;
    const int8_t *w = (const int8_t *)(const void *)(a->b_i8.buf->data + a->b_i8.off);
    int32_t *acc = q->acc;
    if (cpu_i8_vnni_applies(be, a)) {
        cpu_i8_vnni_packed(be, a, qa, packed, acc);
    } else {
        /* oneDNN's brgemm writes only dense rows of C: with a stride it falls back to its
         * reference code (so the packed part and the rest have sums of their own) */
        const cpu_matmul_shape sh = {.m = m, .n = packed, .k = k, .lda = a->lda};
        const clf_status st =
            cpu_dnnl_matmul(q, CPU_MATMUL_INT8_PACKED, &sh, (void *)qa, w, acc, be->threads);
        if (st != CLF_OK)
            return st;
    }
    epilogue(be, a, sa, zero, acc, (size_t)packed, 0, packed);
    if (packed < n) {
        cpu_i8_vnni_product(be, a, qa, acc, packed);
        epilogue(be, a, sa, zero, acc, (size_t)(n - packed), packed, n);
    }
    return CLF_OK;
}

/* 1 when the own kernel runs this product: few rows, 7-bit activations, AVX2 or better
 * (the F16 kernels' level: CLF_CPU_ISA=generic leaves every product to oneDNN). */
static int few_applies(const clf_backend *be, const clf_gemm_args *a)
{
#if defined(__x86_64__) || defined(__i386__)
    return a->m <= CPU_I8_FEW_ROWS && be->i8_qmax == 64 && be->isa != CPU_ISA_GENERIC;
#else
    (void)be;
    (void)a;
    return 0;
#endif
}

int cpu_gemm_i8_applies(const clf_gemm_args *a)
{
    return a->b_i8.buf && !a->trans_a && a->trans_b && a->k > 0;
}

clf_status cpu_gemm_i8(clf_backend *be, const clf_gemm_args *a)
{
    cpu_dnnl *q = be->dnnl;
    const int m = a->m, n = a->n, k = a->k;
    /* the activations' unsigned offset (see above) */
    const int zero = be->i8_qmax == 127 ? 128 : 64;
    clf_status st = check_span_aligned("gemm", "b_i8", a->b_i8,
                                       span2d((size_t)n, (size_t)k, (size_t)a->ldb), 1);
    if (st == CLF_OK)
        st = check_span("gemm", "b_scale", a->b_scale, 8 * (size_t)n);
    if (st == CLF_OK)
        st = cpu_grow(&q->src, &q->src_cap, (size_t)m * (size_t)a->lda, 1, "gemm (int8)");
    if (st == CLF_OK)
        st = cpu_grow((void **)&q->row_scale, &q->row_scale_cap, (size_t)m, sizeof(float),
                      "gemm (int8)");
    if (st == CLF_OK)
        st = cpu_grow(&q->acc, &q->acc_cap, (size_t)m * (size_t)n, sizeof(int32_t), "gemm (int8)");
    const int few = few_applies(be, a);
    int packed = 0; /* the leading weight rows read packed (cpu_i8_pack.c) */
    if (st == CLF_OK)
        st = cpu_i8_packed_rows(be, a, &packed);
    if (st != CLF_OK)
        return st;
    const float *A = fptr(a->a);
    const float qmax = (float)be->i8_qmax;
    uint8_t *qa = q->src;
    float *sa = q->row_scale;
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((size_t)m * k > CPU_PAR_MIN)
    for (int i = 0; i < m; i++)
        sa[i] =
            quantize_row(be->isa, A + (size_t)i * a->lda, k, qmax, zero, qa + (size_t)i * a->lda);
    if (packed)
        return packed_product(be, a, qa, sa, zero, packed);
    if (few) {
#if defined(__x86_64__) || defined(__i386__)
        few_product(be, a, qa, q->acc);
#endif
    } else if (cpu_i8_vnni_applies(be, a)) {
        cpu_i8_vnni_product(be, a, qa, q->acc, 0);
    } else {
        const cpu_matmul_shape sh = {
            .m = m, .n = n, .k = k, .trans_b = 1, .lda = a->lda, .ldb = a->ldb};
        const void *w = a->b_i8.buf->data + a->b_i8.off;
        if ((st = n >= CPU_I8_IGEMM_MIN_N ? cpu_dnnl_igemm(&sh, qa, w, q->acc, be->threads)
                                          : cpu_dnnl_matmul(q, CPU_MATMUL_INT8, &sh, qa, w, q->acc,
                                                            be->threads)) != CLF_OK)
            return st;
    }
    epilogue(be, a, sa, zero, q->acc, (size_t)n, 0, n);
    return CLF_OK;
}
