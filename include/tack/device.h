/* Devices: a backend (cpu, cuda, hip, level_zero) plus its options. */
#ifndef TACK_DEVICE_H
#define TACK_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "tack/dlpack.h"
#include "tack/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tack_device tack_device;

/* One option to tack_device_open. A dictionary option such as Level Zero's
 * external_context={"driver": d, "device": v, "context": c} is given as one
 * entry per field, all with the same name. A scalar option has field NULL. */
typedef struct tack_option {
    const char *name;
    const char *field;
    uint64_t value;
} tack_option;

/* Opens the device named `name`: a backend name ("cpu", "cuda", "hip",
 * "level_zero"), optionally followed by ":<ordinal>" ("cuda:1").
 * Without options, returns the process-wide device for that backend and
 * ordinal, retained (the same object on every call). With options, returns a
 * new device made with them. Every option is checked against the backend's
 * declared option names before anything is constructed.
 * On error returns TACK_EVALUE (unknown backend, malformed name, unknown
 * option, bad option value), TACK_ENODEVICE (no driver or no such device)
 * or TACK_ERUNTIME (a driver failure),
 * sets the message, and leaves *out untouched; nothing is constructed. */
TACK_API tack_status tack_device_open(const char *name, const tack_option *options, size_t n_options,
                                      tack_device **out);

/* The process-wide device a backend uses for a DLPack device, retained; used
 * by imports when neither device= nor the default device can wrap a tensor.
 * Errors as tack_device_open. */
TACK_API tack_status tack_device_for_dlpack(DLDevice dl_device, tack_device **out);

/* Reference counting. retain returns its argument; release frees the device
 * when the count reaches zero. Both accept NULL. Thread-safe. A
 * process-wide device (opened without options) is never freed, but its
 * count is kept all the same: a release after the caller's last is
 * reported on stderr naming the device, and aborts in builds with
 * assertions; otherwise it changes nothing. A device made with options
 * is caught as an array is (tack_array_release). */
TACK_API tack_device *tack_device_retain(tack_device *device);
TACK_API void tack_device_release(tack_device *device);

/* Backend name ("cpu"). Never fails. */
TACK_API const char *tack_device_backend(const tack_device *device);
/* Ordinal within the backend (0 for cpu). Never fails. */
TACK_API int tack_device_ordinal(const tack_device *device);
/* A name that tack_device_open accepts: "cpu", "cuda:0". Never fails. */
TACK_API const char *tack_device_name(const tack_device *device);
/* The DLPack device this device's arrays are exported as. Never fails. */
TACK_API DLDevice tack_device_dl_device(const tack_device *device);
/* An identifier of the device's memory domain: arrays from two domains never
 * meet in one launch. Never fails. */
TACK_API uint64_t tack_device_memory_domain(const tack_device *device);
/* 1 when the device adopted a context from another library. Never fails. */
TACK_API int tack_device_shares_external_context(const tack_device *device);
/* The native handle of the context the device allocates in (CUcontext,
 * ze_context_handle_t), or 0 where the backend has none. Never fails. */
TACK_API uint64_t tack_device_context_handle(const tack_device *device);
/* The native handle of the stream Tack's work on the device runs on
 * (CUstream, hipStream_t), or 0 where the backend has no queue. Never fails. */
TACK_API uint64_t tack_device_stream_handle(const tack_device *device);
/* Orders Tack's work on the device after the work queued so far on another
 * library's stream (1: the legacy default stream, 2: the per-thread default
 * stream, else a native handle such as a CUstream), without waiting on the
 * host: what a consumer of the CUDA Array Interface owes its producer's
 * stream. Backends without a queue have nothing to wait for.
 * On error returns TACK_EVALUE (0, or a handle the driver refuses as a
 * stream) or TACK_ERUNTIME (a driver failure); nothing is queued. A handle
 * that is no live stream is the caller's error, as in CUDA: the driver may
 * crash on it instead of refusing it. */
TACK_API tack_status tack_device_wait_stream(tack_device *device, uint64_t stream);
/* 1 when this device's backend can wrap memory of DLPack device type `type`
 * with that device id. Never fails. */
TACK_API int tack_device_can_wrap(const tack_device *device, DLDevice dl_device);

/* What memory `address` is, as the drivers report it: "cuda", "cuda_pinned",
 * "cuda_managed", "hip", "hip_pinned", "hip_managed", "level_zero" (USM
 * device), "level_zero_shared", "level_zero_host", the arrays "cuda_array"
 * and "hip_array", or "cpu" when no driver knows it (ordinary host
 * memory). Each GPU backend is asked in turn through its first device,
 * which this opens (CUDA's primary context, Tack's Level Zero context); a
 * backend whose driver or device is missing owns no memory and is skipped.
 * *out is a static string.
 * On error returns TACK_EVALUE (out is NULL) or TACK_ERUNTIME (a driver's
 * query failed: the message names it), sets the message and leaves *out
 * untouched. */
TACK_API tack_status tack_memory_space(uint64_t address, const char **out);

/* Checks options for the device `name` as tack_device_open checks them
 * first, opening nothing: the backend named, and every option's name among
 * those it accepts. For a caller that converts option values of its own
 * (a binding's keyword arguments) and would otherwise refuse a misspelled
 * option by its value. TACK_EVALUE for an unknown backend or ordinal
 * syntax, an option the backend does not accept (the message lists those
 * it does), or options NULL with n_options > 0. */
TACK_API tack_status tack_device_check_options(const char *name, const tack_option *options, size_t n_options);

/* The option names a backend accepts, NULL-terminated; NULL for an unknown
 * backend name. Never fails otherwise. */
TACK_API const char *const *tack_backend_options(const char *backend);

/* Waits until every launch queued on the device is complete.
 * On error returns TACK_ERUNTIME with the driver's message. */
TACK_API tack_status tack_device_synchronize(tack_device *device);

#ifdef __cplusplus
}
#endif

#endif
