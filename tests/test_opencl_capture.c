/* The OpenCL backend's positions read on the device (clf_attention_args.pos_add,
 * clf_embed_args.pos_add) and its capture and replay (clf_backend_api.capture_begin, ABI 10):
 *   - an op with pos_add = p gives the bits of the op with p added on the host (the same
 *     kernel), p clamped to pos_add_max;
 *   - a decoding step's ops (embed, q|k|v product, attention appending to the cache, output
 *     product, argmax, and a product of 8 rows, which CLBlast runs and the recording keeps
 *     as the call) recorded once and replayed at four positions give the bits the ops
 *     called one by one give, in both forms of recording (a command buffer where the device
 *     has cl_khr_command_buffer, the launch list everywhere);
 *   - what cannot be recorded is refused by name, and the core's checks of pos_add.
 * Without an OpenCL device the suite says why and exits 77. */
#include "opencl_testutil.h"

#include "clformer/ops.h"

#include <stdlib.h>

enum { B = 3, H = 2, D = 8, HD = H * D, L = 10, V = 24 };

/* ---- pos_add ---- */

static clf_buffer *pos_buffer(bk *k, int p)
{
    return up(k, &p, sizeof p);
}

/* A decoding step's self-attention at position 0 + pos: its query, key and value rows in qkv
 * [B, 3HD] (k and v appended to the cache, row new_pos), the cache [B, L, 2HD] (k|v side by
 * side), out [B, HD]; pos NULL: no pos_add. */
static clf_attention_args step_attention(clf_buffer *qkv, clf_buffer *cache, clf_buffer *out,
                                         clf_buffer *pos)
{
    return (clf_attention_args){.batch = B,
                                .heads = H,
                                .q_len = 1,
                                .kv_len = 1,
                                .head_dim = D,
                                .q = {qkv, 0},
                                .k = {cache, 0},
                                .v = {cache, 4 * HD},
                                .out = {out, 0},
                                .q_ld = 3 * HD,
                                .k_ld = 2 * HD,
                                .v_ld = 2 * HD,
                                .out_ld = HD,
                                .q_bstride = 3 * HD,
                                .kv_bstride = (size_t)L * 2 * HD,
                                .out_bstride = HD,
                                .scale = 0.35f,
                                .k_new = {qkv, 4 * HD},
                                .v_new = {qkv, 4 * 2 * HD},
                                .new_ld = 3 * HD,
                                .pos_add = {pos, 0},
                                .pos_add_max = pos ? L - 1 : 0};
}

START_TEST(attention_pos_add_equals_host_position)
{
    const int ps[] = {0, 4, L - 1, 50}; /* 50: clamped to pos_add_max = L - 1 */
    float *qkv = clf_test_frand((size_t)B * 3 * HD, 1, -1, 1);
    float *cache0 = clf_test_frand((size_t)B * L * 2 * HD, 2, -1, 1);
    for (size_t c = 0; c < sizeof ps / sizeof ps[0]; c++) {
        const int p = ps[c] < L - 1 ? ps[c] : L - 1;
        float got[2][B * HD], cache[2][B * L * 2 * HD];
        for (int way = 0; way < 2; way++) { /* 0: pos_add, 1: the positions on the host */
            clf_buffer *q = up(&ocl, qkv, sizeof(float) * B * 3 * HD),
                       *kv = up(&ocl, cache0, sizeof cache[0]),
                       *out = up(&ocl, NULL, sizeof got[0]), *pos = pos_buffer(&ocl, ps[c]);
            clf_attention_args a = step_attention(q, kv, out, way ? NULL : pos);
            a.causal = 1;
            if (way) /* the position on the host */
                a.kv_len += p, a.q_pos0 += p, a.new_pos += p;
            CLF_ASSERT_OK(clf_op_attention(ocl.api, ocl.be, &a));
            down(&ocl, got[way], out, sizeof got[0]);
            down(&ocl, cache[way], kv, sizeof cache[0]);
            clf_buffer *all[] = {q, kv, out, pos};
            free_all(&ocl, all, 4);
        }
        expect_same_bits(got[0], got[1], B * HD, "attention with pos_add", "host positions");
        expect_same_bits(cache[0], cache[1], B * L * 2 * HD, "the appended cache",
                         "host positions");
    }
    free(qkv);
    free(cache0);
}
END_TEST

