/* Helpers shared by the OpenCL suites (tests/test_opencl_*.c): the two backends each
 * test opens, upload / download, comparisons that name both sides, the runners of ops that
 * more than one suite calls, and main(): probe for a device, then run the suite. */
#include "opencl_testutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Opened afresh in each test's process by setup(). */
bk ocl = {"opencl", NULL, NULL}, cpu = {"cpu", NULL, NULL};

static void setup(void)
{
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE")};
    clf_backend_opts c = {.abi_version = CLF_BACKEND_ABI};
    CLF_ASSERT_OK(clf_backend_load("opencl", CLF_BUILD_BACKEND_DIR, &ocl.api));
    CLF_ASSERT_OK(ocl.api->open(&o, &ocl.be));
    CLF_ASSERT_OK(clf_backend_load("cpu", CLF_BUILD_BACKEND_DIR, &cpu.api));
    CLF_ASSERT_OK(cpu.api->open(&c, &cpu.be));
}

static void teardown(void)
{
    if (ocl.be)
        ocl.api->close(ocl.be);
    if (cpu.be)
        cpu.api->close(cpu.be);
    ocl.be = cpu.be = NULL;
}

float *fdup(const float *x, size_t n)
{
    float *y = malloc(n * sizeof *y);
    ck_assert_ptr_nonnull(y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

clf_buffer *up(bk *k, const void *host, size_t bytes)
{
    return clf_test_upload(k->api, k->be, host, bytes);
}

void down(bk *k, void *host, clf_buffer *b, size_t bytes)
{
    CLF_ASSERT_OK(k->api->download(k->be, host, (clf_ptr){b, 0}, bytes));
}

void expect_close(const float *got, const float *want, size_t n, double tol, const char *what,
                  const char *vs)
{
    double e = clf_test_rel_err(got, want, n);
    ck_assert_msg(e <= tol, "%s: opencl vs %s: relative error %.3g > %.3g", what, vs, e, tol);
}

void expect_close_both(const float *got, const float *want, const float *cpu, size_t n, double tol,
                       const char *what)
{
    expect_close(got, want, n, tol, what, "host reference");
    expect_close(got, cpu, n, tol, what, "cpu backend");
}

const int sizes[NSIZES] = {1, 7, 33, 65, 129};

/* sum_mode: 0 no sum_out, 1 a separate sum_out, 2 sum_out aliasing x (pre-norm stream). */
void run_layernorm(bk *k, const clf_layernorm_args *tmpl, const float *x, const float *res,
                   const float *alpha, const float *beta, int sum_mode, float *out, float *sum)
{
    size_t n = (size_t)tmpl->rows * tmpl->cols, c = (size_t)tmpl->cols;
    clf_buffer *bx = up(k, x, n * 4), *bo = up(k, NULL, n * 4), *ba = up(k, alpha, c * 4),
               *bb = up(k, beta, c * 4);
    clf_buffer *br = res ? up(k, res, n * 4) : NULL,
               *bs = sum_mode == 1 ? up(k, NULL, n * 4) : NULL;
    clf_layernorm_args a = *tmpl;
    a.out = (clf_ptr){bo, 0};
    a.x = (clf_ptr){bx, 0};
    a.residual = (clf_ptr){br, 0};
    a.alpha = (clf_ptr){ba, 0};
    a.beta = (clf_ptr){bb, 0};
    a.sum_out = (clf_ptr){sum_mode == 2 ? bx : bs, 0};
    CLF_ASSERT_OK(k->api->layernorm(k->be, &a));
    down(k, out, bo, n * 4);
    if (sum_mode)
        down(k, sum, sum_mode == 2 ? bx : bs, n * 4);
    clf_buffer *all[] = {bx, bo, ba, bb, br, bs};
    for (int i = 0; i < 6; i++)
        if (all[i])
            k->api->free(k->be, all[i]);
}

void run_embed(bk *k, const clf_embed_args *tmpl, const int32_t *ids, const float *table,
               const float *pe, size_t npe, float *out)
{
    size_t n = (size_t)tmpl->rows * tmpl->dim;
    clf_buffer *bo = up(k, NULL, n * 4), *bi = up(k, ids, (size_t)tmpl->rows * 4),
               *bt = up(k, table, (size_t)tmpl->vocab * tmpl->dim * 4);
    clf_buffer *bp = pe ? up(k, pe, npe * 4) : NULL;
    clf_embed_args a = *tmpl;
    a.out = (clf_ptr){bo, 0};
    a.ids = (clf_ptr){bi, 0};
    a.table = (clf_ptr){bt, 0};
    a.pe = (clf_ptr){bp, 0};
    CLF_ASSERT_OK(k->api->embed(k->be, &a));
    down(k, out, bo, n * 4);
    k->api->free(k->be, bo);
    k->api->free(k->be, bi);
    k->api->free(k->be, bt);
    if (bp)
        k->api->free(k->be, bp);
}

void run_softmax(bk *k, const float *x, int rows, int cols, int log, int alias, float *out)
{
    size_t n = (size_t)rows * cols;
    clf_buffer *bx = up(k, x, n * 4), *bo = alias ? bx : up(k, NULL, n * 4);
    CLF_ASSERT_OK(k->api->softmax(k->be, (clf_ptr){bo, 0}, (clf_ptr){bx, 0}, rows, cols, log));
    down(k, out, bo, n * 4);
    k->api->free(k->be, bx);
    if (!alias)
        k->api->free(k->be, bo);
}

void expect_both(const float *got, const float *host, const float *cpu_got, size_t n, double tol,
                 const char *what, worst *w)
{
    double eh = clf_test_rel_err(got, host, n), ec = clf_test_rel_err(got, cpu_got, n);
    ck_assert_msg(eh <= tol, "%s: opencl vs host reference: relative error %.3g > %.3g", what, eh,
                  tol);
    ck_assert_msg(ec <= tol, "%s: opencl vs cpu backend: relative error %.3g > %.3g", what, ec,
                  tol);
    if (eh > w->host)
        w->host = eh;
    if (ec > w->cpu)
        w->cpu = ec;
}

void report(const char *test, const worst *w, double tol)
{
    printf("%s: worst relative error %.2g vs the host reference, %.2g vs the cpu backend "
           "(tolerance %.0e)\n",
           test, w->host, w->cpu, tol);
}

/* The same bits, element by element (NaN and -0 included). One memcmp first: a Check
 * assertion per element costs a message to the parent process each. */
void expect_same_bits(const float *got, const float *want, size_t n, const char *what,
                      const char *vs)
{
    if (n == 0 || memcmp(got, want, n * sizeof *got) == 0)
        return;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof got[i]) != 0)
            ck_abort_msg("%s: opencl vs %s: element %zu is %a, want %a", what, vs, i,
                         (double)got[i], (double)want[i]);
}

