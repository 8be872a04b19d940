/* DLPack capsules: Array.__dlpack__ and tack.from_dlpack. The rules live in
 * src/dlpack/; this file only moves tensors in and out of capsules. */
#include "ext.h"

#include <string.h>

#include "tack/import.h"

static PyObject *str_dlpack_device, *kwnames_max_version_stream, *kwnames_stream, *str_requires_grad, *str_exchange_api, *str_dlpack, *str_max_version, *kwnames_max_version, *version_1_0, *str_is_conj, *str_is_neg;

static const char *const dlpack_kwnames[] = {"stream", "max_version", "dl_device", "copy", NULL};

/* Releases an export through its deleter, versioned or legacy. */
static void managed_delete(void *m, int versioned)
{
    if (versioned) {
        DLManagedTensorVersioned *v = m;
        if (v->deleter)
            v->deleter(v);
    } else {
        DLManagedTensor *l = m;
        if (l->deleter)
            l->deleter(l);
    }
}

/* The capsule destructor runs when a capsule is collected. One still carrying
 * its original name was never adopted, so the export is released here; a
 * consumer that adopted it renamed it and calls the deleter itself. It
 * touches only C state, so it is safe at any point of interpreter exit. */
static void capsule_destructor(PyObject *capsule)
{
    int versioned = PyCapsule_IsValid(capsule, "dltensor_versioned");
    if (versioned || PyCapsule_IsValid(capsule, "dltensor"))
        managed_delete(PyCapsule_GetPointer(capsule, versioned ? "dltensor_versioned" : "dltensor"), versioned);
}

PyObject *tack_py_array_dlpack(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs) {
        PyErr_SetString(PyExc_TypeError, "__dlpack__() takes keyword arguments only");
        return NULL;
    }
    PyObject *vals[4] = {NULL, NULL, NULL, NULL};
    if (tack_py_keywords("__dlpack__", kwnames, args, dlpack_kwnames, vals) < 0)
        return NULL;
    PyObject *stream_obj = vals[0], *max_version = vals[1], *copy = vals[3];
    /* stream= as the array API gives it: None (share(): a host wait), -1
     * (no synchronisation), or the consumer's stream (on CUDA: 1 legacy
     * default, 2 per-thread default, else a CUstream), which waits for
     * Tack's queued launches on the GPU instead. */
    int with_stream = 0;
    int64_t stream = 0;
    if (stream_obj && stream_obj != Py_None) {
        if (!PyLong_Check(stream_obj) || PyBool_Check(stream_obj)) {
            PyErr_Format(PyExc_TypeError,
                         "stream must be None or an integer (-1, or the consumer's stream), not %s",
                         Py_TYPE(stream_obj)->tp_name);
            return NULL;
        }
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(stream_obj, &overflow);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (overflow) {
            PyErr_Format(PyExc_ValueError, "stream=%R is no stream handle: it is out of range", stream_obj);
            return NULL;
        }
        with_stream = 1;
        stream = (int64_t)v;
    }
    if (copy && copy != Py_None) {
        int want = PyObject_IsTrue(copy);
        if (want < 0)
            return NULL;
        if (want) {
            PyErr_SetString(PyExc_BufferError,
                            "Tack's DLPack export is always a view of the array's memory; copy=True cannot be "
                            "honoured. Export without copy and copy on the consumer's side");
            return NULL;
        }
    }
    int versioned = 0;
    if (max_version && max_version != Py_None) {
        if (!PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) < 1) {
            PyErr_SetString(PyExc_TypeError, "max_version must be a (major, minor) tuple or None");
            return NULL;
        }
        int overflow;
        long major = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(max_version, 0), &overflow);
        if (major == -1 && PyErr_Occurred())
            return NULL;
        /* A consumer from the far future still reads 1.x. */
        versioned = overflow > 0 || major >= 1;
    }
    tack_array *a = TACK_PY_ARRAY(self);
    tack_status st;
    void *m;
    if (versioned) {
        DLManagedTensorVersioned *v = NULL;
        st = with_stream ? tack_array_to_dlpack_versioned_stream(a, stream, &v) : tack_array_to_dlpack_versioned(a, &v);
        m = v;
    } else {
        DLManagedTensor *l = NULL;
        st = with_stream ? tack_array_to_dlpack_stream(a, stream, &l) : tack_array_to_dlpack(a, &l);
        m = l;
    }
    if (st != TACK_OK)
        return tack_py_raise(st);
    PyObject *capsule = PyCapsule_New(m, versioned ? "dltensor_versioned" : "dltensor", capsule_destructor);
    if (!capsule)
        managed_delete(m, versioned);
    return capsule;
}

