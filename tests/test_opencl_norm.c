/* The OpenCL backend's layer normalisation, forward and backward: layernorm (both styles,
 * fused residual add, sum_out) and layernorm_backward (dx, dalpha, dbeta, accumulate) on
 * random rows of awkward widths, compared with a host reference in double (dx also with
 * central differences) and with the CPU backend.
 * Without an OpenCL device the suite says why and exits 77 (ctest: skipped; a failure with
 * CLF_TEST_REQUIRE_OPENCL=1). */
#include "opencl_testutil.h"

#include "clformer/tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ref_layernorm(const clf_layernorm_args *a, const float *x, const float *res,
                          const float *alpha, const float *beta, float *out, float *sum)
{
    int C = a->cols;
    for (int r = 0; r < a->rows; r++) {
        double mean = 0, ss = 0;
        float *v = sum + (size_t)r * C;
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)r * C + c;
            v[c] = res ? x[i] + res[i] : x[i]; /* rounded to float, as the model stores it */
            mean += v[c];
        }
        mean /= C;
        for (int c = 0; c < C; c++)
            ss += (v[c] - mean) * (v[c] - mean);
        double denom =
            a->style == CLF_LN_TUTORIAL ? sqrt(ss / (C - 1)) + a->eps : sqrt(ss / C + a->eps);
        for (int c = 0; c < C; c++)
            out[(size_t)r * C + c] = (float)(alpha[c] * (v[c] - mean) / denom + beta[c]);
    }
}

START_TEST(test_layernorm)
{
    static const int rows[] = {1, 7, 33}, cols[] = {2, 7, 33, 65, 129, 512, 1000};
    int v = 0;
    for (int style = 0; style < 2; style++)
        for (size_t ri = 0; ri < 3; ri++)
            for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++, v++) {
                int R = rows[ri], C = cols[ci], with_res = v % 2, sum_mode = v % 3;
                if (clf_test_too_big((double)R * C))
                    continue;
                size_t n = (size_t)R * C;
                clf_layernorm_args a = {.rows = R,
                                        .cols = C,
                                        .style = (clf_ln_style)style,
                                        .eps = style == CLF_LN_TUTORIAL ? 1e-6f : 1e-5f};
                /* an offset of 10 checks that the variance is not E[x^2] - mean^2 */
                float *x = clf_test_frand(n, 500 + v, 7, 13),
                      *res = with_res ? clf_test_frand(n, 600 + v, -3, 3) : NULL;
                float *alpha = clf_test_frand(C, 700 + v, 0.5f, 1.5f),
                      *beta = clf_test_frand(C, 800 + v, -1, 1);
                float *want = malloc(n * 4), *wsum = malloc(n * 4), *got = malloc(n * 4),
                      *gsum = malloc(n * 4), *cout = malloc(n * 4), *csum = malloc(n * 4);
                char what[128];
                snprintf(what, sizeof what, "layernorm %s rows=%d cols=%d residual=%d sum_out=%s",
                         style ? "standard" : "tutorial", R, C, with_res,
                         sum_mode == 0   ? "none"
                         : sum_mode == 1 ? "separate"
                                         : "aliasing x");
                ref_layernorm(&a, x, res, alpha, beta, want, wsum);
                run_layernorm(&ocl, &a, x, res, alpha, beta, sum_mode, got, gsum);
                run_layernorm(&cpu, &a, x, res, alpha, beta, sum_mode, cout, csum);
                expect_close_both(got, want, cout, n, TOL_NORM, what);
                if (sum_mode)
                    expect_close(gsum, wsum, n, 0.0, what, "host reference (sum_out)");
                free(x);
                free(res);
                free(alpha);
                free(beta);
                free(want);
                free(wsum);
                free(got);
                free(gsum);
                free(cout);
                free(csum);
            }
    /* one column: fine in the standard style, refused (n - 1 = 0) in the tutorial style */
    float one[3] = {2, 3, 4}, a1 = 1, b1 = 0.5f, o[3], s[3];
    clf_layernorm_args a = {.rows = 3, .cols = 1, .style = CLF_LN_STANDARD, .eps = 1e-5f};
    run_layernorm(&ocl, &a, one, NULL, &a1, &b1, 0, o, s);
    for (int i = 0; i < 3; i++)
        ck_assert_float_eq_tol(o[i], 0.5f, 1e-6f);
    clf_buffer *b = up(&ocl, one, sizeof one);
    a.style = CLF_LN_TUTORIAL;
    a.out = a.x = a.alpha = a.beta = (clf_ptr){b, 0};
    ck_assert_int_eq(clf_op_layernorm(ocl.api, ocl.be, &a), CLF_ERR_INPUT);
    ocl.api->free(ocl.be, b);
}
END_TEST

