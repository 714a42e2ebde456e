/* common.cl - helpers prepended to every kernel family's source.
 *
 * Row kernels run one work-group per row; the host picks a power-of-two work-group size
 * (from CL_KERNEL_WORK_GROUP_SIZE) so these tree reductions halve cleanly. Every
 * work-item of the group must call them (they contain barriers). */

#ifndef CLF_MASKED_SCORE
#define CLF_MASKED_SCORE (-1.0e9f) /* masked_fill(mask == 0, -1e9), as the tutorials do */
#endif

/* red: [get_local_size(0)] scratch. Returns the sum of v over the work-group. */
float wg_sum(__local float *red, float v)
{
    const uint lid = get_local_id(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = get_local_size(0) / 2; s > 0; s /= 2) {
        if (lid < s)
            red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE); /* red is reused by the next reduction */
    return r;
}

/* red: [get_local_size(0)] scratch. Returns the maximum of v over the work-group. */
float wg_max(__local float *red, float v)
{
    const uint lid = get_local_id(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = get_local_size(0) / 2; s > 0; s /= 2) {
        if (lid < s)
            red[lid] = fmax(red[lid], red[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}
