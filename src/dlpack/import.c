/* DLPack import, and the zero-copy imports of the other protocols held to
 * its rules: validate, choose the device, wrap, adopt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "tack/import.h"

static const char *device_type_name(DLDeviceType type)
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

/* The rules every zero-copy import follows, whatever protocol described the
 * memory: the extents, a data pointer, C-contiguous strides (in elements,
 * or in bytes when `byte_strides`), an address that does not wrap around
 * and elements aligned as their type needs (a complex number as its parts,
 * as C and NumPy align it). */
static inline tack_status check_memory(const char *what, const void *data, uint64_t byte_offset, int ndim,
                                       const int64_t *shape, const int64_t *strides, int byte_strides,
                                       tack_dtype dtype, size_t *size, size_t *nbytes)
{
    size_t item = tack_dtype_size(dtype), align = tack_dtype_alignment(dtype);
    tack_status st = tack_shape_check(dtype, ndim, shape, size, nbytes);
    if (st != TACK_OK)
        return st;
    if (!data && *size)
        return tack_error_set(TACK_EVALUE,
                              "%s has a NULL data pointer, not a valid address: the producer exported no memory",
                              what);
    if (strides && *size) {
        /* The extents' byte count fits int64_t, so no product here overflows. */
        int64_t expect = byte_strides ? (int64_t)item : 1;
        for (int i = ndim - 1; i >= 0; i--) {
            /* An extent of 1 is never stepped over, so its stride is free. */
            if (shape[i] != 1 && strides[i] != expect)
                return tack_error_set(TACK_EVALUE,
                                      "%s is not C-contiguous (stride %lld where %lld is needed in dimension %d); "
                                      "Tack arrays cannot describe strided memory: make it contiguous first "
                                      "(from C, a contiguous copy; PyTorch .contiguous(), NumPy np.ascontiguousarray)",
                                      what, (long long)strides[i], (long long)expect, i);
            expect *= shape[i];
        }
    }
    if (*size && byte_offset > UINTPTR_MAX - (uintptr_t)data)
        return tack_error_set(TACK_EVALUE, "%s's byte_offset %llu runs past the end of the address space", what,
                              (unsigned long long)byte_offset);
    uintptr_t addr = (uintptr_t)data + (uintptr_t)byte_offset;
    if (*size && (addr & (align - 1))) /* align is a power of two: no division */
        return tack_error_set(TACK_EVALUE,
                              "%s data (%p + byte_offset %llu) is not aligned to the %zu bytes its %s elements "
                              "need; copy it into aligned memory first",
                              what, data, (unsigned long long)byte_offset, align, tack_dtype_name(dtype));
    return TACK_OK;
}

static tack_status validate(const DLTensor *t, tack_dtype *dtype, size_t *size, size_t *nbytes)
{
    tack_status st = tack_dtype_from_dlpack(t->dtype.code, t->dtype.bits, t->dtype.lanes, dtype);
    if (st != TACK_OK)
        return st;
    return check_memory("DLPack tensor", t->data, t->byte_offset, t->ndim, t->shape, t->strides, 0, *dtype, size,
                        nbytes);
}

/* Whether `d` imports memory on `dl`; with `any_ordinal`, memory of its own
 * device type on any ordinal. */
static int wraps(const tack_device *d, DLDevice dl, int any_ordinal)
{
    return (any_ordinal && d->ops->dl_type == dl.device_type) || tack_device_can_wrap(d, dl);
}

/* choose_device past its common case. */
static tack_status choose_other_device(DLDevice dl, int any_ordinal, const char *what, tack_device *asked,
                                       tack_device *fallback, tack_device **out, int *owned)
{
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
        if (wraps(asked, dl, any_ordinal)) {
            *out = asked;
            return TACK_OK;
        }
        char where[48], id[32] = "";
        if (ops->dl_type == kDLCPU || any_ordinal)
            snprintf(where, sizeof where, "%s", ops->name);
        else
            snprintf(where, sizeof where, "%s:%d", ops->name, (int)dl.device_id);
        if (ops->dl_type != kDLCPU && !any_ordinal)
            snprintf(id, sizeof id, ", device id %d", (int)dl.device_id);
        return tack_error_set(TACK_ERUNTIME,
                              "%s (%s memory%s) cannot be wrapped by device %s without a copy; import it with "
                              "device=tack.device('%s'), or omit device=",
                              what, device_type_name(dl.device_type), id, tack_device_name(asked), where);
    }
    if (fallback && wraps(fallback, dl, any_ordinal)) {
        *out = fallback;
        return TACK_OK;
    }
    *owned = 1;
    return tack_device_for_dlpack(dl, out);
}

/* Sets *out to the device that imports memory on `dl`: borrowed from the
 * caller, or a new reference when *owned is set. */
