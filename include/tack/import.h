/* Zero-copy imports of memory that a protocol other than DLPack's managed
 * tensors describes (Python's buffer protocol, the CUDA Array Interface, a
 * C code's own descriptor), held to the same rules as a DLPack import: the
 * checks, the device choice and the construction (src/dlpack/import.c).
 * tack.asarray is built on it, so C code imports such memory exactly as
 * Python does. */
#ifndef TACK_IMPORT_H
#define TACK_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "tack/array.h"
#include "tack/buffer.h"
#include "tack/device.h"
#include "tack/dlpack.h"
#include "tack/dtype.h"
#include "tack/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Memory to import, as the protocol described it. */
struct tack_import {
    /* Names the memory in messages: "the buffer". */
    const char *what;
    void *data;
    DLDevice device;
    /* The protocol gives the device type but no ordinal (the CUDA Array
     * Interface): any device of that type may try to wrap it, the
     * backend's pointer check refusing another device's memory, and
     * device.device_id names the one to open when no device given can. */
    int any_ordinal;
    tack_dtype dtype;
    int ndim;
    const int64_t *shape;
    /* In bytes, as both protocols give them; NULL: C-contiguous. */
    const int64_t *strides;
    /* The bytes the protocol vouches for at data (a buffer's len); the
     * shape may not describe more. SIZE_MAX when it says nothing. */
    size_t max_bytes;
    int writable;
    /* 0, or a producer's stream (1 legacy default, 2 per-thread default,
     * else a native handle) that Tack's stream waits for on the device
     * before the memory is used: work queued there is complete first. */
    uint64_t producer_stream;
    /* Called with `context` exactly once, when the last array over the
     * memory goes; not called when the import fails. */
    tack_release_fn release;
    void *context;
};
typedef struct tack_import tack_import;

/* Imports the memory as one array, with the device chosen as for a DLPack
 * import (`device` asked for, else `default_device`, else the memory's own
 * device). Errors: TACK_EVALUE (null data, strides that are not
 * C-contiguous, misaligned data, bad ndim or shape, more bytes than
 * max_bytes, the backend's pointer check), TACK_ETYPE (not a Tack dtype),
 * TACK_ERUNTIME (a device that cannot wrap it; a failed stream wait),
 * TACK_ENOMEM. On error *out is untouched, release is not called and
 * nothing is kept. */
TACK_API tack_status tack_import_array(const struct tack_import *import, tack_device *device,
                                       tack_device *default_device, tack_array **out);

/* The stream= value a DLPack producer of memory on `dl` should order its
 * pending writes before: the stream of the device the import will choose
 * (as tack_array_from_dlpack chooses it), so that the producer's work comes
 * before Tack's reads. 0 when there is none to give: memory without
 * stream semantics in DLPack (host memory; only CUDA and ROCm memory has
 * them), no device that would import it, a device without a queue. Never
 * fails. */
TACK_API uint64_t tack_dlpack_consumer_stream(DLDevice dl, tack_device *device, tack_device *default_device);

#ifdef __cplusplus
}
#endif

#endif
