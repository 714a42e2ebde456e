/* clformer-plugin-activations.so - the GELU family, SiLU and their gated forms.
 *
 *   gelu       activation  f(x) = 0.5 x (1 + erf(x / sqrt(2)))     F.gelu(x)
 *   gelu_tanh  activation  f(x) = 0.5 x (1 + tanh(k (x + c x^3)))  F.gelu(x, approximate='tanh')
 *                          k = sqrt(2/pi), c = 0.044715
 *   silu       activation  f(x) = x sigmoid(x)                     F.silu(x)
 *   swiglu     gated       f = silu:       u = silu(x W1^T + b1) * (x W3^T + b3)
 *   geglu      gated       f = exact gelu: u = gelu(x W1^T + b1) * (x W3^T + b3)
 *
 * The CPU forms compute each value in double and round once to float: within one rounding
 * of the exact value. They use the cancellation-free forms 0.5 (1 + erf(z)) = 0.5 erfc(-z)
 * and 0.5 (1 + tanh(u)) = sigmoid(2u). PyTorch's float32 computes 1 + erf and 1 + tanh in
 * float, which loses digits for x < -1; there the two differ relatively by PyTorch's own
 * error (up to 1e-3 at x = -4), but never by more than 5e-7 absolutely, and ours is the
 * exact one. For x >= -1 they agree to 7e-7 relative.
 *
 * The OpenCL forms are the same formulas in float. Each op's source is self-contained (it
 * defines clf_NAME_forward and clf_NAME_grad and nothing else), so a backend may build any
 * subset of them into one program. */
#include <math.h>
#include <stddef.h>

#include "clformer/plugin.h"

#define INV_SQRT2       0.70710678118654752440 /* 1/sqrt(2): gelu's erf argument */
#define INV_SQRT_2PI    0.39894228040143267794 /* 1/sqrt(2 pi): the normal density */
#define GELU_TANH_K     0.79788456080286535588 /* sqrt(2/pi), PyTorch's kBeta */
#define GELU_TANH_KAPPA 0.044715               /* PyTorch's kKappa */

/* sigmoid(z) = 1 / (1 + exp(-z)) without overflow: exp only ever sees -|z|. */
static double sigmoid(double z)
{
    double e = exp(-fabs(z));
    return z >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

/* The CPU forms of activation F from F(x) and its derivative F_grad(x), over n values:
 * F_forward: y, x: (n), y[i] = F(x[i]), y may alias x; F_backward: dx, dy, x: (n),
 * dx[i] = dy[i] * F'(x[i]), dx may alias dy. */
#define CPU_FORMS(F)                                                                               \
    static void F##_forward(float *y, const float *x, size_t n)                                    \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            y[i] = (float)F(x[i]);                                                                 \
    }                                                                                              \
    static void F##_backward(float *dx, const float *dy, const float *x, size_t n)                 \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            dx[i] = (float)((double)dy[i] * F##_grad(x[i]));                                       \
    }

/* ---- gelu (exact) ---- */

/* f(x) = 0.5 x (1 + erf(x/sqrt(2))) = 0.5 x erfc(-x/sqrt(2)) */
static double gelu(double x)
{
    return 0.5 * x * erfc(-x * INV_SQRT2);
}

/* f'(x) = Phi(x) + x phi(x), Phi the normal CDF, phi its density */
static double gelu_grad(double x)
{
    return 0.5 * erfc(-x * INV_SQRT2) + x * INV_SQRT_2PI * exp(-0.5 * x * x);
}

CPU_FORMS(gelu)

/* ---- gelu_tanh ---- */

/* f(x) = 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = k (x + c x^3). In double x^3 cannot
 * overflow for a float x, and sigmoid saturates cleanly. */
static double gelu_tanh(double x)
{
    double u = GELU_TANH_K * (x + GELU_TANH_KAPPA * x * x * x);
    return x * sigmoid(2.0 * u);
}

/* f'(x) = s + x * 2 s (1 - s) * k (1 + 3 c x^2), s = sigmoid(2u); s (1 - s) is taken as
 * sigmoid(2u) sigmoid(-2u), which has no cancellation. */
static double gelu_tanh_grad(double x)
{
    double u = GELU_TANH_K * (x + GELU_TANH_KAPPA * x * x * x);
    double du = GELU_TANH_K * (1.0 + 3.0 * GELU_TANH_KAPPA * x * x);
    double s = sigmoid(2.0 * u);
    return s + x * 2.0 * s * sigmoid(-2.0 * u) * du;
}

CPU_FORMS(gelu_tanh)

/* ---- silu (swish-1) ---- */

/* f(x) = x sigmoid(x) */
static double silu(double x)
{
    return x * sigmoid(x);
}

/* f'(x) = sigmoid(x) (1 + x (1 - sigmoid(x))), 1 - sigmoid(x) taken as sigmoid(-x) */
static double silu_grad(double x)
{
    return sigmoid(x) * (1.0 + x * sigmoid(-x));
}

CPU_FORMS(silu)

/* ---- OpenCL forms (OpenCL C 1.2, float; erf, erfc, exp are builtins) ----
 * One template per function, instantiated under the op's name: swiglu is silu and geglu
 * is gelu as far as f goes (the backend applies the gate). */

