/* clformer/backend.h - the backend ABI and the plugin loader.
 *
 * A backend is a shared object (clformer-<name>.so) that exports one symbol,
 * clf_backend_entry, returning a const clf_backend_api whose first field is abi_version.
 * The loader refuses a table whose version differs from CLF_BACKEND_ABI.
 *
 * Memory is backend-owned buffers (clf_buffer); an operand is a buffer plus a byte offset
 * (clf_ptr). All tensors are row-major F32 unless stated (ids and masks are I32).
 * Ops are asynchronous: they may be queued until synchronize() or a download(). Ops run in
 * submission order (one in-order queue), so an op may read what the previous one wrote.
 *
 * Ops report bad arguments as CLF_ERR_INPUT and device failures as CLF_ERR_BACKEND, with
 * a message naming the op (and, for OpenCL, the call and the error name). The core calls
 * every op and upload, download and copy only through clformer/ops.h, which has already
 * checked what needs no device knowledge (sizes, strides, ranges, operand bounds and
 * alignment, the aliasing rules below, a plugin op's kind and gates); a backend checks only
 * what is its own (device limits, the operands only its fast paths read, whether it has a
 * form of a plugin op, a NULL args struct).
 *
 * Aliasing: two operands alias when they share a byte of one buffer. Inputs may alias each
 * other freely. An output may alias an input only where its op's comment says so, and then
 * only as the very same span (the op runs in place: the backend orders every read of an
 * element before the write over it); a partial overlap is refused. Everything else an op writes may
 * not overlap anything it reads: gemm's C may not overlap A, B, b_half, b_bf16, b_i8, b_scale or
 * bias. What this forbids is refused (CLF_ERR_INPUT) rather than computed with, by the core
 * (clformer/ops.h) before the call: on a GPU the
 * work-items of a parallel op run in no fixed order, so a write over another work-item's input
 * is a race. */
#ifndef CLFORMER_BACKEND_H
#define CLFORMER_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "clformer/export.h"
#include "clformer/plugin.h"
#include "clformer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever the layout or meaning of clf_backend_api or an args struct changes.
 * ABI 3 added the plugin ops and attention dropout (clf_attention_args.dropout_p and
 * dropout_seed); ABI 4 added clf_gemm_args.b_half; ABI 5 (not yet released) adds b_bf16, b_i8 and
 * b_scale, the capabilities CLF_OP_GEMM_BF16 and CLF_OP_GEMM_I8, buffer_size (the core
 * checks operand bounds, clformer/ops.h), and clf_attention_args.kv_rows with its
 * capability CLF_OP_ATTENTION_KV_ROWS, discard, and the capability CLF_OP_GEMM_HALF_ARITH; ABI 6
 * adds topk (a beam search's best continuations chosen on the device) and the capability
 * CLF_OP_GEMM_BF16_ARITH; ABI 7 adds clf_gemm_args.bf16_arith (BF16 arithmetic asked for by
 * the core: the precision setting, clformer/model.h) and the capability CLF_OP_QUEUED; ABI 8
 * adds clf_topk_args.log_softmax with its capability CLF_OP_TOPK_LOG_SOFTMAX; ABI 9 adds the
 * attention op's append (clf_attention_args.k_new, v_new) with its capability
 * CLF_OP_ATTENTION_APPEND, and gemm's layernorm of A (clf_gemm_args.ln_out, ln_alpha,
 * ln_beta, ln_style, ln_eps) with its capability CLF_OP_GEMM_LAYERNORM; ABI 10 adds positions
 * read on the device (clf_attention_args.pos_add, clf_embed_args.pos_add) with the capability
 * CLF_OP_DEVICE_POS, and capture and replay (capture_begin, capture_end, replay,
 * capture_free) with the capability CLF_OP_CAPTURE; ABI 11 adds beam_choose (a beam search's
 * next beams chosen on the device) with its capability CLF_OP_BEAM_CHOOSE. */
#define CLF_BACKEND_ABI 11

typedef struct clf_backend clf_backend; /* opaque, defined by each backend */
typedef struct clf_buffer clf_buffer;   /* opaque, defined by each backend */
typedef struct clf_capture clf_capture; /* opaque: recorded ops (capture_begin) */

/* An operand: a buffer and a byte offset into it. buf == NULL means "absent". */
typedef struct clf_ptr {
    clf_buffer *buf;
    size_t off; /* bytes */
} clf_ptr;

static inline clf_ptr clf_ptr_add(clf_ptr p, size_t bytes)
{
    p.off += bytes;
    return p;
}

/* 1 when the byte spans [a.off, a.off + abytes) and [b.off, b.off + bbytes) share a byte of
 * one buffer: the aliasing rule above, for the core's op checks and the backends' own. */
static inline int clf_ptr_overlap(clf_ptr a, uint64_t abytes, clf_ptr b, uint64_t bbytes)
{
    return a.buf && a.buf == b.buf && abytes && bbytes && a.off < b.off + bbytes &&
           b.off < a.off + abytes;
}

/* Elements an operand spans from its offset: rows rows of cols elements, ld apart, repeated
 * batch times stride apart; 0 when a count is 0, UINT64_MAX when that does not fit in 64
 * bits (and so fails any bounds check). */
static inline uint64_t clf_span_elems(uint64_t rows, uint64_t cols, uint64_t ld, uint64_t batch,
                                      uint64_t stride)
{
    uint64_t one, all;
    if (rows == 0 || cols == 0 || batch == 0)
        return 0;
    if (__builtin_mul_overflow(rows - 1, ld, &one) || __builtin_add_overflow(one, cols, &one) ||
        __builtin_mul_overflow(batch - 1, stride, &all) || __builtin_add_overflow(all, one, &all))
        return UINT64_MAX;
    return all;
}

