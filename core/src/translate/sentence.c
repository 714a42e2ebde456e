/* A sentence as the model takes it, or why it is refused: the rules translate and score
 * share (clformer/translator.h: refused one by one, never cut). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "translate/translator_private.h"

char *clf_translate_take_error(void)
{
    const char *msg = clf_last_error();
    char *copy = strdup(msg && *msg ? msg : "refused");
    clf_clear_error();
    return copy;
}

/* *why := the formatted reason; CLF_ERR_NOMEM when it cannot be kept. */
static clf_status refuse(char **why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static clf_status refuse(char **why, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!(*why = strdup(buf)))
        return clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
    return CLF_OK;
}

clf_status clf_translate_sentence(const clf_translator *t, int side, const char *text, size_t len,
                                  const int32_t *in_ids, int in_n, int32_t **ids, int *n,
                                  char **why)
{
    *ids = NULL;
    *n = 0;
    *why = NULL;
    const clf_tokenizer *tok = t->tok[side];
    if (!text && !in_ids && in_n > 0)
        return refuse(why, "no ids (NULL)");
    if (text) {
        const char *nul = len > 0 ? memchr(text, '\0', len) : NULL;
        if (len > CLF_TRANSLATE_SENTENCE_MAX)
            return refuse(why, "longer than the limit of %d bytes", CLF_TRANSLATE_SENTENCE_MAX);
        if (nul)
            return refuse(why, "a NUL byte at byte %zu", (size_t)(nul - text));
        clf_status st = clf_tokenizer_encode(tok, text, len, ids, n);
        if (st == CLF_ERR_INPUT) { /* not UTF-8, or a word the vocabulary cannot encode */
            *ids = NULL;
            *n = 0;
            return (*why = clf_translate_take_error())
                       ? CLF_OK
                       : clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
        }
        if (st != CLF_OK)
            return st;
    } else {
        const int size = clf_tokenizer_size(tok);
        if (in_n < 0)
            return refuse(why, "a negative length %d", in_n);
        for (int i = 0; i < in_n; i++)
            if (in_ids[i] < 0 || in_ids[i] >= size)
                return refuse(why, "id %d at position %d is not in the %s vocabulary (%d words)",
                              (int)in_ids[i], i, side ? "target" : "source", size);
        if (in_n > 0) {
            if (!(*ids = malloc((size_t)in_n * sizeof **ids)))
                return clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
            memcpy(*ids, in_ids, (size_t)in_n * sizeof **ids);
            *n = in_n;
        }
    }
    /* the framed length: source [SOS] x [EOS] as the model frames it (with its language
     * token); target y + [EOS] (or its decoder input [SOS] y), one token more, and the
     * target language's token when it is forced first */
    const int max_len = t->cfg.model.max_len;
    const int extra = side == 0 ? t->framing : 1 + (t->forced_bos >= 0);
    if (*n + extra > max_len) {
        const char *framing = side == 1 && t->forced_bos >= 0            ? "the language and [EOS]"
                              : side == 1                                ? "[EOS]"
                              : t->fr.src_lang_place != CLF_LANG_NONE    ? "the language's framing"
                              : t->fr.src_bos >= 0 && t->fr.src_eos >= 0 ? "[SOS] and [EOS]"
                              : t->fr.src_bos >= 0                       ? "[SOS]"
                              : t->fr.src_eos >= 0                       ? "[EOS]"
                                                                         : "no framing";
        int got = *n;
        free(*ids);
        *ids = NULL;
        *n = 0;
        return refuse(why,
                      "%d tokens, %d with %s, more than the model's max_len %d: split the line",
                      got, got + extra, framing, max_len);
    }
    return CLF_OK;
}
