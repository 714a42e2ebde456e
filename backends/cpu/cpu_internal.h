/* What the CPU backend's files share: the buffer and backend structs, the operand checks,
 * the attention blocks' layout and the declarations of every op that cpu_backend.c puts in
 * its api table, by the file that holds it. Declarations, types and helpers of a line or
 * two only: the kernels live in the .c files. Nothing here is exported: the target builds
 * with hidden visibility, so only clf_backend_entry leaves the .so. */
#ifndef CLF_CPU_INTERNAL_H
#define CLF_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "clformer/backend.h"

#if defined(__x86_64__) || defined(__i386__)
#define CPU_X86 1 /* the SIMD kernels (AVX2, AVX-512) are built, and chosen at run time */
#else
#define CPU_X86 0
#endif

#define MASKED_SCORE (-1e9f) /* what masked_fill(mask == 0, -1e9) writes */

struct clf_buffer {
    size_t size; /* bytes */
    unsigned char *data;
};

/* The instruction sets the SIMD kernels are built for (chosen at open: cpu_isa.c). */
typedef enum cpu_isa { CPU_ISA_GENERIC, CPU_ISA_AVX2, CPU_ISA_AVX512 } cpu_isa;

struct clf_backend {
    int threads;
    cpu_isa isa; /* chosen once at open: the best the CPU has, capped by CLF_CPU_ISA */
    /* gemm reads b_half. Not when the CPU has only the generic level: portable C converts
     * halves slower than OpenBLAS's SGEMV reads F32 (bench/gemv_half.c), so b_half is
     * ignored there unless CLF_CPU_ISA=generic asks for it (the tests do). */
    int read_half;
    struct cpu_dnnl *dnnl; /* oneDNN's engine, matmul cache and scratch (cpu_dnnl.c) */
    /* gemm reads b_bf16 in products of many rows too, in BF16 arithmetic (oneDNN): a CPU
     * with AVX512_BF16, unless CLF_CPU_BF16_ARITH=off (cpu_gemm_bf16.c) */
    int bf16_arith;
    int i8_qmax;                /* the int8 products' activations: 127 (8 bits) or 64 (7 bits) */
    float *attn_scratch;        /* attention's per-thread scratch, grown as needed */
    size_t attn_cap;            /* floats in attn_scratch */
    const float **attn_rows;    /* attention's per-thread key and value row pointers */
    size_t attn_rows_cap;       /* pointers in attn_rows */
    struct cpu_i8_span *packed; /* the int8 weights kept packed (cpu_i8_pack.c) */
    int n_packed, packed_cap;
};

/* The small per-row ops (layernorm, softmax, add, quantizing activations, the GEMM
 * epilogues, attention) open an OpenMP parallel region only above CPU_PAR_MIN elements
 * (attention: multiply-adds). A decoding step is ~100 such ops on a few rows each, and a
 * region costs far more when its partner thread must be woken or is descheduled than
 * when it is spinning; below this size one core does the op sooner than two would. The
 * threshold was chosen by timing int8 decoding at several sizes (bench/RESULTS.md, the
 * row of CPU_PAR_MIN). */
#define CPU_PAR_MIN ((size_t)1 << 17)

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
 * (no -march: SSE2, no FMA). The forward and the backward share these block kernels
 * (cpu_attention.c), so the backward's recomputed probabilities are the forward's bits. */
#define ATTN_R  8 /* query rows per block */
#define ATTN_RT 4 /* query rows per register tile; divides ATTN_R */
#define ATTN_J  8 /* columns per register tile; kv_pad and dim_pad are multiples */

