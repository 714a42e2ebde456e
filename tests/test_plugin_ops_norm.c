/* The norm plugin ops of the backend ABI (version 3): norm and norm_backward, with and
 * without beta, against the double reference below and its central differences (see
 * plugin_ops_util.h for the method and the tolerances). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_ops_util.h"

/* ---- double references ---- */

/* xhat = n(x) of one row */
static void ref_norm_row(double *xhat, const double *x, int cols, double eps)
{
    double ss = 0.0;
    for (int c = 0; c < cols; c++)
        ss += x[c] * x[c];
    double r = 1.0 / sqrt(ss / cols + eps);
    for (int c = 0; c < cols; c++)
        xhat[c] = x[c] * r;
}

/* dx = J_n(x)^T (alpha * dy) of one row */
static void ref_norm_row_backward(double *dx, const double *dy, const double *alpha,
                                  const double *x, int cols, double eps)
{
    double ss = 0.0, sgx = 0.0;
    for (int c = 0; c < cols; c++) {
        ss += x[c] * x[c];
        sgx += alpha[c] * dy[c] * x[c];
    }
    double r = 1.0 / sqrt(ss / cols + eps), k = sgx * r * r * r / cols;
    for (int c = 0; c < cols; c++)
        dx[c] = alpha[c] * dy[c] * r - x[c] * k;
}

/* ---- norm ---- */

/* out = alpha * n(x) + beta (beta optional) against the reference. */
static void norm_case(int rows, int cols, int with_beta, int shifted)
{
    char shape[96];
    snprintf(shape, sizeof shape, "rmsb %dx%d%s%s", rows, cols, with_beta ? " beta" : "",
             shifted ? " offsets" : "");
    size_t n = (size_t)rows * cols;
    unsigned seed = 100u * (unsigned)rows + (unsigned)cols;
    float *x = clf_test_frand(n, seed, -2, 2), *al = clf_test_frand(cols, seed + 1, 0.5f, 1.5f);
    float *bt = clf_test_frand(cols, seed + 2, -1, 1), *got = falloc(n);
    double *want = clf_test_dalloc(n), *xd = clf_test_to_double(x, n), *row = clf_test_dalloc(cols);
    for (int r = 0; r < rows; r++) {
        ref_norm_row(row, xd + (size_t)r * cols, cols, NORM_EPS);
        for (int c = 0; c < cols; c++)
            want[(size_t)r * cols + c] = al[c] * row[c] + (with_beta ? bt[c] : 0.0);
    }
    view vx = vput(x, n, offset_of(shifted, 0)), va = vput(al, cols, offset_of(shifted, 1));
    view vb = with_beta ? vput(bt, cols, offset_of(shifted, 2)) : (view){0};
    view vo = vput(NULL, n, offset_of(shifted, 3));
    clf_norm_args a = {.op = &op_rmsb,
                       .out = vp(vo),
                       .x = vp(vx),
                       .alpha = vp(va),
                       .beta = with_beta ? vp(vb) : NONE,
                       .rows = rows,
                       .cols = cols,
                       .eps = NORM_EPS};
    CLF_ASSERT_OK(clf_test_api->norm(clf_test_be, &a));
    vget(vo, got, "norm out");
    expect_close(with_beta ? "norm forward (beta)" : "norm forward (no beta)", shape, got, want, n,
                 tol());
    vfree(vx), vfree(va), vfree(vb), vfree(vo);
    free(x), free(al), free(bt), free(got), free(want), free(xd), free(row);
}

START_TEST(norm_forward_sizes_beta_offsets)
{
    if (!have(CLF_OP_NORM))
        return;
    CLF_ASSERT_OK(clf_test_api->plugin_prepare(clf_test_be, &op_rmsb));
    int k = 0;
    for (int r = 0; r < norm_nsizes(); r++)
        for (int c = 0; c < norm_nsizes(); c++, k++)
            for (int with_beta = 0; with_beta < 2; with_beta++)
                norm_case(SIZES[r], SIZES[c], with_beta, (k + with_beta) % 2);
    report();
}
END_TEST

/* The parts of a norm_backward check: which outputs are asked for and how. */
typedef struct nb_variant {
    int accumulate, with_dalpha, with_dbeta, shifted;
} nb_variant;

