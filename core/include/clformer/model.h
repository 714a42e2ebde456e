/* clformer/model.h - a model on a backend: weights uploaded once, forward pass.
 *
 * clf_model_create uploads the weights (Q/K/V of each attention block packed side by
 * side so that one GEMM computes all three) and, unless the positions are learned
 * weights, the sinusoidal PE table; the weights on the host may be freed afterwards.
 * clf_model_forward runs the encoder, decoder and projection for one batch with every
 * activation on the device; only the ids go up and the requested outputs come down. */
#ifndef CLFORMER_MODEL_H
#define CLFORMER_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "clformer/backend.h"
#include "clformer/config.h"
#include "clformer/export.h"
#include "clformer/graph.h"
#include "clformer/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clf_model clf_model;

CLF_API clf_status clf_model_create(const clf_model_config *cfg, const clf_weights *w,
                                    const clf_backend_api *api, clf_backend *be, clf_model **out);
/* clf_model_create, freeing each of w's tensors once it is on the device (w->data[i]
 * becomes NULL; w's specs and stored_type stay, and w is still the caller's to free), so
 * that the host never holds the weights twice: a model's loading then peaks at one copy
 * of its F32 weights instead of two. translate, forward and bench load with it. Weights
 * from clf_weights_map (either function) are converted on their way up, a block at a time. */
CLF_API clf_status clf_model_create_consuming(const clf_model_config *cfg, clf_weights *w,
                                              const clf_backend_api *api, clf_backend *be,
                                              clf_model **out);
CLF_API void clf_model_free(clf_model *m);

typedef struct clf_forward_io {
    int batch, src_len, tgt_len;
    const int32_t *src; /* [batch, src_len] token ids */
    const int32_t *tgt; /* [batch, tgt_len] token ids (decoder input) */
    float *logits;      /* [batch, tgt_len, tgt_vocab], or NULL; log-probs for log_softmax */
    float *encoder_out; /* [batch, src_len, d_model], or NULL */
} clf_forward_io;

/* Checks ids (0 <= id < vocab) and lengths (<= max_len), then runs the model. */
CLF_API clf_status clf_model_forward(clf_model *m, const clf_forward_io *io);

/* Builds the forward graph for a shape and plans it, without running (for tests, bench and
 * `clformer config --plan`). g must be freed with clf_graph_free. */
CLF_API clf_status clf_model_build_forward_graph(clf_model *m, int batch, int src_len, int tgt_len,
                                                 clf_graph *g);

/* Re-runs the graph of the last forward (same inputs), only the nodes whose op bit
 * (1ull << op) is in op_mask, and waits for the device: the bench's timing hook. */
CLF_API clf_status clf_model_rerun(clf_model *m, uint64_t op_mask);
/* The planned graph of the last forward, or NULL before the first. */
CLF_API const clf_graph *clf_model_last_graph(const clf_model *m);

/* Adds an F16 copy of the matrices that linear layers multiply with (the weights as they
 * are on the device now), which inference graphs built from now on pass to the backend's
 * gemm as b_half. A backend reads it where that is faster: the products of a few rows in
 * decoding at batch 1 or with small beams, which are bound by memory bandwidth. Those
 * products then use the weights rounded to F16 (accumulating in F32); the F32 weights stay
 * for everything else. A snapshot: training graphs never use it. Costs half the matrices'
 * bytes again on the device. CLF_ERR_INPUT names a weight that F16 cannot hold. */
CLF_API clf_status clf_model_enable_half_weights(clf_model *m);
/* The weight type inference graphs built from now on multiply with (clformer/weights.h):
 * F32 drops any copy; F16 is clf_model_enable_half_weights; BF16 the same with bfloat16
 * (b_bf16); INT8 quantizes every matrix a linear layer multiplies with per output channel
 * (clf_quantize_rows_i8) and every product then reads it (b_i8, b_scale), whatever its
 * rows. A copy replaces the previous one; the F32 weights stay (training, embeddings; for
 * inference with int8, clf_model_release_f32 gives the matrices' back).
 * CLF_ERR_UNSUPPORTED when the backend cannot read the type (supports() of
 * CLF_OP_GEMM_BF16 / CLF_OP_GEMM_I8), CLF_ERR_INPUT naming a weight the type cannot
 * hold. */
