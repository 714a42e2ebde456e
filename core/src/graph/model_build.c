/* The Transformer's layers as graph nodes (see clformer/model.h): attention, feed-forward,
 * norms, residual connections, embeddings, the encoder and decoder stacks and the output
 * projection, in inference and training form. The graphs callers ask for are put
 * together from these in model_graphs.c.
 *
 * Notation in the comments: B batch, S source length, T target length, d d_model,
 * h heads, dk = d/h, F d_ff, V vocabulary. Activations are row-major [rows, features]
 * with rows = B*S (encoder) or B*T (decoder). */
#include "graph/graph_private.h"
#include "io/weight_names.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* dst = a then b, cut to size - 1 bytes as snprintf(dst, size, "%s%s", a, b) would write
 * it. The step graph joins weight names and node labels this way for every
 * layer on every decoding step, where snprintf's formatting cost more than the rest of
 * the build. size >= 1. */
static void join(char *dst, size_t size, const char *a, const char *b)
{
    const size_t na = strnlen(a, size - 1), nb = strnlen(b, size - 1 - na);
    memcpy(dst, a, na);
    memcpy(dst + na, b, nb);
    dst[na + nb] = '\0';
}

/* The graph value of weight `name` spanning `count` packed tensors from it (count 3 for
 * [Wq;Wk;Wv]); -1 when the model has no such tensor (a bias with attention_bias off). */
static int weight_span(builder *b, const char *name, int count)
{
    /* a tied matrix is one weight, hence one graph value for all its uses: autodiff then
     * accumulates every use's gradient into its one gradient buffer */
    const char *tied = clf_weights_tied_to(&b->m->cfg, name);
    int i = clf_model_spec_index(b->m, tied ? tied : name);
    if (i < 0)
        return -1;
    if (count == 1 && b->wval[i] >= 0)
        return b->wval[i];
    /* the packed members of a group all have the leader's shape */
    size_t bytes = (size_t)count * (size_t)clf_weight_spec_numel(&b->m->specs[i]) * sizeof(float);
    int v = clf_graph_external(b->g, b->m->wdev[i], bytes, name);
    if (count == 1)
        b->wval[i] = v;
    return v;
}

int clf_build_weight(builder *b, int count, const char *prefix, const char *suffix)
{
    char name[CLF_TENSOR_NAME_MAX];
    join(name, sizeof name, prefix, suffix);
    return weight_span(b, name, count);
}

int clf_build_required(builder *b, int v, const char *prefix, const char *what)
{
    if (v < 0 && b->g->status == CLF_OK)
        b->g->status = clf_error(CLF_ERR_INTERNAL, "model: weight %s%s missing", prefix, what);
    return v;
}

int clf_build_activation(builder *b, size_t elems, const char *label)
{
    return clf_graph_value(b->g, CLF_VALUE_ACTIVATION, elems * sizeof(float), label);
}

/* Training: a new value dropout(x[n]) at rate p (inverted dropout; the node's tag numbers
 * the site so that the trainer gives it, and its backward twin, one seed per step). At
 * inference, or with p = 0, x itself. */
static int dropout(builder *b, int x, size_t n, float p, const char *label)
{
    if (!b->training || p <= 0.0f)
        return x;
    int y = clf_build_activation(b, n, "dropped");
    clf_dropout_args a = {.n = n, .p = p};
    clf_node *nd = clf_graph_node(b->g, CLF_OP_DROPOUT, &a, sizeof a, label);
    if (nd)
        nd->tag = b->n_dropout++;
    clf_graph_bind(b->g, nd, offsetof(clf_dropout_args, out), y, 0);
    clf_graph_bind(b->g, nd, offsetof(clf_dropout_args, x), x, 0);
    return y;
}

/* out[n] = x[n] + y[n]; out may be x (in place) */
static void add_into(builder *b, int out, int x, int y, size_t n, const char *label)
{
    clf_add_args a = {.n = n};
    clf_node *nd = clf_graph_node(b->g, CLF_OP_ADD, &a, sizeof a, label);
    clf_graph_bind(b->g, nd, offsetof(clf_add_args, out), out, 0);
    clf_graph_bind(b->g, nd, offsetof(clf_add_args, a), x, 0);
    clf_graph_bind(b->g, nd, offsetof(clf_add_args, b), y, 0);
}

/* Binds the low-precision twin of weight value w (clf_model_set_weight_type), if it has
 * one, to gemm node n. */
static void bind_lowp(builder *b, clf_node *n, int w)
{
    clf_lowp_twin t;
    if (w < 0 || b->g->values[w].kind != CLF_VALUE_EXTERNAL)
        return;
    if (!clf_model_lowp_twin(b->m, b->g->values[w].ext, b->g->values[w].bytes, &t)) {
        /* after clf_model_release_f32 a product over a weight without its int8 copy would
         * read given-back bytes: every linear layer's matrix has one, so this is a bug */
        if (b->m->f32_released && clf_model_chunk_holding(b->m, b->g->values[w].ext.buf) >= 0 &&
            b->g->status == CLF_OK)
            b->g->status = clf_error(CLF_ERR_INTERNAL,
                                     "model: %s multiplies with F32 weights that were given "
                                     "back (clf_model_release_f32)",
                                     n ? n->label : "a product");
        return;
    }
    clf_graph_bind(b->g, n, t.field, clf_graph_external(b->g, t.w, t.w_bytes, "weight (lowp)"), 0);
    if (t.scale.buf)
        clf_graph_bind(b->g, n, offsetof(clf_gemm_args, b_scale),
                       clf_graph_external(b->g, t.scale, t.scale_bytes, "weight scales"), 0);
}

