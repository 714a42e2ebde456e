/* The steps of one clf_decode call (decode_run.h): the backend calls, counted and timed;
 * the caches' copies; the encoder; a decoder step; choosing and compacting after it; greedy
 * steps run ahead of the host. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decode/decode_run.h"

/* ---- backend calls, counted and timed (clf_decode_result.step_calls, host_s) ---- */

double dec_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static clf_status dev_upload(dec_run *r, clf_ptr dst, const void *src, size_t bytes)
{
    const double t0 = dec_now_s();
    const clf_status st = clf_op_upload(r->api, r->be, dst, src, bytes);
    r->dev_s += dec_now_s() - t0;
    r->calls++;
    return st;
}

static clf_status dev_download(dec_run *r, void *dst, clf_ptr src, size_t bytes)
{
    const double t0 = dec_now_s();
    const clf_status st = clf_op_download(r->api, r->be, dst, src, bytes);
    r->dev_s += dec_now_s() - t0;
    r->calls++;
    return st;
}

static clf_status dev_copy(dec_run *r, clf_ptr dst, clf_ptr src, size_t bytes)
{
    const double t0 = dec_now_s();
    const clf_status st = clf_op_copy(r->api, r->be, dst, src, bytes);
    r->dev_s += dec_now_s() - t0;
    r->calls++;
    return st;
}

/* g's ops, one backend call each */
static clf_status dev_run(dec_run *r, const clf_graph *g)
{
    const double t0 = dec_now_s();
    const clf_status st = clf_graph_run(g, r->api, r->be, r->arena);
    r->dev_s += dec_now_s() - t0;
    r->calls += g->n_nodes;
    return st;
}

/* ---- replayed steps (decode_run.h) ---- */

clf_status dec_replay_init(dec_run *r)
{
    const clf_backend_api *api = r->api;
    r->replay = r->o->use_cache && !r->o->want_attention && api->supports(r->be, CLF_OP_CAPTURE) &&
                api->supports(r->be, CLF_OP_DEVICE_POS) &&
                api->supports(r->be, CLF_OP_ATTENTION_APPEND);
    if (!r->replay)
        return CLF_OK;
    int32_t *table = malloc(sizeof(int32_t) * (size_t)r->max_out);
    if (!table)
        return clf_error(CLF_ERR_NOMEM, "decode: out of host memory");
    for (int i = 0; i < r->max_out; i++)
        table[i] = i;
    clf_status st = api->alloc(r->be, 4, &r->pos);
    if (st == CLF_OK)
        st = api->alloc(r->be, sizeof(int32_t) * (size_t)r->max_out, &r->pos_table);
    if (st != CLF_OK)
        st = clf_error_context(st, "decode: the step's position");
    else
        st = clf_op_upload(api, r->be, (clf_ptr){r->pos_table, 0}, table,
                           sizeof(int32_t) * (size_t)r->max_out);
    free(table);
    return st;
}

/* The recording and the graph it was made from */
void dec_replay_free(dec_run *r)
{
    clf_op_capture_free(r->api, r->be, r->rp_capture);
    r->rp_capture = NULL;
    if (r->rp_built)
        clf_graph_free(&r->rp_graph);
    r->rp_built = 0;
}

/* r->rp_graph for spec's rows and tables (own): kept from the last step when they are the
 * same, else built with the position on the device (and recorded at its first run). */
static clf_status replay_graph(dec_run *r, clf_step_spec *spec, int own)
{
    if (r->rp_built && r->rp_rows == spec->rows && r->rp_own == own)
        return CLF_OK;
    dec_replay_free(r);
    spec->pos = 0;
    spec->pos_dev = (clf_ptr){r->pos, 0};
    spec->pos_max = r->max_out - 1;
    clf_status st = clf_model_build_step_graph(r->m, spec, &r->rp_graph, &r->rp_values);
    if (st != CLF_OK)
        return st;
    r->rp_built = 1;
    r->rp_rows = spec->rows;
    r->rp_own = own;
    r->rp_refused = 0;
    return CLF_OK;
}

/* Step t of the replayed graph g: its position copied in, then the recording replayed (made
 * first, at the graph's first step; where the backend refuses it, g's ops one by one). */
