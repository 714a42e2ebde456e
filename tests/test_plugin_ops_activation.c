/* The activation plugin ops of the backend ABI (version 3): activation and
 * activation_backward, plain and gated, against the double reference below and its
 * central differences (see plugin_ops_util.h for the method and the tolerances). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_ops_util.h"

/* ---- double references ---- */

static double ref_f(double x)
{
    return x * tanh(x);
}

static double ref_df(double x)
{
    double t = tanh(x);
    return t + x * (1.0 - t * t);
}

/* ---- activation ---- */

/* A case's name in shape: the op, n, " offsets" when shifted, then flag (the words of its
 * last flag, "" when off); its x in [-3, 3) and gate in [-2, 2) from seed + n and seed + 1 + n. */
static void case_setup(const clf_plugin_op *op, size_t n, int shifted, const char *flag,
                       unsigned seed, char shape[96], float **x, float **g)
{
    snprintf(shape, 96, "%s n=%zu%s%s", op->name, n, shifted ? " offsets" : "", flag);
    *x = clf_test_frand(n, seed + (unsigned)n, -3, 3);
    *g = clf_test_frand(n, seed + 1 + (unsigned)n, -2, 2);
}

/* out = f(x) * gate against the reference; returns nothing, fails on error. inplace: out
 * is x's view (the header allows it). */
static void activation_case(const clf_plugin_op *op, size_t n, int shifted, int inplace)
{
    int gated = op->kind == CLF_PLUGIN_GATED_ACTIVATION;
    char shape[96];
    float *x, *g;
    case_setup(op, n, shifted, inplace ? " in place" : "", 11, shape, &x, &g);
    float *got = falloc(n);
    double *want = clf_test_dalloc(n);
    for (size_t i = 0; i < n; i++)
        want[i] = ref_f(x[i]) * (gated ? g[i] : 1.0);
    view vx = vput(x, n, offset_of(shifted, 0)), vg = {0};
    if (gated)
        vg = vput(g, n, offset_of(shifted, 1));
    view vo = inplace ? vx : vput(NULL, n, offset_of(shifted, 2));
    clf_activation_args a = {
        .op = op, .out = vp(vo), .x = vp(vx), .gate = gated ? vp(vg) : NONE, .n = n};
    CLF_ASSERT_OK(clf_test_api->activation(clf_test_be, &a));
    vget(vo, got, "activation out");
    expect_close(gated ? "gated activation forward" : "activation forward", shape, got, want, n,
                 tol());
    if (inplace) { /* and the same bits as out of place */
        view vx2 = vput(x, n, 0), vo2 = vput(NULL, n, 0);
        float *got2 = falloc(n);
        a.out = vp(vo2), a.x = vp(vx2);
        CLF_ASSERT_OK(clf_test_api->activation(clf_test_be, &a));
        vget(vo2, got2, "activation out");
        ck_assert_msg(memcmp(got, got2, n * sizeof *got) == 0,
                      "%s: activation in place gives other bits than out of place (%s)",
                      clf_test_be_name, shape);
        vfree(vx2), vfree(vo2), free(got2);
    }
    if (!inplace)
        vfree(vo);
    vfree(vx), vfree(vg), free(x), free(g), free(got), free(want);
}

/* run(op, n, shifted, last) for both ops: every size with the gate at offset 0 and shifted,
 * a big n shifted, then with the last flag (in place, or aliased) at small_n shifted and at
 * the big n; then the report. */
static void each_case(void (*run)(const clf_plugin_op *op, size_t n, int shifted, int last),
                      size_t small_n)
{
    const clf_plugin_op *ops[2] = {&op_tsq, &op_tsqg};
    for (int o = 0; o < 2; o++) {
        for (int s = 0; s < NSIZES; s++)
            for (int shifted = 0; shifted < 2; shifted++)
                run(ops[o], (size_t)SIZES[s], shifted, 0);
        run(ops[o], BIG_N, 1, 0);
        run(ops[o], small_n, 1, 1);
        run(ops[o], BIG_N, 0, 1);
    }
    report();
}

START_TEST(activation_forward_sizes_gate_offsets_in_place)
{
    if (!have(CLF_OP_ACTIVATION))
        return;
    CLF_ASSERT_OK(clf_test_api->plugin_prepare(clf_test_be, &op_tsq));
    CLF_ASSERT_OK(clf_test_api->plugin_prepare(clf_test_be, &op_tsq)); /* preparing twice is fine */
    CLF_ASSERT_OK(clf_test_api->plugin_prepare(clf_test_be, &op_tsqg));
    each_case(activation_case, 65);
}
END_TEST

