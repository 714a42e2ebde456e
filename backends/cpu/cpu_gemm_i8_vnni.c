/* int8 products of a few rows with AVX-512 VNNI (cpu_gemm_i8.c's acc[i][j] = sum_p ua[i,p]
 * W[j,p], exact), reading W [n, k] as it is stored, row by row.
 *
 * Decoding at batch 1 or with a small beam multiplies 1 to 8 rows, where the product is
 * bound by reading W once and oneDNN 2.6's matmul spends more on its set-up and packing
 * than on the arithmetic (it took 1.1-3.8x this kernel's time there; bench/RESULTS.md);
 * from 16 rows on oneDNN's blocked kernel is ahead (CPU_I8_VNNI_ROWS). Each 64 bytes of a W row
 * meet 64 bytes of an activation row in one vpdpbusd (u8 x s8, four products summed into each of 16
 * int32 lanes, no saturation: 4 * 255 * 127 fits), a tile of 4 activation rows by 4 W rows in 16
 * accumulators; the lanes are summed once per tile at the end. k's last k % 64 values go through
 * masked loads (zeros past k). */
#include <stdint.h>
#include <string.h>

#include "cpu_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/* {sum t0, sum t1, sum t2, sum t3} of four accumulators' 16 lanes each */
VNNI static inline __m128i sum4(__m512i t0, __m512i t1, __m512i t2, __m512i t3)
{
    const __m256i y0 =
        _mm256_add_epi32(_mm512_castsi512_si256(t0), _mm512_extracti64x4_epi64(t0, 1));
    const __m256i y1 =
        _mm256_add_epi32(_mm512_castsi512_si256(t1), _mm512_extracti64x4_epi64(t1, 1));
    const __m256i y2 =
        _mm256_add_epi32(_mm512_castsi512_si256(t2), _mm512_extracti64x4_epi64(t2, 1));
    const __m256i y3 =
        _mm256_add_epi32(_mm512_castsi512_si256(t3), _mm512_extracti64x4_epi64(t3, 1));
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(y0, y1), _mm256_hadd_epi32(y2, y3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* acc rows i0 .. i0 + MR (of ua, rows ldu apart) by W rows j0 .. j0 + 4 (ldw apart) */
VNNI static inline __attribute__((always_inline)) void vnni_tile(const uint8_t *ua, size_t ldu,
                                                                 const int8_t *w, size_t ldw, int k,
                                                                 int i0, int j0, const int MR,
                                                                 int32_t *acc, size_t ldacc)
{
    __m512i t[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            t[i][r] = _mm512_setzero_si512();
    const uint8_t *a = ua + (size_t)i0 * ldu;
    const int8_t *wr = w + (size_t)j0 * ldw;
    const int k64 = k & ~63;
    for (int p = 0; p < k64; p += 64) {
        __m512i b[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            b[r] = _mm512_loadu_si512((const void *)(wr + (size_t)r * ldw + p));
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) {
            const __m512i x = _mm512_loadu_si512((const void *)(a + (size_t)i * ldu + p));
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
                t[i][r] = _mm512_dpbusd_epi32(t[i][r], x, b[r]);
        }
    }
    if (k64 < k) {
        const __mmask64 tail = (__mmask64)(~0ULL >> (64 - (k - k64)));
        __m512i b[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            b[r] = _mm512_maskz_loadu_epi8(tail, (const void *)(wr + (size_t)r * ldw + k64));
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) {
            const __m512i x =
                _mm512_maskz_loadu_epi8(tail, (const void *)(a + (size_t)i * ldu + k64));
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
                t[i][r] = _mm512_dpbusd_epi32(t[i][r], x, b[r]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
        _mm_storeu_si128((__m128i *)(void *)(acc + (size_t)(i0 + i) * ldacc + j0),
                         sum4(t[i][0], t[i][1], t[i][2], t[i][3]));
}

/* W rows [j0, j1) (j1 - j0 a multiple of 4) against every row of ua */
VNNI static void vnni_range(const uint8_t *ua, size_t ldu, int m, const int8_t *w, size_t ldw,
                            int k, int j0, int j1, int32_t *acc, size_t ldacc)
{
    for (int j = j0; j < j1; j += 4) {
        int i0 = 0;
        for (; i0 + 4 <= m; i0 += 4)
            vnni_tile(ua, ldu, w, ldw, k, i0, j, 4, acc, ldacc);
        switch (m - i0) {
        case 3:
            vnni_tile(ua, ldu, w, ldw, k, i0, j, 3, acc, ldacc);
            break;
        case 2:
            vnni_tile(ua, ldu, w, ldw, k, i0, j, 2, acc, ldacc);
            break;
        case 1:
            vnni_tile(ua, ldu, w, ldw, k, i0, j, 1, acc, ldacc);
            break;
        default:
            break;
        }
    }
}

/* The last n % 4 W rows, one at a time in scalar code (a vocabulary like 256,206 has 2). */
static void scalar_rows(const uint8_t *ua, size_t ldu, int m, const int8_t *w, size_t ldw, int k,
                        int j0, int j1, int32_t *acc, size_t ldacc)
{
    for (int j = j0; j < j1; j++)
        for (int i = 0; i < m; i++) {
            int32_t s = 0;
            for (int p = 0; p < k; p++)
                s += (int32_t)ua[(size_t)i * ldu + p] * w[(size_t)j * ldw + p];
            acc[(size_t)i * ldacc + j] = s;
        }
}

/* Below this many weights a product runs on one thread. */
#define VNNI_PARALLEL_MIN ((size_t)1 << 15)

int cpu_i8_vnni_applies(const clf_backend *be, const clf_gemm_args *a)
{
    return be->i8_qmax == 127 && be->isa == CPU_ISA_AVX512 && a->m <= CPU_I8_VNNI_ROWS;
}

void cpu_i8_vnni_product(clf_backend *be, const clf_gemm_args *a, const uint8_t *ua, int32_t *acc,
                         int first)
{
    const int n = a->n - first, n4 = n & ~3;
    const int8_t *w = (const int8_t *)(const void *)(a->b_i8.buf->data + a->b_i8.off) +
                      (size_t)first * (size_t)a->ldb;
    int threads = (size_t)n * (size_t)a->k >= VNNI_PARALLEL_MIN ? be->threads : 1;
    int per = ((n4 + threads - 1) / threads + 3) / 4 * 4; /* whole groups of 4 W rows */
    per = per > 0 ? per : 4;
    threads = n4 > 0 ? (n4 + per - 1) / per : 1;
#pragma omp parallel for num_threads(threads) schedule(static, 1) if (threads > 1)
    for (int t = 0; t < threads; t++) {
        const int j0 = t * per, j1 = j0 + per < n4 ? j0 + per : n4;
        if (j0 < j1)
            vnni_range(ua, (size_t)a->lda, a->m, w, (size_t)a->ldb, a->k, j0, j1, acc, (size_t)n);
    }
    scalar_rows(ua, (size_t)a->lda, a->m, w, (size_t)a->ldb, a->k, n4, n, acc, (size_t)n);
}
/* ---- the same on packed weights (cpu_i8_pack.c's layout) ----
 *
 * Each 64-row block of W is [k/4][64][4]: the 4 bytes of W rows j .. j + 15 at k-group g
 * are one 64-byte vector, so each activation row's 4 bytes at g are broadcast and meet 4
 * such vectors (64 columns) in 4 vpdpbusd, accumulating in the lanes that are the columns:
 * no horizontal sums. Up to 6 activation rows share each load of the block. */

/* acc rows i0 .. i0 + MR, columns j0 .. j0 + 63 (rows ldacc apart) from the block blk */
VNNI static inline __attribute__((always_inline)) void
packed_tile(const uint8_t *ua, size_t ldu, int i0, const int MR, const int8_t *blk, int k,
            int32_t *acc, size_t ldacc, int j0)
{
    __m512i t[6][4];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            t[i][c] = _mm512_setzero_si512();
    for (int g = 0; g < k / 4; g++) {
        const int8_t *bg = blk + (size_t)g * 256;
        __m512i b[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            b[c] = _mm512_loadu_si512((const void *)(bg + 64 * c));
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            int32_t four;
            memcpy(&four, ua + (size_t)(i0 + i) * ldu + 4 * (size_t)g, 4);
            const __m512i x = _mm512_set1_epi32(four);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++)
                t[i][c] = _mm512_dpbusd_epi32(t[i][c], x, b[c]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            _mm512_storeu_si512((void *)(acc + (size_t)(i0 + i) * ldacc + j0 + 16 * c), t[i][c]);
}

/* blocks [b0, b1) of w against every row of ua */
VNNI static void packed_range(const uint8_t *ua, size_t ldu, int m, const int8_t *w, int k, int b0,
                              int b1, int32_t *acc, size_t ldacc)
{
    for (int bl = b0; bl < b1; bl++) {
        const int8_t *blk = w + (size_t)bl * 64 * (size_t)k;
        int i0 = 0;
        for (; i0 + 6 <= m; i0 += 6)
            packed_tile(ua, ldu, i0, 6, blk, k, acc, ldacc, 64 * bl);
        switch (m - i0) {
        case 5:
            packed_tile(ua, ldu, i0, 5, blk, k, acc, ldacc, 64 * bl);
            break;
        case 4:
            packed_tile(ua, ldu, i0, 4, blk, k, acc, ldacc, 64 * bl);
            break;
        case 3:
            packed_tile(ua, ldu, i0, 3, blk, k, acc, ldacc, 64 * bl);
            break;
        case 2:
            packed_tile(ua, ldu, i0, 2, blk, k, acc, ldacc, 64 * bl);
            break;
        case 1:
            packed_tile(ua, ldu, i0, 1, blk, k, acc, ldacc, 64 * bl);
            break;
        default:
            break;
        }
    }
}

void cpu_i8_vnni_packed(clf_backend *be, const clf_gemm_args *a, const uint8_t *ua, int rows,
                        int32_t *acc)
{
    const int8_t *w = (const int8_t *)(const void *)(a->b_i8.buf->data + a->b_i8.off);
    const int blocks = rows / 64;
    int threads = (size_t)rows * (size_t)a->k >= VNNI_PARALLEL_MIN ? be->threads : 1;
    threads = threads < blocks ? threads : blocks;
    const int per = (blocks + threads - 1) / threads;
#pragma omp parallel for num_threads(threads) schedule(static, 1) if (threads > 1)
    for (int t = 0; t < threads; t++) {
        const int b0 = t * per, b1 = b0 + per < blocks ? b0 + per : blocks;
        if (b0 < b1)
            packed_range(ua, (size_t)a->lda, a->m, w, a->k, b0, b1, acc, (size_t)rows);
    }
}
#else
int cpu_i8_vnni_applies(const clf_backend *be, const clf_gemm_args *a)
{
    (void)be;
    (void)a;
    return 0;
}

void cpu_i8_vnni_packed(clf_backend *be, const clf_gemm_args *a, const uint8_t *ua, int rows,
                        int32_t *acc)
{
    (void)be;
    (void)a;
    (void)ua;
    (void)rows;
    (void)acc;
}

void cpu_i8_vnni_product(clf_backend *be, const clf_gemm_args *a, const uint8_t *ua, int32_t *acc,
                         int first)
{
    (void)be;
    (void)a;
    (void)ua;
    (void)acc;
    (void)first;
}
#endif
