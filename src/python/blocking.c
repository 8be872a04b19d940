/* C calls that may wait a long time (a socket, a compiler process), made
 * with the GIL released. The C library's waits call back when a signal
 * interrupts them; the callback takes the GIL back and runs the Python
 * signal handlers, so that Ctrl-C raises KeyboardInterrupt at once, and a
 * handler that raises nothing lets the wait go on, as PEP 475 has
 * blocking calls do. */
#include "ext.h"

void tack_py_release(tack_py_released *r) { r->state = PyEval_SaveThread(); }

void tack_py_reacquire(tack_py_released *r) { PyEval_RestoreThread(r->state); }

int tack_py_signals_raised(void *context)
{
    tack_py_released *r = context;
    PyEval_RestoreThread(r->state);
    int raised = PyErr_CheckSignals() < 0;
    r->state = PyEval_SaveThread();
    return raised;
}

void tack_py_compile_begin(tack_py_released *r)
{
    tack_py_release(r);
    tack_kernel_set_interrupt(tack_py_signals_raised, r);
}

void tack_py_compile_end(tack_py_released *r)
{
    tack_kernel_set_interrupt(NULL, NULL);
    tack_py_reacquire(r);
}
