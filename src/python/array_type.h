/* What the files of tack.Array share: the type (array.c) is assembled from
 * its host protocols (array_protocols.c), its refused element access and
 * comparisons (array_elements.c) and its copying and pickling
 * (array_pickle.c). Private to the extension. */
#ifndef TACK_PY_ARRAY_TYPE_H
#define TACK_PY_ARRAY_TYPE_H

#include "ext.h"

#define ARR(o) TACK_PY_ARRAY(o)

static inline int is_host(const tack_array *a)
{
    return tack_device_dl_device(tack_array_device(a)).device_type == kDLCPU;
}

/* array_protocols.c. The interned keys and typestrs the interfaces use,
 * made once at import; -1 with an exception. */
int tack_py_array_interface_init(void);
extern PyBufferProcs tack_py_array_as_buffer;
PyObject *tack_py_get_array_interface(PyObject *self, void *c);
PyObject *tack_py_get_cuda_array_interface(PyObject *self, void *c);
PyObject *tack_py_array_array(PyObject *self, PyObject *args, PyObject *kwargs);

/* array_elements.c. */
extern PyMappingMethods tack_py_array_as_mapping;
extern PyNumberMethods tack_py_array_as_number;
extern PySequenceMethods tack_py_array_as_sequence;
PyObject *tack_py_array_iter(PyObject *self);
PyObject *tack_py_array_richcompare(PyObject *self, PyObject *other, int op);
Py_hash_t tack_py_array_hash(PyObject *self);

/* array_pickle.c. Adds _rebuild_array to the module and looks up what
 * pickling calls; -1 with an exception. */
PyObject *tack_py_array_copy(PyObject *self, PyObject *unused);
PyObject *tack_py_array_deepcopy(PyObject *self, PyObject *memo);
PyObject *tack_py_array_reduce_ex(PyObject *self, PyObject *arg);
int tack_py_array_pickle_init(PyObject *m);

#endif
