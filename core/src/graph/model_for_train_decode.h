/* What train/ and decode/ need from the model (graph/model*.c) beyond the public API:
 * the graphs of a decoding step and of the encoder with the cross-attention key/value
 * projections, the training graph and the parameter storage. Not installed. */
#ifndef CLF_MODEL_FOR_TRAIN_DECODE_H
#define CLF_MODEL_FOR_TRAIN_DECODE_H

#include "clformer/model.h"
#include "clformer/ops.h" /* every backend call of the model, trainer and decoder */

/* A KV cache: one device buffer holding, for each decoder layer l, `slots` blocks of `len`
 * rows of 2d floats (k | v). Element offset of layer l, slot s, row r:
 *   ((l * slots + s) * len + r) * 2d */
typedef struct clf_kv_cache {
    clf_ptr base;
    size_t bytes;
    int slots, len;
    /* optional (rows_ld 0: none): the row table of clf_attention_args.kv_rows, I32 [rows,
     * rows_ld]: at a decoding step, active slot b reads row j of slot rows[b*rows_ld + j],
     * so that beams share the rows of their common history or source */
    clf_ptr rows;
    int rows_ld;
} clf_kv_cache;

/* enc = encoder(src) for B sentences of S ids, then for every decoder layer l and slot
 * b < B: cross[l, b, 0:S, :] = enc[b] · [Wk;Wv]^T (+ bias). Inputs: *v_src (I32 [B*S],
 * uploaded by the caller); the key mask is external: I32 [B, S] at src_mask. */
clf_status clf_model_build_encoder_graph(clf_model *m, int B, int S, clf_ptr src_mask,
                                         const clf_kv_cache *cross, clf_ptr enc_out, clf_graph *g,
                                         int *v_src);
/* enc_out (optional, buf NULL: none): the encoder output [B*S, d] is also copied there,
 * for decoding without the cache. */

typedef struct clf_step_spec {
    int rows;          /* active sentences (slots 0..rows-1) */
    int pos;           /* the position of the token fed in (0: SOS) */
    int src_len;       /* S */
    clf_ptr src_mask;  /* I32 [slots, S] */
    clf_kv_cache self; /* len >= pos + 1 */
    clf_kv_cache cross;
    /* 0: output argmax ids I32 [rows]; 1: log_softmax [rows, V]; 2: both (the argmax of
     * the logits, as 0 gives, and the log-probabilities, as 1 gives); 3: each row's top_k
     * best of top_base[row] + log_softmax (clf_topk_args): values F32 [rows, top_k] (out)
     * and ids I32 [rows, top_k] (next_ids) */
    int log_probs;
    int top_k;        /* log_probs 3: 1..min(V, CLF_TOPK_MAX) */
    clf_ptr top_base; /* log_probs 3: F32 [rows] */
    /* use_cache 0: the whole decoder re-runs on the prefix (ids I32 [rows, pos+1]) with the
     * encoder output [slots, S, d] at enc, as the tutorial's greedy_decode does; only the
     * last position is projected. The caches are then unused. */
    int use_cache;
    clf_ptr enc;
    int want_attention; /* the last layer's cross-attention softmax [rows, h, T, S], T = 1
                           with the cache, pos + 1 without */
    /* Rows at positions of their own (continuous decoding, decode_stream.c; NULL: every
     * row at pos): row_pos[rows] on the host (runs of equal positions share an embed node);
     * self-attention reads self_kv_len keys (more than any row's position), those past a
     * row's own position masked by self_mask, I32 [rows, self_kv_len]; row b writes its k|v
     * to row write_row + b * self.len of each layer's self-cache block. src_len is then the
     * keys cross-attention reads, cross.len the rows of a cross-cache slot (>= src_len). */
    const int *row_pos;
    int self_kv_len;
    clf_ptr self_mask;
    int write_row;
    /* The position on the device (pos must be 0; a backend with CLF_OP_DEVICE_POS and
     * CLF_OP_ATTENTION_APPEND, use_cache, no row_pos): the I32 at pos_dev, at most pos_max,
     * is the position of the token fed in when the step runs, so that the graph, and the
     * calls it makes, are the same at every position (a backend may replay them,
     * CLF_OP_CAPTURE). pos_dev.buf NULL: the position is pos. */
    clf_ptr pos_dev;
    int pos_max;
} clf_step_spec;

