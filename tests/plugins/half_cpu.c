/* Half a CPU form: act_forward set, act_backward NULL. Refused (both or neither). */
#include "hostile.h"

static const clf_plugin_op ops[] = {
    {.name = "half_cpu_act",
     .kind = CLF_PLUGIN_ACTIVATION,
     .cpu = {.act_forward = hostile_identity_forward, .act_backward = NULL},
     .opencl_source = HOSTILE_IDENTITY_CL("half_cpu_act")},
};

HOSTILE_PLUGIN(CLF_PLUGIN_ABI, "half_cpu", "an activation with a forward and no backward", ops)
