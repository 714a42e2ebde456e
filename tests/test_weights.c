/* Weights under the tutorial names: the parameter list a config implies, reproducible
 * Xavier initialisation, save/load round trips (F32, BF16, F16), and the errors that name
 * a missing, unexpected, mis-shaped or wrongly typed tensor. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/tensor.h"
#include "clformer/weights.h"
#include "testutil.h"

/* A small model, filled by hand (independent of the YAML reader). */
static clf_model_config small_cfg(int enc, int dec, int bias, int final_norm)
{
    clf_model_config c;
    memset(&c, 0, sizeof c);
    c.src_vocab = 11;
    c.tgt_vocab = 13;
    c.max_len = 32;
    c.d_model = 8;
    c.encoder_layers = enc;
    c.decoder_layers = dec;
    c.heads = 2;
    c.d_ff = 16;
    c.norm = CLF_NORM_PRE;
    c.final_norm = final_norm;
    c.ln_eps = 1e-6f;
    c.attention_bias = bias;
    c.dropout = 0.1f;
    c.pad_id = 1;
    return c;
}

static const clf_weight_spec *spec(const clf_weight_spec *s, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s[i].name, name) == 0)
            return &s[i];
    return NULL;
}

static void check_spec(const clf_weight_spec *s, int n, const char *name, int ndim, int64_t s0,
                       int64_t s1, clf_init_kind init)
{
    const clf_weight_spec *p = spec(s, n, name);
    ck_assert_msg(p != NULL, "no spec '%s'", name);
    ck_assert_msg(p->ndim == ndim && p->shape[0] == s0 && (ndim == 1 || p->shape[1] == s1),
                  "'%s' has the wrong shape", name);
    ck_assert_msg(p->init == init, "'%s' has init %d, want %d", name, (int)p->init, (int)init);
}

START_TEST(test_specs_names_and_shapes)
{
    clf_model_config c = small_cfg(2, 1, 0, 1);
    clf_weight_spec *s = NULL;
    int n = 0;
    CLF_ASSERT_OK(clf_weight_specs(&c, &s, &n));
    /* 2 embeddings + 2 x (4 attn + 4 ffn + 4 norm) + 2 + 1 x (8 attn + 4 ffn + 6 norm) + 2 + 2 */
    ck_assert_int_eq(n, 2 + 2 * 12 + 2 + 18 + 2 + 2);
    ck_assert_str_eq(s[0].name, "src_embed.embedding.weight");
    ck_assert_str_eq(s[1].name, "tgt_embed.embedding.weight");
    ck_assert_str_eq(s[2].name, "encoder.layers.0.self_attention_block.w_q.weight");
    ck_assert_str_eq(s[n - 2].name, "projection_layer.proj.weight");
    ck_assert_str_eq(s[n - 1].name, "projection_layer.proj.bias");
    check_spec(s, n, "src_embed.embedding.weight", 2, 11, 8, CLF_INIT_XAVIER);
    check_spec(s, n, "tgt_embed.embedding.weight", 2, 13, 8, CLF_INIT_XAVIER);
    const char *w[] = {"w_q", "w_k", "w_v", "w_o"};
    char name[256];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "encoder.layers.1.self_attention_block.%s.weight", w[i]);
        check_spec(s, n, name, 2, 8, 8, CLF_INIT_XAVIER);
        snprintf(name, sizeof name, "decoder.layers.0.cross_attention_block.%s.weight", w[i]);
        check_spec(s, n, name, 2, 8, 8, CLF_INIT_XAVIER);
        snprintf(name, sizeof name, "encoder.layers.0.self_attention_block.%s.bias", w[i]);
        ck_assert_ptr_null(spec(s, n, name));
    }
    check_spec(s, n, "encoder.layers.0.feed_forward_block.linear_1.weight", 2, 16, 8,
               CLF_INIT_XAVIER);
    check_spec(s, n, "encoder.layers.0.feed_forward_block.linear_1.bias", 1, 16, 0,
               CLF_INIT_LINEAR_BIAS);
    ck_assert_int_eq(spec(s, n, "encoder.layers.0.feed_forward_block.linear_1.bias")->fan_in, 8);
    check_spec(s, n, "decoder.layers.0.feed_forward_block.linear_2.weight", 2, 8, 16,
               CLF_INIT_XAVIER);
    check_spec(s, n, "decoder.layers.0.feed_forward_block.linear_2.bias", 1, 8, 0,
               CLF_INIT_LINEAR_BIAS);
    ck_assert_int_eq(spec(s, n, "decoder.layers.0.feed_forward_block.linear_2.bias")->fan_in, 16);
    check_spec(s, n, "encoder.layers.1.residual_connections.1.norm.alpha", 1, 8, 0, CLF_INIT_ONES);
    check_spec(s, n, "decoder.layers.0.residual_connections.2.norm.bias", 1, 8, 0, CLF_INIT_ZEROS);
    ck_assert_ptr_null(spec(s, n, "encoder.layers.0.residual_connections.2.norm.bias"));
    ck_assert_ptr_null(spec(s, n, "encoder.layers.2.self_attention_block.w_q.weight"));
    ck_assert_ptr_null(spec(s, n, "decoder.layers.1.self_attention_block.w_q.weight"));
    check_spec(s, n, "encoder.norm.alpha", 1, 8, 0, CLF_INIT_ONES);
    check_spec(s, n, "decoder.norm.bias", 1, 8, 0, CLF_INIT_ZEROS);
    check_spec(s, n, "projection_layer.proj.weight", 2, 13, 8, CLF_INIT_XAVIER);
    check_spec(s, n, "projection_layer.proj.bias", 1, 13, 0, CLF_INIT_LINEAR_BIAS);
    /* encoder.norm follows the encoder layers, decoder.norm the decoder layers */
    int enc_norm = (int)(spec(s, n, "encoder.norm.alpha") - s);
    ck_assert_str_eq(s[enc_norm - 1].name, "encoder.layers.1.residual_connections.1.norm.bias");
    ck_assert_str_eq(s[enc_norm + 2].name, "decoder.layers.0.self_attention_block.w_q.weight");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            ck_assert_msg(strcmp(s[i].name, s[j].name) != 0, "'%s' twice", s[i].name);
    free(s);
}
END_TEST

