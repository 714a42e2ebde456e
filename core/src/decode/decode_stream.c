/* Continuous decoding: sentences join and leave a running batch (clformer/decode.h).
 *
 * Device state (P = max_out + max_rows * max_out rows per decoder layer):
 *   pool  [L, P, 2d] (+ max_out rows)  self-attention k|v. Step g writes its rows, in batch
 *                                      order, to block g mod max_out: rows OFF + block *
 *                                      max_rows + r, OFF = max_out. A sentence lives at most
 *                                      max_out steps, so a block is rewritten only after
 *                                      every sentence that wrote it has left.
 *   cross [L, max_rows, max_src_len, 2d]  cross-attention k|v, one slot per sentence, filled
 *                                      when it joins (its encoder pass) and read by its beams
 *   tabs  I32, uploaded once a step    the row tables and key masks of the step (below)
 * Row r of a step (beam k of an active sentence at position p) reads key j <= p of
 * self-attention from pool row phys[k][j], the row its history wrote position j to. The
 * attention op reads key j of table entry e at row e * kv_bstride + j * k_ld; with
 * kv_bstride = k_ld = one row, entry e = phys - j names any row at or after OFF (j < OFF).
 * Keys past a row's position are masked (their entries point at zeroed rows). Positions
 * differ from row to row: the step graph embeds each run of equal positions on its own
 * (rows are kept in the order sentences joined, so a run is a cohort that joined together).
 * Choosing beams and keeping hypotheses are hypotheses.c's, as for clf_decode. */
#include "clformer/decode.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "decode/decode_private.h"
#include "graph/model_for_train_decode.h"

typedef struct sentence {
    uint64_t tag;
    clf_decode_opts o;
    int32_t *src; /* [src_len] */
    int src_len, K, max_out;
    long long arrived;         /* the stream's step count when it was added */
    int t;                     /* tokens generated: the position fed next */
    int slot;                  /* cross-cache slot */
    int cur;                   /* which of the double-buffered beam states is live */
    int32_t *tok[2], *phys[2]; /* [K, max_out] tokens and the pool row of each position */
    float *lp[2];              /* [K] */
    dec_sentence hyps;
} sentence;

typedef struct finished {
    uint64_t tag;
    clf_decode_result r;
} finished;

struct clf_decode_stream {
    clf_model *m;
    const clf_backend_api *api;
    clf_backend *be;
    const clf_model_config *c;
    clf_decode_stream_opts o;
    int L, d, V, P;
    clf_buffer *pool, *cross, *tabs, *arena, *enc_kv, *enc_mask, *top_base_buf;
    size_t arena_cap, enc_kv_cap, enc_mask_cap;
    long long g; /* steps run */
    long long token_steps;
    sentence **waiting; /* [cap] FIFO, waiting[0] oldest */
    int n_waiting, cap_waiting;
    sentence **active; /* [max_rows], in the order they joined */
    int n_active, rows;
    int *free_slots; /* [max_rows] stack of free cross slots */
    int n_free;
    finished *done; /* FIFO of results to take */
    int n_done, cap_done;
    /* step scratch */
    int32_t *htabs;       /* host copy of tabs */
    int32_t *ids;         /* [max_rows] fed ids, then the argmax download */
    int *row_pos;         /* [max_rows] */
    float *logp;          /* [max_rows, V] */
    float *top_val;       /* [max_rows, CLF_TOPK_MAX] beam steps' topk download */
    int32_t *top_idx;     /* [max_rows, CLF_TOPK_MAX] */
    float *top_base;      /* [max_rows] the rows' sums, uploaded to top_base_buf */
    const int32_t **ptok; /* [max_rows] a sentence's parents' tokens */
    dec_choice *choices;  /* [3 * max_rows] */
};

static void sentence_free(sentence *x)
{
    if (!x)
        return;
    free(x->src);
    for (int i = 0; i < 2; i++) {
        free(x->tok[i]);
        free(x->phys[i]);
        free(x->lp[i]);
    }
    dec_sentence_free(&x->hyps);
    free(x);
}

