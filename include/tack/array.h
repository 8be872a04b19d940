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
TACK_API tack_status tack_array_empty(tack_device *device, tack_dtype dtype, int ndim, const int64_t *shape,
                                      int exportable, tack_array **out);

/* An array over a buffer (retained). The buffer must hold the array's bytes
 * (TACK_EVALUE otherwise). On error *out is untouched. */
TACK_API tack_status tack_array_from_buffer(tack_buffer *buffer, tack_dtype dtype, int ndim, const int64_t *shape,
                                            int writable, tack_array **out);

/* An array over memory at `address` that someone else owns (array_from_ptr):
 * the backend checks the memory space first (TACK_EVALUE for the wrong kind,
 * TACK_ERUNTIME for a failed query where the backend says so). Tack never
 * frees the memory nor extends its life. On error *out is untouched. */
TACK_API tack_status tack_array_wrap(tack_device *device, uint64_t address, tack_dtype dtype, int ndim,
                                     const int64_t *shape, int writable, tack_array **out);

/* A new array over the same buffer with another shape of the same size; one
 * extent may be -1 (inferred). TACK_EVALUE for a shape of another size. */
TACK_API tack_status tack_array_reshape(const tack_array *array, int ndim, const int64_t *shape, tack_array **out);

/* Checks a dtype and shape as every call that makes an array checks them,
 * making nothing, and gives the bytes such an array holds: for a caller that
 * must refuse a layout before it has memory for it (an unpickler reading
 * the values, a reader of a file header). TACK_ETYPE for a value that is
 * not a Tack dtype; TACK_EVALUE for ndim outside 0..TACK_MAX_NDIM, a NULL
 * shape with ndim > 0, a negative extent or a size over INT64_MAX bytes.
 * On error *nbytes is untouched. */
TACK_API tack_status tack_array_check_shape(tack_dtype dtype, int ndim, const int64_t *shape, size_t *nbytes);

/* Reference counting; both accept NULL. Thread-safe. A release after the
 * last one, or a checked call after it (every fallible one), is reported
 * on stderr naming the call and the array, and aborts in builds with
 * assertions; otherwise it changes nothing (a call returns TACK_EVALUE).
 * That is certain while the record is held back from malloc (the last
 * 128 records of Tack objects the releasing thread freed) and likely after.
 * Accessors do not check. */
TACK_API tack_array *tack_array_retain(tack_array *array);
TACK_API void tack_array_release(tack_array *array);

/* Accessors: never fail; `array` must be a live array (not NULL). */
TACK_API tack_dtype tack_array_dtype(const tack_array *array);
TACK_API int tack_array_ndim(const tack_array *array);
TACK_API const int64_t *tack_array_shape(const tack_array *array);
TACK_API size_t tack_array_size(const tack_array *array);   /* elements */
TACK_API size_t tack_array_nbytes(const tack_array *array); /* bytes */
TACK_API int tack_array_writable(const tack_array *array);
TACK_API void *tack_array_data(const tack_array *array);
TACK_API tack_buffer *tack_array_buffer(const tack_array *array); /* borrowed */
TACK_API tack_device *tack_array_device(const tack_array *array); /* borrowed */

/* Copies the array's bytes (exactly nbytes) to host memory, after the
 * launches queued on it. TACK_EVALUE for a size mismatch, TACK_ERUNTIME for
 * a driver failure. */
TACK_API tack_status tack_array_copy_to_host(const tack_array *array, void *dst, size_t nbytes);

/* Host writes. TACK_ERUNTIME on a read-only array (nothing written),
 * TACK_EVALUE for a size mismatch. `value` points at one element of the
 * array's dtype, whose bytes are stored as they are, as a kernel's scalar
 * argument is passed: no conversion, so a C caller converts first (an
 * int32 array takes an int32_t; Python's Array.fill refuses a float for an
 * integer array, as a kernel's integer parameter does). */
TACK_API tack_status tack_array_copy_from_host(tack_array *array, const void *src, size_t nbytes);
TACK_API tack_status tack_array_fill(tack_array *array, const void *value);

/* A copy on another device, through the host. Errors as the copies. */
TACK_API tack_status tack_array_to_device(const tack_array *array, tack_device *device, tack_array **out);

/* OS-handle export of the array's memory. */
typedef struct tack_exported_memory {
    char backend[16];
    size_t size;            /* the array's bytes */
    size_t allocation_size; /* the exported allocation, >= size */
    int64_t handle;         /* a POSIX file descriptor, owned by the buffer: valid
                             * while the exporting array (or another array over
                             * its buffer) lives, and closed when it goes */
    char handle_type[16];   /* "posix_fd", "win32_kmt" */
    uint8_t device_uuid[16];
} tack_exported_memory;

