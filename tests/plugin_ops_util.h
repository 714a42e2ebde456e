/* Shared by the suites of the plugin ops (test_plugin_ops*.c): the test plugin ops, the
 * tolerances, the measuring of errors, host and device views with sentinels.
 *
 * The plugin ops of the backend ABI (version 3): plugin_prepare, activation,
 * activation_backward, norm and norm_backward, on "cpu" and, when it is built and finds a
 * device, "opencl". The plugin ops are defined in plugin_ops_util.c (no .so), each with a CPU form
 * and an OpenCL form:
 *   tsq   activation        f(x) = x tanh(x),  f'(x) = tanh(x) + x (1 - tanh(x)^2)
 *   tsqg  gated activation  the same f, times the gate
 *   rmsb  norm (with bias)  n(x) = x / sqrt(mean(x^2) + eps), run with and without beta
 * and a few broken ones for the error paths.
 *
 * Every result is compared with a double-precision reference written in its suite, on sizes n,
 * rows, cols in {1, 7, 33, 65, 129} (and one n above the CPU's parallel threshold), with
 * the gate, beta, accumulate and the optional dalpha/dbeta on and off, operands at
 * distinct non-zero offsets with sentinels around them, and the in-place forms the header
 * allows. Gradients are also compared with central differences of the double reference
 * (h = 1e-6 max(1, |v|)), which the analytic reference itself must match to TOL_REF_FD.
 * Tolerances, as relative errors (max |got - want| / max |want|):
 *   TOL_CPU     1e-5  CPU vs the reference: a few float roundings per element (the test
 *                     ops' CPU forms and the backend's dalpha/dbeta sum in double)
 *   TOL_OCL     1e-4  OpenCL vs the reference: float work-group sums in tree order and
 *                     OpenCL C's tanh/sqrt (a few ulp), as in test_train_ops
 *   TOL_REF_FD  1e-7  a suite's analytic double gradients vs the central differences
 *   (a backend's gradient vs the central differences uses its TOL_CPU / TOL_OCL: the
 *   differences are ~1e-9 from the exact gradient, far below either)
 *   exact             sentinels, in-place vs out-of-place, run-to-run and thread-count
 *                     determinism
 * CLF_TEST_VERBOSE=1 prints the largest error measured in each category of a test. */
#ifndef CLF_PLUGIN_OPS_UTIL_H
#define CLF_PLUGIN_OPS_UTIL_H

#include <check.h>
#include <stddef.h>

#include "clformer/backend.h"
#include "clformer/plugin.h"
#include "testutil.h"

#define TOL_CPU    1e-5
#define TOL_OCL    1e-4
#define TOL_REF_FD 1e-7
#define FD_H       1e-6 /* relative step: truncation ~h^2, cancellation ~1e-16/h */
/* eps of the test norm: large enough that a backend dropping eps fails, and that a
 * one-column row (n = x / sqrt(x^2 + eps), whose gradient cancels to ~eps / (x^2 + eps)
 * in float) keeps a well-conditioned gradient. */
#define NORM_EPS 0.1f
#define SENTINEL 777.25f /* pre-filled around every view and in every output */
#define PAD      3       /* sentinel elements after every view */
#define BIG_N    70001   /* above the CPU's parallel threshold (65536): several chunks */

static const int SIZES[] = {1, 7, 33, 65, 129};
#define NSIZES ((int)(sizeof SIZES / sizeof SIZES[0]))
/* The sizes a norm check pairs as rows x columns: all but the largest under CLF_TEST_SMALL
 * (the simulator's pass, where the 129-wide pairs would take most of its time). */
static inline int norm_nsizes(void)
{
    return clf_test_small() ? NSIZES - 1 : NSIZES;
}

/* The test plugin ops: tsq (activation), tsqg (gated), rmsb (norm with bias); tsq's CPU
 * forms and OpenCL source also make the broken ops of the error paths. */
extern const clf_plugin_op op_tsq, op_tsqg, op_rmsb;
void tsq_forward(float *y, const float *x, size_t n);
void tsq_backward(float *dx, const float *dy, const float *x, size_t n);
extern const char tsq_cl[];

/* The tolerance of the backend of the running test (testutil's clf_test_api / clf_test_be). */
double tol(void);
/* The cpu backend must support every plugin op; another backend is skipped for one. */
int have(clf_op op);

/* Prints the largest error of each category of this test with CLF_TEST_VERBOSE; resets. */
void report(void);
/* Fails unless got (float) is within tol of want (double); what names the category. */
void expect_close(const char *what, const char *shape, const float *got, const double *want,
                  size_t n, double t);
/* The same for a suite's double gradient against the central differences. */
void expect_ref_close(const char *what, const char *shape, const double *ref, const double *fd,
                      size_t n);
/* Central difference step for v. */
double fd_step(double v);

/* A view: n floats at element offset off of their own buffer, SENTINEL before and after. */
typedef struct view {
    clf_buffer *buf;
    size_t off, n;
} view;

static const clf_ptr NONE = {NULL, 0};

float *falloc(size_t n);
/* host (NULL: SENTINEL) at element offset off. */
view vput(const float *host, size_t n, size_t off);
clf_ptr vp(view v);
/* Downloads the view into host and fails if the op wrote outside it. */
void vget(view v, float *host, const char *what);
void vfree(view v);
/* Element offset of operand k of a call: distinct per operand (so a backend that mixes up
 * offsets fails), or 0 for all. */
size_t offset_of(int shifted, int k);

#endif