static clf_status nomem(void)
{
    return clf_error(CLF_ERR_NOMEM, "decode stream: out of host memory");
}

/* Grows a device scratch buffer to at least bytes. */
static clf_status ensure_buffer(clf_decode_stream *s, clf_buffer **b, size_t *cap, size_t bytes,
                                const char *what)
{
    if (*b && *cap >= bytes)
        return CLF_OK;
    if (*b)
        s->api->free(s->be, *b);
    *b = NULL;
    *cap = 0;
    clf_status st = s->api->alloc(s->be, bytes ? bytes : 4, b);
    if (st != CLF_OK)
        return clf_error_context(st, "decode stream: %s (%zu bytes)", what, bytes);
    *cap = bytes;
    return CLF_OK;
}

/* ---- open and close ---- */

void clf_decode_stream_free(clf_decode_stream *s)
{
    if (!s)
        return;
    clf_buffer *bufs[] = {s->pool,   s->cross,    s->tabs,        s->arena,
                          s->enc_kv, s->enc_mask, s->top_base_buf};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            s->api->free(s->be, bufs[i]);
    for (int i = 0; i < s->n_waiting; i++)
        sentence_free(s->waiting[i]);
    for (int i = 0; i < s->n_active; i++)
        sentence_free(s->active[i]);
    for (int i = 0; i < s->n_done; i++)
        clf_decode_result_free(&s->done[i].r);
    free(s->waiting);
    free(s->active);
    free(s->free_slots);
    free(s->done);
    free(s->htabs);
    free(s->ids);
    free(s->row_pos);
    free(s->logp);
    free(s->top_val);
    free(s->top_idx);
    free(s->top_base);
    free(s->ptok);
    free(s->choices);
    free(s);
}

/* The ints of tabs: per row the self table and mask (max_out each), the cross table and
 * mask (max_src_len each). */
static size_t tabs_ints(const clf_decode_stream *s)
{
    return (size_t)s->o.max_rows * 2 * ((size_t)s->o.max_out + s->o.max_src_len);
}

