/*
 * One conformance suite for every backend: the same cases (memory, queue
 * ordering, DLPack device mapping, kernel build and launch, atomics,
 * errors) run on the backend TACK_CONFORMANCE_BACKEND names, "cpu",
 * "cuda", "hip" or "level_zero"; tests/c/meson.build registers one test
 * per backend with its simulated driver (tests/sim/). A case that computes
 * something computes it on the cpu backend too and compares.
 *
 * The simulated drivers cannot run GPU code: a host stand-in for each of
 * the suite's kernels (standin.h), installed as the driver's kernel hook,
 * runs when the driver's queue reaches the launch, over every thread of
 * the grid Tack chose (a grid that misses part of the domain leaves
 * elements unwritten) and with the argument bytes Tack bound (a wrong order
 * or size computes the wrong thing). On the cpu backend the kernels are
 * compiled and run.
 *
 * Each case runs in a child process of its own with a time limit (check.h,
 * CHECK_TIMEOUT, 30 s by default), which opens the devices afresh; meson's
 * 120 s limit covers the whole file. Only the public API is used.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend.h"
#include "check.h"
#include "grid2d.h"
#include "kernels.h"
#include "sim.h"
#include "standin.h"
#include "tack/kernel.h"
#include "tack/tack.h"

/* ---- the backends ---------------------------------------------------------- */

struct backend {
    const char *name;
    DLDeviceType dl_type;
    int exports;          /* tack_array_export_memory works on an exportable array */
    const char *compiled; /* the compile error's "failed to compile..." */
    const char *line_two; /* how the compiler's log names line 2 of the kernel */
    int devices;          /* how many devices the (simulated) machine has */
    const char *library;  /* the variable naming the simulated driver; NULL: none */
    const char *host_address, *set_kernel_hook;
    enum standin_hook hook; /* how its kernel hook is called */
};

static const struct backend backends[] = {
    {.name = "cpu",
     .devices = 1,
     .dl_type = kDLCPU,
     .exports = 1,
     .compiled = "failed to compile (",
     .line_two = "kernel:2:"},
    {.name = "cuda",
     .devices = 1,
     .dl_type = kDLCUDA,
     .exports = 1,
     .compiled = "failed to compile for CUDA",
     .line_two = "kernel(2)", /* NVRTC's spelling */
     .library = "TACK_CUDA_LIBRARY",
     .host_address = "tack_sim_cuda_host_address",
     .set_kernel_hook = "tack_sim_cuda_set_kernel_hook",
     .hook = STANDIN_PARAMS},
    {.name = "hip",
     .devices = 2,
     .dl_type = kDLROCM,
     .exports = 0,
     .compiled = "failed to compile for HIP",
     .line_two = "kernel:2:",
     .library = "TACK_HIP_LIBRARY",
     .host_address = "tack_sim_hip_host_address",
     .set_kernel_hook = "tack_sim_hip_set_kernel_hook",
     .hook = STANDIN_PARAMS},
    {.name = "level_zero",
     .devices = 2,
     .dl_type = kDLOneAPI,
     .exports = 0,
     .compiled = "failed to compile for level_zero",
     .line_two = "kernel:2:",
     .library = "TACK_LEVEL_ZERO_LIBRARY",
     .host_address = "tack_sim_ze_host_address",
     .set_kernel_hook = "tack_sim_ze_set_kernel_hook",
     .hook = STANDIN_ARGS},
};

static const struct backend *backend; /* the one under test */
static tack_device *dev;              /* its device 0, in a case's child */
static tack_device *cpu;              /* the reference */


/* ---- the host stand-ins for the simulated GPUs (standin.h) ----------------- */

/* Installs the stand-ins in the simulated driver the backend loads. */
static void standins_install(void)
{
    if (backend->library)
        standin_install(sim_library(backend->library, "the simulated driver"), backend->host_address,
                        backend->set_kernel_hook, backend->hook);
}

/* ---- the suite's kernels: source, and the stand-in of each ----------------- */

/* saxpy: kernels.h's saxpy_source, standin.h's standin_saxpy. */

static const char daxpy_source[] =
    "void daxpy(tack_index i, double a, const double *x, double *y) { y[i] = a * x[i] + y[i]; }";
static void daxpy_standin(const struct standin_launch *l)
{
    const size_t n = (size_t)standin_i64(l, 0);
    const double *x = standin_memory(l, 2, n * sizeof *x);
    double a, *y = standin_memory(l, 3, n * sizeof *y);
    memcpy(&a, l->value[1], sizeof a);
    STANDIN_FOR_EACH_INDEX(l, i)
    y[i] = a * x[i] + y[i];
}
static const struct standin_model daxpy_model = {.nargs = 4, .sizes = {8, 8, 8, 8}, .run = daxpy_standin};

