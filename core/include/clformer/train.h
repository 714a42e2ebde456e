/* clformer/train.h - training a model on its backend: gradients, Adam, checkpoints.
 *
 * A trainer owns the optimizer state (Adam moments, one buffer per weight chunk, on the
 * device) and the training graphs. One optimizer step is `accumulate` calls of
 * clf_trainer_accumulate (forward, label-smoothed cross-entropy, backward: gradients add
 * up on the device) and one clf_trainer_step (schedule, clipping, Adam, gradients back to
 * zero). Only the ids go up and the per-token losses come down.
 *
 * Semantics (the PyTorch reference of tests/reference/make_train_fixtures.py):
 *   loss of a micro-batch = mean over its non-pad labels of the label-smoothed CE
 *   the step's gradient   = mean over the micro-batches of their losses' gradients
 *   clipping              = torch.nn.utils.clip_grad_norm_ on that gradient
 *   Adam / AdamW          = torch.optim.Adam / AdamW
 * Dropout masks are a pure function of (train.seed, micro-batch number, dropout site), so
 * a resumed run draws the masks an uninterrupted run would have drawn. */
#ifndef CLFORMER_TRAIN_H
#define CLFORMER_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "clformer/config.h"
#include "clformer/export.h"
#include "clformer/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clf_trainer clf_trainer;

/* One batch of pairs, framed as the tutorial (see clformer/dataset.h):
 *   src [B, S] = [SOS] x [EOS] [PAD]...   tgt [B, T] = [SOS] y [PAD]...
 *   labels [B, T] = y [EOS] [PAD]...      (pad = model.pad_id)
 * or as the model's keys say (clf_model_framing); a decoder start that is the pad id
 * (Marian's) is not masked, as in the forward pass. */
typedef struct clf_train_batch {
    int batch, src_len, tgt_len;
    const int32_t *src, *tgt, *labels;
} clf_train_batch;

/* Where training stands; saved in checkpoints, restored by clf_trainer_load. */
typedef struct clf_train_state {
    long long step;  /* optimizer steps done */
    long long micro; /* micro-batches done (dropout seeds derive from it) */
    int epoch;       /* epoch in progress, 0-based */
    int batch;       /* next batch of that epoch */
} clf_train_state;

/* The trainer for model m (its weights are trained in place). dropout: 1 = the model
 * config's dropout rates (model.dropout and its sites), 0 = none (exact comparisons).
 * tc->precision goes to clf_model_set_precision (docs/PRECISION.md): with bf16 on a backend
 * with BF16 arithmetic, the forward and backward products of the linear layers run in it,
 * the backend rounding the F32 weights as each product reads them; the weights, the
 * gradients and Adam stay F32. */
CLF_API clf_status clf_trainer_create(clf_model *m, const clf_train_config *tc, int dropout,
                                      clf_trainer **out);
/* What creating t noticed of its precision, for a CLI to print (products that run in F32
 * for want of the arithmetic), else NULL. */
CLF_API const char *clf_trainer_note(const clf_trainer *t);
CLF_API void clf_trainer_free(clf_trainer *t);

/* Forward and backward of one micro-batch; its gradient (of its mean loss, divided by
 * tc->accumulate) adds to the gradient buffers. *loss_sum: sum of the per-token losses,
 * *tokens: non-pad labels (both may be NULL). */
CLF_API clf_status clf_trainer_accumulate(clf_trainer *t, const clf_train_batch *b,
                                          double *loss_sum, long long *tokens);

/* The optimizer step: learning rate from the schedule at step state.step + 1, clipping by
 * global norm (when tc->clip_norm > 0), Adam or AdamW, then the gradients are zeroed.
 * *lr and *grad_norm (before clipping) may be NULL. */
CLF_API clf_status clf_trainer_step(clf_trainer *t, double *lr, double *grad_norm);
/* Precision f16's dynamic loss scaling (docs/PRECISION.md): each micro-batch's loss
 * gradient is multiplied by the scale S (tc->loss_scale_init at the start), the gradient
 * norm and Adam's gradient divided by it; a step whose gradient is not finite updates
 * nothing (its gradients are zeroed, *grad_norm is infinity), halves S and counts as
 * skipped (the schedule's step moves on, Adam's count does not); S doubles after
 * tc->loss_scale_window good steps in a row. Not saved in checkpoints: a resumed run starts
 * again from tc->loss_scale_init. *scale: S now (1 for other precisions); *skipped: the
 * steps skipped in this process. Either may be NULL. */
