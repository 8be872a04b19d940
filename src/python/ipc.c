/* Cross-process arrays: registered by tack_py_ipc_init. */
#include "ext.h"

int tack_py_ipc_init(PyObject *module)
{
    (void)module;
    return 0;
}
