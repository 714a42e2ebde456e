/* The SentencePiece kind of clf_tokenizer against the SentencePiece library itself: ids and
 * detokenized text of tests/fixtures/spm/sentences.txt as the library's spm_encode and
 * spm_decode CLIs gave them (committed; see fixtures/spm/README.md), round trips on ASCII
 * and non-ASCII text, unknown text -> unk, the specials, the kind detection, training
 * (library and `clformer vocab --sentencepiece`), translate with .model vocabularies, and
 * files that must be refused with one line naming them. Exact comparisons throughout:
 * ids and text are discrete. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/tokenizer.h"
#include "testutil.h"

#define SPM_DIR    CLF_FIXTURES_DIR "/spm"
#define MODEL_PATH SPM_DIR "/tiny.model"
#define JSON_PATH  CLF_FIXTURES_DIR "/tokenizer/wordlevel.json"
/* `clformer vocab --sentencepiece --vocab-size 120 -o tiny.model corpus.txt` */
#define MODEL_SIZE 120
#define MAX_LINES  64
/* "▁über", id 49 of the fixture (spm_encode --output_format=piece/id on sentence 2) */
#define PIECE_UEBER                                                                                \
    "\xe2\x96\x81\xc3\xbc"                                                                         \
    "ber"

static clf_tokenizer *load_fixture(void)
{
    clf_tokenizer *tok = NULL;
    CLF_ASSERT_OK(clf_tokenizer_load(MODEL_PATH, &tok));
    return tok;
}

/* Splits text in place into its '\n'-terminated lines; returns how many. */
static int split_lines(char *text, char **lines)
{
    int n = 0;
    for (char *p = text; *p;) {
        char *nl = strchr(p, '\n');
        ck_assert_msg(nl != NULL, "fixture line without a newline: %s", p);
        *nl = '\0';
        ck_assert_int_lt(n, MAX_LINES);
        lines[n++] = p;
        p = nl + 1;
    }
    return n;
}

/* The ids of a line of spm_encode --output_format=id (space-separated). */
static int parse_ids(const char *line, int32_t *ids, int max)
{
    int n = 0;
    for (const char *p = line; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        ck_assert_msg(end != p, "bad id line '%s'", line);
        ck_assert_int_lt(n, max);
        ids[n++] = (int32_t)v;
        p = end;
        while (*p == ' ')
            p++;
    }
    return n;
}

static void assert_ids_eq(const int32_t *got, int n_got, const int32_t *want, int n_want,
                          const char *what)
{
    ck_assert_msg(n_got == n_want, "'%s': %d ids, the library gives %d", what, n_got, n_want);
    for (int i = 0; i < n_got; i++)
        ck_assert_msg(got[i] == want[i], "'%s': id %d is %d, the library gives %d", what, i,
                      (int)got[i], (int)want[i]);
}

/* Encodes every fixture sentence with tok and checks ids and decoded text against the
 * library's CLIs. */
static void assert_matches_library(const clf_tokenizer *tok)
{
    char *text = clf_test_read_file(SPM_DIR "/sentences.txt", NULL);
    char *idtext = clf_test_read_file(SPM_DIR "/sentences.ids", NULL);
    char *dectext = clf_test_read_file(SPM_DIR "/sentences.decoded", NULL);
    char *lines[MAX_LINES], *idl[MAX_LINES], *dec[MAX_LINES];
    int n = split_lines(text, lines);
    ck_assert_int_eq(split_lines(idtext, idl), n);
    ck_assert_int_eq(split_lines(dectext, dec), n);
    ck_assert_int_ge(n, 10);
    for (int i = 0; i < n; i++) {
        int32_t want[256], *ids;
        int n_want = parse_ids(idl[i], want, 256), n_ids;
        CLF_ASSERT_OK(clf_tokenizer_encode(tok, lines[i], strlen(lines[i]), &ids, &n_ids));
        assert_ids_eq(ids, n_ids, want, n_want, lines[i]);
        char *back;
        CLF_ASSERT_OK(clf_tokenizer_decode(tok, want, n_want, 0, &back));
        ck_assert_msg(strcmp(back, dec[i]) == 0, "decode of '%s' is '%s', the library's '%s'",
                      lines[i], back, dec[i]);
        free(back);
        free(ids);
    }
    free(text);
    free(idtext);
    free(dectext);
}

