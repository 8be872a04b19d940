/* Cross-process arrays: tack.import_memory, tack.send_array and
 * tack.receive_array, over the C API's tack_array_import_memory,
 * tack_array_send and tack_array_receive (src/core/ipc.c). */
#include "ext.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

static void release_buffer(PyObject *capsule)
{
    tack_buffer_release(PyCapsule_GetPointer(capsule, "tack.buffer"));
}

/* The record's fields are plain values; its hidden `owner` holds a
 * reference to the buffer, since the buffer closes its descriptor when it
 * goes and the next open() would take the number: a record that outlived
 * the array would name another file. */
PyObject *tack_py_export_memory(PyObject *array)
{
    tack_array *a = TACK_PY_ARRAY(array);
    tack_exported_memory rec;
    tack_status st = tack_array_export_memory(a, &rec);
    if (st != TACK_OK)
        return tack_py_raise(st);
    PyObject *r = PyStructSequence_New(TackExportedMemory_Type);
    if (!r)
        return NULL;
    tack_buffer *b = tack_buffer_retain(tack_array_buffer(a));
    PyObject *owner = PyCapsule_New(b, "tack.buffer", release_buffer);
    if (!owner)
        tack_buffer_release(b);
    PyObject *vals[7] = {
        PyUnicode_FromString(rec.backend),
        PyLong_FromSize_t(rec.size),
        PyLong_FromSize_t(rec.allocation_size),
        PyLong_FromLongLong(rec.handle),
        PyUnicode_FromString(rec.handle_type),
        PyBytes_FromStringAndSize((const char *)rec.device_uuid, sizeof rec.device_uuid),
        owner,
    };
    for (int i = 0; i < 7; i++) {
        if (!vals[i]) {
            for (int j = i; j < 7; j++)
                Py_XDECREF(vals[j]);
            Py_DECREF(r);
            return NULL;
        }
        PyStructSequence_SET_ITEM(r, i, vals[i]);
    }
    return r;
}

/* device=None means the device the record names, not the default device:
 * the memory lives where it was exported. NULL device then. */
static int optional_device(PyObject *obj, tack_device **out)
{
    *out = NULL;
    if (!obj || obj == Py_None)
        return 1;
    return tack_py_device_converter(obj, out);
}

/* ExportedMemory, or any 6-sequence of its fields, as the C record. */
static int parse_record(PyObject *obj, tack_exported_memory *e)
{
    /* A tuple of its own: a field's __repr__ (in a message) may change a
     * list while its items are still to be read. */
    if (!PySequence_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "exported must be a tack.ExportedMemory (from Array.export_memory()), not %s",
                     Py_TYPE(obj)->tp_name);
        return 0;
    }
    PyObject *seq = PySequence_Tuple(obj);
    if (!seq)
        return 0;
    int ok = 0;
    if (PyTuple_GET_SIZE(seq) != 6) {
        PyErr_Format(PyExc_TypeError,
                     "exported must be a tack.ExportedMemory: (backend, size, allocation_size, handle, handle_type, "
                     "device_uuid), not a sequence of %zd items",
                     PyTuple_GET_SIZE(seq));
        goto done;
    }
    PyObject **f = &PyTuple_GET_ITEM(seq, 0);
    memset(e, 0, sizeof *e);
    const char *names[2] = {"backend", "handle_type"};
    PyObject *strs[2] = {f[0], f[4]};
    char *dsts[2] = {e->backend, e->handle_type};
    for (int i = 0; i < 2; i++) {
        if (!PyUnicode_Check(strs[i])) {
            PyErr_Format(PyExc_TypeError, "exported.%s must be a str, not %s", names[i], Py_TYPE(strs[i])->tp_name);
            goto done;
        }
        Py_ssize_t len;
        const char *s = PyUnicode_AsUTF8AndSize(strs[i], &len);
        if (!s)
            goto done;
        if (len >= 16 || (Py_ssize_t)strlen(s) != len) {
            PyErr_Format(PyExc_ValueError, "exported.%s %R is no backend or handle type Tack knows", names[i],
                         strs[i]);
            goto done;
        }
        memcpy(dsts[i], s, (size_t)len);
    }
    PyObject *ints[3] = {f[1], f[2], f[3]};
    const char *int_names[3] = {"size", "allocation_size", "handle"};
    long long vals[3];
    for (int i = 0; i < 3; i++) {
        if (!PyLong_Check(ints[i]) || PyBool_Check(ints[i])) {
            PyErr_Format(PyExc_TypeError, "exported.%s must be an int, not %s", int_names[i],
                         Py_TYPE(ints[i])->tp_name);
            goto done;
        }
        vals[i] = PyLong_AsLongLong(ints[i]);
        if (vals[i] == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "exported.%s %R is out of range", int_names[i], ints[i]);
            goto done;
        }
        if (i < 2 && vals[i] < 0) {
            PyErr_Format(PyExc_ValueError, "exported.%s must be >= 0, not %lld", int_names[i], vals[i]);
            goto done;
        }
    }
    if (!PyBytes_Check(f[5]) || PyBytes_GET_SIZE(f[5]) != 16) {
        PyErr_Format(PyExc_TypeError, "exported.device_uuid must be 16 bytes, not %R", f[5]);
        goto done;
    }
    memcpy(e->device_uuid, PyBytes_AS_STRING(f[5]), 16);
    e->size = (size_t)vals[0];
    e->allocation_size = (size_t)vals[1];
    e->handle = vals[2];
    ok = 1;
