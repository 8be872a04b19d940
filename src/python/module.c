/* tack._tack: module functions, status mapping, and the pieces the types share. */
#include "ext.h"

#include <stdint.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

PyTypeObject *TackExportedMemory_Type;

PyObject *tack_py_raise(tack_status status)
{
    PyObject *exc;
    switch (status) {
    case TACK_EVALUE: exc = PyExc_ValueError; break;
    case TACK_ETYPE: exc = PyExc_TypeError; break;
    case TACK_EBUFFER: exc = PyExc_BufferError; break;
    case TACK_ENOMEM: exc = PyExc_MemoryError; break;
    default: exc = PyExc_RuntimeError; break;
    }
    PyErr_SetString(exc, tack_last_error());
    return NULL;
}

int tack_py_fail(tack_status status)
{
    tack_py_raise(status);
    return -1;
}

PyObject *tack_py_numpy(void)
{
    static PyObject *numpy;
    if (numpy)
        return numpy;
    numpy = PyImport_ImportModule("numpy");
    if (!numpy && PyErr_ExceptionMatches(PyExc_ImportError)) {
        /* Tack imports without NumPy, but copies from and to Python data
         * go through it: say how to get it, keeping the import's own error
         * (a missing module, or a broken one) as the cause. */
        PyObject *cause = tack_py_exception_take();
        PyErr_Format(PyErr_GivenExceptionMatches(cause, PyExc_ModuleNotFoundError) ? PyExc_ModuleNotFoundError
                                                                                    : PyExc_ImportError,
                     "this needs NumPy, which cannot be imported (%S): install it with `pip install numpy` "
                     "(`pip install tack-arrays` brings it)",
                     cause);
        PyObject *exc = tack_py_exception_take();
        PyException_SetCause(exc, cause);
        tack_py_exception_restore(exc);
    }
    return numpy;
}

/* Callers pass the same kwnames tuple on every call from one call site
 * (it is a constant of the caller's code, or of a C library's call), so the
 * last few tuples are remembered with their resolved positions. */
#define KW_CACHE 8
#define KW_MAX 8
static struct {
    PyObject *kwnames;
    const char *const *names;
    signed char slot[KW_MAX];
} kw_cache[KW_CACHE];
static int kw_next;

/* The accepted names of each keyword list as interned strings: keywords
 * spelled in Python source are interned, so a pointer comparison matches
 * them even when the caller builds a new kwnames tuple on every call
 * (f(**kwargs) does). */
static struct {
    const char *const *names;
    PyObject *interned[KW_MAX];
} kw_interned[16];

static PyObject *const *interned_names(const char *const *names)
{
    for (int i = 0; i < 16; i++) {
        if (kw_interned[i].names == names)
            return kw_interned[i].interned;
        if (!kw_interned[i].names) {
            for (int j = 0; names[j] && j < KW_MAX; j++) {
                kw_interned[i].interned[j] = PyUnicode_InternFromString(names[j]);
                if (!kw_interned[i].interned[j]) {
                    PyErr_Clear();
                    return NULL;
                }
            }
            kw_interned[i].names = names;
            return kw_interned[i].interned;
        }
    }
    return NULL;
}

int tack_py_keywords(const char *func, PyObject *kwnames, PyObject *const *kwvalues, const char *const *names,
                     PyObject **vals)
{
    if (!kwnames)
        return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
    for (int c = 0; c < KW_CACHE; c++) {
        if (kw_cache[c].kwnames == kwnames && kw_cache[c].names == names) {
            for (Py_ssize_t i = 0; i < n; i++)
                vals[kw_cache[c].slot[i]] = kwvalues[i];
            return 0;
        }
    }
    PyObject *const *interned = interned_names(names);
    signed char slot[KW_MAX];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        int found = -1;
        for (int j = 0; interned && names[j] && j < KW_MAX && found < 0; j++)
            if (key == interned[j])
                found = j;
        for (int j = 0; names[j] && found < 0; j++)
            if (PyUnicode_CompareWithASCIIString(key, names[j]) == 0)
                found = j;
        if (found < 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", func, key);
            return -1;
        }
        vals[found] = kwvalues[i];
        if (i < KW_MAX)
            slot[i] = (signed char)found;
    }
    /* A tuple only the caller holds is made for this call alone: keeping it
     * would evict the call sites that do repeat. */
    if (n <= KW_MAX && Py_REFCNT(kwnames) > 1) {
        int c = kw_next;
        kw_next = (kw_next + 1) % KW_CACHE;
        Py_XSETREF(kw_cache[c].kwnames, Py_NewRef(kwnames));
        kw_cache[c].names = names;
        memcpy(kw_cache[c].slot, slot, sizeof slot);
    }
    return 0;
}

