#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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

int clf_test_main(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
