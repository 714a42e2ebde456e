/* tokenizer.c - the tutorial's word-level tokenizer (see clformer/tokenizer.h): vocabulary
 * building, encode/decode, and the tokenizers library's tokenizer.json. The words come from
 * the Whitespace pre-tokenizer in pretokenize.c. */
#include "clformer/tokenizer.h"
#include "clformer/fs.h"
#include "clformer/hash.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/json_jansson.h"
#include "text/pretokenize.h"
#include "text/tokenizer_spm.h"

static uint64_t fnv1a(const char *s, size_t n)
{
    return clf_hash_fnv1a64(CLF_FNV1A64_OFFSET, s, n);
}

/* Smallest power of two >= 2n (load factor <= 1/2), at least 16. */
static size_t table_cap(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

/* ---- the tokenizer ---- */

enum {
    TOK_ADDED = 1,     /* in "added_tokens": cut out of the raw text before pre-tokenizing */
    TOK_SPECIAL = 2,   /* "special": true (dropped by decode with skip_specials) */
    TOK_NORMALIZED = 4 /* "normalized": true (kept only to write the file back) */
};

struct added_token {
    const char *s; /* into the pool */
    size_t len;
    int32_t id;
};

struct clf_tokenizer {
    int n;       /* ids 0..n-1 */
    char *pool;  /* the words, each NUL-terminated, back to back */
    size_t *off; /* word of id i: pool + off[i], len[i] bytes */
    size_t *len;
    unsigned char *flags;      /* TOK_* per id */
    int32_t *slots;            /* open addressing by FNV-1a, linear probing: ids, -1 empty */
    size_t cap;                /* power of two */
    struct added_token *added; /* the added tokens, longest first */
    int n_added;
    unsigned char first[256]; /* first[b]: some added token starts with byte b */
    char *unk_token;          /* model.unk_token (possibly not in the vocabulary) */
    clf_tokenizer_specials sp;
    clf_spm *spm; /* set: the SentencePiece kind (tokenizer_spm.c); the fields above unused */
    /* with spm: the ids are those of a piece vocabulary (Marian's vocab.json) held in the
     * fields above; spm only cuts text into pieces and joins pieces into text */
    int mapped;
};

clf_status clf_tok_check_vocab_size(const char *path, size_t n)
{
    if (n > (size_t)CLF_TOKENIZER_VOCAB_MAX)
        return clf_error(CLF_ERR_INPUT, "%s: %zu words, more than the limit of %d", path, n,
                         CLF_TOKENIZER_VOCAB_MAX);
    return CLF_OK;
}

clf_tokenizer *clf_tok_wrap_spm(clf_spm *spm)
{
    clf_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok)
        clf_spm_free(spm);
    else
        tok->spm = spm;
    return tok;
}

clf_tokenizer_kind clf_tokenizer_get_kind(const clf_tokenizer *tok)
{
    return tok->spm ? CLF_TOKENIZER_SENTENCEPIECE : CLF_TOKENIZER_WORD_LEVEL;
}

void clf_tokenizer_free(clf_tokenizer *tok)
{
    if (!tok)
        return;
    clf_spm_free(tok->spm);
    free(tok->pool);
    free(tok->off);
    free(tok->len);
    free(tok->flags);
    free(tok->slots);
    free(tok->added);
    free(tok->unk_token);
    free(tok);
}

int32_t clf_tokenizer_id_n(const clf_tokenizer *tok, const char *word, size_t len)
{
    if (tok->spm && !tok->mapped)
        return clf_spm_piece_id(tok->spm, word, len);
    size_t mask = tok->cap - 1;
    for (size_t h = (size_t)fnv1a(word, len) & mask;; h = (h + 1) & mask) {
        int32_t id = tok->slots[h];
        if (id < 0)
            return -1;
        if (tok->len[id] == len && memcmp(tok->pool + tok->off[id], word, len) == 0)
            return id;
    }
}

int32_t clf_tokenizer_id(const clf_tokenizer *tok, const char *word)
{
    return clf_tokenizer_id_n(tok, word, strlen(word));
}

const char *clf_tokenizer_word(const clf_tokenizer *tok, int32_t id)
{
    if (tok->spm && !tok->mapped)
        return clf_spm_piece(tok->spm, id);
    return (id >= 0 && id < tok->n) ? tok->pool + tok->off[id] : NULL;
}

int clf_tokenizer_size(const clf_tokenizer *tok)
{
    return tok->spm && !tok->mapped ? clf_spm_size(tok->spm) : tok->n;
}

