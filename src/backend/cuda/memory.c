/*
 * The CUDA backend's memory: allocations (stream-ordered from the device's
 * pool, plain, or exportable through virtual memory management), each
 * zero-filled before anyone gets its pointer; frees; what an address is;
 * copies to and from the host. See src/backend/cuda/cuda.c.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

static tack_status out_of_memory(const tack_device *d, CUresult r, size_t nbytes, const char *how)
{
    char text[200];
    tack_status st = r == CUDA_ERROR_OUT_OF_MEMORY ? TACK_ENOMEM : TACK_ERUNTIME;
    return tack_error_set(st, "allocating %zu bytes on %s (%s) failed: %s", nbytes, d->name, how,
                          tack_cuda_error_text(r, text, sizeof text));
}

/* Zero-fills and waits, so the memory reads as zeros to whoever gets it. */
static CUresult zero_fill(struct cuda_device *cd, CUdeviceptr p, size_t n)
{
    CUresult r = cd->cu->cuMemsetD8Async(p, 0, n, cd->fill_stream);
    if (r == CUDA_SUCCESS)
        r = cd->cu->cuStreamSynchronize(cd->fill_stream);
    return r;
}

static tack_status stream_alloc(tack_device *d, struct cuda_device *cd, size_t nbytes, struct cuda_alloc *a)
{
    const struct tack_cuda_api *cu = cd->cu;
    CUresult r;
    if (cd->pools) {
        a->kind = ALLOC_POOL;
        r = cu->cuMemAllocAsync(&a->ptr, nbytes, cd->fill_stream);
    } else {
        a->kind = ALLOC_PLAIN;
        r = cu->cuMemAlloc(&a->ptr, nbytes);
    }
    if (r != CUDA_SUCCESS)
        return out_of_memory(d, r, nbytes, a->kind == ALLOC_POOL ? "cuMemAllocAsync" : "cuMemAlloc");
    a->size = nbytes;
    r = zero_fill(cd, a->ptr, nbytes);
    if (r != CUDA_SUCCESS) {
        if (a->kind == ALLOC_POOL) {
            cu->cuMemFreeAsync(a->ptr, cd->fill_stream);
            cu->cuStreamSynchronize(cd->fill_stream);
        } else {
            cu->cuMemFree(a->ptr);
        }
        return cuda_driver_error(TACK_ERUNTIME, r, "zero-filling a new allocation", d);
    }
    return TACK_OK;
}

void cuda_vmm_prop(const struct cuda_device *cd, CUmemAllocationProp *prop)
{
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requestedHandleTypes = EXPORT_HANDLE_TYPE;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = (int)cd->dev;
}

/* Maps a physical allocation (a->handle) at an address of its own with
 * read-write access from the device: cuMemAddressReserve, cuMemMap,
 * cuMemSetAccess. On failure undoes what it did (the handle stays the
 * caller's) and names the failing step in *step. */
CUresult cuda_vmm_map(struct cuda_device *cd, struct cuda_alloc *a, size_t size, const char **step)
{
    const struct tack_cuda_api *cu = cd->cu;
    *step = "cuMemAddressReserve";
    CUresult r = cu->cuMemAddressReserve(&a->ptr, size, 0, 0, 0);
    if (r != CUDA_SUCCESS)
        return r;
    *step = "cuMemMap";
    r = cu->cuMemMap(a->ptr, size, 0, a->handle, 0);
    if (r != CUDA_SUCCESS) {
        cu->cuMemAddressFree(a->ptr, size);
        return r;
    }
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = (int)cd->dev;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    *step = "cuMemSetAccess";
    r = cu->cuMemSetAccess(a->ptr, size, &access, 1);
    if (r != CUDA_SUCCESS) {
        cu->cuMemUnmap(a->ptr, size);
        cu->cuMemAddressFree(a->ptr, size);
    }
    return r;
}

/* Exportable memory: a physical allocation that can be exported as an OS
 * handle (cuMemCreate), mapped at an address of its own. Memory from
 * cuMemAllocAsync or cuMemAlloc cannot be exported this way. */
