/* The CPU backend's forward attention (clf_backend_api.attention), and the block kernels
 * that its backward (cpu_attention_backward.c) shares so that the backward's recomputed
 * probabilities are the forward's bits: packing K and V, the register-tiled products, the
 * few-query scores, and the masked, scaled softmax of a block of rows (the layout and
 * constants: cpu_internal.h). Keys and values are read through a table of row pointers
 * (attn_kv_rows), either a batch entry's own rows or those decoding's row table
 * (clf_attention_args.kv_rows) names. A decoding step's few queries take the AVX2 kernels
 * of cpu_attention_avx2.c where the CPU has them. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "clformer/backend.h"
#include "cpu_internal.h"

/* ---- the block kernels (shared with the backward) ---- */

/* xt [D][ATTN_R] <- rows r < nr of x (rows ld apart, D columns), transposed; zero for
 * r >= nr. */
void attn_pack_rows_t(const float *x, size_t ld, int nr, int D, float *xt)
{
    for (int r = 0; r < ATTN_R; r++)
        if (r < nr)
            for (int d = 0; d < D; d++)
                xt[(size_t)d * ATTN_R + r] = x[(size_t)r * ld + d];
        else
            for (int d = 0; d < D; d++)
                xt[(size_t)d * ATTN_R + r] = 0.0f;
}

/* xp [n][dp] <- n rows of x (D columns), zero in columns [D, dp). */
void attn_pack_rows(attn_rows x, int n, int D, int dp, float *xp)
{
    for (int r = 0; r < n; r++) {
        memcpy(xp + (size_t)r * dp, attn_row(x, r), sizeof(float) * (size_t)D);
        for (int d = D; d < dp; d++)
            xp[(size_t)r * dp + d] = 0.0f;
    }
}

/* kt [D][kp] <- the n rows of k (D columns) transposed, zero in columns [n, kp) (kp a
 * multiple of ATTN_J). ATTN_J rows are read side by side, each one sequentially: walking
 * one column down all rows instead would touch rows whose stride (3 * d_model floats in
 * the fused QKV layout) maps them onto a few L1 sets. */
void attn_pack_t(attn_rows k, int n, int D, int kp, float *kt)
{
    for (int j0 = 0; j0 < kp; j0 += ATTN_J) {
        const int nj = n - j0 < ATTN_J ? n - j0 : ATTN_J;
        const float *rw[ATTN_J];
        for (int jj = 0; jj < nj; jj++)
            rw[jj] = attn_row(k, j0 + jj);
        if (nj == ATTN_J) {
            for (int d = 0; d < D; d++)
                for (int jj = 0; jj < ATTN_J; jj++)
                    kt[(size_t)d * kp + j0 + jj] = rw[jj][d];
            continue;
        }
        for (int d = 0; d < D; d++)
            for (int jj = 0; jj < ATTN_J; jj++)
                kt[(size_t)d * kp + j0 + jj] = jj < nj ? rw[jj][d] : 0.0f;
    }
}

/* The register tiles work on ATTN_RT of a block's rows at a time; groups of rows that
 * lie wholly past the block's nr live rows are skipped (decoding has one). */
static int attn_row_groups(int nr)
{
    return (nr + ATTN_RT - 1) / ATTN_RT;
}

/* o [ATTN_R][ldo] = a b for the row groups holding rows < nr: o[r][c] =
 * sum_{k < n} at[k][r] b[k][c] for c < nc (a multiple of ATTN_J); at [n][ATTN_R] is a
 * transposed (a column of ATTN_R values per k, so each k reads ATTN_R adjacent floats),
 * b [n][ldb]. The sum over k runs in order. With at = Q^T and b = Kt it gives the raw
 * scores, with dO^T and Vt the backward's dO V^T (k over head_dim, c over keys); with W^T
 * and V rows the output, with dS^T and K rows the backward's dQ (k over keys, c over
 * head_dim). */
