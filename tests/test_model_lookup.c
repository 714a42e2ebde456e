/* The model's lookups that every step graph makes (graph/model.c): a weight's index by
 * name (a hash table over the weight names) and the int8 twin of a weight value (a binary
 * search over the GEMM matrices by place). Each is checked against a plain scan of the
 * weights, the way both were found before the tables, on small models: untied and tied,
 * with and without attention biases, deep enough that names collide in the table. An
 * internal suite (CLF_INTERNAL_SUITES): it reads clf_model's fields. */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "clformer/config.h"
#include "clformer/hash.h"
#include "clformer/model.h"
#include "clformer/weights.h"
#include "graph/graph_private.h"
#include "io/weight_names.h"
#include "testutil.h"

/* The models of the loop tests: (layers, tie_embeddings, attention_bias). */
static const clf_test_variant variants[] = {
    {2, "none", 1}, {6, "none", 0}, {3, "decoder", 1}, {6, "all", 1}};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

/* The model of variants[v]: `layers` layers per stack with tie_embeddings `tie` and
 * attention_bias `bias` (shared vocabulary, so that tie all is allowed); returns sm->m. */
static clf_model *small_model(int v, clf_test_model *sm)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "model:\n  src_vocab: 11\n  tgt_vocab: 11\n  max_len: 8\n  d_model: 8\n"
             "  layers: %d\n  heads: 2\n  d_ff: 16\n  norm: pre\n  dropout: 0.0\n"
             "  pad_id: 1\n  tie_embeddings: %s\n  attention_bias: %s\n",
             variants[v].layers, variants[v].tie, variants[v].bias ? "true" : "false");
    CLF_ASSERT_OK(clf_config_parse_string(yaml, "small.yaml", &sm->cfg));
    CLF_ASSERT_OK(clf_weights_init(&sm->cfg.model, 1, &sm->w));
    clf_test_open_backend("cpu", &sm->api, &sm->be);
    CLF_ASSERT_OK(clf_model_create(&sm->cfg.model, sm->w, sm->api, sm->be, &sm->m));
    return sm->m;
}

/* The index of name by scanning the weights in order, as clf_model_spec_index did. */
static int scan_index(const clf_model *m, const char *name)
{
    for (int i = 0; i < m->n_weights; i++)
        if (strcmp(m->specs[i].name, name) == 0)
            return i;
    return -1;
}

/* Every weight name gives its index; names that are no weight give -1, among them the
 * prefixes, extensions and near misses of real names; and some names sit away from their
 * hash's first slot, so the probing past a collision is what found them. */
START_TEST(test_spec_index_every_name)
{
    clf_test_model sm;
    clf_model *m = small_model(_i, &sm);
    ck_assert_int_gt(m->n_weights, 0);
    ck_assert_uint_ge(m->name_mask + 1, 2 * (size_t)m->n_weights);
    int displaced = 0;
    for (int i = 0; i < m->n_weights; i++) {
        const char *name = m->specs[i].name;
        ck_assert_msg(clf_model_spec_index(m, name) == i, "'%s': %d, want %d", name,
                      clf_model_spec_index(m, name), i);
        const size_t home = clf_hash_fnv1a64(CLF_FNV1A64_OFFSET, name, strlen(name)) & m->name_mask;
        displaced += m->name_slot[home] != i;
        char other[CLF_TENSOR_NAME_MAX + 2];
        const size_t n = strlen(name);
        snprintf(other, sizeof other, "%s.", name); /* extension */
        ck_assert_int_eq(clf_model_spec_index(m, other), scan_index(m, other));
        memcpy(other, name, n - 1); /* prefix */
        other[n - 1] = '\0';
        ck_assert_int_eq(clf_model_spec_index(m, other), scan_index(m, other));
        memcpy(other, name, n + 1); /* last character changed */
        other[n - 1] = other[n - 1] == 'x' ? 'y' : 'x';
        ck_assert_int_eq(clf_model_spec_index(m, other), scan_index(m, other));
    }
    ck_assert_msg(displaced > 0, "no name collided: the probing went untested");
    const char *absent[] = {"", "decoder", "decoder.layers.99.self_attention_block.w_q.weight",
                            "encoder.layers.0.self_attention_block.w_q.weight "};
    for (size_t k = 0; k < sizeof absent / sizeof absent[0]; k++)
        ck_assert_int_eq(clf_model_spec_index(m, absent[k]), -1);
    /* a tied name is no weight of its own: the builder asks for the table it is tied to */
    ck_assert_int_eq(clf_model_spec_index(m, CLF_WN_PROJ_WEIGHT),
                     strcmp(variants[_i].tie, "none") == 0 ? scan_index(m, CLF_WN_PROJ_WEIGHT)
                                                           : -1);
    if (strcmp(variants[_i].tie, "none") != 0)
        ck_assert_int_eq(scan_index(m, CLF_WN_PROJ_WEIGHT), -1);
    clf_test_model_close(&sm);
}
END_TEST

