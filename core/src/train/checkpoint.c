/* Checkpoints of the trainer (see clformer/train.h): clf_trainer_save writes the weights,
 * the Adam moments and the training state with their hashes, clf_trainer_load checks and
 * restores them, clf_trainer_hash hashes the same tensors on the device. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
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
/* Metadata key of the checkpoint's metadata hash, 16 lowercase hex digits: FNV-1a 64 of
 * each entry of meta_keys present in the file, in that order, as its key, a NUL byte, its
 * value, a NUL byte. HASH_KEY is one of them, so it covers the data too; a checkpoint that
 * has it must have HASH_KEY. A checkpoint without it (older) loads with its metadata
 * unchecked beyond the counts' ranges. */
#define META_HASH_KEY "checkpoint_fnv1a64"

/* Every metadata entry clf_trainer_save writes but META_HASH_KEY, in the order hashed. The
 * last three (precision f16's loss scaling, written by such runs only) are absent from
 * older checkpoints and from those of other precisions. */
enum { META_DATA_HASH = 7, META_LOSS_SCALE = 9, N_META = 12 };
static const char *const meta_keys[N_META] = {"format", "step",       "micro",           "epoch",
                                              "batch",  "seed",       "optimizer",       HASH_KEY,
                                              "config", "loss_scale", "loss_scale_good", "skipped"};

/* The counts of the training state and the largest each may be. step and micro: doubles
 * hold them exactly (the schedule computes with the step) and one more never overflows;
 * epoch and batch: ints, and the next one (the CLI counts on from them) is an int too. */
#define STATE_COUNT_MAX ((1LL << 53) - 1)
enum { N_COUNTS = 4, N_SCALE_COUNTS = 2 };
static const struct {
    const char *key;
    long long max;
} state_counts[N_COUNTS + N_SCALE_COUNTS] = {
    {"step", STATE_COUNT_MAX}, {"micro", STATE_COUNT_MAX},           {"epoch", INT_MAX - 1},
    {"batch", INT_MAX - 1},    {"loss_scale_good", STATE_COUNT_MAX}, {"skipped", STATE_COUNT_MAX}};

/* The three tensors of weight i: the weight and its two Adam moments. */
static const char *const part_prefix[3] = {"", "optim.exp_avg.", "optim.exp_avg_sq."};

static clf_buffer *part_chunk(const clf_trainer *t, int part, int c)
{
    return part == 0 ? t->w[c] : part == 1 ? t->exp_avg[c] : t->exp_avg_sq[c];
}

/* The metadata hash of META_HASH_KEY over values[i] of meta_keys[i] (NULL: absent). */
static uint64_t hash_meta(const char *const *values)
{
    uint64_t h = CLF_FNV1A64_OFFSET;
    for (int i = 0; i < N_META; i++)
        if (values[i]) {
            h = clf_hash_fnv1a64(h, meta_keys[i], strlen(meta_keys[i]) + 1);
            h = clf_hash_fnv1a64(h, values[i], strlen(values[i]) + 1);
        }
    return h;
}

clf_status clf_trainer_save(clf_trainer *t, const char *path, const char *config_yaml)
{
    clf_status st = CLF_OK;
    /* what the loader would refuse is not written */
    const long long state[N_COUNTS] = {t->state.step, t->state.micro, t->state.epoch,
                                       t->state.batch};
    for (int i = 0; i < N_COUNTS; i++)
        if (state[i] < 0 || state[i] > state_counts[i].max)
            return clf_error(CLF_ERR_INPUT,
                             "%s: not saved: the training state's %s is %lld, outside [0, %lld]",
                             path, state_counts[i].key, state[i], state_counts[i].max);
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
    char counts[N_COUNTS][32], seed[32], hash[32], meta_hash[32], scale[3][32];
    for (int i = 0; i < N_COUNTS; i++)
        snprintf(counts[i], sizeof counts[i], "%lld", state[i]);
    const int f16 = t->tc.precision == CLF_PRECISION_F16;
    snprintf(scale[0], sizeof scale[0], "%.17g", t->scale);
    snprintf(scale[1], sizeof scale[1], "%lld", t->good);
    snprintf(scale[2], sizeof scale[2], "%lld", t->skipped);
    snprintf(hash, sizeof hash, "%016" PRIx64, h);
    snprintf(seed, sizeof seed, "%lld", t->tc.seed);
    const char *values[N_META] = {CHECKPOINT_FORMAT,
                                  counts[0],
                                  counts[1],
                                  counts[2],
                                  counts[3],
                                  seed,
                                  clf_optimizer_name(t->tc.optimizer),
                                  hash,
                                  config_yaml ? config_yaml : "",
                                  f16 ? scale[0] : NULL,
                                  f16 ? scale[1] : NULL,
                                  f16 ? scale[2] : NULL};
    const char *meta[2 * (N_META + 1)];
    int n_meta = 0;
    for (int i = 0; i < N_META; i++)
        if (values[i])
            meta[2 * n_meta] = meta_keys[i], meta[2 * n_meta + 1] = values[i], n_meta++;
    snprintf(meta_hash, sizeof meta_hash, "%016" PRIx64, hash_meta(values));
    meta[2 * n_meta] = META_HASH_KEY;
    meta[2 * n_meta + 1] = meta_hash;
    st = clf_safetensors_write(path, tensors, nt, meta, n_meta + 1);
fail:
    for (int i = 0; i < nt; i++)
        free(tensors[i].data);
    free(tensors);
    return st;
}

