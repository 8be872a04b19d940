/* DLPack import: validate, choose the device, wrap, adopt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

static const char *device_type_name(int type)
{
    switch (type) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    case kDLVPI: return "kDLVPI";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLExtDev: return "kDLExtDev";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    case kDLOneAPI: return "kDLOneAPI";
    case kDLWebGPU: return "kDLWebGPU";
    case kDLHexagon: return "kDLHexagon";
    default: return "an unknown device type";
    }
}

/* The backend that would wrap a device type, or NULL. */
static const struct tack_backend_ops *backend_for(DLDeviceType type)
{
    for (int i = 0; tack_backends[i]; i++)
        for (const DLDeviceType *t = tack_backends[i]->wraps; t && *t; t++)
            if (*t == type)
                return tack_backends[i];
    return NULL;
}

static tack_status validate(const DLTensor *t, tack_dtype *dtype, size_t *size, size_t *nbytes)
{
    if (t->ndim < 0 || t->ndim > TACK_MAX_NDIM)
        return tack_error_set(TACK_EVALUE, "DLPack tensor has ndim %d; Tack imports 0 to %d dimensions",
                              (int)t->ndim, TACK_MAX_NDIM);
    if (t->ndim > 0 && !t->shape)
        return tack_error_set(TACK_EVALUE, "DLPack tensor has ndim %d but a NULL shape", (int)t->ndim);
    tack_status st = tack_dtype_from_dlpack(t->dtype.code, t->dtype.bits, t->dtype.lanes, dtype);
    if (st != TACK_OK)
        return st;
    size_t item = tack_dtype_size(*dtype);
    st = tack_shape_check(t->ndim, t->shape, item, size, nbytes);
    if (st != TACK_OK)
        return st;
    if (!t->data && *size)
        return tack_error_set(TACK_EVALUE, "DLPack tensor has a NULL data pointer; the producer exported no memory");
    if (t->strides && *size) {
        int64_t expect = 1;
        for (int i = t->ndim - 1; i >= 0; i--) {
            /* An extent of 1 is never stepped over, so its stride is free. */
            if (t->shape[i] != 1 && t->strides[i] != expect)
                return tack_error_set(TACK_EVALUE,
                                      "DLPack tensor is not C-contiguous (stride %lld where %lld is needed in "
                                      "dimension %d); Tack arrays cannot describe strided memory: make the "
                                      "tensor contiguous first (.contiguous(), np.ascontiguousarray)",
                                      (long long)t->strides[i], (long long)expect, i);
            expect *= t->shape[i];
        }
    }
    if (*size && t->byte_offset > UINTPTR_MAX - (uintptr_t)t->data)
        return tack_error_set(TACK_EVALUE, "DLPack tensor's byte_offset %llu runs past the end of the address space",
                              (unsigned long long)t->byte_offset);
    uintptr_t addr = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
    if (*size && (addr & (item - 1))) /* item is a power of two: no division */
        return tack_error_set(TACK_EVALUE,
                              "DLPack tensor data (%p + byte_offset %llu) is not aligned to its %zu-byte "
                              "elements",
                              t->data, (unsigned long long)t->byte_offset, item);
    return TACK_OK;
}

/* Sets *out to the device that imports the tensor: borrowed from the
 * caller, or a new reference when *owned is set. */
