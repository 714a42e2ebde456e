/* Parallel training data: files -> checked lines -> tokenized pairs -> planned batches.
 *
 * A file is read whole; its line ends (and a TSV line's TAB) are overwritten with NULs in
 * place, so each side of a pair is a NUL-terminated string inside the file's buffer, which
 * the dataset keeps for clf_dataset_text. Token ids of all kept pairs live in one pool.
 * The batcher holds an order of the pair indices and where each batch starts in it; all
 * its scratch memory is allocated at creation, so planning an epoch cannot fail midway. */
#include "clformer/dataset.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/fs.h"
#include "clformer/rng.h"
#include "text/pretokenize.h"

/* ---- reading lines ----------------------------------------------------------------- */

/* The lines of one file, split in place. */
typedef struct text_file {
    const char *path;
    char *data;   /* contents + a NUL; '\n' (and a '\r' before it) overwritten by NULs */
    char **lines; /* [n] starts of the lines, each NUL-terminated */
    size_t *lens; /* [n] their lengths in bytes */
    size_t n;
} text_file;

static void text_file_free(text_file *f)
{
    free(f->data);
    free(f->lines);
    free(f->lens);
    memset(f, 0, sizeof *f);
}

/* Reads path and splits it into checked lines: valid UTF-8, no NUL byte. */
static clf_status text_file_read(const char *path, text_file *f)
{
    clf_status st = CLF_OK;
    size_t len = 0;
    memset(f, 0, sizeof *f);
    f->path = path;
    if ((st = clf_fs_read_all(path, CLF_DATASET_FILE_MAX, &f->data, &len)) != CLF_OK)
        return st;
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += f->data[i] == '\n';
    n += len > 0 && f->data[len - 1] != '\n'; /* a last line without its '\n' */
    f->lines = malloc((n ? n : 1) * sizeof *f->lines);
    f->lens = malloc((n ? n : 1) * sizeof *f->lens);
    if (!f->lines || !f->lens) {
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory for %zu lines", path, n);
        goto fail;
    }
    size_t pos = 0;
    for (size_t k = 0; k < n; k++) {
        char *line = f->data + pos;
        char *nl = memchr(line, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - f->data) : len;
        size_t line_len = end - pos;
        if (line_len > 0 && line[line_len - 1] == '\r')
            line_len--; /* CRLF files read the same as LF files */
        line[line_len] = '\0';
        pos = end + 1;
        if (line_len > CLF_DATASET_LINE_MAX) {
            st = clf_error(CLF_ERR_INPUT, "%s:%zu: a line of %zu bytes, more than the limit of %d",
                           path, k + 1, line_len, CLF_DATASET_LINE_MAX);
            goto fail;
        }
        if (memchr(line, '\0', line_len)) {
            st = clf_error(CLF_ERR_INPUT, "%s:%zu: contains a NUL byte at byte %zu", path, k + 1,
                           (size_t)((char *)memchr(line, '\0', line_len) - line));
            goto fail;
        }
        size_t bad = clf_utf8_invalid_at((const unsigned char *)line, line_len);
        if (bad < line_len) {
            st = clf_error(CLF_ERR_INPUT, "%s:%zu: not valid UTF-8 at byte %zu (0x%02x)", path,
                           k + 1, bad, (unsigned)(unsigned char)line[bad]);
            goto fail;
        }
        f->lines[k] = line;
        f->lens[k] = line_len;
    }
    f->n = n;
    return CLF_OK;
fail:
    text_file_free(f);
    return st;
}

/* 1 when s[0..len) holds no word (white space only, or nothing). */
static int is_blank(const char *s, size_t len)
{
    size_t pos = 0, start, wlen;
    return !clf_pretokenize_next((const unsigned char *)s, len, &pos, &start, &wlen);
}

/* The two sides of every line, from a TSV file or two line-aligned files. */
typedef struct raw_pairs {
    text_file file[2]; /* file[1] unused (n = 0) for a TSV */
    const char **src, **tgt;
    size_t n;
} raw_pairs;

