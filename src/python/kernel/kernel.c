/* tack.Kernel: a kernel compiled from C-family source, launched over Tack
 * arrays. A launch from Python converts each argument straight into the C
 * argument list (no intermediate objects) and leaves every binding check to
 * tack_kernel_launch, so Python and C users get the same checks and errors. */
#include "../ext.h" /* Python.h first: it sets the feature macros the C headers read */

#include <stddef.h>
#include <string.h>

#include "kernel.h"

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    tack_kernel *kernel;
    /* The device named at construction (or the default one then), which
     * build() and target() mean when given none. */
    tack_device *device;
    int nparams;
    int ndim; /* index parameters */
    /* Per parameter, from the signature, so that a launch need not ask. */
    unsigned char is_array[TACK_KERNEL_MAX_PARAMS];
    unsigned char dtype[TACK_KERNEL_MAX_PARAMS];
} KernelObject;

static PyTypeObject Kernel_Type;

/* Launches expected to take longer than this release the GIL. Releasing
 * and taking back the GIL costs about 30 ns when no other thread wants it
 * (a 1-index launch measured 35 ns holding it, 62 ns releasing it), and
 * about a thread wake-up, microseconds, when one does; a launch shorter
 * than that is over before another thread could use the GIL. The launch's
 * own measured cost says how long it will take (tack_kernel_expected_ns),
 * so a slow kernel releases it however few indices it runs. */
#define RELEASE_GIL_NS 2000

/* The hooks of a launch (tack_launch_hooks): the GIL released as for a
 * compile, so that Ctrl-C stops a compiler the launch waits for. */
struct released {
    tack_py_released gil;
    int ran; /* Python's signal handlers may have run, and raised */
};

static void release_gil(void *context)
{
    struct released *r = context;
    r->ran = 1;
    tack_py_compile_begin(&r->gil);
}

static void reacquire_gil(void *context) { tack_py_compile_end(&((struct released *)context)->gil); }

/* A failed build carries the compiler's whole log, which may not fit the
 * status message; raise with all of it. */
static PyObject *raise_status(tack_status st)
{
    const char *msg = tack_last_error(), *log = tack_kernel_compile_log();
    size_t ml = strlen(msg);
    if ((st == TACK_ECOMPILE || st == TACK_ERUNTIME) && ml > 16 && strlen(log) > ml - 1 &&
        !strncmp(msg, log, ml - 1)) {
        return tack_py_raise_message(PyExc_RuntimeError, log);
    }
    return tack_py_raise(st);
}

/* Re-raises the current exception with the parameter named in front. */
static void name_the_parameter(KernelObject *self, int i)
{
    PyObject *value = tack_py_exception_take();
    PyObject *type = value ? Py_NewRef((PyObject *)Py_TYPE(value)) : Py_NewRef(PyExc_SystemError);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    tack_kernel_param p;
    tack_kernel_param_info(self->kernel, i, &p);
    if (text) {
        PyErr_Format(type, "parameter '%s' of kernel '%s' (%s): %U", p.name, tack_kernel_name(self->kernel),
                     tack_dtype_c_type(p.dtype), text);
        Py_DECREF(text);
    } else {
        PyErr_Clear();
        PyErr_Format(type, "parameter '%s' of kernel '%s' (%s): invalid value", p.name,
                     tack_kernel_name(self->kernel), tack_dtype_c_type(p.dtype));
    }
    Py_DECREF(type);
    Py_XDECREF(value);
}

/* tack.Array cannot be subclassed (no Py_TPFLAGS_BASETYPE): its type is
 * the whole test, which a foreign argument fails without a walk of its MRO. */
static int is_tack_array(PyObject *o) { return Py_IS_TYPE(o, &TackArray_Type); }

