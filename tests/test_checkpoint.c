/* Checkpoints' metadata (clformer/train.h, core/src/train/checkpoint.c): the counts of the
 * training state are read within their ranges, the metadata hash (checkpoint_fnv1a64)
 * covers the metadata and through data_fnv1a64 the data, and a checkpoint written before
 * that hash still loads. The checkpoints here are a tiny model's, saved by the trainer and
 * rewritten with one metadata entry changed. */
#include <check.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/config.h"
#include "clformer/hash.h"
#include "clformer/model.h"
#include "clformer/tensor.h"
#include "clformer/train.h"
#include "clformer/weights.h"
#include "testutil.h"

static const char tiny_yaml[] = "model:\n"
                                "  src_vocab: 8\n"
                                "  tgt_vocab: 8\n"
                                "  max_len: 8\n"
                                "  d_model: 8\n"
                                "  layers: 1\n"
                                "  heads: 2\n"
                                "  d_ff: 8\n"
                                "train:\n"
                                "  data: {train: unused.tsv}\n"
                                "  accumulate: 2\n";

/* The metadata entries the trainer writes, in the order checkpoint_fnv1a64 hashes them
 * (all but checkpoint_fnv1a64 itself), as README's "Limits and failure behaviour" states. */
static const char *const hashed_keys[] = {"format", "step",      "micro",        "epoch", "batch",
                                          "seed",   "optimizer", "data_fnv1a64", "config"};
#define N_HASHED ((int)(sizeof hashed_keys / sizeof hashed_keys[0]))

typedef struct fixture {
    clf_test_model tr;
    char saved[512]; /* the trainer's checkpoint at step 20 */
} fixture;

static fixture fx;

static void setup(void)
{
    clf_test_make_tmpdir("clf-checkpoint");
    CLF_ASSERT_OK(clf_config_parse_string(tiny_yaml, "tiny.yaml", &fx.tr.cfg));
    CLF_ASSERT_OK(clf_weights_init(&fx.tr.cfg.model, 1, &fx.tr.w));
    clf_test_open_backend("cpu", &fx.tr.api, &fx.tr.be);
    clf_test_trainer_start(&fx.tr, 0);
    *clf_trainer_state(fx.tr.t) =
        (clf_train_state){.step = 20, .micro = 40, .epoch = 1, .batch = 3};
    snprintf(fx.saved, sizeof fx.saved, "%s", clf_test_tmp_path("saved.safetensors"));
    CLF_ASSERT_OK(clf_trainer_save(fx.tr.t, fx.saved, "# config\n"));
}

static void teardown(void)
{
    clf_test_trainer_stop(&fx.tr);
    fx.tr.api->close(fx.tr.be);
    clf_weights_free(fx.tr.w);
    clf_test_remove_tmpdir();
}

/* The rule of checkpoint_fnv1a64, written out again here: each present entry's key, a NUL,
 * its value, a NUL, in hashed_keys' order. */
static void meta_hash(const char *const *values, char out[32])
{
    uint64_t h = CLF_FNV1A64_OFFSET;
    for (int i = 0; i < N_HASHED; i++)
        if (values[i]) {
            h = clf_hash_fnv1a64(h, hashed_keys[i], strlen(hashed_keys[i]) + 1);
            h = clf_hash_fnv1a64(h, values[i], strlen(values[i]) + 1);
        }
    snprintf(out, 32, "%016" PRIx64, h);
}

enum { KEEP_HASH, REHASH, OLD_FORMAT };

/* fx.saved rewritten to a new file with metadata key set to value (NULL: removed), the
 * tensors as they are; its checkpoint_fnv1a64 kept (KEEP_HASH), made again for the new
 * metadata (REHASH) or left out, as in a checkpoint older than it (OLD_FORMAT). */
static const char *rewrite(const char *key, const char *value, int hash)
{
    static int n;
    char name[64];
    snprintf(name, sizeof name, "rewritten-%d.safetensors", n++);
    const char *path = clf_test_tmp_path(name);
    clf_safetensors *f;
    CLF_ASSERT_OK(clf_safetensors_open(fx.saved, &f));
    const int nt = clf_safetensors_count(f);
    clf_tensor *ts = malloc((size_t)nt * sizeof *ts);
    ck_assert_ptr_nonnull(ts);
    for (int i = 0; i < nt; i++)
        ts[i] = *clf_safetensors_at(f, i);
    const char *values[N_HASHED], *meta[2 * (N_HASHED + 1)];
    int nm = 0;
    for (int i = 0; i < N_HASHED; i++) {
        values[i] = clf_safetensors_meta(f, hashed_keys[i]);
        ck_assert_ptr_nonnull(values[i]);
        if (strcmp(hashed_keys[i], key) == 0)
            values[i] = value;
        if (values[i])
            meta[2 * nm] = hashed_keys[i], meta[2 * nm++ + 1] = values[i];
    }
    char rehashed[32];
    meta_hash(values, rehashed);
    if (hash != OLD_FORMAT) {
        meta[2 * nm] = "checkpoint_fnv1a64";
        meta[2 * nm++ + 1] =
            hash == REHASH ? rehashed : clf_safetensors_meta(f, "checkpoint_fnv1a64");
    }
    CLF_ASSERT_OK(clf_safetensors_write(path, ts, nt, meta, nm));
    free(ts);
    clf_safetensors_close(f);
    return path;
}