CLF_API void clf_trainer_loss_scale(const clf_trainer *t, double *scale, long long *skipped);

/* Loss only (no dropout, no gradient), for validation. */
CLF_API clf_status clf_trainer_evaluate(clf_trainer *t, const clf_train_batch *b, double *loss_sum,
                                        long long *tokens);

/* The learning rate at optimizer step `step` (1-based):
 *   constant:     lr * min(1, step / warmup)          (no warmup when warmup = 0)
 *   noam:         lr * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
 *   inverse_sqrt: lr * min(step / warmup, sqrt(warmup / step)) */
CLF_API double clf_train_lr(const clf_train_config *tc, int d_model, long long step);

CLF_API clf_train_state *clf_trainer_state(clf_trainer *t);

/* Writes weights (tutorial names), Adam moments ("optim.exp_avg.<name>",
 * "optim.exp_avg_sq.<name>") and the state, config_yaml (may be NULL), the FNV-1a 64
 * hash of the data section ("data_fnv1a64") and that of the other metadata
 * ("checkpoint_fnv1a64", which covers "data_fnv1a64" and so the data) as metadata, to path
 * atomically (clformer/fs.h: temporary name, fsync, rename, directory fsync). A state the
 * loader would refuse (a count outside its range, below) is not saved: CLF_ERR_INPUT. */
CLF_API clf_status clf_trainer_save(clf_trainer *t, const char *path, const char *config_yaml);

/* Restores what clf_trainer_save wrote: weights, moments and state. Errors name the
 * file and the tensor (missing, mis-shaped) or the metadata key; metadata that does not
 * hash to its "checkpoint_fnv1a64" and data that does not hash to its "data_fnv1a64" are
 * refused ("damaged checkpoint") before anything is restored. The counts are decimal
 * digits alone within their ranges: step and micro in [0, 2^53 - 1], epoch and batch in
 * [0, INT_MAX - 1]. A checkpoint without "checkpoint_fnv1a64" (written before it) loads
 * with its other metadata unchecked. */
CLF_API clf_status clf_trainer_load(clf_trainer *t, const char *path);

/* Data-parallel training (`mpirun -np N clformer train`, tools/dist_mpi.c). fn gets a host
 * copy of a piece (a bucket) of the gradients, at most bucket_bytes, and may change it in
 * place (an all-reduce sum over the processes); what it leaves there is uploaded back. The
 * buckets cover the gradient buffers in a fixed order, so every process hands fn the same
 * sequence of sizes. Called between the last clf_trainer_accumulate of a step and
 * clf_trainer_step. */
typedef clf_status (*clf_trainer_bucket_fn)(void *ctx, float *data, size_t n);
CLF_API clf_status clf_trainer_reduce_grads(clf_trainer *t, size_t bucket_bytes,
                                            clf_trainer_bucket_fn fn, void *ctx);

/* The same reduction overlapped with the backward pass of the step's last micro-batch.
 * clf_trainer_accumulate_reduce is clf_trainer_accumulate for that micro-batch, and as the
 * backward pass runs, each bucket of the gradients (the buckets of clf_trainer_reduce_grads,
 * bucket_bytes each) goes to start() as soon as the last node that writes it has run: its
 * host copy data[0, n), which the reducer may sum in place until finish() returns (the
 * copy is the trainer's). progress() is called after every later node (MPI's progress is
 * driven by such calls), finish() once after the graph: every sum is complete when it
 * returns, and the trainer uploads them all. Every process starts the same sequence of
 * buckets (the order is fixed per model, not per batch shape), so collectives match. The
 * sums are those of clf_trainer_reduce_grads: the same buckets, summed whole. On an error,
 * finish() has still been called when any bucket was started. Host memory: one copy of
 * the gradients. */
typedef struct clf_trainer_reducer {
    size_t bucket_bytes;
    clf_status (*start)(void *ctx, float *data, size_t n);
    clf_status (*progress)(void *ctx);
    clf_status (*finish)(void *ctx);
    void *ctx;
} clf_trainer_reducer;
CLF_API clf_status clf_trainer_accumulate_reduce(clf_trainer *t, const clf_train_batch *b,
                                                 const clf_trainer_reducer *r, double *loss_sum,
                                                 long long *tokens);

/* FNV-1a 64 (clformer/hash.h) of the weights and Adam moments, tensor by tensor in the
 * checkpoint's order: equal in two processes when they hold the same state. */
CLF_API clf_status clf_trainer_hash(clf_trainer *t, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
