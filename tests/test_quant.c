/* Weight types (clf_model_set_weight_type, clformer quantize): the F16, BF16 and int8
 * weights against F32 on the PyTorch fixtures, with a stated bound per type; the CPU
 * backend's int8 product against F32 with its rounding bound; quantized files written,
 * loaded and quantized again; hostile quantized files refused with the tensor's name.
 *
 * The fixtures run one sentence at a time: the decoder's products then have 7 rows, so the
 * F16 and BF16 copies are read (the backends read them for products of at most 7 rows),
 * and int8 is read by every product. The bounds are on the logits, relative to the
 * largest F32 logit of the fixture: max |x - f32| / max |f32| and mean |x - f32| / max
 * |f32|, over every fixture variant. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/config.h"
#include "clformer/model.h"
#include "clformer/tensor.h"
#include "clformer/weights.h"
#include "testutil.h"

/* Bounds per type (max, mean); the measured worst case over the fixtures is printed and
 * recorded in bench/RESULTS.md. F16 keeps 11 significant bits, BF16 8; int8 weights have
 * 8 bits per output channel and the CPU backend's activations 7 (8 with VNNI) per row. */
static const struct {
    clf_weight_type type;
    double max_bound, mean_bound;
} type_bounds[] = {
    {CLF_WEIGHT_F16, 2e-3, 3e-4},
    {CLF_WEIGHT_BF16, 1.5e-2, 2.5e-3},
    {CLF_WEIGHT_INT8, 6e-2, 1.2e-2},
};
#define N_TYPES (int)(sizeof type_bounds / sizeof type_bounds[0])
/* F16 on a backend that multiplies the products of many rows (the encoder's) in F16
 * arithmetic (CLF_OP_GEMM_HALF_ARITH: A rounded to F16 too, F16 sums): between F16 weights
 * and BF16 (measured on Intel's CPU runtime: 3.3e-3 and 3.6e-4, bench/RESULTS.md) */
static const double f16_arith_bounds[2] = {1e-2, 1.2e-3};
/* BF16 on a backend that multiplies the products of many rows in BF16 arithmetic
 * (CLF_OP_GEMM_BF16_ARITH: A rounded to BF16 too, F32 sums) keeps type_bounds' BF16 row. */

/* " (F16 arithmetic)" or " (BF16 arithmetic)" when the backend multiplies type's products
 * of many rows in it, else "". */
static const char *arith_label(clf_weight_type type)
{
    if (type == CLF_WEIGHT_F16 && clf_test_api->supports(clf_test_be, CLF_OP_GEMM_HALF_ARITH))
        return " (F16 arithmetic)";
    if (type == CLF_WEIGHT_BF16 && clf_test_api->supports(clf_test_be, CLF_OP_GEMM_BF16_ARITH))
        return " (BF16 arithmetic)";
    return "";
}
#define MIN_VARIANTS 11

/* The logits [B, T, V] of fixture dir with weight type `type`, each sentence run alone, on
 * the backend of the running test. *count gets B * T * V. */
static float *fixture_logits(const char *dir, clf_weight_type type, size_t *count)
{
    clf_test_io_model f;
    clf_test_io_model_open(dir, &f);
    float *logits = malloc((size_t)f.B * f.T * f.V * sizeof(float));
    CLF_ASSERT_OK(clf_model_set_weight_type(f.m, type));
    for (int b = 0; b < f.B; b++) {
        clf_forward_io fio = {.batch = 1,
                              .src_len = f.S,
                              .tgt_len = f.T,
                              .src = f.src + (size_t)b * f.S,
                              .tgt = f.tgt + (size_t)b * f.T,
                              .logits = logits + (size_t)b * f.T * f.V};
        CLF_ASSERT_OK(clf_model_forward(f.m, &fio));
    }
    *count = (size_t)f.B * f.T * f.V;
    clf_test_io_model_close(&f);
    return logits;
}

START_TEST(test_weight_types_against_f32)
{
    char names[64][256];
    const int n = clf_test_fixture_variants(names, 64);
    ck_assert_msg(n >= MIN_VARIANTS, "only %d fixture variants in %s", n, CLF_FIXTURES_DIR);
    double worst_max[N_TYPES] = {0}, worst_mean[N_TYPES] = {0};
    int ran[N_TYPES] = {0};
    for (int v = 0; v < n; v++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", CLF_FIXTURES_DIR, names[v]);
        size_t cnt = 0, cnt2 = 0;
        float *ref = fixture_logits(dir, CLF_WEIGHT_F32, &cnt);
        double ref_max = 0;
        for (size_t i = 0; i < cnt; i++)
            ref_max = fmax(ref_max, fabs(ref[i]));
        ck_assert(ref_max > 0);
        for (int k = 0; k < N_TYPES; k++) {
            const clf_weight_type type = type_bounds[k].type;
            const clf_op need = type == CLF_WEIGHT_BF16   ? CLF_OP_GEMM_BF16
                                : type == CLF_WEIGHT_INT8 ? CLF_OP_GEMM_I8
                                                          : CLF_OP_GEMM;
            if (!clf_test_api->supports(clf_test_be, need)) {
                ck_assert(!clf_test_is_cpu()); /* the cpu backend runs every type */
                continue;
            }
            const int arith = type == CLF_WEIGHT_F16 &&
                              clf_test_api->supports(clf_test_be, CLF_OP_GEMM_HALF_ARITH);
            const double max_bound = arith ? f16_arith_bounds[0] : type_bounds[k].max_bound;
            const double mean_bound = arith ? f16_arith_bounds[1] : type_bounds[k].mean_bound;
            float *got = fixture_logits(dir, type, &cnt2);
            ck_assert_uint_eq(cnt, cnt2);
            double mx = 0, sum = 0;
            for (size_t i = 0; i < cnt; i++) {
                const double d = fabs((double)got[i] - ref[i]);
                mx = fmax(mx, d);
                sum += d;
            }
            mx /= ref_max;
            const double mean = sum / (double)cnt / ref_max;
            /* the copy was read: the logits moved */
            ck_assert_msg(mx > 0, "%s: %s logits equal F32's: the copy was not read", names[v],
                          clf_weight_type_name(type));
            ck_assert_msg(mx <= max_bound, "%s on %s: %s%s max logit difference %.3g > %.3g",
                          names[v], clf_test_be_name, clf_weight_type_name(type), arith_label(type),
                          mx, max_bound);
            ck_assert_msg(mean <= mean_bound, "%s on %s: %s%s mean logit difference %.3g > %.3g",
                          names[v], clf_test_be_name, clf_weight_type_name(type), arith_label(type),
                          mean, mean_bound);
            worst_max[k] = fmax(worst_max[k], mx);
            worst_mean[k] = fmax(worst_mean[k], mean);
            ran[k]++;
            free(got);
        }
        free(ref);
    }
    for (int k = 0; k < N_TYPES; k++) {
        const int arith = type_bounds[k].type == CLF_WEIGHT_F16 &&
                          clf_test_api->supports(clf_test_be, CLF_OP_GEMM_HALF_ARITH);
        if (ran[k])
            fprintf(stderr,
                    "  %-6s %-5s%s over %d fixtures: worst max |dlogit|/max|logit| %.2e (bound "
                    "%.2g), worst mean %.2e (bound %.2g)\n",
                    clf_test_be_name, clf_weight_type_name(type_bounds[k].type),
                    arith_label(type_bounds[k].type), ran[k], worst_max[k],
                    arith ? f16_arith_bounds[0] : type_bounds[k].max_bound, worst_mean[k],
                    arith ? f16_arith_bounds[1] : type_bounds[k].mean_bound);
    }
}
END_TEST

