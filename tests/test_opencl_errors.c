/* The OpenCL backend's errors: NULL argument structs, operand bounds and refused aliasing
 * (inference and training ops), buffers of another instance, the allocation limit, and
 * the OpenCL / CLBlast error-name tables.
 * Without an OpenCL device the suite says why and exits 77 (ctest: skipped; a failure with
 * CLF_TEST_REQUIRE_OPENCL=1). */
#include "opencl_testutil.h"

#include "clformer/tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CLF_HAVE_OPENCL /* the backend's error-name tables (ocl_errors.c is linked in) */
#include "ocl_internal.h"
#endif

/* A NULL argument struct is refused with a message, never dereferenced (the CPU
 * backend's twin check is in test_ops). */
START_TEST(test_null_arguments)
{
    clf_test_refuses_null_args(ocl.api, ocl.be, "opencl");
}
END_TEST

START_TEST(test_bounds)
{
    float h[256] = {0};
    clf_buffer *big = up(&ocl, h, sizeof h), *small = up(&ocl, h, 40); /* 10 floats */
    clf_buffer *out = up(&ocl, h, sizeof h); /* C: it may not overlap A or B */
    /* gemm 8x8x8 needs 64 floats per operand */
    clf_gemm_args g = {.m = 8,
                       .n = 8,
                       .k = 8,
                       .alpha = 1,
                       .lda = 8,
                       .ldb = 8,
                       .ldc = 8,
                       .a = {small, 0},
                       .b = {big, 0},
                       .c = {big, 0}};
    EXPECT_ERROR(clf_op_gemm(ocl.api, ocl.be, &g), CLF_ERR_INPUT, "gemm", "'a'", "40 bytes");
    g.a = (clf_ptr){big, 0};
    g.c = (clf_ptr){big, 800}; /* 200 + 64 > 256 */
    EXPECT_ERROR(clf_op_gemm(ocl.api, ocl.be, &g), CLF_ERR_INPUT, "gemm", "'c'");
    g.c = (clf_ptr){out, 0};
    g.bias = (clf_ptr){small, 16}; /* 4 + 8 > 10 */
    EXPECT_ERROR(clf_op_gemm(ocl.api, ocl.be, &g), CLF_ERR_INPUT, "gemm", "'bias'");
    g.bias = (clf_ptr){NULL, 0};
    g.a = (clf_ptr){big, 2};
    EXPECT_ERROR(clf_op_gemm(ocl.api, ocl.be, &g), CLF_ERR_INPUT, "gemm", "'a'", "multiple of 4");
    g.a = (clf_ptr){big, 0};
    g.lda = 4;
    EXPECT_ERROR(clf_op_gemm(ocl.api, ocl.be, &g), CLF_ERR_INPUT, "gemm", "lda");
    g.lda = 8;
    g.batch = 4;
    g.stride_a = g.stride_b = g.stride_c = 64; /* 4 * 64 > 256 at offset 0: fits exactly */
    CLF_ASSERT_OK(ocl.api->gemm_strided_batched(ocl.be, &g));
    g.stride_b = 65;
    EXPECT_ERROR(clf_op_gemm_strided_batched(ocl.api, ocl.be, &g), CLF_ERR_INPUT,
                 "gemm_strided_batched", "'b'");
    /* b_half: 64 halves = 128 bytes, checked for any shape that gives it (here 8 rows, which
     * do not read it); its offset need only be a multiple of 2 */
    g.batch = 0;
    g.trans_b = 1;
    g.b_half = (clf_ptr){small, 0};
    EXPECT_ERROR(clf_op_gemm(ocl.api, ocl.be, &g), CLF_ERR_INPUT, "gemm", "'b_half'",
                 "needs 128 bytes", "40 bytes");
    g.m = 1;
    EXPECT_ERROR(clf_op_gemm(ocl.api, ocl.be, &g), CLF_ERR_INPUT, "gemm", "'b_half'", "40 bytes");
    g.b_half = (clf_ptr){big, 3};
    EXPECT_ERROR(clf_op_gemm(ocl.api, ocl.be, &g), CLF_ERR_INPUT, "gemm", "'b_half'",
                 "multiple of 2");
    g.b_half = (clf_ptr){big, 1024 - 128 + 2}; /* one half past the end */
    EXPECT_ERROR(clf_op_gemm(ocl.api, ocl.be, &g), CLF_ERR_INPUT, "gemm", "'b_half'",
                 "out of bounds");
    g.b_half = (clf_ptr){big, 1024 - 128 - 2}; /* ends one half before the end */
    CLF_ASSERT_OK(ocl.api->gemm(ocl.be, &g));
    g.b_half = (clf_ptr){NULL, 0};
    g.m = 8;
    g.trans_b = 0;

    clf_layernorm_args ln = {.rows = 4,
                             .cols = 12,
                             .eps = 1e-6f,
                             .out = {big, 0},
                             .x = {big, 512},
                             .alpha = {small, 0},
                             .beta = {small, 0}};
    EXPECT_ERROR(clf_op_layernorm(ocl.api, ocl.be, &ln), CLF_ERR_INPUT, "layernorm", "'alpha'");
    ln.alpha = (clf_ptr){big, 0};
    ln.beta = (clf_ptr){NULL, 0};
    EXPECT_ERROR(clf_op_layernorm(ocl.api, ocl.be, &ln), CLF_ERR_INPUT, "layernorm", "'beta'",
                 "missing");

    clf_attention_args at = {.batch = 1,
                             .heads = 2,
                             .q_len = 4,
                             .kv_len = 4,
                             .head_dim = 4,
                             .q = {big, 0},
                             .k = {big, 0},
                             .v = {big, 0},
                             .out = {big, 0},
                             .q_ld = 8,
                             .k_ld = 8,
                             .v_ld = 8,
                             .out_ld = 8,
                             .scale = 1,
                             .probs = {small, 0}}; /* probs needs 32 floats */
    EXPECT_ERROR(clf_op_attention(ocl.api, ocl.be, &at), CLF_ERR_INPUT, "attention", "'probs'");
    at.probs = (clf_ptr){NULL, 0};
    at.key_mask = (clf_ptr){small, 32}; /* 8 + 4 > 10 */
    EXPECT_ERROR(clf_op_attention(ocl.api, ocl.be, &at), CLF_ERR_INPUT, "attention", "'key_mask'");
    at.key_mask = (clf_ptr){NULL, 0};
    at.k_ld = 7;
    EXPECT_ERROR(clf_op_attention(ocl.api, ocl.be, &at), CLF_ERR_INPUT, "attention", "k_ld");

    clf_embed_args em = {.rows = 12,
                         .seq_len = 12,
                         .dim = 4,
                         .vocab = 8,
                         .scale = 1,
                         .out = {big, 0},
                         .ids = {small, 0},
                         .table = {big, 0}};
    EXPECT_ERROR(clf_op_embed(ocl.api, ocl.be, &em), CLF_ERR_INPUT, "embed", "'ids'");
    em.ids = (clf_ptr){big, 0};
    em.pe = (clf_ptr){small, 0}; /* needs 12 * 4 floats */
    EXPECT_ERROR(clf_op_embed(ocl.api, ocl.be, &em), CLF_ERR_INPUT, "embed", "'pe'");

    EXPECT_ERROR(
        clf_op_add(ocl.api, ocl.be, (clf_ptr){small, 0}, (clf_ptr){big, 0}, (clf_ptr){big, 0}, 11),
        CLF_ERR_INPUT, "add", "'out'");
    EXPECT_ERROR(clf_op_softmax(ocl.api, ocl.be, (clf_ptr){big, 0}, (clf_ptr){small, 0}, 2, 6, 0),
                 CLF_ERR_INPUT, "softmax", "'x'");
    EXPECT_ERROR(clf_op_softmax(ocl.api, ocl.be, (clf_ptr){big, 0}, (clf_ptr){small, 0}, 2, 6, 1),
                 CLF_ERR_INPUT, "log_softmax", "'x'");
    EXPECT_ERROR(clf_op_argmax(ocl.api, ocl.be, (clf_ptr){small, 0}, (clf_ptr){big, 0}, 11, 2),
                 CLF_ERR_INPUT, "argmax", "'out'");
    EXPECT_ERROR(clf_op_upload(ocl.api, ocl.be, (clf_ptr){small, 4}, h, 40), CLF_ERR_INPUT,
                 "upload", "'dst'");
    EXPECT_ERROR(clf_op_download(ocl.api, ocl.be, h, (clf_ptr){small, 0}, 44), CLF_ERR_INPUT,
                 "download", "'src'");
    EXPECT_ERROR(clf_op_copy(ocl.api, ocl.be, (clf_ptr){small, 0}, (clf_ptr){big, 0}, 41),
                 CLF_ERR_INPUT, "copy", "'dst'");

    /* a buffer of another backend instance */
    const clf_backend_api *api2 = NULL;
    clf_backend *be2 = NULL;
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE")};
    CLF_ASSERT_OK(clf_backend_load("opencl", CLF_BUILD_BACKEND_DIR, &api2));
    CLF_ASSERT_OK(api2->open(&o, &be2));
    EXPECT_ERROR(clf_op_add(api2, be2, (clf_ptr){big, 0}, (clf_ptr){big, 0}, (clf_ptr){big, 0}, 4),
                 CLF_ERR_INPUT, "add", "another backend");
    /* the same refusal from the core's checks (clformer/ops.h), for the ops it checks */
    EXPECT_ERROR(clf_op_gemm(api2, be2, &g), CLF_ERR_INPUT, "opencl: gemm", "'a'",
                 "another backend");
    api2->close(be2);

    ocl.api->free(ocl.be, big);
    ocl.api->free(ocl.be, small);
    ocl.api->free(ocl.be, out);
}
END_TEST

