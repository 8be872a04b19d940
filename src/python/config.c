/* What the extension tells the C library about the interpreter it runs in,
 * and the facts tack.show_config() prints, gathered by the C library. */
#include "ext.h"

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

int tack_py_config_init(PyObject *m)
{
    (void)m;
    return name_interpreter();
}