static const char affine_source[] =
    "void affine(tack_index i, int32_t k, int32_t *y) { y[i] = y[i] * k + (int32_t)i; }";
static void affine_standin(const struct standin_launch *l)
{
    int32_t k;
    memcpy(&k, l->value[1], sizeof k);
    int32_t *y = standin_memory(l, 2, (size_t)standin_i64(l, 0) * sizeof(int32_t));
    STANDIN_FOR_EACH_INDEX(l, i)
    y[i] = y[i] * k + (int32_t)i;
}
static const struct standin_model affine_model = {.nargs = 3, .sizes = {8, 4, 8}, .run = affine_standin};

#define HIST_BINS 16
static const char hist_source[] =
    "void hist(tack_index i, const uint8_t *v, uint32_t *bins) { tack_atomic_add(&bins[v[i]], 1u); }";
static void hist_standin(const struct standin_launch *l)
{
    const uint8_t *v = standin_memory(l, 1, (size_t)standin_i64(l, 0));
    uint32_t *bins = standin_memory(l, 2, HIST_BINS * sizeof(uint32_t));
    STANDIN_FOR_EACH_INDEX(l, i)
    bins[v[i]]++;
}
static const struct standin_model hist_model = {.nargs = 3, .sizes = {8, 8, 8}, .run = hist_standin};

/* GRID2D_SOURCE (grid2d.h), whose stand-in runs every thread of the 2-D grid. */
static void grid2d_standin(const struct standin_launch *l)
{
    struct grid2d_launch g = {.n0 = standin_i64(l, 0), .n1 = standin_i64(l, 1), .w = standin_i64(l, 2)};
    g.y = standin_memory(l, 3, (size_t)(g.n0 * g.n1) * sizeof(float));
    memcpy(g.grid, l->grid, sizeof g.grid);
    memcpy(g.block, l->block, sizeof g.block);
    grid2d_run(&g);
}
static const struct standin_model grid2d_model = {.nargs = 4, .sizes = {8, 8, 8, 8}, .run = grid2d_standin};

/* A checked kernel that writes one past the end: its entry takes y's
 * extents (48 bytes by value) and the record after y. The stand-in does
 * what the checked code does: the store in bounds, the first violation
 * into the record (in the device's memory, read back by Tack). */
static const char past_source[] = "void past(tack_index i, float *y) { y[i + 1] = 1.0f; }";
static void past_standin(const struct standin_launch *l)
{
    int64_t size, line = 1;
    memcpy(&size, l->value[2], sizeof size);
    float *y = standin_memory(l, 1, (size_t)size * sizeof *y);
    unsigned char *record = standin_memory(l, 3, 48);
    STANDIN_FOR_EACH_INDEX(l, i)
    {
        if (i + 1 < size) {
            y[i + 1] = 1.0f;
        } else if (!record[0]) {
            const uint32_t flag = 1, param = 0;
            const int64_t index = i + 1;
            memcpy(record, &flag, 4);
            memcpy(record + 4, &param, 4);
            memcpy(record + 8, &index, 8);
            memcpy(record + 16, &size, 8);
            memcpy(record + 24, &line, 8);
        }
    }
}
static const struct standin_model past_model = {.nargs = 4, .sizes = {8, 8, 48, 8}, .run = past_standin};

/* ---- helpers --------------------------------------------------------------- */

/* A case's child: the stand-ins, then the devices. */
static void open_devices(void)
{
    standins_install();
    dev = open_device(backend->name);
    cpu = open_device("cpu");
}

/* After each case: the devices go, and nothing the case made is left. */
static void close_devices(void)
{
    CHECK(standin_mismatches == 0);
    CHECK_OK(tack_device_synchronize(dev));
    tack_device_release(dev);
    tack_device_release(cpu);
    check_nothing_left();
}

static tack_array *array_from(tack_device *d, tack_dtype dtype, int64_t n, const void *values, size_t bytes)
{
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(d, dtype, 1, &n, 0, &a));
    bail_if(!a);
    if (values)
        CHECK_OK(tack_array_copy_from_host(a, values, bytes));
    return a;
}

/* Compiles `source` for device d; the case ends if it does not. */
static tack_kernel *kernel_for(tack_device *d, const char *source)
{
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_compile(source, NULL, d, &k));
    if (!k)
        fprintf(stderr, "%s\n", tack_kernel_compile_log());
    bail_if(!k);
    return k;
}

/* Launches `source` with `model` over n indices on device d, its array
 * arguments made from the host vectors in `in` (nbytes[k] bytes, dtype
 * dtypes[k]; scalars are given whole in args), and copies array `out`
 * back into `result`. */
struct call {
    const char *source;
    const struct standin_model *model;
    int64_t n;
    int nargs;
    tack_arg args[4];
    const void *in[4];
    tack_dtype dtypes[4];
    int64_t lengths[4];
    size_t nbytes[4];
    int out;
};

