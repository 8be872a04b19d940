/* tack.asarray: sharing memory through DLPack, the CUDA Array Interface or
 * the buffer protocol. This file only reads the protocols' Python objects;
 * the checks, the device choice and the array are those of a DLPack import
 * (src/dlpack/import.c). */
#include "ext.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tack/import.h"

static PyObject *str_dlpack_attr, *str_cai_attr, *str_ml_dtypes;

/* What keeps the memory of an imported buffer or CUDA Array Interface alive:
 * the exporter's Py_buffer (buffer protocol) or a reference to the producer
 * (CAI). It is released once, by the import's callback, when the last array
 * over the memory goes: on any thread, maybe from a C consumer of a DLPack
 * export long after Python has stopped. */
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

/* Imports the memory `im` describes, held by `h` (released, once, whatever
 * happens), on device= (None: none asked for) or the default device. */
static tack_array *import_held(struct tack_import *im, py_hold *h, PyObject *device_obj)
{
    tack_device *asked = NULL, *fallback = NULL;
    if (device_obj != Py_None ? !tack_py_device_converter(device_obj, &asked)
                              : !(fallback = tack_py_default_device())) {
        hold_release(h);
        return NULL;
    }
    im->release = hold_release;
    im->context = h;
    tack_array *a;
    tack_status st = tack_import_array(im, asked, fallback, &a);
    tack_device_release(asked);
    if (st != TACK_OK) {
        /* Not adopted: the hold is still ours (the exception survives its
         * release). */
        tack_py_raise(st);
        hold_release(h);
        return NULL;
    }
    return a;
}

static PyObject *wrap(tack_array *a) { return a ? tack_py_array_new(a) : NULL; }

/* Copies up to TACK_MAX_NDIM of a buffer's Py_ssize_t extents or strides
 * into `out`; the import refuses a longer shape by its count. */
static void copy_extents(int64_t *out, const Py_ssize_t *in, int n)
{
    for (int i = 0; i < n && i < TACK_MAX_NDIM; i++)
        out[i] = (int64_t)in[i];
}

/* Shares the memory of a buffer-protocol exporter. The dtype is the one its
 * format names, or with `known` (not TACK_NDTYPES) that one, for an
 * exporter that gives no format for it: then only the bytes are asked for. */
static tack_array *share_buffer(PyObject *obj, PyObject *device_obj, tack_dtype known)
{
    py_hold *h = calloc(1, sizeof *h);
    if (!h) {
        PyErr_NoMemory();
        return NULL;
    }
    /* Strides are asked for so that any exporter answers, contiguous or
     * not; contiguity is checked by the import so that it is a ValueError
     * as for DLPack, not the exporter's BufferError. */
    if (PyObject_GetBuffer(obj, &h->view, known == TACK_NDTYPES ? PyBUF_RECORDS_RO : PyBUF_STRIDES) < 0) {
        free(h);
        return NULL;
    }
    Py_buffer *v = &h->view;
    /* Read only during the import, which copies the extents. */
    int64_t shape[TACK_MAX_NDIM], strides[TACK_MAX_NDIM];
    struct tack_import im = {
        .what = "the buffer",
        .data = v->buf,
        .device = {kDLCPU, 0},
        .ndim = v->ndim,
        .shape = shape,
        .max_bytes = v->len < 0 ? 0 : (size_t)v->len,
        .writable = !v->readonly,
    };
    if (v->suboffsets) {
        PyErr_SetString(PyExc_ValueError,
                        "tack.asarray: the buffer is not C-contiguous (it has suboffsets); Tack arrays cannot "
                        "describe indirect memory: copy it with tack.array(obj)");
        goto fail;
    }
    if (known != TACK_NDTYPES) {
        if (v->itemsize != (Py_ssize_t)tack_dtype_size(known)) {
            PyErr_Format(PyExc_ValueError, "tack.asarray: the %s buffer has %zd-byte items, not %s's %zu",
                         Py_TYPE(obj)->tp_name, v->itemsize, tack_dtype_name(known), tack_dtype_size(known));
            goto fail;
        }
        im.dtype = known;
    } else {
        tack_status st = tack_dtype_from_format(v->format, v->itemsize < 0 ? 0 : (size_t)v->itemsize, &im.dtype);
        if (st != TACK_OK) {
            tack_py_raise(st);
            goto fail;
        }
    }
    if (v->shape) {
        copy_extents(shape, v->shape, v->ndim);
    } else if (v->ndim > 1) {
        PyErr_Format(PyExc_ValueError, "tack.asarray: the %s buffer has %d dimensions but no shape",
                     Py_TYPE(obj)->tp_name, v->ndim);
        goto fail;
    } else if (v->ndim == 1) {
        /* A 1-D exporter may leave the shape out: its length then says it. */
        shape[0] = (int64_t)(v->len / v->itemsize);
    }
    if (v->strides) {
        copy_extents(strides, v->strides, v->ndim);
        im.strides = strides;
    }
    return import_held(&im, h, device_obj);
fail:
    hold_release(h);
    return NULL;
}

