/* Training end to end: the copy task learns, a killed-and-resumed run reaches the
 * uninterrupted run's weights bit for bit, the OpenCL backend follows the CPU loss curve,
 * and gradients and optimizer steps match PyTorch (tests/fixtures/train_*, made by
 * tests/reference/make_train_fixtures.py).
 * Tolerances: gradients 1e-4 relative per tensor (max abs error / max abs reference);
 * weights after optimizer steps 1e-4 relative; OpenCL loss curve 1e-3 relative per step. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/autodiff.h"
#include "clformer/config.h"
#include "clformer/decode.h"
#include "clformer/model.h"
#include "clformer/tensor.h"
#include "clformer/train.h"
#include "clformer/weights.h"
#include "graph/model_for_train_decode.h"
#include "testutil.h"

/* The OpenCL tests open the backend once and share it between the models they build:
 * every open/close of a PoCL context starts and stops its worker threads, and
 * LeakSanitizer's exit-time scan has been seen to crash on threads that are going away. */
static const clf_backend_api *shared_api;
static clf_backend *shared_be;

static void open_backend(const char *name, const clf_backend_api **api, clf_backend **be)
{
    if (shared_be && strcmp(name, shared_api->name) == 0) {
        *api = shared_api;
        *be = shared_be;
        return;
    }
    clf_test_open_backend(name, api, be);
}

static void close_backend(const clf_backend_api *api, clf_backend *be)
{
    if (be != shared_be)
        api->close(be);
}

/* ---- PyTorch fixtures: gradients and optimizer steps ---- */

typedef struct train_fixture {
    clf_test_model tr;
    clf_safetensors *batch, *expected;
    int32_t *src, *tgt, *labels;
    int B, S, T;
} train_fixture;

static void read_i32(const clf_safetensors *f, const char *name, int32_t **out, int *rows,
                     int *cols)
{
    const clf_tensor *t = clf_safetensors_find(f, name);
    ck_assert_msg(t != NULL, "fixture tensor '%s' missing", name);
    ck_assert_int_eq(t->ndim, 2);
    *rows = (int)t->shape[0];
    *cols = (int)t->shape[1];
    *out = malloc((size_t)clf_tensor_numel(t) * sizeof(int32_t));
    CLF_ASSERT_OK(clf_tensor_to_i32(t, *out));
}

/* tr's model and trainer (over its cfg and w) on the named backend, and their release with
 * the backend and w. */
static void trainer_open(clf_test_model *tr, const char *backend)
{
    open_backend(backend, &tr->api, &tr->be);
    clf_test_trainer_start(tr, 1);
}

static void trainer_close(clf_test_model *tr)
{
    clf_test_trainer_stop(tr);
    close_backend(tr->api, tr->be);
    clf_weights_free(tr->w);
}

static void train_fixture_open(train_fixture *f, const char *backend, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", CLF_FIXTURES_DIR, name);
    clf_test_load_model(path, &f->tr.cfg, &f->tr.w);
    snprintf(path, sizeof path, "%s/%s/batch.safetensors", CLF_FIXTURES_DIR, name);
    CLF_ASSERT_OK(clf_safetensors_open(path, &f->batch));
    snprintf(path, sizeof path, "%s/%s/expected.safetensors", CLF_FIXTURES_DIR, name);
    CLF_ASSERT_OK(clf_safetensors_open(path, &f->expected));
    int b2, t2;
    read_i32(f->batch, "src", &f->src, &f->B, &f->S);
    read_i32(f->batch, "tgt", &f->tgt, &b2, &f->T);
    read_i32(f->batch, "labels", &f->labels, &b2, &t2);
    trainer_open(&f->tr, backend);
}

static void train_fixture_close(train_fixture *f)
{
    trainer_close(&f->tr);
    clf_safetensors_close(f->batch);
    clf_safetensors_close(f->expected);
    free(f->src), free(f->tgt), free(f->labels);
}

static float expected_scalar(const train_fixture *f, const char *name)
{
    const clf_tensor *t = clf_safetensors_find(f->expected, name);
    ck_assert_msg(t != NULL, "fixture tensor '%s' missing", name);
    float x;
    CLF_ASSERT_OK(clf_tensor_to_f32(t, &x));
    return x;
}

/* Rows [r0, r0 + n) of the fixture's batch, micro-batch by micro-batch as the trainer is
 * fed (the fixture's micro-batches are equal slices of its batch, padded as the whole). */
static void accumulate_step(train_fixture *f, double *loss)
{
    const int A = f->tr.cfg.train.accumulate, n = f->B / A;
    double sum = 0;
    for (int a = 0; a < A; a++) {
        clf_train_batch b = {.batch = n,
                             .src_len = f->S,
                             .tgt_len = f->T,
                             .src = f->src + (size_t)a * n * f->S,
                             .tgt = f->tgt + (size_t)a * n * f->T,
                             .labels = f->labels + (size_t)a * n * f->T};
        double ls;
        long long nt;
        CLF_ASSERT_OK(clf_trainer_accumulate(f->tr.t, &b, &ls, &nt));
        sum += ls / (double)nt;
    }
    *loss = sum / A;
}

/* Compares every weight-shaped tensor `<prefix><name>` of the fixture with what lives in
 * the model's chunks (weights, or with grads their gradients): max abs error over
 * max(max |reference| of the tensor, 1e-3 x max |reference| of all tensors). The floor
 * matters for the attention key bias alone, whose gradient is zero in exact arithmetic
 * (softmax ignores a per-row shift): its float value is rounding noise. */