/* A backend that cannot read a type says so, naming it, and the model stays usable. */
START_TEST(test_unsupported_type_refused)
{
    const clf_weight_type types[2] = {CLF_WEIGHT_BF16, CLF_WEIGHT_INT8};
    const clf_op ops[2] = {CLF_OP_GEMM_BF16, CLF_OP_GEMM_I8};
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/pre_tutorial", CLF_FIXTURES_DIR);
    clf_config cfg;
    clf_weights *w = NULL;
    clf_model *m = NULL;
    clf_test_load_model(dir, &cfg, &w);
    CLF_ASSERT_OK(clf_model_create(&cfg.model, w, clf_test_api, clf_test_be, &m));
    for (int k = 0; k < 2; k++) {
        if (clf_test_api->supports(clf_test_be, ops[k]))
            continue;
        ck_assert_int_eq(clf_model_set_weight_type(m, types[k]), CLF_ERR_UNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(clf_last_error(), clf_weight_type_name(types[k])));
        ck_assert_ptr_null(strchr(clf_last_error(), '\n'));
    }
    CLF_ASSERT_OK(clf_model_set_weight_type(m, CLF_WEIGHT_F32));
    clf_model_free(m);
    clf_weights_free(w);
}
END_TEST

/* ---- the CPU backend's int8 product ---- */

/* W [n, k] quantized as a model's int8 copy is: *q (int8 [n, k]) and *sc (scales [n]), and
 * the returned b_scale operand, per row {F32 scale, I32 sum of the row's int8 values}. */
static unsigned char *i8_operand(const float *W, int n, int k, int8_t **q, float **sc)
{
    *q = malloc((size_t)n * k);
    *sc = malloc((size_t)n * sizeof(float));
    unsigned char *pairs = malloc((size_t)n * 8);
    ck_assert_int_eq(clf_quantize_rows_i8(W, n, k, *q, *sc), -1);
    for (int j = 0; j < n; j++) {
        int32_t sum = 0;
        for (int p = 0; p < k; p++)
            sum += (*q)[(size_t)j * k + p];
        memcpy(pairs + 8 * j, &(*sc)[j], 4);
        memcpy(pairs + 8 * j + 4, &sum, 4);
    }
    return pairs;
}

/* C = alpha * A W^T + beta * C0 + bias (relu) with W = q * s (b_i8, b_scale) against the
 * same in double with the dequantized W: the only difference is A rounded per row to at
 * least 7 bits, so |C - ref| <= |alpha| * max|A[i,:]| / 128 * sum_p |W[j,p]| (+ float
 * rounding). */
static void check_i8_product(int m, int n, int k, int lda, int ldc, float alpha, float beta,
                             int bias_on, int relu)
{
    const clf_backend_api *api = clf_test_api;
    clf_backend *be = clf_test_be;
    float *A = clf_test_frand((size_t)m * lda, 11u + (unsigned)m, -2.0f, 2.0f);
    float *W = clf_test_frand((size_t)n * k, 12u, -0.5f, 0.5f);
    float *bias = clf_test_frand((size_t)n, 13u, -1.0f, 1.0f);
    float *C0 = clf_test_frand((size_t)m * ldc, 14u, -1.0f, 1.0f);
    float *C = malloc((size_t)m * ldc * sizeof(float));
    int8_t *q = NULL;
    float *sc = NULL;
    unsigned char *pairs = i8_operand(W, n, k, &q, &sc);
    clf_buffer *bA = clf_test_upload(api, be, A, (size_t)m * lda * 4),
               *bW = clf_test_upload(api, be, W, (size_t)n * k * 4),
               *bQ = clf_test_upload(api, be, q, (size_t)n * k),
               *bS = clf_test_upload(api, be, pairs, (size_t)n * 8),
               *bB = clf_test_upload(api, be, bias, (size_t)n * 4),
               *bC = clf_test_upload(api, be, C0, (size_t)m * ldc * 4);
    clf_gemm_args g = {.trans_b = 1,
                       .m = m,
                       .n = n,
                       .k = k,
                       .alpha = alpha,
                       .beta = beta,
                       .a = {bA, 0},
                       .lda = lda,
                       .b = {bW, 0},
                       .ldb = k,
                       .c = {bC, 0},
                       .ldc = ldc,
                       .bias = {bias_on ? bB : NULL, 0},
                       .relu = relu,
                       .b_i8 = {bQ, 0},
                       .b_scale = {bS, 0}};
    CLF_ASSERT_OK(api->gemm(be, &g));
    CLF_ASSERT_OK(api->download(be, C, (clf_ptr){bC, 0}, (size_t)m * ldc * 4));
    int moved = 0;
    for (int i = 0; i < m; i++) {
        double amax = 0;
        for (int p = 0; p < k; p++)
            amax = fmax(amax, fabs(A[(size_t)i * lda + p]));
        for (int j = 0; j < n; j++) {
            double ref = 0, wabs = 0;
            for (int p = 0; p < k; p++) {
                const double wq = (double)q[(size_t)j * k + p] * sc[j];
                ref += (double)A[(size_t)i * lda + p] * wq;
                wabs += fabs(wq);
            }
            ref = alpha * ref + beta * C0[(size_t)i * ldc + j] + (bias_on ? bias[j] : 0.0);
            if (relu)
                ref = ref > 0 ? ref : 0;
            const double bound = fabs(alpha) * amax / 128.0 * wabs * 1.001 + 1e-4;
            const double got = C[(size_t)i * ldc + j];
            ck_assert_msg(fabs(got - ref) <= bound,
                          "int8 gemm m=%d n=%d k=%d: C[%d,%d] = %g, reference %g (bound %g)", m, n,
                          k, i, j, got, ref, bound);
            moved |= got != (float)ref;
        }
        /* the padding between rows of C is not written */
        for (int j = n; j < ldc; j++)
            ck_assert_float_eq(C[(size_t)i * ldc + j], C0[(size_t)i * ldc + j]);
    }
    ck_assert_msg(moved, "int8 gemm m=%d: every element equals the F32 reference", m);
    clf_buffer *bufs[] = {bA, bW, bQ, bS, bB, bC};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        api->free(be, bufs[i]);
    free(A);
    free(W);
    free(bias);
    free(C0);
    free(C);
    free(q);
    free(sc);
    free(pairs);
}

START_TEST(test_cpu_gemm_i8)
{
    check_i8_product(1, 24, 37, 37, 24, 1.0f, 0.0f, 0, 0);
    /* one row: four weight rows at a time, then a pair and a single; a k tail; enough
     * weights (35910) for both threads, each with its own block of rows */
    check_i8_product(1, 27, 64, 64, 27, 1.0f, 0.0f, 1, 0);
    check_i8_product(1, 70, 513, 515, 71, 0.5f, 1.0f, 1, 1);
    check_i8_product(5, 24, 37, 40, 30, 0.5f, 1.0f, 1, 0);
    check_i8_product(9, 33, 64, 64, 33, 1.0f, 0.0f, 1, 1);
    /* the own kernel's last row count, and oneDNN's first */
    check_i8_product(24, 70, 513, 515, 71, 0.5f, 1.0f, 1, 0);
    check_i8_product(25, 70, 513, 515, 71, 1.0f, 0.0f, 0, 1);
    check_i8_product(40, 17, 129, 131, 20, -1.5f, 0.5f, 1, 1);
    /* the same shape twice: the cached primitive, other data */
    check_i8_product(9, 33, 64, 64, 33, 1.0f, 1.0f, 0, 0);
}
END_TEST

/* A cpu backend opened with CLF_CPU_ISA=isa, threads threads. */
static clf_backend *open_cpu_isa(const char *isa, int threads)
{
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .threads = threads};
    clf_backend *b = NULL;
    ck_assert_int_eq(setenv("CLF_CPU_ISA", isa, 1), 0);
    const clf_status st = clf_test_api->open(&o, &b);
    unsetenv("CLF_CPU_ISA");
    CLF_ASSERT_OK(st);
    return b;
}

