/* The products of a linear layer, C[m, n] = A[m, k] W^T with W [n, k], on the model's shapes
 * (base model: d 512, d_ff 2048, vocabulary 8000; m = 1, 4 rows of decoding at batch 1 or a
 * small beam, 32 and 128 rows of decoding at batch 32 greedy and beam 4), five ways:
 *
 *   f32     the cpu backend's F32 product: its own few-row kernel up to 12 rows on AVX2
 *           (cpu_gemv.c), else OpenBLAS SGEMM (SGEMV blocks for m <= 7)
 *   int8    the cpu backend's int8 product (b_i8): activations quantized per row, its own
 *           AVX2 kernel up to 24 rows, else oneDNN's u8 x s8 -> s32 matmul, the scale
 *           epilogue (backends/cpu/cpu_gemm_i8.c)
 *   own8    the alternative to oneDNN: the same quantization and epilogue around a
 *           hand-written AVX2 kernel (vpmaddubsw + vpmaddwd, 4 x 2 register tiles, W padded
 *           to 32 columns once, as a stored format would be), OpenMP over output columns
 *   bf16    the cpu backend's BF16 product (b_bf16; read for m <= 7 only, else = f32)
 *   dnnl32  oneDNN's own F32 matmul, to see whether OpenBLAS should stay for F32
 *
 * Each matrix exists MATRICES times (so that m = 1 reads W from memory, as a decoding step
 * does); a pass runs all of them; the paths take turns pass by pass (interleaved), each
 * timed REPS times per round, 3 rounds; the table has the median of the 3 rounds' best.
 * With build a Release build of the repository:
 *
 *   cc -O2 -mavx2 -fopenmp -Icore/include -o /tmp/bench_gemm_int8 bench/gemm_int8.c \
 *      -Lbuild/lib -lclformer -ldnnl -lm -Wl,-rpath,$PWD/build/lib
 *   /tmp/bench_gemm_int8 build/lib/clformer [threads [cpu]]
 */
#include <dnnl.h>
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clformer/backend.h"
#include "clformer/tensor.h"

#define MATRICES 8
#define REPS     5
#define ROUNDS   3

/* CLOCK_MONOTONIC, or with "cpu" as the third argument the process's CPU time: on a
 * machine shared with other busy processes (load above the core count) wall time measures
 * the neighbours; with 1 thread the CPU time is the work of the one thread that does it. */
static clockid_t clock_id = CLOCK_MONOTONIC;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const clf_backend_api *api;
static clf_backend *be;
static int threads = 2;

static void die(const char *what)
{
    fprintf(stderr, "bench_gemm_int8: %s: %s\n", what, clf_last_error());
    exit(1);
}

static clf_buffer *up(const void *host, size_t bytes)
{
    clf_buffer *b = NULL;
    if (api->alloc(be, bytes, &b) != CLF_OK || api->upload(be, (clf_ptr){b, 0}, host, bytes))
        die("alloc");
    return b;
}

/* ---- the hand-written alternative ---- */

typedef struct own_w {
    int n, k, kp; /* kp: k rounded up to 32 */
    int8_t *q;    /* [n, kp], zero padded */
    float *scale; /* [n] */
    int32_t *sum; /* [n] */
} own_w;

__attribute__((target("avx2"))) static inline int32_t hsum8(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* acc[i][j] = sum_p ua[i0+i, p] q[j0+j, p] for MR rows of A and 2 rows of W */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
own_tile(const uint8_t *ua, int kp, const int8_t *q, int i0, int j0, const int MR, int32_t *out)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc[4][2];
    for (int i = 0; i < MR; i++)
        acc[i][0] = acc[i][1] = _mm256_setzero_si256();
    const uint8_t *a = ua + (size_t)i0 * kp;
    const int8_t *w0 = q + (size_t)j0 * kp, *w1 = w0 + kp;
    for (int p = 0; p < kp; p += 32) {
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)(w0 + p));
        const __m256i b1 = _mm256_loadu_si256((const __m256i *)(w1 + p));
        for (int i = 0; i < MR; i++) {
            const __m256i x = _mm256_loadu_si256((const __m256i *)(a + (size_t)i * kp + p));
            acc[i][0] =
                _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(_mm256_maddubs_epi16(x, b0), ones));
            acc[i][1] =
                _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(_mm256_maddubs_epi16(x, b1), ones));
        }
    }
    for (int i = 0; i < MR; i++) {
        out[2 * i] = hsum8(acc[i][0]);
        out[2 * i + 1] = hsum8(acc[i][1]);
    }
}