START_TEST(test_ids_match_library)
{
    clf_tokenizer *tok = load_fixture();
    assert_matches_library(tok);
    clf_tokenizer_free(tok);
}
END_TEST

/* decode(encode(s)) == s for text of the model's characters, in normalized form (single
 * spaces, none at the ends): ASCII, German with umlauts and ß. */
static const char *const round_trips[] = {
    "the cat builds the winter sky every day.",
    "a dog visits the bakery in summer.",
    "Die Katze grüßt die Bäckerei über alles.",
    "Unser Nachbar überquert eine leere Straße im Sommer.",
    "Straße über Bäckerei grüßt",
};

START_TEST(test_round_trip)
{
    clf_tokenizer *tok = load_fixture();
    const char *s = round_trips[_i];
    int32_t *ids;
    int n;
    CLF_ASSERT_OK(clf_tokenizer_encode(tok, s, strlen(s), &ids, &n));
    ck_assert_int_gt(n, 0);
    for (int i = 0; i < n; i++)
        ck_assert_msg(ids[i] != clf_tokenizer_special_ids(tok).unk, "'%s' has an unknown piece", s);
    clf_test_assert_decodes(tok, ids, n, 1, s);
    free(ids);
    clf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_unknown_and_lookups)
{
    clf_tokenizer *tok = load_fixture();
    ck_assert_int_eq(clf_tokenizer_get_kind(tok), CLF_TOKENIZER_SENTENCEPIECE);
    ck_assert_int_eq(clf_tokenizer_size(tok), MODEL_SIZE);
    clf_tokenizer_specials sp = clf_tokenizer_special_ids(tok);
    ck_assert_int_eq(sp.unk, 0);
    ck_assert_int_eq(sp.pad, 1);
    ck_assert_int_eq(sp.sos, 2);
    ck_assert_int_eq(sp.eos, 3);
    const char *names[4] = {"<unk>", "<pad>", "<s>", "</s>"};
    for (int32_t id = 0; id < 4; id++) {
        ck_assert_str_eq(clf_tokenizer_word(tok, id), names[id]);
        ck_assert_int_eq(clf_tokenizer_id(tok, names[id]), id);
        ck_assert_int_eq(clf_tokenizer_is_special(tok, id), 1);
    }
    for (int32_t id = 4; id < MODEL_SIZE; id++)
        ck_assert_int_eq(clf_tokenizer_is_special(tok, id), 0);
    /* pieces both ways (ids from spm_encode --output_format=piece/id on sentence 2) */
    ck_assert_int_eq(clf_tokenizer_id(tok, PIECE_UEBER), 49);
    ck_assert_str_eq(clf_tokenizer_word(tok, 49), PIECE_UEBER);
    ck_assert_int_eq(clf_tokenizer_id_n(tok,
                                        "\xe2\x96\x81"
                                        "Die!",
                                        6),
                     69); /* ▁Die */
    /* a piece the model lacks is -1 here, although the library's PieceToId says unk */
    ck_assert_int_eq(clf_tokenizer_id(tok, "Привет"), -1);
    ck_assert_int_eq(clf_tokenizer_id(tok, ""), -1);
    ck_assert_ptr_null(clf_tokenizer_word(tok, MODEL_SIZE));
    ck_assert_ptr_null(clf_tokenizer_word(tok, -1));
    ck_assert_int_eq(clf_tokenizer_is_special(tok, MODEL_SIZE), 0);
    /* unknown characters encode to unk: ö is not among the model's characters */
    int32_t *ids;
    int n;
    CLF_ASSERT_OK(clf_tokenizer_encode(tok, "Größe", strlen("Größe"), &ids, &n));
    const int32_t want[] = {4, 96, 9, 0, 63, 5}; /* ▁ G r ö ß e, as in sentence 4 */
    assert_ids_eq(ids, n, want, 6, "Größe");
    free(ids);
    /* decode: skip_specials drops unk and the control pieces; without it the library
     * writes " ⁇ " for unk and nothing for <s> </s> <pad> */
    const int32_t framed[] = {2, 69, 0, 49, 3, 1};
    clf_test_assert_decodes(tok, framed, 6, 1, "Die über");
    clf_test_assert_decodes(tok, framed, 6, 0, "Die \xe2\x81\x87  über");
    /* empty text: no ids; an empty id list: "" */
    CLF_ASSERT_OK(clf_tokenizer_encode(tok, "", 0, &ids, &n));
    ck_assert_int_eq(n, 0);
    ck_assert_ptr_null(ids);
    clf_test_assert_decodes(tok, NULL, 0, 1, "");
    clf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_refuses_bad_ids_and_utf8)
{
    clf_tokenizer *tok = load_fixture();
    const int32_t bad[] = {5, MODEL_SIZE};
    char *text = (char *)&text;
    ck_assert_int_eq(clf_tokenizer_decode(tok, bad, 2, 1, &text), CLF_ERR_INPUT);
    ck_assert_ptr_null(text);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "id 120 at position 1"));
    const int32_t neg[] = {-1};
    ck_assert_int_eq(clf_tokenizer_decode(tok, neg, 1, 0, &text), CLF_ERR_INPUT);
    int32_t *ids = (int32_t *)&ids;
    int n = 7;
    ck_assert_int_eq(clf_tokenizer_encode(tok, "ab\xc3(", 4, &ids, &n), CLF_ERR_INPUT);
    ck_assert_ptr_null(ids);
    ck_assert_int_eq(n, 0);
    ck_assert_str_eq(clf_last_error(), "line is not valid UTF-8 at byte 2");
    clf_tokenizer_free(tok);
}
END_TEST