PyObject *tack_py_array_dlpack_device(PyObject *self, PyObject *unused)
{
    (void)unused;
    DLDevice dl = tack_device_dl_device(tack_array_device(TACK_PY_ARRAY(self)));
    return Py_BuildValue("(ii)", (int)dl.device_type, (int)dl.device_id);
}

/* What an import needs to know of a producer's type, looked up once per
 * type: its C exchange table (type.__dlpack_c_exchange_api__), and how to
 * read requires_grad (PyTorch's table exports tensors that require grad,
 * which its __dlpack__ refuses; such tensors are sent to __dlpack__, so
 * that both paths behave alike). Both live on the type, so an entry stays
 * good while the type's version tag is unchanged (CPython renews the tag
 * when the type or a base is modified). */
struct producer_type {
    PyTypeObject *type; /* strong reference: the address is not reused */
    unsigned int version;
    const DLPackExchangeAPI *api;
    /* The type's requires_grad attribute (strong), NULL when it has none:
     * then there is no attribute lookup, and no AttributeError to make and
     * clear, on every import. */
    PyObject *requires_grad;
    /* Set when requires_grad is a C getter reached by generic attribute
     * lookup: it is called directly, as that lookup would. */
    getter grad_get;
    void *grad_closure;
    /* PyTorch's lazy conjugation and negation, read by is_conj() and
     * is_neg() (strong references; both NULL unless the type is PyTorch's
     * tensor type, or derives from it, and has both): a
     * tensor with either bit set holds the values from before the
     * operation, which a DLPack tensor cannot say. PyTorch's table exports
     * such tensors as they are stored, and its __dlpack__ refuses only the
     * conjugate bit, so Tack asks itself. Where a method is a C function of
     * the type's own taking no arguments it is called directly, as a
     * Python call would reach it, without the method object a call makes. */
    PyObject *is_conj, *is_neg;
    PyCFunction conj_get, neg_get;
};

/* A few types in turn (PyTorch's, NumPy's, Tack's own), so that imports
 * from a mix of producers do not look their types up every time. */
#define PRODUCER_TYPES 4
static struct producer_type producer_types[PRODUCER_TYPES];
static int producer_types_next;

/* Whether the type's version tag stands for its current state. CPython
 * zeroes the tag when the type or a base changes (0 is never a valid tag).
 * Before 3.13 it also kept Py_TPFLAGS_VALID_VERSION_TAG in step, and code
 * outside CPython clears that flag to invalidate caches; 3.13 no longer
 * sets the flag at all, so there a nonzero tag alone is valid (testing the
 * flag would make every lookup miss). */
static int version_tag_valid(const PyTypeObject *type)
{
#if PY_VERSION_HEX >= 0x030D0000
    return type->tp_version_tag != 0;
#else
    return type->tp_version_tag != 0 && (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG);
#endif
}

static int producer_type_current(const struct producer_type *p, PyTypeObject *type)
{
    return p->type == type && version_tag_valid(type) && type->tp_version_tag == p->version;
}

static const DLPackExchangeAPI *read_exchange_api(PyTypeObject *type)
{
    const DLPackExchangeAPI *api = NULL;
    PyObject *cap = PyObject_GetAttr((PyObject *)type, str_exchange_api);
    if (cap) {
        if (PyCapsule_IsValid(cap, "dlpack_exchange_api"))
            api = PyCapsule_GetPointer(cap, "dlpack_exchange_api");
        Py_DECREF(cap);
        /* Only a table of our major version can be read. */
        if (api && (api->header.version.major != DLPACK_MAJOR_VERSION || !api->managed_tensor_from_py_object_no_sync))
            api = NULL;
    }
    PyErr_Clear();
    return api;
}

/* Whether `type` is PyTorch's tensor type or derives from it: only its
 * is_conj() and is_neg() mean the bits, whatever another library's
 * methods of those names do. By name, so that PyTorch is not imported;
 * older PyTorch names the base _TensorBase. */
