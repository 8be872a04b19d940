/* tack.Device and the module's device functions. */
#include "ext.h"

#include <string.h>

#define DEV(o) (((TackDeviceObject *)(o))->device)

/* Device objects by tack_device address, so that one device has one Python
 * object (tack.device("cpu") is tack.device("cpu")). Devices live for the
 * process, as the C registry's do. */
static PyObject *device_objects;
static tack_device *default_device;
static PyObject *default_device_object;

/* `with device:` blocks, per thread as CuPy's current device is: the device
 * of this thread's innermost block, which wins over the process-wide
 * default. Reading it is on every creation and import without device=, so
 * it is a plain thread-local pointer; it is borrowed from the Device object
 * on top of the thread's block stack, a list kept in the thread state's
 * dictionary so that a thread which ends inside a block (a generator never
 * resumed) drops it with the thread. */
static _Thread_local tack_device *block_device;
/* The thread state the block stack belongs to: a C thread that enters
 * Python with PyGILState_Ensure gets a new thread state (and dictionary)
 * each time, and must not inherit a block its previous one left open. */
static _Thread_local PyThreadState *block_thread;
static PyObject *block_stack_key;
static PyObject *device_function;

PyObject *tack_py_device_object(tack_device *device)
{
    PyObject *key = PyLong_FromVoidPtr(device);
    if (!key)
        return NULL;
    PyObject *obj = PyDict_GetItemWithError(device_objects, key);
    if (obj || PyErr_Occurred()) {
        Py_DECREF(key);
        return Py_XNewRef(obj);
    }
    TackDeviceObject *d = PyObject_New(TackDeviceObject, &TackDevice_Type);
    if (!d) {
        Py_DECREF(key);
        return NULL;
    }
    d->device = tack_device_retain(device);
    if (PyDict_SetItem(device_objects, key, (PyObject *)d) < 0) {
        Py_DECREF(key);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(key);
    return (PyObject *)d;
}

tack_device *tack_py_default_device(void)
{
    if (block_device) {
        if (block_thread == PyThreadState_Get())
            return block_device;
        block_device = NULL;
    }
    if (!default_device) {
        tack_device *d;
        tack_status st = tack_device_open("cpu", NULL, 0, &d);
        if (st != TACK_OK) {
            tack_py_raise(st);
            return NULL;
        }
        default_device = d;
    }
    return default_device;
}

/* Appends one option: the one bound on their number. */
static int add_option(tack_option *opts, size_t cap, size_t *n, const char *name, const char *field, uint64_t value)
{
    if (*n == cap) {
        PyErr_SetString(PyExc_ValueError, "too many device options");
        return -1;
    }
    opts[(*n)++] = (tack_option){name, field, value};
    return 0;
}

/* An option's value, or the value of a dictionary option's `field` (not
 * NULL): None (0) or an integer handle in [0, 2**64); -1 with a TypeError
 * or ValueError naming the option. */
static int option_value(PyObject *v, const char *k, const char *f, uint64_t *out)
{
    *out = 0;
    if (v == Py_None)
        return 0;
    if (PyBool_Check(v) || !PyIndex_Check(v)) {
        if (f)
            PyErr_Format(PyExc_TypeError, "option %s['%s'] must be an integer handle, not %s", k, f,
                         Py_TYPE(v)->tp_name);
        else
            PyErr_Format(PyExc_TypeError, "option %s must be an integer or a dict of integer handles", k);
        return -1;
    }
    PyObject *idx = PyNumber_Index(v);
    *out = idx ? PyLong_AsUnsignedLongLong(idx) : 0;
    Py_XDECREF(idx);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        if (f)
            PyErr_Format(PyExc_ValueError, "option %s['%s'] is not a handle in [0, 2**64)", k, f);
        else
            PyErr_Format(PyExc_ValueError, "option %s is not in [0, 2**64)", k);
        return -1;
    }
    return 0;
}

/* The names alone, checked by the C layer's rule before any value is read:
 * a misspelled option is a ValueError naming the accepted ones whatever its
 * value, and an unknown backend is refused as tack_device_open refuses it. */
