/* The dataset module: TSV and two-file loading (same pairs either way), the framing of
 * src / tgt_in / labels with the tokenizers' own specials, padding, which lines are skipped
 * and counted, vocabularies built from the data, both batching modes (every pair exactly
 * once per epoch, the token budget kept, the same plan for the same (seed, epoch) whatever
 * came before, other plans for other epochs, file order without shuffle), and the message
 * of every error. Fixtures are small files written to a temporary directory here. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/dataset.h"
#include "clformer/rng.h"
#include "testutil.h"

/* ---- helpers ---- */

/* Vocabularies of a corpus (min_frequency 1: every word). */
static void vocabs_of(const char *src_path, const char *tgt_path, clf_tokenizer **src,
                      clf_tokenizer **tgt)
{
    CLF_ASSERT_OK(clf_dataset_build_vocabs(src_path, tgt_path, 1, src, tgt));
}

static clf_dataset *load(const char *src_path, const char *tgt_path, const clf_tokenizer *src,
                         const clf_tokenizer *tgt, int max_len)
{
    clf_dataset_opts o = {src_path, tgt_path, src, tgt, max_len};
    clf_dataset *d = NULL;
    CLF_ASSERT_OK(clf_dataset_load(&o, &d));
    ck_assert_ptr_nonnull(d);
    return d;
}

static int32_t id_of(const clf_tokenizer *tok, const char *w)
{
    int32_t id = clf_tokenizer_id(tok, w);
    ck_assert_msg(id >= 0, "'%s' is not in the vocabulary", w);
    return id;
}

static void assert_ids(const int32_t *got, const int32_t *want, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s[%d] = %d, want %d", what, i, (int)got[i],
                      (int)want[i]);
}

/* the three id arrays of a batch: ns source and nt target cells */
static void assert_batch(const clf_batch *bt, const int32_t *src, int ns, const int32_t *tgt_in,
                         const int32_t *labels, int nt)
{
    assert_ids(bt->src, src, ns, "src");
    assert_ids(bt->tgt_in, tgt_in, nt, "tgt_in");
    assert_ids(bt->labels, labels, nt, "labels");
}

/* ids of text, as the tokenizer encodes it (caller frees) */
static int32_t *encode(const clf_tokenizer *tok, const char *text, int *n)
{
    int32_t *ids = NULL;
    CLF_ASSERT_OK(clf_tokenizer_encode(tok, text, strlen(text), &ids, n));
    return ids;
}

/* Pair i of d holds texts src/tgt and their ids. */
static void assert_pair(const clf_dataset *d, size_t i, const clf_tokenizer *st,
                        const clf_tokenizer *tt, const char *src, const char *tgt, size_t line)
{
    const char *s, *t;
    clf_dataset_text(d, i, &s, &t);
    ck_assert_str_eq(s, src);
    ck_assert_str_eq(t, tgt);
    ck_assert_uint_eq(clf_dataset_line(d, i), line);
    const int32_t *x, *y;
    int xn, yn, wn;
    clf_dataset_ids(d, i, &x, &xn, &y, &yn);
    int32_t *want = encode(st, src, &wn);
    ck_assert_int_eq(xn, wn);
    assert_ids(x, want, wn, "src ids");
    free(want);
    want = encode(tt, tgt, &wn);
    ck_assert_int_eq(yn, wn);
    assert_ids(y, want, wn, "tgt ids");
    free(want);
}

/* ---- loading ---- */

/* Lines 2 and 4 too long for max_len 5, 5..9 empty one way or another; CRLF on line 10,
 * no '\n' after line 11. */
static const char skip_corpus[] = "a b c\tx y\n"   /* src 3+2 = 5, tgt 2+1: kept */
                                  "a b c d\tx\n"   /* src 4+2 = 6 > 5: long */
                                  "a\tx y z w\n"   /* tgt 4+1 = 5: kept */
                                  "a\tx y z w v\n" /* tgt 5+1 = 6 > 5: long */
                                  "\n"             /* empty line */
                                  "   \n"          /* blank, no TAB: empty, not an error */
                                  "a\t\n"          /* empty target */
                                  "\tx\n"          /* empty source */
                                  " \t \n"         /* both blank */
                                  "b\tz\r\n"       /* CRLF */
                                  "c ,\ty !";      /* last line without '\n' */

START_TEST(test_tsv_skips_and_counts)
{
    clf_test_make_tmpdir("clf-data");
    const char *path = clf_test_tmp_path("skip.tsv");
    clf_test_write_text(path, skip_corpus);
    clf_tokenizer *st, *tt;
    vocabs_of(path, NULL, &st, &tt);
    clf_dataset *d = load(path, "", st, tt, 5);
    ck_assert_uint_eq(clf_dataset_size(d), 4);
    ck_assert_uint_eq(clf_dataset_skipped_long(d), 2);
    ck_assert_uint_eq(clf_dataset_skipped_empty(d), 5);
    ck_assert_uint_eq(clf_dataset_skipped(d), 7);
    assert_pair(d, 0, st, tt, "a b c", "x y", 1);
    assert_pair(d, 1, st, tt, "a", "x y z w", 3);
    assert_pair(d, 2, st, tt, "b", "z", 10); /* no '\r' left in the text */
    assert_pair(d, 3, st, tt, "c ,", "y !", 11);
    /* out of range: NULLs and zeros, no crash */
    const char *s = "x", *t = "x";
    clf_dataset_text(d, 4, &s, &t);
    ck_assert_ptr_null(s);
    ck_assert_ptr_null(t);
    ck_assert_uint_eq(clf_dataset_line(d, 4), 0);
    clf_dataset_free(d);

    /* no limit: the long pairs come back, the empty ones stay out */
    d = load(path, NULL, st, tt, 0);
    ck_assert_uint_eq(clf_dataset_size(d), 6);
    ck_assert_uint_eq(clf_dataset_skipped_long(d), 0);
    ck_assert_uint_eq(clf_dataset_skipped_empty(d), 5);
    assert_pair(d, 1, st, tt, "a b c d", "x", 2);
    clf_dataset_free(d);
    clf_tokenizer_free(st);
    clf_tokenizer_free(tt);
    clf_test_remove_tmpdir();
}
END_TEST