static int is_torch_tensor_type(PyTypeObject *type)
{
    PyObject *mro = type->tp_mro;
    for (Py_ssize_t i = 0; mro && PyTuple_Check(mro) && i < PyTuple_GET_SIZE(mro); i++) {
        const char *name = ((PyTypeObject *)PyTuple_GET_ITEM(mro, i))->tp_name;
        if (!strcmp(name, "torch._C.TensorBase") || !strcmp(name, "torch._C._TensorBase"))
            return 1;
    }
    return 0;
}

/* The type's method `name`, NULL when it has none; *direct is its C
 * function where that can be called in its place. */
static PyObject *bit_method(PyTypeObject *type, PyObject *name, PyCFunction *direct)
{
    *direct = NULL;
    PyObject *m = PyObject_GetAttr((PyObject *)type, name);
    if (!m) {
        PyErr_Clear();
        return NULL;
    }
    /* On the class, a method of a C type comes back as its descriptor; one
     * of the type's own (not a metaclass's answer) may be given the type's
     * instances. */
    if (Py_IS_TYPE(m, &PyMethodDescr_Type) && type->tp_getattro == PyObject_GenericGetAttr &&
        PyType_IsSubtype(type, PyDescr_TYPE(m))) {
        PyMethodDef *def = ((PyMethodDescrObject *)m)->d_method;
        if (def->ml_flags == METH_NOARGS)
            *direct = def->ml_meth;
    }
    return m;
}

/* The entry for `type` (a copy, holding no references: the cache keeps
 * them, and the type keeps its attributes). Never fails: what cannot be
 * read counts as absent. */
static struct producer_type producer_type(PyTypeObject *type)
{
    for (int i = 0; i < PRODUCER_TYPES; i++)
        if (producer_type_current(&producer_types[i], type))
            return producer_types[i];
    struct producer_type fresh = {.type = type};
    fresh.api = read_exchange_api(type);
    /* On the class, a getset descriptor comes back as itself. */
    fresh.requires_grad = PyObject_GetAttr((PyObject *)type, str_requires_grad);
    if (!fresh.requires_grad)
        PyErr_Clear();
    else if (Py_IS_TYPE(fresh.requires_grad, &PyGetSetDescr_Type) && type->tp_getattro == PyObject_GenericGetAttr &&
             PyType_IsSubtype(type, PyDescr_TYPE(fresh.requires_grad))) {
        /* A descriptor of the type's own (not one a metaclass answered
         * with), so that its getter may be given the type's instances. */
        PyGetSetDef *def = ((PyGetSetDescrObject *)fresh.requires_grad)->d_getset;
        fresh.grad_get = def->get;
        fresh.grad_closure = def->closure;
    }
    if (is_torch_tensor_type(type)) {
        fresh.is_conj = bit_method(type, str_is_conj, &fresh.conj_get);
        fresh.is_neg = fresh.is_conj ? bit_method(type, str_is_neg, &fresh.neg_get) : NULL;
        if (!fresh.is_neg) {
            Py_CLEAR(fresh.is_conj);
            fresh.conj_get = NULL;
        }
    }
    /* Read after the lookups above, which assign it if the type had none. */
    fresh.version = type->tp_version_tag;
    /* The lookups may have run Python code that filled a slot meanwhile:
     * choose the slot now. */
    int slot = -1;
    for (int i = 0; i < PRODUCER_TYPES && slot < 0; i++)
        if (producer_types[i].type == type)
            slot = i;
    if (slot < 0) {
        slot = producer_types_next;
        producer_types_next = (producer_types_next + 1) % PRODUCER_TYPES;
    }
    struct producer_type old = producer_types[slot];
    Py_INCREF(type);
    producer_types[slot] = fresh;
    Py_XDECREF(old.requires_grad);
    Py_XDECREF(old.is_conj);
    Py_XDECREF(old.is_neg);
    Py_XDECREF(old.type);
    return fresh;
}

/* The truth of `v`, a new reference (consumed) or NULL with an exception
 * set: a failed read counts as no, unless its exception must propagate:
 * then -1 with it. */
