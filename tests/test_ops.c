/* The CPU backend's ops, one by one, against naive references computed here in double
 * precision, on awkward sizes (1, 7, 33, 65, 129), padded leading dimensions and the
 * aliasing the ABI allows. Tolerances (relative: max abs error / max abs reference):
 *   gemm, attention         1e-5  (float accumulation over k or kv_len terms)
 *   gemm from b_half        1e-5 of the sum of |terms| of each output (|alpha| sum_k
 *                                 |a b|, |beta c|, |bias|), against the product with
 *                                 the F16-rounded B: float accumulation over k terms
 *   layernorm, softmax      1e-5
 *   embed, add              1e-6  (one or two roundings)
 *   argmax, topk            exact (topk's sums are one F32 addition each, made here too)
 *   beam_choose             exact (comparisons only) */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/backend.h"
#include "clformer/numeric.h"
#include "clformer/tensor.h"
#include "testutil.h"

static const clf_backend_api *api;
static clf_backend *be;

static void setup(void)
{
    clf_test_open_backend("cpu", &api, &be);
}
static void teardown(void)
{
    if (api && be)
        api->close(be);
    be = NULL;
}

static float *fvec(size_t n, unsigned seed)
{
    return clf_test_frand(n, seed, -1.0f, 1.0f);
}

static clf_ptr P(clf_buffer *b)
{
    return (clf_ptr){b, 0};
}

static void download(clf_buffer *b, void *host, size_t bytes)
{
    CLF_ASSERT_OK(api->download(be, host, P(b), bytes));
}

/* ---- gemm ---- */

/* m <= 7 runs as matrix-vector products on the CPU backend, cut into ~1 MiB blocks of B:
 * {3, 1031, 263} spans two blocks, {8, 9, 10} is the first SGEMM. */
static const int gemm_shapes[][3] = {{1, 1, 1},     {1, 65, 33},   {1, 129, 7},  {2, 7, 33},
                                     {7, 33, 65},   {8, 9, 10},    {129, 7, 33}, {65, 129, 1},
                                     {33, 65, 129}, {3, 1031, 263}};

/* Runs one gemm (batch 1) or strided batched gemm against the reference. */
static void check_gemm(int batch, int ta, int tb, const int *mnk, int with_bias, int relu,
                       float alpha, float beta)
{
    int m = mnk[0], n = mnk[1], k = mnk[2];
    clf_gemm_args g = {.trans_a = ta,
                       .trans_b = tb,
                       .m = m,
                       .n = n,
                       .k = k,
                       .alpha = alpha,
                       .beta = beta,
                       .relu = relu,
                       .batch = batch};
    g.lda = (ta ? m : k) + 3;
    g.ldb = (tb ? k : n) + 1;
    g.ldc = n + 2;
    size_t sa = (size_t)(ta ? k : m) * g.lda, sb = (size_t)(tb ? n : k) * g.ldb,
           sc = (size_t)m * g.ldc;
    g.stride_a = sa + 5;
    g.stride_b = sb;
    g.stride_c = sc + 1;
    size_t na = g.stride_a * batch, nb = g.stride_b * batch, nc = g.stride_c * batch;
    float *A = fvec(na, 1), *B = fvec(nb, 2), *C = fvec(nc, 3), *bias = fvec(n, 4);
    float *want = malloc(nc * sizeof *want), *got = malloc(nc * sizeof *got);
    if (beta == 0.0f) /* beta = 0 must not read C: NaN there must not leak into the result */
        for (int b = 0; b < batch; b++)
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++)
                    C[b * g.stride_c + (size_t)i * g.ldc + j] = NAN;
    memcpy(want, C, nc * sizeof *C);
    clf_buffer *dA = clf_test_upload(api, be, A, na * 4), *dB = clf_test_upload(api, be, B, nb * 4);
    clf_buffer *dC = clf_test_upload(api, be, C, nc * 4),
               *dbias = clf_test_upload(api, be, bias, n * 4);
    g.a = P(dA);
    g.b = P(dB);
    g.c = P(dC);
    if (with_bias)
        g.bias = P(dbias);
    clf_test_ref_gemm(&g, batch, A, B, with_bias ? bias : NULL, want);
    if (batch == 1 && (ta + tb + m) % 2 == 0)
        CLF_ASSERT_OK(api->gemm(be, &g));
    else
        CLF_ASSERT_OK(api->gemm_strided_batched(be, &g));
    download(dC, got, nc * 4);
    double e = clf_test_rel_err(got, want, nc);
    ck_assert_msg(e <= 1e-5, "gemm batch=%d ta=%d tb=%d m=%d n=%d k=%d bias=%d relu=%d: rel err %g",
                  batch, ta, tb, m, n, k, with_bias, relu, e);
    api->free(be, dA);
    api->free(be, dB);
    api->free(be, dC);
    api->free(be, dbias);
    free(A);
    free(B);
    free(C);
    free(bias);
    free(want);
    free(got);
}

/* A NULL argument struct is refused with a message, never dereferenced (the OpenCL
 * backend's twin check is in test_opencl_errors). */
START_TEST(null_arguments_are_refused)
{
    clf_test_refuses_null_args(api, be, "cpu");
}
END_TEST

/* C overlapping what the product reads is refused (core/src/runtime/backend_checks.c; the
 * OpenCL backend's twin is in test_opencl_lifecycle). */
START_TEST(gemm_refuses_c_over_its_inputs)
{
    clf_test_refuses_gemm_overlap(api, be, "cpu");
}
END_TEST

START_TEST(gemm_all_transposes_and_epilogues)
{
    for (size_t s = 0; s < sizeof gemm_shapes / sizeof gemm_shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                check_gemm(1, ta, tb, gemm_shapes[s], 0, 0, 1.0f, 0.0f);
                check_gemm(1, ta, tb, gemm_shapes[s], 1, 1, 0.7f, 0.3f);
                check_gemm(1, ta, tb, gemm_shapes[s], 1, 0, 1.0f, 1.0f);
            }
}
END_TEST

START_TEST(gemm_strided_batched_matches_per_matrix_reference)
{
    for (size_t s = 0; s < sizeof gemm_shapes / sizeof gemm_shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            check_gemm(3, t & 1, t >> 1, gemm_shapes[s], t == 2, t == 3, 0.5f,
                       t == 1 ? 1.0f : 0.0f);
}
END_TEST

/* ---- gemm from the F16 copy of B (b_half) ---- */

/* The kernel levels CLF_CPU_ISA may ask for, lowest first. */
static const char *const isa_levels[] = {"generic", "avx2", "avx512"};

/* A cpu backend opened with CLF_CPU_ISA=isa and threads threads, or NULL when this CPU
 * lacks that level (the variable is a cap: the backend then says it took a lower one). */
static clf_backend *open_isa(const char *isa, int threads)
{
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .threads = threads};
    clf_backend *b = NULL;
    ck_assert_int_eq(setenv("CLF_CPU_ISA", isa, 1), 0);
    clf_status st = api->open(&o, &b);
    unsetenv("CLF_CPU_ISA");
    CLF_ASSERT_OK(st);
    char desc[512], want[64];
    CLF_ASSERT_OK(api->describe(b, desc, sizeof desc));
    snprintf(want, sizeof want, "F16 GEMV %s", isa);
    if (strstr(desc, want))
        return b;
    ck_assert_msg(strstr(desc, "F16 GEMV "), "describe names no F16 GEMV level: %s", desc);
    api->close(b);
    return NULL;
}

#define HALF_MAX_BACKENDS 6 /* every level, with 1 and 2 threads */

typedef struct half_backends {
    int count;
    clf_backend *be[HALF_MAX_BACKENDS];
    const char *isa[HALF_MAX_BACKENDS];
    int threads[HALF_MAX_BACKENDS];
} half_backends;

/* One backend per kernel level this CPU has and per thread count in {1, 2}. */
static void open_half_backends(half_backends *hb)
{
    memset(hb, 0, sizeof *hb);
    for (size_t l = 0; l < sizeof isa_levels / sizeof isa_levels[0]; l++)
        for (int t = 1; t <= 2; t++) {
            clf_backend *b = open_isa(isa_levels[l], t);
            if (!b)
                continue;
            hb->be[hb->count] = b;
            hb->isa[hb->count] = isa_levels[l];
            hb->threads[hb->count++] = t;
        }
    ck_assert_msg(hb->count >= 2, "not even the generic level opened");
}

static void close_half_backends(half_backends *hb)
{
    for (int i = 0; i < hb->count; i++)
        api->close(hb->be[i]);
}

/* One product from b_half (f32 0) or from the F32 b alone (f32 1: the few-row F32 kernels,
 * OpenBLAS at the generic level) on every backend of hb. Layouts: A [m, k] (lda = k + 3),
 * B [n, k] (ldb = k + 5, for b and b_half alike), C [m, n] (ldc = n + 2), each at an
 * offset into its buffer (b_half at an odd number of halves, so not 4-byte aligned). From
 * b_half, b holds 2 B + 1, not B: a kernel that read it instead of b_half would be far off.
 * With beta = 0 C starts as NaN, which must not leak into the result. Checks every float
 * of the C buffer (the padding must stay as it was), and that the threads do not change a
 * bit (of the backend's own kernels). */
