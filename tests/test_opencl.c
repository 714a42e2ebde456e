/* The OpenCL backend, op by op: every op, inference and training (ABI 2), on random inputs
 * of awkward sizes (1, 7, 33, 65, 129, ... non-multiples of the work-group and GEMM tile
 * sizes), compared with a host reference computed here in double and with the CPU backend
 * (the dropout mask and the elementwise training ops bit for bit); gemm reading b_half
 * (B as F16) with the host reference only. Then its errors (operand bounds, refused
 * aliasing, allocation limit, device choice, no OpenCL driver at all) and its program
 * cache.
 *
 * Without an OpenCL device (or without the backend built) the suite says why and exits 77,
 * which ctest reports as skipped (tests/opencl.cmake sets SKIP_RETURN_CODE). */
#include "testutil.h"

#include "clformer/tensor.h"

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef CLF_OCL_ERRORS_LINKED
#include "ocl_internal.h"
#endif

/* Tolerances, as max|got - want| / max|want| (clf_test_rel_err). */
#define TOL_EXACT 1e-6 /* add, embed: one or two roundings per element */
#define TOL_NORM  1e-5 /* layernorm, softmax: float reductions vs double */
#define TOL_GEMM  1e-4 /* gemm: k-long float dot products summed in another order */
/* gemm reading b_half: per element, |got - want| <= TOL_GEMM_HALF * (|alpha| sum|a b| +
 * |beta c| + |bias|), want in double from the same F16-rounded B (so F16 rounding is not
 * counted): float sums of k / 8 / lanes chunks of 8, then a tree of up to 32 lanes */
#define TOL_GEMM_HALF 1e-5
#define TOL_ATTN      1e-4 /* attention: head_dim dot products and a kv_len-long softmax */
/* training ops (relu_backward, dropout and fill are compared bit for bit) */
#define TOL_LN_BWD    1e-5 /* layernorm_backward: float row sums; dx vs central differences */
#define TOL_ATTN_BWD  1e-4 /* attention_backward: as attention, plus dP and D_i sums */
#define TOL_EMBED_BWD 1e-6 /* embed_backward: float sums of the repeated ids in row order */
#define TOL_XENT      1e-5 /* cross_entropy: a cols-long max, sum of exp and sum of logits */
#define TOL_ADAM      1e-6 /* adam: a few float roundings per element and step */
#define TOL_SUMSQ     1e-6 /* sum_squares: compensated per-item sums, then a float tree */

#define SKIP_EXIT 77 /* ctest's SKIP_RETURN_CODE for this suite */

typedef struct bk {
    const char *label;
    const clf_backend_api *api;
    clf_backend *be;
} bk;

/* Opened afresh in each test's process by setup(). */
static bk ocl = {"opencl", NULL, NULL}, cpu = {"cpu", NULL, NULL};

static void setup(void)
{
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE")};
    clf_backend_opts c = {.abi_version = CLF_BACKEND_ABI};
    CLF_ASSERT_OK(clf_backend_load("opencl", CLF_BUILD_BACKEND_DIR, &ocl.api));
    CLF_ASSERT_OK(ocl.api->open(&o, &ocl.be));
    CLF_ASSERT_OK(clf_backend_load("cpu", CLF_BUILD_BACKEND_DIR, &cpu.api));
    CLF_ASSERT_OK(cpu.api->open(&c, &cpu.be));
}

static void teardown(void)
{
    if (ocl.be)
        ocl.api->close(ocl.be);
    if (cpu.be)
        cpu.api->close(cpu.be);
    ocl.be = cpu.be = NULL;
}

/* ---- helpers ---- */

static float *fdup(const float *x, size_t n)
{
    float *y = malloc(n * sizeof *y);
    ck_assert_ptr_nonnull(y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

static clf_buffer *up(bk *k, const void *host, size_t bytes)
{
    return clf_test_upload(k->api, k->be, host, bytes);
}

static void down(bk *k, void *host, clf_buffer *b, size_t bytes)
{
    CLF_ASSERT_OK(k->api->download(k->be, host, (clf_ptr){b, 0}, bytes));
}

static void expect_close(const float *got, const float *want, size_t n, double tol,
                         const char *what, const char *vs)
{
    double e = clf_test_rel_err(got, want, n);
    ck_assert_msg(e <= tol, "%s: opencl vs %s: relative error %.3g > %.3g", what, vs, e, tol);
}

static const int sizes[] = {1, 7, 33, 65, 129};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

/* ---- gemm ---- */

typedef struct gemm_case {
    int ta, tb, m, n, k, batch; /* batch 0: plain gemm */
    float alpha, beta;
    int bias, relu;
    int pad, off; /* extra leading-dimension elements, operand offsets (elements) */
} gemm_case;

/* C = alpha op(A) op(B) + beta C, + bias, relu, in double; matrices at g's offsets. */
static void ref_gemm(const clf_gemm_args *g, int batch, const float *A, const float *B,
                     const float *bias, float *C)
{
    for (int bt = 0; bt < batch; bt++) {
        const float *a = A + g->a.off / 4 + bt * g->stride_a;
        const float *b = B + g->b.off / 4 + bt * g->stride_b;
        float *c = C + g->c.off / 4 + bt * g->stride_c;
        for (int i = 0; i < g->m; i++) {
            for (int j = 0; j < g->n; j++) {
                double s = 0;
                for (int p = 0; p < g->k; p++) {
                    double x = g->trans_a ? a[(size_t)p * g->lda + i] : a[(size_t)i * g->lda + p];
                    double y = g->trans_b ? b[(size_t)j * g->ldb + p] : b[(size_t)p * g->ldb + j];
                    s += x * y;
                }
                float *cij = &c[(size_t)i * g->ldc + j];
                double v = g->alpha * s + (g->beta == 0.0f ? 0.0 : g->beta * (double)*cij);
                if (bias)
                    v += bias[g->bias.off / 4 + j];
                if (g->relu && v < 0)
                    v = 0;
                *cij = (float)v;
            }
        }
    }
}

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

    ref_gemm(&g, batch, A, B, bias, want);
    run_gemm(&ocl, &g, batched, A, na, B, nb, bias, nbias, got, nc);
    run_gemm(&cpu, &g, batched, A, na, B, nb, bias, nbias, got_cpu, nc);
    expect_close(got, want, nc, TOL_GEMM, what, "host reference");
    expect_close(got, got_cpu, nc, TOL_GEMM, what, "cpu backend");
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

/* A NULL argument struct is refused with a message, never dereferenced (the CPU
 * backend's twin check is in test_ops). */
START_TEST(test_null_arguments)
{
    clf_test_refuses_null_args(ocl.api, ocl.be, "opencl");
}
END_TEST

START_TEST(test_gemm_edge)
{
    /* beta = 0 ignores C (BLAS semantics), even when it holds NaN */
    int n = 7 * 33;
    float *nan_c = malloc(n * sizeof *nan_c);
    for (int i = 0; i < n; i++)
        nan_c[i] = NAN;
    float *A = clf_test_frand(7 * 65, 1, -1, 1), *B = clf_test_frand(65 * 33, 2, -1, 1),
          *bias = clf_test_frand(33, 3, -1, 1);
    clf_gemm_args g = {
        .m = 7, .n = 33, .k = 65, .alpha = 1, .beta = 0, .lda = 65, .ldb = 33, .ldc = 33};
    float *want = fdup(nan_c, n), *got = fdup(nan_c, n), *cgot = fdup(nan_c, n);
    ref_gemm(&g, 1, A, B, NULL, want);
    run_gemm(&ocl, &g, 0, A, 7 * 65, B, 65 * 33, NULL, 0, got, n);
    run_gemm(&cpu, &g, 0, A, 7 * 65, B, 65 * 33, NULL, 0, cgot, n);
    expect_close(got, want, n, TOL_GEMM, "gemm beta=0 over NaN", "host reference");
    expect_close(got, cgot, n, TOL_GEMM, "gemm beta=0 over NaN", "cpu backend");
    /* the same for one row, which runs as a matrix-vector product on both backends */
    g.m = 1;
    for (int i = 0; i < 33; i++)
        want[i] = got[i] = cgot[i] = NAN;
    ref_gemm(&g, 1, A, B, NULL, want);
    run_gemm(&ocl, &g, 0, A, 65, B, 65 * 33, NULL, 0, got, 33);
    run_gemm(&cpu, &g, 0, A, 65, B, 65 * 33, NULL, 0, cgot, 33);
    expect_close(got, want, 33, TOL_GEMM, "gemm m=1 beta=0 over NaN", "host reference");
    expect_close(got, cgot, 33, TOL_GEMM, "gemm m=1 beta=0 over NaN", "cpu backend");

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
    ref_gemm(&z, 1, A, B, bias, wz);
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
                          const float *bias, const float *C0, size_t nc, double *want,
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
                double t = (double)a[(size_t)r * g->lda + p] *
                           clf_half_to_float(bh[(size_t)j * g->ldb + p]);
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
 * is off by a factor 2. */
static double check_half_case(const half_case *t, unsigned seed)
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

    ref_gemm_half(&g, A, Wh, bias, C0, nc, want, scale);
    run_gemm_with_half(&g, A, na, B2, nb, Wh, nb, bias, nbias, got, nc);
    double e = half_err(got, want, scale, nc, what);
    ck_assert_msg(e <= TOL_GEMM_HALF, "%s: error %.3g of sum|terms| > %.3g", what, e,
                  TOL_GEMM_HALF);
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

START_TEST(test_gemm_half)
{
    /* k: shorter than one 8-half chunk, a multiple of 8 (with offset 0 and no pad every row
     * is 16-byte aligned: no scalar head or tail), and long rows with both */
    static const int ks[] = {1, 7, 8, 33, 64, 65, 263, 1031};
    static const int ms[] = {1, 2, 3, 7};
    static const int ns[] = {1, 7, 33, 65, 300};
    double worst = 0;
    int v = 0;
    for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ik++) {
        for (size_t im = 0; im < sizeof ms / sizeof ms[0]; im++, v++) {
            half_case t = {.m = ms[im], .n = ns[v % 5], .k = ks[ik]};
            t.alpha = v % 3 == 0 ? 1.0f : v % 3 == 1 ? 0.5f : -1.25f;
            t.beta = v % 2 == 0 ? 0.0f : 1.0f;
            t.bias = v % 4 < 2;
            t.relu = v % 3 == 2;
            t.pad = v % 4 == 1 || v % 4 == 2 ? 3 : 0;
            t.off = (v / 2) % 2 ? 5 : 0;
            double e = check_half_case(&t, 700 + (unsigned)v);
            if (e > worst)
                worst = e;
        }
    }
    printf("test_gemm_half: worst error %.3g of sum|terms| (tolerance %.3g)\n", worst,
           TOL_GEMM_HALF);
}
END_TEST

/* Where gemm does not read b_half it computes from b: b_half all NaN must not show. */
START_TEST(test_gemm_half_ignored)
{
    /* 8 rows (CLBlast's GEMM), trans_b = 0, trans_a = 1 (the one-row GEMV and CLBlast) */
    static const int shapes[][4] = {{8, 33, 65, 1}, {1, 33, 65, 0}, {3, 7, 33, 0}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
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
        ref_gemm(&g, 1, A, B, bias, want);
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

/* ---- layernorm ---- */

/* sum_mode: 0 no sum_out, 1 a separate sum_out, 2 sum_out aliasing x (pre-norm stream). */
static void run_layernorm(bk *k, const clf_layernorm_args *tmpl, const float *x, const float *res,
                          const float *alpha, const float *beta, int sum_mode, float *out,
                          float *sum)
{
    size_t n = (size_t)tmpl->rows * tmpl->cols, c = (size_t)tmpl->cols;
    clf_buffer *bx = up(k, x, n * 4), *bo = up(k, NULL, n * 4), *ba = up(k, alpha, c * 4),
               *bb = up(k, beta, c * 4);
    clf_buffer *br = res ? up(k, res, n * 4) : NULL,
               *bs = sum_mode == 1 ? up(k, NULL, n * 4) : NULL;
    clf_layernorm_args a = *tmpl;
    a.out = (clf_ptr){bo, 0};
    a.x = (clf_ptr){bx, 0};
    a.residual = (clf_ptr){br, 0};
    a.alpha = (clf_ptr){ba, 0};
    a.beta = (clf_ptr){bb, 0};
    a.sum_out = (clf_ptr){sum_mode == 2 ? bx : bs, 0};
    CLF_ASSERT_OK(k->api->layernorm(k->be, &a));
    down(k, out, bo, n * 4);
    if (sum_mode)
        down(k, sum, sum_mode == 2 ? bx : bs, n * 4);
    clf_buffer *all[] = {bx, bo, ba, bb, br, bs};
    for (int i = 0; i < 6; i++)
        if (all[i])
            k->api->free(k->be, all[i]);
}

static void ref_layernorm(const clf_layernorm_args *a, const float *x, const float *res,
                          const float *alpha, const float *beta, float *out, float *sum)
{
    int C = a->cols;
    for (int r = 0; r < a->rows; r++) {
        double mean = 0, ss = 0;
        float *v = sum + (size_t)r * C;
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)r * C + c;
            v[c] = res ? x[i] + res[i] : x[i]; /* rounded to float, as the model stores it */
            mean += v[c];
        }
        mean /= C;
        for (int c = 0; c < C; c++)
            ss += (v[c] - mean) * (v[c] - mean);
        double denom =
            a->style == CLF_LN_TUTORIAL ? sqrt(ss / (C - 1)) + a->eps : sqrt(ss / C + a->eps);
        for (int c = 0; c < C; c++)
            out[(size_t)r * C + c] = (float)(alpha[c] * (v[c] - mean) / denom + beta[c]);
    }
}

START_TEST(test_layernorm)
{
    static const int rows[] = {1, 7, 33}, cols[] = {2, 7, 33, 65, 129, 512, 1000};
    int v = 0;
    for (int style = 0; style < 2; style++)
        for (size_t ri = 0; ri < 3; ri++)
            for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++, v++) {
                int R = rows[ri], C = cols[ci], with_res = v % 2, sum_mode = v % 3;
                if (clf_test_too_big((double)R * C))
                    continue;
                size_t n = (size_t)R * C;
                clf_layernorm_args a = {.rows = R,
                                        .cols = C,
                                        .style = (clf_ln_style)style,
                                        .eps = style == CLF_LN_TUTORIAL ? 1e-6f : 1e-5f};
                /* an offset of 10 checks that the variance is not E[x^2] - mean^2 */
                float *x = clf_test_frand(n, 500 + v, 7, 13),
                      *res = with_res ? clf_test_frand(n, 600 + v, -3, 3) : NULL;
                float *alpha = clf_test_frand(C, 700 + v, 0.5f, 1.5f),
                      *beta = clf_test_frand(C, 800 + v, -1, 1);
                float *want = malloc(n * 4), *wsum = malloc(n * 4), *got = malloc(n * 4),
                      *gsum = malloc(n * 4), *cout = malloc(n * 4), *csum = malloc(n * 4);
                char what[128];
                snprintf(what, sizeof what, "layernorm %s rows=%d cols=%d residual=%d sum_out=%s",
                         style ? "standard" : "tutorial", R, C, with_res,
                         sum_mode == 0   ? "none"
                         : sum_mode == 1 ? "separate"
                                         : "aliasing x");
                ref_layernorm(&a, x, res, alpha, beta, want, wsum);
                run_layernorm(&ocl, &a, x, res, alpha, beta, sum_mode, got, gsum);
                run_layernorm(&cpu, &a, x, res, alpha, beta, sum_mode, cout, csum);
                expect_close(got, want, n, TOL_NORM, what, "host reference");
                expect_close(got, cout, n, TOL_NORM, what, "cpu backend");
                if (sum_mode)
                    expect_close(gsum, wsum, n, 0.0, what, "host reference (sum_out)");
                free(x);
                free(res);
                free(alpha);
                free(beta);
                free(want);
                free(wsum);
                free(got);
                free(gsum);
                free(cout);
                free(csum);
            }
    /* one column: fine in the standard style, refused (n - 1 = 0) in the tutorial style */
    float one[3] = {2, 3, 4}, a1 = 1, b1 = 0.5f, o[3], s[3];
    clf_layernorm_args a = {.rows = 3, .cols = 1, .style = CLF_LN_STANDARD, .eps = 1e-5f};
    run_layernorm(&ocl, &a, one, NULL, &a1, &b1, 0, o, s);
    for (int i = 0; i < 3; i++)
        ck_assert_float_eq_tol(o[i], 0.5f, 1e-6f);
    clf_buffer *b = up(&ocl, one, sizeof one);
    a.style = CLF_LN_TUTORIAL;
    a.out = a.x = a.alpha = a.beta = (clf_ptr){b, 0};
    ck_assert_int_eq(ocl.api->layernorm(ocl.be, &a), CLF_ERR_INPUT);
    ocl.api->free(ocl.be, b);
}
END_TEST

/* ---- attention ---- */

typedef struct attn_case {
    int B, H, Tq, Tk, D;
    int mask; /* 0 none, 1 padded tails, 2 batch 0 fully masked, 3 the first 3 keys masked */
    int causal, q_pos0, probs;
    int pad;       /* extra row and batch stride elements, and operand offsets */
    float drop;    /* dropout_p on the probabilities (0: off) */
    uint64_t seed; /* dropout_seed */
} attn_case;

static void ref_attention(const clf_attention_args *a, const float *Q, const float *K,
                          const float *V, const int32_t *M, float *O, float *P)
{
    int D = a->head_dim;
    double *s = malloc(sizeof *s * (size_t)a->kv_len);
    ck_assert_ptr_nonnull(s);
    for (int b = 0; b < a->batch; b++)
        for (int h = 0; h < a->heads; h++)
            for (int i = 0; i < a->q_len; i++) {
                const float *q = Q + a->q.off / 4 + b * a->q_bstride + (size_t)i * a->q_ld + h * D;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < a->kv_len; j++) {
                    const float *k =
                        K + a->k.off / 4 + b * a->kv_bstride + (size_t)j * a->k_ld + h * D;
                    int masked = (M && M[a->key_mask.off / 4 + b * a->key_mask_stride + j] == 0) ||
                                 (a->causal && j > a->q_pos0 + i);
                    double dot = 0;
                    for (int d = 0; d < D; d++)
                        dot += (double)q[d] * k[d];
                    s[j] = masked ? -1e9 : dot * a->scale;
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int j = 0; j < a->kv_len; j++)
                    sum += (s[j] = exp(s[j] - mx));
                float *o = O + a->out.off / 4 + b * a->out_bstride + (size_t)i * a->out_ld + h * D;
                /* dropout: the factor keep / (1 - p) of element e (clformer/backend.h) */
                uint64_t e0 = (((uint64_t)b * a->heads + h) * a->q_len + i) * a->kv_len;
                for (int d = 0; d < D; d++) {
                    double acc = 0;
                    for (int j = 0; j < a->kv_len; j++)
                        acc +=
                            s[j] / sum *
                            (a->dropout_p == 0.0f ? 1.0
                             : clf_dropout_bits(a->dropout_seed, e0 + j) >=
                                     clf_dropout_threshold(a->dropout_p)
                                 ? (double)(1.0f / (1.0f - a->dropout_p))
                                 : 0.0) *
                            V[a->v.off / 4 + b * a->kv_bstride + (size_t)j * a->v_ld + h * D + d];
                    o[d] = (float)acc;
                }
                if (P)
                    for (int j = 0; j < a->kv_len; j++)
                        P[(((size_t)b * a->heads + h) * a->q_len + i) * a->kv_len + j] =
                            (float)(s[j] / sum);
            }
    free(s);
}

