/* The backend loader: finds backends on the search path, refuses what is not a backend
 * (real broken shared objects built by tests/loader.cmake) with a message naming the file
 * and the reason, and never loads the same file twice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/backend.h"
#include "testutil.h"

START_TEST(test_load_cpu_from_build_tree)
{
    const clf_backend_api *api = NULL, *again = NULL;
    CLF_ASSERT_OK(clf_backend_load("cpu", NULL, &api));
    ck_assert_int_eq(api->abi_version, CLF_BACKEND_ABI);
    ck_assert_str_eq(api->name, "cpu");
    CLF_ASSERT_OK(clf_backend_load("cpu", CLF_BUILD_BACKEND_DIR, &again));
    ck_assert_ptr_eq(api, again); /* one handle per file */
}
END_TEST

/* What is not a backend is refused with st, naming in the message what want holds (the
 * file, the directories looked in, the reason). */
static const struct refusal {
    const char *name, *dir;
    clf_status st;
    const char *want[2];
} refusals[] = {
    {"nosuchbackend",
     CLF_BROKEN_SO_DIR,
     CLF_ERR_BACKEND,
     {"clformer-nosuchbackend.so", CLF_BROKEN_SO_DIR}},
    {"../etc/x", NULL, CLF_ERR_INPUT, {"not valid"}},
    {"noentry",
     CLF_BROKEN_SO_DIR,
     CLF_ERR_INPUT,
     {"clformer-noentry.so", "no 'clf_backend_entry' symbol"}},
    {"incomplete", CLF_BROKEN_SO_DIR, CLF_ERR_INPUT, {"incomplete"}},
};

START_TEST(test_refused)
{
    const struct refusal *r = &refusals[_i];
    const clf_backend_api *api = NULL;
    ck_assert_int_eq(clf_backend_load(r->name, r->dir, &api), r->st);
    ck_assert_ptr_null(api);
    for (int k = 0; k < 2 && r->want[k]; k++)
        ck_assert_msg(strstr(clf_last_error(), r->want[k]), "%s", clf_last_error());
}
END_TEST

START_TEST(test_wrong_abi_version)
{
    const clf_backend_api *api = NULL;
    char want[64];
    ck_assert_int_eq(clf_backend_load("wrongabi", CLF_BROKEN_SO_DIR, &api), CLF_ERR_INPUT);
    snprintf(want, sizeof want, "backend ABI version %d", CLF_BACKEND_ABI + 998);
    ck_assert_msg(strstr(clf_last_error(), want), "%s", clf_last_error());
    snprintf(want, sizeof want, "needs version %d", CLF_BACKEND_ABI);
    ck_assert_msg(strstr(clf_last_error(), want), "%s", clf_last_error());
}
END_TEST

START_TEST(test_not_a_shared_object)
{
    char dir[] = "/tmp/clf-loader-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/clformer-text.so", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("this is not an ELF file\n", f);
    fclose(f);
    const clf_backend_api *api = NULL;
    ck_assert_int_eq(clf_backend_load("text", dir, &api), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "not a loadable backend"), "%s", clf_last_error());
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "clformer-text.so"));
    remove(path);
    rmdir(dir);
}
END_TEST

START_TEST(test_plugin_path_env)
{
    const clf_backend_api *api = NULL;
    setenv("CLF_PLUGIN_PATH", "/nonexistent:" CLF_BROKEN_SO_DIR, 1);
    /* found through the environment, not the explicit dir */
    ck_assert_int_eq(clf_backend_load("wrongabi", NULL, &api), CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), CLF_BROKEN_SO_DIR));
    /* not found: the message lists the search path in order, --plugin-dir first */
    setenv("CLF_PLUGIN_PATH", "/nonexistent-a:/nonexistent-b", 1);
    ck_assert_int_eq(clf_backend_load("nosuchbackend", CLF_BROKEN_SO_DIR, &api), CLF_ERR_BACKEND);
    ck_assert_msg(strstr(clf_last_error(), "backend 'nosuchbackend' not found: no "
                                           "clformer-nosuchbackend.so in " CLF_BROKEN_SO_DIR
                                           ", /nonexistent-a, /nonexistent-b, "),
                  "%s", clf_last_error());
    ck_assert_msg(strstr(clf_last_error(), " (set --plugin-dir or CLF_PLUGIN_PATH)"), "%s",
                  clf_last_error());
    unsetenv("CLF_PLUGIN_PATH");
}
END_TEST

START_TEST(test_open_named_env_override)
{
    const clf_backend_api *api = NULL;
    clf_backend *be = NULL;
    clf_backend_opts opts = {.abi_version = CLF_BACKEND_ABI, .threads = 1};
    setenv("CLF_BACKEND", "nosuchbackend", 1);
    /* an explicit name (the CLI's --backend) wins over the environment */
    CLF_ASSERT_OK(clf_backend_open_named("cpu", NULL, &opts, &api, &be));
    api->close(be);
    ck_assert_int_eq(clf_backend_open_named(NULL, NULL, &opts, &api, &be), CLF_ERR_BACKEND);
    unsetenv("CLF_BACKEND");
    /* auto falls back to cpu when no GPU is found */
    CLF_ASSERT_OK(clf_backend_open_named("auto", NULL, &opts, &api, &be));
    ck_assert_ptr_nonnull(api);
    api->close(be);
}
END_TEST