static int check_names(const char *name, PyObject *kwargs)
{
    tack_option names[32];
    size_t n = 0;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
        const char *k = PyUnicode_AsUTF8(key);
        if (!k || add_option(names, sizeof names / sizeof *names, &n, k, NULL, 0) < 0)
            return -1;
    }
    tack_status st = tack_device_check_options(name, names, n);
    return st == TACK_OK ? 0 : tack_py_fail(st);
}

/* One keyword option as its tack_option entries: a scalar one entry, a
 * dictionary one per field. */
static int convert_option(const char *k, PyObject *value, tack_option *opts, size_t cap, size_t *n, PyObject *keep)
{
    uint64_t v;
    if (!PyDict_Check(value))
        return option_value(value, k, NULL, &v) < 0 ? -1 : add_option(opts, cap, n, k, NULL, v);
    /* An empty dictionary still names the option: the backend must see it
     * and report every field missing, not start a device of its own while
     * the caller believes a context is shared. */
    if (PyDict_GET_SIZE(value) == 0)
        return add_option(opts, cap, n, k, NULL, 0);
    PyObject *fk, *fv;
    Py_ssize_t fpos = 0;
    while (PyDict_Next(value, &fpos, &fk, &fv)) {
        const char *f = PyUnicode_AsUTF8(fk);
        if (!f || option_value(fv, k, f, &v) < 0 || add_option(opts, cap, n, k, f, v) < 0)
            return -1;
    }
    return PyList_Append(keep, value);
}

/* Converts keyword options to tack_option entries once their names passed
 * the backend's check; `keep` holds the strings the entries point into. */
static int convert_options(const char *name, PyObject *kwargs, tack_option *opts, size_t cap, size_t *n,
                           PyObject *keep)
{
    *n = 0;
    if (!kwargs || PyDict_GET_SIZE(kwargs) == 0)
        return 0;
    if (check_names(name, kwargs) < 0)
        return -1;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
        const char *k = PyUnicode_AsUTF8(key);
        if (!k || convert_option(k, value, opts, cap, n, keep) < 0 || PyList_Append(keep, key) < 0)
            return -1;
    }
    return 0;
}

static PyObject *open_device(PyObject *name_obj, PyObject *kwargs)
{
    if (PyObject_TypeCheck(name_obj, &TackDevice_Type)) {
        if (kwargs && PyDict_GET_SIZE(kwargs)) {
            PyErr_SetString(PyExc_ValueError, "options can only be given with a device name, not a Device");
            return NULL;
        }
        return Py_NewRef(name_obj);
    }
    if (!PyUnicode_Check(name_obj)) {
        PyErr_Format(PyExc_TypeError, "device name must be a str such as 'cpu' or 'cuda:0', not %s",
                     Py_TYPE(name_obj)->tp_name);
        return NULL;
    }
    Py_ssize_t len;
    const char *name = PyUnicode_AsUTF8AndSize(name_obj, &len);
    if (!name)
        return NULL;
    if ((size_t)len != strlen(name)) {
        PyErr_SetString(PyExc_ValueError, "device name contains a NUL character");
        return NULL;
    }
    tack_option opts[32];
    size_t n;
    PyObject *keep = PyList_New(0); /* keeps option name strings alive */
    if (!keep)
        return NULL;
    if (convert_options(name, kwargs, opts, 32, &n, keep) < 0) {
        Py_DECREF(keep);
        return NULL;
    }
    tack_device *d;
    tack_status st = tack_device_open(name, opts, n, &d);
    Py_DECREF(keep);
    if (st != TACK_OK)
        return tack_py_raise(st);
    PyObject *obj = tack_py_device_object(d);
    tack_device_release(d);
    return obj;
}

int tack_py_device_converter(PyObject *obj, void *out)
{
    tack_device **res = out;
    if (obj == Py_None || obj == NULL) {
        tack_device *d = tack_py_default_device();
        if (!d)
            return 0;
        *res = tack_device_retain(d);
        return 1;
    }
    if (PyObject_TypeCheck(obj, &TackDevice_Type)) {
        *res = tack_device_retain(((TackDeviceObject *)obj)->device);
        return 1;
    }
    PyObject *d = open_device(obj, NULL);
    if (!d)
        return 0;
    *res = tack_device_retain(((TackDeviceObject *)d)->device);
    Py_DECREF(d);
    return 1;
}