/* sum_c dy[c] * LN(x)[c] of one row in double (beta drops out of the gradient). */
static double ln_row_loss(const double *x, const float *dy, const float *alpha, int C, int style,
                          double eps)
{
    double mean, l = 0;
    const double D = clf_test_ln_row(x, C, style, eps, &mean);
    for (int c = 0; c < C; c++)
        l += dy[c] * (alpha[c] * (x[c] - mean) / D);
    return l;
}

/* The reference: dx by central differences of the double forward (independent of the
 * closed form the backends use; truncation and rounding errors are ~1e-10 here), dalpha
 * and dbeta from their definitions. */
static void ref_layernorm_backward(const clf_layernorm_backward_args *a, const float *x,
                                   const float *dy, const float *alpha, float *dx, float *da,
                                   float *db)
{
    int R = a->rows, C = a->cols;
    double *row = malloc((size_t)C * sizeof *row);
    double *sa = calloc((size_t)C, sizeof *sa), *sb = calloc((size_t)C, sizeof *sb);
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * C, *gr = dy + (size_t)r * C;
        for (int c = 0; c < C; c++)
            row[c] = xr[c];
        for (int c = 0; c < C; c++) {
            /* the five-point stencil: truncation error O(h^4) */
            double h = 1e-4 * (1.0 + fabs(row[c])), f[4];
            static const double at[4] = {-2, -1, 1, 2};
            for (int s = 0; s < 4; s++) {
                row[c] = xr[c] + at[s] * h;
                f[s] = ln_row_loss(row, gr, alpha, C, a->style, a->eps);
            }
            row[c] = xr[c];
            double g = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h);
            float *d = dx + (size_t)r * C + c;
            *d = (float)(a->accumulate ? *d + g : g);
        }
        double mean;
        const double D = clf_test_ln_row(row, C, a->style, a->eps, &mean);
        for (int c = 0; c < C; c++) {
            sa[c] += gr[c] * (row[c] - mean) / D;
            sb[c] += gr[c];
        }
    }
    for (int c = 0; c < C; c++) {
        da[c] = (float)(da[c] + sa[c]);
        db[c] = (float)(db[c] + sb[c]);
    }
    free(row);
    free(sa);
    free(sb);
}

