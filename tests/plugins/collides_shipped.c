/* A valid activation called "gelu", as the shipped activations plugin has: loaded beside
 * clformer-plugin-activations.so, whichever comes second is refused, naming the other. */
#include "hostile.h"

static const clf_plugin_op ops[] = {
    HOSTILE_IDENTITY_ACT("gelu"),
};

HOSTILE_PLUGIN(CLF_PLUGIN_ABI, "collides_shipped", "a second gelu", ops)