static void check_gemm_rows(const half_backends *hb, int f32, int m, int n, int k, float alpha,
                            float beta, int with_bias, int relu)
{
    const int lda = k + 3, ldb = k + 5, ldc = n + 2;
    const size_t off_a = 7, off_b = 5, off_h = 3, off_c = 1, off_bias = 2; /* elements */
    const size_t na = off_a + (size_t)m * lda, nb = off_b + (size_t)n * ldb,
                 nh = off_h + (size_t)n * ldb, nc = off_c + (size_t)m * ldc, nbias = off_bias + n;
    float *A = fvec(na, 11), *B = fvec(nb, 12), *C = fvec(nc, 13), *bias = fvec(nbias, 14);
    float *B2 = malloc(nb * sizeof *B2), *want = malloc(nc * sizeof *want);
    float *got = malloc(nc * sizeof *got), *first = malloc(nc * sizeof *first);
    double *tol = clf_test_dalloc(nc);
    uint16_t *H = calloc(nh, sizeof *H);
    float *Hf = calloc(nh, sizeof *Hf); /* the halves of H as floats */
    ck_assert(B2 && want && got && first && H && Hf);
    for (size_t e = 0; e < nb; e++)
        B2[e] = f32 ? B[e] : 2.0f * B[e] + 1.0f;
    for (int j = 0; j < n; j++)
        for (int p = 0; p < k; p++) {
            size_t e = off_h + (size_t)j * ldb + p;
            H[e] = clf_float_to_half(B[off_b + (size_t)j * ldb + p]);
            Hf[e] = f32 ? B[off_b + (size_t)j * ldb + p] : clf_half_to_float(H[e]);
        }
    if (beta == 0.0f)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                C[off_c + (size_t)i * ldc + j] = NAN;
    memcpy(want, C, nc * sizeof *C);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0, mag = 0.0;
            for (int p = 0; p < k; p++) {
                double t = (double)A[off_a + (size_t)i * lda + p] * Hf[off_h + (size_t)j * ldb + p];
                s += t;
                mag += fabs(t);
            }
            float *c = &want[off_c + (size_t)i * ldc + j];
            double v = alpha * s;
            mag *= fabs(alpha);
            if (beta != 0.0f) {
                v += (double)beta * *c;
                mag += fabs((double)beta * *c);
            }
            if (with_bias) {
                v += bias[off_bias + j];
                mag += fabs(bias[off_bias + j]);
            }
            *c = (float)(relu && v < 0.0 ? 0.0 : v);
            tol[off_c + (size_t)i * ldc + j] = 1e-5 * mag;
        }
    for (int bi = 0; bi < hb->count; bi++) {
        clf_backend *b = hb->be[bi];
        clf_buffer *dA = NULL, *dB = NULL, *dH = NULL, *dC = NULL, *dbias = NULL;
        CLF_ASSERT_OK(api->alloc(b, na * 4, &dA));
        CLF_ASSERT_OK(api->alloc(b, nb * 4, &dB));
        CLF_ASSERT_OK(api->alloc(b, nh * 2, &dH));
        CLF_ASSERT_OK(api->alloc(b, nc * 4, &dC));
        CLF_ASSERT_OK(api->alloc(b, nbias * 4, &dbias));
        CLF_ASSERT_OK(api->upload(b, P(dA), A, na * 4));
        CLF_ASSERT_OK(api->upload(b, P(dB), B2, nb * 4));
        CLF_ASSERT_OK(api->upload(b, P(dH), H, nh * 2));
        CLF_ASSERT_OK(api->upload(b, P(dC), C, nc * 4));
        CLF_ASSERT_OK(api->upload(b, P(dbias), bias, nbias * 4));
        clf_gemm_args g = {.trans_b = 1,
                           .m = m,
                           .n = n,
                           .k = k,
                           .alpha = alpha,
                           .beta = beta,
                           .a = {dA, 4 * off_a},
                           .lda = lda,
                           .b = {dB, 4 * off_b},
                           .ldb = ldb,
                           .c = {dC, 4 * off_c},
                           .ldc = ldc,
                           .relu = relu};
        if (!f32)
            g.b_half = (clf_ptr){dH, 2 * off_h};
        if (with_bias)
            g.bias = (clf_ptr){dbias, 4 * off_bias};
        CLF_ASSERT_OK(api->gemm(b, &g));
        CLF_ASSERT_OK(api->download(b, got, P(dC), nc * 4));
        for (size_t e = 0; e < nc; e++) {
            double err = fabs((double)got[e] - (double)want[e]);
            ck_assert_msg(err <= tol[e] || (isnan(want[e]) && isnan(got[e])),
                          "gemm from %s, %s, %d threads: m=%d n=%d k=%d alpha=%g beta=%g "
                          "bias=%d relu=%d: C element %zu is %.9g, want %.9g (tolerance %.3g)",
                          f32 ? "f32" : "b_half", hb->isa[bi], hb->threads[bi], m, n, k,
                          (double)alpha, (double)beta, with_bias, relu, e, (double)got[e],
                          (double)want[e], tol[e]);
        }
        if (bi % 2 == 0)
            memcpy(first, got, nc * sizeof *got);
        else if (!f32 || strcmp(hb->isa[bi], "generic") != 0)
            /* the same level with 2 threads: each output summed in the same order */
            ck_assert_msg(memcmp(first, got, nc * sizeof *got) == 0,
                          "gemm from %s, %s: 1 and 2 threads differ (m=%d n=%d k=%d)",
                          f32 ? "f32" : "b_half", hb->isa[bi], m, n, k);
        api->free(b, dA), api->free(b, dB), api->free(b, dH), api->free(b, dC);
        api->free(b, dbias);
    }
    free(A), free(B), free(B2), free(C), free(bias), free(want), free(got), free(first);
    free(tol), free(H), free(Hf);
}

/* Every shape twice, from b_half (f32 0) or the F32 b (f32 1): with beta = 0 (alpha 0.7,
 * or 2 with the bias) and with beta != 0 (-1.3, 1, the bias and relu; or 0.5, 0.5 and
 * relu), the pairs taken in turn. m = 4, 5 and 6 (kernels of their own too) on fewer n. */
static void gemm_rows_every_isa_level(int f32)
{
    /* F32 also 8-12 (the F32 kernel's own) and 13 (SGEMM again), on fewer n */
    static const int ms[] = {1, 2, 3, 7, 4, 5, 6, 8, 10, 12, 13};
    static const int ns[] = {1, 7, 33, 65, 263, 1031};
    /* 120 = 3.75 blocks of 32: an odd 16-block and a tail; 2057: long rows */
    static const int ks[] = {1, 7, 33, 65, 120, 263, 512, 1031, 2048 + 9};
    half_backends hb;
    open_half_backends(&hb);
    int turn = 0;
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++, turn ^= 1) {
                int m = ms[mi], n = ns[ni], k = ks[ki];
                if ((mi >= 4 && n != 7 && n != 263) || (mi >= 7 && !f32))
                    continue;
                if (turn) {
                    check_gemm_rows(&hb, f32, m, n, k, 0.7f, 0.0f, 0, 0);
                    check_gemm_rows(&hb, f32, m, n, k, -1.3f, 1.0f, 1, 1);
                } else {
                    check_gemm_rows(&hb, f32, m, n, k, 2.0f, 0.0f, 1, 0);
                    check_gemm_rows(&hb, f32, m, n, k, 0.5f, 0.5f, 0, 1);
                }
            }
    close_half_backends(&hb);
}

START_TEST(gemm_from_b_half_every_isa_level)
{
    gemm_rows_every_isa_level(0);
}
END_TEST

/* The few-row F32 kernels (AVX2 and up; OpenBLAS's SGEMV at the generic level). */
START_TEST(gemm_f32_few_rows_every_isa_level)
{
    gemm_rows_every_isa_level(1);
}
END_TEST

/* Where the F16 path does not apply (m = 8, trans_a, not trans_b), b_half is ignored: it
 * holds NaN halves here, and the result must be the F32 product of b. */
START_TEST(gemm_ignores_b_half_where_it_does_not_apply)
{
    static const int cases[][5] = {/* m, n, k, trans_a, trans_b */
                                   {8, 33, 65, 0, 1},
                                   {9, 7, 263, 0, 1},
                                   {3, 33, 65, 1, 1},
                                   {3, 33, 65, 0, 0},
                                   {1, 65, 33, 1, 0}};
    half_backends hb;
    open_half_backends(&hb);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int bi = 0; bi < hb.count; bi++) {
            clf_backend *b = hb.be[bi];
            int m = cases[c][0], n = cases[c][1], k = cases[c][2], ta = cases[c][3],
                tb = cases[c][4];
            clf_gemm_args g = {.trans_a = ta,
                               .trans_b = tb,
                               .m = m,
                               .n = n,
                               .k = k,
                               .alpha = 0.7f,
                               .beta = 0.0f,
                               .lda = (ta ? m : k) + 1,
                               .ldb = (tb ? k : n) + 3,
                               .ldc = n};
            size_t na = (size_t)(ta ? k : m) * g.lda, nb = (size_t)(tb ? n : k) * g.ldb,
                   nc = (size_t)m * n;
            float *A = fvec(na, 21), *B = fvec(nb, 22), *want = malloc(nc * 4),
                  *got = malloc(nc * 4);
            uint16_t *H = malloc(nb * 2);
            ck_assert(want && got && H);
            for (size_t e = 0; e < nb; e++)
                H[e] = 0x7e00; /* NaN */
            clf_test_ref_gemm(&g, 1, A, B, NULL, want);
            clf_buffer *dA = NULL, *dB = NULL, *dH = NULL, *dC = NULL;
            CLF_ASSERT_OK(api->alloc(b, na * 4, &dA));
            CLF_ASSERT_OK(api->alloc(b, nb * 4, &dB));
            CLF_ASSERT_OK(api->alloc(b, nb * 2, &dH));
            CLF_ASSERT_OK(api->alloc(b, nc * 4, &dC));
            CLF_ASSERT_OK(api->upload(b, P(dA), A, na * 4));
            CLF_ASSERT_OK(api->upload(b, P(dB), B, nb * 4));
            CLF_ASSERT_OK(api->upload(b, P(dH), H, nb * 2));
            g.a = P(dA), g.b = P(dB), g.c = P(dC), g.b_half = P(dH);
            CLF_ASSERT_OK(api->gemm(b, &g));
            CLF_ASSERT_OK(api->download(b, got, P(dC), nc * 4));
            double e = clf_test_rel_err(got, want, nc);
            ck_assert_msg(e <= 1e-5, "%s, %d threads: m=%d n=%d k=%d ta=%d tb=%d: rel err %g",
                          hb.isa[bi], hb.threads[bi], m, n, k, ta, tb, e);
            api->free(b, dA), api->free(b, dB), api->free(b, dH), api->free(b, dC);
            free(A), free(B), free(H), free(want), free(got);
        }
    close_half_backends(&hb);
}
END_TEST

/* b_half is bounds-checked like every operand (2-byte alignment: it holds halves). */
START_TEST(gemm_refuses_a_bad_b_half)
{
    clf_buffer *big, *small;
    CLF_ASSERT_OK(api->alloc(be, 4096, &big));
    CLF_ASSERT_OK(api->alloc(be, 64, &small));
    clf_gemm_args g = {.trans_b = 1,
                       .m = 2,
                       .n = 8,
                       .k = 8,
                       .alpha = 1,
                       .a = P(big),
                       .lda = 8,
                       .b = P(big),
                       .ldb = 8,
                       .c = {big, 2048}, /* clear of A, B and b_half */
                       .ldc = 8,
                       .b_half = P(small)}; /* 8 x 8 halves = 128 bytes */
    ck_assert_int_eq(clf_op_gemm(api, be, &g), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "'b_half'"), "%s", clf_last_error());
    g.b_half = (clf_ptr){big, 1};
    ck_assert_int_eq(clf_op_gemm(api, be, &g), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "'b_half'") && strstr(clf_last_error(), "aligned"), "%s",
                  clf_last_error());
    g.b_half = (clf_ptr){big, 2};
    CLF_ASSERT_OK(api->gemm(be, &g));
    api->free(be, big), api->free(be, small);
}
END_TEST

/* gemm with ln_out (A's rows layer-normalized first) gives exactly what the layernorm op and
 * then gemm on its output give, ln_out included: both styles, 1, 3 and 9 rows (the few-row
 * and SGEMM paths), with the F16 copy of B, with beta = 1 and a bias; and the core's
 * refusals: A transposed, a missing operand, ln_out over A, the batched product. */