static int to_scalar(PyObject *o, tack_dtype dtype, tack_arg *out)
{
    /* Converted into the field dtype names: the value is taken as it is,
     * the smallest subnormals included. */
    out->kind = TACK_ARG_SCALAR_BITS;
    out->dtype = dtype;
    /* The common cases without a detour through the generic converter. */
    if (PyFloat_CheckExact(o) && (dtype == TACK_F32 || dtype == TACK_F64)) {
        double v = PyFloat_AS_DOUBLE(o);
        if (dtype == TACK_F32)
            out->value.f32 = (float)v;
        else
            out->value.f64 = v;
        return 0;
    }
    if (PyLong_CheckExact(o) && (dtype == TACK_I32 || dtype == TACK_I64)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (!overflow && !(v == -1 && PyErr_Occurred()) && (dtype == TACK_I64 || (v >= INT32_MIN && v <= INT32_MAX))) {
            if (dtype == TACK_I32)
                out->value.i32 = (int32_t)v;
            else
                out->value.i64 = v;
            return 0;
        }
        PyErr_Clear();
    }
    /* A kernel parameter is a C argument, not an element store: a float
     * given for an integer or a bool is refused, as ctypes and PyTorch
     * refuse it, rather than truncated behind the caller's back; so is a
     * complex number for a real parameter, whose imaginary part would be
     * lost. */
    char kind = tack_dtype_kind(dtype);
    if ((kind == 'i' || kind == 'u' || kind == 'b') && PyFloat_Check(o)) {
        PyErr_Format(PyExc_TypeError, "expected %s, got %s %R; convert it with %s first",
                     kind == 'b' ? "a bool" : "an integer", Py_TYPE(o)->tp_name, o,
                     kind == 'b' ? "bool()" : "int() or round()");
        return -1;
    }
    if (kind != 'c' && PyComplex_Check(o)) {
        PyErr_Format(PyExc_TypeError, "expected a real number, got complex %R; pass .real if that is meant", o);
        return -1;
    }
    /* A bool is True or False (NumPy's too), or the integer 0 or 1. */
    if (kind == 'b' && !PyBool_Check(o) && strcmp(Py_TYPE(o)->tp_name, "numpy.bool") != 0) {
        PyObject *idx = PyNumber_Index(o);
        int overflow = 0;
        long long v = idx ? PyLong_AsLongLongAndOverflow(idx, &overflow) : -1;
        Py_XDECREF(idx);
        if (!idx) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "expected a bool, got %s", Py_TYPE(o)->tp_name);
            return -1;
        }
        if (overflow || (v != 0 && v != 1)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%R is out of range for bool (True, False, 0 or 1)", o);
            return -1;
        }
    }
    return tack_py_to_element(o, dtype, &out->value);
}

/* Whether o is a Python value no array protocol could be spoken by, so
 * that an array parameter given one is refused without asking it. */
static int plainly_scalar(PyObject *o)
{
    /* An array's type answers the first question, without a walk of its
     * MRO for the subclass checks. */
    if (tack_py_speaks_dlpack(o))
        return 0;
    return PyFloat_Check(o) || PyLong_Check(o) || PyComplex_Check(o) || PyUnicode_Check(o) || o == Py_None;
}

/* Shares the memory of `o`, given for array parameter i, as tack.asarray
 * does (the same protocols, checks, read-only flag and device choice, no
 * copy): a new reference, or NULL with an exception naming the parameter.
 * The launch keeps it for the call only; the producer's memory outlives
 * a launch that uses it, since an import's buffer is shared and so a
 * launch on it is complete when it returns. */
