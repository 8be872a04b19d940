/* The kernel layer's internal declarations. Not installed. It knows
 * backends only through their tables (src/core/toolchain.h). */
#ifndef TACK_KERNEL_INTERNAL_H
#define TACK_KERNEL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/backend.h"
#include "../core/internal.h"
#include "../core/toolchain.h"
#include "tack/kernel.h"

/* Parses the user's source (parse.c). Errors as tack_kernel_create. */
tack_status tack_signature_parse(const char *source, const char *name, struct tack_signature *out);
/* The same, after `head` (NULL: none; the kernel's own definitions, which
 * the compiler reads first: tack_build_options.head), and for a kernel
 * whose launches are checked, the body's checked rewrite
 * (sig->body_checked). On success the signature may own text:
 * tack_signature_free frees it. */
tack_status tack_signature_parse_checked(const char *source, const char *head, const char *name, int checked,
                                         struct tack_signature *out);
void tack_signature_free(struct tack_signature *sig);

/* The source `dialect` makes of the user's (generate.c), with the kernel's
 * definitions `head` (NULL: none; tack_build_options.head) before it;
 * malloc'd, NULL out of memory. */
char *tack_generate(const struct tack_dialect *dialect, const struct tack_signature *sig, const char *head,
                    const char *source);

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
    /* File code's object (code.object) is closed with it. */
    struct tack_kernel_code code;
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
    char *source;
    struct tack_signature sig;
    /* Past the first 16 bytes: see TACK_REFS_FREED. */
    atomic_long refs;
    int first_writable;
    int uses_f64;
    uint32_t dtypes; /* 1u << d for each dtype d of a parameter */
    int uses_atomics; /* the source names tack_atomic_ */
    /* Parameters the entry takes after the kernel's own
     * (tack_signature_hidden); arg_sizes has their sizes too. */
    int nhidden;
    struct tack_build_options options;
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

/* The domain of a launch without one (domain.c): the shape every array
 * argument shares, as k's number of extents in shape[] (a kernel of one
 * index takes a 1-D shape's size). TACK_EVALUE, naming the arrays' shapes
 * and the calls that take a domain, when the kernel has no array
 * parameter, the arrays' shapes differ, or their rank is not the kernel's
 * number of indices. Arguments the launch's binding checks refuse (a
 * wrong count, a missing array, another dtype) are left to them: TACK_OK
 * with extents of 0. */
tack_status tack_kernel_call_domain(const tack_kernel *k, const tack_arg *args, size_t nargs,
                                    int64_t shape[TACK_KERNEL_MAX_DIMS]);

/* Copies and checks `in` (NULL: none) into `out`; TACK_CHECKED=1 in the
 * environment sets out->checked. TACK_EVALUE naming the entry, or
 * TACK_ENOMEM; on error `out` holds nothing (options.c). */
tack_status tack_build_options_copy(const tack_kernel_options *in, struct tack_build_options *out);
/* TACK_EVALUE when a definition names a macro <kernel>_tack_..., which
 * Tack's copies of kernel `kernel` are named (tack_source_kernel_copy). */
tack_status tack_build_options_check_names(const struct tack_build_options *o, const char *kernel);
/* Frees what tack_build_options_copy made. */
void tack_build_options_free(struct tack_build_options *o);

/* Builds kernel k for device d (build.c): the code compiled, or kept from
 * an earlier build or the store, then loaded on d once; *loaded is d's.
 * Called with k->lock held. Errors as tack_kernel_build. */
tack_status tack_kernel_build_locked(tack_kernel *k, tack_device *d, struct tack_loaded **loaded);
/* Frees built code, closing a file code's object (build.c). */
void tack_built_free(struct tack_built *b);
/* A parameter's C type as messages name it ("const float *"). */
void tack_param_describe(const struct tack_param *p, char *out, size_t cap);

/* The store's name for code of `backend` under job's key and source
 * ("<backend>-<64 hex digits>.<extension>"), into out (at least 96 bytes;
 * store.c). Never fails. */
void tack_store_name(const char *backend, const struct tack_compile *job, char *out, size_t cap);
/* File code (tack_code_kind_is_file) from the store directory `dir`:
 * the object stored under `name` loaded when it is there, trusted, whole
 * and made for its name; else compiled by `compile` into the store
 * (job's dirfd, source_file and output filled for it), sealed, published
 * and loaded. On success code->object is the loaded object (closed with
 * tack_store_unload).
 * A failed compile's status as `compile` returned it; TACK_ERUNTIME when
 * the file cannot be written, loaded, or is refused after it was rebuilt
 * (store_object.c). Leaves no temporary file. */
tack_status tack_store_object(const char *dir, const char *name, struct tack_compile *job,
                              tack_status (*compile)(const struct tack_compile *, struct tack_kernel_code *),
                              struct tack_kernel_code *code);
/* Closes an object tack_store_object loaded (store_object.c). */
void tack_store_unload(void *object);

/* The cache directory, created when missing (store.c). TACK_ERUNTIME when
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

/* TACK_EVALUE, reported as tack_misuse_released says, for a call (`call`)
 * on a released kernel or, when not NULL, a released device: one load
 * each. */
tack_status tack_kernel_check_live(const tack_kernel *kernel, const tack_device *device, const char *call);

#endif
