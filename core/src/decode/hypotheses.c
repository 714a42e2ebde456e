/* A sentence's hypotheses and the rules that choose its next beams (decode_private.h). */
#include "decode/decode_private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

float clf_decode_length_penalty(const clf_decode_opts *o, int len)
{
    if (o->length_penalty == 0.0f)
        return 1.0f;
    if (o->style == CLF_BEAM_HF)
        return powf((float)len, o->length_penalty);
    return powf((5.0f + (float)len) / 6.0f, o->length_penalty);
}

clf_status dec_check_opts(const clf_model_config *c, const clf_decode_opts *o, const char *who)
{
    if (o->beam < 1 || o->n_best < 1 || o->n_best > o->beam)
        return clf_error(CLF_ERR_INPUT, "%s: need 1 <= n_best (%d) <= beam (%d)", who, o->n_best,
                         o->beam);
    if (o->max_len < 1)
        return clf_error(CLF_ERR_INPUT, "%s: max_len must be >= 1 (got %d)", who, o->max_len);
    if (c->max_len < 2)
        return clf_error(CLF_ERR_INPUT, "%s: model.max_len %d leaves no room to decode", who,
                         c->max_len);
    const int ids[3] = {o->sos_id, o->eos_id, o->pad_id};
    for (int i = 0; i < 3; i++)
        if (ids[i] < 0 || ids[i] >= c->tgt_vocab)
            return clf_error(CLF_ERR_INPUT,
                             "%s: special id %d is outside the target vocabulary [0, %d)", who,
                             ids[i], c->tgt_vocab);
    if (o->forced_bos_id >= c->tgt_vocab)
        return clf_error(CLF_ERR_INPUT,
                         "%s: forced first token %d is outside the target vocabulary [0, %d)", who,
                         o->forced_bos_id, c->tgt_vocab);
    if (o->sync_steps < 0 || o->sync_steps > CLF_DECODE_SYNC_STEPS_MAX)
        return clf_error(CLF_ERR_INPUT, "%s: sync_steps %d is outside [0, %d]", who, o->sync_steps,
                         CLF_DECODE_SYNC_STEPS_MAX);
    return CLF_OK;
}

clf_status dec_check_source(const clf_model_config *c, const int32_t *src, int B, int S,
                            const char *who)
{
    for (size_t i = 0; src && i < (size_t)B * S; i++)
        if (src[i] < 0 || src[i] >= c->src_vocab)
            return clf_error(CLF_ERR_INPUT,
                             "%s: source id %d (sentence %zu, position %zu) is outside the "
                             "vocabulary [0, %d)",
                             who, src[i], i / (size_t)S, i % (size_t)S, c->src_vocab);
    return CLF_OK;
}

#define TOP_BLOCK 64 /* top_choices' vocabulary blocks */

/* Keeps (x, k, v) among the best n held (*have of them), best first: an equal sum goes
 * after those held, so the order of arrival breaks ties. */
static void keep_best(dec_choice *best, int *have, int n, float x, int k, int v)
{
    if (*have == n && x <= best[n - 1].lp)
        return;
    int i = *have < n ? (*have)++ : n - 1;
    while (i > 0 && best[i - 1].lp < x) {
        best[i] = best[i - 1];
        i--;
    }
    best[i] = (dec_choice){x, k, v};
}

/* The best n of the K*V continuations (parents' log-probs plus the step's), best first;
 * equal sums by beam, then token. Dead beams (lp = -inf) give nothing. */
static int top_choices(const dec_beams *b, dec_choice *best, int n)
{
    int have = 0;
    for (int k = 0; k < b->K; k++) {
        const float base = b->lp[k];
        if (base == -INFINITY)
            continue;
        const float *lp = b->logp + (size_t)k * b->V;
        for (int v0 = 0; v0 < b->V; v0 += TOP_BLOCK) {
            const int v1 = v0 + TOP_BLOCK < b->V ? v0 + TOP_BLOCK : b->V;
            /* once n are held, a block none of whose continuations would enter (the test
             * below, NaN included) is passed over in one vectorised sweep: almost every
             * block of a vocabulary */
            if (have == n) {
                const float worst = best[n - 1].lp;
                int enters = 0;
                for (int v = v0; v < v1; v++)
                    enters |= !(base + lp[v] <= worst);
                if (!enters)
                    continue;
            }
            for (int v = v0; v < v1; v++)
                keep_best(best, &have, n, base + lp[v], k, v);
        }
    }
    return have;
}

/* top_choices over rows whose log-probabilities are 0 at EOS and -inf elsewhere (forced_eos
 * at the last position), without the rows: once n are held only EOS can enter. */
