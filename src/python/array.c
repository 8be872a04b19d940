/* tack.Array. */
#include "ext.h"

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

#define ARR(o) TACK_PY_ARRAY(o)

static void array_dealloc(PyObject *self)
{
    if (((TackArrayObject *)self)->weakrefs)
        PyObject_ClearWeakRefs(self);
    tack_array_release(ARR(self));
    PyObject_Free(self);
}

static PyObject *shape_tuple(const tack_array *a)
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

static int is_host(const tack_array *a)
{
    return tack_device_dl_device(tack_array_device(a)).device_type == kDLCPU;
}

/* The metadata that follows the values (or stands for them): the shape
 * when the values alone do not show it, the dtype, the device, and
 * writable=False for a read-only array. */
static PyObject *repr_tail(const tack_array *a, int with_shape, const char *sep)
{
    PyObject *shape = with_shape ? shape_tuple(a) : NULL;
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

static Py_ssize_t array_length(PyObject *self)
{
    tack_array *a = ARR(self);
    if (tack_array_ndim(a) == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d array");
        return -1;
    }
    return (Py_ssize_t)tack_array_shape(a)[0];
}

static PyObject *get_shape(PyObject *self, void *c)
{
    (void)c;
    return shape_tuple(ARR(self));
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
    PyObject *shape = shape_tuple(a);
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
    PyObject *ours = shape_tuple(a);
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

/* ------------------------------------------------------------ host protocols */

/* The keys of the array-interface dictionaries and each dtype's typestr
 * ("<f4", "|u1"), made once: exports are per-call hot paths. */
enum { KEY_SHAPE, KEY_TYPESTR, KEY_DATA, KEY_STRIDES, KEY_VERSION, KEY_STREAM, N_KEYS };
static PyObject *interface_keys[N_KEYS], *typestrs[TACK_NDTYPES], *version_3;

static int interface_init(void)
{
    static const char *const names[N_KEYS] = {"shape", "typestr", "data", "strides", "version", "stream"};
    for (int i = 0; i < N_KEYS; i++)
        if (!(interface_keys[i] = PyUnicode_InternFromString(names[i])))
            return -1;
    for (int d = 0; d < TACK_NDTYPES; d++) {
        char text[8];
        if (tack_dtype_typestr((tack_dtype)d, text, sizeof text) != TACK_OK ||
            !(typestrs[d] = PyUnicode_InternFromString(text)))
            return -1;
    }
    return (version_3 = PyLong_FromLong(3)) ? 0 : -1;
}

/* The buffer protocol (memoryview, np.asarray, struct, mpi4py...). The view
 * holds the Python object, and so the tack_array, until it is released. */
static int array_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    tack_array *a = ARR(self);
    view->obj = NULL;
    if (!is_host(a)) {
        /* A device pointer read as host memory is a crash at best. */
        PyErr_Format(PyExc_BufferError,
                     "a %s array is device memory, which the buffer protocol cannot describe; copy it to the "
                     "host with a.to_numpy(), or share it with DLPack (torch.from_dlpack(a), cupy.from_dlpack(a))",
                     tack_device_name(tack_array_device(a)));
        return -1;
    }
    if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE && !tack_array_writable(a)) {
        PyErr_SetString(PyExc_BufferError,
                        "the array is read-only, so it exports read-only buffers only; ask for a read-only "
                        "buffer, or copy it (tack.array(a)) to get a writable one");
        return -1;
    }
    tack_dtype dtype = tack_array_dtype(a);
    if ((flags & PyBUF_FORMAT) == PyBUF_FORMAT && !tack_dtype_format(dtype)) {
        /* NumPy exports ml_dtypes' bfloat16 arrays no format either: a
         * consumer that asks for one gets none rather than a wrong type;
         * one that takes plain bytes (hashlib, file.write) gets them. */
        PyErr_Format(PyExc_BufferError,
                     "a %s array has no buffer-protocol format (the struct module and PEP 3118 have none for it), "
                     "so memoryview and other consumers that ask for one cannot take it; share it through DLPack "
                     "(torch.from_dlpack(a)), or view it with np.asarray(a), which gives ml_dtypes' %s",
                     tack_dtype_name(dtype), tack_dtype_name(dtype));
        return -1;
    }
    int nd = tack_array_ndim(a);
    Py_ssize_t item = (Py_ssize_t)tack_dtype_size(dtype);
    Py_ssize_t *dims = NULL;
    if (nd > 0 && (flags & PyBUF_ND) == PyBUF_ND) {
        /* Shape then C-contiguous byte strides, freed by array_releasebuffer. */
        dims = PyMem_Malloc(2 * (size_t)nd * sizeof *dims);
        if (!dims) {
            PyErr_NoMemory();
            return -1;
        }
        const int64_t *shape = tack_array_shape(a);
        Py_ssize_t step = item;
        for (int i = nd - 1; i >= 0; i--) {
            dims[i] = (Py_ssize_t)shape[i];
            dims[nd + i] = step;
            step *= (Py_ssize_t)shape[i];
        }
    }
    /* CPU launches complete before they return; sharing records that a
     * reader outside Tack now holds the memory. */
    tack_status st = tack_buffer_share(tack_array_buffer(a));
    if (st != TACK_OK) {
        PyMem_Free(dims);
        return tack_py_fail(st);
    }
    view->buf = tack_array_data(a);
    view->obj = Py_NewRef(self);
    view->len = (Py_ssize_t)tack_array_nbytes(a);
    view->readonly = !tack_array_writable(a);
    view->itemsize = item;
    view->format = (flags & PyBUF_FORMAT) == PyBUF_FORMAT ? (char *)tack_dtype_format(dtype) : NULL;
    view->ndim = nd;
    view->shape = dims;
    view->strides = dims && (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? dims + nd : NULL;
    view->suboffsets = NULL;
    view->internal = dims;
    return 0;
}

static void array_releasebuffer(PyObject *self, Py_buffer *view)
{
    (void)self;
    PyMem_Free(view->internal);
}

static PyBufferProcs array_as_buffer = {
    .bf_getbuffer = array_getbuffer,
    .bf_releasebuffer = array_releasebuffer,
};

/* The dictionary both array interfaces share: shape, typestr, data,
 * strides (None: C-contiguous) and version 3. */
static PyObject *interface_dict(tack_array *a, void *data)
{
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    PyObject *shape = shape_tuple(a);
    PyObject *address = PyLong_FromVoidPtr(data);
    PyObject *pair = shape && address ? PyTuple_Pack(2, address, tack_array_writable(a) ? Py_False : Py_True) : NULL;
    int failed = !pair || PyDict_SetItem(d, interface_keys[KEY_SHAPE], shape) < 0 ||
                 PyDict_SetItem(d, interface_keys[KEY_TYPESTR], typestrs[tack_array_dtype(a)]) < 0 ||
                 PyDict_SetItem(d, interface_keys[KEY_DATA], pair) < 0 ||
                 PyDict_SetItem(d, interface_keys[KEY_STRIDES], Py_None) < 0 ||
                 PyDict_SetItem(d, interface_keys[KEY_VERSION], version_3) < 0;
    Py_XDECREF(shape);
    Py_XDECREF(address);
    Py_XDECREF(pair);
    if (failed)
        Py_CLEAR(d);
    return d;
}

static PyObject *get_array_interface(PyObject *self, void *c)
{
    (void)c;
    tack_array *a = ARR(self);
    if (!is_host(a)) {
        PyErr_Format(PyExc_AttributeError,
                     "a %s array has no __array_interface__: its memory is not host memory (it speaks "
                     "DLPack%s)",
                     tack_device_name(tack_array_device(a)),
                     tack_device_dl_device(tack_array_device(a)).device_type == kDLCUDA
                         ? " and __cuda_array_interface__"
                         : "");
        return NULL;
    }
    if (tack_array_dtype(a) == TACK_BF16) {
        /* Its typestr, "<V2", is two opaque bytes to NumPy, which would
         * build a void array: without the interface NumPy reaches
         * __array__, which gives bfloat16 values (or says what is missing). */
        PyErr_SetString(PyExc_AttributeError,
                        "a bfloat16 array has no __array_interface__: NumPy reads its typestr '<V2' as opaque "
                        "bytes; np.asarray(a) gives an ml_dtypes.bfloat16 view of the memory instead");
        return NULL;
    }
    tack_status st = tack_buffer_share(tack_array_buffer(a));
    if (st != TACK_OK)
        return tack_py_raise(st);
    return interface_dict(a, tack_array_data(a));
}

/* __cuda_array_interface__ version 3 (Numba, CuPy, Warp). An export must
 * not race the launches queued on the array: the buffer is shared first,
 * as for DLPack, so there is no pending work when the consumer reads and
 * later launches complete before they return. The stream is still given:
 * a consumer that synchronises on it finds it idle. */
static PyObject *get_cuda_array_interface(PyObject *self, void *c)
{
    (void)c;
    tack_array *a = ARR(self);
    tack_device *d = tack_array_device(a);
    if (tack_device_dl_device(d).device_type != kDLCUDA) {
        PyErr_Format(PyExc_AttributeError,
                     "a %s array has no __cuda_array_interface__: its memory is not CUDA memory%s", tack_device_name(d),
                     is_host(a) ? " (it speaks the buffer protocol and __array_interface__)" : "");
        return NULL;
    }
    tack_status st = tack_buffer_share(tack_array_buffer(a));
    if (st != TACK_OK)
        return tack_py_raise(st);
    /* The interface asks for a 0 pointer for zero-size arrays. */
    PyObject *r = interface_dict(a, tack_array_size(a) ? tack_array_data(a) : NULL);
    if (!r)
        return NULL;
    /* 0 is not a valid stream value in the interface (it is ambiguous);
     * a device without a stream of its own has nothing to wait on. */
    uint64_t stream = tack_device_stream_handle(d);
    PyObject *s = stream ? PyLong_FromUnsignedLongLong(stream) : Py_NewRef(Py_None);
    if (!s || PyDict_SetItem(r, interface_keys[KEY_STREAM], s) < 0) {
        Py_XDECREF(s);
        Py_DECREF(r);
        return NULL;
    }
    Py_DECREF(s);
    return r;
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
    {"__array_interface__", get_array_interface, NULL,
     "NumPy's array interface (version 3) of a host array; AttributeError for device arrays", NULL},
    {"__cuda_array_interface__", get_cuda_array_interface, NULL,
     "the CUDA Array Interface (version 3, with the stream) of a CUDA array; AttributeError for others", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* A NumPy view of a host bfloat16 array, typed ml_dtypes.bfloat16. NumPy's
 * DLPack import has no bfloat16, and NumPy asks the buffer protocol for a
 * format, which bfloat16 has not: NumPy imports the same memory as uint16
 * and views that as bfloat16. The view holds the memory until it goes.
 * Without ml_dtypes, the TypeError tack_py_numpy_dtype raises. */
static PyObject *bfloat16_view(PyObject *self, PyObject *np)
{
    tack_array *a = ARR(self), *bits;
    PyObject *dtype = tack_py_numpy_dtype(TACK_BF16);
    if (!dtype)
        return NULL;
    tack_status st = tack_array_from_buffer(tack_array_buffer(a), TACK_U16, tack_array_ndim(a), tack_array_shape(a),
                                            tack_array_writable(a), &bits);
    PyObject *bits_obj = st == TACK_OK ? tack_py_array_new(bits) : tack_py_raise(st);
    PyObject *u16 = bits_obj ? PyObject_CallMethod(np, "from_dlpack", "O", bits_obj) : NULL;
    PyObject *r = u16 ? PyObject_CallMethod(u16, "view", "O", dtype) : NULL;
    Py_XDECREF(u16);
    Py_XDECREF(bits_obj);
    Py_DECREF(dtype);
    return r;
}

/* NumPy asks __array__ last, after the interfaces and the buffer protocol.
 * A host array never gets here through np.asarray; a device array does,
 * and without this NumPy would swallow the buffer protocol's refusal and
 * build a 0-d object array. */
static PyObject *array_array(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"dtype", "copy", NULL};
    PyObject *dtype = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:__array__", kwlist, &dtype, &copy))
        return NULL;
    tack_array *a = ARR(self);
    if (!is_host(a)) {
        PyErr_Format(PyExc_TypeError,
                     "a %s array is not host memory and NumPy cannot view it; copy it to the host with "
                     "a.to_numpy() or a.to_device('cpu')",
                     tack_device_name(tack_array_device(a)));
        return NULL;
    }
    PyObject *np = tack_py_numpy();
    if (!np)
        return NULL;
    PyObject *view = tack_array_dtype(a) == TACK_BF16 ? bfloat16_view(self, np)
                                                      : PyObject_CallMethod(np, "from_dlpack", "O", self);
    if (!view)
        return NULL;
    PyObject *fn = PyObject_GetAttrString(np, "asarray");
    PyObject *callargs = fn ? PyTuple_Pack(2, view, dtype) : NULL;
    PyObject *kw = callargs ? Py_BuildValue("{s:O}", "copy", copy) : NULL;
    PyObject *r = kw ? PyObject_Call(fn, callargs, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(callargs);
    Py_XDECREF(fn);
    Py_DECREF(view);
    return r;
}

/* ------------------------------------------- element access (there is none) */

/* Why a Tack array takes no index, and what to use instead: NumPy over a
 * view of a host array's memory, a host copy of a device array. */
static void refuse_elements(PyObject *self, const char *what)
{
    tack_array *a = ARR(self);
    if (is_host(a))
        PyErr_Format(PyExc_TypeError,
                     "%s: Tack arrays have no indexing or slicing of their own; use NumPy's over a view of this "
                     "host array's memory, np.asarray(a)[0], float(np.asarray(a)[0]), list(np.asarray(a)) "
                     "(a[...] with slices alone gives such a NumPy view, as dask reads blocks)",
                     what);
    else
        PyErr_Format(PyExc_TypeError,
                     "%s: Tack arrays have no indexing or slicing, and this %s array is device memory; copy it to "
                     "the host with a.to_numpy() and index that, or share it with a library that indexes device "
                     "arrays through DLPack (torch.from_dlpack(a), cupy.from_dlpack(a))",
                     what, tack_device_name(tack_array_device(a)));
}

/* Slices and Ellipsis alone select a block that NumPy returns as a view
 * of the memory: what dask.array.from_array asks of an array. Integers,
 * None, masks and index arrays are element indexing, which Tack does not
 * offer under another name. */
static int is_block_key(PyObject *key)
{
    if (PySlice_Check(key) || key == Py_Ellipsis)
        return 1;
    if (!PyTuple_Check(key))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key); i++) {
        PyObject *k = PyTuple_GET_ITEM(key, i);
        if (!PySlice_Check(k) && k != Py_Ellipsis)
            return 0;
    }
    return 1;
}

static PyObject *array_subscript(PyObject *self, PyObject *key)
{
    if (!is_host(ARR(self)) || !is_block_key(key)) {
        refuse_elements(self, "tack.Array indices");
        return NULL;
    }
    PyObject *np = tack_py_numpy();
    PyObject *view = np ? PyObject_CallMethod(np, "asarray", "O", self) : NULL;
    if (!view)
        return NULL;
    /* An empty tuple selects the whole array; NumPy would give a 0-d
     * array's element as a scalar copy. */
    PyObject *r = PyTuple_Check(key) && PyTuple_GET_SIZE(key) == 0 ? Py_NewRef(view) : PyObject_GetItem(view, key);
    Py_DECREF(view);
    return r;
}

/* The mirror of the block reads: a[1:3] = 0 and a[...] = other write
 * through a NumPy view of a host array's memory (dask.array.store writes
 * its blocks so). A read-only array refuses as its other host writes do. */
static int array_ass_subscript(PyObject *self, PyObject *key, PyObject *value)
{
    tack_array *a = ARR(self);
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "tack.Array elements cannot be deleted");
        return -1;
    }
    if (!is_host(a)) {
        PyErr_Format(PyExc_TypeError,
                     "slice assignment to a %s array: its memory is device memory, which Tack does not write "
                     "element by element from the host; write the whole array with a.from_numpy(x) or "
                     "a.fill(v), run a kernel over it, or write through a library that indexes device arrays "
                     "(torch.from_dlpack(a)[1:3] = 0)",
                     tack_device_name(tack_array_device(a)));
        return -1;
    }
    if (!is_block_key(key)) {
        refuse_elements(self, "tack.Array item assignment (slices and ... assign: a[1:3] = 0, a[...] = x)");
        return -1;
    }
    if (!tack_array_writable(a))
        return tack_py_fail(tack_array_copy_from_host(a, NULL, 0));
    PyObject *np = tack_py_numpy();
    PyObject *view = np ? PyObject_CallMethod(np, "asarray", "O", self) : NULL;
    if (!view)
        return -1;
    int r = PyObject_SetItem(view, key, value);
    Py_DECREF(view);
    return r;
}

