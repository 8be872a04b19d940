/* tack.Array's element access, which it refuses, saying what to use
 * instead, and its comparisons and hash. */
#include "array_type.h"

/* Why a Tack array takes no index, and what to use instead: NumPy over a
 * view of a host array's memory, a host copy of a device array. */
static void refuse_elements(PyObject *self, const char *what)
{
    tack_array *a = ARR(self);
    if (is_host(a))
        PyErr_Format(PyExc_TypeError,
                     "%s: Tack arrays have no indexing or slicing of their own; use NumPy's over a view of this "
                     "host array's memory, np.asarray(a)[0], float(np.asarray(a)[0]), list(np.asarray(a)) "
                     "(a[...] with slices alone gives such a NumPy view, as dask reads blocks)",
                     what);
    else
        PyErr_Format(PyExc_TypeError,
                     "%s: Tack arrays have no indexing or slicing, and this %s array is device memory; copy it to "
                     "the host with a.to_numpy() and index that, or share it with a library that indexes device "
                     "arrays through DLPack (torch.from_dlpack(a), cupy.from_dlpack(a))",
                     what, tack_device_name(tack_array_device(a)));
}

/* Slices and Ellipsis alone select a block that NumPy returns as a view
 * of the memory: what dask.array.from_array asks of an array. Integers,
 * None, masks and index arrays are element indexing, which Tack does not
 * offer under another name. */
static int is_block_key(PyObject *key)
{
    if (PySlice_Check(key) || key == Py_Ellipsis)
        return 1;
    if (!PyTuple_Check(key))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key); i++) {
        PyObject *k = PyTuple_GET_ITEM(key, i);
        if (!PySlice_Check(k) && k != Py_Ellipsis)
            return 0;
    }
    return 1;
}

static PyObject *array_subscript(PyObject *self, PyObject *key)
{
    if (!is_host(ARR(self)) || !is_block_key(key)) {
        refuse_elements(self, "tack.Array indices");
        return NULL;
    }
    PyObject *np = tack_py_numpy();
    PyObject *view = np ? PyObject_CallMethod(np, "asarray", "O", self) : NULL;
    if (!view)
        return NULL;
    /* An empty tuple selects the whole array; NumPy would give a 0-d
     * array's element as a scalar copy. */
    PyObject *r = PyTuple_Check(key) && PyTuple_GET_SIZE(key) == 0 ? Py_NewRef(view) : PyObject_GetItem(view, key);
    Py_DECREF(view);
    return r;
}

/* The mirror of the block reads: a[1:3] = 0 and a[...] = other write
 * through a NumPy view of a host array's memory (dask.array.store writes
 * its blocks so). A read-only array refuses as its other host writes do. */
static int array_ass_subscript(PyObject *self, PyObject *key, PyObject *value)
{
    tack_array *a = ARR(self);
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "tack.Array elements cannot be deleted");
        return -1;
    }
    if (!is_host(a)) {
        PyErr_Format(PyExc_TypeError,
                     "slice assignment to a %s array: its memory is device memory, which Tack does not write "
                     "element by element from the host; write the whole array with a.from_numpy(x) or "
                     "a.fill(v), run a kernel over it, or write through a library that indexes device arrays "
                     "(torch.from_dlpack(a)[1:3] = 0)",
                     tack_device_name(tack_array_device(a)));
        return -1;
    }
    if (!is_block_key(key)) {
        refuse_elements(self, "tack.Array item assignment (slices and ... assign: a[1:3] = 0, a[...] = x)");
        return -1;
    }
    if (!tack_array_writable(a))
        return tack_py_fail(tack_array_copy_from_host(a, NULL, 0));
    PyObject *np = tack_py_numpy();
    PyObject *view = np ? PyObject_CallMethod(np, "asarray", "O", self) : NULL;
    if (!view)
        return -1;
    int r = PyObject_SetItem(view, key, value);
    Py_DECREF(view);
    return r;
}

PyObject *tack_py_array_iter(PyObject *self)
{
    refuse_elements(self, "iteration over a tack.Array");
    return NULL;
}

/* `x in a` would otherwise iterate, and Python replaces the iterator's
 * TypeError with a bare "not iterable". */
static int array_contains(PyObject *self, PyObject *value)
{
    (void)value;
    refuse_elements(self, "`in` (iteration over a tack.Array)");
    return -1;
}

static PyObject *array_int(PyObject *self)
{
    refuse_elements(self, "int() of a tack.Array");
    return NULL;
}

static PyObject *array_float(PyObject *self)
{
    refuse_elements(self, "float() of a tack.Array");
    return NULL;
}