static void raw_pairs_free(raw_pairs *r)
{
    text_file_free(&r->file[0]);
    text_file_free(&r->file[1]);
    free(r->src);
    free(r->tgt);
    memset(r, 0, sizeof *r);
}

/* Cuts each TSV line at its one TAB; a blank line becomes two empty sides. */
static clf_status split_tsv(raw_pairs *r)
{
    text_file *f = &r->file[0];
    for (size_t k = 0; k < f->n; k++) {
        char *line = f->lines[k];
        size_t len = f->lens[k];
        if (is_blank(line, len)) {
            r->src[k] = r->tgt[k] = line + len; /* "" */
            continue;
        }
        char *tab = memchr(line, '\t', len);
        if (!tab)
            return clf_error(CLF_ERR_INPUT,
                             "%s:%zu: no TAB: expected source<TAB>target (or give the target "
                             "side as a second file)",
                             f->path, k + 1);
        size_t tabs = 0;
        for (size_t i = 0; i < len; i++)
            tabs += line[i] == '\t';
        if (tabs > 1)
            return clf_error(CLF_ERR_INPUT,
                             "%s:%zu: %zu TABs: expected exactly one, source<TAB>target", f->path,
                             k + 1, tabs);
        *tab = '\0';
        r->src[k] = line;
        r->tgt[k] = tab + 1;
    }
    return CLF_OK;
}

static int has_path(const char *p)
{
    return p && *p;
}

static clf_status raw_pairs_read(const char *src_path, const char *tgt_path, raw_pairs *r)
{
    clf_status st = CLF_OK;
    memset(r, 0, sizeof *r);
    if (!has_path(src_path)) {
        st = clf_error(CLF_ERR_INPUT, "dataset: no data file given");
        goto fail;
    }
    if ((st = text_file_read(src_path, &r->file[0])) != CLF_OK)
        goto fail;
    if (has_path(tgt_path)) {
        if ((st = text_file_read(tgt_path, &r->file[1])) != CLF_OK)
            goto fail;
        if (r->file[0].n != r->file[1].n) {
            st = clf_error(CLF_ERR_INPUT,
                           "%s has %zu lines but %s has %zu: source and target files must be "
                           "line-aligned",
                           src_path, r->file[0].n, tgt_path, r->file[1].n);
            goto fail;
        }
    }
    r->n = r->file[0].n;
    r->src = malloc((r->n ? r->n : 1) * sizeof *r->src);
    r->tgt = malloc((r->n ? r->n : 1) * sizeof *r->tgt);
    if (!r->src || !r->tgt) {
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory for %zu lines", src_path, r->n);
        goto fail;
    }
    if (!has_path(tgt_path)) {
        if ((st = split_tsv(r)) != CLF_OK)
            goto fail;
        return CLF_OK;
    }
    for (size_t k = 0; k < r->n; k++) {
        r->src[k] = r->file[0].lines[k];
        r->tgt[k] = r->file[1].lines[k];
    }
    return CLF_OK;
fail:
    raw_pairs_free(r);
    return st;
}

/* ---- the dataset ------------------------------------------------------------------- */

typedef struct pair {
    const char *src, *tgt;   /* raw text, inside the file buffers */
    size_t src_off, tgt_off; /* ids in the pool */
    int src_n, tgt_n;        /* id counts, without specials */
    size_t line;             /* from 1 */
} pair;

struct clf_dataset {
    char *data[2]; /* the file buffers the texts point into */
    pair *pairs;
    size_t n, skipped_long, skipped_empty;
    int32_t *ids; /* pool */
    clf_framing f;
    int src_extra; /* framing ids around a source: clf_framing_source_extra */
    int tgt_extra; /* and a target's: clf_framing_target_extra ([lang] and eos) */
};

void clf_dataset_free(clf_dataset *d)
{
    if (!d)
        return;
    free(d->data[0]);
    free(d->data[1]);
    free(d->pairs);
    free(d->ids);
    free(d);
}

