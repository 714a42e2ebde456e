/* The OpenCL backend's lifecycle and the aliasing it refuses, checked the same way on
 * every OpenCL implementation (PoCL, Oclgrind under scripts/oclgrind.sh, a GPU driver):
 *
 * - close then open again in one process, GEMM on both instances, and a clean exit: close()
 *   must clear CLBlast's process-wide program cache before the context goes (issue 21: on
 *   Oclgrind the cache's programs otherwise outlive their context and the process aborts in
 *   exit()); the products are compared with the host's, exactly (small integers). Whether
 *   a driver crashes on the late release depends on its heap, so the suite watches the order
 *   itself: it defines clCreateContext, clReleaseContext and clReleaseProgram (exported, so
 *   the backend and CLBlast call these, which pass on to the ICD loader's) and the process
 *   fails at exit if a program was released after clformer released its context;
 * - gemm and gemm_strided_batched refuse C overlapping A, B, b_half or bias (the core's
 *   check, tests/testutil.c; the CPU backend's twin is in test_ops).
 *
 * Without an OpenCL device (or the backend) the suite says why and exits 77 (skipped). */
/* RTLD_NEXT: _GNU_SOURCE comes from the build (CMakeLists.txt) */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SKIP_EXIT 77 /* ctest's SKIP_RETURN_CODE for this suite */

#ifdef CLF_HAVE_OPENCL
#include <CL/cl.h>
#include <dlfcn.h>

/* ---- release order, watched (see the top of the file) ----
 * The contexts the backend released so far; a context created later at the same address
 * leaves the list. A program released while its context is listed was released too late:
 * CLBlast's cache kept it, and with it the context (programs hold a reference to their
 * context), alive after close: a leak per open and close in a long-lived process, and on
 * an implementation that frees the context anyway (Oclgrind did), a use after free. */
enum { WATCHED = 64, LATE_EXIT = 3 };
static cl_context released_contexts[WATCHED];
static int n_released, late_releases;

/* The real entry point: the next definition after this executable's (the ICD loader's, or
 * Oclgrind's preloaded runtime), else the loader the backend brought in. */
static void *next_cl_symbol(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        void *loader = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_NOLOAD);
        f = loader ? dlsym(loader, name) : NULL;
    }
    if (!f) {
        fprintf(stderr, "test_opencl_lifecycle: no %s to pass the call on to\n", name);
        _exit(2);
    }
    return f;
}

