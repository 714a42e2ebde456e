/* clformer._clformer - the CPython extension under the clformer package.
 *
 * Two types over libclformer's public API, each with a lock of its own: _Translator
 * (clformer/translator.h: a model directory, text in, text out) and _Model
 * (clformer/model.h: a config's forward pass on int32 buffers). The package's
 * clformer/__init__.py builds the public API (Translator, Model, the result types) on
 * them; this file converts, checks and calls.
 *
 * Threads: every call that runs the model releases the GIL. A libclformer object is used
 * by one thread at a time (translator.h), so each wrapper holds a PyThread lock around
 * its use; a thread waiting for it has released the GIL. Errors: clformer's one-line
 * message (thread-local, read in the calling thread) raised as ValueError for bad input,
 * OSError for files, MemoryError for allocation and RuntimeError for the device. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/backend.h"
#include "clformer/config.h"
#include "clformer/model.h"
#include "clformer/status.h"
#include "clformer/translator.h"
#include "clformer/weights.h"

/* clformer's status as the Python exception a caller expects, with its message. */
static PyObject *raise_status(clf_status st, const char *prefix)
{
    PyObject *type;
    const char *msg = clf_last_error();
    switch (st) {
    case CLF_ERR_INPUT:
        type = PyExc_ValueError;
        break;
    case CLF_ERR_IO:
        type = PyExc_OSError;
        break;
    case CLF_ERR_NOMEM:
        type = PyExc_MemoryError;
        break;
    default: /* backend, unsupported, internal */
        type = PyExc_RuntimeError;
        break;
    }
    if (!msg || !msg[0])
        msg = clf_status_name(st);
    if (prefix)
        PyErr_Format(type, "%s: %s", prefix, msg);
    else
        PyErr_SetString(type, msg);
    clf_clear_error();
    return NULL;
}

/* Takes lock without holding the GIL while it waits (another thread may hold the lock
 * for a whole batch, with the GIL released). */
static void lock_acquire(PyThread_type_lock lock)
{
    if (!PyThread_acquire_lock(lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
}

/* A str or bytes argument that may be None, as a C string (NULL for None). A str with a
 * NUL cannot be a path or a name: ValueError. */
static int opt_cstring(PyObject *o, const char *what, const char **out)
{
    Py_ssize_t n;
    *out = NULL;
    if (o == NULL || o == Py_None)
        return 0;
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str, not %.100s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = PyUnicode_AsUTF8AndSize(o, &n);
    if (!*out)
        return -1;
    if ((size_t)n != strlen(*out)) {
        PyErr_Format(PyExc_ValueError, "%s holds a NUL character", what);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* _Translator                                                                          */
/* ------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD clf_translator *t; /* NULL once closed (or never opened) */
    PyThread_type_lock lock;
} TranslatorObject;

static int translator_init(TranslatorObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"model_dir", "backend",     "device", "plugin_dir",
                             "threads",   "weight_type", NULL};
    PyObject *o_dir, *o_backend = Py_None, *o_device = Py_None, *o_plugin = Py_None;
    PyObject *o_wt = Py_None;
    int threads = -1;
    clf_translator_opts o;
    clf_translator *t = NULL;
    clf_status st;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "U|OOOiO:_Translator", kwlist, &o_dir, &o_backend,
                                     &o_device, &o_plugin, &threads, &o_wt))
        return -1;
    if (self->t) {
        PyErr_SetString(PyExc_RuntimeError, "_Translator already opened");
        return -1;
    }
    clf_translator_opts_default(&o);
    o.threads = threads;
    const char *wt = NULL;
    if (opt_cstring(o_dir, "model_dir", &o.model_dir) ||
        opt_cstring(o_backend, "backend", &o.backend) ||
        opt_cstring(o_device, "device", &o.device) ||
        opt_cstring(o_plugin, "plugin_dir", &o.plugin_dir) || opt_cstring(o_wt, "weight_type", &wt))
        return -1;
    if (wt) {
        if ((st = clf_weight_type_parse(wt, &o.weight_type)) != CLF_OK) {
            raise_status(st, "weight_type");
            return -1;
        }
        o.weight_type_set = 1;
    }
    Py_BEGIN_ALLOW_THREADS st = clf_translator_open(&o, &t);
    Py_END_ALLOW_THREADS if (st != CLF_OK)
    {
        raise_status(st, NULL);
        return -1;
    }
    self->t = t;
    return 0;
}

