/* The OpenCL backend's device limits and work-group sizes: every limit comes from the
 * device (compared with what list_devices reports), and each one, capped by the test-only
 * CLF_OPENCL_LIMITS to what a small device (Oclgrind: 128 MiB allocations, no fp16) or an
 * old one has, gives the right error or the right smaller choice: max_alloc (alloc and a
 * model's weights name the limit and the tensor), local_mem (work-groups shrink to fit,
 * attention names what does not fit), max_wg, fp16 (the F16 weights path needs none),
 * c_version (refused below OpenCL C 1.2), compute_units. Then CLF_OPENCL_LOCAL_SIZE=min|max.
 * White-box: the backend's struct comes from ocl_internal.h, as the backend's own code.
 * Without an OpenCL device the suite says why and exits 77 (ctest: skipped; a failure with
 * CLF_TEST_REQUIRE_OPENCL=1). */
#include "opencl_testutil.h"

#include "clformer/config.h"
#include "clformer/model.h"
#include "clformer/tensor.h"
#include "clformer/weights.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CLF_HAVE_OPENCL
#include "ocl_internal.h"

/* Opens another instance of the OpenCL backend with CLF_OPENCL_LIMITS = limits and
 * CLF_OPENCL_LOCAL_SIZE = local_size (NULL: unset); returns open()'s status. */
static clf_status open_with(const char *limits, const char *local_size, clf_backend **be)
{
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE")};
    if (limits)
        setenv("CLF_OPENCL_LIMITS", limits, 1);
    else
        unsetenv("CLF_OPENCL_LIMITS");
    if (local_size)
        setenv("CLF_OPENCL_LOCAL_SIZE", local_size, 1);
    else
        unsetenv("CLF_OPENCL_LOCAL_SIZE");
    *be = NULL;
    clf_status st = ocl.api->open(&o, be);
    unsetenv("CLF_OPENCL_LIMITS");
    unsetenv("CLF_OPENCL_LOCAL_SIZE");
    return st;
}

static clf_backend *open_ok(const char *limits, const char *local_size)
{
    clf_backend *be = NULL;
    CLF_ASSERT_OK(open_with(limits, local_size, &be));
    return be;
}

static int is_pow2(size_t x)
{
    return x && (x & (x - 1)) == 0;
}

/* Over every device list_devices reports: the largest max_alloc_bytes, whether any has fp16. */
typedef struct caps_seen {
    uint64_t max_alloc;
    int fp16;
} caps_seen;

static void see_caps(void *user, const clf_device_info *d)
{
    caps_seen *c = user;
    if (d->max_alloc_bytes > c->max_alloc)
        c->max_alloc = d->max_alloc_bytes;
    c->fp16 |= d->fp16;
}

/* What list_devices reports with CLF_OPENCL_LIMITS = limits. */
static caps_seen listed_with(const char *limits)
{
    caps_seen c = {0, 0};
    setenv("CLF_OPENCL_LIMITS", limits, 1);
    CLF_ASSERT_OK(ocl.api->list_devices(see_caps, &c));
    unsetenv("CLF_OPENCL_LIMITS");
    return c;
}

/* The limits are the device's (list_devices queries them too), the work-groups within. */
START_TEST(test_limits_are_queried)
{
    const ocl_limits *l = &ocl.be->limits;
    ck_assert_uint_gt(l->max_alloc, 0);
    ck_assert_uint_eq(ocl.api->max_alloc(ocl.be), l->max_alloc);
    ck_assert_uint_eq(ocl.be->dev.info.max_alloc_bytes, l->max_alloc);
    ck_assert_int_eq(ocl.be->dev.info.fp16, l->fp16);
    ck_assert_uint_gt(l->local_mem, 0);
    ck_assert_uint_ge(l->max_wg, 1);
    ck_assert_int_ge(l->c_version, OCL_MIN_C_VERSION);
    ck_assert_int_eq(ocl.be->dev.info.compute_units, (int)l->compute_units);
    for (int k = 0; k < OCL_K_COUNT; k++) {
        ck_assert_msg(is_pow2(ocl.be->wg[k]) && ocl.be->wg[k] <= l->max_wg && ocl.be->wg[k] <= 256,
                      "kernel %d: work-group %zu", k, ocl.be->wg[k]);
    }
    printf("test_limits_are_queried: %s: max_alloc %llu, local_mem %llu, max_wg %zu, fp16 %d, "
           "OpenCL C %d.%d, %u compute units\n",
           ocl.be->description, (unsigned long long)l->max_alloc, (unsigned long long)l->local_mem,
           l->max_wg, l->fp16, l->c_version / 10, l->c_version % 10, (unsigned)l->compute_units);
}
END_TEST

