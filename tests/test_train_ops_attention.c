/* attention_backward and attention dropout of the backend ABI (version 2), and the
 * run-to-run determinism of the row-reducing training ops (see train_ops_util.h for the
 * method and the tolerances). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_ops_util.h"

/* ---- attention_backward ---- */

/* A geometry: q in its own array or (fused) in the kv array; strides in elements. */
typedef struct attn_case {
    int B, H, Tq, Tk, D, causal, q_pos0, mask;
    int layout;    /* 0: q; k and v in separate blocks, padded rows and batches
                    * 1: fused [q|k|v] rows (Tq == Tk), ld 3W + 2
                    * 2: q (ld W) and [k|v] (ld 2W), the cross-attention layout */
    float drop;    /* dropout_p on the probabilities (0: off) */
    uint64_t seed; /* dropout_seed */
} attn_case;

typedef struct attn_geo {
    attn_case c;
    clf_attention_args a; /* geometry; the pointers are set when uploading */
    size_t nq, nkv, no, qoff, koff, voff;
    int W;
} attn_geo;

static attn_geo attn_geometry(const attn_case *c)
{
    attn_geo g = {.c = *c, .W = c->H * c->D};
    int W = g.W;
    clf_attention_args *a = &g.a;
    a->batch = c->B, a->heads = c->H, a->q_len = c->Tq, a->kv_len = c->Tk;
    a->head_dim = c->D, a->causal = c->causal, a->q_pos0 = c->q_pos0;
    a->scale = 1.0f / sqrtf((float)c->D);
    a->dropout_p = c->drop, a->dropout_seed = c->seed;
    a->out_ld = W + 2;
    a->out_bstride = (size_t)c->Tq * a->out_ld + 1;
    a->key_mask_stride = (size_t)c->Tk + 1;
    if (c->layout == 1) {
        a->q_ld = a->k_ld = a->v_ld = 3 * W + 2;
        a->q_bstride = a->kv_bstride = (size_t)c->Tk * a->q_ld + 1;
        g.nq = g.nkv = a->kv_bstride * c->B;
        g.koff = W, g.voff = 2 * (size_t)W;
    } else if (c->layout == 0) {
        a->q_ld = W + 1, a->k_ld = W + 3, a->v_ld = W + 1;
        a->q_bstride = (size_t)c->Tq * a->q_ld + 1;
        a->kv_bstride = (size_t)c->Tk * a->k_ld + 2;
        g.nq = a->q_bstride * c->B;
        g.voff = a->kv_bstride * c->B;
        g.nkv = 2 * g.voff;
    } else {
        a->q_ld = W, a->k_ld = a->v_ld = 2 * W;
        a->q_bstride = (size_t)c->Tq * W;
        a->kv_bstride = (size_t)c->Tk * 2 * W;
        g.nq = a->q_bstride * c->B;
        g.nkv = a->kv_bstride * c->B;
        g.voff = W;
    }
    g.no = a->out_bstride * c->B;
    return g;
}

static size_t qidx(const attn_geo *g, int b, int i, int c)
{
    return g->qoff + b * g->a.q_bstride + (size_t)i * g->a.q_ld + c;
}
static size_t kidx(const attn_geo *g, int b, int j, int c)
{
    return g->koff + b * g->a.kv_bstride + (size_t)j * g->a.k_ld + c;
}
static size_t vidx(const attn_geo *g, int b, int j, int c)
{
    return g->voff + b * g->a.kv_bstride + (size_t)j * g->a.v_ld + c;
}
static size_t oidx(const attn_geo *g, int b, int i, int c)
{
    return b * g->a.out_bstride + (size_t)i * g->a.out_ld + c;
}

static int attn_masked(const attn_geo *g, const int32_t *M, int b, int i, int j)
{
    return (M && M[b * g->a.key_mask_stride + j] == 0) || (g->c.causal && j > g->c.q_pos0 + i);
}

/* Batch 0 keeps every key, batch 1 pads the tail; with B > 2 the last batch has key 0
 * masked, which with causal (q_pos0 = 0) leaves query 0 no key at all (a fully masked row
 * beside partly masked ones) and without causal masks every key. */
static int32_t *attn_mask(const attn_geo *g)
{
    const attn_case *c = &g->c;
    int32_t *M = malloc(g->a.key_mask_stride * c->B * 4);
    for (int b = 0; b < c->B; b++)
        for (int j = 0; j < (int)g->a.key_mask_stride; j++)
            M[b * g->a.key_mask_stride + j] = b == 0                        ? 1
                                              : (b == c->B - 1 && c->B > 2) ? (c->causal && j > 0)
                                                                            : j < c->Tk - 2 * b;
    return M;
}

