/* Greedy and beam-search decoding with a KV cache (see clformer/decode.h): the options'
 * defaults and checks, the memory plan, setting up a run and running its steps in order
 * (decode_steps.c; the device state: decode_run.h), and the hypotheses collected. */
#include "clformer/decode.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/decode_run.h"

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

/* ---- results ---- */

static clf_status collect(dec_run *r, clf_decode_result *out)
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

static void run_free(dec_run *r)
{
    dec_replay_free(r); /* before the buffers its recording names */
    clf_buffer *bufs[] = {r->self_kv[0], r->self_kv[1], r->cross_kv,   r->mask,
                          r->enc,        r->arena,      r->self_rows,  r->cross_rows,
                          r->top_base,   r->gen,        r->pos,        r->pos_table,
                          r->bm_ids,     r->bm_rows,    r->bm_choices, r->banned};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            r->api->free(r->be, bufs[i]);
    for (int i = 0; i < 2; i++) {
        free(r->tok[i]);
        free(r->lp[i]);
        free(r->att[i]);
        free(r->hist[i]);
        free(r->bm_tok[i]);
        free(r->bm_hist[i]);
        free(r->bm_lp[i]);
    }
    free(r->bm_host);
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
    free(r->from);
}

static clf_status alloc_device(dec_run *r, clf_buffer **b, size_t bytes, const char *what)
{
    clf_status st = r->api->alloc(r->be, bytes ? bytes : 4, b);
    if (st != CLF_OK)
        return clf_error_context(st, "decode: %s (%zu bytes)", what, bytes);
    return CLF_OK;
}

/* The buffers of beam search run ahead (decode_run.h), the banned ids uploaded. */
static clf_status alloc_beam_ahead(dec_run *r)
{
    const size_t slots = (size_t)r->slots, K = (size_t)r->K, M = (size_t)r->max_out,
                 choices = sizeof(int32_t) * 6 * slots * (size_t)r->ahead;
    const int n_banned = r->c->n_banned_ids;
    clf_status st;
    if (!(r->bm_host = malloc(choices)))
        goto nomem;
    for (int i = 0; i < 2; i++)
        if (!(r->bm_tok[i] = malloc(sizeof(int32_t) * K * M)) ||
            !(r->bm_hist[i] = malloc(sizeof(int32_t) * K * M)) ||
            !(r->bm_lp[i] = malloc(sizeof(float) * K)))
            goto nomem;
    if ((st = alloc_device(r, &r->bm_ids, sizeof(int32_t) * slots, "beam ids")) != CLF_OK ||
        (st = alloc_device(r, &r->bm_rows, sizeof(int32_t) * slots * M, "beam row table")) !=
            CLF_OK ||
        (st = alloc_device(r, &r->bm_choices, choices, "beam choices")) != CLF_OK)
        return st;
    if (n_banned > 0 &&
        ((st = alloc_device(r, &r->banned, sizeof(int32_t) * (size_t)n_banned, "banned ids")) !=
             CLF_OK ||
         (st = clf_op_upload(r->api, r->be, (clf_ptr){r->banned, 0}, r->c->banned_ids,
                             sizeof(int32_t) * (size_t)n_banned)) != CLF_OK))
        return st;
    return CLF_OK;
nomem:
    return clf_error(CLF_ERR_NOMEM, "decode: out of host memory");
}

/* The encoder, then the steps until every sentence has ended or max_out tokens are out
 * (greedy runs of r->ahead steps where it may), then the hypotheses and the steps' counts
 * into out. */
static clf_status run_steps(dec_run *r, const int32_t *src, clf_decode_result *out)
{
    dec_choice *scratch = malloc(sizeof(dec_choice) * 3 * (size_t)r->K);
    if (!scratch)
        return clf_error(CLF_ERR_NOMEM, "decode: out of host memory");
    clf_status st = dec_run_encoder(r, src);
    const long long calls0 = r->calls;
    const double t0 = dec_now_s(), dev0 = r->dev_s;
    for (int t = 0; st == CLF_OK && t < r->max_out && r->n_active > 0;) {
        /* the forced first token is the host's: no step feeds the device's choice on */
        const int t1 = (t == 0 && r->o->forced_bos_id >= 0) || r->ahead == 1
                           ? t
                           : (t + r->ahead < r->max_out ? t + r->ahead : r->max_out) - 1;
        if (t1 == t && (st = dec_run_step(r, t, 0)) == CLF_OK)
            st = dec_advance(r, t, scratch);
        if (t1 > t && (st = dec_run_ahead(r, t, t1)) == CLF_OK)
            st = dec_advance_ahead(r, t, t1, scratch);
        t = t1 + 1;
    }
    free(scratch);
    if (st != CLF_OK)
        return st;
    const double sync0 = dec_now_s();
    st = r->api->synchronize(r->be);
    r->dev_s += dec_now_s() - sync0;
    if (st != CLF_OK || (st = collect(r, out)) != CLF_OK)
        return st;
    out->step_calls = r->calls - calls0;
    out->step_s = dec_now_s() - t0;
    out->host_s = out->step_s - (r->dev_s - dev0);
    return CLF_OK;
}

clf_status clf_decode(clf_model *m, const int32_t *src, int B, int S, const clf_decode_opts *o,
                      clf_decode_result *out)
{
    memset(out, 0, sizeof *out);
    dec_run r = {.m = m, .o = o, .B = B, .S = S};
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
    r.from = malloc(sizeof(int) * 2 * slots);
    r.ptok = malloc(sizeof *r.ptok * (size_t)r.K);
    r.patt = malloc(sizeof *r.patt * (size_t)r.K);
    if (!r.sents || !r.sent || !r.ids || !r.ptok || !r.patt || !r.from)
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
    if ((r.ahead = dec_steps_ahead(&r)) > 1 && r.K == 1) {
        if (!(r.gen_host = malloc(sizeof(int32_t) * slots * (size_t)r.ahead)))
            goto nomem;
        if ((st = alloc_device(&r, &r.gen, sizeof(int32_t) * slots * (size_t)(r.max_out + 1),
                               "greedy ids")) != CLF_OK)
            goto fail;
    } else if (r.ahead > 1 && (st = alloc_beam_ahead(&r)) != CLF_OK) {
        goto fail;
    }
    if ((st = dec_replay_init(&r)) != CLF_OK || (st = run_steps(&r, src, out)) != CLF_OK)
        goto fail;
    run_free(&r);
    return CLF_OK;
nomem:
    st = clf_error(CLF_ERR_NOMEM, "decode: out of host memory");
fail:
    clf_decode_result_free(out);
    run_free(&r);
    return st;
}
