/* The one way the core and the kernel layer call a backend's memory, queue
 * and toolchain tables: each
 * wrapper applies its optional slot's default as src/core/internal.h
 * states it, so that no caller tests a slot itself. Not installed. */
#ifndef TACK_BACKEND_H
#define TACK_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* Whether the backend queues work: launches on a backend without a queue
 * complete on return, so there is nothing to record or wait for. Inline: it
 * is on every launch's path. */
static inline int tack_backend_has_queue(const tack_device *device) { return device->ops->queue != NULL; }

/* optional close: nothing to do. */
void tack_backend_close(tack_device *device);
/* optional describe: no driver, one device named as the backend. Never fails. */
void tack_backend_report_fill(const struct tack_backend_ops *ops, tack_backend_report *out);

/* Required slots, as the memory table's: errors as the backend's. */
tack_status tack_backend_alloc(tack_device *device, size_t nbytes, int exportable, void **data, void **alloc_ctx);
void tack_backend_free(tack_device *device, void *data, void *alloc_ctx);
/* optional check_pointer: TACK_OK for every address. */
tack_status tack_backend_check_pointer(tack_device *device, uint64_t address);
/* Whether the host addresses the device's memory: the backend has no copy
 * slots, so copies are memcpy and a fill may write in place. */
int tack_backend_host_addressable(const tack_device *device);
/* optional copies: memcpy, TACK_OK. */
tack_status tack_backend_copy_to_host(tack_device *device, void *dst, const void *src, size_t nbytes);
tack_status tack_backend_copy_from_host(tack_device *device, void *dst, const void *src, size_t nbytes);
/* optional export_memory: TACK_ERUNTIME "Backend <name> does not support
 * memory export"; out untouched. */
tack_status tack_backend_export_memory(tack_buffer *buffer, tack_exported_memory *out);
/* optional release_export: nothing. */
void tack_backend_release_export(tack_buffer *buffer);
/* optional import_memory: TACK_ERUNTIME "Backend <name> does not support
 * memory import"; nothing set. */
tack_status tack_backend_import_memory(tack_device *device, const tack_exported_memory *exported, void **data,
                                       void **alloc_ctx, int *writable, int *foreign);
/* Whether tack_memory_space should open a device of the backend to ask
 * its driver: false where the memory table has no memory_space. */
int tack_backend_has_memory_space(const struct tack_backend_ops *ops);
/* optional memory_space: *out = NULL (the driver does not know), TACK_OK. */
tack_status tack_backend_memory_space(tack_device *device, uint64_t address, const char **out);

/* No queue, or the queue's optional slot missing: */
/* synchronize: TACK_OK, nothing queued. */
tack_status tack_backend_synchronize(tack_device *device);
/* context_handle: 0. */
uint64_t tack_backend_context_handle(const tack_device *device);
/* stream_handle: 0. */
uint64_t tack_backend_stream_handle(const tack_device *device);
/* order_stream: a host wait for the buffer's launches (tack_buffer_wait),
 * for every `stream`, -1 included, since nothing else orders a consumer's
 * reads. With the slot, -1 (the consumer orders its own work) is TACK_OK
 * and any other value goes to the slot. Errors as tack_buffer_wait or the
 * slot; the caller sets the shared mark only after TACK_OK. */
tack_status tack_backend_order_stream(tack_buffer *buffer, int64_t stream);
/* wait_stream: TACK_OK, nothing to wait for. */
tack_status tack_backend_wait_stream(tack_device *device, uint64_t stream);

/* The toolchain (internal.h's struct tack_backend_toolchain). */
/* The backend's dialect; NULL when it runs no kernels (no toolchain). */
const struct tack_dialect *tack_backend_dialect(const struct tack_backend_ops *ops);
/* No toolchain: TACK_ERUNTIME "kernels cannot be launched on the <backend>
 * backend yet (device <name>)"; else TACK_OK. */
tack_status tack_backend_runs_kernels(const tack_device *device);
/* Whether the backend keys its code, so the kernel layer keeps it: false
 * without kernel_key. */
int tack_backend_keeps_code(const struct tack_backend_ops *ops);
/* optional kernel_key: TACK_OK, job untouched (code not kept). */
tack_status tack_backend_kernel_key(const struct tack_backend_ops *ops, struct tack_compile *job);
/* The compile slot itself, which also tells code of one compiler from
 * another's; NULL without a toolchain. */
tack_status (*tack_backend_compiler(const struct tack_backend_ops *ops))(const struct tack_compile *job,
                                                                            struct tack_kernel_code *out);
/* Required slots of a toolchain (the caller has checked there is one):
 * errors as the backend's; a load of code with more than
 * TACK_KERNEL_MAX_PARAMS arguments (or fewer than none) is TACK_EVALUE
 * before any backend sees it. */
tack_status tack_backend_kernel_compile(const struct tack_backend_ops *ops, const struct tack_compile *job,
                                        struct tack_kernel_code *out);
tack_status tack_backend_kernel_load(tack_device *device, struct tack_kernel_code *code, void **kernel);
/* No toolchain: as tack_backend_runs_kernels. Inline: it is on every
 * launch's path. */
static inline tack_status tack_backend_kernel_launch(tack_device *device, void *kernel,
                                                     const struct tack_launch *launch)
{
    const struct tack_backend_toolchain *t = device->ops->toolchain;
    return t ? t->kernel_launch(device, kernel, launch) : tack_backend_runs_kernels(device);
}
/* optional kernel_expected_ns: UINT64_MAX, not known. */
uint64_t tack_backend_kernel_expected_ns(const tack_device *device, void *kernel, int64_t n);
/* optional kernel_unload: nothing. */
void tack_backend_kernel_unload(tack_device *device, void *kernel);

#endif
