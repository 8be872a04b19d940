/* tack.DType: one object per dtype (tack.f32 ...), comparable with names and NumPy dtypes. */
#include "ext.h"

#include <stdio.h>
#include <string.h>

static TackDTypeObject dtype_objects[TACK_NDTYPES];

PyObject *tack_py_dtype_object(tack_dtype d) { return (PyObject *)&dtype_objects[d]; }

/* Resolves anything that names a dtype; -1 without an exception when it does not. */
static int lookup(PyObject *obj, tack_dtype *out)
{
    if (PyObject_TypeCheck(obj, &TackDType_Type)) {
        *out = ((TackDTypeObject *)obj)->dtype;
        return 0;
    }
    PyObject *name = NULL;
    if (PyUnicode_Check(obj)) {
        name = Py_NewRef(obj);
    } else if (!strcmp(Py_TYPE(obj)->tp_name, "torch.dtype")) {
        /* PyTorch's dtypes print as torch.<NumPy's name> (torch.bfloat16). */
        PyObject *text = PyObject_Str(obj);
        const char *t = text ? PyUnicode_AsUTF8(text) : NULL;
        if (t && !strncmp(t, "torch.", 6))
            name = PyUnicode_FromString(t + 6);
        Py_XDECREF(text);
        if (!name)
            PyErr_Clear();
    } else {
        /* NumPy dtypes and scalar types (np.float32, ml_dtypes.bfloat16), by name. */
        PyObject *np = tack_py_numpy();
        PyObject *npdt = np ? PyObject_CallMethod(np, "dtype", "O", obj) : NULL;
        if (npdt) {
            name = PyObject_GetAttrString(npdt, "name");
            Py_DECREF(npdt);
        }
        if (!name)
            PyErr_Clear();
    }
    if (!name)
        return -1;
    const char *s = PyUnicode_AsUTF8(name);
    int rc = -1;
    if (s && tack_dtype_from_name(s, out) == TACK_OK)
        rc = 0;
    PyErr_Clear();
    Py_DECREF(name);
    return rc;
}

static PyObject *numpy_dtypes[TACK_NDTYPES];

int tack_py_dtype_converter(PyObject *obj, void *out)
{
    if (Py_IS_TYPE(obj, &TackDType_Type)) {
        *(tack_dtype *)out = ((TackDTypeObject *)obj)->dtype;
        return 1;
    }
    /* An array's own dtype (a.dtype, a numpy.dtype), without asking NumPy. */
    for (int d = 0; d < TACK_NDTYPES; d++) {
        if (numpy_dtypes[d] == obj) {
            *(tack_dtype *)out = (tack_dtype)d;
            return 1;
        }
    }
    /* None is not passed to NumPy, which would read it as float64. */
    if (obj != Py_None && lookup(obj, out) == 0)
        return 1;
    /* The names from the dtype table, so that the message lists them all. */
    char names[256];
    size_t used = 0;
    names[0] = 0;
    for (int d = 0; d < TACK_NDTYPES && used < sizeof names; d++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", d ? ", " : "tack.",
                                 tack_dtype_short_name((tack_dtype)d));
    PyErr_Format(PyExc_TypeError, "unsupported dtype %R; use %s, their names (\"float32\") or the NumPy and PyTorch dtypes",
                 obj, names);
    return 0;
}

static PyObject *dtype_repr(PyObject *self)
{
    return PyUnicode_FromFormat("tack.%s", tack_dtype_short_name(((TackDTypeObject *)self)->dtype));
}

static PyObject *dtype_str(PyObject *self)
{
    return PyUnicode_FromString(tack_dtype_name(((TackDTypeObject *)self)->dtype));
}

/* The numpy.dtype a Tack dtype names, cached (new reference); NULL without
 * an exception when NumPy cannot express it here (no NumPy, or bfloat16
 * without ml_dtypes), NULL with one for any other failure. */
PyObject *tack_py_numpy_dtype_or_null(tack_dtype d)
{
    PyObject **cache = numpy_dtypes;
    if (cache[d])
        return Py_NewRef(cache[d]);
    PyObject *r = tack_py_numpy_dtype(d);
    if (!r) {
        if (PyErr_ExceptionMatches(PyExc_ImportError) || PyErr_ExceptionMatches(PyExc_TypeError))
            PyErr_Clear();
        return NULL;
    }
    cache[d] = Py_NewRef(r);
    return r;
}

/* The numpy.dtype's hash, so that a DType and the numpy.dtype it names
 * are one dictionary key. NumPy's hash varies from process to process
 * (it hashes bytes), so it is asked once and kept: a hash must not change
 * while the object lives, even if NumPy becomes importable later. Without
 * NumPy the name's hash stands in. */
static Py_hash_t dtype_hash(PyObject *self)
{
    static Py_hash_t hashes[TACK_NDTYPES];
    tack_dtype d = ((TackDTypeObject *)self)->dtype;
    if (hashes[d])
        return hashes[d];
    PyObject *key = tack_py_numpy_dtype_or_null(d);
    if (!key && PyErr_Occurred())
        return -1;
    if (!key && !(key = dtype_str(self)))
        return -1;
    Py_hash_t h = PyObject_Hash(key);
    Py_DECREF(key);
    if (h != -1)
        hashes[d] = h;
    return h;
}

