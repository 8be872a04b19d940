/* The kernel layer's internal declarations. Not installed. */
#ifndef TACK_KERNEL_INTERNAL_H
#define TACK_KERNEL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/internal.h"
#include "../core/queue.h"
#include "tack/kernel.h"

#define TACK_NAME_MAX 128

/* The entry point every backend's generated source defines. */
#define TACK_ENTRY_NAME "tack_kernel_entry"

struct tack_param {
    char name[TACK_NAME_MAX];
    tack_dtype dtype;
    int is_array;
    int writable;
};

struct tack_signature {
    char name[TACK_NAME_MAX];
    char index_name[TACK_NAME_MAX];
    int line; /* of the kernel's name in the user's source, from 1 */
    int nparams;
    struct tack_param params[TACK_KERNEL_MAX_PARAMS];
};

/* Parses the user's source (parse.c). Errors as tack_kernel_create. */
tack_status tack_signature_parse(const char *source, const char *name, struct tack_signature *out);

/* The generated source for a backend (generate.c), malloc'd. */
char *tack_generate_host(const struct tack_signature *sig, const char *source);
char *tack_generate_cuda(const struct tack_signature *sig, const char *source);
/* OpenCL C 2.0 for level_zero (its generic address space lets the user's
 * unqualified pointers take the entry's __global ones) and HIP for hip. */
char *tack_generate_opencl(const struct tack_signature *sig, const char *source);
char *tack_generate_hip(const struct tack_signature *sig, const char *source);

/* A loaded kernel on one device whose backend loads code itself. */
struct tack_loaded {
    tack_device *device; /* retained */
    void *handle;
    struct tack_loaded *next;
};

struct tack_ptx {
    char arch[32];
    char *text;
    size_t size;
    struct tack_ptx *next;
};

struct tack_kernel {
    atomic_long refs;
    char *source;
    struct tack_signature sig;
    int first_writable;
    size_t arg_sizes[TACK_KERNEL_MAX_PARAMS];

    /* Guards everything below but the atomics. */
    pthread_mutex_t lock;
    char *host_source;
    char *cuda_source;
    char *opencl_source;
    char *hip_source;
    void *dl_handle;
    _Atomic(tack_host_entry) host_entry;
    struct tack_ptx *ptx;
    struct tack_loaded *loaded;
    /* The last loaded kernel used, so that a warm launch takes no lock. */
    _Atomic(struct tack_loaded *) last;
    /* Measured cost of one index on the host, picoseconds; 0 = unknown. */
    atomic_uint_fast64_t host_cost_ps;
};

/* Compiles host source with the system compiler into the cache and loads it
 * (cache.c). On success *handle is a dlopen handle and *entry its entry.
 * Sets the thread's compile log on a compile error. */
tack_status tack_host_compile(const char *name, const char *source, void **handle, tack_host_entry *entry);

/* NVRTC to PTX, through the cache (cuda.c). *ptx is malloc'd, NUL-terminated;
 * *size counts the NUL. */
tack_status tack_cuda_compile(const char *name, const char *source, const char *arch, char **ptx, size_t *size);

/* OpenCL C to SPIR-V with libocloc for the Level Zero device whose PCI
 * device id is `device_id` (opencl.c), through the disk cache keyed by
 * source, options and device id. *spirv is malloc'd (*size bytes).
 * TACK_ERUNTIME when libocloc is missing (the message says what to install)
 * or the source does not compile (the message and the thread's compile log
 * carry ocloc's log). */
tack_status tack_opencl_compile(const char *name, const char *source, uint32_t device_id, unsigned char **spirv,
                                size_t *size);

/* HIP source to a code object with hipRTC for the calling thread's current
 * HIP device (hip.c). *code is malloc'd (*size bytes). TACK_ERUNTIME when
 * hipRTC is missing or the source does not compile (with hipRTC's log, also
 * in the thread's compile log). */
tack_status tack_hip_compile(const char *name, const char *source, char **code, size_t *size);

/* The cache directory (created), a hex digest and file helpers (cache.c). */
tack_status tack_cache_dir(char *out, size_t cap);
/* Reads a whole file; NULL if it cannot be read. *size excludes the NUL added. */
char *tack_read_file(const char *path, size_t *size);
/* Writes `data` to `path` through a temporary name and a rename, so that a
 * reader sees either no file or all of it. */
tack_status tack_write_file_atomic(const char *dir, const char *path, const void *data, size_t size);

/* Per-thread compile log (cache.c). */
void tack_compile_log_set(const char *text, size_t len);
/* A failed compilation: the message formatted from `fmt`, then the
 * compiler's log (`log_len` bytes, may be NULL), becomes the compile log and
 * the error message. Returns TACK_ERUNTIME. Out of memory, the compile log is
 * emptied and the message still carries both. */
tack_status tack_compile_failed(const char *log, size_t log_len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* SHA-256 (sha256.c). */
typedef struct tack_sha256 {
    uint32_t h[8];
    uint64_t len;
    unsigned char buf[64];
    size_t used;
} tack_sha256;
void tack_sha256_init(tack_sha256 *s);
void tack_sha256_update(tack_sha256 *s, const void *data, size_t len);
/* Hashes a string and its terminating NUL, so that fields cannot run together. */
void tack_sha256_field(tack_sha256 *s, const char *text);
void tack_sha256_hex(tack_sha256 *s, char out[65]);

/* The host thread pool (pool.c). Runs entry over [0, n), in parallel when
 * the measured cost says it pays; `cost_ps` is the kernel's estimate. */
void tack_pool_run(tack_host_entry entry, int64_t n, void *const *args, atomic_uint_fast64_t *cost_ps);
int tack_pool_threads(void);
/* The measured cost of one fan-out to polling (cold: sleeping) workers,
 * starting the pool if needed; 0 if there is no pool (one thread). */
uint64_t tack_pool_overhead_ns(int cold);

#endif
