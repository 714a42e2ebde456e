/* The training ops of the backend ABI (version 2), on every backend the build has: "cpu",
 * and "opencl" when it is built and finds a device. A backend that does not support an op
 * yet is told about in one line and skipped for that op (the CPU backend must support all).
 *
 * Every backward op is checked twice:
 *  - against central differences of a double-precision forward written here
 *    (L = sum(dy * f(x)), dL/dx by (L(x + h) - L(x - h)) / 2h, h = 1e-6 max(1, |x|)), on
 *    small shapes that hit the corner cases (repeated ids, masks, causal, cross and fused
 *    [q|k|v] attention, a fully masked row); the analytic double references below are
 *    checked against the same differences;
 *  - against those analytic double references on awkward sizes (1, 7, 33, 65, 129).
 * Tolerances, as relative errors (max |got - want| / max |want|, clf_test_rel_err):
 *   TOL_FD      1e-3  a backend's float gradient vs the finite differences
 *   TOL_REF_FD  1e-7  this file's analytic double gradients vs the finite differences
 *   TOL_REF     1e-5  CPU vs the analytic reference (float sums of up to a few hundred terms)
 *   TOL_REF_OCL 1e-4  OpenCL vs the same: float reductions in another order (as test_opencl)
 *   TOL_ROUND   1e-6  a few roundings per element: embed_backward, dropout's scale, adam's
 *                     param, m and v, sum_squares (one rounding of a double sum; OpenCL:
 *                     1e-5, a float tree sum)
 *   TOL_ADAM_STEP 1e-4 the update p_final - p_initial of 5 Adam steps (about 5 lr), which
 *                     the float parameter's roundings dominate
 *   exact             relu_backward, fill, dropout's mask and p = 0, ignored rows, the
 *                     columns attention_backward must not touch, run-to-run determinism
 * CLF_TEST_VERBOSE=1 prints every measured error. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/backend.h"
#include "testutil.h"

#define TOL_FD        1e-3
#define TOL_REF_FD    1e-7
#define TOL_REF       1e-5
#define TOL_REF_OCL   1e-4
#define TOL_ROUND     1e-6
#define TOL_ADAM_STEP 1e-4    /* a 5-step Adam update vs the float parameter's 5 roundings */
#define FD_H          1e-6    /* relative step: truncation ~h^2, cancellation ~1e-16/h */
#define SENTINEL      777.25f /* pre-filled where an op must not write */

/* The backend of the running test is testutil's clf_test_api / clf_test_be, opened by its
 * TCase's fixture (one process per test). */

/* Tolerance of a check whose result is a float reduction. */
static double tol_reduce(void)
{
    return clf_test_is_cpu() ? TOL_REF : TOL_REF_OCL;
}

/* 1 when the backend has op; the CPU backend must, another one is skipped for it. */
static int have(clf_op op)
{
    return clf_test_have("train_ops", op, clf_test_api->supports(clf_test_be, op));
}

/* ---- host helpers ---- */

static clf_ptr P(clf_buffer *b)
{
    return (clf_ptr){b, 0};
}

static clf_buffer *up(const void *host, size_t bytes)
{
    return clf_test_upload(clf_test_api, clf_test_be, host, bytes);
}

static void down(clf_buffer *b, void *host, size_t bytes)
{
    CLF_ASSERT_OK(clf_test_api->download(clf_test_be, host, P(b), bytes));
}

static float *fconst(size_t n, float v)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < n; i++)
        x[i] = v;
    return x;
}

/* Fails unless the relative error of got (float) against want (double) is <= tol. */
static void expect_close(const char *what, const float *got, const double *want, size_t n,
                         double tol)
{
    double e = clf_test_rel_err_d(got, NULL, want, n);
    if (getenv("CLF_TEST_VERBOSE"))
        printf("train_ops: %-7s %-60s rel err %.2e (tol %.0e)\n", clf_test_be_name, what, e, tol);
    ck_assert_msg(e <= tol, "%s: %s: relative error %.3g > %.3g", clf_test_be_name, what, e, tol);
}

/* The same for this file's own double gradient against finite differences. */
static void expect_ref_close(const char *what, const double *ref, const double *fd, size_t n)
{
    double e = clf_test_rel_err_d(NULL, ref, fd, n);
    if (getenv("CLF_TEST_VERBOSE"))
        printf("train_ops: reference %-50s vs fd: rel err %.2e\n", what, e);
    ck_assert_msg(e <= TOL_REF_FD, "reference %s vs finite differences: relative error %.3g", what,
                  e);
}

/* dL/dx[idx[t]] for t < m by central differences (idx NULL: x[0..m)). */
typedef double (*loss_fn)(void *user);
static void fd_grad(double *x, const size_t *idx, size_t m, loss_fn f, void *user, double *g)
{
    for (size_t t = 0; t < m; t++) {
        size_t i = idx ? idx[t] : t;
        double save = x[i], h = FD_H * (fabs(save) > 1.0 ? fabs(save) : 1.0);
        x[i] = save + h;
        double lp = f(user);
        x[i] = save - h;
        double lm = f(user);
        x[i] = save;
        g[t] = (lp - lm) / (2.0 * h);
    }
}

/* ---- relu_backward ---- */

