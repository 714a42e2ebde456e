/* Checkpoints of the trainer (see clformer/train.h): clf_trainer_save writes the weights,
 * the Adam moments and the training state with their hashes, clf_trainer_load checks and
 * restores them, clf_trainer_hash hashes the same tensors on the device. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/hash.h"
#include "clformer/tensor.h"
#include "train/trainer_internal.h"

#define CHECKPOINT_FORMAT "clformer-checkpoint-1"
/* Metadata key of the checkpoint's data hash: FNV-1a 64 (clformer/hash.h) of the data
 * section, i.e. every tensor's bytes in file order, as 16 lowercase hex digits. Written
 * since the crash-safety work; a checkpoint without it (older) loads unchecked. */
#define HASH_KEY "data_fnv1a64"

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
    clf_trainer_drop_graph(&t->train); /* nothing stale, but a resumed run starts clean */
    clf_trainer_drop_graph(&t->eval);
    st = t->api->synchronize(t->be);
fail:
    free(host);
    clf_safetensors_close(f);
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