static clf_status replay_run(dec_run *r, const clf_graph *g, int t)
{
    clf_status st = dev_copy(r, (clf_ptr){r->pos, 0}, (clf_ptr){r->pos_table, 4 * (size_t)t}, 4);
    if (st != CLF_OK || r->rp_refused)
        return st != CLF_OK ? st : dev_run(r, g);
    const double t0 = dec_now_s();
    if (!r->rp_capture && (st = clf_op_capture_begin(r->api, r->be)) == CLF_OK) {
        const clf_status run = clf_graph_run(g, r->api, r->be, r->arena);
        st = clf_op_capture_end(r->api, r->be, run == CLF_OK ? &r->rp_capture : NULL);
        st = run != CLF_OK ? run : st;
        r->calls += 2 + g->n_nodes; /* begin, the ops recorded, end */
    }
    r->dev_s += dec_now_s() - t0;
    if (st == CLF_ERR_UNSUPPORTED) { /* an op the backend cannot record: op by op */
        r->rp_refused = 1;
        return dev_run(r, g);
    }
    if (st != CLF_OK)
        return st;
    const double t1 = dec_now_s();
    st = clf_op_replay(r->api, r->be, r->rp_capture);
    r->dev_s += dec_now_s() - t1;
    r->calls++;
    return st;
}

/* The caches as the step graph sees them; tables 1: read through the row tables */
static clf_kv_cache self_view(const dec_run *r, int tables)
{
    return (clf_kv_cache){.base = {r->self_kv[0], 0},
                          .bytes = (size_t)r->L * r->slots * self_slot_elems(r) * 4,
                          .slots = r->slots,
                          .len = r->max_out,
                          .rows = {r->self_rows, 0},
                          .rows_ld = tables ? r->max_out : 0};
}

static clf_kv_cache cross_view(const dec_run *r, int tables)
{
    return (clf_kv_cache){.base = {r->cross_kv, 0},
                          .bytes = (size_t)r->L * r->slots * cross_slot_elems(r) * 4,
                          .slots = r->slots,
                          .len = r->S,
                          .rows = {r->cross_rows, 0},
                          .rows_ld = tables ? r->S : 0};
}

/* Runs graph g with its arena (grown when needed). */
static clf_status ensure_arena(dec_run *r, const clf_graph *g)
{
    return clf_graph_reserve_arena(g, r->api, r->be, &r->arena, &r->arena_cap, "decode");
}

/* ---- device copies: compaction and beam reordering ---- */

/* Copies `elems` floats of every layer's block from slot `from` to slot `to` of a cache
 * laid out [L, slots, slot_elems] (src and dst buffers may be the same). */
static clf_status copy_slot(dec_run *r, clf_buffer *dst, clf_buffer *src, size_t slot_elems,
                            int layers, int to, int from, size_t elems)
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
static clf_status reorder_self(dec_run *r, const int *from, int n, int len, int *save)
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
static clf_status upload_masks(dec_run *r, const int32_t *src, int per)
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
clf_status dec_run_encoder(dec_run *r, const int32_t *src)
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

/* ---- one step ---- */

/* The row tables of step t for the active slots 0..rows-1: slot i's position t is its own
 * row, its history what advance() gave it; every beam of active sentence a reads the
 * cross cache of its sentence (slot r->sent[a], where the encoder put it). Returns in
 * *own whether every slot reads only its own rows (greedy decoding until a sentence is
 * compacted away): then the step reads the caches without the tables, which are not
 * uploaded (on a GPU each upload waits for the device). */
static clf_status upload_tables(dec_run *r, int rows, int t, int *own)
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
static int log_probs_mode(const dec_run *r)
{
    if (r->top_k)
        return 3;
    if (!r->logp)
        return 0;
    return r->K == 1 && r->c->n_banned_ids == 0 ? 2 : 1;
}

/* g's ops at position t: replayed (see the top) or one backend call each */
static clf_status step_run(dec_run *r, const clf_graph *g, int t)
{
    return r->replay ? replay_run(r, g, t) : dev_run(r, g);
}

/* Beam step t run ahead (see the top): its ids from bm_ids, then the beams chosen after it
 * on the device into the next step's ids, sums (top_base) and self table, its choices into
 * row t - win_t0 of bm_choices. */