clf_tokenizer_specials clf_tokenizer_special_ids(const clf_tokenizer *tok)
{
    return tok->spm && !tok->mapped ? clf_tok_spm_specials(tok->spm) : tok->sp;
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
    if (tok->spm && !tok->mapped)
        return clf_spm_is_special(tok->spm, id);
    return id >= 0 && id < tok->n && (tok->flags[id] & TOK_SPECIAL);
}

/* Longer added tokens first, so that the first match at a position is the longest. */
static int by_length_desc(const void *a, const void *b)
{
    const struct added_token *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* A tokenizer over words[0..n) (id = index; lens[i] bytes each) with flags[i] (TOK_*) and
 * the given unk token. A word that appears twice is an error naming it and `name`. */
static clf_status tok_create(int n, const char *const *words, const size_t *lens,
                             const unsigned char *flags, const char *unk, const char *name,
                             clf_tokenizer **out)
{
    clf_status st = CLF_OK;
    *out = NULL;
    clf_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok)
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory", name);
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += lens[i] + 1;
    tok->n = n;
    tok->cap = table_cap((size_t)n);
    tok->pool = malloc(total ? total : 1);
    tok->off = malloc(((size_t)n + 1) * sizeof *tok->off);
    tok->len = malloc(((size_t)n + 1) * sizeof *tok->len);
    tok->flags = calloc((size_t)n + 1, 1);
    tok->slots = malloc(tok->cap * sizeof *tok->slots);
    tok->unk_token = strdup(unk);
    if (!tok->pool || !tok->off || !tok->len || !tok->flags || !tok->slots || !tok->unk_token) {
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
        size_t h = (size_t)fnv1a(words[i], lens[i]) & mask;
        for (; tok->slots[h] >= 0; h = (h + 1) & mask) {
            int32_t o = tok->slots[h];
            if (tok->len[o] == lens[i] && memcmp(tok->pool + tok->off[o], words[i], lens[i]) == 0) {
                st = clf_error(CLF_ERR_INPUT, "%s: '%s' has two ids, %d and %d", name,
                               tok->pool + tok->off[o], (int)o, i);
                goto fail;
            }
        }
        tok->slots[h] = i;
        if ((tok->flags[i] & TOK_ADDED) && lens[i] > 0)
            tok->n_added++;
    }
    if (tok->n_added > 0) {
        if (!(tok->added = malloc((size_t)tok->n_added * sizeof *tok->added))) {
            st = clf_error(CLF_ERR_NOMEM, "%s: out of memory", name);
            goto fail;
        }
        int k = 0;
        for (int i = 0; i < n; i++)
            if ((tok->flags[i] & TOK_ADDED) && tok->len[i] > 0) {
                tok->added[k++] = (struct added_token){tok->pool + tok->off[i], tok->len[i], i};
                tok->first[(unsigned char)tok->pool[tok->off[i]]] = 1;
            }
        qsort(tok->added, (size_t)k, sizeof *tok->added, by_length_desc);
    }
    tok->sp.unk = clf_tokenizer_id(tok, unk);
    tok->sp.pad = clf_tokenizer_id(tok, "[PAD]");
    tok->sp.sos = clf_tokenizer_id(tok, "[SOS]");
    tok->sp.eos = clf_tokenizer_id(tok, "[EOS]");
    *out = tok;
    return CLF_OK;
fail:
    clf_tokenizer_free(tok);
    return st;
}

/* ---- building a vocabulary from text ---- */

/* Word counts: an open-addressing table of indices into `words`, the bytes in one pool. */
typedef struct counter {
    struct count_entry {
        size_t off, len;
        int64_t count;
    } * words;
    size_t n, words_cap;
    char *pool;
    size_t pool_len, pool_cap;
    size_t *slots; /* index + 1, 0 = empty */
    size_t cap;    /* power of two */
} counter;

static void counter_free(counter *c)
{
    free(c->words);
    free(c->pool);
    free(c->slots);
}

/* p (room for *cap elements of elem bytes) with room for need > 0 elements: p itself, or p
 * moved by realloc with *cap doubled enough; NULL when out of memory (p is then intact). */
static void *reserve(void *p, size_t *cap, size_t need, size_t elem)
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

static int counter_rehash(counter *c, size_t cap)
{
    size_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < c->n; i++) {
        size_t h = (size_t)fnv1a(c->pool + c->words[i].off, c->words[i].len) & (cap - 1);
        while (slots[h])
            h = (h + 1) & (cap - 1);
        slots[h] = i + 1;
    }
    free(c->slots);
    c->slots = slots;
    c->cap = cap;
    return 0;
}