/* Binds the BF16 copy of weight value w (clf_model_set_precision) to gemm node n as
 * b_bf16; the node asks for BF16 arithmetic (bf16_arith). */
static void bind_arith(builder *b, clf_node *n, int w)
{
    const clf_value *v = &b->g->values[w];
    const int c = v->kind == CLF_VALUE_EXTERNAL ? clf_model_chunk_holding(b->m, v->ext.buf) : -1;
    if (c < 0 || !b->m->arith_chunks) /* no copy (training): the backend rounds W itself */
        return;
    const clf_ptr at = {b->m->arith_chunks[c], v->ext.off / 2};
    clf_graph_bind(b->g, n, offsetof(clf_gemm_args, b_bf16),
                   clf_graph_external(b->g, at, v->bytes / 2, "weight (bf16)"), 0);
}

/* y[M, N] (= or +=) x[M, K] · W[N, K]^T + bias[N], then relu if asked.
 * x and y start at elements x_off / y_off of their values and have row strides x_ld / y_ld;
 * accumulate adds to what y holds (the residual add fused into the GEMM, beta = 1). */
void clf_build_linear(builder *b, const char *label, int y, size_t y_off, int y_ld, int x,
                      size_t x_off, int x_ld, int w, int bias, int M, int N, int K, int relu,
                      int accumulate)
{
    clf_gemm_args a = {.trans_a = 0,
                       .trans_b = 1,
                       .m = M,
                       .n = N,
                       .k = K,
                       .alpha = 1.0f,
                       .beta = accumulate ? 1.0f : 0.0f,
                       .lda = x_ld,
                       .ldb = K,
                       .ldc = y_ld,
                       .relu = relu,
                       .bf16_arith = b->m->arith_on};
    clf_node *n = clf_graph_node(b->g, CLF_OP_GEMM, &a, sizeof a, label);
    clf_graph_bind(b->g, n, offsetof(clf_gemm_args, a), x, x_off);
    clf_graph_bind(b->g, n, offsetof(clf_gemm_args, b), w, 0);
    clf_graph_bind(b->g, n, offsetof(clf_gemm_args, c), y, y_off);
    if (bias >= 0)
        clf_graph_bind(b->g, n, offsetof(clf_gemm_args, bias), bias, 0);
    /* inference only: training changes the weights, and the low-precision copy is a
     * snapshot */
    if (!b->training)
        bind_lowp(b, n, w);
    if (b->m->arith_on && w >= 0)
        bind_arith(b, n, w);
}

/* out[rows, d] = alpha * n(x[rows, d]) + beta with n a plugin's norm (layernorm.style:
 * NAME); beta only when the norm has one */
static void plugin_norm(builder *b, const char *prefix, int out, int x, int rows)
{
    const clf_model_config *c = &b->m->cfg;
    clf_norm_args a = {.op = c->norm_op, .rows = rows, .cols = b->d, .eps = c->ln_eps};
    int alpha = clf_build_required(b, clf_build_weight(b, 1, prefix, ".alpha"), prefix, ".alpha");
    int beta = -1;
    if (c->norm_op->norm_has_bias &&
        (beta = clf_build_required(b, clf_build_weight(b, 1, prefix, ".bias"), prefix, ".bias")) <
            0)
        return;
    if (alpha < 0)
        return;
    clf_node *n = clf_graph_node(b->g, CLF_OP_NORM, &a, sizeof a, prefix);
    clf_graph_bind(b->g, n, offsetof(clf_norm_args, out), out, 0);
    clf_graph_bind(b->g, n, offsetof(clf_norm_args, x), x, 0);
    clf_graph_bind(b->g, n, offsetof(clf_norm_args, alpha), alpha, 0);
    if (beta >= 0)
        clf_graph_bind(b->g, n, offsetof(clf_norm_args, beta), beta, 0);
}

/* out[rows, d] = LN(x[rows, d]) with the parameters <prefix>.alpha / <prefix>.bias */
static void layernorm(builder *b, const char *prefix, int out, int x, int rows)
{
    const clf_model_config *c = &b->m->cfg;
    if (c->norm_op) {
        plugin_norm(b, prefix, out, x, rows);
        return;
    }
    clf_layernorm_args a = {.rows = rows, .cols = b->d, .style = c->ln_style, .eps = c->ln_eps};
    int alpha = clf_build_required(b, clf_build_weight(b, 1, prefix, ".alpha"), prefix, ".alpha");
    int beta = clf_build_required(b, clf_build_weight(b, 1, prefix, ".bias"), prefix, ".bias");
    if (alpha < 0 || beta < 0)
        return;
    clf_node *n = clf_graph_node(b->g, CLF_OP_LAYERNORM, &a, sizeof a, prefix);
    clf_graph_bind(b->g, n, offsetof(clf_layernorm_args, out), out, 0);
    clf_graph_bind(b->g, n, offsetof(clf_layernorm_args, x), x, 0);
    clf_graph_bind(b->g, n, offsetof(clf_layernorm_args, alpha), alpha, 0);
    clf_graph_bind(b->g, n, offsetof(clf_layernorm_args, beta), beta, 0);
}