static tack_array *import_argument(KernelObject *self, int i, PyObject *o)
{
    if (plainly_scalar(o)) {
        tack_kernel_param p;
        tack_kernel_param_info(self->kernel, i, &p);
        PyErr_Format(PyExc_TypeError,
                     "parameter '%s' of kernel '%s' is an array (%s%s *); got %s. Pass a tack.Array or an array "
                     "tack.asarray shares without a copy (NumPy, PyTorch, anything with __dlpack__, "
                     "__cuda_array_interface__ or the buffer protocol)",
                     p.name, tack_kernel_name(self->kernel), p.writable ? "" : "const ", tack_dtype_c_type(p.dtype),
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    tack_array *a = tack_py_share(o);
    if (!a)
        name_the_parameter(self, i);
    return a;
}

/* Converts the Python arguments into args[]; -1 with an exception. A Tack
 * array given for a scalar (or the reverse) is passed through as what it
 * is, for the launch to refuse with its message. Arrays imported for array
 * parameters are appended to held[] (*nheld of them, also on failure),
 * for the caller to release after the launch. */
static int marshal(KernelObject *self, PyObject *const *objs, Py_ssize_t nargs, tack_arg *args, tack_array **held,
                   int *nheld)
{
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *o = objs[i];
        tack_array *array = is_tack_array(o) ? TACK_PY_ARRAY(o) : NULL;
        if (!array && self->is_array[i]) {
            if (!(array = import_argument(self, (int)i, o)))
                return -1;
            held[(*nheld)++] = array;
        }
        if (array) {
            args[i].kind = TACK_ARG_ARRAY;
            args[i].dtype = TACK_NDTYPES;
            args[i].value.array = array;
            continue;
        }
        if (to_scalar(o, (tack_dtype)self->dtype[i], &args[i]) < 0) {
            name_the_parameter(self, (int)i);
            return -1;
        }
    }
    return 0;
}

/* Launches over `shape` (ndim extents), or, shape NULL, over the shape
 * every array argument shares (tack_kernel_call's rule). */
static PyObject *launch(KernelObject *self, int ndim, const int64_t *shape, PyObject *const *objs, Py_ssize_t nargs)
{
    tack_arg args[TACK_KERNEL_MAX_PARAMS];
    if (nargs != self->nparams) {
        /* The C launch words the count error; a dummy list gets it there. */
        tack_arg none;
        memset(&none, 0, sizeof none);
        return raise_status(tack_kernel_launch(self->kernel, NULL, 0, &none, (size_t)nargs));
    }
    tack_array *held[TACK_KERNEL_MAX_PARAMS];
    int nheld = 0;
    PyObject *result = NULL;
    if (marshal(self, objs, nargs, args, held, &nheld) < 0)
        goto done;
    /* The GIL is let go around a build and a long launch, as the launch
     * finds them after its checks; released, Ctrl-C stops a compiler. */
    struct released released;
    released.ran = 0;
    const tack_launch_hooks hooks = {RELEASE_GIL_NS, release_gil, reacquire_gil, &released};
    tack_status st = shape ? tack_kernel_launch_hooked(self->kernel, NULL, ndim, shape, args, (size_t)nargs, &hooks)
                           : tack_kernel_call_hooked(self->kernel, args, (size_t)nargs, &hooks);
    /* What a signal handler raised meanwhile (KeyboardInterrupt stopping
     * a compile) is the launch's exception. */
    if (released.ran && PyErr_Occurred())
        goto done;
    if (st != TACK_OK)
        raise_status(st);
    else
        result = Py_NewRef(Py_None);
done:
    /* After the message is taken: releasing an import runs its
     * producer's deleter. */
    for (int i = 0; i < nheld; i++)
        tack_array_release(held[i]);
    return result;
}

static PyObject *kernel_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    KernelObject *self = (KernelObject *)callable;
    if (kwnames && PyTuple_GET_SIZE(kwnames)) {
        PyErr_Format(PyExc_TypeError, "kernel '%s' takes positional arguments only",
                     tack_kernel_name(self->kernel));
        return NULL;
    }
    return launch(self, 0, NULL, args, PyVectorcall_NARGS(nargsf));
}

/* One extent of a launch's domain: an int, or anything with __index__. */
static int extent(PyObject *o, PyObject *domain, int64_t *out)
{
    int overflow;
    long long v;
    if (PyLong_CheckExact(o)) {
        v = PyLong_AsLongLongAndOverflow(o, &overflow);
    } else {
        PyObject *idx = PyNumber_Index(o);
        if (!idx) {
            PyErr_Clear();
            if (o == domain)
                PyErr_Format(PyExc_TypeError,
                             "launch: the domain must be an integer or a tuple of 1 to %d integers (one extent "
                             "per index), not %s",
                             TACK_KERNEL_MAX_DIMS, Py_TYPE(o)->tp_name);
            else
                PyErr_Format(PyExc_TypeError, "launch: the extents of shape %R must be integers, not %s", domain,
                             Py_TYPE(o)->tp_name);
            return -1;
        }
        v = PyLong_AsLongLongAndOverflow(idx, &overflow);
        Py_DECREF(idx);
    }
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "launch: extent %R does not fit a 64-bit index", o);
        return -1;
    }
    *out = v;
    return 0;
}

