/* A model directory opened for translation (clformer/translator.h): opening, what was
 * opened, and translate: sentences tokenized and checked (sentence.c), framed, decoded in
 * batches (clf_decode) and their hypotheses joined back into text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "translate/translator_private.h"

/* Sentences decoded together by default: enough rows for the GEMMs to reach most of their
 * speed on a CPU, few enough that the first results come quickly. */
#define DEFAULT_MAX_BATCH 32
/* GNMT's length-penalty alpha (Wu et al. 2016), a common default for beam search. */
#define DEFAULT_BEAM_LENGTH_PENALTY 0.6f
/* Default output limit: 2 * source tokens + 10, room for any plausible translation. */
#define MAX_LEN_FACTOR 2
#define MAX_LEN_EXTRA  10

#define NOMEM() clf_error(CLF_ERR_NOMEM, "translate: out of host memory")

void clf_translator_opts_default(clf_translator_opts *o)
{
    memset(o, 0, sizeof *o);
    o->threads = -1;
}

void clf_translate_opts_default(clf_translate_opts *o)
{
    memset(o, 0, sizeof *o);
    o->beam = -1;
    o->n_best = 1;
    o->length_penalty = -2.0f;
    o->beam_style = -1;
    o->forced_eos = -1;
    o->early_stopping = -1;
    o->use_cache = 1;
    o->max_batch = DEFAULT_MAX_BATCH;
}

/* The weights, the backend and the model on it: created from the mapped weights file,
 * converted on the way (the host never holds every F32 value at once), with weight type
 * o's, else the file's; with int8 the matrices go from the file to their int8 copy. */
static clf_status open_model(clf_translator *t, const clf_translator_opts *o, const char *w_path)
{
    const clf_model_config *mc = &t->cfg.model;
    clf_weights *w = NULL;
    clf_status st = clf_weights_map(w_path, mc, &w);
    if (st != CLF_OK)
        return st;
    if ((st = clf_config_open_backend(&t->cfg, o->backend, o->device, o->threads, o->plugin_dir,
                                      &t->api, &t->be)) != CLF_OK) {
        clf_weights_free(w);
        return st;
    }
    if (t->api->describe(t->be, t->device, sizeof t->device) != CLF_OK) {
        clf_clear_error();
        snprintf(t->device, sizeof t->device, "%s", t->api->name);
    }
    t->weight_type = o->weight_type;
    st = clf_model_create_inference(mc, &w, t->api, t->be, o->weight_type_set, &t->weight_type,
                                    t->note, sizeof t->note, &t->model);
    char note[512];
    if (st != CLF_OK ||
        (st = clf_model_set_precision(t->model, o->precision, note, sizeof note)) != CLF_OK ||
        !note[0])
        return st;
    const size_t used = strlen(t->note);
    snprintf(t->note + used, sizeof t->note - used, "%s%s", used ? "; " : "", note);
    return CLF_OK;
}

clf_status clf_translator_open(const clf_translator_opts *o, clf_translator **out)
{
    clf_status st;
    clf_model_files *files = NULL;
    clf_translator *t = NULL;
    if (!o || !out)
        return clf_error(CLF_ERR_INPUT, "clf_translator_open: NULL argument");
    *out = NULL;
    if (!(t = calloc(1, sizeof *t)) || !(files = calloc(1, sizeof *files))) {
        st = NOMEM();
        goto fail;
    }
    if (o->model_dir && (st = clf_model_files_find(o->model_dir, o->plugin_dir, files)) != CLF_OK)
        goto fail;
    const int dir = o->model_dir != NULL;
    const char *cfg_path = o->config_path ? o->config_path : dir ? files->config : NULL;
    const char *w_path = o->weights_path ? o->weights_path : dir ? files->weights : NULL;
    const char *src = o->src_vocab ? o->src_vocab : dir ? files->src_vocab : NULL;
    const char *tgt = o->tgt_vocab ? o->tgt_vocab : dir ? files->tgt_vocab : NULL;
    if (!cfg_path || !w_path || !src || !tgt) {
        st = clf_error(CLF_ERR_INPUT, "translator: no model_dir, and not each of config_path, "
                                      "weights_path, src_vocab and tgt_vocab");
        goto fail;
    }
    /* the directory's mapping only for the directory's own vocabularies */
    const char *map = dir && !o->src_vocab && !o->tgt_vocab ? files->vocab_map : NULL;
    if ((st = clf_config_load_with_plugins(cfg_path, o->plugin_dir, &t->cfg)) != CLF_OK ||
        (st = clf_translate_vocabs_load(t, src, tgt, map)) != CLF_OK ||
        (st = open_model(t, o, w_path)) != CLF_OK)
        goto fail;
    /* a side with one language has it from the start */
    const clf_languages_config *l = &t->cfg.languages;
    t->forced_bos = -1;
    if ((t->cfg.model.source_language != CLF_LANG_NONE && l->n_source == 1 &&
         (st = clf_translator_set_languages(t, l->source[0], NULL)) != CLF_OK) ||
        (t->cfg.model.target_language != CLF_TGT_LANG_NONE && l->n_target == 1 &&
         (st = clf_translator_set_languages(t, NULL, l->target[0])) != CLF_OK))
        goto fail;
    clf_decode_opts_default(&t->cfg.model, &t->dopts);
    t->dopts.sos_id = t->fr.tgt_start;
    t->dopts.eos_id = t->fr.tgt_eos;
    t->dopts.pad_id = t->fr.tgt_pad;
    free(files);
    *out = t;
    return CLF_OK;
fail:
    free(files);
    clf_translator_free(t);
    return st;
}

