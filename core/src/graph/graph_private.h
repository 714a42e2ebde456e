/* The parts of the model that graph/model*.c share and nothing else in core/src sees (the
 * internal test suites aside): the clf_model struct (model.c) and the graph builder
 * (model_build.c) that the graphs callers ask for (model_graphs.c) are made of. train/ and
 * decode/ use graph/model_for_train_decode.h. Not installed. */
#ifndef CLF_GRAPH_PRIVATE_H
#define CLF_GRAPH_PRIVATE_H

#include "graph/model_for_train_decode.h"

/* A GEMM matrix of the model by where it lies: weight index i at byte off of chunk. */
typedef struct clf_lowp_mat {
    int chunk, i;
    size_t off;
} clf_lowp_mat;

struct clf_model {
    clf_model_config cfg;
    const clf_backend_api *api;
    clf_backend *be;
    int n_weights;
    clf_weight_spec *specs; /* copy of the weight specs: names and shapes */
    /* name -> spec index (clf_model_spec_index): open addressing with linear probing on
     * the names' FNV-1a hash, name_mask + 1 slots (a power of two, at least twice
     * n_weights), -1 in the empty ones. Every weight of every step graph is looked up by
     * name, and a scan of the names made those lookups the largest cost of building one. */
    int *name_slot;
    size_t name_mask;
    clf_ptr *wdev; /* per weight: where it lives on the device */
    clf_buffer **chunks;
    size_t *chunk_bytes;
    int n_chunks;
    clf_buffer **grad_chunks; /* training: one gradient buffer per weight chunk, same layout */
    /* clf_model_set_weight_type: per chunk, its GEMM matrices again as lowp_type (the bytes
     * under other tensors are never written or read). F16, BF16: at half the byte offsets.
     * int8: at a quarter of them, then from lowp_scale_off[c] one {F32 scale, I32 sum} pair
     * per matrix row, the rows of the chunk's matrices numbered in the order of their
     * offsets (lowp_row[i]: weight i's first), so a packed [Wq;Wk;Wv] has its rows' pairs
     * side by side too. */
    clf_weight_type lowp_type;
    clf_buffer **lowp_chunks;
    size_t *lowp_scale_off;
    size_t *lowp_row;
    /* the GEMM matrices sorted by (chunk, offset, index), n_lowp_mat of them: the int8
     * twin of a weight value is found by a binary search on its place (clf_model_lowp_twin
     * runs for every GEMM of every step graph) */
    clf_lowp_mat *lowp_mat;
    int n_lowp_mat;
    size_t lowp_bytes;
    /* clf_model_set_precision (model_precision.c): the products' precision; arith_on: gemm
     * nodes ask for BF16 arithmetic (clf_gemm_args.bf16_arith) and bind arith_chunks, a
     * BF16 copy of the GEMM matrices at half the byte offsets, as b_bf16. A model being
     * trained has no copy (arith_chunks NULL): the backend rounds its weights itself. */
    clf_precision precision;
    int arith_on;
    clf_buffer **arith_chunks;
    size_t arith_bytes;
    /* clf_model_release_f32: the int8 matrices' F32 bytes were given back (they read as
     * garbage now), released_bytes of them */
    int f32_released;
    size_t released_bytes;
    /* clf_model_create_inference with int8 from mapped weights (clf_weights_map): the
     * matrices int8 inference never reads as F32 were not uploaded (deferred[i]); until the
     * int8 copy is made, their values are read from pending, the weights being consumed */
    unsigned char *deferred;
    const clf_weights *pending;
    clf_buffer *pe; /* [max_len, d] */
    size_t weight_bytes;
    /* the forward graph of the last shape, reused while the shape stays */
    clf_graph g;
    int g_valid, g_batch, g_src, g_tgt;
    int v_src, v_tgt, v_src_mask, v_tgt_mask, v_enc, v_logits;
    clf_buffer *arena;
    size_t arena_cap;
};

/* clf_model_create_consuming, with defer_int8: the matrices int8 inference never reads as
 * F32 (clf_model_f32_unread_under_int8) are left off the device (m->deferred; w stays
 * m->pending until the caller has made the int8 copy and clears it). Mapped weights
 * (clf_weights_map) are converted a block at a time on their way up. */
clf_status clf_model_create_from(const clf_model_config *cfg, clf_weights *w, int defer_int8,
                                 const clf_backend_api *api, clf_backend *be, clf_model **out);
/* Whether weight i's F32 bytes are read by nothing once the int8 copy exists. */
int clf_model_f32_unread_under_int8(const clf_model *m, int i);
/* The index of the weight named name in m->specs, or -1. */
int clf_model_spec_index(const clf_model *m, const char *name);
/* The index of the weight chunk that is buffer buf, or -1 (the PE table, activations). */
int clf_model_chunk_holding(const clf_model *m, const clf_buffer *buf);
/* Whether weight i is a matrix the linear layers multiply with (so has a low-precision
 * twin): every matrix but the embedding tables, plus the table a tied projection uses. */
int clf_model_is_gemm_matrix(const clf_model *m, int i);

/* Writes the GEMM matrices of chunk c, as they are on the device now, converted to type
 * (F16 or BF16) into dst at half their byte offsets, a block of elements at a time through the
 * host. CLF_ERR_INPUT names a weight the type cannot hold. */