typedef struct attn_data {
    float *q, *k, *v, *out, *probs;
    int32_t *mask;
    size_t nq, nkv, nout, nmask, nprobs;
} attn_data;

static void run_attention(bk *k, const clf_attention_args *tmpl, const attn_data *d, float *out,
                          float *probs)
{
    clf_buffer *bq = up(k, d->q, d->nq * 4), *bk_ = up(k, d->k, d->nkv * 4),
               *bv = up(k, d->v, d->nkv * 4), *bo = up(k, d->out, d->nout * 4);
    clf_buffer *bm = d->mask ? up(k, d->mask, d->nmask * 4) : NULL;
    clf_buffer *bp = probs ? up(k, NULL, d->nprobs * 4) : NULL;
    clf_attention_args a = *tmpl;
    a.q.buf = bq;
    a.k.buf = bk_;
    a.v.buf = bv;
    a.out.buf = bo;
    a.key_mask.buf = bm;
    a.probs.buf = bp;
    CLF_ASSERT_OK(k->api->attention(k->be, &a));
    down(k, out, bo, d->nout * 4);
    if (probs)
        down(k, probs, bp, d->nprobs * 4);
    clf_buffer *all[] = {bq, bk_, bv, bo, bm, bp};
    for (int i = 0; i < 6; i++)
        if (all[i])
            k->api->free(k->be, all[i]);
}

static void check_attention_case(const attn_case *t, unsigned seed)
{
    if (clf_test_too_big((double)t->B * t->H * t->Tq * t->Tk * t->D))
        return;
    int width = t->H * t->D, pad = t->pad;
    clf_attention_args a = {.batch = t->B,
                            .heads = t->H,
                            .q_len = t->Tq,
                            .kv_len = t->Tk,
                            .head_dim = t->D,
                            .causal = t->causal,
                            .q_pos0 = t->q_pos0,
                            .scale = 1.0f / sqrtf((float)t->D),
                            .dropout_p = t->drop,
                            .dropout_seed = t->seed};
    a.q_ld = width + pad;
    a.k_ld = width + 2 * pad;
    a.v_ld = width + pad;
    a.out_ld = width + 3 * pad;
    a.q_bstride = (size_t)t->Tq * a.q_ld + pad;
    a.kv_bstride = (size_t)t->Tk * a.v_ld + 2 * (size_t)t->Tk * pad; /* covers k_ld too */
    a.out_bstride = (size_t)t->Tq * a.out_ld + pad;
    a.key_mask_stride = (size_t)t->Tk + pad;
    a.q.off = a.k.off = a.v.off = a.out.off = a.key_mask.off = (size_t)pad * 4;
    attn_data d = {0};
    d.nq = pad + (size_t)t->B * a.q_bstride;
    d.nkv = pad + (size_t)t->B * a.kv_bstride;
    d.nout = pad + (size_t)t->B * a.out_bstride;
    d.nmask = pad + (size_t)t->B * a.key_mask_stride;
    d.nprobs = (size_t)t->B * t->H * t->Tq * t->Tk;
    d.q = clf_test_frand(d.nq, seed, -2, 2);
    d.k = clf_test_frand(d.nkv, seed + 1, -2, 2);
    d.v = clf_test_frand(d.nkv, seed + 2, -1, 1);
    d.out = clf_test_frand(d.nout, seed + 3, -1, 1); /* what is outside the output must stay */
    if (t->mask) {
        d.mask = malloc(d.nmask * sizeof *d.mask);
        for (int b = 0; b < t->B; b++)
            for (int j = 0; j < t->Tk; j++) {
                int on = 1;
                if (t->mask == 1) /* batch b has b * 3 padding keys at the end */
                    on = j < t->Tk - (b * 3) % t->Tk;
                else if (t->mask == 2)
                    on = b != 0;
                else if (t->mask == 3)
                    on = j >= 3;
                d.mask[pad + b * a.key_mask_stride + j] = on;
            }
    }
    float *want = fdup(d.out, d.nout), *got = fdup(d.out, d.nout), *cgot = fdup(d.out, d.nout);
    float *wp = t->probs ? malloc(d.nprobs * 4) : NULL,
          *gp = t->probs ? malloc(d.nprobs * 4) : NULL,
          *cp = t->probs ? malloc(d.nprobs * 4) : NULL;
    char what[200];
    snprintf(what, sizeof what,
             "attention B=%d H=%d Tq=%d Tk=%d D=%d mask=%d causal=%d q_pos0=%d probs=%d pad=%d "
             "drop=%g",
             t->B, t->H, t->Tq, t->Tk, t->D, t->mask, t->causal, t->q_pos0, t->probs, pad,
             (double)t->drop);
    ref_attention(&a, d.q, d.k, d.v, d.mask, want, wp);
    run_attention(&ocl, &a, &d, got, gp);
    run_attention(&cpu, &a, &d, cgot, cp);
    expect_close(got, want, d.nout, TOL_ATTN, what, "host reference");
    expect_close(got, cgot, d.nout, TOL_ATTN, what, "cpu backend");
    if (t->probs) {
        expect_close(gp, wp, d.nprobs, TOL_ATTN, what, "host reference (probs)");
        expect_close(gp, cp, d.nprobs, TOL_ATTN, what, "cpu backend (probs)");
    }
    free(d.q);
    free(d.k);
    free(d.v);
    free(d.out);
    free(d.mask);
    free(want);
    free(got);
    free(cgot);
    free(wp);
    free(gp);
    free(cp);
}

START_TEST(test_attention)
{
    static const attn_case cases[] = {
        /* B  H  Tq   Tk    D  mask causal q_pos0 probs pad drop seed */
        {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},
        {2, 3, 7, 7, 7, 1, 0, 0, 0, 0, 0, 0},
        {2, 2, 33, 33, 64, 1, 1, 0, 0, 1, 0, 0},
        {1, 2, 5, 129, 64, 1, 1, 124, 0, 0, 0, 0},  /* decoding with a KV cache */
        {3, 1, 65, 129, 7, 2, 0, 0, 1, 3, 0, 0},    /* batch 0 fully masked; probs */
        {2, 2, 7, 300, 128, 1, 1, 293, 0, 2, 0, 0}, /* more keys than a work-group: several tiles */
        {2, 2, 33, 65, 64, 1, 1, 0, 1, 0, 0, 0},    /* cross-length, causal, probs */
        {1, 8, 1, 1, 64, 0, 0, 0, 1, 0, 0, 0},
        {1, 2, 6, 6, 8, 3, 1, 0, 1, 1, 0, 0}, /* rows 0-2 see only masked keys: uniform weights */
        {2, 1, 129, 129, 1, 1, 1, 0, 0, 0, 0, 0},
        {1, 3, 65, 1, 33, 1, 0, 0, 1, 0, 0, 0},
        {2, 2, 9, 600, 16, 1, 0, 0, 0, 0, 0, 0}, /* three tiles, the last one partial */
        /* dropout on the probabilities: the same mask as the CPU backend and the host */
        {2, 3, 7, 33, 7, 1, 1, 0, 0, 1, 0.3f, 11},
        {2, 3, 7, 33, 7, 1, 1, 0, 1, 1, 0.3f, 11}, /* probs: the softmax before dropout */
        {3, 1, 65, 129, 64, 2, 0, 0, 1, 0, 0.9f, 12},
        {2, 2, 9, 600, 16, 1, 1, 591, 0, 2, 0.9f, 0xFFFFFFFFFFFFFFFFull},
        {1, 2, 1, 1, 1, 0, 0, 0, 0, 0, 0.3f, 13},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_attention_case(&cases[i], 1000 + 10 * (unsigned)i);
}
END_TEST

/* ---- embed ---- */

static void run_embed(bk *k, const clf_embed_args *tmpl, const int32_t *ids, const float *table,
                      const float *pe, size_t npe, float *out)
{
    size_t n = (size_t)tmpl->rows * tmpl->dim;
    clf_buffer *bo = up(k, NULL, n * 4), *bi = up(k, ids, (size_t)tmpl->rows * 4),
               *bt = up(k, table, (size_t)tmpl->vocab * tmpl->dim * 4);
    clf_buffer *bp = pe ? up(k, pe, npe * 4) : NULL;
    clf_embed_args a = *tmpl;
    a.out = (clf_ptr){bo, 0};
    a.ids = (clf_ptr){bi, 0};
    a.table = (clf_ptr){bt, 0};
    a.pe = (clf_ptr){bp, 0};
    CLF_ASSERT_OK(k->api->embed(k->be, &a));
    down(k, out, bo, n * 4);
    k->api->free(k->be, bo);
    k->api->free(k->be, bi);
    k->api->free(k->be, bt);
    if (bp)
        k->api->free(k->be, bp);
}

START_TEST(test_embed)
{
    static const int dims[] = {1, 7, 65, 512}, rows[] = {1, 21, 33}, seqs[] = {1, 7, 33};
    int v = 0;
    for (int di = 0; di < 4; di++)
        for (int ri = 0; ri < 3; ri++, v++) {
            int vocab = 33, dim = dims[di], R = rows[ri], seq = seqs[ri], pos0 = v % 2 ? 3 : 0;
            int max_len = pos0 + seq + 1, with_pe = v % 4 != 3;
            clf_embed_args a = {.rows = R,
                                .seq_len = seq,
                                .pos0 = pos0,
                                .dim = dim,
                                .vocab = vocab,
                                .scale = sqrtf((float)dim)};
            int32_t *ids = malloc(R * sizeof *ids);
            for (int r = 0; r < R; r++)
                ids[r] = (r * 7 + v) % vocab;
            if (R > 2) { /* out of range: clamped, never read outside the table */
                ids[0] = -4;
                ids[1] = vocab + 5;
            }
            size_t n = (size_t)R * dim, npe = (size_t)max_len * dim;
            float *table = clf_test_frand((size_t)vocab * dim, 900 + v, -1, 1);
            float *pe = with_pe ? clf_test_frand(npe, 950 + v, -1, 1) : NULL;
            float *want = malloc(n * 4), *got = malloc(n * 4), *cgot = malloc(n * 4);
            for (int r = 0; r < R; r++) {
                int id = ids[r] < 0 ? 0 : ids[r] >= vocab ? vocab - 1 : ids[r];
                for (int c = 0; c < dim; c++)
                    want[(size_t)r * dim + c] =
                        table[(size_t)id * dim + c] * a.scale +
                        (pe ? pe[(size_t)(pos0 + r % seq) * dim + c] : 0.0f);
            }
            char what[96];
            snprintf(what, sizeof what, "embed rows=%d dim=%d seq_len=%d pos0=%d pe=%d", R, dim,
                     seq, pos0, with_pe);
            run_embed(&ocl, &a, ids, table, pe, npe, got);
            run_embed(&cpu, &a, ids, table, pe, npe, cgot);
            expect_close(got, want, n, TOL_EXACT, what, "host reference");
            expect_close(got, cgot, n, TOL_EXACT, what, "cpu backend");
            free(ids);
            free(table);
            free(pe);
            free(want);
            free(got);
            free(cgot);
        }
}
END_TEST

/* ---- softmax, add, argmax ---- */

static void run_softmax(bk *k, const float *x, int rows, int cols, int log, int alias, float *out)
{
    size_t n = (size_t)rows * cols;
    clf_buffer *bx = up(k, x, n * 4), *bo = alias ? bx : up(k, NULL, n * 4);
    CLF_ASSERT_OK(k->api->softmax(k->be, (clf_ptr){bo, 0}, (clf_ptr){bx, 0}, rows, cols, log));
    down(k, out, bo, n * 4);
    k->api->free(k->be, bx);
    if (!alias)
        k->api->free(k->be, bo);
}

START_TEST(test_softmax)
{
    static const int rows[] = {1, 7, 33}, cols[] = {1, 7, 33, 65, 129, 1000, 8000};
    int v = 0;
    for (int log = 0; log < 2; log++)
        for (int ri = 0; ri < 3; ri++)
            for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++, v++) {
                int R = rows[ri], C = cols[ci], alias = v % 2;
                if (clf_test_too_big((double)R * C))
                    continue;
                size_t n = (size_t)R * C;
                /* large: needs the max subtracted */
                float *x = clf_test_frand(n, 1200 + v, -20, 20);
                float *want = malloc(n * 4), *got = malloc(n * 4), *cgot = malloc(n * 4);
                for (int r = 0; r < R; r++) {
                    const float *xr = x + (size_t)r * C;
                    double mx = xr[0], s = 0;
                    for (int c = 1; c < C; c++)
                        mx = xr[c] > mx ? xr[c] : mx;
                    for (int c = 0; c < C; c++)
                        s += exp(xr[c] - mx);
                    for (int c = 0; c < C; c++)
                        want[(size_t)r * C + c] =
                            (float)(log ? xr[c] - mx - (double)logl(s) : exp(xr[c] - mx) / s);
                }
                char what[96];
                snprintf(what, sizeof what, "%s rows=%d cols=%d out aliasing x=%d",
                         log ? "log_softmax" : "softmax", R, C, alias);
                run_softmax(&ocl, x, R, C, log, alias, got);
                run_softmax(&cpu, x, R, C, log, alias, cgot);
                expect_close(got, want, n, TOL_NORM, what, "host reference");
                expect_close(got, cgot, n, TOL_NORM, what, "cpu backend");
                free(x);
                free(want);
                free(got);
                free(cgot);
            }
}
END_TEST

