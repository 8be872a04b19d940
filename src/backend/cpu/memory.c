/* The cpu backend's memory: from the C allocator, 64-byte aligned, or, for
 * exportable memory (tack.empty(..., exportable=True)), from a memfd
 * instead, mapped shared, so that its descriptor can be handed to another
 * process (export_memory, tack_array_send) which maps the same pages. The
 * descriptor is made with the allocation, because a mapping cannot be
 * turned into a descriptor later, and closed when the buffer goes. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu.h"

/* The record of memory mapped from a descriptor: exportable memory Tack
 * allocated, or memory imported from another process. Plain memory has no
 * record (alloc_ctx NULL). */
struct cpu_shared {
    int fd;      /* owned: closed by free */
    size_t size; /* bytes mapped: a whole number of pages */
};

/* A new anonymous memory file of `size` bytes, close-on-exec, that reads as
 * zeros. -1 with errno on failure. */
static int memory_file(size_t size)
{
#if defined(__linux__)
    int fd = memfd_create("tack-array", MFD_CLOEXEC | MFD_ALLOW_SEALING);
#else
    /* No memfd: a POSIX shared-memory object, unlinked at once so that it
     * disappears with its last descriptor and mapping. */
    char name[64];
    static atomic_uint serial;
    snprintf(name, sizeof name, "/tack-%ld-%u", (long)getpid(), atomic_fetch_add(&serial, 1));
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
        shm_unlink(name);
        fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
#endif
    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)size) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
#if defined(__linux__) && defined(F_ADD_SEALS)
    /* A process that receives the descriptor could otherwise shrink the
     * file, and every mapping of the lost pages (this process's included)
     * would fault with SIGBUS. A kernel without seals leaves it unsealed:
     * still usable between processes that trust each other. */
    (void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
#endif
    return fd;
}

static tack_status shared_alloc(size_t nbytes, void **data, void **ctx)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t g = page > 0 ? (size_t)page : 4096;
    if (nbytes > SIZE_MAX - (g - 1) || nbytes > (size_t)INT64_MAX - g)
        return tack_error_set(TACK_ENOMEM, "out of host memory allocating %zu exportable bytes", nbytes);
    size_t size = (nbytes + g - 1) / g * g;
    struct cpu_shared *rec = malloc(sizeof *rec);
    if (!rec)
        return tack_error_set(TACK_ENOMEM, "out of memory allocating a buffer record");
    int fd = memory_file(size);
    if (fd < 0) {
        int e = errno;
        free(rec);
        if (e == EMFILE || e == ENFILE)
            return tack_error_set(TACK_ERUNTIME,
                                  "cannot allocate exportable host memory: the process is out of file descriptors "
                                  "(each exportable array holds one; raise RLIMIT_NOFILE)");
        return tack_error_set(e == ENOSPC || e == ENOMEM || e == EFBIG ? TACK_ENOMEM : TACK_ERUNTIME,
                              "cannot allocate %zu bytes of exportable host memory: %s", size, strerror(e));
    }
    /* A fresh memory file reads as zeros: nothing to clear. */
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        free(rec);
        return tack_error_set(TACK_ENOMEM, "cannot map %zu bytes of exportable host memory: %s", size, strerror(e));
    }
    rec->fd = fd;
    rec->size = size;
    *data = p;
    *ctx = rec;
    return TACK_OK;
}

/* calloc aligns to 16 bytes; the gap up to the next 64 always holds the
 * 8-byte pointer to free. */
#define CPU_ALIGN 64
/* A huge page on x86-64 and on most Arm kernels, and the size from which
 * NumPy asks for them. */
#define HUGE_PAGE ((uintptr_t)2 << 20)
#define HUGE_FROM ((size_t)4 << 20)

