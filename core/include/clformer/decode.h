/* clformer/decode.h - autoregressive decoding: greedy and beam search with a KV cache.
 *
 * The encoder runs once per batch. With the cache (the default), each decoder layer keeps
 * the keys and values of every generated position for self-attention, and the
 * cross-attention keys and values are projected once from the encoder output; a step
 * then costs work linear in the prefix length. Sentences (or, in beam search, sentences
 * with all their beams) that have finished are compacted out of the batch, so they stop
 * costing work. Without the cache, every step re-runs the whole decoder on the prefix, as
 * the tutorial's greedy_decode does (kept as the benchmark's baseline and as a check).
 *
 * Framing is the caller's: src rows are already [SOS] x [EOS] followed by pad_id; the
 * decoder starts from sos_id and a hypothesis ends at eos_id or after max_len tokens. */
#ifndef CLFORMER_DECODE_H
#define CLFORMER_DECODE_H

#include <stdint.h>

#include "clformer/export.h"
#include "clformer/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How beam search keeps and ranks hypotheses. */
typedef enum clf_beam_style {
    /* clformer's own: score = logprob / ((5 + len) / 6)^alpha (GNMT), len counting EOS; a
     * sentence is done when K hypotheses have ended with EOS. */
    CLF_BEAM_GNMT = 0,
    /* transformers' BeamSearchScorer (4.40, early_stopping=False): score = logprob /
     * len^alpha, len counting EOS; of the 2K best continuations an EOS counts only among
     * the first K; the K best finished are kept (a better one replaces the worst); a
     * sentence is done when K have finished and the worst of them is at least the best
     * continuation's logprob / (t + 1)^alpha after step t. */
    CLF_BEAM_HF = 1
} clf_beam_style;

typedef struct clf_decode_opts {
    int beam;                   /* 1: greedy (argmax on the device); K > 1: beam search */
    int n_best;                 /* hypotheses returned per sentence, 1..beam */
    float length_penalty;       /* alpha of GNMT's ((5+len)/6)^alpha; 0: raw log-prob sum */
    int max_len;                /* output tokens per sentence (EOS not counted), >= 1; it is also
                                   capped at the model's max_len - 1 (the decoder's positions) */
    int use_cache;              /* 1: KV cache (default); 0: re-run the full decoder each step */
    int sos_id, eos_id, pad_id; /* sos_id: the first decoder input (decoder_start) */
    clf_beam_style style;       /* default CLF_BEAM_GNMT */
    /* 1: the token at position max_len - 1 (the last one) can only be EOS, as transformers'
     * forced_eos_token_id does (log-prob 0 for it in beam search). Default 0. */
    int forced_eos;
    /* >= 0: the first generated token is this id, with log-prob 0, as transformers'
     * forced_bos_token_id does (the target language of M2M-100, NLLB, mBART-50). Default -1:
     * none. */
    int forced_bos_id;
    /* CLF_BEAM_HF: 1 ends a sentence as soon as beam hypotheses have finished (transformers'
     * early_stopping=True); 0 (default) as described at CLF_BEAM_HF. */
    int early_stopping;
    /* The model's banned_ids (clf_model_config) are never generated: -inf after the
     * log-softmax in beam search, excluded from the argmax in greedy decoding. */
    int want_attention; /* record cross-attention weights (last decoder layer, mean of
                           the heads) of every returned hypothesis */
    /* Greedy decoding takes the argmax on the device and sums nothing (logprob and score
     * 0). 1: the log-probabilities come down too and the chosen ids' are summed, so that
     * logprob and score are filled as beam search fills them. Beam search and models with
     * banned_ids sum anyway. Default 0. */
    int want_scores;
    /* With the cache and without want_attention (greedy: without want_scores or banned
     * ids; beam search: on a backend with CLF_OP_TOPK, CLF_OP_BEAM_CHOOSE and
     * CLF_OP_ATTENTION_KV_ROWS): how many steps run before the host reads their tokens,
     * each step's argmax or choice of beams fed to the next on the device (a sentence that
     * ends meanwhile runs on to the last of them, its extra steps dropped), so that a
     * queued backend never waits for the host between them. 0 (default): 4 on a backend
     * with CLF_OP_QUEUED, else 1 (every step). Greedy hypotheses are the same for every
     * value; beam search's have the same tokens but where two candidates are within float
     * rounding (the other sentences' rows may be multiplied in batches of another size).
     * 0..CLF_DECODE_SYNC_STEPS_MAX. */
    int sync_steps;
} clf_decode_opts;
#define CLF_DECODE_SYNC_STEPS_MAX 64

