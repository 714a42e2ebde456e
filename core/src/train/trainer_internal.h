/* train/trainer_internal.h - the trainer's state, shared by its three files: trainer.c (life
 * cycle, micro-batches, the optimizer step), checkpoint.c (save, load, hash) and
 * grad_buckets.c (the gradient buckets of data-parallel training). Private to train/. */
#ifndef CLF_TRAIN_TRAINER_INTERNAL_H
#define CLF_TRAIN_TRAINER_INTERNAL_H

#include <stddef.h>

#include "clformer/train.h"
#include "graph/model_for_train_decode.h"

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
    /* model.fixed_output_bias: the projection's bias, which the optimizer leaves as it is
     * (no gradient in the norm, no update, no weight decay): its chunk (-1: none), byte
     * offset and floats */
    int fixed_chunk;
    size_t fixed_off, fixed_n;
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
    /* what clf_model_set_precision said of tc.precision (clf_trainer_note); "" if nothing */
    char note[256];
    /* precision f16's dynamic loss scaling: the scale (1 otherwise), the good steps since
     * it last changed, the steps skipped for a gradient that was not finite */
    double scale;
    long long good, skipped;
};

/* Frees sg's graph and launch points; sg is then invalid (rebuilt on demand). trainer.c */
void clf_trainer_drop_graph(shaped_graph *sg);

/* Runs sg's training graph, its buckets going to r as the backward pass completes them
 * (clf_trainer_accumulate_reduce). grad_buckets.c */
clf_status clf_grad_buckets_run(clf_trainer *t, shaped_graph *sg, const clf_trainer_reducer *r);

/* Forgets the gradient buckets' cut (made again on demand). grad_buckets.c */
void clf_grad_buckets_free(clf_trainer *t);

#endif
