/* _Translator: clformer/translator.h (a model directory, text in, text out) for the
 * clformer package's Translator. */
#include "py_common.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/translator.h"

/* ------------------------------------------------------------------------------------ */
/* _Translator                                                                          */
/* ------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD clf_translator *t; /* NULL once closed (or never opened) */
    PyThread_type_lock lock;
    clfpy_worker *worker; /* where t is opened and computes (py_common.h) */
} TranslatorObject;

/* The calls made on the worker, their arguments in a struct */
typedef struct {
    const clf_translator_opts *o;
    clf_translator **t;
} open_call;

static clf_status run_open(void *p)
{
    open_call *c = p;
    return clf_translator_open(c->o, c->t);
}

static int translator_init(TranslatorObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"model_dir", "backend",     "device",    "plugin_dir",
                             "threads",   "weight_type", "precision", NULL};
    PyObject *o_dir, *o_backend = Py_None, *o_device = Py_None, *o_plugin = Py_None;
    PyObject *o_wt = Py_None, *o_prec = Py_None;
    int threads = -1;
    clf_translator_opts o;
    clf_translator *t = NULL;
    clf_status st;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "U|OOOiOO:_Translator", kwlist, &o_dir, &o_backend,
                                     &o_device, &o_plugin, &threads, &o_wt, &o_prec))
        return -1;
    if (self->t) {
        PyErr_SetString(PyExc_RuntimeError, "_Translator already opened");
        return -1;
    }
    clf_translator_opts_default(&o);
    o.threads = threads;
    const char *wt = NULL, *prec = NULL;
    if (clfpy_opt_cstring(o_dir, "model_dir", &o.model_dir) ||
        clfpy_opt_cstring(o_backend, "backend", &o.backend) ||
        clfpy_opt_cstring(o_device, "device", &o.device) ||
        clfpy_opt_cstring(o_plugin, "plugin_dir", &o.plugin_dir) ||
        clfpy_opt_cstring(o_wt, "weight_type", &wt) ||
        clfpy_opt_cstring(o_prec, "precision", &prec))
        return -1;
    if (prec && (st = clf_precision_parse(prec, &o.precision)) != CLF_OK) {
        clfpy_raise_status(st, "precision");
        return -1;
    }
    if (wt) {
        if ((st = clf_weight_type_parse(wt, &o.weight_type)) != CLF_OK) {
            clfpy_raise_status(st, "weight_type");
            return -1;
        }
        o.weight_type_set = 1;
    }
    if (!self->worker && !(self->worker = clfpy_worker_start()))
        return -1;
    open_call c = {&o, &t};
    Py_BEGIN_ALLOW_THREADS st = clfpy_worker_run(self->worker, run_open, &c);
    Py_END_ALLOW_THREADS if (st != CLF_OK)
    {
        clfpy_raise_status(st, NULL);
        return -1;
    }
    self->t = t;
    return 0;
}

static PyObject *translator_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args, (void)kw;
    return clfpy_new_locked(type, offsetof(TranslatorObject, lock));
}

