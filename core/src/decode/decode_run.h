/* The state of one clf_decode call and the steps it runs (decode_steps.c), for decode.c,
 * which sets it up, runs the steps in order and collects the hypotheses.
 *
 * Device state for B sentences and beam K (slots = B*K, slot s*K + k is beam k of the
 * s-th active sentence):
 *   cross  [L, slots, S, 2d]   cross-attention k|v, projected once from the encoder output
 *   self   [L, slots, Tmax, 2d]   self-attention k|v of every generated position
 *   spare  [L, slots, Tmax, 2d]   beam search only: where reordering beams in place saves
 *                              the caches it overwrites before it has read them
 *   mask   [slots, S] I32      source key mask
 *   enc    [slots, S, d]       encoder output (only without the cache)
 * Each step runs the step graph on the active slots only. When sentences finish, their
 * slots are compacted away, so they stop costing work.
 *
 * Beams share what they have in common through row tables (clf_attention_args.kv_rows),
 * where the backend reads them (CLF_OP_ATTENTION_KV_ROWS; both built-in backends do): slot
 * i writes its position t only into its own self-cache rows, row (i, t), which nobody
 * overwrites afterwards, and its table hist[i][0..t] names the slot whose rows hold each
 * position of its history. Choosing the next beams, or compacting, then copies tables of
 * t + 1 ints instead of t + 1 cache rows per layer; the cross cache holds each sentence
 * once (slot s: sentence s), and every beam of the sentence reads that copy. A step whose
 * tables name only each slot's own rows (greedy decoding, until a sentence is compacted
 * away) reads the caches without them and uploads none. Without the tables (a backend
 * plugin without the capability) the survivors' self caches are gathered from their
 * parents in place (a slot that keeps its own cache costs no copy), the cross cache is
 * spread to every beam and compacted with the slots: the spare buffer above is for that.
 *
 * Greedy (K = 1) takes the argmax on the device and downloads one id per sentence (and,
 * with want_scores, the log-probabilities to sum); beam search downloads each beam's best
 * top_k continuations (the device's topk; log-probabilities [rows, V] on a backend without
 * it) and selects on the host (hypotheses.c, the rules decode_stream.c shares).
 *
 * Greedy decoding may run `ahead` steps (clf_decode_opts.sync_steps) without the host:
 *   gen    [max_out + 1, slots] I32   row p: the ids fed in at position p
 * the host uploads row t0 (what it knows), each step copies its row into the step graph and
 * its argmax into the next row, all on the device, and after the last of them the host
 * downloads the rows at once and settles every step as dec_advance() does, without compacting
 * in between: a sentence that ended meanwhile ran on in its slot, and its extra tokens are
 * dropped; the survivors are compacted once, with their caches' t1 + 1 positions.
 *
 * Beam search runs ahead the same way where the backend chooses beams (CLF_OP_BEAM_CHOOSE)
 * and the caches are read through the row tables:
 *   bm_ids [slots] I32, top_base [slots]   the next step's ids and the beams' sums
 *   bm_rows [slots, max_out] I32          the next step's self table, then copied over
 *                                         self_rows (the step graph reads that buffer)
 *   bm_choices [ahead, slots * 6] I32     each step's choices (clf_beam_args.choices)
 * the host uploads the tables, ids and sums of step t0, each step's topk goes to
 * beam_choose, which writes the next step's, and after the last the host downloads the
 * choices at once and settles every step from them as dec_advance() does (dec_choose takes
 * them as the host would have chosen them), without compacting in between.
 *
 * On a backend that captures and replays (CLF_OP_CAPTURE) and reads positions on the device
 * (CLF_OP_DEVICE_POS, with CLF_OP_ATTENTION_APPEND), a cached step without attention rows
 * reads its position from the device (clf_step_spec.pos_dev): its graph, and every call it
 * makes, are then the same at every position, so it is built once and recorded at its
 * first step, and each later step is a copy of the position and one replay. The rule for
 * shapes: the recording belongs to a number of active rows and to whether the step reads
 * the caches through the row tables; when either changes (a sentence leaves the batch, a
 * beam takes another's history) the graph is built and recorded again. An op the backend
 * cannot record (none of a step's on OpenCL, which keeps CLBlast's products as calls)
 * makes the capture fail: that shape's steps then run op by op, the position still on the
 * device. */
#ifndef CLF_DECODE_RUN_H
#define CLF_DECODE_RUN_H

#include "clformer/decode.h"
#include "decode/decode_private.h"
#include "graph/model_for_train_decode.h"