int tack_py_parse_shape(PyObject *obj, int *ndim, int64_t *shape)
{
    /* bytes and str are sequences, but not of extents. */
    if (PyBytes_Check(obj) || PyByteArray_Check(obj) || PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "shape must be an int or a sequence of ints, not %s", Py_TYPE(obj)->tp_name);
        return 0;
    }
    if (PyLong_Check(obj) || PyIndex_Check(obj)) {
        PyObject *idx = PyNumber_Index(obj);
        if (!idx)
            return 0;
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
        Py_DECREF(idx);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "shape extent does not fit a 64-bit integer");
            return 0;
        }
        *ndim = 1;
        shape[0] = v;
        return 1;
    }
    PyObject *seq = PySequence_Fast(obj, "shape must be an int or a sequence of ints");
    if (!seq)
        return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > TACK_MAX_NDIM) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "shape has %zd dimensions; Tack arrays have at most %d", n, TACK_MAX_NDIM);
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyIndex_Check(item)) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_TypeError, "shape[%zd] is a %s, not an int", i, Py_TYPE(item)->tp_name);
            return 0;
        }
        PyObject *idx = PyNumber_Index(item);
        if (!idx) {
            Py_DECREF(seq);
            return 0;
        }
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
        Py_DECREF(idx);
        if (overflow) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "shape[%zd] does not fit a 64-bit integer", i);
            return 0;
        }
        shape[i] = v;
    }
    Py_DECREF(seq);
    *ndim = (int)n;
    return 1;
}

int tack_py_to_element(PyObject *obj, tack_dtype dtype, void *out)
{
    if (dtype == TACK_F32 || dtype == TACK_F64) {
        double v = PyFloat_AsDouble(obj);
        if (v == -1.0 && PyErr_Occurred()) {
            int too_big = PyErr_ExceptionMatches(PyExc_OverflowError);
            PyErr_Clear();
            if (too_big)
                PyErr_Format(PyExc_ValueError, "%R is out of range for %s", obj, tack_dtype_name(dtype));
            else
                PyErr_Format(PyExc_TypeError, "expected a number for %s, got %s", tack_dtype_name(dtype),
                             Py_TYPE(obj)->tp_name);
            return -1;
        }
        if (dtype == TACK_F32) {
            float f = (float)v;
            memcpy(out, &f, sizeof f);
        } else {
            memcpy(out, &v, sizeof v);
        }
        return 0;
    }
    PyObject *idx;
    if (PyFloat_Check(obj)) {
        double d = PyFloat_AS_DOUBLE(obj);
        /* NaN and infinities have no integer value; finite values truncate
         * toward zero as NumPy's casts do, and the range check below
         * decides whether the result fits. */
        idx = isfinite(d) ? PyLong_FromDouble(d) : NULL;
        if (!idx) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%R cannot be stored in %s", obj, tack_dtype_name(dtype));
            return -1;
        }
    } else {
        idx = PyNumber_Index(obj);
        if (!idx) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "expected an integer for %s, got %s", tack_dtype_name(dtype),
                         Py_TYPE(obj)->tp_name);
            return -1;
        }
    }
    int overflow = 0;
    long long s = 0;
    unsigned long long u = 0;
    int is_unsigned = dtype == TACK_U8 || dtype == TACK_U16 || dtype == TACK_U32 || dtype == TACK_U64;
    if (is_unsigned) {
        u = PyLong_AsUnsignedLongLong(idx);
        overflow = u == (unsigned long long)-1 && PyErr_Occurred();
    } else {
        s = PyLong_AsLongLongAndOverflow(idx, &overflow);
        overflow = overflow || (s == -1 && PyErr_Occurred());
    }
    Py_DECREF(idx);
    if (!overflow) {
        switch (dtype) {
        case TACK_I8: overflow = s < INT8_MIN || s > INT8_MAX; if (!overflow) { int8_t v = (int8_t)s; memcpy(out, &v, 1); } break;
        case TACK_I16: overflow = s < INT16_MIN || s > INT16_MAX; if (!overflow) { int16_t v = (int16_t)s; memcpy(out, &v, 2); } break;
        case TACK_I32: overflow = s < INT32_MIN || s > INT32_MAX; if (!overflow) { int32_t v = (int32_t)s; memcpy(out, &v, 4); } break;
        case TACK_I64: { int64_t v = s; memcpy(out, &v, 8); } break;
        case TACK_U8: overflow = u > UINT8_MAX; if (!overflow) { uint8_t v = (uint8_t)u; memcpy(out, &v, 1); } break;
        case TACK_U16: overflow = u > UINT16_MAX; if (!overflow) { uint16_t v = (uint16_t)u; memcpy(out, &v, 2); } break;
        case TACK_U32: overflow = u > UINT32_MAX; if (!overflow) { uint32_t v = (uint32_t)u; memcpy(out, &v, 4); } break;
        case TACK_U64: { uint64_t v = u; memcpy(out, &v, 8); } break;
        default: overflow = 1; break;
        }
    }
    if (overflow) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%R is out of range for %s", obj, tack_dtype_name(dtype));
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ creation */

