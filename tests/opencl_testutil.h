/* Helpers shared by the OpenCL suites (tests/test_opencl_*.c, one per op family): each test
 * runs in a process of its own with the OpenCL and the CPU backend opened (ocl, cpu), and
 * compares the OpenCL result with a host reference in double and with the CPU backend. */
#ifndef CLF_OPENCL_TESTUTIL_H
#define CLF_OPENCL_TESTUTIL_H

#include "testutil.h"

#include <stdint.h>
#include <string.h>

/* Tolerances, as max|got - want| / max|want| (clf_test_rel_err). */
#define TOL_EXACT 1e-6 /* add, embed: one or two roundings per element */
#define TOL_NORM  1e-5 /* layernorm, softmax: float reductions vs double */
#define TOL_GEMM  1e-4 /* gemm: k-long float dot products summed in another order */
/* gemm reading b_half: per element, |got - want| <= TOL_GEMM_HALF * (|alpha| sum|a b| +
 * |beta c| + |bias|), want in double from the same F16-rounded B (so F16 rounding is not
 * counted): float sums of k / 8 / lanes chunks of 8, then a tree of up to 32 lanes */
#define TOL_GEMM_HALF 1e-5
/* gemm in F16 arithmetic (CLBlast's HGEMM, GPUs with cl_khr_fp16 or CLF_OPENCL_HGEMM=on):
 * the same measure against a reference from A and B both rounded to F16. Every addition
 * of the k-long sum and the product's last rounding are F16's (u = 2^-11 = 4.9e-4 of the
 * running sum): the worst case grows with k, and over these cases' 140,000 elements the
 * worst measured on Intel's CPU runtime is 4u (1.96e-3, bench/RESULTS.md), so 8u. */
#define TOL_GEMM_HALF_ARITH 4e-3
#define TOL_ATTN            1e-4 /* attention: head_dim dot products and a kv_len-long softmax */
/* training ops (relu_backward, dropout and fill are compared bit for bit) */
#define TOL_LN_BWD    1e-5 /* layernorm_backward: float row sums; dx vs central differences */
#define TOL_ATTN_BWD  1e-4 /* attention_backward: as attention, plus dP and D_i sums */
#define TOL_EMBED_BWD 1e-6 /* embed_backward: float sums of the repeated ids in row order */
#define TOL_XENT      1e-5 /* cross_entropy: a cols-long max, sum of exp and sum of logits */
#define TOL_ADAM      1e-6 /* adam: a few float roundings per element and step */
#define TOL_SUMSQ     1e-6 /* sum_squares: compensated per-item sums, then a float tree */

#define SKIP_EXIT 77 /* ctest's SKIP_RETURN_CODE for these suites (tests/opencl.cmake) */

typedef struct bk {
    const char *label;
    const clf_backend_api *api;
    clf_backend *be;
} bk;

/* Opened afresh in each test's process by the fixture of ocl_test_tcase. */
extern bk ocl, cpu;

/* The awkward sizes the ops run at: 1, 7, 33, 65, 129 (non-multiples of the work-group and
 * GEMM tile sizes). */
#define NSIZES 5
extern const int sizes[NSIZES];

/* n floats copied from x (malloc'd, never NULL). */
float *fdup(const float *x, size_t n);
/* A buffer of k holding bytes from host (zeros when host is NULL); fails the test on error. */
clf_buffer *up(bk *k, const void *host, size_t bytes);
/* bytes of b into host; fails the test on error. */
void down(bk *k, void *host, clf_buffer *b, size_t bytes);
/* Fails unless clf_test_rel_err(got, want) <= tol, naming what and the reference (vs). */
void expect_close(const float *got, const float *want, size_t n, double tol, const char *what,
                  const char *vs);
/* expect_close of the OpenCL result got against the host reference want, then against the
 * CPU backend's result cpu. */
void expect_close_both(const float *got, const float *want, const float *cpu, size_t n, double tol,
                       const char *what);