START_TEST(test_specs_options)
{
    clf_weight_spec *s = NULL;
    int n = 0;
    /* attention_bias adds 4 biases per attention block: 2 + 1 + 1 blocks here */
    clf_model_config c = small_cfg(2, 1, 1, 1);
    CLF_ASSERT_OK(clf_weight_specs(&c, &s, &n));
    ck_assert_int_eq(n, 50 + 4 * (2 + 2));
    check_spec(s, n, "encoder.layers.1.self_attention_block.w_v.bias", 1, 8, 0,
               CLF_INIT_LINEAR_BIAS);
    check_spec(s, n, "decoder.layers.0.cross_attention_block.w_o.bias", 1, 8, 0,
               CLF_INIT_LINEAR_BIAS);
    const clf_weight_spec *q = spec(s, n, "encoder.layers.0.self_attention_block.w_q.weight");
    ck_assert_str_eq(q[1].name, "encoder.layers.0.self_attention_block.w_q.bias");
    free(s);

    /* no final norm */
    c = small_cfg(2, 1, 0, 0);
    CLF_ASSERT_OK(clf_weight_specs(&c, &s, &n));
    ck_assert_int_eq(n, 50 - 4);
    ck_assert_ptr_null(spec(s, n, "encoder.norm.alpha"));
    ck_assert_ptr_null(spec(s, n, "decoder.norm.bias"));
    free(s);

    /* different layer counts: 1 encoder, 3 decoder layers */
    c = small_cfg(1, 3, 0, 1);
    CLF_ASSERT_OK(clf_weight_specs(&c, &s, &n));
    ck_assert_int_eq(n, 2 + 12 + 2 + 3 * 18 + 2 + 2);
    ck_assert_ptr_nonnull(spec(s, n, "decoder.layers.2.cross_attention_block.w_k.weight"));
    ck_assert_ptr_null(spec(s, n, "encoder.layers.1.self_attention_block.w_k.weight"));
    free(s);

    /* positional: learned adds the two position tables [max_len, d], Xavier like the token
     * embeddings, right after them (the other tensors keep their order) */
    c = small_cfg(2, 1, 0, 1);
    c.positional = CLF_POS_LEARNED;
    CLF_ASSERT_OK(clf_weight_specs(&c, &s, &n));
    ck_assert_int_eq(n, 50 + 2);
    check_spec(s, n, "src_pos.embedding.weight", 2, c.max_len, 8, CLF_INIT_XAVIER);
    check_spec(s, n, "tgt_pos.embedding.weight", 2, c.max_len, 8, CLF_INIT_XAVIER);
    ck_assert_str_eq(s[2].name, "src_pos.embedding.weight");
    ck_assert_str_eq(s[3].name, "tgt_pos.embedding.weight");
    free(s);

    c.d_model = 0;
    ck_assert_int_eq(clf_weight_specs(&c, &s, &n), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "d_model must be > 0"), "%s", clf_last_error());
    ck_assert_ptr_null(s);
}
END_TEST

static int weights_equal(const clf_weights *a, const clf_weights *b)
{
    if (a->count != b->count)
        return 0;
    for (int i = 0; i < a->count; i++) {
        const clf_weight_spec *s = &a->specs[i];
        size_t n = (size_t)(s->ndim == 2 ? s->shape[0] * s->shape[1] : s->shape[0]);
        if (strcmp(s->name, b->specs[i].name) != 0 ||
            memcmp(a->data[i], b->data[i], n * sizeof(float)) != 0)
            return 0;
    }
    return 1;
}

START_TEST(test_init_reproducible_and_bounded)
{
    clf_model_config c = small_cfg(2, 2, 1, 1);
    clf_weights *a = NULL, *b = NULL, *d = NULL;
    CLF_ASSERT_OK(clf_weights_init(&c, 7, &a));
    CLF_ASSERT_OK(clf_weights_init(&c, 7, &b));
    CLF_ASSERT_OK(clf_weights_init(&c, 8, &d));
    ck_assert(weights_equal(a, b));
    ck_assert(!weights_equal(a, d));
    for (int i = 0; i < a->count; i++) {
        const clf_weight_spec *s = &a->specs[i];
        int64_t n = s->ndim == 2 ? s->shape[0] * s->shape[1] : s->shape[0];
        double bound = 0, maxabs = 0, sum = 0;
        if (s->init == CLF_INIT_XAVIER)
            bound = sqrt(6.0 / (double)(s->shape[0] + s->shape[1]));
        else if (s->init == CLF_INIT_LINEAR_BIAS)
            bound = 1.0 / sqrt((double)s->fan_in);
        for (int64_t j = 0; j < n; j++) {
            float x = a->data[i][j];
            if (s->init == CLF_INIT_ONES)
                ck_assert(x == 1.0f);
            else if (s->init == CLF_INIT_ZEROS)
                ck_assert(x == 0.0f);
            else
                ck_assert_msg(fabs(x) <= (float)bound, "%s[%lld] = %g beyond %g", s->name,
                              (long long)j, (double)x, bound);
            if (fabs(x) > maxabs)
                maxabs = fabs(x);
            sum += x;
        }
        if (s->init == CLF_INIT_XAVIER && n >= 64) {
            /* uniform over the whole range: the extremes are reached, the mean is ~0 */
            ck_assert_msg(maxabs > 0.8 * bound, "%s: max %g of %g", s->name, maxabs, bound);
            ck_assert_msg(fabs(sum / (double)n) < 0.25 * bound, "%s: mean %g", s->name,
                          sum / (double)n);
        }
    }
    /* the embedding is Xavier over [vocab, d]: bound sqrt(6/(11+8)) */
    int e = clf_weights_find(a, "src_embed.embedding.weight");
    ck_assert_int_eq(e, 0);
    ck_assert_int_eq(clf_weights_find(a, "no.such.weight"), -1);
    clf_weights_free(a);
    clf_weights_free(b);
    clf_weights_free(d);
    clf_weights_free(NULL);
}
END_TEST

