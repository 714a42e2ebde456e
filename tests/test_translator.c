/* The translator (clformer/translator.h) against references: on the Marian fixture
 * (tests/fixtures/marian, imported with `clformer import marian` as test_marian does) its
 * text must be transformers' generate() output decoded by MarianTokenizer (greedy.txt,
 * beam.txt), token for token; on the shipped model (models/en-de-gettext) the scores of
 * teacher forcing (one forward pass) must give the logprob of KV-cached greedy decoding to
 * 1e-3, two independent paths; sentences that cannot be translated whole are refused one by
 * one with the others translated; bad options and files are named in the error. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/tensor.h"
#include "clformer/translator.h"
#include "testutil.h"

#define SHIPPED   CLF_MODELS_DIR "/en-de-gettext"
#define MARIAN    CLF_FIXTURES_DIR "/marian"
#define SCORE_TOL 1e-3

static char marian_dir[256]; /* the fixture imported, once for the suite */

static void import_marian(void)
{
    char err[2048], args[1024], base[] = "/tmp/clf-translator-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(base));
    snprintf(marian_dir, sizeof marian_dir, "%s/model", base);
    snprintf(args, sizeof args, "import marian '%s/hf' -o '%s' >/dev/null", MARIAN, marian_dir);
    int rc = clf_test_run_cli(args, err, sizeof err);
    ck_assert_msg(rc == 0, "clformer %s: exit %d: %s", args, rc, err);
}

static void remove_marian(void)
{
    clf_test_remove_dir(marian_dir);
    *strrchr(marian_dir, '/') = '\0';
    rmdir(marian_dir);
}

static clf_translator *open_dir(const char *dir)
{
    clf_translator_opts o;
    clf_translator *t = NULL;
    clf_translator_opts_default(&o);
    o.model_dir = dir;
    o.backend = "cpu";
    CLF_ASSERT_OK(clf_translator_open(&o, &t));
    return t;
}

/* The first max lines of the file at path, without their '\n', into lines: they point into
 * *text, which the caller frees. Returns how many. */
static int read_lines(const char *path, char **text, char **lines, int max)
{
    size_t len;
    int n = 0;
    *text = clf_test_read_file(path, &len);
    for (char *p = *text; *p && n < max;) {
        lines[n++] = p;
        char *nl = strchr(p, '\n');
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    return n;
}

/* The reference's generate() max_length, less the decoder start it counts. */
static int marian_max_len(void)
{
    clf_safetensors *f = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(MARIAN "/reference.safetensors", &f));
    const char *v = clf_safetensors_meta(f, "max_length");
    ck_assert_ptr_nonnull(v);
    int m = atoi(v) - 1;
    clf_safetensors_close(f);
    return m;
}

/* translate's text of the fixture's sentences equals want_file line by line. o NULL: the
 * model.yaml's generate: section alone. */
static void check_marian(const clf_translate_opts *o, const char *want_file)
{
    char *src_text, *want_text, *src[64], *want[64];
    int n = read_lines(MARIAN "/sentences.txt", &src_text, src, 64);
    int nw = read_lines(want_file, &want_text, want, 64);
    ck_assert_int_eq(n, nw);
    clf_translator *t = open_dir(marian_dir);
    clf_translation *out = calloc((size_t)n, sizeof *out);
    CLF_ASSERT_OK(clf_translator_translate(t, (const char *const *)src, NULL, n, o, out));
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(out[i].status, CLF_OK);
        ck_assert_int_eq(out[i].n_hyps, 1);
        ck_assert_msg(strcmp(out[i].hyps[0].text, want[i]) == 0, "%s line %d: '%s', want '%s'",
                      want_file, i + 1, out[i].hyps[0].text, want[i]);
    }
    clf_translations_free(out, n);
    free(out);
    clf_translator_free(t);
    free(src_text);
    free(want_text);
}

START_TEST(marian_greedy_text)
{
    clf_translate_opts o;
    clf_translate_opts_default(&o);
    o.beam = 1;
    o.max_len = marian_max_len();
    o.forced_eos = 1;
    check_marian(&o, MARIAN "/greedy.txt");
}
END_TEST

