/* Scoring given translations by teacher forcing (clf_translator_score): one forward pass
 * of the model over [SOS] y, the log-probabilities of y [EOS] summed. An independent path
 * from decoding's: no KV cache, the whole target at once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "translate/translator_private.h"

/* Pairs scored in one forward pass: bounds the logits buffer [B, T, V]. */
#define SCORE_BATCH 8

/* The pairs [from, to) that can be scored (tokens[i] > 0), padded into one batch; pair i's
 * sum ends with the log-probability of EOS unless eos (may be NULL) has eos[i] == 0. With a
 * forced first token (the target language), tgt[i] starts with it and it counts log-prob 0,
 * as decoding gives it. */
static clf_status score_batch(clf_translator *t, int32_t *const *src, const int *sn,
                              int32_t *const *tgt, const int *tn, const int *eos, int from, int to,
                              float *logprob, const int *tokens)
{
    const clf_model_config *mc = &t->cfg.model;
    const int V = mc->tgt_vocab;
    int rows = 0, S = 0, T = 0;
    for (int i = from; i < to; i++)
        if (tokens[i] > 0) {
            rows++;
            if (sn[i] + t->framing > S)
                S = sn[i] + t->framing;
            if (tn[i] + 1 > T)
                T = tn[i] + 1;
        }
    if (rows == 0)
        return CLF_OK;
    clf_status st = CLF_OK;
    int32_t *s = malloc((size_t)rows * S * sizeof *s), *y = malloc((size_t)rows * T * sizeof *y);
    float *logits = malloc((size_t)rows * T * V * sizeof *logits);
    if (!s || !y || !logits) {
        st = clf_error(CLF_ERR_NOMEM, "score: out of host memory");
        goto fail;
    }
    int r = 0;
    for (int i = from; i < to; i++) {
        if (tokens[i] == 0)
            continue;
        clf_framing_source_row(&t->fr, src[i], sn[i], S, s + (size_t)r * S);
        clf_framing_target_rows(&t->fr, tgt[i], tn[i], T, y + (size_t)r * T, NULL);
        r++;
    }
    const clf_forward_io io = {
        .batch = rows, .src_len = S, .tgt_len = T, .src = s, .tgt = y, .logits = logits};
    if ((st = clf_model_forward(t->model, &io)) != CLF_OK)
        goto fail;
    r = 0;
    for (int i = from; i < to; i++) {
        if (tokens[i] == 0)
            continue;
        double sum = 0.0;
        const int last = eos && !eos[i] ? tn[i] - 1 : tn[i];
        for (int p = t->forced_bos >= 0 ? 1 : 0; p <= last; p++) {
            const float *l = logits + ((size_t)r * T + p) * V;
            const int32_t label = p < tn[i] ? tgt[i][p] : t->fr.tgt_eos;
            double lse = 0.0;
            if (mc->output != CLF_OUTPUT_LOG_SOFTMAX) { /* log-softmax of the logits */
                float mx = l[0];
                for (int v = 1; v < V; v++)
                    mx = l[v] > mx ? l[v] : mx;
                double e = 0.0;
                for (int v = 0; v < V; v++)
                    e += exp((double)l[v] - mx);
                lse = mx + log(e);
            }
            sum += (double)l[label] - lse;
        }
        logprob[i] = (float)sum;
        r++;
    }
fail:
    free(s);
    free(y);
    free(logits);
    return st;
}

