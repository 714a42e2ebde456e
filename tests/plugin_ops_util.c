/* The helpers of the plugin-op suites (plugin_ops_util.h). */
#include "plugin_ops_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the test plugin ops ---- */

void tsq_forward(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] * tanhf(x[i]);
}

void tsq_backward(float *dx, const float *dy, const float *x, size_t n)
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

const char tsq_cl[] =
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

const clf_plugin_op op_tsq = {.name = "tsq",
                              .kind = CLF_PLUGIN_ACTIVATION,
                              .cpu = {.act_forward = tsq_forward, .act_backward = tsq_backward},
                              .opencl_source = tsq_cl};
const clf_plugin_op op_tsqg = {.name = "tsqg",
                               .kind = CLF_PLUGIN_GATED_ACTIVATION,
                               .cpu = {.act_forward = tsq_forward, .act_backward = tsq_backward},
                               .opencl_source = tsqg_cl};
const clf_plugin_op op_rmsb = {
    .name = "rmsb",
    .kind = CLF_PLUGIN_NORM,
    .norm_has_bias = 1,
    .cpu = {.norm_forward = rmsb_forward, .norm_backward = rmsb_backward},
    .opencl_source = rmsb_cl};
/* ---- the backend of the running test (testutil's clf_test_api / clf_test_be) ---- */

double tol(void)
{
    return clf_test_is_cpu() ? TOL_CPU : TOL_OCL;
}

int have(clf_op op)
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

void report(void)
{
    if (getenv("CLF_TEST_VERBOSE"))
        for (int i = 0; i < ncats; i++)
            printf("plugin_ops: %-6s %-40s max rel err %.2e (tol %.0e)\n", clf_test_be_name,
                   cats[i].what, cats[i].worst, cats[i].tol);
    ncats = 0;
}

void expect_close(const char *what, const char *shape, const float *got, const double *want,
                  size_t n, double t)
{
    double e = clf_test_rel_err_d(got, NULL, want, n);
    record(what, e, t);
    ck_assert_msg(e <= t, "%s: %s (%s): relative error %.3g > %.3g", clf_test_be_name, what, shape,
                  e, t);
}

void expect_ref_close(const char *what, const char *shape, const double *ref, const double *fd,
                      size_t n)
{
    double e = clf_test_rel_err_d(NULL, ref, fd, n);
    record(what, e, TOL_REF_FD);
    ck_assert_msg(e <= TOL_REF_FD, "reference %s (%s) vs central differences: relative error %.3g",
                  what, shape, e);
}

double fd_step(double v)
{
    return FD_H * (fabs(v) > 1.0 ? fabs(v) : 1.0);
}

/* ---- host and device arrays ---- */

float *falloc(size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    ck_assert_ptr_nonnull(x);
    return x;
}

view vput(const float *host, size_t n, size_t off)
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

clf_ptr vp(view v)
{
    return (clf_ptr){v.buf, v.off * sizeof(float)};
}

void vget(view v, float *host, const char *what)
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

void vfree(view v)
{
    if (v.buf)
        clf_test_api->free(clf_test_be, v.buf);
}

size_t offset_of(int shifted, int k)
{
    return shifted ? 5 + 3 * (size_t)k : 0;
}
