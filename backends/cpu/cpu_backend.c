/* The CPU backend: GEMM through CBLAS (OpenBLAS), except the few-row products that read
 * the F16 copy of B (cpu_gemv_half.c), everything else as plain C loops parallelised
 * with OpenMP. This file holds the lifecycle, memory and inference ops; the
 * training ops are in cpu_train.c and cpu_attention_backward.c, the plugin ops in
 * cpu_plugin.c. It is also the reference
 * the OpenCL backend is tested against, so reductions that decide accuracy (layernorm
 * moments, softmax sums) are accumulated in double.
 *
 * Buffers are host memory; ops run synchronously, so synchronize() has nothing to do.
 * Every operand is bounds-checked against its buffer before an op touches it: a bad
 * extent is CLF_ERR_INPUT naming the op and the operand, never an out-of-bounds read. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clformer/backend.h"
#include "cpu_internal.h"

#define CPU_ALIGN 64 /* bytes: a cache line, and the widest vector load */
/* From this size on a buffer is allocated on 2 MiB boundaries with huge pages advised
 * (cpu_alloc): at most 2 MiB of rounding, under a quarter of such a buffer. */
#define CPU_HUGE_MIN ((size_t)8 << 20)

/* ---- lifecycle ---- */

static clf_status cpu_open(const clf_backend_opts *opts, clf_backend **out)
{
    *out = NULL;
    if (opts && opts->device && opts->device[0] && strcmp(opts->device, "0") != 0 &&
        strcmp(opts->device, "cpu") != 0)
        return clf_error(CLF_ERR_INPUT,
                         "cpu: device '%s' does not exist (the cpu backend has "
                         "one device: 0)",
                         opts->device);
    cpu_isa isa;
    int capped;
    clf_status st = cpu_isa_choose(&isa, &capped);
    if (st != CLF_OK)
        return st;
    clf_backend *be = calloc(1, sizeof *be);
    if (!be)
        return clf_error(CLF_ERR_NOMEM, "cpu: out of memory");
    int n = opts && opts->threads > 0 ? opts->threads : omp_get_num_procs();
    be->threads = n > 0 ? n : 1;
    be->isa = isa;
    be->read_half = isa != CPU_ISA_GENERIC || capped;
    if ((st = cpu_i8_open(&be->i8)) != CLF_OK) {
        free(be);
        return st;
    }
    /* OpenBLAS keeps one process-wide thread pool; size it to what the config asks. So
     * does oneDNN (int8 products), which takes OpenMP's default team size. */
    openblas_set_num_threads(be->threads);
    omp_set_num_threads(be->threads);
    *out = be;
    return CLF_OK;
}

static void cpu_close(clf_backend *be)
{
    if (be) {
        cpu_i8_close(be->i8);
        free(be->attn_scratch);
        free(be->attn_rows);
    }
    free(be);
}

static clf_status cpu_describe(clf_backend *be, char *buf, size_t size)
{
    /* which OpenBLAS build the loader found: the OpenMP one shares this backend's threads
     * (backends/cpu/CMakeLists.txt) */
    static const char *const blas_threads[] = {"sequential", "pthreads", "OpenMP"};
    const int par = openblas_get_parallel();
    snprintf(buf, size,
             "CPU: %d threads, %s (%s), F16/BF16 GEMV %s%s, int8 oneDNN %d-bit activations",
             be->threads, openblas_get_config(),
             par >= 0 && par <= 2 ? blas_threads[par] : "unknown threading", cpu_isa_name(be->isa),
             be->read_half ? "" : " (off: slower than SGEMV)", cpu_i8_activation_bits(be->i8));
    return CLF_OK;
}

/* Host RAM in bytes (what `clformer devices` shows and the largest sane allocation). */
static uint64_t physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (uint64_t)PTRDIFF_MAX;
}