static void translator_dealloc(TranslatorObject *self)
{
    clf_translator_free(self->t); /* no call can be running: it would hold a reference */
    clfpy_worker_stop(self->worker);
    if (self->lock)
        PyThread_free_lock(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* With self->lock held: the open translator, or NULL and RuntimeError. */
static clf_translator *translator_get(TranslatorObject *self)
{
    if (!self->t)
        PyErr_SetString(PyExc_RuntimeError, "the translator is closed");
    return self->t;
}

static PyObject *translator_close(TranslatorObject *self, PyObject *unused)
{
    (void)unused;
    clfpy_lock_acquire(self->lock);
    clf_translator *t = self->t;
    clfpy_worker *w = self->worker;
    self->t = NULL;
    self->worker = NULL;
    PyThread_release_lock(self->lock);
    Py_BEGIN_ALLOW_THREADS clf_translator_free(t);
    clfpy_worker_stop(w);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* A new list of n items, item(ctx, i) each (a new reference, or NULL with an exception
 * set); NULL with an exception set. */
static PyObject *list_of(int n, PyObject *(*item)(const void *ctx, int i), const void *ctx)
{
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        PyObject *r = item(ctx, i);
        if (!r)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, r);
    }
    return list;
}

/* codes[i] as str (ctx: the language codes) */
static PyObject *code_item(const void *ctx, int i)
{
    const char(*codes)[CLF_LANGUAGE_CODE_MAX] = ctx;
    return PyUnicode_FromString(codes[i]);
}

/* dict of what was opened: backend, device, weight_type, src_vocab, tgt_vocab,
 * source_languages, target_languages. */
static PyObject *translator_info(TranslatorObject *self, PyObject *unused)
{
    (void)unused;
    clf_translator_info in;
    PyObject *d = NULL, *src_langs = NULL, *tgt_langs = NULL;
    clfpy_lock_acquire(self->lock);
    clf_translator *t = translator_get(self);
    if (!t)
        goto fail;
    clf_translator_get_info(t, &in);
    const clf_languages_config *lc = &in.config->languages;
    if (!(src_langs = list_of(lc->n_source, code_item, lc->source)) ||
        !(tgt_langs = list_of(lc->n_target, code_item, lc->target)))
        goto fail;
    d = Py_BuildValue(
        "{s:s,s:s,s:s,s:s,s:s,s:s,s:O,s:O,s:i,s:i,s:i,s:i,s:i}", "precision",
        clf_precision_name(in.precision), "backend", in.backend ? in.backend : "", "device",
        in.device ? in.device : "", "weight_type", clf_weight_type_name(in.weight_type),
        "src_vocab", in.src_vocab ? in.src_vocab : "", "tgt_vocab",
        in.tgt_vocab ? in.tgt_vocab : "", "source_languages", src_langs, "target_languages",
        tgt_langs, "max_len", in.config->model.max_len, "beam", in.config->generate.beam,
        "src_vocab_size", in.config->model.src_vocab, "tgt_vocab_size", in.config->model.tgt_vocab,
        "n_banned_ids", in.config->model.n_banned_ids);
fail:
    PyThread_release_lock(self->lock);
    Py_XDECREF(src_langs);
    Py_XDECREF(tgt_langs);
    return d;
}

/* The input of one translate or score call, converted with the GIL held: items keeps a
 * reference to every sentence (the caller's list may change while the GIL is released),
 * text/len point into those objects, ids/lens are the token-list form's. */
typedef struct {
    PyObject *items; /* tuple */
    int n;
    int tokens;        /* 1: lists of tokens (ids, lens); 0: text (text, len) */
    const char **text; /* [n] */
    size_t *len;       /* [n] */
    int32_t **ids;     /* [n] malloc'd each */
    int *lens;         /* [n] */
} batch_input;

static void batch_input_free(batch_input *b)
{
    if (b->ids)
        for (int i = 0; i < b->n; i++)
            free(b->ids[i]);
    free(b->ids);
    free(b->lens);
    free(b->text);
    free(b->len);
    Py_XDECREF(b->items);
    memset(b, 0, sizeof *b);
}

/* One sentence given as str or bytes: its UTF-8 bytes (bytes are taken as they are: the
 * translator refuses what is not UTF-8). */
static int sentence_bytes(PyObject *o, const char *what, int i, const char **s, size_t *n)
{
    Py_ssize_t k;
    if (PyUnicode_Check(o)) {
        *s = PyUnicode_AsUTF8AndSize(o, &k);
        if (!*s) {
            /* a lone surrogate: no UTF-8 spelling */
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s[%d]: not valid UTF-8 (a lone surrogate)", what, i);
            return -1;
        }
    } else if (PyBytes_Check(o)) {
        *s = PyBytes_AS_STRING(o);
        k = PyBytes_GET_SIZE(o);
    } else {
        PyErr_Format(PyExc_TypeError,
                     "%s[%d] must be a str, bytes or a list of str tokens, not %.100s", what, i,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *n = (size_t)k;
    return 0;
}

/* Converts source (a sequence of sentences) into b. tokens_ok: a list of tokens is
 * allowed (mapped to source ids with t, which the caller's lock protects). */
static int batch_input_read(PyObject *source, const char *what, clf_translator *t, int tokens_ok,
                            batch_input *b)
{
    memset(b, 0, sizeof *b);
    if (PyUnicode_Check(source) || PyBytes_Check(source)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of sentences, not a single %.100s", what,
                     Py_TYPE(source)->tp_name);
        return -1;
    }
    b->items = PySequence_Tuple(source);
    if (!b->items) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s must be a list of sentences, not %.100s", what,
                         Py_TYPE(source)->tp_name);
        }
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(b->items);
    if (n > INT32_MAX / 2) {
        PyErr_Format(PyExc_ValueError, "%s: too many sentences (%zd)", what, n);
        goto fail;
    }
    b->n = (int)n;
    if (n == 0)
        return 0;
    PyObject *first = PyTuple_GET_ITEM(b->items, 0);
    b->tokens = tokens_ok && (PyList_Check(first) || PyTuple_Check(first));
    if (b->tokens) {
        b->ids = calloc((size_t)n, sizeof *b->ids);
        b->lens = calloc((size_t)n, sizeof *b->lens);
        if (!b->ids || !b->lens) {
            PyErr_NoMemory();
            goto fail;
        }
        for (int i = 0; i < b->n; i++) {
            PyObject *s = PyTuple_GET_ITEM(b->items, i);
            if (!PyList_Check(s) && !PyTuple_Check(s)) {
                PyErr_Format(PyExc_TypeError,
                             "%s[%d] must be a list of str tokens like %s[0], not %.100s", what, i,
                             what, Py_TYPE(s)->tp_name);
                goto fail;
            }
            Py_ssize_t m = PySequence_Fast_GET_SIZE(s);
            if (m > CLF_TRANSLATE_SENTENCE_MAX) {
                PyErr_Format(PyExc_ValueError, "%s[%d]: %zd tokens, more than %d", what, i, m,
                             CLF_TRANSLATE_SENTENCE_MAX);
                goto fail;
            }
            b->ids[i] = malloc(sizeof(int32_t) * (size_t)(m ? m : 1));
            if (!b->ids[i]) {
                PyErr_NoMemory();
                goto fail;
            }
            b->lens[i] = (int)m;
            for (Py_ssize_t j = 0; j < m; j++) {
                PyObject *tok = PySequence_Fast_GET_ITEM(s, j);
                Py_ssize_t k;
                const char *ts;
                if (!PyUnicode_Check(tok)) {
                    PyErr_Format(PyExc_TypeError, "%s[%d][%zd]: a token must be a str, not %.100s",
                                 what, i, j, Py_TYPE(tok)->tp_name);
                    goto fail;
                }
                ts = PyUnicode_AsUTF8AndSize(tok, &k);
                int32_t id = ts && (size_t)k == strlen(ts) ? clf_translator_token_id(t, 0, ts) : -1;
                if (id < 0) {
                    PyErr_Clear();
                    PyErr_Format(PyExc_ValueError,
                                 "%s[%d][%zd]: token %R is not in the source vocabulary", what, i,
                                 j, tok);
                    goto fail;
                }
                b->ids[i][j] = id;
            }
        }
        return 0;
    }
    b->text = calloc((size_t)n, sizeof *b->text);
    b->len = calloc((size_t)n, sizeof *b->len);
    if (!b->text || !b->len) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int i = 0; i < b->n; i++)
        if (sentence_bytes(PyTuple_GET_ITEM(b->items, i), what, i, &b->text[i], &b->len[i]))
            goto fail;
    return 0;