typedef struct clf_backend_opts {
    int abi_version;       /* CLF_BACKEND_ABI */
    const char *device;    /* NULL or "" = default; else an index ("1") or a name substring */
    int threads;           /* cpu: 0 = all cores */
    const char *cache_dir; /* opencl: program cache dir; NULL = default, "off" = none */
} clf_backend_opts;

typedef struct clf_device_info {
    int index;
    char platform[128];
    char name[128];
    char type[16]; /* "GPU", "CPU", "ACCELERATOR", ... */
    int compute_units;
    uint64_t global_mem_bytes;
    uint64_t max_alloc_bytes;
    char version[64]; /* OpenCL C version, or the CPU backend's BLAS */
    int fp16;         /* half-precision arithmetic supported */
} clf_device_info;

typedef void (*clf_device_fn)(void *user, const clf_device_info *info);

/* The ops a backend may implement; supports() says which it does. */
typedef enum clf_op {
    CLF_OP_GEMM = 0,
    CLF_OP_GEMM_STRIDED_BATCHED,
    CLF_OP_LAYERNORM,
    CLF_OP_ATTENTION,
    CLF_OP_EMBED,
    CLF_OP_ADD,
    CLF_OP_SOFTMAX,
    CLF_OP_ARGMAX,
    /* training (ABI 2) */
    CLF_OP_RELU_BACKWARD,
    CLF_OP_LAYERNORM_BACKWARD,
    CLF_OP_ATTENTION_BACKWARD,
    CLF_OP_EMBED_BACKWARD,
    CLF_OP_DROPOUT,
    CLF_OP_CROSS_ENTROPY,
    CLF_OP_ADAM,
    CLF_OP_SUM_SQUARES,
    CLF_OP_FILL,
    /* plugin ops (ABI 3) */
    CLF_OP_ACTIVATION,
    CLF_OP_ACTIVATION_BACKWARD,
    CLF_OP_NORM,
    CLF_OP_NORM_BACKWARD,
    /* capabilities, not ops of their own (ABI 5): gemm reads b_bf16 / b_i8 (no graph node
     * has these ops; supports() answers for them, and a model refuses the weight type
     * on a backend that says no) */
    CLF_OP_GEMM_BF16,
    CLF_OP_GEMM_I8,
    /* attention reads clf_attention_args.kv_rows (ABI 5) */
    CLF_OP_ATTENTION_KV_ROWS,
    /* gemm reads b_half in products of many rows too, in half-precision arithmetic (ABI 5;
     * see b_half below): the OpenCL backend on a device with cl_khr_fp16 */
    CLF_OP_GEMM_HALF_ARITH,
    /* decoding (ABI 6) */
    CLF_OP_TOPK,
    /* gemm reads b_bf16 in products of many rows too, in BF16 arithmetic (ABI 6; see
     * b_bf16 below), and honours bf16_arith (ABI 7): the CPU backend on a CPU with
     * AVX512_BF16 */
    CLF_OP_GEMM_BF16_ARITH,
    /* the backend queues ops: a call may return before the device has run it (download and
     * synchronize wait for it), so the host should not wait on every step (ABI 7): decoding
     * then runs steps ahead, feeding each step's argmax (or, with beam_choose, its beams) to
     * the next on the device (clf_decode_opts.sync_steps). The OpenCL backend. No entry of the
     * table goes with it. */
    CLF_OP_QUEUED,
    /* topk honours clf_topk_args.log_softmax (ABI 8) */
    CLF_OP_TOPK_LOG_SOFTMAX,
    /* attention appends clf_attention_args.k_new and v_new to its keys and values (ABI 9) */
    CLF_OP_ATTENTION_APPEND,
    /* gemm layer-normalizes A's rows first (clf_gemm_args.ln_out; ABI 9) */
    CLF_OP_GEMM_LAYERNORM,
    /* attention and embed add the I32 at pos_add to their positions (ABI 10) */
    CLF_OP_DEVICE_POS,
    /* capture_begin, capture_end, replay and capture_free are there (ABI 10) */
    CLF_OP_CAPTURE,
    /* decoding (ABI 11): beam_choose */
    CLF_OP_BEAM_CHOOSE,
    CLF_OP_COUNT
} clf_op;

CLF_API const char *clf_op_name(clf_op op);

typedef enum clf_ln_style {
    CLF_LN_TUTORIAL = 0, /* a*(x-mean)/(std_unbiased+eps)+b  (the tutorials' LayerNorm) */
    CLF_LN_STANDARD = 1  /* a*(x-mean)/sqrt(var_biased+eps)+b (torch.nn.LayerNorm) */
} clf_ln_style;

