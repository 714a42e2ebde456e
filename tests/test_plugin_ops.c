/* The plugin ops of the backend ABI (version 3) as a whole: run-to-run determinism of
 * every op, the errors of plugin_prepare and of the ops (naming the op, the operand and
 * the backend), and on OpenCL the build log of a broken op and the on-disk program cache
 * (see plugin_ops_util.h for the test ops). */
#include <check.h>
#include <glob.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin_ops_util.h"

/* ---- broken ops, for the error paths ---- */

static const clf_plugin_op op_cpu_only = {
    .name = "cpuonly",
    .kind = CLF_PLUGIN_ACTIVATION,
    .cpu = {.act_forward = tsq_forward, .act_backward = tsq_backward}};
static const clf_plugin_op op_ocl_only = {.name = "oclonly",
                                          .kind = CLF_PLUGIN_ACTIVATION,
                                          .opencl_source =
                                              "float clf_oclonly_forward(float x) { return x; }\n"
                                              "float clf_oclonly_grad(float x) { return 1.0f; }\n"};
static const clf_plugin_op op_bad_kind = {
    .name = "badkind",
    .kind = (clf_plugin_kind)9,
    .cpu = {.act_forward = tsq_forward, .act_backward = tsq_backward},
    .opencl_source = tsq_cl};
static const clf_plugin_op op_half_cpu = {
    .name = "halfcpu", .kind = CLF_PLUGIN_ACTIVATION, .cpu = {.act_forward = tsq_forward}};
static const clf_plugin_op op_broken_cl = {
    .name = "brokencl",
    .kind = CLF_PLUGIN_ACTIVATION,
    .cpu = {.act_forward = tsq_forward, .act_backward = tsq_backward},
    .opencl_source = "float clf_brokencl_forward(float x) { return undefined_thing * x; }\n"
                     "float clf_brokencl_grad(float x) { return 1.0f; }\n"};

/* ---- determinism ---- */

#define DET_ROWS 300 /* 300 x 129 = 38700 elements: above the CPU's row threshold (16384) */
#define DET_COLS 129

/* Runs every plugin op once on fixed inputs and downloads all outputs into out (which
 * holds 3 * BIG_N + 2 * DET_ROWS * DET_COLS + 2 * DET_COLS floats); returns the count. */
static size_t det_run(float *out)
{
    size_t n = BIG_N, m = (size_t)DET_ROWS * DET_COLS, o = 0;
    float *x = clf_test_frand(n, 301, -3, 3), *g = clf_test_frand(n, 302, -2, 2),
          *dy = clf_test_frand(n, 303, -1, 1);
    float *nx = clf_test_frand(m, 304, -2, 2), *ndy = clf_test_frand(m, 305, -1, 1);
    float *al = clf_test_frand(DET_COLS, 306, 0.5f, 1.5f),
          *bt = clf_test_frand(DET_COLS, 307, -1, 1);
    view vx = vput(x, n, 1), vg = vput(g, n, 2), vdy = vput(dy, n, 3), vo = vput(NULL, n, 4);
    view vdx = vput(NULL, n, 5), vdg = vput(NULL, n, 6);
    clf_activation_args fa = {.op = &op_tsqg, .out = vp(vo), .x = vp(vx), .gate = vp(vg), .n = n};
    clf_activation_backward_args ba = {.op = &op_tsqg,
                                       .dx = vp(vdx),
                                       .dgate = vp(vdg),
                                       .dy = vp(vdy),
                                       .x = vp(vx),
                                       .gate = vp(vg),
                                       .n = n};
    CLF_ASSERT_OK(clf_test_api->activation(clf_test_be, &fa));
    CLF_ASSERT_OK(clf_test_api->activation_backward(clf_test_be, &ba));
    vget(vo, out + o, "det out"), o += n;
    vget(vdx, out + o, "det dx"), o += n;
    vget(vdg, out + o, "det dgate"), o += n;

    view vnx = vput(nx, m, 1), vndy = vput(ndy, m, 2), va = vput(al, DET_COLS, 3);
    view vb = vput(bt, DET_COLS, 4), vno = vput(NULL, m, 5), vndx = vput(ndy, m, 6);
    view vda = vput(al, DET_COLS, 7), vdb = vput(bt, DET_COLS, 8);
    clf_norm_args na = {.op = &op_rmsb,
                        .out = vp(vno),
                        .x = vp(vnx),
                        .alpha = vp(va),
                        .beta = vp(vb),
                        .rows = DET_ROWS,
                        .cols = DET_COLS,
                        .eps = NORM_EPS};
    clf_norm_backward_args nb = {.op = &op_rmsb,
                                 .dx = vp(vndx),
                                 .dy = vp(vndy),
                                 .x = vp(vnx),
                                 .alpha = vp(va),
                                 .dalpha = vp(vda),
                                 .dbeta = vp(vdb),
                                 .rows = DET_ROWS,
                                 .cols = DET_COLS,
                                 .eps = NORM_EPS,
                                 .accumulate = 1};
    CLF_ASSERT_OK(clf_test_api->norm(clf_test_be, &na));
    CLF_ASSERT_OK(clf_test_api->norm_backward(clf_test_be, &nb));
    vget(vno, out + o, "det norm out"), o += m;
    vget(vndx, out + o, "det norm dx"), o += m;
    vget(vda, out + o, "det dalpha"), o += DET_COLS;
    vget(vdb, out + o, "det dbeta"), o += DET_COLS;

    vfree(vx), vfree(vg), vfree(vdy), vfree(vo), vfree(vdx), vfree(vdg);
    vfree(vnx), vfree(vndy), vfree(va), vfree(vb), vfree(vno), vfree(vndx), vfree(vda);
    vfree(vdb);
    free(x), free(g), free(dy), free(nx), free(ndy), free(al), free(bt);
    return o;
}

