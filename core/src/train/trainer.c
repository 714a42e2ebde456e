/* The trainer (see clformer/train.h): its life cycle, the training and evaluation graphs per
 * batch shape, one micro-batch forward and backward, the learning-rate schedule and the
 * optimizer step over the packed weight chunks. Checkpoints are checkpoint.c's, the
 * overlapped gradient reduction grad_buckets.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/rng.h"
#include "train/trainer_internal.h"

/* ---------------------------------------------------------------------------------- */
/* life cycle                                                                          */

/* t->fixed_*: the projection's bias when the model says it is fixed. */
static void find_fixed(clf_trainer *t)
{
    t->fixed_chunk = -1;
    if (!clf_model_config_of(t->m)->fixed_output_bias)
        return;
    for (int i = 0; i < clf_model_weight_count(t->m); i++) {
        const clf_weight_spec *w = clf_model_weight_spec(t->m, i);
        if (strcmp(w->name, "projection_layer.proj.bias") == 0) {
            clf_model_weight_place(t->m, i, &t->fixed_chunk, &t->fixed_off);
            t->fixed_n = (size_t)clf_weight_spec_numel(w);
        }
    }
}

clf_status clf_trainer_create(clf_model *m, const clf_train_config *tc, int dropout,
                              clf_trainer **out)
{
    clf_status st = CLF_OK;
    *out = NULL;
    clf_trainer *t = calloc(1, sizeof *t);
    if (!t)
        return clf_error(CLF_ERR_NOMEM, "train: out of host memory");
    t->m = m;
    t->tc = *tc;
    t->dropout = dropout;
    t->scale = tc->precision == CLF_PRECISION_F16 ? (double)tc->loss_scale_init : 1.0;
    clf_model_backend_of(m, &t->api, &t->be);
    /* the training ops: the range of ABI 2 in clformer/backend.h's clf_op */
    for (int op = CLF_OP_RELU_BACKWARD; op <= CLF_OP_FILL; op++)
        if ((st = clf_backend_require(t->api, t->be, (clf_op)op)) != CLF_OK)
            goto fail;
    if ((st = clf_model_enable_grads(m)) != CLF_OK ||
        (st = clf_model_set_precision(m, tc->precision, t->note, sizeof t->note)) != CLF_OK)
        goto fail;
    t->n_chunks = clf_model_chunk_count(m);
    size_t nc = (size_t)t->n_chunks;
    t->w = calloc(nc, sizeof *t->w);
    t->grad = calloc(nc, sizeof *t->grad);
    t->exp_avg = calloc(nc, sizeof *t->exp_avg);
    t->exp_avg_sq = calloc(nc, sizeof *t->exp_avg_sq);
    t->bytes = calloc(nc, sizeof *t->bytes);
    t->host_norms = calloc(nc, sizeof *t->host_norms);
    if (!t->w || !t->grad || !t->exp_avg || !t->exp_avg_sq || !t->bytes || !t->host_norms) {
        st = clf_error(CLF_ERR_NOMEM, "train: out of host memory");
        goto fail;
    }
    for (int c = 0; c < t->n_chunks; c++) {
        clf_model_chunk(m, c, &t->w[c], &t->grad[c], &t->bytes[c]);
        size_t n = t->bytes[c] / sizeof(float);
        if ((st = t->api->alloc(t->be, t->bytes[c], &t->exp_avg[c])) != CLF_OK ||
            (st = t->api->alloc(t->be, t->bytes[c], &t->exp_avg_sq[c])) != CLF_OK ||
            (st = clf_op_fill(t->api, t->be, (clf_ptr){t->exp_avg[c], 0}, 0.0f, n)) != CLF_OK ||
            (st = clf_op_fill(t->api, t->be, (clf_ptr){t->exp_avg_sq[c], 0}, 0.0f, n)) != CLF_OK) {
            clf_error_context(st, "train: Adam moments (%zu bytes)", t->bytes[c]);
            goto fail;
        }
    }
    if ((st = t->api->alloc(t->be, nc * sizeof(float), &t->norms)) != CLF_OK)
        goto fail;
    find_fixed(t);
    *out = t;
    return CLF_OK;
fail:
    clf_trainer_free(t);
    return st;
}

