/* Arrays: a dtype and a C-contiguous shape over a buffer. */
#ifndef TACK_ARRAY_H
#define TACK_ARRAY_H

#include <stddef.h>
#include <stdint.h>

#include "tack/buffer.h"
#include "tack/device.h"
#include "tack/dtype.h"
#include "tack/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TACK_MAX_NDIM 64

typedef struct tack_array tack_array;

/* A new zero-filled array on `device`. Shapes are validated first: a
 * negative extent or more than TACK_MAX_NDIM dimensions is TACK_EVALUE, a
 * size whose bytes overflow is TACK_EVALUE. On error *out is untouched. */
tack_status tack_array_empty(tack_device *device, tack_dtype dtype, int ndim, const int64_t *shape,
                             int exportable, tack_array **out);

/* An array over a buffer (retained). The buffer must hold the array's bytes
 * (TACK_EVALUE otherwise). On error *out is untouched. */
tack_status tack_array_from_buffer(tack_buffer *buffer, tack_dtype dtype, int ndim, const int64_t *shape,
                                   int writable, tack_array **out);

/* An array over memory at `address` that someone else owns (array_from_ptr):
 * the backend checks the memory space first (TACK_EVALUE for the wrong kind,
 * TACK_ERUNTIME for a failed query where the backend says so). Tack never
 * frees the memory nor extends its life. On error *out is untouched. */
tack_status tack_array_wrap(tack_device *device, uint64_t address, tack_dtype dtype, int ndim,
                            const int64_t *shape, int writable, tack_array **out);

/* A new array over the same buffer with another shape of the same size; one
 * extent may be -1 (inferred). TACK_EVALUE for a shape of another size. */
tack_status tack_array_reshape(const tack_array *array, int ndim, const int64_t *shape, tack_array **out);

/* Reference counting; both accept NULL. Thread-safe. */
tack_array *tack_array_retain(tack_array *array);
void tack_array_release(tack_array *array);

tack_dtype tack_array_dtype(const tack_array *array);
int tack_array_ndim(const tack_array *array);
const int64_t *tack_array_shape(const tack_array *array);
size_t tack_array_size(const tack_array *array);   /* elements */
size_t tack_array_nbytes(const tack_array *array); /* bytes */
int tack_array_writable(const tack_array *array);
void *tack_array_data(const tack_array *array);
tack_buffer *tack_array_buffer(const tack_array *array); /* borrowed */
tack_device *tack_array_device(const tack_array *array); /* borrowed */

/* Copies the array's bytes (exactly nbytes) to host memory, after the
 * launches queued on it. TACK_EVALUE for a size mismatch, TACK_ERUNTIME for
 * a driver failure. */
tack_status tack_array_copy_to_host(const tack_array *array, void *dst, size_t nbytes);

/* Host writes. TACK_ERUNTIME on a read-only array (nothing written),
 * TACK_EVALUE for a size mismatch. `value` points at one element of the
 * array's dtype. */
tack_status tack_array_copy_from_host(tack_array *array, const void *src, size_t nbytes);
tack_status tack_array_fill(tack_array *array, const void *value);

/* A copy on another device, through the host. Errors as the copies. */
tack_status tack_array_to_device(const tack_array *array, tack_device *device, tack_array **out);

/* OS-handle export of the array's memory. */
typedef struct tack_exported_memory {
    char backend[16];
    size_t size;            /* the array's bytes */
    size_t allocation_size; /* the exported allocation, >= size */
    int64_t handle;         /* a POSIX file descriptor, owned by the buffer */
    char handle_type[16];   /* "posix_fd", "win32_kmt" */
    uint8_t device_uuid[16];
} tack_exported_memory;

/* Exports the array's memory as an OS handle. Backends without export fail
 * with TACK_ERUNTIME "Backend <name> does not support memory export". */
tack_status tack_array_export_memory(tack_array *array, tack_exported_memory *out);

/* Live-object counter, for leak tests. */
long tack_array_live_count(void);

#ifdef __cplusplus
}
#endif

#endif