static PyObject *asarray_buffer_of(PyObject *obj, PyObject *device_obj, tack_dtype known)
{
    return wrap(share_buffer(obj, device_obj, known));
}

static PyObject *asarray_buffer(PyObject *obj, PyObject *device_obj)
{
    return asarray_buffer_of(obj, device_obj, TACK_NDTYPES);
}

/* Whether obj is a NumPy array of ml_dtypes' bfloat16, which NumPy exports
 * neither through DLPack nor with a buffer format; -1 with an exception.
 * Only a process that imported ml_dtypes has such arrays. */
static int is_numpy_bfloat16(PyObject *obj)
{
    PyObject *ml = PyImport_GetModule(str_ml_dtypes);
    int imported = ml && ml != Py_None;
    Py_XDECREF(ml);
    if (!imported)
        return PyErr_Occurred() ? -1 : 0;
    int r = tack_py_is_ndarray(obj);
    if (r != 1)
        return r;
    PyObject *theirs = PyObject_GetAttrString(obj, "dtype");
    PyObject *bf16 = theirs ? tack_py_numpy_dtype(TACK_BF16) : NULL;
    r = bf16 ? PyObject_RichCompareBool(theirs, bf16, Py_EQ) : -1;
    Py_XDECREF(bf16);
    Py_XDECREF(theirs);
    return r;
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

/* One entry of a __cuda_array_interface__ dictionary (borrowed from the
 * caller's private copy), NULL if absent or None (str keys: the lookup
 * cannot fail). */
static PyObject *cai_item(PyObject *cai, int key)
{
    PyObject *v = PyDict_GetItemWithError(cai, cai_keys[key]);
    return v == Py_None ? NULL : v;
}

/* Reads the interface's strides (a sequence of ints, one per dimension)
 * into `out`. 0 with an exception. */
static int cai_strides(PyObject *strides, int ndim, int64_t *out, const char *tname)
{
    /* A tuple of its own: a stride's __index__ may change a list while
     * it is read. */
    if (!PySequence_Check(strides)) {
        PyErr_Format(PyExc_TypeError,
                     "tack.asarray: %s.__cuda_array_interface__ strides must be None or a tuple, not %s", tname,
                     Py_TYPE(strides)->tp_name);
        return 0;
    }
    PyObject *seq = PySequence_Tuple(strides);
    if (!seq)
        return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    if (n != ndim) {
        PyErr_Format(PyExc_ValueError, "tack.asarray: %s.__cuda_array_interface__ has %zd strides for %d dimensions",
                     tname, n, ndim);
        Py_DECREF(seq);
        return 0;
    }
    for (Py_ssize_t i = 0; i < n && i < TACK_MAX_NDIM; i++) {
        long long s = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, i));
        if (s == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return 0;
        }
        out[i] = s;
    }
    Py_DECREF(seq);
    return 1;
}

static PyObject *asarray_cai_of(PyObject *obj, PyObject *cai, PyObject *device_obj);

