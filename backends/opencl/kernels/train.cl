/* train.cl - the small ops of a training step: relu_backward, dropout, embed_backward,
 * cross_entropy. Offsets are in elements. */

/* No fused multiply-adds: each operation rounds as in the CPU backend's C (which is built
 * without FMA), so embed_backward's sums come out the same bits. */
#pragma OPENCL FP_CONTRACT OFF

/* dx, dy, y: [n]; dx = y > 0 ? dy : 0 (y: the relu's output; dx may alias dy).
 * Grid-stride loop. */
__kernel void relu_backward(__global float *dx, ulong dx_off, __global const float *dy,
                            ulong dy_off, __global const float *y, ulong y_off, ulong n)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0))
        dx[dx_off + i] = y[y_off + i] > 0.0f ? dy[dy_off + i] : 0.0f;
}

/* out, x: [n]; out[i] = dropout_bits (common.cl)(seed, i) >= threshold ? x[i] * keep_scale : 0,
 * with threshold = clf_dropout_threshold(p) and keep_scale = 1.0f / (1.0f - p) from the host (one
 * float multiply per element: the same bits as the CPU backend). out may alias x. Grid-stride loop.
 */
__kernel void dropout(__global float *out, ulong out_off, __global const float *x, ulong x_off,
                      ulong n, ulong seed, uint threshold, float keep_scale)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0))
        out[out_off + i] = dropout_bits(seed, i) >= threshold ? x[x_off + i] * keep_scale : 0.0f;
}

/* dtable: [vocab, dim]; dout: [rows, dim]; ids: I32 [rows].
 *   dtable[ids[r], d] += scale * dout[r, d], r = 0, 1, ..., rows - 1 in that order
 * One work-item per column d walks the rows in order, so rows sharing an id add up in
 * increasing r, with no atomics; out-of-range ids are skipped. Global: dim rounded up. */
__kernel void embed_backward(__global float *dtable, ulong dtable_off, __global const float *dout,
                             ulong dout_off, __global const int *ids, ulong ids_off, int rows,
                             int dim, int vocab, float scale)
{
    const int d = get_global_id(0);
    if (d >= dim)
        return;
    for (int r = 0; r < rows; r++) {
        const int id = ids[ids_off + r];
        if (id < 0 || id >= vocab)
            continue;
        __global float *t = dtable + dtable_off + (ulong)id * dim + d;
        *t += scale * dout[dout_off + (ulong)r * dim + d];
    }
}

/* loss: [rows]; dlogits, logits: [rows, cols]; targets: I32 [rows]. One work-group per row.
 *   lp = log_softmax(logits[r,:]), t = targets[r]
 *   loss[r] = -(1 - ls) lp[t] - (ls / cols) sum_j lp[j]
 *   dlogits[r,j] = grad_scale * (softmax_j - (1 - ls) [j == t] - ls / cols)
 * Rows with t == ignore_index or t outside [0, cols) get loss 0 and zero gradients.
 * sum_j lp[j] = sum_j (x_j - max) - cols * log(sum_j exp(x_j - max)): both terms <= 0, so
 * nothing cancels. dlogits (optional) may alias logits: each work-item reads and then
 * overwrites only its own columns (c = lid + i * wg), logits[t] included. red: [wg]. */
__kernel void cross_entropy(__global float *loss, ulong loss_off, __global float *dlogits,
                            ulong dlogits_off, int has_dlogits, __global const float *logits,
                            ulong logits_off, __global const int *targets, ulong targets_off,
                            int cols, int ignore_index, float ls, float grad_scale,
                            __local float *red)
{
    const ulong r = get_group_id(0), row = r * (ulong)cols;
    const int lid = get_local_id(0), wg = get_local_size(0);
    __global const float *xr = logits + logits_off + row;
    __global float *dr = dlogits + dlogits_off + row;
    const int t = targets[targets_off + r];

    if (t == ignore_index || t < 0 || t >= cols) { /* the whole group leaves: no barrier */
        if (has_dlogits)
            for (int c = lid; c < cols; c += wg)
                dr[c] = 0.0f;
        if (lid == 0)
            loss[loss_off + r] = 0.0f;
        return;
    }
    /* Only the work-item that owns column t reads xr[t] and writes the loss: dlogits may
     * alias logits, and that work-item alone overwrites xr[t] (below, after its read). A
     * read of xr[t] by any other work-item would race with that write (the barriers of
     * wg_max and wg_sum fence local memory only). */
    const int owns_t = lid == t % wg;
    const float xt = owns_t ? xr[t] : 0.0f;
    float m = -INFINITY;
    for (int c = lid; c < cols; c += wg)
        m = fmax(m, xr[c]);
    m = wg_max(red, m);
    float se = 0.0f, sx = 0.0f;
    for (int c = lid; c < cols; c += wg) {
        const float d = xr[c] - m;
        se += exp(d);
        sx += d;
    }
    se = wg_sum(red, se);
    sx = wg_sum(red, sx);
    const float log_se = log(se);
    const float smooth = ls / (float)cols;
    if (owns_t)
        loss[loss_off + r] =
            -(1.0f - ls) * ((xt - m) - log_se) - smooth * (sx - (float)cols * log_se);
    if (has_dlogits)
        for (int c = lid; c < cols; c += wg) {
            const float p = exp(xr[c] - m) / se;
            dr[c] = grad_scale * (p - (c == t ? 1.0f - ls : 0.0f) - smooth);
        }
}