/* Asserts that expr fails with status want and a message containing each of the words. */
#define EXPECT_ERROR(expr, want, ...)                                                              \
    do {                                                                                           \
        clf_status st_ = (expr);                                                                   \
        const char *words_[] = {__VA_ARGS__};                                                      \
        ck_assert_msg(st_ == (want), "%s: status %d, want %d (%s)", #expr, (int)st_, (int)(want),  \
                      clf_last_error());                                                           \
        for (size_t w_ = 0; w_ < sizeof words_ / sizeof words_[0]; w_++)                           \
            ck_assert_msg(strstr(clf_last_error(), words_[w_]), "%s: message '%s' lacks '%s'",     \
                          #expr, clf_last_error(), words_[w_]);                                    \
    } while (0)

/* The worst relative errors a test saw, vs the host reference and vs the CPU backend. */
typedef struct worst {
    double host, cpu;
} worst;

/* got vs the host reference and vs the CPU backend, both within tol; records the worst. */
void expect_both(const float *got, const float *host, const float *cpu_got, size_t n, double tol,
                 const char *what, worst *w);
/* Prints the worst errors of test, so that the margins below tol show in the ctest log. */
void report(const char *test, const worst *w, double tol);
/* The same bits, element by element (NaN and -0 included). */
void expect_same_bits(const float *got, const float *want, size_t n, const char *what,
                      const char *vs);
/* Frees the non-NULL buffers of b[0 .. n). */
void free_all(bk *k, clf_buffer **b, int n);

/* Runners of the ops that more than one suite calls (the program cache test of
 * test_opencl_device.c runs one of each family). Each uploads its inputs, runs the op on
 * k, downloads the outputs and frees the buffers. */
/* sum_mode: 0 no sum_out, 1 a separate sum_out, 2 sum_out aliasing x (pre-norm stream). */
void run_layernorm(bk *k, const clf_layernorm_args *tmpl, const float *x, const float *res,
                   const float *alpha, const float *beta, int sum_mode, float *out, float *sum);
void run_embed(bk *k, const clf_embed_args *tmpl, const int32_t *ids, const float *table,
               const float *pe, size_t npe, float *out);
void run_softmax(bk *k, const float *x, int rows, int cols, int log, int alias, float *out);
/* out holds the initial contents unless it aliases x. */
void run_dropout(bk *k, const float *x, size_t n, size_t off, float p, uint64_t seed, int alias,
                 float *out);
/* sum x[off .. off + n)^2 into out[1] of a two-float buffer (out[0] must stay). */
float run_sum_squares(bk *k, const float *x, size_t n, size_t off);
/* params: 0 neither dalpha nor dbeta, 1 both, 2 dalpha only. dx0, da0, db0: the initial
 * contents (dx is accumulated into when a->accumulate; the parameters always are). */
void run_layernorm_backward(bk *k, const clf_layernorm_backward_args *tmpl, const float *x,
                            const float *dy, const float *alpha, const float *dx0, const float *da0,
                            const float *db0, int params, float *dx, float *da, float *db);

/* What list_devices reported: how many devices, and the first. */
typedef struct dev_list {
    int n;
    clf_device_info first;
} dev_list;
/* A list_devices callback counting into a dev_list. */
void count_device(void *user, const clf_device_info *d);

/* A TCase name whose tests open ocl and cpu before each test and close them after. */
TCase *ocl_test_tcase(const char *name);
/* main() of an OpenCL suite: without the backend or without a device, says why and returns
 * SKIP_EXIT (EXIT_FAILURE with CLF_TEST_REQUIRE_OPENCL=1); otherwise runs make()'s suite and
 * returns its exit status. */
int ocl_test_main(const char *suite, Suite *(*make)(void));
/* The same for a suite of one ocl_test_tcase(tcase) holding the n tests (CLF_TEST_MAIN). */
int ocl_test_run(const char *suite, const char *tcase, const TTest *const *tests, int n);

#endif
