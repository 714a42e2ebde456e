/* The OpenCL backend's GEMM: gemm and gemm_strided_batched (CLBlast) on random inputs of
 * awkward sizes (1, 7, 33, 65, 129: non-multiples of CLBlast's tiles), every transpose,
 * alpha/beta, bias and relu, compared with a host reference in double and with the CPU
 * backend; the few-row products of the backend's own kernels (gemm_rows_float, and
 * gemm reading b_half, B as F16, against the host reference only).
 * Without an OpenCL device the suite says why and exits 77 (ctest: skipped; a failure with
 * CLF_TEST_REQUIRE_OPENCL=1). */
#include "opencl_testutil.h"

#include "clformer/tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- gemm ---- */

typedef struct gemm_case {
    int ta, tb, m, n, k, batch; /* batch 0: plain gemm */
    float alpha, beta;
    int bias, relu;
    int pad, off; /* extra leading-dimension elements, operand offsets (elements) */
} gemm_case;

static void run_gemm(bk *k, const clf_gemm_args *tmpl, int batched, const float *A, size_t na,
                     const float *B, size_t nb, const float *bias, size_t nbias, float *C,
                     size_t nc)
{
    clf_buffer *ba = up(k, A, na * 4), *bb = up(k, B, nb * 4), *bc = up(k, C, nc * 4);
    clf_buffer *bbias = bias ? up(k, bias, nbias * 4) : NULL;
    clf_gemm_args g = *tmpl;
    g.a.buf = ba;
    g.b.buf = bb;
    g.c.buf = bc;
    g.bias.buf = bbias;
    CLF_ASSERT_OK(batched ? k->api->gemm_strided_batched(k->be, &g) : k->api->gemm(k->be, &g));
    down(k, C, bc, nc * 4);
    k->api->free(k->be, ba);
    k->api->free(k->be, bb);
    k->api->free(k->be, bc);
    if (bbias)
        k->api->free(k->be, bbias);
}

static void check_gemm_case(const gemm_case *t, unsigned seed)
{
    if (clf_test_too_big((double)t->m * t->n * t->k * (t->batch > 0 ? t->batch : 1)))
        return;
    int batched = t->batch > 0, batch = batched ? t->batch : 1;
    int a_rows = t->ta ? t->k : t->m, a_cols = t->ta ? t->m : t->k;
    int b_rows = t->tb ? t->n : t->k, b_cols = t->tb ? t->k : t->n;
    clf_gemm_args g = {.trans_a = t->ta,
                       .trans_b = t->tb,
                       .m = t->m,
                       .n = t->n,
                       .k = t->k,
                       .alpha = t->alpha,
                       .beta = t->beta,
                       .relu = t->relu,
                       .batch = t->batch};
    g.lda = a_cols + t->pad;
    g.ldb = b_cols + t->pad;
    g.ldc = t->n + t->pad;
    /* batch matrices apart by more than their size, so strides are really used */
    g.stride_a = batched ? (size_t)a_rows * g.lda + 3 : 0;
    g.stride_b = batched ? (size_t)b_rows * g.ldb + 5 : 0;
    g.stride_c = batched ? (size_t)t->m * g.ldc + 2 : 0;
    g.a.off = g.b.off = g.c.off = (size_t)t->off * 4;
    g.bias.off = (size_t)t->off * 4;
    size_t na = t->off + (batch - 1) * g.stride_a + (size_t)a_rows * g.lda + 1;
    size_t nb = t->off + (batch - 1) * g.stride_b + (size_t)b_rows * g.ldb + 1;
    size_t nc = t->off + (batch - 1) * g.stride_c + (size_t)t->m * g.ldc + 1;
    size_t nbias = t->off + (size_t)t->n;
    float *A = clf_test_frand(na, seed, -1, 1), *B = clf_test_frand(nb, seed + 1, -1, 1);
    float *C0 = clf_test_frand(nc, seed + 2, -1, 1),
          *bias = t->bias ? clf_test_frand(nbias, seed + 3, -1, 1) : NULL;
    float *want = fdup(C0, nc), *got = fdup(C0, nc), *got_cpu = fdup(C0, nc);
    char what[160];
    snprintf(what, sizeof what,
             "%s ta=%d tb=%d m=%d n=%d k=%d batch=%d alpha=%g beta=%g bias=%d relu=%d pad=%d "
             "off=%d",
             batched ? "gemm_strided_batched" : "gemm", t->ta, t->tb, t->m, t->n, t->k, t->batch,
             t->alpha, t->beta, t->bias, t->relu, t->pad, t->off);

    clf_test_ref_gemm(&g, batch, A, B, bias, want);
    run_gemm(&ocl, &g, batched, A, na, B, nb, bias, nbias, got, nc);
    run_gemm(&cpu, &g, batched, A, na, B, nb, bias, nbias, got_cpu, nc);
    expect_close_both(got, want, got_cpu, nc, TOL_GEMM, what);
    free(A);
    free(B);
    free(C0);
    free(bias);
    free(want);
    free(got);
    free(got_cpu);
}

