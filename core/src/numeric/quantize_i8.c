/* Row-wise symmetric int8 quantization (clf_quantize_rows_i8, clformer/numeric.h): what
 * clformer quantize writes and what a model multiplies with at --weight-type int8. */
#include "clformer/numeric.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* fl(fl(127 s) / 127): the scale a row dequantized with s gets when quantized again */
static float i8_requantized_scale(float s)
{
    volatile float max = 127.0f * s; /* volatile: round to float here, not in a wider register */
    return max / 127.0f;
}

/* The row loops are compiled for AVX2 and AVX-512 too, the widest chosen at load (GCC's
 * target_clones), as the finiteness check of convert.c. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define QUANT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define QUANT_CLONES
#endif

/* max |x[p]| of finite values: the absolute values' bit patterns order as the values do,
 * so an integer maximum (which vectorizes, where a float one would not without fast-math)
 * gives it exactly. */
QUANT_CLONES static float row_absmax(const float *x, int64_t k)
{
    uint32_t m = 0;
    for (int64_t p = 0; p < k; p++) {
        uint32_t b;
        memcpy(&b, &x[p], sizeof b);
        b &= 0x7FFFFFFFu;
        m = b > m ? b : m;
    }
    float amax;
    memcpy(&amax, &m, sizeof amax);
    return amax;
}

/* q[p] = lrintf(x[p] / s) clamped to [-127, 127], s > 0: the quotient clamped first (127
 * is an integer, so the order does not matter), then rounded to nearest, ties to even, by
 * adding and taking away 1.5 * 2^23, which is exact below 2^22 and vectorizes where lrintf
 * is a call per element. */
QUANT_CLONES static void quantize_row(const float *x, int64_t k, float s, int8_t *q)
{
    const float shift = 12582912.0f;
    for (int64_t p = 0; p < k; p++) {
        float t = x[p] / s;
        t = t > 127.0f ? 127.0f : t;
        t = t < -127.0f ? -127.0f : t;
        q[p] = (int8_t)(int)((t + shift) - shift);
    }
}

int64_t clf_quantize_rows_i8(const float *w, int64_t rows, int64_t k, int8_t *q, float *scale)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *x = w + r * k;
        const int64_t bad = clf_first_nonfinite(x, (size_t)k);
        if (bad >= 0)
            return r * k + bad;
        const float amax = row_absmax(x, k);
        /* a scale that quantizing the dequantized row gives back (a few steps at most), so
         * that a quantized file loaded as F32 and quantized again is the same file */
        float s = amax / 127.0f;
        for (int it = 0; it < 4 && s != i8_requantized_scale(s); it++)
            s = i8_requantized_scale(s);
        scale[r] = s;
        if (s > 0.0f)
            quantize_row(x, k, s, q + r * k);
        else
            memset(q + r * k, 0, (size_t)k);
    }
    return -1;
}