/* One attention site of a sublayer: where the queries and keys/values come from. */
typedef struct attention_site {
    int B, Tq, Tk;
    int kv_src; /* cross-attention: the encoder output [B*S, d]; -1 for self-attention */
    int mask;   /* I32 [B, Tk] key mask value; -1: no mask */
    int causal;
    /* Decoding with a KV cache (Tq = 1): keys and values are read from `cache`, this
     * layer's block of [slots, cache_len, 2d] rows (k|v side by side) starting at element
     * cache_off; slot b holds sentence b. Self-attention first writes this step's k|v at
     * row write_pos of each slot; cross-attention (write_pos < 0) only reads. */
    int has_cache;
    int cache;
    size_t cache_off;
    int cache_len, write_pos;
    /* optional: a row table (clf_attention_args.kv_rows) over the cache's `slots` slots,
     * the value kv_rows with kv_rows_ld > 0 columns; kv_rows_ld 0: slot b reads its own */
    int kv_rows, kv_rows_ld, slots;
    int probs; /* value receiving the softmax [B, h, Tq, Tk], or -1 */
    /* self-attention of a step whose position is on the device (clf_step_spec.pos_dev): the
     * I32 value added to Tk and write_pos when the op runs (clf_attention_args.pos_add) when
     * has_pos_dev, and its bound */
    int has_pos_dev, pos_dev, pos_max;
} attention_site;

/* The attention node of a block (q, k, v at their values and offsets, the site's optional
 * mask and probs, and qkv_new: the [q|k|v] value whose k|v the op appends, or -1), then
 * y[B*q_len, d] (= or +=) ctx · Wo^T (+ bo). Shared by the full pass and the cached decoding
 * step, which differ only in where q, k and v come from. */
static void attend_and_project(builder *b, const char *prefix, const clf_attention_args *a,
                               const attention_site *s, int q, size_t q_off, int kv, size_t k_off,
                               size_t v_off, int ctx, int y, int accumulate, int qkv_new)
{
    const int d = b->d, rows = a->batch * a->q_len;
    char label[96];
    clf_node *n = clf_graph_node(b->g, CLF_OP_ATTENTION, a, sizeof *a, prefix);
    if (n && b->training && b->p_attention > 0.0f) {
        /* dropout on the softmax weights: a site of its own, seeded like a dropout node */
        n->args.attention.dropout_p = b->p_attention;
        n->tag = b->n_dropout++;
    }
    clf_graph_bind(b->g, n, offsetof(clf_attention_args, q), q, q_off);
    clf_graph_bind(b->g, n, offsetof(clf_attention_args, k), kv, k_off);
    clf_graph_bind(b->g, n, offsetof(clf_attention_args, v), kv, v_off);
    clf_graph_bind(b->g, n, offsetof(clf_attention_args, out), ctx, 0);
    if (s->mask >= 0)
        clf_graph_bind(b->g, n, offsetof(clf_attention_args, key_mask), s->mask, 0);
    if (s->probs >= 0)
        clf_graph_bind(b->g, n, offsetof(clf_attention_args, probs), s->probs, 0);
    if (s->kv_rows_ld > 0)
        clf_graph_bind(b->g, n, offsetof(clf_attention_args, kv_rows), s->kv_rows, 0);
    if (qkv_new >= 0) { /* the rows to append: k and v of [q|k|v] */
        clf_graph_bind(b->g, n, offsetof(clf_attention_args, k_new), qkv_new, (size_t)d);
        clf_graph_bind(b->g, n, offsetof(clf_attention_args, v_new), qkv_new, 2 * (size_t)d);
    }
    if (s->has_pos_dev) {
        n->args.attention.pos_add_max = s->pos_max;
        clf_graph_bind(b->g, n, offsetof(clf_attention_args, pos_add), s->pos_dev, 0);
    }
    int wo = clf_build_required(b, clf_build_weight(b, 1, prefix, ".w_o.weight"), prefix, ".w_o");
    int bo = clf_build_weight(b, 1, prefix, ".w_o.bias");
    join(label, sizeof label, prefix, ".w_o");
    clf_build_linear(b, label, y, 0, d, ctx, 0, d, wo, bo, rows, d, d, 0, accumulate);
}

/* One decoding step of an attention block with the KV cache (see attention_site):
 *   q [B, d] = x · Wq^T (+ bq)
 *   self:  cache[b, write_pos, 0:2d] = x[b] · [Wk;Wv]^T (+ [bk;bv])  (the GEMM writes
 *          straight into the cache: row b lands cache_len rows after row b-1)
 *   ctx [B, d] = attention of q over cache[b, 0:Tk]
 *   y [B, d] (= or +=) ctx · Wo^T (+ bo)
 * On a backend whose attention appends (CLF_OP_ATTENTION_APPEND), self-attention instead
 * makes [q|k|v] [B, 3d] = x · [Wq;Wk;Wv]^T in one product and the attention op writes k|v
 * into the cache before it attends: one call fewer. */
