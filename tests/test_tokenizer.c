/* The word-level tokenizer against the HuggingFace tokenizers library (0.23.3): the
 * vocabularies it trains, the ids it encodes, the words its Whitespace pre-tokenizer cuts
 * and the tokenizer.json it writes (tests/fixtures/tokenizer/, see its README.md) were all
 * produced by that library from the corpus below, and are copied here as literals. Also:
 * save/load round trips, invalid UTF-8, and files that must be refused. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/tokenizer.h"
#include "testutil.h"

#define FIXTURE_DIR CLF_FIXTURES_DIR "/tokenizer"

/* ---- helpers ---- */

/* The library's training corpus for the fixtures (same lines, same order). */
static const char *const corpus[] = {
    "Hello, world!",
    "Hello again, world...",
    "the cat sat on the mat.",
    "the dog sat (on) the log.",
    "Grüße aus Köln, Grüße!",
    "Привет, мир! Привет.",
    "你好，世界。你好",
    "I \u2764\ufe0f emoji \U0001F600\U0001F44D\U0001F3FD!",
    "tabs\tand  spaces\u00a0nbsp_x 3.14",
    "[SOS] is not special in training",
    "",
};
#define N_CORPUS (sizeof corpus / sizeof corpus[0])

/* WordLevelTrainer(special_tokens=[...], min_frequency=1): the vocabulary by id. Counts
 * first (',' 4x, '.' 4x, 'the' 4x, '!' 3x, ...), ties by the UTF-8 bytes ('(' < ')' <
 * '...' < '14' < '3' < 'I' < 'Köln' < ...). Words like '[', 'SOS', ']' show that training
 * does not treat "[SOS]" in the text as a special token. */
static const char *const vocab_mf1[] = {
    "[UNK]",    "[PAD]", "[SOS]", "[EOS]",  ",",     ".",      "the",     "!",
    "Grüße",    "Hello", "on",    "sat",    "world", "Привет", "你好",    "(",
    ")",        "...",   "14",    "3",      "I",     "Köln",   "SOS",     "[",
    "]",        "again", "and",   "aus",    "cat",   "dog",    "emoji",   "in",
    "is",       "log",   "mat",   "nbsp_x", "not",   "spaces", "special", "tabs",
    "training", "мир",   "❤",     "。",     "世界",  "\ufe0f", "，",      "😀👍🏽!"};
/* min_frequency=2: the words seen at least twice. */
static const char *const vocab_mf2[] = {"[UNK]", "[PAD]", "[SOS]", "[EOS]",  ",",
                                        ".",     "the",   "!",     "Grüße",  "Hello",
                                        "on",    "sat",   "world", "Привет", "你好"};

static clf_tokenizer *build(int min_freq)
{
    clf_tokenizer *tok = NULL;
    CLF_ASSERT_OK(clf_tokenizer_build(corpus, N_CORPUS, min_freq, &tok));
    return tok;
}

static void assert_vocab(const clf_tokenizer *tok, const char *const *want, int n)
{
    ck_assert_int_eq(clf_tokenizer_size(tok), n);
    for (int i = 0; i < n; i++) {
        ck_assert_str_eq(clf_tokenizer_word(tok, i), want[i]);
        ck_assert_int_eq(clf_tokenizer_id(tok, want[i]), i);
    }
}

/* decode(encode(text)) with specials kept, into a static buffer. */
static const char *round_trip(const clf_tokenizer *tok, const char *text)
{
    static char out[1024];
    int32_t *ids;
    int n;
    char *s;
    CLF_ASSERT_OK(clf_tokenizer_encode(tok, text, strlen(text), &ids, &n));
    CLF_ASSERT_OK(clf_tokenizer_decode(tok, ids, n, 0, &s));
    snprintf(out, sizeof out, "%s", s);
    free(ids);
    free(s);
    return out;
}

/* ---- building ---- */

