/* A valid plugin whose activation "ocl_broken_act" has a working CPU form and an OpenCL
 * source that does not compile: it loads and runs on the CPU; the OpenCL backend must
 * report the build failure (naming the plugin and the op), not crash. */
#include "hostile.h"

static const char broken_cl[] = "float clf_ocl_broken_act_forward(float x)\n"
                                "{\n"
                                "    return x + ;\n" /* a syntax error */
                                "}\n"
                                "float clf_ocl_broken_act_grad(float x)\n"
                                "{\n"
                                "    return undeclared_identifier;\n"
                                "}\n";

static const clf_plugin_op ops[] = {
    {.name = "ocl_broken_act",
     .kind = CLF_PLUGIN_ACTIVATION,
     .cpu = {.act_forward = hostile_identity_forward, .act_backward = hostile_identity_backward},
     .opencl_source = broken_cl},
};

HOSTILE_PLUGIN(CLF_PLUGIN_ABI, "ocl_broken",
               "an identity activation whose OpenCL source does not compile", ops)
