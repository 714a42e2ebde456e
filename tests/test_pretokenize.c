/* The pre-tokenizer's word characters beyond ASCII, through the public tokenizer API: one
 * code point of each kind that makes up Rust regex's \w (and of its nearest neighbours
 * that do not) between two letters. The expected splits are those of the tokenizers
 * library's Whitespace pre-tokenizer (tokenizers 0.23.3), read from the table generated
 * from it that pretokenize.c used before utf8proc: "a<c>b" stays one word when c is a word
 * character, and is three words otherwise. tests/test_tokenizer.c checks whole sentences. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/tokenizer.h"
#include "testutil.h"

static const struct {
    const char *c; /* one code point, UTF-8 */
    int word;      /* a word character for the library */
    const char *why;
} chars[] = {
    {"\u216B", 1, "ROMAN NUMERAL TWELVE: letter number (Nl)"},
    {"\u3007", 1, "IDEOGRAPHIC NUMBER ZERO: letter number (Nl)"},
    {"\u16EE", 1, "RUNIC ARLAUG SYMBOL: letter number (Nl)"},
    {"\u24EA", 0, "CIRCLED DIGIT ZERO: other number (No)"},
    {"\u24E9", 1, "CIRCLED LATIN SMALL LETTER Z: symbol (So) with Other_Alphabetic"},
    {"\U0001F130", 1, "SQUARED LATIN CAPITAL LETTER A: So with Other_Alphabetic"},
    {"\U0001F189", 1, "NEGATIVE SQUARED LATIN CAPITAL LETTER Z: So with Other_Alphabetic"},
    {"\U0001F18A", 0, "CROSSED NEGATIVE SQUARED LATIN CAPITAL LETTER P: So, not alphabetic"},
    {"\U0001F100", 0, "DIGIT ZERO FULL STOP: other number (No)"},
    {"\u2070", 0, "SUPERSCRIPT ZERO: other number (No)"},
    {"\u2071", 1, "SUPERSCRIPT LATIN SMALL LETTER I: modifier letter (Lm)"},
    {"\u02B0", 1, "MODIFIER LETTER SMALL H: modifier letter (Lm)"},
    {"\u02C2", 0, "MODIFIER LETTER LEFT ARROWHEAD: modifier symbol (Sk)"},
    {"\u20DD", 1, "COMBINING ENCLOSING CIRCLE: enclosing mark (Me)"},
    {"\u0488", 1, "COMBINING CYRILLIC HUNDRED THOUSANDS SIGN: enclosing mark (Me)"},
    {"\uFF3F", 1, "FULLWIDTH LOW LINE: connector punctuation (Pc)"},
    {"\u2040", 1, "CHARACTER TIE: connector punctuation (Pc)"},
    {"\U0001D7CE", 1, "MATHEMATICAL BOLD DIGIT ZERO: decimal number (Nd)"},
    {"\uFF10", 1, "FULLWIDTH DIGIT ZERO: decimal number (Nd)"},
    {"\U0001E4D0", 1, "NAG MUNDARI LETTER O: a letter new in Unicode 15.0"},
    {"\U00011F00", 1, "KAWI SIGN CANDRABINDU: a mark new in Unicode 15.0"},
    {"\u2060", 0, "WORD JOINER: format (Cf), not Join_Control"},
    {"\uE000", 0, "a private use code point (Co)"},
    {"\u0378", 0, "an unassigned code point (Cn)"},
};

START_TEST(test_word_characters)
{
    char text[32], want[32];
    snprintf(text, sizeof text, "a%sb", chars[_i].c);
    snprintf(want, sizeof want, chars[_i].word ? "a%sb" : "a %s b", chars[_i].c);
    const char *line[] = {text};
    clf_tokenizer *tok = NULL;
    CLF_ASSERT_OK(clf_tokenizer_build(line, 1, 1, &tok));
    int32_t *ids = NULL;
    int n = 0;
    char *got = NULL;
    CLF_ASSERT_OK(clf_tokenizer_encode(tok, text, strlen(text), &ids, &n));
    CLF_ASSERT_OK(clf_tokenizer_decode(tok, ids, n, 0, &got));
    ck_assert_msg(strcmp(got, want) == 0, "%s (%s): \"%s\", want \"%s\"", chars[_i].c,
                  chars[_i].why, got, want);
    free(got);
    free(ids);
    clf_tokenizer_free(tok);
}
END_TEST

CLF_TEST_SUITE_MAIN("pretokenize",
                    CLF_TCASE("pretokenize", 0, {test_word_characters, CLF_LOOPS(chars)}))