START_TEST(test_two_files_match_tsv)
{
    clf_test_make_tmpdir("clf-data");
    /* the same pairs as a TSV and as two files (one of them CRLF, without a final '\n');
     * in two files a TAB is only white space inside a sentence */
    clf_test_write_text(clf_test_tmp_path("p.tsv"), "the cat sat .\tdie Katze saß .\n"
                                                    "\t\n"
                                                    "a  dog !\tein Hund !\n"
                                                    "Grüße aus Köln\tgreetings from Cologne\n");
    clf_test_write_text(clf_test_tmp_path("p.en"), "the cat sat .\n\na  dog !\nGrüße aus Köln\n");
    clf_test_write_text(clf_test_tmp_path("p.de"),
                        "die Katze saß .\r\n\r\nein Hund !\r\ngreetings from Cologne");
    clf_tokenizer *st, *tt, *st2, *tt2;
    vocabs_of(clf_test_tmp_path("p.tsv"), NULL, &st, &tt);
    vocabs_of(clf_test_tmp_path("p.en"), clf_test_tmp_path("p.de"), &st2, &tt2);
    /* the same vocabularies either way */
    ck_assert_int_eq(clf_tokenizer_size(st), clf_tokenizer_size(st2));
    ck_assert_int_eq(clf_tokenizer_size(tt), clf_tokenizer_size(tt2));
    for (int i = 0; i < clf_tokenizer_size(st); i++)
        ck_assert_str_eq(clf_tokenizer_word(st, i), clf_tokenizer_word(st2, i));
    for (int i = 0; i < clf_tokenizer_size(tt); i++)
        ck_assert_str_eq(clf_tokenizer_word(tt, i), clf_tokenizer_word(tt2, i));
    /* each side has only its own words */
    ck_assert_int_ge(clf_tokenizer_id(st, "Köln"), 4);
    ck_assert_int_eq(clf_tokenizer_id(st, "Katze"), -1);
    ck_assert_int_ge(clf_tokenizer_id(tt, "Katze"), 4);
    ck_assert_int_eq(clf_tokenizer_id(tt, "cat"), -1);

    clf_dataset *a = load(clf_test_tmp_path("p.tsv"), NULL, st, tt, 0);
    clf_dataset *b = load(clf_test_tmp_path("p.en"), clf_test_tmp_path("p.de"), st, tt, 0);
    ck_assert_uint_eq(clf_dataset_size(a), 3);
    ck_assert_uint_eq(clf_dataset_size(b), 3);
    ck_assert_uint_eq(clf_dataset_skipped_empty(a), 1);
    ck_assert_uint_eq(clf_dataset_skipped_empty(b), 1);
    static const char *const en[3] = {"the cat sat .", "a  dog !", "Grüße aus Köln"};
    static const char *const de[3] = {"die Katze saß .", "ein Hund !", "greetings from Cologne"};
    static const size_t lines[3] = {1, 3, 4};
    for (size_t i = 0; i < 3; i++) {
        assert_pair(a, i, st, tt, en[i], de[i], lines[i]);
        assert_pair(b, i, st, tt, en[i], de[i], lines[i]);
    }
    clf_dataset_free(a);
    clf_dataset_free(b);

    clf_test_write_text(clf_test_tmp_path("t.en"), "a\tb\n");
    clf_test_write_text(clf_test_tmp_path("t.de"), "c\n");
    clf_tokenizer *s3, *t3;
    vocabs_of(clf_test_tmp_path("t.en"), clf_test_tmp_path("t.de"), &s3, &t3);
    clf_dataset *c = load(clf_test_tmp_path("t.en"), clf_test_tmp_path("t.de"), s3, t3, 0);
    const int32_t *x;
    int xn;
    clf_dataset_ids(c, 0, &x, &xn, NULL, NULL);
    ck_assert_int_eq(xn, 2);
    clf_dataset_free(c);
    clf_tokenizer_free(s3);
    clf_tokenizer_free(t3);
    clf_tokenizer_free(st);
    clf_tokenizer_free(tt);
    clf_tokenizer_free(st2);
    clf_tokenizer_free(tt2);
    clf_test_remove_tmpdir();
}
END_TEST

START_TEST(test_build_vocabs_min_frequency)
{
    clf_test_make_tmpdir("clf-data");
    clf_test_write_text(clf_test_tmp_path("v.tsv"), "a a b\tx\nb c\ty y\n");
    clf_tokenizer *st, *tt;
    CLF_ASSERT_OK(clf_dataset_build_vocabs(clf_test_tmp_path("v.tsv"), NULL, 2, &st, &tt));
    /* [UNK] [PAD] [SOS] [EOS], then the words seen twice: a, b | y */
    ck_assert_int_eq(clf_tokenizer_size(st), 6);
    ck_assert_int_eq(clf_tokenizer_id(st, "a"), 4);
    ck_assert_int_eq(clf_tokenizer_id(st, "b"), 5);
    ck_assert_int_eq(clf_tokenizer_id(st, "c"), -1);
    ck_assert_int_eq(clf_tokenizer_size(tt), 5);
    ck_assert_int_eq(clf_tokenizer_id(tt, "y"), 4);
    clf_tokenizer_free(st);
    clf_tokenizer_free(tt);
    clf_test_remove_tmpdir();
}
END_TEST

/* ---- framing ---- */

/* bt is the batch of the pairs "a b c / x y", "a / x y z w", "b c / z" (ids of a b c x y z
 * w), framed [S] x [E] on the source, start y on the decoder's input and y [E] as the labels,
 * padded with P. */
static void assert_framing_batch(const clf_batch *bt, const int32_t id[7], int32_t S, int32_t E,
                                 int32_t P, int32_t start)
{
    const int32_t a = id[0], b = id[1], c = id[2], x = id[3], y = id[4], z = id[5], w = id[6];
    const int32_t D = start;
    const int32_t src[3][5] = {{S, a, b, c, E}, {S, a, E, P, P}, {S, b, c, E, P}};
    const int32_t tgt_in[3][5] = {{D, x, y, P, P}, {D, x, y, z, w}, {D, z, P, P, P}};
    const int32_t labels[3][5] = {{x, y, E, P, P}, {x, y, z, w, E}, {z, E, P, P, P}};
    assert_batch(bt, &src[0][0], 15, &tgt_in[0][0], &labels[0][0], 15);
    ck_assert_int_eq(bt->src_tokens, 5 + 3 + 4);
    ck_assert_int_eq(bt->tgt_tokens, 3 + 5 + 2);
}

