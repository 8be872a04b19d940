/* An in-situ simulation: a C code steps the heat equation with a Tack
 * kernel and hands its field to a Python analysis (analysis.py) every few
 * steps, without a copy, through <tack/python.h>.
 *
 *     heat [<folder for the PNGs>]
 *
 * Checks as it goes that Python saw the field at the simulation's own
 * address and summed what C sums, and at the end that no array, buffer or
 * export is left alive on either side; prints "ok" last. */
#include <tack/python.h> /* first: it includes <Python.h> */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 128      /* the grid is N x N */
#define STEPS 400
#define EVERY 100  /* steps between analyses */

static const char *step_source =
    "void heat_step(tack_index i, tack_index j, int64_t n, float alpha, const float *u, float *v)\n"
    "{\n"
    "    tack_index k = i * n + j;\n"
    "    if (i == 0 || j == 0 || i == n - 1 || j == n - 1) { v[k] = 0.0f; return; }\n"
    "    v[k] = u[k] + alpha * (u[k - n] + u[k + n] + u[k - 1] + u[k + 1] - 4.0f * u[k]);\n"
    "}\n";

#define TRY(call)                                                                                                     \
    do {                                                                                                              \
        tack_status st_ = (call);                                                                                     \
        if (st_ != TACK_OK) {                                                                                         \
            fprintf(stderr, "heat.c:%d: %s: %s\n", __LINE__, tack_status_name(st_), tack_last_error());              \
            exit(1);                                                                                                  \
        }                                                                                                             \
    } while (0)

/* A Python call that returned NULL (or -1) left an exception: print it. */
#define PY_TRY(ok)                                                                                                    \
    do {                                                                                                              \
        if (!(ok)) {                                                                                                  \
            fprintf(stderr, "heat.c:%d: Python failed:\n", __LINE__);                                                 \
            PyErr_Print();                                                                                            \
            exit(1);                                                                                                  \
        }                                                                                                             \
    } while (0)