START_TEST(test_add)
{
    static const size_t ns[] = {1, 7, 129, 65537, 1000003};
    for (int i = 0; i < 5; i++) {
        size_t n = ns[i];
        int alias = i % 3; /* 0: separate out, 1: out = a, 2: out = b */
        if (clf_test_too_big((double)n))
            continue;
        float *a = clf_test_frand(n, 1300 + i, -5, 5), *b = clf_test_frand(n, 1400 + i, -5, 5);
        float *want = malloc(n * 4), *got = malloc(n * 4);
        for (size_t j = 0; j < n; j++)
            want[j] = a[j] + b[j];
        clf_buffer *ba = up(&ocl, a, n * 4), *bb = up(&ocl, b, n * 4);
        clf_buffer *bo = alias == 1 ? ba : alias == 2 ? bb : up(&ocl, NULL, n * 4);
        CLF_ASSERT_OK(
            ocl.api->add(ocl.be, (clf_ptr){bo, 0}, (clf_ptr){ba, 0}, (clf_ptr){bb, 0}, n));
        down(&ocl, got, bo, n * 4);
        char what[64];
        snprintf(what, sizeof what, "add n=%zu alias=%d", n, alias);
        expect_close(got, want, n, 0.0, what, "host reference"); /* one rounding: exact */
        ocl.api->free(ocl.be, ba);
        ocl.api->free(ocl.be, bb);
        if (!alias)
            ocl.api->free(ocl.be, bo);
        free(a);
        free(b);
        free(want);
        free(got);
    }
}
END_TEST

static void run_argmax(bk *k, const float *x, int rows, int cols, int32_t *out)
{
    clf_buffer *bx = up(k, x, (size_t)rows * cols * 4), *bo = up(k, NULL, (size_t)rows * 4);
    CLF_ASSERT_OK(k->api->argmax(k->be, (clf_ptr){bo, 0}, (clf_ptr){bx, 0}, rows, cols));
    down(k, out, bo, (size_t)rows * 4);
    k->api->free(k->be, bx);
    k->api->free(k->be, bo);
}

START_TEST(test_argmax)
{
    static const int rows[] = {1, 7, 33}, cols[] = {1, 7, 65, 1000, 8000};
    for (int ri = 0; ri < 3; ri++)
        for (int ci = 0; ci < 5; ci++) {
            int R = rows[ri], C = cols[ci];
            if (clf_test_too_big((double)R * C))
                continue;
            size_t n = (size_t)R * C;
            float *x = clf_test_frand(n, 1500 + ri * 5 + ci, -3, 3);
            for (size_t i = 0; i < n; i++)
                x[i] = floorf(x[i]) - 10.0f; /* few distinct values: many ties, all negative */
            if (R > 2) {
                for (int c = 0; c < C; c++)
                    x[c] = -1;                  /* row 0 all equal: index 0 */
                x[(size_t)2 * C + C - 1] = 100; /* row 2: the maximum at the very end */
            }
            int32_t *want = malloc(R * 4), *got = malloc(R * 4), *cgot = malloc(R * 4);
            for (int r = 0; r < R; r++) {
                const float *xr = x + (size_t)r * C;
                int best = 0;
                for (int c = 1; c < C; c++)
                    if (xr[c] > xr[best])
                        best = c;
                want[r] = best;
            }
            run_argmax(&ocl, x, R, C, got);
            run_argmax(&cpu, x, R, C, cgot);
            for (int r = 0; r < R; r++) {
                ck_assert_msg(got[r] == want[r], "argmax rows=%d cols=%d row %d: %d, want %d", R, C,
                              r, got[r], want[r]);
                ck_assert_int_eq(got[r], cgot[r]);
            }
            free(x);
            free(want);
            free(got);
            free(cgot);
        }
}
END_TEST

/* ---- memory ---- */

START_TEST(test_memory)
{
    /* copy between and within buffers, including overlapping ranges (memmove semantics) */
    float h[64], g[64];
    for (int i = 0; i < 64; i++)
        h[i] = (float)i;
    clf_buffer *a = up(&ocl, h, sizeof h), *b = up(&ocl, NULL, sizeof h);
    CLF_ASSERT_OK(ocl.api->copy(ocl.be, (clf_ptr){b, 8}, (clf_ptr){a, 0}, 40));
    down(&ocl, g, b, sizeof g);
    ck_assert_float_eq(g[0], 0);
    ck_assert_float_eq(g[2], 0);
    ck_assert_float_eq(g[11], 9);
    CLF_ASSERT_OK(ocl.api->copy(ocl.be, (clf_ptr){a, 4}, (clf_ptr){a, 0}, 32)); /* forward */
    CLF_ASSERT_OK(ocl.api->download(ocl.be, g, (clf_ptr){a, 0}, sizeof g));
    for (int i = 1; i <= 8; i++)
        ck_assert_float_eq(g[i], (float)(i - 1));
    CLF_ASSERT_OK(ocl.api->copy(ocl.be, (clf_ptr){a, 0}, (clf_ptr){a, 8}, 32)); /* backward */
    CLF_ASSERT_OK(ocl.api->synchronize(ocl.be));
    CLF_ASSERT_OK(ocl.api->download(ocl.be, g, (clf_ptr){a, 0}, sizeof g));
    ck_assert_float_eq(g[0], 1); /* a was 0 0 1 2 3 4 5 6 7 9 10 ... */
    ck_assert_float_eq(g[6], 7);
    ck_assert_float_eq(g[7], 9);
    /* a fresh buffer reads as zeros; an empty one is fine */
    clf_buffer *z = NULL;
    CLF_ASSERT_OK(ocl.api->alloc(ocl.be, 0, &z));
    CLF_ASSERT_OK(ocl.api->upload(ocl.be, (clf_ptr){z, 0}, h, 0));
    ocl.api->free(ocl.be, z);
    down(&ocl, g, b, sizeof g);
    ck_assert_float_eq(g[63], 0);
    ocl.api->free(ocl.be, a);
    ocl.api->free(ocl.be, b);
}
END_TEST

/* ---- errors ---- */

/* Asserts that expr fails with status want and a message containing each of the words. */
#define EXPECT_ERROR(expr, want, ...)                                                              \
    do {                                                                                           \
        clf_status st_ = (expr);                                                                   \
        const char *words_[] = {__VA_ARGS__};                                                      \
        ck_assert_msg(st_ == (want), "%s: status %d, want %d (%s)", #expr, (int)st_, (int)(want),  \
                      clf_last_error());                                                           \
        for (size_t w_ = 0; w_ < sizeof words_ / sizeof words_[0]; w_++)                           \
            ck_assert_msg(strstr(clf_last_error(), words_[w_]), "%s: message '%s' lacks '%s'",     \
                          #expr, clf_last_error(), words_[w_]);                                    \
    } while (0)

START_TEST(test_bounds)
{
    float h[256] = {0};
    clf_buffer *big = up(&ocl, h, sizeof h), *small = up(&ocl, h, 40); /* 10 floats */
    clf_buffer *out = up(&ocl, h, sizeof h); /* C: it may not overlap A or B */
    /* gemm 8x8x8 needs 64 floats per operand */
    clf_gemm_args g = {.m = 8,
                       .n = 8,
                       .k = 8,
                       .alpha = 1,
                       .lda = 8,
                       .ldb = 8,
                       .ldc = 8,
                       .a = {small, 0},
                       .b = {big, 0},
                       .c = {big, 0}};
    EXPECT_ERROR(ocl.api->gemm(ocl.be, &g), CLF_ERR_INPUT, "gemm", "'a'", "40 bytes");
    g.a = (clf_ptr){big, 0};
    g.c = (clf_ptr){big, 800}; /* 200 + 64 > 256 */
    EXPECT_ERROR(ocl.api->gemm(ocl.be, &g), CLF_ERR_INPUT, "gemm", "'c'");
    g.c = (clf_ptr){out, 0};
    g.bias = (clf_ptr){small, 16}; /* 4 + 8 > 10 */
    EXPECT_ERROR(ocl.api->gemm(ocl.be, &g), CLF_ERR_INPUT, "gemm", "'bias'");
    g.bias = (clf_ptr){NULL, 0};
    g.a = (clf_ptr){big, 2};
    EXPECT_ERROR(ocl.api->gemm(ocl.be, &g), CLF_ERR_INPUT, "gemm", "'a'", "multiple of 4");
    g.a = (clf_ptr){big, 0};
    g.lda = 4;
    EXPECT_ERROR(ocl.api->gemm(ocl.be, &g), CLF_ERR_INPUT, "gemm", "lda");
    g.lda = 8;
    g.batch = 4;
    g.stride_a = g.stride_b = g.stride_c = 64; /* 4 * 64 > 256 at offset 0: fits exactly */
    CLF_ASSERT_OK(ocl.api->gemm_strided_batched(ocl.be, &g));
    g.stride_b = 65;
    EXPECT_ERROR(ocl.api->gemm_strided_batched(ocl.be, &g), CLF_ERR_INPUT, "gemm_strided_batched",
                 "'b'");
    /* b_half: 64 halves = 128 bytes, checked for any shape that gives it (here 8 rows, which
     * do not read it); its offset need only be a multiple of 2 */
    g.batch = 0;
    g.trans_b = 1;
    g.b_half = (clf_ptr){small, 0};
    EXPECT_ERROR(ocl.api->gemm(ocl.be, &g), CLF_ERR_INPUT, "gemm", "'b_half'", "needs 128 bytes",
                 "40 bytes");
    g.m = 1;
    EXPECT_ERROR(ocl.api->gemm(ocl.be, &g), CLF_ERR_INPUT, "gemm", "'b_half'", "40 bytes");
    g.b_half = (clf_ptr){big, 3};
    EXPECT_ERROR(ocl.api->gemm(ocl.be, &g), CLF_ERR_INPUT, "gemm", "'b_half'", "multiple of 2");
    g.b_half = (clf_ptr){big, 1024 - 128 + 2}; /* one half past the end */
    EXPECT_ERROR(ocl.api->gemm(ocl.be, &g), CLF_ERR_INPUT, "gemm", "'b_half'", "out of bounds");
    g.b_half = (clf_ptr){big, 1024 - 128 - 2}; /* ends one half before the end */
    CLF_ASSERT_OK(ocl.api->gemm(ocl.be, &g));
    g.b_half = (clf_ptr){NULL, 0};
    g.m = 8;
    g.trans_b = 0;

    clf_layernorm_args ln = {.rows = 4,
                             .cols = 12,
                             .eps = 1e-6f,
                             .out = {big, 0},
                             .x = {big, 512},
                             .alpha = {small, 0},
                             .beta = {small, 0}};
    EXPECT_ERROR(ocl.api->layernorm(ocl.be, &ln), CLF_ERR_INPUT, "layernorm", "'alpha'");
    ln.alpha = (clf_ptr){big, 0};
    ln.beta = (clf_ptr){NULL, 0};
    EXPECT_ERROR(ocl.api->layernorm(ocl.be, &ln), CLF_ERR_INPUT, "layernorm", "'beta'", "missing");

    clf_attention_args at = {.batch = 1,
                             .heads = 2,
                             .q_len = 4,
                             .kv_len = 4,
                             .head_dim = 4,
                             .q = {big, 0},
                             .k = {big, 0},
                             .v = {big, 0},
                             .out = {big, 0},
                             .q_ld = 8,
                             .k_ld = 8,
                             .v_ld = 8,
                             .out_ld = 8,
                             .scale = 1,
                             .probs = {small, 0}}; /* probs needs 32 floats */
    EXPECT_ERROR(ocl.api->attention(ocl.be, &at), CLF_ERR_INPUT, "attention", "'probs'");
    at.probs = (clf_ptr){NULL, 0};
    at.key_mask = (clf_ptr){small, 32}; /* 8 + 4 > 10 */
    EXPECT_ERROR(ocl.api->attention(ocl.be, &at), CLF_ERR_INPUT, "attention", "'key_mask'");
    at.key_mask = (clf_ptr){NULL, 0};
    at.k_ld = 7;
    EXPECT_ERROR(ocl.api->attention(ocl.be, &at), CLF_ERR_INPUT, "attention", "k_ld");

    clf_embed_args em = {.rows = 12,
                         .seq_len = 12,
                         .dim = 4,
                         .vocab = 8,
                         .scale = 1,
                         .out = {big, 0},
                         .ids = {small, 0},
                         .table = {big, 0}};
    EXPECT_ERROR(ocl.api->embed(ocl.be, &em), CLF_ERR_INPUT, "embed", "'ids'");
    em.ids = (clf_ptr){big, 0};
    em.pe = (clf_ptr){small, 0}; /* needs 12 * 4 floats */
    EXPECT_ERROR(ocl.api->embed(ocl.be, &em), CLF_ERR_INPUT, "embed", "'pe'");

    EXPECT_ERROR(
        ocl.api->add(ocl.be, (clf_ptr){small, 0}, (clf_ptr){big, 0}, (clf_ptr){big, 0}, 11),
        CLF_ERR_INPUT, "add", "'out'");
    EXPECT_ERROR(ocl.api->softmax(ocl.be, (clf_ptr){big, 0}, (clf_ptr){small, 0}, 2, 6, 0),
                 CLF_ERR_INPUT, "softmax", "'x'");
    EXPECT_ERROR(ocl.api->softmax(ocl.be, (clf_ptr){big, 0}, (clf_ptr){small, 0}, 2, 6, 1),
                 CLF_ERR_INPUT, "log_softmax", "'x'");
    EXPECT_ERROR(ocl.api->argmax(ocl.be, (clf_ptr){small, 0}, (clf_ptr){big, 0}, 11, 2),
                 CLF_ERR_INPUT, "argmax", "'out'");
    EXPECT_ERROR(ocl.api->upload(ocl.be, (clf_ptr){small, 4}, h, 40), CLF_ERR_INPUT, "upload",
                 "'dst'");
    EXPECT_ERROR(ocl.api->download(ocl.be, h, (clf_ptr){small, 0}, 44), CLF_ERR_INPUT, "download",
                 "'src'");
    EXPECT_ERROR(ocl.api->copy(ocl.be, (clf_ptr){small, 0}, (clf_ptr){big, 0}, 41), CLF_ERR_INPUT,
                 "copy", "'dst'");

    /* a buffer of another backend instance */
    const clf_backend_api *api2 = NULL;
    clf_backend *be2 = NULL;
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE")};
    CLF_ASSERT_OK(clf_backend_load("opencl", CLF_BUILD_BACKEND_DIR, &api2));
    CLF_ASSERT_OK(api2->open(&o, &be2));
    EXPECT_ERROR(api2->add(be2, (clf_ptr){big, 0}, (clf_ptr){big, 0}, (clf_ptr){big, 0}, 4),
                 CLF_ERR_INPUT, "add", "another backend");
    api2->close(be2);

    ocl.api->free(ocl.be, big);
    ocl.api->free(ocl.be, small);
    ocl.api->free(ocl.be, out);
}
END_TEST

START_TEST(test_alloc_limit)
{
    uint64_t max = ocl.api->max_alloc(ocl.be);
    ck_assert_uint_gt(max, 0);
    clf_buffer *b = NULL;
    EXPECT_ERROR(ocl.api->alloc(ocl.be, (size_t)max + 1, &b), CLF_ERR_NOMEM, "opencl: alloc",
                 "CL_DEVICE_MAX_MEM_ALLOC_SIZE");
    ck_assert_ptr_null(b);
    EXPECT_ERROR(ocl.api->alloc(ocl.be, SIZE_MAX, &b), CLF_ERR_NOMEM, "alloc");
}
END_TEST

#ifdef CLF_OCL_ERRORS_LINKED
START_TEST(test_error_names)
{
    ck_assert_str_eq(ocl_error_name(0), "CL_SUCCESS");
    ck_assert_str_eq(ocl_error_name(-5), "CL_OUT_OF_RESOURCES");
    ck_assert_str_eq(ocl_error_name(-54), "CL_INVALID_WORK_GROUP_SIZE");
    ck_assert_str_eq(ocl_error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
    ck_assert_str_eq(ocl_error_name(-9999), "CL_UNKNOWN_ERROR");
    ck_assert_str_eq(ocl_clblast_name(-1016), "CLBlastInvalidLeadDimA");
    ck_assert_str_eq(ocl_clblast_name(-2046), "CLBlastInvalidLocalMemUsage");
    ck_assert_str_eq(ocl_clblast_name(-30), "CL_INVALID_VALUE");
    EXPECT_ERROR(ocl_fail("attention", "clEnqueueNDRangeKernel", -5), CLF_ERR_BACKEND,
                 "opencl: attention: clEnqueueNDRangeKernel failed: CL_OUT_OF_RESOURCES (-5)");
    EXPECT_ERROR(ocl_fail("alloc", "clCreateBuffer", -4), CLF_ERR_NOMEM,
                 "CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)");
    EXPECT_ERROR(ocl_fail_clblast("gemm", "CLBlastSgemm", -2045), CLF_ERR_BACKEND,
                 "opencl: gemm: CLBlastSgemm failed: CLBlastNoHalfPrecision (-2045)");
}
END_TEST
#endif

/* ---- training ops (ABI 2) ----
 * Each op runs on the same inputs through both backends and is compared with a host
 * reference in double and with the CPU backend. Every test prints the worst relative error
 * it saw against each, so the margins below the tolerances stay visible in the ctest log. */

typedef struct worst {
    double host, cpu;
} worst;

/* got vs the host reference and vs the CPU backend, both within tol; records the worst. */
static void expect_both(const float *got, const float *host, const float *cpu_got, size_t n,
                        double tol, const char *what, worst *w)
{
    double eh = clf_test_rel_err(got, host, n), ec = clf_test_rel_err(got, cpu_got, n);
    ck_assert_msg(eh <= tol, "%s: opencl vs host reference: relative error %.3g > %.3g", what, eh,
                  tol);
    ck_assert_msg(ec <= tol, "%s: opencl vs cpu backend: relative error %.3g > %.3g", what, ec,
                  tol);
    if (eh > w->host)
        w->host = eh;
    if (ec > w->cpu)
        w->cpu = ec;
}

static void report(const char *test, const worst *w, double tol)
{
    printf("%s: worst relative error %.2g vs the host reference, %.2g vs the cpu backend "
           "(tolerance %.0e)\n",
           test, w->host, w->cpu, tol);
}

/* The same bits, element by element (NaN and -0 included). One memcmp first: a Check
 * assertion per element costs a message to the parent process each. */
static void expect_same_bits(const float *got, const float *want, size_t n, const char *what,
                             const char *vs)
{
    if (n == 0 || memcmp(got, want, n * sizeof *got) == 0)
        return;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof got[i]) != 0)
            ck_abort_msg("%s: opencl vs %s: element %zu is %a, want %a", what, vs, i,
                         (double)got[i], (double)want[i]);
}

