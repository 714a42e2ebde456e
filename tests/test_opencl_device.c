/* The OpenCL backend's device handling: the device list and device choice (by index, by
 * name, CLF_OPENCL_DEVICE), no OpenCL driver at all (this program run again with an empty
 * ICD vendor directory).
 * Without an OpenCL device the suite says why and exits 77 (ctest: skipped; a failure with
 * CLF_TEST_REQUIRE_OPENCL=1). */
#include "opencl_testutil.h"

#include "clformer/tensor.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

START_TEST(test_devices)
{
    dev_list l = {0};
    CLF_ASSERT_OK(ocl.api->list_devices(count_device, &l));
    ck_assert_int_ge(l.n, 1);
    ck_assert_int_eq(l.first.index, 0);
    ck_assert_int_gt((int)strlen(l.first.platform), 0);
    ck_assert_int_gt((int)strlen(l.first.name), 0);
    ck_assert_int_gt(l.first.compute_units, 0);
    ck_assert_uint_gt(l.first.global_mem_bytes, 0);
    ck_assert_uint_gt(l.first.max_alloc_bytes, 0);
    ck_assert_msg(strstr(l.first.version, "OpenCL C"), "version '%s'", l.first.version);

    char d[256];
    CLF_ASSERT_OK(ocl.api->describe(ocl.be, d, sizeof d));
    ck_assert_msg(strncmp(d, "OpenCL: ", 8) == 0 && strstr(d, " / ") && strchr(d, '('),
                  "describe: '%s'", d);
    /* every op; not the capabilities of reading BF16 and int8 weights (a model refuses
     * those weight types on this backend) or of BF16 arithmetic; F16 arithmetic by default on a GPU
     * with cl_khr_fp16 (test_opencl_limits checks CLF_OPENCL_HGEMM; the first device is the one
     * opened unless a device was named) */
    for (int op = 0; op < CLF_OP_COUNT; op++)
        if (op != CLF_OP_GEMM_HALF_ARITH)
            ck_assert_int_eq(ocl.api->supports(ocl.be, (clf_op)op),
                             op != CLF_OP_GEMM_BF16 && op != CLF_OP_GEMM_I8 &&
                                 op != CLF_OP_GEMM_BF16_ARITH);
    const char *hgemm = getenv("CLF_OPENCL_HGEMM");
    if (l.n == 1 && (!hgemm || !*hgemm || strcmp(hgemm, "auto") == 0))
        ck_assert_int_eq(ocl.api->supports(ocl.be, CLF_OP_GEMM_HALF_ARITH),
                         l.first.fp16 && strcmp(l.first.type, "GPU") == 0);
    ck_assert_int_eq(ocl.api->supports(ocl.be, CLF_OP_COUNT), 0);
    ck_assert_int_eq(ocl.api->supports(ocl.be, (clf_op)-1), 0);

    /* choosing by index, by a case-insensitive piece of the name, and the env override */
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = "0"};
    clf_backend *be = NULL;
    unsetenv("CLF_OPENCL_DEVICE");
    CLF_ASSERT_OK(ocl.api->open(&o, &be));
    ocl.api->close(be);
    char piece[8] = {0};
    for (int i = 0; i < 5 && l.first.name[i]; i++)
        piece[i] = (char)(i % 2 ? toupper((unsigned char)l.first.name[i])
                                : tolower((unsigned char)l.first.name[i]));
    o.device = piece;
    CLF_ASSERT_OK(ocl.api->open(&o, &be));
    CLF_ASSERT_OK(ocl.api->describe(be, d, sizeof d));
    ck_assert_msg(strstr(d, l.first.name) != NULL || l.n > 1, "'%s' chose '%s'", piece, d);
    ocl.api->close(be);

    o.device = "no-such-device-xyz";
    EXPECT_ERROR(ocl.api->open(&o, &be), CLF_ERR_INPUT, "no OpenCL device matches",
                 "no-such-device-xyz", "0: ");
    ck_assert_ptr_null(be);
    o.device = "99";
    EXPECT_ERROR(ocl.api->open(&o, &be), CLF_ERR_INPUT, "device 99", "does not exist");
    setenv("CLF_OPENCL_DEVICE", "also-not-a-device", 1);
    o.device = "0";
    EXPECT_ERROR(ocl.api->open(&o, &be), CLF_ERR_INPUT, "also-not-a-device", "CLF_OPENCL_DEVICE");
    setenv("CLF_OPENCL_DEVICE", "0", 1);
    o.device = "no-such-device-xyz"; /* the environment wins */
    CLF_ASSERT_OK(ocl.api->open(&o, &be));
    ocl.api->close(be);
    unsetenv("CLF_OPENCL_DEVICE");
}
END_TEST

/* No OpenCL driver at all: run this program again with the ICD loader pointed at an empty
 * vendor directory (a fresh process: the loader reads its environment once). */
static int no_icd_child(void)
{
    const clf_backend_api *api = NULL;
    clf_backend *be = NULL;
    if (clf_backend_load("opencl", CLF_BUILD_BACKEND_DIR, &api) != CLF_OK) {
        fprintf(stderr, "load: %s\n", clf_last_error());
        return 1;
    }
    dev_list l = {0};
    clf_status st = api->list_devices(count_device, &l);
    if (st == CLF_OK) {
        fprintf(stderr, "this ICD loader ignores OCL_ICD_VENDORS\n");
        return SKIP_EXIT;
    }
    fprintf(stderr, "list_devices: %s\n", clf_last_error());
    if (st != CLF_ERR_BACKEND || !strstr(clf_last_error(), "pocl-opencl-icd"))
        return 1;
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI};
    st = api->open(&o, &be);
    fprintf(stderr, "open: %s\n", clf_last_error());
    if (st != CLF_ERR_BACKEND || be || !strstr(clf_last_error(), "no OpenCL platform"))
        return 1;
    return 0;
}

START_TEST(test_no_driver)
{
    char dir[] = "/tmp/clf-no-icd-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("OCL_ICD_VENDORS", dir, 1);
        setenv("OPENCL_VENDOR_PATH", dir, 1); /* the Khronos loader's name for it */
        unsetenv("OCL_ICD_FILENAMES");
        execl("/proc/self/exe", "test_opencl", "--no-icd-child", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    rmdir(dir);
    ck_assert(WIFEXITED(status));
    if (WEXITSTATUS(status) == SKIP_EXIT) {
        printf("test_no_driver: skipped (the ICD loader ignores OCL_ICD_VENDORS)\n");
        return;
    }
    ck_assert_msg(WEXITSTATUS(status) == 0, "no-driver child exited %d (see its stderr)",
                  WEXITSTATUS(status));
}
END_TEST

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--no-icd-child") == 0) {
        /* _exit: LeakSanitizer's exit-time scan crashes (glibc dynamic-TLS bug) in a process
         * whose ICD loader found no platform; this child only checks two messages. */
        int rc = no_icd_child();
        fflush(NULL);
        _exit(rc);
    }
    const TTest *const tests[] = {test_devices, test_no_driver};
    return ocl_test_run("opencl_device", "device", tests, (int)(sizeof tests / sizeof tests[0]));
}