static int truth_of(PyObject *v)
{
    int r = v == Py_False ? 0 : v == Py_True ? 1 : v ? PyObject_IsTrue(v) : -1;
    Py_XDECREF(v);
    if (r < 0) {
        if (tack_py_exception_must_propagate())
            return -1;
        PyErr_Clear();
        r = 0;
    }
    return r;
}

/* 1 when `source` requires grad; a failed read counts as no, unless it
 * failed with an exception that must propagate: then -1 with it. */
static int requires_grad(const struct producer_type *p, PyObject *source)
{
    if (!p->requires_grad)
        return 0;
    return truth_of(p->grad_get ? p->grad_get(source, p->grad_closure) : PyObject_GetAttr(source, str_requires_grad));
}

/* 1 when the bit `method` reads is set on `source`; a failed read counts
 * as not set (the import then goes on as for any other producer), unless
 * it failed with an exception that must propagate: then -1 with it. */
static int lazy_bit(PyObject *method, PyCFunction direct, PyObject *source)
{
    return truth_of(direct ? direct(source, NULL) : PyObject_CallOneArg(method, source));
}

/* 1 with a BufferError when `source` is a PyTorch tensor whose memory does
 * not hold its values (a conjugate or negative bit set), or with an
 * exception that must propagate; else 0. The conjugate bit is set on
 * complex tensors only, so it is read for those alone (`complex` is 1, 0,
 * or -1 when the dtype is not known yet). */
static int lazy_bits_refused(const struct producer_type *p, PyObject *source, int complex)
{
    if (!p->is_neg)
        return 0;
    int conj = complex ? lazy_bit(p->is_conj, p->conj_get, source) : 0;
    int neg = conj ? 0 : lazy_bit(p->is_neg, p->neg_get, source);
    if (conj < 0 || neg < 0)
        return 1;
    if (conj)
        PyErr_SetString(PyExc_BufferError,
                        "this PyTorch tensor has its conjugate bit set (torch.conj is lazy for complex tensors): "
                        "its memory holds the unconjugated values, which a DLPack tensor cannot say, so PyTorch's "
                        "own __dlpack__ refuses it too; import t.resolve_conj(), which has the conjugated values "
                        "in memory");
    else if (neg)
        PyErr_SetString(PyExc_BufferError,
                        "this PyTorch tensor has its negative bit set (a lazy negation, as torch.conj(x).imag and "
                        "torch._neg_view make): its memory holds the values before negation, which a DLPack "
                        "tensor cannot say; import t.resolve_neg(), which has the negated values in memory");
    return conj || neg;
}

/* The stream= a producer should order its pending writes before, as a
 * Python int: the stream of the Tack device that will import a GPU tensor.
 * NULL without an exception when there is none to give (host memory, a
 * producer without __dlpack_device__, a device Tack cannot open: the import
 * itself then reports what is wrong); NULL with the exception when the
 * producer raised one that must propagate (a KeyboardInterrupt). */