static void compare_params(train_fixture *f, const char *prefix, int grads, double tol)
{
    const int nw = clf_model_weight_count(f->tr.m);
    float **want = calloc((size_t)nw, sizeof *want), **got = calloc((size_t)nw, sizeof *got);
    size_t *n = calloc((size_t)nw, sizeof *n);
    double global = 0, worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < nw; i++) {
        const clf_weight_spec *s = clf_model_weight_spec(f->tr.m, i);
        char name[CLF_TENSOR_NAME_MAX + 16];
        snprintf(name, sizeof name, "%s%s", prefix, s->name);
        const clf_tensor *t = clf_safetensors_find(f->expected, name);
        ck_assert_msg(t != NULL, "fixture tensor '%s' missing", name);
        n[i] = (size_t)clf_tensor_numel(t);
        want[i] = malloc(n[i] * sizeof(float));
        got[i] = malloc(n[i] * sizeof(float));
        CLF_ASSERT_OK(clf_tensor_to_f32(t, want[i]));
        int c;
        size_t off, bytes;
        clf_buffer *wb, *gb;
        clf_model_weight_place(f->tr.m, i, &c, &off);
        clf_model_chunk(f->tr.m, c, &wb, &gb, &bytes);
        CLF_ASSERT_OK(f->tr.api->download(f->tr.be, got[i], (clf_ptr){grads ? gb : wb, off},
                                          n[i] * sizeof(float)));
        for (size_t k = 0; k < n[i]; k++)
            global = fmax(global, fabs(want[i][k]));
    }
    for (int i = 0; i < nw; i++) {
        double ref = 0, err = 0;
        for (size_t k = 0; k < n[i]; k++) {
            ref = fmax(ref, fabs(want[i][k]));
            err = fmax(err, fabs((double)got[i][k] - want[i][k]));
        }
        double e = err / fmax(ref, 1e-3 * global);
        if (e > worst)
            worst = e, worst_name = clf_model_weight_spec(f->tr.m, i)->name;
        ck_assert_msg(e <= tol, "%s%s: relative error %.3g > %.3g", prefix,
                      clf_model_weight_spec(f->tr.m, i)->name, e, tol);
        free(want[i]);
        free(got[i]);
    }
    printf("  %s*: worst relative error %.3g (%s)\n", prefix, worst, worst_name);
    free(want);
    free(got);
    free(n);
}

static void check_gradients(const char *backend, const char *name)
{
    train_fixture f = {0};
    train_fixture_open(&f, backend, name);
    double loss;
    accumulate_step(&f, &loss);
    double want = expected_scalar(&f, "loss");
    printf("%s on %s: loss %.7f (PyTorch %.7f)\n", name, backend, loss, want);
    ck_assert_msg(fabs(loss - want) <= 1e-5 * fabs(want), "loss %.7f vs PyTorch %.7f", loss, want);
    compare_params(&f, "grad.", 1, 1e-4);
    train_fixture_close(&f);
}

/* The fixture's optimizer trajectory: per step the loss before it, the learning rate and
 * the gradient norm, then the weights after the last step. */
static void check_trajectory(const char *backend, const char *name)
{
    train_fixture f = {0};
    train_fixture_open(&f, backend, name);
    for (int k = 1; k <= (int)f.tr.cfg.train.steps; k++) {
        char key[64];
        double loss, lr, norm;
        accumulate_step(&f, &loss);
        CLF_ASSERT_OK(clf_trainer_step(f.tr.t, &lr, &norm));
        snprintf(key, sizeof key, "step%d.loss", k);
        double wl = expected_scalar(&f, key);
        ck_assert_msg(fabs(loss - wl) <= 1e-4 * fabs(wl), "%s %.7f vs PyTorch %.7f", key, loss, wl);
        snprintf(key, sizeof key, "step%d.lr", k);
        double wlr = expected_scalar(&f, key);
        ck_assert_msg(fabs(lr - wlr) <= 1e-6 * fabs(wlr), "%s %.7g vs PyTorch %.7g", key, lr, wlr);
        snprintf(key, sizeof key, "step%d.grad_norm", k);
        double wn = expected_scalar(&f, key);
        ck_assert_msg(fabs(norm - wn) <= 1e-4 * fabs(wn), "%s %.7g vs PyTorch %.7g", key, norm, wn);
    }
    compare_params(&f, "final.", 0, 1e-4);
    train_fixture_close(&f);
}

/* The fixtures whose gradients are compared with PyTorch's, on each backend. */
static const char *const grad_cases[] = {
    "train_pre_tutorial", "train_post_standard", "train_branch_tutorial",
    "train_accum",        "train_learned_pe",    "train_tied_all",
    "train_tied_learned", "train_swiglu_rms",    "train_post_gelu"};

START_TEST(test_gradients_match_pytorch)
{
    for (size_t i = 0; i < sizeof grad_cases / sizeof grad_cases[0]; i++)
        check_gradients("cpu", grad_cases[i]);
}
END_TEST