START_TEST(relu_backward_exact_aliased_and_fd)
{
    if (!have(CLF_OP_RELU_BACKWARD))
        return;
    static const size_t sizes[] = {1, 7, 33, 65, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        if (clf_test_too_big((double)n))
            continue;
        float *x = clf_test_frand(n, 1, -1, 1), *dy = clf_test_frand(n, 2, -1, 1),
              *y = malloc(n * 4);
        float *want = malloc(n * 4), *got = malloc(n * 4);
        for (size_t i = 0; i < n; i++) {
            if (i % 5 == 3)
                x[i] = 0.0f; /* relu'(0) = 0, as PyTorch's threshold_backward */
            y[i] = x[i] > 0 ? x[i] : 0.0f;
            want[i] = y[i] > 0 ? dy[i] : 0.0f;
        }
        clf_buffer *ddy = up(dy, n * 4), *dyb = up(y, n * 4), *ddx = up(NULL, n * 4);
        CLF_ASSERT_OK(clf_test_api->relu_backward(clf_test_be, P(ddx), P(ddy), P(dyb), n));
        down(ddx, got, n * 4);
        ck_assert_msg(memcmp(got, want, n * 4) == 0, "relu_backward n=%zu", n);
        /* dx aliases dy */
        CLF_ASSERT_OK(clf_test_api->relu_backward(clf_test_be, P(ddy), P(ddy), P(dyb), n));
        down(ddy, got, n * 4);
        ck_assert_msg(memcmp(got, want, n * 4) == 0, "relu_backward in place n=%zu", n);
        clf_test_api->free(clf_test_be, ddy), clf_test_api->free(clf_test_be, dyb),
            clf_test_api->free(clf_test_be, ddx);
        free(x), free(dy), free(y), free(want), free(got);
    }
    /* finite differences of L = sum(dy * relu(x)), x away from the kink */
    enum { N = 41 };
    float *x = clf_test_frand(N, 3, -1, 1), *dy = clf_test_frand(N, 4, -1, 1), y[N], got[N];
    for (int i = 0; i < N; i++) {
        x[i] += x[i] > 0 ? 0.1f : -0.1f;
        y[i] = x[i] > 0 ? x[i] : 0.0f;
    }
    double fd[N];
    for (int i = 0; i < N; i++) {
        double h = FD_H, xp = x[i] + h, xm = x[i] - h;
        fd[i] = dy[i] * ((xp > 0 ? xp : 0) - (xm > 0 ? xm : 0)) / (2 * h);
    }
    clf_buffer *ddy = up(dy, sizeof got), *dyb = up(y, sizeof got), *ddx = up(NULL, sizeof got);
    CLF_ASSERT_OK(clf_test_api->relu_backward(clf_test_be, P(ddx), P(ddy), P(dyb), N));
    down(ddx, got, sizeof got);
    expect_close("relu_backward vs finite differences", got, fd, N, TOL_FD);
    clf_test_api->free(clf_test_be, ddy), clf_test_api->free(clf_test_be, dyb),
        clf_test_api->free(clf_test_be, ddx);
    free(x), free(dy);
}
END_TEST

/* ---- layernorm_backward ---- */

/* out = alpha * (x - mean) / D + beta per row, D as the style says (double) */
static void ln_fwd(const double *x, const double *al, const double *bt, int R, int C, int style,
                   double eps, double *out)
{
    for (int r = 0; r < R; r++) {
        const double *xr = x + (size_t)r * C;
        double mean = 0, ss = 0;
        for (int c = 0; c < C; c++)
            mean += xr[c];
        mean /= C;
        for (int c = 0; c < C; c++)
            ss += (xr[c] - mean) * (xr[c] - mean);
        double D = style == CLF_LN_TUTORIAL ? sqrt(ss / (C - 1)) + eps : sqrt(ss / C + eps);
        for (int c = 0; c < C; c++)
            out[(size_t)r * C + c] = al[c] * (xr[c] - mean) / D + bt[c];
    }
}

/* dx = (the chain rule through the explicit Jacobian of xhat), dalpha += dy xhat,
 * dbeta += dy. d xhat_k / d x_i = (delta_ki - 1/C) / D - c_k / D^2 * dD/dx_i with
 * dD/dx_i = c_i / ((C - 1) std) (tutorial) or c_i / (C D) (standard). */
static void ln_bwd_ref(const double *x, const double *al, const double *dy, int R, int C, int style,
                       double eps, double *dx, double *dal, double *dbt)
{
    double *c = clf_test_dalloc((size_t)C);
    for (int r = 0; r < R; r++) {
        const double *xr = x + (size_t)r * C, *g = dy + (size_t)r * C;
        double mean = 0, ss = 0;
        for (int k = 0; k < C; k++)
            mean += xr[k];
        mean /= C;
        for (int k = 0; k < C; k++) {
            c[k] = xr[k] - mean;
            ss += c[k] * c[k];
        }
        double sd = sqrt(ss / (C - 1 > 0 ? C - 1 : 1));
        double D = style == CLF_LN_TUTORIAL ? sd + eps : sqrt(ss / C + eps);
        for (int i = 0; i < C; i++) {
            double dD =
                style == CLF_LN_TUTORIAL ? (sd > 0 ? c[i] / ((C - 1) * sd) : 0) : c[i] / (C * D);
            double s = 0;
            for (int k = 0; k < C; k++)
                s += g[k] * al[k] * (((k == i) - 1.0 / C) / D - c[k] / (D * D) * dD);
            dx[(size_t)r * C + i] = s;
            dal[i] += g[i] * c[i] / D;
            dbt[i] += g[i];
        }
    }
    free(c);
}

/* The model's eps, except with two columns: there xhat = +-1/sqrt(2) (or +-1) whatever x
 * is, up to eps, so dx is O(eps) and the check would compare rounding noise; a large eps
 * makes the dependence, and the gradient, O(1). */
static float ln_eps(int style, int cols)
{
    return cols == 2 ? 0.5f : style == CLF_LN_TUTORIAL ? 1e-6f : 1e-5f;
}

typedef struct ln_user {
    double *x, *al, *bt, *dy, *out;
    int R, C, style;
    double eps;
} ln_user;

static double ln_loss(void *u)
{
    ln_user *s = u;
    ln_fwd(s->x, s->al, s->bt, s->R, s->C, s->style, s->eps, s->out);
    double L = 0;
    for (size_t i = 0; i < (size_t)s->R * s->C; i++)
        L += s->dy[i] * s->out[i];
    return L;
}

/* Runs layernorm_backward on the backend; dx, dal, dbt hold the initial values (used
 * when accumulate, and always for dal/dbt) and receive the result. */