static PyObject *consumer_stream(PyObject *source, tack_device *asked, tack_device *fallback)
{
    /* NumPy arrays are host memory: skip the extra call on the common path
     * (the type is remembered once seen, to compare pointers after). */
    static PyTypeObject *ndarray;
    if (Py_TYPE(source) == ndarray)
        return NULL;
    if (!ndarray && !strcmp(Py_TYPE(source)->tp_name, "numpy.ndarray")) {
        ndarray = (PyTypeObject *)Py_NewRef(Py_TYPE(source));
        return NULL;
    }
    PyObject *callargs[1] = {source};
    PyObject *dev = PyObject_VectorcallMethod(str_dlpack_device, callargs, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (!dev) {
        if (!tack_py_exception_must_propagate())
            PyErr_Clear();
        return NULL;
    }
    DLDevice dl = {0, 0};
    int ok = PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2;
    if (ok) {
        /* One at a time: the second __index__ must not run with the
         * first's exception pending. */
        long type = PyLong_AsLong(PyTuple_GET_ITEM(dev, 0));
        long id = type == -1 && PyErr_Occurred() ? -1 : PyLong_AsLong(PyTuple_GET_ITEM(dev, 1));
        ok = !PyErr_Occurred() && type >= 0 && type < 1 << 16 && id >= 0 && id < 1 << 20;
        dl.device_type = (DLDeviceType)type;
        dl.device_id = (int32_t)id;
    }
    Py_DECREF(dev);
    if (PyErr_Occurred()) {
        if (tack_py_exception_must_propagate())
            return NULL;
        PyErr_Clear();
    }
    /* 0 is no valid stream= value; a device without a stream of its own
     * leaves the producer's default (synchronise for the legacy stream). */
    uint64_t handle = ok ? tack_dlpack_consumer_stream(dl, asked, fallback) : 0;
    return handle ? PyLong_FromUnsignedLongLong(handle) : NULL;
}

/* source.__dlpack__(max_version=(1, 0)[, stream=s]), falling back to the
 * call without max_version for producers from before DLPack 1.0, which
 * raise TypeError. */
static PyObject *request_capsule(PyObject *source, PyObject *stream)
{
    if (PyCapsule_CheckExact(source))
        return Py_NewRef(source);
    PyObject *callargs[3] = {source, version_1_0, stream};
    PyObject *capsule = PyObject_VectorcallMethod(str_dlpack, callargs, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                  stream ? kwnames_max_version_stream : kwnames_max_version);
    if (capsule)
        goto check;
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        /* No __dlpack__ at all, or an AttributeError from inside the
         * producer's own: look, with the exception set aside (a lookup
         * must not run with one pending). */
        PyObject *raised = tack_py_exception_take(), *attr;
        int found = tack_py_lookup_optional(source, str_dlpack, &attr);
        Py_XDECREF(attr);
        if (found == 0) {
            Py_XDECREF(raised);
            PyErr_Format(PyExc_TypeError,
                         "tack.from_dlpack needs an object with __dlpack__ or a DLPack capsule, not %s; for "
                         "other objects use tack.array(obj), which copies",
                         Py_TYPE(source)->tp_name);
            return NULL;
        }
        if (found < 0)
            Py_XDECREF(raised);
        else
            tack_py_exception_restore(raised);
        return NULL;
    }
    if (!PyErr_ExceptionMatches(PyExc_TypeError))
        return NULL;
    PyErr_Clear();
    callargs[1] = stream;
    capsule = PyObject_VectorcallMethod(str_dlpack, callargs, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                        stream ? kwnames_stream : NULL);
check:
    if (capsule && !PyCapsule_CheckExact(capsule)) {
        PyErr_Format(PyExc_TypeError, "%s.__dlpack__() returned a %s, not a DLPack capsule",
                     Py_TYPE(source)->tp_name, Py_TYPE(capsule)->tp_name);
        Py_CLEAR(capsule);
    }
    return capsule;
}

/* tack.array(host, device=device): NumPy's reading of a host array, which
 * knows strides and ml_dtypes' bfloat16. */
static PyObject *copy_with_array(PyObject *host, PyObject *device)
{
    PyObject *mod = PyImport_ImportModule("tack._tack");
    PyObject *result = NULL;
    if (mod) {
        PyObject *array_fn = PyObject_GetAttrString(mod, "array");
        if (array_fn) {
            PyObject *args = PyTuple_Pack(1, host);
            PyObject *kw = args ? Py_BuildValue("{s:O}", "device", device) : NULL;
            if (kw)
                result = PyObject_Call(array_fn, args, kw);
            Py_XDECREF(args);
            Py_XDECREF(kw);
            Py_DECREF(array_fn);
        }
        Py_DECREF(mod);
    }
    return result;
}

/* The tensor imported as without copy=, then copied by Tack onto `target`
 * (through the host for device memory, after the launches queued on it),
 * and the import dropped: every dtype the import knows copies (NumPy's
 * from_dlpack has no bfloat16), and the producer's deleter has run by the
 * time the copy is returned, unless the producer is shared otherwise. */
static PyObject *copy_by_tack(PyObject *source, tack_device *target, int *imported)
{
    tack_array *view = tack_py_dlpack_share(source, NULL);
    *imported = view != NULL;
    if (!view)
        return NULL;
    tack_array *copy = NULL;
    tack_status st = tack_array_to_device(view, target, &copy);
    /* Raised before the release, which may run the producer's deleter. */
    PyObject *result = st == TACK_OK ? tack_py_array_new(copy) : tack_py_raise(st);
    tack_array_release(view);
    return result;
}