/* The int8 twin of the value at w, bytes long, by scanning the weights in order, as
 * clf_model_lowp_twin did: 0 when no GEMM matrix starts at w. */
static int scan_twin(const clf_model *m, clf_ptr w, size_t bytes, clf_lowp_twin *t)
{
    memset(t, 0, sizeof *t);
    const int c = clf_model_chunk_holding(m, w.buf);
    if (c < 0)
        return 0;
    for (int i = 0; i < m->n_weights; i++)
        if (m->wdev[i].buf == w.buf && m->wdev[i].off == w.off && clf_model_is_gemm_matrix(m, i)) {
            t->field = offsetof(clf_gemm_args, b_i8);
            t->w = (clf_ptr){m->lowp_chunks[c], w.off / 4};
            t->w_bytes = bytes / 4;
            t->scale = (clf_ptr){m->lowp_chunks[c], m->lowp_scale_off[c] + 8 * m->lowp_row[i]};
            t->scale_bytes = 8 * (bytes / sizeof(float) / (size_t)m->specs[i].shape[1]);
            return 1;
        }
    return 0;
}

static void assert_same_twin(const clf_model *m, clf_ptr w, size_t bytes, const char *what)
{
    clf_lowp_twin got, want;
    const int g = clf_model_lowp_twin(m, w, bytes, &got), e = scan_twin(m, w, bytes, &want);
    ck_assert_msg(g == e, "%s at %zu: twin %d, the scan finds %d", what, w.off, g, e);
    ck_assert_msg(memcmp(&got, &want, sizeof got) == 0, "%s at %zu: another twin than the scan's",
                  what, w.off);
}

/* With int8 weights, the twin of every weight value (alone and as the packed [Wq;Wk;Wv]
 * and [Wk;Wv] spans the builder makes), and of places inside and between weights, is the
 * one the scan finds; every GEMM matrix has one. */
START_TEST(test_int8_twin_every_weight)
{
    clf_test_model sm;
    clf_model *m = small_model(_i, &sm);
    CLF_ASSERT_OK(clf_model_set_weight_type(m, CLF_WEIGHT_INT8));
    int twins = 0, matrices = 0;
    for (int i = 0; i < m->n_weights; i++) {
        const char *name = m->specs[i].name;
        const size_t bytes = (size_t)clf_weight_spec_numel(&m->specs[i]) * sizeof(float);
        clf_lowp_twin t;
        matrices += clf_model_is_gemm_matrix(m, i);
        twins += clf_model_lowp_twin(m, m->wdev[i], bytes, &t);
        for (size_t count = 1; count <= 3; count++)
            assert_same_twin(m, m->wdev[i], count * bytes, name);
        assert_same_twin(m, (clf_ptr){m->wdev[i].buf, m->wdev[i].off + 4}, bytes - 4, name);
        assert_same_twin(m, (clf_ptr){m->wdev[i].buf, m->wdev[i].off + bytes}, 4, name);
    }
    ck_assert_int_gt(matrices, 0);
    ck_assert_int_eq(twins, matrices);
    /* a buffer that holds no weights (here the PE table) has no twin */
    clf_lowp_twin t;
    ck_assert_int_eq(clf_model_lowp_twin(m, (clf_ptr){m->pe, 0}, 4, &t), 0);
    /* back to F32 and int8 again: the tables are rebuilt, not kept stale */
    CLF_ASSERT_OK(clf_model_set_weight_type(m, CLF_WEIGHT_F32));
    ck_assert_int_eq(clf_model_lowp_twin(m, m->wdev[0], 4, &t), 0);
    CLF_ASSERT_OK(clf_model_set_weight_type(m, CLF_WEIGHT_INT8));
    for (int i = 0; i < m->n_weights; i++)
        assert_same_twin(m, m->wdev[i], (size_t)clf_weight_spec_numel(&m->specs[i]) * sizeof(float),
                         "again");
    clf_test_model_close(&sm);
}
END_TEST

CLF_TEST_SUITE_MAIN("model_lookup",
                    CLF_TCASE("lookups", 0, {test_spec_index_every_name, N_VARIANTS},
                              {test_int8_twin_every_weight, N_VARIANTS}))