static clf_status cpu_list_devices(clf_device_fn fn, void *user)
{
    clf_device_info info;
    memset(&info, 0, sizeof info);
    info.index = 0;
    snprintf(info.platform, sizeof info.platform, "clformer cpu");
    snprintf(info.name, sizeof info.name, "host CPU");
    snprintf(info.type, sizeof info.type, "CPU");
    info.compute_units = omp_get_num_procs();
    info.global_mem_bytes = physical_memory();
    info.max_alloc_bytes = info.global_mem_bytes;
    snprintf(info.version, sizeof info.version, "%.63s", openblas_get_config());
    info.fp16 = 0;
    fn(user, &info);
    return CLF_OK;
}

static int cpu_supports(clf_backend *be, clf_op op)
{
    (void)be;
    /* every op and capability but F16 arithmetic: products of 8+ rows multiply the F32
     * weights (OpenBLAS SGEMM), only the few-row kernels read b_half */
    return (int)op >= 0 && op < CLF_OP_COUNT && op != CLF_OP_GEMM_HALF_ARITH;
}

static uint64_t cpu_max_alloc(clf_backend *be)
{
    (void)be;
    return physical_memory();
}

/* ---- memory ---- */

static clf_status cpu_alloc(clf_backend *be, size_t bytes, clf_buffer **out)
{
    (void)be;
    *out = NULL;
    clf_buffer *b = calloc(1, sizeof *b);
    size_t rounded = (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    if (!b || rounded < bytes)
        goto fail;
    /* Large buffers (weights, KV caches, arenas) on 2 MiB boundaries, asking the kernel for
     * transparent huge pages: decoding's attention reads a 256-byte piece of each cache row,
     * rows 4 KiB apart, so with 4 KiB pages nearly every row read was a TLB miss and a page
     * walk (the caches of a batch-32 step span over 10,000 pages). Where THP is off the
     * advice does nothing. */
    size_t align = CPU_ALIGN;
    if (rounded >= CPU_HUGE_MIN) {
        align = (size_t)2 << 20;
        rounded = (rounded + align - 1) / align * align;
    }
    b->data = aligned_alloc(align, rounded ? rounded : CPU_ALIGN);
    if (!b->data)
        goto fail;
#ifdef MADV_HUGEPAGE
    if (align > CPU_ALIGN)
        (void)madvise(b->data, rounded, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
    b->size = bytes;
    *out = b;
    return CLF_OK;
fail:
    free(b);
    return clf_error(CLF_ERR_NOMEM, "cpu: cannot allocate %zu bytes", bytes);
}

static void cpu_free(clf_backend *be, clf_buffer *buf)
{
    (void)be;
    if (buf)
        free(buf->data);
    free(buf);
}

/* The CPU backend's buffers are host memory: any instance may use any of them. */
static clf_status cpu_buffer_size(clf_backend *be, const clf_buffer *buf, size_t *bytes)
{
    (void)be;
    *bytes = buf->size;
    return CLF_OK;
}

/* upload, download, copy: the spans are checked by the core (clformer/ops.h) */
static clf_status cpu_upload(clf_backend *be, clf_ptr dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes)
        memcpy(dst.buf->data + dst.off, src, bytes);
    return CLF_OK;
}

static clf_status cpu_download(clf_backend *be, void *dst, clf_ptr src, size_t bytes)
{
    (void)be;
    if (bytes)
        memcpy(dst, src.buf->data + src.off, bytes);
    return CLF_OK;
}

static clf_status cpu_copy(clf_backend *be, clf_ptr dst, clf_ptr src, size_t bytes)
{
    (void)be;
    if (bytes)
        memmove(dst.buf->data + dst.off, src.buf->data + src.off, bytes);
    return CLF_OK;
}

/* Gives the whole pages inside the span back to the system (MADV_DONTNEED: they read as
 * zeros afterwards, and a write faults a fresh page in). The bytes at either end that share
 * a page with live data stay. */
static clf_status cpu_discard(clf_backend *be, clf_ptr p, size_t bytes, size_t *freed)
{
    (void)be;
    *freed = 0;
#ifdef MADV_DONTNEED
    const long page_l = sysconf(_SC_PAGESIZE);
    const uintptr_t page = page_l > 0 ? (uintptr_t)page_l : 4096;
    const uintptr_t start = (uintptr_t)(p.buf->data + p.off), end = start + bytes;
    const uintptr_t first = (start + page - 1) / page * page, last = end / page * page;
    if (last > first && madvise((void *)first, last - first, MADV_DONTNEED) == 0)
        *freed = last - first;
#else
    (void)p;
    (void)bytes;
#endif
    return CLF_OK; /* a hint: failing to give memory back is not an error */
}

static clf_status cpu_synchronize(clf_backend *be)
{
    (void)be;
    return CLF_OK;
}

/* ---- gemm ---- */

/* The slice of B that the matrix-vector products of all rows share before moving on:
 * about 1 MiB, so rows 2..m read it from L2 rather than from memory. */
#define CPU_GEMV_BLOCK_BYTES (1 << 20)

/* C[m,n] (+)= op(A) op(B) for m <= CPU_GEMV_MAX_ROWS as SGEMVs, B cut into blocks of
 * output columns (rows of B when trans_b, the layout of a linear layer's weight). */
static void gemm_rows_as_gemv(const clf_gemm_args *a, const float *A, const float *B, float *C)
{
    int incx = a->trans_a ? a->lda : 1;
    int block = (int)(CPU_GEMV_BLOCK_BYTES / (sizeof(float) * (size_t)a->k));
    if (block < 1)
        block = 1;
    if (a->beta == 0.0f) /* beta = 0 must not read C (it may hold NaN): clear it first */
        for (int i = 0; i < a->m; i++)
            memset(C + (size_t)i * a->ldc, 0, sizeof(float) * (size_t)a->n);
    for (int j0 = 0; j0 < a->n; j0 += block) {
        int nj = a->n - j0 < block ? a->n - j0 : block;
        for (int i = 0; i < a->m; i++) {
            const float *x = A + (a->trans_a ? (size_t)i : (size_t)i * a->lda);
            float *y = C + (size_t)i * a->ldc + j0;
            if (a->trans_b) /* B[n,k]: y = B[j0:j0+nj, :] x */
                cblas_sgemv(CblasRowMajor, CblasNoTrans, nj, a->k, a->alpha,
                            B + (size_t)j0 * a->ldb, a->ldb, x, incx, a->beta, y, 1);
            else /* B[k,n]: y = B[:, j0:j0+nj]^T x */
                cblas_sgemv(CblasRowMajor, CblasTrans, a->k, nj, a->alpha, B + j0, a->ldb, x, incx,
                            a->beta, y, 1);
        }
    }
}

/* C[m,n] (+)= op(A) op(B) for one matrix, then the bias/relu epilogue. */
static void gemm_one(clf_backend *be, const clf_gemm_args *a, const float *A, const float *B,
                     float *C)
{
    if (a->k > 0 && a->m <= CPU_GEMV_MAX_ROWS) {
        gemm_rows_as_gemv(a, A, B, C);
    } else if (a->k > 0) {
        cblas_sgemm(CblasRowMajor, a->trans_a ? CblasTrans : CblasNoTrans,
                    a->trans_b ? CblasTrans : CblasNoTrans, a->m, a->n, a->k, a->alpha, A, a->lda,
                    B, a->ldb, a->beta, C, a->ldc);
    } else {
        /* k == 0: the product is empty, C = beta * C (BLAS may reject k = 0). */
        for (int i = 0; i < a->m; i++)
            for (int j = 0; j < a->n; j++)
                C[(size_t)i * a->ldc + j] =
                    a->beta == 0.0f ? 0.0f : a->beta * C[(size_t)i * a->ldc + j];
    }
    if (!a->bias.buf && !a->relu)
        return;
    const float *bias = a->bias.buf ? fptr(a->bias) : NULL;
    int relu = a->relu;
#pragma omp parallel for num_threads(be->threads)                                                  \
    schedule(static) if (a->m * (size_t)a->n > CPU_PAR_MIN)
    for (int i = 0; i < a->m; i++) {
        float *row = C + (size_t)i * a->ldc;
        if (bias)
            for (int j = 0; j < a->n; j++)
                row[j] += bias[j];
        if (relu)
            for (int j = 0; j < a->n; j++)
                row[j] = row[j] > 0.0f ? row[j] : 0.0f;
    }
}

static clf_status cpu_gemm(clf_backend *be, const clf_gemm_args *a)
{
    CPU_REQUIRE_ARGS("gemm", a);
    /* sizes, leading dimensions, bounds and aliasing: checked by the core (clformer/ops.h);
     * b_half, b_bf16 and b_i8 where a path reads them */
    if (a->m == 0 || a->n == 0)
        return CLF_OK;
    if (cpu_gemm_i8_applies(a))
        return cpu_gemm_i8(be, a);
    if (be->read_half && cpu_gemv_bf16_applies(a))
        return cpu_gemv_bf16(be, a);
    if (be->read_half && cpu_gemv_half_applies(a))
        return cpu_gemv_half(be, a);
    gemm_one(be, a, a->k ? fptr(a->a) : NULL, a->k ? fptr(a->b) : NULL, fptr(a->c));
    return CLF_OK;
}

static clf_status cpu_gemm_strided_batched(clf_backend *be, const clf_gemm_args *a)
{
    CPU_REQUIRE_ARGS("gemm_strided_batched", a);
    /* sizes, strides, bounds and aliasing: checked by the core (clformer/ops.h) */
    if (a->batch <= 0 || a->m == 0 || a->n == 0)
        return CLF_OK;
    for (int b = 0; b < a->batch; b++)
        gemm_one(be, a, a->k ? fptr(a->a) + (size_t)b * a->stride_a : NULL,
                 a->k ? fptr(a->b) + (size_t)b * a->stride_b : NULL,
                 fptr(a->c) + (size_t)b * a->stride_c);
    return CLF_OK;
}

/* ---- layernorm ---- */

static clf_status cpu_layernorm(clf_backend *be, const clf_layernorm_args *a)
{
    CPU_REQUIRE_ARGS("layernorm", a);
    /* shape, bounds and aliasing: checked by the core (clformer/ops.h) */
    size_t n = (size_t)a->rows * a->cols;
    if (n == 0)
        return CLF_OK;
    const float *x = fptr(a->x), *res = a->residual.buf ? fptr(a->residual) : NULL;
    const float *alpha = fptr(a->alpha), *beta = fptr(a->beta);
    float *out = fptr(a->out), *sum = a->sum_out.buf ? fptr(a->sum_out) : NULL;
    int cols = a->cols, tutorial = a->style == CLF_LN_TUTORIAL;
    double eps = a->eps;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
    for (int r = 0; r < a->rows; r++) {
        const float *xr = x + (size_t)r * cols, *rr = res ? res + (size_t)r * cols : NULL;
        float *orow = out + (size_t)r * cols;
        /* The row sum x + residual, rounded to float as the reference rounds it, is staged
         * in out (which does not alias x) and, if asked, written to sum_out afterwards: sum
         * may alias x, so it must not be written before x is read. */
        /* The sums in double, in SIMD lanes (`omp simd`): one double accumulator added in
         * order is a chain of dependent adds, and made a decoding step's layernorms cost
         * as much as its attention. */
        double mean = 0.0;
        if (rr) {
#pragma omp simd reduction(+ : mean)
            for (int c = 0; c < cols; c++) {
                float v = xr[c] + rr[c];
                orow[c] = v;
                mean += v;
            }
        } else {
#pragma omp simd reduction(+ : mean)
            for (int c = 0; c < cols; c++) {
                orow[c] = xr[c];
                mean += xr[c];
            }
        }
        mean /= cols;
        double ss = 0.0;
#pragma omp simd reduction(+ : ss)
        for (int c = 0; c < cols; c++) {
            double d = orow[c] - mean;
            ss += d * d;
        }
        if (sum)
            memcpy(sum + (size_t)r * cols, orow, 4 * (size_t)cols);
        double inv = tutorial ? 1.0 / (sqrt(ss / (cols - 1)) + eps) : 1.0 / sqrt(ss / cols + eps);
#pragma omp simd
        for (int c = 0; c < cols; c++)
            orow[c] = (float)(alpha[c] * ((orow[c] - mean) * inv) + beta[c]);
    }
    return CLF_OK;
}

/* ---- attention ---- */

/* be->attn_scratch holds at least `floats` floats: grown (never shrunk) here rather than
 * allocated per call, which at decode is 12 calls a step. Ops on one backend run one at a
 * time (they are synchronous), and each thread of a call takes its own slice. */
static clf_status cpu_attn_scratch(clf_backend *be, size_t floats)
{
    if (floats <= be->attn_cap)
        return CLF_OK;
    float *p = malloc(sizeof(float) * floats);
    if (!p)
        return clf_error(CLF_ERR_NOMEM, "cpu: attention: cannot allocate scratch");
    free(be->attn_scratch);
    be->attn_scratch = p;
    be->attn_cap = floats;
    return CLF_OK;
}

/* be->attn_rows holds at least `n` pointers (as cpu_attn_scratch). */
static clf_status cpu_attn_rows(clf_backend *be, size_t n)
{
    if (n <= be->attn_rows_cap)
        return CLF_OK;
    const float **p = malloc(sizeof(*p) * n);
    if (!p)
        return clf_error(CLF_ERR_NOMEM, "cpu: attention: cannot allocate scratch");
    free(be->attn_rows);
    be->attn_rows = p;
    be->attn_rows_cap = n;
    return CLF_OK;
}

/* kr[j], vr[j] <- where key and value j of batch entry b, head columns hd.., start: entry
 * b's rows, or with a row table (kv_rows) entry tab[j]'s, clamped to [0, kv_entries) (the
 * core checked that span; the table's contents are the caller's). */
static void attn_kv_rows(const clf_attention_args *a, const float *K, const float *V,
                         const int32_t *tab, int b, size_t hd, const float **kr, const float **vr)
{
    for (int j = 0; j < a->kv_len; j++) {
        int32_t e = b;
        if (tab) {
            e = tab[(size_t)b * a->kv_rows_ld + j];
            e = e < 0 ? 0 : e >= a->kv_entries ? a->kv_entries - 1 : e;
        }
        const size_t base = (size_t)e * a->kv_bstride + hd;
        kr[j] = K + base + (size_t)j * a->k_ld;
        vr[j] = V + base + (size_t)j * a->v_ld;
    }
}

/* q, k, v, out: heads split from the feature dim (layout and strides: clf_attention_args).
 * For each (b, h, i): P = softmax_j(s), s_j = scale q_i . k_j (-1e9 where masked),
 * out_i = sum_j w_j v_j with w_j = P_j, or with dropout P_j * keep(e) / (1 - p),
 * e = ((b * heads + h) * q_len + i) * kv_len + j. probs [B, H, q_len, kv_len] gets P. */
static clf_status cpu_attention(clf_backend *be, const clf_attention_args *a)
{
    CPU_REQUIRE_ARGS("attention", a);
    /* dropout_p, shape, strides and bounds: checked by the core (clformer/ops.h) */
    if (a->batch <= 0 || a->q_len <= 0)
        return CLF_OK;
    const float *Q = fptr(a->q), *K = fptr(a->k), *V = fptr(a->v);
    float *O = fptr(a->out), *P = a->probs.buf ? fptr(a->probs) : NULL;
    const int32_t *M = a->key_mask.buf ? iptr(a->key_mask) : NULL;
    const int32_t *R = a->kv_rows.buf ? iptr(a->kv_rows) : NULL;
    int B = a->batch, H = a->heads, Tq = a->q_len, Tk = a->kv_len, D = a->head_dim;
    const attn_dropout dr = attention_dropout(a);
    const int kp = attn_round_up(Tk, ATTN_J), dp = attn_round_up(D, ATTN_J);
    const int few = attn_few_queries(a);
    /* per thread: Kt [D][kp], V rows [Tk][dp], the query block transposed [D][ATTN_R],
     * probabilities [ATTN_R][kp], weights transposed [kp][ATTN_R], output block
     * [ATTN_R][dp] */
    const size_t per_thread = (size_t)D * kp + (size_t)Tk * dp + (size_t)D * ATTN_R +
                              2 * (size_t)ATTN_R * kp + (size_t)ATTN_R * dp;
    /* and Tk key and Tk value row pointers */
    clf_status st = cpu_attn_scratch(be, (size_t)be->threads * per_thread);
    if (st == CLF_OK)
        st = cpu_attn_rows(be, (size_t)be->threads * 2 * (size_t)Tk);
    if (st != CLF_OK)
        return st;
    float *scratch = be->attn_scratch;
    const float **rows = be->attn_rows;
    /* decoding without dropout: the AVX2 + FMA kernels (cpu_attention_avx2.c) for the
     * scores and the weighted sum of V */
    const int avx2 = few && !dr.on && be->isa != CPU_ISA_GENERIC;
    /* one thread when the products are too few to pay for a parallel region (see
     * CPU_PAR_MIN): 2 multiply-adds per query, key and column */
    const int par = 2 * (size_t)B * H * Tq * Tk * D > CPU_PAR_MIN;
    /* One (batch, head) per iteration: pack its K and V once, then ATTN_R query rows at a
     * time: scores, softmax, dropout, weighted sum of V (helpers: cpu_internal.h). */
#pragma omp parallel num_threads(be->threads) if (par)
    {
        const int tid = omp_get_thread_num();
        float *kt = scratch + (size_t)tid * per_thread;
        float *vp = kt + (size_t)D * kp, *qt = vp + (size_t)Tk * dp, *s = qt + (size_t)D * ATTN_R;
        float *wt = s + (size_t)ATTN_R * kp, *acc = wt + (size_t)ATTN_R * kp;
        const float **kr = rows + (size_t)tid * 2 * Tk, **vr = kr + Tk;
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < B * H; bh++) {
            int b = bh / H, h = bh % H;
            const int32_t *mask = M ? M + b * a->key_mask_stride : NULL;
            /* the rows of keys and values: those of entry b, or through the row table */
            attn_kv_rows(a, K, V, R, b, (size_t)h * D, kr, vr);
            if (!few) {
                attn_pack_t(attn_listed(kr), Tk, D, kp, kt);
                attn_pack_rows(attn_listed(vr), Tk, D, dp, vp);
            }
            for (int i0 = 0; i0 < Tq; i0 += ATTN_R) {
                const int nr = Tq - i0 < ATTN_R ? Tq - i0 : ATTN_R;
                const float *qb = Q + b * a->q_bstride + (size_t)i0 * a->q_ld + (size_t)h * D;
                /* queries i0 .. i0 + nr - 1 need the scores of keys j < nk only: causal
                 * masking hides the rest from every row (the limit grows with i), and
                 * P is 0 past ext, so those keys are not weighted either */
                const int nk = attn_key_limit(a, i0 + nr - 1);
                if (avx2) {
                    cpu_attn_scores_avx2(qb, (size_t)a->q_ld, nr, kr, D, nk, kp, s);
                } else if (few) {
                    attn_scores_rows(qb, (size_t)a->q_ld, nr, attn_listed(kr), D, nk, kp, s);
                } else {
                    attn_pack_rows_t(qb, (size_t)a->q_ld, nr, D, qt);
                    attn_rows_mul(qt, kt, (size_t)kp, D, attn_round_up(nk, ATTN_J), nr, s,
                                  (size_t)kp);
                }
                const int ext = attn_softmax_rows(a, mask, i0, nr, kp, s);
                /* the weights: P, or P * keep / (1 - p). s is 0 past the live rows and
                 * keys, and a 0 (masked or underflowed) P stays 0 whatever the mask, so
                 * it needs no hash. */
                if (avx2)
                    for (int r = 0; r < nr; r++)
                        cpu_attn_weigh_avx2(s + (size_t)r * kp, ext, vr, D, acc + (size_t)r * dp);
                else if (few)
                    for (int r = 0; r < nr; r++) {
                        const uint64_t e0 = (((uint64_t)b * H + h) * Tq + i0 + r) * Tk;
                        const float *sr = s + (size_t)r * kp;
                        float *ar = acc + (size_t)r * dp;
                        memset(ar, 0, sizeof(float) * (size_t)D);
                        for (int j = 0; j < ext; j++) {
                            float wj = sr[j];
                            if (wj != 0.0f && dr.on)
                                wj *= attention_keep(&dr, e0 + j);
                            if (wj == 0.0f)
                                continue;
                            const float *v = vr[j];
#pragma omp simd
                            for (int d = 0; d < D; d++)
                                ar[d] += wj * v[d];
                        }
                    }
                else {
                    attn_block_t(s, kp, wt); /* [kp][ATTN_R] */
                    if (dr.on)
                        for (int r = 0; r < nr; r++) {
                            const uint64_t e0 = (((uint64_t)b * H + h) * Tq + i0 + r) * Tk;
                            for (int j = 0; j < ext; j++) {
                                float *wj = wt + (size_t)j * ATTN_R + r;
                                *wj = *wj != 0.0f ? *wj * attention_keep(&dr, e0 + j) : 0.0f;
                            }
                        }
                    attn_rows_mul(wt, vp, (size_t)dp, ext, dp, nr, acc, (size_t)dp);
                }
                for (int r = 0; r < nr; r++) {
                    float *o =
                        O + b * a->out_bstride + (size_t)(i0 + r) * a->out_ld + (size_t)h * D;
                    memcpy(o, acc + (size_t)r * dp, sizeof(float) * (size_t)D);
                    if (P)
                        memcpy(P + (((size_t)b * H + h) * Tq + i0 + r) * Tk, s + (size_t)r * kp,
                               sizeof(float) * (size_t)Tk);
                }
            }
        }
    }
    return CLF_OK;
}