START_TEST(gemm_layernorm_equals_layernorm_then_gemm)
{
    enum { K = 24, N = 17 };
    static const int rows[] = {1, 3, 9};
    float *w = fvec((size_t)N * K, 81), *bias = fvec(N, 82), *al = fvec(K, 83), *bt = fvec(K, 84);
    uint16_t wh[N * K];
    for (int i = 0; i < N * K; i++)
        wh[i] = clf_float_to_half(w[i]);
    clf_buffer *dw = clf_test_upload(api, be, w, sizeof(float) * N * K),
               *dwh = clf_test_upload(api, be, wh, sizeof wh),
               *db = clf_test_upload(api, be, bias, sizeof(float) * N),
               *dal = clf_test_upload(api, be, al, sizeof(float) * K),
               *dbt = clf_test_upload(api, be, bt, sizeof(float) * K);
    for (int v = 0; v < 12; v++) {
        const int m = rows[v % 3], half = v / 3 % 2;
        const clf_ln_style style = v / 6 ? CLF_LN_STANDARD : CLF_LN_TUTORIAL;
        float *x = fvec((size_t)m * K, 85 + v), *c0 = fvec((size_t)m * N, 86 + v);
        float got[2][9 * N], norm[2][9 * K];
        for (int w2 = 0; w2 < 2; w2++) { /* 0: gemm with ln_out; 1: layernorm, then gemm */
            clf_buffer *dx = clf_test_upload(api, be, x, sizeof(float) * m * K),
                       *dc = clf_test_upload(api, be, c0, sizeof(float) * m * N), *dn;
            CLF_ASSERT_OK(api->alloc(be, sizeof(float) * m * K, &dn));
            clf_gemm_args g = {.trans_b = 1,
                               .m = m,
                               .n = N,
                               .k = K,
                               .alpha = 0.5f,
                               .beta = 1.0f,
                               .a = P(dx),
                               .lda = K,
                               .b = P(dw),
                               .ldb = K,
                               .c = P(dc),
                               .ldc = N,
                               .bias = P(db),
                               .b_half = half ? P(dwh) : (clf_ptr){0}};
            if (w2 == 0) {
                g.ln_out = P(dn), g.ln_alpha = P(dal), g.ln_beta = P(dbt);
                g.ln_style = style, g.ln_eps = 1e-5f;
            } else {
                clf_layernorm_args ln = {.out = P(dn),
                                         .x = P(dx),
                                         .alpha = P(dal),
                                         .beta = P(dbt),
                                         .rows = m,
                                         .cols = K,
                                         .style = style,
                                         .eps = 1e-5f};
                CLF_ASSERT_OK(clf_op_layernorm(api, be, &ln));
                g.a = P(dn);
            }
            CLF_ASSERT_OK(clf_op_gemm(api, be, &g));
            download(dc, got[w2], sizeof(float) * m * N);
            download(dn, norm[w2], sizeof(float) * m * K);
            if (w2 == 0 && v == 0) {      /* the refusals, on this call's operands */
                g.trans_a = 1, g.lda = 1; /* A [k, m = 1] */
                ck_assert_int_eq(clf_op_gemm(api, be, &g), CLF_ERR_INPUT);
                ck_assert_msg(strstr(clf_last_error(), "transposed"), "%s", clf_last_error());
                g.trans_a = 0, g.lda = K;
                g.ln_beta = (clf_ptr){0};
                ck_assert_int_eq(clf_op_gemm(api, be, &g), CLF_ERR_INPUT);
                ck_assert_msg(strstr(clf_last_error(), "'ln_beta'"), "%s", clf_last_error());
                g.ln_beta = P(dbt);
                g.ln_out = P(dx);
                ck_assert_int_eq(clf_op_gemm(api, be, &g), CLF_ERR_INPUT);
                ck_assert_msg(strstr(clf_last_error(), "'ln_out' overlaps 'a'"), "%s",
                              clf_last_error());
                g.ln_out = P(dn);
                g.lda = K + 1; /* rows not contiguous */
                ck_assert_int_eq(clf_op_gemm(api, be, &g), CLF_ERR_INPUT);
                ck_assert_msg(strstr(clf_last_error(), "lda"), "%s", clf_last_error());
                g.lda = K;
                g.batch = 1;
                ck_assert_int_eq(clf_op_gemm_strided_batched(api, be, &g), CLF_ERR_UNSUPPORTED);
                ck_assert_msg(strstr(clf_last_error(), "gemm only"), "%s", clf_last_error());
            }
            api->free(be, dx), api->free(be, dc), api->free(be, dn);
        }
        ck_assert_msg(memcmp(got[0], got[1], sizeof(float) * m * N) == 0, "variant %d: C", v);
        ck_assert_msg(memcmp(norm[0], norm[1], sizeof(float) * m * K) == 0, "variant %d: ln", v);
        free(x), free(c0);
    }
    api->free(be, dw), api->free(be, dwh), api->free(be, db), api->free(be, dal),
        api->free(be, dbt);
    free(w), free(bias), free(al), free(bt);
}
END_TEST

/* BF16 arithmetic (supports(CLF_OP_GEMM_BF16_ARITH): a CPU with AVX512_BF16): a product of
 * more than 7 rows that has b_bf16 multiplies A rounded to BF16 by it, summing in F32;
 * against the double product of the same rounded operands, 1e-5 of the sum of |terms| of
 * each output, with beta, bias and relu. CLF_CPU_BF16_ARITH=off turns it off; another
 * value is refused naming it. */
START_TEST(gemm_bf16_arithmetic)
{
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .threads = 2};
    clf_backend *b = NULL;
    ck_assert_int_eq(setenv("CLF_CPU_BF16_ARITH", "maybe", 1), 0);
    clf_status st = api->open(&o, &b);
    ck_assert_int_eq(st, CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "CLF_CPU_BF16_ARITH") &&
                      strstr(clf_last_error(), "maybe"),
                  "%s", clf_last_error());
    ck_assert_int_eq(setenv("CLF_CPU_BF16_ARITH", "off", 1), 0);
    CLF_ASSERT_OK(api->open(&o, &b));
    unsetenv("CLF_CPU_BF16_ARITH");
    ck_assert_int_eq(api->supports(b, CLF_OP_GEMM_BF16_ARITH), 0);
    api->close(b);
    if (!api->supports(be, CLF_OP_GEMM_BF16_ARITH)) {
        fprintf(stderr, "  gemm_bf16_arithmetic: this CPU has no AVX512_BF16: not run\n");
        return;
    }
    enum { M = 33, N = 129, K = 65, LDA = 70 };
    float *A = clf_test_frand((size_t)M * LDA, 90, -2, 2),
          *W = clf_test_frand((size_t)N * K, 91, -1, 1);
    float *bias = clf_test_frand(N, 92, -1, 1), *C0 = clf_test_frand((size_t)M * N, 93, -1, 1);
    uint16_t *wb = malloc((size_t)N * K * sizeof *wb);
    for (size_t i = 0; i < (size_t)N * K; i++)
        wb[i] = clf_float_to_bf16(W[i]);
    float *got = malloc((size_t)M * N * sizeof *got);
    clf_buffer *da = clf_test_upload(api, be, A, (size_t)M * LDA * 4),
               *dw = clf_test_upload(api, be, W, (size_t)N * K * 4),
               *dwb = clf_test_upload(api, be, wb, (size_t)N * K * 2),
               *db = clf_test_upload(api, be, bias, (size_t)N * 4), *dc = NULL;
    for (int variant = 0; variant < 2; variant++) { /* beta 0 + bias; beta 0.5 + bias + relu */
        const float beta = variant ? 0.5f : 0.0f;
        dc = clf_test_upload(api, be, C0, (size_t)M * N * 4);
        clf_gemm_args g = {.trans_b = 1,
                           .m = M,
                           .n = N,
                           .k = K,
                           .alpha = 0.75f,
                           .beta = beta,
                           .a = P(da),
                           .lda = LDA,
                           .b = P(dw),
                           .ldb = K,
                           .c = P(dc),
                           .ldc = N,
                           .bias = P(db),
                           .relu = variant,
                           .b_bf16 = P(dwb)};
        CLF_ASSERT_OK(clf_op_gemm(api, be, &g));
        download(dc, got, (size_t)M * N * 4);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double sum = 0, mag = 0;
                for (int p = 0; p < K; p++) {
                    const double t =
                        (double)clf_bf16_to_float(clf_float_to_bf16(A[(size_t)i * LDA + p])) *
                        clf_bf16_to_float(wb[(size_t)j * K + p]);
                    sum += t;
                    mag += fabs(t);
                }
                double want = 0.75 * sum + beta * C0[(size_t)i * N + j] + bias[j];
                mag = 0.75 * mag + fabs(beta * C0[(size_t)i * N + j]) + fabs(bias[j]);
                if (variant && want < 0)
                    want = 0;
                ck_assert_msg(fabs(got[(size_t)i * N + j] - want) <= 1e-5 * mag,
                              "bf16 gemm variant %d (%d, %d): %g, want %g", variant, i, j,
                              got[(size_t)i * N + j], want);
            }
        api->free(be, dc);
    }
    /* the F32 product differs (A and W were rounded): the BF16 path ran */
    dc = clf_test_upload(api, be, C0, (size_t)M * N * 4);
    clf_gemm_args f = {.trans_b = 1,
                       .m = M,
                       .n = N,
                       .k = K,
                       .alpha = 1,
                       .a = P(da),
                       .lda = LDA,
                       .b = P(dw),
                       .ldb = K,
                       .c = P(dc),
                       .ldc = N};
    CLF_ASSERT_OK(clf_op_gemm(api, be, &f));
    float *f32 = malloc((size_t)M * N * sizeof *f32);
    download(dc, f32, (size_t)M * N * 4);
    f.b_bf16 = P(dwb);
    CLF_ASSERT_OK(clf_op_gemm(api, be, &f));
    download(dc, got, (size_t)M * N * 4);
    ck_assert(memcmp(f32, got, (size_t)M * N * 4) != 0);
    api->free(be, da), api->free(be, dw), api->free(be, dwb), api->free(be, db), api->free(be, dc);
    free(A), free(W), free(bias), free(C0), free(wb), free(got), free(f32);
}
END_TEST

/* CLF_CPU_ISA takes generic, avx2 or avx512; anything else is an error naming it. */
START_TEST(unknown_cpu_isa_is_refused)
{
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .threads = 1};
    clf_backend *b = NULL;
    ck_assert_int_eq(setenv("CLF_CPU_ISA", "avx9000", 1), 0);
    clf_status st = api->open(&o, &b);
    unsetenv("CLF_CPU_ISA");
    ck_assert_int_eq(st, CLF_ERR_INPUT);
    ck_assert_ptr_null(b);
    const char *msg = clf_last_error();
    ck_assert_msg(strstr(msg, "CLF_CPU_ISA") && strstr(msg, "avx9000") &&
                      strstr(msg, "generic, avx2, avx512"),
                  "%s", msg);
    /* the level actually chosen is in describe; generic is always there */
    clf_backend *g = open_isa("generic", 1);
    ck_assert_ptr_nonnull(g);
    api->close(g);
}
END_TEST

