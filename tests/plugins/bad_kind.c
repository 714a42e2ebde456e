/* An op of kind 42, which clf_plugin_kind does not have. Refused. */
#include "hostile.h"

static const clf_plugin_op ops[] = {
    {.name = "bad_kind_op",
     .kind = (clf_plugin_kind)42,
     .cpu = {.act_forward = hostile_identity_forward, .act_backward = hostile_identity_backward},
     .opencl_source = HOSTILE_IDENTITY_CL("bad_kind_op")},
};

HOSTILE_PLUGIN(CLF_PLUGIN_ABI, "bad_kind", "an op of an unknown kind", ops)