static tack_status vmm_alloc(tack_device *d, struct cuda_device *cd, size_t nbytes, struct cuda_alloc *a)
{
    const struct tack_cuda_api *cu = cd->cu;
    if (!cd->granularity)
        return tack_error_set(TACK_ERUNTIME,
                              "%s cannot allocate exportable memory: the device or its driver does not support "
                              "CUDA virtual memory management with %s handles",
                              d->name, EXPORT_HANDLE_NAME);
    size_t g = cd->granularity;
    if (nbytes > SIZE_MAX - (g - 1))
        return tack_error_set(TACK_EVALUE, "%zu bytes cannot be rounded up to the allocation granularity", nbytes);
    size_t size = (nbytes + g - 1) / g * g;
    CUmemAllocationProp prop;
    cuda_vmm_prop(cd, &prop);
    CUresult r = cu->cuMemCreate(&a->handle, size, &prop, 0);
    if (r != CUDA_SUCCESS)
        return out_of_memory(d, r, size, "cuMemCreate");
    const char *step;
    r = cuda_vmm_map(cd, a, size, &step);
    if (r == CUDA_SUCCESS) {
        step = "zero-filling";
        /* The whole allocation: an importer sees allocation_size bytes. */
        r = zero_fill(cd, a->ptr, size);
        if (r == CUDA_SUCCESS) {
            a->kind = ALLOC_VMM;
            a->size = size;
            return TACK_OK;
        }
        cu->cuMemUnmap(a->ptr, size);
        cu->cuMemAddressFree(a->ptr, size);
    }
    cu->cuMemRelease(a->handle);
    return out_of_memory(d, r, size, step);
}

tack_status cuda_alloc(tack_device *d, size_t nbytes, int exportable, void **data, void **ctx)
{
    struct cuda_device *cd = impl_of(d);
    struct cuda_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return tack_error_set(TACK_ENOMEM, "out of memory allocating a buffer record");
    int pushed;
    tack_status st = cuda_enter(d, cd, &pushed);
    if (st == TACK_OK) {
        st = exportable ? vmm_alloc(d, cd, nbytes, a) : stream_alloc(d, cd, nbytes, a);
        cuda_pop_context(cd->cu, pushed);
    }
    if (st != TACK_OK) {
        free(a);
        return st;
    }
    a->ctx = cd->ctx;
    a->ctx_id = cd->ctx_id;
    *data = (void *)(uintptr_t)a->ptr;
    *ctx = a;
    return TACK_OK;
}

void cuda_free(tack_device *d, void *data, void *ctx)
{
    (void)data;
    struct cuda_device *cd = impl_of(d);
    struct cuda_alloc *a = ctx;
    const struct tack_cuda_api *cu = cd->cu;
    int pushed = 0;
    /* The free runs wherever the last reference went (a DLPack deleter on
     * another library's thread, the garbage collector), and must not
     * replace that thread's error message, so no error is reported. An
     * allocation whose context is gone went with it: nothing to free. */
    if (atomic_load(&cd->gone) || !cuda_context_alive(cd, a->ctx, a->ctx_id)) {
        atomic_store(&cd->gone, 1);
        free(a);
        return;
    }
    if (cuda_push_context(cu, a->ctx, &pushed) != CUDA_SUCCESS) {
        free(a);
        return;
    }
    switch (a->kind) {
    case ALLOC_POOL:
        /* After the launches queued on it, without waiting for them. */
        cu->cuMemFreeAsync(a->ptr, cd->stream);
        break;
    case ALLOC_PLAIN:
        cu->cuStreamSynchronize(cd->stream);
        cu->cuMemFree(a->ptr);
        break;
    case ALLOC_VMM:
        cu->cuStreamSynchronize(cd->stream);
        cu->cuMemUnmap(a->ptr, a->size);
        cu->cuMemAddressFree(a->ptr, a->size);
        cu->cuMemRelease(a->handle);
        break;
    }
    cuda_pop_context(cd->cu, pushed);
    free(a);
}

/* cuPointerGetAttribute(MEMORY_TYPE) knows every address CUDA allocated or
 * registered; a failed query means memory CUDA knows nothing of: host memory
 * from malloc or NumPy, which a kernel cannot read. */
