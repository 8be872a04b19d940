/* What the Kernel type's files share. Not installed. */
#ifndef TACK_PY_KERNEL_H
#define TACK_PY_KERNEL_H

#include "../ext.h"

/* Kernel()'s build options as a tack_kernel_options whose strings `keep`
 * (a list) holds alive; free with tack_py_kernel_options_free. -1 with
 * TypeError or ValueError naming the option (options.c). */
int tack_py_kernel_options(PyObject *checked, PyObject *defines, PyObject *include_dirs, PyObject *options,
                           PyObject *keep, tack_kernel_options *out);
void tack_py_kernel_options_free(tack_kernel_options *o);

#endif