tack_status cpu_alloc(tack_device *device, size_t nbytes, int exportable, void **data, void **ctx)
{
    (void)device;
    if (exportable)
        return shared_alloc(nbytes, data, ctx);
    /* 64-byte alignment: a cache line for the kernels' vector loads, and
     * what JAX and XLA need to wrap memory without copying it. calloc keeps
     * zeroing free for large requests (fresh zero pages); the pointer it
     * returned is kept just below the aligned one, for cpu_free. No
     * object may exceed PTRDIFF_MAX bytes (glibc refuses such sizes), so
     * they are refused before the allocator sees them. */
    if (nbytes > (size_t)PTRDIFF_MAX - CPU_ALIGN)
        return tack_error_set(TACK_ENOMEM, "out of host memory allocating %zu bytes", nbytes);
    char *p = calloc(1, nbytes + CPU_ALIGN);
    if (!p)
        return tack_error_set(TACK_ENOMEM, "out of host memory allocating %zu bytes", nbytes);
    char *aligned = (char *)(((uintptr_t)p + CPU_ALIGN) & ~(uintptr_t)(CPU_ALIGN - 1));
#if defined(MADV_HUGEPAGE)
    /* Large arrays in huge pages where the system gives them on request
     * (transparent huge pages in "madvise" mode, Debian's default), as
     * NumPy asks for its own: a kernel streaming through 64 MiB of small
     * pages measured a fifth slower. Asked before the first touch, which
     * is when pages are chosen; a refusal changes nothing. */
    if (nbytes >= HUGE_FROM) {
        uintptr_t from = ((uintptr_t)aligned + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        uintptr_t to = ((uintptr_t)aligned + nbytes) & ~(HUGE_PAGE - 1);
        if (to > from)
            (void)madvise((void *)from, to - from, MADV_HUGEPAGE);
    }
#endif
    memcpy(aligned - sizeof p, &p, sizeof p);
    *data = aligned;
    *ctx = NULL;
    return TACK_OK;
}

void cpu_free(tack_device *device, void *data, void *ctx)
{
    (void)device;
    struct cpu_shared *rec = ctx;
    if (rec) {
        munmap(data, rec->size);
        close(rec->fd);
        free(rec);
        return;
    }
    void *p;
    memcpy(&p, (char *)data - sizeof p, sizeof p);
    free(p);
}

/* The memory file itself is the handle: made once, with the allocation, and
 * closed when the buffer goes (cpu_free). A consumer whose import takes
 * ownership of a descriptor must import a duplicate (dup(2), os.dup). */
tack_status cpu_export_memory(tack_buffer *b, tack_exported_memory *out)
{
    struct cpu_shared *rec = b->alloc_ctx;
    if (!rec)
        return tack_error_set(TACK_ERUNTIME,
                              "Backend cpu does not support memory export of this array: only host memory "
                              "allocated exportable (tack_array_empty(..., exportable=1); in Python tack.empty(..., exportable=True)) "
                              "has an OS handle");
    tack_status st = tack_buffer_share(b);
    if (st != TACK_OK)
        return st;
    snprintf(out->backend, sizeof out->backend, "cpu");
    snprintf(out->handle_type, sizeof out->handle_type, "posix_fd");
    out->handle = rec->fd;
    out->allocation_size = rec->size;
    /* The host has no device UUID: zeros (the caller cleared the record). */
    return TACK_OK;
}

/* The seals an import looks at; none where the system has no seals. */
#if defined(F_GET_SEALS)
#define SHRINK_SEAL F_SEAL_SHRINK
#if defined(F_SEAL_FUTURE_WRITE)
#define WRITE_SEALS (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)
#else
#define WRITE_SEALS F_SEAL_WRITE
#endif
#else
#define SHRINK_SEAL 0
#define WRITE_SEALS 0
#endif

/* What an unsealed descriptor is, for the refusal: a /dev/shm file takes
 * seals' queries as a memfd does, but is no memfd, and the message must
 * not send its owner looking for one. */
static const char *unsealed_kind(int fd, int seals, char *buf, size_t cap)
{
    char link[64], target[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    target[n > 0 ? n : 0] = 0;
    if (!strncmp(target, "/memfd:", 7))
        snprintf(buf, cap, "%s", seals < 0 ? "a memfd made without sealing" : "a memfd not sealed against shrinking");
    else if (!strncmp(target, "/dev/shm/", 9))
        snprintf(buf, cap, "a shared-memory file (%s), which cannot be sealed", n > 0 ? target : "in /dev/shm");
    else
        snprintf(buf, cap, "%s", seals < 0 ? "a file that cannot be sealed" : "a file not sealed against shrinking");
    return buf;
}

tack_status cpu_import_memory(tack_device *device, const tack_exported_memory *e, void **data, void **ctx,
                              int *writable, int *foreign)
{
    (void)device;
    (void)foreign; /* one host: every descriptor that reached it is its memory */
    int fd = (int)e->handle;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return tack_error_set(TACK_EVALUE, "handle %d is not an open file descriptor (%s)", fd, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return tack_error_set(TACK_EVALUE,
                              "descriptor %d is not host memory (a memfd or shared-memory object from an "
                              "exportable host array's export)",
                              fd);
    /* Pages past the end of the file fault with SIGBUS when touched, and
     * whoever else holds the descriptor could cut the file short after the
     * size is checked: only memory sealed against shrinking is mapped
     * (Tack's exports are). The seal cannot be removed, so the size checked
     * after it stays. */
#if defined(F_GET_SEALS)
    int seals = fcntl(fd, F_GET_SEALS);
#else
    int seals = -1; /* no seals on this system: nothing can be mapped safely */
#endif
    if (seals < 0 || !(seals & SHRINK_SEAL)) {
        char kind[192];
        return tack_error_set(TACK_EVALUE,
                              "descriptor %d is %s, which whoever else holds it could shrink under the mapping "
                              "(every later read of the lost pages would kill this process with SIGBUS): only a "
                              "memfd sealed with F_SEAL_SHRINK is mapped, as exportable host arrays export",
                              fd, unsealed_kind(fd, seals, kind, sizeof kind));
    }
    if (st.st_size < 0 || (uint64_t)st.st_size < (uint64_t)e->allocation_size)
        return tack_error_set(TACK_EVALUE, "descriptor %d holds %lld bytes, fewer than the %zu the export records",
                              fd, (long long)st.st_size, e->allocation_size);
    int flags = fcntl(fd, F_GETFL);
    int read_only = (flags >= 0 && (flags & O_ACCMODE) == O_RDONLY) || (seals & WRITE_SEALS);
    struct cpu_shared *rec = malloc(sizeof *rec);
    if (!rec)
        return tack_error_set(TACK_ENOMEM, "out of memory allocating a buffer record");
    /* The caller keeps its descriptor; the buffer owns this one. */
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) {
        int err = errno;
        free(rec);
        return tack_error_set(TACK_ERUNTIME, "cannot duplicate descriptor %d: %s", fd, strerror(err));
    }
    void *p = read_only ? MAP_FAILED : mmap(NULL, e->allocation_size, PROT_READ | PROT_WRITE, MAP_SHARED, own, 0);
    if (p == MAP_FAILED && (read_only || errno == EACCES || errno == EPERM)) {
        read_only = 1;
        p = mmap(NULL, e->allocation_size, PROT_READ, MAP_SHARED, own, 0);
    }
    if (p == MAP_FAILED) {
        int err = errno;
        close(own);
        free(rec);
        return tack_error_set(err == ENOMEM ? TACK_ENOMEM : TACK_ERUNTIME, "cannot map descriptor %d (%zu bytes): %s",
                              fd, e->allocation_size, strerror(err));
    }
    rec->fd = own;
    rec->size = e->allocation_size;
    *data = p;
    *ctx = rec;
    if (read_only)
        *writable = 0;
    return TACK_OK;
}

const struct tack_backend_memory tack_cpu_memory = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .export_memory = cpu_export_memory,
    .import_memory = cpu_import_memory,
};