/* Probabilities of query row (b, h, i) in double, as the forward defines them. */
static void attn_probs(const attn_geo *g, const double *qa, const double *kva, const int32_t *M,
                       int b, int h, int i, double *p)
{
    int D = g->c.D, Tk = g->c.Tk;
    double mx = -INFINITY, den = 0;
    for (int j = 0; j < Tk; j++) {
        double s = 0;
        for (int d = 0; d < D; d++)
            s += qa[qidx(g, b, i, h * D + d)] * kva[kidx(g, b, j, h * D + d)];
        p[j] = attn_masked(g, M, b, i, j) ? -1e9 : s * (double)g->a.scale;
        mx = p[j] > mx ? p[j] : mx;
    }
    for (int j = 0; j < Tk; j++)
        den += (p[j] = exp(p[j] - mx));
    for (int j = 0; j < Tk; j++)
        p[j] /= den;
}

/* The dropout factor of probability (b, h, i, j), as clf_attention_args defines it (built
 * here from clf_dropout_bits, independently of the backends): 0 or 1.0f / (1.0f - p). */
static double attn_keep(const attn_geo *g, int b, int h, int i, int j)
{
    const attn_case *c = &g->c;
    if (c->drop == 0.0f)
        return 1.0;
    uint64_t e = (((uint64_t)b * c->H + h) * c->Tq + i) * c->Tk + j;
    return clf_dropout_bits(c->seed, e) >= clf_dropout_threshold(c->drop)
               ? (double)(1.0f / (1.0f - c->drop))
               : 0.0;
}

typedef struct attn_user {
    const attn_geo *g;
    double *qa, *kva, *dO, *p;
    const int32_t *M;
} attn_user;

/* L = sum(dO * attention(q, k, v)) */
static double attn_loss(void *u)
{
    attn_user *s = u;
    const attn_geo *g = s->g;
    int D = g->c.D;
    double L = 0;
    for (int b = 0; b < g->c.B; b++)
        for (int h = 0; h < g->c.H; h++)
            for (int i = 0; i < g->c.Tq; i++) {
                attn_probs(g, s->qa, s->kva, s->M, b, h, i, s->p);
                for (int d = 0; d < D; d++) {
                    double o = 0;
                    for (int j = 0; j < g->c.Tk; j++)
                        o += s->p[j] * attn_keep(g, b, h, i, j) * s->kva[vidx(g, b, j, h * D + d)];
                    L += s->dO[oidx(g, b, i, h * D + d)] * o;
                }
            }
    return L;
}

/* dQ = scale dS K, dK = scale dS^T Q, dV = W^T dO, dS = P (dP - rowsum(P dP)), 0 where
 * masked, with W = P r, dP = (dO V^T) r and r the dropout factor (1 without dropout);
 * written at the slice positions of dqa (q layout) and dkva (k/v layout). */
static void attn_bwd_ref(attn_user *s, double *dqa, double *dkva)
{
    const attn_geo *g = s->g;
    int D = g->c.D, Tk = g->c.Tk;
    double scale = g->a.scale, *dp = clf_test_dalloc(Tk);
    for (int b = 0; b < g->c.B; b++)
        for (int h = 0; h < g->c.H; h++) {
            for (int j = 0; j < Tk; j++)
                for (int d = 0; d < D; d++)
                    dkva[kidx(g, b, j, h * D + d)] = dkva[vidx(g, b, j, h * D + d)] = 0;
            for (int i = 0; i < g->c.Tq; i++) {
                attn_probs(g, s->qa, s->kva, s->M, b, h, i, s->p);
                double Di = 0;
                for (int j = 0; j < Tk; j++) {
                    double r = attn_keep(g, b, h, i, j);
                    dp[j] = 0;
                    for (int d = 0; d < D; d++) {
                        double o = s->dO[oidx(g, b, i, h * D + d)];
                        dp[j] += o * s->kva[vidx(g, b, j, h * D + d)];
                        dkva[vidx(g, b, j, h * D + d)] += s->p[j] * r * o;
                    }
                    dp[j] *= r;
                    Di += s->p[j] * dp[j];
                }
                for (int d = 0; d < D; d++)
                    dqa[qidx(g, b, i, h * D + d)] = 0;
                for (int j = 0; j < Tk; j++) {
                    double ds = attn_masked(g, s->M, b, i, j) ? 0 : s->p[j] * (dp[j] - Di);
                    for (int d = 0; d < D; d++) {
                        dqa[qidx(g, b, i, h * D + d)] +=
                            scale * ds * s->kva[kidx(g, b, j, h * D + d)];
                        dkva[kidx(g, b, j, h * D + d)] +=
                            scale * ds * s->qa[qidx(g, b, i, h * D + d)];
                    }
                }
            }
        }
    free(dp);
}

