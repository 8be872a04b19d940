/* The defaults of the backend tables' optional slots, applied in one place
 * (src/core/internal.h states each beside its slot). */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "toolchain.h"

void tack_backend_close(tack_device *device)
{
    if (device->ops->close)
        device->ops->close(device);
}

void tack_backend_report_fill(const struct tack_backend_ops *ops, tack_backend_report *out)
{
    if (ops->describe) {
        ops->describe(out);
        return;
    }
    out->driver.found = 1;
    snprintf(out->driver.note, sizeof out->driver.note, "none needed");
    out->device_count = 1;
    snprintf(out->devices[0], sizeof out->devices[0], "%s", ops->name);
}

tack_status tack_backend_alloc(tack_device *device, size_t nbytes, int exportable, void **data, void **alloc_ctx)
{
    return device->ops->memory->alloc(device, nbytes, exportable, data, alloc_ctx);
}

void tack_backend_free(tack_device *device, void *data, void *alloc_ctx)
{
    device->ops->memory->free(device, data, alloc_ctx);
}

tack_status tack_backend_check_pointer(tack_device *device, uint64_t address)
{
    const struct tack_backend_memory *m = device->ops->memory;
    return m->check_pointer ? m->check_pointer(device, address) : TACK_OK;
}

int tack_backend_host_addressable(const tack_device *device) { return !device->ops->memory->copy_from_host; }

/* A copy through the slot, or memcpy without one. */
static tack_status copy(tack_status (*slot)(tack_device *, void *, const void *, size_t), tack_device *device,
                        void *dst, const void *src, size_t nbytes)
{
    if (slot)
        return slot(device, dst, src, nbytes);
    memcpy(dst, src, nbytes);
    return TACK_OK;
}

tack_status tack_backend_copy_to_host(tack_device *device, void *dst, const void *src, size_t nbytes)
{
    return copy(device->ops->memory->copy_to_host, device, dst, src, nbytes);
}

tack_status tack_backend_copy_from_host(tack_device *device, void *dst, const void *src, size_t nbytes)
{
    return copy(device->ops->memory->copy_from_host, device, dst, src, nbytes);
}

tack_status tack_backend_export_memory(tack_buffer *buffer, tack_exported_memory *out)
{
    const struct tack_backend_ops *ops = buffer->device->ops;
    if (!ops->memory->export_memory)
        return tack_error_set(TACK_ERUNTIME, "Backend %s does not support memory export", ops->name);
    return ops->memory->export_memory(buffer, out);
}

void tack_backend_release_export(tack_buffer *buffer)
{
    const struct tack_backend_memory *m = buffer->device->ops->memory;
    if (m->release_export)
        m->release_export(buffer);
}

tack_status tack_backend_import_memory(tack_device *device, const tack_exported_memory *exported, void **data,
                                       void **alloc_ctx, int *writable, int *foreign)
{
    const struct tack_backend_ops *ops = device->ops;
    if (!ops->memory->import_memory)
        return tack_error_set(TACK_ERUNTIME, "Backend %s does not support memory import", ops->name);
    return ops->memory->import_memory(device, exported, data, alloc_ctx, writable, foreign);
}

int tack_backend_has_memory_space(const struct tack_backend_ops *ops) { return ops->memory->memory_space != NULL; }

tack_status tack_backend_memory_space(tack_device *device, uint64_t address, const char **out)
{
    const struct tack_backend_memory *m = device->ops->memory;
    if (m->memory_space)
        return m->memory_space(device, address, out);
    *out = NULL;
    return TACK_OK;
}

tack_status tack_backend_synchronize(tack_device *device)
{
    const struct tack_backend_queue *q = device->ops->queue;
    return q ? q->synchronize(device) : TACK_OK;
}

uint64_t tack_backend_context_handle(const tack_device *device)
{
    const struct tack_backend_queue *q = device->ops->queue;
    return q && q->context_handle ? q->context_handle(device) : 0;
}

uint64_t tack_backend_stream_handle(const tack_device *device)
{
    const struct tack_backend_queue *q = device->ops->queue;
    return q && q->stream_handle ? q->stream_handle(device) : 0;
}

tack_status tack_backend_order_stream(tack_buffer *buffer, int64_t stream)
{
    const struct tack_backend_queue *q = buffer->device->ops->queue;
    /* No stream a consumer could name or wait on (the host, Level Zero's
     * queue): only a host wait orders its reads, -1 included. */
    if (!q || !q->order_stream)
        return tack_buffer_wait(buffer);
    /* The consumer orders its own work after Tack's. */
    if (stream == -1)
        return TACK_OK;
    return q->order_stream(buffer, (uint64_t)stream);
}

tack_status tack_backend_wait_stream(tack_device *device, uint64_t stream)
{
    const struct tack_backend_queue *q = device->ops->queue;
    return q && q->wait_stream ? q->wait_stream(device, stream) : TACK_OK;
}

const struct tack_dialect *tack_backend_dialect(const struct tack_backend_ops *ops)
{
    return ops && ops->toolchain ? ops->toolchain->dialect : NULL;
}

tack_status tack_backend_runs_kernels(const tack_device *device)
{
    if (device->ops->toolchain)
        return TACK_OK;
    return tack_error_set(TACK_ERUNTIME, "kernels cannot be launched on the %s backend yet (device %s)",
                          device->ops->name, device->name);
}

int tack_backend_keeps_code(const struct tack_backend_ops *ops)
{
    return ops->toolchain && ops->toolchain->kernel_key != NULL;
}

tack_status tack_backend_kernel_key(const struct tack_backend_ops *ops, struct tack_compile *job)
{
    const struct tack_backend_toolchain *t = ops->toolchain;
    return t && t->kernel_key ? t->kernel_key(job) : TACK_OK;
}

tack_status (*tack_backend_compiler(const struct tack_backend_ops *ops))(const struct tack_compile *job,
                                                                            struct tack_kernel_code *out)
{
    return ops->toolchain ? ops->toolchain->kernel_compile : NULL;
}

tack_status tack_backend_kernel_compile(const struct tack_backend_ops *ops, const struct tack_compile *job,
                                        struct tack_kernel_code *out)
{
    return ops->toolchain->kernel_compile(job, out);
}

tack_status tack_backend_kernel_load(tack_device *device, struct tack_kernel_code *code, void **kernel)
{
    /* Each backend sizes its argument arrays by the bound. */
    if (code->nargs < 0 || code->nargs > TACK_KERNEL_MAX_PARAMS)
        return tack_error_set(TACK_EVALUE, "a kernel has at most %d parameters, not %d", TACK_KERNEL_MAX_PARAMS,
                              code->nargs);
    return device->ops->toolchain->kernel_load(device, code, kernel);
}

uint64_t tack_backend_kernel_expected_ns(const tack_device *device, void *kernel, int64_t n)
{
    const struct tack_backend_toolchain *t = device->ops->toolchain;
    return t && t->kernel_expected_ns ? t->kernel_expected_ns(kernel, n) : UINT64_MAX;
}

void tack_backend_kernel_unload(tack_device *device, void *kernel)
{
    const struct tack_backend_toolchain *t = device->ops->toolchain;
    if (t && t->kernel_unload)
        t->kernel_unload(device, kernel);
}
