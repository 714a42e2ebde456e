/* Number conversion of host tensors (clformer/numeric.h): IEEE half and bfloat16 to and
 * from float, exactly or rounded to nearest even, and whole tensors to F32 or I32. Tensor
 * data may be unaligned (a file mapping): it is read with memcpy. */
#include "clformer/numeric.h"

#include <math.h>
#include <string.h>

/* IEEE binary16 -> binary32, exact (subnormals, infinities, NaN payloads kept). */
static uint32_t half_to_float_bits(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
    if (exp == 0x1F)
        return sign | 0x7F800000u | (mant << 13);
    if (exp != 0)
        return sign | ((exp + 112) << 23) | (mant << 13);
    if (mant == 0)
        return sign;
    /* subnormal: mant * 2^-24; normalise so the leading one becomes the implicit bit */
    uint32_t e = 113; /* biased exponent of 2^-14 */
    while (!(mant & 0x400u)) {
        mant <<= 1;
        e--;
    }
    return sign | (e << 23) | ((mant & 0x3FFu) << 13);
}

float clf_half_to_float(uint16_t h)
{
    uint32_t bits = half_to_float_bits(h);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t clf_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t absx = x & 0x7FFFFFFFu;
    if (absx > 0x7F800000u) /* NaN: keep it a (quiet) NaN */
        return (uint16_t)(sign | 0x7E00u | ((absx >> 13) & 0x3FFu));
    if (absx >= 0x477FF000u) /* >= 65520 (ties to even round up) or infinity */
        return (uint16_t)(sign | 0x7C00u);
    if (absx >= 0x38800000u) { /* normal half: >= 2^-14 */
        /* rebias the exponent, then round the 13 dropped bits to nearest even; a carry
         * out of the mantissa correctly bumps the exponent */
        uint32_t h = (absx - 0x38000000u) >> 13, rest = absx & 0x1FFFu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    if (absx < 0x33000000u) /* below half the smallest subnormal (2^-25): zero */
        return sign;
    /* subnormal half: mant * 2^-24 with the implicit bit made explicit */
    const uint32_t e = absx >> 23, mant = (absx & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e; /* 14..24 */
    uint32_t h = mant >> shift, rest = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

int clf_float_fits_half(float f)
{
    return fabsf(f) < 65520.0f; /* false for NaN and infinities too */
}

uint16_t clf_float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: keep it a (quiet) NaN */
        return (uint16_t)((x >> 16) | 0x40u);
    /* round the 16 dropped bits to nearest even; a carry moves into the exponent */
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float clf_bf16_to_float(uint16_t h)
{
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

int clf_float_fits_bf16(float f)
{
    return isfinite(clf_bf16_to_float(clf_float_to_bf16(f)));
}

clf_status clf_tensor_to_f32(const clf_tensor *t, float *dst)
{
    int64_t n = clf_tensor_numel(t);
    const unsigned char *src = t->data;
    switch (t->dtype) {
    case CLF_F32:
        if (n)
            memcpy(dst, src, (size_t)n * sizeof(float));
        return CLF_OK;
    case CLF_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            uint32_t bits = half_to_float_bits(h);
            memcpy(&dst[i], &bits, 4);
        }
        return CLF_OK;
    case CLF_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            uint32_t bits = (uint32_t)h << 16;
            memcpy(&dst[i], &bits, 4);
        }
        return CLF_OK;
    default:
        return clf_error(CLF_ERR_INPUT, "tensor '%s' has dtype %s, expected F32, F16 or BF16",
                         t->name, clf_dtype_name(t->dtype));
    }
}

clf_status clf_tensor_to_i32(const clf_tensor *t, int32_t *dst)
{
    int64_t n = clf_tensor_numel(t);
    const unsigned char *src = t->data;
    switch (t->dtype) {
    case CLF_I32:
        if (n)
            memcpy(dst, src, (size_t)n * sizeof(int32_t));
        return CLF_OK;
    case CLF_I64:
        for (int64_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, src + 8 * i, 8);
            if (v < INT32_MIN || v > INT32_MAX)
                return clf_error(CLF_ERR_INPUT,
                                 "tensor '%s': element %lld is %lld, outside the int32 range",
                                 t->name, (long long)i, (long long)v);
            dst[i] = (int32_t)v;
        }
        return CLF_OK;
    case CLF_U8:
        for (int64_t i = 0; i < n; i++)
            dst[i] = src[i];
        return CLF_OK;
    case CLF_I8:
        for (int64_t i = 0; i < n; i++)
            dst[i] = (int8_t)src[i];
        return CLF_OK;
    default:
        return clf_error(CLF_ERR_INPUT, "tensor '%s' has dtype %s, expected I32, I64, U8 or I8",
                         t->name, clf_dtype_name(t->dtype));
    }
}