/* Positions of the q, k or v slice (which 0, 1, 2) in their array; returns the count. */
static size_t attn_slice(const attn_geo *g, int which, size_t *idx)
{
    size_t m = 0;
    int T = which == 0 ? g->c.Tq : g->c.Tk;
    for (int b = 0; b < g->c.B; b++)
        for (int i = 0; i < T; i++)
            for (int c = 0; c < g->W; c++)
                idx[m++] = which == 0   ? qidx(g, b, i, c)
                           : which == 1 ? kidx(g, b, i, c)
                                        : vidx(g, b, i, c);
    return m;
}

/* Runs attention_backward on the backend with the gradient buffers pre-filled with
 * SENTINEL; got_q (nq) and got_kv (nkv) receive them whole (the same array when fused). */
static void run_attn_backward(const attn_geo *g, const float *qf, const float *kvf,
                              const int32_t *M, const float *dOf, float *got_q, float *got_kv)
{
    int fused = g->c.layout == 1;
    float *sent = fconst(g->nkv > g->nq ? g->nkv : g->nq, SENTINEL);
    clf_buffer *bq = fused ? NULL : up(qf, g->nq * 4), *bkv = up(kvf, g->nkv * 4);
    clf_buffer *bdq = fused ? NULL : up(sent, g->nq * 4), *bdkv = up(sent, g->nkv * 4);
    clf_buffer *bo = up(dOf, g->no * 4);
    clf_buffer *bm = M ? up(M, g->a.key_mask_stride * g->c.B * 4) : NULL;
    clf_attention_backward_args ba = {.fwd = g->a};
    ba.fwd.q = fused ? P(bkv) : P(bq);
    ba.fwd.k = clf_ptr_add(P(bkv), 4 * g->koff);
    ba.fwd.v = clf_ptr_add(P(bkv), 4 * g->voff);
    ba.fwd.key_mask = P(bm);
    ba.dout = P(bo);
    ba.dq = fused ? P(bdkv) : P(bdq);
    ba.dk = clf_ptr_add(P(bdkv), 4 * g->koff);
    ba.dv = clf_ptr_add(P(bdkv), 4 * g->voff);
    CLF_ASSERT_OK(clf_test_api->attention_backward(clf_test_be, &ba));
    down(bdkv, got_kv, g->nkv * 4);
    if (!fused)
        down(bdq, got_q, g->nq * 4);
    if (bq)
        clf_test_api->free(clf_test_be, bq), clf_test_api->free(clf_test_be, bdq);
    clf_test_api->free(clf_test_be, bkv), clf_test_api->free(clf_test_be, bdkv),
        clf_test_api->free(clf_test_be, bo);
    if (bm)
        clf_test_api->free(clf_test_be, bm);
    free(sent);
}

/* Checks the backend's dq, dk, dv on case c against the double reference (tol) and, when
 * fd, against finite differences; and that nothing outside the slices was written. */