/* Row loss L_r = sum_c dy[r,c] * (alpha[c] * n(x_r)[c]) for the central differences of dx
 * (beta does not depend on x). */
static double row_loss(const double *xr, const double *dyr, const double *al, double *tmp, int cols)
{
    ref_norm_row(tmp, xr, cols, NORM_EPS);
    double l = 0.0;
    for (int c = 0; c < cols; c++)
        l += dyr[c] * al[c] * tmp[c];
    return l;
}

/* norm_backward against the reference; with fd, also against central differences of
 * L = sum dy * (alpha * n(x) + beta) in x, alpha and beta. */
static void norm_backward_case(int rows, int cols, nb_variant v, int fd)
{
    char shape[128];
    snprintf(shape, sizeof shape, "rmsb %dx%d acc=%d dalpha=%d dbeta=%d%s", rows, cols,
             v.accumulate, v.with_dalpha, v.with_dbeta, v.shifted ? " offsets" : "");
    size_t n = (size_t)rows * cols;
    unsigned seed = 1000u + 100u * (unsigned)rows + (unsigned)cols;
    float *x = clf_test_frand(n, seed, -2, 2), *al = clf_test_frand(cols, seed + 1, 0.5f, 1.5f);
    float *dy = clf_test_frand(n, seed + 2, -1, 1), *dx0 = clf_test_frand(n, seed + 3, -1, 1);
    float *da0 = clf_test_frand(cols, seed + 4, -1, 1),
          *db0 = clf_test_frand(cols, seed + 5, -1, 1);
    float *dx = falloc(n), *da = falloc(cols), *db = falloc(cols);
    double *xd = clf_test_to_double(x, n), *dyd = clf_test_to_double(dy, n),
           *ald = clf_test_to_double(al, cols);
    double *want_dx = clf_test_dalloc(n), *want_da = clf_test_dalloc(cols),
           *want_db = clf_test_dalloc(cols);
    double *xhat = clf_test_dalloc(n);
    for (int r = 0; r < rows; r++) {
        size_t o = (size_t)r * cols;
        ref_norm_row_backward(want_dx + o, dyd + o, ald, xd + o, cols, NORM_EPS);
        ref_norm_row(xhat + o, xd + o, cols, NORM_EPS);
    }
    /* the pure gradients, before the accumulate pre-fills are added (for fd) */
    for (int c = 0; c < cols; c++)
        for (int r = 0; r < rows; r++) {
            want_da[c] += dyd[(size_t)r * cols + c] * xhat[(size_t)r * cols + c];
            want_db[c] += dyd[(size_t)r * cols + c];
        }

    view vdy = vput(dy, n, offset_of(v.shifted, 0)), vx = vput(x, n, offset_of(v.shifted, 1));
    view va = vput(al, cols, offset_of(v.shifted, 2));
    view vdx = vput(v.accumulate ? dx0 : NULL, n, offset_of(v.shifted, 3));
    view vda = v.with_dalpha ? vput(da0, cols, offset_of(v.shifted, 4)) : (view){0};
    view vdb = v.with_dbeta ? vput(db0, cols, offset_of(v.shifted, 5)) : (view){0};
    clf_norm_backward_args a = {.op = &op_rmsb,
                                .dx = vp(vdx),
                                .dy = vp(vdy),
                                .x = vp(vx),
                                .alpha = vp(va),
                                .dalpha = v.with_dalpha ? vp(vda) : NONE,
                                .dbeta = v.with_dbeta ? vp(vdb) : NONE,
                                .rows = rows,
                                .cols = cols,
                                .eps = NORM_EPS,
                                .accumulate = v.accumulate};
    CLF_ASSERT_OK(clf_test_api->norm_backward(clf_test_be, &a));
    vget(vdx, dx, "norm_backward dx");
    if (v.with_dalpha)
        vget(vda, da, "norm_backward dalpha");
    if (v.with_dbeta)
        vget(vdb, db, "norm_backward dbeta");

    if (fd) {
        ck_assert(!v.accumulate && v.with_dalpha && v.with_dbeta);
        double *fd_dx = clf_test_dalloc(n), *fd_da = clf_test_dalloc(cols),
               *fd_db = clf_test_dalloc(cols);
        double *tmp = clf_test_dalloc(cols);
        for (int r = 0; r < rows; r++) {
            double *xr = xd + (size_t)r * cols;
            const double *dyr = dyd + (size_t)r * cols;
            for (int c = 0; c < cols; c++) {
                double save = xr[c], h = fd_step(save);
                xr[c] = save + h;
                double lp = row_loss(xr, dyr, ald, tmp, cols);
                xr[c] = save - h;
                double lm = row_loss(xr, dyr, ald, tmp, cols);
                xr[c] = save;
                fd_dx[(size_t)r * cols + c] = (lp - lm) / (2 * h);
            }
        }
        /* L is linear in alpha and beta: the differences of sum_r dy (alpha n + beta) */
        for (int c = 0; c < cols; c++) {
            double ha = fd_step(ald[c]), hb = fd_step(0.0), lp = 0, lm = 0, bp = 0, bm = 0;
            for (int r = 0; r < rows; r++) {
                size_t i = (size_t)r * cols + c;
                lp += dyd[i] * ((ald[c] + ha) * xhat[i]);
                lm += dyd[i] * ((ald[c] - ha) * xhat[i]);
                bp += dyd[i] * hb;
                bm -= dyd[i] * hb;
            }
            fd_da[c] = (lp - lm) / (2 * ha);
            fd_db[c] = (bp - bm) / (2 * hb);
        }
        expect_ref_close("reference norm dx vs fd", shape, want_dx, fd_dx, n);
        expect_ref_close("reference norm dalpha vs fd", shape, want_da, fd_da, cols);
        expect_ref_close("reference norm dbeta vs fd", shape, want_db, fd_db, cols);
        /* dx was overwritten (no accumulate); dalpha and dbeta add to what they held */
        for (int c = 0; c < cols; c++)
            fd_da[c] += da0[c], fd_db[c] += db0[c];
        expect_close("norm dx vs fd", shape, dx, fd_dx, n, tol());
        expect_close("norm dalpha (+=) vs fd", shape, da, fd_da, cols, tol());
        expect_close("norm dbeta (+=) vs fd", shape, db, fd_db, cols, tol());
        free(fd_dx), free(fd_da), free(fd_db), free(tmp);
    }

    if (v.accumulate)
        for (size_t i = 0; i < n; i++)
            want_dx[i] += dx0[i];
    for (int c = 0; c < cols; c++)
        want_da[c] += da0[c], want_db[c] += db0[c];
    expect_close(v.accumulate ? "norm dx (accumulate)" : "norm dx", shape, dx, want_dx, n, tol());
    if (v.with_dalpha)
        expect_close("norm dalpha (+=)", shape, da, want_da, cols, tol());
    if (v.with_dbeta)
        expect_close("norm dbeta (+=)", shape, db, want_db, cols, tol());

    vfree(vdy), vfree(vx), vfree(va), vfree(vdx), vfree(vda), vfree(vdb);
    free(x), free(al), free(dy), free(dx0), free(da0), free(db0), free(dx), free(da), free(db);
    free(xd), free(dyd), free(ald), free(want_dx), free(want_da), free(want_db), free(xhat);
}

START_TEST(norm_backward_sizes_accumulate_params_offsets_fd)
{
    if (!have(CLF_OP_NORM_BACKWARD))
        return;
    /* not prepared first: the backend prepares it on first use */
    static const nb_variant variants[] = {
        {0, 1, 1, 0}, {1, 1, 1, 1}, {0, 0, 0, 1}, {1, 0, 0, 0},
        {0, 1, 0, 1}, {1, 0, 1, 0}, {1, 1, 0, 0}, {0, 0, 1, 1},
    };
    for (int r = 0; r < norm_nsizes(); r++)
        for (int c = 0; c < norm_nsizes(); c++) {
            for (size_t k = 0; k < sizeof variants / sizeof variants[0]; k++)
                norm_backward_case(SIZES[r], SIZES[c], variants[k], 0);
            norm_backward_case(SIZES[r], SIZES[c], (nb_variant){0, 1, 1, 1}, 1);
        }
    report();
}
END_TEST

/* ---- the suite ---- */

CLF_TEST_BACKENDS_MAIN("plugin_ops_norm", norm_forward_sizes_beta_offsets,
                       norm_backward_sizes_accumulate_params_offsets_fd)
