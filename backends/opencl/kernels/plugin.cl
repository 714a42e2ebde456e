/* plugin.cl - the kernels that apply a plugin op (clformer/plugin.h). Built once per op,
 * after plugin_prelude.cl, the op's source and a block of #defines (ocl_plugin.c):
 *   CLF_PLUGIN_NORM      1 for a norm, 0 for an activation kind
 *   CLF_PLUGIN_GATED     1 for a gated activation
 *   CLF_PLUGIN_FORWARD   clf_NAME_forward
 *   CLF_PLUGIN_GRAD      clf_NAME_grad      (activation kinds)
 *   CLF_PLUGIN_BACKWARD  clf_NAME_backward  (norm)
 * No kernel name ends in _forward, _grad or _backward, so no op name collides with one.
 * The backend owns the gate product, alpha/beta and their gradients; the plugin only the
 * math of f and f', or of n and its vector-Jacobian product. Offsets are in elements. */

#pragma OPENCL FP_CONTRACT OFF

#if !CLF_PLUGIN_NORM

/* out, x, gate: [n]. out[i] = f(x[i]) * gate[i] (the gate only for a gated op); out may be
 * x. Grid-stride loop. */
__kernel void clf_plugin_act(__global float *out, ulong out_off, __global const float *x,
                             ulong x_off, __global const float *gate, ulong gate_off, ulong n)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        float y = CLF_PLUGIN_FORWARD(x[x_off + i]);
#if CLF_PLUGIN_GATED
        y *= gate[gate_off + i];
#endif
        out[out_off + i] = y;
    }
}

/* dx, dgate, dy, x, gate: [n].
 *   dx[i] = (dy[i] * gate[i]) * f'(x[i])   (no gate: dy[i] * f'(x[i]))
 *   dgate[i] = dy[i] * f(x[i])             (gated op only)
 * Element i is read before it is written, so dx may be dy (no gate) and dgate may be dy.
 * Grid-stride loop. */
__kernel void clf_plugin_act_bwd(__global float *dx, ulong dx_off, __global float *dgate,
                                 ulong dgate_off, __global const float *dy, ulong dy_off,
                                 __global const float *x, ulong x_off, __global const float *gate,
                                 ulong gate_off, ulong n)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const float xi = x[x_off + i], g = dy[dy_off + i];
#if CLF_PLUGIN_GATED
        const float fx = CLF_PLUGIN_FORWARD(xi);
        dx[dx_off + i] = (g * gate[gate_off + i]) * CLF_PLUGIN_GRAD(xi);
        dgate[dgate_off + i] = g * fx;
#else
        dx[dx_off + i] = g * CLF_PLUGIN_GRAD(xi);
#endif
    }
}

#else /* CLF_PLUGIN_NORM */

/* out, x: [rows, cols]; alpha, beta: [cols]. One work-group per row:
 *   out[r,:] = n(x[r,:])  (the plugin writes it), then, with affine,
 *   out[r,:] = alpha * out[r,:] + beta   (beta only with has_beta)
 * affine = 0 leaves n(x), which norm_backward's dalpha needs. scratch: [wg]. */
__kernel void clf_plugin_norm(__global float *out, ulong out_off, __global const float *x,
                              ulong x_off, int affine, __global const float *alpha, ulong alpha_off,
                              __global const float *beta, ulong beta_off, int has_beta, int cols,
                              float eps, __local float *scratch)
{
    const ulong row = get_group_id(0) * (ulong)cols;
    const int lid = get_local_id(0), wg = get_local_size(0);
    __global float *o = out + out_off + row;
    CLF_PLUGIN_FORWARD(o, x + x_off + row, cols, eps, scratch);
    /* the plugin may have written any column of the row; every work-item reaches this */
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (affine)
        for (int c = lid; c < cols; c += wg)
            o[c] = alpha[alpha_off + c] * o[c] + (has_beta ? beta[beta_off + c] : 0.0f);
}

/* dx, dy, x: [rows, cols]; alpha: [cols]; tmp: [rows, cols] (accumulate only). One
 * work-group per row:
 *   dx[r,:] = J_n(x[r,:])^T (alpha * dy[r,:])   (the plugin's backward)
 * With accumulate the plugin writes tmp[r,:] instead, then dx[r,:] += tmp[r,:].
 * scratch: [wg]. */
__kernel void clf_plugin_norm_bwd(__global float *dx, ulong dx_off, __global float *tmp,
                                  ulong tmp_off, int accumulate, __global const float *dy,
                                  ulong dy_off, __global const float *alpha, ulong alpha_off,
                                  __global const float *x, ulong x_off, int cols, float eps,
                                  __local float *scratch)
{
    const ulong row = get_group_id(0) * (ulong)cols;
    const int lid = get_local_id(0), wg = get_local_size(0);
    __global float *o = dx + dx_off + row;
    __global float *t = accumulate ? tmp + tmp_off + row : o;
    CLF_PLUGIN_BACKWARD(t, dy + dy_off + row, alpha + alpha_off, x + x_off + row, cols, eps,
                        scratch);
    /* the plugin may have written any column of the row; every work-item reaches this */
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (accumulate)
        for (int c = lid; c < cols; c += wg)
            o[c] += t[c];
}

/* dy, xhat: [rows, cols] (xhat = n(x), read for dalpha only); dalpha, dbeta: [cols] (each
 * optional).
 *   dalpha[c] += sum_r dy[r,c] * xhat[r,c];  dbeta[c] += sum_r dy[r,c]
 * 2-D work-groups of (lx columns, ly row slices), as layernorm_backward_params: work-item
 * (c, y) sums rows y, y + ly, ... in order, then the ly partial sums of column c are added
 * in a fixed tree (no atomics: the same bits run after run). Global: (cols rounded up to
 * lx, ly). reda, redb: [lx * ly]. */
__kernel void clf_plugin_norm_params(__global const float *dy, ulong dy_off,
                                     __global const float *xhat, ulong xhat_off,
                                     __global float *dalpha, ulong dalpha_off, int has_dalpha,
                                     __global float *dbeta, ulong dbeta_off, int has_dbeta,
                                     int rows, int cols, __local float *reda, __local float *redb)
{
    const int c = get_global_id(0), ly = get_local_id(1), ny = get_local_size(1);
    float sa = 0.0f, sb = 0.0f;
    if (c < cols) {
        for (int r = ly; r < rows; r += ny) {
            const ulong i = (ulong)r * cols + c;
            const float g = dy[dy_off + i];
            if (has_dalpha)
                sa += g * xhat[xhat_off + i];
            sb += g;
        }
    }
    clf_column_sums_add(sa, sb, reda, redb, cols, dalpha, dalpha_off, has_dalpha, dbeta,
                        dbeta_off, has_dbeta);
}

#endif