/* Counts one occurrence of w[0..len); -1 when out of memory. */
static int counter_add(counter *c, const char *w, size_t len)
{
    if (2 * (c->n + 1) > c->cap && counter_rehash(c, table_cap(c->n + 1)) != 0)
        return -1;
    size_t mask = c->cap - 1, h = (size_t)fnv1a(w, len) & mask;
    for (; c->slots[h]; h = (h + 1) & mask) {
        struct count_entry *e = &c->words[c->slots[h] - 1];
        if (e->len == len && memcmp(c->pool + e->off, w, len) == 0) {
            e->count++;
            return 0;
        }
    }
    struct count_entry *words = reserve(c->words, &c->words_cap, c->n + 1, sizeof *words);
    if (!words)
        return -1;
    c->words = words;
    char *pool = reserve(c->pool, &c->pool_cap, c->pool_len + len + 1, 1);
    if (!pool)
        return -1;
    c->pool = pool;
    memcpy(c->pool + c->pool_len, w, len);
    c->words[c->n] = (struct count_entry){c->pool_len, len, 1};
    c->pool_len += len;
    c->slots[h] = ++c->n;
    return 0;
}

/* Counts the words of one line; line_no (from 1) and name (a path or NULL) for errors. */
static clf_status count_line(counter *c, const char *text, size_t len, size_t line_no,
                             const char *name)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t bad = clf_utf8_invalid_at(s, len);
    if (bad < len)
        return clf_error(CLF_ERR_INPUT, "%s%sline %zu is not valid UTF-8 at byte %zu",
                         name ? name : "", name ? ": " : "", line_no, bad);
    size_t pos = 0, start, wlen;
    while (clf_pretokenize_next(s, len, &pos, &start, &wlen))
        if (counter_add(c, text + start, wlen) != 0)
            return clf_error(CLF_ERR_NOMEM, "%s%sout of memory counting words", name ? name : "",
                             name ? ": " : "");
    return CLF_OK;
}

typedef struct ranked_word {
    const char *w;
    size_t len;
    int64_t count;
} ranked_word;

/* Count descending, then the bytes ascending (a prefix first), as the library's trainer. */
static int by_rank(const void *a, const void *b)
{
    const ranked_word *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->w, y->w, n);
    if (c != 0)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

static const char *const special_names[4] = {"[UNK]", "[PAD]", "[SOS]", "[EOS]"};

/* The tokenizer of the counted words: the four specials, then the words seen at least
 * min_freq times by rank, vocab_size ids in all (0: no cap). */
static clf_status counter_finish(counter *c, int min_freq, int vocab_size, const char *name,
                                 clf_tokenizer **out)
{
    clf_status st;
    size_t cap = vocab_size > 0 ? (size_t)vocab_size : (size_t)INT_MAX;
    ranked_word *r = malloc((c->n ? c->n : 1) * sizeof *r);
    size_t keep = 4 + c->n < cap ? 4 + c->n : cap;
    const char **w = malloc(keep * sizeof *w);
    size_t *wl = malloc(keep * sizeof *wl);
    unsigned char *fl = calloc(keep, 1);
    if (!r || !w || !wl || !fl) {
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory", name);
        goto done;
    }
    size_t m = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->words[i].count >= (int64_t)min_freq)
            r[m++] = (ranked_word){c->pool + c->words[i].off, c->words[i].len, c->words[i].count};
    qsort(r, m, sizeof *r, by_rank);
    size_t n = 0;
    for (int i = 0; i < 4 && n < keep; i++, n++) {
        w[n] = special_names[i];
        wl[n] = strlen(special_names[i]);
        fl[n] = TOK_ADDED | TOK_SPECIAL;
    }
    for (size_t i = 0; i < m && n < keep; i++, n++) {
        w[n] = r[i].w;
        wl[n] = r[i].len;
    }
    st = tok_create((int)n, w, wl, fl, special_names[0], name, out);
done:
    free(r);
    free(w);
    free(wl);
    free(fl);
    return st;
}

static clf_status check_build_args(int min_freq, int vocab_size, clf_tokenizer **out)
{
    if (!out)
        return clf_error(CLF_ERR_INPUT, "tokenizer build: out is NULL");
    *out = NULL;
    if (min_freq < 0)
        return clf_error(CLF_ERR_INPUT, "tokenizer build: min_frequency %d is negative", min_freq);
    if (vocab_size != 0 && vocab_size < 4)
        return clf_error(CLF_ERR_INPUT,
                         "tokenizer build: vocab_size %d leaves no room for the 4 special "
                         "tokens (use >= 4, or 0 for no limit)",
                         vocab_size);
    return CLF_OK;
}

