/* The backward of the CPU attention op (semantics: clformer/backend.h). It recomputes P
 * with the forward's block kernels (cpu_attention.c).
 *
 * Per (batch, head), with P = softmax(masked(scale Q K^T)) recomputed block by block exactly as
 * the forward computes it:
 *   dV = P^T dO
 *   dP = dO V^T,  D_i = sum_j P_ij dP_ij  (= rowsum(dO * O))
 *   dS = P * (dP - D)  on unmasked entries, 0 on masked ones (masked_fill's gradient)
 *   dQ = scale dS K,   dK = scale dS^T Q
 * A fully masked row has uniform P, so V still gets its share of dO, as in PyTorch, but Q
 * and K get nothing from it.
 * With dropout (fwd.dropout_p > 0) the forward's weights are W = P * keep / (1 - p), with
 * the mask of element e = ((b * heads + h) * q_len + i) * kv_len + j drawn again from
 * fwd.dropout_seed (attention_keep), and
 *   dV = W^T dO,  dP = (dO V^T) * keep / (1 - p),  D_i = sum_j P_ij dP_ij
 * while dS, dQ and dK keep the formulas above.
 *
 * One (batch, head) is one task: it alone writes its head's columns of dq, dk and dv, and
 * it sums over queries in a fixed order (blocks of ATTN_R rows, cpu_internal.h), so the
 * result does not depend on the thread count. dK and dV are accumulated in per-thread
 * scratch ([kv_len, head_dim] each, contiguous zero-padded rows) and
 * written once at the end, which leaves every other column of the gradient buffers
 * untouched: dq, dk and dv may be column slices of one [q|k|v] gradient. */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/backend.h"
#include "cpu_internal.h"

/* y [nk][dp] += w^T x over the nr live rows: y[j][d] += sum_{r < nr} w[r][j] x[r][d] for
 * j < nk (a multiple of 4, <= kp: tiles of 4 keys); w [ATTN_R][kp], x [ATTN_R][dp], dp a
 * multiple of ATTN_J. The backward's dK += dS^T Q and dV += W^T dO; the sum over r runs in
 * order. */
static void attn_rows_accumulate(const float *w, int kp, int nk, const float *x, int dp, int nr,
                                 float *y)
{
    for (int j0 = 0; j0 < nk; j0 += 4)
        for (int d0 = 0; d0 < dp; d0 += ATTN_J) {
            float acc[4][ATTN_J];
            for (int jj = 0; jj < 4; jj++)
                for (int dd = 0; dd < ATTN_J; dd++)
                    acc[jj][dd] = y[(size_t)(j0 + jj) * dp + d0 + dd];
            for (int r = 0; r < nr; r++) {
                const float *xr = x + (size_t)r * dp + d0, *wr = w + (size_t)r * kp + j0;
                for (int jj = 0; jj < 4; jj++) {
                    const float wj = wr[jj];
#pragma omp simd
                    for (int dd = 0; dd < ATTN_J; dd++)
                        acc[jj][dd] += wj * xr[dd];
                }
            }
            for (int jj = 0; jj < 4; jj++)
                for (int dd = 0; dd < ATTN_J; dd++)
                    y[(size_t)(j0 + jj) * dp + d0 + dd] = acc[jj][dd];
        }
}

/* 1 when key j is masked for a query whose attn_key_limit is lim: key mask 0 (mask: the
 * batch's [kv_len] I32 mask or NULL) or, causal, j after the query's position. */
static int attn_masked(const int32_t *mask, int lim, int j)
{
    return j >= lim || (mask && mask[j] == 0);
}

/* W and dS of a block's rows: on entry p [ATTN_R][kp] holds P (attn_softmax_rows) and ds
 * the raw dO_i . V_j; on return w holds W_ij = P_ij keep / (1 - p) and ds holds dS_ij =
 * P_ij (dP_ij - D_i), both 0 past the nr live rows and the ext keys. Query i0 + r takes
 * its dropout elements from (e_row + r) * kv_len on. */
