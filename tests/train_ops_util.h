/* Shared by the suites of the training ops (test_train_ops*.c, one op family each): the
 * tolerances, host and device helpers, central differences, the runners of the ops the
 * determinism check reuses.
 *
 * The training ops of the backend ABI (version 2), on every backend the build has: "cpu",
 * and "opencl" when it is built and finds a device. A backend that does not support an op
 * yet is told about in one line and skipped for that op (the CPU backend must support all).
 *
 * Every backward op is checked twice:
 *  - against central differences of a double-precision forward written here
 *    (L = sum(dy * f(x)), dL/dx by (L(x + h) - L(x - h)) / 2h, h = 1e-6 max(1, |x|)), on
 *    small shapes that hit the corner cases (repeated ids, masks, causal, cross and fused
 *    [q|k|v] attention, a fully masked row); the analytic double references of each suite are
 *    checked against the same differences;
 *  - against those analytic double references on awkward sizes (1, 7, 33, 65, 129).
 * Tolerances, as relative errors (max |got - want| / max |want|, clf_test_rel_err):
 *   TOL_FD      1e-3  a backend's float gradient vs the finite differences
 *   TOL_REF_FD  1e-7  a suite's analytic double gradients vs the finite differences
 *   TOL_REF     1e-5  CPU vs the analytic reference (float sums of up to a few hundred terms)
 *   TOL_REF_OCL 1e-4  OpenCL vs the same: float reductions in another order (as test_opencl)
 *   TOL_ROUND   1e-6  a few roundings per element: embed_backward, dropout's scale, adam's
 *                     param, m and v, sum_squares (one rounding of a double sum; OpenCL:
 *                     1e-5, a float tree sum)
 *   TOL_ADAM_STEP 1e-4 the update p_final - p_initial of 5 Adam steps (about 5 lr), which
 *                     the float parameter's roundings dominate
 *   exact             relu_backward, fill, dropout's mask and p = 0, ignored rows, the
 *                     columns attention_backward must not touch, run-to-run determinism
 * CLF_TEST_VERBOSE=1 prints every measured error. */
#ifndef CLF_TRAIN_OPS_UTIL_H
#define CLF_TRAIN_OPS_UTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "clformer/backend.h"
#include "testutil.h"

#define TOL_FD        1e-3
#define TOL_REF_FD    1e-7
#define TOL_REF       1e-5
#define TOL_REF_OCL   1e-4
#define TOL_ROUND     1e-6
#define TOL_ADAM_STEP 1e-4    /* a 5-step Adam update vs the float parameter's 5 roundings */
#define FD_H          1e-6    /* relative step: truncation ~h^2, cancellation ~1e-16/h */
#define SENTINEL      777.25f /* pre-filled where an op must not write */

/* The backend of the running test is testutil's clf_test_api / clf_test_be, opened by its
 * TCase's fixture (one process per test). */

/* Tolerance of a check whose result is a float reduction. */
double tol_reduce(void);
/* 1 when the backend has op; the CPU backend must, another one is skipped for it. */
int have(clf_op op);

clf_ptr P(clf_buffer *b);
/* A device buffer of bytes from host (NULL: uninitialised). */
clf_buffer *up(const void *host, size_t bytes);
void down(clf_buffer *b, void *host, size_t bytes);
/* n floats of value v (malloc'd). */
float *fconst(size_t n, float v);
/* Fails unless the relative error of got (float) against want (double) is <= tol. */
void expect_close(const char *what, const float *got, const double *want, size_t n, double tol);
/* The same for a suite's own double gradient against finite differences. */
void expect_ref_close(const char *what, const double *ref, const double *fd, size_t n);
/* dL/dx[idx[t]] for t < m by central differences (idx NULL: x[0..m)). */
typedef double (*loss_fn)(void *user);
void fd_grad(double *x, const size_t *idx, size_t m, loss_fn f, void *user, double *g);

/* Runs layernorm_backward on the backend; dx, dal, dbt hold the initial values (used
 * when accumulate, and always for dal/dbt) and receive the result. */
void run_ln_backward(const float *x, const float *al, const float *dy, int R, int C, int style,
                     float eps, int accumulate, float *dx, float *dal, float *dbt);
/* Runs embed_backward on the backend: dtable (initial values) += the gradient. */
void run_embed_backward(const int32_t *ids, const float *dout, int rows, int dim, int vocab,
                        float scale, float *dtable);

#endif