START_TEST(test_build_min_frequency_1)
{
    clf_tokenizer *tok = build(1);
    assert_vocab(tok, vocab_mf1, (int)(sizeof vocab_mf1 / sizeof vocab_mf1[0]));
    clf_tokenizer_specials sp = clf_tokenizer_special_ids(tok);
    ck_assert_int_eq(sp.unk, 0);
    ck_assert_int_eq(sp.pad, 1);
    ck_assert_int_eq(sp.sos, 2);
    ck_assert_int_eq(sp.eos, 3);
    for (int i = 0; i < 4; i++)
        ck_assert(clf_tokenizer_is_special(tok, i));
    ck_assert(!clf_tokenizer_is_special(tok, 4));
    ck_assert(!clf_tokenizer_is_special(tok, 22)); /* "SOS" */
    ck_assert(!clf_tokenizer_is_special(tok, -1));
    ck_assert(!clf_tokenizer_is_special(tok, 48));
    clf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_build_min_frequency_2)
{
    clf_tokenizer *tok = build(CLF_TOKENIZER_MIN_FREQUENCY);
    assert_vocab(tok, vocab_mf2, (int)(sizeof vocab_mf2 / sizeof vocab_mf2[0]));
    clf_tokenizer_free(tok);
    /* min_frequency 0 keeps every word, as 1 does (the library compares count >= min). */
    tok = build(0);
    ck_assert_int_eq(clf_tokenizer_size(tok), 48);
    clf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_build_order_ties_and_cap)
{
    /* counts: b 3, a 2, c 2, ab 2, z 1: ties by bytes, a prefix first ("a" < "ab"). */
    const char *lines[] = {"b a c ab", "b ab a", "c b z"};
    clf_tokenizer *tok = NULL;
    CLF_ASSERT_OK(clf_tokenizer_build(lines, 3, 1, &tok));
    const char *want[] = {"[UNK]", "[PAD]", "[SOS]", "[EOS]", "b", "a", "ab", "c", "z"};
    assert_vocab(tok, want, 9);
    clf_tokenizer_free(tok);
    /* vocab_size counts the specials, like the library's trainer: 6 = 4 + "b", "a". */
    CLF_ASSERT_OK(clf_tokenizer_build_sized(lines, 3, 1, 6, &tok));
    assert_vocab(tok, want, 6);
    clf_tokenizer_free(tok);
    CLF_ASSERT_OK(clf_tokenizer_build_sized(lines, 3, 1, 0, &tok)); /* 0: no cap */
    assert_vocab(tok, want, 9);
    clf_tokenizer_free(tok);
    /* no lines at all: just the specials */
    CLF_ASSERT_OK(clf_tokenizer_build(NULL, 0, 2, &tok));
    assert_vocab(tok, want, 4);
    clf_tokenizer_free(tok);

    ck_assert_int_eq(clf_tokenizer_build_sized(lines, 3, 1, 3, &tok), CLF_ERR_INPUT);
    ck_assert_ptr_null(tok);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "vocab_size 3"));
    ck_assert_int_eq(clf_tokenizer_build(lines, 3, -1, &tok), CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "min_frequency -1"));
}
END_TEST

START_TEST(test_build_rejects_invalid_utf8)
{
    const char *lines[] = {"fine line", "ab\xc3(", "never read"};
    clf_tokenizer *tok = NULL;
    ck_assert_int_eq(clf_tokenizer_build(lines, 3, 1, &tok), CLF_ERR_INPUT);
    ck_assert_ptr_null(tok);
    ck_assert_str_eq(clf_last_error(), "line 2 is not valid UTF-8 at byte 2");
}
END_TEST

START_TEST(test_build_file)
{
    clf_test_make_tmpdir("clf-tok");
    /* the corpus as a file with CRLF line ends ('\r' is white space): same vocabulary */
    char text[2048] = "";
    for (size_t i = 0; i < N_CORPUS; i++) {
        strcat(text, corpus[i]);
        strcat(text, "\r\n");
    }
    clf_test_write_text(clf_test_tmp_path("corpus.txt"), text);
    clf_tokenizer *tok = NULL;
    CLF_ASSERT_OK(clf_tokenizer_build_file(clf_test_tmp_path("corpus.txt"), 1, &tok));
    assert_vocab(tok, vocab_mf1, 48);
    clf_tokenizer_free(tok);

    clf_test_write_text(clf_test_tmp_path("bad.txt"), "ok\nok \xe2\x82\n");
    ck_assert_int_eq(clf_tokenizer_build_file(clf_test_tmp_path("bad.txt"), 1, &tok),
                     CLF_ERR_INPUT);
    char want[600];
    snprintf(want, sizeof want, "%s: line 2 is not valid UTF-8 at byte 3",
             clf_test_tmp_path("bad.txt"));
    ck_assert_str_eq(clf_last_error(), want);

    ck_assert_int_eq(clf_tokenizer_build_file(clf_test_tmp_path("missing.txt"), 1, &tok),
                     CLF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "missing.txt"));
    clf_test_remove_tmpdir();
}
END_TEST

/* ---- encoding and decoding ---- */