START_TEST(test_optimizer_matches_pytorch)
{
    static const char *cases[] = {"train_pre_tutorial", "train_branch_tutorial", "train_accum",
                                  "train_tied_learned", "train_swiglu_rms",      "train_post_gelu"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_trajectory("cpu", cases[i]);
}
END_TEST

/* The named weight's values as the model holds them (n floats at most) */
static int read_weight(const train_fixture *f, const char *name, float *out, int n)
{
    for (int i = 0; i < clf_model_weight_count(f->tr.m); i++) {
        const clf_weight_spec *w = clf_model_weight_spec(f->tr.m, i);
        if (strcmp(w->name, name) != 0)
            continue;
        int c, len = (int)clf_weight_spec_numel(w);
        size_t off, bytes;
        clf_buffer *wb, *gb;
        clf_model_weight_place(f->tr.m, i, &c, &off);
        clf_model_chunk(f->tr.m, c, &wb, &gb, &bytes);
        ck_assert_int_le(len, n);
        CLF_ASSERT_OK(f->tr.api->download(f->tr.be, out, (clf_ptr){wb, off}, sizeof(float) * len));
        return len;
    }
    ck_abort_msg("no weight %s", name);
    return 0;
}

/* model.fixed_output_bias: two AdamW steps with weight decay leave the projection's bias
 * as loaded, bit for bit, and move its weight matrix. */
START_TEST(test_fixed_output_bias)
{
    train_fixture f = {0};
    train_fixture_open(&f, "cpu", "train_pre_tutorial");
    clf_test_trainer_stop(&f.tr);
    f.tr.cfg.model.fixed_output_bias = 1;
    f.tr.cfg.train.optimizer = CLF_OPT_ADAMW;
    f.tr.cfg.train.weight_decay = 0.1f;
    clf_test_trainer_start(&f.tr, 1);
    static float b0[4096], b1[4096], w0[4096], w1[4096];
    const int nb = read_weight(&f, "projection_layer.proj.bias", b0, 4096);
    read_weight(&f, "decoder.norm.alpha", w0, 4096);
    int nonzero = 0;
    for (int i = 0; i < nb; i++)
        nonzero += b0[i] != 0.0f;
    ck_assert_int_gt(nonzero, 0); /* weight decay would move it */
    for (int k = 0; k < 2; k++) {
        double loss;
        accumulate_step(&f, &loss);
        CLF_ASSERT_OK(clf_trainer_step(f.tr.t, NULL, NULL));
    }
    read_weight(&f, "projection_layer.proj.bias", b1, 4096);
    const int nw = read_weight(&f, "decoder.norm.alpha", w1, 4096);
    ck_assert_int_eq(memcmp(b0, b1, sizeof(float) * nb), 0);
    ck_assert_int_ne(memcmp(w0, w1, sizeof(float) * nw), 0);
    train_fixture_close(&f);
}
END_TEST

/* ---- per-site dropout ---- */

/* Every dropout site on (the tutorial's four) */
#define ALL_DROPOUT_SITES "{residual: 0.1, embedding: 0.1, attention: 0.1, ffn: 0.1}"

static float read_param(train_fixture *f, int i, size_t k, int grad)
{
    int c;
    size_t off, bytes;
    clf_buffer *wb, *gb;
    float v;
    clf_model_weight_place(f->tr.m, i, &c, &off);
    clf_model_chunk(f->tr.m, c, &wb, &gb, &bytes);
    CLF_ASSERT_OK(f->tr.api->download(f->tr.be, &v, (clf_ptr){grad ? gb : wb, off + 4 * k}, 4));
    return v;
}

static void write_param(train_fixture *f, int i, size_t k, float v)
{
    int c;
    size_t off, bytes;
    clf_buffer *wb, *gb;
    clf_model_weight_place(f->tr.m, i, &c, &off);
    clf_model_chunk(f->tr.m, c, &wb, &gb, &bytes);
    CLF_ASSERT_OK(f->tr.api->upload(f->tr.be, (clf_ptr){wb, off + 4 * k}, &v, 4));
}

/* The loss of micro-batch 0 (so the same dropout masks every time). */
static double loss_at_micro0(train_fixture *f)
{
    double loss;
    clf_trainer_state(f->tr.t)->micro = 0;
    accumulate_step(f, &loss);
    return loss;
}

/* With dropout at all four sites, a few gradient entries of every kind of parameter
 * against central differences of the loss under the same masks (the masks are a function
 * of the seed and the micro-batch number, so the loss is a smooth function of the weights).
 * In float with h = 1e-2 the difference quotient carries ~1e-4 of rounding and O(h^2)
 * curvature, far below what a mask that differed between forward and backward gives (the
 * gradient of a dropped element is zero on one side and not on the other). */
static void check_dropout_gradients(const char *backend)
{
    train_fixture f = {0};
    train_fixture_open(&f, backend, "train_swiglu_rms");
    clf_test_trainer_stop(&f.tr);
    f.tr.cfg.model.dropout = f.tr.cfg.model.dropout_embedding = 0.2f;
    f.tr.cfg.model.dropout_attention = f.tr.cfg.model.dropout_ffn = 0.2f;
    clf_test_trainer_start(&f.tr, 1);
    double l0 = loss_at_micro0(&f), l_nodrop;
    static const char *const probe[] = {
        "encoder.layers.0.self_attention_block.w_q.weight",
        "decoder.layers.1.cross_attention_block.w_v.weight",
        "encoder.layers.1.feed_forward_block.linear_1.weight",
        "decoder.layers.0.feed_forward_block.linear_3.weight",
        "decoder.layers.1.feed_forward_block.linear_2.bias",
        "encoder.layers.0.residual_connections.1.norm.alpha",
        "src_embed.embedding.weight",
    };
    enum { PROBES = 7 * 3 };
    int at[PROBES];
    size_t elem[PROBES];
    float grad[PROBES];
    int np = 0;
    /* the gradients of the first pass, before the difference quotients add to them */
    for (size_t p = 0; p < sizeof probe / sizeof probe[0]; p++) {
        int i = -1;
        for (int j = 0; j < clf_model_weight_count(f.tr.m); j++)
            if (!strcmp(clf_model_weight_spec(f.tr.m, j)->name, probe[p]))
                i = j;
        ck_assert_msg(i >= 0, "no weight %s", probe[p]);
        size_t numel = (size_t)clf_weight_spec_numel(clf_model_weight_spec(f.tr.m, i));
        for (size_t k = 0; k < numel && np < PROBES; k += numel / 3 + 1) {
            at[np] = i, elem[np] = k, grad[np] = read_param(&f, i, k, 1);
            np++;
        }
    }
    const double h = 1e-2;
    double worst = 0;
    for (int q = 0; q < np; q++) {
        float w = read_param(&f, at[q], elem[q], 0);
        write_param(&f, at[q], elem[q], (float)(w + h));
        double lp = loss_at_micro0(&f);
        write_param(&f, at[q], elem[q], (float)(w - h));
        double lm = loss_at_micro0(&f);
        write_param(&f, at[q], elem[q], w);
        double fd = (lp - lm) / (2 * h), e = fabs(fd - grad[q]) / fmax(fabs(grad[q]), 1e-2);
        worst = fmax(worst, e);
        ck_assert_msg(e <= 2e-2, "%s[%zu] on %s: gradient %.6g, central difference %.6g",
                      clf_model_weight_spec(f.tr.m, at[q])->name, elem[q], backend, grad[q], fd);
    }
    /* dropout does change the loss (the sites are live) */
    clf_trainer_free(f.tr.t);
    CLF_ASSERT_OK(clf_trainer_create(f.tr.m, &f.tr.cfg.train, 0, &f.tr.t));
    l_nodrop = loss_at_micro0(&f);
    ck_assert_msg(fabs(l0 - l_nodrop) > 1e-3, "loss %.6f with dropout, %.6f without", l0, l_nodrop);
    printf("dropout at every site on %s: gradient vs central difference, worst %.2g\n", backend,
           worst);
    train_fixture_close(&f);
}

START_TEST(test_dropout_sites_gradients)
{
    check_dropout_gradients("cpu");
}
END_TEST

/* ---- the copy task (the Annotated Transformer's first check) ---- */

enum { COPY_VOCAB = 14, COPY_MAXLEN = 7, COPY_B = 32 };

static const char *copy_yaml =
    "model:\n"
    "  src_vocab: 14\n"
    "  tgt_vocab: 14\n"
    "  max_len: 16\n"
    "  d_model: 32\n"
    "  layers: 2\n"
    "  heads: 4\n"
    "  d_ff: 64\n"
    "  norm: %s\n"
    "  layernorm: {style: standard, eps: 1.0e-5}\n"
    "  dropout: %s\n"
    "train:\n"
    "  data: {train: unused.tsv}\n"
    "  seed: 7\n"
    "  accumulate: %d\n"
    "  optimizer: {name: adam, lr: %s, betas: [0.9, 0.98], eps: 1.0e-9}\n"
    "  schedule: {name: %s, warmup: %d}\n"
    "  label_smoothing: %s\n"
    "  clip_norm: 1.0\n";

typedef struct copy_run {
    clf_test_model tr;
    int32_t src[COPY_B * (COPY_MAXLEN + 2)], tgt[COPY_B * (COPY_MAXLEN + 1)],
        labels[COPY_B * (COPY_MAXLEN + 1)];
} copy_run;

static void copy_open(copy_run *r, const char *backend, const char *norm, const char *dropout,
                      int accumulate, const char *lr, const char *schedule, int warmup,
                      const char *smoothing)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml, copy_yaml, norm, dropout, accumulate, lr, schedule, warmup,
             smoothing);
    CLF_ASSERT_OK(clf_config_parse_string(yaml, "copy.yaml", &r->tr.cfg));
    CLF_ASSERT_OK(clf_weights_init(&r->tr.cfg.model, 1, &r->tr.w));
    trainer_open(&r->tr, backend);
}

