/* A C program that embeds Python and hands arrays across <tack/python.h>,
 * built and run by test_python_bridge.py:
 *
 *     bridge_program roundtrip    C -> Python -> C, and NumPy -> C
 *     bridge_program mismatch     a table of another ABI version is refused
 *     bridge_program missing      no tack module: tack_py_import fails cleanly
 *     bridge_program unimported   the bridge used before tack_py_import
 *     bridge_program atomics      a C thread and Python's histogram on one array
 *     bridge_program foreign      the same, Python passing the address to a library
 *     bridge_program finalized    each wrapper after Py_FinalizeEx fails with Tack's message
 *
 * Each prints "ok <mode>" last; a failed check prints where and exits 1. */
#include <tack/python.h>

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(cond)                                                                                                   \
    do {                                                                                                              \
        if (!(cond)) {                                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                                \
            if (PyErr_Occurred())                                                                                     \
                PyErr_Print();                                                                                        \
            exit(1);                                                                                                  \
        }                                                                                                             \
    } while (0)

/* Runs `code` with `x` bound to `obj`; returns globals()["result"] (new). */
static PyObject *run_with(const char *code, PyObject *obj)
{
    PyObject *globals = PyDict_New();
    CHECK(globals);
    CHECK(PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) == 0);
    if (obj)
        CHECK(PyDict_SetItemString(globals, "x", obj) == 0);
    PyObject *r = PyRun_String(code, Py_file_input, globals, globals);
    CHECK(r);
    Py_DECREF(r);
    PyObject *result = PyDict_GetItemString(globals, "result");
    Py_XINCREF(result);
    Py_DECREF(globals);
    return result;
}

static unsigned long long as_address(PyObject *o)
{
    CHECK(o && PyLong_Check(o));
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    CHECK(!PyErr_Occurred());
    Py_DECREF(o);
    return v;
}

/* The distinct libtack files mapped into this process: with the program
 * linked against the package's libtack, the extension binds to that same
 * file by its SONAME, so 1. Printed for the test to read as well. */
static int libtack_mappings(void)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    CHECK(maps);
    char line[4096], seen[8192] = "";
    int n = 0;
    while (fgets(line, sizeof line, maps)) {
        char *path = strchr(line, '/');
        if (path && strstr(path, "/libtack.so") && !strstr(seen, path)) {
            n++;
            strncat(seen, path, sizeof seen - strlen(seen) - 1);
            printf("libtack mapping: %s", path);
        }
    }
    fclose(maps);
    return n;
}