static inline int attn_round_up(int n, int m)
{
    return (n + m - 1) / m * m;
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

/* Blocks of fewer than ATTN_RT queries (q_len < ATTN_RT: decoding) are scored straight
 * from the strided rows (attn_scores_rows) and, in the forward, weighted straight from
 * V's rows: packing K and V for so few queries would cost more than the dot products. */
static inline int attn_few_queries(const clf_attention_args *a)
{
    return a->q_len < ATTN_RT;
}

/* Query i sees keys j < attn_key_limit(a, i) unless the key mask says otherwise: kv_len,
 * or with causal the keys up to its own position q_pos0 + i. */
static inline int attn_key_limit(const clf_attention_args *a, int i)
{
    if (!a->causal || a->q_pos0 + i + 1 >= a->kv_len)
        return a->kv_len;
    return a->q_pos0 + i + 1 < 0 ? 0 : a->q_pos0 + i + 1;
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

attn_dropout attention_dropout(const clf_attention_args *a);

/* scale if element e is kept, else 0 (dr->on). */
static inline float attention_keep(const attn_dropout *dr, uint64_t e)
{
    return clf_dropout_bits(dr->seed, e) >= dr->threshold ? dr->scale : 0.0f;
}

/* The block kernels (cpu_attention.c), shared by the forward and the backward. */

/* xt [D][ATTN_R] <- rows r < nr of x (rows ld apart, D columns), transposed; zero for
 * r >= nr. */
void attn_pack_rows_t(const float *x, size_t ld, int nr, int D, float *xt);
/* xp [n][dp] <- n rows of x (D columns), zero in columns [D, dp). */
void attn_pack_rows(attn_rows x, int n, int D, int dp, float *xp);
/* kt [D][kp] <- the n rows of k (D columns) transposed, zero in columns [n, kp) (kp a
 * multiple of ATTN_J). */
void attn_pack_t(attn_rows k, int n, int D, int kp, float *kt);
/* o [ATTN_R][ldo] = a b for the row groups of ATTN_RT rows holding rows < nr: o[r][c] =
 * sum_{k < n} at[k][r] b[k][c] for c < nc (a multiple of ATTN_J); at [n][ATTN_R] is a
 * transposed, b [n][ldb]. The sum over k runs in order. */
void attn_rows_mul(const float *at, const float *b, size_t ldb, int n, int nc, int nr, float *o,
                   size_t ldo);
/* s [nr][kp]: s[r][j] = q_r . k_j for r < nr, j < nk; q: rows q_ld apart, D columns (the
 * few-queries counterpart of attn_rows_mul(Q^T, Kt)). */
void attn_scores_rows(const float *q, size_t q_ld, int nr, attn_rows k, int D, int nk, int kp,
                      float *s);
/* st [kp][ATTN_R] <- s [ATTN_R][kp] transposed (the at operand of attn_rows_mul). */
void attn_block_t(const float *s, int kp, float *st);
/* s [ATTN_R][kp]: the raw dots of queries i0 + r, r < nr, in; the masked, scaled softmax
 * P(b, h, i0 + r, j) out, 0 elsewhere. Returns n <= kv_len with P 0 in every column >= n. */
int attn_softmax_rows(const clf_attention_args *a, const int32_t *mask, int i0, int nr, int kp,
                      float *s);

/* The few-query forward (attn_few_queries) with AVX2 and FMA (cpu_attention_avx2.c), for
 * be->isa >= CPU_ISA_AVX2, x86 only (CPU_X86): cpu_attn_scores_avx2 computes what attn_scores_rows
 * does; cpu_attn_weigh_avx2 o[d] = sum_{j < n, w[j] != 0} w[j] v[j][d] for d < D. Key and value
 * rows come one pointer each (the batch entry's rows, or those kv_rows names). */
void cpu_attn_scores_avx2(const float *q, size_t q_ld, int nr, const float *const *k, int D, int nk,
                          int kp, float *s);
void cpu_attn_weigh_avx2(const float *w, int n, const float *const *v, int D, float *o);

/* ---- scratch ---- */

/* *p holds at least n elements of size bytes: an op's scratch buffer, kept in the backend
 * and grown (never shrunk; the old contents are dropped) by the op named what. */
static inline clf_status cpu_grow(void **p, size_t *cap, size_t n, size_t size, const char *what)
{
    if (n <= *cap)
        return CLF_OK;
    void *np = n <= SIZE_MAX / size ? malloc(n * size) : NULL;
    if (!np)
        return clf_error(CLF_ERR_NOMEM, "cpu: %s: cannot allocate scratch", what);
    free(*p);
    *p = np;
    *cap = n;
    return CLF_OK;
}

/* ---- inference ops, semantics in clformer/backend.h ---- */

/* cpu_gemm.c */
clf_status cpu_gemm(clf_backend *be, const clf_gemm_args *a);
clf_status cpu_gemm_strided_batched(clf_backend *be, const clf_gemm_args *a);
/* cpu_norm.c */
clf_status cpu_layernorm(clf_backend *be, const clf_layernorm_args *a);
clf_status cpu_add(clf_backend *be, clf_ptr out, clf_ptr a, clf_ptr b, size_t n);
/* cpu_attention.c */
clf_status cpu_attention(clf_backend *be, const clf_attention_args *a);
/* cpu_embed.c */
clf_status cpu_embed(clf_backend *be, const clf_embed_args *a);
/* cpu_softmax.c */
clf_status cpu_softmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols, int use_log);
clf_status cpu_argmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols);
clf_status cpu_topk(clf_backend *be, const clf_topk_args *a);
/* cpu_beam.c */
clf_status cpu_beam_choose(clf_backend *be, const clf_beam_args *a);