START_TEST(test_layernorm_backward)
{
    static const int rows[] = {1, 7, 33}, cols[] = {3, 7, 33, 65, 129, 512, 1000};
    worst w = {0};
    int v = 0;
    for (int style = 0; style < 2; style++)
        for (int ri = 0; ri < 3; ri++)
            for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++, v++) {
                int R = rows[ri], C = cols[ci], params = v % 3;
                if (clf_test_too_big((double)R * C))
                    continue;
                size_t n = (size_t)R * C;
                clf_layernorm_backward_args a = {.rows = R,
                                                 .cols = C,
                                                 .style = (clf_ln_style)style,
                                                 .eps = style == CLF_LN_TUTORIAL ? 1e-6f : 1e-5f,
                                                 .accumulate = v % 2};
                /* an offset of 10, as in test_layernorm: the corrected two-pass variance */
                float *x = clf_test_frand(n, 3200 + v, 7, 13),
                      *dy = clf_test_frand(n, 3300 + v, -1, 1);
                float *alpha = clf_test_frand(C, 3400 + v, 0.5f, 1.5f);
                float *dx0 = clf_test_frand(n, 3500 + v, -1, 1),
                      *da0 = clf_test_frand(C, 3600 + v, -1, 1),
                      *db0 = clf_test_frand(C, 3700 + v, -1, 1);
                float *wdx = fdup(dx0, n), *wda = fdup(da0, C), *wdb = fdup(db0, C);
                float *gdx = malloc(n * 4), *gda = fdup(da0, C), *gdb = fdup(db0, C);
                float *cdx = malloc(n * 4), *cda = fdup(da0, C), *cdb = fdup(db0, C);
                ref_layernorm_backward(&a, x, dy, alpha, wdx, wda, wdb);
                run_layernorm_backward(&ocl, &a, x, dy, alpha, dx0, da0, db0, params, gdx, gda,
                                       gdb);
                run_layernorm_backward(&cpu, &a, x, dy, alpha, dx0, da0, db0, params, cdx, cda,
                                       cdb);
                char what[128];
                snprintf(what, sizeof what,
                         "layernorm_backward %s rows=%d cols=%d accumulate=%d params=%s",
                         style ? "standard" : "tutorial", R, C, a.accumulate,
                         params == 0   ? "none"
                         : params == 1 ? "both"
                                       : "dalpha");
                expect_both(gdx, wdx, cdx, n, TOL_LN_BWD, what, &w);
                if (params)
                    expect_both(gda, wda, cda, (size_t)C, TOL_LN_BWD, what, &w);
                if (params == 1)
                    expect_both(gdb, wdb, cdb, (size_t)C, TOL_LN_BWD, what, &w);
                /* deterministic: the parameter sums come out the same bits again */
                if (params == 1 && v % 4 == 1) {
                    float *again_a = fdup(da0, C), *again_b = fdup(db0, C),
                          *again_x = malloc(n * 4);
                    run_layernorm_backward(&ocl, &a, x, dy, alpha, dx0, da0, db0, params, again_x,
                                           again_a, again_b);
                    expect_same_bits(again_a, gda, C, what, "its own first run (dalpha)");
                    expect_same_bits(again_b, gdb, C, what, "its own first run (dbeta)");
                    expect_same_bits(again_x, gdx, n, what, "its own first run (dx)");
                    free(again_a);
                    free(again_b);
                    free(again_x);
                }
                float *all[] = {x,   dy,  alpha, dx0, da0, db0, wdx, wda,
                                wdb, gdx, gda,   gdb, cdx, cda, cdb};
                for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                    free(all[i]);
            }
    report("test_layernorm_backward", &w, TOL_LN_BWD);

    /* constant rows in the tutorial style: std = 0, where torch.std's backward is 0/0; the
     * term through the std is taken as 0, leaving dx = (g - mean(g)) / eps */
    float x[14], dy[14], alpha[7], dx[14] = {0}, cdx[14] = {0}, want[14], da[7] = {0}, db[7] = {0};
    for (int c = 0; c < 7; c++) {
        x[c] = 5.0f;
        x[7 + c] = 0.25f;
        alpha[c] = 1.0f + 0.125f * c;
    }
    clf_test_fill(dy, 14, 3800, -1, 1);
    clf_layernorm_backward_args a = {.rows = 2, .cols = 7, .style = CLF_LN_TUTORIAL, .eps = 1e-6f};
    for (int r = 0; r < 2; r++) {
        double mg = 0;
        for (int c = 0; c < 7; c++)
            mg += (double)dy[r * 7 + c] * alpha[c] / 7;
        for (int c = 0; c < 7; c++)
            want[r * 7 + c] = (float)(((double)dy[r * 7 + c] * alpha[c] - mg) / (double)a.eps);
    }
    run_layernorm_backward(&ocl, &a, x, dy, alpha, dx, da, db, 0, dx, da, db);
    run_layernorm_backward(&cpu, &a, x, dy, alpha, cdx, da, db, 0, cdx, da, db);
    worst wc = {0};
    expect_both(dx, want, cdx, 14, TOL_LN_BWD, "layernorm_backward tutorial, constant rows", &wc);

    /* two columns: LN maps any two distinct values to about -alpha, +alpha, so dx is ~eps
     * times its terms (g / D) and float cancellation sets its relative error; it is
     * measured against the size of those terms instead (the CPU backend works in double) */
    for (int style = 0; style < 2; style++) {
        enum { R2 = 7, C2 = 2 };
        float x2[R2 * C2], dy2[R2 * C2], a2[C2] = {0.75f, 1.25f}, z[R2 * C2] = {0};
        float g2[R2 * C2], c2[R2 * C2], da2[C2] = {0}, db2[C2] = {0}, cda2[C2] = {0},
                                        cdb2[C2] = {0};
        clf_test_fill(x2, R2 * C2, 3900 + style, -3, 3);
        clf_test_fill(dy2, R2 * C2, 3950 + style, -1, 1);
        clf_layernorm_backward_args a2args = {.rows = R2,
                                              .cols = C2,
                                              .style = (clf_ln_style)style,
                                              .eps = style == CLF_LN_TUTORIAL ? 1e-6f : 1e-5f};
        run_layernorm_backward(&ocl, &a2args, x2, dy2, a2, z, da2, db2, 1, g2, da2, db2);
        run_layernorm_backward(&cpu, &a2args, x2, dy2, a2, z, cda2, cdb2, 1, c2, cda2, cdb2);
        double scale = 0, err = 0;
        for (int r = 0; r < R2; r++) {
            double d = fabs((double)x2[r * 2] - x2[r * 2 + 1]) / 2; /* std (biased) */
            d = style == CLF_LN_TUTORIAL ? d * sqrt(2.0) + a2args.eps : sqrt(d * d + a2args.eps);
            for (int c = 0; c < C2; c++) {
                double term = fabs((double)dy2[r * 2 + c] * a2[c]) / d;
                scale = term > scale ? term : scale;
                double e = fabs((double)g2[r * 2 + c] - c2[r * 2 + c]);
                err = e > err ? e : err;
            }
        }
        ck_assert_msg(err <= TOL_LN_BWD * scale,
                      "layernorm_backward %s cols=2: |dx - cpu| = %.3g, terms up to %.3g",
                      style ? "standard" : "tutorial", err, scale);
        expect_close(da2, cda2, C2, TOL_LN_BWD, "layernorm_backward cols=2 dalpha", "cpu backend");
        expect_close(db2, cdb2, C2, TOL_LN_BWD, "layernorm_backward cols=2 dbeta", "cpu backend");
    }
}
END_TEST

CLF_TEST_MAIN(ocl_test_run, "opencl_norm", "layernorm", test_layernorm, test_layernorm_backward)