/* ---- kind detection ---- */

static void copy_file(const char *from, const char *to)
{
    size_t n;
    char *data = clf_test_read_file(from, &n);
    clf_test_write_file(to, data, n);
    free(data);
}

START_TEST(test_kind_detection)
{
    clf_test_make_tmpdir("clf-spm");
    clf_tokenizer *tok;
    CLF_ASSERT_OK(clf_tokenizer_load(JSON_PATH, &tok));
    ck_assert_int_eq(clf_tokenizer_get_kind(tok), CLF_TOKENIZER_WORD_LEVEL);
    clf_tokenizer_free(tok);
    /* by content, whatever the name: a model named .json-less "vocab", a JSON named .model
     * (white space before its '{') */
    copy_file(MODEL_PATH, clf_test_tmp_path("vocab"));
    CLF_ASSERT_OK(clf_tokenizer_load(clf_test_tmp_path("vocab"), &tok));
    ck_assert_int_eq(clf_tokenizer_get_kind(tok), CLF_TOKENIZER_SENTENCEPIECE);
    ck_assert_int_eq(clf_tokenizer_size(tok), MODEL_SIZE);
    clf_tokenizer_free(tok);
    size_t n;
    char *json = clf_test_read_file(JSON_PATH, &n);
    char *spaced = malloc(n + 3);
    memcpy(spaced, " \n\t", 3);
    memcpy(spaced + 3, json, n);
    clf_test_write_file(clf_test_tmp_path("j.model"), spaced, n + 3);
    CLF_ASSERT_OK(clf_tokenizer_load(clf_test_tmp_path("j.model"), &tok));
    ck_assert_int_eq(clf_tokenizer_get_kind(tok), CLF_TOKENIZER_WORD_LEVEL);
    clf_tokenizer_free(tok);
    free(spaced);
    free(json);
    /* neither: refused by the JSON reader, as before */
    clf_test_write_text(clf_test_tmp_path("x.txt"), "hello");
    tok = (clf_tokenizer *)&tok;
    ck_assert_int_eq(clf_tokenizer_load(clf_test_tmp_path("x.txt"), &tok), CLF_ERR_INPUT);
    ck_assert_ptr_null(tok);
    clf_test_remove_tmpdir();
}
END_TEST

