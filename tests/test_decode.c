/* Incremental decoding (greedy and beam search with the KV cache) checked against the
 * full forward pass: at every step, the token greedy chose must be the argmax of a full
 * `forward` re-run on the prefix, and a beam hypothesis' log-probability must be the sum
 * of the full pass's log_softmax along its tokens (1e-4 absolute per token). Runs on every
 * norm placement of the fixtures, with attention bias, with unequal depths, on the CPU
 * backend and (when built) the OpenCL backend. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/config.h"
#include "clformer/decode.h"
#include "clformer/model.h"
#include "clformer/tensor.h"
#include "clformer/weights.h"
#include "testutil.h"

enum { B = 4, S = 9, MAXOUT = 12 };

typedef struct fixture {
    clf_test_model t;
    int32_t src[B * S];
} fixture;

static void fixture_open(fixture *f, const char *backend, const char *name)
{
    clf_test_model_open(&f->t, backend, name);
    /* [SOS] words [EOS] then padding; lengths 9, 7, 3 (empty sentence), 5 */
    static const int lens[B] = {7, 5, 1, 3};
    unsigned x = 12345;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < S; j++) {
            x = x * 1103515245u + 12345u;
            int32_t id = 4 + (int32_t)((x >> 16) % (unsigned)(f->t.cfg.model.src_vocab - 4));
            f->src[b * S + j] = j == 0 ? 2 : j <= lens[b] ? id : j == lens[b] + 1 ? 3 : 1;
        }
}

static void fixture_close(fixture *f)
{
    clf_test_model_close(&f->t);
}

/* log_softmax of the full forward pass at the last position of tgt [1, T] for sentence b */
static void full_step(fixture *f, int b, const int32_t *tgt, int T, double *logp)
{
    const int V = f->t.cfg.model.tgt_vocab;
    float *logits = malloc(sizeof(float) * T * V);
    clf_forward_io io = {.batch = 1,
                         .src_len = S,
                         .tgt_len = T,
                         .src = f->src + b * S,
                         .tgt = tgt,
                         .logits = logits};
    CLF_ASSERT_OK(clf_model_forward(f->t.m, &io));
    const float *l = logits + (size_t)(T - 1) * V;
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++)
        mx = fmax(mx, l[v]);
    for (int v = 0; v < V; v++)
        sum += exp(l[v] - mx);
    for (int v = 0; v < V; v++)
        logp[v] = f->t.cfg.model.output == CLF_OUTPUT_LOG_SOFTMAX ? l[v] : l[v] - mx - log(sum);
    free(logits);
}

/* Walks hypothesis h of sentence b through the full pass: returns the summed log-prob and
 * checks (when greedy) that every token was the argmax, unless the top two are within
 * 1e-4 (a tie the two paths may break differently).
 * A generated [PAD] ends the replay: `forward` masks pad ids of tgt as keys, while
 * decoding (like the tutorial's greedy_decode) masks causally only, so the steps after it
 * cannot be compared (random weights do emit [PAD]); the sum is then NAN. `replayed`
 * counts the steps compared. */
static int replayed;
static double replay(fixture *f, int b, const clf_hypothesis *h, int greedy, int eos)
{

    const int V = f->t.cfg.model.tgt_vocab;
    int32_t tgt[MAXOUT + 2];
    double *logp = malloc(sizeof(double) * V), total = 0;
    tgt[0] = 2;
    for (int t = 0; t < h->len + h->finished; t++) {
        int32_t want = t < h->len ? h->tokens[t] : eos;
        full_step(f, b, tgt, t + 1, logp);
        int best = 0, second = -1;
        for (int v = 1; v < V; v++)
            if (logp[v] > logp[best])
                second = best, best = v;
            else if (second < 0 || logp[v] > logp[second])
                second = v;
        if (greedy)
            ck_assert_msg(best == want || logp[best] - logp[second] < 1e-4,
                          "sentence %d step %d: decoder chose %d, full forward's argmax is %d", b,
                          t, want, best);
        total += logp[want];
        tgt[t + 1] = want;
        replayed++;
        if (want == f->t.cfg.model.pad_id) {
            total = NAN;
            break;
        }
    }
    free(logp);
    return total;
}

static void decode(fixture *f, clf_decode_opts *o, clf_decode_result *r)
{
    CLF_ASSERT_OK(clf_decode(f->t.m, f->src, B, S, o, r));
    ck_assert_int_eq(r->batch, B);
    ck_assert_int_eq(r->n_best, o->n_best);
}

/* An eos id that makes sentences stop at different steps: the token sentence 0 emitted
 * third in a run with [UNK] as EOS, or [PAD] if the model emits it. */
static int pick_eos(fixture *f)
{
    clf_decode_opts o;
    clf_decode_result r;
    clf_decode_opts_default(&f->t.cfg.model, &o);
    o.max_len = MAXOUT;
    o.eos_id = 0; /* [UNK]: whatever it does, we only read sentence 0's tokens */
    decode(f, &o, &r);
    int eos = r.hyps[0].len > 2 ? r.hyps[0].tokens[2] : 3;
    /* a model that emits [PAD] would make most steps unreplayable: let [PAD] end them */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < r.hyps[b].len; t++)
            if (r.hyps[b].tokens[t] == f->t.cfg.model.pad_id)
                eos = f->t.cfg.model.pad_id;
    clf_decode_result_free(&r);
    return eos;
}

static void check_greedy(const char *backend, const char *name)
{
    replayed = 0;
    fixture f;
    fixture_open(&f, backend, name);
    int eos = pick_eos(&f);
    for (int cache = 1; cache >= 0; cache--) {
        clf_decode_opts o;
        clf_decode_result r;
        clf_decode_opts_default(&f.t.cfg.model, &o);
        o.max_len = MAXOUT;
        o.eos_id = eos;
        o.use_cache = cache;
        o.want_attention = 1;
        decode(&f, &o, &r);
        int lens_differ = 0;
        for (int b = 0; b < B; b++) {
            const clf_hypothesis *h = &r.hyps[b];
            ck_assert_int_le(h->len, MAXOUT);
            ck_assert(h->finished || h->len == MAXOUT);
            replay(&f, b, h, 1, eos);
            lens_differ |= h->len != r.hyps[0].len;
            /* attention: one row per step, each a distribution over the source */
            for (int t = 0; t < h->len + h->finished; t++) {
                double sum = 0;
                for (int j = 0; j < S; j++)
                    sum += h->attention[t * S + j];
                ck_assert_msg(fabs(sum - 1.0) < 1e-4, "attention row %d sums to %g", t, sum);
            }
        }
        ck_assert_msg(lens_differ, "%s: every sentence stopped at the same step", name);
        ck_assert_msg(replayed >= 4 * B, "%s: only %d steps could be replayed", name, replayed);
        ck_assert_int_le(r.token_steps, (long long)B * r.steps);
        clf_decode_result_free(&r);
    }
    fixture_close(&f);
}

