/* DLPack export and import on DLManagedTensor and DLManagedTensorVersioned.
 * The same rules hold for C users as for Python users. */
#ifndef TACK_EXCHANGE_H
#define TACK_EXCHANGE_H

#include "tack/array.h"
#include "tack/dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exports an array as a managed tensor. The buffer is shared first (its
 * queued launches complete; later launches on it complete before they
 * return). The tensor retains the array until its deleter runs; the deleter
 * may be called from any thread. One allocation holds the tensor, its shape
 * and its strides (C-contiguous element strides, byte_offset 0).
 * The versioned form carries DLPACK_FLAG_BITMASK_READ_ONLY for a read-only
 * array; the legacy form cannot say so.
 * On error (TACK_ENOMEM, TACK_ERUNTIME from share) *out is untouched. */
tack_status tack_array_to_dlpack(tack_array *array, DLManagedTensor **out);
tack_status tack_array_to_dlpack_versioned(tack_array *array, DLManagedTensorVersioned **out);

/* The same exports for a consumer that names its stream (the array API's
 * __dlpack__(stream=...)), synchronised as tack_buffer_share_with_stream
 * says instead of by share(): on CUDA the consumer's stream waits for the
 * array's queued launches with an event and the host does not wait; -1
 * waits for nothing. The buffer is marked shared in every case.
 * On error (TACK_EVALUE for a stream value that is invalid or names a
 * stream of another device, TACK_ENOMEM, TACK_ERUNTIME) *out is untouched
 * and nothing was enqueued on the consumer's stream. */
tack_status tack_array_to_dlpack_stream(tack_array *array, int64_t stream, DLManagedTensor **out);
tack_status tack_array_to_dlpack_versioned_stream(tack_array *array, int64_t stream, DLManagedTensorVersioned **out);

/* Imports a managed tensor without copying.
 * `device` is the device asked for (NULL: none); `default_device` the
 * caller's default (NULL: cpu). The device is chosen as the spec says: the
 * asked-for device if it can wrap the tensor (TACK_ERUNTIME naming the
 * device to use otherwise), else the default device if it can, else the
 * tensor's own device.
 * On success the array adopts the tensor: its deleter is called exactly once,
 * when the last array over the memory (reshapes included) is released.
 * On error the tensor is not adopted and stays the caller's — with one
 * exception: a versioned tensor whose major version Tack does not know is
 * refused with TACK_EBUFFER after its deleter has been called, as the DLPack
 * specification requires; *deleter_called tells the caller (may be NULL).
 * Errors: TACK_EVALUE (null data, non-C-contiguous strides, unknown device
 * type, Metal, bad ndim or shape), TACK_ETYPE (no equivalent dtype, lanes !=
 * 1), TACK_ERUNTIME (a device that cannot wrap the tensor), TACK_EBUFFER
 * (unknown major version). */
tack_status tack_array_from_dlpack(DLManagedTensor *tensor, tack_device *device, tack_device *default_device,
                                   tack_array **out);
tack_status tack_array_from_dlpack_versioned(DLManagedTensorVersioned *tensor, tack_device *device,
                                             tack_device *default_device, tack_array **out,
                                             int *deleter_called);

/* Live exports not yet deleted, for leak tests. */
long tack_dlpack_live_exports(void);

#ifdef __cplusplus
}
#endif

#endif
