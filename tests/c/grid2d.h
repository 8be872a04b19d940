/* A 2-D launch on a simulated GPU: the kernel, what its entry receives,
 * and a host stand-in that runs the generated entry's loops for every
 * thread of the grid Tack chose, so that a grid that misses part of the
 * domain leaves elements unwritten. Header only. */
#ifndef TACK_TEST_GRID2D_H
#define TACK_TEST_GRID2D_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tack/tack.h"

#define GRID2D_SOURCE                                                                                            \
    "void fill2(tack_index i, tack_index j, int64_t w, float *y) { y[i * w + j] += (float)(i * 1000 + j); }"

/* One launch of the entry: (int64 n0, int64 n1, then w and y). */
struct grid2d_launch {
    int64_t n0, n1, w;
    float *y; /* the host storage behind the device array */
    unsigned grid[3], block[3];
};

/* Every thread of the grid, as the generated entry runs it: index i over
 * grid dimension 1 (block index * block size + thread index, striding by
 * the whole grid's extent), the last index j likewise over dimension 0. */
static inline void grid2d_run(const struct grid2d_launch *c)
{
    for (unsigned by = 0; c->y && by < c->grid[1]; by++)
        for (unsigned bx = 0; bx < c->grid[0]; bx++)
            for (unsigned ty = 0; ty < c->block[1]; ty++)
                for (unsigned tx = 0; tx < c->block[0]; tx++)
                    for (int64_t i = (int64_t)by * c->block[1] + ty; i < c->n0; i += (int64_t)c->block[1] * c->grid[1])
                        for (int64_t j = (int64_t)bx * c->block[0] + tx; j < c->n1;
                             j += (int64_t)c->block[0] * c->grid[0])
                            c->y[i * c->w + j] += (float)(i * 1000 + j);
}

/* A hook's capture: the launch of the entry `name` (NULL for another, or
 * out of memory), also recorded in *seen. `y_of` turns the device array's
 * address into its host storage. */
static inline struct grid2d_launch *grid2d_capture_values(const char *name, const void *n0, const void *n1,
                                                          const void *w, uint64_t y, void *(*y_of)(uint64_t, size_t),
                                                          const unsigned grid[3], const unsigned block[3],
                                                          struct grid2d_launch *seen)
{
    struct grid2d_launch *c = calloc(1, sizeof *c);
    if (!c || strcmp(name, "tack_kernel_entry")) {
        free(c);
        return NULL;
    }
    memcpy(&c->n0, n0, sizeof c->n0);
    memcpy(&c->n1, n1, sizeof c->n1);
    memcpy(&c->w, w, sizeof c->w);
    c->y = y_of(y, (size_t)(c->n0 * c->n1) * sizeof(float));
    memcpy(c->grid, grid, sizeof c->grid);
    memcpy(c->block, block, sizeof c->block);
    *seen = *c;
    return c;
}

/* A hook's run: the stand-in, then the capture's memory. */
static inline void grid2d_run_and_free(void *p)
{
    grid2d_run(p);
    free(p);
}

/* Launches GRID2D_SOURCE over (h, w) on `device` (whose hook must fill
 * *seen and run grid2d_run), then checks the entry got the extents in
 * order and that every element was written once. */
static inline void grid2d_check(tack_device *device, int64_t h, int64_t w, const struct grid2d_launch *seen)
{
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create(GRID2D_SOURCE, NULL, &k));
    tack_array *y = NULL;
    int64_t n = h * w;
    CHECK_OK(tack_array_empty(device, TACK_F32, 1, &n, 0, &y));
    if (!k || !y)
        return;
    CHECK_OK(tack_kernel_launch_nd(k, NULL, 2, (int64_t[]){h, w}, (tack_arg[]){tack_arg_i64(w), tack_arg_array(y)},
                                   2));
    float *host = calloc((size_t)n, sizeof *host);
    CHECK_OK(tack_array_copy_to_host(y, host, (size_t)n * sizeof *host));
    CHECK(seen->n0 == h && seen->n1 == w && seen->w == w);
    int wrong = 0;
    for (int64_t i = 0; host && i < h; i++)
        for (int64_t j = 0; j < w; j++)
            wrong += host[i * w + j] != (float)(i * 1000 + j);
    CHECK(wrong == 0);
    free(host);
    tack_array_release(y);
    tack_kernel_release(k);
}

#endif