/* The threads of this process. */
static int threads(void)
{
    DIR *d = opendir("/proc/self/task");
    CHECK(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* One worker pool: a parallel kernel launched from C starts it, one
 * launched from Python uses it and starts no other. */
static void one_pool(void)
{
    tack_device *cpu;
    CHECK(tack_device_open("cpu", NULL, 0, &cpu) == TACK_OK);
    int64_t n = 1 << 16;
    tack_array *u;
    CHECK(tack_array_empty(cpu, TACK_F32, 1, &n, 0, &u) == TACK_OK);
    tack_kernel *k;
    CHECK(tack_kernel_compile("void inc(tack_index i, float *u) { u[i] = 1; }", NULL, cpu, &k) == TACK_OK);
    tack_arg arg = tack_arg_array(u);
    CHECK(tack_kernel_launch(k, cpu, n, &arg, 1) == TACK_OK);
    int after_c = threads();
    PyObject *r = run_with("import tack\n"
                           "k = tack.Kernel('void twice(tack_index i, float *u) { u[i] *= 2; }')\n"
                           "u = tack.zeros(1 << 16, tack.f32)\n"
                           "k(u)\n"
                           "result = 0\n",
                           NULL);
    CHECK(r);
    Py_DECREF(r);
    int after_python = threads();
    printf("threads: %d after C's kernel, %d after Python's\n", after_c, after_python);
    CHECK(after_c == after_python);
    tack_kernel_release(k);
    tack_array_release(u);
    tack_device_release(cpu);
}

/* Live arrays and buffers, checked to be what Python counts too: one
 * libtack, one set of counters, so an array made in C is one Python sees. */
static long live(void)
{
    PyObject *r = run_with("import tack\nc = tack._tack.live_counts()\nresult = c['arrays'] + c['buffers']", NULL);
    CHECK(r && PyLong_Check(r));
    long python_side = PyLong_AsLong(r);
    Py_DECREF(r);
    long c_side = tack_array_live_count() + tack_buffer_live_count();
    CHECK(python_side == c_side);
    return c_side;
}

static void roundtrip(void)
{
    CHECK(tack_py_import() == 0);
    CHECK(tack_py_import() == 0); /* again: harmless */
    /* Importing tack loaded no second Tack beside the one linked here. */
    CHECK(libtack_mappings() == 1);
    one_pool();
    long before = live();

    tack_device *cpu;
    CHECK(tack_device_open("cpu", NULL, 0, &cpu) == TACK_OK);
    int64_t shape[2] = {4, 5};
    tack_array *a;
    CHECK(tack_array_empty(cpu, TACK_F32, 2, shape, 0, &a) == TACK_OK);
    float values[20];
    for (int i = 0; i < 20; i++)
        values[i] = (float)i;
    CHECK(tack_array_copy_from_host(a, values, sizeof values) == TACK_OK);
    float *data = tack_array_data(a);
    CHECK(live() == before + 2); /* the array and its buffer, seen from Python too */

    /* C -> Python: the same memory, seen by Tack and by NumPy, written by
     * NumPy and read back in C. */
    PyObject *obj = tack_py_from_array(a);
    CHECK(obj);
    /* Python may pass it on where Tack cannot see: no launch may treat it
     * as private memory any more. */
    CHECK(tack_buffer_is_shared(tack_array_buffer(a)));
    PyObject *type = run_with("import tack\nresult = tack.Array", NULL);
    CHECK(Py_TYPE(obj) == (PyTypeObject *)type);
    Py_DECREF(type);
    CHECK(as_address(PyObject_GetAttrString(obj, "ptr")) == (unsigned long long)(uintptr_t)data);
    CHECK(as_address(run_with("import numpy as np\nv = np.asarray(x)\nresult = v.__array_interface__['data'][0]",
                              obj)) == (unsigned long long)(uintptr_t)data);
    PyObject *sum = run_with("import numpy as np\nv = np.asarray(x)\nresult = float(v.sum())\nv[3, 4] = -1", obj);
    CHECK(sum && PyFloat_AsDouble(sum) == 190.0);
    Py_DECREF(sum);
    CHECK(data[19] == -1.0f);

    /* Python -> C: the same tack_array, retained. */
    tack_array *back = tack_py_to_array(obj);
    CHECK(back == a);
    CHECK(tack_array_data(back) == data);
    tack_array_release(back);

    /* Python's object outlives C's reference: the memory stays valid. */
    tack_array_release(a);
    PyObject *after = run_with("import numpy as np\nresult = float(np.asarray(x)[3, 4])", obj);
    CHECK(after && PyFloat_AsDouble(after) == -1.0);
    Py_DECREF(after);
    Py_DECREF(obj);

    /* NumPy -> C: a tack_array over the NumPy array's own memory, which it
     * keeps alive after Python drops its name for it. */
    PyObject *np_array = run_with("import numpy as np\nresult = np.arange(6, dtype=np.float64).reshape(2, 3)", NULL);
    CHECK(np_array);
    unsigned long long np_data = as_address(run_with("result = x.__array_interface__['data'][0]", np_array));
    tack_array *shared = tack_py_to_array(np_array);
    CHECK(shared);
    Py_DECREF(np_array);
    CHECK((unsigned long long)(uintptr_t)tack_array_data(shared) == np_data);
    CHECK(tack_array_dtype(shared) == TACK_F64 && tack_array_ndim(shared) == 2 && tack_array_shape(shared)[1] == 3);
    CHECK(((double *)tack_array_data(shared))[5] == 5.0);
    /* Released without the GIL, as a simulation's thread may: the release
     * of NumPy's array takes it. */
    Py_BEGIN_ALLOW_THREADS
    tack_array_release(shared);
    Py_END_ALLOW_THREADS

    /* Not an array: NULL with tack.asarray's TypeError. */
    PyObject *text = PyUnicode_FromString("not an array");
    CHECK(tack_py_to_array(text) == NULL);
    CHECK(PyErr_ExceptionMatches(PyExc_TypeError));
    PyErr_Clear();
    Py_DECREF(text);
    CHECK(tack_py_from_array(NULL) == NULL && PyErr_ExceptionMatches(PyExc_ValueError));
    PyErr_Clear();

    tack_device_release(cpu);
    CHECK(live() == before);
    CHECK(tack_array_live_count() == 0 && tack_buffer_live_count() == 0 && tack_dlpack_live_exports() == 0);
}

static void mismatch(void)
{
    /* tack._tack publishing a table of the next ABI version. */
    static tack_py_api newer;
    newer.abi_version = TACK_PY_ABI_VERSION + 1;
    newer.tack_version = TACK_VERSION_MAJOR * 10000u + TACK_VERSION_MINOR * 100u;
    PyObject *module = PyImport_ImportModule("tack._tack");
    CHECK(module);
    PyObject *capsule = PyCapsule_New(&newer, TACK_PY_CAPSULE_NAME, NULL);
    CHECK(capsule && PyObject_SetAttrString(module, "_C_API", capsule) == 0);
    Py_DECREF(capsule);
    CHECK(tack_py_import() == -1);
    CHECK(PyErr_ExceptionMatches(PyExc_ImportError));
    PyObject *exc_type, *exc, *traceback;
    PyErr_Fetch(&exc_type, &exc, &traceback);
    PyObject *text = PyObject_Str(exc);
    const char *s = PyUnicode_AsUTF8(text);
    CHECK(s && strstr(s, "ABI version 2") && strstr(s, "built against ABI version 1"));
    printf("%s\n", s);
    Py_DECREF(text);
    Py_XDECREF(exc_type);
    Py_XDECREF(exc);
    Py_XDECREF(traceback);
    /* The bridge stays unusable: a clean error, not a call through the table. */
    CHECK(tack_py_from_array(NULL) == NULL && PyErr_ExceptionMatches(PyExc_RuntimeError));
    PyErr_Clear();
    /* Another Tack minor version's table is refused the same way. */
    newer.abi_version = TACK_PY_ABI_VERSION;
    newer.tack_version = TACK_VERSION_MAJOR * 10000u + (TACK_VERSION_MINOR + 1) * 100u;
    CHECK(tack_py_import() == -1 && PyErr_ExceptionMatches(PyExc_ImportError));
    PyErr_Clear();
    Py_DECREF(module);
}

static void missing(void)
{
    PyObject *r = run_with("import sys\nsys.modules['tack'] = None\nresult = 0", NULL);
    Py_XDECREF(r);
    CHECK(tack_py_import() == -1);
    CHECK(PyErr_ExceptionMatches(PyExc_ImportError));
    PyErr_Print();
}

static void unimported(void)
{
    tack_device *cpu;
    CHECK(tack_device_open("cpu", NULL, 0, &cpu) == TACK_OK);
    int64_t n = 3;
    tack_array *a;
    CHECK(tack_array_empty(cpu, TACK_F32, 1, &n, 0, &a) == TACK_OK);
    CHECK(tack_py_from_array(a) == NULL && PyErr_ExceptionMatches(PyExc_RuntimeError));
    PyErr_Print();
    tack_array_release(a);
    tack_device_release(cpu);
}

/* The histogram both sides launch, and how much each does a run. */
#define HIST "void hist(tack_index i, const uint8_t *v, uint32_t *bins) { tack_atomic_add(&bins[v[i]], 1u); }"
#define VALUES 400000
#define LAUNCHES 50
#define RUNS 10
#define STR_(x) #x
#define STR(x) STR_(x)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

struct c_side {
    tack_kernel *kernel;
    tack_device *device;
    tack_array *values, *bins;
    atomic_int *go;
    tack_status status;
    double start, end;
};

static void *c_thread(void *arg)
{
    struct c_side *c = arg;
    /* Started together with Python's launches, so that the two overlap. */
    while (!atomic_load(c->go))
        ;
    tack_arg args[2] = {tack_arg_array(c->values), tack_arg_array(c->bins)};
    c->start = now();
    for (int i = 0; i < LAUNCHES && c->status == TACK_OK; i++)
        c->status = tack_kernel_launch(c->kernel, c->device, VALUES, args, 2);
    c->end = now();
    return NULL;
}

/* A library that knows nothing of Tack, to which Python passes the
 * addresses of arrays (ctypes, as a binding would): its own histogram, by
 * hardware atomics. */
static void library_hist(const uint8_t *v, uint32_t *bins, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        atomic_fetch_add_explicit((_Atomic uint32_t *)&bins[v[i]], 1u, memory_order_relaxed);
}

/* A C thread and the embedded Python launch the same tack_atomic_add
 * histogram at once on one array allocated here and handed to Python by
 * the bridge (foreign: Python hands its address on to library_hist
 * instead): every update lands, RUNS times over. */
static void atomics(int foreign)
{
    CHECK(tack_py_import() == 0);
    CHECK(libtack_mappings() == 1);
    tack_device *cpu;
    CHECK(tack_device_open("cpu", NULL, 0, &cpu) == TACK_OK);
    int64_t n = VALUES, nbins = 256;
    tack_array *values, *bins;
    CHECK(tack_array_empty(cpu, TACK_U8, 1, &n, 0, &values) == TACK_OK);
    CHECK(tack_array_empty(cpu, TACK_U32, 1, &nbins, 0, &bins) == TACK_OK);
    uint8_t *v = tack_array_data(values);
    uint64_t expected[256] = {0};
    for (int i = 0; i < VALUES; i++) {
        v[i] = (uint8_t)((i * 2654435761u) >> 13);
        expected[v[i]]++;
    }
    tack_kernel *kernel;
    CHECK(tack_kernel_compile(HIST, NULL, cpu, &kernel) == TACK_OK);

    PyObject *py_values = tack_py_from_array(values), *py_bins = tack_py_from_array(bins);
    CHECK(py_values && py_bins);
    CHECK(tack_buffer_is_shared(tack_array_buffer(bins)));
    PyObject *globals = PyDict_New();
    CHECK(globals && PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) == 0);
    CHECK(PyDict_SetItemString(globals, "v", py_values) == 0 && PyDict_SetItemString(globals, "bins", py_bins) == 0);
    /* Compiled and loaded on both sides before the runs, which then
     * overlap from their first launch. */
    PyObject *address = PyLong_FromUnsignedLongLong((uintptr_t)&library_hist);
    CHECK(address && PyDict_SetItemString(globals, "library_hist", address) == 0);
    Py_DECREF(address);
    PyObject *r = PyRun_String(foreign ? "import ctypes\n"
                                         "h = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)"
                                         "(library_hist)\n"
                                         "def side():\n"
                                         "    for _ in range(" STR(LAUNCHES) "):\n"
                                         "        h(v.ptr, bins.ptr, " STR(VALUES) ")\n"
                                       : "import tack\nk = tack.Kernel('" HIST "')\nk.launch(1, v, bins)\n"
                                         "def side():\n"
                                         "    for _ in range(" STR(LAUNCHES) "):\n"
                                         "        k.launch(" STR(VALUES) ", v, bins)\n",
                               Py_file_input, globals, globals);
    CHECK(r);
    Py_DECREF(r);
    tack_arg warm[2] = {tack_arg_array(values), tack_arg_array(bins)};
    CHECK(tack_kernel_launch(kernel, cpu, 1, warm, 2) == TACK_OK);
    long plain_before;
    tack_kernel_atomic_runs(&plain_before, NULL, NULL);

    long lost_total = 0;
    int overlapped = 0;
    for (int run = 0; run < RUNS; run++) {
        CHECK(tack_array_fill(bins, &(uint32_t){0}) == TACK_OK);
        atomic_int go = 0;
        struct c_side c = {kernel, cpu, values, bins, &go, TACK_OK, 0, 0};
        pthread_t thread;
        CHECK(pthread_create(&thread, NULL, c_thread, &c) == 0);
        atomic_store(&go, 1);
        double start = now();
        r = PyRun_String("side()\n", Py_file_input, globals, globals);
        double end = now();
        CHECK(pthread_join(thread, NULL) == 0);
        double overlap = (end < c.end ? end : c.end) - (start > c.start ? start : c.start);
        overlapped += overlap > 0;
        CHECK(r);
        Py_DECREF(r);
        CHECK(c.status == TACK_OK);
        const uint32_t *got = tack_array_data(bins);
        long lost = 0;
        for (int b = 0; b < 256; b++)
            lost += (long)(2 * LAUNCHES * expected[b]) - (long)got[b];
        printf("run %d: %ld of %d updates lost (C and Python launched together for %.0f of %.0f ms)\n", run, lost,
               2 * LAUNCHES * VALUES, 1e3 * overlap, 1e3 * ((end > c.end ? end : c.end) - (start < c.start ? start : c.start)));
        lost_total += lost;
    }
    long plain_after;
    tack_kernel_atomic_runs(&plain_after, NULL, NULL);
    printf("lost in all: %ld; launches with plain atomics: %ld\n", lost_total, plain_after - plain_before);
    fflush(stdout);
    CHECK(lost_total == 0);
    /* A test of nothing unless the two sides ran at the same time; on a
     * busy machine a run may find one side's thread not yet scheduled. */
    CHECK(overlapped >= RUNS / 2);
    /* Memory handed to Python never gets plain read-modify-writes. */
    CHECK(plain_after == plain_before);

    Py_DECREF(globals);
    Py_DECREF(py_values);
    Py_DECREF(py_bins);
    tack_kernel_release(kernel);
    tack_array_release(values);
    tack_array_release(bins);
    tack_device_release(cpu);
}

/* After Py_FinalizeEx no Python call may be made, PyErr_Occurred
 * included: failures print Tack's message alone. */
#define CHECK_UNINITIALIZED(cond)                                                                                     \
    do {                                                                                                              \
        if (!(cond)) {                                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s (tack_last_error: %s)\n", __FILE__, __LINE__, #cond,            \
                    tack_last_error());                                                                               \
            exit(1);                                                                                                  \
        }                                                                                                             \
    } while (0)

/* Every wrapper after Py_FinalizeEx: NULL or -1, the reason in
 * tack_last_error(), and nothing of the finalized interpreter touched
 * (`stale` is an object of it, long freed). Then a new interpreter, in
 * which the finalized one's table is not used: the bridge says to import
 * it first. */
static void finalized(void)
{
    CHECK(tack_py_import() == 0);
    tack_device *cpu;
    CHECK(tack_device_open("cpu", NULL, 0, &cpu) == TACK_OK);
    int64_t n = 4;
    tack_array *a;
    CHECK(tack_array_empty(cpu, TACK_F32, 1, &n, 0, &a) == TACK_OK);
    PyObject *obj = tack_py_from_array(a);
    CHECK(obj);
    PyObject *stale = obj;
    Py_DECREF(obj);
    CHECK(Py_FinalizeEx() == 0);

    CHECK_UNINITIALIZED(tack_py_from_array(a) == NULL);
    printf("tack_py_from_array: %s\n", tack_last_error());
    CHECK_UNINITIALIZED(strstr(tack_last_error(), "tack_py_from_array: no Python interpreter is running"));
    CHECK_UNINITIALIZED(tack_py_to_array(stale) == NULL);
    printf("tack_py_to_array: %s\n", tack_last_error());
    CHECK_UNINITIALIZED(strstr(tack_last_error(), "tack_py_to_array: no Python interpreter is running"));
    CHECK_UNINITIALIZED(tack_py_import() == -1);
    printf("tack_py_import: %s\n", tack_last_error());
    CHECK_UNINITIALIZED(strstr(tack_last_error(), "tack_py_import: no Python interpreter is running"));
    /* The array is as it was: C still uses it, and one release frees it. */
    CHECK_UNINITIALIZED(tack_array_fill(a, &(float){1.5f}) == TACK_OK);
    CHECK_UNINITIALIZED(((const float *)tack_array_data(a))[3] == 1.5f);
    tack_array_release(a);
    tack_device_release(cpu);

    Py_Initialize();
    /* Any array will do: the call stops before it. */
    CHECK(tack_py_from_array(NULL) == NULL && PyErr_ExceptionMatches(PyExc_RuntimeError));
    PyErr_Print();
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    Py_Initialize();
    if (!strcmp(argv[1], "roundtrip"))
        roundtrip();
    else if (!strcmp(argv[1], "mismatch"))
        mismatch();
    else if (!strcmp(argv[1], "missing"))
        missing();
    else if (!strcmp(argv[1], "unimported"))
        unimported();
    else if (!strcmp(argv[1], "atomics"))
        atomics(0);
    else if (!strcmp(argv[1], "foreign"))
        atomics(1);
    else if (!strcmp(argv[1], "finalized"))
        finalized();
    else
        return 2;
    CHECK(Py_FinalizeEx() == 0);
    printf("ok %s\n", argv[1]);
    return 0;
}
