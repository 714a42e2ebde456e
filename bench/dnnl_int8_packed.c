/* oneDNN's int8 brgemm matmul given its weights as the CPU backend stores them (rows of W,
 * read transposed: oneDNN copies them into its blocked layout on every call) against the
 * same weights packed once in that layout (BA16a64b4a, what backends/cpu/cpu_i8_pack.c
 * makes), as decoding reads them: a step's products one after the other, each matrix read
 * once, 300 MB written between steps so that the weights come from memory, not the cache.
 * The step is NLLB-600M's decoder (12 layers of a 3072 x 1024 QKV, three 1024 x 1024, a
 * 4096 x 1024 and a 1024 x 4096 FFN), or with OUTPUT=1 its 256,206 x 1024 output layer.
 * Plain and packed in turn, 9 steps each, medians: ms a step and GOPS (2 m n k).
 *
 *   cc -O2 -o /tmp/dnnl_int8_packed bench/dnnl_int8_packed.c -ldnnl
 *   OMP_NUM_THREADS=2 /tmp/dnnl_int8_packed M...          # e.g. 1 8 32 128
 */
#include <dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if ((x) != dnnl_success) {                                                                 \
            fprintf(stderr, "dnnl_int8_packed: %s failed\n", #x);                                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define ROUNDS 9
#define FLUSH  ((size_t)300 << 20)

static dnnl_engine_t eng;
static dnnl_stream_t str;

typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_t a, w, c;
} matmul;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void weights_md(dnnl_memory_desc_t *md, int n, int k, int packed)
{
    dnnl_dims_t dw = {k, n}, sw = {1, k};
    if (packed)
        CHECK(dnnl_memory_desc_init_by_tag(md, 2, dw, dnnl_s8, dnnl_BA16a64b4a));
    else
        CHECK(dnnl_memory_desc_init_by_strides(md, 2, dw, dnnl_s8, sw));
}

static matmul make(int m, int n, int k, int packed)
{
    dnnl_memory_desc_t a, w, c;
    dnnl_dims_t da = {m, k}, dc = {m, n}, sa = {k, 1}, sc = {n, 1};
    CHECK(dnnl_memory_desc_init_by_strides(&a, 2, da, dnnl_u8, sa));
    weights_md(&w, n, k, packed);
    CHECK(dnnl_memory_desc_init_by_strides(&c, 2, dc, dnnl_s32, sc));
    dnnl_matmul_desc_t mm;
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_matmul_desc_init(&mm, &a, &w, NULL, &c));
    CHECK(dnnl_primitive_desc_create(&pd, &mm, NULL, eng, NULL));
    matmul p;
    CHECK(dnnl_primitive_create(&p.prim, pd));
    CHECK(dnnl_memory_create(&p.a, &a, eng, DNNL_MEMORY_NONE));
    CHECK(dnnl_memory_create(&p.w, &w, eng, DNNL_MEMORY_NONE));
    CHECK(dnnl_memory_create(&p.c, &c, eng, DNNL_MEMORY_NONE));
    CHECK(dnnl_primitive_desc_destroy(pd));
    return p;
}

/* a packed copy of the rows w [n, k] (n and k multiples of 64) */
static void *packed_copy(const int8_t *w, int n, int k)
{
    dnnl_memory_desc_t from, to;
    weights_md(&from, n, k, 0);
    weights_md(&to, n, k, 1);
    void *out = aligned_alloc(64, (size_t)n * k);
    dnnl_memory_t mf, mt;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t r;
    CHECK(dnnl_memory_create(&mf, &from, eng, (void *)w));
    CHECK(dnnl_memory_create(&mt, &to, eng, out));
    CHECK(dnnl_reorder_primitive_desc_create(&pd, &from, eng, &to, eng, NULL));
    CHECK(dnnl_primitive_create(&r, pd));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, mf}, {DNNL_ARG_TO, mt}};
    CHECK(dnnl_primitive_execute(r, str, 2, args));
    CHECK(dnnl_stream_wait(str));
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(pd);
    dnnl_memory_destroy(mf);
    dnnl_memory_destroy(mt);
    return out;
}