static PyObject *py_device(PyObject *m, PyObject *args, PyObject *kwargs)
{
    (void)m;
    PyObject *name;
    if (!PyArg_ParseTuple(args, "O:device", &name))
        return NULL;
    return open_device(name, kwargs);
}

static PyObject *py_set_default_device(PyObject *m, PyObject *args, PyObject *kwargs)
{
    (void)m;
    PyObject *name;
    if (!PyArg_ParseTuple(args, "O:set_default_device", &name))
        return NULL;
    PyObject *d = open_device(name, kwargs);
    if (!d)
        return NULL;
    tack_device *old = default_device;
    default_device = tack_device_retain(((TackDeviceObject *)d)->device);
    tack_device_release(old);
    Py_XSETREF(default_device_object, Py_NewRef(d));
    return d;
}

static PyObject *py_get_default_device(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    tack_device *d = tack_py_default_device();
    return d ? tack_py_device_object(d) : NULL;
}

static void device_dealloc(PyObject *self)
{
    tack_device_release(DEV(self));
    Py_TYPE(self)->tp_free(self);
}

/* This thread's stack of `with` blocks (borrowed), made when `create`;
 * NULL with an exception when it cannot be had, NULL alone when absent. */
static PyObject *block_stack(int create)
{
    PyObject *state = PyThreadState_GetDict();
    if (!state) {
        PyErr_SetString(PyExc_RuntimeError, "no thread state to keep the device block in");
        return NULL;
    }
    PyObject *stack = PyDict_GetItemWithError(state, block_stack_key);
    if (stack || PyErr_Occurred() || !create)
        return stack;
    stack = PyList_New(0);
    if (!stack || PyDict_SetItem(state, block_stack_key, stack) < 0) {
        Py_XDECREF(stack);
        return NULL;
    }
    Py_DECREF(stack); /* the dictionary holds it */
    return stack;
}

static PyObject *device_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *stack = block_stack(1);
    if (!stack || PyList_Append(stack, self) < 0)
        return NULL;
    block_device = DEV(self);
    block_thread = PyThreadState_Get();
    return Py_NewRef(self);
}

/* Restores the block default the matching __enter__ found, also when the
 * block ends with an exception, which it lets through. */
static PyObject *device_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "__exit__() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *stack = block_stack(0);
    if (!stack && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = stack ? PyList_GET_SIZE(stack) : 0;
    if (n == 0 || PyList_GET_ITEM(stack, n - 1) != self) {
        /* Blocks left out of order (a generator suspended inside one and
         * closed elsewhere) would restore the wrong device: refuse, and
         * leave this thread's blocks as they are. */
        PyErr_Format(PyExc_RuntimeError,
                     "%R: leaving a `with device:` block that is not this thread's innermost one; device blocks "
                     "must end in the order they began, on the thread that began them",
                     self);
        return NULL;
    }
    if (PyList_SetSlice(stack, n - 1, n, NULL) < 0)
        return NULL;
    block_device = n > 1 ? DEV(PyList_GET_ITEM(stack, n - 2)) : NULL;
    Py_RETURN_FALSE;
}

/* A device pickles as its name and comes back as tack.device(name) in the
 * process that loads it. Handles of an adopted context mean nothing there. */
static PyObject *device_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    if (tack_device_shares_external_context(DEV(self))) {
        PyErr_Format(PyExc_TypeError,
                     "cannot pickle %R: it adopted another library's context, whose handles mean nothing in "
                     "another process; pickle the name (d.name) and adopt the context again there",
                     self);
        return NULL;
    }
    return Py_BuildValue("O(s)", device_function, tack_device_name(DEV(self)));
}

static PyObject *device_repr(PyObject *self)
{
    if (tack_device_shares_external_context(DEV(self)))
        return PyUnicode_FromFormat("tack.device('%s', external_context=...)", tack_device_name(DEV(self)));
    return PyUnicode_FromFormat("tack.device('%s')", tack_device_name(DEV(self)));
}

static PyObject *device_get_backend(PyObject *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(tack_device_backend(DEV(self)));
}

static PyObject *device_get_name(PyObject *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(tack_device_name(DEV(self)));
}

static PyObject *device_get_index(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromLong(tack_device_ordinal(DEV(self)));
}

static PyObject *device_get_shares(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(tack_device_shares_external_context(DEV(self)));
}