START_TEST(test_gemm)
{
    /* every size on every axis at least once, each with the four transpose combinations */
    static const int mnk[][3] = {{1, 1, 1},    {7, 33, 65},  {65, 7, 33}, {33, 129, 7},
                                 {129, 65, 1}, {1, 129, 33}, {129, 1, 7}, {65, 65, 129}};
    int v = 0;
    for (size_t s = 0; s < sizeof mnk / sizeof mnk[0]; s++) {
        for (int tr = 0; tr < 4; tr++, v++) {
            gemm_case t = {
                .ta = tr & 1, .tb = tr >> 1, .m = mnk[s][0], .n = mnk[s][1], .k = mnk[s][2]};
            /* cycle the epilogue and scaling variants over the shapes */
            t.alpha = v % 3 == 0 ? 1.0f : 0.5f;
            t.beta = v % 4 == 1 ? 0.75f : 0.0f;
            t.bias = v % 2 == 0;
            t.relu = v % 3 != 1;
            t.pad = v % 5 == 2 ? 3 : 0;
            t.off = v % 3 == 2 ? 5 : 0;
            check_gemm_case(&t, 100 + (unsigned)v);
        }
    }
}
END_TEST

START_TEST(test_gemm_edge)
{
    /* beta = 0 ignores C (BLAS semantics), even when it holds NaN: 7 rows and one, B
     * stored [k, n] (CLBlast's GEMM and, for one row, its GEMV) and as a Linear layer's
     * [n, k] (the backend's gemm_rows_float kernel) */
    int n = 7 * 33;
    float *nan_c = malloc(n * sizeof *nan_c);
    for (int i = 0; i < n; i++)
        nan_c[i] = NAN;
    float *A = clf_test_frand(7 * 65, 1, -1, 1), *B = clf_test_frand(65 * 33, 2, -1, 1),
          *bias = clf_test_frand(33, 3, -1, 1);
    float *want = fdup(nan_c, n), *got = fdup(nan_c, n), *cgot = fdup(nan_c, n);
    for (int tb = 0; tb < 2; tb++) {
        for (int m = 7; m >= 1; m -= 6) {
            clf_gemm_args g = {.trans_b = tb,
                               .m = m,
                               .n = 33,
                               .k = 65,
                               .alpha = 1,
                               .beta = 0,
                               .lda = 65,
                               .ldb = tb ? 65 : 33,
                               .ldc = 33};
            const int nc = m * 33;
            for (int i = 0; i < nc; i++)
                want[i] = got[i] = cgot[i] = NAN;
            clf_test_ref_gemm(&g, 1, A, B, NULL, want);
            run_gemm(&ocl, &g, 0, A, (size_t)m * 65, B, 65 * 33, NULL, 0, got, nc);
            run_gemm(&cpu, &g, 0, A, (size_t)m * 65, B, 65 * 33, NULL, 0, cgot, nc);
            char what[64];
            snprintf(what, sizeof what, "gemm tb=%d m=%d beta=0 over NaN", tb, m);
            expect_close_both(got, want, cgot, nc, TOL_GEMM, what);
        }
    }

    /* k = 0: C = beta * C + bias, relu (CLBlast itself refuses k = 0) */
    clf_gemm_args z = {.m = 7,
                       .n = 33,
                       .k = 0,
                       .alpha = 1,
                       .beta = 0.5f,
                       .lda = 1,
                       .ldb = 33,
                       .ldc = 33,
                       .relu = 1};
    float *C = clf_test_frand(n, 4, -1, 1), *wz = fdup(C, n), *gz = fdup(C, n), *cz = fdup(C, n);
    clf_test_ref_gemm(&z, 1, A, B, bias, wz);
    run_gemm(&ocl, &z, 0, A, 7 * 65, B, 65 * 33, bias, 33, gz, n);
    run_gemm(&cpu, &z, 0, A, 7 * 65, B, 65 * 33, bias, 33, cz, n);
    expect_close(gz, wz, n, TOL_GEMM, "gemm k=0", "host reference");
    expect_close(gz, cz, n, TOL_GEMM, "gemm k=0", "cpu backend");

    /* m = 0 and batch = 0 do nothing and succeed */
    clf_buffer *b = up(&ocl, C, n * 4);
    clf_gemm_args none = {.m = 0,
                          .n = 33,
                          .k = 5,
                          .lda = 5,
                          .ldb = 33,
                          .ldc = 33,
                          .a = {b, 0},
                          .b = {b, 0},
                          .c = {b, 0}};
    CLF_ASSERT_OK(ocl.api->gemm(ocl.be, &none));
    none.m = 3;
    none.batch = 0;
    CLF_ASSERT_OK(ocl.api->gemm_strided_batched(ocl.be, &none));
    ocl.api->free(ocl.be, b);
    free(nan_c);
    free(A);
    free(B);
    free(bias);
    free(want);
    free(got);
    free(cgot);
    free(C);
    free(wz);
    free(gz);
    free(cz);
}
END_TEST