/* dx = dy * gate * f'(x), dgate = dy * f(x), against the reference and (n <= 129) the
 * central differences of L = sum(dy * f(x) * gate). alias: dx is dy's view (no gate) or
 * dgate is dy's view (gated). The op is not prepared first: the backend prepares it. */
static void activation_backward_case(const clf_plugin_op *op, size_t n, int shifted, int alias)
{
    int gated = op->kind == CLF_PLUGIN_GATED_ACTIVATION;
    char shape[96];
    float *x, *g;
    case_setup(op, n, shifted, alias ? " aliased" : "", 21, shape, &x, &g);
    float *dy = clf_test_frand(n, 23 + (unsigned)n, -1, 1), *dx = falloc(n), *dg = falloc(n);
    double *want_dx = clf_test_dalloc(n), *want_dg = clf_test_dalloc(n);
    for (size_t i = 0; i < n; i++) {
        want_dx[i] = (double)dy[i] * (gated ? g[i] : 1.0) * ref_df(x[i]);
        want_dg[i] = (double)dy[i] * ref_f(x[i]);
    }
    view vx = vput(x, n, offset_of(shifted, 0)), vdy = vput(dy, n, offset_of(shifted, 1));
    view vg = {0}, vdg = {0}, vdx;
    if (gated) {
        vg = vput(g, n, offset_of(shifted, 2));
        vdg = alias ? vdy : vput(NULL, n, offset_of(shifted, 3));
    }
    vdx = alias && !gated ? vdy : vput(NULL, n, offset_of(shifted, 4));
    clf_activation_backward_args a = {.op = op,
                                      .dx = vp(vdx),
                                      .dgate = gated ? vp(vdg) : NONE,
                                      .dy = vp(vdy),
                                      .x = vp(vx),
                                      .gate = gated ? vp(vg) : NONE,
                                      .n = n};
    CLF_ASSERT_OK(clf_test_api->activation_backward(clf_test_be, &a));
    vget(vdx, dx, "activation_backward dx");
    expect_close(gated ? "gated activation dx" : "activation dx", shape, dx, want_dx, n, tol());
    if (gated) {
        vget(vdg, dg, "activation_backward dgate");
        expect_close("gated activation dgate", shape, dg, want_dg, n, tol());
    }
    if (n <= 129) { /* the loss is a sum of independent terms: one difference per element */
        double *fd_dx = clf_test_dalloc(n), *fd_dg = clf_test_dalloc(n);
        for (size_t i = 0; i < n; i++) {
            double xi = x[i], gi = gated ? g[i] : 1.0, h = fd_step(xi);
            fd_dx[i] = dy[i] * gi * (ref_f(xi + h) - ref_f(xi - h)) / (2 * h);
            h = fd_step(gi);
            fd_dg[i] = dy[i] * (ref_f(xi) * (gi + h) - ref_f(xi) * (gi - h)) / (2 * h);
        }
        expect_ref_close("reference activation dx vs fd", shape, want_dx, fd_dx, n);
        expect_close("activation dx vs fd", shape, dx, fd_dx, n, tol());
        if (gated) {
            expect_ref_close("reference dgate vs fd", shape, want_dg, fd_dg, n);
            expect_close("gated activation dgate vs fd", shape, dg, fd_dg, n, tol());
        }
        free(fd_dx), free(fd_dg);
    }
    if (!(alias && !gated))
        vfree(vdx);
    if (gated && !alias)
        vfree(vdg);
    vfree(vx), vfree(vdy), vfree(vg);
    free(x), free(g), free(dy), free(dx), free(dg), free(want_dx), free(want_dg);
}

START_TEST(activation_backward_sizes_gate_offsets_aliasing_fd)
{
    if (!have(CLF_OP_ACTIVATION_BACKWARD))
        return;
    each_case(activation_backward_case, 33);
}
END_TEST

/* ---- the suite ---- */

CLF_TEST_BACKENDS_MAIN("plugin_ops_activation", activation_forward_sizes_gate_offsets_in_place,
                       activation_backward_sizes_gate_offsets_aliasing_fd)