static int cmpd(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    static const int decoder[6][2] = {{3072, 1024}, {1024, 1024}, {1024, 1024},
                                      {1024, 1024}, {4096, 1024}, {1024, 4096}};
    static const int output[1][2] = {{256256, 1024}}; /* 256,206 rows, padded to 64 */
    const int out = getenv("OUTPUT") && atoi(getenv("OUTPUT"));
    const int(*shapes)[2] = out ? output : decoder;
    const int kinds = out ? 1 : 6, count = out ? 1 : 12 * 6;
    if (argc < 2) {
        fprintf(stderr, "usage: dnnl_int8_packed M...\n");
        return 2;
    }
    CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&str, eng, dnnl_stream_default_flags));
    int8_t **rows = malloc(sizeof *rows * count);
    void **packed = malloc(sizeof *packed * count);
    for (int i = 0; i < count; i++) {
        const size_t size = (size_t)shapes[i % kinds][0] * shapes[i % kinds][1];
        rows[i] = aligned_alloc(64, size);
        for (size_t e = 0; e < size; e++)
            rows[i][e] = (int8_t)((e * 2654435761u + (unsigned)i) >> 24);
        packed[i] = packed_copy(rows[i], shapes[i % kinds][0], shapes[i % kinds][1]);
    }
    char *flush = malloc(FLUSH);
    printf("%s, 2 m n k / time; plain: weights as stored, packed: BA16a64b4a\n",
           out ? "output layer 256,206 x 1024" : "NLLB-600M's decoder step (72 products)");
    for (int a = 1; a < argc; a++) {
        const int m = atoi(argv[a]);
        uint8_t *A = aligned_alloc(64, (size_t)m * 4096);
        int32_t *C = aligned_alloc(64, (size_t)m * 256256 * 4);
        memset(A, 77, (size_t)m * 4096);
        matmul p[2][6];
        for (int s = 0; s < kinds; s++)
            for (int pk = 0; pk < 2; pk++)
                p[pk][s] = make(m, shapes[s][0], shapes[s][1], pk);
        double t[2][ROUNDS], ops = 0;
        for (int i = 0; i < count; i++)
            ops += 2.0 * m * shapes[i % kinds][0] * shapes[i % kinds][1];
        for (int r = 0; r < ROUNDS; r++)
            for (int pk = 0; pk < 2; pk++) {
                memset(flush, r + pk, FLUSH);
                const double t0 = now();
                for (int i = 0; i < count; i++) {
                    matmul *q = &p[pk][i % kinds];
                    CHECK(dnnl_memory_set_data_handle(q->a, A));
                    CHECK(dnnl_memory_set_data_handle(q->w, pk ? packed[i] : (void *)rows[i]));
                    CHECK(dnnl_memory_set_data_handle(q->c, C));
                    dnnl_exec_arg_t args[3] = {
                        {DNNL_ARG_SRC, q->a}, {DNNL_ARG_WEIGHTS, q->w}, {DNNL_ARG_DST, q->c}};
                    CHECK(dnnl_primitive_execute(q->prim, str, 3, args));
                    CHECK(dnnl_stream_wait(str));
                }
                t[pk][r] = now() - t0;
            }
        for (int pk = 0; pk < 2; pk++)
            qsort(t[pk], ROUNDS, sizeof t[pk][0], cmpd);
        const double plain = t[0][ROUNDS / 2], pack = t[1][ROUNDS / 2];
        printf("m %4d: plain %8.2f ms %4.0f GOPS, packed %8.2f ms %4.0f GOPS: %.2fx\n", m,
               plain * 1e3, ops / plain * 1e-9, pack * 1e3, ops / pack * 1e-9, plain / pack);
        for (int s = 0; s < kinds; s++)
            for (int pk = 0; pk < 2; pk++) {
                dnnl_primitive_destroy(p[pk][s].prim);
                dnnl_memory_destroy(p[pk][s].a);
                dnnl_memory_destroy(p[pk][s].w);
                dnnl_memory_destroy(p[pk][s].c);
            }
        free(A);
        free(C);
    }
    for (int i = 0; i < count; i++) {
        free(rows[i]);
        free(packed[i]);
    }
    free(rows);
    free(packed);
    free(flush);
    dnnl_stream_destroy(str);
    dnnl_engine_destroy(eng);
    return 0;
}