static void copy_close(copy_run *r)
{
    trainer_close(&r->tr);
}

static unsigned lcg(unsigned *x)
{
    *x = *x * 1103515245u + 12345u;
    return *x >> 16;
}

/* A batch of random sequences of 1..COPY_MAXLEN symbols (ids 4..13), framed as
 * src [SOS] x [EOS], tgt [SOS] x, labels x [EOS], padded with 1. */
static clf_train_batch copy_batch(copy_run *r, unsigned *seed)
{
    const int S = COPY_MAXLEN + 2, T = COPY_MAXLEN + 1;
    for (int b = 0; b < COPY_B; b++) {
        int len = 1 + (int)(lcg(seed) % COPY_MAXLEN);
        for (int j = 0; j < S; j++)
            r->src[b * S + j] = 1;
        for (int j = 0; j < T; j++)
            r->tgt[b * T + j] = r->labels[b * T + j] = 1;
        r->src[b * S] = 2;
        r->tgt[b * T] = 2;
        for (int j = 0; j < len; j++) {
            int32_t s = 4 + (int32_t)(lcg(seed) % (COPY_VOCAB - 4));
            r->src[b * S + 1 + j] = s;
            r->tgt[b * T + 1 + j] = s;
            r->labels[b * T + j] = s;
        }
        r->src[b * S + 1 + len] = 3;
        r->labels[b * T + len] = 3;
    }
    return (clf_train_batch){.batch = COPY_B,
                             .src_len = S,
                             .tgt_len = T,
                             .src = r->src,
                             .tgt = r->tgt,
                             .labels = r->labels};
}

/* Runs `steps` optimizer steps; losses[i] (if not NULL) = mean loss of step i. */
static void copy_train(copy_run *r, unsigned *seed, int steps, double *losses)
{
    for (int s = 0; s < steps; s++) {
        double sum = 0, total = 0;
        for (int a = 0; a < r->tr.cfg.train.accumulate; a++) {
            clf_train_batch b = copy_batch(r, seed);
            double ls;
            long long nt;
            CLF_ASSERT_OK(clf_trainer_accumulate(r->tr.t, &b, &ls, &nt));
            sum += ls / (double)nt;
            total += 1;
        }
        CLF_ASSERT_OK(clf_trainer_step(r->tr.t, NULL, NULL));
        if (losses)
            losses[s] = sum / total;
    }
}