/* A Linear layer's product of 1..7 rows (A not transposed, B [n, k]) runs in the backend's
 * gemm_rows_float kernel rather than CLBlast: every k from under one 8-float chunk to long
 * rows with a k % 8 tail, every row count, row 8 (back in CLBlast), the epilogue variants,
 * padded leading dimensions and offsets (beta = 0 over a C of NaN: test_gemm_edge). */
START_TEST(test_gemm_rows)
{
    static const int ks[] = {1, 7, 8, 33, 64, 65, 263, 1031};
    static const int ms[] = {1, 2, 3, 7, 8};
    static const int ns[] = {1, 7, 33, 65, 300};
    int v = 0;
    for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ik++) {
        for (size_t im = 0; im < sizeof ms / sizeof ms[0]; im++, v++) {
            gemm_case t = {.ta = 0, .tb = 1, .m = ms[im], .n = ns[v % 5], .k = ks[ik]};
            t.alpha = v % 3 == 0 ? 1.0f : v % 3 == 1 ? 0.5f : -1.25f;
            t.beta = v % 2 == 0 ? 0.0f : 0.75f;
            t.bias = v % 4 < 2;
            t.relu = v % 3 == 2;
            t.pad = v % 4 == 1 || v % 4 == 2 ? 3 : 0;
            t.off = (v / 2) % 2 ? 5 : 0;
            check_gemm_case(&t, 500 + (unsigned)v);
        }
    }
}
END_TEST

