/* Products of a few rows against a weight matrix: its F16 copy (clf_gemm_args.b_half), its
 * BF16 one (b_bf16: the same kernels, converting by a 16-bit shift instead of vcvtph2ps) or
 * the F32 matrix itself (b, on a CPU with AVX2; elsewhere gemm runs such products as
 * OpenBLAS SGEMVs, one row of A at a time):
 *
 *   C[r,j] = relu?(alpha * sum_p A[r,p] * half(Bh[j,p]) + beta * C[r,j] + bias[j])
 *   A [m, k] rows lda apart, Bh [n, k] rows ldb apart (trans_a = 0, trans_b = 1: y = x W^T,
 *   a linear layer), C [m, n] rows ldc apart, 1 <= m <= CPU_GEMV_MAX_ROWS (F32 weights:
 *   CPU_GEMV_F32_MAX_ROWS), k >= 1.
 *
 * Decoding at batch 1 or with a small beam is bound by reading the weights once per step;
 * F16 weights are half the bytes, and every kernel here reads W once for all m rows (an
 * SGEMV per row reads it m times). The products accumulate in F32. Each output C[r,j] is
 * computed by one thread in an order that depends on m and k only (lane l of accumulator
 * u sums the terms of the LANES-column blocks b with b % NA == u in order, the masked or
 * padded k tail goes to accumulator 0, then a fixed horizontal sum), whatever the thread
 * count and wherever j falls in a group of rows, so the result does not depend on
 * be->threads.
 *
 * Three kernel levels, chosen once at open (cpu_isa_choose): AVX-512 (F, BW and VL: 16
 * lanes, masked k tails; it hands short rows with m <= 4 to the 8-lane kernel, see
 * avx512_range), AVX2 with FMA and F16C (8 lanes, masked tails) and portable C. The SIMD
 * kernels read R rows of W side by side so that every load of x serves R rows (x comes
 * from L2 when its m rows outgrow L1), with NA accumulators per output; see
 * HALF_PREFETCH_BYTES for how they keep memory busy. Their body is written once, in
 * cpu_gemv_simd.inc, and included here for each of the two SIMD levels with its
 * vector type, loads and lane count, once per weight type (16-bit, F32; F32 at the AVX2
 * level only, which AVX-512 machines use for it too); what stays per level and type is its
 * choice of R and NA. */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#if CPU_X86
#include <immintrin.h>
#endif

/* ---- the job ---- */

typedef struct half_job {
    int m, k;
    const float *a;
    size_t lda;
    const uint16_t *w; /* 16-bit W, or */
    const float *wf;   /* F32 W */
    size_t ldw;
    float *c;
    size_t ldc;
    float alpha, beta;
    const float *bias;
    int relu;
    int bf16; /* w holds bfloat16 (b_bf16), not IEEE halves */
} half_job;

#define HALF_MAX_R  4                     /* the most W rows a kernel reads side by side */
#define HALF_MAX_M  CPU_GEMV_F32_MAX_ROWS /* the most rows of A a kernel takes */
#define HALF_MAX_NA 4                     /* the most accumulators per output */

/* dots [R][m] holds sum_p A[i,p] W[j+r,p]: C[i, j+r] gets the epilogue of gemm_one. */
static inline void half_store(const half_job *jb, int j, int R, const float *dots)
{
    for (int r = 0; r < R; r++)
        for (int i = 0; i < jb->m; i++) {
            float *c = jb->c + (size_t)i * jb->ldc + j + r;
            float v = jb->alpha * dots[r * jb->m + i];
            if (jb->beta != 0.0f) /* beta = 0 must not read C (it may hold NaN) */
                v += jb->beta * *c;
            if (jb->bias)
                v += jb->bias[j + r];
            if (jb->relu)
                v = v > 0.0f ? v : 0.0f;
            *c = v;
        }
}

/* ---- portable C ---- */

/* One IEEE half as float, exactly, with masks, not branches (so that loops of it vectorize), and
 * without the float unit's subnormal path (which flush-to-zero modes would break). */