static void call_on(tack_device *d, const struct call *c, void *result)
{
    tack_arg args[4];
    tack_array *arrays[4] = {NULL};
    for (int k = 0; k < c->nargs; k++) {
        args[k] = c->args[k];
        if (c->in[k]) {
            arrays[k] = array_from(d, c->dtypes[k], c->lengths[k], c->in[k], c->nbytes[k]);
            args[k] = tack_arg_array(arrays[k]);
        }
    }
    tack_kernel *k = kernel_for(d, c->source);
    standin_model = c->model;
    CHECK_OK(tack_kernel_launch(k, NULL, c->n, args, (size_t)c->nargs));
    CHECK_OK(tack_array_copy_to_host(arrays[c->out], result, c->nbytes[c->out]));
    standin_model = NULL;
    tack_kernel_release(k);
    for (int j = 0; j < c->nargs; j++)
        tack_array_release(arrays[j]);
}

/* Runs the call on the backend and on the cpu; *on_backend and *on_cpu get
 * `size` bytes each of the output, freed by the caller. */
static void call_both(const struct call *c, void **on_backend, void **on_cpu)
{
    size_t size = c->nbytes[c->out];
    *on_backend = calloc(1, size + 1);
    *on_cpu = calloc(1, size + 1);
    bail_if(!*on_backend || !*on_cpu);
    call_on(dev, c, *on_backend);
    call_on(cpu, c, *on_cpu);
    CHECK(!memcmp(*on_backend, *on_cpu, size));
}

static float *f32_values(int64_t n, float scale)
{
    float *v = malloc((size_t)n * sizeof *v + 1);
    bail_if(!v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)i * scale;
    return v;
}

static int f32_all(const float *v, int64_t n, float value)
{
    for (int64_t i = 0; i < n; i++)
        if (v[i] != value)
            return 0;
    return 1;
}

/* ---- memory ---------------------------------------------------------------- */

static void test_memory_fill_and_copies(void)
{
    int64_t n = 1000;
    tack_array *a = array_from(dev, TACK_F32, n, NULL, 0);
    float *back = f32_values(n, 0.0f), value = -1.5f;
    CHECK_OK(tack_array_fill(a, &value));
    CHECK_OK(tack_array_copy_to_host(a, back, (size_t)n * sizeof *back));
    CHECK(f32_all(back, n, -1.5f));
    /* To the host and back, and between the backend and the cpu. */
    float *ramp = f32_values(n, 0.25f);
    CHECK_OK(tack_array_copy_from_host(a, ramp, (size_t)n * sizeof *ramp));
    CHECK_OK(tack_array_copy_to_host(a, back, (size_t)n * sizeof *back));
    CHECK(!memcmp(back, ramp, (size_t)n * sizeof *back));
    tack_array *on_cpu = NULL, *again = NULL;
    CHECK_OK(tack_array_to_device(a, cpu, &on_cpu));
    bail_if(!on_cpu);
    CHECK(tack_array_device(on_cpu) == cpu && !memcmp(tack_array_data(on_cpu), ramp, (size_t)n * sizeof *ramp));
    CHECK_OK(tack_array_to_device(on_cpu, dev, &again));
    bail_if(!again);
    memset(back, 0, (size_t)n * sizeof *back);
    CHECK_OK(tack_array_copy_to_host(again, back, (size_t)n * sizeof *back));
    CHECK(!memcmp(back, ramp, (size_t)n * sizeof *back));
    /* A copy of the wrong size moves nothing. */
    CHECK_STATUS(tack_array_copy_to_host(a, back, 4), TACK_EVALUE);
    CHECK_STATUS(tack_array_copy_from_host(a, back, (size_t)n * sizeof *back + 4), TACK_EVALUE);
    /* Fills of other widths: 8, 2 and 1 bytes. */
    const struct {
        tack_dtype dtype;
        size_t size;
        unsigned char value[8];
    } widths[] = {
        {.dtype = TACK_F64, .size = 8, .value = {1, 2, 3, 4, 5, 6, 7, 8}},
        {.dtype = TACK_I16, .size = 2, .value = {0x34, 0x12}},
        {.dtype = TACK_U8, .size = 1, .value = {0x5a}},
    };
    for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
        tack_array *b = NULL;
        int64_t m = 37;
        CHECK_OK(tack_array_empty(dev, widths[w].dtype, 1, &m, 0, &b));
        bail_if(!b);
        CHECK_OK(tack_array_fill(b, widths[w].value));
        unsigned char got[37 * 8];
        CHECK_OK(tack_array_copy_to_host(b, got, (size_t)m * widths[w].size));
        int wrong = 0;
        for (int64_t i = 0; i < m; i++)
            wrong += memcmp(got + (size_t)i * widths[w].size, widths[w].value, widths[w].size) != 0;
        CHECK(wrong == 0);
        tack_array_release(b);
    }
    free(ramp);
    free(back);
    tack_array_release(again);
    tack_array_release(on_cpu);
    tack_array_release(a);
}