clf_status clf_decode_stream_open(clf_model *m, const clf_decode_stream_opts *o,
                                  clf_decode_stream **out)
{
    *out = NULL;
    if (!m || !o)
        return clf_error(CLF_ERR_INPUT, "decode stream: no model or options");
    const clf_model_config *c = clf_model_config_of(m);
    if (o->max_rows < 1 || o->max_src_len < 1 || o->max_out < 1 || o->max_join_tokens < 0 ||
        o->join_wait < 0)
        return clf_error(CLF_ERR_INPUT,
                         "decode stream: max_rows %d, max_src_len %d and max_out %d must be >= 1 "
                         "(max_join_tokens %d and join_wait %d >= 0)",
                         o->max_rows, o->max_src_len, o->max_out, o->max_join_tokens, o->join_wait);
    if (c->max_len < 2)
        return clf_error(CLF_ERR_INPUT, "decode stream: model.max_len %d leaves no room to decode",
                         c->max_len);
    if (o->max_src_len > c->max_len)
        return clf_error(CLF_ERR_INPUT,
                         "decode stream: max_src_len %d exceeds model.max_len %d (the "
                         "positional-encoding table)",
                         o->max_src_len, c->max_len);
    clf_decode_stream *s = calloc(1, sizeof *s);
    if (!s)
        return nomem();
    s->m = m;
    s->c = c;
    s->o = *o;
    if (s->o.max_out > c->max_len - 1)
        s->o.max_out = c->max_len - 1;
    clf_model_backend_of(m, &s->api, &s->be);
    clf_status st = CLF_OK;
    if (!s->api->supports(s->be, CLF_OP_ATTENTION_KV_ROWS)) {
        st = clf_error(CLF_ERR_INPUT,
                       "decode stream: backend '%s' does not read attention row tables "
                       "(CLF_OP_ATTENTION_KV_ROWS), which continuous decoding needs",
                       s->api->name);
        goto fail;
    }
    s->L = c->decoder_layers;
    s->d = c->d_model;
    s->V = c->tgt_vocab;
    const int R = s->o.max_rows, T = s->o.max_out;
    s->P = T + R * T;
    const double row_bytes = 2.0 * s->d * 4.0;
    const double pool = ((double)s->L * s->P + T) * row_bytes,
                 cross = (double)s->L * R * s->o.max_src_len * row_bytes;
    if (pool + cross > (double)CLF_DECODE_BYTES_MAX || (double)s->L * s->P > INT_MAX) {
        st = clf_error(CLF_ERR_INPUT,
                       "decode stream: max_rows %d x max_out %d x max_src_len %d plans %.2f GiB "
                       "of caches, more than the limit of %.0f GiB (CLF_DECODE_BYTES_MAX)",
                       R, T, s->o.max_src_len, (pool + cross) / (double)(1ll << 30),
                       (double)CLF_DECODE_BYTES_MAX / (double)(1ll << 30));
        goto fail;
    }
    if ((st = s->api->alloc(s->be, (size_t)pool, &s->pool)) != CLF_OK ||
        (st = s->api->alloc(s->be, (size_t)cross, &s->cross)) != CLF_OK ||
        (st = s->api->alloc(s->be, tabs_ints(s) * 4, &s->tabs)) != CLF_OK ||
        (st = s->api->alloc(s->be, (size_t)R * 4, &s->top_base_buf)) != CLF_OK) {
        st = clf_error_context(st, "decode stream: caches");
        goto fail;
    }
    /* zeroed: keys past a row's position are masked, and a masked key's value still meets a
     * zero weight, which must not be 0 * NaN */
    if ((st = clf_op_fill(s->api, s->be, (clf_ptr){s->pool, 0}, 0.0f, (size_t)pool / 4)) !=
            CLF_OK ||
        (st = clf_op_fill(s->api, s->be, (clf_ptr){s->cross, 0}, 0.0f, (size_t)cross / 4)) !=
            CLF_OK)
        goto fail;
    s->active = calloc((size_t)R, sizeof *s->active);
    s->free_slots = malloc(sizeof(int) * (size_t)R);
    s->htabs = calloc(tabs_ints(s), sizeof(int32_t));
    s->ids = malloc(sizeof(int32_t) * (size_t)R);
    s->row_pos = malloc(sizeof(int) * (size_t)R);
    s->logp = malloc(sizeof(float) * (size_t)R * s->V);
    s->top_val = malloc(sizeof(float) * (size_t)R * CLF_TOPK_MAX);
    s->top_idx = malloc(sizeof(int32_t) * (size_t)R * CLF_TOPK_MAX);
    s->top_base = malloc(sizeof(float) * (size_t)R);
    s->ptok = malloc(sizeof *s->ptok * (size_t)R);
    s->choices = malloc(sizeof *s->choices * 3 * (size_t)R);
    if (!s->active || !s->free_slots || !s->htabs || !s->ids || !s->row_pos || !s->logp ||
        !s->ptok || !s->choices || !s->top_val || !s->top_idx || !s->top_base) {
        st = nomem();
        goto fail;
    }
    for (int i = 0; i < R; i++)
        s->free_slots[i] = R - 1 - i;
    s->n_free = R;
    *out = s;
    return CLF_OK;
fail:
    clf_decode_stream_free(s);
    return st;
}

/* ---- sentences in and out ---- */