/* tokenizer.encode(text).ids from the library, for the min_frequency 1 and 2 tokenizers. */
static const struct {
    const char *text;
    int n;
    int32_t mf1[8], mf2[8];
} encodings[] = {
    {"Hello, world!", 4, {9, 4, 12, 7}, {9, 4, 12, 7}},
    {"the cat sat on the log...", 7, {6, 28, 11, 10, 6, 33, 17}, {6, 0, 11, 10, 6, 0, 0}},
    {"Grüße aus Köln!", 4, {8, 27, 21, 7}, {8, 0, 0, 7}},
    {"Привет, мир!", 4, {13, 4, 41, 7}, {13, 4, 0, 7}},
    {"你好，世界。", 4, {14, 46, 44, 43}, {14, 0, 0, 0}},
    {"I \u2764\ufe0f \U0001F600\U0001F44D\U0001F3FD!", 4, {20, 42, 45, 47}, {0, 0, 0, 0}},
    {"unknown words here", 3, {0, 0, 0}, {0, 0, 0}},
    {"", 0, {0}, {0}},
    {"   \t ", 0, {0}, {0}},
    /* added tokens are cut out of the text first, wherever they are */
    {"x [SOS]Hello[EOS] z", 5, {0, 2, 9, 3, 0}, {0, 2, 9, 3, 0}},
    {"a[PAD][PAD]b", 4, {0, 1, 1, 0}, {0, 1, 1, 0}},
    {"3.14_x nbsp", 4, {19, 5, 0, 0}, {0, 5, 0, 0}},
};

START_TEST(test_encode_like_library)
{
    clf_tokenizer *tok1 = build(1), *tok2 = build(2);
    const char *text = encodings[_i].text;
    int32_t *ids;
    int n;
    for (int k = 0; k < 2; k++) {
        CLF_ASSERT_OK(clf_tokenizer_encode(k ? tok2 : tok1, text, strlen(text), &ids, &n));
        ck_assert_msg(n == encodings[_i].n, "'%s': %d tokens, expected %d", text, n,
                      encodings[_i].n);
        const int32_t *want = k ? encodings[_i].mf2 : encodings[_i].mf1;
        for (int i = 0; i < n; i++)
            ck_assert_msg(ids[i] == want[i], "'%s' (min_frequency %d): token %d is %d, not %d",
                          text, k + 1, i, ids[i], want[i]);
        if (n == 0)
            ck_assert_ptr_null(ids);
        free(ids);
    }
    clf_tokenizer_free(tok1);
    clf_tokenizer_free(tok2);
}
END_TEST

START_TEST(test_round_trip)
{
    clf_tokenizer *tok = build(1);
    ck_assert_str_eq(round_trip(tok, "Hello, world!"), "Hello , world !");
    ck_assert_str_eq(round_trip(tok, "Grüße aus Köln!"), "Grüße aus Köln !");
    ck_assert_str_eq(round_trip(tok, "Привет,мир!"), "Привет , мир !");
    ck_assert_str_eq(round_trip(tok, "你好，世界。"), "你好 ， 世界 。");
    ck_assert_str_eq(round_trip(tok, "I \u2764\ufe0f \U0001F600\U0001F44D\U0001F3FD!"),
                     "I \u2764 \ufe0f \U0001F600\U0001F44D\U0001F3FD!");
    ck_assert_str_eq(round_trip(tok, "Hello stranger"), "Hello [UNK]");
    ck_assert_str_eq(round_trip(tok, ""), "");

    /* skip_specials drops [SOS] [EOS] [PAD] [UNK]; the library's decode does the same */
    int32_t ids[] = {2, 9, 4, 0, 12, 3, 1, 1};
    char *s;
    clf_test_assert_decodes(tok, ids, 8, 1, "Hello , world");
    clf_test_assert_decodes(tok, ids, 8, 0, "[SOS] Hello , [UNK] world [EOS] [PAD] [PAD]");
    clf_test_assert_decodes(tok, ids, 0, 1, "");
    clf_test_assert_decodes(tok, ids + 5, 3, 1, ""); /* only specials */

    int32_t bad[] = {4, 48};
    ck_assert_int_eq(clf_tokenizer_decode(tok, bad, 2, 0, &s), CLF_ERR_INPUT);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "id 48 at position 1"));
    bad[1] = -1;
    ck_assert_int_eq(clf_tokenizer_decode(tok, bad, 2, 0, &s), CLF_ERR_INPUT);
    clf_tokenizer_free(tok);
}
END_TEST

/* Pre-tokenization of tricky text, as Whitespace().pre_tokenize_str gives it (joined by
 * spaces): Latin-1 numbers and symbols, connector punctuation, Unicode spaces, currency,
 * enclosed letters vs numbers, combining marks, Arabic and Devanagari punctuation, joiners,
 * emoji. */
