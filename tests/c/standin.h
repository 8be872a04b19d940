/* Host stand-ins for kernels on the simulated GPUs (tests/sim/), which
 * cannot run GPU code: a test describes each kernel it launches (the bytes
 * of each argument of the generated entry, and a host loop that does what
 * the kernel does), installs the capture below as the driver's kernel hook,
 * and the loop runs when the driver's queue reaches the launch, over every
 * thread of the grid Tack chose and with the argument bytes Tack bound. A
 * wrong order, size or geometry thus computes the wrong thing. Header only. */
#ifndef TACK_TEST_STANDIN_H
#define TACK_TEST_STANDIN_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define STANDIN_MAX_ARGS 6

/* One launch of the generated entry, as the driver received it: each
 * argument's bytes (the extents first, then the kernel's parameters) and
 * the geometry. */
struct standin_launch {
    int nargs;
    unsigned char value[STANDIN_MAX_ARGS][64]; /* up to 64 bytes each: a struct by value */
    unsigned grid[3], block[3];
    const struct standin_model *model;
};

/* What a kernel looks like to the driver, and its stand-in. */
struct standin_model {
    int nargs;
    size_t sizes[STANDIN_MAX_ARGS];
    void (*run)(const struct standin_launch *l);
};

static const struct standin_model *standin_model; /* the kernel launched next (NULL: none runs) */
static struct standin_launch standin_last;        /* the last launch captured */
static int standin_runs;                          /* launches a stand-in ran */
static int standin_mismatches;                    /* launches whose arguments were not the model's */
static void (*standin_on_capture)(void);          /* optional: called as each launch is captured */

static void *(*standin_host_address)(uint64_t ptr, size_t n);

/* The host storage behind device address `ptr` (its first n bytes); on the
 * cpu, where no driver is simulated, the address itself. */
static inline void *standin_host_of(uint64_t ptr, size_t n)
{
    if (!standin_host_address)
        return (void *)(uintptr_t)ptr;
    return standin_host_address(ptr, n);
}

/* Argument k of launch l as an int64, a float, and the host storage
 * behind the device address it holds. */
static inline int64_t standin_i64(const struct standin_launch *l, int k)
{
    int64_t v;
    memcpy(&v, l->value[k], sizeof v);
    return v;
}

static inline float standin_f32(const struct standin_launch *l, int k)
{
    float v;
    memcpy(&v, l->value[k], sizeof v);
    return v;
}

static inline void *standin_memory(const struct standin_launch *l, int k, size_t bytes)
{
    uint64_t p;
    memcpy(&p, l->value[k], sizeof p);
    return standin_host_of(p, bytes);
}

/* `sizes` NULL: the driver does not say (CUDA, HIP), the model's are taken. */
static inline struct standin_launch *standin_capture(const char *name, int nargs, void *const *args,
                                                     const size_t *sizes, const unsigned grid[3],
                                                     const unsigned block[3])
{
    const struct standin_model *model = standin_model;
    if (!model || strcmp(name, "tack_kernel_entry"))
        return NULL;
    int ok = nargs == model->nargs;
    for (int k = 0; ok && sizes && k < nargs; k++)
        ok = sizes[k] == model->sizes[k];
    struct standin_launch *l = calloc(1, sizeof *l);
    if (!ok || !l) {
        standin_mismatches++;
        free(l);
        return NULL;
    }
    l->nargs = nargs;
    for (int k = 0; k < nargs; k++)
        memcpy(l->value[k], args[k], model->sizes[k]);
    memcpy(l->grid, grid, sizeof l->grid);
    memcpy(l->block, block, sizeof l->block);
    l->model = model;
    standin_last = *l;
    if (standin_on_capture)
        standin_on_capture();
    return l;
}

/* The capture as CUDA's and HIP's simulators call it. */
static inline void *standin_capture_params(const char *name, void **params, const unsigned grid[3],
                                           const unsigned block[3])
{
    return standin_capture(name, standin_model ? standin_model->nargs : 0, params, NULL, grid, block);
}

/* The capture as the Level Zero simulator calls it. */
static inline void *standin_capture_args(const char *name, void *const *args, const size_t *sizes, int nargs,
                                         const uint32_t groups[3], const uint32_t group_size[3])
{
    const unsigned grid[3] = {groups[0], groups[1], groups[2]};
    const unsigned block[3] = {group_size[0], group_size[1], group_size[2]};
    return standin_capture(name, nargs, args, sizes, grid, block);
}

/* The run, as every simulator calls it. */
static inline void standin_run(void *p)
{
    struct standin_launch *l = p;
    l->model->run(l);
    standin_runs++;
    free(l);
}

/* Every index the 1-D grid reaches, as the generated entry's grid-stride
 * loop visits them: n is the entry's first argument. */
#define STANDIN_FOR_EACH_INDEX(l, i)                                                                          \
    for (int64_t t_ = 0, total_ = (int64_t)(l)->grid[0] * (l)->block[0]; t_ < total_; t_++)                  \
        for (int64_t i = t_; i < standin_i64((l), 0); i += total_)

/* How a simulator's kernel hook is called. */
enum standin_hook {
    STANDIN_PARAMS, /* CUDA and HIP: (name, void **params, grid, block) */
    STANDIN_ARGS,   /* Level Zero: (name, args, sizes, nargs, groups, group size) */
};

/* Installs the capture and run as the kernel hook of simulator `lib`,
 * whose functions `host_address` and `set_kernel_hook` are named; a
 * simulator without them ends the test with status 2. */
static inline void standin_install(void *lib, const char *host_address, const char *set_kernel_hook,
                                   enum standin_hook kind)
{
    void *address = dlsym(lib, host_address), *set = dlsym(lib, set_kernel_hook);
    if (!address || !set) {
        fprintf(stderr, "the simulator has no %s or %s\n", host_address, set_kernel_hook);
        exit(2);
    }
    memcpy(&standin_host_address, &address, sizeof address);
    if (kind == STANDIN_PARAMS) {
        void (*install)(void *(*)(const char *, void **, const unsigned *, const unsigned *), void (*)(void *));
        memcpy(&install, &set, sizeof set);
        install(standin_capture_params, standin_run);
    } else {
        void (*install)(void *(*)(const char *, void *const *, const size_t *, int, const uint32_t *,
                                  const uint32_t *),
                        void (*)(void *));
        memcpy(&install, &set, sizeof set);
        install(standin_capture_args, standin_run);
    }
}

/* saxpy (kernels.h's saxpy_source): y[i] = a * x[i] + y[i] over float32. */
static inline void standin_saxpy_run(const struct standin_launch *l)
{
    float a = standin_f32(l, 1);
    size_t bytes = (size_t)standin_i64(l, 0) * sizeof(float);
    const float *x = standin_memory(l, 2, bytes);
    float *y = standin_memory(l, 3, bytes);
    if (x && y)
        STANDIN_FOR_EACH_INDEX(l, i)
    y[i] = a * x[i] + y[i];
}
static const struct standin_model standin_saxpy = {.nargs = 4, .sizes = {8, 4, 8, 8}, .run = standin_saxpy_run};

#endif