/* C[m,n] = alpha * op(A) op(B) + beta * C, then + bias[n] (if bias.buf), then relu (if relu).
 * C may not overlap A, B, b_half, b_bf16, b_i8, b_scale or bias (clf_check_gemm_overlap); A
 * and B may overlap.
 * op(A) is [m,k]: A is stored [m,k] (lda >= k) or, with trans_a, [k,m] (lda >= m).
 * op(B) is [k,n]: B is stored [k,n] (ldb >= n) or, with trans_b, [n,k] (ldb >= k).
 * A Linear layer y = x W^T + b is trans_b = 1 with W [out,in].
 * For gemm_strided_batched, batch matrices follow each other at stride_a/b/c elements;
 * gemm ignores batch and the strides. The bias (if any) is shared by all batches.
 *
 * b_half (gemm only, optional): B again as IEEE binary16 (uint16_t elements), same layout
 * and ldb, element offset = b's. A backend may read it instead of b where that is faster:
 * the products of a few rows (decoding at batch 1, a small beam) stream all of B once per
 * call and are bound by memory bandwidth, so half the bytes is nearly half the time. The
 * products then use B rounded to F16 and accumulate in F32. A backend that ignores b_half
 * is correct; each backend's README says when it reads it. A backend whose
 * supports(CLF_OP_GEMM_HALF_ARITH) is 1 also reads it in products of many rows (the encoder,
 * batched decoding), in the device's half precision: A rounded to F16 and the sums in F16
 * (CLBlast's HGEMM), so such products lose more precision, and values beyond F16's range
 * (65504) overflow to infinity; alpha, beta, the bias and relu still apply in F32.
 *
 * b_bf16 (gemm only, optional, ABI 5): B again as bfloat16 (the high 16 bits of the F32),
 * same layout and ldb, element offset = b's; read like b_half (the products of a few rows),
 * by a backend whose supports(CLF_OP_GEMM_BF16) is 1. A backend whose
 * supports(CLF_OP_GEMM_BF16_ARITH) is 1 also reads it in products of many rows with
 * trans_a = 0 and trans_b = 1, in BF16 arithmetic: A rounded to BF16 (to nearest even), the
 * exact products summed in F32; alpha, beta, the bias and relu in F32.
 *
 * bf16_arith (gemm only, optional, ABI 7): nonzero asks for BF16 arithmetic in a product of
 * many rows, whatever trans_a and trans_b: op(A) and op(B) rounded to BF16 (to nearest
 * even), the exact products summed in F32; alpha, beta, the bias and relu in F32. B is read
 * from b_bf16 where given (then B's BF16 copy, same layout), else rounded from b. A backend
 * whose supports(CLF_OP_GEMM_BF16_ARITH) is 1 honours it in its products of many rows (the
 * CPU backend's 8+); its products of few rows ignore it and, with it set, do not read
 * b_bf16 either (they multiply b in F32: the copy is there for the arithmetic only). The
 * core sets it only on a backend with that capability; another backend ignores it (F32).
 *
 * b_i8, b_scale (gemm only, optional, ABI 5; only with trans_a = 0, trans_b = 1): the
 * weight matrix quantized per output channel, B[j,p] ~ b_i8[j,p] * b_scale[j], int8
 * elements [n, k] rows ldb apart (element offset = b's), b_scale F32 [n]. A backend whose
 * supports(CLF_OP_GEMM_I8) is 1 then computes every product of this call, whatever m, as
 *   C[i,j] = relu?(alpha * sa[i] * b_scale[j] * sum_p qa[i,p] b_i8[j,p] + beta C + bias[j])
 * with A quantized per row at run time, qa[i,p] = round(A[i,p] / sa[i]) (symmetric, to the
 * precision its integer product holds without overflow: the CPU backend uses 7 bits, so
 * that AVX2's 16-bit pair sums cannot saturate), summed in int32. Such a backend never reads
 * b in that call, so the core may have released b's bytes (discard below,
 * clf_model_release_f32).
 *
 * ln_out, ln_alpha, ln_beta, ln_style, ln_eps (gemm only, optional, ABI 9; only with
 * trans_a = 0 and lda = k; a backend that supports CLF_OP_GEMM_LAYERNORM reads them, the
 * core refuses them elsewhere): with ln_out set, A's rows are layer-normalized first, as the
 * layernorm op does (clf_layernorm_args: style, eps, alpha = ln_alpha [k], beta = ln_beta
 * [k], no residual), into ln_out [m, k], and the product multiplies those rows:
 *   ln_out[i, :] = LN(A[i, :]);   C = alpha * ln_out · op(B) + beta * C, bias, relu.
 * ln_out is written whatever path the backend takes (a later op may read it: a post-norm
 * residual stream, a gated feed-forward's second product; an empty product, m or n 0,
 * writes nothing) and may not overlap A, B, C, the bias or ln_alpha/ln_beta. A decoding
 * step's layernorm then costs no call of its own: the product after it takes it (a backend
 * may normalize inside its product's kernel). */
typedef struct clf_gemm_args {
    int trans_a, trans_b;
    int m, n, k;
    float alpha, beta;
    clf_ptr a;
    int lda;
    clf_ptr b;
    int ldb;
    clf_ptr c;
    int ldc;
    clf_ptr bias;                        /* [n] F32, optional */
    int relu;                            /* 1: C = max(C, 0) after the bias */
    clf_ptr b_half;                      /* optional: B as F16 (see above) */
    clf_ptr b_bf16;                      /* optional: B as BF16 (ABI 5, see above) */
    clf_ptr b_i8;                        /* optional: B as int8 (ABI 5, see above) */
    clf_ptr b_scale;                     /* with b_i8: F32 [n] per-channel scales */
    int bf16_arith;                      /* 1: BF16 arithmetic (ABI 7, see above) */
    int batch;                           /* gemm_strided_batched only */
    size_t stride_a, stride_b, stride_c; /* elements, gemm_strided_batched only */
    clf_ptr ln_out, ln_alpha, ln_beta;   /* optional: A layer-normalized (ABI 9, see above) */
    clf_ln_style ln_style;
    float ln_eps;
} clf_gemm_args;

/* out[r,:] = LN(x[r,:] + residual[r,:]) for r < rows, over cols features.
 * residual is optional (buf NULL: plain LN of x). If sum_out.buf is set, x + residual is
 * also written there (it may alias x: the pre-norm residual stream). out may not alias x.
 * Rows are contiguous with cols elements each. alpha, beta: [cols]. */
typedef struct clf_layernorm_args {
    clf_ptr out, x, residual, sum_out, alpha, beta;
    int rows, cols;
    clf_ln_style style;
    float eps;
} clf_layernorm_args;

/* What a gemm with ln_out (clf_gemm_args above) is made of, for a backend that runs it as
 * two steps: the layernorm of A's rows into ln_out, then the product of those rows. */
static inline clf_layernorm_args clf_gemm_layernorm(const clf_gemm_args *g)
{
    return (clf_layernorm_args){.out = g->ln_out,
                                .x = g->a,
                                .alpha = g->ln_alpha,
                                .beta = g->ln_beta,
                                .rows = g->m,
                                .cols = g->k,
                                .style = g->ln_style,
                                .eps = g->ln_eps};
}

