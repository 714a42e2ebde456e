/* layernorm.cl - LayerNorm with an optional fused residual add. */

/* out, x, residual, sum_out: [rows, cols]; alpha, beta: [cols]. One work-group per row.
 *   v = x + residual (residual optional); sum_out = v (optional, may alias x)
 *   style 0 (tutorial): out = alpha * (v - mean) / (std_unbiased + eps) + beta
 *   style 1 (standard): out = alpha * (v - mean) / sqrt(var_biased + eps) + beta
 * Two passes (mean, then the squared deviations) rather than E[v^2] - mean^2, which loses
 * digits when |mean| >> std, and a correction of the mean's rounding (ln_row_stats and
 * ln_divisor, common.cl, shared with gemm.cl's products that normalize A). With a residual or
 * sum_out, v is stored first and read back from there: sum_out may alias x, so x + residual
 * must not be recomputed from an overwritten x. Offsets are in elements. */
__kernel void layernorm(__global float *out, ulong out_off, __global const float *x, ulong x_off,
                        __global const float *residual, ulong res_off, int has_residual,
                        __global float *sum_out, ulong sum_off, int has_sum,
                        __global const float *alpha, ulong alpha_off, __global const float *beta,
                        ulong beta_off, int cols, int style, float eps, __local float *red)
{
    const ulong row = get_group_id(0) * (ulong)cols;
    const int lid = get_local_id(0), wg = get_local_size(0);
    __global float *o = out + out_off + row;
    __global const float *xr = x + x_off + row;
    __global const float *rr = residual + res_off + row;
    __global float *sr = sum_out + sum_off + row;
    __global const float *a = alpha + alpha_off;
    __global const float *b = beta + beta_off;

    /* v = x + residual, stored where it is read back from: sum_out when it is asked for
     * (it may alias x: x is not read again), else out (which may not alias x); each
     * work-item writes and reads back only its own columns, so no barrier is needed */
    __global const float *v = xr;
    if (has_residual || has_sum) {
        __global float *vw = has_sum ? sr : o;
        for (int c = lid; c < cols; c += wg)
            vw[c] = has_residual ? xr[c] + rr[c] : xr[c];
        v = vw;
    }
    float mean, corr;
    const float denom = ln_row_stats(v, cols, style, eps, red, &mean, &corr);
    for (int c = lid; c < cols; c += wg)
        o[c] = ln_value(v[c], mean, corr, denom, a[c], b[c]);
}
