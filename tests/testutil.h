/* Shared helpers for the Check suites: comparisons with a stated tolerance, fixtures,
 * loading a backend from the build tree, and running the CLI. */
#ifndef CLF_TESTUTIL_H
#define CLF_TESTUTIL_H

#include <check.h>
#include <stddef.h>

#include "clformer/backend.h"
#include "clformer/config.h"
#include "clformer/model.h"
#include "clformer/ops.h"
#include "clformer/tokenizer.h"
#include "clformer/train.h"
#include "clformer/weights.h"

/* max|a-b| / max(max|b|, tiny): the relative error measure of the design (max abs error
 * over max abs value of the reference). */
double clf_test_rel_err(const float *got, const float *want, size_t n);
/* max|a-b| */
double clf_test_max_abs_err(const float *got, const float *want, size_t n);

/* The layer norm of the row x[0..C) in double: its mean into *mean and, returned, its
 * denominator as style says (CLF_LN_TUTORIAL: the standard deviation over C - 1, plus eps;
 * otherwise sqrt(variance + eps)). */
double clf_test_ln_row(const double *x, int C, int style, double eps, double *mean);

/* The reference GEMM: C = alpha op(A) op(B) + beta C (C not read when beta is 0), + bias,
 * relu, in double, for each of batch matrices g->stride_* elements apart; the host arrays
 * A, B, bias and C hold the operands at g's offsets (bytes). */
void clf_test_ref_gemm(const clf_gemm_args *g, int batch, const float *A, const float *B,
                       const float *bias, float *C);

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

/* n floats filled as clf_test_fill does (malloc'd, never NULL; free() it). */
float *clf_test_frand(size_t n, unsigned seed, float lo, float hi);
/* n zeroed doubles (calloc'd, never NULL; free() it). */
double *clf_test_dalloc(size_t n);
/* x as doubles (clf_test_dalloc'd). */
double *clf_test_to_double(const float *x, size_t n);
/* clf_test_rel_err of got against a double reference want; got is gotf (float) or, when
 * gotf is NULL, gotd (double). */
double clf_test_rel_err_d(const float *gotf, const double *gotd, const double *want, size_t n);

/* The backend of the running test, for suites that run the same tests on "cpu" and
 * "opencl": the fixture of a TCase from clf_test_backend_tcase opens it before each test
 * (one process per test) and closes it after. */
extern const char *clf_test_be_name;
extern const clf_backend_api *clf_test_api;
extern clf_backend *clf_test_be;
/* A TCase named backend ("cpu" or "opencl") whose tests run on that backend, with a
 * timeout of timeout seconds. */
TCase *clf_test_backend_tcase(const char *backend, double timeout);
/* Whether the backend of the running test is "cpu". */
int clf_test_is_cpu(void);
/* Whether a check that needs op runs on the backend of the running test, given whether
 * it supports op: the cpu backend must (the test fails if not); another one that does not
 * is told about ("<suite>: <backend> does not support <op> yet: ...") and skipped. */
int clf_test_have(const char *suite, clf_op op, int supported);
/* On the cpu backend of the running test: run(b) again on a backend of its own with 1 and
 * then 3 threads; fails unless each run gives the bits of a in b's first n floats. */
void clf_test_cpu_threads_same_bits(size_t (*run)(float *out), const float *a, float *b, size_t n);

/* Runs the clformer CLI with args (a shell command tail), capturing stderr into err
 * (size errsize) and returning the exit code. */
int clf_test_run_cli(const char *args, char *err, size_t errsize);
/* The same, killed after seconds (0: no limit): a CLI that hangs gives 137 (timeout(1)'s
 * status for a command it killed) instead of hanging the test. */
int clf_test_run_cli_within(unsigned seconds, const char *args, char *err, size_t errsize);
/* Reads the file at path into buf (at most size - 1 bytes, NUL-terminated; empty when it
 * cannot be read), then removes the file: a child's stderr, kept in a temporary file. */
void clf_test_take_file(const char *path, char *buf, size_t size);

/* The whole file, NUL-terminated (malloc'd; free() it); *len (may be NULL) without the
 * NUL. Fails the test when it cannot be read. */
char *clf_test_read_file(const char *path, size_t *len);

/* Every backend entry that takes an argument struct, given NULL, returns CLF_ERR_INPUT with
 * "<backend>: <entry>: no arguments" (backend: the message prefix, "cpu" or "opencl"). */
