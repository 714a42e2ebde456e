/* tokenizer.c - the public functions of clf_tokenizer (see clformer/tokenizer.h), which
 * check their arguments and dispatch through the tokenizer's kind (tokenizer_kinds.h);
 * the vocabulary of ids that the word-level and Marian kinds share; and loading, which
 * picks the kind of a file. */
#include "clformer/tokenizer.h"
#include "clformer/hash.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_jansson.h"
#include "text/pretokenize.h"
#include "text/tokenizer_kinds.h"

/* ---- helpers of the kinds ---- */

uint64_t clf_tok_hash(const char *s, size_t n)
{
    return clf_hash_fnv1a64(CLF_FNV1A64_OFFSET, s, n);
}

size_t clf_tok_table_cap(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

void *clf_tok_reserve(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * elem);
    if (q)
        *cap = c;
    return q;
}

clf_status clf_tok_check_vocab_size(const char *path, size_t n)
{
    if (n > (size_t)CLF_TOKENIZER_VOCAB_MAX)
        return clf_error(CLF_ERR_INPUT, "%s: %zu words, more than the limit of %d", path, n,
                         CLF_TOKENIZER_VOCAB_MAX);
    return CLF_OK;
}

/* ---- the vocabulary ---- */

clf_status clf_tok_vocab_create(const tok_kind *kind, int n, const char *const *words,
                                const size_t *lens, const unsigned char *flags,
                                const char *const specials[4], const char *name,
                                clf_tokenizer **out)
{
    clf_status st = CLF_OK;
    *out = NULL;
    clf_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok)
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory", name);
    tok->kind = kind;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += lens[i] + 1;
    tok->n = n;
    tok->cap = clf_tok_table_cap((size_t)n);
    tok->pool = malloc(total ? total : 1);
    tok->off = malloc(((size_t)n + 1) * sizeof *tok->off);
    tok->len = malloc(((size_t)n + 1) * sizeof *tok->len);
    tok->flags = calloc((size_t)n + 1, 1);
    tok->slots = malloc(tok->cap * sizeof *tok->slots);
    if (!tok->pool || !tok->off || !tok->len || !tok->flags || !tok->slots) {
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory for %d words", name, n);
        goto fail;
    }
    memset(tok->slots, 0xff, tok->cap * sizeof *tok->slots); /* all -1 */
    size_t at = 0;
    size_t mask = tok->cap - 1;
    for (int i = 0; i < n; i++) {
        memcpy(tok->pool + at, words[i], lens[i]);
        tok->pool[at + lens[i]] = '\0';
        tok->off[i] = at;
        tok->len[i] = lens[i];
        tok->flags[i] = flags ? flags[i] : 0;
        at += lens[i] + 1;
        size_t h = (size_t)clf_tok_hash(words[i], lens[i]) & mask;
        for (; tok->slots[h] >= 0; h = (h + 1) & mask) {
            int32_t o = tok->slots[h];
            if (tok->len[o] == lens[i] && memcmp(tok->pool + tok->off[o], words[i], lens[i]) == 0) {
                st = clf_error(CLF_ERR_INPUT, "%s: '%s' has two ids, %d and %d", name,
                               tok->pool + tok->off[o], (int)o, i);
                goto fail;
            }
        }
        tok->slots[h] = i;
    }
    tok->sp.unk = clf_tok_vocab_id_n(tok, specials[0], strlen(specials[0]));
    tok->sp.pad = clf_tok_vocab_id_n(tok, specials[1], strlen(specials[1]));
    tok->sp.sos = clf_tok_vocab_id_n(tok, specials[2], strlen(specials[2]));
    tok->sp.eos = clf_tok_vocab_id_n(tok, specials[3], strlen(specials[3]));
    *out = tok;
    return CLF_OK;
fail:
    clf_tokenizer_free(tok);
    return st;
}

int clf_tok_words_alloc(tok_words *t, size_t n)
{
    t->w = calloc(n + 1, sizeof *t->w);
    t->wl = calloc(n + 1, sizeof *t->wl);
    t->fl = calloc(n + 1, 1);
    if (t->w && t->wl && t->fl)
        return 0;
    clf_tok_words_free(t);
    return -1;
}

void clf_tok_words_free(tok_words *t)
{
    free(t->w);
    free(t->wl);
    free(t->fl);
    *t = (tok_words){0};
}

clf_status clf_tok_read_vocab(const char *path, json_t *vocab, size_t total, const char **w,
                              size_t *wl)
{
    for (void *it = json_object_iter(vocab); it; it = json_object_iter_next(vocab, it)) {
        const json_t *v = json_object_iter_value(it);
        const char *word = json_object_iter_key(it);
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0)
            return clf_error(CLF_ERR_INPUT,
                             "%s: model.vocab: the id of '%s' is not a non-negative integer", path,
                             word);
        if ((uint64_t)id >= total)
            return clf_error(CLF_ERR_INPUT,
                             "%s: model.vocab: '%s' has id %lld, beyond the %zu entries of the "
                             "file: ids must run 0..n-1 without gaps",
                             path, word, (long long)id, total);
        if (w[id])
            return clf_error(CLF_ERR_INPUT, "%s: model.vocab: '%s' and '%s' both have id %lld",
                             path, w[id], word, (long long)id);
        w[id] = word;
        wl[id] = json_object_iter_key_len(it);
    }
    return CLF_OK;
}

int32_t clf_tok_vocab_id_n(const clf_tokenizer *tok, const char *word, size_t len)
{
    size_t mask = tok->cap - 1;
    for (size_t h = (size_t)clf_tok_hash(word, len) & mask;; h = (h + 1) & mask) {
        int32_t id = tok->slots[h];
        if (id < 0)
            return -1;
        if (tok->len[id] == len && memcmp(tok->pool + tok->off[id], word, len) == 0)
            return id;
    }
}

const char *clf_tok_vocab_word(const clf_tokenizer *tok, int32_t id)
{
    return (id >= 0 && id < tok->n) ? tok->pool + tok->off[id] : NULL;
}

int clf_tok_vocab_size(const clf_tokenizer *tok)
{
    return tok->n;
}

clf_tokenizer_specials clf_tok_vocab_specials(const clf_tokenizer *tok)
{
    return tok->sp;
}

int clf_tok_vocab_is_special(const clf_tokenizer *tok, int32_t id)
{
    return id >= 0 && id < tok->n && (tok->flags[id] & TOK_SPECIAL);
}

/* ---- the public functions ---- */

void clf_tokenizer_free(clf_tokenizer *tok)
{
    if (!tok)
        return;
    if (tok->kind)
        tok->kind->free(tok);
    free(tok->pool);
    free(tok->off);
    free(tok->len);
    free(tok->flags);
    free(tok->slots);
    free(tok);
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
    return (clf_framing){s.sos, s.eos, s.pad, t.sos, t.eos, t.pad};
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
    int first = EOF, c = EOF;
    FILE *f = fopen(path, "rb");
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
