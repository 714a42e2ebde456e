/* The OpenCL backend's attention, forward (fused online-softmax kernel, and the probs
 * kernel) and backward (dq, dk, dv), with masks, strides, column slices and fully masked
 * rows, compared with a host reference in double and with the CPU backend. Then the
 * on-disk program cache: an op of every kernel family after a cold and a warm load (here
 * because it reuses the attention checkers).
 * Without an OpenCL device the suite says why and exits 77 (ctest: skipped; a failure with
 * CLF_TEST_REQUIRE_OPENCL=1). */
#include "opencl_testutil.h"

#include "clformer/tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- attention ---- */

typedef struct attn_case {
    int B, H, Tq, Tk, D;
    int mask; /* 0 none, 1 padded tails, 2 batch 0 fully masked, 3 the first 3 keys masked */
    int causal, q_pos0, probs;
    int pad;       /* extra row and batch stride elements, and operand offsets */
    float drop;    /* dropout_p on the probabilities (0: off) */
    uint64_t seed; /* dropout_seed */
} attn_case;

static void ref_attention(const clf_attention_args *a, const float *Q, const float *K,
                          const float *V, const int32_t *M, float *O, float *P)
{
    int D = a->head_dim;
    double *s = malloc(sizeof *s * (size_t)a->kv_len);
    ck_assert_ptr_nonnull(s);
    for (int b = 0; b < a->batch; b++)
        for (int h = 0; h < a->heads; h++)
            for (int i = 0; i < a->q_len; i++) {
                const float *q = Q + a->q.off / 4 + b * a->q_bstride + (size_t)i * a->q_ld + h * D;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < a->kv_len; j++) {
                    const float *k =
                        K + a->k.off / 4 + b * a->kv_bstride + (size_t)j * a->k_ld + h * D;
                    int masked = (M && M[a->key_mask.off / 4 + b * a->key_mask_stride + j] == 0) ||
                                 (a->causal && j > a->q_pos0 + i);
                    double dot = 0;
                    for (int d = 0; d < D; d++)
                        dot += (double)q[d] * k[d];
                    s[j] = masked ? -1e9 : dot * a->scale;
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int j = 0; j < a->kv_len; j++)
                    sum += (s[j] = exp(s[j] - mx));
                float *o = O + a->out.off / 4 + b * a->out_bstride + (size_t)i * a->out_ld + h * D;
                /* dropout: the factor keep / (1 - p) of element e (clformer/backend.h) */
                uint64_t e0 = (((uint64_t)b * a->heads + h) * a->q_len + i) * a->kv_len;
                for (int d = 0; d < D; d++) {
                    double acc = 0;
                    for (int j = 0; j < a->kv_len; j++)
                        acc +=
                            s[j] / sum *
                            (a->dropout_p == 0.0f ? 1.0
                             : clf_dropout_bits(a->dropout_seed, e0 + j) >=
                                     clf_dropout_threshold(a->dropout_p)
                                 ? (double)(1.0f / (1.0f - a->dropout_p))
                                 : 0.0) *
                            V[a->v.off / 4 + b * a->kv_bstride + (size_t)j * a->v_ld + h * D + d];
                    o[d] = (float)acc;
                }
                if (P)
                    for (int j = 0; j < a->kv_len; j++)
                        P[(((size_t)b * a->heads + h) * a->q_len + i) * a->kv_len + j] =
                            (float)(s[j] / sum);
            }
    free(s);
}

typedef struct attn_data {
    float *q, *k, *v, *out, *probs;
    int32_t *mask;
    size_t nq, nkv, nout, nmask, nprobs;
} attn_data;

static void run_attention(bk *k, const clf_attention_args *tmpl, const attn_data *d, float *out,
                          float *probs)
{
    clf_buffer *bq = up(k, d->q, d->nq * 4), *bk_ = up(k, d->k, d->nkv * 4),
               *bv = up(k, d->v, d->nkv * 4), *bo = up(k, d->out, d->nout * 4);
    clf_buffer *bm = d->mask ? up(k, d->mask, d->nmask * 4) : NULL;
    clf_buffer *bp = probs ? up(k, NULL, d->nprobs * 4) : NULL;
    clf_attention_args a = *tmpl;
    a.q.buf = bq;
    a.k.buf = bk_;
    a.v.buf = bv;
    a.out.buf = bo;
    a.key_mask.buf = bm;
    a.probs.buf = bp;
    CLF_ASSERT_OK(k->api->attention(k->be, &a));
    down(k, out, bo, d->nout * 4);
    if (probs)
        down(k, probs, bp, d->nprobs * 4);
    clf_buffer *all[] = {bq, bk_, bv, bo, bm, bp};
    for (int i = 0; i < 6; i++)
        if (all[i])
            k->api->free(k->be, all[i]);
}