START_TEST(marian_beam_text)
{
    clf_translate_opts o;
    clf_translate_opts_default(&o);
    o.beam = 4;
    o.beam_style = CLF_BEAM_HF;
    o.length_penalty = 1.0f;
    o.max_len = marian_max_len();
    o.forced_eos = 1;
    check_marian(&o, MARIAN "/beam.txt");
}
END_TEST

START_TEST(marian_model_defaults)
{
    check_marian(NULL, MARIAN "/beam.txt");
}
END_TEST

START_TEST(info_and_tokens)
{
    clf_translator *t = open_dir(SHIPPED);
    clf_translator_info info;
    clf_translator_get_info(t, &info);
    ck_assert_str_eq(info.backend, "cpu");
    ck_assert_ptr_nonnull(info.device);
    ck_assert_ptr_nonnull(info.config);
    ck_assert_ptr_nonnull(strstr(info.src_vocab, "src.model"));
    ck_assert_ptr_nonnull(strstr(info.tgt_vocab, "tgt.model"));
    ck_assert_int_gt(info.src_words, 0);
    ck_assert_int_le(info.tgt_words, info.config->model.tgt_vocab);
    ck_assert_int_eq(info.config->languages.n_source, 1); /* the model.yaml's languages: */
    ck_assert_str_eq(info.config->languages.source[0], "en");
    ck_assert_str_eq(info.config->languages.target[0], "de");
    /* every id of the target side names a token that maps back to it */
    for (int32_t id = 0; id < info.tgt_words; id += 97) {
        const char *tok = clf_translator_token(t, 1, id);
        ck_assert_ptr_nonnull(tok);
        ck_assert_int_eq(clf_translator_token_id(t, 1, tok), id);
    }
    ck_assert_ptr_null(clf_translator_token(t, 1, info.tgt_words));
    ck_assert_ptr_null(clf_translator_token(t, 2, 0));
    ck_assert_int_eq(clf_translator_token_id(t, 0, "no such token in here"), -1);
    int32_t *ids = NULL;
    int n = 0;
    CLF_ASSERT_OK(clf_translator_encode(t, 0, "Open the file.", 14, &ids, &n));
    ck_assert_int_gt(n, 0);
    for (int i = 0; i < n; i++)
        ck_assert_ptr_nonnull(clf_translator_token(t, 0, ids[i]));
    free(ids);
    ck_assert_int_eq(clf_translator_encode(t, 0, "\xff", 1, &ids, &n), CLF_ERR_INPUT);
    clf_translator_free(t);
}
END_TEST

/* Refused sentences get a reason and no hypotheses; the others are translated as they are
 * alone. */
START_TEST(refusals)
{
    clf_translator *t = open_dir(SHIPPED);
    clf_translator_info info;
    clf_translator_get_info(t, &info);
    const int max_len = info.config->model.max_len;
    /* a sentence of max_len words: over max_len with the framing */
    size_t long_len = (size_t)max_len * 6;
    char *longs = malloc(long_len + 1);
    for (size_t i = 0; i < long_len; i += 6)
        memcpy(longs + i, "file  ", 6);
    longs[long_len] = '\0';
    const char *text[] = {"Open the file.",    "bad \xc3\x28 utf8", "a\0b", longs, "", "   ",
                          "Save the document."};
    const size_t len[] = {14, 11, 3, long_len, 0, 3, 18};
    const int n = 7;
    clf_translation out[7], alone[2];
    clf_translate_opts o;
    clf_translate_opts_default(&o);
    o.max_len = 40;
    CLF_ASSERT_OK(clf_translator_translate(t, text, len, n, &o, out));
    const char *why[] = {
        NULL, "UTF-8", "a NUL byte at byte 1", "more than the model's max_len", NULL, NULL, NULL};
    for (int i = 0; i < n; i++) {
        if (why[i]) {
            ck_assert_int_eq(out[i].status, CLF_ERR_INPUT);
            ck_assert_msg(out[i].error && strstr(out[i].error, why[i]), "sentence %d: '%s'", i,
                          out[i].error ? out[i].error : "(none)");
            ck_assert_int_eq(out[i].n_hyps, 0);
        } else {
            ck_assert_int_eq(out[i].status, CLF_OK);
            ck_assert_ptr_null(out[i].error);
        }
    }
    ck_assert_int_eq(out[4].n_hyps, 0); /* empty and blank: not decoded */
    ck_assert_int_eq(out[5].n_hyps, 0);
    const char *ok[] = {text[0], text[6]};
    CLF_ASSERT_OK(clf_translator_translate(t, ok, NULL, 2, &o, alone));
    ck_assert_int_eq(out[0].n_hyps, 1);
    ck_assert_str_eq(out[0].hyps[0].text, alone[0].hyps[0].text);
    ck_assert_str_eq(out[6].hyps[0].text, alone[1].hyps[0].text);
    ck_assert_int_gt(strlen(alone[0].hyps[0].text), 0);
    clf_translations_free(out, n);
    clf_translations_free(alone, 2);
    free(longs);
    clf_translator_free(t);
}
END_TEST

