/* CLF_FAULT (clformer/fault.h): each injected failure gives the one-line error of the real
 * one (naming the file, or the OpenCL call and error name), exit code 2 (files) or 3
 * (device), frees everything (run under ASan with leak detection, a leak is an abort and
 * a sanitizer report, both failures here), and, in training, leaves the last checkpoint
 * whole so that --resume continues. Every run is the clformer CLI in a process of its own
 * (CLF_FAULT is read once per process). The OpenCL tests take their device from
 * CLF_TEST_DEVICE, as the OpenCL suites do, and are skipped saying why where OpenCL is not
 * there (a failure under CLF_TEST_REQUIRE_OPENCL=1). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crash_util.h"

/* The model the forward runs use: a fixture of the test_cli suite. */
#define FX CLF_FIXTURES_DIR "/pre_tutorial"
/* Runs past this many injected failures in a sweep are a test error (no end found). */
#define SWEEP_MAX 64

static char err[16384];

static void setup(void)
{
    clf_test_make_tmpdir("clf-fault");
}

static void teardown(void)
{
    clf_test_remove_tmpdir();
}

/* A malformed CLF_FAULT is an error before any command runs, not a test that injects
 * nothing. */
START_TEST(test_fault_env_refused)
{
    static const struct {
        const char *spec, *says;
    } cases[] = {
        {"bogus:1", "unknown site 'bogus'"},
        {"write", "'write' is not <site>:<N>"},
        {"write:0", "write:0: calls are counted from 1"},
        {"opencl_alloc:2x", "'2x' in 'opencl_alloc' is not a whole number"},
        {"write:-1", "'-1' in 'write' is not a whole number"},
        {"write:1,", "'' is not <site>:<N>"},
        {"write_slow:20000", "write_slow:20000 is over 10000 ms"},
    };
    const char *argv[] = {"config", "-c", CLF_CONFIGS_DIR "/tiny.yaml", "--dump", NULL};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_msg(cu_run(cases[i].spec, 0, err, sizeof err, argv) == 2, "%s: %s", cases[i].spec,
                      err);
        cu_assert_error_line(err, "CLF_FAULT='", cases[i].says, NULL);
    }
    ck_assert_msg(cu_run("write:5,opencl_alloc:2,opencl_build:1,opencl_enqueue:9,write_slow:1", 0,
                         err, sizeof err, argv) == 0,
                  "a well-formed CLF_FAULT refused: %s", err);
}
END_TEST

/* CLF_FAULT=write: a file clformer writes (here init's weights) is the old one or absent,
 * never half of one, and no temporary file is left. */
START_TEST(test_fault_write_keeps_old_file)
{
    const char *dir = clf_test_tmpdir();
    char out[512];
    snprintf(out, sizeof out, "%s/w.safetensors", dir);
    const char *init1[] = {"init", "-c", CLF_CONFIGS_DIR "/tiny.yaml", "--seed", "1", "-o",
                           out,    NULL};
    const char *init2[] = {"init", "-c", CLF_CONFIGS_DIR "/tiny.yaml", "--seed", "2", "-o",
                           out,    NULL};
    ck_assert_int_eq(cu_run("write:1", 0, err, sizeof err, init1), 2);
    cu_assert_error_line(err, out, ".tmp.", "No space left on device", NULL);
    ck_assert_int_ne(access(out, F_OK), 0);
    ck_assert_int_eq(cu_count_temporaries(dir), 0);
    ck_assert_msg(cu_run(NULL, 0, err, sizeof err, init1) == 0, "init failed: %s", err);
    size_t n1, n2;
    char *before = clf_test_read_file(out, &n1);
    ck_assert_int_eq(cu_run("write:1", 0, err, sizeof err, init2), 2);
    cu_assert_error_line(err, out, "No space left on device", NULL);
    char *after = clf_test_read_file(out, &n2);
    ck_assert(n1 == n2 && memcmp(before, after, n1) == 0);
    ck_assert_int_eq(cu_count_temporaries(dir), 0);
    free(before);
    free(after);
}
END_TEST

#ifdef CLF_HAVE_OPENCL
/* `forward` of the pre_tutorial fixture on the OpenCL backend, output into the test's
 * directory: argv filled, the output path returned. */
static const char *forward_argv(const char **argv)
{
    static char out[512];
    snprintf(out, sizeof out, "%s/out.safetensors", clf_test_tmpdir());
    const char *device = getenv("CLF_TEST_DEVICE");
    int n = 0;
    const char *head[] = {"forward",
                          "-c",
                          FX "/model.yaml",
                          "-w",
                          FX "/weights.safetensors",
                          "-i",
                          FX "/io.safetensors",
                          "-o",
                          out,
                          "--backend",
                          "opencl"};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        argv[n++] = head[i];
    if (device && *device) {
        argv[n++] = "--device";
        argv[n++] = device;
    }
    argv[n] = NULL;
    return out;
}

/* Fails site's 1st, 2nd, 4th, ... call (every call when step is 1) in a forward on
 * OpenCL until a run gets through: each failing run exits 3 with one line holding the
 * words and writes no output. Returns how many runs failed. */