static PyObject *import_copy(PyObject *source, PyObject *device)
{
    int is_nd = tack_py_is_ndarray(source);
    if (is_nd < 0)
        return NULL;
    if (is_nd)
        return copy_with_array(source, device);
    int is_capsule = PyCapsule_CheckExact(source);
    if (!is_capsule) {
        PyObject *attr;
        int has_dlpack = tack_py_lookup_optional(source, str_dlpack, &attr);
        Py_XDECREF(attr);
        if (has_dlpack < 0)
            return NULL;
        if (!has_dlpack) {
            PyErr_Format(PyExc_TypeError,
                         "from_dlpack(copy=True) needs an object with __dlpack__ or a DLPack capsule, not %s; "
                         "tack.array(obj) copies anything NumPy can read",
                         Py_TYPE(source)->tp_name);
            return NULL;
        }
    }
    /* Like tack.array's: device= or the default device. */
    tack_device *target = NULL;
    if (device != Py_None) {
        if (!tack_py_device_converter(device, &target))
            return NULL;
    } else {
        target = tack_py_default_device();
        if (!target)
            return NULL;
        tack_device_retain(target);
    }
    int imported;
    PyObject *result = copy_by_tack(source, target, &imported);
    tack_device_release(target);
    /* The zero-copy import refuses strided memory (ValueError), which
     * NumPy reads and tack.array copies; a capsule is spent by then. Its
     * refusal stands when NumPy cannot read the tensor either (device
     * memory, a dtype NumPy lacks). Other refusals (BufferError for what
     * the producer will not export, TypeError for an unknown dtype) are
     * NumPy's too, or worse, silently read: they stand. */
    if (result || imported || is_capsule || !PyErr_ExceptionMatches(PyExc_ValueError))
        return result;
    PyObject *refusal = tack_py_exception_take();
    PyObject *np = tack_py_numpy();
    PyObject *host = np ? PyObject_CallMethod(np, "from_dlpack", "O", source) : NULL;
    result = host ? copy_with_array(host, device) : NULL;
    Py_XDECREF(host);
    if (result || tack_py_exception_must_propagate()) {
        Py_DECREF(refusal);
        return result;
    }
    PyErr_Clear();
    tack_py_exception_restore(refusal);
    return NULL;
}

static const char *const from_dlpack_kwnames[] = {"device", "copy", NULL};

/* A producer's C table skips the Python-level __dlpack__ call. The table
 * does not synchronise streams, so it serves host memory only; device
 * memory takes __dlpack__, which orders the producer's work. 1 where the
 * table answered, with *out set (the array, or NULL with an exception);
 * 0 where __dlpack__ is to be asked. */
static int import_by_table(PyObject *source, tack_device *device, tack_device *fallback, tack_array **out)
{
    *out = NULL;
    struct producer_type producer = producer_type(Py_TYPE(source));
    int grad = producer.api ? requires_grad(&producer, source) : 0;
    if (grad < 0)
        return 1;
    const DLPackExchangeAPI *api = producer.api && !grad ? producer.api : NULL;
    /* NumPy's and most producers' types have no bits to ask: not even a
     * call for them. */
    if (!api)
        return producer.is_neg && lazy_bits_refused(&producer, source, -1);
    DLManagedTensorVersioned *m = NULL;
    if (api->managed_tensor_from_py_object_no_sync(source, &m) == 0 && m) {
        /* Asked after the export, which says whether the tensor is
         * complex: a real one costs one question. */
        int ours = m->version.major == DLPACK_MAJOR_VERSION;
        if (lazy_bits_refused(&producer, source, ours ? m->dl_tensor.dtype.code == kDLComplex : -1)) {
            if (m->deleter)
                m->deleter(m);
            return 1;
        }
        if (ours && m->dl_tensor.device.device_type == kDLCPU) {
            int deleter_called;
            tack_array *a;
            tack_status st = tack_array_from_dlpack_versioned(m, device, fallback, &a, &deleter_called);
            if (st != TACK_OK && !deleter_called && m->deleter)
                m->deleter(m);
            if (st == TACK_OK)
                *out = a;
            else
                tack_py_raise(st);
            return 1;
        }
        /* Device memory goes to __dlpack__, the bits already read. */
        if (m->deleter)
            m->deleter(m);
        return 0;
    }
    /* A refusal is answered by __dlpack__ below, with the producer's
     * own exception (BufferError for a sparse tensor, say). */
    if (PyErr_Occurred() && tack_py_exception_must_propagate())
        return 1;
    PyErr_Clear();
    return lazy_bits_refused(&producer, source, -1);
}

