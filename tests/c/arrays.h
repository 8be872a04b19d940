/* Small float32 arrays for the C tests, read and written through Tack's
 * own host copies (so a read comes after the launches queued on it). */
#ifndef TACK_TEST_ARRAYS_H
#define TACK_TEST_ARRAYS_H

#include <stdlib.h>

#include "check.h"
#include "tack/tack.h"

/* A float32 array of n elements on `device` holding i * scale; exits the
 * test if it cannot be made. */
static inline tack_array *ramp_on(tack_device *device, int64_t n, float scale)
{
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(device, TACK_F32, 1, &n, 0, &a));
    if (!a)
        exit(1);
    float *v = malloc((size_t)n * sizeof *v + 1);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)i * scale;
    CHECK_OK(tack_array_copy_from_host(a, v, (size_t)n * sizeof *v));
    free(v);
    return a;
}

/* Element i of a float32 array as Tack reads it: a host copy. */
static inline float element(tack_array *a, size_t i)
{
    size_t n = tack_array_size(a);
    float *v = malloc(n * sizeof *v + 1), r;
    CHECK_OK(tack_array_copy_to_host(a, v, n * sizeof *v));
    r = v[i];
    free(v);
    return r;
}

#endif
