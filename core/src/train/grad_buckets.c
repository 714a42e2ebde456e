/* The gradient buckets of data-parallel training (tools/dist_mpi.c): clf_trainer_reduce_grads
 * hands the reducer the gradients bucket by bucket after the step's micro-batches, and the
 * overlapped reduction (clf_trainer_accumulate_reduce) cuts the gradients into buckets once,
 * orders them by the node of the backward pass that completes them, and starts each bucket
 * as soon as that node has run. */
#include <limits.h>
#include <stdlib.h>

#include "train/trainer_internal.h"

/* Forgets the gradient buckets' cut (cut_buckets makes it again on demand). */
void clf_grad_buckets_free(clf_trainer *t)
{
    free(t->buckets);
    free(t->order);
    free(t->chunk_first);
    free(t->staging);
    t->buckets = NULL, t->order = NULL, t->chunk_first = NULL, t->staging = NULL;
    t->n_buckets = 0;
    t->bucket_bytes = 0;
}

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
    clf_grad_buckets_free(t);
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
        clf_grad_buckets_free(t);
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

clf_status clf_grad_buckets_run(clf_trainer *t, shaped_graph *sg, const clf_trainer_reducer *r)
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