void clf_test_refuses_null_args(const clf_backend_api *api, clf_backend *be, const char *backend);

/* gemm and gemm_strided_batched refuse C overlapping A, B, b_half or bias ("<backend>:
 * gemm: 'c' may not overlap 'b'") and accept spans of one buffer that only touch, and C
 * over A and B when k = 0 (nothing is read). */
void clf_test_refuses_gemm_overlap(const clf_backend_api *api, clf_backend *be,
                                   const char *backend);

/* The temporary directory of the running test (one process per test): clf_test_make_tmpdir
 * creates a fresh /tmp/<prefix>-XXXXXX, failing the test when it cannot; clf_test_tmpdir
 * names it; clf_test_tmp_path(name) is <it>/<name>, in a buffer of its own per call (the
 * last 8 stay valid); clf_test_remove_tmpdir removes it with the files in it. */
void clf_test_make_tmpdir(const char *prefix);
const char *clf_test_tmpdir(void);
const char *clf_test_tmp_path(const char *name);
void clf_test_remove_tmpdir(void);
/* How many entries (other than . and ..) the temporary directory holds. */
int clf_test_tmpdir_entries(void);
/* Runs write(arg) with the file size limit (RLIMIT_FSIZE) at 1 KiB and SIGXFSZ ignored, so
 * that a longer write fails halfway (EFBIG), then restores both and returns write's status.
 * No Check assertion may run inside write: Check's own message file is subject to the
 * limit too. */
clf_status clf_test_write_under_size_limit(clf_status (*write)(void *arg), void *arg);

/* Removes dir and everything under it (links removed, not followed); a missing dir is no
 * error. */
void clf_test_remove_dir(const char *dir);

/* `clformer <import_args> -o DIR` into a fresh directory (DIR: a "model" folder of a new
 * mkdtemp folder named after tag), failing the test when the CLI does; the path goes to dir. */
void clf_test_import(const char *tag, const char *import_args, char *dir, size_t size);
/* Removes what clf_test_import made: dir and the folder above it. */
void clf_test_remove_import(const char *dir);

/* Writes n bytes of data to path (created or truncated), failing the test on any error. */
void clf_test_write_file(const char *path, const void *data, size_t n);
/* The same with the bytes of a NUL-terminated text. */
void clf_test_write_text(const char *path, const char *text);
/* Writes n tab-separated "reversal" pairs (1-5 of ten words, then the same reversed) to
 * path, from seed: the copy-reverse corpus the end-to-end training suites train on. Each
 * word is frequent enough to be in a vocabulary built from it (4 specials + 10 words). */
void clf_test_write_reversal_corpus(const char *path, int n, unsigned seed);
/* A sparse file of size bytes starting with text (the rest reads as zeros, occupying no
 * disk): a file "larger than the limit" for a reader that checks the size before reading. */
void clf_test_write_sparse(const char *path, const char *text, uint64_t size);

/* Fails unless tok decodes the n ids (skip_specials as clf_tokenizer_decode's) to want. */
void clf_test_assert_decodes(const clf_tokenizer *tok, const int32_t *ids, int n, int skip_specials,
                             const char *want);

/* Loads the config dir/model.yaml into cfg and the weights dir/weights.safetensors for its
 * model into w, failing the test on error. */
void clf_test_load_model(const char *dir, clf_config *cfg, clf_weights **w);

/* The batch of a fixture variant's io.safetensors (dir: tests/fixtures/<variant>) and its
 * model on the running test's backend (clf_test_api, clf_test_be): src [B, S] and tgt
 * [B, T] ids, V the target vocabulary. */
typedef struct clf_test_io_model {
    clf_config cfg;
    clf_weights *w;
    clf_model *m;
    int32_t *src, *tgt;
    int B, S, T, V;
} clf_test_io_model;
void clf_test_io_model_open(const char *dir, clf_test_io_model *f);
void clf_test_io_model_close(clf_test_io_model *f);

/* A model on a backend: its config and weights, the backend, the model made from them and,
 * in a training suite, the model's trainer. clf_test_model_open opens tests/fixtures/<name>'s
 * config and weights on backend (clf_test_open_backend) and makes the model (no trainer). */
typedef struct clf_test_model {
    clf_config cfg;
    clf_weights *w;
    const clf_backend_api *api;
    clf_backend *be;
    clf_model *m;
    clf_trainer *t; /* clf_test_trainer_start's, or NULL */
} clf_test_model;
void clf_test_model_open(clf_test_model *t, const char *backend, const char *name);
void clf_test_model_close(clf_test_model *t);
/* The model of tr's cfg and w on its open backend, and the model's trainer (dropout as
 * clf_trainer_create's), failing the test on error. */
