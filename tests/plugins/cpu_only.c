/* A valid plugin whose activation "cpu_only_act" has a CPU form and no OpenCL source: it
 * loads, and a run of it on the OpenCL backend is refused before it starts, naming the
 * plugin, the op and the backend. */
#include "hostile.h"

static const clf_plugin_op ops[] = {
    {.name = "cpu_only_act",
     .kind = CLF_PLUGIN_ACTIVATION,
     .cpu = {.act_forward = hostile_identity_forward, .act_backward = hostile_identity_backward},
     .opencl_source = NULL},
};

HOSTILE_PLUGIN(CLF_PLUGIN_ABI, "cpu_only", "an identity activation with a CPU form only", ops)
