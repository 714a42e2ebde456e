/* The CPU backend's softmax and log-softmax over rows (the output layer's probabilities,
 * a beam search's log-probabilities) and argmax over rows (greedy decoding's next token).
 * shapes and operands: checked by the core (clformer/ops.h).
 *
 * The exponentials are computed in float by cpu_expf, in AVX2 or AVX-512 lanes where the
 * CPU has them (be->isa, chosen at run time because the build targets baseline x86-64), and
 * summed in double. libm's exp is a call per element: a beam search's log-softmax over 128 rows of
 * 8000 logits is a million exponentials a step (2.8 ms with libm's double exp on the
 * 2-core machine of bench/RESULTS.md). The lanes give the same values as cpu_expf (the same
 * operations, FMA rounding once), and their sums are added in another order than the
 * portable loop's (the same at AVX2 and AVX-512). */
#include <math.h>
#include <stdint.h>

#include "clformer/backend.h"
#include "cpu_internal.h"

#if CPU_X86
#include <immintrin.h>
#endif

/* e^x in float for the softmax rows, written so that a `#pragma omp simd` loop vectorises
 * it (libm's exp is a call per element: a beam search's log-softmax over 128 rows of 8000
 * logits took 2.8 ms a step with it). Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2
 * (n rounded with the 1.5 * 2^23 shift, which SSE2 has), Cephes' degree-6 polynomial for
 * e^r (relative error about 1e-7, 1-2 ulp), then 2^n through the exponent bits. Below
 * -87.3 the result is clamped to about 1e-38 (its exponent must stay normal), above 88.7
 * to about 3e38: softmax arguments are <= 0 (the row max is subtracted). NaN stays NaN. */
static inline float cpu_expf(float x)
{
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.7f ? 88.7f : x;
    const float shift = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float t = x * 1.44269504088896341f + shift;
    const float n = t - shift;
    float r = x - n * 0.693359375f; /* ln2 in two parts: exact product, then the rest */
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* the integer n sits in t's low mantissa bits; 2^n is (n + 127) << 23 as a float. In
     * unsigned arithmetic: for NaN (x - max of a row of -inf) the bits are no such integer,
     * and p, NaN, makes the result NaN whatever 2^n holds. */
    union {
        float f;
        uint32_t u;
    } u = {.f = t};
    u.u = (u.u - 0x4B400000u + 127u) << 23;
    return p * u.f;
}

#if CPU_X86

#define SOFTMAX_AVX2 __attribute__((target("avx2,fma")))

/* e^x lane by lane with cpu_expf's operations, W = 256 (exp8) or 512 (exp16, below):
 * one body, so that every level gives the same value per element */
#define EXP_LANES(NAME, W, TARGET)                                                                 \
    TARGET static inline __m##W NAME(__m##W x)                                                     \
    {                                                                                              \
        x = _mm##W##_max_ps(x, _mm##W##_set1_ps(-87.3f));                                          \
        x = _mm##W##_min_ps(x, _mm##W##_set1_ps(88.7f));                                           \
        const __m##W shift = _mm##W##_set1_ps(12582912.0f);                                        \
        const __m##W t = _mm##W##_fmadd_ps(x, _mm##W##_set1_ps(1.44269504088896341f), shift);      \
        const __m##W n = _mm##W##_sub_ps(t, shift);                                                \
        __m##W r = _mm##W##_fnmadd_ps(n, _mm##W##_set1_ps(0.693359375f), x);                       \
        r = _mm##W##_fnmadd_ps(n, _mm##W##_set1_ps(-2.12194440e-4f), r);                           \
        __m##W p = _mm##W##_set1_ps(1.9875691500e-4f);                                             \
        p = _mm##W##_fmadd_ps(p, r, _mm##W##_set1_ps(1.3981999507e-3f));                           \
        p = _mm##W##_fmadd_ps(p, r, _mm##W##_set1_ps(8.3334519073e-3f));                           \
        p = _mm##W##_fmadd_ps(p, r, _mm##W##_set1_ps(4.1665795894e-2f));                           \
        p = _mm##W##_fmadd_ps(p, r, _mm##W##_set1_ps(1.6666665459e-1f));                           \
        p = _mm##W##_fmadd_ps(p, r, _mm##W##_set1_ps(5.0000001201e-1f));                           \
        p = _mm##W##_fmadd_ps(_mm##W##_mul_ps(p, r), r,                                            \
                              _mm##W##_add_ps(r, _mm##W##_set1_ps(1.0f)));                         \
        const __m##W##i bits = _mm##W##_slli_epi32(                                                \
            _mm##W##_add_epi32(                                                                    \
                _mm##W##_sub_epi32(_mm##W##_castps_si##W(t), _mm##W##_set1_epi32(0x4B400000)),     \
                _mm##W##_set1_epi32(127)),                                                         \
            23);                                                                                   \
        return _mm##W##_mul_ps(p, _mm##W##_castsi##W##_ps(bits));                                  \
    }