done:
    Py_DECREF(seq);
    return ok;
}

static PyObject *py_import_memory(PyObject *m, PyObject *args, PyObject *kwargs)
{
    (void)m;
    static char *kwlist[] = {"exported", "dtype", "shape", "device", NULL};
    PyObject *exported, *dtype_obj, *shape_obj, *device_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|$O:import_memory", kwlist, &exported, &dtype_obj, &shape_obj,
                                     &device_obj))
        return NULL;
    tack_exported_memory e;
    tack_dtype dtype;
    int ndim;
    int64_t shape[TACK_MAX_NDIM];
    tack_device *device;
    if (!parse_record(exported, &e) || !tack_py_dtype_converter(dtype_obj, &dtype) ||
        !tack_py_parse_shape(shape_obj, &ndim, shape) || tack_py_multiprocessing_register() < 0 ||
        !optional_device(device_obj, &device))
        return NULL;
    tack_array *a;
    tack_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tack_array_import_memory(device, &e, dtype, ndim, shape, &a);
    Py_END_ALLOW_THREADS
    tack_device_release(device);
    if (st != TACK_OK)
        return tack_py_raise(st);
    return tack_py_array_new(a);
}

/* A socket object's descriptor and timeout in milliseconds (< 0: none), or
 * an int descriptor (no timeout). */
