/* Tack's internal structures and the backend table. Not installed. */
#ifndef TACK_INTERNAL_H
#define TACK_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "tack/tack.h"

/* Sets the thread's message and returns `status`. */
tack_status tack_error_set(tack_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Reference-count helpers that catch a count going below zero (a double
 * release), which would otherwise be a use after free far from its cause. */
void tack_refcount_underflow(const char *what);

/*
 * One table per backend (src/backend/<name>.c). Slots marked "optional"
 * may be NULL; the comment gives the default the core applies.
 */
struct tack_backend_ops {
    const char *name;
    /* DLPack device type exports are labelled with. */
    DLDeviceType dl_type;
    /* DLPack device types this backend wraps, terminated by 0. */
    const DLDeviceType *wraps;
    /* Option names accepted by open, NULL-terminated; optional: none. */
    const char *const *options;

    /* Makes the backend state for `device` (ordinal and options already
     * validated by name). Sets device->impl, device->domain and
     * device->external_context. On error nothing is kept. */
    tack_status (*open)(tack_device *device, const tack_option *options, size_t n_options);
    /* optional: nothing to do. Must not destroy objects Tack did not create. */
    void (*close)(tack_device *device);

    /* Zeroed memory of at least `nbytes` (> 0). *alloc_ctx is the backend's
     * record, handed back to free. */
    tack_status (*alloc)(tack_device *device, size_t nbytes, int exportable, void **data, void **alloc_ctx);
    void (*free)(tack_device *device, void *data, void *alloc_ctx);

    /* optional: every address accepted. TACK_EVALUE for memory of the wrong
     * kind, TACK_ERUNTIME for a failed query where the backend treats that
     * as a fault. */
    tack_status (*check_pointer)(tack_device *device, uint64_t address);

    /* optional: memcpy. */
    tack_status (*copy_to_host)(tack_device *device, void *dst, const void *src, size_t nbytes);
    /* optional: memcpy. */
    tack_status (*copy_from_host)(tack_device *device, void *dst, const void *src, size_t nbytes);
    /* optional: nothing queued, so nothing to wait for. */
    tack_status (*synchronize)(tack_device *device);

    /* optional: TACK_ERUNTIME "Backend <name> does not support memory export". */
    tack_status (*export_memory)(tack_buffer *buffer, tack_exported_memory *out);
    /* optional: nothing; releases what export_memory kept (descriptors). */
    void (*release_export)(tack_buffer *buffer);
    /* optional: 0. The native handle of the context the device allocates
     * in (a CUcontext, a ze_context_handle_t), for guards that compare it
     * with another library's. */
    uint64_t (*context_handle)(const tack_device *device);
};

struct tack_device {
    atomic_long refs;
    const struct tack_backend_ops *ops;
    void *impl;
    int ordinal;
    int external_context;
    uint64_t domain;
    /* Launches submitted on this device's queue, and how many of them are
     * known complete; a buffer records the sequence number of its last. */
    atomic_uint_fast64_t submitted;
    atomic_uint_fast64_t completed;
    char name[40];
};

struct tack_buffer {
    atomic_long refs;
    tack_device *device;
    void *data;
    size_t nbytes;
    int owned;
    atomic_int shared;
    /* Sequence number of the last queued launch that used this buffer. */
    atomic_uint_fast64_t last_launch;
    void *alloc_ctx;
    tack_release_fn release;
    void *release_ctx;
    /* Backend's export record (an exported descriptor, a lazily made
     * exportable copy); released by ops->release_export. */
    void *export_ctx;
};

struct tack_array {
    atomic_long refs;
    tack_buffer *buffer;
    void *data;
    tack_dtype dtype;
    int ndim;
    int writable;
    size_t size;
    size_t nbytes;
    int64_t shape[TACK_MAX_NDIM];
};

/* The registered backends, NULL-terminated. */
extern const struct tack_backend_ops *const tack_backends[];
const struct tack_backend_ops *tack_backend_find(const char *name, size_t len);

/* Validates a shape and computes its element count and byte size.
 * TACK_EVALUE for ndim out of range, a negative extent or an overflow. */
tack_status tack_shape_check(int ndim, const int64_t *shape, size_t itemsize, size_t *size, size_t *nbytes);

/* Waits for the queued launches that use `buffer`. */
tack_status tack_buffer_wait(tack_buffer *buffer);

#endif