fail:
    batch_input_free(b);
    return -1;
}

/* A target token's spelling as str (U+FFFD for bytes that are not UTF-8). */
static PyObject *token_str(clf_translator *t, int32_t id)
{
    const char *s = clf_translator_token(t, 1, id);
    if (!s)
        return PyUnicode_FromFormat("<id %d>", (int)id);
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

/* One sentence's result: a list of (tokens, text, score, logprob) per hypothesis, best
 * first; an empty sentence (no hypotheses) gives one empty hypothesis. */
static PyObject *translation_to_py(clf_translator *t, const clf_translation *r)
{
    PyObject *hyps = PyList_New(0);
    if (!hyps)
        return NULL;
    if (r->n_hyps == 0) {
        PyObject *h = Py_BuildValue("([]sff)", "", 0.0f, 0.0f);
        if (!h || PyList_Append(hyps, h)) {
            Py_XDECREF(h);
            Py_DECREF(hyps);
            return NULL;
        }
        Py_DECREF(h);
        return hyps;
    }
    for (int h = 0; h < r->n_hyps; h++) {
        const clf_translation_hyp *y = &r->hyps[h];
        PyObject *toks = PyList_New(y->len), *item = NULL;
        if (!toks)
            goto fail;
        for (int j = 0; j < y->len; j++) {
            PyObject *s = token_str(t, y->tokens[j]);
            if (!s) {
                Py_DECREF(toks);
                goto fail;
            }
            PyList_SET_ITEM(toks, j, s);
        }
        const char *text = y->text ? y->text : "";
        PyObject *txt = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
        if (txt)
            item = Py_BuildValue("(NNdd)", toks, txt, (double)y->score, (double)y->logprob);
        else
            Py_DECREF(toks);
        if (!item || PyList_Append(hyps, item)) {
            Py_XDECREF(item);
            goto fail;
        }
        Py_DECREF(item);
    }
    return hyps;
fail:
    Py_DECREF(hyps);
    return NULL;
}

/* A translate call's results, for list_of */
typedef struct {
    clf_translator *t;
    const clf_translation *out;
} translations;

static PyObject *translation_item(const void *ctx, int i)
{
    const translations *r = ctx;
    return translation_to_py(r->t, &r->out[i]);
}

typedef struct {
    clf_translator *t;
    const batch_input *b;
    const clf_translate_opts *o;
    clf_translation *out;
} translate_call;

static clf_status run_translate(void *p)
{
    const translate_call *c = p;
    const batch_input *b = c->b;
    return b->tokens ? clf_translator_translate_ids(c->t, (const int32_t *const *)b->ids, b->lens,
                                                    b->n, c->o, c->out)
                     : clf_translator_translate(c->t, b->text, b->len, b->n, c->o, c->out);
}

/* translate(source, beam, n_best, length_penalty, max_len, max_batch, want_scores) -> list
 * per sentence of [(tokens, text, score, logprob), ...]. beam -1, length_penalty None,
 * max_len 0: the config's generate: values; want_scores: greedy hypotheses scored too
 * (clf_translate_opts). A refused sentence raises ValueError naming its index. */
/* The call's languages (str or None each; None keeps the translator's), parsed before the
 * lock is taken; -1 with an exception set. */
static int languages_read(PyObject *o_src, PyObject *o_tgt, const char **src, const char **tgt)
{
    return clfpy_opt_cstring(o_src, "source_lang", src) ||
                   clfpy_opt_cstring(o_tgt, "target_lang", tgt)
               ? -1
               : 0;
}

/* Under the lock: sets the translator's languages where the call gave one; -1 with
 * ValueError naming the code when the model lacks it. */
static int languages_set(clf_translator *t, const char *src, const char *tgt)
{
    if (!src && !tgt)
        return 0;
    clf_status st = clf_translator_set_languages(t, src, tgt);
    if (st != CLF_OK) {
        clfpy_raise_status(st, NULL);
        return -1;
    }
    return 0;
}

static PyObject *translator_translate(TranslatorObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"source",    "beam",        "n_best",      "length_penalty", "max_len",
                             "max_batch", "want_scores", "source_lang", "target_lang",    NULL};
    PyObject *source, *o_lp = Py_None, *o_src = Py_None, *o_tgt = Py_None, *result = NULL;
    const char *src_lang, *tgt_lang;
    int beam = -1, n_best = 1, max_len = 0, max_batch = 32, want_scores = 0;
    clf_translate_opts o;
    clf_translation *out = NULL;
    batch_input b;
    clf_status st;
    int have_out = 0;

    memset(&b, 0, sizeof b);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|iiOiipOO:translate", kwlist, &source, &beam,
                                     &n_best, &o_lp, &max_len, &max_batch, &want_scores, &o_src,
                                     &o_tgt) ||
        languages_read(o_src, o_tgt, &src_lang, &tgt_lang))
        return NULL;
    clf_translate_opts_default(&o);
    if (beam == 0 || beam < -1 || beam > 1024)
        return PyErr_Format(PyExc_ValueError, "beam_size must be in 1..1024, not %d", beam);
    if (n_best < 1 || (beam > 0 && n_best > beam))
        return PyErr_Format(PyExc_ValueError, "num_hypotheses must be in 1..beam_size (%d), not %d",
                            beam, n_best);
    if (max_len < 0)
        return PyErr_Format(PyExc_ValueError, "max_decoding_length must be > 0, not %d", max_len);
    if (max_batch < 1)
        return PyErr_Format(PyExc_ValueError, "max_batch_size must be > 0, not %d", max_batch);
    o.beam = beam;
    o.n_best = n_best;
    o.max_len = max_len;
    o.max_batch = max_batch;
    o.want_scores = want_scores;
    if (o_lp != Py_None) {
        double lp = PyFloat_AsDouble(o_lp);
        if (lp == -1.0 && PyErr_Occurred())
            return NULL;
        if (!isfinite(lp) || lp < 0 || lp > 100)
            return PyErr_Format(PyExc_ValueError, "length_penalty must be in [0, 100], not %R",
                                o_lp);
        o.length_penalty = (float)lp;
    }

    clfpy_lock_acquire(self->lock);
    clf_translator *t = translator_get(self);
    if (!t || languages_set(t, src_lang, tgt_lang) || batch_input_read(source, "source", t, 1, &b))
        goto fail;
    if (b.n == 0) {
        result = PyList_New(0);
        goto fail;
    }
    out = calloc((size_t)b.n, sizeof *out);
    if (!out) {
        PyErr_NoMemory();
        goto fail;
    }
    translate_call c = {t, &b, &o, out};
    Py_BEGIN_ALLOW_THREADS st = clfpy_worker_run(self->worker, run_translate, &c);
    Py_END_ALLOW_THREADS if (st != CLF_OK)
    {
        clfpy_raise_status(st, NULL);
        goto fail;
    }
    have_out = 1;
    for (int i = 0; i < b.n; i++)
        if (out[i].status != CLF_OK) {
            PyErr_Format(out[i].status == CLF_ERR_INPUT ? PyExc_ValueError : PyExc_RuntimeError,
                         "source[%d]: %s", i,
                         out[i].error ? out[i].error : clf_status_name(out[i].status));
            goto fail;
        }
    result = list_of(b.n, translation_item, &(const translations){t, out});