/* A new object of type with its lock at byte offset lock_at (both types hold one). */
static PyObject *new_locked(PyTypeObject *type, size_t lock_at)
{
    PyObject *self = type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    PyThread_type_lock *lock = (PyThread_type_lock *)((char *)self + lock_at);
    if (!(*lock = PyThread_allocate_lock())) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return self;
}

static PyObject *translator_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args, (void)kw;
    return new_locked(type, offsetof(TranslatorObject, lock));
}

static void translator_dealloc(TranslatorObject *self)
{
    clf_translator_free(self->t); /* no call can be running: it would hold a reference */
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
    lock_acquire(self->lock);
    clf_translator *t = self->t;
    self->t = NULL;
    PyThread_release_lock(self->lock);
    Py_BEGIN_ALLOW_THREADS clf_translator_free(t);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* dict of what was opened: backend, device, weight_type, src_vocab, tgt_vocab,
 * source_languages, target_languages. */
static PyObject *translator_info(TranslatorObject *self, PyObject *unused)
{
    (void)unused;
    clf_translator_info in;
    PyObject *d = NULL, *src_langs = NULL, *tgt_langs = NULL;
    lock_acquire(self->lock);
    clf_translator *t = translator_get(self);
    if (!t)
        goto fail;
    clf_translator_get_info(t, &in);
    const clf_languages_config *lc = &in.config->languages;
    src_langs = PyList_New(lc->n_source);
    tgt_langs = PyList_New(lc->n_target);
    if (!src_langs || !tgt_langs)
        goto fail;
    for (int i = 0; i < lc->n_source; i++) {
        PyObject *code = PyUnicode_FromString(lc->source[i]);
        if (!code)
            goto fail;
        PyList_SET_ITEM(src_langs, i, code);
    }
    for (int i = 0; i < lc->n_target; i++) {
        PyObject *code = PyUnicode_FromString(lc->target[i]);
        if (!code)
            goto fail;
        PyList_SET_ITEM(tgt_langs, i, code);
    }
    d = Py_BuildValue(
        "{s:s,s:s,s:s,s:s,s:s,s:O,s:O,s:i,s:i,s:i,s:i,s:i}", "backend",
        in.backend ? in.backend : "", "device", in.device ? in.device : "", "weight_type",
        clf_weight_type_name(in.weight_type), "src_vocab", in.src_vocab ? in.src_vocab : "",
        "tgt_vocab", in.tgt_vocab ? in.tgt_vocab : "", "source_languages", src_langs,
        "target_languages", tgt_langs, "max_len", in.config->model.max_len, "beam",
        in.config->generate.beam, "src_vocab_size", in.config->model.src_vocab, "tgt_vocab_size",
        in.config->model.tgt_vocab, "n_banned_ids", in.config->model.n_banned_ids);
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

/* translate(source, beam, n_best, length_penalty, max_len, max_batch, want_scores) -> list
 * per sentence of [(tokens, text, score, logprob), ...]. beam -1, length_penalty None,
 * max_len 0: the config's generate: values; want_scores: greedy hypotheses scored too
 * (clf_translate_opts). A refused sentence raises ValueError naming its index. */
static PyObject *translator_translate(TranslatorObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"source",  "beam",      "n_best",      "length_penalty",
                             "max_len", "max_batch", "want_scores", NULL};
    PyObject *source, *o_lp = Py_None, *result = NULL;
    int beam = -1, n_best = 1, max_len = 0, max_batch = 32, want_scores = 0;
    clf_translate_opts o;
    clf_translation *out = NULL;
    batch_input b;
    clf_status st;
    int have_out = 0;

    memset(&b, 0, sizeof b);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|iiOiip:translate", kwlist, &source, &beam,
                                     &n_best, &o_lp, &max_len, &max_batch, &want_scores))
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

    lock_acquire(self->lock);
    clf_translator *t = translator_get(self);
    if (!t || batch_input_read(source, "source", t, 1, &b))
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
    Py_BEGIN_ALLOW_THREADS if (b.tokens) st =
        clf_translator_translate_ids(t, (const int32_t *const *)b.ids, b.lens, b.n, &o, out);
    else st = clf_translator_translate(t, b.text, b.len, b.n, &o, out);
    Py_END_ALLOW_THREADS if (st != CLF_OK)
    {
        raise_status(st, NULL);
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
    if (!(result = PyList_New(b.n)))
        goto fail;
    for (int i = 0; i < b.n; i++) {
        PyObject *r = translation_to_py(t, &out[i]);
        if (!r) {
            Py_CLEAR(result);
            goto fail;
        }
        PyList_SET_ITEM(result, i, r);
    }
fail:
    PyThread_release_lock(self->lock);
    if (have_out)
        clf_translations_free(out, b.n);
    free(out);
    batch_input_free(&b);
    return result;
}

