/* layernorm_backward.cl - the backward of layernorm.cl (without the residual add).
 *
 * Per row, with xc = x - mean, g = dy * alpha and D the forward's denominator:
 *   tutorial, D = sigma + eps, sigma = sqrt(sum xc^2 / (cols - 1)):
 *     dx = (g - mean(g) - xc * sum(g xc) / (D (cols - 1) sigma)) / D
 *   standard, D = sqrt(sum xc^2 / cols + eps):
 *     dx = (g - mean(g) - xc * sum(g xc) / (cols D^2)) / D
 * (the last term is the gradient through D: dD/dx = xc / ((cols - 1) sigma), resp.
 * xc / (cols D)). A constant row in the tutorial style (sigma = 0, where torch.std's
 * backward gives 0/0) takes that term as 0: its xc is 0 anyway.
 * Parameter gradients accumulate: dalpha[c] += sum_r dy[r,c] xhat[r,c], dbeta[c] +=
 * sum_r dy[r,c], xhat = xc / D, summed over rows by a second kernel in a fixed order (no
 * atomics), from the per-row (mean, corr, D) the first one leaves in stats [rows, 3].
 * Offsets are in elements. */

/* No fused multiply-adds: g = dy * alpha must round the same way in the sums and in dx (with
 * one column, dx = (g - mean(g)) / D is then exactly 0, as it should be). */
#pragma OPENCL FP_CONTRACT OFF

/* dx, dy, x: [rows, cols]; alpha: [cols]. One work-group per row; dx = or += the
 * gradient (accumulate). The mean and the variance are computed exactly as the forward
 * kernel does (mean, then the corrected two-pass sum of squares). red: [wg]. */
__kernel void layernorm_backward(__global float *dx, ulong dx_off, __global const float *dy,
                                 ulong dy_off, __global const float *x, ulong x_off,
                                 __global const float *alpha, ulong alpha_off,
                                 __global float *stats, int has_stats, int cols, int style,
                                 float eps, int accumulate, __local float *red)
{
    const ulong r = get_group_id(0), row = r * (ulong)cols;
    const int lid = get_local_id(0), wg = get_local_size(0);
    __global const float *xr = x + x_off + row;
    __global const float *gr = dy + dy_off + row;
    __global const float *a = alpha + alpha_off;
    __global float *o = dx + dx_off + row;

    float s = 0.0f;
    for (int c = lid; c < cols; c += wg)
        s += xr[c];
    const float mean = wg_sum(red, s) / (float)cols;
    float sd = 0.0f, ss = 0.0f;
    for (int c = lid; c < cols; c += wg) {
        const float d = xr[c] - mean;
        sd += d;
        ss += d * d;
    }
    const float sum_d = wg_sum(red, sd);
    const float corr = sum_d / (float)cols;
    const float m2 = fmax(wg_sum(red, ss) - sum_d * corr, 0.0f);
    const float sigma = sqrt(m2 / (float)(cols - 1)); /* tutorial only (cols >= 2) */
    const float denom = style == 0 ? sigma + eps : sqrt(m2 / (float)cols + eps);

    float sg = 0.0f, sgx = 0.0f;
    for (int c = lid; c < cols; c += wg) {
        const float g = gr[c] * a[c];
        sg += g;
        sgx += g * ((xr[c] - mean) - corr);
    }
    const float mean_g = wg_sum(red, sg) / (float)cols;
    const float sum_gx = wg_sum(red, sgx);
    float k;
    if (style == 0)
        k = sigma > 0.0f ? sum_gx / (denom * (float)(cols - 1) * sigma) : 0.0f;
    else
        k = sum_gx / ((float)cols * denom * denom);

    for (int c = lid; c < cols; c += wg) {
        const float xc = (xr[c] - mean) - corr;
        const float v = (gr[c] * a[c] - mean_g - xc * k) / denom;
        o[c] = accumulate ? o[c] + v : v;
    }
    if (has_stats && lid == 0) {
        stats[r * 3 + 0] = mean;
        stats[r * 3 + 1] = corr;
        stats[r * 3 + 2] = denom;
    }
}

/* dalpha, dbeta: [cols] (each optional). 2-D work-groups of (lx columns, ly row slices):
 * work-item (c, y) sums rows y, y + ly, ... in order, then the ly partial sums of column c
 * are added in a fixed tree; global (cols rounded up to lx, ly). Reading a row's lx
 * neighbouring columns together keeps the loads coalesced. reda, redb: [lx * ly]. */
__kernel void layernorm_backward_params(__global const float *dy, ulong dy_off,
                                        __global const float *x, ulong x_off,
                                        __global const float *stats, __global float *dalpha,
                                        ulong dalpha_off, int has_dalpha, __global float *dbeta,
                                        ulong dbeta_off, int has_dbeta, int rows, int cols,
                                        __local float *reda, __local float *redb)
{
    const int c = get_global_id(0), ly = get_local_id(1), ny = get_local_size(1);
    float sa = 0.0f, sb = 0.0f;
    if (c < cols) {
        for (int r = ly; r < rows; r += ny) {
            const ulong i = (ulong)r * cols + c;
            __global const float *st = stats + (ulong)r * 3;
            const float g = dy[dy_off + i];
            sa += g * (((x[x_off + i] - st[0]) - st[1]) / st[2]);
            sb += g;
        }
    }
    clf_column_sums_add(sa, sb, reda, redb, cols, dalpha, dalpha_off, has_dalpha, dbeta,
                        dbeta_off, has_dbeta);
}