/* A refused load: CLF_ERR_INPUT, one line naming the file and holding the parts given,
 * and the trainer's state as it was. */
static void assert_refused(const char *path, ...)
{
    clf_train_state *s = clf_trainer_state(fx.tr.t);
    *s = (clf_train_state){.step = 5, .micro = 6, .epoch = 7, .batch = 8};
    ck_assert_int_eq(clf_trainer_load(fx.tr.t, path), CLF_ERR_INPUT);
    const char *err = clf_last_error();
    ck_assert_msg(strchr(err, '\n') == NULL, "error is not one line: %s", err);
    ck_assert_msg(strstr(err, path) != NULL, "error \"%s\" does not name %s", err, path);
    va_list ap;
    va_start(ap, path);
    for (const char *part; (part = va_arg(ap, const char *)) != NULL;)
        ck_assert_msg(strstr(err, part) != NULL, "error \"%s\" lacks \"%s\"", err, part);
    va_end(ap);
    ck_assert(s->step == 5 && s->micro == 6 && s->epoch == 7 && s->batch == 8);
}

/* The trainer's own checkpoint carries the hash of the rule above, and loads. */
START_TEST(test_saved_checkpoint_hash_rule)
{
    clf_safetensors *f;
    CLF_ASSERT_OK(clf_safetensors_open(fx.saved, &f));
    const char *values[N_HASHED];
    for (int i = 0; i < N_HASHED; i++)
        values[i] = clf_safetensors_meta(f, hashed_keys[i]);
    char want[32];
    meta_hash(values, want);
    ck_assert_ptr_nonnull(clf_safetensors_meta(f, "checkpoint_fnv1a64"));
    ck_assert_str_eq(clf_safetensors_meta(f, "checkpoint_fnv1a64"), want);
    clf_safetensors_close(f);
    *clf_trainer_state(fx.tr.t) = (clf_train_state){0};
    CLF_ASSERT_OK(clf_trainer_load(fx.tr.t, fx.saved));
    clf_train_state *s = clf_trainer_state(fx.tr.t);
    ck_assert(s->step == 20 && s->micro == 40 && s->epoch == 1 && s->batch == 3);
}
END_TEST

/* Each count out of its range, negative, or not plain decimal digits: refused with the
 * file, the key, the value and the range, even with a metadata hash that matches. */
START_TEST(test_counts_out_of_range_refused)
{
    static const struct {
        const char *key, *value, *range;
    } bad[] = {
        {"micro", "9223372036854775807", "[0, 9007199254740991]"},
        {"epoch", "4294967296", "[0, 2147483646]"},
        {"step", "99999999999999999999", "[0, 9007199254740991]"},
        {"batch", "2147483648", "[0, 2147483646]"},
        {"batch", "2147483647", "[0, 2147483646]"},
        {"epoch", "2147483647", "[0, 2147483646]"},
        {"step", "9007199254740992", "[0, 9007199254740991]"},
        {"micro", "18446744073709551617", "[0, 9007199254740991]"},
        {"step", "-1", "[0, 9007199254740991]"},
        {"epoch", "-5", "[0, 2147483646]"},
        {"micro", "12abc", "[0, 9007199254740991]"},
        {"batch", " 3", "[0, 2147483646]"},
        {"step", "+3", "[0, 9007199254740991]"},
        {"epoch", "1.0", "[0, 2147483646]"},
        {"batch", "0x10", "[0, 2147483646]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char part[128];
        snprintf(part, sizeof part, "checkpoint metadata '%s' is '%s', not an integer in %s",
                 bad[i].key, bad[i].value, bad[i].range);
        assert_refused(rewrite(bad[i].key, bad[i].value, REHASH), part, NULL);
        /* an older checkpoint's counts are held to the same ranges */
        assert_refused(rewrite(bad[i].key, bad[i].value, OLD_FORMAT), part, NULL);
    }
    assert_refused(rewrite("step", NULL, REHASH), "checkpoint metadata 'step' is missing", NULL);
    /* a long value is shown cut, and as one line */
    assert_refused(rewrite("epoch", "1\n2222222222222222222222222222222222222222222222222", REHASH),
                   "'epoch' is '1?22222222222222222222222222222222222222...', not an integer",
                   NULL);
}
END_TEST

/* The largest count of each range loads. */
START_TEST(test_counts_at_their_limits_load)
{
    static const struct {
        const char *key, *value;
    } edge[] = {{"step", "9007199254740991"},
                {"micro", "9007199254740991"},
                {"epoch", "2147483646"},
                {"batch", "2147483646"},
                {"batch", "0"},
                {"step", "0020"}};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        CLF_ASSERT_OK(clf_trainer_load(fx.tr.t, rewrite(edge[i].key, edge[i].value, REHASH)));
        const clf_train_state *s = clf_trainer_state(fx.tr.t);
        const long long got[] = {s->step, s->micro, s->epoch, s->batch};
        const long long want = strtoll(edge[i].value, NULL, 10);
        int k = strcmp(edge[i].key, "step") == 0    ? 0
                : strcmp(edge[i].key, "micro") == 0 ? 1
                : strcmp(edge[i].key, "epoch") == 0 ? 2
                                                    : 3;
        ck_assert_msg(got[k] == want, "%s=%s loaded as %lld", edge[i].key, edge[i].value, got[k]);
    }
}
END_TEST

