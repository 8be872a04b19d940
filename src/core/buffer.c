#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "internal.h"


long tack_buffer_live_count(void) { return tack_count_total(TACK_COUNT_BUFFERS); }

/* The five kinds of buffer. Memory Tack made goes back to the backend that
 * made it; memory someone else owns is never freed here, and an importer's
 * deleter runs instead where there is one. Exportable memory is owned like
 * any other, but another process may map it. */
static void free_backend_memory(tack_buffer *b) { tack_backend_free(b->device, b->data, b->alloc_ctx); }
static void call_deleter(tack_buffer *b) { b->release(b->release_ctx); }

static const struct tack_buffer_kind owned = {
    .owned = 1, .shared = 0, .process_private = 1, .free = free_backend_memory};
static const struct tack_buffer_kind exportable_kind = {.owned = 1, .shared = 0, .free = free_backend_memory};
static const struct tack_buffer_kind mapped = {.owned = 1, .shared = 1, .free = free_backend_memory};
static const struct tack_buffer_kind wrapped = {.owned = 0, .shared = 1, .free = NULL};
static const struct tack_buffer_kind imported = {.owned = 0, .shared = 1, .free = call_deleter};

/* A buffer record of `kind` with `extra` bytes after it, for an array record
 * made in the same allocation (see tack_array_wrap_memory). */
static tack_buffer *buffer_new(tack_device *device, const struct tack_buffer_kind *kind, void *data, size_t nbytes,
                               size_t extra)
{
    tack_buffer *b = malloc(sizeof *b + extra);
    if (!b)
        return NULL;
    /* Field by field: a compound literal of the whole record compiles to a
     * `rep stos`, whose start-up cost is a measurable part of an import. */
    atomic_init(&b->refs, 1);
    b->kind = kind;
    b->device = tack_device_hold(device);
    b->data = data;
    b->nbytes = nbytes;
    atomic_init(&b->shared, kind->shared);
    atomic_init(&b->last_launch, 0);
    b->alloc_ctx = NULL;
    b->release = NULL;
    b->release_ctx = NULL;
    b->export_ctx = NULL;
    tack_count_add(TACK_COUNT_BUFFERS, 1);
    return b;
}

/* Undoes buffer_new for a record whose memory was never made. */
static void buffer_discard(tack_buffer *b)
{
    tack_device *d = b->device;
    tack_count_add(TACK_COUNT_BUFFERS, -1);
    free(b);
    tack_device_drop(d);
}

tack_status tack_buffer_alloc(tack_device *device, size_t nbytes, int exportable, tack_buffer **out)
{
    TACK_PUBLIC_CALL();
    if (!device || !out)
        return tack_error_set(TACK_EVALUE, "device and out must not be NULL");
    tack_status live = tack_refuse_released(&device->refs, "tack_buffer_alloc", "device", device);
    if (live != TACK_OK)
        return live;
    tack_buffer *b = buffer_new(device, exportable ? &exportable_kind : &owned, NULL, nbytes, 0);
    if (!b)
        return tack_error_set(TACK_ENOMEM, "out of memory allocating a buffer record");
    /* Zero-size arrays still get a distinct, valid address to export. */
    tack_status st = tack_backend_alloc(device, nbytes ? nbytes : 1, exportable, &b->data, &b->alloc_ctx);
    if (st != TACK_OK) {
        buffer_discard(b);
        return st;
    }
    *out = b;
    return TACK_OK;
}

/* A buffer of `kind` over memory that is already there, once the backend
 * accepts its address. */
static tack_status wrap_new(tack_device *device, const struct tack_buffer_kind *kind, void *data, size_t nbytes,
                            size_t extra, tack_buffer **out)
{
    tack_status st = tack_backend_check_pointer(device, (uint64_t)(uintptr_t)data);
    if (st != TACK_OK)
        return st;
    tack_buffer *b = buffer_new(device, kind, data, nbytes, extra);
    if (!b)
        return tack_error_set(TACK_ENOMEM, "out of memory allocating a buffer record");
    *out = b;
    return TACK_OK;
}

