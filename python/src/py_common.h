/* What the extension's files share (clformer._clformer: py_common.c, py_translator.c,
 * py_model.c, clformer_module.c): the error conversion, the locks, the objects' compute
 * threads, argument helpers and the two types. */
#ifndef CLF_PY_COMMON_H
#define CLF_PY_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include "clformer/status.h"

/* clformer's status as the Python exception a caller expects, with its message; NULL. */
PyObject *clfpy_raise_status(clf_status st, const char *prefix);
/* Takes lock without holding the GIL while it waits (another thread may hold the lock
 * for a whole batch, with the GIL released). */
void clfpy_lock_acquire(PyThread_type_lock lock);
/* A str argument that may be None, as a C string (NULL for None); -1 with an exception
 * set (a str with a NUL cannot be a path or a name: ValueError). */
int clfpy_opt_cstring(PyObject *o, const char *what, const char **out);
/* A new object of type with its lock at byte offset lock_at (both types hold one). */
PyObject *clfpy_new_locked(PyTypeObject *type, size_t lock_at);

/* An object's compute thread: every call of libclformer that computes (opening a model,
 * translating, scoring, a forward pass) runs on the thread of the object it is made on,
 * whichever Python thread makes it, as CTranslate2's workers do. libgomp keeps a team of
 * OpenMP workers per thread that ran a parallel region; calls from a pool of Python
 * threads would each leave one, and when teams outnumber the cores libgomp makes every
 * region wait in the kernel. One thread per object: one team. */
typedef struct clfpy_worker clfpy_worker;
/* A started worker, or NULL with an exception set. */
clfpy_worker *clfpy_worker_start(void);
/* fn(arg) on w's thread, waited for (call it with the GIL released and the object's lock
 * held: one call at a time); its status, with its message as this thread's clf_last_error.
 * In a process forked from the one that started w: CLF_ERR_UNSUPPORTED, the thread is not
 * there. */
clf_status clfpy_worker_run(clfpy_worker *w, clf_status (*fn)(void *), void *arg);
/* Ends w's thread and frees w (NULL: nothing). */
void clfpy_worker_stop(clfpy_worker *w);

extern PyTypeObject clfpy_TranslatorType; /* py_translator.c */
extern PyTypeObject clfpy_ModelType;      /* py_model.c */

#endif
