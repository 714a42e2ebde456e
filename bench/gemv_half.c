/* Batch-1 decoding's weight reads through the cpu backend: the few-row products
 * C[m, n] = A[m, k] W^T of a linear layer, W [n, k], read from W's F16 copy
 * (clf_gemm_args.b_half, the backend's own kernels) and from W in F32 (the backend's F32
 * path: its own kernel on a CPU with AVX2, OpenBLAS SGEMV with CLF_CPU_ISA=generic).
 * 40 matrices, so that every call reads W from memory, not from a cache. With build-h a
 * Release build of the repository:
 *
 *   cc -O2 -fopenmp -Icore/include -o /tmp/bench_gemv_half bench/gemv_half.c \
 *      -Lbuild-h/lib -lclformer -Wl,-rpath,$PWD/build-h/lib
 *   /tmp/bench_gemv_half build-h/lib/clformer [threads]
 *
 * threads: the backend's and the plain read's (default 2). CLF_CPU_ISA=generic|avx2|avx512
 * caps the F16 kernels. GB/s counts the bytes of W each path reads (2 per weight for F16,
 * 4 for F32), so equal GB/s means F16 takes half the time; "x" is the F32 time over the
 * F16 time. The plain read of the same F16 bytes is the ceiling (on a shared machine it
 * also shows how much of the memory bandwidth the run had). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clformer/backend.h"
#include "clformer/tensor.h"

#define MATRICES 40 /* 40 x 4 MiB of F32 (2 MiB of F16): well past any L3 */
#define REPS     10 /* timed passes over all matrices, twice; the best is reported */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const clf_backend_api *api;
static clf_backend *be;

static clf_buffer *alloc_or_die(size_t bytes)
{
    clf_buffer *b = NULL;
    if (api->alloc(be, bytes, &b) != CLF_OK) {
        fprintf(stderr, "bench_gemv_half: %s\n", clf_last_error());
        exit(1);
    }
    return b;
}

/* One pass of y = x W^T over all matrices, m rows, from F16 (half) or F32: seconds. */
static double pass(int m, int n, int k, clf_buffer **w32, clf_buffer **w16, clf_buffer *x,
                   clf_buffer *y, int half)
{
    double t0 = now_s();
    for (int i = 0; i < MATRICES; i++) {
        clf_gemm_args g = {.trans_b = 1,
                           .m = m,
                           .n = n,
                           .k = k,
                           .alpha = 1.0f,
                           .a = {x, 0},
                           .lda = k,
                           .b = {w32[i], 0},
                           .ldb = k,
                           .c = {y, 0},
                           .ldc = n};
        if (half)
            g.b_half = (clf_ptr){w16[i], 0};
        if (api->gemm(be, &g) != CLF_OK) {
            fprintf(stderr, "bench_gemv_half: %s\n", clf_last_error());
            exit(1);
        }
    }
    return now_s() - t0;
}

/* GB/s of the best of REPS passes summing the words of every matrix (threads threads,
 * a matrix each at a time; four sums, so that the adds keep up with memory). */