/* score(source, target) -> list of (logprob, tokens) per pair. A pair that cannot be
 * scored raises ValueError naming its index and why. */
static PyObject *translator_score(TranslatorObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"source", "target", NULL};
    PyObject *source, *target, *result = NULL;
    batch_input bs, bt;
    float *logprob = NULL;
    int *tokens = NULL;
    char **error = NULL;
    const char **src = NULL, **tgt = NULL;
    clf_status st;

    memset(&bs, 0, sizeof bs);
    memset(&bt, 0, sizeof bt);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:score", kwlist, &source, &target))
        return NULL;
    lock_acquire(self->lock);
    clf_translator *t = translator_get(self);
    if (!t || batch_input_read(source, "source", t, 0, &bs) ||
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
    Py_BEGIN_ALLOW_THREADS st = clf_translator_score(t, src, tgt, n, logprob, tokens, error);
    Py_END_ALLOW_THREADS if (st != CLF_OK)
    {
        raise_status(st, NULL);
        goto fail;
    }
    for (int i = 0; i < n; i++)
        if (error[i]) {
            PyErr_Format(PyExc_ValueError, "pair %d: %s", i, error[i]);
            goto fail;
        }
    if (!(result = PyList_New(n)))
        goto fail;
    for (int i = 0; i < n; i++) {
        PyObject *r = Py_BuildValue("(di)", (double)logprob[i], tokens[i]);
        if (!r) {
            Py_CLEAR(result);
            goto fail;
        }
        PyList_SET_ITEM(result, i, r);
    }
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
    lock_acquire(self->lock);
    clf_translator *t = translator_get(self);
    if (!t)
        goto done;
    clf_status st = clf_translator_encode(t, side, s, len, &ids, &n);
    if (st != CLF_OK) {
        raise_status(st, "text");
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

static PyTypeObject TranslatorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "clformer._clformer._Translator",
    .tp_basicsize = sizeof(TranslatorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "_Translator(model_dir, backend=None, device=None, plugin_dir=None, threads=-1, "
              "weight_type=None): clf_translator (use clformer.Translator)",
    .tp_new = translator_new,
    .tp_init = (initproc)translator_init,
    .tp_dealloc = (destructor)translator_dealloc,
    .tp_methods = translator_methods,
};

/* ------------------------------------------------------------------------------------ */
/* _Model                                                                               */
/* ------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD clf_config *cfg; /* heap: a config holds many paths */
    const clf_backend_api *api;
    clf_backend *be;
    clf_model *model;
    PyThread_type_lock lock;
} ModelObject;

static void model_release(ModelObject *self)
{
    clf_model_free(self->model);
    self->model = NULL;
    if (self->be)
        self->api->close(self->be);
    self->be = NULL;
    free(self->cfg);
    self->cfg = NULL;
}

static PyObject *model_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args, (void)kw;
    return new_locked(type, offsetof(ModelObject, lock));
}