static void run_ln_backward(const float *x, const float *al, const float *dy, int R, int C,
                            int style, float eps, int accumulate, float *dx, float *dal, float *dbt)
{
    size_t n = (size_t)R * C;
    clf_buffer *bx = up(x, n * 4), *bal = up(al, C * 4), *bdy = up(dy, n * 4);
    clf_buffer *bdx = up(dx, n * 4), *bda = dal ? up(dal, C * 4) : NULL;
    clf_buffer *bdb = dbt ? up(dbt, C * 4) : NULL;
    clf_layernorm_backward_args a = {.dx = P(bdx),
                                     .dy = P(bdy),
                                     .x = P(bx),
                                     .alpha = P(bal),
                                     .dalpha = P(bda),
                                     .dbeta = P(bdb),
                                     .rows = R,
                                     .cols = C,
                                     .style = (clf_ln_style)style,
                                     .eps = eps,
                                     .accumulate = accumulate};
    CLF_ASSERT_OK(clf_test_api->layernorm_backward(clf_test_be, &a));
    down(bdx, dx, n * 4);
    if (dal)
        down(bda, dal, C * 4);
    if (dbt)
        down(bdb, dbt, C * 4);
    clf_test_api->free(clf_test_be, bx), clf_test_api->free(clf_test_be, bal),
        clf_test_api->free(clf_test_be, bdy), clf_test_api->free(clf_test_be, bdx);
    if (bda)
        clf_test_api->free(clf_test_be, bda);
    if (bdb)
        clf_test_api->free(clf_test_be, bdb);
}

START_TEST(layernorm_backward_finite_differences)
{
    if (!have(CLF_OP_LAYERNORM_BACKWARD))
        return;
    static const int shapes[][2] = {{3, 5}, {2, 2}, {1, 9}, {4, 3}};
    for (int style = 0; style < 2; style++)
        for (int s = 0; s < 4; s++) {
            int R = shapes[s][0], C = shapes[s][1];
            size_t n = (size_t)R * C;
            float eps = ln_eps(style, C);
            float *x = clf_test_frand(n, 10, -2, 3), *al = clf_test_frand(C, 11, 0.5f, 1.5f);
            float *bt = clf_test_frand(C, 12, -1, 1), *dy = clf_test_frand(n, 13, -1, 1);
            ln_user u = {clf_test_to_double(x, n),
                         clf_test_to_double(al, C),
                         clf_test_to_double(bt, C),
                         clf_test_to_double(dy, n),
                         clf_test_dalloc(n),
                         R,
                         C,
                         style,
                         eps};
            double *fdx = clf_test_dalloc(n), *fda = clf_test_dalloc(C), *fdb = clf_test_dalloc(C);
            fd_grad(u.x, NULL, n, ln_loss, &u, fdx);
            fd_grad(u.al, NULL, C, ln_loss, &u, fda);
            fd_grad(u.bt, NULL, C, ln_loss, &u, fdb);
            double *rdx = clf_test_dalloc(n), *rda = clf_test_dalloc(C), *rdb = clf_test_dalloc(C);
            ln_bwd_ref(u.x, u.al, u.dy, R, C, style, eps, rdx, rda, rdb);
            expect_ref_close("layernorm dx", rdx, fdx, n);
            expect_ref_close("layernorm dalpha", rda, fda, C);
            expect_ref_close("layernorm dbeta", rdb, fdb, C);
            float *dx = fconst(n, 0), *dal = fconst(C, 0), *dbt = fconst(C, 0);
            run_ln_backward(x, al, dy, R, C, style, eps, 0, dx, dal, dbt);
            char what[96];
            snprintf(what, sizeof what, "layernorm_backward style=%d %dx%d dx vs fd", style, R, C);
            expect_close(what, dx, fdx, n, TOL_FD);
            expect_close("layernorm_backward dalpha vs fd", dal, fda, C, TOL_FD);
            expect_close("layernorm_backward dbeta vs fd", dbt, fdb, C, TOL_FD);
            free(x), free(al), free(bt), free(dy), free(dx), free(dal), free(dbt);
            free(u.x), free(u.al), free(u.bt), free(u.dy), free(u.out);
            free(fdx), free(fda), free(fdb), free(rdx), free(rda), free(rdb);
        }
}
END_TEST

