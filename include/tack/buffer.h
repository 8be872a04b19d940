/* Buffers: a run of device memory, owned by Tack or wrapped. */
#ifndef TACK_BUFFER_H
#define TACK_BUFFER_H

#include <stddef.h>
#include <stdint.h>

#include "tack/device.h"
#include "tack/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tack_buffer tack_buffer;

/* Called exactly once, when the last reference to a wrapped buffer goes. */
typedef void (*tack_release_fn)(void *context);

/* Allocates `nbytes` (at least one byte is reserved) of zeroed memory on the
 * device; `exportable` asks for memory that export_memory can hand out
 * without a copy where the backend supports it. The buffer retains the
 * device. On error returns TACK_ENOMEM or TACK_ERUNTIME and leaves *out
 * untouched. */
TACK_API tack_status tack_buffer_alloc(tack_device *device, size_t nbytes, int exportable, tack_buffer **out);

/* Wraps memory someone else owns. The address is checked with the backend's
 * memory-space query first (TACK_EVALUE for the wrong kind of memory). Tack
 * never frees it; `release`, if not NULL, is called with `context` exactly
 * once when the buffer goes. On failure `release` is not called and nothing
 * is kept. The buffer is shared from the start. On error returns TACK_EVALUE
 * (also for NULL data of nonzero size), TACK_ERUNTIME or TACK_ENOMEM and
 * leaves *out untouched. */
TACK_API tack_status tack_buffer_wrap(tack_device *device, void *data, size_t nbytes, tack_release_fn release,
                                      void *context, tack_buffer **out);

/* Reference counting; both accept NULL. Thread-safe. A release after the
 * last one, or a checked call after it (every fallible one), is reported
 * on stderr naming the call and the buffer, and aborts in builds with
 * assertions; otherwise it changes nothing (a call returns TACK_EVALUE).
 * That is certain while the record is held back from malloc (the last
 * 128 records of Tack objects the releasing thread freed) and likely after.
 * Accessors do not check. */
TACK_API tack_buffer *tack_buffer_retain(tack_buffer *buffer);
TACK_API void tack_buffer_release(tack_buffer *buffer);

/* Accessors: never fail; `buffer` must be a live buffer (not NULL). */
TACK_API void *tack_buffer_data(const tack_buffer *buffer);
TACK_API size_t tack_buffer_size(const tack_buffer *buffer);
TACK_API tack_device *tack_buffer_device(const tack_buffer *buffer); /* borrowed */
/* 1 for memory Tack allocated or mapped (tack_array_import_memory), 0 for
 * wrapped memory. */
TACK_API int tack_buffer_is_owned(const tack_buffer *buffer);

/* Waits for the launches queued on the buffer so far and marks it shared:
 * every later launch that uses it completes before returning.
 * On error returns TACK_ERUNTIME; the mark is not set. */
TACK_API tack_status tack_buffer_share(tack_buffer *buffer);
TACK_API int tack_buffer_is_shared(const tack_buffer *buffer);

/* share() for a consumer that names the stream it will use the memory on,
 * with the stream values of the array API's __dlpack__(stream=...):
 *   -1  no synchronisation: the consumer orders its own work; nothing is
 *       waited for or enqueued;
 *   1, 2 (CUDA) the legacy and the per-thread default stream;
 *   any other positive value: a native stream handle (a CUstream).
 * On a backend that can order streams (cuda) the consumer's stream is made
 * to wait for the buffer's queued launches with an event, and the host does
 * not wait; on the others the queued launches are waited for on the host,
 * as share() does. In every case the buffer is marked shared on success.
 * Errors: TACK_EVALUE for a NULL buffer, a value below -1, 0 on a CUDA
 * buffer (ambiguous under the array API) or a stream of another device;
 * TACK_ERUNTIME for a driver failure. On error the mark is not set.
 * A handle that is no live stream (never created, or destroyed) is the
 * caller's error, as it is in CUDA, whose driver may crash on one instead
 * of returning an error; where the driver refuses it, the result is
 * TACK_EVALUE with nothing changed. */
TACK_API tack_status tack_buffer_share_with_stream(tack_buffer *buffer, int64_t stream);

/* Live-object counter, for leak tests: buffers not yet freed in the process. */
TACK_API long tack_buffer_live_count(void);

#ifdef __cplusplus
}
#endif

#endif
