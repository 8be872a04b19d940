/* The C-API capsule tack._tack._C_API that <tack/python.h> imports: the
 * functions C code calls to hand arrays to Python and back. */
#include "ext.h"

#include "tack/python.h"

static PyObject *capi_from_array(tack_array *array)
{
    if (!array) {
        PyErr_SetString(PyExc_ValueError, "tack_py_from_array: array is NULL; pass a live tack_array");
        return NULL;
    }
    /* Python may pass the memory on where Tack cannot see it (an address,
     * another library, another process), so from here no launch may treat
     * it as private: plain read-modify-writes by a C thread would lose a
     * Python caller's updates. It waits for the array's launches first
     * (a failed wait sets no mark). Were tack_py_array_new to fail after
     * it, the buffer would only take locked atomics from then on. */
    tack_status st = tack_buffer_share(tack_array_buffer(array));
    if (st != TACK_OK)
        return tack_py_raise(st);
    /* On failure tack_py_array_new releases the reference taken here, so
     * the caller's own stays as it was. */
    return tack_py_array_new(tack_array_retain(array));
}

static tack_array *capi_to_array(PyObject *obj)
{
    if (!obj) {
        PyErr_SetString(PyExc_ValueError, "tack_py_to_array: obj is NULL; pass a Python object");
        return NULL;
    }
    return tack_py_share(obj);
}

static const tack_py_api capi = {
    .abi_version = TACK_PY_ABI_VERSION,
    .tack_version = TACK_VERSION_MAJOR * 10000u + TACK_VERSION_MINOR * 100u + TACK_VERSION_PATCH,
    .from_array = capi_from_array,
    .to_array = capi_to_array,
};

int tack_py_capi_init(PyObject *module)
{
    PyObject *capsule = PyCapsule_New((void *)&capi, TACK_PY_CAPSULE_NAME, NULL);
    if (!capsule)
        return -1;
    int r = PyModule_AddObjectRef(module, "_C_API", capsule);
    Py_DECREF(capsule);
    return r;
}