static PyObject *array_iter(PyObject *self)
{
    refuse_elements(self, "iteration over a tack.Array");
    return NULL;
}

/* `x in a` would otherwise iterate, and Python replaces the iterator's
 * TypeError with a bare "not iterable". */
static int array_contains(PyObject *self, PyObject *value)
{
    (void)value;
    refuse_elements(self, "`in` (iteration over a tack.Array)");
    return -1;
}

static PyObject *array_int(PyObject *self)
{
    refuse_elements(self, "int() of a tack.Array");
    return NULL;
}

static PyObject *array_float(PyObject *self)
{
    refuse_elements(self, "float() of a tack.Array");
    return NULL;
}

/* Truth-testing is element access too: NumPy's and PyTorch's bool() read
 * a one-element array's value (and refuse larger ones), so answering by
 * length, as a sequence would, gives the opposite of what their users
 * expect for tack.zeros(1), and reading the value would be the element
 * access Tack leaves to NumPy. Refused, saying what each question is. */
static int array_bool(PyObject *self)
{
    tack_array *a = ARR(self);
    if (is_host(a))
        PyErr_SetString(PyExc_TypeError,
                        "the truth value of a tack.Array is not defined: Tack arrays have no element access of "
                        "their own. For its value, as NumPy gives it, use bool(np.asarray(a)) (a view of this "
                        "host array's memory); to ask whether it is empty, a.size == 0; whether there is an "
                        "array, a is not None");
    else
        PyErr_Format(PyExc_TypeError,
                     "the truth value of a tack.Array is not defined: Tack arrays have no element access of their "
                     "own, and this %s array is device memory. For its value, copy it to the host with "
                     "bool(a.to_numpy()); to ask whether it is empty, a.size == 0; whether there is an array, a "
                     "is not None",
                     tack_device_name(tack_array_device(a)));
    return -1;
}

