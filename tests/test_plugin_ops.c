/* The plugin ops of the backend ABI (version 3): plugin_prepare, activation,
 * activation_backward, norm and norm_backward, on "cpu" and, when it is built and finds a
 * device, "opencl". The plugin ops are defined in this file (no .so), each with a CPU form
 * and an OpenCL form:
 *   tsq   activation        f(x) = x tanh(x),  f'(x) = tanh(x) + x (1 - tanh(x)^2)
 *   tsqg  gated activation  the same f, times the gate
 *   rmsb  norm (with bias)  n(x) = x / sqrt(mean(x^2) + eps), run with and without beta
 * and a few broken ones for the error paths.
 *
 * Every result is compared with a double-precision reference written here, on sizes n,
 * rows, cols in {1, 7, 33, 65, 129} (and one n above the CPU's parallel threshold), with
 * the gate, beta, accumulate and the optional dalpha/dbeta on and off, operands at
 * distinct non-zero offsets with sentinels around them, and the in-place forms the header
 * allows. Gradients are also compared with central differences of the double reference
 * (h = 1e-6 max(1, |v|)), which the analytic reference itself must match to TOL_REF_FD.
 * Tolerances, as relative errors (max |got - want| / max |want|):
 *   TOL_CPU     1e-5  CPU vs the reference: a few float roundings per element (the test
 *                     ops' CPU forms and the backend's dalpha/dbeta sum in double)
 *   TOL_OCL     1e-4  OpenCL vs the reference: float work-group sums in tree order and
 *                     OpenCL C's tanh/sqrt (a few ulp), as in test_train_ops
 *   TOL_REF_FD  1e-7  this file's analytic double gradients vs the central differences
 *   (a backend's gradient vs the central differences uses its TOL_CPU / TOL_OCL: the
 *   differences are ~1e-9 from the exact gradient, far below either)
 *   exact             sentinels, in-place vs out-of-place, run-to-run and thread-count
 *                     determinism
 * CLF_TEST_VERBOSE=1 prints the largest error measured in each category of a test. */
#include <check.h>
#include <glob.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/backend.h"
#include "clformer/plugin.h"
#include "testutil.h"

#define TOL_CPU    1e-5
#define TOL_OCL    1e-4
#define TOL_REF_FD 1e-7
#define FD_H       1e-6 /* relative step: truncation ~h^2, cancellation ~1e-16/h */
/* eps of the test norm: large enough that a backend dropping eps fails, and that a
 * one-column row (n = x / sqrt(x^2 + eps), whose gradient cancels to ~eps / (x^2 + eps)
 * in float) keeps a well-conditioned gradient. */
#define NORM_EPS 0.1f
#define SENTINEL 777.25f /* pre-filled around every view and in every output */
#define PAD      3       /* sentinel elements after every view */
#define BIG_N    70001   /* above the CPU's parallel threshold (65536): several chunks */

static const int SIZES[] = {1, 7, 33, 65, 129};
#define NSIZES ((int)(sizeof SIZES / sizeof SIZES[0]))

/* ---- the test plugin ops ---- */

static void tsq_forward(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] * tanhf(x[i]);
}

static void tsq_backward(float *dx, const float *dy, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float t = tanhf(x[i]);
        dx[i] = dy[i] * (t + x[i] * (1.0f - t * t));
    }
}

/* rmsb, CPU: the row's mean square in double */
static void rmsb_forward(float *xhat, const float *x, int cols, float eps)
{
    double ss = 0.0;
    for (int c = 0; c < cols; c++)
        ss += (double)x[c] * x[c];
    double r = 1.0 / sqrt(ss / cols + eps);
    for (int c = 0; c < cols; c++)
        xhat[c] = (float)(x[c] * r);
}

/* dx = J^T g, g = alpha * dy: dx_j = r g_j - x_j r^3 sum(g x) / cols */
static void rmsb_backward(float *dx, const float *dy, const float *alpha, const float *x, int cols,
                          float eps)
{
    double ss = 0.0, sgx = 0.0;
    for (int c = 0; c < cols; c++) {
        ss += (double)x[c] * x[c];
        sgx += (double)alpha[c] * dy[c] * x[c];
    }
    double r = 1.0 / sqrt(ss / cols + eps), k = sgx * r * r * r / cols;
    for (int c = 0; c < cols; c++)
        dx[c] = (float)((double)alpha[c] * dy[c] * r - x[c] * k);
}

static const char tsq_cl[] =
    "float clf_tsq_forward(float x) { return x * tanh(x); }\n"
    "float clf_tsq_grad(float x) { const float t = tanh(x); return t + x * (1.0f - t * t); }\n";
static const char tsqg_cl[] =
    "float clf_tsqg_forward(float x) { return x * tanh(x); }\n"
    "float clf_tsqg_grad(float x) { const float t = tanh(x); return t + x * (1.0f - t * t); }\n";
static const char rmsb_cl[] =
    "void clf_rmsb_forward(global float *xhat, const global float *x, int cols, float eps,\n"
    "                      local float *scratch)\n"
    "{\n"
    "    float ss = 0.0f;\n"
    "    for (int c = get_local_id(0); c < cols; c += get_local_size(0))\n"
    "        ss += x[c] * x[c];\n"
    "    const float r = 1.0f / sqrt(clf_group_sum(ss, scratch) / (float)cols + eps);\n"
    "    for (int c = get_local_id(0); c < cols; c += get_local_size(0))\n"
    "        xhat[c] = x[c] * r;\n"
    "}\n"
    "void clf_rmsb_backward(global float *dx, const global float *dy, const global float *alpha,\n"
    "                       const global float *x, int cols, float eps, local float *scratch)\n"
    "{\n"
    "    float ss = 0.0f, sgx = 0.0f;\n"
    "    for (int c = get_local_id(0); c < cols; c += get_local_size(0)) {\n"
    "        ss += x[c] * x[c];\n"
    "        sgx += alpha[c] * dy[c] * x[c];\n"
    "    }\n"
    "    ss = clf_group_sum(ss, scratch);\n"
    "    sgx = clf_group_sum(sgx, scratch);\n"
    "    const float r = 1.0f / sqrt(ss / (float)cols + eps), k = sgx * r * r * r / (float)cols;\n"
    "    for (int c = get_local_id(0); c < cols; c += get_local_size(0))\n"
    "        dx[c] = alpha[c] * dy[c] * r - x[c] * k;\n"
    "}\n";

static const clf_plugin_op op_tsq = {
    .name = "tsq",
    .kind = CLF_PLUGIN_ACTIVATION,
    .cpu = {.act_forward = tsq_forward, .act_backward = tsq_backward},
    .opencl_source = tsq_cl};
