/* The graphs callers ask for, put together from the layers of model_build.c: the full
 * forward pass (clf_model_forward), the encoder with the cross-attention keys and values
 * and one decoding step (decode.c), and the training pass with its backward half
 * (train.c). */
#include "clformer/model.h"

#include "graph/autodiff.h"
#include "graph/graph_private.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* The inputs of a full pass (I32 ids and key masks of both sides), then the encoder and
 * the decoder over them: returns dec [B*T, d]; *enc gets the encoder output. */
typedef struct full_pass {
    int src, tgt, src_mask, tgt_mask;
} full_pass;

static int encode_decode(builder *b, int B, int S, int T, full_pass *in, int *enc)
{
    clf_graph *g = b->g;
    in->src = clf_graph_value(g, CLF_VALUE_INPUT, (size_t)B * S * 4, "src");
    in->tgt = clf_graph_value(g, CLF_VALUE_INPUT, (size_t)B * T * 4, "tgt");
    in->src_mask = clf_graph_value(g, CLF_VALUE_INPUT, (size_t)B * S * 4, "src_mask");
    in->tgt_mask = clf_graph_value(g, CLF_VALUE_INPUT, (size_t)B * T * 4, "tgt_mask");
    *enc = clf_build_encoder(b, in->src, in->src_mask, B, S);
    decoder_spec ds = {.B = B,
                       .S = S,
                       .T = T,
                       .ids = in->tgt,
                       .tgt_mask = in->tgt_mask,
                       .enc = *enc,
                       .src_mask = in->src_mask,
                       .probs = -1};
    return clf_build_decoder(b, &ds);
}

clf_status clf_model_build_forward_graph(clf_model *m, int B, int S, int T, clf_graph *g)
{
    const clf_model_config *c = &m->cfg;
    const int V = c->tgt_vocab;
    builder b;
    clf_status st = clf_builder_begin(m, g, &b);
    if (st != CLF_OK)
        return st;
    full_pass in;
    int enc, dec = encode_decode(&b, B, S, T, &in, &enc);
    m->v_src = in.src, m->v_tgt = in.tgt, m->v_src_mask = in.src_mask, m->v_tgt_mask = in.tgt_mask;

    /* logits[B*T, V] = dec · Wp^T + bp, then log_softmax over V if configured */
    int logits = clf_graph_value(g, CLF_VALUE_OUTPUT, (size_t)B * T * V * sizeof(float), "logits");
    clf_build_projection(&b, logits, dec, 0, c->d_model, B * T,
                         c->output == CLF_OUTPUT_LOG_SOFTMAX);
    if (g->status == CLF_OK)
        g->values[enc].kind = CLF_VALUE_OUTPUT; /* kept alive to be downloaded */
    m->v_enc = enc;
    m->v_logits = logits;
    return clf_builder_end(&b);
}

clf_status clf_model_build_encoder_graph(clf_model *m, int B, int S, clf_ptr src_mask,
                                         const clf_kv_cache *cross, clf_ptr enc_out, clf_graph *g,
                                         int *v_src)
{
    const clf_model_config *c = &m->cfg;
    const int d = c->d_model;
    const size_t row2 = 2 * (size_t)d;
    builder b;
    clf_status st = clf_builder_begin(m, g, &b);
    if (st != CLF_OK)
        return st;
    *v_src = clf_graph_value(g, CLF_VALUE_INPUT, (size_t)B * S * 4, "src");
    int mask = clf_graph_external(g, src_mask, (size_t)B * S * 4, "src_mask");
    int kv = clf_graph_external(g, cross->base, cross->bytes, "cross_kv_cache");
    int enc = clf_build_encoder(&b, *v_src, mask, B, S);
    if (enc_out.buf) {
        int dst = clf_graph_external(g, enc_out, (size_t)B * S * d * 4, "encoder_out");
        clf_add_args a = {.n = (size_t)B * S * d * 4};
        clf_node *n = clf_graph_node(g, CLF_NODE_COPY, &a, sizeof a, "encoder_out");
        clf_graph_bind(g, n, offsetof(clf_add_args, out), dst, 0);
        clf_graph_bind(g, n, offsetof(clf_add_args, a), enc, 0);
    }
    for (int i = 0; i < c->decoder_layers; i++) {
        char prefix[96], label[112];
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.cross_attention_block", i);
        snprintf(label, sizeof label, "%s.w_kv", prefix);
        int wkv =
            clf_build_required(&b, clf_build_weight(&b, 2, prefix, ".w_k.weight"), prefix, ".w_k");
        int bkv = clf_build_weight(&b, 2, prefix, ".w_k.bias");
        /* [B*S, 2d]: slot b's S rows are contiguous, so one GEMM fills the layer's block */
        clf_build_linear(&b, label, kv, (size_t)i * cross->slots * cross->len * row2, (int)row2,
                         enc, 0, d, wkv, bkv, B * S, 2 * d, d, 0, 0);
    }
    return clf_builder_end(&b);
}

