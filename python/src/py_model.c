/* _Model: clformer/model.h (a config's forward pass on int32 buffers) for the clformer
 * package's Model. */
#include "py_common.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/backend.h"
#include "clformer/config.h"
#include "clformer/model.h"
#include "clformer/weights.h"

/* ------------------------------------------------------------------------------------ */
/* _Model                                                                               */
/* ------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD clf_config *cfg; /* heap: a config holds many paths */
    const clf_backend_api *api;
    clf_backend *be;
    clf_model *model;
    PyThread_type_lock lock;
    clfpy_worker *worker; /* where the model is made and computes (py_common.h) */
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
    return clfpy_new_locked(type, offsetof(ModelObject, lock));
}

static void model_dealloc(ModelObject *self)
{
    model_release(self);
    clfpy_worker_stop(self->worker);
    if (self->lock)
        PyThread_free_lock(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* model_init's work on the worker: the config, the weights, the backend, the model */
typedef struct {
    ModelObject *self;
    const char *cfg_path, *w_path, *backend, *device, *plugin_dir;
    unsigned long long seed;
    int threads;
} make_call;

static clf_status run_make(void *p)
{
    const make_call *c = p;
    ModelObject *self = c->self;
    clf_weights *w = NULL;
    clf_status st = clf_config_load_with_plugins(c->cfg_path, c->plugin_dir, self->cfg);
    if (st == CLF_OK)
        st = c->w_path ? clf_weights_load(c->w_path, &self->cfg->model, &w)
                       : clf_weights_init(&self->cfg->model, (uint64_t)c->seed, &w);
    if (st == CLF_OK) /* threads 0: the config's */
        st = clf_config_open_backend(self->cfg, c->backend, c->device, c->threads ? c->threads : -1,
                                     c->plugin_dir, &self->api, &self->be);
    if (st == CLF_OK)
        st = clf_model_create_consuming(&self->cfg->model, w, self->api, self->be, &self->model);
    clf_weights_free(w);
    return st;
}

typedef struct {
    clf_model *model;
    clf_forward_io *io;
} forward_call;

static clf_status run_forward(void *p)
{
    const forward_call *c = p;
    return clf_model_forward(c->model, c->io);
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
    clf_status st = CLF_OK;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "U|OOOOKi:_Model", kwlist, &o_cfg, &o_w, &o_backend,
                                     &o_device, &o_plugin, &seed, &threads))
        return -1;
    if (self->model) {
        PyErr_SetString(PyExc_RuntimeError, "_Model already created");
        return -1;
    }
    if (clfpy_opt_cstring(o_cfg, "config", &cfg_path) ||
        clfpy_opt_cstring(o_w, "weights", &w_path) ||
        clfpy_opt_cstring(o_backend, "backend", &backend) ||
        clfpy_opt_cstring(o_device, "device", &device) ||
        clfpy_opt_cstring(o_plugin, "plugin_dir", &plugin_dir))
        return -1;
    if (threads < 0) {
        PyErr_Format(PyExc_ValueError, "threads must be >= 0, not %d", threads);
        return -1;
    }
    if (!(self->cfg = calloc(1, sizeof *self->cfg))) {
        PyErr_NoMemory();
        return -1;
    }
    if (!self->worker && !(self->worker = clfpy_worker_start()))
        return -1;
    make_call c = {self, cfg_path, w_path, backend, device, plugin_dir, seed, threads};
    Py_BEGIN_ALLOW_THREADS;
    st = clfpy_worker_run(self->worker, run_make, &c);
    Py_END_ALLOW_THREADS;
    if (st != CLF_OK) {
        clfpy_raise_status(st, NULL);
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
    clfpy_lock_acquire(self->lock);
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
    forward_call c = {self->model, &io};
    Py_BEGIN_ALLOW_THREADS st = clfpy_worker_run(self->worker, run_forward, &c);
    Py_END_ALLOW_THREADS PyThread_release_lock(self->lock);
    if (st != CLF_OK) {
        clfpy_raise_status(st, "forward");
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
    clfpy_lock_acquire(self->lock);
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
    clfpy_lock_acquire(self->lock);
    clfpy_worker *w = self->worker;
    self->worker = NULL;
    Py_BEGIN_ALLOW_THREADS model_release(self);
    clfpy_worker_stop(w);
    Py_END_ALLOW_THREADS PyThread_release_lock(self->lock);
    Py_RETURN_NONE;
}

static PyMethodDef model_methods[] = {
    {"forward_into", (PyCFunction)model_forward_into, METH_VARARGS,
     "forward_into(src, tgt, logits): src [B,S], tgt [B,T] int32 -> logits [B,T,V] float32"},
    {"info", (PyCFunction)model_info, METH_NOARGS, "the model's sizes and backend, as a dict"},
    {"close", (PyCFunction)model_close, METH_NOARGS, "frees the model now"},
    {NULL, NULL, 0, NULL}};

PyTypeObject clfpy_ModelType = {
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
