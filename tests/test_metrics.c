/* Corpus BLEU-4 on cases whose numbers are worked out by hand below, each also checked
 * against sacrebleu 2.6.0:
 *     BLEU(tokenize='none', smooth_method='none', force=True).corpus_score(hyps, [refs])
 * whose score, precisions (percent), bp, sys_len, ref_len, counts and totals are the
 * expected values here (sacrebleu is not needed to run the test). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/metrics.h"
#include "testutil.h"

/* BLEU is a handful of sums, logs and one exp: equal to sacrebleu to ~1e-13 relative. */
#define BLEU_TOL 1e-9

typedef struct expected {
    double score;
    double precision[4];
    double bp;
    int64_t hyp_len, ref_len;
    int64_t matches[4], totals[4];
} expected;

static void assert_bleu(const clf_bleu *b, const expected *e)
{
    ck_assert_msg(fabs(b->score - e->score) <= BLEU_TOL * 100, "score %.17g, expected %.17g",
                  b->score, e->score);
    for (int n = 0; n < 4; n++) {
        ck_assert_msg(fabs(b->precision[n] - e->precision[n]) <= BLEU_TOL * 100,
                      "p%d %.17g, expected %.17g", n + 1, b->precision[n], e->precision[n]);
        ck_assert_int_eq(b->matches[n], e->matches[n]);
        ck_assert_int_eq(b->totals[n], e->totals[n]);
    }
    ck_assert_msg(fabs(b->bp - e->bp) <= BLEU_TOL, "bp %.17g, expected %.17g", b->bp, e->bp);
    ck_assert_int_eq(b->hyp_len, e->hyp_len);
    ck_assert_int_eq(b->ref_len, e->ref_len);
}

/* Corpus BLEU through the text API and, with the words as ids, through the id API: both
 * must give e. */
static void check_corpus(const char *const *hyps, const char *const *refs, size_t n,
                         const expected *e)
{
    clf_bleu b;
    memset(&b, 0xff, sizeof b);
    CLF_ASSERT_OK(clf_bleu_corpus_text(hyps, refs, n, &b));
    assert_bleu(&b, e);
    ck_assert_int_eq(b.sentences, (int64_t)n);

    /* the words as ids, numbered in order of first appearance over the whole corpus */
    const char *seen[256];
    int n_seen = 0;
    int32_t *hid[16], *rid[16];
    int hl[16], rl[16];
    ck_assert_uint_le(n, 16);
    for (size_t i = 0; i < n; i++) {
        for (int side = 0; side < 2; side++) {
            const char *s = side ? refs[i] : hyps[i];
            int32_t *ids = malloc((strlen(s) + 1) * sizeof *ids);
            ck_assert_ptr_nonnull(ids);
            int k = 0;
            char *copy = strdup(s), *save = NULL;
            for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                int id = -1;
                for (int j = 0; j < n_seen && id < 0; j++)
                    if (strcmp(seen[j], w) == 0)
                        id = j;
                if (id < 0) {
                    ck_assert_int_lt(n_seen, 256);
                    seen[n_seen] = strdup(w);
                    id = n_seen++;
                }
                ids[k++] = id;
            }
            free(copy);
            (side ? rid : hid)[i] = ids;
            (side ? rl : hl)[i] = k;
        }
    }
    clf_bleu c;
    CLF_ASSERT_OK(
        clf_bleu_corpus((const int32_t *const *)hid, hl, (const int32_t *const *)rid, rl, n, &c));
    assert_bleu(&c, e);
    /* the same sentence by sentence, with clf_bleu_add */
    clf_bleu d;
    clf_bleu_init(&d);
    for (size_t i = 0; i < n; i++)
        CLF_ASSERT_OK(clf_bleu_add(&d, hid[i], hl[i], rid[i], rl[i]));
    assert_bleu(&d, e);
    for (size_t i = 0; i < n; i++) {
        free(hid[i]);
        free(rid[i]);
    }
    for (int j = 0; j < n_seen; j++)
        free((void *)seen[j]);
}