clf_status clf_tokenizer_build_sized(const char *const *lines, size_t n, int min_freq,
                                     int vocab_size, clf_tokenizer **out)
{
    clf_status st = check_build_args(min_freq, vocab_size, out);
    if (st != CLF_OK)
        return st;
    if (n > 0 && !lines)
        return clf_error(CLF_ERR_INPUT, "tokenizer build: lines is NULL");
    counter c = {0};
    for (size_t i = 0; i < n; i++) {
        if (!lines[i]) {
            st = clf_error(CLF_ERR_INPUT, "tokenizer build: line %zu is NULL", i + 1);
            goto done;
        }
        if ((st = count_line(&c, lines[i], strlen(lines[i]), i + 1, NULL)) != CLF_OK)
            goto done;
    }
    st = counter_finish(&c, min_freq, vocab_size, "tokenizer build", out);
done:
    counter_free(&c);
    return st;
}

clf_status clf_tokenizer_build(const char *const *lines, size_t n, int min_freq,
                               clf_tokenizer **out)
{
    return clf_tokenizer_build_sized(lines, n, min_freq, CLF_TOKENIZER_VOCAB_SIZE, out);
}

clf_status clf_tokenizer_build_file(const char *path, int min_freq, clf_tokenizer **out)
{
    clf_status st = check_build_args(min_freq, CLF_TOKENIZER_VOCAB_SIZE, out);
    if (st != CLF_OK)
        return st;
    char *data;
    size_t len;
    if ((st = clf_fs_read_all(path, CLF_TOKENIZER_CORPUS_MAX, &data, &len)) != CLF_OK)
        return st;
    counter c = {0};
    size_t line_no = 1;
    for (size_t i = 0; i < len; line_no++) {
        const char *nl = memchr(data + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - data) : len;
        if ((st = count_line(&c, data + i, end - i, line_no, path)) != CLF_OK)
            goto done;
        i = end + 1;
    }
    st = counter_finish(&c, min_freq, CLF_TOKENIZER_VOCAB_SIZE, path, out);
done:
    counter_free(&c);
    free(data);
    return st;
}

/* ---- encoding and decoding ---- */

/* Position of the leftmost added token in s[from..end) (the longest one there), or end. */
static size_t find_added(const clf_tokenizer *tok, const unsigned char *s, size_t from, size_t end,
                         const struct added_token **which)
{
    if (tok->n_added == 0)
        return end;
    for (size_t i = from; i < end; i++) {
        if (!tok->first[s[i]])
            continue;
        for (int k = 0; k < tok->n_added; k++) {
            const struct added_token *a = &tok->added[k];
            if (a->len <= end - i && memcmp(s + i, a->s, a->len) == 0) {
                *which = a;
                return i;
            }
        }
    }
    return end;
}

typedef struct id_list {
    int32_t *v;
    size_t n, cap;
} id_list;

static int push_id(id_list *l, int32_t id)
{
    int32_t *v = reserve(l->v, &l->cap, l->n + 1, sizeof *v);
    if (!v)
        return -1;
    l->v = v;
    l->v[l->n++] = id;
    return 0;
}

/* Marian's MarianTokenizer: the SentencePiece model's pieces (their text), each looked up
 * in the piece vocabulary, unk_id when it is not there. */
static clf_status encode_mapped(const clf_tokenizer *tok, const char *text, size_t len,
                                int32_t **ids, int *n)
{
    if (len == 0) /* text checked by clf_tokenizer_encode */
        return CLF_OK;
    char *pool = NULL;
    int count = 0;
    clf_status st = clf_spm_encode_pieces(tok->spm, text, len, &pool, &count);
    if (st != CLF_OK || count == 0)
        return st;
    int32_t *v = malloc(sizeof *v * (size_t)count);
    if (!v) {
        free(pool);
        return clf_error(CLF_ERR_NOMEM, "tokenizer encode: out of memory");
    }
    const char *p = pool;
    for (int i = 0; i < count; i++) {
        size_t l = strlen(p);
        int32_t id = clf_tokenizer_id_n(tok, p, l);
        if (id < 0 && tok->sp.unk < 0) {
            st = clf_error(CLF_ERR_INPUT,
                           "tokenizer encode: piece '%s' is not in the vocabulary, which has no "
                           "<unk>",
                           p);
            free(v);
            free(pool);
            return st;
        }
        v[i] = id < 0 ? tok->sp.unk : id;
        p += l + 1;
    }
    free(pool);
    *ids = v;
    *n = count;
    return CLF_OK;
}

/* The pieces of ids (specials left out with skip_specials) joined by the SentencePiece
 * model's Decode, U+2581 left by unknown pieces made spaces and the ends stripped of white
 * space (MarianTokenizer's decode). */
