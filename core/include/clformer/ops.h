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

#ifdef __cplusplus
}
#endif
#endif