static void check_attention_backward(const attn_case *c, int fd)
{
    attn_geo g = attn_geometry(c);
    int fused = c->layout == 1;
    float *qf = clf_test_frand(g.nq, 30 + c->Tq, -2, 2),
          *kvf = clf_test_frand(g.nkv, 31 + c->Tk, -1, 1);
    float *dOf = clf_test_frand(g.no, 32, -1, 1);
    const float *qsrc = fused ? kvf : qf;
    int32_t *M = c->mask ? attn_mask(&g) : NULL;
    double *qa = clf_test_to_double(qsrc, g.nq), *kva = clf_test_to_double(kvf, g.nkv);
    attn_user u = {&g, fused ? kva : qa, kva, clf_test_to_double(dOf, g.no), clf_test_dalloc(c->Tk),
                   M};
    double *dqa = clf_test_dalloc(g.nkv > g.nq ? g.nkv : g.nq),
           *dkva = fused ? dqa : clf_test_dalloc(g.nkv);
    attn_bwd_ref(&u, dqa, dkva);
    float *got_kv = malloc(g.nkv * 4), *got_q = fused ? got_kv : malloc(g.nq * 4);
    run_attn_backward(&g, qsrc, kvf, M, dOf, got_q, got_kv);

    size_t maxn = (size_t)c->B * (c->Tq > c->Tk ? c->Tq : c->Tk) * g.W;
    size_t *idx = malloc((maxn ? maxn : 1) * sizeof *idx);
    float *gotc = malloc((maxn ? maxn : 1) * 4);
    double *refc = clf_test_dalloc(maxn), *fdc = clf_test_dalloc(maxn);
    char *touched_q = calloc(g.nq, 1), *touched_kv = fused ? touched_q : calloc(g.nkv, 1);
    static const char *const names[3] = {"dq", "dk", "dv"};
    for (int w = 0; w < 3; w++) {
        size_t m = attn_slice(&g, w, idx);
        const float *got = w == 0 ? got_q : got_kv;
        const double *ref = w == 0 ? dqa : dkva;
        char *touched = w == 0 ? touched_q : touched_kv;
        for (size_t t = 0; t < m; t++) {
            gotc[t] = got[idx[t]];
            refc[t] = ref[idx[t]];
            touched[idx[t]] = 1;
        }
        char what[192];
        snprintf(what, sizeof what,
                 "attention_backward %s B=%d H=%d Tq=%d Tk=%d D=%d c=%d p0=%d m=%d l=%d drop=%g",
                 names[w], c->B, c->H, c->Tq, c->Tk, c->D, c->causal, c->q_pos0, c->mask, c->layout,
                 (double)c->drop);
        expect_close(what, gotc, refc, m, tol_reduce());
        if (fd) {
            double *arr = w == 0 ? u.qa : u.kva;
            fd_grad(arr, idx, m, attn_loss, &u, fdc);
            expect_ref_close(names[w], refc, fdc, m);
            expect_close(what, gotc, fdc, m, TOL_FD);
        }
    }
    for (size_t i = 0; i < g.nq; i++)
        ck_assert_msg(touched_q[i] || got_q[i] == SENTINEL,
                      "attention_backward layout %d wrote element %zu of the %s buffer, outside "
                      "the slices",
                      c->layout, i, fused ? "[dq|dk|dv]" : "dq");
    for (size_t i = 0; i < g.nkv; i++)
        ck_assert_msg(touched_kv[i] || got_kv[i] == SENTINEL,
                      "attention_backward layout %d wrote element %zu of the dk/dv buffer, "
                      "outside the slices",
                      c->layout, i);
    free(qf), free(kvf), free(dOf), free(M), free(qa), free(kva), free(u.dO), free(u.p);
    free(dqa), free(got_kv), free(idx), free(gotc), free(refc), free(fdc), free(touched_q);
    if (!fused)
        free(dkva), free(got_q), free(touched_kv);
}

/* A case's multiply-adds (one product of its scores), for clf_test_too_big: the simulator's
 * pass (CLF_TEST_SMALL) leaves out the largest backward cases. */
static double attn_work(const attn_case *c)
{
    return (double)c->B * c->H * c->Tq * c->Tk * c->D;
}