static PyObject *make_array(PyObject *args, PyObject *kwargs, const char *func)
{
    static char *kwlist[] = {"shape", "dtype", "device", "exportable", NULL};
    PyObject *shape_obj, *dtype_obj = NULL, *device_obj = Py_None;
    int exportable = 0;
    char fmt[32];
    snprintf(fmt, sizeof fmt, "O|O$Op:%s", func);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist, &shape_obj, &dtype_obj, &device_obj, &exportable))
        return NULL;
    int ndim;
    int64_t shape[TACK_MAX_NDIM];
    tack_dtype dtype = TACK_F32;
    if (!tack_py_parse_shape(shape_obj, &ndim, shape))
        return NULL;
    if (dtype_obj && dtype_obj != Py_None && !tack_py_dtype_converter(dtype_obj, &dtype))
        return NULL;
    tack_device *device;
    if (!tack_py_device_converter(device_obj, &device))
        return NULL;
    tack_array *a;
    tack_status st = tack_array_empty(device, dtype, ndim, shape, exportable, &a);
    tack_device_release(device);
    if (st != TACK_OK)
        return tack_py_raise(st);
    return tack_py_array_new(a);
}

static PyObject *py_empty(PyObject *m, PyObject *args, PyObject *kwargs)
{
    (void)m;
    return make_array(args, kwargs, "empty");
}

static PyObject *py_zeros(PyObject *m, PyObject *args, PyObject *kwargs)
{
    (void)m;
    return make_array(args, kwargs, "zeros");
}

/* A C-contiguous NumPy array of obj (with dtype, if given); new reference. */
PyObject *tack_py_as_numpy(PyObject *obj, PyObject *dtype_name)
{
    PyObject *np = tack_py_numpy();
    if (!np)
        return NULL;
    /* asarray(order="C") keeps 0-d shapes, which ascontiguousarray does not. */
    PyObject *fn = PyObject_GetAttrString(np, "asarray");
    if (!fn)
        return NULL;
    PyObject *args = PyTuple_Pack(2, obj, dtype_name ? dtype_name : Py_None);
    PyObject *kw = args ? Py_BuildValue("{s:s}", "order", "C") : NULL;
    PyObject *r = kw ? PyObject_Call(fn, args, kw) : NULL;
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_DECREF(fn);
    return r;
}

/* Copies a NumPy array into a new Tack array on `device`. */
static PyObject *array_from_numpy(PyObject *arr, tack_device *device)
{
    PyObject *dt = PyObject_GetAttrString(arr, "dtype");
    PyObject *name = dt ? PyObject_GetAttrString(dt, "name") : NULL;
    Py_XDECREF(dt);
    if (!name)
        return NULL;
    tack_dtype dtype;
    const char *s = PyUnicode_AsUTF8(name);
    tack_status st = s ? tack_dtype_from_name(s, &dtype) : TACK_ETYPE;
    Py_DECREF(name);
    if (!s)
        return NULL;
    if (st != TACK_OK)
        return tack_py_raise(st);
    Py_buffer view;
    if (PyObject_GetBuffer(arr, &view, PyBUF_C_CONTIGUOUS | PyBUF_ND) < 0)
        return NULL;
    int64_t shape[TACK_MAX_NDIM];
    for (int i = 0; i < view.ndim; i++)
        shape[i] = view.shape[i];
    tack_array *a;
    st = tack_array_empty(device, dtype, view.ndim, shape, 0, &a);
    if (st == TACK_OK) {
        st = tack_array_copy_from_host(a, view.buf, (size_t)view.len);
        if (st != TACK_OK)
            tack_array_release(a);
    }
    PyBuffer_Release(&view);
    if (st != TACK_OK)
        return tack_py_raise(st);
    return tack_py_array_new(a);
}

static PyObject *py_array(PyObject *m, PyObject *args, PyObject *kwargs)
{
    (void)m;
    static char *kwlist[] = {"obj", "dtype", "device", NULL};
    PyObject *obj, *dtype_obj = Py_None, *device_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$O:array", kwlist, &obj, &dtype_obj, &device_obj))
        return NULL;
    tack_dtype dtype = TACK_F32;
    int have_dtype = dtype_obj != Py_None;
    if (have_dtype && !tack_py_dtype_converter(dtype_obj, &dtype))
        return NULL;
    tack_device *device;
    if (!tack_py_device_converter(device_obj, &device))
        return NULL;
    PyObject *result = NULL, *arr = NULL;
    if (PyObject_TypeCheck(obj, &TackArray_Type) &&
        (!have_dtype || tack_array_dtype(TACK_PY_ARRAY(obj)) == dtype)) {
        tack_array *r;
        tack_status st = tack_array_to_device(TACK_PY_ARRAY(obj), device, &r);
        result = st == TACK_OK ? tack_py_array_new(r) : tack_py_raise(st);
        goto done;
    }
    PyObject *name = have_dtype ? PyUnicode_FromString(tack_dtype_name(dtype)) : NULL;
    if (PyObject_TypeCheck(obj, &TackArray_Type)) {
        PyObject *host = PyObject_CallMethod(obj, "to_numpy", NULL);
        arr = host ? tack_py_as_numpy(host, name) : NULL;
        Py_XDECREF(host);
    } else {
        arr = tack_py_as_numpy(obj, name);
    }
    Py_XDECREF(name);
    if (arr)
        result = array_from_numpy(arr, device);
done:
    Py_XDECREF(arr);
    tack_device_release(device);
    return result;
}