/* A sentence over CLF_TRANSLATE_SENTENCE_MAX bytes is refused before it is tokenized. */
START_TEST(refuses_huge_sentence)
{
    clf_translator *t = open_dir(SHIPPED);
    size_t n = (size_t)CLF_TRANSLATE_SENTENCE_MAX + 1;
    char *big = malloc(n);
    memset(big, 'a', n);
    const char *text[] = {big};
    clf_translation out[1];
    CLF_ASSERT_OK(clf_translator_translate(t, text, &n, 1, NULL, out));
    ck_assert_int_eq(out[0].status, CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(out[0].error, "longer than the limit"));
    clf_translations_free(out, 1);
    free(big);
    clf_translator_free(t);
}
END_TEST

/* Two independent paths: teacher forcing's score of each hypothesis (one forward pass, no
 * cache) and the logprob KV-cached beam search summed (greedy decoding picks on the device
 * and sums nothing), on the first valid.en lines, both hypotheses of beam 2. */
START_TEST(score_matches_decoding)
{
    clf_translator *t = open_dir(SHIPPED);
    char *text, *lines[16];
    int n = read_lines(SHIPPED "/valid.en", &text, lines, 16);
    clf_translation out[16];
    clf_translate_opts o;
    clf_translate_opts_default(&o);
    o.beam = 2;
    o.n_best = 2;
    o.length_penalty = 0.0f;
    o.max_len = 60;
    CLF_ASSERT_OK(clf_translator_translate(t, (const char *const *)lines, NULL, n, &o, out));
    const int32_t *src[32], *tgt[32];
    int32_t *src_ids[16];
    int slen[16], sl[32], tl[32], tokens[32], finished = 0;
    float lp[32];
    char *err[32];
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(out[i].n_hyps, 2);
        CLF_ASSERT_OK(
            clf_translator_encode(t, 0, lines[i], strlen(lines[i]), &src_ids[i], &slen[i]));
        for (int j = 0; j < 2; j++) {
            src[2 * i + j] = src_ids[i];
            sl[2 * i + j] = slen[i];
            tgt[2 * i + j] = out[i].hyps[j].tokens;
            tl[2 * i + j] = out[i].hyps[j].len;
        }
    }
    CLF_ASSERT_OK(clf_translator_score_ids(t, src, sl, tgt, tl, 2 * n, lp, tokens, err));
    for (int i = 0; i < 2 * n; i++) {
        const clf_translation_hyp *h = &out[i / 2].hyps[i % 2];
        ck_assert_ptr_null(err[i]);
        if (!h->finished) /* no EOS in the decoding's sum: not comparable */
            continue;
        finished++;
        ck_assert_int_eq(tokens[i], h->len + 1);
        ck_assert_msg(fabsf(lp[i] - h->logprob) <= SCORE_TOL * (1.0f + fabsf(h->logprob)),
                      "line %d: score %.6f, decoding %.6f", i + 1, lp[i], h->logprob);
    }
    ck_assert_int_ge(finished, n);
    /* the text form scores the sentence pair; an empty target scores [EOS] alone */
    const char *s2[] = {lines[0], lines[0]}, *t2[] = {"", NULL};
    CLF_ASSERT_OK(clf_translator_score(t, s2, t2, 2, lp, tokens, err));
    ck_assert_ptr_null(err[0]);
    ck_assert_int_eq(tokens[0], 1);
    ck_assert(lp[0] < 0.0f);
    ck_assert_ptr_nonnull(err[1]);
    ck_assert(isnan(lp[1]));
    ck_assert_int_eq(tokens[1], 0);
    free(err[1]);
    for (int i = 0; i < n; i++)
        free(src_ids[i]);
    clf_translations_free(out, n);
    free(text);
    clf_translator_free(t);
}
END_TEST

