/* Products against int8 weights (clf_gemm_args.b_i8, b_scale):
 *
 *   C[i,j] = relu?(alpha * sa[i] * s[j] * (sum_p ua[i,p] W[j,p] - z * wsum[j])
 *                  + beta * C[i,j] + bias[j])
 *   A [m, k] rows lda apart, W = b_i8 [n, k] rows ldb apart (y = x W^T), s[j] and wsum[j]
 *   from b_scale ({F32 scale, I32 sum of row j's int8 values} per row).
 *
 * A is quantized per row here, at run time: sa[i] = max_p |A[i,p]| / qmax, qa = round(A /
 * sa) in [-qmax, qmax], stored unsigned as ua = qa + z (z = qmax + 1 would not fit a u8
 * at qmax 127, so z = 128 there and 64 at qmax 64). Unsigned activations times signed
 * weights is the product x86 has (vpmaddubsw, and VNNI's vpdpbusd); oneDNN's matmul
 * computes sum_p ua W in int32, and the z * wsum term (the sums are made with the weights,
 * once) takes the offset back out, exactly. Without VNNI, vpmaddubsw adds two u8 x s8
 * products into 16 bits with saturation: 2 * 128 * 127 = 32512 fits, 2 * 255 * 127 does
 * not, so qmax is 64 there (7-bit activations) and 127 with AVX-512 VNNI.
 *
 * Why oneDNN and not OpenBLAS or a kernel of our own: Debian's OpenBLAS 0.3.21 has no
 * integer GEMM, and oneDNN's u8 x s8 -> s32 matmul runs the model's shapes 2.3-2.9x faster
 * than OpenBLAS's SGEMM at 32 rows and 6-10x at 1-4 rows (bench/RESULTS.md). oneDNN's own
 * s8 x s8 path is 2-3x slower than u8 x s8 (it adds 128 and the compensation per call), so
 * the offset is ours. A matmul primitive is made once per shape (m, n, k, lda, ldb) and
 * kept in a small cache of the backend: making one costs about as much as running it. */
#include <dnnl.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define I8_CACHE 48 /* primitives kept: a decoding step has about 6 shapes, an encoder 6 */

typedef struct i8_prim {
    int used;
    int m, n, k, lda, ldb;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst;
} i8_prim;

struct cpu_i8 {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int qmax, zero; /* activation range and its unsigned offset (see above) */
    i8_prim cache[I8_CACHE];
    int next; /* the entry replaced next when the cache is full */
    /* scratch, grown as needed */
    uint8_t *qa;
    float *sa;
    int32_t *acc;
    size_t qa_cap, sa_cap, acc_cap;
};

static void prim_free(i8_prim *p)
{
    if (p->src)
        dnnl_memory_destroy(p->src);
    if (p->wei)
        dnnl_memory_destroy(p->wei);
    if (p->dst)
        dnnl_memory_destroy(p->dst);
    if (p->prim)
        dnnl_primitive_destroy(p->prim);
    memset(p, 0, sizeof *p);
}

void cpu_i8_close(struct cpu_i8 *q)
{
    if (!q)
        return;
    for (int i = 0; i < I8_CACHE; i++)
        prim_free(&q->cache[i]);
    if (q->stream)
        dnnl_stream_destroy(q->stream);
    if (q->engine)
        dnnl_engine_destroy(q->engine);
    free(q->qa);
    free(q->sa);
    free(q->acc);
    free(q);
}

clf_status cpu_i8_open(struct cpu_i8 **out)
{
    *out = NULL;
    struct cpu_i8 *q = calloc(1, sizeof *q);
    if (!q)
        return clf_error(CLF_ERR_NOMEM, "cpu: out of memory");
    if (dnnl_engine_create(&q->engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&q->stream, q->engine, dnnl_stream_default_flags) != dnnl_success) {
        cpu_i8_close(q);
        return clf_error(CLF_ERR_BACKEND, "cpu: oneDNN: cannot create a CPU engine and stream");
    }
    q->qmax = 64;
    q->zero = 64;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512vnni")) {
        q->qmax = 127;
        q->zero = 128;
    }
#endif
    *out = q;
    return CLF_OK;
}

int cpu_i8_activation_bits(const struct cpu_i8 *q)
{
    return q->qmax == 127 ? 8 : 7;
}

/* grows *p to at least n elements of size sz */
static clf_status grow(void **p, size_t *cap, size_t n, size_t sz)
{
    if (n <= *cap)
        return CLF_OK;
    void *np = realloc(*p, n * sz);
    if (!np)
        return clf_error(CLF_ERR_NOMEM, "cpu: gemm: out of memory for int8 scratch");
    *p = np;
    *cap = n;
    return CLF_OK;
}

