/* What the extension's files share (clformer._clformer: py_common.c, py_translator.c,
 * py_model.c, clformer_module.c): the error conversion, the locks, argument helpers and
 * the two types. */
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

extern PyTypeObject clfpy_TranslatorType; /* py_translator.c */
extern PyTypeObject clfpy_ModelType;      /* py_model.c */

#endif