/* C of one int8 product (alpha, beta, a bias and relu on) on backend be into C: of W's rows
 * j0 .. j1 only, into C's columns j0 .. j1 (the others keep their C0; j0 0, j1 n: all). */
static void i8_product_on(clf_backend *be, int m, int n, int k, int lda, int ldc, int j0, int j1,
                          float *C)
{
    const clf_backend_api *api = clf_test_api;
    float *A = clf_test_frand((size_t)m * lda, 21u + (unsigned)m, -2.0f, 2.0f);
    float *W = clf_test_frand((size_t)n * k, 22u + (unsigned)n, -0.5f, 0.5f);
    float *bias = clf_test_frand((size_t)n, 23u, -1.0f, 1.0f);
    float *C0 = clf_test_frand((size_t)m * ldc, 24u, -1.0f, 1.0f);
    int8_t *q = NULL;
    float *sc = NULL;
    unsigned char *pairs = i8_operand(W, n, k, &q, &sc);
    clf_buffer *bA = clf_test_upload(api, be, A, (size_t)m * lda * 4),
               *bQ = clf_test_upload(api, be, q, (size_t)n * k),
               *bS = clf_test_upload(api, be, pairs, (size_t)n * 8),
               *bB = clf_test_upload(api, be, bias, (size_t)n * 4),
               *bC = clf_test_upload(api, be, C0, (size_t)m * ldc * 4);
    clf_gemm_args g = {.trans_b = 1,
                       .m = m,
                       .n = j1 - j0,
                       .k = k,
                       .alpha = 0.75f,
                       .beta = 0.5f,
                       .a = {bA, 0},
                       .lda = lda,
                       .b = {bQ, (size_t)j0 * k},
                       .ldb = k,
                       .c = {bC, 4 * (size_t)j0},
                       .ldc = ldc,
                       .bias = {bB, 4 * (size_t)j0},
                       .relu = 1,
                       .b_i8 = {bQ, (size_t)j0 * k},
                       .b_scale = {bS, 8 * (size_t)j0}};
    CLF_ASSERT_OK(api->gemm(be, &g));
    CLF_ASSERT_OK(api->download(be, C, (clf_ptr){bC, 0}, (size_t)m * ldc * 4));
    clf_buffer *bufs[] = {bA, bQ, bS, bB, bC};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        api->free(be, bufs[i]);
    free(A);
    free(W);
    free(bias);
    free(C0);
    free(q);
    free(sc);
    free(pairs);
}

/* With AVX-512 VNNI, products of up to CPU_I8_VNNI_ROWS (12) rows run the backend's own
 * kernel, on weights packed in place where k is a multiple of 64 (cpu_i8_pack.c), and
 * oneDNN the others on those packed weights; oneDNN (the backend capped at AVX2, which keeps
 * the 8-bit activations and the weights as stored) computes the same exact integer sums, so
 * C must be equal bit for bit: 1 to 13 rows and two output layers' worth, W row counts that
 * leave 1-3 rows after the groups of 4 and up to 63 after the packed blocks, k with and
 * without a tail past 64, strides, 1 and 2 threads. */
START_TEST(test_cpu_gemm_i8_vnni_equals_onednn)
{
    char desc[512];
    CLF_ASSERT_OK(clf_test_api->describe(clf_test_be, desc, sizeof desc));
    if (!strstr(desc, "VNNI kernel")) {
        fprintf(stderr,
                "test_cpu_gemm_i8_vnni_equals_onednn: skipped, this CPU has no AVX-512 "
                "VNNI (%s)\n",
                desc);
        return;
    }
    static const int shapes[][5] = {/* m, n, k, lda, ldc */
                                    {1, 4, 64, 64, 4},
                                    {1, 7, 37, 40, 9},
                                    {2, 70, 513, 515, 71},
                                    {3, 33, 128, 128, 33},
                                    {4, 1030, 1024, 1024, 1030},
                                    {5, 9, 100, 101, 12},
                                    {8, 3072, 1024, 1024, 3072},
                                    {11, 66, 192, 200, 66},
                                    {12, 1024, 4096, 4096, 1024},
                                    {13, 70, 513, 515, 71},
                                    {13, 200, 128, 128, 201},
                                    /* an output layer's count of rows, packed but for the last 4 */
                                    {72, 32900, 64, 64, 32901}};
    for (int threads = 1; threads <= 2; threads++) {
        clf_backend *vnni = open_cpu_isa("avx512", threads), *dnnl = open_cpu_isa("avx2", threads);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], lda = shapes[s][3],
                      ldc = shapes[s][4];
            float *a = malloc((size_t)m * ldc * sizeof *a),
                  *b = malloc((size_t)m * ldc * sizeof *b);
            i8_product_on(vnni, m, n, k, lda, ldc, 0, n, a);
            i8_product_on(dnnl, m, n, k, lda, ldc, 0, n, b);
            for (size_t e = 0; e < (size_t)m * ldc; e++)
                ck_assert_msg(memcmp(&a[e], &b[e], sizeof *a) == 0,
                              "m=%d n=%d k=%d, %d threads: C[%zu] = %a with the VNNI kernel, %a "
                              "with oneDNN",
                              m, n, k, threads, e, (double)a[e], (double)b[e]);
            free(a);
            free(b);
        }
        clf_test_api->close(vnni);
        clf_test_api->close(dnnl);
    }
}
END_TEST

/* The epilogue (scales, beta, bias, ReLU) and the activations' quantization are compiled
 * for each kernel level (cpu_gemm_i8.c) with the same arithmetic per element, and every
 * level's integer sums are exact: a product gives the same bits at every level this CPU
 * has (CLF_CPU_ISA caps; a level above the CPU's opens as the CPU's), 1 to 130 rows, tails
 * past 16 columns, 1 and 2 threads. */
START_TEST(test_cpu_gemm_i8_same_bits_every_level)
{
    static const char *const levels[] = {"generic", "avx2", "avx512"};
    static const int shapes[][5] = {/* m, n, k, lda, ldc */
                                    {1, 37, 64, 64, 37},
                                    {5, 70, 513, 515, 71},
                                    {30, 1030, 128, 128, 1033},
                                    {130, 263, 192, 200, 263}};
    for (int threads = 1; threads <= 2; threads++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], lda = shapes[s][3],
                      ldc = shapes[s][4];
            const size_t len = (size_t)m * ldc;
            float *want = malloc(len * sizeof *want), *got = malloc(len * sizeof *got);
            for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++) {
                clf_backend *b = open_cpu_isa(levels[l], threads);
                i8_product_on(b, m, n, k, lda, ldc, 0, n, l ? got : want);
                clf_test_api->close(b);
                for (size_t e = 0; l && e < len; e++)
                    ck_assert_msg(memcmp(&got[e], &want[e], sizeof *got) == 0,
                                  "m=%d n=%d k=%d, %d threads: C[%zu] = %a at level %s, %a at "
                                  "generic",
                                  m, n, k, threads, e, (double)got[e], levels[l], (double)want[e]);
            }
            free(want);
            free(got);
        }
}
END_TEST

/* One int8 product on be with its weights already in wbuf (rows j0 .. j0 + n of q's [*, k],
 * scales of pairs): C [m, n] (alpha 0.75, a bias, relu), the rest fresh as i8_product_on's. */