/* Exports the array's memory as an OS handle. Backends without export fail
 * with TACK_ERUNTIME "Backend <name> does not support memory export". */
TACK_API tack_status tack_array_export_memory(tack_array *array, tack_exported_memory *out);

/* Maps memory that tack_array_export_memory exported, in this process or
 * another one whose descriptor reached this one (SCM_RIGHTS, pidfd_getfd),
 * as a new array of `dtype` and `shape` over the start of it. The
 * descriptor stays the caller's: the cpu backend maps a duplicate, CUDA's
 * driver import does not take it over, and the array unmaps what it mapped
 * when it goes. cpu: the descriptor of an exportable host array: memory
 * that cannot shrink under the mapping, a memfd sealed with F_SEAL_SHRINK
 * (any other descriptor, a regular file or an unsealed memfd, could be cut
 * short by whoever else holds it, and every later read of the lost pages
 * would kill this process with SIGBUS); cuda: one from cuMemExportToShareableHandle (a Tack export or another
 * library's), mapped with cuMemImportFromShareableHandle, cuMemAddressReserve,
 * cuMemMap and cuMemSetAccess. `device` NULL means the device the record
 * names: its backend, and for CUDA the device whose UUID is device_uuid.
 * The array is shared from the start (the exporter may touch the memory at
 * any moment), and read-only when the descriptor allows reading only.
 * Errors: TACK_EVALUE for a NULL exported or out, a record that is
 * inconsistent (strings not terminated, a handle type other than
 * "posix_fd", a negative handle, size > allocation_size), a shape whose
 * bytes exceed exported->size, a device of another backend (or, for
 * CUDA, with another UUID) than the record's, or a descriptor that is not
 * such memory (closed, not sealed against shrinking, too small); TACK_ETYPE for a bad dtype; TACK_ERUNTIME
 * for a backend without import or a driver or system failure; TACK_ENOMEM.
 * On error *out is untouched and nothing stays mapped or open. */
TACK_API tack_status tack_array_import_memory(tack_device *device, const tack_exported_memory *exported, tack_dtype dtype,
                                              int ndim, const int64_t *shape, tack_array **out);

/* Passing an array to another process over a Unix-domain socket: one
 * message carrying a tack_ipc_header and, as SCM_RIGHTS ancillary data, the
 * array's exported descriptor. No pidfd or ptrace rights are needed, only
 * the connected socket (socketpair, or a listening socket's peer). Both
 * ends must be on the same host; the header is in the host's byte order.
 * SOCK_STREAM and SOCK_SEQPACKET sockets both work. */
#define TACK_IPC_MAGIC "TACKARR" /* with its NUL: 8 bytes */
#define TACK_IPC_VERSION 1u
#define TACK_IPC_READ_ONLY 1u /* flags: the sender's array is read-only */

/* The wire header, version 1 (608 bytes, no padding). Every byte not set
 * below is zero, shape entries past ndim included, so nothing of the
 * sender's memory travels. A receiver refuses a version it does not know
 * (newer or 0), a wrong magic, a header_size other than its version's, and
 * sizes that do not agree (size != shape's bytes, size > allocation_size). */
typedef struct tack_ipc_header {
    char magic[8];                /* offset 0: TACK_IPC_MAGIC */
    uint32_t version;             /* 8: TACK_IPC_VERSION */
    uint32_t header_size;         /* 12: sizeof(tack_ipc_header) of that version */
    uint8_t dtype_code;           /* 16: DLPack dtype code */
    uint8_t dtype_bits;           /* 17: DLPack dtype bits */
    uint16_t dtype_lanes;         /* 18: 1 */
    uint32_t flags;               /* 20: TACK_IPC_READ_ONLY */
    int32_t ndim;                 /* 24 */
    uint32_t reserved;            /* 28: 0 */
    uint64_t size;                /* 32: the array's bytes */
    uint64_t allocation_size;     /* 40: bytes behind the descriptor */
    char backend[16];             /* 48: "cpu", "cuda" */
    char handle_type[16];         /* 64: "posix_fd" */
    uint8_t device_uuid[16];      /* 80: the exporting device's UUID; zeros for cpu */
    int64_t shape[TACK_MAX_NDIM]; /* 96: ndim extents */
} tack_ipc_header;

