/* common.cl - helpers prepended to every kernel family's source (after group.cl).
 *
 * Row kernels run one work-group per row; the host picks a power-of-two work-group size
 * (from CL_KERNEL_WORK_GROUP_SIZE) so these tree reductions halve cleanly. Every
 * work-item of the group must call them (they contain barriers). */

#ifndef CLF_MASKED_SCORE
#define CLF_MASKED_SCORE (-1.0e9f) /* masked_fill(mask == 0, -1e9), as the tutorials do */
#endif

/* The work-group sum and maximum of v (group.cl), red: [get_local_size(0)] scratch. */
CLF_GROUP_REDUCE(wg_max_of, fmax)
#define wg_sum(red, v) clf_group_sum((v), (red))
#define wg_max(red, v) wg_max_of((v), (red))

/* clf_dropout_bits of backend.h, in the same 64-bit unsigned arithmetic (ulong is 64 bits
 * in OpenCL C, and its products wrap like uint64_t), so every backend draws the same mask:
 * splitmix64 of seed + (i + 1) * golden, high 32 bits. Shared by dropout (train.cl) and
 * the attention kernels' dropout on the probabilities. */
uint dropout_bits(ulong seed, ulong i)
{
    ulong z = seed + (i + 1) * 0x9E3779B97F4A7C15UL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
    z ^= z >> 31;
    return (uint)(z >> 32);
}

/* The dropout factor of element e: keep_scale (= 1.0f / (1.0f - p), from the host) when
 * dropout_bits(seed, e) >= threshold (= clf_dropout_threshold(p)), else 0. */
float dropout_keep(ulong seed, ulong e, uint threshold, float keep_scale)
{
    return dropout_bits(seed, e) >= threshold ? keep_scale : 0.0f;
}

/* The layernorm's rule (clf_layernorm_args), kept here for layernorm.cl and the products
 * that normalize their A first (gemm.cl). From a row's mean and, over its cols values v,
 * sum_d = sum (v - mean) and ss = sum (v - mean)^2: *corr = mean(v - mean) (the float mean's
 * own rounding error, removed: the "corrected two-pass" algorithm) and the divisor, tutorial
 * (style 0: torch.std, unbiased, + eps) or standard (1: sqrt(biased variance + eps)). */
float ln_divisor(float sum_d, float ss, int cols, int style, float eps, float *corr)
{
    *corr = sum_d / (float)cols;
    const float m2 = fmax(ss - sum_d * *corr, 0.0f);
    return style == 0 ? sqrt(m2 / (float)(cols - 1)) + eps : sqrt(m2 / (float)cols + eps);
}

/* The normalized value of v: alpha * ((v - mean) - corr) / divisor + beta. */
float ln_value(float v, float mean, float corr, float divisor, float alpha, float beta)
{
    return alpha * ((v - mean) - corr) / divisor + beta;
}

/* A row's statistics for the layernorm rule above: its mean (returned in *mean), then the
 * correction and divisor of ln_divisor, from two passes over x[0..cols) (the mean, then the
 * deviations), each work-item over its own columns c = lid, lid + wg, ... Every work-item
 * calls it (the reductions' barriers); red: [work-group size] floats. */
float ln_row_stats(__global const float *x, int cols, int style, float eps, __local float *red,
                   float *mean, float *corr)
{
    const int lid = get_local_id(0), wg = get_local_size(0);
    float s = 0.0f;
    for (int c = lid; c < cols; c += wg)
        s += x[c];
    *mean = wg_sum(red, s) / (float)cols;
    /* d = v - mean is nearly exact (v and mean are close); the float mean's own rounding
     * error is then removed (ln_divisor's correction), which keeps rows with a large mean
     * and a small spread to 1e-6 */
    float sd = 0.0f, ss = 0.0f;
    for (int c = lid; c < cols; c += wg) {
        const float d = x[c] - *mean;
        sd += d;
        ss += d * d;
    }
    const float sum_d = wg_sum(red, sd);
    const float sum_sq = wg_sum(red, ss);
    return ln_divisor(sum_d, sum_sq, cols, style, eps, corr);
}