clf_status clf_decode_stream_add(clf_decode_stream *s, const int32_t *src, int src_len,
                                 const clf_decode_opts *o, uint64_t tag)
{
    const clf_model_config *c = s->c;
    if (!o || !src || src_len < 1)
        return clf_error(CLF_ERR_INPUT, "decode stream: empty sentence");
    if (src_len > s->o.max_src_len)
        return clf_error(CLF_ERR_INPUT,
                         "decode stream: source of %d tokens is longer than max_src_len %d",
                         src_len, s->o.max_src_len);
    if (o->beam > s->o.max_rows)
        return clf_error(CLF_ERR_INPUT,
                         "decode stream: need 1 <= n_best (%d) <= beam (%d) <= max_rows (%d)",
                         o->n_best, o->beam, s->o.max_rows);
    if (!o->use_cache || o->want_attention)
        return clf_error(CLF_ERR_INPUT, "decode stream: decodes with the cache and without "
                                        "attention rows only");
    clf_status st = dec_check_opts(c, o, "decode stream");
    if (st != CLF_OK || (st = dec_check_source(c, src, 1, src_len, "decode stream")) != CLF_OK)
        return st;
    if (!clf_grow((void **)&s->waiting, &s->cap_waiting, s->n_waiting + 1, sizeof *s->waiting, 16))
        return nomem();
    sentence *x = calloc(1, sizeof *x);
    if (!x)
        return nomem();
    x->tag = tag;
    x->arrived = s->g;
    x->o = *o;
    x->K = o->beam;
    x->max_out = o->max_len < s->o.max_out ? o->max_len : s->o.max_out;
    x->src_len = src_len;
    x->slot = -1;
    x->src = malloc(sizeof(int32_t) * (size_t)src_len);
    int ok = x->src && dec_sentence_init(&x->hyps, x->K) == CLF_OK;
    for (int i = 0; ok && i < 2; i++) {
        x->tok[i] = calloc((size_t)x->K * x->max_out, sizeof(int32_t));
        x->phys[i] = calloc((size_t)x->K * x->max_out, sizeof(int32_t));
        x->lp[i] = malloc(sizeof(float) * (size_t)x->K);
        ok = x->tok[i] && x->phys[i] && x->lp[i];
    }
    if (!ok) {
        sentence_free(x);
        return nomem();
    }
    memcpy(x->src, src, sizeof(int32_t) * (size_t)src_len);
    /* beam 0 starts alive, the others dead until the first step fans out */
    for (int k = 0; k < x->K; k++)
        x->lp[0][k] = k == 0 ? 0.0f : -INFINITY;
    s->waiting[s->n_waiting++] = x;
    return CLF_OK;
}

/* Moves x's result to the results to take, and frees x (its slot back to the stack). */
static clf_status finish(clf_decode_stream *s, sentence *x)
{
    clf_status st = CLF_OK;
    if (!clf_grow((void **)&s->done, &s->cap_done, s->n_done + 1, sizeof *s->done, 16))
        return nomem();
    finished *f = &s->done[s->n_done];
    memset(f, 0, sizeof *f);
    f->tag = x->tag;
    f->r = (clf_decode_result){.batch = 1, .n_best = x->o.n_best, .src_len = x->src_len};
    f->r.hyps = calloc((size_t)x->o.n_best, sizeof *f->r.hyps);
    if (!f->r.hyps)
        return nomem();
    if ((st = dec_collect(&x->hyps, x->o.n_best, f->r.hyps)) != CLF_OK) {
        clf_decode_result_free(&f->r);
        return st;
    }
    s->n_done++;
    return CLF_OK;
}

static void release(clf_decode_stream *s, sentence *x)
{
    if (x->slot >= 0)
        s->free_slots[s->n_free++] = x->slot;
    sentence_free(x);
}

int clf_decode_stream_take(clf_decode_stream *s, uint64_t *tag, clf_decode_result *out)
{
    if (s->n_done == 0)
        return 0;
    *tag = s->done[0].tag;
    *out = s->done[0].r;
    memmove(s->done, s->done + 1, sizeof *s->done * (size_t)--s->n_done);
    return 1;
}

int clf_decode_stream_cancel(clf_decode_stream *s, uint64_t tag)
{
    int n = 0, kept = 0;
    for (int i = 0; i < s->n_waiting; i++) {
        if (s->waiting[i]->tag == tag) {
            release(s, s->waiting[i]);
            n++;
        } else {
            s->waiting[kept++] = s->waiting[i];
        }
    }
    s->n_waiting = kept;
    kept = 0;
    for (int i = 0; i < s->n_active; i++) {
        if (s->active[i]->tag == tag) {
            s->rows -= s->active[i]->K;
            release(s, s->active[i]);
            n++;
        } else {
            s->active[kept++] = s->active[i];
        }
    }
    s->n_active = kept;
    kept = 0;
    for (int i = 0; i < s->n_done; i++) {
        if (s->done[i].tag == tag) {
            clf_decode_result_free(&s->done[i].r);
            n++;
        } else {
            s->done[kept++] = s->done[i];
        }
    }
    s->n_done = kept;
    return n;
}

