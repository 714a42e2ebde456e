/* pretokenize.c - the tokenizers library's Whitespace pre-tokenizer (\w+|[^\w\s]+) over
 * UTF-8, and the UTF-8 check that comes before it (see pretokenize.h). */
#include "text/pretokenize.h"

#include <utf8proc.h>

/* ---- character classes ---- */

enum { CL_SPACE, CL_WORD, CL_PUNCT };

/* Word characters >= 0x80 are Rust regex's \w (regex-syntax's perl_word, after UTS #18
 * Annex C), which the tokenizers library's Whitespace pre-tokenizer uses: Alphabetic,
 * General_Category Mark, Decimal_Number and Connector_Punctuation, and Join_Control.
 * Alphabetic is the letters (L*), the letter numbers (Nl) and a few others: marks, and the
 * circled and squared Latin letters (So) of is_other_alphabetic_symbol. utf8proc gives the
 * General_Category, not those two properties, so what they add to it is named here.
 *
 * Unicode versions: this agrees with tokenizers 0.23.3 (Unicode 16.0) on every code point
 * >= 0x80, unassigned ones included, except for the 5,055 code points that Unicode 16.0
 * assigned (letters, marks and digits of Garay, Gurung Khema, Kirat Rai, Ol Onal, Sunuwar,
 * Todhri, Tulu-Tigalari, CJK extension I, Egyptian hieroglyphs extension A, ...): utf8proc
 * 2.8 (Debian 12) knows Unicode 15.0, where they are unassigned and so not word characters.
 * A utf8proc of Unicode 16.0 (2.10) closes the gap with no change here. Checked by comparing
 * every code point against the table this replaced (in the git history of this file),
 * which was generated from the library itself: for each c,
 * len(Whitespace().pre_tokenize_str("a" + chr(c) + "a")) is 1 for a word character. */
static int is_other_alphabetic_symbol(uint32_t c)
{
    return (c >= 0x24B6 && c <= 0x24E9) ||   /* circled Latin letters */
           (c >= 0x1F130 && c <= 0x1F149) || /* squared Latin capital letters */
           (c >= 0x1F150 && c <= 0x1F169) || /* negative circled Latin capital letters */
           (c >= 0x1F170 && c <= 0x1F189);   /* negative squared Latin capital letters */
}

static int is_unicode_word(uint32_t c)
{
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return c == 0x200C || c == 0x200D || /* Join_Control: ZWNJ, ZWJ (Cf) */
               is_other_alphabetic_symbol(c);
    }
}

/* The White_Space property >= 0x80 (utf8proc has no property for it; the set has not
 * changed since Unicode 6.3). */
static int is_unicode_space(uint32_t c)
{
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static int class_of(uint32_t c)
{
    if (c < 0x80) {
        if ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_')
            return CL_WORD;
        return (c == ' ' || (c >= '\t' && c <= '\r')) ? CL_SPACE : CL_PUNCT;
    }
    if (is_unicode_space(c))
        return CL_SPACE;
    return is_unicode_word(c) ? CL_WORD : CL_PUNCT;
}

/* ---- UTF-8 ---- */

/* Length of the well-formed UTF-8 sequence at s[i..n) (Unicode table 3-7: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0 when there is none. */
static size_t utf8_len(const unsigned char *s, size_t i, size_t n)
{
    unsigned c = s[i], lo = 0x80, hi = 0xBF;
    size_t need;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (n - i - 1 < need || s[i + 1] < lo || s[i + 1] > hi)
        return 0;
    for (size_t k = 2; k <= need; k++)
        if ((s[i + k] & 0xC0) != 0x80)
            return 0;
    return need + 1;
}

size_t clf_utf8_invalid_at(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_len(s, i, n);
        if (k == 0)
            return i;
        i += k;
    }
    return n;
}

/* Class of the character at s[*i] of well-formed UTF-8; advances *i past it. */
static int next_class(const unsigned char *s, size_t *i)
{
    unsigned c = s[*i];
    if (c < 0x80) {
        *i += 1;
        return class_of(c);
    }
    uint32_t cp;
    size_t k;
    if (c < 0xE0) {
        cp = c & 0x1F;
        k = 2;
    } else if (c < 0xF0) {
        cp = c & 0x0F;
        k = 3;
    } else {
        cp = c & 0x07;
        k = 4;
    }
    for (size_t j = 1; j < k; j++)
        cp = (cp << 6) | (s[*i + j] & 0x3F);
    *i += k;
    return class_of(cp);
}

int clf_pretokenize_next(const unsigned char *s, size_t end, size_t *pos, size_t *start,
                         size_t *len)
{
    size_t i = *pos, j;
    int c;
    for (;;) {
        if (i >= end) {
            *pos = end;
            return 0;
        }
        j = i;
        c = next_class(s, &j);
        if (c != CL_SPACE)
            break;
        i = j;
    }
    *start = i;
    while (j < end) {
        size_t k = j;
        if (next_class(s, &k) != c)
            break;
        j = k;
    }
    *len = j - i;
    *pos = j;
    return 1;
}
