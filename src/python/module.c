/* tack._tack: module functions, status mapping, and the pieces the types share. */
#include "ext.h"

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
    if (!numpy)
        numpy = PyImport_ImportModule("numpy");
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
    signed char slot[KW_MAX];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        int found = -1;
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
    if (n <= KW_MAX) {
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
            PyErr_Format(PyExc_TypeError, "expected a number for a %s value, got %s", tack_dtype_name(dtype),
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
        if (d != d || d == d + 1.0) /* NaN or infinite (or beyond exact range) */
            idx = NULL;
        else
            idx = PyLong_FromDouble(d);
        if (!idx) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%R cannot be stored in %s", obj, tack_dtype_name(dtype));
            return -1;
        }
    } else {
        idx = PyNumber_Index(obj);
        if (!idx) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "expected an integer for a %s value, got %s", tack_dtype_name(dtype),
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
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