/* beam 1, n_best 1, length_penalty 0, max_len 0 (must be set), use_cache 1, the ids of
 * the model config (sos = decoder_start_id, else bos_id, else 2; eos = eos_id, else 3;
 * pad = pad_id), style GNMT, no forced EOS or first token, no attention, no greedy scores. */
CLF_API void clf_decode_opts_default(const clf_model_config *cfg, clf_decode_opts *o);

typedef struct clf_hypothesis {
    int32_t *tokens; /* [len] generated ids, without SOS and without the final EOS */
    int len;
    int finished;     /* 1: ended with EOS; 0: stopped at max_len */
    float logprob;    /* sum of the log-probabilities of the tokens (and of EOS if finished) */
    float score;      /* logprob / length penalty: what beams are ranked by */
    float *attention; /* want_attention: [len + finished, src_len], row t = the weights of
                         the step that produced token t (the last row: EOS); else NULL */
} clf_hypothesis;

typedef struct clf_decode_result {
    int batch, n_best, src_len;
    clf_hypothesis *hyps;  /* [batch * n_best]: sentence s's i-th best at s * n_best + i */
    int steps;             /* decoder steps run */
    long long token_steps; /* sum over steps of the rows the decoder ran (the work done) */
    /* The steps' backend calls (each op of a step graph, each upload, download and cache
     * copy: on a queued backend one kernel launch or transfer at least), the seconds the steps
     * took, and of those the seconds in decoding's own host code (choosing, row tables, step
     * graphs), outside the backend's calls. */
    long long step_calls;
    double step_s, host_s;
} clf_decode_result;

/* What a hypothesis of len tokens (EOS counted) has its log-probability divided by, under
 * o's length_penalty and style: 1 for alpha 0, else ((5 + len) / 6)^alpha (GNMT) or
 * len^alpha (HF). The one rule of clf_hypothesis.score. */
CLF_API float clf_decode_length_penalty(const clf_decode_opts *o, int len);

/* The most memory one clf_decode call may plan, in bytes: its KV caches (per decoder layer,
 * batch x beam hypotheses of max_len positions for self-attention, twice when beams are
 * reordered by copying, and of src_len positions for cross-attention; without the cache the
 * encoder output instead), its logits rows (batch x beam x tgt_vocab, each prefix position
 * without the cache, and their host copy when choosing on the host) and its attention rows
 * (want_attention). A larger plan is refused before anything is allocated, naming batch,
 * beam, max_len and src_len, so that a huge batch or beam fails with one line rather than
 * an allocation failure in a backend or the kernel's OOM killer. */
#define CLF_DECODE_BYTES_MAX (16ll << 30)

/* The check clf_decode makes before it allocates (o's arguments, then the plan above
 * against CLF_DECODE_BYTES_MAX), without decoding: for a caller that wants to refuse its
 * options up front, with the largest batch and source length it will decode. CLF_ERR_INPUT
 * with one line: "decode: batch 1000000 x beam 64 x max_len 255 (src_len 256) plans
 * 3905.05 GiB (self-attention caches ...), more than the limit of 16 GiB
 * (CLF_DECODE_BYTES_MAX): decode fewer sentences at once, or use a smaller beam or
 * max_len". */
CLF_API clf_status clf_decode_check_plan(const clf_model *m, int batch, int src_len,
                                         const clf_decode_opts *o);

/* Decodes a batch: src is [batch, src_len] I32 ids (pad_id-padded). Errors: bad ids or
 * lengths, or a plan over CLF_DECODE_BYTES_MAX (CLF_ERR_INPUT), backend failures. On
 * success *out must be freed with clf_decode_result_free. */
CLF_API clf_status clf_decode(clf_model *m, const int32_t *src, int batch, int src_len,
                              const clf_decode_opts *o, clf_decode_result *out);
CLF_API void clf_decode_result_free(clf_decode_result *r);