static PyObject *py_array_from_ptr(PyObject *m, PyObject *args, PyObject *kwargs)
{
    (void)m;
    static char *kwlist[] = {"ptr", "dtype", "shape", "writable", "device", NULL};
    PyObject *ptr, *dtype_obj, *shape_obj, *device_obj = Py_None;
    int writable = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|p$O:array_from_ptr", kwlist, &ptr, &dtype_obj, &shape_obj,
                                     &writable, &device_obj))
        return NULL;
    if (!PyLong_Check(ptr) || PyBool_Check(ptr)) {
        PyErr_Format(PyExc_TypeError, "ptr must be an integer address in [0, 2**64), not %s", Py_TYPE(ptr)->tp_name);
        return NULL;
    }
    unsigned long long address = PyLong_AsUnsignedLongLong(ptr);
    if (address == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "ptr %R is not an address: it must be an integer in [0, 2**64)", ptr);
        return NULL;
    }
    /* The converter refuses None: memory Tack did not allocate has no
     * default type, and a wrong guess reads plausible garbage. */
    tack_dtype dtype;
    if (!tack_py_dtype_converter(dtype_obj, &dtype))
        return NULL;
    int ndim;
    int64_t shape[TACK_MAX_NDIM];
    if (!tack_py_parse_shape(shape_obj, &ndim, shape))
        return NULL;
    tack_device *device;
    if (!tack_py_device_converter(device_obj, &device))
        return NULL;
    tack_array *a;
    tack_status st = tack_array_wrap(device, address, dtype, ndim, shape, writable, &a);
    tack_device_release(device);
    if (st != TACK_OK)
        return tack_py_raise(st);
    return tack_py_array_new(a);
}

/* ------------------------------------------------------------------ asarray */

/* What keeps the memory of an imported buffer or CUDA Array Interface alive:
 * the exporter's Py_buffer (buffer protocol) or a reference to the producer
 * (CAI). It is released once, by tack_buffer_wrap's callback, when the last
 * array over the memory goes: on any thread, maybe from a C consumer of a
 * DLPack export long after Python has stopped. */
typedef struct {
    Py_buffer view; /* view.obj is NULL when unused */
    PyObject *owner;
} py_hold;