/* The args of an attention of this shape, with the scale 1/sqrt(D); strides, offsets and
 * operands left to the caller. */
static clf_attention_args shape_args(int B, int H, int Tq, int Tk, int D, int causal, int q_pos0)
{
    return (clf_attention_args){.batch = B,
                                .heads = H,
                                .q_len = Tq,
                                .kv_len = Tk,
                                .head_dim = D,
                                .causal = causal,
                                .q_pos0 = q_pos0,
                                .scale = 1.0f / sqrtf((float)D)};
}

static void check_attention_case(const attn_case *t, unsigned seed)
{
    if (clf_test_too_big((double)t->B * t->H * t->Tq * t->Tk * t->D))
        return;
    int width = t->H * t->D, pad = t->pad;
    clf_attention_args a = shape_args(t->B, t->H, t->Tq, t->Tk, t->D, t->causal, t->q_pos0);
    a.dropout_p = t->drop;
    a.dropout_seed = t->seed;
    a.q_ld = width + pad;
    a.k_ld = width + 2 * pad;
    a.v_ld = width + pad;
    a.out_ld = width + 3 * pad;
    a.q_bstride = (size_t)t->Tq * a.q_ld + pad;
    a.kv_bstride = (size_t)t->Tk * a.v_ld + 2 * (size_t)t->Tk * pad; /* covers k_ld too */
    a.out_bstride = (size_t)t->Tq * a.out_ld + pad;
    a.key_mask_stride = (size_t)t->Tk + pad;
    a.q.off = a.k.off = a.v.off = a.out.off = a.key_mask.off = (size_t)pad * 4;
    attn_data d = {0};
    d.nq = pad + (size_t)t->B * a.q_bstride;
    d.nkv = pad + (size_t)t->B * a.kv_bstride;
    d.nout = pad + (size_t)t->B * a.out_bstride;
    d.nmask = pad + (size_t)t->B * a.key_mask_stride;
    d.nprobs = (size_t)t->B * t->H * t->Tq * t->Tk;
    d.q = clf_test_frand(d.nq, seed, -2, 2);
    d.k = clf_test_frand(d.nkv, seed + 1, -2, 2);
    d.v = clf_test_frand(d.nkv, seed + 2, -1, 1);
    d.out = clf_test_frand(d.nout, seed + 3, -1, 1); /* what is outside the output must stay */
    if (t->mask) {
        d.mask = malloc(d.nmask * sizeof *d.mask);
        for (int b = 0; b < t->B; b++)
            for (int j = 0; j < t->Tk; j++) {
                int on = 1;
                if (t->mask == 1) /* batch b has b * 3 padding keys at the end */
                    on = j < t->Tk - (b * 3) % t->Tk;
                else if (t->mask == 2)
                    on = b != 0;
                else if (t->mask == 3)
                    on = j >= 3;
                d.mask[pad + b * a.key_mask_stride + j] = on;
            }
    }
    float *want = fdup(d.out, d.nout), *got = fdup(d.out, d.nout), *cgot = fdup(d.out, d.nout);
    float *wp = t->probs ? malloc(d.nprobs * 4) : NULL,
          *gp = t->probs ? malloc(d.nprobs * 4) : NULL,
          *cp = t->probs ? malloc(d.nprobs * 4) : NULL;
    char what[200];
    snprintf(what, sizeof what,
             "attention B=%d H=%d Tq=%d Tk=%d D=%d mask=%d causal=%d q_pos0=%d probs=%d pad=%d "
             "drop=%g",
             t->B, t->H, t->Tq, t->Tk, t->D, t->mask, t->causal, t->q_pos0, t->probs, pad,
             (double)t->drop);
    ref_attention(&a, d.q, d.k, d.v, d.mask, want, wp);
    run_attention(&ocl, &a, &d, got, gp);
    run_attention(&cpu, &a, &d, cgot, cp);
    expect_close_both(got, want, cgot, d.nout, TOL_ATTN, what);
    if (t->probs) {
        expect_close(gp, wp, d.nprobs, TOL_ATTN, what, "host reference (probs)");
        expect_close(gp, cp, d.nprobs, TOL_ATTN, what, "cpu backend (probs)");
    }
    free(d.q);
    free(d.k);
    free(d.v);
    free(d.out);
    free(d.mask);
    free(want);
    free(got);
    free(cgot);
    free(wp);
    free(gp);
    free(cp);
}

/* batch 3, heads 2, queries 1 + with_probs (causal), 9 keys, head_dim 16; keys and values
 * k|v rows of 5 entries, the table [3, 11]. With append, one query (with or without probs)
 * whose step writes its keys and values at row 6 first (k_new, v_new: the table names each
 * entry's own there), and the keys and values after the call compared too, exactly. */
