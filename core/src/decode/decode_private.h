/* What the two decoders of decode/ share (decode.c: one batch from start to end;
 * decode_stream.c: sentences that join and leave a running batch): a sentence's finished
 * hypotheses and the rules that choose its next beams after a step (hypotheses.c). Both
 * decoders call these, so a sentence gets the same tokens and scores from either. */
#ifndef CLF_DECODE_PRIVATE_H
#define CLF_DECODE_PRIVATE_H

#include "clformer/decode.h"

/* A finished hypothesis (or, at the end, an unfinished one). */
typedef struct dec_candidate {
    int32_t *tokens;
    int len, finished;
    float logprob, score;
    float *attention; /* [len + finished, att_cols] or NULL */
} dec_candidate;

/* One sentence's finished hypotheses: room for 2K (K finished, then up to K cut at the
 * last position). */
typedef struct dec_sentence {
    dec_candidate *done;
    int n_done;
} dec_sentence;

/* A continuation: the parent beam (0..K-1 within the sentence), its token and the new sum. */
typedef struct dec_choice {
    float lp;
    int parent;
    int32_t token;
} dec_choice;

/* A sentence's K beams after the step at position t (t tokens generated before it). */
typedef struct dec_beams {
    int K, V, t;
    int last_step;   /* t + 1 is the sentence's last output position */
    float *logp;     /* [K, V] the step's log-probabilities, or NULL (greedy on the device);
                        banned ids and forced EOS are written into it */
    const float *lp; /* [K] the parents' sums; -INFINITY: a dead beam */
    int32_t dev_id;  /* greedy without logp: the device's argmax */
    /* beam search with the device's topk (logp NULL): each beam's top_k best continuations,
     * top_val [K, top_k] (the parent's sum included) and top_idx [K, top_k] */
    const float *top_val;
    const int32_t *top_idx;
    int top_k;
    /* beam search run ahead (logp NULL): the device's choices (clf_beam_args.choices) for
     * this sentence, [2K, 3] I32 (lp bits, parent, token), parent -1 past the last */
    const int32_t *choices;
    const int32_t *const *tokens;  /* [K] each parent's t tokens */
    const float *const *attention; /* [K] each parent's t + 1 attention rows, or NULL */
    int att_cols;                  /* the attention rows' length (src_len) */
} dec_beams;

/* The options both decoders refuse (CLF_ERR_INPUT, the message led by who): n_best and
 * beam, max_len, a model without room to decode, special and forced ids outside the target
 * vocabulary. */
clf_status dec_check_opts(const clf_model_config *c, const clf_decode_opts *o, const char *who);
/* Source ids [B, S] outside the source vocabulary (src NULL: none to check). */
clf_status dec_check_source(const clf_model_config *c, const int32_t *src, int B, int S,
                            const char *who);

/* How many continuations a beam search of K beams asks the device for per beam (the
 * CLF_OP_TOPK step, dec_beams.top_val): 2K plus the banned ids, which the host drops; 0
 * where the backend has no topk or that is over CLF_TOPK_MAX or the vocabulary (the step
 * then downloads every log-probability). */
int dec_device_top_k(const clf_backend_api *api, clf_backend *be, const clf_model_config *c, int K);

/* The best continuations of a sentence, best first, into out[2K]: at t = 0 a forced first
 * token (forced_bos_id) alone, log-prob 0; greedy takes the device's
 * argmax (or, with logp, the host's over the ids not banned, summed); beam search the 2K
 * best of K x V with banned ids at -inf, from logp or from the device's top_k of each beam
 * (the same choices: a beam's 2K best that are not banned are among its top_k) or, run
 * ahead, the device's own choice of them (beam_choose: the same comparisons); at the last
 * position forced_eos leaves EOS only.
 * Returns how many. */
int dec_choose(const clf_decode_opts *o, const clf_model_config *c, const dec_beams *b,
               dec_choice *out);

/* Keeps the chosen continuations: an EOS finishes a hypothesis (under CLF_BEAM_HF only
 * among the K best), the rest become the next beams, kept[0..*n_kept) (at most K, best
 * first). *finished: the sentence is done (K finished, transformers' is_done (with
 * early_stopping: K finished), greedy's EOS,
 * no live continuation, or the last position, whose live beams are then recorded cut). */
clf_status dec_settle(const clf_decode_opts *o, const dec_beams *b, dec_sentence *se,
                      const dec_choice *ch, int n, dec_choice *kept, int *n_kept, int *finished);

clf_status dec_sentence_init(dec_sentence *se, int K);
void dec_sentence_free(dec_sentence *se);

/* Moves the n_best best hypotheses of se into out[n_best], best first (fewer than asked:
 * empty ones with score -inf), sorting se. */
clf_status dec_collect(dec_sentence *se, int n_best, clf_hypothesis *out);

#endif
