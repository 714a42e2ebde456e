/* Reverse-mode differentiation over the graph's op list (ggml's build_backward idea,
 * specialised to the ops the Transformer uses).
 *
 * Walking the forward nodes from last to first, each node turns the gradient of its
 * output into gradients of its inputs. Every forward value v gets at most one gradient
 * value gv[v]; the first contribution writes it and later ones accumulate (GEMM beta = 1,
 * layernorm_backward's accumulate flag, or an add), so a value read by several nodes (the
 * residual stream, the encoder output read by every cross-attention) sums its gradients.
 * Gradients that pass through unchanged (an add, a copy, dropout applied in place) alias
 * the upstream gradient instead of copying it. Parameters are external values; their
 * gradients are external too (the trainer's gradient buffers) and always accumulate.
 *
 * Shapes in the comments: a Linear is C[M,N] = A[M,K] · W[N,K]^T + bias[N]. */
#include "graph/autodiff.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ad {
    clf_graph *g;
    const clf_backward_spec *spec;
    int nv;    /* forward values: gv and has cover [0, nv) */
    int *gv;   /* gradient value of each forward value, -1: none (yet) */
    char *has; /* gv holds a contribution: the next one accumulates */
} ad;

static clf_status fail_node(const clf_node *n, const char *why)
{
    return clf_error(CLF_ERR_INTERNAL, "autodiff: node '%s' (%s): %s", n->label,
                     n->op == CLF_NODE_COPY ? "copy" : clf_op_name(n->op), why);
}

/* 1 when the gradient of value v is wanted: activations always, externals when they are
 * parameters (grad_of gives a buffer); inputs (ids, masks) never. */
static int wants_grad(ad *s, int v)
{
    const clf_value *val = &s->g->values[v];
    if (val->kind == CLF_VALUE_INPUT)
        return 0;
    if (val->kind == CLF_VALUE_EXTERNAL)
        return s->spec->grad_of(s->spec->user, val->ext).buf != NULL;
    return 1;
}

/* The gradient value of v, created on first use (a parameter's maps to its gradient
 * buffer, which accumulates from the start). -1 after an error in g->status. */
static int grad_value(ad *s, int v)
{
    if (s->gv[v] >= 0)
        return s->gv[v];
    const clf_value *val = &s->g->values[v];
    char label[64];
    snprintf(label, sizeof label, "grad.%.58s", val->label);
    if (val->kind == CLF_VALUE_EXTERNAL) {
        clf_ptr p = s->spec->grad_of(s->spec->user, val->ext);
        size_t bytes = val->bytes;
        s->gv[v] = clf_graph_external(s->g, p, bytes, label);
        s->has[v] = 1;
    } else {
        s->gv[v] = clf_graph_value(s->g, CLF_VALUE_ACTIVATION, val->bytes, label);
    }
    return s->gv[v];
}

static int whole(const ad *s, const clf_operand *o, size_t n);

static clf_node *node(ad *s, clf_op op, const void *args, size_t size, const char *label)
{
    return clf_graph_node(s->g, op, args, size, label);
}

static void bind(ad *s, clf_node *n, size_t field, int v, size_t off)
{
    clf_graph_bind(s->g, n, field, v, off);
}

/* gv[v] += g (n floats from offset 0 of both): an add, or, when v has no gradient yet,
 * gv[v] becomes g itself when may_alias (nobody else takes g over), else a copy of g. */