static PyObject *kernel_launch(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    KernelObject *self = (KernelObject *)op;
    if (nargs < 1) {
        PyErr_Format(PyExc_TypeError, "launch(n, *args) or launch((h, w), *args): n, the number of indices (or "
                                      "the shape, one extent per index), is missing");
        return NULL;
    }
    PyObject *domain = args[0];
    int64_t shape[TACK_KERNEL_MAX_DIMS];
    int ndim = 1;
    if (!PyLong_CheckExact(domain) && (PyTuple_Check(domain) || PyList_Check(domain))) {
        /* A tuple of its own: an extent's __index__ may change a list
         * while it is read. */
        PyObject *extents = PySequence_Tuple(domain);
        if (!extents)
            return NULL;
        Py_ssize_t len = PyTuple_GET_SIZE(extents);
        if (len < 1 || len > TACK_KERNEL_MAX_DIMS) {
            Py_DECREF(extents);
            PyErr_Format(PyExc_ValueError,
                         "kernel '%s' takes %d ind%s; launch it over a shape of %d extent%s, not %zd",
                         tack_kernel_name(self->kernel), self->ndim, self->ndim == 1 ? "ex" : "ices", self->ndim,
                         self->ndim == 1 ? "" : "s", len);
            return NULL;
        }
        for (Py_ssize_t d = 0; d < len; d++) {
            if (extent(PyTuple_GET_ITEM(extents, d), domain, &shape[d]) < 0) {
                Py_DECREF(extents);
                return NULL;
            }
        }
        Py_DECREF(extents);
        ndim = (int)len;
    } else if (extent(domain, domain, &shape[0]) < 0) {
        return NULL;
    }
    return launch(self, ndim, shape, args + 1, nargs - 1);
}

static PyObject *kernel_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"source", "name", "device", "checked", "defines", "include_dirs", "options", NULL};
    const char *source, *name = NULL;
    PyObject *device_obj = Py_None, *checked = Py_False, *defines = Py_None, *include_dirs = Py_None,
             *options = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|z$OOOOO:Kernel", kwlist, &source, &name, &device_obj, &checked,
                                     &defines, &include_dirs, &options))
        return NULL;
    PyObject *keep = PyList_New(0);
    if (!keep)
        return NULL;
    tack_kernel_options opts;
    if (tack_py_kernel_options(checked, defines, include_dirs, options, keep, &opts) < 0) {
        Py_DECREF(keep);
        return NULL;
    }
    tack_device *device = NULL;
    if (!tack_py_device_converter(device_obj, &device)) {
        tack_py_kernel_options_free(&opts);
        Py_DECREF(keep);
        return NULL;
    }
    /* Reading the signature is bounded, but a large source still takes a
     * while: other threads and signal handlers run meanwhile. `source` and
     * `name` stay alive with the argument tuple, the options' words with
     * `keep`. */
    tack_kernel *k;
    tack_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tack_kernel_create_with(source, name, &opts, &k);
    Py_END_ALLOW_THREADS
    tack_py_kernel_options_free(&opts);
    Py_DECREF(keep);
    if (st != TACK_OK) {
        tack_device_release(device);
        return tack_py_raise(st);
    }
    /* Compiling runs a compiler process: other threads may go on, and
     * Ctrl-C stops it. */
    tack_py_released gil;
    tack_py_compile_begin(&gil);
    st = tack_kernel_build(k, device);
    tack_py_compile_end(&gil);
    if (st != TACK_OK || PyErr_Occurred()) {
        if (!PyErr_Occurred())
            raise_status(st);
        tack_device_release(device);
        tack_kernel_release(k);
        return NULL;
    }
    KernelObject *self = (KernelObject *)type->tp_alloc(type, 0);
    if (!self) {
        tack_device_release(device);
        tack_kernel_release(k);
        return NULL;
    }
    self->vectorcall = kernel_vectorcall;
    self->kernel = k;
    self->device = device;
    self->nparams = tack_kernel_num_params(k);
    self->ndim = tack_kernel_ndim(k);
    for (int i = 0; i < self->nparams; i++) {
        tack_kernel_param p;
        tack_kernel_param_info(k, i, &p);
        self->is_array[i] = (unsigned char)p.is_array;
        self->dtype[i] = (unsigned char)p.dtype;
    }
    return (PyObject *)self;
}