START_TEST(layernorm_backward_awkward_sizes_and_accumulate)
{
    if (!have(CLF_OP_LAYERNORM_BACKWARD))
        return;
    static const int rows[] = {1, 7, 33, 65}, cols[] = {1, 2, 7, 33, 65, 129};
    for (int style = 0; style < 2; style++)
        for (int ri = 0; ri < 4; ri++)
            for (int ci = 0; ci < 6; ci++)
                for (int acc = 0; acc < 2; acc++) {
                    int R = rows[ri], C = cols[ci];
                    if (style == CLF_LN_TUTORIAL && C < 2)
                        continue; /* the unbiased std needs two columns */
                    size_t n = (size_t)R * C;
                    float eps = ln_eps(style, C);
                    float *x = clf_test_frand(n, 20 + ri, -1, 1),
                          *al = clf_test_frand(C, 21, -1.5f, 1.5f);
                    float *dy = clf_test_frand(n, 22 + ci, -1, 1);
                    for (size_t i = 0; i < n; i++)
                        x[i] = x[i] * 3.0f + 0.5f; /* a mean far from 0 tests the centring */
                    /* accumulate: dx starts non-zero and must be added to; dalpha and
                     * dbeta always accumulate onto what they hold */
                    float *dx = acc ? clf_test_frand(n, 23, -1, 1) : fconst(n, NAN);
                    float *dal = clf_test_frand(C, 24, -1, 1), *dbt = clf_test_frand(C, 25, -1, 1);
                    double *rdx = clf_test_dalloc(n), *rda = clf_test_to_double(dal, C),
                           *rdb = clf_test_to_double(dbt, C);
                    double *xd = clf_test_to_double(x, n), *ald = clf_test_to_double(al, C),
                           *dyd = clf_test_to_double(dy, n);
                    ln_bwd_ref(xd, ald, dyd, R, C, style, eps, rdx, rda, rdb);
                    if (acc)
                        for (size_t i = 0; i < n; i++)
                            rdx[i] += dx[i];
                    /* without dalpha and dbeta on odd sizes: they are optional */
                    int with_params = !(R == 7 && acc);
                    run_ln_backward(x, al, dy, R, C, style, eps, acc, dx, with_params ? dal : NULL,
                                    with_params ? dbt : NULL);
                    char what[96];
                    snprintf(what, sizeof what, "layernorm_backward style=%d %dx%d acc=%d dx",
                             style, R, C, acc);
                    expect_close(what, dx, rdx, n, tol_reduce());
                    if (with_params) {
                        expect_close("layernorm_backward dalpha", dal, rda, C, tol_reduce());
                        expect_close("layernorm_backward dbeta", dbt, rdb, C, tol_reduce());
                    }
                    free(x), free(al), free(dy), free(dx), free(dal), free(dbt);
                    free(rdx), free(rda), free(rdb), free(xd), free(ald), free(dyd);
                }
}
END_TEST

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
        check_attention_backward(&drop_big_cases[i], 0);
    /* the same bits run after run, and p = 0 with a seed is the op without dropout */
    attn_case c = drop_big_cases[2];
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
        ck_assert_int_eq(clf_test_api->attention(clf_test_be, &ba.fwd), CLF_ERR_INPUT);
        ck_assert_ptr_nonnull(strstr(clf_last_error(), "dropout_p"));
        if (clf_test_api->supports(clf_test_be, CLF_OP_ATTENTION_BACKWARD)) {
            ck_assert_int_eq(clf_test_api->attention_backward(clf_test_be, &ba), CLF_ERR_INPUT);
            ck_assert_ptr_nonnull(strstr(clf_last_error(), "dropout_p"));
        }
    }
    clf_test_api->free(clf_test_be, b);
}
END_TEST

/* ---- embed_backward ---- */

typedef struct embed_user {
    double *table, *dout, *pe;
    const int32_t *ids;
    int rows, seq_len, dim;
    double scale;
} embed_user;

/* L = sum(dout * (table[ids] * scale + pe)) */
static double embed_loss(void *u)
{
    embed_user *s = u;
    double L = 0;
    for (int r = 0; r < s->rows; r++)
        for (int c = 0; c < s->dim; c++)
            L += s->dout[(size_t)r * s->dim + c] *
                 (s->table[(size_t)s->ids[r] * s->dim + c] * s->scale +
                  s->pe[(size_t)(r % s->seq_len) * s->dim + c]);
    return L;
}

static void run_embed_backward(const int32_t *ids, const float *dout, int rows, int dim, int vocab,
                               float scale, float *dtable)
{
    clf_buffer *bi = up(ids, rows * 4), *bo = up(dout, (size_t)rows * dim * 4);
    clf_buffer *bt = up(dtable, (size_t)vocab * dim * 4);
    clf_embed_backward_args a = {.dtable = P(bt),
                                 .dout = P(bo),
                                 .ids = P(bi),
                                 .rows = rows,
                                 .dim = dim,
                                 .vocab = vocab,
                                 .scale = scale};
    CLF_ASSERT_OK(clf_test_api->embed_backward(clf_test_be, &a));
    down(bt, dtable, (size_t)vocab * dim * 4);
    clf_test_api->free(clf_test_be, bi), clf_test_api->free(clf_test_be, bo),
        clf_test_api->free(clf_test_be, bt);
}

START_TEST(embed_backward_fd_repeats_skips_and_accumulates)
{
    if (!have(CLF_OP_EMBED_BACKWARD))
        return;
    { /* finite differences, ids repeated */
        enum { V = 4, Dm = 5, R = 9, S = 3 };
        int32_t ids[R] = {2, 0, 2, 3, 2, 0, 1, 2, 0};
        float *dout = clf_test_frand(R * Dm, 40, -1, 1), *table = clf_test_frand(V * Dm, 41, -1, 1);
        float *pe = clf_test_frand(S * Dm, 42, -1, 1), *got = fconst(V * Dm, 0);
        embed_user u = {clf_test_to_double(table, V * Dm),
                        clf_test_to_double(dout, R * Dm),
                        clf_test_to_double(pe, S * Dm),
                        ids,
                        R,
                        S,
                        Dm,
                        2.5};
        double fd[V * Dm];
        fd_grad(u.table, NULL, V * Dm, embed_loss, &u, fd);
        run_embed_backward(ids, dout, R, Dm, V, 2.5f, got);
        expect_close("embed_backward vs finite differences", got, fd, V * Dm, TOL_FD);
        free(dout), free(table), free(pe), free(got), free(u.table), free(u.dout), free(u.pe);
    }
    static const int rows[] = {1, 7, 33, 65}, dims[] = {1, 7, 33, 65};
    for (int ri = 0; ri < 4; ri++)
        for (int di = 0; di < 4; di++) {
            enum { V = 5 };
            int R = rows[ri], Dm = dims[di];
            int32_t *ids = malloc(R * 4);
            for (int r = 0; r < R; r++) /* repeats, and -1, V and 99 which are skipped */
                ids[r] = r % 11 == 4 ? -1 : r % 13 == 6 ? V : r % 17 == 9 ? 99 : (r * 7) % V;
            float *dout = clf_test_frand((size_t)R * Dm, 43, -1, 1);
            float *dt = clf_test_frand((size_t)V * Dm, 44, -1, 1); /* accumulated onto */
            double *want = clf_test_to_double(dt, (size_t)V * Dm);
            for (int r = 0; r < R; r++)
                if (ids[r] >= 0 && ids[r] < V)
                    for (int c = 0; c < Dm; c++)
                        want[(size_t)ids[r] * Dm + c] += 0.75 * dout[(size_t)r * Dm + c];
            run_embed_backward(ids, dout, R, Dm, V, 0.75f, dt);
            char what[64];
            snprintf(what, sizeof what, "embed_backward rows=%d dim=%d", R, Dm);
            expect_close(what, dt, want, (size_t)V * Dm, TOL_ROUND);
            free(ids), free(dout), free(dt), free(want);
        }
}
END_TEST