CL_API_ENTRY cl_context CL_API_CALL clCreateContext(
    const cl_context_properties *props, cl_uint n, const cl_device_id *devices,
    void(CL_CALLBACK *notify)(const char *, const void *, size_t, void *), void *user, cl_int *err)
{
    cl_context (*next)(const cl_context_properties *, cl_uint, const cl_device_id *,
                       void(CL_CALLBACK *)(const char *, const void *, size_t, void *), void *,
                       cl_int *);
    *(void **)&next = next_cl_symbol("clCreateContext");
    cl_context c = next(props, n, devices, notify, user, err);
    for (int i = 0; i < n_released; i++)
        if (released_contexts[i] == c)
            released_contexts[i] = released_contexts[--n_released];
    return c;
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseContext(cl_context c)
{
    cl_int (*next)(cl_context);
    *(void **)&next = next_cl_symbol("clReleaseContext");
    /* clformer's own release only: an implementation may pass its internal reference
     * counting through the public entry points too (Oclgrind does). */
    Dl_info caller;
    if (dladdr(__builtin_return_address(0), &caller) && caller.dli_fname &&
        strstr(caller.dli_fname, "clformer-opencl") && n_released < WATCHED)
        released_contexts[n_released++] = c;
    return next(c);
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseProgram(cl_program p)
{
    cl_int (*next)(cl_program);
    cl_int (*info)(cl_program, cl_program_info, size_t, void *, size_t *);
    *(void **)&next = next_cl_symbol("clReleaseProgram");
    *(void **)&info = next_cl_symbol("clGetProgramInfo");
    cl_context c = NULL;
    if (info(p, CL_PROGRAM_CONTEXT, sizeof c, &c, NULL) == CL_SUCCESS)
        for (int i = 0; i < n_released; i++)
            late_releases += released_contexts[i] == c;
    return next(p);
}

/* After every exit handler (CLBlast's static cache is released by one), in every process
 * of the suite that used the backend. */
__attribute__((destructor)) static void fail_on_late_release(void)
{
    if (late_releases > 0) {
        fprintf(stderr,
                "test_opencl_lifecycle: %d OpenCL program(s) released after clformer "
                "released their context (CLBlast's cache not cleared at close)\n",
                late_releases);
        fflush(stderr);
        _exit(LATE_EXIT);
    }
}
#endif

/* on the backend of clf_test_backend_tcase("opencl") */
START_TEST(gemm_refuses_c_over_its_inputs)
{
    clf_test_refuses_gemm_overlap(clf_test_api, clf_test_be, "opencl");
}
END_TEST

/* C[m, n] = A[m, k] B[k, n] on a fresh instance, for m = 1 and m = 5, against the host's
 * product; then close. Small integers: every sum is
 * exact in float. Returns 0, or 1 with the reason on stderr (it runs in a child process,
 * where Check's assertions cannot report). */
static int gemm_on_fresh_instance(int round)
{
    enum { M = 5, N = 9, K = 7 };
    float A[M * K], B[K * N], C[M * N], want[M * N];
    for (int i = 0; i < M * K; i++)
        A[i] = (float)((i * 7 + round) % 5) - 2.0f;
    for (int i = 0; i < K * N; i++)
        B[i] = (float)((i * 3 + round) % 7) - 3.0f;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int p = 0; p < K; p++)
                s += A[i * K + p] * B[p * N + j];
            want[i * N + j] = s;
        }
    const clf_backend_api *a = NULL;
    clf_backend *b = NULL;
    clf_buffer *dA = NULL, *dB = NULL, *dC = NULL;
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE")};
    int bad = 0;
    if (clf_backend_load("opencl", CLF_BUILD_BACKEND_DIR, &a) != CLF_OK ||
        a->open(&o, &b) != CLF_OK || a->alloc(b, sizeof A, &dA) != CLF_OK ||
        a->alloc(b, sizeof B, &dB) != CLF_OK || a->alloc(b, sizeof C, &dC) != CLF_OK ||
        a->upload(b, (clf_ptr){dA, 0}, A, sizeof A) != CLF_OK ||
        a->upload(b, (clf_ptr){dB, 0}, B, sizeof B) != CLF_OK) {
        fprintf(stderr, "round %d: %s\n", round, clf_last_error());
        bad = 1;
    }
    /* m = 1: CLBlastSgemv; m = M: CLBlastSgemm, then CLBlastSgemmStridedBatched */
    for (int run = 0; !bad && run < 3; run++) {
        const int m = run == 0 ? 1 : M;
        clf_gemm_args g = {.m = m,
                           .n = N,
                           .k = K,
                           .alpha = 1,
                           .lda = K,
                           .ldb = N,
                           .ldc = N,
                           .a = {dA, 0},
                           .b = {dB, 0},
                           .c = {dC, 0},
                           .batch = 1,
                           .stride_a = M * K,
                           .stride_b = K * N,
                           .stride_c = M * N};
        clf_status st = run < 2 ? a->gemm(b, &g) : a->gemm_strided_batched(b, &g);
        if (st != CLF_OK || a->download(b, C, (clf_ptr){dC, 0}, sizeof C) != CLF_OK) {
            fprintf(stderr, "round %d, run %d: %s\n", round, run, clf_last_error());
            bad = 1;
        } else if (memcmp(C, want, sizeof(float) * m * N) != 0) {
            fprintf(stderr, "round %d, run %d: the product differs from the host's\n", round, run);
            bad = 1;
        }
    }
    if (b) {
        a->free(b, dA);
        a->free(b, dB);
        a->free(b, dC);
        a->close(b);
    }
    return bad;
}

/* Three instances one after the other in a child process, which then exits through exit()
 * (static destructors, CLBlast's cache among them): it must exit 0, not die of a signal. */
START_TEST(close_then_reopen_and_exit_cleanly)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        exit(gemm_on_fresh_instance(0) || gemm_on_fresh_instance(1) || gemm_on_fresh_instance(2)
                 ? 1
                 : 0);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(!WIFSIGNALED(status), "the process died of signal %d after closing the backend",
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the close-then-reopen process failed (its stderr says why)");
}
END_TEST

static Suite *lifecycle_suite(void)
{
    Suite *s = suite_create("opencl_lifecycle");
    TCase *tc = tcase_create("lifecycle");
    tcase_add_test(tc, close_then_reopen_and_exit_cleanly);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    TCase *al = clf_test_backend_tcase("opencl", 300);
    tcase_add_test(al, gemm_refuses_c_over_its_inputs);
    suite_add_tcase(s, al);
    return s;
}

int main(void)
{
    if (!clf_test_opencl_opens("opencl_lifecycle"))
        return SKIP_EXIT;
    return clf_test_main(lifecycle_suite());
}