static void contribute_whole(ad *s, int v, int g, size_t n, const char *label, int may_alias)
{
    if (!wants_grad(s, v))
        return;
    if (may_alias && s->gv[v] < 0 && s->g->values[v].kind != CLF_VALUE_EXTERNAL) {
        s->gv[v] = g;
        s->has[v] = 1;
        return;
    }
    int t = grad_value(s, v);
    if (!s->has[v]) { /* created but not written yet: a copy, not an add */
        clf_add_args c = {.n = n * sizeof(float)};
        clf_node *nd = node(s, CLF_NODE_COPY, &c, sizeof c, label);
        bind(s, nd, offsetof(clf_add_args, out), t, 0);
        bind(s, nd, offsetof(clf_add_args, a), g, 0);
        s->has[v] = 1;
        return;
    }
    clf_add_args a = {.n = n};
    clf_node *nd = node(s, CLF_OP_ADD, &a, sizeof a, label);
    bind(s, nd, offsetof(clf_add_args, out), t, 0);
    bind(s, nd, offsetof(clf_add_args, a), t, 0);
    bind(s, nd, offsetof(clf_add_args, b), g, 0);
}

/* C = relu?(A · W^T + bias): dC in place through the relu, then
 *   dA[M,K] (= or +=) dC[M,N] · W[N,K]
 *   dW[N,K] += dC^T · A
 *   dbias[N] += 1[1,M] · dC
 * A forward product in BF16 arithmetic (bf16_arith, the precision setting) has its two
 * backward products in it too, dA reading W's BF16 copy (b_bf16) as the forward did. */
static clf_status backward_gemm(ad *s, const clf_node *n)
{
    const clf_gemm_args *f = &n->args.gemm;
    const clf_operand *oc = clf_node_operand(n, offsetof(clf_gemm_args, c));
    const clf_operand *oa = clf_node_operand(n, offsetof(clf_gemm_args, a));
    const clf_operand *ow = clf_node_operand(n, offsetof(clf_gemm_args, b));
    const clf_operand *ob = clf_node_operand(n, offsetof(clf_gemm_args, bias));
    const clf_operand *ow16 = clf_node_operand(n, offsetof(clf_gemm_args, b_bf16));
    if (f->trans_a || !f->trans_b || f->beta != 0.0f || f->alpha != 1.0f)
        return fail_node(n, "only the Linear form (A · W^T, alpha 1, beta 0) is differentiable");
    if (!oc || !oa || !ow)
        return fail_node(n, "missing operand");
    int dc = s->gv[oc->value];
    if (dc < 0)
        return CLF_OK; /* the output does not reach the loss */
    const int M = f->m, N = f->n, K = f->k;
    if (f->relu) {
        if (f->ldc != N)
            return fail_node(n, "relu on a strided output");
        clf_add_args r = {.n = (size_t)M * N};
        clf_node *nd = node(s, CLF_OP_RELU_BACKWARD, &r, sizeof r, n->label);
        bind(s, nd, offsetof(clf_add_args, out), dc, oc->elem_off);
        bind(s, nd, offsetof(clf_add_args, a), dc, oc->elem_off);
        bind(s, nd, offsetof(clf_add_args, b), oc->value, oc->elem_off);
    }
    if (wants_grad(s, oa->value)) {
        int acc = s->has[oa->value];
        int da = grad_value(s, oa->value);
        clf_gemm_args a = {.m = M,
                           .n = K,
                           .k = N,
                           .alpha = 1.0f,
                           .beta = acc ? 1.0f : 0.0f,
                           .lda = f->ldc,
                           .ldb = f->ldb,
                           .ldc = f->lda,
                           .bf16_arith = f->bf16_arith};
        clf_node *nd = node(s, CLF_OP_GEMM, &a, sizeof a, n->label);
        bind(s, nd, offsetof(clf_gemm_args, a), dc, oc->elem_off);
        bind(s, nd, offsetof(clf_gemm_args, b), ow->value, ow->elem_off);
        if (f->bf16_arith && ow16)
            bind(s, nd, offsetof(clf_gemm_args, b_bf16), ow16->value, ow16->elem_off);
        bind(s, nd, offsetof(clf_gemm_args, c), da, oa->elem_off);
        s->has[oa->value] = 1;
    }
    if (wants_grad(s, ow->value)) {
        int dw = grad_value(s, ow->value);
        clf_gemm_args a = {.trans_a = 1,
                           .m = N,
                           .n = K,
                           .k = M,
                           .alpha = 1.0f,
                           .beta = 1.0f,
                           .lda = f->ldc,
                           .ldb = f->lda,
                           .ldc = f->ldb,
                           .bf16_arith = f->bf16_arith};
        clf_node *nd = node(s, CLF_OP_GEMM, &a, sizeof a, n->label);
        bind(s, nd, offsetof(clf_gemm_args, a), dc, oc->elem_off);
        bind(s, nd, offsetof(clf_gemm_args, b), oa->value, oa->elem_off);
        bind(s, nd, offsetof(clf_gemm_args, c), dw, ow->elem_off);
    }
    if (ob && wants_grad(s, ob->value)) {
        if (s->spec->ones < 0 || s->g->values[s->spec->ones].bytes < (size_t)M * sizeof(float))
            return fail_node(n, "the ones vector is shorter than the GEMM's rows");
        int db = grad_value(s, ob->value);
        clf_gemm_args a = {
            .m = 1, .n = N, .k = M, .alpha = 1.0f, .beta = 1.0f, .lda = M, .ldb = f->ldc, .ldc = N};
        clf_node *nd = node(s, CLF_OP_GEMM, &a, sizeof a, n->label);
        bind(s, nd, offsetof(clf_gemm_args, a), s->spec->ones, 0);
        bind(s, nd, offsetof(clf_gemm_args, b), dc, oc->elem_off);
        bind(s, nd, offsetof(clf_gemm_args, c), db, ob->elem_off);
    }
    return CLF_OK;
}