static void i8_product_with(clf_backend *be, clf_buffer *wbuf, const unsigned char *pairs,
                            const float *bias_all, int m, int j0, int n, int k, float *C)
{
    const clf_backend_api *api = clf_test_api;
    float *A = clf_test_frand((size_t)m * k, 31u + (unsigned)m, -2.0f, 2.0f);
    clf_buffer *bA = clf_test_upload(api, be, A, (size_t)m * k * 4),
               *bS = clf_test_upload(api, be, pairs + 8 * (size_t)j0, (size_t)n * 8),
               *bB = clf_test_upload(api, be, bias_all + j0, (size_t)n * 4), *bC = NULL;
    CLF_ASSERT_OK(api->alloc(be, (size_t)m * n * 4, &bC)); /* beta 0: C is not read */
    clf_gemm_args g = {.trans_b = 1,
                       .m = m,
                       .n = n,
                       .k = k,
                       .alpha = 0.75f,
                       .a = {bA, 0},
                       .lda = k,
                       .b = {wbuf, 0},
                       .ldb = k,
                       .c = {bC, 0},
                       .ldc = n,
                       .bias = {bB, 0},
                       .relu = 1,
                       .b_i8 = {wbuf, 64 + (size_t)j0 * k},
                       .b_scale = {bS, 0}};
    CLF_ASSERT_OK(api->gemm(be, &g));
    CLF_ASSERT_OK(api->download(be, C, (clf_ptr){bC, 0}, (size_t)m * n * 4));
    clf_buffer *bufs[] = {bA, bS, bB, bC};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        api->free(be, bufs[i]);
    free(A);
}

/* The weights of int8 products are packed in place for oneDNN on the first product that
 * reads them (cpu_i8_pack.c) where the CPU has AVX-512 VNNI and k is a multiple of 64; the
 * backend capped at AVX2 keeps them as stored. Products over the same weights, in this order,
 * give the same bits on both: all 131 rows (128 packed, 3 after), rows 64 .. 130 (from the
 * middle of the packed span), rows 1 .. 130 (not on a 64-row boundary: unpacked, packed
 * again from row 1), all rows again; the bytes read back, copied or overwritten in the
 * middle of a packed span are the rows as stored, whatever was packed. */
START_TEST(test_cpu_gemm_i8_packed_in_place)
{
    char desc[512];
    CLF_ASSERT_OK(clf_test_api->describe(clf_test_be, desc, sizeof desc));
    if (!strstr(desc, "packed")) {
        fprintf(stderr, "test_cpu_gemm_i8_packed_in_place: skipped, no packed int8 weights (%s)\n",
                desc);
        return;
    }
    const clf_backend_api *api = clf_test_api;
    const int n = 131, k = 128;
    const size_t wbytes = 64 + (size_t)n * k; /* 64 bytes before the matrix */
    float *W = clf_test_frand((size_t)n * k, 41u, -0.5f, 0.5f);
    float *bias = clf_test_frand((size_t)n, 42u, -1.0f, 1.0f);
    int8_t *q = NULL;
    float *sc = NULL;
    unsigned char *pairs = i8_operand(W, n, k, &q, &sc);
    unsigned char *host = calloc(wbytes, 1), *back = malloc(wbytes);
    memcpy(host + 64, q, (size_t)n * k);
    clf_backend *packs = open_cpu_isa("avx512", 2), *plain = open_cpu_isa("avx2", 2);
    clf_buffer *wp = clf_test_upload(api, packs, host, wbytes),
               *wr = clf_test_upload(api, plain, host, wbytes);
    static const int runs[][3] = {/* m, first row, rows */
                                  {7, 0, 131},
                                  {7, 64, 67},
                                  {13, 1, 130},
                                  {40, 0, 131}};
    float *a = malloc((size_t)40 * n * sizeof *a), *b = malloc((size_t)40 * n * sizeof *b);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
            const int m = runs[r][0], j0 = runs[r][1], rows = runs[r][2];
            i8_product_with(packs, wp, pairs, bias, m, j0, rows, k, a);
            i8_product_with(plain, wr, pairs, bias, m, j0, rows, k, b);
            for (size_t e = 0; e < (size_t)m * rows; e++)
                ck_assert_msg(memcmp(&a[e], &b[e], sizeof *a) == 0,
                              "pass %d, m=%d rows %d..%d: C[%zu] = %a packed, %a as stored", pass,
                              m, j0, j0 + rows - 1, e, (double)a[e], (double)b[e]);
        }
        /* read back and copied: the rows as stored */
        CLF_ASSERT_OK(api->download(packs, back, (clf_ptr){wp, 0}, wbytes));
        ck_assert_msg(memcmp(back, host, wbytes) == 0, "pass %d: the packed weights read back",
                      pass);
        i8_product_with(packs, wp, pairs, bias, 7, 0, n, k, a); /* packed again */
        clf_buffer *cp = NULL;
        CLF_ASSERT_OK(api->alloc(packs, wbytes, &cp));
        CLF_ASSERT_OK(api->copy(packs, (clf_ptr){cp, 0}, (clf_ptr){wp, 0}, wbytes));
        CLF_ASSERT_OK(api->download(packs, back, (clf_ptr){cp, 0}, wbytes));
        ck_assert_msg(memcmp(back, host, wbytes) == 0, "pass %d: the packed weights copied", pass);
        api->free(packs, cp);
        /* row 5 overwritten inside the packed span: the next pass multiplies with it */
        i8_product_with(packs, wp, pairs, bias, 7, 0, n, k, a); /* packed again */
        for (int p = 0; p < k; p++)
            host[64 + 5 * (size_t)k + p] = (unsigned char)(int8_t)(p % 7 - 3);
        CLF_ASSERT_OK(api->upload(packs, (clf_ptr){wp, 64 + 5 * (size_t)k},
                                  host + 64 + 5 * (size_t)k, (size_t)k));
        CLF_ASSERT_OK(api->upload(plain, (clf_ptr){wr, 64 + 5 * (size_t)k},
                                  host + 64 + 5 * (size_t)k, (size_t)k));
        CLF_ASSERT_OK(api->download(packs, back, (clf_ptr){wp, 0}, wbytes));
        ck_assert_msg(memcmp(back, host, wbytes) == 0, "pass %d: a row written into packed rows",
                      pass);
    }
    api->free(packs, wp);
    api->free(plain, wr);
    api->close(packs);
    api->close(plain);
    free(a);
    free(b);
    free(W);
    free(bias);
    free(q);
    free(sc);
    free(pairs);
    free(host);
    free(back);
}
END_TEST

/* Products of at least CPU_I8_IGEMM_MIN_N (32768) weight rows run oneDNN's igemm, fewer
 * rows its matmul (30 rows: past both own kernels); both give the exact integer sums, so the
 * product of all the rows must equal, bit for bit, those of three slices of them, each
 * written into its columns of C. */
START_TEST(test_cpu_gemm_i8_igemm_equals_matmul)
{
    const int m = 30, n = 32768 + 3, k = 37, lda = 40, ldc = n + 2;
    const int cut[] = {0, 11000, 22001, n};
    const size_t size = (size_t)m * ldc;
    float *whole = malloc(size * sizeof *whole), *slice = malloc(size * sizeof *slice);
    i8_product_on(clf_test_be, m, n, k, lda, ldc, 0, n, whole);
    for (int s = 0; s < 3; s++) {
        i8_product_on(clf_test_be, m, n, k, lda, ldc, cut[s], cut[s + 1], slice);
        for (int i = 0; i < m; i++)
            for (int j = cut[s]; j < cut[s + 1]; j++) {
                const size_t e = (size_t)i * ldc + j;
                ck_assert_msg(memcmp(&whole[e], &slice[e], sizeof *whole) == 0,
                              "C[%d,%d] = %a from all %d rows (igemm), %a from rows %d-%d "
                              "(matmul)",
                              i, j, (double)whole[e], n, (double)slice[e], cut[s], cut[s + 1]);
            }
    }
    /* the last slice's C keeps C0 before its columns, where the whole product moved it, and
     * past n, where neither writes */
    int moved = 0;
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < cut[2]; j++)
            moved |= whole[(size_t)i * ldc + j] != slice[(size_t)i * ldc + j];
        for (int j = n; j < ldc; j++)
            ck_assert_float_eq(whole[(size_t)i * ldc + j], slice[(size_t)i * ldc + j]);
    }
    ck_assert(moved);
    free(whole);
    free(slice);
}
END_TEST