static const struct {
    const char *text, *words;
} splits[] = {
    {"a\u00b2b\u00bdc", "a \u00b2 b \u00bd c"},
    {"f_g\u203fh", "f_g\u203fh"},
    {"a\u00a0b\u3000c\u2003d", "a b c d"},
    {"x\u20acy", "x \u20ac y"},
    {"\u24b6\u24b7 \u2460", "\u24b6\u24b7 \u2460"},
    {"na\u00efve caf\u00e9", "na\u00efve caf\u00e9"},
    {"e\u0301t\u00e9", "e\u0301t\u00e9"},
    {"\u0627\u0644\u0633\u0644\u0627\u0645\u060c \u0639\u0644\u064a\u0643\u0645",
     "\u0627\u0644\u0633\u0644\u0627\u0645 \u060c \u0639\u0644\u064a\u0643\u0645"},
    {"\u0928\u092e\u0938\u094d\u0924\u0947\u0964", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0964"},
    {"\u00abquoted\u00bb", "\u00ab quoted \u00bb"},
    {"it's 5\u00d73=15", "it ' s 5 \u00d7 3 = 15"},
    {"\u200dzwj\u200cz", "\u200dzwj\u200cz"},
    {"a\xc2\x85"
     "b\u2028c",
     "a b c"},
    {"\U0001F600x\U0001F600", "\U0001F600 x \U0001F600"},
    {"tab\tnew\nline\r\n", "tab new line"},
    {"\u00aa\u00b5\u00ba", "\u00aa\u00b5\u00ba"},
    {"..!?", "..!?"},
};

START_TEST(test_pretokenizer_like_library)
{
    const char *line[] = {splits[_i].text};
    clf_tokenizer *tok = NULL;
    CLF_ASSERT_OK(clf_tokenizer_build(line, 1, 1, &tok));
    ck_assert_str_eq(round_trip(tok, splits[_i].text), splits[_i].words);
    clf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_nul_and_control_bytes)
{
    /* "\0a\x7f": NUL and DEL are neither word nor space: three words */
    const char text[] = {'\0', 'a', 0x7f};
    const char *line[] = {"a"};
    clf_tokenizer *tok = NULL;
    CLF_ASSERT_OK(clf_tokenizer_build(line, 1, 1, &tok));
    int32_t *ids;
    int n;
    CLF_ASSERT_OK(clf_tokenizer_encode(tok, text, 3, &ids, &n));
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(ids[0], 0);
    ck_assert_int_eq(ids[1], 4);
    ck_assert_int_eq(ids[2], 0);
    free(ids);
    ck_assert_int_eq(clf_tokenizer_id_n(tok, "a", 1), 4);
    ck_assert_int_eq(clf_tokenizer_id_n(tok, "a\0", 2), -1);
    clf_tokenizer_free(tok);
}
END_TEST

static const struct {
    const char *text;
    size_t bad_at;
} invalid_utf8[] = {
    {"\xff", 0},                 /* never a UTF-8 byte */
    {"ab\x80", 2},               /* lone continuation byte */
    {"ok \xc3", 3},              /* truncated 2-byte sequence */
    {"abc\xe2\x82", 3},          /* truncated 3-byte sequence */
    {"a\xc0\xaf", 1},            /* overlong '/' */
    {"xy\xe0\x80\xaf", 2},       /* overlong 3-byte form */
    {"\xed\xa0\x80", 0},         /* a UTF-16 surrogate, U+D800 */
    {"Gr\xc3\xbc\xc3", 4},       /* after a valid "ü" */
    {"\xf4\x90\x80\x80", 0},     /* above U+10FFFF */
    {"\xf0\x9f\x98\x80\xf5", 4}, /* after an emoji, a byte no sequence starts with */
};

START_TEST(test_encode_rejects_invalid_utf8)
{
    clf_tokenizer *tok = build(1);
    int32_t *ids = (int32_t *)&ids;
    int n = 7;
    const char *text = invalid_utf8[_i].text;
    ck_assert_int_eq(clf_tokenizer_encode(tok, text, strlen(text), &ids, &n), CLF_ERR_INPUT);
    ck_assert_ptr_null(ids);
    ck_assert_int_eq(n, 0);
    char want[128];
    snprintf(want, sizeof want, "line is not valid UTF-8 at byte %zu", invalid_utf8[_i].bad_at);
    ck_assert_str_eq(clf_last_error(), want);
    clf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_lookups)
{
    clf_tokenizer *tok = build(2);
    ck_assert_int_eq(clf_tokenizer_id(tok, "world"), 12);
    ck_assert_int_eq(clf_tokenizer_id(tok, "World"), -1);
    ck_assert_int_eq(clf_tokenizer_id(tok, ""), -1);
    ck_assert_int_eq(clf_tokenizer_id_n(tok, "worldly", 5), 12);
    ck_assert_str_eq(clf_tokenizer_word(tok, 14), "你好");
    ck_assert_ptr_null(clf_tokenizer_word(tok, 15));
    ck_assert_ptr_null(clf_tokenizer_word(tok, -1));
    clf_tokenizer_free(tok);
    clf_tokenizer_free(NULL);

    /* a bigger vocabulary: every word found by the hash table at its id */
    enum { N = 5000 };
    char *text = malloc(N * 8);
    ck_assert_ptr_nonnull(text);
    char *p = text;
    for (int i = 0; i < N; i++)
        p += sprintf(p, "w%d ", i);
    const char *line[] = {text};
    CLF_ASSERT_OK(clf_tokenizer_build(line, 1, 1, &tok));
    ck_assert_int_eq(clf_tokenizer_size(tok), N + 4);
    for (int id = 4; id < N + 4; id++)
        ck_assert_int_eq(clf_tokenizer_id(tok, clf_tokenizer_word(tok, id)), id);
    ck_assert_str_eq(clf_tokenizer_word(tok, 4), "w0"); /* all count 1: by bytes */
    ck_assert_str_eq(clf_tokenizer_word(tok, 5), "w1");
    ck_assert_str_eq(clf_tokenizer_word(tok, 6), "w10");
    free(text);
    clf_tokenizer_free(tok);
}
END_TEST

/* ---- files ---- */

START_TEST(test_save_writes_library_bytes)
{
    /* The library saved the min_frequency 1 tokenizer of the corpus as wordlevel.json:
     * clformer builds the same vocabulary and writes the same bytes. */
    clf_test_make_tmpdir("clf-tok");
    clf_tokenizer *tok = build(1);
    CLF_ASSERT_OK(clf_tokenizer_save(tok, clf_test_tmp_path("tok.json")));
    size_t n_got, n_want;
    char *got = clf_test_read_file(clf_test_tmp_path("tok.json"), &n_got);
    char *want = clf_test_read_file(FIXTURE_DIR "/wordlevel.json", &n_want);
    ck_assert_uint_eq(n_got, n_want);
    ck_assert_msg(memcmp(got, want, n_want) == 0, "saved file differs from the library's");
    free(got);
    free(want);
    clf_tokenizer_free(tok);

    /* no temporary file is left behind */
    DIR *d = opendir(clf_test_tmpdir());
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)) != NULL)
        files += e->d_name[0] != '.';
    closedir(d);
    ck_assert_int_eq(files, 1);
    clf_test_remove_tmpdir();
}
END_TEST