/* ---- files ---- */

START_TEST(test_save_writes_model_bytes)
{
    clf_test_make_tmpdir("clf-spm");
    clf_tokenizer *tok = load_fixture(), *back;
    CLF_ASSERT_OK(clf_tokenizer_save(tok, clf_test_tmp_path("s.model")));
    size_t a, b;
    char *want = clf_test_read_file(MODEL_PATH, &a);
    char *got = clf_test_read_file(clf_test_tmp_path("s.model"), &b);
    ck_assert_msg(a == b && memcmp(want, got, a) == 0, "the saved model differs (%zu vs %zu)", b,
                  a);
    CLF_ASSERT_OK(clf_tokenizer_load(clf_test_tmp_path("s.model"), &back));
    assert_matches_library(back);
    free(want);
    free(got);
    clf_tokenizer_free(back);
    clf_tokenizer_free(tok);
    clf_test_remove_tmpdir();
}
END_TEST

/* A load that must fail with status want and one line naming the file. */
static void assert_refused(const char *path, clf_status want, const char *why)
{
    clf_tokenizer *tok = (clf_tokenizer *)&tok;
    ck_assert_int_eq(clf_tokenizer_load(path, &tok), want);
    ck_assert_ptr_null(tok);
    const char *msg = clf_last_error();
    ck_assert_msg(strncmp(msg, path, strlen(path)) == 0, "'%s' does not start with %s", msg, path);
    ck_assert_msg(strchr(msg, '\n') == NULL, "'%s' is not one line", msg);
    ck_assert_msg(strstr(msg, why) != NULL, "'%s' lacks '%s'", msg, why);
}

START_TEST(test_refuses_bad_files)
{
    clf_test_make_tmpdir("clf-spm");
    assert_refused("/nonexistent/spm.model", CLF_ERR_IO, "No such file");
    clf_test_write_file(clf_test_tmp_path("empty.model"), "", 0);
    assert_refused(clf_test_tmp_path("empty.model"), CLF_ERR_INPUT,
                   "not a valid SentencePiece model");
    /* truncated copies of the fixture, at lengths inside its pieces, its specs and its
     * normalizer's table */
    size_t n;
    char *model = clf_test_read_file(MODEL_PATH, &n);
    const size_t cuts[] = {1, 2, 7, 100, 1000, n / 2, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        clf_test_write_file(clf_test_tmp_path("cut.model"), model, cuts[i]);
        assert_refused(clf_test_tmp_path("cut.model"), CLF_ERR_INPUT,
                       "not a valid SentencePiece model");
    }
    /* random bytes (a fixed LCG), with and without the 0x0A a ModelProto starts with */
    char *noise = malloc(4096);
    uint32_t x = 1;
    for (int i = 0; i < 4096; i++) {
        x = x * 1664525u + 1013904223u;
        noise[i] = (char)(x >> 24);
    }
    clf_test_write_file(clf_test_tmp_path("noise.model"), noise, 4096);
    assert_refused(clf_test_tmp_path("noise.model"), CLF_ERR_INPUT,
                   "not a valid SentencePiece model");
    noise[0] = 0x0A;
    clf_test_write_file(clf_test_tmp_path("noise.bin"), noise, 4096);
    assert_refused(clf_test_tmp_path("noise.bin"), CLF_ERR_INPUT,
                   "not a valid SentencePiece model");
    free(noise);
    free(model);
    /* the size limit (README, "Limits"), checked before the file is read */
    clf_test_write_sparse(clf_test_tmp_path("big.model"), "\n",
                          (uint64_t)CLF_TOKENIZER_SPM_MAX + 1);
    assert_refused(clf_test_tmp_path("big.model"), CLF_ERR_INPUT,
                   "big.model: 268435457 bytes, more than the limit of 268435456");
    clf_test_remove_tmpdir();
}
END_TEST

