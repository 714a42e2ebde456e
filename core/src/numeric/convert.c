/* Number conversion of host tensors (clformer/numeric.h): IEEE half and bfloat16 to and
 * from float, exactly or rounded to nearest even, and whole tensors to F32 or I32. Tensor
 * data may be unaligned (a file mapping): it is read with memcpy. */
#include "clformer/numeric.h"

#include <math.h>
#include <string.h>

#include "numeric/numeric_internal.h"

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

/* dst[0..n) = the n elements at src (dtype dt: F32, F16 or BF16) as floats. */
static void to_f32_block(clf_dtype dt, const unsigned char *src, size_t n, float *dst)
{
    switch (dt) {
    case CLF_F32:
        if (n)
            memcpy(dst, src, n * sizeof(float));
        break;
    case CLF_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            uint32_t bits = half_to_float_bits(h);
            memcpy(&dst[i], &bits, 4);
        }
        break;
    case CLF_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            uint32_t bits = (uint32_t)h << 16;
            memcpy(&dst[i], &bits, 4);
        }
        break;
    default:
        break;
    }
}

/* The check's two loops are compiled for AVX2 and AVX-512 too, the widest chosen at load
 * (GCC's target_clones): wider vectors test more values per instruction. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CHECK_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CHECK_CLONES
#endif

/* Elements converted, then checked, at a time: 16 KiB of floats, still in L1 when the
 * check reads them. */
#define FINITE_BLOCK 4096

/* Nonzero when one of x[0..n) is NaN or an infinity. Their exponent bits are all ones, so
 * adding one to the exponent field carries into the sign bit; OR-ed over the block with
 * no branch per element, which GCC vectorizes. */
CHECK_CLONES static uint32_t any_nonfinite(const float *x, size_t n)
{
    uint32_t any = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], sizeof b);
        any |= (b & 0x7F800000u) + 0x00800000u;
    }
    return any & 0x80000000u;
}

/* dst[0..n) = the n F32 values at src; nonzero when one of them is NaN or an infinity (the
 * test of any_nonfinite, made as each value passes: the copy's loads and stores bound the
 * loop, so the test costs next to nothing). */
CHECK_CLONES static uint32_t copy_f32_checked(const unsigned char *src, size_t n, float *dst)
{
    uint32_t any = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, src + 4 * i, sizeof b);
        memcpy(&dst[i], &b, sizeof b);
        any |= (b & 0x7F800000u) + 0x00800000u;
    }
    return any & 0x80000000u;
}

int64_t clf_first_nonfinite(const float *x, size_t n)
{
    for (size_t at = 0; at < n; at += FINITE_BLOCK) {
        const size_t len = n - at < FINITE_BLOCK ? n - at : FINITE_BLOCK;
        if (!any_nonfinite(x + at, len))
            continue;
        for (size_t i = at; i < at + len; i++) /* the block that holds one: find it */
            if (!isfinite(x[i]))
                return (int64_t)i;
    }
    return -1;
}

static clf_status tensor_to_f32(const clf_tensor *t, float *dst, int64_t *first_nonfinite)
{
    if (t->dtype != CLF_F32 && t->dtype != CLF_F16 && t->dtype != CLF_BF16)
        return clf_error(CLF_ERR_INPUT, "tensor '%s' has dtype %s, expected F32, F16 or BF16",
                         t->name, clf_dtype_name(t->dtype));
    const size_t n = (size_t)clf_tensor_numel(t), size = clf_dtype_size(t->dtype);
    const unsigned char *src = t->data;
    if (!first_nonfinite) {
        to_f32_block(t->dtype, src, n, dst);
        return CLF_OK;
    }
    *first_nonfinite = -1;
    for (size_t at = 0; at < n; at += FINITE_BLOCK) {
        const size_t len = n - at < FINITE_BLOCK ? n - at : FINITE_BLOCK;
        if (t->dtype == CLF_F32) { /* copied and checked in one loop */
            if (!copy_f32_checked(src + at * size, len, dst + at))
                continue;
        } else {
            to_f32_block(t->dtype, src + at * size, len, dst + at);
        }
        const int64_t bad = clf_first_nonfinite(dst + at, len);
        if (bad >= 0) {
            *first_nonfinite = (int64_t)at + bad;
            break;
        }
    }
    return CLF_OK;
}

clf_status clf_tensor_to_f32(const clf_tensor *t, float *dst)
{
    return tensor_to_f32(t, dst, NULL);
}

clf_status clf_tensor_to_f32_finite(const clf_tensor *t, float *dst, int64_t *first_nonfinite)
{
    return tensor_to_f32(t, dst, first_nonfinite);
}

const char *clf_nonfinite_name(float x)
{
    return isnan(x) ? "NaN" : !isinf(x) ? NULL : x > 0 ? "Inf" : "-Inf";
}

/* The largest magnitude that rounds to a finite value of dt (F16, BF16). */
static float lowp_bound(clf_dtype dt)
{
    const uint32_t bf16_bound = 0x7F7F8000u; /* halfway past the largest bfloat16 */
    float b;
    memcpy(&b, &bf16_bound, sizeof b);
    return dt == CLF_F16 ? 65520.0f : b;
}

clf_status clf_unfit_error(const char *file, const char *name, int64_t index, float x, clf_dtype dt)
{
    const char *what = clf_nonfinite_name(x);
    if (what)
        return clf_error(CLF_ERR_INPUT,
                         "%s%s '%s' element %lld is %s: the weights hold a non-finite value (a "
                         "broken model, not a value beyond %s's range)",
                         file ? file : "weights:", file ? ": tensor" : "", name, (long long)index,
                         what, clf_dtype_name(dt));
    return clf_error(CLF_ERR_INPUT,
                     "%s%s '%s' element %lld is %g, beyond %s's range (|x| < %g): use F32 "
                     "weights for this model",
                     file ? file : "weights:", file ? ": tensor" : "", name, (long long)index,
                     (double)x, clf_dtype_name(dt), (double)lowp_bound(dt));
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
