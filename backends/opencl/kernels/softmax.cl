/* softmax.cl - row softmax / log_softmax and argmax. */

/* out, x: [rows, cols]; one work-group per row; out may alias x (each work-item reads its
 * columns before writing them, and only its own).
 *   softmax:     out = exp(x - max) / sum(exp(x - max))
 *   log_softmax: out = (x - max) - log(sum(exp(x - max)))
 * Offsets are in elements. */
__kernel void softmax(__global float *out, ulong out_off, __global const float *x, ulong x_off,
                      int cols, int log_out, __local float *red)
{
    const ulong row = get_group_id(0) * (ulong)cols;
    const int lid = get_local_id(0), wg = get_local_size(0);
    __global const float *xr = x + x_off + row;
    __global float *o = out + out_off + row;

    float m = -INFINITY;
    for (int c = lid; c < cols; c += wg)
        m = fmax(m, xr[c]);
    m = wg_max(red, m);
    float s = 0.0f;
    for (int c = lid; c < cols; c += wg)
        s += exp(xr[c] - m);
    s = wg_sum(red, s);
    if (log_out) {
        const float ls = log(s);
        for (int c = lid; c < cols; c += wg)
            o[c] = (xr[c] - m) - ls;
    } else {
        for (int c = lid; c < cols; c += wg)
            o[c] = exp(xr[c] - m) / s;
    }
}

/* out: I32 [rows]; x: [rows, cols]. out[r] = index of the first maximum of x[r,:]
 * (ties go to the smaller index, as torch.argmax and the CPU backend do).
 * redv, redi: [work-group size] scratch. */
__kernel void argmax(__global int *out, ulong out_off, __global const float *x, ulong x_off,
                     int cols, __local float *redv, __local int *redi)
{
    const ulong r = get_group_id(0);
    const int lid = get_local_id(0), wg = get_local_size(0);
    __global const float *xr = x + x_off + r * (ulong)cols;

    float best = -INFINITY;
    int bi = -1;
    for (int c = lid; c < cols; c += wg) {
        const float v = xr[c];
        if (bi < 0 || v > best) {
            best = v;
            bi = c;
        }
    }
    redv[lid] = best;
    redi[lid] = bi;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = wg / 2; s > 0; s /= 2) {
        if (lid < s) {
            const float v = redv[lid + s];
            const int i = redi[lid + s];
            /* take the other half's candidate if it is larger, or equal and earlier */
            if (i >= 0 && (redi[lid] < 0 || v > redv[lid] || (v == redv[lid] && i < redi[lid]))) {
                redv[lid] = v;
                redi[lid] = i;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        out[out_off + r] = redi[0] < 0 ? 0 : redi[0];
}