START_TEST(test_gemm_strided_batched)
{
    int v = 0;
    for (int s = 0; s < NSIZES; s++) {
        for (int tr = 0; tr < 4; tr++, v++) {
            /* the attention shapes: [T, dk] x [dk, T] and [T, T] x [T, dk] per head */
            gemm_case t = {.ta = tr & 1,
                           .tb = tr >> 1,
                           .m = sizes[s],
                           .n = sizes[(s + 2) % 5],
                           .k = sizes[(s + 4) % 5],
                           .batch = 1 + (v % 4)};
            t.alpha = v % 2 ? 0.125f : 1.0f;
            t.beta = v % 3 == 0 ? 1.0f : 0.0f;
            t.bias = v % 2 == 0;
            t.relu = v % 4 == 3;
            t.off = v % 3 == 1 ? 7 : 0;
            check_gemm_case(&t, 300 + (unsigned)v);
        }
    }
}
END_TEST

/* ---- gemm reading b_half ---- */

/* A Linear layer's product C = alpha A W^T + beta C (+ bias, relu), W [n, k] given twice:
 * as b (F32) and as b_half (F16). */
typedef struct half_case {
    int m, n, k;
    float alpha, beta; /* beta 0: C starts as NaN, which must not reach the result */
    int bias, relu;
    int pad, off; /* extra leading-dimension elements; operand offsets in elements */
} half_case;

/* x rounded to the nearest halves (malloc'd). */
static uint16_t *to_half(const float *x, size_t n)
{
    uint16_t *h = malloc(n * sizeof *h);
    ck_assert_ptr_nonnull(h);
    for (size_t i = 0; i < n; i++)
        h[i] = clf_float_to_half(x[i]);
    return h;
}

/* run_gemm on the OpenCL backend with Bh (nh halves) uploaded as g's b_half. */
static void run_gemm_with_half(const clf_gemm_args *tmpl, const float *A, size_t na, const float *B,
                               size_t nb, const uint16_t *Bh, size_t nh, const float *bias,
                               size_t nbias, float *C, size_t nc)
{
    clf_gemm_args g = *tmpl;
    g.b_half.buf = up(&ocl, Bh, nh * sizeof *Bh);
    run_gemm(&ocl, &g, 0, A, na, B, nb, bias, nbias, C, nc);
    ocl.api->free(ocl.be, g.b_half.buf);
}

/* want = C0 with the product over g's region from A and Bh (halves) in double; scale[i]
 * = |alpha| sum|a b| + |beta c| + |bias| there (the size of what was added), -1 outside
 * the region (where C must keep its bits). */
static void ref_gemm_half(const clf_gemm_args *g, const float *A, const uint16_t *Bh,
                          const float *bias, const float *C0, size_t nc, int a_half, double *want,
                          double *scale)
{
    for (size_t i = 0; i < nc; i++) {
        want[i] = C0[i];
        scale[i] = -1;
    }
    const float *a = A + g->a.off / 4;
    const uint16_t *bh = Bh + g->b_half.off / 2;
    for (int r = 0; r < g->m; r++) {
        for (int j = 0; j < g->n; j++) {
            double s = 0, abs_s = 0;
            for (int p = 0; p < g->k; p++) {
                float x = a[(size_t)r * g->lda + p];
                if (a_half) /* F16 arithmetic: A rounded as well */
                    x = clf_half_to_float(clf_float_to_half(x));
                double t = (double)x * clf_half_to_float(bh[(size_t)j * g->ldb + p]);
                s += t;
                abs_s += fabs(t);
            }
            size_t ij = g->c.off / 4 + (size_t)r * g->ldc + j;
            double v = g->alpha * s, sc = fabs(g->alpha) * abs_s;
            if (g->beta != 0.0f) {
                v += g->beta * (double)C0[ij];
                sc += fabs(g->beta * (double)C0[ij]);
            }
            if (bias) {
                v += bias[g->bias.off / 4 + j];
                sc += fabs(bias[g->bias.off / 4 + j]);
            }
            want[ij] = g->relu && v < 0 ? 0 : v;
            scale[ij] = sc;
        }
    }
}

/* The worst |got - want| / scale over the region (see ref_gemm_half); fails the test at
 * once if an element outside it changed. */