/* out = LN(x): dx (= or +=), dalpha +=, dbeta += */
static clf_status backward_layernorm(ad *s, const clf_node *n)
{
    const clf_layernorm_args *f = &n->args.layernorm;
    const clf_operand *oo = clf_node_operand(n, offsetof(clf_layernorm_args, out));
    const clf_operand *ox = clf_node_operand(n, offsetof(clf_layernorm_args, x));
    const clf_operand *oal = clf_node_operand(n, offsetof(clf_layernorm_args, alpha));
    const clf_operand *obe = clf_node_operand(n, offsetof(clf_layernorm_args, beta));
    if (clf_node_operand(n, offsetof(clf_layernorm_args, residual)) ||
        clf_node_operand(n, offsetof(clf_layernorm_args, sum_out)))
        return fail_node(n, "a fused residual is not differentiable (the input is overwritten)");
    if (!oo || !ox || !oal || !obe)
        return fail_node(n, "missing operand");
    int dy = s->gv[oo->value];
    if (dy < 0)
        return CLF_OK;
    clf_layernorm_backward_args a = {
        .rows = f->rows, .cols = f->cols, .style = f->style, .eps = f->eps};
    int dx = -1;
    if (wants_grad(s, ox->value)) {
        a.accumulate = s->has[ox->value];
        dx = grad_value(s, ox->value);
    }
    if (dx < 0)
        return fail_node(n, "layernorm of a value without gradient");
    clf_node *nd = node(s, CLF_OP_LAYERNORM_BACKWARD, &a, sizeof a, n->label);
    bind(s, nd, offsetof(clf_layernorm_backward_args, dx), dx, ox->elem_off);
    bind(s, nd, offsetof(clf_layernorm_backward_args, dy), dy, oo->elem_off);
    bind(s, nd, offsetof(clf_layernorm_backward_args, x), ox->value, ox->elem_off);
    bind(s, nd, offsetof(clf_layernorm_backward_args, alpha), oal->value, oal->elem_off);
    if (wants_grad(s, oal->value))
        bind(s, nd, offsetof(clf_layernorm_backward_args, dalpha), grad_value(s, oal->value),
             oal->elem_off);
    if (wants_grad(s, obe->value))
        bind(s, nd, offsetof(clf_layernorm_backward_args, dbeta), grad_value(s, obe->value),
             obe->elem_off);
    s->has[ox->value] = 1;
    return CLF_OK;
}