static void kernel_dealloc(PyObject *op)
{
    KernelObject *self = (KernelObject *)op;
    tack_kernel_release(self->kernel);
    tack_device_release(self->device);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *signature(KernelObject *self)
{
    PyObject *parts = PyList_New(0);
    if (!parts)
        return NULL;
    for (int i = 0; i < self->nparams; i++) {
        tack_kernel_param p;
        tack_kernel_param_info(self->kernel, i, &p);
        PyObject *s = p.is_array ? PyUnicode_FromFormat("%s%s *%s", p.writable ? "" : "const ",
                                                        tack_dtype_c_type(p.dtype), p.name)
                                 : PyUnicode_FromFormat("%s %s", tack_dtype_c_type(p.dtype), p.name);
        if (!s || PyList_Append(parts, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(parts);
            return NULL;
        }
        Py_DECREF(s);
    }
    PyObject *sep = PyUnicode_FromString(", ");
    PyObject *joined = sep ? PyUnicode_Join(sep, parts) : NULL;
    Py_XDECREF(sep);
    Py_DECREF(parts);
    if (!joined)
        return NULL;
    char indices[TACK_KERNEL_MAX_DIMS * 160] = "";
    size_t used = 0;
    for (int d = 0; d < self->ndim && used < sizeof indices; d++)
        used += (size_t)snprintf(indices + used, sizeof indices - used, "%stack_index %s", d ? ", " : "",
                                 tack_kernel_dim_name(self->kernel, d));
    PyObject *r = PyUnicode_FromFormat("%s(%s%s%U)", tack_kernel_name(self->kernel), indices,
                                       self->nparams ? ", " : "", joined);
    Py_DECREF(joined);
    return r;
}

static PyObject *kernel_repr(PyObject *op)
{
    PyObject *sig = signature((KernelObject *)op);
    if (!sig)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("<tack.Kernel %U>", sig);
    Py_DECREF(sig);
    return r;
}

static PyObject *get_name(PyObject *op, void *closure)
{
    (void)closure;
    return PyUnicode_FromString(tack_kernel_name(((KernelObject *)op)->kernel));
}

static PyObject *get_source(PyObject *op, void *closure)
{
    (void)closure;
    return PyUnicode_FromString(tack_kernel_source(((KernelObject *)op)->kernel));
}

static PyObject *get_signature(PyObject *op, void *closure)
{
    (void)closure;
    return signature((KernelObject *)op);
}

static PyObject *get_ndim(PyObject *op, void *closure)
{
    (void)closure;
    return PyLong_FromLong(((KernelObject *)op)->ndim);
}

static PyObject *get_params(PyObject *op, void *closure)
{
    (void)closure;
    KernelObject *self = (KernelObject *)op;
    PyObject *t = PyTuple_New(self->nparams);
    for (int i = 0; t && i < self->nparams; i++) {
        tack_kernel_param p;
        tack_kernel_param_info(self->kernel, i, &p);
        PyObject *item = Py_BuildValue("(sOsO)", p.name, tack_py_dtype_object(p.dtype), p.is_array ? "array" : "scalar",
                                       p.writable ? Py_True : Py_False);
        if (!item) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, item);
    }
    return t;
}

static PyObject *kernel_generated_source(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"backend", NULL};
    const char *backend = "cpu", *text;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|s:generated_source", kwlist, &backend))
        return NULL;
    tack_status st = tack_kernel_generated_source(((KernelObject *)op)->kernel, backend, &text);
    if (st != TACK_OK)
        return tack_py_raise(st);
    return PyUnicode_FromString(text);
}