void clf_decode_stream_get_state(const clf_decode_stream *s, clf_decode_stream_state *st)
{
    *st = (clf_decode_stream_state){.waiting = s->n_waiting,
                                    .active = s->n_active,
                                    .rows = s->rows,
                                    .finished = s->n_done,
                                    .steps = s->g,
                                    .token_steps = s->token_steps};
}

/* ---- joining: the encoder ---- */

/* Whether the waiting sentences wait for more to share their encoder pass (the rule:
 * clf_decode_stream_opts.join_wait). An encoder pass of a few sentences costs about as
 * much as one of several: its products read every weight either way. */
static int join_later(const clf_decode_stream *s)
{
    if (s->o.join_wait <= 0 || 2 * s->rows < s->o.max_rows ||
        s->g - s->waiting[0]->arrived >= s->o.join_wait)
        return 0;
    const int enough = s->o.max_rows / 8 > 2 ? s->o.max_rows / 8 : 2;
    int rows = 0;
    for (int i = 0; i < s->n_waiting && rows < enough; i++)
        rows += s->waiting[i]->K;
    return rows < enough;
}

/* The waiting sentences that fit join: their encoder pass into a scratch cache, whose
 * blocks are then copied into their cross slots. */
static clf_status join(clf_decode_stream *s)
{
    if (s->n_waiting == 0 || join_later(s))
        return CLF_OK;
    int n = 0, S = 0, rows = s->rows;
    while (n < s->n_waiting && s->n_free > n) {
        const sentence *x = s->waiting[n];
        const int S1 = x->src_len > S ? x->src_len : S;
        if (rows + x->K > s->o.max_rows ||
            (n > 0 && s->o.max_join_tokens > 0 && (long)S1 * (n + 1) > s->o.max_join_tokens))
            break;
        rows += x->K;
        S = S1;
        n++;
    }
    if (n == 0)
        return CLF_OK;
    const size_t row2 = 2 * (size_t)s->d, SS = (size_t)S;
    clf_status st;
    if ((st = ensure_buffer(s, &s->enc_kv, &s->enc_kv_cap, (size_t)s->L * n * SS * row2 * 4,
                            "encoder keys and values")) != CLF_OK ||
        (st = ensure_buffer(s, &s->enc_mask, &s->enc_mask_cap, (size_t)n * SS * 4,
                            "encoder key mask")) != CLF_OK)
        return st;
    /* the padded sources and their key masks, one upload each */
    int32_t *host = calloc((size_t)n * SS * 2, sizeof(int32_t));
    if (!host)
        return nomem();
    int32_t *src = host, *mask = host + (size_t)n * SS;
    for (int i = 0; i < n; i++) {
        const sentence *x = s->waiting[i];
        for (size_t j = 0; j < SS; j++) {
            src[i * SS + j] = j < (size_t)x->src_len ? x->src[j] : x->o.pad_id;
            mask[i * SS + j] = src[i * SS + j] != x->o.pad_id;
        }
    }
    clf_kv_cache kv = {
        .base = {s->enc_kv, 0}, .bytes = (size_t)s->L * n * SS * row2 * 4, .slots = n, .len = S};
    clf_graph g;
    int v_src;
    st = clf_op_upload(s->api, s->be, (clf_ptr){s->enc_mask, 0}, mask, (size_t)n * SS * 4);
    if (st == CLF_OK &&
        (st = clf_model_build_encoder_graph(s->m, n, S, (clf_ptr){s->enc_mask, 0}, &kv,
                                            (clf_ptr){0}, &g, &v_src)) == CLF_OK) {
        if ((st = clf_graph_reserve_arena(&g, s->api, s->be, &s->arena, &s->arena_cap,
                                          "decode stream")) == CLF_OK &&
            (st = clf_op_upload(s->api, s->be, clf_graph_ptr(&g, s->arena, v_src), src,
                                (size_t)n * SS * 4)) == CLF_OK &&
            (st = clf_graph_run(&g, s->api, s->be, s->arena)) != CLF_OK)
            st = clf_error_context(st, "decode stream: encoder");
        clf_graph_free(&g);
    }
    free(host);
    if (st != CLF_OK)
        return st;
    const size_t cross_slot = (size_t)s->o.max_src_len * row2;
    for (int i = 0; i < n; i++) {
        sentence *x = s->waiting[i];
        x->slot = s->free_slots[--s->n_free];
        for (int l = 0; l < s->L; l++) {
            const size_t to = ((size_t)l * s->o.max_rows + x->slot) * cross_slot,
                         from = ((size_t)l * n + i) * SS * row2;
            if ((st = clf_op_copy(s->api, s->be, (clf_ptr){s->cross, 4 * to},
                                  (clf_ptr){s->enc_kv, 4 * from}, 4 * SS * row2)) != CLF_OK)
                return clf_error_context(st, "decode stream: cross-attention cache");
        }
        s->active[s->n_active++] = x;
        s->rows += x->K;
    }
    memmove(s->waiting, s->waiting + n, sizeof *s->waiting * (size_t)(s->n_waiting - n));
    s->n_waiting -= n;
    return CLF_OK;
}

