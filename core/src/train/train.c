/* The trainer (see clformer/train.h): training graphs per batch shape, the optimizer step
 * over the packed weight chunks, checkpoints. */
#include "clformer/train.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/hash.h"
#include "clformer/rng.h"
#include "clformer/tensor.h"
#include "graph/model_internal.h"

#define CHECKPOINT_FORMAT "clformer-checkpoint-1"
/* Metadata key of the checkpoint's data hash: FNV-1a 64 (clformer/hash.h) of the data
 * section, i.e. every tensor's bytes in file order, as 16 lowercase hex digits. Written
 * since the crash-safety work; a checkpoint without it (older) loads unchecked. */
#define HASH_KEY "data_fnv1a64"

/* A planned training (or evaluation) graph for one batch shape. */
typedef struct shaped_graph {
    int valid, B, S, T;
    clf_graph g;
    clf_train_values v;
    int *launch; /* training graph, per bucket in issue order: see bucket_launch_points */
} shaped_graph;

/* A piece of one gradient chunk that is summed over the processes as one message (see
 * clf_trainer_accumulate_reduce): floats [off, off + n) of t->grad[chunk], held at
 * staging + host while it is reduced. */
typedef struct grad_bucket {
    int chunk;
    size_t off, n, host;
} grad_bucket;

struct clf_trainer {
    clf_model *m;
    const clf_backend_api *api;
    clf_backend *be;
    clf_train_config tc;
    int dropout; /* 1: the model's dropout rates; 0: none */
    int n_chunks;
    clf_buffer **w, **grad, **exp_avg, **exp_avg_sq; /* per chunk; w and grad: the model's */
    size_t *bytes;
    clf_buffer *ones; /* 1.0f x ones_len: bias gradients are 1^T dY */
    size_t ones_len;
    clf_buffer *norms; /* n_chunks floats: sum of squares per chunk */
    float *host_norms; /* their host copy */
    clf_buffer *arena;
    size_t arena_cap;
    shaped_graph train, eval;
    float *host_loss; /* a batch's per-token losses */
    size_t host_cap;
    clf_train_state state;
    /* data-parallel reduction with overlap (clf_trainer_accumulate_reduce), cut for
     * bucket_bytes (0: not yet) */
    size_t bucket_bytes;
    grad_bucket *buckets; /* chunk after chunk, offset after offset */
    int n_buckets;
    int *order;       /* bucket indices in the order they are handed to the reducer */
    int *chunk_first; /* [n_chunks + 1]: the first bucket of each chunk, then n_buckets */
    float *staging;   /* host copy of every bucket */
};

/* ---------------------------------------------------------------------------------- */
/* life cycle                                                                          */

clf_status clf_trainer_create(clf_model *m, const clf_train_config *tc, int dropout,
                              clf_trainer **out)
{
    static const clf_op ops[] = {CLF_OP_RELU_BACKWARD,
                                 CLF_OP_LAYERNORM_BACKWARD,
                                 CLF_OP_ATTENTION_BACKWARD,
                                 CLF_OP_EMBED_BACKWARD,
                                 CLF_OP_DROPOUT,
                                 CLF_OP_CROSS_ENTROPY,
                                 CLF_OP_ADAM,
                                 CLF_OP_SUM_SQUARES,
                                 CLF_OP_FILL};
    clf_status st = CLF_OK;
    *out = NULL;
    clf_trainer *t = calloc(1, sizeof *t);
    if (!t)
        return clf_error(CLF_ERR_NOMEM, "train: out of host memory");
    t->m = m;
    t->tc = *tc;
    t->dropout = dropout;
    clf_model_backend_of(m, &t->api, &t->be);
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if ((st = clf_backend_require(t->api, t->be, ops[i])) != CLF_OK)
            goto fail;
    if ((st = clf_model_enable_grads(m)) != CLF_OK)
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
    *out = t;
    return CLF_OK;
fail:
    clf_trainer_free(t);
    return st;
}