static int forced_eos_choices(const dec_beams *b, int32_t eos, dec_choice *best, int n)
{
    int have = 0;
    for (int k = 0; k < b->K; k++) {
        const float base = b->lp[k];
        if (base == -INFINITY)
            continue;
        for (int v = 0; v < b->V; v++) {
            if (have == n && v != eos) {
                if (v > eos)
                    break;
                v = eos;
            }
            keep_best(best, &have, n, base + (v == eos ? 0.0f : -INFINITY), k, v);
        }
    }
    return have;
}

static int is_banned(const clf_model_config *c, int id)
{
    for (int i = 0; i < c->n_banned_ids; i++)
        if (c->banned_ids[i] == id)
            return 1;
    return 0;
}

int dec_device_top_k(const clf_backend_api *api, clf_backend *be, const clf_model_config *c, int K)
{
    const int k = 2 * K + c->n_banned_ids;
    return K > 1 && api->topk && api->supports(be, CLF_OP_TOPK) && k <= CLF_TOPK_MAX &&
                   k <= c->tgt_vocab
               ? k
               : 0;
}

/* top_choices from the device's top_k of each beam, banned ids dropped: the sums arrive
 * best first within a beam (equal ones by token), beams in order, so ties break as there. */
static int device_choices(const clf_model_config *c, const dec_beams *b, dec_choice *best, int n)
{
    int have = 0;
    for (int k = 0; k < b->K; k++) {
        if (b->lp[k] == -INFINITY)
            continue;
        const float *val = b->top_val + (size_t)k * b->top_k;
        const int32_t *idx = b->top_idx + (size_t)k * b->top_k;
        for (int j = 0; j < b->top_k; j++)
            if (!is_banned(c, idx[j]))
                keep_best(best, &have, n, val[j], k, idx[j]);
    }
    return have;
}

/* The device's choices (clf_beam_args.choices) as top_choices' */
static int chosen_on_device(const dec_beams *b, dec_choice *out)
{
    int n = 0;
    for (const int32_t *ch = b->choices; n < 2 * b->K && ch[1] >= 0; n++, ch += 3) {
        float lp;
        memcpy(&lp, &ch[0], sizeof lp);
        out[n] = (dec_choice){lp, ch[1], ch[2]};
    }
    return n;
}

int dec_choose(const clf_decode_opts *o, const clf_model_config *c, const dec_beams *b,
               dec_choice *out)
{
    const int K = b->K;
    if (b->t == 0 && o->forced_bos_id >= 0) { /* the forced first token, log-prob 0 */
        out[0] = (dec_choice){b->lp[0], 0, o->forced_bos_id};
        return 1;
    }
    if (K == 1 && b->last_step && o->forced_eos) { /* log-prob 0, as in beam search */
        out[0] = (dec_choice){b->lp[0], 0, o->eos_id};
        return 1;
    }
    if (K == 1 && b->logp && c->n_banned_ids > 0) { /* the argmax on the host, summed */
        int best = -1;
        for (int v = 0; v < b->V; v++)
            if (!is_banned(c, v) && (best < 0 || b->logp[v] > b->logp[best]))
                best = v;
        out[0] = (dec_choice){b->lp[0] + b->logp[best], 0, best};
        return 1;
    }
    if (K == 1) { /* the device's argmax; summed when the log-probabilities came too */
        out[0] = (dec_choice){b->logp ? b->lp[0] + b->logp[b->dev_id] : 0.0f, 0, b->dev_id};
        return 1;
    }
    if (b->last_step && o->forced_eos)
        return forced_eos_choices(b, o->eos_id, out, 2 * K);
    if (b->choices)
        return chosen_on_device(b, out);
    if (!b->logp)
        return device_choices(c, b, out, 2 * K);
    for (int k = 0; k < K; k++) {
        float *lp = b->logp + (size_t)k * b->V;
        for (int i = 0; i < c->n_banned_ids; i++)
            lp[c->banned_ids[i]] = -INFINITY;
    }
    return top_choices(b, out, 2 * K);
}

/* Records parent's t tokens, then `token` unless it is < 0, as a hypothesis of se that
 * ends with EOS (finished) or is cut; its attention is the parent's first len + finished
 * rows. */