START_TEST(test_save_load_round_trip)
{
    clf_test_make_tmpdir("clf-w");
    clf_model_config c = small_cfg(2, 1, 1, 1);
    clf_weights *w = NULL, *r = NULL;
    CLF_ASSERT_OK(clf_weights_init(&c, 3, &w));
    const char *meta[] = {"format", "pt", "seed", "3"};
    const char *p = clf_test_tmp_path("w.safetensors");
    CLF_ASSERT_OK(clf_weights_save(w, p, meta, 2));
    CLF_ASSERT_OK(clf_weights_load(p, &c, &r));
    ck_assert(weights_equal(w, r));
    clf_weights_free(r);

    /* the file holds F32 tensors under the tutorial names, with the metadata */
    clf_safetensors *f = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(p, &f));
    ck_assert_int_eq(clf_safetensors_count(f), w->count);
    const clf_tensor *t =
        clf_safetensors_find(f, "decoder.layers.0.cross_attention_block.w_k.bias");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->dtype, CLF_F32);
    ck_assert_str_eq(clf_safetensors_meta(f, "seed"), "3");
    clf_safetensors_close(f);
    clf_weights_free(w);
    clf_test_remove_tmpdir();
}
END_TEST

/* Writes w's tensors to path after edit(): drop index `drop`, add `extra` tensors. */
static void write_variant(const clf_weights *w, const char *path, int drop, const clf_tensor *extra,
                          int n_extra)
{
    clf_tensor *t = NULL;
    CLF_ASSERT_OK(clf_weights_as_tensors(w, &t));
    clf_tensor *all = calloc((size_t)(w->count + n_extra), sizeof *all);
    int n = 0;
    for (int i = 0; i < w->count; i++)
        if (i != drop)
            all[n++] = t[i];
    for (int i = 0; i < n_extra; i++)
        all[n++] = extra[i];
    CLF_ASSERT_OK(clf_safetensors_write(path, all, n, NULL, 0));
    free(all);
    free(t);
}

START_TEST(test_load_half_precision_and_ignored)
{
    clf_test_make_tmpdir("clf-w");
    clf_model_config c = small_cfg(1, 1, 0, 1);
    clf_weights *w = NULL, *r = NULL;
    CLF_ASSERT_OK(clf_weights_init(&c, 5, &w));
    clf_tensor *t = NULL;
    CLF_ASSERT_OK(clf_weights_as_tensors(w, &t));
    /* BF16: the top half of each float; F16 for the norms (ones and zeros are exact) */
    uint16_t **half = calloc((size_t)w->count, sizeof *half);
    for (int i = 0; i < w->count; i++) {
        size_t n = t[i].nbytes / 4;
        half[i] = malloc(n * 2);
        int f16 = w->specs[i].init == CLF_INIT_ONES || w->specs[i].init == CLF_INIT_ZEROS;
        for (size_t j = 0; j < n; j++) {
            uint32_t bits;
            memcpy(&bits, &w->data[i][j], 4);
            half[i][j] = f16 ? (w->data[i][j] == 1.0f ? 0x3C00 : 0x0000) : (uint16_t)(bits >> 16);
            bits &= 0xFFFF0000u;
            memcpy(&w->data[i][j], &bits, 4); /* what the load should give back */
        }
        t[i].dtype = f16 ? CLF_F16 : CLF_BF16;
        t[i].data = half[i];
        t[i].nbytes = n * 2;
    }
    /* a training checkpoint's optimizer state and the tutorial's PE buffers are ignored */
    float m[3] = {0};
    clf_tensor *all = calloc((size_t)w->count + 3, sizeof *all);
    memcpy(all, t, (size_t)w->count * sizeof *t);
    all[w->count] = (clf_tensor){.name = "optim.m.src_embed.embedding.weight",
                                 .dtype = CLF_F32,
                                 .ndim = 1,
                                 .shape = {3},
                                 .data = m,
                                 .nbytes = sizeof m};
    all[w->count + 1] = all[w->count];
    snprintf(all[w->count + 1].name, sizeof all[0].name, "src_pos.pe");
    all[w->count + 2] = all[w->count];
    snprintf(all[w->count + 2].name, sizeof all[0].name, "tgt_pos.pe");
    const char *p = clf_test_tmp_path("half.safetensors");
    CLF_ASSERT_OK(clf_safetensors_write(p, all, w->count + 3, NULL, 0));
    CLF_ASSERT_OK(clf_weights_load(p, &c, &r));
    ck_assert(weights_equal(w, r));
    clf_weights_free(r);

    /* other dtypes are refused, naming the tensor */
    all[4].dtype = CLF_I32;
    all[4].nbytes *= 2;
    all[4].data = w->data[4];
    CLF_ASSERT_OK(clf_safetensors_write(p, all, w->count, NULL, 0));
    ck_assert_int_eq(clf_weights_load(p, &c, &r), CLF_ERR_INPUT);
    ck_assert_ptr_null(r);
    char want[512];
    snprintf(want, sizeof want, "%s: tensor '%s' has dtype I32; weights must be F32, F16 or BF16",
             p, w->specs[4].name);
    ck_assert_msg(strstr(clf_last_error(), want), "%s", clf_last_error());

    for (int i = 0; i < w->count; i++)
        free(half[i]);
    free(half);
    free(all);
    free(t);
    clf_weights_free(w);
    clf_test_remove_tmpdir();
}
END_TEST

