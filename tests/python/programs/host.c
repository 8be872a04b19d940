/* A simulation as users write one: it links the shared libtack, steps a
 * field with a kernel compiled from C, hands the field to an embedded
 * Python analysis and takes arrays back, then loads a plugin that makes
 * Tack calls of its own.
 *
 *     host <plugin.so>          the whole program; prints one line per fact
 *     host <plugin.so> static   the plugin carries its own copy of Tack
 *
 * Every fact the test checks is a line of output; a call that fails stops
 * the program (exit 1). A successful call that leaves a message behind is
 * reported ("message left after ...") and the program goes on, so that one
 * broken promise does not hide the others. */
#include <tack/python.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int messages_left;
static char last_seen[8192];

/* A message still there after later successes is the same one left
 * behind: reported once, where it appeared. */
static void after_success(const char *call)
{
    const char *message = tack_last_error();
    if (message[0] != '\0' && strncmp(message, last_seen, sizeof last_seen - 1) != 0) {
        printf("message left after %s: %s\n", call, message);
        snprintf(last_seen, sizeof last_seen, "%s", message);
        messages_left++;
    }
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        tack_status status_ = (call);                                                              \
        if (status_ != TACK_OK) {                                                                  \
            printf("failed: %s: %s: %s\n", #call, tack_status_name(status_), tack_last_error());   \
            fflush(stdout);                                                                        \
            _Exit(1);                                                                              \
        }                                                                                          \
        after_success(#call);                                                                      \
    } while (0)

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("failed: %s (line %d)\n", #cond, __LINE__);                                     \
            fflush(stdout);                                                                        \
            _Exit(1);                                                                              \
        }                                                                                          \
    } while (0)

#define N 4096

typedef int (*plugin_run_fn)(tack_device *host_cpu, tack_array *field, long host_arrays, const char **said);

/* The analysis gets the field as a tack.Array and must see the C memory. */
static const char ANALYSIS[] =
    "import numpy as np, tack, tack._tack\n"
    "def analyse(field, address, c_arrays):\n"
    "    assert field.ptr == address, (hex(field.ptr), hex(address))\n"
    "    view = np.from_dlpack(field)\n"
    "    assert view.ctypes.data == address\n"
    "    assert np.array_equal(view, np.arange(view.size, dtype=np.float32) + 1), view[:4]\n"
    "    assert dict(tack._tack.live_counts())['arrays'] == c_arrays, (tack._tack.live_counts(), c_arrays)\n"
    "    k = tack.Kernel('void twice(tack_index i, float *u) { u[i] *= 2; }')\n"
    "    k(field)\n"
    "    made = np.full(view.size, 7, dtype=np.float32)\n"
    "    return view, made, made.ctypes.data, float(view[3])\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: host <plugin.so> [static]\n");
        return 2;
    }
    int static_plugin = argc > 2 && strcmp(argv[2], "static") == 0;

    tack_device *cpu = NULL;
    tack_array *field = NULL;
    tack_kernel *ramp = NULL;
    int64_t n = N;
    TRY(tack_device_open("cpu", NULL, 0, &cpu));
    TRY(tack_array_empty(cpu, TACK_F32, 1, &n, 0, &field));
    /* The cache is fresh: this is the first compile and the first store. */
    TRY(tack_kernel_compile("void ramp(tack_index i, float *u) { u[i] = (float)i + 1; }", NULL, cpu, &ramp));
    tack_arg arg = tack_arg_array(field);
    TRY(tack_kernel_launch(ramp, cpu, n, &arg, 1));
    TRY(tack_device_synchronize(cpu));
    float *data = tack_array_data(field);
    after_success("tack_array_data");
    EXPECT(data[0] == 1.0f && data[N - 1] == (float)N);
    printf("C kernel: %g %g\n", data[0], data[N - 1]);

    if (static_plugin) {
        /* The host's copy of Tack is in use; now another one arrives. */
        void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!plugin) {
            printf("failed: dlopen: %s\n", dlerror());
            return 1;
        }
        plugin_run_fn run = (plugin_run_fn)(uintptr_t)dlsym(plugin, "plugin_run");
        EXPECT(run);
        const char *said = "";
        int rc = run(cpu, field, tack_array_live_count(), &said);
        printf("static plugin: %d\n", rc);
        printf("static plugin said: %s\n", said);
        /* Whatever the plugin's copy did, the host's goes on unharmed. */
        TRY(tack_kernel_launch(ramp, cpu, n, &arg, 1));
        TRY(tack_device_synchronize(cpu));
        EXPECT(data[7] == 8.0f);
        printf("host after the static plugin: %g\n", data[7]);
        printf("messages left: %d\n", messages_left);
        fflush(stdout);
        _Exit(0);
    }

    /* The analysis, in Python, on the same memory. */
    Py_Initialize();
    if (tack_py_import() < 0) {
        PyErr_Print();
        return 1;
    }
    PyObject *globals = PyDict_New();
    PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
    PyObject *ran = PyRun_String(ANALYSIS, Py_file_input, globals, globals);
    if (!ran) {
        PyErr_Print();
        return 1;
    }
    Py_DECREF(ran);
    PyObject *as_python = tack_py_from_array(field);
    if (!as_python) {
        PyErr_Print();
        return 1;
    }
    PyObject *result = PyObject_CallFunction(PyDict_GetItemString(globals, "analyse"), "OKl", as_python,
                                             (unsigned long long)(uintptr_t)data, tack_array_live_count());
    if (!result) {
        PyErr_Print();
        return 1;
    }
    /* Back from Python: the NumPy view of the field is the field's memory,
     * and the array Python made is taken as it is. */
    tack_array *back = tack_py_to_array(PyTuple_GetItem(result, 0));
    tack_array *made = tack_py_to_array(PyTuple_GetItem(result, 1));
    if (!back || !made) {
        PyErr_Print();
        return 1;
    }
    uintptr_t made_at = (uintptr_t)PyLong_AsUnsignedLongLong(PyTuple_GetItem(result, 2));
    printf("Python's kernel: %g (Python read %g)\n", data[3], PyFloat_AsDouble(PyTuple_GetItem(result, 3)));
    printf("round trip same memory: %d\n", tack_array_data(back) == (void *)data);
    printf("Python's array same memory: %d\n", (uintptr_t)tack_array_data(made) == made_at);
    float made_values[N];
    TRY(tack_array_copy_to_host(made, made_values, sizeof made_values));
    printf("Python's array: %g %g\n", made_values[0], made_values[N - 1]);

    /* A plugin that uses Tack itself, on the host's field. */
    void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!plugin) {
        printf("failed: dlopen: %s\n", dlerror());
        return 1;
    }
    plugin_run_fn run = (plugin_run_fn)(uintptr_t)dlsym(plugin, "plugin_run");
    EXPECT(run);
    const char *said = "";
    int rc = run(cpu, field, tack_array_live_count(), &said);
    printf("plugin: %d %s\n", rc, said);
    printf("plugin's kernel: %g\n", data[3]);

    tack_array_release(back);
    tack_array_release(made);
    Py_DECREF(result);
    Py_DECREF(as_python);
    tack_kernel_release(ramp);
    tack_array_release(field);
    tack_device_release(cpu);
    printf("messages left: %d\n", messages_left);
    fflush(stdout);
    /* Python is not finalized: the program ends as simulations do. */
    _Exit(0);
}