/* ---- few-row products (cpu_isa.c, cpu_gemv.c) ---- */

/* Below this many rows a product runs as matrix-vector products instead of one SGEMM. A
 * decoding step has one row per sentence or beam, and OpenBLAS 0.3.21 packs all of B
 * (the weight matrix) even for such an A: the copy costs more than the arithmetic, in a
 * step that is bound by reading the weights. At 8 rows the two take the same time on the
 * AVX-512 machine of bench/RESULTS.md (2048x512 and 512x2048 weights, 2 threads). */
#define CPU_GEMV_MAX_ROWS 7
/* The F32 few-row kernel (cpu_gemv_f32) takes up to this many rows in one pass over W:
 * from 8 rows on, OpenBLAS 0.3.21's SGEMM, which packs W at every call, took 2-3x its time
 * on weights read from memory; from 16 on the two are even (bench/RESULTS.md). */
#define CPU_GEMV_F32_MAX_ROWS 12

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

/* 1 when gemm reads a->b_bf16: as cpu_gemv_half_applies, for b_bf16, unless bf16_arith. */
int cpu_gemv_bf16_applies(const clf_gemm_args *a);
/* The same product as cpu_gemv_half from b_bf16. */
clf_status cpu_gemv_bf16(clf_backend *be, const clf_gemm_args *a);

/* 1 when gemm reads the F32 b with the few-row kernels: an x86 CPU with AVX2 (be->isa),
 * trans_a = 0, trans_b = 1, 1 <= m <= CPU_GEMV_F32_MAX_ROWS, k > 0. Elsewhere products of up
 * to CPU_GEMV_MAX_ROWS rows are OpenBLAS SGEMVs, a row at a time, and larger ones SGEMM. */
int cpu_gemv_f32_applies(const clf_backend *be, const clf_gemm_args *a);
/* The product of cpu_gemv_f32_applies(a) from b, with the epilogue (operands checked). */
clf_status cpu_gemv_f32(clf_backend *be, const clf_gemm_args *a);

/* A GEMM epilogue's tail on one row of C: += bias (NULL: none), then relu. Each a loop the
 * compiler vectorises. */
static inline void cpu_bias_relu_row(float *c, int n, const float *bias, int relu)
{
    if (bias)
#pragma omp simd
        for (int j = 0; j < n; j++)
            c[j] += bias[j];
    if (relu)
#pragma omp simd
        for (int j = 0; j < n; j++)
            c[j] = c[j] > 0.0f ? c[j] : 0.0f;
}

/* ---- oneDNN's matmuls (cpu_dnnl.c) ---- */

