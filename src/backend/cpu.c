/* The host backend: memory from the C allocator, every address accepted;
 * kernels built from host C by the system compiler and run on a pool of
 * threads, complete when the launch returns.
 *
 * Exportable memory (tack.empty(..., exportable=True)) comes from a memfd
 * instead, mapped shared, so that its descriptor can be handed to another
 * process (export_memory, tack_array_send) which maps the same pages. The
 * descriptor is made with the allocation, because a mapping cannot be
 * turned into a descriptor later, and closed when the buffer goes. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/internal.h"
#include "../core/toolchain.h"
#include "cpu/toolchain.h"

/* The record of memory mapped from a descriptor: exportable memory Tack
 * allocated, or memory imported from another process. Plain memory has no
 * record (alloc_ctx NULL). */
struct cpu_shared {
    int fd;      /* owned: closed by free */
    size_t size; /* bytes mapped: a whole number of pages */
};

static tack_status cpu_open(tack_device *device, const tack_option *options, size_t n_options)
{
    (void)options;
    (void)n_options;
    if (device->ordinal != 0)
        return tack_error_set(TACK_EVALUE, "the cpu backend has one device, cpu:0, not cpu:%d", device->ordinal);
    return TACK_OK;
}

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

static tack_status cpu_alloc(tack_device *device, size_t nbytes, int exportable, void **data, void **ctx)
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

static void cpu_free(tack_device *device, void *data, void *ctx)
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
static tack_status cpu_export_memory(tack_buffer *b, tack_exported_memory *out)
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

static tack_status cpu_import_memory(tack_device *device, const tack_exported_memory *e, void **data, void **ctx,
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

/* ---- kernels: the thread pool -------------------------------------------
 *
 * Host code runs on persistent workers, woken per launch, which take
 * chunks of the index range from a shared counter; the launching thread
 * works too. A worker joins a launch only while it is open; the launching thread
 * closes it once it has run out of chunks and then waits only for the
 * workers that joined. So a worker that is slow to wake (asleep, or its
 * core busy with another process) never holds a launch up: the launching
 * thread just did its share, and a parallel launch costs at worst a serial
 * one plus the wake-up call.
 *
 * Serial or parallel: a launch saves (T-1)/T of its work when workers join
 * at once, and the work is n times the kernel's cost per index, which each
 * kernel measures on its own launches (one index of saxpy and one of a ray
 * tracer differ a thousandfold). Workers take time to join: they poll for
 * SPIN_NS after a launch, then sleep. The time to join is measured when the
 * pool starts, for polling and for sleeping workers, and followed launch
 * by launch. A launch runs in parallel when its work is at least twice the
 * time its workers are expected to take to join. */

/* Workers poll this long for the next launch before sleeping, so that a
 * loop of launches does not pay a wake-up each time. */
#define SPIN_NS 50000
/* Indices run serially to measure a kernel's cost on its first launch. */
#define PROBE 256
/* Chunks per thread: small enough to balance a busy core, large enough
 * that taking one costs nothing. */
#define CHUNKS_PER_THREAD 4

/* A launch's state word: generation << 32 | OPEN | workers in it. */
#define OPEN (UINT64_C(1) << 31)
#define ACTIVE (OPEN - 1)

struct pool {
    int nworkers;
    pthread_mutex_t dispatch; /* one parallel launch at a time */
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    atomic_uint generation; /* what sleeping and polling workers watch */
    atomic_uint_fast64_t state;
    int sleepers;
    /* The launch, written before its generation is published. */
    tack_host_entry entry;
    const int64_t *shape;
    void *const *args;
    atomic_uint_fast64_t next;
    uint64_t end, chunk;
    atomic_uint_fast64_t joined_ns; /* when the last worker joined */
    /* Expected time for workers to join, polling (hot) and asleep (cold). */
    atomic_uint_fast64_t hot_ns, cold_ns;
    /* When the last parallel launch ended: workers poll until SPIN_NS
     * after it. */
    atomic_uint_fast64_t last_end_ns;
};

static _Atomic(struct pool *) the_pool;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int pool_failed;
static atomic_int nthreads;
/* TACK_SERIAL_BELOW: a fixed threshold in place of the measured decision
 * (for benchmarks, and for users who want launches to behave the same every
 * time); -1 when unset, -2 before it is read. */
static atomic_llong serial_below = -2;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int pool_threads(void)
{
    int n = atomic_load_explicit(&nthreads, memory_order_relaxed);
    if (n)
        return n;
    const char *env = getenv("TACK_NUM_THREADS");
    char *end;
    long v = env && *env ? strtol(env, &end, 10) : 0;
    if (v <= 0 || (env && *end)) {
        cpu_set_t set;
        v = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    }
    n = v < 1 ? 1 : v > 256 ? 256 : (int)v;
    atomic_store(&nthreads, n);
    return n;
}

int tack_kernel_num_threads(void) { return pool_threads(); }

static long long fixed_threshold(void)
{
    long long v = atomic_load_explicit(&serial_below, memory_order_relaxed);
    if (v != -2)
        return v;
    const char *env = getenv("TACK_SERIAL_BELOW");
    char *end;
    v = env && *env ? strtoll(env, &end, 10) : -1;
    if (env && *env && (*end || v < 0))
        v = -1;
    atomic_store(&serial_below, v);
    return v;
}

static void work(struct pool *p)
{
    for (;;) {
        uint64_t b = atomic_fetch_add_explicit(&p->next, p->chunk, memory_order_relaxed);
        if (b >= p->end)
            return;
        uint64_t e = p->end - b > p->chunk ? b + p->chunk : p->end;
        p->entry((int64_t)b, (int64_t)e, p->shape, p->args);
    }
}

/* Joins launch `gen` if it is still open; 0 if it is gone or closed, in
 * which case the worker must not touch it. */
static int join(struct pool *p, unsigned gen)
{
    uint64_t s = atomic_load_explicit(&p->state, memory_order_acquire);
    while ((unsigned)(s >> 32) == gen && (s & OPEN)) {
        if (atomic_compare_exchange_weak_explicit(&p->state, &s, s + 1, memory_order_acq_rel, memory_order_acquire))
            return 1;
    }
    return 0;
}

static void *worker(void *arg)
{
    struct pool *p = arg;
    unsigned seen = 0;
    for (;;) {
        uint64_t t0 = now_ns();
        for (int i = 0; atomic_load_explicit(&p->generation, memory_order_acquire) == seen; i++) {
            if ((i & 63) == 63 && now_ns() - t0 > SPIN_NS) {
                pthread_mutex_lock(&p->lock);
                p->sleepers++;
                while (atomic_load_explicit(&p->generation, memory_order_acquire) == seen)
                    pthread_cond_wait(&p->wake, &p->lock);
                p->sleepers--;
                pthread_mutex_unlock(&p->lock);
                break;
            }
            cpu_relax();
        }
        seen = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (!join(p, seen))
            continue;
        uint64_t now = now_ns(), prev = atomic_load_explicit(&p->joined_ns, memory_order_relaxed);
        while (prev < now && !atomic_compare_exchange_weak(&p->joined_ns, &prev, now)) {
        }
        work(p);
        uint64_t s = atomic_fetch_sub_explicit(&p->state, 1, memory_order_acq_rel);
        if ((s & ACTIVE) == 1 && !(s & OPEN)) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->lock);
        }
    }
    return NULL;
}