/* The framing specials of one side, or an error naming the missing one. */
static clf_status need_specials(const clf_tokenizer *tok, const char *side, int32_t *pad,
                                int32_t *sos, int32_t *eos)
{
    if (!tok)
        return clf_error(CLF_ERR_INPUT, "dataset: no %s tokenizer given", side);
    clf_tokenizer_specials s = clf_tokenizer_special_ids(tok);
    const char *missing = s.pad < 0 ? "[PAD]" : s.sos < 0 ? "[SOS]" : s.eos < 0 ? "[EOS]" : NULL;
    if (missing)
        return clf_error(CLF_ERR_INPUT,
                         "dataset: the %s vocabulary has no %s token (needed to frame and pad "
                         "the pairs)",
                         side, missing);
    *pad = s.pad;
    *sos = s.sos;
    *eos = s.eos;
    return CLF_OK;
}

/* ids appended to the pool (grown by doubling). */
typedef struct id_pool {
    int32_t *ids;
    size_t n, cap;
} id_pool;

static int pool_append(id_pool *p, const int32_t *ids, int n)
{
    if (p->n + (size_t)n > p->cap) {
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < p->n + (size_t)n)
            cap *= 2;
        int32_t *grown = realloc(p->ids, cap * sizeof *grown);
        if (!grown)
            return -1;
        p->ids = grown;
        p->cap = cap;
    }
    memcpy(p->ids + p->n, ids, (size_t)n * sizeof *ids);
    p->n += (size_t)n;
    return 0;
}

/* Encodes one side of line k; messages get "<path>:<line>: " in front. */
static clf_status encode_side(const clf_tokenizer *tok, const char *text, const char *path,
                              size_t line, int32_t **ids, int *n)
{
    clf_status st = clf_tokenizer_encode(tok, text, strlen(text), ids, n);
    if (st != CLF_OK)
        return clf_error_context(st, "%s:%zu", path, line);
    return CLF_OK;
}

/* A framing given to clf_dataset_load_framed must have every id a batch writes. */
static clf_status check_framing(const clf_framing *f)
{
    const char *missing = f->src_pad < 0     ? "source pad"
                          : f->tgt_start < 0 ? "decoder start"
                          : f->tgt_eos < 0   ? "target eos"
                          : f->tgt_pad < 0   ? "target pad"
                                             : NULL;
    if (missing)
        return clf_error(CLF_ERR_INPUT, "dataset: the framing has no %s id", missing);
    if (f->src_lang_place != CLF_LANG_NONE && f->src_lang < 0)
        return clf_error(CLF_ERR_INPUT, "dataset: the framing places a source language token "
                                        "but names no language");
    if (f->tgt_lang_forced && f->tgt_lang < 0)
        return clf_error(CLF_ERR_INPUT, "dataset: the framing forces a target language token "
                                        "but names no language");
    return CLF_OK;
}

clf_status clf_dataset_load(const clf_dataset_opts *o, clf_dataset **out)
{
    return clf_dataset_load_framed(o, NULL, out);
}

