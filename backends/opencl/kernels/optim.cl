/* optim.cl - the optimizer step and the sum of squares behind gradient-norm clipping.
 * Offsets are in elements. */

/* No fused multiply-adds: Adam rounds operation for operation as PyTorch and the CPU
 * backend do. */
#pragma OPENCL FP_CONTRACT OFF

/* param, grad, m, v: [n]. One Adam (decoupled = 0) or AdamW (decoupled = 1) step, in
 * float, operation for operation as torch.optim.Adam / AdamW (and the CPU backend) round:
 *   g = grad * grad_scale
 *   if weight_decay != 0:  Adam: g = g + weight_decay * p;  AdamW: p = p * decay
 *   m = m * beta1 + (1 - beta1) * g;  v = v * beta2 + ((1 - beta2) * g) * g
 *   p = p + (neg_step * m) / (sqrt(v) / sqrt_bc2 + eps)
 * decay = 1 - lr * weight_decay and neg_step = -lr / bias_correction1 come from the host
 * (formed in double and rounded once, as PyTorch's Python scalars are); addcdiv computes
 * (value * m) / denom. grad is not modified. Grid-stride loop. */
__kernel void adam(__global float *param, ulong param_off, __global const float *grad,
                   ulong grad_off, __global float *m, ulong m_off, __global float *v, ulong v_off,
                   ulong n, float beta1, float beta2, float one_beta1, float one_beta2, float eps,
                   float weight_decay, float grad_scale, float neg_step, float sqrt_bc2,
                   float decay, int decoupled)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        float p = param[param_off + i];
        float g = grad[grad_off + i] * grad_scale;
        if (weight_decay != 0.0f) {
            if (decoupled)
                p = p * decay;
            else
                g = g + weight_decay * p;
        }
        const float mi = m[m_off + i] * beta1 + one_beta1 * g;
        const float vi = v[v_off + i] * beta2 + one_beta2 * g * g;
        m[m_off + i] = mi;
        v[v_off + i] = vi;
        param[param_off + i] = p + neg_step * mi / (sqrt(vi) / sqrt_bc2 + eps);
    }
}

/* Stage 1 of out = sum_i x[i]^2: work-group g writes partial[g], the sum over its
 * work-items' grid-stride shares. Each work-item adds its share with Kahan compensation
 * (thousands of terms each for a model's gradient), then the group adds the work-items'
 * sums in wg_sum's fixed tree. The number of groups depends only on n and the device, so
 * the result is the same bits run after run. red: [wg]. */
__kernel void sum_squares_partial(__global const float *x, ulong x_off, ulong n,
                                  __global float *partial, __local float *red)
{
    float s = 0.0f, comp = 0.0f;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const float xi = x[x_off + i];
        const float y = xi * xi - comp;
        const float t = s + y;
        comp = (t - s) - y;
        s = t;
    }
    s = wg_sum(red, s);
    if (get_local_id(0) == 0)
        partial[get_group_id(0)] = s;
}

/* Stage 2: one work-group; out[0] = the sum of partial[0 .. groups), the same way. */
__kernel void sum_squares_final(__global float *out, ulong out_off, __global const float *partial,
                                uint groups, __local float *red)
{
    float s = 0.0f, comp = 0.0f;
    for (uint i = get_local_id(0); i < groups; i += get_local_size(0)) {
        const float y = partial[i] - comp;
        const float t = s + y;
        comp = (t - s) - y;
        s = t;
    }
    s = wg_sum(red, s);
    if (get_local_id(0) == 0)
        out[out_off] = s;
}
