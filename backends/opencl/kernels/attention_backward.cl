/* attention_backward.cl - the backward of attention.cl's scaled dot-product attention.
 *
 * With s_ij = scale * q_i . k_j (exactly CLF_MASKED_SCORE where (i, j) is masked, the
 * forward's rule), P = softmax_j(s), dP_ij = dout_i . v_j:
 *   D_i   = sum_j P_ij dP_ij
 *   dS_ij = P_ij (dP_ij - D_i), or 0 where masked (masked_fill passes no gradient)
 *   dq_i  = scale * sum_j dS_ij k_j;  dk_j = scale * sum_i dS_ij q_i;  dv_j = sum_i P_ij dout_i
 * Nothing is saved by the forward, so P is recomputed from q and k. Two kernels, no atomics:
 * every output element is written by one work-item and every sum runs in a fixed order, so
 * the result is the same bits run after run:
 *   attention_backward_query, one work-group per (query i, head h, batch b): the row's
 *     softmax statistics, D_i, and dq_i; saves (m_i, l_i, D_i) in stats;
 *   attention_backward_key, one work-group per (key j, head h, batch b): dk_j and dv_j,
 *     with P_ij = exp(s_ij - m_i) / l_i from stats.
 * stats: [batch, heads, q_len, 3] = (row max m, sum of exp(s - m) l, D). The row's
 * log-sum-exp m + log(l) is not stored as one number: a fully masked row has m = -1e9,
 * where adding log(l) is lost to rounding (the ulp of 1e9 is 64) and every P would be 1
 * instead of 1 / kv_len. Offsets and strides are in elements; dq has q's layout, dk k's
 * and dv v's, and only the head_dim columns of this head are written.
 * Dropout (drop_threshold != 0; see attention.cl): with the forward's factor
 * r_ij = dropout_keep(drop_seed, e, drop_threshold, drop_scale) of the same element
 * e = ((b * heads + h) * q_len + i) * kv_len + j,
 *   dP_ij = (dout_i . v_j) * r_ij,  dv_j = sum_i P_ij r_ij dout_i
 * and D, dS, dq, dk as above. */

/* The arguments both kernels take first, in this order (the host sets them by index);
 * other_len is kv_len for the query kernel and q_len for the key kernel (the group count
 * in x gives the kernel's own length). */
#define ATTENTION_BACKWARD_ARGS(other_len)                                                         \
    __global const float *q, ulong q_off, ulong q_ld, ulong q_bstride, __global const float *k,    \
        ulong k_off, ulong k_ld, __global const float *v, ulong v_off, ulong v_ld,                 \
        ulong kv_bstride, __global const float *dout, ulong dout_off, ulong dout_ld,               \
        ulong dout_bstride, __global const int *key_mask, ulong mask_off, ulong mask_stride,       \
        int has_mask, int other_len, int head_dim, int causal, int q_pos0, float scale,            \
        ulong drop_seed, uint drop_threshold, float drop_scale

/* What both kernels declare first: own (the query or key of this work-group) and own_len
 * (their count), the head h and batch entry b, lid and wg, and qb, db, kb, vb: row 0 of
 * q, dout, k and v of entry b at this head's columns. */
#define ATTENTION_BACKWARD_START(own, own_len)                                                     \
    const int own = get_group_id(0), h = get_group_id(1), b = get_group_id(2);                     \
    const int own_len = get_num_groups(0), heads = get_num_groups(1);                              \
    const int lid = get_local_id(0), wg = get_local_size(0);                                       \
    const ulong hd = (ulong)h * head_dim;                                                          \
    __global const float *qb = q + q_off + b * q_bstride + hd;                                     \
    __global const float *db = dout + dout_off + b * dout_bstride + hd;                            \
    __global const float *kb = k + k_off + b * kv_bstride + hd;                                    \
    __global const float *vb = v + v_off + b * kv_bstride + hd;

/* The forward's mask rule (attention.cl). */
int attention_backward_masked(__global const int *key_mask, ulong mask_base, int has_mask,
                              int causal, int q_pos0, int i, int j)
{
    return (has_mask && key_mask[mask_base + j] == 0) || (causal && j > q_pos0 + i);
}