/* Where an op that overwrites its output puts v's gradient: straight into gv[v] while
 * nothing has been written there, else into a new temporary (*tmp = 1) that
 * finish_overwrite() adds in. -1 when v needs no gradient. */
static int overwrite_target(ad *s, int v, int *tmp)
{
    *tmp = 0;
    if (!wants_grad(s, v))
        return -1;
    if (!s->has[v] && s->g->values[v].kind != CLF_VALUE_EXTERNAL)
        return grad_value(s, v);
    *tmp = 1;
    return clf_graph_value(s->g, CLF_VALUE_ACTIVATION, s->g->values[v].bytes, "grad_part");
}

static void finish_overwrite(ad *s, int v, int target, int tmp, size_t n, const char *label)
{
    if (target < 0)
        return;
    if (tmp)
        contribute_whole(s, v, target, n, label, 0);
    else
        s->has[v] = 1;
}

/* u[n] = f(x[n]) (* gate[n]), f from a plugin:
 *   dx = du * gate * f'(x);  dgate = du * f(x)     (activation_backward overwrites both) */
static clf_status backward_activation(ad *s, const clf_node *n)
{
    const clf_activation_args *f = &n->args.activation;
    const size_t cnt = f->n;
    const clf_operand *oo = clf_node_operand(n, offsetof(clf_activation_args, out));
    const clf_operand *ox = clf_node_operand(n, offsetof(clf_activation_args, x));
    const clf_operand *og = clf_node_operand(n, offsetof(clf_activation_args, gate));
    if (!whole(s, oo, cnt) || !whole(s, ox, cnt) || (og && !whole(s, og, cnt)) ||
        oo->value == ox->value)
        return fail_node(n, "an activation must write a whole new value");
    int du = s->gv[oo->value];
    if (du < 0)
        return CLF_OK;
    int tx, tg = 0;
    int dx = overwrite_target(s, ox->value, &tx);
    int dg = og ? overwrite_target(s, og->value, &tg) : -1;
    if (dx < 0 || (og && dg < 0))
        return fail_node(n, "an activation of a value without gradient");
    clf_activation_backward_args a = {.op = f->op, .n = cnt};
    clf_node *nd = node(s, CLF_OP_ACTIVATION_BACKWARD, &a, sizeof a, n->label);
    bind(s, nd, offsetof(clf_activation_backward_args, dx), dx, 0);
    bind(s, nd, offsetof(clf_activation_backward_args, dy), du, 0);
    bind(s, nd, offsetof(clf_activation_backward_args, x), ox->value, 0);
    if (og) {
        bind(s, nd, offsetof(clf_activation_backward_args, dgate), dg, 0);
        bind(s, nd, offsetof(clf_activation_backward_args, gate), og->value, 0);
    }
    finish_overwrite(s, ox->value, dx, tx, cnt, n->label);
    if (og)
        finish_overwrite(s, og->value, dg, tg, cnt, n->label);
    return CLF_OK;
}