const char *clf_trainer_note(const clf_trainer *t)
{
    return t->note[0] ? t->note : NULL;
}

void clf_trainer_drop_graph(shaped_graph *sg)
{
    if (sg->valid)
        clf_graph_free(&sg->g);
    sg->valid = 0;
    free(sg->launch);
    sg->launch = NULL;
}

void clf_trainer_free(clf_trainer *t)
{
    if (!t)
        return;
    for (int c = 0; c < t->n_chunks; c++) {
        if (t->exp_avg && t->exp_avg[c])
            t->api->free(t->be, t->exp_avg[c]);
        if (t->exp_avg_sq && t->exp_avg_sq[c])
            t->api->free(t->be, t->exp_avg_sq[c]);
    }
    if (t->ones)
        t->api->free(t->be, t->ones);
    if (t->norms)
        t->api->free(t->be, t->norms);
    if (t->arena)
        t->api->free(t->be, t->arena);
    clf_trainer_drop_graph(&t->train);
    clf_trainer_drop_graph(&t->eval);
    free(t->w);
    free(t->grad);
    free(t->exp_avg);
    free(t->exp_avg_sq);
    free(t->bytes);
    free(t->host_norms);
    free(t->host_loss);
    clf_grad_buckets_free(t);
    free(t);
}

clf_train_state *clf_trainer_state(clf_trainer *t)
{
    return &t->state;
}

/* ---------------------------------------------------------------------------------- */
/* one micro-batch                                                                     */

/* The ones vector must cover the longest GEMM of the shape; growing it moves it, so the
 * cached graphs that point at it are dropped. */
static clf_status ensure_ones(clf_trainer *t, size_t len)
{
    if (len <= t->ones_len)
        return CLF_OK;
    size_t n = t->ones_len ? t->ones_len : 1024;
    while (n < len)
        n *= 2;
    if (t->ones)
        t->api->free(t->be, t->ones);
    t->ones = NULL;
    t->ones_len = 0;
    clf_trainer_drop_graph(&t->train);
    clf_status st = t->api->alloc(t->be, n * sizeof(float), &t->ones);
    if (st == CLF_OK)
        st = clf_op_fill(t->api, t->be, (clf_ptr){t->ones, 0}, 1.0f, n);
    if (st != CLF_OK)
        return clf_error_context(st, "train: ones vector");
    t->ones_len = n;
    return CLF_OK;
}

/* Room for a batch's per-token losses on the host. */
static clf_status ensure_host(clf_trainer *t, size_t n)
{
    if (n <= t->host_cap)
        return CLF_OK;
    float *l = realloc(t->host_loss, n * sizeof *l);
    if (!l)
        return clf_error(CLF_ERR_NOMEM, "train: out of host memory");
    t->host_loss = l;
    t->host_cap = n;
    return CLF_OK;
}

static clf_status prepare_graph(clf_trainer *t, shaped_graph *sg, int backward,
                                const clf_train_batch *b)
{
    clf_status st;
    if (backward &&
        (st = ensure_ones(t, (size_t)b->batch *
                                 (b->src_len > b->tgt_len ? b->src_len : b->tgt_len))) != CLF_OK)
        return st;
    if (sg->valid && sg->B == b->batch && sg->S == b->src_len && sg->T == b->tgt_len)
        return CLF_OK;
    clf_trainer_drop_graph(sg);
    clf_train_graph_spec spec = {.B = b->batch,
                                 .S = b->src_len,
                                 .T = b->tgt_len,
                                 .dropout = backward ? t->dropout : 0,
                                 .label_smoothing = t->tc.label_smoothing,
                                 .backward = backward,
                                 .ones = (clf_ptr){t->ones, 0}};
    if ((st = clf_model_build_train_graph(t->m, &spec, &sg->g, &sg->v)) != CLF_OK)
        return st;
    sg->valid = 1;
    sg->B = b->batch, sg->S = b->src_len, sg->T = b->tgt_len;
    return clf_graph_reserve_arena(&sg->g, t->api, t->be, &t->arena, &t->arena_cap, "train");
}

