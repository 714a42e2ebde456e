/* Fuzz target: the checkpoint loader of `clformer train --resume` (clf_trainer_load: the
 * safetensors reader, the format, the metadata hash, the counts of the training state
 * within their ranges, the data hash, the tensors' names and shapes against the model)
 * into the trainer of a tiny model on the CPU backend. A refusal must leave the trainer's
 * state as it was; an accepted checkpoint's counts must lie in their ranges, and the
 * loaded state must hash (clf_trainer_hash). */
#include <limits.h>
#include <stdlib.h>

#include "clformer/backend.h"
#include "clformer/config.h"
#include "clformer/model.h"
#include "clformer/train.h"
#include "fuzz_util.h"

/* The model the seeds were saved from (tests/fuzz/corpus/checkpoint/). */
static const char model_yaml[] = FUZZ_TINY_MODEL_YAML "backend: {name: cpu, threads: 1}\n";

/* The counts' ranges (clformer/train.h, clf_trainer_load). */
#define STEP_MAX ((1LL << 53) - 1)

/* The process's trainer, made once and kept to the end. */
static struct {
    clf_config cfg;
    const clf_backend_api *api;
    clf_backend *be;
    clf_model *model;
    clf_trainer *t;
} fz;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_cpu_model(model_yaml, &fz.cfg, &fz.api, &fz.be, &fz.model);
    FUZZ_CHECK(clf_trainer_create(fz.model, &fz.cfg.train, 0, &fz.t) == CLF_OK,
               "clf_trainer_create failed");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clf_clear_error(); /* a finding names this input's last error, not an earlier one's */
    const char *path = fuzz_file(0, data, size);
    clf_train_state *s = clf_trainer_state(fz.t);
    const clf_train_state before = {.step = 11, .micro = 12, .epoch = 13, .batch = 14};
    *s = before;
    if (clf_trainer_load(fz.t, path) != CLF_OK) {
        FUZZ_CHECK(s->step == before.step && s->micro == before.micro && s->epoch == before.epoch &&
                       s->batch == before.batch,
                   "a refused checkpoint changed the training state");
        FUZZ_CHECK(clf_last_error()[0] != '\0', "a refusal without a message");
        return 0;
    }
    FUZZ_CHECK(s->step >= 0 && s->step <= STEP_MAX && s->micro >= 0 && s->micro <= STEP_MAX,
               "an accepted step or micro outside [0, 2^53 - 1]");
    FUZZ_CHECK(s->epoch >= 0 && s->epoch < INT_MAX && s->batch >= 0 && s->batch < INT_MAX,
               "an accepted epoch or batch outside [0, INT_MAX - 1]");
    uint64_t h;
    FUZZ_CHECK(clf_trainer_hash(fz.t, &h) == CLF_OK, "an accepted checkpoint does not hash");
    return 0;
}