/* v as an error message shows it: at most 40 bytes, anything but printable ASCII as '?'. */
static const char *shown(const char *v, char *buf, size_t size)
{
    size_t n = 0;
    for (; v[n] && n + 4 < size && n < 40; n++)
        buf[n] = v[n] >= 0x20 && v[n] < 0x7f ? v[n] : '?';
    snprintf(buf + n, size - n, "%s", v[n] ? "..." : "");
    return buf;
}

/* The count state_counts[i] of the metadata: decimal digits alone (no sign, space or
 * anything after them), at most its max. */
static clf_status meta_count(const clf_safetensors *f, int i, long long *out)
{
    const char *key = state_counts[i].key, *v = clf_safetensors_meta(f, key), *p = v;
    const long long max = state_counts[i].max;
    if (!v || !*v)
        return clf_error(CLF_ERR_INPUT, "%s: checkpoint metadata '%s' is missing",
                         clf_safetensors_path(f), key);
    long long x = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        const int d = *p - '0';
        if (x > (max - d) / 10)
            break;
        x = 10 * x + d;
    }
    if (*p) {
        char buf[48];
        return clf_error(CLF_ERR_INPUT,
                         "%s: checkpoint metadata '%s' is '%s', not an integer in [0, %lld]",
                         clf_safetensors_path(f), key, shown(v, buf, sizeof buf), max);
    }
    *out = x;
    return CLF_OK;
}

/* precision f16's loss scale from the metadata, where the checkpoint has it (else *present
 * 0): the scale a finite number > 0, the two counts as meta_count reads them. */
static clf_status meta_loss_scale(const clf_safetensors *f, int *present, double *scale,
                                  long long counts[N_SCALE_COUNTS])
{
    const char *v = clf_safetensors_meta(f, meta_keys[META_LOSS_SCALE]);
    *present = v != NULL;
    if (!v)
        return CLF_OK;
    char *end = NULL;
    *scale = strtod(v, &end);
    if (!*v || *end || !isfinite(*scale) || !(*scale > 0.0)) {
        char buf[48];
        return clf_error(CLF_ERR_INPUT,
                         "%s: checkpoint metadata 'loss_scale' is '%s', not a finite number > 0",
                         clf_safetensors_path(f), shown(v, buf, sizeof buf));
    }
    clf_status st = CLF_OK;
    for (int i = 0; i < N_SCALE_COUNTS && st == CLF_OK; i++)
        st = meta_count(f, N_COUNTS + i, &counts[i]);
    return st;
}

/* The metadata against its META_HASH_KEY (absent: a checkpoint older than the key, not
 * checked). */
static clf_status check_meta_hash(const clf_safetensors *f)
{
    const char *want = clf_safetensors_meta(f, META_HASH_KEY);
    const char *path = clf_safetensors_path(f);
    if (!want)
        return CLF_OK;
    const char *values[N_META];
    for (int i = 0; i < N_META; i++)
        values[i] = clf_safetensors_meta(f, meta_keys[i]);
    if (!values[META_DATA_HASH])
        return clf_error(CLF_ERR_INPUT, "%s: damaged checkpoint: it has %s but no %s", path,
                         META_HASH_KEY, HASH_KEY);
    char got[32], buf[48];
    snprintf(got, sizeof got, "%016" PRIx64, hash_meta(values));
    if (strcmp(got, want) != 0)
        return clf_error(CLF_ERR_INPUT,
                         "%s: damaged checkpoint: its metadata hashes to %s, its %s says %s", path,
                         got, META_HASH_KEY, shown(want, buf, sizeof buf));
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
    char got[32], buf[48];
    snprintf(got, sizeof got, "%016" PRIx64, h);
    if (strcmp(got, want) != 0)
        return clf_error(CLF_ERR_INPUT,
                         "%s: damaged checkpoint: its data hashes to %s, its metadata %s says %s",
                         path, got, HASH_KEY, shown(want, buf, sizeof buf));
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
        char buf[48];
        st = clf_error(CLF_ERR_INPUT,
                       "%s: not a clformer training checkpoint (metadata format is '%s', "
                       "expected '%s')",
                       path, fmt ? shown(fmt, buf, sizeof buf) : "absent", CHECKPOINT_FORMAT);
        goto fail;
    }
    /* the metadata (cheap) first, then the data; nothing is restored before both pass */
    long long counts[N_COUNTS], scale_counts[N_SCALE_COUNTS];
    double scale = 1.0;
    int has_scale = 0;
    if ((st = check_meta_hash(f)) != CLF_OK)
        goto fail;
    for (int i = 0; i < N_COUNTS; i++)
        if ((st = meta_count(f, i, &counts[i])) != CLF_OK)
            goto fail;
    if ((st = meta_loss_scale(f, &has_scale, &scale, scale_counts)) != CLF_OK)
        goto fail;
    if ((st = check_hash(t, f)) != CLF_OK)
        goto fail;
    const clf_train_state s = {
        .step = counts[0], .micro = counts[1], .epoch = (int)counts[2], .batch = (int)counts[3]};
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
    if (has_scale && t->tc.precision == CLF_PRECISION_F16) /* else the run's own start */
        t->scale = scale, t->good = scale_counts[0], t->skipped = scale_counts[1];
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
