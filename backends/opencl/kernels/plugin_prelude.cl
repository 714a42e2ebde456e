/* plugin_prelude.cl - what a plugin op's OpenCL source may call (clformer/plugin.h). The
 * program of a plugin op is this file, a block of #defines naming the op's functions, the
 * op's own source, then plugin.cl (the kernels that apply it). common.cl is not included:
 * a plugin's source sees only names that start with clf_. */

/* No fused multiply-adds: the plugin's math rounds operation by operation like the CPU
 * backend's C (built without FMA). A plugin may turn them back on for its own code. */
#pragma OPENCL FP_CONTRACT OFF

/* scratch: [get_local_size(0)] floats (the work-group size is a power of two). Returns the
 * sum of v over the work-group to every work-item, added in a fixed tree, so the bits are
 * the same run after run. Every work-item of the group must call it (it has barriers). */
float clf_group_sum(float v, __local float *scratch)
{
    const uint lid = get_local_id(0);
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = get_local_size(0) / 2; s > 0; s /= 2) {
        if (lid < s)
            scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float total = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE); /* scratch is reused by the next call */
    return total;
}