static PyObject *dtype_richcompare(PyObject *self, PyObject *other, int op)
{
    tack_dtype self_dtype = ((TackDTypeObject *)self)->dtype;
    /* NumPy would read None as float64; no dtype equals None. */
    if (other == Py_None)
        Py_RETURN_NOTIMPLEMENTED;
    /* What names a Tack dtype (a DType, "float32", torch.float32) is
     * equal to it; anything else as the numpy.dtype it names: 'f4',
     * np.dtype('<f4') and the ordering by safe casting answer as NumPy's. */
    tack_dtype d;
    if ((op == Py_EQ || op == Py_NE) && lookup(other, &d) == 0)
        return PyBool_FromLong((d == self_dtype) == (op == Py_EQ));
    PyObject *np_dtype = PyObject_TypeCheck(other, &TackDType_Type) ? NULL : tack_py_numpy_dtype_or_null(self_dtype);
    if (np_dtype) {
        PyObject *r = PyObject_RichCompare(np_dtype, other, op);
        Py_DECREF(np_dtype);
        if (r || !PyErr_ExceptionMatches(PyExc_TypeError))
            return r;
        /* Something NumPy cannot read as a dtype is no dtype. */
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (PyErr_Occurred())
        return NULL;
    if (op != Py_EQ && op != Py_NE) {
        if (!PyObject_TypeCheck(other, &TackDType_Type))
            Py_RETURN_NOTIMPLEMENTED;
        PyObject *a = tack_py_numpy_dtype_or_null(self_dtype);
        PyObject *b = a ? tack_py_numpy_dtype_or_null(((TackDTypeObject *)other)->dtype) : NULL;
        PyObject *r = a && b ? PyObject_RichCompare(a, b, op) : NULL;
        Py_XDECREF(a);
        Py_XDECREF(b);
        if (r || PyErr_Occurred())
            return r;
        Py_RETURN_NOTIMPLEMENTED;
    }
    return PyBool_FromLong(op == Py_NE);
}

static PyObject *dtype_get_name(PyObject *self, void *c)
{
    (void)c;
    return dtype_str(self);
}

static PyObject *dtype_get_itemsize(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSize_t(tack_dtype_size(((TackDTypeObject *)self)->dtype));
}

static PyObject *dtype_get_kind(PyObject *self, void *c)
{
    (void)c;
    char kind = tack_dtype_kind(((TackDTypeObject *)self)->dtype);
    return PyUnicode_FromStringAndSize(&kind, 1);
}

static PyObject *dtype_get_numpy(PyObject *self, void *c)
{
    (void)c;
    return tack_py_numpy_dtype(((TackDTypeObject *)self)->dtype);
}

/* Pickled by reference, as the module attribute it is (tack.f32): an
 * unpickled dtype is the same singleton, and copy.copy returns it as is. */
static PyObject *dtype_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyUnicode_FromString(tack_dtype_short_name(((TackDTypeObject *)self)->dtype));
}

static PyGetSetDef dtype_getset[] = {
    {"name", dtype_get_name, NULL, "NumPy-style name, e.g. 'float32'", NULL},
    {"itemsize", dtype_get_itemsize, NULL, "bytes per element", NULL},
    {"kind", dtype_get_kind, NULL, "NumPy's kind letter: 'i', 'u', 'f', 'c', 'b' ('V' for bfloat16)", NULL},
    {"numpy", dtype_get_numpy, NULL,
     "the equivalent numpy.dtype (bfloat16: ml_dtypes' type, and without ml_dtypes a TypeError)", NULL},
    /* NumPy's dtype protocol: np.dtype(x) takes x.dtype when x has one, so
     * np.dtype(tack.f32) is float32, and so is every NumPy call given
     * dtype=tack.f32 (and dask, which asks np.dtype of an array's dtype). */
    {"dtype", dtype_get_numpy, NULL, "the equivalent numpy.dtype (NumPy's dtype protocol: np.dtype(tack.f32))",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef dtype_methods[] = {
    {"__reduce__", dtype_reduce, METH_NOARGS, "__reduce__($self, /)\n--\n\nPickles the dtype as tack.<name>."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject TackDType_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tack.DType",
    .tp_basicsize = sizeof(TackDTypeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An element type: tack.i8, u8, i16, u16, i32, u32, i64, u64, f32, f64, bool, f16, bf16, c64, c128.",
    .tp_repr = dtype_repr,
    .tp_str = dtype_str,
    .tp_hash = dtype_hash,
    .tp_richcompare = dtype_richcompare,
    .tp_getset = dtype_getset,
    .tp_methods = dtype_methods,
};

int tack_py_dtype_init(PyObject *m)
{
    if (PyType_Ready(&TackDType_Type) < 0 || PyModule_AddObjectRef(m, "DType", (PyObject *)&TackDType_Type) < 0)
        return -1;
    for (int d = 0; d < TACK_NDTYPES; d++) {
        /* Static singletons: immortal for the life of the process. */
        PyObject *o = (PyObject *)&dtype_objects[d];
        Py_SET_TYPE(o, &TackDType_Type);
        Py_SET_REFCNT(o, 1);
        dtype_objects[d].dtype = (tack_dtype)d;
        if (PyModule_AddObjectRef(m, tack_dtype_short_name((tack_dtype)d), o) < 0)
            return -1;
    }
    return 0;
}
