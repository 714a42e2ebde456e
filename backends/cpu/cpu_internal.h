/* What the CPU backend's files share: the buffer and backend structs, the operand checks,
 * the training ops (cpu_train.c, cpu_attention_backward.c) and the plugin ops
 * (cpu_plugin.c) that cpu_backend.c puts in its api table. Nothing here is exported: the
 * target builds with hidden visibility, so only clf_backend_entry leaves the .so. */
#ifndef CLF_CPU_INTERNAL_H
#define CLF_CPU_INTERNAL_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "clformer/backend.h"

#define MASKED_SCORE (-1e9f) /* what masked_fill(mask == 0, -1e9) writes */

struct clf_buffer {
    size_t size; /* bytes */
    unsigned char *data;
};

/* The instruction sets the F16 matrix-vector kernels (cpu_gemv_half.c) are built for. */
typedef enum cpu_isa { CPU_ISA_GENERIC, CPU_ISA_AVX2, CPU_ISA_AVX512 } cpu_isa;

struct clf_backend {
    int threads;
    cpu_isa isa; /* chosen once at open: the best the CPU has, capped by CLF_CPU_ISA */
    /* gemm reads b_half. Not when the CPU has only the generic level: portable C converts
     * halves 2-3x slower than OpenBLAS's SGEMV reads F32 (bench/gemv_half.c), so b_half
     * is ignored there unless CLF_CPU_ISA=generic asks for it (the tests do). */
    int read_half;
    struct cpu_i8 *i8;       /* oneDNN engine, stream and matmul cache (cpu_gemm_i8.c) */
    float *attn_scratch;     /* attention's per-thread scratch, grown as needed */
    size_t attn_cap;         /* floats in attn_scratch */
    const float **attn_rows; /* attention's per-thread key and value row pointers */
    size_t attn_rows_cap;    /* pointers in attn_rows */
};

/* The small per-row ops (layernorm, softmax, add, quantizing activations, the GEMM
 * epilogues, attention) open an OpenMP parallel region only above CPU_PAR_MIN elements
 * (attention: multiply-adds). A decoding step is ~100 such ops on a few rows each; a region
 * costs ~2 us when the partner thread is spinning and ~0.2 ms when it must be woken or is
 * descheduled (this 2-core machine at load 9: an empty region took 170-1000 us), while
 * 2^17 elements of layernorm take ~0.25 ms on one core. Measured (bench/RESULTS.md, issue
 * 18): int8 decoding, 2 threads, against the former thresholds (16384 or 65536 elements,
 * attention always parallel), 2^17 gives 1.29x at greedy batch 1, 1.13x at greedy batch 32
 * and 1.14x at beam 4 batch 32; 2^14 gives 1.02x / 1.06x / 0.88x, 2^20 as 2^17 within
 * the noise. */
#define CPU_PAR_MIN ((size_t)1 << 17)

/* e^x in float for the softmax rows, written so that a `#pragma omp simd` loop vectorises
 * it (libm's exp is a call per element: a beam search's log-softmax over 128 rows of 8000
 * logits took 2.8 ms a step with it). Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2
 * (n rounded with the 1.5 * 2^23 shift, which SSE2 has), Cephes' degree-6 polynomial for
 * e^r (relative error about 1e-7, 1-2 ulp), then 2^n through the exponent bits. Below
 * -87.3 the result is clamped to about 1e-38 (its exponent must stay normal), above 88.7
 * to about 3e38: softmax arguments are <= 0 (the row max is subtracted). NaN stays NaN. */
static inline float cpu_expf(float x)
{
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.7f ? 88.7f : x;
    const float shift = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float t = x * 1.44269504088896341f + shift;
    const float n = t - shift;
    float r = x - n * 0.693359375f; /* ln2 in two parts: exact product, then the rest */
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* the integer n sits in t's low mantissa bits; 2^n is (n + 127) << 23 as a float */
    union {
        float f;
        int32_t i;
    } u = {.f = t};
    u.i = (u.i - 0x4B400000 + 127) * (1 << 23);
    return p * u.f;
}

/* ---- operand checks ---- */

/* Checks that [ptr.off, ptr.off + bytes) lies inside ptr.buf and that the offset is a
 * multiple of align bytes (the element size). */