static void run_attention_rows(int with_probs, int append)
{
    enum { B = 3, H = 2, D = 16, W = H * D, TK = 9, E = 5, LD = 11, POS = 6 };
    const int tq = append ? 1 : 1 + with_probs;
    const size_t nq = (size_t)B * tq * W, nkv = (size_t)E * TK * 2 * W, no = nq,
                 np = (size_t)B * H * tq * TK, nn = (size_t)B * 2 * W;
    float *q = clf_test_frand(nq, 71, -2, 2), *kv = clf_test_frand(nkv, 72, -1, 1),
          *kvn = clf_test_frand(nn, 73, -1, 1);
    int32_t rows[B * LD];
    for (int i = 0; i < B * LD; i++)
        rows[i] = (i * 3 + 1) % E;
    rows[0] = -2;
    rows[LD + 4] = E + 3;
    for (int b = 0; append && b < B; b++)
        rows[b * LD + POS] = b;
    float got[2][B * 2 * W], gotp[2][B * H * 2 * TK];
    float *gotkv[2] = {malloc(nkv * 4), malloc(nkv * 4)};
    bk *ks[2] = {&ocl, &cpu};
    for (int w = 0; w < 2; w++) {
        bk *k = ks[w];
        clf_buffer *bq = up(k, q, nq * 4), *bkv = up(k, kv, nkv * 4), *bo = up(k, NULL, no * 4),
                   *bp = up(k, NULL, np * 4), *br = up(k, rows, sizeof rows),
                   *bn = up(k, kvn, nn * 4);
        clf_attention_args a = {.batch = B,
                                .heads = H,
                                .q_len = tq,
                                .kv_len = TK,
                                .head_dim = D,
                                .q = {bq, 0},
                                .k = {bkv, 0},
                                .v = {bkv, 4 * W},
                                .out = {bo, 0},
                                .q_ld = W,
                                .k_ld = 2 * W,
                                .v_ld = 2 * W,
                                .out_ld = W,
                                .q_bstride = (size_t)tq * W,
                                .kv_bstride = (size_t)TK * 2 * W,
                                .out_bstride = (size_t)tq * W,
                                .causal = with_probs,
                                .q_pos0 = TK - tq,
                                .scale = 0.25f,
                                .probs = {with_probs ? bp : NULL, 0},
                                .kv_rows = {br, 0},
                                .kv_rows_ld = LD,
                                .kv_entries = E};
        if (append) {
            a.k_new = (clf_ptr){bn, 0};
            a.v_new = (clf_ptr){bn, 4 * W};
            a.new_ld = 2 * W;
            a.new_pos = POS;
        }
        CLF_ASSERT_OK(clf_op_attention(k->api, k->be, &a));
        down(k, got[w], bo, no * 4);
        down(k, gotkv[w], bkv, nkv * 4);
        if (with_probs)
            down(k, gotp[w], bp, np * 4);
        clf_buffer *all[] = {bq, bkv, bo, bp, br, bn};
        for (int i = 0; i < 6; i++)
            k->api->free(k->be, all[i]);
    }
    const char *what = append ? (with_probs ? "attention, append, probs" : "attention, append")
                       : with_probs ? "attention, row table, probs"
                                    : "attention, row table";
    expect_close(got[0], got[1], no, TOL_ATTN, what, "cpu backend");
    if (with_probs)
        expect_close(gotp[0], gotp[1], np, TOL_ATTN, what, "cpu backend");
    ck_assert_msg(memcmp(gotkv[0], gotkv[1], nkv * 4) == 0, "%s: keys and values", what);
    ck_assert(!append || memcmp(gotkv[0], kv, nkv * 4) != 0); /* the rows were written */
    free(q);
    free(kv);
    free(kvn);
    free(gotkv[0]);
    free(gotkv[1]);
}