static clf_status decode_mapped(const clf_tokenizer *tok, const int32_t *ids, int n,
                                int skip_specials, char **text)
{
    *text = NULL;
    if (n < 0 || (n > 0 && !ids))
        return clf_error(CLF_ERR_INPUT, "tokenizer decode: invalid arguments (n = %d)", n);
    const char **pieces = malloc(sizeof *pieces * (size_t)(n > 0 ? n : 1));
    if (!pieces)
        return clf_error(CLF_ERR_NOMEM, "tokenizer decode: out of memory");
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok->n) {
            free(pieces);
            return clf_error(CLF_ERR_INPUT,
                             "tokenizer decode: id %d at position %d is outside the "
                             "vocabulary (size %d)",
                             (int)ids[i], i, tok->n);
        }
        if (!skip_specials || !(tok->flags[ids[i]] & TOK_SPECIAL))
            pieces[kept++] = tok->pool + tok->off[ids[i]];
    }
    clf_status st = clf_spm_decode_pieces(tok->spm, pieces, kept, text);
    free(pieces);
    if (st != CLF_OK)
        return st;
    /* pieces the model lacks keep their U+2581: MarianTokenizer turns every one into a
     * space, then strips white space at both ends (Python's str.strip, ASCII part) */
    char *t = *text, *w = t;
    for (const char *r = t; *r;) {
        if (!strncmp(r, "\xe2\x96\x81", 3)) {
            *w++ = ' ';
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    char *b = t;
    while (*b && strchr(" \t\n\r\v\f", *b))
        b++;
    size_t l = strlen(b);
    while (l > 0 && strchr(" \t\n\r\v\f", b[l - 1]))
        l--;
    memmove(t, b, l);
    t[l] = '\0';
    return CLF_OK;
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
    const unsigned char *s = (const unsigned char *)text;
    size_t bad = clf_utf8_invalid_at(s, len);
    if (bad < len)
        return clf_error(CLF_ERR_INPUT, "line is not valid UTF-8 at byte %zu", bad);
    if (tok->spm && tok->mapped)
        return encode_mapped(tok, text, len, ids, n);
    if (tok->spm)
        return clf_tok_spm_encode(tok->spm, text, len, ids, n);
    id_list out = {0};
    size_t i = 0;
    while (i < len) {
        const struct added_token *a = NULL;
        size_t cut = find_added(tok, s, i, len, &a);
        size_t pos = i, start, wlen;
        while (clf_pretokenize_next(s, cut, &pos, &start, &wlen)) {
            int32_t id = clf_tokenizer_id_n(tok, text + start, wlen);
            if (id < 0 && (id = tok->sp.unk) < 0) {
                free(out.v);
                return clf_error(CLF_ERR_INPUT,
                                 "tokenizer encode: '%.*s' is not in the vocabulary, which "
                                 "has no unk_token '%s'",
                                 (int)wlen, text + start, tok->unk_token);
            }
            if (push_id(&out, id) != 0)
                goto nomem;
        }
        if (cut == len)
            break;
        if (push_id(&out, a->id) != 0)
            goto nomem;
        i = cut + a->len;
    }
    *ids = out.v;
    *n = (int)out.n;
    return CLF_OK;
nomem:
    free(out.v);
    return clf_error(CLF_ERR_NOMEM, "tokenizer encode: out of memory");
}

clf_status clf_tokenizer_decode(const clf_tokenizer *tok, const int32_t *ids, int n,
                                int skip_specials, char **text)
{
    if (tok->spm && tok->mapped)
        return decode_mapped(tok, ids, n, skip_specials, text);
    if (tok->spm)
        return clf_tok_spm_decode(tok->spm, ids, n, skip_specials, text);
    *text = NULL;
    if (n < 0 || (n > 0 && !ids))
        return clf_error(CLF_ERR_INPUT, "tokenizer decode: invalid arguments (n = %d)", n);
    size_t total = 1;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok->n)
            return clf_error(CLF_ERR_INPUT,
                             "tokenizer decode: id %d at position %d is outside the "
                             "vocabulary (size %d)",
                             (int)ids[i], i, tok->n);
        total += tok->len[ids[i]] + 1;
    }
    char *out = malloc(total);
    if (!out)
        return clf_error(CLF_ERR_NOMEM, "tokenizer decode: out of memory");
    size_t at = 0;
    int first = 1;
    for (int i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (skip_specials && (tok->flags[id] & TOK_SPECIAL))
            continue;
        if (!first)
            out[at++] = ' ';
        first = 0;
        memcpy(out + at, tok->pool + tok->off[id], tok->len[id]);
        at += tok->len[id];
    }
    out[at] = '\0';
    *text = out;
    return CLF_OK;
}