/* Runs [begin, end) on the pool. Returns how long the workers took to
 * join, or, if none did (*helped = 0), how long the launch took: they
 * would have taken longer still. */
static uint64_t dispatch(struct pool *p, tack_host_entry entry, uint64_t begin, uint64_t end, const int64_t *shape,
                         void *const *args, int *helped)
{
    pthread_mutex_lock(&p->dispatch);
    uint64_t chunk = (end - begin) / ((uint64_t)(p->nworkers + 1) * CHUNKS_PER_THREAD);
    p->entry = entry;
    p->shape = shape;
    p->args = args;
    p->end = end;
    p->chunk = chunk ? chunk : 1;
    atomic_store_explicit(&p->next, begin, memory_order_relaxed);
    unsigned gen = atomic_load_explicit(&p->generation, memory_order_relaxed) + 1;
    uint64_t published = now_ns();
    atomic_store_explicit(&p->joined_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&p->state, (uint64_t)gen << 32 | OPEN, memory_order_release);
    pthread_mutex_lock(&p->lock);
    atomic_store_explicit(&p->generation, gen, memory_order_release);
    if (p->sleepers)
        pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    work(p);
    /* Out of chunks: whoever has not joined yet has nothing to do. */
    uint64_t s = atomic_fetch_and_explicit(&p->state, ~OPEN, memory_order_acq_rel) & ~OPEN;
    uint64_t t0 = now_ns();
    for (int i = 0; (s & ACTIVE) != 0; i++) {
        if ((i & 63) == 63 && now_ns() - t0 > SPIN_NS) {
            pthread_mutex_lock(&p->lock);
            while (atomic_load_explicit(&p->state, memory_order_acquire) & ACTIVE)
                pthread_cond_wait(&p->done, &p->lock);
            pthread_mutex_unlock(&p->lock);
            break;
        }
        cpu_relax();
        s = atomic_load_explicit(&p->state, memory_order_acquire);
    }
    uint64_t joined = atomic_load_explicit(&p->joined_ns, memory_order_relaxed);
    uint64_t latency = joined ? joined - published : now_ns() - published;
    *helped = joined != 0;
    pthread_mutex_unlock(&p->dispatch);
    return latency;
}

/* A launch that waits until a worker has joined it (or 10 ms), to measure
 * how long joining takes. */
static void wait_for_join(int64_t begin, int64_t end, const int64_t *shape, void *const *args)
{
    (void)begin;
    (void)end;
    (void)shape;
    struct pool *p = args[0];
    uint64_t t0 = now_ns();
    while (!atomic_load_explicit(&p->joined_ns, memory_order_relaxed) && now_ns() - t0 < 10000000)
        cpu_relax();
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The fork child has only the forking thread: the workers are gone. Start
 * afresh (the old pool's memory is abandoned, not freed: its mutexes may be
 * held by threads that no longer exist). */
static void after_fork_child(void)
{
    atomic_store(&the_pool, NULL);
    atomic_store(&pool_failed, 0);
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&pool_lock, &fresh, sizeof fresh);
}

static uint64_t median_join(struct pool *p, int samples, long pause_ns)
{
    uint64_t t[15];
    void *args[1] = {p};
    for (int i = 0; i < samples; i++) {
        if (pause_ns) {
            struct timespec pause = {0, pause_ns};
            nanosleep(&pause, NULL);
        }
        /* One index: the launching thread spins in it until a worker joins. */
        int helped;
        t[i] = dispatch(p, wait_for_join, 0, 1, NULL, args, &helped);
    }
    qsort(t, (size_t)samples, sizeof *t, cmp_u64);
    return t[samples / 2] ? t[samples / 2] : 1;
}

static struct pool *pool_get(void)
{
    struct pool *p = atomic_load_explicit(&the_pool, memory_order_acquire);
    if (p || atomic_load_explicit(&pool_failed, memory_order_relaxed))
        return p;
    pthread_mutex_lock(&pool_lock);
    p = atomic_load(&the_pool);
    if (p || atomic_load(&pool_failed))
        goto out;
    static int registered;
    if (!registered) {
        pthread_atfork(NULL, NULL, after_fork_child);
        registered = 1;
    }
    int workers = pool_threads() - 1;
    p = calloc(1, sizeof *p);
    if (!p)
        goto fail;
    pthread_mutex_init(&p->dispatch, NULL);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 0; i < workers; i++) {
        pthread_t t;
        /* Workers block every signal: a signal meant for the application
         * (SIGINT in Python) must reach a thread that handles it. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int r = pthread_create(&t, &attr, worker, p);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r != 0)
            break;
        p->nworkers++;
    }
    pthread_attr_destroy(&attr);
    if (p->nworkers == 0) {
        /* Nothing references p; running serially is always correct. */
        pthread_mutex_destroy(&p->dispatch);
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->wake);
        pthread_cond_destroy(&p->done);
        free(p);
        p = NULL;
        goto fail;
    }
    /* A new thread takes a while to be scheduled at all; then measure
     * joining with the workers polling, and asleep. */
    (void)median_join(p, 3, 0);
    atomic_store(&p->hot_ns, median_join(p, 15, 0));
    uint64_t cold = median_join(p, 5, 2 * SPIN_NS);
    atomic_store(&p->cold_ns, cold > atomic_load(&p->hot_ns) ? cold : atomic_load(&p->hot_ns));
    atomic_store_explicit(&the_pool, p, memory_order_release);
    goto out;
fail:
    atomic_store(&pool_failed, 1);
out:
    pthread_mutex_unlock(&pool_lock);
    return p;
}

static void update(atomic_uint_fast64_t *estimate, uint64_t observed)
{
    uint64_t old = atomic_load_explicit(estimate, memory_order_relaxed);
    uint64_t v = old ? (3 * old + observed) / 4 : observed;
    atomic_store_explicit(estimate, v ? v : 1, memory_order_relaxed);
}