/* max_alloc: alloc refuses more, naming the limit; list_devices reports the cap; a model
 * whose tensor does not fit says which tensor and the limit. */
START_TEST(test_limit_max_alloc)
{
    clf_backend *be = open_ok("max_alloc=8000", NULL);
    ck_assert_uint_eq(ocl.api->max_alloc(be), 8000);
    clf_buffer *b = NULL;
    CLF_ASSERT_OK(ocl.api->alloc(be, 8000, &b));
    ocl.api->free(be, b);
    b = NULL;
    EXPECT_ERROR(ocl.api->alloc(be, 8001, &b), CLF_ERR_NOMEM, "opencl: alloc", "8001 bytes",
                 "CL_DEVICE_MAX_MEM_ALLOC_SIZE = 8000 bytes");
    ck_assert_ptr_null(b);

    /* post_standard: its packed Q/K/V [3 * 32, 32] floats are 12288 bytes */
    clf_config cfg;
    clf_weights *w = NULL;
    clf_model *m = NULL;
    clf_test_load_model(CLF_FIXTURES_DIR "/post_standard", &cfg, &w);
    EXPECT_ERROR(clf_model_create(&cfg.model, w, ocl.api, be, &m), CLF_ERR_NOMEM,
                 "weights: tensor '", "largest allocation (8000 bytes)");
    ck_assert_ptr_null(m);
    clf_weights_free(w);
    ocl.api->close(be);

    /* a cap above the device's changes nothing; list_devices shows a cap */
    be = open_ok("max_alloc=18446744073709551615", NULL);
    ck_assert_uint_eq(be->limits.max_alloc, ocl.be->limits.max_alloc);
    ocl.api->close(be);
    ck_assert_uint_eq(listed_with("max_alloc=1048576").max_alloc, 1048576);
}
END_TEST

/* attention q k v out [1, T, D] (one head) with head_dim D on backend be (instance of
 * ocl.api); returns its status, out in got. */
static clf_status run_attention_on(clf_backend *be, int T, int D, float *got)
{
    size_t n = (size_t)T * D;
    float *x = clf_test_frand(n, 7, -1, 1);
    bk k = {"opencl", ocl.api, be};
    clf_buffer *q = up(&k, x, n * 4), *o = up(&k, NULL, n * 4);
    clf_attention_args a = {.batch = 1,
                            .heads = 1,
                            .q_len = T,
                            .kv_len = T,
                            .head_dim = D,
                            .q = {q, 0},
                            .k = {q, 0},
                            .v = {q, 0},
                            .out = {o, 0},
                            .q_ld = D,
                            .k_ld = D,
                            .v_ld = D,
                            .out_ld = D,
                            .q_bstride = n,
                            .kv_bstride = n,
                            .out_bstride = n,
                            .scale = 1.0f / sqrtf((float)D)};
    clf_status st = ocl.api->attention(be, &a);
    if (st == CLF_OK)
        down(&k, got, o, n * 4);
    ocl.api->free(be, q);
    ocl.api->free(be, o);
    free(x);
    return st;
}

/* local_mem: the work-groups shrink so that their __local scratch takes at most half of
 * it; attention whose head_dim vectors do not fit in the rest is refused, naming both. */