/* ---- dropout ---- */

static void run_dropout(const float *x, float *out, size_t n, float p, uint64_t seed, int in_place)
{
    clf_buffer *bx = up(x, n * 4), *bo = in_place ? bx : up(NULL, n * 4);
    clf_dropout_args a = {.out = P(bo), .x = P(bx), .n = n, .p = p, .seed = seed};
    CLF_ASSERT_OK(clf_test_api->dropout(clf_test_be, &a));
    down(bo, out, n * 4);
    clf_test_api->free(clf_test_be, bx);
    if (!in_place)
        clf_test_api->free(clf_test_be, bo);
}

START_TEST(dropout_mask_scale_fraction_and_aliasing)
{
    if (!have(CLF_OP_DROPOUT))
        return;
    enum { N = 100003 };
    float *x = clf_test_frand(N, 50, 0.5f, 1.5f), *got = malloc(N * 4), *got2 = malloc(N * 4);
    double *want = clf_test_dalloc(N);
    static const float ps[] = {0.1f, 0.5f, 0.9f};
    for (int k = 0; k < 3; k++) {
        float p = ps[k];
        uint64_t seed = 0x5eedULL + 977 * (uint64_t)k;
        uint32_t thr = clf_dropout_threshold(p);
        size_t dropped = 0;
        for (size_t i = 0; i < N; i++)
            want[i] = clf_dropout_bits(seed, i) >= thr ? (double)x[i] / (1.0 - p) : 0.0;
        run_dropout(x, got, N, p, seed, 0);
        for (size_t i = 0; i < N; i++) {
            ck_assert_msg((got[i] != 0.0f) == (want[i] != 0.0), "dropout p=%g: element %zu %s",
                          (double)p, i, got[i] != 0.0f ? "kept, should drop" : "dropped");
            dropped += got[i] == 0.0f;
        }
        char what[64];
        snprintf(what, sizeof what, "dropout p=%.1f kept values (scale)", (double)p);
        expect_close(what, got, want, N, TOL_ROUND);
        double frac = (double)dropped / N, sd = sqrt(p * (1.0 - p) / N);
        ck_assert_msg(fabs(frac - p) < 5 * sd, "dropout p=%g dropped %.4f", (double)p, frac);
        run_dropout(x, got2, N, p, seed, 1); /* out aliases x */
        ck_assert_msg(memcmp(got, got2, N * 4) == 0, "dropout in place differs, p=%g", (double)p);
    }
    run_dropout(x, got, N, 0.0f, 42, 0); /* p = 0: the identity, bit for bit */
    ck_assert_msg(memcmp(got, x, N * 4) == 0, "dropout p=0 is not the identity");
    /* another seed, another mask */
    run_dropout(x, got, 1000, 0.5f, 1, 0);
    run_dropout(x, got2, 1000, 0.5f, 2, 0);
    ck_assert_msg(memcmp(got, got2, 1000 * 4) != 0, "dropout ignores the seed");
    free(x), free(got), free(got2), free(want);
}
END_TEST

/* ---- cross_entropy ---- */

/* loss of one row (double), PyTorch's CrossEntropyLoss(label_smoothing, reduction='none') */
static double ce_row(const double *x, int C, int t, double ls)
{
    double mx = x[0], s = 0, sl = 0;
    for (int j = 1; j < C; j++)
        mx = x[j] > mx ? x[j] : mx;
    for (int j = 0; j < C; j++)
        s += exp(x[j] - mx);
    double lse = mx + log(s);
    for (int j = 0; j < C; j++)
        sl += x[j] - lse;
    return -(1 - ls) * (x[t] - lse) - ls / C * sl;
}

typedef struct ce_user {
    double *x;
    const int32_t *t;
    int R, C, ignore;
    double ls;
} ce_user;

static int ce_ignored(const ce_user *s, int r)
{
    return s->t[r] == s->ignore || s->t[r] < 0 || s->t[r] >= s->C;
}

static double ce_loss(void *u)
{
    ce_user *s = u;
    double L = 0;
    for (int r = 0; r < s->R; r++)
        if (!ce_ignored(s, r))
            L += ce_row(s->x + (size_t)r * s->C, s->C, s->t[r], s->ls);
    return L;
}

/* loss[r] and dlogits = gs * (softmax - (1 - ls) onehot - ls / C), 0 on ignored rows */
static void ce_ref(const ce_user *s, double gs, double *loss, double *grad)
{
    for (int r = 0; r < s->R; r++) {
        const double *x = s->x + (size_t)r * s->C;
        double *g = grad + (size_t)r * s->C;
        loss[r] = 0;
        for (int j = 0; j < s->C; j++)
            g[j] = 0;
        if (ce_ignored(s, r))
            continue;
        loss[r] = ce_row(x, s->C, s->t[r], s->ls);
        double mx = x[0], sum = 0;
        for (int j = 1; j < s->C; j++)
            mx = x[j] > mx ? x[j] : mx;
        for (int j = 0; j < s->C; j++)
            sum += exp(x[j] - mx);
        for (int j = 0; j < s->C; j++)
            g[j] = gs * (exp(x[j] - mx) / sum - (j == s->t[r]) * (1 - s->ls) - s->ls / s->C);
    }
}

/* Runs cross_entropy; grad NULL: loss only; in_place: dlogits aliases logits. dlogits
 * starts as SENTINEL so that the zeroing of ignored rows shows. */