/* ---- kernels: plain atomics ---------------------------------------------
 *
 * A locked read-modify-write costs some sixteen plain ones (10^7 of a
 * histogram's tack_atomic_add took 42.4 ms on one thread, plain ones
 * 2.64 ms), and a launch the pool runs on one thread has only one index
 * running at a time: its atomics need no lock against each other. So a
 * kernel whose source uses Tack's atomics has a third entry in which they
 * are plain loads and stores (CPU_PLAIN_ATOMICS), and a launch that runs
 * on one thread takes it when two more things hold:
 *   - no other process can write the memory it stores to
 *     (tack_launch.private_memory): Tack allocated it, not exportable,
 *     and never handed it out (DLPack, the array interfaces);
 *   - no other launch with atomics runs in this process meanwhile, on any
 *     thread: every launch of a kernel with atomics registers in one
 *     process-wide word, those with locked atomics together (a count),
 *     one with plain atomics alone (-1). A plain launch only tries: when
 *     the word is not free, or a locked launch is waiting, it runs with
 *     locked atomics instead, so it never waits and never keeps waiting
 *     launches out for long. A locked launch that finds a plain one waits
 *     for it to end.
 * Not per array: a kernel may reach memory through a static array of its
 * own or an address passed as an integer, and a word per process costs
 * one uncontended compare-and-swap a launch. */

/* >= 0: launches running with locked atomics; -1: one runs with plain atomics. */
static atomic_long atomics_users;
/* Launches with locked atomics waiting for a plain one to end. */
static atomic_int atomics_waiting;
static pthread_mutex_t atomics_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t atomics_free = PTHREAD_COND_INITIALIZER;
static pthread_once_t atomics_once = PTHREAD_ONCE_INIT;

/* The fork child has only the forking thread, which was in no launch: the
 * launches the word counted belong to threads that are gone. */
static void atomics_after_fork_child(void)
{
    atomic_store(&atomics_users, 0);
    atomic_store(&atomics_waiting, 0);
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    memcpy(&atomics_lock, &m, sizeof m);
    memcpy(&atomics_free, &c, sizeof c);
}

static void atomics_register_fork(void) { pthread_atfork(NULL, NULL, atomics_after_fork_child); }

/* 1 if this thread may now run plain atomics, alone. */
static int plain_begin(void)
{
    long none = 0;
    return !atomic_load_explicit(&atomics_waiting, memory_order_seq_cst) &&
           atomic_compare_exchange_strong_explicit(&atomics_users, &none, -1, memory_order_seq_cst,
                                                   memory_order_relaxed);
}

static void plain_end(void)
{
    /* The store publishes the launch's plain stores to the next launch
     * that registers; a waiter that counted itself before it is woken. */
    atomic_store_explicit(&atomics_users, 0, memory_order_seq_cst);
    if (atomic_load_explicit(&atomics_waiting, memory_order_seq_cst)) {
        pthread_mutex_lock(&atomics_lock);
        pthread_cond_broadcast(&atomics_free);
        pthread_mutex_unlock(&atomics_lock);
    }
}

#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
static void locked_wait(void)
{
    /* Counted first, so that no plain launch starts from now on. */
    atomic_fetch_add_explicit(&atomics_waiting, 1, memory_order_seq_cst);
    uint64_t t0 = now_ns();
    long v = atomic_load_explicit(&atomics_users, memory_order_seq_cst);
    int waited = 0;
    for (int i = 0;; i++) {
        if (v >= 0) {
            if (atomic_compare_exchange_weak_explicit(&atomics_users, &v, v + 1, memory_order_seq_cst,
                                                      memory_order_seq_cst))
                break;
            continue;
        }
        waited = 1;
        if ((i & 63) == 63 && now_ns() - t0 > SPIN_NS) {
            pthread_mutex_lock(&atomics_lock);
            while (atomic_load_explicit(&atomics_users, memory_order_seq_cst) < 0)
                pthread_cond_wait(&atomics_free, &atomics_lock);
            pthread_mutex_unlock(&atomics_lock);
        } else {
            cpu_relax();
        }
        v = atomic_load_explicit(&atomics_users, memory_order_seq_cst);
    }
    atomic_fetch_sub_explicit(&atomics_waiting, 1, memory_order_seq_cst);
    if (waited)
        tack_count_add(TACK_COUNT_LOCKED_WAITS, 1);
}

/* Registers a launch with locked atomics, waiting while a plain one runs. */
static inline void locked_begin(void)
{
    long v = atomic_load_explicit(&atomics_users, memory_order_relaxed);
    if (v < 0 ||
        !atomic_compare_exchange_strong_explicit(&atomics_users, &v, v + 1, memory_order_acquire, memory_order_relaxed))
        locked_wait();
}

static inline void locked_end(void) { atomic_fetch_sub_explicit(&atomics_users, 1, memory_order_release); }

void tack_kernel_atomic_runs(long *plain, long *refused, long *waited)
{
    if (plain)
        *plain = tack_count_total(TACK_COUNT_PLAIN_RUNS);
    if (refused)
        *refused = tack_count_total(TACK_COUNT_PLAIN_REFUSED);
    if (waited)
        *waited = tack_count_total(TACK_COUNT_LOCKED_WAITS);
}

/* ---- kernels: serial or parallel ---------------------------------------- */

/* What a kernel's launches measured of it, picoseconds an index; 0 = not
 * measured yet. */
struct run_costs {
    /* Work: one thread's time, and a parallel launch's time on all its
     * threads (they agree for a kernel that scales). */
    atomic_uint_fast64_t cost_ps;
    /* One thread's time alone, from serial runs only: with locked atomics
     * (serial_ps) and with plain ones (plain_ps). */
    atomic_uint_fast64_t serial_ps, plain_ps;
    /* A parallel launch's time once its workers had joined: less than
     * serial_ps where threads help, more where they hinder each other
     * (a histogram's threads contending for the same counters ran four
     * times slower than one thread alone). */
    atomic_uint_fast64_t joined_ps;
    /* Launches kept on one thread since the last parallel one because
     * that was faster (see pool_run). */
    atomic_uint_fast64_t kept;
    /* PROBED_*: the rate is a probe's alone so far. */
    atomic_int probed;
};

/* A launch as the pool runs it. */
struct job {
    tack_host_entry entry; /* with locked atomics, if any */
    /* With plain atomics: for a kernel that has them, on memory no other
     * process can write; else NULL. */
    tack_host_entry plain;
    int atomics; /* registers its runs (the kernel uses Tack's atomics) */
    const int64_t *shape;
    void *const *args;
    struct run_costs *c;
};