START_TEST(test_attention)
{
    static const attn_case cases[] = {
        /* B  H  Tq   Tk    D  mask causal q_pos0 probs pad drop seed */
        {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},
        {2, 3, 7, 7, 7, 1, 0, 0, 0, 0, 0, 0},
        {2, 2, 33, 33, 64, 1, 1, 0, 0, 1, 0, 0},
        {1, 2, 5, 129, 64, 1, 1, 124, 0, 0, 0, 0},  /* decoding with a KV cache */
        {3, 1, 65, 129, 7, 2, 0, 0, 1, 3, 0, 0},    /* batch 0 fully masked; probs */
        {2, 2, 7, 300, 128, 1, 1, 293, 0, 2, 0, 0}, /* more keys than a work-group: several tiles */
        {2, 2, 33, 65, 64, 1, 1, 0, 1, 0, 0, 0},    /* cross-length, causal, probs */
        {1, 8, 1, 1, 64, 0, 0, 0, 1, 0, 0, 0},
        {1, 2, 6, 6, 8, 3, 1, 0, 1, 1, 0, 0}, /* rows 0-2 see only masked keys: uniform weights */
        {2, 1, 129, 129, 1, 1, 1, 0, 0, 0, 0, 0},
        {1, 3, 65, 1, 33, 1, 0, 0, 1, 0, 0, 0},
        {2, 2, 9, 600, 16, 1, 0, 0, 0, 0, 0, 0}, /* three tiles, the last one partial */
        /* dropout on the probabilities: the same mask as the CPU backend and the host */
        {2, 3, 7, 33, 7, 1, 1, 0, 0, 1, 0.3f, 11},
        {2, 3, 7, 33, 7, 1, 1, 0, 1, 1, 0.3f, 11}, /* probs: the softmax before dropout */
        {3, 1, 65, 129, 64, 2, 0, 0, 1, 0, 0.9f, 12},
        {2, 2, 9, 600, 16, 1, 1, 591, 0, 2, 0.9f, 0xFFFFFFFFFFFFFFFFull},
        {1, 2, 1, 1, 1, 0, 0, 0, 0, 0, 0.3f, 13},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_attention_case(&cases[i], 1000 + 10 * (unsigned)i);

    /* Keys and values through a row table (kv_rows, the decoding step's: beams sharing
     * cache rows), fused and probs kernels, against the CPU backend (whose row table the
     * ops suite checks against a double reference); entries out of range on both sides
     * are clamped alike; and the decoding step's append (k_new, v_new), which the ops suite
     * checks against rows written first. */
    for (int with_probs = 0; with_probs < 2; with_probs++)
        for (int append = 0; append < 2; append++)
            run_attention_rows(with_probs, append);
}
END_TEST

/* -- attention_backward -- */

typedef struct attn_bwd_case {
    int B, H, Tq, Tk, D;
    int mask; /* as attn_case */
    int causal, q_pos0;
    int fused; /* q, k, v (and dq, dk, dv) column slices of one [T, 3 width] buffer */
    int pad;
} attn_bwd_case;

/* Host copies of the operands: fused, one buffer for q|k|v and one for dq|dk|dv (buffer
 * index 0 for all three); else three of each. dout and the mask on their own. */
typedef struct attn_bwd_data {
    int nbuf;
    float *in[3], *grad[3];
    size_t nin[3];
    float *dout;
    int32_t *mask;
    size_t nout, nmask;
} attn_bwd_data;

/* dq, dk, dv of loss = sum(dout * attention(q, k, v)) in double, written over the head
 * columns of the gradient arrays (DQ, DK, DV with dq/dk/dv's offsets); the rest stays. */
static void ref_attention_backward(const clf_attention_backward_args *ba, const float *Q,
                                   const float *K, const float *V, const int32_t *M,
                                   const float *DO, float *DQ, float *DK, float *DV)
{
    const clf_attention_args *a = &ba->fwd;
    int D = a->head_dim, Tq = a->q_len, Tk = a->kv_len;
    double *P = malloc(sizeof *P * ((size_t)Tq * Tk + 1)),
           *dS = malloc(sizeof *dS * ((size_t)Tq * Tk + 1));
    ck_assert_ptr_nonnull(P);
    ck_assert_ptr_nonnull(dS);
    for (int b = 0; b < a->batch; b++)
        for (int h = 0; h < a->heads; h++) {
#define AQ(i)  (Q + a->q.off / 4 + b * a->q_bstride + (size_t)(i)*a->q_ld + h * D)
#define AK(j)  (K + a->k.off / 4 + b * a->kv_bstride + (size_t)(j)*a->k_ld + h * D)
#define AV(j)  (V + a->v.off / 4 + b * a->kv_bstride + (size_t)(j)*a->v_ld + h * D)
#define ADO(i) (DO + ba->dout.off / 4 + b * a->out_bstride + (size_t)(i)*a->out_ld + h * D)
            for (int i = 0; i < Tq; i++) {
                double mx = -INFINITY, sum = 0, Di = 0;
                double *p = P + (size_t)i * Tk, *ds = dS + (size_t)i * Tk;
                for (int j = 0; j < Tk; j++) {
                    int masked = (M && M[a->key_mask.off / 4 + b * a->key_mask_stride + j] == 0) ||
                                 (a->causal && j > a->q_pos0 + i);
                    double dot = 0;
                    for (int d = 0; d < D; d++)
                        dot += (double)AQ(i)[d] * AK(j)[d];
                    p[j] = masked ? -1e9 : dot * a->scale;
                    ds[j] = masked; /* remembered until dS is known */
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int j = 0; j < Tk; j++)
                    sum += (p[j] = exp(p[j] - mx));
                for (int j = 0; j < Tk; j++) {
                    p[j] /= sum;
                    double dp = 0;
                    for (int d = 0; d < D; d++)
                        dp += (double)ADO(i)[d] * AV(j)[d];
                    Di += p[j] * dp;
                    ds[j] = ds[j] != 0 ? NAN : dp; /* NaN marks masked */
                }
                for (int j = 0; j < Tk; j++)
                    ds[j] = isnan(ds[j]) ? 0.0 : p[j] * (ds[j] - Di);
            }
            for (int i = 0; i < Tq; i++) {
                float *o = DQ + ba->dq.off / 4 + b * a->q_bstride + (size_t)i * a->q_ld + h * D;
                for (int d = 0; d < D; d++) {
                    double s = 0;
                    for (int j = 0; j < Tk; j++)
                        s += dS[(size_t)i * Tk + j] * AK(j)[d];
                    o[d] = (float)(a->scale * s);
                }
            }
            for (int j = 0; j < Tk; j++) {
                float *ok = DK + ba->dk.off / 4 + b * a->kv_bstride + (size_t)j * a->k_ld + h * D;
                float *ov = DV + ba->dv.off / 4 + b * a->kv_bstride + (size_t)j * a->v_ld + h * D;
                for (int d = 0; d < D; d++) {
                    double sk = 0, sv = 0;
                    for (int i = 0; i < Tq; i++) {
                        sk += dS[(size_t)i * Tk + j] * AQ(i)[d];
                        sv += P[(size_t)i * Tk + j] * ADO(i)[d];
                    }
                    ok[d] = (float)(a->scale * sk);
                    ov[d] = (float)sv;
                }
            }
#undef AQ
#undef AK
#undef AV
#undef ADO
        }
    free(P);
    free(dS);
}

/* Runs the op on k; grads receive the whole gradient buffers. */
static void run_attention_backward(bk *k, const clf_attention_backward_args *tmpl,
                                   const attn_bwd_data *d, float **grads)
{
    clf_buffer *bin[3] = {NULL}, *bg[3] = {NULL};
    for (int i = 0; i < d->nbuf; i++) {
        bin[i] = up(k, d->in[i], d->nin[i] * 4);
        bg[i] = up(k, d->grad[i], d->nin[i] * 4);
    }
    clf_buffer *bo = up(k, d->dout, d->nout * 4);
    clf_buffer *bm = d->mask ? up(k, d->mask, d->nmask * 4) : NULL;
    clf_attention_backward_args a = *tmpl;
    int j = d->nbuf == 1 ? 0 : 1, l = d->nbuf == 1 ? 0 : 2;
    a.fwd.q.buf = bin[0];
    a.fwd.k.buf = bin[j];
    a.fwd.v.buf = bin[l];
    a.dq.buf = bg[0];
    a.dk.buf = bg[j];
    a.dv.buf = bg[l];
    a.dout.buf = bo;
    a.fwd.key_mask.buf = bm;
    CLF_ASSERT_OK(k->api->attention_backward(k->be, &a));
    for (int i = 0; i < d->nbuf; i++)
        down(k, grads[i], bg[i], d->nin[i] * 4);
    clf_buffer *all[] = {bin[0], bin[1], bin[2], bg[0], bg[1], bg[2], bo, bm};
    free_all(k, all, 8);
}

static void check_attention_backward_case(const attn_bwd_case *t, unsigned seed, worst *w)
{
    if (clf_test_too_big((double)t->B * t->H * t->Tq * t->Tk * t->D))
        return;
    int width = t->H * t->D, pad = t->pad;
    clf_attention_backward_args ba = {0};
    clf_attention_args *a = &ba.fwd;
    *a = shape_args(t->B, t->H, t->Tq, t->Tk, t->D, t->causal, t->q_pos0);
    attn_bwd_data d = {0};
    if (t->fused) { /* self-attention over one [B, T, 3 width + pad] projection */
        ck_assert_int_eq(t->Tq, t->Tk);
        a->q_ld = a->k_ld = a->v_ld = 3 * width + pad;
        a->q_bstride = a->kv_bstride = (size_t)t->Tq * a->q_ld + pad;
        a->q.off = (size_t)pad * 4;
        a->k.off = a->q.off + (size_t)width * 4;
        a->v.off = a->k.off + (size_t)width * 4;
        d.nbuf = 1;
        d.nin[0] = pad + (size_t)t->B * a->q_bstride;
    } else { /* the layout of test_attention */
        a->q_ld = width + pad;
        a->k_ld = width + 2 * pad;
        a->v_ld = width + pad;
        a->q_bstride = (size_t)t->Tq * a->q_ld + pad;
        a->kv_bstride = (size_t)t->Tk * a->v_ld + 2 * (size_t)t->Tk * pad;
        a->q.off = a->k.off = a->v.off = (size_t)pad * 4;
        d.nbuf = 3;
        d.nin[0] = pad + (size_t)t->B * a->q_bstride;
        d.nin[1] = d.nin[2] = pad + (size_t)t->B * a->kv_bstride;
    }
    a->out_ld = width + 3 * pad;
    a->out_bstride = (size_t)t->Tq * a->out_ld + pad;
    a->key_mask_stride = (size_t)t->Tk + pad;
    a->key_mask.off = ba.dout.off = (size_t)pad * 4;
    ba.dq.off = a->q.off;
    ba.dk.off = a->k.off;
    ba.dv.off = a->v.off;
    d.nout = pad + (size_t)t->B * a->out_bstride + 1;
    d.nmask = pad + (size_t)t->B * a->key_mask_stride;
    for (int i = 0; i < d.nbuf; i++) {
        d.in[i] = clf_test_frand(d.nin[i], seed + i, -2, 2);
        /* outside the op's columns: stays */
        d.grad[i] = clf_test_frand(d.nin[i], seed + 10 + i, -1, 1);
    }
    d.dout = clf_test_frand(d.nout, seed + 5, -1, 1);
    if (t->mask) {
        d.mask = malloc(d.nmask * sizeof *d.mask);
        for (size_t i = 0; i < d.nmask; i++)
            d.mask[i] = 1;
        for (int b = 0; b < t->B; b++)
            for (int j = 0; j < t->Tk; j++) {
                int on = 1;
                if (t->mask == 1)
                    on = j < t->Tk - (b * 3) % t->Tk;
                else if (t->mask == 2)
                    on = b != 0;
                else if (t->mask == 3)
                    on = j >= 3;
                d.mask[pad + b * a->key_mask_stride + j] = on;
            }
    }
    float *want[3] = {NULL}, *got[3] = {NULL}, *cgot[3] = {NULL};
    for (int i = 0; i < d.nbuf; i++) {
        want[i] = fdup(d.grad[i], d.nin[i]);
        got[i] = malloc(d.nin[i] * 4);
        cgot[i] = malloc(d.nin[i] * 4);
    }
    int j = d.nbuf == 1 ? 0 : 1, l = d.nbuf == 1 ? 0 : 2;
    ref_attention_backward(&ba, d.in[0], d.in[j], d.in[l], d.mask, d.dout, want[0], want[j],
                           want[l]);
    run_attention_backward(&ocl, &ba, &d, got);
    run_attention_backward(&cpu, &ba, &d, cgot);
    char what[200];
    for (int i = 0; i < d.nbuf; i++) {
        snprintf(what, sizeof what,
                 "attention_backward B=%d H=%d Tq=%d Tk=%d D=%d mask=%d causal=%d q_pos0=%d "
                 "fused=%d pad=%d: %s",
                 t->B, t->H, t->Tq, t->Tk, t->D, t->mask, t->causal, t->q_pos0, t->fused, pad,
                 d.nbuf == 1 ? "dq|dk|dv"
                 : i == 0    ? "dq"
                 : i == 1    ? "dk"
                             : "dv");
        expect_both(got[i], want[i], cgot[i], d.nin[i], TOL_ATTN_BWD, what, w);
    }
    /* deterministic: the same bits from a second run */
    run_attention_backward(&ocl, &ba, &d, cgot);
    for (int i = 0; i < d.nbuf; i++)
        expect_same_bits(cgot[i], got[i], d.nin[i], what, "its own first run");
    for (int i = 0; i < d.nbuf; i++) {
        free(d.in[i]);
        free(d.grad[i]);
        free(want[i]);
        free(got[i]);
        free(cgot[i]);
    }
    free(d.dout);
    free(d.mask);
}

START_TEST(test_attention_backward)
{
    static const attn_bwd_case cases[] = {
        /* B  H  Tq   Tk    D  mask causal q_pos0 fused pad */
        {1, 1, 1, 1, 1, 0, 0, 0, 0, 0},       {2, 3, 7, 7, 7, 1, 0, 0, 1, 0},
        {2, 2, 33, 33, 64, 1, 1, 0, 1, 1},    /* the decoder's masked self-attention */
        {1, 2, 5, 129, 64, 1, 1, 124, 0, 0},  /* queries at the end of the keys */
        {3, 1, 65, 129, 7, 2, 0, 0, 0, 3},    /* batch 0 fully masked: uniform P, dv only */
        {2, 2, 7, 300, 128, 1, 1, 293, 0, 2}, /* more keys than a work-group */
        {2, 2, 33, 65, 64, 1, 0, 0, 0, 0},    /* cross-attention */
        {1, 2, 6, 6, 8, 3, 1, 0, 1, 1},       /* rows 0-2 see only masked keys */
        {2, 1, 129, 129, 1, 1, 1, 0, 1, 0},   {1, 3, 65, 1, 33, 1, 0, 0, 0, 0},
        {2, 2, 300, 9, 16, 1, 0, 0, 0, 0}, /* more queries than a work-group */
        {1, 1, 3, 5, 260, 0, 0, 0, 0, 1},  /* head_dim above the work-group size */
        {1, 2, 0, 5, 4, 0, 0, 0, 0, 1},    /* no queries: dk = dv = 0 */
    };
    worst w = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_attention_backward_case(&cases[i], 4000 + 20 * (unsigned)i, &w);
    report("test_attention_backward", &w, TOL_ATTN_BWD);
}
END_TEST

/* ---- program cache ---- */

typedef struct cache_state {
    int files;
    ino_t ino[16];
    char name[16][256];
} cache_state;

static void scan_cache(const char *dir, cache_state *s)
{
    memset(s, 0, sizeof *s);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        ck_assert_msg(!strstr(e->d_name, ".tmp"), "temporary file left behind: %s", e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 6, ".clbin") != 0 || s->files >= 16)
            continue;
        char p[600];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        ck_assert_int_eq(stat(p, &sb), 0);
        s->ino[s->files] = sb.st_ino;
        snprintf(s->name[s->files], sizeof s->name[0], "%s", e->d_name);
        s->files++;
    }
    closedir(d);
}