static void run_ce(const float *x, const int32_t *t, int R, int C, int ignore, float ls, float gs,
                   float *loss, float *grad, int in_place)
{
    size_t n = (size_t)R * C;
    float *sent = fconst(n, SENTINEL);
    clf_buffer *bx = up(x, n * 4), *bt = up(t, R * 4), *bl = up(NULL, R * 4);
    clf_buffer *bg = grad && !in_place ? up(sent, n * 4) : NULL;
    clf_cross_entropy_args a = {.loss = P(bl),
                                .dlogits = grad ? P(in_place ? bx : bg) : P(NULL),
                                .logits = P(bx),
                                .targets = P(bt),
                                .rows = R,
                                .cols = C,
                                .ignore_index = ignore,
                                .label_smoothing = ls,
                                .grad_scale = gs};
    CLF_ASSERT_OK(clf_test_api->cross_entropy(clf_test_be, &a));
    down(bl, loss, R * 4);
    if (grad)
        down(in_place ? bx : bg, grad, n * 4);
    clf_test_api->free(clf_test_be, bx), clf_test_api->free(clf_test_be, bt),
        clf_test_api->free(clf_test_be, bl);
    if (bg)
        clf_test_api->free(clf_test_be, bg);
    free(sent);
}

START_TEST(cross_entropy_smoothing_ignore_scale_aliasing_fd)
{
    if (!have(CLF_OP_CROSS_ENTROPY))
        return;
    static const int shapes[][2] = {{1, 1}, {7, 7}, {33, 65}, {5, 1000}, {3, 8000}};
    enum { IGNORE = 1 };
    for (int s = 0; s < 5; s++)
        for (int k = 0; k < 2; k++) {
            int R = shapes[s][0], C = shapes[s][1];
            if (clf_test_too_big((double)R * C))
                continue;
            size_t n = (size_t)R * C;
            float ls = k ? 0.1f : 0.0f, gs = k ? 0.25f : 1.0f;
            float *x = clf_test_frand(n, 60 + s, -8, 8), *loss = malloc(R * 4),
                  *grad = malloc(n * 4);
            int32_t *t = malloc(R * 4);
            for (int r = 0; r < R; r++) /* row 3 mod 4 is padding; row 5 an invalid target */
                t[r] = r % 4 == 3 ? IGNORE : r == 5 ? C + 3 : (r * 37 + 2) % C;
            if (C > 1)
                t[0] = 0;
            ce_user u = {clf_test_to_double(x, n), t, R, C, IGNORE, ls};
            double *rl = clf_test_dalloc(R), *rg = clf_test_dalloc(n);
            ce_ref(&u, gs, rl, rg);
            run_ce(x, t, R, C, IGNORE, ls, gs, loss, grad, k);
            char what[96];
            snprintf(what, sizeof what, "cross_entropy %dx%d ls=%.1f loss", R, C, (double)ls);
            expect_close(what, loss, rl, R, tol_reduce());
            snprintf(what, sizeof what, "cross_entropy %dx%d ls=%.1f gs=%.2f dlogits%s", R, C,
                     (double)ls, (double)gs, k ? " (in place)" : "");
            expect_close(what, grad, rg, n, tol_reduce());
            for (int r = 0; r < R; r++)
                if (ce_ignored(&u, r)) {
                    ck_assert_msg(loss[r] == 0.0f, "cross_entropy: ignored row %d has loss", r);
                    for (int j = 0; j < C; j++)
                        ck_assert_msg(grad[(size_t)r * C + j] == 0.0f,
                                      "cross_entropy: ignored row %d has a gradient", r);
                }
            run_ce(x, t, R, C, IGNORE, ls, gs, loss, NULL, 0); /* loss only */
            expect_close("cross_entropy loss without dlogits", loss, rl, R, tol_reduce());
            free(x), free(loss), free(grad), free(t), free(u.x), free(rl), free(rg);
        }
    /* finite differences of the summed loss */
    enum { R = 6, C = 9 };
    int32_t t[R] = {0, 4, IGNORE, 8, 3, 4};
    for (int k = 0; k < 2; k++) {
        float *x = clf_test_frand(R * C, 70 + k, -3, 3), loss[R], grad[R * C];
        ce_user u = {clf_test_to_double(x, R * C), t, R, C, IGNORE, k ? 0.1 : 0.0};
        double fd[R * C], rl[R], rg[R * C];
        fd_grad(u.x, NULL, R * C, ce_loss, &u, fd);
        ce_ref(&u, 1.0, rl, rg);
        expect_ref_close("cross_entropy dlogits", rg, fd, R * C);
        run_ce(x, t, R, C, IGNORE, (float)u.ls, 1.0f, loss, grad, 0);
        expect_close("cross_entropy dlogits vs finite differences", grad, fd, R * C, TOL_FD);
        free(x), free(u.x);
    }
}
END_TEST

/* ---- adam ---- */