static void check_beam(const char *backend, const char *name)
{
    replayed = 0;
    fixture f;
    fixture_open(&f, backend, name);
    int eos = pick_eos(&f);
    clf_decode_result res[2];
    for (int cache = 1; cache >= 0; cache--) {
        clf_decode_opts o;
        clf_decode_opts_default(&f.t.cfg.model, &o);
        o.max_len = MAXOUT;
        o.eos_id = eos;
        o.beam = 3;
        o.n_best = 3;
        o.length_penalty = 0.6f;
        o.use_cache = cache;
        clf_decode_result *r = &res[cache];
        decode(&f, &o, r);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < 3; i++) {
                const clf_hypothesis *h = &r->hyps[b * 3 + i];
                if (i > 0)
                    ck_assert(h->score <= r->hyps[b * 3 + i - 1].score);
                if (h->score == -INFINITY)
                    continue;
                double lp = replay(&f, b, h, 0, eos);
                ck_assert_msg(isnan(lp) || fabs(lp - h->logprob) < 1e-4 * (h->len + 1),
                              "%s sentence %d hyp %d: logprob %g, full forward says %g", name, b, i,
                              h->logprob, lp);
                double lpen = pow((5.0 + h->len + h->finished) / 6.0, 0.6);
                ck_assert(fabs(h->score - h->logprob / lpen) < 1e-5);
            }
    }
    ck_assert_msg(replayed >= 4 * B, "%s: only %d steps could be replayed", name, replayed);
    /* the cache changes the arithmetic path, not the result */
    for (int i = 0; i < B * 3; i++) {
        ck_assert_int_eq(res[0].hyps[i].len, res[1].hyps[i].len);
        if (res[0].hyps[i].len)
            ck_assert(memcmp(res[0].hyps[i].tokens, res[1].hyps[i].tokens,
                             sizeof(int32_t) * res[0].hyps[i].len) == 0);
    }
    clf_decode_result_free(&res[0]);
    clf_decode_result_free(&res[1]);
    fixture_close(&f);
}

/* Decoding a sentence alone or inside a batch (where others finish earlier and are
 * compacted away) gives the same tokens. */
static void check_batch_independence(const char *backend, const char *name)
{
    fixture f;
    fixture_open(&f, backend, name);
    int eos = pick_eos(&f);
    for (int beam = 1; beam <= 2; beam++) {
        clf_decode_opts o;
        clf_decode_result all, one;
        clf_decode_opts_default(&f.t.cfg.model, &o);
        o.max_len = MAXOUT;
        o.eos_id = eos;
        o.beam = beam;
        decode(&f, &o, &all);
        for (int b = 0; b < B; b++) {
            CLF_ASSERT_OK(clf_decode(f.t.m, f.src + b * S, 1, S, &o, &one));
            ck_assert_int_eq(one.hyps[0].len, all.hyps[b].len);
            ck_assert(memcmp(one.hyps[0].tokens, all.hyps[b].tokens,
                             sizeof(int32_t) * one.hyps[0].len) == 0);
            clf_decode_result_free(&one);
        }
        clf_decode_result_free(&all);
    }
    fixture_close(&f);
}

/* ---- F16 weights (clf_model_enable_half_weights) ----
 * With F16 twins, the backends' products of at most 7 rows read the weights rounded to
 * F16. At batch 1 with a source of at most 7 framed tokens and a beam of at most 7, every
 * product of the encoder and the decoder is such a product, so the model must decode
 * exactly like an F32 model whose GEMM matrices were rounded to F16 beforehand (the
 * contract's rule: every 2-D weight but the embedding tables, plus the table the output
 * projection is tied to). Log-probabilities: 1e-4 per token, as above. The same decoding
 * with the unrounded F32 weights must differ by more than 10x that gap (and > 1e-5), so a
 * backend that ignores the twins fails.
 * A projection tied to the embedding table has no exact reference (rounding the table
 * would round the embedding lookups too, which read F32): there, F16 decoding must stay
 * within 1e-2 per token of F32 decoding and differ from it by more than 1e-5. */
enum { HS = 7 };

static void round_gemm_matrices(const clf_model_config *mc, clf_weights *w)
{
    const char *proj = clf_weights_tied_to(mc, "projection_layer.proj.weight");
    for (int i = 0; i < w->count; i++) {
        const char *name = w->specs[i].name;
        size_t len = strlen(name), suffix = strlen(".embedding.weight");
        int table = len >= suffix && strcmp(name + len - suffix, ".embedding.weight") == 0;
        if (w->specs[i].ndim != 2 || (table && !(proj && strcmp(proj, name) == 0)))
            continue;
        for (size_t e = 0; e < (size_t)clf_weight_spec_numel(&w->specs[i]); e++)
            w->data[i][e] = clf_half_to_float(clf_float_to_half(w->data[i][e]));
    }
}