#define EXPECT(cond)                                                                                                  \
    do {                                                                                                              \
        if (!(cond)) {                                                                                                \
            fprintf(stderr, "heat.c:%d: expected %s\n", __LINE__, #cond);                                             \
            exit(1);                                                                                                  \
        }                                                                                                             \
    } while (0)

static double item(PyObject *dict, const char *key)
{
    PyObject *v = PyDict_GetItemString(dict, key); /* borrowed */
    PY_TRY(v);
    double d = PyLong_Check(v) ? (double)PyLong_AsUnsignedLongLong(v) : PyFloat_AsDouble(v);
    PY_TRY(!PyErr_Occurred());
    return d;
}

static unsigned long long address(PyObject *dict, const char *key)
{
    PyObject *v = PyDict_GetItemString(dict, key);
    PY_TRY(v);
    unsigned long long a = PyLong_AsUnsignedLongLong(v);
    PY_TRY(!PyErr_Occurred());
    return a;
}

/* The libtack files mapped into this process, the last one found in
 * *path (a static buffer). One when Python's tack bound to the libtack
 * this program links; two copies of Tack would mean two device
 * registries, two worker pools and two atomics gates. */
static int libtack_mappings(const char **path)
{
    static char seen[8192];
    char line[4096];
    int n = 0;
    seen[0] = 0;
    *path = NULL;
    FILE *maps = fopen("/proc/self/maps", "r");
    EXPECT(maps);
    while (fgets(line, sizeof line, maps)) {
        char *p = strchr(line, '/');
        if (p && strstr(p, "/libtack.so") && !strstr(seen, p)) {
            n++;
            *path = seen + strlen(seen);
            strncat(seen, p, sizeof seen - strlen(seen) - 1);
        }
    }
    fclose(maps);
    return n;
}

static long python_live(PyObject *analysis)
{
    PyObject *r = PyObject_CallMethod(analysis, "live_arrays", NULL);
    PY_TRY(r);
    long n = PyLong_AsLong(r);
    Py_DECREF(r);
    return n;
}

int main(int argc, char **argv)
{
    const char *out_dir = argc > 1 ? argv[1] : NULL;

    /* Python, with analysis.py importable, and the bridge. */
    Py_Initialize();
    PyObject *path = PySys_GetObject("path"); /* borrowed */
    PyObject *here = PyUnicode_FromString(ANALYSIS_DIR);
    PY_TRY(path && here && PyList_Insert(path, 0, here) == 0);
    Py_DECREF(here);
    PY_TRY(tack_py_import() == 0);
    PyObject *analysis = PyImport_ImportModule("analysis");
    PY_TRY(analysis);
    /* The tack module is loaded now: one Tack in the process. */
    const char *lib;
    EXPECT(libtack_mappings(&lib) == 1);
    printf("one libtack in the process, shared by C and Python: %s", lib);
    long python_before = python_live(analysis);

    /* The field u and its next state v, a hot square in the middle. */
    tack_device *cpu = NULL;
    TRY(tack_device_open("cpu", NULL, 0, &cpu));
    int64_t shape[2] = {N, N};
    tack_array *u = NULL, *v = NULL;
    TRY(tack_array_empty(cpu, TACK_F32, 2, shape, 0, &u));
    TRY(tack_array_empty(cpu, TACK_F32, 2, shape, 0, &v));
    float *start = malloc(sizeof(float) * N * N);
    EXPECT(start);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            start[i * N + j] = (abs(i - N / 2) < N / 8 && abs(j - N / 2) < N / 8) ? 100.0f : 0.0f;
    TRY(tack_array_copy_from_host(u, start, sizeof(float) * N * N));
    free(start);

    tack_kernel *step = NULL;
    TRY(tack_kernel_compile(step_source, NULL, cpu, &step));
    printf("heat: %d x %d grid, %d steps on %s, analysed in Python every %d\n", N, N, STEPS, tack_device_name(cpu),
           EVERY);

    for (int s = 1; s <= STEPS; s++) {
        /* The stepping needs no Python: other Python threads may run. */
        tack_status st;
        Py_BEGIN_ALLOW_THREADS
        tack_arg args[4] = {tack_arg_i64(N), tack_arg_f32(0.2f), tack_arg_array(u), tack_arg_array(v)};
        st = tack_kernel_launch_nd(step, cpu, 2, shape, args, 4);
        Py_END_ALLOW_THREADS
        TRY(st);
        tack_array *t = u;
        u = v;
        v = t;
        if (s % EVERY)
            continue;

        /* Hand u to Python: a tack.Array over this very memory. */
        PyObject *field = tack_py_from_array(u);
        PY_TRY(field);
        PyObject *r = PyObject_CallMethod(analysis, "analyze", "Ois", field, s, out_dir);
        PY_TRY(r && PyDict_Check(r));
        Py_DECREF(field);

        /* Zero copy: both NumPy and Tack read the simulation's address. */
        unsigned long long mine = (unsigned long long)(uintptr_t)tack_array_data(u);
        EXPECT(address(r, "numpy_address") == mine);
        EXPECT(address(r, "tack_address") == mine);
        /* And what Python summed is what is here. */
        const float *f = tack_array_data(u);
        double total = 0;
        for (int k = 0; k < N * N; k++)
            total += f[k];
        EXPECT(fabs(item(r, "total") - total) <= 1e-9 * fabs(total) + 1e-6);
        printf("step %3d: total heat %.1f, peak %.3f, steepest gradient %.3f, field at 0x%llx in C, NumPy and "
               "Tack%s\n",
               s, item(r, "total"), item(r, "peak"), item(r, "steepest"), mine, out_dir ? ", PNG written" : "");
        Py_DECREF(r);
    }

    /* Every count back to zero: C's objects, and Python's, whose last
     * references went with the analysis' objects. */
    tack_kernel_release(step);
    tack_array_release(u);
    tack_array_release(v);
    tack_device_release(cpu);
    EXPECT(tack_array_live_count() == 0 && tack_buffer_live_count() == 0 && tack_dlpack_live_exports() == 0);
    EXPECT(python_live(analysis) == python_before);
    printf("every array, buffer and export released, in C and in Python\n");
    Py_DECREF(analysis);
    EXPECT(Py_FinalizeEx() == 0);
    printf("ok\n");
    return 0;
}