/* == and != would read as elementwise comparisons to NumPy's users, and
 * as identity to Python's: refused, as bool(a) is, against anything that
 * could be such a comparison (another array, a number, an array-like).
 * Identity is `a is b`. Against other objects (None, a string) Python's
 * identity default answers. */
static int compares_elementwise(PyObject *other)
{
    if (PyObject_TypeCheck(other, &TackArray_Type) || PyIndex_Check(other) || PyFloat_Check(other) ||
        PyComplex_Check(other) || PyNumber_Check(other))
        return 1;
    static const char *const protocols[] = {"__array_interface__", "__array__", "__dlpack__",
                                            "__cuda_array_interface__"};
    for (size_t i = 0; i < sizeof protocols / sizeof *protocols; i++) {
        PyObject *found = NULL, *name = PyUnicode_InternFromString(protocols[i]);
        int r = name ? tack_py_lookup_optional((PyObject *)Py_TYPE(other), name, &found) : -1;
        Py_XDECREF(name);
        Py_XDECREF(found);
        if (r != 0)
            return r;
    }
    return 0;
}

static PyObject *array_richcompare(PyObject *self, PyObject *other, int op)
{
    if (op != Py_EQ && op != Py_NE)
        Py_RETURN_NOTIMPLEMENTED;
    /* An array is itself: weak references compare their referents with ==
     * (a WeakKeyDictionary keyed by arrays looks keys up so), as do
     * containers after their identity check. */
    if (self == other)
        return PyBool_FromLong(op == Py_EQ);
    int elementwise = compares_elementwise(other);
    if (elementwise < 0)
        return NULL;
    if (!elementwise)
        Py_RETURN_NOTIMPLEMENTED;
    const char *sign = op == Py_EQ ? "==" : "!=";
    if (is_host(ARR(self)))
        PyErr_Format(PyExc_TypeError,
                     "%s between tack.Arrays is not defined: Tack arrays have no element access of their own. "
                     "For NumPy's elementwise comparison, compare np.asarray(a) %s np.asarray(b) (views of host "
                     "memory), or np.array_equal(np.asarray(a), np.asarray(b)); whether two names are one "
                     "array, a is b",
                     sign, sign);
    else
        PyErr_Format(PyExc_TypeError,
                     "%s between tack.Arrays is not defined: Tack arrays have no element access of their own, and "
                     "this %s array is device memory. Compare host copies, a.to_numpy() %s b.to_numpy() (NumPy's "
                     "np.asarray(a) for host arrays), or compare on the device through DLPack "
                     "(torch.from_dlpack(a) %s torch.from_dlpack(b)); whether two names are one array, a is b",
                     sign, tack_device_name(tack_array_device(ARR(self))), sign, sign);
    return NULL;
}