static inline tack_status choose_device(DLDevice dl, int any_ordinal, const char *what, tack_device *asked,
                                        tack_device *fallback, tack_device **out, int *owned)
{
    /* The common case, host memory into a host default, decided at once. */
    if (!asked && dl.device_type == kDLCPU && fallback && fallback->ops->dl_type == kDLCPU) {
        *out = fallback;
        return TACK_OK;
    }
    return choose_other_device(dl, any_ordinal, what, asked, fallback, out, owned);
}

uint64_t tack_dlpack_consumer_stream(DLDevice dl, tack_device *asked, tack_device *fallback)
{
    if (dl.device_type != kDLCUDA && dl.device_type != kDLCUDAManaged && dl.device_type != kDLROCM)
        return 0;
    tack_device *target;
    int owned = 0;
    if (choose_device(dl, 0, "DLPack tensor", asked, fallback, &target, &owned) != TACK_OK)
        return 0;
    uint64_t handle = tack_device_stream_handle(target);
    if (owned)
        tack_device_release(target);
    return handle;
}

/* Wraps checked memory on `device` (released here when `owned`) in an
 * imported buffer that adopts `release`: the last array over the memory
 * calls it. A failed wrap adopts nothing and leaves it to the caller. */
static tack_status wrap_and_adopt(tack_device *device, int owned, void *data, tack_dtype dtype, int ndim,
                                  const int64_t *shape, size_t size, size_t nbytes, int writable,
                                  tack_release_fn release, void *ctx, tack_array **out)
{
    tack_array *a;
    tack_status st =
        tack_array_wrap_memory(device, data, dtype, ndim, shape, size, nbytes, writable, release, ctx, &a);
    if (owned)
        tack_device_release(device);
    if (st != TACK_OK)
        return st;
    *out = a;
    return TACK_OK;
}

static tack_status import_tensor(const DLTensor *t, int writable, tack_device *asked, tack_device *fallback,
                                 tack_release_fn release, void *ctx, tack_array **out)
{
    if (!out)
        return tack_error_set(TACK_EVALUE, "out is NULL");
    tack_dtype dtype;
    size_t size, nbytes;
    tack_status st = validate(t, &dtype, &size, &nbytes);
    if (st != TACK_OK)
        return st;
    tack_device *device;
    int owned = 0;
    st = choose_device(t->device, 0, "DLPack tensor", asked, fallback, &device, &owned);
    if (st != TACK_OK)
        return st;
    /* Integer arithmetic: NULL + 0 (a zero-size tensor, as PyTorch exports
     * it) is undefined on pointers. */
    void *data = (void *)((uintptr_t)t->data + (uintptr_t)t->byte_offset);
    return wrap_and_adopt(device, owned, data, dtype, t->ndim, t->shape, size, nbytes, writable, release, ctx, out);
}

tack_status tack_import_array(const struct tack_import *im, tack_device *asked, tack_device *fallback,
                              tack_array **out)
{
    TACK_PUBLIC_CALL();
    if (!im || !out)
        return tack_error_set(TACK_EVALUE, "import and out must not be NULL");
    size_t size, nbytes;
    tack_status st =
        check_memory(im->what, im->data, 0, im->ndim, im->shape, im->strides, 1, im->dtype, &size, &nbytes);
    if (st != TACK_OK)
        return st;
    if (nbytes > im->max_bytes)
        return tack_error_set(TACK_EVALUE, "%s has a shape of %zu bytes over %zu bytes of memory", im->what, nbytes,
                              im->max_bytes);
    tack_device *device;
    int owned = 0;
    st = choose_device(im->device, im->any_ordinal, im->what, asked, fallback, &device, &owned);
    if (st != TACK_OK)
        return st;
    if (im->producer_stream) {
        st = tack_device_wait_stream(device, im->producer_stream);
        if (st != TACK_OK) {
            if (owned)
                tack_device_release(device);
            return st;
        }
    }
    return wrap_and_adopt(device, owned, im->data, im->dtype, im->ndim, im->shape, size, nbytes, im->writable,
                          im->release, im->context, out);
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
    TACK_PUBLIC_CALL();
    if (!m)
        return tack_error_set(TACK_EVALUE, "the managed tensor is NULL");
    return import_tensor(&m->dl_tensor, 1, device, default_device, release_legacy, m, out);
}

tack_status tack_array_from_dlpack_versioned(DLManagedTensorVersioned *m, tack_device *device,
                                             tack_device *default_device, tack_array **out, int *deleter_called)
{
    TACK_PUBLIC_CALL();
    if (deleter_called)
        *deleter_called = 0;
    if (!m)
        return tack_error_set(TACK_EVALUE, "the managed tensor is NULL");
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