START_TEST(test_alloc_limit)
{
    uint64_t max = ocl.api->max_alloc(ocl.be);
    ck_assert_uint_gt(max, 0);
    clf_buffer *b = NULL;
    EXPECT_ERROR(ocl.api->alloc(ocl.be, (size_t)max + 1, &b), CLF_ERR_NOMEM, "opencl: alloc",
                 "CL_DEVICE_MAX_MEM_ALLOC_SIZE");
    ck_assert_ptr_null(b);
    EXPECT_ERROR(ocl.api->alloc(ocl.be, SIZE_MAX, &b), CLF_ERR_NOMEM, "alloc");
}
END_TEST

#ifdef CLF_HAVE_OPENCL
START_TEST(test_error_names)
{
    ck_assert_str_eq(ocl_error_name(0), "CL_SUCCESS");
    ck_assert_str_eq(ocl_error_name(-5), "CL_OUT_OF_RESOURCES");
    ck_assert_str_eq(ocl_error_name(-54), "CL_INVALID_WORK_GROUP_SIZE");
    ck_assert_str_eq(ocl_error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
    ck_assert_str_eq(ocl_error_name(-9999), "CL_UNKNOWN_ERROR");
    ck_assert_str_eq(ocl_clblast_name(-1016), "CLBlastInvalidLeadDimA");
    ck_assert_str_eq(ocl_clblast_name(-2046), "CLBlastInvalidLocalMemUsage");
    ck_assert_str_eq(ocl_clblast_name(-30), "CL_INVALID_VALUE");
    EXPECT_ERROR(ocl_fail("attention", "clEnqueueNDRangeKernel", -5), CLF_ERR_BACKEND,
                 "opencl: attention: clEnqueueNDRangeKernel failed: CL_OUT_OF_RESOURCES (-5)");
    EXPECT_ERROR(ocl_fail("alloc", "clCreateBuffer", -4), CLF_ERR_NOMEM,
                 "CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)");
    EXPECT_ERROR(ocl_fail_clblast("gemm", "CLBlastSgemm", -2045), CLF_ERR_BACKEND,
                 "opencl: gemm: CLBlastSgemm failed: CLBlastNoHalfPrecision (-2045)");
}
END_TEST
#endif

/* Operand checks of the training ops: bounds, refused aliasing, missing operands. */
START_TEST(test_train_bounds)
{
    float h[256] = {0};
    clf_buffer *big = up(&ocl, h, sizeof h), *small = up(&ocl, h, 40); /* 10 floats */

    EXPECT_ERROR(clf_op_relu_backward(ocl.api, ocl.be, (clf_ptr){small, 0}, (clf_ptr){big, 0},
                                      (clf_ptr){big, 0}, 11),
                 CLF_ERR_INPUT, "relu_backward", "'dx'");
    EXPECT_ERROR(clf_op_relu_backward(ocl.api, ocl.be, (clf_ptr){big, 4}, (clf_ptr){big, 0},
                                      (clf_ptr){small, 0}, 8),
                 CLF_ERR_INPUT, "relu_backward", "overlaps");

    clf_layernorm_backward_args ln = {.rows = 2,
                                      .cols = 8,
                                      .eps = 1e-6f,
                                      .dx = {big, 0},
                                      .dy = {big, 256},
                                      .x = {big, 512},
                                      .alpha = {big, 768},
                                      .dalpha = {small, 16}}; /* 4 + 8 > 10 */
    EXPECT_ERROR(clf_op_layernorm_backward(ocl.api, ocl.be, &ln), CLF_ERR_INPUT,
                 "layernorm_backward", "'dalpha'");
    ln.dalpha = (clf_ptr){NULL, 0};
    ln.x = (clf_ptr){big, 32}; /* inside dx */
    EXPECT_ERROR(clf_op_layernorm_backward(ocl.api, ocl.be, &ln), CLF_ERR_INPUT,
                 "layernorm_backward", "alias");
    ln.x = (clf_ptr){big, 512};
    ln.alpha = (clf_ptr){NULL, 0};
    EXPECT_ERROR(clf_op_layernorm_backward(ocl.api, ocl.be, &ln), CLF_ERR_INPUT,
                 "layernorm_backward", "'alpha'", "missing");

    clf_attention_backward_args at = {.fwd = {.batch = 1,
                                              .heads = 2,
                                              .q_len = 4,
                                              .kv_len = 4,
                                              .head_dim = 4,
                                              .q = {big, 0},
                                              .k = {big, 0},
                                              .v = {big, 0},
                                              .q_ld = 8,
                                              .k_ld = 8,
                                              .v_ld = 8,
                                              .out_ld = 8,
                                              .scale = 1},
                                      .dout = {big, 0},
                                      .dq = {small, 0}, /* needs 32 floats */
                                      .dk = {big, 512},
                                      .dv = {big, 640}};
    EXPECT_ERROR(clf_op_attention_backward(ocl.api, ocl.be, &at), CLF_ERR_INPUT,
                 "attention_backward", "'dq'");
    at.dq = (clf_ptr){big, 384};
    at.dv = (clf_ptr){big, 64}; /* over q, k, v and dout */
    EXPECT_ERROR(clf_op_attention_backward(ocl.api, ocl.be, &at), CLF_ERR_INPUT,
                 "attention_backward", "'dv' overlaps");
    at.dv = (clf_ptr){big, 640};
    at.fwd.v_ld = 7;
    EXPECT_ERROR(clf_op_attention_backward(ocl.api, ocl.be, &at), CLF_ERR_INPUT,
                 "attention_backward", "v_ld");

    clf_embed_backward_args em = {.rows = 12,
                                  .dim = 4,
                                  .vocab = 8,
                                  .scale = 1,
                                  .dtable = {big, 0},
                                  .dout = {big, 0},
                                  .ids = {small, 0}};
    EXPECT_ERROR(clf_op_embed_backward(ocl.api, ocl.be, &em), CLF_ERR_INPUT, "embed_backward",
                 "'ids'");

    clf_cross_entropy_args ce = {
        .rows = 4, .cols = 16, .loss = {NULL, 0}, .logits = {big, 0}, .targets = {small, 0}};
    EXPECT_ERROR(clf_op_cross_entropy(ocl.api, ocl.be, &ce), CLF_ERR_INPUT, "cross_entropy",
                 "'loss'", "missing");
    ce.loss = (clf_ptr){big, 16}; /* inside the logits */
    EXPECT_ERROR(clf_op_cross_entropy(ocl.api, ocl.be, &ce), CLF_ERR_INPUT, "cross_entropy", "loss",
                 "overlaps");
    ce.loss = (clf_ptr){big, 512};
    ce.label_smoothing = 1.5f;
    EXPECT_ERROR(clf_op_cross_entropy(ocl.api, ocl.be, &ce), CLF_ERR_INPUT, "cross_entropy",
                 "label_smoothing");

    EXPECT_ERROR(clf_op_sum_squares(ocl.api, ocl.be, (clf_ptr){NULL, 0}, (clf_ptr){big, 0}, 4),
                 CLF_ERR_INPUT, "sum_squares", "'out'");
    EXPECT_ERROR(clf_op_sum_squares(ocl.api, ocl.be, (clf_ptr){big, 0}, (clf_ptr){small, 0}, 11),
                 CLF_ERR_INPUT, "sum_squares", "'x'");
    EXPECT_ERROR(clf_op_fill(ocl.api, ocl.be, (clf_ptr){small, 4}, 1.0f, 10), CLF_ERR_INPUT, "fill",
                 "'out'");
    EXPECT_ERROR(clf_op_fill(ocl.api, ocl.be, (clf_ptr){small, 2}, 1.0f, 1), CLF_ERR_INPUT, "fill",
                 "multiple of 4");
    ocl.api->free(ocl.be, big);
    ocl.api->free(ocl.be, small);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {test_null_arguments, test_bounds, test_train_bounds,
                                  test_alloc_limit,
#ifdef CLF_HAVE_OPENCL
                                  test_error_names
#endif
    };
    return ocl_test_run("opencl_errors", "errors", tests, (int)(sizeof tests / sizeof tests[0]));
}