/* out = alpha * n(x) + beta, n from a plugin: dx (= or +=), dalpha +=, dbeta += */
static clf_status backward_norm(ad *s, const clf_node *n)
{
    const clf_norm_args *f = &n->args.norm;
    const clf_operand *oo = clf_node_operand(n, offsetof(clf_norm_args, out));
    const clf_operand *ox = clf_node_operand(n, offsetof(clf_norm_args, x));
    const clf_operand *oal = clf_node_operand(n, offsetof(clf_norm_args, alpha));
    const clf_operand *obe = clf_node_operand(n, offsetof(clf_norm_args, beta));
    if (!oo || !ox || !oal)
        return fail_node(n, "missing operand");
    int dy = s->gv[oo->value];
    if (dy < 0)
        return CLF_OK;
    if (!wants_grad(s, ox->value))
        return fail_node(n, "a norm of a value without gradient");
    clf_norm_backward_args a = {.op = f->op,
                                .rows = f->rows,
                                .cols = f->cols,
                                .eps = f->eps,
                                .accumulate = s->has[ox->value]};
    int dx = grad_value(s, ox->value);
    clf_node *nd = node(s, CLF_OP_NORM_BACKWARD, &a, sizeof a, n->label);
    bind(s, nd, offsetof(clf_norm_backward_args, dx), dx, ox->elem_off);
    bind(s, nd, offsetof(clf_norm_backward_args, dy), dy, oo->elem_off);
    bind(s, nd, offsetof(clf_norm_backward_args, x), ox->value, ox->elem_off);
    bind(s, nd, offsetof(clf_norm_backward_args, alpha), oal->value, oal->elem_off);
    if (wants_grad(s, oal->value))
        bind(s, nd, offsetof(clf_norm_backward_args, dalpha), grad_value(s, oal->value),
             oal->elem_off);
    if (obe && wants_grad(s, obe->value))
        bind(s, nd, offsetof(clf_norm_backward_args, dbeta), grad_value(s, obe->value),
             obe->elem_off);
    s->has[ox->value] = 1;
    return CLF_OK;
}

/* ctx = attention(q, k, v): dq, dk, dv written into the gradients of the values holding
 * q and k|v. attention_backward overwrites, so a value that already has a gradient gets
 * the result through a temporary and an add. The layouts the builder makes are fully
 * covered by the three slices: [q|k|v] (ld 3d) or q (ld d) and [k|v] (ld 2d). */
static clf_status backward_attention(ad *s, const clf_node *n)
{
    const clf_attention_args *f = &n->args.attention;
    const clf_operand *oq = clf_node_operand(n, offsetof(clf_attention_args, q));
    const clf_operand *ok = clf_node_operand(n, offsetof(clf_attention_args, k));
    const clf_operand *ov = clf_node_operand(n, offsetof(clf_attention_args, v));
    const clf_operand *oo = clf_node_operand(n, offsetof(clf_attention_args, out));
    const clf_operand *om = clf_node_operand(n, offsetof(clf_attention_args, key_mask));
    if (!oq || !ok || !ov || !oo)
        return fail_node(n, "missing operand");
    int dout = s->gv[oo->value];
    if (dout < 0)
        return CLF_OK;
    const int hd = f->heads * f->head_dim;
    const size_t q_rows = (size_t)f->batch * f->q_len, kv_rows = (size_t)f->batch * f->kv_len;
    int fused = oq->value == ok->value;
    int covered = ok->value == ov->value &&
                  (fused ? f->q_ld == 3 * hd && oq->elem_off == 0 && ok->elem_off == (size_t)hd &&
                               ov->elem_off == 2 * (size_t)hd &&
                               s->g->values[oq->value].bytes == q_rows * 3 * hd * sizeof(float)
                         : f->q_ld == hd && f->k_ld == 2 * hd && oq->elem_off == 0 &&
                               ok->elem_off == 0 && ov->elem_off == (size_t)hd &&
                               s->g->values[oq->value].bytes == q_rows * hd * sizeof(float) &&
                               s->g->values[ok->value].bytes == kv_rows * 2 * hd * sizeof(float));
    if (!covered)
        return fail_node(n, "q/k/v layout not differentiable (expected [q|k|v] or q and [k|v])");
    clf_attention_backward_args a = {.fwd = *f};
    a.fwd.probs = (clf_ptr){0};
    /* targets: the gradient values (fresh) or temporaries added afterwards */
    int tq = -1, tkv = -1, dq, dkv;
    if (s->has[oq->value])
        tq = clf_graph_value(s->g, CLF_VALUE_ACTIVATION, s->g->values[oq->value].bytes, "grad.tmp");
    dq = tq >= 0 ? tq : grad_value(s, oq->value);
    if (fused) {
        dkv = dq;
    } else {
        if (s->has[ok->value])
            tkv = clf_graph_value(s->g, CLF_VALUE_ACTIVATION, s->g->values[ok->value].bytes,
                                  "grad.tmp");
        dkv = tkv >= 0 ? tkv : grad_value(s, ok->value);
    }
    clf_node *nd = node(s, CLF_OP_ATTENTION_BACKWARD, &a, sizeof a, n->label);
    if (nd)
        nd->tag = n->tag; /* an attention-dropout site: the same seed, so the same mask */
    const size_t fwd = offsetof(clf_attention_backward_args, fwd);
    bind(s, nd, fwd + offsetof(clf_attention_args, q), oq->value, oq->elem_off);
    bind(s, nd, fwd + offsetof(clf_attention_args, k), ok->value, ok->elem_off);
    bind(s, nd, fwd + offsetof(clf_attention_args, v), ov->value, ov->elem_off);
    if (om)
        bind(s, nd, fwd + offsetof(clf_attention_args, key_mask), om->value, om->elem_off);
    bind(s, nd, offsetof(clf_attention_backward_args, dout), dout, oo->elem_off);
    bind(s, nd, offsetof(clf_attention_backward_args, dq), dq, oq->elem_off);
    bind(s, nd, offsetof(clf_attention_backward_args, dk), dkv, ok->elem_off);
    bind(s, nd, offsetof(clf_attention_backward_args, dv), dkv, ov->elem_off);
    if (tq >= 0)
        contribute_whole(s, oq->value, tq, s->g->values[oq->value].bytes / 4, n->label, 1);
    s->has[oq->value] = 1;
    if (!fused) {
        if (tkv >= 0)
            contribute_whole(s, ok->value, tkv, s->g->values[ok->value].bytes / 4, n->label, 1);
        s->has[ok->value] = 1;
    }
    return CLF_OK;
}