/* ---- training ---- */

START_TEST(test_train_like_fixture)
{
    /* the fixture was trained so: the same text and options give the same model */
    const char *corpus = SPM_DIR "/corpus.txt";
    clf_tokenizer *tok = NULL;
    CLF_ASSERT_OK(clf_tokenizer_train_sentencepiece(&corpus, 1, MODEL_SIZE, "unigram", &tok));
    ck_assert_int_eq(clf_tokenizer_get_kind(tok), CLF_TOKENIZER_SENTENCEPIECE);
    assert_matches_library(tok);
    clf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_train_bpe)
{
    const char *corpus = SPM_DIR "/corpus.txt";
    clf_tokenizer *tok = NULL;
    CLF_ASSERT_OK(clf_tokenizer_train_sentencepiece(&corpus, 1, 100, "bpe", &tok));
    ck_assert_int_eq(clf_tokenizer_size(tok), 100);
    clf_tokenizer_specials sp = clf_tokenizer_special_ids(tok);
    ck_assert(sp.unk == 0 && sp.pad == 1 && sp.sos == 2 && sp.eos == 3);
    for (size_t k = 0; k < sizeof round_trips / sizeof round_trips[0]; k++) {
        int32_t *ids;
        int n;
        CLF_ASSERT_OK(clf_tokenizer_encode(tok, round_trips[k], strlen(round_trips[k]), &ids, &n));
        clf_test_assert_decodes(tok, ids, n, 1, round_trips[k]);
        free(ids);
    }
    clf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_train_refuses)
{
    const char *corpus = SPM_DIR "/corpus.txt", *missing = "/nonexistent/corpus.txt";
    clf_tokenizer *tok = (clf_tokenizer *)&tok;
    ck_assert_int_eq(clf_tokenizer_train_sentencepiece(&corpus, 1, 100000, "unigram", &tok),
                     CLF_ERR_INPUT);
    ck_assert_ptr_null(tok);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "Vocabulary size too high"));
    ck_assert_ptr_null(strchr(clf_last_error(), '\n'));
    ck_assert_int_eq(clf_tokenizer_train_sentencepiece(&missing, 1, 100, "unigram", &tok),
                     CLF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), missing));
    ck_assert_int_eq(clf_tokenizer_train_sentencepiece(&corpus, 1, 100, "word", &tok),
                     CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "'word'"));
}
END_TEST

/* ---- the CLI ---- */