clf_status clf_dataset_load_framed(const clf_dataset_opts *o, const clf_framing *framing,
                                   clf_dataset **out)
{
    clf_status st = CLF_OK;
    raw_pairs r = {0};
    id_pool pool = {0};
    int32_t *src_ids = NULL, *tgt_ids = NULL;
    clf_dataset *d = NULL;
    if (!out || !o)
        return clf_error(CLF_ERR_INPUT, "dataset load: invalid arguments");
    *out = NULL;
    if (o->max_len < 0 || o->max_len == 1)
        return clf_error(CLF_ERR_INPUT,
                         "dataset load: max_len %d cannot hold [SOS] [EOS] (use >= 2, or 0 for "
                         "no limit)",
                         o->max_len);
    d = calloc(1, sizeof *d);
    if (!d)
        return clf_error(CLF_ERR_NOMEM, "dataset load: out of memory");
    if (framing) {
        if (!o->src_tok || !o->tgt_tok) {
            st = clf_error(CLF_ERR_INPUT, "dataset: no %s tokenizer given",
                           o->src_tok ? "target" : "source");
            goto fail;
        }
        if ((st = check_framing(framing)) != CLF_OK)
            goto fail;
        d->f = *framing;
    } else {
        /* the vocabularies' own framing: [SOS] x [EOS], [SOS] y, y [EOS], each side's [PAD] */
        clf_framing *f = &d->f;
        st = need_specials(o->src_tok, "source", &f->src_pad, &f->src_bos, &f->src_eos);
        if (st != CLF_OK)
            goto fail;
        st = need_specials(o->tgt_tok, "target", &f->tgt_pad, &f->tgt_start, &f->tgt_eos);
        if (st != CLF_OK)
            goto fail;
    }
    d->src_extra = clf_framing_source_extra(&d->f);
    d->tgt_extra = clf_framing_target_extra(&d->f);
    if ((st = raw_pairs_read(o->src_path, o->tgt_path, &r)) != CLF_OK)
        goto fail;
    const char *tgt_file = has_path(o->tgt_path) ? o->tgt_path : o->src_path;
    d->pairs = malloc((r.n ? r.n : 1) * sizeof *d->pairs);
    if (!d->pairs) {
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory for %zu pairs", o->src_path, r.n);
        goto fail;
    }
    for (size_t k = 0; k < r.n; k++) {
        int src_n = 0, tgt_n = 0;
        st = encode_side(o->src_tok, r.src[k], o->src_path, k + 1, &src_ids, &src_n);
        if (st != CLF_OK)
            goto fail;
        st = encode_side(o->tgt_tok, r.tgt[k], tgt_file, k + 1, &tgt_ids, &tgt_n);
        if (st != CLF_OK)
            goto fail;
        if (src_n == 0 || tgt_n == 0) {
            d->skipped_empty++;
        } else if (o->max_len > 0 &&
                   (src_n + d->src_extra > o->max_len || tgt_n + d->tgt_extra > o->max_len)) {
            d->skipped_long++;
        } else {
            pair *p = &d->pairs[d->n++];
            *p = (pair){r.src[k], r.tgt[k], pool.n, pool.n + (size_t)src_n, src_n, tgt_n, k + 1};
            if (pool_append(&pool, src_ids, src_n) != 0 ||
                pool_append(&pool, tgt_ids, tgt_n) != 0) {
                st = clf_error(CLF_ERR_NOMEM, "%s: out of memory for the token ids", o->src_path);
                goto fail;
            }
        }
        free(src_ids);
        free(tgt_ids);
        src_ids = tgt_ids = NULL;
    }
    if (d->n == 0) {
        st = clf_error(CLF_ERR_INPUT,
                       "%s: no sentence pairs to use (%zu lines: %zu longer than max_len %d, "
                       "%zu with an empty side)",
                       o->src_path, r.n, d->skipped_long, o->max_len, d->skipped_empty);
        goto fail;
    }
    /* the texts point into the file buffers: the dataset takes them over */
    d->data[0] = r.file[0].data;
    d->data[1] = r.file[1].data;
    r.file[0].data = r.file[1].data = NULL;
    d->ids = pool.ids;
    pool.ids = NULL;
    raw_pairs_free(&r);
    *out = d;
    return CLF_OK;
fail:
    free(src_ids);
    free(tgt_ids);
    free(pool.ids);
    raw_pairs_free(&r);
    clf_dataset_free(d);
    return st;
}

size_t clf_dataset_size(const clf_dataset *d)
{
    return d ? d->n : 0;
}

size_t clf_dataset_skipped(const clf_dataset *d)
{
    return d ? d->skipped_long + d->skipped_empty : 0;
}

size_t clf_dataset_skipped_long(const clf_dataset *d)
{
    return d ? d->skipped_long : 0;
}

size_t clf_dataset_skipped_empty(const clf_dataset *d)
{
    return d ? d->skipped_empty : 0;
}

void clf_dataset_text(const clf_dataset *d, size_t i, const char **src, const char **tgt)
{
    const pair *p = d && i < d->n ? &d->pairs[i] : NULL;
    if (src)
        *src = p ? p->src : NULL;
    if (tgt)
        *tgt = p ? p->tgt : NULL;
}