START_TEST(test_limit_local_mem)
{
    clf_backend *be = open_ok("local_mem=2048", "max");
    ck_assert_uint_eq(be->limits.local_mem, 2048);
    /* attention: two floats per work-item; the gemm_rows kernels: one per row of A (7) */
    ck_assert_uint_le(be->wg[OCL_K_ATTENTION] * 8, 1024);
    ck_assert_uint_le(be->wg[OCL_K_GEMM_ROWS_HALF] * 4 * OCL_GEMM_FEW_ROWS, 1024);
    ck_assert_uint_le(be->wg[OCL_K_GEMM_ROWS_FLOAT] * 4 * OCL_GEMM_FEW_ROWS, 1024);
    ck_assert_uint_le(be->wg[OCL_K_SOFTMAX] * 4, 1024);
    for (int k = 0; k < OCL_K_COUNT; k++)
        ck_assert(is_pow2(be->wg[k]));
    /* head_dim 16: 2 * 16 + 2 * wg floats fit in 2048 bytes, and match the full device */
    float got[7 * 16], want[7 * 16];
    CLF_ASSERT_OK(run_attention_on(be, 7, 16, got));
    CLF_ASSERT_OK(run_attention_on(ocl.be, 7, 16, want));
    expect_close(got, want, 7 * 16, TOL_ATTN, "attention with 2048 bytes of local memory",
                 "the whole device");
    /* head_dim 300: 2400 bytes of vectors alone */
    float *big = malloc(2 * 300 * sizeof *big);
    EXPECT_ERROR(run_attention_on(be, 2, 300, big), CLF_ERR_INPUT, "opencl: attention",
                 "head_dim 300", "local memory", "has 2048");
    free(big);
    ocl.api->close(be);
}
END_TEST

/* max_wg: every work-group within it, and a power of two; at max, exactly the largest. */
START_TEST(test_limit_max_wg)
{
    clf_backend *be = open_ok("max_wg=3", NULL);
    for (int k = 0; k < OCL_K_COUNT; k++)
        ck_assert_uint_eq(be->wg[k], 2);
    float *x = clf_test_frand(7 * 33, 3, -4, 4), got[7 * 33], want[7 * 33];
    bk k = {"opencl", ocl.api, be};
    run_softmax(&k, x, 7, 33, 0, 0, got);
    run_softmax(&cpu, x, 7, 33, 0, 0, want);
    expect_close(got, want, 7 * 33, TOL_NORM, "softmax at max_wg=3", "cpu backend");
    free(x);
    ocl.api->close(be);
    be = open_ok("max_wg=64", "max");
    for (int k = 0; k < OCL_K_COUNT; k++)
        ck_assert_uint_eq(be->wg[k], 64);
    ocl.api->close(be);
}
END_TEST

/* fp16=0: the F16 weights path (gemm reading b_half) needs no cl_khr_fp16 (vload_half is
 * core OpenCL), so it still reads b_half: here b_half holds 2 B, and C comes out 2 A B^T. */
START_TEST(test_limit_fp16)
{
    clf_backend *be = open_ok("fp16=0", NULL);
    ck_assert_int_eq(be->limits.fp16, 0);
    ck_assert_int_eq(listed_with("fp16=0").fp16, 0);

    enum { M = 3, N = 5, K = 16 };
    float A[M * K], B[N * K], C[M * N], want[M * N];
    uint16_t Bh[N * K];
    for (int i = 0; i < M * K; i++)
        A[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < N * K; i++) {
        B[i] = (float)(i % 5) - 2.0f;
        Bh[i] = clf_float_to_half(2.0f * B[i]); /* -4 .. 4: exact in binary16 */
    }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int p = 0; p < K; p++)
                s += (double)A[i * K + p] * 2.0 * B[j * K + p];
            want[i * N + j] = (float)s;
        }
    bk k = {"opencl", ocl.api, be};
    clf_buffer *ba = up(&k, A, sizeof A), *bb = up(&k, B, sizeof B), *bh = up(&k, Bh, sizeof Bh),
               *bc = up(&k, NULL, sizeof C);
    clf_gemm_args g = {.trans_b = 1,
                       .m = M,
                       .n = N,
                       .k = K,
                       .alpha = 1,
                       .a = {ba, 0},
                       .lda = K,
                       .b = {bb, 0},
                       .ldb = K,
                       .c = {bc, 0},
                       .ldc = N,
                       .b_half = {bh, 0}};
    CLF_ASSERT_OK(ocl.api->gemm(be, &g));
    down(&k, C, bc, sizeof C);
    expect_close(C, want, M * N, TOL_GEMM_HALF, "gemm from b_half without fp16", "2 A B^T");
    ocl.api->free(be, ba);
    ocl.api->free(be, bb);
    ocl.api->free(be, bh);
    ocl.api->free(be, bc);
    ocl.api->close(be);
}
END_TEST