/* ---- embedding, elementwise, softmax, argmax ---- */

static clf_status cpu_embed(clf_backend *be, const clf_embed_args *a)
{
    CPU_REQUIRE_ARGS("embed", a);
    /* shape and operands: checked by the core (clformer/ops.h) */
    size_t dim = (size_t)a->dim;
    const int32_t *ids = iptr(a->ids);
    const float *table = fptr(a->table), *pe = a->pe.buf ? fptr(a->pe) : NULL;
    float *out = fptr(a->out);
#pragma omp parallel for num_threads(be->threads) schedule(static) if (a->rows * dim > 65536)
    for (int r = 0; r < a->rows; r++) {
        int id = ids[r] < 0 ? 0 : ids[r] >= a->vocab ? a->vocab - 1 : ids[r];
        const float *e = table + (size_t)id * dim;
        float *o = out + (size_t)r * dim;
        if (pe) {
            const float *p = pe + ((size_t)a->pos0 + (size_t)(r % a->seq_len)) * dim;
            for (size_t c = 0; c < dim; c++)
                o[c] = e[c] * a->scale + p[c];
        } else {
            for (size_t c = 0; c < dim; c++)
                o[c] = e[c] * a->scale;
        }
    }
    return CLF_OK;
}

/* add, softmax, argmax: shapes and operands checked by the core (clformer/ops.h) */
static clf_status cpu_add(clf_backend *be, clf_ptr out, clf_ptr a, clf_ptr b, size_t n)
{
    float *o = fptr(out);
    const float *x = fptr(a), *y = fptr(b);
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        o[i] = x[i] + y[i];
    return CLF_OK;
}