static inline clf_gemm_args clf_gemm_after_layernorm(const clf_gemm_args *g)
{
    clf_gemm_args h = *g;
    h.a = g->ln_out;
    h.lda = g->k;
    h.ln_out = (clf_ptr){0};
    return h;
}

/* Scaled dot-product attention with heads split from the feature dim
 * (view(B,T,h,dk).transpose(1,2) in PyTorch):
 *   q(b,i,h,:) = q[b*q_bstride + i*q_ld + h*head_dim + 0..head_dim)     i < q_len
 *   k(b,j,h,:) = k[b*kv_bstride + j*k_ld + h*head_dim + ...]            j < kv_len
 *   v(b,j,h,:) = v[b*kv_bstride + j*v_ld + h*head_dim + ...]
 *   s(i,j) = scale * q.k, replaced by -1e9 where masked (exactly as masked_fill(-1e9)),
 *   masked = (key_mask.buf && key_mask[b*key_mask_stride + j] == 0)
 *            || (causal && j > q_pos0 + i)
 *   out(b,i,h,:) = softmax_j(s) . v   written at out[b*out_bstride + i*out_ld + h*head_dim]
 *   probs (optional) [batch, heads, q_len, kv_len] contiguous: the softmax itself.
 * A fully masked row stays finite (uniform weights, as PyTorch gives). Strides are in
 * elements; key_mask is I32. q_pos0 is the absolute position of query 0 (decoding with a
 * KV cache: q_pos0 = kv_len - q_len).
 * Dropout on the probabilities (ABI 3; the tutorial's p_attn = dropout(p_attn) before
 * p_attn @ value; training only): with dropout_p > 0 the weights applied to v are
 *   w(i,j) = softmax_j(s)(i,j) * keep(e) * (1.0f / (1.0f - dropout_p))   (that float)
 *   keep(e) = clf_dropout_bits(dropout_seed, e) >= clf_dropout_threshold(dropout_p)
 *   e = ((b * heads + h) * q_len + i) * kv_len + j                      (uint64 arithmetic)
 * so out(b,i,h,:) = sum_j w(i,j) v_j and every backend drops the same (i, j) for a seed
 * (the mask depends on (seed, e) only: give every site and step its own seed). probs, if
 * set, still receives the softmax before dropout. dropout_p = 0 (a zeroed struct) is off:
 * the result is bit-identical to an op without these fields, and the seed is ignored.
 * 0 <= dropout_p < 1, else CLF_ERR_INPUT.
 * Key/value rows through a table (ABI 5, forward only; a backend that supports
 * CLF_OP_ATTENTION_KV_ROWS reads it, the core refuses it elsewhere): with kv_rows set
 * (I32, kv_rows_ld >= kv_len apart per batch entry), key j of batch entry b is read from
 * entry e = kv_rows[b*kv_rows_ld + j] instead of b,
 *   k(b,j,h,:) = k[e*kv_bstride + j*k_ld + h*head_dim + ...], v likewise,
 * with 0 <= e < kv_entries (k and v span kv_entries entries; a backend clamps an entry
 * out of that range rather than read out of bounds). Decoding uses it so that beams that
 * share a history, or a source, read one copy of its keys and values instead of copying
 * the cache to every beam each step (decode.c).
 * Appending this step's keys and values (ABI 9, forward only, q_len = 1; a backend that
 * supports CLF_OP_ATTENTION_APPEND reads it, the core refuses it elsewhere): with k_new set,
 * before any key is read, row new_pos >= 0 of each batch entry's own keys and values is
 * written,
 *   k[b*kv_bstride + new_pos*k_ld + c] = k_new[b*new_ld + c],  v likewise from v_new,
 * for b < batch and c < heads*head_dim (new_pos may lie past kv_len: a decoder that keeps
 * its rows in a pool reads them back through the row table). In this call only batch entry
 * b may read the row it wrote (a backend writes and reads one entry's rows in one place).
 * A decoding step then makes q, k and v in one product and the attention op stores the
 * cache rows itself: one backend call fewer a layer.
 * A position read on the device (ABI 10, forward only, without probs and dropout; a backend
 * that supports CLF_OP_DEVICE_POS reads it, the core refuses it elsewhere): with pos_add set
 * (I32), p = pos_add[0] clamped to [0, pos_add_max] is added to kv_len, q_pos0 and new_pos
 * when the op runs; the core checks the operands for p = pos_add_max. A decoding step so
 * takes its position from a device buffer and its calls stay the same from step to step,
 * which is what lets a backend replay them (capture_begin below). */
typedef struct clf_attention_args {
    int batch, heads, q_len, kv_len, head_dim;
    clf_ptr q, k, v, out;
    int q_ld, k_ld, v_ld, out_ld;
    size_t q_bstride, kv_bstride, out_bstride;
    clf_ptr key_mask; /* I32, optional */
    size_t key_mask_stride;
    int causal;
    int q_pos0;
    float scale;
    clf_ptr probs;         /* optional */
    float dropout_p;       /* 0 = off; training only, 0 <= p < 1 */
    uint64_t dropout_seed; /* the mask's seed (see above) */
    clf_ptr kv_rows;       /* I32, optional (ABI 5, see above) */
    int kv_rows_ld, kv_entries;
    clf_ptr k_new, v_new; /* optional (ABI 9, see above): rows [batch, heads*head_dim] */
    int new_ld, new_pos;
    clf_ptr pos_add; /* I32, optional (ABI 10, see above) */
    int pos_add_max;
} clf_attention_args;