static void assert_same_tokenizer(const clf_tokenizer *a, const clf_tokenizer *b)
{
    ck_assert_int_eq(clf_tokenizer_size(a), clf_tokenizer_size(b));
    for (int i = 0; i < clf_tokenizer_size(a); i++) {
        ck_assert_str_eq(clf_tokenizer_word(a, i), clf_tokenizer_word(b, i));
        ck_assert_int_eq(clf_tokenizer_is_special(a, i), clf_tokenizer_is_special(b, i));
    }
    clf_tokenizer_specials x = clf_tokenizer_special_ids(a), y = clf_tokenizer_special_ids(b);
    ck_assert_int_eq(x.unk, y.unk);
    ck_assert_int_eq(x.pad, y.pad);
    ck_assert_int_eq(x.sos, y.sos);
    ck_assert_int_eq(x.eos, y.eos);
}

START_TEST(test_save_load_round_trip)
{
    clf_test_make_tmpdir("clf-tok");
    for (int mf = 1; mf <= 2; mf++) {
        clf_tokenizer *tok = build(mf), *back = NULL;
        CLF_ASSERT_OK(clf_tokenizer_save(tok, clf_test_tmp_path("a.json")));
        CLF_ASSERT_OK(clf_tokenizer_load(clf_test_tmp_path("a.json"), &back));
        assert_same_tokenizer(tok, back);
        /* saving the loaded one writes the same bytes; saving over a file replaces it */
        CLF_ASSERT_OK(clf_tokenizer_save(back, clf_test_tmp_path("b.json")));
        CLF_ASSERT_OK(clf_tokenizer_save(back, clf_test_tmp_path("b.json")));
        size_t na, nb;
        char *a = clf_test_read_file(clf_test_tmp_path("a.json"), &na),
             *b = clf_test_read_file(clf_test_tmp_path("b.json"), &nb);
        ck_assert_uint_eq(na, nb);
        ck_assert(memcmp(a, b, na) == 0);
        free(a);
        free(b);
        ck_assert_str_eq(round_trip(back, "x [SOS]Hello, world![EOS]"),
                         "[UNK] [SOS] Hello , world ! [EOS]");
        clf_tokenizer_free(tok);
        clf_tokenizer_free(back);
    }
    /* a word with quotes, backslashes and control characters survives the JSON escapes */
    const char *line[] = {"\"q\" \\ \x01\x1f\x7f"};
    clf_tokenizer *tok = NULL, *back = NULL;
    CLF_ASSERT_OK(clf_tokenizer_build(line, 1, 1, &tok));
    CLF_ASSERT_OK(clf_tokenizer_save(tok, clf_test_tmp_path("c.json")));
    CLF_ASSERT_OK(clf_tokenizer_load(clf_test_tmp_path("c.json"), &back));
    assert_same_tokenizer(tok, back);
    clf_tokenizer_free(tok);
    clf_tokenizer_free(back);

    tok = build(1);
    ck_assert_int_eq(clf_tokenizer_save(tok, "/nonexistent-dir/x.json"), CLF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "/nonexistent-dir/x.json"));
    clf_tokenizer_free(tok);
    clf_test_remove_tmpdir();
}
END_TEST