static const clf_plugin_op op_tsqg = {
    .name = "tsqg",
    .kind = CLF_PLUGIN_GATED_ACTIVATION,
    .cpu = {.act_forward = tsq_forward, .act_backward = tsq_backward},
    .opencl_source = tsqg_cl};
static const clf_plugin_op op_rmsb = {
    .name = "rmsb",
    .kind = CLF_PLUGIN_NORM,
    .norm_has_bias = 1,
    .cpu = {.norm_forward = rmsb_forward, .norm_backward = rmsb_backward},
    .opencl_source = rmsb_cl};
/* for the error paths */
static const clf_plugin_op op_cpu_only = {
    .name = "cpuonly",
    .kind = CLF_PLUGIN_ACTIVATION,
    .cpu = {.act_forward = tsq_forward, .act_backward = tsq_backward}};
static const clf_plugin_op op_ocl_only = {.name = "oclonly",
                                          .kind = CLF_PLUGIN_ACTIVATION,
                                          .opencl_source =
                                              "float clf_oclonly_forward(float x) { return x; }\n"
                                              "float clf_oclonly_grad(float x) { return 1.0f; }\n"};
static const clf_plugin_op op_bad_kind = {
    .name = "badkind",
    .kind = (clf_plugin_kind)9,
    .cpu = {.act_forward = tsq_forward, .act_backward = tsq_backward},
    .opencl_source = tsq_cl};
static const clf_plugin_op op_half_cpu = {
    .name = "halfcpu", .kind = CLF_PLUGIN_ACTIVATION, .cpu = {.act_forward = tsq_forward}};
static const clf_plugin_op op_broken_cl = {
    .name = "brokencl",
    .kind = CLF_PLUGIN_ACTIVATION,
    .cpu = {.act_forward = tsq_forward, .act_backward = tsq_backward},
    .opencl_source = "float clf_brokencl_forward(float x) { return undefined_thing * x; }\n"
                     "float clf_brokencl_grad(float x) { return 1.0f; }\n"};

/* ---- double references ---- */

static double ref_f(double x)
{
    return x * tanh(x);
}

static double ref_df(double x)
{
    double t = tanh(x);
    return t + x * (1.0 - t * t);
}

/* xhat = n(x) of one row */
static void ref_norm_row(double *xhat, const double *x, int cols, double eps)
{
    double ss = 0.0;
    for (int c = 0; c < cols; c++)
        ss += x[c] * x[c];
    double r = 1.0 / sqrt(ss / cols + eps);
    for (int c = 0; c < cols; c++)
        xhat[c] = x[c] * r;
}

/* dx = J_n(x)^T (alpha * dy) of one row */
static void ref_norm_row_backward(double *dx, const double *dy, const double *alpha,
                                  const double *x, int cols, double eps)
{
    double ss = 0.0, sgx = 0.0;
    for (int c = 0; c < cols; c++) {
        ss += x[c] * x[c];
        sgx += alpha[c] * dy[c] * x[c];
    }
    double r = 1.0 / sqrt(ss / cols + eps), k = sgx * r * r * r / cols;
    for (int c = 0; c < cols; c++)
        dx[c] = alpha[c] * dy[c] * r - x[c] * k;
}

/* ---- the backend of the running test (testutil's clf_test_api / clf_test_be) ---- */

static double tol(void)
{
    return clf_test_is_cpu() ? TOL_CPU : TOL_OCL;
}

/* The cpu backend must support every plugin op; another backend is skipped for one. */
static int have(clf_op op)
{
    return clf_test_have("plugin_ops", op,
                         clf_test_api->supports(clf_test_be, op) &&
                             clf_backend_require(clf_test_api, clf_test_be, op) == CLF_OK);
}

/* ---- measuring ---- */

/* The largest error seen per category in this test (printed with CLF_TEST_VERBOSE). */
#define MAX_CATS 16
static struct {
    const char *what;
    double worst, tol;
} cats[MAX_CATS];
static int ncats;

static void record(const char *what, double e, double t)
{
    int i = 0;
    while (i < ncats && strcmp(cats[i].what, what) != 0)
        i++;
    if (i == ncats) {
        ck_assert_int_lt(ncats, MAX_CATS);
        cats[ncats].what = what;
        cats[ncats].worst = 0.0;
        cats[ncats++].tol = t;
    }
    if (e > cats[i].worst)
        cats[i].worst = e;
}

static void report(void)
{
    if (getenv("CLF_TEST_VERBOSE"))
        for (int i = 0; i < ncats; i++)
            printf("plugin_ops: %-6s %-40s max rel err %.2e (tol %.0e)\n", clf_test_be_name,
                   cats[i].what, cats[i].worst, cats[i].tol);
    ncats = 0;
}

/* Fails unless got (float) is within tol of want (double); what names the category. */
static void expect_close(const char *what, const char *shape, const float *got, const double *want,
                         size_t n, double t)
{
    double e = clf_test_rel_err_d(got, NULL, want, n);
    record(what, e, t);
    ck_assert_msg(e <= t, "%s: %s (%s): relative error %.3g > %.3g", clf_test_be_name, what, shape,
                  e, t);
}

/* The same for this file's double gradient against the central differences. */
static void expect_ref_close(const char *what, const char *shape, const double *ref,
                             const double *fd, size_t n)
{
    double e = clf_test_rel_err_d(NULL, ref, fd, n);
    record(what, e, TOL_REF_FD);
    ck_assert_msg(e <= TOL_REF_FD, "reference %s (%s) vs central differences: relative error %.3g",
                  what, shape, e);
}

/* Central difference step for v. */
static double fd_step(double v)
{
    return FD_H * (fabs(v) > 1.0 ? fabs(v) : 1.0);
}

/* ---- host and device arrays ---- */

static float *falloc(size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    ck_assert_ptr_nonnull(x);
    return x;
}

/* A view: n floats at element offset off of their own buffer, SENTINEL before and after. */
typedef struct view {
    clf_buffer *buf;
    size_t off, n;
} view;

static const clf_ptr NONE = {NULL, 0};

/* host (NULL: SENTINEL) at element offset off. */
static view vput(const float *host, size_t n, size_t off)
{
    size_t total = off + n + PAD;
    float *h = falloc(total);
    for (size_t i = 0; i < total; i++)
        h[i] = SENTINEL;
    if (host)
        memcpy(h + off, host, n * sizeof *h);
    view v = {clf_test_upload(clf_test_api, clf_test_be, h, total * sizeof *h), off, n};
    free(h);
    return v;
}

