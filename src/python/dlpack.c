/* DLPack capsules: Array.__dlpack__ and tack.from_dlpack. The rules live in
 * src/dlpack/; this file only moves tensors in and out of capsules. */
#include "ext.h"

#include <string.h>

static PyObject *str_dlpack_device, *kwnames_max_version_stream, *kwnames_stream, *str_requires_grad, *str_exchange_api, *str_dlpack, *str_max_version, *kwnames_max_version, *version_1_0;

static const char *const dlpack_kwnames[] = {"stream", "max_version", "dl_device", "copy", NULL};

/* Capsule destructors run when a capsule is collected. One still carrying
 * its original name was never adopted, so the export is released here; a
 * consumer that adopted it renamed it and calls the deleter itself. These
 * touch only C state, so they are safe at any point of interpreter exit. */
static void capsule_destructor_legacy(PyObject *capsule)
{
    if (!PyCapsule_IsValid(capsule, "dltensor"))
        return;
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, "dltensor");
    if (m && m->deleter)
        m->deleter(m);
}

static void capsule_destructor_versioned(PyObject *capsule)
{
    if (!PyCapsule_IsValid(capsule, "dltensor_versioned"))
        return;
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (m && m->deleter)
        m->deleter(m);
}

PyObject *tack_py_array_dlpack(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs) {
        PyErr_SetString(PyExc_TypeError, "__dlpack__() takes keyword arguments only");
        return NULL;
    }
    PyObject *vals[4] = {NULL, NULL, NULL, NULL};
    if (tack_py_keywords("__dlpack__", kwnames, args, dlpack_kwnames, vals) < 0)
        return NULL;
    PyObject *max_version = vals[1], *copy = vals[3];
    if (copy && copy != Py_None) {
        int want = PyObject_IsTrue(copy);
        if (want < 0)
            return NULL;
        if (want) {
            PyErr_SetString(PyExc_BufferError,
                            "Tack's DLPack export is always a view of the array's memory; copy=True cannot be "
                            "honoured. Export without copy and copy on the consumer's side");
            return NULL;
        }
    }
    int versioned = 0;
    if (max_version && max_version != Py_None) {
        if (!PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) < 1) {
            PyErr_SetString(PyExc_TypeError, "max_version must be a (major, minor) tuple or None");
            return NULL;
        }
        long major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0));
        if (major == -1 && PyErr_Occurred())
            return NULL;
        versioned = major >= 1;
    }
    tack_array *a = TACK_PY_ARRAY(self);
    tack_status st;
    PyObject *capsule;
    if (versioned) {
        DLManagedTensorVersioned *m;
        st = tack_array_to_dlpack_versioned(a, &m);
        if (st != TACK_OK)
            return tack_py_raise(st);
        capsule = PyCapsule_New(m, "dltensor_versioned", capsule_destructor_versioned);
        if (!capsule)
            m->deleter(m);
    } else {
        DLManagedTensor *m;
        st = tack_array_to_dlpack(a, &m);
        if (st != TACK_OK)
            return tack_py_raise(st);
        capsule = PyCapsule_New(m, "dltensor", capsule_destructor_legacy);
        if (!capsule)
            m->deleter(m);
    }
    return capsule;
}

PyObject *tack_py_array_dlpack_device(PyObject *self, PyObject *unused)
{
    (void)unused;
    DLDevice dl = tack_device_dl_device(tack_array_device(TACK_PY_ARRAY(self)));
    return Py_BuildValue("(ii)", (int)dl.device_type, (int)dl.device_id);
}

/* The C exchange table a type publishes as __dlpack_c_exchange_api__, or
 * NULL. The attribute lives on the type and the table for the process, so
 * the last type looked up is remembered. */
static const DLPackExchangeAPI *exchange_api(PyTypeObject *type)
{
    static PyTypeObject *cached_type;
    static const DLPackExchangeAPI *cached_api;
    if (type == cached_type)
        return cached_api;
    const DLPackExchangeAPI *api = NULL;
    PyObject *cap = PyObject_GetAttr((PyObject *)type, str_exchange_api);
    if (!cap) {
        PyErr_Clear();
    } else {
        if (PyCapsule_IsValid(cap, "dlpack_exchange_api"))
            api = PyCapsule_GetPointer(cap, "dlpack_exchange_api");
        Py_DECREF(cap);
        /* Only a table of our major version can be read. */
        if (api && (api->header.version.major != DLPACK_MAJOR_VERSION || !api->managed_tensor_from_py_object_no_sync))
            api = NULL;
    }
    PyErr_Clear();
    Py_XSETREF(cached_type, (PyTypeObject *)Py_NewRef(type));
    cached_api = api;
    return api;
}

/* The stream= a producer should order its pending writes before, as a
 * Python int: the stream of the Tack device that will import a GPU tensor.
 * NULL without an exception when there is none to give (host memory, a
 * producer without __dlpack_device__, a device Tack cannot open: the import
 * itself then reports what is wrong). */
