/* What the extension tells the C library about the interpreter it runs in,
 * and the facts tack.show_config() prints, gathered by the C library. */
#include "ext.h"

#include <string.h>

/* sys.executable, for zig's C compiler (tack_kernel_set_python). An
 * interpreter that does not know its own file (an embedding may leave it
 * empty) names none, and kernels need a system compiler there. */
static int name_interpreter(void)
{
    PyObject *exe = PySys_GetObject("executable"); /* borrowed */
    if (!exe || !PyUnicode_Check(exe) || PyUnicode_GetLength(exe) == 0) {
        tack_kernel_set_python(NULL);
        return 0;
    }
    PyObject *bytes = PyUnicode_EncodeFSDefault(exe);
    if (!bytes)
        return -1;
    tack_kernel_set_python(PyBytes_AS_STRING(bytes));
    Py_DECREF(bytes);
    return 0;
}

static PyObject *text(const char *s) { return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace"); }

/* A dict of the component's fields; NULL with an exception. */
static PyObject *component(const tack_component_report *c)
{
    return Py_BuildValue("{s:N,s:O,s:N,s:N,s:N}", "name", text(c->name), "found", c->found ? Py_True : Py_False,
                         "path", text(c->path), "version", text(c->version), "note", text(c->note));
}

/* A list of n items made by `make` from items[i]; NULL with an exception. */
static PyObject *list_of(int n, PyObject *(*make)(const void *), const void *items, size_t size)
{
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        PyObject *item = make((const char *)items + (size_t)i * size);
        if (!item)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *text_item(const void *s) { return text(s); }
static PyObject *component_item(const void *c) { return component(c); }

static PyObject *backend(const tack_backend_report *r)
{
    int named = r->device_count < TACK_REPORT_DEVICES ? r->device_count : TACK_REPORT_DEVICES;
    int compilers = r->compiler_count < TACK_REPORT_COMPILERS ? r->compiler_count : TACK_REPORT_COMPILERS;
    return Py_BuildValue("{s:N,s:N,s:N,s:N,s:i,s:N,s:N}", "backend", text(r->backend), "driver",
                         component(&r->driver), "compiler", component(&r->compiler), "compilers",
                         list_of(compilers, component_item, r->compilers, sizeof r->compilers[0]), "device_count",
                         r->device_count, "devices", list_of(named, text_item, r->devices, sizeof r->devices[0]),
                         "kernel_code", list_of(named, text_item, r->kernel_code, sizeof r->kernel_code[0]));
}

static PyObject *py_config(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    PyObject *backends = PyList_New(0);
    if (!backends)
        return NULL;
    for (const char *const *name = tack_backend_names(); *name; name++) {
        tack_backend_report r;
        /* Loading a driver and running the C compiler for its version take
         * a while, and touch no Python object; Ctrl-C stops the compiler. */
        tack_py_released gil;
        tack_py_compile_begin(&gil);
        tack_status st = tack_backend_describe(*name, &r);
        tack_py_compile_end(&gil);
        if (st != TACK_OK || PyErr_Occurred()) {
            Py_DECREF(backends);
            return PyErr_Occurred() ? NULL : tack_py_raise(st);
        }
        PyObject *entry = backend(&r);
        if (!entry || PyList_Append(backends, entry) < 0) {
            Py_XDECREF(entry);
            Py_DECREF(backends);
            return NULL;
        }
        Py_DECREF(entry);
    }
    char dir[4096];
    tack_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tack_kernel_cache_dir(dir, sizeof dir);
    Py_END_ALLOW_THREADS
    PyObject *cache_dir = st == TACK_OK ? PyUnicode_DecodeFSDefault(dir) : Py_NewRef(Py_None);
    PyObject *cache_error = st == TACK_OK ? Py_NewRef(Py_None) : text(tack_last_error());
    if (!cache_dir || !cache_error) {
        Py_XDECREF(cache_dir);
        Py_XDECREF(cache_error);
        Py_DECREF(backends);
        return NULL;
    }
    return Py_BuildValue("{s:s,s:N,s:N,s:N}", "version", TACK_VERSION_STRING, "cache_dir", cache_dir, "cache_error",
                         cache_error, "backends", backends);
}

static PyMethodDef config_methods[] = {
    {"_config", py_config, METH_NOARGS,
     "What tack.show_config() prints, as the C library finds it: the version, each backend's driver, devices and "
     "kernel compiler, and the kernel cache directory (None, with cache_error, when it cannot be used)."},
    {NULL, NULL, 0, NULL},
};

int tack_py_config_init(PyObject *m)
{
    if (PyModule_AddFunctions(m, config_methods) < 0)
        return -1;
    return name_interpreter();
}