/* want_scores of greedy decoding (teacher forcing after a device argmax) against the
 * decoder's own sums: the same model with banned_ids [pad_id] (a token it never emits)
 * selects on the host and sums the log-probabilities as it goes. Same text, logprob and
 * score (length penalty 1) within SCORE_TOL, for finished hypotheses and for those cut at
 * max_len (no EOS in either sum). */
/* dir (a mkdtemp template): the shipped model with its model.yaml's `banned_ids: []` made
 * `to` (links to its other files) */
static void shipped_with(char *dir, const char *to)
{
    char path[512], from[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    size_t len;
    char *yaml = clf_test_read_file(SHIPPED "/model.yaml", &len);
    char *banned = strstr(yaml, "banned_ids: []");
    ck_assert_ptr_nonnull(banned);
    snprintf(path, sizeof path, "%s/model.yaml", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%.*s%s%s", (int)(banned - yaml), yaml, to, banned + 14);
    fclose(f);
    free(yaml);
    const char *files[] = {"weights.safetensors", "src.model", "tgt.model"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        snprintf(from, sizeof from, "%s/%s", SHIPPED, files[i]);
        ck_assert_int_eq(symlink(from, path), 0);
    }
}

START_TEST(greedy_scores_match_decoding)
{
    char dir[] = "/tmp/clf-greedy-XXXXXX";
    shipped_with(dir, "banned_ids: [1]");
    clf_translator *plain = open_dir(SHIPPED), *host = open_dir(dir);
    char *text, *lines[16];
    int n = read_lines(SHIPPED "/valid.en", &text, lines, 16), cut = 0;
    clf_translation a[16], b[16];
    clf_translate_opts o;
    clf_translate_opts_default(&o);
    o.beam = 1;
    o.length_penalty = 1.0f;
    o.max_len = 8;
    CLF_ASSERT_OK(clf_translator_translate(host, (const char *const *)lines, NULL, n, &o, b));
    o.want_scores = 1;
    CLF_ASSERT_OK(clf_translator_translate(plain, (const char *const *)lines, NULL, n, &o, a));
    for (int i = 0; i < n; i++) {
        const clf_translation_hyp *x = &a[i].hyps[0], *y = &b[i].hyps[0];
        ck_assert_str_eq(x->text, y->text);
        ck_assert_int_eq(x->finished, y->finished);
        cut += !x->finished;
        ck_assert(y->logprob < 0.0f);
        ck_assert_msg(fabsf(x->logprob - y->logprob) <= SCORE_TOL * (1.0f + fabsf(y->logprob)),
                      "line %d: teacher forcing %.6f, decoding %.6f", i + 1, x->logprob,
                      y->logprob);
        ck_assert_msg(fabsf(x->score - y->score) <= SCORE_TOL * (1.0f + fabsf(y->score)),
                      "line %d: score %.6f, decoding %.6f", i + 1, x->score, y->score);
    }
    ck_assert_int_gt(cut, 0); /* both kinds of hypothesis were compared */
    ck_assert_int_lt(cut, n);
    clf_translations_free(a, n);
    clf_translations_free(b, n);
    clf_translator_free(plain);
    clf_translator_free(host);
    free(text);
    clf_test_remove_dir(dir);
}
END_TEST

/* model.clean_up_spaces: the text as transformers' decode() cleans it (the rule itself:
 * test_detokenize). Two of valid.en's lines whose German has a space before a dot. */
START_TEST(clean_up_spaces_applied)
{
    char dir[] = "/tmp/clf-cleanup-XXXXXX";
    shipped_with(dir, "banned_ids: []\n  clean_up_spaces: true");
    clf_translator *plain = open_dir(SHIPPED), *clean = open_dir(dir);
    const char *lines[2] = {"Could not initialize supporting library.",
                            "creating directory %s ..."};
    const char *want_plain[2] = {"Konnte .res-Bibliothek nicht initialisieren.",
                                 "Verzeichnis %s wird erzeugt ..."};
    const char *want_clean[2] = {"Konnte.res-Bibliothek nicht initialisieren.",
                                 "Verzeichnis %s wird erzeugt..."};
    clf_translation a[2], b[2];
    clf_translate_opts o;
    clf_translate_opts_default(&o);
    o.beam = 1;
    CLF_ASSERT_OK(clf_translator_translate(plain, lines, NULL, 2, &o, a));
    CLF_ASSERT_OK(clf_translator_translate(clean, lines, NULL, 2, &o, b));
    for (int i = 0; i < 2; i++) {
        ck_assert_str_eq(a[i].hyps[0].text, want_plain[i]);
        ck_assert_str_eq(b[i].hyps[0].text, want_clean[i]);
        ck_assert_int_eq(a[i].hyps[0].len, b[i].hyps[0].len); /* the tokens are the same */
    }
    clf_translations_free(a, 2);
    clf_translations_free(b, 2);
    clf_translator_free(plain);
    clf_translator_free(clean);
    clf_test_remove_dir(dir);
}
END_TEST

/* With max_len given, how sentences are batched does not change them. */
START_TEST(max_batch_same_results)
{
    clf_translator *t = open_dir(SHIPPED);
    char *text, *lines[12];
    int n = read_lines(SHIPPED "/valid.en", &text, lines, 12);
    clf_translation one[12], split[12];
    clf_translate_opts o;
    clf_translate_opts_default(&o);
    o.max_len = 50;
    o.beam = 2;
    o.n_best = 2;
    CLF_ASSERT_OK(clf_translator_translate(t, (const char *const *)lines, NULL, n, &o, one));
    o.max_batch = 5;
    CLF_ASSERT_OK(clf_translator_translate(t, (const char *const *)lines, NULL, n, &o, split));
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(one[i].n_hyps, 2);
        ck_assert_int_eq(split[i].n_hyps, 2);
        for (int j = 0; j < 2; j++) {
            ck_assert_str_eq(one[i].hyps[j].text, split[i].hyps[j].text);
            ck_assert_int_eq(one[i].hyps[j].len, split[i].hyps[j].len);
            ck_assert(fabsf(one[i].hyps[j].score - split[i].hyps[j].score) < 1e-3f);
        }
        ck_assert(one[i].hyps[0].score >= one[i].hyps[1].score);
    }
    clf_translations_free(one, n);
    clf_translations_free(split, n);
    free(text);
    clf_translator_free(t);
}
END_TEST

/* translate_ids: an id beyond the source vocabulary refuses its sentence alone; the
 * others translate as their text does. */
START_TEST(translate_ids_refuses_unknown_id)
{
    clf_translator *t = open_dir(SHIPPED);
    clf_translator_info info;
    clf_translator_get_info(t, &info);
    int32_t *ids = NULL;
    int n = 0;
    CLF_ASSERT_OK(clf_translator_encode(t, 0, "Open the file.", 14, &ids, &n));
    int32_t bad[] = {ids[0], info.src_words, ids[0]}, neg[] = {-1};
    const int32_t *rows[] = {ids, bad, neg};
    int lens[] = {n, 3, 1};
    clf_translation out[3], by_text[1];
    const char *text[] = {"Open the file."};
    CLF_ASSERT_OK(clf_translator_translate_ids(t, rows, lens, 3, NULL, out));
    CLF_ASSERT_OK(clf_translator_translate(t, text, NULL, 1, NULL, by_text));
    ck_assert_int_eq(out[0].status, CLF_OK);
    ck_assert_str_eq(out[0].hyps[0].text, by_text[0].hyps[0].text);
    for (int i = 1; i < 3; i++) {
        ck_assert_int_eq(out[i].status, CLF_ERR_INPUT);
        ck_assert_ptr_nonnull(strstr(out[i].error, "not in the source vocabulary"));
        ck_assert_int_eq(out[i].n_hyps, 0);
    }
    clf_translations_free(out, 3);
    clf_translations_free(by_text, 1);
    free(ids);
    clf_translator_free(t);
}
END_TEST

/* The four files given instead of the directory (model_dir NULL, `translate -c -w
 * --src-vocab --tgt-vocab`): the Marian .spm files with the vocab.json beside them are the
 * mapped kind, so the text is the reference's as with -m. */
START_TEST(explicit_paths)
{
    char cfg[512], w[512], sv[512], tv[512];
    snprintf(cfg, sizeof cfg, "%s/" CLF_MODEL_DIR_CONFIG, marian_dir);
    snprintf(w, sizeof w, "%s/" CLF_MODEL_DIR_WEIGHTS, marian_dir);
    snprintf(sv, sizeof sv, "%s/" CLF_MODEL_DIR_SRC_SPM, marian_dir);
    snprintf(tv, sizeof tv, "%s/" CLF_MODEL_DIR_TGT_SPM, marian_dir);
    clf_translator_opts o;
    clf_translator *t = NULL;
    clf_translator_opts_default(&o);
    o.backend = "cpu";
    o.config_path = cfg;
    o.weights_path = w;
    o.src_vocab = sv;
    o.tgt_vocab = tv;
    CLF_ASSERT_OK(clf_translator_open(&o, &t));
    char *src_text, *want_text, *src[64], *want[64];
    int n = read_lines(MARIAN "/sentences.txt", &src_text, src, 64);
    read_lines(MARIAN "/beam.txt", &want_text, want, 64);
    clf_translation *out = calloc((size_t)n, sizeof *out);
    CLF_ASSERT_OK(clf_translator_translate(t, (const char *const *)src, NULL, n, NULL, out));
    for (int i = 0; i < n; i++)
        ck_assert_str_eq(out[i].hyps[0].text, want[i]);
    clf_translations_free(out, n);
    free(out);
    free(src_text);
    free(want_text);
    clf_translator_free(t);
}
END_TEST

/* want_attention: each hypothesis' cross-attention over the framed source ([SOS] x [EOS]),
 * a row per output token and its EOS, each row a distribution. */
START_TEST(attention_rows)
{
    clf_translator *t = open_dir(SHIPPED);
    const char *text[] = {"Open the file.", "Could not connect to the server at all."};
    clf_translation out[2];
    clf_translate_opts o;
    clf_translate_opts_default(&o);
    o.beam = 2;
    o.want_attention = 1;
    o.max_len = 40;
    CLF_ASSERT_OK(clf_translator_translate(t, text, NULL, 2, &o, out));
    for (int i = 0; i < 2; i++) {
        const clf_translation_hyp *h = &out[i].hyps[0];
        ck_assert_ptr_nonnull(h->attention);
        ck_assert_int_eq(h->attn_cols, out[i].n_src + 2);
        for (int r = 0; r < h->len + h->finished; r++) {
            double sum = 0.0;
            for (int c = 0; c < h->attn_cols; c++)
                sum += h->attention[(size_t)r * h->attn_cols + c];
            ck_assert_msg(fabs(sum - 1.0) < 1e-3, "sentence %d row %d sums to %f", i, r, sum);
        }
    }
    clf_translations_free(out, 2);
    clf_translator_free(t);
}
END_TEST

static void expect_open_error(const clf_translator_opts *o, const char *want)
{
    clf_translator *t = (clf_translator *)1;
    ck_assert_int_ne(clf_translator_open(o, &t), CLF_OK);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(clf_last_error(), want), "error '%s' does not name '%s'", clf_last_error(),
                  want);
}