static int interpreter_gone(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return !Py_IsInitialized() || Py_IsFinalizing();
#else
    return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

static void hold_release(void *context)
{
    py_hold *h = context;
    /* Objects of a finalizing interpreter may be gone already, and taking
     * the GIL then can hang or end the calling thread: the references are
     * left to the process's end. */
    if (interpreter_gone()) {
        free(h);
        return;
    }
    PyGILState_STATE gil = PyGILState_Ensure();
    /* The last array may go while an exception is propagating; the
     * exporter's release code must neither see nor clear it. */
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *pending = PyErr_GetRaisedException();
#else
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
#endif
    if (h->view.obj)
        PyBuffer_Release(&h->view);
    Py_XDECREF(h->owner);
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(pending);
#else
    PyErr_Restore(type, value, traceback);
#endif
    PyGILState_Release(gil);
    free(h);
}

/* The device that wraps memory of kind `dl` for tack.asarray: device= if it
 * can (RuntimeError naming the right device otherwise: an import never
 * copies), else the default device, else the process-wide device for `dl`.
 * CUDA memory carries no device ordinal here, so any CUDA device may try
 * (the backend's pointer check refuses another device's memory). New
 * reference, or NULL with an exception. */
static tack_device *asarray_device(PyObject *device_obj, DLDevice dl, const char *what)
{
    tack_device *d;
    if (device_obj != Py_None) {
        if (!tack_py_device_converter(device_obj, &d))
            return NULL;
        DLDevice own = tack_device_dl_device(d);
        if (own.device_type == dl.device_type || tack_device_can_wrap(d, dl))
            return d;
        PyErr_Format(PyExc_RuntimeError,
                     "tack.asarray: %s cannot be wrapped by device %s; import it on %s, or copy it with "
                     "tack.array(obj, device=...)",
                     what, tack_device_name(d), dl.device_type == kDLCPU ? "the cpu device" : "a cuda device");
        tack_device_release(d);
        return NULL;
    }
    tack_device *fallback = tack_py_default_device();
    if (!fallback)
        return NULL;
    DLDevice own = tack_device_dl_device(fallback);
    if (own.device_type == dl.device_type || tack_device_can_wrap(fallback, dl))
        return tack_device_retain(fallback);
    tack_status st = tack_device_for_dlpack(dl, &d);
    if (st != TACK_OK) {
        tack_py_raise(st);
        return NULL;
    }
    return d;
}

/* Wraps `nbytes` at `data` on `device` as an array held by `h` (which is
 * released, once, whatever happens). */
static PyObject *wrap_held(tack_device *device, void *data, size_t nbytes, py_hold *h, tack_dtype dtype, int ndim,
                           const int64_t *shape, int writable)
{
    tack_buffer *buf;
    tack_status st = tack_buffer_wrap(device, data, nbytes, hold_release, h, &buf);
    if (st != TACK_OK) {
        /* The callback is not called on failure. */
        tack_py_raise(st);
        hold_release(h);
        return NULL;
    }
    tack_array *a;
    st = tack_array_from_buffer(buf, dtype, ndim, shape, writable, &a);
    if (st != TACK_OK)
        tack_py_raise(st);
    /* On success the array holds the buffer; on failure this runs the hold's
     * release (the pending exception survives it). */
    tack_buffer_release(buf);
    return st == TACK_OK ? tack_py_array_new(a) : NULL;
}

/* A dtype from an element kind ('i', 'u', 'f') and a size in bytes. */
static int dtype_of(char kind, Py_ssize_t size, tack_dtype *out)
{
    static const struct {
        char kind;
        Py_ssize_t size;
        tack_dtype dtype;
    } table[] = {
        {'i', 1, TACK_I8},  {'u', 1, TACK_U8},  {'i', 2, TACK_I16}, {'u', 2, TACK_U16}, {'i', 4, TACK_I32},
        {'u', 4, TACK_U32}, {'i', 8, TACK_I64}, {'u', 8, TACK_U64}, {'f', 4, TACK_F32}, {'f', 8, TACK_F64},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        if (table[i].kind == kind && table[i].size == size) {
            *out = table[i].dtype;
            return 1;
        }
    }
    return 0;
}

/* The dtype of a struct-module format with the exporter's itemsize: one
 * optional byte-order mark and one integer or float code. */
static int dtype_from_format(const char *format, Py_ssize_t itemsize, tack_dtype *out)
{
    const char *f = format ? format : "B";
    char order = '@';
    if (*f && strchr("@=<>!", *f))
        order = *f++;
    char kind = 0;
    if (f[0] && !f[1]) {
        if (strchr("bhilqn", f[0]))
            kind = 'i';
        else if (strchr("BHILQN", f[0]))
            kind = 'u';
        else if (strchr("fd", f[0]))
            kind = 'f';
    }
#if PY_LITTLE_ENDIAN
    int foreign = order == '>' || order == '!';
#else
    int foreign = order == '<';
#endif
    if (kind && foreign && itemsize > 1) {
        PyErr_Format(PyExc_TypeError,
                     "tack.asarray: the buffer's format '%s' is of the other byte order; Tack arrays are in the "
                     "machine's order: byte-swap it first (np.asarray(obj).astype(...))",
                     format);
        return 0;
    }
    if (!kind || !dtype_of(kind, itemsize, out)) {
        PyErr_Format(PyExc_TypeError,
                     "tack.asarray: the buffer's format '%s' (%zd-byte items) has no Tack dtype; Tack arrays hold "
                     "signed or unsigned integers of 8 to 64 bits and 32- or 64-bit floats",
                     format ? format : "B", itemsize);
        return 0;
    }
    return 1;
}

static PyObject *asarray_buffer(PyObject *obj, PyObject *device_obj)
{
    py_hold *h = calloc(1, sizeof *h);
    if (!h)
        return PyErr_NoMemory();
    /* Strides are asked for so that any exporter answers, contiguous or
     * not; contiguity is checked here so that it is a ValueError as for
     * DLPack, not the exporter's BufferError. */
    if (PyObject_GetBuffer(obj, &h->view, PyBUF_RECORDS_RO) < 0) {
        free(h);
        return NULL;
    }
    Py_buffer *v = &h->view;
    tack_dtype dtype;
    int64_t shape[TACK_MAX_NDIM];
    if (v->ndim > TACK_MAX_NDIM) {
        PyErr_Format(PyExc_ValueError, "tack.asarray: the buffer has %d dimensions; Tack arrays have at most %d",
                     v->ndim, TACK_MAX_NDIM);
        goto fail;
    }
    if (v->suboffsets || !PyBuffer_IsContiguous(v, 'C')) {
        PyErr_SetString(PyExc_ValueError,
                        "tack.asarray: the buffer is not C-contiguous; Tack arrays cannot describe strided memory: "
                        "make it contiguous first (np.ascontiguousarray), or copy it with tack.array(obj)");
        goto fail;
    }
    if (!dtype_from_format(v->format, v->itemsize, &dtype))
        goto fail;
    if (v->len && (uintptr_t)v->buf % (uintptr_t)v->itemsize) {
        PyErr_Format(PyExc_ValueError,
                     "tack.asarray: the buffer's memory (%p) is not aligned to its %zd-byte elements; copy it with "
                     "tack.array(obj)",
                     v->buf, v->itemsize);
        goto fail;
    }
    if (!v->shape && v->ndim > 1) {
        PyErr_Format(PyExc_ValueError, "tack.asarray: the %s buffer has %d dimensions but no shape",
                     Py_TYPE(obj)->tp_name, v->ndim);
        goto fail;
    }
    /* A 1-D exporter may leave the shape out: its length then says it. */
    for (int i = 0; i < v->ndim; i++)
        shape[i] = v->shape ? (int64_t)v->shape[i] : (int64_t)(v->len / v->itemsize);
    tack_device *device = asarray_device(device_obj, (DLDevice){kDLCPU, 0}, "host memory (a buffer)");
    if (!device)
        goto fail;
    PyObject *r = wrap_held(device, v->buf, (size_t)v->len, h, dtype, v->ndim, shape, !v->readonly);
    tack_device_release(device);
    return r;
fail:
    hold_release(h);
    return NULL;
}

/* The keys read from a __cuda_array_interface__ dictionary, interned once. */
enum { CAI_VERSION, CAI_TYPESTR, CAI_SHAPE, CAI_DATA, CAI_STRIDES, CAI_MASK, CAI_STREAM, CAI_KEYS };
static PyObject *cai_keys[CAI_KEYS];

static int cai_init(void)
{
    static const char *const names[CAI_KEYS] = {"version", "typestr", "shape", "data", "strides", "mask", "stream"};
    for (int i = 0; i < CAI_KEYS; i++)
        if (!(cai_keys[i] = PyUnicode_InternFromString(names[i])))
            return -1;
    return 0;
}

/* One entry of a __cuda_array_interface__ dictionary (borrowed), NULL if
 * absent or None (str keys: the lookup cannot fail). */
static PyObject *cai_item(PyObject *cai, int key)
{
    PyObject *v = PyDict_GetItemWithError(cai, cai_keys[key]);
    return v == Py_None ? NULL : v;
}

static PyObject *asarray_cai(PyObject *obj, PyObject *cai, PyObject *device_obj)
{
    const char *tname = Py_TYPE(obj)->tp_name;
    if (!PyDict_Check(cai)) {
        PyErr_Format(PyExc_TypeError, "tack.asarray: %s.__cuda_array_interface__ is a %s, not a dict", tname,
                     Py_TYPE(cai)->tp_name);
        return NULL;
    }
    PyObject *version = cai_item(cai, CAI_VERSION), *typestr = cai_item(cai, CAI_TYPESTR);
    PyObject *shape_obj = cai_item(cai, CAI_SHAPE), *data = cai_item(cai, CAI_DATA);
    PyObject *strides = cai_item(cai, CAI_STRIDES), *mask = cai_item(cai, CAI_MASK);
    PyObject *stream = cai_item(cai, CAI_STREAM);
    int overflow = 0;
    long ver = version && PyLong_Check(version) ? PyLong_AsLongAndOverflow(version, &overflow) : -1;
    if (overflow)
        ver = -1;
    if (ver < 0 || ver > 3) {
        PyErr_Format(PyExc_ValueError,
                     "tack.asarray: %s.__cuda_array_interface__ has version %R; Tack reads versions 0 to 3", tname,
                     version ? version : Py_None);
        return NULL;
    }
    if (!shape_obj || !typestr || !PyUnicode_Check(typestr) || !data || !PyTuple_Check(data) ||
        PyTuple_GET_SIZE(data) != 2) {
        PyErr_Format(PyExc_ValueError,
                     "tack.asarray: %s.__cuda_array_interface__ lacks a shape, a typestr (str) or data "
                     "(a (pointer, read_only) tuple)",
                     tname);
        return NULL;
    }
    if (mask) {
        PyErr_Format(PyExc_ValueError, "tack.asarray: %s has a mask; Tack arrays cannot describe masked memory",
                     tname);
        return NULL;
    }
    int ndim;
    int64_t shape[TACK_MAX_NDIM];
    if (!tack_py_parse_shape(shape_obj, &ndim, shape))
        return NULL;
    if (PyLong_Check(shape_obj)) {
        PyErr_Format(PyExc_ValueError, "tack.asarray: %s.__cuda_array_interface__'s shape is not a tuple", tname);
        return NULL;
    }
    /* typestr: a byte order, a kind and a size ("<f4", "|u1"). */
    const char *ts = PyUnicode_AsUTF8(typestr);
    if (!ts)
        return NULL;
    tack_dtype dtype;
    char order = ts[0];
    long size = ts[0] && ts[1] && ts[2] ? strtol(ts + 2, NULL, 10) : 0;
#if PY_LITTLE_ENDIAN
    int foreign = order == '>';
#else
    int foreign = order == '<';
#endif
    if (!strchr("<>|=", order) || (foreign && size > 1) || !ts[1] || !dtype_of(ts[1], size, &dtype) ||
        strlen(ts) != 2 + (size >= 10 ? 2u : 1u)) {
        PyErr_Format(PyExc_TypeError,
                     "tack.asarray: typestr '%s' has no Tack dtype; Tack arrays hold signed or unsigned integers of "
                     "8 to 64 bits and 32- or 64-bit floats, in the machine's byte order",
                     ts);
        return NULL;
    }
    size_t item = tack_dtype_size(dtype), count = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            PyErr_Format(PyExc_ValueError, "tack.asarray: shape[%d] is negative (%lld)", i, (long long)shape[i]);
            return NULL;
        }
        if (shape[i] && count > SIZE_MAX / item / (size_t)shape[i]) {
            PyErr_SetString(PyExc_ValueError, "tack.asarray: the shape's bytes overflow");
            return NULL;
        }
        count *= (size_t)shape[i];
    }
    if (strides) {
        PyObject *seq = PySequence_Fast(strides, "__cuda_array_interface__ strides must be None or a tuple");
        if (!seq)
            return NULL;
        int ok = PySequence_Fast_GET_SIZE(seq) == ndim;
        long long expect = (long long)item;
        for (int i = ndim - 1; ok && i >= 0; i--) {
            long long s = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
            if (s == -1 && PyErr_Occurred()) {
                Py_DECREF(seq);
                return NULL;
            }
            /* An extent of 1 is never stepped over, so its stride is free. */
            ok = shape[i] == 1 || s == expect || count == 0;
            expect *= shape[i];
        }
        Py_DECREF(seq);
        if (!ok) {
            PyErr_Format(PyExc_ValueError,
                         "tack.asarray: %s is not C-contiguous (strides %R for shape %R); Tack arrays cannot "
                         "describe strided memory: make it contiguous first",
                         tname, strides, shape_obj);
            return NULL;
        }
    }
    PyObject *ptr = PyTuple_GET_ITEM(data, 0);
    if (!PyLong_Check(ptr) || PyBool_Check(ptr)) {
        PyErr_Format(PyExc_TypeError, "tack.asarray: %s's data pointer is a %s, not an int", tname,
                     Py_TYPE(ptr)->tp_name);
        return NULL;
    }
    unsigned long long address = PyLong_AsUnsignedLongLong(ptr);
    if (address == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "tack.asarray: %s's data pointer %R is not an address in [0, 2**64)", tname,
                     ptr);
        return NULL;
    }
    if (address > UINTPTR_MAX || (address == 0 && count)) {
        PyErr_Format(PyExc_ValueError, "tack.asarray: %s's data pointer %R is not a valid address", tname, ptr);
        return NULL;
    }
    int read_only = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1));
    if (read_only < 0)
        return NULL;
    if (stream && (!PyLong_Check(stream) || PyBool_Check(stream))) {
        PyErr_Format(PyExc_TypeError, "tack.asarray: %s's stream is a %s, not an int or None", tname,
                     Py_TYPE(stream)->tp_name);
        return NULL;
    }
    unsigned long long stream_handle = stream ? PyLong_AsUnsignedLongLong(stream) : 0;
    if (stream && ((stream_handle == (unsigned long long)-1 && PyErr_Occurred()) || stream_handle == 0)) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError,
                     "tack.asarray: %s's stream %R is not a stream: the CUDA Array Interface disallows 0 and takes "
                     "None for no synchronisation",
                     tname, stream);
        return NULL;
    }
    tack_device *device = asarray_device(device_obj, (DLDevice){kDLCUDA, 0}, "CUDA memory (__cuda_array_interface__)");
    if (!device)
        return NULL;
    /* The interface has the consumer order its use after the producer's
     * stream: Tack's stream waits for it on the device, not the host. */
    if (stream) {
        tack_status st = tack_device_wait_stream(device, stream_handle);
        if (st != TACK_OK) {
            tack_device_release(device);
            return tack_py_raise(st);
        }
    }
    py_hold *h = calloc(1, sizeof *h);
    if (!h) {
        tack_device_release(device);
        return PyErr_NoMemory();
    }
    h->owner = Py_NewRef(obj);
    PyObject *r = wrap_held(device, (void *)(uintptr_t)address, count * item, h, dtype, ndim, shape, !read_only);
    tack_device_release(device);
    return r;
}