static double half_err(const float *got, const double *want, const double *scale, size_t nc,
                       const char *what)
{
    double worst = 0;
    for (size_t i = 0; i < nc; i++) {
        if (scale[i] < 0) {
            float w = (float)want[i];
            ck_assert_msg(memcmp(&got[i], &w, sizeof w) == 0,
                          "%s: element %zu outside C's region changed: %g, was %g", what, i,
                          (double)got[i], (double)w);
            continue;
        }
        double d = fabs(got[i] - want[i]);
        double e = d == 0 ? 0 : scale[i] > 0 ? d / scale[i] : INFINITY; /* NaN fails too */
        if (!(e <= worst))
            worst = e;
    }
    return worst;
}

/* One case: b is 2 W in F32 and b_half is W in F16, so that reading b instead of b_half
 * is off by a factor 2. With a_half, the reference rounds A to F16 too (gemm in F16
 * arithmetic), and the bound is tol. */
static double check_half_case(const half_case *t, unsigned seed, int a_half, double tol)
{
    if (clf_test_too_big((double)t->m * t->n * t->k))
        return 0;
    clf_gemm_args g = {.trans_b = 1,
                       .m = t->m,
                       .n = t->n,
                       .k = t->k,
                       .alpha = t->alpha,
                       .beta = t->beta,
                       .relu = t->relu,
                       .lda = t->k + t->pad,
                       .ldb = t->k + t->pad,
                       .ldc = t->n + t->pad};
    size_t off = (size_t)t->off;
    g.a.off = g.b.off = g.c.off = g.bias.off = off * 4;
    g.b_half.off = off * 2; /* the same element offset as b, in the F16 buffer */
    size_t na = off + (size_t)t->m * g.lda + 1, nb = off + (size_t)t->n * g.ldb + 1;
    size_t nc = off + (size_t)t->m * g.ldc + 1, nbias = off + (size_t)t->n;
    float *A = clf_test_frand(na, seed, -1, 1), *W = clf_test_frand(nb, seed + 1, -1, 1);
    float *B2 = fdup(W, nb), *C0 = clf_test_frand(nc, seed + 2, -1, 1);
    float *bias = t->bias ? clf_test_frand(nbias, seed + 3, -1, 1) : NULL;
    for (size_t i = 0; i < nb; i++)
        B2[i] *= 2;
    if (t->beta == 0.0f)
        for (size_t i = 0; i < nc; i++)
            C0[i] = NAN;
    uint16_t *Wh = to_half(W, nb);
    double *want = clf_test_dalloc(nc), *scale = clf_test_dalloc(nc);
    float *got = fdup(C0, nc);
    char what[160];
    snprintf(what, sizeof what,
             "gemm b_half m=%d n=%d k=%d alpha=%g beta=%g bias=%d relu=%d pad=%d off=%d", t->m,
             t->n, t->k, t->alpha, t->beta, t->bias, t->relu, t->pad, t->off);

    ref_gemm_half(&g, A, Wh, bias, C0, nc, a_half, want, scale);
    run_gemm_with_half(&g, A, na, B2, nb, Wh, nb, bias, nbias, got, nc);
    double e = half_err(got, want, scale, nc, what);
    ck_assert_msg(e <= tol, "%s: error %.3g of sum|terms| > %.3g", what, e, tol);
    free(A);
    free(W);
    free(B2);
    free(C0);
    free(bias);
    free(Wh);
    free(want);
    free(scale);
    free(got);
    return e;
}

/* check_half_case over every k of ks[0..nk) with every m of ms[0..nm) in turn, n, alpha,
 * beta, the bias, relu, the padding and the offsets varying with the case; seeds from
 * seed. The worst error. */