fail:
    PyThread_release_lock(self->lock);
    if (have_out)
        clf_translations_free(out, b.n);
    free(out);
    batch_input_free(&b);
    return result;
}

/* A score call's results, for list_of: (logprob, tokens) per pair */
typedef struct {
    const float *logprob;
    const int *tokens;
} scores;

typedef struct {
    clf_translator *t;
    const char *const *src, *const *tgt;
    int n;
    float *logprob;
    int *tokens;
    char **error;
} score_call;

static clf_status run_score(void *p)
{
    const score_call *c = p;
    return clf_translator_score(c->t, c->src, c->tgt, c->n, c->logprob, c->tokens, c->error);
}

static PyObject *score_item(const void *ctx, int i)
{
    const scores *r = ctx;
    return Py_BuildValue("(di)", (double)r->logprob[i], r->tokens[i]);
}

/* score(source, target) -> list of (logprob, tokens) per pair. A pair that cannot be
 * scored raises ValueError naming its index and why. */
static PyObject *translator_score(TranslatorObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"source", "target", "source_lang", "target_lang", NULL};
    PyObject *source, *target, *o_src = Py_None, *o_tgt = Py_None, *result = NULL;
    const char *src_lang, *tgt_lang;
    batch_input bs, bt;
    float *logprob = NULL;
    int *tokens = NULL;
    char **error = NULL;
    const char **src = NULL, **tgt = NULL;
    clf_status st;

    memset(&bs, 0, sizeof bs);
    memset(&bt, 0, sizeof bt);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OO:score", kwlist, &source, &target, &o_src,
                                     &o_tgt) ||
        languages_read(o_src, o_tgt, &src_lang, &tgt_lang))
        return NULL;
    clfpy_lock_acquire(self->lock);
    clf_translator *t = translator_get(self);
    if (!t || languages_set(t, src_lang, tgt_lang) ||
        batch_input_read(source, "source", t, 0, &bs) ||
        batch_input_read(target, "target", t, 0, &bt))
        goto fail;
    if (bs.n != bt.n) {
        PyErr_Format(PyExc_ValueError, "source has %d sentences, target %d: they must pair up",
                     bs.n, bt.n);
        goto fail;
    }
    int n = bs.n;
    if (n == 0) {
        result = PyList_New(0);
        goto fail;
    }
    logprob = calloc((size_t)n, sizeof *logprob);
    tokens = calloc((size_t)n, sizeof *tokens);
    error = calloc((size_t)n, sizeof *error);
    src = calloc((size_t)n, sizeof *src);
    tgt = calloc((size_t)n, sizeof *tgt);
    if (!logprob || !tokens || !error || !src || !tgt) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        /* a NUL inside would end the C string early: refuse it here, as translate does */
        if (memchr(bs.text[i], 0, bs.len[i]) || memchr(bt.text[i], 0, bt.len[i])) {
            PyErr_Format(PyExc_ValueError, "%s[%d]: holds a NUL byte",
                         memchr(bs.text[i], 0, bs.len[i]) ? "source" : "target", i);
            goto fail;
        }
        src[i] = bs.text[i], tgt[i] = bt.text[i];
        /* bytes objects and str's UTF-8 are NUL-terminated already */
    }
    score_call c = {t, src, tgt, n, logprob, tokens, error};
    Py_BEGIN_ALLOW_THREADS st = clfpy_worker_run(self->worker, run_score, &c);
    Py_END_ALLOW_THREADS if (st != CLF_OK)
    {
        clfpy_raise_status(st, NULL);
        goto fail;
    }
    for (int i = 0; i < n; i++)
        if (error[i]) {
            PyErr_Format(PyExc_ValueError, "pair %d: %s", i, error[i]);
            goto fail;
        }
    result = list_of(n, score_item, &(const scores){logprob, tokens});
