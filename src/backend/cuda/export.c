/*
 * The CUDA backend's memory as OS handles: exporting a buffer as a POSIX
 * file descriptor (a plain buffer through an exportable copy), and mapping
 * one exported by Tack or another library. See src/backend/cuda/cuda.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda.h"

/* What export_memory keeps in buffer->export_ctx. */
struct cuda_export {
    int64_t handle; /* the exported handle, owned here; -1 while none */
    size_t allocation_size;
    tack_buffer *copy; /* the exportable copy of a plain buffer, or NULL */
};

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
    st = cuda_enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    int h = 0;
    CUresult r = cd->cu->cuMemExportToShareableHandle(&h, a->handle, EXPORT_HANDLE_TYPE, 0);
    cuda_pop_context(cd->cu, pushed);
    if (r != CUDA_SUCCESS)
        return cuda_driver_error(TACK_ERUNTIME, r, "cuMemExportToShareableHandle", d);
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
        st = cuda_enter(d, cd, &pushed);
        if (st == TACK_OK) {
            CUresult r = cd->cu->cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)copy->data,
                                                   (CUdeviceptr)(uintptr_t)b->data, b->nbytes, cd->stream);
            if (r == CUDA_SUCCESS)
                r = cd->cu->cuStreamSynchronize(cd->stream);
            cuda_pop_context(cd->cu, pushed);
            if (r != CUDA_SUCCESS)
                st = cuda_driver_error(TACK_ERUNTIME, r, "copying into exportable memory", d);
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
tack_status cuda_export_memory(tack_buffer *b, tack_exported_memory *out)
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

void cuda_release_export(tack_buffer *b)
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
tack_status cuda_import_memory(tack_device *d, const tack_exported_memory *e, void **data, void **ctx,
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
    tack_status st = cuda_enter(d, cd, &pushed);
    if (st != TACK_OK) {
        free(a);
        return st;
    }
    CUresult r = cu->cuMemImportFromShareableHandle(&a->handle, (void *)(uintptr_t)e->handle, EXPORT_HANDLE_TYPE);
    if (r != CUDA_SUCCESS) {
        cuda_pop_context(cd->cu, pushed);
        free(a);
        /* The driver refuses a descriptor that is not an exported
         * allocation as an invalid value or handle. */
        return cuda_driver_error(r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_HANDLE ? TACK_EVALUE
                                                                                             : TACK_ERUNTIME,
                            r, "cuMemImportFromShareableHandle", d);
    }
    const char *step;
    r = cuda_vmm_map(cd, a, size, &step);
    if (r == CUDA_SUCCESS) {
        cuda_pop_context(cd->cu, pushed);
        a->kind = ALLOC_VMM;
        a->size = size;
        a->ctx = cd->ctx;
        a->ctx_id = cd->ctx_id;
        *data = (void *)(uintptr_t)a->ptr;
        *ctx = a;
        return TACK_OK;
    }
    cu->cuMemRelease(a->handle);
    cuda_pop_context(cd->cu, pushed);
    free(a);
    return cuda_driver_error(r == CUDA_ERROR_OUT_OF_MEMORY ? TACK_ENOMEM : TACK_ERUNTIME, r, step, d);
}