static void free_all(bk *k, clf_buffer **b, int n)
{
    for (int i = 0; i < n; i++)
        if (b[i])
            k->api->free(k->be, b[i]);
}

/* -- relu_backward -- */

/* dx = relu'(y) * dy at element offset off; alias: dx is dy's buffer, else dx holds the
 * buffer's initial contents on entry (what lies outside the op's range must stay). */
static void run_relu_backward(bk *k, const float *dy, const float *y, size_t n, size_t off,
                              int alias, float *dx)
{
    size_t bytes = (n + off) * 4;
    clf_buffer *bdy = up(k, dy, bytes), *by = up(k, y, bytes);
    clf_buffer *bdx = alias ? bdy : up(k, dx, bytes);
    clf_ptr pdx = {bdx, off * 4}, pdy = {bdy, off * 4}, py = {by, off * 4};
    CLF_ASSERT_OK(k->api->relu_backward(k->be, pdx, pdy, py, n));
    down(k, dx, bdx, bytes);
    clf_buffer *all[] = {bdy, by, alias ? NULL : bdx};
    free_all(k, all, 3);
}

START_TEST(test_relu_backward)
{
    static const size_t ns[] = {1, 7, 33, 65, 65537};
    for (int t = 0; t < 5; t++) {
        size_t n = ns[t], off = t % 2 ? 3 : 0, all = n + off;
        int alias = t % 3 == 1;
        if (clf_test_too_big((double)n))
            continue;
        float *dy = clf_test_frand(all, 2000 + t, -1, 1), *y = clf_test_frand(all, 2100 + t, -1, 1);
        for (size_t i = 0; i < all; i += 3)
            y[i] = 0.0f; /* relu's output is often exactly 0: no gradient there */
        float *sentinel = clf_test_frand(all, 2150 + t, 5, 6);
        float *want = fdup(alias ? dy : sentinel, all), *got = fdup(sentinel, all),
              *cgot = fdup(sentinel, all);
        for (size_t i = off; i < all; i++)
            want[i] = y[i] > 0.0f ? dy[i] : 0.0f;
        run_relu_backward(&ocl, dy, y, n, off, alias, got);
        run_relu_backward(&cpu, dy, y, n, off, alias, cgot);
        char what[64];
        snprintf(what, sizeof what, "relu_backward n=%zu off=%zu alias=%d", n, off, alias);
        expect_same_bits(got, want, all, what, "host reference");
        expect_same_bits(got, cgot, all, what, "cpu backend");
        free(dy);
        free(y);
        free(sentinel);
        free(want);
        free(got);
        free(cgot);
    }
}
END_TEST

/* -- dropout -- */

/* As run_relu_backward: out holds the initial contents unless it aliases x. */
static void run_dropout(bk *k, const float *x, size_t n, size_t off, float p, uint64_t seed,
                        int alias, float *out)
{
    size_t bytes = (n + off) * 4;
    clf_buffer *bx = up(k, x, bytes), *bo = alias ? bx : up(k, out, bytes); /* out: initial */
    clf_dropout_args a = {.out = {bo, off * 4}, .x = {bx, off * 4}, .n = n, .p = p, .seed = seed};
    CLF_ASSERT_OK(k->api->dropout(k->be, &a));
    down(k, out, bo, bytes);
    k->api->free(k->be, bx);
    if (!alias)
        k->api->free(k->be, bo);
}

START_TEST(test_dropout)
{
    static const size_t ns[] = {1, 7, 33, 65, 1000003};
    static const float ps[] = {0.0f, 0.1f, 0.5f, 0.999f};
    static const uint64_t seeds[] = {0, 1, 0x9E3779B97F4A7C15ull, UINT64_MAX};
    int v = 0;
    for (int t = 0; t < 5; t++)
        for (int pi = 0; pi < 4; pi++, v++) {
            size_t n = ns[t], off = v % 3 == 2 ? 5 : 0, all = n + off;
            if (clf_test_too_big((double)n))
                continue;
            float p = ps[pi];
            uint64_t seed = seeds[v % 4];
            int alias = v % 2;
            float *x = clf_test_frand(all, 2200 + v, -2, 2);
            float *sentinel = clf_test_frand(all, 2250 + v, 5, 6);
            float *want = fdup(alias ? x : sentinel, all), *got = fdup(sentinel, all),
                  *cgot = fdup(sentinel, all);
            const uint32_t thr = clf_dropout_threshold(p);
            const float keep_scale = 1.0f / (1.0f - p);
            size_t dropped = 0;
            for (size_t i = 0; i < n; i++) {
                int keep = clf_dropout_bits(seed, i) >= thr;
                want[off + i] = keep ? x[off + i] * keep_scale : 0.0f;
                dropped += !keep;
            }
            run_dropout(&ocl, x, n, off, p, seed, alias, got);
            run_dropout(&cpu, x, n, off, p, seed, alias, cgot);
            char what[96];
            snprintf(what, sizeof what, "dropout n=%zu off=%zu p=%g seed=%llx alias=%d", n, off,
                     (double)p, (unsigned long long)seed, alias);
            /* the mask and the kept values: the same bits as the CPU backend */
            expect_same_bits(got, want, all, what, "host reference");
            expect_same_bits(got, cgot, all, what, "cpu backend");
            if (n > 100000) /* the mask drops a fraction p (10 standard deviations) */
                ck_assert_msg(fabs((double)dropped / n - p) < 0.005, "%s: dropped %.4f", what,
                              (double)dropped / n);
            free(x);
            free(sentinel);
            free(want);
            free(got);
            free(cgot);
        }

    /* the masks alone, on a buffer of ones: every element kept or dropped by both */
    size_t n = (1u << 20) + 3;
    float *ones = malloc(n * 4), *mo = malloc(n * 4), *mc = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        ones[i] = mo[i] = mc[i] = 1.0f;
    run_dropout(&ocl, ones, n, 0, 0.1f, 12345, 0, mo);
    run_dropout(&cpu, ones, n, 0, 0.1f, 12345, 0, mc);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += (mo[i] == 0.0f) != (mc[i] == 0.0f);
    ck_assert_msg(differ == 0, "dropout: %zu of %zu mask elements differ from the cpu backend",
                  differ, n);
    expect_same_bits(mo, mc, n, "dropout mask of ones", "cpu backend");
    free(ones);
    free(mo);
    free(mc);

    clf_buffer *b = up(&ocl, NULL, 64);
    clf_dropout_args bad = {.out = {b, 0}, .x = {b, 0}, .n = 8, .p = 1.0f};
    EXPECT_ERROR(ocl.api->dropout(ocl.be, &bad), CLF_ERR_INPUT, "dropout", "[0, 1)");
    bad.p = -0.25f;
    EXPECT_ERROR(ocl.api->dropout(ocl.be, &bad), CLF_ERR_INPUT, "dropout");
    bad.p = NAN;
    EXPECT_ERROR(ocl.api->dropout(ocl.be, &bad), CLF_ERR_INPUT, "dropout");
    bad.p = 0.5f;
    bad.out.off = 8; /* partly over x */
    EXPECT_ERROR(ocl.api->dropout(ocl.be, &bad), CLF_ERR_INPUT, "dropout", "overlaps");
    ocl.api->free(ocl.be, b);
}
END_TEST

/* -- fill -- */

static void run_fill(bk *k, const float *init, size_t all, size_t off, size_t n, float value,
                     float *out)
{
    clf_buffer *b = up(k, init, all * 4);
    CLF_ASSERT_OK(k->api->fill(k->be, (clf_ptr){b, off * 4}, value, n));
    down(k, out, b, all * 4);
    k->api->free(k->be, b);
}

START_TEST(test_fill)
{
    static const size_t ns[] = {0, 1, 7, 33, 65, 65537};
    static const float values[] = {0.0f, -1.5f, 3.0e38f, -0.0f, 1e-40f /* subnormal */, 7.0f};
    for (int t = 0; t < 6; t++) {
        size_t n = ns[t], off = t % 2 ? 3 : 0, all = n + off + 5;
        if (clf_test_too_big((double)n))
            continue;
        float *init = clf_test_frand(all, 2300 + t, -1, 1), *want = fdup(init, all);
        float *got = malloc(all * 4), *cgot = malloc(all * 4);
        for (size_t i = 0; i < n; i++)
            want[off + i] = values[t];
        run_fill(&ocl, init, all, off, n, values[t], got);
        run_fill(&cpu, init, all, off, n, values[t], cgot);
        char what[64];
        snprintf(what, sizeof what, "fill n=%zu off=%zu value=%g", n, off, (double)values[t]);
        expect_same_bits(got, want, all, what, "host reference"); /* and nothing else touched */
        expect_same_bits(got, cgot, all, what, "cpu backend");
        free(init);
        free(want);
        free(got);
        free(cgot);
    }
}
END_TEST

/* -- sum_squares -- */

/* sum x[off .. off + n)^2 into out[1] of a two-float buffer (out[0] must stay). */
static float run_sum_squares(bk *k, const float *x, size_t n, size_t off)
{
    float out[2] = {-7.0f, -7.0f};
    clf_buffer *bx = up(k, x, (n + off) * 4), *bo = up(k, out, sizeof out);
    CLF_ASSERT_OK(k->api->sum_squares(k->be, (clf_ptr){bo, 4}, (clf_ptr){bx, off * 4}, n));
    down(k, out, bo, sizeof out);
    ck_assert_float_eq(out[0], -7.0f);
    k->api->free(k->be, bx);
    k->api->free(k->be, bo);
    return out[1];
}

START_TEST(test_sum_squares)
{
    static const size_t ns[] = {0, 1, 7, 33, 65, 65537, 1000003, 4194311};
    worst w = {0};
    for (int t = 0; t < 8; t++) {
        size_t n = ns[t], off = t % 2 ? 3 : 0;
        if (clf_test_too_big((double)n))
            continue;
        float *x = clf_test_frand(n + off, 2400 + t, -3, 3);
        double s = 0;
        for (size_t i = off; i < n + off; i++)
            s += (double)x[i] * x[i];
        float want = (float)s;
        float got = run_sum_squares(&ocl, x, n, off), cgot = run_sum_squares(&cpu, x, n, off);
        char what[64];
        snprintf(what, sizeof what, "sum_squares n=%zu off=%zu", n, off);
        expect_both(&got, &want, &cgot, 1, TOL_SUMSQ, what, &w);
        /* deterministic: a second run gives the same bits */
        float again = run_sum_squares(&ocl, x, n, off);
        expect_same_bits(&again, &got, 1, what, "its own first run");
        free(x);
    }
    report("test_sum_squares", &w, TOL_SUMSQ);
}
END_TEST