static ino_t inode_of(const cache_state *s, const char *name)
{
    for (int i = 0; i < s->files; i++)
        if (strcmp(s->name[i], name) == 0)
            return s->ino[i];
    return 0;
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Opens a backend with cache dir (NULL: the default chain), runs softmax, layernorm,
 * attention, embed, add, dropout, sum_squares, layernorm_backward and attention_backward
 * (an op of every kernel family) and checks them against the CPU. */
static double open_and_use(const char *cache)
{
    clf_backend_opts o = {
        .abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE"), .cache_dir = cache};
    bk k = {"opencl", ocl.api, NULL};
    double t0 = seconds();
    CLF_ASSERT_OK(ocl.api->open(&o, &k.be));
    double t = seconds() - t0;
    float *x = clf_test_frand(7 * 33, 42, -3, 3), got[7 * 33], want[7 * 33];
    run_softmax(&k, x, 7, 33, 0, 0, got);
    run_softmax(&cpu, x, 7, 33, 0, 0, want);
    expect_close(got, want, 7 * 33, TOL_NORM, "softmax after a cache load", "cpu backend");
    float al[33], be[33], s1[7 * 33], s2[7 * 33];
    for (int i = 0; i < 33; i++)
        al[i] = 1, be[i] = 0;
    clf_layernorm_args ln = {.rows = 7, .cols = 33, .eps = 1e-6f};
    run_layernorm(&k, &ln, x, NULL, al, be, 0, got, s1);
    run_layernorm(&cpu, &ln, x, NULL, al, be, 0, want, s2);
    expect_close(got, want, 7 * 33, TOL_NORM, "layernorm after a cache load", "cpu backend");
    free(x);
    bk saved = ocl;
    ocl = k; /* the checkers run on `ocl` */
    attn_case at = {2, 3, 7, 7, 11, 1, 1, 0, 0, 0, 0, 0};
    check_attention_case(&at, 77);
    ocl = saved;
    int32_t ids[3] = {0, 1, 2};
    float table[3 * 5], eo[3 * 5], ec[3 * 5];
    clf_test_fill(table, 15, 5, -1, 1);
    clf_embed_args em = {.rows = 3, .seq_len = 3, .dim = 5, .vocab = 3, .scale = 2};
    run_embed(&k, &em, ids, table, NULL, 0, eo);
    run_embed(&cpu, &em, ids, table, NULL, 0, ec);
    expect_close(eo, ec, 15, TOL_EXACT, "embed after a cache load", "cpu backend");
    clf_buffer *b = up(&k, table, sizeof table);
    CLF_ASSERT_OK(k.api->add(k.be, (clf_ptr){b, 0}, (clf_ptr){b, 0}, (clf_ptr){b, 0}, 15));
    down(&k, eo, b, sizeof eo);
    ck_assert_float_eq(eo[14], 2 * table[14]);
    k.api->free(k.be, b);

    /* the training families: dropout (train), sum_squares (optim), layernorm_backward and
     * attention_backward */
    float *y = clf_test_frand(7 * 33, 43, -1, 1), d1[7 * 33], d2[7 * 33];
    for (int i = 0; i < 7 * 33; i++)
        d1[i] = d2[i] = 0.0f;
    run_dropout(&k, y, 7 * 33, 0, 0.25f, 99, 0, d1);
    run_dropout(&cpu, y, 7 * 33, 0, 0.25f, 99, 0, d2);
    expect_same_bits(d1, d2, 7 * 33, "dropout after a cache load", "cpu backend");
    float s_ocl = run_sum_squares(&k, y, 7 * 33, 0), s_cpu = run_sum_squares(&cpu, y, 7 * 33, 0);
    expect_close(&s_ocl, &s_cpu, 1, TOL_SUMSQ, "sum_squares after a cache load", "cpu backend");
    clf_layernorm_backward_args lb = {.rows = 7, .cols = 33, .eps = 1e-6f};
    float da1[33] = {0}, db1[33] = {0}, da2[33] = {0}, db2[33] = {0};
    x = clf_test_frand(7 * 33, 44, -3, 3);
    run_layernorm_backward(&k, &lb, x, y, al, d1, da1, db1, 1, d1, da1, db1);
    run_layernorm_backward(&cpu, &lb, x, y, al, d2, da2, db2, 1, d2, da2, db2);
    expect_close(d1, d2, 7 * 33, TOL_LN_BWD, "layernorm_backward after a cache load",
                 "cpu backend");
    expect_close(da1, da2, 33, TOL_LN_BWD, "layernorm_backward dalpha after a cache load",
                 "cpu backend");
    free(x);
    free(y);
    saved = ocl;
    ocl = k;
    attn_bwd_case ab = {2, 2, 7, 7, 8, 1, 1, 0, 1, 0};
    worst w = {0};
    check_attention_backward_case(&ab, 78, &w);
    ocl = saved;
    ocl.api->close(k.be);
    return t;
}

START_TEST(test_program_cache)
{
    char dir[] = "/tmp/clf-ocl-cache-XXXXXX", other[] = "/tmp/clf-ocl-cache2-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_ptr_nonnull(mkdtemp(other));
    char sub[200];
    snprintf(sub, sizeof sub, "%s/nested/dir", dir); /* created on demand */
    cache_state s1, s2, s3;

    double cold = open_and_use(sub);
    scan_cache(sub, &s1);
    ck_assert_int_ge(s1.files, 1);
    double warm = open_and_use(sub);
    scan_cache(sub, &s2);
    ck_assert_int_eq(s2.files, s1.files);
    for (int i = 0; i < s1.files; i++) /* reused, not rewritten (rename makes a new inode) */
        ck_assert_msg(inode_of(&s2, s1.name[i]) == s1.ino[i], "%s was rewritten", s1.name[i]);
    printf("test_program_cache: open() with an empty program cache %.3f s, with a full one "
           "%.3f s\n",
           cold, warm);

    /* corrupt every file three ways: garbage, truncated, one flipped payload byte */
    for (int i = 0; i < s1.files; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", sub, s1.name[i]);
        FILE *f = fopen(p, i % 3 == 0 ? "wb" : "r+b");
        ck_assert_ptr_nonnull(f);
        if (i % 3 == 0) {
            fputs("not a program binary", f);
        } else if (i % 3 == 1) {
            ck_assert_int_eq(ftruncate(fileno(f), 100), 0);
        } else {
            fseek(f, 1000, SEEK_SET);
            int c = fgetc(f);
            fseek(f, 1000, SEEK_SET);
            fputc(c ^ 0x5a, f);
        }
        fclose(f);
    }
    open_and_use(sub); /* still works, and repairs the cache */
    scan_cache(sub, &s3);
    ck_assert_int_eq(s3.files, s1.files);
    for (int i = 0; i < s1.files; i++)
        ck_assert_msg(inode_of(&s3, s1.name[i]) != s1.ino[i], "%s was not rebuilt", s1.name[i]);

    /* "off" writes nothing, even with CLF_CACHE_DIR set; CLF_CACHE_DIR is the default */
    setenv("CLF_CACHE_DIR", other, 1);
    open_and_use("off");
    scan_cache(other, &s3);
    ck_assert_int_eq(s3.files, 0);
    open_and_use(NULL);
    scan_cache(other, &s3);
    ck_assert_int_eq(s3.files, s1.files);
    clf_test_remove_dir(other);
    setenv("CLF_CACHE_DIR", "off", 1);
    open_and_use(NULL);
    ck_assert_int_ne(access(other, F_OK), 0);

    char p[200];
    snprintf(p, sizeof p, "%s/nested", dir);
    clf_test_remove_dir(sub);
    clf_test_remove_dir(p);
    clf_test_remove_dir(dir);
}
END_TEST

CLF_TEST_MAIN(ocl_test_run, "opencl_attention", "attention", test_attention,
              test_attention_backward, test_program_cache)