static PyObject *kernel_ptx(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"arch", NULL};
    const char *arch = NULL, *text = NULL;
    size_t size = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|z:ptx", kwlist, &arch))
        return NULL;
    tack_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tack_kernel_ptx(((KernelObject *)op)->kernel, arch, &text, &size);
    Py_END_ALLOW_THREADS
    if (st != TACK_OK)
        return raise_status(st);
    return PyUnicode_FromStringAndSize(text, (Py_ssize_t)(size ? size - 1 : 0));
}

/* build(device=None) and target(device=None): the kernel built for the
 * device (None: the kernel's own) with the GIL released, so that Ctrl-C
 * stops a compiler; with `text`, *text says what its code is. 0 with an
 * exception set on failure. */
static int build_for(PyObject *op, PyObject *args, PyObject *kwargs, const char *format, const char **text)
{
    static char *kwlist[] = {"device", NULL};
    PyObject *device_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, kwlist, &device_obj))
        return 0;
    tack_device *device = NULL;
    if (device_obj == Py_None)
        device = tack_device_retain(((KernelObject *)op)->device);
    else if (!tack_py_device_converter(device_obj, &device))
        return 0;
    tack_kernel *k = ((KernelObject *)op)->kernel;
    tack_py_released gil;
    tack_py_compile_begin(&gil);
    tack_status st = text ? tack_kernel_target(k, device, text) : tack_kernel_build(k, device);
    tack_py_compile_end(&gil);
    tack_device_release(device);
    if (PyErr_Occurred())
        return 0;
    if (st != TACK_OK) {
        (void)raise_status(st);
        return 0;
    }
    return 1;
}