static void drop_graph(shaped_graph *sg)
{
    if (sg->valid)
        clf_graph_free(&sg->g);
    sg->valid = 0;
    free(sg->launch);
    sg->launch = NULL;
}

/* Forgets the gradient buckets' cut (cut_buckets makes it again on demand). */
static void drop_buckets(clf_trainer *t)
{
    free(t->buckets);
    free(t->order);
    free(t->chunk_first);
    free(t->staging);
    t->buckets = NULL, t->order = NULL, t->chunk_first = NULL, t->staging = NULL;
    t->n_buckets = 0;
    t->bucket_bytes = 0;
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
    drop_graph(&t->train);
    drop_graph(&t->eval);
    free(t->w);
    free(t->grad);
    free(t->exp_avg);
    free(t->exp_avg_sq);
    free(t->bytes);
    free(t->host_norms);
    free(t->host_loss);
    drop_buckets(t);
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
    drop_graph(&t->train);
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
    drop_graph(sg);
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

static clf_status run_reduced(clf_trainer *t, shaped_graph *sg, const clf_trainer_reducer *r);

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
        backward && ntok ? (float)(1.0 / ((double)ntok * t->tc.accumulate)) : 0.0f;
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
    if ((st = r ? run_reduced(t, sg, r) : clf_graph_run(&sg->g, t->api, t->be, t->arena)) != CLF_OK)
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

clf_status clf_trainer_step(clf_trainer *t, double *lr_out, double *norm_out)
{
    clf_status st;
    const clf_train_config *tc = &t->tc;
    const long long step = t->state.step + 1;
    const double lr = clf_train_lr(tc, clf_model_config_of(t->m)->d_model, step);
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
    const double norm = sqrt(sq);
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
    const double bc1 = 1.0 - pow(tc->beta1, (double)step);
    const double bc2 = 1.0 - pow(tc->beta2, (double)step);
    for (int c = 0; c < t->n_chunks; c++) {
        clf_adam_args a = {.param = {t->w[c], 0},
                           .grad = {t->grad[c], 0},
                           .m = {t->exp_avg[c], 0},
                           .v = {t->exp_avg_sq[c], 0},
                           .n = t->bytes[c] / 4,
                           .lr = (float)lr,
                           .beta1 = tc->beta1,
                           .beta2 = tc->beta2,
                           .eps = tc->adam_eps,
                           .weight_decay = tc->weight_decay,
                           .grad_scale = (float)clip,
                           .bias_correction1 = (float)bc1,
                           .sqrt_bias_correction2 = (float)sqrt(bc2),
                           .decoupled = tc->optimizer == CLF_OPT_ADAMW};
        if ((st = clf_op_adam(t->api, t->be, &a)) != CLF_OK ||
            (st = clf_op_fill(t->api, t->be, (clf_ptr){t->grad[c], 0}, 0.0f, t->bytes[c] / 4)) !=
                CLF_OK)
            goto fail;
    }
    if ((st = t->api->synchronize(t->be)) != CLF_OK)
        goto fail;
    t->state.step = step;
    if (lr_out)
        *lr_out = lr;
    if (norm_out)
        *norm_out = norm;
    return CLF_OK;
fail: /* a device failure: the line names the step, as the graph's failures do */
    return clf_error_context(st, "train: optimizer step %lld", step);
}

/* ---------------------------------------------------------------------------------- */
/* checkpoints                                                                         */

/* The three tensors of weight i: the weight and its two Adam moments. */
static const char *const part_prefix[3] = {"", "optim.exp_avg.", "optim.exp_avg_sq."};

static clf_buffer *part_chunk(const clf_trainer *t, int part, int c)
{
    return part == 0 ? t->w[c] : part == 1 ? t->exp_avg[c] : t->exp_avg_sq[c];
}

clf_status clf_trainer_save(clf_trainer *t, const char *path, const char *config_yaml)
{
    clf_status st = CLF_OK;
    const int nw = clf_model_weight_count(t->m), nt = 3 * nw;
    clf_tensor *tensors = calloc((size_t)nt, sizeof *tensors);
    if (!tensors)
        return clf_error(CLF_ERR_NOMEM, "checkpoint: out of host memory");
    for (int part = 0; part < 3; part++)
        for (int i = 0; i < nw; i++) {
            const clf_weight_spec *s = clf_model_weight_spec(t->m, i);
            clf_tensor *x = &tensors[part * nw + i];
            int c;
            size_t off;
            clf_model_weight_place(t->m, i, &c, &off);
            snprintf(x->name, sizeof x->name, "%s%s", part_prefix[part], s->name);
            x->dtype = CLF_F32;
            x->ndim = s->ndim;
            x->shape[0] = s->shape[0];
            x->shape[1] = s->shape[1];
            x->nbytes = (size_t)clf_weight_spec_numel(s) * sizeof(float);
            x->data = malloc(x->nbytes ? x->nbytes : 1);
            if (!x->data) {
                st = clf_error(CLF_ERR_NOMEM, "checkpoint: out of host memory");
                goto fail;
            }
            if ((st = clf_op_download(t->api, t->be, x->data,
                                      (clf_ptr){part_chunk(t, part, c), off}, x->nbytes)) !=
                CLF_OK) {
                clf_error_context(st, "checkpoint: reading '%s' from the device", x->name);
                goto fail;
            }
        }
    /* the data section is the tensors' bytes in this order (clf_safetensors_write) */
    uint64_t h = CLF_FNV1A64_OFFSET;
    for (int i = 0; i < nt; i++)
        h = clf_hash_fnv1a64(h, tensors[i].data, tensors[i].nbytes);
    char step[32], micro[32], epoch[32], batch[32], seed[32], hash[32];
    snprintf(hash, sizeof hash, "%016" PRIx64, h);
    snprintf(step, sizeof step, "%lld", t->state.step);
    snprintf(micro, sizeof micro, "%lld", t->state.micro);
    snprintf(epoch, sizeof epoch, "%d", t->state.epoch);
    snprintf(batch, sizeof batch, "%d", t->state.batch);
    snprintf(seed, sizeof seed, "%lld", t->tc.seed);
    const char *meta[] = {"format",    CHECKPOINT_FORMAT,
                          "step",      step,
                          "micro",     micro,
                          "epoch",     epoch,
                          "batch",     batch,
                          "seed",      seed,
                          "optimizer", clf_optimizer_name(t->tc.optimizer),
                          HASH_KEY,    hash,
                          "config",    config_yaml ? config_yaml : ""};
    st = clf_safetensors_write(path, tensors, nt, meta, (int)(sizeof meta / sizeof meta[0]) / 2);
fail:
    for (int i = 0; i < nt; i++)
        free(tensors[i].data);
    free(tensors);
    return st;
}

static clf_status meta_ll(const clf_safetensors *f, const char *key, long long *out)
{
    const char *v = clf_safetensors_meta(f, key);
    char *end;
    if (!v || !*v)
        return clf_error(CLF_ERR_INPUT, "%s: checkpoint metadata '%s' is missing",
                         clf_safetensors_path(f), key);
    long long x = strtoll(v, &end, 10);
    if (*end || x < 0)
        return clf_error(CLF_ERR_INPUT, "%s: checkpoint metadata '%s' is not a count: '%s'",
                         clf_safetensors_path(f), key, v);
    *out = x;
    return CLF_OK;
}

/* The checkpoint's tensors named name(part, i), hashed in that order, against its
 * HASH_KEY (absent: a checkpoint older than the key, not checked). Run before
 * anything is uploaded, so that a damaged file leaves the trainer as it was. */
static clf_status check_hash(const clf_trainer *t, const clf_safetensors *f)
{
    const char *want = clf_safetensors_meta(f, HASH_KEY);
    const char *path = clf_safetensors_path(f);
    if (!want)
        return CLF_OK;
    const int nw = clf_model_weight_count(t->m);
    uint64_t h = CLF_FNV1A64_OFFSET;
    for (int part = 0; part < 3; part++)
        for (int i = 0; i < nw; i++) {
            char name[CLF_TENSOR_NAME_MAX + 32];
            snprintf(name, sizeof name, "%s%s", part_prefix[part],
                     clf_model_weight_spec(t->m, i)->name);
            const clf_tensor *x = clf_safetensors_find(f, name);
            if (!x)
                return clf_error(CLF_ERR_INPUT, "%s: tensor '%s' is missing", path, name);
            h = clf_hash_fnv1a64(h, x->data, x->nbytes);
        }
    char got[32];
    snprintf(got, sizeof got, "%016" PRIx64, h);
    if (strcmp(got, want) != 0)
        return clf_error(CLF_ERR_INPUT,
                         "%s: damaged checkpoint: its data hashes to %s, its metadata %s says %s",
                         path, got, HASH_KEY, want);
    return CLF_OK;
}

clf_status clf_trainer_load(clf_trainer *t, const char *path)
{
    clf_safetensors *f = NULL;
    float *host = NULL;
    clf_status st = clf_safetensors_open(path, &f);
    if (st != CLF_OK)
        return st;
    const char *fmt = clf_safetensors_meta(f, "format");
    if (!fmt || strcmp(fmt, CHECKPOINT_FORMAT) != 0) {
        st = clf_error(CLF_ERR_INPUT,
                       "%s: not a clformer training checkpoint (metadata format is '%s', "
                       "expected '%s')",
                       path, fmt ? fmt : "absent", CHECKPOINT_FORMAT);
        goto fail;
    }
    clf_train_state s;
    long long epoch, batch;
    if ((st = check_hash(t, f)) != CLF_OK || (st = meta_ll(f, "step", &s.step)) != CLF_OK ||
        (st = meta_ll(f, "micro", &s.micro)) != CLF_OK ||
        (st = meta_ll(f, "epoch", &epoch)) != CLF_OK ||
        (st = meta_ll(f, "batch", &batch)) != CLF_OK)
        goto fail;
    s.epoch = (int)epoch;
    s.batch = (int)batch;
    const int nw = clf_model_weight_count(t->m);
    for (int part = 0; part < 3; part++)
        for (int i = 0; i < nw; i++) {
            const clf_weight_spec *ws = clf_model_weight_spec(t->m, i);
            char name[CLF_TENSOR_NAME_MAX + 32];
            snprintf(name, sizeof name, "%s%s", part_prefix[part], ws->name);
            const clf_tensor *x = clf_safetensors_find(f, name);
            if (!x) {
                st = clf_error(CLF_ERR_INPUT, "%s: tensor '%s' is missing", path, name);
                goto fail;
            }
            if (clf_tensor_numel(x) != clf_weight_spec_numel(ws) || x->ndim != ws->ndim) {
                char a[64], b[64];
                st = clf_error(CLF_ERR_INPUT, "%s: tensor '%s' has shape %s, the model needs %s",
                               path, name, clf_shape_str(x->shape, x->ndim, a, sizeof a),
                               clf_shape_str(ws->shape, ws->ndim, b, sizeof b));
                goto fail;
            }
            size_t bytes = (size_t)clf_weight_spec_numel(ws) * sizeof(float);
            float *h = realloc(host, bytes ? bytes : 1);
            if (!h) {
                st = clf_error(CLF_ERR_NOMEM, "checkpoint: out of host memory");
                goto fail;
            }
            host = h;
            if ((st = clf_tensor_to_f32(x, host)) != CLF_OK)
                goto fail;
            int c;
            size_t off;
            clf_model_weight_place(t->m, i, &c, &off);
            if ((st = clf_op_upload(t->api, t->be, (clf_ptr){part_chunk(t, part, c), off}, host,
                                    bytes)) != CLF_OK)
                goto fail;
        }
    t->state = s;
    drop_graph(&t->train); /* nothing stale, but a resumed run starts clean */
    drop_graph(&t->eval);
    st = t->api->synchronize(t->be);
fail:
    free(host);
    clf_safetensors_close(f);
    return st;
}

/* ---------------------------------------------------------------------------------- */
/* hooks for data-parallel training (tools/dist_mpi.c)                                 */

/* The floats of a bucket of bucket_bytes (at least one): the cut of clf_trainer_reduce_grads
 * and of the overlapped reduction alike. */
static size_t bucket_floats(size_t bucket_bytes)
{
    return bucket_bytes / sizeof(float) ? bucket_bytes / sizeof(float) : 1;
}

clf_status clf_trainer_reduce_grads(clf_trainer *t, size_t bucket_bytes, clf_trainer_bucket_fn fn,
                                    void *ctx)
{
    clf_status st = CLF_OK;
    const size_t cap = bucket_floats(bucket_bytes);
    float *host = malloc(cap * sizeof *host);
    if (!host)
        return clf_error(CLF_ERR_NOMEM, "train: out of host memory");
    /* whole chunks, padding included: it is zero on every rank (the gradients are filled
     * with zeros over the chunk and no op writes between groups), so its sum is zero */
    for (int c = 0; c < t->n_chunks && st == CLF_OK; c++) {
        const size_t n = t->bytes[c] / sizeof(float);
        for (size_t off = 0; off < n && st == CLF_OK; off += cap) {
            const size_t k = n - off < cap ? n - off : cap;
            const clf_ptr p = {t->grad[c], off * sizeof(float)};
            if ((st = clf_op_download(t->api, t->be, host, p, k * sizeof(float))) != CLF_OK ||
                (st = fn(ctx, host, k)) != CLF_OK)
                break;
            st = clf_op_upload(t->api, t->be, p, host, k * sizeof(float));
        }
    }
    free(host);
    return st;
}

/* The buckets' order and launch points.
 *
 * Which node completes a bucket: the backward pass (graph/autodiff.c) writes a parameter's
 * gradient only through operands bound to that parameter's gradient value, an external
 * value over the parameter's slice of its gradient chunk (autodiff.c grad_value; a group
 * of weights that one GEMM reads is one value over the group), and no op reaches outside
 * the value its operand is bound to. So the last node with an operand bound to a gradient
 * value that overlaps a bucket is the last node that writes into the bucket (operands that
 * read count too: that can only make it later, never too early). A bucket of padding alone
 * has no writer (-1): it is ready before the graph runs. */
static void last_writers(const clf_trainer *t, const clf_graph *g, int *last)
{
    const int *chunk_first = t->chunk_first;
    const size_t cap = bucket_floats(t->bucket_bytes);
    for (int i = 0; i < t->n_buckets; i++)
        last[i] = -1;
    for (int ni = 0; ni < g->n_nodes; ni++) {
        const clf_node *n = &g->nodes[ni];
        for (int k = 0; k < n->n_operands; k++) {
            const clf_value *v = &g->values[n->operands[k].value];
            if (v->kind != CLF_VALUE_EXTERNAL || !v->ext.buf || !v->bytes)
                continue;
            for (int c = 0; c < t->n_chunks; c++) {
                if (v->ext.buf != t->grad[c])
                    continue;
                const int nb = chunk_first[c + 1] - chunk_first[c];
                size_t lo = v->ext.off / sizeof(float) / cap;
                size_t hi = (v->ext.off + v->bytes - 1) / sizeof(float) / cap;
                for (size_t j = lo; j <= hi && j < (size_t)nb; j++)
                    last[chunk_first[c] + (int)j] = ni;
            }
        }
    }
}

typedef struct ready_at {
    int node, bucket;
} ready_at;

static int by_ready(const void *a, const void *b)
{
    const ready_at *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return (x->bucket > y->bucket) - (x->bucket < y->bucket);
}

/* Cuts the gradient chunks into buckets of bucket_bytes (the cut of clf_trainer_reduce_grads:
 * whole chunks, padding included) and fixes the order in which they are handed to the
 * reducer: by the node that completes them in the training graph of a 1 x 1/1 batch, ties
 * by position. Every process must hand its reducer the same sequence (MPI matches
 * collectives by their order), and the ranks' graphs have other shapes; a training graph's
 * node list depends on the model and the dropout switch alone, but the order is taken from
 * one fixed shape all the same, and a graph that completed the buckets in another order
 * would only start some later (bucket_launch_points), never reorder them. */
static clf_status cut_buckets(clf_trainer *t, size_t bucket_bytes)
{
    if (t->bucket_bytes == bucket_bytes && t->buckets)
        return CLF_OK;
    clf_status st = CLF_OK;
    clf_graph g;
    clf_graph_init(&g);
    int *last = NULL;
    ready_at *ra = NULL;
    drop_buckets(t);
    free(t->train.launch); /* cut for other buckets */
    t->train.launch = NULL;
    t->bucket_bytes = bucket_bytes;
    const size_t cap = bucket_floats(bucket_bytes);
    size_t nb = 0, total = 0;
    for (int c = 0; c < t->n_chunks; c++) {
        const size_t n = t->bytes[c] / sizeof(float);
        nb += (n + cap - 1) / cap;
        total += n;
    }
    if (nb > INT_MAX / 2) {
        st = clf_error(CLF_ERR_INPUT, "train: %zu gradient buckets of %zu bytes are too many", nb,
                       bucket_bytes);
        goto fail;
    }
    t->buckets = calloc(nb ? nb : 1, sizeof *t->buckets);
    t->order = calloc(nb ? nb : 1, sizeof *t->order);
    t->staging = malloc((total ? total : 1) * sizeof *t->staging);
    t->chunk_first = calloc((size_t)t->n_chunks + 1, sizeof *t->chunk_first);
    last = calloc(nb ? nb : 1, sizeof *last);
    ra = calloc(nb ? nb : 1, sizeof *ra);
    if (!t->buckets || !t->order || !t->staging || !t->chunk_first || !last || !ra) {
        st = clf_error(CLF_ERR_NOMEM, "train: out of host memory for the gradient buckets");
        goto fail;
    }
    size_t host = 0;
    for (int c = 0; c < t->n_chunks; c++) {
        const size_t n = t->bytes[c] / sizeof(float);
        t->chunk_first[c] = t->n_buckets;
        for (size_t off = 0; off < n; off += cap) {
            const size_t k = n - off < cap ? n - off : cap;
            t->buckets[t->n_buckets++] =
                (grad_bucket){.chunk = c, .off = off, .n = k, .host = host};
            host += k;
        }
    }
    t->chunk_first[t->n_chunks] = t->n_buckets;
    clf_train_graph_spec spec = {.B = 1,
                                 .S = 1,
                                 .T = 1,
                                 .dropout = t->dropout,
                                 .label_smoothing = t->tc.label_smoothing,
                                 .backward = 1,
                                 .ones = (clf_ptr){t->ones, 0}};
    clf_train_values v;
    if ((st = clf_model_build_train_graph(t->m, &spec, &g, &v)) != CLF_OK) {
        clf_error_context(st, "train: ordering the gradient buckets");
        goto fail;
    }
    last_writers(t, &g, last);
    for (int i = 0; i < t->n_buckets; i++)
        ra[i] = (ready_at){last[i], i};
    qsort(ra, (size_t)t->n_buckets, sizeof *ra, by_ready);
    for (int i = 0; i < t->n_buckets; i++)
        t->order[i] = ra[i].bucket;
fail:
    if (st != CLF_OK)
        drop_buckets(t);
    clf_graph_free(&g);
    free(last);
    free(ra);
    return st;
}

/* sg->launch[p]: the node after which the p-th bucket of the issue order may start, in
 * this graph: the last node that writes it or any bucket before it in the order (so the
 * buckets start in that order), -1: before the graph. */
static clf_status bucket_launch_points(clf_trainer *t, shaped_graph *sg)
{
    if (sg->launch)
        return CLF_OK;
    const size_t nb = (size_t)t->n_buckets;
    int *last = calloc(nb ? nb : 1, sizeof *last);
    int *launch = calloc(nb ? nb : 1, sizeof *launch);
    if (!last || !launch) {
        free(last);
        free(launch);
        return clf_error(CLF_ERR_NOMEM, "train: out of host memory");
    }
    last_writers(t, &sg->g, last);
    int m = -1;
    for (int p = 0; p < t->n_buckets; p++) {
        const int l = last[t->order[p]];
        m = l > m ? l : m;
        launch[p] = m;
    }
    sg->launch = launch;
    free(last);
    return CLF_OK;
}

/* where bucket b lies on the device */
static clf_ptr bucket_ptr(const clf_trainer *t, const grad_bucket *b)
{
    return (clf_ptr){t->grad[b->chunk], b->off * sizeof(float)};
}

typedef struct reduce_run {
    clf_trainer *t;
    const clf_trainer_reducer *r;
    const int *launch;
    int next; /* the next bucket of the issue order to start */
} reduce_run;

/* After node `node` (-1: before the first): progress on the sums in flight, then every
 * bucket whose launch point has passed goes to the reducer. The download waits for the
 * queued ops (clformer/backend.h), so the host copy holds the bucket's final gradient. */
static clf_status reduce_hook(void *ctx, int node)
{
    reduce_run *x = ctx;
    clf_trainer *t = x->t;
    clf_status st;
    if (x->next > 0 && (st = x->r->progress(x->r->ctx)) != CLF_OK)
        return st;
    while (x->next < t->n_buckets && x->launch[x->next] <= node) {
        const grad_bucket *b = &t->buckets[t->order[x->next]];
        float *host = t->staging + b->host;
        if ((st = clf_op_download(t->api, t->be, host, bucket_ptr(t, b), b->n * sizeof(float))) !=
                CLF_OK ||
            (st = x->r->start(x->r->ctx, host, b->n)) != CLF_OK)
            return st;
        x->next++;
    }
    return CLF_OK;
}

static clf_status run_reduced(clf_trainer *t, shaped_graph *sg, const clf_trainer_reducer *r)
{
    clf_status st;
    if ((st = cut_buckets(t, r->bucket_bytes)) != CLF_OK ||
        (st = bucket_launch_points(t, sg)) != CLF_OK)
        return st;
    reduce_run x = {.t = t, .r = r, .launch = sg->launch};
    if ((st = reduce_hook(&x, -1)) == CLF_OK &&
        (st = clf_graph_run_hooked(&sg->g, t->api, t->be, t->arena, reduce_hook, &x)) == CLF_OK)
        st = reduce_hook(&x, INT_MAX);
    /* nothing stays in flight, even after an error: the sums land in t->staging */
    if (x.next > 0) {
        clf_status fs = r->finish(r->ctx);
        if (st == CLF_OK)
            st = fs;
    }
    for (int i = 0; i < t->n_buckets && st == CLF_OK; i++) {
        const grad_bucket *b = &t->buckets[i];
        st = clf_op_upload(t->api, t->be, bucket_ptr(t, b), t->staging + b->host,
                           b->n * sizeof(float));
    }
    return st;
}

clf_status clf_trainer_hash(clf_trainer *t, uint64_t *out)
{
    clf_status st = CLF_OK;
    uint64_t h = CLF_FNV1A64_OFFSET;
    float *host = NULL;
    const int nw = clf_model_weight_count(t->m);
    /* per tensor, as clf_trainer_save writes them: the padding between groups is never
     * written and may differ between processes */
    for (int part = 0; part < 3 && st == CLF_OK; part++)
        for (int i = 0; i < nw; i++) {
            const clf_weight_spec *ws = clf_model_weight_spec(t->m, i);
            const size_t bytes = (size_t)clf_weight_spec_numel(ws) * sizeof(float);
            float *p = realloc(host, bytes ? bytes : 1);
            if (!p) {
                st = clf_error(CLF_ERR_NOMEM, "train: out of host memory");
                break;
            }
            host = p;
            int c;
            size_t off;
            clf_model_weight_place(t->m, i, &c, &off);
            if ((st = clf_op_download(t->api, t->be, host, (clf_ptr){part_chunk(t, part, c), off},
                                      bytes)) != CLF_OK)
                break;
            h = clf_hash_fnv1a64(h, host, bytes);
        }
    free(host);
    *out = h;
    return st;
}
