/* softmax.cl - row softmax / log_softmax, argmax, topk and the beam choice made from it. */

/* out, x: [rows, cols]; one work-group per row; out may alias x (each work-item reads its
 * columns before writing them, and only its own).
 *   softmax:     out = exp(x - max) / sum(exp(x - max))
 *   log_softmax: out = (x - max) - log(sum(exp(x - max)))
 * Offsets are in elements. */
/* The row's max m and sum s of exp(x - m), reduced over the work-group (every work-item
 * calls it: it holds barriers); softmax and topk's log_softmax form share it. */
static float row_max_sum(__global const float *xr, int cols, int lid, int wg, __local float *red,
                         float *sum)
{
    float m = -INFINITY;
    for (int c = lid; c < cols; c += wg)
        m = fmax(m, xr[c]);
    m = wg_max(red, m);
    float s = 0.0f;
    for (int c = lid; c < cols; c += wg)
        s += exp(xr[c] - m);
    *sum = wg_sum(red, s);
    return m;
}

__kernel void softmax(__global float *out, ulong out_off, __global const float *x, ulong x_off,
                      int cols, int log_out, __local float *red)
{
    const ulong row = get_group_id(0) * (ulong)cols;
    const int lid = get_local_id(0), wg = get_local_size(0);
    __global const float *xr = x + x_off + row;
    __global float *o = out + out_off + row;

    float s;
    const float m = row_max_sum(xr, cols, lid, wg, red, &s);
    if (log_out) {
        const float ls = log(s);
        for (int c = lid; c < cols; c += wg)
            o[c] = (xr[c] - m) - ls;
    } else {
        for (int c = lid; c < cols; c += wg)
            o[c] = exp(xr[c] - m) / s;
    }
}

/* a (value av at column ai) goes before b in topk's order: the larger value first, NaN
 * after every number, equal values by the smaller column. */
static inline int topk_before(float av, int ai, float bv, int bi)
{
    if (isnan(av))
        return isnan(bv) && ai < bi;
    if (isnan(bv))
        return 1;
    return av > bv || (av == bv && ai < bi);
}

/* The work-group's candidates (redv[i], redi[i]; redi < 0: none) reduced into slot 0: the
 * larger value, equal values by the smaller index; with nan_last, NaN after every number
 * (topk's order). Every work-item calls it (it holds barriers). */
