/* pretokenize.h - the HuggingFace tokenizers library's Whitespace pre-tokenizer, internal to
 * libclformer (used by the tokenizer).
 *
 * Words are what the regex \w+|[^\w\s]+ matches: maximal runs of word characters, or of
 * characters that are neither word characters nor white space; white space separates.
 * Word characters: ASCII letters, digits, '_', and the code points >= 0x80 that the library
 * counts as \w (letters, marks, decimal digits, letter numbers, connector punctuation,
 * joiners), from utf8proc's Unicode categories (see pretokenize.c for the Unicode version).
 * White space: the Unicode White_Space set.
 *
 *     if (clf_utf8_invalid_at(s, n) < n) ... refuse ...
 *     size_t pos = 0, start, len;
 *     while (clf_pretokenize_next(s, n, &pos, &start, &len))
 *         ... word s[start..start+len) ...
 */
#ifndef CLF_PRETOKENIZE_H
#define CLF_PRETOKENIZE_H

#include <stddef.h>
#include <stdint.h>

/* Offset of the first byte of s[0..n) that does not start a well-formed UTF-8 sequence
 * (Unicode table 3-7: no overlong forms, surrogates or code points above U+10FFFF), or n
 * when all of it is well-formed. */
size_t clf_utf8_invalid_at(const unsigned char *s, size_t n);

/* The next word of well-formed UTF-8 s[*pos..end): sets *start and *len (bytes) and moves
 * *pos past it; returns 0 (with *pos = end) when only white space is left. */
int clf_pretokenize_next(const unsigned char *s, size_t end, size_t *pos, size_t *start,
                         size_t *len);

#endif