static void count_found(void *user, const char *path, const clf_backend_api *api, const char *error)
{
    int *counts = user;
    (void)path;
    if (api)
        counts[0]++;
    else if (error && *error)
        counts[1]++;
}

START_TEST(test_scan_reports_good_and_broken)
{
    int counts[2] = {0, 0};
    clf_backend_scan(CLF_BROKEN_SO_DIR, count_found, counts);
    ck_assert_int_ge(counts[0], 1); /* at least the cpu backend */
    ck_assert_int_ge(counts[1], 3); /* the three broken ones */
}
END_TEST

START_TEST(test_require_unsupported_op)
{
    const clf_backend_api *api = NULL;
    clf_backend *be = NULL;
    clf_test_open_backend("cpu", &api, &be);
    CLF_ASSERT_OK(clf_backend_require(api, be, CLF_OP_GEMM));
    ck_assert_int_eq(clf_backend_require(api, be, CLF_OP_COUNT), CLF_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "cpu backend"));
    api->close(be);
}
END_TEST

/* The checks both backends take from libclformer (backend_checks.c, clf_plugin_check_gates)
 * keep the words each backend had for them. They compare buffer pointers only, so the
 * operands are dummy pointers. */
static void expect_refusal(clf_status st, const char *want)
{
    ck_assert_int_eq(st, CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), want);
}

START_TEST(test_shared_checks)
{
    static char bufs[2];
    clf_buffer *b0 = (clf_buffer *)(void *)&bufs[0], *b1 = (clf_buffer *)(void *)&bufs[1];
    clf_plugin_op plain = {.name = "p", .kind = CLF_PLUGIN_ACTIVATION};
    clf_plugin_op gated = {.name = "g", .kind = CLF_PLUGIN_GATED_ACTIVATION};

    CLF_ASSERT_OK(clf_check_ln_shape("cpu", "layernorm", 0, 2, CLF_LN_TUTORIAL));
    expect_refusal(clf_check_ln_shape("cpu", "layernorm", -1, 4, CLF_LN_STANDARD),
                   "cpu: layernorm: bad shape rows=-1 cols=4");
    expect_refusal(clf_check_ln_shape("opencl", "layernorm", 2, 4, (clf_ln_style)7),
                   "opencl: layernorm: unknown style 7");
    expect_refusal(clf_check_ln_shape("cpu", "layernorm_backward", 2, 1, CLF_LN_TUTORIAL),
                   "cpu: layernorm_backward: the tutorial style needs cols >= 2 (unbiased std)");

    /* in place is fine, a shifted span is not; 4 floats are 16 bytes */
    clf_activation_args fa = {.op = &gated, .out = {b0, 0}, .x = {b0, 0}, .gate = {b0, 16}, .n = 4};
    CLF_ASSERT_OK(clf_check_activation_overlap("cpu", "activation 'g'", &fa));
    fa.x.off = 4;
    expect_refusal(clf_check_activation_overlap("opencl", "activation 'g'", &fa),
                   "opencl: activation 'g': 'out' partly overlaps 'x'");
    fa.x.buf = b1;
    fa.gate.off = 12;
    expect_refusal(clf_check_activation_overlap("cpu", "activation 'g'", &fa),
                   "cpu: activation 'g': 'out' may not overlap 'gate'");

    /* dx may be dy without a gate, not with one; dgate may be dy, not a shifted dy */
    clf_activation_backward_args ba = {.op = &plain, .dx = {b0, 0}, .dy = {b0, 0}, .n = 4};
    CLF_ASSERT_OK(clf_check_activation_backward_overlap("cpu", "activation_backward 'p'", &ba));
    ba.op = &gated;
    ba.dgate = ba.gate = (clf_ptr){b1, 0};
    expect_refusal(clf_check_activation_backward_overlap("opencl", "b", &ba),
                   "opencl: b: 'dx' may not overlap 'dy'");
    ba.dy = (clf_ptr){b1, 4};
    ba.gate = (clf_ptr){NULL, 0};
    expect_refusal(clf_check_activation_backward_overlap("cpu", "b", &ba),
                   "cpu: b: 'dgate' partly overlaps 'dy'");

    CLF_ASSERT_OK(clf_plugin_check_gates("cpu", "a", &gated, 2, 2));
    expect_refusal(clf_plugin_check_gates("cpu", "a", &gated, 1, 0),
                   "cpu: a: plugin op 'g' (gated activation) needs a gate");
    expect_refusal(clf_plugin_check_gates("opencl", "a", &plain, 1, 1),
                   "opencl: a: plugin op 'p' (activation) takes no gate");
    expect_refusal(clf_plugin_check_gates("opencl", "b", &gated, 2, 1),
                   "opencl: b: plugin op 'g' (gated activation) needs gate and dgate");
    expect_refusal(clf_plugin_check_gates("cpu", "b", &plain, 2, 1),
                   "cpu: b: plugin op 'p' (activation) takes no gate or dgate");
}
END_TEST

CLF_TEST_SUITE_MAIN("loader",
                    CLF_TCASE("load", 0, {test_load_cpu_from_build_tree},
                              {test_refused, CLF_LOOPS(refusals)}, {test_wrong_abi_version},
                              {test_not_a_shared_object}, {test_plugin_path_env},
                              {test_open_named_env_override}, {test_scan_reports_good_and_broken},
                              {test_require_unsupported_op}, {test_shared_checks}))
