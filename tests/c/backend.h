/* What the backend tests (CUDA, HIP, Level Zero on their simulated drivers)
 * do before and around their checks: open a device, make an array, adopt
 * another library's Level Zero context. A case cannot go on without what
 * these make, so a failure ends it (its child process, or the test program)
 * after it is reported at the line of the case that asked. */
#ifndef TACK_TEST_BACKEND_H
#define TACK_TEST_BACKEND_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tack/tack.h"

/* Whether `text` (maybe NULL, as a message may be) contains `part`. */
static inline int contains(const char *text, const char *part) { return text && strstr(text, part) != NULL; }

/* Ends the case when `failed`, its messages written out first. */
static inline void bail_if(int failed)
{
    if (failed) {
        fflush(NULL);
        exit(1);
    }
}

/* With the environment variable `variable` set to `value`, opening `name`
 * fails as a device that is not there (TACK_ENODEVICE), sets nothing, and
 * says each of `parts` (NULL-terminated). */
static inline void backend_open_fails(const char *file, int line, const char *variable, const char *value,
                                      const char *name, const char *const *parts)
{
    setenv(variable, value, 1);
    tack_device *d = NULL;
    CHECK_STATUS_AT(file, line, tack_device_open(name, NULL, 0, &d), TACK_ENODEVICE);
    CHECK_AT(file, line, d == NULL);
    for (int i = 0; parts[i]; i++)
        CHECK_AT(file, line, contains(tack_last_error(), parts[i]));
}

#define check_open_fails(variable, value, name, ...)                                                                   \
    backend_open_fails(__FILE__, __LINE__, (variable), (value), (name), (const char *const[]){__VA_ARGS__, NULL})

static inline tack_device *backend_open_device(const char *file, int line, const char *name)
{
    tack_device *d = NULL;
    CHECK_OK_AT(file, line, tack_device_open(name, NULL, 0, &d));
    bail_if(!d);
    return d;
}

static inline tack_array *backend_f32_array(const char *file, int line, tack_device *d, int64_t n, int exportable)
{
    tack_array *a = NULL;
    CHECK_OK_AT(file, line, tack_array_empty(d, TACK_F32, 1, &n, exportable, &a));
    bail_if(!a);
    return a;
}

/* Device `name` (for example "hip:1") opened without options. */
#define open_device(name) backend_open_device(__FILE__, __LINE__, (name))
/* A fresh float32 array of n elements on device d. */
#define f32_array(d, n) backend_f32_array(__FILE__, __LINE__, (d), (n), 0)
/* The same, made exportable (tack_array_export_memory). */
#define f32_array_exportable(d, n) backend_f32_array(__FILE__, __LINE__, (d), (n), 1)

/* The array's device address, as a driver sees it. */
static inline uint64_t address(const tack_array *a) { return (uint64_t)(uintptr_t)tack_array_data(a); }

/* Whether there are n bytes at p (not NULL) and all are `value`. */
static inline int all_bytes(const void *p, size_t n, unsigned char value)
{
    const unsigned char *b = p;
    if (!b)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (b[i] != value)
            return 0;
    return 1;
}

/* Fills the fields of a one-dimensional float32 tensor of shape[0]
 * elements at `data` on `device`, as another library's export would; the
 * rest of *t is left as the caller set it. */
static inline void f32_vector_tensor(DLTensor *t, void *data, DLDevice device, int64_t *shape)
{
    t->data = data;
    t->device = device;
    t->ndim = 1;
    t->dtype = (DLDataType){.code = kDLFloat, .bits = 32, .lanes = 1};
    t->shape = shape;
}

/* level_zero over another library's context, given that library's
 * driver, device and context handles; NULL, reported, if refused. */
static inline tack_device *backend_adopt(const char *file, int line, const uint64_t h[3])
{
    tack_option o[3] = {{.name = "external_context", .field = "driver", .value = h[0]},
                        {.name = "external_context", .field = "device", .value = h[1]},
                        {.name = "external_context", .field = "context", .value = h[2]}};
    tack_device *d = NULL;
    CHECK_OK_AT(file, line, tack_device_open("level_zero", o, 3, &d));
    return d;
}

/* The adopted device, or NULL when refused (the case goes on). */
#define adopt_or_null(h) backend_adopt(__FILE__, __LINE__, (h))
/* The adopted device; the case ends when refused. */
#define adopt(h) backend_adopt_or_bail(__FILE__, __LINE__, (h))

static inline tack_device *backend_adopt_or_bail(const char *file, int line, const uint64_t h[3])
{
    tack_device *d = backend_adopt(file, line, h);
    bail_if(!d);
    return d;
}

#endif