START_TEST(runs_are_bit_identical)
{
    if (!have(CLF_OP_ACTIVATION) || !have(CLF_OP_ACTIVATION_BACKWARD) || !have(CLF_OP_NORM) ||
        !have(CLF_OP_NORM_BACKWARD))
        return;
    size_t cap = 3 * (size_t)BIG_N + 2 * (size_t)DET_ROWS * DET_COLS + 2 * DET_COLS;
    float *a = falloc(cap), *b = falloc(cap);
    size_t n = det_run(a);
    ck_assert_uint_eq(n, cap);
    det_run(b);
    ck_assert_msg(memcmp(a, b, n * sizeof *a) == 0, "%s: two runs differ", clf_test_be_name);
    if (clf_test_is_cpu()) /* and the thread count does not matter */
        clf_test_cpu_threads_same_bits(det_run, a, b, n);
    free(a), free(b);
}
END_TEST

/* ---- errors ---- */

/* st must be want, with a message that contains every non-NULL string of needles. */
static void expect_error(clf_status st, clf_status want, const char *what, const char *n1,
                         const char *n2, const char *n3)
{
    const char *msg = clf_last_error();
    ck_assert_msg(st == want, "%s: %s gave status %d, not %d (%s)", clf_test_be_name, what, (int)st,
                  (int)want, msg);
    const char *needles[3] = {n1, n2, n3};
    for (int i = 0; i < 3; i++)
        ck_assert_msg(!needles[i] || strstr(msg, needles[i]),
                      "%s: %s: the message does not name '%s': %s", clf_test_be_name, what,
                      needles[i], msg);
    if (getenv("CLF_TEST_VERBOSE"))
        printf("plugin_ops: %-6s %s -> %s\n", clf_test_be_name, what, msg);
}