static clf_status cpu_softmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols,
                              int use_log)
{
    const float *X = fptr(x);
    float *O = fptr(out);
    const int avx2 = be->isa != CPU_ISA_GENERIC;
#pragma omp parallel for num_threads(be->threads)                                                  \
    schedule(static) if ((size_t)rows * cols > CPU_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *xr = X + (size_t)r * cols;
        float *orow = O + (size_t)r * cols;
        float mx = xr[0];
        for (int c = 1; c < cols; c++)
            mx = xr[c] > mx ? xr[c] : mx;
        /* the exponentials in float (cpu_expf; AVX2 lanes where the CPU has them), their
         * sum in double */
        double sum = 0.0;
        if (avx2)
            sum = cpu_exp_sum_avx2(xr, cols, mx);
        else
            for (int c = 0; c < cols; c++)
                sum += (double)cpu_expf(xr[c] - mx);
        if (use_log) {
            const float lse = (float)log(sum);
#pragma omp simd
            for (int c = 0; c < cols; c++)
                orow[c] = (xr[c] - mx) - lse;
        } else if (avx2) {
            cpu_exp_scale_avx2(xr, cols, mx, (float)(1.0 / sum), orow);
        } else {
            const float inv = (float)(1.0 / sum);
            for (int c = 0; c < cols; c++)
                orow[c] = cpu_expf(xr[c] - mx) * inv;
        }
    }
    return CLF_OK;
}

