/* Continuous decoding (clf_decode_stream) against clf_decode: sentences that join a running
 * batch at different steps, with different options in one batch (greedy, greedy with
 * scores, GNMT and transformers-style beams, different max_len), fewer rows than
 * sentences (so that they wait) and more steps than the ring of cache blocks holds (so that
 * blocks are rewritten), must each get what clf_decode gives that sentence alone: the same
 * tokens, and log-probabilities and scores within 1e-4 (the products' sizes differ, so
 * the last bits may). Also cancelling, refusals, and the same on OpenCL when built. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/config.h"
#include "clformer/decode.h"
#include "clformer/model.h"
#include "clformer/weights.h"
#include "testutil.h"

enum { N = 14, S = 9, MAXOUT = 7 };

typedef struct fixture {
    clf_test_model t;
    int32_t src[N][S];
    int len[N]; /* framed length */
} fixture;

static void fixture_open(fixture *f, const char *backend, const char *name)
{
    clf_test_model_open(&f->t, backend, name);
    unsigned x = 777;
    for (int i = 0; i < N; i++) {
        const int words = (i * 5) % (S - 2); /* 0..S-3 words */
        f->len[i] = words + 2;
        for (int j = 0; j < f->len[i]; j++) {
            x = x * 1103515245u + 12345u;
            int32_t id = 4 + (int32_t)((x >> 16) % (unsigned)(f->t.cfg.model.src_vocab - 4));
            f->src[i][j] = j == 0 ? 2 : j <= words ? id : 3;
        }
    }
}

static void fixture_close(fixture *f)
{
    clf_test_model_close(&f->t);
}

/* f's model's default decoding options, up to MAXOUT tokens. */
static void default_opts(const fixture *f, clf_decode_opts *o)
{
    clf_decode_opts_default(&f->t.cfg.model, o);
    o->max_len = MAXOUT;
}

/* A stream of max_rows rows over f's model, for sources of up to S tokens, MAXOUT out,
 * arrivals held back up to join_wait steps. */
static clf_decode_stream *open_stream_wait(const fixture *f, int max_rows, int join_wait)
{
    clf_decode_stream *s;
    clf_decode_stream_opts so = {
        .max_rows = max_rows, .max_src_len = S, .max_out = MAXOUT, .join_wait = join_wait};
    CLF_ASSERT_OK(clf_decode_stream_open(f->t.m, &so, &s));
    return s;
}

static clf_decode_stream *open_stream(const fixture *f, int max_rows)
{
    return open_stream_wait(f, max_rows, 0);
}

/* The CPU fixture name, o its model's default options and the stream returned of max_rows
 * rows over it. */
static clf_decode_stream *stream_fixture(fixture *f, const char *name, int max_rows,
                                         clf_decode_opts *o)
{
    fixture_open(f, "cpu", name);
    default_opts(f, o);
    return open_stream(f, max_rows);
}

/* Sentence i's options: a mix of every kind, with an EOS the random models emit. */
static void opts_of(const fixture *f, int i, int eos, clf_decode_opts *o)
{
    clf_decode_opts_default(&f->t.cfg.model, o);
    o->eos_id = eos;
    o->max_len = i % 4 == 3 ? 3 : MAXOUT;
    switch (i % 5) {
    case 0:
        break; /* greedy on the device */
    case 1:
        o->want_scores = 1;
        break;
    case 2:
        o->beam = 3, o->n_best = 2, o->length_penalty = 0.6f;
        break;
    case 3:
        o->beam = 2, o->n_best = 2, o->length_penalty = 1.0f, o->style = CLF_BEAM_HF;
        break;
    default:
        o->beam = 2, o->n_best = 1, o->forced_eos = 1;
        break;
    }
}

/* An EOS id that ends sentences at different steps: the third token of sentence 1's
 * greedy output with [UNK] as EOS. */
static int pick_eos(fixture *f)
{
    clf_decode_opts o;
    clf_decode_result r;
    default_opts(f, &o);
    o.eos_id = 0;
    CLF_ASSERT_OK(clf_decode(f->t.m, f->src[1], 1, f->len[1], &o, &r));
    int eos = r.hyps[0].len > 2 ? r.hyps[0].tokens[2] : 3;
    clf_decode_result_free(&r);
    return eos;
}