/* The cached primitive for this shape, made on first use. */
static clf_status prim_get(struct cpu_i8 *q, const clf_gemm_args *a, i8_prim **out)
{
    for (int i = 0; i < I8_CACHE; i++) {
        i8_prim *p = &q->cache[i];
        if (p->used && p->m == a->m && p->n == a->n && p->k == a->k && p->lda == a->lda &&
            p->ldb == a->ldb) {
            *out = p;
            return CLF_OK;
        }
    }
    i8_prim *p = &q->cache[q->next];
    q->next = (q->next + 1) % I8_CACHE;
    prim_free(p);
    dnnl_memory_desc_t md_a, md_w, md_c;
    /* A [m, k] (lda); W^T as [k, n] with strides (1, ldb): the weights' own rows; C s32 */
    dnnl_dims_t da = {a->m, a->k}, sa = {a->lda, 1}, dw = {a->k, a->n}, sw = {1, a->ldb},
                dc = {a->m, a->n}, sc = {a->n, 1};
    dnnl_primitive_desc_t pd = NULL;
    dnnl_matmul_desc_t mm;
    if (dnnl_memory_desc_init_by_strides(&md_a, 2, da, dnnl_u8, sa) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&md_w, 2, dw, dnnl_s8, sw) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&md_c, 2, dc, dnnl_s32, sc) != dnnl_success ||
        dnnl_matmul_desc_init(&mm, &md_a, &md_w, NULL, &md_c) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &mm, NULL, q->engine, NULL) != dnnl_success ||
        dnnl_primitive_create(&p->prim, pd) != dnnl_success ||
        dnnl_memory_create(&p->src, &md_a, q->engine, DNNL_MEMORY_NONE) != dnnl_success ||
        dnnl_memory_create(&p->wei, &md_w, q->engine, DNNL_MEMORY_NONE) != dnnl_success ||
        dnnl_memory_create(&p->dst, &md_c, q->engine, DNNL_MEMORY_NONE) != dnnl_success) {
        if (pd)
            dnnl_primitive_desc_destroy(pd);
        prim_free(p);
        return clf_error(CLF_ERR_BACKEND, "cpu: gemm: oneDNN has no int8 matmul for m=%d n=%d k=%d",
                         a->m, a->n, a->k);
    }
    dnnl_primitive_desc_destroy(pd);
    p->used = 1;
    p->m = a->m;
    p->n = a->n;
    p->k = a->k;
    p->lda = a->lda;
    p->ldb = a->ldb;
    *out = p;
    return CLF_OK;
}

int cpu_gemm_i8_applies(const clf_gemm_args *a)
{
    return a->b_i8.buf && !a->trans_a && a->trans_b && a->k > 0;
}

clf_status cpu_gemm_i8(clf_backend *be, const clf_gemm_args *a)
{
    struct cpu_i8 *q = be->i8;
    const int m = a->m, n = a->n, k = a->k;
    clf_status st = check_span_aligned("gemm", "b_i8", a->b_i8,
                                       span2d((size_t)n, (size_t)k, (size_t)a->ldb), 1);
    if (st == CLF_OK)
        st = check_span("gemm", "b_scale", a->b_scale, 8 * (size_t)n);
    if (st == CLF_OK)
        st = grow((void **)&q->qa, &q->qa_cap, (size_t)m * (size_t)a->lda, 1);
    if (st == CLF_OK)
        st = grow((void **)&q->sa, &q->sa_cap, (size_t)m, sizeof(float));
    if (st == CLF_OK)
        st = grow((void **)&q->acc, &q->acc_cap, (size_t)m * (size_t)n, sizeof(int32_t));
    i8_prim *p = NULL;
    if (st == CLF_OK)
        st = prim_get(q, a, &p);
    if (st != CLF_OK)
        return st;
    const float *A = fptr(a->a);
    const float qmax = (float)q->qmax;
    const int zero = q->zero;
    uint8_t *qa = q->qa;
    float *sa = q->sa;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (m > 8)
    for (int i = 0; i < m; i++) {
        const float *x = A + (size_t)i * a->lda;
        uint8_t *u = qa + (size_t)i * a->lda;
        float amax = 0.0f;
        for (int p = 0; p < k; p++)
            amax = fabsf(x[p]) > amax ? fabsf(x[p]) : amax;
        /* a zero row (or one of NaN: amax stays 0) quantizes to zeros with scale 0 */
        const float s = amax / qmax, inv = amax > 0.0f ? qmax / amax : 0.0f;
        sa[i] = s;
        for (int p = 0; p < k; p++)
            u[p] = (uint8_t)((int)lrintf(x[p] * inv) + zero);
    }
    dnnl_memory_set_data_handle(p->src, qa);
    dnnl_memory_set_data_handle(p->wei, a->b_i8.buf->data + a->b_i8.off);
    dnnl_memory_set_data_handle(p->dst, q->acc);
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, p->src}, {DNNL_ARG_WEIGHTS, p->wei}, {DNNL_ARG_DST, p->dst}};
    if (dnnl_primitive_execute(p->prim, q->stream, 3, args) != dnnl_success ||
        dnnl_stream_wait(q->stream) != dnnl_success)
        return clf_error(CLF_ERR_BACKEND, "cpu: gemm: oneDNN int8 matmul failed (m=%d n=%d k=%d)",
                         m, n, k);
    /* b_scale: per row {F32 scale, I32 sum} */
    const unsigned char *ws = a->b_scale.buf->data + a->b_scale.off;
    const float *bias = a->bias.buf ? fptr(a->bias) : NULL;
    float *C = fptr(a->c);
    const int32_t *acc = q->acc;
    const float alpha = a->alpha, beta = a->beta;
    const int relu = a->relu;
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((size_t)m * n > 65536)
    for (int i = 0; i < m; i++) {
        float *c = C + (size_t)i * a->ldc;
        const int32_t *r = acc + (size_t)i * n;
        const float si = alpha * sa[i];
        for (int j = 0; j < n; j++) {
            float sj;
            int32_t sum;
            memcpy(&sj, ws + 8 * (size_t)j, 4);
            memcpy(&sum, ws + 8 * (size_t)j + 4, 4);
            float v = si * sj * (float)(r[j] - zero * sum);
            if (beta != 0.0f) /* beta = 0 must not read C (it may hold NaN) */
                v += beta * c[j];
            if (bias)
                v += bias[j];
            if (relu)
                v = v > 0.0f ? v : 0.0f;
            c[j] = v;
        }
    }
    return CLF_OK;
}
