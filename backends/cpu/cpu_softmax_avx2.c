/* The softmax op's rows with AVX2 and FMA, chosen at run time (be->isa) as the attention
 * kernels are: e^x with cpu_expf's reduction and polynomial (cpu_internal.h), 8 lanes at a
 * time, where libm's exp is a call per element. A beam search's log-softmax over 128 rows
 * of 8000 logits is a million exponentials a step (2.8 ms with libm's double exp on the
 * 2-core machine of bench/RESULTS.md). The lanes give the same values as cpu_expf (the
 * same operations, FMA rounding once), and the sums are added in a different order. */
#include "cpu_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define SOFTMAX_AVX2 __attribute__((target("avx2,fma")))

/* e^x for 8 lanes (cpu_expf) */
SOFTMAX_AVX2 static inline __m256 exp8(__m256 x)
{
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
    x = _mm256_min_ps(x, _mm256_set1_ps(88.7f));
    const __m256 shift = _mm256_set1_ps(12582912.0f);
    const __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), shift);
    const __m256 n = _mm256_sub_ps(t, shift);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i bits = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B400000)),
                         _mm256_set1_epi32(127)),
        23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

/* The sum of 8 lanes in double */
SOFTMAX_AVX2 static inline double hsum_pd(__m256 v)
{
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                  hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    const __m256d s = _mm256_add_pd(lo, hi);
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(h) + _mm_cvtsd_f64(_mm_unpackhi_pd(h, h));
}

SOFTMAX_AVX2 double cpu_exp_sum_avx2(const float *x, int n, float mx)
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

SOFTMAX_AVX2 void cpu_exp_scale_avx2(const float *x, int n, float mx, float scale, float *o)
{
    const __m256 m = _mm256_set1_ps(mx), s = _mm256_set1_ps(scale);
    int c = 0;
    for (; c + 8 <= n; c += 8)
        _mm256_storeu_ps(o + c, _mm256_mul_ps(exp8(_mm256_sub_ps(_mm256_loadu_ps(x + c), m)), s));
    for (; c < n; c++)
        o[c] = cpu_expf(x[c] - mx) * scale;
}

#else /* not x86: cpu_isa_choose never picks AVX2, so these are never called */

double cpu_exp_sum_avx2(const float *x, int n, float mx)
{
    double sum = 0.0;
    for (int c = 0; c < n; c++)
        sum += (double)cpu_expf(x[c] - mx);
    return sum;
}

void cpu_exp_scale_avx2(const float *x, int n, float mx, float scale, float *o)
{
    for (int c = 0; c < n; c++)
        o[c] = cpu_expf(x[c] - mx) * scale;
}
#endif