/* How a send or receive waits for its socket (tack_array_send_wait,
 * tack_array_receive_wait). The time limit holds for the whole message, not
 * for each system call, and is measured on the monotonic clock, so a clock
 * step does not move it. */
typedef struct tack_ipc_wait {
    /* Milliseconds from the call for the whole message: < 0 waits as long
     * as it takes, 0 takes only what has already arrived (or fits). */
    int64_t timeout_ms;
    /* Optional: called on the waiting thread when a signal interrupts the
     * wait (EINTR). Nonzero ends the call (os_error EINTR); 0, or NULL
     * here, waits on for what is left of the time limit. A caller whose
     * signal handlers only set a flag checks the flag here. */
    int (*interrupted)(void *context);
    void *context;
    /* Out: the errno of the system condition that ended the call:
     * ETIMEDOUT when the time limit passed, EAGAIN when a limit of 0 found
     * nothing at all, EINTR when `interrupted` asked to stop, EMFILE or
     * ENFILE when the received descriptor was dropped for want of a free
     * one, or the socket's own error (ENOTCONN, EPIPE, ECONNRESET, ...).
     * 0 on success and for every other failure. */
    int os_error;
} tack_ipc_wait;

/* Exports the array's memory (as tack_array_export_memory: a plain CUDA
 * array is copied once into exportable memory; a host array must have been
 * allocated exportable) and sends its header and descriptor on the
 * connected Unix socket `socket_fd`, waiting as `wait` says for room to
 * write the whole message (NULL: as long as it takes, whether the socket
 * is blocking or not). The array's buffer keeps its descriptor; the
 * receiver gets a new one. Messages from two threads on one socket may
 * interleave: serialise them. Errors: TACK_EVALUE for a NULL array or a
 * socket_fd that is not a socket; the export's errors (TACK_ERUNTIME for a
 * host array that is not exportable); TACK_EIO when the send fails, at
 * once for a socket that is not connected (ENOTCONN; a listening socket
 * is not), and when the peer has gone (EPIPE: no SIGPIPE is raised);
 * TACK_ETIMEOUT when the time limit passes; TACK_ERUNTIME when
 * `interrupted` stops the wait; with the errno in wait->os_error. On error no descriptor is left open by the
 * call; a message cut short by an error (a time limit passed in the middle
 * of it) leaves a stream socket unusable. */
TACK_API tack_status tack_array_send_wait(int socket_fd, tack_array *array, tack_ipc_wait *wait);
/* tack_array_send_wait with no time limit (NULL wait). */
TACK_API tack_status tack_array_send(int socket_fd, tack_array *array);

/* Receives one message tack_array_send sent on `socket_fd` and maps it, as
 * tack_array_import_memory does, on `device` (NULL: the device the header
 * names), waiting as `wait` says for the whole message (NULL: as long as it
 * takes, also on a non-blocking socket). The descriptor received is closed
 * before returning, on success too (the array holds its own); it must be
 * host memory that cannot shrink (cpu: a memfd sealed with F_SEAL_SHRINK)
 * or the device's own export. Errors: TACK_EVALUE for a NULL out, a
 * socket_fd that is not a socket, a message that is not a version-1 header
 * with exactly one descriptor (a newer version, a bad magic, sizes that do
 * not agree, a message longer or shorter than the header) and the import's
 * value errors (a descriptor that is not sealed memory); TACK_EIO when
 * the peer closed the socket or the receive fails (EINVAL for a listening
 * socket); TACK_ETIMEOUT when the time limit passes; TACK_ERUNTIME when
 * `interrupted` stops the wait, when this process has no descriptor free for the one the message
 * carries (EMFILE), and for the import's runtime errors, with the errno in
 * wait->os_error where there is one; TACK_ENOMEM. A refused header of a
 * newer version is consumed whole, up to its stated header_size (at most
 * 1 MiB), so that a stream socket stays in step; a time limit that passes
 * in the middle of a message leaves a stream socket unusable. On error
 * *out is untouched and every descriptor received is closed. */
TACK_API tack_status tack_array_receive_wait(int socket_fd, tack_device *device, tack_ipc_wait *wait, tack_array **out);
/* tack_array_receive_wait with no time limit (NULL wait). */
TACK_API tack_status tack_array_receive(int socket_fd, tack_device *device, tack_array **out);

/* Live-object counter, for leak tests. */
TACK_API long tack_array_live_count(void);

#ifdef __cplusplus
}
#endif

#endif
