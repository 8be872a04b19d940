/* tack.Array's host protocols: the buffer protocol, __array_interface__,
 * __cuda_array_interface__ and __array__. */
#include "array_type.h"

#include <stdint.h>

/* The keys of the array-interface dictionaries and each dtype's typestr
 * ("<f4", "|u1"), made once: exports are per-call hot paths. */
enum { KEY_SHAPE, KEY_TYPESTR, KEY_DATA, KEY_STRIDES, KEY_VERSION, KEY_STREAM, N_KEYS };
static PyObject *interface_keys[N_KEYS], *typestrs[TACK_NDTYPES], *version_3;

int tack_py_array_interface_init(void)
{
    static const char *const names[N_KEYS] = {"shape", "typestr", "data", "strides", "version", "stream"};
    for (int i = 0; i < N_KEYS; i++)
        if (!(interface_keys[i] = PyUnicode_InternFromString(names[i])))
            return -1;
    for (int d = 0; d < TACK_NDTYPES; d++) {
        char text[8];
        /* Fails only in a libtack that refuses every call (a second copy
         * of Tack in the process): the import says why. */
        tack_status st = tack_dtype_typestr((tack_dtype)d, text, sizeof text);
        if (st != TACK_OK) {
            tack_py_raise(st);
            return -1;
        }
        if (!(typestrs[d] = PyUnicode_InternFromString(text)))
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

PyBufferProcs tack_py_array_as_buffer = {
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
    PyObject *shape = tack_py_shape_tuple(a);
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

PyObject *tack_py_get_array_interface(PyObject *self, void *c)
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
PyObject *tack_py_get_cuda_array_interface(PyObject *self, void *c)
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
PyObject *tack_py_array_array(PyObject *self, PyObject *args, PyObject *kwargs)
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
    PyObject *r = tack_py_numpy_asarray(view, dtype, "{s:O}", "copy", copy);
    Py_DECREF(view);
    return r;
}

