/* The C-to-Python bridge: Tack arrays handed between C code and the Python
 * interpreter it embeds (or runs inside), in both directions, without a copy.
 *
 *     #include <tack/python.h>          (before any standard header: it
 *                                        includes <Python.h>, which must come first)
 *     Py_Initialize();
 *     if (tack_py_import() < 0) { PyErr_Print(); ... }
 *     PyObject *field = tack_py_from_array(a);     a tack.Array over a's memory
 *     ...call Python with it, get an array-like back...
 *     tack_array *b = tack_py_to_array(result);    a tack_array over its memory
 *
 * The functions are static inline over a table of function pointers the
 * extension module tack._tack publishes in the capsule tack._tack._C_API,
 * as NumPy's import_array works: a program links libtack and libpython,
 * nothing else. Each translation unit that calls tack_py_from_array or
 * tack_py_to_array calls tack_py_import() once first (the table pointer is
 * static to the file).
 *
 * Lifetimes are reference counts on both sides. An array handed to Python
 * is retained by the tack.Array made over it, and released when that object
 * is collected; the memory stays valid while either side holds it (memory
 * the C code wrapped with tack_array_wrap stays the C code's to keep alive).
 * An array received from Python holds what backs it (the tack.Array, or the
 * NumPy/PyTorch/... object whose memory it shares) until its last
 * tack_array_release.
 *
 * The GIL: tack_py_import, tack_py_from_array and tack_py_to_array touch
 * Python objects and must be called with the GIL held (from the thread
 * that initialized Python, or between PyGILState_Ensure and
 * PyGILState_Release). tack_array_release may be called on any thread,
 * holding the GIL or not: dropping the last reference to an array that
 * shares a Python object's memory takes the GIL itself to release that
 * object. Release such arrays before Py_FinalizeEx; after it, what they
 * held is left to the process's exit. The other libtack calls (kernels,
 * fills, copies) need no GIL, so a simulation may step with the GIL
 * released (Py_BEGIN_ALLOW_THREADS) while Python threads run.
 *
 * No interpreter: before Py_Initialize, and after Py_FinalizeEx, the three
 * functions touch nothing of Python and fail, tack_py_import with -1 and
 * the others with NULL, leaving the reason in tack_last_error() (a Python
 * exception cannot be set without an interpreter). The table imported
 * belongs to the interpreter it was imported into: after Py_FinalizeEx and
 * a new Py_Initialize they raise RuntimeError until tack_py_import() is
 * called again (the extension, like NumPy's, keeps module state of the
 * interpreter that first imported it: embed one interpreter for the
 * program's life).
 */
#ifndef TACK_PYTHON_H
#define TACK_PYTHON_H

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>

#include "tack/tack.h"

/* The table's layout; the extension and a program must agree on it. Raised
 * whenever a slot is added, removed or changes meaning. */
#define TACK_PY_ABI_VERSION 1
#define TACK_PY_CAPSULE_NAME "tack._tack._C_API"

/* What the capsule points at (static in the extension, lives as long as the
 * process). */
typedef struct tack_py_api {
    /* TACK_PY_ABI_VERSION of the extension. */
    unsigned int abi_version;
    /* The extension's Tack version, major * 10000 + minor * 100 + patch:
     * the layout of a tack_array is the same within one major.minor (one
     * SONAME), and the bridge hands tack_array pointers across. */
    unsigned int tack_version;
    /* tack_py_from_array and tack_py_to_array, below. */
    PyObject *(*from_array)(tack_array *array);
    tack_array *(*to_array)(PyObject *obj);
} tack_py_api;

static const tack_py_api *tack_py_api_table;
/* Whether tack_py_forget_ is registered with Py_AtExit since the import. */
static int tack_py_at_exit_;

/* Run by Py_FinalizeEx once the interpreter is gone: the table was the
 * finalized interpreter's, and calls through it would run the extension
 * without one. */
static inline void tack_py_forget_(void)
{
    tack_py_api_table = NULL;
    tack_py_at_exit_ = 0;
}

/* 1 while an interpreter runs; else 0 with tack_last_error() saying that
 * `call` needs one, and no Python call made. */
static inline int tack_py_running_(const char *call)
{
    if (Py_IsInitialized())
        return 1;
    char message[384];
    snprintf(message, sizeof message,
             "%s: no Python interpreter is running (Py_IsInitialized() is 0: before Py_Initialize or after "
             "Py_FinalizeEx); call it between the two, after tack_py_import(), and hand arrays across before "
             "Py_FinalizeEx",
             call);
    tack_error_report(TACK_ERUNTIME, message);
    return 0;
}

