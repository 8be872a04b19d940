/* DLPack export: one allocation holds the managed tensor, its shape and its
 * strides; the tensor is written once and wrapped the legacy or versioned way. */
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"


long tack_dlpack_live_exports(void) { return tack_count_total(TACK_COUNT_EXPORTS); }

/* Allocates `head` bytes of managed-tensor struct followed by room for the
 * shape and the strides, and fills `t` (which lies inside the block).
 * `stream` is the consumer's stream value, or NULL for none given. */
static tack_status export_block(tack_array *a, size_t head, void **block, DLTensor *(*locate)(void *),
                                const int64_t *stream)
{
    if (!a)
        return tack_error_set(TACK_EVALUE, "cannot export a NULL array");
    uint8_t code, bits;
    tack_status st = tack_dtype_to_dlpack(a->dtype, &code, &bits);
    if (st != TACK_OK)
        return st;
    size_t nd = (size_t)a->ndim;
    char *p = malloc(head + 2 * nd * sizeof(int64_t) + 1);
    if (!p)
        return tack_error_set(TACK_ENOMEM, "out of memory exporting an array");
    /* The consumer may read the memory at once on its own queue and keep
     * reading after later launches: finish queued work (or order the
     * consumer's stream after it), mark the buffer. Last of what can fail,
     * so that a failed export has enqueued nothing on the consumer's
     * stream. */
    st = stream ? tack_buffer_share_with_stream(a->buffer, *stream) : tack_buffer_share(a->buffer);
    if (st != TACK_OK) {
        free(p);
        return st;
    }
    memset(p, 0, head);
    int64_t *shape = (int64_t *)(void *)(p + head);
    int64_t *strides = shape + nd;
    int64_t stride = 1;
    for (size_t i = nd; i-- > 0;) {
        shape[i] = a->shape[i];
        strides[i] = stride;
        stride *= a->shape[i] ? a->shape[i] : 1;
    }
    DLTensor *t = locate(p);
    t->data = a->data;
    t->device = tack_device_dl_device(a->buffer->device);
    t->ndim = (int32_t)nd;
    t->dtype.code = code;
    t->dtype.bits = bits;
    t->dtype.lanes = 1;
    t->shape = shape;
    t->strides = strides;
    t->byte_offset = 0;
    tack_array_retain(a);
    tack_count_add(TACK_COUNT_EXPORTS, 1);
    *block = p;
    return TACK_OK;
}

/* The deleters touch no Python object and need no lock: they may run on any
 * thread, during interpreter shutdown or after it. */
static void export_done(void *block, tack_array *a)
{
    free(block);
    tack_count_add(TACK_COUNT_EXPORTS, -1);
    tack_array_release(a);
}

static void legacy_deleter(DLManagedTensor *m) { export_done(m, m->manager_ctx); }
static void versioned_deleter(DLManagedTensorVersioned *m) { export_done(m, m->manager_ctx); }

static DLTensor *legacy_tensor(void *p) { return &((DLManagedTensor *)p)->dl_tensor; }
static DLTensor *versioned_tensor(void *p) { return &((DLManagedTensorVersioned *)p)->dl_tensor; }

/* The managed tensor over `a`, legacy or versioned, in *out (a
 * DLManagedTensor ** or a DLManagedTensorVersioned **, as `versioned`
 * says). */
static tack_status to_managed(tack_array *a, const int64_t *stream, int versioned, void *out)
{
    if (!out) /* refused before the array is retained or any work is ordered */
        return tack_error_set(TACK_EVALUE, "out is NULL");
    void *block = NULL;
    tack_status st = versioned
                         ? export_block(a, sizeof(DLManagedTensorVersioned), &block, versioned_tensor, stream)
                         : export_block(a, sizeof(DLManagedTensor), &block, legacy_tensor, stream);
    if (st != TACK_OK)
        return st;
    if (versioned) {
        DLManagedTensorVersioned *m = block;
        m->version.major = DLPACK_MAJOR_VERSION;
        m->version.minor = DLPACK_MINOR_VERSION;
        m->manager_ctx = a;
        m->deleter = versioned_deleter;
        m->flags = a->writable ? 0 : DLPACK_FLAG_BITMASK_READ_ONLY;
        *(DLManagedTensorVersioned **)out = m;
    } else {
        DLManagedTensor *m = block;
        m->manager_ctx = a;
        m->deleter = legacy_deleter;
        *(DLManagedTensor **)out = m;
    }
    return TACK_OK;
}