/* out[r] = table[ids[r]] * scale + pe[pos0 + r % L], r < rows = B*L:
 *   dtable[ids[r]] += scale * dout[r]
 *   dpe[pos0 + p] += sum_b dout[b*L + p]   (a learned position table: a parameter)
 * The second is dpe[1, L*d] += 1[1,B] · dout[B, L*d], the GEMM that bias gradients use, so
 * the learned table needs no op (nor positions input) of its own. */
static clf_status backward_embed(ad *s, const clf_node *n)
{
    const clf_embed_args *f = &n->args.embed;
    const clf_operand *oo = clf_node_operand(n, offsetof(clf_embed_args, out));
    const clf_operand *oi = clf_node_operand(n, offsetof(clf_embed_args, ids));
    const clf_operand *ot = clf_node_operand(n, offsetof(clf_embed_args, table));
    const clf_operand *op = clf_node_operand(n, offsetof(clf_embed_args, pe));
    if (!oo || !oi || !ot)
        return fail_node(n, "missing operand");
    int dout = s->gv[oo->value];
    if (dout < 0)
        return CLF_OK;
    if (op && wants_grad(s, op->value)) {
        const int L = f->seq_len, nb = L > 0 ? f->rows / L : 0;
        if (L <= 0 || nb * L != f->rows)
            return fail_node(n, "rows are not whole sequences of seq_len");
        if (s->spec->ones < 0 || s->g->values[s->spec->ones].bytes < (size_t)nb * sizeof(float))
            return fail_node(n, "the ones vector is shorter than the batch");
        const int row = L * f->dim;
        clf_gemm_args a = {.m = 1,
                           .n = row,
                           .k = nb,
                           .alpha = 1.0f,
                           .beta = 1.0f,
                           .lda = nb,
                           .ldb = row,
                           .ldc = row};
        clf_node *nd = node(s, CLF_OP_GEMM, &a, sizeof a, n->label);
        bind(s, nd, offsetof(clf_gemm_args, a), s->spec->ones, 0);
        bind(s, nd, offsetof(clf_gemm_args, b), dout, oo->elem_off);
        bind(s, nd, offsetof(clf_gemm_args, c), grad_value(s, op->value),
             op->elem_off + (size_t)f->pos0 * f->dim);
    }
    if (!wants_grad(s, ot->value))
        return CLF_OK;
    clf_embed_backward_args a = {
        .rows = f->rows, .dim = f->dim, .vocab = f->vocab, .scale = f->scale};
    clf_node *nd = node(s, CLF_OP_EMBED_BACKWARD, &a, sizeof a, n->label);
    bind(s, nd, offsetof(clf_embed_backward_args, dtable), grad_value(s, ot->value), ot->elem_off);
    bind(s, nd, offsetof(clf_embed_backward_args, dout), dout, oo->elem_off);
    bind(s, nd, offsetof(clf_embed_backward_args, ids), oi->value, oi->elem_off);
    return CLF_OK;
}