/* What a serial run measures: nothing, the work alone (cost_ps), or also
 * one thread's rate (serial_ps or plain_ps), which a run of one index
 * would not tell (the clock's own cost is most of it). A probe's rate,
 * from the domain's first indices, may be far from the whole domain's (a
 * Mandelbrot set's first row escapes at once): the first whole run
 * replaces it instead of blending with it. */
enum { UNTIMED, TIME_COST, TIME_PROBE, TIME_RATE };
#define PROBED_SERIAL 1
#define PROBED_PLAIN 2

/* Runs [begin, end) on this thread: with plain atomics when `plain_ok`,
 * the job has them and no other launch with atomics runs; else with
 * locked ones. */
static void run_serial(const struct job *j, uint64_t begin, uint64_t end, int timed, int plain_ok)
{
    struct run_costs *c = j->c;
    int plain = plain_ok && j->plain && plain_begin();
    if (j->plain && plain_ok)
        tack_count_add(plain ? TACK_COUNT_PLAIN_RUNS : TACK_COUNT_PLAIN_REFUSED, 1);
    if (!plain && j->atomics)
        locked_begin();
    uint64_t t0 = timed ? now_ns() : 0;
    (plain ? j->plain : j->entry)((int64_t)begin, (int64_t)end, j->shape, j->args);
    uint64_t t1 = timed ? now_ns() : 0;
    if (plain)
        plain_end();
    else if (j->atomics)
        locked_end();
    if (timed == UNTIMED || end == begin)
        return;
    uint64_t ps = (t1 - t0) * 1000 / (end - begin);
    update(&c->cost_ps, ps);
    if (timed == TIME_COST)
        return;
    atomic_uint_fast64_t *rate = plain ? &c->plain_ps : &c->serial_ps;
    int bit = plain ? PROBED_PLAIN : PROBED_SERIAL;
    if (timed == TIME_PROBE) {
        if (!atomic_load_explicit(rate, memory_order_relaxed)) {
            atomic_store_explicit(rate, ps ? ps : 1, memory_order_relaxed);
            atomic_fetch_or_explicit(&c->probed, bit, memory_order_relaxed);
        }
    } else if (atomic_load_explicit(&c->probed, memory_order_relaxed) & bit) {
        atomic_fetch_and_explicit(&c->probed, ~bit, memory_order_relaxed);
        atomic_store_explicit(rate, ps ? ps : 1, memory_order_relaxed);
    } else {
        update(rate, ps);
    }
}

/* Runs entry over [0, n), in parallel when the measured costs say it pays. */
static void pool_run(const struct job *j, int64_t n)
{
    struct run_costs *c = j->c;
    int threads = pool_threads();
    if (n < 2 || threads == 1) {
        /* Timed while no cost is known: the cost also says whether a
         * launch is long enough to let other threads run meanwhile
         * (cpu_kernel_expected_ns). */
        run_serial(j, 0, (uint64_t)(n > 0 ? n : 0),
                   atomic_load_explicit(&c->cost_ps, memory_order_relaxed) ? UNTIMED : TIME_COST, 1);
        return;
    }
    long long fixed = fixed_threshold();
    if (fixed >= 0) {
        struct pool *p = n >= fixed ? pool_get() : NULL;
        int helped;
        if (!p) {
            run_serial(j, 0, (uint64_t)n, UNTIMED, 1);
            return;
        }
        if (j->atomics)
            locked_begin();
        dispatch(p, j->entry, 0, (uint64_t)n, j->shape, j->args, &helped);
        if (j->atomics)
            locked_end();
        return;
    }
    uint64_t begin = 0, end = (uint64_t)n;
    uint64_t cost = atomic_load_explicit(&c->cost_ps, memory_order_relaxed);
    /* A first launch measures one thread's rate on PROBE indices; one
     * that may use plain atomics measures them, and the locked ones too:
     * over the threads those are the best a parallel launch could do,
     * which tells a kernel whose plain atomics beat that without a
     * parallel launch to learn it. */
    int probe = !cost || (j->plain && !atomic_load_explicit(&c->plain_ps, memory_order_relaxed));
    int probe_locked = j->plain && !atomic_load_explicit(&c->serial_ps, memory_order_relaxed);
    for (int plain_ok = 1; plain_ok >= 0; plain_ok--) {
        if (!(plain_ok ? probe : probe_locked) || begin == end)
            continue;
        uint64_t to = end - begin < PROBE ? end : begin + PROBE;
        run_serial(j, begin, to, TIME_PROBE, plain_ok);
        begin = to;
    }
    if (begin == end)
        return;
    cost = atomic_load_explicit(&c->cost_ps, memory_order_relaxed);
    uint64_t rest = end - begin;
    uint64_t work_ns = rest > UINT64_MAX / cost ? UINT64_MAX / 1000 : rest * cost / 1000;
    /* Waking a thread takes microseconds on any machine: a launch this
     * small does not start the pool. */
    struct pool *p = atomic_load_explicit(&the_pool, memory_order_acquire);
    uint64_t least = p ? atomic_load_explicit(&p->hot_ns, memory_order_relaxed) : 8000;
    if (work_ns * 8 < least) {
        /* Far from paying for a fan-out: not even worth timing. */
        run_serial(j, begin, end, UNTIMED, 1);
        return;
    }
    if (!p && work_ns > 8000)
        p = pool_get();
    if (!p) {
        run_serial(j, begin, end, TIME_RATE, 1);
        return;
    }
    uint64_t t0 = now_ns();
    int hot = t0 - atomic_load_explicit(&p->last_end_ns, memory_order_relaxed) < SPIN_NS;
    atomic_uint_fast64_t *join_ns = hot ? &p->hot_ns : &p->cold_ns;
    uint64_t expected = atomic_load_explicit(join_ns, memory_order_relaxed);
    /* One thread against all: a kernel whose threads slow each other down
     * (contended atomics) runs faster alone, and faster still with plain
     * atomics where this launch may have them. Before any parallel launch
     * of such a kernel, the best one could do stands for it (one thread's
     * locked rate over the threads). Each launch kept on one thread counts;
     * once they add up to 32 times what one parallel launch more would
     * lose by the last measure, the next one runs in parallel again and
     * measures anew, so trying costs a thirty-second at most. */
    uint64_t serial_ps = atomic_load_explicit(&c->serial_ps, memory_order_relaxed);
    uint64_t alone = j->plain ? atomic_load_explicit(&c->plain_ps, memory_order_relaxed) : serial_ps;
    uint64_t joined = atomic_load_explicit(&c->joined_ps, memory_order_relaxed);
    if (!joined && j->plain)
        joined = serial_ps / (uint64_t)threads;
    uint64_t kept = atomic_load_explicit(&c->kept, memory_order_relaxed);
    int pays = work_ns > 2 * expected;
    /* Only a kernel with atomics is judged so: a kernel without them
     * gains from more threads all the same, and its rates measured on
     * launches of other sizes (in cache or not) do not compare. */
    int hinders = j->atomics && alone && joined >= alone && kept <= (joined - alone) * 32 / alone;
    if (pays && hinders)
        atomic_store_explicit(&c->kept, kept + 1, memory_order_relaxed);
    if (pays && !hinders) {
        int helped;
        if (j->atomics)
            locked_begin();
        t0 = now_ns();
        uint64_t latency = dispatch(p, j->entry, begin, end, j->shape, j->args, &helped);
        uint64_t t1 = now_ns(), spent = t1 - t0;
        if (j->atomics)
            locked_end();
        atomic_store_explicit(&p->last_end_ns, t1, memory_order_relaxed);
        atomic_store_explicit(&c->kept, 0, memory_order_relaxed);
        /* How fast workers join moves with the machine's load; follow it,
         * a join at most twice as slow as expected counting as such: a
         * cold join is measured seldom, and one very late one (a worker
         * descheduled for a millisecond) would keep launches that pay for
         * threads on one for hundreds of launches. A lasting change still
         * shows within a few. */
        update(join_ns, expected && latency > 2 * expected ? 2 * expected : latency);
        /* The launching thread worked alone until the workers joined, then
         * all shared the rest (as if evenly). */
        uint64_t first = helped && latency < spent ? latency : spent;
        uint64_t total = first + (spent - first) * (uint64_t)(p->nworkers + 1);
        update(&c->cost_ps, total * 1000 / rest);
        /* After the join: the indices left when the workers came (those
         * the launching thread ran alone at its serial rate, atomics
         * locked), over the time they took. */
        uint64_t before = serial_ps ? first * 1000 / serial_ps : 0;
        if (helped && before < rest && spent > first)
            update(&c->joined_ps, (spent - first) * 1000 / (rest - before));
    } else {
        run_serial(j, begin, end, TIME_RATE, 1);
        /* A join time measured while the machine was busy would otherwise
         * keep launches near the threshold serial for good: let it fade,
         * so that one of them tries the pool again and measures anew;
         * faster for a launch within a factor of two of paying, since
         * trying costs it little (the launching thread works from the
         * start, and late workers only take what is left). */
        if (work_ns * 8 > 2 * expected)
            atomic_store_explicit(join_ns, expected - expected / (work_ns > expected ? 8 : 32),
                                  memory_order_relaxed);
    }
}