START_TEST(test_load_library_files)
{
    /* wordlevel.json: as Tokenizer.save wrote it (pretty, raw UTF-8);
     * wordlevel_escaped.json: the same tokenizer as json.dumps(ensure_ascii=True) writes it,
     * keys in another order, vocab shuffled, added tokens in the pre-0.14 key order with
     * "special" first; the library loads both. */
    const char *files[] = {FIXTURE_DIR "/wordlevel.json", FIXTURE_DIR "/wordlevel_escaped.json"};
    clf_tokenizer *want = build(1);
    for (int i = 0; i < 2; i++) {
        clf_tokenizer *tok = NULL;
        CLF_ASSERT_OK(clf_tokenizer_load(files[i], &tok));
        assert_vocab(tok, vocab_mf1, 48);
        assert_same_tokenizer(tok, want);
        ck_assert_str_eq(round_trip(tok, "I \u2764\ufe0f \U0001F600\U0001F44D\U0001F3FD!"),
                         "I \u2764 \ufe0f \U0001F600\U0001F44D\U0001F3FD!");
        clf_tokenizer_free(tok);
    }
    clf_tokenizer_free(want);
}
END_TEST

START_TEST(test_load_other_layouts)
{
    clf_test_make_tmpdir("clf-tok");
    /* extra keys anywhere, no version, added tokens beyond model.vocab (id 5), specials
     * found by name at other ids, another unk_token */
    clf_test_write_text(
        clf_test_tmp_path("t.json"),
        "{\"extra\": [1, {\"x\": null}], \"model\": {\"vocab\": {\"<unk>\": 0, "
        "\"[EOS]\": 1, \"[SOS]\": 2, \"a\": 3, \"[PAD]\": 4}, \"type\": \"WordLevel\", "
        "\"unk_token\": \"<unk>\", \"dropout\": 0.5}, \"pre_tokenizer\": {\"type\": "
        "\"Whitespace\"}, \"padding\": {\"strategy\": \"BatchLongest\"}, "
        "\"added_tokens\": [{\"id\": 5, \"content\": \"<sep>\", \"special\": false, "
        "\"normalized\": true, \"comment\": \"ignored\"}, {\"content\": \"[SOS]\", "
        "\"id\": 2, \"special\": true}]}");
    clf_tokenizer *tok = NULL;
    CLF_ASSERT_OK(clf_tokenizer_load(clf_test_tmp_path("t.json"), &tok));
    ck_assert_int_eq(clf_tokenizer_size(tok), 6);
    clf_tokenizer_specials sp = clf_tokenizer_special_ids(tok);
    ck_assert_int_eq(sp.unk, 0);
    ck_assert_int_eq(sp.pad, 4);
    ck_assert_int_eq(sp.sos, 2);
    ck_assert_int_eq(sp.eos, 1);
    ck_assert(clf_tokenizer_is_special(tok, 2));
    ck_assert(!clf_tokenizer_is_special(tok, 5)); /* added, not special */
    ck_assert(!clf_tokenizer_is_special(tok, 1)); /* [EOS] is only a vocab word here */
    /* [EOS] is no added token here: the pre-tokenizer splits it into [ EOS ] */
    ck_assert_str_eq(round_trip(tok, "a<sep>b [SOS][EOS]"),
                     "a <sep> <unk> [SOS] <unk> <unk> <unk>");
    int32_t *ids;
    int n;
    clf_tokenizer_free(tok);

    /* unk_token not in the vocabulary: known words encode, unknown ones are an error */
    clf_test_write_text(
        clf_test_tmp_path("nounk.json"),
        "{\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"a\": 0}, \"unk_token\": "
        "\"[UNK]\"}, \"pre_tokenizer\": {\"type\": \"Whitespace\"}}");
    CLF_ASSERT_OK(clf_tokenizer_load(clf_test_tmp_path("nounk.json"), &tok));
    ck_assert_int_eq(clf_tokenizer_special_ids(tok).unk, -1);
    ck_assert_int_eq(clf_tokenizer_special_ids(tok).pad, -1);
    CLF_ASSERT_OK(clf_tokenizer_encode(tok, "a a", 3, &ids, &n));
    ck_assert_int_eq(n, 2);
    free(ids);
    ck_assert_int_eq(clf_tokenizer_encode(tok, "a b", 3, &ids, &n), CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "'b' is not in the vocabulary"));
    clf_tokenizer_free(tok);
    clf_test_remove_tmpdir();
}
END_TEST