START_TEST(bad_options_named)
{
    clf_translator_opts o;
    clf_translator_opts_default(&o);
    o.model_dir = "/nonexistent/model-dir";
    expect_open_error(&o, "/nonexistent/model-dir");
    o.model_dir = SHIPPED;
    o.backend = "no-such-backend";
    expect_open_error(&o, "no-such-backend");
    clf_translator_opts_default(&o);
    expect_open_error(&o, "model_dir");
    /* a vocabulary for another model: the Marian fixture's with the shipped model */
    o.model_dir = SHIPPED;
    o.backend = "cpu";
    o.tgt_vocab = MARIAN "/hf/target.spm";
    expect_open_error(&o, "target.spm");

    clf_translator *t = open_dir(SHIPPED);
    const char *text[] = {"Open the file."};
    clf_translation out[1];
    clf_translate_opts to;
    clf_translate_opts_default(&to);
    to.beam = 2;
    to.n_best = 3;
    ck_assert_int_eq(clf_translator_translate(t, text, NULL, 1, &to, out), CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "n_best 3"));
    clf_translate_opts_default(&to);
    to.n_best = 2; /* the shipped model's generate.beam is 1 or none */
    ck_assert_int_eq(clf_translator_translate(t, text, NULL, 1, &to, out), CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "generate.beam"));
    clf_translate_opts_default(&to);
    to.beam_style = 7;
    ck_assert_int_eq(clf_translator_translate(t, text, NULL, 1, &to, out), CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "beam_style 7"));
    clf_translator_free(t);
}
END_TEST

