/* What the files of translate/ share: the translator's state and the sentence rules. */
#ifndef CLF_TRANSLATOR_PRIVATE_H
#define CLF_TRANSLATOR_PRIVATE_H

#include "clformer/backend.h"
#include "clformer/model.h"
#include "clformer/translator.h"

struct clf_translator {
    clf_config cfg;
    const clf_backend_api *api;
    clf_backend *be;
    clf_model *model;
    clf_weight_type weight_type;
    clf_tokenizer *tok[2]; /* source, target */
    clf_framing fr;        /* the model's framing; src_bos / src_eos -1: none; src_lang: the
                              source language's token (clf_translator_set_languages) */
    int32_t forced_bos;    /* the target language's token, forced first; -1: none */
    int framing;           /* tokens the source framing adds */
    clf_decode_opts dopts; /* the ids; the rest set per call */
    char vocab[2][CLF_PATH_MAX];
    char device[256];
    char note[1024];
    clf_translator_stats stats; /* the decoder steps' sums (clf_translator_get_stats) */
};

/* Loads both vocabularies (vocab_map non-empty: mapped through it) and checks them against
 * the model config (vocab_check.c). */
clf_status clf_translate_vocabs_load(clf_translator *t, const char *src, const char *tgt,
                                     const char *vocab_map);

/* A sentence of side (0 source, 1 target) as ids without the framing (sentence.c): text of
 * len bytes, or, when text is NULL, in_ids[0..in_n) checked against the vocabulary. A sentence that
 * cannot be used whole gets *why (malloc'd one-line reason) and *ids NULL, *n 0, with
 * CLF_OK; only memory and other failures return an error. */
clf_status clf_translate_sentence(const clf_translator *t, int side, const char *text, size_t len,
                                  const int32_t *in_ids, int in_n, int32_t **ids, int *n,
                                  char **why);

/* The log-probabilities of n checked rows by teacher forcing (score.c): src[i] of
 * src_lens[i] source ids (without the framing, > 0 tokens), then tgt[i] of tgt_lens[i]
 * target ids, and EOS when eos[i]; into logprob[i]. For want_scores of greedy decoding. */
clf_status clf_translate_score_rows(clf_translator *t, int32_t *const *src, const int *src_lens,
                                    int32_t *const *tgt, const int *tgt_lens, const int *eos, int n,
                                    float *logprob);

/* A call's settings (translator.c): o's, the config's generate: section for what o leaves
 * open; CLF_ERR_INPUT for a bad option. */
typedef struct call_opts {
    clf_decode_opts d; /* max_len: per batch when max_len is 0 */
    int max_len;       /* given (o or generate.max_len), else 0 */
    int max_batch;
    int score_greedy; /* want_scores with greedy decoding that sums nothing */
} call_opts;
clf_status clf_translate_resolve(const clf_translator *t, const clf_translate_opts *o,
                                 call_opts *c);
/* The output limit of a batch whose longest source has `longest` tokens (unframed): c's,
 * else 2 * longest + 10, capped at the model's max_len - 1. */
int clf_translate_max_len(const clf_translator *t, const call_opts *c, int longest);
/* h as a clf_translation_hyp: the words of its tokens (specials, the model's added specials
 * from model.specials_from on (language tokens), and ids beyond the vocabulary that a model
 * with a larger tgt_vocab may emit, left out; line breaks a word may hold made spaces) and
 * its attention over the cols columns of the framed source. */
clf_status clf_translate_fill_hyp(const clf_translator *t, const clf_hypothesis *h, int src_len,
                                  int cols, clf_translation_hyp *out);

/* malloc'd copy of the message of the last error, which is then cleared. */
char *clf_translate_take_error(void);

#endif