START_TEST(test_classic_clipping)
{
    /* Papineni et al.'s example of clipped counts: "the" x7 against a reference with two
     * "the": p1 = 2/7 = 28.571...%. No bigram matches, so p2 = 0 and (no smoothing)
     * BLEU = 0. c = 7 > r = 6: BP = 1. */
    const char *h[] = {"the the the the the the the"}, *r[] = {"the cat is on the mat"};
    expected e = {0.0, {100.0 * 2 / 7, 0, 0, 0}, 1.0, 7, 6, {2, 0, 0, 0}, {7, 6, 5, 4}};
    check_corpus(h, r, 1, &e);
}
END_TEST

START_TEST(test_one_word_differs)
{
    /* "a b c d e f" vs "a b c d e g": every n-gram matches but those with the last word:
     * p1 = 5/6, p2 = 4/5, p3 = 3/4, p4 = 2/3; their product is 120/360 = 1/3.
     * c = r = 6: BP = 1. BLEU = 100 * (1/3)^(1/4) = 75.98356856515926. */
    const char *h[] = {"a b c d e f"}, *r[] = {"a b c d e g"};
    expected e = {
        75.98356856515926, {100.0 * 5 / 6, 80.0, 75.0, 100.0 * 2 / 3}, 1.0, 6, 6, {5, 4, 3, 2},
        {6, 5, 4, 3}};
    check_corpus(h, r, 1, &e);
}
END_TEST

START_TEST(test_brevity_penalty)
{
    /* A hypothesis that is the first half of its reference: every precision is 1, but
     * c = 5 < r = 10: BP = exp(1 - 10/5) = exp(-1) = 0.36787944117144233, BLEU = 36.788. */
    const char *h[] = {"a b c d e"}, *r[] = {"a b c d e f g h i j"};
    expected e = {100.0 * exp(-1.0), {100, 100, 100, 100}, exp(-1.0), 5, 10,
                  {5, 4, 3, 2},      {5, 4, 3, 2}};
    check_corpus(h, r, 1, &e);
}
END_TEST

START_TEST(test_corpus_sums_counts)
{
    /* The two sentences above as one corpus: counts and lengths add up (this is not the
     * mean of sentence BLEUs). p1 = 10/11, p2 = 8/9, p3 = 6/7, p4 = 4/5, product
     * 1920/3465; c = 11, r = 16: BP = exp(1 - 16/11) = exp(-5/11) = 0.63473641894028...
     * BLEU = 100 * exp(-5/11) * (1920/3465)^(1/4) = 54.763716652924. */
    const char *h[] = {"a b c d e f", "a b c d e"};
    const char *r[] = {"a b c d e g", "a b c d e f g h i j"};
    expected e = {100.0 * exp(-5.0 / 11) * pow(1920.0 / 3465, 0.25),
                  {100.0 * 10 / 11, 100.0 * 8 / 9, 100.0 * 6 / 7, 80.0},
                  exp(-5.0 / 11),
                  11,
                  16,
                  {10, 8, 6, 4},
                  {11, 9, 7, 5}};
    ck_assert(fabs(e.score - 54.76371665292422) < 1e-9); /* sacrebleu's number */
    check_corpus(h, r, 2, &e);
}
END_TEST

START_TEST(test_repeated_ngrams_clipped)
{
    /* hyp "a a a b a b", ref "a b a b c":
     *   1-grams: hyp a4 b2, ref a2 b2 c1 -> min: 2 + 2 = 4 of 6
     *   2-grams: hyp aa2 ab2 ba1, ref ab2 ba1 bc1 -> 0 + 2 + 1 = 3 of 5
     *   3-grams: hyp aaa aab aba bab, ref aba bab abc -> 2 of 4
     *   4-grams: hyp aaab aaba abab, ref abab babc -> 1 of 3
     * product 24/360 = 1/15; c = 6 > r = 5: BP = 1; BLEU = 100 * 15^(-1/4) = 50.8132748. */
    const char *h[] = {"a a a b a b"}, *r[] = {"a b a b c"};
    expected e = {100.0 * pow(15.0, -0.25),
                  {100.0 * 4 / 6, 60, 50, 100.0 / 3},
                  1.0,
                  6,
                  5,
                  {4, 3, 2, 1},
                  {6, 5, 4, 3}};
    ck_assert(fabs(e.score - 50.81327481546149) < 1e-9); /* sacrebleu's number */
    check_corpus(h, r, 1, &e);
}
END_TEST

