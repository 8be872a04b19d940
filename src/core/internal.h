/* Tack's internal structures and the backend table. Not installed. */
#ifndef TACK_INTERNAL_H
#define TACK_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "tack/tack.h"

#ifdef TACK_TEST_HOOKS
/* Test builds (meson -Dtest_hooks=true): every allocation in libtack goes
 * through the failing allocator (test_hooks.c), which a test tells to fail
 * the n-th one, so that every out-of-memory path runs. The C library's
 * headers come first, so that their declarations keep their names. */
#include <stdlib.h>
#include <string.h>

#include "test_hooks.h"
#undef malloc
#undef calloc
#undef realloc
#undef strdup
#define malloc tack_test_malloc
#define calloc tack_test_calloc
#define realloc tack_test_realloc
#define strdup tack_test_strdup
#endif

/* Sets the thread's message and returns `status`. */
tack_status tack_error_set(tack_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Empties the thread's message: for a failure recovered from, whose
 * message must not outlive it. */
void tack_error_clear(void);

/* The public function the caller called, named at the head of every
 * message set while it runs ("tack_array_reshape: cannot reshape ..."), so
 * that no message site has to spell its caller and none can name the wrong
 * one. TACK_PUBLIC_CALL() is the first line of each public function that can
 * fail, and clears the thread's message: a call that succeeds leaves ""
 * (so a failure a call recovers from inside must not leave its message
 * either). The outermost call wins: a public function that calls another (send
 * calls send_wait) reports the one the caller called. The name is cleared
 * when the function's scope ends, whichever return it leaves by (the
 * compiler's cleanup, not a line before each return), so a message set
 * outside any public call carries no stale name. A message whose text
 * already begins with the name is not prefixed twice. */
const char *tack_call_enter(const char *name);
void tack_call_leave(const char *const *outer);
#if defined(__GNUC__)
#define TACK_PUBLIC_CALL()                                                                                         \
    const char *tack_outer_call_ __attribute__((cleanup(tack_call_leave), unused)) = tack_call_enter(__func__); \
    TACK_ONE_COPY_CHECK()
#else
/* Without a scope-exit hook the name could outlive the call: no name. */
#define TACK_PUBLIC_CALL() TACK_ONE_COPY_CHECK()
#endif

/* One Tack per process (src/core/version.c): a copy of libtack loaded
 * after another one refuses every fallible call, TACK_ERUNTIME with a
 * message naming both files. Set once, at load, before any call; each
 * call pays one load and a branch that is never taken in a process with
 * one copy. */
#if defined(__GNUC__)
/* Hidden, so that each call reads it directly rather than through the GOT,
 * and the refusal out of line, so that the check is one compare. */
extern int tack_copy_refused __attribute__((visibility("hidden")));
tack_status tack_copy_refuse(void) __attribute__((cold, noinline));
#else
extern int tack_copy_refused;
tack_status tack_copy_refuse(void);
#endif
/* For retain and release, which cannot fail: a refused copy made no handle,
 * so any handle it is given is the other copy's, whose counts and records
 * are not its own to change. Nothing is done (the copy said so at load). */
#define TACK_ONE_COPY_SKIP(result) if (__builtin_expect(tack_copy_refused, 0)) return result
#if defined(__GNUC__)
#define TACK_ONE_COPY_CHECK()                                                                                      \
    if (__builtin_expect(tack_copy_refused, 0))                                                                    \
    return tack_copy_refuse()
#else
#define TACK_ONE_COPY_CHECK()                                                                                      \
    if (tack_copy_refused)                                                                                         \
    return tack_copy_refuse()
#endif

/* Counters (src/core/counters.c), per thread, summed on read: live
 * objects, and three counts of CPU runs (tack_kernel_atomic_runs). */
enum tack_count_kind {
    TACK_COUNT_ARRAYS,
    TACK_COUNT_BUFFERS,
    TACK_COUNT_EXPORTS,
    TACK_COUNT_PLAIN_RUNS,
    TACK_COUNT_PLAIN_REFUSED,
    TACK_COUNT_LOCKED_WAITS,
    TACK_COUNT_KINDS
};
void tack_count_add(enum tack_count_kind kind, long delta);
long tack_count_total(enum tack_count_kind kind);

/* The free of a released handle's record (an array, buffer, device or
 * kernel, its count already TACK_REFS_FREED): the record is held back, not
 * returned to malloc, until TACK_QUARANTINE more records, or
 * TACK_QUARANTINE_BYTES of them, have been freed on this thread
 * (src/core/counters.c). While it is held its address is given
 * to no new object, so a release or a use through a stale pointer finds
 * TACK_REFS_FREED and is reported (tack_misuse_released) rather than
 * freeing or writing whatever malloc put there next. Built with
 * AddressSanitizer, a held record is poisoned, so that any other read of
 * it is reported as ASan reports freed memory. tack_count_free also counts
 * one object of `kind` gone, in the same visit to the thread's record. */
#define TACK_QUARANTINE 128
#define TACK_QUARANTINE_BYTES ((size_t)128 * 1024)
void tack_handle_free(void *record);
void tack_count_free(enum tack_count_kind kind, void *record);

/* Reference-count helpers that catch a count going below zero (a double
 * release), which would otherwise be a use after free far from its cause. */
void tack_refcount_underflow(const char *what);

/* The count of an array or buffer that was freed, written over its count
 * just before the free. A release or a use after the last release then
 * finds a count no live object has, rather than the 1 the last release
 * left, for as long as the memory is not reused. The count sits past the
 * first 16 bytes of its record, which the allocators overwrite on a free
 * (glibc's tcache links, AddressSanitizer's record of the free). */
#define TACK_REFS_FREED (-0x7ac0deadL)

/* Reports a call on an array or buffer that was already released (its
 * count is TACK_REFS_FREED or below one), naming the call and the object:
 * aborts in builds with assertions (NDEBUG undefined); otherwise writes
 * the message to stderr and returns, and the caller does nothing more with
 * the object (src/core/misuse.c). */
void tack_misuse_released(const char *call, const char *what, const void *object);

/* The count, read without AddressSanitizer's check: on a released object
 * the read is the misuse being diagnosed, and tack_misuse_released says
 * more about it than a report of freed memory would. */
#if defined(__GNUC__)
__attribute__((no_sanitize_address))
#endif
static inline long tack_ref_peek(const atomic_long *refs)
{
    return atomic_load_explicit(refs, memory_order_acquire);
}

/* Drops one reference and returns how many are left, or -1, the count
 * untouched, when there was none to drop (a release after the last). The
 * last reference needs no locked decrement: whoever holds the only one is
 * the only thread that can reach the object, so no other can take or drop
 * one meanwhile. That saves a locked instruction on every short-lived
 * array and buffer. */
static inline long tack_ref_drop(atomic_long *refs)
{
    long n = tack_ref_peek(refs);
    if (n == 1)
        return 0;
    if (n < 1)
        return -1;
    return atomic_fetch_sub_explicit(refs, 1, memory_order_acq_rel) - 1;
}

/* For a release call: drops one reference and says whether it was the
 * last, when the caller frees the object. A release after the last is
 * reported (tack_misuse_released, naming `call` and `what`) and is not. */
static inline int tack_ref_release_last(atomic_long *refs, const char *call, const char *what, const void *object)
{
    long left = tack_ref_drop(refs);
    if (left < 0)
        tack_misuse_released(call, what, object);
    return left == 0;
}

/* TACK_EVALUE for a call (`call`, a public function's name) on a handle
 * already released, after tack_misuse_released has reported it: going on
 * would read or write a record that is no longer the object's. TACK_OK
 * for a live one: one load, no call. */
tack_status tack_misuse_refuse(const char *call, const char *what, const void *object);
static inline tack_status tack_refuse_released(const atomic_long *refs, const char *call, const char *what,
                                               const void *object)
{
    return tack_ref_peek(refs) >= 1 ? TACK_OK : tack_misuse_refuse(call, what, object);
}

/* The kernel toolchain's types: src/core/toolchain.h. */
struct tack_dialect;
struct tack_compile;
struct tack_kernel_code;
struct tack_launch;

/*
 * One table per backend (src/backend/<name>/<name>.c), pointing at a memory
 * table, where the backend queues work a queue table, and where it runs
 * kernels a toolchain table, each defined in the backend's file of that
 * topic. Slots marked "optional" may be NULL; the comment gives the
 * default, which the wrappers in src/core/backend.c apply: the core and
 * the kernel layer call a slot only through them.
 */

/* The memory a backend's devices allocate, wrap, copy and exchange. */
struct tack_backend_memory {
    /* Zeroed memory of at least `nbytes` (> 0). *alloc_ctx is the backend's
     * record, handed back to free. */
    tack_status (*alloc)(tack_device *device, size_t nbytes, int exportable, void **data, void **alloc_ctx);
    void (*free)(tack_device *device, void *data, void *alloc_ctx);

    /* optional: every address accepted. TACK_EVALUE for memory of the wrong
     * kind, TACK_ERUNTIME for a failed query where the backend treats that
     * as a fault. */
    tack_status (*check_pointer)(tack_device *device, uint64_t address);

    /* optional: memcpy (the host addresses the memory). */
    tack_status (*copy_to_host)(tack_device *device, void *dst, const void *src, size_t nbytes);
    /* optional: memcpy (the host addresses the memory). */
    tack_status (*copy_from_host)(tack_device *device, void *dst, const void *src, size_t nbytes);

    /* optional: TACK_ERUNTIME "Backend <name> does not support memory export". */
    tack_status (*export_memory)(tack_buffer *buffer, tack_exported_memory *out);
    /* optional: nothing; releases what export_memory kept (descriptors). */
    void (*release_export)(tack_buffer *buffer);
    /* optional: TACK_ERUNTIME "Backend <name> does not support memory import".
     * Maps the allocation an export describes (made in this or another
     * process; exported->handle stays the caller's) as alloc would: *data
     * and *alloc_ctx go to free. Clears *writable when the handle allows
     * reading only; sets *foreign along with TACK_EVALUE when the memory
     * belongs to another device of this backend (its device_uuid), so that
     * the caller may try the next one. On error nothing is kept. */
    tack_status (*import_memory)(tack_device *device, const tack_exported_memory *exported, void **data,
                                 void **alloc_ctx, int *writable, int *foreign);

    /* optional: the backend has no driver to ask (the cpu); its devices are
     * not opened for tack_memory_space. Sets *out to what the driver
     * reports `address` to be, a static name of tack_memory_space's
     * ("cuda", "cuda_pinned", ...), or to NULL when the driver does not
     * know the address. TACK_ERUNTIME for a query that failed as a fault;
     * *out is then untouched. */
    tack_status (*memory_space)(tack_device *device, uint64_t address, const char **out);
};

/* The queue a backend's launches and copies run on. A backend without one
 * (its launches complete on return) has no queue table. */
struct tack_backend_queue {
    /* Waits for everything queued on the device. */
    tack_status (*synchronize)(tack_device *device);
    /* optional: 0. The native handle of the context the device allocates
     * in (a CUcontext, a ze_context_handle_t), for guards that compare it
     * with another library's. */
    uint64_t (*context_handle)(const tack_device *device);
    /* optional: 0, no stream. The native handle of the stream Tack's
     * launches and copies run on (a CUstream, a hipStream_t), passed to a
     * DLPack producer as stream= so its pending writes come before Tack's
     * reads. */
    uint64_t (*stream_handle)(const tack_device *device);
    /* optional: wait on the host (share()). Orders `consumer_stream` (a
     * stream value of the array API's __dlpack__: 1 legacy default stream,
     * 2 per-thread default stream, else a native stream handle; never -1)
     * after the launches queued on `buffer`, without waiting on the host.
     * TACK_EVALUE for a value that is no stream of the buffer's device,
     * TACK_ERUNTIME for a driver failure; the core sets the shared mark
     * only after success. */
    tack_status (*order_stream)(tack_buffer *buffer, uint64_t consumer_stream);
    /* optional: nothing to wait for. Makes Tack's stream wait, on the
     * device, for the work queued so far on a producer's stream (1 legacy
     * default, 2 per-thread default, else a native handle), so that memory
     * the producer hands over is complete before Tack's next use of it.
     * TACK_EVALUE for a value that is no stream, TACK_ERUNTIME for a
     * driver failure. */
    tack_status (*wait_stream)(tack_device *device, uint64_t producer_stream);
};

/* The kernel toolchain of a backend that runs kernels (src/core/toolchain.h
 * says how the kernel layer uses it), defined in the backend's toolchain
 * file. The dialect, kernel_compile, kernel_load and kernel_launch are
 * required. */
struct tack_backend_toolchain {
    /* The backend's dialect: prelude, entry generator, what its kernels
     * cannot take. */
    const struct tack_dialect *dialect;
    /* optional: not kept; code is compiled again for each device that
     * loads it. Sets job->kind and writes to job->key, as text, what
     * besides the source decides the code kernel_compile would make for
     * `job`: the kernel layer keeps code on disk and in memory under a
     * hash of both, and compiles only code it has not kept. Validates the
     * target first (TACK_EVALUE), then loads the compiler: otherwise errors
     * as kernel_compile. */
    tack_status (*kernel_key)(struct tack_compile *job);
    /* Compiles job->source into out->kind, out->data (malloc'd, the kernel layer's
     * from then on) and out->size, of the kind kernel_key chose when there
     * is one; file code (tack_code_kind_is_file) into the store's file
     * job->output instead, which the kernel layer then loads
     * (out->object). On error nothing is kept:
     * TACK_ERUNTIME for a missing compiler (the message says what to
     * install) or for source that does not compile (out->failed set, the
     * compiler's log in out->log), TACK_EVALUE for a target it has no such
     * name for, TACK_ENOMEM. */
    tack_status (*kernel_compile)(const struct tack_compile *job, struct tack_kernel_code *out);
    /* Makes a launchable kernel on `device` from code compiled for this
     * backend. On error nothing is kept: TACK_ERUNTIME for code of another
     * kind or a driver failure (out->failed and out->log set when the
     * driver cannot build the code). */
    tack_status (*kernel_load)(tack_device *device, struct tack_kernel_code *code, void **kernel);
    /* Runs `kernel` over the launch's domain (src/core/toolchain.h):
     * enqueued on the device's stream, without waiting, when the backend
     * has a queue table; complete on return when it has none. The argument
     * values are read before returning. */
    tack_status (*kernel_launch)(tack_device *device, void *kernel, const struct tack_launch *launch);
    /* optional: UINT64_MAX, not known. How long a launch of `kernel` over
     * n > 0 indices is expected to take, in nanoseconds, from what the
     * backend measured of its earlier launches; UINT64_MAX before any. The
     * kernel layer calls a launch's hooks around a launch expected to take
     * longer than they say, and around every launch of a backend without
     * it. */
    uint64_t (*kernel_expected_ns)(void *kernel, int64_t n);
    /* optional: nothing to free. Frees what kernel_load made; the kernel
     * layer has waited for the launches of it. */
    void (*kernel_unload)(tack_device *device, void *kernel);
};

/* The backend itself: what it is called and wraps, how a device of it is
 * opened, its memory and queue, and its kernel toolchain. */
struct tack_backend_ops {
    const char *name;
    /* DLPack device type exports are labelled with. */
    DLDeviceType dl_type;
    /* DLPack device types this backend wraps, terminated by 0. */
    const DLDeviceType *wraps;
    /* Option names accepted by open, NULL-terminated; optional: none. */
    const char *const *options;
    /* optional: the backend needs no driver and has one device, named as
     * the backend. For tack_backend_describe, fills out->driver (where the
     * loader found it and its version, or why not), out->device_count and
     * out->devices, and out->compiler when the backend compiles its own
     * kernels (its toolchain's kernel_compile): loads the libraries as open and a build
     * would, creates no context and allocates nothing. What is missing is
     * written down; never fails. */
    void (*describe)(tack_backend_report *out);

    /* Makes the backend state for `device` (ordinal and options already
     * validated by name). Sets device->impl, device->domain and
     * device->external_context. On error nothing is kept. */
    tack_status (*open)(tack_device *device, const tack_option *options, size_t n_options);
    /* optional: nothing to do. Must not destroy objects Tack did not create. */
    void (*close)(tack_device *device);

    /* The device's memory (src/core/backend.h wraps its slots). */
    const struct tack_backend_memory *memory;
    /* optional: no queue; launches complete on return, nothing to wait
     * for, no stream or context handle to give. */
    const struct tack_backend_queue *queue;

    /* optional: the backend runs no kernels; a build or launch on it is
     * TACK_ERUNTIME. */
    const struct tack_backend_toolchain *toolchain;
};

struct tack_device {
    const struct tack_backend_ops *ops;
    void *impl;
    /* Past the first 16 bytes: see TACK_REFS_FREED. */
    atomic_long refs;
    /* A process-wide device: never freed. Its count is the registry's one
     * reference and the callers' (so that a release after the caller's
     * last is caught), not the buffers', which tack_device_hold skips: a
     * buffer's reference sits on every allocation's path. */
    int immortal;
    int ordinal;
    int external_context;
    uint64_t domain;
    /* Launches submitted on this device's queue, and how many of them are
     * known complete; a buffer records the sequence number of its last. */
    atomic_uint_fast64_t submitted;
    atomic_uint_fast64_t completed;
    char name[40];
};

/* What a buffer's memory is and what its last reference does with it: one
 * table per kind (src/core/buffer.c), chosen when the buffer is made. Memory
 * someone else owns is a table without free, as ggml's borrowed buffers are,
 * so that no path asks a flag whose memory it is. */
struct tack_buffer_kind {
    /* tack_buffer_is_owned: Tack made the memory (allocated or mapped). */
    int owned;
    /* Shared from the start: another party may touch the memory at any
     * moment with no Tack call in between (see tack_buffer_share). */
    int shared;
    /* No other process can write the memory: Tack allocated it, and not
     * as exportable (a memory file another process may map). Memory made
     * elsewhere may be anyone's mapping, so it is not. */
    int process_private;
    /* optional: nothing, the memory is someone else's to free. Undoes what
     * made the memory, exactly once, when the last reference goes. */
    void (*free)(tack_buffer *buffer);
};

struct tack_buffer {
    const struct tack_buffer_kind *kind;
    tack_device *device;
    void *data;
    /* Past the first 16 bytes: see TACK_REFS_FREED. */
    atomic_long refs;
    size_t nbytes;
    atomic_int shared;
    /* Sequence number of the last queued launch that used this buffer. */
    atomic_uint_fast64_t last_launch;
    /* The backend's record of memory it made (allocated or mapped), handed
     * back to its free; NULL for memory the backend did not make. */
    void *alloc_ctx;
    /* The deleter of imported memory and its context; NULL otherwise. */
    tack_release_fn release;
    void *release_ctx;
    /* Backend's export record (an exported descriptor, a lazily made
     * exportable copy); released by the memory table's release_export. */
    void *export_ctx;
};

struct tack_array {
    /* Made in its buffer's allocation: freeing it is the buffer's job. */
    int in_buffer;
    tack_buffer *buffer;
    void *data;
    /* Past the first 16 bytes: see TACK_REFS_FREED. */
    atomic_long refs;
    tack_dtype dtype;
    int ndim;
    int writable;
    size_t size;
    size_t nbytes;
    /* ndim entries: records are sized to their shape. */
    int64_t shape[];
};

/* A buffer's reference to its device, and its drop: the count of a
 * process-wide device, which is never freed, is left alone (a locked
 * instruction on one shared line for every allocation and free). */
static inline tack_device *tack_device_hold(tack_device *d)
{
    if (!d->immortal)
        atomic_fetch_add_explicit(&d->refs, 1, memory_order_relaxed);
    return d;
}
static inline void tack_device_drop(tack_device *d)
{
    if (!d->immortal)
        tack_device_release(d);
}

/* Whether the buffer's memory is reachable only through this buffer: Tack
 * allocated it (process_private: not exportable, not mapped, not wrapped
 * or imported) and never handed it out (DLPack, the array interfaces,
 * export_memory and share() all set the shared mark). Only then may a
 * launch assume no other argument is a second view of it (restrict) and
 * that nothing outside this process's launches updates it (plain
 * atomics). Once false it stays false: the mark is never cleared. */
static inline int tack_buffer_is_private(const tack_buffer *b)
{
    return b->kind->process_private && !atomic_load_explicit(&b->shared, memory_order_acquire);
}

/* The registered backends, NULL-terminated. */
extern const struct tack_backend_ops *const tack_backends[];
const struct tack_backend_ops *tack_backend_find(const char *name, size_t len);
/* For a backend's describe: the component `name`, found at `path` with
 * `version` when `loaded` is TACK_OK, else missing for the reason the
 * failed load left in the thread's message. */
void tack_report_component(tack_component_report *c, const char *name, tack_status loaded, const char *path,
                           const char *version);
/* The backends' names for messages: "'cpu', 'cuda', ..." (truncated to cap). */
void tack_backend_list(char *buf, size_t cap);

/* The one rule on a number of dimensions, for every shape Tack is given:
 * 0 to TACK_MAX_NDIM, and a shape array unless there are none: the first
 * step of tack_shape_check. Inline, as it runs on every import; the message
 * is made out of line. */
tack_status tack_ndim_refuse(int ndim);
static inline tack_status tack_ndim_check(int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > TACK_MAX_NDIM || (ndim > 0 && !shape))
        return tack_ndim_refuse(ndim);
    return TACK_OK;
}
/* The one check of an array's layout, whichever call or protocol gave it:
 * TACK_ETYPE if `dtype` is not a Tack dtype; TACK_EVALUE for a number of
 * dimensions tack_ndim_check refuses, a negative extent, or an element
 * count or byte size over INT64_MAX. Sets *size (elements) and *nbytes;
 * on failure they are untouched. tack_ndim_check alone is for the one
 * caller that reads a shape before it is one (reshape's -1). */
