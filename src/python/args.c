/* Argument helpers shared by the extension's functions: keywords, shapes,
 * element values, NumPy, and attribute lookups that do not raise. */
#include "ext.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

PyObject *tack_py_numpy(void)
{
    static PyObject *numpy;
    if (numpy)
        return numpy;
    numpy = PyImport_ImportModule("numpy");
    if (!numpy && PyErr_ExceptionMatches(PyExc_ImportError)) {
        /* Tack imports without NumPy, but copies from and to Python data
         * go through it: say how to get it, keeping the import's own error
         * (a missing module, or a broken one) as the cause. */
        PyObject *cause = tack_py_exception_take();
        PyErr_Format(PyErr_GivenExceptionMatches(cause, PyExc_ModuleNotFoundError) ? PyExc_ModuleNotFoundError
                                                                                    : PyExc_ImportError,
                     "this needs NumPy, which cannot be imported (%S): install it with `pip install numpy` "
                     "(`pip install tack-arrays` brings it)",
                     cause);
        PyObject *exc = tack_py_exception_take();
        PyException_SetCause(exc, cause);
        tack_py_exception_restore(exc);
    }
    return numpy;
}

PyObject *tack_py_numpy_dtype(tack_dtype dtype)
{
    PyObject *np = tack_py_numpy();
    if (!np)
        return NULL;
    if (dtype != TACK_BF16)
        return PyObject_CallMethod(np, "dtype", "s", tack_dtype_name(dtype));
    /* NumPy knows bfloat16 only as ml_dtypes' type, which the import
     * registers. */
    PyObject *ml = PyImport_ImportModule("ml_dtypes");
    PyObject *type = ml ? PyObject_GetAttrString(ml, "bfloat16") : NULL;
    Py_XDECREF(ml);
    if (!type) {
        PyObject *cause = tack_py_exception_take();
        PyErr_Format(PyExc_TypeError,
                     "NumPy has no bfloat16 dtype of its own; it has one with ml_dtypes, which cannot be imported "
                     "(%S): install it (`pip install ml-dtypes`), or share a bfloat16 array with a library that "
                     "has the type through DLPack (torch.from_dlpack(a))",
                     cause ? cause : Py_None);
        PyObject *exc = tack_py_exception_take();
        PyException_SetCause(exc, cause);
        tack_py_exception_restore(exc);
        return NULL;
    }
    PyObject *r = PyObject_CallMethod(np, "dtype", "O", type);
    Py_DECREF(type);
    return r;
}

/* Callers pass the same kwnames tuple on every call from one call site
 * (it is a constant of the caller's code, or of a C library's call), so the
 * last few tuples are remembered with their resolved positions. */
#define KW_CACHE 8
#define KW_MAX 8
static struct {
    PyObject *kwnames;
    const char *const *names;
    signed char slot[KW_MAX];
} kw_cache[KW_CACHE];
static int kw_next;

/* The accepted names of each keyword list as interned strings: keywords
 * spelled in Python source are interned, so a pointer comparison matches
 * them even when the caller builds a new kwnames tuple on every call
 * (f(**kwargs) does). */
static struct {
    const char *const *names;
    PyObject *interned[KW_MAX];
} kw_interned[16];

static PyObject *const *interned_names(const char *const *names)
{
    for (int i = 0; i < 16; i++) {
        if (kw_interned[i].names == names)
            return kw_interned[i].interned;
        if (!kw_interned[i].names) {
            for (int j = 0; names[j] && j < KW_MAX; j++) {
                kw_interned[i].interned[j] = PyUnicode_InternFromString(names[j]);
                if (!kw_interned[i].interned[j]) {
                    PyErr_Clear();
                    return NULL;
                }
            }
            kw_interned[i].names = names;
            return kw_interned[i].interned;
        }
    }
    return NULL;
}

