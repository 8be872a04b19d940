/* The host backend: memory from the C allocator, every address accepted. */
#include <stdlib.h>

#include "../core/internal.h"

static tack_status cpu_open(tack_device *device, const tack_option *options, size_t n_options)
{
    (void)options;
    (void)n_options;
    if (device->ordinal != 0)
        return tack_error_set(TACK_EVALUE, "the cpu backend has one device, cpu:0, not cpu:%d", device->ordinal);
    return TACK_OK;
}

static tack_status cpu_alloc(tack_device *device, size_t nbytes, int exportable, void **data, void **ctx)
{
    (void)device;
    (void)exportable;
    /* calloc: large requests come as fresh zero pages, so zeroing is free. */
    void *p = calloc(1, nbytes);
    if (!p)
        return tack_error_set(TACK_ENOMEM, "out of host memory allocating %zu bytes", nbytes);
    *data = p;
    *ctx = NULL;
    return TACK_OK;
}

static void cpu_free(tack_device *device, void *data, void *ctx)
{
    (void)device;
    (void)ctx;
    free(data);
}

static const DLDeviceType cpu_wraps[] = {kDLCPU, kDLCUDAHost, kDLROCMHost, 0};

const struct tack_backend_ops tack_cpu_backend = {
    .name = "cpu",
    .dl_type = kDLCPU,
    .wraps = cpu_wraps,
    .open = cpu_open,
    .alloc = cpu_alloc,
    .free = cpu_free,
};