static void expect_load_error(const char *path, const clf_model_config *c, const char *want)
{
    clf_weights *r = (clf_weights *)1;
    clf_status st = clf_weights_load(path, c, &r);
    ck_assert_msg(st == CLF_ERR_INPUT, "loaded (%d); want \"%s\"", (int)st, want);
    ck_assert_ptr_null(r);
    ck_assert_msg(strstr(clf_last_error(), want), "got \"%s\", want \"%s\"", clf_last_error(),
                  want);
}

/* Weights initialized for config made, saved as name in the temporary directory: loading
 * them against config c must fail with want. Returns the file's path. */
static const char *expect_other_config_refused(const clf_model_config *made, const char *name,
                                               const clf_model_config *c, const char *want)
{
    clf_weights *w = NULL;
    CLF_ASSERT_OK(clf_weights_init(made, 1, &w));
    const char *path = clf_test_tmp_path(name);
    CLF_ASSERT_OK(clf_weights_save(w, path, NULL, 0));
    clf_weights_free(w);
    expect_load_error(path, c, want);
    return path;
}

START_TEST(test_load_errors_name_the_tensor)
{
    clf_test_make_tmpdir("clf-w");
    clf_model_config c = small_cfg(2, 1, 0, 1);
    clf_weights *w = NULL;
    char want[512];
    CLF_ASSERT_OK(clf_weights_init(&c, 1, &w));

    /* missing */
    const char *p = clf_test_tmp_path("missing.safetensors");
    int k = clf_weights_find(w, "decoder.layers.0.cross_attention_block.w_v.weight");
    write_variant(w, p, k, NULL, 0);
    snprintf(want, sizeof want,
             "%s: tensor 'decoder.layers.0.cross_attention_block.w_v.weight' is missing (the "
             "config needs it: shape [8,8], decoder_layers: 1)",
             p);
    expect_load_error(p, &c, want);

    /* extra, unrelated */
    p = clf_test_tmp_path("extra.safetensors");
    float x[2] = {0};
    clf_tensor extra = {.name = "foo.weight",
                        .dtype = CLF_F32,
                        .ndim = 1,
                        .shape = {2},
                        .data = x,
                        .nbytes = sizeof x};
    write_variant(w, p, -1, &extra, 1);
    snprintf(want, sizeof want, "%s: unexpected tensor 'foo.weight' (not part of this model;", p);
    expect_load_error(p, &c, want);

    /* mis-shaped: the file has d_ff 16, the config 32 */
    p = clf_test_tmp_path("shape.safetensors");
    CLF_ASSERT_OK(clf_weights_save(w, p, NULL, 0));
    clf_model_config c32 = c;
    c32.d_ff = 32;
    snprintf(want, sizeof want,
             "%s: tensor 'encoder.layers.0.feed_forward_block.linear_1.weight' has shape [16,8], "
             "the config needs [32,8] (d_model 8, d_ff 32)",
             p);
    expect_load_error(p, &c32, want);
    clf_model_config cv = c;
    cv.src_vocab = 12;
    expect_load_error(p, &cv,
                      "tensor 'src_embed.embedding.weight' has shape [11,8], the config needs "
                      "[12,8] (src_vocab 12, d_model 8)");

    /* attention_bias: the config wants biases the file lacks, and the other way round */
    clf_model_config cb = c;
    cb.attention_bias = 1;
    expect_load_error(p, &cb,
                      "tensor 'encoder.layers.0.self_attention_block.w_q.bias' is missing (the "
                      "config needs it: shape [8], attention_bias: true)");
    expect_other_config_refused(
        &cb, "bias.safetensors", &c,
        "unexpected tensor 'encoder.layers.0.self_attention_block.w_q.bias' (not "
        "part of this model; the file has attention biases but the config has "
        "attention_bias: false)");

    /* final_norm */
    clf_model_config cn = c;
    cn.final_norm = 0;
    expect_load_error(p, &cn,
                      "unexpected tensor 'encoder.norm.alpha' (not part of this model; "
                      "the file has a final norm");
    clf_model_config cf = cn;
    cf.final_norm = 1;
    expect_other_config_refused(&cn, "nonorm.safetensors", &cf,
                                "tensor 'encoder.norm.alpha' is missing (the config needs it: "
                                "shape [8], final_norm: true)");

    /* positional: learned wants the position tables; a sinusoidal config refuses them */
    clf_model_config cl = c;
    cl.positional = CLF_POS_LEARNED;
    expect_load_error(p, &cl,
                      "tensor 'src_pos.embedding.weight' is missing (the config needs it: "
                      "shape [32,8], positional: learned)");
    const char *pl = expect_other_config_refused(
        &cl, "learned.safetensors", &c,
        "unexpected tensor 'src_pos.embedding.weight' (not part of this model; the file has "
        "learned positional embeddings but the config has positional: sinusoidal)");
    clf_model_config cm = cl;
    cm.max_len = 33;
    expect_load_error(pl, &cm,
                      "tensor 'src_pos.embedding.weight' has shape [32,8], the config needs "
                      "[33,8] (max_len 33, d_model 8)");

    /* layer counts */
    clf_model_config c1 = c;
    c1.encoder_layers = 1;
    expect_load_error(p, &c1,
                      "unexpected tensor 'encoder.layers.1.self_attention_block.w_q.weight'"
                      " (not part of this model; the file has more encoder layers than "
                      "encoder_layers: 1)");
    clf_model_config c3 = c;
    c3.decoder_layers = 2;
    expect_load_error(p, &c3,
                      "tensor 'decoder.layers.1.self_attention_block.w_q.weight' is "
                      "missing (the config needs it: shape [8,8], decoder_layers: 2)");

    /* no such file */
    clf_weights *r = NULL;
    ck_assert_int_eq(clf_weights_load(clf_test_tmp_path("absent.safetensors"), &c, &r), CLF_ERR_IO);
    ck_assert_msg(strstr(clf_last_error(), "absent.safetensors: cannot open"), "%s",
                  clf_last_error());
    clf_weights_free(w);
    clf_test_remove_tmpdir();
}
END_TEST

