/* Built against a future plugin ABI (999): refused, naming both versions. */
#include "hostile.h"

static const clf_plugin_op ops[] = {
    {.name = "wrong_abi_act",
     .kind = CLF_PLUGIN_ACTIVATION,
     .cpu = {.act_forward = hostile_identity_forward, .act_backward = hostile_identity_backward},
     .opencl_source = HOSTILE_IDENTITY_CL("wrong_abi_act")},
};

static const clf_plugin_api api = {
    .abi_version = 999,
    .name = "wrong_abi",
    .description = "an ABI version clformer does not speak",
    .ops = ops,
    .n_ops = 1,
};

HOSTILE_EXPORT const clf_plugin_api *clf_plugin_entry(void)
{
    return &api;
}