static void attention_block_cached(builder *b, const char *prefix, const attention_site *s, int x,
                                   int y, int accumulate)
{
    const int d = b->d, B = s->B;
    const size_t row2 = 2 * (size_t)d, slot = (size_t)s->cache_len * row2;
    const int append = s->write_pos >= 0 && b->m->api->supports(b->m->be, CLF_OP_ATTENTION_APPEND);
    const int q_ld = append ? 3 * d : d;
    char label[96];
    int wq = clf_build_required(b, clf_build_weight(b, append ? 3 : 1, prefix, ".w_q.weight"),
                                prefix, ".w_q");
    int bq = clf_build_weight(b, append ? 3 : 1, prefix, ".w_q.bias");
    int q = clf_build_activation(b, (size_t)B * q_ld, append ? "qkv" : "q");
    int ctx = clf_build_activation(b, (size_t)B * d, "ctx");
    join(label, sizeof label, prefix, append ? ".w_qkv" : ".w_q");
    clf_build_linear(b, label, q, 0, q_ld, x, 0, d, wq, bq, B, q_ld, d, 0, 0);
    if (s->write_pos >= 0 && !append) {
        int wkv =
            clf_build_required(b, clf_build_weight(b, 2, prefix, ".w_k.weight"), prefix, ".w_k");
        int bkv = clf_build_weight(b, 2, prefix, ".w_k.bias");
        join(label, sizeof label, prefix, ".w_kv");
        clf_build_linear(b, label, s->cache, s->cache_off + (size_t)s->write_pos * row2, (int)slot,
                         x, 0, d, wkv, bkv, B, 2 * d, d, 0, 0);
    }
    clf_attention_args a = {.batch = B,
                            .heads = b->m->cfg.heads,
                            .q_len = 1,
                            .kv_len = s->Tk,
                            .head_dim = b->dk,
                            .q_ld = q_ld,
                            .k_ld = 2 * d,
                            .v_ld = 2 * d,
                            .out_ld = d,
                            .q_bstride = (size_t)q_ld,
                            .kv_bstride = slot,
                            .out_bstride = (size_t)d,
                            .key_mask_stride = (size_t)s->Tk,
                            .scale = (float)(1.0 / sqrt((double)b->dk)),
                            .kv_rows_ld = s->kv_rows_ld,
                            .kv_entries = s->kv_rows_ld > 0 ? s->slots : 0,
                            .new_ld = append ? q_ld : 0,
                            .new_pos = append ? s->write_pos : 0};
    attend_and_project(b, prefix, &a, s, q, 0, s->cache, s->cache_off, s->cache_off + (size_t)d,
                       ctx, y, accumulate, append ? q : -1);
}

/* ctx[B*Tq, d] = concat_h softmax(q_h k_h^T / sqrt(dk), masked) v_h, where
 *   self-attention:  [q|k|v] [B*Tq, 3d] = x · [Wq;Wk;Wv]^T (+ [bq;bk;bv])
 *   cross-attention: q [B*Tq, d] = x · Wq^T,  [k|v] [B*Tk, 2d] = enc · [Wk;Wv]^T
 * then y[B*Tq, d] (= or +=) ctx · Wo^T (+ bo). */
static void attention_block(builder *b, const char *prefix, const attention_site *s, int x, int y,
                            int accumulate)
{
    if (s->has_cache) {
        attention_block_cached(b, prefix, s, x, y, accumulate);
        return;
    }
    const int d = b->d, B = s->B, Tq = s->Tq, Tk = s->Tk;
    const size_t rq = (size_t)B * Tq, rk = (size_t)B * Tk;
    char label[96];
    int ctx = clf_build_activation(b, rq * d, "ctx");
    clf_attention_args a = {.batch = B,
                            .heads = b->m->cfg.heads,
                            .q_len = Tq,
                            .kv_len = Tk,
                            .head_dim = b->dk,
                            .out_ld = d,
                            .out_bstride = (size_t)Tq * d,
                            .key_mask_stride = (size_t)Tk,
                            .causal = s->causal,
                            .q_pos0 = 0,
                            /* the tutorial divides by sqrt(dk); 1/sqrt(dk) is within 1 ulp */
                            .scale = (float)(1.0 / sqrt((double)b->dk))};
    int q, kv;
    size_t q_off, k_off, v_off;
    if (s->kv_src < 0) {
        int wqkv =
            clf_build_required(b, clf_build_weight(b, 3, prefix, ".w_q.weight"), prefix, ".w_q");
        int bqkv = clf_build_weight(b, 3, prefix, ".w_q.bias");
        q = kv = clf_build_activation(b, rq * 3 * d, "qkv");
        join(label, sizeof label, prefix, ".w_qkv");
        clf_build_linear(b, label, q, 0, 3 * d, x, 0, d, wqkv, bqkv, (int)rq, 3 * d, d, 0, 0);
        q_off = 0, k_off = (size_t)d, v_off = 2 * (size_t)d;
        a.q_ld = a.k_ld = a.v_ld = 3 * d;
        a.q_bstride = a.kv_bstride = (size_t)Tq * 3 * d;
    } else {
        int wq =
            clf_build_required(b, clf_build_weight(b, 1, prefix, ".w_q.weight"), prefix, ".w_q");
        int bq = clf_build_weight(b, 1, prefix, ".w_q.bias");
        int wkv =
            clf_build_required(b, clf_build_weight(b, 2, prefix, ".w_k.weight"), prefix, ".w_k");
        int bkv = clf_build_weight(b, 2, prefix, ".w_k.bias");
        q = clf_build_activation(b, rq * d, "q");
        kv = clf_build_activation(b, rk * 2 * d, "kv");
        join(label, sizeof label, prefix, ".w_q");
        clf_build_linear(b, label, q, 0, d, x, 0, d, wq, bq, (int)rq, d, d, 0, 0);
        join(label, sizeof label, prefix, ".w_kv");
        clf_build_linear(b, label, kv, 0, 2 * d, s->kv_src, 0, d, wkv, bkv, (int)rk, 2 * d, d, 0,
                         0);
        q_off = 0, k_off = 0, v_off = (size_t)d;
        a.q_ld = d;
        a.k_ld = a.v_ld = 2 * d;
        a.q_bstride = (size_t)Tq * d;
        a.kv_bstride = (size_t)Tk * 2 * d;
    }
    attend_and_project(b, prefix, &a, s, q, q_off, kv, k_off, v_off, ctx, y, accumulate, -1);
}

