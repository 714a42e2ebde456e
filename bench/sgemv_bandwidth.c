/* The F32 limit of batch-1 decoding: how fast OpenBLAS's SGEMV streams weight matrices
 * that do not fit in the caches, and SGEMM with a few rows against the same matrices (what
 * a beam of 4 would cost as one GEMM). bench/gemv_half.c compares both with a plain read
 * of memory and with the CPU backend's F16 kernels.
 *
 *   cc -O2 -o /tmp/sgemv_bandwidth bench/sgemv_bandwidth.c -lopenblas
 *   OPENBLAS_NUM_THREADS=2 /tmp/sgemv_bandwidth [rows cols matrices]   (default 2048 512 40)
 *
 * A decoding step with the KV cache at batch 1 reads every decoder weight once (plus the
 * output projection), so with F32 weights tokens/s can be at most (this rate) / (bytes of
 * those weights);
 * bench/RESULTS.md compares the two. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int rows = argc > 1 ? atoi(argv[1]) : 2048, cols = argc > 2 ? atoi(argv[2]) : 512;
    int count = argc > 3 ? atoi(argv[3]) : 40; /* 40 x 4 MiB: well past any L3 */
    if (rows < 1 || cols < 1 || count < 1) {
        fprintf(stderr, "usage: sgemv_bandwidth [rows cols matrices], all >= 1\n");
        return 2;
    }
    size_t n = (size_t)rows * cols;
    float **w = calloc((size_t)count, sizeof *w);
    float *x = malloc(sizeof(float) * 4 * (size_t)cols), *y = malloc(sizeof(float) * 4 * rows);
    if (!w || !x || !y)
        return 1;
    for (int m = 0; m < count; m++) {
        if (!(w[m] = malloc(sizeof(float) * n)))
            return 1;
        for (size_t i = 0; i < n; i++)
            w[m][i] = (float)((i * 7 + (size_t)m) % 13) * 0.01f;
    }
    for (int i = 0; i < 4 * cols; i++)
        x[i] = (float)(i % 5) * 0.1f;
    const double gb = (double)count * n * sizeof(float) / 1e9;
    printf("%d matrices [%d, %d], %.1f MB in all\n", count, rows, cols, gb * 1e3);
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_s();
        for (int m = 0; m < count; m++) /* y = W x: a linear layer on one row */
            cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, cols, 1.0f, w[m], cols, x, 1, 0.0f, y,
                        1);
        double t_gemv = now_s() - t0;
        t0 = now_s();
        for (int m = 0; m < count; m++) /* Y[4, rows] = X[4, cols] W^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 4, rows, cols, 1.0f, x, cols, w[m],
                        cols, 0.0f, y, rows);
        double t_gemm = now_s() - t0;
        printf("sgemv: %.1f GB/s   sgemm with 4 rows: %.1f GB/s of weights\n", gb / t_gemv,
               gb / t_gemm);
    }
    for (int m = 0; m < count; m++)
        free(w[m]);
    free(w);
    free(x);
    free(y);
    return 0;
}