static PyObject *consumer_stream(PyObject *source, tack_device *asked, tack_device *fallback)
{
    /* NumPy arrays are host memory: skip the extra call on the common path. */
    if (!strcmp(Py_TYPE(source)->tp_name, "numpy.ndarray"))
        return NULL;
    PyObject *callargs[1] = {source};
    PyObject *dev = PyObject_VectorcallMethod(str_dlpack_device, callargs, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (!dev) {
        PyErr_Clear();
        return NULL;
    }
    DLDevice dl = {0, 0};
    int ok = PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2;
    if (ok) {
        long type = PyLong_AsLong(PyTuple_GET_ITEM(dev, 0)), id = PyLong_AsLong(PyTuple_GET_ITEM(dev, 1));
        ok = !PyErr_Occurred() && type >= 0 && type < 1 << 16 && id >= 0 && id < 1 << 20;
        dl.device_type = (DLDeviceType)type;
        dl.device_id = (int32_t)id;
    }
    Py_DECREF(dev);
    PyErr_Clear();
    if (!ok || (dl.device_type != kDLCUDA && dl.device_type != kDLCUDAManaged && dl.device_type != kDLROCM))
        return NULL;
    tack_device *target = NULL;
    int owned = 0;
    if (asked)
        target = tack_device_can_wrap(asked, dl) ? asked : NULL;
    else if (fallback && tack_device_can_wrap(fallback, dl))
        target = fallback;
    else if (tack_device_for_dlpack(dl, &target) == TACK_OK)
        owned = 1;
    uint64_t handle = target ? tack_device_stream_handle(target) : 0;
    if (owned)
        tack_device_release(target);
    /* 0 is no valid stream= value; a device without a stream of its own
     * leaves the producer's default (synchronise for the legacy stream). */
    return handle ? PyLong_FromUnsignedLongLong(handle) : NULL;
}

/* source.__dlpack__(max_version=(1, 0)[, stream=s]), falling back to the
 * call without max_version for producers from before DLPack 1.0, which
 * raise TypeError. */
static PyObject *request_capsule(PyObject *source, PyObject *stream)
{
    if (PyCapsule_CheckExact(source))
        return Py_NewRef(source);
    PyObject *callargs[3] = {source, version_1_0, stream};
    PyObject *capsule = PyObject_VectorcallMethod(str_dlpack, callargs, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                  stream ? kwnames_max_version_stream : kwnames_max_version);
    if (capsule)
        goto check;
    if (PyErr_ExceptionMatches(PyExc_AttributeError) && !PyObject_HasAttr(source, str_dlpack)) {
        PyErr_Format(PyExc_TypeError,
                     "tack.from_dlpack needs an object with __dlpack__ or a DLPack capsule, not %s; for other "
                     "objects use tack.array(obj), which copies",
                     Py_TYPE(source)->tp_name);
        return NULL;
    }
    if (!PyErr_ExceptionMatches(PyExc_TypeError))
        return NULL;
    PyErr_Clear();
    callargs[1] = stream;
    capsule = PyObject_VectorcallMethod(str_dlpack, callargs, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                        stream ? kwnames_stream : NULL);
check:
    if (capsule && !PyCapsule_CheckExact(capsule)) {
        PyErr_Format(PyExc_TypeError, "%s.__dlpack__() returned a %s, not a DLPack capsule",
                     Py_TYPE(source)->tp_name, Py_TYPE(capsule)->tp_name);
        Py_CLEAR(capsule);
    }
    return capsule;
}

static PyObject *import_copy(PyObject *source, PyObject *device)
{
    PyObject *np = tack_py_numpy();
    if (!np)
        return NULL;
    PyObject *ndarray = PyObject_GetAttrString(np, "ndarray");
    if (!ndarray)
        return NULL;
    int is_nd = PyObject_IsInstance(source, ndarray);
    Py_DECREF(ndarray);
    if (is_nd < 0)
        return NULL;
    PyObject *host = is_nd ? Py_NewRef(source) : PyObject_CallMethod(np, "from_dlpack", "O", source);
    if (!host)
        return NULL;
    PyObject *mod = PyImport_ImportModule("tack._tack");
    PyObject *result = NULL;
    if (mod) {
        PyObject *array_fn = PyObject_GetAttrString(mod, "array");
        if (array_fn) {
            PyObject *args = PyTuple_Pack(1, host);
            PyObject *kw = args ? Py_BuildValue("{s:O}", "device", device) : NULL;
            if (kw)
                result = PyObject_Call(array_fn, args, kw);
            Py_XDECREF(args);
            Py_XDECREF(kw);
            Py_DECREF(array_fn);
        }
        Py_DECREF(mod);
    }
    Py_DECREF(host);
    return result;
}

static const char *const from_dlpack_kwnames[] = {"device", "copy", NULL};

PyObject *tack_py_from_dlpack(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "from_dlpack() takes exactly one positional argument (%zd given)", nargs);
        return NULL;
    }
    PyObject *vals[2] = {NULL, NULL};
    if (tack_py_keywords("from_dlpack", kwnames, args + nargs, from_dlpack_kwnames, vals) < 0)
        return NULL;
    PyObject *source = args[0], *device_obj = vals[0] ? vals[0] : Py_None, *capsule = NULL;
    if (vals[1]) {
        int copy = PyObject_IsTrue(vals[1]);
        if (copy < 0)
            return NULL;
        if (copy)
            return import_copy(source, device_obj);
    }
    tack_device *device = NULL;
    if (device_obj != Py_None && !tack_py_device_converter(device_obj, &device))
        return NULL;
    tack_device *fallback = tack_py_default_device();
    PyObject *result = NULL;
    tack_array *a;
    tack_status st;
    if (!fallback)
        goto done;
    /* A producer's C table skips the Python-level __dlpack__ call. The
     * table does not synchronise streams, so it serves host memory only;
     * device memory takes __dlpack__, which orders the producer's work. */
    const DLPackExchangeAPI *api = PyCapsule_CheckExact(source) ? NULL : exchange_api(Py_TYPE(source));
    if (api) {
        /* PyTorch's table exports tensors that require grad, which its
         * __dlpack__ refuses; keep one behaviour by sending those there. */
        PyObject *rg = PyObject_GetAttr(source, str_requires_grad);
        int needs_grad = rg ? PyObject_IsTrue(rg) : 0;
        Py_XDECREF(rg);
        PyErr_Clear();
        if (needs_grad)
            api = NULL;
    }
    if (api) {
        DLManagedTensorVersioned *m = NULL;
        if (api->managed_tensor_from_py_object_no_sync(source, &m) == 0 && m) {
            if (m->version.major == DLPACK_MAJOR_VERSION && m->dl_tensor.device.device_type == kDLCPU) {
                int deleter_called;
                st = tack_array_from_dlpack_versioned(m, device, fallback, &a, &deleter_called);
                if (st != TACK_OK && !deleter_called && m->deleter)
                    m->deleter(m);
                result = st == TACK_OK ? tack_py_array_new(a) : tack_py_raise(st);
                goto done;
            }
            if (m->deleter)
                m->deleter(m);
        }
        /* A refusal is answered by __dlpack__ below, with the producer's
         * own exception (BufferError for a sparse tensor, say). */
        PyErr_Clear();
    }
    if (!PyCapsule_CheckExact(source)) {
        PyObject *stream = consumer_stream(source, device, fallback);
        capsule = request_capsule(source, stream);
        Py_XDECREF(stream);
    } else {
        capsule = Py_NewRef(source);
    }
    if (!capsule)
        goto done;
    const char *name = PyCapsule_GetName(capsule);
    int versioned = name && !strcmp(name, "dltensor_versioned");
    if (!versioned && !(name && !strcmp(name, "dltensor"))) {
        PyErr_Format(PyExc_ValueError,
                     "the DLPack capsule is named '%s', not 'dltensor' or 'dltensor_versioned': it was already "
                     "consumed; ask the producer for a new one",
                     name ? name : "(null)");
        goto done;
    }
    if (versioned) {
        int deleter_called;
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, name);
        if (!m)
            goto done;
        st = tack_array_from_dlpack_versioned(m, device, fallback, &a, &deleter_called);
        if (st == TACK_OK || deleter_called)
            PyCapsule_SetName(capsule, "used_dltensor_versioned");
    } else {
        DLManagedTensor *m = PyCapsule_GetPointer(capsule, name);
        if (!m)
            goto done;
        st = tack_array_from_dlpack(m, device, fallback, &a);
        if (st == TACK_OK)
            PyCapsule_SetName(capsule, "used_dltensor");
    }
    result = st == TACK_OK ? tack_py_array_new(a) : tack_py_raise(st);
done:
    Py_XDECREF(capsule);
    tack_device_release(device);
    return result;
}

int tack_py_dlpack_init(PyObject *m)
{
    (void)m;
    str_dlpack = PyUnicode_InternFromString("__dlpack__");
    str_exchange_api = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
    str_requires_grad = PyUnicode_InternFromString("requires_grad");
    str_max_version = PyUnicode_InternFromString("max_version");
    kwnames_max_version = str_max_version ? PyTuple_Pack(1, str_max_version) : NULL;
    version_1_0 = Py_BuildValue("(ii)", 1, 0);
    str_dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
    kwnames_max_version_stream = Py_BuildValue("(ss)", "max_version", "stream");
    kwnames_stream = Py_BuildValue("(s)", "stream");
    if (!str_dlpack_device || !kwnames_max_version_stream || !kwnames_stream)
        return -1;
    return str_dlpack && kwnames_max_version && version_1_0 ? 0 : -1;
}