static PyObject *str_dlpack_attr, *str_cai_attr;

int tack_py_lookup_optional(PyObject *obj, PyObject *name, PyObject **out)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyObject_GetOptionalAttr(obj, name, out);
#else
    return _PyObject_LookupAttr(obj, name, out);
#endif
}

static const char *const asarray_kwnames[] = {"device", NULL};

static PyObject *py_asarray(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "asarray() takes exactly one positional argument (%zd given)", nargs);
        return NULL;
    }
    PyObject *vals[1] = {NULL};
    if (tack_py_keywords("asarray", kwnames, args + nargs, asarray_kwnames, vals) < 0)
        return NULL;
    PyObject *obj = args[0], *device_obj = vals[0] ? vals[0] : Py_None;
    if (PyObject_TypeCheck(obj, &TackArray_Type)) {
        /* A Tack array already on the device asked for is its own answer,
         * as np.asarray returns an ndarray unchanged. */
        if (device_obj == Py_None)
            return Py_NewRef(obj);
        tack_device *d;
        if (!tack_py_device_converter(device_obj, &d))
            return NULL;
        int same = d == tack_array_device(TACK_PY_ARRAY(obj));
        tack_device_release(d);
        if (same)
            return Py_NewRef(obj);
        /* Otherwise DLPack says why it cannot move (it never copies). */
    }
    /* Builtin exporters speak the buffer protocol alone: skip the lookups. */
    if (PyByteArray_CheckExact(obj) || PyBytes_CheckExact(obj) || PyMemoryView_Check(obj))
        return asarray_buffer(obj, device_obj);
    /* DLPack first: it carries the device, the read-only flag and the
     * producer's deleter, and orders the producer's stream. */
    PyObject *attr;
    /* A method on the type (NumPy, PyTorch, CuPy, JAX, Warp) is found
     * without binding it; an instance attribute still counts. */
    if (PyCapsule_CheckExact(obj) || _PyType_Lookup(Py_TYPE(obj), str_dlpack_attr))
        return tack_py_from_dlpack(m, args, nargs, kwnames);
    if (tack_py_lookup_optional(obj, str_dlpack_attr, &attr) < 0)
        return NULL;
    if (attr) {
        Py_DECREF(attr);
        return tack_py_from_dlpack(m, args, nargs, kwnames);
    }
    if (tack_py_lookup_optional(obj, str_cai_attr, &attr) < 0)
        return NULL;
    if (attr) {
        PyObject *r = asarray_cai(obj, attr, device_obj);
        Py_DECREF(attr);
        return r;
    }
    if (PyObject_CheckBuffer(obj))
        return asarray_buffer(obj, device_obj);
    PyErr_Format(PyExc_TypeError,
                 "tack.asarray: a %s speaks none of DLPack (__dlpack__), the CUDA Array Interface or the buffer "
                 "protocol, so its memory cannot be shared; tack.array(obj) copies anything NumPy reads",
                 Py_TYPE(obj)->tp_name);
    return NULL;
}

