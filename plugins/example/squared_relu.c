/* squared_relu.c - a complete clformer op plugin: copy it, rename the op, change the math.
 *
 * It adds one activation, "squared_relu" (So et al. 2021, "Primer"):
 *     f(x)  = max(x, 0)^2
 *     f'(x) = 2 max(x, 0)
 * A YAML that says `model: {activation: squared_relu}` then runs its feed-forward blocks as
 * u = f(x W1^T + b1); y = u W2^T + b2, forward and training, on CPU and OpenCL.
 *
 * Build (see README.md): cc -shared -fPIC -O2 -I<prefix>/include squared_relu.c \
 *                           -o clformer-plugin-example.so
 * The plugin needs only this header; it never links libclformer. */
#include <stddef.h>

#include "clformer/plugin.h"

/* CPU form, forward. y, x: (n); y may be x itself (in place), so read x[i] before writing
 * y[i]. The backend calls this from its own threads on slices of the tensor: keep it a
 * pure function of its arguments (no globals, no allocation). */
static void squared_relu_forward(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float r = x[i] > 0.0f ? x[i] : 0.0f;
        y[i] = r * r;
    }
}

/* CPU form, backward. dx, dy, x: (n); x is the forward's input (not its output).
 * dx[i] = dy[i] * f'(x[i]); dx may be dy itself. */
static void squared_relu_backward(float *dx, const float *dy, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * (x[i] > 0.0f ? 2.0f * x[i] : 0.0f);
}

/* OpenCL form: OpenCL C 1.2 source defining clf_<op name>_forward and clf_<op name>_grad.
 * The backend builds it into its own elementwise kernels, so define nothing else (no
 * kernels, no helpers with common names), and write float literals with an f. */
static const char squared_relu_cl[] = "float clf_squared_relu_forward(float x)\n"
                                      "{\n"
                                      "    float r = fmax(x, 0.0f);\n"
                                      "    return r * r;\n"
                                      "}\n"
                                      "float clf_squared_relu_grad(float x)\n"
                                      "{\n"
                                      "    return 2.0f * fmax(x, 0.0f);\n"
                                      "}\n";

/* The ops this plugin provides. A name is a C identifier of at most 31 characters that no
 * built-in (relu, tutorial, standard) or other loaded plugin uses. Set both CPU pointers
 * or neither; leave opencl_source NULL for a CPU-only op (and vice versa). */
static const clf_plugin_op example_ops[] = {
    {.name = "squared_relu",
     .kind = CLF_PLUGIN_ACTIVATION,
     .cpu = {.act_forward = squared_relu_forward, .act_backward = squared_relu_backward},
     .opencl_source = squared_relu_cl},
};

static const clf_plugin_api example_api = {
    .abi_version = CLF_PLUGIN_ABI, /* the loader refuses any other version */
    .name = "example",
    .description = "squared_relu: max(x, 0)^2 (an example to copy)",
    .ops = example_ops,
    .n_ops = 1,
};

/* The one symbol clformer looks up. "default" visibility keeps it exported even when the
 * plugin is built with -fvisibility=hidden (as clformer's own build does). */
__attribute__((visibility("default"))) const clf_plugin_api *clf_plugin_entry(void)
{
    return &example_api;
}