static int sweep_forward(const char *site, int step, const char *call, const char *cl_error)
{
    const char *argv[16];
    const char *out = forward_argv(argv);
    int failed = 0;
    for (int n = 1;; n = step == 1 ? n + 1 : n * step) {
        ck_assert_msg(n <= SWEEP_MAX, "%s: still failing at call %d", site, n);
        char spec[64];
        snprintf(spec, sizeof spec, "%s:%d", site, n);
        int rc = cu_run(spec, 0, err, sizeof err, argv);
        if (rc == 0)
            break;
        ck_assert_msg(rc == 3, "%s: exit code %d: %s", spec, rc, err);
        cu_assert_error_line(err, call, cl_error, NULL);
        ck_assert_int_ne(access(out, F_OK), 0);
        failed++;
    }
    printf("fault: %s: %d forwards failed as they should, the next one passed\n", site, failed);
    ck_assert_int_eq(access(out, F_OK), 0); /* the run past the last call */
    return failed;
}

/* Every buffer creation of a forward, one at a time: model weights, activations, scratch. */
START_TEST(test_fault_opencl_alloc)
{
    int failed = sweep_forward("opencl_alloc", 1, "clCreateBuffer failed",
                               "CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)");
    ck_assert_int_ge(failed, 3);
}
END_TEST

/* Every program build of open(), one at a time (cached programs count too). */
START_TEST(test_fault_opencl_build)
{
    int failed =
        sweep_forward("opencl_build", 1,
                      "clBuildProgram failed: ", "CL_BUILD_PROGRAM_FAILURE (-11) for kernels/");
    ck_assert_int_ge(failed, 5);
}
END_TEST

/* Kernel launches (own kernels and CLBlast GEMMs) of a forward: the 1st, 2nd, 4th, ... */
START_TEST(test_fault_opencl_enqueue)
{
    int failed = sweep_forward("opencl_enqueue", 2, "failed: ", "CL_OUT_OF_RESOURCES (-5)");
    ck_assert_int_ge(failed, 4);
}
END_TEST

/* Training on OpenCL: a launch failing in a resumed run, a build failing at its start,
 * then every buffer creation in turn until a run gets through (and finishes the run):
 * each a one-line error, every checkpoint still whole, and --resume continues from the
 * newest. */
START_TEST(test_fault_opencl_train)
{
    const char *dir = clf_test_tmpdir();
    const char *argv[CU_ARGV];
    char want[64];
    cu_first_run(dir, "opencl", 4, 2, 20, err, sizeof err, argv);
    ck_assert_int_eq(cu_check_run(dir), 4);

    /* some 40 to 60 launches a step: the 300th is well inside the 16 steps to go */
    ck_assert_int_eq(cu_run("opencl_enqueue:300", 0, err, sizeof err, argv), 3);
    cu_assert_error_line(err, "train: ", "failed: CL_OUT_OF_RESOURCES (-5)", NULL);
    long long step = cu_check_run(dir);
    printf("fault: opencl_enqueue:300 stopped training after the checkpoint of step %lld\n", step);
    ck_assert(step >= 4 && step < 20);

    ck_assert_int_eq(cu_run("opencl_build:2", 0, err, sizeof err, argv), 3);
    cu_assert_error_line(err, "clBuildProgram failed: CL_BUILD_PROGRAM_FAILURE", NULL);
    ck_assert_int_eq(cu_check_run(dir), step);

    int failed = 0;
    for (int n = 1;; n++) {
        ck_assert_msg(n <= SWEEP_MAX, "opencl_alloc: training still failing at call %d", n);
        char spec[64];
        snprintf(spec, sizeof spec, "opencl_alloc:%d", n);
        int rc = cu_run(spec, 0, err, sizeof err, argv);
        long long now = cu_check_run(dir);
        snprintf(want, sizeof want, "from step %lld\n", step);
        if (rc == 0) {
            ck_assert_msg(strstr(err, want), "did not resume from step %lld: %s", step, err);
            ck_assert_int_eq(now, 20);
            break;
        }
        ck_assert_msg(rc == 3, "%s: exit code %d: %s", spec, rc, err);
        cu_assert_error_line(err, "clCreateBuffer failed: CL_MEM_OBJECT_ALLOCATION_FAILURE", NULL);
        ck_assert_msg(now >= step, "%s: the newest checkpoint went from step %lld to %lld", spec,
                      step, now);
        step = now;
        failed++;
    }
    printf("fault: opencl_alloc: %d training runs failed as they should, the next one finished\n",
           failed);
    ck_assert_int_ge(failed, 5);
    ck_assert_int_eq(cu_count_temporaries(cu_path(dir, "run")), 0);
}
END_TEST
/* the suite's OpenCL test case, run when a device opens */
#define OPENCL_TCASE                                                                               \
    CLF_TCASE_FIXTURE("opencl", 600, setup, teardown, {test_fault_opencl_alloc},                   \
                      {test_fault_opencl_build}, {test_fault_opencl_enqueue},                      \
                      {test_fault_opencl_train}),
#else
#define OPENCL_TCASE
#endif

int main(void)
{
#ifdef CLF_HAVE_OPENCL
    const int n = clf_test_opencl_opens("fault") ? 2 : 1;
#else
    if (clf_test_opencl_unavailable("fault", "this build has no OpenCL backend"))
        return EXIT_FAILURE;
    const int n = 1;
#endif
    CLF_TCASES(cases,
               CLF_TCASE_FIXTURE("fault", 600, setup, teardown, {test_fault_env_refused},
                                 {test_fault_write_keeps_old_file}),
               OPENCL_TCASE)
    return clf_test_tcases_run("fault", cases, n);
}
