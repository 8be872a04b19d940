/* Shared declarations of the tack._tack extension. */
#ifndef TACK_EXT_H
#define TACK_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "tack/tack.h"

typedef struct {
    PyObject_HEAD
    tack_array *array;
    PyObject *weakrefs;
} TackArrayObject;

typedef struct {
    PyObject_HEAD
    tack_device *device;
} TackDeviceObject;

typedef struct {
    PyObject_HEAD
    tack_dtype dtype;
} TackDTypeObject;

extern PyTypeObject TackArray_Type;
extern PyTypeObject TackDevice_Type;
extern PyTypeObject TackDType_Type;
extern PyTypeObject *TackExportedMemory_Type;

/* Statuses as exceptions (errors.c), the one mapping: raises the exception
 * that maps `status` with tack_last_error() and returns NULL; */
PyObject *tack_py_raise(tack_status status);
/* the same, returning -1; */
int tack_py_fail(tack_status status);
/* the exception's name ("ValueError"), for reports to C code. */
const char *tack_py_status_kind(tack_status status);
/* A C message as a str, its leading C call shown in its Python spelling
 * ("Array.reshape (tack_array_reshape): ..."), bytes that are not UTF-8
 * escaped (a compiler's log need not be UTF-8); NULL with MemoryError. */
PyObject *tack_py_message(const char *text);
/* Raises `type` with that str; returns NULL. */
PyObject *tack_py_raise_message(PyObject *type, const char *text);
/* Whether the pending exception is one that an optional query must not
 * swallow: KeyboardInterrupt, SystemExit (anything not an Exception) and
 * MemoryError. */
int tack_py_exception_must_propagate(void);

/* Wraps an array (steals the reference); NULL with an exception on failure,
 * in which case the array is released. */
PyObject *tack_py_array_new(tack_array *array);
#define TACK_PY_ARRAY(o) (((TackArrayObject *)(o))->array)
/* An array's shape as a tuple of ints (new reference); NULL with an
 * exception. */
PyObject *tack_py_shape_tuple(const tack_array *a);

/* The DType singleton of a dtype (borrowed). */
PyObject *tack_py_dtype_object(tack_dtype dtype);
/* Converts a DType, a name such as "float32" or a NumPy dtype; 0 with a
 * TypeError on failure. Usable as an O& converter (returns 1 on success). */
int tack_py_dtype_converter(PyObject *obj, void *out);

/* The Device object of a device (new reference). */
PyObject *tack_py_device_object(tack_device *device);
/* Converts None (the default device), a Device or a device name; the result
 * is a new device reference. 0 with an exception on failure. */
int tack_py_device_converter(PyObject *obj, void *out);
/* The default device (borrowed); NULL with an exception if it cannot be made. */
tack_device *tack_py_default_device(void);

/* Argument helpers (args.c). */

/* Parses an int or a sequence of ints into a shape, with room for
 * TACK_MAX_NDIM extents. A longer sequence is not read: *ndim says its
 * length, and the C call the shape is for refuses it. 0 with an exception. */
int tack_py_parse_shape(PyObject *obj, int *ndim, int64_t *shape);

/* Converts a Python number to one element of `dtype` at `out`, as NumPy
 * casts it (floats truncate to integers, nonzero is true, float16 and
 * bfloat16 round to nearest even); -1 with TypeError (not a number, or a
 * complex number for a real dtype) or ValueError (out of range). */
int tack_py_to_element(PyObject *obj, tack_dtype dtype, void *out);

/* An address (a pointer or a driver handle): anything with __index__ in
 * [0, 2**64), numpy.uint64 above 2**63 included, bool refused. 0 with a
 * TypeError naming `what` otherwise. */
int tack_py_address(PyObject *obj, const char *what, uint64_t *out);

/* A C-contiguous NumPy array of obj, cast to `dtype` (anything np.asarray
 * takes as one) if not NULL; 0-d stays 0-d. New reference, or NULL with an
 * exception. */
PyObject *tack_py_as_numpy(PyObject *obj, PyObject *dtype);

/* NumPy, imported on first use (borrowed); NULL with ImportError. */
PyObject *tack_py_numpy(void);
/* numpy.asarray(obj, dtype or None, **kw), kw built from `kwformat` and
 * what follows as Py_BuildValue builds it: a new reference, or NULL with
 * an exception. */
PyObject *tack_py_numpy_asarray(PyObject *obj, PyObject *dtype, const char *kwformat, ...);
/* isinstance(obj, numpy.ndarray): 1, 0, or -1 with an exception. */
int tack_py_is_ndarray(PyObject *obj);

/* The numpy.dtype of a Tack dtype (new reference): bfloat16 is ml_dtypes'
 * type, and without ml_dtypes a TypeError that says to install it. NULL
 * with an exception. */
PyObject *tack_py_numpy_dtype(tack_dtype dtype);

/* The same, cached, for Array.dtype: NULL without an exception where NumPy
 * cannot express the dtype (no NumPy; bfloat16 without ml_dtypes), NULL
 * with one for any other failure. */
PyObject *tack_py_numpy_dtype_or_null(tack_dtype dtype);