static void model_dealloc(ModelObject *self)
{
    model_release(self);
    if (self->lock)
        PyThread_free_lock(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int model_init(ModelObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"config",     "weights", "backend", "device",
                             "plugin_dir", "seed",    "threads", NULL};
    PyObject *o_cfg, *o_w = Py_None, *o_backend = Py_None, *o_device = Py_None;
    PyObject *o_plugin = Py_None;
    unsigned long long seed = 0;
    int threads = 0;
    const char *cfg_path, *w_path, *backend, *device, *plugin_dir;
    clf_weights *w = NULL;
    clf_status st = CLF_OK;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "U|OOOOKi:_Model", kwlist, &o_cfg, &o_w, &o_backend,
                                     &o_device, &o_plugin, &seed, &threads))
        return -1;
    if (self->model) {
        PyErr_SetString(PyExc_RuntimeError, "_Model already created");
        return -1;
    }
    if (opt_cstring(o_cfg, "config", &cfg_path) || opt_cstring(o_w, "weights", &w_path) ||
        opt_cstring(o_backend, "backend", &backend) || opt_cstring(o_device, "device", &device) ||
        opt_cstring(o_plugin, "plugin_dir", &plugin_dir))
        return -1;
    if (threads < 0) {
        PyErr_Format(PyExc_ValueError, "threads must be >= 0, not %d", threads);
        return -1;
    }
    if (!(self->cfg = calloc(1, sizeof *self->cfg))) {
        PyErr_NoMemory();
        return -1;
    }
    Py_BEGIN_ALLOW_THREADS;
    st = clf_config_load_with_plugins(cfg_path, plugin_dir, self->cfg);
    if (st == CLF_OK)
        st = w_path ? clf_weights_load(w_path, &self->cfg->model, &w)
                    : clf_weights_init(&self->cfg->model, (uint64_t)seed, &w);
    if (st == CLF_OK) /* threads 0: the config's */
        st = clf_config_open_backend(self->cfg, backend, device, threads ? threads : -1, plugin_dir,
                                     &self->api, &self->be);
    if (st == CLF_OK)
        st = clf_model_create_consuming(&self->cfg->model, w, self->api, self->be, &self->model);
    clf_weights_free(w);
    Py_END_ALLOW_THREADS;
    if (st != CLF_OK) {
        raise_status(st, NULL);
        model_release(self);
        return -1;
    }
    return 0;
}

/* A C-contiguous buffer of ndim dimensions of format fmt ("i": int32, "f": float32). */
static int get_buffer(PyObject *o, const char *what, int ndim, char fmt, int writable,
                      Py_buffer *view)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, view, flags)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous %s%s array, not %.100s", what,
                     writable ? "writable " : "", fmt == 'i' ? "int32" : "float32",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    const char *f = view->format ? view->format : "B";
    if (*f == '=' || *f == '<' || *f == '@')
        f++;
    if (f[0] != fmt || f[1] || view->itemsize != 4 || view->ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "%s must be %d-D %s, not %d-D of format '%s'", what, ndim,
                     fmt == 'i' ? "int32" : "float32", view->ndim, view->format);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* forward_into(src [B,S] int32, tgt [B,T] int32, logits [B,T,V] float32): the logits
 * written into the caller's array, nothing copied on the way in or out. */
static PyObject *model_forward_into(ModelObject *self, PyObject *args)
{
    PyObject *o_src, *o_tgt, *o_out, *ret = NULL;
    Py_buffer src, tgt, out;
    int have = 0;
    clf_status st;
    if (!PyArg_ParseTuple(args, "OOO:forward_into", &o_src, &o_tgt, &o_out))
        return NULL;
    if (get_buffer(o_src, "src", 2, 'i', 0, &src))
        return NULL;
    have = 1;
    if (get_buffer(o_tgt, "tgt", 2, 'i', 0, &tgt))
        goto done;
    have = 2;
    if (get_buffer(o_out, "logits", 3, 'f', 1, &out))
        goto done;
    have = 3;
    lock_acquire(self->lock);
    if (!self->model) {
        PyThread_release_lock(self->lock);
        PyErr_SetString(PyExc_RuntimeError, "the model is closed");
        goto done;
    }
    const clf_model_config *mc = &self->cfg->model;
    Py_ssize_t B = src.shape[0], S = src.shape[1], T = tgt.shape[1];
    if (B < 1 || S < 1 || T < 1 || tgt.shape[0] != B || out.shape[0] != B || out.shape[1] != T ||
        out.shape[2] != mc->tgt_vocab || B > INT32_MAX || S > INT32_MAX || T > INT32_MAX) {
        PyThread_release_lock(self->lock);
        PyErr_Format(PyExc_ValueError,
                     "shapes: src [%zd,%zd], tgt [%zd,%zd] and logits [%zd,%zd,%zd] do not "
                     "make a batch [B,S], [B,T] -> [B,T,%d] (B, S, T >= 1)",
                     B, S, tgt.shape[0], T, out.shape[0], out.shape[1], out.shape[2],
                     mc->tgt_vocab);
        goto done;
    }
    clf_forward_io io = {.batch = (int)B,
                         .src_len = (int)S,
                         .tgt_len = (int)T,
                         .src = src.buf,
                         .tgt = tgt.buf,
                         .logits = out.buf};
    Py_BEGIN_ALLOW_THREADS st = clf_model_forward(self->model, &io);
    Py_END_ALLOW_THREADS PyThread_release_lock(self->lock);
    if (st != CLF_OK) {
        raise_status(st, "forward");
        goto done;
    }
    ret = Py_NewRef(Py_None);
done:
    if (have >= 3)
        PyBuffer_Release(&out);
    if (have >= 2)
        PyBuffer_Release(&tgt);
    PyBuffer_Release(&src);
    return ret;
}