/* score and score_ids: text when src_text != NULL, else ids. */
static clf_status score(clf_translator *t, const char *const *src_text, const char *const *tgt_text,
                        const int32_t *const *src_ids, const int *src_lens,
                        const int32_t *const *tgt_ids, const int *tgt_lens, int n, float *logprob,
                        int *tokens, char **error)
{
    clf_status st = CLF_OK;
    int32_t **ids[2] = {NULL, NULL};
    int *lens[2] = {NULL, NULL};
    const int by_text = src_text != NULL;
    if (!t || n < 0 ||
        (n > 0 &&
         (!logprob || !tokens || !error || (by_text ? !tgt_text : !src_lens || !tgt_lens))))
        return clf_error(CLF_ERR_INPUT, "score: NULL argument or a negative count");
    if (n == 0)
        return CLF_OK;
    if ((t->cfg.model.source_language != CLF_LANG_NONE && t->fr.src_lang < 0) ||
        (t->cfg.model.target_language != CLF_TGT_LANG_NONE && t->forced_bos < 0))
        return clf_error(CLF_ERR_INPUT,
                         "score: %s needs a source and a target language "
                         "(clf_translator_set_languages; `clformer info -m DIR` lists them)",
                         t->cfg.path);
    for (int s = 0; s < 2; s++)
        if (!(ids[s] = calloc((size_t)n, sizeof *ids[s])) ||
            !(lens[s] = calloc((size_t)n, sizeof *lens[s]))) {
            st = clf_error(CLF_ERR_NOMEM, "score: out of host memory");
            goto fail;
        }
    for (int i = 0; i < n; i++) {
        error[i] = NULL;
        logprob[i] = NAN;
        tokens[i] = 0;
    }
    for (int i = 0; i < n; i++) {
        for (int s = 0; s < 2 && !error[i]; s++) {
            const char *text = by_text ? (s ? tgt_text[i] : src_text[i]) : NULL;
            if (by_text && !text) {
                if (!(error[i] = strdup("no text (NULL)")))
                    st = clf_error(CLF_ERR_NOMEM, "score: out of host memory");
            } else if (by_text)
                st = clf_translate_sentence(t, s, text, strlen(text), NULL, 0, &ids[s][i],
                                            &lens[s][i], &error[i]);
            else
                st = clf_translate_sentence(
                    t, s, NULL, 0,
                    s ? (tgt_ids ? tgt_ids[i] : NULL) : (src_ids ? src_ids[i] : NULL),
                    s ? tgt_lens[i] : src_lens[i], &ids[s][i], &lens[s][i], &error[i]);
            if (st != CLF_OK)
                goto fail;
        }
        /* the target after the forced target-language token, which decoding puts first */
        if (!error[i] && t->forced_bos >= 0) {
            int32_t *y = malloc((size_t)(lens[1][i] + 1) * sizeof *y);
            if (!y) {
                st = clf_error(CLF_ERR_NOMEM, "score: out of host memory");
                goto fail;
            }
            y[0] = t->forced_bos;
            if (lens[1][i] > 0)
                memcpy(y + 1, ids[1][i], (size_t)lens[1][i] * sizeof *y);
            free(ids[1][i]);
            ids[1][i] = y;
            lens[1][i]++;
        }
        if (!error[i] && lens[0][i] + t->framing == 0 &&
            !(error[i] = strdup("an empty source and no framing: nothing to score")))
            st = clf_error(CLF_ERR_NOMEM, "score: out of host memory");
        if (st != CLF_OK)
            goto fail;
        if (!error[i])
            tokens[i] = lens[1][i] + 1;
    }
    for (int from = 0; from < n && st == CLF_OK; from += SCORE_BATCH)
        st = score_batch(t, ids[0], lens[0], ids[1], lens[1], NULL, from,
                         n - from > SCORE_BATCH ? from + SCORE_BATCH : n, logprob, tokens);
fail:
    for (int s = 0; s < 2; s++) {
        for (int i = 0; ids[s] && i < n; i++)
            free(ids[s][i]);
        free(ids[s]);
        free(lens[s]);
    }
    if (st != CLF_OK)
        for (int i = 0; i < n; i++) {
            free(error[i]);
            error[i] = NULL;
        }
    return st;
}

clf_status clf_translator_score(clf_translator *t, const char *const *src, const char *const *tgt,
                                int n, float *logprob, int *tokens, char **error)
{
    if (n > 0 && !src)
        return clf_error(CLF_ERR_INPUT, "score: NULL argument");
    return score(t, src, tgt, NULL, NULL, NULL, NULL, n, logprob, tokens, error);
}

clf_status clf_translator_score_ids(clf_translator *t, const int32_t *const *src,
                                    const int *src_lens, const int32_t *const *tgt,
                                    const int *tgt_lens, int n, float *logprob, int *tokens,
                                    char **error)
{
    return score(t, NULL, NULL, src, src_lens, tgt, tgt_lens, n, logprob, tokens, error);
}

clf_status clf_translate_score_rows(clf_translator *t, int32_t *const *src, const int *src_lens,
                                    int32_t *const *tgt, const int *tgt_lens, const int *eos, int n,
                                    float *logprob)
{
    clf_status st = CLF_OK;
    int *use = malloc((size_t)(n > 0 ? n : 1) * sizeof *use);
    if (!use)
        return clf_error(CLF_ERR_NOMEM, "score: out of host memory");
    for (int i = 0; i < n; i++)
        use[i] = 1;
    for (int from = 0; from < n && st == CLF_OK; from += SCORE_BATCH)
        st = score_batch(t, src, src_lens, tgt, tgt_lens, eos, from,
                         n - from > SCORE_BATCH ? from + SCORE_BATCH : n, logprob, use);
    free(use);
    return st;
}