static void check_half_weights(const char *backend, const char *name)
{
    fixture f, rounded;
    fixture_open(&f, backend, name);
    clf_model *half = NULL, *round = NULL;
    CLF_ASSERT_OK(clf_model_create(&f.t.cfg.model, f.t.w, f.t.api, f.t.be, &half));
    CLF_ASSERT_OK(clf_model_enable_half_weights(half));
    rounded = f;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", CLF_FIXTURES_DIR, name);
    clf_test_load_model(path, &rounded.t.cfg, &rounded.t.w);
    round_gemm_matrices(&rounded.t.cfg.model, rounded.t.w);
    CLF_ASSERT_OK(clf_model_create(&rounded.t.cfg.model, rounded.t.w, f.t.api, f.t.be, &round));
    /* sentence b: [SOS] HS-2-b words [EOS] padded to HS */
    int32_t src[B * HS];
    for (int b = 0; b < B; b++)
        for (int j = 0; j < HS; j++)
            src[b * HS + j] = j == 0 ? 2
                              : j <= HS - 2 - b
                                  ? 4 + (7 * j + 3 * b) % (f.t.cfg.model.src_vocab - 4)
                              : j == HS - 1 - b ? 3
                                                : 1;
    const int tied = clf_weights_tied_to(&f.t.cfg.model, "projection_layer.proj.weight") != NULL;
    double gap_rounded = 0, gap_f32 = 0;
    for (int beam = 1; beam <= 3; beam += 2) {
        clf_decode_opts o;
        clf_decode_opts_default(&f.t.cfg.model, &o);
        o.max_len = MAXOUT;
        o.beam = o.n_best = beam;
        o.eos_id = 0;
        for (int b = 0; b < B; b++) {
            clf_decode_result rh, rr, rf;
            CLF_ASSERT_OK(clf_decode(half, src + b * HS, 1, HS, &o, &rh));
            CLF_ASSERT_OK(clf_decode(round, src + b * HS, 1, HS, &o, &rr));
            CLF_ASSERT_OK(clf_decode(f.t.m, src + b * HS, 1, HS, &o, &rf));
            for (int i = 0; i < beam; i++) {
                const clf_hypothesis *h = &rh.hyps[i], *r = &rr.hyps[i], *p = &rf.hyps[i];
                if (tied && (h->len != r->len ||
                             memcmp(h->tokens, r->tokens, sizeof(int32_t) * h->len) != 0))
                    continue; /* no exact reference (above) */
                ck_assert_int_eq(h->len, r->len);
                ck_assert_msg(memcmp(h->tokens, r->tokens, sizeof(int32_t) * h->len) == 0,
                              "%s beam %d sentence %d hyp %d: F16 twins and rounded F32 weights "
                              "chose different tokens",
                              name, beam, b, i);
                double d = fabs(h->logprob - r->logprob), d32 = fabs(h->logprob - p->logprob);
                if (tied) {
                    ck_assert_msg(h->len != p->len || d32 < 1e-2 * (h->len + 1),
                                  "%s: logprob %g with F16, %g with F32", name, h->logprob,
                                  p->logprob);
                    gap_f32 = fmax(gap_f32, d32);
                    continue;
                }
                ck_assert_msg(d < 1e-4 * (h->len + 1), "%s: logprob %g vs %g with rounded weights",
                              name, h->logprob, r->logprob);
                gap_rounded = fmax(gap_rounded, d);
                gap_f32 = fmax(gap_f32, d32);
            }
            clf_decode_result_free(&rh);
            clf_decode_result_free(&rr);
            clf_decode_result_free(&rf);
        }
    }
    ck_assert_msg(gap_f32 > 1e-5 && gap_f32 > 10 * gap_rounded,
                  "%s: F16 decoding is %g from F32 and %g from rounded F32: the F16 twins "
                  "look unused",
                  name, gap_f32, gap_rounded);
    clf_model_free(half);
    clf_model_free(round);
    clf_weights_free(rounded.t.w);
    fixture_close(&f);
}

static const char *const fixtures[] = {"pre_tutorial",
                                       "post_standard",
                                       "branch_tutorial",
                                       "pre_standard_bias",
                                       "enc3_dec1",
                                       "pre_learned_pe",
                                       "pre_tied_all",
                                       "pre_swiglu_rms",
                                       "post_geglu",
                                       "pre_learned_offset_embed_norm",
                                       "post_offset_embed_norm"};
#define N_FIXTURES ((int)(sizeof fixtures / sizeof fixtures[0]))

/* A loop test over the fixtures: check(backend, fixtures[_i]). */
#define FIXTURE_TEST(name, check, backend)                                                         \
    START_TEST(name)                                                                               \
    {                                                                                              \
        check(backend, fixtures[_i]);                                                              \
    }                                                                                              \
    END_TEST

FIXTURE_TEST(greedy_equals_full_forward_argmax_cpu, check_greedy, "cpu")
FIXTURE_TEST(beam_scores_match_full_forward_cpu, check_beam, "cpu")
FIXTURE_TEST(batch_independence_cpu, check_batch_independence, "cpu")
FIXTURE_TEST(half_weights_cpu, check_half_weights, "cpu")
#ifdef CLF_HAVE_OPENCL
static void expect_same_without_on(const char *backend, const char *name, clf_op op, double tol,
                                   int *fewer_calls);
static void ahead_equals_every_step_on(const char *backend, const char *name);

/* OpenCL: the steps recorded once and replayed (CLF_OP_CAPTURE, decode_run.h) and the same
 * steps op by op give the same hypotheses exactly (the same kernels with the same
 * arguments), greedy (steps run ahead: chained replays) and beam 3 (12 rows: CLBlast's
 * products, recorded as calls), with fewer backend calls in each. */
START_TEST(replay_equals_op_by_op_opencl)
{
    int fewer = 0;
    expect_same_without_on("opencl", fixtures[_i], CLF_OP_CAPTURE, 0, &fewer);
    ck_assert_int_eq(fewer, 4); /* greedy and beam 3, both variants */
}
END_TEST

FIXTURE_TEST(greedy_equals_full_forward_opencl, check_greedy, "opencl")

/* The same on the OpenCL backend, where beam search chooses on the device by default. */
START_TEST(ahead_equals_every_step_opencl)
{
    ahead_equals_every_step_on("opencl", fixtures[_i]);
}
END_TEST
FIXTURE_TEST(beam_scores_match_full_forward_opencl, check_beam, "opencl")
FIXTURE_TEST(half_weights_opencl, check_half_weights, "opencl")
#endif

/* A weight F16 cannot hold is refused with its name; the model stays usable in F32. */
START_TEST(half_weights_refuse_out_of_range)
{
    fixture f;
    fixture_open(&f, "cpu", "pre_tutorial");
    clf_model_free(f.t.m);
    int i = 0;
    while (strcmp(f.t.w->specs[i].name, "decoder.layers.0.feed_forward_block.linear_2.weight"))
        i++;
    f.t.w->data[i][5] = 70000.0f;
    CLF_ASSERT_OK(clf_model_create(&f.t.cfg.model, f.t.w, f.t.api, f.t.be, &f.t.m));
    ck_assert_int_eq(clf_model_enable_half_weights(f.t.m), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "decoder.layers.0.feed_forward_block.linear_2.weight") &&
                      strstr(clf_last_error(), "element 5") && strstr(clf_last_error(), "F16"),
                  "%s", clf_last_error());
    clf_decode_opts o;
    clf_decode_result r;
    clf_decode_opts_default(&f.t.cfg.model, &o);
    o.max_len = 3;
    CLF_ASSERT_OK(clf_decode(f.t.m, f.src, B, S, &o, &r));
    clf_decode_result_free(&r);
    fixture_close(&f);
}
END_TEST