static clf_status add_candidate(const clf_decode_opts *o, const dec_beams *b, dec_sentence *se,
                                int parent, int32_t token, int finished, float logprob)
{
    const int len = b->t + (token >= 0);
    const float score = logprob / clf_decode_length_penalty(o, len + finished);
    int slot_i = se->n_done;
    if (o->style == CLF_BEAM_HF && se->n_done >= b->K) {
        /* transformers keeps the K best: a better one replaces the worst */
        int worst = 0;
        for (int i = 1; i < se->n_done; i++)
            if (se->done[i].score < se->done[worst].score)
                worst = i;
        if (!(score > se->done[worst].score))
            return CLF_OK;
        free(se->done[worst].tokens);
        free(se->done[worst].attention);
        slot_i = worst;
        se->n_done--;
    }
    dec_candidate *cd = &se->done[slot_i];
    memset(cd, 0, sizeof *cd);
    cd->tokens = malloc(sizeof(int32_t) * (size_t)(len > 0 ? len : 1));
    if (!cd->tokens)
        return clf_error(CLF_ERR_NOMEM, "decode: out of host memory");
    memcpy(cd->tokens, b->tokens[parent], sizeof(int32_t) * (size_t)b->t);
    if (token >= 0)
        cd->tokens[b->t] = token;
    cd->len = len;
    cd->finished = finished;
    cd->logprob = logprob;
    cd->score = score;
    if (b->attention) {
        size_t n = (size_t)(len + finished) * b->att_cols;
        cd->attention = malloc(sizeof(float) * (n ? n : 1));
        if (!cd->attention) {
            free(cd->tokens);
            cd->tokens = NULL;
            return clf_error(CLF_ERR_NOMEM, "decode: out of host memory");
        }
        memcpy(cd->attention, b->attention[parent], sizeof(float) * n);
    }
    se->n_done++;
    return CLF_OK;
}

/* transformers' BeamHypotheses.is_done after step t: K finished and, with
 * early_stopping=False, none of the live continuations (the best has log-prob best_lp, t + 1
 * tokens) can beat the worst of them at its current length. */
static int hf_done(const clf_decode_opts *o, int K, const dec_sentence *se, float best_lp, int t)
{
    if (se->n_done < K)
        return 0;
    if (o->early_stopping) /* early_stopping=True: K finished are enough */
        return 1;
    float worst = se->done[0].score;
    for (int i = 1; i < se->n_done; i++)
        if (se->done[i].score < worst)
            worst = se->done[i].score;
    return worst >= best_lp / clf_decode_length_penalty(o, t + 1);
}

clf_status dec_settle(const clf_decode_opts *o, const dec_beams *b, dec_sentence *se,
                      const dec_choice *ch, int n, dec_choice *kept, int *n_kept, int *finished)
{
    const int K = b->K, hf = o->style == CLF_BEAM_HF && K > 1;
    int nk = 0;
    clf_status st;
    for (int i = 0; i < n && nk < K && (hf || se->n_done < K); i++) {
        if (ch[i].token == o->eos_id) {
            if (hf && i >= K) /* transformers: only an EOS among the K best counts */
                continue;
            if ((st = add_candidate(o, b, se, ch[i].parent, -1, 1, ch[i].lp)) != CLF_OK)
                return st;
            continue;
        }
        kept[nk++] = ch[i];
    }
    int done =
        nk == 0 || (hf ? hf_done(o, K, se, n > 0 ? ch[0].lp : -INFINITY, b->t) : se->n_done >= K);
    if (!done && b->last_step) {
        for (int k = 0; k < nk; k++)
            if ((st = add_candidate(o, b, se, kept[k].parent, kept[k].token, 0, kept[k].lp)) !=
                CLF_OK)
                return st;
        done = 1;
    }
    *n_kept = nk;
    *finished = done;
    return CLF_OK;
}

clf_status dec_sentence_init(dec_sentence *se, int K)
{
    se->n_done = 0;
    se->done = calloc((size_t)2 * K, sizeof *se->done);
    return se->done ? CLF_OK : clf_error(CLF_ERR_NOMEM, "decode: out of host memory");
}

void dec_sentence_free(dec_sentence *se)
{
    for (int i = 0; se->done && i < se->n_done; i++) {
        free(se->done[i].tokens);
        free(se->done[i].attention);
    }
    free(se->done);
    se->done = NULL;
    se->n_done = 0;
}

static int by_score_desc(const void *a, const void *b)
{
    const dec_candidate *x = a, *y = b;
    return (x->score < y->score) - (x->score > y->score);
}

clf_status dec_collect(dec_sentence *se, int n_best, clf_hypothesis *out)
{
    qsort(se->done, (size_t)se->n_done, sizeof *se->done, by_score_desc);
    for (int i = 0; i < n_best; i++) {
        clf_hypothesis *h = &out[i];
        if (i >= se->n_done) { /* fewer hypotheses than asked: empty, -inf */
            *h = (clf_hypothesis){.logprob = -INFINITY, .score = -INFINITY};
            h->tokens = calloc(1, sizeof(int32_t));
            if (!h->tokens)
                return clf_error(CLF_ERR_NOMEM, "decode: out of host memory");
            continue;
        }
        dec_candidate *cd = &se->done[i]; /* ownership moves to the result */
        *h = (clf_hypothesis){.tokens = cd->tokens,
                              .len = cd->len,
                              .finished = cd->finished,
                              .logprob = cd->logprob,
                              .score = cd->score,
                              .attention = cd->attention};
        cd->tokens = NULL;
        cd->attention = NULL;
    }
    return CLF_OK;
}