START_TEST(test_framing_and_padding)
{
    clf_test_make_tmpdir("clf-data");
    clf_test_write_text(clf_test_tmp_path("f.tsv"), "a b c\tx y\na\tx y z w\nb c\tz\n");
    clf_tokenizer *st, *tt;
    vocabs_of(clf_test_tmp_path("f.tsv"), NULL, &st, &tt);
    clf_dataset *d = load(clf_test_tmp_path("f.tsv"), NULL, st, tt, 0);
    clf_batcher *b = NULL;
    CLF_ASSERT_OK(clf_batcher_create(d, 3, 0, 0, 1, &b));
    ck_assert_int_eq(clf_batcher_count(b), 1);
    clf_batch bt;
    CLF_ASSERT_OK(clf_batcher_get(b, 0, &bt));
    ck_assert_int_eq(bt.batch, 3);
    ck_assert_int_eq(bt.src_len, 5); /* [SOS] a b c [EOS] */
    ck_assert_int_eq(bt.tgt_len, 5); /* [SOS] x y z w  /  x y z w [EOS] */
    /* a built vocabulary: [UNK]=0 [PAD]=1 [SOS]=2 [EOS]=3 */
    const int32_t P = 1, S = 2, E = 3;
    const int32_t ids[7] = {id_of(st, "a"), id_of(st, "b"), id_of(st, "c"), id_of(tt, "x"),
                            id_of(tt, "y"), id_of(tt, "z"), id_of(tt, "w")};
    assert_framing_batch(&bt, ids, S, E, P, S);
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(bt.index[i], (size_t)i);
    clf_batch_free(&bt);
    ck_assert_ptr_null(bt.src);
    clf_batch_free(&bt); /* twice is fine */

    /* a batch of one pads nothing */
    clf_batcher_free(b);
    CLF_ASSERT_OK(clf_batcher_create(d, 1, 0, 0, 1, &b));
    ck_assert_int_eq(clf_batcher_count(b), 3);
    CLF_ASSERT_OK(clf_batcher_get(b, 2, &bt));
    ck_assert_int_eq(bt.batch, 1);
    ck_assert_int_eq(bt.src_len, 4);
    ck_assert_int_eq(bt.tgt_len, 2);
    const int32_t src2[4] = {S, ids[1], ids[2], E}, labels2[2] = {ids[5], E};
    assert_ids(bt.src, src2, 4, "src");
    assert_ids(bt.labels, labels2, 2, "labels");
    clf_batch_free(&bt);
    clf_batcher_free(b);
    clf_dataset_free(d);
    clf_tokenizer_free(st);
    clf_tokenizer_free(tt);
    clf_test_remove_tmpdir();
}
END_TEST

START_TEST(test_specials_from_the_tokenizer)
{
    /* a vocabulary with its specials at other ids: the batch uses those */
    clf_test_make_tmpdir("clf-data");
    clf_test_write_text(
        clf_test_tmp_path("o.json"),
        "{\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"<unk>\": 0, \"[EOS]\": 1, "
        "\"[SOS]\": 2, \"a\": 3, \"[PAD]\": 4}, \"unk_token\": \"<unk>\"}, "
        "\"pre_tokenizer\": {\"type\": \"Whitespace\"}}");
    clf_test_write_text(clf_test_tmp_path("o.tsv"), "a a\ta\na\ta q\n");
    clf_tokenizer *tok;
    CLF_ASSERT_OK(clf_tokenizer_load(clf_test_tmp_path("o.json"), &tok));
    clf_dataset *d = load(clf_test_tmp_path("o.tsv"), NULL, tok, tok, 0);
    clf_batcher *b;
    CLF_ASSERT_OK(clf_batcher_create(d, 2, 0, 0, 1, &b));
    clf_batch bt;
    CLF_ASSERT_OK(clf_batcher_get(b, 0, &bt));
    const int32_t src[2][4] = {{2, 3, 3, 1}, {2, 3, 1, 4}};
    const int32_t tgt_in[2][3] = {{2, 3, 4}, {2, 3, 0}}; /* q is <unk> */
    const int32_t labels[2][3] = {{3, 1, 4}, {3, 0, 1}};
    assert_batch(&bt, &src[0][0], 8, &tgt_in[0][0], &labels[0][0], 6);
    clf_batch_free(&bt);
    clf_batcher_free(b);
    clf_dataset_free(d);
    clf_tokenizer_free(tok);
    clf_test_remove_tmpdir();
}
END_TEST

/* The framing of `model: {src_vocab: 12, tgt_vocab: 12, <keys>}` over the vocabularies
 * src and tgt (clf_model_framing, the rule translate frames with). */
static clf_framing model_framing(const char *keys, const clf_tokenizer *src,
                                 const clf_tokenizer *tgt)
{
    char yaml[512];
    clf_config *cfg = malloc(sizeof *cfg);
    snprintf(yaml, sizeof yaml, "model: {src_vocab: 12, tgt_vocab: 12, %s}\n", keys);
    CLF_ASSERT_OK(clf_config_parse_string(yaml, "<test>", cfg));
    const clf_framing own = clf_tokenizer_framing(src, tgt);
    clf_framing f;
    CLF_ASSERT_OK(clf_model_framing(&cfg->model, &own, &f));
    free(cfg);
    return f;
}

/* A vocabulary without [PAD] ([SOS] 1, [EOS] 2), so that pad_id can be any id < 12. */
static const char nopad_vocab[] =
    "{\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"[UNK]\": 0, \"[SOS]\": 1, "
    "\"[EOS]\": 2, \"a\": 3, \"b\": 4, \"c\": 5, \"x\": 6, \"y\": 7, \"z\": 8, \"w\": 9}, "
    "\"unk_token\": \"[UNK]\"}, \"pre_tokenizer\": {\"type\": \"Whitespace\"}}";

/* The batch of framing.tsv's three pairs (file order, one batch) under the model keys. */
static void framed_batch(const char *keys, const clf_tokenizer *tok, int max_len, clf_batch *bt,
                         size_t *skipped_long)
{
    clf_framing f = model_framing(keys, tok, tok);
    clf_dataset_opts o = {clf_test_tmp_path("framing.tsv"), NULL, tok, tok, max_len};
    clf_dataset *d = NULL;
    CLF_ASSERT_OK(clf_dataset_load_framed(&o, &f, &d));
    *skipped_long = clf_dataset_skipped_long(d);
    clf_batcher *b = NULL;
    CLF_ASSERT_OK(clf_batcher_create(d, 3, 0, 0, 1, &b));
    CLF_ASSERT_OK(clf_batcher_get(b, 0, bt));
    clf_batcher_free(b);
    clf_dataset_free(d);
}

/* Batches framed by the model's special-token keys (clf_dataset_load_framed with
 * clf_model_framing): exact ids for a source without bos, a decoder start of its own, another
 * pad id, Marian's framing, and a source without eos; max_len and the token counts count
 * only the ids there. */