/* b_i8 / b_scale out of their buffers are refused, naming the operand. */
START_TEST(test_cpu_gemm_i8_bounds)
{
    const clf_backend_api *api = clf_test_api;
    clf_backend *be = clf_test_be;
    float host[64] = {0};
    clf_buffer *f = clf_test_upload(api, be, host, sizeof host);
    clf_buffer *c = clf_test_upload(api, be, host, sizeof host);
    clf_buffer *small = clf_test_upload(api, be, host, 8);
    clf_gemm_args g = {.trans_b = 1,
                       .m = 2,
                       .n = 4,
                       .k = 4,
                       .alpha = 1.0f,
                       .a = {f, 0},
                       .lda = 4,
                       .b = {f, 0},
                       .ldb = 4,
                       .c = {c, 0},
                       .ldc = 4,
                       .b_i8 = {small, 0},
                       .b_scale = {f, 0}};
    ck_assert_int_eq(clf_op_gemm(api, be, &g), CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "'b_i8'"));
    g.b_i8 = (clf_ptr){f, 0};
    g.b_scale = (clf_ptr){small, 0};
    ck_assert_int_eq(clf_op_gemm(api, be, &g), CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "'b_scale'"));
    g.b_scale = (clf_ptr){c, 0}; /* C may not overlap what the product reads */
    ck_assert_int_eq(clf_op_gemm(api, be, &g), CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "'b_scale'"));
    api->free(be, f);
    api->free(be, c);
    api->free(be, small);
}
END_TEST

/* ---- quantized files ---- */

/* What the quantized-file tests start from: the pre_standard_bias fixture's model.yaml,
 * its weights and its config, and a fresh temporary directory (clf_test_tmp_path; the test
 * removes it). */
typedef struct quant_fixture {
    char yaml[1024], wpath[1024];
    clf_config cfg;
} quant_fixture;

static void fixture_open(quant_fixture *f)
{
    snprintf(f->yaml, sizeof f->yaml, "%s/pre_standard_bias/model.yaml", CLF_FIXTURES_DIR);
    snprintf(f->wpath, sizeof f->wpath, "%s/pre_standard_bias/weights.safetensors",
             CLF_FIXTURES_DIR);
    clf_test_make_tmpdir("clf-quant");
    CLF_ASSERT_OK(clf_config_load(f->yaml, &f->cfg));
}

START_TEST(test_quantize_round_trip)
{
    quant_fixture f;
    fixture_open(&f);
    clf_weights *orig = NULL, *w8 = NULL, *again = NULL;
    CLF_ASSERT_OK(clf_weights_load(f.wpath, &f.cfg.model, &orig));
    ck_assert_int_eq(orig->stored_type, CLF_WEIGHT_F32);

    const char *q1 = clf_test_tmp_path("q1.safetensors");
    CLF_ASSERT_OK(clf_weights_quantize_file(f.wpath, q1, CLF_WEIGHT_INT8, 0));
    clf_safetensors *f1 = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(q1, &f1));
    ck_assert_str_eq(clf_safetensors_meta(f1, CLF_WEIGHT_TYPE_META), "int8");
    /* a linear layer's matrix and its scales; an embedding table stays F32 */
    const char *lin = "encoder.layers.0.feed_forward_block.linear_1.weight";
    const clf_tensor *t = clf_safetensors_find(f1, lin);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->dtype, CLF_I8);
    const clf_tensor *s =
        clf_safetensors_find(f1, "encoder.layers.0.feed_forward_block.linear_1.weight.scale");
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->dtype, CLF_F32);
    ck_assert_int_eq(s->ndim, 1);
    ck_assert_int_eq(s->shape[0], t->shape[0]);
    ck_assert_int_eq(clf_safetensors_find(f1, "src_embed.embedding.weight")->dtype, CLF_F32);

    /* loaded: dequantized, within half a step of the original */
    CLF_ASSERT_OK(clf_weights_load(q1, &f.cfg.model, &w8));
    ck_assert_int_eq(w8->stored_type, CLF_WEIGHT_INT8);
    for (int i = 0; i < orig->count; i++) {
        const int64_t numel = clf_weight_spec_numel(&orig->specs[i]);
        const clf_tensor *ti = clf_safetensors_find(f1, orig->specs[i].name);
        ck_assert_ptr_nonnull(ti);
        if (ti->dtype != CLF_I8) {
            for (int64_t e = 0; e < numel; e++)
                ck_assert_float_eq(w8->data[i][e], orig->data[i][e]);
            continue;
        }
        char sname[CLF_TENSOR_NAME_MAX + 8];
        snprintf(sname, sizeof sname, "%s%s", ti->name, CLF_SCALE_SUFFIX);
        const clf_tensor *si = clf_safetensors_find(f1, sname);
        ck_assert_ptr_nonnull(si);
        const int64_t cols = ti->shape[1];
        for (int64_t e = 0; e < numel; e++) {
            float sc;
            memcpy(&sc, (const char *)si->data + 4 * (e / cols), 4);
            ck_assert(fabsf(w8->data[i][e] - orig->data[i][e]) <= sc * 0.5f * 1.0001f);
        }
    }
    const int wi = clf_weights_find(orig, lin);

    /* the dequantized weights saved as F32 and quantized again give the same file */
    const char *f32 = clf_test_tmp_path("f32.safetensors");
    const char *q2 = clf_test_tmp_path("q2.safetensors");
    CLF_ASSERT_OK(clf_weights_save(w8, f32, NULL, 0));
    CLF_ASSERT_OK(clf_weights_quantize_file(f32, q2, CLF_WEIGHT_INT8, 0));
    clf_safetensors *f2 = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(q2, &f2));
    ck_assert_int_eq(clf_safetensors_count(f1), clf_safetensors_count(f2));
    for (int i = 0; i < clf_safetensors_count(f1); i++) {
        const clf_tensor *a = clf_safetensors_at(f1, i);
        const clf_tensor *b = clf_safetensors_find(f2, a->name);
        ck_assert_msg(b != NULL, "'%s' missing after the second quantization", a->name);
        ck_assert_int_eq(a->dtype, b->dtype);
        ck_assert_uint_eq(a->nbytes, b->nbytes);
        ck_assert_msg(memcmp(a->data, b->data, a->nbytes) == 0,
                      "'%s' differs after the second quantization", a->name);
    }
    /* an already quantized file is not quantized again */
    ck_assert_int_eq(
        clf_weights_quantize_file(q1, clf_test_tmp_path("q3.safetensors"), CLF_WEIGHT_INT8, 0),
        CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "I8"));

    /* BF16 and F16 files: the matrices rounded, the type recorded */
    const clf_weight_type t16[2] = {CLF_WEIGHT_BF16, CLF_WEIGHT_F16};
    for (int j = 0; j < 2; j++) {
        const char *p = clf_test_tmp_path(j ? "h.safetensors" : "b.safetensors");
        CLF_ASSERT_OK(clf_weights_quantize_file(f.wpath, p, t16[j], 0));
        CLF_ASSERT_OK(clf_weights_load(p, &f.cfg.model, &again));
        ck_assert_int_eq(again->stored_type, t16[j]);
        for (int64_t e = 0; e < clf_weight_spec_numel(&orig->specs[wi]); e++) {
            const float x = orig->data[wi][e];
            const float want = j ? clf_half_to_float(clf_float_to_half(x))
                                 : clf_bf16_to_float(clf_float_to_bf16(x));
            ck_assert_float_eq(again->data[wi][e], want);
        }
        clf_weights_free(again);
        again = NULL;
    }

    /* --embeddings: the tables in F16 in the file, read back as their rounded values; without
     * it they stay F32 */
    const char *table = "src_embed.embedding.weight";
    const int ti = clf_weights_find(orig, table);
    ck_assert_int_ge(ti, 0);
    const char *he = clf_test_tmp_path("he.safetensors");
    CLF_ASSERT_OK(clf_weights_quantize_file(f.wpath, he, CLF_WEIGHT_F16, CLF_QUANTIZE_EMBEDDINGS));
    clf_safetensors *fe = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(he, &fe));
    ck_assert_int_eq(clf_safetensors_find(fe, table)->dtype, CLF_F16);
    clf_safetensors_close(fe);
    CLF_ASSERT_OK(clf_safetensors_open(clf_test_tmp_path("h.safetensors"), &fe));
    ck_assert_int_eq(clf_safetensors_find(fe, table)->dtype, CLF_F32);
    clf_safetensors_close(fe);
    CLF_ASSERT_OK(clf_weights_load(he, &f.cfg.model, &again));
    for (int64_t e = 0; e < clf_weight_spec_numel(&orig->specs[ti]); e++)
        ck_assert_float_eq(again->data[ti][e],
                           clf_half_to_float(clf_float_to_half(orig->data[ti][e])));
    clf_weights_free(again);
    again = NULL;
    clf_safetensors_close(f1);
    clf_safetensors_close(f2);
    clf_weights_free(orig);
    clf_weights_free(w8);
    clf_test_remove_tmpdir();
}
END_TEST