/* The FFN's hidden layer u[R, F] from x[R, d] for a plugin activation f:
 *   u = f(x W1^T + b1)                   (activation)
 *   u = f(x W1^T + b1) * (x W3^T + b3)   (gated activation: swiglu, geglu)
 * At inference f runs in place on the first GEMM's output; training keeps it (the
 * backward pass reads f's input). */
static int plugin_ffn_hidden(builder *b, const char *prefix, int rows, int x, int w1, int b1)
{
    const clf_model_config *c = &b->m->cfg;
    const int d = b->d, F = c->d_ff;
    const size_t n = (size_t)rows * F;
    char label[96];
    int h = clf_build_activation(b, n, "ffn_pre_activation");
    join(label, sizeof label, prefix, ".linear_1");
    clf_build_linear(b, label, h, 0, F, x, 0, d, w1, b1, rows, F, d, 0, 0);
    int gate = -1;
    if (clf_model_ffn_gated(c)) {
        int w3 = clf_build_required(b, clf_build_weight(b, 1, prefix, ".linear_3.weight"), prefix,
                                    ".linear_3");
        int b3 = clf_build_required(b, clf_build_weight(b, 1, prefix, ".linear_3.bias"), prefix,
                                    ".linear_3");
        gate = clf_build_activation(b, n, "ffn_gate");
        join(label, sizeof label, prefix, ".linear_3");
        clf_build_linear(b, label, gate, 0, F, x, 0, d, w3, b3, rows, F, d, 0, 0);
    }
    int u = b->training ? clf_build_activation(b, n, "ffn_hidden") : h;
    clf_activation_args a = {.op = c->activation_op, .n = n};
    snprintf(label, sizeof label, "%s.%s", prefix, c->activation_op->name);
    clf_node *nd = clf_graph_node(b->g, CLF_OP_ACTIVATION, &a, sizeof a, label);
    clf_graph_bind(b->g, nd, offsetof(clf_activation_args, out), u, 0);
    clf_graph_bind(b->g, nd, offsetof(clf_activation_args, x), h, 0);
    if (gate >= 0)
        clf_graph_bind(b->g, nd, offsetof(clf_activation_args, gate), gate, 0);
    return u;
}

/* u[R, F] = act(x[R, d] · W1^T + b1);  y[R, d] (= or +=) u · W2^T + b2
 * (relu fused into the GEMM; a plugin activation, gated or not, as plugin_ffn_hidden) */
static void feed_forward_block(builder *b, const char *prefix, int rows, int x, int y,
                               int accumulate)
{
    const int d = b->d, F = b->m->cfg.d_ff;
    char label[96];
    int w1 = clf_build_required(b, clf_build_weight(b, 1, prefix, ".linear_1.weight"), prefix,
                                ".linear_1");
    int b1 = clf_build_required(b, clf_build_weight(b, 1, prefix, ".linear_1.bias"), prefix,
                                ".linear_1");
    int w2 = clf_build_required(b, clf_build_weight(b, 1, prefix, ".linear_2.weight"), prefix,
                                ".linear_2");
    int b2 = clf_build_required(b, clf_build_weight(b, 1, prefix, ".linear_2.bias"), prefix,
                                ".linear_2");
    int u;
    if (b->m->cfg.activation == CLF_ACT_PLUGIN) {
        u = plugin_ffn_hidden(b, prefix, rows, x, w1, b1);
    } else {
        u = clf_build_activation(b, (size_t)rows * F, "ffn_hidden");
        join(label, sizeof label, prefix, ".linear_1");
        clf_build_linear(b, label, u, 0, F, x, 0, d, w1, b1, rows, F, d, 1, 0);
    }
    /* the tutorial's linear_2(dropout(relu(linear_1(x)))) */
    u = dropout(b, u, (size_t)rows * F, b->p_ffn, prefix);
    join(label, sizeof label, prefix, ".linear_2");
    clf_build_linear(b, label, y, 0, d, u, 0, F, w2, b2, rows, d, F, 0, accumulate);
}

/* The function f of a residual sublayer: attention (self or cross) or feed-forward. */
typedef struct sublayer {
    const char *prefix; /* e.g. "decoder.layers.0.cross_attention_block" */
    int is_ffn;
    attention_site site;
} sublayer;

static void run_sublayer(builder *b, const sublayer *f, int rows, int x, int y, int accumulate)
{
    if (f->is_ffn)
        feed_forward_block(b, f->prefix, rows, x, y, accumulate);
    else
        attention_block(b, f->prefix, &f->site, x, y, accumulate);
}

/* One residual connection around f on the stream h[rows, d]; returns the new stream:
 *   pre:    h + f(LN(h))    f's last GEMM accumulates into h (beta = 1)
 *   post:   LN(h + f(h))    likewise, then a LayerNorm into a new value
 *   branch: h + LN(f(h))    f into a temporary, LayerNorm, then an add into h
 * Dropout is the identity at inference. */
/* The training form of residual(): every step writes a new value (the backward pass
 * reads the stream before and after each sublayer), and the sublayer's output passes
 * through dropout before it joins the stream, as in the paper:
 *   pre:    h + drop(f(LN(h)))    post: LN(h + drop(f(h)))    branch: h + LN(drop(f(h))) */