/* The CPU backend, except that it says it cannot do one op: decoding then takes the path a
 * backend without it takes. */
static const clf_backend_api *full_api;
static clf_op denied_op;
static int supports_but_denied(clf_backend *be, clf_op op)
{
    return op != denied_op && full_api->supports(be, op);
}

/* Decoding with the whole backend and with one that denies op give the same hypotheses
 * (tokens exactly; log-probabilities and scores exactly, or with tol > 0 within tol
 * relative), greedy and beam 3, with and without forced_eos and a banned id. */
static void expect_same_without_on(const char *backend, const char *name, clf_op op, double tol,
                                   int *fewer_calls)
{
    fixture f;
    fixture_open(&f, backend, name);
    const int eos = pick_eos(&f);
    for (int variant = 0; variant < 2; variant++) {
        /* variant 1: an id that greedy would pick banned, the last position forced to EOS */
        clf_model_config cfg = f.t.cfg.model;
        cfg.n_banned_ids = variant;
        cfg.banned_ids[0] = 5;
        full_api = f.t.api;
        denied_op = op;
        clf_backend_api denying = *f.t.api;
        denying.supports = supports_but_denied;
        clf_model *m1 = NULL, *m2 = NULL;
        CLF_ASSERT_OK(clf_model_create(&cfg, f.t.w, f.t.api, f.t.be, &m1));
        CLF_ASSERT_OK(clf_model_create(&cfg, f.t.w, &denying, f.t.be, &m2));
        for (int beam = 1; beam <= 3; beam += 2) {
            clf_decode_opts o;
            clf_decode_opts_default(&cfg, &o);
            o.max_len = MAXOUT;
            o.eos_id = eos;
            o.beam = beam;
            o.n_best = beam;
            o.forced_eos = variant;
            clf_decode_result with, without;
            CLF_ASSERT_OK(clf_decode(m1, f.src, B, S, &o, &with));
            CLF_ASSERT_OK(clf_decode(m2, f.src, B, S, &o, &without));
            if (fewer_calls && with.step_calls < without.step_calls)
                (*fewer_calls)++;
            for (int i = 0; i < B * beam; i++) {
                const clf_hypothesis *x = &with.hyps[i], *y = &without.hyps[i];
                ck_assert_int_eq(x->len, y->len);
                ck_assert(x->len == 0 ||
                          memcmp(x->tokens, y->tokens, sizeof(int32_t) * (size_t)x->len) == 0);
                ck_assert_msg((x->logprob == y->logprob && x->score == y->score) ||
                                  (isinf(x->logprob) && isinf(y->logprob)) ||
                                  (fabs(x->logprob - y->logprob) <= tol * fabs(y->logprob) &&
                                   fabs(x->score - y->score) <= tol * fabs(y->score)),
                              "%s without %s, beam %d, variant %d, hyp %d: logprob %g / %g", name,
                              clf_op_name(op), beam, variant, i, x->logprob, y->logprob);
            }
            clf_decode_result_free(&with);
            clf_decode_result_free(&without);
        }
        clf_model_free(m1);
        clf_model_free(m2);
    }
    fixture_close(&f);
}

static void expect_same_without(const char *name, clf_op op, double tol)
{
    expect_same_without_on("cpu", name, op, tol, NULL);
}

/* Shared cache rows and copied caches (a backend without attention's row tables) */
START_TEST(shared_rows_equal_copied_caches)
{
    expect_same_without(fixtures[_i], CLF_OP_ATTENTION_KV_ROWS, 0);
}
END_TEST

/* Beam search choosing from the device's topk and from every log-probability */
START_TEST(device_topk_equals_host_choice)
{
    expect_same_without(fixtures[_i], CLF_OP_TOPK, 0);
}
END_TEST

/* Beam search (beam 3) with the whole backend makes `fewer` backend calls a step less than
 * with one that denies op, over the same number of steps. */
static void expect_fewer_calls_without(const char *name, clf_op op, int fewer)
{
    fixture f;
    fixture_open(&f, "cpu", name);
    full_api = f.t.api;
    denied_op = op;
    clf_backend_api denying = *f.t.api;
    denying.supports = supports_but_denied;
    clf_model *m2 = NULL;
    CLF_ASSERT_OK(clf_model_create(&f.t.cfg.model, f.t.w, &denying, f.t.be, &m2));
    clf_decode_opts o;
    clf_decode_opts_default(&f.t.cfg.model, &o);
    o.max_len = MAXOUT;
    o.beam = 3;
    clf_decode_result with, without;
    CLF_ASSERT_OK(clf_decode(f.t.m, f.src, B, S, &o, &with));
    CLF_ASSERT_OK(clf_decode(m2, f.src, B, S, &o, &without));
    ck_assert_int_eq(with.steps, without.steps);
    ck_assert_int_eq(without.step_calls, with.step_calls + (long long)fewer * with.steps);
    clf_decode_result_free(&with);
    clf_decode_result_free(&without);
    clf_model_free(m2);
    fixture_close(&f);
}

/* Beam search's top-k over the log-softmax made inside topk and by a log_softmax op: the
 * same hypotheses, and one backend call fewer a step (the log_softmax op's). */
START_TEST(topk_log_softmax_equals_two_ops)
{
    expect_same_without(fixtures[_i], CLF_OP_TOPK_LOG_SOFTMAX, 0);
    expect_fewer_calls_without(fixtures[_i], CLF_OP_TOPK_LOG_SOFTMAX, 1);
}
END_TEST

/* Self-attention's q, k and v made in one product with the attention op appending k and v
 * to the cache, and made by two products (q; k|v straight into the cache): the same tokens,
 * scores within 1e-6 relative (a product of 3d columns need not sum in the order of one of
 * d and one of 2d: OpenBLAS's SGEMM at beam 3 does not), and one backend call fewer a step
 * and decoder layer. */
START_TEST(attention_append_equals_two_products)
{
    expect_same_without(fixtures[_i], CLF_OP_ATTENTION_APPEND, 1e-6);
    fixture f;
    fixture_open(&f, "cpu", fixtures[_i]);
    const int layers = f.t.cfg.model.decoder_layers;
    fixture_close(&f);
    expect_fewer_calls_without(fixtures[_i], CLF_OP_ATTENTION_APPEND, layers);
}
END_TEST