static PyObject *py_live_counts(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return Py_BuildValue("{s:l,s:l,s:l}", "arrays", tack_array_live_count(), "buffers", tack_buffer_live_count(),
                         "exports", tack_dlpack_live_exports());
}

static PyMethodDef module_methods[] = {
    {"empty", (PyCFunction)(void (*)(void))py_empty, METH_VARARGS | METH_KEYWORDS,
     "empty(shape, dtype=f32, *, device=None, exportable=False)\n--\n\nA new zero-filled array."},
    {"zeros", (PyCFunction)(void (*)(void))py_zeros, METH_VARARGS | METH_KEYWORDS,
     "zeros(shape, dtype=f32, *, device=None, exportable=False)\n--\n\nA new zero-filled array."},
    {"array", (PyCFunction)(void (*)(void))py_array, METH_VARARGS | METH_KEYWORDS,
     "array(obj, dtype=None, *, device=None)\n--\n\nA copy of anything NumPy can read."},
    {"array_from_ptr", (PyCFunction)(void (*)(void))py_array_from_ptr, METH_VARARGS | METH_KEYWORDS,
     "array_from_ptr(ptr, dtype, shape, writable=False, *, device=None)\n--\n\n"
     "Wraps memory at an integer address without copying or owning it; the caller keeps it alive."},
    {"from_dlpack", (PyCFunction)(void (*)(void))tack_py_from_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "from_dlpack(source, *, device=None, copy=False)\n--\n\n"
     "Imports a DLPack tensor (an object with __dlpack__, or a capsule) without copying."},
    {"asarray", (PyCFunction)(void (*)(void))py_asarray, METH_FASTCALL | METH_KEYWORDS,
     "asarray(obj, *, device=None)\n--\n\n"
     "Shares obj's memory without copying: through DLPack, else the CUDA Array Interface, else the buffer "
     "protocol. The array keeps obj's memory alive; read-only memory gives a read-only array. A Tack array is "
     "returned as it is. With the CUDA Array Interface, Tack's stream is ordered after the producer's stream on "
     "the device, with no host wait."},
    {"live_counts", py_live_counts, METH_NOARGS, "Live C objects: arrays, buffers and DLPack exports."},
    {NULL, NULL, 0, NULL},
};