/* ---- layernorm ---- */

static void ref_layernorm(const float *x, const float *res, const float *alpha, const float *beta,
                          int rows, int cols, clf_ln_style style, float eps, float *out, float *sum)
{
    for (int r = 0; r < rows; r++) {
        double mean = 0, ss = 0;
        float *v = malloc((size_t)cols * sizeof *v);
        for (int c = 0; c < cols; c++) {
            v[c] = x[(size_t)r * cols + c] + (res ? res[(size_t)r * cols + c] : 0.0f);
            mean += v[c];
        }
        mean /= cols;
        for (int c = 0; c < cols; c++)
            ss += (v[c] - mean) * (v[c] - mean);
        double denom =
            style == CLF_LN_TUTORIAL ? sqrt(ss / (cols - 1)) + eps : sqrt(ss / cols + eps);
        for (int c = 0; c < cols; c++) {
            out[(size_t)r * cols + c] = (float)(alpha[c] * (v[c] - mean) / denom + beta[c]);
            if (sum)
                sum[(size_t)r * cols + c] = v[c];
        }
        free(v);
    }
}

START_TEST(layernorm_both_styles_residual_and_aliased_sum)
{
    static const int rows[] = {1, 7, 33}, cols[] = {2, 7, 65, 129};
    for (int style = 0; style < 2; style++)
        for (int ri = 0; ri < 3; ri++)
            for (int ci = 0; ci < 4; ci++)
                for (int mode = 0; mode < 3; mode++) { /* plain, residual, residual + sum_out=x */
                    int R = rows[ri], Cn = cols[ci];
                    size_t n = (size_t)R * Cn;
                    float *x = fvec(n, 10), *res = fvec(n, 11), *al = fvec(Cn, 12),
                          *bt = fvec(Cn, 13);
                    for (size_t i = 0; i < n; i++)
                        x[i] = x[i] * 3.0f + 0.5f; /* a mean far from 0 tests the centring */
                    float *want = malloc(n * 4), *wsum = malloc(n * 4), *got = malloc(n * 4);
                    float eps = style == CLF_LN_TUTORIAL ? 1e-6f : 1e-5f;
                    ref_layernorm(x, mode ? res : NULL, al, bt, R, Cn, (clf_ln_style)style, eps,
                                  want, wsum);
                    clf_buffer *dx = clf_test_upload(api, be, x, n * 4),
                               *dr = clf_test_upload(api, be, res, n * 4);
                    clf_buffer *da = clf_test_upload(api, be, al, Cn * 4),
                               *db = clf_test_upload(api, be, bt, Cn * 4);
                    clf_buffer *dout;
                    CLF_ASSERT_OK(api->alloc(be, n * 4, &dout));
                    clf_layernorm_args a = {.out = P(dout),
                                            .x = P(dx),
                                            .alpha = P(da),
                                            .beta = P(db),
                                            .rows = R,
                                            .cols = Cn,
                                            .style = (clf_ln_style)style,
                                            .eps = eps};
                    if (mode)
                        a.residual = P(dr);
                    if (mode == 2)
                        a.sum_out = P(dx);
                    CLF_ASSERT_OK(api->layernorm(be, &a));
                    download(dout, got, n * 4);
                    double e = clf_test_rel_err(got, want, n);
                    ck_assert_msg(e <= 1e-5,
                                  "layernorm style=%d rows=%d cols=%d mode=%d: rel err %g", style,
                                  R, Cn, mode, e);
                    if (mode == 2) {
                        download(dx, got, n * 4);
                        CLF_ASSERT_CLOSE(got, wsum, n, 1e-6);
                    }
                    api->free(be, dx);
                    api->free(be, dr);
                    api->free(be, da);
                    api->free(be, db);
                    api->free(be, dout);
                    free(x), free(res), free(al), free(bt), free(want), free(wsum), free(got);
                }
}
END_TEST

/* ---- attention ---- */

typedef struct attn_case {
    int B, H, Tq, Tk, D, causal, q_pos0, mask, probs, packed;
    int rows; /* keys and values through a row table (kv_rows) over B + 2 entries */
} attn_case;

/* The entry batch entry b reads key j from: b, or the row table's, clamped */
static size_t ref_entry(const clf_attention_args *a, const int32_t *R, int b, int j)
{
    if (!R)
        return (size_t)b;
    int32_t e = R[(size_t)b * a->kv_rows_ld + j];
    return (size_t)(e < 0 ? 0 : e >= a->kv_entries ? a->kv_entries - 1 : e);
}

static void ref_attention(const attn_case *c, const clf_attention_args *a, const float *Q,
                          const float *K, const float *V, const int32_t *M, const int32_t *R,
                          float *O, float *Pr)
{
    double *s = malloc((size_t)c->Tk * sizeof *s);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->H; h++)
            for (int i = 0; i < c->Tq; i++) {
                double mx = -INFINITY, den = 0;
                for (int j = 0; j < c->Tk; j++) {
                    int masked = (M && M[b * a->key_mask_stride + j] == 0) ||
                                 (c->causal && j > c->q_pos0 + i);
                    double d = 0;
                    for (int t = 0; t < c->D; t++)
                        d += (double)Q[b * a->q_bstride + (size_t)i * a->q_ld + h * c->D + t] *
                             K[ref_entry(a, R, b, j) * a->kv_bstride + (size_t)j * a->k_ld +
                               h * c->D + t];
                    s[j] = masked ? -1e9 : d * a->scale;
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int j = 0; j < c->Tk; j++)
                    den += (s[j] = exp(s[j] - mx));
                for (int t = 0; t < c->D; t++) {
                    double o = 0;
                    for (int j = 0; j < c->Tk; j++)
                        o += s[j] / den *
                             V[ref_entry(a, R, b, j) * a->kv_bstride + (size_t)j * a->v_ld +
                               h * c->D + t];
                    O[b * a->out_bstride + (size_t)i * a->out_ld + h * c->D + t] = (float)o;
                }
                if (Pr)
                    for (int j = 0; j < c->Tk; j++)
                        Pr[(((size_t)b * c->H + h) * c->Tq + i) * c->Tk + j] = (float)(s[j] / den);
            }
    free(s);
}

static void check_attention(const attn_case *c)
{
    int W = c->H * c->D;
    clf_attention_args a = {.batch = c->B,
                            .heads = c->H,
                            .q_len = c->Tq,
                            .kv_len = c->Tk,
                            .head_dim = c->D,
                            .causal = c->causal,
                            .q_pos0 = c->q_pos0,
                            .scale = 1.0f / sqrtf((float)c->D)};
    /* packed: q, k, v interleaved in one [B, T, 3W] tensor, as the fused QKV GEMM writes. */
    a.q_ld = a.k_ld = a.v_ld = c->packed ? 3 * W : W + 1;
    a.out_ld = W + 2;
    a.q_bstride = (size_t)c->Tq * a.q_ld + 1;
    a.kv_bstride = (size_t)c->Tk * a.k_ld;
    a.out_bstride = (size_t)c->Tq * a.out_ld;
    a.key_mask_stride = (size_t)c->Tk + 1;
    /* with a row table: B + 2 entries of keys and values, each row j of batch entry b from
     * a drawn entry, one of them out of range on each side (the backend clamps) */
    const int entries = c->rows ? c->B + 2 : c->B;
    size_t nq = a.q_bstride * c->B, nkv = a.kv_bstride * entries + 2 * W, no = a.out_bstride * c->B;
    size_t np = (size_t)c->B * c->H * c->Tq * c->Tk, nm = a.key_mask_stride * c->B;
    int32_t *R = NULL;
    if (c->rows) {
        a.kv_rows_ld = c->Tk + 3;
        a.kv_entries = entries;
        R = malloc(sizeof(int32_t) * (size_t)c->B * a.kv_rows_ld);
        for (size_t i = 0; i < (size_t)c->B * a.kv_rows_ld; i++)
            R[i] = (int32_t)((i * 7 + 3) % (size_t)entries);
        R[0] = -3;
        R[(size_t)c->B * a.kv_rows_ld - 4] = entries + 5; /* the last batch entry's last key */
    }
    float *Q = fvec(nq, 20), *KV = fvec(nkv, 21), *O = calloc(no, 4), *got = calloc(no, 4);
    float *Pr = calloc(np, 4), *gotp = calloc(np, 4);
    int32_t *M = malloc(nm * 4);
    for (size_t i = 0; i < nq; i++)
        Q[i] *= 4.0f; /* peaky softmax */
    for (int b = 0; b < c->B; b++)
        for (int j = 0; j < (int)a.key_mask_stride; j++)
            /* batch 0 keeps every key; later batches pad the tail; the last one (when
             * B > 2) masks every key, the fully masked row. */
            M[b * a.key_mask_stride + j] = b == 0                        ? 1
                                           : (b == c->B - 1 && c->B > 2) ? 0
                                                                         : j < c->Tk - b * 3;
    clf_buffer *dq = clf_test_upload(api, be, Q, nq * 4),
               *dkv = clf_test_upload(api, be, KV, nkv * 4);
    /* out starts zeroed: its row padding must stay untouched. */
    clf_buffer *dm = clf_test_upload(api, be, M, nm * 4),
               *dout = clf_test_upload(api, be, O, no * 4);
    clf_buffer *dp, *dr = NULL;
    CLF_ASSERT_OK(api->alloc(be, np * 4, &dp));
    if (R) {
        dr = clf_test_upload(api, be, R, sizeof(int32_t) * (size_t)c->B * a.kv_rows_ld);
        a.kv_rows = P(dr);
    }
    a.q = P(dq);
    a.k = P(dkv);
    a.v = clf_ptr_add(P(dkv), 4 * (size_t)(c->packed ? W : 2 * W));
    a.out = P(dout);
    if (c->mask)
        a.key_mask = P(dm);
    if (c->probs)
        a.probs = P(dp);
    ref_attention(c, &a, Q, KV, KV + (c->packed ? W : 2 * W), c->mask ? M : NULL, R, O, Pr);
    CLF_ASSERT_OK(api->attention(be, &a));
    download(dout, got, no * 4);
    double e = clf_test_rel_err(got, O, no);
    if (e > 1e-5 && getenv("CLF_DEBUG"))
        for (size_t i = 0; i < no; i++)
            if (fabsf(got[i] - O[i]) > 1e-4f)
                fprintf(stderr, "%zu: got %g want %g\n", i, got[i], O[i]);
    ck_assert_msg(e <= 1e-5,
                  "attention B=%d H=%d Tq=%d Tk=%d D=%d causal=%d pos0=%d mask=%d rows=%d: %g",
                  c->B, c->H, c->Tq, c->Tk, c->D, c->causal, c->q_pos0, c->mask, c->rows, e);
    if (c->probs) {
        download(dp, gotp, np * 4);
        CLF_ASSERT_CLOSE(gotp, Pr, np, 1e-5);
    }
    api->free(be, dq), api->free(be, dkv), api->free(be, dm), api->free(be, dout),
        api->free(be, dp);
    if (dr)
        api->free(be, dr);
    free(Q), free(KV), free(O), free(got), free(Pr), free(gotp), free(M), free(R);
}

