/* n_ops says 2 but ops is NULL: the loader must refuse it, not read through NULL. */
#include "hostile.h"

static const clf_plugin_api api = {
    .abi_version = CLF_PLUGIN_ABI,
    .name = "null_ops",
    .description = "two ops promised, none given",
    .ops = NULL,
    .n_ops = 2,
};

HOSTILE_EXPORT const clf_plugin_api *clf_plugin_entry(void)
{
    return &api;
}
