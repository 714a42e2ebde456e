/* The CPU backend's int8 product (clf_gemm_args.b_i8) on NLLB-600M's shapes and few rows,
 * timed for each backend directory given, in turn, ROUNDS times: two builds compared in one
 * run (say the one before a kernel change and the one after). Best of REPS calls a shape;
 * microseconds and GOPS (2 m n k). With build a Release build of the repository:
 *
 *   cc -O2 -Icore/include -o /tmp/bench_gemm_int8_backends bench/gemm_int8_backends.c \
 *      -Lbuild/lib -lclformer -Wl,-rpath,$PWD/build/lib
 *   /tmp/bench_gemm_int8_backends OLD/build/lib/clformer build/lib/clformer
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clformer/backend.h"
#include "clformer/status.h"

#define ROUNDS 2
#define REPS   20

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const int shapes[][3] = {/* m, n, k: packed QKV, the FFN's second, the output layer */
                                {1, 3072, 1024},  {1, 1024, 4096},   {1, 65536, 1024},
                                {2, 3072, 1024},  {4, 3072, 1024},   {4, 1024, 4096},
                                {4, 65536, 1024}, {8, 3072, 1024},   {8, 1024, 4096},
                                {8, 65536, 1024}, {12, 3072, 1024},  {16, 3072, 1024},
                                {16, 1024, 4096}, {16, 65536, 1024}, {24, 3072, 1024},
                                {24, 1024, 4096}, {32, 65536, 1024}, {128, 65536, 1024}};

static void die(const char *what)
{
    fprintf(stderr, "bench_gemm_int8_backends: %s: %s\n", what, clf_last_error());
    exit(1);
}

static clf_buffer *up(const clf_backend_api *api, clf_backend *be, const void *host, size_t n)
{
    clf_buffer *b = NULL;
    if (api->alloc(be, n, &b) != CLF_OK || api->upload(be, (clf_ptr){b, 0}, host, n) != CLF_OK)
        die("upload");
    return b;
}

/* Best microseconds of REPS products m x n x k on backend dir's CPU backend, per shape. */
static void time_backend(const char *dir, double *us)
{
    const clf_backend_api *api;
    clf_backend *be;
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .threads = 2};
    if (clf_backend_load("cpu", dir, &api) != CLF_OK || api->open(&o, &be) != CLF_OK)
        die(dir);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        const size_t nk = (size_t)n * k;
        float *A = malloc((size_t)m * k * sizeof *A);
        int8_t *q = malloc(nk);
        unsigned char *pairs = malloc((size_t)n * 8);
        for (size_t e = 0; e < (size_t)m * k; e++)
            A[e] = (float)((e * 7) % 17) * 0.1f - 0.8f;
        for (size_t e = 0; e < nk; e++)
            q[e] = (int8_t)((int)((e * 13) % 255) - 127);
        for (int j = 0; j < n; j++) {
            const float sc = 0.01f;
            const int32_t sum = 0;
            memcpy(pairs + 8 * j, &sc, 4);
            memcpy(pairs + 8 * j + 4, &sum, 4);
        }
        clf_buffer *bA = up(api, be, A, (size_t)m * k * 4), *bQ = up(api, be, q, nk),
                   *bS = up(api, be, pairs, (size_t)n * 8), *bC = NULL;
        if (api->alloc(be, (size_t)m * n * 4, &bC) != CLF_OK)
            die("alloc");
        clf_gemm_args g = {.trans_b = 1,
                           .m = m,
                           .n = n,
                           .k = k,
                           .alpha = 1.0f,
                           .a = {bA, 0},
                           .lda = k,
                           .b = {bQ, 0},
                           .ldb = k,
                           .c = {bC, 0},
                           .ldc = n,
                           .b_i8 = {bQ, 0},
                           .b_scale = {bS, 0}};
        double best = 1e30;
        for (int r = 0; r < REPS; r++) {
            const double t0 = now();
            if (api->gemm(be, &g) != CLF_OK)
                die("gemm");
            const double t = now() - t0;
            best = t < best ? t : best;
        }
        us[s] = best * 1e6;
        api->free(be, bA);
        api->free(be, bQ);
        api->free(be, bS);
        api->free(be, bC);
        free(A);
        free(q);
        free(pairs);
    }
    api->close(be);
}

int main(int argc, char **argv)
{
    enum { NS = sizeof shapes / sizeof shapes[0] };
    if (argc < 2) {
        fprintf(stderr, "usage: bench_gemm_int8_backends BACKEND_DIR...\n");
        return 2;
    }
    static double us[ROUNDS][8][NS];
    const int nb = argc - 1 < 8 ? argc - 1 : 8;
    for (int r = 0; r < ROUNDS; r++)
        for (int b = 0; b < nb; b++)
            time_backend(argv[1 + b], us[r][b]);
    printf("best of %d products, us (GOPS), 2 threads; round by round, backends in turn\n", REPS);
    for (int b = 0; b < nb; b++)
        printf("backend %d: %s\n", b, argv[1 + b]);
    for (size_t s = 0; s < NS; s++) {
        const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        printf("m=%2d n=%5d k=%4d", m, n, k);
        for (int r = 0; r < ROUNDS; r++)
            for (int b = 0; b < nb; b++)
                printf("  %9.1f (%5.0f)", us[r][b][s], 2.0 * m * n * k / us[r][b][s] * 1e-3);
        if (nb == 2)
            printf("  0/1: %.2f %.2f", us[0][0][s] / us[0][1][s],
                   us[ROUNDS - 1][0][s] / us[ROUNDS - 1][1][s]);
        printf("\n");
    }
    return 0;
}