static int residual_training(builder *b, const char *norm_prefix, int h, int rows,
                             const sublayer *f)
{
    const size_t n = (size_t)rows * b->d;
    int t = clf_build_activation(b, n, "sublayer_out");
    int out = clf_build_activation(b, n, "stream");
    switch (b->m->cfg.norm) {
    case CLF_NORM_PRE: {
        int x = clf_build_activation(b, n, "normed");
        layernorm(b, norm_prefix, x, h, rows);
        run_sublayer(b, f, rows, x, t, 0);
        add_into(b, out, h, dropout(b, t, n, b->p_residual, f->prefix), n, norm_prefix);
        return out;
    }
    case CLF_NORM_POST: {
        int sum = clf_build_activation(b, n, "residual_sum");
        run_sublayer(b, f, rows, h, t, 0);
        add_into(b, sum, h, dropout(b, t, n, b->p_residual, f->prefix), n, norm_prefix);
        layernorm(b, norm_prefix, out, sum, rows);
        return out;
    }
    case CLF_NORM_BRANCH:
    default: {
        int u = clf_build_activation(b, n, "branch_normed");
        run_sublayer(b, f, rows, h, t, 0);
        layernorm(b, norm_prefix, u, dropout(b, t, n, b->p_residual, f->prefix), rows);
        add_into(b, out, h, u, n, norm_prefix);
        return out;
    }
    }
}

static int residual(builder *b, const char *norm_prefix, int h, int rows, const sublayer *f)
{
    const size_t n = (size_t)rows * b->d;
    if (b->training)
        return residual_training(b, norm_prefix, h, rows, f);
    switch (b->m->cfg.norm) {
    case CLF_NORM_PRE: {
        int x = clf_build_activation(b, n, "normed");
        layernorm(b, norm_prefix, x, h, rows);
        run_sublayer(b, f, rows, x, h, 1);
        return h;
    }
    case CLF_NORM_POST: {
        int out = clf_build_activation(b, n, "stream");
        run_sublayer(b, f, rows, h, h, 1);
        layernorm(b, norm_prefix, out, h, rows);
        return out;
    }
    case CLF_NORM_BRANCH:
    default: {
        int t = clf_build_activation(b, n, "branch");
        int u = clf_build_activation(b, n, "branch_normed");
        run_sublayer(b, f, rows, h, t, 0);
        layernorm(b, norm_prefix, u, t, rows);
        add_into(b, h, h, u, n, norm_prefix);
        return h;
    }
    }
}

/* h[B*L, d] = table[ids] * scale + pe[pos0..pos0+L) (or, with row_pos, pe[row_pos[r]]), where pe is
 * the sinusoidal table or, with positional: learned, the weight pos_name [max_len, d]: the embed op
 * adds either the same way, and autodiff gives the learned one its gradient (see backward_embed).
 */
/* scale: model.embed_scale (sqrt(d) by default). */
static int embedding(builder *b, const char *table_name, const char *pos_name, int ids, int B,
                     int L, int pos0, const int *row_pos, int vocab, int pos_dev, int pos_max)
{
    const int d = b->d;
    int h = clf_build_activation(b, (size_t)B * L * d, "stream");
    int table = clf_build_required(b, weight_span(b, table_name, 1), table_name, "");
    int pe = b->m->cfg.positional == CLF_POS_LEARNED
                 ? clf_build_required(b, weight_span(b, pos_name, 1), pos_name, "")
                 : b->pe;
    /* one node for rows r0..r1: all B*L rows from pos0, or with row_pos (L = 1, continuous
     * decoding) each run of rows at one position, so that every row gets this arithmetic */
    for (int r0 = 0, r1; r0 < B * L; r0 = r1) {
        int p = pos0;
        r1 = B * L;
        if (row_pos)
            for (p = row_pos[r0], r1 = r0 + 1; r1 < B && row_pos[r1] == p;)
                r1++;
        clf_embed_args a = {.rows = r1 - r0,
                            .seq_len = L,
                            .pos0 = p,
                            .dim = d,
                            .vocab = vocab,
                            .scale = b->m->cfg.embed_scale > 0.0f ? b->m->cfg.embed_scale
                                                                  : (float)sqrt((double)d)};
        clf_node *n = clf_graph_node(b->g, CLF_OP_EMBED, &a, sizeof a, table_name);
        clf_graph_bind(b->g, n, offsetof(clf_embed_args, out), h, (size_t)r0 * d);
        clf_graph_bind(b->g, n, offsetof(clf_embed_args, ids), ids, (size_t)r0);
        clf_graph_bind(b->g, n, offsetof(clf_embed_args, table), table, 0);
        /* position t reads row t + position_offset (model.position_offset) */
        clf_graph_bind(b->g, n, offsetof(clf_embed_args, pe), pe,
                       (size_t)b->m->cfg.position_offset * d);
        if (pos_dev >= 0) { /* the position on the device (clf_step_spec.pos_dev) */
            n->args.embed.pos_add_max = pos_max;
            clf_graph_bind(b->g, n, offsetof(clf_embed_args, pos_add), pos_dev, 0);
        }
    }
    if (b->m->cfg.embed_norm) { /* model.embed_norm: LN(table[ids] * scale + pe), then dropout */
        int normed = clf_build_activation(b, (size_t)B * L * d, "stream");
        layernorm(
            b, strcmp(table_name, CLF_WN_SRC_EMBED) ? "decoder.embed.norm" : "encoder.embed.norm",
            normed, h, B * L);
        h = normed;
    }
    return dropout(b, h, (size_t)B * L * d, b->p_embedding, table_name);
}