static inline clf_status check_span_aligned(const char *op, const char *operand, clf_ptr p,
                                            size_t bytes, size_t align)
{
    if (!p.buf)
        return clf_error(CLF_ERR_INPUT, "cpu: %s: operand '%s' is missing", op, operand);
    if (p.off % align != 0)
        return clf_error(CLF_ERR_INPUT, "cpu: %s: operand '%s' offset %zu is not %zu-byte aligned",
                         op, operand, p.off, align);
    if (p.off > p.buf->size || bytes > p.buf->size - p.off)
        return clf_error(CLF_ERR_INPUT,
                         "cpu: %s: operand '%s' needs bytes [%zu, %zu) but its buffer holds %zu",
                         op, operand, p.off, p.off + bytes, p.buf->size);
    return CLF_OK;
}

/* The same for F32 and I32 operands: 4-byte aligned. */
static inline clf_status check_span(const char *op, const char *operand, clf_ptr p, size_t bytes)
{
    return check_span_aligned(op, operand, p, bytes, 4);
}

/* Every entry that takes an argument struct refuses a NULL one with a message, as the
 * OpenCL backend does, rather than dereferencing it. */
#define CPU_REQUIRE_ARGS(op, a)                                                                    \
    do {                                                                                           \
        if (!(a))                                                                                  \
            return clf_error(CLF_ERR_INPUT, "cpu: %s: no arguments", (op));                        \
    } while (0)

static inline float *fptr(clf_ptr p)
{
    return (float *)(void *)(p.buf->data + p.off);
}
static inline int32_t *iptr(clf_ptr p)
{
    return (int32_t *)(void *)(p.buf->data + p.off);
}

/* Elements spanned by `rows` rows of `cols` elements `ld` apart (0 when empty). */
static inline size_t span2d(size_t rows, size_t cols, size_t ld)
{
    return rows && cols ? (rows - 1) * ld + cols : 0;
}

/* ---- attention ---- */

/* The forward (cpu_attention) and the backward (cpu_attention_backward) work on one
 * (batch, head) at a time and on ATTN_R query rows at a time. Each (b, h) slice is first
 * packed into per-thread scratch so that the inner loops run over contiguous, zero-padded
 * rows: K transposed to Kt [head_dim][kv_pad] (the scores are then vectorised over keys,
 * with no horizontal reductions, and every Kt row is reused by ATTN_RT accumulators), V
 * as rows [kv_len][dim_pad]. kv_pad and dim_pad round kv_len and head_dim up to ATTN_J;
 * the padding is zero, so it adds nothing to any sum. The register tiles below (ATTN_RT x
 * ATTN_J and 4 x ATTN_J floats) fit the 16 SSE registers of the baseline x86-64 target
 * (no -march: SSE2, no FMA). The forward and the backward share these helpers, so the
 * backward's recomputed probabilities are the forward's bits. */
#define ATTN_R  8 /* query rows per block */
#define ATTN_RT 4 /* query rows per register tile; divides ATTN_R */
#define ATTN_J  8 /* columns per register tile; kv_pad and dim_pad are multiples */

static inline int attn_round_up(int n, int m)
{
    return (n + m - 1) / m * m;
}

/* xt [D][ATTN_R] <- rows r < nr of x (rows ld apart, D columns), transposed; zero for
 * r >= nr. */
static inline void attn_pack_rows_t(const float *x, size_t ld, int nr, int D, float *xt)
{
    for (int r = 0; r < ATTN_R; r++)
        if (r < nr)
            for (int d = 0; d < D; d++)
                xt[(size_t)d * ATTN_R + r] = x[(size_t)r * ld + d];
        else
            for (int d = 0; d < D; d++)
                xt[(size_t)d * ATTN_R + r] = 0.0f;
}

/* A set of rows: ld apart from base, or one pointer each (the forward's keys and values,
 * which may come through clf_attention_args.kv_rows). */
typedef struct attn_rows {
    const float *base;
    size_t ld;
    const float *const *at; /* NULL: strided */
} attn_rows;

static inline attn_rows attn_strided(const float *base, size_t ld)
{
    return (attn_rows){base, ld, NULL};
}

