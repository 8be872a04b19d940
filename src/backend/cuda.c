/*
 * The CUDA backend: device memory through the driver API (src/driver/cuda.h).
 *
 * A device works in one context for its whole life: the context current on
 * the thread that opened it, else the device's primary context (the one the
 * CUDA runtime, PyTorch, CuPy and Warp use), retained. Every entry point
 * makes that context current for the duration of the call and restores the
 * caller's, so Tack can be used from any thread. Tack destroys no context:
 * it only releases the primary-context reference it took.
 *
 * Work goes on two non-blocking streams of Tack's own: `stream` carries
 * launches, copies and stream-ordered frees in submission order;
 * `fill_stream` carries allocations and their zero-fill, which are waited
 * for before the allocation is returned, so that a fresh buffer reads as
 * zeros to anyone who gets its pointer (another library reading it on its
 * own stream right after a DLPack export included) without waiting for the
 * launches queued before it.
 *
 * Kernels are CUDA C compiled by NVRTC (src/driver/nvrtc.h) to a CUBIN for
 * the GPU or to PTX the driver reads, loaded as modules and launched on
 * `stream`.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/internal.h"
#include "../core/queue.h"
#include "../core/toolchain.h"
#include "../driver/cuda.h"
#include "../driver/nvrtc.h"
#include "tack/kernel.h"

/* Exported memory is a POSIX file descriptor, which the exporting buffer
 * owns and closes. */
#define EXPORT_HANDLE_TYPE CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
#define EXPORT_HANDLE_ATTRIBUTE CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
#define EXPORT_HANDLE_NAME "posix_fd"

struct cuda_device {
    const struct tack_cuda_api *cu;
    CUdevice dev;
    CUcontext ctx;
    /* cuCtxGetId of ctx when the device adopted it: a destroyed context, or
     * a new one at a recycled address, answers differently. */
    unsigned long long ctx_id;
    int primary; /* Tack holds a primary-context reference, released at close */
    atomic_int gone;
    CUstream stream;
    CUstream fill_stream;
    int pools;          /* cuMemAllocAsync usable */
    int sm_count;       /* multiprocessors, for the launch geometry */
    size_t granularity; /* of exportable allocations; 0: not supported */
    uint8_t uuid[16];
    pthread_mutex_t export_lock;
    int arch; /* compute capability, 10 * major + minor: 90 is sm_90 */
    /* Set once the driver refused a CUBIN, with why: later kernels on the
     * device are PTX. Guarded by code_lock. */
    int cubin_refused;
    char refusal[320];
    pthread_mutex_t code_lock;
};

enum alloc_kind { ALLOC_POOL, ALLOC_PLAIN, ALLOC_VMM };

/* A buffer's record of its allocation, and of the context it lives in. */
struct cuda_alloc {
    enum alloc_kind kind;
    CUdeviceptr ptr;
    size_t size; /* bytes reserved (rounded up to the granularity for VMM) */
    CUmemGenericAllocationHandle handle;
    CUcontext ctx;
    unsigned long long ctx_id;
};

/* What export_memory keeps in buffer->export_ctx. */
struct cuda_export {
    int64_t handle; /* the exported handle, owned here; -1 while none */
    size_t allocation_size;
    tack_buffer *copy; /* the exportable copy of a plain buffer, or NULL */
};

static struct cuda_device *impl_of(const tack_device *d) { return d->impl; }

static tack_status driver_error(tack_status st, CUresult r, const char *what, const tack_device *d)
{
    char text[200];
    return tack_error_set(st, "%s on %s failed: %s", what, d->name, tack_cuda_error_text(r, text, sizeof text));
}

/* 1 while `ctx` is the live context that had `id` when it was recorded. A
 * driver without cuCtxGetId cannot tell; then the calls themselves fail. */
static int context_alive(const struct cuda_device *cd, CUcontext ctx, unsigned long long id)
{
    if (!cd->cu->cuCtxGetId)
        return 1;
    unsigned long long now = 0;
    return cd->cu->cuCtxGetId(ctx, &now) == CUDA_SUCCESS && now == id;
}

static int device_usable(struct cuda_device *cd)
{
    if (atomic_load(&cd->gone))
        return 0;
    if (context_alive(cd, cd->ctx, cd->ctx_id))
        return 1;
    /* Once destroyed, always destroyed: a context at the same address later
     * is someone else's. */
    atomic_store(&cd->gone, 1);
    return 0;
}

static tack_status gone_error(const tack_device *d)
{
    return tack_error_set(TACK_ERUNTIME,
                          "the CUDA context of %s was destroyed (by the library that created it, or by a reset "
                          "of the device's primary context), and the arrays allocated in it went with it; keep "
                          "that context alive while Tack uses it",
                          d->name);
}

/* Makes the device's context current on this thread if it is not already;
 * *pushed says whether leave() must restore the caller's. Fails with
 * TACK_ERUNTIME, nothing pushed, when the context is gone. */
static tack_status enter(const tack_device *d, struct cuda_device *cd, int *pushed)
{
    *pushed = 0;
    if (!device_usable(cd))
        return gone_error(d);
    CUcontext current = NULL;
    if (cd->cu->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == cd->ctx)
        return TACK_OK;
    CUresult r = cd->cu->cuCtxPushCurrent(cd->ctx);
    if (r != CUDA_SUCCESS)
        return driver_error(TACK_ERUNTIME, r, "making the CUDA context current", d);
    *pushed = 1;
    return TACK_OK;
}

static void leave(struct cuda_device *cd, int pushed)
{
    if (pushed) {
        CUcontext popped;
        cd->cu->cuCtxPopCurrent(&popped);
    }
}

static void device_free(struct cuda_device *cd)
{
    pthread_mutex_destroy(&cd->export_lock);
    pthread_mutex_destroy(&cd->code_lock);
    free(cd);
}

/* Adopts the calling thread's context if it belongs to `dev`, else retains
 * the primary context. Sets cd->ctx, cd->primary and *external. */
static tack_status choose_context(tack_device *d, struct cuda_device *cd, int *external)
{
    const struct tack_cuda_api *cu = cd->cu;
    CUcontext current = NULL;
    CUdevice current_dev = -1;
    *external = 0;
    if (cu->cuCtxGetCurrent(&current) != CUDA_SUCCESS)
        current = NULL;
    if (current && cu->cuCtxGetDevice(&current_dev) == CUDA_SUCCESS && current_dev == cd->dev) {
        /* The current context may be the primary one (made current by the
         * CUDA runtime, PyTorch, CuPy): then take a reference to it like any
         * user of the primary context. Only an active primary context can be
         * current, and checking the state first avoids creating one. */
        unsigned int flags;
        int active = 0;
        if (cu->cuDevicePrimaryCtxGetState(cd->dev, &flags, &active) == CUDA_SUCCESS && active) {
            CUcontext primary;
            if (cu->cuDevicePrimaryCtxRetain(&primary, cd->dev) == CUDA_SUCCESS) {
                if (primary == current) {
                    cd->ctx = primary;
                    cd->primary = 1;
                    return TACK_OK;
                }
                cu->cuDevicePrimaryCtxRelease(cd->dev);
            }
        }
        cd->ctx = current;
        *external = 1;
        return TACK_OK;
    }
    CUresult r = cu->cuDevicePrimaryCtxRetain(&cd->ctx, cd->dev);
    if (r != CUDA_SUCCESS)
        return driver_error(TACK_ERUNTIME, r, "retaining the primary CUDA context", d);
    cd->primary = 1;
    return TACK_OK;
}

static int device_attribute(const struct cuda_device *cd, CUdevice_attribute a)
{
    int v = 0;
    if (cd->cu->cuDeviceGetAttribute(&v, a, cd->dev) != CUDA_SUCCESS)
        return 0;
    return v;
}

static void vmm_prop(const struct cuda_device *cd, CUmemAllocationProp *prop)
{
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requestedHandleTypes = EXPORT_HANDLE_TYPE;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = (int)cd->dev;
}