/* c_version: a device below OpenCL C 1.2 is refused, naming what it has and what is
 * needed; a cap above the device's changes nothing. */
START_TEST(test_limit_c_version)
{
    clf_backend *be = NULL;
    EXPECT_ERROR(open_with("c_version=1.1", NULL, &be), CLF_ERR_BACKEND, "opencl: open",
                 "OpenCL C 1.1 (CL_DEVICE_OPENCL_C_VERSION", "the kernels need OpenCL C 1.2");
    ck_assert_ptr_null(be);
    be = open_ok("c_version=9.9", NULL);
    ck_assert_int_eq(be->limits.c_version, ocl.be->limits.c_version);
    ocl.api->close(be);
}
END_TEST

/* compute_units: grid-stride kernels start 64 groups per compute unit; sum_squares (whose
 * group count follows) still matches the CPU. */
START_TEST(test_limit_compute_units)
{
    clf_backend *be = open_ok("compute_units=1", NULL);
    ck_assert_uint_eq(be->limits.compute_units, 1);
    ck_assert_uint_eq(be->max_groups, 64);
    float *x = clf_test_frand(100003, 9, -1, 1); /* x[3 .. 100003) is summed */
    bk k = {"opencl", ocl.api, be};
    float got = run_sum_squares(&k, x, 100000, 3), want = run_sum_squares(&cpu, x, 100000, 3);
    expect_close(&got, &want, 1, TOL_SUMSQ, "sum_squares on one compute unit", "cpu backend");
    free(x);
    ocl.api->close(be);
}
END_TEST

/* A malformed CLF_OPENCL_LIMITS or CLF_OPENCL_LOCAL_SIZE fails open(), naming it. */
START_TEST(test_bad_settings)
{
    static const char *const bad[] = {
        "max_alloc=abc", "bogus=1",    "fp16=2",        "c_version=12",
        "max_wg=-1",     "local_mem=", "max_alloc=1x1", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        clf_backend *be = NULL;
        clf_status st = open_with(bad[i], NULL, &be);
        if (bad[i][0] == '\0') { /* empty: no caps */
            CLF_ASSERT_OK(st);
            ocl.api->close(be);
            continue;
        }
        ck_assert_msg(st == CLF_ERR_INPUT && strstr(clf_last_error(), "CLF_OPENCL_LIMITS"),
                      "'%s': status %d, %s", bad[i], (int)st, clf_last_error());
        ck_assert_ptr_null(be);
    }
    clf_backend *be = NULL;
    EXPECT_ERROR(open_with(NULL, "huge", &be), CLF_ERR_INPUT, "CLF_OPENCL_LOCAL_SIZE", "'huge'");
    ck_assert_ptr_null(be);
}
END_TEST

/* CLF_OPENCL_LOCAL_SIZE: min gives work-groups of 1; max the largest power of two within
 * the device's and the kernel's limits (beyond auto's 256 where both allow). The kernel's
 * own limit (CL_KERNEL_WORK_GROUP_SIZE) can be below the device's: NVIDIA's driver gives
 * 256 for kernels of many registers on a device of 1024, so the test asks the kernels. */
/* CLF_OPENCL_HGEMM = value (NULL: unset) and CLF_OPENCL_LIMITS = limits for one open();
 * the variable's value from the environment is put back after. */
static clf_status open_hgemm(const char *value, const char *limits, clf_backend **be)
{
    const char *was = getenv("CLF_OPENCL_HGEMM");
    char saved[64] = "";
    if (was)
        snprintf(saved, sizeof saved, "%s", was);
    if (value)
        setenv("CLF_OPENCL_HGEMM", value, 1);
    else
        unsetenv("CLF_OPENCL_HGEMM");
    clf_status st = open_with(limits, NULL, be);
    if (was)
        setenv("CLF_OPENCL_HGEMM", saved, 1);
    else
        unsetenv("CLF_OPENCL_HGEMM");
    return st;
}

