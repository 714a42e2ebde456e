/* plugin_prelude.cl - what a plugin op's OpenCL source may call (clformer/plugin.h). The
 * program of a plugin op is group.cl, this file, a block of #defines naming the op's
 * functions, the op's own source, then plugin.cl (the kernels that apply it). common.cl is
 * not included: a plugin's source sees only names that start with clf_ (or CLF_). */

/* No fused multiply-adds: the plugin's math rounds operation by operation like the CPU
 * backend's C (built without FMA). A plugin may turn them back on for its own code. */
#pragma OPENCL FP_CONTRACT OFF

/* clf_group_sum(v, scratch), the work-group sum plugin.h promises, comes from group.cl,
 * which the backend puts before this file. */
