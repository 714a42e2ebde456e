/* Shared pieces of the hostile plugins in tests/plugins/: each clformer-plugin-<case>.so
 * breaks exactly one rule of clformer/plugin.h (or none, for cpu_only and ocl_broken) and
 * the loader tests check the refusal names the file and the reason. The math is the
 * identity, f(x) = x, f'(x) = 1: only what the loader sees matters. */
#ifndef CLF_TEST_HOSTILE_H
#define CLF_TEST_HOSTILE_H

#include <stddef.h>

#include "clformer/plugin.h"

/* y, x: (n). y = x; y may alias x. */
static inline void hostile_identity_forward(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
}

/* dx, dy, x: (n). dx = dy * 1; dx may alias dy. */
static inline void hostile_identity_backward(float *dx, const float *dy, const float *x, size_t n)
{
    (void)x;
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i];
}

/* An OpenCL form of the identity for an op called NAME. */
#define HOSTILE_IDENTITY_CL(NAME)                                                                  \
    "float clf_" NAME "_forward(float x) { return x; }\n"                                          \
    "float clf_" NAME "_grad(float x) { return 1.0f; }\n"

#define HOSTILE_EXPORT __attribute__((visibility("default")))

/* An identity activation called NAME with both forms (CPU and OpenCL), as an element of a
 * plugin's ops: the op of a plugin whose one defect lies elsewhere. */
#define HOSTILE_IDENTITY_ACT(NAME)                                                                 \
    {                                                                                              \
        .name = NAME, .kind = CLF_PLUGIN_ACTIVATION,                                               \
        .cpu = {.act_forward = hostile_identity_forward,                                           \
                .act_backward = hostile_identity_backward},                                        \
        .opencl_source = HOSTILE_IDENTITY_CL(NAME)                                                 \
    }

/* The plugin's entry: clf_plugin_entry returning the API of ABI version ABI, called NAME,
 * with the ops of the array OPS (all of its elements). */
#define HOSTILE_PLUGIN(ABI, NAME, DESCRIPTION, OPS)                                                \
    static const clf_plugin_api api = {                                                            \
        .abi_version = (ABI),                                                                      \
        .name = (NAME),                                                                            \
        .description = (DESCRIPTION),                                                              \
        .ops = (OPS),                                                                              \
        .n_ops = (int)(sizeof(OPS) / sizeof((OPS)[0])),                                            \
    };                                                                                             \
    HOSTILE_EXPORT const clf_plugin_api *clf_plugin_entry(void)                                    \
    {                                                                                              \
        return &api;                                                                               \
    }

#endif