static void attn_block_ds(const clf_attention_args *a, attn_dropout dr, const int32_t *mask,
                          uint64_t e_row, int i0, int nr, int ext, int kp, const float *p, float *w,
                          float *ds)
{
    for (int r = 0; r < ATTN_R; r++) {
        const float *pr = p + (size_t)r * kp;
        float *wr = w + (size_t)r * kp;
        float *dsr = ds + (size_t)r * kp;
        if (r >= nr) {
            memset(wr, 0, sizeof(float) * (size_t)kp);
            memset(dsr, 0, sizeof(float) * (size_t)kp);
            continue;
        }
        /* W_ij = P_ij keep / (1 - p); dP_ij = (dO_i . V_j) keep / (1 - p), 0
         * exactly where W_ij = 0 (P_ij = 0, or a dropped element); D_i. */
        const uint64_t e0 = (e_row + r) * (uint64_t)a->kv_len;
        double Di = 0.0;
        for (int j = 0; j < ext; j++) {
            /* P_ij = 0 (masked, or underflowed) needs no hash: W_ij is 0 */
            float keep = dr.on && pr[j] != 0.0f ? attention_keep(&dr, e0 + j) : 1.0f;
            wr[j] = dr.on ? pr[j] * keep : pr[j];
            dsr[j] = wr[j] == 0.0f ? 0.0f : dr.on ? dsr[j] * keep : dsr[j];
            Di += (double)pr[j] * dsr[j];
        }
        /* dS_ij = P_ij (dP_ij - D_i), 0 where masked (masked_fill's gradient) */
        const int lim = attn_key_limit(a, i0 + r);
        for (int j = 0; j < ext; j++)
            dsr[j] = attn_masked(mask, lim, j) || pr[j] == 0.0f
                         ? 0.0f
                         : (float)(pr[j] * ((double)dsr[j] - Di));
        for (int j = ext; j < kp; j++)
            wr[j] = dsr[j] = 0.0f;
    }
}

