/* An activation called "relu", which is built in: refused as a collision with the built-in. */
#include "hostile.h"

static const clf_plugin_op ops[] = {
    HOSTILE_IDENTITY_ACT("relu"),
};

HOSTILE_PLUGIN(CLF_PLUGIN_ABI, "collides_builtin", "an activation named like the built-in relu",
               ops)
