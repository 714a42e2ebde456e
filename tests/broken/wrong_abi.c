/* A backend built against a future ABI: the loader must refuse it, naming both versions. */
#include "clformer/backend.h"

static const clf_backend_api wrong_abi_api = {
    .abi_version = CLF_BACKEND_ABI + 998,
    .name = "wrongabi",
};

__attribute__((visibility("default"))) const clf_backend_api *clf_backend_entry(void)
{
    return &wrong_abi_api;
}