/* tie_embeddings: the shared matrix is stored once, as tgt_embed.embedding.weight; a file
 * may repeat it under the tied names (PyTorch's state_dict() does) only as an exact copy. */
START_TEST(test_tied_embeddings)
{
    clf_test_make_tmpdir("clf-w");
    clf_weight_spec *s = NULL;
    int n = 0;
    clf_model_config c = small_cfg(2, 1, 0, 1);
    c.tie_embeddings = CLF_TIE_DECODER;
    CLF_ASSERT_OK(clf_weight_specs(&c, &s, &n));
    ck_assert_int_eq(n, 50 - 1);
    ck_assert_ptr_null(spec(s, n, "projection_layer.proj.weight"));
    check_spec(s, n, "projection_layer.proj.bias", 1, 13, 0, CLF_INIT_LINEAR_BIAS);
    check_spec(s, n, "src_embed.embedding.weight", 2, 11, 8, CLF_INIT_XAVIER);
    free(s);
    ck_assert_str_eq(clf_weights_tied_to(&c, "projection_layer.proj.weight"),
                     "tgt_embed.embedding.weight");
    ck_assert_ptr_null(clf_weights_tied_to(&c, "src_embed.embedding.weight"));

    /* all: one vocabulary, one matrix */
    c.tie_embeddings = CLF_TIE_ALL;
    ck_assert_int_eq(clf_weight_specs(&c, &s, &n), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "src_vocab == tgt_vocab (got 11 and 13)"), "%s",
                  clf_last_error());
    c.src_vocab = 13;
    CLF_ASSERT_OK(clf_weight_specs(&c, &s, &n));
    ck_assert_int_eq(n, 50 - 2);
    ck_assert_ptr_null(spec(s, n, "src_embed.embedding.weight"));
    check_spec(s, n, "tgt_embed.embedding.weight", 2, 13, 8, CLF_INIT_XAVIER);
    free(s);
    ck_assert_str_eq(clf_weights_tied_to(&c, "src_embed.embedding.weight"),
                     "tgt_embed.embedding.weight");

    /* a file with the aliases as exact copies loads; a differing copy is refused */
    clf_weights *w = NULL, *r = NULL;
    CLF_ASSERT_OK(clf_weights_init(&c, 4, &w));
    int k = clf_weights_find(w, "tgt_embed.embedding.weight");
    float *copy = malloc(13 * 8 * sizeof(float));
    memcpy(copy, w->data[k], 13 * 8 * sizeof(float));
    clf_tensor alias[2] = {{.name = "projection_layer.proj.weight",
                            .dtype = CLF_F32,
                            .ndim = 2,
                            .shape = {13, 8},
                            .data = w->data[k],
                            .nbytes = 13 * 8 * sizeof(float)},
                           {.name = "src_embed.embedding.weight",
                            .dtype = CLF_F32,
                            .ndim = 2,
                            .shape = {13, 8},
                            .data = copy,
                            .nbytes = 13 * 8 * sizeof(float)}};
    const char *p = clf_test_tmp_path("tied.safetensors");
    write_variant(w, p, -1, alias, 2);
    CLF_ASSERT_OK(clf_weights_load(p, &c, &r));
    ck_assert_int_eq(r->count, w->count);
    clf_weights_free(r);
    copy[5] += 1.0f;
    write_variant(w, p, -1, alias, 2);
    char want[256];
    snprintf(want, sizeof want,
             "%s: tensor 'src_embed.embedding.weight' differs from 'tgt_embed.embedding.weight', "
             "which it is tied to (tie_embeddings: all)",
             p);
    expect_load_error(p, &c, want);
    /* the untied config wants its own matrices */
    clf_model_config u = c;
    u.tie_embeddings = CLF_TIE_NONE;
    CLF_ASSERT_OK(clf_weights_save(w, p, NULL, 0));
    expect_load_error(p, &u, "tensor 'src_embed.embedding.weight' is missing");
    free(copy);
    clf_weights_free(w);
    clf_test_remove_tmpdir();
}
END_TEST

/* A tied matrix may be stored under any one of its names (safetensors' save_model keeps
 * one: projection_layer.proj.weight); several only as equal copies; none is an error that
 * lists them all. */