START_TEST(test_framing_from_model_keys)
{
    clf_test_make_tmpdir("clf-data");
    clf_test_write_text(clf_test_tmp_path("nopad.json"), nopad_vocab);
    clf_test_write_text(clf_test_tmp_path("framing.tsv"), "a b c\tx y\na\tx y z w\nb c\tz\n");
    clf_tokenizer *tok;
    CLF_ASSERT_OK(clf_tokenizer_load(clf_test_tmp_path("nopad.json"), &tok));
    const int32_t S = 1, E = 2, a = 3, b = 4, c = 5, x = 6, y = 7, z = 8, w = 9;
    clf_batch bt;
    size_t skipped;

    /* source_bos false, pad_id 10: src x [EOS] pad... */
    framed_batch("source_bos: false, pad_id: 10", tok, 0, &bt, &skipped);
    {
        const int32_t P = 10;
        const int32_t src[3][4] = {{a, b, c, E}, {a, E, P, P}, {b, c, E, P}};
        const int32_t tgt_in[3][5] = {{S, x, y, P, P}, {S, x, y, z, w}, {S, z, P, P, P}};
        const int32_t labels[3][5] = {{x, y, E, P, P}, {x, y, z, w, E}, {z, E, P, P, P}};
        ck_assert_int_eq(bt.src_len, 4);
        ck_assert_int_eq(bt.tgt_len, 5);
        assert_batch(&bt, &src[0][0], 12, &tgt_in[0][0], &labels[0][0], 15);
        ck_assert_int_eq(bt.src_tokens, 4 + 2 + 3);
        ck_assert_int_eq(bt.tgt_tokens, 3 + 5 + 2);
    }
    clf_batch_free(&bt);

    /* decoder_start_id 11, pad_id 0: the source keeps [SOS] x [EOS] */
    framed_batch("decoder_start_id: 11, pad_id: 0", tok, 0, &bt, &skipped);
    assert_framing_batch(&bt, (const int32_t[7]){a, b, c, x, y, z, w}, S, E, 0, 11);
    clf_batch_free(&bt);

    /* Marian's: src x </s>, tgt_in <pad> y, labels y </s> (eos 11, start = pad = 10) */
    framed_batch("source_bos: false, eos_id: 11, decoder_start_id: 10, pad_id: 10", tok, 0, &bt,
                 &skipped);
    {
        const int32_t P = 10, M = 11;
        const int32_t src[3][4] = {{a, b, c, M}, {a, M, P, P}, {b, c, M, P}};
        const int32_t tgt_in[3][5] = {{P, x, y, P, P}, {P, x, y, z, w}, {P, z, P, P, P}};
        const int32_t labels[3][5] = {{x, y, M, P, P}, {x, y, z, w, M}, {z, M, P, P, P}};
        assert_batch(&bt, &src[0][0], 12, &tgt_in[0][0], &labels[0][0], 15);
        ck_assert_int_eq(bt.tgt_tokens, 3 + 5 + 2); /* the start is not a label */
    }
    clf_batch_free(&bt);

    /* bos_id 11 and no source eos: src 11 x pad..., the decoder starts from 11 too */
    framed_batch("bos_id: 11, source_eos: false, pad_id: 10", tok, 0, &bt, &skipped);
    {
        const int32_t P = 10, B = 11;
        const int32_t src[3][4] = {{B, a, b, c}, {B, a, P, P}, {B, b, c, P}};
        const int32_t tgt_in[3][5] = {{B, x, y, P, P}, {B, x, y, z, w}, {B, z, P, P, P}};
        assert_ids(bt.src, &src[0][0], 12, "src");
        assert_ids(bt.tgt_in, &tgt_in[0][0], 15, "tgt_in");
        ck_assert_int_eq(bt.src_tokens, 4 + 2 + 3);
    }
    clf_batch_free(&bt);

    /* max_len 4: "a b c" is 5 framed ids with [SOS] and [EOS], 4 without [SOS], and the
     * target "x y z w" 5 either way */
    framed_batch("pad_id: 10", tok, 4, &bt, &skipped);
    ck_assert_uint_eq(skipped, 2);
    ck_assert_int_eq(bt.batch, 1);
    clf_batch_free(&bt);
    framed_batch("source_bos: false, pad_id: 10", tok, 4, &bt, &skipped);
    ck_assert_uint_eq(skipped, 1);
    ck_assert_int_eq(bt.batch, 2);
    ck_assert_int_eq(bt.src_len, 4);
    clf_batch_free(&bt);
    framed_batch("source_bos: false, source_eos: false, pad_id: 10", tok, 3, &bt, &skipped);
    ck_assert_uint_eq(skipped, 1); /* "x y z w" + 1 > 3; "a b c" fits */
    ck_assert_int_eq(bt.batch, 2);
    ck_assert_int_eq(bt.src_len, 3);
    clf_batch_free(&bt);

    /* a framing lacking an id the batches write */
    clf_dataset_opts o = {clf_test_tmp_path("framing.tsv"), NULL, tok, tok, 0};
    clf_dataset *d = NULL;
    clf_framing f = {-1, -1, 10, -1, 2, 10, -1, CLF_LANG_NONE, -1, 0};
    ck_assert_int_eq(clf_dataset_load_framed(&o, &f, &d), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "dataset: the framing has no decoder start id");
    ck_assert_ptr_null(d);
    o.tgt_tok = NULL;
    f.tgt_start = 1;
    ck_assert_int_eq(clf_dataset_load_framed(&o, &f, &d), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "dataset: no target tokenizer given");
    clf_tokenizer_free(tok);
    clf_test_remove_tmpdir();
}
END_TEST

/* ---- batching ---- */

#define N_PAIRS 300

/* N_PAIRS pairs of 1..30 source and 1..20 target words, from a fixed seed; src/tgt_words
 * gets the word counts. */
static void write_random_corpus(const char *path, int *src_words, int *tgt_words)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    clf_rng r;
    clf_rng_seed(&r, 42);
    for (int i = 0; i < N_PAIRS; i++) {
        int ns = 1 + (int)(clf_rng_next(&r) % 30), nt = 1 + (int)(clf_rng_next(&r) % 20);
        for (int k = 0; k < ns; k++)
            fprintf(f, "%sw%d", k ? " " : "", (int)(clf_rng_next(&r) % 20));
        fputc('\t', f);
        for (int k = 0; k < nt; k++)
            fprintf(f, "%sv%d", k ? " " : "", (int)(clf_rng_next(&r) % 20));
        fputc('\n', f);
        src_words[i] = ns;
        tgt_words[i] = nt;
    }
    fclose(f);
}

