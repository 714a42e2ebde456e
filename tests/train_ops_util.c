/* The helpers of the training-op suites (train_ops_util.h). */
#include "train_ops_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Tolerance of a check whose result is a float reduction. */
double tol_reduce(void)
{
    return clf_test_is_cpu() ? TOL_REF : TOL_REF_OCL;
}

/* 1 when the backend has op; the CPU backend must, another one is skipped for it. */
int have(clf_op op)
{
    return clf_test_have("train_ops", op, clf_test_api->supports(clf_test_be, op));
}

/* ---- host helpers ---- */

clf_ptr P(clf_buffer *b)
{
    return (clf_ptr){b, 0};
}

clf_buffer *up(const void *host, size_t bytes)
{
    return clf_test_upload(clf_test_api, clf_test_be, host, bytes);
}

void down(clf_buffer *b, void *host, size_t bytes)
{
    CLF_ASSERT_OK(clf_test_api->download(clf_test_be, host, P(b), bytes));
}

float *fconst(size_t n, float v)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < n; i++)
        x[i] = v;
    return x;
}

void expect_close(const char *what, const float *got, const double *want, size_t n, double tol)
{
    double e = clf_test_rel_err_d(got, NULL, want, n);
    if (getenv("CLF_TEST_VERBOSE"))
        printf("train_ops: %-7s %-60s rel err %.2e (tol %.0e)\n", clf_test_be_name, what, e, tol);
    ck_assert_msg(e <= tol, "%s: %s: relative error %.3g > %.3g", clf_test_be_name, what, e, tol);
}

void expect_ref_close(const char *what, const double *ref, const double *fd, size_t n)
{
    double e = clf_test_rel_err_d(NULL, ref, fd, n);
    if (getenv("CLF_TEST_VERBOSE"))
        printf("train_ops: reference %-50s vs fd: rel err %.2e\n", what, e);
    ck_assert_msg(e <= TOL_REF_FD, "reference %s vs finite differences: relative error %.3g", what,
                  e);
}

void fd_grad(double *x, const size_t *idx, size_t m, loss_fn f, void *user, double *g)
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

void run_ln_backward(const float *x, const float *al, const float *dy, int R, int C, int style,
                     float eps, int accumulate, float *dx, float *dal, float *dbt)
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

void run_embed_backward(const int32_t *ids, const float *dout, int rows, int dim, int vocab,
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