fail:
    PyThread_release_lock(self->lock);
    if (error)
        for (int i = 0; i < bs.n; i++)
            free(error[i]);
    free(error);
    free(logprob);
    free(tokens);
    free(src);
    free(tgt);
    batch_input_free(&bs);
    batch_input_free(&bt);
    return result;
}

/* tokenize(text, side=0) -> the tokens the model sees for text (side 0: source, 1:
 * target), without the framing. */
static PyObject *translator_tokenize(TranslatorObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"text", "side", NULL};
    PyObject *o_text, *result = NULL;
    int side = 0, n = 0;
    int32_t *ids = NULL;
    const char *s;
    size_t len;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:tokenize", kwlist, &o_text, &side))
        return NULL;
    if (sentence_bytes(o_text, "text", 0, &s, &len))
        return NULL;
    clfpy_lock_acquire(self->lock);
    clf_translator *t = translator_get(self);
    if (!t)
        goto done;
    clf_status st = clf_translator_encode(t, side, s, len, &ids, &n);
    if (st != CLF_OK) {
        clfpy_raise_status(st, "text");
        goto done;
    }
    if (!(result = PyList_New(n)))
        goto done;
    for (int i = 0; i < n; i++) {
        const char *tok = clf_translator_token(t, side, ids[i]);
        PyObject *o = tok ? PyUnicode_DecodeUTF8(tok, (Py_ssize_t)strlen(tok), "replace")
                          : PyUnicode_FromFormat("<id %d>", (int)ids[i]);
        if (!o) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, o);
    }
