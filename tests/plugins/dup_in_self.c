/* Two ops of one plugin both called "twin_act": refused, nothing registered (not even the
 * first twin). */
#include "hostile.h"

static const clf_plugin_op ops[] = {
    {.name = "twin_act",
     .kind = CLF_PLUGIN_ACTIVATION,
     .cpu = {.act_forward = hostile_identity_forward, .act_backward = hostile_identity_backward},
     .opencl_source = HOSTILE_IDENTITY_CL("twin_act")},
    {.name = "twin_act",
     .kind = CLF_PLUGIN_ACTIVATION,
     .cpu = {.act_forward = hostile_identity_forward, .act_backward = hostile_identity_backward},
     .opencl_source = HOSTILE_IDENTITY_CL("twin_act")},
};

static const clf_plugin_api api = {
    .abi_version = CLF_PLUGIN_ABI,
    .name = "dup_in_self",
    .description = "two ops with one name",
    .ops = ops,
    .n_ops = 2,
};

HOSTILE_EXPORT const clf_plugin_api *clf_plugin_entry(void)
{
    return &api;
}