tack_status tack_shape_check(tack_dtype dtype, int ndim, const int64_t *shape, size_t *size, size_t *nbytes);
/* The alignment a dtype's elements need in memory Tack did not allocate: a
 * power of two, the size of a complex number's parts, otherwise the
 * element's size; 0 for a value outside the enum. Never fails. */
size_t tack_dtype_alignment(tack_dtype dtype);

/* A buffer over memory that is already there (check_pointer applied),
 * shared from the start, with `extra` bytes reserved after its record:
 * wrapped when `release` is NULL, else imported (release(context) runs
 * exactly once, when the buffer goes). On error nothing is kept and
 * release is not called. */
tack_status tack_buffer_wrap_extra(tack_device *device, void *data, size_t nbytes, tack_release_fn release,
                                   void *context, size_t extra, tack_buffer **out);

/* A buffer over memory the backend mapped (its import_memory), shared from
 * the start: `alloc_ctx` is the backend's record, and its free undoes the
 * mapping when the buffer goes. On error nothing is kept and the mapping is
 * still the caller's to undo. */
tack_status tack_buffer_map(tack_device *device, void *data, size_t nbytes, void *alloc_ctx, tack_buffer **out);

/* A wrapped or imported buffer (as tack_buffer_wrap_extra) and an array
 * over all of it, made in one allocation: the common shape of
 * array_from_ptr and of every DLPack import. The array holds the only
 * reference to the buffer. On error nothing is kept and release is not
 * called. */