EXP_LANES(exp8, 256, SOFTMAX_AVX2)

/* The sum of 8 lanes in double */
SOFTMAX_AVX2 static inline double hsum_pd(__m256 v)
{
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                  hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    const __m256d s = _mm256_add_pd(lo, hi);
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(h) + _mm_cvtsd_f64(_mm_unpackhi_pd(h, h));
}

SOFTMAX_AVX2 static double exp_sum_avx2(const float *x, int n, float mx)
{
    /* float lanes over blocks of 512 values (each e^(x - mx) <= 1), the blocks in double */
    const __m256 m = _mm256_set1_ps(mx);
    double sum = 0.0;
    int c = 0;
    while (c + 8 <= n) {
        __m256 acc = _mm256_setzero_ps();
        const int end = c + 512 < n ? c + 512 : n;
        for (; c + 8 <= end; c += 8)
            acc = _mm256_add_ps(acc, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + c), m)));
        sum += hsum_pd(acc);
    }
    for (; c < n; c++)
        sum += (double)cpu_expf(x[c] - mx);
    return sum;
}

SOFTMAX_AVX2 static void exp_scale_avx2(const float *x, int n, float mx, float scale, float *o)
{
    const __m256 m = _mm256_set1_ps(mx), s = _mm256_set1_ps(scale);
    int c = 0;
    for (; c + 8 <= n; c += 8)
        _mm256_storeu_ps(o + c, _mm256_mul_ps(exp8(_mm256_sub_ps(_mm256_loadu_ps(x + c), m)), s));
    for (; c < n; c++)
        o[c] = cpu_expf(x[c] - mx) * scale;
}

/* max_c x[c] as the scalar loop `m = x[c] > m ? x[c] : m` from m = x[0] gives it: maxps
 * is that expression lane by lane, so NaN is never taken unless x[0] is NaN, and then stays
 * (a maximum of +0 and -0 may come out with either sign: equal, and no result differs). */
SOFTMAX_AVX2 static float row_max_avx2(const float *x, int n)
{
    __m256 m = _mm256_set1_ps(x[0]);
    int c = 0;
    for (; c + 8 <= n; c += 8)
        m = _mm256_max_ps(_mm256_loadu_ps(x + c), m);
    float lane[8], mx = x[0];
    _mm256_storeu_ps(lane, m);
    for (int i = 0; i < 8; i++)
        mx = lane[i] > mx ? lane[i] : mx;
    for (; c < n; c++)
        mx = x[c] > mx ? x[c] : mx;
    return mx;
}

/* The index of the first maximum, as the scalar loop from best = 0 with `x[c] > x[best]`
 * gives it: each lane keeps its first maximum (a strict comparison, false for NaN), then
 * the lanes' largest value at the smallest index. */
SOFTMAX_AVX2 static int row_argmax_avx2(const float *x, int n)
{
    __m256 best = _mm256_set1_ps(x[0]);
    __m256i at = _mm256_setzero_si256(), idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i eight = _mm256_set1_epi32(8);
    int c = 0;
    for (; c + 8 <= n; c += 8, idx = _mm256_add_epi32(idx, eight)) {
        const __m256 v = _mm256_loadu_ps(x + c);
        const __m256 gt = _mm256_cmp_ps(v, best, _CMP_GT_OQ);
        best = _mm256_blendv_ps(best, v, gt);
        at = _mm256_castps_si256(
            _mm256_blendv_ps(_mm256_castsi256_ps(at), _mm256_castsi256_ps(idx), gt));
    }
    float lv[8];
    int32_t li[8];
    _mm256_storeu_ps(lv, best);
    _mm256_storeu_si256((__m256i *)(void *)li, at);
    int b = 0;
    for (int i = 0; i < 8; i++)
        if (lv[i] > x[b] || (lv[i] == x[b] && li[i] < b))
            b = li[i];
    for (; c < n; c++)
        if (x[c] > x[b])
            b = c;
    return b;
}

/* ---- AVX-512: 16 lanes, the same values ----
 * exp16 is exp8's body on twice the lanes (the same value per element);
 * the sums keep AVX2's order (8 float lanes, each adding its elements in column order, a
 * double sum per block of 512), so exp_sum gives the same double at either level: a log-
 * softmax does not depend on the machine's vector width. */

#define SOFTMAX_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))