static inline float half_to_float(uint16_t h)
{
    const uint32_t em = h & 0x7fffu, sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t normal = (em << 13) + 0x38000000u;  /* exponent rebiased 15 -> 127 */
    const uint32_t special = (em << 13) | 0x7f800000u; /* infinity, NaN */
    const float sub = (float)(int32_t)em * 0x1p-24f;   /* zero, subnormal: em 2^-24 */
    const uint32_t is_sub = 0u - (uint32_t)(em < 0x400u),
                   is_special = 0u - (uint32_t)(em >= 0x7c00u);
    uint32_t sub_bits, bits;
    float f;
    memcpy(&sub_bits, &sub, sizeof sub_bits);
    bits = (sub_bits & is_sub) | (special & is_special) | (normal & ~(is_sub | is_special)) | sign;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* One bfloat16 as float: its bits are the float's high half. */
static inline float bf16_to_float(uint16_t h)
{
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

#define GEN_LANES 8   /* partial sums per output: lane l takes the columns p = l mod 8 */
#define GEN_CHUNK 256 /* columns of W converted to float at a time */

/* dots [R][m]: rows j .. j+R-1 of W against the m rows of A. */
static void generic_rows(const half_job *jb, int j, int R, float *dots)
{
    const int m = jb->m, k = jb->k;
    float wf[GEN_CHUNK];
    for (int r = 0; r < R; r++) {
        const uint16_t *w = jb->w + (size_t)(j + r) * jb->ldw;
        float acc[CPU_GEMV_MAX_ROWS][GEN_LANES] = {{0.0f}};
        for (int p0 = 0; p0 < k; p0 += GEN_CHUNK) {
            const int nc = k - p0 < GEN_CHUNK ? k - p0 : GEN_CHUNK;
            if (jb->bf16)
                for (int l = 0; l < nc; l++)
                    wf[l] = bf16_to_float(w[p0 + l]);
            else
                for (int l = 0; l < nc; l++)
                    wf[l] = half_to_float(w[p0 + l]);
            for (int i = 0; i < m; i++) {
                const float *x = jb->a + (size_t)i * jb->lda + p0;
                int l = 0;
                for (; l + GEN_LANES <= nc; l += GEN_LANES)
                    for (int t = 0; t < GEN_LANES; t++)
                        acc[i][t] += x[l + t] * wf[l + t];
                for (int t = 0; l + t < nc; t++)
                    acc[i][t] += x[l + t] * wf[l + t];
            }
        }
        for (int i = 0; i < m; i++) {
            const float *s = acc[i];
            dots[r * m + i] = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
        }
    }
}

static void generic_range(const half_job *jb, int j0, int j1)
{
    float dots[HALF_MAX_R * CPU_GEMV_MAX_ROWS];
    for (int j = j0; j < j1; j += HALF_MAX_R) {
        const int R = j1 - j < HALF_MAX_R ? j1 - j : HALF_MAX_R;
        generic_rows(jb, j, R, dots);
        half_store(jb, j, R, dots);
    }
}

#if CPU_X86

/* ---- prefetching W ---- */

/* A thread reads its block of W once, R rows side by side. Hardware prefetchers keep up
 * with one sequential stream but lose R interleaved ones (bench/RESULTS.md), so with
 * R > 1 the kernels prefetch this far ahead themselves; m = 1 reads one row at a time and leaves it
 * to the hardware. */
#define HALF_PREFETCH_BYTES 4096

/* Rows of at least this many columns (4 KiB of F16 and up) are long: the prefetcher
 * trains on each of them, and the kernels prefetch along every row; shorter ones are
 * prefetched as one sequential stream through the memory after the group, where the
 * next rows lie when ldb == k. Each way wins on its own shape ([2048, 512] against
 * [512, 2048] weights, bench/RESULTS.md). */
#define HALF_LONG_K 2048

/* Prefetches W (elements of es bytes) for the 32 columns after p of rows w[0 .. R) (ldw
 * apart, k columns): long rows HALF_PREFETCH_BYTES / (es R) columns ahead on each row
 * (wrapping onto the next group), short ones R lines of the stream at *lin, which then
 * moves on. The addresses may lie past the end of W: a prefetch never faults, and they
 * are computed as integers, not as pointers outside the buffer. */
static inline __attribute__((always_inline)) void half_prefetch(const void *w, const size_t es,
                                                                size_t ldw, int k, int p,
                                                                const int R, const int LONG,
                                                                uintptr_t *lin)
{
    if (R == 1)
        return;
    if (LONG) {
        const size_t ahead = (size_t)p + HALF_PREFETCH_BYTES / (es * R);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const size_t e = ahead < (size_t)k ? r * ldw + ahead : (r + R) * ldw + ahead - k;
            _mm_prefetch((const char *)((uintptr_t)w + es * e), _MM_HINT_T0);
        }
        return;
    }
#pragma GCC unroll 4
    for (int q = 0; q < R; q++)
        _mm_prefetch((const char *)(*lin + 64 * (unsigned)q), _MM_HINT_T0);
    *lin += 64 * (unsigned)R;
}

/* ---- AVX2 + FMA + F16C: 8 lanes, zero-padded tails ---- */

#define AVX2_TARGET __attribute__((target("avx2,fma,f16c")))

/* 8 halves (BF = 0) or bfloat16s (BF = 1) as floats */
AVX2_TARGET static inline __attribute__((always_inline)) __m256 avx2_cvt(__m128i h, const int BF)
{
    return BF ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
              : _mm256_cvtph_ps(h);
}

/* W[p : p+n] and A[p : p+n] as 8 floats, zero past n < 8, reading nothing past p + n:
 * masked loads (of half pairs, then the odd last half), not a copy through memcpy, whose
 * call would spill every accumulator. */
AVX2_TARGET static inline __attribute__((always_inline)) __m256 avx2_tail_w(const uint16_t *w,
                                                                            int n, const int BF)
{
    const __m128i pairs = _mm_cmpgt_epi32(_mm_set1_epi32(n / 2), _mm_setr_epi32(0, 1, 2, 3));
    __m128i h = _mm_maskload_epi32((const int *)(const void *)w, pairs);
    if (n & 1) {
        const __m128i last =
            _mm_cmpeq_epi16(_mm_set1_epi16((short)(n - 1)), _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7));
        h = _mm_blendv_epi8(h, _mm_set1_epi16((short)w[n - 1]), last);
    }
    return avx2_cvt(h, BF);
}