static void reduce_best(__local float *redv, __local int *redi, int lid, int wg, int nan_last)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = wg / 2; s > 0; s /= 2) {
        if (lid < s) {
            const float v = redv[lid + s], w = redv[lid];
            const int i = redi[lid + s], j = redi[lid];
            if (i >= 0 &&
                (j < 0 || (nan_last ? topk_before(v, i, w, j) : v > w || (v == w && i < j)))) {
                redv[lid] = v;
                redi[lid] = i;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
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
    reduce_best(redv, redi, lid, wg, 0);
    if (lid == 0)
        out[out_off + r] = redi[0] < 0 ? 0 : redi[0];
}

/* val: [rows, k]; idx: I32 [rows, k]; x: [rows, cols]; base: [rows] when has_base (else 0).
 * Row r's k best pairs (base[r] + x[r, c], c), best first (clf_topk_args); with log_in,
 * (base[r] + ((x[r, c] - m) - log(s)), c): the log_softmax as softmax writes it. One
 * work-group a row, k rounds over the row: round j picks the best pair that goes after round
 * j-1's. redv, redi: [work-group size] scratch. */
__kernel void topk(__global float *val, ulong val_off, __global int *idx, ulong idx_off,
                   __global const float *x, ulong x_off, __global const float *base,
                   ulong base_off, int has_base, int log_in, int cols, int k,
                   __local float *redv, __local int *redi)
{
    const ulong r = get_group_id(0);
    const int lid = get_local_id(0), wg = get_local_size(0);
    __global const float *xr = x + x_off + r * (ulong)cols;
    const float b = has_base ? base[base_off + r] : 0.0f;
    float m = 0.0f, ls = 0.0f;
    if (log_in) {
        float s;
        m = row_max_sum(xr, cols, lid, wg, redv, &s);
        ls = log(s); /* the reductions end on a barrier: redv is free for the rounds */
    }
    float pv = 0.0f;
    int pi = -1; /* the previous round's pick; none before the first */
    for (int j = 0; j < k; j++) {
        float best = 0.0f;
        int bi = -1;
        for (int c = lid; c < cols; c += wg) {
            const float v = log_in ? b + ((xr[c] - m) - ls) : b + xr[c];
            if ((pi < 0 || topk_before(pv, pi, v, c)) && (bi < 0 || topk_before(v, c, best, bi))) {
                best = v;
                bi = c;
            }
        }
        redv[lid] = best;
        redi[lid] = bi;
        reduce_best(redv, redi, lid, wg, 1);
        pv = redv[0];
        pi = redi[0];
        if (lid == 0) {
            val[val_off + r * (ulong)k + j] = pv;
            idx[idx_off + r * (ulong)k + j] = pi;
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* every work-item has read redv[0] before the next round */
    }
}

/* What beam_choose holds per sentence: 2K <= CLF_TOPK_MAX (clformer/backend.h) choices. */
#define BEAM_CHOICES_MAX 64

/* A beam search's next beams after a step (clf_beam_args), one work-group a sentence:
 * work-item 0 makes the host's choice (core/src/decode/hypotheses.c: the same comparisons
 * in the same order, so the same choices bit for bit) into local memory, then the
 * work-group copies the K beams' row tables from their parents. choices: [n, 2K, 3] I32;
 * ids, base: [n*K]; val, idx: [n*K, top_k]; rows_in, rows_out: [n*K, ld]. */
__kernel void beam_choose(__global int *choices, ulong choices_off, __global int *ids,
                          ulong ids_off, __global int *rows_out, ulong rows_out_off,
                          __global const float *val, ulong val_off, __global const int *idx,
                          ulong idx_off, __global float *base, ulong base_off,
                          __global const int *rows_in, ulong rows_in_off,
                          __global const int *banned, ulong banned_off, int n_banned, int K,
                          int top_k, int eos, int ld, int pos)
{
    __local float lp[BEAM_CHOICES_MAX];
    __local int par[BEAM_CHOICES_MAX], tok[BEAM_CHOICES_MAX], parent[BEAM_CHOICES_MAX];
    const ulong first = get_group_id(0) * (ulong)K;
    const int lid = get_local_id(0), wg = get_local_size(0), n2 = 2 * K;
    if (lid == 0) {
        int have = 0, m = 0, go[BEAM_CHOICES_MAX / 2];
        for (int k = 0; k < K; k++) {
            if (base[base_off + first + k] == -INFINITY) /* a dead beam gives nothing */
                continue;
            for (int j = 0; j < top_k; j++) {
                const ulong e = (first + k) * (ulong)top_k + j;
                const float x = val[val_off + e];
                const int v = idx[idx_off + e];
                int ban = 0;
                for (int b = 0; b < n_banned; b++)
                    ban |= banned[banned_off + b] == v;
                if (ban || (have == n2 && x <= lp[n2 - 1]))
                    continue;
                int i = have < n2 ? have++ : n2 - 1;
                for (; i > 0 && lp[i - 1] < x; i--) { /* after every value not below x */
                    lp[i] = lp[i - 1];
                    par[i] = par[i - 1];
                    tok[i] = tok[i - 1];
                }
                lp[i] = x;
                par[i] = k;
                tok[i] = v;
            }
        }
        __global int *ch = choices + choices_off + first * 6;
        for (int i = 0; i < n2; i++) {
            ch[3 * i] = i < have ? as_int(lp[i]) : 0;
            ch[3 * i + 1] = i < have ? par[i] : -1;
            ch[3 * i + 2] = i < have ? tok[i] : -1;
        }
        for (int i = 0; i < have && m < K; i++)
            if (tok[i] != eos)
                go[m++] = i;
        for (int k = 0; k < K; k++) { /* beams past the m that go on: dead copies of the first */
            const int c = k < m ? go[k] : m > 0 ? go[0] : -1;
            ids[ids_off + first + k] = c >= 0 ? tok[c] : eos;
            base[base_off + first + k] = k < m ? lp[c] : -INFINITY;
            parent[k] = (int)first + (c >= 0 ? par[c] : 0);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = lid; e < K * ld; e += wg) {
        const int k = e / ld, c = e % ld;
        const ulong i = first + k;
        rows_out[rows_out_off + i * (ulong)ld + c] =
            c == pos + 1 ? (int)i : rows_in[rows_in_off + (ulong)parent[k] * (ulong)ld + c];
    }
}