/* Hashable by identity, as before == was refused: arrays are keys of
 * sets, weak dictionaries and caches (dask's tokens), and equality never
 * holds between two arrays, so identity is the whole of it. The value is
 * object.__hash__'s. */
static Py_hash_t array_hash(PyObject *self)
{
    return PyBaseObject_Type.tp_hash(self);
}

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

/* ------------------------------------------------------------ copy, pickle */

/* A new array on `device` holding the `nbytes` at host address `src`
 * (exactly the array's bytes). On error *out is untouched. */
static tack_status array_of_host_bytes(tack_device *device, tack_dtype dtype, int ndim, const int64_t *shape,
                                       const void *src, size_t nbytes, tack_array **out)
{
    tack_array *r;
    tack_status st = tack_array_empty(device, dtype, ndim, shape, 0, &r);
    if (st == TACK_OK && nbytes) {
        st = tack_array_copy_from_host(r, src, nbytes);
        if (st != TACK_OK)
            tack_array_release(r);
    }
    if (st == TACK_OK)
        *out = r;
    return st;
}

/* A new, writable array with the same values on the same device. */
static tack_array *copy_of(const tack_array *a)
{
    tack_array *r;
    /* A host array is copied once, where to_device would stage it through
     * a second buffer. */
    tack_status st = is_host(a) ? array_of_host_bytes(tack_array_device(a), tack_array_dtype(a), tack_array_ndim(a),
                                                      tack_array_shape(a), tack_array_data(a), tack_array_nbytes(a), &r)
                                : tack_array_to_device(a, tack_array_device(a), &r);
    if (st != TACK_OK) {
        tack_py_raise(st);
        return NULL;
    }
    return r;
}