/* out[r,:] = table[ids[r],:] * scale + pe[pos0 + r % seq_len, :]
 * ids: I32 [rows]; table: [vocab, dim]; pe: [max_len, dim] (pe.buf NULL: no PE).
 * The caller guarantees 0 <= ids < vocab and pos0 + seq_len <= max_len; a backend still
 * clamps out-of-range ids rather than read out of bounds. With pos_add set (I32, ABI 10,
 * CLF_OP_DEVICE_POS as for attention) p = pos_add[0] clamped to [0, pos_add_max] is added
 * to pos0 when the op runs; the core checks pe for p = pos_add_max. */
typedef struct clf_embed_args {
    clf_ptr out, ids, table, pe;
    int rows, seq_len, pos0, dim, vocab;
    float scale;
    clf_ptr pos_add; /* I32, optional (ABI 10) */
    int pos_add_max;
} clf_embed_args;

/* ---- training (ABI 2) ----
 * The backward of a GEMM is GEMMs (dX = dY W, dW += dY^T X, dbias += 1^T dY), so it needs
 * no op of its own; the ops below are the rest. Parameter gradients (dalpha, dbeta,
 * dtable) always accumulate (+=): the trainer zeroes them with fill() once per optimizer
 * step, which is what makes gradient accumulation free. Reductions over rows run in a
 * fixed order, so a backend gives the same bits run after run. */

/* Backward of clf_layernorm_args without residual (the trainer keeps the LN input x):
 *   xhat = (x - mean) / D, D = std_unbiased + eps (tutorial) or sqrt(var_biased + eps)
 *   dx (= or, with accumulate, +=) d loss / d x given dy = d loss / d out
 *   dalpha[c] += sum_r dy[r,c] * xhat[r,c];  dbeta[c] += sum_r dy[r,c]   (each optional)
 * dx may not alias dy or x. */
typedef struct clf_layernorm_backward_args {
    clf_ptr dx, dy, x, alpha, dalpha, dbeta;
    int rows, cols;
    clf_ln_style style;
    float eps;
    int accumulate;
} clf_layernorm_backward_args;

/* Backward of the attention op described by fwd (its geometry, mask, causal flag, scale;
 * fwd.out and fwd.probs are ignored): given dout laid out as fwd.out (out_ld,
 * out_bstride), writes dq, dk, dv laid out as fwd.q, fwd.k, fwd.v (q_ld/q_bstride,
 * k_ld/kv_bstride, v_ld/kv_bstride). The softmax is recomputed from q and k (nothing is
 * saved by the forward op). Overwrites the heads*head_dim columns of every row of dq
 * (q_len rows), dk and dv (kv_len rows) and touches nothing else, so dq, dk and dv may be
 * column slices of one buffer (the fused [q|k|v] gradient). The derivative is PyTorch's
 * through the -1e9 fill: a masked (query, key) pair gives q and k no gradient, but a fully
 * masked query row has uniform weights, so its dout still reaches v. q_len = 0 zeroes dk
 * and dv. Outputs may not overlap inputs. A backend may keep internal scratch.
 * With fwd.dropout_p > 0 the backward uses the forward's mask (the same fwd.dropout_seed),
 * w(i,j) and keep as in clf_attention_args, P = softmax_j(s):
 *   dv_j = sum_i w(i,j) dout_i
 *   dP(i,j) = (dout_i . v_j) * keep(e) * (1.0f / (1.0f - dropout_p))
 *   dS(i,j) = P(i,j) (dP(i,j) - sum_k P(i,k) dP(i,k)), 0 where masked
 *   dq_i = scale sum_j dS(i,j) k_j,  dk_j = scale sum_i dS(i,j) q_i
 * (the mask is a constant of the seed, so this is the exact gradient of the forward). */
typedef struct clf_attention_backward_args {
    clf_attention_args fwd;
    clf_ptr dout, dq, dk, dv;
} clf_attention_backward_args;

/* Backward of embed: dtable[ids[r], :] += scale * dout[r, :] for r < rows, rows with the
 * same id summed in increasing r (deterministic). Out-of-range ids are skipped. */
typedef struct clf_embed_backward_args {
    clf_ptr dtable, dout, ids;
    int rows, dim, vocab;
    float scale;
} clf_embed_backward_args;

/* Inverted dropout: out[i] = keep(i) ? x[i] * (1.0f / (1.0f - p)) : 0, i < n, where
 * keep(i) = clf_dropout_bits(seed, i) >= clf_dropout_threshold(p). Every backend draws
 * the same mask from the same seed (a stateless hash of the element index), so the
 * backward pass is the same op on the gradient and CPU and OpenCL runs agree bit for bit
 * on which elements drop. The mask depends on (seed, i) only: callers give every site and
 * step its own seed. out may alias x (exactly, not partly). 0 <= p < 1. */
typedef struct clf_dropout_args {
    clf_ptr out, x;
    size_t n;
    float p;
    uint64_t seed;
} clf_dropout_args;

/* splitmix64 of seed + (i + 1) * golden, high 32 bits. */
static inline uint32_t clf_dropout_bits(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (uint32_t)(z >> 32);
}

static inline uint32_t clf_dropout_threshold(float p)
{
    double t = (double)p * 4294967296.0;
    return t >= 4294967295.0 ? 4294967295u : (uint32_t)t;
}

/* Label-smoothed cross-entropy of logits [rows, cols] against targets (I32 [rows]), as
 * PyTorch's CrossEntropyLoss(label_smoothing=ls, ignore_index=ignore, reduction='none'):
 *   lp = log_softmax(logits[r,:])
 *   loss[r] = -(1 - ls) * lp[t] - (ls / cols) * sum_j lp[j]        (0 where t == ignore)
 *   dlogits[r,j] = grad_scale * (exp(lp[j]) - (1 - ls) * [j == t] - ls / cols)
 *                                                                   (0 rows where t == ignore)
 * loss is F32 [rows]. dlogits is optional (buf NULL: loss only) and may alias logits.
 * Targets outside [0, cols) other than ignore are a caller error (the row is zeroed). */