int tack_py_keywords(const char *func, PyObject *kwnames, PyObject *const *kwvalues, const char *const *names,
                     PyObject **vals)
{
    if (!kwnames)
        return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
    for (int c = 0; c < KW_CACHE; c++) {
        if (kw_cache[c].kwnames == kwnames && kw_cache[c].names == names) {
            for (Py_ssize_t i = 0; i < n; i++)
                vals[kw_cache[c].slot[i]] = kwvalues[i];
            return 0;
        }
    }
    PyObject *const *interned = interned_names(names);
    signed char slot[KW_MAX];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        int found = -1;
        for (int j = 0; interned && names[j] && j < KW_MAX && found < 0; j++)
            if (key == interned[j])
                found = j;
        for (int j = 0; names[j] && found < 0; j++)
            if (PyUnicode_CompareWithASCIIString(key, names[j]) == 0)
                found = j;
        if (found < 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", func, key);
            return -1;
        }
        vals[found] = kwvalues[i];
        if (i < KW_MAX)
            slot[i] = (signed char)found;
    }
    /* A tuple only the caller holds is made for this call alone: keeping it
     * would evict the call sites that do repeat. */
    if (n <= KW_MAX && Py_REFCNT(kwnames) > 1) {
        int c = kw_next;
        kw_next = (kw_next + 1) % KW_CACHE;
        Py_XSETREF(kw_cache[c].kwnames, Py_NewRef(kwnames));
        kw_cache[c].names = names;
        memcpy(kw_cache[c].slot, slot, sizeof slot);
    }
    return 0;
}

int tack_py_parse_shape(PyObject *obj, int *ndim, int64_t *shape)
{
    /* bytes and str are sequences, but not of extents. */
    if (PyBytes_Check(obj) || PyByteArray_Check(obj) || PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "shape must be an int or a sequence of ints, not %s", Py_TYPE(obj)->tp_name);
        return 0;
    }
    if (PyLong_Check(obj) || PyIndex_Check(obj)) {
        PyObject *idx = PyNumber_Index(obj);
        if (!idx)
            return 0;
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
        Py_DECREF(idx);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "shape extent does not fit a 64-bit integer");
            return 0;
        }
        *ndim = 1;
        shape[0] = v;
        return 1;
    }
    /* A tuple of its own, not the caller's list: an extent's __index__ may
     * change the list while it is read (a list would hand back items that
     * are gone). */
    if (!PySequence_Check(obj) && !Py_TYPE(obj)->tp_iter) {
        PyErr_Format(PyExc_TypeError, "shape must be an int or a sequence of ints, not %s", Py_TYPE(obj)->tp_name);
        return 0;
    }
    PyObject *seq = PySequence_Tuple(obj);
    if (!seq)
        return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    /* More extents than any array has are not read: the C call the shape
     * is for refuses their count. */
    if (n > TACK_MAX_NDIM) {
        Py_DECREF(seq);
        *ndim = n > INT_MAX ? INT_MAX : (int)n;
        return 1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(seq, i);
        if (!PyIndex_Check(item)) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_TypeError, "shape[%zd] is a %s, not an int", i, Py_TYPE(item)->tp_name);
            return 0;
        }
        PyObject *idx = PyNumber_Index(item);
        if (!idx) {
            Py_DECREF(seq);
            return 0;
        }
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
        Py_DECREF(idx);
        if (overflow) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "shape[%zd] does not fit a 64-bit integer", i);
            return 0;
        }
        shape[i] = v;
    }
    Py_DECREF(seq);
    *ndim = (int)n;
    return 1;
}

/* Replaces the conversion error pending for `obj`: a number too large for
 * a double is out of range (ValueError), anything else not `what` for the
 * dtype (TypeError). Returns -1. */
static int number_refused(PyObject *obj, tack_dtype dtype, const char *what)
{
    int too_big = PyErr_ExceptionMatches(PyExc_OverflowError);
    PyErr_Clear();
    if (too_big)
        PyErr_Format(PyExc_ValueError, "%R is out of range for %s", obj, tack_dtype_name(dtype));
    else
        PyErr_Format(PyExc_TypeError, "expected %s for %s, got %s", what, tack_dtype_name(dtype),
                     Py_TYPE(obj)->tp_name);
    return -1;
}

