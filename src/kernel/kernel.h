/* The kernel layer's internal declarations. Not installed. It knows
 * backends only through their tables (src/core/toolchain.h). */
#ifndef TACK_KERNEL_INTERNAL_H
#define TACK_KERNEL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/internal.h"
#include "../core/toolchain.h"
#include "tack/kernel.h"

/* Parses the user's source (parse.c). Errors as tack_kernel_create. */
tack_status tack_signature_parse(const char *source, const char *name, struct tack_signature *out);

/* The source `dialect` makes of the user's (generate.c), malloc'd; NULL
 * out of memory. */
char *tack_generate(const struct tack_dialect *dialect, const struct tack_signature *sig, const char *source);

/* Source generated for one dialect. */
struct tack_generated {
    const struct tack_dialect *dialect;
    char *text;
    struct tack_generated *next;
};

/* Code compiled from one dialect's source by one compile, kept for the
 * kernel's life. */
struct tack_built {
    const struct tack_dialect *dialect;
    tack_status (*compile)(const struct tack_compile *, struct tack_kernel_code *);
    /* What else decided the code (the backend's kernel_key); NULL when the
     * backend keeps none, and then the code serves only the load it was
     * compiled for. */
    char *key;
    struct tack_kernel_code code;
    void *handle; /* host code: the shared object its entry lies in */
    struct tack_built *next;
};

/* A kernel loaded on one device. */
struct tack_loaded {
    tack_device *device; /* retained */
    void *handle;
    char target[96]; /* what the loaded code is (tack_kernel_target) */
    struct tack_loaded *next;
};

struct tack_kernel {
    atomic_long refs;
    char *source;
    struct tack_signature sig;
    int first_writable;
    int uses_f64;
    uint32_t dtypes; /* 1u << d for each dtype d of a parameter */
    int uses_atomics; /* the source names tack_atomic_ */
    size_t arg_sizes[TACK_KERNEL_MAX_PARAMS];
    /* The array parameters, those the kernel may store through first
     * (nwritten of narrays), so that a launch's overlap check compares
     * each pair that matters once and looks at no scalar. */
    int narrays, nwritten;
    unsigned char arrays[TACK_KERNEL_MAX_PARAMS];

    /* Guards everything below but the atomic. */
    pthread_mutex_t lock;
    struct tack_generated *generated;
    struct tack_built *built;
    struct tack_loaded *loaded;
    /* The last loaded kernel used, so that a warm launch takes no lock. */
    _Atomic(struct tack_loaded *) last;
};

/* Compiles host source with the system C compiler into the cache and loads it
 * (cache.c). On success *handle is a dlopen handle and code's host,
 * host_restrict and host_plain its entries (host_restrict is host where
 * the object has no restrict variant; host_plain NULL where it has no
 * plain one). Sets the thread's compile log on a compile error. */
tack_status tack_host_compile(const char *name, const char *source, void **handle, struct tack_kernel_code *code);

/* The cache directory, created when missing (cache.c). TACK_ERUNTIME when
 * it cannot be made or is not private (owned by another user, writable by
 * others, or below a directory through which others could replace it), or
 * TACK_CACHE_MAX is not a size; *unsafe says which: an unusable directory
 * only costs a compile, an unsafe one (or a bad bound) is the user's to
 * fix. */
tack_status tack_cache_dir(char *out, size_t cap, int *unsafe);
/* A cached file's contents, checked: NULL when it is missing, not this
 * user's to trust (a link, another user's, writable by others), not whole
 * (its size and SHA-256 trailer do not match) or made for another key
 * (the trailer names the file it was written as). Read through a
 * descriptor of its directory, opened and checked again here. malloc'd
 * with a NUL added; *size excludes it. */
char *tack_cache_load(const char *path, size_t *size);
/* Writes `data` and its trailer to `path` through a temporary name and a
 * rename, so that a reader sees either no file or all of it, relative to a
 * descriptor of path's directory opened and checked here (`dir` is not
 * used), then holds the cache to TACK_CACHE_MAX. */
tack_status tack_cache_store(const char *dir, const char *path, const void *data, size_t size);

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

#endif