/* Files that are not this tokenizer, each refused with a message that names the file and
 * contains the given text. */
#define PRE "\"pre_tokenizer\": {\"type\": \"Whitespace\"}, "
#define WL(vocab)                                                                                  \
    "\"model\": {\"type\": \"WordLevel\", \"unk_token\": \"[UNK]\", \"vocab\": " vocab "}"
static const struct {
    const char *json, *want;
} bad_files[] = {
    {"{" PRE "\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
     "model type is 'BPE'; clformer reads WordLevel tokenizers only"},
    {"{" PRE "\"model\": {\"vocab\": {\"a\": 0}, \"unk_token\": \"a\"}}", "no \"type\""},
    {"{" PRE "\"version\": \"2.0\", " WL("{}") "}", "version '2.0'"},
    {"[1, 2]", "the top level is an array"},
    {"{\"pre_tokenizer\": {\"type\": \"Whitespace\"}}", "no \"model\" object"},
    {"{\"added_tokens\": [{\"id\": 0, \"content\": \"[UNK]\"}], " PRE WL(
         "{\"[UNK]\": 0, \"b\": 2}") "}",
     "no word has id 1, but 'b' has id 2"},
    {"{" PRE WL("{\"[UNK]\": 0, \"a\": 7}") "}", "'a' has id 7, beyond the 2 entries"},
    {"{" PRE WL("{\"[UNK]\": 0, \"a\": 1, \"b\": 1}") "}", "'a' and 'b' both have id 1"},
    {"{" PRE WL("{\"[UNK]\": 0, \"a\": 1.5}") "}", "the id of 'a' is not a non-negative integer"},
    {"{" PRE WL("{\"[UNK]\": 0, \"a\": -1}") "}", "the id of 'a' is not a non-negative integer"},
    {"{" PRE WL("[]") "}", "model.vocab is missing or not an object"},
    {"{" PRE "\"model\": {\"type\": \"WordLevel\", \"vocab\": {}}}", "model.unk_token"},
    {"{\"normalizer\": {\"type\": \"Lowercase\"}, " PRE WL("{}") "}",
     "normalizer 'Lowercase' is not supported"},
    {"{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, " WL("{}") "}",
     "pre_tokenizer 'ByteLevel' is not supported"},
    {"{" WL("{}") "}", "pre_tokenizer 'null' is not supported"},
    {"{\"post_processor\": {\"type\": \"TemplateProcessing\"}, " PRE WL("{}") "}",
     "post_processor 'TemplateProcessing' is not supported"},
    {"{\"decoder\": {\"type\": \"WordPiece\"}, " PRE WL("{}") "}",
     "decoder 'WordPiece' is not supported"},
    {"{\"added_tokens\": [{\"id\": 0, \"content\": \"[UNK]\", \"lstrip\": true}], " PRE WL(
         "{\"[UNK]\": 0}") "}",
     "added token '[UNK]' sets \"lstrip\""},
    {"{\"added_tokens\": [{\"id\": 1, \"content\": \"[SEP]\"}], " PRE WL(
         "{\"[UNK]\": 0, \"a\": 1}") "}",
     "added token '[SEP]' has id 1, which is 'a'"},
    {"{\"added_tokens\": [{\"id\": 2, \"content\": \"a\"}], " PRE WL(
         "{\"[UNK]\": 0, \"a\": 1}") "}",
     "'a' has two ids, 1 and 2"},
    {"{\"added_tokens\": [{\"content\": \"x\"}], " PRE WL("{\"[UNK]\": 0}") "}",
     "added_tokens[0] needs an integer \"id\""},
    {"{\"added_tokens\": 3, " PRE WL("{}") "}", "added_tokens is not an array"},
    {"{" PRE WL("{\"[UNK]\": 0}") ",}", "invalid JSON"},
};

