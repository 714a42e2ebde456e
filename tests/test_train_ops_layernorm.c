/* layernorm_backward of the backend ABI (version 2), both styles, against central
 * differences and the analytic double reference (see train_ops_util.h for the method and
 * the tolerances). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_ops_util.h"

/* ---- layernorm_backward ---- */

/* out = alpha * (x - mean) / D + beta per row, D as the style says (double) */
static void ln_fwd(const double *x, const double *al, const double *bt, int R, int C, int style,
                   double eps, double *out)
{
    for (int r = 0; r < R; r++) {
        const double *xr = x + (size_t)r * C;
        double mean;
        const double D = clf_test_ln_row(xr, C, style, eps, &mean);
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

/* ---- the suite ---- */

CLF_TEST_BACKENDS_MAIN("train_ops_layernorm", layernorm_backward_finite_differences,
                       layernorm_backward_awkward_sizes_and_accumulate)