static clf_ptr vp(view v)
{
    return (clf_ptr){v.buf, v.off * sizeof(float)};
}

/* Downloads the view into host and fails if the op wrote outside it. */
static void vget(view v, float *host, const char *what)
{
    size_t total = v.off + v.n + PAD;
    float *h = falloc(total);
    CLF_ASSERT_OK(clf_test_api->download(clf_test_be, h, (clf_ptr){v.buf, 0}, total * sizeof *h));
    for (size_t i = 0; i < total; i++)
        if (i < v.off || i >= v.off + v.n)
            ck_assert_msg(h[i] == SENTINEL, "%s: %s: element %zu outside the view was written",
                          clf_test_be_name, what, i);
    memcpy(host, h + v.off, v.n * sizeof *h);
    free(h);
}

static void vfree(view v)
{
    if (v.buf)
        clf_test_api->free(clf_test_be, v.buf);
}

/* Element offset of operand k of a call: distinct per operand (so a backend that mixes up
 * offsets fails), or 0 for all. */
static size_t offset_of(int shifted, int k)
{
    return shifted ? 5 + 3 * (size_t)k : 0;
}

/* ---- activation ---- */

/* out = f(x) * gate against the reference; returns nothing, fails on error. inplace: out
 * is x's view (the header allows it). */
static void activation_case(const clf_plugin_op *op, size_t n, int shifted, int inplace)
{
    int gated = op->kind == CLF_PLUGIN_GATED_ACTIVATION;
    char shape[96];
    snprintf(shape, sizeof shape, "%s n=%zu%s%s", op->name, n, shifted ? " offsets" : "",
             inplace ? " in place" : "");
    float *x = clf_test_frand(n, 11 + (unsigned)n, -3, 3),
          *g = clf_test_frand(n, 12 + (unsigned)n, -2, 2);
    float *got = falloc(n);
    double *want = clf_test_dalloc(n);
    for (size_t i = 0; i < n; i++)
        want[i] = ref_f(x[i]) * (gated ? g[i] : 1.0);
    view vx = vput(x, n, offset_of(shifted, 0)), vg = {0};
    if (gated)
        vg = vput(g, n, offset_of(shifted, 1));
    view vo = inplace ? vx : vput(NULL, n, offset_of(shifted, 2));
    clf_activation_args a = {
        .op = op, .out = vp(vo), .x = vp(vx), .gate = gated ? vp(vg) : NONE, .n = n};
    CLF_ASSERT_OK(clf_test_api->activation(clf_test_be, &a));
    vget(vo, got, "activation out");
    expect_close(gated ? "gated activation forward" : "activation forward", shape, got, want, n,
                 tol());
    if (inplace) { /* and the same bits as out of place */
        view vx2 = vput(x, n, 0), vo2 = vput(NULL, n, 0);
        float *got2 = falloc(n);
        a.out = vp(vo2), a.x = vp(vx2);
        CLF_ASSERT_OK(clf_test_api->activation(clf_test_be, &a));
        vget(vo2, got2, "activation out");
        ck_assert_msg(memcmp(got, got2, n * sizeof *got) == 0,
                      "%s: activation in place gives other bits than out of place (%s)",
                      clf_test_be_name, shape);
        vfree(vx2), vfree(vo2), free(got2);
    }
    if (!inplace)
        vfree(vo);
    vfree(vx), vfree(vg), free(x), free(g), free(got), free(want);
}

START_TEST(activation_forward_sizes_gate_offsets_in_place)
{
    if (!have(CLF_OP_ACTIVATION))
        return;
    CLF_ASSERT_OK(clf_test_api->plugin_prepare(clf_test_be, &op_tsq));
    CLF_ASSERT_OK(clf_test_api->plugin_prepare(clf_test_be, &op_tsq)); /* preparing twice is fine */
    CLF_ASSERT_OK(clf_test_api->plugin_prepare(clf_test_be, &op_tsqg));
    const clf_plugin_op *ops[2] = {&op_tsq, &op_tsqg};
    for (int o = 0; o < 2; o++) {
        for (int s = 0; s < NSIZES; s++)
            for (int shifted = 0; shifted < 2; shifted++)
                activation_case(ops[o], (size_t)SIZES[s], shifted, 0);
        activation_case(ops[o], BIG_N, 1, 0);
        activation_case(ops[o], 65, 1, 1);
        activation_case(ops[o], BIG_N, 0, 1);
    }
    report();
}
END_TEST

/* dx = dy * gate * f'(x), dgate = dy * f(x), against the reference and (n <= 129) the
 * central differences of L = sum(dy * f(x) * gate). alias: dx is dy's view (no gate) or
 * dgate is dy's view (gated). The op is not prepared first: the backend prepares it. */
static void activation_backward_case(const clf_plugin_op *op, size_t n, int shifted, int alias)
{
    int gated = op->kind == CLF_PLUGIN_GATED_ACTIVATION;
    char shape[96];
    snprintf(shape, sizeof shape, "%s n=%zu%s%s", op->name, n, shifted ? " offsets" : "",
             alias ? " aliased" : "");
    float *x = clf_test_frand(n, 21 + (unsigned)n, -3, 3),
          *g = clf_test_frand(n, 22 + (unsigned)n, -2, 2);
    float *dy = clf_test_frand(n, 23 + (unsigned)n, -1, 1), *dx = falloc(n), *dg = falloc(n);
    double *want_dx = clf_test_dalloc(n), *want_dg = clf_test_dalloc(n);
    for (size_t i = 0; i < n; i++) {
        want_dx[i] = (double)dy[i] * (gated ? g[i] : 1.0) * ref_df(x[i]);
        want_dg[i] = (double)dy[i] * ref_f(x[i]);
    }
    view vx = vput(x, n, offset_of(shifted, 0)), vdy = vput(dy, n, offset_of(shifted, 1));
    view vg = {0}, vdg = {0}, vdx;
    if (gated) {
        vg = vput(g, n, offset_of(shifted, 2));
        vdg = alias ? vdy : vput(NULL, n, offset_of(shifted, 3));
    }
    vdx = alias && !gated ? vdy : vput(NULL, n, offset_of(shifted, 4));
    clf_activation_backward_args a = {.op = op,
                                      .dx = vp(vdx),
                                      .dgate = gated ? vp(vdg) : NONE,
                                      .dy = vp(vdy),
                                      .x = vp(vx),
                                      .gate = gated ? vp(vg) : NONE,
                                      .n = n};
    CLF_ASSERT_OK(clf_test_api->activation_backward(clf_test_be, &a));
    vget(vdx, dx, "activation_backward dx");
    expect_close(gated ? "gated activation dx" : "activation dx", shape, dx, want_dx, n, tol());
    if (gated) {
        vget(vdg, dg, "activation_backward dgate");
        expect_close("gated activation dgate", shape, dg, want_dg, n, tol());
    }
    if (n <= 129) { /* the loss is a sum of independent terms: one difference per element */
        double *fd_dx = clf_test_dalloc(n), *fd_dg = clf_test_dalloc(n);
        for (size_t i = 0; i < n; i++) {
            double xi = x[i], gi = gated ? g[i] : 1.0, h = fd_step(xi);
            fd_dx[i] = dy[i] * gi * (ref_f(xi + h) - ref_f(xi - h)) / (2 * h);
            h = fd_step(gi);
            fd_dg[i] = dy[i] * (ref_f(xi) * (gi + h) - ref_f(xi) * (gi - h)) / (2 * h);
        }
        expect_ref_close("reference activation dx vs fd", shape, want_dx, fd_dx, n);
        expect_close("activation dx vs fd", shape, dx, fd_dx, n, tol());
        if (gated) {
            expect_ref_close("reference dgate vs fd", shape, want_dg, fd_dg, n);
            expect_close("gated activation dgate vs fd", shape, dg, fd_dg, n, tol());
        }
        free(fd_dx), free(fd_dg);
    }
    if (!(alias && !gated))
        vfree(vdx);
    if (gated && !alias)
        vfree(vdg);
    vfree(vx), vfree(vdy), vfree(vg);
    free(x), free(g), free(dy), free(dx), free(dg), free(want_dx), free(want_dg);
}