void clf_translator_free(clf_translator *t)
{
    if (!t)
        return;
    clf_model_free(t->model);
    if (t->be)
        t->api->close(t->be);
    clf_tokenizer_free(t->tok[0]);
    clf_tokenizer_free(t->tok[1]);
    free(t);
}

void clf_translator_get_stats(const clf_translator *t, clf_translator_stats *out)
{
    *out = t->stats;
}

void clf_translator_get_info(const clf_translator *t, clf_translator_info *info)
{
    memset(info, 0, sizeof *info);
    info->config = &t->cfg;
    info->backend = t->api->name;
    info->device = t->device;
    info->weight_type = t->weight_type;
    info->src_vocab = t->vocab[0];
    info->tgt_vocab = t->vocab[1];
    info->src_words = clf_tokenizer_size(t->tok[0]);
    info->tgt_words = clf_tokenizer_size(t->tok[1]);
    info->note = t->note[0] ? t->note : NULL;
    info->precision = clf_model_precision(t->model, &info->bf16_arith);
}

/* The id of code's token on side (0 source, 1 target), or -1 with the error set. */
static int32_t language_id(const clf_translator *t, int side, const char *code)
{
    int32_t id;
    clf_status st =
        clf_tokenizer_language_id(t->tok[side], &t->cfg, side, code, t->vocab[side], &id);
    if (st != CLF_OK)
        clf_error_context(st, "translate");
    return id;
}

clf_status clf_translator_set_languages(clf_translator *t, const char *source, const char *target)
{
    if (!t)
        return clf_error(CLF_ERR_INPUT, "clf_translator_set_languages: NULL translator");
    int32_t src = source ? language_id(t, 0, source) : t->fr.src_lang;
    if (src < 0 && source)
        return CLF_ERR_INPUT;
    int32_t tgt = target ? language_id(t, 1, target) : t->forced_bos;
    if (tgt < 0 && target)
        return CLF_ERR_INPUT;
    t->fr.src_lang = src;
    t->forced_bos = tgt;
    return CLF_OK;
}

int32_t clf_translator_token_id(const clf_translator *t, int side, const char *token)
{
    if (!t || (side != 0 && side != 1) || !token)
        return -1;
    return clf_tokenizer_id(t->tok[side], token);
}

const char *clf_translator_token(const clf_translator *t, int side, int32_t id)
{
    if (!t || (side != 0 && side != 1))
        return NULL;
    return clf_tokenizer_word(t->tok[side], id);
}

clf_status clf_translator_encode(const clf_translator *t, int side, const char *text, size_t len,
                                 int32_t **ids, int *n)
{
    if (!t || !text || !ids || !n)
        return clf_error(CLF_ERR_INPUT, "clf_translator_encode: NULL argument");
    if (side != 0 && side != 1)
        return clf_error(CLF_ERR_INPUT,
                         "clf_translator_encode: side %d: expected 0 (source) "
                         "or 1 (target)",
                         side);
    *ids = NULL;
    *n = 0;
    return clf_tokenizer_encode(t->tok[side], text, len, ids, n);
}