static tack_status choose_device(DLDevice dl, tack_device *asked, tack_device *fallback, tack_device **out,
                                 int *owned)
{
    /* The common case, host memory into a host default, decided at once. */
    if (!asked && dl.device_type == kDLCPU && fallback && fallback->ops->dl_type == kDLCPU) {
        *out = fallback;
        return TACK_OK;
    }
    if (dl.device_type == kDLMetal)
        return tack_error_set(TACK_EVALUE,
                              "kDLMetal tensors cannot be imported without a copy: their data is an opaque "
                              "MTLBuffer handle, not an address. Move the tensor to host memory and import it "
                              "with tack.from_dlpack(..., copy=True)");
    const struct tack_backend_ops *ops = backend_for(dl.device_type);
    if (!ops)
        return tack_error_set(TACK_EVALUE, "DLPack device type %d (%s) is not supported by Tack", (int)dl.device_type,
                              device_type_name(dl.device_type));
    if (asked) {
        if (tack_device_can_wrap(asked, dl)) {
            *out = asked;
            return TACK_OK;
        }
        char where[48];
        if (ops->dl_type == kDLCPU)
            snprintf(where, sizeof where, "%s", ops->name);
        else
            snprintf(where, sizeof where, "%s:%d", ops->name, (int)dl.device_id);
        return tack_error_set(TACK_ERUNTIME,
                              "device '%s' cannot wrap a %s tensor (device id %d) without a copy; import it "
                              "with device=tack.device('%s'), or omit device=",
                              tack_device_name(asked), device_type_name(dl.device_type), (int)dl.device_id, where);
    }
    if (fallback && tack_device_can_wrap(fallback, dl)) {
        *out = fallback;
        return TACK_OK;
    }
    *owned = 1;
    return tack_device_for_dlpack(dl, out);
}

static tack_status import_tensor(const DLTensor *t, int writable, tack_device *asked, tack_device *fallback,
                                 tack_release_fn release, void *ctx, tack_array **out)
{
    if (!out)
        return tack_error_set(TACK_EVALUE, "DLPack import: out is NULL");
    tack_dtype dtype;
    size_t size, nbytes;
    tack_status st = validate(t, &dtype, &size, &nbytes);
    if (st != TACK_OK)
        return st;
    tack_device *device;
    int owned = 0;
    st = choose_device(t->device, asked, fallback, &device, &owned);
    if (st != TACK_OK)
        return st;
    /* Integer arithmetic: NULL + 0 (a zero-size tensor, as PyTorch exports
     * it) is undefined on pointers. */
    void *data = (void *)((uintptr_t)t->data + (uintptr_t)t->byte_offset);
    tack_array *a;
    st = tack_array_wrap_memory(device, data, dtype, t->ndim, t->shape, size, nbytes, writable, &a);
    if (owned)
        tack_device_release(device);
    if (st != TACK_OK)
        return st;
    /* Adopt only now that nothing else can fail: the deleter runs when the
     * last array over the memory goes. */
    a->buffer->release = release;
    a->buffer->release_ctx = ctx;
    *out = a;
    return TACK_OK;
}

static void release_legacy(void *ctx)
{
    DLManagedTensor *m = ctx;
    if (m->deleter)
        m->deleter(m);
}

static void release_versioned(void *ctx)
{
    DLManagedTensorVersioned *m = ctx;
    if (m->deleter)
        m->deleter(m);
}

tack_status tack_array_from_dlpack(DLManagedTensor *m, tack_device *device, tack_device *default_device,
                                   tack_array **out)
{
    if (!m)
        return tack_error_set(TACK_EVALUE, "DLPack import: the managed tensor is NULL");
    return import_tensor(&m->dl_tensor, 1, device, default_device, release_legacy, m, out);
}

tack_status tack_array_from_dlpack_versioned(DLManagedTensorVersioned *m, tack_device *device,
                                             tack_device *default_device, tack_array **out, int *deleter_called)
{
    if (deleter_called)
        *deleter_called = 0;
    if (!m)
        return tack_error_set(TACK_EVALUE, "DLPack import: the managed tensor is NULL");
    if (m->version.major != DLPACK_MAJOR_VERSION) {
        unsigned major = m->version.major, minor = m->version.minor;
        /* The layout past the version may differ, so nothing else is read;
         * the specification has the consumer call the deleter. */
        if (m->deleter)
            m->deleter(m);
        if (deleter_called)
            *deleter_called = 1;
        return tack_error_set(TACK_EBUFFER,
                              "DLPack tensor has version %u.%u; Tack reads DLPack %d.x. The tensor was released; "
                              "ask the producer for max_version=(1, 0)",
                              major, minor, DLPACK_MAJOR_VERSION);
    }
    int writable = !(m->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
    return import_tensor(&m->dl_tensor, writable, device, default_device, release_versioned, m, out);
}