static tack_status to_legacy(tack_array *a, const int64_t *stream, DLManagedTensor **out)
{
    return to_managed(a, stream, 0, out);
}

static tack_status to_versioned(tack_array *a, const int64_t *stream, DLManagedTensorVersioned **out)
{
    return to_managed(a, stream, 1, out);
}

tack_status tack_array_to_dlpack(tack_array *a, DLManagedTensor **out)
{
    TACK_PUBLIC_CALL();
    return to_legacy(a, NULL, out);
}

tack_status tack_array_to_dlpack_versioned(tack_array *a, DLManagedTensorVersioned **out)
{
    TACK_PUBLIC_CALL();
    return to_versioned(a, NULL, out);
}

tack_status tack_array_to_dlpack_stream(tack_array *a, int64_t stream, DLManagedTensor **out)
{
    TACK_PUBLIC_CALL();
    return to_legacy(a, &stream, out);
}

tack_status tack_array_to_dlpack_versioned_stream(tack_array *a, int64_t stream, DLManagedTensorVersioned **out)
{
    TACK_PUBLIC_CALL();
    return to_versioned(a, &stream, out);
}

tack_status tack_array_to_dltensor(const tack_array *a, DLTensor *out)
{
    TACK_PUBLIC_CALL();
    if (!a || !out)
        return tack_error_set(TACK_EVALUE, "array and out must not be NULL");
    uint8_t code, bits;
    tack_status st = tack_dtype_to_dlpack(a->dtype, &code, &bits);
    if (st != TACK_OK)
        return st;
    out->data = a->data;
    out->device = tack_device_dl_device(a->buffer->device);
    out->ndim = (int32_t)a->ndim;
    out->dtype.code = code;
    out->dtype.bits = bits;
    out->dtype.lanes = 1;
    /* The array's own record: DLPack's field is not const, but a consumer
     * of a view does not write it. */
    out->shape = (int64_t *)(uintptr_t)a->shape;
    out->strides = NULL;
    out->byte_offset = 0;
    return TACK_OK;
}

tack_status tack_dlpack_allocate(const DLTensor *prototype, DLManagedTensorVersioned **out)
{
    TACK_PUBLIC_CALL();
    if (!prototype || !out)
        return tack_error_set(TACK_EVALUE, "prototype and out must not be NULL");
    const DLTensor *p = prototype;
    /* The shape is checked where the array is made, by tack_array_empty. */
    tack_dtype dtype;
    tack_status st = tack_dtype_from_dlpack(p->dtype.code, p->dtype.bits, p->dtype.lanes, &dtype);
    if (st != TACK_OK)
        return st;
    tack_device *device = NULL;
    st = tack_device_for_dlpack(p->device, &device);
    if (st != TACK_OK)
        return st;
    /* Pinned host memory asked for is not plain host memory: say so rather
     * than hand back memory of another kind under the prototype's label. */
    DLDevice got = tack_device_dl_device(device);
    if (got.device_type != p->device.device_type ||
        (got.device_type != kDLCPU && got.device_id != p->device.device_id)) {
        tack_device_release(device);
        return tack_error_set(TACK_EVALUE,
                              "Tack allocates that memory as DLPack device (%d, %d), not as "
                              "the prototype's (%d, %d)",
                              (int)got.device_type, (int)got.device_id, (int)p->device.device_type,
                              (int)p->device.device_id);
    }
    tack_array *a = NULL;
    st = tack_array_empty(device, dtype, (int)p->ndim, p->shape, 0, &a);
    tack_device_release(device);
    if (st != TACK_OK)
        return st;
    /* A fresh allocation has no queued work to order. */
    st = to_versioned(a, &(int64_t){-1}, out);
    tack_array_release(a);
    return st;
}

tack_status tack_dlpack_work_stream(DLDevice dl, uint64_t *out)
{
    TACK_PUBLIC_CALL();
    if (!out)
        return tack_error_set(TACK_EVALUE, "out is NULL");
    tack_device *d = NULL;
    tack_status st = tack_device_for_dlpack(dl, &d);
    if (st != TACK_OK)
        return st;
    *out = tack_device_stream_handle(d);
    tack_device_release(d);
    return TACK_OK;
}