/* ---- kernels: the dialect, load and launch ------------------------------ */

/* The atomics: GCC's and Clang's __atomic builtins, relaxed; a
 * compare-and-swap loop where x86 has no one instruction (float and double
 * adds, min and max). _Generic picks the function for the pointer's type,
 * so a pointer of another type, or a const one, does not compile. */
#define CPU_ATOMICS                                                                                                \
    "#define TACK_ATOMIC_FETCH_(op, T, s) static inline T tack_atomic_##op##_##s##_(T *p, T v) "                 \
    "{ return __atomic_fetch_##op(p, v, __ATOMIC_RELAXED); }\n"                                                   \
    "#define TACK_ATOMIC_CAS_ADD_(T, s) static inline T tack_atomic_add_##s##_(T *p, T v) { T old, next; "        \
    "__atomic_load(p, &old, __ATOMIC_RELAXED); do { next = old + v; } while (!__atomic_compare_exchange(p, &old, " \
    "&next, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)); return old; }\n"                                             \
    "#define TACK_ATOMIC_PICK_(op, cmp, T, s) static inline T tack_atomic_##op##_##s##_(T *p, T v) { T old; "     \
    "__atomic_load(p, &old, __ATOMIC_RELAXED); while (v cmp old && !__atomic_compare_exchange(p, &old, &v, 1, "   \
    "__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} return old; }\n"                                                     \
    "TACK_ATOMIC_FETCH_(add, int32_t, i32) TACK_ATOMIC_FETCH_(add, uint32_t, u32)\n"                             \
    "TACK_ATOMIC_FETCH_(add, int64_t, i64) TACK_ATOMIC_FETCH_(add, uint64_t, u64)\n"                             \
    "TACK_ATOMIC_CAS_ADD_(float, f32) TACK_ATOMIC_CAS_ADD_(double, f64)\n"                                       \
    "TACK_ATOMIC_PICK_(min, <, int32_t, i32) TACK_ATOMIC_PICK_(min, <, uint32_t, u32)\n"                         \
    "TACK_ATOMIC_PICK_(min, <, int64_t, i64) TACK_ATOMIC_PICK_(min, <, uint64_t, u64)\n"                         \
    "TACK_ATOMIC_PICK_(max, >, int32_t, i32) TACK_ATOMIC_PICK_(max, >, uint32_t, u32)\n"                         \
    "TACK_ATOMIC_PICK_(max, >, int64_t, i64) TACK_ATOMIC_PICK_(max, >, uint64_t, u64)\n"                         \
    "#define TACK_ATOMIC_INT_(op, p, v) _Generic((p), int32_t *: tack_atomic_##op##_i32_, "                      \
    "uint32_t *: tack_atomic_##op##_u32_, int64_t *: tack_atomic_##op##_i64_, "                                   \
    "uint64_t *: tack_atomic_##op##_u64_)((p), (v))\n"                                                            \
    "#define tack_atomic_add(p, v) _Generic((p), int32_t *: tack_atomic_add_i32_, "                              \
    "uint32_t *: tack_atomic_add_u32_, int64_t *: tack_atomic_add_i64_, uint64_t *: tack_atomic_add_u64_, "      \
    "float *: tack_atomic_add_f32_, double *: tack_atomic_add_f64_)((p), (v))\n"                                 \
    "#define tack_atomic_min(p, v) TACK_ATOMIC_INT_(min, p, v)\n"                                                 \
    "#define tack_atomic_max(p, v) TACK_ATOMIC_INT_(max, p, v)\n"

/* The same atomics as plain loads and stores, for the copy of the kernel
 * that runs launches on one thread alone (see "plain atomics" above): one
 * index at a time, nothing else at once, so a read-modify-write needs no
 * lock. Integer adds wrap as the locked ones do, through the unsigned
 * type; TACK_INLINE_ (the prelude's) keeps those a kernel leaves unused
 * quiet. They replace the macros for the rest of the source, which is the
 * copy and the entries (which use none). */