START_TEST(activation_backward_sizes_gate_offsets_aliasing_fd)
{
    if (!have(CLF_OP_ACTIVATION_BACKWARD))
        return;
    const clf_plugin_op *ops[2] = {&op_tsq, &op_tsqg};
    for (int o = 0; o < 2; o++) {
        for (int s = 0; s < NSIZES; s++)
            for (int shifted = 0; shifted < 2; shifted++)
                activation_backward_case(ops[o], (size_t)SIZES[s], shifted, 0);
        activation_backward_case(ops[o], BIG_N, 1, 0);
        activation_backward_case(ops[o], 33, 1, 1);
        activation_backward_case(ops[o], BIG_N, 0, 1);
    }
    report();
}
END_TEST

/* ---- norm ---- */

/* out = alpha * n(x) + beta (beta optional) against the reference. */
static void norm_case(int rows, int cols, int with_beta, int shifted)
{
    char shape[96];
    snprintf(shape, sizeof shape, "rmsb %dx%d%s%s", rows, cols, with_beta ? " beta" : "",
             shifted ? " offsets" : "");
    size_t n = (size_t)rows * cols;
    unsigned seed = 100u * (unsigned)rows + (unsigned)cols;
    float *x = clf_test_frand(n, seed, -2, 2), *al = clf_test_frand(cols, seed + 1, 0.5f, 1.5f);
    float *bt = clf_test_frand(cols, seed + 2, -1, 1), *got = falloc(n);
    double *want = clf_test_dalloc(n), *xd = clf_test_to_double(x, n), *row = clf_test_dalloc(cols);
    for (int r = 0; r < rows; r++) {
        ref_norm_row(row, xd + (size_t)r * cols, cols, NORM_EPS);
        for (int c = 0; c < cols; c++)
            want[(size_t)r * cols + c] = al[c] * row[c] + (with_beta ? bt[c] : 0.0);
    }
    view vx = vput(x, n, offset_of(shifted, 0)), va = vput(al, cols, offset_of(shifted, 1));
    view vb = with_beta ? vput(bt, cols, offset_of(shifted, 2)) : (view){0};
    view vo = vput(NULL, n, offset_of(shifted, 3));
    clf_norm_args a = {.op = &op_rmsb,
                       .out = vp(vo),
                       .x = vp(vx),
                       .alpha = vp(va),
                       .beta = with_beta ? vp(vb) : NONE,
                       .rows = rows,
                       .cols = cols,
                       .eps = NORM_EPS};
    CLF_ASSERT_OK(clf_test_api->norm(clf_test_be, &a));
    vget(vo, got, "norm out");
    expect_close(with_beta ? "norm forward (beta)" : "norm forward (no beta)", shape, got, want, n,
                 tol());
    vfree(vx), vfree(va), vfree(vb), vfree(vo);
    free(x), free(al), free(bt), free(got), free(want), free(xd), free(row);
}

START_TEST(norm_forward_sizes_beta_offsets)
{
    if (!have(CLF_OP_NORM))
        return;
    CLF_ASSERT_OK(clf_test_api->plugin_prepare(clf_test_be, &op_rmsb));
    int k = 0;
    for (int r = 0; r < NSIZES; r++)
        for (int c = 0; c < NSIZES; c++, k++)
            for (int with_beta = 0; with_beta < 2; with_beta++)
                norm_case(SIZES[r], SIZES[c], with_beta, (k + with_beta) % 2);
    report();
}
END_TEST

/* The parts of a norm_backward check: which outputs are asked for and how. */
typedef struct nb_variant {
    int accumulate, with_dalpha, with_dbeta, shifted;
} nb_variant;

/* Row loss L_r = sum_c dy[r,c] * (alpha[c] * n(x_r)[c]) for the central differences of dx
 * (beta does not depend on x). */
static double row_loss(const double *xr, const double *dyr, const double *al, double *tmp, int cols)
{
    ref_norm_row(tmp, xr, cols, NORM_EPS);
    double l = 0.0;
    for (int c = 0; c < cols; c++)
        l += dyr[c] * al[c] * tmp[c];
    return l;
}

/* norm_backward against the reference; with fd, also against central differences of
 * L = sum dy * (alpha * n(x) + beta) in x, alpha and beta. */