static void same_hyps(const char *what, int i, const clf_decode_result *want,
                      const clf_decode_result *got)
{
    ck_assert_int_eq(got->batch, 1);
    ck_assert_int_eq(got->n_best, want->n_best);
    for (int h = 0; h < want->n_best; h++) {
        const clf_hypothesis *x = &want->hyps[h], *y = &got->hyps[h];
        ck_assert_msg(x->len == y->len && x->finished == y->finished &&
                          (x->len == 0 ||
                           memcmp(x->tokens, y->tokens, sizeof(int32_t) * (size_t)x->len) == 0),
                      "%s: sentence %d hypothesis %d: %d tokens (finished %d) alone, %d (%d) in "
                      "the stream",
                      what, i, h, x->len, x->finished, y->len, y->finished);
        ck_assert_msg((isinf(x->logprob) && isinf(y->logprob)) ||
                          fabsf(x->logprob - y->logprob) <= 1e-4f * (1.0f + fabsf(x->logprob)),
                      "%s: sentence %d hypothesis %d: logprob %g alone, %g in the stream", what, i,
                      h, x->logprob, y->logprob);
        ck_assert_msg((isinf(x->score) && isinf(y->score)) ||
                          fabsf(x->score - y->score) <= 1e-4f * (1.0f + fabsf(x->score)),
                      "%s: sentence %d hypothesis %d: score %g alone, %g in the stream", what, i, h,
                      x->score, y->score);
    }
}

/* Sentences arrive over time into a stream of max_rows rows (arrivals held back up to
 * join_wait steps); every result must equal the sentence decoded alone. */
static void check_stream_wait(const char *backend, const char *name, int max_rows, int join_wait)
{
    fixture f;
    fixture_open(&f, backend, name);
    const int eos = pick_eos(&f);
    clf_decode_result want[N];
    for (int i = 0; i < N; i++) {
        clf_decode_opts o;
        opts_of(&f, i, eos, &o);
        CLF_ASSERT_OK(clf_decode(f.t.m, f.src[i], 1, f.len[i], &o, &want[i]));
    }
    clf_decode_stream *s = open_stream_wait(&f, max_rows, join_wait);
    int added = 0, got = 0, seen[N] = {0};
    long long steps = 0;
    while (got < N) {
        /* three at first, then one every other step */
        for (int k = 0; added < N && k < (added == 0 ? 3 : (steps % 2 == 0)); k++) {
            clf_decode_opts o;
            opts_of(&f, added, eos, &o);
            CLF_ASSERT_OK(
                clf_decode_stream_add(s, f.src[added], f.len[added], &o, 1000u + (uint64_t)added));
            added++;
        }
        CLF_ASSERT_OK(clf_decode_stream_step(s));
        steps++;
        ck_assert_msg(steps < 1000, "the stream does not finish");
        clf_decode_stream_state st;
        clf_decode_stream_get_state(s, &st);
        ck_assert_int_le(st.rows, max_rows);
        uint64_t tag;
        clf_decode_result r;
        while (clf_decode_stream_take(s, &tag, &r)) {
            const int i = (int)(tag - 1000u);
            ck_assert(i >= 0 && i < N && !seen[i]);
            seen[i] = 1;
            same_hyps(name, i, &want[i], &r);
            clf_decode_result_free(&r);
            got++;
        }
    }
    /* the ring of max_out blocks went round more than once */
    ck_assert_int_gt(steps, 2 * MAXOUT);
    clf_decode_stream_free(s);
    for (int i = 0; i < N; i++)
        clf_decode_result_free(&want[i]);
    fixture_close(&f);
}

static void check_stream(const char *backend, const char *name, int max_rows)
{
    check_stream_wait(backend, name, max_rows, 0);
}

static const char *const fixtures[] = {"pre_tutorial",          "post_standard",
                                       "pre_learned_pe",        "pre_swiglu_rms",
                                       "post_tied_decoder",     "pre_learned_offset_embed_norm",
                                       "post_offset_embed_norm"};