static double plain_read(uint16_t **h, size_t elems, int threads)
{
    double best = 1e30;
    uint64_t total = 0;
    for (int rep = 0; rep < REPS + 1; rep++) {
        double t0 = now_s();
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
        for (int i = 0; i < MATRICES; i++) {
            const uint64_t *q = (const uint64_t *)(const void *)h[i];
            uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (size_t e = 0; e + 4 <= elems / 4; e += 4) {
                s0 += q[e];
                s1 += q[e + 1];
                s2 += q[e + 2];
                s3 += q[e + 3];
            }
            total += s0 + s1 + s2 + s3;
        }
        double t = now_s() - t0;
        if (rep > 0 && t < best)
            best = t;
    }
    if (total == 42) /* keeps the sums alive */
        printf(" ");
    return (double)MATRICES * elems * 2 / best / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_gemv_half BACKEND_DIR [threads]\n");
        return 2;
    }
    clf_backend_opts opts = {.abi_version = CLF_BACKEND_ABI,
                             .threads = argc > 2 ? atoi(argv[2]) : 2};
    if (clf_backend_load("cpu", argv[1], &api) != CLF_OK || api->open(&opts, &be) != CLF_OK) {
        fprintf(stderr, "bench_gemv_half: %s\n", clf_last_error());
        return 1;
    }
    char desc[512];
    api->describe(be, desc, sizeof desc);
    const char *core = getenv("OPENBLAS_CORETYPE");
    printf("%s; OPENBLAS_CORETYPE=%s\n", desc, core ? core : "(unset)");
    const int shapes[][2] = {{2048, 512}, {512, 2048}}; /* [n, k]: linear_1 and linear_2 */
    const size_t elems = 2048 * 512;
    clf_buffer *w32[MATRICES], *w16[MATRICES];
    uint16_t *hhost[MATRICES];
    float *host = malloc(sizeof(float) * elems);
    if (!host)
        return 1;
    for (int i = 0; i < MATRICES; i++) {
        if (!(hhost[i] = malloc(sizeof(uint16_t) * elems)))
            return 1;
        for (size_t e = 0; e < elems; e++) {
            host[e] = (float)((e * 7 + (size_t)i) % 13) * 0.01f - 0.06f;
            hhost[i][e] = clf_float_to_half(host[e]);
        }
        w32[i] = alloc_or_die(sizeof(float) * elems);
        w16[i] = alloc_or_die(sizeof(uint16_t) * elems);
        api->upload(be, (clf_ptr){w32[i], 0}, host, sizeof(float) * elems);
        api->upload(be, (clf_ptr){w16[i], 0}, hhost[i], sizeof(uint16_t) * elems);
    }
    clf_buffer *x = alloc_or_die(sizeof(float) * 8 * 2048),
               *y = alloc_or_die(sizeof(float) * 8 * 2048);
    for (int e = 0; e < 8 * 2048; e++)
        host[e] = (float)(e % 5) * 0.1f;
    api->upload(be, (clf_ptr){x, 0}, host, sizeof(float) * 8 * 2048);
    printf("%d matrices per pass, best of 2 x %d passes\n", MATRICES, REPS);
    printf("plain read of the F16 weights, %d threads: %.1f GB/s\n", opts.threads,
           plain_read(hhost, elems, opts.threads));
    printf("%-14s %2s  %12s %8s  %12s %8s  %5s\n", "W [n, k]", "m", "F16 us/call", "GB/s",
           "F32 us/call", "GB/s", "x");
    const int rows[] = {1, 4};
    for (int s = 0; s < 2; s++)
        for (int r = 0; r < 2; r++) {
            int n = shapes[s][0], k = shapes[s][1], m = rows[r];
            /* Each path in a block of passes (pass 0 warms up): OpenMP's threads (F16) and
             * OpenBLAS's (F32) both spin a while after their work, so taking turns pass by
             * pass would make each slow the other. Twice, against a busy neighbour. */
            double t16 = 1e30, t32 = 1e30;
            for (int round = 0; round < 2; round++)
                for (int half = 1; half >= 0; half--)
                    for (int rep = 0; rep < REPS + 1; rep++) {
                        double t = pass(m, n, k, w32, w16, x, y, half), *best = half ? &t16 : &t32;
                        if (rep > 0 && t < *best)
                            *best = t;
                    }
            double w = (double)MATRICES * n * k;
            printf("[%4d, %4d]    %2d  %12.1f %8.1f  %12.1f %8.1f  %5.2f\n", n, k, m,
                   t16 / MATRICES * 1e6, 2 * w / t16 / 1e9, t32 / MATRICES * 1e6, 4 * w / t32 / 1e9,
                   t32 / t16);
        }
    for (int i = 0; i < MATRICES; i++) {
        api->free(be, w32[i]);
        api->free(be, w16[i]);
        free(hhost[i]);
    }
    api->free(be, x);
    api->free(be, y);
    api->close(be);
    free(host);
    return 0;
}