START_TEST(attention_backward_finite_differences)
{
    if (!have(CLF_OP_ATTENTION_BACKWARD))
        return;
    static const attn_case cases[] = {
        /* self-attention, fused [q|k|v], key mask + causal, batch 2's query 0 fully masked */
        {3, 2, 4, 4, 3, 1, 0, 1, 1, 0, 0},
        /* cross-attention q_len != kv_len, q and [k|v], batch 2 fully masked */
        {3, 2, 3, 5, 4, 0, 0, 1, 2, 0, 0},
        /* decoding with a KV cache: causal from q_pos0 = kv_len - q_len, padded layout */
        {1, 1, 2, 5, 3, 1, 3, 0, 0, 0, 0},
        /* one key, one query */
        {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_attention_backward(&cases[i], 1);
}
END_TEST

START_TEST(attention_backward_awkward_sizes)
{
    if (!have(CLF_OP_ATTENTION_BACKWARD))
        return;
    static const attn_case cases[] = {
        {2, 3, 7, 33, 7, 0, 0, 1, 0, 0, 0},
        {3, 2, 7, 7, 64, 1, 0, 1, 1, 0, 0},
        {3, 2, 1, 65, 33, 1, 64, 1, 2, 0, 0},
        {2, 4, 33, 33, 16, 1, 0, 0, 1, 0, 0},
        {4, 1, 65, 129, 64, 0, 0, 1, 0, 0, 0},
        {2, 2, 5, 129, 8, 1, 124, 1, 2, 0, 0},
        {3, 1, 129, 1, 7, 0, 0, 1, 0, 0, 0},
        {3, 2, 65, 65, 1, 1, 0, 1, 1, 0, 0},
        /* the CPU backend's query blocks: one register tile, a second block of 4, causal
         * limits inside the key tiles */
        {3, 1, 4, 12, 8, 1, 8, 1, 2, 0, 0},
        {2, 2, 12, 20, 16, 1, 8, 1, 0, 0, 0},
        /* no queries: dk and dv are still overwritten (with zeros) */
        {2, 2, 0, 7, 5, 0, 0, 1, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!clf_test_too_big(attn_work(&cases[i])))
            check_attention_backward(&cases[i], 0);
}
END_TEST

/* ---- attention dropout (forward and backward) ---- */

/* Runs the attention forward on case g (dropout from g->a, or none when no_fields: the
 * struct as a caller that never heard of dropout builds it); out (g->no, pre-filled with
 * SENTINEL) and, when probs is set, the probabilities are downloaded whole. */
static void run_attn_forward(const attn_geo *g, const float *qf, const float *kvf, const int32_t *M,
                             int no_fields, float *out, float *probs)
{
    int fused = g->c.layout == 1;
    size_t np = (size_t)g->c.B * g->c.H * g->c.Tq * g->c.Tk;
    float *sent = fconst(g->no, SENTINEL);
    clf_buffer *bq = fused ? NULL : up(qf, g->nq * 4), *bkv = up(kvf, g->nkv * 4);
    clf_buffer *bo = up(sent, g->no * 4), *bp = probs ? up(NULL, (np ? np : 1) * 4) : NULL;
    clf_buffer *bm = M ? up(M, g->a.key_mask_stride * g->c.B * 4) : NULL;
    clf_attention_args a = g->a;
    if (no_fields) {
        clf_attention_args z = {0};
        a.dropout_p = z.dropout_p, a.dropout_seed = z.dropout_seed;
    }
    a.q = fused ? P(bkv) : P(bq);
    a.k = clf_ptr_add(P(bkv), 4 * g->koff);
    a.v = clf_ptr_add(P(bkv), 4 * g->voff);
    a.out = P(bo);
    a.key_mask = P(bm);
    a.probs = P(bp);
    CLF_ASSERT_OK(clf_test_api->attention(clf_test_be, &a));
    down(bo, out, g->no * 4);
    if (probs)
        down(bp, probs, np * 4);
    if (bq)
        clf_test_api->free(clf_test_be, bq);
    clf_test_api->free(clf_test_be, bkv), clf_test_api->free(clf_test_be, bo);
    if (bp)
        clf_test_api->free(clf_test_be, bp);
    if (bm)
        clf_test_api->free(clf_test_be, bm);
    free(sent);
}

/* The forward on case c, with and without probs: out against the double reference
 * sum_j P r v (r: attn_keep), probs against the softmax before dropout, SENTINEL kept
 * outside out's slice, the same bits on a second run, and (p = 0) the same bits as a
 * call with the dropout fields never set. Returns the number of dropped elements. */
static size_t check_attention_forward(const attn_case *c)
{
    attn_geo g = attn_geometry(c);
    int fused = c->layout == 1, D = c->D;
    size_t np = (size_t)c->B * c->H * c->Tq * c->Tk, dropped = 0;
    float *qf = clf_test_frand(g.nq, 40 + c->Tq, -2, 2),
          *kvf = clf_test_frand(g.nkv, 41 + c->Tk, -1, 1);
    const float *qsrc = fused ? kvf : qf;
    int32_t *M = c->mask ? attn_mask(&g) : NULL;
    double *qa = clf_test_to_double(qsrc, g.nq), *kva = clf_test_to_double(kvf, g.nkv),
           *pr = clf_test_dalloc(c->Tk);
    double *want = clf_test_dalloc(g.no), *wantp = clf_test_dalloc(np);
    size_t *oi = malloc((g.no ? g.no : 1) * sizeof *oi), m = 0;
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->H; h++)
            for (int i = 0; i < c->Tq; i++) {
                attn_probs(&g, qa, kva, M, b, h, i, pr);
                for (int j = 0; j < c->Tk; j++) {
                    wantp[(((size_t)b * c->H + h) * c->Tq + i) * c->Tk + j] = pr[j];
                    dropped += attn_keep(&g, b, h, i, j) == 0.0;
                }
                for (int d = 0; d < D; d++) {
                    double o = 0;
                    for (int j = 0; j < c->Tk; j++)
                        o += pr[j] * attn_keep(&g, b, h, i, j) * kva[vidx(&g, b, j, h * D + d)];
                    want[m] = o;
                    oi[m++] = oidx(&g, b, i, h * D + d);
                }
            }
    float *out = malloc(g.no * 4), *out2 = malloc(g.no * 4), *probs = malloc((np ? np : 1) * 4);
    float *probs2 = malloc((np ? np : 1) * 4);
    float *gotc = malloc((m ? m : 1) * 4);
    char *in_slice = calloc(g.no, 1);
    for (size_t t = 0; t < m; t++)
        in_slice[oi[t]] = 1;
    for (int with_probs = 0; with_probs < 2; with_probs++) {
        run_attn_forward(&g, qsrc, kvf, M, 0, out, with_probs ? probs : NULL);
        for (size_t t = 0; t < m; t++)
            gotc[t] = out[oi[t]];
        for (size_t t = 0; t < g.no; t++)
            ck_assert_msg(in_slice[t] || out[t] == SENTINEL,
                          "attention wrote element %zu of out, outside the heads' columns", t);
        char what[192];
        snprintf(what, sizeof what,
                 "attention out B=%d H=%d Tq=%d Tk=%d D=%d c=%d m=%d l=%d drop=%g probs=%d", c->B,
                 c->H, c->Tq, c->Tk, c->D, c->causal, c->mask, c->layout, (double)c->drop,
                 with_probs);
        expect_close(what, gotc, want, m, tol_reduce());
        if (with_probs)
            expect_close("attention probs (the softmax before dropout)", probs, wantp, np,
                         tol_reduce());
        /* a second run, then (p = 0) a run without the fields: the same bits */
        for (int again = 0; again < (c->drop == 0.0f ? 2 : 1); again++) {
            run_attn_forward(&g, qsrc, kvf, M, again, out2, with_probs ? probs2 : NULL);
            ck_assert_msg(memcmp(out, out2, g.no * 4) == 0 &&
                              (!with_probs || memcmp(probs, probs2, np * 4) == 0),
                          "%s: %s: %s", clf_test_be_name, what,
                          again ? "dropout_p = 0 with a seed changed the bits"
                                : "not the same bits run after run");
        }
    }
    free(qf), free(kvf), free(M), free(qa), free(kva), free(pr), free(want), free(wantp);
    free(oi), free(out), free(out2), free(probs), free(probs2), free(gotc), free(in_slice);
    return dropped;
}

/* The cases of the dropout checks: p = 0.3 and 0.9, several seeds, batch and heads > 1,
 * causal and key-mask variants (with a fully masked row), all three layouts. */
static const attn_case drop_fd_cases[] = {
    {3, 2, 4, 4, 3, 1, 0, 1, 1, 0.3f, 1},
    {3, 2, 3, 5, 4, 0, 0, 1, 2, 0.9f, 0x9E3779B97F4A7C15ull},
    {2, 2, 2, 5, 3, 1, 3, 0, 0, 0.3f, 12345},
    {2, 3, 3, 3, 2, 0, 0, 0, 0, 0.9f, 7},
    {1, 1, 1, 1, 1, 0, 0, 0, 0, 0.3f, 2},
};
static const attn_case drop_big_cases[] = {
    {2, 3, 7, 33, 7, 0, 0, 1, 0, 0.3f, 5},
    {3, 2, 7, 7, 64, 1, 0, 1, 1, 0.9f, 6},
    {2, 4, 33, 33, 16, 1, 0, 0, 1, 0.3f, 99},
    {3, 2, 1, 65, 33, 1, 64, 1, 2, 0.9f, 3},
    {3, 1, 33, 1, 7, 0, 0, 1, 0, 0.3f, 8},
    {2, 2, 33, 129, 8, 1, 96, 1, 2, 0.3f, 0xFFFFFFFFFFFFFFFFull},
};

START_TEST(attention_dropout_forward_matches_mask_reference)
{
    size_t dropped = 0, total = 0;
    for (size_t i = 0; i < sizeof drop_fd_cases / sizeof drop_fd_cases[0]; i++)
        check_attention_forward(&drop_fd_cases[i]);
    for (size_t i = 0; i < sizeof drop_big_cases / sizeof drop_big_cases[0]; i++) {
        const attn_case *c = &drop_big_cases[i];
        if (c->drop == 0.3f) {
            dropped += check_attention_forward(c);
            total += (size_t)c->B * c->H * c->Tq * c->Tk;
        } else {
            check_attention_forward(c);
        }
    }
    /* the reference's own mask drops about p of the elements */
    double frac = (double)dropped / (double)total;
    ck_assert_msg(fabs(frac - 0.3) < 0.02, "dropped fraction %.4f at p = 0.3", frac);
    /* p = 0 with a seed set: the same bits as without the fields, on every layout */
    static const attn_case zero[] = {
        {3, 2, 7, 7, 64, 1, 0, 1, 1, 0.0f, 42},
        {2, 2, 5, 129, 8, 1, 124, 1, 2, 0.0f, 43},
        {2, 3, 7, 33, 7, 0, 0, 1, 0, 0.0f, 44},
    };
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
        check_attention_forward(&zero[i]);
}
END_TEST

START_TEST(attention_dropout_backward_fd_and_reference)
{
    if (!have(CLF_OP_ATTENTION_BACKWARD))
        return;
    for (size_t i = 0; i < sizeof drop_fd_cases / sizeof drop_fd_cases[0]; i++)
        check_attention_backward(&drop_fd_cases[i], 1);
    for (size_t i = 0; i < sizeof drop_big_cases / sizeof drop_big_cases[0]; i++)
        if (!clf_test_too_big(attn_work(&drop_big_cases[i])))
            check_attention_backward(&drop_big_cases[i], 0);
    /* the same bits run after run, and p = 0 with a seed is the op without dropout */
    attn_case c = drop_big_cases[clf_test_small() ? 0 : 2];
    attn_geo g = attn_geometry(&c);
    float *kvf = clf_test_frand(g.nkv, 50, -1, 1), *dOf = clf_test_frand(g.no, 51, -1, 1);
    int32_t *M = attn_mask(&g);
    float *a1 = malloc(g.nkv * 4), *a2 = malloc(g.nkv * 4);
    run_attn_backward(&g, kvf, kvf, M, dOf, a1, a1);
    run_attn_backward(&g, kvf, kvf, M, dOf, a2, a2);
    ck_assert_msg(memcmp(a1, a2, g.nkv * 4) == 0,
                  "%s: attention_backward with dropout is not the same bits run after run",
                  clf_test_be_name);
    g.a.dropout_p = 0.0f;
    run_attn_backward(&g, kvf, kvf, M, dOf, a1, a1);
    g.a.dropout_seed = 0;
    run_attn_backward(&g, kvf, kvf, M, dOf, a2, a2);
    ck_assert_msg(memcmp(a1, a2, g.nkv * 4) == 0,
                  "%s: dropout_p = 0 with a seed changed attention_backward's bits",
                  clf_test_be_name);
    free(kvf), free(dOf), free(M), free(a1), free(a2);
}
END_TEST

START_TEST(attention_dropout_p_outside_0_1_is_refused)
{
    float x[4] = {1, 2, 3, 4};
    clf_buffer *b = up(x, sizeof x);
    clf_attention_backward_args ba = {.fwd = {.batch = 1,
                                              .heads = 1,
                                              .q_len = 1,
                                              .kv_len = 1,
                                              .head_dim = 1,
                                              .q = P(b),
                                              .k = P(b),
                                              .v = P(b),
                                              .out = clf_ptr_add(P(b), 4),
                                              .q_ld = 1,
                                              .k_ld = 1,
                                              .v_ld = 1,
                                              .out_ld = 1,
                                              .scale = 1.0f},
                                      .dout = clf_ptr_add(P(b), 4),
                                      .dq = clf_ptr_add(P(b), 8),
                                      .dk = clf_ptr_add(P(b), 12),
                                      .dv = clf_ptr_add(P(b), 12)};
    const float bad[] = {1.0f, -0.1f, NAN, 2.0f};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ba.fwd.dropout_p = bad[i];
        ck_assert_int_eq(clf_op_attention(clf_test_api, clf_test_be, &ba.fwd), CLF_ERR_INPUT);
        ck_assert_ptr_nonnull(strstr(clf_last_error(), "dropout_p"));
        if (clf_test_api->supports(clf_test_be, CLF_OP_ATTENTION_BACKWARD)) {
            ck_assert_int_eq(clf_op_attention_backward(clf_test_api, clf_test_be, &ba),
                             CLF_ERR_INPUT);
            ck_assert_ptr_nonnull(strstr(clf_last_error(), "dropout_p"));
        }
    }
    clf_test_api->free(clf_test_be, b);
}
END_TEST

/* ---- determinism ---- */

enum { DET_R = 300, DET_C = 96, DET_V = 7, DET_ROWS = 600, DET_DIM = 130, DET_N = 200003 };

/* Runs the row-reducing ops on a size where the CPU backend goes parallel; writes dalpha,
 * dbeta, dtable, dk|dv and the sum of squares into out (concatenated). */
static size_t det_run(float *out)
{
    size_t o = 0;
    float *x = clf_test_frand(DET_R * DET_C, 100, -1, 1), *al = clf_test_frand(DET_C, 101, -1, 1);
    float *dy = clf_test_frand(DET_R * DET_C, 102, -1, 1), *dx = fconst(DET_R * DET_C, 0);
    float *dal = fconst(DET_C, 0.5f), *dbt = fconst(DET_C, 0.5f);
    run_ln_backward(x, al, dy, DET_R, DET_C, CLF_LN_STANDARD, 1e-5f, 0, dx, dal, dbt);
    memcpy(out + o, dal, DET_C * 4), o += DET_C;
    memcpy(out + o, dbt, DET_C * 4), o += DET_C;
    int32_t *ids = malloc(DET_ROWS * 4);
    for (int r = 0; r < DET_ROWS; r++)
        ids[r] = (r * 5) % DET_V;
    float *dout = clf_test_frand((size_t)DET_ROWS * DET_DIM, 103, -1, 1);
    float *dt = fconst(DET_V * DET_DIM, 0.25f);
    run_embed_backward(ids, dout, DET_ROWS, DET_DIM, DET_V, 1.7f, dt);
    memcpy(out + o, dt, DET_V * DET_DIM * 4), o += DET_V * DET_DIM;
    attn_case c = {4, 2, 33, 33, 16, 1, 0, 1, 1, 0, 0};
    attn_geo g = attn_geometry(&c);
    float *kvf = clf_test_frand(g.nkv, 104, -2, 2), *dOf = clf_test_frand(g.no, 105, -1, 1);
    float *got = malloc(g.nkv * 4);
    int32_t *M = attn_mask(&g);
    run_attn_backward(&g, kvf, kvf, M, dOf, got, got);
    memcpy(out + o, got, g.nkv * 4), o += g.nkv;
    float *big = clf_test_frand(DET_N, 106, -1, 1);
    clf_buffer *bx = up(big, DET_N * 4), *bo = up(NULL, 4);
    CLF_ASSERT_OK(clf_test_api->sum_squares(clf_test_be, P(bo), P(bx), DET_N));
    down(bo, out + o, 4), o += 1;
    clf_test_api->free(clf_test_be, bx), clf_test_api->free(clf_test_be, bo);
    free(x), free(al), free(dy), free(dx), free(dal), free(dbt), free(ids), free(dout), free(dt);
    free(kvf), free(dOf), free(got), free(M), free(big);
    return o;
}

START_TEST(row_reductions_are_deterministic)
{
    if (!have(CLF_OP_LAYERNORM_BACKWARD) || !have(CLF_OP_EMBED_BACKWARD) ||
        !have(CLF_OP_ATTENTION_BACKWARD) || !have(CLF_OP_SUM_SQUARES))
        return;
    attn_case c = {4, 2, 33, 33, 16, 1, 0, 1, 1, 0, 0};
    attn_geo g = attn_geometry(&c);
    size_t cap = 2 * DET_C + DET_V * DET_DIM + g.nkv + 1;
    float *a = malloc(cap * 4), *b = malloc(cap * 4);
    size_t n = det_run(a);
    ck_assert_uint_le(n, cap);
    det_run(b);
    ck_assert_msg(memcmp(a, b, n * 4) == 0, "%s: two runs differ", clf_test_be_name);
    if (clf_test_is_cpu()) /* and the thread count does not matter */
        clf_test_cpu_threads_same_bits(det_run, a, b, n);
    free(a), free(b);
}
END_TEST

/* ---- the suite ---- */

CLF_TEST_BACKENDS_MAIN("train_ops_attention", attention_backward_finite_differences,
                       attention_backward_awkward_sizes,
                       attention_dropout_forward_matches_mask_reference,
                       attention_dropout_backward_fd_and_reference,
                       attention_dropout_p_outside_0_1_is_refused, row_reductions_are_deterministic)
