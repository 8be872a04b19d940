/* A "fill" kernel for the CUDA tests that drive the backend's kernel slots
 * on the simulated driver: PTX text the simulator accepts (it cannot run
 * PTX), and a host stand-in, installed as its kernel hook, that runs when
 * the stream reaches the launch. The test points fill_host_address at the
 * simulator's tack_sim_cuda_host_address before a fill runs. */
#ifndef TACK_TEST_CUDA_FILL_H
#define TACK_TEST_CUDA_FILL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/backend.h"
#include "../../src/core/internal.h"
#include "../../src/core/toolchain.h"
#include "../../src/driver/cuda.h"
#include "backend.h"
#include "check.h"

static const char fake_ptx[] = "// simulated PTX\n.version 9.0\n.target sm_75\n.visible .entry tack_kernel_entry(...)\n";

struct fill_closure {
    int64_t n;
    CUdeviceptr y;
    float value;
    unsigned grid, block;
};

/* The latest fill launch the simulator captured. */
static struct fill_closure fill_last;

/* Where the simulator keeps a device allocation's bytes. */
static void *(*fill_host_address)(CUdeviceptr ptr, size_t n);

/* The kernel hook's capture: the entry a "fill" kernel would have,
 * (int64 n, float *y, float value), and the launch's geometry. */
static inline void *fill_capture(const char *name, void **params, const unsigned grid[3], const unsigned block[3])
{
    struct fill_closure *c = malloc(sizeof *c);
    if (!c || strcmp(name, "tack_kernel_entry")) {
        free(c);
        return NULL;
    }
    c->n = *(int64_t *)params[0];
    c->y = *(CUdeviceptr *)params[1];
    c->value = *(float *)params[2];
    c->grid = grid[0];
    c->block = block[0];
    fill_last = *c;
    return c;
}

/* The kernel hook's run: the fill, on the simulator's copy of y. */
static inline void fill_run(void *p)
{
    struct fill_closure *c = p;
    float *y = fill_host_address ? fill_host_address(c->y, (size_t)c->n * sizeof(float)) : NULL;
    if (y)
        for (int64_t i = 0; i < c->n; i++)
            y[i] = c->value;
    free(c);
}

static inline void *cuda_fill_load(const char *file, int line, tack_device *d)
{
    static const size_t sizes[2] = {sizeof(void *), sizeof(float)};
    struct tack_kernel_code code = {.kind = TACK_CODE_PTX, .data = fake_ptx, .size = sizeof fake_ptx, .entry = "tack_kernel_entry", .nargs = 2, .arg_sizes = sizes};
    void *k = NULL;
    CHECK_OK_AT(file, line, tack_backend_kernel_load(d, &code, &k));
    bail_if(!k);
    return k;
}

/* The fill kernel loaded on d through the backend's kernel_load slot; the
 * case ends when it cannot be. */
#define load_fill(d) cuda_fill_load(__FILE__, __LINE__, (d))

#endif