static void own_gemm(const own_w *w, const float *A, int m, float *C, uint8_t *ua, float *sa)
{
    const int kp = w->kp, k = w->k, n = w->n;
    /* activations: 7 bits and an offset of 64, as the backend does without VNNI */
    for (int i = 0; i < m; i++) {
        const float *x = A + (size_t)i * k;
        float amax = 0.0f;
        for (int p = 0; p < k; p++)
            amax = fabsf(x[p]) > amax ? fabsf(x[p]) : amax;
        const float inv = amax > 0 ? 64.0f / amax : 0.0f;
        sa[i] = amax / 64.0f;
        for (int p = 0; p < k; p++)
            ua[(size_t)i * kp + p] = (uint8_t)(lrintf(x[p] * inv) + 64);
        for (int p = k; p < kp; p++)
            ua[(size_t)i * kp + p] = 64; /* times the zero padding of W */
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int j0 = 0; j0 < n; j0 += 2) {
        int32_t t[8];
        int i0 = 0;
        for (; i0 + 4 <= m; i0 += 4) {
            own_tile(ua, kp, w->q, i0, j0, 4, t);
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 2; j++)
                    C[(size_t)(i0 + i) * n + j0 + j] =
                        sa[i0 + i] * w->scale[j0 + j] * (float)(t[2 * i + j] - 64 * w->sum[j0 + j]);
        }
        for (; i0 < m; i0++) {
            own_tile(ua, kp, w->q, i0, j0, 1, t);
            for (int j = 0; j < 2; j++)
                C[(size_t)i0 * n + j0 + j] =
                    sa[i0] * w->scale[j0 + j] * (float)(t[j] - 64 * w->sum[j0 + j]);
        }
    }
}

/* ---- oneDNN F32 ---- */

typedef struct dnnl32 {
    dnnl_engine_t eng;
    dnnl_stream_t str;
    dnnl_primitive_t prim;
    dnnl_memory_t a, w, c;
} dnnl32;

static void dnnl32_make(dnnl32 *d, int m, int n, int k)
{
    dnnl_memory_desc_t ma, mw, mc;
    dnnl_dims_t da = {m, k}, sa = {k, 1}, dw = {k, n}, sw = {1, k}, dc = {m, n}, sc = {n, 1};
    dnnl_matmul_desc_t mm;
    dnnl_primitive_desc_t pd;
    if (dnnl_memory_desc_init_by_strides(&ma, 2, da, dnnl_f32, sa) ||
        dnnl_memory_desc_init_by_strides(&mw, 2, dw, dnnl_f32, sw) ||
        dnnl_memory_desc_init_by_strides(&mc, 2, dc, dnnl_f32, sc) ||
        dnnl_matmul_desc_init(&mm, &ma, &mw, NULL, &mc) ||
        dnnl_primitive_desc_create(&pd, &mm, NULL, d->eng, NULL) ||
        dnnl_primitive_create(&d->prim, pd) ||
        dnnl_memory_create(&d->a, &ma, d->eng, DNNL_MEMORY_NONE) ||
        dnnl_memory_create(&d->w, &mw, d->eng, DNNL_MEMORY_NONE) ||
        dnnl_memory_create(&d->c, &mc, d->eng, DNNL_MEMORY_NONE)) {
        fprintf(stderr, "bench_gemm_int8: oneDNN F32 matmul\n");
        exit(1);
    }
    dnnl_primitive_desc_destroy(pd);
}