static void norm_backward_case(int rows, int cols, nb_variant v, int fd)
{
    char shape[128];
    snprintf(shape, sizeof shape, "rmsb %dx%d acc=%d dalpha=%d dbeta=%d%s", rows, cols,
             v.accumulate, v.with_dalpha, v.with_dbeta, v.shifted ? " offsets" : "");
    size_t n = (size_t)rows * cols;
    unsigned seed = 1000u + 100u * (unsigned)rows + (unsigned)cols;
    float *x = clf_test_frand(n, seed, -2, 2), *al = clf_test_frand(cols, seed + 1, 0.5f, 1.5f);
    float *dy = clf_test_frand(n, seed + 2, -1, 1), *dx0 = clf_test_frand(n, seed + 3, -1, 1);
    float *da0 = clf_test_frand(cols, seed + 4, -1, 1),
          *db0 = clf_test_frand(cols, seed + 5, -1, 1);
    float *dx = falloc(n), *da = falloc(cols), *db = falloc(cols);
    double *xd = clf_test_to_double(x, n), *dyd = clf_test_to_double(dy, n),
           *ald = clf_test_to_double(al, cols);
    double *want_dx = clf_test_dalloc(n), *want_da = clf_test_dalloc(cols),
           *want_db = clf_test_dalloc(cols);
    double *xhat = clf_test_dalloc(n);
    for (int r = 0; r < rows; r++) {
        size_t o = (size_t)r * cols;
        ref_norm_row_backward(want_dx + o, dyd + o, ald, xd + o, cols, NORM_EPS);
        ref_norm_row(xhat + o, xd + o, cols, NORM_EPS);
    }
    /* the pure gradients, before the accumulate pre-fills are added (for fd) */
    for (int c = 0; c < cols; c++)
        for (int r = 0; r < rows; r++) {
            want_da[c] += dyd[(size_t)r * cols + c] * xhat[(size_t)r * cols + c];
            want_db[c] += dyd[(size_t)r * cols + c];
        }

    view vdy = vput(dy, n, offset_of(v.shifted, 0)), vx = vput(x, n, offset_of(v.shifted, 1));
    view va = vput(al, cols, offset_of(v.shifted, 2));
    view vdx = vput(v.accumulate ? dx0 : NULL, n, offset_of(v.shifted, 3));
    view vda = v.with_dalpha ? vput(da0, cols, offset_of(v.shifted, 4)) : (view){0};
    view vdb = v.with_dbeta ? vput(db0, cols, offset_of(v.shifted, 5)) : (view){0};
    clf_norm_backward_args a = {.op = &op_rmsb,
                                .dx = vp(vdx),
                                .dy = vp(vdy),
                                .x = vp(vx),
                                .alpha = vp(va),
                                .dalpha = v.with_dalpha ? vp(vda) : NONE,
                                .dbeta = v.with_dbeta ? vp(vdb) : NONE,
                                .rows = rows,
                                .cols = cols,
                                .eps = NORM_EPS,
                                .accumulate = v.accumulate};
    CLF_ASSERT_OK(clf_test_api->norm_backward(clf_test_be, &a));
    vget(vdx, dx, "norm_backward dx");
    if (v.with_dalpha)
        vget(vda, da, "norm_backward dalpha");
    if (v.with_dbeta)
        vget(vdb, db, "norm_backward dbeta");

    if (fd) {
        ck_assert(!v.accumulate && v.with_dalpha && v.with_dbeta);
        double *fd_dx = clf_test_dalloc(n), *fd_da = clf_test_dalloc(cols),
               *fd_db = clf_test_dalloc(cols);
        double *tmp = clf_test_dalloc(cols);
        for (int r = 0; r < rows; r++) {
            double *xr = xd + (size_t)r * cols;
            const double *dyr = dyd + (size_t)r * cols;
            for (int c = 0; c < cols; c++) {
                double save = xr[c], h = fd_step(save);
                xr[c] = save + h;
                double lp = row_loss(xr, dyr, ald, tmp, cols);
                xr[c] = save - h;
                double lm = row_loss(xr, dyr, ald, tmp, cols);
                xr[c] = save;
                fd_dx[(size_t)r * cols + c] = (lp - lm) / (2 * h);
            }
        }
        /* L is linear in alpha and beta: the differences of sum_r dy (alpha n + beta) */
        for (int c = 0; c < cols; c++) {
            double ha = fd_step(ald[c]), hb = fd_step(0.0), lp = 0, lm = 0, bp = 0, bm = 0;
            for (int r = 0; r < rows; r++) {
                size_t i = (size_t)r * cols + c;
                lp += dyd[i] * ((ald[c] + ha) * xhat[i]);
                lm += dyd[i] * ((ald[c] - ha) * xhat[i]);
                bp += dyd[i] * hb;
                bm -= dyd[i] * hb;
            }
            fd_da[c] = (lp - lm) / (2 * ha);
            fd_db[c] = (bp - bm) / (2 * hb);
        }
        expect_ref_close("reference norm dx vs fd", shape, want_dx, fd_dx, n);
        expect_ref_close("reference norm dalpha vs fd", shape, want_da, fd_da, cols);
        expect_ref_close("reference norm dbeta vs fd", shape, want_db, fd_db, cols);
        /* dx was overwritten (no accumulate); dalpha and dbeta add to what they held */
        for (int c = 0; c < cols; c++)
            fd_da[c] += da0[c], fd_db[c] += db0[c];
        expect_close("norm dx vs fd", shape, dx, fd_dx, n, tol());
        expect_close("norm dalpha (+=) vs fd", shape, da, fd_da, cols, tol());
        expect_close("norm dbeta (+=) vs fd", shape, db, fd_db, cols, tol());
        free(fd_dx), free(fd_da), free(fd_db), free(tmp);
    }

    if (v.accumulate)
        for (size_t i = 0; i < n; i++)
            want_dx[i] += dx0[i];
    for (int c = 0; c < cols; c++)
        want_da[c] += da0[c], want_db[c] += db0[c];
    expect_close(v.accumulate ? "norm dx (accumulate)" : "norm dx", shape, dx, want_dx, n, tol());
    if (v.with_dalpha)
        expect_close("norm dalpha (+=)", shape, da, want_da, cols, tol());
    if (v.with_dbeta)
        expect_close("norm dbeta (+=)", shape, db, want_db, cols, tol());

    vfree(vdy), vfree(vx), vfree(va), vfree(vdx), vfree(vda), vfree(vdb);
    free(x), free(al), free(dy), free(dx0), free(da0), free(db0), free(dx), free(da), free(db);
    free(xd), free(dyd), free(ald), free(want_dx), free(want_da), free(want_db), free(xhat);
}

START_TEST(norm_backward_sizes_accumulate_params_offsets_fd)
{
    if (!have(CLF_OP_NORM_BACKWARD))
        return;
    /* not prepared first: the backend prepares it on first use */
    static const nb_variant variants[] = {
        {0, 1, 1, 0}, {1, 1, 1, 1}, {0, 0, 0, 1}, {1, 0, 0, 0},
        {0, 1, 0, 1}, {1, 0, 1, 0}, {1, 1, 0, 0}, {0, 0, 1, 1},
    };
    for (int r = 0; r < NSIZES; r++)
        for (int c = 0; c < NSIZES; c++) {
            for (size_t k = 0; k < sizeof variants / sizeof variants[0]; k++)
                norm_backward_case(SIZES[r], SIZES[c], variants[k], 0);
            norm_backward_case(SIZES[r], SIZES[c], (nb_variant){0, 1, 1, 1}, 1);
        }
    report();
}
END_TEST