static double check_half_cases(const int *ms, int nm, const int *ks, int nk, const int *ns,
                               unsigned seed, int a_half, double tol)
{
    double worst = 0;
    int v = 0;
    for (int ik = 0; ik < nk; ik++) {
        for (int im = 0; im < nm; im++, v++) {
            half_case t = {.m = ms[im], .n = ns[v % 5], .k = ks[ik]};
            t.alpha = v % 3 == 0 ? 1.0f : v % 3 == 1 ? 0.5f : -1.25f;
            t.beta = v % 2 == 0 ? 0.0f : 1.0f;
            t.bias = v % 4 < 2;
            t.relu = v % 3 == 2;
            t.pad = v % 4 == 1 || v % 4 == 2 ? 3 : 0;
            t.off = (v / 2) % 2 ? 5 : 0;
            worst = fmax(worst, check_half_case(&t, seed + (unsigned)v, a_half, tol));
        }
    }
    return worst;
}

START_TEST(test_gemm_half)
{
    /* k: shorter than one 8-half chunk, a multiple of 8 (with offset 0 and no pad every row
     * is 16-byte aligned: no scalar head or tail), and long rows with both */
    static const int ks[] = {1, 7, 8, 33, 64, 65, 263, 1031};
    static const int ms[] = {1, 2, 3, 7};
    static const int ns[5] = {1, 7, 33, 65, 300};
    const double worst = check_half_cases(ms, 4, ks, 8, ns, 700, 0, TOL_GEMM_HALF);
    printf("test_gemm_half: worst error %.3g of sum|terms| (tolerance %.3g)\n", worst,
           TOL_GEMM_HALF);
}
END_TEST

/* gemm with b_half from 8 rows on: in F16 arithmetic (CLBlast's HGEMM) where the backend
 * uses it (a GPU with cl_khr_fp16; CLF_OPENCL_HGEMM=on: any device with it), which the
 * cases check against A and B rounded to F16; elsewhere, and with fp16 capped off
 * ($CLF_OPENCL_LIMITS fp16=0), from b (test_gemm_half_ignored). */
START_TEST(test_gemm_half_arith)
{
    if (!ocl.api->supports(ocl.be, CLF_OP_GEMM_HALF_ARITH)) {
        printf("test_gemm_half_arith: no HGEMM on this device (no cl_khr_fp16, or not a GPU "
               "and CLF_OPENCL_HGEMM is not on): products of 8+ rows read b "
               "(test_gemm_half_ignored)\n");
        return;
    }
    /* m: just past the few-row kernels, odd, a decoding batch, beyond CLBlast's tiles; k
     * from one element to a feed-forward layer's 2048 */
    static const int ms[] = {8, 9, 33, 130};
    static const int ks[] = {1, 7, 64, 65, 513, 2048};
    static const int ns[5] = {1, 17, 64, 300, 513};
    const double worst = check_half_cases(ms, 4, ks, 6, ns, 1700, 1, TOL_GEMM_HALF_ARITH);
    printf("test_gemm_half_arith: worst error %.3g of sum|terms| (tolerance %.3g)\n", worst,
           TOL_GEMM_HALF_ARITH);

    /* fp16 capped off: the same backend computes from b (F32) */
    setenv("CLF_OPENCL_LIMITS", "fp16=0", 1);
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE")};
    clf_backend *capped = NULL, *orig = ocl.be;
    CLF_ASSERT_OK(ocl.api->open(&o, &capped));
    unsetenv("CLF_OPENCL_LIMITS");
    ck_assert_int_eq(ocl.api->supports(capped, CLF_OP_GEMM_HALF_ARITH), 0);
    ocl.be = capped;
    half_case t = {.m = 9, .n = 33, .k = 65, .alpha = 1.0f, .bias = 1};
    clf_gemm_args g = {.trans_b = 1,
                       .m = t.m,
                       .n = t.n,
                       .k = t.k,
                       .alpha = 1.0f,
                       .lda = t.k,
                       .ldb = t.k,
                       .ldc = t.n};
    size_t na = (size_t)t.m * t.k, nb = (size_t)t.n * t.k, nc = (size_t)t.m * t.n;
    float *A = clf_test_frand(na, 1950, -1, 1), *B = clf_test_frand(nb, 1951, -1, 1);
    float *bias = clf_test_frand((size_t)t.n, 1952, -1, 1);
    float *want = calloc(nc, sizeof *want), *got = calloc(nc, sizeof *got);
    uint16_t *nan_h = malloc(nb * sizeof *nan_h);
    ck_assert(want && got && nan_h);
    for (size_t i = 0; i < nb; i++)
        nan_h[i] = 0x7e00; /* a quiet NaN: must not show */
    clf_test_ref_gemm(&g, 1, A, B, bias, want);
    run_gemm_with_half(&g, A, na, B, nb, nan_h, nb, bias, (size_t)t.n, got, nc);
    expect_close(got, want, nc, TOL_GEMM, "gemm with fp16=0 ignoring b_half", "host reference");
    ocl.be = orig;
    ocl.api->close(capped);
    free(A);
    free(B);
    free(bias);
    free(want);
    free(got);
    free(nan_h);
}
END_TEST

