/* Continuous translation (clformer/translator.h): sentences checked and framed as
 * translate does (sentence.c, translator.c's options), decoded by a clf_decode_stream,
 * their hypotheses joined back into text when they finish. */
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "translate/translator_private.h"

#define DEFAULT_MAX_ROWS 32

#define NOMEM() clf_error(CLF_ERR_NOMEM, "translate stream: out of host memory")

/* A sentence in the decoder: its decoder tag (id) and what its result needs. */
typedef struct inflight {
    uint64_t id, tag;
    int n_src;
} inflight;

typedef struct done {
    uint64_t tag;
    clf_translation tr;
} done;

struct clf_translator_stream {
    clf_translator *t;
    clf_decode_stream *ds;
    int max_out;
    uint64_t next_id;
    inflight *fl;
    int n_fl, cap_fl;
    done *done; /* FIFO of results to take */
    int n_done, cap_done;
};

void clf_translator_stream_free(clf_translator_stream *s)
{
    if (!s)
        return;
    clf_decode_stream_free(s->ds);
    for (int i = 0; i < s->n_done; i++)
        clf_translations_free(&s->done[i].tr, 1);
    free(s->done);
    free(s->fl);
    free(s);
}

clf_status clf_translator_stream_open(clf_translator *t, const clf_translator_stream_opts *o,
                                      clf_translator_stream **out)
{
    *out = NULL;
    if (!t)
        return clf_error(CLF_ERR_INPUT, "translate stream: no translator");
    const clf_translator_stream_opts none = {0};
    if (!o)
        o = &none;
    const int cap = t->cfg.model.max_len - 1;
    clf_decode_stream_opts d = {.max_rows = o->max_rows > 0 ? o->max_rows : DEFAULT_MAX_ROWS,
                                .max_src_len = t->cfg.model.max_len,
                                .max_out = o->max_out > 0                ? o->max_out
                                           : t->cfg.generate.max_len > 0 ? t->cfg.generate.max_len
                                                                         : cap,
                                .max_join_tokens = o->max_join_tokens > 0 ? o->max_join_tokens : 0,
                                .join_wait = o->join_wait > 0 ? o->join_wait : 0};
    if (d.max_out > cap)
        d.max_out = cap;
    clf_translator_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NOMEM();
    s->t = t;
    s->max_out = d.max_out;
    clf_status st = clf_decode_stream_open(t->model, &d, &s->ds);
    if (st != CLF_OK) {
        free(s);
        return st;
    }
    *out = s;
    return CLF_OK;
}

/* A result to take: status CLF_OK with no hypotheses (an empty sentence), or refused. */
static clf_status push_done(clf_translator_stream *s, uint64_t tag, const clf_translation *tr)
{
    if (!clf_grow((void **)&s->done, &s->cap_done, s->n_done + 1, sizeof *s->done, 16))
        return NOMEM();
    s->done[s->n_done++] = (done){.tag = tag, .tr = *tr};
    return CLF_OK;
}