/* Quantizes in (a tied model, tie_embeddings: all) to int8, tables too when emb, checks which
 * names and dtypes the file has, then that it loads: the table as F32 (bit for bit), or
 * rounded to int8 (within half a step, and moved) with emb. */
static void check_tied_quantized(const char *in, const clf_model_config *mc,
                                 const clf_weights *orig, int emb, const char *table_name,
                                 const char *absent)
{
    const char *q = clf_test_tmp_path("tq.safetensors");
    CLF_ASSERT_OK(
        clf_weights_quantize_file(in, q, CLF_WEIGHT_INT8, emb ? CLF_QUANTIZE_EMBEDDINGS : 0));
    clf_safetensors *f = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(q, &f));
    const clf_tensor *t = clf_safetensors_find(f, table_name);
    ck_assert_msg(t != NULL, "%s: no '%s'", in, table_name);
    ck_assert_int_eq(t->dtype, emb ? CLF_I8 : CLF_F32);
    ck_assert_msg(!clf_safetensors_find(f, absent), "%s: '%s' was written", in, absent);
    ck_assert_int_eq(
        clf_safetensors_find(f, "encoder.layers.0.feed_forward_block.linear_1.weight")->dtype,
        CLF_I8);
    clf_safetensors_close(f);
    clf_weights *r = NULL;
    CLF_ASSERT_OK(clf_weights_load(q, mc, &r));
    const int k = clf_weights_find(orig, "tgt_embed.embedding.weight");
    const int64_t n = clf_weight_spec_numel(&orig->specs[k]);
    if (!emb)
        ck_assert(memcmp(r->data[k], orig->data[k], (size_t)n * sizeof(float)) == 0);
    else {
        float mx = 0;
        for (int64_t e = 0; e < n; e++)
            mx = fmaxf(mx, fabsf(orig->data[k][e]));
        double moved = 0;
        for (int64_t e = 0; e < n; e++) {
            const double d = fabs((double)r->data[k][e] - orig->data[k][e]);
            ck_assert(d <= mx / 127.0 * 0.5 * 1.001);
            moved += d;
        }
        ck_assert(moved > 0);
    }
    clf_weights_free(r);
}

/* A tied model's table under the names other tools write (issue 38): safetensors' save_model
 * keeps only projection_layer.proj.weight, which is then the table and stays F32 as
 * clformer's own tied files keep it (converted with --embeddings); PyTorch's state_dict()
 * also lists tgt_embed.embedding.weight, of which the projection's name is then an exact
 * copy, left out. Each quantized file loads. */
START_TEST(test_quantize_tied_names)
{
    char yaml[1100], wpath[1100];
    snprintf(yaml, sizeof yaml, "%s/save_model_tied_all/model.yaml", CLF_FIXTURES_DIR);
    snprintf(wpath, sizeof wpath, "%s/save_model_tied_all/weights.safetensors", CLF_FIXTURES_DIR);
    clf_test_make_tmpdir("clf-quant");
    clf_config cfg;
    CLF_ASSERT_OK(clf_config_load(yaml, &cfg));
    clf_weights *orig = NULL;
    CLF_ASSERT_OK(clf_weights_load(wpath, &cfg.model, &orig));
    const char *proj = "projection_layer.proj.weight", *tgt = "tgt_embed.embedding.weight";
    for (int emb = 0; emb < 2; emb++)
        check_tied_quantized(wpath, &cfg.model, orig, emb, proj, tgt);

    /* the state_dict() form: tgt_embed and the projection's copy of it */
    clf_tensor *t = NULL;
    CLF_ASSERT_OK(clf_weights_as_tensors(orig, &t));
    clf_tensor *all = calloc((size_t)orig->count + 1, sizeof *all);
    memcpy(all, t, (size_t)orig->count * sizeof *all);
    const int k = clf_weights_find(orig, tgt);
    all[orig->count] = t[k];
    snprintf(all[orig->count].name, sizeof all[orig->count].name, "%s", proj);
    const char *sd = clf_test_tmp_path("sd.safetensors");
    CLF_ASSERT_OK(clf_safetensors_write(sd, all, orig->count + 1, NULL, 0));
    for (int emb = 0; emb < 2; emb++)
        check_tied_quantized(sd, &cfg.model, orig, emb, tgt, proj);
    free(all);
    free(t);
    clf_weights_free(orig);
    clf_test_remove_tmpdir();
}
END_TEST

/* The int8 file gives the logits of the F32 file quantized at load, bit for bit. */
START_TEST(test_quantized_file_equals_load_time_quantization)
{
    quant_fixture f;
    fixture_open(&f);
    const char *q = clf_test_tmp_path("q.safetensors");
    CLF_ASSERT_OK(clf_weights_quantize_file(f.wpath, q, CLF_WEIGHT_INT8, 0));
    float out[2][2 * 5 * 64];
    const int32_t src[2 * 6] = {2, 5, 6, 7, 8, 3, 2, 9, 10, 11, 3, 1};
    const int32_t tgt[2 * 5] = {2, 4, 5, 6, 7, 2, 8, 9, 10, 11};
    ck_assert_int_le(f.cfg.model.tgt_vocab, 64);
    for (int k = 0; k < 2; k++) {
        clf_weights *w = NULL;
        clf_model *m = NULL;
        CLF_ASSERT_OK(clf_weights_load(k ? q : f.wpath, &f.cfg.model, &w));
        CLF_ASSERT_OK(clf_model_create(&f.cfg.model, w, clf_test_api, clf_test_be, &m));
        CLF_ASSERT_OK(clf_model_set_weight_type(m, CLF_WEIGHT_INT8));
        clf_forward_io fio = {
            .batch = 2, .src_len = 6, .tgt_len = 5, .src = src, .tgt = tgt, .logits = out[k]};
        CLF_ASSERT_OK(clf_model_forward(m, &fio));
        clf_model_free(m);
        clf_weights_free(w);
    }
    ck_assert(memcmp(out[0], out[1], sizeof(float) * 2 * 5 * (size_t)f.cfg.model.tgt_vocab) == 0);
    clf_test_remove_tmpdir();
}
END_TEST

/* An inference model from path, loaded (clf_weights_load) or mapped (clf_weights_map), with
 * weight type type; its logits on a fixed batch into out ([2, 5, V]). */