/* r: the last micro-batch of a data-parallel step (clf_trainer_accumulate_reduce), else NULL */
static clf_status run_batch(clf_trainer *t, int backward, const clf_train_batch *b,
                            const clf_trainer_reducer *r, double *loss_sum, long long *tokens)
{
    clf_status st;
    shaped_graph *sg = backward ? &t->train : &t->eval;
    const int pad = clf_model_config_of(t->m)->pad_id;
    const size_t ns = (size_t)b->batch * b->src_len, nt = (size_t)b->batch * b->tgt_len;
    if ((st = clf_model_check_batch(t->m, backward ? "train" : "evaluate", b->batch, b->src_len,
                                    b->tgt_len, b->src, b->tgt, b->labels)) != CLF_OK ||
        (st = ensure_host(t, nt)) != CLF_OK || (st = prepare_graph(t, sg, backward, b)) != CLF_OK)
        return st;
    long long ntok = 0;
    for (size_t i = 0; i < nt; i++)
        ntok += b->labels[i] != pad;
    /* per-batch scalars: the loss's gradient scale and the dropout seeds */
    clf_node *ce = &sg->g.nodes[sg->v.ce_node];
    ce->args.cross_entropy.grad_scale =
        backward && ntok ? (float)(t->scale / ((double)ntok * t->tc.accumulate)) : 0.0f;
    if (backward) {
        uint64_t base =
            clf_splitmix64(clf_splitmix64((uint64_t)t->tc.seed) + (uint64_t)t->state.micro);
        for (int i = 0; i < sg->g.n_nodes; i++) {
            clf_node *n = &sg->g.nodes[i];
            uint64_t seed = clf_splitmix64(base + (uint64_t)n->tag);
            if (n->op == CLF_OP_DROPOUT)
                n->args.dropout.seed = seed;
            else if (n->op == CLF_OP_ATTENTION && n->args.attention.dropout_p > 0.0f)
                n->args.attention.dropout_seed = seed;
            else if (n->op == CLF_OP_ATTENTION_BACKWARD &&
                     n->args.attention_backward.fwd.dropout_p > 0.0f)
                n->args.attention_backward.fwd.dropout_seed = seed;
        }
    }
#define GRAPH_PTR(v) clf_graph_ptr(&sg->g, t->arena, (v))
    if ((st = clf_model_upload_ids(t->m, GRAPH_PTR(sg->v.src), GRAPH_PTR(sg->v.src_mask), b->src,
                                   ns)) != CLF_OK ||
        /* as the forward pass: a decoder that starts from the pad id sees its first position */
        (st = clf_model_upload_tgt_ids(t->m, GRAPH_PTR(sg->v.tgt), GRAPH_PTR(sg->v.tgt_mask),
                                       b->tgt, nt, b->tgt_len)) != CLF_OK ||
        (st = clf_model_upload_ids(t->m, GRAPH_PTR(sg->v.labels), (clf_ptr){0}, b->labels, nt)) !=
            CLF_OK)
#undef GRAPH_PTR
        return clf_error_context(st, "train: uploading the batch");
    if ((st = r ? clf_grad_buckets_run(t, sg, r)
                : clf_graph_run(&sg->g, t->api, t->be, t->arena)) != CLF_OK)
        return clf_error_context(st, backward ? "train" : "evaluate");
    if ((st = clf_op_download(t->api, t->be, t->host_loss,
                              clf_graph_ptr(&sg->g, t->arena, sg->v.loss), nt * sizeof(float))) !=
        CLF_OK)
        return st;
    double sum = 0.0;
    for (size_t i = 0; i < nt; i++)
        sum += t->host_loss[i];
    if (!isfinite(sum))
        return clf_error(CLF_ERR_INPUT,
                         "train: the loss is not finite at step %lld (learning rate too high?)",
                         t->state.step + 1);
    if (backward)
        t->state.micro++;
    if (loss_sum)
        *loss_sum = sum;
    if (tokens)
        *tokens = ntok;
    return CLF_OK;
}