/* Each layernorm taken by the product after it (gemm's ln_out) and run as an op of its own:
 * the same hypotheses exactly (the CPU backend runs the same layernorm, then the same
 * product), and the calls: every layer's 3 layernorms feed a product in a pre- or post-norm
 * model (a post-norm layer's last one the next layer's, or the output projection), a final
 * norm the projection, except after a post-norm layer's, and the embeddings' norm the first
 * layer's product in a post-norm model (in a pre-norm one, a layernorm); the branch form's
 * layernorms feed additions and a plugin norm is no layernorm: none is taken. */
START_TEST(gemm_layernorm_equals_two_ops)
{
    expect_same_without(fixtures[_i], CLF_OP_GEMM_LAYERNORM, 0);
    fixture f;
    fixture_open(&f, "cpu", fixtures[_i]);
    const clf_model_config *c = &f.t.cfg.model;
    const int fused = c->norm == CLF_NORM_BRANCH || c->norm_op ? 0
                      : c->norm == CLF_NORM_PRE ? 3 * c->decoder_layers + c->final_norm
                                                : 3 * c->decoder_layers + c->embed_norm;
    fixture_close(&f);
    expect_fewer_calls_without(fixtures[_i], CLF_OP_GEMM_LAYERNORM, fused);
}
END_TEST

/* The steps' counts (clf_decode_result.step_calls, step_s, host_s): greedy and beam 3 on
 * the CPU; with want_attention a step downloads its attention rows too, one call more per
 * step and nothing else different. */
START_TEST(step_calls_counted)
{
    fixture f;
    fixture_open(&f, "cpu", "pre_tutorial");
    for (int beam = 1; beam <= 3; beam += 2) {
        clf_decode_opts o;
        clf_decode_result a, b;
        clf_decode_opts_default(&f.t.cfg.model, &o);
        o.max_len = MAXOUT;
        o.beam = beam;
        CLF_ASSERT_OK(clf_decode(f.t.m, f.src, B, S, &o, &a));
        o.want_attention = 1;
        CLF_ASSERT_OK(clf_decode(f.t.m, f.src, B, S, &o, &b));
        ck_assert_int_gt(a.steps, 0);
        ck_assert_int_eq(a.steps, b.steps);
        /* at least the layers' ops */
        ck_assert_int_ge(a.step_calls, (long long)a.steps * f.t.cfg.model.decoder_layers);
        ck_assert_int_eq(b.step_calls, a.step_calls + b.steps);
        ck_assert(a.step_s > 0.0 && a.host_s >= 0.0 && a.host_s <= a.step_s);
        clf_decode_result_free(&a);
        clf_decode_result_free(&b);
    }
    fixture_close(&f);
}
END_TEST

/* sync_steps outside [0, CLF_DECODE_SYNC_STEPS_MAX] is refused, naming it */
static void o_refuses_sync_steps(fixture *f)
{
    clf_decode_opts o;
    clf_decode_result r;
    clf_decode_opts_default(&f->t.cfg.model, &o);
    o.max_len = 3;
    o.sync_steps = CLF_DECODE_SYNC_STEPS_MAX + 1;
    ck_assert_int_eq(clf_decode(f->t.m, f->src, B, S, &o, &r), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "sync_steps"), "%s", clf_last_error());
}

/* The hypotheses of two decodes are the same: tokens, lengths and finished exactly,
 * log-probabilities and scores bit for bit (tol 0) or within tol relative. */
static void expect_same_hyps(const clf_decode_result *x, const clf_decode_result *y, int n,
                             double tol, const char *what)
{
    for (int i = 0; i < n; i++) {
        const clf_hypothesis *a = &x->hyps[i], *b = &y->hyps[i];
        ck_assert_msg(a->len == b->len && a->finished == b->finished &&
                          (a->len == 0 ||
                           memcmp(a->tokens, b->tokens, sizeof(int32_t) * (size_t)a->len) == 0),
                      "%s, hypothesis %d: length %d/%d, finished %d/%d, or the tokens differ", what,
                      i, a->len, b->len, a->finished, b->finished);
        ck_assert_msg((a->logprob == b->logprob && a->score == b->score) ||
                          (fabs(a->logprob - b->logprob) <= tol * fabs(b->logprob) &&
                           fabs(a->score - b->score) <= tol * fabs(b->score)),
                      "%s, hypothesis %d: logprob %.9g/%.9g, score %.9g/%.9g", what, i, a->logprob,
                      b->logprob, a->score, b->score);
    }
}

/* Decoding running steps ahead of the host (sync_steps 2, 3, 8) gives what it gives step
 * by step (1): greedy and beam search (3, and 4 with 2 best, where the device chooses the
 * beams: beam_choose), with an EOS that ends sentences at different steps (some inside a run
 * ahead), a forced first token, a forced last EOS, a banned id with transformers' beam rules
 * and a length penalty, and max_len not a multiple of the run. One sentence: the same bits.
 * Four: the same tokens, the sums within 1e-6 relative, because a sentence that ended runs
 * on in the batch to the end of the run, and the CPU's products of another number of rows
 * may round differently (its few-row kernels against SGEMM). */
static void ahead_equals_every_step_on(const char *backend, const char *name)
{
    fixture f;
    fixture_open(&f, backend, name);
    const int eos = pick_eos(&f);
    for (int variant = 0; variant < 4; variant++) {
        clf_model_config cfg = f.t.cfg.model;
        cfg.n_banned_ids = variant == 3;
        cfg.banned_ids[0] = 5;
        clf_model *m = NULL;
        CLF_ASSERT_OK(clf_model_create(&cfg, f.t.w, f.t.api, f.t.be, &m));
        const int beams[3][2] = {{1, 1}, {3, 1}, {4, 2}};
        for (int bi = 0; bi < 3; bi++)
            for (int nb = 1; nb <= B; nb += B - 1) {
                clf_decode_opts o;
                clf_decode_opts_default(&cfg, &o);
                o.max_len = MAXOUT - 1;
                o.eos_id = eos;
                o.beam = beams[bi][0];
                o.n_best = beams[bi][1];
                o.forced_bos_id = variant == 1 ? 5 : -1;
                o.forced_eos = variant == 2;
                o.style = variant == 3 ? CLF_BEAM_HF : CLF_BEAM_GNMT;
                o.length_penalty = variant == 3 ? 1.0f : 0.6f;
                o.sync_steps = 1;
                clf_decode_result ref;
                CLF_ASSERT_OK(clf_decode(m, f.src, nb, S, &o, &ref));
                const int ahead[3] = {2, 3, 8};
                for (int a = 0; a < 3; a++) {
                    clf_decode_result r;
                    char what[128];
                    o.sync_steps = ahead[a];
                    CLF_ASSERT_OK(clf_decode(m, f.src, nb, S, &o, &r));
                    snprintf(what, sizeof what,
                             "%s, variant %d, beam %d, %d sentences, sync_steps %d", name, variant,
                             o.beam, nb, ahead[a]);
                    expect_same_hyps(&ref, &r, nb * o.n_best, nb == 1 ? 0.0 : 1e-6, what);
                    ck_assert_int_ge(r.steps, ref.steps); /* ended sentences may run on */
                    clf_decode_result_free(&r);
                }
                clf_decode_result_free(&ref);
            }
        clf_model_free(m);
    }
    if (strcmp(backend, "cpu") == 0)
        o_refuses_sync_steps(&f);
    fixture_close(&f);
}