/* One digit of the metadata changed, the data as it was: refused by the metadata hash. */
START_TEST(test_changed_metadata_refused)
{
    assert_refused(rewrite("step", "30", KEEP_HASH), "damaged checkpoint", "its metadata hashes to",
                   "checkpoint_fnv1a64", NULL);
    assert_refused(rewrite("micro", "41", KEEP_HASH), "damaged checkpoint", NULL);
    assert_refused(rewrite("config", "# config!\n", KEEP_HASH), "damaged checkpoint", NULL);
    assert_refused(rewrite("optimizer", "adamw", KEEP_HASH), "damaged checkpoint", NULL);
    /* the data hash is what covers the data: without it the metadata hash is refused */
    assert_refused(rewrite("data_fnv1a64", NULL, REHASH), "damaged checkpoint",
                   "has checkpoint_fnv1a64 but no data_fnv1a64", NULL);
    /* a data hash changed with the metadata hash made again still fails on the data */
    assert_refused(rewrite("data_fnv1a64", "0123456789abcdef", REHASH), "damaged checkpoint",
                   "its data hashes to", NULL);
}
END_TEST

/* A checkpoint older than checkpoint_fnv1a64 (data_fnv1a64 only) still loads; its
 * metadata is unchecked beyond the counts' ranges, so a changed step is taken as it is. */
START_TEST(test_old_checkpoint_loads)
{
    CLF_ASSERT_OK(clf_trainer_load(fx.tr.t, rewrite("checkpoint_fnv1a64", NULL, OLD_FORMAT)));
    ck_assert_int_eq(clf_trainer_state(fx.tr.t)->step, 20);
    CLF_ASSERT_OK(clf_trainer_load(fx.tr.t, rewrite("step", "30", OLD_FORMAT)));
    ck_assert_int_eq(clf_trainer_state(fx.tr.t)->step, 30);
    ck_assert_int_eq(clf_trainer_state(fx.tr.t)->micro, 40);
}
END_TEST

/* A state the loader would refuse is not saved: every checkpoint written loads. */
START_TEST(test_save_refuses_state_out_of_range)
{
    const char *path = clf_test_tmp_path("out-of-range.safetensors");
    clf_train_state *s = clf_trainer_state(fx.tr.t);
    s->epoch = INT_MAX;
    ck_assert_int_eq(clf_trainer_save(fx.tr.t, path, NULL), CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "epoch is 2147483647, outside [0, 2147483646]"));
    s->epoch = 0;
    s->micro = -1;
    ck_assert_int_eq(clf_trainer_save(fx.tr.t, path, NULL), CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "micro is -1"));
    ck_assert_int_eq(clf_test_tmpdir_entries(), 1); /* saved.safetensors alone */
}
END_TEST

CLF_TEST_SUITE_MAIN("checkpoint",
                    CLF_TCASE_FIXTURE("checkpoint", 0, setup, teardown,
                                      {test_saved_checkpoint_hash_rule},
                                      {test_counts_out_of_range_refused},
                                      {test_counts_at_their_limits_load},
                                      {test_changed_metadata_refused}, {test_old_checkpoint_loads},
                                      {test_save_refuses_state_out_of_range}))