clf_status clf_trainer_accumulate(clf_trainer *t, const clf_train_batch *b, double *loss_sum,
                                  long long *tokens)
{
    return run_batch(t, 1, b, NULL, loss_sum, tokens);
}

clf_status clf_trainer_accumulate_reduce(clf_trainer *t, const clf_train_batch *b,
                                         const clf_trainer_reducer *r, double *loss_sum,
                                         long long *tokens)
{
    return run_batch(t, 1, b, r, loss_sum, tokens);
}

clf_status clf_trainer_evaluate(clf_trainer *t, const clf_train_batch *b, double *loss_sum,
                                long long *tokens)
{
    return run_batch(t, 0, b, NULL, loss_sum, tokens);
}

/* ---------------------------------------------------------------------------------- */
/* the optimizer step                                                                  */

double clf_train_lr(const clf_train_config *tc, int d_model, long long step)
{
    const double s = step < 1 ? 1.0 : (double)step, w = tc->warmup;
    switch (tc->schedule) {
    case CLF_SCHED_NOAM:
        return tc->lr * pow((double)d_model, -0.5) * fmin(pow(s, -0.5), s * pow(w, -1.5));
    case CLF_SCHED_INVERSE_SQRT:
        return tc->lr * fmin(s / w, sqrt(w / s));
    case CLF_SCHED_CONSTANT:
    default:
        return w > 0 ? tc->lr * fmin(1.0, s / w) : tc->lr;
    }
}

/* One Adam update of chunk c's floats [first, first + n) at Adam's step (lr, the gradients
 * multiplied by grad_scale). */
static clf_status adam_range(clf_trainer *t, int c, size_t first, size_t n, double lr,
                             double grad_scale, long long step)
{
    const clf_train_config *tc = &t->tc;
    const size_t off = first * sizeof(float);
    clf_adam_args a = {.param = {t->w[c], off},
                       .grad = {t->grad[c], off},
                       .m = {t->exp_avg[c], off},
                       .v = {t->exp_avg_sq[c], off},
                       .n = n,
                       .lr = (float)lr,
                       .beta1 = tc->beta1,
                       .beta2 = tc->beta2,
                       .eps = tc->adam_eps,
                       .weight_decay = tc->weight_decay,
                       .grad_scale = (float)grad_scale,
                       .bias_correction1 = (float)(1.0 - pow(tc->beta1, (double)step)),
                       .sqrt_bias_correction2 = (float)sqrt(1.0 - pow(tc->beta2, (double)step)),
                       .decoupled = tc->optimizer == CLF_OPT_ADAMW};
    return n > 0 ? clf_op_adam(t->api, t->be, &a) : CLF_OK;
}

void clf_trainer_loss_scale(const clf_trainer *t, double *scale, long long *skipped)
{
    if (scale)
        *scale = t->scale;
    if (skipped)
        *skipped = t->skipped;
}

/* A step of precision f16 whose gradient is not finite: no update, the gradients zeroed,
 * the scale halved; the step counts (the schedule moves on), Adam's count does not. */