/* Fraction of random sequences that greedy decoding copies exactly. */
static double copy_accuracy(copy_run *r, unsigned seed, int n)
{
    const int S = COPY_MAXLEN + 2;
    int exact = 0;
    clf_decode_opts o;
    clf_decode_opts_default(&r->tr.cfg.model, &o);
    o.max_len = COPY_MAXLEN + 2;
    for (int done = 0; done < n; done += COPY_B) {
        clf_train_batch b = copy_batch(r, &seed);
        clf_decode_result res;
        CLF_ASSERT_OK(clf_decode(r->tr.m, b.src, COPY_B, S, &o, &res));
        for (int i = 0; i < COPY_B && done + i < n; i++) {
            const clf_hypothesis *h = &res.hyps[i];
            int len = 0;
            while (r->src[i * S + 1 + len] != 3)
                len++;
            int ok = h->finished && h->len == len;
            for (int j = 0; ok && j < len; j++)
                ok = h->tokens[j] == r->src[i * S + 1 + j];
            exact += ok;
        }
        clf_decode_result_free(&res);
    }
    return (double)exact / n;
}

START_TEST(test_copy_task_cpu)
{
    /* under the sanitizers (5x slower), the same training for a quarter of the steps, whose
     * code paths are the same: 300 steps copy about 91% of sequences exactly */
    const int steps = clf_test_sanitized() ? 300 : 1200;
    const double bound = clf_test_sanitized() ? 0.85 : 0.99;
    copy_run r = {0};
    copy_open(&r, "cpu", "pre", "0.0", 1, "1.0", "noam", 100, "0.0");
    unsigned seed = 42;
    double losses[1200];
    copy_train(&r, &seed, steps, losses);
    double acc = copy_accuracy(&r, 999, 256);
    printf("copy task (cpu, pre-norm, %d steps of 32): loss %.3f -> %.4f, exact match %.1f%%\n",
           steps, losses[0], losses[steps - 1], 100 * acc);
    ck_assert_msg(acc >= bound, "copy task exact match %.3f < %.2f", acc, bound);
    copy_close(&r);
}
END_TEST

/* ---- the all-reduce overlapped with the backward pass (clf_trainer_accumulate_reduce) ---- */

/* A reducer standing in for MPI: two ranks that computed the same gradients, whose sum is
 * twice the gradient, exactly. It doubles each bucket at finish(), and records how many
 * progress() calls came after each start (more than 0: the bucket started before the
 * backward pass's last node). fail_at > 0: start() fails at that bucket. */
enum { MAX_BUCKETS = 4096 };
typedef struct doubling_reducer {
    float *data[MAX_BUCKETS];
    size_t n[MAX_BUCKETS];
    int progress_at[MAX_BUCKETS];
    int started, progress, finished, fail_at;
} doubling_reducer;

static clf_status doubling_start(void *ctx, float *data, size_t n)
{
    doubling_reducer *d = ctx;
    ck_assert_int_lt(d->started, MAX_BUCKETS);
    ck_assert_int_eq(d->finished, 0);
    if (d->fail_at && d->started + 1 == d->fail_at)
        return clf_error(CLF_ERR_BACKEND, "reducer: bucket %d refused", d->started);
    d->data[d->started] = data;
    d->n[d->started] = n;
    d->progress_at[d->started++] = d->progress;
    return CLF_OK;
}

static clf_status doubling_progress(void *ctx)
{
    doubling_reducer *d = ctx;
    ck_assert_int_gt(d->started, 0);
    d->progress++;
    return CLF_OK;
}

static clf_status doubling_finish(void *ctx)
{
    doubling_reducer *d = ctx;
    d->finished++;
    for (int i = 0; i < d->started; i++)
        for (size_t k = 0; k < d->n[i]; k++)
            d->data[i][k] *= 2.0f;
    return CLF_OK;
}

/* The gradients after one micro-batch through clf_trainer_accumulate_reduce (buckets of
 * 1 KiB: a few hundred) are exactly twice those of clf_trainer_accumulate on the same
 * batch: a bucket handed over before the last write into it would miss that write, and the
 * upload of its stale copy would undo it. Every gradient float goes through one bucket, and
 * most buckets start before the backward pass ends. */
static void check_overlapped_reduce(const char *backend)
{
    copy_run a = {0}, b = {0};
    unsigned sa = 3, sb = 3;
    copy_open(&a, backend, "pre", ALL_DROPOUT_SITES, 1, "0.001", "constant", 0, "0.1");
    copy_open(&b, backend, "pre", ALL_DROPOUT_SITES, 1, "0.001", "constant", 0, "0.1");
    clf_train_batch ba = copy_batch(&a, &sa), bb = copy_batch(&b, &sb);
    double la, lb;
    long long na, nb;
    CLF_ASSERT_OK(clf_trainer_accumulate(a.tr.t, &ba, &la, &na));
    static doubling_reducer d;
    memset(&d, 0, sizeof d);
    const clf_trainer_reducer r = {.bucket_bytes = 1024,
                                   .start = doubling_start,
                                   .progress = doubling_progress,
                                   .finish = doubling_finish,
                                   .ctx = &d};
    CLF_ASSERT_OK(clf_trainer_accumulate_reduce(b.tr.t, &bb, &r, &lb, &nb));
    ck_assert(la == lb && na == nb);
    ck_assert_int_eq(d.finished, 1);
    size_t reduced = 0, total = 0;
    int early = 0;
    for (int i = 0; i < d.started; i++) {
        reduced += d.n[i];
        early += d.progress_at[i] < d.progress;
    }
    const int nc = clf_model_chunk_count(a.tr.m);
    ck_assert_int_eq(clf_model_chunk_count(b.tr.m), nc);
    for (int c = 0; c < nc; c++) {
        clf_buffer *w, *ga, *gb;
        size_t bytes;
        clf_model_chunk(a.tr.m, c, &w, &ga, &bytes);
        clf_model_chunk(b.tr.m, c, &w, &gb, &bytes);
        const size_t n = bytes / sizeof(float);
        total += n;
        float *x = malloc(bytes), *y = malloc(bytes);
        ck_assert(x && y);
        CLF_ASSERT_OK(a.tr.api->download(a.tr.be, x, (clf_ptr){ga, 0}, bytes));
        CLF_ASSERT_OK(b.tr.api->download(b.tr.be, y, (clf_ptr){gb, 0}, bytes));
        size_t bad = 0, first = 0;
        for (size_t k = 0; k < n; k++)
            if (y[k] != 2.0f * x[k] && !bad++)
                first = k;
        ck_assert_msg(bad == 0,
                      "%s: chunk %d: %zu of %zu gradients are not twice the plain run's "
                      "(first at %zu: %g vs 2 x %g)",
                      backend, c, bad, n, first, (double)y[first], (double)x[first]);
        free(x);
        free(y);
    }
    ck_assert_uint_eq(reduced, total);
    printf("overlapped reduce on %s: %d buckets of 1 KiB, %d started before the backward "
           "pass's last node\n",
           backend, d.started, early);
    ck_assert_int_ge(2 * early, d.started);

    /* a reducer that fails: its error comes back, and finish() was still called */
    memset(&d, 0, sizeof d);
    d.fail_at = 3;
    clf_status st = clf_trainer_accumulate_reduce(b.tr.t, &bb, &r, NULL, NULL);
    ck_assert_int_eq(st, CLF_ERR_BACKEND);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "reducer: bucket 2 refused"));
    ck_assert_int_eq(d.finished, 1);
    copy_close(&a);
    copy_close(&b);
}