START_TEST(test_tied_under_any_one_name)
{
    clf_test_make_tmpdir("clf-w");
    clf_model_config c = small_cfg(2, 1, 0, 1);
    c.src_vocab = 13;
    c.tie_embeddings = CLF_TIE_ALL;
    clf_weights *w = NULL, *r = NULL;
    CLF_ASSERT_OK(clf_weights_init(&c, 6, &w));
    const int k = clf_weights_find(w, "tgt_embed.embedding.weight");
    ck_assert_int_ge(k, 0);
    const size_t n = 13 * 8;
    float *other = malloc(n * sizeof(float));
    memcpy(other, w->data[k], n * sizeof(float));
    other[7] += 0.5f;
    clf_tensor proj = {.name = "projection_layer.proj.weight",
                       .dtype = CLF_F32,
                       .ndim = 2,
                       .shape = {13, 8},
                       .data = w->data[k],
                       .nbytes = n * sizeof(float)};
    clf_tensor src = proj;
    snprintf(src.name, sizeof src.name, "src_embed.embedding.weight");
    const char *p = clf_test_tmp_path("tied.safetensors");
    char want[512];

    /* all: the matrix as the projection's only, or as src_embed's only */
    const clf_tensor *alone[2] = {&proj, &src};
    for (int i = 0; i < 2; i++) {
        write_variant(w, p, k, alone[i], 1);
        CLF_ASSERT_OK(clf_weights_load(p, &c, &r));
        ck_assert_int_eq(r->count, w->count);
        for (int j = 0; j < w->count; j++) {
            const size_t bytes = (size_t)clf_weight_spec_numel(&w->specs[j]) * sizeof(float);
            ck_assert_msg(memcmp(r->data[j], w->data[j], bytes) == 0, "%s: tensor %s differs",
                          alone[i]->name, w->specs[j].name);
        }
        clf_weights_free(r);
        r = NULL;
    }
    /* both aliases, equal: loads; differing: refused, naming the one loaded from */
    clf_tensor both[2] = {proj, src};
    write_variant(w, p, k, both, 2);
    CLF_ASSERT_OK(clf_weights_load(p, &c, &r));
    clf_weights_free(r);
    both[1].data = other;
    write_variant(w, p, k, both, 2);
    snprintf(want, sizeof want,
             "%s: tensor 'src_embed.embedding.weight' differs from 'projection_layer.proj.weight', "
             "which it is tied to (tie_embeddings: all): the file is not a tied model",
             p);
    expect_load_error(p, &c, want);
    /* an alias of the wrong shape is named */
    clf_tensor bad = proj;
    bad.shape[1] = 7;
    bad.nbytes = 13 * 7 * sizeof(float);
    write_variant(w, p, k, &bad, 1);
    expect_load_error(p, &c,
                      "tensor 'projection_layer.proj.weight' has shape [13,7], the config needs "
                      "[13,8] (tgt_vocab 13, d_model 8)");
    /* none of the names: one line naming each */
    write_variant(w, p, k, NULL, 0);
    snprintf(want, sizeof want,
             "%s: tensor 'tgt_embed.embedding.weight' is missing (the config needs it: shape "
             "[13,8]; tie_embeddings: all stores it under any one of "
             "'tgt_embed.embedding.weight', 'projection_layer.proj.weight' or "
             "'src_embed.embedding.weight')",
             p);
    expect_load_error(p, &c, want);
    ck_assert_ptr_null(strchr(clf_last_error(), '\n'));
    clf_weights_free(w);

    /* decoder: src_embed is a matrix of its own, not a name of the tied one */
    c.tie_embeddings = CLF_TIE_DECODER;
    CLF_ASSERT_OK(clf_weights_init(&c, 7, &w));
    const int kt = clf_weights_find(w, "tgt_embed.embedding.weight");
    proj.data = w->data[kt];
    write_variant(w, p, kt, &proj, 1);
    CLF_ASSERT_OK(clf_weights_load(p, &c, &r));
    ck_assert(memcmp(r->data[kt], w->data[kt], n * sizeof(float)) == 0);
    clf_weights_free(r);
    write_variant(w, p, kt, NULL, 0);
    expect_load_error(p, &c,
                      "tensor 'tgt_embed.embedding.weight' is missing (the config needs it: shape "
                      "[13,8]; tie_embeddings: decoder stores it under any one of "
                      "'tgt_embed.embedding.weight' or 'projection_layer.proj.weight')");
    /* untied: no other name will do */
    c.tie_embeddings = CLF_TIE_NONE;
    clf_weights *u = NULL;
    CLF_ASSERT_OK(clf_weights_init(&c, 8, &u));
    const int ku = clf_weights_find(u, "tgt_embed.embedding.weight");
    write_variant(u, p, ku, NULL, 0);
    expect_load_error(p, &c,
                      "tensor 'tgt_embed.embedding.weight' is missing (the config needs it: shape "
                      "[13,8])");
    clf_weights_free(u);
    clf_weights_free(w);
    free(other);
    clf_test_remove_tmpdir();
}
END_TEST

/* The committed file that safetensors' save_model wrote for a model tied `all`
 * (tests/reference/make_tied_fixtures.py) holds the matrix as projection_layer.proj.weight
 * only; with a tgt_embed.embedding.weight added it still loads when that is an exact copy,
 * and is refused when the copy differs. (test_model matches its forward with PyTorch's.) */