/* ---- tokenizer.json ---- */

/* "null" or the "type" of a component object, for messages. */
static const char *component_type(const json_t *v)
{
    if (!v || json_is_null(v))
        return "null";
    const json_t *t = json_object_get(v, "type");
    return json_is_string(t) ? json_string_value(t) : clf_json_type_name(v);
}

/* A component that clformer does not implement must be absent or null. */
static clf_status check_absent(const char *path, const json_t *root, const char *key,
                               const char *why)
{
    const json_t *v = json_object_get(root, key);
    if (v && !json_is_null(v))
        return clf_error(CLF_ERR_INPUT, "%s: %s '%s' is not supported (%s)", path, key,
                         component_type(v), why);
    return CLF_OK;
}

static clf_status check_header(const char *path, const json_t *root)
{
    clf_status st;
    if (!json_is_object(root))
        return clf_error(CLF_ERR_INPUT, "%s: not a tokenizer file: the top level is %s %s", path,
                         json_is_array(root) ? "an" : "a", clf_json_type_name(root));
    const json_t *v = json_object_get(root, "version");
    if (v && (!json_is_string(v) || strcmp(json_string_value(v), "1.0") != 0))
        return clf_error(CLF_ERR_INPUT,
                         "%s: unknown tokenizer file version %s%s%s (expected "
                         "\"1.0\")",
                         path, json_is_string(v) ? "'" : "",
                         json_is_string(v) ? json_string_value(v) : clf_json_type_name(v),
                         json_is_string(v) ? "'" : "");
    const json_t *model = json_object_get(root, "model");
    if (!json_is_object(model))
        return clf_error(CLF_ERR_INPUT, "%s: not a tokenizer file: no \"model\" object", path);
    const json_t *type = json_object_get(model, "type");
    if (!json_is_string(type))
        return clf_error(CLF_ERR_INPUT,
                         "%s: the model has no \"type\"; clformer reads WordLevel tokenizers "
                         "only",
                         path);
    if (strcmp(json_string_value(type), "WordLevel") != 0)
        return clf_error(CLF_ERR_INPUT,
                         "%s: the model type is '%s'; clformer reads WordLevel tokenizers only",
                         path, json_string_value(type));
    if ((st = check_absent(path, root, "normalizer", "clformer applies no normalizer")) ||
        (st = check_absent(path, root, "post_processor",
                           "clformer adds [SOS]/[EOS] itself, not through the tokenizer")) ||
        (st = check_absent(path, root, "decoder", "clformer joins words with spaces")))
        return st;
    const json_t *pre = json_object_get(root, "pre_tokenizer");
    if (strcmp(component_type(pre), "Whitespace") != 0)
        return clf_error(CLF_ERR_INPUT,
                         "%s: pre_tokenizer '%s' is not supported (clformer implements "
                         "Whitespace only)",
                         path, component_type(pre));
    return CLF_OK;
}

/* Puts every word of model.vocab at its id in w/wl; ids must be < total (else some id
 * below them is missing) and unique. */
