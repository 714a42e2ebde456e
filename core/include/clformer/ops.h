/* clformer/ops.h - calling a backend's ops through the core.
 *
 * Every call of a backend op goes through one of these (the graph runner does; a test or a
 * tool that calls an op should too). Each checks, once, what needs no device knowledge:
 * sizes, leading dimensions and strides, enums and ranges (a layernorm style, dropout_p),
 * that every operand is present, aligned to its element and inside its buffer (the buffer's
 * size comes from the backend's buffer_size), and the aliasing rules of clformer/backend.h.
 * Then it calls the backend, which checks only what is its own: device limits (local
 * memory, work-group sizes, the largest allocation), whether a buffer is one of its own,
 * what a fast path of its own needs. A refusal is CLF_ERR_INPUT with a one-line message
 * "<backend>: <op>: <why>", backend being the table's name, so every backend refuses the
 * same call with the same words. An op the table leaves NULL is CLF_ERR_UNSUPPORTED.
 *
 * An empty call (no rows, no products: nothing is read or written) returns CLF_OK without
 * reaching the backend. */
#ifndef CLFORMER_OPS_H
#define CLFORMER_OPS_H

#include "clformer/backend.h"
#include "clformer/export.h"
#include "clformer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sizes >= 0, lda/ldb/ldc >= the stored rows' widths (and >= 1); A, B (when k > 0), C and
 * bias inside their buffers; C apart from everything the call reads (clf_check_gemm_overlap).
 * b_half, b_bf16, b_i8 and b_scale are bounds-checked by the backend that reads them. */
CLF_API clf_status clf_op_gemm(const clf_backend_api *api, clf_backend *be, const clf_gemm_args *a);
/* As clf_op_gemm for a->batch products at the strides (b_half and friends ignored). */
CLF_API clf_status clf_op_gemm_strided_batched(const clf_backend_api *api, clf_backend *be,
                                               const clf_gemm_args *a);
/* clf_check_ln_shape, the operands' bounds, out not the same span as x. */
CLF_API clf_status clf_op_layernorm(const clf_backend_api *api, clf_backend *be,
                                    const clf_layernorm_args *a);
/* clf_check_ln_shape, the operands' bounds, dx apart from dy and x. */
CLF_API clf_status clf_op_layernorm_backward(const clf_backend_api *api, clf_backend *be,
                                             const clf_layernorm_backward_args *a);
/* dropout_p in [0, 1), the shape, row strides >= heads * head_dim, the operands' bounds. */
CLF_API clf_status clf_op_attention(const clf_backend_api *api, clf_backend *be,
                                    const clf_attention_args *a);
/* As clf_op_attention for a->fwd, dout, dq, dk, dv; the gradients apart from the inputs. */
CLF_API clf_status clf_op_attention_backward(const clf_backend_api *api, clf_backend *be,
                                             const clf_attention_backward_args *a);
/* rows >= 0, dim, vocab, seq_len >= 1, pos0 >= 0; out, ids, table and pe (the rows pos0 ..
 * pos0 + min(rows, seq_len) - 1) inside their buffers. */
CLF_API clf_status clf_op_embed(const clf_backend_api *api, clf_backend *be,
                                const clf_embed_args *a);
/* out, a and b: n elements each, inside their buffers. */
CLF_API clf_status clf_op_add(const clf_backend_api *api, clf_backend *be, clf_ptr out, clf_ptr a,
                              clf_ptr b, size_t n);
/* rows >= 0, cols >= 1; out and x [rows, cols] inside their buffers ("log_softmax" in
 * messages with log). */
CLF_API clf_status clf_op_softmax(const clf_backend_api *api, clf_backend *be, clf_ptr out,
                                  clf_ptr x, int rows, int cols, int log);
/* rows >= 0, cols >= 1; out [rows] and x [rows, cols] inside their buffers. */
CLF_API clf_status clf_op_argmax(const clf_backend_api *api, clf_backend *be, clf_ptr out,
                                 clf_ptr x, int rows, int cols);
/* rows >= 0, cols >= 1, 1 <= k <= min(cols, CLF_TOPK_MAX); val, idx [rows, k], x [rows,
 * cols] and base [rows] (optional) inside their buffers; val and idx apart from each other
 * and from x and base. */
CLF_API clf_status clf_op_topk(const clf_backend_api *api, clf_backend *be, const clf_topk_args *a);
/* n >= 0, 1 <= K with 2K <= CLF_TOPK_MAX, 1 <= top_k <= CLF_TOPK_MAX, n_banned >= 0, ld >= 1,
 * pos >= 0; choices [n, 2K, 3], ids, base [n*K], val, idx [n*K, top_k], rows_in, rows_out
 * [n*K, ld] and banned [n_banned] inside their buffers; the outputs apart from each other
 * and from the inputs, base (read and written in place) apart from val, idx and rows_in. */