START_TEST(attention_masks_strides_and_probs)
{
    /* The last three exercise the CPU backend's query blocks: 3 queries (scored unpacked),
     * 4 (one register tile), 12 (a second block of 4) with causal limits inside the key
     * tiles. */
    static const attn_case cases[] = {
        {1, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0},
        {1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0},
        {2, 3, 7, 33, 7, 0, 0, 1, 1, 1, 0},
        {3, 2, 7, 7, 64, 1, 0, 1, 1, 1, 0},
        {3, 2, 1, 65, 33, 1, 64, 1, 1, 0, 0},
        {2, 4, 33, 33, 16, 1, 0, 0, 0, 1, 0},
        {4, 1, 65, 129, 64, 0, 0, 1, 1, 0, 0},
        {2, 2, 5, 129, 8, 1, 124, 1, 0, 1, 0},
        {3, 1, 129, 1, 7, 0, 0, 1, 1, 0, 0},
        {2, 2, 3, 9, 5, 1, 6, 1, 1, 1, 0},
        {3, 1, 4, 12, 8, 1, 8, 1, 1, 0, 0},
        {2, 1, 12, 20, 16, 1, 8, 1, 1, 1, 0},
        /* keys and values through a row table, packed (q_len >= 4) and not */
        {3, 2, 5, 19, 8, 1, 14, 1, 1, 1, 1},
        {2, 3, 12, 9, 16, 0, 0, 1, 0, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_attention(&cases[i]);
}
END_TEST

START_TEST(attention_decode_every_isa_level)
{
    /* The few-query forward (q_len < 4: decoding) has an AVX2 + FMA path (scores and the
     * weighted sum of V); every kernel level this CPU has, 1 and 2 threads, against the
     * double reference. Head dims 64 (the models': one 64-column block of the weighted
     * sum), 108 (a 64-column block, a 32, an 8 and a masked tail), 44 (a 32-column block, an
     * 8 and a masked tail) and 7 (the tail only); key counts off multiples of 4; the first
     * case is large enough to run on both threads (CPU_PAR_MIN). */
    static const attn_case cases[] = {
        {3, 8, 1, 64, 64, 0, 0, 1, 1, 1, 0},
        {2, 8, 2, 37, 64, 1, 35, 1, 0, 0, 0},
        {4, 8, 1, 22, 64, 0, 0, 1, 0, 1, 0},
        {2, 3, 3, 13, 44, 1, 10, 1, 1, 1, 0},
        {2, 2, 1, 11, 108, 1, 9, 1, 0, 1, 0},
        {3, 2, 1, 6, 7, 0, 0, 1, 1, 0, 0},
        {1, 1, 3, 3, 1, 1, 0, 0, 1, 1, 0},
        /* the decoding step's row tables (beams sharing cache rows, decode.c): self- and
         * cross-attention shapes, 44 columns for the tails */
        {6, 8, 1, 37, 64, 1, 36, 0, 0, 0, 1},
        {5, 8, 1, 22, 64, 0, 0, 1, 0, 0, 1},
        {3, 3, 2, 13, 44, 1, 11, 1, 1, 1, 1},
    };
    half_backends hb;
    open_half_backends(&hb);
    clf_backend *saved = be;
    for (int i = 0; i < hb.count; i++) {
        be = hb.be[i]; /* check_attention runs on be */
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            check_attention(&cases[c]);
    }
    be = saved;
    close_half_backends(&hb);
}
END_TEST

/* Decoding's rows attend to keys past their last unmasked one (continuous decoding reads
 * the longest history and source for every row): the CPU backend leaves those keys out
 * where no probabilities are asked for, which must change no bit. Each entry of a step
 * (q_len 1 and 2, with and without a row table, every kernel level, 1 and 2 threads) has
 * its own count of unmasked keys, then a masked tail; a fully masked entry stays uniform.
 * The output without probs (trimmed) against the output with them (every key). */
START_TEST(attention_trimmed_keys_change_no_bit)
{
    enum { B = 6, H = 4, TK = 40, D = 48, W = H * D };
    const int valid[B] = {TK, 37, 20, 3, 1, 0};
    half_backends hb;
    open_half_backends(&hb);
    float *q = fvec((size_t)B * 2 * W, 31), *kv = fvec((size_t)(B + 1) * TK * 2 * W, 32);
    int32_t mask[B * TK], rows[B * TK];
    for (int b = 0; b < B; b++)
        for (int j = 0; j < TK; j++) {
            mask[b * TK + j] = j < valid[b];
            rows[b * TK + j] = (b * 5 + j) % (B + 1);
        }
    for (int i = 0; i < hb.count; i++)
        for (int tq = 1; tq <= 2; tq++)
            for (int table = 0; table <= 1; table++) {
                clf_backend *b = hb.be[i];
                clf_buffer *dq = clf_test_upload(api, b, q, sizeof(float) * B * 2 * W),
                           *dkv = clf_test_upload(api, b, kv, sizeof(float) * (B + 1) * TK * 2 * W),
                           *dm = clf_test_upload(api, b, mask, sizeof mask),
                           *dr = clf_test_upload(api, b, rows, sizeof rows), *dout[2], *dp;
                CLF_ASSERT_OK(api->alloc(b, sizeof(float) * B * tq * W, &dout[0]));
                CLF_ASSERT_OK(api->alloc(b, sizeof(float) * B * tq * W, &dout[1]));
                CLF_ASSERT_OK(api->alloc(b, sizeof(float) * B * H * tq * TK, &dp));
                clf_attention_args a = {.batch = B,
                                        .heads = H,
                                        .q_len = tq,
                                        .kv_len = TK,
                                        .head_dim = D,
                                        .q = P(dq),
                                        .k = P(dkv),
                                        .v = clf_ptr_add(P(dkv), sizeof(float) * W),
                                        .q_ld = W,
                                        .k_ld = 2 * W,
                                        .v_ld = 2 * W,
                                        .out_ld = W,
                                        .q_bstride = (size_t)tq * W,
                                        .kv_bstride = (size_t)TK * 2 * W,
                                        .out_bstride = (size_t)tq * W,
                                        .key_mask = P(dm),
                                        .key_mask_stride = TK,
                                        .scale = 1.0f / sqrtf((float)D)};
                if (table) {
                    a.kv_rows = P(dr);
                    a.kv_rows_ld = TK;
                    a.kv_entries = B + 1;
                }
                float got[2][B * 2 * W];
                for (int probs = 0; probs <= 1; probs++) {
                    a.out = P(dout[probs]);
                    a.probs = probs ? P(dp) : (clf_ptr){0};
                    CLF_ASSERT_OK(api->attention(b, &a));
                    download(dout[probs], got[probs], sizeof(float) * B * tq * W);
                }
                ck_assert_msg(memcmp(got[0], got[1], sizeof(float) * B * tq * W) == 0,
                              "backend %d q_len %d table %d: trimmed keys moved the output", i, tq,
                              table);
                api->free(b, dq), api->free(b, dkv), api->free(b, dm), api->free(b, dr),
                    api->free(b, dout[0]), api->free(b, dout[1]), api->free(b, dp);
            }
    free(q), free(kv);
    close_half_backends(&hb);
}
END_TEST

START_TEST(attention_fully_masked_row_is_uniform)
{
    /* All keys masked: masked_fill(-1e9) makes every score equal, so the softmax is
     * uniform and the output is the mean of V, as PyTorch gives. */
    float q[4] = {1, 2, 3, 4}, kv[3 * 4], out[4], want[4] = {0};
    int32_t mask[3] = {0, 0, 0};
    clf_test_fill(kv, 12, 5, -1, 1);
    for (int j = 0; j < 3; j++)
        for (int d = 0; d < 4; d++)
            want[d] += kv[j * 4 + d] / 3.0f;
    clf_buffer *dq = clf_test_upload(api, be, q, 16), *dkv = clf_test_upload(api, be, kv, 48);
    clf_buffer *dm = clf_test_upload(api, be, mask, 12), *dout;
    CLF_ASSERT_OK(api->alloc(be, 16, &dout));
    clf_attention_args a = {.batch = 1,
                            .heads = 1,
                            .q_len = 1,
                            .kv_len = 3,
                            .head_dim = 4,
                            .q = P(dq),
                            .k = P(dkv),
                            .v = P(dkv),
                            .out = P(dout),
                            .q_ld = 4,
                            .k_ld = 4,
                            .v_ld = 4,
                            .out_ld = 4,
                            .key_mask = P(dm),
                            .scale = 0.5f};
    CLF_ASSERT_OK(api->attention(be, &a));
    download(dout, out, 16);
    CLF_ASSERT_CLOSE(out, want, 4, 1e-6);
    api->free(be, dq), api->free(be, dkv), api->free(be, dm), api->free(be, dout);
}
END_TEST

/* The append (clf_attention_args.k_new, v_new): attention that writes this step's keys and
 * values itself gives exactly what writing them first and attending without it gives, the
 * cache's bytes and the output, at a middle row and the last, with and without a row table
 * (whose row new_pos names each entry's own) and probs, 1 and 2 threads. */
START_TEST(attention_append_equals_rows_written_first)
{
    enum { B = 3, H = 2, D = 16, W = H * D, TK = 9, E = B + 2, LD = TK + 1 };
    const size_t nkv = (size_t)E * TK * 2 * W, nq = (size_t)B * 3 * W;
    float *kv = fvec(nkv, 91), *qkv = fvec(nq, 92);
    int32_t rows[B * LD];
    for (int v = 0; v < 8; v++) {
        const int new_pos = v % 2 ? TK - 1 : 4, table = v / 2 % 2, probs = v / 4;
        for (int i = 0; i < B * LD; i++)
            rows[i] = (int32_t)((i * 3 + 1) % E);
        for (int b = 0; b < B; b++)
            rows[b * LD + new_pos] = b;
        float got[2][B * W], gotkv[2][E * TK * 2 * W], gotp[2][B * H * TK];
        for (int w = 0; w < 2; w++) { /* 0: the append; 1: the rows written on the host */
            float *host = malloc(nkv * 4);
            memcpy(host, kv, nkv * 4);
            for (int b = 0; w == 1 && b < B; b++)
                for (int c = 0; c < 2; c++)
                    memcpy(host + ((size_t)b * TK + new_pos) * 2 * W + (size_t)c * W,
                           qkv + (size_t)b * 3 * W + (size_t)(c + 1) * W, 4 * W);
            clf_buffer *dkv = clf_test_upload(api, be, host, nkv * 4),
                       *dq = clf_test_upload(api, be, qkv, nq * 4),
                       *dr = clf_test_upload(api, be, rows, sizeof rows), *dout, *dp;
            CLF_ASSERT_OK(api->alloc(be, sizeof got[0], &dout));
            CLF_ASSERT_OK(api->alloc(be, sizeof gotp[0], &dp));
            clf_attention_args a = {.batch = B,
                                    .heads = H,
                                    .q_len = 1,
                                    .kv_len = TK,
                                    .head_dim = D,
                                    .q = P(dq),
                                    .k = P(dkv),
                                    .v = clf_ptr_add(P(dkv), 4 * W),
                                    .out = P(dout),
                                    .q_ld = 3 * W,
                                    .k_ld = 2 * W,
                                    .v_ld = 2 * W,
                                    .out_ld = W,
                                    .q_bstride = 3 * W,
                                    .kv_bstride = (size_t)TK * 2 * W,
                                    .out_bstride = W,
                                    .causal = 1,
                                    .q_pos0 = TK - 1,
                                    .scale = 0.25f};
            if (table)
                a.kv_rows = P(dr), a.kv_rows_ld = LD, a.kv_entries = E;
            if (probs)
                a.probs = P(dp);
            if (w == 0) {
                a.k_new = clf_ptr_add(P(dq), 4 * W);
                a.v_new = clf_ptr_add(P(dq), 8 * W);
                a.new_ld = 3 * W;
                a.new_pos = new_pos;
            }
            CLF_ASSERT_OK(clf_op_attention(api, be, &a));
            download(dout, got[w], sizeof got[w]);
            download(dkv, gotkv[w], sizeof gotkv[w]);
            if (probs)
                download(dp, gotp[w], sizeof gotp[w]);
            clf_buffer *all[] = {dkv, dq, dr, dout, dp};
            for (int i = 0; i < 5; i++)
                api->free(be, all[i]);
            free(host);
        }
        ck_assert_msg(memcmp(gotkv[0], gotkv[1], sizeof gotkv[0]) == 0, "variant %d: cache", v);
        ck_assert_msg(memcmp(got[0], got[1], sizeof got[0]) == 0, "variant %d: output", v);
        ck_assert(!probs || memcmp(gotp[0], gotp[1], sizeof gotp[0]) == 0);
    }
    free(kv), free(qkv);
}
END_TEST

/* ---- embed, add, softmax, argmax ---- */

START_TEST(embed_scale_pe_and_clamped_ids)
{
    enum { V = 7, Dm = 33, S = 5, R = 10, L = 12 };
    float *table = fvec(V * Dm, 30), *pe = fvec(L * Dm, 31), got[R * Dm], want[R * Dm];
    int32_t ids[R] = {0, 6, 3, 3, 1, 2, 5, 4, -3, 99}; /* the last two are clamped */
    for (int r = 0; r < R; r++) {
        int id = ids[r] < 0 ? 0 : ids[r] >= V ? V - 1 : ids[r];
        for (int c = 0; c < Dm; c++)
            want[r * Dm + c] = table[id * Dm + c] * 2.5f + pe[(3 + r % S) * Dm + c];
    }
    clf_buffer *dt = clf_test_upload(api, be, table, sizeof(float) * V * Dm);
    clf_buffer *dp = clf_test_upload(api, be, pe, sizeof(float) * L * Dm);
    clf_buffer *di = clf_test_upload(api, be, ids, sizeof ids), *dout;
    CLF_ASSERT_OK(api->alloc(be, sizeof got, &dout));
    clf_embed_args a = {.out = P(dout),
                        .ids = P(di),
                        .table = P(dt),
                        .pe = P(dp),
                        .rows = R,
                        .seq_len = S,
                        .pos0 = 3,
                        .dim = Dm,
                        .vocab = V,
                        .scale = 2.5f};
    CLF_ASSERT_OK(api->embed(be, &a));
    download(dout, got, sizeof got);
    CLF_ASSERT_CLOSE(got, want, R * Dm, 1e-6);
    api->free(be, dt), api->free(be, dp), api->free(be, di), api->free(be, dout);
    free(table), free(pe);
}
END_TEST

START_TEST(add_with_aliasing)
{
    enum { N = 129 };
    float *x = fvec(N, 40), *y = fvec(N, 41), want[N], got[N];
    for (int i = 0; i < N; i++)
        want[i] = x[i] + y[i];
    clf_buffer *dx = clf_test_upload(api, be, x, 4 * N), *dy = clf_test_upload(api, be, y, 4 * N);
    CLF_ASSERT_OK(api->add(be, P(dx), P(dx), P(dy), N)); /* out aliases a */
    download(dx, got, 4 * N);
    CLF_ASSERT_CLOSE(got, want, N, 1e-6);
    api->free(be, dx), api->free(be, dy);
    free(x), free(y);
}
END_TEST

START_TEST(softmax_and_log_softmax_in_place)
{
    /* every kernel level this CPU has (the exponentials: portable, or AVX2 lanes), 1 and 2
     * threads */
    static const int shapes[][2] = {{1, 1}, {7, 33}, {3, 129}, {2, 5000}, {40, 8000}};
    half_backends hb;
    open_half_backends(&hb);
    clf_backend *saved = be;
    for (int lv = 0; lv < hb.count; lv++) {
        be = hb.be[lv];
        for (int lg = 0; lg < 2; lg++)
            for (int s = 0; s < 5; s++) {
                int R = shapes[s][0], Cn = shapes[s][1];
                size_t n = (size_t)R * Cn;
                float *x = fvec(n, 50), *want = malloc(n * 4), *got = malloc(n * 4);
                for (size_t i = 0; i < n; i++)
                    x[i] *= 30.0f; /* large logits: exp would overflow without the max shift */
                for (int r = 0; r < R; r++) {
                    double mx = -INFINITY, sum = 0;
                    for (int c = 0; c < Cn; c++)
                        mx = fmax(mx, x[(size_t)r * Cn + c]);
                    for (int c = 0; c < Cn; c++)
                        sum += exp(x[(size_t)r * Cn + c] - mx);
                    for (int c = 0; c < Cn; c++) {
                        double v = x[(size_t)r * Cn + c] - mx;
                        want[(size_t)r * Cn + c] = (float)(lg ? v - log(sum) : exp(v) / sum);
                    }
                }
                clf_buffer *dx = clf_test_upload(api, be, x, n * 4);
                CLF_ASSERT_OK(api->softmax(be, P(dx), P(dx), R, Cn, lg));
                download(dx, got, n * 4);
                double e = clf_test_rel_err(got, want, n);
                ck_assert_msg(e <= 1e-5, "softmax log=%d rows=%d cols=%d level %d: rel err %g", lg,
                              R, Cn, lv, e);
                api->free(be, dx);
                free(x), free(want), free(got);
            }
    }
    be = saved;
    close_half_backends(&hb);
}
END_TEST

START_TEST(argmax_first_maximum)
{
    /* every kernel level this CPU has (portable, AVX2 lanes), 1 and 2 threads */
    enum { R = 8, Cn = 65 };
    float x[R * Cn];
    clf_test_fill(x, R * Cn, 60, -1, 1);
    x[0 * Cn + 64] = 5; /* last column, past the 8-wide lanes */
    x[1 * Cn + 0] = 5;  /* first column */
    x[2 * Cn + 7] = 5;  /* a tie across lanes: the first one wins */
    x[2 * Cn + 33] = 5;
    for (int c = 0; c < Cn; c++)
        x[3 * Cn + c] = -2; /* all equal: 0 */
    x[4 * Cn + 0] = NAN;    /* NaN first: nothing compares greater, 0 */
    x[5 * Cn + 9] = NAN;    /* NaN later: never taken */
    x[5 * Cn + 20] = 4;
    for (int c = 0; c < Cn; c++)
        x[6 * Cn + c] = -INFINITY; /* all -inf: 0 */
    x[7 * Cn + 12] = -0.0f;        /* +0 after -0 is no greater: the first zero */
    x[7 * Cn + 30] = 0.0f;
    for (int c = 0; c < Cn; c++)
        if (c != 12 && c != 30)
            x[7 * Cn + c] = -1 - (float)c;
    int32_t got[R], want[R] = {64, 0, 7, 0, 0, 20, 0, 12};
    half_backends hb;
    open_half_backends(&hb);
    for (int lv = 0; lv < hb.count; lv++) {
        clf_buffer *dx = clf_test_upload(api, hb.be[lv], x, sizeof x), *dout;
        CLF_ASSERT_OK(api->alloc(hb.be[lv], sizeof got, &dout));
        CLF_ASSERT_OK(api->argmax(hb.be[lv], P(dout), P(dx), R, Cn));
        CLF_ASSERT_OK(api->download(hb.be[lv], got, P(dout), sizeof got));
        for (int r = 0; r < R; r++)
            ck_assert_msg(got[r] == want[r], "argmax %s, %d threads, row %d: %d, want %d",
                          hb.isa[lv], hb.threads[lv], r, got[r], want[r]);
        api->free(hb.be[lv], dx), api->free(hb.be[lv], dout);
    }
    close_half_backends(&hb);
}
END_TEST

/* The order clf_topk_args states, for qsort over column indices of one row's sums. */
static const float *topk_sums;
static int topk_cmp(const void *pa, const void *pb)
{
    const int a = *(const int *)pa, b = *(const int *)pb;
    const float va = topk_sums[a], vb = topk_sums[b];
    if (isnan(va) != isnan(vb))
        return isnan(va) ? 1 : -1;
    if (!isnan(va) && va != vb)
        return va > vb ? -1 : 1;
    return a < b ? -1 : 1;
}

/* topk on backend b over x (base when given, log_softmax as asked) into val, idx [rows, k] */
static void topk_on(clf_backend *b, clf_buffer *x, clf_buffer *base, int rows, int cols, int k,
                    int log_softmax, float *val, int32_t *idx)
{
    clf_buffer *dv, *di;
    CLF_ASSERT_OK(api->alloc(b, (size_t)rows * k * 4, &dv));
    CLF_ASSERT_OK(api->alloc(b, (size_t)rows * k * 4, &di));
    const clf_topk_args a = {.val = P(dv),
                             .idx = P(di),
                             .x = P(x),
                             .base = base ? P(base) : (clf_ptr){0},
                             .rows = rows,
                             .cols = cols,
                             .k = k,
                             .log_softmax = log_softmax};
    CLF_ASSERT_OK(api->topk(b, &a));
    CLF_ASSERT_OK(api->download(b, val, P(dv), (size_t)rows * k * 4));
    CLF_ASSERT_OK(api->download(b, idx, P(di), (size_t)rows * k * 4));
    api->free(b, dv), api->free(b, di);
}

START_TEST(topk_best_first_ties_nan_and_base)
{
    static const int shapes[][2] = {{1, 1}, {3, 7}, {2, 65}, {4, 129}, {3, 1000}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (int with_base = 0; with_base < 2; with_base++) {
            const int R = shapes[sh][0], C = shapes[sh][1];
            const int ks[] = {1, 3, C < CLF_TOPK_MAX ? C : CLF_TOPK_MAX};
            float *x = malloc((size_t)R * C * sizeof *x), base[4] = {0.5f, -3.25f, 1e6f, -INFINITY};
            int *order = malloc((size_t)C * sizeof *order);
            float *sums = malloc((size_t)C * sizeof *sums);
            clf_test_fill(x, (size_t)R * C, 70 + (unsigned)sh, -4, 4);
            for (int r = 0; r < R; r++) /* ties, infinities and NaN where the row has room */
                for (int c = 0; c + 9 < C; c += 10) {
                    x[(size_t)r * C + c + 1] = x[(size_t)r * C + c];
                    x[(size_t)r * C + c + 3] = c % 20 ? -INFINITY : INFINITY;
                    x[(size_t)r * C + c + 5] = NAN;
                }
            clf_buffer *dx = clf_test_upload(api, be, x, (size_t)R * C * sizeof *x);
            clf_buffer *db = clf_test_upload(api, be, base, sizeof base);
            for (size_t ki = 0; ki < 3; ki++) {
                const int k = ks[ki] < C ? ks[ki] : C;
                float *val = malloc((size_t)R * k * sizeof *val);
                int32_t *idx = malloc((size_t)R * k * sizeof *idx);
                topk_on(be, dx, with_base ? db : NULL, R, C, k, 0, val, idx);
                for (int r = 0; r < R; r++) {
                    const float b = with_base ? base[r] : 0.0f;
                    for (int c = 0; c < C; c++) {
                        sums[c] = b + x[(size_t)r * C + c];
                        order[c] = c;
                    }
                    topk_sums = sums;
                    qsort(order, (size_t)C, sizeof *order, topk_cmp);
                    for (int j = 0; j < k; j++) {
                        const float v = val[(size_t)r * k + j], w = sums[order[j]];
                        ck_assert_msg(idx[(size_t)r * k + j] == order[j] &&
                                          (v == w || (isnan(v) && isnan(w))),
                                      "topk rows=%d cols=%d k=%d base=%d row %d rank %d: (%g, %d), "
                                      "want (%g, %d)",
                                      R, C, k, with_base, r, j, v, idx[(size_t)r * k + j], w,
                                      order[j]);
                    }
                }
                free(val), free(idx);
            }
            api->free(be, dx), api->free(be, db);
            free(x), free(order), free(sums);
        }
}
END_TEST

/* One continuation of the beam_choose reference: its value, the order it arrived in. */
typedef struct beam_cand {
    float lp;
    int order, k;
    int32_t tok;
} beam_cand;

static int beam_cand_cmp(const void *pa, const void *pb)
{
    const beam_cand *a = pa, *b = pb;
    if (a->lp != b->lp)
        return a->lp > b->lp ? -1 : 1;
    return a->order - b->order;
}

/* beam_choose against a sort: each sentence's live beams' continuations (banned ids left
 * out) sorted by value, equal ones in the order they come (beam, then rank), the first 2K
 * the choices; the first K of those not EOS go on (past them, dead copies of the first;
 * none: EOS from the sentence's first slot); each slot's row table its parent's with
 * pos + 1 its own. K 1..32 (2K = CLF_TOPK_MAX), top_k 2K and 2K + 2 with the banned ids,
 * pos at the table's last column (nothing written there) and before it. No NaN here (the
 * OpenCL suite compares NaN with this backend). */
START_TEST(beam_choose_equals_a_sort)
{
    static const int shapes[][4] = {{1, 2, 0, 0}, {2, 3, 0, 6},  {3, 4, 2, 2},
                                    {4, 3, 2, 4}, {2, 32, 0, 7}, {3, 1, 2, 5}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const int K = shapes[sh][1], n = shapes[sh][0] + (K > 1 ? 2 : 0), n_banned = shapes[sh][2];
        const int top_k = 2 * K + n_banned, ld = 8, pos = shapes[sh][3];
        clf_test_beam t;
        clf_test_beam_make(&t, n, K, top_k, n_banned, ld, pos, 300 + (unsigned)sh, 0);
        const size_t rows = (size_t)n * K;
        int32_t *ch = malloc(rows * 24), *ids = malloc(rows * 4), *rout = malloc(rows * ld * 4);
        float *base = malloc(rows * 4);
        beam_cand *c = malloc(sizeof *c * (size_t)K * top_k);
        clf_test_beam_run(api, be, &t, ch, ids, base, rout);
        for (int s = 0; s < n; s++) {
            int nc = 0, go[CLF_TOPK_MAX], m = 0;
            for (int k = 0; k < K; k++) {
                const size_t row = (size_t)s * K + k;
                if (t.base[row] == -INFINITY)
                    continue;
                for (int j = 0; j < top_k; j++) {
                    const int32_t tok = t.idx[row * top_k + j];
                    if (n_banned && (tok == 5 || tok == 7))
                        continue;
                    c[nc] = (beam_cand){t.val[row * top_k + j], nc, k, tok};
                    nc++;
                }
            }
            qsort(c, (size_t)nc, sizeof *c, beam_cand_cmp);
            const int have = nc < 2 * K ? nc : 2 * K;
            for (int i = 0; i < 2 * K; i++) {
                const int32_t *got = ch + ((size_t)s * 2 * K + i) * 3;
                float lp;
                memcpy(&lp, got, 4);
                if (i < have)
                    ck_assert_msg(lp == c[i].lp && got[1] == c[i].k && got[2] == c[i].tok,
                                  "beam_choose n=%d K=%d sentence %d choice %d: (%g, %d, %d), "
                                  "want (%g, %d, %d)",
                                  n, K, s, i, lp, got[1], got[2], c[i].lp, c[i].k, c[i].tok);
                else
                    ck_assert(got[0] == 0 && got[1] == -1 && got[2] == -1);
                if (i < have && m < K && c[i].tok != 3)
                    go[m++] = i;
            }
            for (int k = 0; k < K; k++) {
                const size_t i = (size_t)s * K + k;
                const beam_cand *w = m > 0 ? &c[go[k < m ? k : 0]] : NULL;
                const int32_t parent = (int32_t)(s * K) + (w ? w->k : 0);
                ck_assert_int_eq(ids[i], w ? w->tok : 3);
                ck_assert_msg(base[i] == (k < m ? w->lp : -INFINITY), "sentence %d beam %d: %g", s,
                              k, base[i]);
                for (int p = 0; p < ld; p++)
                    ck_assert_int_eq(rout[i * ld + p], p == pos + 1
                                                           ? (int32_t)i
                                                           : t.rows_in[(size_t)parent * ld + p]);
            }
        }
        free(ch), free(ids), free(rout), free(base), free(c);
        clf_test_beam_free(&t);
    }
}
END_TEST

/* topk's log_softmax form gives what a log_softmax op into a buffer and a topk over it give,
 * exactly, at every kernel level: logits with ties, -inf, rows holding NaN (first or not). */
START_TEST(topk_log_softmax_equals_log_softmax_then_topk)
{
    static const int shapes[][2] = {{1, 1}, {3, 7}, {2, 65}, {4, 129}, {3, 1000}, {2, 8000}};
    half_backends hb;
    open_half_backends(&hb);
    for (int lv = 0; lv < hb.count; lv++)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
            clf_backend *b = hb.be[lv];
            const int R = shapes[sh][0], C = shapes[sh][1];
            const size_t n = (size_t)R * C;
            float *x = malloc(n * sizeof *x), base[4] = {-0.5f, -3.25f, -1e3f, -INFINITY};
            clf_test_fill(x, n, 90 + (unsigned)sh, -8, 8);
            for (int r = 0; r < R; r++)
                for (int c = 0; c + 9 < C; c += 10) {
                    x[(size_t)r * C + c + 1] = x[(size_t)r * C + c];
                    x[(size_t)r * C + c + 3] = -INFINITY;
                }
            if (R > 2 && C > 6) {
                x[(size_t)1 * C + 6] = NAN; /* a row with NaN inside */
                x[(size_t)2 * C + 0] = NAN; /* a row with NaN first */
            }
            clf_buffer *dx = clf_test_upload(api, b, x, n * 4),
                       *db = clf_test_upload(api, b, base, sizeof base), *dl;
            CLF_ASSERT_OK(api->alloc(b, n * 4, &dl));
            CLF_ASSERT_OK(api->softmax(b, P(dl), P(dx), R, C, 1));
            const int ks[] = {1, 3, C < CLF_TOPK_MAX ? C : CLF_TOPK_MAX};
            for (int ki = 0; ki < 3; ki++)
                for (int with_base = 0; with_base < 2; with_base++) {
                    const int k = ks[ki] < C ? ks[ki] : C;
                    float want_v[4 * CLF_TOPK_MAX], got_v[4 * CLF_TOPK_MAX];
                    int32_t want_i[4 * CLF_TOPK_MAX], got_i[4 * CLF_TOPK_MAX];
                    topk_on(b, dl, with_base ? db : NULL, R, C, k, 0, want_v, want_i);
                    topk_on(b, dx, with_base ? db : NULL, R, C, k, 1, got_v, got_i);
                    for (int e = 0; e < R * k; e++)
                        ck_assert_msg(got_i[e] == want_i[e] &&
                                          (memcmp(&got_v[e], &want_v[e], 4) == 0 ||
                                           (isnan(got_v[e]) && isnan(want_v[e]))),
                                      "topk log_softmax %s, %d threads, rows=%d cols=%d k=%d "
                                      "base=%d entry %d: (%a, %d), want (%a, %d)",
                                      hb.isa[lv], hb.threads[lv], R, C, k, with_base, e,
                                      (double)got_v[e], got_i[e], (double)want_v[e], want_i[e]);
                }
            api->free(b, dx), api->free(b, db), api->free(b, dl);
            free(x);
        }
    close_half_backends(&hb);
}
END_TEST

/* The AVX2 and AVX-512 levels sum a row's exponentials in the same order (cpu_softmax.c),
 * so softmax, log-softmax and topk's log-softmax form give the same bits at both: rows of
 * lengths around the 8- and 16-lane steps and the 512-value blocks, and an output layer's
 * (256,206: NLLB's vocabulary). Skipped where the CPU has no AVX-512. */
START_TEST(softmax_same_bits_at_avx2_and_avx512)
{
    clf_backend *lv[2] = {open_isa("avx2", 2), open_isa("avx512", 2)};
    if (!lv[0] || !lv[1]) {
        fprintf(stderr, "softmax_same_bits_at_avx2_and_avx512: skipped, no AVX-512 here\n");
        for (int i = 0; i < 2; i++)
            if (lv[i])
                api->close(lv[i]);
        return;
    }
    static const int shapes[][2] = {{3, 7}, {2, 23}, {4, 520}, {3, 1031}, {2, 256206}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const int R = shapes[sh][0], C = shapes[sh][1], k = C < 8 ? C : 8;
        const size_t n = (size_t)R * C;
        float *x = malloc(n * 4), *out[2][2];
        float val[2][4 * 8];
        int32_t idx[2][4 * 8];
        clf_test_fill(x, n, 300 + (unsigned)sh, -12, 12);
        for (int l = 0; l < 2; l++) {
            clf_buffer *dx = clf_test_upload(api, lv[l], x, n * 4), *dy;
            CLF_ASSERT_OK(api->alloc(lv[l], n * 4, &dy));
            for (int lg = 0; lg < 2; lg++) {
                out[l][lg] = malloc(n * 4);
                CLF_ASSERT_OK(api->softmax(lv[l], P(dy), P(dx), R, C, lg));
                CLF_ASSERT_OK(api->download(lv[l], out[l][lg], P(dy), n * 4));
            }
            topk_on(lv[l], dx, NULL, R, C, k, 1, val[l], idx[l]);
            api->free(lv[l], dx), api->free(lv[l], dy);
        }
        for (int lg = 0; lg < 2; lg++)
            ck_assert_msg(memcmp(out[0][lg], out[1][lg], n * 4) == 0,
                          "softmax log=%d rows=%d cols=%d: AVX2 and AVX-512 differ", lg, R, C);
        ck_assert_msg(memcmp(val[0], val[1], (size_t)R * k * 4) == 0 &&
                          memcmp(idx[0], idx[1], (size_t)R * k * 4) == 0,
                      "topk log_softmax rows=%d cols=%d: AVX2 and AVX-512 differ", R, C);
        for (int l = 0; l < 2; l++)
            free(out[l][0]), free(out[l][1]);
        free(x);
    }
    api->close(lv[0]), api->close(lv[1]);
}
END_TEST

/* ---- bad arguments ---- */

START_TEST(out_of_bounds_operands_are_refused_by_name)
{
    clf_buffer *small, *big;
    CLF_ASSERT_OK(api->alloc(be, 16, &small));
    CLF_ASSERT_OK(api->alloc(be, 4096, &big));
    clf_gemm_args g = {.m = 4,
                       .n = 4,
                       .k = 4,
                       .alpha = 1,
                       .a = P(big),
                       .lda = 4,
                       .b = P(big),
                       .ldb = 4,
                       .c = P(small),
                       .ldc = 4};
    ck_assert_int_eq(clf_op_gemm(api, be, &g), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "gemm") && strstr(clf_last_error(), "'c'"), "%s",
                  clf_last_error());
    g.c = (clf_ptr){big, 2}; /* misaligned */
    ck_assert_int_eq(clf_op_gemm(api, be, &g), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "aligned"), "%s", clf_last_error());
    g.c = P(big);
    g.lda = 3; /* below k */
    ck_assert_int_eq(clf_op_gemm(api, be, &g), CLF_ERR_INPUT);
    ck_assert_int_eq(clf_op_softmax(api, be, P(small), P(small), 2, 4, 0), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "softmax"), "%s", clf_last_error());
    ck_assert_int_eq(clf_op_download(api, be, (float[8]){0}, P(small), 32), CLF_ERR_INPUT);
    clf_layernorm_args ln = {.out = P(big),
                             .x = P(big),
                             .alpha = P(big),
                             .beta = P(big),
                             .rows = 2,
                             .cols = 4,
                             .eps = 1e-6f};
    ck_assert_int_eq(clf_op_layernorm(api, be, &ln), CLF_ERR_INPUT); /* out aliases x */
    /* attention's row table: its stride below kv_len, no entries, a table past its buffer;
     * and the backward, which has none */
    clf_attention_args at = {.batch = 2,
                             .heads = 1,
                             .q_len = 1,
                             .kv_len = 3,
                             .head_dim = 4,
                             .q = P(big),
                             .k = P(big),
                             .v = P(big),
                             .out = P(big),
                             .q_ld = 4,
                             .k_ld = 4,
                             .v_ld = 4,
                             .out_ld = 4,
                             .q_bstride = 4,
                             .kv_bstride = 12,
                             .out_bstride = 4,
                             .scale = 0.5f,
                             .kv_rows = P(small),
                             .kv_rows_ld = 2,
                             .kv_entries = 2};
    ck_assert_int_eq(clf_op_attention(api, be, &at), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "kv_rows_ld=2"), "%s", clf_last_error());
    at.kv_rows_ld = 3;
    at.kv_entries = 0;
    ck_assert_int_eq(clf_op_attention(api, be, &at), CLF_ERR_INPUT);
    at.kv_entries = 2;
    at.kv_rows_ld = 4; /* 2 rows of 4 ints: 32 bytes, the buffer holds 16 */
    ck_assert_int_eq(clf_op_attention(api, be, &at), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "'kv_rows'"), "%s", clf_last_error());
    at.kv_rows_ld = 3;
    at.batch = 1;
    at.out = clf_ptr_add(P(big), 2048);
    CLF_ASSERT_OK(clf_op_attention(api, be, &at));
    clf_attention_backward_args ab = {.fwd = at,
                                      .dout = P(big),
                                      .dq = clf_ptr_add(P(big), 1024),
                                      .dk = clf_ptr_add(P(big), 2048),
                                      .dv = clf_ptr_add(P(big), 3072)};
    ck_assert_int_eq(clf_op_attention_backward(api, be, &ab), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "kv_rows"), "%s", clf_last_error());
    /* the append: both rows, one query, new_pos inside the keys, a stride that holds a row,
     * rows inside their buffer and clear of the keys they are written to; the backward */
    at.k_new = clf_ptr_add(P(big), 3072);
    ck_assert_int_eq(clf_op_attention(api, be, &at), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "v_new"), "%s", clf_last_error());
    at.v_new = clf_ptr_add(P(big), 3200);
    at.new_ld = 4;
    at.new_pos = -1;
    ck_assert_int_eq(clf_op_attention(api, be, &at), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "new_pos"), "%s", clf_last_error());
    at.new_pos = 256; /* byte 4096: the appended row is past k's buffer */
    ck_assert_int_eq(clf_op_attention(api, be, &at), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "appended rows"), "%s", clf_last_error());
    at.new_pos = INT32_MAX; /* far past it */
    ck_assert_int_eq(clf_op_attention(api, be, &at), CLF_ERR_INPUT);
    at.new_pos = 2;
    at.new_ld = 3;
    ck_assert_int_eq(clf_op_attention(api, be, &at), CLF_ERR_INPUT);
    at.new_ld = 4;
    at.q_len = 2;
    ck_assert_int_eq(clf_op_attention(api, be, &at), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "q_len = 1"), "%s", clf_last_error());
    at.q_len = 1;
    at.v_new = clf_ptr_add(P(big), 4088); /* 4 floats from byte 4088 of 4096 */
    ck_assert_int_eq(clf_op_attention(api, be, &at), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "'v_new'"), "%s", clf_last_error());
    at.v_new = clf_ptr_add(P(big), 32); /* row 2 of entry 0: where k's row is appended */
    ck_assert_int_eq(clf_op_attention(api, be, &at), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "overlaps"), "%s", clf_last_error());
    at.v_new = clf_ptr_add(P(big), 3200);
    CLF_ASSERT_OK(clf_op_attention(api, be, &at));
    ab.fwd = at;
    ab.fwd.kv_rows = (clf_ptr){0};
    ck_assert_int_eq(clf_op_attention_backward(api, be, &ab), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "k_new"), "%s", clf_last_error());
    ck_assert_int_eq(api->supports(be, CLF_OP_COUNT), 0);
    ck_assert_int_eq(api->supports(be, (clf_op)-1), 0);
    ck_assert_int_eq(api->supports(be, CLF_OP_ATTENTION), 1);
    api->free(be, small), api->free(be, big);
}
END_TEST