/* Feeds sentences i = 0..n-1 into a stream (opts[i % n_opts]), a few at first and then
 * one each step, takes every result into out[i]. */
static void stream_all(clf_translator *t, int max_rows, const char *const *text, int n,
                       const clf_translate_opts *opts, int n_opts, clf_translation *out)
{
    clf_translator_stream *s;
    clf_translator_stream_opts so = {.max_rows = max_rows};
    CLF_ASSERT_OK(clf_translator_stream_open(t, &so, &s));
    int added = 0, got = 0;
    for (int step = 0; got < n; step++) {
        ck_assert_msg(step < 10000, "the stream does not finish");
        for (int k = 0; added < n && k < (added == 0 ? 3 : 1); k++, added++)
            CLF_ASSERT_OK(clf_translator_stream_add(s, text[added], strlen(text[added]),
                                                    &opts[added % n_opts], (uint64_t)added));
        CLF_ASSERT_OK(clf_translator_stream_step(s));
        uint64_t tag;
        clf_translation r;
        while (clf_translator_stream_take(s, &tag, &r)) {
            ck_assert(tag < (uint64_t)n);
            out[tag] = r;
            got++;
        }
    }
    clf_decode_stream_state st;
    clf_translator_stream_get_state(s, &st);
    ck_assert_int_eq(st.waiting + st.active + st.finished, 0);
    clf_translator_stream_free(s);
}