static inline attn_rows attn_listed(const float *const *at)
{
    return (attn_rows){NULL, 0, at};
}

static inline const float *attn_row(attn_rows x, int j)
{
    return x.at ? x.at[j] : x.base + (size_t)j * x.ld;
}

/* xp [n][dp] <- n rows of x (D columns), zero in columns [D, dp). */
static inline void attn_pack_rows(attn_rows x, int n, int D, int dp, float *xp)
{
    for (int r = 0; r < n; r++) {
        memcpy(xp + (size_t)r * dp, attn_row(x, r), sizeof(float) * (size_t)D);
        for (int d = D; d < dp; d++)
            xp[(size_t)r * dp + d] = 0.0f;
    }
}

/* kt [D][kp] <- the n rows of k (D columns) transposed, zero in columns [n, kp) (kp a
 * multiple of ATTN_J). ATTN_J rows are read side by side, each one sequentially: walking
 * one column down all rows instead would touch rows whose stride (3 * d_model floats in
 * the fused QKV layout) maps them onto a few L1 sets. */
static inline void attn_pack_t(attn_rows k, int n, int D, int kp, float *kt)
{
    for (int j0 = 0; j0 < kp; j0 += ATTN_J) {
        const int nj = n - j0 < ATTN_J ? n - j0 : ATTN_J;
        const float *rw[ATTN_J];
        for (int jj = 0; jj < nj; jj++)
            rw[jj] = attn_row(k, j0 + jj);
        if (nj == ATTN_J) {
            for (int d = 0; d < D; d++)
                for (int jj = 0; jj < ATTN_J; jj++)
                    kt[(size_t)d * kp + j0 + jj] = rw[jj][d];
            continue;
        }
        for (int d = 0; d < D; d++)
            for (int jj = 0; jj < ATTN_J; jj++)
                kt[(size_t)d * kp + j0 + jj] = jj < nj ? rw[jj][d] : 0.0f;
    }
}

/* The register tiles work on ATTN_RT of a block's rows at a time; groups of rows that
 * lie wholly past the block's nr live rows are skipped (decoding has one). */
static inline int attn_row_groups(int nr)
{
    return (nr + ATTN_RT - 1) / ATTN_RT;
}

/* o [ATTN_R][ldo] = a b for the row groups holding rows < nr: o[r][c] =
 * sum_{k < n} at[k][r] b[k][c] for c < nc (a multiple of ATTN_J); at [n][ATTN_R] is a
 * transposed (a column of ATTN_R values per k, so each k reads ATTN_R adjacent floats),
 * b [n][ldb]. The sum over k runs in order. With at = Q^T and b = Kt it gives the raw
 * scores, with dO^T and Vt the backward's dO V^T (k over head_dim, c over keys); with W^T
 * and V rows the output, with dS^T and K rows the backward's dQ (k over keys, c over
 * head_dim). */
static inline void attn_rows_mul(const float *at, const float *b, size_t ldb, int n, int nc, int nr,
                                 float *o, size_t ldo)
{
    for (int g = 0; g < attn_row_groups(nr); g++)
        for (int c0 = 0; c0 < nc; c0 += ATTN_J) {
            float acc[ATTN_RT][ATTN_J] = {{0.0f}};
            for (int k = 0; k < n; k++) {
                const float *bk = b + (size_t)k * ldb + c0;
                const float *ak = at + (size_t)k * ATTN_R + g * ATTN_RT;
                for (int r = 0; r < ATTN_RT; r++) {
                    const float ar = ak[r];
#pragma omp simd
                    for (int cc = 0; cc < ATTN_J; cc++)
                        acc[r][cc] += ar * bk[cc];
                }
            }
            for (int r = 0; r < ATTN_RT; r++)
                for (int cc = 0; cc < ATTN_J; cc++)
                    o[(size_t)(g * ATTN_RT + r) * ldo + c0 + cc] = acc[r][cc];
        }
}

/* Blocks of fewer than ATTN_RT queries (q_len < ATTN_RT: decoding) are scored straight
 * from the strided rows (attn_scores_rows) and, in the forward, weighted straight from
 * V's rows: packing K and V for so few queries would cost more than the dot products. */
