/* group.cl - work-group reductions shared by every program: prepended to the kernel
 * families (before common.cl, ocl_program.c) and to the plugin programs (before
 * plugin_prelude.cl, ocl_plugin.c). A plugin's source sees these names, so they start
 * with clf_; clf_group_sum is the one clformer/plugin.h promises.
 *
 * Every sum is added in a fixed tree (no atomics), so the bits are the same run after run,
 * and every work-item of the group must call them (they contain barriers). */

/* CLF_GROUP_REDUCE(name, COMBINE): float name(float v, __local float *scratch), the
 * reduction of v over the work-group by COMBINE(a, b), returned to every work-item.
 * scratch: [get_local_size(0)] floats (the work-group size is a power of two). */
#define CLF_GROUP_REDUCE(name, COMBINE)                                                            \
    float name(float v, __local float *scratch)                                                    \
    {                                                                                              \
        const uint lid = get_local_id(0);                                                          \
        scratch[lid] = v;                                                                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        for (uint s = get_local_size(0) / 2; s > 0; s /= 2) {                                      \
            if (lid < s)                                                                           \
                scratch[lid] = COMBINE(scratch[lid], scratch[lid + s]);                            \
            barrier(CLK_LOCAL_MEM_FENCE);                                                          \
        }                                                                                          \
        const float total = scratch[0];                                                            \
        barrier(CLK_LOCAL_MEM_FENCE); /* scratch is reused by the next call */                     \
        return total;                                                                              \
    }

#define CLF_GROUP_ADD(a, b) ((a) + (b))
CLF_GROUP_REDUCE(clf_group_sum, CLF_GROUP_ADD)

/* The end of a column-sums kernel of 2-D work-groups (lx columns, ly row slices): work-item
 * (c, y) holds its partial sums sa, sb of column c over rows y, y + ly, ...; the ly partial
 * sums of each column are added in a fixed tree in reda, redb ([lx * ly] each), then
 * dalpha[c] += the total of sa (has_dalpha), dbeta[c] += that of sb (has_dbeta) for
 * c < cols. Every work-item of the group must call it. */
void clf_column_sums_add(float sa, float sb, __local float *reda, __local float *redb, int cols,
                         __global float *dalpha, ulong dalpha_off, int has_dalpha,
                         __global float *dbeta, ulong dbeta_off, int has_dbeta)
{
    const int c = get_global_id(0), lx = get_local_id(0), ly = get_local_id(1);
    const int nx = get_local_size(0), ny = get_local_size(1);
    const int idx = ly * nx + lx;
    reda[idx] = sa;
    redb[idx] = sb;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = ny / 2; s > 0; s /= 2) {
        if (ly < s) {
            reda[idx] += reda[idx + s * nx];
            redb[idx] += redb[idx + s * nx];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (ly == 0 && c < cols) {
        if (has_dalpha)
            dalpha[dalpha_off + c] += reda[lx];
        if (has_dbeta)
            dbeta[dbeta_off + c] += redb[lx];
    }
}
