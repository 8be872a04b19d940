/* Kernel(..., checked=, defines=, include_dirs=, options=) read into a
 * tack_kernel_options, whose checks and copies are the C layer's
 * (tack_kernel_create_with): only what Python spells differently (a dict
 * of definitions, os.PathLike directories) is read here. */
#include "../ext.h" /* Python.h first: it sets the feature macros the C headers read */

#include <string.h>

#include "kernel.h"

/* One word of a build option as UTF-8 that `keep` holds alive: a str, or
 * for include_dirs a path. NULL with TypeError or ValueError naming it. */
static const char *option_word(PyObject *item, const char *what, PyObject *keep)
{
    PyObject *text = NULL;
    if (!strcmp(what, "include_dirs")) {
        PyObject *path = PyOS_FSPath(item);
        if (path && !PyUnicode_Check(path)) {
            Py_SETREF(path, NULL);
            PyErr_Format(PyExc_TypeError, "Kernel: include_dirs takes str or os.PathLike paths, not %.80s",
                         Py_TYPE(item)->tp_name);
        }
        text = path;
    } else if (PyUnicode_Check(item)) {
        text = Py_NewRef(item);
    } else {
        PyErr_Format(PyExc_TypeError, "Kernel: %s takes strings, not %.80s", what, Py_TYPE(item)->tp_name);
    }
    if (!text)
        return NULL;
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &len);
    int kept = utf8 && PyList_Append(keep, text) == 0;
    Py_DECREF(text);
    if (!kept)
        return NULL;
    if ((size_t)len != strlen(utf8)) {
        PyErr_Format(PyExc_ValueError, "Kernel: a %s entry holds a NUL character", what);
        return NULL;
    }
    return utf8;
}

/* A definitions mapping's item as "NAME" (value None), "NAME=1"/"NAME=0"
 * (a bool, as C reads one) or "NAME=<str(value)>" (a str or number). */
static PyObject *define_text(PyObject *pair)
{
    PyObject *name = PyTuple_GET_ITEM(pair, 0), *value = PyTuple_GET_ITEM(pair, 1);
    if (!PyUnicode_Check(name))
        return PyErr_Format(PyExc_TypeError, "Kernel: defines' names are str, not %.80s", Py_TYPE(name)->tp_name);
    if (value == Py_None)
        return Py_NewRef(name);
    if (PyBool_Check(value))
        return PyUnicode_FromFormat("%U=%d", name, value == Py_True);
    if (!PyUnicode_Check(value) && !PyLong_Check(value) && !PyFloat_Check(value))
        return PyErr_Format(PyExc_TypeError, "Kernel: the value of define %R is %.80s; give a str, int, float, bool or None",
                            name, Py_TYPE(value)->tp_name);
    return PyUnicode_FromFormat("%U=%S", name, value);
}

/* The words of one option list (None: none) into *out (PyMem), held by
 * `keep`. A mapping of definitions is read as define_text says. -1 with an
 * exception. */
static int option_list(PyObject *obj, const char *what, PyObject *keep, const char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (obj == Py_None)
        return 0;
    int mapping = !strcmp(what, "defines") && PyDict_Check(obj);
    if (PyUnicode_Check(obj) || PyBytes_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "Kernel: %s takes a list of strings, not one string; wrap it: [%R]", what, obj);
        return -1;
    }
    /* A snapshot, so that the list cannot change while it is read. */
    PyObject *items = mapping ? PyDict_Items(obj) : PySequence_Tuple(obj);
    if (!items)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(items);
    const char **words = len ? PyMem_Calloc((size_t)len, sizeof *words) : NULL;
    if (len && !words) {
        Py_DECREF(items);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(items, i);
        PyObject *text = mapping ? define_text(item) : Py_NewRef(item);
        words[i] = text ? option_word(text, what, keep) : NULL;
        Py_XDECREF(text);
        if (!words[i]) {
            PyMem_Free(words);
            Py_DECREF(items);
            return -1;
        }
    }
    Py_DECREF(items);
    *out = words;
    *n = (size_t)len;
    return 0;
}

/* Kernel(..., checked=, defines=, include_dirs=, options=) as a
 * tack_kernel_options whose strings `keep` holds; free with
 * kernel_options_free. -1 with an exception. */
int tack_py_kernel_options(PyObject *checked, PyObject *defines, PyObject *include_dirs, PyObject *options,
                          PyObject *keep, tack_kernel_options *out)
{
    memset(out, 0, sizeof *out);
    int on = PyObject_IsTrue(checked);
    if (on < 0)
        return -1;
    out->checked = on;
    const char **d = NULL, **i = NULL, **o = NULL;
    if (option_list(defines, "defines", keep, &d, &out->ndefines) < 0 ||
        option_list(include_dirs, "include_dirs", keep, &i, &out->ninclude_dirs) < 0 ||
        option_list(options, "options", keep, &o, &out->noptions) < 0) {
        PyMem_Free(d);
        PyMem_Free(i);
        return -1;
    }
    out->defines = d;
    out->include_dirs = i;
    out->options = o;
    return 0;
}

void tack_py_kernel_options_free(tack_kernel_options *o)
{
    PyMem_Free((void *)o->defines);
    PyMem_Free((void *)o->include_dirs);
    PyMem_Free((void *)o->options);
}

