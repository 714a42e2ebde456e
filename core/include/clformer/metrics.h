/* clformer/metrics.h - corpus BLEU (Papineni et al., 2002), the standard BLEU-4.
 *
 * For a corpus of hypothesis/reference pairs (one reference per sentence):
 *   matches[n] = sum over sentences of the clipped count of hypothesis n-grams
 *                (each n-gram counts at most as often as it occurs in the reference)
 *   totals[n]  = sum over sentences of max(0, hyp_len - n + 1)
 *   p_n        = matches[n] / totals[n]                               n = 1..4
 *   BP         = 1 if c >= r, else exp(1 - r/c)    c = total hypothesis length,
 *                                                  r = total reference length (BP = 0 if c = 0)
 *   BLEU       = 100 * BP * exp((log p_1 + log p_2 + log p_3 + log p_4) / 4)
 * No smoothing: BLEU is 0 when any p_n is 0 (or has no n-grams at all). This is
 * sacrebleu's corpus_bleu(hyps, [refs], tokenize='none', smooth_method='none') on
 * space-separated tokens, the number MT papers and Marian/fairseq validation report.
 *
 * Usage: one call for a corpus, or accumulate sentence by sentence (e.g. during validation):
 *     clf_bleu b;
 *     clf_bleu_init(&b);
 *     for each pair: clf_bleu_add(&b, hyp, hyp_len, ref, ref_len);
 *     printf("%.2f\n", b.score);   (every field is up to date after each add)
 */
#ifndef CLFORMER_METRICS_H
#define CLFORMER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "clformer/export.h"
#include "clformer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CLF_BLEU_ORDER 4 /* n-grams of 1..4 tokens: BLEU-4 */

typedef struct clf_bleu {
    double score;                     /* BLEU in [0, 100] */
    double precision[CLF_BLEU_ORDER]; /* p_1..p_4 in percent (100 * matches / totals), as
                                         sacrebleu prints them; 0 where totals is 0 */
    double bp;                        /* brevity penalty in [0, 1] */
    int64_t hyp_len, ref_len;         /* c and r: tokens over the corpus */
    int64_t matches[CLF_BLEU_ORDER];  /* clipped n-gram matches, n = 1..4 */
    int64_t totals[CLF_BLEU_ORDER];   /* hypothesis n-grams, n = 1..4 */
    int64_t sentences;
} clf_bleu;

/* An empty corpus: every field 0. */
CLF_API void clf_bleu_init(clf_bleu *b);

/* Adds one pair of token-id sequences (lengths >= 0; a pointer may be NULL when its length
 * is 0) and updates every field. CLF_ERR_INPUT for a negative length or NULL data,
 * CLF_ERR_NOMEM when the n-gram tables cannot be allocated (b is then unchanged). */
CLF_API clf_status clf_bleu_add(clf_bleu *b, const int32_t *hyp, int hyp_len, const int32_t *ref,
                                int ref_len);

/* The same for two NUL-terminated strings of tokens separated by ASCII white space
 * (space, tab, newline, CR, VT, FF): tokens are compared byte for byte. */
CLF_API clf_status clf_bleu_add_text(clf_bleu *b, const char *hyp, const char *ref);

/* Corpus BLEU of n pairs: hyps[i] (hyp_lens[i] ids) against refs[i] (ref_lens[i] ids). */
CLF_API clf_status clf_bleu_corpus(const int32_t *const *hyps, const int *hyp_lens,
                                   const int32_t *const *refs, const int *ref_lens, size_t n,
                                   clf_bleu *out);

/* Corpus BLEU of n pairs of space-separated strings (see clf_bleu_add_text). */
CLF_API clf_status clf_bleu_corpus_text(const char *const *hyps, const char *const *refs, size_t n,
                                        clf_bleu *out);

#ifdef __cplusplus
}
#endif
#endif
