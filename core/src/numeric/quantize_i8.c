/* Row-wise symmetric int8 quantization (clf_quantize_rows_i8, clformer/numeric.h): what
 * clformer quantize writes and what a model multiplies with at --weight-type int8. */
#include "clformer/numeric.h"

#include <math.h>

/* fl(fl(127 s) / 127): the scale a row dequantized with s gets when quantized again */
static float i8_requantized_scale(float s)
{
    volatile float max = 127.0f * s; /* volatile: round to float here, not in a wider register */
    return max / 127.0f;
}

int64_t clf_quantize_rows_i8(const float *w, int64_t rows, int64_t k, int8_t *q, float *scale)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *x = w + r * k;
        float amax = 0.0f;
        for (int64_t p = 0; p < k; p++) {
            if (!isfinite(x[p]))
                return r * k + p;
            amax = fabsf(x[p]) > amax ? fabsf(x[p]) : amax;
        }
        /* a scale that quantizing the dequantized row gives back (a few steps at most), so
         * that a quantized file loaded as F32 and quantized again is the same file */
        float s = amax / 127.0f;
        for (int it = 0; it < 4 && s != i8_requantized_scale(s); it++)
            s = i8_requantized_scale(s);
        scale[r] = s;
        for (int64_t p = 0; p < k; p++) {
            long v = s > 0.0f ? lrintf(x[p] / s) : 0;
            q[r * k + p] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
    return -1;
}