START_TEST(errors_name_the_op_the_operand_and_the_backend)
{
    if (!have(CLF_OP_ACTIVATION) || !have(CLF_OP_ACTIVATION_BACKWARD) || !have(CLF_OP_NORM) ||
        !have(CLF_OP_NORM_BACKWARD))
        return;
    const size_t n = 8;
    clf_buffer *small, *big;
    CLF_ASSERT_OK(clf_test_api->alloc(clf_test_be, 16, &small));
    CLF_ASSERT_OK(clf_test_api->alloc(clf_test_be, 1 << 12, &big));
    clf_ptr b0 = {big, 0}, b1 = {big, 256}, b2 = {big, 512}, b3 = {big, 768}, b4 = {big, 1024};
    clf_ptr b0x = {big, 4}; /* one element into b0: partly overlaps it */

    /* prepare: no op, an unknown kind, no form for this backend (also on first use) */
    expect_error(clf_test_api->plugin_prepare(clf_test_be, NULL), CLF_ERR_INPUT, "prepare(NULL)",
                 clf_test_be_name, NULL, NULL);
    expect_error(clf_test_api->plugin_prepare(clf_test_be, &op_bad_kind), CLF_ERR_INPUT,
                 "prepare(bad kind)", "badkind", "kind", NULL);
    const clf_plugin_op *formless = clf_test_is_cpu() ? &op_ocl_only : &op_cpu_only;
    const char *form = clf_test_is_cpu() ? "CPU form" : "OpenCL form";
    expect_error(clf_test_api->plugin_prepare(clf_test_be, formless), CLF_ERR_UNSUPPORTED,
                 "prepare(op without this backend's form)", formless->name, clf_test_be_name, form);
    clf_activation_args fa = {.op = formless, .out = b1, .x = b0, .n = n};
    expect_error(clf_op_activation(clf_test_api, clf_test_be, &fa), CLF_ERR_UNSUPPORTED,
                 "activation(op without this backend's form)", formless->name, clf_test_be_name,
                 form);

    /* the gate goes with the kind */
    fa = (clf_activation_args){.op = &op_tsqg, .out = b1, .x = b0, .n = n};
    expect_error(clf_op_activation(clf_test_api, clf_test_be, &fa), CLF_ERR_INPUT,
                 "gated activation without a gate", "tsqg", "gate", NULL);
    fa = (clf_activation_args){.op = &op_tsq, .out = b1, .x = b0, .gate = b2, .n = n};
    expect_error(clf_op_activation(clf_test_api, clf_test_be, &fa), CLF_ERR_INPUT,
                 "activation with a gate", "tsq", "gate", NULL);
    clf_activation_backward_args ba = {
        .op = &op_tsqg, .dx = b1, .dy = b2, .x = b0, .gate = b3, .n = n};
    expect_error(clf_op_activation_backward(clf_test_api, clf_test_be, &ba), CLF_ERR_INPUT,
                 "gated activation_backward without dgate", "tsqg", "dgate", NULL);
    /* the kind goes with the entry */
    fa = (clf_activation_args){.op = &op_rmsb, .out = b1, .x = b0, .n = n};
    expect_error(clf_op_activation(clf_test_api, clf_test_be, &fa), CLF_ERR_INPUT,
                 "activation(norm op)", "rmsb", "norm", NULL);
    clf_norm_args na = {
        .op = &op_tsq, .out = b1, .x = b0, .alpha = b2, .rows = 2, .cols = 4, .eps = 1e-5f};
    expect_error(clf_op_norm(clf_test_api, clf_test_be, &na), CLF_ERR_INPUT, "norm(activation op)",
                 "tsq", "activation", NULL);

    /* spans: too small, partly overlapping, aliasing what may not alias */
    fa = (clf_activation_args){.op = &op_tsq, .out = {small, 0}, .x = b0, .n = n};
    expect_error(clf_op_activation(clf_test_api, clf_test_be, &fa), CLF_ERR_INPUT,
                 "activation(small out)", "activation", "'out'", NULL);
    fa = (clf_activation_args){.op = &op_tsq, .out = b0x, .x = b0, .n = n};
    expect_error(clf_op_activation(clf_test_api, clf_test_be, &fa), CLF_ERR_INPUT,
                 "activation(out partly over x)", "activation", "overlap", NULL);
    fa = (clf_activation_args){.op = &op_tsqg, .out = b0, .x = b1, .gate = b0, .n = n};
    expect_error(clf_op_activation(clf_test_api, clf_test_be, &fa), CLF_ERR_INPUT,
                 "activation(out is gate)", "gate", "overlap", NULL);
    ba = (clf_activation_backward_args){
        .op = &op_tsqg, .dx = b0, .dgate = b1, .dy = b0, .x = b2, .gate = b3, .n = n};
    expect_error(clf_op_activation_backward(clf_test_api, clf_test_be, &ba), CLF_ERR_INPUT,
                 "gated activation_backward(dx is dy)", "dx", "dy", NULL);
    ba = (clf_activation_backward_args){.op = &op_tsq, .dx = b0, .dy = b1, .x = {small, 4}, .n = n};
    expect_error(clf_op_activation_backward(clf_test_api, clf_test_be, &ba), CLF_ERR_INPUT,
                 "activation_backward(small x)", "activation_backward", "'x'", NULL);
    na = (clf_norm_args){
        .op = &op_rmsb, .out = b0, .x = b0, .alpha = b2, .rows = 2, .cols = 4, .eps = 1e-5f};
    expect_error(clf_op_norm(clf_test_api, clf_test_be, &na), CLF_ERR_INPUT, "norm(out is x)",
                 "rmsb", "overlap", NULL);
    na = (clf_norm_args){
        .op = &op_rmsb, .out = b0, .x = b1, .alpha = b0x, .rows = 2, .cols = 4, .eps = 1e-5f};
    expect_error(clf_op_norm(clf_test_api, clf_test_be, &na), CLF_ERR_INPUT, "norm(out over alpha)",
                 "rmsb", "overlap", NULL);
    na = (clf_norm_args){
        .op = &op_rmsb, .out = b0, .x = b1, .alpha = b2, .rows = 2, .cols = 0, .eps = 1e-5f};
    expect_error(clf_op_norm(clf_test_api, clf_test_be, &na), CLF_ERR_INPUT, "norm(cols = 0)",
                 "norm", "cols=0", NULL);
    na = (clf_norm_args){.op = &op_rmsb,
                         .out = b0,
                         .x = b1,
                         .alpha = b2,
                         .beta = {small, 8},
                         .rows = 2,
                         .cols = 4,
                         .eps = 1e-5f};
    expect_error(clf_op_norm(clf_test_api, clf_test_be, &na), CLF_ERR_INPUT, "norm(small beta)",
                 "norm", "'beta'", NULL);
    clf_norm_backward_args nb = {.op = &op_rmsb,
                                 .dx = b0,
                                 .dy = b0,
                                 .x = b1,
                                 .alpha = b2,
                                 .rows = 2,
                                 .cols = 4,
                                 .eps = 1e-5f};
    expect_error(clf_op_norm_backward(clf_test_api, clf_test_be, &nb), CLF_ERR_INPUT,
                 "norm_backward(dx is dy)", "norm_backward", "dy", NULL);
    nb.dy = b3, nb.alpha = b0x;
    expect_error(clf_op_norm_backward(clf_test_api, clf_test_be, &nb), CLF_ERR_INPUT,
                 "norm_backward(dx over alpha)", "norm_backward", "alpha", NULL);
    nb.alpha = b2, nb.dalpha = (clf_ptr){small, 4};
    expect_error(clf_op_norm_backward(clf_test_api, clf_test_be, &nb), CLF_ERR_INPUT,
                 "norm_backward(small dalpha)", "norm_backward", "'dalpha'", NULL);
    nb.dalpha = b4, nb.dx = (clf_ptr){big, 2};
    expect_error(clf_op_norm_backward(clf_test_api, clf_test_be, &nb), CLF_ERR_INPUT,
                 "norm_backward(dx misaligned)", "norm_backward", "'dx'", NULL);

    /* after all that, the ops still work */
    fa = (clf_activation_args){.op = &op_tsq, .out = b1, .x = b0, .n = n};
    CLF_ASSERT_OK(clf_test_api->activation(clf_test_be, &fa));
    CLF_ASSERT_OK(clf_test_api->synchronize(clf_test_be));
    clf_test_api->free(clf_test_be, small), clf_test_api->free(clf_test_be, big);
}
END_TEST