typedef struct plan {
    size_t order[N_PAIRS]; /* pair indices in batch order */
    int sizes[N_PAIRS];    /* batch sizes */
    int count;
    long long padded; /* sum over batches of batch * (src_len + tgt_len) */
} plan;

/* Reads every batch of the planned epoch, checks each against the dataset (framing, lengths
 * = the longest of the batch) and that every pair comes exactly once. */
static void read_plan(const clf_batcher *b, const clf_dataset *d, plan *p)
{
    int seen[N_PAIRS] = {0};
    size_t n = 0;
    memset(p, 0, sizeof *p);
    p->count = clf_batcher_count(b);
    for (int i = 0; i < p->count; i++) {
        clf_batch bt;
        CLF_ASSERT_OK(clf_batcher_get(b, i, &bt));
        ck_assert_int_ge(bt.batch, 1);
        p->sizes[i] = bt.batch;
        p->padded += (long long)bt.batch * (bt.src_len + bt.tgt_len);
        int longest_src = 0, longest_tgt = 0;
        long long src_tokens = 0, tgt_tokens = 0;
        for (int k = 0; k < bt.batch; k++) {
            size_t j = bt.index[k];
            ck_assert_uint_lt(j, clf_dataset_size(d));
            seen[j]++;
            p->order[n++] = j;
            const int32_t *x, *y;
            int xn, yn;
            clf_dataset_ids(d, j, &x, &xn, &y, &yn);
            assert_ids(bt.src + (size_t)k * bt.src_len + 1, x, xn, "src row");
            assert_ids(bt.labels + (size_t)k * bt.tgt_len, y, yn, "labels row");
            longest_src = xn + 2 > longest_src ? xn + 2 : longest_src;
            longest_tgt = yn + 1 > longest_tgt ? yn + 1 : longest_tgt;
            src_tokens += xn + 2;
            tgt_tokens += yn + 1;
        }
        ck_assert_int_eq(bt.src_len, longest_src);
        ck_assert_int_eq(bt.tgt_len, longest_tgt);
        ck_assert_int_eq(bt.src_tokens, src_tokens);
        ck_assert_int_eq(bt.tgt_tokens, tgt_tokens);
        clf_batch_free(&bt);
    }
    ck_assert_uint_eq(n, clf_dataset_size(d));
    for (size_t j = 0; j < clf_dataset_size(d); j++)
        ck_assert_msg(seen[j] == 1, "pair %zu seen %d times", j, seen[j]);
}

static int same_plan(const plan *a, const plan *b)
{
    return a->count == b->count && !memcmp(a->sizes, b->sizes, sizeof a->sizes) &&
           !memcmp(a->order, b->order, sizeof a->order);
}

static int in_file_order(const plan *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p->order[i] != i)
            return 0;
    return 1;
}

/* The random corpus of N_PAIRS pairs in a fresh temporary directory, its vocabularies and
 * the dataset loaded from it; random_close frees them and removes the directory. */
typedef struct random_set {
    clf_tokenizer *st, *tt;
    clf_dataset *d;
} random_set;

static void random_open(random_set *r)
{
    static int src_words[N_PAIRS], tgt_words[N_PAIRS];
    clf_test_make_tmpdir("clf-data");
    write_random_corpus(clf_test_tmp_path("r.tsv"), src_words, tgt_words);
    vocabs_of(clf_test_tmp_path("r.tsv"), NULL, &r->st, &r->tt);
    r->d = load(clf_test_tmp_path("r.tsv"), NULL, r->st, r->tt, 0);
    ck_assert_uint_eq(clf_dataset_size(r->d), N_PAIRS);
}

static void random_close(random_set *r)
{
    clf_dataset_free(r->d);
    clf_tokenizer_free(r->st);
    clf_tokenizer_free(r->tt);
    clf_test_remove_tmpdir();
}

/* A batcher made afresh over d (clf_batcher_create's batch_size, batch_tokens, shuffle and
 * seed) and planned for epoch (when not 0) must plan want. */
static void assert_plans_again(const clf_dataset *d, int batch_size, int batch_tokens, int shuffle,
                               uint64_t seed, int epoch, const plan *want)
{
    static plan got;
    clf_batcher *b;
    CLF_ASSERT_OK(clf_batcher_create(d, batch_size, batch_tokens, shuffle, seed, &b));
    if (epoch != 0)
        CLF_ASSERT_OK(clf_batcher_plan_epoch(b, epoch));
    read_plan(b, d, &got);
    ck_assert(same_plan(want, &got));
    clf_batcher_free(b);
}

/* The model's default keys over built vocabularies frame exactly as the vocabularies alone:
 * every batch of both modes, shuffled, is the same array for array. */
START_TEST(test_default_keys_give_todays_batches)
{
    random_set r;
    random_open(&r);
    clf_dataset *d = r.d, *dm = NULL;
    clf_framing f = model_framing("pad_id: 1", r.st, r.tt);
    clf_dataset_opts o = {clf_test_tmp_path("r.tsv"), NULL, r.st, r.tt, 0};
    CLF_ASSERT_OK(clf_dataset_load_framed(&o, &f, &dm));
    for (int mode = 0; mode < 2; mode++) {
        clf_batcher *b, *bm;
        CLF_ASSERT_OK(clf_batcher_create(d, 16, mode ? 120 : 0, 1, 3, &b));
        CLF_ASSERT_OK(clf_batcher_create(dm, 16, mode ? 120 : 0, 1, 3, &bm));
        ck_assert_int_eq(clf_batcher_count(b), clf_batcher_count(bm));
        for (int i = 0; i < clf_batcher_count(b); i++) {
            clf_batch x, y;
            CLF_ASSERT_OK(clf_batcher_get(b, i, &x));
            CLF_ASSERT_OK(clf_batcher_get(bm, i, &y));
            ck_assert_int_eq(x.batch, y.batch);
            ck_assert_int_eq(x.src_len, y.src_len);
            ck_assert_int_eq(x.tgt_len, y.tgt_len);
            ck_assert_int_eq(x.src_tokens, y.src_tokens);
            ck_assert_int_eq(x.tgt_tokens, y.tgt_tokens);
            size_t ns = (size_t)x.batch * x.src_len, nt = (size_t)x.batch * x.tgt_len;
            ck_assert_int_eq(memcmp(x.src, y.src, ns * sizeof *x.src), 0);
            ck_assert_int_eq(memcmp(x.tgt_in, y.tgt_in, nt * sizeof *x.tgt_in), 0);
            ck_assert_int_eq(memcmp(x.labels, y.labels, nt * sizeof *x.labels), 0);
            ck_assert_int_eq(memcmp(x.index, y.index, (size_t)x.batch * sizeof *x.index), 0);
            clf_batch_free(&x);
            clf_batch_free(&y);
        }
        clf_batcher_free(b);
        clf_batcher_free(bm);
    }
    clf_dataset_free(dm);
    random_close(&r);
}
END_TEST