static inline int attn_few_queries(const clf_attention_args *a)
{
    return a->q_len < ATTN_RT;
}

/* s [nr][kp]: s[r][j] = q_r . k_j for r < nr, j < nk; q: rows q_ld apart, D columns. The
 * few-queries counterpart of attn_rows_mul(Q^T, Kt). */
static inline void attn_scores_rows(const float *q, size_t q_ld, int nr, attn_rows k, int D, int nk,
                                    int kp, float *s)
{
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < nk; j++) {
            const float *qr = q + (size_t)r * q_ld, *kj = attn_row(k, j);
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int d = 0; d < D; d++)
                dot += qr[d] * kj[d];
            s[(size_t)r * kp + j] = dot;
        }
}

/* st [kp][ATTN_R] <- s [ATTN_R][kp] transposed (the at operand of attn_rows_mul). */
static inline void attn_block_t(const float *s, int kp, float *st)
{
    for (int r = 0; r < ATTN_R; r++)
        for (int j = 0; j < kp; j++)
            st[(size_t)j * ATTN_R + r] = s[(size_t)r * kp + j];
}

/* y [nk][dp] += w^T x over the nr live rows: y[j][d] += sum_{r < nr} w[r][j] x[r][d] for
 * j < nk (a multiple of 4, <= kp: tiles of 4 keys); w [ATTN_R][kp], x [ATTN_R][dp], dp a
 * multiple of ATTN_J. The backward's dK += dS^T Q and dV += W^T dO; the sum over r runs in
 * order. */
static inline void attn_rows_accumulate(const float *w, int kp, int nk, const float *x, int dp,
                                        int nr, float *y)
{
    for (int j0 = 0; j0 < nk; j0 += 4)
        for (int d0 = 0; d0 < dp; d0 += ATTN_J) {
            float acc[4][ATTN_J];
            for (int jj = 0; jj < 4; jj++)
                for (int dd = 0; dd < ATTN_J; dd++)
                    acc[jj][dd] = y[(size_t)(j0 + jj) * dp + d0 + dd];
            for (int r = 0; r < nr; r++) {
                const float *xr = x + (size_t)r * dp + d0, *wr = w + (size_t)r * kp + j0;
                for (int jj = 0; jj < 4; jj++) {
                    const float wj = wr[jj];
#pragma omp simd
                    for (int dd = 0; dd < ATTN_J; dd++)
                        acc[jj][dd] += wj * xr[dd];
                }
            }
            for (int jj = 0; jj < 4; jj++)
                for (int dd = 0; dd < ATTN_J; dd++)
                    y[(size_t)(j0 + jj) * dp + d0 + dd] = acc[jj][dd];
        }
}

/* Query i sees keys j < attn_key_limit(a, i) unless the key mask says otherwise: kv_len,
 * or with causal the keys up to its own position q_pos0 + i. */
static inline int attn_key_limit(const clf_attention_args *a, int i)
{
    if (!a->causal || a->q_pos0 + i + 1 >= a->kv_len)
        return a->kv_len;
    return a->q_pos0 + i + 1 < 0 ? 0 : a->q_pos0 + i + 1;
}

/* 1 when key j is masked for a query whose attn_key_limit is lim: key mask 0 (mask: the
 * batch's [kv_len] I32 mask or NULL) or, causal, j after the query's position. */
static inline int attn_masked(const int32_t *mask, int lim, int j)
{
    return j >= lim || (mask && mask[j] == 0);
}

/* s [ATTN_R][kp]: on entry the raw dots q_r . k_j of queries i0 + r for keys j <
 * attn_key_limit (the rest is not read); on return P(b, h, i0 + r, j) for r < nr and j <
 * kv_len, the masked (-1e9, as masked_fill), scaled softmax over the keys, and 0 everywhere
 * else (rows >= nr, columns >= kv_len). A fully masked row is uniform, as in PyTorch.
 * Returns n <= kv_len such that P is 0 in every column >= n: the largest causal limit of
 * the rows, or kv_len when a row's masked keys get a nonzero weight (a fully masked row). */