/* a . b over n elements, one of them in local memory (the row this work-group owns). */
float attention_backward_dot(__local const float *a, __global const float *b, int n)
{
    float s = 0.0f;
    for (int d = 0; d < n; d++)
        s += a[d] * b[d];
    return s;
}

/* P_ij = exp(s_ij - m_i) / l_i of an unmasked key: qs = q_i, kr = k_j. */
float attention_backward_p(__local const float *qs, __global const float *kr, int head_dim,
                           float scale, float row_m, float row_l)
{
    return exp(scale * attention_backward_dot(qs, kr, head_dim) - row_m) / row_l;
}

/* dP_ij = (dout_i . v_j), times the forward's dropout factor of element e when dropout is
 * on: dos = dout_i, vr = v_j. */
float attention_backward_dp(__local const float *dos, __global const float *vr, int head_dim,
                            ulong drop_seed, ulong e, uint drop_threshold, float drop_scale)
{
    float dp = attention_backward_dot(dos, vr, head_dim);
    if (drop_threshold)
        dp *= dropout_keep(drop_seed, e, drop_threshold, drop_scale);
    return dp;
}

/* Local scratch: qs, dos, acc [head_dim] each (q_i, dout_i, the dq accumulator);
 * ds, red [wg] each. */
__kernel void attention_backward_query(ATTENTION_BACKWARD_ARGS(kv_len), __global float *stats,
                                       __global float *dq, ulong dq_off, __local float *qs,
                                       __local float *dos, __local float *acc, __local float *ds,
                                       __local float *red)
{
    ATTENTION_BACKWARD_START(i, q_len)
    __global const float *qr = qb + i * q_ld;
    __global const float *dr = db + i * dout_ld;
    const ulong mask_base = mask_off + b * mask_stride;
    const ulong drop_row = (((ulong)b * heads + h) * q_len + i) * kv_len;

    for (int d = lid; d < head_dim; d += wg) {
        qs[d] = qr[d];
        dos[d] = dr[d];
        acc[d] = 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* 1. max and sum of exp over the row: each work-item keeps a running (m, l) over its
     * keys j = lid, lid + wg, ..., then the group rescales them to the common max */
    float m = -INFINITY, l = 0.0f;
    for (int j = lid; j < kv_len; j += wg) {
        const float s =
            attention_backward_masked(key_mask, mask_base, has_mask, causal, q_pos0, i, j)
                ? CLF_MASKED_SCORE
                : scale * attention_backward_dot(qs, kb + j * k_ld, head_dim);
        if (s > m) {
            l = l * exp(m - s) + 1.0f; /* exp(-inf) = 0 on the first key */
            m = s;
        } else {
            l += exp(s - m);
        }
    }
    const float row_m = wg_max(red, m); /* finite: kv_len >= 1 */
    const float row_l = wg_sum(red, l > 0.0f ? l * exp(m - row_m) : 0.0f);

    /* 2. D = sum_j P_ij dP_ij. Masked keys are left out: their P is exactly 0 in a row with
     * an unmasked key, and in a fully masked row D is never used (every dS is 0). */
    float dsum = 0.0f;
    for (int j = lid; j < kv_len; j += wg) {
        if (attention_backward_masked(key_mask, mask_base, has_mask, causal, q_pos0, i, j))
            continue;
        const float p = attention_backward_p(qs, kb + j * k_ld, head_dim, scale, row_m, row_l);
        const float dp = attention_backward_dp(dos, vb + j * v_ld, head_dim, drop_seed,
                                               drop_row + j, drop_threshold, drop_scale);
        dsum += p * dp;
    }
    const float row_d = wg_sum(red, dsum);

    /* 3. dq = scale * sum_j dS_ij k_j, keys in tiles of wg: work-item lid finds dS for key
     * j0 + lid, then each work-item sums its columns d over the tile in key order */
    for (int j0 = 0; j0 < kv_len; j0 += wg) {
        const int j = j0 + lid;
        float g = 0.0f;
        if (j < kv_len &&
            !attention_backward_masked(key_mask, mask_base, has_mask, causal, q_pos0, i, j)) {
            const float p =
                attention_backward_p(qs, kb + j * k_ld, head_dim, scale, row_m, row_l);
            const float dp = attention_backward_dp(dos, vb + j * v_ld, head_dim, drop_seed,
                                                   drop_row + j, drop_threshold, drop_scale);
            g = p * (dp - row_d);
        }
        ds[lid] = g;
        barrier(CLK_LOCAL_MEM_FENCE);
        const int nt = min(wg, kv_len - j0);
        for (int d = lid; d < head_dim; d += wg) {
            float a = acc[d];
            for (int t = 0; t < nt; t++)
                a += ds[t] * kb[(j0 + t) * k_ld + d];
            acc[d] = a; /* only this work-item touches acc[d] */
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* ds is refilled by the next tile */
    }
    __global float *o = dq + dq_off + b * q_bstride + i * q_ld + hd;
    for (int d = lid; d < head_dim; d += wg)
        o[d] = scale * acc[d];
    if (lid == 0) {
        __global float *st = stats + (((ulong)b * heads + h) * q_len + i) * 3;
        st[0] = row_m;
        st[1] = row_l;
        st[2] = row_d;
    }
}

/* Local scratch: ks, vs, acck, accv [head_dim] each (k_j, v_j, the dk and dv
 * accumulators); p (dv's weights), ds [wg] each. */
__kernel void attention_backward_key(ATTENTION_BACKWARD_ARGS(q_len),
                                     __global const float *stats, __global float *dk,
                                     ulong dk_off, __global float *dv, ulong dv_off,
                                     __local float *ks, __local float *vs, __local float *acck,
                                     __local float *accv, __local float *p, __local float *ds)
{
    ATTENTION_BACKWARD_START(j, kv_len)
    __global const float *kr = kb + j * k_ld;
    __global const float *vr = vb + j * v_ld;
    __global const float *sb = stats + ((ulong)b * heads + h) * q_len * 3;
    const int key_off = has_mask && key_mask[mask_off + b * mask_stride + j] == 0;

    for (int d = lid; d < head_dim; d += wg) {
        ks[d] = kr[d];
        vs[d] = vr[d];
        acck[d] = 0.0f;
        accv[d] = 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* queries in tiles of wg: work-item lid finds P and dS for query i0 + lid, then each
     * work-item sums its columns d over the tile in query order */
    for (int i0 = 0; i0 < q_len; i0 += wg) {
        const int i = i0 + lid;
        float pi = 0.0f, g = 0.0f;
        if (i < q_len) {
            __global const float *st = sb + (ulong)i * 3;
            const int masked = key_off || (causal && j > q_pos0 + i);
            const float s = masked ? CLF_MASKED_SCORE
                                   : scale * attention_backward_dot(ks, qb + i * q_ld, head_dim);
            pi = exp(s - st[0]) / st[1];
            const float r =
                drop_threshold
                    ? dropout_keep(drop_seed, (((ulong)b * heads + h) * q_len + i) * kv_len + j,
                                   drop_threshold, drop_scale)
                    : 1.0f;
            if (!masked) {
                float dp = attention_backward_dot(vs, db + i * dout_ld, head_dim);
                if (drop_threshold)
                    dp *= r;
                g = pi * (dp - st[2]);
            }
            if (drop_threshold)
                pi *= r; /* dv's weight */
        }
        p[lid] = pi;
        ds[lid] = g;
        barrier(CLK_LOCAL_MEM_FENCE);
        const int nt = min(wg, q_len - i0);
        for (int d = lid; d < head_dim; d += wg) {
            float ak = acck[d], av = accv[d];
            for (int t = 0; t < nt; t++) {
                ak += ds[t] * qb[(i0 + t) * q_ld + d];
                av += p[t] * db[(i0 + t) * dout_ld + d];
            }
            acck[d] = ak;
            accv[d] = av;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    __global float *ok = dk + dk_off + b * kv_bstride + j * k_ld + hd;
    __global float *ov = dv + dv_off + b * kv_bstride + j * v_ld + hd;
    for (int d = lid; d < head_dim; d += wg) {
        ok[d] = scale * acck[d];
        ov[d] = accv[d];
    }
}