START_TEST(test_identical_and_disjoint)
{
    const char *same[] = {"the cat sat on the mat", "a b c d"};
    expected e = {100.0, {100, 100, 100, 100}, 1.0, 10, 10, {10, 8, 6, 4}, {10, 8, 6, 4}};
    check_corpus(same, same, 2, &e);

    const char *h[] = {"x y z w"}, *r[] = {"a b c d"};
    expected z = {0.0, {0, 0, 0, 0}, 1.0, 4, 4, {0, 0, 0, 0}, {4, 3, 2, 1}};
    check_corpus(h, r, 1, &z);
}
END_TEST

START_TEST(test_empty_and_short)
{
    /* an empty hypothesis: no n-grams, c = 0: BP = 0 and BLEU = 0 (sacrebleu: the same) */
    const char *h[] = {""}, *r[] = {"a b c"};
    expected e = {0.0, {0, 0, 0, 0}, 0.0, 0, 3, {0, 0, 0, 0}, {0, 0, 0, 0}};
    check_corpus(h, r, 1, &e);

    /* a correct 3-word corpus has no 4-grams: p4 undefined, BLEU 0 without smoothing */
    const char *s[] = {"a b c"};
    expected t = {0.0, {100, 100, 100, 0}, 1.0, 3, 3, {3, 2, 1, 0}, {3, 2, 1, 0}};
    check_corpus(s, s, 1, &t);

    /* no sentences at all */
    clf_bleu b;
    CLF_ASSERT_OK(clf_bleu_corpus(NULL, NULL, NULL, NULL, 0, &b));
    ck_assert(b.score == 0.0 && b.hyp_len == 0 && b.sentences == 0);
}
END_TEST

START_TEST(test_realistic_corpus)
{
    /* Six sentence pairs, one with extra white space; sacrebleu's values. */
    const char *h[] = {
        "the cat is on the mat .",
        "there is a cat on the mat .",
        "a dog barks loudly at night",
        "he read the book because he was interested in world history",
        ("it is a guide to action which ensures that the military always obeys the commands "
         "of the party"), /* one long line: the parentheses say the concatenation is meant */
        "  extra   spaces\tand tabs ",
    };
    const char *r[] = {
        "the cat sat on the mat .",
        "there is a cat on the mat .",
        "the dog barks at night",
        "he was interested in world history because he read the book",
        ("it is a guide to action that ensures that the military will forever heed party "
         "commands"),
        "extra spaces and tabs",
    };
    expected e = {59.46527084468104,
                  {83.33333333333333, 68.75, 52.38095238095238, 41.666666666666664},
                  1.0,
                  54,
                  51,
                  {45, 33, 22, 15},
                  {54, 48, 42, 36}};
    check_corpus(h, r, 6, &e);
}
END_TEST

START_TEST(test_bad_arguments)
{
    clf_bleu b;
    clf_bleu_init(&b);
    int32_t x[2] = {1, 2};
    ck_assert_int_eq(clf_bleu_add(&b, x, -1, x, 2), CLF_ERR_INPUT);
    ck_assert_int_eq(clf_bleu_add(&b, NULL, 2, x, 2), CLF_ERR_INPUT);
    ck_assert_int_eq(clf_bleu_add_text(&b, NULL, "a"), CLF_ERR_INPUT);
    ck_assert_int_eq(b.sentences, 0); /* unchanged */
    CLF_ASSERT_OK(clf_bleu_add(&b, NULL, 0, NULL, 0));
    ck_assert_int_eq(b.sentences, 1);
    const int32_t *hs[] = {x, x};
    int lens[] = {2, -3};
    ck_assert_int_eq(clf_bleu_corpus(hs, lens, hs, lens, 2, &b), CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "sentence 2"));
}
END_TEST

CLF_TEST_MAIN(clf_test_run, "metrics", "bleu", test_classic_clipping, test_one_word_differs,
              test_brevity_penalty, test_corpus_sums_counts, test_repeated_ngrams_clipped,
              test_identical_and_disjoint, test_empty_and_short, test_realistic_corpus,
              test_bad_arguments)