/* INT8_PACKED: the weights in the packed layout of cpu_i8_pack.c (ldb and trans_b unused) */
typedef enum cpu_matmul_kind {
    CPU_MATMUL_INT8,
    CPU_MATMUL_BF16,
    CPU_MATMUL_INT8_PACKED
} cpu_matmul_kind;
/* A matmul's shape: op(src) [m, k], op(wei) [k, n], stored as clf_gemm_args says for A
 * (trans_a, lda) and B (trans_b, ldb). Compared bytewise (ints only: no padding). */
typedef struct cpu_matmul_shape {
    int m, n, k, trans_a, trans_b, lda, ldb;
} cpu_matmul_shape;
struct cpu_dnnl_cache;
/* The engine, stream and primitive cache, and the scratch the products share (grown as
 * needed): the converted activations (and weights, for BF16 arithmetic without b_bf16), a
 * scale per row, the raw products. */
typedef struct cpu_dnnl {
    struct cpu_dnnl_cache *cache;
    void *src, *wsrc;
    float *row_scale;
    void *acc;
    size_t src_cap, wsrc_cap, row_scale_cap, acc_cap;
    int packs; /* cpu_dnnl_i8_packs: -1 until asked */
} cpu_dnnl;
clf_status cpu_dnnl_open(cpu_dnnl **out);
void cpu_dnnl_close(cpu_dnnl *q); /* NULL is fine */
/* dst [m, n] (dense) = op(src) op(wei) of shape sh: u8 x s8 -> s32 (CPU_MATMUL_INT8, or
 * _PACKED) or bf16 x bf16 -> f32, on threads threads. */
clf_status cpu_dnnl_matmul(cpu_dnnl *q, cpu_matmul_kind kind, const cpu_matmul_shape *sh, void *src,
                           const void *wei, void *dst, int threads);
/* The int8 products of weights as stored (not packed: cpu_i8_pack.c) with at least this
 * many weight rows (an output layer over a vocabulary) run oneDNN's igemm
 * (dnnl_gemm_u8s8s32) rather than its brgemm matmul: on
 * NLLB's and OPUS-MT's output layers it took as long or less (bench/dnnl_int8_paths.c,
 * bench/RESULTS.md), where for the layers inside a model neither wins everywhere (the
 * igemm is far behind at k 4096). It needs no primitive made per row count either. */
#define CPU_I8_IGEMM_MIN_N 32768
/* dst [m, n] (dense) = src [m, k] (u8, rows sh->lda apart) times wei^T (s8 [n, k], rows
 * sh->ldb apart), exactly, int32 (sh->trans_a 0, trans_b 1), on threads threads. */
clf_status cpu_dnnl_igemm(const cpu_matmul_shape *sh, const uint8_t *src, const int8_t *wei,
                          int32_t *dst, int threads);

/* 1 when oneDNN's int8 matmul reads its weights in the packed layout (cpu_i8_pack.c) on
 * this CPU (brgemm with AVX-512), asked once. */
int cpu_dnnl_i8_packs(cpu_dnnl *q);

/* ---- int8 weights kept packed (cpu_i8_pack.c) ---- */

/* A span of a buffer holding int8 weight rows in the packed layout: rows (a multiple of
 * 64) rows of k bytes from off. */
typedef struct cpu_i8_span {
    const struct clf_buffer *buf;
    size_t off;
    int rows, k;
} cpu_i8_span;
/* 1 when this backend packs int8 weights: 8-bit activations (AVX-512 VNNI), the AVX-512
 * level, and cpu_dnnl_i8_packs. */
int cpu_i8_packs(clf_backend *be);
/* The leading rows of product a's weights that it reads packed: 0 (every row as stored), or
 * a multiple of 64 whose rows are packed now (packing them in place if they were not); the
 * rest (fewer than 64) stay rows. Packs only where cpu_i8_packs and the weights are rows
 * of k bytes, k a multiple of 64; spans packed another way are unpacked first. */