static PyObject *model_info(ModelObject *self, PyObject *unused)
{
    (void)unused;
    char desc[256] = "";
    PyObject *d = NULL;
    lock_acquire(self->lock);
    if (!self->model) {
        PyErr_SetString(PyExc_RuntimeError, "the model is closed");
        goto done;
    }
    if (self->api->describe(self->be, desc, sizeof desc) != CLF_OK)
        clf_clear_error();
    const clf_model_config *mc = &self->cfg->model;
    d = Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:s}", "src_vocab", mc->src_vocab, "tgt_vocab",
                      mc->tgt_vocab, "max_len", mc->max_len, "d_model", mc->d_model, "pad_id",
                      mc->pad_id, "log_softmax", mc->output == CLF_OUTPUT_LOG_SOFTMAX, "backend",
                      self->api->name, "device", desc);
done:
    PyThread_release_lock(self->lock);
    return d;
}

static PyObject *model_close(ModelObject *self, PyObject *unused)
{
    (void)unused;
    lock_acquire(self->lock);
    Py_BEGIN_ALLOW_THREADS model_release(self);
    Py_END_ALLOW_THREADS PyThread_release_lock(self->lock);
    Py_RETURN_NONE;
}

static PyMethodDef model_methods[] = {
    {"forward_into", (PyCFunction)model_forward_into, METH_VARARGS,
     "forward_into(src, tgt, logits): src [B,S], tgt [B,T] int32 -> logits [B,T,V] float32"},
    {"info", (PyCFunction)model_info, METH_NOARGS, "the model's sizes and backend, as a dict"},
    {"close", (PyCFunction)model_close, METH_NOARGS, "frees the model now"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "clformer._clformer._Model",
    .tp_basicsize = sizeof(ModelObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "_Model(config, weights=None, backend=None, device=None, plugin_dir=None, seed=0, "
              "threads=0): clf_model (use clformer.Model)",
    .tp_new = model_new,
    .tp_init = (initproc)model_init,
    .tp_dealloc = (destructor)model_dealloc,
    .tp_methods = model_methods,
};

/* ------------------------------------------------------------------------------------ */

static struct PyModuleDef clformer_module = {
    PyModuleDef_HEAD_INIT, .m_name = "clformer._clformer",
    .m_doc = "libclformer's translator and model (use the clformer package)", .m_size = -1};

PyMODINIT_FUNC PyInit__clformer(void)
{
    PyObject *m;
    if (PyType_Ready(&TranslatorType) < 0 || PyType_Ready(&ModelType) < 0)
        return NULL;
    if (!(m = PyModule_Create(&clformer_module)))
        return NULL;
    if (PyModule_AddObjectRef(m, "_Translator", (PyObject *)&TranslatorType) ||
        PyModule_AddObjectRef(m, "_Model", (PyObject *)&ModelType) ||
        PyModule_AddIntConstant(m, "SENTENCE_MAX", CLF_TRANSLATE_SENTENCE_MAX)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