/* Where gemm does not read b_half it computes from b: b_half all NaN must not show. */
START_TEST(test_gemm_half_ignored)
{
    /* 8 rows (CLBlast's SGEMM, unless the device has F16 arithmetic: test_gemm_half_arith),
     * trans_b = 0, trans_a = 1 (the one-row GEMV and CLBlast) */
    static const int shapes[][4] = {{8, 33, 65, 1}, {1, 33, 65, 0}, {3, 7, 33, 0}};
    const int half_arith = ocl.api->supports(ocl.be, CLF_OP_GEMM_HALF_ARITH);
    for (size_t s = half_arith ? 1 : 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], tb = shapes[s][3];
        int ta = s == 2;
        clf_gemm_args g = {.trans_a = ta,
                           .trans_b = tb,
                           .m = m,
                           .n = n,
                           .k = k,
                           .alpha = 0.5f,
                           .beta = 1,
                           .lda = ta ? m : k,
                           .ldb = tb ? k : n,
                           .ldc = n};
        size_t na = (size_t)m * k, nb = (size_t)n * k, nc = (size_t)m * n;
        float *A = clf_test_frand(na, 900 + s, -1, 1), *B = clf_test_frand(nb, 910 + s, -1, 1);
        float *C = clf_test_frand(nc, 920 + s, -1, 1), *bias = clf_test_frand(n, 930 + s, -1, 1);
        float *want = fdup(C, nc), *got = fdup(C, nc);
        uint16_t *nan_h = malloc(nb * sizeof *nan_h);
        ck_assert_ptr_nonnull(nan_h);
        for (size_t i = 0; i < nb; i++)
            nan_h[i] = 0x7e00; /* a quiet NaN */
        clf_test_ref_gemm(&g, 1, A, B, bias, want);
        run_gemm_with_half(&g, A, na, B, nb, nan_h, nb, bias, n, got, nc);
        char what[96];
        snprintf(what, sizeof what, "gemm ignoring b_half ta=%d tb=%d m=%d n=%d k=%d", ta, tb, m, n,
                 k);
        expect_close(got, want, nc, TOL_GEMM, what, "host reference");
        free(A);
        free(B);
        free(C);
        free(bias);
        free(want);
        free(got);
        free(nan_h);
    }
}
END_TEST

/* gemm with ln_out (A's rows layer-normalized first): 1..7 rows in the _ln kernels, which
 * normalize A themselves (one work-group also writing ln_out), 8 and 9 rows as a layernorm
 * launch then CLBlast; F32 and F16 B, both styles, rows with a large mean; C and ln_out
 * against the CPU backend (which runs the layernorm op, then the product). */
