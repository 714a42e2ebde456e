/* A backend with the right ABI but no functions: the loader must refuse it. */
#include "clformer/backend.h"

static const clf_backend_api incomplete_api = {
    .abi_version = CLF_BACKEND_ABI,
    .name = "incomplete",
};

__attribute__((visibility("default"))) const clf_backend_api *clf_backend_entry(void)
{
    return &incomplete_api;
}