/* Checks that an elementwise node's operand is a whole value of n floats. */
static int whole(const ad *s, const clf_operand *o, size_t n)
{
    return o && o->elem_off == 0 && s->g->values[o->value].bytes == n * sizeof(float);
}

/* out = a + b: both inputs receive dout (b first, so a may take dout over by aliasing) */
static clf_status backward_add(ad *s, const clf_node *n)
{
    const size_t cnt = n->args.add.n;
    const clf_operand *oo = clf_node_operand(n, offsetof(clf_add_args, out));
    const clf_operand *oa = clf_node_operand(n, offsetof(clf_add_args, a));
    const clf_operand *ob = clf_node_operand(n, offsetof(clf_add_args, b));
    if (!whole(s, oo, cnt) || !whole(s, oa, cnt) || !whole(s, ob, cnt))
        return fail_node(n, "add over part of a value");
    if (oo->value == oa->value || oo->value == ob->value)
        return fail_node(n, "in-place add");
    int dout = s->gv[oo->value];
    if (dout < 0)
        return CLF_OK;
    /* a may take dout over, so b gets a copy unless a needs no gradient (or is b) */
    contribute_whole(s, ob->value, dout, cnt, n->label,
                     !wants_grad(s, oa->value) || oa->value == ob->value);
    contribute_whole(s, oa->value, dout, cnt, n->label, 1);
    return CLF_OK;
}

/* out = dropout(x): the same mask applied to dout in place, which then flows to x */
static clf_status backward_dropout(ad *s, const clf_node *n)
{
    const size_t cnt = n->args.dropout.n;
    const clf_operand *oo = clf_node_operand(n, offsetof(clf_dropout_args, out));
    const clf_operand *ox = clf_node_operand(n, offsetof(clf_dropout_args, x));
    if (!whole(s, oo, cnt) || !whole(s, ox, cnt) || oo->value == ox->value)
        return fail_node(n, "dropout must write a whole new value");
    int dout = s->gv[oo->value];
    if (dout < 0)
        return CLF_OK;
    clf_dropout_args a = n->args.dropout;
    clf_node *nd = node(s, CLF_OP_DROPOUT, &a, sizeof a, n->label);
    if (nd)
        nd->tag = n->tag; /* the site number: the trainer gives both nodes the same seed */
    bind(s, nd, offsetof(clf_dropout_args, out), dout, 0);
    bind(s, nd, offsetof(clf_dropout_args, x), dout, 0);
    contribute_whole(s, ox->value, dout, cnt, n->label, 1);
    return CLF_OK;
}

/* out = copy(x) */
static clf_status backward_copy(ad *s, const clf_node *n)
{
    const size_t bytes = n->args.add.n;
    const clf_operand *oo = clf_node_operand(n, offsetof(clf_add_args, out));
    const clf_operand *ox = clf_node_operand(n, offsetof(clf_add_args, a));
    if (bytes % 4 || !whole(s, oo, bytes / 4) || !whole(s, ox, bytes / 4))
        return fail_node(n, "copy of part of a value");
    int dout = s->gv[oo->value];
    if (dout >= 0)
        contribute_whole(s, ox->value, dout, bytes / 4, n->label, 1);
    return CLF_OK;
}

