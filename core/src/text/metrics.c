/* metrics.c - corpus BLEU-4 without smoothing (see clformer/metrics.h). */
#include "clformer/metrics.h"
#include "clformer/hash.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One n-gram, n <= CLF_BLEU_ORDER; the unused tail is 0 so that n-grams of one order
 * compare as plain 4-tuples. */
typedef struct gram {
    int32_t t[CLF_BLEU_ORDER];
} gram;

static int gram_cmp(const void *a, const void *b)
{
    const gram *x = a, *y = b;
    for (int k = 0; k < CLF_BLEU_ORDER; k++)
        if (x->t[k] != y->t[k])
            return x->t[k] < y->t[k] ? -1 : 1;
    return 0;
}

/* The n-grams of s[0..len) into g, sorted; returns how many (0 when len < n). */
static int sorted_grams(const int32_t *s, int len, int n, gram *g)
{
    int m = len - n + 1;
    if (m <= 0)
        return 0;
    for (int i = 0; i < m; i++)
        for (int k = 0; k < CLF_BLEU_ORDER; k++)
            g[i].t[k] = k < n ? s[i + k] : 0;
    qsort(g, (size_t)m, sizeof *g, gram_cmp);
    return m;
}

/* Sum over distinct n-grams of min(count in hyp, count in ref), by merging sorted lists. */
static int64_t clipped_matches(const gram *h, int nh, const gram *r, int nr)
{
    int64_t m = 0;
    int i = 0, j = 0;
    while (i < nh && j < nr) {
        int c = gram_cmp(&h[i], &r[j]);
        if (c < 0)
            i++;
        else if (c > 0)
            j++;
        else {
            int ci = 1, cj = 1;
            while (i + ci < nh && gram_cmp(&h[i + ci], &h[i]) == 0)
                ci++;
            while (j + cj < nr && gram_cmp(&r[j + cj], &r[j]) == 0)
                cj++;
            m += ci < cj ? ci : cj;
            i += ci;
            j += cj;
        }
    }
    return m;
}

/* Recomputes precision, bp and score from the counts, as sacrebleu's compute_bleu with
 * smooth_method='none': score = bp * exp(mean of log(precision in percent)). */
static void bleu_update(clf_bleu *b)
{
    double log_sum = 0.0;
    int zero = 0;
    for (int n = 0; n < CLF_BLEU_ORDER; n++) {
        b->precision[n] =
            b->totals[n] > 0 ? 100.0 * (double)b->matches[n] / (double)b->totals[n] : 0.0;
        if (b->precision[n] > 0.0)
            log_sum += log(b->precision[n]);
        else
            zero = 1;
    }
    if (b->hyp_len == 0)
        b->bp = 0.0;
    else if (b->hyp_len >= b->ref_len)
        b->bp = 1.0;
    else
        b->bp = exp(1.0 - (double)b->ref_len / (double)b->hyp_len);
    b->score = zero ? 0.0 : b->bp * exp(log_sum / CLF_BLEU_ORDER);
}

void clf_bleu_init(clf_bleu *b)
{
    memset(b, 0, sizeof *b);
}

clf_status clf_bleu_add(clf_bleu *b, const int32_t *hyp, int hyp_len, const int32_t *ref,
                        int ref_len)
{
    if (hyp_len < 0 || ref_len < 0 || (hyp_len > 0 && !hyp) || (ref_len > 0 && !ref))
        return clf_error(CLF_ERR_INPUT,
                         "bleu: invalid sentence pair (hypothesis length %d, reference "
                         "length %d, or NULL tokens)",
                         hyp_len, ref_len);
    gram *gh = malloc((size_t)(hyp_len > 0 ? hyp_len : 1) * sizeof *gh);
    gram *gr = malloc((size_t)(ref_len > 0 ? ref_len : 1) * sizeof *gr);
    if (!gh || !gr) {
        free(gh);
        free(gr);
        return clf_error(CLF_ERR_NOMEM, "bleu: out of memory for sentences of %d and %d tokens",
                         hyp_len, ref_len);
    }
    for (int n = 1; n <= CLF_BLEU_ORDER; n++) {
        int nh = sorted_grams(hyp, hyp_len, n, gh);
        int nr = sorted_grams(ref, ref_len, n, gr);
        b->matches[n - 1] += clipped_matches(gh, nh, gr, nr);
        b->totals[n - 1] += nh;
    }
    free(gh);
    free(gr);
    b->hyp_len += hyp_len;
    b->ref_len += ref_len;
    b->sentences++;
    bleu_update(b);
    return CLF_OK;
}