static clf_status beam_step_chained(dec_run *r, const clf_graph *g, const clf_step_values *v, int t)
{
    const size_t rows = (size_t)r->n_active * r->K;
    clf_status st;
    if ((st = ensure_arena(r, g)) != CLF_OK ||
        (st = dev_copy(r, clf_graph_ptr(g, r->arena, v->ids), (clf_ptr){r->bm_ids, 0},
                       sizeof(int32_t) * rows)) != CLF_OK)
        return st;
    if ((st = step_run(r, g, t)) != CLF_OK)
        return clf_error_context(st, "decode: step %d", t);
    const clf_beam_args a = {
        .val = clf_graph_ptr(g, r->arena, v->out),
        .idx = clf_graph_ptr(g, r->arena, v->next_ids),
        .base = {r->top_base, 0},
        .banned = {r->banned, 0},
        .choices = {r->bm_choices, sizeof(int32_t) * 6 * (size_t)r->slots * (t - r->win_t0)},
        .ids = {r->bm_ids, 0},
        .rows_in = {r->self_rows, 0},
        .rows_out = {r->bm_rows, 0},
        .n = r->n_active,
        .K = r->K,
        .top_k = r->top_k,
        .n_banned = r->c->n_banned_ids,
        .eos_id = r->o->eos_id,
        .ld = r->max_out,
        .pos = t};
    const double t0 = dec_now_s();
    st = clf_op_beam_choose(r->api, r->be, &a);
    r->dev_s += dec_now_s() - t0;
    r->calls++;
    if (st != CLF_OK)
        return clf_error_context(st, "decode: step %d", t);
    return dev_copy(r, (clf_ptr){r->self_rows, 0}, (clf_ptr){r->bm_rows, 0},
                    sizeof(int32_t) * rows * r->max_out);
}

/* Runs the decoder on the active slots at position t; fills r->ids' download (greedy:
 * r->ids[row] = next id), r->top_val and r->top_idx or r->logp (beam), and appends
 * attention rows. chained (running ahead), nothing to or from the host: greedy takes its
 * ids from row t of r->gen and puts the argmax into row t + 1; beam search,
 * beam_step_chained. */