clf_status clf_model_copy16(clf_model *m, int c, clf_weight_type type, clf_buffer *dst);
/* Frees the BF16 copy of clf_model_set_precision; arith_on = 0. */
void clf_model_arith_free(clf_model *m);
/* Frees the low-precision twin (clf_model_set_weight_type), if any; lowp_type = F32. */
void clf_model_lowp_free(clf_model *m);
/* clf_model_set_weight_type without the precision's copy (model_precision.c makes that
 * again after it). */
clf_status clf_model_lowp_set(clf_model *m, clf_weight_type type);

/* The low-precision twin (clf_model_set_weight_type) of the weight value at w, bytes long
 * (F32), for a gemm: the clf_gemm_args field to bind (offsetof b_half, b_bf16 or b_i8) and
 * where it lies; with int8, the scales too (b_scale). 0 when w has none. */
typedef struct clf_lowp_twin {
    size_t field;
    clf_ptr w, scale;
    size_t w_bytes, scale_bytes;
} clf_lowp_twin;
int clf_model_lowp_twin(const clf_model *m, clf_ptr w, size_t bytes, clf_lowp_twin *t);

/* ---- the graph builder (model_build.c, where the notation of the shapes is) ----
 * Errors go to b->g->status; the first one sticks. */

typedef struct builder {
    clf_model *m;
    clf_graph *g;
    int *wval; /* weight index -> graph value, -1 until first used */
    int pe;    /* graph value of the sinusoidal PE table; -1 with learned positions */
    int d, dk;
    /* training: single-assignment residuals (the backward pass needs every input kept)
     * and dropout; n_dropout numbers the dropout sites */
    int training;
    float p_residual, p_embedding, p_attention, p_ffn; /* dropout rates, 0 at inference */
    int n_dropout;
} builder;

/* What the decoder reads. The full pass has T rows per sentence, a target key mask and
 * the encoder output; a decoding step has one row per sentence at position pos0 and reads
 * keys and values from the caches (see clf_model_build_step_graph). */
typedef struct decoder_spec {
    int B, S, T;
    int ids;      /* I32 [B*T] */
    int tgt_mask; /* I32 [B, T] (full pass) */
    int enc;      /* [B*S, d] (full pass) */
    int src_mask; /* I32 [B, S] */
    int pos0;
    /* decoding step */
    int has_cache;
    int self_cache, cross_cache; /* values: all layers' blocks, [L, slots, len, 2d] */
    int slots, self_len;         /* the self cache's; the cross cache's when cross_slots is 0 */
    int cross_slots, cross_len;  /* the cross cache's slots and rows per slot (0: slots, S) */
    /* rows at positions of their own (continuous decoding; NULL: all at pos0): row_pos[B]
     * host positions, self_kv_len the keys self-attention reads (masked per row by the value
     * self_mask, I32 [B, self_kv_len]), write_row the self-cache row row 0 writes its k|v
     * to (row b: write_row + b * self_len) */
    const int *row_pos;
    int self_kv_len, self_mask, write_row;
    /* row tables (clf_kv_cache.rows) of the two caches: values, used when their ld > 0 */
    int self_rows, cross_rows;
    int self_rows_ld, cross_rows_ld;
    int probs; /* the last layer's cross-attention softmax, or -1 */
    /* has_pos_dev: the step's position is the I32 value pos_dev, at most pos_max, added to
     * pos0 = 0 on the device (clf_step_spec.pos_dev) */
    int has_pos_dev, pos_dev, pos_max;
} decoder_spec;

/* Starts a graph: the weight-value map and the PE table. */
clf_status clf_builder_begin(clf_model *m, clf_graph *g, builder *b);
/* Plans the graph built with b; frees it on error. */
clf_status clf_builder_end(builder *b);

/* A new activation value of elems floats. */
int clf_build_activation(builder *b, size_t elems, const char *label);
/* The graph value of the weight named prefix then suffix, spanning count packed tensors
 * (3: [Wq;Wk;Wv], 2: [Wk;Wv]); -1 when the model has no such tensor. */
int clf_build_weight(builder *b, int count, const char *prefix, const char *suffix);
/* v, or the graph's error "model: weight <prefix><what> missing" when v < 0. */
int clf_build_required(builder *b, int v, const char *prefix, const char *what);
/* y[M, N] (= or +=) x[M, K] · W[N, K]^T + bias[N] (relu if asked), x and y from elements
 * x_off / y_off with row strides x_ld / y_ld. */
void clf_build_linear(builder *b, const char *label, int y, size_t y_off, int y_ld, int x,
                      size_t x_off, int x_ld, int w, int bias, int M, int N, int K, int relu,
                      int accumulate);
/* enc[B*S, d] of src ids I32 [B*S] with key mask I32 [B, S] */
int clf_build_encoder(builder *b, int src, int src_mask, int B, int S);
/* dec[B*T, d] (see decoder_spec) */
int clf_build_decoder(builder *b, const decoder_spec *ds);
/* out[rows, V] = dec · Wp^T + bp (then log_softmax if asked), dec's rows from element
 * dec_off, dec_ld apart */
void clf_build_projection(builder *b, int out, int dec, size_t dec_off, int dec_ld, int rows,
                          int log_softmax);

#endif