/* What the device supports, read once in the device's context. */
static void probe(struct cuda_device *cd)
{
    const struct tack_cuda_api *cu = cd->cu;
    cd->pools = cu->cuMemAllocAsync && cu->cuMemFreeAsync &&
                device_attribute(cd, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
    cd->granularity = 0;
    if (cu->cuMemGetAllocationGranularity && cu->cuMemCreate && cu->cuMemRelease && cu->cuMemAddressReserve &&
        cu->cuMemAddressFree && cu->cuMemMap && cu->cuMemUnmap && cu->cuMemSetAccess &&
        cu->cuMemExportToShareableHandle &&
        device_attribute(cd, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) &&
        device_attribute(cd, EXPORT_HANDLE_ATTRIBUTE)) {
        CUmemAllocationProp prop;
        size_t g = 0;
        vmm_prop(cd, &prop);
        if (cu->cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS)
            cd->granularity = g;
    }
    cd->sm_count = device_attribute(cd, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    cd->arch = 10 * device_attribute(cd, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) +
               device_attribute(cd, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    CUuuid uuid;
    memset(&uuid, 0, sizeof uuid);
    if (!(cu->cuDeviceGetUuid && cu->cuDeviceGetUuid(&uuid, cd->dev) == CUDA_SUCCESS) && cu->cuDeviceGetUuid_v1)
        cu->cuDeviceGetUuid_v1(&uuid, cd->dev);
    memcpy(cd->uuid, uuid.bytes, sizeof cd->uuid);
}

static tack_status cuda_open(tack_device *d, const tack_option *options, size_t n_options)
{
    (void)options;
    (void)n_options;
    const struct tack_cuda_api *cu;
    tack_status st = tack_cuda_api_get(&cu);
    if (st != TACK_OK)
        return st;
    int count = 0;
    CUresult r = cu->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return driver_error(TACK_ERUNTIME, r, "counting CUDA devices", d);
    if (count <= 0)
        return tack_error_set(TACK_ENODEVICE, "CUDA is not available: the driver reports no CUDA device");
    if (d->ordinal >= count)
        return tack_error_set(TACK_ENODEVICE, "there is no CUDA device %d: this machine has %d (cuda:0 to cuda:%d)",
                              d->ordinal, count, count - 1);

    struct cuda_device *cd = calloc(1, sizeof *cd);
    if (!cd)
        return tack_error_set(TACK_ENOMEM, "out of memory opening %s", d->name);
    cd->cu = cu;
    atomic_init(&cd->gone, 0);
    pthread_mutex_init(&cd->export_lock, NULL);
    pthread_mutex_init(&cd->code_lock, NULL);
    r = cu->cuDeviceGet(&cd->dev, d->ordinal);
    if (r != CUDA_SUCCESS) {
        device_free(cd);
        return driver_error(TACK_ERUNTIME, r, "cuDeviceGet", d);
    }
    int external;
    st = choose_context(d, cd, &external);
    if (st != TACK_OK) {
        device_free(cd);
        return st;
    }
    if (cu->cuCtxGetId && (r = cu->cuCtxGetId(cd->ctx, &cd->ctx_id)) != CUDA_SUCCESS) {
        st = driver_error(TACK_ERUNTIME, r, "reading the CUDA context's id", d);
        goto fail;
    }
    int pushed;
    st = enter(d, cd, &pushed);
    if (st != TACK_OK)
        goto fail;
    /* Non-blocking: Tack's work neither waits for nor holds up work on the
     * legacy default stream of the libraries sharing the context. */
    r = cu->cuStreamCreate(&cd->stream, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS) {
        r = cu->cuStreamCreate(&cd->fill_stream, CU_STREAM_NON_BLOCKING);
        if (r != CUDA_SUCCESS)
            cu->cuStreamDestroy(cd->stream);
    }
    if (r == CUDA_SUCCESS)
        probe(cd);
    leave(cd, pushed);
    if (r != CUDA_SUCCESS) {
        st = driver_error(TACK_ERUNTIME, r, "creating a CUDA stream", d);
        goto fail;
    }
    d->impl = cd;
    d->external_context = external;
    return TACK_OK;
fail:
    if (cd->primary)
        cu->cuDevicePrimaryCtxRelease(cd->dev);
    device_free(cd);
    return st;
}

static void cuda_close(tack_device *d)
{
    struct cuda_device *cd = impl_of(d);
    if (!cd)
        return;
    int pushed;
    if (device_usable(cd) && enter(d, cd, &pushed) == TACK_OK) {
        /* Stream-ordered frees may still be queued. */
        cd->cu->cuStreamSynchronize(cd->stream);
        cd->cu->cuStreamDestroy(cd->stream);
        cd->cu->cuStreamDestroy(cd->fill_stream);
        leave(cd, pushed);
    }
    /* Only the reference Tack took; an adopted context is its owner's. */
    if (cd->primary)
        cd->cu->cuDevicePrimaryCtxRelease(cd->dev);
    device_free(cd);
    d->impl = NULL;
}

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
        return driver_error(TACK_ERUNTIME, r, "zero-filling a new allocation", d);
    }
    return TACK_OK;
}

/* Maps a physical allocation (a->handle) at an address of its own with
 * read-write access from the device: cuMemAddressReserve, cuMemMap,
 * cuMemSetAccess. On failure undoes what it did (the handle stays the
 * caller's) and names the failing step in *step. */
static CUresult vmm_map(struct cuda_device *cd, struct cuda_alloc *a, size_t size, const char **step)
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
    vmm_prop(cd, &prop);
    CUresult r = cu->cuMemCreate(&a->handle, size, &prop, 0);
    if (r != CUDA_SUCCESS)
        return out_of_memory(d, r, size, "cuMemCreate");
    const char *step;
    r = vmm_map(cd, a, size, &step);
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

static tack_status cuda_alloc(tack_device *d, size_t nbytes, int exportable, void **data, void **ctx)
{
    struct cuda_device *cd = impl_of(d);
    struct cuda_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return tack_error_set(TACK_ENOMEM, "out of memory allocating a buffer record");
    int pushed;
    tack_status st = enter(d, cd, &pushed);
    if (st == TACK_OK) {
        st = exportable ? vmm_alloc(d, cd, nbytes, a) : stream_alloc(d, cd, nbytes, a);
        leave(cd, pushed);
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

static void cuda_free(tack_device *d, void *data, void *ctx)
{
    (void)data;
    struct cuda_device *cd = impl_of(d);
    struct cuda_alloc *a = ctx;
    const struct tack_cuda_api *cu = cd->cu;
    CUcontext current = NULL;
    int pushed = 0;
    /* The free runs wherever the last reference went (a DLPack deleter on
     * another library's thread, the garbage collector), and must not
     * replace that thread's error message, so no error is reported. An
     * allocation whose context is gone went with it: nothing to free. */
    if (atomic_load(&cd->gone) || !context_alive(cd, a->ctx, a->ctx_id)) {
        atomic_store(&cd->gone, 1);
        free(a);
        return;
    }
    if (!(cu->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == a->ctx)) {
        if (cu->cuCtxPushCurrent(a->ctx) != CUDA_SUCCESS) {
            free(a);
            return;
        }
        pushed = 1;
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
    leave(cd, pushed);
    free(a);
}

/* cuPointerGetAttribute(MEMORY_TYPE) knows every address CUDA allocated or
 * registered; a failed query means memory CUDA knows nothing of: host memory
 * from malloc or NumPy, which a kernel cannot read. */
static tack_status cuda_check_pointer(tack_device *d, uint64_t address)
{
    struct cuda_device *cd = impl_of(d);
    const struct tack_cuda_api *cu = cd->cu;
    /* A zero-size tensor may come with a NULL pointer; nothing is read. */
    if (address == 0)
        return TACK_OK;
    int pushed;
    tack_status st = enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    CUdeviceptr p = (CUdeviceptr)address;
    unsigned int type = 0;
    CUresult r = cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
    if (r == CUDA_ERROR_NOT_INITIALIZED || r == CUDA_ERROR_DEINITIALIZED) {
        st = driver_error(TACK_ERUNTIME, r, "querying a pointer", d);
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
    leave(cd, pushed);
    return st;
}

/* tack_memory_space's answer: what cuPointerGetAttribute says, where a
 * failed query means memory CUDA does not know (NULL), as for wrapping. */
static tack_status cuda_memory_space(tack_device *d, uint64_t address, const char **out)
{
    struct cuda_device *cd = impl_of(d);
    const struct tack_cuda_api *cu = cd->cu;
    int pushed;
    tack_status st = enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    CUdeviceptr p = (CUdeviceptr)address;
    unsigned int type = 0, managed = 0;
    CUresult r = cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
    if (r == CUDA_ERROR_NOT_INITIALIZED || r == CUDA_ERROR_DEINITIALIZED)
        st = driver_error(TACK_ERUNTIME, r, "querying a pointer", d);
    else if (r != CUDA_SUCCESS)
        *out = NULL;
    else if (type == CU_MEMORYTYPE_HOST)
        *out = "cuda_pinned";
    else if (type == CU_MEMORYTYPE_UNIFIED ||
             (cu->cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p) == CUDA_SUCCESS && managed))
        *out = "cuda_managed";
    else
        *out = type == CU_MEMORYTYPE_ARRAY ? "cuda_array" : "cuda";
    leave(cd, pushed);
    return st;
}

static tack_status cuda_copy_to_host(tack_device *d, void *dst, const void *src, size_t nbytes)
{
    struct cuda_device *cd = impl_of(d);
    int pushed;
    tack_status st = enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    /* On Tack's stream, so after the launches queued before it. */
    CUresult r = cd->cu->cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, nbytes, cd->stream);
    if (r == CUDA_SUCCESS)
        r = cd->cu->cuStreamSynchronize(cd->stream);
    leave(cd, pushed);
    return r == CUDA_SUCCESS ? TACK_OK : driver_error(TACK_ERUNTIME, r, "copying to the host", d);
}

static tack_status cuda_copy_from_host(tack_device *d, void *dst, const void *src, size_t nbytes)
{
    struct cuda_device *cd = impl_of(d);
    int pushed;
    tack_status st = enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    /* Waited for: the source is the caller's, free to go once we return,
     * and the destination may be read by another library at once. */
    CUresult r = cd->cu->cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, nbytes, cd->stream);
    if (r == CUDA_SUCCESS)
        r = cd->cu->cuStreamSynchronize(cd->stream);
    leave(cd, pushed);
    return r == CUDA_SUCCESS ? TACK_OK : driver_error(TACK_ERUNTIME, r, "copying from the host", d);
}

static tack_status cuda_synchronize(tack_device *d)
{
    struct cuda_device *cd = impl_of(d);
    int pushed;
    tack_status st = enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    CUresult r = cd->cu->cuStreamSynchronize(cd->stream);
    leave(cd, pushed);
    return r == CUDA_SUCCESS ? TACK_OK : driver_error(TACK_ERUNTIME, r, "waiting for queued work", d);
}

/* Exports an exportable (VMM) buffer's allocation; called with the export
 * lock held. */
static tack_status export_vmm(tack_buffer *b, struct cuda_alloc *a, struct cuda_export *rec)
{
    tack_device *d = b->device;
    struct cuda_device *cd = impl_of(d);
    /* The importer may read the memory at any moment from now on, as a
     * DLPack consumer may. */
    tack_status st = tack_buffer_share(b);
    if (st != TACK_OK)
        return st;
    int pushed;
    st = enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    int h = 0;
    CUresult r = cd->cu->cuMemExportToShareableHandle(&h, a->handle, EXPORT_HANDLE_TYPE, 0);
    leave(cd, pushed);
    if (r != CUDA_SUCCESS)
        return driver_error(TACK_ERUNTIME, r, "cuMemExportToShareableHandle", d);
    rec->handle = (int64_t)h;
    rec->allocation_size = a->size;
    return TACK_OK;
}

static tack_status export_locked(tack_buffer *b, struct cuda_export **out);

/* A plain buffer cannot be exported as an OS handle: copy it once into an
 * exportable buffer and export that. */
static tack_status export_copy(tack_buffer *b, struct cuda_export *rec)
{
    tack_device *d = b->device;
    struct cuda_device *cd = impl_of(d);
    tack_status st = tack_buffer_wait(b);
    if (st != TACK_OK)
        return st;
    tack_buffer *copy;
    st = tack_buffer_alloc(d, b->nbytes, 1, &copy);
    if (st != TACK_OK)
        return st;
    if (b->nbytes) {
        int pushed;
        st = enter(d, cd, &pushed);
        if (st == TACK_OK) {
            CUresult r = cd->cu->cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)copy->data,
                                                   (CUdeviceptr)(uintptr_t)b->data, b->nbytes, cd->stream);
            if (r == CUDA_SUCCESS)
                r = cd->cu->cuStreamSynchronize(cd->stream);
            leave(cd, pushed);
            if (r != CUDA_SUCCESS)
                st = driver_error(TACK_ERUNTIME, r, "copying into exportable memory", d);
        }
    }
    struct cuda_export *inner = NULL;
    if (st == TACK_OK)
        st = export_locked(copy, &inner);
    if (st != TACK_OK) {
        tack_buffer_release(copy);
        return st;
    }
    rec->copy = copy;
    rec->handle = inner->handle;
    rec->allocation_size = inner->allocation_size;
    return TACK_OK;
}