clf_status cpu_i8_packed_rows(clf_backend *be, const clf_gemm_args *a, int *rows);
/* Unpacks every packed span that overlaps [off, off + bytes) of buf: what the backend
 * does before anything else reads or writes those bytes (upload, download, copy, discard),
 * so that outside the int8 products a buffer always holds what was put there. */
clf_status cpu_i8_unpack(clf_backend *be, const struct clf_buffer *buf, size_t off, size_t bytes);
/* Forgets buf's packed spans (it is being freed). */
void cpu_i8_forget(clf_backend *be, const struct clf_buffer *buf);

/* ---- int8 weights (cpu_gemm_i8.c) ---- */

/* The most rows a product runs with the own AVX2 kernel (7-bit activations), else oneDNN. */
#define CPU_I8_FEW_ROWS 24
/* The int8 products' activation range, chosen once at open (clf_backend.i8_qmax): 127
 * (8 bits) with AVX-512 VNNI, 64 (7 bits) without (cpu_gemm_i8.c says why). */
int cpu_i8_choose_qmax(void);
/* 1 when gemm reads a->b_i8: trans_a = 0, trans_b = 1, k > 0 and b_i8 set. */
int cpu_gemm_i8_applies(const clf_gemm_args *a);
/* The product of cpu_gemm_i8_applies(a) (clformer/backend.h) with its epilogue; the other
 * operands have passed check_gemm. CLF_ERR_INPUT when b_i8 or b_scale is out of bounds. */
clf_status cpu_gemm_i8(clf_backend *be, const clf_gemm_args *a);

/* ---- int8 weights with AVX-512 VNNI (cpu_gemm_i8_vnni.c) ---- */

/* The most rows a product runs with the VNNI kernel (on packed weights or as stored),
 * else oneDNN: from 1 to 8 rows it took 0.26-0.9x oneDNN 2.6's time on NLLB-600M's shapes,
 * even at 12, behind from 16 (bench/RESULTS.md). */
#define CPU_I8_VNNI_ROWS 12
/* 1 when cpu_i8_vnni_product runs a: 8-bit activations (VNNI), the AVX-512 level, m rows
 * at most CPU_I8_VNNI_ROWS. */
int cpu_i8_vnni_applies(const clf_backend *be, const clf_gemm_args *a);
/* acc [m, n - first] (dense) = ua [m, k] (u8, rows a->lda apart) times W^T for W's rows
 * first .. n - 1 (a->b_i8, s8 [n, k], rows a->ldb apart), exactly, int32. */
void cpu_i8_vnni_product(clf_backend *be, const clf_gemm_args *a, const uint8_t *ua, int32_t *acc,
                         int first);
/* acc [m, rows] (dense) = the same for W's first rows rows (a multiple of 64), packed
 * (cpu_i8_pack.c). */
void cpu_i8_vnni_packed(clf_backend *be, const clf_gemm_args *a, const uint8_t *ua, int rows,
                        int32_t *acc);

/* ---- BF16 weights in products of many rows (cpu_gemm_bf16.c) ---- */

/* 1 when this CPU multiplies BF16 natively (AVX512_BF16) and CLF_CPU_BF16_ARITH is not
 * "off"; CLF_ERR_INPUT for another value of it. */
clf_status cpu_bf16_arith_choose(int *on);
/* 1 when gemm runs in BF16 arithmetic: be->bf16_arith, more than CPU_GEMV_MAX_ROWS rows,
 * k > 0, and a->bf16_arith or b_bf16 with trans_a = 0, trans_b = 1. */
int cpu_gemm_bf16_applies(const clf_backend *be, const clf_gemm_args *a);
/* C = relu?(alpha * bf16(op(A)) bf16(op(B)) + beta C + bias), the sums in F32 (oneDNN); B
 * from b_bf16 where given. */
clf_status cpu_gemm_bf16(clf_backend *be, const clf_gemm_args *a);

/* ---- training ops (ABI 2: cpu_train.c, cpu_attention_backward.c), semantics in
 * clformer/backend.h ---- */

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