static void test_memory_zero_size(void)
{
    int64_t zero = 0;
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(dev, TACK_F32, 1, &zero, 0, &a));
    bail_if(!a);
    CHECK(tack_array_size(a) == 0 && tack_array_nbytes(a) == 0);
    float value = 1.0f, host[1] = {7.0f};
    CHECK_OK(tack_array_fill(a, &value));
    CHECK_OK(tack_array_copy_from_host(a, host, 0));
    CHECK_OK(tack_array_copy_to_host(a, host, 0));
    CHECK(host[0] == 7.0f);
    tack_array *b = NULL;
    CHECK_OK(tack_array_to_device(a, cpu, &b));
    CHECK(b && tack_array_size(b) == 0);
    /* A kernel over it runs nothing, and succeeds. */
    tack_kernel *k = kernel_for(dev, saxpy_source);
    standin_model = &standin_saxpy;
    int runs = standin_runs;
    CHECK_OK(saxpy_call(k, 2.0f, a, a));
    CHECK_OK(tack_device_synchronize(dev));
    CHECK(standin_runs == runs);
    standin_model = NULL;
    tack_kernel_release(k);
    tack_array_release(b);
    tack_array_release(a);
}

static void test_memory_export(void)
{
    int64_t n = 256;
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(dev, TACK_F32, 1, &n, 1, &a));
    bail_if(!a);
    float *ramp = f32_values(n, 3.0f);
    CHECK_OK(tack_array_copy_from_host(a, ramp, (size_t)n * sizeof *ramp));
    tack_exported_memory rec;
    memset(&rec, 0, sizeof rec);
    tack_status st = tack_array_export_memory(a, &rec);
    if (!backend->exports) {
        char want[96];
        snprintf(want, sizeof want, "Backend %s does not support memory export", backend->name);
        CHECK(st == TACK_ERUNTIME && contains(tack_last_error(), want));
    } else {
        CHECK_OK(st);
        CHECK(!strcmp(rec.backend, backend->name) && !strcmp(rec.handle_type, "posix_fd"));
        CHECK(rec.size == (size_t)n * sizeof(float) && rec.allocation_size >= rec.size && rec.handle >= 0);
        /* The array's own memory, seen through the descriptor. */
        const float *mapped = mmap(NULL, rec.allocation_size, PROT_READ, MAP_SHARED, (int)rec.handle, 0);
        CHECK(mapped != MAP_FAILED);
        if (mapped != MAP_FAILED) {
            CHECK(!memcmp(mapped, ramp, (size_t)n * sizeof *ramp));
            munmap((void *)mapped, rec.allocation_size);
        }
        /* Imported back: the same values. */
        tack_array *b = NULL;
        CHECK_OK(tack_array_import_memory(NULL, &rec, TACK_F32, 1, &n, &b));
        if (b) {
            float *back = f32_values(n, 0.0f);
            CHECK_OK(tack_array_copy_to_host(b, back, (size_t)n * sizeof *back));
            CHECK(!memcmp(back, ramp, (size_t)n * sizeof *ramp));
            free(back);
            tack_array_release(b);
        }
    }
    free(ramp);
    tack_array_release(a);
}

/* ---- queue ordering -------------------------------------------------------- */

static void test_queue_launch_then_read(void)
{
    int64_t n = 1000;
    float *x = f32_values(n, 1.0f), *y = f32_values(n, 2.0f), *back = f32_values(n, 0.0f);
    tack_array *ax = array_from(dev, TACK_F32, n, x, (size_t)n * sizeof *x);
    tack_array *ay = array_from(dev, TACK_F32, n, y, (size_t)n * sizeof *y);
    tack_kernel *k = kernel_for(dev, saxpy_source);
    standin_model = &standin_saxpy;
    /* Five launches, in order; the read waits for all of them. */
    for (int r = 0; r < 5; r++)
        CHECK_OK(saxpy_call(k, 3.0f, ax, ay));
    CHECK_OK(tack_array_copy_to_host(ay, back, (size_t)n * sizeof *back));
    int wrong = 0;
    for (int64_t i = 0; i < n; i++)
        wrong += back[i] != 15.0f * (float)i + 2.0f * (float)i;
    CHECK(wrong == 0);
    /* A copy between two launches stays between them: y = 0, then y += x. */
    CHECK_OK(saxpy_call(k, 1.0f, ax, ay));
    memset(y, 0, (size_t)n * sizeof *y);
    CHECK_OK(tack_array_copy_from_host(ay, y, (size_t)n * sizeof *y));
    CHECK_OK(saxpy_call(k, 1.0f, ax, ay));
    CHECK_OK(tack_array_copy_to_host(ay, back, (size_t)n * sizeof *back));
    CHECK(!memcmp(back, x, (size_t)n * sizeof *x));
    standin_model = NULL;
    tack_kernel_release(k);
    tack_array_release(ax);
    tack_array_release(ay);
    free(x);
    free(y);
    free(back);
}