START_TEST(adam_and_adamw_match_pytorch_formula)
{
    if (!have(CLF_OP_ADAM))
        return;
    enum { N = 1031, STEPS = 5 };
    /* the hyper-parameters as the op gets them (floats), so that the reference differs
     * from the op by the op's float arithmetic only */
    const double lr = 1e-3f, b1 = 0.9f, b2 = 0.98f, eps = 1e-9f, gs = 0.5f;
    for (int dec = 0; dec < 2; dec++) {
        double wd = dec ? 0.1f : 0.01f;
        float *p = clf_test_frand(N, 80, -1, 1), *m = fconst(N, 0), *v = fconst(N, 0);
        double *rp = clf_test_to_double(p, N), *rm = clf_test_dalloc(N), *rv = clf_test_dalloc(N);
        clf_buffer *bp = up(p, N * 4), *bm = up(m, N * 4), *bv = up(v, N * 4);
        for (int step = 1; step <= STEPS; step++) {
            float *g = clf_test_frand(N, 81 + step, -2, 2);
            for (int i = 0; i < N; i += 17)
                g[i] = 0.0f; /* a parameter without gradient this step */
            clf_buffer *bg = up(g, N * 4);
            double bc1 = 1 - pow(b1, step), bc2s = sqrt(1 - pow(b2, step));
            clf_adam_args a = {.param = P(bp),
                               .grad = P(bg),
                               .m = P(bm),
                               .v = P(bv),
                               .n = N,
                               .lr = (float)lr,
                               .beta1 = (float)b1,
                               .beta2 = (float)b2,
                               .eps = (float)eps,
                               .weight_decay = (float)wd,
                               .grad_scale = (float)gs,
                               .bias_correction1 = (float)bc1,
                               .sqrt_bias_correction2 = (float)bc2s,
                               .decoupled = dec};
            CLF_ASSERT_OK(clf_test_api->adam(clf_test_be, &a));
            for (int i = 0; i < N; i++) { /* torch.optim.Adam / AdamW, in double */
                double gi = g[i] * gs;
                if (dec)
                    rp[i] *= 1 - lr * wd;
                else
                    gi += wd * rp[i];
                rm[i] = b1 * rm[i] + (1 - b1) * gi;
                rv[i] = b2 * rv[i] + (1 - b2) * gi * gi;
                rp[i] -= lr / bc1 * rm[i] / (sqrt(rv[i]) / bc2s + eps);
            }
            float *g2 = malloc(N * 4);
            down(bg, g2, N * 4);
            ck_assert_msg(memcmp(g, g2, N * 4) == 0, "adam modified grad");
            clf_test_api->free(clf_test_be, bg);
            free(g), free(g2);
        }
        down(bp, p, N * 4), down(bm, m, N * 4), down(bv, v, N * 4);
        const char *name = dec ? "adamw" : "adam";
        char what[64];
        snprintf(what, sizeof what, "%s param after %d steps", name, STEPS);
        expect_close(what, p, rp, N, TOL_ROUND);
        snprintf(what, sizeof what, "%s m after %d steps", name, STEPS);
        expect_close(what, m, rm, N, TOL_ROUND);
        snprintf(what, sizeof what, "%s v after %d steps", name, STEPS);
        expect_close(what, v, rv, N, TOL_ROUND);
        /* the update itself, not only the parameter it lands on (about 5 lr in size) */
        float *p0 = clf_test_frand(N, 80, -1, 1), *step = malloc(N * 4);
        double *want_step = clf_test_dalloc(N);
        for (int i = 0; i < N; i++) {
            step[i] = (float)((double)p[i] - p0[i]);
            want_step[i] = rp[i] - p0[i];
        }
        snprintf(what, sizeof what, "%s update over %d steps", name, STEPS);
        expect_close(what, step, want_step, N, TOL_ADAM_STEP);
        free(p0), free(step), free(want_step);
        clf_test_api->free(clf_test_be, bp), clf_test_api->free(clf_test_be, bm),
            clf_test_api->free(clf_test_be, bv);
        free(p), free(m), free(v), free(rp), free(rm), free(rv);
    }
}
END_TEST

/* ---- sum_squares, fill ---- */

START_TEST(sum_squares_in_double)
{
    if (!have(CLF_OP_SUM_SQUARES))
        return;
    static const size_t sizes[] = {0, 1, 7, 33, 65, 100003, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        if (clf_test_too_big((double)n))
            continue;
        float *x = clf_test_frand(n + 1, 90, -3, 3), got;
        clf_buffer *bx = up(x, (n + 1) * 4), *bo = up(&(float){SENTINEL}, 4);
        /* x from element 1: an offset operand */
        CLF_ASSERT_OK(clf_test_api->sum_squares(clf_test_be, P(bo), clf_ptr_add(P(bx), 4), n));
        down(bo, &got, 4);
        double want = 0;
        for (size_t i = 1; i <= n; i++)
            want += (double)x[i] * x[i];
        char what[64];
        snprintf(what, sizeof what, "sum_squares n=%zu", n);
        expect_close(what, &got, &want, 1, clf_test_is_cpu() ? TOL_ROUND : TOL_REF_OCL / 10);
        clf_test_api->free(clf_test_be, bx), clf_test_api->free(clf_test_be, bo);
        free(x);
    }
}
END_TEST

START_TEST(fill_writes_exactly_its_span)
{
    if (!have(CLF_OP_FILL))
        return;
    static const size_t sizes[] = {0, 1, 7, 65, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s], total = n + 8;
        if (clf_test_too_big((double)n))
            continue;
        float *x = fconst(total, SENTINEL), *got = malloc(total * 4);
        clf_buffer *b = up(x, total * 4);
        CLF_ASSERT_OK(clf_test_api->fill(clf_test_be, clf_ptr_add(P(b), 4 * 3), -2.5f, n));
        down(b, got, total * 4);
        for (size_t i = 0; i < total; i++)
            ck_assert_msg(got[i] == (i >= 3 && i < 3 + n ? -2.5f : SENTINEL),
                          "fill n=%zu: element %zu is %g", n, i, (double)got[i]);
        /* the gradient zeroing */
        CLF_ASSERT_OK(clf_test_api->fill(clf_test_be, P(b), 0.0f, total));
        down(b, got, total * 4);
        for (size_t i = 0; i < total; i++)
            ck_assert(got[i] == 0.0f);
        clf_test_api->free(clf_test_be, b);
        free(x), free(got);
    }
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

/* ---- bad operands ---- */

/* st must be CLF_ERR_INPUT with a message naming op */
static void expect_refused(clf_status st, const char *op)
{
    ck_assert_msg(st == CLF_ERR_INPUT, "%s: %s with a too small buffer gave %d", clf_test_be_name,
                  op, (int)st);
    ck_assert_msg(strstr(clf_last_error(), op), "%s: the error does not name %s: %s",
                  clf_test_be_name, op, clf_last_error());
}