/* Keyword parsing for METH_FASTCALL | METH_KEYWORDS: fills vals[i] for the
 * keyword names in `names` (NULL-terminated), borrowed; unknown keywords are
 * a TypeError naming `func`. */
int tack_py_keywords(const char *func, PyObject *kwnames, PyObject *const *kwvalues, const char *const *names,
                     PyObject **vals);

/* getattr(obj, name, None) without raising and clearing an AttributeError
 * for an absent attribute, which would cost more than the rest of an
 * import: 1 and *out set if found, 0 and *out NULL if absent, -1 with the
 * object's exception if looking it up failed otherwise. Unlike
 * PyObject_HasAttr, which from 3.13 reports such a failure as an ignored
 * exception, the failure reaches the caller. */
int tack_py_lookup_optional(PyObject *obj, PyObject *name, PyObject **out);

/* The pending exception as one object (NULL when there is none), taken out
 * of the thread state, and putting one back (the reference is stolen).
 * 3.12 deprecates PyErr_Fetch and PyErr_Restore in favour of the pair that
 * handles exceptions as single objects; older versions normalize the
 * triple into one. */
static inline PyObject *tack_py_exception_take(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (!type)
        return NULL;
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback && value)
        PyException_SetTraceback(value, traceback);
    Py_DECREF(type);
    Py_XDECREF(traceback);
    return value;
#endif
}

static inline void tack_py_exception_restore(PyObject *exc)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    if (exc)
        PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
#endif
}

/* A C call that may wait a long time (a socket, a compiler process), made
 * with the GIL released (blocking.c). Where the C library waits, a signal
 * takes the GIL back to run the Python signal handlers; one that raises
 * (SIGINT's KeyboardInterrupt) stops the wait, with the exception
 * pending once the GIL is back. */
typedef struct tack_py_released {
    PyThreadState *state;
} tack_py_released;
void tack_py_release(tack_py_released *r);
void tack_py_reacquire(tack_py_released *r);
/* The C library's interrupt check (tack_ipc_wait.interrupted,
 * tack_kernel_set_interrupt); `context` is the tack_py_released of the
 * call. Nonzero when a handler raised. */
int tack_py_signals_raised(void *context);
/* Around a call that may run the C compiler (building, and a launch that
 * may build): releases the GIL and lets signals stop the thread's waits
 * for the compiler; _end undoes both. After _end, PyErr_Occurred() means
 * a signal handler raised, whatever the call returned. */
void tack_py_compile_begin(tack_py_released *r);
void tack_py_compile_end(tack_py_released *r);

/* DLPack capsules (dlpack.c). */
PyObject *tack_py_array_dlpack(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *tack_py_array_dlpack_device(PyObject *self, PyObject *unused);
PyObject *tack_py_from_dlpack(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
/* from_dlpack's import without a copy, as a C array: `source` (an object
 * with __dlpack__, or a capsule) on `device`, or NULL for the producer's
 * device or the default one. A new reference, or NULL with an exception. */
tack_array *tack_py_dlpack_share(PyObject *source, tack_device *device);
int tack_py_dlpack_init(PyObject *module);
/* The C exchange table on tack.Array (exchange.c); after the Array type. */
int tack_py_exchange_init(PyObject *module);
/* tack.asarray and the CUDA Array Interface import (asarray.c). */
PyObject *tack_py_asarray(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
/* What tack.asarray(obj) shares, as a C array (a new reference), or NULL
 * with an exception: for a kernel argument, which needs no Python object. */
tack_array *tack_py_share(PyObject *obj);
/* Whether obj's type has __dlpack__ (a lookup in the type's cache). */
int tack_py_speaks_dlpack(PyObject *obj);
int tack_py_asarray_init(PyObject *module);

/* Module parts that register types or functions. */
int tack_py_device_init(PyObject *module);
int tack_py_dtype_init(PyObject *module);
int tack_py_array_init(PyObject *module);
/* Cross-process arrays (src/python/ipc.c): tack.import_memory and the
 * descriptor-passing helpers. */
int tack_py_ipc_init(PyObject *module);
/* Registers tack.Array's reducer with multiprocessing's pickler (once;
 * later calls return at once), so that exportable host arrays travel by
 * descriptor. Called where such arrays are made: importing multiprocessing
 * costs more than the rest of `import tack`, and until then every array
 * pickles by value anyway. -1 with an exception on failure. */
int tack_py_multiprocessing_register(void);
/* Array.export_memory(): the array's ExportedMemory record, which keeps the
 * array's buffer (and so the descriptor it names) alive while it lives.
 * NULL with an exception on failure. */
PyObject *tack_py_export_memory(PyObject *array);
/* Kernels (src/python/kernel/); registers tack.Kernel. */
int tack_py_kernel_init(PyObject *module);
/* The interpreter's name for the C library, and the facts of
 * tack.show_config() (src/python/config.c). */
int tack_py_config_init(PyObject *module);
/* The C-API capsule tack._tack._C_API of <tack/python.h> (capi.c). */
int tack_py_capi_init(PyObject *module);

#endif