static inline int attn_softmax_rows(const clf_attention_args *a, const int32_t *mask, int i0,
                                    int nr, int kp, float *s)
{
    const int Tk = a->kv_len;
    int ext = 0;
    for (int r = 0; r < ATTN_R; r++) {
        float *row = s + (size_t)r * kp;
        if (r >= nr) {
            memset(row, 0, sizeof(float) * (size_t)kp);
            continue;
        }
        const int lim = attn_key_limit(a, i0 + r);
        const float scale = a->scale;
        float mx = -FLT_MAX;
        if (mask) {
#pragma omp simd
            for (int j = 0; j < lim; j++)
                row[j] = mask[j] == 0 ? MASKED_SCORE : row[j] * scale;
        } else {
#pragma omp simd
            for (int j = 0; j < lim; j++)
                row[j] *= scale;
        }
        for (int j = lim; j < Tk; j++)
            row[j] = MASKED_SCORE;
#pragma omp simd reduction(max : mx)
        for (int j = 0; j < Tk; j++)
            mx = row[j] > mx ? row[j] : mx;
        double denom = 0.0;
        for (int j = 0; j < Tk; j++) {
            /* expf underflows to +0 below about -103.98; skipping the call there gives the
             * same bits without its slow underflow path (every masked key of a row that
             * has an unmasked one lands there) */
            float x = row[j] - mx;
            row[j] = x < -104.0f ? 0.0f : expf(x);
            denom += row[j];
        }
        float inv = (float)(1.0 / denom);
#pragma omp simd
        for (int j = 0; j < Tk; j++)
            row[j] *= inv;
        for (int j = Tk; j < kp; j++)
            row[j] = 0.0f;
        /* the weight of a masked key, as computed above */
        int n = MASKED_SCORE - mx < -104.0f ? lim : Tk;
        ext = n > ext ? n : ext;
    }
    return ext;
}

/* Dropout on the attention probabilities (clf_attention_args.dropout_p): element
 * e = ((b * heads + h) * q_len + i) * kv_len + j is kept when clf_dropout_bits(seed, e) >=
 * threshold, and a kept weight is multiplied by scale = 1.0f / (1.0f - p). on = 0 (p = 0,
 * or a p so small that its threshold is 0 and its scale 1.0f) skips the hash: every
 * element is kept unscaled, which is what the mask would give. */
typedef struct attn_dropout {
    int on;
    uint32_t threshold;
    float scale;
    uint64_t seed;
} attn_dropout;

static inline attn_dropout attention_dropout(const clf_attention_args *a)
{
    attn_dropout dr = {0, 0, 1.0f, a->dropout_seed};
    dr.threshold = clf_dropout_threshold(a->dropout_p);
    dr.on = dr.threshold != 0;
    if (dr.on)
        dr.scale = 1.0f / (1.0f - a->dropout_p);
    return dr;
}

/* scale if element e is kept, else 0 (dr->on). */
static inline float attention_keep(const attn_dropout *dr, uint64_t e)
{
    return clf_dropout_bits(dr->seed, e) >= dr->threshold ? dr->scale : 0.0f;
}

/* The few-query forward (attn_few_queries) with AVX2 and FMA (cpu_attention_avx2.c), for
 * be->isa >= CPU_ISA_AVX2: cpu_attn_scores_avx2 computes what attn_scores_rows does;
 * cpu_attn_weigh_avx2 o[d] = sum_{j < n, w[j] != 0} w[j] v[j][d] for d < D. Key and value
 * rows come one pointer each (the batch entry's rows, or those kv_rows names). */
void cpu_attn_scores_avx2(const float *q, size_t q_ld, int nr, const float *const *k, int D, int nk,
                          int kp, float *s);
void cpu_attn_weigh_avx2(const float *w, int n, const float *const *v, int D, float *o);

/* The softmax op's rows with AVX2 and FMA (cpu_softmax_avx2.c), for be->isa >=
 * CPU_ISA_AVX2: cpu_exp_sum_avx2 = sum_c e^(x[c] - mx) (cpu_expf, summed in double);
 * cpu_exp_scale_avx2 o[c] = e^(x[c] - mx) * scale; c < n. */
double cpu_exp_sum_avx2(const float *x, int n, float mx);
void cpu_exp_scale_avx2(const float *x, int n, float mx, float scale, float *o);

/* ---- few-row products ---- */