START_TEST(ahead_equals_every_step)
{
    ahead_equals_every_step_on("cpu", fixtures[_i]);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
    fixture f;
    fixture_open(&f, "cpu", "pre_tutorial");
    clf_decode_opts o;
    clf_decode_result r;
    clf_decode_opts_default(&f.t.cfg.model, &o);
    o.max_len = 5;
    o.n_best = 2; /* > beam */
    ck_assert_int_eq(clf_decode(f.t.m, f.src, B, S, &o, &r), CLF_ERR_INPUT);
    o.n_best = 1;
    o.max_len = 0;
    ck_assert_int_eq(clf_decode(f.t.m, f.src, B, S, &o, &r), CLF_ERR_INPUT);
    o.max_len = 5;
    f.src[5] = 999; /* outside src_vocab */
    ck_assert_int_eq(clf_decode(f.t.m, f.src, B, S, &o, &r), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "999"), "%s", clf_last_error());
    f.src[5] = 4;
    o.max_len = 1000; /* capped by model.max_len - 1, not an error */
    o.eos_id = 0;
    CLF_ASSERT_OK(clf_decode(f.t.m, f.src, 1, S, &o, &r));
    ck_assert_int_le(r.hyps[0].len, f.t.cfg.model.max_len - 1);
    clf_decode_result_free(&r);
    fixture_close(&f);
}
END_TEST

/* A decode whose plan is over CLF_DECODE_BYTES_MAX is refused before anything is allocated,
 * naming batch, beam, max_len and src_len; clf_decode_check_plan says the same without
 * decoding. Model: 1 decoder layer of d_model 16, max_len 4096: a hypothesis' self cache
 * holds 4095 positions x 2 x 16 floats = 524160 bytes; 1000 sentences x beam 64 plan
 * 64000 x 524160 bytes = 31.24 GiB of it (CPU backend: beams share rows, no spare copy). */
START_TEST(plan_over_the_limit_is_refused)
{
    clf_config cfg;
    clf_weights *w;
    const clf_backend_api *api;
    clf_backend *be;
    clf_model *m;
    CLF_ASSERT_OK(clf_config_parse_string("model: {src_vocab: 7, tgt_vocab: 6, max_len: 4096, "
                                          "d_model: 16, layers: 1, heads: 2, d_ff: 16}\n",
                                          "plan.yaml", &cfg));
    CLF_ASSERT_OK(clf_weights_init(&cfg.model, 1, &w));
    clf_test_open_backend("cpu", &api, &be);
    ck_assert_int_eq(api->supports(be, CLF_OP_ATTENTION_KV_ROWS), 1);
    CLF_ASSERT_OK(clf_model_create(&cfg.model, w, api, be, &m));
    enum { PB = 1000, PS = 2 };
    int32_t *src = malloc(sizeof(int32_t) * PB * PS);
    for (int i = 0; i < PB * PS; i++)
        src[i] = 4;
    clf_decode_opts o;
    clf_decode_result r;
    clf_decode_opts_default(&cfg.model, &o);
    o.beam = 64;
    o.max_len = 4095;
    ck_assert_int_eq(clf_decode(m, src, PB, PS, &o, &r), CLF_ERR_INPUT);
    ck_assert_ptr_null(r.hyps);
    const char *want = "decode: batch 1000 x beam 64 x max_len 4095 (src_len 2) plans 31.";
    ck_assert_msg(strstr(clf_last_error(), want) &&
                      strstr(clf_last_error(), "self-attention caches 31.24 GiB") &&
                      strstr(clf_last_error(), "more than the limit of 16.00 GiB"),
                  "%s", clf_last_error());
    ck_assert_int_eq(clf_decode_check_plan(m, PB, PS, &o), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), want), "%s", clf_last_error());
    /* half the beam: 15.62 GiB of caches, within the bound (checked, not decoded) */
    o.beam = 32;
    CLF_ASSERT_OK(clf_decode_check_plan(m, PB, PS, &o));
    /* a batch x beam past INT_MAX hypotheses is refused, not overflowed */
    o.beam = 1 << 20;
    o.max_len = 1;
    ck_assert_int_eq(clf_decode_check_plan(m, 1 << 12, PS, &o), CLF_ERR_INPUT);
    /* a plan within it decodes */
    o.beam = 2;
    o.max_len = 3;
    CLF_ASSERT_OK(clf_decode(m, src, 2, PS, &o, &r));
    clf_decode_result_free(&r);
    free(src);
    clf_model_free(m);
    api->close(be);
    clf_weights_free(w);
}
END_TEST

