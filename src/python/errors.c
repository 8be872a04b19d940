/* The one mapping from Tack's statuses to Python's exceptions. */
#include "ext.h"

#include <string.h>

/* By status: the exception raised, and its name for the DLPack exchange
 * table's SetError, which reports to C code that may hold no Python state.
 * A status without a row is a RuntimeError. */
static const struct {
    PyObject **type;
    const char *name;
} exceptions[] = {
    [TACK_EVALUE] = {&PyExc_ValueError, "ValueError"},
    [TACK_ETYPE] = {&PyExc_TypeError, "TypeError"},
    [TACK_ERUNTIME] = {&PyExc_RuntimeError, "RuntimeError"},
    [TACK_EBUFFER] = {&PyExc_BufferError, "BufferError"},
    [TACK_ENOMEM] = {&PyExc_MemoryError, "MemoryError"},
    [TACK_ENODEVICE] = {&PyExc_RuntimeError, "RuntimeError"},
    [TACK_ECOMPILE] = {&PyExc_RuntimeError, "RuntimeError"},
    [TACK_ETIMEOUT] = {&PyExc_TimeoutError, "TimeoutError"},
    [TACK_EIO] = {&PyExc_RuntimeError, "RuntimeError"},
};

static unsigned row(tack_status status)
{
    unsigned i = (unsigned)status;
    return i < sizeof exceptions / sizeof *exceptions && exceptions[i].type ? i : (unsigned)TACK_ERUNTIME;
}

const char *tack_py_status_kind(tack_status status) { return exceptions[row(status)].name; }

PyObject *tack_py_message(const char *text)
{
    /* A message may hold bytes that are not UTF-8 (a compiler's log of a
     * Latin-1 source, a character cut by a bound): they are shown escaped,
     * so the status's own exception is raised, never a UnicodeDecodeError. */
    return PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "backslashreplace");
}

PyObject *tack_py_raise_message(PyObject *type, const char *text)
{
    PyObject *message = tack_py_message(text);
    if (message) {
        PyErr_SetObject(type, message);
        Py_DECREF(message);
    }
    return NULL;
}

PyObject *tack_py_raise(tack_status status)
{
    return tack_py_raise_message(*exceptions[row(status)].type, tack_last_error());
}

int tack_py_fail(tack_status status)
{
    tack_py_raise(status);
    return -1;
}

int tack_py_exception_must_propagate(void)
{
    return !PyErr_ExceptionMatches(PyExc_Exception) || PyErr_ExceptionMatches(PyExc_MemoryError);
}