/* Continuous translation of the Marian fixture, greedy and beam-4 sentences sharing the
 * steps: each line equals transformers' generate() (greedy.txt, beam.txt). */
START_TEST(stream_marian_text)
{
    char *src_text, *greedy_text, *beam_text, *src[64], *greedy[64], *beam[64];
    int n = read_lines(MARIAN "/sentences.txt", &src_text, src, 64);
    ck_assert_int_eq(read_lines(MARIAN "/greedy.txt", &greedy_text, greedy, 64), n);
    ck_assert_int_eq(read_lines(MARIAN "/beam.txt", &beam_text, beam, 64), n);
    clf_translate_opts o[2];
    for (int k = 0; k < 2; k++) {
        clf_translate_opts_default(&o[k]);
        o[k].max_len = marian_max_len();
        o[k].forced_eos = 1;
        o[k].beam = k == 0 ? 1 : 4;
        o[k].beam_style = CLF_BEAM_HF;
        o[k].length_penalty = 1.0f;
    }
    clf_translator *t = open_dir(marian_dir);
    clf_translation *out = calloc((size_t)n, sizeof *out);
    stream_all(t, 9, (const char *const *)src, n, o, 2, out);
    for (int i = 0; i < n; i++) {
        const char *want = i % 2 ? beam[i] : greedy[i];
        ck_assert_int_eq(out[i].status, CLF_OK);
        ck_assert_int_eq(out[i].n_hyps, 1);
        ck_assert_msg(strcmp(out[i].hyps[0].text, want) == 0, "line %d (%s): '%s', want '%s'",
                      i + 1, i % 2 ? "beam 4" : "greedy", out[i].hyps[0].text, want);
    }
    clf_translations_free(out, n);
    free(out);
    clf_translator_free(t);
    free(src_text);
    free(greedy_text);
    free(beam_text);
}
END_TEST

/* The stream gives each sentence what clf_translator_translate gives it: text, tokens,
 * n-best order; scores within 1e-3 (greedy's are summed while decoding in the stream,
 * teacher-forced in translate); refused and empty sentences the same status and reason. */