START_TEST(embed_pos_add_equals_host_position)
{
    enum { ROWS = 3, DIM = 16, PE = 20, POS0 = 2, MAX = PE - POS0 - 1 };
    const int ps[] = {0, 5, MAX, 99};
    const int32_t ids[ROWS] = {3, 0, V - 1};
    float *table = clf_test_frand((size_t)V * DIM, 3, -1, 1),
          *pe = clf_test_frand(PE * DIM, 4, -1, 1);
    for (size_t c = 0; c < sizeof ps / sizeof ps[0]; c++) {
        const int p = ps[c] < MAX ? ps[c] : MAX;
        float got[2][ROWS * DIM];
        for (int way = 0; way < 2; way++) {
            clf_buffer *o = up(&ocl, NULL, sizeof got[0]), *i = up(&ocl, ids, sizeof ids),
                       *t = up(&ocl, table, sizeof(float) * V * DIM),
                       *e = up(&ocl, pe, sizeof(float) * PE * DIM), *pos = pos_buffer(&ocl, ps[c]);
            clf_embed_args a = {.out = {o, 0},
                                .ids = {i, 0},
                                .table = {t, 0},
                                .pe = {e, 0},
                                .rows = ROWS,
                                .seq_len = 1,
                                .pos0 = POS0 + (way ? p : 0),
                                .dim = DIM,
                                .vocab = V,
                                .scale = 2.0f,
                                .pos_add = {way ? NULL : pos, 0},
                                .pos_add_max = way ? 0 : MAX};
            CLF_ASSERT_OK(clf_op_embed(ocl.api, ocl.be, &a));
            down(&ocl, got[way], o, sizeof got[0]);
            clf_buffer *all[] = {o, i, t, e, pos};
            free_all(&ocl, all, 5);
        }
        expect_same_bits(got[0], got[1], ROWS * DIM, "embed with pos_add", "host position");
    }
    free(table);
    free(pe);
}
END_TEST

/* ---- a decoding step, recorded and replayed ---- */

/* The buffers of a toy decoding step: ids [B] -> x [B, HD] (embed with PE at the position)
 * -> qkv [B, 3HD] -> attention over cache [B, L, 2HD] (appending) -> ctx [B, HD] -> y [B, V]
 * -> ids (argmax), the position copied from table[t] into pos first. */
typedef struct toy {
    clf_buffer *ids, *emb, *pe, *x, *wqkv, *qkv, *cache, *ctx, *wo, *y, *pos, *table, *big;
} toy;

static void toy_open(bk *k, toy *s)
{
    const int32_t ids[B] = {1, 7, 20}, table[L] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    float *emb = clf_test_frand((size_t)V * HD, 5, -1, 1), *pe = clf_test_frand(L * HD, 6, -1, 1),
          *wqkv = clf_test_frand(3 * HD * HD, 7, -0.5f, 0.5f),
          *wo = clf_test_frand((size_t)V * HD, 8, -0.5f, 0.5f);
    *s = (toy){.ids = up(k, ids, sizeof ids),
               .emb = up(k, emb, sizeof(float) * V * HD),
               .pe = up(k, pe, sizeof(float) * L * HD),
               .x = up(k, NULL, sizeof(float) * B * HD),
               .wqkv = up(k, wqkv, sizeof(float) * 3 * HD * HD),
               .qkv = up(k, NULL, sizeof(float) * B * 3 * HD),
               .cache = up(k, NULL, sizeof(float) * B * L * 2 * HD),
               .ctx = up(k, NULL, sizeof(float) * B * HD),
               .wo = up(k, wo, sizeof(float) * V * HD),
               .y = up(k, NULL, sizeof(float) * B * V),
               .pos = up(k, NULL, 4),
               .table = up(k, table, sizeof table),
               .big = up(k, NULL, sizeof(float) * 8 * V)};
    free(emb);
    free(pe);
    free(wqkv);
    free(wo);
}

static void toy_close(bk *k, toy *s)
{
    clf_buffer *all[] = {s->ids, s->emb, s->pe, s->x,   s->wqkv,  s->qkv, s->cache,
                         s->ctx, s->wo,  s->y,  s->pos, s->table, s->big};
    free_all(k, all, (int)(sizeof all / sizeof all[0]));
}