START_TEST(test_cli_vocab)
{
    clf_test_make_tmpdir("clf-spm");
    char args[1024], err[4096];
    snprintf(args, sizeof args,
             "vocab --sentencepiece --vocab-size %d -o '%s' '%s/corpus.txt' >/dev/null", MODEL_SIZE,
             clf_test_tmp_path("v.model"), SPM_DIR);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "vocab: %s", err);
    /* the same model as the fixture (not the same bytes: a model records the path of
     * its input) */
    clf_tokenizer *tok;
    CLF_ASSERT_OK(clf_tokenizer_load(clf_test_tmp_path("v.model"), &tok));
    assert_matches_library(tok);
    clf_tokenizer_free(tok);
    /* one model per side, bpe */
    snprintf(args, sizeof args,
             "vocab --sentencepiece --vocab-size 90 --model-type bpe --src-out '%s' --tgt-out "
             "'%s' '%s/corpus.txt' '%s/sentences.txt'",
             clf_test_tmp_path("s.model"), clf_test_tmp_path("t.model"), SPM_DIR, SPM_DIR);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "vocab per side: %s", err);
    const char *sides[2] = {"s.model", "t.model"};
    for (int i = 0; i < 2; i++) {
        CLF_ASSERT_OK(clf_tokenizer_load(clf_test_tmp_path(sides[i]), &tok));
        ck_assert_int_eq(clf_tokenizer_size(tok), 90);
        clf_tokenizer_free(tok);
    }
    /* a refused training writes nothing, not even a temporary file */
    snprintf(args, sizeof args, "vocab --sentencepiece --vocab-size 5000 -o '%s' '%s/corpus.txt'",
             clf_test_tmp_path("big.model"), SPM_DIR);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "Vocabulary size too high") != NULL, "%s", err);
    /* per side: the source side trains, the target side's text is too small: neither is
     * written */
    snprintf(args, sizeof args,
             "vocab --sentencepiece --vocab-size 60 --src-out '%s' --tgt-out '%s' "
             "'%s/corpus.txt' '%s/sentences.txt'",
             clf_test_tmp_path("s2.model"), clf_test_tmp_path("t2.model"), SPM_DIR, SPM_DIR);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "smaller than required_chars") != NULL, "%s", err);
    snprintf(args, sizeof args,
             "test \"$(ls -A '%s' | tr '\\n' ' ')\" = 's.model t.model v.model '",
             clf_test_tmpdir());
    ck_assert_msg(system(args) == 0, "files left behind in %s", clf_test_tmpdir());
    snprintf(args, sizeof args, "vocab --sentencepiece -o '%s' '%s/corpus.txt'",
             clf_test_tmp_path("n.model"), SPM_DIR);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "--vocab-size") != NULL, "%s", err);
    clf_test_remove_tmpdir();
}
END_TEST

/* clformer translate with .model vocabularies on both sides (a random model): one line out
 * per line in, detokenized by the library (no U+2581 left). */
START_TEST(test_cli_translate)
{
    clf_test_make_tmpdir("clf-spm");
    char yaml[512], args[2048], err[4096];
    int n = snprintf(yaml, sizeof yaml,
                     "model:\n  src_vocab: %d\n  tgt_vocab: %d\n  max_len: 64\n  d_model: 32\n"
                     "  layers: 1\n  heads: 4\n  d_ff: 64\nbackend:\n  name: cpu\n"
                     "  threads: 1\n",
                     MODEL_SIZE, MODEL_SIZE);
    clf_test_write_file(clf_test_tmp_path("m.yaml"), yaml, (size_t)n);
    snprintf(args, sizeof args, "init -c '%s' --seed 3 -o '%s'", clf_test_tmp_path("m.yaml"),
             clf_test_tmp_path("w.safetensors"));
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "init: %s", err);
    clf_test_write_text(clf_test_tmp_path("in.txt"),
                        "the cat builds the winter sky.\nDie Katze grüßt.\n\nПривет\n");
    snprintf(args, sizeof args,
             "translate -c '%s' -w '%s' --src-vocab '%s' --tgt-vocab '%s' --max-len 12 <'%s' "
             ">'%s'",
             clf_test_tmp_path("m.yaml"), clf_test_tmp_path("w.safetensors"), MODEL_PATH,
             MODEL_PATH, clf_test_tmp_path("in.txt"), clf_test_tmp_path("out.txt"));
    /* clf_test_run_cli sets stdin to /dev/null: run it here */
    char sh[2300];
    snprintf(sh, sizeof sh, "'%s' %s", CLF_CLI_PATH, args);
    ck_assert_msg(system(sh) == 0, "translate failed: %s", sh);
    char *out = clf_test_read_file(clf_test_tmp_path("out.txt"), NULL);
    int lines = 0;
    for (char *p = out; *p; p++)
        lines += *p == '\n';
    ck_assert_int_eq(lines, 4);
    ck_assert_msg(strstr(out, "\xe2\x96\x81") == NULL, "pieces left in the output: %s", out);
    free(out);
    clf_test_remove_tmpdir();
}
END_TEST