START_TEST(test_batch_size_mode)
{
    random_set r;
    random_open(&r);
    const clf_dataset *d = r.d;
    static plan p0, p1, q0, again;
    clf_batcher *b, *b2;

    /* shuffled: 32 per batch, the last 300 - 9 * 32 = 12 */
    CLF_ASSERT_OK(clf_batcher_create(d, 32, 0, 1, 7, &b));
    ck_assert_int_eq(clf_batcher_epoch(b), 0);
    read_plan(b, d, &p0);
    ck_assert_int_eq(p0.count, 10);
    for (int i = 0; i < 9; i++)
        ck_assert_int_eq(p0.sizes[i], 32);
    ck_assert_int_eq(p0.sizes[9], 12);
    ck_assert(!in_file_order(&p0, N_PAIRS));
    ck_assert_uint_eq(clf_batcher_oversized(b), 0);
    /* another batcher, same seed: the same epoch 0; epoch 1 differs; back to 0 = same */
    assert_plans_again(d, 32, 0, 1, 7, 0, &p0);
    CLF_ASSERT_OK(clf_batcher_plan_epoch(b, 1));
    ck_assert_int_eq(clf_batcher_epoch(b), 1);
    read_plan(b, d, &p1);
    ck_assert(!same_plan(&p0, &p1));
    CLF_ASSERT_OK(clf_batcher_plan_epoch(b, 5));
    CLF_ASSERT_OK(clf_batcher_plan_epoch(b, 0));
    read_plan(b, d, &again);
    ck_assert(same_plan(&p0, &again));
    /* a resumed run planning epoch 1 first sees what the long run saw */
    assert_plans_again(d, 32, 0, 1, 7, 1, &p1);
    /* another seed, another plan */
    CLF_ASSERT_OK(clf_batcher_create(d, 32, 0, 1, 8, &b2));
    read_plan(b2, d, &q0);
    ck_assert(!same_plan(&p0, &q0));
    clf_batcher_free(b2);
    clf_batcher_free(b);

    /* not shuffled: file order in every epoch, whatever the seed */
    CLF_ASSERT_OK(clf_batcher_create(d, 32, 0, 0, 7, &b));
    read_plan(b, d, &p0);
    ck_assert(in_file_order(&p0, N_PAIRS));
    ck_assert_int_eq(p0.count, 10);
    CLF_ASSERT_OK(clf_batcher_plan_epoch(b, 3));
    read_plan(b, d, &p1);
    ck_assert(same_plan(&p0, &p1));
    clf_batcher_free(b);

    /* a batch larger than the dataset: one batch */
    CLF_ASSERT_OK(clf_batcher_create(d, 1000, 0, 1, 7, &b));
    read_plan(b, d, &p0);
    ck_assert_int_eq(p0.count, 1);
    ck_assert_int_eq(p0.sizes[0], N_PAIRS);
    clf_batcher_free(b);
    random_close(&r);
}
END_TEST

/* Every batch of the planned epoch keeps batch * max(src_len, tgt_len) <= budget, except
 * batches of one pair that alone exceeds it; returns how many of those. */
static size_t check_budget(const clf_batcher *b, int budget)
{
    size_t over = 0;
    for (int i = 0; i < clf_batcher_count(b); i++) {
        clf_batch bt;
        CLF_ASSERT_OK(clf_batcher_get(b, i, &bt));
        int longest = bt.src_len > bt.tgt_len ? bt.src_len : bt.tgt_len;
        if (bt.batch * longest > budget) {
            ck_assert_msg(bt.batch == 1, "batch %d: %d x %d > %d tokens", i, bt.batch, longest,
                          budget);
            over++;
        }
        clf_batch_free(&bt);
    }
    return over;
}

START_TEST(test_token_mode)
{
    random_set r;
    random_open(&r);
    const clf_dataset *d = r.d;
    static plan p0, p1, f0, again;
    clf_batcher *b;
    const int budget = 256;

    CLF_ASSERT_OK(clf_batcher_create(d, 1, budget, 1, 3, &b));
    read_plan(b, d, &p0);
    ck_assert_uint_eq(check_budget(b, budget), 0);
    ck_assert_uint_eq(clf_batcher_oversized(b), 0);
    assert_plans_again(d, 1, budget, 1, 3, 0, &p0);
    CLF_ASSERT_OK(clf_batcher_plan_epoch(b, 1));
    read_plan(b, d, &p1);
    ck_assert_uint_eq(check_budget(b, budget), 0);
    ck_assert(!same_plan(&p0, &p1));
    CLF_ASSERT_OK(clf_batcher_plan_epoch(b, 0));
    read_plan(b, d, &again);
    ck_assert(same_plan(&p0, &again));
    clf_batcher_free(b);

    /* not shuffled: file order, cut greedily; the same in every epoch */
    CLF_ASSERT_OK(clf_batcher_create(d, 1, budget, 0, 3, &b));
    read_plan(b, d, &f0);
    ck_assert(in_file_order(&f0, N_PAIRS));
    ck_assert_uint_eq(check_budget(b, budget), 0);
    CLF_ASSERT_OK(clf_batcher_plan_epoch(b, 2));
    read_plan(b, d, &again);
    ck_assert(same_plan(&f0, &again));
    /* greedy: no two neighbouring batches would have fit in one */
    for (int i = 0; i + 1 < f0.count; i++) {
        clf_batch x, y;
        CLF_ASSERT_OK(clf_batcher_get(b, i, &x));
        CLF_ASSERT_OK(clf_batcher_get(b, i + 1, &y));
        const int32_t *s, *t;
        int sn, tn;
        clf_dataset_ids(d, y.index[0], &s, &sn, &t, &tn);
        int lx = x.src_len > x.tgt_len ? x.src_len : x.tgt_len;
        int l1 = sn + 2 > tn + 1 ? sn + 2 : tn + 1;
        ck_assert_int_gt((x.batch + 1) * (lx > l1 ? lx : l1), budget);
        clf_batch_free(&x);
        clf_batch_free(&y);
    }
    clf_batcher_free(b);
    /* bucketing by length pads much less than file order */
    ck_assert_msg(p0.padded < f0.padded, "bucketed %lld cells, file order %lld", p0.padded,
                  f0.padded);

    /* a budget below the longest pairs: those become batches of one, counted */
    size_t longer = 0;
    for (size_t j = 0; j < clf_dataset_size(d); j++) {
        int sn, tn;
        clf_dataset_ids(d, j, NULL, &sn, NULL, &tn);
        longer += (sn + 2 > 24 || tn + 1 > 24);
    }
    ck_assert_uint_gt(longer, 0);
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        CLF_ASSERT_OK(clf_batcher_create(d, 1, 24, shuffle, 3, &b));
        read_plan(b, d, &again);
        ck_assert_uint_eq(clf_batcher_oversized(b), longer);
        ck_assert_uint_eq(check_budget(b, 24), longer);
        clf_batcher_free(b);
    }
    random_close(&r);
}
END_TEST