/* A Python number as a double, for the floating-point dtypes; -1 with
 * TypeError (not a real number) or ValueError (too large for a double). */
static int to_double(PyObject *obj, tack_dtype dtype, double *out)
{
    double v = PyFloat_AsDouble(obj);
    if (v == -1.0 && PyErr_Occurred())
        return number_refused(obj, dtype, "a real number");
    *out = v;
    return 0;
}

/* The floating-point dtypes' element: rounded as NumPy casts. */
static int to_float(PyObject *obj, tack_dtype dtype, void *out)
{
    double v;
    if (to_double(obj, dtype, &v) < 0)
        return -1;
    /* Beyond the largest finite value a float becomes an infinity, as
     * NumPy's casts make it. */
    if (dtype == TACK_F16 || dtype == TACK_BF16) {
        uint16_t h = dtype == TACK_F16 ? tack_float16_from_double(v) : tack_bfloat16_from_double(v);
        memcpy(out, &h, sizeof h);
    } else if (dtype == TACK_F32) {
        float f = (float)v;
        memcpy(out, &f, sizeof f);
    } else {
        memcpy(out, &v, sizeof v);
    }
    return 0;
}

static int to_complex(PyObject *obj, tack_dtype dtype, void *out)
{
    /* complex, float, int and anything with __complex__ or __float__. */
    Py_complex z = PyComplex_AsCComplex(obj);
    if (z.real == -1.0 && PyErr_Occurred())
        return number_refused(obj, dtype, "a number");
    if (dtype == TACK_C64) {
        float parts[2] = {(float)z.real, (float)z.imag};
        memcpy(out, parts, sizeof parts);
    } else {
        double parts[2] = {z.real, z.imag};
        memcpy(out, parts, sizeof parts);
    }
    return 0;
}

static int to_bool(PyObject *obj, void *out)
{
    /* Any number, nonzero being true, as NumPy casts to bool; a string
     * or an object is no number. */
    const PyNumberMethods *nb = Py_TYPE(obj)->tp_as_number;
    int truth = -1;
    if (PyComplex_Check(obj) || (nb && (nb->nb_float || nb->nb_index)))
        truth = PyObject_IsTrue(obj);
    else
        PyErr_Format(PyExc_TypeError, "expected a bool or a number for bool, got %s", Py_TYPE(obj)->tp_name);
    if (truth < 0)
        return -1;
    *(uint8_t *)out = (uint8_t)truth;
    return 0;
}

/* An integer dtype's element (`kind` 'i' or 'u'; a value for any other
 * kind is refused as out of range). */
static int to_integer(PyObject *obj, tack_dtype dtype, char kind, void *out)
{
    /* A float is refused, even 2.0, as a kernel's integer parameter
     * refuses it: a store that truncated 2.5 to 2 would lose the value
     * behind the caller's back, and one rule for both is easier to keep
     * than a line between them. */
    const PyNumberMethods *nb = Py_TYPE(obj)->tp_as_number;
    if (PyFloat_Check(obj) || (nb && nb->nb_float && !nb->nb_index && !PyComplex_Check(obj))) {
        PyErr_Format(PyExc_TypeError,
                     "expected an integer for %s, got %s %R; convert it with int() or round() first (Tack never "
                     "truncates a number to an integer: not in Array.fill, not for a kernel's parameter)",
                     tack_dtype_name(dtype), Py_TYPE(obj)->tp_name, obj);
        return -1;
    }
    PyObject *idx = PyNumber_Index(obj);
    if (!idx) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "expected an integer for %s, got %s", tack_dtype_name(dtype),
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long s = 0;
    unsigned long long u = 0;
    if (kind == 'u') {
        u = PyLong_AsUnsignedLongLong(idx);
        overflow = u == (unsigned long long)-1 && PyErr_Occurred();
    } else {
        s = PyLong_AsLongLongAndOverflow(idx, &overflow);
        overflow = overflow || (s == -1 && PyErr_Occurred());
    }
    Py_DECREF(idx);
    /* The range of the dtype's size, signed or not; what is stored is the
     * value's low bytes in two's complement. */
    size_t size = tack_dtype_size(dtype);
    overflow = overflow || (kind != 'i' && kind != 'u') || size == 0 || size > 8;
    if (!overflow && size < 8) {
        int bits = (int)size * 8;
        overflow = kind == 'u' ? (u >> bits) != 0 : s < -(1LL << (bits - 1)) || s >= 1LL << (bits - 1);
    }
    if (!overflow) {
        unsigned long long v = kind == 'u' ? u : (unsigned long long)s;
        uint8_t b1 = (uint8_t)v;
        uint16_t b2 = (uint16_t)v;
        uint32_t b4 = (uint32_t)v;
        uint64_t b8 = v;
        memcpy(out, size == 1 ? (void *)&b1 : size == 2 ? (void *)&b2 : size == 4 ? (void *)&b4 : (void *)&b8, size);
    }
    if (overflow) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%R is out of range for %s", obj, tack_dtype_name(dtype));
        return -1;
    }
    return 0;
}

