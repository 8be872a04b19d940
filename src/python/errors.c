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
    [TACK_EINDEX] = {&PyExc_IndexError, "IndexError"},
};

static unsigned row(tack_status status)
{
    unsigned i = (unsigned)status;
    return i < sizeof exceptions / sizeof *exceptions && exceptions[i].type ? i : (unsigned)TACK_ERUNTIME;
}

const char *tack_py_status_kind(tack_status status) { return exceptions[row(status)].name; }

/* The C calls whose Python spelling differs, the one place that knows it.
 * A C message begins with the public function the caller called
 * ("tack_array_reshape: ..."); a Python user called something else, so the
 * message is shown as "Array.reshape (tack_array_reshape): ...". A C call
 * several Python functions reach is named by the one that exposes it most
 * directly. A call without a row keeps its C name alone. */
static const struct call_name {
    const char *c;
    const char *python;
} call_names[] = {
    {"tack_array_empty", "tack.empty"},
    {"tack_array_wrap", "tack.array_from_ptr"},
    {"tack_array_reshape", "Array.reshape"},
    {"tack_array_to_device", "Array.to_device"},
    {"tack_array_copy_to_host", "Array.to_numpy"},
    {"tack_array_copy_from_host", "Array.from_numpy"},
    {"tack_array_fill", "Array.fill"},
    {"tack_array_export_memory", "Array.export_memory"},
    {"tack_array_import_memory", "tack.import_memory"},
    {"tack_array_send_wait", "tack.send_array"},
    {"tack_array_receive_wait", "tack.receive_array"},
    {"tack_array_to_dlpack", "Array.__dlpack__"},
    {"tack_array_to_dlpack_versioned", "Array.__dlpack__"},
    {"tack_array_to_dlpack_stream", "Array.__dlpack__"},
    {"tack_array_to_dlpack_versioned_stream", "Array.__dlpack__"},
    {"tack_array_from_dlpack", "tack.from_dlpack"},
    {"tack_array_from_dlpack_versioned", "tack.from_dlpack"},
    {"tack_import_array", "tack.asarray"},
    {"tack_dtype_from_typestr", "tack.asarray"},
    {"tack_dtype_from_format", "tack.asarray"},
    {"tack_device_open", "tack.device"},
    {"tack_device_check_options", "tack.device"},
    {"tack_array_check_shape", "Array.__reduce_ex__"},
    {"tack_device_synchronize", "Device.synchronize"},
    {"tack_memory_space", "tack.memory_space"},
    {"tack_kernel_create", "tack.Kernel"},
    {"tack_kernel_create_with", "tack.Kernel"},
    {"tack_kernel_build", "Kernel.build"},
    {"tack_kernel_launch", "Kernel.launch"},
    {"tack_kernel_launch_nd", "Kernel.launch"},
    {"tack_kernel_launch_hooked", "Kernel.launch"},
    {"tack_kernel_call", "Kernel.__call__"},
    {"tack_kernel_call_hooked", "Kernel.__call__"},
    {"tack_kernel_target", "Kernel.target"},
    {"tack_kernel_ptx", "Kernel.ptx"},
    {"tack_kernel_generated_source", "Kernel.generated_source"},
};

/* The row of the C call `text` begins with ("name: "); NULL when the text
 * names no call of the table. */
static const struct call_name *named_call(const char *text)
{
    size_t n = strspn(text, "abcdefghijklmnopqrstuvwxyz0123456789_");
    if (strncmp(text, "tack_", 5) || text[n] != ':')
        return NULL;
    for (size_t i = 0; i < sizeof call_names / sizeof *call_names; i++)
        if (strlen(call_names[i].c) == n && !strncmp(text, call_names[i].c, n))
            return &call_names[i];
    return NULL;
}

static PyObject *decode(const char *text, size_t len)
{
    /* A message may hold bytes that are not UTF-8 (a compiler's log of a
     * Latin-1 source, a character cut by a bound): they are shown escaped,
     * so the status's own exception is raised, never a UnicodeDecodeError. */
    return PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "backslashreplace");
}

PyObject *tack_py_message(const char *text)
{
    const struct call_name *call = named_call(text);
    if (!call)
        return decode(text, strlen(text));
    const char *after = text + strlen(call->c);
    PyObject *rest = decode(after, strlen(after));
    if (!rest)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("%s (%s)%U", call->python, call->c, rest);
    Py_DECREF(rest);
    return r;
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