/* copy.copy's hook only: an array-like with a public copy() method is
 * copied by dask.array.from_array before it reads it, which would undo the
 * zero-copy block reads. */
static PyObject *array_copy(PyObject *self, PyObject *unused)
{
    (void)unused;
    tack_array *r = copy_of(ARR(self));
    return r ? tack_py_array_new(r) : NULL;
}

/* An array holds no Python objects, so a deep copy is a copy (the copy
 * module records it in the memo). */
static PyObject *array_deepcopy(PyObject *self, PyObject *memo)
{
    (void)memo;
    return array_copy(self, NULL);
}

static PyObject *rebuild_function;

/* A host copy of a device array, as a Python array object. */
static PyObject *host_copy(const tack_array *a)
{
    tack_device *cpu;
    tack_status st = tack_device_open("cpu", NULL, 0, &cpu);
    if (st != TACK_OK)
        return tack_py_raise(st);
    tack_array *h;
    st = tack_array_empty(cpu, tack_array_dtype(a), tack_array_ndim(a), tack_array_shape(a), 0, &h);
    tack_device_release(cpu);
    if (st == TACK_OK && tack_array_nbytes(a)) {
        st = tack_array_copy_to_host(a, tack_array_data(h), tack_array_nbytes(a));
        if (st != TACK_OK)
            tack_array_release(h);
    }
    if (st != TACK_OK)
        return tack_py_raise(st);
    return tack_py_array_new(h);
}