START_TEST(threads_option_and_unknown_device)
{
    clf_backend *b2 = NULL;
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .threads = 1};
    CLF_ASSERT_OK(api->open(&o, &b2));
    char desc[256];
    CLF_ASSERT_OK(api->describe(b2, desc, sizeof desc));
    ck_assert_msg(strstr(desc, "1 threads"), "%s", desc);
    api->close(b2);
    o.device = "7";
    ck_assert_int_eq(api->open(&o, &b2), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "'7'"), "%s", clf_last_error());
}
END_TEST

/* The backend names the OpenBLAS build the loader found; where CMake found the OpenMP
 * build (CLF_OPENBLAS_OPENMP), the backend's RUNPATH must have made the loader pick it over
 * the system's default pthreads build, whose second thread pool spins against OpenMP's. */
START_TEST(openblas_build_is_named_and_shares_openmp_threads)
{
    char desc[256];
    CLF_ASSERT_OK(api->describe(be, desc, sizeof desc));
#ifdef CLF_OPENBLAS_OPENMP
    ck_assert_msg(strstr(desc, "(OpenMP)"), "not OpenBLAS's OpenMP build: %s", desc);
#else
    ck_assert_msg(strstr(desc, "(OpenMP)") || strstr(desc, "(pthreads)") ||
                      strstr(desc, "(sequential)"),
                  "%s", desc);
#endif
}
END_TEST