START_TEST(test_gemm_layernorm)
{
    static const int ks[] = {7, 64, 65, 263};
    static const int ms[] = {1, 3, 7, 8, 9};
    int v = 0;
    for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ik++)
        for (size_t im = 0; im < sizeof ms / sizeof ms[0]; im++, v++) {
            const int m = ms[im], k = ks[ik], n = 33 + v % 5, half = v % 2;
            clf_gemm_args g = {.trans_b = 1,
                               .m = m,
                               .n = n,
                               .k = k,
                               .alpha = 1.0f,
                               .beta = v % 3 == 0 ? 1.0f : 0.0f,
                               .lda = k,
                               .ldb = k,
                               .ldc = n,
                               .relu = v % 4 == 1,
                               .ln_style = v / 2 % 2 ? CLF_LN_STANDARD : CLF_LN_TUTORIAL,
                               .ln_eps = 1e-6f};
            const size_t na = (size_t)m * g.lda, nb = (size_t)n * k, nc = (size_t)m * n,
                         nn = (size_t)m * k;
            float *A = clf_test_frand(na, 2000 + v, -1, 1),
                  *B = clf_test_frand(nb, 2100 + v, -1, 1),
                  *C = clf_test_frand(nc, 2200 + v, -1, 1),
                  *bias = clf_test_frand(n, 2300 + v, -1, 1),
                  *al = clf_test_frand(k, 2400 + v, 0.5f, 1.5f),
                  *bt = clf_test_frand(k, 2500 + v, -1, 1);
            for (size_t i = 0; v % 5 == 4 && i < na; i++)
                A[i] += 100.0f; /* a large mean, a small spread */
            uint16_t *H = to_half(B, nb);
            float *gotc[2] = {fdup(C, nc), fdup(C, nc)}, *gotn[2] = {calloc(nn, 4), calloc(nn, 4)};
            bk *ks2[2] = {&ocl, &cpu};
            for (int w = 0; w < 2; w++) {
                bk *kk = ks2[w];
                clf_buffer *ba = up(kk, A, na * 4), *bb = up(kk, B, nb * 4),
                           *bh = up(kk, H, nb * 2), *bc = up(kk, C, nc * 4),
                           *bbias = up(kk, bias, (size_t)n * 4), *bal = up(kk, al, (size_t)k * 4),
                           *bbt = up(kk, bt, (size_t)k * 4), *bn = up(kk, NULL, nn * 4);
                clf_gemm_args h = g;
                h.a = (clf_ptr){ba, 0}, h.b = (clf_ptr){bb, 0}, h.c = (clf_ptr){bc, 0};
                h.bias = (clf_ptr){bbias, 0};
                h.b_half = half ? (clf_ptr){bh, 0} : (clf_ptr){0};
                h.ln_out = (clf_ptr){bn, 0}, h.ln_alpha = (clf_ptr){bal, 0};
                h.ln_beta = (clf_ptr){bbt, 0};
                CLF_ASSERT_OK(clf_op_gemm(kk->api, kk->be, &h));
                down(kk, gotc[w], bc, nc * 4);
                down(kk, gotn[w], bn, nn * 4);
                clf_buffer *all[] = {ba, bb, bh, bc, bbias, bal, bbt, bn};
                for (int i = 0; i < 8; i++)
                    kk->api->free(kk->be, all[i]);
            }
            char what[96];
            snprintf(what, sizeof what, "gemm with ln_out m=%d n=%d k=%d half=%d style=%d", m, n, k,
                     half, (int)g.ln_style);
            expect_close(gotn[0], gotn[1], nn, TOL_NORM, what, "cpu backend (ln_out)");
            expect_close(gotc[0], gotc[1], nc, TOL_GEMM, what, "cpu backend");
            free(A), free(B), free(C), free(bias), free(al), free(bt), free(H);
            free(gotc[0]), free(gotc[1]), free(gotn[0]), free(gotn[1]);
        }
}
END_TEST

CLF_TEST_MAIN(ocl_test_run, "opencl_gemm", "gemm", test_gemm, test_gemm_edge, test_gemm_rows,
              test_gemm_strided_batched, test_gemm_half, test_gemm_half_arith,
              test_gemm_half_ignored, test_gemm_layernorm)