/* ---- one step ---- */

/* A sentence's greedy rows choose on the device unless log-probabilities are summed. */
static int needs_logp(const clf_decode_stream *s, const sentence *x)
{
    return x->K > 1 || s->c->n_banned_ids > 0 || x->o.want_scores;
}

/* The step's topk width: where every sentence is a beam search the device can choose for,
 * the largest one's (dec_device_top_k); else 0, and log-probabilities come down. */
static int step_top_k(const clf_decode_stream *s)
{
    int k = 0;
    for (int a = 0; a < s->n_active; a++) {
        const int kx = dec_device_top_k(s->api, s->be, s->c, s->active[a]->K);
        if (!kx)
            return 0;
        k = kx > k ? kx : k;
    }
    return k;
}

/* A step's sizes and outputs: R rows; self-attention reads kv keys (the longest history
 * + 1), cross-attention S (the longest source); what comes down (log-probabilities, the
 * device's argmax, or top_k per row); the pool row this step writes from. */
typedef struct step_plan {
    int R, kv, S, want_logp, want_ids, top_k, write_row;
} step_plan;

static void plan_step(const clf_decode_stream *s, step_plan *pl)
{
    *pl = (step_plan){.R = s->rows, .kv = 1, .S = 1};
    for (int a = 0; a < s->n_active; a++) {
        const sentence *x = s->active[a];
        pl->kv = x->t + 1 > pl->kv ? x->t + 1 : pl->kv;
        pl->S = x->src_len > pl->S ? x->src_len : pl->S;
        pl->want_logp |= needs_logp(s, x);
        pl->want_ids |= x->K == 1 && s->c->n_banned_ids == 0; /* the device's argmax */
    }
    pl->top_k = step_top_k(s);
    if (pl->top_k)
        pl->want_logp = pl->want_ids = 0;
    pl->write_row = s->o.max_out + (int)(s->g % s->o.max_out) * s->o.max_rows;
}

/* Fills and uploads the step's row tables (tabs: self rows [R, kv] | self mask [R, kv] |
 * cross rows [R, S] | cross mask [R, S]), and the rows' ids, positions and sums. */