tack_status tack_array_wrap_memory(tack_device *device, void *data, tack_dtype dtype, int ndim, const int64_t *shape,
                                   size_t size, size_t nbytes, int writable, tack_release_fn release, void *context,
                                   tack_array **out);

/* An array over all of `buffer`, taking over the caller's reference (also
 * on failure). The shape must already be checked: size and nbytes are its. */
tack_status tack_array_adopt_buffer(tack_buffer *buffer, tack_dtype dtype, int ndim, const int64_t *shape,
                                    size_t size, size_t nbytes, int writable, tack_array **out);

/* An array over the memory an export record `e` describes (import_memory.c),
 * on `device`, or without one on the device of the record's backend whose
 * UUID it names; read-only when `read_only` or the handle allows reading
 * only. e->handle stays the caller's. TACK_EVALUE for a bad shape, record
 * or device, else errors as the backend's import_memory; nothing kept. */
tack_status tack_exported_import(tack_device *device, const tack_exported_memory *e, tack_dtype dtype, int ndim,
                                 const int64_t *shape, int read_only, tack_array **out);

/* Waits for the queued launches that use `buffer`. */
tack_status tack_buffer_wait(tack_buffer *buffer);

/* The one clock for deadlines and spin limits: CLOCK_MONOTONIC in ns, which
 * a change of the wall clock does not move. Inline: the thread pool reads
 * it while it spins. Never fails (the clock exists on every Linux). */
static inline int64_t tack_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
