/* An activation called "relu", which is built in: refused as a collision with the built-in. */
#include "hostile.h"

static const clf_plugin_op ops[] = {
    {.name = "relu",
     .kind = CLF_PLUGIN_ACTIVATION,
     .cpu = {.act_forward = hostile_identity_forward, .act_backward = hostile_identity_backward},
     .opencl_source = HOSTILE_IDENTITY_CL("relu")},
};

static const clf_plugin_api api = {
    .abi_version = CLF_PLUGIN_ABI,
    .name = "collides_builtin",
    .description = "an activation named like the built-in relu",
    .ops = ops,
    .n_ops = 1,
};

HOSTILE_EXPORT const clf_plugin_api *clf_plugin_entry(void)
{
    return &api;
}
