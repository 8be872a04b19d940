/* What a producer's DLPack C exchange table costs by itself: the export
 * (managed_tensor_from_py_object_no_sync) and the release (the tensor's
 * deleter), called back to back from C with no interpreter in between.
 * bench/c_exchange.py builds this file into a small library and calls it
 * through ctypes once per measurement, so the ctypes call is amortised over
 * the whole loop. No consumer that imports through the table and releases
 * what it imported can cost less than this plus the call from Python. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <time.h>

#include "tack/dlpack.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Nanoseconds per export and release of `obj` through its type's table,
 * best of `repeat` loops of `n`; -1.0 with a Python exception set when the
 * type publishes no usable table or an export fails. Holds the GIL (the
 * caller loads this library with ctypes.PyDLL). */
double table_round_trip_ns(PyObject *obj, long n, int repeat)
{
    PyObject *cap = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__dlpack_c_exchange_api__");
    if (!cap)
        return -1.0;
    const DLPackExchangeAPI *api = PyCapsule_GetPointer(cap, "dlpack_exchange_api");
    Py_DECREF(cap); /* the table lives as long as the process */
    if (!api)
        return -1.0;
    if (!api->managed_tensor_from_py_object_no_sync) {
        PyErr_SetString(PyExc_TypeError, "the exchange table has no managed_tensor_from_py_object_no_sync");
        return -1.0;
    }
    double best = -1.0;
    for (int r = 0; r < repeat; r++) {
        double start = now_ns();
        for (long i = 0; i < n; i++) {
            DLManagedTensorVersioned *m = NULL;
            if (api->managed_tensor_from_py_object_no_sync(obj, &m) != 0)
                return -1.0;
            if (m->deleter)
                m->deleter(m);
        }
        double per = (now_ns() - start) / (double)n;
        if (best < 0 || per < best)
            best = per;
    }
    return best;
}