void clf_test_trainer_start(clf_test_model *tr, int dropout);
/* Frees the trainer and the model of clf_test_trainer_start (the backend and w stay). */
void clf_test_trainer_stop(clf_test_model *tr);

/* A small model of the loop tests of test_model_lookup and test_model_release: its layers
 * per stack, tie_embeddings and attention_bias. */
typedef struct clf_test_variant {
    int layers;
    const char *tie;
    int bias;
} clf_test_variant;

/* The PyTorch fixture variants (tests/reference/make_fixtures.py): the names of the
 * directories of CLF_FIXTURES_DIR that hold an io.safetensors, at most max of them, into
 * names; returns how many (0 when the directory cannot be read). */
int clf_test_fixture_variants(char names[][256], int max);

/* Whether CLF_TEST_REQUIRE_OPENCL=1 (CI and scripts/test.sh set it): then no OpenCL check
 * may be skipped, for want of a driver, a device or the backend in the build. */
int clf_test_opencl_required(void);
/* The OpenCL part of suite cannot run, for reason why: prints "<suite>: the OpenCL part is
 * skipped: <why>" and returns 0, or, with CLF_TEST_REQUIRE_OPENCL=1, prints "<suite>:
 * FAILED: CLF_TEST_REQUIRE_OPENCL=1 but the OpenCL part cannot run: <why>" and returns 1:
 * the caller must then fail (its test, or its suite's exit status). */
int clf_test_opencl_unavailable(const char *suite, const char *why);

/* Whether the OpenCL backend opens with a device (CLF_TEST_DEVICE chooses one), tried in
 * a child process so that the caller, which forks the tests, never starts the OpenCL
 * runtime. When it does not, clf_test_opencl_unavailable says why, and with
 * CLF_TEST_REQUIRE_OPENCL=1 the process exits with EXIT_FAILURE (called from a suite's
 * main: the suite fails; from a test: that test fails). */
int clf_test_opencl_opens(const char *suite);

/* Whether CLF_TEST_SMALL is set (and not "0"): the OpenCL parts of the suites then run
 * small shapes and a subset of the fixtures, for a simulated device (scripts/oclgrind.sh)
 * that interprets every work-item. */
int clf_test_small(void);

/* Whether the suites were built with the sanitizers (CLF_SANITIZE=ON, about 5x slower):
 * the longest trainings then run fewer steps of the same code, with bounds for them. */
int clf_test_sanitized(void);

/* Under CLF_TEST_SMALL, whether a case whose work (elements, or multiply-adds of a product)
 * is above CLF_TEST_SMALL_WORK: the suites skip such cases there (the simulator runs a few
 * million work-item instructions a second). Always 0 otherwise. */
#define CLF_TEST_SMALL_WORK 20000.0
int clf_test_too_big(double work);

/* Runs one Check suite and returns the process exit status (0 when all pass). */
int clf_test_main(Suite *s);
/* Runs the suite named suite of one test case named tcase holding the n tests listed (the
 * runner of CLF_TEST_MAIN for a suite of plain tests). */
int clf_test_run(const char *suite, const char *tcase, const TTest *const *tests, int n);
/* A suite named suite of the one test case tc, which gets the n tests listed. */
Suite *clf_test_suite_of(const char *suite, TCase *tc, const TTest *const *tests, int n);
/* Defines main() of a suite of one test case holding the tests listed (START_TEST names):
 * it returns runner(suite, tcase, tests, n), e.g. ocl_test_run. */
#define CLF_TEST_MAIN(runner, suite, tcase, ...)                                                   \
    int main(void)                                                                                 \
    {                                                                                              \
        const TTest *const tests_[] = {__VA_ARGS__};                                               \
        return runner(suite, tcase, tests_, (int)(sizeof tests_ / sizeof tests_[0]));              \
    }

/* A test of a suite table: a START_TEST name, run as a loop test (i from 0 to loop - 1) when
 * loop > 0. */
typedef struct clf_test_item {
    const TTest *test;
    int loop;
} clf_test_item;
/* Adds the n items to tc: a loop test for an item with a loop count, else a plain test. */
void clf_test_add_items(TCase *tc, const clf_test_item *items, int n);
/* A test case of a suite table: its name, Check's timeout for it in seconds (0: the default),
 * its checked fixture (setup and teardown around each test; NULL: none) and its tests in
 * order. */
