/* tokenizer_vocab.c - what the kinds of clf_tokenizer share (tokenizer_kinds.h): the
 * vocabulary of ids (a hash table of words) of the word-level and Marian kinds, its JSON
 * reader, and freeing a tokenizer of any kind. Below the kinds: it calls none of them but
 * through tok->kind. */
#include "clformer/hash.h"
#include "clformer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "io/json_jansson.h"
#include "text/tokenizer_kinds.h"

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
    clf_tok_free(tok);
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

void clf_tok_free(clf_tokenizer *tok)
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