int tack_py_to_element(PyObject *obj, tack_dtype dtype, void *out)
{
    char kind = tack_dtype_kind(dtype);
    if (kind == 'f' || kind == 'V')
        return to_float(obj, dtype, out);
    if (kind == 'c')
        return to_complex(obj, dtype, out);
    if (kind == 'b')
        return to_bool(obj, out);
    return to_integer(obj, dtype, kind, out);
}

PyObject *tack_py_numpy_asarray(PyObject *obj, PyObject *dtype, const char *kwformat, ...)
{
    PyObject *np = tack_py_numpy();
    PyObject *fn = np ? PyObject_GetAttrString(np, "asarray") : NULL;
    PyObject *args = fn ? PyTuple_Pack(2, obj, dtype ? dtype : Py_None) : NULL;
    va_list ap;
    va_start(ap, kwformat);
    PyObject *kw = args ? Py_VaBuildValue(kwformat, ap) : NULL;
    va_end(ap);
    PyObject *r = kw ? PyObject_Call(fn, args, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_XDECREF(fn);
    return r;
}

int tack_py_is_ndarray(PyObject *obj)
{
    PyObject *np = tack_py_numpy();
    PyObject *ndarray = np ? PyObject_GetAttrString(np, "ndarray") : NULL;
    int r = ndarray ? PyObject_IsInstance(obj, ndarray) : -1;
    Py_XDECREF(ndarray);
    return r;
}

/* A C-contiguous NumPy array of obj (with dtype, if given); new reference.
 * asarray(order="C") keeps 0-d shapes, which ascontiguousarray does not. */
PyObject *tack_py_as_numpy(PyObject *obj, PyObject *dtype)
{
    return tack_py_numpy_asarray(obj, dtype, "{s:s}", "order", "C");
}

int tack_py_lookup_optional(PyObject *obj, PyObject *name, PyObject **out)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyObject_GetOptionalAttr(obj, name, out);
#else
    return _PyObject_LookupAttr(obj, name, out);
#endif
}

int tack_py_address(PyObject *obj, const char *what, uint64_t *out)
{
    /* True is 1 to int(), never an address: a flag passed by mistake. */
    if (PyBool_Check(obj) || !PyIndex_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s is a %s, not an int or an integer-like object (numpy.uint64, anything with __index__): "
                     "an address is an integer in [0, 2**64)",
                     what, Py_TYPE(obj)->tp_name);
        return 0;
    }
    PyObject *idx = PyNumber_Index(obj);
    if (!idx)
        return 0;
    unsigned long long v = PyLong_AsUnsignedLongLong(idx);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s %R is not an address: it must be an integer in [0, 2**64)", what, idx);
        Py_DECREF(idx);
        return 0;
    }
    Py_DECREF(idx);
    *out = v;
    return 1;
}