void clf_dataset_ids(const clf_dataset *d, size_t i, const int32_t **src, int *src_n,
                     const int32_t **tgt, int *tgt_n)
{
    const pair *p = d && i < d->n ? &d->pairs[i] : NULL;
    if (src)
        *src = p ? d->ids + p->src_off : NULL;
    if (src_n)
        *src_n = p ? p->src_n : 0;
    if (tgt)
        *tgt = p ? d->ids + p->tgt_off : NULL;
    if (tgt_n)
        *tgt_n = p ? p->tgt_n : 0;
}

size_t clf_dataset_line(const clf_dataset *d, size_t i)
{
    return d && i < d->n ? d->pairs[i].line : 0;
}

clf_status clf_dataset_build_vocabs(const char *src_path, const char *tgt_path, int min_freq,
                                    clf_tokenizer **src, clf_tokenizer **tgt)
{
    clf_status st = CLF_OK;
    raw_pairs r = {0};
    if (!src || !tgt)
        return clf_error(CLF_ERR_INPUT, "dataset build_vocabs: invalid arguments");
    *src = *tgt = NULL;
    if ((st = raw_pairs_read(src_path, tgt_path, &r)) != CLF_OK)
        goto fail;
    st = clf_tokenizer_build(r.src, r.n, min_freq, src);
    if (st == CLF_OK)
        st = clf_tokenizer_build(r.tgt, r.n, min_freq, tgt);
    if (st != CLF_OK) {
        clf_error_context(st, "%s", src_path); /* only out of memory: the lines are checked */
        goto fail;
    }
    raw_pairs_free(&r);
    return CLF_OK;
fail:
    raw_pairs_free(&r);
    clf_tokenizer_free(*src);
    clf_tokenizer_free(*tgt);
    *src = *tgt = NULL;
    return st;
}

/* ---- batches ----------------------------------------------------------------------- */

void clf_batch_free(clf_batch *b)
{
    if (!b)
        return;
    free(b->src);
    free(b->tgt_in);
    free(b->labels);
    free(b->index);
    memset(b, 0, sizeof *b);
}

/* Odd constant added per epoch to the seed: each epoch gets its own stream, and none of
 * them is the stream clf_rng_seed(seed) gives weight initialisation or dropout. */
#define BATCH_STREAM 0xd1b54a32d192ed03ULL

struct clf_batcher {
    const clf_dataset *d;
    int batch_size, batch_tokens, shuffle;
    uint64_t seed;
    int epoch, count;
    size_t oversized;
    size_t *order;   /* [n] pair indices in epoch order */
    size_t *start;   /* [n + 1] batch i is order[start[i] .. start[i + 1]) */
    size_t *scratch; /* [n] room to reorder order */
    size_t *start2;  /* [n + 1] shuffle_batches: batch numbers, then lengths */
    size_t *bucket;  /* [max_key + 2] counting-sort counts */
    int max_key;
};

void clf_batcher_free(clf_batcher *b)
{
    if (!b)
        return;
    free(b->order);
    free(b->start);
    free(b->scratch);
    free(b->start2);
    free(b->bucket);
    free(b);
}

/* The padded length of pair i: its longer framed side. */
static int pair_key(const clf_dataset *d, size_t i)
{
    int s = d->pairs[i].src_n + d->src_extra, t = d->pairs[i].tgt_n + d->tgt_extra;
    return s > t ? s : t;
}

/* Uniform in [0, n), n > 0, without modulo bias. */
static size_t rand_below(clf_rng *r, size_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n; /* a multiple of n */
    uint64_t x;
    do
        x = clf_rng_next(r);
    while (x >= limit);
    return (size_t)(x % n);
}