START_TEST(test_overlapped_reduce)
{
    check_overlapped_reduce("cpu");
}
END_TEST

/* Killed after 3 steps and resumed from the checkpoint: the same weights and moments as
 * 6 uninterrupted steps, bit for bit (dropout on, accumulation 2, AdamW-free Adam). */
START_TEST(test_resume_is_exact)
{
    char path[256];
    snprintf(path, sizeof path, "%s/resume-%d.safetensors", CLF_TEST_BIN_DIR, (int)getpid());
    copy_run a = {0}, b = {0};
    unsigned sa = 5, sb = 5;
    copy_open(&a, "cpu", "post", ALL_DROPOUT_SITES, 2, "0.001", "inverse_sqrt", 4, "0.1");
    copy_train(&a, &sa, 6, NULL);

    copy_open(&b, "cpu", "post", ALL_DROPOUT_SITES, 2, "0.001", "inverse_sqrt", 4, "0.1");
    copy_train(&b, &sb, 3, NULL);
    CLF_ASSERT_OK(clf_trainer_save(b.tr.t, path, "# config"));
    copy_close(&b);
    memset(&b, 0, sizeof b);
    copy_open(&b, "cpu", "post", ALL_DROPOUT_SITES, 2, "0.001", "inverse_sqrt", 4, "0.1");
    CLF_ASSERT_OK(clf_trainer_load(b.tr.t, path));
    ck_assert_int_eq(clf_trainer_state(b.tr.t)->step, 3);
    ck_assert_int_eq(clf_trainer_state(b.tr.t)->micro, 6);
    copy_train(&b, &sb, 3, NULL);

    char pa[256];
    snprintf(pa, sizeof pa, "%s/resume-a-%d.safetensors", CLF_TEST_BIN_DIR, (int)getpid());
    CLF_ASSERT_OK(clf_trainer_save(a.tr.t, pa, NULL));
    CLF_ASSERT_OK(clf_trainer_save(b.tr.t, path, NULL));
    clf_safetensors *fa, *fb;
    CLF_ASSERT_OK(clf_safetensors_open(pa, &fa));
    CLF_ASSERT_OK(clf_safetensors_open(path, &fb));
    ck_assert_int_eq(clf_safetensors_count(fa), clf_safetensors_count(fb));
    for (int i = 0; i < clf_safetensors_count(fa); i++) {
        const clf_tensor *x = clf_safetensors_at(fa, i);
        const clf_tensor *y = clf_safetensors_find(fb, x->name);
        ck_assert_ptr_nonnull(y);
        ck_assert_msg(x->nbytes == y->nbytes && memcmp(x->data, y->data, x->nbytes) == 0,
                      "resumed run differs from the uninterrupted one in '%s'", x->name);
    }
    ck_assert_str_eq(clf_safetensors_meta(fb, "step"), "6");
    clf_safetensors_close(fa);
    clf_safetensors_close(fb);
    unlink(pa);
    unlink(path);
    copy_close(&a);
    copy_close(&b);
}
END_TEST

START_TEST(test_bad_checkpoint)
{
    char path[256];
    snprintf(path, sizeof path, "%s/notckpt-%d.safetensors", CLF_TEST_BIN_DIR, (int)getpid());
    copy_run r = {0};
    copy_open(&r, "cpu", "pre", "0.0", 1, "0.001", "constant", 0, "0.1");
    /* a label outside the vocabulary is refused before anything runs */
    unsigned seed = 1;
    clf_train_batch b = copy_batch(&r, &seed);
    r.labels[5] = COPY_VOCAB;
    ck_assert_int_eq(clf_trainer_accumulate(r.tr.t, &b, NULL, NULL), CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "train: labels: token id 14 at position 5"));
    ck_assert_int_eq(clf_trainer_state(r.tr.t)->micro, 0);
    /* plain weights are not a checkpoint */
    CLF_ASSERT_OK(clf_weights_save(r.tr.w, path, NULL, 0));
    ck_assert_int_eq(clf_trainer_load(r.tr.t, path), CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "not a clformer training checkpoint"));
    unlink(path);
    copy_close(&r);
}
END_TEST

/* The inference graph updates the residual stream in place: differentiating it must be
 * refused with a message, not produce wrong gradients. */