/* The step's ops (not the position's copy), through the core's checks. */
static clf_status toy_ops(bk *k, const toy *s)
{
    const clf_embed_args e = {.out = {s->x, 0},
                              .ids = {s->ids, 0},
                              .table = {s->emb, 0},
                              .pe = {s->pe, 0},
                              .rows = B,
                              .seq_len = 1,
                              .dim = HD,
                              .vocab = V,
                              .scale = 1.5f,
                              .pos_add = {s->pos, 0},
                              .pos_add_max = L - 1};
    const clf_gemm_args g1 = {.m = B,
                              .n = 3 * HD,
                              .k = HD,
                              .a = {s->x, 0},
                              .lda = HD,
                              .b = {s->wqkv, 0},
                              .ldb = HD,
                              .trans_b = 1,
                              .c = {s->qkv, 0},
                              .ldc = 3 * HD,
                              .alpha = 1.0f};
    const clf_attention_args a = step_attention(s->qkv, s->cache, s->ctx, s->pos);
    const clf_gemm_args g2 = {.m = B,
                              .n = V,
                              .k = HD,
                              .a = {s->ctx, 0},
                              .lda = HD,
                              .b = {s->wo, 0},
                              .ldb = HD,
                              .trans_b = 1,
                              .c = {s->y, 0},
                              .ldc = V,
                              .alpha = 1.0f};
    /* 8 rows of the cache (B * L rows of 2HD) times wo: CLBlast's */
    const clf_gemm_args g3 = {.m = 8,
                              .n = V,
                              .k = HD,
                              .a = {s->cache, 0},
                              .lda = 2 * HD,
                              .b = {s->wo, 0},
                              .ldb = HD,
                              .trans_b = 1,
                              .c = {s->big, 0},
                              .ldc = V,
                              .alpha = 1.0f,
                              .bias = {s->emb, 0}};
    clf_status st = clf_op_embed(k->api, k->be, &e);
    if (st == CLF_OK)
        st = clf_op_gemm(k->api, k->be, &g1);
    if (st == CLF_OK)
        st = clf_op_attention(k->api, k->be, &a);
    if (st == CLF_OK)
        st = clf_op_gemm(k->api, k->be, &g2);
    if (st == CLF_OK)
        st = clf_op_argmax(k->api, k->be, (clf_ptr){s->ids, 0}, (clf_ptr){s->y, 0}, B, V);
    if (st == CLF_OK)
        st = clf_op_gemm(k->api, k->be, &g3);
    return st;
}

static void toy_position(bk *k, const toy *s, int t)
{
    CLF_ASSERT_OK(
        clf_op_copy(k->api, k->be, (clf_ptr){s->pos, 0}, (clf_ptr){s->table, 4 * (size_t)t}, 4));
}

/* Four steps replayed (recorded at the first) against the same ops called one by one, on
 * a backend opened with CLF_OPENCL_CAPTURE=mode: the same bits in y, the ids and the cache. */
static void expect_replay_equals_ops(const char *mode)
{
    bk rec = {"opencl", ocl.api, NULL};
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE")};
    setenv("CLF_OPENCL_CAPTURE", mode, 1);
    CLF_ASSERT_OK(rec.api->open(&o, &rec.be));
    unsetenv("CLF_OPENCL_CAPTURE");
    ck_assert(rec.api->supports(rec.be, CLF_OP_CAPTURE));
    toy one, re;
    toy_open(&ocl, &one);
    toy_open(&rec, &re);
    clf_capture *c = NULL;
    for (int t = 0; t < 4; t++) {
        toy_position(&ocl, &one, t);
        CLF_ASSERT_OK(toy_ops(&ocl, &one));
        toy_position(&rec, &re, t);
        if (t == 0) {
            CLF_ASSERT_OK(clf_op_capture_begin(rec.api, rec.be));
            CLF_ASSERT_OK(toy_ops(&rec, &re));
            CLF_ASSERT_OK(clf_op_capture_end(rec.api, rec.be, &c));
            ck_assert_ptr_nonnull(c);
        }
        CLF_ASSERT_OK(clf_op_replay(rec.api, rec.be, c));
    }
    float y[2][B * V], cache[2][B * L * 2 * HD], big[2][8 * V];
    int32_t ids[2][B];
    down(&ocl, big[0], one.big, sizeof big[0]);
    down(&rec, big[1], re.big, sizeof big[1]);
    expect_same_bits(big[1], big[0], 8 * V, mode, "the 8-row product one by one");
    down(&ocl, y[0], one.y, sizeof y[0]);
    down(&rec, y[1], re.y, sizeof y[1]);
    down(&ocl, cache[0], one.cache, sizeof cache[0]);
    down(&rec, cache[1], re.cache, sizeof cache[1]);
    down(&ocl, ids[0], one.ids, sizeof ids[0]);
    down(&rec, ids[1], re.ids, sizeof ids[1]);
    expect_same_bits(y[1], y[0], B * V, mode, "the ops one by one");
    expect_same_bits(cache[1], cache[0], B * L * 2 * HD, mode, "the ops one by one");
    ck_assert_mem_eq(ids[1], ids[0], sizeof ids[0]);
    /* four positions of the cache were written: row 4 is still zero */
    for (int b = 0; b < B; b++)
        ck_assert(cache[1][((size_t)b * L + 3) * 2 * HD] != 0.0f &&
                  cache[1][((size_t)b * L + 4) * 2 * HD] == 0.0f);
    clf_op_capture_free(rec.api, rec.be, c);
    toy_close(&ocl, &one);
    toy_close(&rec, &re);
    rec.api->close(rec.be);
}