static void inference_logits(const quant_fixture *f, const char *path, int mapped,
                             clf_weight_type type, float *out)
{
    const int32_t src[2 * 6] = {2, 5, 6, 7, 8, 3, 2, 9, 10, 11, 3, 1};
    const int32_t tgt[2 * 5] = {2, 4, 5, 6, 7, 2, 8, 9, 10, 11};
    clf_weights *w = NULL;
    clf_model *m = NULL;
    if (mapped)
        CLF_ASSERT_OK(clf_weights_map(path, &f->cfg.model, &w));
    else
        CLF_ASSERT_OK(clf_weights_load(path, &f->cfg.model, &w));
    CLF_ASSERT_OK(clf_model_create_inference(&f->cfg.model, &w, clf_test_api, clf_test_be, 1, &type,
                                             NULL, 0, &m));
    ck_assert_ptr_null(w);
    clf_forward_io fio = {
        .batch = 2, .src_len = 6, .tgt_len = 5, .src = src, .tgt = tgt, .logits = out};
    CLF_ASSERT_OK(clf_model_forward(m, &fio));
    clf_model_free(m);
}

/* A model made from mapped weights (translate's and serve's way: int8's matrices quantized
 * from the file, never uploaded as F32; the rest converted a block at a time) gives the
 * logits of one made from loaded weights, bit for bit: from an F32 and an int8 file, with
 * each weight type. */
START_TEST(test_mapped_weights_equal_loaded)
{
    quant_fixture f;
    fixture_open(&f);
    const char *q = clf_test_tmp_path("q.safetensors");
    CLF_ASSERT_OK(clf_weights_quantize_file(f.wpath, q, CLF_WEIGHT_INT8, 0));
    const size_t n = 2 * 5 * (size_t)f.cfg.model.tgt_vocab;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    static const clf_weight_type types[3] = {CLF_WEIGHT_F32, CLF_WEIGHT_F16, CLF_WEIGHT_INT8};
    for (int file = 0; file < 2; file++)
        for (int t = 0; t < 3; t++) {
            inference_logits(&f, file ? q : f.wpath, 0, types[t], a);
            inference_logits(&f, file ? q : f.wpath, 1, types[t], b);
            ck_assert_msg(memcmp(a, b, n * sizeof *a) == 0, "%s file, %s weights: mapped != loaded",
                          file ? "int8" : "F32", clf_weight_type_name(types[t]));
        }
    free(a);
    free(b);
    clf_test_remove_tmpdir();
}
END_TEST

/* Writes the tensors of the int8 file src with tensor `name` changed by edit to dst. */
typedef void (*tensor_edit)(clf_tensor *t, void *scratch);

static void write_edited(const char *src, const char *dst, const char *name, tensor_edit edit,
                         int drop)
{
    clf_safetensors *f = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(src, &f));
    const int n = clf_safetensors_count(f);
    clf_tensor *ts = calloc((size_t)n, sizeof *ts);
    static unsigned char scratch[1 << 16];
    int k = 0;
    for (int i = 0; i < n; i++) {
        const clf_tensor *t = clf_safetensors_at(f, i);
        if (strcmp(t->name, name) == 0) {
            if (drop)
                continue;
            ts[k] = *t;
            edit(&ts[k++], scratch);
            continue;
        }
        ts[k++] = *t;
    }
    const char *meta[2] = {CLF_WEIGHT_TYPE_META, "int8"};
    CLF_ASSERT_OK(clf_safetensors_write(dst, ts, k, meta, 1));
    free(ts);
    clf_safetensors_close(f);
}

static void shorter(clf_tensor *t, void *scratch)
{
    (void)scratch;
    t->shape[0] -= 1;
    t->nbytes -= 4;
}

static void as_f16(clf_tensor *t, void *scratch)
{
    uint16_t *h = scratch;
    for (int64_t i = 0; i < t->shape[0]; i++) {
        float x;
        memcpy(&x, (const char *)t->data + 4 * i, 4);
        h[i] = clf_float_to_half(x);
    }
    t->dtype = CLF_F16;
    t->data = h;
    t->nbytes /= 2;
}

static void negative_first(clf_tensor *t, void *scratch)
{
    memcpy(scratch, t->data, t->nbytes);
    const float neg = -1.0f;
    memcpy(scratch, &neg, 4);
    t->data = scratch;
}

static void expect_message(const char *tensor, const char *why)
{
    const char *e = clf_last_error();
    ck_assert_msg(strstr(e, tensor) != NULL, "message does not name '%s': %s", tensor, e);
    ck_assert_msg(strstr(e, why) != NULL, "message does not say '%s': %s", why, e);
    ck_assert_ptr_null(strchr(e, '\n'));
}

/* Refused at load, and by the mapped way: at the mapping, or (a value) when the int8
 * inference model is made from it. */
static void expect_refused(const char *path, const clf_model_config *mc, const char *tensor,
                           const char *why)
{
    clf_weights *w = NULL;
    ck_assert_int_eq(clf_weights_load(path, mc, &w), CLF_ERR_INPUT);
    ck_assert_ptr_null(w);
    expect_message(tensor, why);
    if (clf_weights_map(path, mc, &w) == CLF_OK) {
        clf_weight_type type = CLF_WEIGHT_INT8;
        clf_model *m = NULL;
        ck_assert_int_eq(
            clf_model_create_inference(mc, &w, clf_test_api, clf_test_be, 1, &type, NULL, 0, &m),
            CLF_ERR_INPUT);
        ck_assert_ptr_null(m);
    }
    ck_assert_ptr_null(w);
    expect_message(tensor, why);
}

START_TEST(test_hostile_quantized_files)
{
    quant_fixture f;
    fixture_open(&f);
    const char *q = clf_test_tmp_path("q.safetensors"), *bad = clf_test_tmp_path("bad.safetensors");
    CLF_ASSERT_OK(clf_weights_quantize_file(f.wpath, q, CLF_WEIGHT_INT8, 0));
    const char *sname = "decoder.layers.1.feed_forward_block.linear_2.weight.scale";

    write_edited(q, bad, sname, shorter, 0);
    expect_refused(bad, &f.cfg.model, sname, "has shape");
    write_edited(q, bad, sname, as_f16, 0);
    expect_refused(bad, &f.cfg.model, sname, "F16");
    write_edited(q, bad, sname, NULL, 1);
    expect_refused(bad, &f.cfg.model, sname, "missing");
    write_edited(q, bad, sname, negative_first, 0);
    expect_refused(bad, &f.cfg.model, sname, ">= 0");

    /* truncated: the data section cut short */
    size_t len = 0;
    char *bytes = clf_test_read_file(q, &len);
    FILE *fp = fopen(bad, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(bytes, 1, len - 100, fp), len - 100);
    fclose(fp);
    free(bytes);
    clf_weights *w = NULL;
    ck_assert_int_eq(clf_weights_load(bad, &f.cfg.model, &w), CLF_ERR_INPUT);
    ck_assert_ptr_null(strchr(clf_last_error(), '\n'));
    ck_assert_msg(strstr(clf_last_error(), "'") != NULL, "no tensor named: %s", clf_last_error());
    clf_test_remove_tmpdir();
}
END_TEST

/* A value F16, BF16 or int8 cannot hold: the message says which cause it is, a non-finite
 * value in the source weights (broken) or a finite one beyond the type's range (F32 holds
 * it), in clformer quantize and when a model converts its weights. */