typedef struct clf_test_tcase {
    const char *name;
    int timeout;
    SFun setup, teardown;
    const clf_test_item *items;
    int n;
} clf_test_tcase;
/* The clf_test_tcase name, timeout, setup, teardown of the items listed ({test} or
 * {test, loop}); CLF_TCASE without a fixture. */
#define CLF_TCASE_FIXTURE(name, timeout, setup, teardown, ...)                                     \
    {                                                                                              \
        (name), (timeout), (setup), (teardown), (const clf_test_item[]){__VA_ARGS__},              \
            (int)(sizeof((const clf_test_item[]){__VA_ARGS__}) / sizeof(clf_test_item))            \
    }
#define CLF_TCASE(name, timeout, ...) CLF_TCASE_FIXTURE(name, timeout, NULL, NULL, __VA_ARGS__)
/* The loop count of a table of cases. */
#define CLF_LOOPS(cases) ((int)(sizeof(cases) / sizeof((cases)[0])))
/* Runs the suite named suite of the first n test cases of cases, stdout line-buffered (lines
 * printed by a test that then fails still show). */
int clf_test_tcases_run(const char *suite, const clf_test_tcase *cases, int n);
/* Declares the table var of the test cases listed (CLF_TCASE): a plain test's item is {test},
 * its loop left 0 (so -Wmissing-field-initializers is off for the table). CLF_TEST_SUITE_MAIN
 * defines main() running such a table as the suite named suite. */
/* clang-format off */
#define CLF_TCASES(var, ...)                                                                       \
    _Pragma("GCC diagnostic push")                                                                 \
    _Pragma("GCC diagnostic ignored \"-Wmissing-field-initializers\"")                             \
    const clf_test_tcase var[] = {__VA_ARGS__};                                                    \
    _Pragma("GCC diagnostic pop")
#define CLF_TEST_SUITE_MAIN(suite, ...)                                                            \
    int main(void)                                                                                 \
    {                                                                                              \
        CLF_TCASES(cases_, __VA_ARGS__)                                                            \
        return clf_test_tcases_run(suite, cases_, (int)(sizeof cases_ / sizeof cases_[0]));        \
    }
/* clang-format on */

/* main() of a suite whose tests run on each backend: add_tests on a CPU and (when it opens;
 * see clf_test_opencl_opens) an OpenCL test case, plus cpu_only / opencl_only (may be NULL)
 * on the one backend. */
int clf_test_backends_main(const char *name, void (*add_tests)(TCase *tc),
                           void (*cpu_only)(TCase *tc), void (*opencl_only)(TCase *tc));
/* clf_test_backends_main of the n tests listed on each backend, none on one only; the runner
 * of CLF_TEST_BACKENDS_MAIN(suite, tests...), main() of such a suite. */
int clf_test_backends_run(const char *name, const TTest *const *tests, int n);
#define CLF_TEST_BACKENDS_MAIN(suite, ...)                                                         \
    int main(void)                                                                                 \
    {                                                                                              \
        const TTest *const tests_[] = {__VA_ARGS__};                                               \
        return clf_test_backends_run(suite, tests_, (int)(sizeof tests_ / sizeof tests_[0]));      \
    }

/* A beam_choose case on the host (clf_beam_args): n sentences of K beams, each beam's top_k
 * continuations (val, idx) with ties, -inf and (nan set) NaN among the values; dead beams
 * (base -inf), a sentence whose beams are all dead, a sentence that picks EOS (3) often;
 * tokens below 24, banned 5 and 7 (n_banned of them); row tables [n*K, ld] of distinct
 * values. a holds the shape and the scalars; clf_test_beam_run sets its operands. */
typedef struct clf_test_beam {
    clf_beam_args a;
    float *val, *base;
    int32_t *idx, *banned, *rows_in;
} clf_test_beam;
void clf_test_beam_make(clf_test_beam *t, int n, int K, int top_k, int n_banned, int ld, int pos,
                        unsigned seed, int nan);
void clf_test_beam_free(clf_test_beam *t);
/* clf_op_beam_choose of t on api/be: choices [n, 2K, 3], ids and base (as it leaves it) [n*K],
 * rows_out [n*K, ld]. */
void clf_test_beam_run(const clf_backend_api *api, clf_backend *be, const clf_test_beam *t,
                       int32_t *choices, int32_t *ids, float *base, int32_t *rows_out);

#endif