static void test_queue_synchronize_finishes_launches(void)
{
    int64_t n = 512;
    float *x = f32_values(n, 1.0f);
    tack_array *ax = array_from(dev, TACK_F32, n, x, (size_t)n * sizeof *x);
    tack_array *ay = array_from(dev, TACK_F32, n, x, (size_t)n * sizeof *x);
    tack_kernel *k = kernel_for(dev, saxpy_source);
    standin_model = &standin_saxpy;
    CHECK_OK(saxpy_call(k, 2.0f, ax, ay));
    CHECK_OK(tack_device_synchronize(dev));
    /* The memory itself holds the result, with no copy through Tack. */
    const float *raw = standin_host_of((uint64_t)(uintptr_t)tack_array_data(ay), (size_t)n * sizeof *raw);
    CHECK(raw && raw[5] == 15.0f && raw[n - 1] == 3.0f * (float)(n - 1));
    standin_model = NULL;
    tack_kernel_release(k);
    tack_array_release(ax);
    tack_array_release(ay);
    free(x);
}

/* ---- DLPack device mapping --------------------------------------------------- */

static void test_dlpack_device_and_round_trip(void)
{
    DLDevice want = {.device_type = backend->dl_type, .device_id = 0};
    DLDevice dl = tack_device_dl_device(dev);
    CHECK(dl.device_type == want.device_type && dl.device_id == want.device_id);
    CHECK(tack_device_can_wrap(dev, want));
    tack_device *found = NULL;
    CHECK_OK(tack_device_for_dlpack(want, &found));
    CHECK(found == dev);
    tack_device_release(found);

    int64_t n = 6;
    const float values[6] = {1, 2, 3, 4, 5, 6};
    tack_array *a = array_from(dev, TACK_F32, n, values, sizeof values);
    DLManagedTensor *t = NULL;
    CHECK_OK(tack_array_to_dlpack(a, &t));
    bail_if(!t);
    CHECK(t->dl_tensor.device.device_type == want.device_type && t->dl_tensor.device.device_id == 0);
    CHECK(t->dl_tensor.data == tack_array_data(a));
    /* Imported without a device: the cpu default wraps only host memory,
     * so it lands on its own device, zero-copy, over memory it does not own. */
    tack_array *b = NULL;
    CHECK_OK(tack_array_from_dlpack(t, NULL, NULL, &b));
    bail_if(!b);
    CHECK(tack_array_device(b) == dev && tack_array_data(b) == tack_array_data(a));
    CHECK(!tack_buffer_is_owned(tack_array_buffer(b)));
    float back[6] = {0};
    CHECK_OK(tack_array_copy_to_host(b, back, sizeof back));
    CHECK(!memcmp(back, values, sizeof back));

    DLManagedTensorVersioned *v = NULL;
    CHECK_OK(tack_array_to_dlpack_versioned(a, &v));
    bail_if(!v);
    CHECK(v->dl_tensor.device.device_type == want.device_type && v->dl_tensor.data == tack_array_data(a));
    tack_array *c = NULL;
    CHECK_OK(tack_array_from_dlpack_versioned(v, NULL, NULL, &c, NULL));
    bail_if(!c);
    CHECK(tack_array_device(c) == dev && tack_array_data(c) == tack_array_data(a));
    tack_array_release(a);
    /* The imports hold a's memory until they go. */
    CHECK(tack_dlpack_live_exports() == 2);
    tack_array_release(c);
    tack_array_release(b);
    CHECK(tack_dlpack_live_exports() == 0);
}

/* Device 1 where the backend has one: its own DLPack device id, both ways. */
static void test_dlpack_second_device(void)
{
    char name[32];
    snprintf(name, sizeof name, "%s:1", backend->name);
    if (backend->devices < 2) {
        printf("%s has no second device here\n", backend->name);
        return;
    }
    tack_device *one = open_device(name);
    CHECK(tack_device_dl_device(one).device_type == backend->dl_type && tack_device_dl_device(one).device_id == 1);
    CHECK(tack_device_memory_domain(one) != tack_device_memory_domain(dev));
    const float values[4] = {1, 2, 3, 4};
    tack_array *a = array_from(one, TACK_F32, 4, values, sizeof values), *b = NULL;
    DLManagedTensor *t = NULL;
    CHECK_OK(tack_array_to_dlpack(a, &t));
    bail_if(!t);
    CHECK(t->dl_tensor.device.device_type == backend->dl_type && t->dl_tensor.device.device_id == 1);
    CHECK_OK(tack_array_from_dlpack(t, NULL, NULL, &b));
    bail_if(!b);
    CHECK(tack_array_device(b) == one && tack_array_data(b) == tack_array_data(a));
    float back[4] = {0};
    CHECK_OK(tack_array_copy_to_host(b, back, sizeof back));
    CHECK(!memcmp(back, values, sizeof back));
    tack_array_release(b);
    tack_array_release(a);
    tack_device_release(one);
}