typedef struct clf_step_values {
    int ids;       /* input I32 [rows] (cache) or [rows, pos+1] (no cache) */
    int out;       /* output: log-probs, argmax ids or (log_probs 3) the top values */
    int next_ids;  /* log_probs 2: the argmax ids; 3: the top ids; else -1 */
    int attention; /* output or -1 */
} clf_step_values;

/* One decoder step on the caches: writes this position's self-attention k|v into the
 * self cache and produces the next-token distribution of every active sentence. */
clf_status clf_model_build_step_graph(clf_model *m, const clf_step_spec *s, clf_graph *g,
                                      clf_step_values *v);

/* ---- training (train.c) ---- */

/* Allocates (zeroed) gradient buffers mirroring the weight chunks. */
clf_status clf_model_enable_grads(clf_model *m);

typedef struct clf_train_graph_spec {
    int B, S, T;
    int dropout; /* 1: the model's dropout rates (training); 0: none (evaluation) */
    float label_smoothing;
    int backward; /* 0: the loss only (validation) */
    clf_ptr ones; /* backward: >= B * max(S, T) floats of 1.0f (bias gradients) */
} clf_train_graph_spec;

typedef struct clf_train_values {
    int src, tgt, labels, src_mask, tgt_mask; /* inputs, I32 [B*S] or [B*T] */
    int loss;                                 /* output F32 [B*T]: per token, 0 at pads */
    int ce_node;   /* the cross_entropy node: the trainer sets its grad_scale per batch */
    int n_dropout; /* dropout sites (nodes tagged 0..n-1, backward twins share the tag) */
} clf_train_values;

/* The forward pass in training form (single-assignment, dropout), the label-smoothed
 * cross-entropy against the labels, and with backward the gradient of every parameter
 * accumulated (+=) into the gradient buffers. */
clf_status clf_model_build_train_graph(clf_model *m, const clf_train_graph_spec *s, clf_graph *g,
                                       clf_train_values *v);

/* Parameter storage, for the optimizer and checkpoints: the weights are packed into
 * chunks (device buffers); chunk c's gradients are a buffer of the same size and layout. */
int clf_model_chunk_count(const clf_model *m);
void clf_model_chunk(const clf_model *m, int c, clf_buffer **weights, clf_buffer **grads,
                     size_t *bytes);
int clf_model_weight_count(const clf_model *m);
const clf_weight_spec *clf_model_weight_spec(const clf_model *m, int i);
void clf_model_weight_place(const clf_model *m, int i, int *chunk, size_t *off);

/* Shared by forward and training (what names the caller in messages): every length >= 1
 * and <= max_len, src ids [B, S] in [0, src_vocab), tgt (and labels, may be NULL) ids
 * [B, T] in [0, tgt_vocab). */
clf_status clf_model_check_batch(const clf_model *m, const char *what, int B, int S, int T,
                                 const int32_t *src, const int32_t *tgt, const int32_t *labels);
/* Uploads n ids to ids_dst and, when mask_dst.buf is set, their key mask (ids != pad_id). */
clf_status clf_model_upload_ids(const clf_model *m, clf_ptr ids_dst, clf_ptr mask_dst,
                                const int32_t *ids, size_t n);
/* The same for decoder inputs in rows of row_len: when model.decoder_start_id is the pad id
 * (Marian), the first position of each row is the decoder start and stays unmasked. */
clf_status clf_model_upload_tgt_ids(const clf_model *m, clf_ptr ids_dst, clf_ptr mask_dst,
                                    const int32_t *ids, size_t n, int row_len);

const clf_model_config *clf_model_config_of(const clf_model *m);
void clf_model_backend_of(const clf_model *m, const clf_backend_api **api, clf_backend **be);

#endif
