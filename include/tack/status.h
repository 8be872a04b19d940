/* Status codes and the thread-local error message every fallible call leaves. */
#ifndef TACK_STATUS_H
#define TACK_STATUS_H

#include "tack/version.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tack_status {
    TACK_OK = 0,
    TACK_EVALUE,   /* a value is wrong (Python: ValueError) */
    TACK_ETYPE,    /* a type is wrong (Python: TypeError) */
    TACK_ERUNTIME, /* the operation cannot be done here (Python: RuntimeError) */
    TACK_EBUFFER,  /* an export cannot be made as asked (Python: BufferError) */
    TACK_ENOMEM,   /* out of memory (Python: MemoryError) */
    /* Finer kinds of failure, for C code that acts on them (each maps to
     * the Python exception TACK_ERUNTIME would, but a timeout): */
    TACK_ENODEVICE, /* no such device, or its driver is missing: try another backend (Python: RuntimeError) */
    TACK_ECOMPILE,  /* a kernel does not compile; tack_kernel_compile_log() has the compiler's log
                     * (Python: RuntimeError) */
    TACK_ETIMEOUT,  /* a wait ran out of its time limit (Python: TimeoutError) */
    TACK_EIO,       /* a read or write failed, or the peer closed the connection or broke off
                     * (Python: RuntimeError; OSError with the errno where a socket call failed) */
    TACK_EINDEX,    /* a checked kernel launch indexed an array out of its bounds (Python: IndexError) */
} tack_status;

/* The message left by the last call on this thread that returned a
 * tack_status: what was wrong if it failed, "" if it succeeded. Calls that
 * cannot fail (accessors, retain and release, names, counts) leave it as
 * it was, so that cleanup after a failure keeps the failure's message.
 * It says what was wrong and what to do; from an array, buffer, device,
 * dtype, DLPack or cross-process call it begins with the name of the call
 * the caller made: "tack_array_reshape: cannot reshape ...".
 * UTF-8 of any length (kept on the heap, freed when the thread exits).
 * Valid until the next Tack call on the same thread that returns a
 * tack_status. Never fails. */
TACK_API const char *tack_last_error(void);

/* Leaves `message` as this thread's tack_last_error() and returns
 * `status`, for code built on libtack that fails where no Tack call failed
 * and whose callers read Tack's message: the <tack/python.h> wrappers when
 * no Python interpreter is running, where no Python exception can be set.
 * A NULL message leaves "". Never fails: short of memory, the message is
 * one saying so. */
TACK_API tack_status tack_error_report(tack_status status, const char *message);

/* The status' name, e.g. "TACK_EVALUE". Never fails. */
TACK_API const char *tack_status_name(tack_status status);

#ifdef __cplusplus
}
#endif

#endif