/* ---- kernels ------------------------------------------------------------------- */

static void test_kernel_saxpy_1d(void)
{
    int64_t n = 1000;
    float *x = f32_values(n, 1.0f), *y = f32_values(n, 0.5f);
    struct call c = {
        .source = saxpy_source,
        .model = &standin_saxpy,
        .n = n,
        .nargs = 3,
        .args = {tack_arg_f32(3.0f)},
        .in = {NULL, x, y},
        .dtypes = {0, TACK_F32, TACK_F32},
        .lengths = {0, n, n},
        .nbytes = {0, (size_t)n * sizeof *x, (size_t)n * sizeof *y},
        .out = 2,
    };
    void *got, *ref;
    call_both(&c, &got, &ref);
    const float *r = ref;
    int wrong = 0;
    for (int64_t i = 0; i < n; i++)
        wrong += r[i] != 3.0f * (float)i + 0.5f * (float)i;
    CHECK(wrong == 0);
    free(got);
    free(ref);
    free(x);
    free(y);
}

static void test_kernel_2d(void)
{
    const int64_t h = 300, w = 70, n = h * w;
    float *out[2] = {NULL, NULL};
    tack_device *on[2] = {dev, cpu};
    tack_kernel *ks[2] = {NULL, NULL};
    for (int d = 0; d < 2; d++) {
        ks[d] = kernel_for(on[d], GRID2D_SOURCE);
        CHECK(tack_kernel_ndim(ks[d]) == 2);
        tack_array *y = NULL;
        CHECK_OK(tack_array_empty(on[d], TACK_F32, 1, &n, 0, &y));
        bail_if(!y);
        float zero = 0.0f;
        CHECK_OK(tack_array_fill(y, &zero));
        standin_model = &grid2d_model;
        tack_arg args[2] = {tack_arg_i64(w), tack_arg_array(y)};
        CHECK_OK(tack_kernel_launch_nd(ks[d], NULL, 2, (int64_t[]){h, w}, args, 2));
        out[d] = f32_values(n, 0.0f);
        CHECK_OK(tack_array_copy_to_host(y, out[d], (size_t)n * sizeof(float)));
        standin_model = NULL;
        tack_array_release(y);
        tack_kernel_release(ks[d]);
    }
    /* Every element written once, by its own (i, j). */
    int wrong = 0;
    for (int64_t i = 0; i < h; i++)
        for (int64_t j = 0; j < w; j++)
            wrong += out[1][i * w + j] != (float)(i * 1000 + j);
    CHECK(wrong == 0);
    CHECK(!memcmp(out[0], out[1], (size_t)n * sizeof(float)));
    free(out[0]);
    free(out[1]);
}

static void test_kernel_f64_and_i32(void)
{
    int64_t n = 333;
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    int32_t *z = malloc((size_t)n * sizeof *z);
    bail_if(!x || !y || !z);
    for (int64_t i = 0; i < n; i++) {
        x[i] = 1.0 / (double)(i + 1);
        y[i] = (double)i;
        z[i] = (int32_t)(i - 100);
    }
    struct call d = {
        .source = daxpy_source,
        .model = &daxpy_model,
        .n = n,
        .nargs = 3,
        .args = {tack_arg_f64(1e-9)},
        .in = {NULL, x, y},
        .dtypes = {0, TACK_F64, TACK_F64},
        .lengths = {0, n, n},
        .nbytes = {0, (size_t)n * sizeof *x, (size_t)n * sizeof *y},
        .out = 2,
    };
    void *got, *ref;
    call_both(&d, &got, &ref);
    /* 1e-9 / (i + 1) survives in float64 alone. */
    CHECK(((double *)ref)[1] == 1.0 + 1e-9 * 0.5);
    free(got);
    free(ref);
    struct call i32 = {
        .source = affine_source,
        .model = &affine_model,
        .n = n,
        .nargs = 2,
        .args = {tack_arg_i32(-3)},
        .in = {NULL, z},
        .dtypes = {0, TACK_I32},
        .lengths = {0, n},
        .nbytes = {0, (size_t)n * sizeof *z},
        .out = 1,
    };
    call_both(&i32, &got, &ref);
    CHECK(((int32_t *)ref)[7] == (7 - 100) * -3 + 7);
    free(got);
    free(ref);
    free(x);
    free(y);
    free(z);
}