void attn_rows_mul(const float *at, const float *b, size_t ldb, int n, int nc, int nr, float *o,
                   size_t ldo)
{
    for (int g = 0; g < attn_row_groups(nr); g++)
        for (int c0 = 0; c0 < nc; c0 += ATTN_J) {
            float acc[ATTN_RT][ATTN_J] = {{0.0f}};
            for (int k = 0; k < n; k++) {
                const float *bk = b + (size_t)k * ldb + c0;
                const float *ak = at + (size_t)k * ATTN_R + g * ATTN_RT;
                for (int r = 0; r < ATTN_RT; r++) {
                    const float ar = ak[r];
#pragma omp simd
                    for (int cc = 0; cc < ATTN_J; cc++)
                        acc[r][cc] += ar * bk[cc];
                }
            }
            for (int r = 0; r < ATTN_RT; r++)
                for (int cc = 0; cc < ATTN_J; cc++)
                    o[(size_t)(g * ATTN_RT + r) * ldo + c0 + cc] = acc[r][cc];
        }
}

/* s [nr][kp]: s[r][j] = q_r . k_j for r < nr, j < nk; q: rows q_ld apart, D columns. The
 * few-queries counterpart of attn_rows_mul(Q^T, Kt). */
void attn_scores_rows(const float *q, size_t q_ld, int nr, attn_rows k, int D, int nk, int kp,
                      float *s)
{
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < nk; j++) {
            const float *qr = q + (size_t)r * q_ld, *kj = attn_row(k, j);
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int d = 0; d < D; d++)
                dot += qr[d] * kj[d];
            s[(size_t)r * kp + j] = dot;
        }
}

/* st [kp][ATTN_R] <- s [ATTN_R][kp] transposed (the at operand of attn_rows_mul). */
void attn_block_t(const float *s, int kp, float *st)
{
    for (int r = 0; r < ATTN_R; r++)
        for (int j = 0; j < kp; j++)
            st[(size_t)j * ATTN_R + r] = s[(size_t)r * kp + j];
}

/* s [ATTN_R][kp]: on entry the raw dots q_r . k_j of queries i0 + r for keys j <
 * attn_key_limit (the rest is not read); on return P(b, h, i0 + r, j) for r < nr and j <
 * kv_len, the masked (-1e9, as masked_fill), scaled softmax over the keys, and 0 everywhere
 * else (rows >= nr, columns >= kv_len). A fully masked row is uniform, as in PyTorch.
 * Returns n <= kv_len such that P is 0 in every column >= n: the largest causal limit of
 * the rows, or kv_len when a row's masked keys get a nonzero weight (a fully masked row). */
int attn_softmax_rows(const clf_attention_args *a, const int32_t *mask, int i0, int nr, int kp,
                      float *s)
{
    const int Tk = a->kv_len;
    int ext = 0;
    for (int r = 0; r < ATTN_R; r++) {
        float *row = s + (size_t)r * kp;
        if (r >= nr) {
            memset(row, 0, sizeof(float) * (size_t)kp);
            continue;
        }
        const int lim = attn_key_limit(a, i0 + r);
        const float scale = a->scale;
        float mx = -FLT_MAX;
        if (mask) {
#pragma omp simd
            for (int j = 0; j < lim; j++)
                row[j] = mask[j] == 0 ? MASKED_SCORE : row[j] * scale;
        } else {
#pragma omp simd
            for (int j = 0; j < lim; j++)
                row[j] *= scale;
        }
        for (int j = lim; j < Tk; j++)
            row[j] = MASKED_SCORE;
#pragma omp simd reduction(max : mx)
        for (int j = 0; j < Tk; j++)
            mx = row[j] > mx ? row[j] : mx;
        double denom = 0.0;
        for (int j = 0; j < Tk; j++) {
            /* expf underflows to +0 below about -103.98; skipping the call there gives the
             * same bits without its slow underflow path (every masked key of a row that
             * has an unmasked one lands there) */
            float x = row[j] - mx;
            row[j] = x < -104.0f ? 0.0f : expf(x);
            denom += row[j];
        }
        float inv = (float)(1.0 / denom);
#pragma omp simd
        for (int j = 0; j < Tk; j++)
            row[j] *= inv;
        for (int j = Tk; j < kp; j++)
            row[j] = 0.0f;
        /* the weight of a masked key, as computed above */
        int n = MASKED_SCORE - mx < -104.0f ? lim : Tk;
        ext = n > ext ? n : ext;
    }
    return ext;
}