/* Truth-testing is element access too: NumPy's and PyTorch's bool() read
 * a one-element array's value (and refuse larger ones), so answering by
 * length, as a sequence would, gives the opposite of what their users
 * expect for tack.zeros(1), and reading the value would be the element
 * access Tack leaves to NumPy. Refused, saying what each question is. */
static int array_bool(PyObject *self)
{
    tack_array *a = ARR(self);
    if (is_host(a))
        PyErr_SetString(PyExc_TypeError,
                        "the truth value of a tack.Array is not defined: Tack arrays have no element access of "
                        "their own. For its value, as NumPy gives it, use bool(np.asarray(a)) (a view of this "
                        "host array's memory); to ask whether it is empty, a.size == 0; whether there is an "
                        "array, a is not None");
    else
        PyErr_Format(PyExc_TypeError,
                     "the truth value of a tack.Array is not defined: Tack arrays have no element access of their "
                     "own, and this %s array is device memory. For its value, copy it to the host with "
                     "bool(a.to_numpy()); to ask whether it is empty, a.size == 0; whether there is an array, a "
                     "is not None",
                     tack_device_name(tack_array_device(a)));
    return -1;
}

/* == and != would read as elementwise comparisons to NumPy's users, and
 * as identity to Python's: refused, as bool(a) is, against anything that
 * could be such a comparison (another array, a number, an array-like).
 * Identity is `a is b`. Against other objects (None, a string) Python's
 * identity default answers. */
static int compares_elementwise(PyObject *other)
{
    if (PyObject_TypeCheck(other, &TackArray_Type) || PyIndex_Check(other) || PyFloat_Check(other) ||
        PyComplex_Check(other) || PyNumber_Check(other))
        return 1;
    static const char *const protocols[] = {"__array_interface__", "__array__", "__dlpack__",
                                            "__cuda_array_interface__"};
    for (size_t i = 0; i < sizeof protocols / sizeof *protocols; i++) {
        PyObject *found = NULL, *name = PyUnicode_InternFromString(protocols[i]);
        int r = name ? tack_py_lookup_optional((PyObject *)Py_TYPE(other), name, &found) : -1;
        Py_XDECREF(name);
        Py_XDECREF(found);
        if (r != 0)
            return r;
    }
    return 0;
}

PyObject *tack_py_array_richcompare(PyObject *self, PyObject *other, int op)
{
    if (op != Py_EQ && op != Py_NE)
        Py_RETURN_NOTIMPLEMENTED;
    /* An array is itself: weak references compare their referents with ==
     * (a WeakKeyDictionary keyed by arrays looks keys up so), as do
     * containers after their identity check. */
    if (self == other)
        return PyBool_FromLong(op == Py_EQ);
    int elementwise = compares_elementwise(other);
    if (elementwise < 0)
        return NULL;
    if (!elementwise)
        Py_RETURN_NOTIMPLEMENTED;
    const char *sign = op == Py_EQ ? "==" : "!=";
    if (is_host(ARR(self)))
        PyErr_Format(PyExc_TypeError,
                     "%s between tack.Arrays is not defined: Tack arrays have no element access of their own. "
                     "For NumPy's elementwise comparison, compare np.asarray(a) %s np.asarray(b) (views of host "
                     "memory), or np.array_equal(np.asarray(a), np.asarray(b)); whether two names are one "
                     "array, a is b",
                     sign, sign);
    else
        PyErr_Format(PyExc_TypeError,
                     "%s between tack.Arrays is not defined: Tack arrays have no element access of their own, and "
                     "this %s array is device memory. Compare host copies, a.to_numpy() %s b.to_numpy() (NumPy's "
                     "np.asarray(a) for host arrays), or compare on the device through DLPack "
                     "(torch.from_dlpack(a) %s torch.from_dlpack(b)); whether two names are one array, a is b",
                     sign, tack_device_name(tack_array_device(ARR(self))), sign, sign);
    return NULL;
}

/* Hashable by identity, as before == was refused: arrays are keys of
 * sets, weak dictionaries and caches (dask's tokens), and equality never
 * holds between two arrays, so identity is the whole of it. The value is
 * object.__hash__'s. */
Py_hash_t tack_py_array_hash(PyObject *self)
{
    return PyBaseObject_Type.tp_hash(self);
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

PyMappingMethods tack_py_array_as_mapping = {
    .mp_subscript = array_subscript,
    .mp_ass_subscript = array_ass_subscript,
};

PyNumberMethods tack_py_array_as_number = {
    .nb_bool = array_bool,
    .nb_int = array_int,
    .nb_float = array_float,
};

PySequenceMethods tack_py_array_as_sequence = {
    .sq_length = array_length,
    .sq_contains = array_contains,
};