/* clformer train with the fixture model as the vocabulary of both sides: English lines of
 * the corpus to the German ones after them, a few steps with a validation (which decodes
 * through the library); a .model vocabulary that does not exist is refused, not built. */
START_TEST(test_cli_train)
{
    clf_test_make_tmpdir("clf-spm");
    char *corpus = clf_test_read_file(SPM_DIR "/corpus.txt", NULL);
    char *lines[400];
    int n = 0;
    for (char *p = corpus; *p && n < 400; n++) {
        char *nl = strchr(p, '\n');
        *nl = '\0';
        lines[n] = p;
        p = nl + 1;
    }
    FILE *f = fopen(clf_test_tmp_path("pairs.tsv"), "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i + 1 < n; i += 2)
        fprintf(f, "%s\t%s\n", lines[i], lines[i + 1]);
    ck_assert_int_eq(fclose(f), 0);
    free(corpus);
    char yaml[1024], args[1200], err[8192];
    /* a copy: a train that wrongly built vocabularies would overwrite the fixture */
    char vocab[512];
    snprintf(vocab, sizeof vocab, "%s", clf_test_tmp_path("v.model"));
    copy_file(MODEL_PATH, vocab);
    const char *vocab_tgt[2] = {vocab, "/nonexistent/tgt.model"};
    for (int k = 0; k < 2; k++) {
        int len = snprintf(yaml, sizeof yaml,
                           "model: {src_vocab: %d, tgt_vocab: %d, max_len: 48, d_model: 32, "
                           "layers: 1, heads: 2, d_ff: 64}\n"
                           "backend: {name: cpu, threads: 1}\n"
                           "train:\n"
                           "  data: {train: %s, valid: %s}\n"
                           "  vocab: {src: %s, tgt: %s}\n"
                           "  batch_size: 16\n"
                           "  steps: 4\n"
                           "  log_every: 2\n"
                           "  validate_every: 4\n"
                           "  checkpoint: {dir: %s, every: 4}\n",
                           MODEL_SIZE, MODEL_SIZE, clf_test_tmp_path("pairs.tsv"),
                           clf_test_tmp_path("pairs.tsv"), vocab_tgt[0], vocab_tgt[k],
                           clf_test_tmp_path(k ? "run1" : "run0"));
        clf_test_write_file(clf_test_tmp_path("exp.yaml"), yaml, (size_t)len);
        snprintf(args, sizeof args, "train -c '%s'", clf_test_tmp_path("exp.yaml"));
        int rc = clf_test_run_cli(args, err, sizeof err);
        if (k == 0) {
            ck_assert_msg(rc == 0, "train failed: %s", err);
            ck_assert_msg(strstr(err, "built vocabularies") == NULL, "%s", err);
            ck_assert_msg(strstr(err, "validation at step 4") != NULL, "%s", err);
        } else {
            ck_assert_int_eq(rc, 2);
            ck_assert_msg(strstr(err, "/nonexistent/tgt.model: no such file") != NULL, "%s", err);
        }
    }
    clf_test_remove_tmpdir();
}
END_TEST

CLF_TEST_SUITE_MAIN("spm",
                    CLF_TCASE("encode", 0, {test_ids_match_library},
                              {test_round_trip, CLF_LOOPS(round_trips)}, {test_unknown_and_lookups},
                              {test_refuses_bad_ids_and_utf8}),
                    CLF_TCASE("files", 0, {test_kind_detection}, {test_save_writes_model_bytes},
                              {test_refuses_bad_files}),
                    CLF_TCASE("train", 120, {test_train_like_fixture}, {test_train_bpe},
                              {test_train_refuses}, {test_cli_vocab}, {test_cli_translate},
                              {test_cli_train}))