/* The dropout of a's probabilities (attn_dropout, cpu_internal.h). */
attn_dropout attention_dropout(const clf_attention_args *a)
{
    attn_dropout dr = {0, 0, 1.0f, a->dropout_seed};
    dr.threshold = clf_dropout_threshold(a->dropout_p);
    dr.on = dr.threshold != 0;
    if (dr.on)
        dr.scale = 1.0f / (1.0f - a->dropout_p);
    return dr;
}

/* ---- the forward ---- */

/* kr[j], vr[j] <- where key and value j < a->kv_len of batch entry b, head columns hd..,
 * start: entry b's rows, or with a row table (kv_rows) entry tab[j]'s, clamped to [0,
 * kv_entries) (the core checked that span; the table's contents are the caller's). */
static void attn_kv_rows(const clf_attention_args *a, const float *K, const float *V,
                         const int32_t *tab, int b, size_t hd, const float **kr, const float **vr)
{
    for (int j = 0; j < a->kv_len; j++) {
        int32_t e = b;
        if (tab) {
            e = tab[(size_t)b * a->kv_rows_ld + j];
            e = e < 0 ? 0 : e >= a->kv_entries ? a->kv_entries - 1 : e;
        }
        const size_t base = (size_t)e * a->kv_bstride + hd;
        kr[j] = K + base + (size_t)j * a->k_ld;
        vr[j] = V + base + (size_t)j * a->v_ld;
    }
}

/* a, or where trim is set and the entry's key mask has an unmasked key, a with kv_len cut
 * after its last one, rounded up to ATTN_J keys: the keys past it get weight +0 exactly
 * (their exp underflows beside an unmasked key's), and every key kept is scored in the
 * same group as without the cut (cpu_attn_scores_avx2 takes 4 at a time), so leaving them
 * out changes no bit of the output. Decoding's rows (a step's self-attention reads the
 * longest history, cross-attention the longest source, the rest masked) then cost about
 * their own keys only. */
static clf_attention_args trimmed_keys(const clf_attention_args *a, int trim, const int32_t *mask)
{
    clf_attention_args t = *a;
    if (!trim || !mask)
        return t;
    int n = a->kv_len;
    while (n > 0 && mask[n - 1] == 0)
        n--;
    n = attn_round_up(n, ATTN_J);
    if (n > 0 && n < a->kv_len)
        t.kv_len = n;
    return t;
}

/* The few-query scores (attn_few_queries): the AVX2 kernel with avx2 set (x86 only, no
 * dropout), else attn_scores_rows. */
static void few_scores(int avx2, const float *q, size_t q_ld, int nr, const float *const *k, int D,
                       int nk, int kp, float *s)
{
#if CPU_X86
    if (avx2) {
        cpu_attn_scores_avx2(q, q_ld, nr, k, D, nk, kp, s);
        return;
    }
#else
    (void)avx2;
#endif
    attn_scores_rows(q, q_ld, nr, attn_listed(k), D, nk, kp, s);
}

/* o [D] = sum_{j < n} w_j v[j] for one few-query row with weights w [n], as few_scores
 * chooses; with dropout w_j is weighed by attention_keep(e0 + j). A 0 weight (masked or
 * underflowed) stays 0 whatever the mask, so it needs no hash. */
static void few_weigh(int avx2, const attn_dropout *dr, uint64_t e0, const float *w, int n,
                      const float *const *v, int D, float *o)
{
#if CPU_X86
    if (avx2) {
        cpu_attn_weigh_avx2(w, n, v, D, o);
        return;
    }
#else
    (void)avx2;
#endif
    memset(o, 0, sizeof(float) * (size_t)D);
    for (int j = 0; j < n; j++) {
        float wj = w[j];
        if (wj != 0.0f && dr->on)
            wj *= attention_keep(dr, e0 + j);
        if (wj == 0.0f)
            continue;
        const float *vj = v[j];
#pragma omp simd
        for (int d = 0; d < D; d++)
            o[d] += wj * vj[d];
    }
}