typedef struct dec_run {
    clf_model *m;
    const clf_backend_api *api;
    clf_backend *be;
    const clf_model_config *c;
    const clf_decode_opts *o;
    int B, K, S, slots, max_out, L, d, V, H;
    clf_buffer *self_kv[2], *cross_kv, *mask, *enc, *arena; /* self_kv[1]: the spare */
    clf_buffer *top_base;                                   /* [slots] the beams' sums */
    /* row tables (see the top): shared 1 when the backend reads them; hist[cur] [slots,
     * max_out] host, uploaded with the cross table [slots, S] each step */
    int shared;
    clf_buffer *self_rows, *cross_rows;
    int32_t *hist[2], *cross_tab;
    size_t arena_cap;
    int cur; /* which of the host state's two buffers holds the live state */
    /* host state per slot, double-buffered: the next step's is gathered from this one's */
    int32_t *tok[2]; /* [slots, max_out] generated ids */
    float *lp[2];    /* [slots] log-prob sums; -INFINITY: a dead beam */
    float *att[2];   /* [slots, max_out + 1, S] or NULL */
    int *sent;       /* [B] active index -> sentence id */
    int n_active;
    dec_sentence *sents;  /* [B] */
    const int32_t **ptok; /* [K] a sentence's parents' tokens (dec_beams) */
    const float **patt;   /* [K] their attention rows */
    float *logp;          /* [slots, V] step download (beam without top_k) */
    int top_k;            /* beam search: each beam's best top_k from the device, or 0 */
    float *top_val;       /* [slots, top_k] step download */
    int32_t *top_idx;     /* [slots, top_k] step download */
    int32_t *ids;         /* [slots * max_out] step upload */
    float *probs;         /* [slots, H, S] step attention download */
    long long token_steps;
    int steps;
    long long calls; /* backend calls so far (dev_* below) */
    double dev_s;    /* seconds inside them */
    int *from; /* [2 * slots] after a step: new slot -> old slot, then reorder_self's scratch */
    int ahead; /* steps run before the host reads their tokens (1: every step) */
    clf_buffer *gen;   /* greedy, ahead > 1: [max_out + 1, slots] I32, see the top */
    int32_t *gen_host; /* greedy, ahead > 1: [ahead, slots] the downloaded rows */
    /* beam search, ahead > 1 (see the top): the device's state, the downloaded choices, the
     * model's banned ids, and a sentence's beams while the host settles its steps */
    clf_buffer *bm_ids, *bm_rows, *bm_choices, *banned;
    int32_t *bm_host;    /* [ahead, slots * 6] */
    int32_t *bm_tok[2];  /* [K, max_out] */
    int32_t *bm_hist[2]; /* [K, max_out] */
    float *bm_lp[2];     /* [K] */
    int win_t0;          /* the first step of the run ahead now on the device */
    /* replayed steps (see the top): the step graph of the active rows, its position read
     * from pos (I32 [1], copied from row t of pos_table [max_out] = 0, 1, ... before each
     * step), built once per (rows, own tables) and recorded by the backend at its first
     * step; replay 0 where the backend cannot (or, after a refused capture, does not) */
    int replay;
    clf_buffer *pos, *pos_table;
    clf_graph rp_graph;
    clf_step_values rp_values;
    clf_capture *rp_capture;
    int rp_rows, rp_own, rp_built;
    int rp_refused; /* the backend could not record rp_graph: its ops run one by one */
} dec_run;

static inline size_t self_slot_elems(const dec_run *r)
{
    return (size_t)r->max_out * 2 * r->d;
}

static inline size_t cross_slot_elems(const dec_run *r)
{
    return (size_t)r->S * 2 * r->d;
}

/* sync_steps 0 on a queued backend: a sentence that ends runs on for up to this many - 1
 * steps, which at batch 1 costs as much as the host's waits it saves (bench/gpu.sh measures
 * 1, 4 and 8) */
#define DEC_QUEUED_SYNC_STEPS 4

/* CLOCK_MONOTONIC seconds */
double dec_now_s(void);

/* The encoder once for the B sentences (sentence s lands in slot s), its output spread to
 * each sentence's K beam slots. */
clf_status dec_run_encoder(dec_run *r, const int32_t *src);
/* Decoder step t on the active slots (chained: greedy running ahead, see the top). */
clf_status dec_run_step(dec_run *r, int t, int chained);
/* After step t: every active sentence's next beams chosen, finished hypotheses kept,
 * finished sentences dropped and the survivors' caches rebuilt. scratch: 3K choices. */
clf_status dec_advance(dec_run *r, int t, dec_choice *scratch);
/* Whether the steps are replayed (see the top), and then the position buffers, filled; the
 * replay state is dropped by dec_replay_free (before the buffers the recording names). */
clf_status dec_replay_init(dec_run *r);
void dec_replay_free(dec_run *r);
/* The steps decoding runs ahead (clf_decode_opts.sync_steps); 1 where something needs the
 * host at each step. */
int dec_steps_ahead(const dec_run *r);
/* Steps t0..t1 on the device, then their tokens (greedy) or choices (beam search)
 * downloaded at once. */
clf_status dec_run_ahead(dec_run *r, int t0, int t1);
/* Steps t0..t1 settled as dec_advance does, the survivors compacted once. scratch: 3K
 * choices. */
clf_status dec_advance_ahead(dec_run *r, int t0, int t1, dec_choice *scratch);

#endif
