/* attention.cl - scaled dot-product attention, heads split from the feature dim.
 *
 * For query i of head h in batch b (one work-group each; global (q_len * wg, heads, batch)):
 *   q = q[b*q_bstride + i*q_ld + h*head_dim + 0..head_dim)
 *   s_j = scale * q . k_j, or exactly CLF_MASKED_SCORE where masked:
 *         (has_mask && key_mask[b*mask_stride + j] == 0) || (causal && j > q_pos0 + i)
 *   out[b*out_bstride + i*out_ld + h*head_dim + d] = sum_j w_j * v_j[d]
 *   w_j = softmax(s)_j, or with dropout (drop_threshold != 0)
 *   w_j = softmax(s)_j * dropout_keep(drop_seed, e, drop_threshold, drop_scale),
 *         e = ((b * heads + h) * q_len + i) * kv_len + j
 * drop_threshold = clf_dropout_threshold(p) and drop_scale = 1.0f / (1.0f - p) come from
 * the host; threshold 0 keeps every element (and then the scale is 1.0f), so it means off.
 * A fully masked row has all scores equal to -1e9 and so uniform weights, as masked_fill
 * gives in PyTorch. Offsets and strides are in elements.
 * The forward kernels also read keys and values through a row table (has_rows;
 * clf_attention_args.kv_rows): key j of batch entry b is then row j of entry
 * kv_rows[rows_off + b*rows_ld + j], clamped to [0, kv_entries), instead of entry b.
 * With has_new (clf_attention_args.k_new; q_len = 1) they first write this step's keys and
 * values, row new_pos of entry b: each work-group its own head, before it reads a key.
 * With has_pos (clf_attention_args.pos_add) p = pos_add[pos_off], clamped to [0, pos_max],
 * is added to kv_len, q_pos0 and new_pos first. */

/* Score of key j for the query held in qs[head_dim]; the mask rule above. */
float attention_score(__local const float *qs, __global const float *kj, int head_dim, float scale,
                      int masked)
{
    if (masked)
        return CLF_MASKED_SCORE;
    float s = 0.0f;
    for (int d = 0; d < head_dim; d++)
        s += qs[d] * kj[d];
    return s * scale;
}

/* The element offset of row j of the key/value entry batch entry b reads (see above). */
ulong kv_row(__global const int *kv_rows, ulong rows_base, int has_rows, int kv_entries,
             ulong kv_bstride, int b, int j, ulong ld)
{
    const int e = has_rows ? clamp(kv_rows[rows_base + j], 0, kv_entries - 1) : b;
    return (ulong)e * kv_bstride + (ulong)j * ld;
}

int attention_masked(__global const int *key_mask, ulong mask_base, int has_mask, int causal,
                     int q_pos0, int i, int j)
{
    return (has_mask && key_mask[mask_base + j] == 0) || (causal && j > q_pos0 + i);
}

/* Head h (its elements hd..hd+head_dim) of row new_pos of entry b's keys and values from
 * row b of k_new and v_new (see above); the barrier makes the writes visible to the
 * work-group, the only one that reads them. Called by every work-item when has_new. */