/* ---- determinism ---- */

#define DET_ROWS 300 /* 300 x 129 = 38700 elements: above the CPU's row threshold (16384) */
#define DET_COLS 129

/* Runs every plugin op once on fixed inputs and downloads all outputs into out (which
 * holds 3 * BIG_N + 2 * DET_ROWS * DET_COLS + 2 * DET_COLS floats); returns the count. */
static size_t det_run(float *out)
{
    size_t n = BIG_N, m = (size_t)DET_ROWS * DET_COLS, o = 0;
    float *x = clf_test_frand(n, 301, -3, 3), *g = clf_test_frand(n, 302, -2, 2),
          *dy = clf_test_frand(n, 303, -1, 1);
    float *nx = clf_test_frand(m, 304, -2, 2), *ndy = clf_test_frand(m, 305, -1, 1);
    float *al = clf_test_frand(DET_COLS, 306, 0.5f, 1.5f),
          *bt = clf_test_frand(DET_COLS, 307, -1, 1);
    view vx = vput(x, n, 1), vg = vput(g, n, 2), vdy = vput(dy, n, 3), vo = vput(NULL, n, 4);
    view vdx = vput(NULL, n, 5), vdg = vput(NULL, n, 6);
    clf_activation_args fa = {.op = &op_tsqg, .out = vp(vo), .x = vp(vx), .gate = vp(vg), .n = n};
    clf_activation_backward_args ba = {.op = &op_tsqg,
                                       .dx = vp(vdx),
                                       .dgate = vp(vdg),
                                       .dy = vp(vdy),
                                       .x = vp(vx),
                                       .gate = vp(vg),
                                       .n = n};
    CLF_ASSERT_OK(clf_test_api->activation(clf_test_be, &fa));
    CLF_ASSERT_OK(clf_test_api->activation_backward(clf_test_be, &ba));
    vget(vo, out + o, "det out"), o += n;
    vget(vdx, out + o, "det dx"), o += n;
    vget(vdg, out + o, "det dgate"), o += n;

    view vnx = vput(nx, m, 1), vndy = vput(ndy, m, 2), va = vput(al, DET_COLS, 3);
    view vb = vput(bt, DET_COLS, 4), vno = vput(NULL, m, 5), vndx = vput(ndy, m, 6);
    view vda = vput(al, DET_COLS, 7), vdb = vput(bt, DET_COLS, 8);
    clf_norm_args na = {.op = &op_rmsb,
                        .out = vp(vno),
                        .x = vp(vnx),
                        .alpha = vp(va),
                        .beta = vp(vb),
                        .rows = DET_ROWS,
                        .cols = DET_COLS,
                        .eps = NORM_EPS};
    clf_norm_backward_args nb = {.op = &op_rmsb,
                                 .dx = vp(vndx),
                                 .dy = vp(vndy),
                                 .x = vp(vnx),
                                 .alpha = vp(va),
                                 .dalpha = vp(vda),
                                 .dbeta = vp(vdb),
                                 .rows = DET_ROWS,
                                 .cols = DET_COLS,
                                 .eps = NORM_EPS,
                                 .accumulate = 1};
    CLF_ASSERT_OK(clf_test_api->norm(clf_test_be, &na));
    CLF_ASSERT_OK(clf_test_api->norm_backward(clf_test_be, &nb));
    vget(vno, out + o, "det norm out"), o += m;
    vget(vndx, out + o, "det norm dx"), o += m;
    vget(vda, out + o, "det dalpha"), o += DET_COLS;
    vget(vdb, out + o, "det dbeta"), o += DET_COLS;

    vfree(vx), vfree(vg), vfree(vdy), vfree(vo), vfree(vdx), vfree(vdg);
    vfree(vnx), vfree(vndy), vfree(va), vfree(vb), vfree(vno), vfree(vndx), vfree(vda);
    vfree(vdb);
    free(x), free(g), free(dy), free(nx), free(ndy), free(al), free(bt);
    return o;
}

START_TEST(runs_are_bit_identical)
{
    if (!have(CLF_OP_ACTIVATION) || !have(CLF_OP_ACTIVATION_BACKWARD) || !have(CLF_OP_NORM) ||
        !have(CLF_OP_NORM_BACKWARD))
        return;
    size_t cap = 3 * (size_t)BIG_N + 2 * (size_t)DET_ROWS * DET_COLS + 2 * DET_COLS;
    float *a = falloc(cap), *b = falloc(cap);
    size_t n = det_run(a);
    ck_assert_uint_eq(n, cap);
    det_run(b);
    ck_assert_msg(memcmp(a, b, n * sizeof *a) == 0, "%s: two runs differ", clf_test_be_name);
    if (clf_test_is_cpu()) /* and the thread count does not matter */
        clf_test_cpu_threads_same_bits(det_run, a, b, n);
    free(a), free(b);
}
END_TEST

/* ---- errors ---- */

/* st must be want, with a message that contains every non-NULL string of needles. */
static void expect_error(clf_status st, clf_status want, const char *what, const char *n1,
                         const char *n2, const char *n3)
{
    const char *msg = clf_last_error();
    ck_assert_msg(st == want, "%s: %s gave status %d, not %d (%s)", clf_test_be_name, what, (int)st,
                  (int)want, msg);
    const char *needles[3] = {n1, n2, n3};
    for (int i = 0; i < 3; i++)
        ck_assert_msg(!needles[i] || strstr(msg, needles[i]),
                      "%s: %s: the message does not name '%s': %s", clf_test_be_name, what,
                      needles[i], msg);
    if (getenv("CLF_TEST_VERBOSE"))
        printf("plugin_ops: %-6s %s -> %s\n", clf_test_be_name, what, msg);
}

