/* clf_model_release_f32: with int8 weights the F32 matrices go back to the system, and
 * nothing reads them afterwards. The proof is by poison: after the release every released
 * F32 matrix is overwritten with NaN, and the logits of a forward pass and the tokens and
 * log-probabilities of greedy and beam decoding (the KV-cache step graphs) must come out
 * bit for bit as before it; the embedding tables, which the embedding op reads, must be
 * untouched. On a model of a few MiB the process's resident memory must drop by what the
 * backend says it gave back. Also clf_model_create_consuming, which keeps the loading
 * from holding the weights twice. An internal suite (CLF_INTERNAL_SUITES): it reads clf_model's
 * fields to find the released bytes. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/config.h"
#include "clformer/decode.h"
#include "clformer/model.h"
#include "clformer/ops.h"
#include "clformer/weights.h"
#include "graph/graph_private.h"
#include "io/weight_names.h"
#include "testutil.h"

/* (layers, tie_embeddings, attention_bias), as in test_model_lookup */
static const clf_test_variant variants[] = {
    {2, "none", 1}, {3, "none", 0}, {2, "decoder", 1}, {3, "all", 1}};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

#define B 2
#define S 5
#define T 4

static void make_model(int d, int d_ff, int vocab, int layers, const char *tie, int bias,
                       clf_config *cfg, clf_weights **w, const clf_backend_api **api,
                       clf_backend **be, clf_model **m)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "model:\n  src_vocab: %d\n  tgt_vocab: %d\n  max_len: 16\n  d_model: %d\n"
             "  layers: %d\n  heads: 4\n  d_ff: %d\n  norm: pre\n  dropout: 0.0\n"
             "  pad_id: 1\n  tie_embeddings: %s\n  attention_bias: %s\n",
             vocab, vocab, d, layers, d_ff, tie, bias ? "true" : "false");
    CLF_ASSERT_OK(clf_config_parse_string(yaml, "release.yaml", cfg));
    CLF_ASSERT_OK(clf_weights_init(&cfg->model, 7, w));
    clf_test_open_backend("cpu", api, be);
    CLF_ASSERT_OK(clf_model_create(&cfg->model, *w, *api, *be, m));
}

/* 1 for the weights clf_model_release_f32 gives back: 2-D, no embedding table */
static int released(const clf_model *m, int i)
{
    return m->specs[i].ndim == 2 &&
           !(clf_weight_name_kinds(m->specs[i].name) & CLF_WK_EMBEDDING_TABLE);
}

typedef struct outputs {
    float logits[B * T * 40];
    int32_t tokens[2][B][8];
    int len[2][B];
    float logprob[2][B];
} outputs;

static void run(clf_model *m, outputs *o)
{
    memset(o, 0, sizeof *o);
    int32_t src[B * S] = {2, 5, 9, 14, 3, 2, 30, 7, 3, 1};
    int32_t tgt[B * T] = {2, 6, 11, 20, 2, 33, 8, 4};
    clf_forward_io io = {
        .batch = B, .src_len = S, .tgt_len = T, .src = src, .tgt = tgt, .logits = o->logits};
    CLF_ASSERT_OK(clf_model_forward(m, &io));
    for (int k = 0; k < 2; k++) {
        clf_decode_opts d;
        clf_decode_opts_default(&m->cfg, &d);
        d.beam = k ? 4 : 1;
        d.max_len = 8;
        clf_decode_result r;
        CLF_ASSERT_OK(clf_decode(m, src, B, S, &d, &r));
        for (int b = 0; b < B; b++) {
            const clf_hypothesis *h = &r.hyps[b * r.n_best];
            o->len[k][b] = h->len;
            o->logprob[k][b] = h->logprob;
            memcpy(o->tokens[k][b], h->tokens, sizeof(int32_t) * (size_t)h->len);
        }
        clf_decode_result_free(&r);
    }
}

/* After the release, with every released matrix poisoned with NaN, the forward pass and
 * decoding give the same bits; the tables are as loaded; another weight type and training
 * are refused with one line. */