START_TEST(stream_equals_translate)
{
    clf_translator *t = open_dir(SHIPPED);
    char *text, *lines[16];
    int n = read_lines(SHIPPED "/valid.en", &text, lines, 12);
    lines[n++] = "";
    lines[n++] = "caf\xc3 au lait"; /* invalid UTF-8 */
    clf_translate_opts o[3];
    for (int k = 0; k < 3; k++) {
        clf_translate_opts_default(&o[k]);
        o[k].max_len = 40;
    }
    o[0].beam = 1, o[0].want_scores = 1;
    o[1].beam = 3, o[1].n_best = 2;
    o[2].beam = 2, o[2].n_best = 1, o[2].beam_style = CLF_BEAM_HF, o[2].length_penalty = 1.0f;
    clf_translation want[16], got[16];
    for (int i = 0; i < n; i++)
        CLF_ASSERT_OK(clf_translator_translate(t, (const char *const *)&lines[i], NULL, 1,
                                               &o[i % 3], &want[i]));
    stream_all(t, 5, (const char *const *)lines, n, o, 3, got);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(got[i].status, want[i].status);
        ck_assert_int_eq(got[i].n_src, want[i].n_src);
        ck_assert_int_eq(got[i].n_hyps, want[i].n_hyps);
        if (want[i].error)
            ck_assert_str_eq(got[i].error, want[i].error);
        for (int j = 0; j < want[i].n_hyps; j++) {
            const clf_translation_hyp *x = &want[i].hyps[j], *y = &got[i].hyps[j];
            ck_assert_msg(strcmp(x->text, y->text) == 0, "line %d hyp %d: '%s', want '%s'", i, j,
                          y->text, x->text);
            ck_assert_int_eq(x->len, y->len);
            ck_assert_int_eq(x->finished, y->finished);
            ck_assert_msg(fabsf(x->score - y->score) < 1e-3f &&
                              fabsf(x->logprob - y->logprob) < 1e-3f,
                          "line %d hyp %d: score %g logprob %g, want %g %g", i, j, y->score,
                          y->logprob, x->score, x->logprob);
        }
    }
    ck_assert(want[0].hyps[0].logprob < 0.0f); /* greedy scores were asked for */
    /* options the stream cannot honour are refused, nothing queued */
    clf_translator_stream *s;
    CLF_ASSERT_OK(clf_translator_stream_open(t, NULL, &s));
    clf_translate_opts bad = o[0];
    bad.want_attention = 1;
    ck_assert_int_eq(clf_translator_stream_add(s, "a", 1, &bad, 1), CLF_ERR_INPUT);
    bad = o[0];
    bad.max_len = 100000;
    ck_assert_int_eq(clf_translator_stream_add(s, "a", 1, &bad, 1), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "max_out"), "%s", clf_last_error());
    bad = o[1];
    bad.n_best = 5;
    ck_assert_int_eq(clf_translator_stream_add(s, "a", 1, &bad, 1), CLF_ERR_INPUT);
    /* a cancelled sentence gives nothing */
    CLF_ASSERT_OK(clf_translator_stream_add(s, lines[0], strlen(lines[0]), &o[0], 7));
    CLF_ASSERT_OK(clf_translator_stream_step(s));
    ck_assert_int_eq(clf_translator_stream_cancel(s, 7), 1);
    CLF_ASSERT_OK(clf_translator_stream_step(s));
    uint64_t tag;
    clf_translation r;
    ck_assert_int_eq(clf_translator_stream_take(s, &tag, &r), 0);
    clf_translator_stream_free(s);
    clf_translations_free(want, n);
    clf_translations_free(got, n);
    free(text);
    clf_translator_free(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("translator");
    TCase *tc = tcase_create("cpu");
    tcase_add_unchecked_fixture(tc, import_marian, remove_marian);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, marian_greedy_text);
    tcase_add_test(tc, marian_beam_text);
    tcase_add_test(tc, marian_model_defaults);
    tcase_add_test(tc, info_and_tokens);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, refuses_huge_sentence);
    tcase_add_test(tc, score_matches_decoding);
    tcase_add_test(tc, greedy_scores_match_decoding);
    tcase_add_test(tc, clean_up_spaces_applied);
    tcase_add_test(tc, max_batch_same_results);
    tcase_add_test(tc, translate_ids_refuses_unknown_id);
    tcase_add_test(tc, bad_options_named);
    tcase_add_test(tc, explicit_paths);
    tcase_add_test(tc, attention_rows);
    tcase_add_test(tc, stream_marian_text);
    tcase_add_test(tc, stream_equals_translate);
    suite_add_tcase(s, tc);
    return clf_test_main(s);
}