/* q, k, v, out: heads split from the feature dim (layout and strides: clf_attention_args).
 * For each (b, h, i): P = softmax_j(s), s_j = scale q_i . k_j (-1e9 where masked),
 * out_i = sum_j w_j v_j with w_j = P_j, or with dropout P_j * keep(e) / (1 - p),
 * e = ((b * heads + h) * q_len + i) * kv_len + j. probs [B, H, q_len, kv_len] gets P.
 * With k_new, row new_pos of every entry's keys and values is written first. */
clf_status cpu_attention(clf_backend *be, const clf_attention_args *a)
{
    CPU_REQUIRE_ARGS("attention", a);
    /* dropout_p, shape, strides and bounds: checked by the core (clformer/ops.h) */
    if (a->batch <= 0 || a->q_len <= 0)
        return CLF_OK;
    if (a->k_new.buf) /* this step's rows first (clf_attention_args.k_new; q_len = 1) */
        for (int b = 0; b < a->batch; b++) {
            const size_t row = (size_t)b * a->kv_bstride, w = (size_t)a->heads * a->head_dim;
            memcpy(fptr(a->k) + row + (size_t)a->new_pos * a->k_ld,
                   fptr(a->k_new) + (size_t)b * a->new_ld, sizeof(float) * w);
            memcpy(fptr(a->v) + row + (size_t)a->new_pos * a->v_ld,
                   fptr(a->v_new) + (size_t)b * a->new_ld, sizeof(float) * w);
        }
    const float *Q = fptr(a->q), *K = fptr(a->k), *V = fptr(a->v);
    float *O = fptr(a->out), *P = a->probs.buf ? fptr(a->probs) : NULL;
    const int32_t *M = a->key_mask.buf ? iptr(a->key_mask) : NULL;
    const int32_t *R = a->kv_rows.buf ? iptr(a->kv_rows) : NULL;
    int B = a->batch, H = a->heads, Tq = a->q_len, Tk = a->kv_len, D = a->head_dim;
    const attn_dropout dr = attention_dropout(a);
    const int kp = attn_round_up(Tk, ATTN_J), dp = attn_round_up(D, ATTN_J);
    const int few = attn_few_queries(a);
    /* per thread: Kt [D][kp], V rows [Tk][dp], the query block transposed [D][ATTN_R],
     * probabilities [ATTN_R][kp], weights transposed [kp][ATTN_R], output block
     * [ATTN_R][dp] */
    const size_t per_thread = (size_t)D * kp + (size_t)Tk * dp + (size_t)D * ATTN_R +
                              2 * (size_t)ATTN_R * kp + (size_t)ATTN_R * dp;
    /* and Tk key and Tk value row pointers. Both grown (never shrunk) rather than allocated
     * per call, which at decode is 12 calls a step: ops on one backend run one at a time,
     * and each thread of a call takes its own slice. */
    clf_status st = cpu_grow((void **)&be->attn_scratch, &be->attn_cap,
                             (size_t)be->threads * per_thread, sizeof(float), "attention");
    if (st == CLF_OK)
        st = cpu_grow((void **)&be->attn_rows, &be->attn_rows_cap,
                      (size_t)be->threads * 2 * (size_t)Tk, sizeof(const float *), "attention");
    if (st != CLF_OK)
        return st;
    float *scratch = be->attn_scratch;
    const float **rows = be->attn_rows;
    /* decoding without dropout: the AVX2 + FMA kernels (cpu_attention_avx2.c) for the
     * scores and the weighted sum of V */
    const int avx2 = few && !dr.on && be->isa != CPU_ISA_GENERIC;
    /* one thread when the products are too few to pay for a parallel region (see
     * CPU_PAR_MIN): 2 multiply-adds per query, key and column */
    const int par = 2 * (size_t)B * H * Tq * Tk * D > CPU_PAR_MIN;
    /* One (batch, head) per iteration: pack its K and V once, then ATTN_R query rows at a
     * time: scores, softmax, dropout, weighted sum of V (the block kernels above). */
#pragma omp parallel num_threads(be->threads) if (par)
    {
        const int tid = omp_get_thread_num();
        float *kt = scratch + (size_t)tid * per_thread;
        float *vp = kt + (size_t)D * kp, *qt = vp + (size_t)Tk * dp, *s = qt + (size_t)D * ATTN_R;
        float *wt = s + (size_t)ATTN_R * kp, *acc = wt + (size_t)ATTN_R * kp;
        const float **kr = rows + (size_t)tid * 2 * Tk, **vr = kr + Tk;
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < B * H; bh++) {
            int b = bh / H, h = bh % H;
            const int32_t *mask = M ? M + b * a->key_mask_stride : NULL;
            /* entry b's keys up to its last unmasked one (ab: a with that kv_len) */
            const clf_attention_args ab = trimmed_keys(a, few && !P && !dr.on, mask);
            /* the rows of keys and values: those of entry b, or through the row table */
            attn_kv_rows(&ab, K, V, R, b, (size_t)h * D, kr, vr);
            if (!few) {
                attn_pack_t(attn_listed(kr), Tk, D, kp, kt);
                attn_pack_rows(attn_listed(vr), Tk, D, dp, vp);
            }
            for (int i0 = 0; i0 < Tq; i0 += ATTN_R) {
                const int nr = Tq - i0 < ATTN_R ? Tq - i0 : ATTN_R;
                const float *qb = Q + b * a->q_bstride + (size_t)i0 * a->q_ld + (size_t)h * D;
                /* queries i0 .. i0 + nr - 1 need the scores of keys j < nk only: causal
                 * masking hides the rest from every row (the limit grows with i), and
                 * P is 0 past ext, so those keys are not weighted either */
                const int nk = attn_key_limit(&ab, i0 + nr - 1);
                if (few) {
                    few_scores(avx2, qb, (size_t)a->q_ld, nr, kr, D, nk, kp, s);
                } else {
                    attn_pack_rows_t(qb, (size_t)a->q_ld, nr, D, qt);
                    attn_rows_mul(qt, kt, (size_t)kp, D, attn_round_up(nk, ATTN_J), nr, s,
                                  (size_t)kp);
                }
                const int ext = attn_softmax_rows(&ab, mask, i0, nr, kp, s);
                /* the weights: P, or P * keep / (1 - p). s is 0 past the live rows and
                 * keys, and a 0 (masked or underflowed) P stays 0 whatever the mask, so
                 * it needs no hash. */
                if (few)
                    for (int r = 0; r < nr; r++)
                        few_weigh(avx2, &dr, (((uint64_t)b * H + h) * Tq + i0 + r) * Tk,
                                  s + (size_t)r * kp, ext, vr, D, acc + (size_t)r * dp);
                else {
                    attn_block_t(s, kp, wt); /* [kp][ATTN_R] */
                    if (dr.on)
                        for (int r = 0; r < nr; r++) {
                            const uint64_t e0 = (((uint64_t)b * H + h) * Tq + i0 + r) * Tk;
                            for (int j = 0; j < ext; j++) {
                                float *wj = wt + (size_t)j * ATTN_R + r;
                                *wj = *wj != 0.0f ? *wj * attention_keep(&dr, e0 + j) : 0.0f;
                            }
                        }
                    attn_rows_mul(wt, vp, (size_t)dp, ext, dp, nr, acc, (size_t)dp);
                }
                for (int r = 0; r < nr; r++) {
                    float *o =
                        O + b * a->out_bstride + (size_t)(i0 + r) * a->out_ld + (size_t)h * D;
                    memcpy(o, acc + (size_t)r * dp, sizeof(float) * (size_t)D);
                    if (P)
                        memcpy(P + (((size_t)b * H + h) * Tq + i0 + r) * Tk, s + (size_t)r * kp,
                               sizeof(float) * (size_t)Tk);
                }
            }
        }
    }
    return CLF_OK;
}