typedef struct clf_cross_entropy_args {
    clf_ptr loss, dlogits, logits, targets;
    int rows, cols, ignore_index;
    float label_smoothing, grad_scale;
} clf_cross_entropy_args;

/* One Adam (decoupled = 0) or AdamW (decoupled = 1) step over n parameters, exactly as
 * torch.optim.Adam / AdamW (not amsgrad, not maximize):
 *   g = grad[i] * grad_scale            (grad_scale: 1/accumulate and the clipping factor)
 *   Adam:  g += weight_decay * p                     AdamW: p *= 1 - lr * weight_decay
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
 *   p -= (lr / bias_correction1) * m / (sqrt(v) / sqrt_bias_correction2 + eps)
 * bias_correction1 = 1 - beta1^t and sqrt_bias_correction2 = sqrt(1 - beta2^t) come
 * from the caller (computed in double). grad is not modified. */
typedef struct clf_adam_args {
    clf_ptr param, grad, m, v;
    size_t n;
    float lr, beta1, beta2, eps, weight_decay, grad_scale;
    float bias_correction1, sqrt_bias_correction2;
    int decoupled;
} clf_adam_args;

/* ---- plugin ops (ABI 3) ----
 * The math comes from a plugin op (clformer/plugin.h); the backend applies it. A backend
 * first sees each op in plugin_prepare(), which fails with CLF_ERR_UNSUPPORTED naming the
 * op and the backend when the plugin has no form for it (and, for OpenCL, compiles the
 * op's source there, so a build error surfaces before any work runs). */

/* out[i] = f(x[i]) * (gate.buf ? gate[i] : 1), i < n, with f = op (an activation kind;
 * gate is set exactly for CLF_PLUGIN_GATED_ACTIVATION). out may alias x, not gate. */
typedef struct clf_activation_args {
    const clf_plugin_op *op;
    clf_ptr out, x, gate;
    size_t n;
} clf_activation_args;

/* Backward of clf_activation_args (the same op, x and gate), given dy:
 *   dx[i] = dy[i] * gate[i] * f'(x[i])       (gate[i] read as 1 without a gate)
 *   dgate[i] = dy[i] * f(x[i])               (gate and dgate set together)
 * Both are overwritten; they may not alias each other, x or gate; dx may alias dy only
 * without a gate; dgate may alias dy. */
typedef struct clf_activation_backward_args {
    const clf_plugin_op *op;
    clf_ptr dx, dgate, dy, x, gate;
    size_t n;
} clf_activation_backward_args;

/* out[r,:] = alpha * n(x[r,:]) + (beta.buf ? beta : 0) for r < rows, over cols features,
 * with n = op (CLF_PLUGIN_NORM). out may not alias x, alpha or beta. alpha, beta: [cols]. */
typedef struct clf_norm_args {
    const clf_plugin_op *op;
    clf_ptr out, x, alpha, beta;
    int rows, cols;
    float eps;
} clf_norm_args;

/* Backward of clf_norm_args, given dy:
 *   dx[r,:] (= or, with accumulate, +=) J_n(x[r,:])^T (alpha * dy[r,:])
 *   dalpha[c] += sum_r dy[r,c] * n(x[r,:])[c];  dbeta[c] += sum_r dy[r,c]   (each optional)
 * Sums over rows in a fixed order (deterministic). dx may not alias dy, x or alpha. */
typedef struct clf_norm_backward_args {
    const clf_plugin_op *op;
    clf_ptr dx, dy, x, alpha, dalpha, dbeta;
    int rows, cols;
    float eps;
    int accumulate;
} clf_norm_backward_args;

/* The k best of each row of base + x, best first (ABI 6): for r < rows and j < k,
 *   (val[r, j], idx[r, j]) = the j-th of the pairs (base[r] + x[r, c], c), c < cols, in the
 *   order: larger value first, equal values by smaller c, NaN after every number.
 * base: F32 [rows], absent: 0 (the sum is one F32 addition, as the host would make it);
 * x: F32 [rows, cols]; val: F32 [rows, k]; idx: I32 [rows, k]; 1 <= k <= min(cols,
 * CLF_TOPK_MAX). val and idx may not overlap each other or any input. A beam search asks
 * each beam's best 2K continuations (base: the beam's log-probability so far) and merges
 * them on the host: rows x k numbers cross to the host instead of rows x vocabulary.
 * log_softmax (ABI 8, where supports(CLF_OP_TOPK_LOG_SOFTMAX)): x holds logits, and the
 * pairs are (base[r] + l[r, c], c) with l = log_softmax(x[r, :]) formed as the backend's
 * softmax op forms it, (x - max) - log(sum e^(x - max)): the same values as a log_softmax
 * op into a buffer and a topk over it, without writing or reading that buffer. */
#define CLF_TOPK_MAX 64
typedef struct clf_topk_args {
    clf_ptr val, idx, x, base;
    int rows, cols, k;
    int log_softmax;
} clf_topk_args;