/* -- adam -- */

typedef struct adam_state {
    float *p, *m, *v;
} adam_state;

/* steps Adam steps with the same gradient g, bias corrections for t = 1, 2, ... */
static void run_adam(bk *k, const clf_adam_args *tmpl, int steps, const float *g, adam_state *s)
{
    size_t bytes = tmpl->n * 4;
    clf_buffer *bp = up(k, s->p, bytes), *bg = up(k, g, bytes), *bm = up(k, s->m, bytes),
               *bv = up(k, s->v, bytes);
    clf_adam_args a = *tmpl;
    a.param = (clf_ptr){bp, 0};
    a.grad = (clf_ptr){bg, 0};
    a.m = (clf_ptr){bm, 0};
    a.v = (clf_ptr){bv, 0};
    for (int t = 1; t <= steps; t++) {
        a.bias_correction1 = (float)(1.0 - pow(a.beta1, t));
        a.sqrt_bias_correction2 = (float)sqrt(1.0 - pow(a.beta2, t));
        CLF_ASSERT_OK(k->api->adam(k->be, &a));
    }
    down(k, s->p, bp, bytes);
    down(k, s->m, bm, bytes);
    down(k, s->v, bv, bytes);
    float check[1];
    down(k, check, bg, 4);
    ck_assert_float_eq(check[0], g[0]); /* grad is not modified */
    clf_buffer *all[] = {bp, bg, bm, bv};
    free_all(k, all, 4);
}

/* The same steps in double, with torch.optim.Adam / AdamW's formula. */
static void ref_adam(const clf_adam_args *a, int steps, const float *g, adam_state *s)
{
    for (size_t i = 0; i < a->n; i++) {
        double p = s->p[i], m = s->m[i], v = s->v[i];
        for (int t = 1; t <= steps; t++) {
            double bc1 = (float)(1.0 - pow(a->beta1, t)),
                   sbc2 = (float)sqrt(1.0 - pow(a->beta2, t));
            double gi = (double)g[i] * a->grad_scale;
            if (a->decoupled)
                p *= 1.0 - (double)a->lr * a->weight_decay;
            else
                gi += (double)a->weight_decay * p;
            m = a->beta1 * m + (1.0 - a->beta1) * gi;
            v = a->beta2 * v + (1.0 - a->beta2) * gi * gi;
            p -= (double)a->lr / bc1 * m / (sqrt(v) / sbc2 + a->eps);
        }
        s->p[i] = (float)p;
        s->m[i] = (float)m;
        s->v[i] = (float)v;
    }
}

START_TEST(test_adam)
{
    static const size_t ns[] = {1, 7, 33, 65537};
    worst w = {0};
    int c = 0;
    for (int t = 0; t < 4; t++)
        for (int decoupled = 0; decoupled < 2; decoupled++)
            for (int wd = 0; wd < 2; wd++, c++) {
                size_t n = ns[t];
                if (clf_test_too_big((double)n))
                    continue;
                clf_adam_args a = {.n = n,
                                   .lr = 1e-3f,
                                   .beta1 = 0.9f,
                                   .beta2 = 0.98f,
                                   .eps = 1e-9f,
                                   .weight_decay = wd ? 0.01f : 0.0f,
                                   .grad_scale = c % 3 == 0 ? 1.0f : 0.25f,
                                   .decoupled = decoupled};
                float *g = clf_test_frand(n, 2500 + c, -1, 1);
                adam_state s[3];
                for (int k = 0; k < 3; k++) {
                    s[k].p = clf_test_frand(n, 2600 + c, -1, 1);
                    s[k].m = clf_test_frand(n, 2700 + c, -0.1f, 0.1f);
                    s[k].v = clf_test_frand(n, 2800 + c, 0.0f, 0.01f);
                }
                if (n > 2) /* a zero gradient and a zero second moment: the eps path */
                    g[1] = s[0].m[1] = s[0].v[1] = s[1].m[1] = s[1].v[1] = s[2].m[1] = s[2].v[1] =
                        0.0f;
                ref_adam(&a, 3, g, &s[0]);
                run_adam(&ocl, &a, 3, g, &s[1]);
                run_adam(&cpu, &a, 3, g, &s[2]);
                char what[96];
                snprintf(what, sizeof what, "adam n=%zu decoupled=%d weight_decay=%g", n, decoupled,
                         (double)a.weight_decay);
                expect_both(s[1].p, s[0].p, s[2].p, n, TOL_ADAM, what, &w);
                expect_both(s[1].m, s[0].m, s[2].m, n, TOL_ADAM, what, &w);
                expect_both(s[1].v, s[0].v, s[2].v, n, TOL_ADAM, what, &w);
                free(g);
                for (int k = 0; k < 3; k++) {
                    free(s[k].p);
                    free(s[k].m);
                    free(s[k].v);
                }
            }
    report("test_adam", &w, TOL_ADAM);

    clf_buffer *b = up(&ocl, NULL, 64);
    clf_adam_args bad = {.n = 8,
                         .param = {b, 0},
                         .grad = {b, 32},
                         .m = {b, 16}, /* overlaps param */
                         .v = {b, 0},
                         .bias_correction1 = 0.1f,
                         .sqrt_bias_correction2 = 0.1f};
    EXPECT_ERROR(ocl.api->adam(ocl.be, &bad), CLF_ERR_INPUT, "adam", "overlap");
    bad.bias_correction1 = 0.0f;
    EXPECT_ERROR(ocl.api->adam(ocl.be, &bad), CLF_ERR_INPUT, "adam", "bias correction");
    ocl.api->free(ocl.be, b);
}
END_TEST

/* -- cross_entropy -- */

/* dl_mode: 0 loss only, 1 a separate dlogits, 2 dlogits aliasing logits. */
static void run_cross_entropy(bk *k, const clf_cross_entropy_args *tmpl, const float *logits,
                              const int32_t *targets, int dl_mode, float *loss, float *dl)
{
    size_t n = (size_t)tmpl->rows * tmpl->cols, rows = (size_t)tmpl->rows;
    clf_buffer *bx = up(k, logits, n * 4), *bt = up(k, targets, rows * 4),
               *bl = up(k, NULL, rows * 4), *bd = dl_mode == 1 ? up(k, NULL, n * 4) : NULL;
    clf_cross_entropy_args a = *tmpl;
    a.logits = (clf_ptr){bx, 0};
    a.targets = (clf_ptr){bt, 0};
    a.loss = (clf_ptr){bl, 0};
    a.dlogits = (clf_ptr){dl_mode == 2 ? bx : bd, 0};
    CLF_ASSERT_OK(k->api->cross_entropy(k->be, &a));
    down(k, loss, bl, rows * 4);
    if (dl_mode)
        down(k, dl, dl_mode == 2 ? bx : bd, n * 4);
    clf_buffer *all[] = {bx, bt, bl, bd};
    free_all(k, all, 4);
}

static void ref_cross_entropy(const clf_cross_entropy_args *a, const float *logits,
                              const int32_t *targets, float *loss, float *dl)
{
    int C = a->cols;
    double ls = a->label_smoothing;
    for (int r = 0; r < a->rows; r++) {
        const float *x = logits + (size_t)r * C;
        float *d = dl + (size_t)r * C;
        int t = targets[r];
        if (t == a->ignore_index || t < 0 || t >= C) {
            loss[r] = 0.0f;
            for (int c = 0; c < C; c++)
                d[c] = 0.0f;
            continue;
        }
        double mx = x[0], s = 0, sum_lp = 0;
        for (int c = 1; c < C; c++)
            mx = x[c] > mx ? x[c] : mx;
        for (int c = 0; c < C; c++)
            s += exp(x[c] - mx);
        double lse = mx + log(s);
        for (int c = 0; c < C; c++)
            sum_lp += x[c] - lse;
        loss[r] = (float)(-(1 - ls) * (x[t] - lse) - ls / C * sum_lp);
        for (int c = 0; c < C; c++)
            d[c] = (float)(a->grad_scale * (exp(x[c] - lse) - (c == t ? 1 - ls : 0) - ls / C));
    }
}

START_TEST(test_cross_entropy)
{
    static const int rows[] = {1, 7, 33}, cols[] = {1, 2, 7, 65, 1000, 8000};
    worst w = {0};
    int v = 0;
    for (int ri = 0; ri < 3; ri++)
        for (int ci = 0; ci < 6; ci++)
            for (int smooth = 0; smooth < 2; smooth++, v++) {
                int R = rows[ri], C = cols[ci], dl_mode = v % 3;
                if (clf_test_too_big((double)R * C))
                    continue;
                size_t n = (size_t)R * C;
                clf_cross_entropy_args a = {.rows = R,
                                            .cols = C,
                                            .ignore_index = v % 2 ? 1 : -100,
                                            .label_smoothing = smooth ? 0.1f : 0.0f,
                                            .grad_scale = v % 4 == 0 ? 1.0f : 1.0f / 37};
                /* large: needs the max subtracted */
                float *x = clf_test_frand(n, 2900 + v, -20, 20);
                int32_t *tg = malloc((size_t)R * sizeof *tg);
                for (int r = 0; r < R; r++)
                    tg[r] = (r * 7 + v) % C;
                if (R > 3) {
                    tg[1] = a.ignore_index; /* ignored: loss 0, no gradient */
                    tg[2] = C + 3;          /* out of range: the same */
                    tg[3] = C - 1;
                }
                float *wl = malloc((size_t)R * 4), *gl = malloc((size_t)R * 4),
                      *cl = malloc((size_t)R * 4);
                float *wd = malloc(n * 4), *gd = malloc(n * 4), *cd = malloc(n * 4);
                ref_cross_entropy(&a, x, tg, wl, wd);
                run_cross_entropy(&ocl, &a, x, tg, dl_mode, gl, gd);
                run_cross_entropy(&cpu, &a, x, tg, dl_mode, cl, cd);
                char what[128];
                snprintf(what, sizeof what,
                         "cross_entropy rows=%d cols=%d ls=%g ignore=%d grad_scale=%g dlogits=%s",
                         R, C, (double)a.label_smoothing, a.ignore_index, (double)a.grad_scale,
                         dl_mode == 0   ? "none"
                         : dl_mode == 1 ? "separate"
                                        : "aliasing logits");
                expect_both(gl, wl, cl, (size_t)R, TOL_XENT, what, &w);
                if (dl_mode)
                    expect_both(gd, wd, cd, n, TOL_XENT, what, &w);
                if (R > 3)
                    ck_assert_msg(gl[1] == 0.0f && gl[2] == 0.0f, "%s: ignored rows' loss", what);
                free(x);
                free(tg);
                free(wl);
                free(gl);
                free(cl);
                free(wd);
                free(gd);
                free(cd);
            }
    report("test_cross_entropy", &w, TOL_XENT);
}
END_TEST

/* -- embed_backward -- */

static void run_embed_backward(bk *k, const clf_embed_backward_args *tmpl, const float *dtable0,
                               const float *dout, const int32_t *ids, size_t off, float *dtable)
{
    size_t nt = (size_t)tmpl->vocab * tmpl->dim + off, nd = (size_t)tmpl->rows * tmpl->dim + off;
    clf_buffer *bt = up(k, dtable0, nt * 4), *bd = up(k, dout, nd * 4),
               *bi = up(k, ids, (size_t)tmpl->rows * 4);
    clf_embed_backward_args a = *tmpl;
    a.dtable = (clf_ptr){bt, off * 4};
    a.dout = (clf_ptr){bd, off * 4};
    a.ids = (clf_ptr){bi, 0};
    CLF_ASSERT_OK(k->api->embed_backward(k->be, &a));
    down(k, dtable, bt, nt * 4);
    clf_buffer *all[] = {bt, bd, bi};
    free_all(k, all, 3);
}

START_TEST(test_embed_backward)
{
    static const int rows[] = {1, 7, 33, 65, 300}, dims[] = {1, 7, 65, 512};
    worst w = {0};
    int v = 0;
    for (int ri = 0; ri < 5; ri++)
        for (int di = 0; di < 4; di++, v++) {
            int R = rows[ri], dim = dims[di], vocab = 13;
            if (clf_test_too_big((double)R * dim))
                continue;
            size_t off = v % 3 == 1 ? 5 : 0;
            size_t nt = (size_t)vocab * dim + off, nd = (size_t)R * dim + off;
            clf_embed_backward_args a = {
                .rows = R, .dim = dim, .vocab = vocab, .scale = sqrtf((float)dim)};
            int32_t *ids = malloc((size_t)R * sizeof *ids);
            for (int r = 0; r < R; r++) /* repeats, and ids -2, -1, 13, 14 (skipped) */
                ids[r] = (r * 5 + v) % (vocab + 4) - 2;
            float *t0 = clf_test_frand(nt, 3000 + v, -1, 1),
                  *dout = clf_test_frand(nd, 3100 + v, -1, 1);
            float *want = fdup(t0, nt), *got = malloc(nt * 4), *cgot = malloc(nt * 4);
            double *acc = malloc((size_t)vocab * dim * sizeof *acc);
            for (size_t i = 0; i < (size_t)vocab * dim; i++)
                acc[i] = t0[off + i];
            for (int r = 0; r < R; r++)
                if (ids[r] >= 0 && ids[r] < vocab)
                    for (int d = 0; d < dim; d++)
                        acc[(size_t)ids[r] * dim + d] +=
                            (double)a.scale * dout[off + (size_t)r * dim + d];
            for (size_t i = 0; i < (size_t)vocab * dim; i++)
                want[off + i] = (float)acc[i];
            run_embed_backward(&ocl, &a, t0, dout, ids, off, got);
            run_embed_backward(&cpu, &a, t0, dout, ids, off, cgot);
            char what[96];
            snprintf(what, sizeof what, "embed_backward rows=%d dim=%d off=%zu", R, dim, off);
            expect_both(got, want, cgot, nt, TOL_EMBED_BWD, what, &w);
            free(ids);
            free(t0);
            free(dout);
            free(want);
            free(got);
            free(cgot);
            free(acc);
        }
    report("test_embed_backward", &w, TOL_EMBED_BWD);
}
END_TEST

/* -- layernorm_backward -- */

/* params: 0 neither dalpha nor dbeta, 1 both, 2 dalpha only. dx0, da0, db0: the initial
 * contents (dx is accumulated into when a->accumulate; the parameters always are). */
static void run_layernorm_backward(bk *k, const clf_layernorm_backward_args *tmpl, const float *x,
                                   const float *dy, const float *alpha, const float *dx0,
                                   const float *da0, const float *db0, int params, float *dx,
                                   float *da, float *db)
{
    size_t n = (size_t)tmpl->rows * tmpl->cols, c = (size_t)tmpl->cols;
    clf_buffer *bx = up(k, x, n * 4), *bdy = up(k, dy, n * 4), *ba = up(k, alpha, c * 4),
               *bdx = up(k, dx0, n * 4);
    clf_buffer *bda = params ? up(k, da0, c * 4) : NULL,
               *bdb = params == 1 ? up(k, db0, c * 4) : NULL;
    clf_layernorm_backward_args a = *tmpl;
    a.dx = (clf_ptr){bdx, 0};
    a.dy = (clf_ptr){bdy, 0};
    a.x = (clf_ptr){bx, 0};
    a.alpha = (clf_ptr){ba, 0};
    a.dalpha = (clf_ptr){bda, 0};
    a.dbeta = (clf_ptr){bdb, 0};
    CLF_ASSERT_OK(k->api->layernorm_backward(k->be, &a));
    down(k, dx, bdx, n * 4);
    if (bda)
        down(k, da, bda, c * 4);
    if (bdb)
        down(k, db, bdb, c * 4);
    clf_buffer *all[] = {bx, bdy, ba, bdx, bda, bdb};
    free_all(k, all, 6);
}

