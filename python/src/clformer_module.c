/* clformer._clformer - the CPython extension under the clformer package.
 *
 * Two types over libclformer's public API, each with a lock of its own: _Translator
 * (clformer/translator.h: a model directory, text in, text out) and _Model
 * (clformer/model.h: a config's forward pass on int32 buffers). The package's
 * clformer/__init__.py builds the public API (Translator, Model, the result types) on
 * them; py_translator.c and py_model.c convert, check and call, py_common.c holds what
 * they share, and this file makes the module.
 *
 * Threads: every call that runs the model releases the GIL. A libclformer object is used
 * by one thread at a time (translator.h), so each wrapper holds a PyThread lock around
 * its use; a thread waiting for it has released the GIL. Errors: clformer's one-line
 * message (thread-local, read in the calling thread) raised as ValueError for bad input,
 * OSError for files, MemoryError for allocation and RuntimeError for the device. */
#include "py_common.h"

#include "clformer/translator.h"

/* ------------------------------------------------------------------------------------ */

static struct PyModuleDef clformer_module = {
    PyModuleDef_HEAD_INIT, .m_name = "clformer._clformer",
    .m_doc = "libclformer's translator and model (use the clformer package)", .m_size = -1};

PyMODINIT_FUNC PyInit__clformer(void)
{
    PyObject *m;
    if (PyType_Ready(&clfpy_TranslatorType) < 0 || PyType_Ready(&clfpy_ModelType) < 0)
        return NULL;
    if (!(m = PyModule_Create(&clformer_module)))
        return NULL;
    if (PyModule_AddObjectRef(m, "_Translator", (PyObject *)&clfpy_TranslatorType) ||
        PyModule_AddObjectRef(m, "_Model", (PyObject *)&clfpy_ModelType) ||
        PyModule_AddIntConstant(m, "SENTENCE_MAX", CLF_TRANSLATE_SENTENCE_MAX)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