START_TEST(errors_name_the_op_the_operand_and_the_backend)
{
    if (!have(CLF_OP_ACTIVATION) || !have(CLF_OP_ACTIVATION_BACKWARD) || !have(CLF_OP_NORM) ||
        !have(CLF_OP_NORM_BACKWARD))
        return;
    const size_t n = 8;
    clf_buffer *small, *big;
    CLF_ASSERT_OK(clf_test_api->alloc(clf_test_be, 16, &small));
    CLF_ASSERT_OK(clf_test_api->alloc(clf_test_be, 1 << 12, &big));
    clf_ptr b0 = {big, 0}, b1 = {big, 256}, b2 = {big, 512}, b3 = {big, 768}, b4 = {big, 1024};
    clf_ptr b0x = {big, 4}; /* one element into b0: partly overlaps it */

    /* prepare: no op, an unknown kind, no form for this backend (also on first use) */
    expect_error(clf_test_api->plugin_prepare(clf_test_be, NULL), CLF_ERR_INPUT, "prepare(NULL)",
                 clf_test_be_name, NULL, NULL);
    expect_error(clf_test_api->plugin_prepare(clf_test_be, &op_bad_kind), CLF_ERR_INPUT,
                 "prepare(bad kind)", "badkind", "kind", NULL);
    const clf_plugin_op *formless = clf_test_is_cpu() ? &op_ocl_only : &op_cpu_only;
    const char *form = clf_test_is_cpu() ? "CPU form" : "OpenCL form";
    expect_error(clf_test_api->plugin_prepare(clf_test_be, formless), CLF_ERR_UNSUPPORTED,
                 "prepare(op without this backend's form)", formless->name, clf_test_be_name, form);
    clf_activation_args fa = {.op = formless, .out = b1, .x = b0, .n = n};
    expect_error(clf_test_api->activation(clf_test_be, &fa), CLF_ERR_UNSUPPORTED,
                 "activation(op without this backend's form)", formless->name, clf_test_be_name,
                 form);

    /* the gate goes with the kind */
    fa = (clf_activation_args){.op = &op_tsqg, .out = b1, .x = b0, .n = n};
    expect_error(clf_test_api->activation(clf_test_be, &fa), CLF_ERR_INPUT,
                 "gated activation without a gate", "tsqg", "gate", NULL);
    fa = (clf_activation_args){.op = &op_tsq, .out = b1, .x = b0, .gate = b2, .n = n};
    expect_error(clf_test_api->activation(clf_test_be, &fa), CLF_ERR_INPUT,
                 "activation with a gate", "tsq", "gate", NULL);
    clf_activation_backward_args ba = {
        .op = &op_tsqg, .dx = b1, .dy = b2, .x = b0, .gate = b3, .n = n};
    expect_error(clf_test_api->activation_backward(clf_test_be, &ba), CLF_ERR_INPUT,
                 "gated activation_backward without dgate", "tsqg", "dgate", NULL);
    /* the kind goes with the entry */
    fa = (clf_activation_args){.op = &op_rmsb, .out = b1, .x = b0, .n = n};
    expect_error(clf_test_api->activation(clf_test_be, &fa), CLF_ERR_INPUT, "activation(norm op)",
                 "rmsb", "norm", NULL);
    clf_norm_args na = {
        .op = &op_tsq, .out = b1, .x = b0, .alpha = b2, .rows = 2, .cols = 4, .eps = 1e-5f};
    expect_error(clf_test_api->norm(clf_test_be, &na), CLF_ERR_INPUT, "norm(activation op)", "tsq",
                 "activation", NULL);

    /* spans: too small, partly overlapping, aliasing what may not alias */
    fa = (clf_activation_args){.op = &op_tsq, .out = {small, 0}, .x = b0, .n = n};
    expect_error(clf_test_api->activation(clf_test_be, &fa), CLF_ERR_INPUT, "activation(small out)",
                 "activation", "'out'", NULL);
    fa = (clf_activation_args){.op = &op_tsq, .out = b0x, .x = b0, .n = n};
    expect_error(clf_test_api->activation(clf_test_be, &fa), CLF_ERR_INPUT,
                 "activation(out partly over x)", "activation", "overlap", NULL);
    fa = (clf_activation_args){.op = &op_tsqg, .out = b0, .x = b1, .gate = b0, .n = n};
    expect_error(clf_test_api->activation(clf_test_be, &fa), CLF_ERR_INPUT,
                 "activation(out is gate)", "gate", "overlap", NULL);
    ba = (clf_activation_backward_args){
        .op = &op_tsqg, .dx = b0, .dgate = b1, .dy = b0, .x = b2, .gate = b3, .n = n};
    expect_error(clf_test_api->activation_backward(clf_test_be, &ba), CLF_ERR_INPUT,
                 "gated activation_backward(dx is dy)", "dx", "dy", NULL);
    ba = (clf_activation_backward_args){.op = &op_tsq, .dx = b0, .dy = b1, .x = {small, 4}, .n = n};
    expect_error(clf_test_api->activation_backward(clf_test_be, &ba), CLF_ERR_INPUT,
                 "activation_backward(small x)", "activation_backward", "'x'", NULL);
    na = (clf_norm_args){
        .op = &op_rmsb, .out = b0, .x = b0, .alpha = b2, .rows = 2, .cols = 4, .eps = 1e-5f};
    expect_error(clf_test_api->norm(clf_test_be, &na), CLF_ERR_INPUT, "norm(out is x)", "rmsb",
                 "overlap", NULL);
    na = (clf_norm_args){
        .op = &op_rmsb, .out = b0, .x = b1, .alpha = b0x, .rows = 2, .cols = 4, .eps = 1e-5f};
    expect_error(clf_test_api->norm(clf_test_be, &na), CLF_ERR_INPUT, "norm(out over alpha)",
                 "rmsb", "overlap", NULL);
    na = (clf_norm_args){
        .op = &op_rmsb, .out = b0, .x = b1, .alpha = b2, .rows = 2, .cols = 0, .eps = 1e-5f};
    expect_error(clf_test_api->norm(clf_test_be, &na), CLF_ERR_INPUT, "norm(cols = 0)", "norm",
                 "cols=0", NULL);
    na = (clf_norm_args){.op = &op_rmsb,
                         .out = b0,
                         .x = b1,
                         .alpha = b2,
                         .beta = {small, 8},
                         .rows = 2,
                         .cols = 4,
                         .eps = 1e-5f};
    expect_error(clf_test_api->norm(clf_test_be, &na), CLF_ERR_INPUT, "norm(small beta)", "norm",
                 "'beta'", NULL);
    clf_norm_backward_args nb = {.op = &op_rmsb,
                                 .dx = b0,
                                 .dy = b0,
                                 .x = b1,
                                 .alpha = b2,
                                 .rows = 2,
                                 .cols = 4,
                                 .eps = 1e-5f};
    expect_error(clf_test_api->norm_backward(clf_test_be, &nb), CLF_ERR_INPUT,
                 "norm_backward(dx is dy)", "norm_backward", "dy", NULL);
    nb.dy = b3, nb.alpha = b0x;
    expect_error(clf_test_api->norm_backward(clf_test_be, &nb), CLF_ERR_INPUT,
                 "norm_backward(dx over alpha)", "norm_backward", "alpha", NULL);
    nb.alpha = b2, nb.dalpha = (clf_ptr){small, 4};
    expect_error(clf_test_api->norm_backward(clf_test_be, &nb), CLF_ERR_INPUT,
                 "norm_backward(small dalpha)", "norm_backward", "'dalpha'", NULL);
    nb.dalpha = b4, nb.dx = (clf_ptr){big, 2};
    expect_error(clf_test_api->norm_backward(clf_test_be, &nb), CLF_ERR_INPUT,
                 "norm_backward(dx misaligned)", "norm_backward", "'dx'", NULL);

    /* after all that, the ops still work */
    fa = (clf_activation_args){.op = &op_tsq, .out = b1, .x = b0, .n = n};
    CLF_ASSERT_OK(clf_test_api->activation(clf_test_be, &fa));
    CLF_ASSERT_OK(clf_test_api->synchronize(clf_test_be));
    clf_test_api->free(clf_test_be, small), clf_test_api->free(clf_test_be, big);
}
END_TEST