/* A host array's bytes as an array of uint8 over the same memory (a new
 * reference): what a PickleBuffer can take of a dtype that has no buffer
 * format (bfloat16). */
static PyObject *byte_view(PyObject *host)
{
    tack_array *a = ARR(host), *bytes;
    int64_t n = (int64_t)tack_array_nbytes(a);
    tack_status st = tack_array_from_buffer(tack_array_buffer(a), TACK_U8, 1, &n, tack_array_writable(a), &bytes);
    return st == TACK_OK ? tack_py_array_new(bytes) : tack_py_raise(st);
}

/* Pickles through the host: the values, the dtype and shape, the device's
 * name and the writable flag. From protocol 5 the values travel as a
 * PickleBuffer over the memory itself (a host array's own, a device
 * array's one host copy), which a buffer_callback may take out of band,
 * so nothing is copied to pickle it and the pickler copies it at most once,
 * into its stream. */
static PyObject *array_reduce_ex(PyObject *self, PyObject *arg)
{
    tack_array *a = ARR(self);
    long protocol = PyLong_AsLong(arg);
    if (protocol == -1 && PyErr_Occurred())
        return NULL;
    PyObject *payload;
    if (protocol >= 5) {
        PyObject *host = is_host(a) ? Py_NewRef(self) : host_copy(a);
        if (host && !tack_dtype_format(tack_array_dtype(a)))
            Py_SETREF(host, byte_view(host));
        payload = host ? PyPickleBuffer_FromObject(host) : NULL;
        Py_XDECREF(host);
    } else {
        payload = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)tack_array_nbytes(a));
        tack_status st = payload && tack_array_nbytes(a)
                             ? tack_array_copy_to_host(a, PyBytes_AS_STRING(payload), tack_array_nbytes(a))
                             : TACK_OK;
        if (st != TACK_OK) {
            Py_CLEAR(payload);
            tack_py_raise(st);
        }
    }
    PyObject *shape = payload ? shape_tuple(a) : NULL;
    PyObject *r = shape ? Py_BuildValue("O(OsOsO)", rebuild_function, payload, tack_dtype_name(tack_array_dtype(a)),
                                        shape, tack_device_name(tack_array_device(a)),
                                        tack_array_writable(a) ? Py_True : Py_False)
                        : NULL;
    Py_XDECREF(shape);
    Py_XDECREF(payload);
    return r;
}