clf_status clf_model_build_step_graph(clf_model *m, const clf_step_spec *s, clf_graph *g,
                                      clf_step_values *v)
{
    const clf_model_config *c = &m->cfg;
    const int A = s->rows, V = c->tgt_vocab, d = c->d_model;
    const int T = s->use_cache ? 1 : s->pos + 1;
    if (s->pos_dev.buf &&
        (s->pos != 0 || !s->use_cache || s->row_pos || s->pos_max < 0 || s->pos_max >= s->self.len))
        return clf_error(CLF_ERR_INTERNAL,
                         "model: a step's position on the device needs pos 0, the cache, no row "
                         "positions and pos_max %d below the cache's %d rows",
                         s->pos_max, s->self.len);
    builder b;
    clf_status st = clf_builder_begin(m, g, &b);
    if (st != CLF_OK)
        return st;
    v->ids = clf_graph_value(g, CLF_VALUE_INPUT, (size_t)A * T * 4, "ids");
    decoder_spec ds = {
        .B = A,
        .S = s->src_len,
        .T = 1,
        .ids = v->ids,
        .tgt_mask = -1,
        .enc = -1,
        .src_mask = clf_graph_external(g, s->src_mask, (size_t)A * s->src_len * 4, "src_mask"),
        .pos0 = s->pos,
        .has_cache = 1,
        .self_cache = clf_graph_external(g, s->self.base, s->self.bytes, "self_kv"),
        .cross_cache = clf_graph_external(g, s->cross.base, s->cross.bytes, "cross_kv"),
        .slots = s->self.slots,
        .self_len = s->self.len,
        .cross_slots = s->cross.slots,
        .cross_len = s->cross.len,
        .row_pos = s->use_cache ? s->row_pos : NULL,
        .self_kv_len = s->self_kv_len,
        .self_mask = -1,
        .write_row = s->write_row,
        .self_rows_ld = s->self.rows_ld,
        .cross_rows_ld = s->cross.rows_ld,
        .probs = -1};
    /* the row tables: [A, ld] I32 each, read by every layer's attention */
    if (s->self.rows_ld > 0)
        ds.self_rows =
            clf_graph_external(g, s->self.rows, (size_t)A * s->self.rows_ld * 4, "self_kv_rows");
    if (s->cross.rows_ld > 0)
        ds.cross_rows =
            clf_graph_external(g, s->cross.rows, (size_t)A * s->cross.rows_ld * 4, "cross_kv_rows");
    if (ds.row_pos)
        ds.self_mask =
            clf_graph_external(g, s->self_mask, (size_t)A * s->self_kv_len * 4, "self_mask");
    if (s->pos_dev.buf) {
        ds.has_pos_dev = 1;
        ds.pos_dev = clf_graph_external(g, s->pos_dev, 4, "pos");
        ds.pos_max = s->pos_max;
    }
    v->attention = -1;
    v->next_ids = -1;
    if (s->want_attention)
        ds.probs = v->attention =
            clf_graph_value(g, CLF_VALUE_OUTPUT,
                            (size_t)A * c->heads * T * s->src_len * sizeof(float), "attention");
    if (!s->use_cache) {
        ds.T = T;
        ds.pos0 = 0;
        ds.has_cache = 0;
        ds.enc = clf_graph_external(g, s->enc, (size_t)s->cross.slots * s->src_len * d * 4, "enc");
    }
    int dec = clf_build_decoder(&b, &ds);
    /* only each sentence's last position is projected: rows T*d apart from (T-1)*d */
    size_t last_off = (size_t)(T - 1) * d;
    int last_ld = T * d;
    if (s->log_probs == 2) { /* the argmax of the logits, then log_softmax over them */
        v->out = clf_graph_value(g, CLF_VALUE_OUTPUT, (size_t)A * V * sizeof(float), "log_probs");
        clf_build_projection(&b, v->out, dec, last_off, last_ld, A, 0);
        v->next_ids = clf_graph_value(g, CLF_VALUE_OUTPUT, (size_t)A * 4, "next_ids");
        clf_softmax_args a = {.rows = A, .cols = V};
        clf_node *n = clf_graph_node(g, CLF_OP_ARGMAX, &a, sizeof a, "argmax");
        clf_graph_bind(g, n, offsetof(clf_softmax_args, out), v->next_ids, 0);
        clf_graph_bind(g, n, offsetof(clf_softmax_args, x), v->out, 0);
        clf_softmax_args ls = {.rows = A, .cols = V, .log = 1};
        n = clf_graph_node(g, CLF_OP_SOFTMAX, &ls, sizeof ls, "log_softmax");
        clf_graph_bind(g, n, offsetof(clf_softmax_args, out), v->out, 0);
        clf_graph_bind(g, n, offsetof(clf_softmax_args, x), v->out, 0);
    } else if (s->log_probs == 3) { /* each row's top_k best of top_base + log_softmax */
        /* the log-softmax inside topk where the backend has it: the same values, one pass
         * over the rows x vocabulary logits fewer */
        const int fused = m->api->supports(m->be, CLF_OP_TOPK_LOG_SOFTMAX);
        int lp = clf_build_activation(&b, (size_t)A * V, fused ? "logits" : "log_probs");
        clf_build_projection(&b, lp, dec, last_off, last_ld, A, !fused);
        const size_t top = (size_t)A * (size_t)s->top_k * 4;
        v->out = clf_graph_value(g, CLF_VALUE_OUTPUT, top, "top_values");
        v->next_ids = clf_graph_value(g, CLF_VALUE_OUTPUT, top, "top_ids");
        int base = clf_graph_external(g, s->top_base, (size_t)A * 4, "top_base");
        clf_topk_args a = {.rows = A, .cols = V, .k = s->top_k, .log_softmax = fused};
        clf_node *n = clf_graph_node(g, CLF_OP_TOPK, &a, sizeof a, "topk");
        clf_graph_bind(g, n, offsetof(clf_topk_args, val), v->out, 0);
        clf_graph_bind(g, n, offsetof(clf_topk_args, idx), v->next_ids, 0);
        clf_graph_bind(g, n, offsetof(clf_topk_args, x), lp, 0);
        clf_graph_bind(g, n, offsetof(clf_topk_args, base), base, 0);
    } else if (s->log_probs) {
        v->out = clf_graph_value(g, CLF_VALUE_OUTPUT, (size_t)A * V * sizeof(float), "log_probs");
        clf_build_projection(&b, v->out, dec, last_off, last_ld, A, 1);
    } else {
        int logits = clf_build_activation(&b, (size_t)A * V, "logits");
        clf_build_projection(&b, logits, dec, last_off, last_ld, A, 0);
        v->out = clf_graph_value(g, CLF_VALUE_OUTPUT, (size_t)A * 4, "next_ids");
        clf_softmax_args a = {.rows = A, .cols = V}; /* argmax reuses the softmax layout */
        clf_node *n = clf_graph_node(g, CLF_OP_ARGMAX, &a, sizeof a, "argmax");
        clf_graph_bind(g, n, offsetof(clf_softmax_args, out), v->out, 0);
        clf_graph_bind(g, n, offsetof(clf_softmax_args, x), logits, 0);
    }
    return clf_builder_end(&b);
}

