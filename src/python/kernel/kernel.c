/* tack.Kernel: registered by the kernels layer. */
#include "../ext.h"

int tack_py_kernel_init(PyObject *module)
{
    (void)module;
    return 0;
}