/* ---- errors ---- */

/* A data file (or two) that must be refused, and the message after "<path>". */
typedef struct bad_data {
    const char *src;
    size_t src_len;   /* 0: strlen */
    const char *tgt;  /* NULL: src is a TSV */
    int blame_tgt;    /* the message names the target file */
    const char *want; /* after the path */
} bad_data;

static const bad_data bad_data_cases[] = {
    {"a\tx\nb y\n", 0, NULL, 0,
     ":2: no TAB: expected source<TAB>target (or give the target side as a second file)"},
    {"a\tx\nb\ty\tz\n", 0, NULL, 0, ":2: 2 TABs: expected exactly one, source<TAB>target"},
    {"a\tx\n\n\nb\t\ty\t\n", 0, NULL, 0, ":4: 3 TABs: expected exactly one"},
    {"a\tx\nb\t\xff\n", 0, NULL, 0, ":2: not valid UTF-8 at byte 2 (0xff)"},
    {"a\tx\r\nb\xc3\tx\r\n", 0, NULL, 0, ":2: not valid UTF-8 at byte 1 (0xc3)"},
    {"a\tx\n\xed\xa0\x80\tx\n", 0, NULL, 0, ":2: not valid UTF-8 at byte 0 (0xed)"}, /* surrogate */
    {"a\tx\nb\0c\tx\n", 10, NULL, 0, ":2: contains a NUL byte at byte 1"},
    {"a\nb\nc\n", 0, "x\ny\n\xc0\xaf\n", 1, ":3: not valid UTF-8 at byte 0 (0xc0)"},
    {"a\n\xf5\n", 0, "x\ny\n", 0, ":2: not valid UTF-8 at byte 0 (0xf5)"},
};

START_TEST(test_bad_lines)
{
    const bad_data *c = &bad_data_cases[_i];
    clf_test_make_tmpdir("clf-data");
    clf_tokenizer *st, *tt;
    const char *const good[] = {"a b c", "x y z"};
    CLF_ASSERT_OK(clf_tokenizer_build(good, 2, 1, &st));
    CLF_ASSERT_OK(clf_tokenizer_build(good, 2, 1, &tt));
    const char *src = clf_test_tmp_path("bad.src"),
               *tgt = c->tgt ? clf_test_tmp_path("bad.tgt") : NULL;
    clf_test_write_file(src, c->src, c->src_len ? c->src_len : strlen(c->src));
    if (c->tgt)
        clf_test_write_text(tgt, c->tgt);
    char want[1024];
    snprintf(want, sizeof want, "%s%s", c->blame_tgt ? tgt : src, c->want);
    /* loading and building vocabularies give the same message */
    clf_dataset_opts o = {src, tgt, st, tt, 0};
    clf_dataset *d = (clf_dataset *)&o;
    ck_assert_int_eq(clf_dataset_load(&o, &d), CLF_ERR_INPUT);
    ck_assert_ptr_null(d);
    ck_assert_msg(strstr(clf_last_error(), want) == clf_last_error(), "message\n  %s\nwant\n  %s",
                  clf_last_error(), want);
    clf_tokenizer *vs = st, *vt = tt;
    ck_assert_int_eq(clf_dataset_build_vocabs(src, tgt, 1, &vs, &vt), CLF_ERR_INPUT);
    ck_assert_ptr_null(vs);
    ck_assert_ptr_null(vt);
    ck_assert_msg(strstr(clf_last_error(), want) == clf_last_error(), "vocab message\n  %s",
                  clf_last_error());
    clf_tokenizer_free(st);
    clf_tokenizer_free(tt);
    clf_test_remove_tmpdir();
}
END_TEST

/* clf_dataset_load of o must fail with CLF_ERR_INPUT and the message want: the whole
 * message, or (part) a part of it. */
static void assert_load_refused(clf_dataset_opts o, const char *want, int part)
{
    clf_dataset *d;
    ck_assert_int_eq(clf_dataset_load(&o, &d), CLF_ERR_INPUT);
    if (part)
        ck_assert_ptr_nonnull(strstr(clf_last_error(), want));
    else
        ck_assert_str_eq(clf_last_error(), want);
}

