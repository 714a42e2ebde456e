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

static const clf_plugin_api api = {
    .abi_version = CLF_PLUGIN_ABI,
    .name = "cpu_only",
    .description = "an identity activation with a CPU form only",
    .ops = ops,
    .n_ops = 1,
};

HOSTILE_EXPORT const clf_plugin_api *clf_plugin_entry(void)
{
    return &api;
}