/* Each activation is written by one node: the precondition for walking gradients back. */
static clf_status check_single_assignment(const clf_graph *g, int n_forward, int nv)
{
    static const struct {
        clf_op op;
        size_t field;
    } writes[] = {
        {CLF_OP_GEMM, offsetof(clf_gemm_args, c)},
        {CLF_OP_LAYERNORM, offsetof(clf_layernorm_args, out)},
        {CLF_OP_ATTENTION, offsetof(clf_attention_args, out)},
        {CLF_OP_EMBED, offsetof(clf_embed_args, out)},
        {CLF_OP_ADD, offsetof(clf_add_args, out)},
        {CLF_NODE_COPY, offsetof(clf_add_args, out)},
        {CLF_OP_DROPOUT, offsetof(clf_dropout_args, out)},
        {CLF_OP_ACTIVATION, offsetof(clf_activation_args, out)},
        {CLF_OP_NORM, offsetof(clf_norm_args, out)},
    };
    char *written = calloc((size_t)nv + 1, 1);
    if (!written)
        return clf_error(CLF_ERR_NOMEM, "autodiff: out of host memory");
    clf_status st = CLF_OK;
    for (int i = 0; i < n_forward && st == CLF_OK; i++) {
        const clf_node *n = &g->nodes[i];
        for (size_t w = 0; w < sizeof writes / sizeof writes[0]; w++) {
            if (writes[w].op != n->op)
                continue;
            const clf_operand *o = clf_node_operand(n, writes[w].field);
            if (!o)
                continue;
            if (g->values[o->value].kind == CLF_VALUE_EXTERNAL)
                st = fail_node(n, "writes an external buffer");
            else if (written[o->value]++)
                st = fail_node(n, "writes a value a previous node wrote (not single-assignment)");
        }
    }
    free(written);
    return st;
}

clf_status clf_graph_append_backward(clf_graph *g, const clf_backward_spec *spec)
{
    if (g->status != CLF_OK)
        return g->status;
    ad s = {.g = g, .spec = spec, .nv = g->n_values};
    clf_status st = check_single_assignment(g, spec->n_forward, s.nv);
    if (st != CLF_OK)
        return st;
    s.gv = malloc(sizeof(int) * (size_t)s.nv);
    s.has = calloc((size_t)s.nv, 1);
    if (!s.gv || !s.has) {
        st = clf_error(CLF_ERR_NOMEM, "autodiff: out of host memory");
        goto fail;
    }
    for (int i = 0; i < s.nv; i++)
        s.gv[i] = -1;
    s.gv[spec->seed_value] = spec->seed_grad;
    s.has[spec->seed_value] = 1;
    for (int i = spec->n_forward - 1; i >= 0 && st == CLF_OK; i--) {
        /* a copy: appending nodes may move g->nodes */
        clf_node n = g->nodes[i];
        switch (n.op) {
        case CLF_OP_GEMM:
            st = backward_gemm(&s, &n);
            break;
        case CLF_OP_LAYERNORM:
            st = backward_layernorm(&s, &n);
            break;
        case CLF_OP_ATTENTION:
            st = backward_attention(&s, &n);
            break;
        case CLF_OP_EMBED:
            st = backward_embed(&s, &n);
            break;
        case CLF_OP_ADD:
            st = backward_add(&s, &n);
            break;
        case CLF_OP_DROPOUT:
            st = backward_dropout(&s, &n);
            break;
        case CLF_NODE_COPY:
            st = backward_copy(&s, &n);
            break;
        case CLF_OP_ACTIVATION:
            st = backward_activation(&s, &n);
            break;
        case CLF_OP_NORM:
            st = backward_norm(&s, &n);
            break;
        default:
            st = fail_node(&n, "no backward form");
        }
        if (st == CLF_OK && g->status != CLF_OK)
            st = g->status;
    }
fail:
    free(s.gv);
    free(s.has);
    return st;
}
