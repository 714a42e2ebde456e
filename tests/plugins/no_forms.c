/* An op with no form for any backend: no CPU functions, no OpenCL source. Refused. */
#include "hostile.h"

static const clf_plugin_op ops[] = {
    {.name = "no_forms_act", .kind = CLF_PLUGIN_ACTIVATION, .opencl_source = NULL},
};

HOSTILE_PLUGIN(CLF_PLUGIN_ABI, "no_forms", "an activation no backend can run", ops)