int clf_translate_max_len(const clf_translator *t, const call_opts *c, int longest)
{
    const int cap = t->cfg.model.max_len - 1;
    const int n = c->max_len > 0 ? c->max_len : MAX_LEN_FACTOR * longest + MAX_LEN_EXTRA;
    return n < cap ? n : cap;
}

clf_status clf_translate_resolve(const clf_translator *t, const clf_translate_opts *o, call_opts *c)
{
    clf_translate_opts def;
    const clf_generate_config *g = &t->cfg.generate;
    if (!o) {
        clf_translate_opts_default(&def);
        o = &def;
    }
    c->d = t->dopts;
    if (t->cfg.model.source_language != CLF_LANG_NONE && t->fr.src_lang < 0)
        return clf_error(CLF_ERR_INPUT,
                         "translate: %s needs a source language (--source-lang CODE; `clformer "
                         "info -m DIR` lists them)",
                         t->cfg.path);
    if (t->cfg.model.target_language != CLF_TGT_LANG_NONE && t->forced_bos < 0)
        return clf_error(CLF_ERR_INPUT,
                         "translate: %s needs a target language (--target-lang CODE; `clformer "
                         "info -m DIR` lists them)",
                         t->cfg.path);
    c->d.forced_bos_id = t->forced_bos;
    c->d.beam = o->beam > 0 ? o->beam : g->beam;
    c->d.n_best = o->n_best > 0 ? o->n_best : 1;
    if (c->d.n_best > c->d.beam)
        return o->beam > 0 ? clf_error(CLF_ERR_INPUT, "translate: n_best %d is more than beam %d",
                                       c->d.n_best, c->d.beam)
                           : clf_error(CLF_ERR_INPUT,
                                       "translate: n_best %d is more than %s's generate.beam %d "
                                       "(give beam)",
                                       c->d.n_best, t->cfg.path, c->d.beam);
    int style = o->beam_style >= 0 ? o->beam_style : g->beam_style;
    if (style != CLF_BEAM_GNMT && style != CLF_BEAM_HF)
        return clf_error(CLF_ERR_INPUT, "translate: beam_style %d: expected %d (gnmt) or %d (hf)",
                         style, CLF_BEAM_GNMT, CLF_BEAM_HF);
    c->d.style = (clf_beam_style)style;
    c->d.forced_eos = o->forced_eos >= 0 ? o->forced_eos != 0 : g->forced_eos;
    c->d.early_stopping = o->early_stopping >= 0 ? o->early_stopping != 0 : g->early_stopping;
    c->max_len = o->max_len > 0 ? o->max_len : g->max_len;
    float lp = o->length_penalty;
    if (lp < -1.5f) /* not given */
        lp = g->length_penalty;
    if (lp < 0.0f) /* auto */
        lp = c->d.beam > 1 ? DEFAULT_BEAM_LENGTH_PENALTY : 0.0f;
    if (!(lp <= 100.0f))
        return clf_error(CLF_ERR_INPUT, "translate: length_penalty %g: expected one in [0, 100]",
                         (double)lp);
    c->d.length_penalty = lp;
    c->d.use_cache = o->use_cache != 0;
    c->d.want_attention = o->want_attention != 0;
    c->d.sync_steps = o->sync_steps;
    if (o->sync_steps < 0 || o->sync_steps > CLF_DECODE_SYNC_STEPS_MAX)
        return clf_error(CLF_ERR_INPUT, "translate: sync_steps %d is outside [0, %d]",
                         o->sync_steps, CLF_DECODE_SYNC_STEPS_MAX);
    c->max_batch = o->max_batch > 0 ? o->max_batch : DEFAULT_MAX_BATCH;
    c->score_greedy = o->want_scores && c->d.beam == 1 && t->cfg.model.n_banned_ids == 0;
    return CLF_OK;
}