static PyObject *kernel_build(PyObject *op, PyObject *args, PyObject *kwargs)
{
    if (!build_for(op, args, kwargs, "|O:build", NULL))
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *kernel_target(PyObject *op, PyObject *args, PyObject *kwargs)
{
    const char *text = NULL;
    if (!build_for(op, args, kwargs, "|O:target", &text))
        return NULL;
    return PyUnicode_FromString(text);
}

static PyMethodDef kernel_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))kernel_launch, METH_FASTCALL,
     "launch($self, shape, /, *args)\n--\n\nRuns the kernel for every index in the domain: i in [0, n) for "
     "launch(n, ...), every (i, j) with i < h and j < w for launch((h, w), ...) (j fastest, as in C arrays), and "
     "so on for three indices; one extent per index parameter. Arrays are tack.Arrays or anything tack.asarray "
     "shares without a copy (NumPy, PyTorch, DLPack, the CUDA Array Interface, the buffer protocol), on one "
     "device; scalars are converted to the parameter's type. An empty domain runs nothing."},
    {"generated_source", (PyCFunction)(void (*)(void))kernel_generated_source, METH_VARARGS | METH_KEYWORDS,
     "generated_source($self, /, backend='cpu')\n--\n\nThe source a backend compiles ('cpu', 'cuda', 'hip' or 'level_zero')."},
    {"ptx", (PyCFunction)(void (*)(void))kernel_ptx, METH_VARARGS | METH_KEYWORDS,
     "ptx($self, /, arch=None)\n--\n\nPTX for CUDA, compiled by the first NVRTC Tack finds for the virtual "
     "architecture arch ('compute_90'; None: the oldest it supports). A launch on a GPU may run other code: see "
     "target()."},
    {"target", (PyCFunction)(void (*)(void))kernel_target, METH_VARARGS | METH_KEYWORDS,
     "target($self, /, device=None)\n--\n\nWhat the kernel's code on a device (None: the one it was made for) is, "
     "built there first: "
     "'cubin sm_90 (CUDA 13.5)' or 'ptx compute_121 (PTX ISA 9.5, CUDA 13.5)' on CUDA, the kind of code elsewhere "
     "('host')."},
    {"build", (PyCFunction)(void (*)(void))kernel_build, METH_VARARGS | METH_KEYWORDS,
     "build($self, /, device=None)\n--\n\nCompiles and loads the kernel for a device (None: the one it was made "
     "for) ahead of its first launch there."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kernel_getset[] = {
    {"name", get_name, NULL, "The kernel function's name.", NULL},
    {"source", get_source, NULL, "The source as given.", NULL},
    {"signature", get_signature, NULL, "The kernel's C signature as Tack read it.", NULL},
    {"ndim", get_ndim, NULL, "How many index parameters the kernel takes: the rank of its domain.", NULL},
    {"params", get_params, NULL,
     "The parameters after the index: (name, dtype, 'array' or 'scalar', writable) each.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Kernel_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tack.Kernel",
    .tp_basicsize = sizeof(KernelObject),
    .tp_dealloc = kernel_dealloc,
    .tp_vectorcall_offset = offsetof(KernelObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = kernel_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Kernel(source, name=None, *, device=None, checked=False, defines=None, include_dirs=None, "
              "options=None)\n--\n\n"
              "A C-family function over a parallel index, compiled for a device (default: the default "
              "device):\n\n"
              "    saxpy = tack.Kernel('void saxpy(tack_index i, float a, const float *x, float *y) "
              "{ y[i] = a * x[i] + y[i]; }')\n"
              "    saxpy.launch(n, 2.0, x, y)  # i in [0, n)\n"
              "    saxpy(2.0, x, y)            # n = the size x and y share\n\n"
              "A kernel may take up to three leading tack_index parameters, launched over a shape, "
              "launch((h, w), ...). Called without one, the domain is the shape every array argument shares "
              "(1-D for one index, of the kernel's rank otherwise); arrays of different shapes raise ValueError: "
              "launch over the domain meant.\n\n"
              "The last function in the source is the kernel unless name says which.\n\n"
              "Build options, part of the key the compiled code is kept under: defines, a dict "
              "({'N': 4, 'FAST': None}) or a list of 'NAME' / 'NAME=VALUE' strings, written as #define lines "
              "before the source (a conditional around the signature may test them; Tack's own code never "
              "sees them); include_dirs, the "
              "directories the source's #include \"...\" searches (a relative one is taken against the "
              "working directory now); options, further words for the backend's compiler, one per entry, "
              "never split at blanks (after TACK_CFLAGS on cpu; NVRTC's, hipRTC's or ocloc's options on the "
              "GPUs, where a word may not hold a double quote for ocloc); checked=True (or TACK_CHECKED=1 in "
              "the environment) builds a variant that checks every subscript of an array parameter.\n\n"
              "Inside the kernel's body, tack_extent(y, d) and tack_size(y) are the extent d (0 past the "
              "array's dimensions) and the element count of the array bound to parameter y at this launch.\n\n"
              "A checked launch checks y[e] and &y[e] (in tack_atomic_* too) against y's element count: an "
              "index out of bounds touches no memory (a load reads 0, a store is dropped), and after the launch "
              "IndexError names the kernel, the parameter, the index, the extent and the source line. Pointer "
              "arithmetic (y + e, *(y + e)), subscripts written inside a macro's definition and accesses in "
              "helper functions stay unchecked. On a GPU a checked launch waits for its result.\n\n"
              "The source is ordinary C for its backend. cpu: the C library's headers and calls (#include "
              "<stdio.h>, printf, snprintf, getenv, stderr) work as in any host code; printf's output goes "
              "to the process's stdout. cuda and hip: printf and the math functions need no include (NVRTC "
              "and hipRTC have no C library headers: guard those with #ifdef TACK_BACKEND_CPU); the driver "
              "prints the output when the host next waits for the device. level_zero: OpenCL C 2.0, whose "
              "printf is built in and needs no include. Including a C library header on a GPU backend is a "
              "compile error that says so.",
    .tp_methods = kernel_methods,
    .tp_getset = kernel_getset,
    .tp_new = kernel_new,
};

int tack_py_kernel_init(PyObject *module)
{
    if (PyType_Ready(&Kernel_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "Kernel", (PyObject *)&Kernel_Type);
}