#define N_FIXTURES ((int)(sizeof fixtures / sizeof fixtures[0]))

START_TEST(stream_equals_alone_cpu)
{
    check_stream("cpu", fixtures[_i], 5);
}
END_TEST

/* The same with arrivals held back (2 steps at most: a lone greedy arrival waits while 3
 * or more of the 5 rows are busy). */
START_TEST(stream_equals_alone_join_wait_cpu)
{
    check_stream_wait("cpu", fixtures[_i], 5, 2);
}
END_TEST

/* Adds sentence i of f with options o to s as tag i, and runs one step; *st after it. */
static void add_and_step(fixture *f, clf_decode_stream *s, int i, const clf_decode_opts *o,
                         clf_decode_stream_state *st)
{
    if (i >= 0)
        CLF_ASSERT_OK(clf_decode_stream_add(s, f->src[i], f->len[i], o, (uint64_t)i));
    CLF_ASSERT_OK(clf_decode_stream_step(s));
    clf_decode_stream_get_state(s, st);
}

/* join_wait's rule (clformer/decode.h), max_rows 8: arrivals into a stream under half
 * full join at once; a lone one (1 row < max(8 / 8, 2)) into a stream at least half full
 * waits join_wait steps, then joins; two together join at once. Every result is still the
 * sentence's alone. */
START_TEST(stream_join_wait)
{
    fixture f;
    clf_decode_opts o;
    fixture_open(&f, "cpu", "post_standard");
    default_opts(&f, &o);
    o.eos_id = 0; /* [UNK]: long outputs, so that the first ones stay active */
    clf_decode_stream *s = open_stream_wait(&f, 8, 3);
    /* the sentences whose outputs run to MAXOUT (sentence 2's ends at once) */
    const int pick[7] = {0, 1, 3, 4, 5, 6, 7};
    clf_decode_result want[8] = {0};
    for (int i = 0; i < 7; i++) {
        CLF_ASSERT_OK(clf_decode(f.t.m, f.src[pick[i]], 1, f.len[pick[i]], &o, &want[pick[i]]));
        ck_assert_int_eq(want[pick[i]].hyps[0].len, MAXOUT);
    }
    clf_decode_stream_state st;
    for (int i = 0; i < 3; i++) /* into an idle stream: at once */
        CLF_ASSERT_OK(
            clf_decode_stream_add(s, f.src[pick[i]], f.len[pick[i]], &o, (uint64_t)pick[i]));
    add_and_step(&f, s, -1, &o, &st);
    ck_assert_int_eq(st.waiting, 0);
    ck_assert_int_eq(st.rows, 3);
    add_and_step(&f, s, pick[3], &o, &st); /* 3 rows busy, under half: at once */
    ck_assert_int_eq(st.waiting, 0);
    ck_assert_int_eq(st.rows, 4);
    add_and_step(&f, s, pick[4], &o, &st); /* 4 rows busy: waits 3 steps */
    ck_assert_int_eq(st.waiting, 1);
    add_and_step(&f, s, -1, &o, &st);
    ck_assert_int_eq(st.waiting, 1);
    add_and_step(&f, s, -1, &o, &st);
    ck_assert_int_eq(st.waiting, 1);
    ck_assert_int_eq(st.rows, 4);
    add_and_step(&f, s, -1, &o, &st);
    ck_assert_int_eq(st.waiting, 0);
    ck_assert_int_eq(st.rows, 5);
    /* two together (2 rows): at once */
    CLF_ASSERT_OK(clf_decode_stream_add(s, f.src[pick[5]], f.len[pick[5]], &o, (uint64_t)pick[5]));
    add_and_step(&f, s, pick[6], &o, &st);
    ck_assert_int_eq(st.waiting, 0);
    int got = 0, seen[8] = {0};
    for (int step = 0; got < 7 && step < 100; step++) {
        uint64_t tag;
        clf_decode_result r;
        while (clf_decode_stream_take(s, &tag, &r)) {
            ck_assert(tag < 8 && tag != 2 && !seen[tag]);
            seen[tag] = 1;
            same_hyps("join_wait", (int)tag, &want[tag], &r);
            clf_decode_result_free(&r);
            got++;
        }
        CLF_ASSERT_OK(clf_decode_stream_step(s));
    }
    ck_assert_int_eq(got, 7);
    for (int i = 0; i < 7; i++)
        clf_decode_result_free(&want[pick[i]]);
    clf_decode_stream_free(s);
    fixture_close(&f);
}
END_TEST

