/* The extension's shared helpers (py_common.h). */
#include "py_common.h"

#include <string.h>

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
