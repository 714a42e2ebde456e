/* Two ops of one plugin both called "twin_act": refused, nothing registered (not even the
 * first twin). */
#include "hostile.h"

static const clf_plugin_op ops[] = {
    HOSTILE_IDENTITY_ACT("twin_act"),
    HOSTILE_IDENTITY_ACT("twin_act"),
};

HOSTILE_PLUGIN(CLF_PLUGIN_ABI, "dup_in_self", "two ops with one name", ops)