clf_status clf_translator_stream_add(clf_translator_stream *s, const char *text, size_t len,
                                     const clf_translate_opts *o, uint64_t tag)
{
    clf_translator *t = s->t;
    call_opts c = {0};
    clf_status st = clf_translate_resolve(t, o, &c);
    if (st != CLF_OK)
        return st;
    if (c.d.want_attention || !c.d.use_cache)
        return clf_error(CLF_ERR_INPUT, "translate stream: decodes with the KV cache and "
                                        "without attention rows only");
    if (c.max_len > s->max_out)
        return clf_error(CLF_ERR_INPUT,
                         "translate stream: max_len %d is more than the stream's max_out %d",
                         c.max_len, s->max_out);
    int32_t *ids = NULL, *row = NULL;
    int n = 0;
    char *why = NULL;
    if (!text)
        why = strdup("no text (NULL)");
    else if ((st = clf_translate_sentence(t, 0, text, len, NULL, 0, &ids, &n, &why)) != CLF_OK)
        return st;
    if (!text && !why)
        return NOMEM();
    if (why || n == 0) { /* refused, or nothing to translate: finished now */
        clf_translation tr = {.status = why ? CLF_ERR_INPUT : CLF_OK, .error = why};
        if ((st = push_done(s, tag, &tr)) != CLF_OK)
            free(why);
        free(ids);
        return st;
    }
    const int S = n + t->framing;
    clf_decode_opts d = c.d;
    d.max_len = clf_translate_max_len(t, &c, n);
    if (d.max_len > s->max_out)
        d.max_len = s->max_out;
    d.want_scores = c.score_greedy;
    if (!clf_grow((void **)&s->fl, &s->cap_fl, s->n_fl + 1, sizeof *s->fl, 16) ||
        !(row = malloc(sizeof(int32_t) * (size_t)S))) {
        free(ids);
        return NOMEM();
    }
    clf_framing_source_row(&t->fr, ids, n, S, row);
    free(ids);
    const uint64_t id = s->next_id++;
    st = clf_decode_stream_add(s->ds, row, S, &d, id);
    free(row);
    if (st != CLF_OK)
        return st;
    s->fl[s->n_fl++] = (inflight){.id = id, .tag = tag, .n_src = n};
    return CLF_OK;
}

/* The decoder's finished sentences as text. */
static clf_status collect(clf_translator_stream *s)
{
    uint64_t id;
    clf_decode_result r;
    while (clf_decode_stream_take(s->ds, &id, &r)) {
        int i = 0;
        while (i < s->n_fl && s->fl[i].id != id)
            i++;
        if (i == s->n_fl) { /* cannot happen: every decoder tag is in flight */
            clf_decode_result_free(&r);
            continue;
        }
        const inflight f = s->fl[i];
        memmove(s->fl + i, s->fl + i + 1, sizeof *s->fl * (size_t)(s->n_fl - i - 1));
        s->n_fl--;
        clf_translation tr = {.status = CLF_OK, .n_src = f.n_src};
        clf_status st = CLF_OK;
        if (!(tr.hyps = calloc((size_t)r.n_best, sizeof *tr.hyps)))
            st = NOMEM();
        else
            tr.n_hyps = r.n_best;
        for (int j = 0; j < r.n_best && st == CLF_OK; j++)
            st = clf_translate_fill_hyp(s->t, &r.hyps[j], r.src_len, f.n_src + s->t->framing,
                                        &tr.hyps[j]);
        clf_decode_result_free(&r);
        if (st == CLF_OK)
            st = push_done(s, f.tag, &tr);
        if (st != CLF_OK) {
            clf_translations_free(&tr, 1);
            return st;
        }
    }
    return CLF_OK;
}

clf_status clf_translator_stream_step(clf_translator_stream *s)
{
    clf_status st = clf_decode_stream_step(s->ds);
    return st != CLF_OK ? st : collect(s);
}

int clf_translator_stream_take(clf_translator_stream *s, uint64_t *tag, clf_translation *out)
{
    if (s->n_done == 0)
        return 0;
    *tag = s->done[0].tag;
    *out = s->done[0].tr;
    memmove(s->done, s->done + 1, sizeof *s->done * (size_t)--s->n_done);
    return 1;
}

int clf_translator_stream_cancel(clf_translator_stream *s, uint64_t tag)
{
    int n = 0, kept = 0;
    for (int i = 0; i < s->n_fl; i++) {
        if (s->fl[i].tag == tag)
            n += clf_decode_stream_cancel(s->ds, s->fl[i].id);
        else
            s->fl[kept++] = s->fl[i];
    }
    s->n_fl = kept;
    kept = 0;
    for (int i = 0; i < s->n_done; i++) {
        if (s->done[i].tag == tag) {
            clf_translations_free(&s->done[i].tr, 1);
            n++;
        } else {
            s->done[kept++] = s->done[i];
        }
    }
    s->n_done = kept;
    return n;
}

void clf_translator_stream_get_state(const clf_translator_stream *s, clf_decode_stream_state *st)
{
    clf_decode_stream_get_state(s->ds, st);
    st->finished = s->n_done;
}
