/* tack._tack: the module, and the functions that make arrays (empty, zeros,
 * array, array_from_ptr). */
#include "ext.h"

#include <stdio.h>

PyTypeObject *TackExportedMemory_Type;

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
    if (exportable && tack_py_multiprocessing_register() < 0)
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
    /* A longer shape is not read: tack_array_empty refuses its count. */
    for (int i = 0; i < view.ndim && i < TACK_MAX_NDIM; i++)
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
    PyObject *npdtype = have_dtype ? tack_py_numpy_dtype(dtype) : NULL;
    if (have_dtype && !npdtype) {
        arr = NULL;
    } else if (PyObject_TypeCheck(obj, &TackArray_Type)) {
        PyObject *host = PyObject_CallMethod(obj, "to_numpy", NULL);
        arr = host ? tack_py_as_numpy(host, npdtype) : NULL;
        Py_XDECREF(host);
    } else {
        arr = tack_py_as_numpy(obj, npdtype);
    }
    Py_XDECREF(npdtype);
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
    uint64_t address;
    if (!tack_py_address(ptr, "ptr", &address))
        return NULL;
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

static PyObject *py_memory_space(PyObject *m, PyObject *ptr)
{
    (void)m;
    uint64_t address;
    if (!tack_py_address(ptr, "ptr", &address))
        return NULL;
    const char *space;
    tack_status st;
    /* The first call may open each GPU backend's device, which can take a
     * while on a real driver. */
    Py_BEGIN_ALLOW_THREADS
    st = tack_memory_space(address, &space);
    Py_END_ALLOW_THREADS
    if (st != TACK_OK)
        return tack_py_raise(st);
    return PyUnicode_FromString(space);
}

static PyObject *py_live_counts(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return Py_BuildValue("{s:l,s:l,s:l}", "arrays", tack_array_live_count(), "buffers", tack_buffer_live_count(),
                         "exports", tack_dlpack_live_exports());
}

static PyObject *py_atomic_runs(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    long plain, refused, waited;
    tack_kernel_atomic_runs(&plain, &refused, &waited);
    return Py_BuildValue("{s:l,s:l,s:l}", "plain", plain, "refused", refused, "waited", waited);
}

static PyMethodDef module_methods[] = {
    {"empty", (PyCFunction)(void (*)(void))py_empty, METH_VARARGS | METH_KEYWORDS,
     "empty(shape, dtype='float32', *, device=None, exportable=False)\n--\n\nA new zero-filled array."},
    {"zeros", (PyCFunction)(void (*)(void))py_zeros, METH_VARARGS | METH_KEYWORDS,
     "zeros(shape, dtype='float32', *, device=None, exportable=False)\n--\n\nA new zero-filled array."},
    {"array", (PyCFunction)(void (*)(void))py_array, METH_VARARGS | METH_KEYWORDS,
     "array(obj, dtype=None, *, device=None)\n--\n\nA copy of anything NumPy can read."},
    {"array_from_ptr", (PyCFunction)(void (*)(void))py_array_from_ptr, METH_VARARGS | METH_KEYWORDS,
     "array_from_ptr(ptr, dtype, shape, writable=False, *, device=None)\n--\n\n"
     "Wraps memory at an integer address without copying or owning it; the caller keeps it alive."},
    {"from_dlpack", (PyCFunction)(void (*)(void))tack_py_from_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "from_dlpack(source, /, *, device=None, copy=False)\n--\n\n"
     "Imports a DLPack tensor (an object with __dlpack__, or a capsule) without copying; copy=True copies it "
     "into a new array on device= or the default device."},
    {"asarray", (PyCFunction)(void (*)(void))tack_py_asarray, METH_FASTCALL | METH_KEYWORDS,
     "asarray(obj, /, *, device=None)\n--\n\n"
     "Shares obj's memory without copying: through DLPack, else the CUDA Array Interface, else the buffer "
     "protocol. The array keeps obj's memory alive; read-only memory gives a read-only array. A Tack array is "
     "returned as it is. With the CUDA Array Interface, Tack's stream is ordered after the producer's stream on "
     "the device, with no host wait."},
    {"memory_space", py_memory_space, METH_O,
     "memory_space(ptr, /)\n--\n\nWhat memory the address is, as the drivers report it: 'cuda', "
     "'cuda_pinned', 'cuda_managed', 'hip', 'hip_pinned', 'hip_managed', 'level_zero', "
     "'level_zero_shared', 'level_zero_host', or 'cpu' when no driver knows it. Asks each GPU backend "
     "whose driver loads (opening its first device)."},
    {"live_counts", py_live_counts, METH_NOARGS, "Live C objects: arrays, buffers and DLPack exports."},
    {"atomic_runs", py_atomic_runs, METH_NOARGS,
     "CPU runs of kernels with atomics: on one thread with plain atomics, kept locked because another "
     "launch with atomics ran, and locked launches that waited for a plain one (tack_kernel_atomic_runs)."},
    {NULL, NULL, 0, NULL},
};

static PyStructSequence_Field exported_fields[] = {
    {"backend", "the backend that exported the memory"},
    {"size", "bytes of the array"},
    {"allocation_size", "bytes of the exported allocation (>= size)"},
    {"handle", "the OS handle (a POSIX file descriptor owned by the array's buffer)"},
    {"handle_type", "'posix_fd' or 'win32_kmt'"},
    {"device_uuid", "the device's 16-byte UUID"},
    /* Not in the tuple: what keeps the handle open (src/python/ipc.c). */
    {"owner", "the exporting buffer, kept alive with the record so that handle stays its descriptor"},
    {NULL, NULL},
};

static PyStructSequence_Desc exported_desc = {
    "tack.ExportedMemory",
    "OS-handle export of an array's memory, in plain Python values. The record keeps the exporting\n"
    "buffer alive, so handle names its descriptor for as long as the record or an array over it lives.",
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
        tack_py_dlpack_init(m) < 0 || tack_py_exchange_init(m) < 0 || tack_py_asarray_init(m) < 0 ||
        tack_py_kernel_init(m) < 0 || tack_py_ipc_init(m) < 0 || tack_py_config_init(m) < 0 ||
        tack_py_capi_init(m) < 0)
        goto fail;
    if (PyModule_AddStringConstant(m, "__version__", TACK_VERSION_STRING) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
