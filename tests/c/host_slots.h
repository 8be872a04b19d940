/* The required slots of a backend over host memory, for the tests that
 * make a backend table of their own (test_backend_defaults.c,
 * test_kernel_queue.c): open accepts anything, memory comes from calloc. */
#ifndef TACK_TEST_HOST_SLOTS_H
#define TACK_TEST_HOST_SLOTS_H

#include <stdlib.h>

#include "../../src/core/internal.h"

static inline tack_status host_open(tack_device *d, const tack_option *o, size_t n)
{
    (void)d;
    (void)o;
    (void)n;
    return TACK_OK;
}

static inline tack_status host_alloc(tack_device *d, size_t nbytes, int exportable, void **data, void **ctx)
{
    (void)d;
    (void)exportable;
    *data = calloc(1, nbytes);
    *ctx = NULL;
    return *data ? TACK_OK : TACK_ENOMEM;
}

static inline void host_free(tack_device *d, void *data, void *ctx)
{
    (void)d;
    (void)ctx;
    free(data);
}

#endif
