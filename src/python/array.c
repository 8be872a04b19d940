/* tack.Array. */
#include "ext.h"

#include <string.h>

PyObject *tack_py_array_new(tack_array *array)
{
    TackArrayObject *o = PyObject_New(TackArrayObject, &TackArray_Type);
    if (!o) {
        tack_array_release(array);
        return NULL;
    }
    o->array = array;
    return (PyObject *)o;
}

#define ARR(o) TACK_PY_ARRAY(o)

static void array_dealloc(PyObject *self)
{
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

static PyObject *array_repr(PyObject *self)
{
    tack_array *a = ARR(self);
    PyObject *shape = shape_tuple(a);
    if (!shape)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("tack.Array(shape=%R, dtype=%s, device='%s'%s)", shape,
                                       tack_dtype_short_name(tack_array_dtype(a)),
                                       tack_device_name(tack_array_device(a)),
                                       tack_array_writable(a) ? "" : ", writable=False");
    Py_DECREF(shape);
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

static PyObject *get_dtype(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef(tack_py_dtype_object(tack_array_dtype(ARR(self))));
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
    PyObject *out = PyObject_CallMethod(np, "empty", "Os", shape, tack_dtype_name(tack_array_dtype(a)));
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
    PyObject *name = PyUnicode_FromString(tack_dtype_name(tack_array_dtype(a)));
    PyObject *arr = name ? tack_py_as_numpy(arg, name) : NULL;
    Py_XDECREF(name);
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
    uint64_t element[1] = {0};
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
    tack_exported_memory rec;
    tack_status st = tack_array_export_memory(ARR(self), &rec);
    if (st != TACK_OK)
        return tack_py_raise(st);
    PyObject *r = PyStructSequence_New(TackExportedMemory_Type);
    if (!r)
        return NULL;
    PyObject *vals[6] = {
        PyUnicode_FromString(rec.backend),
        PyLong_FromSize_t(rec.size),
        PyLong_FromSize_t(rec.allocation_size),
        PyLong_FromLongLong(rec.handle),
        PyUnicode_FromString(rec.handle_type),
        PyBytes_FromStringAndSize((const char *)rec.device_uuid, sizeof rec.device_uuid),
    };
    for (int i = 0; i < 6; i++) {
        if (!vals[i]) {
            for (int j = i; j < 6; j++)
                Py_XDECREF(vals[j]);
            Py_DECREF(r);
            return NULL;
        }
        PyStructSequence_SET_ITEM(r, i, vals[i]);
    }
    return r;
}

static PyGetSetDef array_getset[] = {
    {"shape", get_shape, NULL, "the extents, a tuple", NULL},
    {"dtype", get_dtype, NULL, "the element type, a tack.DType", NULL},
    {"ndim", get_ndim, NULL, "the number of dimensions", NULL},
    {"size", get_size, NULL, "the number of elements", NULL},
    {"nbytes", get_nbytes, NULL, "the number of bytes", NULL},
    {"device", get_device, NULL, "the tack.Device the memory is on", NULL},
    {"writable", get_writable, NULL, "False for arrays wrapped or imported read-only", NULL},
    {"ptr", get_ptr, NULL, "the address of the first element, an int", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef array_methods[] = {
    {"reshape", array_reshape, METH_VARARGS,
     "reshape(*shape)\n--\n\nA view of the same memory with another shape (one extent may be -1)."},
    {"to_device", array_to_device, METH_O, "to_device(device)\n--\n\nA copy on another device, through the host."},
    {"to_numpy", array_to_numpy, METH_NOARGS, "to_numpy()\n--\n\nA NumPy copy of the array."},
    {"from_numpy", array_from_numpy_method, METH_O,
     "from_numpy(a)\n--\n\nCopies a NumPy array (or anything NumPy reads) of the same shape into this array."},
    {"fill", array_fill, METH_O, "fill(value)\n--\n\nSets every element to value."},
    {"export_memory", array_export_memory, METH_NOARGS,
     "export_memory()\n--\n\nThe array's memory as an OS handle (tack.ExportedMemory)."},
    {"__dlpack__", (PyCFunction)(void (*)(void))tack_py_array_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "A DLPack capsule over the array's memory (never a copy)."},
    {"__dlpack_device__", tack_py_array_dlpack_device, METH_NOARGS,
     "__dlpack_device__()\n--\n\nThe array's (DLPack device type, device id)."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods array_as_sequence = {
    .sq_length = array_length,
};

PyTypeObject TackArray_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tack.Array",
    .tp_basicsize = sizeof(TackArrayObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A C-contiguous array on a Tack device.",
    .tp_dealloc = array_dealloc,
    .tp_repr = array_repr,
    .tp_as_sequence = &array_as_sequence,
    .tp_getset = array_getset,
    .tp_methods = array_methods,
};

int tack_py_array_init(PyObject *m)
{
    if (PyType_Ready(&TackArray_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "Array", (PyObject *)&TackArray_Type);
}