static tack_status export_locked(tack_buffer *b, struct cuda_export **out)
{
    if (b->export_ctx) {
        /* The handle is made once; a plain buffer is copied once. */
        *out = b->export_ctx;
        return TACK_OK;
    }
    struct cuda_export *rec = calloc(1, sizeof *rec);
    if (!rec)
        return tack_error_set(TACK_ENOMEM, "out of memory exporting a buffer");
    rec->handle = -1;
    struct cuda_alloc *a = b->alloc_ctx;
    tack_status st = a && a->kind == ALLOC_VMM ? export_vmm(b, a, rec) : export_copy(b, rec);
    if (st != TACK_OK) {
        free(rec);
        return st;
    }
    b->export_ctx = rec;
    *out = rec;
    return TACK_OK;
}

/* The descriptor belongs to the buffer, which closes it when it goes (see
 * cuda_release_export). A consumer whose import takes ownership of it, as
 * Vulkan's VK_KHR_external_memory_fd import does on success, must import a
 * duplicate (dup(2), os.dup). */
static tack_status cuda_export_memory(tack_buffer *b, tack_exported_memory *out)
{
    struct cuda_device *cd = impl_of(b->device);
    struct cuda_export *rec = NULL;
    pthread_mutex_lock(&cd->export_lock);
    tack_status st = export_locked(b, &rec);
    pthread_mutex_unlock(&cd->export_lock);
    if (st != TACK_OK)
        return st;
    snprintf(out->backend, sizeof out->backend, "cuda");
    snprintf(out->handle_type, sizeof out->handle_type, "%s", EXPORT_HANDLE_NAME);
    out->handle = rec->handle;
    out->allocation_size = rec->allocation_size;
    memcpy(out->device_uuid, cd->uuid, sizeof out->device_uuid);
    return TACK_OK;
}

static void cuda_release_export(tack_buffer *b)
{
    struct cuda_export *rec = b->export_ctx;
    if (!rec)
        return;
    if (rec->copy) {
        /* The copy owns the descriptor and closes it when it goes. */
        tack_buffer_release(rec->copy);
    } else if (rec->handle >= 0) {
        close((int)rec->handle);
    }
    free(rec);
    b->export_ctx = NULL;
}

