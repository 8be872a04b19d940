/* Launch queues: what a backend loads and how launches are ordered against
 * sharing. Not installed. */
#ifndef TACK_QUEUE_H
#define TACK_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* A host entry point: runs the kernel for every index in [begin, end).
 * args[i] points at the value of the kernel's parameter i (for an array,
 * at its data pointer). */
typedef void (*tack_host_entry)(int64_t begin, int64_t end, void *const *args);

/* Code the kernel layer compiled for a backend, handed to its kernel_load. */
struct tack_kernel_code {
    /* "host": `host` is the entry point, callable on this machine.
     * "ptx": `data` holds `size` bytes of NUL-terminated PTX whose entry
     * `entry` takes (int64_t n, the kernel's parameters) and covers [0, n). */
    const char *format;
    const void *data;
    size_t size;
    const char *entry;
    tack_host_entry host;
    /* The kernel's parameters after the index, and each one's bytes. */
    int nargs;
    const size_t *arg_sizes;
    /* "opencl": `data` holds NUL-terminated OpenCL C 2.0 source whose
     * __kernel `entry` takes (int64_t n, the kernel's parameters, arrays as
     * __global pointers) and covers [0, n); the backend compiles it for its
     * device (tack_opencl_compile, src/kernel/kernel.h).
     * "hip": `data` holds NUL-terminated HIP source with such an
     * extern "C" __global__ `entry`, for tack_hip_compile.
     * Those compiles need the device, which only the backend knows. */
    const char *name;  /* the kernel's, for messages */
    int uses_f64;      /* a parameter is double or double *: needs fp64 */
};

/* Hands a launch to the device's queue through ops->kernel_launch, records
 * it on every buffer it uses, and waits for it when one of them is shared
 * (another library may touch that memory at any moment, with no Tack call
 * in between). `buffers` may repeat a buffer.
 * On error from the enqueue nothing is recorded; TACK_ERUNTIME from the
 * wait means the launch was queued but its completion is unknown. */
tack_status tack_queue_launch(tack_device *device, void *kernel, int64_t n, void *const *args,
                              tack_buffer *const *buffers, size_t nbuffers);

#endif