/* ---- beam search against exhaustive search ----
 *
 * A tiny model whose hypotheses can all be scored: target vocabulary V = 6 ([UNK] 0,
 * [PAD] 1, [SOS] 2, [EOS] 3, 4, 5), at most M = 4 output tokens. The exhaustive search
 * runs the full forward pass (not the decoder's cached steps) on every prefix of up to
 * M - 1 tokens other than EOS, one batch per length, and scores every hypothesis there is:
 * each prefix of l < M tokens followed by EOS (finished), and each run of M tokens without
 * EOS (stopped at max_len): sum_{l<M} 5^l + 5^M = 781 of them. A hypothesis' score is its
 * log-prob sum (EOS included) divided by ((5 + len + finished) / 6)^alpha, as decode.h says.
 *
 * With beam K = (V-1)^M = 625 beam search prunes nothing: at step t the (V-1)^t <= K live
 * prefixes all survive, top_choices examines 2K >= V (V-1)^(M-1) continuations, i.e. all of
 * them, and the 156 that finish before the last step stay below K. Its n-best list must then
 * be the exhaustive one for any length penalty. With K = V^(M-1) = 216 the last step keeps
 * only the best K continuations by log-prob: still the exhaustive n-best without a length
 * penalty (what it drops ranks below K kept ones), which is checked too.
 *
 * Tolerance: 1e-4 per token on log-probs, as in check_beam (F32 sums along two different
 * graphs), so 4e-4 per hypothesis. Ranks whose exhaustive score lies within 2 * 4e-4 of a
 * neighbour's are ties the two paths may order either way: there only the scores are
 * compared; elsewhere the hypothesis itself must be the same. */
enum { XV = 6, XM = 4, XS = 5, XN = 40, XEOS = 3, XPAD = 1 };
#define X_TOL (1e-4 * XM)

typedef struct exhaustive_hyp {
    int32_t tokens[XM];
    int len, finished;
    double logprob, score;
} exhaustive_hyp;

static const char *tiny_yaml = "model:\n"
                               "  src_vocab: 7\n"
                               "  tgt_vocab: 6\n"
                               "  max_len: 8\n"
                               "  d_model: 8\n"
                               "  layers: 2\n"
                               "  heads: 2\n"
                               "  d_ff: 16\n"
                               "  norm: pre\n"
                               "  dropout: 0.0\n"
                               "  pad_id: 1\n";

/* Weights uniform in [-1, 1] (wider than the init's, so that scores spread out), and a
 * projection that gives [PAD] a logit of -30: `forward` masks [PAD] in tgt as a key while
 * decoding does not, so a prefix holding it cannot be scored the same way; at -30 such
 * hypotheses rank below everything compared (checked). */
static void tiny_model(clf_config *cfg, clf_weights **w, const clf_backend_api **api,
                       clf_backend **be, clf_model **m)
{
    CLF_ASSERT_OK(clf_config_parse_string(tiny_yaml, "tiny.yaml", cfg));
    CLF_ASSERT_OK(clf_weights_init(&cfg->model, 1, w));
    for (int i = 0; i < (*w)->count; i++)
        clf_test_fill((*w)->data[i], (size_t)clf_weight_spec_numel(&(*w)->specs[i]),
                      100u + (unsigned)i, -1.0f, 1.0f);
    const int d = cfg->model.d_model;
    int pw = clf_weights_find(*w, "projection_layer.proj.weight");
    int pb = clf_weights_find(*w, "projection_layer.proj.bias");
    ck_assert(pw >= 0 && pb >= 0);
    memset((*w)->data[pw] + (size_t)XPAD * d, 0, sizeof(float) * d);
    (*w)->data[pb][XPAD] = -30.0f;
    clf_test_open_backend("cpu", api, be);
    CLF_ASSERT_OK(clf_model_create(&cfg->model, *w, *api, *be, m));
}

static double penalized(double logprob, int len, int finished, double alpha)
{
    return logprob / pow((5.0 + len + finished) / 6.0, alpha);
}

static int exhaustive_desc(const void *a, const void *b)
{
    const exhaustive_hyp *x = a, *y = b;
    return (x->score < y->score) - (x->score > y->score);
}

/* Every hypothesis of src [1, XS], scored with the full forward pass, best first. */
static int exhaustive_search(clf_model *m, const clf_model_config *c, const int32_t *src,
                             double alpha, exhaustive_hyp *out)
{
    int n_out = 0, n_pre = 1;
    /* prefixes of length l: [n_pre, XM] tokens and their log-prob sums */
    int32_t *pre = calloc((size_t)625 * XM, sizeof(int32_t));
    double *pre_lp = calloc(625, sizeof(double));
    for (int l = 0; l < XM; l++) {
        const int T = l + 1;
        int32_t *srcs = malloc(sizeof(int32_t) * n_pre * XS);
        int32_t *tgt = malloc(sizeof(int32_t) * n_pre * T);
        float *logits = malloc(sizeof(float) * n_pre * T * XV);
        for (int p = 0; p < n_pre; p++) {
            memcpy(srcs + p * XS, src, sizeof(int32_t) * XS);
            tgt[p * T] = 2;
            memcpy(tgt + p * T + 1, pre + p * XM, sizeof(int32_t) * l);
        }
        clf_forward_io io = {
            .batch = n_pre, .src_len = XS, .tgt_len = T, .src = srcs, .tgt = tgt, .logits = logits};
        CLF_ASSERT_OK(clf_model_forward(m, &io));
        int32_t *next = calloc((size_t)n_pre * (XV - 1) * XM, sizeof(int32_t));
        double *next_lp = calloc((size_t)n_pre * (XV - 1), sizeof(double));
        int n_next = 0;
        for (int p = 0; p < n_pre; p++) {
            const float *row = logits + ((size_t)p * T + l) * XV;
            double mx = -INFINITY, sum = 0;
            for (int v = 0; v < XV; v++)
                mx = fmax(mx, row[v]);
            for (int v = 0; v < XV; v++)
                sum += exp(row[v] - mx);
            for (int v = 0; v < XV; v++) {
                double lp = pre_lp[p] +
                            (c->output == CLF_OUTPUT_LOG_SOFTMAX ? row[v] : row[v] - mx - log(sum));
                if (v == XEOS || l + 1 == XM) {
                    exhaustive_hyp *h = &out[n_out++];
                    memcpy(h->tokens, pre + p * XM, sizeof(int32_t) * l);
                    h->finished = v == XEOS;
                    h->len = h->finished ? l : l + 1;
                    if (!h->finished)
                        h->tokens[l] = v;
                    h->logprob = lp;
                    h->score = penalized(lp, h->len, h->finished, alpha);
                    continue;
                }
                memcpy(next + n_next * XM, pre + p * XM, sizeof(int32_t) * l);
                next[n_next * XM + l] = v;
                next_lp[n_next++] = lp;
            }
        }
        memcpy(pre, next, sizeof(int32_t) * n_next * XM);
        memcpy(pre_lp, next_lp, sizeof(double) * n_next);
        n_pre = n_next;
        free(next);
        free(next_lp);
        free(srcs);
        free(tgt);
        free(logits);
    }
    free(pre);
    free(pre_lp);
    qsort(out, (size_t)n_out, sizeof *out, exhaustive_desc);
    return n_out;
}

