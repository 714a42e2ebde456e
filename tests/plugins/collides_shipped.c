/* A valid activation called "gelu", as the shipped activations plugin has: loaded beside
 * clformer-plugin-activations.so, whichever comes second is refused, naming the other. */
#include "hostile.h"

static const clf_plugin_op ops[] = {
    {.name = "gelu",
     .kind = CLF_PLUGIN_ACTIVATION,
     .cpu = {.act_forward = hostile_identity_forward, .act_backward = hostile_identity_backward},
     .opencl_source = HOSTILE_IDENTITY_CL("gelu")},
};

static const clf_plugin_api api = {
    .abi_version = CLF_PLUGIN_ABI,
    .name = "collides_shipped",
    .description = "a second gelu",
    .ops = ops,
    .n_ops = 1,
};

HOSTILE_EXPORT const clf_plugin_api *clf_plugin_entry(void)
{
    return &api;
}
