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
TACK_API tack_status tack_array_to_dlpack(tack_array *array, DLManagedTensor **out);
TACK_API tack_status tack_array_to_dlpack_versioned(tack_array *array, DLManagedTensorVersioned **out);

/* The same exports for a consumer that names its stream (the array API's
 * __dlpack__(stream=...)), synchronised as tack_buffer_share_with_stream
 * says instead of by share(): on CUDA the consumer's stream waits for the
 * array's queued launches with an event and the host does not wait; -1
 * waits for nothing. The buffer is marked shared in every case.
 * On error (TACK_EVALUE for a stream value that is invalid or names a
 * stream of another device, TACK_ENOMEM, TACK_ERUNTIME) *out is untouched
 * and nothing was enqueued on the consumer's stream. */
TACK_API tack_status tack_array_to_dlpack_stream(tack_array *array, int64_t stream, DLManagedTensor **out);
TACK_API tack_status tack_array_to_dlpack_versioned_stream(tack_array *array, int64_t stream, DLManagedTensorVersioned **out);

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
TACK_API tack_status tack_array_from_dlpack(DLManagedTensor *tensor, tack_device *device, tack_device *default_device,
                                            tack_array **out);
TACK_API tack_status tack_array_from_dlpack_versioned(DLManagedTensorVersioned *tensor, tack_device *device,
                                                      tack_device *default_device, tack_array **out,
                                                      int *deleter_called);

/* The C halves of DLPack's exchange table (DLPackExchangeAPI, DLPack 1.3),
 * for a C library that publishes or consumes one over Tack arrays. */

/* Describes the array as an unmanaged DLTensor (dltensor_from_py_object_no_sync):
 * its data, device and dtype, the array's own shape record, NULL strides
 * (C-contiguous) and byte_offset 0. Nothing is retained, marked shared or
 * waited for: the view is good while the array lives, and its user orders
 * its work after Tack's queue itself (tack_dlpack_work_stream).
 * On error (TACK_EVALUE for a NULL argument) *out is untouched. */
TACK_API tack_status tack_array_to_dltensor(const tack_array *array, DLTensor *out);

/* A new zero-filled array of the prototype's dtype and shape on the
 * process-wide device of the prototype's DLPack device (its data, strides
 * and byte_offset are not read), exported as a versioned tensor the caller
 * owns (managed_tensor_allocator). Memory Tack would label otherwise is
 * refused rather than handed out under the prototype's label: pinned host
 * memory asked for (kDLCUDAHost) is not plain host memory.
 * Errors: TACK_EVALUE (a NULL argument, bad ndim or shape, a device type
 * Tack does not have, another label), TACK_ETYPE (no Tack dtype, lanes !=
 * 1), TACK_ERUNTIME (no such device), TACK_ENOMEM. On error *out is
 * untouched and nothing stays allocated. */
TACK_API tack_status tack_dlpack_allocate(const DLTensor *prototype, DLManagedTensorVersioned **out);

/* The stream Tack's work on the process-wide device of `device` is queued
 * on (current_work_stream), as a native handle (a CUstream); 0 for host
 * memory and devices without a queue. A consumer that runs its work there
 * is ordered after Tack's launches.
 * On error (TACK_EVALUE for a NULL out or a device type Tack does not have,
 * TACK_ERUNTIME for no such device) *out is untouched. */
TACK_API tack_status tack_dlpack_work_stream(DLDevice device, uint64_t *out);

/* Live exports not yet deleted, for leak tests. */
TACK_API long tack_dlpack_live_exports(void);

#ifdef __cplusplus
}
#endif

#endif
