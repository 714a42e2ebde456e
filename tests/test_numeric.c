/* Tests of clformer/numeric.h's finite check: clf_first_nonfinite and
 * clf_tensor_to_f32_finite find the first NaN or infinity (any sign, any payload) wherever
 * it sits relative to the blocks they check in, and pass every finite value. (The F16 and
 * BF16 conversions themselves are tested in test_safetensors.c.) */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/numeric.h"
#include "testutil.h"

/* More than three of the check's 4096-element blocks, not a multiple of them. */
#define N (3 * 4096 + 5)

static float from_bits(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* Finite values of every kind: zeros, subnormals, the largest, both signs. */
static void fill_finite(float *x, size_t n)
{
    const float kinds[] = {0.0f,
                           -0.0f,
                           1.5f,
                           -2.25f,
                           FLT_MAX,
                           -FLT_MAX,
                           FLT_MIN,
                           from_bits(0x00000001u),
                           from_bits(0x807FFFFFu),
                           65504.0f,
                           1e-30f};
    for (size_t i = 0; i < n; i++)
        x[i] = kinds[i % (sizeof kinds / sizeof kinds[0])];
}

static const size_t positions[] = {0, 1, 7, 4095, 4096, 4097, 8191, 8192, N - 5, N - 1};

START_TEST(test_first_nonfinite)
{
    float *x = malloc(N * sizeof *x);
    fill_finite(x, N);
    ck_assert_int_eq(clf_first_nonfinite(x, N), -1);
    ck_assert_int_eq(clf_first_nonfinite(x, 0), -1);
    const float bad[] = {
        NAN, -NAN, INFINITY, -INFINITY, from_bits(0x7F800001u), from_bits(0xFFFFFFFFu)};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
        for (size_t p = 0; p < sizeof positions / sizeof positions[0]; p++) {
            const size_t at = positions[p];
            x[at] = bad[b];
            ck_assert_int_eq(clf_first_nonfinite(x, N), (int64_t)at);
            ck_assert_int_eq(clf_first_nonfinite(x, at), -1); /* n ends before it */
            if (at + 1 < N) {                                 /* the first of two */
                x[N - 1] = INFINITY;
                ck_assert_int_eq(clf_first_nonfinite(x, N), (int64_t)at);
            }
            fill_finite(x, N);
        }
    free(x);
}
END_TEST

START_TEST(test_tensor_to_f32_finite)
{
    float *x = malloc(N * sizeof *x), *dst = malloc(N * sizeof *dst);
    uint16_t *h = malloc(N * sizeof *h);
    clf_tensor t = {.name = "t", .ndim = 1, .shape = {N}};
    int64_t bad = 0;
    fill_finite(x, N);
    t.dtype = CLF_F32;
    t.data = x;
    t.nbytes = N * sizeof *x;
    CLF_ASSERT_OK(clf_tensor_to_f32_finite(&t, dst, &bad));
    ck_assert_int_eq(bad, -1);
    ck_assert(memcmp(dst, x, N * sizeof *x) == 0);
    for (size_t p = 0; p < sizeof positions / sizeof positions[0]; p++) {
        const size_t at = positions[p];
        /* F32 */
        fill_finite(x, N);
        x[at] = NAN;
        t.dtype = CLF_F32;
        t.data = x;
        CLF_ASSERT_OK(clf_tensor_to_f32_finite(&t, dst, &bad));
        ck_assert_int_eq(bad, (int64_t)at);
        ck_assert(isnan(dst[at]));
        /* F16 and BF16: small finite halves, one infinity */
        for (int k = 0; k < 2; k++) {
            for (size_t i = 0; i < N; i++)
                h[i] = (uint16_t)(0x3C00u + (i & 0xFFu)); /* finite in both */
            h[at] = k ? 0xFF80u : 0x7C00u;                /* -inf BF16, +inf F16 */
            t.dtype = k ? CLF_BF16 : CLF_F16;
            t.data = h;
            t.nbytes = N * sizeof *h;
            CLF_ASSERT_OK(clf_tensor_to_f32_finite(&t, dst, &bad));
            ck_assert_int_eq(bad, (int64_t)at);
            ck_assert(isinf(dst[at]));
            h[at] = 0x3C00u;
            CLF_ASSERT_OK(clf_tensor_to_f32_finite(&t, dst, &bad));
            ck_assert_int_eq(bad, -1);
        }
        t.nbytes = N * sizeof *x;
    }
    t.dtype = CLF_I32;
    ck_assert_int_eq(clf_tensor_to_f32_finite(&t, dst, &bad), CLF_ERR_INPUT);
    free(h);
    free(dst);
    free(x);
}
END_TEST

CLF_TEST_MAIN(clf_test_run, "numeric", "finite", test_first_nonfinite, test_tensor_to_f32_finite)
