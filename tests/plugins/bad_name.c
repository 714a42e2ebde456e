/* An op called "Bad-Name" (upper case, a hyphen): not a C identifier, refused. */
#include "hostile.h"

static const clf_plugin_op ops[] = {
    {.name = "Bad-Name",
     .kind = CLF_PLUGIN_ACTIVATION,
     .cpu = {.act_forward = hostile_identity_forward, .act_backward = hostile_identity_backward},
     .opencl_source = NULL}, /* the name is the one defect */
};

HOSTILE_PLUGIN(CLF_PLUGIN_ABI, "bad_name", "an op name that is not a C identifier", ops)