/* A beam search's next beams, chosen on the device from each beam's topk (ABI 11), for n
 * sentences of K beams (sentence s: rows s*K .. s*K + K - 1), as the host chooses them
 * (core/src/decode/hypotheses.c), so that the next step needs nothing from the host:
 * 1. the sentence's best 2K continuations: for each beam k in order whose base[s*K + k] is
 *    not -inf, for j < top_k in order, the pair (val[s*K + k, j], idx[s*K + k, j]) unless
 *    idx is one of banned[0 .. n_banned), kept among the best 2K seen so far: when 2K are
 *    held a value not above the worst held is passed over; else it goes after every held
 *    value that is not below it (so equal values keep their order of arrival). Written to
 *    choices [n, 2K, 3] I32: (lp as the F32's bits, k, token) best first, then (0, -1, -1)
 *    for the places left empty.
 * 2. the beams that go on: the first K of those choices whose token is not eos_id, c_0 ..
 *    c_{m-1}; slot i = s*K + k takes c_k (k < m) or, dead, c_0 with -inf (k >= m; with m =
 *    0, parent s*K and token eos_id):
 *      ids[i] = c.token,  base[i] = c.lp,  parent p = s*K + c.k
 *      rows_out[i, :] = rows_in[p, :] (ld I32 each), then rows_out[i, pos + 1] = i when
 *      pos + 1 < ld
 *    (the row tables of clf_attention_args.kv_rows for the next position, pos + 1).
 * val F32 and idx I32 [n*K, top_k] (topk's output, the beam's sum included); base F32 [n*K]
 * is read, then overwritten in place; ids I32 [n*K]; banned I32 [n_banned], optional; 1 <=
 * K and 2K <= CLF_TOPK_MAX, 1 <= top_k <= CLF_TOPK_MAX, 0 <= pos. The outputs (choices, ids,
 * rows_out) may not overlap each other or an input; base is its own. Only comparisons: the
 * choices are the host's, bit for bit. */
typedef struct clf_beam_args {
    clf_ptr val, idx, base, banned;
    clf_ptr choices, ids, rows_in, rows_out;
    int n, K, top_k, n_banned, eos_id, ld, pos;
} clf_beam_args;

typedef struct clf_backend_api {
    int abi_version;         /* CLF_BACKEND_ABI: first, checked by the loader */
    const char *name;        /* "cpu", "opencl" */
    const char *description; /* one line for `clformer info` */

    /* lifecycle */
    clf_status (*open)(const clf_backend_opts *opts, clf_backend **out);
    void (*close)(clf_backend *be);
    /* the device in use, one line, e.g. "OpenCL: NVIDIA CUDA / NVIDIA H100 (GPU)" */
    clf_status (*describe)(clf_backend *be, char *buf, size_t size);
    /* calls fn once per device this backend can use; needs no open backend */
    clf_status (*list_devices)(clf_device_fn fn, void *user);
    int (*supports)(clf_backend *be, clf_op op);
    /* largest single allocation the device accepts (bytes) */
    uint64_t (*max_alloc)(clf_backend *be);

    /* memory; download blocks until the data is on the host */
    clf_status (*alloc)(clf_backend *be, size_t bytes, clf_buffer **out);
    void (*free)(clf_backend *be, clf_buffer *buf);
    /* *bytes = what buf holds (what alloc was asked for); CLF_ERR_INPUT (no message: the
     * caller names the operand) when buf is a buffer of another instance. The core checks
     * operands' bounds and owners with it (ABI 5, clformer/ops.h). */
    clf_status (*buffer_size)(clf_backend *be, const clf_buffer *buf, size_t *bytes);
    clf_status (*upload)(clf_backend *be, clf_ptr dst, const void *src, size_t bytes);
    clf_status (*download)(clf_backend *be, void *dst, clf_ptr src, size_t bytes);
    clf_status (*copy)(clf_backend *be, clf_ptr dst, clf_ptr src, size_t bytes);
    clf_status (*synchronize)(clf_backend *be);
    /* (ABI 5, optional: NULL gives nothing back) The caller will not read these bytes
     * again: the backend may give their memory back to the system now, and they read as
     * unspecified values afterwards (an upload over them makes them defined again). *freed
     * = how many bytes it gave back (0 is correct: the call is a hint). The int8 model
     * releases the F32 matrices it no longer multiplies with (clf_model_release_f32). */
    clf_status (*discard)(clf_backend *be, clf_ptr p, size_t bytes, size_t *freed);

    /* ops */
    clf_status (*gemm)(clf_backend *be, const clf_gemm_args *a);
    clf_status (*gemm_strided_batched)(clf_backend *be, const clf_gemm_args *a);
    clf_status (*layernorm)(clf_backend *be, const clf_layernorm_args *a);
    clf_status (*attention)(clf_backend *be, const clf_attention_args *a);
    clf_status (*embed)(clf_backend *be, const clf_embed_args *a);
    /* out[i] = a[i] + b[i], i < n (out may alias a or b, as the same span) */
    clf_status (*add)(clf_backend *be, clf_ptr out, clf_ptr a, clf_ptr b, size_t n);
    /* out[r,:] = softmax(x[r,:]) or, with log, log_softmax; out may alias x (the same span) */
    clf_status (*softmax)(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols, int log);
    /* out[r] = index of the first maximum of x[r,:] (I32); out may not overlap x */
    clf_status (*argmax)(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols);

    /* training (ABI 2); NULL where supports() says no */
    /* dx[i] = y[i] > 0 ? dy[i] : 0, i < n (y: the relu's output); dx may alias dy */
    clf_status (*relu_backward)(clf_backend *be, clf_ptr dx, clf_ptr dy, clf_ptr y, size_t n);
    clf_status (*layernorm_backward)(clf_backend *be, const clf_layernorm_backward_args *a);
    clf_status (*attention_backward)(clf_backend *be, const clf_attention_backward_args *a);
    clf_status (*embed_backward)(clf_backend *be, const clf_embed_backward_args *a);
    clf_status (*dropout)(clf_backend *be, const clf_dropout_args *a);
    clf_status (*cross_entropy)(clf_backend *be, const clf_cross_entropy_args *a);
    clf_status (*adam)(clf_backend *be, const clf_adam_args *a);
    /* out[0] = sum_i x[i]^2, i < n (F32; accumulated in double or pairwise) */
    clf_status (*sum_squares)(clf_backend *be, clf_ptr out, clf_ptr x, size_t n);
    /* out[i] = value, i < n */
    clf_status (*fill)(clf_backend *be, clf_ptr out, float value, size_t n);

    /* plugin ops (ABI 3); NULL where supports() says no */
    clf_status (*plugin_prepare)(clf_backend *be, const clf_plugin_op *op);
    clf_status (*activation)(clf_backend *be, const clf_activation_args *a);
    clf_status (*activation_backward)(clf_backend *be, const clf_activation_backward_args *a);
    clf_status (*norm)(clf_backend *be, const clf_norm_args *a);
    clf_status (*norm_backward)(clf_backend *be, const clf_norm_backward_args *a);

    /* decoding (ABI 6); NULL where supports() says no */
    clf_status (*topk)(clf_backend *be, const clf_topk_args *a);

    /* Capture and replay (ABI 10); NULL where supports(CLF_OP_CAPTURE) says no. Between
     * capture_begin and capture_end the ops are checked and recorded, not run; capture_end
     * hands back the recording (or, with out NULL, drops it), and replay queues the same
     * work again, as the same calls with the same arguments would: buffers are read when it
     * runs, so what changes from replay to replay lives in buffers (pos_add above). An op
     * the backend cannot record fails with CLF_ERR_UNSUPPORTED naming it, and so does
     * capture_end after it; upload, download, copy, fill, synchronize and discard are
     * refused during a capture (the caller makes them before or after). A recording holds
     * the buffers it names: the caller frees it (capture_free) before any of them. */
    clf_status (*capture_begin)(clf_backend *be);
    clf_status (*capture_end)(clf_backend *be, clf_capture **out);
    clf_status (*replay)(clf_backend *be, clf_capture *c);
    void (*capture_free)(clf_backend *be, clf_capture *c);

    /* decoding (ABI 11); NULL where supports() says no */
    clf_status (*beam_choose)(clf_backend *be, const clf_beam_args *a);
} clf_backend_api;