/* Whether F16 products of 8+ rows run in HGEMM: auto (unset) on a GPU with cl_khr_fp16,
 * on wherever the device has it (fp16=0 caps it away), off never; another value is
 * refused naming the variable. supports(CLF_OP_GEMM_HALF_ARITH) answers the same. */
START_TEST(test_hgemm_knob)
{
    const int fp16 = ocl.be->limits.fp16, gpu = (ocl.be->dev.type & CL_DEVICE_TYPE_GPU) != 0;
    static const char *const values[] = {NULL, "", "auto", "on", "off"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        clf_backend *be = NULL;
        CLF_ASSERT_OK(open_hgemm(values[i], NULL, &be));
        const int want = values[i] && strcmp(values[i], "on") == 0    ? fp16
                         : values[i] && strcmp(values[i], "off") == 0 ? 0
                                                                      : fp16 && gpu;
        ck_assert_msg(be->half_arith == want, "CLF_OPENCL_HGEMM=%s: %d, want %d",
                      values[i] ? values[i] : "(unset)", be->half_arith, want);
        ck_assert_int_eq(ocl.api->supports(be, CLF_OP_GEMM_HALF_ARITH), want);
        ocl.api->close(be);
    }
    clf_backend *be = NULL;
    CLF_ASSERT_OK(open_hgemm("on", "fp16=0", &be));
    ck_assert_int_eq(ocl.api->supports(be, CLF_OP_GEMM_HALF_ARITH), 0);
    ocl.api->close(be);
    be = NULL;
    EXPECT_ERROR(open_hgemm("yes", NULL, &be), CLF_ERR_INPUT, "CLF_OPENCL_HGEMM", "'yes'",
                 "on, off or auto");
    ck_assert_ptr_null(be);
}
END_TEST

START_TEST(test_local_size_knob)
{
    clf_backend *lo = open_ok(NULL, "min"), *hi = open_ok(NULL, "max"), *au = open_ok(NULL, "auto");
    int beyond = 0, can_go_beyond = 0;
    size_t widest = 0;
    for (int k = 0; k < OCL_K_COUNT; k++) {
        size_t kernel_wg = 0;
        ck_assert_int_eq(clGetKernelWorkGroupInfo(hi->kernels[k], hi->dev.device,
                                                  CL_KERNEL_WORK_GROUP_SIZE, sizeof kernel_wg,
                                                  &kernel_wg, NULL),
                         CL_SUCCESS);
        widest = kernel_wg > widest ? kernel_wg : widest;
        can_go_beyond += kernel_wg >= 512 && hi->limits.max_wg >= 512;
        ck_assert_uint_eq(lo->wg[k], 1);
        ck_assert_uint_eq(au->wg[k], ocl.be->wg[k]);
        ck_assert_msg(is_pow2(hi->wg[k]) && hi->wg[k] >= au->wg[k] &&
                          hi->wg[k] <= hi->limits.max_wg,
                      "kernel %d: max %zu, auto %zu", k, hi->wg[k], au->wg[k]);
        beyond += hi->wg[k] > 256;
    }
    if (can_go_beyond > 0)
        ck_assert_msg(beyond > 0, "%d kernels allow 512 or more, none got it with max",
                      can_go_beyond);
    printf("test_local_size_knob: softmax work-group min %zu, auto %zu, max %zu; %d kernels "
           "beyond 256 (%d allow 512+, widest kernel limit %zu, device %zu)\n",
           lo->wg[OCL_K_SOFTMAX], au->wg[OCL_K_SOFTMAX], hi->wg[OCL_K_SOFTMAX], beyond,
           can_go_beyond, widest, hi->limits.max_wg);
    ocl.api->close(lo);
    ocl.api->close(hi);
    ocl.api->close(au);
}
END_TEST

CLF_TEST_MAIN(ocl_test_run, "opencl_limits", "limits", test_limits_are_queried,
              test_limit_max_alloc, test_limit_local_mem, test_limit_max_wg, test_limit_fp16,
              test_limit_c_version, test_limit_compute_units, test_bad_settings,
              test_local_size_knob, test_hgemm_knob)
#else
/* without the backend ocl_test_run says why before it would run a test */
int main(void)
{
    return ocl_test_run("opencl_limits", "limits", NULL, 0);
}
#endif