START_TEST(too_small_buffers_are_refused_by_op_name)
{
    clf_buffer *small, *big;
    CLF_ASSERT_OK(clf_test_api->alloc(clf_test_be, 16, &small));
    CLF_ASSERT_OK(clf_test_api->alloc(clf_test_be, 1 << 16, &big));
    float zeros[1024] = {0};
    /* ids 0, masks 0 */
    CLF_ASSERT_OK(clf_test_api->upload(clf_test_be, P(big), zeros, sizeof zeros));
    if (have(CLF_OP_RELU_BACKWARD))
        expect_refused(clf_test_api->relu_backward(clf_test_be, P(small), P(big), P(big), 8),
                       "relu_backward");
    if (have(CLF_OP_LAYERNORM_BACKWARD)) {
        clf_layernorm_backward_args a = {.dx = P(small),
                                         .dy = P(big),
                                         .x = clf_ptr_add(P(big), 1024),
                                         .alpha = P(big),
                                         .rows = 2,
                                         .cols = 4,
                                         .eps = 1e-6f};
        expect_refused(clf_test_api->layernorm_backward(clf_test_be, &a), "layernorm_backward");
    }
    if (have(CLF_OP_ATTENTION_BACKWARD)) {
        clf_attention_backward_args a = {.fwd = {.batch = 1,
                                                 .heads = 1,
                                                 .q_len = 4,
                                                 .kv_len = 4,
                                                 .head_dim = 4,
                                                 .q = P(big),
                                                 .k = P(big),
                                                 .v = P(big),
                                                 .q_ld = 4,
                                                 .k_ld = 4,
                                                 .v_ld = 4,
                                                 .out_ld = 4,
                                                 .scale = 0.5f},
                                         .dout = P(big),
                                         .dq = P(small),
                                         .dk = clf_ptr_add(P(big), 4096),
                                         .dv = clf_ptr_add(P(big), 8192)};
        expect_refused(clf_test_api->attention_backward(clf_test_be, &a), "attention_backward");
    }
    if (have(CLF_OP_EMBED_BACKWARD)) {
        clf_embed_backward_args a = {
            .dtable = P(small), .dout = P(big), .ids = P(big), .rows = 4, .dim = 4, .vocab = 3};
        expect_refused(clf_test_api->embed_backward(clf_test_be, &a), "embed_backward");
    }
    if (have(CLF_OP_DROPOUT)) {
        clf_dropout_args a = {.out = P(big), .x = P(small), .n = 8, .p = 0.1f};
        expect_refused(clf_test_api->dropout(clf_test_be, &a), "dropout");
    }
    if (have(CLF_OP_CROSS_ENTROPY)) {
        clf_cross_entropy_args a = {.loss = P(big),
                                    .logits = P(small),
                                    .targets = P(big),
                                    .rows = 2,
                                    .cols = 4,
                                    .ignore_index = -100,
                                    .grad_scale = 1};
        expect_refused(clf_test_api->cross_entropy(clf_test_be, &a), "cross_entropy");
    }
    if (have(CLF_OP_ADAM)) {
        clf_adam_args a = {.param = P(big),
                           .grad = clf_ptr_add(P(big), 4096),
                           .m = clf_ptr_add(P(big), 8192),
                           .v = P(small),
                           .n = 8,
                           .lr = 1e-3f,
                           .beta1 = 0.9f,
                           .beta2 = 0.98f,
                           .eps = 1e-9f,
                           .grad_scale = 1,
                           .bias_correction1 = 0.1f,
                           .sqrt_bias_correction2 = 0.1f};
        expect_refused(clf_test_api->adam(clf_test_be, &a), "adam");
    }
    if (have(CLF_OP_SUM_SQUARES))
        expect_refused(clf_test_api->sum_squares(clf_test_be, P(big), P(small), 8), "sum_squares");
    if (have(CLF_OP_FILL))
        expect_refused(clf_test_api->fill(clf_test_be, P(small), 1.0f, 8), "fill");
    clf_test_api->free(clf_test_be, small), clf_test_api->free(clf_test_be, big);
}
END_TEST

/* ---- the suite ---- */

static void add_tests(TCase *tc)
{
    tcase_add_test(tc, relu_backward_exact_aliased_and_fd);
    tcase_add_test(tc, layernorm_backward_finite_differences);
    tcase_add_test(tc, layernorm_backward_awkward_sizes_and_accumulate);
    tcase_add_test(tc, attention_backward_finite_differences);
    tcase_add_test(tc, attention_backward_awkward_sizes);
    tcase_add_test(tc, attention_dropout_forward_matches_mask_reference);
    tcase_add_test(tc, attention_dropout_backward_fd_and_reference);
    tcase_add_test(tc, attention_dropout_p_outside_0_1_is_refused);
    tcase_add_test(tc, embed_backward_fd_repeats_skips_and_accumulates);
    tcase_add_test(tc, dropout_mask_scale_fraction_and_aliasing);
    tcase_add_test(tc, cross_entropy_smoothing_ignore_scale_aliasing_fd);
    tcase_add_test(tc, adam_and_adamw_match_pytorch_formula);
    tcase_add_test(tc, sum_squares_in_double);
    tcase_add_test(tc, fill_writes_exactly_its_span);
    tcase_add_test(tc, row_reductions_are_deterministic);
    tcase_add_test(tc, too_small_buffers_are_refused_by_op_name);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines printed by a test that then fails still show */
    Suite *s = suite_create("train_ops");
    TCase *cpu = clf_test_backend_tcase("cpu", 120);
    add_tests(cpu);
    suite_add_tcase(s, cpu);
#ifdef CLF_HAVE_OPENCL
    if (clf_test_opencl_opens("train_ops")) {
        TCase *ocl = clf_test_backend_tcase("opencl", 300);
        add_tests(ocl);
        suite_add_tcase(s, ocl);
    }
#endif
    return clf_test_main(s);
}