/* The one symbol a backend exports. */
typedef const clf_backend_api *(*clf_backend_entry_fn)(void);
#define CLF_BACKEND_ENTRY_SYMBOL "clf_backend_entry"

/* ---- loader and registry (core/src/runtime/backend_loader.c) ---- */

/* Directories searched for clformer-<name>.so, in order: plugin_dir (may be NULL), each
 * entry of $CLF_PLUGIN_PATH (':'-separated), the build tree's lib/clformer, and the
 * install libdir's clformer/, then <exe>/../lib/clformer. Returns how many were written. */
CLF_API int clf_backend_search_dirs(const char *plugin_dir, char dirs[][4096], int max_dirs);

/* Loads (once per path; handles are kept until exit, never dlclose'd while work runs) the
 * backend called name ("cpu", "opencl") from the search path. Errors name the file and
 * the reason: not found (listing where it looked), not a shared object, no entry symbol,
 * ABI version mismatch (naming both versions). */
CLF_API clf_status clf_backend_load(const char *name, const char *plugin_dir,
                                    const clf_backend_api **out);
/* Loads a backend from an explicit .so path. */
CLF_API clf_status clf_backend_load_file(const char *path, const clf_backend_api **out);

/* Resolves the backend name to use: cli_name (if set) > $CLF_BACKEND > config_name.
 * "auto" picks opencl when it loads and finds a GPU, else cpu. Loads and opens it. */
CLF_API clf_status clf_backend_open_named(const char *name, const char *plugin_dir,
                                          const clf_backend_opts *opts, const clf_backend_api **api,
                                          clf_backend **be);

/* Calls fn for every clformer-*.so found on the search path (path, loaded api or NULL
 * and the reason it failed to load). */
typedef void (*clf_backend_found_fn)(void *user, const char *path, const clf_backend_api *api,
                                     const char *error);
CLF_API void clf_backend_scan(const char *plugin_dir, clf_backend_found_fn fn, void *user);

/* Fails with CLF_ERR_UNSUPPORTED naming the op and the backend when the backend does not
 * implement op (no silent fallback to another backend). */
CLF_API clf_status clf_backend_require(const clf_backend_api *api, clf_backend *be, clf_op op);

/* ---- checks of op arguments (core/src/runtime/backend_checks.c) ----
 * The core's op layer (clformer/ops.h) makes them before dispatch. Each fails
 * with CLF_ERR_INPUT and a message that starts "<backend>: <op>: ", backend being the
 * backend's name ("cpu", "opencl"), so every backend refuses the same calls with the same
 * words. */

/* layernorm and its backward: rows >= 0, cols >= 1, a known style, and cols >= 2 for the
 * tutorial style (its std is the unbiased one). */
CLF_API clf_status clf_check_ln_shape(const char *backend, const char *op, int rows, int cols,
                                      clf_ln_style style);
/* gemm (batched 0: one product, b_half considered) and gemm_strided_batched (batched 1:
 * a->batch products at the strides, b_half ignored): C may not share a byte with what the
 * call reads, A and B (when k > 0), b_half, bias ("'c' may not overlap 'b'"). BLAS forbids
 * such aliasing, and a tiled GEMM would read elements of A or B another work-group has
 * already overwritten. Call it after the operands' bounds checks. */
CLF_API clf_status clf_check_gemm_overlap(const char *backend, const char *op,
                                          const clf_gemm_args *a, int batched);
/* The overlaps clf_activation_args refuses: out and x partly (not the same span), out and
 * gate at all ("'out' partly overlaps 'x'", "'out' may not overlap 'gate'"). */
CLF_API clf_status clf_check_activation_overlap(const char *backend, const char *op,
                                                const clf_activation_args *a);
/* The overlaps clf_activation_backward_args refuses, dx first, then dgate: dx and dy (but
 * for the same span without a gate: a->op, not NULL, says), x, gate, dgate; dgate and dy
 * partly, x, gate. */
CLF_API clf_status clf_check_activation_backward_overlap(const char *backend, const char *op,
                                                         const clf_activation_backward_args *a);

#ifdef __cplusplus
}
#endif
#endif