CLF_TEST_SUITE_MAIN(
    "ops",
    CLF_TCASE_FIXTURE(
        "cpu", 0, setup, teardown, {null_arguments_are_refused}, {gemm_refuses_c_over_its_inputs},
        {gemm_all_transposes_and_epilogues}, {gemm_strided_batched_matches_per_matrix_reference},
        {gemm_from_b_half_every_isa_level}, {gemm_f32_few_rows_every_isa_level},
        {gemm_ignores_b_half_where_it_does_not_apply}, {gemm_refuses_a_bad_b_half},
        {gemm_layernorm_equals_layernorm_then_gemm}, {unknown_cpu_isa_is_refused},
        {gemm_bf16_arithmetic}, {layernorm_both_styles_residual_and_aliased_sum},
        {attention_masks_strides_and_probs}, {attention_decode_every_isa_level},
        {attention_trimmed_keys_change_no_bit}, {attention_fully_masked_row_is_uniform},
        {attention_append_equals_rows_written_first}, {embed_scale_pe_and_clamped_ids},
        {add_with_aliasing}, {softmax_and_log_softmax_in_place}, {argmax_first_maximum},
        {topk_best_first_ties_nan_and_base}, {topk_log_softmax_equals_log_softmax_then_topk},
        {softmax_same_bits_at_avx2_and_avx512}, {beam_choose_equals_a_sort},
        {out_of_bounds_operands_are_refused_by_name}, {threads_option_and_unknown_device},
        {openblas_build_is_named_and_shares_openmp_threads}))
