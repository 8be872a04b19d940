#include <stdlib.h>
#include <string.h>

#include "internal.h"


long tack_buffer_live_count(void) { return tack_count_total(TACK_COUNT_BUFFERS); }

/* A buffer record with `extra` bytes after it, for an array record made in
 * the same allocation (see tack_array_wrap_memory). */
static tack_buffer *buffer_new(tack_device *device, size_t extra)
{
    tack_buffer *b = malloc(sizeof *b + extra);
    if (!b)
        return NULL;
    *b = (tack_buffer){.device = tack_device_retain(device)};
    atomic_init(&b->refs, 1);
    atomic_init(&b->shared, 0);
    atomic_init(&b->last_launch, 0);
    tack_count_add(TACK_COUNT_BUFFERS, 1);
    return b;
}

tack_status tack_buffer_alloc(tack_device *device, size_t nbytes, int exportable, tack_buffer **out)
{
    if (!device || !out)
        return tack_error_set(TACK_EVALUE, "tack_buffer_alloc: device and out must not be NULL");
    tack_buffer *b = buffer_new(device, 0);
    if (!b)
        return tack_error_set(TACK_ENOMEM, "out of memory allocating a buffer record");
    /* Zero-size arrays still get a distinct, valid address to export. */
    tack_status st = device->ops->alloc(device, nbytes ? nbytes : 1, exportable, &b->data, &b->alloc_ctx);
    if (st != TACK_OK) {
        b->data = NULL;
        tack_buffer_release(b);
        return st;
    }
    b->nbytes = nbytes;
    b->owned = 1;
    *out = b;
    return TACK_OK;
}

tack_status tack_buffer_wrap_extra(tack_device *device, void *data, size_t nbytes, size_t extra, tack_buffer **out)
{
    if (device->ops->check_pointer) {
        tack_status st = device->ops->check_pointer(device, (uint64_t)(uintptr_t)data);
        if (st != TACK_OK)
            return st;
    }
    tack_buffer *b = buffer_new(device, extra);
    if (!b)
        return tack_error_set(TACK_ENOMEM, "out of memory allocating a buffer record");
    b->data = data;
    b->nbytes = nbytes;
    /* The owner may touch the memory at any moment with no Tack call in
     * between, so launches over it must complete before returning. */
    atomic_store_explicit(&b->shared, 1, memory_order_relaxed);
    *out = b;
    return TACK_OK;
}

tack_status tack_buffer_wrap(tack_device *device, void *data, size_t nbytes, tack_release_fn release,
                             void *context, tack_buffer **out)
{
    if (!device || !out)
        return tack_error_set(TACK_EVALUE, "tack_buffer_wrap: device and out must not be NULL");
    tack_status st = tack_buffer_wrap_extra(device, data, nbytes, 0, out);
    if (st == TACK_OK) {
        (*out)->release = release;
        (*out)->release_ctx = context;
    }
    return st;
}

tack_buffer *tack_buffer_retain(tack_buffer *b)
{
    if (b)
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void tack_buffer_release(tack_buffer *b)
{
    if (!b)
        return;
    long left = tack_ref_drop(&b->refs);
    if (left > 0)
        return;
    if (left < 0)
        tack_refcount_underflow("buffer");
    tack_device *d = b->device;
    if (b->export_ctx && d->ops->release_export)
        d->ops->release_export(b);
    if (b->owned && b->data)
        d->ops->free(d, b->data, b->alloc_ctx);
    if (b->release)
        b->release(b->release_ctx);
    tack_count_add(TACK_COUNT_BUFFERS, -1);
    free(b);
    tack_device_release(d);
}

void *tack_buffer_data(const tack_buffer *b) { return b->data; }
size_t tack_buffer_size(const tack_buffer *b) { return b->nbytes; }
tack_device *tack_buffer_device(const tack_buffer *b) { return b->device; }
int tack_buffer_is_owned(const tack_buffer *b) { return b->owned; }
int tack_buffer_is_shared(const tack_buffer *b) { return atomic_load(&b->shared); }

tack_status tack_buffer_wait(tack_buffer *b)
{
    tack_device *d = b->device;
    if (atomic_load(&b->last_launch) <= atomic_load(&d->completed))
        return TACK_OK;
    return tack_device_synchronize(d);
}

tack_status tack_buffer_share(tack_buffer *b)
{
    if (!b)
        return tack_error_set(TACK_EVALUE, "tack_buffer_share: buffer is NULL");
    tack_status st = tack_buffer_wait(b);
    if (st != TACK_OK)
        return st;
    /* Exports of an already shared buffer are the common case: read first
     * so that they do not pay for a store. */
    if (!atomic_load_explicit(&b->shared, memory_order_acquire))
        atomic_store_explicit(&b->shared, 1, memory_order_release);
    return TACK_OK;
}

tack_status tack_buffer_share_with_stream(tack_buffer *b, int64_t stream)
{
    if (!b)
        return tack_error_set(TACK_EVALUE, "tack_buffer_share_with_stream: buffer is NULL");
    if (stream < -1)
        return tack_error_set(TACK_EVALUE,
                              "stream=%lld is not a stream value: pass None, -1 (no synchronisation), or the "
                              "consumer's stream",
                              (long long)stream);
    tack_device *d = b->device;
    tack_status st = TACK_OK;
    if (!d->ops->order_stream) {
        /* No stream a consumer could name or wait on (the host, Level
         * Zero's queue): only a host wait orders its reads, -1 included. */
        return tack_buffer_share(b);
    } else if (stream == -1) {
        /* The consumer orders its own work after Tack's; later launches
         * still need the mark, which the consumer cannot know about. */
    } else {
        st = d->ops->order_stream(b, (uint64_t)stream);
    }
    if (st != TACK_OK)
        return st;
    if (!atomic_load_explicit(&b->shared, memory_order_acquire))
        atomic_store_explicit(&b->shared, 1, memory_order_release);
    return TACK_OK;
}
