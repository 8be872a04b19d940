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
 *
 * This file opens and closes a device and holds the backend's table; the
 * rest is in src/backend/cuda/, a file per topic: context.c (making the
 * context current), memory.c, export.c (memory as OS handles, both ways),
 * queue.c (the stream, and ordering against other libraries' streams),
 * dialect.c (the CUDA C the kernel layer generates), toolchain.c (which
 * NVRTC makes what code, and compiling), module.c (loading and launching),
 * describe.c (tack_report).
 */
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

static void device_free(struct cuda_device *cd)
{
    pthread_mutex_destroy(&cd->export_lock);
    pthread_mutex_destroy(&cd->code_lock);
    free(cd);
}

static int device_attribute(const struct cuda_device *cd, CUdevice_attribute a)
{
    int v = 0;
    if (cd->cu->cuDeviceGetAttribute(&v, a, cd->dev) != CUDA_SUCCESS)
        return 0;
    return v;
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
        cuda_vmm_prop(cd, &prop);
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
        return cuda_driver_error(TACK_ERUNTIME, r, "counting CUDA devices", d);
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
        return cuda_driver_error(TACK_ERUNTIME, r, "cuDeviceGet", d);
    }
    int external;
    st = cuda_choose_context(d, cd, &external);
    if (st != TACK_OK) {
        device_free(cd);
        return st;
    }
    if (cu->cuCtxGetId && (r = cu->cuCtxGetId(cd->ctx, &cd->ctx_id)) != CUDA_SUCCESS) {
        st = cuda_driver_error(TACK_ERUNTIME, r, "reading the CUDA context's id", d);
        goto fail;
    }
    int pushed;
    st = cuda_enter(d, cd, &pushed);
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
    cuda_pop_context(cd->cu, pushed);
    if (r != CUDA_SUCCESS) {
        st = cuda_driver_error(TACK_ERUNTIME, r, "creating a CUDA stream", d);
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
    if (cuda_device_usable(cd) && cuda_enter(d, cd, &pushed) == TACK_OK) {
        /* Stream-ordered frees may still be queued. */
        cd->cu->cuStreamSynchronize(cd->stream);
        cd->cu->cuStreamDestroy(cd->stream);
        cd->cu->cuStreamDestroy(cd->fill_stream);
        cuda_pop_context(cd->cu, pushed);
    }
    /* Only the reference Tack took; an adopted context is its owner's. */
    if (cd->primary)
        cd->cu->cuDevicePrimaryCtxRelease(cd->dev);
    device_free(cd);
    d->impl = NULL;
}

static const DLDeviceType cuda_wraps[] = {kDLCUDA, kDLCUDAManaged, 0};

const struct tack_backend_ops tack_cuda_backend = {
    .name = "cuda",
    .dl_type = kDLCUDA,
    .wraps = cuda_wraps,
    .describe = cuda_describe,
    .open = cuda_open,
    .close = cuda_close,
    .memory = &tack_cuda_memory,
    .queue = &tack_cuda_queue,
    .toolchain = &tack_cuda_toolchain,
};