START_TEST(test_file_errors)
{
    clf_test_make_tmpdir("clf-data");
    clf_tokenizer *st, *tt;
    const char *const good[] = {"a b c", "x y z"};
    CLF_ASSERT_OK(clf_tokenizer_build(good, 2, 1, &st));
    CLF_ASSERT_OK(clf_tokenizer_build(good, 2, 1, &tt));
    char want[1024];
    clf_dataset *d = NULL;
    clf_tokenizer *vs, *vt;

    /* missing files */
    const char *missing = clf_test_tmp_path("missing.tsv");
    clf_dataset_opts o = {missing, NULL, st, tt, 0};
    ck_assert_int_eq(clf_dataset_load(&o, &d), CLF_ERR_IO);
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", missing);
    ck_assert_str_eq(clf_last_error(), want);
    ck_assert_int_eq(clf_dataset_build_vocabs(missing, NULL, 1, &vs, &vt), CLF_ERR_IO);
    ck_assert_str_eq(clf_last_error(), want);
    const char *en = clf_test_tmp_path("ok.en");
    clf_test_write_text(en, "a\nb\n");
    o = (clf_dataset_opts){en, missing, st, tt, 0};
    ck_assert_int_eq(clf_dataset_load(&o, &d), CLF_ERR_IO);
    ck_assert_str_eq(clf_last_error(), want);

    /* files that are not line-aligned */
    const char *de = clf_test_tmp_path("ok.de");
    clf_test_write_text(de, "x\ny\nz");
    o = (clf_dataset_opts){en, de, st, tt, 0};
    ck_assert_int_eq(clf_dataset_load(&o, &d), CLF_ERR_INPUT);
    snprintf(want, sizeof want,
             "%s has 2 lines but %s has 3: source and target files must be line-aligned", en, de);
    ck_assert_str_eq(clf_last_error(), want);
    ck_assert_int_eq(clf_dataset_build_vocabs(en, de, 1, &vs, &vt), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), want);

    /* the limits (README, "Limits"): a file over CLF_DATASET_FILE_MAX bytes (sparse: no
     * disk used) before it is read, a line over CLF_DATASET_LINE_MAX bytes by its number */
    const char *big = clf_test_tmp_path("big.tsv");
    clf_test_write_sparse(big, "a\tx\n", (uint64_t)CLF_DATASET_FILE_MAX + 1);
    o = (clf_dataset_opts){big, NULL, st, tt, 0};
    ck_assert_int_eq(clf_dataset_load(&o, &d), CLF_ERR_INPUT);
    snprintf(want, sizeof want, "%s: 4294967297 bytes, more than the limit of 4294967296", big);
    ck_assert_str_eq(clf_last_error(), want);
    ck_assert_int_eq(clf_dataset_build_vocabs(big, NULL, 1, &vs, &vt), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), want);
    const size_t line_max = CLF_DATASET_LINE_MAX;
    char *lines = malloc(line_max + 16);
    ck_assert_ptr_nonnull(lines);
    for (size_t n = line_max; n <= line_max + 1; n++) {
        memcpy(lines, "a\tx\n", 4);
        memset(lines + 4, 'b', n - 2);
        memcpy(lines + 4 + n - 2, "\ty\n", 4);
        clf_test_write_file(big, lines, 4 + n + 1);
        o = (clf_dataset_opts){big, NULL, st, tt, 0};
        clf_status s = clf_dataset_load(&o, &d);
        if (n == line_max) {
            CLF_ASSERT_OK(s);
            clf_dataset_free(d);
            d = NULL;
            continue;
        }
        ck_assert_int_eq(s, CLF_ERR_INPUT);
        snprintf(want, sizeof want, "%s:2: a line of 1048577 bytes, more than the limit of 1048576",
                 big);
        ck_assert_str_eq(clf_last_error(), want);
    }
    free(lines);

    /* nothing left to train on */
    const char *tsv = clf_test_tmp_path("none.tsv");
    clf_test_write_text(tsv, "a b c\tx\n\t\n");
    snprintf(want, sizeof want,
             "%s: no sentence pairs to use (2 lines: 1 longer than max_len 4, 1 with an empty "
             "side)",
             tsv);
    assert_load_refused((clf_dataset_opts){tsv, "", st, tt, 4}, want, 0);
    clf_test_write_text(tsv, "");
    assert_load_refused((clf_dataset_opts){tsv, "", st, tt, 0}, "no sentence pairs to use (0 lines",
                        1);

    /* options, and a vocabulary without the framing specials */
    clf_test_write_text(tsv, "a\tx\n");
    clf_test_write_text(
        clf_test_tmp_path("nosos.json"),
        "{\"model\": {\"type\": \"WordLevel\", \"vocab\": {\"[UNK]\": 0, \"[PAD]\": 1, "
        "\"[EOS]\": 2, \"a\": 3}, \"unk_token\": \"[UNK]\"}, \"pre_tokenizer\": "
        "{\"type\": \"Whitespace\"}}");
    clf_tokenizer *nosos;
    CLF_ASSERT_OK(clf_tokenizer_load(clf_test_tmp_path("nosos.json"), &nosos));
    const struct {
        clf_dataset_opts o;
        const char *want;
        int part;
    } refusals[] = {
        {{tsv, NULL, st, tt, 1},
         "dataset load: max_len 1 cannot hold [SOS] [EOS] (use >= 2, or 0 for no limit)",
         0},
        {{tsv, NULL, st, NULL, 0}, "dataset: no target tokenizer given", 0},
        {{NULL, NULL, st, tt, 0}, "dataset: no data file given", 0},
        {{tsv, NULL, st, nosos, 0},
         "dataset: the target vocabulary has no [SOS] token (needed to frame and pad the pairs)",
         0},
        {{tsv, NULL, nosos, tt, 0}, "the source vocabulary has no [SOS]", 1},
    };
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++)
        assert_load_refused(refusals[i].o, refusals[i].want, refusals[i].part);
    clf_tokenizer_free(nosos);

    /* batcher arguments */
    o = (clf_dataset_opts){tsv, NULL, st, tt, 0};
    CLF_ASSERT_OK(clf_dataset_load(&o, &d));
    clf_batcher *b = NULL;
    ck_assert_int_eq(clf_batcher_create(d, 0, 0, 1, 1, &b), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "batcher: batch_size must be > 0, got 0");
    ck_assert_int_eq(clf_batcher_create(d, 8, -1, 1, 1, &b), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "batcher: batch_tokens -1 is negative");
    ck_assert_ptr_null(b);
    CLF_ASSERT_OK(clf_batcher_create(d, 0, 100, 1, 1, &b)); /* batch_size unused by tokens */
    ck_assert_int_eq(clf_batcher_plan_epoch(b, -1), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "batcher: epoch -1 is negative");
    clf_batch bt;
    ck_assert_int_eq(clf_batcher_get(b, 1, &bt), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "batcher get: batch 1 of 1 does not exist");
    ck_assert_ptr_null(bt.src);
    ck_assert_int_eq(clf_batcher_get(b, -1, &bt), CLF_ERR_INPUT);
    clf_batcher_free(b);
    clf_batcher_free(NULL);
    clf_dataset_free(d);
    clf_dataset_free(NULL);

    clf_tokenizer_free(st);
    clf_tokenizer_free(tt);
    clf_test_remove_tmpdir();
}
END_TEST

CLF_TEST_SUITE_MAIN("dataset",
                    CLF_TCASE("load", 0, {test_tsv_skips_and_counts}, {test_two_files_match_tsv},
                              {test_build_vocabs_min_frequency}),
                    CLF_TCASE("batch", 0, {test_framing_and_padding},
                              {test_specials_from_the_tokenizer}, {test_framing_from_model_keys},
                              {test_default_keys_give_todays_batches}, {test_batch_size_mode},
                              {test_token_mode}),
                    CLF_TCASE("errors", 0, {test_bad_lines, CLF_LOOPS(bad_data_cases)},
                              {test_file_errors}))
