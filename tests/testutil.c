#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clformer/rng.h"

double clf_test_max_abs_err(const float *got, const float *want, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (isnan(d))
            return INFINITY;
        if (d > m)
            m = d;
    }
    return m;
}

double clf_test_rel_err(const float *got, const float *want, size_t n)
{
    double ref = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(want[i]) > ref)
            ref = fabs(want[i]);
    /* an all-zero reference is compared absolutely */
    if (ref < 1e-30)
        ref = 1.0;
    return clf_test_max_abs_err(got, want, n) / ref;
}

void clf_test_open_backend(const char *name, const clf_backend_api **api, clf_backend **be)
{
    clf_backend_opts opts = {.abi_version = CLF_BACKEND_ABI};
    const char *dev = getenv("CLF_TEST_DEVICE");
    opts.device = dev;
    *api = NULL;
    *be = NULL;
    CLF_ASSERT_OK(clf_backend_load(name, CLF_BUILD_BACKEND_DIR, api));
    CLF_ASSERT_OK((*api)->open(&opts, be));
}

clf_buffer *clf_test_upload(const clf_backend_api *api, clf_backend *be, const void *host,
                            size_t bytes)
{
    clf_buffer *b = NULL;
    CLF_ASSERT_OK(api->alloc(be, bytes ? bytes : 4, &b));
    if (host && bytes)
        CLF_ASSERT_OK(api->upload(be, (clf_ptr){b, 0}, host, bytes));
    return b;
}

void clf_test_fill(float *x, size_t n, unsigned seed, float lo, float hi)
{
    clf_rng r;
    clf_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = clf_rng_uniform_range(&r, lo, hi);
}

int clf_test_run_cli(const char *args, char *err, size_t errsize)
{
    char errfile[] = "/tmp/clf-test-err-XXXXXX";
    int fd = mkstemp(errfile);
    ck_assert_int_ge(fd, 0);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "CLF_PLUGIN_PATH= '%s' %s 2>'%s' </dev/null", CLF_CLI_PATH, args,
             errfile);
    int rc = system(cmd);
    FILE *f = fdopen(fd, "r");
    size_t len = f ? fread(err, 1, errsize - 1, f) : 0;
    err[len] = '\0';
    if (f)
        fclose(f);
    remove(errfile);
    if (rc == -1 || !WIFEXITED(rc))
        return -1;
    return WEXITSTATUS(rc);
}

char *clf_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

int clf_test_opencl_opens(const char *suite)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 0;
    if (pid == 0) {
        const clf_backend_api *api = NULL;
        clf_backend *be = NULL;
        clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE")};
        if (clf_backend_load("opencl", CLF_BUILD_BACKEND_DIR, &api) != CLF_OK ||
            api->open(&o, &be) != CLF_OK) {
            printf("%s: the OpenCL part is skipped: %s\n", suite, clf_last_error());
            fflush(stdout);
            _exit(1);
        }
        api->close(be);
        _exit(0);
    }
    int status = 0;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int clf_test_main(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