/* Imports tack._tack and its C-API table. 0 on success; -1 with an
 * ImportError set when tack cannot be imported, publishes no table, or
 * publishes one of another ABI version or another Tack major.minor than
 * these headers (then rebuild against the installed tack's headers); -1
 * with tack_last_error() saying so, and no exception, when no interpreter
 * is running. The GIL must be held. Calling it again is harmless. */
static inline int tack_py_import(void)
{
    if (!tack_py_running_("tack_py_import"))
        return -1;
    /* The module first: its own ImportError says why (no such module on
     * the path, a library it cannot load), where PyCapsule_Import's says
     * only that it could not. */
    PyObject *module = PyImport_ImportModule("tack._tack");
    if (!module)
        return -1;
    Py_DECREF(module);
    const tack_py_api *api = (const tack_py_api *)PyCapsule_Import(TACK_PY_CAPSULE_NAME, 0);
    if (!api) {
        if (PyErr_ExceptionMatches(PyExc_ImportError))
            return -1;
        /* An AttributeError or a wrong capsule: a tack without the bridge. */
        PyErr_Clear();
        PyErr_SetString(PyExc_ImportError,
                        "tack_py_import: the tack module has no C-API capsule " TACK_PY_CAPSULE_NAME
                        ": install the tack whose headers this program is built with (" TACK_VERSION_STRING ")");
        return -1;
    }
    unsigned int want = TACK_VERSION_MAJOR * 10000u + TACK_VERSION_MINOR * 100u;
    if (api->abi_version != TACK_PY_ABI_VERSION || api->tack_version / 100u != want / 100u) {
        PyErr_Format(PyExc_ImportError,
                     "tack_py_import: the tack module's C API is ABI version %u of Tack %u.%u, this program is "
                     "built against ABI version %d of Tack %d.%d: rebuild it with the headers of the installed "
                     "tack (python -m tack --cflags), or install tack %s",
                     api->abi_version, api->tack_version / 10000u, api->tack_version / 100u % 100u,
                     TACK_PY_ABI_VERSION, TACK_VERSION_MAJOR, TACK_VERSION_MINOR, TACK_VERSION_STRING);
        return -1;
    }
    tack_py_api_table = api;
    /* Py_AtExit takes 32 functions in all; without a slot the table is
     * still refused after Py_FinalizeEx (tack_py_running_), only not
     * forgotten for a later interpreter. */
    if (!tack_py_at_exit_ && Py_AtExit(tack_py_forget_) == 0)
        tack_py_at_exit_ = 1;
    return 0;
}

/* 1 when tack_py_import succeeded in this file, in the interpreter that
 * runs; else 0 with a RuntimeError naming `call`, or without an
 * interpreter the reason in tack_last_error(). */
static inline int tack_py_imported_(const char *call)
{
    if (!tack_py_running_(call))
        return 0;
    if (tack_py_api_table)
        return 1;
    PyErr_Format(PyExc_RuntimeError, "%s: call tack_py_import() first, once in each C file that uses <tack/python.h>",
                 call);
    return 0;
}

/* A new tack.Array over `array`'s memory (no copy), which retains `array`
 * (the caller keeps its own reference). It waits for the launches queued
 * on the array and marks its buffer shared (tack_buffer_share), as every
 * export does: Python may hand the memory on, so kernels with atomics then
 * use locked atomics on it from C and Python alike. New reference; NULL
 * with a Python exception on failure (ValueError for a NULL array,
 * MemoryError, the exception of a failed wait), when `array` is not
 * retained; NULL with tack_last_error() saying so, and `array` untouched,
 * when no interpreter is running. The GIL must be held. */
static inline PyObject *tack_py_from_array(tack_array *array)
{
    return tack_py_imported_("tack_py_from_array") ? tack_py_api_table->from_array(array) : NULL;
}

/* The tack_array of a tack.Array, or a new one sharing the memory of
 * anything tack.asarray accepts (DLPack producers, the CUDA Array
 * Interface, the buffer protocol: NumPy, PyTorch, CuPy, bytes...), no copy.
 * Retained for the caller, who releases it with tack_array_release; it
 * keeps what backs it alive meanwhile. NULL with a Python exception
 * otherwise, as tack.asarray raises (TypeError for an object with none of
 * those interfaces); NULL with tack_last_error() saying so, and `obj`
 * untouched, when no interpreter is running. The GIL must be held. */
static inline tack_array *tack_py_to_array(PyObject *obj)
{
    return tack_py_imported_("tack_py_to_array") ? tack_py_api_table->to_array(obj) : NULL;
}

#endif