static PyObject *device_get_domain(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(tack_device_memory_domain(DEV(self)));
}

static PyObject *device_get_context(PyObject *self, void *c)
{
    (void)c;
    uint64_t h = tack_device_context_handle(DEV(self));
    if (!h)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(h);
}

static PyObject *device_synchronize(PyObject *self, PyObject *unused)
{
    (void)unused;
    tack_status st = tack_device_synchronize(DEV(self));
    if (st != TACK_OK)
        return tack_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *device_dlpack_device(PyObject *self, PyObject *unused)
{
    (void)unused;
    DLDevice dl = tack_device_dl_device(DEV(self));
    return Py_BuildValue("(ii)", (int)dl.device_type, (int)dl.device_id);
}

static PyGetSetDef device_getset[] = {
    {"backend", device_get_backend, NULL, "the backend's name: 'cpu', 'cuda', 'hip' or 'level_zero'", NULL},
    {"name", device_get_name, NULL, "a name tack.device() accepts: 'cpu', 'cuda:0'", NULL},
    {"index", device_get_index, NULL, "the device's ordinal within its backend", NULL},
    {"shares_external_context", device_get_shares, NULL, "True when the device adopted another library's context",
     NULL},
    {"context_handle", device_get_context, NULL,
     "the native handle (int) of the context the device allocates in, or None", NULL},
    {"memory_domain", device_get_domain, NULL, "arrays from two domains never meet in one launch", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef device_methods[] = {
    {"synchronize", device_synchronize, METH_NOARGS,
     "synchronize($self, /)\n--\n\nWaits for every launch queued on the device."},
    {"dlpack_device", device_dlpack_device, METH_NOARGS,
     "dlpack_device($self, /)\n--\n\nThe (device_type, device_id) its arrays export as."},
    {"__enter__", device_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nMakes the device this thread's default until the block ends; returns it."},
    {"__exit__", (PyCFunction)(void (*)(void))device_exit, METH_FASTCALL,
     "__exit__($self, exc_type, exc_value, traceback, /)\n--\n\n"
     "Restores the default device the block began with; exceptions pass through."},
    {"__reduce__", device_reduce, METH_NOARGS,
     "__reduce__($self, /)\n--\n\nPickles the device as tack.device(name)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject TackDevice_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tack.Device",
    .tp_basicsize = sizeof(TackDeviceObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A backend plus its options; made with tack.device(name, **options). As a context manager "
              "(`with tack.device('cuda:1') as d:`) it is the calling thread's default device for the block.",
    .tp_dealloc = device_dealloc,
    .tp_repr = device_repr,
    .tp_getset = device_getset,
    .tp_methods = device_methods,
};

static PyMethodDef device_functions[] = {
    {"device", (PyCFunction)(void (*)(void))py_device, METH_VARARGS | METH_KEYWORDS,
     "device(name, /, **options)\n--\n\nThe device named `name` ('cpu', 'cuda', 'cuda:1', 'hip', "
     "'level_zero'). `with tack.device(name) as d:` makes d this thread's default device for the block."},
    {"set_default_device", (PyCFunction)(void (*)(void))py_set_default_device, METH_VARARGS | METH_KEYWORDS,
     "set_default_device(name_or_device, /, **options)\n--\n\nMakes a device the process-wide default and "
     "returns it. A thread inside a `with device:` block keeps the block's device until the block ends."},
    {"get_default_device", py_get_default_device, METH_NOARGS,
     "get_default_device()\n--\n\nThe default device of the calling thread: its innermost `with device:` "
     "block's, else the process-wide one (cpu unless set)."},
    {NULL, NULL, 0, NULL},
};

int tack_py_device_init(PyObject *m)
{
    device_objects = PyDict_New();
    if (!device_objects)
        return -1;
    block_stack_key = PyUnicode_InternFromString("tack.device_blocks");
    if (!block_stack_key)
        return -1;
    if (PyType_Ready(&TackDevice_Type) < 0 || PyModule_AddObjectRef(m, "Device", (PyObject *)&TackDevice_Type) < 0)
        return -1;
    if (PyModule_AddFunctions(m, device_functions) < 0)
        return -1;
    device_function = PyObject_GetAttrString(m, "device");
    return device_function ? 0 : -1;
}
