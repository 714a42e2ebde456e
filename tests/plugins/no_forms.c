/* An op with no form for any backend: no CPU functions, no OpenCL source. Refused. */
#include "hostile.h"

static const clf_plugin_op ops[] = {
    {.name = "no_forms_act", .kind = CLF_PLUGIN_ACTIVATION, .opencl_source = NULL},
};

static const clf_plugin_api api = {
    .abi_version = CLF_PLUGIN_ABI,
    .name = "no_forms",
    .description = "an activation no backend can run",
    .ops = ops,
    .n_ops = 1,
};

HOSTILE_EXPORT const clf_plugin_api *clf_plugin_entry(void)
{
    return &api;
}