void free_all(bk *k, clf_buffer **b, int n)
{
    for (int i = 0; i < n; i++)
        if (b[i])
            k->api->free(k->be, b[i]);
}

/* As run_relu_backward: out holds the initial contents unless it aliases x. */
void run_dropout(bk *k, const float *x, size_t n, size_t off, float p, uint64_t seed, int alias,
                 float *out)
{
    size_t bytes = (n + off) * 4;
    clf_buffer *bx = up(k, x, bytes), *bo = alias ? bx : up(k, out, bytes); /* out: initial */
    clf_dropout_args a = {.out = {bo, off * 4}, .x = {bx, off * 4}, .n = n, .p = p, .seed = seed};
    CLF_ASSERT_OK(k->api->dropout(k->be, &a));
    down(k, out, bo, bytes);
    k->api->free(k->be, bx);
    if (!alias)
        k->api->free(k->be, bo);
}

/* sum x[off .. off + n)^2 into out[1] of a two-float buffer (out[0] must stay). */
float run_sum_squares(bk *k, const float *x, size_t n, size_t off)
{
    float out[2] = {-7.0f, -7.0f};
    clf_buffer *bx = up(k, x, (n + off) * 4), *bo = up(k, out, sizeof out);
    CLF_ASSERT_OK(k->api->sum_squares(k->be, (clf_ptr){bo, 4}, (clf_ptr){bx, off * 4}, n));
    down(k, out, bo, sizeof out);
    ck_assert_float_eq(out[0], -7.0f);
    k->api->free(k->be, bx);
    k->api->free(k->be, bo);
    return out[1];
}