static int socket_fd(PyObject *obj, int *fd, int64_t *timeout_ms)
{
    *timeout_ms = -1;
    if (PyLong_Check(obj)) {
        if (PyBool_Check(obj)) {
            PyErr_SetString(PyExc_TypeError, "a socket or a file descriptor is needed, not a bool");
            return 0;
        }
        long v = PyLong_AsLong(obj);
        if (v == -1 && PyErr_Occurred())
            return 0;
        if (v < 0 || v > INT_MAX) {
            PyErr_Format(PyExc_ValueError, "file descriptor %ld is out of range", v);
            return 0;
        }
        *fd = (int)v;
        return 1;
    }
    PyObject *r = PyObject_CallMethod(obj, "fileno", NULL);
    if (!r) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "a socket or a file descriptor is needed, not %s", Py_TYPE(obj)->tp_name);
        }
        return 0;
    }
    /* Only -1 means closed (socket.socket's answer); anything else that is
     * no descriptor is the object's fault, and said so. */
    if (!PyLong_Check(r) || PyBool_Check(r)) {
        PyErr_Format(PyExc_TypeError, "%s.fileno() returned a %s, not an int file descriptor", Py_TYPE(obj)->tp_name,
                     Py_TYPE(r)->tp_name);
        Py_DECREF(r);
        return 0;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(r, &overflow);
    if (overflow || v < -1 || v > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "%s.fileno() returned %R, which is not a file descriptor (0 to %d)",
                     Py_TYPE(obj)->tp_name, r, INT_MAX);
        Py_DECREF(r);
        return 0;
    }
    Py_DECREF(r);
    if (v == -1) {
        PyErr_SetString(PyExc_ValueError, "the socket is closed (fileno() is -1)");
        return 0;
    }
    *fd = (int)v;
    /* socket.socket: its timeout holds for the whole message, as it holds
     * for each of its own send and recv calls. */
    PyObject *gettimeout = NULL, *name = PyUnicode_FromString("gettimeout");
    int found = name ? tack_py_lookup_optional(obj, name, &gettimeout) : -1;
    Py_XDECREF(name);
    if (found < 0)
        return 0;
    if (found) {
        PyObject *t = PyObject_CallNoArgs(gettimeout);
        Py_DECREF(gettimeout);
        if (!t)
            return 0;
        if (t != Py_None) {
            double seconds = PyFloat_AsDouble(t);
            Py_DECREF(t);
            if (seconds == -1 && PyErr_Occurred())
                return 0;
            if (!(seconds >= 0)) {
                PyErr_SetString(PyExc_ValueError, "the socket's timeout is negative or not a number");
                return 0;
            }
            /* Rounded up, as socket's own waits round: never early. */
            double ms = ceil(seconds * 1000);
            *timeout_ms = ms > 9.0e15 ? (int64_t)9.0e15 : (int64_t)ms;
        } else {
            Py_DECREF(t);
        }
    }
    return 1;
}

/* A send or receive run with the GIL released (tack_py_release): a signal
 * that interrupts its wait runs the Python handlers. */
struct blocking_call {
    tack_py_released gil;
    tack_ipc_wait wait;
};

static void blocking_call_start(struct blocking_call *c, int64_t timeout_ms)
{
    memset(c, 0, sizeof *c);
    c->wait.timeout_ms = timeout_ms;
    c->wait.interrupted = tack_py_signals_raised;
    c->wait.context = &c->gil;
    tack_py_release(&c->gil);
}

/* The exception for a failed send or receive: what socket.send and
 * socket.recv raise for the same condition (TimeoutError, BlockingIOError,
 * the signal handler's exception, OSError with the errno), else the
 * status's. */
static PyObject *raise_call(tack_status st, const struct blocking_call *c)
{
    int err = c->wait.os_error;
    if (err == EINTR && PyErr_Occurred())
        return NULL;
    if (err == ETIMEDOUT) {
        return tack_py_raise_message(PyExc_TimeoutError, tack_last_error());
    }
    if (err) {
        PyObject *args = Py_BuildValue("(iN)", err, tack_py_message(tack_last_error()));
        if (args) {
            PyErr_SetObject(PyExc_OSError, args);
            Py_DECREF(args);
        }
        return NULL;
    }
    return tack_py_raise(st);
}

static PyObject *py_send_array(PyObject *m, PyObject *args, PyObject *kwargs)
{
    (void)m;
    static char *kwlist[] = {"sock", "array", NULL};
    PyObject *sock, *array;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!:send_array", kwlist, &sock, &TackArray_Type, &array))
        return NULL;
    int fd;
    int64_t timeout_ms;
    if (!socket_fd(sock, &fd, &timeout_ms))
        return NULL;
    struct blocking_call c;
    blocking_call_start(&c, timeout_ms);
    tack_status st = tack_array_send_wait(fd, TACK_PY_ARRAY(array), &c.wait);
    tack_py_reacquire(&c.gil);
    if (st != TACK_OK)
        return raise_call(st, &c);
    Py_RETURN_NONE;
}