tack_status tack_buffer_wrap_extra(tack_device *device, void *data, size_t nbytes, tack_release_fn release,
                                   void *context, size_t extra, tack_buffer **out)
{
    tack_status st = wrap_new(device, release ? &imported : &wrapped, data, nbytes, extra, out);
    if (st == TACK_OK) {
        (*out)->release = release;
        (*out)->release_ctx = context;
    }
    return st;
}

tack_status tack_buffer_map(tack_device *device, void *data, size_t nbytes, void *alloc_ctx, tack_buffer **out)
{
    tack_status st = wrap_new(device, &mapped, data, nbytes, 0, out);
    if (st == TACK_OK)
        (*out)->alloc_ctx = alloc_ctx;
    return st;
}

tack_status tack_buffer_wrap(tack_device *device, void *data, size_t nbytes, tack_release_fn release,
                             void *context, tack_buffer **out)
{
    TACK_PUBLIC_CALL();
    if (!device || !out)
        return tack_error_set(TACK_EVALUE, "device and out must not be NULL");
    /* Accepted, NULL would fail only later, in a fill or a kernel. An
     * empty buffer has nothing to point at, as tack_array_wrap allows. */
    if (!data && nbytes)
        return tack_error_set(TACK_EVALUE, "data is NULL for %zu bytes; pass the address of the "
                              "memory to wrap", nbytes);
    tack_status live = tack_refuse_released(&device->refs, "tack_buffer_wrap", "device", device);
    if (live != TACK_OK)
        return live;
    return tack_buffer_wrap_extra(device, data, nbytes, release, context, 0, out);
}

tack_buffer *tack_buffer_retain(tack_buffer *b)
{
    TACK_ONE_COPY_SKIP(b);
    if (b)
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void tack_buffer_release(tack_buffer *b)
{
    TACK_ONE_COPY_SKIP();
    if (!b || !tack_ref_release_last(&b->refs, "tack_buffer_release", "buffer", b))
        return;
    tack_device *d = b->device;
    if (b->export_ctx)
        tack_backend_release_export(b);
    if (b->kind->free)
        b->kind->free(b);
    atomic_store_explicit(&b->refs, TACK_REFS_FREED, memory_order_relaxed);
    tack_count_free(TACK_COUNT_BUFFERS, b);
    tack_device_drop(d);
}

void *tack_buffer_data(const tack_buffer *b) { return b->data; }
size_t tack_buffer_size(const tack_buffer *b) { return b->nbytes; }
tack_device *tack_buffer_device(const tack_buffer *b) { return b->device; }
int tack_buffer_is_owned(const tack_buffer *b) { return b->kind->owned; }
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
    TACK_PUBLIC_CALL();
    if (!b)
        return tack_error_set(TACK_EVALUE, "buffer is NULL");
    tack_status st = tack_refuse_released(&b->refs, "tack_buffer_share", "buffer", b);
    if (st == TACK_OK)
        st = tack_buffer_wait(b);
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
    TACK_PUBLIC_CALL();
    if (!b)
        return tack_error_set(TACK_EVALUE, "buffer is NULL");
    if (stream < -1)
        return tack_error_set(TACK_EVALUE,
                              "stream=%lld is not a stream value: pass None, -1 (no synchronisation), or the "
                              "consumer's stream",
                              (long long)stream);
    tack_status st = tack_refuse_released(&b->refs, "tack_buffer_share_with_stream", "buffer", b);
    if (st != TACK_OK)
        return st;
    /* Even a consumer that orders its own work (-1) gets the mark: later
     * launches need it, which the consumer cannot know about. */
    st = tack_backend_order_stream(b, stream);
    if (st != TACK_OK)
        return st;
    if (!atomic_load_explicit(&b->shared, memory_order_acquire))
        atomic_store_explicit(&b->shared, 1, memory_order_release);
    return TACK_OK;
}