static clf_status upload_tables(clf_decode_stream *s, const step_plan *pl)
{
    const int R = pl->R, kv = pl->kv, S = pl->S;
    int32_t *self_rows = s->htabs, *self_mask = self_rows + (size_t)R * kv,
            *cross_rows = self_mask + (size_t)R * kv, *cross_mask = cross_rows + (size_t)R * S;
    for (int a = 0, r = 0; a < s->n_active; a++) {
        const sentence *x = s->active[a];
        const int p = x->t;
        for (int k = 0; k < x->K; k++, r++) {
            const int32_t *phys = x->phys[x->cur] + (size_t)k * x->max_out;
            for (int j = 0; j < kv; j++) {
                const int row = j < p ? phys[j] : j == p ? pl->write_row + r : j;
                self_rows[(size_t)r * kv + j] = row - j;
                self_mask[(size_t)r * kv + j] = j <= p;
            }
            for (int j = 0; j < S; j++) {
                cross_rows[(size_t)r * S + j] = x->slot;
                cross_mask[(size_t)r * S + j] = j < x->src_len && x->src[j] != x->o.pad_id;
            }
            s->row_pos[r] = p;
            s->top_base[r] = x->lp[x->cur][k];
            s->ids[r] = p == 0 ? x->o.sos_id : x->tok[x->cur][(size_t)k * x->max_out + p - 1];
        }
    }
    clf_status st =
        clf_op_upload(s->api, s->be, (clf_ptr){s->tabs, 0}, s->htabs, 4 * (size_t)R * 2 * (kv + S));
    if (st == CLF_OK && pl->top_k)
        st =
            clf_op_upload(s->api, s->be, (clf_ptr){s->top_base_buf, 0}, s->top_base, 4 * (size_t)R);
    return st;
}

/* Builds and runs the step graph on the uploaded tables, then downloads what pl asks. */
static clf_status run_graph(clf_decode_stream *s, const step_plan *pl, clf_graph *g)
{
    const int R = pl->R, kv = pl->kv, S = pl->S;
    const size_t row2 = 2 * (size_t)s->d;
    clf_step_spec spec = {
        .rows = R,
        .pos = 0,
        .src_len = S,
        .src_mask = {s->tabs, 4 * ((size_t)R * 2 * kv + (size_t)R * S)},
        .self = {.base = {s->pool, 0},
                 .bytes = ((size_t)s->L * s->P + s->o.max_out) * row2 * 4,
                 .slots = s->P,
                 .len = 1,
                 .rows = {s->tabs, 0},
                 .rows_ld = kv},
        .cross = {.base = {s->cross, 0},
                  .bytes = (size_t)s->L * s->o.max_rows * s->o.max_src_len * row2 * 4,
                  .slots = s->o.max_rows,
                  .len = s->o.max_src_len,
                  .rows = {s->tabs, 4 * (size_t)R * 2 * kv},
                  .rows_ld = S},
        .log_probs = pl->top_k       ? 3
                     : pl->want_logp ? (pl->want_ids ? 2 : 1)
                                     : 0,
        .top_k = pl->top_k,
        .top_base = {s->top_base_buf, 0},
        .use_cache = 1,
        .row_pos = s->row_pos,
        .self_kv_len = kv,
        .self_mask = {s->tabs, 4 * (size_t)R * kv},
        .write_row = pl->write_row};
    clf_step_values v;
    clf_status st = clf_model_build_step_graph(s->m, &spec, g, &v);
    if (st != CLF_OK)
        return st;
    if ((st = clf_graph_reserve_arena(g, s->api, s->be, &s->arena, &s->arena_cap,
                                      "decode stream")) != CLF_OK ||
        (st = clf_op_upload(s->api, s->be, clf_graph_ptr(g, s->arena, v.ids), s->ids,
                            sizeof(int32_t) * R)) != CLF_OK)
        return st;
    if ((st = clf_graph_run(g, s->api, s->be, s->arena)) != CLF_OK)
        return clf_error_context(st, "decode stream: step");
    const size_t top = (size_t)R * pl->top_k;
    if (pl->want_logp &&
        (st = clf_op_download(s->api, s->be, s->logp, clf_graph_ptr(g, s->arena, v.out),
                              sizeof(float) * (size_t)R * s->V)) != CLF_OK)
        return st;
    if (pl->top_k &&
        ((st = clf_op_download(s->api, s->be, s->top_val, clf_graph_ptr(g, s->arena, v.out),
                               sizeof(float) * top)) != CLF_OK ||
         (st = clf_op_download(s->api, s->be, s->top_idx, clf_graph_ptr(g, s->arena, v.next_ids),
                               sizeof(int32_t) * top)) != CLF_OK))
        return st;
    if (pl->want_ids && spec.log_probs != 1)
        st = clf_op_download(s->api, s->be, s->ids,
                             clf_graph_ptr(g, s->arena, v.next_ids >= 0 ? v.next_ids : v.out),
                             sizeof(int32_t) * R);
    return st;
}