START_TEST(test_release_reads_no_f32_matrix)
{
    clf_config cfg;
    clf_weights *w;
    const clf_backend_api *api;
    clf_backend *be;
    clf_model *m;
    make_model(32, 64, 40, variants[_i].layers, variants[_i].tie, variants[_i].bias, &cfg, &w, &api,
               &be, &m);
    /* F16 and F32 keep their F32 matrices: products of 8+ rows read them */
    ck_assert_int_eq(clf_model_release_f32(m, NULL), CLF_ERR_INPUT);
    CLF_ASSERT_OK(clf_model_set_weight_type(m, CLF_WEIGHT_F16));
    ck_assert_int_eq(clf_model_release_f32(m, NULL), CLF_ERR_INPUT);
    CLF_ASSERT_OK(clf_model_set_weight_type(m, CLF_WEIGHT_INT8));
    static outputs before, after;
    run(m, &before);
    clf_model_memory mem0, mem1;
    clf_model_memory_usage(m, &mem0);
    size_t freed = 0;
    CLF_ASSERT_OK(clf_model_release_f32(m, &freed));
    clf_model_memory_usage(m, &mem1);
    ck_assert_uint_eq(mem0.weight_bytes - mem1.weight_bytes, freed);

    int poisoned = 0, tables = 0;
    for (int i = 0; i < m->n_weights; i++) {
        const size_t n = (size_t)clf_weight_spec_numel(&m->specs[i]);
        float *x = malloc(n * sizeof *x);
        if (released(m, i)) {
            for (size_t e = 0; e < n; e++)
                x[e] = NAN;
            CLF_ASSERT_OK(clf_op_upload(api, be, m->wdev[i], x, n * sizeof *x));
            poisoned++;
        } else if (m->specs[i].ndim == 2) { /* a table: still the loaded values */
            CLF_ASSERT_OK(clf_op_download(api, be, x, m->wdev[i], n * sizeof *x));
            ck_assert_msg(memcmp(x, w->data[i], n * sizeof *x) == 0, "%s was changed",
                          m->specs[i].name);
            tables++;
        }
        free(x);
    }
    ck_assert_int_gt(poisoned, 6 * variants[_i].layers);
    ck_assert_int_ge(tables, 1);
    run(m, &after);
    ck_assert_msg(memcmp(&before, &after, sizeof before) == 0,
                  "%s: the outputs changed when the released F32 matrices did", variants[_i].tie);
    for (size_t e = 0; e < sizeof before.logits / sizeof *before.logits; e++)
        ck_assert(isfinite(after.logits[e]));

    ck_assert_int_eq(clf_model_set_weight_type(m, CLF_WEIGHT_F32), CLF_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "given back"));
    ck_assert_ptr_null(strchr(clf_last_error(), '\n'));
    CLF_ASSERT_OK(clf_model_set_weight_type(m, CLF_WEIGHT_INT8)); /* what it has: no change */
    ck_assert_int_eq(clf_model_enable_grads(m), CLF_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "training"));
    clf_model_free(m);
    api->close(be);
    clf_weights_free(w);
}
END_TEST

static size_t resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%lu %lu", &size, &resident), 2);
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* A model whose matrices take about 14 MiB: the CPU backend gives nearly all of it back (only
 * the pages shared with a table or a bias stay), and the process's resident memory drops
 * by as much. */
START_TEST(test_release_gives_memory_back)
{
    clf_config cfg;
    clf_weights *w;
    const clf_backend_api *api;
    clf_backend *be;
    clf_model *m;
    make_model(256, 1024, 64, 2, "none", 1, &cfg, &w, &api, &be, &m);
    size_t matrices = 0;
    for (int i = 0; i < m->n_weights; i++)
        if (released(m, i))
            matrices += (size_t)clf_weight_spec_numel(&m->specs[i]) * sizeof(float);
    ck_assert_uint_gt(matrices, (size_t)12 << 20);
    clf_weights_free(w); /* so that the host's copy cannot hide the drop */
    CLF_ASSERT_OK(clf_model_set_weight_type(m, CLF_WEIGHT_INT8));
    const size_t rss0 = resident_bytes();
    size_t freed = 0;
    CLF_ASSERT_OK(clf_model_release_f32(m, &freed));
    const size_t rss1 = resident_bytes();
    fprintf(stderr, "  matrices %.1f MiB, given back %.1f MiB, resident %.1f -> %.1f MiB\n",
            matrices / 1048576.0, freed / 1048576.0, rss0 / 1048576.0, rss1 / 1048576.0);
    ck_assert_uint_le(freed, matrices);
    ck_assert_uint_ge(freed, matrices - matrices / 50);
    ck_assert_msg(rss0 > rss1 && rss0 - rss1 >= freed - freed / 10,
                  "resident memory fell by %zu bytes, %zu given back",
                  rss0 > rss1 ? rss0 - rss1 : 0, freed);
    clf_model_free(m);
    api->close(be);
}
END_TEST