/* ---- space-separated text ---- */

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

typedef struct span {
    const char *s;
    size_t len;
} span;

/* The tokens of s (at most strlen(s)/2 + 1) into t; returns how many. */
static int split(const char *s, span *t)
{
    int n = 0;
    while (*s) {
        while (is_space(*s))
            s++;
        if (!*s)
            break;
        const char *start = s;
        while (*s && !is_space(*s))
            s++;
        t[n++] = (span){start, (size_t)(s - start)};
    }
    return n;
}

static uint64_t fnv1a(const char *s, size_t n)
{
    return clf_hash_fnv1a64(CLF_FNV1A64_OFFSET, s, n);
}

/* ids[i] = the same number for equal tokens t[i] (numbered in order of first appearance),
 * through an open-addressing table of cap entries (a power of two > n), all -1. */
static void intern(const span *t, int n, int32_t *ids, int32_t *slots, size_t cap)
{
    int32_t next = 0;
    for (int i = 0; i < n; i++) {
        size_t h = (size_t)fnv1a(t[i].s, t[i].len) & (cap - 1);
        for (;; h = (h + 1) & (cap - 1)) {
            int32_t k = slots[h];
            if (k < 0) {
                slots[h] = i;
                ids[i] = next++;
                break;
            }
            if (t[k].len == t[i].len && memcmp(t[k].s, t[i].s, t[i].len) == 0) {
                ids[i] = ids[k];
                break;
            }
        }
    }
}

clf_status clf_bleu_add_text(clf_bleu *b, const char *hyp, const char *ref)
{
    if (!hyp || !ref)
        return clf_error(CLF_ERR_INPUT, "bleu: hypothesis or reference is NULL");
    size_t lh = strlen(hyp), lr = strlen(ref);
    size_t max = lh / 2 + lr / 2 + 2; /* a token takes a byte and a separator, but the last */
    if (max > (size_t)INT32_MAX / 2)
        return clf_error(CLF_ERR_INPUT, "bleu: sentence of %zu bytes is too long", lh + lr);
    size_t cap = 16;
    while (cap <= 2 * max)
        cap *= 2;
    span *t = malloc(max * sizeof *t);
    int32_t *ids = malloc(max * sizeof *ids);
    int32_t *slots = malloc(cap * sizeof *slots);
    clf_status st;
    if (!t || !ids || !slots) {
        st = clf_error(CLF_ERR_NOMEM, "bleu: out of memory for a sentence of %zu bytes", lh + lr);
        goto done;
    }
    int nh = split(hyp, t);
    int nr = split(ref, t + nh);
    memset(slots, 0xff, cap * sizeof *slots); /* all -1 */
    intern(t, nh + nr, ids, slots, cap);
    st = clf_bleu_add(b, ids, nh, ids + nh, nr);
done:
    free(t);
    free(ids);
    free(slots);
    return st;
}

/* ---- whole corpora ---- */

clf_status clf_bleu_corpus(const int32_t *const *hyps, const int *hyp_lens,
                           const int32_t *const *refs, const int *ref_lens, size_t n, clf_bleu *out)
{
    clf_bleu b;
    clf_bleu_init(&b);
    if (n > 0 && (!hyps || !hyp_lens || !refs || !ref_lens))
        return clf_error(CLF_ERR_INPUT, "bleu: NULL corpus arrays for %zu sentences", n);
    for (size_t i = 0; i < n; i++) {
        clf_status st = clf_bleu_add(&b, hyps[i], hyp_lens[i], refs[i], ref_lens[i]);
        if (st != CLF_OK)
            return clf_error_context(st, "sentence %zu", i + 1);
    }
    *out = b;
    return CLF_OK;
}

clf_status clf_bleu_corpus_text(const char *const *hyps, const char *const *refs, size_t n,
                                clf_bleu *out)
{
    clf_bleu b;
    clf_bleu_init(&b);
    if (n > 0 && (!hyps || !refs))
        return clf_error(CLF_ERR_INPUT, "bleu: NULL corpus arrays for %zu sentences", n);
    for (size_t i = 0; i < n; i++) {
        clf_status st = clf_bleu_add_text(&b, hyps[i], refs[i]);
        if (st != CLF_OK)
            return clf_error_context(st, "sentence %zu", i + 1);
    }
    *out = b;
    return CLF_OK;
}