static clf_status skip_step(clf_trainer *t, long long step, double lr, double *lr_out,
                            double *norm_out)
{
    clf_status st = CLF_OK;
    for (int c = 0; c < t->n_chunks && st == CLF_OK; c++)
        st = clf_op_fill(t->api, t->be, (clf_ptr){t->grad[c], 0}, 0.0f, t->bytes[c] / 4);
    if (st != CLF_OK || (st = t->api->synchronize(t->be)) != CLF_OK)
        return clf_error_context(st, "train: optimizer step %lld", step);
    t->scale /= 2;
    t->good = 0;
    t->skipped++;
    t->state.step = step;
    if (lr_out)
        *lr_out = lr;
    if (norm_out)
        *norm_out = INFINITY;
    return CLF_OK;
}

clf_status clf_trainer_step(clf_trainer *t, double *lr_out, double *norm_out)
{
    clf_status st;
    const clf_train_config *tc = &t->tc;
    const long long step = t->state.step + 1;
    const double lr = clf_train_lr(tc, clf_model_config_of(t->m)->d_model, step);
    if (t->fixed_chunk >= 0 &&
        (st = clf_op_fill(t->api, t->be, (clf_ptr){t->grad[t->fixed_chunk], t->fixed_off}, 0.0f,
                          t->fixed_n)) != CLF_OK)
        goto fail;
    for (int c = 0; c < t->n_chunks; c++)
        if ((st = clf_op_sum_squares(t->api, t->be, (clf_ptr){t->norms, (size_t)c * sizeof(float)},
                                     (clf_ptr){t->grad[c], 0}, t->bytes[c] / 4)) != CLF_OK)
            goto fail;
    if ((st = clf_op_download(t->api, t->be, t->host_norms, (clf_ptr){t->norms, 0},
                              (size_t)t->n_chunks * sizeof(float))) != CLF_OK)
        goto fail;
    double sq = 0.0;
    for (int c = 0; c < t->n_chunks; c++)
        sq += t->host_norms[c];
    const int f16 = tc->precision == CLF_PRECISION_F16;
    if (!isfinite(sqrt(sq)) && f16) /* loss scaling: skip the step, halve the scale */
        return skip_step(t, step, lr, lr_out, norm_out);
    const double norm = sqrt(sq) / t->scale; /* the gradient's own, unscaled */
    if (!isfinite(norm))
        return clf_error(CLF_ERR_INPUT, "train: the gradient norm is not finite at step %lld",
                         step);
    /* torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when below 1 */
    double clip = 1.0;
    if (tc->clip_norm > 0) {
        double coef = tc->clip_norm / (norm + 1e-6);
        if (coef < 1.0)
            clip = coef;
    }
    /* Adam counts the steps it took (skipped ones are not); the gradients are scaled by
     * the loss scale (f16) */
    const long long adam_step = step - t->skipped;
    const double grad_scale = clip / t->scale;
    for (int c = 0; c < t->n_chunks; c++) {
        /* the chunk's floats [0, n), or, around the fixed range, [0, skip) and [next, n) */
        const size_t n = t->bytes[c] / 4, skip = c == t->fixed_chunk ? t->fixed_off / 4 : n,
                     next = c == t->fixed_chunk ? skip + t->fixed_n : n;
        if ((st = adam_range(t, c, 0, skip, lr, grad_scale, adam_step)) != CLF_OK ||
            (next < n &&
             (st = adam_range(t, c, next, n - next, lr, grad_scale, adam_step)) != CLF_OK) ||
            (st = clf_op_fill(t->api, t->be, (clf_ptr){t->grad[c], 0}, 0.0f, n)) != CLF_OK)
            goto fail;
    }
    if ((st = t->api->synchronize(t->be)) != CLF_OK)
        goto fail;
    t->state.step = step;
    if (f16 && ++t->good >= tc->loss_scale_window) {
        t->scale *= 2;
        t->good = 0;
    }
    if (lr_out)
        *lr_out = lr;
    if (norm_out)
        *norm_out = norm;
    return CLF_OK;
fail: /* a device failure: the line names the step, as the graph's failures do */
    return clf_error_context(st, "train: optimizer step %lld", step);
}