static clf_status read_vocab(const char *path, json_t *vocab, size_t total, const char **w,
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

static int get_flag(const json_t *obj, const char *key)
{
    return json_is_true(json_object_get(obj, key));
}

clf_status clf_tokenizer_load(const char *path, clf_tokenizer **out)
{
    clf_status st;
    *out = NULL;
    if (clf_tok_spm_detect(path)) {
        clf_spm *spm;
        if ((st = clf_tok_spm_load(path, &spm)) != CLF_OK)
            return st;
        if (!(*out = clf_tok_wrap_spm(spm)))
            return clf_error(CLF_ERR_NOMEM, "%s: out of memory", path);
        return CLF_OK;
    }
    json_t *root = NULL;
    const char **w = NULL;
    size_t *wl = NULL;
    unsigned char *fl = NULL;
    if ((st = clf_json_parse_file(path, CLF_TOKENIZER_JSON_MAX, &root)) != CLF_OK)
        return st;
    if ((st = check_header(path, root)) != CLF_OK)
        goto done;
    json_t *model = json_object_get(root, "model");
    json_t *vocab = json_object_get(model, "vocab");
    const json_t *unk = json_object_get(model, "unk_token");
    const json_t *added = json_object_get(root, "added_tokens");
    if (!json_is_object(vocab)) {
        st = clf_error(CLF_ERR_INPUT, "%s: model.vocab is missing or not an object", path);
        goto done;
    }
    if (!json_is_string(unk)) {
        st = clf_error(CLF_ERR_INPUT, "%s: model.unk_token is missing or not a string", path);
        goto done;
    }
    if (added && !json_is_null(added) && !json_is_array(added)) {
        st = clf_error(CLF_ERR_INPUT, "%s: added_tokens is not an array", path);
        goto done;
    }
    size_t n_added = json_is_array(added) ? json_array_size(added) : 0;
    size_t total = json_object_size(vocab) + n_added;
    if ((st = clf_tok_check_vocab_size(path, total)) != CLF_OK)
        goto done;
    w = calloc(total + 1, sizeof *w);
    wl = calloc(total + 1, sizeof *wl);
    fl = calloc(total + 1, 1);
    if (!w || !wl || !fl) {
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory for %zu words", path, total);
        goto done;
    }
    if ((st = read_vocab(path, vocab, total, w, wl)) != CLF_OK)
        goto done;
    for (size_t i = 0; i < n_added; i++) {
        const json_t *a = json_array_get(added, i);
        const json_t *id = json_object_get(a, "id"), *content = json_object_get(a, "content");
        if (!json_is_object(a) || !json_is_integer(id) || json_integer_value(id) < 0 ||
            !json_is_string(content)) {
            st = clf_error(CLF_ERR_INPUT,
                           "%s: added_tokens[%zu] needs an integer \"id\" >= 0 and a string "
                           "\"content\"",
                           path, i);
            goto done;
        }
        const char *opt[3] = {"single_word", "lstrip", "rstrip"};
        for (int k = 0; k < 3; k++)
            if (get_flag(a, opt[k])) {
                st = clf_error(CLF_ERR_INPUT,
                               "%s: added token '%s' sets \"%s\", which clformer does not "
                               "support",
                               path, json_string_value(content), opt[k]);
                goto done;
            }
        const char *text = json_string_value(content);
        size_t text_len = json_string_length(content);
        int64_t k = json_integer_value(id);
        if ((uint64_t)k >= total) {
            st = clf_error(CLF_ERR_INPUT,
                           "%s: added token '%s' has id %lld, beyond the %zu entries of the "
                           "file: ids must run 0..n-1 without gaps",
                           path, text, (long long)k, total);
            goto done;
        }
        if (w[k] && (wl[k] != text_len || memcmp(w[k], text, wl[k]) != 0)) {
            st = clf_error(CLF_ERR_INPUT, "%s: added token '%s' has id %lld, which is '%s'", path,
                           text, (long long)k, w[k]);
            goto done;
        }
        w[k] = text;
        wl[k] = text_len;
        fl[k] = TOK_ADDED | (get_flag(a, "special") ? TOK_SPECIAL : 0) |
                (get_flag(a, "normalized") ? TOK_NORMALIZED : 0);
    }
    size_t n = total;
    while (n > 0 && !w[n - 1])
        n--;
    for (size_t id = 0; id < n; id++)
        if (!w[id]) {
            st = clf_error(CLF_ERR_INPUT,
                           "%s: no word has id %zu, but '%s' has id %zu: ids must run 0..n-1 "
                           "without gaps",
                           path, id, w[n - 1], n - 1);
            goto done;
        }
    st = tok_create((int)n, w, wl, fl, json_string_value(unk), path, out);
done:
    free(w);
    free(wl);
    free(fl);
    json_decref(root);
    return st;
}

/* The file as the library's Tokenizer.save writes it (serde_json's pretty printer: two
 * spaces of indent, "key": value, no newline at the end), which is Jansson's JSON_INDENT(2)
 * with members in insertion order. */
typedef struct json_text {
    char *data; /* malloc'd by Jansson */
    size_t len;
    int failed; /* out of memory */
} json_text;

static json_t *added_token_json(const clf_tokenizer *tok, int i)
{
    json_t *a = json_object();
    int bad = !a;
    bad |= json_object_set_new(a, "id", json_integer(i));
    bad |= json_object_set_new(a, "content", json_stringn(tok->pool + tok->off[i], tok->len[i]));
    bad |= json_object_set_new(a, "single_word", json_false());
    bad |= json_object_set_new(a, "lstrip", json_false());
    bad |= json_object_set_new(a, "rstrip", json_false());
    bad |= json_object_set_new(a, "normalized", json_boolean(tok->flags[i] & TOK_NORMALIZED));
    bad |= json_object_set_new(a, "special", json_boolean(tok->flags[i] & TOK_SPECIAL));
    if (bad) {
        json_decref(a);
        return NULL;
    }
    return a;
}

static void write_json(const clf_tokenizer *tok, json_text *b)
{
    json_t *root = json_object(), *added = json_array(), *vocab = json_object();
    json_t *pre = json_pack("{s:s}", "type", "Whitespace");
    int bad = !root || !added || !vocab || !pre;
    for (int i = 0; i < tok->n && !bad; i++)
        if (tok->flags[i] & TOK_ADDED)
            bad |= json_array_append_new(added, added_token_json(tok, i));
    for (int i = 0; i < tok->n && !bad; i++)
        bad |= json_object_setn_new(vocab, tok->pool + tok->off[i], tok->len[i], json_integer(i));
    json_t *model = json_pack("{s:s, s:o, s:s}", "type", "WordLevel", "vocab", vocab, "unk_token",
                              tok->unk_token); /* takes vocab */
    bad |= json_object_set_new(root, "version", json_string("1.0"));
    bad |= json_object_set_new(root, "truncation", json_null());
    bad |= json_object_set_new(root, "padding", json_null());
    bad |= json_object_set_new(root, "added_tokens", added);
    bad |= json_object_set_new(root, "normalizer", json_null());
    bad |= json_object_set_new(root, "pre_tokenizer", pre);
    bad |= json_object_set_new(root, "post_processor", json_null());
    bad |= json_object_set_new(root, "decoder", json_null());
    bad |= json_object_set_new(root, "model", model);
    b->data = bad ? NULL : json_dumps(root, JSON_INDENT(2));
    b->len = b->data ? strlen(b->data) : 0;
    b->failed = !b->data;
    json_decref(root);
}

clf_status clf_tokenizer_save(const clf_tokenizer *tok, const char *path)
{
    if (tok->spm && tok->mapped)
        return clf_error(CLF_ERR_INPUT,
                         "%s: a SentencePiece model with a piece vocabulary is two files: copy "
                         "them instead",
                         path);
    if (tok->spm)
        return clf_tok_spm_save(tok->spm, path);
    json_text b = {0};
    write_json(tok, &b);
    clf_status st = b.failed
                        ? clf_error(CLF_ERR_NOMEM, "%s: out of memory writing the tokenizer", path)
                        : clf_fs_write_atomic_bytes(path, b.data, b.len);
    free(b.data);
    return st;
}

/* Marian's names of the specials in vocab.json. */
static const char *const mapped_special[4] = {"<unk>", "<pad>", "<s>", "</s>"};

clf_status clf_tokenizer_load_mapped(const char *spm_path, const char *vocab_path,
                                     clf_tokenizer **out)
{
    *out = NULL;
    clf_spm *spm = NULL;
    json_t *root = NULL;
    const char **w = NULL;
    size_t *wl = NULL;
    unsigned char *fl = NULL;
    clf_status st = clf_tok_spm_load(spm_path, &spm);
    if (st != CLF_OK)
        return st;
    if ((st = clf_json_parse_file(vocab_path, CLF_TOKENIZER_JSON_MAX, &root)) != CLF_OK)
        goto done;
    if (!json_is_object(root)) {
        st = clf_error(CLF_ERR_INPUT, "%s: expected an object of piece: id pairs", vocab_path);
        goto done;
    }
    size_t total = json_object_size(root);
    if (total == 0 || total > (size_t)INT32_MAX) {
        st = clf_error(CLF_ERR_INPUT, "%s: %zu pieces: not a vocabulary", vocab_path, total);
        goto done;
    }
    w = calloc(total + 1, sizeof *w);
    wl = calloc(total + 1, sizeof *wl);
    fl = calloc(total + 1, 1);
    if (!w || !wl || !fl) {
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory for %zu pieces", vocab_path, total);
        goto done;
    }
    if ((st = read_vocab(vocab_path, root, total, w, wl)) != CLF_OK)
        goto done;
    for (size_t id = 0; id < total; id++) {
        if (!w[id]) {
            st = clf_error(CLF_ERR_INPUT, "%s: no piece has id %zu: ids must run 0..n-1",
                           vocab_path, id);
            goto done;
        }
        for (int k = 0; k < 4; k++)
            if (wl[id] == strlen(mapped_special[k]) && !memcmp(w[id], mapped_special[k], wl[id]))
                fl[id] = TOK_SPECIAL;
    }
    if ((st = tok_create((int)total, w, wl, fl, "<unk>", vocab_path, out)) != CLF_OK)
        goto done;
    (*out)->spm = spm;
    (*out)->mapped = 1;
    spm = NULL;
    int32_t *sp[4] = {&(*out)->sp.unk, &(*out)->sp.pad, &(*out)->sp.sos, &(*out)->sp.eos};
    for (int k = 0; k < 4; k++)
        *sp[k] = clf_tokenizer_id(*out, mapped_special[k]);
done:
    clf_spm_free(spm);
    json_decref(root);
    free(w);
    free(wl);
    free(fl);
    return st;
}