EXP_LANES(exp16, 512, SOFTMAX_AVX512)

SOFTMAX_AVX512 static double exp_sum_avx512(const float *x, int n, float mx)
{
    const __m512 m = _mm512_set1_ps(mx);
    double sum = 0.0;
    int c = 0;
    while (c + 8 <= n) {
        __m256 acc = _mm256_setzero_ps();
        const int end = c + 512 < n ? c + 512 : n;
        for (; c + 16 <= end; c += 16) {
            const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + c), m));
            acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
            acc = _mm256_add_ps(acc,
                                _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
        }
        if (c + 8 <= end) {
            acc =
                _mm256_add_ps(acc, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + c), _mm256_set1_ps(mx))));
            c += 8;
        }
        sum += hsum_pd(acc);
    }
    for (; c < n; c++)
        sum += (double)cpu_expf(x[c] - mx);
    return sum;
}

/* as row_max_avx2 (maxps keeps its second operand when either is NaN) */
SOFTMAX_AVX512 static float row_max_avx512(const float *x, int n)
{
    __m512 m = _mm512_set1_ps(x[0]);
    int c = 0;
    for (; c + 16 <= n; c += 16)
        m = _mm512_max_ps(_mm512_loadu_ps(x + c), m);
    float lane[16], mx = x[0];
    _mm512_storeu_ps(lane, m);
    for (int i = 0; i < 16; i++)
        mx = lane[i] > mx ? lane[i] : mx;
    for (; c < n; c++)
        mx = x[c] > mx ? x[c] : mx;
    return mx;
}

#endif /* CPU_X86 */

/* max_c x[c], c < n (n >= 1): NaN only when x[0] is NaN (see row_max_avx2) */
static inline float row_max(cpu_isa isa, const float *x, int n)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512)
        return row_max_avx512(x, n);
    if (isa == CPU_ISA_AVX2)
        return row_max_avx2(x, n);
#endif
    (void)isa;
    float mx = x[0];
    for (int c = 1; c < n; c++)
        mx = x[c] > mx ? x[c] : mx;
    return mx;
}

/* sum_c e^(x[c] - mx), c < n: in SIMD lanes from the AVX2 level on (x86 only; the same sum at
 * AVX2 and AVX-512), else cpu_expf in order. */
static inline double exp_sum(cpu_isa isa, const float *x, int n, float mx)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512)
        return exp_sum_avx512(x, n, mx);
    if (isa == CPU_ISA_AVX2)
        return exp_sum_avx2(x, n, mx);
#endif
    (void)isa;
    double sum = 0.0;
    for (int c = 0; c < n; c++)
        sum += (double)cpu_expf(x[c] - mx);
    return sum;
}

/* o[c] = e^(x[c] - mx) * scale, c < n, as exp_sum chooses. */
static inline void exp_scale(cpu_isa isa, const float *x, int n, float mx, float scale, float *o)
{
#if CPU_X86
    if (isa != CPU_ISA_GENERIC) {
        exp_scale_avx2(x, n, mx, scale, o);
        return;
    }
#endif
    (void)isa;
    for (int c = 0; c < n; c++)
        o[c] = cpu_expf(x[c] - mx) * scale;
}

/* log(sum_c e^(x[c] - mx)) with mx = row_max: what log_softmax subtracts, here and in topk's
 * log_softmax form, so that the two give the same values. */
static inline float row_log_sum_exp(cpu_isa isa, const float *x, int n, float *mx)
{
    *mx = row_max(isa, x, n);
    return (float)log(exp_sum(isa, x, n, *mx));
}

clf_status cpu_softmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols, int use_log)
{
    const float *X = fptr(x);
    float *O = fptr(out);
    const cpu_isa isa = be->isa;
#pragma omp parallel for num_threads(be->threads)                                                  \
    schedule(static) if ((size_t)rows * cols > CPU_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *xr = X + (size_t)r * cols;
        float *orow = O + (size_t)r * cols;
        float mx;
        if (use_log) {
            const float lse = row_log_sum_exp(isa, xr, cols, &mx);
#pragma omp simd
            for (int c = 0; c < cols; c++)
                orow[c] = (xr[c] - mx) - lse;
        } else {
            mx = row_max(isa, xr, cols);
            exp_scale(isa, xr, cols, mx, (float)(1.0 / exp_sum(isa, xr, cols, mx)), orow);
        }
    }
    return CLF_OK;
}