/* sum_c dy[c] * LN(x)[c] of one row in double (beta drops out of the gradient). */
static double ln_row_loss(const double *x, const float *dy, const float *alpha, int C, int style,
                          double eps)
{
    double mean = 0, ss = 0, l = 0;
    for (int c = 0; c < C; c++)
        mean += x[c];
    mean /= C;
    for (int c = 0; c < C; c++)
        ss += (x[c] - mean) * (x[c] - mean);
    double D = style == CLF_LN_TUTORIAL ? sqrt(ss / (C - 1)) + eps : sqrt(ss / C + eps);
    for (int c = 0; c < C; c++)
        l += dy[c] * (alpha[c] * (x[c] - mean) / D);
    return l;
}

/* The reference: dx by central differences of the double forward (independent of the
 * closed form the backends use; truncation and rounding errors are ~1e-10 here), dalpha
 * and dbeta from their definitions. */
static void ref_layernorm_backward(const clf_layernorm_backward_args *a, const float *x,
                                   const float *dy, const float *alpha, float *dx, float *da,
                                   float *db)
{
    int R = a->rows, C = a->cols;
    double *row = malloc((size_t)C * sizeof *row);
    double *sa = calloc((size_t)C, sizeof *sa), *sb = calloc((size_t)C, sizeof *sb);
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * C, *gr = dy + (size_t)r * C;
        for (int c = 0; c < C; c++)
            row[c] = xr[c];
        for (int c = 0; c < C; c++) {
            /* the five-point stencil: truncation error O(h^4) */
            double h = 1e-4 * (1.0 + fabs(row[c])), f[4];
            static const double at[4] = {-2, -1, 1, 2};
            for (int s = 0; s < 4; s++) {
                row[c] = xr[c] + at[s] * h;
                f[s] = ln_row_loss(row, gr, alpha, C, a->style, a->eps);
            }
            row[c] = xr[c];
            double g = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h);
            float *d = dx + (size_t)r * C + c;
            *d = (float)(a->accumulate ? *d + g : g);
        }
        double mean = 0, ss = 0;
        for (int c = 0; c < C; c++)
            mean += row[c];
        mean /= C;
        for (int c = 0; c < C; c++)
            ss += (row[c] - mean) * (row[c] - mean);
        double D =
            a->style == CLF_LN_TUTORIAL ? sqrt(ss / (C - 1)) + a->eps : sqrt(ss / C + a->eps);
        for (int c = 0; c < C; c++) {
            sa[c] += gr[c] * (row[c] - mean) / D;
            sb[c] += gr[c];
        }
    }
    for (int c = 0; c < C; c++) {
        da[c] = (float)(da[c] + sa[c]);
        db[c] = (float)(db[c] + sb[c]);
    }
    free(row);
    free(sa);
    free(sb);
}

START_TEST(test_layernorm_backward)
{
    static const int rows[] = {1, 7, 33}, cols[] = {3, 7, 33, 65, 129, 512, 1000};
    worst w = {0};
    int v = 0;
    for (int style = 0; style < 2; style++)
        for (int ri = 0; ri < 3; ri++)
            for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++, v++) {
                int R = rows[ri], C = cols[ci], params = v % 3;
                if (clf_test_too_big((double)R * C))
                    continue;
                size_t n = (size_t)R * C;
                clf_layernorm_backward_args a = {.rows = R,
                                                 .cols = C,
                                                 .style = (clf_ln_style)style,
                                                 .eps = style == CLF_LN_TUTORIAL ? 1e-6f : 1e-5f,
                                                 .accumulate = v % 2};
                /* an offset of 10, as in test_layernorm: the corrected two-pass variance */
                float *x = clf_test_frand(n, 3200 + v, 7, 13),
                      *dy = clf_test_frand(n, 3300 + v, -1, 1);
                float *alpha = clf_test_frand(C, 3400 + v, 0.5f, 1.5f);
                float *dx0 = clf_test_frand(n, 3500 + v, -1, 1),
                      *da0 = clf_test_frand(C, 3600 + v, -1, 1),
                      *db0 = clf_test_frand(C, 3700 + v, -1, 1);
                float *wdx = fdup(dx0, n), *wda = fdup(da0, C), *wdb = fdup(db0, C);
                float *gdx = malloc(n * 4), *gda = fdup(da0, C), *gdb = fdup(db0, C);
                float *cdx = malloc(n * 4), *cda = fdup(da0, C), *cdb = fdup(db0, C);
                ref_layernorm_backward(&a, x, dy, alpha, wdx, wda, wdb);
                run_layernorm_backward(&ocl, &a, x, dy, alpha, dx0, da0, db0, params, gdx, gda,
                                       gdb);
                run_layernorm_backward(&cpu, &a, x, dy, alpha, dx0, da0, db0, params, cdx, cda,
                                       cdb);
                char what[128];
                snprintf(what, sizeof what,
                         "layernorm_backward %s rows=%d cols=%d accumulate=%d params=%s",
                         style ? "standard" : "tutorial", R, C, a.accumulate,
                         params == 0   ? "none"
                         : params == 1 ? "both"
                                       : "dalpha");
                expect_both(gdx, wdx, cdx, n, TOL_LN_BWD, what, &w);
                if (params)
                    expect_both(gda, wda, cda, (size_t)C, TOL_LN_BWD, what, &w);
                if (params == 1)
                    expect_both(gdb, wdb, cdb, (size_t)C, TOL_LN_BWD, what, &w);
                /* deterministic: the parameter sums come out the same bits again */
                if (params == 1 && v % 4 == 1) {
                    float *again_a = fdup(da0, C), *again_b = fdup(db0, C),
                          *again_x = malloc(n * 4);
                    run_layernorm_backward(&ocl, &a, x, dy, alpha, dx0, da0, db0, params, again_x,
                                           again_a, again_b);
                    expect_same_bits(again_a, gda, C, what, "its own first run (dalpha)");
                    expect_same_bits(again_b, gdb, C, what, "its own first run (dbeta)");
                    expect_same_bits(again_x, gdx, n, what, "its own first run (dx)");
                    free(again_a);
                    free(again_b);
                    free(again_x);
                }
                float *all[] = {x,   dy,  alpha, dx0, da0, db0, wdx, wda,
                                wdb, gdx, gda,   gdb, cdx, cda, cdb};
                for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                    free(all[i]);
            }
    report("test_layernorm_backward", &w, TOL_LN_BWD);

    /* constant rows in the tutorial style: std = 0, where torch.std's backward is 0/0; the
     * term through the std is taken as 0, leaving dx = (g - mean(g)) / eps */
    float x[14], dy[14], alpha[7], dx[14] = {0}, cdx[14] = {0}, want[14], da[7] = {0}, db[7] = {0};
    for (int c = 0; c < 7; c++) {
        x[c] = 5.0f;
        x[7 + c] = 0.25f;
        alpha[c] = 1.0f + 0.125f * c;
    }
    clf_test_fill(dy, 14, 3800, -1, 1);
    clf_layernorm_backward_args a = {.rows = 2, .cols = 7, .style = CLF_LN_TUTORIAL, .eps = 1e-6f};
    for (int r = 0; r < 2; r++) {
        double mg = 0;
        for (int c = 0; c < 7; c++)
            mg += (double)dy[r * 7 + c] * alpha[c] / 7;
        for (int c = 0; c < 7; c++)
            want[r * 7 + c] = (float)(((double)dy[r * 7 + c] * alpha[c] - mg) / (double)a.eps);
    }
    run_layernorm_backward(&ocl, &a, x, dy, alpha, dx, da, db, 0, dx, da, db);
    run_layernorm_backward(&cpu, &a, x, dy, alpha, cdx, da, db, 0, cdx, da, db);
    worst wc = {0};
    expect_both(dx, want, cdx, 14, TOL_LN_BWD, "layernorm_backward tutorial, constant rows", &wc);

    /* two columns: LN maps any two distinct values to about -alpha, +alpha, so dx is ~eps
     * times its terms (g / D) and float cancellation sets its relative error; it is
     * measured against the size of those terms instead (the CPU backend works in double) */
    for (int style = 0; style < 2; style++) {
        enum { R2 = 7, C2 = 2 };
        float x2[R2 * C2], dy2[R2 * C2], a2[C2] = {0.75f, 1.25f}, z[R2 * C2] = {0};
        float g2[R2 * C2], c2[R2 * C2], da2[C2] = {0}, db2[C2] = {0}, cda2[C2] = {0},
                                        cdb2[C2] = {0};
        clf_test_fill(x2, R2 * C2, 3900 + style, -3, 3);
        clf_test_fill(dy2, R2 * C2, 3950 + style, -1, 1);
        clf_layernorm_backward_args a2args = {.rows = R2,
                                              .cols = C2,
                                              .style = (clf_ln_style)style,
                                              .eps = style == CLF_LN_TUTORIAL ? 1e-6f : 1e-5f};
        run_layernorm_backward(&ocl, &a2args, x2, dy2, a2, z, da2, db2, 1, g2, da2, db2);
        run_layernorm_backward(&cpu, &a2args, x2, dy2, a2, z, cda2, cdb2, 1, c2, cda2, cdb2);
        double scale = 0, err = 0;
        for (int r = 0; r < R2; r++) {
            double d = fabs((double)x2[r * 2] - x2[r * 2 + 1]) / 2; /* std (biased) */
            d = style == CLF_LN_TUTORIAL ? d * sqrt(2.0) + a2args.eps : sqrt(d * d + a2args.eps);
            for (int c = 0; c < C2; c++) {
                double term = fabs((double)dy2[r * 2 + c] * a2[c]) / d;
                scale = term > scale ? term : scale;
                double e = fabs((double)g2[r * 2 + c] - c2[r * 2 + c]);
                err = e > err ? e : err;
            }
        }
        ck_assert_msg(err <= TOL_LN_BWD * scale,
                      "layernorm_backward %s cols=2: |dx - cpu| = %.3g, terms up to %.3g",
                      style ? "standard" : "tutorial", err, scale);
        expect_close(da2, cda2, C2, TOL_LN_BWD, "layernorm_backward cols=2 dalpha", "cpu backend");
        expect_close(db2, cdb2, C2, TOL_LN_BWD, "layernorm_backward cols=2 dbeta", "cpu backend");
    }
}
END_TEST

/* -- attention_backward -- */

typedef struct attn_bwd_case {
    int B, H, Tq, Tk, D;
    int mask; /* as attn_case */
    int causal, q_pos0;
    int fused; /* q, k, v (and dq, dk, dv) column slices of one [T, 3 width] buffer */
    int pad;
} attn_bwd_case;

/* Host copies of the operands: fused, one buffer for q|k|v and one for dq|dk|dv (buffer
 * index 0 for all three); else three of each. dout and the mask on their own. */
typedef struct attn_bwd_data {
    int nbuf;
    float *in[3], *grad[3];
    size_t nin[3];
    float *dout;
    int32_t *mask;
    size_t nout, nmask;
} attn_bwd_data;

/* dq, dk, dv of loss = sum(dout * attention(q, k, v)) in double, written over the head
 * columns of the gradient arrays (DQ, DK, DV with dq/dk/dv's offsets); the rest stays. */
static void ref_attention_backward(const clf_attention_backward_args *ba, const float *Q,
                                   const float *K, const float *V, const int32_t *M,
                                   const float *DO, float *DQ, float *DK, float *DV)
{
    const clf_attention_args *a = &ba->fwd;
    int D = a->head_dim, Tq = a->q_len, Tk = a->kv_len;
    double *P = malloc(sizeof *P * ((size_t)Tq * Tk + 1)),
           *dS = malloc(sizeof *dS * ((size_t)Tq * Tk + 1));
    ck_assert_ptr_nonnull(P);
    ck_assert_ptr_nonnull(dS);
    for (int b = 0; b < a->batch; b++)
        for (int h = 0; h < a->heads; h++) {
#define AQ(i)  (Q + a->q.off / 4 + b * a->q_bstride + (size_t)(i)*a->q_ld + h * D)
#define AK(j)  (K + a->k.off / 4 + b * a->kv_bstride + (size_t)(j)*a->k_ld + h * D)
#define AV(j)  (V + a->v.off / 4 + b * a->kv_bstride + (size_t)(j)*a->v_ld + h * D)
#define ADO(i) (DO + ba->dout.off / 4 + b * a->out_bstride + (size_t)(i)*a->out_ld + h * D)
            for (int i = 0; i < Tq; i++) {
                double mx = -INFINITY, sum = 0, Di = 0;
                double *p = P + (size_t)i * Tk, *ds = dS + (size_t)i * Tk;
                for (int j = 0; j < Tk; j++) {
                    int masked = (M && M[a->key_mask.off / 4 + b * a->key_mask_stride + j] == 0) ||
                                 (a->causal && j > a->q_pos0 + i);
                    double dot = 0;
                    for (int d = 0; d < D; d++)
                        dot += (double)AQ(i)[d] * AK(j)[d];
                    p[j] = masked ? -1e9 : dot * a->scale;
                    ds[j] = masked; /* remembered until dS is known */
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int j = 0; j < Tk; j++)
                    sum += (p[j] = exp(p[j] - mx));
                for (int j = 0; j < Tk; j++) {
                    p[j] /= sum;
                    double dp = 0;
                    for (int d = 0; d < D; d++)
                        dp += (double)ADO(i)[d] * AV(j)[d];
                    Di += p[j] * dp;
                    ds[j] = ds[j] != 0 ? NAN : dp; /* NaN marks masked */
                }
                for (int j = 0; j < Tk; j++)
                    ds[j] = isnan(ds[j]) ? 0.0 : p[j] * (ds[j] - Di);
            }
            for (int i = 0; i < Tq; i++) {
                float *o = DQ + ba->dq.off / 4 + b * a->q_bstride + (size_t)i * a->q_ld + h * D;
                for (int d = 0; d < D; d++) {
                    double s = 0;
                    for (int j = 0; j < Tk; j++)
                        s += dS[(size_t)i * Tk + j] * AK(j)[d];
                    o[d] = (float)(a->scale * s);
                }
            }
            for (int j = 0; j < Tk; j++) {
                float *ok = DK + ba->dk.off / 4 + b * a->kv_bstride + (size_t)j * a->k_ld + h * D;
                float *ov = DV + ba->dv.off / 4 + b * a->kv_bstride + (size_t)j * a->v_ld + h * D;
                for (int d = 0; d < D; d++) {
                    double sk = 0, sv = 0;
                    for (int i = 0; i < Tq; i++) {
                        sk += dS[(size_t)i * Tk + j] * AQ(i)[d];
                        sv += P[(size_t)i * Tk + j] * ADO(i)[d];
                    }
                    ok[d] = (float)(a->scale * sk);
                    ov[d] = (float)sv;
                }
            }
#undef AQ
#undef AK
#undef AV
#undef ADO
        }
    free(P);
    free(dS);
}

