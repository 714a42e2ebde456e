/* oneDNN's two int8 products on one shape: its matmul primitive with m fixed at creation
 * (brgemm, what the CPU backend runs below CPU_I8_IGEMM_MIN_N weight rows) against the same
 * primitive with m given at run time, which oneDNN 2.6 serves with its igemm (gemm:jit,
 * what dnnl_gemm_u8s8s32 runs: the backend's path from CPU_I8_IGEMM_MIN_N rows). u8 x s8 ->
 * s32, weights [n, k] read transposed as the backend stores them, filled with a fixed
 * pattern (zeroed pages would be read from one page); for each count of rows the two run
 * in turn 15 times and the medians are kept: ms, GOPS (2 m n k), the implementation
 * oneDNN chose, and the run-time one's time over the fixed one's.
 *
 *   cc -O2 -o /tmp/dnnl_int8_paths bench/dnnl_int8_paths.c -ldnnl
 *   OMP_NUM_THREADS=2 /tmp/dnnl_int8_paths N K M...    # e.g. 256206 1024 13 32 128
 */
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if ((x) != dnnl_success) {                                                                 \
            fprintf(stderr, "dnnl_int8_paths: %s failed\n", #x);                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void descs(dnnl_dim_t m, int n, int k, dnnl_memory_desc_t *a, dnnl_memory_desc_t *w,
                  dnnl_memory_desc_t *c)
{
    dnnl_dims_t da = {m, k}, dw = {k, n}, dc = {m, n}, sa = {k, 1}, sw = {1, k}, sc = {n, 1};
    CHECK(dnnl_memory_desc_init_by_strides(a, 2, da, dnnl_u8, sa));
    CHECK(dnnl_memory_desc_init_by_strides(w, 2, dw, dnnl_s8, sw));
    CHECK(dnnl_memory_desc_init_by_strides(c, 2, dc, dnnl_s32, sc));
}

/* The matmul for m rows (DNNL_RUNTIME_DIM_VAL: any), its implementation's name in impl. */
static dnnl_primitive_t make(dnnl_engine_t eng, dnnl_dim_t m, int n, int k, char *impl, size_t size)
{
    dnnl_memory_desc_t a, w, c;
    descs(m, n, k, &a, &w, &c);
    dnnl_matmul_desc_t mm;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t p;
    const char *name = "?";
    CHECK(dnnl_matmul_desc_init(&mm, &a, &w, NULL, &c));
    CHECK(dnnl_primitive_desc_create(&pd, &mm, NULL, eng, NULL));
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success)
        name = "?";
    snprintf(impl, size, "%s", name);
    CHECK(dnnl_primitive_create(&p, pd));
    dnnl_primitive_desc_destroy(pd);
    return p;
}

static double best(dnnl_engine_t eng, dnnl_stream_t str, dnnl_primitive_t p, int m, int n, int k,
                   void *A, void *W, void *C, int reps)
{
    dnnl_memory_desc_t a, w, c;
    descs(m, n, k, &a, &w, &c);
    dnnl_memory_t ma, mw, mc;
    CHECK(dnnl_memory_create(&ma, &a, eng, A));
    CHECK(dnnl_memory_create(&mw, &w, eng, W));
    CHECK(dnnl_memory_create(&mc, &c, eng, C));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, mc}};
    double t_best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t0 = now();
        CHECK(dnnl_primitive_execute(p, str, 3, args));
        CHECK(dnnl_stream_wait(str));
        const double t = now() - t0;
        t_best = t < t_best ? t : t_best;
    }
    dnnl_memory_destroy(ma);
    dnnl_memory_destroy(mw);
    dnnl_memory_destroy(mc);
    return t_best;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: dnnl_int8_paths N K M...\n");
        return 2;
    }
    const int n = atoi(argv[1]), k = atoi(argv[2]);
    dnnl_engine_t eng;
    dnnl_stream_t str;
    CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&str, eng, dnnl_stream_default_flags));
    unsigned char *W = malloc((size_t)n * k);
    for (size_t i = 0; i < (size_t)n * k; i++)
        W[i] = (unsigned char)(i * 2654435761u >> 24);
    for (int i = 3; i < argc; i++) {
        const int m = atoi(argv[i]);
        unsigned char *A = malloc((size_t)m * k);
        void *C = calloc((size_t)m * n, 4);
        for (size_t i = 0; i < (size_t)m * k; i++)
            A[i] = (unsigned char)(i * 40503u >> 9);
        char fixed_impl[64], any_impl[64];
        dnnl_primitive_t fixed = make(eng, m, n, k, fixed_impl, sizeof fixed_impl),
                         any = make(eng, DNNL_RUNTIME_DIM_VAL, n, k, any_impl, sizeof any_impl);
        const int reps = 15;
        double tfs[64], tas[64];
        for (int r = 0; r < reps; r++) {
            tfs[r] = best(eng, str, fixed, m, n, k, A, W, C, 1);
            tas[r] = best(eng, str, any, m, n, k, A, W, C, 1);
        }
        qsort(tfs, reps, sizeof(double), cmpd);
        qsort(tas, reps, sizeof(double), cmpd);
        const double tf = tfs[reps / 2], ta = tas[reps / 2];
        printf("m %4d n %6d k %4d: m fixed %8.3f ms %4.0f GOPS (%s), m at run time %8.3f ms %4.0f "
               "GOPS (%s): %.2fx\n",
               m, n, k, tf * 1e3, 2.0 * m * n * k / tf / 1e9, fixed_impl, ta * 1e3,
               2.0 * m * n * k / ta / 1e9, any_impl, ta / tf);
        dnnl_primitive_destroy(fixed);
        dnnl_primitive_destroy(any);
        free(A);
        free(C);
    }
    free(W);
    dnnl_stream_destroy(str);
    dnnl_engine_destroy(eng);
    return 0;
}