/* params: 0 neither dalpha nor dbeta, 1 both, 2 dalpha only. dx0, da0, db0: the initial
 * contents (dx is accumulated into when a->accumulate; the parameters always are). */
void run_layernorm_backward(bk *k, const clf_layernorm_backward_args *tmpl, const float *x,
                            const float *dy, const float *alpha, const float *dx0, const float *da0,
                            const float *db0, int params, float *dx, float *da, float *db)
{
    size_t n = (size_t)tmpl->rows * tmpl->cols, c = (size_t)tmpl->cols;
    clf_buffer *bx = up(k, x, n * 4), *bdy = up(k, dy, n * 4), *ba = up(k, alpha, c * 4),
               *bdx = up(k, dx0, n * 4);
    clf_buffer *bda = params ? up(k, da0, c * 4) : NULL,
               *bdb = params == 1 ? up(k, db0, c * 4) : NULL;
    clf_layernorm_backward_args a = *tmpl;
    a.dx = (clf_ptr){bdx, 0};
    a.dy = (clf_ptr){bdy, 0};
    a.x = (clf_ptr){bx, 0};
    a.alpha = (clf_ptr){ba, 0};
    a.dalpha = (clf_ptr){bda, 0};
    a.dbeta = (clf_ptr){bdb, 0};
    CLF_ASSERT_OK(k->api->layernorm_backward(k->be, &a));
    down(k, dx, bdx, n * 4);
    if (bda)
        down(k, da, bda, c * 4);
    if (bdb)
        down(k, db, bdb, c * 4);
    clf_buffer *all[] = {bx, bdy, ba, bdx, bda, bdb};
    free_all(k, all, 6);
}

void count_device(void *user, const clf_device_info *d)
{
    dev_list *l = user;
    if (l->n++ == 0)
        l->first = *d;
}

/* Whether a device is there, probed in a child process so that this one (which forks the
 * tests) never initialises the OpenCL runtime. 0: yes; SKIP_EXIT: no device (why is
 * printed); anything else: the backend itself is broken, or there is no device and
 * CLF_TEST_REQUIRE_OPENCL=1. */
static int probe_device(const char *suite)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        const clf_backend_api *api = NULL;
        dev_list l = {0};
        if (clf_backend_load("opencl", CLF_BUILD_BACKEND_DIR, &api) != CLF_OK) {
            printf("%s: cannot load the OpenCL backend: %s\n", suite, clf_last_error());
            fflush(stdout);
            _exit(1);
        }
        clf_status st = api->list_devices(count_device, &l);
        if (st == CLF_ERR_BACKEND)
            _exit(clf_test_opencl_unavailable(suite, clf_last_error()) ? 1 : SKIP_EXIT);
        if (st != CLF_OK) {
            printf("%s: list_devices failed: %s\n", suite, clf_last_error());
            fflush(stdout);
            _exit(1);
        }
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return 1;
    return WEXITSTATUS(status);
}

TCase *ocl_test_tcase(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    return tc;
}

/* main()'s check before any test: 0 to run the suite, else the exit code (see ocl_test_main). */
static int check_opencl(const char *suite)
{
#ifndef CLF_HAVE_OPENCL
    (void)probe_device; /* used only when the backend is built */
    return clf_test_opencl_unavailable(suite, "the OpenCL backend was not built (OpenCL or "
                                              "CLBlast missing when cmake ran)")
               ? EXIT_FAILURE
               : SKIP_EXIT;
#else
    return probe_device(suite);
#endif
}

int ocl_test_main(const char *suite, Suite *(*make)(void))
{
    int rc = check_opencl(suite);
    return rc != 0 ? rc : clf_test_main(make());
}

int ocl_test_run(const char *suite, const char *tcase, const TTest *const *tests, int n)
{
    int rc = check_opencl(suite);
    return rc != 0 ? rc : clf_test_main(clf_test_suite_of(suite, ocl_test_tcase(tcase), tests, n));
}