CLF_API clf_status clf_model_set_weight_type(clf_model *m, clf_weight_type type);
/* The precision of the products of graphs built from now on (README "Precision"):
 * products take BF16 / F16 inputs and sum in F32; layernorm, softmax, the residual sums,
 * the loss and the optimizer stay F32, and so do the weights themselves. BF16 on a backend
 * with BF16 arithmetic (supports(CLF_OP_GEMM_BF16_ARITH)): unless the weight type is BF16
 * (whose copy serves), a BF16 copy of the matrices the linear layers multiply with, made
 * now from the weights on the device (half their bytes again), which every linear layer's
 * product (forward and, in training, backward) passes with clf_gemm_args.bf16_arith; the
 * backend runs its products of many rows in BF16 arithmetic, its products of few rows
 * (decoding) keep the weight type's. Where the backend has no such arithmetic (and for F16
 * outside OpenCL with --weight-type f16 on a device with half arithmetic), or the weight
 * type is int8, products keep their arithmetic and note (may be NULL) gets one sentence
 * saying so, else "". Call it after clf_model_set_weight_type (which keeps the setting). */
CLF_API clf_status clf_model_set_precision(clf_model *m, clf_precision p, char *note,
                                           size_t note_size);
/* The precision set; *bf16_arith (optional) = 1 when products of many rows run in BF16
 * arithmetic (the copy exists, or BF16 weights on a backend with the arithmetic). */
CLF_API clf_precision clf_model_precision(const clf_model *m, int *bf16_arith);

/* Inference with int8 weights: every product then reads the int8 copy, never the F32
 * matrix (clf_gemm_args.b_i8), so the F32 bytes of the matrices that only linear layers
 * read (all but the embedding tables) can go back to the system: about three quarters of
 * a base model's weight memory. The backend's discard does it where it can (the CPU
 * backend: whole pages); *freed (optional) = the bytes given back. Afterwards the model
 * refuses another weight type and training (CLF_ERR_UNSUPPORTED): load the weights again
 * for those. CLF_ERR_INPUT unless the weight type is int8 and the model has no gradients.
 * translate, forward and bench call it for --weight-type int8. */
CLF_API clf_status clf_model_release_f32(clf_model *m, size_t *freed);

/* An inference model (translate, serve, forward, bench, the Python package): created from
 * *w, which it consumes (clf_model_create_consuming, then freed and *w = NULL whatever
 * happens: the host never holds the weights twice), multiplying with weight type *type if
 * type_set, else the file's (written back to *type); with int8 the F32 matrices, which
 * inference never reads, are given back (clf_model_release_f32). With F16 weights on a
 * backend whose products of 8+ rows do not run in half precision (OpenCL without CLBlast's
 * HGEMM), note (may be NULL) gets one sentence saying what falls back to the F32 weights,
 * else "". On failure *out is NULL. *w may be mapped (clf_weights_map): then with int8
 * the matrices inference multiplies only in int8 are quantized from the file, never held
 * as F32 on the host or the device (the same int8 copy, byte for byte). */
CLF_API clf_status clf_model_create_inference(const clf_model_config *cfg, clf_weights **w,
                                              const clf_backend_api *api, clf_backend *be,
                                              int type_set, clf_weight_type *type, char *note,
                                              size_t note_size, clf_model **out);

/* Refuses, before anything runs, a training batch shape the backend cannot hold: one
 * training step of batch x src_len / tgt_len tokens (forward, loss and backward; its
 * activations are one arena) is planned without allocating and its arena compared with the
 * backend's largest allocation. CLF_ERR_INPUT naming the shape, the bytes and the limit.
 * Needs the model's gradients (clf_trainer_create enables them). clformer train calls it
 * with the largest batch its train: section allows, so that a configuration that cannot
 * run fails at load, not at the first long batch of step 10,000. */
CLF_API clf_status clf_model_check_train_batch(clf_model *m, int batch, int src_len, int tgt_len);

typedef struct clf_model_memory {
    size_t weight_bytes; /* on the device, incl. the PE table and any F16 copy */
    size_t arena_bytes;  /* activations of the last planned forward */
} clf_model_memory;
CLF_API void clf_model_memory_usage(const clf_model *m, clf_model_memory *mem);

/* Multiply-adds x2 of the forward pass at a shape (GEMMs and attention products), the
 * FLOP count the benchmarks divide by. */
CLF_API double clf_model_forward_flops(const clf_model_config *cfg, int batch, int src_len,
                                       int tgt_len);

/* The sinusoidal PE table [max_len, d] exactly as the tutorial's PyTorch computes it in
 * float32. */
CLF_API void clf_positional_encoding(float *pe, int max_len, int d);
/* The same frequencies in Marian's layout (positional: sinusoidal_split): columns
 * [0, ceil(d/2)) are sin(pos / 10000^(2i/d)), the rest cos(pos / 10000^(2i/d)), computed in
 * double and rounded to float once, as transformers' MarianSinusoidalPositionalEmbedding. */
CLF_API void clf_positional_encoding_split(float *pe, int max_len, int d);
/* fairseq's table (positional: sinusoidal_fairseq, M2M-100 and NLLB), rows x d. */
CLF_API void clf_positional_encoding_fairseq(float *pe, int rows, int d);

#ifdef __cplusplus
}
#endif
#endif
