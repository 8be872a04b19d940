/*
 * Importing memory another process (or this one) exported: the record is
 * checked, then mapped on the device it names, found by its backend and
 * UUID when the caller names none. ipc.c receives records over a socket
 * and imports them here.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "internal.h"

/* How many devices of one backend device=NULL looks through for the UUID. */
#define SEARCH_DEVICES 64

static int terminated(const char *s, size_t cap) { return memchr(s, 0, cap) != NULL; }

static tack_status check_record(const tack_exported_memory *e)
{
    if (!terminated(e->backend, sizeof e->backend) || !terminated(e->handle_type, sizeof e->handle_type))
        return tack_error_set(TACK_EVALUE, "the export record's backend and handle_type are not terminated strings");
    if (strcmp(e->handle_type, "posix_fd") != 0)
        return tack_error_set(TACK_EVALUE, "a %s handle cannot be imported here: only posix_fd descriptors can",
                              e->handle_type);
    if (e->handle < 0 || e->handle > INT_MAX)
        return tack_error_set(TACK_EVALUE, "handle %lld is not a file descriptor", (long long)e->handle);
    if (e->allocation_size == 0 || e->size > e->allocation_size)
        return tack_error_set(TACK_EVALUE,
                              "the export record's sizes do not agree: size %zu, allocation_size %zu (an "
                              "allocation holds at least one byte and at least the array's)",
                              e->size, e->allocation_size);
    return TACK_OK;
}

/* Imports on one device; *foreign as the backend's import_memory sets it. */
static tack_status import_on(tack_device *d, const tack_exported_memory *e, tack_dtype dtype, int ndim,
                             const int64_t *shape, size_t size, size_t nbytes, int read_only, int *foreign,
                             tack_array **out)
{
    const struct tack_backend_ops *ops = d->ops;
    if (strcmp(ops->name, e->backend) != 0)
        return tack_error_set(TACK_EVALUE, "memory exported by the %s backend cannot be imported on %s", e->backend,
                              d->name);
    void *data = NULL, *ctx = NULL;
    int writable = !read_only;
    tack_status st = tack_backend_import_memory(d, e, &data, &ctx, &writable, foreign);
    if (st != TACK_OK)
        return st;
    tack_buffer *b;
    /* Tack made the mapping and the buffer undoes it; the exporter may touch
     * the memory at any moment, so it is shared from the start. */
    st = tack_buffer_map(d, data, e->size, ctx, &b);
    if (st != TACK_OK) {
        tack_backend_free(d, data, ctx);
        return st;
    }
    return tack_array_adopt_buffer(b, dtype, ndim, shape, size, nbytes, writable, out);
}

tack_status tack_exported_import(tack_device *device, const tack_exported_memory *e, tack_dtype dtype, int ndim,
                                 const int64_t *shape, int read_only, tack_array **out)
{
    size_t size, nbytes;
    tack_status st = tack_shape_check(dtype, ndim, shape, &size, &nbytes);
    if (st != TACK_OK)
        return st;
    st = check_record(e);
    if (st != TACK_OK)
        return st;
    if (nbytes > e->size)
        return tack_error_set(TACK_EVALUE, "an array of %zu bytes does not fit the %zu exported bytes", nbytes,
                              e->size);
    int foreign = 0;
    if (device)
        return import_on(device, e, dtype, ndim, shape, size, nbytes, read_only, &foreign, out);

    /* The record names its backend, and its device by UUID: ordinals differ
     * between processes (CUDA_VISIBLE_DEVICES), UUIDs do not. */
    const struct tack_backend_ops *ops = tack_backend_find(e->backend, strlen(e->backend));
    if (!ops)
        return tack_error_set(TACK_EVALUE, "the memory was exported by a backend named '%s', which Tack does not have",
                              e->backend);
    for (int i = 0; i < SEARCH_DEVICES; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s:%d", ops->name, i);
        tack_device *d;
        st = tack_device_open(name, NULL, 0, &d);
        if (st != TACK_OK) {
            if (i == 0)
                return st;
            break;
        }
        foreign = 0;
        st = import_on(d, e, dtype, ndim, shape, size, nbytes, read_only, &foreign, out);
        tack_device_release(d);
        if (!foreign)
            return st;
    }
    char uuid[33];
    for (int i = 0; i < 16; i++)
        snprintf(uuid + 2 * i, 3, "%02x", e->device_uuid[i]);
    return tack_error_set(TACK_EVALUE,
                          "no %s device in this process has UUID %s, the device the memory was exported on (is "
                          "it hidden here, by CUDA_VISIBLE_DEVICES for example?)",
                          ops->name, uuid);
}

tack_status tack_array_import_memory(tack_device *device, const tack_exported_memory *exported, tack_dtype dtype,
                                     int ndim, const int64_t *shape, tack_array **out)
{
    TACK_PUBLIC_CALL();
    if (!exported || !out)
        return tack_error_set(TACK_EVALUE, "exported and out must not be NULL");
    return tack_exported_import(device, exported, dtype, ndim, shape, 0, out);
}