START_TEST(test_unfit_value_messages)
{
    quant_fixture f;
    fixture_open(&f);
    const char *name = "decoder.layers.1.feed_forward_block.linear_2.weight";
    const char *p = clf_test_tmp_path("w.safetensors"), *q = clf_test_tmp_path("q.safetensors");
    const char *nonfinite = "is NaN: the weights hold a non-finite value (a broken model, not "
                            "a value beyond %s's range)";
    const char *beyond = "is %s, beyond %s's range (|x| < %s): use F32 weights for this model";
    const struct {
        float x;
        clf_weight_type type;
        const char *dt, *shown, *bound; /* shown NULL: the non-finite message */
    } cases[] = {
        {NAN, CLF_WEIGHT_F16, "F16", NULL, NULL},
        {NAN, CLF_WEIGHT_BF16, "BF16", NULL, NULL},
        {NAN, CLF_WEIGHT_INT8, "I8", NULL, NULL},
        {1e6f, CLF_WEIGHT_F16, "F16", "1e+06", "65520"},
        {FLT_MAX, CLF_WEIGHT_BF16, "BF16", "3.40282e+38", "3.39618e+38"},
    };
    char why[256], want[1536];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        clf_weights *w = NULL;
        clf_model *m = NULL;
        CLF_ASSERT_OK(clf_weights_load(f.wpath, &f.cfg.model, &w));
        const int k = clf_weights_find(w, name);
        ck_assert_int_ge(k, 0);
        w->data[k][3] = cases[c].x;
        if (cases[c].shown)
            snprintf(why, sizeof why, beyond, cases[c].shown, cases[c].dt, cases[c].bound);
        else
            snprintf(why, sizeof why, nonfinite, cases[c].dt);
        /* clformer quantize */
        CLF_ASSERT_OK(clf_weights_save(w, p, NULL, 0));
        ck_assert_int_eq(clf_weights_quantize_file(p, q, cases[c].type, 0), CLF_ERR_INPUT);
        snprintf(want, sizeof want, "%s: tensor '%s' element 3 %s", p, name, why);
        ck_assert_str_eq(clf_last_error(), want);
        /* a model converting the weights it holds */
        CLF_ASSERT_OK(clf_model_create(&f.cfg.model, w, clf_test_api, clf_test_be, &m));
        ck_assert_int_eq(clf_model_set_weight_type(m, cases[c].type), CLF_ERR_INPUT);
        snprintf(want, sizeof want, "weights: '%s' element 3 %s", name, why);
        ck_assert_str_eq(clf_last_error(), want);
        clf_model_free(m);
        clf_weights_free(w);
    }
    clf_test_remove_tmpdir();
}
END_TEST

/* The CLI: quantize, then translate-free checks of the flags through forward. */
START_TEST(test_cli_quantize_and_weight_type)
{
    char args[4096], err[4096];
    quant_fixture f;
    fixture_open(&f);
    const char *q = clf_test_tmp_path("q.safetensors");
    snprintf(args, sizeof args, "quantize -w %s -o %s --type int8", f.wpath, q);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "quantize -w %s -o %s --type int4", f.wpath, q);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "int4"));
    char io[1024];
    snprintf(io, sizeof io, "%s/pre_standard_bias/io.safetensors", CLF_FIXTURES_DIR);
    snprintf(args, sizeof args, "forward -c %s -w %s -i %s -o %s --weight-type f8", f.yaml, q, io,
             clf_test_tmp_path("out.safetensors"));
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "--weight-type"));
    snprintf(args, sizeof args, "forward -c %s -w %s -i %s -o %s", f.yaml, q, io,
             clf_test_tmp_path("out.safetensors"));
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 0);
    clf_test_remove_tmpdir();
}
END_TEST

/* clf_quantize_rows_i8 against the rule written out here in scalar code (libm's lrintf:
 * ties to even): the same scales and values, exactly, on random rows of several widths
 * and scales, exact ties, a zero row, subnormal values; the first non-finite value's
 * index where a row holds one. */
static float ref_requantized(float s)
{
    volatile float max = 127.0f * s;
    return max / 127.0f;
}

START_TEST(test_quantize_rows_against_lrintf)
{
    static const int widths[] = {1, 7, 33, 64, 1000, 1024};
    static const float mags[] = {1e-3f, 0.37f, 1.0f, 127.0f, 3e4f};
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        const int k = widths[wi], rows = 8;
        float *w = malloc((size_t)rows * k * sizeof *w), sc[8];
        int8_t *q = malloc((size_t)rows * k);
        for (size_t mi = 0; mi < sizeof mags / sizeof mags[0]; mi++) {
            clf_test_fill(w, (size_t)rows * k, 300 + (unsigned)(wi * 7 + mi), -mags[mi], mags[mi]);
            for (int p = 0; p < k; p++) {
                w[(size_t)1 * k + p] = (float)(p % 255) - 127.0f + (p % 2 ? 0.5f : 0.0f); /* ties */
                w[(size_t)2 * k + p] = 0.0f;                        /* zeros */
                w[(size_t)3 * k + p] = (float)(p % 5 - 2) * 1e-40f; /* subnormal */
            }
            w[(size_t)1 * k] = 127.0f; /* scale 1 exactly: x.5 are ties */
            ck_assert_int_eq(clf_quantize_rows_i8(w, rows, k, q, sc), -1);
            for (int r = 0; r < rows; r++) {
                const float *x = w + (size_t)r * k;
                float amax = 0.0f;
                for (int p = 0; p < k; p++)
                    amax = fabsf(x[p]) > amax ? fabsf(x[p]) : amax;
                float s = amax / 127.0f;
                for (int it = 0; it < 4 && s != ref_requantized(s); it++)
                    s = ref_requantized(s);
                ck_assert_msg(memcmp(&s, &sc[r], sizeof s) == 0, "k=%d row %d: scale %a, want %a",
                              k, r, (double)sc[r], (double)s);
                for (int p = 0; p < k; p++) {
                    long v = s > 0.0f ? lrintf(x[p] / s) : 0;
                    v = v > 127 ? 127 : v < -127 ? -127 : v;
                    ck_assert_msg(q[(size_t)r * k + p] == v,
                                  "k=%d mag %g row %d col %d: %d, want %ld", k, (double)mags[mi], r,
                                  p, q[(size_t)r * k + p], v);
                }
            }
        }
        /* the first non-finite value, counted over the whole matrix */
        clf_test_fill(w, (size_t)rows * k, 400 + (unsigned)wi, -1, 1);
        w[(size_t)5 * k + k / 2] = NAN;
        w[(size_t)6 * k] = INFINITY;
        ck_assert_int_eq(clf_quantize_rows_i8(w, rows, k, q, sc), 5 * k + k / 2);
        w[(size_t)5 * k + k / 2] = -INFINITY;
        ck_assert_int_eq(clf_quantize_rows_i8(w, rows, k, q, sc), 5 * k + k / 2);
        free(w), free(q);
    }
}
END_TEST

static void add_tests(TCase *tc)
{
    tcase_add_test(tc, test_weight_types_against_f32);
    tcase_add_test(tc, test_unsupported_type_refused);
}

static void cpu_only(TCase *tc)
{
    tcase_add_test(tc, test_cpu_gemm_i8);
    tcase_add_test(tc, test_cpu_gemm_i8_bounds);
    tcase_add_test(tc, test_cpu_gemm_i8_vnni_equals_onednn);
    tcase_add_test(tc, test_cpu_gemm_i8_same_bits_every_level);
    tcase_add_test(tc, test_cpu_gemm_i8_igemm_equals_matmul);
    tcase_add_test(tc, test_cpu_gemm_i8_packed_in_place);
    tcase_add_test(tc, test_quantized_file_equals_load_time_quantization);
    tcase_add_test(tc, test_mapped_weights_equal_loaded);
    tcase_add_test(tc, test_quantize_round_trip);
    tcase_add_test(tc, test_quantize_rows_against_lrintf);
    tcase_add_test(tc, test_quantize_tied_names);
    tcase_add_test(tc, test_hostile_quantized_files);
    tcase_add_test(tc, test_unfit_value_messages);
    tcase_add_test(tc, test_cli_quantize_and_weight_type);
}

int main(void)
{
    return clf_test_backends_main("quant", add_tests, cpu_only, NULL);
}