START_TEST(test_tied_save_model_file)
{
    clf_test_make_tmpdir("clf-w");
    const char *dir = CLF_FIXTURES_DIR "/save_model_tied_all";
    const char *file = CLF_FIXTURES_DIR "/save_model_tied_all/weights.safetensors";
    clf_config cfg;
    clf_weights *w = NULL;
    clf_test_load_model(dir, &cfg, &w);
    ck_assert_int_eq(cfg.model.tie_embeddings, CLF_TIE_ALL);
    clf_safetensors *f = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(file, &f));
    ck_assert_ptr_null(clf_safetensors_find(f, "tgt_embed.embedding.weight"));
    ck_assert_ptr_null(clf_safetensors_find(f, "src_embed.embedding.weight"));
    const clf_tensor *proj = clf_safetensors_find(f, "projection_layer.proj.weight");
    ck_assert_ptr_nonnull(proj);
    ck_assert_int_eq(proj->dtype, CLF_F32);
    const int k = clf_weights_find(w, "tgt_embed.embedding.weight");
    ck_assert(memcmp(w->data[k], proj->data, proj->nbytes) == 0);

    /* the file's tensors plus a tgt_embed copy */
    const int nt = clf_safetensors_count(f);
    clf_tensor *all = calloc((size_t)nt + 1, sizeof *all);
    for (int i = 0; i < nt; i++)
        all[i] = *clf_safetensors_at(f, i);
    float *copy = malloc(proj->nbytes);
    memcpy(copy, proj->data, proj->nbytes);
    all[nt] = *proj;
    snprintf(all[nt].name, sizeof all[nt].name, "tgt_embed.embedding.weight");
    all[nt].data = copy;
    const char *p = clf_test_tmp_path("copy.safetensors");
    CLF_ASSERT_OK(clf_safetensors_write(p, all, nt + 1, NULL, 0));
    clf_weights *r = NULL;
    CLF_ASSERT_OK(clf_weights_load(p, &cfg.model, &r));
    ck_assert(memcmp(r->data[k], w->data[k], proj->nbytes) == 0);
    clf_weights_free(r);
    copy[3] = -copy[3] + 0.25f;
    CLF_ASSERT_OK(clf_safetensors_write(p, all, nt + 1, NULL, 0));
    char want[512];
    snprintf(want, sizeof want,
             "%s: tensor 'projection_layer.proj.weight' differs from 'tgt_embed.embedding.weight', "
             "which it is tied to (tie_embeddings: all): the file is not a tied model",
             p);
    expect_load_error(p, &cfg.model, want);
    free(copy);
    free(all);
    clf_safetensors_close(f);
    clf_weights_free(w);
    clf_test_remove_tmpdir();
}
END_TEST

/* Writes w's tensors to path as dtype dt (F32, F16 or BF16: the values rounded), with
 * element `at` of tensor `bad_tensor` set to bad. */
static void write_with_value(const clf_weights *w, const char *path, clf_dtype dt, int bad_tensor,
                             int64_t at, float bad)
{
    clf_tensor *t = NULL;
    CLF_ASSERT_OK(clf_weights_as_tensors(w, &t));
    void **data = calloc((size_t)w->count, sizeof *data);
    for (int i = 0; i < w->count; i++) {
        const size_t n = (size_t)clf_weight_spec_numel(&w->specs[i]);
        data[i] = malloc(n * clf_dtype_size(dt));
        for (size_t j = 0; j < n; j++) {
            const float x = i == bad_tensor && (int64_t)j == at ? bad : w->data[i][j];
            const uint16_t h = dt == CLF_F16 ? clf_float_to_half(x) : clf_float_to_bf16(x);
            if (dt == CLF_F32)
                ((float *)data[i])[j] = x;
            else
                ((uint16_t *)data[i])[j] = h;
        }
        t[i].dtype = dt;
        t[i].data = data[i];
        t[i].nbytes = n * clf_dtype_size(dt);
    }
    CLF_ASSERT_OK(clf_safetensors_write(path, t, w->count, NULL, 0));
    for (int i = 0; i < w->count; i++)
        free(data[i]);
    free(data);
    free(t);
}

/* Mapped (clf_weights_map), tensor k read in pieces of 16 elements: the piece that holds
 * the bad value fails with a message that starts as the load's (want); those before read. */
static void expect_read_error(const char *path, const clf_model_config *c, int k, const char *want)
{
    clf_weights *m = NULL;
    CLF_ASSERT_OK(clf_weights_map(path, c, &m));
    const int64_t n = clf_weight_spec_numel(&m->specs[k]);
    float piece[16];
    clf_status st = CLF_OK;
    for (int64_t e = 0; st == CLF_OK && e < n; e += 16)
        st = clf_weights_read(m, k, e, n - e < 16 ? n - e : 16, piece);
    ck_assert_int_eq(st, CLF_ERR_INPUT);
    ck_assert_msg(strncmp(clf_last_error(), want, strlen(want)) == 0, "got \"%s\", want \"%s\"",
                  clf_last_error(), want);
    clf_weights_free(m);
}

/* clf_weights_map converts nothing: every data[i] is NULL, and clf_weights_read gives any
 * span of any parameter as clf_weights_load converts it (F32, F16 and BF16 files; pieces
 * of 1 to 11 elements that cross every boundary), or refuses a span outside it. */