/* ---- continuous decoding ----
 * A decoding batch that sentences join and leave at every step, for a server: each step
 * first runs the encoder of the sentences waiting (as many as fit), then one decoder step
 * of every active hypothesis; a sentence leaves the batch when it is done, and its result
 * waits to be taken. Sentences of a batch may have different options (greedy and beam,
 * lengths, penalties). Each sentence is decoded by the rules clf_decode applies to it
 * (decode_private.h: the same choice of beams and scores), and its decoder rows read only
 * its own keys and values: the other sentences of a step change only the sizes of the
 * products and the padding of the attention, so its tokens equal clf_decode's except where
 * two candidates' scores are within float rounding of each other (the bound the fixtures
 * test: token-exact, scores within 1e-4).
 *
 * Each row at each step is at a position of its own: the self-attention caches are one
 * pool of rows, written a step's rows at a time in a ring of max_out steps and read through
 * the row tables of clf_attention_args.kv_rows, so the backend must support
 * CLF_OP_ATTENTION_KV_ROWS (both built-in backends do); use_cache and want_attention are
 * not available. Device memory: decoder layers x (max_rows x max_out + max_out) rows of
 * 2 d_model floats for self-attention, and decoder layers x max_rows x max_src_len rows of
 * 2 d_model for cross-attention, allocated at open. */
typedef struct clf_decode_stream clf_decode_stream;

typedef struct clf_decode_stream_opts {
    int max_rows;        /* decoder rows a step runs at most: the sum of the active
                            sentences' beams (and the most sentences active) */
    int max_src_len;     /* the longest source (framed ids) a sentence may have */
    int max_out;         /* the most output tokens of any sentence (a sentence's own max_len
                            is capped by it and by the model's max_len - 1) */
    int max_join_tokens; /* source tokens one step encodes at most (0: no limit but
                            max_rows); a sentence longer than this joins alone */
    int join_wait;       /* steps the waiting sentences may be held back so that one
                            encoder pass takes several (0: they join at the first step they
                            fit). They wait while the active rows fill at least half of
                            max_rows, their own rows are fewer than max_rows / 8 (at least
                            2), and the oldest has waited fewer than join_wait steps: a
                            lone sentence in an idle stream joins at once */
} clf_decode_stream_opts;

/* Allocates the caches. CLF_ERR_INPUT for sizes < 1, a backend without
 * CLF_OP_ATTENTION_KV_ROWS, or caches over CLF_DECODE_BYTES_MAX. */
CLF_API clf_status clf_decode_stream_open(clf_model *m, const clf_decode_stream_opts *o,
                                          clf_decode_stream **out);
/* Queues a sentence: src [src_len] framed ids, decoded with o (use_cache 1, no attention;
 * beam <= max_rows), identified by tag in clf_decode_stream_take. CLF_ERR_INPUT for what
 * clf_decode refuses and for a source longer than max_src_len; nothing is queued then. */
CLF_API clf_status clf_decode_stream_add(clf_decode_stream *s, const int32_t *src, int src_len,
                                         const clf_decode_opts *o, uint64_t tag);
/* One step: waiting sentences join (oldest first, while their beams fit in max_rows and
 * their sources in max_join_tokens, unless join_wait holds them back), then every active row
 * advances one token; sentences that finish move to the results. Nothing to do is not an error.
 * After a failure (the backend's, or memory) the stream's state is lost: free it. */
CLF_API clf_status clf_decode_stream_step(clf_decode_stream *s);
/* The oldest finished sentence: 1 with *tag and *out (batch 1, the sentence's n_best; free
 * with clf_decode_result_free), 0 when none is waiting to be taken. */
CLF_API int clf_decode_stream_take(clf_decode_stream *s, uint64_t *tag, clf_decode_result *out);
/* Drops every sentence with this tag, waiting, active or finished; returns how many. */
CLF_API int clf_decode_stream_cancel(clf_decode_stream *s, uint64_t tag);

typedef struct clf_decode_stream_state {
    int waiting, active, rows, finished; /* sentences (rows: of the next step) */
    long long steps, token_steps;        /* steps run, and the rows they ran */
} clf_decode_stream_state;
CLF_API void clf_decode_stream_get_state(const clf_decode_stream *s, clf_decode_stream_state *st);
CLF_API void clf_decode_stream_free(clf_decode_stream *s); /* NULL is fine */

#ifdef __cplusplus
}
#endif
#endif
