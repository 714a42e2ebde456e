/* The model shipped in models/en-de-gettext, as scripts/setup.sh runs it: `clformer translate
 * -m` on held-out English UI messages, scored against their human German translations.
 *
 * The bounds are measured quality minus a margin, not outputs of the code under test: the
 * references are the catalogs' own translations (models/en-de-gettext/valid.de), and a
 * regression anywhere on the decode path (weights, F16 loading, SentencePiece, the model,
 * beam search) shows as a collapse of the score. BLEU here is on white-space tokens of the
 * detokenized text (clf_bleu_corpus_text), lower than the README's sacreBLEU figure, which
 * tokenizes punctuation off. The OpenCL backend must also agree with the CPU backend on
 * most lines (greedy decoding of the same F16 weights; the two backends' sums differ in
 * order, so an exact tie may go either way). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/metrics.h"
#include "testutil.h"

#define MODEL_DIR       CLF_MODELS_DIR "/en-de-gettext"
#define SENTENCES       100  /* the first lines of valid.en / valid.de */
#define MIN_BLEU_GREEDY 10.0 /* measured 14.33 on both backends; a broken decode path gives ~0 */
#define MIN_BLEU_BEAM   14.0 /* measured 18.88 */
#define MIN_SAME_AS_CPU 0.95 /* share of greedy lines the OpenCL backend decodes as the CPU */

/* Splits text into at most max lines in place; returns the count. */
static size_t split_lines(char *text, char **lines, size_t max)
{
    size_t n = 0;
    for (char *p = text; *p && n < max; n++) {
        lines[n] = p;
        char *nl = strchr(p, '\n');
        if (!nl)
            return n + 1;
        *nl = '\0';
        p = nl + 1;
    }
    return n;
}

/* Translates the first SENTENCES lines of valid.en with `opts` on backend; returns the
 * output text (the caller frees it) and checks one output line per input line. */
static char *translate(const char *backend, const char *opts, char **lines)
{
    char cmd[2048], out[64], err[64];
    snprintf(out, sizeof out, "%s", clf_test_tmp_path("out.txt"));
    snprintf(err, sizeof err, "%s", clf_test_tmp_path("err.txt"));
    snprintf(cmd, sizeof cmd,
             "head -n %d '%s/valid.en' | CLF_PLUGIN_PATH= '%s' translate -m '%s' --backend %s %s "
             ">'%s' 2>'%s'",
             SENTENCES, MODEL_DIR, CLF_CLI_PATH, MODEL_DIR, backend, opts, out, err);
    int rc = system(cmd);
    size_t len;
    char *e = clf_test_read_file(err, &len);
    ck_assert_msg(rc == 0, "%s: %s", cmd, e);
    free(e);
    char *text = clf_test_read_file(out, &len);
    ck_assert_int_eq(split_lines(text, lines, SENTENCES + 1), SENTENCES);
    return text;
}

/* Corpus BLEU of SENTENCES hypotheses against valid.de; prints it for the log. */
static double bleu_against_references(const char *what, char **hyps)
{
    size_t len;
    char *refs_text = clf_test_read_file(MODEL_DIR "/valid.de", &len);
    char *refs[SENTENCES + 1];
    ck_assert_uint_ge(split_lines(refs_text, refs, SENTENCES + 1), SENTENCES);
    clf_bleu b;
    CLF_ASSERT_OK(
        clf_bleu_corpus_text((const char *const *)hyps, (const char *const *)refs, SENTENCES, &b));
    printf("shipped_model: %s on %s: BLEU %.2f (white-space tokens, %d sentences)\n", what,
           clf_test_be_name, b.score, SENTENCES);
    free(refs_text);
    return b.score;
}

static void setup(void)
{
    clf_test_make_tmpdir("clf-shipped");
}

static void teardown(void)
{
    clf_test_remove_tmpdir();
}

/* Translates with opts on the suite's backend and checks the BLEU against floor. */
static void check_score(const char *what, const char *opts, double floor)
{
    char *hyps[SENTENCES + 1];
    char *text = translate(clf_test_be_name, opts, hyps);
    double bleu = bleu_against_references(what, hyps);
    ck_assert_msg(bleu >= floor, "%s: BLEU %.2f < %.1f", what, bleu, floor);
    free(text);
}

START_TEST(greedy_translations_score)
{
    check_score("greedy", "--batch 32", MIN_BLEU_GREEDY);
}
END_TEST

START_TEST(beam_translations_score)
{
    check_score("beam 4", "--batch 16 --beam 4", MIN_BLEU_BEAM);
}
END_TEST

START_TEST(opencl_agrees_with_cpu)
{
    char *ocl[SENTENCES + 1], *cpu[SENTENCES + 1];
    char *ocl_text = translate("opencl", "--batch 32", ocl);
    char *cpu_text = translate("cpu", "--batch 32", cpu);
    int same = 0;
    for (int i = 0; i < SENTENCES; i++)
        same += strcmp(ocl[i], cpu[i]) == 0;
    printf("shipped_model: %d of %d greedy lines the same on opencl and cpu\n", same, SENTENCES);
    ck_assert_msg(same >= MIN_SAME_AS_CPU * SENTENCES, "only %d of %d lines as the CPU's", same,
                  SENTENCES);
    free(ocl_text);
    free(cpu_text);
}
END_TEST

static void add_tests(TCase *tc)
{
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, greedy_translations_score);
    tcase_add_test(tc, beam_translations_score);
}

static void opencl_only(TCase *tc)
{
    tcase_add_test(tc, opencl_agrees_with_cpu);
}

int main(void)
{
    return clf_test_backends_main("shipped_model", add_tests, NULL, opencl_only);
}