START_TEST(cpu_refuses_half_a_cpu_form)
{
    expect_error(clf_test_api->plugin_prepare(clf_test_be, &op_half_cpu), CLF_ERR_INPUT,
                 "prepare(half a CPU form)", "halfcpu", "half", NULL);
}
END_TEST

#ifdef CLF_HAVE_OPENCL
START_TEST(opencl_build_error_names_the_op_and_shows_the_log)
{
    expect_error(clf_test_api->plugin_prepare(clf_test_be, &op_broken_cl), CLF_ERR_BACKEND,
                 "prepare(broken source)", "brokencl", "clBuildProgram", "undefined_thing");
    /* not remembered as built: the same error on first use */
    clf_buffer *buf;
    CLF_ASSERT_OK(clf_test_api->alloc(clf_test_be, 64, &buf));
    clf_activation_args a = {.op = &op_broken_cl, .out = {buf, 0}, .x = {buf, 32}, .n = 8};
    expect_error(clf_op_activation(clf_test_api, clf_test_be, &a), CLF_ERR_BACKEND,
                 "activation(broken source)", "brokencl", "clBuildProgram", NULL);
    a.op = &op_tsq; /* and a good op still builds and runs */
    CLF_ASSERT_OK(clf_test_api->activation(clf_test_be, &a));
    CLF_ASSERT_OK(clf_test_api->synchronize(clf_test_be));
    clf_test_api->free(clf_test_be, buf);
}
END_TEST