START_TEST(test_autodiff_refuses_in_place)
{
    copy_run r = {0};
    copy_open(&r, "cpu", "pre", "0.0", 1, "0.001", "constant", 0, "0.1");
    clf_graph g;
    CLF_ASSERT_OK(clf_model_build_forward_graph(r.tr.m, 2, 4, 4, &g));
    int last = g.n_values - 1;
    clf_backward_spec bs = {
        .n_forward = g.n_nodes, .seed_value = last, .seed_grad = last, .ones = -1};
    clf_status st = clf_graph_append_backward(&g, &bs);
    ck_assert_int_eq(st, CLF_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "single-assignment"));
    clf_graph_free(&g);
    copy_close(&r);
}
END_TEST

/* This suite links the core's objects rather than libclformer.so (tests/CMakeLists.txt), and
 * the backend it loads names libclformer.so.0 as needed: the backend must still bind to the
 * suite's core, one copy of the state, so an error the backend raises is the message this
 * thread's clf_last_error() returns (a second copy would keep it in its own thread-local). */
START_TEST(test_backend_errors_reach_this_core)
{
    const clf_backend_api *api;
    clf_backend *be;
    open_backend("cpu", &api, &be);
    clf_clear_error();
    ck_assert_int_eq(api->layernorm(be, NULL), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "cpu: layernorm: no arguments");
    close_backend(api, be);
}
END_TEST

/* ---- clformer train, end to end on a tiny corpus ---- */

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

START_TEST(test_cli_train_and_resume)
{
    char dir[256], yaml[320], path[400], args[1024], err[4096];
    snprintf(dir, sizeof dir, "%s/train-cli-%d", CLF_TEST_BIN_DIR, (int)getpid());
    ck_assert_int_eq(mkdir(dir, 0777), 0);
    snprintf(path, sizeof path, "%s/train.tsv", dir);
    clf_test_write_reversal_corpus(path, 300, 3);
    snprintf(path, sizeof path, "%s/valid.tsv", dir);
    clf_test_write_reversal_corpus(path, 20, 4);
    snprintf(yaml, sizeof yaml, "%s/exp.yaml", dir);
    FILE *f = fopen(yaml, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "model: {src_vocab: 14, tgt_vocab: 14, max_len: 16, d_model: 32, layers: 1, "
            "heads: 2, d_ff: 64, dropout: 0.1}\n"
            "train:\n"
            "  data: {train: %s/train.tsv, valid: %s/valid.tsv}\n"
            "  batch_size: 16\n"
            "  steps: %s\n"
            "  optimizer: {name: adamw, lr: 0.003, weight_decay: 0.01}\n"
            "  log_every: 5\n"
            "  validate_every: 10\n"
            "  checkpoint: {dir: %s/run, every: 10, keep: 2}\n",
            dir, dir, "30", dir);
    fclose(f);
    snprintf(args, sizeof args, "train -c '%s' --backend cpu", yaml);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "train failed: %s", err);
    ck_assert_ptr_nonnull(strstr(err, "built vocabularies"));
    ck_assert_ptr_nonnull(strstr(err, "validation at step 30: loss"));
    snprintf(path, sizeof path, "%s/run/log.csv", dir);
    ck_assert_int_eq(count_lines(path), 1 + 6); /* header + steps 5, 10, ..., 30 */
    snprintf(path, sizeof path, "%s/run/last.safetensors", dir);
    clf_safetensors *ck;
    CLF_ASSERT_OK(clf_safetensors_open(path, &ck));
    ck_assert_str_eq(clf_safetensors_meta(ck, "step"), "30");
    ck_assert_ptr_nonnull(clf_safetensors_find(ck, "optim.exp_avg.projection_layer.proj.weight"));
    ck_assert_ptr_nonnull(strstr(clf_safetensors_meta(ck, "config"), "d_model: 32"));
    clf_safetensors_close(ck);
    /* keep: 2 -> steps 20 and 30 remain */
    snprintf(path, sizeof path, "%s/run/step-10.safetensors", dir);
    ck_assert_int_ne(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/run/step-20.safetensors", dir);
    ck_assert_int_eq(access(path, F_OK), 0);
    /* the weights load as plain weights (optim.* ignored) */
    snprintf(path, sizeof path, "%s/run/config.yaml", dir);
    ck_assert_int_eq(access(path, F_OK), 0);

    /* a second fresh run into the same directory is refused */
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "--resume"));

    /* resume to 40 steps: the log grows, the step goes on */
    f = fopen(yaml, "r+");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    char text[2048];
    f = fopen(yaml, "r");
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    char *steps = strstr(text, "steps: 30");
    ck_assert_ptr_nonnull(steps);
    memcpy(steps, "steps: 40", 9);
    clf_test_write_text(yaml, text);
    snprintf(args, sizeof args, "train -c '%s' --backend cpu --resume", yaml);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "resume failed: %s", err);
    snprintf(path, sizeof path, "%s/run/log.csv", dir);
    ck_assert_int_eq(count_lines(path), 1 + 8);
    snprintf(path, sizeof path, "%s/run/last.safetensors", dir);
    CLF_ASSERT_OK(clf_safetensors_open(path, &ck));
    ck_assert_str_eq(clf_safetensors_meta(ck, "step"), "40");
    clf_safetensors_close(ck);

    /* interrupted by SIGINT and resumed = uninterrupted, bit for bit (whenever the signal
     * lands: a run that finished first is compared all the same) */
    char yb[320];
    snprintf(yb, sizeof yb, "%s/b.yaml", dir);
    f = fopen(yb, "w");
    char *run_dir = strstr(text, "/run,");
    ck_assert_ptr_nonnull(run_dir);
    fprintf(f, "%.*s/runb%s", (int)(run_dir - text), text, run_dir + 4);
    fclose(f);
    snprintf(args, sizeof args,
             "sh -c \"'%s' train -c '%s' --backend cpu -q & p=\\$!; sleep 0.3; kill -INT \\$p; "
             "wait \\$p; exit 0\"",
             CLF_CLI_PATH, yb);
    ck_assert_int_eq(system(args), 0);
    snprintf(args, sizeof args, "train -c '%s' --backend cpu --resume -q", yb);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "resume failed: %s", err);
    {
        clf_safetensors *fa, *fb;
        snprintf(path, sizeof path, "%s/run/last.safetensors", dir);
        CLF_ASSERT_OK(clf_safetensors_open(path, &fa));
        snprintf(path, sizeof path, "%s/runb/last.safetensors", dir);
        CLF_ASSERT_OK(clf_safetensors_open(path, &fb));
        ck_assert_str_eq(clf_safetensors_meta(fb, "step"), "40");
        for (int i = 0; i < clf_safetensors_count(fa); i++) {
            const clf_tensor *x = clf_safetensors_at(fa, i);
            const clf_tensor *y = clf_safetensors_find(fb, x->name);
            ck_assert_ptr_nonnull(y);
            ck_assert_msg(memcmp(x->data, y->data, x->nbytes) == 0,
                          "interrupted run differs in '%s'", x->name);
        }
        clf_safetensors_close(fa);
        clf_safetensors_close(fb);
    }

    /* errors: no train: section; --resume with nothing to resume */
    snprintf(path, sizeof path, "%s/model-only.yaml", dir);
    clf_test_write_text(path, "model: {src_vocab: 14, tgt_vocab: 14}\n");
    snprintf(args, sizeof args, "train -c '%s'", path);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "no train: section"));
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(args), 0);
}
END_TEST

