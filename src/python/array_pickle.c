/* Copying and pickling tack.Array. */
#include "array_type.h"

#include <stdint.h>
#include <string.h>

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
PyObject *tack_py_array_copy(PyObject *self, PyObject *unused)
{
    (void)unused;
    tack_array *r = copy_of(ARR(self));
    return r ? tack_py_array_new(r) : NULL;
}

/* An array holds no Python objects, so a deep copy is a copy (the copy
 * module records it in the memo). */
PyObject *tack_py_array_deepcopy(PyObject *self, PyObject *memo)
{
    (void)memo;
    return tack_py_array_copy(self, NULL);
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
PyObject *tack_py_array_reduce_ex(PyObject *self, PyObject *arg)
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
    PyObject *shape = payload ? tack_py_shape_tuple(a) : NULL;
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

/* Raises the exception a refused status maps to, its message saying what
 * was being unpickled; returns NULL. */
static PyObject *refuse_pickle(tack_status st)
{
    tack_py_raise(st);
    PyObject *exc = tack_py_exception_take();
    PyErr_Format((PyObject *)Py_TYPE(exc), "cannot unpickle a tack.Array: %S", exc);
    Py_DECREF(exc);
    return NULL;
}

/* The values' C-contiguous buffer into `view`: 0 with a TypeError or
 * ValueError that says what the pickle holds instead. */
static int values_buffer(PyObject *values, Py_buffer *view)
{
    if (!PyObject_CheckBuffer(values)) {
        PyErr_Format(PyExc_TypeError,
                     "cannot unpickle a tack.Array: its values are a %s, not a buffer (bytes, bytearray, "
                     "pickle.PickleBuffer)",
                     Py_TYPE(values)->tp_name);
        return 0;
    }
    if (PyObject_GetBuffer(values, view, PyBUF_C_CONTIGUOUS) < 0) {
        PyObject *cause = tack_py_exception_take();
        PyErr_Format(PyExc_ValueError, "cannot unpickle a tack.Array: its values are not a C-contiguous buffer (%S)",
                     cause ? cause : Py_None);
        Py_XDECREF(cause);
        return 0;
    }
    return 1;
}

/* The array on `device` with the values in `view` (exactly its bytes):
 * NULL with an exception. */
static tack_array *rebuild_on(tack_device *device, PyObject *values, const Py_buffer *view, tack_dtype dtype, int ndim,
                              const int64_t *shape, int writable)
{
    tack_array *a = NULL;
    /* A host buffer that can be the array's memory is used in place, so
     * the values are not copied again after the unpickler read them; the
     * writable flag is the pickled array's, and a read-only buffer for a
     * writable array is copied rather than given a writable alias. */
    if (tack_device_dl_device(device).device_type == kDLCPU && (view->readonly ? !writable : 1))
        a = wrap_host_bytes(values, view, device, dtype, ndim, shape, writable);
    if (a)
        return a;
    tack_status st = array_of_host_bytes(device, dtype, ndim, shape, view->buf, (size_t)view->len, &a);
    if (st == TACK_OK && !writable) {
        tack_array *ro = NULL;
        st = tack_array_from_buffer(tack_array_buffer(a), dtype, ndim, shape, 0, &ro);
        tack_array_release(a);
        a = ro;
    }
    if (st != TACK_OK) {
        tack_py_raise(st);
        return NULL;
    }
    return a;
}

/* tack._tack._rebuild_array(values, dtype, shape, device, writable): what an
 * array's pickle calls. The values are any C-contiguous buffer of the
 * array's bytes; a pickle is input like any other, so each argument is
 * checked and a bad one is a TypeError or ValueError. The dtype and shape
 * are checked by the C rule every array's are, before the values are
 * read, as a C reader of such a record would check them. */
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
    size_t nbytes;
    tack_status st = tack_array_check_shape(dtype, ndim, shape, &nbytes);
    if (st != TACK_OK)
        return refuse_pickle(st);
    Py_buffer view;
    if (!values_buffer(values, &view))
        return NULL;
    PyObject *result = NULL;
    tack_device *device = NULL;
    if ((size_t)view.len != nbytes) {
        PyErr_Format(PyExc_ValueError,
                     "cannot unpickle a tack.Array: %zd bytes of values for a %s array of shape %R (%zu bytes)",
                     view.len, tack_dtype_name(dtype), shape_obj, nbytes);
        goto done;
    }
    if (!tack_py_device_converter(device_obj, &device))
        goto done;
    tack_array *a = rebuild_on(device, values, &view, dtype, ndim, shape, writable);
    result = a ? tack_py_array_new(a) : NULL;
done:
    tack_device_release(device);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef array_functions[] = {
    {"_rebuild_array", py_rebuild_array, METH_VARARGS,
     "_rebuild_array(values, dtype, shape, device, writable, /)\n--\n\nAn array from its pickle."},
    {NULL, NULL, 0, NULL},
};

int tack_py_array_pickle_init(PyObject *m)
{
    if (PyModule_AddFunctions(m, array_functions) < 0)
        return -1;
    rebuild_function = PyObject_GetAttrString(m, "_rebuild_array");
    asarray_function = PyObject_GetAttrString(m, "asarray");
    return rebuild_function && asarray_function ? 0 : -1;
}