/* The program of a prepared op lands in the program cache, and a second backend that
 * loads it from there computes the same bits. */
START_TEST(opencl_plugin_programs_are_cached_on_disk)
{
    const char *dir = getenv("CLF_CACHE_DIR");
    if (!dir || !*dir || strcmp(dir, "off") == 0) {
        printf("plugin_ops: CLF_CACHE_DIR is not set: the cache check is skipped\n");
        return;
    }
    float x[33], y1[33], y2[33];
    clf_test_fill(x, 33, 5, -3, 3);
    CLF_ASSERT_OK(clf_test_api->plugin_prepare(clf_test_be, &op_rmsb));
    char pattern[4200];
    snprintf(pattern, sizeof pattern, "%s/plugin-rmsb-*.clbin", dir);
    glob_t g;
    ck_assert_msg(glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc >= 1, "no %s", pattern);
    globfree(&g);
    for (int pass = 0; pass < 2; pass++) {
        clf_backend *other = NULL;
        clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE")};
        clf_backend *use = clf_test_be;
        if (pass == 1) {
            CLF_ASSERT_OK(clf_test_api->open(&o, &other));
            use = other;
        }
        clf_buffer *bx, *ba, *bo;
        float ones[33];
        for (int i = 0; i < 33; i++)
            ones[i] = 1.0f;
        CLF_ASSERT_OK(clf_test_api->alloc(use, sizeof x, &bx));
        CLF_ASSERT_OK(clf_test_api->alloc(use, sizeof x, &ba));
        CLF_ASSERT_OK(clf_test_api->alloc(use, sizeof x, &bo));
        CLF_ASSERT_OK(clf_test_api->upload(use, (clf_ptr){bx, 0}, x, sizeof x));
        CLF_ASSERT_OK(clf_test_api->upload(use, (clf_ptr){ba, 0}, ones, sizeof ones));
        clf_norm_args a = {.op = &op_rmsb,
                           .out = {bo, 0},
                           .x = {bx, 0},
                           .alpha = {ba, 0},
                           .rows = 3,
                           .cols = 11,
                           .eps = NORM_EPS};
        CLF_ASSERT_OK(clf_test_api->norm(use, &a));
        CLF_ASSERT_OK(clf_test_api->download(use, pass ? y2 : y1, (clf_ptr){bo, 0}, sizeof y1));
        clf_test_api->free(use, bx), clf_test_api->free(use, ba), clf_test_api->free(use, bo);
        if (other)
            clf_test_api->close(other);
    }
    ck_assert_msg(memcmp(y1, y2, sizeof y1) == 0, "the cached program gives other bits");
}
END_TEST
#endif

/* ---- the suite ---- */

static void add_tests(TCase *tc)
{
    tcase_add_test(tc, runs_are_bit_identical);
    tcase_add_test(tc, errors_name_the_op_the_operand_and_the_backend);
}

static void cpu_only(TCase *tc)
{
    tcase_add_test(tc, cpu_refuses_half_a_cpu_form);
}

static void opencl_only(TCase *tc)
{
    tcase_add_test(tc, opencl_build_error_names_the_op_and_shows_the_log);
    tcase_add_test(tc, opencl_plugin_programs_are_cached_on_disk);
}

int main(void)
{
    return clf_test_backends_main("plugin_ops", add_tests, cpu_only, opencl_only);
}