/* A checked launch passes the array's extents and a zeroed record in the
 * device's memory, waits for the launch, and reports the violation the
 * record holds as TACK_EINDEX; the stores in bounds ran. */
static void test_kernel_checked_launch_reports_its_violation(void)
{
    const int64_t n = 100;
    tack_device *on[2] = {dev, cpu};
    for (int d = 0; d < 2; d++) {
        tack_kernel_options o = {0};
        o.checked = 1;
        tack_kernel *k = NULL;
        CHECK_OK(tack_kernel_create_with(past_source, NULL, &o, &k));
        bail_if(!k);
        tack_array *y = array_from(on[d], TACK_F32, n, NULL, 0);
        tack_arg a = tack_arg_array(y);
        standin_model = &past_model;
        CHECK_STATUS(tack_kernel_launch(k, NULL, n, &a, 1), TACK_EINDEX);
        const char *msg = tack_last_error();
        CHECK(strstr(msg, "kernel 'past'") && strstr(msg, "index 100 ") && strstr(msg, "parameter 'y'") &&
              strstr(msg, "100 elements") && strstr(msg, "line 1 "));
        standin_model = NULL;
        float got[100];
        CHECK_OK(tack_array_copy_to_host(y, got, sizeof got));
        CHECK(got[0] == 0.0f && f32_all(got + 1, n - 1, 1.0f));
        tack_kernel_release(k);
        tack_array_release(y);
    }
}

/* ---- atomics ------------------------------------------------------------------- */

static void test_atomics_histogram_counts_exactly(void)
{
    int64_t n = 100000;
    uint8_t *v = malloc((size_t)n);
    uint32_t want[HIST_BINS] = {0}, zero[HIST_BINS] = {0};
    bail_if(!v);
    for (int64_t i = 0; i < n; i++) {
        v[i] = (uint8_t)((i * 7 + i / 13) % HIST_BINS);
        want[v[i]]++;
    }
    struct call c = {
        .source = hist_source,
        .model = &hist_model,
        .n = n,
        .nargs = 2,
        .in = {v, zero},
        .dtypes = {TACK_U8, TACK_U32},
        .lengths = {n, HIST_BINS},
        .nbytes = {(size_t)n, sizeof zero},
        .out = 1,
    };
    void *got, *ref;
    call_both(&c, &got, &ref);
    CHECK(!memcmp(ref, want, sizeof want));
    free(got);
    free(ref);
    free(v);
}

/* ---- errors ----------------------------------------------------------------------- */

/* The message of the last launch refused_at saw refused: the calls after
 * it, which succeed, leave "" in the thread's. */
static char refused_message[4096];

/* Checks that a launch of saxpy with `args` is refused with `want`, the
 * message naming `says`, and that y (whose values are 1) is untouched. */
static void refused_at(const char *file, int line, tack_kernel *k, const tack_arg *args, size_t nargs,
                       tack_status want, const char *says, tack_array *y)
{
    int runs = standin_runs;
    CHECK_STATUS_AT(file, line, tack_kernel_launch(k, NULL, 16, args, nargs), want);
    snprintf(refused_message, sizeof refused_message, "%s", tack_last_error());
    CHECK_AT(file, line, contains(tack_last_error(), says));
    CHECK_OK_AT(file, line, tack_device_synchronize(dev));
    CHECK_AT(file, line, standin_runs == runs);
    float back[16];
    CHECK_OK_AT(file, line, tack_array_copy_to_host(y, back, sizeof back));
    CHECK_AT(file, line, f32_all(back, 16, 1.0f));
}
#define CHECK_REFUSED(k, args, nargs, want, says, y) refused_at(__FILE__, __LINE__, k, args, nargs, want, says, y)