static PyStructSequence_Field exported_fields[] = {
    {"backend", "the backend that exported the memory"},
    {"size", "bytes of the array"},
    {"allocation_size", "bytes of the exported allocation (>= size)"},
    {"handle", "the OS handle (a POSIX file descriptor owned by the array's buffer)"},
    {"handle_type", "'posix_fd' or 'win32_kmt'"},
    {"device_uuid", "the device's 16-byte UUID"},
    {NULL, NULL},
};

static PyStructSequence_Desc exported_desc = {
    "tack.ExportedMemory",
    "OS-handle export of an array's memory, in plain Python values.",
    exported_fields,
    6,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "tack._tack", "Tack's C core.", -1, module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tack(void);
PyMODINIT_FUNC PyInit__tack(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    TackExportedMemory_Type = PyStructSequence_NewType(&exported_desc);
    if (!TackExportedMemory_Type || PyModule_AddObjectRef(m, "ExportedMemory", (PyObject *)TackExportedMemory_Type) < 0)
        goto fail;
    if (tack_py_dtype_init(m) < 0 || tack_py_device_init(m) < 0 || tack_py_array_init(m) < 0 ||
        tack_py_dlpack_init(m) < 0 || tack_py_kernel_init(m) < 0 || tack_py_ipc_init(m) < 0)
        goto fail;
    if (PyModule_AddStringConstant(m, "__version__", TACK_VERSION_STRING) < 0)
        goto fail;
    str_dlpack_attr = PyUnicode_InternFromString("__dlpack__");
    str_cai_attr = PyUnicode_InternFromString("__cuda_array_interface__");
    if (!str_dlpack_attr || !str_cai_attr || cai_init() < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