START_TEST(test_map_reads_what_load_converts)
{
    clf_test_make_tmpdir("clf-w");
    clf_model_config c = small_cfg(1, 1, 0, 1);
    clf_weights *w = NULL;
    CLF_ASSERT_OK(clf_weights_init(&c, 7, &w));
    const char *p = clf_test_tmp_path("w.safetensors");
    static const clf_dtype dts[3] = {CLF_F32, CLF_F16, CLF_BF16};
    for (int d = 0; d < 3; d++) {
        write_with_value(w, p, dts[d], 0, 0, w->data[0][0]);
        clf_weights *r = NULL, *m = NULL;
        CLF_ASSERT_OK(clf_weights_load(p, &c, &r));
        CLF_ASSERT_OK(clf_weights_map(p, &c, &m));
        ck_assert_ptr_null(r->source);
        ck_assert_ptr_nonnull(m->source);
        ck_assert_int_eq(m->count, r->count);
        for (int i = 0; i < m->count; i++) {
            ck_assert_ptr_null(m->data[i]);
            const int64_t n = clf_weight_spec_numel(&m->specs[i]);
            float *got = malloc((size_t)(n > 0 ? n : 1) * sizeof *got);
            for (int64_t e = 0, len = 1; e < n; e += len, len = len % 11 + 1)
                CLF_ASSERT_OK(clf_weights_read(m, i, e, n - e < len ? n - e : len, got + e));
            ck_assert_msg(memcmp(got, r->data[i], (size_t)n * sizeof *got) == 0,
                          "'%s' read from the mapping differs from its load", m->specs[i].name);
            /* from a loaded copy, the same */
            CLF_ASSERT_OK(clf_weights_read(r, i, 0, n, got));
            ck_assert(memcmp(got, r->data[i], (size_t)n * sizeof *got) == 0);
            ck_assert_int_eq(clf_weights_read(m, i, n - 1, 2, got), CLF_ERR_INPUT);
            ck_assert_ptr_nonnull(strstr(clf_last_error(), m->specs[i].name));
            ck_assert_int_eq(clf_weights_read(m, i, -1, 1, got), CLF_ERR_INPUT);
            free(got);
        }
        ck_assert_int_eq(clf_weights_read(m, m->count, 0, 1, (float[1]){0}), CLF_ERR_INPUT);
        clf_weights_free(r);
        clf_weights_free(m);
    }
    clf_weights_free(w);
    clf_test_remove_tmpdir();
}
END_TEST

/* A NaN or an infinity in an F32, F16 or BF16 weight is refused at load, naming the tensor
 * and the element's flat index (before, it loaded, and every output was NaN); read from a
 * mapping in pieces, with the same message. */
START_TEST(test_load_refuses_non_finite)
{
    clf_test_make_tmpdir("clf-w");
    clf_model_config c = small_cfg(1, 1, 0, 1);
    clf_weights *w = NULL;
    CLF_ASSERT_OK(clf_weights_init(&c, 3, &w));
    const int norm = clf_weights_find(w, "encoder.norm.alpha");
    const int emb = clf_weights_find(w, "src_embed.embedding.weight");
    ck_assert(norm >= 0 && emb >= 0);
    static const clf_dtype dts[3] = {CLF_F32, CLF_F16, CLF_BF16};
    const struct {
        float x;
        const char *name;
    } bad[3] = {{NAN, "NaN"}, {INFINITY, "Inf"}, {-INFINITY, "-Inf"}};
    const char *p = clf_test_tmp_path("bad.safetensors");
    char want[512];
    for (int d = 0; d < 3; d++)
        for (int b = 0; b < 3; b++) {
            const int k = b == 1 ? emb : norm;
            const int64_t at = b == 1 ? 83 : 5;
            write_with_value(w, p, dts[d], k, at, bad[b].x);
            snprintf(want, sizeof want,
                     "%s: tensor '%s' holds a non-finite value (%s) at index %lld", p,
                     w->specs[k].name, bad[b].name, (long long)at);
            expect_load_error(p, &c, want);
            ck_assert_str_eq(clf_last_error(), want);
            expect_read_error(p, &c, k, want);
        }
    /* the largest finite values load */
    clf_weights *r = NULL;
    write_with_value(w, p, CLF_F32, norm, 5, FLT_MAX);
    CLF_ASSERT_OK(clf_weights_load(p, &c, &r));
    ck_assert(r->data[norm][5] == FLT_MAX);
    clf_weights_free(r);
    write_with_value(w, p, CLF_F16, norm, 5, 65504.0f);
    CLF_ASSERT_OK(clf_weights_load(p, &c, &r));
    ck_assert(r->data[norm][5] == 65504.0f);
    clf_weights_free(r);

    /* an int8 matrix whose scale is finite but so large that q * scale overflows */
    const int mat = clf_weights_find(w, "encoder.layers.0.feed_forward_block.linear_1.weight");
    clf_tensor *t = NULL;
    CLF_ASSERT_OK(clf_weights_as_tensors(w, &t));
    const int64_t rows = w->specs[mat].shape[0], cols = w->specs[mat].shape[1];
    int8_t *q = calloc((size_t)(rows * cols), 1);
    float *sc = calloc((size_t)rows, sizeof *sc);
    q[2 * cols + 3] = 127;
    sc[2] = FLT_MAX;
    clf_tensor *all = calloc((size_t)w->count + 1, sizeof *all);
    memcpy(all, t, (size_t)w->count * sizeof *t);
    all[mat].dtype = CLF_I8;
    all[mat].data = q;
    all[mat].nbytes = (size_t)(rows * cols);
    all[w->count] = (clf_tensor){.dtype = CLF_F32,
                                 .ndim = 1,
                                 .shape = {rows},
                                 .data = sc,
                                 .nbytes = (size_t)rows * sizeof *sc};
    snprintf(all[w->count].name, sizeof all[0].name, "%s.scale", w->specs[mat].name);
    CLF_ASSERT_OK(clf_safetensors_write(p, all, w->count + 1, NULL, 0));
    snprintf(want, sizeof want,
             "%s: tensor '%s' holds a non-finite value (Inf) at index %lld once dequantized", p,
             w->specs[mat].name, (long long)(2 * cols + 3));
    expect_load_error(p, &c, want);
    expect_read_error(p, &c, mat, want);
    free(all);
    free(sc);
    free(q);
    free(t);
    clf_weights_free(w);
    clf_test_remove_tmpdir();
}
END_TEST

CLF_TEST_MAIN(clf_test_run, "weights", "weights", test_specs_names_and_shapes, test_specs_options,
              test_init_reproducible_and_bounded, test_save_load_round_trip,
              test_load_half_precision_and_ignored, test_load_errors_name_the_tensor,
              test_tied_embeddings, test_tied_under_any_one_name, test_tied_save_model_file,
              test_load_refuses_non_finite, test_map_reads_what_load_converts)