#define CPU_PLAIN_ATOMICS                                                                                          \
    "#define TACK_PLAIN_ADD_(T, U, s) TACK_INLINE_ T tack_plain_add_##s##_(T *p, T v) "                            \
    "{ T old = *p; *p = (T)((U)old + (U)v); return old; }\n"                                                     \
    "#define TACK_PLAIN_PICK_(op, cmp, T, s) TACK_INLINE_ T tack_plain_##op##_##s##_(T *p, T v) "                 \
    "{ T old = *p; if (v cmp old) *p = v; return old; }\n"                                                        \
    "TACK_PLAIN_ADD_(int32_t, uint32_t, i32) TACK_PLAIN_ADD_(uint32_t, uint32_t, u32)\n"                         \
    "TACK_PLAIN_ADD_(int64_t, uint64_t, i64) TACK_PLAIN_ADD_(uint64_t, uint64_t, u64)\n"                         \
    "TACK_PLAIN_ADD_(float, float, f32) TACK_PLAIN_ADD_(double, double, f64)\n"                                  \
    "TACK_PLAIN_PICK_(min, <, int32_t, i32) TACK_PLAIN_PICK_(min, <, uint32_t, u32)\n"                           \
    "TACK_PLAIN_PICK_(min, <, int64_t, i64) TACK_PLAIN_PICK_(min, <, uint64_t, u64)\n"                           \
    "TACK_PLAIN_PICK_(max, >, int32_t, i32) TACK_PLAIN_PICK_(max, >, uint32_t, u32)\n"                           \
    "TACK_PLAIN_PICK_(max, >, int64_t, i64) TACK_PLAIN_PICK_(max, >, uint64_t, u64)\n"                           \
    "#undef TACK_ATOMIC_INT_\n#undef tack_atomic_add\n#undef tack_atomic_min\n#undef tack_atomic_max\n"          \
    "#define TACK_ATOMIC_INT_(op, p, v) _Generic((p), int32_t *: tack_plain_##op##_i32_, "                       \
    "uint32_t *: tack_plain_##op##_u32_, int64_t *: tack_plain_##op##_i64_, "                                     \
    "uint64_t *: tack_plain_##op##_u64_)((p), (v))\n"                                                             \
    "#define tack_atomic_add(p, v) _Generic((p), int32_t *: tack_plain_add_i32_, "                               \
    "uint32_t *: tack_plain_add_u32_, int64_t *: tack_plain_add_i64_, uint64_t *: tack_plain_add_u64_, "         \
    "float *: tack_plain_add_f32_, double *: tack_plain_add_f64_)((p), (v))\n"                                  \
    "#define tack_atomic_min(p, v) TACK_ATOMIC_INT_(min, p, v)\n"                                                 \
    "#define tack_atomic_max(p, v) TACK_ATOMIC_INT_(max, p, v)\n"

/* The kernel again, as `<name><suffix>`, with `qualifier` ("restrict "
 * or "") after the `*` of every array parameter: the user's body under
 * Tack's own declaration of the parameters (the types the signature was
 * read as).
 *
 * `<name>_tack_restrict_` has every array restrict. A compiler takes
 * restrict from a function's own parameters, not from its caller's, so
 * only a copy of the kernel itself can tell it that no array overlaps
 * another, which lets it keep a value it loaded in a register across a
 * store through another array. The entry of this copy runs only launches
 * whose arrays are disjoint (checked per launch by the kernel layer).
 *
 * `<name>_tack_plain_` is compiled under the plain atomics (CPU_PLAIN_ATOMICS)
 * for launches that run on one thread alone. */
static void cpu_kernel_copy(struct tack_source *b, const struct tack_signature *sig, const char *source,
                            const char *suffix, const char *qualifier)
{
    tack_source_put(b, "static inline void %s%s(", sig->name, suffix);
    for (int d = 0; d < sig->ndim; d++)
        tack_source_put(b, "%stack_index %s", d ? ", " : "", sig->index_names[d]);
    for (int k = 0; k < sig->nparams; k++) {
        const struct tack_param *p = &sig->params[k];
        const char *type = tack_dtype_c_type(p->dtype);
        if (p->is_array)
            tack_source_put(b, ", %s%s *%s%s", p->writable ? "" : "const ", type, qualifier, p->name);
        else
            tack_source_put(b, ", %s %s", type, p->name);
    }
    tack_source_put(b, ")\n");
    for (int i = 0; i < sig->body_if; i++)
        tack_source_put(b, "#if 1\n");
    tack_source_put(b, "#line %d \"kernel\"\n%.*s\n", sig->body_line, (int)(sig->body_end - sig->body_begin),
                    source + sig->body_begin);
    for (int i = 0; i < sig->body_endif; i++)
        tack_source_put(b, "#endif\n");
    tack_source_put(b, "#line 1 \"<tack entry>\"\n");
}

/* One entry point: [begin, end) of the flattened domain, row-major. A
 * range may begin and end inside a row (the pool cuts the domain where it
 * likes); each row's part is one loop over the last index, contiguous in
 * memory for a kernel that indexes a[i * w + j], and vectorisable: indices
 * are independent by contract, which TACK_SIMD_ tells the compiler, unless
 * `simd` is 0 (the plain atomics' entry: there two indices may update the
 * same element, and lanes that load it together would lose all but one
 * update; Clang does vectorise a histogram so). The position of begin
 * costs a division per range, not per index. */