static PyObject *py_receive_array(PyObject *m, PyObject *args, PyObject *kwargs)
{
    (void)m;
    static char *kwlist[] = {"sock", "device", NULL};
    PyObject *sock, *device_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$O:receive_array", kwlist, &sock, &device_obj))
        return NULL;
    int fd;
    int64_t timeout_ms;
    tack_device *device;
    if (!socket_fd(sock, &fd, &timeout_ms) || tack_py_multiprocessing_register() < 0 ||
        !optional_device(device_obj, &device))
        return NULL;
    tack_array *a = NULL;
    struct blocking_call c;
    blocking_call_start(&c, timeout_ms);
    tack_status st = tack_array_receive_wait(fd, device, &c.wait, &a);
    tack_py_reacquire(&c.gil);
    tack_device_release(device);
    if (st != TACK_OK)
        return raise_call(st, &c);
    return tack_py_array_new(a);
}

/* ---------------------------------------------------- multiprocessing */

static PyObject *reduction_module, *reducer_function, *rebuild_shared_function;

/* multiprocessing's reducer for tack.Array (registered with its
 * ForkingPickler, which Queue, Pipe and a spawned Process's arguments
 * pickle with): a writable host array whose memory has an OS handle (made
 * with exportable=True, or mapped from one) travels as its descriptor, as
 * torch.multiprocessing passes a tensor's, so that both processes use the
 * same memory. The descriptor goes through multiprocessing's own resource
 * sharing (reduction.DupFd: handed to a child being spawned, else served
 * to the receiver by the sender's resource sharer). Every other array
 * pickles by value, as plain pickle does. */
static PyObject *py_reduce_for_multiprocessing(PyObject *m, PyObject *array)
{
    (void)m;
    if (!PyObject_TypeCheck(array, &TackArray_Type)) {
        PyErr_Format(PyExc_TypeError, "expected a tack.Array, not %s", Py_TYPE(array)->tp_name);
        return NULL;
    }
    if (tack_py_multiprocessing_register() < 0)
        return NULL;
    tack_array *a = TACK_PY_ARRAY(array);
    tack_exported_memory rec;
    memset(&rec, 0, sizeof rec);
    /* Only host memory: a plain CUDA array's export is a copy, which would
     * not be shared. A read-only array stays read-only by value. */
    int share = tack_device_dl_device(tack_array_device(a)).device_type == kDLCPU && tack_array_writable(a) &&
                tack_array_export_memory(a, &rec) == TACK_OK;
    if (!share)
        return PyObject_CallMethod(array, "__reduce_ex__", "i", 4);
    /* DupFd duplicates the descriptor now, so the pickle owns a descriptor
     * of its own, whatever becomes of the array. */
    PyObject *dup = PyObject_CallMethod(reduction_module, "DupFd", "L", (long long)rec.handle);
    if (!dup)
        return NULL;
    PyObject *shape = tack_py_shape_tuple(a);
    PyObject *r = shape ? Py_BuildValue("O(Ossnny#sO)", rebuild_shared_function, dup, rec.backend, rec.handle_type,
                                        (Py_ssize_t)rec.size, (Py_ssize_t)rec.allocation_size,
                                        (const char *)rec.device_uuid, (Py_ssize_t)sizeof rec.device_uuid,
                                        tack_dtype_name(tack_array_dtype(a)), shape)
                        : NULL;
    Py_XDECREF(shape);
    Py_DECREF(dup);
    return r;
}

/* The receiving side: takes the descriptor from multiprocessing (its own
 * from then on), maps it as tack.import_memory does and closes it (the
 * array maps a duplicate). A pickle is input: the record is checked as an
 * import checks any record. */