static void dnnl32_free(dnnl32 *d)
{
    dnnl_memory_destroy(d->a);
    dnnl_memory_destroy(d->w);
    dnnl_memory_destroy(d->c);
    dnnl_primitive_destroy(d->prim);
}

/* ---- the table ---- */

enum { P_F32, P_INT8, P_OWN8, P_BF16, P_DNNL32, NPATHS };

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_gemm_int8 BACKEND_DIR [threads]\n");
        return 2;
    }
    threads = argc > 2 ? atoi(argv[2]) : 2;
    if (argc > 3 && strcmp(argv[3], "cpu") == 0)
        clock_id = CLOCK_PROCESS_CPUTIME_ID;
    omp_set_num_threads(threads);
    clf_backend_opts opts = {.abi_version = CLF_BACKEND_ABI, .threads = threads};
    if (clf_backend_load("cpu", argv[1], &api) != CLF_OK || api->open(&opts, &be) != CLF_OK)
        die("cpu backend");
    char desc[512];
    api->describe(be, desc, sizeof desc);
    printf(
        "%s; %s time\n%d matrices per pass, %d rounds of %d interleaved passes per path; median of "
        "the rounds' best, us per product\n",
        desc, clock_id == CLOCK_MONOTONIC ? "wall" : "process CPU", MATRICES, ROUNDS, REPS);
    dnnl32 d = {0};
    if (dnnl_engine_create(&d.eng, dnnl_cpu, 0) ||
        dnnl_stream_create(&d.str, d.eng, dnnl_stream_default_flags))
        return 1;
    const int shapes[][2] = {{1536, 512}, {512, 512}, {2048, 512}, {512, 2048}, {8000, 512}};
    const int rows[] = {1, 4, 32, 128};
    printf("%-12s %4s %9s %9s %9s %9s %9s  %6s %6s %6s\n", "W [n,k]", "m", "f32", "int8", "own8",
           "bf16", "dnnl32", "f32/i8", "own/i8", "f32/dn");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int n = shapes[s][0], k = shapes[s][1], kp = (k + 31) / 32 * 32;
        const size_t nk = (size_t)n * k;
        clf_buffer *b32[MATRICES], *b16[MATRICES], *b8[MATRICES], *bsc[MATRICES];
        own_w own[MATRICES];
        float *whost[MATRICES]; /* dnnl32 reads these: the same values as b32 */
        float *w = malloc(nk * sizeof(float)), *sc = malloc((size_t)n * sizeof(float));
        int8_t *q = malloc(nk);
        uint16_t *h = malloc(nk * 2);
        unsigned char *pairs = malloc((size_t)n * 8);
        for (int mi = 0; mi < MATRICES; mi++) {
            for (size_t e = 0; e < nk; e++)
                w[e] = (float)((e * 7 + (size_t)mi * 3) % 101) * 0.001f - 0.05f;
            clf_quantize_rows_i8(w, n, k, q, sc);
            own[mi] = (own_w){
                n, k, kp, calloc((size_t)n * kp, 1), malloc((size_t)n * 4), malloc((size_t)n * 4)};
            for (int j = 0; j < n; j++) {
                int32_t sum = 0;
                for (int p = 0; p < k; p++) {
                    sum += q[(size_t)j * k + p];
                    own[mi].q[(size_t)j * kp + p] = q[(size_t)j * k + p];
                }
                own[mi].scale[j] = sc[j];
                own[mi].sum[j] = sum;
                memcpy(pairs + 8 * j, &sc[j], 4);
                memcpy(pairs + 8 * j + 4, &sum, 4);
            }
            for (size_t e = 0; e < nk; e++)
                h[e] = clf_float_to_bf16(w[e]);
            b32[mi] = up(w, nk * 4);
            whost[mi] = malloc(nk * 4);
            memcpy(whost[mi], w, nk * 4);
            b16[mi] = up(h, nk * 2);
            b8[mi] = up(q, nk);
            bsc[mi] = up(pairs, (size_t)n * 8);
        }
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
            const int m = rows[r];
            float *a = malloc((size_t)m * k * 4), *c = malloc((size_t)m * n * 4);
            uint8_t *ua = malloc((size_t)m * kp);
            float *sa = malloc((size_t)m * 4);
            for (size_t e = 0; e < (size_t)m * k; e++)
                a[e] = (float)(e % 17) * 0.1f - 0.8f;
            clf_buffer *ba = up(a, (size_t)m * k * 4), *bc = up(c, (size_t)m * n * 4);
            dnnl32_make(&d, m, n, k);
            double best[ROUNDS][NPATHS];
            for (int round = 0; round < ROUNDS; round++) {
                for (int p = 0; p < NPATHS; p++)
                    best[round][p] = 1e30;
                for (int rep = 0; rep < REPS + 1; rep++)
                    for (int p = 0; p < NPATHS; p++) {
                        double t0 = now_s();
                        for (int mi = 0; mi < MATRICES; mi++) {
                            clf_gemm_args g = {.trans_b = 1,
                                               .m = m,
                                               .n = n,
                                               .k = k,
                                               .alpha = 1.0f,
                                               .a = {ba, 0},
                                               .lda = k,
                                               .b = {b32[mi], 0},
                                               .ldb = k,
                                               .c = {bc, 0},
                                               .ldc = n};
                            if (p == P_INT8) {
                                g.b_i8 = (clf_ptr){b8[mi], 0};
                                g.b_scale = (clf_ptr){bsc[mi], 0};
                            }
                            if (p == P_BF16)
                                g.b_bf16 = (clf_ptr){b16[mi], 0};
                            if (p == P_OWN8) {
                                own_gemm(&own[mi], a, m, c, ua, sa);
                            } else if (p == P_DNNL32) {
                                dnnl_memory_set_data_handle(d.a, a);
                                dnnl_memory_set_data_handle(d.w, whost[mi]);
                                dnnl_memory_set_data_handle(d.c, c);
                                dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, d.a},
                                                           {DNNL_ARG_WEIGHTS, d.w},
                                                           {DNNL_ARG_DST, d.c}};
                                dnnl_primitive_execute(d.prim, d.str, 3, args);
                                dnnl_stream_wait(d.str);
                            } else if (api->gemm(be, &g) != CLF_OK) {
                                die("gemm");
                            }
                        }
                        double t = (now_s() - t0) / MATRICES;
                        if (rep > 0 && t < best[round][p])
                            best[round][p] = t;
                    }
            }
            double med[NPATHS];
            for (int p = 0; p < NPATHS; p++) {
                double v[ROUNDS];
                for (int round = 0; round < ROUNDS; round++)
                    v[round] = best[round][p];
                qsort(v, ROUNDS, sizeof v[0], cmp_d);
                med[p] = v[ROUNDS / 2];
            }
            printf("[%4d,%4d]  %4d %9.1f %9.1f %9.1f %9.1f %9.1f  %6.2f %6.2f %6.2f\n", n, k, m,
                   med[P_F32] * 1e6, med[P_INT8] * 1e6, med[P_OWN8] * 1e6, med[P_BF16] * 1e6,
                   med[P_DNNL32] * 1e6, med[P_F32] / med[P_INT8], med[P_OWN8] / med[P_INT8],
                   med[P_F32] / med[P_DNNL32]);
            fflush(stdout);
            dnnl32_free(&d);
            api->free(be, ba);
            api->free(be, bc);
            free(a);
            free(c);
            free(ua);
            free(sa);
        }
        for (int mi = 0; mi < MATRICES; mi++) {
            api->free(be, b32[mi]);
            api->free(be, b16[mi]);
            api->free(be, b8[mi]);
            api->free(be, bsc[mi]);
            free(whost[mi]);
            free(own[mi].q);
            free(own[mi].scale);
            free(own[mi].sum);
        }
        free(w);
        free(sc);
        free(q);
        free(h);
        free(pairs);
    }
    dnnl_stream_destroy(d.str);
    dnnl_engine_destroy(d.eng);
    api->close(be);
    return 0;
}