static int same_hyp(const clf_hypothesis *h, const exhaustive_hyp *e)
{
    return h->len == e->len && h->finished == e->finished &&
           memcmp(h->tokens, e->tokens, sizeof(int32_t) * (size_t)h->len) == 0;
}

static void check_beam_exhaustive(int beam, double alpha)
{
    clf_config cfg;
    clf_weights *w;
    const clf_backend_api *api;
    clf_backend *be;
    clf_model *m;
    tiny_model(&cfg, &w, &api, &be, &m);
    static const int32_t src[XS] = {2, 4, 6, 5, 3};
    exhaustive_hyp *all = malloc(sizeof(exhaustive_hyp) * 1024);
    const int n_all = exhaustive_search(m, &cfg.model, src, alpha, all);
    ck_assert_int_eq(n_all, 156 + 625);

    clf_decode_opts o;
    clf_decode_result r;
    clf_decode_opts_default(&cfg.model, &o);
    o.beam = beam;
    o.n_best = XN;
    o.max_len = XM;
    o.length_penalty = (float)alpha;
    CLF_ASSERT_OK(clf_decode(m, src, 1, XS, &o, &r));
    int exact = 0;
    for (int i = 0; i < XN; i++) {
        const clf_hypothesis *h = &r.hyps[i];
        const exhaustive_hyp *e = &all[i];
        for (int t = 0; t < e->len; t++)
            ck_assert_msg(e->tokens[t] != XPAD, "exhaustive rank %d holds [PAD]", i);
        /* the beam's own numbers for its hypothesis are the full pass's */
        int j = 0;
        while (j < n_all && !same_hyp(h, &all[j]))
            j++;
        ck_assert_msg(j < n_all, "beam %d rank %d: hypothesis not in the exhaustive set", beam, i);
        ck_assert_msg(fabs(h->logprob - all[j].logprob) <= X_TOL &&
                          fabs(h->score - all[j].score) <= X_TOL,
                      "beam %d rank %d: logprob %.6f score %.6f, full forward %.6f and %.6f", beam,
                      i, h->logprob, h->score, all[j].logprob, all[j].score);
        /* the i-th score is the exhaustive i-th; the hypothesis too where it is no tie */
        ck_assert_msg(fabs(h->score - e->score) <= 2 * X_TOL,
                      "beam %d alpha %g rank %d: score %.6f, exhaustive %.6f", beam, alpha, i,
                      h->score, e->score);
        const int tie = (i > 0 && all[i - 1].score - e->score <= 2 * X_TOL) ||
                        e->score - all[i + 1].score <= 2 * X_TOL;
        if (!tie) {
            ck_assert_msg(same_hyp(h, e),
                          "beam %d alpha %g rank %d: beam found another hypothesis than the "
                          "exhaustive search (len %d vs %d, score %.6f vs %.6f)",
                          beam, alpha, i, h->len, e->len, h->score, e->score);
            exact++;
        }
    }
    /* the scores spread: most ranks are compared hypothesis by hypothesis */
    ck_assert_msg(exact >= XN / 2, "only %d of %d ranks are no tie", exact, XN);
    clf_decode_result_free(&r);
    free(all);
    clf_model_free(m);
    api->close(be);
    clf_weights_free(w);
}

START_TEST(beam_equals_exhaustive_search)
{
    check_beam_exhaustive(625, 0.0); /* (V-1)^M: nothing pruned */
    check_beam_exhaustive(625, 1.0); /* ... so any length penalty ranks as exhaustively */
    check_beam_exhaustive(216, 0.0); /* V^(M-1): exact without a length penalty */
}
END_TEST

static Suite *decode_suite(void)
{
    Suite *s = suite_create("decode");
    TCase *tc = tcase_create("cpu");
    tcase_add_loop_test(tc, greedy_equals_full_forward_argmax_cpu, 0, N_FIXTURES);
    tcase_add_loop_test(tc, beam_scores_match_full_forward_cpu, 0, N_FIXTURES);
    tcase_add_loop_test(tc, batch_independence_cpu, 0, N_FIXTURES);
    tcase_add_loop_test(tc, half_weights_cpu, 0, N_FIXTURES);
    tcase_add_test(tc, half_weights_refuse_out_of_range);
    tcase_add_test(tc, step_calls_counted);
    tcase_add_test(tc, bad_arguments_are_refused);
    tcase_add_test(tc, plan_over_the_limit_is_refused);
    tcase_add_loop_test(tc, shared_rows_equal_copied_caches, 0, N_FIXTURES);
    tcase_add_loop_test(tc, device_topk_equals_host_choice, 0, N_FIXTURES);
    tcase_add_loop_test(tc, topk_log_softmax_equals_two_ops, 0, N_FIXTURES);
    tcase_add_loop_test(tc, attention_append_equals_two_products, 0, N_FIXTURES);
    tcase_add_loop_test(tc, gemm_layernorm_equals_two_ops, 0, N_FIXTURES);
    tcase_add_loop_test(tc, ahead_equals_every_step, 0, N_FIXTURES);
    suite_add_tcase(s, tc);
    TCase *ex = tcase_create("exhaustive");
    tcase_add_test(ex, beam_equals_exhaustive_search);
    suite_add_tcase(s, ex);
#ifdef CLF_HAVE_OPENCL
    TCase *ocl = tcase_create("opencl");
    /* Each fixture re-runs the full forward pass for every decoded token (hundreds of
     * passes): on a simulated device (CLF_TEST_SMALL) that takes hours, so there the
     * first fixture only, greedy and F16 weights (which read gemm_rows_half). */
    const int n_ocl = clf_test_small() ? 1 : N_FIXTURES;
    tcase_add_loop_test(ocl, greedy_equals_full_forward_opencl, 0, n_ocl);
    tcase_add_loop_test(ocl, replay_equals_op_by_op_opencl, 0, n_ocl);
    tcase_add_loop_test(ocl, ahead_equals_every_step_opencl, 0, n_ocl);
    if (!clf_test_small())
        tcase_add_loop_test(ocl, beam_scores_match_full_forward_opencl, 0, n_ocl);
    tcase_add_loop_test(ocl, half_weights_opencl, 0, n_ocl);
    suite_add_tcase(s, ocl);
#endif
    return s;
}

int main(void)
{
    return clf_test_main(decode_suite());
}
