/* Shared helpers for the Check suites: comparisons with a stated tolerance, fixtures,
 * loading a backend from the build tree, and running the CLI. */
#ifndef CLF_TESTUTIL_H
#define CLF_TESTUTIL_H

#include <check.h>
#include <stddef.h>

#include "clformer/backend.h"

/* max|a-b| / max(max|b|, tiny): the relative error measure of the design (max abs error
 * over max abs value of the reference). */
double clf_test_rel_err(const float *got, const float *want, size_t n);
/* max|a-b| */
double clf_test_max_abs_err(const float *got, const float *want, size_t n);

/* Fails the test (with where and the error) unless rel_err(got, want) <= tol. */
#define CLF_ASSERT_CLOSE(got, want, n, tol)                                                        \
    do {                                                                                           \
        double e_ = clf_test_rel_err((got), (want), (n));                                          \
        ck_assert_msg(e_ <= (tol), "%s vs %s: relative error %.3g > %.3g", #got, #want, e_,        \
                      (double)(tol));                                                              \
    } while (0)

/* Fails with the clformer error message unless st == CLF_OK. */
#define CLF_ASSERT_OK(expr)                                                                        \
    do {                                                                                           \
        clf_status st_ = (expr);                                                                   \
        ck_assert_msg(st_ == CLF_OK, "%s failed (%d): %s", #expr, (int)st_, clf_last_error());     \
    } while (0)

/* Opens backend `name` from the build tree (CLF_BUILD_BACKEND_DIR) with default options;
 * fails the test if it cannot. */
void clf_test_open_backend(const char *name, const clf_backend_api **api, clf_backend **be);

/* Allocates a device buffer holding n floats (or ints) from host, failing the test on error. */
clf_buffer *clf_test_upload(const clf_backend_api *api, clf_backend *be, const void *host,
                            size_t bytes);

/* Fills x with uniform values in [lo, hi) from a fixed seed. */
void clf_test_fill(float *x, size_t n, unsigned seed, float lo, float hi);

/* Runs the clformer CLI with args (a shell command tail), capturing stderr into err
 * (size errsize) and returning the exit code. */
int clf_test_run_cli(const char *args, char *err, size_t errsize);

/* The whole file, NUL-terminated (malloc'd; free() it); *len (may be NULL) without the
 * NUL. Fails the test when it cannot be read. */
char *clf_test_read_file(const char *path, size_t *len);

/* Whether the OpenCL backend opens with a device (CLF_TEST_DEVICE chooses one), tried in
 * a child process so that the caller, which forks the tests, never starts the OpenCL
 * runtime. When it does not, prints "<suite>: the OpenCL part is skipped: <why>". */
int clf_test_opencl_opens(const char *suite);

/* Runs one Check suite and returns the process exit status (0 when all pass). */
int clf_test_main(Suite *s);

#endif