clf_status cpu_argmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols)
{
    const float *X = fptr(x);
    int32_t *O = iptr(out);
    const int avx2 = be->isa != CPU_ISA_GENERIC;
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((size_t)rows * cols > 65536)
    for (int r = 0; r < rows; r++) {
        const float *xr = X + (size_t)r * cols;
        int best = 0;
#if CPU_X86
        if (avx2) {
            O[r] = row_argmax_avx2(xr, cols);
            continue;
        }
#else
        (void)avx2;
#endif
        for (int c = 1; c < cols; c++)
            if (xr[c] > xr[best])
                best = c;
        O[r] = best;
    }
    return CLF_OK;
}

/* v at a later column than w's goes before it (clf_topk_args' order: larger first, NaN
 * last; of equal values the earlier column, so a later one never goes before). */
static inline int later_before(float v, float w)
{
    return v > w || (isnan(w) && !isnan(v));
}

#define TOPK_BLOCK 64

/* The value topk ranks: base + x, or with log_softmax base + ((x - mx) - lse), the
 * log-probability exactly as cpu_softmax writes it. */
#define TOPK_VALUE(log, base, x, mx, lse) ((log) ? (base) + (((x) - (mx)) - (lse)) : (base) + (x))

/* Row r's best k of TOPK_VALUE, kept sorted while the row is read once: a block of columns
 * none of which would enter is passed over in one vectorised test. Inlined with log a
 * constant, so each form has its own loops. */
static inline __attribute__((always_inline)) void topk_row(const float *xr, float base, int log,
                                                           float mx, float lse, int cols, int k,
                                                           float *val, int32_t *idx)
{
    int have = 0;
    for (int c0 = 0; c0 < cols; c0 += TOPK_BLOCK) {
        const int c1 = c0 + TOPK_BLOCK < cols ? c0 + TOPK_BLOCK : cols;
        if (have == k && !isnan(val[k - 1])) {
            const float worst = val[k - 1];
            int enters = 0;
#pragma omp simd reduction(| : enters)
            for (int c = c0; c < c1; c++)
                enters |= TOPK_VALUE(log, base, xr[c], mx, lse) > worst;
            if (!enters)
                continue;
        }
        for (int c = c0; c < c1; c++) {
            const float v = TOPK_VALUE(log, base, xr[c], mx, lse);
            if (have == k && !later_before(v, val[k - 1]))
                continue;
            int i = have < k ? have++ : k - 1;
            while (i > 0 && later_before(v, val[i - 1])) {
                val[i] = val[i - 1];
                idx[i] = idx[i - 1];
                i--;
            }
            val[i] = v;
            idx[i] = c;
        }
    }
}

/* topk_row at each kernel level: its vectorised test of a block is most of a row's time
 * (the same values and comparisons at every level) */
#define TOPK_ROWS(SUFFIX, TARGET)                                                                  \
    TARGET static void topk_row_##SUFFIX(const float *xr, float base, int log, float mx,           \
                                         float lse, int cols, int k, float *val, int32_t *idx)     \
    {                                                                                              \
        if (log)                                                                                   \
            topk_row(xr, base, 1, mx, lse, cols, k, val, idx);                                     \
        else                                                                                       \
            topk_row(xr, base, 0, 0.0f, 0.0f, cols, k, val, idx);                                  \
    }

TOPK_ROWS(generic, )
#if CPU_X86
TOPK_ROWS(avx2, SOFTMAX_AVX2)
TOPK_ROWS(avx512, SOFTMAX_AVX512)
#endif

clf_status cpu_topk(clf_backend *be, const clf_topk_args *a)
{
    const float *X = fptr(a->x), *base = a->base.buf ? fptr(a->base) : NULL;
    float *val = fptr(a->val);
    int32_t *idx = iptr(a->idx);
    const int k = a->k, cols = a->cols, log = a->log_softmax;
    const cpu_isa isa = be->isa;
#pragma omp parallel for num_threads(be->threads)                                                  \
    schedule(static) if ((size_t)a->rows * cols > 65536)
    for (int r = 0; r < a->rows; r++) {
        const float *xr = X + (size_t)r * cols, b = base ? base[r] : 0.0f;
        float *vr = val + (size_t)r * k;
        int32_t *ir = idx + (size_t)r * k;
        float mx = 0.0f, lse = 0.0f;
        if (log)
            lse = row_log_sum_exp(isa, xr, cols, &mx);
#if CPU_X86
        if (isa == CPU_ISA_AVX512)
            topk_row_avx512(xr, b, log, mx, lse, cols, k, vr, ir);
        else if (isa == CPU_ISA_AVX2)
            topk_row_avx2(xr, b, log, mx, lse, cols, k, vr, ir);
        else
#endif
            topk_row_generic(xr, b, log, mx, lse, cols, k, vr, ir);
    }
    return CLF_OK;
}