static PyObject *asarray_cai(PyObject *obj, PyObject *cai, PyObject *device_obj)
{
    if (!PyDict_Check(cai)) {
        PyErr_Format(PyExc_TypeError, "tack.asarray: %s.__cuda_array_interface__ is a %s, not a dict",
                     Py_TYPE(obj)->tp_name, Py_TYPE(cai)->tp_name);
        return NULL;
    }
    /* The entries are read from a copy only this call holds: reading them
     * runs the producer's code (a shape entry's __index__, the read-only
     * flag's __bool__), which may change or clear the producer's dict and
     * so free the values still to be read. */
    PyObject *own = PyDict_Copy(cai);
    if (!own)
        return NULL;
    PyObject *r = asarray_cai_of(obj, own, device_obj);
    Py_DECREF(own);
    return r;
}

/* The interface's data entry, a (pointer, read_only) pair: the import's
 * address and whether it may write. 0 with an exception. */
static int cai_data(PyObject *data, const char *tname, struct tack_import *im)
{
    PyObject *ptr = PyTuple_GET_ITEM(data, 0);
    uint64_t address;
    PyObject *label = PyUnicode_FromFormat("tack.asarray: %s's data pointer", tname);
    const char *label_text = label ? PyUnicode_AsUTF8(label) : NULL;
    int ok = label_text && tack_py_address(ptr, label_text, &address);
    Py_XDECREF(label);
    if (!ok)
        return 0;
    if (address > UINTPTR_MAX) {
        PyErr_Format(PyExc_ValueError, "tack.asarray: %s's data pointer %R is not a valid address here", tname, ptr);
        return 0;
    }
    im->data = (void *)(uintptr_t)address;
    int read_only = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1));
    if (read_only < 0)
        return 0;
    im->writable = !read_only;
    return 1;
}

/* The interface's stream entry, an int or None: what the import orders its
 * use after. 0 with an exception. */
static int cai_stream(PyObject *stream, const char *tname, struct tack_import *im)
{
    if (stream && (!PyLong_Check(stream) || PyBool_Check(stream))) {
        PyErr_Format(PyExc_TypeError, "tack.asarray: %s's stream is a %s, not an int or None", tname,
                     Py_TYPE(stream)->tp_name);
        return 0;
    }
    /* The interface has the consumer order its use after the producer's
     * stream: the import makes Tack's stream wait for it on the device. */
    im->producer_stream = stream ? PyLong_AsUnsignedLongLong(stream) : 0;
    if (stream && ((im->producer_stream == (unsigned long long)-1 && PyErr_Occurred()) || im->producer_stream == 0)) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError,
                     "tack.asarray: %s's stream %R is not a stream: the CUDA Array Interface disallows 0 and takes "
                     "None for no synchronisation",
                     tname, stream);
        return 0;
    }
    return 1;
}

static PyObject *asarray_cai_of(PyObject *obj, PyObject *cai, PyObject *device_obj)
{
    /* A copy too: the producer's code may assign its __class__, and the
     * old class may go with its name. */
    char tname[96];
    snprintf(tname, sizeof tname, "%s", Py_TYPE(obj)->tp_name);
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
    char what[160];
    snprintf(what, sizeof what, "%s's __cuda_array_interface__", tname);
    /* CUDA memory carries no device ordinal here: any CUDA device may try. */
    struct tack_import im = {.what = what, .device = {kDLCUDA, 0}, .any_ordinal = 1, .max_bytes = SIZE_MAX};
    int64_t shape[TACK_MAX_NDIM], stride_values[TACK_MAX_NDIM];
    if (!tack_py_parse_shape(shape_obj, &im.ndim, shape))
        return NULL;
    im.shape = shape;
    if (PyLong_Check(shape_obj)) {
        PyErr_Format(PyExc_ValueError, "tack.asarray: %s.__cuda_array_interface__'s shape is not a tuple", tname);
        return NULL;
    }
    const char *ts = PyUnicode_AsUTF8(typestr);
    if (!ts)
        return NULL;
    tack_status st = tack_dtype_from_typestr(ts, &im.dtype);
    if (st != TACK_OK)
        return tack_py_raise(st);
    if (strides) {
        if (!cai_strides(strides, im.ndim, stride_values, tname))
            return NULL;
        im.strides = stride_values;
    }
    if (!cai_data(data, tname, &im) || !cai_stream(stream, tname, &im))
        return NULL;
    py_hold *h = calloc(1, sizeof *h);
    if (!h)
        return PyErr_NoMemory();
    h->owner = Py_NewRef(obj);
    return wrap(import_held(&im, h, device_obj));
}