static PyObject *asarray_function;

/* An array on the cpu `device` over a host buffer without copying it:
 * tack.asarray's own wrapping of a byte view, which keeps the exporter's
 * buffer until the last array over it goes, retyped to the pickled dtype
 * and shape. NULL, with no exception, when the memory cannot be the
 * array's in place (misaligned for the dtype, a format memoryview cannot
 * cast): the caller copies it then. */
static tack_array *wrap_host_bytes(PyObject *obj, const Py_buffer *view, tack_device *device, tack_dtype dtype,
                                   int ndim, const int64_t *shape, int writable)
{
    if ((uintptr_t)view->buf % tack_dtype_size(dtype))
        return NULL;
    PyObject *mv = PyMemoryView_FromObject(obj);
    PyObject *bytes = mv ? PyObject_CallMethod(mv, "cast", "s", "B") : NULL;
    Py_XDECREF(mv);
    PyObject *dev = bytes ? tack_py_device_object(device) : NULL;
    PyObject *args = dev ? PyTuple_Pack(1, bytes) : NULL;
    PyObject *kw = args ? Py_BuildValue("{s:O}", "device", dev) : NULL;
    PyObject *flat = kw ? PyObject_Call(asarray_function, args, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_XDECREF(dev);
    Py_XDECREF(bytes);
    if (!flat) {
        PyErr_Clear();
        return NULL;
    }
    tack_array *r = NULL;
    tack_status st = TACK_ERUNTIME;
    if (PyObject_TypeCheck(flat, &TackArray_Type) && tack_array_data(TACK_PY_ARRAY(flat)) == view->buf)
        st = tack_array_from_buffer(tack_array_buffer(TACK_PY_ARRAY(flat)), dtype, ndim, shape, writable, &r);
    Py_DECREF(flat);
    if (st != TACK_OK) {
        PyErr_Clear();
        return NULL;
    }
    return r;
}

/* tack._tack._rebuild_array(values, dtype, shape, device, writable): what an
 * array's pickle calls. The values are any C-contiguous buffer of the
 * array's bytes; a pickle is input like any other, so each argument is
 * checked and a bad one is a TypeError or ValueError. */
static PyObject *py_rebuild_array(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *values, *dtype_obj, *shape_obj, *device_obj;
    int writable;
    if (!PyArg_ParseTuple(args, "OOOO!p:_rebuild_array", &values, &dtype_obj, &shape_obj, &PyUnicode_Type, &device_obj,
                          &writable))
        return NULL;
    tack_dtype dtype;
    int ndim;
    int64_t shape[TACK_MAX_NDIM];
    if (!tack_py_dtype_converter(dtype_obj, &dtype) || !tack_py_parse_shape(shape_obj, &ndim, shape))
        return NULL;
    /* A longer shape is not read into `shape` (its extents would be
     * garbage to the loop below): no array has one. */
    if (ndim > TACK_MAX_NDIM) {
        PyErr_Format(PyExc_ValueError,
                     "cannot unpickle a tack.Array: its shape has %d dimensions; Tack arrays have at most %d", ndim,
                     TACK_MAX_NDIM);
        return NULL;
    }
    size_t count = 1, item = tack_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            PyErr_Format(PyExc_ValueError, "cannot unpickle a tack.Array: shape[%d] is negative (%lld)", i,
                         (long long)shape[i]);
            return NULL;
        }
        if (shape[i] && count > SIZE_MAX / item / (size_t)shape[i]) {
            PyErr_SetString(PyExc_ValueError, "cannot unpickle a tack.Array: the shape's bytes overflow");
            return NULL;
        }
        count *= (size_t)shape[i];
    }
    if (!PyObject_CheckBuffer(values)) {
        PyErr_Format(PyExc_TypeError,
                     "cannot unpickle a tack.Array: its values are a %s, not a buffer (bytes, bytearray, "
                     "pickle.PickleBuffer)",
                     Py_TYPE(values)->tp_name);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(values, &view, PyBUF_C_CONTIGUOUS) < 0) {
        PyObject *cause = tack_py_exception_take();
        PyErr_Format(PyExc_ValueError, "cannot unpickle a tack.Array: its values are not a C-contiguous buffer (%S)",
                     cause ? cause : Py_None);
        Py_XDECREF(cause);
        return NULL;
    }
    PyObject *result = NULL;
    tack_device *device = NULL;
    if ((size_t)view.len != count * item) {
        PyErr_Format(PyExc_ValueError,
                     "cannot unpickle a tack.Array: %zd bytes of values for a %s array of shape %R (%zu bytes)",
                     view.len, tack_dtype_name(dtype), shape_obj, count * item);
        goto done;
    }
    if (!tack_py_device_converter(device_obj, &device))
        goto done;
    tack_array *a = NULL;
    /* A host buffer that can be the array's memory is used in place, so
     * the values are not copied again after the unpickler read them; the
     * writable flag is the pickled array's, and a read-only buffer for a
     * writable array is copied rather than given a writable alias. */
    if (tack_device_dl_device(device).device_type == kDLCPU && (view.readonly ? !writable : 1))
        a = wrap_host_bytes(values, &view, device, dtype, ndim, shape, writable);
    if (!a) {
        tack_status st = array_of_host_bytes(device, dtype, ndim, shape, view.buf, (size_t)view.len, &a);
        if (st == TACK_OK && !writable) {
            tack_array *ro = NULL;
            st = tack_array_from_buffer(tack_array_buffer(a), dtype, ndim, shape, 0, &ro);
            tack_array_release(a);
            a = ro;
        }
        if (st != TACK_OK) {
            tack_py_raise(st);
            goto done;
        }
    }
    result = tack_py_array_new(a);
