/* The extension's shared helpers (py_common.h): errors, locks, arguments, compute threads. */
#include "py_common.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/status.h"

/* clformer's status as the Python exception a caller expects, with its message. */
PyObject *clfpy_raise_status(clf_status st, const char *prefix)
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
void clfpy_lock_acquire(PyThread_type_lock lock)
{
    if (!PyThread_acquire_lock(lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
}

/* A str or bytes argument that may be None, as a C string (NULL for None). A str with a
 * NUL cannot be a path or a name: ValueError. */
int clfpy_opt_cstring(PyObject *o, const char *what, const char **out)
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

/* A new object of type with its lock at byte offset lock_at (both types hold one). */
PyObject *clfpy_new_locked(PyTypeObject *type, size_t lock_at)
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

struct clfpy_worker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    clf_status (*fn)(void *);
    void *arg;
    int posted, done, stop;
    clf_status st;
    char error[1024]; /* fn's message (clf_last_error is per thread) */
    pid_t pid;        /* the process that started the thread */
};

static void *worker_main(void *p)
{
    clfpy_worker *w = p;
    /* The thread's signal stack is left as it was found: the first thread to compile an
     * OpenCL kernel with PoCL gets LLVM's own (malloc'd) signal stack, and a sanitized
     * build's thread exit would unmap that one as if it were the sanitizer's. */
    stack_t old;
    const int saved = sigaltstack(NULL, &old) == 0;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->posted && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->posted)
            break;
        pthread_mutex_unlock(&w->mu);
        clf_clear_error();
        const clf_status st = w->fn(w->arg);
        pthread_mutex_lock(&w->mu);
        w->st = st;
        snprintf(w->error, sizeof w->error, "%s", st != CLF_OK ? clf_last_error() : "");
        w->posted = 0;
        w->done = 1;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    if (saved)
        (void)sigaltstack(&old, NULL);
    return NULL;
}

clfpy_worker *clfpy_worker_start(void)
{
    clfpy_worker *w = calloc(1, sizeof *w);
    if (!w)
        return (clfpy_worker *)PyErr_NoMemory();
    w->pid = getpid();
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        PyErr_SetString(PyExc_RuntimeError, "cannot start the object's compute thread");
        return NULL;
    }
    return w;
}

clf_status clfpy_worker_run(clfpy_worker *w, clf_status (*fn)(void *), void *arg)
{
    if (getpid() != w->pid)
        return clf_error(CLF_ERR_UNSUPPORTED,
                         "this object was made in the process this one was forked from, and "
                         "its compute thread is not here: make it in this process");
    pthread_mutex_lock(&w->mu);
    w->fn = fn;
    w->arg = arg;
    w->posted = 1;
    w->done = 0;
    pthread_cond_broadcast(&w->cv);
    while (!w->done)
        pthread_cond_wait(&w->cv, &w->mu);
    const clf_status st = w->st;
    char error[sizeof w->error];
    memcpy(error, w->error, sizeof error);
    pthread_mutex_unlock(&w->mu);
    return st == CLF_OK ? CLF_OK : clf_error(st, "%s", error);
}

void clfpy_worker_stop(clfpy_worker *w)
{
    if (!w)
        return;
    if (getpid() == w->pid) {
        pthread_mutex_lock(&w->mu);
        w->stop = 1;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
    }
    /* in a forked child the thread is not there, and the copies of the mutex and the
     * condition may hold its state as a waiter: they are left as they are */
    free(w);
}