#ifdef CLF_HAVE_OPENCL
/* 1 when the OpenCL backend opens (a device exists) and has the training ops. */
static int opencl_can_train(void)
{
    clf_backend_opts opts = {.abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE")};
    if (clf_backend_open_named("opencl", CLF_BUILD_BACKEND_DIR, &opts, &shared_api, &shared_be) !=
        CLF_OK) {
        shared_be = NULL;
        ck_assert_msg(!clf_test_opencl_unavailable("train", clf_last_error()),
                      "CLF_TEST_REQUIRE_OPENCL=1 but the OpenCL backend does not open: %s",
                      clf_last_error());
        return 0;
    }
    if (!shared_api->supports(shared_be, CLF_OP_ATTENTION_BACKWARD)) {
        printf("opencl: training ops not implemented, skipped\n");
        shared_api->close(shared_be);
        shared_be = NULL;
        return 0;
    }
    return 1;
}

static void opencl_done(void)
{
    shared_api->close(shared_be);
    shared_be = NULL;
}

START_TEST(test_opencl_matches_pytorch)
{
    if (!opencl_can_train())
        return;
    for (size_t i = 0; i < sizeof grad_cases / sizeof grad_cases[0]; i++)
        check_gradients("opencl", grad_cases[i]);
    check_trajectory("opencl", "train_pre_tutorial");
    check_trajectory("opencl", "train_swiglu_rms");
    opencl_done();
}
END_TEST

/* The overlapped reduce on OpenCL: ops are queued, and each bucket's download must wait
 * for the nodes that write it. */
START_TEST(test_opencl_overlapped_reduce)
{
    if (!opencl_can_train())
        return;
    check_overlapped_reduce("opencl");
    opencl_done();
}
END_TEST

/* The same 12 steps (dropout on at every site, label smoothing) on OpenCL and CPU: the loss curves
 * agree to 1e-3 relative (identical dropout masks; float rounding differs). */
START_TEST(test_opencl_follows_cpu)
{
    if (!opencl_can_train())
        return;
    enum { STEPS = 12 };
    copy_run c = {0}, o = {0};
    unsigned sc = 11, so = 11;
    double lc[STEPS], lo[STEPS];
    copy_open(&c, "cpu", "pre", ALL_DROPOUT_SITES, 1, "0.002", "constant", 0, "0.1");
    copy_open(&o, "opencl", "pre", ALL_DROPOUT_SITES, 1, "0.002", "constant", 0, "0.1");
    copy_train(&c, &sc, STEPS, lc);
    copy_train(&o, &so, STEPS, lo);
    for (int s = 0; s < STEPS; s++) {
        double rel = fabs(lo[s] - lc[s]) / fabs(lc[s]);
        ck_assert_msg(rel <= 1e-3, "step %d: opencl loss %.6f vs cpu %.6f (rel %.2g)", s, lo[s],
                      lc[s], rel);
    }
    printf("opencl loss curve: %.5f -> %.5f (cpu %.5f -> %.5f)\n", lo[0], lo[STEPS - 1], lc[0],
           lc[STEPS - 1]);
    copy_close(&c);
    copy_close(&o);
    opencl_done();
}
END_TEST
#endif

static Suite *train_suite(void)
{
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("train");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_autodiff_refuses_in_place);
    tcase_add_test(tc, test_backend_errors_reach_this_core);
    tcase_add_test(tc, test_bad_checkpoint);
    tcase_add_test(tc, test_gradients_match_pytorch);
    tcase_add_test(tc, test_optimizer_matches_pytorch);
    tcase_add_test(tc, test_fixed_output_bias);
    tcase_add_test(tc, test_dropout_sites_gradients);
    tcase_add_test(tc, test_resume_is_exact);
    tcase_add_test(tc, test_overlapped_reduce);
    tcase_add_test(tc, test_copy_task_cpu);
    tcase_add_test(tc, test_cli_train_and_resume);
#ifdef CLF_HAVE_OPENCL
    tcase_add_test(tc, test_opencl_matches_pytorch);
    tcase_add_test(tc, test_opencl_follows_cpu);
    tcase_add_test(tc, test_opencl_overlapped_reduce);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return clf_test_main(train_suite());
}