tack_status cuda_check_pointer(tack_device *d, uint64_t address)
{
    struct cuda_device *cd = impl_of(d);
    const struct tack_cuda_api *cu = cd->cu;
    /* A zero-size tensor may come with a NULL pointer; nothing is read. */
    if (address == 0)
        return TACK_OK;
    int pushed;
    tack_status st = cuda_enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    CUdeviceptr p = (CUdeviceptr)address;
    unsigned int type = 0;
    CUresult r = cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
    if (r == CUDA_ERROR_NOT_INITIALIZED || r == CUDA_ERROR_DEINITIALIZED) {
        st = cuda_driver_error(TACK_ERUNTIME, r, "querying a pointer", d);
    } else if (r != CUDA_SUCCESS) {
        st = tack_error_set(TACK_EVALUE,
                            "address 0x%llx is not CUDA memory: the CUDA driver does not know it, so it is host "
                            "memory (malloc, NumPy). Wrap it on the cpu device, or copy it to %s",
                            (unsigned long long)address, d->name);
    } else if (type == CU_MEMORYTYPE_DEVICE) {
        /* Device memory must be this device's, unless it is managed memory,
         * which every device can reach (asked only when the ordinal differs:
         * an import pays for two queries, not three). */
        int ordinal = -1;
        unsigned int managed = 0;
        if (cu->cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) == CUDA_SUCCESS &&
            ordinal != d->ordinal &&
            !(cu->cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p) == CUDA_SUCCESS && managed))
            st = tack_error_set(TACK_EVALUE,
                                "address 0x%llx is memory of cuda:%d, not of %s; wrap it on tack.device('cuda:%d')",
                                (unsigned long long)address, ordinal, d->name, ordinal);
    } else if (type != CU_MEMORYTYPE_HOST && type != CU_MEMORYTYPE_UNIFIED) {
        /* Pinned host memory (HOST) and unified memory are reachable from
         * kernels; anything else (a CUDA array) is no linear address. */
        st = tack_error_set(TACK_EVALUE, "address 0x%llx is CUDA memory of type %u, which is not linear memory",
                            (unsigned long long)address, type);
    }
    cuda_pop_context(cd->cu, pushed);
    return st;
}

/* tack_memory_space's answer: what cuPointerGetAttribute says, where a
 * failed query means memory CUDA does not know (NULL), as for wrapping. */
tack_status cuda_memory_space(tack_device *d, uint64_t address, const char **out)
{
    struct cuda_device *cd = impl_of(d);
    const struct tack_cuda_api *cu = cd->cu;
    int pushed;
    tack_status st = cuda_enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    CUdeviceptr p = (CUdeviceptr)address;
    unsigned int type = 0, managed = 0;
    CUresult r = cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
    if (r == CUDA_ERROR_NOT_INITIALIZED || r == CUDA_ERROR_DEINITIALIZED)
        st = cuda_driver_error(TACK_ERUNTIME, r, "querying a pointer", d);
    else if (r != CUDA_SUCCESS)
        *out = NULL;
    else if (type == CU_MEMORYTYPE_HOST)
        *out = "cuda_pinned";
    else if (type == CU_MEMORYTYPE_UNIFIED ||
             (cu->cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p) == CUDA_SUCCESS && managed))
        *out = "cuda_managed";
    else
        *out = type == CU_MEMORYTYPE_ARRAY ? "cuda_array" : "cuda";
    cuda_pop_context(cd->cu, pushed);
    return st;
}

/* A copy on Tack's stream, so after the launches queued before it, and
 * waited for: the host side is the caller's, free to go once we return,
 * and the device side may be read by another library at once. */
static tack_status copy_waited(tack_device *d, int to_host, void *dst, const void *src, size_t nbytes)
{
    struct cuda_device *cd = impl_of(d);
    int pushed;
    tack_status st = cuda_enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    CUresult r = to_host ? cd->cu->cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, nbytes, cd->stream)
                         : cd->cu->cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, nbytes, cd->stream);
    if (r == CUDA_SUCCESS)
        r = cd->cu->cuStreamSynchronize(cd->stream);
    cuda_pop_context(cd->cu, pushed);
    const char *what = to_host ? "copying to the host" : "copying from the host";
    return r == CUDA_SUCCESS ? TACK_OK : cuda_driver_error(TACK_ERUNTIME, r, what, d);
}

tack_status cuda_copy_to_host(tack_device *d, void *dst, const void *src, size_t nbytes)
{
    return copy_waited(d, 1, dst, src, nbytes);
}

tack_status cuda_copy_from_host(tack_device *d, void *dst, const void *src, size_t nbytes)
{
    return copy_waited(d, 0, dst, src, nbytes);
}

const struct tack_backend_memory tack_cuda_memory = {
    .alloc = cuda_alloc,
    .free = cuda_free,
    .check_pointer = cuda_check_pointer,
    .copy_to_host = cuda_copy_to_host,
    .copy_from_host = cuda_copy_from_host,
    .export_memory = cuda_export_memory,
    .release_export = cuda_release_export,
    .import_memory = cuda_import_memory,
    .memory_space = cuda_memory_space,
};