/* enc[B*S, d]: embedding, N x (self-attention, feed-forward), optional final norm */
int clf_build_encoder(builder *b, int src, int src_mask, int B, int S)
{
    const clf_model_config *c = &b->m->cfg;
    char p[3][96];
    int h = embedding(b, CLF_WN_SRC_EMBED, CLF_WN_SRC_POS, src, B, S, 0, NULL, c->src_vocab, -1, 0);
    for (int i = 0; i < c->encoder_layers; i++) {
        snprintf(p[0], sizeof p[0], "encoder.layers.%d.self_attention_block", i);
        snprintf(p[1], sizeof p[1], "encoder.layers.%d.feed_forward_block", i);
        sublayer attn = {
            .prefix = p[0],
            .site = {.B = B, .Tq = S, .Tk = S, .kv_src = -1, .mask = src_mask, .probs = -1}};
        sublayer ffn = {.prefix = p[1], .is_ffn = 1};
        for (int r = 0; r < 2; r++) {
            snprintf(p[2], sizeof p[2], "encoder.layers.%d.residual_connections.%d.norm", i, r);
            h = residual(b, p[2], h, B * S, r == 0 ? &attn : &ffn);
        }
    }
    if (c->final_norm) {
        int out = clf_build_activation(b, (size_t)B * S * b->d, "encoder_out");
        layernorm(b, "encoder.norm", out, h, B * S);
        h = out;
    }
    return h;
}
/* dec[B*T, d]: embedding, N x (masked self-attention, cross-attention, feed-forward),
 * optional final norm */
int clf_build_decoder(builder *b, const decoder_spec *ds)
{
    const clf_model_config *c = &b->m->cfg;
    const int B = ds->B, S = ds->S, T = ds->T, L = c->decoder_layers;
    const size_t row2 = 2 * (size_t)b->d;
    char p[4][96];
    int h = embedding(b, CLF_WN_TGT_EMBED, CLF_WN_TGT_POS, ds->ids, B, T, ds->pos0, ds->row_pos,
                      c->tgt_vocab, ds->has_pos_dev ? ds->pos_dev : -1, ds->pos_max);
    const int cross_slots = ds->cross_slots > 0 ? ds->cross_slots : ds->slots;
    const int cross_len = ds->cross_len > 0 ? ds->cross_len : S;
    for (int i = 0; i < L; i++) {
        snprintf(p[0], sizeof p[0], "decoder.layers.%d.self_attention_block", i);
        snprintf(p[1], sizeof p[1], "decoder.layers.%d.cross_attention_block", i);
        snprintf(p[2], sizeof p[2], "decoder.layers.%d.feed_forward_block", i);
        sublayer self = {.prefix = p[0],
                         .site = {.B = B,
                                  .Tq = T,
                                  .Tk = T,
                                  .kv_src = -1,
                                  .mask = ds->tgt_mask,
                                  .causal = 1,
                                  .probs = -1}};
        sublayer cross = {
            .prefix = p[1],
            .site = {
                .B = B, .Tq = T, .Tk = S, .kv_src = ds->enc, .mask = ds->src_mask, .probs = -1}};
        if (ds->has_cache) {
            /* the step at position pos0 attends to positions 0..pos0 (no pads there) */
            self.site = (attention_site){.B = B,
                                         .Tq = 1,
                                         .Tk = ds->row_pos ? ds->self_kv_len : ds->pos0 + 1,
                                         .kv_src = -1,
                                         .mask = ds->row_pos ? ds->self_mask : -1,
                                         .has_cache = 1,
                                         .cache = ds->self_cache,
                                         .cache_off = (size_t)i * ds->slots * ds->self_len * row2,
                                         .cache_len = ds->self_len,
                                         .write_pos = ds->row_pos ? ds->write_row : ds->pos0,
                                         .kv_rows = ds->self_rows,
                                         .kv_rows_ld = ds->self_rows_ld,
                                         .slots = ds->slots,
                                         .probs = -1,
                                         .has_pos_dev = ds->has_pos_dev,
                                         .pos_dev = ds->pos_dev,
                                         .pos_max = ds->pos_max};
            cross.site = (attention_site){.B = B,
                                          .Tq = 1,
                                          .Tk = S,
                                          .kv_src = -1,
                                          .mask = ds->src_mask,
                                          .has_cache = 1,
                                          .cache = ds->cross_cache,
                                          .cache_off = (size_t)i * cross_slots * cross_len * row2,
                                          .cache_len = cross_len,
                                          .write_pos = -1,
                                          .kv_rows = ds->cross_rows,
                                          .kv_rows_ld = ds->cross_rows_ld,
                                          .slots = cross_slots,
                                          .probs = -1};
        }
        if (i == L - 1)
            cross.site.probs = ds->probs;
        sublayer ffn = {.prefix = p[2], .is_ffn = 1};
        const sublayer *order[3] = {&self, &cross, &ffn};
        for (int r = 0; r < 3; r++) {
            snprintf(p[3], sizeof p[3], "decoder.layers.%d.residual_connections.%d.norm", i, r);
            h = residual(b, p[3], h, B * T, order[r]);
        }
    }
    if (c->final_norm) {
        int out = clf_build_activation(b, (size_t)B * T * b->d, "decoder_out");
        layernorm(b, "decoder.norm", out, h, B * T);
        h = out;
    }
    return h;
}