static const char *const asarray_kwnames[] = {"device", NULL};

PyObject *tack_py_asarray(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
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
    if (PyCapsule_CheckExact(obj) || _PyType_Lookup(Py_TYPE(obj), str_dlpack_attr)) {
        PyObject *r = tack_py_from_dlpack(m, args, nargs, kwnames);
        /* NumPy refuses bfloat16 to DLPack (BufferError): its bytes are
         * shared instead, typed by the array's dtype. */
        if (r || !PyErr_ExceptionMatches(PyExc_BufferError))
            return r;
        PyObject *refusal = tack_py_exception_take();
        int bf16 = is_numpy_bfloat16(obj);
        if (bf16 == 1) {
            Py_DECREF(refusal);
            return asarray_buffer_of(obj, device_obj, TACK_BF16);
        }
        if (bf16 < 0)
            Py_DECREF(refusal);
        else
            tack_py_exception_restore(refusal);
        return NULL;
    }
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

/* numpy.ndarray itself (not a subclass, whose buffer may differ), known
 * by name once seen and by pointer after. */
static PyTypeObject *ndarray_type;

static int is_ndarray_type(PyTypeObject *t)
{
    if (strcmp(t->tp_name, "numpy.ndarray") != 0)
        return 0;
    ndarray_type = (PyTypeObject *)Py_NewRef(t);
    return 1;
}

int tack_py_speaks_dlpack(PyObject *obj) { return _PyType_Lookup(Py_TYPE(obj), str_dlpack_attr) != NULL; }

tack_array *tack_py_share(PyObject *obj)
{
    /* tack.Array cannot be subclassed: its type is the whole test. */
    if (Py_IS_TYPE(obj, &TackArray_Type))
        return tack_array_retain(TACK_PY_ARRAY(obj));
    /* A NumPy array by the buffer protocol, a C call, rather than its
     * __dlpack__, a Python method with keywords: the same memory, flags
     * and device. What the buffer cannot say (bfloat16, byte order, an
     * unusual stride) is asked of DLPack, for its answer and message. */
    if (Py_TYPE(obj) == ndarray_type || (!ndarray_type && is_ndarray_type(Py_TYPE(obj)))) {
        tack_array *a = share_buffer(obj, Py_None, TACK_NDTYPES);
        if (a || tack_py_exception_must_propagate())
            return a;
        PyErr_Clear();
    }
    /* The common case, a producer with __dlpack__ on its type, without
     * the Python object asarray would make; what it refuses (NumPy's
     * bfloat16) takes asarray's way, which knows the fallbacks. */
    if (tack_py_speaks_dlpack(obj)) {
        tack_array *a = tack_py_dlpack_share(obj, NULL);
        if (a || !PyErr_ExceptionMatches(PyExc_BufferError))
            return a;
        PyErr_Clear();
    }
    /* The Array that tack.asarray makes holds obj's memory in its
     * tack_array (the buffer's release drops obj, taking the GIL), so the
     * tack_array outlives the Array dropped here. */
    PyObject *o = tack_py_asarray(NULL, &obj, 1, NULL);
    if (!o)
        return NULL;
    tack_array *a = tack_array_retain(TACK_PY_ARRAY(o));
    Py_DECREF(o);
    return a;
}

int tack_py_asarray_init(PyObject *module)
{
    (void)module;
    str_dlpack_attr = PyUnicode_InternFromString("__dlpack__");
    str_cai_attr = PyUnicode_InternFromString("__cuda_array_interface__");
    str_ml_dtypes = PyUnicode_InternFromString("ml_dtypes");
    return str_dlpack_attr && str_cai_attr && str_ml_dtypes && cai_init() == 0 ? 0 : -1;
}
