/* The optimizer ops of the backend ABI (version 2): adam (and adamw), sum_squares and
 * fill (see train_ops_util.h for the tolerances). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_ops_util.h"

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

/* ---- the suite ---- */

CLF_TEST_BACKENDS_MAIN("train_ops_optim", adam_and_adamw_match_pytorch_formula,
                       sum_squares_in_double, fill_writes_exactly_its_span)