done:
    tack_device_release(device);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef array_methods[] = {
    {"__array__", (PyCFunction)(void (*)(void))array_array, METH_VARARGS | METH_KEYWORDS,
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
    {"fill", array_fill, METH_O, "fill($self, value, /)\n--\n\nSets every element to value."},
    {"export_memory", array_export_memory, METH_NOARGS,
     "export_memory($self, /)\n--\n\nThe array's memory as an OS handle (tack.ExportedMemory)."},
    {"__dlpack__", (PyCFunction)(void (*)(void))tack_py_array_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "A DLPack capsule over the array's memory (never a copy)."},
    {"__dlpack_device__", tack_py_array_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\nThe array's (DLPack device type, device id)."},
    {"__copy__", array_copy, METH_NOARGS,
     "__copy__($self, /)\n--\n\nA new, writable array with the same values on the same device."},
    {"__deepcopy__", array_deepcopy, METH_O,
     "__deepcopy__($self, memo, /)\n--\n\nAs __copy__: an array holds no Python objects."},
    {"__reduce_ex__", array_reduce_ex, METH_O,
     "__reduce_ex__($self, protocol, /)\n--\n\nPickles through the host: values, dtype, shape, the device's name "
     "and the writable flag; from protocol 5 the values are a PickleBuffer (out-of-band capable)."},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods array_as_mapping = {
    .mp_subscript = array_subscript,
    .mp_ass_subscript = array_ass_subscript,
};

static PyNumberMethods array_as_number = {
    .nb_bool = array_bool,
    .nb_int = array_int,
    .nb_float = array_float,
};

static PySequenceMethods array_as_sequence = {
    .sq_length = array_length,
    .sq_contains = array_contains,
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
    .tp_hash = array_hash,
    .tp_richcompare = array_richcompare,
    .tp_as_sequence = &array_as_sequence,
    .tp_as_mapping = &array_as_mapping,
    .tp_as_number = &array_as_number,
    .tp_as_buffer = &array_as_buffer,
    .tp_iter = array_iter,
    .tp_getset = array_getset,
    .tp_methods = array_methods,
    .tp_new = array_new,
};

static PyMethodDef array_functions[] = {
    {"_rebuild_array", py_rebuild_array, METH_VARARGS,
     "_rebuild_array(values, dtype, shape, device, writable, /)\n--\n\nAn array from its pickle."},
    {NULL, NULL, 0, NULL},
};

int tack_py_array_init(PyObject *m)
{
    if (interface_init() < 0 || PyType_Ready(&TackArray_Type) < 0 ||
        PyModule_AddObjectRef(m, "Array", (PyObject *)&TackArray_Type) < 0 ||
        PyModule_AddFunctions(m, array_functions) < 0)
        return -1;
    rebuild_function = PyObject_GetAttrString(m, "_rebuild_array");
    asarray_function = PyObject_GetAttrString(m, "asarray");
    return rebuild_function && asarray_function ? 0 : -1;
}