/* The gradient of a weight sits at the weight's offset in the chunk's gradient twin. */
static clf_ptr grad_of_weight(void *user, clf_ptr param)
{
    const clf_model *m = user;
    int c = clf_model_chunk_holding(m, param.buf);
    return c < 0 ? (clf_ptr){0} /* the PE table */ : (clf_ptr){m->grad_chunks[c], param.off};
}

clf_status clf_model_build_train_graph(clf_model *m, const clf_train_graph_spec *s, clf_graph *g,
                                       clf_train_values *v)
{
    const clf_model_config *c = &m->cfg;
    const int B = s->B, S = s->S, T = s->T, V = c->tgt_vocab;
    builder b;
    if (s->backward && !m->grad_chunks)
        return clf_error(CLF_ERR_INTERNAL, "model: training graph before clf_model_enable_grads");
    clf_status st = clf_builder_begin(m, g, &b);
    if (st != CLF_OK)
        return st;
    b.training = 1;
    if (s->dropout) {
        b.p_residual = c->dropout;
        b.p_embedding = c->dropout_embedding;
        b.p_attention = c->dropout_attention;
        b.p_ffn = c->dropout_ffn;
    }
    full_pass in;
    int enc, dec = encode_decode(&b, B, S, T, &in, &enc);
    (void)enc;
    v->src = in.src, v->tgt = in.tgt, v->src_mask = in.src_mask, v->tgt_mask = in.tgt_mask;
    v->labels = clf_graph_value(g, CLF_VALUE_INPUT, (size_t)B * T * 4, "labels");
    /* logits [B*T, V]; the loss's gradient overwrites them in place (dlogits) */
    int logits = clf_build_activation(&b, (size_t)B * T * V, "logits");
    clf_build_projection(&b, logits, dec, 0, c->d_model, B * T, 0);
    v->loss = clf_graph_value(g, CLF_VALUE_OUTPUT, (size_t)B * T * sizeof(float), "loss");
    v->n_dropout = b.n_dropout;
    v->ce_node = g->n_nodes;
    clf_cross_entropy_args ce = {.rows = B * T,
                                 .cols = V,
                                 .ignore_index = c->pad_id,
                                 .label_smoothing = s->label_smoothing,
                                 .grad_scale = 1.0f};
    clf_node *n = clf_graph_node(g, CLF_OP_CROSS_ENTROPY, &ce, sizeof ce, "cross_entropy");
    clf_graph_bind(g, n, offsetof(clf_cross_entropy_args, loss), v->loss, 0);
    clf_graph_bind(g, n, offsetof(clf_cross_entropy_args, logits), logits, 0);
    clf_graph_bind(g, n, offsetof(clf_cross_entropy_args, targets), v->labels, 0);
    if (s->backward) {
        clf_graph_bind(g, n, offsetof(clf_cross_entropy_args, dlogits), logits, 0);
        size_t rows = (size_t)B * (S > T ? S : T);
        int ones = clf_graph_external(g, s->ones, rows * sizeof(float), "ones");
        clf_backward_spec bs = {.n_forward = v->ce_node,
                                .seed_value = logits,
                                .seed_grad = logits,
                                .ones = ones,
                                .grad_of = grad_of_weight,
                                .user = m};
        if (g->status == CLF_OK && (st = clf_graph_append_backward(g, &bs)) != CLF_OK) {
            free(b.wval);
            clf_graph_free(g);
            return st;
        }
    }
    return clf_builder_end(&b);
}

clf_status clf_model_check_train_batch(clf_model *m, int batch, int src_len, int tgt_len)
{
    if (batch < 1 || src_len < 1 || tgt_len < 1)
        return clf_error(CLF_ERR_INPUT, "model: batch check: empty shape %d x %d/%d", batch,
                         src_len, tgt_len);
    clf_train_graph_spec spec = {
        .B = batch, .S = src_len, .T = tgt_len, .dropout = 1, .backward = 1};
    clf_train_values v;
    clf_graph g;
    clf_graph_init(&g);
    clf_status st = clf_model_build_train_graph(m, &spec, &g, &v); /* planned; freed on failure */
    if (st != CLF_OK)
        return st;
    const uint64_t limit = m->api->max_alloc ? m->api->max_alloc(m->be) : 0;
    if (limit && g.arena_bytes > limit)
        st = clf_error(CLF_ERR_INPUT,
                       "model: a training batch of %d x %d/%d tokens needs %zu bytes of "
                       "activations in one allocation, more than the backend's largest (%llu "
                       "bytes): lower train.max_len, batch_size or batch_tokens",
                       batch, src_len, tgt_len, g.arena_bytes, (unsigned long long)limit);
    clf_graph_free(&g);
    return st;
}