/* Starts a graph: the weight-value map and the PE table. */
clf_status clf_builder_begin(clf_model *m, clf_graph *g, builder *b)
{
    const clf_model_config *c = &m->cfg;
    clf_graph_init(g);
    *b = (builder){.m = m, .g = g, .d = c->d_model, .dk = c->d_model / c->heads};
    b->wval = malloc(sizeof(int) * (size_t)m->n_weights);
    if (!b->wval)
        return clf_error(CLF_ERR_NOMEM, "model: out of host memory");
    for (int i = 0; i < m->n_weights; i++)
        b->wval[i] = -1;
    b->pe = m->pe ? clf_graph_external(g, (clf_ptr){m->pe, 0},
                                       ((size_t)c->max_len + (size_t)c->position_offset) * b->d *
                                           sizeof(float),
                                       "pe")
                  : -1;
    return CLF_OK;
}

/* Whether layernorm node ln can be taken by gemm node gm (fuse_layernorms): ln has no
 * residual and no sum_out, and gm multiplies ln's output, from its first element with rows
 * cols apart, by a weight, room left for three operands. */
static int takes_layernorm(const clf_node *ln, const clf_node *gm)
{
    if (ln->op != CLF_OP_LAYERNORM || gm->op != CLF_OP_GEMM ||
        gm->n_operands + 3 > CLF_NODE_MAX_OPERANDS)
        return 0;
    const clf_layernorm_args *l = &ln->args.layernorm;
    const clf_gemm_args *g = &gm->args.gemm;
    const clf_operand *out = clf_node_operand(ln, offsetof(clf_layernorm_args, out)),
                      *a = clf_node_operand(gm, offsetof(clf_gemm_args, a));
    return out && a && a->value == out->value && a->elem_off == out->elem_off &&
           !clf_node_operand(ln, offsetof(clf_layernorm_args, residual)) &&
           !clf_node_operand(ln, offsetof(clf_layernorm_args, sum_out)) && !g->trans_a &&
           g->m == l->rows && g->k == l->cols && g->lda == l->cols &&
           !clf_node_operand(gm, offsetof(clf_gemm_args, ln_out));
}

/* Inference on a backend whose gemm layer-normalizes A (CLF_OP_GEMM_LAYERNORM): each
 * layernorm node that the next node, a gemm, multiplies (takes_layernorm) becomes part of
 * that gemm, which reads the layernorm's input as A and writes the normalized rows to its
 * output as ln_out (where later nodes still find them: a post-norm stream, a gated second
 * product). A pre-norm decoding step then makes 3 calls a layer fewer. */
static void fuse_layernorms(builder *b)
{
    clf_graph *g = b->g;
    int w = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        clf_node *n = &g->nodes[i];
        if (i + 1 < g->n_nodes && takes_layernorm(n, &g->nodes[i + 1])) {
            clf_node *gm = &g->nodes[i + 1];
            const clf_operand *x = clf_node_operand(n, offsetof(clf_layernorm_args, x));
            for (int k = 0; k < gm->n_operands; k++)
                if (gm->operands[k].field == offsetof(clf_gemm_args, a)) {
                    gm->operands[k].value = x->value;
                    gm->operands[k].elem_off = x->elem_off;
                }
            static const size_t from[3] = {offsetof(clf_layernorm_args, out),
                                           offsetof(clf_layernorm_args, alpha),
                                           offsetof(clf_layernorm_args, beta)},
                                to[3] = {offsetof(clf_gemm_args, ln_out),
                                         offsetof(clf_gemm_args, ln_alpha),
                                         offsetof(clf_gemm_args, ln_beta)};
            for (int k = 0; k < 3; k++) {
                const clf_operand *o = clf_node_operand(n, from[k]);
                gm->operands[gm->n_operands++] =
                    (clf_operand){.value = o->value, .elem_off = o->elem_off, .field = to[k]};
            }
            gm->args.gemm.ln_style = n->args.layernorm.style;
            gm->args.gemm.ln_eps = n->args.layernorm.eps;
            continue; /* the layernorm node is dropped */
        }
        if (w != i)
            g->nodes[w] = *n;
        w++;
    }
    g->n_nodes = w;
}

/* Plans the graph built with b; frees it on error. */
clf_status clf_builder_end(builder *b)
{
    free(b->wval);
    b->wval = NULL;
    if (!b->training && b->g->status == CLF_OK &&
        b->m->api->supports(b->m->be, CLF_OP_GEMM_LAYERNORM))
        fuse_layernorms(b);
    clf_status st = clf_graph_plan(b->g);
    if (st != CLF_OK)
        clf_graph_free(b->g);
    return st;
}

/* out[rows, V] = dec · Wp^T + bp, then log_softmax over V if asked; dec's rows start at
 * element dec_off, dec_ld apart */
void clf_build_projection(builder *b, int out, int dec, size_t dec_off, int dec_ld, int rows,
                          int log_softmax)
{
    const int d = b->d, V = b->m->cfg.tgt_vocab;
    int wp = clf_build_required(b, weight_span(b, CLF_WN_PROJ_WEIGHT, 1), "projection", "");
    int bp = weight_span(b, CLF_WN_PROJ_BIAS, 1);
    clf_build_linear(b, "projection_layer.proj", out, 0, V, dec, dec_off, dec_ld, wp, bp, rows, V,
                     d, 0, 0);
    if (log_softmax) {
        clf_softmax_args a = {.rows = rows, .cols = V, .log = 1};
        clf_node *n = clf_graph_node(b->g, CLF_OP_SOFTMAX, &a, sizeof a, "log_softmax");
        clf_graph_bind(b->g, n, offsetof(clf_softmax_args, out), out, 0);
        clf_graph_bind(b->g, n, offsetof(clf_softmax_args, x), out, 0);
    }
}