static void test_errors_arguments(void)
{
    int64_t n = 16;
    float ones[16];
    for (int i = 0; i < 16; i++)
        ones[i] = 1.0f;
    tack_array *x = array_from(dev, TACK_F32, n, ones, sizeof ones);
    tack_array *y = array_from(dev, TACK_F32, n, ones, sizeof ones);
    tack_array *i32 = array_from(dev, TACK_I32, n, NULL, 0);
    tack_array *host = array_from(cpu, TACK_F32, n, ones, sizeof ones);
    tack_array *ro = NULL;
    CHECK_OK(tack_array_wrap(dev, (uint64_t)(uintptr_t)tack_array_data(y), TACK_F32, 1, &n, 0, &ro));
    bail_if(!ro);
    tack_kernel *k = kernel_for(dev, saxpy_source);
    standin_model = &standin_saxpy;
    tack_arg good[3] = {tack_arg_f32(2.0f), tack_arg_array(x), tack_arg_array(y)};
    CHECK_REFUSED(k, good, 2, TACK_ETYPE, "takes 3 arguments", y);
    CHECK(contains(refused_message, "2 given"));
    CHECK_REFUSED(k, ((tack_arg[]){tack_arg_f64(2.0), tack_arg_array(x), tack_arg_array(y)}), 3, TACK_ETYPE,
                  "float64", y);
    CHECK_REFUSED(k, ((tack_arg[]){tack_arg_array(x), tack_arg_array(x), tack_arg_array(y)}), 3, TACK_ETYPE,
                  "parameter 'a'", y);
    CHECK_REFUSED(k, ((tack_arg[]){tack_arg_f32(2.0f), tack_arg_array(i32), tack_arg_array(y)}), 3, TACK_ETYPE,
                  "int32", y);
    CHECK_REFUSED(k, ((tack_arg[]){tack_arg_f32(2.0f), tack_arg_array(x), tack_arg_array(ro)}), 3, TACK_EVALUE,
                  "read-only", y);
    CHECK(contains(refused_message, "'y'"));
    if (dev != cpu)
        CHECK_REFUSED(k, ((tack_arg[]){tack_arg_f32(2.0f), tack_arg_array(host), tack_arg_array(y)}), 3,
                      TACK_EVALUE, "memory domain", y);
    int runs = standin_runs;
    CHECK_STATUS(tack_kernel_launch(k, NULL, -1, good, 3), TACK_EVALUE);
    CHECK_OK(tack_kernel_launch(k, NULL, 0, good, 3));
    CHECK_OK(tack_device_synchronize(dev));
    CHECK(standin_runs == runs);
    standin_model = NULL;
    tack_kernel_release(k);
    tack_array_release(ro);
    tack_array_release(host);
    tack_array_release(i32);
    tack_array_release(y);
    tack_array_release(x);
}

static void test_errors_compile_failure(void)
{
    const char *src = "// a helper\n#error no such thing\nvoid f(tack_index i, float *y) { y[i] = 0; }\n";
    tack_kernel *k = (tack_kernel *)0x1;
    CHECK_STATUS(tack_kernel_compile(src, NULL, dev, &k), TACK_ECOMPILE);
    CHECK(k == (tack_kernel *)0x1);
    CHECK(contains(tack_last_error(), backend->compiled) && contains(tack_last_error(), "no such thing"));
    /* The message begins the log, which names the user's own line, the
     * #error on line 2. */
    CHECK(contains(tack_last_error(), backend->line_two));
    CHECK(contains(tack_kernel_compile_log(), backend->line_two));
    CHECK(contains(tack_kernel_compile_log(), "no such thing"));
    /* A failed compile leaves the backend able to compile the next. */
    tack_kernel *next = kernel_for(dev, saxpy_source);
    tack_kernel_release(next);
}

int main(void)
{
    const char *name = getenv("TACK_CONFORMANCE_BACKEND");
    for (size_t b = 0; name && b < sizeof backends / sizeof *backends; b++)
        if (!strcmp(backends[b].name, name))
            backend = &backends[b];
    if (!backend) {
        fprintf(stderr, "TACK_CONFORMANCE_BACKEND must name cpu, cuda, hip or level_zero, not %s\n",
                name ? name : "(unset)");
        return 2;
    }
    char cache[] = "/tmp/tack-test-conformance-XXXXXX";
    /* The CUDA backend compiles with NVRTC: skipped (77) where there is none. */
    int status = !strcmp(backend->name, "cuda") ? nvrtc_test_begin(cache) : !cache_dir_set(cache);
    if (status)
        return status;
    printf("conformance of the %s backend\n", backend->name);
    check_live_counts(check_live_at_start);
    check_after_each = close_devices;
#define RUN_CASE(test) RUN_AFTER(open_devices, test)
    RUN_CASE(test_memory_fill_and_copies);
    RUN_CASE(test_memory_zero_size);
    RUN_CASE(test_memory_export);
    RUN_CASE(test_queue_launch_then_read);
    RUN_CASE(test_queue_synchronize_finishes_launches);
    RUN_CASE(test_dlpack_device_and_round_trip);
    RUN_CASE(test_dlpack_second_device);
    RUN_CASE(test_kernel_saxpy_1d);
    RUN_CASE(test_kernel_2d);
    RUN_CASE(test_kernel_f64_and_i32);
    RUN_CASE(test_atomics_histogram_counts_exactly);
    RUN_CASE(test_kernel_checked_launch_reports_its_violation);
    RUN_CASE(test_errors_arguments);
    RUN_CASE(test_errors_compile_failure);
    remove_tree(cache);
    CHECK_DONE();
}