/* f(x) = 0.5 x erfc(-x/sqrt(2));  f'(x) = 0.5 erfc(-x/sqrt(2)) + x exp(-x^2/2) / sqrt(2 pi).
 * For |x| > ~1.8e19, x*x is inf and exp(-inf) = 0: the tails stay finite. */
#define GELU_CL(NAME)                                                                              \
    "/* " NAME ": f(x) = 0.5 x (1 + erf(x/sqrt(2))), exact GELU */\n"                              \
    "float clf_" NAME "_forward(float x)\n"                                                        \
    "{\n"                                                                                          \
    "    return 0.5f * x * erfc(-x * 0.70710678f);\n"                                              \
    "}\n"                                                                                          \
    "/* f'(x) = Phi(x) + x phi(x) */\n"                                                            \
    "float clf_" NAME "_grad(float x)\n"                                                           \
    "{\n"                                                                                          \
    "    return 0.5f * erfc(-x * 0.70710678f) + x * 0.39894228f * exp(-0.5f * x * x);\n"           \
    "}\n"

/* f(x) = x sigmoid(2u), u = k (x + c x^3); f'(x) = s + 2 x s (1-s) k (1 + 3 c x^2).
 * In float c x^3 overflows near |x| = 2e13 (u = +-inf, s = 1 or 0: the forward stays
 * right), but then 0 * inf would poison f'; past |x| = 10, s (1-s) < 1e-37 and f' is
 * 1 or 0 to float precision, so the gradient returns that step directly. */
#define GELU_TANH_CL(NAME)                                                                         \
    "/* " NAME ": f(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */\n"                     \
    "float clf_" NAME "_forward(float x)\n"                                                        \
    "{\n"                                                                                          \
    "    float z = 2.0f * 0.79788456f * (x + 0.044715f * x * x * x);\n"                            \
    "    float e = exp(-fabs(z));\n"                                                               \
    "    float s = z >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);\n"                              \
    "    return x * s;\n"                                                                          \
    "}\n"                                                                                          \
    "/* f'(x) = s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2), s = sigmoid(2u) */\n"         \
    "float clf_" NAME "_grad(float x)\n"                                                           \
    "{\n"                                                                                          \
    "    if (fabs(x) > 10.0f)\n"                                                                   \
    "        return x > 0.0f ? 1.0f : 0.0f;\n"                                                     \
    "    float z = 2.0f * 0.79788456f * (x + 0.044715f * x * x * x);\n"                            \
    "    float e = exp(-fabs(z));\n"                                                               \
    "    float s = z >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);\n"                              \
    "    float s1ms = e / ((1.0f + e) * (1.0f + e));\n"                                            \
    "    float du = 0.79788456f * (1.0f + 3.0f * 0.044715f * x * x);\n"                            \
    "    return s + 2.0f * x * s1ms * du;\n"                                                       \
    "}\n"

/* f(x) = x sigmoid(x);  f'(x) = s + x s (1 - s), s (1 - s) = e / (1 + e)^2, e = exp(-|x|) */
#define SILU_CL(NAME)                                                                              \
    "/* " NAME ": f(x) = x sigmoid(x) */\n"                                                        \
    "float clf_" NAME "_forward(float x)\n"                                                        \
    "{\n"                                                                                          \
    "    float e = exp(-fabs(x));\n"                                                               \
    "    float s = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);\n"                              \
    "    return x * s;\n"                                                                          \
    "}\n"                                                                                          \
    "/* f'(x) = s (1 + x (1 - s)), s = sigmoid(x) */\n"                                            \
    "float clf_" NAME "_grad(float x)\n"                                                           \
    "{\n"                                                                                          \
    "    float e = exp(-fabs(x));\n"                                                               \
    "    float s = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);\n"                              \
    "    return s + x * (e / ((1.0f + e) * (1.0f + e)));\n"                                        \
    "}\n"

/* An op NAME of kind KIND: the CPU forms of F (CPU_FORMS), the OpenCL template CL. */
#define OP(NAME, KIND, F, CL)                                                                      \
    {                                                                                              \
        .name = NAME, .kind = KIND,                                                                \
        .cpu = {.act_forward = F##_forward, .act_backward = F##_backward},                         \
        .opencl_source = CL(NAME)                                                                  \
    }

static const clf_plugin_op activation_ops[] = {
    OP("gelu", CLF_PLUGIN_ACTIVATION, gelu, GELU_CL),
    OP("gelu_tanh", CLF_PLUGIN_ACTIVATION, gelu_tanh, GELU_TANH_CL),
    OP("silu", CLF_PLUGIN_ACTIVATION, silu, SILU_CL),
    OP("swiglu", CLF_PLUGIN_GATED_ACTIVATION, silu, SILU_CL),
    OP("geglu", CLF_PLUGIN_GATED_ACTIVATION, gelu, GELU_CL),
};

static const clf_plugin_api activations_api = {
    .abi_version = CLF_PLUGIN_ABI,
    .name = "activations",
    .description = "gelu, gelu_tanh, silu; gated swiglu and geglu",
    .ops = activation_ops,
    .n_ops = (int)(sizeof activation_ops / sizeof activation_ops[0]),
};

__attribute__((visibility("default"))) const clf_plugin_api *clf_plugin_entry(void)
{
    return &activations_api;
}