void attention_append(__global float *k, ulong k_off, ulong k_ld, __global float *v, ulong v_off,
                      ulong v_ld, ulong kv_bstride, __global const float *k_new, ulong kn_off,
                      __global const float *v_new, ulong vn_off, ulong new_ld, int new_pos, int b,
                      ulong hd, int head_dim, int lid, int wg)
{
    const ulong entry = (ulong)b * kv_bstride + hd, src = (ulong)b * new_ld + hd;
    __global float *kd = k + k_off + entry + (ulong)new_pos * k_ld;
    __global float *vd = v + v_off + entry + (ulong)new_pos * v_ld;
    for (int d = lid; d < head_dim; d += wg) {
        kd[d] = k_new[kn_off + src + d];
        vd[d] = v_new[vn_off + src + d];
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
}

/* What both forward kernels declare first: the work-group's query i, head h and batch
 * entry b, its lid and wg, drop_row (dropout's e of key 0 of the row), qr (q_i of this
 * head), kb and vb (keys and values from here at kv_row(.., j, ld): entry b's rows, or the
 * table's), and the bases of the row table and the mask. */
#define ATTENTION_ROW_START                                                                        \
    if (has_pos) {                                                                                 \
        const int p_add = clamp(pos_add[pos_off], 0, pos_max);                                     \
        kv_len += p_add;                                                                           \
        q_pos0 += p_add;                                                                           \
        new_pos += p_add;                                                                          \
    }                                                                                              \
    const int i = get_group_id(0), h = get_group_id(1), b = get_group_id(2);                       \
    const int q_len = get_num_groups(0), heads = get_num_groups(1);                                \
    const int lid = get_local_id(0), wg = get_local_size(0);                                       \
    const ulong drop_row = (((ulong)b * heads + h) * q_len + i) * kv_len;                          \
    const ulong hd = (ulong)h * head_dim;                                                          \
    __global const float *qr = q + q_off + b * q_bstride + i * q_ld + hd;                          \
    __global const float *kb = k + k_off + hd;                                                     \
    __global const float *vb = v + v_off + hd;                                                     \
    const ulong rows_base = rows_off + (ulong)b * rows_ld;                                         \
    const ulong mask_base = mask_off + b * mask_stride;                                            \
    if (has_new)                                                                                   \
        attention_append(k, k_off, k_ld, v, v_off, v_ld, kv_bstride, k_new, kn_off, v_new, vn_off, \
                         new_ld, new_pos, b, hd, head_dim, lid, wg);

/* Fused path: keys in tiles of wg (one key per work-item), online softmax (running max m,
 * running sum l, rescaled accumulator acc), so no [q_len, kv_len] matrix is ever stored.
 * Local scratch: qs [head_dim], acc [head_dim], p [wg], red [wg]. */
__kernel void attention(__global const float *q, ulong q_off, ulong q_ld, ulong q_bstride,
                        __global float *k, ulong k_off, ulong k_ld, __global float *v,
                        ulong v_off, ulong v_ld, ulong kv_bstride, __global float *out,
                        ulong out_off, ulong out_ld, ulong out_bstride,
                        __global const int *key_mask, ulong mask_off, ulong mask_stride,
                        int has_mask, int kv_len, int head_dim, int causal, int q_pos0, float scale,
                        ulong drop_seed, uint drop_threshold, float drop_scale,
                        __global const int *kv_rows, ulong rows_off, ulong rows_ld, int has_rows,
                        int kv_entries, __global const float *k_new, ulong kn_off,
                        __global const float *v_new, ulong vn_off, ulong new_ld, int new_pos,
                        int has_new, __global const int *pos_add, ulong pos_off, int has_pos,
                        int pos_max, __local float *qs, __local float *acc, __local float *p,
                        __local float *red)
{
    ATTENTION_ROW_START

    for (int d = lid; d < head_dim; d += wg) {
        qs[d] = qr[d];
        acc[d] = 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    float m = -INFINITY, l = 0.0f;
    for (int j0 = 0; j0 < kv_len; j0 += wg) {
        const int j = j0 + lid;
        const int valid = j < kv_len;
        float s = -INFINITY; /* past the end: no weight at all (unlike a masked key) */
        if (valid)
            s = attention_score(
                qs, kb + kv_row(kv_rows, rows_base, has_rows, kv_entries, kv_bstride, b, j, k_ld),
                head_dim, scale,
                attention_masked(key_mask, mask_base, has_mask, causal, q_pos0, i, j));
        const float m_new = fmax(m, wg_max(red, s)); /* finite: the tile has a valid key */
        const float pj = valid ? exp(s - m_new) : 0.0f;
        /* dropped keys leave acc but not the softmax's sum l; the scale comes at the end */
        p[lid] = drop_threshold && valid && dropout_bits(drop_seed, drop_row + j) < drop_threshold
                     ? 0.0f
                     : pj;
        const float corr = exp(m - m_new); /* 0 on the first tile (m = -inf) */
        l = l * corr + wg_sum(red, pj);    /* wg_sum's barriers also publish p */
        const int nt = min(wg, kv_len - j0);
        for (int d = lid; d < head_dim; d += wg) {
            float a = acc[d] * corr;
            for (int t = 0; t < nt; t++)
                a += p[t] * vb[kv_row(kv_rows, rows_base, has_rows, kv_entries, kv_bstride, b,
                                      j0 + t, v_ld) +
                               d];
            acc[d] = a; /* only this work-item touches acc[d] */
        }
        m = m_new;
        /* the next tile's wg_max barrier keeps p alive until everyone has used it */
    }
    __global float *o = out + out_off + b * out_bstride + i * out_ld + hd;
    for (int d = lid; d < head_dim; d += wg)
        o[d] = drop_threshold ? acc[d] / l * drop_scale : acc[d] / l;
}

/* Path used when the probabilities are wanted: probs [batch, heads, q_len, kv_len]
 * contiguous holds the scores, then the softmax (before dropout), then out = w . v.
 * Local scratch: qs [head_dim], red [wg]; with dropout they are reused for the output's
 * accumulators and a tile of wg weights (one hash per key, not per key and column). */
__kernel void attention_probs(__global const float *q, ulong q_off, ulong q_ld, ulong q_bstride,
                              __global float *k, ulong k_off, ulong k_ld, __global float *v,
                              ulong v_off, ulong v_ld, ulong kv_bstride,
                              __global float *out, ulong out_off, ulong out_ld, ulong out_bstride,
                              __global const int *key_mask, ulong mask_off, ulong mask_stride,
                              int has_mask, int kv_len, int head_dim, int causal, int q_pos0,
                              float scale, ulong drop_seed, uint drop_threshold, float drop_scale,
                              __global const int *kv_rows, ulong rows_off, ulong rows_ld,
                              int has_rows, int kv_entries, __global const float *k_new,
                              ulong kn_off, __global const float *v_new, ulong vn_off,
                              ulong new_ld, int new_pos, int has_new,
                              __global const int *pos_add, ulong pos_off, int has_pos, int pos_max,
                              __global float *probs,
                              ulong probs_off, __local float *qs, __local float *red)
{
    ATTENTION_ROW_START
    __global float *pr = probs + probs_off + drop_row;

    for (int d = lid; d < head_dim; d += wg)
        qs[d] = qr[d];
    barrier(CLK_LOCAL_MEM_FENCE);

    float m = -INFINITY;
    for (int j = lid; j < kv_len; j += wg) {
        const float s =
            attention_score(qs,
                            kb + kv_row(kv_rows, rows_base, has_rows, kv_entries, kv_bstride, b,
                                        j, k_ld),
                            head_dim, scale,
                            attention_masked(key_mask, mask_base, has_mask, causal, q_pos0, i, j));
        pr[j] = s;
        m = fmax(m, s);
    }
    m = wg_max(red, m);
    float sum = 0.0f;
    for (int j = lid; j < kv_len; j += wg) {
        const float e = exp(pr[j] - m);
        pr[j] = e;
        sum += e;
    }
    sum = wg_sum(red, sum);
    for (int j = lid; j < kv_len; j += wg)
        pr[j] = pr[j] / sum;
    /* every work-item reads every probability below */
    barrier(CLK_GLOBAL_MEM_FENCE);

    __global float *o = out + out_off + b * out_bstride + i * out_ld + hd;
    if (!drop_threshold) {
        for (int d = lid; d < head_dim; d += wg) {
            float a = 0.0f;
            for (int j = 0; j < kv_len; j++)
                a += pr[j] *
                     vb[kv_row(kv_rows, rows_base, has_rows, kv_entries, kv_bstride, b, j, v_ld) +
                        d];
            o[d] = a;
        }
        return;
    }
    /* qs is free since the scores (the reductions' barriers separate its last read) */
    for (int d = lid; d < head_dim; d += wg)
        qs[d] = 0.0f;
    for (int j0 = 0; j0 < kv_len; j0 += wg) {
        const int j = j0 + lid;
        if (j < kv_len) /* this work-item wrote pr[j] itself */
            red[lid] = pr[j] * dropout_keep(drop_seed, drop_row + j, drop_threshold, drop_scale);
        barrier(CLK_LOCAL_MEM_FENCE);
        const int nt = min(wg, kv_len - j0);
        for (int d = lid; d < head_dim; d += wg) {
            float a = qs[d];
            for (int t = 0; t < nt; t++)
                a += red[t] * vb[kv_row(kv_rows, rows_base, has_rows, kv_entries, kv_bstride,
                                        b, j0 + t, v_ld) +
                                 d];
            qs[d] = a; /* only this work-item touches qs[d] */
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* red is refilled by the next tile */
    }
    for (int d = lid; d < head_dim; d += wg)
        o[d] = qs[d];
}
