/* Greedy and beam-search decoding with a KV cache (see clformer/decode.h).
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
 * with want_scores, the log-probabilities to sum); beam search downloads log-probabilities
 * [rows, V] and selects on the host (hypotheses.c, the rules decode_stream.c shares).
 *
 * Greedy decoding may run `ahead` steps (clf_decode_opts.sync_steps) without the host:
 *   gen    [max_out + 1, slots] I32   row p: the ids fed in at position p
 * the host uploads row t0 (what it knows), each step copies its row into the step graph and
 * its argmax into the next row, all on the device, and after the last of them the host
 * downloads the rows at once and settles every step as advance() does, without compacting
 * in between: a sentence that ended meanwhile ran on in its slot, and its extra tokens are
 * dropped; the survivors are compacted once, with their caches' t1 + 1 positions. */
#include "clformer/decode.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decode/decode_private.h"
#include "graph/model_for_train_decode.h"

void clf_decode_opts_default(const clf_model_config *cfg, clf_decode_opts *o)
{
    /* translate's rule (no vocabulary here: a built one's ids); with no vocabulary it has
     * every id, so it cannot fail */
    clf_framing f;
    (void)clf_model_framing(cfg, NULL, &f);
    *o = (clf_decode_opts){.beam = 1,
                           .n_best = 1,
                           .length_penalty = 0.0f,
                           .max_len = 0,
                           .use_cache = 1,
                           .sos_id = f.tgt_start,
                           .eos_id = f.tgt_eos,
                           .style = CLF_BEAM_GNMT,
                           .forced_eos = 0,
                           .forced_bos_id = -1,
                           .early_stopping = 0,
                           .pad_id = cfg->pad_id,
                           .want_attention = 0};
}

typedef struct run {
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
    long long calls;   /* backend calls so far (dev_* below) */
    double dev_s;      /* seconds inside them */
    int ahead;         /* greedy steps run before the host reads their tokens (1: every step) */
    clf_buffer *gen;   /* ahead > 1: [max_out + 1, slots] I32, see the top */
    int32_t *gen_host; /* ahead > 1: [ahead, slots] the downloaded rows */
} run;

/* ---- backend calls, counted and timed (clf_decode_result.step_calls, host_s) ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static clf_status dev_upload(run *r, clf_ptr dst, const void *src, size_t bytes)
{
    const double t0 = now_s();
    const clf_status st = clf_op_upload(r->api, r->be, dst, src, bytes);
    r->dev_s += now_s() - t0;
    r->calls++;
    return st;
}

static clf_status dev_download(run *r, void *dst, clf_ptr src, size_t bytes)
{
    const double t0 = now_s();
    const clf_status st = clf_op_download(r->api, r->be, dst, src, bytes);
    r->dev_s += now_s() - t0;
    r->calls++;
    return st;
}

static clf_status dev_copy(run *r, clf_ptr dst, clf_ptr src, size_t bytes)
{
    const double t0 = now_s();
    const clf_status st = clf_op_copy(r->api, r->be, dst, src, bytes);
    r->dev_s += now_s() - t0;
    r->calls++;
    return st;
}

/* g's ops, one backend call each */
static clf_status dev_run(run *r, const clf_graph *g)
{
    const double t0 = now_s();
    const clf_status st = clf_graph_run(g, r->api, r->be, r->arena);
    r->dev_s += now_s() - t0;
    r->calls += g->n_nodes;
    return st;
}

static size_t self_slot_elems(const run *r)
{
    return (size_t)r->max_out * 2 * r->d;
}

static size_t cross_slot_elems(const run *r)
{
    return (size_t)r->S * 2 * r->d;
}

/* The caches as the step graph sees them; tables 1: read through the row tables */
static clf_kv_cache self_view(const run *r, int tables)
{
    return (clf_kv_cache){.base = {r->self_kv[0], 0},
                          .bytes = (size_t)r->L * r->slots * self_slot_elems(r) * 4,
                          .slots = r->slots,
                          .len = r->max_out,
                          .rows = {r->self_rows, 0},
                          .rows_ld = tables ? r->max_out : 0};
}

static clf_kv_cache cross_view(const run *r, int tables)
{
    return (clf_kv_cache){.base = {r->cross_kv, 0},
                          .bytes = (size_t)r->L * r->slots * cross_slot_elems(r) * 4,
                          .slots = r->slots,
                          .len = r->S,
                          .rows = {r->cross_rows, 0},
                          .rows_ld = tables ? r->S : 0};
}

/* Runs graph g with its arena (grown when needed). */
static clf_status ensure_arena(run *r, const clf_graph *g)
{
    return clf_graph_reserve_arena(g, r->api, r->be, &r->arena, &r->arena_cap, "decode");
}

/* ---- device copies: compaction and beam reordering ---- */

/* Copies `elems` floats of every layer's block from slot `from` to slot `to` of a cache
 * laid out [L, slots, slot_elems] (src and dst buffers may be the same). */
