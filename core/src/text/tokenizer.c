/* tokenizer.c - the public functions of clf_tokenizer (see clformer/tokenizer.h), which
 * check their arguments and dispatch through the tokenizer's kind (tokenizer_kinds.h), and
 * loading, which picks the kind of a file. */
#include "clformer/tokenizer.h"

#include <limits.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "clformer/fs.h"
#include "text/pretokenize.h"
#include "text/tokenizer_kinds.h"

/* ---- the public functions ---- */

void clf_tokenizer_free(clf_tokenizer *tok)
{
    clf_tok_free(tok);
}

clf_tokenizer_kind clf_tokenizer_get_kind(const clf_tokenizer *tok)
{
    return tok->kind->kind;
}

int32_t clf_tokenizer_id_n(const clf_tokenizer *tok, const char *word, size_t len)
{
    return tok->kind->id_n(tok, word, len);
}

int32_t clf_tokenizer_id(const clf_tokenizer *tok, const char *word)
{
    return clf_tokenizer_id_n(tok, word, strlen(word));
}

const char *clf_tokenizer_word(const clf_tokenizer *tok, int32_t id)
{
    return tok->kind->word(tok, id);
}

int clf_tokenizer_size(const clf_tokenizer *tok)
{
    return tok->kind->size(tok);
}

clf_tokenizer_specials clf_tokenizer_special_ids(const clf_tokenizer *tok)
{
    return tok->kind->specials(tok);
}

clf_framing clf_tokenizer_framing(const clf_tokenizer *src, const clf_tokenizer *tgt)
{
    const clf_tokenizer_specials none = {-1, -1, -1, -1};
    clf_tokenizer_specials s = src ? clf_tokenizer_special_ids(src) : none;
    clf_tokenizer_specials t = tgt ? clf_tokenizer_special_ids(tgt) : none;
    return (clf_framing){s.sos, s.eos, s.pad, t.sos, t.eos, t.pad, -1, CLF_LANG_NONE, -1, 0};
}

int clf_tokenizer_is_special(const clf_tokenizer *tok, int32_t id)
{
    return tok->kind->is_special(tok, id);
}

clf_status clf_tokenizer_encode(const clf_tokenizer *tok, const char *text, size_t len,
                                int32_t **ids, int *n)
{
    /* The text's checks, once for every kind (the SentencePiece library would replace bad
     * bytes silently; they are refused as the word level refuses them). */
    *ids = NULL;
    *n = 0;
    if (len > 0 && !text)
        return clf_error(CLF_ERR_INPUT, "tokenizer encode: text is NULL");
    if (len > (size_t)INT_MAX)
        return clf_error(CLF_ERR_INPUT, "tokenizer encode: line of %zu bytes is too long", len);
    size_t bad = clf_utf8_invalid_at((const unsigned char *)text, len);
    if (bad < len)
        return clf_error(CLF_ERR_INPUT, "line is not valid UTF-8 at byte %zu", bad);
    return tok->kind->encode(tok, text, len, ids, n);
}

clf_status clf_tokenizer_decode(const clf_tokenizer *tok, const int32_t *ids, int n,
                                int skip_specials, char **text)
{
    /* The ids' checks, once for every kind. */
    *text = NULL;
    if (n < 0 || (n > 0 && !ids))
        return clf_error(CLF_ERR_INPUT, "tokenizer decode: invalid arguments (n = %d)", n);
    int size = clf_tokenizer_size(tok);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= size)
            return clf_error(CLF_ERR_INPUT,
                             "tokenizer decode: id %d at position %d is outside the "
                             "vocabulary (size %d)",
                             (int)ids[i], i, size);
    return tok->kind->decode(tok, ids, n, skip_specials, text);
}

clf_status clf_tokenizer_save(const clf_tokenizer *tok, const char *path)
{
    return tok->kind->save(tok, path);
}

/* ---- loading: which kind a file is ---- */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int clf_tokenizer_name_is_sentencepiece(const char *path)
{
    return ends_with(path, ".model") || ends_with(path, ".spm");
}

/* 1 when path is to be read as a SentencePiece model, 0 for tokenizer JSON: the rule of
 * clformer/tokenizer.h (content first, then the name). */
static int is_sentencepiece(const char *path)
{
    int first = EOF, c = EOF, fd;
    uint64_t size;
    /* only a regular file is looked into, without waiting (a FIFO): the load refuses the rest */
    FILE *f = clf_fs_open_regular(path, UINT64_MAX, &fd, &size) == CLF_OK ? fdopen(fd, "rb") : NULL;
    if (!f && fd >= 0)
        close(fd);
    if (f) {
        first = c = getc(f);
        while (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            c = getc(f);
        fclose(f);
    }
    if (c == '{')
        return 0;
    /* 0x0A: field 1 (the pieces), length-delimited, which a ModelProto starts with */
    if (first == 0x0A)
        return 1;
    return clf_tokenizer_name_is_sentencepiece(path);
}

clf_status clf_tokenizer_load(const char *path, clf_tokenizer **out)
{
    *out = NULL;
    const tok_kind *kind = is_sentencepiece(path) ? &clf_tok_spm : &clf_tok_wordlevel;
    return kind->load(path, out);
}