/* The array over the tensor a DLPack capsule holds; the capsule is marked
 * used once Tack owns the tensor. NULL with an exception. */
static tack_array *import_capsule(PyObject *capsule, tack_device *device, tack_device *fallback)
{
    const char *name = PyCapsule_GetName(capsule);
    int versioned = name && !strcmp(name, "dltensor_versioned");
    if (!versioned && !(name && !strcmp(name, "dltensor"))) {
        PyErr_Format(PyExc_ValueError,
                     "the DLPack capsule is named '%s', not 'dltensor' or 'dltensor_versioned': it was already "
                     "consumed; ask the producer for a new one",
                     name ? name : "(null)");
        return NULL;
    }
    tack_array *a;
    tack_status st;
    if (versioned) {
        int deleter_called;
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, name);
        if (!m)
            return NULL;
        st = tack_array_from_dlpack_versioned(m, device, fallback, &a, &deleter_called);
        if (st == TACK_OK || deleter_called)
            PyCapsule_SetName(capsule, "used_dltensor_versioned");
    } else {
        DLManagedTensor *m = PyCapsule_GetPointer(capsule, name);
        if (!m)
            return NULL;
        st = tack_array_from_dlpack(m, device, fallback, &a);
        if (st == TACK_OK)
            PyCapsule_SetName(capsule, "used_dltensor");
    }
    if (st != TACK_OK) {
        tack_py_raise(st);
        return NULL;
    }
    return a;
}

tack_array *tack_py_dlpack_share(PyObject *source, tack_device *device)
{
    tack_device *fallback = tack_py_default_device();
    if (!fallback)
        return NULL;
    if (PyCapsule_CheckExact(source))
        return import_capsule(source, device, fallback);
    tack_array *a;
    if (import_by_table(source, device, fallback, &a))
        return a;
    PyObject *stream = consumer_stream(source, device, fallback);
    if (!stream && PyErr_Occurred())
        return NULL;
    PyObject *capsule = request_capsule(source, stream);
    Py_XDECREF(stream);
    if (!capsule)
        return NULL;
    a = import_capsule(capsule, device, fallback);
    Py_DECREF(capsule);
    return a;
}

PyObject *tack_py_from_dlpack(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)module;
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "from_dlpack() takes exactly one positional argument (%zd given)", nargs);
        return NULL;
    }
    PyObject *vals[2] = {NULL, NULL};
    if (tack_py_keywords("from_dlpack", kwnames, args + nargs, from_dlpack_kwnames, vals) < 0)
        return NULL;
    PyObject *source = args[0], *device_obj = vals[0] ? vals[0] : Py_None;
    if (vals[1]) {
        int copy = PyObject_IsTrue(vals[1]);
        if (copy < 0)
            return NULL;
        if (copy)
            return import_copy(source, device_obj);
    }
    tack_device *device = NULL;
    if (device_obj != Py_None && !tack_py_device_converter(device_obj, &device))
        return NULL;
    tack_array *a = tack_py_dlpack_share(source, device);
    tack_device_release(device);
    return a ? tack_py_array_new(a) : NULL;
}

int tack_py_dlpack_init(PyObject *m)
{
    (void)m;
    str_dlpack = PyUnicode_InternFromString("__dlpack__");
    str_exchange_api = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
    str_requires_grad = PyUnicode_InternFromString("requires_grad");
    str_is_conj = PyUnicode_InternFromString("is_conj");
    str_is_neg = PyUnicode_InternFromString("is_neg");
    str_max_version = PyUnicode_InternFromString("max_version");
    kwnames_max_version = str_max_version ? PyTuple_Pack(1, str_max_version) : NULL;
    version_1_0 = Py_BuildValue("(ii)", 1, 0);
    str_dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
    kwnames_max_version_stream = Py_BuildValue("(ss)", "max_version", "stream");
    kwnames_stream = Py_BuildValue("(s)", "stream");
    if (!str_dlpack_device || !kwnames_max_version_stream || !kwnames_stream || !str_exchange_api || !str_is_conj ||
        !str_is_neg)
        return -1;
    return str_dlpack && kwnames_max_version && version_1_0 ? 0 : -1;
}