clf_status clf_translate_fill_hyp(const clf_translator *t, const clf_hypothesis *h, int src_len,
                                  int cols, clf_translation_hyp *out)
{
    const int from = t->cfg.model.specials_from;
    const int size =
        from >= 0 && from < clf_tokenizer_size(t->tok[1]) ? from : clf_tokenizer_size(t->tok[1]);
    int kept = 0;
    out->len = h->len;
    out->finished = h->finished;
    out->logprob = h->logprob;
    out->score = h->score;
    out->attn_cols = cols;
    if (!(out->tokens = malloc((size_t)(h->len > 0 ? h->len : 1) * sizeof *out->tokens)))
        return NOMEM();
    if (h->len > 0)
        memcpy(out->tokens, h->tokens, (size_t)h->len * sizeof *out->tokens);
    int32_t *ids = malloc((size_t)(h->len > 0 ? h->len : 1) * sizeof *ids);
    if (!ids)
        return NOMEM();
    for (int i = 0; i < h->len; i++)
        if (h->tokens[i] >= 0 && h->tokens[i] < size)
            ids[kept++] = h->tokens[i];
    clf_status st = clf_tokenizer_decode(t->tok[1], ids, kept, 1, &out->text);
    free(ids);
    if (st != CLF_OK)
        return st;
    for (char *p = out->text; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    if (t->cfg.model.clean_up_spaces)
        clf_text_clean_up_spaces(out->text);
    if (h->attention) {
        const int rows = h->len + h->finished;
        if (!(out->attention = malloc((size_t)(rows > 0 ? rows : 1) * cols * sizeof(float))))
            return NOMEM();
        for (int r = 0; r < rows; r++)
            memcpy(out->attention + (size_t)r * cols, h->attention + (size_t)r * src_len,
                   (size_t)cols * sizeof(float));
    }
    return CLF_OK;
}

/* want_scores of greedy decoding: the log-probability of each decoded sentence's hypothesis
 * by teacher forcing, and its score under d's length penalty. */
static clf_status score_greedy(clf_translator *t, int32_t *const *ids, const int *lens, int from,
                               int to, const clf_decode_opts *d, clf_translation *out)
{
    clf_status st = CLF_OK;
    const int n = to - from;
    int32_t **src = calloc((size_t)n, sizeof *src), **tgt = calloc((size_t)n, sizeof *tgt);
    int *sn = calloc((size_t)n, sizeof *sn), *tn = calloc((size_t)n, sizeof *tn);
    int *eos = calloc((size_t)n, sizeof *eos);
    float *lp = calloc((size_t)n, sizeof *lp);
    clf_translation_hyp **h = calloc((size_t)n, sizeof *h);
    int rows = 0;
    if (!src || !tgt || !sn || !tn || !eos || !lp || !h) {
        st = NOMEM();
        goto fail;
    }
    for (int i = from; i < to; i++) {
        if (out[i].n_hyps == 0)
            continue;
        h[rows] = &out[i].hyps[0];
        src[rows] = ids[i];
        sn[rows] = lens[i];
        tgt[rows] = h[rows]->tokens;
        tn[rows] = h[rows]->len;
        eos[rows] = h[rows]->finished;
        rows++;
    }
    if ((st = clf_translate_score_rows(t, src, sn, tgt, tn, eos, rows, lp)) != CLF_OK)
        goto fail;
    for (int r = 0; r < rows; r++) {
        h[r]->logprob = lp[r];
        h[r]->score = lp[r] / clf_decode_length_penalty(d, h[r]->len + h[r]->finished);
    }
fail:
    free(src);
    free(tgt);
    free(sn);
    free(tn);
    free(eos);
    free(lp);
    free(h);
    return st;
}

/* Decodes sentences [from, to) that are neither empty nor refused, in one clf_decode call. */
static clf_status decode_batch(clf_translator *t, int32_t *const *ids, const int *lens, int from,
                               int to, const call_opts *c, clf_translation *out)
{
    clf_status st = CLF_OK;
    clf_decode_result res = {0};
    int rows = 0, longest = 0;
    for (int i = from; i < to; i++)
        if (lens[i] > 0 && out[i].status == CLF_OK) {
            rows++;
            if (lens[i] > longest)
                longest = lens[i];
        }
    if (rows == 0)
        return CLF_OK;
    const int S = longest + t->framing;
    int32_t *src = malloc((size_t)rows * S * sizeof *src);
    if (!src)
        return NOMEM();
    int r = 0;
    for (int i = from; i < to; i++) {
        if (lens[i] == 0 || out[i].status != CLF_OK)
            continue;
        clf_framing_source_row(&t->fr, ids[i], lens[i], S, src + (size_t)r++ * S);
    }
    clf_decode_opts d = c->d;
    d.max_len = clf_translate_max_len(t, c, longest);
    st = clf_decode(t->model, src, rows, S, &d, &res);
    free(src);
    if (st != CLF_OK)
        return st;
    t->stats.steps += res.steps;
    t->stats.step_calls += res.step_calls;
    t->stats.step_s += res.step_s;
    t->stats.host_s += res.host_s;
    r = 0;
    for (int i = from; i < to && st == CLF_OK; i++) {
        if (lens[i] == 0 || out[i].status != CLF_OK)
            continue;
        const clf_hypothesis *best = &res.hyps[(size_t)r++ * res.n_best];
        if (!(out[i].hyps = calloc((size_t)res.n_best, sizeof *out[i].hyps))) {
            st = NOMEM();
            break;
        }
        out[i].n_hyps = res.n_best;
        for (int j = 0; j < res.n_best && st == CLF_OK; j++)
            st = clf_translate_fill_hyp(t, &best[j], res.src_len, lens[i] + t->framing,
                                        &out[i].hyps[j]);
    }
    clf_decode_result_free(&res);
    if (st == CLF_OK && c->score_greedy)
        st = score_greedy(t, ids, lens, from, to, &d, out);
    return st;
}

/* translate (by_text) and translate_ids. */
static clf_status translate(clf_translator *t, int by_text, const char *const *text,
                            const size_t *len, const int32_t *const *in_ids, const int *in_lens,
                            int n, const clf_translate_opts *o, clf_translation *out)
{
    clf_status st;
    call_opts c = {0};
    int32_t **ids = NULL;
    int *lens = NULL;
    if (!t || n < 0 || (n > 0 && (!out || (by_text ? !text : !in_lens))))
        return clf_error(CLF_ERR_INPUT, "translate: NULL argument or a negative count");
    if ((st = clf_translate_resolve(t, o, &c)) != CLF_OK)
        return st;
    if (n == 0)
        return CLF_OK;
    memset(out, 0, (size_t)n * sizeof *out);
    if (!(ids = calloc((size_t)n, sizeof *ids)) || !(lens = calloc((size_t)n, sizeof *lens))) {
        st = NOMEM();
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        char *why = NULL;
        if (by_text && !text[i]) {
            if (!(why = strdup("no text (NULL)"))) {
                st = NOMEM();
                goto fail;
            }
        } else if (by_text)
            st = clf_translate_sentence(t, 0, text[i], len ? len[i] : strlen(text[i]), NULL, 0,
                                        &ids[i], &lens[i], &why);
        else
            st = clf_translate_sentence(t, 0, NULL, 0, in_ids ? in_ids[i] : NULL, in_lens[i],
                                        &ids[i], &lens[i], &why);
        if (st != CLF_OK)
            goto fail;
        out[i].n_src = lens[i];
        if (why) {
            out[i].status = CLF_ERR_INPUT;
            out[i].error = why;
        }
    }
    for (int from = 0; from < n && st == CLF_OK; from += c.max_batch) {
        int to = n - from > c.max_batch ? from + c.max_batch : n;
        st = decode_batch(t, ids, lens, from, to, &c, out);
    }
fail:
    for (int i = 0; ids && i < n; i++)
        free(ids[i]);
    free(ids);
    free(lens);
    if (st != CLF_OK) {
        clf_translations_free(out, n);
        memset(out, 0, (size_t)n * sizeof *out);
    }
    return st;
}

clf_status clf_translator_translate(clf_translator *t, const char *const *text, const size_t *len,
                                    int n, const clf_translate_opts *o, clf_translation *out)
{
    return translate(t, 1, text, len, NULL, NULL, n, o, out);
}

clf_status clf_translator_translate_ids(clf_translator *t, const int32_t *const *ids,
                                        const int *lens, int n, const clf_translate_opts *o,
                                        clf_translation *out)
{
    return translate(t, 0, NULL, NULL, ids, lens, n, o, out);
}

void clf_translations_free(clf_translation *r, int n)
{
    for (int i = 0; r && i < n; i++) {
        free(r[i].error);
        for (int j = 0; j < r[i].n_hyps && r[i].hyps; j++) {
            free(r[i].hyps[j].text);
            free(r[i].hyps[j].tokens);
            free(r[i].hyps[j].attention);
        }
        free(r[i].hyps);
        memset(&r[i], 0, sizeof r[i]);
    }
}