/* Below this many rows a product runs as matrix-vector products instead of one SGEMM. A
 * decoding step has one row per sentence or beam, and OpenBLAS 0.3.21 packs all of B
 * (the weight matrix) even for such an A: the copy costs more than the arithmetic, in a
 * step that is bound by reading the weights. At 8 rows the two take the same time on the
 * AVX-512 machine of bench/RESULTS.md (2048x512 and 512x2048 weights, 2 threads). */
#define CPU_GEMV_MAX_ROWS 7

/* The best kernel level this CPU runs, capped by the environment variable CLF_CPU_ISA
 * (generic | avx2 | avx512; unset or empty: no cap). An unknown value is CLF_ERR_INPUT.
 * *capped: 1 when CLF_CPU_ISA was given. */
clf_status cpu_isa_choose(cpu_isa *out, int *capped);
const char *cpu_isa_name(cpu_isa isa);
/* 1 when gemm reads a->b_half: trans_a = 0, trans_b = 1, 1 <= m <= CPU_GEMV_MAX_ROWS,
 * k > 0 and b_half set. */
int cpu_gemv_half_applies(const clf_gemm_args *a);
/* The product of cpu_gemv_half_applies(a) from b_half, with the bias/relu epilogue; the
 * other operands have passed check_gemm. CLF_ERR_INPUT when b_half is out of bounds. */
clf_status cpu_gemv_half(clf_backend *be, const clf_gemm_args *a);

/* 1 when gemm reads a->b_bf16: as cpu_gemv_half_applies, for b_bf16. */
int cpu_gemv_bf16_applies(const clf_gemm_args *a);
/* The same product as cpu_gemv_half from b_bf16. */
clf_status cpu_gemv_bf16(clf_backend *be, const clf_gemm_args *a);

/* ---- int8 weights (cpu_gemm_i8.c) ---- */

struct cpu_i8;
clf_status cpu_i8_open(struct cpu_i8 **out);
void cpu_i8_close(struct cpu_i8 *q); /* NULL is fine */
/* 8 with AVX-512 VNNI, else 7: the precision activations are quantized to */
int cpu_i8_activation_bits(const struct cpu_i8 *q);
/* 1 when gemm reads a->b_i8: trans_a = 0, trans_b = 1, k > 0 and b_i8 set. */
int cpu_gemm_i8_applies(const clf_gemm_args *a);
/* The product of cpu_gemm_i8_applies(a) (clformer/backend.h) with its epilogue; the other
 * operands have passed check_gemm. CLF_ERR_INPUT when b_i8 or b_scale is out of bounds. */
clf_status cpu_gemm_i8(clf_backend *be, const clf_gemm_args *a);

/* ---- training ops (ABI 2), semantics in clformer/backend.h ---- */

clf_status cpu_relu_backward(clf_backend *be, clf_ptr dx, clf_ptr dy, clf_ptr y, size_t n);
clf_status cpu_layernorm_backward(clf_backend *be, const clf_layernorm_backward_args *a);
clf_status cpu_attention_backward(clf_backend *be, const clf_attention_backward_args *a);
clf_status cpu_embed_backward(clf_backend *be, const clf_embed_backward_args *a);
clf_status cpu_dropout(clf_backend *be, const clf_dropout_args *a);
clf_status cpu_cross_entropy(clf_backend *be, const clf_cross_entropy_args *a);
clf_status cpu_adam(clf_backend *be, const clf_adam_args *a);
clf_status cpu_sum_squares(clf_backend *be, clf_ptr out, clf_ptr x, size_t n);
clf_status cpu_fill(clf_backend *be, clf_ptr out, float value, size_t n);

/* ---- plugin ops (ABI 3, cpu_plugin.c), semantics in clformer/backend.h ---- */

clf_status cpu_plugin_prepare(clf_backend *be, const clf_plugin_op *op);
clf_status cpu_plugin_activation(clf_backend *be, const clf_activation_args *a);
clf_status cpu_plugin_activation_backward(clf_backend *be, const clf_activation_backward_args *a);
clf_status cpu_plugin_norm(clf_backend *be, const clf_norm_args *a);
clf_status cpu_plugin_norm_backward(clf_backend *be, const clf_norm_backward_args *a);

#endif