static void cpu_entry_point(struct tack_source *b, const struct tack_signature *sig, const char *entry,
                            const char *function, int simd)
{

    tack_source_put(b,
                    "TACK_EXPORT_ void %s(int64_t tack_begin_, int64_t tack_end_, const int64_t *tack_shape_, "
                    "void *const *tack_args_);\n"
                    "TACK_EXPORT_ void %s(int64_t tack_begin_, int64_t tack_end_, const int64_t *tack_shape_, "
                    "void *const *tack_args_)\n{\n",
                    entry, entry);
    for (int k = 0; k < sig->nparams; k++) {
        const struct tack_param *p = &sig->params[k];
        const char *q = p->writable ? "" : "const ", *type = tack_dtype_c_type(p->dtype);
        if (p->is_array)
            tack_source_put(b, "    %s%s *tack_p%d_ = *(%s%s *const *)tack_args_[%d];\n", q, type, k, q, type, k);
        else
            tack_source_put(b, "    %s tack_p%d_ = *(const %s *)tack_args_[%d];\n", type, k, type, k);
    }
    if (sig->nparams == 0)
        tack_source_put(b, "    (void)tack_args_;\n");
    if (sig->ndim == 1) {
        tack_source_put(b,
                        "    (void)tack_shape_;\n%s"
                        "    for (tack_index tack_i_ = tack_begin_; tack_i_ < tack_end_; tack_i_++)\n        ",
                        simd ? "    TACK_SIMD_\n" : "");
        tack_source_call(b, sig, function);
        tack_source_put(b, "}\n");
        return;
    }
    const char *last = sig->ndim == 2 ? "tack_j_" : "tack_k_";
    tack_source_put(b, "    const tack_index tack_w_ = tack_shape_[%d];\n", sig->ndim - 1);
    if (sig->ndim == 2)
        tack_source_put(b, "    tack_index tack_i_ = tack_begin_ / tack_w_, tack_at_ = tack_begin_ %% tack_w_;\n");
    else
        tack_source_put(b, "    const tack_index tack_h_ = tack_shape_[1];\n"
                           "    tack_index tack_row_ = tack_begin_ / tack_w_, tack_at_ = tack_begin_ %% tack_w_;\n"
                           "    tack_index tack_i_ = tack_row_ / tack_h_, tack_j_ = tack_row_ %% tack_h_;\n");
    tack_source_put(b,
                    "    while (tack_begin_ < tack_end_) {\n"
                    "        const tack_index tack_stop_ = tack_end_ - tack_begin_ < tack_w_ - tack_at_ ? "
                    "tack_at_ + (tack_end_ - tack_begin_) : tack_w_;\n"
                    "        tack_begin_ += tack_stop_ - tack_at_;\n"
                    "%s"
                    "        for (tack_index %s = tack_at_; %s < tack_stop_; %s++)\n            ",
                    simd ? "        TACK_SIMD_\n" : "", last, last, last);
    tack_source_call(b, sig, function);
    tack_source_put(b, "        tack_at_ = 0;\n");
    if (sig->ndim == 2)
        tack_source_put(b, "        tack_i_++;\n");
    else
        tack_source_put(b, "        if (++tack_j_ == tack_h_) {\n            tack_j_ = 0;\n            tack_i_++;\n"
                           "        }\n");
    tack_source_put(b, "    }\n}\n");
}

/* The entry points are host C that the system compiler builds
 * (cpu/toolchain.c), named as tack_cpu_entry_names lists them:
 * TACK_ENTRY_NAME; where restrict
 * can matter, TACK_ENTRY_NAME "_restrict" over the restrict copy; and for
 * a kernel whose source uses Tack's atomics, TACK_ENTRY_NAME "_plain"
 * over the plain copy. Each unpacks the argument array into typed locals
 * and runs a range of the domain. A kernel without atomics gets the same
 * source as before there was a plain entry, so its cached object stays. */
static void cpu_entry(struct tack_source *b, const struct tack_signature *sig, const char *source)
{
    /* Restrict says nothing of a kernel with one array, or none it stores
     * through: then there is no second entry (a fifth of a small kernel's
     * compile time). */
    int arrays = 0, written = 0;
    for (int k = 0; k < sig->nparams; k++) {
        arrays += sig->params[k].is_array;
        written |= sig->params[k].writable;
    }
    int variant = arrays > 1 && written;
    /* Atomics in a helper the kernel calls stay locked in the plain copy
     * too (only the kernel's own body is copied): slower, still right. */
    int atomics = sig->uses_atomics;
    tack_source_signature_check(b, sig, source, TACK_CHECK_C);
    if (variant)
        cpu_kernel_copy(b, sig, source, "_tack_restrict_", "restrict ");
    if (atomics) {
        tack_source_append(b, CPU_PLAIN_ATOMICS);
        cpu_kernel_copy(b, sig, source, "_tack_plain_", "");
    }
    tack_source_put(b, "#if defined(__GNUC__)\n"
                       "#define TACK_EXPORT_ __attribute__((visibility(\"default\")))\n#else\n#define TACK_EXPORT_\n#endif\n"
                       "#if defined(__clang__)\n#define TACK_SIMD_ _Pragma(\"clang loop vectorize(assume_safety)\")\n"
                       "#elif defined(__GNUC__)\n#define TACK_SIMD_ _Pragma(\"GCC ivdep\")\n"
                       "#else\n#define TACK_SIMD_\n#endif\n");
    char copy[TACK_NAME_MAX + 32];
    cpu_entry_point(b, sig, TACK_ENTRY_NAME, NULL, 1);
    if (variant) {
        snprintf(copy, sizeof copy, "%s_tack_restrict_", sig->name);
        cpu_entry_point(b, sig, TACK_ENTRY_NAME "_restrict", copy, 1);
    }
    if (atomics) {
        snprintf(copy, sizeof copy, "%s_tack_plain_", sig->name);
        cpu_entry_point(b, sig, TACK_ENTRY_NAME "_plain", copy, 0);
    }
}

static const struct tack_dialect cpu_dialect = {
    .name = "cpu",
    .prelude = "#include <stddef.h>\n#include <stdint.h>\n#include <stdbool.h>\n#include <math.h>\n"
               "typedef int64_t tack_index;\n"
               "#define TACK_BACKEND_CPU 1\n"
               /* Helpers a kernel may leave unused, which Clang's -Wall
                * would report in a source file. */
               "#if defined(__GNUC__)\n#define TACK_INLINE_ static inline __attribute__((unused))\n"
               "#else\n#define TACK_INLINE_ static inline\n#endif\n"
               "TACK_INLINE_ uint32_t tack_bits_of_float_(float f)\n"
               "{\n    union { float f; uint32_t u; } v;\n    v.f = f;\n    return v.u;\n}\n"
               "TACK_INLINE_ float tack_float_of_bits_(uint32_t u)\n"
               "{\n    union { uint32_t u; float f; } v;\n    v.u = u;\n    return v.f;\n}\n"
               /* The compilers say which types they have: GCC from 12 and
                * Clang from 15 define __FLT16_MAX__ where _Float16 is an
                * arithmetic type, GCC from 13 __BFLT16_MAX__ where __bf16
                * is. Without the macro __bf16 is a storage type at most, no
                * better than the struct. */
               "#if defined(__FLT16_MAX__)\n"
               /* __extension__: _Float16 is not ISO C, which -pedantic says. */
               "__extension__ typedef _Float16 tack_f16;\n"
               "#define TACK_F16_NATIVE 1\n"
               "TACK_INLINE_ float tack_f16_to_float(tack_f16 h) { return (float)h; }\n"
               "TACK_INLINE_ tack_f16 tack_f16_from_float(float f) { return (tack_f16)f; }\n"
               "#else\n" TACK_PRELUDE_F16_STORAGE "#endif\n"
               "#if defined(__BFLT16_MAX__)\n"
               "__extension__ typedef __bf16 tack_bf16;\n"
               "#define TACK_BF16_NATIVE 1\n"
               "TACK_INLINE_ float tack_bf16_to_float(tack_bf16 b) { return (float)b; }\n"
               "TACK_INLINE_ tack_bf16 tack_bf16_from_float(float f) { return (tack_bf16)f; }\n"
               "#else\n" TACK_PRELUDE_BF16_STORAGE "#endif\n"
               /* C99's complex types; <complex.h> stays the kernel's choice,
                * since its `I` would take a common name. */
               "typedef float _Complex tack_c64;\n"
               "typedef double _Complex tack_c128;\n" CPU_ATOMICS,
    .entry = cpu_entry,
    .offline = TACK_CODE_HOST,
    .entries = tack_cpu_entry_names,
};