/* clf_model_create_consuming frees each host tensor and leaves a model that computes what
 * clf_model_create's does, bit for bit. */
START_TEST(test_create_consuming)
{
    clf_config cfg;
    clf_weights *w, *w2;
    const clf_backend_api *api;
    clf_backend *be;
    clf_model *m, *m2;
    make_model(32, 64, 40, 2, "decoder", 1, &cfg, &w, &api, &be, &m);
    CLF_ASSERT_OK(clf_weights_init(&cfg.model, 7, &w2)); /* the same seed: the same weights */
    CLF_ASSERT_OK(clf_model_create_consuming(&cfg.model, w2, api, be, &m2));
    for (int i = 0; i < w2->count; i++)
        ck_assert_ptr_null(w2->data[i]);
    ck_assert_int_eq(w2->stored_type, CLF_WEIGHT_F32);
    static outputs a, b;
    run(m, &a);
    run(m2, &b);
    ck_assert(memcmp(&a, &b, sizeof a) == 0);
    clf_weights_free(w2);
    clf_model_free(m2);
    clf_model_free(m);
    api->close(be);
    clf_weights_free(w);
}
END_TEST

/* clf_op_discard: bounds checked by the core like a download (one line naming the op); the
 * CPU backend gives back the whole pages inside the span and keeps the bytes around it. */
START_TEST(test_discard)
{
    const clf_backend_api *api;
    clf_backend *be;
    clf_test_open_backend("cpu", &api, &be);
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), n = 8 * page;
    clf_buffer *buf;
    CLF_ASSERT_OK(api->alloc(be, n, &buf));
    unsigned char *x = malloc(n), *y = malloc(n);
    memset(x, 0xab, n);
    CLF_ASSERT_OK(clf_op_upload(api, be, (clf_ptr){buf, 0}, x, n));
    size_t freed = 1;
    ck_assert_int_eq(clf_op_discard(api, be, (clf_ptr){buf, page}, n, &freed), CLF_ERR_INPUT);
    ck_assert_uint_eq(freed, 0);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "discard"));
    ck_assert_ptr_null(strchr(clf_last_error(), '\n'));
    /* from 100 bytes into the buffer to 100 bytes before its end */
    CLF_ASSERT_OK(clf_op_discard(api, be, (clf_ptr){buf, 100}, n - 200, &freed));
    ck_assert_uint_le(freed, n - 200);
    ck_assert_uint_ge(freed, n - 3 * page); /* at most a partial page lost at each end */
    ck_assert_uint_eq(freed % page, 0);
    CLF_ASSERT_OK(clf_op_download(api, be, y, (clf_ptr){buf, 0}, n));
    for (size_t e = 0; e < 100; e++) /* the ends stay */
        ck_assert(y[e] == 0xab && y[n - 1 - e] == 0xab);
    CLF_ASSERT_OK(clf_op_discard(api, be, (clf_ptr){buf, 0}, 0, &freed));
    ck_assert_uint_eq(freed, 0);
    free(x);
    free(y);
    api->free(be, buf);
    api->close(be);
}
END_TEST

CLF_TEST_SUITE_MAIN("model_release",
                    CLF_TCASE("release", 0, {test_release_reads_no_f32_matrix, N_VARIANTS},
                              {test_release_gives_memory_back}, {test_create_consuming},
                              {test_discard}))