static clf_status copy_slot(run *r, clf_buffer *dst, clf_buffer *src, size_t slot_elems, int layers,
                            int to, int from, size_t elems)
{
    for (int l = 0; l < layers; l++) {
        size_t base = (size_t)l * r->slots * slot_elems;
        clf_status st = dev_copy(r, (clf_ptr){dst, 4 * (base + (size_t)to * slot_elems)},
                                 (clf_ptr){src, 4 * (base + (size_t)from * slot_elems)}, 4 * elems);
        if (st != CLF_OK)
            return clf_error_context(st, "decode: cache copy");
    }
    return CLF_OK;
}

/* Reorders the self caches of slots 0..n-1 in place: slot i takes the first len positions
 * of slot from[i]'s cache. Slots are written in increasing order, so a source s that is
 * itself rewritten (from[s] != s) before a later slot i > s reads it is first saved into
 * the spare (save: n ints of scratch). Compaction alone (greedy: from[i] >= i) saves
 * nothing, and a slot with from[i] == i (every slot of a greedy step in which no sentence
 * ends) is not copied at all. */
static clf_status reorder_self(run *r, const int *from, int n, int len, int *save)
{
    const size_t elems = (size_t)len * 2 * r->d;
    clf_status st;
    memset(save, 0, sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        if (from[i] < i && from[from[i]] != from[i])
            save[from[i]] = 1;
    for (int s = 0; s < n; s++)
        if (save[s] && (st = copy_slot(r, r->self_kv[1], r->self_kv[0], self_slot_elems(r), r->L, s,
                                       s, elems)) != CLF_OK)
            return st;
    for (int i = 0; i < n; i++) {
        const int s = from[i];
        if (s != i &&
            (st = copy_slot(r, r->self_kv[0], s < n && save[s] ? r->self_kv[1] : r->self_kv[0],
                            self_slot_elems(r), r->L, i, s, elems)) != CLF_OK)
            return st;
    }
    return CLF_OK;
}

/* ---- the encoder ---- */

/* Uploads the key masks (ids != pad) of `per` slots per sentence into slots 0.. */
static clf_status upload_masks(run *r, const int32_t *src, int per)
{
    const size_t S = (size_t)r->S, n = (size_t)r->B * per * S;
    int32_t *mask = malloc(sizeof(int32_t) * n);
    if (!mask)
        return clf_error(CLF_ERR_NOMEM, "decode: out of host memory");
    for (int s = 0; s < r->B; s++)
        for (int k = 0; k < per; k++)
            for (size_t j = 0; j < S; j++)
                mask[((size_t)s * per + k) * S + j] = src[(size_t)s * S + j] != r->o->pad_id;
    clf_status st = dev_upload(r, (clf_ptr){r->mask, 0}, mask, sizeof(int32_t) * n);
    free(mask);
    return st;
}

/* Runs the encoder once for the B sentences (sentence s lands in slot s), then spreads
 * each sentence to its K beam slots. */
static clf_status run_encoder(run *r, const int32_t *src)
{
    clf_graph g;
    int v_src;
    const size_t S = (size_t)r->S;
    clf_kv_cache cross = cross_view(r, r->shared);
    clf_status st = upload_masks(r, src, 1); /* the encoder reads mask rows 0..B-1 */
    if (st != CLF_OK)
        return st;
    if ((st = clf_model_build_encoder_graph(r->m, r->B, r->S, (clf_ptr){r->mask, 0}, &cross,
                                            (clf_ptr){r->enc, 0}, &g, &v_src)) != CLF_OK)
        return st;
    if ((st = ensure_arena(r, &g)) == CLF_OK &&
        (st = dev_upload(r, clf_graph_ptr(&g, r->arena, v_src), src, sizeof(int32_t) * r->B * S)) ==
            CLF_OK &&
        (st = dev_run(r, &g)) != CLF_OK)
        st = clf_error_context(st, "decode: encoder");
    clf_graph_free(&g);
    if (st != CLF_OK || r->K == 1)
        return st;
    if (r->shared) /* every beam reads its sentence's slot through the cross table */
        return upload_masks(r, src, r->K);
    /* Sentence s (slot s) to its K beams (slots s*K .. s*K+K-1), last sentence first so
     * that no source is overwritten before it is read (s*K + k >= s). */
    for (int s = r->B - 1; s >= 0; s--)
        for (int k = r->K - 1; k >= 0; k--) {
            int to = s * r->K + k;
            if (to == s)
                continue;
            if ((st = copy_slot(r, r->cross_kv, r->cross_kv, cross_slot_elems(r), r->L, to, s,
                                cross_slot_elems(r))) != CLF_OK ||
                (r->enc &&
                 (st = copy_slot(r, r->enc, r->enc, S * r->d, 1, to, s, S * r->d)) != CLF_OK))
                return st;
        }
    return upload_masks(r, src, r->K);
}

/* ---- hypotheses ---- */

/* ---- one step ---- */

/* The row tables of step t for the active slots 0..rows-1: slot i's position t is its own
 * row, its history what advance() gave it; every beam of active sentence a reads the
 * cross cache of its sentence (slot r->sent[a], where the encoder put it). Returns in
 * *own whether every slot reads only its own rows (greedy decoding until a sentence is
 * compacted away): then the step reads the caches without the tables, which are not
 * uploaded (on a GPU each upload waits for the device). */
static clf_status upload_tables(run *r, int rows, int t, int *own)
{
    int32_t *hist = r->hist[r->cur];
    *own = 1;
    for (int i = 0; i < rows; i++) {
        hist[(size_t)i * r->max_out + t] = i;
        for (int j = 0; j < r->S; j++)
            r->cross_tab[(size_t)i * r->S + j] = r->sent[i / r->K];
        if (r->sent[i / r->K] != i)
            *own = 0;
        for (int p = 0; p < t && *own; p++)
            *own = hist[(size_t)i * r->max_out + p] == i;
    }
    if (*own)
        return CLF_OK;
    clf_status st = dev_upload(r, (clf_ptr){r->self_rows, 0}, hist,
                               sizeof(int32_t) * (size_t)rows * r->max_out);
    if (st == CLF_OK)
        st = dev_upload(r, (clf_ptr){r->cross_rows, 0}, r->cross_tab,
                        sizeof(int32_t) * (size_t)rows * r->S);
    return st;
}

/* The step graph's output (clf_step_spec.log_probs): greedy's argmax ids; each beam's best
 * top_k for beam search where the device has topk, else log-probabilities (for greedy with
 * banned ids too: the argmax on the host); both for greedy with want_scores. */
static int log_probs_mode(const run *r)
{
    if (r->top_k)
        return 3;
    if (!r->logp)
        return 0;
    return r->K == 1 && r->c->n_banned_ids == 0 ? 2 : 1;
}

/* Runs the decoder on the active slots at position t; fills r->ids' download (greedy:
 * r->ids[row] = next id) or r->logp (beam), and appends attention rows. chained (greedy
 * running ahead): the ids come from row t of r->gen and the argmax goes to row t + 1,
 * nothing to or from the host. */
static clf_status run_step(run *r, int t, int chained)
{
    const int rows = r->n_active * r->K, cur = r->cur;
    int own = 1; /* no tables, or tables that name only the slots' own rows */
    clf_status st = r->shared ? upload_tables(r, rows, t, &own) : CLF_OK;
    if (st != CLF_OK)
        return st;
    clf_step_spec spec = {.rows = rows,
                          .pos = t,
                          .src_len = r->S,
                          .src_mask = {r->mask, 0},
                          .self = self_view(r, !own),
                          .cross = cross_view(r, !own),
                          .log_probs = log_probs_mode(r),
                          .top_k = r->top_k,
                          .top_base = {r->top_base, 0},
                          .want_attention = r->o->want_attention,
                          .use_cache = r->o->use_cache,
                          .enc = {r->enc, 0}};
    clf_step_values v;
    clf_graph g;
    if ((st = clf_model_build_step_graph(r->m, &spec, &g, &v)) != CLF_OK)
        return st;
    /* the ids fed in: the last token (cache) or the whole prefix (no cache) */
    const int T = r->o->use_cache ? 1 : t + 1;
    if (chained) {
        const size_t row = sizeof(int32_t) * (size_t)r->slots;
        if ((st = ensure_arena(r, &g)) != CLF_OK ||
            (st = dev_copy(r, clf_graph_ptr(&g, r->arena, v.ids), (clf_ptr){r->gen, row * t},
                           sizeof(int32_t) * rows)) != CLF_OK)
            goto done;
        if ((st = dev_run(r, &g)) != CLF_OK) {
            st = clf_error_context(st, "decode: step %d", t);
            goto done;
        }
        st = dev_copy(r, (clf_ptr){r->gen, row * (t + 1)}, clf_graph_ptr(&g, r->arena, v.out),
                      sizeof(int32_t) * rows);
        goto counted;
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < T; j++) {
            int pos = t - T + 1 + j; /* 0 is SOS, p >= 1 is generated token p-1 */
            r->ids[(size_t)i * T + j] =
                pos == 0 ? r->o->sos_id : r->tok[cur][(size_t)i * r->max_out + pos - 1];
        }
    if ((st = ensure_arena(r, &g)) != CLF_OK ||
        (st = dev_upload(r, clf_graph_ptr(&g, r->arena, v.ids), r->ids,
                         sizeof(int32_t) * rows * T)) != CLF_OK ||
        (r->top_k && (st = dev_upload(r, (clf_ptr){r->top_base, 0}, r->lp[cur],
                                      sizeof(float) * rows)) != CLF_OK))
        goto done;
    if ((st = dev_run(r, &g)) != CLF_OK) {
        st = clf_error_context(st, "decode: step %d", t);
        goto done;
    }
    if (r->top_k) { /* each beam's top_k: values in out, ids in next_ids */
        const size_t n = (size_t)rows * r->top_k;
        st = dev_download(r, r->top_val, clf_graph_ptr(&g, r->arena, v.out), sizeof(float) * n);
        if (st == CLF_OK)
            st = dev_download(r, r->top_idx, clf_graph_ptr(&g, r->arena, v.next_ids),
                              sizeof(int32_t) * n);
    } else {
        if (r->logp)
            st = dev_download(r, r->logp, clf_graph_ptr(&g, r->arena, v.out),
                              sizeof(float) * rows * r->V);
        /* the device's argmax: next_ids beside the log-probabilities, else out itself */
        if (st == CLF_OK && (v.next_ids >= 0 || !r->logp))
            st = dev_download(r, r->ids,
                              clf_graph_ptr(&g, r->arena, v.next_ids >= 0 ? v.next_ids : v.out),
                              sizeof(int32_t) * rows);
    }
    if (st == CLF_OK && v.attention >= 0) {
        /* [rows, H, T, S]: only the last query row (position t) is this step's */
        st = dev_download(r, r->probs, clf_graph_ptr(&g, r->arena, v.attention),
                          sizeof(float) * rows * r->H * T * r->S);
        for (int i = 0; st == CLF_OK && i < rows; i++) {
            float *dst = r->att[cur] + ((size_t)i * (r->max_out + 1) + t) * r->S;
            for (int j = 0; j < r->S; j++) {
                float sum = 0.0f;
                for (int h = 0; h < r->H; h++)
                    sum += r->probs[(((size_t)i * r->H + h) * T + T - 1) * r->S + j];
                dst[j] = sum / (float)r->H;
            }
        }
    }
counted:
    r->token_steps += rows;
    r->steps++;
done:
    clf_graph_free(&g);
    return st;
}

/* A surviving sentence's K slots moved from slot `from` on to slot `to` on (to < from): its
 * cross cache (not with the tables: it stays in the sentence's slot), mask and encoder
 * rows. */
static clf_status move_source_rows(run *r, int to, int from)
{
    clf_status st = CLF_OK;
    for (int k = 0; k < r->K && st == CLF_OK; k++)
        if ((r->shared || (st = copy_slot(r, r->cross_kv, r->cross_kv, cross_slot_elems(r), r->L,
                                          to + k, from + k, cross_slot_elems(r))) == CLF_OK) &&
            (st = copy_slot(r, r->mask, r->mask, (size_t)r->S, 1, to + k, from + k,
                            (size_t)r->S)) == CLF_OK &&
            r->enc)
            st = copy_slot(r, r->enc, r->enc, (size_t)r->S * r->d, 1, to + k, from + k,
                           (size_t)r->S * r->d);
    return st;
}

/* The self caches of the n surviving slots, positions 0..len-1: slot i's are slot
 * from[i]'s, through its table or its cache rows. scratch: n ints. */
static clf_status gather_self(run *r, const int *from, int n, int len, int *scratch)
{
    const int cur = r->cur, nxt = 1 - cur;
    if (r->shared)
        for (int i = 0; i < n; i++)
            memcpy(r->hist[nxt] + (size_t)i * r->max_out,
                   r->hist[cur] + (size_t)from[i] * r->max_out, sizeof(int32_t) * (size_t)len);
    else if (r->o->use_cache)
        return reorder_self(r, from, n, len, scratch);
    return CLF_OK;
}

/* After step t: chooses every active sentence's next beams (hypotheses.c), records
 * finished hypotheses, drops finished sentences and rebuilds the caches for the
 * survivors. scratch: 3K choices. */
static clf_status advance(run *r, int t, dec_choice *scratch)
{
    const int K = r->K, cur = r->cur, nxt = 1 - cur;
    int n_next = 0; /* active sentences after this step */
    dec_choice *kept = scratch + 2 * K;
    clf_status st = CLF_OK;
    /* new slot -> old slot, for the gather; then reorder_self's scratch */
    int *from = malloc(sizeof(int) * 2 * (size_t)r->slots);
    if (!from)
        return clf_error(CLF_ERR_NOMEM, "decode: out of host memory");
    for (int a = 0; a < r->n_active; a++) {
        const int s = r->sent[a];
        dec_sentence *se = &r->sents[s];
        for (int k = 0; k < K; k++) {
            const size_t slot = (size_t)a * K + k;
            r->ptok[k] = r->tok[cur] + slot * r->max_out;
            r->patt[k] = r->att[cur] ? r->att[cur] + slot * (r->max_out + 1) * r->S : NULL;
        }
        const dec_beams b = {.K = K,
                             .V = r->V,
                             .t = t,
                             .last_step = t + 1 >= r->max_out,
                             .logp = r->logp ? r->logp + (size_t)a * K * r->V : NULL,
                             .lp = r->lp[cur] + (size_t)a * K,
                             .dev_id = r->ids[a],
                             .top_val = r->top_k ? r->top_val + (size_t)a * K * r->top_k : NULL,
                             .top_idx = r->top_k ? r->top_idx + (size_t)a * K * r->top_k : NULL,
                             .top_k = r->top_k,
                             .tokens = r->ptok,
                             .attention = r->att[cur] ? r->patt : NULL,
                             .att_cols = r->S};
        int n = dec_choose(r->o, r->c, &b, scratch), nk, finished;
        if ((st = dec_settle(r->o, &b, se, scratch, n, kept, &nk, &finished)) != CLF_OK)
            goto done;
        if (finished)
            continue;
        const int nb = n_next * K;     /* this sentence's first slot after compaction */
        for (int k = 0; k < nk; k++) { /* the live continuations: slot nb + k from parent */
            const int parent = a * K + kept[k].parent, to = nb + k;
            from[to] = parent;
            int32_t *dt = r->tok[nxt] + (size_t)to * r->max_out;
            memcpy(dt, r->tok[cur] + (size_t)parent * r->max_out, sizeof(int32_t) * (size_t)t);
            dt[t] = kept[k].token;
            r->lp[nxt][to] = kept[k].lp;
            if (r->att[cur])
                memcpy(r->att[nxt] + (size_t)to * (r->max_out + 1) * r->S,
                       r->att[cur] + (size_t)parent * (r->max_out + 1) * r->S,
                       sizeof(float) * (size_t)(t + 1) * r->S);
        }
        for (int k = nk; k < K; k++) { /* fewer live continuations than beams */
            from[nb + k] = from[nb];
            r->lp[nxt][nb + k] = -INFINITY;
            memcpy(r->tok[nxt] + (size_t)(nb + k) * r->max_out,
                   r->tok[nxt] + (size_t)nb * r->max_out, sizeof(int32_t) * (size_t)(t + 1));
        }
        if (nb != a * K && (st = move_source_rows(r, nb, a * K)) != CLF_OK)
            goto done;
        r->sent[n_next++] = s;
    }
    /* the self caches of the survivors (positions 0..t): their parents' */
    if ((st = gather_self(r, from, n_next * K, t + 1, from + r->slots)) != CLF_OK)
        goto done;
    r->n_active = n_next;
    r->cur = nxt;
done:
    free(from);
    return st;
}

/* Greedy steps t0..t1 run ahead (run_ahead): settles each active sentence's steps in order
 * from the downloaded rows, as advance() does, until it ends; then compacts the survivors
 * once. scratch: 3 choices. */
static clf_status advance_ahead(run *r, int t0, int t1, dec_choice *scratch)
{
    const int cur = r->cur, nxt = 1 - cur;
    int n_next = 0;
    dec_choice *kept = scratch + 2;
    clf_status st = CLF_OK;
    int *from = malloc(sizeof(int) * 2 * (size_t)r->slots);
    if (!from)
        return clf_error(CLF_ERR_NOMEM, "decode: out of host memory");
    for (int a = 0; a < r->n_active; a++) {
        const int s = r->sent[a];
        int32_t *tok = r->tok[cur] + (size_t)a * r->max_out;
        int finished = 0;
        r->ptok[0] = tok;
        for (int t = t0; t <= t1 && !finished; t++) {
            const dec_beams b = {.K = 1,
                                 .V = r->V,
                                 .t = t,
                                 .last_step = t + 1 >= r->max_out,
                                 .lp = r->lp[cur] + a,
                                 .dev_id = r->gen_host[(size_t)(t - t0) * r->slots + a],
                                 .tokens = r->ptok,
                                 .att_cols = r->S};
            int n = dec_choose(r->o, r->c, &b, scratch), nk;
            if ((st = dec_settle(r->o, &b, &r->sents[s], scratch, n, kept, &nk, &finished)) !=
                CLF_OK)
                goto done;
            if (!finished) {
                tok[t] = kept[0].token;
                r->lp[cur][a] = kept[0].lp;
            }
        }
        if (finished)
            continue;
        from[n_next] = a;
        memcpy(r->tok[nxt] + (size_t)n_next * r->max_out, tok, sizeof(int32_t) * (size_t)(t1 + 1));
        r->lp[nxt][n_next] = r->lp[cur][a];
        if (n_next != a && (st = move_source_rows(r, n_next, a)) != CLF_OK)
            goto done;
        r->sent[n_next++] = s;
    }
    if ((st = gather_self(r, from, n_next, t1 + 1, from + r->slots)) != CLF_OK)
        goto done;
    r->n_active = n_next;
    r->cur = nxt;
done:
    free(from);
    return st;
}

/* Greedy steps t0..t1 (t1 - t0 < r->ahead) on the device, each step's argmax the next
 * one's input, then their tokens downloaded at once into r->gen_host. */
static clf_status run_ahead(run *r, int t0, int t1)
{
    const int rows = r->n_active;
    for (int i = 0; i < rows; i++)
        r->ids[i] = t0 == 0 ? r->o->sos_id : r->tok[r->cur][(size_t)i * r->max_out + t0 - 1];
    const size_t row = sizeof(int32_t) * (size_t)r->slots;
    clf_status st = dev_upload(r, (clf_ptr){r->gen, row * t0}, r->ids, sizeof(int32_t) * rows);
    for (int t = t0; t <= t1 && st == CLF_OK; t++)
        st = run_step(r, t, 1);
    if (st == CLF_OK)
        st = dev_download(r, r->gen_host, (clf_ptr){r->gen, row * (t0 + 1)},
                          row * (size_t)(t1 - t0 + 1));
    return st;
}

/* The steps greedy decoding runs ahead (clf_decode_opts.sync_steps): 1 (every step) where
 * something needs the host at each step. */
static int steps_ahead(const run *r)
{
    const clf_decode_opts *o = r->o;
    if (r->K != 1 || r->logp || o->want_attention || !o->use_cache)
        return 1;
    if (o->sync_steps > 0)
        return o->sync_steps;
    return r->api->supports(r->be, CLF_OP_QUEUED) ? 8 : 1;
}

/* ---- results ---- */

static clf_status collect(run *r, clf_decode_result *out)
{
    const int N = r->o->n_best;
    out->batch = r->B;
    out->n_best = N;
    out->src_len = r->S;
    out->steps = r->steps;
    out->token_steps = r->token_steps;
    out->hyps = calloc((size_t)r->B * N, sizeof *out->hyps);
    if (!out->hyps)
        return clf_error(CLF_ERR_NOMEM, "decode: out of host memory");
    for (int s = 0; s < r->B; s++) {
        clf_status st = dec_collect(&r->sents[s], N, out->hyps + (size_t)s * N);
        if (st != CLF_OK)
            return st;
    }
    return CLF_OK;
}

void clf_decode_result_free(clf_decode_result *r)
{
    if (!r || !r->hyps)
        return;
    for (int i = 0; i < r->batch * r->n_best; i++) {
        free(r->hyps[i].tokens);
        free(r->hyps[i].attention);
    }
    free(r->hyps);
    r->hyps = NULL;
}

/* ---- setup and teardown ---- */

/* "12.34 GiB" or "5.67 MiB", for the plan's message */
static const char *plan_bytes(double bytes, char *buf, size_t size)
{
    const int big = bytes >= (double)(1ll << 30);
    snprintf(buf, size, "%.2f %s", bytes / (double)(1ll << (big ? 30 : 20)), big ? "GiB" : "MiB");
    return buf;
}

/* The memory a decode of B sentences of S source positions plans (clformer/decode.h,
 * CLF_DECODE_BYTES_MAX), in double so that no product overflows; refused over the limit. The
 * sizes are those clf_decode allocates below. */
static clf_status check_plan(const clf_model_config *c, int shared, int B, int S,
                             const clf_decode_opts *o)
{
    const double slots = (double)B * o->beam, L = c->decoder_layers, d = c->d_model;
    const int max_out = o->max_len < c->max_len - 1 ? o->max_len : c->max_len - 1;
    const double self =
        o->use_cache ? L * slots * max_out * 2.0 * d * 4.0 * (o->beam > 1 && !shared ? 2.0 : 1.0)
                     : slots * S * d * 4.0; /* the encoder output instead */
    const double cross = L * slots * S * 2.0 * d * 4.0;
    const double host_logits = o->beam > 1 || c->n_banned_ids > 0 || o->want_scores;
    const double logits =
        slots * (o->use_cache ? 1.0 : max_out) * c->tgt_vocab * 4.0 * (1.0 + host_logits);
    const double attention =
        o->want_attention
            ? slots * S * 4.0 *
                  (2.0 * (max_out + 1) + (double)c->heads * (o->use_cache ? 1 : max_out))
            : 0.0;
    const double total = self + cross + logits + attention;
    if (total <= (double)CLF_DECODE_BYTES_MAX && slots <= INT_MAX)
        return CLF_OK;
    char b_total[32], b_self[32], b_cross[32], b_logits[32], b_att[32], limit[32];
    return clf_error(
        CLF_ERR_INPUT,
        "decode: batch %d x beam %d x max_len %d (src_len %d) plans %s (%s %s: decoder layers x "
        "batch x beam x %s; cross-attention caches %s: decoder layers x batch x beam x src_len "
        "x 2 d_model; logits %s: batch x beam x tgt_vocab %d; attention rows %s), more than the "
        "limit of %s (CLF_DECODE_BYTES_MAX): decode fewer sentences at once, or use a smaller "
        "beam or max_len",
        B, o->beam, max_out, S, plan_bytes(total, b_total, sizeof b_total),
        o->use_cache ? "self-attention caches" : "encoder output",
        plan_bytes(self, b_self, sizeof b_self),
        o->use_cache ? "max_len x 2 d_model" : "src_len x d_model",
        plan_bytes(cross, b_cross, sizeof b_cross), plan_bytes(logits, b_logits, sizeof b_logits),
        c->tgt_vocab, plan_bytes(attention, b_att, sizeof b_att),
        plan_bytes((double)CLF_DECODE_BYTES_MAX, limit, sizeof limit));
}

static clf_status check_args(const clf_model_config *c, const int32_t *src, int B, int S,
                             const clf_decode_opts *o)
{
    if (B < 1 || S < 1)
        return clf_error(CLF_ERR_INPUT, "decode: empty batch (batch %d, src_len %d)", B, S);
    if (S > c->max_len)
        return clf_error(CLF_ERR_INPUT,
                         "decode: source length %d exceeds model.max_len %d (the "
                         "positional-encoding table)",
                         S, c->max_len);
    clf_status st = dec_check_opts(c, o, "decode");
    return st != CLF_OK ? st : dec_check_source(c, src, B, S, "decode");
}

clf_status clf_decode_check_plan(const clf_model *m, int batch, int src_len,
                                 const clf_decode_opts *o)
{
    const clf_backend_api *api;
    clf_backend *be;
    if (!m || !o)
        return clf_error(CLF_ERR_INPUT, "decode: no model or options to check");
    clf_model_backend_of(m, &api, &be);
    const clf_model_config *c = clf_model_config_of(m);
    clf_status st = check_args(c, NULL, batch, src_len, o);
    return st != CLF_OK ? st
                        : check_plan(c, o->use_cache && api->supports(be, CLF_OP_ATTENTION_KV_ROWS),
                                     batch, src_len, o);
}

static void run_free(run *r)
{
    clf_buffer *bufs[] = {r->self_kv[0], r->self_kv[1], r->cross_kv,   r->mask,     r->enc,
                          r->arena,      r->self_rows,  r->cross_rows, r->top_base, r->gen};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            r->api->free(r->be, bufs[i]);
    for (int i = 0; i < 2; i++) {
        free(r->tok[i]);
        free(r->lp[i]);
        free(r->att[i]);
        free(r->hist[i]);
    }
    free(r->cross_tab);
    for (int s = 0; r->sents && s < r->B; s++)
        dec_sentence_free(&r->sents[s]);
    free(r->sents);
    free(r->ptok);
    free(r->patt);
    free(r->sent);
    free(r->logp);
    free(r->top_val);
    free(r->top_idx);
    free(r->ids);
    free(r->probs);
    free(r->gen_host);
}

static clf_status alloc_device(run *r, clf_buffer **b, size_t bytes, const char *what)
{
    clf_status st = r->api->alloc(r->be, bytes ? bytes : 4, b);
    if (st != CLF_OK)
        return clf_error_context(st, "decode: %s (%zu bytes)", what, bytes);
    return CLF_OK;
}

clf_status clf_decode(clf_model *m, const int32_t *src, int B, int S, const clf_decode_opts *o,
                      clf_decode_result *out)
{
    memset(out, 0, sizeof *out);
    run r = {.m = m, .o = o, .B = B, .S = S};
    clf_model_backend_of(m, &r.api, &r.be);
    r.c = clf_model_config_of(m);
    r.shared = o->use_cache && r.api->supports(r.be, CLF_OP_ATTENTION_KV_ROWS);
    clf_status st = check_args(r.c, src, B, S, o);
    if (st != CLF_OK || (st = check_plan(r.c, r.shared, B, S, o)) != CLF_OK)
        return st;
    r.K = o->beam;
    r.slots = B * r.K;
    r.L = r.c->decoder_layers;
    r.d = r.c->d_model;
    r.V = r.c->tgt_vocab;
    r.H = r.c->heads;
    /* positions 0..max_out-1 are fed in (0 is SOS), so max_out tokens come out */
    r.max_out = o->max_len < r.c->max_len - 1 ? o->max_len : r.c->max_len - 1;
    const size_t slots = (size_t)r.slots;
    if (o->use_cache) {
        size_t self_bytes = (size_t)r.L * slots * self_slot_elems(&r) * 4;
        if ((st = alloc_device(&r, &r.self_kv[0], self_bytes, "self-attention cache")) != CLF_OK ||
            (r.K > 1 && !r.shared &&
             (st = alloc_device(&r, &r.self_kv[1], self_bytes, "self-attention cache")) != CLF_OK))
            goto fail;
        if (r.shared && ((st = alloc_device(&r, &r.self_rows, slots * r.max_out * 4,
                                            "self-attention row table")) != CLF_OK ||
                         (st = alloc_device(&r, &r.cross_rows, slots * S * 4,
                                            "cross-attention row table")) != CLF_OK))
            goto fail;
    } else if ((st = alloc_device(&r, &r.enc, slots * S * r.d * 4, "encoder output")) != CLF_OK) {
        goto fail;
    }
    if ((st = alloc_device(&r, &r.cross_kv, (size_t)r.L * slots * cross_slot_elems(&r) * 4,
                           "cross-attention cache")) != CLF_OK ||
        (st = alloc_device(&r, &r.mask, slots * S * 4, "source mask")) != CLF_OK)
        goto fail;
    r.sents = calloc((size_t)B, sizeof *r.sents);
    r.sent = malloc(sizeof(int) * (size_t)B);
    r.ids = malloc(sizeof(int32_t) * slots * (size_t)r.max_out);
    r.ptok = malloc(sizeof *r.ptok * (size_t)r.K);
    r.patt = malloc(sizeof *r.patt * (size_t)r.K);
    if (!r.sents || !r.sent || !r.ids || !r.ptok || !r.patt)
        goto nomem;
    for (int s = 0; s < B; s++) {
        r.sent[s] = s;
        if (dec_sentence_init(&r.sents[s], r.K) != CLF_OK)
            goto nomem;
    }
    r.n_active = B;
    for (int i = 0; i < 2; i++) {
        r.tok[i] = calloc(slots * (size_t)r.max_out, sizeof(int32_t));
        r.lp[i] = malloc(sizeof(float) * slots);
        if (!r.tok[i] || !r.lp[i])
            goto nomem;
        /* zeroed: the positions past t are uploaded too, and not read */
        if (r.shared && !(r.hist[i] = calloc(slots * (size_t)r.max_out, sizeof(int32_t))))
            goto nomem;
        if (o->want_attention &&
            !(r.att[i] = calloc(slots * (size_t)(r.max_out + 1) * S, sizeof(float))))
            goto nomem;
    }
    if (r.shared && !(r.cross_tab = malloc(sizeof(int32_t) * slots * (size_t)S)))
        goto nomem;
    /* beam 0 of each sentence starts alive, the others dead until the first step fans out */
    for (size_t i = 0; i < slots; i++)
        r.lp[0][i] = i % (size_t)r.K == 0 ? 0.0f : -INFINITY;
    /* beam search chooses from each beam's top_k (the device's topk) or from the
     * log-probabilities, as greedy does with banned ids or scores */
    r.top_k = dec_device_top_k(r.api, r.be, r.c, r.K);
    if (r.top_k && (!(r.top_val = malloc(sizeof(float) * slots * (size_t)r.top_k)) ||
                    !(r.top_idx = malloc(sizeof(int32_t) * slots * (size_t)r.top_k))))
        goto nomem;
    if (r.top_k && (st = alloc_device(&r, &r.top_base, slots * 4, "beam sums")) != CLF_OK)
        goto fail;
    if (((r.K > 1 && !r.top_k) || (r.K == 1 && (r.c->n_banned_ids > 0 || o->want_scores))) &&
        !(r.logp = malloc(sizeof(float) * slots * (size_t)r.V)))
        goto nomem;
    if (o->want_attention && !(r.probs = malloc(sizeof(float) * slots * (size_t)r.H * S *
                                                (size_t)(o->use_cache ? 1 : r.max_out))))
        goto nomem;
    if ((r.ahead = steps_ahead(&r)) > 1) {
        if (!(r.gen_host = malloc(sizeof(int32_t) * slots * (size_t)r.ahead)))
            goto nomem;
        if ((st = alloc_device(&r, &r.gen, sizeof(int32_t) * slots * (size_t)(r.max_out + 1),
                               "greedy ids")) != CLF_OK)
            goto fail;
    }
    dec_choice *scratch = malloc(sizeof(dec_choice) * 3 * (size_t)r.K);
    if (!scratch)
        goto nomem;
    if ((st = run_encoder(&r, src)) != CLF_OK)
        goto fail_scratch;
    const long long calls0 = r.calls;
    const double t0 = now_s(), dev0 = r.dev_s;
    for (int t = 0; t < r.max_out && r.n_active > 0;) {
        /* the forced first token is the host's: no step feeds the device's argmax on */
        const int t1 = (t == 0 && o->forced_bos_id >= 0) || r.ahead == 1
                           ? t
                           : (t + r.ahead < r.max_out ? t + r.ahead : r.max_out) - 1;
        if (t1 == t &&
            ((st = run_step(&r, t, 0)) != CLF_OK || (st = advance(&r, t, scratch)) != CLF_OK))
            goto fail_scratch;
        if (t1 > t && ((st = run_ahead(&r, t, t1)) != CLF_OK ||
                       (st = advance_ahead(&r, t, t1, scratch)) != CLF_OK))
            goto fail_scratch;
        t = t1 + 1;
    }
    const double sync0 = now_s();
    st = r.api->synchronize(r.be);
    r.dev_s += now_s() - sync0;
    if (st != CLF_OK || (st = collect(&r, out)) != CLF_OK)
        goto fail_scratch;
    out->step_calls = r.calls - calls0;
    out->step_s = now_s() - t0;
    out->host_s = out->step_s - (r.dev_s - dev0);
    free(scratch);
    run_free(&r);
    return CLF_OK;
fail_scratch:
    free(scratch);
    goto fail;
nomem:
    st = clf_error(CLF_ERR_NOMEM, "decode: out of host memory");
fail:
    clf_decode_result_free(out);
    run_free(&r);
    return st;
}
