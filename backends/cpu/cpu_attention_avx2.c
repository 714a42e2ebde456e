/* The few-query attention of cpu_attention (decoding: one query row per sentence, beam
 * and head) with AVX2 and FMA, chosen at run time (be->isa, cpu_isa_choose) because the
 * build targets baseline x86-64: there the compiler vectorises the portable loops for SSE2
 * only, 4 lanes and no fused multiply-add. These kernels do the same sums with 8 lanes and
 * FMA: the dot products q . k_j (the scores) and the weighted sum of the value rows. Only
 * the order of the additions differs from the portable loops (lanes, then a fixed
 * horizontal sum; FMA rounds once), so the results agree within float rounding. */
#include "cpu_internal.h"

#if CPU_X86
#include <immintrin.h>

#define ATTN_AVX2 __attribute__((target("avx2,fma")))

/* The lanes of a masked load/store holding the last rem (0 < rem < 8) columns of a row. */
ATTN_AVX2 static inline __m256i tail_mask(int rem)
{
    static const int32_t bits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(const void *)(bits + 8 - rem));
}

/* The dot products of q with the four rows k[0..3] (D columns). */
ATTN_AVX2 static inline __m128 dot4(const float *q, const float *const *k, int D, __m256i tm)
{
    const float *k0 = k[0], *k1 = k[1], *k2 = k[2], *k3 = k[3];
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int d = 0;
    for (; d + 8 <= D; d += 8) {
        const __m256 qv = _mm256_loadu_ps(q + d);
        a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + d), a0);
        a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k1 + d), a1);
        a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k2 + d), a2);
        a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k3 + d), a3);
    }
    if (d < D) {
        const __m256 qv = _mm256_maskload_ps(q + d, tm);
        a0 = _mm256_fmadd_ps(qv, _mm256_maskload_ps(k0 + d, tm), a0);
        a1 = _mm256_fmadd_ps(qv, _mm256_maskload_ps(k1 + d, tm), a1);
        a2 = _mm256_fmadd_ps(qv, _mm256_maskload_ps(k2 + d, tm), a2);
        a3 = _mm256_fmadd_ps(qv, _mm256_maskload_ps(k3 + d, tm), a3);
    }
    /* lanes of a0..a3 summed pairwise: h = {a0, a1, a2, a3} over the low 4 lanes, then the
     * same over the high 4 */
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

ATTN_AVX2 static inline float dot1(const float *q, const float *k, int D, __m256i tm)
{
    __m256 a = _mm256_setzero_ps();
    int d = 0;
    for (; d + 8 <= D; d += 8)
        a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), a);
    if (d < D)
        a = _mm256_fmadd_ps(_mm256_maskload_ps(q + d, tm), _mm256_maskload_ps(k + d, tm), a);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_hadd_ps(s, s);
    s = _mm_hadd_ps(s, s);
    return _mm_cvtss_f32(s);
}

ATTN_AVX2 void cpu_attn_scores_avx2(const float *q, size_t q_ld, int nr, const float *const *k,
                                    int D, int nk, int kp, float *s)
{
    const __m256i tm = tail_mask(D % 8 ? D % 8 : 8);
    for (int r = 0; r < nr; r++) {
        const float *qr = q + (size_t)r * q_ld;
        float *sr = s + (size_t)r * kp;
        int j = 0;
        for (; j + 4 <= nk; j += 4)
            _mm_storeu_ps(sr + j, dot4(qr, k + j, D, tm));
        for (; j < nk; j++)
            sr[j] = dot1(qr, k[j], D, tm);
    }
}

/* o[d0, d0 + 8 NA) = sum_j w[j] v[j][d0, d0 + 8 NA): NA accumulators of 8 columns in one
 * pass over the value rows, each key's weight broadcast once (NA a constant once inlined,
 * so that the accumulators stay in registers). */
ATTN_AVX2 static inline __attribute__((always_inline)) void
weigh_block(const float *w, int n, const float *const *v, int d0, const int NA, float *o)
{
    __m256 a[8];
    for (int i = 0; i < NA; i++)
        a[i] = _mm256_setzero_ps();
    for (int j = 0; j < n; j++) {
        if (w[j] == 0.0f)
            continue;
        const __m256 wj = _mm256_set1_ps(w[j]);
        const float *vj = v[j] + d0;
#pragma GCC unroll 8
        for (int i = 0; i < NA; i++)
            a[i] = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 8 * i), a[i]);
    }
    for (int i = 0; i < NA; i++)
        _mm256_storeu_ps(o + d0 + 8 * i, a[i]);
}

ATTN_AVX2 void cpu_attn_weigh_avx2(const float *w, int n, const float *const *v, int D, float *o)
{
    int d0 = 0;
    /* 64 columns (a head of the base model) in one pass over the value rows, so that each
     * row's 256 bytes are loaded together; then 32 */
    for (; d0 + 64 <= D; d0 += 64)
        weigh_block(w, n, v, d0, 8, o);
    for (; d0 + 32 <= D; d0 += 32)
        weigh_block(w, n, v, d0, 4, o);
    for (; d0 < D; d0 += 8) { /* the rest, 8 columns at a time, the last one masked */
        const __m256i tm = tail_mask(D - d0 < 8 ? D - d0 : 8);
        __m256 a = _mm256_setzero_ps();
        for (int j = 0; j < n; j++)
            if (w[j] != 0.0f)
                a = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), _mm256_maskload_ps(v[j] + d0, tm), a);
        _mm256_maskstore_ps(o + d0, tm, a);
    }
}

#endif /* CPU_X86: elsewhere cpu_attention never calls these */