CLF_API clf_status clf_op_beam_choose(const clf_backend_api *api, clf_backend *be,
                                      const clf_beam_args *a);
/* dx, dy and y [n] inside their buffers; dx the same span as dy (or y) or apart from it. */
CLF_API clf_status clf_op_relu_backward(const clf_backend_api *api, clf_backend *be, clf_ptr dx,
                                        clf_ptr dy, clf_ptr y, size_t n);
/* rows >= 0, dim, vocab >= 1; dtable, dout and ids inside their buffers. */
CLF_API clf_status clf_op_embed_backward(const clf_backend_api *api, clf_backend *be,
                                         const clf_embed_backward_args *a);
/* p in [0, 1); out and x [n] inside their buffers, out the same span as x or apart. */
CLF_API clf_status clf_op_dropout(const clf_backend_api *api, clf_backend *be,
                                  const clf_dropout_args *a);
/* rows >= 0, cols >= 1, label_smoothing in [0, 1]; the operands inside their buffers;
 * dlogits the same span as logits or apart; loss apart from logits and dlogits. */
CLF_API clf_status clf_op_cross_entropy(const clf_backend_api *api, clf_backend *be,
                                        const clf_cross_entropy_args *a);
/* Both bias corrections > 0; param, grad, m and v [n] inside their buffers, no two
 * overlapping. */
CLF_API clf_status clf_op_adam(const clf_backend_api *api, clf_backend *be, const clf_adam_args *a);
/* out [1] and (n > 0) x [n] inside their buffers; n = 0 is not empty (out = 0). */
CLF_API clf_status clf_op_sum_squares(const clf_backend_api *api, clf_backend *be, clf_ptr out,
                                      clf_ptr x, size_t n);
/* out [n] inside its buffer. */
CLF_API clf_status clf_op_fill(const clf_backend_api *api, clf_backend *be, clf_ptr out,
                               float value, size_t n);

/* The plugin ops: the op given, of a known kind and of the kind the entry takes
 * (clf_plugin_check_entry_kind), then for the activations clf_plugin_check_gates, the
 * operands' bounds and clf_check_activation_overlap / clf_check_activation_backward_overlap;
 * for the norms rows >= 0, cols >= 1, the operands' bounds and that out (dx) overlaps none
 * of x, alpha, beta (dy, x, alpha). Messages name the op as "<entry> '<op name>'". Whether
 * the backend has a form of the op is its own to say (plugin_prepare). */
CLF_API clf_status clf_op_activation(const clf_backend_api *api, clf_backend *be,
                                     const clf_activation_args *a);
CLF_API clf_status clf_op_activation_backward(const clf_backend_api *api, clf_backend *be,
                                              const clf_activation_backward_args *a);
CLF_API clf_status clf_op_norm(const clf_backend_api *api, clf_backend *be, const clf_norm_args *a);
CLF_API clf_status clf_op_norm_backward(const clf_backend_api *api, clf_backend *be,
                                        const clf_norm_backward_args *a);

/* The memory entries: dst (upload, copy) and src (download, copy) hold bytes bytes from
 * their offset, any offset; bytes = 0 reaches no backend. */
CLF_API clf_status clf_op_upload(const clf_backend_api *api, clf_backend *be, clf_ptr dst,
                                 const void *src, size_t bytes);
CLF_API clf_status clf_op_download(const clf_backend_api *api, clf_backend *be, void *dst,
                                   clf_ptr src, size_t bytes);
CLF_API clf_status clf_op_copy(const clf_backend_api *api, clf_backend *be, clf_ptr dst,
                               clf_ptr src, size_t bytes);
/* The backend's discard (the caller will not read p's bytes again), bounds checked like
 * download; *freed = the bytes it gave back, 0 where the backend has no discard. */
CLF_API clf_status clf_op_discard(const clf_backend_api *api, clf_backend *be, clf_ptr p,
                                  size_t bytes, size_t *freed);

/* Capture and replay (clf_backend_api.capture_begin, ABI 10): the backend has them
 * (CLF_OP_CAPTURE, else CLF_ERR_UNSUPPORTED), replay a capture given. The ops called in
 * between go through this header's checks as always. capture_end with out NULL drops the
 * recording; capture_free(NULL) does nothing. */
CLF_API clf_status clf_op_capture_begin(const clf_backend_api *api, clf_backend *be);
CLF_API clf_status clf_op_capture_end(const clf_backend_api *api, clf_backend *be,
                                      clf_capture **out);
CLF_API clf_status clf_op_replay(const clf_backend_api *api, clf_backend *be, clf_capture *c);
CLF_API void clf_op_capture_free(const clf_backend_api *api, clf_backend *be, clf_capture *c);

#ifdef __cplusplus
}
#endif
#endif
