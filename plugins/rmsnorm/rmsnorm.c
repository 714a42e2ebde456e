/* clformer-plugin-rmsnorm.so - RMSNorm (Zhang & Sennrich 2019) as a norm style.
 *
 *   rms   norm, alpha only (no norm.bias):  y[r,:] = alpha * n(x[r,:])
 *         n(x) = x / sqrt(mean(x^2) + eps)          (torch.nn.RMSNorm without its weight)
 *
 * `model.layernorm: {style: rms, eps: 1.0e-6}` selects it. The backend applies alpha and
 * computes its gradient; this plugin supplies n and its vector-Jacobian product. With
 * g = alpha * dy, ms = mean(x^2), r = 1/sqrt(ms + eps):
 *     dx_j = r g_j - r^3 x_j (sum_c g_c x_c) / cols
 * The CPU forms accumulate in double; the OpenCL forms in float, per work-item and then
 * through the backend's clf_group_sum. */
#include <math.h>
#include <stddef.h>

#include "clformer/plugin.h"

/* xhat, x: (cols), one row. xhat = x / sqrt(mean(x^2) + eps); xhat does not alias x. */
static void rms_forward(float *xhat, const float *x, int cols, float eps)
{
    double ss = 0.0;
    for (int c = 0; c < cols; c++)
        ss += (double)x[c] * x[c];
    double r = 1.0 / sqrt(ss / cols + eps);
    for (int c = 0; c < cols; c++)
        xhat[c] = (float)(x[c] * r);
}

/* dx, dy, alpha, x: (cols), one row. dx = J_n(x)^T (alpha * dy):
 * dx_j = r g_j - r^3 x_j (sum_c g_c x_c) / cols, g = alpha * dy, r = 1/sqrt(mean(x^2) + eps).
 * dx is overwritten and aliases none of the inputs. */
static void rms_backward(float *dx, const float *dy, const float *alpha, const float *x, int cols,
                         float eps)
{
    double ss = 0.0, gx = 0.0;
    for (int c = 0; c < cols; c++) {
        ss += (double)x[c] * x[c];
        gx += (double)alpha[c] * dy[c] * x[c];
    }
    double r = 1.0 / sqrt(ss / cols + eps);
    double k = r * r * r * gx / cols;
    for (int c = 0; c < cols; c++)
        dx[c] = (float)(r * ((double)alpha[c] * dy[c]) - k * x[c]);
}

/* The OpenCL forms: one work-group per row, work-item l handles columns l, l + L, l + 2L...
 * (L = local size); clf_group_sum comes from the backend's prelude. */
static const char rms_cl[] =
    "/* xhat, x: (cols), one row per work-group. xhat = x / sqrt(mean(x^2) + eps) */\n"
    "void clf_rms_forward(global float *xhat, const global float *x, int cols, float eps,\n"
    "                     local float *scratch)\n"
    "{\n"
    "    int l = (int)get_local_id(0), nl = (int)get_local_size(0);\n"
    "    float ss = 0.0f;\n"
    "    for (int c = l; c < cols; c += nl)\n"
    "        ss += x[c] * x[c];\n"
    "    float r = rsqrt(clf_group_sum(ss, scratch) / (float)cols + eps);\n"
    "    for (int c = l; c < cols; c += nl)\n"
    "        xhat[c] = x[c] * r;\n"
    "}\n"
    "\n"
    "/* dx, dy, alpha, x: (cols), one row per work-group. With g = alpha * dy,\n"
    " * r = 1/sqrt(mean(x^2) + eps): dx_j = r g_j - r^3 x_j (sum_c g_c x_c) / cols */\n"
    "void clf_rms_backward(global float *dx, const global float *dy,\n"
    "                      const global float *alpha, const global float *x, int cols,\n"
    "                      float eps, local float *scratch)\n"
    "{\n"
    "    int l = (int)get_local_id(0), nl = (int)get_local_size(0);\n"
    "    float ss = 0.0f, gx = 0.0f;\n"
    "    for (int c = l; c < cols; c += nl) {\n"
    "        ss += x[c] * x[c];\n"
    "        gx += alpha[c] * dy[c] * x[c];\n"
    "    }\n"
    "    float total_ss = clf_group_sum(ss, scratch);\n"
    "    /* scratch is reused: every work-item has its first total before it is overwritten */\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    float total_gx = clf_group_sum(gx, scratch);\n"
    "    float r = rsqrt(total_ss / (float)cols + eps);\n"
    "    float k = r * r * r * total_gx / (float)cols;\n"
    "    for (int c = l; c < cols; c += nl)\n"
    "        dx[c] = r * (alpha[c] * dy[c]) - k * x[c];\n"
    "}\n";

static const clf_plugin_op rmsnorm_ops[] = {
    {.name = "rms",
     .kind = CLF_PLUGIN_NORM,
     .norm_has_bias = 0,
     .cpu = {.norm_forward = rms_forward, .norm_backward = rms_backward},
     .opencl_source = rms_cl},
};

static const clf_plugin_api rmsnorm_api = {
    .abi_version = CLF_PLUGIN_ABI,
    .name = "rmsnorm",
    .description = "rms: RMSNorm, x / sqrt(mean(x^2) + eps) scaled by alpha, no bias",
    .ops = rmsnorm_ops,
    .n_ops = (int)(sizeof rmsnorm_ops / sizeof rmsnorm_ops[0]),
};

__attribute__((visibility("default"))) const clf_plugin_api *clf_plugin_entry(void)
{
    return &rmsnorm_api;
}