/* Runs the op on k; grads receive the whole gradient buffers. */
static void run_attention_backward(bk *k, const clf_attention_backward_args *tmpl,
                                   const attn_bwd_data *d, float **grads)
{
    clf_buffer *bin[3] = {NULL}, *bg[3] = {NULL};
    for (int i = 0; i < d->nbuf; i++) {
        bin[i] = up(k, d->in[i], d->nin[i] * 4);
        bg[i] = up(k, d->grad[i], d->nin[i] * 4);
    }
    clf_buffer *bo = up(k, d->dout, d->nout * 4);
    clf_buffer *bm = d->mask ? up(k, d->mask, d->nmask * 4) : NULL;
    clf_attention_backward_args a = *tmpl;
    int j = d->nbuf == 1 ? 0 : 1, l = d->nbuf == 1 ? 0 : 2;
    a.fwd.q.buf = bin[0];
    a.fwd.k.buf = bin[j];
    a.fwd.v.buf = bin[l];
    a.dq.buf = bg[0];
    a.dk.buf = bg[j];
    a.dv.buf = bg[l];
    a.dout.buf = bo;
    a.fwd.key_mask.buf = bm;
    CLF_ASSERT_OK(k->api->attention_backward(k->be, &a));
    for (int i = 0; i < d->nbuf; i++)
        down(k, grads[i], bg[i], d->nin[i] * 4);
    clf_buffer *all[] = {bin[0], bin[1], bin[2], bg[0], bg[1], bg[2], bo, bm};
    free_all(k, all, 8);
}

static void check_attention_backward_case(const attn_bwd_case *t, unsigned seed, worst *w)
{
    if (clf_test_too_big((double)t->B * t->H * t->Tq * t->Tk * t->D))
        return;
    int width = t->H * t->D, pad = t->pad;
    clf_attention_backward_args ba = {0};
    clf_attention_args *a = &ba.fwd;
    *a = (clf_attention_args){.batch = t->B,
                              .heads = t->H,
                              .q_len = t->Tq,
                              .kv_len = t->Tk,
                              .head_dim = t->D,
                              .causal = t->causal,
                              .q_pos0 = t->q_pos0,
                              .scale = 1.0f / sqrtf((float)t->D)};
    attn_bwd_data d = {0};
    if (t->fused) { /* self-attention over one [B, T, 3 width + pad] projection */
        ck_assert_int_eq(t->Tq, t->Tk);
        a->q_ld = a->k_ld = a->v_ld = 3 * width + pad;
        a->q_bstride = a->kv_bstride = (size_t)t->Tq * a->q_ld + pad;
        a->q.off = (size_t)pad * 4;
        a->k.off = a->q.off + (size_t)width * 4;
        a->v.off = a->k.off + (size_t)width * 4;
        d.nbuf = 1;
        d.nin[0] = pad + (size_t)t->B * a->q_bstride;
    } else { /* the layout of test_attention */
        a->q_ld = width + pad;
        a->k_ld = width + 2 * pad;
        a->v_ld = width + pad;
        a->q_bstride = (size_t)t->Tq * a->q_ld + pad;
        a->kv_bstride = (size_t)t->Tk * a->v_ld + 2 * (size_t)t->Tk * pad;
        a->q.off = a->k.off = a->v.off = (size_t)pad * 4;
        d.nbuf = 3;
        d.nin[0] = pad + (size_t)t->B * a->q_bstride;
        d.nin[1] = d.nin[2] = pad + (size_t)t->B * a->kv_bstride;
    }
    a->out_ld = width + 3 * pad;
    a->out_bstride = (size_t)t->Tq * a->out_ld + pad;
    a->key_mask_stride = (size_t)t->Tk + pad;
    a->key_mask.off = ba.dout.off = (size_t)pad * 4;
    ba.dq.off = a->q.off;
    ba.dk.off = a->k.off;
    ba.dv.off = a->v.off;
    d.nout = pad + (size_t)t->B * a->out_bstride + 1;
    d.nmask = pad + (size_t)t->B * a->key_mask_stride;
    for (int i = 0; i < d.nbuf; i++) {
        d.in[i] = clf_test_frand(d.nin[i], seed + i, -2, 2);
        /* outside the op's columns: stays */
        d.grad[i] = clf_test_frand(d.nin[i], seed + 10 + i, -1, 1);
    }
    d.dout = clf_test_frand(d.nout, seed + 5, -1, 1);
    if (t->mask) {
        d.mask = malloc(d.nmask * sizeof *d.mask);
        for (size_t i = 0; i < d.nmask; i++)
            d.mask[i] = 1;
        for (int b = 0; b < t->B; b++)
            for (int j = 0; j < t->Tk; j++) {
                int on = 1;
                if (t->mask == 1)
                    on = j < t->Tk - (b * 3) % t->Tk;
                else if (t->mask == 2)
                    on = b != 0;
                else if (t->mask == 3)
                    on = j >= 3;
                d.mask[pad + b * a->key_mask_stride + j] = on;
            }
    }
    float *want[3] = {NULL}, *got[3] = {NULL}, *cgot[3] = {NULL};
    for (int i = 0; i < d.nbuf; i++) {
        want[i] = fdup(d.grad[i], d.nin[i]);
        got[i] = malloc(d.nin[i] * 4);
        cgot[i] = malloc(d.nin[i] * 4);
    }
    int j = d.nbuf == 1 ? 0 : 1, l = d.nbuf == 1 ? 0 : 2;
    ref_attention_backward(&ba, d.in[0], d.in[j], d.in[l], d.mask, d.dout, want[0], want[j],
                           want[l]);
    run_attention_backward(&ocl, &ba, &d, got);
    run_attention_backward(&cpu, &ba, &d, cgot);
    char what[200];
    for (int i = 0; i < d.nbuf; i++) {
        snprintf(what, sizeof what,
                 "attention_backward B=%d H=%d Tq=%d Tk=%d D=%d mask=%d causal=%d q_pos0=%d "
                 "fused=%d pad=%d: %s",
                 t->B, t->H, t->Tq, t->Tk, t->D, t->mask, t->causal, t->q_pos0, t->fused, pad,
                 d.nbuf == 1 ? "dq|dk|dv"
                 : i == 0    ? "dq"
                 : i == 1    ? "dk"
                             : "dv");
        expect_both(got[i], want[i], cgot[i], d.nin[i], TOL_ATTN_BWD, what, w);
    }
    /* deterministic: the same bits from a second run */
    run_attention_backward(&ocl, &ba, &d, cgot);
    for (int i = 0; i < d.nbuf; i++)
        expect_same_bits(cgot[i], got[i], d.nin[i], what, "its own first run");
    for (int i = 0; i < d.nbuf; i++) {
        free(d.in[i]);
        free(d.grad[i]);
        free(want[i]);
        free(got[i]);
        free(cgot[i]);
    }
    free(d.dout);
    free(d.mask);
}

START_TEST(test_attention_backward)
{
    static const attn_bwd_case cases[] = {
        /* B  H  Tq   Tk    D  mask causal q_pos0 fused pad */
        {1, 1, 1, 1, 1, 0, 0, 0, 0, 0},       {2, 3, 7, 7, 7, 1, 0, 0, 1, 0},
        {2, 2, 33, 33, 64, 1, 1, 0, 1, 1},    /* the decoder's masked self-attention */
        {1, 2, 5, 129, 64, 1, 1, 124, 0, 0},  /* queries at the end of the keys */
        {3, 1, 65, 129, 7, 2, 0, 0, 0, 3},    /* batch 0 fully masked: uniform P, dv only */
        {2, 2, 7, 300, 128, 1, 1, 293, 0, 2}, /* more keys than a work-group */
        {2, 2, 33, 65, 64, 1, 0, 0, 0, 0},    /* cross-attention */
        {1, 2, 6, 6, 8, 3, 1, 0, 1, 1},       /* rows 0-2 see only masked keys */
        {2, 1, 129, 129, 1, 1, 1, 0, 1, 0},   {1, 3, 65, 1, 33, 1, 0, 0, 0, 0},
        {2, 2, 300, 9, 16, 1, 0, 0, 0, 0}, /* more queries than a work-group */
        {1, 1, 3, 5, 260, 0, 0, 0, 0, 1},  /* head_dim above the work-group size */
        {1, 2, 0, 5, 4, 0, 0, 0, 0, 1},    /* no queries: dk = dv = 0 */
    };
    worst w = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_attention_backward_case(&cases[i], 4000 + 20 * (unsigned)i, &w);
    report("test_attention_backward", &w, TOL_ATTN_BWD);
}
END_TEST

/* Operand checks of the training ops: bounds, refused aliasing, missing operands. */
START_TEST(test_train_bounds)
{
    float h[256] = {0};
    clf_buffer *big = up(&ocl, h, sizeof h), *small = up(&ocl, h, 40); /* 10 floats */

    EXPECT_ERROR(ocl.api->relu_backward(ocl.be, (clf_ptr){small, 0}, (clf_ptr){big, 0},
                                        (clf_ptr){big, 0}, 11),
                 CLF_ERR_INPUT, "relu_backward", "'dx'");
    EXPECT_ERROR(ocl.api->relu_backward(ocl.be, (clf_ptr){big, 4}, (clf_ptr){big, 0},
                                        (clf_ptr){small, 0}, 8),
                 CLF_ERR_INPUT, "relu_backward", "overlaps");

    clf_layernorm_backward_args ln = {.rows = 2,
                                      .cols = 8,
                                      .eps = 1e-6f,
                                      .dx = {big, 0},
                                      .dy = {big, 256},
                                      .x = {big, 512},
                                      .alpha = {big, 768},
                                      .dalpha = {small, 16}}; /* 4 + 8 > 10 */
    EXPECT_ERROR(ocl.api->layernorm_backward(ocl.be, &ln), CLF_ERR_INPUT, "layernorm_backward",
                 "'dalpha'");
    ln.dalpha = (clf_ptr){NULL, 0};
    ln.x = (clf_ptr){big, 32}; /* inside dx */
    EXPECT_ERROR(ocl.api->layernorm_backward(ocl.be, &ln), CLF_ERR_INPUT, "layernorm_backward",
                 "alias");
    ln.x = (clf_ptr){big, 512};
    ln.alpha = (clf_ptr){NULL, 0};
    EXPECT_ERROR(ocl.api->layernorm_backward(ocl.be, &ln), CLF_ERR_INPUT, "layernorm_backward",
                 "'alpha'", "missing");

    clf_attention_backward_args at = {.fwd = {.batch = 1,
                                              .heads = 2,
                                              .q_len = 4,
                                              .kv_len = 4,
                                              .head_dim = 4,
                                              .q = {big, 0},
                                              .k = {big, 0},
                                              .v = {big, 0},
                                              .q_ld = 8,
                                              .k_ld = 8,
                                              .v_ld = 8,
                                              .out_ld = 8,
                                              .scale = 1},
                                      .dout = {big, 0},
                                      .dq = {small, 0}, /* needs 32 floats */
                                      .dk = {big, 512},
                                      .dv = {big, 640}};
    EXPECT_ERROR(ocl.api->attention_backward(ocl.be, &at), CLF_ERR_INPUT, "attention_backward",
                 "'dq'");
    at.dq = (clf_ptr){big, 384};
    at.dv = (clf_ptr){big, 64}; /* over q, k, v and dout */
    EXPECT_ERROR(ocl.api->attention_backward(ocl.be, &at), CLF_ERR_INPUT, "attention_backward",
                 "'dv' overlaps");
    at.dv = (clf_ptr){big, 640};
    at.fwd.v_ld = 7;
    EXPECT_ERROR(ocl.api->attention_backward(ocl.be, &at), CLF_ERR_INPUT, "attention_backward",
                 "v_ld");

    clf_embed_backward_args em = {.rows = 12,
                                  .dim = 4,
                                  .vocab = 8,
                                  .scale = 1,
                                  .dtable = {big, 0},
                                  .dout = {big, 0},
                                  .ids = {small, 0}};
    EXPECT_ERROR(ocl.api->embed_backward(ocl.be, &em), CLF_ERR_INPUT, "embed_backward", "'ids'");

    clf_cross_entropy_args ce = {
        .rows = 4, .cols = 16, .loss = {NULL, 0}, .logits = {big, 0}, .targets = {small, 0}};
    EXPECT_ERROR(ocl.api->cross_entropy(ocl.be, &ce), CLF_ERR_INPUT, "cross_entropy", "'loss'",
                 "missing");
    ce.loss = (clf_ptr){big, 16}; /* inside the logits */
    EXPECT_ERROR(ocl.api->cross_entropy(ocl.be, &ce), CLF_ERR_INPUT, "cross_entropy", "loss",
                 "overlaps");
    ce.loss = (clf_ptr){big, 512};
    ce.label_smoothing = 1.5f;
    EXPECT_ERROR(ocl.api->cross_entropy(ocl.be, &ce), CLF_ERR_INPUT, "cross_entropy",
                 "label_smoothing");

    EXPECT_ERROR(ocl.api->sum_squares(ocl.be, (clf_ptr){NULL, 0}, (clf_ptr){big, 0}, 4),
                 CLF_ERR_INPUT, "sum_squares", "'out'");
    EXPECT_ERROR(ocl.api->sum_squares(ocl.be, (clf_ptr){big, 0}, (clf_ptr){small, 0}, 11),
                 CLF_ERR_INPUT, "sum_squares", "'x'");
    EXPECT_ERROR(ocl.api->fill(ocl.be, (clf_ptr){small, 4}, 1.0f, 10), CLF_ERR_INPUT, "fill",
                 "'out'");
    EXPECT_ERROR(ocl.api->fill(ocl.be, (clf_ptr){small, 2}, 1.0f, 1), CLF_ERR_INPUT, "fill",
                 "multiple of 4");
    ocl.api->free(ocl.be, big);
    ocl.api->free(ocl.be, small);
}
END_TEST

/* ---- devices ---- */

typedef struct dev_list {
    int n;
    clf_device_info first;
} dev_list;

static void count_device(void *user, const clf_device_info *d)
{
    dev_list *l = user;
    if (l->n++ == 0)
        l->first = *d;
}

START_TEST(test_devices)
{
    dev_list l = {0};
    CLF_ASSERT_OK(ocl.api->list_devices(count_device, &l));
    ck_assert_int_ge(l.n, 1);
    ck_assert_int_eq(l.first.index, 0);
    ck_assert_int_gt((int)strlen(l.first.platform), 0);
    ck_assert_int_gt((int)strlen(l.first.name), 0);
    ck_assert_int_gt(l.first.compute_units, 0);
    ck_assert_uint_gt(l.first.global_mem_bytes, 0);
    ck_assert_uint_gt(l.first.max_alloc_bytes, 0);
    ck_assert_msg(strstr(l.first.version, "OpenCL C"), "version '%s'", l.first.version);

    char d[256];
    CLF_ASSERT_OK(ocl.api->describe(ocl.be, d, sizeof d));
    ck_assert_msg(strncmp(d, "OpenCL: ", 8) == 0 && strstr(d, " / ") && strchr(d, '('),
                  "describe: '%s'", d);
    for (int op = 0; op < CLF_OP_COUNT; op++)
        ck_assert_int_eq(ocl.api->supports(ocl.be, (clf_op)op), 1);
    ck_assert_int_eq(ocl.api->supports(ocl.be, CLF_OP_COUNT), 0);
    ck_assert_int_eq(ocl.api->supports(ocl.be, (clf_op)-1), 0);

    /* choosing by index, by a case-insensitive piece of the name, and the env override */
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = "0"};
    clf_backend *be = NULL;
    unsetenv("CLF_OPENCL_DEVICE");
    CLF_ASSERT_OK(ocl.api->open(&o, &be));
    ocl.api->close(be);
    char piece[8] = {0};
    for (int i = 0; i < 5 && l.first.name[i]; i++)
        piece[i] = (char)(i % 2 ? toupper((unsigned char)l.first.name[i])
                                : tolower((unsigned char)l.first.name[i]));
    o.device = piece;
    CLF_ASSERT_OK(ocl.api->open(&o, &be));
    CLF_ASSERT_OK(ocl.api->describe(be, d, sizeof d));
    ck_assert_msg(strstr(d, l.first.name) != NULL || l.n > 1, "'%s' chose '%s'", piece, d);
    ocl.api->close(be);

    o.device = "no-such-device-xyz";
    EXPECT_ERROR(ocl.api->open(&o, &be), CLF_ERR_INPUT, "no OpenCL device matches",
                 "no-such-device-xyz", "0: ");
    ck_assert_ptr_null(be);
    o.device = "99";
    EXPECT_ERROR(ocl.api->open(&o, &be), CLF_ERR_INPUT, "device 99", "does not exist");
    setenv("CLF_OPENCL_DEVICE", "also-not-a-device", 1);
    o.device = "0";
    EXPECT_ERROR(ocl.api->open(&o, &be), CLF_ERR_INPUT, "also-not-a-device", "CLF_OPENCL_DEVICE");
    setenv("CLF_OPENCL_DEVICE", "0", 1);
    o.device = "no-such-device-xyz"; /* the environment wins */
    CLF_ASSERT_OK(ocl.api->open(&o, &be));
    ocl.api->close(be);
    unsetenv("CLF_OPENCL_DEVICE");
}
END_TEST