/* Shapes and formulas: the comment at the top of this file. */
clf_status cpu_attention_backward(clf_backend *be, const clf_attention_backward_args *ba)
{
    CPU_REQUIRE_ARGS("attention_backward", ba);
    /* dropout_p, shape, strides, bounds and aliasing: checked by the core (clformer/ops.h) */
    const clf_attention_args *a = &ba->fwd;
    if (a->batch <= 0)
        return CLF_OK;
    const float *Q = fptr(a->q), *K = fptr(a->k), *V = fptr(a->v), *DO = fptr(ba->dout);
    float *DQ = fptr(ba->dq), *DK = fptr(ba->dk), *DV = fptr(ba->dv);
    const int32_t *M = a->key_mask.buf ? iptr(a->key_mask) : NULL;
    const int B = a->batch, H = a->heads, Tq = a->q_len, Tk = a->kv_len, D = a->head_dim;
    const float scale = a->scale;
    const attn_dropout dr = attention_dropout(a);
    const int kp = attn_round_up(Tk, ATTN_J), dp = attn_round_up(D, ATTN_J);
    const int few = attn_few_queries(a);
    /* per thread (padding: cpu_internal.h): Kt and Vt [D][kp]; K rows [Tk][dp]; dK and dV
     * accumulators [kp][dp]; the query block's Q and dO transposed [D][ATTN_R] and as rows
     * [ATTN_R][dp]; P, W and dP/dS [ATTN_R][kp]; dS transposed [kp][ATTN_R]; dQ
     * [ATTN_R][dp] */
    const size_t per_thread = 2 * (size_t)D * kp + (size_t)Tk * dp + 2 * (size_t)kp * dp +
                              2 * (size_t)D * ATTN_R + 3 * (size_t)ATTN_R * dp +
                              4 * (size_t)ATTN_R * kp;
    float *scratch = malloc(sizeof(float) * (size_t)be->threads * per_thread);
    if (!scratch)
        return clf_error(CLF_ERR_NOMEM, "cpu: attention_backward: cannot allocate scratch");
#pragma omp parallel num_threads(be->threads)
    {
        float *kt = scratch + (size_t)omp_get_thread_num() * per_thread;
        float *vt = kt + (size_t)D * kp, *kr = vt + (size_t)D * kp, *dk = kr + (size_t)Tk * dp;
        float *dv = dk + (size_t)kp * dp, *qt = dv + (size_t)kp * dp,
              *dot = qt + (size_t)D * ATTN_R;
        float *qr = dot + (size_t)D * ATTN_R, *dor = qr + (size_t)ATTN_R * dp;
        float *dq = dor + (size_t)ATTN_R * dp, *p = dq + (size_t)ATTN_R * dp;
        float *w = p + (size_t)ATTN_R * kp, *ds = w + (size_t)ATTN_R * kp;
        float *dst = ds + (size_t)ATTN_R * kp;
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < B * H; bh++) {
            int b = bh / H, h = bh % H;
            const float *kb = K + b * a->kv_bstride + (size_t)h * D;
            const float *vb = V + b * a->kv_bstride + (size_t)h * D;
            const int32_t *mask = M ? M + b * a->key_mask_stride : NULL;
            if (!few)
                attn_pack_t(attn_strided(kb, (size_t)a->k_ld), Tk, D, kp, kt);
            attn_pack_t(attn_strided(vb, (size_t)a->v_ld), Tk, D, kp, vt);
            attn_pack_rows(attn_strided(kb, (size_t)a->k_ld), Tk, D, dp, kr);
            memset(dk, 0, sizeof(float) * (size_t)kp * dp);
            memset(dv, 0, sizeof(float) * (size_t)kp * dp);
            for (int i0 = 0; i0 < Tq; i0 += ATTN_R) {
                const int nr = Tq - i0 < ATTN_R ? Tq - i0 : ATTN_R;
                const float *q = Q + b * a->q_bstride + (size_t)i0 * a->q_ld + (size_t)h * D;
                const float *dO = DO + b * a->out_bstride + (size_t)i0 * a->out_ld + (size_t)h * D;
                attn_pack_rows_t(q, (size_t)a->q_ld, nr, D, qt);
                attn_pack_rows_t(dO, (size_t)a->out_ld, nr, D, dot);
                attn_pack_rows(attn_strided(q, (size_t)a->q_ld), nr, D, dp, qr);
                attn_pack_rows(attn_strided(dO, (size_t)a->out_ld), nr, D, dp, dor);
                /* P, as the forward computes it; raw dO_i . V_j into ds */
                /* the scores of queries i0 .. i0 + nr - 1 need keys j < nk only: causal
                 * masking hides the rest from every row (the limit grows with i) */
                const int nk = attn_key_limit(a, i0 + nr - 1);
                if (few)
                    attn_scores_rows(q, (size_t)a->q_ld, nr, attn_strided(kb, (size_t)a->k_ld), D,
                                     nk, kp, p);
                else
                    attn_rows_mul(qt, kt, (size_t)kp, D, attn_round_up(nk, ATTN_J), nr, p,
                                  (size_t)kp);
                /* P is 0 in columns >= ext (causal), so W, dP and dS are too */
                const int ext = attn_softmax_rows(a, mask, i0, nr, kp, p);
                attn_rows_mul(dot, vt, (size_t)kp, D, attn_round_up(ext, ATTN_J), nr, ds,
                              (size_t)kp);
                attn_block_ds(a, dr, mask, ((uint64_t)b * H + h) * Tq + i0, i0, nr, ext, kp, p, w,
                              ds);
                /* dQ_i = scale sum_j dS_ij K_j; dK_j += dS_ij Q_i; dV_j += W_ij dO_i */
                attn_block_t(ds, kp, dst);
                attn_rows_mul(dst, kr, (size_t)dp, ext, dp, nr, dq, (size_t)dp);
                for (int r = 0; r < nr; r++) {
                    float *out = DQ + b * a->q_bstride + (size_t)(i0 + r) * a->q_ld + (size_t)h * D;
                    for (int d = 0; d < D; d++)
                        out[d] = scale * dq[(size_t)r * dp + d];
                }
                attn_rows_accumulate(ds, kp, attn_round_up(ext, 4), qr, dp, nr, dk);
                attn_rows_accumulate(w, kp, attn_round_up(ext, 4), dor, dp, nr, dv);
            }
            for (int j = 0; j < Tk; j++) {
                float *ok = DK + b * a->kv_bstride + (size_t)j * a->k_ld + (size_t)h * D;
                float *ov = DV + b * a->kv_bstride + (size_t)j * a->v_ld + (size_t)h * D;
                const float *dkj = dk + (size_t)j * dp;
                for (int d = 0; d < D; d++)
                    ok[d] = scale * dkj[d];
                memcpy(ov, dv + (size_t)j * dp, sizeof(float) * (size_t)D);
            }
        }
    }
    free(scratch);
    return CLF_OK;
}