START_TEST(replay_equals_ops_list)
{
    expect_replay_equals_ops("list");
}
END_TEST

/* auto: a command buffer where the device has cl_khr_command_buffer (PoCL does), else the
 * list again */
START_TEST(replay_equals_ops_auto)
{
    expect_replay_equals_ops("auto");
}
END_TEST

/* ---- refusals ---- */

START_TEST(what_cannot_be_recorded_is_refused)
{
    toy s;
    toy_open(&ocl, &s);
    const clf_backend_api *api = ocl.api;
    float h[4] = {0};
    clf_capture *c = (clf_capture *)&s; /* never replayed: the checks come first */
    EXPECT_ERROR(clf_op_capture_end(api, ocl.be, &c), CLF_ERR_INPUT, "no capture is open");
    ck_assert_ptr_null(c);
    EXPECT_ERROR(clf_op_replay(api, ocl.be, NULL), CLF_ERR_INPUT, "no capture");
    CLF_ASSERT_OK(clf_op_capture_begin(api, ocl.be));
    EXPECT_ERROR(clf_op_capture_begin(api, ocl.be), CLF_ERR_INPUT, "already open");
    EXPECT_ERROR(clf_op_upload(api, ocl.be, (clf_ptr){s.x, 0}, h, sizeof h), CLF_ERR_UNSUPPORTED,
                 "upload", "cannot be recorded");
    EXPECT_ERROR(clf_op_copy(api, ocl.be, (clf_ptr){s.x, 0}, (clf_ptr){s.ctx, 0}, 16),
                 CLF_ERR_UNSUPPORTED, "copy", "cannot be recorded");
    EXPECT_ERROR(clf_op_fill(api, ocl.be, (clf_ptr){s.x, 0}, 1.0f, 4), CLF_ERR_UNSUPPORTED, "fill",
                 "cannot be recorded");
    EXPECT_ERROR(clf_op_capture_end(api, ocl.be, &c), CLF_ERR_UNSUPPORTED, "could not be recorded");
    ck_assert_ptr_null(c);
    /* a capture dropped (out NULL) says nothing; the backend runs ops again afterwards */
    CLF_ASSERT_OK(clf_op_capture_begin(api, ocl.be));
    CLF_ASSERT_OK(clf_op_capture_end(api, ocl.be, NULL));
    CLF_ASSERT_OK(clf_op_upload(api, ocl.be, (clf_ptr){s.x, 0}, h, sizeof h));
    /* replay while a capture is open */
    CLF_ASSERT_OK(clf_op_capture_begin(api, ocl.be));
    CLF_ASSERT_OK(toy_ops(&ocl, &s));
    CLF_ASSERT_OK(clf_op_capture_end(api, ocl.be, &c));
    CLF_ASSERT_OK(clf_op_capture_begin(api, ocl.be));
    EXPECT_ERROR(clf_op_replay(api, ocl.be, c), CLF_ERR_INPUT, "a capture is open");
    CLF_ASSERT_OK(clf_op_capture_end(api, ocl.be, NULL));
    clf_op_capture_free(api, ocl.be, c);
    toy_close(&ocl, &s);
}
END_TEST