START_TEST(test_load_rejects)
{
    clf_test_make_tmpdir("clf-tok");
    clf_test_write_text(clf_test_tmp_path("bad.json"), bad_files[_i].json);
    clf_tokenizer *tok = (clf_tokenizer *)&tok;
    ck_assert_int_eq(clf_tokenizer_load(clf_test_tmp_path("bad.json"), &tok), CLF_ERR_INPUT);
    ck_assert_ptr_null(tok);
    const char *msg = clf_last_error();
    ck_assert_msg(strstr(msg, clf_test_tmp_path("bad.json")) != NULL, "'%s' does not name the file",
                  msg);
    ck_assert_msg(strstr(msg, bad_files[_i].want) != NULL, "'%s' lacks '%s'", msg,
                  bad_files[_i].want);
    clf_test_remove_tmpdir();
}
END_TEST

START_TEST(test_load_missing_file)
{
    clf_tokenizer *tok = NULL;
    ck_assert_int_eq(clf_tokenizer_load("/nonexistent/tokenizer.json", &tok), CLF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "/nonexistent/tokenizer.json"));
}
END_TEST

/* The readers' limits (README, "Limits"): files over them are refused before they are
 * read (sparse files: no disk used), naming the file and the limit; a string over the
 * JSON reader's limit names where it starts. */
START_TEST(test_limits)
{
    clf_test_make_tmpdir("clf-tok");
    clf_tokenizer *tok = NULL;
    const char *json = clf_test_tmp_path("big.json");
    char want[512];
    clf_test_write_sparse(json, "{", (uint64_t)CLF_TOKENIZER_JSON_MAX + 1);
    ck_assert_int_eq(clf_tokenizer_load(json, &tok), CLF_ERR_INPUT);
    ck_assert_ptr_null(tok);
    snprintf(want, sizeof want, "%s: 268435457 bytes, more than the limit of 268435456", json);
    ck_assert_str_eq(clf_last_error(), want);

    const char *corpus = clf_test_tmp_path("corpus.txt");
    clf_test_write_sparse(corpus, "a b c\n", (uint64_t)CLF_TOKENIZER_CORPUS_MAX + 1);
    ck_assert_int_eq(clf_tokenizer_build_file(corpus, 1, &tok), CLF_ERR_INPUT);
    ck_assert_ptr_null(tok);
    snprintf(want, sizeof want, "%s: 4294967297 bytes, more than the limit of 4294967296", corpus);
    ck_assert_str_eq(clf_last_error(), want);

    /* a word of 1 MiB + 1 bytes */
    const size_t n = (1 << 20) + 1;
    const char head[] = "{\"model\": {\"type\": \"WordLevel\", \"unk_token\": \"[UNK]\", "
                        "\"vocab\": {\"";
    char *text = malloc(sizeof head + n + 16);
    ck_assert_ptr_nonnull(text);
    memcpy(text, head, sizeof head - 1);
    memset(text + sizeof head - 1, 'w', n);
    memcpy(text + sizeof head - 1 + n, "\": 0}}}", 8);
    clf_test_write_text(json, text);
    free(text);
    ck_assert_int_eq(clf_tokenizer_load(json, &tok), CLF_ERR_INPUT);
    snprintf(want, sizeof want,
             "%s: invalid JSON at byte %zu (line 1, column %zu): a string of 1048577 bytes, more "
             "than the limit of 1048576",
             json, sizeof head - 2, sizeof head - 1);
    ck_assert_str_eq(clf_last_error(), want);
    clf_test_remove_tmpdir();
}
END_TEST

CLF_TEST_SUITE_MAIN(
    "tokenizer",
    CLF_TCASE("build", 0, {test_build_min_frequency_1}, {test_build_min_frequency_2},
              {test_build_order_ties_and_cap}, {test_build_rejects_invalid_utf8}, {test_build_file},
              {test_limits}),
    CLF_TCASE("encode", 0, {test_encode_like_library, CLF_LOOPS(encodings)}, {test_round_trip},
              {test_pretokenizer_like_library, CLF_LOOPS(splits)}, {test_nul_and_control_bytes},
              {test_encode_rejects_invalid_utf8, CLF_LOOPS(invalid_utf8)}, {test_lookups}),
    CLF_TCASE("files", 0, {test_save_writes_library_bytes}, {test_save_load_round_trip},
              {test_load_library_files}, {test_load_other_layouts},
              {test_load_rejects, CLF_LOOPS(bad_files)}, {test_load_missing_file}))