/* A loaded kernel: its entries, and its measured cost of one index. */
struct cpu_kernel {
    tack_host_entry entry, entry_restrict;
    tack_host_entry entry_plain; /* NULL: the kernel uses no atomics */
    struct run_costs costs;
};

static tack_status cpu_kernel_load(tack_device *device, struct tack_kernel_code *code, void **out)
{
    tack_host_entry e[TACK_CPU_ENTRIES];
    tack_cpu_entries(code, e);
    if (code->kind != TACK_CODE_HOST || !e[TACK_CPU_ENTRY])
        return tack_error_set(TACK_ERUNTIME, "%s runs host code; it was given %s code", device->name,
                              tack_code_kind_name(code->kind));
    struct cpu_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return tack_error_set(TACK_ENOMEM, "out of memory loading a kernel");
    k->entry = e[TACK_CPU_ENTRY];
    k->entry_restrict = e[TACK_CPU_ENTRY_RESTRICT] ? e[TACK_CPU_ENTRY_RESTRICT] : e[TACK_CPU_ENTRY];
    k->entry_plain = e[TACK_CPU_ENTRY_PLAIN];
    if (k->entry_plain)
        pthread_once(&atomics_once, atomics_register_fork);
    atomic_init(&k->costs.cost_ps, 0);
    atomic_init(&k->costs.serial_ps, 0);
    atomic_init(&k->costs.plain_ps, 0);
    atomic_init(&k->costs.joined_ps, 0);
    atomic_init(&k->costs.kept, 0);
    atomic_init(&k->costs.probed, 0);
    *out = k;
    return TACK_OK;
}

/* n indices at `ps` picoseconds each, in nanoseconds; UINT64_MAX for a
 * cost not measured yet. */
static uint64_t expected_ns(uint64_t ps, int64_t n)
{
    if (!ps)
        return UINT64_MAX;
    /* Both below 2^32 (4 ms an index, 4e9 indices): the product fits, and
     * the check costs no division. */
    if (((uint64_t)n | ps) >> 32 && (uint64_t)n > UINT64_MAX / ps)
        return UINT64_MAX;
    return (uint64_t)n * ps / 1000;
}

/* A launch that is not one short index without atomics. Out of line, so
 * that the launch of one (cpu_kernel_launch) builds no frame for it. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void run_launch(struct cpu_kernel *k, tack_host_entry e, uint64_t ps, const struct tack_launch *l)
{
    if (l->n < 2 && ps) {
        /* One index: plain atomics would save nothing; a kernel with
         * atomics keeps out of a plain run's way. */
        if (k->entry_plain)
            locked_begin();
        e(0, l->n, l->shape, l->args);
        if (k->entry_plain)
            locked_end();
    } else {
        struct job j = {e, l->private_memory ? k->entry_plain : NULL, k->entry_plain != NULL, l->shape, l->args,
                        &k->costs};
        pool_run(&j, l->n);
    }
}

/* Complete on return: the backend has no queue. */
static tack_status cpu_kernel_launch(tack_device *device, void *kernel, const struct tack_launch *l)
{
    (void)device;
    struct cpu_kernel *k = kernel;
    tack_host_entry e = l->disjoint ? k->entry_restrict : k->entry;
    uint64_t ps = atomic_load_explicit(&k->costs.cost_ps, memory_order_relaxed);
    if (l->n < 2 && ps && !k->entry_plain)
        e(0, l->n, l->shape, l->args);
    else
        run_launch(k, e, ps, l);
    return TACK_OK;
}

/* Serial time: what one thread takes, which the pool does not exceed. */
static uint64_t cpu_kernel_expected_ns(void *kernel, int64_t n)
{
    struct cpu_kernel *k = kernel;
    return expected_ns(atomic_load_explicit(&k->costs.cost_ps, memory_order_relaxed), n);
}

static void cpu_kernel_unload(tack_device *device, void *kernel)
{
    (void)device;
    free(kernel);
}

static const DLDeviceType cpu_wraps[] = {kDLCPU, kDLCUDAHost, kDLROCMHost, 0};

/* No driver; one device, the host: its processor as the kernel sees it
 * and the threads a launch is split over. */
static void cpu_describe(tack_backend_report *out)
{
    out->driver.found = 1;
    snprintf(out->driver.note, sizeof out->driver.note, "none needed: kernels run on the host");
    out->device_count = 1;
    char model[96] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && !model[0] && fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (colon && !strncmp(line, "model name", 10)) {
            colon++;
            while (*colon == ' ' || *colon == '\t')
                colon++;
            snprintf(model, sizeof model, "%.*s", (int)strcspn(colon, "\n"), colon);
        }
    }
    if (f)
        fclose(f);
    int threads = pool_threads();
    snprintf(out->devices[0], sizeof out->devices[0], "%s%s%d thread%s", model, model[0] ? ", " : "", threads,
             threads == 1 ? "" : "s");
    tack_c_compiler_describe(&out->compiler);
}

const struct tack_backend_ops tack_cpu_backend = {
    .name = "cpu",
    .dl_type = kDLCPU,
    .wraps = cpu_wraps,
    .describe = cpu_describe,
    .open = cpu_open,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .export_memory = cpu_export_memory,
    .import_memory = cpu_import_memory,
    .dialect = &cpu_dialect,
    .kernel_key = tack_cpu_kernel_key,
    .kernel_compile = tack_cpu_kernel_compile,
    .kernel_load = cpu_kernel_load,
    .kernel_launch = cpu_kernel_launch,
    .kernel_expected_ns = cpu_kernel_expected_ns,
    .kernel_unload = cpu_kernel_unload,
};
