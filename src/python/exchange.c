/* The C exchange table Tack's Array publishes.
 *
 * type(a).__dlpack_c_exchange_api__: a capsule named "dlpack_exchange_api"
 * over the static table below, for consumers that exchange tensors from C
 * without a Python call (DLPack 1.3). The functions are called with the GIL
 * held and, unlike __dlpack__, synchronise nothing: a consumer runs its work
 * on the stream current_work_stream names, which is Tack's own. The C work
 * is src/dlpack's; here Python objects are converted and statuses mapped. */
#include "ext.h"

/* The table's layout is DLPack 1.3's; the tensors it makes are 1.1's. */
#define EXCHANGE_API_MINOR_VERSION 3

/* Reports through the consumer's SetError, which needs no Python state of
 * ours: the allocator may be called where the caller has no exception to
 * receive, without the GIL. */
static int exchange_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                              DLPackSetError set_error)
{
    tack_status st = tack_dlpack_allocate(prototype, out);
    if (st == TACK_OK)
        return 0;
    if (set_error)
        set_error(error_ctx, tack_py_status_kind(st), tack_last_error());
    return -1;
}

static int not_an_array(void *py_object, const char *function)
{
    PyErr_Format(PyExc_TypeError, "%s: expected a tack.Array, not %s", function,
                 py_object ? Py_TYPE((PyObject *)py_object)->tp_name : "NULL");
    return -1;
}

/* __dlpack__(max_version=(1, 0), stream=-1): the consumer orders its work
 * after Tack's queued launches itself (on Tack's stream, from
 * current_work_stream); the buffer is still marked shared, because the
 * consumer may keep the tensor and read it after later launches. */
static int exchange_from_py_object(void *py_object, DLManagedTensorVersioned **out)
{
    if (!py_object || !PyObject_TypeCheck((PyObject *)py_object, &TackArray_Type))
        return not_an_array(py_object, "managed_tensor_from_py_object_no_sync");
    if (!out) {
        PyErr_SetString(PyExc_ValueError, "managed_tensor_from_py_object_no_sync: out must not be NULL");
        return -1;
    }
    tack_status st = tack_array_to_dlpack_versioned_stream(TACK_PY_ARRAY(py_object), -1, out);
    return st == TACK_OK ? 0 : tack_py_fail(st);
}

/* Adopts the tensor as tack.from_dlpack does without device=. The tensor
 * is the callee's from the call on, as the DLPack header says ("stolen"):
 * on failure its deleter has been called. */
static int exchange_to_py_object(DLManagedTensorVersioned *tensor, void **out_py_object)
{
    if (!tensor || !out_py_object) {
        if (tensor && tensor->deleter)
            tensor->deleter(tensor);
        PyErr_SetString(PyExc_ValueError, "managed_tensor_to_py_object_no_sync: tensor and out_py_object must "
                                          "not be NULL");
        return -1;
    }
    tack_device *fallback = tack_py_default_device();
    if (!fallback) {
        if (tensor->deleter)
            tensor->deleter(tensor);
        return -1;
    }
    tack_array *a = NULL;
    int deleter_called = 0;
    tack_status st = tack_array_from_dlpack_versioned(tensor, NULL, fallback, &a, &deleter_called);
    if (st != TACK_OK) {
        if (!deleter_called && tensor->deleter)
            tensor->deleter(tensor);
        return tack_py_fail(st);
    }
    PyObject *obj = tack_py_array_new(a);
    if (!obj)
        return -1;
    *out_py_object = obj;
    return 0;
}

/* A view for the length of the consumer's call. */
static int exchange_dltensor_from_py_object(void *py_object, DLTensor *out)
{
    if (!py_object || !PyObject_TypeCheck((PyObject *)py_object, &TackArray_Type))
        return not_an_array(py_object, "dltensor_from_py_object_no_sync");
    if (!out) {
        PyErr_SetString(PyExc_ValueError, "dltensor_from_py_object_no_sync: out must not be NULL");
        return -1;
    }
    tack_status st = tack_array_to_dltensor(TACK_PY_ARRAY(py_object), out);
    return st == TACK_OK ? 0 : tack_py_fail(st);
}

/* Tack's stream on that device (the one its launches are queued on), NULL
 * for host memory. */
static int exchange_current_work_stream(DLDeviceType device_type, int32_t device_id, void **out_current_stream)
{
    if (!out_current_stream) {
        PyErr_SetString(PyExc_ValueError, "current_work_stream: out_current_stream must not be NULL");
        return -1;
    }
    uint64_t stream;
    tack_status st = tack_dlpack_work_stream((DLDevice){device_type, device_id}, &stream);
    if (st != TACK_OK)
        return tack_py_fail(st);
    *out_current_stream = (void *)(uintptr_t)stream;
    return 0;
}

/* Process lifetime, as the DLPack header requires of a published table. */
static DLPackExchangeAPI tack_exchange_api = {
    .header = {.version = {DLPACK_MAJOR_VERSION, EXCHANGE_API_MINOR_VERSION}, .prev_api = NULL},
    .managed_tensor_allocator = exchange_allocator,
    .managed_tensor_from_py_object_no_sync = exchange_from_py_object,
    .managed_tensor_to_py_object_no_sync = exchange_to_py_object,
    .dltensor_from_py_object_no_sync = exchange_dltensor_from_py_object,
    .current_work_stream = exchange_current_work_stream,
};

/* Array is a static type, immutable to setattr: the capsule goes into its
 * dictionary directly, and the type's attribute cache is told. */
int tack_py_exchange_init(PyObject *module)
{
    (void)module;
    PyObject *name = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
    PyObject *cap = name ? PyCapsule_New(&tack_exchange_api, "dlpack_exchange_api", NULL) : NULL;
    int r = cap ? PyDict_SetItem(TackArray_Type.tp_dict, name, cap) : -1;
    Py_XDECREF(cap);
    Py_XDECREF(name);
    if (r == 0)
        PyType_Modified(&TackArray_Type);
    return r;
}