START_TEST(capture_setting)
{
    clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE")};
    clf_backend *be = NULL;
    setenv("CLF_OPENCL_CAPTURE", "sometimes", 1);
    EXPECT_ERROR(ocl.api->open(&o, &be), CLF_ERR_INPUT, "CLF_OPENCL_CAPTURE", "sometimes");
    setenv("CLF_OPENCL_CAPTURE", "off", 1);
    CLF_ASSERT_OK(ocl.api->open(&o, &be));
    unsetenv("CLF_OPENCL_CAPTURE");
    ck_assert(!ocl.api->supports(be, CLF_OP_CAPTURE));
    EXPECT_ERROR(clf_op_capture_begin(ocl.api, be), CLF_ERR_UNSUPPORTED, "does not capture");
    ocl.api->close(be);
    /* the CPU backend neither captures nor reads positions on the device */
    EXPECT_ERROR(clf_op_capture_begin(cpu.api, cpu.be), CLF_ERR_UNSUPPORTED, "does not capture");
}
END_TEST

/* The core's checks of pos_add: a backend that reads it, a bound >= 0, the operands for
 * p = pos_add_max, no probs or dropout with it, the forward op only. */
START_TEST(pos_add_checks)
{
    toy s, c;
    toy_open(&ocl, &s);
    toy_open(&cpu, &c);
    const clf_attention_args a = step_attention(s.qkv, s.cache, s.ctx, s.pos);
    CLF_ASSERT_OK(clf_op_attention(ocl.api, ocl.be, &a));
    clf_attention_args x = step_attention(c.qkv, c.cache, c.ctx, c.pos);
    EXPECT_ERROR(clf_op_attention(cpu.api, cpu.be, &x), CLF_ERR_UNSUPPORTED, "pos_add");
    x = a;
    x.pos_add_max = -1;
    EXPECT_ERROR(clf_op_attention(ocl.api, ocl.be, &x), CLF_ERR_INPUT, "pos_add_max = -1");
    x = a;
    x.kv_len = 2; /* keys up to kv_len + pos_add_max = L + 1: past the cache's last entry */
    EXPECT_ERROR(clf_op_attention(ocl.api, ocl.be, &x), CLF_ERR_INPUT, "'k' out of bounds");
    x = a;
    x.dropout_p = 0.5f;
    EXPECT_ERROR(clf_op_attention(ocl.api, ocl.be, &x), CLF_ERR_INPUT, "without probs and dropout");
    x = a;
    x.pos_add = (clf_ptr){s.pos, 4}; /* the I32 itself outside its buffer */
    EXPECT_ERROR(clf_op_attention(ocl.api, ocl.be, &x), CLF_ERR_INPUT, "'pos_add' out of bounds");
    clf_attention_backward_args bw = {
        .fwd = a, .dout = {s.ctx, 0}, .dq = {s.x, 0}, .dk = {s.cache, 0}, .dv = {s.cache, 0}};
    EXPECT_ERROR(clf_op_attention_backward(ocl.api, ocl.be, &bw), CLF_ERR_INPUT, "pos_add",
                 "forward op only");
    clf_embed_args e = {.out = {s.x, 0},
                        .ids = {s.ids, 0},
                        .table = {s.emb, 0},
                        .pe = {s.pe, 0},
                        .rows = B,
                        .seq_len = 1,
                        .pos0 = 1,
                        .dim = HD,
                        .vocab = V,
                        .scale = 1.0f,
                        .pos_add = {s.pos, 0},
                        .pos_add_max = L - 1};
    /* pe rows pos0 + pos_add_max + 1 = L + 1 of L */
    EXPECT_ERROR(clf_op_embed(ocl.api, ocl.be, &e), CLF_ERR_INPUT, "'pe' out of bounds");
    e.pos0 = 0;
    CLF_ASSERT_OK(clf_op_embed(ocl.api, ocl.be, &e));
    toy_close(&ocl, &s);
    toy_close(&cpu, &c);
}
END_TEST

CLF_TEST_MAIN(ocl_test_run, "opencl_capture", "capture", attention_pos_add_equals_host_position,
              embed_pos_add_equals_host_position, replay_equals_ops_list, replay_equals_ops_auto,
              what_cannot_be_recorded_is_refused, capture_setting, pos_add_checks)