static PyObject *py_rebuild_shared(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *dup, *shape_obj, *uuid, *dtype_obj;
    const char *backend, *handle_type;
    Py_ssize_t size, allocation_size;
    if (!PyArg_ParseTuple(args, "OssnnSOO:_rebuild_shared", &dup, &backend, &handle_type, &size, &allocation_size,
                          &uuid, &dtype_obj, &shape_obj))
        return NULL;
    tack_exported_memory e;
    memset(&e, 0, sizeof e);
    tack_dtype dtype;
    int ndim;
    int64_t shape[TACK_MAX_NDIM];
    /* The array can travel on from here by descriptor too. */
    if (!tack_py_dtype_converter(dtype_obj, &dtype) || !tack_py_parse_shape(shape_obj, &ndim, shape) ||
        tack_py_multiprocessing_register() < 0)
        return NULL;
    if (strlen(backend) >= sizeof e.backend || strlen(handle_type) >= sizeof e.handle_type || size < 0 ||
        allocation_size < 0 || PyBytes_GET_SIZE(uuid) != (Py_ssize_t)sizeof e.device_uuid) {
        PyErr_SetString(PyExc_ValueError, "cannot unpickle a shared tack.Array: its record is malformed");
        return NULL;
    }
    PyObject *fd_obj = PyObject_CallMethod(dup, "detach", NULL);
    if (!fd_obj)
        return NULL;
    long fd = PyLong_AsLong(fd_obj);
    Py_DECREF(fd_obj);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    memcpy(e.backend, backend, strlen(backend));
    memcpy(e.handle_type, handle_type, strlen(handle_type));
    memcpy(e.device_uuid, PyBytes_AS_STRING(uuid), sizeof e.device_uuid);
    e.size = (size_t)size;
    e.allocation_size = (size_t)allocation_size;
    e.handle = fd;
    tack_array *a = NULL;
    tack_status st = tack_array_import_memory(NULL, &e, dtype, ndim, shape, &a);
    close((int)fd);
    if (st != TACK_OK)
        return tack_py_raise(st);
    return tack_py_array_new(a);
}

static PyMethodDef ipc_functions[] = {
    {"import_memory", (PyCFunction)(void (*)(void))py_import_memory, METH_VARARGS | METH_KEYWORDS,
     "import_memory(exported, dtype, shape, *, device=None)\n--\n\n"
     "Maps memory another array exported (Array.export_memory(), in this process or one whose descriptor\n"
     "reached this one) as a new array over the start of it. The descriptor stays the caller's.\n"
     "device=None: the device the record names (for CUDA, by device UUID)."},
    {"send_array", (PyCFunction)(void (*)(void))py_send_array, METH_VARARGS | METH_KEYWORDS,
     "send_array(sock, array)\n--\n\n"
     "Sends an exportable array's descriptor and a versioned header over a connected Unix-domain socket\n"
     "(a socket.socket or a file descriptor) with SCM_RIGHTS; receive_array maps it in the other process.\n"
     "The socket's timeout holds for the whole message (TimeoutError); socket errors raise OSError."},
    {"receive_array", (PyCFunction)(void (*)(void))py_receive_array, METH_VARARGS | METH_KEYWORDS,
     "receive_array(sock, *, device=None)\n--\n\n"
     "Receives an array send_array sent and maps it: writes on either side are seen by the other.\n"
     "A header of a newer version, a bad magic, sizes that disagree or a descriptor that is not sealed\n"
     "memory are refused (ValueError). The socket's timeout holds for the whole message (TimeoutError);\n"
     "Ctrl-C interrupts the wait (KeyboardInterrupt); socket errors raise OSError."},
    {"_reduce_for_multiprocessing", py_reduce_for_multiprocessing, METH_O,
     "_reduce_for_multiprocessing(array, /)\n--\n\nmultiprocessing's reducer: an exportable host array "
     "travels as its descriptor (shared memory), any other by value."},
    {"_rebuild_shared", py_rebuild_shared, METH_VARARGS,
     "_rebuild_shared(fd, backend, handle_type, size, allocation_size, device_uuid, dtype, shape, /)\n--\n\n"
     "An array over memory another process shared through multiprocessing."},
    {NULL, NULL, 0, NULL},
};

/* ExportedMemory is a record of plain values, but its handle is a
 * descriptor number of this process, kept open by the buffer its hidden
 * owner holds: neither a pickle nor a deep copy can carry the descriptor
 * with it, and copying the number alone would name whatever file another
 * process (or this one, later) has under it. */