/* One row: sentences one at a time (beams cannot fit, so greedy only) */
START_TEST(stream_one_sentence_at_a_time)
{
    fixture f;
    clf_decode_opts o;
    clf_decode_stream *s = stream_fixture(&f, "pre_tutorial", 1, &o);
    clf_decode_result want[3];
    for (int i = 0; i < 3; i++) {
        CLF_ASSERT_OK(clf_decode(f.t.m, f.src[i], 1, f.len[i], &o, &want[i]));
        CLF_ASSERT_OK(clf_decode_stream_add(s, f.src[i], f.len[i], &o, (uint64_t)i));
    }
    int got = 0;
    for (int step = 0; got < 3 && step < 100; step++) {
        clf_decode_stream_state st;
        CLF_ASSERT_OK(clf_decode_stream_step(s));
        clf_decode_stream_get_state(s, &st);
        ck_assert_int_le(st.active, 1);
        uint64_t tag;
        clf_decode_result r;
        while (clf_decode_stream_take(s, &tag, &r)) {
            ck_assert_int_eq((int)tag, got); /* in arrival order */
            same_hyps("one row", got, &want[got], &r);
            clf_decode_result_free(&r);
            got++;
        }
    }
    ck_assert_int_eq(got, 3);
    for (int i = 0; i < 3; i++)
        clf_decode_result_free(&want[i]);
    clf_decode_stream_free(s);
    fixture_close(&f);
}
END_TEST

/* A cancelled sentence, waiting or active, gives nothing and frees its rows; the others
 * are unaffected. */
START_TEST(stream_cancel)
{
    fixture f;
    clf_decode_opts o;
    clf_decode_stream *s = stream_fixture(&f, "post_standard", 4, &o);
    o.eos_id = 0; /* [UNK]: long outputs, so that sentences are still active */
    clf_decode_result want;
    CLF_ASSERT_OK(clf_decode(f.t.m, f.src[2], 1, f.len[2], &o, &want));
    for (int i = 0; i < 6; i++)
        CLF_ASSERT_OK(clf_decode_stream_add(s, f.src[i], f.len[i], &o, (uint64_t)i));
    CLF_ASSERT_OK(clf_decode_stream_step(s));
    clf_decode_stream_state st, st2;
    clf_decode_stream_get_state(s, &st);
    ck_assert_int_eq(st.active + st.finished, 4);
    ck_assert_int_eq(st.waiting, 2);
    ck_assert_int_eq(clf_decode_stream_cancel(s, 0), 1); /* active or finished */
    ck_assert_int_eq(clf_decode_stream_cancel(s, 5), 1); /* waiting */
    ck_assert_int_eq(clf_decode_stream_cancel(s, 99), 0);
    clf_decode_stream_get_state(s, &st2);
    ck_assert_int_eq(st2.active + st2.finished, 3);
    ck_assert_int_eq(st2.rows, st2.active);
    ck_assert_int_eq(st2.waiting, 1);
    int got = 0, seen[6] = {0};
    for (int step = 0; step < 100 && got < 4; step++) {
        CLF_ASSERT_OK(clf_decode_stream_step(s));
        uint64_t tag;
        clf_decode_result r;
        while (clf_decode_stream_take(s, &tag, &r)) {
            ck_assert(tag != 0 && tag != 5 && tag < 6 && !seen[tag]);
            seen[tag] = 1;
            if (tag == 2)
                same_hyps("cancel", 2, &want, &r);
            clf_decode_result_free(&r);
            got++;
        }
    }
    ck_assert_int_eq(got, 4);
    /* sentences still in the stream are freed with it (the leak check of the ASan pass) */
    CLF_ASSERT_OK(clf_decode_stream_add(s, f.src[1], f.len[1], &o, 7));
    CLF_ASSERT_OK(clf_decode_stream_add(s, f.src[3], f.len[3], &o, 8));
    CLF_ASSERT_OK(clf_decode_stream_step(s));
    clf_decode_result_free(&want);
    clf_decode_stream_free(s);
    fixture_close(&f);
}
END_TEST

