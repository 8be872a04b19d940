/*
 * What the files of the CUDA backend share (src/backend/cuda/): the device record, the allocation record, and the
 * functions one topic calls in another. Private to the backend.
 */
#ifndef TACK_BACKEND_CUDA_CUDA_H
#define TACK_BACKEND_CUDA_CUDA_H

#include <pthread.h>
#include <stdint.h>

#include "../../core/internal.h"
#include "../../core/queue.h"
#include "../../core/toolchain.h"
#include "../../driver/cuda.h"
#include "../../driver/nvrtc.h"
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

static inline struct cuda_device *impl_of(const tack_device *d) { return d->impl; }

/* Which NVRTC makes what code for a device. */
struct cuda_choice {
    int nvrtc; /* its number for tack_nvrtc_api_at */
    const struct tack_nvrtc_api *api;
    enum tack_code_kind kind;
};

/* ---- the context (context.c) --------------------------------------------
 * Each definition states its contract in full; in short: */

/* Sets the error `st`, "<what> on <device> failed: <the driver's text>",
 * and returns `st`. */
tack_status cuda_driver_error(tack_status st, CUresult r, const char *what, const tack_device *d);
/* 1 while `ctx` is still the context that had `id`. */
int cuda_context_alive(const struct cuda_device *cd, CUcontext ctx, unsigned long long id);
/* 0 once the device's context is gone, for good. */
int cuda_device_usable(struct cuda_device *cd);
/* The one push and pop: makes `ctx` current unless it is (*pushed says
 * which); the driver's failure, nothing pushed, when the push fails. */
CUresult cuda_push_context(const struct tack_cuda_api *cu, CUcontext ctx, int *pushed);
void cuda_pop_context(const struct tack_cuda_api *cu, int pushed);
/* The device's context made current through cuda_push_context, undone with
 * cuda_pop_context; TACK_ERUNTIME, nothing pushed, when it is gone or the
 * push fails. */
tack_status cuda_enter(const tack_device *d, struct cuda_device *cd, int *pushed);
/* For open: the calling thread's context or the retained primary one;
 * TACK_ERUNTIME, no reference taken, when retaining fails. */
tack_status cuda_choose_context(tack_device *d, struct cuda_device *cd, int *external);

/* ---- memory (memory.c) -------------------------------------------------- */

void cuda_vmm_prop(const struct cuda_device *cd, CUmemAllocationProp *prop);
/* Maps a->handle at a fresh address; on failure undoes its steps and names
 * the failing one in *step. */
CUresult cuda_vmm_map(struct cuda_device *cd, struct cuda_alloc *a, size_t size, const char **step);
tack_status cuda_alloc(tack_device *d, size_t nbytes, int exportable, void **data, void **ctx);
void cuda_free(tack_device *d, void *data, void *ctx);
tack_status cuda_check_pointer(tack_device *d, uint64_t address);
tack_status cuda_memory_space(tack_device *d, uint64_t address, const char **out);
tack_status cuda_copy_to_host(tack_device *d, void *dst, const void *src, size_t nbytes);
tack_status cuda_copy_from_host(tack_device *d, void *dst, const void *src, size_t nbytes);
/* The memory table, with export.c's slots. */
extern const struct tack_backend_memory tack_cuda_memory;

/* ---- export and import (export.c) --------------------------------------- */

tack_status cuda_export_memory(tack_buffer *b, tack_exported_memory *out);
void cuda_release_export(tack_buffer *b);
tack_status cuda_import_memory(tack_device *d, const tack_exported_memory *e, void **data, void **ctx,
                               int *writable, int *foreign);

/* ---- the stream (queue.c) ----------------------------------------------- */

tack_status cuda_synchronize(tack_device *d);
uint64_t cuda_context_handle(const tack_device *d);
uint64_t cuda_stream_handle(const tack_device *d);
tack_status cuda_order_stream(tack_buffer *b, uint64_t value);
tack_status cuda_wait_stream(tack_device *d, uint64_t value);
extern const struct tack_backend_queue tack_cuda_queue;

/* ---- kernels: the dialect (dialect.c), NVRTC (toolchain.c), modules
 * (module.c) --------------------------------------------------------------- */

extern const struct tack_dialect cuda_dialect;
/* The newest architecture `api` targets up to `arch`; 0 if none. */
int cuda_newest_up_to(const struct tack_nvrtc_api *api, int arch);
/* What to install for a driver and GPU, in `out`; 1 when a newer driver
 * would do as well. */
int cuda_advise(int driver, int arch, char *out, size_t cap);
/* Sets the error that no NVRTC fits and returns TACK_ERUNTIME. */
tack_status cuda_none_fits(const char *gpu, int arch, int driver, int refused, const char *refusal);
/* The NVRTC and code kind for a driver and GPU; *fits 0 when none fits;
 * TACK_ERUNTIME when no NVRTC is found at all. */
tack_status cuda_pick(int driver, int arch, int refused, struct cuda_choice *c, int *fits);
tack_status cuda_kernel_key(struct tack_compile *job);
tack_status cuda_kernel_compile(const struct tack_compile *job, struct tack_kernel_code *out);
tack_status cuda_kernel_load(tack_device *d, struct tack_kernel_code *code, void **out);
tack_status cuda_kernel_launch(tack_device *d, void *kernel, const struct tack_launch *l);
void cuda_kernel_unload(tack_device *d, void *kernel);
extern const struct tack_backend_toolchain tack_cuda_toolchain;

/* ---- describe (describe.c) ---------------------------------------------- */

void cuda_describe(tack_backend_report *out);

#endif