clf_status dec_run_step(dec_run *r, int t, int chained)
{
    const int rows = r->n_active * r->K, cur = r->cur, beam_chained = chained && r->K > 1;
    int own = !beam_chained; /* no tables, or tables that name only the slots' own rows */
    /* a beam step run ahead reads the tables beam_choose left on the device */
    clf_status st = r->shared && !beam_chained ? upload_tables(r, rows, t, &own) : CLF_OK;
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
    clf_graph built, *g = &built; /* built for this step, or the replayed one */
    if (r->replay && (st = replay_graph(r, &spec, own)) != CLF_OK)
        return st;
    if (r->replay) {
        g = &r->rp_graph;
        v = r->rp_values;
    } else if ((st = clf_model_build_step_graph(r->m, &spec, &built, &v)) != CLF_OK)
        return st;
    /* the ids fed in: the last token (cache) or the whole prefix (no cache) */
    const int T = r->o->use_cache ? 1 : t + 1;
    if (beam_chained) {
        st = beam_step_chained(r, g, &v, t);
        if (st != CLF_OK)
            goto done;
        goto counted;
    }
    if (chained) {
        const size_t row = sizeof(int32_t) * (size_t)r->slots;
        if ((st = ensure_arena(r, g)) != CLF_OK ||
            (st = dev_copy(r, clf_graph_ptr(g, r->arena, v.ids), (clf_ptr){r->gen, row * t},
                           sizeof(int32_t) * rows)) != CLF_OK)
            goto done;
        if ((st = step_run(r, g, t)) != CLF_OK) {
            st = clf_error_context(st, "decode: step %d", t);
            goto done;
        }
        st = dev_copy(r, (clf_ptr){r->gen, row * (t + 1)}, clf_graph_ptr(g, r->arena, v.out),
                      sizeof(int32_t) * rows);
        goto counted;
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < T; j++) {
            int pos = t - T + 1 + j; /* 0 is SOS, p >= 1 is generated token p-1 */
            r->ids[(size_t)i * T + j] =
                pos == 0 ? r->o->sos_id : r->tok[cur][(size_t)i * r->max_out + pos - 1];
        }
    if ((st = ensure_arena(r, g)) != CLF_OK ||
        (st = dev_upload(r, clf_graph_ptr(g, r->arena, v.ids), r->ids,
                         sizeof(int32_t) * rows * T)) != CLF_OK ||
        (r->top_k && (st = dev_upload(r, (clf_ptr){r->top_base, 0}, r->lp[cur],
                                      sizeof(float) * rows)) != CLF_OK))
        goto done;
    if ((st = step_run(r, g, t)) != CLF_OK) {
        st = clf_error_context(st, "decode: step %d", t);
        goto done;
    }
    if (r->top_k) { /* each beam's top_k: values in out, ids in next_ids */
        const size_t n = (size_t)rows * r->top_k;
        st = dev_download(r, r->top_val, clf_graph_ptr(g, r->arena, v.out), sizeof(float) * n);
        if (st == CLF_OK)
            st = dev_download(r, r->top_idx, clf_graph_ptr(g, r->arena, v.next_ids),
                              sizeof(int32_t) * n);
    } else {
        if (r->logp)
            st = dev_download(r, r->logp, clf_graph_ptr(g, r->arena, v.out),
                              sizeof(float) * rows * r->V);
        /* the device's argmax: next_ids beside the log-probabilities, else out itself */
        if (st == CLF_OK && (v.next_ids >= 0 || !r->logp))
            st = dev_download(r, r->ids,
                              clf_graph_ptr(g, r->arena, v.next_ids >= 0 ? v.next_ids : v.out),
                              sizeof(int32_t) * rows);
    }
    if (st == CLF_OK && v.attention >= 0) {
        /* [rows, H, T, S]: only the last query row (position t) is this step's */
        st = dev_download(r, r->probs, clf_graph_ptr(g, r->arena, v.attention),
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
    if (g == &built)
        clf_graph_free(&built);
    return st;
}

/* A surviving sentence's K slots moved from slot `from` on to slot `to` on (to < from): its
 * cross cache (not with the tables: it stays in the sentence's slot), mask and encoder
 * rows. */
static clf_status move_source_rows(dec_run *r, int to, int from)
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
static clf_status gather_self(dec_run *r, const int *from, int n, int len, int *scratch)
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
clf_status dec_advance(dec_run *r, int t, dec_choice *scratch)
{
    const int K = r->K, cur = r->cur, nxt = 1 - cur;
    int n_next = 0; /* active sentences after this step */
    dec_choice *kept = scratch + 2 * K;
    clf_status st = CLF_OK;
    int *from = r->from;
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
    return st;
}

/* Beam steps t0..t1 run ahead: settles each active sentence's steps in order from the
 * device's choices, as dec_advance() does, until it ends (its beams ping-pong between
 * bm_tok[0] and [1]); then compacts the survivors once, their tables as the host's. */
static clf_status beam_advance_ahead(dec_run *r, int t0, int t1, dec_choice *scratch)
{
    const int K = r->K, cur = r->cur, nxt = 1 - cur, M = r->max_out;
    const size_t row = sizeof(int32_t) * (size_t)M;
    dec_choice *kept = scratch + 2 * K;
    int n_next = 0;
    clf_status st = CLF_OK;
    for (int a = 0; a < r->n_active; a++) {
        const int s = r->sent[a];
        int x = 0, finished = 0;
        memcpy(r->bm_tok[0], r->tok[cur] + (size_t)a * K * M, row * K);
        memcpy(r->bm_hist[0], r->hist[cur] + (size_t)a * K * M, row * K);
        memcpy(r->bm_lp[0], r->lp[cur] + (size_t)a * K, sizeof(float) * K);
        for (int t = t0; t <= t1 && !finished; t++) {
            for (int k = 0; k < K; k++) {
                r->ptok[k] = r->bm_tok[x] + (size_t)k * M;
                r->bm_hist[x][(size_t)k * M + t] = a * K + k; /* position t: its own row */
            }
            const dec_beams b = {.K = K,
                                 .V = r->V,
                                 .t = t,
                                 .last_step = t + 1 >= M,
                                 .lp = r->bm_lp[x],
                                 .choices = r->bm_host + (size_t)(t - t0) * 6 * r->slots +
                                            (size_t)a * 6 * K,
                                 .tokens = r->ptok,
                                 .att_cols = r->S};
            int n = dec_choose(r->o, r->c, &b, scratch), nk;
            if ((st = dec_settle(r->o, &b, &r->sents[s], scratch, n, kept, &nk, &finished)) !=
                CLF_OK)
                return st;
            for (int k = 0; !finished && k < K; k++) { /* past nk: dead copies of beam 0 */
                const dec_choice *c = &kept[k < nk ? k : 0];
                int32_t *tok = r->bm_tok[1 - x] + (size_t)k * M;
                memcpy(tok, r->ptok[c->parent], sizeof(int32_t) * (size_t)t);
                tok[t] = c->token;
                memcpy(r->bm_hist[1 - x] + (size_t)k * M, r->bm_hist[x] + (size_t)c->parent * M,
                       sizeof(int32_t) * (size_t)(t + 1));
                r->bm_lp[1 - x][k] = k < nk ? c->lp : -INFINITY;
            }
            x = 1 - x;
        }
        if (finished)
            continue;
        const int nb = n_next * K;
        memcpy(r->tok[nxt] + (size_t)nb * M, r->bm_tok[x], row * K);
        memcpy(r->hist[nxt] + (size_t)nb * M, r->bm_hist[x], row * K);
        memcpy(r->lp[nxt] + nb, r->bm_lp[x], sizeof(float) * K);
        if (nb != a * K && (st = move_source_rows(r, nb, a * K)) != CLF_OK)
            return st;
        r->sent[n_next++] = s;
    }
    r->n_active = n_next;
    r->cur = nxt;
    return CLF_OK;
}

/* Greedy steps t0..t1 run ahead (run_ahead): settles each active sentence's steps in order
 * from the downloaded rows, as advance() does, until it ends; then compacts the survivors
 * once. Beam search: beam_advance_ahead. scratch: 3K choices. */
clf_status dec_advance_ahead(dec_run *r, int t0, int t1, dec_choice *scratch)
{
    if (r->K > 1)
        return beam_advance_ahead(r, t0, t1, scratch);
    const int cur = r->cur, nxt = 1 - cur;
    int n_next = 0;
    dec_choice *kept = scratch + 2;
    clf_status st = CLF_OK;
    int *from = r->from;
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
    return st;
}

/* r->ids[0..rows): the ids slots 0..rows-1 feed in at position t0, the first of a run
 * ahead (SOS, or the last token the host settled). */
static void first_ids(dec_run *r, int rows, int t0)
{
    for (int i = 0; i < rows; i++)
        r->ids[i] = t0 == 0 ? r->o->sos_id : r->tok[r->cur][(size_t)i * r->max_out + t0 - 1];
}

/* Beam steps t0..t1 on the device (see the top): step t0's tables, ids and sums uploaded,
 * each later step's left by beam_choose, then the choices downloaded at once. */
static clf_status beam_run_ahead(dec_run *r, int t0, int t1)
{
    const int rows = r->n_active * r->K, cur = r->cur;
    int own;
    r->win_t0 = t0;
    first_ids(r, rows, t0);
    /* beams of one sentence read its one cross-cache slot: never only their own rows */
    clf_status st = upload_tables(r, rows, t0, &own);
    if (st == CLF_OK)
        st = dev_upload(r, (clf_ptr){r->bm_ids, 0}, r->ids, sizeof(int32_t) * rows);
    if (st == CLF_OK)
        st = dev_upload(r, (clf_ptr){r->top_base, 0}, r->lp[cur], sizeof(float) * rows);
    for (int t = t0; t <= t1 && st == CLF_OK; t++)
        st = dec_run_step(r, t, 1);
    if (st == CLF_OK)
        st = dev_download(r, r->bm_host, (clf_ptr){r->bm_choices, 0},
                          sizeof(int32_t) * 6 * (size_t)r->slots * (t1 - t0 + 1));
    return st;
}

/* Greedy steps t0..t1 (t1 - t0 < r->ahead) on the device, each step's argmax the next
 * one's input, then their tokens downloaded at once into r->gen_host. Beam search:
 * beam_run_ahead. */
clf_status dec_run_ahead(dec_run *r, int t0, int t1)
{
    if (r->K > 1)
        return beam_run_ahead(r, t0, t1);
    const int rows = r->n_active;
    first_ids(r, rows, t0);
    const size_t row = sizeof(int32_t) * (size_t)r->slots;
    clf_status st = dev_upload(r, (clf_ptr){r->gen, row * t0}, r->ids, sizeof(int32_t) * rows);
    for (int t = t0; t <= t1 && st == CLF_OK; t++)
        st = dec_run_step(r, t, 1);
    if (st == CLF_OK)
        st = dev_download(r, r->gen_host, (clf_ptr){r->gen, row * (t0 + 1)},
                          row * (size_t)(t1 - t0 + 1));
    return st;
}

/* The steps greedy decoding runs ahead (clf_decode_opts.sync_steps): 1 (every step) where
 * something needs the host at each step. */
int dec_steps_ahead(const dec_run *r)
{
    const clf_decode_opts *o = r->o;
    if (r->logp || o->want_attention || !o->use_cache)
        return 1;
    /* beam search: the device's topk and beam choice, the caches read through the tables */
    if (r->K > 1 && !(r->top_k && r->shared && r->api->supports(r->be, CLF_OP_BEAM_CHOOSE)))
        return 1;
    if (o->sync_steps > 0)
        return o->sync_steps;
    return r->api->supports(r->be, CLF_OP_QUEUED) ? DEC_QUEUED_SYNC_STEPS : 1;
}
