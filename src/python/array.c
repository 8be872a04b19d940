/* tack.Array: the type and its lifetime, repr, properties and methods. */
#include "array_type.h"

#include <stdint.h>
#include <string.h>

PyObject *tack_py_array_new(tack_array *array)
{
    TackArrayObject *o = PyObject_New(TackArrayObject, &TackArray_Type);
    if (!o) {
        tack_array_release(array);
        return NULL;
    }
    o->array = array;
    o->weakrefs = NULL;
    return (PyObject *)o;
}

static void array_dealloc(PyObject *self)
{
    if (((TackArrayObject *)self)->weakrefs)
        PyObject_ClearWeakRefs(self);
    tack_array_release(ARR(self));
    PyObject_Free(self);
}

PyObject *tack_py_shape_tuple(const tack_array *a)
{
    int nd = tack_array_ndim(a);
    const int64_t *shape = tack_array_shape(a);
    PyObject *t = PyTuple_New(nd);
    if (!t)
        return NULL;
    for (int i = 0; i < nd; i++) {
        PyObject *v = PyLong_FromLongLong(shape[i]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

/* The metadata that follows the values (or stands for them): the shape
 * when the values alone do not show it, the dtype, the device, and
 * writable=False for a read-only array. */
static PyObject *repr_tail(const tack_array *a, int with_shape, const char *sep)
{
    PyObject *shape = with_shape ? tack_py_shape_tuple(a) : NULL;
    if (with_shape && !shape)
        return NULL;
    PyObject *shape_text = shape ? PyUnicode_FromFormat("shape=%R%s", shape, sep) : PyUnicode_FromString("");
    Py_XDECREF(shape);
    if (!shape_text)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("%Udtype=%s%sdevice='%s'%s%s", shape_text, tack_dtype_name(tack_array_dtype(a)),
                                       sep, tack_device_name(tack_array_device(a)),
                                       tack_array_writable(a) ? "" : sep, tack_array_writable(a) ? "" : "writable=False");
    Py_DECREF(shape_text);
    return r;
}

/* Values as NumPy prints them, over a view of the memory (no copy), and
 * summarised as NumPy summarises (np.set_printoptions applies). */
static PyObject *host_repr(PyObject *self, PyObject *np)
{
    tack_array *a = ARR(self);
    static const char prefix[] = "tack.Array(";
    PyObject *view = PyObject_CallMethod(np, "asarray", "O", self);
    if (!view)
        return NULL;
    PyObject *fn = PyObject_GetAttrString(np, "array2string");
    PyObject *args = fn ? PyTuple_Pack(1, view) : NULL;
    PyObject *kw = args ? Py_BuildValue("{s:s,s:s,s:s}", "separator", ", ", "prefix", prefix, "suffix", ",") : NULL;
    PyObject *values = kw ? PyObject_Call(fn, args, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_XDECREF(fn);
    Py_DECREF(view);
    if (!values)
        return NULL;
    /* As NumPy's own repr: the shape is shown where the values cannot show
     * it, for an empty array of two or more dimensions and a summary. */
    int summarised = 0;
    PyObject *options = PyObject_CallMethod(np, "get_printoptions", NULL);
    PyObject *threshold = options ? PyDict_GetItemString(options, "threshold") : NULL;
    if (threshold && PyLong_Check(threshold)) {
        long long t = PyLong_AsLongLong(threshold);
        summarised = t >= 0 && (unsigned long long)tack_array_size(a) > (unsigned long long)t;
    }
    Py_XDECREF(options);
    PyErr_Clear(); /* print options that cannot be read leave the shape out */
    int with_shape = summarised || (tack_array_size(a) == 0 && tack_array_ndim(a) != 1);
    PyObject *tail = repr_tail(a, with_shape, ", ");
    PyObject *r = tail ? PyUnicode_FromFormat("%s%U, %U)", prefix, values, tail) : NULL;
    Py_XDECREF(tail);
    Py_DECREF(values);
    return r;
}

/* Host arrays print their values; device arrays do not copy to print, and
 * say how to see them. Without NumPy a host array shows its metadata and
 * says why the values are missing. */
static PyObject *array_repr(PyObject *self)
{
    tack_array *a = ARR(self);
    const char *why = "device memory; a.to_numpy() copies the values to the host";
    if (is_host(a)) {
        PyObject *np = tack_py_numpy();
        /* NumPy prints bfloat16 with ml_dtypes only. */
        PyObject *dtype = np ? tack_py_numpy_dtype(tack_array_dtype(a)) : NULL;
        if (dtype) {
            Py_DECREF(dtype);
            return host_repr(self, np);
        }
        if (np && PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            why = "values not shown: NumPy prints bfloat16 with ml_dtypes only (`pip install ml-dtypes`)";
        } else if (!PyErr_ExceptionMatches(PyExc_ImportError)) {
            return NULL;
        } else {
            PyErr_Clear();
            why = "values not shown: NumPy, which prints them, cannot be imported";
        }
    }
    PyObject *tail = repr_tail(a, 1, " ");
    PyObject *r = tail ? PyUnicode_FromFormat("<tack.Array %U: %s>", tail, why) : NULL;
    Py_XDECREF(tail);
    return r;
}

static PyObject *get_shape(PyObject *self, void *c)
{
    (void)c;
    return tack_py_shape_tuple(ARR(self));
}

/* A numpy.dtype, as CuPy's, dask's and JAX's arrays answer, so that code
 * written for them (jnp.asarray, np.result_type, a dictionary keyed by
 * numpy dtypes) takes a Tack array; the tack.DType where NumPy cannot
 * express the dtype (no NumPy; bfloat16 without ml_dtypes), which
 * compares and hashes as the numpy.dtype would. */
static PyObject *get_dtype(PyObject *self, void *c)
{
    (void)c;
    tack_dtype d = tack_array_dtype(ARR(self));
    PyObject *r = tack_py_numpy_dtype_or_null(d);
    if (r || PyErr_Occurred())
        return r;
    return Py_NewRef(tack_py_dtype_object(d));
}

static PyObject *get_ndim(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromLong(tack_array_ndim(ARR(self)));
}

static PyObject *get_size(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSize_t(tack_array_size(ARR(self)));
}

static PyObject *get_nbytes(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSize_t(tack_array_nbytes(ARR(self)));
}

static PyObject *get_device(PyObject *self, void *c)
{
    (void)c;
    return tack_py_device_object(tack_array_device(ARR(self)));
}

static PyObject *get_writable(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(tack_array_writable(ARR(self)));
}

static PyObject *get_ptr(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromVoidPtr(tack_array_data(ARR(self)));
}

static PyObject *array_reshape(PyObject *self, PyObject *args)
{
    PyObject *shape_obj = args;
    if (PyTuple_GET_SIZE(args) == 1 && !PyIndex_Check(PyTuple_GET_ITEM(args, 0)))
        shape_obj = PyTuple_GET_ITEM(args, 0);
    int ndim;
    int64_t shape[TACK_MAX_NDIM];
    if (!tack_py_parse_shape(shape_obj, &ndim, shape))
        return NULL;
    tack_array *r;
    tack_status st = tack_array_reshape(ARR(self), ndim, shape, &r);
    if (st != TACK_OK)
        return tack_py_raise(st);
    return tack_py_array_new(r);
}

static PyObject *array_to_device(PyObject *self, PyObject *arg)
{
    tack_device *d;
    if (!tack_py_device_converter(arg, &d))
        return NULL;
    tack_array *r;
    tack_status st = tack_array_to_device(ARR(self), d, &r);
    tack_device_release(d);
    if (st != TACK_OK)
        return tack_py_raise(st);
    return tack_py_array_new(r);
}

static PyObject *array_to_numpy(PyObject *self, PyObject *unused)
{
    (void)unused;
    tack_array *a = ARR(self);
    PyObject *np = tack_py_numpy();
    if (!np)
        return NULL;
    PyObject *shape = tack_py_shape_tuple(a);
    if (!shape)
        return NULL;
    PyObject *dtype = tack_py_numpy_dtype(tack_array_dtype(a));
    PyObject *out = dtype ? PyObject_CallMethod(np, "empty", "OO", shape, dtype) : NULL;
    Py_XDECREF(dtype);
    Py_DECREF(shape);
    if (!out)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(out, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    tack_status st = tack_array_copy_to_host(a, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    if (st != TACK_OK) {
        Py_DECREF(out);
        return tack_py_raise(st);
    }
    return out;
}

static PyObject *array_from_numpy_method(PyObject *self, PyObject *arg)
{
    tack_array *a = ARR(self);
    if (!tack_array_writable(a)) {
        /* Refuse before reading the argument: a read-only array takes no write. */
        return tack_py_raise(tack_array_copy_from_host(a, NULL, 0));
    }
    PyObject *np = tack_py_numpy();
    if (!np)
        return NULL;
    PyObject *dtype = tack_py_numpy_dtype(tack_array_dtype(a));
    PyObject *arr = dtype ? tack_py_as_numpy(arg, dtype) : NULL;
    Py_XDECREF(dtype);
    if (!arr)
        return NULL;
    PyObject *theirs = PyObject_GetAttrString(arr, "shape");
    PyObject *ours = tack_py_shape_tuple(a);
    int same = theirs && ours ? PyObject_RichCompareBool(theirs, ours, Py_EQ) : -1;
    if (same == 0)
        PyErr_Format(PyExc_ValueError, "from_numpy: shape %R does not match the array's shape %R", theirs, ours);
    Py_XDECREF(theirs);
    Py_XDECREF(ours);
    if (same != 1) {
        Py_DECREF(arr);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(arr, &view, PyBUF_C_CONTIGUOUS) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    tack_status st = tack_array_copy_from_host(a, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    Py_DECREF(arr);
    if (st != TACK_OK)
        return tack_py_raise(st);
    return Py_NewRef(self);
}

static PyObject *array_fill(PyObject *self, PyObject *value)
{
    tack_array *a = ARR(self);
    uint64_t element[2] = {0, 0}; /* the largest element, complex128 */
    if (!tack_array_writable(a))
        return tack_py_raise(tack_array_fill(a, element));
    if (tack_py_to_element(value, tack_array_dtype(a), element) < 0)
        return NULL;
    tack_status st = tack_array_fill(a, element);
    if (st != TACK_OK)
        return tack_py_raise(st);
    return Py_NewRef(self);
}

static PyObject *array_export_memory(PyObject *self, PyObject *unused)
{
    (void)unused;
    return tack_py_export_memory(self);
}

static PyGetSetDef array_getset[] = {
    {"shape", get_shape, NULL, "the extents, a tuple", NULL},
    {"dtype", get_dtype, NULL,
     "the element type: a numpy.dtype, or the tack.DType where NumPy cannot express it (no NumPy; bfloat16 "
     "without ml_dtypes)",
     NULL},
    {"ndim", get_ndim, NULL, "the number of dimensions", NULL},
    {"size", get_size, NULL, "the number of elements", NULL},
    {"nbytes", get_nbytes, NULL, "the number of bytes", NULL},
    {"device", get_device, NULL, "the tack.Device the memory is on", NULL},
    {"writable", get_writable, NULL, "False for arrays wrapped or imported read-only", NULL},
    {"ptr", get_ptr, NULL, "the address of the first element, an int", NULL},
    {"__array_interface__", tack_py_get_array_interface, NULL,
     "NumPy's array interface (version 3) of a host array; AttributeError for device arrays", NULL},
    {"__cuda_array_interface__", tack_py_get_cuda_array_interface, NULL,
     "the CUDA Array Interface (version 3, with the stream) of a CUDA array; AttributeError for others", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* Arrays come from the functions that say where their memory comes from;
 * a bare constructor would have nothing to say. Defining the slot (rather
 * than leaving the type without one) lets the error say which to use, and
 * makes inspect.signature(tack.Array) raise ValueError, as it does for a
 * builtin type whose signature it cannot tell, instead of showing
 * object's "()". */
static PyObject *array_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)type;
    (void)args;
    (void)kwargs;
    PyErr_SetString(PyExc_TypeError,
                    "tack.Array cannot be constructed directly: make one with tack.empty, tack.zeros or "
                    "tack.array, take another library's memory with tack.from_dlpack or tack.asarray, or wrap "
                    "a pointer with tack.array_from_ptr");
    return NULL;
}

static PyMethodDef array_methods[] = {
    {"__array__", (PyCFunction)(void (*)(void))tack_py_array_array, METH_VARARGS | METH_KEYWORDS,
     "__array__($self, /, dtype=None, copy=None)\n--\n\nA NumPy view of a host array (a copy if asked); TypeError "
     "for device memory."},
    {"reshape", array_reshape, METH_VARARGS,
     "reshape($self, /, *shape)\n--\n\nA view of the same memory with another shape (one extent may be -1)."},
    {"to_device", array_to_device, METH_O,
     "to_device($self, device, /)\n--\n\nA copy on another device, through the host."},
    {"to_numpy", array_to_numpy, METH_NOARGS, "to_numpy($self, /)\n--\n\nA NumPy copy of the array."},
    {"from_numpy", array_from_numpy_method, METH_O,
     "from_numpy($self, a, /)\n--\n\nCopies a NumPy array (or anything NumPy reads) of the same shape into this "
     "array."},
    {"fill", array_fill, METH_O,
     "fill($self, value, /)\n--\n\nSets every element to value: an integer for an integer array (a float, even "
     "2.0, is a TypeError, as for a kernel's integer parameter), a number for the others."},
    {"export_memory", array_export_memory, METH_NOARGS,
     "export_memory($self, /)\n--\n\nThe array's memory as an OS handle (tack.ExportedMemory)."},
    {"__dlpack__", (PyCFunction)(void (*)(void))tack_py_array_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "A DLPack capsule over the array's memory (never a copy)."},
    {"__dlpack_device__", tack_py_array_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\nThe array's (DLPack device type, device id)."},
    {"__copy__", tack_py_array_copy, METH_NOARGS,
     "__copy__($self, /)\n--\n\nA new, writable array with the same values on the same device."},
    {"__deepcopy__", tack_py_array_deepcopy, METH_O,
     "__deepcopy__($self, memo, /)\n--\n\nAs __copy__: an array holds no Python objects."},
    {"__reduce_ex__", tack_py_array_reduce_ex, METH_O,
     "__reduce_ex__($self, protocol, /)\n--\n\nPickles through the host: values, dtype, shape, the device's name "
     "and the writable flag; from protocol 5 the values are a PickleBuffer (out-of-band capable)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject TackArray_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tack.Array",
    .tp_basicsize = sizeof(TackArrayObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A C-contiguous array on a Tack device.",
    .tp_dealloc = array_dealloc,
    .tp_weaklistoffset = offsetof(TackArrayObject, weakrefs),
    .tp_repr = array_repr,
    .tp_hash = tack_py_array_hash,
    .tp_richcompare = tack_py_array_richcompare,
    .tp_as_sequence = &tack_py_array_as_sequence,
    .tp_as_mapping = &tack_py_array_as_mapping,
    .tp_as_number = &tack_py_array_as_number,
    .tp_as_buffer = &tack_py_array_as_buffer,
    .tp_iter = tack_py_array_iter,
    .tp_getset = array_getset,
    .tp_methods = array_methods,
    .tp_new = array_new,
};

int tack_py_array_init(PyObject *m)
{
    if (tack_py_array_interface_init() < 0 || PyType_Ready(&TackArray_Type) < 0 ||
        PyModule_AddObjectRef(m, "Array", (PyObject *)&TackArray_Type) < 0)
        return -1;
    return tack_py_array_pickle_init(m);
}