AVX2_TARGET static inline __m256 avx2_tail_x(const float *x, int n)
{
    return _mm256_maskload_ps(
        x, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

AVX2_TARGET static inline float avx2_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#define HALF_ISA          avx2
#define HALF_TARGET       AVX2_TARGET
#define HALF_LANES        8
#define HALF_VEC          __m256
#define HALF_ZERO         _mm256_setzero_ps
#define HALF_ADD          _mm256_add_ps
#define HALF_FMA          _mm256_fmadd_ps
#define HALF_HSUM         avx2_hsum
#define HALF_TAIL_T       int /* the lanes: the first n */
#define HALF_FULL         8
#define HALF_TAIL(n)      (n)
#define HALF_LOAD_X(x, n) ((n) == 8 ? _mm256_loadu_ps(x) : avx2_tail_x(x, n))
#define HALF_W_T          uint16_t
#define HALF_JOB_W(jb)    ((jb)->w)
#define HALF_LOAD_W(w, n, BF)                                                                      \
    ((n) == 8 ? avx2_cvt(_mm_loadu_si128((const __m128i *)(w)), BF) : avx2_tail_w(w, n, BF))
#include "cpu_gemv_simd.inc" /* avx2_step, _blocks, _rows, _range_mr */

/* the same over F32 weights */
#define HALF_ISA              avx2_f32
#define HALF_W_T              float
#define HALF_JOB_W(jb)        ((jb)->wf)
#define HALF_LOAD_W(w, n, BF) ((void)(BF), (n) == 8 ? _mm256_loadu_ps(w) : avx2_tail_x(w, n))
#define HALF_LAST_TYPE        /* the instruction set's macros go after this one */
#include "cpu_gemv_simd.inc"  /* avx2_f32_step, _blocks, _rows, _range_mr */

/* R and NA per m: R * M * NA accumulators and R converted rows in 16 registers. */
AVX2_TARGET static inline __attribute__((always_inline)) void
avx2_range_t(const half_job *jb, int j0, int j1, const int BF)
{
    const int lng = jb->k >= HALF_LONG_K;
    /* clang-format off */
    switch (jb->m) {            /*          M  R  NA LONG */
    case 1:  avx2_range_mr(jb, j0, j1, 1, 1, 4, 0, BF); /* R = 1: no prefetch, long or not */
             break;
    case 2:  if (lng) avx2_range_mr(jb, j0, j1, 2, 4, 1, 1, BF);
             else     avx2_range_mr(jb, j0, j1, 2, 2, 2, 0, BF);
             break;
    case 3:  if (lng) avx2_range_mr(jb, j0, j1, 3, 3, 1, 1, BF);
             else     avx2_range_mr(jb, j0, j1, 3, 2, 1, 0, BF);
             break;
    case 4:  if (lng) avx2_range_mr(jb, j0, j1, 4, 2, 1, 1, BF);
             else     avx2_range_mr(jb, j0, j1, 4, 2, 1, 0, BF);
             break;
    case 5:  if (lng) avx2_range_mr(jb, j0, j1, 5, 2, 1, 1, BF);
             else     avx2_range_mr(jb, j0, j1, 5, 2, 1, 0, BF);
             break;
    case 6:  if (lng) avx2_range_mr(jb, j0, j1, 6, 2, 1, 1, BF);
             else     avx2_range_mr(jb, j0, j1, 6, 2, 1, 0, BF);
             break;
    default: avx2_range_mr(jb, j0, j1, 7, 1, 1, 0, BF);
             break;
    }
    /* clang-format on */
}

/* F32 weights: one row of W at a time (R = 1: one sequential stream, which the hardware
 * prefetcher follows; side by side rows were slower here, bench/RESULTS.md), NA
 * accumulators per output; up to CPU_GEMV_F32_MAX_ROWS rows of A in one pass (12
 * accumulators, W and x: 14 of the 16 registers). */
AVX2_TARGET static void avx2_range_f32(const half_job *jb, int j0, int j1)
{
    /* clang-format off */
    switch (jb->m) {                /*              M  R  NA LONG */
    case 1:  avx2_f32_range_mr(jb, j0, j1, 1, 1, 4, 0, 0); break;
    case 2:  avx2_f32_range_mr(jb, j0, j1, 2, 1, 2, 0, 0); break;
    case 3:  avx2_f32_range_mr(jb, j0, j1, 3, 1, 2, 0, 0); break;
    case 4:  avx2_f32_range_mr(jb, j0, j1, 4, 1, 2, 0, 0); break;
    case 5:  avx2_f32_range_mr(jb, j0, j1, 5, 1, 2, 0, 0); break;
    case 6:  avx2_f32_range_mr(jb, j0, j1, 6, 1, 2, 0, 0); break;
    case 7:  avx2_f32_range_mr(jb, j0, j1, 7, 1, 1, 0, 0); break;
    case 8:  avx2_f32_range_mr(jb, j0, j1, 8, 1, 1, 0, 0); break;
    case 9:  avx2_f32_range_mr(jb, j0, j1, 9, 1, 1, 0, 0); break;
    case 10: avx2_f32_range_mr(jb, j0, j1, 10, 1, 1, 0, 0); break;
    case 11: avx2_f32_range_mr(jb, j0, j1, 11, 1, 1, 0, 0); break;
    default: avx2_f32_range_mr(jb, j0, j1, 12, 1, 1, 0, 0); break;
    }
    /* clang-format on */
}

AVX2_TARGET static void avx2_range(const half_job *jb, int j0, int j1)
{
    avx2_range_t(jb, j0, j1, 0);
}

AVX2_TARGET static void avx2_range_bf(const half_job *jb, int j0, int j1)
{
    avx2_range_t(jb, j0, j1, 1);
}

/* ---- AVX-512 (F, BW, VL): 16 lanes, masked tails ---- */

#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

/* 16 halves (BF = 0) or bfloat16s (BF = 1) as floats */
AVX512_TARGET static inline __attribute__((always_inline)) __m512 avx512_cvt(__m256i h,
                                                                             const int BF)
{
    return BF ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
              : _mm512_cvtph_ps(h);
}

#define HALF_ISA       avx512
#define HALF_TARGET    AVX512_TARGET
#define HALF_LANES     16
#define HALF_VEC       __m512
#define HALF_ZERO      _mm512_setzero_ps
#define HALF_ADD       _mm512_add_ps
#define HALF_FMA       _mm512_fmadd_ps
#define HALF_HSUM      _mm512_reduce_add_ps
#define HALF_TAIL_T    __mmask16 /* the lanes: a load mask */
#define HALF_FULL      0xffff
#define HALF_TAIL(n)   ((__mmask16)((1u << (n)) - 1u))
#define HALF_W_T       uint16_t
#define HALF_JOB_W(jb) ((jb)->w)
#define HALF_LOAD_W(w, mk, BF)                                                                     \
    ((mk) == 0xffff ? avx512_cvt(_mm256_loadu_si256((const __m256i *)(w)), BF)                     \
                    : avx512_cvt(_mm256_maskz_loadu_epi16(mk, w), BF))
#define HALF_LOAD_X(x, mk) ((mk) == 0xffff ? _mm512_loadu_ps(x) : _mm512_maskz_loadu_ps(mk, x))
#define HALF_LAST_TYPE
#include "cpu_gemv_simd.inc" /* avx512_step, _blocks, _rows, _range_mr */

/* R and NA per m: R * M * NA accumulators, R converted rows and x in 32 registers; R = 4
 * on long rows (x is read from L2 there, once per R rows). Short rows with m <= 4 go to
 * the 8-lane kernel: the 16-lane conversion (vcvtph2ps zmm) is slow on some AVX-512
 * machines (Zen 4), where short rows stream faster with 8 lanes for m = 2..4, while 16
 * lanes win on long rows and for m = 6, 7 (bench/RESULTS.md). */
AVX512_TARGET static inline __attribute__((always_inline)) void
avx512_range_t(const half_job *jb, int j0, int j1, const int BF)
{
    if (jb->k < HALF_LONG_K && jb->m <= 4) {
        avx2_range_t(jb, j0, j1, BF);
        return;
    }
    const int lng = jb->k >= HALF_LONG_K;
    /* clang-format off */
    switch (jb->m) {            /*          M  R  NA LONG */
    case 1:  avx512_range_mr(jb, j0, j1, 1, 1, 2, 1, BF); /* R = 1: no prefetch */
             break;
    case 2:  avx512_range_mr(jb, j0, j1, 2, 4, 1, 1, BF);
             break;
    case 3:  avx512_range_mr(jb, j0, j1, 3, 4, 1, 1, BF);
             break;
    case 4:  avx512_range_mr(jb, j0, j1, 4, 4, 1, 1, BF);
             break;
    case 5:  if (lng) avx512_range_mr(jb, j0, j1, 5, 4, 1, 1, BF);
             else     avx512_range_mr(jb, j0, j1, 5, 2, 2, 0, BF);
             break;
    case 6:  if (lng) avx512_range_mr(jb, j0, j1, 6, 3, 1, 1, BF);
             else     avx512_range_mr(jb, j0, j1, 6, 2, 1, 0, BF);
             break;
    default: if (lng) avx512_range_mr(jb, j0, j1, 7, 3, 1, 1, BF);
             else     avx512_range_mr(jb, j0, j1, 7, 2, 1, 0, BF);
             break;
    }
    /* clang-format on */
}

AVX512_TARGET static void avx512_range(const half_job *jb, int j0, int j1)
{
    avx512_range_t(jb, j0, j1, 0);
}

AVX512_TARGET static void avx512_range_bf(const half_job *jb, int j0, int j1)
{
    avx512_range_t(jb, j0, j1, 1);
}

#endif /* CPU_X86 */

/* ---- the entry ---- */

/* Below this many weights a product runs on one thread: starting the team costs more
 * than streaming 64 KiB. */
#define HALF_PARALLEL_MIN ((size_t)1 << 15)

/* Threads take contiguous blocks of output columns, a multiple of this many (of R = 1, 2
 * and 4), so that a block starts on a group of rows. */
#define HALF_THREAD_ALIGN 8

int cpu_gemv_half_applies(const clf_gemm_args *a)
{
    return a->b_half.buf && !a->trans_a && a->trans_b && a->m >= 1 && a->m <= CPU_GEMV_MAX_ROWS &&
           a->k > 0;
}

int cpu_gemv_bf16_applies(const clf_gemm_args *a)
{
    /* with bf16_arith the copy is for the BF16 arithmetic only (clformer/backend.h) */
    return a->b_bf16.buf && !a->bf16_arith && !a->trans_a && a->trans_b && a->m >= 1 &&
           a->m <= CPU_GEMV_MAX_ROWS && a->k > 0;
}

/* jb's n output columns, on threads taking contiguous blocks of them. */
static void run_job(const clf_backend *be, const half_job *jb, int n,
                    void (*range)(const half_job *, int, int))
{
    int threads = (size_t)n * (size_t)jb->k >= HALF_PARALLEL_MIN ? be->threads : 1;
    int per = (n + threads - 1) / threads;
    per = (per + HALF_THREAD_ALIGN - 1) / HALF_THREAD_ALIGN * HALF_THREAD_ALIGN;
    threads = (n + per - 1) / per;
    if (threads <= 1) {
        range(jb, 0, n);
        return;
    }
#pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int t = 0; t < threads; t++) {
        const int j0 = t * per, j1 = j0 + per < n ? j0 + per : n;
        range(jb, j0, j1);
    }
}

/* a's job but for its W (w or wf) and bf16. */
static half_job job_of(const clf_gemm_args *a)
{
    return (half_job){.m = a->m,
                      .k = a->k,
                      .a = fptr(a->a),
                      .lda = (size_t)a->lda,
                      .ldw = (size_t)a->ldb,
                      .c = fptr(a->c),
                      .ldc = (size_t)a->ldc,
                      .alpha = a->alpha,
                      .beta = a->beta,
                      .bias = a->bias.buf ? fptr(a->bias) : NULL,
                      .relu = a->relu};
}

/* The product from 16-bit weights h (b_half, or b_bf16 with bf16 = 1). */
static clf_status gemv_16(clf_backend *be, const clf_gemm_args *a, clf_ptr h, int bf16)
{
    clf_status st = check_span_aligned(
        "gemm", bf16 ? "b_bf16" : "b_half", h,
        sizeof(uint16_t) * span2d((size_t)a->n, (size_t)a->k, (size_t)a->ldb), sizeof(uint16_t));
    if (st != CLF_OK)
        return st;
    half_job jb = job_of(a);
    jb.w = (const uint16_t *)(const void *)(h.buf->data + h.off);
    jb.bf16 = bf16;
    void (*range)(const half_job *, int, int) = generic_range;
#if CPU_X86
    if (be->isa == CPU_ISA_AVX512)
        range = bf16 ? avx512_range_bf : avx512_range;
    else if (be->isa == CPU_ISA_AVX2)
        range = bf16 ? avx2_range_bf : avx2_range;
#endif
    run_job(be, &jb, a->n, range);
    return CLF_OK;
}

int cpu_gemv_f32_applies(const clf_backend *be, const clf_gemm_args *a)
{
    return CPU_X86 && be->isa != CPU_ISA_GENERIC && !a->trans_a && a->trans_b && a->m >= 1 &&
           a->m <= CPU_GEMV_F32_MAX_ROWS && a->k > 0;
}

clf_status cpu_gemv_f32(clf_backend *be, const clf_gemm_args *a)
{
#if CPU_X86
    half_job jb = job_of(a);
    jb.wf = fptr(a->b);
    run_job(be, &jb, a->n, avx2_range_f32);
    return CLF_OK;
#else
    (void)be, (void)a;
    return clf_error(CLF_ERR_UNSUPPORTED, "cpu: gemm: no F32 few-row kernel on this CPU");
#endif
}

clf_status cpu_gemv_half(clf_backend *be, const clf_gemm_args *a)
{
    return gemv_16(be, a, a->b_half, 0);
}

clf_status cpu_gemv_bf16(clf_backend *be, const clf_gemm_args *a)
{
    return gemv_16(be, a, a->b_bf16, 1);
}