static PyObject *refuse_copy(PyObject *record, const char *what)
{
    PyObject *handle = PySequence_GetItem(record, 3);
    if (!handle)
        return NULL;
    PyErr_Format(PyExc_TypeError,
                 "cannot %s a tack.ExportedMemory: its handle %R is a descriptor number of this process, held "
                 "open by the exporting array's buffer for as long as the record lives; the number means "
                 "nothing in another process, and a copy could not own the descriptor. To give the memory to "
                 "another process, send the array with tack.send_array(sock, array) and map it there with "
                 "tack.receive_array(sock), or send the descriptor itself over a Unix socket with SCM_RIGHTS "
                 "(socket.send_fds) and the record's other fields beside it",
                 what, handle);
    Py_DECREF(handle);
    return NULL;
}

static PyObject *record_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    return refuse_copy(self, "pickle");
}

static PyObject *record_reduce_ex(PyObject *self, PyObject *protocol)
{
    (void)protocol;
    return refuse_copy(self, "pickle");
}

static PyObject *record_deepcopy(PyObject *self, PyObject *memo)
{
    (void)memo;
    return refuse_copy(self, "deep-copy");
}

/* Immutable and sharing its owner: the record itself, as copy.copy gives
 * a tuple back. */
static PyObject *record_copy(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyMethodDef record_methods[] = {
    {"__reduce__", record_reduce, METH_NOARGS,
     "__reduce__($self, /)\n--\n\nRefused (TypeError): a descriptor number means nothing in another process."},
    {"__reduce_ex__", record_reduce_ex, METH_O,
     "__reduce_ex__($self, protocol, /)\n--\n\nRefused (TypeError): a descriptor number means nothing in another "
     "process."},
    {"__deepcopy__", record_deepcopy, METH_O,
     "__deepcopy__($self, memo, /)\n--\n\nRefused (TypeError): a copy could not own the descriptor."},
    {"__copy__", record_copy, METH_NOARGS, "__copy__($self, /)\n--\n\nThe record itself: it is immutable."},
    {NULL, NULL, 0, NULL},
};

int tack_py_ipc_init(PyObject *module)
{
    for (PyMethodDef *d = record_methods; d->ml_name; d++) {
        PyObject *method = PyDescr_NewMethod(TackExportedMemory_Type, d);
        int r = method ? PyObject_SetAttrString((PyObject *)TackExportedMemory_Type, d->ml_name, method) : -1;
        Py_XDECREF(method);
        if (r < 0)
            return -1;
    }
    if (PyModule_AddFunctions(module, ipc_functions) < 0)
        return -1;
    reducer_function = PyObject_GetAttrString(module, "_reduce_for_multiprocessing");
    rebuild_shared_function = reducer_function ? PyObject_GetAttrString(module, "_rebuild_shared") : NULL;
    return rebuild_shared_function ? 0 : -1;
}

/* Registered with multiprocessing's pickler only: plain pickle (and copy)
 * keep pickling by value. */
int tack_py_multiprocessing_register(void)
{
    if (reduction_module)
        return 0;
    PyObject *reduction = PyImport_ImportModule("multiprocessing.reduction");
    PyObject *pickler = reduction ? PyObject_GetAttrString(reduction, "ForkingPickler") : NULL;
    PyObject *r = pickler ? PyObject_CallMethod(pickler, "register", "OO", (PyObject *)&TackArray_Type,
                                                reducer_function)
                          : NULL;
    Py_XDECREF(pickler);
    if (!r) {
        Py_XDECREF(reduction);
        /* Registering is for a later multiprocessing send, not for the call
         * that asks: it must not fail that call (an import needs descriptors,
         * and a receive may have taken the last one). Unregistered, arrays
         * pickle by value until a later call registers. An interrupt still
         * goes through. */
        if (tack_py_exception_must_propagate())
            return -1;
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(r);
    reduction_module = reduction;
    return 0;
}