/* Sentence x (rows r0 .. r0 + K) chooses its next beams from the step's download; *done:
 * it finished (its result recorded, its rows released). */
static clf_status advance(clf_decode_stream *s, sentence *x, int r0, const step_plan *pl, int *done)
{
    const int K = x->K, cur = x->cur, nxt = 1 - cur, t = x->t, V = s->V, top_k = pl->top_k;
    for (int k = 0; k < K; k++)
        s->ptok[k] = x->tok[cur] + (size_t)k * x->max_out;
    const dec_beams b = {.K = K,
                         .V = V,
                         .t = t,
                         .last_step = t + 1 >= x->max_out,
                         .logp = !top_k && needs_logp(s, x) ? s->logp + (size_t)r0 * V : NULL,
                         .top_val = top_k ? s->top_val + (size_t)r0 * top_k : NULL,
                         .top_idx = top_k ? s->top_idx + (size_t)r0 * top_k : NULL,
                         .top_k = top_k,
                         .lp = x->lp[cur],
                         .dev_id = s->ids[r0],
                         .tokens = s->ptok,
                         .att_cols = x->src_len};
    dec_choice *ch = s->choices, *kept = s->choices + 2 * K;
    int n = dec_choose(&x->o, s->c, &b, ch), nk;
    clf_status st = dec_settle(&x->o, &b, &x->hyps, ch, n, kept, &nk, done);
    if (st != CLF_OK)
        return st;
    if (*done) {
        if ((st = finish(s, x)) == CLF_OK)
            release(s, x);
        return st;
    }
    for (int k = 0; k < K; k++) {
        /* beam k continues kept[k] (fewer kept than beams: a dead copy of beam 0) */
        const int live = k < nk, parent = kept[live ? k : 0].parent;
        int32_t *tk = x->tok[nxt] + (size_t)k * x->max_out;
        int32_t *ph = x->phys[nxt] + (size_t)k * x->max_out;
        memcpy(tk, x->tok[cur] + (size_t)parent * x->max_out, sizeof(int32_t) * (size_t)t);
        memcpy(ph, x->phys[cur] + (size_t)parent * x->max_out, sizeof(int32_t) * (size_t)t);
        tk[t] = kept[live ? k : 0].token;
        ph[t] = pl->write_row + r0 + parent;
        x->lp[nxt][k] = live ? kept[k].lp : -INFINITY;
    }
    x->cur = nxt;
    x->t++;
    return CLF_OK;
}

clf_status clf_decode_stream_step(clf_decode_stream *s)
{
    clf_status st = join(s);
    if (st != CLF_OK || s->n_active == 0)
        return st;
    step_plan pl;
    plan_step(s, &pl);
    if ((st = upload_tables(s, &pl)) != CLF_OK)
        return st;
    clf_graph g;
    clf_graph_init(&g);
    st = run_graph(s, &pl, &g);
    /* every sentence chooses its next beams; the finished leave */
    for (int a = 0, r0 = 0; st == CLF_OK && a < s->n_active; a++) {
        sentence *x = s->active[a];
        const int K = x->K;
        int done = 0;
        st = advance(s, x, r0, &pl, &done);
        r0 += K;
        if (st == CLF_OK && done)
            s->active[a] = NULL;
    }
    if (st == CLF_OK) {
        s->g++;
        s->token_steps += pl.R;
    }
    /* the sentences that left, out of the batch (in order: a run of rows stays a cohort) */
    int kept_active = 0, rows = 0;
    for (int a = 0; a < s->n_active; a++)
        if (s->active[a]) {
            rows += s->active[a]->K;
            s->active[kept_active++] = s->active[a];
        }
    s->n_active = kept_active;
    s->rows = rows;
    clf_graph_free(&g);
    return st;
}
