/* layernorm.cl - LayerNorm with an optional fused residual add. */

/* out, x, residual, sum_out: [rows, cols]; alpha, beta: [cols]. One work-group per row.
 *   v = x + residual (residual optional); sum_out = v (optional, may alias x)
 *   style 0 (tutorial): out = alpha * (v - mean) / (std_unbiased + eps) + beta
 *   style 1 (standard): out = alpha * (v - mean) / sqrt(var_biased + eps) + beta
 * Two passes (mean, then the squared deviations) rather than E[v^2] - mean^2, which loses
 * digits when |mean| >> std; see the correction below. When sum_out is written, later passes read v
 * back from it: it may alias x, so x + residual must not be recomputed from an overwritten x. Each
 * work-item reads and writes only its own columns, so no barrier is needed for that.
 * Offsets are in elements. */
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

    float s = 0.0f;
    for (int c = lid; c < cols; c += wg) {
        float v = xr[c];
        if (has_residual)
            v += rr[c];
        if (has_sum)
            sr[c] = v;
        s += v;
    }
    const float mean = wg_sum(red, s) / (float)cols;

    /* d = v - mean is nearly exact (v and mean are close); the float mean's own rounding
     * error is then removed (ln_divisor's correction), which keeps rows with a large mean
     * and a small spread to 1e-6. */
    float sd = 0.0f, ss = 0.0f;
    for (int c = lid; c < cols; c += wg) {
        const float v = has_sum ? sr[c] : (has_residual ? xr[c] + rr[c] : xr[c]);
        const float d = v - mean;
        sd += d;
        ss += d * d;
    }
    const float sum_d = wg_sum(red, sd);
    const float sum_sq = wg_sum(red, ss);
    float corr;
    const float denom = ln_divisor(sum_d, sum_sq, cols, style, eps, &corr);

    for (int c = lid; c < cols; c += wg) {
        const float v = has_sum ? sr[c] : (has_residual ? xr[c] + rr[c] : xr[c]);
        o[c] = ln_value(v, mean, corr, denom, a[c], b[c]);
    }
}