START_TEST(stream_refusals)
{
    fixture f;
    fixture_open(&f, "cpu", "pre_tutorial");
    clf_decode_stream *s = NULL;
    clf_decode_stream_opts so = {.max_rows = 0, .max_src_len = S, .max_out = MAXOUT};
    ck_assert_int_eq(clf_decode_stream_open(f.t.m, &so, &s), CLF_ERR_INPUT);
    ck_assert_ptr_null(s);
    so = (clf_decode_stream_opts){.max_rows = 1 << 20, .max_src_len = 64, .max_out = 63};
    ck_assert_int_eq(clf_decode_stream_open(f.t.m, &so, &s), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "CLF_DECODE_BYTES_MAX"), "%s", clf_last_error());
    so = (clf_decode_stream_opts){
        .max_rows = 2, .max_src_len = 4, .max_out = MAXOUT, .join_wait = -1};
    ck_assert_int_eq(clf_decode_stream_open(f.t.m, &so, &s), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "join_wait -1"), "%s", clf_last_error());
    so = (clf_decode_stream_opts){.max_rows = 2, .max_src_len = 4, .max_out = MAXOUT};
    CLF_ASSERT_OK(clf_decode_stream_open(f.t.m, &so, &s));
    clf_decode_opts o;
    default_opts(&f, &o);
    ck_assert_int_eq(clf_decode_stream_add(s, f.src[3], 9, &o, 1), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "max_src_len 4"), "%s", clf_last_error());
    o.beam = o.n_best = 3;
    ck_assert_int_eq(clf_decode_stream_add(s, f.src[0], 2, &o, 1), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "max_rows (2)"), "%s", clf_last_error());
    o.beam = o.n_best = 1;
    o.want_attention = 1;
    ck_assert_int_eq(clf_decode_stream_add(s, f.src[0], 2, &o, 1), CLF_ERR_INPUT);
    o.want_attention = 0;
    const int32_t bad[3] = {2, 1 << 30, 3};
    ck_assert_int_eq(clf_decode_stream_add(s, bad, 3, &o, 1), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "position 1"), "%s", clf_last_error());
    clf_decode_stream_state st;
    clf_decode_stream_get_state(s, &st);
    ck_assert_int_eq(st.waiting, 0);
    CLF_ASSERT_OK(clf_decode_stream_step(s)); /* nothing to do */
    clf_decode_stream_free(s);
    fixture_close(&f);
}
END_TEST

#ifdef CLF_HAVE_OPENCL
START_TEST(stream_equals_alone_opencl)
{
    check_stream("opencl", fixtures[_i], 5);
}
END_TEST
#endif

static Suite *stream_suite(void)
{
    Suite *s = suite_create("decode_stream");
    TCase *tc = tcase_create("cpu");
    tcase_add_loop_test(tc, stream_equals_alone_cpu, 0, N_FIXTURES);
    tcase_add_loop_test(tc, stream_equals_alone_join_wait_cpu, 0, 3);
    tcase_add_test(tc, stream_join_wait);
    tcase_add_test(tc, stream_one_sentence_at_a_time);
    tcase_add_test(tc, stream_cancel);
    tcase_add_test(tc, stream_refusals);
    suite_add_tcase(s, tc);
#ifdef CLF_HAVE_OPENCL
    TCase *ocl = tcase_create("opencl");
    tcase_add_loop_test(ocl, stream_equals_alone_opencl, 0, clf_test_small() ? 1 : 2);
    suite_add_tcase(s, ocl);
#endif
    return s;
}

int main(void)
{
    return clf_test_main(stream_suite());
}