done:
    PyThread_release_lock(self->lock);
    free(ids);
    return result;
}

static PyMethodDef translator_methods[] = {
    {"translate", (PyCFunction)(void (*)(void))translator_translate, METH_VARARGS | METH_KEYWORDS,
     "translate(source, beam=-1, n_best=1, length_penalty=None, max_len=0, max_batch=32, "
     "want_scores=False)"},
    {"score", (PyCFunction)(void (*)(void))translator_score, METH_VARARGS | METH_KEYWORDS,
     "score(source, target) -> [(logprob, tokens)]"},
    {"tokenize", (PyCFunction)(void (*)(void))translator_tokenize, METH_VARARGS | METH_KEYWORDS,
     "tokenize(text, side=0) -> [token]"},
    {"info", (PyCFunction)translator_info, METH_NOARGS, "what was opened, as a dict"},
    {"close", (PyCFunction)translator_close, METH_NOARGS, "frees the model now"},
    {NULL, NULL, 0, NULL}};

PyTypeObject clfpy_TranslatorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "clformer._clformer._Translator",
    .tp_basicsize = sizeof(TranslatorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "_Translator(model_dir, backend=None, device=None, plugin_dir=None, threads=-1, "
              "weight_type=None, precision=None): clf_translator (use clformer.Translator)",
    .tp_new = translator_new,
    .tp_init = (initproc)translator_init,
    .tp_dealloc = (destructor)translator_dealloc,
    .tp_methods = translator_methods,
};