START_TEST(cpu_refuses_half_a_cpu_form)
{
    expect_error(clf_test_api->plugin_prepare(clf_test_be, &op_half_cpu), CLF_ERR_INPUT,
                 "prepare(half a CPU form)", "halfcpu", "half", NULL);
}
END_TEST

#ifdef CLF_HAVE_OPENCL
START_TEST(opencl_build_error_names_the_op_and_shows_the_log)
{
    expect_error(clf_test_api->plugin_prepare(clf_test_be, &op_broken_cl), CLF_ERR_BACKEND,
                 "prepare(broken source)", "brokencl", "clBuildProgram", "undefined_thing");
    /* not remembered as built: the same error on first use */
    clf_buffer *buf;
    CLF_ASSERT_OK(clf_test_api->alloc(clf_test_be, 64, &buf));
    clf_activation_args a = {.op = &op_broken_cl, .out = {buf, 0}, .x = {buf, 32}, .n = 8};
    expect_error(clf_test_api->activation(clf_test_be, &a), CLF_ERR_BACKEND,
                 "activation(broken source)", "brokencl", "clBuildProgram", NULL);
    a.op = &op_tsq; /* and a good op still builds and runs */
    CLF_ASSERT_OK(clf_test_api->activation(clf_test_be, &a));
    CLF_ASSERT_OK(clf_test_api->synchronize(clf_test_be));
    clf_test_api->free(clf_test_be, buf);
}
END_TEST

/* The program of a prepared op lands in the program cache, and a second backend that
 * loads it from there computes the same bits. */
START_TEST(opencl_plugin_programs_are_cached_on_disk)
{
    const char *dir = getenv("CLF_CACHE_DIR");
    if (!dir || !*dir || strcmp(dir, "off") == 0) {
        printf("plugin_ops: CLF_CACHE_DIR is not set: the cache check is skipped\n");
        return;
    }
    float x[33], y1[33], y2[33];
    clf_test_fill(x, 33, 5, -3, 3);
    CLF_ASSERT_OK(clf_test_api->plugin_prepare(clf_test_be, &op_rmsb));
    char pattern[4200];
    snprintf(pattern, sizeof pattern, "%s/plugin-rmsb-*.clbin", dir);
    glob_t g;
    ck_assert_msg(glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc >= 1, "no %s", pattern);
    globfree(&g);
    for (int pass = 0; pass < 2; pass++) {
        clf_backend *other = NULL;
        clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE")};
        clf_backend *use = clf_test_be;
        if (pass == 1) {
            CLF_ASSERT_OK(clf_test_api->open(&o, &other));
            use = other;
        }
        clf_buffer *bx, *ba, *bo;
        float ones[33];
        for (int i = 0; i < 33; i++)
            ones[i] = 1.0f;
        CLF_ASSERT_OK(clf_test_api->alloc(use, sizeof x, &bx));
        CLF_ASSERT_OK(clf_test_api->alloc(use, sizeof x, &ba));
        CLF_ASSERT_OK(clf_test_api->alloc(use, sizeof x, &bo));
        CLF_ASSERT_OK(clf_test_api->upload(use, (clf_ptr){bx, 0}, x, sizeof x));
        CLF_ASSERT_OK(clf_test_api->upload(use, (clf_ptr){ba, 0}, ones, sizeof ones));
        clf_norm_args a = {.op = &op_rmsb,
                           .out = {bo, 0},
                           .x = {bx, 0},
                           .alpha = {ba, 0},
                           .rows = 3,
                           .cols = 11,
                           .eps = NORM_EPS};
        CLF_ASSERT_OK(clf_test_api->norm(use, &a));
        CLF_ASSERT_OK(clf_test_api->download(use, pass ? y2 : y1, (clf_ptr){bo, 0}, sizeof y1));
        clf_test_api->free(use, bx), clf_test_api->free(use, ba), clf_test_api->free(use, bo);
        if (other)
            clf_test_api->close(other);
    }
    ck_assert_msg(memcmp(y1, y2, sizeof y1) == 0, "the cached program gives other bits");
}
END_TEST
#endif

/* ---- the suite ---- */

static void add_tests(TCase *tc)
{
    tcase_add_test(tc, activation_forward_sizes_gate_offsets_in_place);
    tcase_add_test(tc, activation_backward_sizes_gate_offsets_aliasing_fd);
    tcase_add_test(tc, norm_forward_sizes_beta_offsets);
    tcase_add_test(tc, norm_backward_sizes_accumulate_params_offsets_fd);
    tcase_add_test(tc, runs_are_bit_identical);
    tcase_add_test(tc, errors_name_the_op_the_operand_and_the_backend);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines printed by a test that then fails still show */
    Suite *s = suite_create("plugin_ops");
    TCase *cpu = clf_test_backend_tcase("cpu", 120);
    add_tests(cpu);
    tcase_add_test(cpu, cpu_refuses_half_a_cpu_form);
    suite_add_tcase(s, cpu);
#ifdef CLF_HAVE_OPENCL
    if (clf_test_opencl_opens("plugin_ops")) {
        TCase *ocl = clf_test_backend_tcase("opencl", 300);
        add_tests(ocl);
        tcase_add_test(ocl, opencl_build_error_names_the_op_and_shows_the_log);
        tcase_add_test(ocl, opencl_plugin_programs_are_cached_on_disk);
        suite_add_tcase(s, ocl);
    }
#else
    if (clf_test_opencl_unavailable("plugin_ops", "this build has no OpenCL backend"))
        return EXIT_FAILURE;
#endif
    return clf_test_main(s);
}