static void uuid_text(const uint8_t uuid[16], char text[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(text + 2 * i, 3, "%02x", uuid[i]);
}

/* Maps an allocation exported with cuMemExportToShareableHandle (by Tack or
 * another library, in this process or another). The driver's import does
 * not take over the descriptor, so it stays the caller's. The mapping is an
 * ALLOC_VMM record like Tack's own exportable memory: cuda_free unmaps and
 * releases it, and export_memory can hand it on again. */
static tack_status cuda_import_memory(tack_device *d, const tack_exported_memory *e, void **data, void **ctx,
                                      int *writable, int *foreign)
{
    (void)writable;
    struct cuda_device *cd = impl_of(d);
    const struct tack_cuda_api *cu = cd->cu;
    if (memcmp(e->device_uuid, cd->uuid, sizeof cd->uuid) != 0) {
        /* The allocation lives on another GPU: mapping it here would be
         * peer access at best. The caller may try the next device. */
        char want[33], have[33];
        uuid_text(e->device_uuid, want);
        uuid_text(cd->uuid, have);
        *foreign = 1;
        return tack_error_set(TACK_EVALUE,
                              "the memory was exported on the CUDA device with UUID %s, and %s has UUID %s; import it "
                              "on that device (device=None finds it)",
                              want, d->name, have);
    }
    if (strcmp(e->handle_type, EXPORT_HANDLE_NAME) != 0)
        return tack_error_set(TACK_EVALUE, "%s imports %s handles, not %s", d->name, EXPORT_HANDLE_NAME,
                              e->handle_type);
    if (!cd->granularity || !cu->cuMemImportFromShareableHandle)
        return tack_error_set(TACK_ERUNTIME,
                              "%s cannot import memory: the device or its driver does not support CUDA virtual "
                              "memory management with %s handles",
                              d->name, EXPORT_HANDLE_NAME);
    size_t size = e->allocation_size;
    if (size == 0 || size % cd->granularity)
        return tack_error_set(TACK_EVALUE,
                              "allocation_size %zu is not a multiple of the allocation granularity of %s (%zu): the "
                              "record does not describe an exported CUDA allocation",
                              size, d->name, cd->granularity);
    struct cuda_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return tack_error_set(TACK_ENOMEM, "out of memory allocating a buffer record");
    int pushed;
    tack_status st = enter(d, cd, &pushed);
    if (st != TACK_OK) {
        free(a);
        return st;
    }
    CUresult r = cu->cuMemImportFromShareableHandle(&a->handle, (void *)(uintptr_t)e->handle, EXPORT_HANDLE_TYPE);
    if (r != CUDA_SUCCESS) {
        leave(cd, pushed);
        free(a);
        /* The driver refuses a descriptor that is not an exported
         * allocation as an invalid value or handle. */
        return driver_error(r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_HANDLE ? TACK_EVALUE
                                                                                             : TACK_ERUNTIME,
                            r, "cuMemImportFromShareableHandle", d);
    }
    const char *step;
    r = vmm_map(cd, a, size, &step);
    if (r == CUDA_SUCCESS) {
        leave(cd, pushed);
        a->kind = ALLOC_VMM;
        a->size = size;
        a->ctx = cd->ctx;
        a->ctx_id = cd->ctx_id;
        *data = (void *)(uintptr_t)a->ptr;
        *ctx = a;
        return TACK_OK;
    }
    cu->cuMemRelease(a->handle);
    leave(cd, pushed);
    free(a);
    return driver_error(r == CUDA_ERROR_OUT_OF_MEMORY ? TACK_ENOMEM : TACK_ERUNTIME, r, step, d);
}

/* ---- kernels: the dialect and NVRTC -------------------------------------
 *
 * The generated source is CUDA C, which NVRTC compiles in process. For a
 * device, the code is a CUBIN for the GPU's own architecture when an NVRTC
 * knows it and makes CUBINs the driver loads: nothing is compiled when it
 * loads, and a CUBIN has no PTX version for the driver to refuse. Else it
 * is PTX, which the driver's JIT finishes for the GPU, from an NVRTC whose
 * PTX the driver reads: a driver refuses PTX newer than itself, whatever
 * the architecture, so the newest NVRTC's PTX runs only on the newest
 * drivers. Without a device (tack_kernel_ptx) it is PTX of the first
 * NVRTC, for the architecture named, or the oldest it knows. The kernel
 * layer keeps the code on disk under a key that says all of that. */

/* Blocks of threads, each index a thread's, the last index along x; each
 * loop strides over its grid dimension, so any grid covers the domain. */
static void cuda_entry(struct tack_source *b, const struct tack_signature *sig, const char *source)
{
    tack_source_signature_check(b, sig, source, TACK_CHECK_CXX);
    static const char *const dims[TACK_KERNEL_MAX_DIMS] = {"(tack_index)blockIdx.x * blockDim.x + threadIdx.x",
                                                           "(tack_index)blockIdx.y * blockDim.y + threadIdx.y",
                                                           "(tack_index)blockIdx.z * blockDim.z + threadIdx.z"};
    static const char *const steps[TACK_KERNEL_MAX_DIMS] = {
        "(tack_index)blockDim.x * gridDim.x", "(tack_index)blockDim.y * gridDim.y", "(tack_index)blockDim.z * gridDim.z"};
    tack_source_device_entry(b, sig, "extern \"C\" __global__ void ", "", dims, steps);
}

/* A complex type would come from a header NVRTC does not carry either
 * (cuComplex.h), and would not be C99's, which host kernels use. */
#define NO_COMPLEX "NVRTC compiles CUDA C++, which has no C99 complex type; complex parameters work on the " \
                   "cpu backend"
static const char *const cuda_lacks[TACK_NDTYPES] = {
    [TACK_C64] = NO_COMPLEX,
    [TACK_C128] = NO_COMPLEX,
};
#undef NO_COMPLEX

static const struct tack_dialect cuda_dialect = {
    .name = "cuda",
    /* NVRTC has no C library headers; these are the LP64 and LLP64
     * widths alike, since long long is 64 bits on both. */
    .prelude = "typedef signed char int8_t;\ntypedef unsigned char uint8_t;\n"
               "typedef short int16_t;\ntypedef unsigned short uint16_t;\n"
               "typedef int int32_t;\ntypedef unsigned int uint32_t;\n"
               "typedef long long int64_t;\ntypedef unsigned long long uint64_t;\n"
               "typedef int64_t tack_index;\n"
               "#define TACK_INLINE_ static inline\n"
               /* __half and __nv_bfloat16 are the toolkit's headers', which
                * Tack puts on NVRTC's include path when it finds them
                * (tack_nvrtc_api_get); without them the types are the
                * storage structs, which pass and load the same way. */
               "#if __has_include(<cuda_fp16.h>) && __has_include(<cuda_bf16.h>)\n"
               "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
               "typedef __half tack_f16;\ntypedef __nv_bfloat16 tack_bf16;\n"
               "#define TACK_F16_NATIVE 1\n#define TACK_BF16_NATIVE 1\n"
               "static inline float tack_f16_to_float(tack_f16 h) { return __half2float(h); }\n"
               "static inline tack_f16 tack_f16_from_float(float f) { return __float2half_rn(f); }\n"
               "static inline float tack_bf16_to_float(tack_bf16 b) { return __bfloat162float(b); }\n"
               "static inline tack_bf16 tack_bf16_from_float(float f) { return __float2bfloat16_rn(f); }\n"
               "#else\n"
               "#define tack_bits_of_float_(f) __float_as_uint(f)\n"
               "#define tack_float_of_bits_(u) __uint_as_float(u)\n" TACK_PRELUDE_F16_STORAGE
                   TACK_PRELUDE_BF16_STORAGE "#endif\n"
               /* The source is C; CUDA is C++, which spells C99's restrict so. */
               "#define restrict __restrict__\n"
               "#define TACK_BACKEND_CUDA 1\n"
               /* The atomics, as overloads of CUDA's own. CUDA has no
                * signed 64-bit add: two's complement adds the same bits
                * unsigned. A double add is native from sm_60; before it,
                * a compare-and-swap loop. */
               "#define TACK_ATOMIC_(op, fn, T, U) static __device__ __forceinline__ T tack_atomic_##op(T *p, T v) "
               "{ return (T)fn((U *)p, (U)v); }\n"
               "TACK_ATOMIC_(add, atomicAdd, int32_t, int) TACK_ATOMIC_(add, atomicAdd, uint32_t, unsigned)\n"
               "TACK_ATOMIC_(add, atomicAdd, int64_t, unsigned long long)\n"
               "TACK_ATOMIC_(add, atomicAdd, uint64_t, unsigned long long) TACK_ATOMIC_(add, atomicAdd, float, float)\n"
               "TACK_ATOMIC_(min, atomicMin, int32_t, int) TACK_ATOMIC_(min, atomicMin, uint32_t, unsigned)\n"
               "TACK_ATOMIC_(min, atomicMin, int64_t, long long)\n"
               "TACK_ATOMIC_(min, atomicMin, uint64_t, unsigned long long)\n"
               "TACK_ATOMIC_(max, atomicMax, int32_t, int) TACK_ATOMIC_(max, atomicMax, uint32_t, unsigned)\n"
               "TACK_ATOMIC_(max, atomicMax, int64_t, long long)\n"
               "TACK_ATOMIC_(max, atomicMax, uint64_t, unsigned long long)\n"
               "static __device__ __forceinline__ double tack_atomic_add(double *p, double v)\n{\n"
               "#if __CUDA_ARCH__ >= 600\n    return atomicAdd(p, v);\n#else\n"
               "    unsigned long long *q = (unsigned long long *)p, old = *q, seen;\n"
               "    do {\n        seen = old;\n"
               "        old = atomicCAS(q, seen, (unsigned long long)__double_as_longlong("
               "__longlong_as_double((long long)seen) + v));\n"
               "    } while (old != seen);\n"
               "    return __longlong_as_double((long long)old);\n#endif\n}\n",
    .entry = cuda_entry,
    .offline = TACK_CODE_PTX,
    .lacks = cuda_lacks,
};

/* Longest architecture name taken ("compute_100a" and the like fit). */
#define ARCH_MAX 32

static tack_status nvrtc_error(const struct tack_nvrtc_api *api, nvrtcResult r, const char *what)
{
    return tack_error_set(r == NVRTC_ERROR_OUT_OF_MEMORY ? TACK_ENOMEM : TACK_ERUNTIME, "NVRTC %s failed: %s", what,
                          api->nvrtcGetErrorString(r));
}

/* The PTX ISA version (10 * major + minor) the NVRTC of CUDA `version`
 * writes and the driver of CUDA `version` reads, versions being 1000 *
 * major + 10 * minor as nvrtcVersion and cuDriverGetVersion tell them. From
 * NVIDIA's PTX ISA release history: CUDA 11.x brought PTX 7.x; 12.0 to 12.5
 * brought 8.0 to 8.5, 12.6 kept 8.5, 12.8 and 12.9 brought 8.7 and 8.8;
 * 13.x brings 9.x. 0 for a release the history does not reach. */
static int ptx_isa(int version)
{
    int major = version / 1000, minor = version % 1000 / 10;
    switch (major) {
    case 11: return 70 + minor;
    case 12: return minor <= 5 ? 80 + minor : 79 + minor;
    case 13: return 90 + minor;
    default: return 0;
    }
}

static int nvrtc_version(const struct tack_nvrtc_api *api) { return 1000 * api->major + 10 * api->minor; }

/* Whether a driver of CUDA `driver` reads the PTX `api` writes: no newer
 * than its own. Past the history, the newer release writes the newer PTX. */
static int reads_ptx_of(int driver, const struct tack_nvrtc_api *api)
{
    int version = nvrtc_version(api), isa = ptx_isa(version), own = ptx_isa(driver);
    return isa && own ? isa <= own : version <= driver;
}

/* Whether a driver of CUDA `driver` loads the CUBINs `api` makes. Minor
 * version compatibility: a driver loads the CUBINs of every toolkit of its
 * major version, newer minors included, and of older major versions; not
 * of a newer major version. */
static int loads_cubin_of(int driver, const struct tack_nvrtc_api *api) { return api->major <= driver / 1000; }

static int lists(const struct tack_nvrtc_api *api, int arch)
{
    for (int i = 0; i < api->narchs; i++)
        if (api->archs[i] == arch)
            return 1;
    return 0;
}

/* The newest architecture `api` targets that a GPU of `arch` runs the PTX
 * of (none newer than the GPU); 0 if there is none. */
static int newest_up_to(const struct tack_nvrtc_api *api, int arch)
{
    int best = 0;
    for (int i = 0; i < api->narchs; i++)
        if (api->archs[i] <= arch && api->archs[i] > best)
            best = api->archs[i];
    return best;
}

static int makes_cubins(const struct tack_nvrtc_api *api) { return api->nvrtcGetCUBINSize && api->nvrtcGetCUBIN; }

/* What to install for a driver of CUDA `driver` and a GPU of `arch`: the
 * NVRTC of the driver's release, whose CUBINs and PTX it loads; for a GPU
 * older than that release knows (CUDA 13 starts at sm_75, 12 at sm_50),
 * the last release that knows it. Returns 1 when a newer driver would do
 * as well, 0 when it is the GPU's age that decides. */
static int advise(int driver, int arch, char *out, size_t cap)
{
    int major = driver / 1000, minor = driver % 1000 / 10, newer_driver = 1;
    if (major >= 13 && arch < 75) {
        major = 12;
        minor = 9;
        newer_driver = 0;
    }
    if (major == 12 && arch < 50) {
        major = 11;
        minor = 8;
        newer_driver = 0;
    }
    if (major >= 13)
        snprintf(out, cap, "the NVRTC of CUDA %d.%d (pip install \"nvidia-cuda-nvrtc==%d.%d.*\")", major, minor,
                 major, minor);
    else if (major >= 11)
        snprintf(out, cap, "the NVRTC of CUDA %d.%d (pip install \"nvidia-cuda-nvrtc-cu%d==%d.%d.*\")", major,
                 minor, major, major, minor);
    else
        snprintf(out, cap, "an NVRTC that knows sm_%d and a driver of CUDA 11 or newer", arch);
    return newer_driver;
}

/* Why `api` makes no code a driver of CUDA `driver` loads on a GPU of
 * `arch`; `refused`: the driver refused a CUBIN on that GPU. */
static void why_not(const struct tack_nvrtc_api *api, int driver, int arch, int refused, char *out, size_t cap)
{
    if (!api->narchs) {
        snprintf(out, cap, "lists no architectures (NVRTC before CUDA 11.2)");
        return;
    }
    if (!newest_up_to(api, arch)) {
        snprintf(out, cap, "knows sm_%d to sm_%d, nothing as old as sm_%d", api->archs[0],
                 api->archs[api->narchs - 1], arch);
        return;
    }
    char cubin[128];
    if (!lists(api, arch))
        snprintf(cubin, sizeof cubin, "knows no sm_%d", arch);
    else if (refused)
        snprintf(cubin, sizeof cubin, "makes a CUBIN the driver refused");
    else if (!makes_cubins(api))
        snprintf(cubin, sizeof cubin, "makes no CUBINs");
    else
        snprintf(cubin, sizeof cubin, "makes CUBINs that need a CUDA %d driver", api->major);
    int isa = ptx_isa(nvrtc_version(api)), own = ptx_isa(driver);
    if (isa && own)
        snprintf(out, cap, "%s, and writes PTX ISA %d.%d, newer than the driver reads (%d.%d)", cubin, isa / 10,
                 isa % 10, own / 10, own % 10);
    else
        snprintf(out, cap, "%s, and writes PTX newer than the driver reads", cubin);
}

/* Which NVRTC makes what code for a device. */
struct cuda_choice {
    int nvrtc; /* its number for tack_nvrtc_api_at */
    const struct tack_nvrtc_api *api;
    enum tack_code_kind kind;
};

/* Why no NVRTC makes code that a GPU of `arch` called `gpu` runs with a
 * driver of CUDA `driver` (`refused`: the driver refused a CUBIN there,
 * for `refusal`), and what to install. Returns TACK_ERUNTIME. */
static tack_status none_fits(const char *gpu, int arch, int driver, int refused, const char *refusal)
{
    char found[1200], why[300], advice[160];
    size_t used = 0;
    found[0] = 0;
    const struct tack_nvrtc_api *api;
    for (int i = 0; used < sizeof found && tack_nvrtc_api_at(i, &api) == TACK_OK; i++) {
        why_not(api, driver, arch, refused, why, sizeof why);
        used += (size_t)snprintf(found + used, sizeof found - used, "%sNVRTC %d.%d (%s) %s", i ? "; " : "",
                                 api->major, api->minor, tack_library_path(&api->library), why);
    }
    int update = advise(driver, arch, advice, sizeof advice);
    return tack_error_set(TACK_ERUNTIME,
                          "no NVRTC here makes code that %s (compute capability %d.%d) runs with its CUDA %d.%d "
                          "driver%s%s: %s. %s%s%s%s",
                          gpu, arch / 10, arch % 10, driver / 1000, driver % 1000 / 10,
                          refused ? ", which refused " : "", refused ? refusal : "", found,
                          tack_nvrtc_forced() ? "TACK_NVRTC_LIBRARY names the one NVRTC Tack uses: point it at the "
                                                "libnvrtc.so of "
                                              : "Install ",
                          advice,
                          tack_nvrtc_forced() ? ", or unset it to let Tack look"
                                              : ": Tack finds it beside its own Python package, or set "
                                                "TACK_NVRTC_LIBRARY to its libnvrtc.so",
                          update ? ". Or update the driver" : "");
}

/* The code for a GPU of `arch` with a driver of CUDA `driver`: a CUBIN
 * from the first NVRTC that makes one the driver loads for the GPU (unless
 * the driver `refused` one there), else PTX from the first whose PTX the
 * driver reads. A driver whose version is unknown (0) is taken to load
 * anything. 0 when none fits; TACK_ERUNTIME when no NVRTC is found at all
 * (the message says where Tack looked). */
static tack_status pick(int driver, int arch, int refused, struct cuda_choice *c, int *fits)
{
    const struct tack_nvrtc_api *api;
    tack_status st = tack_nvrtc_api_get(&api);
    *fits = 0;
    if (st != TACK_OK)
        return st;
    for (int i = 0; !refused && tack_nvrtc_api_at(i, &api) == TACK_OK; i++) {
        if (makes_cubins(api) && lists(api, arch) && (!driver || loads_cubin_of(driver, api))) {
            *c = (struct cuda_choice){i, api, TACK_CODE_CUBIN};
            *fits = 1;
            return TACK_OK;
        }
    }
    for (int i = 0; tack_nvrtc_api_at(i, &api) == TACK_OK; i++) {
        if (newest_up_to(api, arch) && (!driver || reads_ptx_of(driver, api))) {
            *c = (struct cuda_choice){i, api, TACK_CODE_PTX};
            *fits = 1;
            return TACK_OK;
        }
    }
    return TACK_OK;
}

/* The code for device `d`, as pick chooses it for its GPU and driver and
 * what the driver refused there before. */
static tack_status choose(const tack_device *d, struct cuda_device *cd, struct cuda_choice *c)
{
    char refusal[sizeof cd->refusal];
    pthread_mutex_lock(&cd->code_lock);
    int refused = cd->cubin_refused;
    memcpy(refusal, cd->refusal, sizeof refusal);
    pthread_mutex_unlock(&cd->code_lock);
    int fits;
    tack_status st = pick(cd->cu->driver_version, cd->arch, refused, c, &fits);
    if (st != TACK_OK || fits)
        return st;
    return none_fits(d->name, cd->arch, cd->cu->driver_version, refused, refusal);
}

/* The architecture option's value for `job`'s code from `api`: the one
 * named; for a device, its own (a CUBIN) or the newest the NVRTC knows up
 * to it (PTX); else the oldest the NVRTC knows, so that the PTX runs on
 * every GPU it supports ("" when it lists none: NVRTC's default). */
static void arch_of(const struct tack_compile *job, const struct tack_nvrtc_api *api, char *out, size_t cap)
{
    if (job->target && *job->target)
        snprintf(out, cap, "%s", job->target);
    else if (job->device && job->kind == TACK_CODE_CUBIN)
        snprintf(out, cap, "sm_%d", impl_of(job->device)->arch);
    else if (job->device)
        snprintf(out, cap, "compute_%d", newest_up_to(api, impl_of(job->device)->arch));
    else if (api->narchs)
        snprintf(out, cap, "compute_%d", api->archs[0]);
    else
        out[0] = 0;
}

/* NVRTC's options for `job`'s code from `api`. */
struct nvrtc_options {
    const char *opts[3];
    int nopts;
    char arch_opt[64];
    char include_opt[4100];
};

static void options_of(const struct tack_compile *job, const struct tack_nvrtc_api *api, struct nvrtc_options *o)
{
    char arch[ARCH_MAX];
    arch_of(job, api, arch, sizeof arch);
    o->nopts = 0;
    /* User functions carry no __device__: NVRTC makes them device code. */
    o->opts[o->nopts++] = "--device-as-default-execution-space";
    if (arch[0]) {
        snprintf(o->arch_opt, sizeof o->arch_opt, "--gpu-architecture=%s", arch);
        o->opts[o->nopts++] = o->arch_opt;
    }
    /* The toolkit's headers, for the prelude's half-precision types. */
    if (api->include_dir[0]) {
        snprintf(o->include_opt, sizeof o->include_opt, "-I%s", api->include_dir);
        o->opts[o->nopts++] = o->include_opt;
    }
}

/* The code depends on the NVRTC's version and the options, the
 * architecture among them; which kind it is, on the device and its driver
 * (choose). */
static tack_status cuda_kernel_key(struct tack_compile *job)
{
    if (job->target && strlen(job->target) >= ARCH_MAX)
        return tack_error_set(TACK_EVALUE, "'%s' is not a CUDA architecture name such as compute_90", job->target);
    const struct tack_nvrtc_api *api;
    tack_status st;
    if (job->device) {
        struct cuda_choice c = {0, NULL, TACK_CODE_NONE};
        if ((st = choose(job->device, impl_of(job->device), &c)) != TACK_OK)
            return st;
        api = c.api;
        job->kind = c.kind;
        job->compiler = c.nvrtc;
    } else {
        if ((st = tack_nvrtc_api_get(&api)) != TACK_OK)
            return st;
        job->kind = TACK_CODE_PTX;
        job->compiler = 0;
    }
    struct nvrtc_options o;
    options_of(job, api, &o);
    int used = snprintf(job->key, sizeof job->key, "nvrtc %d.%d", api->major, api->minor);
    for (int i = 0; i < o.nopts && used > 0 && (size_t)used < sizeof job->key; i++)
        used += snprintf(job->key + used, sizeof job->key - (size_t)used, " %s", o.opts[i]);
    return TACK_OK;
}

/* The program's log after a failed compile, malloc'd and NUL-terminated,
 * or NULL. */
static char *program_log(const struct tack_nvrtc_api *api, nvrtcProgram prog)
{
    size_t size = 0;
    char *log = NULL;
    if (api->nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || !size || !(log = malloc(size + 1)))
        return NULL;
    if (api->nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
        log[0] = 0;
    log[size] = 0;
    return log;
}

/* The compiled program's PTX (NUL-terminated, the NUL counted) or CUBIN. */
static tack_status program_code(const struct tack_nvrtc_api *api, nvrtcProgram prog, enum tack_code_kind kind,
                                struct tack_kernel_code *out)
{
    int cubin = kind == TACK_CODE_CUBIN;
    size_t n = 0;
    char *data = NULL;
    nvrtcResult r = cubin ? api->nvrtcGetCUBINSize(prog, &n) : api->nvrtcGetPTXSize(prog, &n);
    if (r == NVRTC_SUCCESS && n == 0)
        r = NVRTC_ERROR_INVALID_PROGRAM;
    if (r == NVRTC_SUCCESS && !(data = malloc(n + 1)))
        return tack_error_set(TACK_ENOMEM, "out of memory holding %zu bytes of %s", n, tack_code_kind_name(kind));
    if (r == NVRTC_SUCCESS)
        r = cubin ? api->nvrtcGetCUBIN(prog, data) : api->nvrtcGetPTX(prog, data);
    if (r != NVRTC_SUCCESS) {
        free(data);
        return nvrtc_error(api, r, cubin ? "nvrtcGetCUBIN" : "nvrtcGetPTX");
    }
    /* The PTX size NVRTC reports counts the NUL it writes. */
    data[n] = 0;
    out->kind = kind;
    out->data = data;
    out->size = cubin ? n : strlen(data) + 1;
    return TACK_OK;
}

static tack_status cuda_kernel_compile(const struct tack_compile *job, struct tack_kernel_code *out)
{
    const struct tack_nvrtc_api *api;
    tack_status st = tack_nvrtc_api_at(job->compiler, &api);
    if (st != TACK_OK)
        return st;
    if (job->kind == TACK_CODE_CUBIN && !makes_cubins(api))
        return tack_error_set(TACK_ERUNTIME, "NVRTC %d.%d (%s) makes no CUBINs", api->major, api->minor,
                              tack_library_path(&api->library));
    struct nvrtc_options o;
    options_of(job, api, &o);
    nvrtcProgram prog = NULL;
    nvrtcResult r = api->nvrtcCreateProgram(&prog, job->source, "kernel.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS)
        return nvrtc_error(api, r, "nvrtcCreateProgram");
    r = api->nvrtcCompileProgram(prog, o.nopts, o.opts);
    if (r == NVRTC_ERROR_COMPILATION || r == NVRTC_ERROR_INVALID_OPTION) {
        out->failed = 1;
        out->log = program_log(api, prog);
        out->log_size = out->log ? strlen(out->log) : 0;
        st = tack_error_set(TACK_ECOMPILE, "kernel '%s' failed to compile for CUDA (NVRTC %d.%d, %s):\n", job->name,
                            api->major, api->minor, api->nvrtcGetErrorString(r));
    } else if (r != NVRTC_SUCCESS) {
        st = nvrtc_error(api, r, "nvrtcCompileProgram");
    } else {
        st = program_code(api, prog, job->kind == TACK_CODE_CUBIN ? TACK_CODE_CUBIN : TACK_CODE_PTX, out);
    }
    api->nvrtcDestroyProgram(&prog);
    return st;
}

/* ---- kernels: what the code is ---------------------------------------------- */

/* A CUDA ELF file's header fields Tack reads (ELF64, little-endian). */
#define ELF_CUDA_MACHINE 190
#define ELF_NOTE 7
#define ELF_NOBITS 8

static uint64_t le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The CUBIN's architecture (sm_<arch>) and the CUDA release of the
 * toolkit that made it (10 * major + minor; 0 when it does not say), read
 * within its `size` bytes. 0 when it is no whole CUDA ELF file: a driver
 * reads the headers without a size, so a file shorter than they say must
 * not reach it. */
static int cubin_facts(const unsigned char *image, size_t size, int *arch, int *toolkit)
{
    if (size < 64 || memcmp(image, "\177ELF", 4) || image[4] != 2 || image[5] != 1 ||
        le(image + 18, 2) != ELF_CUDA_MACHINE)
        return 0;
    uint64_t shoff = le(image + 40, 8), phoff = le(image + 32, 8);
    uint64_t shentsize = le(image + 58, 2), shnum = le(image + 60, 2);
    uint64_t phentsize = le(image + 54, 2), phnum = le(image + 56, 2);
    if (shentsize < 64 || shoff > size || shnum > (size - shoff) / shentsize || phoff > size ||
        (phentsize && phnum > (size - phoff) / phentsize))
        return 0;
    /* The architecture: the flags' low byte in the first CUDA ELF ABI
     * (version 7), their second byte from version 8 on. */
    uint64_t flags = le(image + 48, 4);
    *arch = (int)(image[8] < 8 ? flags & 0xff : (flags >> 8) & 0xff);
    /* Every section with contents lies within the file. The toolkit:
     * .note.nv.cuinfo, owner "NVIDIA Corp", type 1000, whose description is
     * 16-bit words: note version, architecture, toolkit. */
    *toolkit = 0;
    for (uint64_t i = 0; i < shnum; i++) {
        const unsigned char *sh = image + shoff + i * shentsize;
        uint64_t type = le(sh + 4, 4), off = le(sh + 24, 8), len = le(sh + 32, 8);
        if (type != ELF_NOBITS && (off > size || len > size - off))
            return 0;
        if (type != ELF_NOTE || len < 12 + 12 + 6)
            continue;
        const unsigned char *note = image + off;
        if (le(note, 4) == 12 && le(note + 4, 4) >= 6 && le(note + 8, 4) == 1000 &&
            !memcmp(note + 12, "NVIDIA Corp", 12))
            *toolkit = (int)le(note + 24 + 4, 2);
    }
    return 1;
}

/* What `code` is, as tack_kernel_target says it; 0 for a CUBIN that is no
 * whole CUDA ELF file. */
static int describe(const struct tack_kernel_code *code, char *out, size_t cap)
{
    char made[32] = "";
    if (code->kind == TACK_CODE_CUBIN) {
        int arch, toolkit;
        if (!cubin_facts(code->data, code->size, &arch, &toolkit))
            return 0;
        if (toolkit)
            snprintf(made, sizeof made, " (CUDA %d.%d)", toolkit / 10, toolkit % 10);
        snprintf(out, cap, "cubin sm_%d%s", arch, made);
        return 1;
    }
    const char *text = code->data, *v = strstr(text, ".version "), *t = strstr(text, ".target sm_"),
               *r = strstr(text, "compilation tools, release ");
    int major = 0, minor = 0, arch = 0, cmajor = 0, cminor = 0;
    if (v)
        sscanf(v, ".version %d.%d", &major, &minor);
    if (t)
        sscanf(t, ".target sm_%d", &arch);
    if (r && sscanf(r, "compilation tools, release %d.%d", &cmajor, &cminor) == 2)
        snprintf(made, sizeof made, ", CUDA %d.%d", cmajor, cminor);
    snprintf(out, cap, "ptx compute_%d (PTX ISA %d.%d%s)", arch, major, minor, made);
    return 1;
}

/* A load that failed for what the code is, not for a fault of the driver or
 * the context, nor for memory. */
static int refuses_code(CUresult r)
{
    return r != CUDA_ERROR_OUT_OF_MEMORY && r != CUDA_ERROR_NOT_INITIALIZED && r != CUDA_ERROR_DEINITIALIZED &&
           r != CUDA_ERROR_INVALID_CONTEXT && r != CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

/* ---- kernels: modules and launches ---------------------------------------- */

/* A loaded kernel: the module holding the code, its entry point, and the
 * parameter count of the entry (n, then the kernel's parameters). */
struct cuda_kernel {
    CUmodule module;
    CUfunction function;
    int nargs;
    CUcontext ctx;
    unsigned long long ctx_id;
};

/* The driver refused the code in `code`, described as `what`, with `r`. */
static tack_status refused(tack_device *d, struct cuda_device *cd, struct tack_kernel_code *code, const char *what,
                           CUresult r)
{
    char text[200], advice[160];
    tack_cuda_error_text(r, text, sizeof text);
    if (code->kind == TACK_CODE_CUBIN) {
        /* Later kernels on the device are PTX; this one is tried again so. */
        pthread_mutex_lock(&cd->code_lock);
        cd->cubin_refused = 1;
        snprintf(cd->refusal, sizeof cd->refusal, "a %s with %s", what, text);
        pthread_mutex_unlock(&cd->code_lock);
        code->refused = 1;
        return tack_error_set(TACK_ERUNTIME, "%s refused the kernel's code, a %s: %s", d->name, what, text);
    }
    int driver = cd->cu->driver_version;
    int update = advise(driver, cd->arch, advice, sizeof advice);
    return tack_error_set(TACK_ERUNTIME,
                          "%s (compute capability %d.%d, CUDA %d.%d driver) refused the kernel's code, %s: %s. "
                          "Install %s%s",
                          d->name, cd->arch / 10, cd->arch % 10, driver / 1000, driver % 1000 / 10, what, text,
                          advice, update ? ", or update the driver" : "");
}

static tack_status cuda_kernel_load(tack_device *d, struct tack_kernel_code *code, void **out)
{
    struct cuda_device *cd = impl_of(d);
    char what[sizeof code->target];
    if (!code || (code->kind != TACK_CODE_PTX && code->kind != TACK_CODE_CUBIN) || !code->data || !code->entry)
        return tack_error_set(TACK_ERUNTIME, "%s runs PTX and CUBIN kernels; it was given %s code", d->name,
                              tack_code_kind_name(code ? code->kind : TACK_CODE_NONE));
    if (code->nargs < 0 || code->nargs > TACK_KERNEL_MAX_PARAMS)
        return tack_error_set(TACK_EVALUE, "a kernel has at most %d parameters, not %d", TACK_KERNEL_MAX_PARAMS,
                              code->nargs);
    if ((code->kind == TACK_CODE_PTX && (!code->size || ((const char *)code->data)[code->size - 1])) ||
        !describe(code, what, sizeof what))
        return tack_error_set(TACK_ERUNTIME, "the kernel's %s (%zu bytes) is damaged; nothing was loaded",
                              tack_code_kind_name(code->kind), code->size);
    struct cuda_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return tack_error_set(TACK_ENOMEM, "out of memory loading a kernel");
    int pushed;
    tack_status st = enter(d, cd, &pushed);
    if (st != TACK_OK) {
        free(k);
        return st;
    }
    CUresult r = cd->cu->cuModuleLoadData(&k->module, code->data);
    if (r != CUDA_SUCCESS)
        st = refuses_code(r) ? refused(d, cd, code, what, r) : driver_error(TACK_ERUNTIME, r, "loading a kernel", d);
    else if ((r = cd->cu->cuModuleGetFunction(&k->function, k->module, code->entry)) != CUDA_SUCCESS) {
        st = driver_error(TACK_ERUNTIME, r, "finding the kernel's entry point", d);
        cd->cu->cuModuleUnload(k->module);
    }
    leave(cd, pushed);
    if (st != TACK_OK) {
        free(k);
        return st;
    }
    k->nargs = code->nargs;
    k->ctx = cd->ctx;
    k->ctx_id = cd->ctx_id;
    snprintf(code->target, sizeof code->target, "%s", what);
    *out = k;
    return TACK_OK;
}

/* Threads per block; the entry point strides over the grid, so any grid
 * covers [0, n) and the grid need only fill the GPU. */
#define LAUNCH_BLOCK 256u
#define BLOCKS_PER_SM 32

static tack_status cuda_kernel_launch(tack_device *d, void *kernel, const struct tack_launch *l)
{
    struct cuda_device *cd = impl_of(d);
    struct cuda_kernel *k = kernel;
    if (l->n < 0)
        return tack_error_set(TACK_EVALUE, "a launch covers n >= 0 indices, not %lld", (long long)l->n);
    if (l->n == 0)
        return TACK_OK;
    /* The entry takes the extents first, then the kernel's parameters; the
     * driver reads every value before cuLaunchKernel returns. */
    void *params[TACK_KERNEL_MAX_DIMS + TACK_KERNEL_MAX_PARAMS];
    (void)tack_launch_params(l, k->nargs, params);
    uint32_t block[3], grid[3];
    uint64_t fill = (uint64_t)(cd->sm_count > 0 ? cd->sm_count : 1) * BLOCKS_PER_SM;
    /* One dimension: enough blocks to fill the GPU. More: y and z are
     * limited to 65535 blocks by CUDA itself. */
    tack_launch_geometry(l, LAUNCH_BLOCK, l->ndim == 1 ? fill : 65535, block, grid);
    int pushed;
    tack_status st = enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    CUresult r = cd->cu->cuLaunchKernel(k->function, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0,
                                        cd->stream, params, NULL);
    leave(cd, pushed);
    return r == CUDA_SUCCESS ? TACK_OK : driver_error(TACK_ERUNTIME, r, "launching a kernel", d);
}

static void cuda_kernel_unload(tack_device *d, void *kernel)
{
    struct cuda_device *cd = impl_of(d);
    struct cuda_kernel *k = kernel;
    CUcontext current = NULL;
    int pushed = 0;
    /* A module whose context is gone went with it. Launches of it may still
     * be queued: they finish before the module goes. */
    if (!atomic_load(&cd->gone) && context_alive(cd, k->ctx, k->ctx_id)) {
        if (!(cd->cu->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == k->ctx))
            pushed = cd->cu->cuCtxPushCurrent(k->ctx) == CUDA_SUCCESS ? 1 : -1;
        if (pushed >= 0) {
            cd->cu->cuStreamSynchronize(cd->stream);
            cd->cu->cuModuleUnload(k->module);
            leave(cd, pushed);
        }
    }
    free(k);
}

static uint64_t cuda_context_handle(const tack_device *d)
{
    const struct cuda_device *cd = d->impl;
    return cd ? (uint64_t)(uintptr_t)cd->ctx : 0;
}

static uint64_t cuda_stream_handle(const tack_device *d)
{
    const struct cuda_device *cd = d->impl;
    return cd ? (uint64_t)(uintptr_t)cd->stream : 0;
}

/* The CUDA stream values of the array API's __dlpack__(stream=...): 1 and 2
 * are the driver's CU_STREAM_LEGACY and CU_STREAM_PER_THREAD handles. */
#define DLPACK_STREAM_LEGACY 1u
#define DLPACK_STREAM_PER_THREAD 2u

/* Makes `ctx` current for one call if it is not; *pushed for pop_context. */
static CUresult push_context(const struct tack_cuda_api *cu, CUcontext ctx, int *pushed)
{
    CUcontext current = NULL;
    *pushed = 0;
    if (cu->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == ctx)
        return CUDA_SUCCESS;
    CUresult r = cu->cuCtxPushCurrent(ctx);
    *pushed = r == CUDA_SUCCESS;
    return r;
}

static void pop_context(const struct tack_cuda_api *cu, int pushed)
{
    if (pushed) {
        CUcontext popped;
        cu->cuCtxPopCurrent(&popped);
    }
}

/* Stream-ordered export: the consumer's stream waits for an event recorded
 * on Tack's stream after the buffer's queued launches, so the consumer's
 * work comes after them on the GPU and the host waits for nothing. Streams
 * of another context on the same device are accepted (CUDA lets a stream
 * wait for an event of any context); the wait is issued with the stream's
 * own context current, as the driver requires of a stream's work. */
static tack_status cuda_order_stream(tack_buffer *b, uint64_t value)
{
    tack_device *d = b->device;
    struct cuda_device *cd = impl_of(d);
    const struct tack_cuda_api *cu = cd->cu;
    if (value == 0)
        return tack_error_set(TACK_EVALUE,
                              "stream=0 is ambiguous for CUDA and the array API disallows it: pass 1 for the "
                              "legacy default stream, 2 for the per-thread default stream, or a stream handle");
    CUstream consumer = (CUstream)(uintptr_t)value;
    /* Work on Tack's own stream is already in order after Tack's. */
    if (consumer == cd->stream)
        return TACK_OK;
    /* A default stream belongs to the consumer's context: the one current
     * on its thread, which is this one; with none current, Tack's. */
    CUcontext caller = NULL;
    if (cu->cuCtxGetCurrent(&caller) != CUDA_SUCCESS)
        caller = NULL;
    int pushed;
    tack_status st = enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    CUcontext sctx = NULL;
    CUresult r = CUDA_SUCCESS;
    if (value == DLPACK_STREAM_LEGACY || value == DLPACK_STREAM_PER_THREAD) {
        sctx = caller ? caller : cd->ctx;
    } else if ((r = cu->cuStreamGetCtx(consumer, &sctx)) != CUDA_SUCCESS) {
        char text[200];
        st = tack_error_set(TACK_EVALUE, "stream=%llu is not a CUDA stream the driver knows (%s)",
                            (unsigned long long)value, tack_cuda_error_text(r, text, sizeof text));
        goto done;
    }
    if (sctx != cd->ctx) {
        /* Another context: its device must be this one. */
        CUdevice sdev = -1;
        int spushed;
        r = push_context(cu, sctx, &spushed);
        if (r == CUDA_SUCCESS) {
            r = cu->cuCtxGetDevice(&sdev);
            pop_context(cu, spushed);
        }
        if (r != CUDA_SUCCESS) {
            st = driver_error(TACK_ERUNTIME, r, "finding the device of the consumer's stream", d);
            goto done;
        }
        if (sdev != cd->dev) {
            st = tack_error_set(TACK_EVALUE,
                                "stream=%llu is a stream of CUDA device %d, but the array is on %s: pass a "
                                "stream of %s, or copy the array there first",
                                (unsigned long long)value, (int)sdev, d->name, d->name);
            goto done;
        }
    }
    /* Nothing queued on the buffer is unfinished: nothing to order. */
    if (atomic_load(&b->last_launch) <= atomic_load(&d->completed))
        goto done;
    CUevent event;
    r = cu->cuEventCreate(&event, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) {
        st = driver_error(TACK_ERUNTIME, r, "creating a CUDA event", d);
        goto done;
    }
    r = cu->cuEventRecord(event, cd->stream);
    if (r == CUDA_SUCCESS) {
        int spushed = 0;
        r = sctx == cd->ctx ? CUDA_SUCCESS : push_context(cu, sctx, &spushed);
        if (r == CUDA_SUCCESS)
            r = cu->cuStreamWaitEvent(consumer, event, CU_EVENT_WAIT_DEFAULT);
        pop_context(cu, spushed);
        if (r == CUDA_ERROR_INVALID_HANDLE)
            st = tack_error_set(TACK_EVALUE, "stream=%llu cannot be ordered after %s's work: the driver refused "
                                "it as a stream handle", (unsigned long long)value, d->name);
        else if (r != CUDA_SUCCESS)
            st = driver_error(TACK_ERUNTIME, r, "ordering the consumer's stream after Tack's", d);
    } else {
        st = driver_error(TACK_ERUNTIME, r, "recording a CUDA event", d);
    }
    /* Released once the wait no longer needs it: the driver keeps a
     * recorded event alive until it completes. */
    cu->cuEventDestroy(event);
done:
    leave(cd, pushed);
    return st;
}

/* Tack's stream waits for what is queued on a producer's stream: an event
 * recorded there, waited for on Tack's stream; the host does not wait. */
static tack_status cuda_wait_stream(tack_device *d, uint64_t value)
{
    struct cuda_device *cd = impl_of(d);
    const struct tack_cuda_api *cu = cd->cu;
    if (value == 0)
        return tack_error_set(TACK_EVALUE,
                              "stream 0 is ambiguous for CUDA: pass 1 for the legacy default stream, 2 for the "
                              "per-thread default stream, or a stream handle");
    CUstream producer = (CUstream)(uintptr_t)value;
    if (producer == cd->stream)
        return TACK_OK; /* already in order */
    int pushed;
    tack_status st = enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    CUevent event;
    CUresult r = cu->cuEventCreate(&event, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) {
        st = driver_error(TACK_ERUNTIME, r, "creating a CUDA event", d);
        goto done;
    }
    r = cu->cuEventRecord(event, producer);
    if (r == CUDA_SUCCESS)
        r = cu->cuStreamWaitEvent(cd->stream, event, CU_EVENT_WAIT_DEFAULT);
    if (r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_VALUE)
        st = tack_error_set(TACK_EVALUE, "stream %llu is not a CUDA stream %s can wait for",
                            (unsigned long long)value, d->name);
    else if (r != CUDA_SUCCESS)
        st = driver_error(TACK_ERUNTIME, r, "ordering Tack's stream after the producer's", d);
    /* The driver keeps a recorded event alive until the wait is done. */
    cu->cuEventDestroy(event);
done:
    leave(cd, pushed);
    return st;
}

static const DLDeviceType cuda_wraps[] = {kDLCUDA, kDLCUDAManaged, 0};

/* ---- describe ----------------------------------------------------------- */

/* What kernels for GPU `index`, of `arch`, would be built as with a driver
 * of CUDA `driver`, as pick chooses (no CUBIN refused yet), or why none. */
static void describe_code(int driver, int arch, int index, char *out, size_t cap)
{
    struct cuda_choice c;
    int fits;
    if (pick(driver, arch, 0, &c, &fits) != TACK_OK) {
        snprintf(out, cap, "none: %s", tack_last_error());
        return;
    }
    if (!fits) {
        char gpu[32];
        snprintf(gpu, sizeof gpu, "cuda:%d", index);
        none_fits(gpu, arch, driver, 0, "");
        snprintf(out, cap, "none: %s", tack_last_error());
        return;
    }
    int target = c.kind == TACK_CODE_CUBIN ? arch : newest_up_to(c.api, arch);
    snprintf(out, cap, "%s %s_%d from NVRTC %d.%d (%s)%s", c.kind == TACK_CODE_CUBIN ? "CUBIN" : "PTX",
             c.kind == TACK_CODE_CUBIN ? "sm" : "compute", target, c.api->major, c.api->minor,
             tack_library_path(&c.api->library),
             c.kind == TACK_CODE_CUBIN ? "" : ", which the driver compiles when it loads it");
}

static void cuda_describe(tack_backend_report *out)
{
    const struct tack_cuda_api *cu;
    tack_status st = tack_cuda_api_get(&cu);
    char version[32] = "";
    /* cuDriverGetVersion's 12080 is CUDA 12.8. */
    if (st == TACK_OK && cu->driver_version > 0)
        snprintf(version, sizeof version, "%d.%d", cu->driver_version / 1000, cu->driver_version % 1000 / 10);
    tack_report_component(&out->driver, "driver", st, st == TACK_OK ? tack_library_path(&cu->library) : NULL,
                          version);
    int count = 0;
    if (st != TACK_OK || cu->cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 0)
        count = 0;
    out->device_count = count;
    /* Every NVRTC found, in the order a device's code is chosen from. */
    const struct tack_nvrtc_api *nvrtc;
    tack_status found = tack_nvrtc_api_get(&nvrtc);
    if (found == TACK_OK)
        snprintf(version, sizeof version, "%d.%d", nvrtc->major, nvrtc->minor);
    tack_report_component(&out->compiler, "NVRTC", found,
                          found == TACK_OK ? tack_library_path(&nvrtc->library) : NULL, version);
    for (int i = 0; found == TACK_OK && i < TACK_REPORT_COMPILERS && tack_nvrtc_api_at(i, &nvrtc) == TACK_OK; i++) {
        snprintf(version, sizeof version, "%d.%d", nvrtc->major, nvrtc->minor);
        tack_report_component(&out->compilers[i], "NVRTC", TACK_OK, tack_library_path(&nvrtc->library), version);
        out->compiler_count = i + 1;
    }
    for (int i = 0; i < count && i < TACK_REPORT_DEVICES; i++) {
        CUdevice dev;
        char name[96] = "";
        int major = 0, minor = 0;
        if (cu->cuDeviceGet(&dev, i) != CUDA_SUCCESS)
            continue;
        if (cu->cuDeviceGetName(name, (int)sizeof name, dev) != CUDA_SUCCESS)
            name[0] = 0;
        name[sizeof name - 1] = 0;
        cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
        cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
        snprintf(out->devices[i], sizeof out->devices[i], "%s, compute capability %d.%d",
                 name[0] ? name : "(no name)", major, minor);
        describe_code(cu->driver_version, 10 * major + minor, i, out->kernel_code[i], sizeof out->kernel_code[i]);
    }
}

const struct tack_backend_ops tack_cuda_backend = {
    .name = "cuda",
    .dl_type = kDLCUDA,
    .wraps = cuda_wraps,
    .describe = cuda_describe,
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .check_pointer = cuda_check_pointer,
    .copy_to_host = cuda_copy_to_host,
    .copy_from_host = cuda_copy_from_host,
    .synchronize = cuda_synchronize,
    .export_memory = cuda_export_memory,
    .release_export = cuda_release_export,
    .import_memory = cuda_import_memory,
    .context_handle = cuda_context_handle,
    .stream_handle = cuda_stream_handle,
    .dialect = &cuda_dialect,
    .kernel_key = cuda_kernel_key,
    .kernel_compile = cuda_kernel_compile,
    .kernel_load = cuda_kernel_load,
    .kernel_launch = cuda_kernel_launch,
    .kernel_unload = cuda_kernel_unload,
    .order_stream = cuda_order_stream,
    .wait_stream = cuda_wait_stream,
    .memory_space = cuda_memory_space,
};