static void shuffle_indices(clf_rng *r, size_t *a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = rand_below(r, i), t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* Stable counting sort of b->order by pair_key (keys are small: at most the longest pair). */
static void sort_by_key(clf_batcher *b)
{
    size_t n = b->d->n;
    memset(b->bucket, 0, ((size_t)b->max_key + 2) * sizeof *b->bucket);
    for (size_t i = 0; i < n; i++)
        b->bucket[pair_key(b->d, b->order[i]) + 1]++;
    for (int k = 0; k <= b->max_key; k++)
        b->bucket[k + 1] += b->bucket[k];
    for (size_t i = 0; i < n; i++)
        b->scratch[b->bucket[pair_key(b->d, b->order[i])]++] = b->order[i];
    memcpy(b->order, b->scratch, n * sizeof *b->order);
}

/* Cuts b->order greedily: a batch grows while its count times its longest key stays within
 * the budget; a pair alone over the budget is a batch of one. */
static void cut_by_tokens(clf_batcher *b)
{
    size_t n = b->d->n, budget = (size_t)b->batch_tokens, count = 0, longest = 0;
    b->count = 0;
    b->oversized = 0;
    for (size_t i = 0; i < n; i++) {
        size_t key = (size_t)pair_key(b->d, b->order[i]);
        size_t l = key > longest ? key : longest;
        if (count > 0 && (count + 1) * l > budget) {
            b->start[++b->count] = i;
            count = 0;
            l = key;
        }
        if (count == 0) {
            b->start[b->count] = i;
            b->oversized += key > budget;
        }
        count++;
        longest = l;
    }
    b->start[++b->count] = n;
}

/* Puts the planned batches in random order (their contents unchanged). */
static void shuffle_batches(clf_batcher *b, clf_rng *r)
{
    size_t *perm = b->start2; /* batch numbers first, then their lengths */
    size_t nb = (size_t)b->count, pos = 0;
    for (size_t i = 0; i < nb; i++)
        perm[i] = i;
    shuffle_indices(r, perm, nb);
    for (size_t i = 0; i < nb; i++) {
        size_t from = b->start[perm[i]], len = b->start[perm[i] + 1] - from;
        memcpy(b->scratch + pos, b->order + from, len * sizeof *b->order);
        perm[i] = len; /* perm[i] is read above before being overwritten */
        pos += len;
    }
    memcpy(b->order, b->scratch, pos * sizeof *b->order);
    b->start[0] = 0;
    for (size_t i = 0; i < nb; i++)
        b->start[i + 1] = b->start[i] + perm[i];
}

clf_status clf_batcher_plan_epoch(clf_batcher *b, int epoch)
{
    if (!b)
        return clf_error(CLF_ERR_INPUT, "batcher: NULL");
    if (epoch < 0)
        return clf_error(CLF_ERR_INPUT, "batcher: epoch %d is negative", epoch);
    size_t n = b->d->n;
    clf_rng r;
    clf_rng_seed(&r, b->seed + BATCH_STREAM * ((uint64_t)epoch + 1));
    for (size_t i = 0; i < n; i++)
        b->order[i] = i;
    if (b->shuffle)
        shuffle_indices(&r, b->order, n);
    if (b->batch_tokens > 0) {
        if (b->shuffle)
            sort_by_key(b); /* ties keep the random order: new batch contents each epoch */
        cut_by_tokens(b);
        if (b->shuffle)
            shuffle_batches(b, &r);
    } else {
        size_t bs = (size_t)b->batch_size;
        b->count = (int)((n + bs - 1) / bs);
        for (int i = 0; i <= b->count; i++)
            b->start[i] = (size_t)i * bs < n ? (size_t)i * bs : n;
        b->oversized = 0;
    }
    b->epoch = epoch;
    return CLF_OK;
}

clf_status clf_batcher_create(const clf_dataset *d, int batch_size, int batch_tokens, int shuffle,
                              uint64_t seed, clf_batcher **out)
{
    clf_status st = CLF_OK;
    clf_batcher *b = NULL;
    if (!out || !d)
        return clf_error(CLF_ERR_INPUT, "batcher: invalid arguments");
    *out = NULL;
    if (batch_tokens < 0)
        return clf_error(CLF_ERR_INPUT, "batcher: batch_tokens %d is negative", batch_tokens);
    if (batch_tokens == 0 && batch_size < 1)
        return clf_error(CLF_ERR_INPUT, "batcher: batch_size must be > 0, got %d", batch_size);
    if (d->n > (size_t)INT_MAX)
        return clf_error(CLF_ERR_INPUT, "batcher: %zu pairs are more than it can index", d->n);
    b = calloc(1, sizeof *b);
    if (!b)
        return clf_error(CLF_ERR_NOMEM, "batcher: out of memory");
    b->d = d;
    b->batch_size = batch_size;
    b->batch_tokens = batch_tokens;
    b->shuffle = shuffle != 0;
    b->seed = seed;
    for (size_t i = 0; i < d->n; i++) {
        int k = pair_key(d, i);
        b->max_key = k > b->max_key ? k : b->max_key;
    }
    b->order = malloc(d->n * sizeof *b->order);
    b->scratch = malloc(d->n * sizeof *b->scratch);
    b->start = malloc((d->n + 1) * sizeof *b->start);
    b->start2 = malloc((d->n + 1) * sizeof *b->start2);
    b->bucket = malloc(((size_t)b->max_key + 2) * sizeof *b->bucket);
    if (!b->order || !b->scratch || !b->start || !b->start2 || !b->bucket) {
        st = clf_error(CLF_ERR_NOMEM, "batcher: out of memory for %zu pairs", d->n);
        goto fail;
    }
    if ((st = clf_batcher_plan_epoch(b, 0)) != CLF_OK)
        goto fail;
    *out = b;
    return CLF_OK;
fail:
    clf_batcher_free(b);
    return st;
}

int clf_batcher_count(const clf_batcher *b)
{
    return b ? b->count : 0;
}

int clf_batcher_epoch(const clf_batcher *b)
{
    return b ? b->epoch : 0;
}

size_t clf_batcher_oversized(const clf_batcher *b)
{
    return b ? b->oversized : 0;
}

clf_status clf_batcher_get(const clf_batcher *b, int i, clf_batch *out)
{
    clf_status st = CLF_OK;
    if (!out)
        return clf_error(CLF_ERR_INPUT, "batcher get: out is NULL");
    memset(out, 0, sizeof *out);
    if (!b || i < 0 || i >= b->count)
        return clf_error(CLF_ERR_INPUT, "batcher get: batch %d of %d does not exist", i,
                         b ? b->count : 0);
    const clf_dataset *d = b->d;
    const size_t *idx = b->order + b->start[i];
    int n = (int)(b->start[i + 1] - b->start[i]);
    int src_len = 0, tgt_len = 0;
    for (int k = 0; k < n; k++) {
        const pair *p = &d->pairs[idx[k]];
        src_len = p->src_n + d->src_extra > src_len ? p->src_n + d->src_extra : src_len;
        tgt_len = p->tgt_n + d->tgt_extra > tgt_len ? p->tgt_n + d->tgt_extra : tgt_len;
    }
    size_t src_cells = (size_t)n * (size_t)src_len, tgt_cells = (size_t)n * (size_t)tgt_len;
    out->src = malloc(src_cells * sizeof *out->src);
    out->tgt_in = malloc(tgt_cells * sizeof *out->tgt_in);
    out->labels = malloc(tgt_cells * sizeof *out->labels);
    out->index = malloc((size_t)n * sizeof *out->index);
    if (!out->src || !out->tgt_in || !out->labels || !out->index) {
        st = clf_error(CLF_ERR_NOMEM, "batcher get: out of memory for a batch of %d x (%d, %d)", n,
                       src_len, tgt_len);
        goto fail;
    }
    out->batch = n;
    out->src_len = src_len;
    out->tgt_len = tgt_len;
    for (int k = 0; k < n; k++) {
        const pair *p = &d->pairs[idx[k]];
        const int32_t *x = d->ids + p->src_off, *y = d->ids + p->tgt_off;
        int32_t *s = out->src + (size_t)k * src_len;
        int32_t *ti = out->tgt_in + (size_t)k * tgt_len, *lb = out->labels + (size_t)k * tgt_len;
        clf_framing_source_row(&d->f, x, p->src_n, src_len, s);
        clf_framing_target_rows(&d->f, y, p->tgt_n, tgt_len, ti, lb);
        out->src_tokens += p->src_n + d->src_extra;
        out->tgt_tokens += p->tgt_n + d->tgt_extra;
        out->index[k] = idx[k];
    }
    return CLF_OK;
fail:
    clf_batch_free(out);
    return st;
}
