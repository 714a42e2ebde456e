/* tokenizer_build.c - a word-level vocabulary counted from text (clf_tokenizer_build*,
 * see clformer/tokenizer.h): the words of the Whitespace pre-tokenizer (pretokenize.c),
 * ranked as the tokenizers library's WordLevelTrainer ranks them. */
#include "clformer/fs.h"
#include "clformer/tokenizer.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "text/pretokenize.h"
#include "text/tokenizer_kinds.h"

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

static int counter_rehash(counter *c, size_t cap)
{
    size_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < c->n; i++) {
        size_t h = (size_t)clf_tok_hash(c->pool + c->words[i].off, c->words[i].len) & (cap - 1);
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
    if (2 * (c->n + 1) > c->cap && counter_rehash(c, clf_tok_table_cap(c->n + 1)) != 0)
        return -1;
    size_t mask = c->cap - 1, h = (size_t)clf_tok_hash(w, len) & mask;
    for (; c->slots[h]; h = (h + 1) & mask) {
        struct count_entry *e = &c->words[c->slots[h] - 1];
        if (e->len == len && memcmp(c->pool + e->off, w, len) == 0) {
            e->count++;
            return 0;
        }
    }
    struct count_entry *words = clf_tok_reserve(c->words, &c->words_cap, c->n + 1, sizeof *words);
    if (!words)
        return -1;
    c->words = words;
    char *pool = clf_tok_reserve(c->pool, &c->pool_cap, c->pool_len + len + 1, 1);
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
    st = clf_tok_wordlevel_create((int)n, w, wl, fl, special_names[0], name, out);
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
