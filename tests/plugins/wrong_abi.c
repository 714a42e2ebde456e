/* Built against a future plugin ABI (999): refused, naming both versions. */
#include "hostile.h"

static const clf_plugin_op ops[] = {
    HOSTILE_IDENTITY_ACT("wrong_abi_act"),
};

HOSTILE_PLUGIN(999, "wrong_abi", "an ABI version clformer does not speak", ops)