/* No OpenCL driver at all: run this program again with the ICD loader pointed at an empty
 * vendor directory (a fresh process: the loader reads its environment once). */
static int no_icd_child(void)
{
    const clf_backend_api *api = NULL;
    clf_backend *be = NULL;
    if (clf_backend_load("opencl", CLF_BUILD_BACKEND_DIR, &api) != CLF_OK) {
        fprintf(stderr, "load: %s\n", clf_last_error());
        return 1;
    }
    dev_list l = {0};
    clf_status st = api->list_devices(count_device, &l);
    if (st == CLF_OK) {
        fprintf(stderr, "this ICD loader ignores OCL_ICD_VENDORS\n");
        return SKIP_EXIT;
    }
    fprintf(stderr, "list_devices: %s\n", clf_last_error());
    if (st != CLF_ERR_BACKEND || !strstr(clf_last_error(), "pocl-opencl-icd"))
        return 1;
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI};
    st = api->open(&o, &be);
    fprintf(stderr, "open: %s\n", clf_last_error());
    if (st != CLF_ERR_BACKEND || be || !strstr(clf_last_error(), "no OpenCL platform"))
        return 1;
    return 0;
}

START_TEST(test_no_driver)
{
    char dir[] = "/tmp/clf-no-icd-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("OCL_ICD_VENDORS", dir, 1);
        setenv("OPENCL_VENDOR_PATH", dir, 1); /* the Khronos loader's name for it */
        unsetenv("OCL_ICD_FILENAMES");
        execl("/proc/self/exe", "test_opencl", "--no-icd-child", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    rmdir(dir);
    ck_assert(WIFEXITED(status));
    if (WEXITSTATUS(status) == SKIP_EXIT) {
        printf("test_no_driver: skipped (the ICD loader ignores OCL_ICD_VENDORS)\n");
        return;
    }
    ck_assert_msg(WEXITSTATUS(status) == 0, "no-driver child exited %d (see its stderr)",
                  WEXITSTATUS(status));
}
END_TEST

/* ---- program cache ---- */

typedef struct cache_state {
    int files;
    ino_t ino[16];
    char name[16][256];
} cache_state;

static void scan_cache(const char *dir, cache_state *s)
{
    memset(s, 0, sizeof *s);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        ck_assert_msg(!strstr(e->d_name, ".tmp"), "temporary file left behind: %s", e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 6, ".clbin") != 0 || s->files >= 16)
            continue;
        char p[600];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        ck_assert_int_eq(stat(p, &sb), 0);
        s->ino[s->files] = sb.st_ino;
        snprintf(s->name[s->files], sizeof s->name[0], "%s", e->d_name);
        s->files++;
    }
    closedir(d);
}

static ino_t inode_of(const cache_state *s, const char *name)
{
    for (int i = 0; i < s->files; i++)
        if (strcmp(s->name[i], name) == 0)
            return s->ino[i];
    return 0;
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Opens a backend with cache dir (NULL: the default chain), runs softmax, layernorm,
 * attention, embed, add, dropout, sum_squares, layernorm_backward and attention_backward
 * (an op of every kernel family) and checks them against the CPU. */
static double open_and_use(const char *cache)
{
    clf_backend_opts o = {
        .abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE"), .cache_dir = cache};
    bk k = {"opencl", ocl.api, NULL};
    double t0 = seconds();
    CLF_ASSERT_OK(ocl.api->open(&o, &k.be));
    double t = seconds() - t0;
    float *x = clf_test_frand(7 * 33, 42, -3, 3), got[7 * 33], want[7 * 33];
    run_softmax(&k, x, 7, 33, 0, 0, got);
    run_softmax(&cpu, x, 7, 33, 0, 0, want);
    expect_close(got, want, 7 * 33, TOL_NORM, "softmax after a cache load", "cpu backend");
    float al[33], be[33], s1[7 * 33], s2[7 * 33];
    for (int i = 0; i < 33; i++)
        al[i] = 1, be[i] = 0;
    clf_layernorm_args ln = {.rows = 7, .cols = 33, .eps = 1e-6f};
    run_layernorm(&k, &ln, x, NULL, al, be, 0, got, s1);
    run_layernorm(&cpu, &ln, x, NULL, al, be, 0, want, s2);
    expect_close(got, want, 7 * 33, TOL_NORM, "layernorm after a cache load", "cpu backend");
    free(x);
    bk saved = ocl;
    ocl = k; /* the checkers run on `ocl` */
    attn_case at = {2, 3, 7, 7, 11, 1, 1, 0, 0, 0, 0, 0};
    check_attention_case(&at, 77);
    ocl = saved;
    int32_t ids[3] = {0, 1, 2};
    float table[3 * 5], eo[3 * 5], ec[3 * 5];
    clf_test_fill(table, 15, 5, -1, 1);
    clf_embed_args em = {.rows = 3, .seq_len = 3, .dim = 5, .vocab = 3, .scale = 2};
    run_embed(&k, &em, ids, table, NULL, 0, eo);
    run_embed(&cpu, &em, ids, table, NULL, 0, ec);
    expect_close(eo, ec, 15, TOL_EXACT, "embed after a cache load", "cpu backend");
    clf_buffer *b = up(&k, table, sizeof table);
    CLF_ASSERT_OK(k.api->add(k.be, (clf_ptr){b, 0}, (clf_ptr){b, 0}, (clf_ptr){b, 0}, 15));
    down(&k, eo, b, sizeof eo);
    ck_assert_float_eq(eo[14], 2 * table[14]);
    k.api->free(k.be, b);

    /* the training families: dropout (train), sum_squares (optim), layernorm_backward and
     * attention_backward */
    float *y = clf_test_frand(7 * 33, 43, -1, 1), d1[7 * 33], d2[7 * 33];
    for (int i = 0; i < 7 * 33; i++)
        d1[i] = d2[i] = 0.0f;
    run_dropout(&k, y, 7 * 33, 0, 0.25f, 99, 0, d1);
    run_dropout(&cpu, y, 7 * 33, 0, 0.25f, 99, 0, d2);
    expect_same_bits(d1, d2, 7 * 33, "dropout after a cache load", "cpu backend");
    float s_ocl = run_sum_squares(&k, y, 7 * 33, 0), s_cpu = run_sum_squares(&cpu, y, 7 * 33, 0);
    expect_close(&s_ocl, &s_cpu, 1, TOL_SUMSQ, "sum_squares after a cache load", "cpu backend");
    clf_layernorm_backward_args lb = {.rows = 7, .cols = 33, .eps = 1e-6f};
    float da1[33] = {0}, db1[33] = {0}, da2[33] = {0}, db2[33] = {0};
    x = clf_test_frand(7 * 33, 44, -3, 3);
    run_layernorm_backward(&k, &lb, x, y, al, d1, da1, db1, 1, d1, da1, db1);
    run_layernorm_backward(&cpu, &lb, x, y, al, d2, da2, db2, 1, d2, da2, db2);
    expect_close(d1, d2, 7 * 33, TOL_LN_BWD, "layernorm_backward after a cache load",
                 "cpu backend");
    expect_close(da1, da2, 33, TOL_LN_BWD, "layernorm_backward dalpha after a cache load",
                 "cpu backend");
    free(x);
    free(y);
    saved = ocl;
    ocl = k;
    attn_bwd_case ab = {2, 2, 7, 7, 8, 1, 1, 0, 1, 0};
    worst w = {0};
    check_attention_backward_case(&ab, 78, &w);
    ocl = saved;
    ocl.api->close(k.be);
    return t;
}

START_TEST(test_program_cache)
{
    char dir[] = "/tmp/clf-ocl-cache-XXXXXX", other[] = "/tmp/clf-ocl-cache2-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_ptr_nonnull(mkdtemp(other));
    char sub[200];
    snprintf(sub, sizeof sub, "%s/nested/dir", dir); /* created on demand */
    cache_state s1, s2, s3;

    double cold = open_and_use(sub);
    scan_cache(sub, &s1);
    ck_assert_int_ge(s1.files, 1);
    double warm = open_and_use(sub);
    scan_cache(sub, &s2);
    ck_assert_int_eq(s2.files, s1.files);
    for (int i = 0; i < s1.files; i++) /* reused, not rewritten (rename makes a new inode) */
        ck_assert_msg(inode_of(&s2, s1.name[i]) == s1.ino[i], "%s was rewritten", s1.name[i]);
    printf("test_program_cache: open() with an empty program cache %.3f s, with a full one "
           "%.3f s\n",
           cold, warm);

    /* corrupt every file three ways: garbage, truncated, one flipped payload byte */
    for (int i = 0; i < s1.files; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", sub, s1.name[i]);
        FILE *f = fopen(p, i % 3 == 0 ? "wb" : "r+b");
        ck_assert_ptr_nonnull(f);
        if (i % 3 == 0) {
            fputs("not a program binary", f);
        } else if (i % 3 == 1) {
            ck_assert_int_eq(ftruncate(fileno(f), 100), 0);
        } else {
            fseek(f, 1000, SEEK_SET);
            int c = fgetc(f);
            fseek(f, 1000, SEEK_SET);
            fputc(c ^ 0x5a, f);
        }
        fclose(f);
    }
    open_and_use(sub); /* still works, and repairs the cache */
    scan_cache(sub, &s3);
    ck_assert_int_eq(s3.files, s1.files);
    for (int i = 0; i < s1.files; i++)
        ck_assert_msg(inode_of(&s3, s1.name[i]) != s1.ino[i], "%s was not rebuilt", s1.name[i]);

    /* "off" writes nothing, even with CLF_CACHE_DIR set; CLF_CACHE_DIR is the default */
    setenv("CLF_CACHE_DIR", other, 1);
    open_and_use("off");
    scan_cache(other, &s3);
    ck_assert_int_eq(s3.files, 0);
    open_and_use(NULL);
    scan_cache(other, &s3);
    ck_assert_int_eq(s3.files, s1.files);
    clf_test_remove_dir(other);
    setenv("CLF_CACHE_DIR", "off", 1);
    open_and_use(NULL);
    ck_assert_int_ne(access(other, F_OK), 0);

    char p[200];
    snprintf(p, sizeof p, "%s/nested", dir);
    clf_test_remove_dir(sub);
    clf_test_remove_dir(p);
    clf_test_remove_dir(dir);
}
END_TEST

/* ---- suite ---- */

static Suite *opencl_suite(void)
{
    Suite *s = suite_create("opencl");
    TCase *ops = tcase_create("ops");
    tcase_add_checked_fixture(ops, setup, teardown);
    tcase_set_timeout(ops, 300);
    tcase_add_test(ops, test_gemm);
    tcase_add_test(ops, test_gemm_edge);
    tcase_add_test(ops, test_null_arguments);
    tcase_add_test(ops, test_gemm_strided_batched);
    tcase_add_test(ops, test_gemm_half);
    tcase_add_test(ops, test_gemm_half_ignored);
    tcase_add_test(ops, test_layernorm);
    tcase_add_test(ops, test_attention);
    tcase_add_test(ops, test_embed);
    tcase_add_test(ops, test_softmax);
    tcase_add_test(ops, test_add);
    tcase_add_test(ops, test_argmax);
    tcase_add_test(ops, test_memory);
    suite_add_tcase(s, ops);

    TCase *train = tcase_create("train");
    tcase_add_checked_fixture(train, setup, teardown);
    tcase_set_timeout(train, 300);
    tcase_add_test(train, test_relu_backward);
    tcase_add_test(train, test_dropout);
    tcase_add_test(train, test_fill);
    tcase_add_test(train, test_sum_squares);
    tcase_add_test(train, test_adam);
    tcase_add_test(train, test_cross_entropy);
    tcase_add_test(train, test_embed_backward);
    tcase_add_test(train, test_layernorm_backward);
    tcase_add_test(train, test_attention_backward);
    suite_add_tcase(s, train);

    TCase *err = tcase_create("errors");
    tcase_add_checked_fixture(err, setup, teardown);
    tcase_set_timeout(err, 300);
    tcase_add_test(err, test_bounds);
    tcase_add_test(err, test_train_bounds);
    tcase_add_test(err, test_alloc_limit);
#ifdef CLF_OCL_ERRORS_LINKED
    tcase_add_test(err, test_error_names);
#endif
    tcase_add_test(err, test_devices);
    tcase_add_test(err, test_no_driver);
    tcase_add_test(err, test_program_cache);
    suite_add_tcase(s, err);
    return s;
}

/* Whether a device is there, probed in a child process so that this one (which forks the
 * tests) never initialises the OpenCL runtime. 0: yes; SKIP_EXIT: no device (why is
 * printed); anything else: the backend itself is broken. */
static int probe_device(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        const clf_backend_api *api = NULL;
        dev_list l = {0};
        if (clf_backend_load("opencl", CLF_BUILD_BACKEND_DIR, &api) != CLF_OK) {
            printf("test_opencl: cannot load the OpenCL backend: %s\n", clf_last_error());
            fflush(stdout);
            _exit(1);
        }
        clf_status st = api->list_devices(count_device, &l);
        if (st == CLF_ERR_BACKEND) {
            printf("test_opencl: skipped, no OpenCL device: %s\n", clf_last_error());
            fflush(stdout);
            _exit(SKIP_EXIT);
        }
        if (st != CLF_OK) {
            printf("test_opencl: list_devices failed: %s\n", clf_last_error());
            fflush(stdout);
            _exit(1);
        }
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return 1;
    return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--no-icd-child") == 0) {
        /* _exit: LeakSanitizer's exit-time scan crashes (glibc dynamic-TLS bug) in a process
         * whose ICD loader found no platform; this child only checks two messages. */
        int rc = no_icd_child();
        fflush(NULL);
        _exit(rc);
    }
#ifndef CLF_HAVE_OPENCL
    (void)probe_device; /* used only when the backend is built */
    (void)opencl_suite;
    printf("test_opencl: skipped, the OpenCL backend was not built (OpenCL or CLBlast missing "
           "when cmake ran)\n");
    return SKIP_EXIT;
#else
    int probe = probe_device();
    if (probe != 0)
        return probe;
    return clf_test_main(opencl_suite());
#endif
}