static clf_status cpu_argmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols)
{
    const float *X = fptr(x);
    int32_t *O = iptr(out);
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((size_t)rows * cols > 65536)
    for (int r = 0; r < rows; r++) {
        const float *xr = X + (size_t)r * cols;
        int best = 0;
        for (int c = 1; c < cols; c++)
            if (xr[c] > xr[best])
                best = c;
        O[r] = best;
    }
    return CLF_OK;
}

static const clf_backend_api cpu_api = {
    .abi_version = CLF_BACKEND_ABI,
    .name = "cpu",
    .description = "CPU: OpenBLAS SGEMM, OpenMP kernels",
    .open = cpu_open,
    .close = cpu_close,
    .describe = cpu_describe,
    .list_devices = cpu_list_devices,
    .supports = cpu_supports,
    .max_alloc = cpu_max_alloc,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .buffer_size = cpu_buffer_size,
    .upload = cpu_upload,
    .download = cpu_download,
    .copy = cpu_copy,
    .synchronize = cpu_synchronize,
    .discard = cpu_discard,
    .gemm = cpu_gemm,
    .gemm_strided_batched = cpu_gemm_strided_batched,
    .layernorm = cpu_layernorm,
    .attention = cpu_attention,
    .embed = cpu_embed,
    .add = cpu_add,
    .softmax = cpu_softmax,
    .argmax = cpu_argmax,
    .relu_backward = cpu_relu_backward,
    .layernorm_backward = cpu_layernorm_backward,
    .attention_backward = cpu_attention_backward,
    .embed_backward = cpu_embed_backward,
    .dropout = cpu_dropout,
    .cross_entropy = cpu_cross_entropy,
    .adam = cpu_adam,
    .sum_squares = cpu_sum_squares,
    .fill = cpu_fill,
    .plugin_prepare = cpu_plugin_prepare,
    .activation = cpu_plugin_activation,
    .activation_backward = cpu_plugin_activation_backward,
    .norm = cpu_plugin_norm,
    .norm_backward = cpu_plugin_norm_backward,
};

__attribute__((visibility("default"))) const clf_backend_api *clf_backend_entry(void)
{
    return &cpu_api;
}
