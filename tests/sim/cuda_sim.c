/*
 * A simulated CUDA driver for CI machines without a GPU: the subset of the
 * driver API Tack calls (and tests call to play "another library"), over
 * host memory. Select it with TACK_CUDA_LIBRARY=<path to this library>.
 *
 * What it models, because Tack's design depends on it:
 * - devices with ordinals and UUIDs (TACK_SIM_CUDA_DEVICES, default 1; 0
 *   means a driver that finds no device; TACK_SIM_CUDA_INIT_ERROR=<code>
 *   makes cuInit fail with that code);
 * - primary contexts (retain counts; released to zero or reset, they and
 *   their allocations are gone) and created contexts, with a per-thread
 *   stack of current contexts; calls that need a current context fail
 *   without one, and a stream used while another context is current is
 *   refused, as the real driver does;
 * - allocations tagged by context and freed with it; device memory lives at
 *   addresses the host cannot touch (PROT_NONE), backed by separate storage,
 *   so host code that dereferences a device pointer crashes as it would on
 *   a GPU; fresh device memory is filled with 0xA5, not zeros;
 * - cuPointerGetAttribute answering for device, pinned, registered, managed
 *   and mapped VMM memory, and failing (host memory) for anything else;
 * - streams that defer work: async copies, memsets, stream-ordered frees and
 *   launches are queued and run only at cuStreamSynchronize /
 *   cuCtxSynchronize (or a synchronous call on the legacy stream), so a
 *   missing wait shows up as a wrong answer; a queued operation on memory
 *   freed meanwhile faults, and the context's sync then reports
 *   CUDA_ERROR_ILLEGAL_ADDRESS;
 * - events: one recorded on a deferred stream completes when that stream's
 *   work queued up to the record has run; cuStreamWaitEvent queues on the
 *   waiting stream a dependency that, when reached, first runs the recorded
 *   stream's work up to the record (the order a GPU keeps without the host
 *   waiting). Event waits are counted apart from host syncs (event_waits
 *   and event_waits_done vs stream_syncs and ctx_syncs), so a test can tell
 *   stream ordering from a host wait;
 * - VMM allocations backed by memfd, so the descriptor from
 *   cuMemExportToShareableHandle can be mmapped, or imported with
 *   cuMemImportFromShareableHandle, by another process and shows the same
 *   bytes; sizes must be multiples of the granularity (2 MiB unless
 *   TACK_SIM_CUDA_GRANULARITY says otherwise).
 * - a driver of one CUDA version (TACK_SIM_CUDA_DRIVER_VERSION, as
 *   cuDriverGetVersion reports it: 13000 is CUDA 13.0, the default) and GPUs
 *   of one compute capability (TACK_SIM_CUDA_COMPUTE_CAPABILITY, "9.0" by
 *   default), both read at every call. cuModuleLoadData checks what it is
 *   given as the real driver does before it runs anything: PTX must declare
 *   a `.version` the driver's JIT reads (CUDA_ERROR_UNSUPPORTED_PTX_VERSION
 *   for a newer one: PTX from an NVRTC newer than the driver) and a
 *   `.target` the GPU is not older than; a CUBIN (a CUDA ELF image) must be
 *   for the GPU's architecture (same major, minor not above the GPU's;
 *   CUDA_ERROR_NO_BINARY_FOR_GPU otherwise) and made by a toolkit of the
 *   driver's major version or an older one (CUDA_ERROR_INVALID_IMAGE
 *   otherwise: minor version compatibility spans one major version). The
 *   error codes of the last two are this simulator's choice; what a real
 *   driver answers may differ. Loads are counted as modules_ptx and
 *   modules_cubin, refusals as modules_refused.
 * Kernels cannot run here: a launch is queued and counted; a test may install
 * a host implementation with tack_sim_cuda_set_kernel_hook.
 *
 * Test hooks (read through ctypes or dlsym): tack_sim_cuda_stats(name)
 * returns a counter, tack_sim_cuda_fail(symbol, error, nth) makes the nth
 * next call of an entry point fail, tack_sim_cuda_host_address(ptr) gives the
 * storage behind a device address.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/driver/cuda.h"
#include "sim_common.h"
#include "sim_memory.h"

/* The entry points Tack resolves, declared from Tack's own list, so that a
 * definition here that disagrees with Tack's declaration fails to build. */
TACK_CUDA_SYMBOLS(SIM_PROTOTYPE)

/* Entry points only tests call, as "another library" would. */
SIM_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
SIM_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev);
SIM_API CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev);
SIM_API CUresult cuCtxDestroy_v2(CUcontext ctx);
SIM_API CUresult cuCtxSetCurrent(CUcontext ctx);
SIM_API CUresult cuStreamQuery(CUstream stream);
SIM_API CUresult cuEventQuery(CUevent event);
SIM_API CUresult cuEventSynchronize(CUevent event);
SIM_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n);
SIM_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
SIM_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n);
SIM_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n);
SIM_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total);
SIM_API CUresult cuMemAllocHost_v2(void **pp, size_t size);
SIM_API CUresult cuMemHostAlloc(void **pp, size_t size, unsigned int flags);
SIM_API CUresult cuMemFreeHost(void *p);
SIM_API CUresult cuMemAllocManaged(CUdeviceptr *ptr, size_t size, unsigned int flags);
SIM_API CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned int flags);
SIM_API CUresult cuMemHostUnregister(void *p);

/* Test hooks, described where they are defined. */
typedef void *(*sim_capture_fn)(const char *name, void **params, const unsigned grid[3], const unsigned block[3]);
typedef void (*sim_run_fn)(void *closure);
SIM_API long long tack_sim_cuda_stats(const char *name);
SIM_API int tack_sim_cuda_fail(const char *symbol, int error, int nth);
SIM_API void *tack_sim_cuda_host_address(CUdeviceptr ptr, size_t n);
SIM_API void tack_sim_cuda_set_kernel_hook(sim_capture_fn capture, sim_run_fn run);

#define MAX_DEVICES 16
#define STACK_DEPTH 32
#define HOST_MEMORY_ALREADY_REGISTERED 712
#define HOST_MEMORY_NOT_REGISTERED 713
#define NO_BINARY_FOR_GPU 209
#define UNSUPPORTED_PTX_VERSION 222
#define STREAM_LEGACY ((CUstream)0x1)
#define STREAM_PER_THREAD ((CUstream)0x2)

/* ---- counters ---------------------------------------------------------- */

#define SIM_STATS(X)                                                                                          \
    X(init) X(contexts_created) X(contexts_destroyed) X(primary_retains) X(primary_releases)                  \
        X(primary_resets) X(ctx_pushes) X(ctx_pops) X(streams_created) X(streams_destroyed) X(stream_syncs)   \
            X(ctx_syncs) X(allocs) X(async_allocs) X(frees) X(async_frees) X(invalid_frees) X(live_allocs)    \
                X(memsets) X(copies_htod) X(copies_dtoh) X(copies_dtod) X(vmm_creates) X(vmm_releases)        \
                    X(vmm_maps) X(vmm_unmaps) X(vmm_live) X(exports) X(imports) X(pointer_queries)            \
                        X(host_allocs) X(host_registers) X(managed_allocs) X(modules_loaded) X(modules_ptx)  \
                            X(modules_cubin) X(modules_refused) X(launches)      \
                            X(launches_done) X(pending_ops) X(faults) X(injected_failures)  \
                                X(events_created) X(events_destroyed) X(event_records) X(event_waits)          \
                                    X(event_waits_done) X(event_syncs)

SIM_DEFINE_STATS(SIM_STATS);

/* ---- state ------------------------------------------------------------- */

struct sim_ctx {
    int device;
    int is_primary;
    int live;
    unsigned long long id;
    CUresult sticky; /* a fault in queued work, reported by the next sync */
    struct sim_ctx *next;
};

enum alloc_kind { K_DEVICE, K_PINNED, K_REGISTERED, K_MANAGED, K_VMM };

struct sim_phys {
    int fd;
    size_t size;
    int device;
    int requested;
    int released;
    int maps;
    struct sim_phys *next;
};

struct sim_alloc {
    enum alloc_kind kind;
    uintptr_t base;
    size_t size;     /* bytes asked for */
    size_t map_size; /* bytes mapped (pages) */
    char *store;     /* where the bytes live; NULL for host kinds (base is host memory) */
    struct sim_ctx *ctx;
    int device;
    int access;       /* VMM: cuMemSetAccess done */
    int free_pending; /* a stream-ordered free is queued */
    unsigned long long buffer_id;
    struct sim_phys *phys;
    struct sim_alloc *next;
};

struct sim_reservation {
    uintptr_t base;
    size_t size;
    struct sim_reservation *next;
};

enum op_type { OP_HTOD, OP_DTOH, OP_DTOD, OP_MEMSET, OP_FREE, OP_LAUNCH, OP_WAIT };

struct sim_stream;

struct sim_op {
    enum op_type type;
    uintptr_t dst, src;
    size_t n;
    unsigned char value;
    void *closure; /* OP_LAUNCH: what the kernel hook captured */
    /* OP_WAIT: run `on` up to its operation number `upto` first. */
    struct sim_stream *on;
    unsigned long long upto;
    unsigned long long seq; /* this operation's number on its stream */
    struct sim_op *next;
};

/* Streams, events and modules: objects (sim_common.h) of a context. */
struct sim_stream {
    struct sim_object o;
    struct sim_ctx *ctx;
    unsigned flags;
    struct sim_op *head, *tail;
    /* Operations queued and run so far, numbered from 1: an event records
     * the first, and is complete once the second reaches it. */
    unsigned long long queued, done;
};

/* An event: the point `seq` of stream `stream` it was last recorded at
 * (stream NULL: never recorded, or recorded where work runs at once). */
struct sim_event {
    struct sim_object o;
    struct sim_ctx *ctx;
    struct sim_stream *stream;
    unsigned long long seq;
};

struct sim_module {
    struct sim_object o;
    struct sim_ctx *ctx;
    char *image;
    size_t size; /* of image: the text and its NUL, or the ELF file */
};

struct sim_function {
    struct sim_module *module;
    char name[128];
    struct sim_function *next;
};

static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static int initialized;
static int n_devices;
static size_t granularity = 2u << 20;
static size_t memory_budget = (size_t)1 << 30;
static size_t memory_used;
static unsigned long long next_id = 1;
static struct sim_ctx *primaries[MAX_DEVICES];
static int primary_retains[MAX_DEVICES];
static struct sim_ctx *contexts; /* every context ever made; never freed, so stale handles stay readable */
static struct sim_alloc *allocs;
static struct sim_reservation *reservations;
static struct sim_phys *physicals;
static struct sim_object *streams, *events, *modules; /* never freed, like contexts */
static struct sim_function *functions;

static _Thread_local struct sim_ctx *tls_stack[STACK_DEPTH];
static _Thread_local int tls_depth;

static sim_capture_fn kernel_capture;
static sim_run_fn kernel_run;

/* ---- failure injection --------------------------------------------------- */

static struct sim_failures failures;

/* Every entry point takes the lock and may be told to fail. */
#define ENTER()                                                                                               \
    SIM_ENTER(CUresult, CUDA_SUCCESS);                                                                        \
    SIM_INJECT(CUresult);                                                                                     \
    if (!initialized && strcmp(__func__, "cuInit") && strcmp(__func__, "cuGetErrorName") &&                   \
        strcmp(__func__, "cuGetErrorString") && strcmp(__func__, "cuDriverGetVersion"))                       \
        RETURN(CUDA_ERROR_NOT_INITIALIZED)
#define LEAVE()                                                                                               \
    out:                                                                                                      \
    SIM_LEAVE()

/* ---- helpers ----------------------------------------------------------- */

static size_t env_size(const char *name, size_t fallback)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return fallback;
    char *end;
    unsigned long long x = strtoull(v, &end, 0);
    return *end ? fallback : (size_t)x;
}

static struct sim_ctx *current(void) { return tls_depth ? tls_stack[tls_depth - 1] : NULL; }

static int known_context(struct sim_ctx *c)
{
    for (struct sim_ctx *k = contexts; k; k = k->next)
        if (k == c)
            return 1;
    return 0;
}

static CUresult require_context(struct sim_ctx **out)
{
    struct sim_ctx *c = current();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!c->live)
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return CUDA_SUCCESS;
}

static struct sim_alloc *find_alloc(uintptr_t addr, size_t n)
{
    for (struct sim_alloc *a = allocs; a; a = a->next) {
        if (addr >= a->base && addr - a->base < (a->size ? a->size : 1) &&
            n <= (a->size ? a->size : 1) - (addr - a->base))
            return a;
    }
    return NULL;
}

static int in_device_range(uintptr_t addr, size_t n)
{
    for (struct sim_alloc *a = allocs; a; a = a->next)
        if ((a->kind == K_DEVICE || a->kind == K_VMM) && addr < a->base + a->map_size && addr + n > a->base)
            return 1;
    for (struct sim_reservation *v = reservations; v; v = v->next)
        if (addr < v->base + v->size && addr + n > v->base)
            return 1;
    return 0;
}

/* The host address where the bytes of [addr, addr + n) of device-visible
 * memory live, or NULL if that is no valid device memory. */
static char *device_bytes(uintptr_t addr, size_t n)
{
    struct sim_alloc *a = find_alloc(addr, n);
    if (!a || (a->kind == K_VMM && !a->access))
        return NULL;
    if (a->store)
        return a->store + (addr - a->base);
    return (char *)addr;
}

static void unlink_alloc(struct sim_alloc *a)
{
    for (struct sim_alloc **p = &allocs; *p; p = &(*p)->next) {
        if (*p == a) {
            *p = a->next;
            return;
        }
    }
}

static void phys_destroy(struct sim_phys *ph)
{
    for (struct sim_phys **p = &physicals; *p; p = &(*p)->next) {
        if (*p == ph) {
            *p = ph->next;
            break;
        }
    }
    close(ph->fd);
    memory_used -= ph->size;
    UNCOUNT(vmm_live);
    free(ph);
}

static void alloc_destroy(struct sim_alloc *a)
{
    unlink_alloc(a);
    switch (a->kind) {
    case K_DEVICE:
        sim_pages_unmap(a->base, a->store, a->map_size);
        memory_used -= a->size;
        UNCOUNT(live_allocs);
        break;
    case K_PINNED:
    case K_MANAGED:
        free((void *)a->base);
        break;
    case K_REGISTERED:
        break;
    case K_VMM:
        munmap(a->store, a->map_size);
        a->phys->maps--;
        if (a->phys->released && a->phys->maps == 0)
            phys_destroy(a->phys);
        break;
    }
    free(a);
}

static struct sim_alloc *alloc_new(enum alloc_kind kind, uintptr_t base, size_t size, struct sim_ctx *c)
{
    struct sim_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->kind = kind;
    a->base = base;
    a->size = size;
    a->ctx = c;
    a->device = c ? c->device : 0;
    a->buffer_id = next_id++;
    a->next = allocs;
    allocs = a;
    return a;
}

/* Fresh device memory of `size` bytes in context `c`, its address in *ptr. */
static CUresult device_alloc(size_t size, struct sim_ctx *c, CUdeviceptr *ptr)
{
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > memory_budget - memory_used)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t va;
    char *store;
    size_t m;
    if (sim_pages_map(size, 1, &va, &store, &m))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_alloc *a = alloc_new(K_DEVICE, va, size, c);
    if (!a) {
        sim_pages_unmap(va, store, m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->map_size = m;
    a->store = store;
    memory_used += size;
    COUNT(live_allocs);
    *ptr = a->base;
    return CUDA_SUCCESS;
}

/* ---- streams ----------------------------------------------------------- */

static int is_null_stream(CUstream s) { return !s || s == STREAM_LEGACY || s == STREAM_PER_THREAD; }

/* A stream usable for work queued by the calling thread: live, and in the
 * current context. The legacy stream resolves to NULL. */
static CUresult check_stream(CUstream s, struct sim_ctx *c, struct sim_stream **out)
{
    *out = NULL;
    if (is_null_stream(s))
        return CUDA_SUCCESS;
    struct sim_stream *k = sim_object_find(streams, s);
    if (!k || k->ctx != c)
        return CUDA_ERROR_INVALID_HANDLE;
    *out = k;
    return CUDA_SUCCESS;
}

/* The current context and, in it, a stream usable for work the calling
 * thread queues (NULL: the legacy stream). */
static CUresult require_stream(CUstream stream, struct sim_ctx **c, struct sim_stream **s)
{
    *s = NULL;
    CUresult r = require_context(c);
    return r ? r : check_stream(stream, *c, s);
}

/* In an entry point: declares `c`, the current context, or ends the call
 * with the error for its absence. */
#define CURRENT_CONTEXT(c)                                                                                    \
    struct sim_ctx *c;                                                                                        \
    CHECK(require_context(&c))

/* In an entry point: declares `c`, the current context, and `s`, the
 * stream `stream` in it (require_stream), or ends the call with the error. */
#define CURRENT_STREAM(c, s, stream)                                                                          \
    struct sim_ctx *c;                                                                                        \
    struct sim_stream *s;                                                                                     \
    CHECK(require_stream(stream, &c, &s))

static void fault(struct sim_ctx *c)
{
    COUNT(faults);
    if (c)
        c->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
}

static void drain_until(struct sim_stream *s, unsigned long long upto);

static void execute(struct sim_op *op, struct sim_ctx *c)
{
    char *d = NULL, *s = NULL;
    int ok = 1;
    switch (op->type) {
    case OP_HTOD:
        if ((ok = (d = device_bytes(op->dst, op->n)) != NULL))
            memcpy(d, (const void *)op->src, op->n);
        break;
    case OP_DTOH:
        if ((ok = (s = device_bytes(op->src, op->n)) != NULL))
            memcpy((void *)op->dst, s, op->n);
        break;
    case OP_DTOD:
        d = device_bytes(op->dst, op->n);
        s = device_bytes(op->src, op->n);
        if ((ok = d && s))
            memmove(d, s, op->n);
        break;
    case OP_MEMSET:
        if ((ok = (d = device_bytes(op->dst, op->n)) != NULL))
            memset(d, op->value, op->n);
        break;
    case OP_FREE: {
        struct sim_alloc *a = find_alloc(op->dst, 0);
        if ((ok = a && a->base == op->dst))
            alloc_destroy(a);
        break;
    }
    case OP_LAUNCH:
        if (op->closure) {
            if (kernel_run)
                kernel_run(op->closure);
            else
                free(op->closure);
        }
        COUNT(launches_done);
        break;
    case OP_WAIT:
        drain_until(op->on, op->upto);
        COUNT(event_waits_done);
        break;
    }
    /* Memory freed (or never mapped for the device) by the time the work
     * runs: the context's next sync reports it, as a GPU fault would be. */
    if (!ok)
        fault(c);
}

/* Runs the stream's queued work up to operation number `upto`. */
static void drain_until(struct sim_stream *s, unsigned long long upto)
{
    while (s->head && s->head->seq <= upto) {
        struct sim_op *op = s->head;
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        UNCOUNT(pending_ops);
        /* Counted done before it runs: a wait inside it that comes back to
         * this stream sees it taken. */
        s->done = op->seq;
        execute(op, s->ctx);
        free(op);
    }
}

static void drain(struct sim_stream *s) { drain_until(s, s->queued); }

static void drop(struct sim_stream *s)
{
    while (s->head) {
        struct sim_op *op = s->head;
        s->head = op->next;
        UNCOUNT(pending_ops);
        free(op->closure);
        free(op);
    }
    s->tail = NULL;
    s->done = s->queued;
}

/* The legacy default stream waits for the context's blocking streams, but
 * not for its non-blocking ones. */
static void drain_blocking(struct sim_ctx *c)
{
    for (struct sim_stream *s = (void *)streams; s; s = (void *)s->o.next)
        if (s->o.live && s->ctx == c && !(s->flags & CU_STREAM_NON_BLOCKING))
            drain(s);
}

static CUresult enqueue(struct sim_stream *s, struct sim_ctx *c, struct sim_op *proto)
{
    struct sim_op *op = malloc(sizeof *op);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *op = *proto;
    op->next = NULL;
    if (!s) {
        drain_blocking(c);
        execute(op, c);
        free(op);
        return CUDA_SUCCESS;
    }
    op->seq = ++s->queued;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    COUNT(pending_ops);
    return CUDA_SUCCESS;
}

static void context_destroy(struct sim_ctx *c)
{
    c->live = 0;
    c->sticky = CUDA_SUCCESS;
    for (struct sim_stream *s = (void *)streams; s; s = (void *)s->o.next) {
        if (s->ctx == c && s->o.live) {
            drop(s);
            s->o.live = 0;
        }
    }
    for (struct sim_alloc *a = allocs, *next; a; a = next) {
        next = a->next;
        if (a->ctx == c && a->kind != K_VMM)
            alloc_destroy(a);
    }
    for (struct sim_module *m = (void *)modules; m; m = (void *)m->o.next)
        if (m->ctx == c)
            m->o.live = 0;
    /* Off this thread's stack; other threads keep a stale handle, as with
     * the real driver. */
    int j = 0;
    for (int i = 0; i < tls_depth; i++)
        if (tls_stack[i] != c)
            tls_stack[j++] = tls_stack[i];
    tls_depth = j;
}

static struct sim_ctx *context_new(int device, int primary)
{
    struct sim_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->device = device;
    c->is_primary = primary;
    c->live = 1;
    c->id = next_id++;
    c->next = contexts;
    contexts = c;
    return c;
}

/* ---- initialisation, errors, devices ---------------------------------- */

SIM_API CUresult cuInit(unsigned int flags)
{
    ENTER();
    COUNT(init);
    if (flags != 0)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    const char *e = getenv("TACK_SIM_CUDA_INIT_ERROR");
    if (e && *e && atoi(e))
        RETURN(atoi(e));
    if (!initialized) {
        n_devices = (int)env_size("TACK_SIM_CUDA_DEVICES", 1);
        if (n_devices > MAX_DEVICES)
            n_devices = MAX_DEVICES;
        granularity = env_size("TACK_SIM_CUDA_GRANULARITY", granularity);
        memory_budget = env_size("TACK_SIM_CUDA_MEMORY", memory_budget);
        initialized = 1;
    }
    if (n_devices == 0)
        RETURN(CUDA_ERROR_NO_DEVICE);
    LEAVE();
}

/* ---- the driver's version and the GPU's architecture ----------------------- */

/* The CUDA version of this driver, as cuDriverGetVersion reports it. */
static int driver_version(void) { return (int)env_size("TACK_SIM_CUDA_DRIVER_VERSION", 13000); }

/* The GPUs' compute capability, 10 * major + minor (90 for 9.0). */
static int compute_capability(void)
{
    const char *v = getenv("TACK_SIM_CUDA_COMPUTE_CAPABILITY");
    int major, minor;
    char tail;
    if (v && sscanf(v, "%d.%d%c", &major, &minor, &tail) == 2 && major > 0 && major < 100 && minor >= 0 &&
        minor < 10)
        return 10 * major + minor;
    return 90;
}

/* The newest PTX ISA (10 * major + minor) the JIT of a driver of CUDA
 * version `driver` reads: PTX 7.x came with CUDA 11.x, 8.0 to 8.5 with 12.0
 * to 12.5 (12.6 kept 8.5), then 8.6, 8.7 and 8.8 with 12.7, 12.8 and 12.9,
 * and 9.x with 13.x. Later majors are taken to go on as 13 does. */
static int newest_ptx_isa(int driver)
{
    int major = driver / 1000, minor = driver % 1000 / 10;
    if (major >= 13)
        return (major - 4) * 10 + minor;
    if (major == 12)
        return minor <= 5 ? 80 + minor : 79 + minor;
    if (major == 11)
        return 70 + minor;
    if (major == 10)
        return 63 + minor;
    return 0;
}

SIM_API CUresult cuDriverGetVersion(int *version)
{
    ENTER();
    if (!version)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    *version = driver_version();
    LEAVE();
}

static const struct {
    int code;
    const char *name;
    const char *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain."},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

/* The entry of `errors` for `error`, or -1 for a code it does not list. */
static int error_index(CUresult error)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == error)
            return (int)i;
    return -1;
}

SIM_API CUresult cuGetErrorName(CUresult error, const char **name)
{
    ENTER();
    int i = error_index(error);
    *name = i < 0 ? NULL : errors[i].name;
    RETURN(i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
    LEAVE();
}

SIM_API CUresult cuGetErrorString(CUresult error, const char **text)
{
    ENTER();
    int i = error_index(error);
    *text = i < 0 ? NULL : errors[i].text;
    RETURN(i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
    LEAVE();
}

static int valid_device(CUdevice d) { return d >= 0 && d < n_devices; }

SIM_API CUresult cuDeviceGetCount(int *count)
{
    ENTER();
    *count = n_devices;
    LEAVE();
}

SIM_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    ENTER();
    if (!valid_device(ordinal))
        RETURN(CUDA_ERROR_INVALID_DEVICE);
    *device = ordinal;
    LEAVE();
}

SIM_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    ENTER();
    if (!valid_device(dev))
        RETURN(CUDA_ERROR_INVALID_DEVICE);
    snprintf(name, (size_t)len, "Tack simulated GPU %d", dev);
    LEAVE();
}

SIM_API CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attrib, CUdevice dev)
{
    ENTER();
    if (!valid_device(dev))
        RETURN(CUDA_ERROR_INVALID_DEVICE);
    const char *no_pools = getenv("TACK_SIM_CUDA_NO_POOLS"), *no_vmm = getenv("TACK_SIM_CUDA_NO_VMM");
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 4; break;
    case 10: /* CU_DEVICE_ATTRIBUTE_WARP_SIZE */ *value = 32; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = compute_capability() / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = compute_capability() % 10; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
        *value = !(no_vmm && *no_vmm == '1');
        break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *value = !(no_pools && *no_pools == '1'); break;
    default: RETURN(CUDA_ERROR_INVALID_VALUE);
    }
    LEAVE();
}

/* What both versions of cuDeviceGetUuid answer. */
static CUresult device_uuid(CUuuid *uuid, CUdevice dev)
{
    static const char prefix[] = "TACK-SIM-GPU";
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    memset(uuid->bytes, 0, sizeof uuid->bytes);
    memcpy(uuid->bytes, prefix, sizeof prefix - 1);
    uuid->bytes[15] = (char)dev;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    ENTER();
    RETURN(device_uuid(uuid, dev));
    LEAVE();
}

SIM_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    ENTER();
    RETURN(device_uuid(uuid, dev));
    LEAVE();
}

SIM_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    ENTER();
    if (!valid_device(dev))
        RETURN(CUDA_ERROR_INVALID_DEVICE);
    *bytes = memory_budget;
    LEAVE();
}

/* ---- contexts ----------------------------------------------------------- */

SIM_API CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    ENTER();
    if (!valid_device(dev))
        RETURN(CUDA_ERROR_INVALID_DEVICE);
    struct sim_ctx *c = primaries[dev];
    if (!c) {
        c = context_new(dev, 1);
        if (!c)
            RETURN(CUDA_ERROR_OUT_OF_MEMORY);
        primaries[dev] = c;
    } else if (!c->live) {
        /* Re-created: the same handle, a new context. */
        c->live = 1;
        c->id = next_id++;
    }
    primary_retains[dev]++;
    COUNT(primary_retains);
    *ctx = (CUcontext)c;
    LEAVE();
}

SIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    ENTER();
    if (!valid_device(dev))
        RETURN(CUDA_ERROR_INVALID_DEVICE);
    if (primary_retains[dev] <= 0)
        RETURN(CUDA_ERROR_INVALID_CONTEXT);
    COUNT(primary_releases);
    if (--primary_retains[dev] == 0)
        context_destroy(primaries[dev]);
    LEAVE();
}

SIM_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    ENTER();
    if (!valid_device(dev))
        RETURN(CUDA_ERROR_INVALID_DEVICE);
    COUNT(primary_resets);
    if (primaries[dev] && primaries[dev]->live)
        context_destroy(primaries[dev]);
    primary_retains[dev] = 0;
    LEAVE();
}

SIM_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    ENTER();
    if (!valid_device(dev))
        RETURN(CUDA_ERROR_INVALID_DEVICE);
    *flags = 0;
    *active = primaries[dev] && primaries[dev]->live;
    LEAVE();
}

SIM_API CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev)
{
    ENTER();
    (void)flags;
    if (!valid_device(dev))
        RETURN(CUDA_ERROR_INVALID_DEVICE);
    if (tls_depth == STACK_DEPTH)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    struct sim_ctx *c = context_new(dev, 0);
    if (!c)
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    COUNT(contexts_created);
    tls_stack[tls_depth++] = c;
    *ctx = (CUcontext)c;
    LEAVE();
}

SIM_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    ENTER();
    struct sim_ctx *c = (struct sim_ctx *)ctx;
    if (!c || !known_context(c) || !c->live)
        RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (c->is_primary)
        RETURN(CUDA_ERROR_INVALID_CONTEXT);
    COUNT(contexts_destroyed);
    context_destroy(c);
    LEAVE();
}

SIM_API CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    ENTER();
    *ctx = (CUcontext)current();
    LEAVE();
}

SIM_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
    ENTER();
    struct sim_ctx *c = (struct sim_ctx *)ctx;
    if (!c) {
        if (tls_depth)
            tls_depth--;
        RETURN(CUDA_SUCCESS);
    }
    if (!known_context(c) || !c->live)
        RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (tls_depth)
        tls_stack[tls_depth - 1] = c;
    else
        tls_stack[tls_depth++] = c;
    LEAVE();
}

SIM_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    ENTER();
    struct sim_ctx *c = (struct sim_ctx *)ctx;
    if (!c || !known_context(c) || !c->live)
        RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (tls_depth == STACK_DEPTH)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    tls_stack[tls_depth++] = c;
    COUNT(ctx_pushes);
    LEAVE();
}

SIM_API CUresult cuCtxPopCurrent_v2(CUcontext *ctx)
{
    ENTER();
    if (!tls_depth)
        RETURN(CUDA_ERROR_INVALID_CONTEXT);
    struct sim_ctx *c = tls_stack[--tls_depth];
    if (ctx)
        *ctx = (CUcontext)c;
    COUNT(ctx_pops);
    LEAVE();
}

SIM_API CUresult cuCtxGetDevice(CUdevice *device)
{
    ENTER();
    CURRENT_CONTEXT(c);
    *device = c->device;
    LEAVE();
}

SIM_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long *id)
{
    ENTER();
    struct sim_ctx *c = ctx ? (struct sim_ctx *)ctx : current();
    if (!c || !known_context(c))
        RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (!c->live)
        RETURN(c->is_primary ? CUDA_ERROR_CONTEXT_IS_DESTROYED : CUDA_ERROR_INVALID_CONTEXT);
    *id = c->id;
    LEAVE();
}

SIM_API CUresult cuCtxSynchronize(void)
{
    ENTER();
    CURRENT_CONTEXT(c);
    COUNT(ctx_syncs);
    for (struct sim_stream *s = (void *)streams; s; s = (void *)s->o.next)
        if (s->o.live && s->ctx == c)
            drain(s);
    RETURN(c->sticky);
    LEAVE();
}

/* ---- streams ------------------------------------------------------------ */

SIM_API CUresult cuStreamCreate(CUstream *stream, unsigned int flags)
{
    ENTER();
    CURRENT_CONTEXT(c);
    if (flags & ~1u)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    struct sim_stream *s = sim_object_new(&streams, sizeof *s);
    if (!s)
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    s->ctx = c;
    s->flags = flags;
    COUNT(streams_created);
    *stream = (CUstream)s;
    LEAVE();
}

static struct sim_stream *find_stream(CUstream h) { return sim_object_find(streams, h); }

SIM_API CUresult cuStreamDestroy_v2(CUstream stream)
{
    ENTER();
    struct sim_stream *s = find_stream(stream);
    if (!s)
        RETURN(CUDA_ERROR_INVALID_HANDLE);
    /* Work already queued still completes. */
    drain(s);
    s->o.live = 0;
    COUNT(streams_destroyed);
    LEAVE();
}

SIM_API CUresult cuStreamSynchronize(CUstream stream)
{
    ENTER();
    COUNT(stream_syncs);
    if (is_null_stream(stream)) {
        CURRENT_CONTEXT(c);
        drain_blocking(c);
        RETURN(c->sticky);
    }
    struct sim_stream *s = find_stream(stream);
    if (!s)
        RETURN(CUDA_ERROR_INVALID_HANDLE);
    drain(s);
    RETURN(s->ctx->sticky);
    LEAVE();
}

SIM_API CUresult cuStreamQuery(CUstream stream)
{
    ENTER();
    if (is_null_stream(stream))
        RETURN(CUDA_SUCCESS);
    struct sim_stream *s = find_stream(stream);
    if (!s)
        RETURN(CUDA_ERROR_INVALID_HANDLE);
    RETURN(s->head ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS);
    LEAVE();
}

/* A stream's context, without needing it current; a null stream stands for
 * the current context's. */
SIM_API CUresult cuStreamGetCtx(CUstream stream, CUcontext *ctx)
{
    ENTER();
    if (!ctx)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    if (is_null_stream(stream)) {
        CURRENT_CONTEXT(c);
        *ctx = (CUcontext)c;
        RETURN(CUDA_SUCCESS);
    }
    struct sim_stream *s = find_stream(stream);
    if (!s)
        RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!s->ctx->live)
        RETURN(CUDA_ERROR_CONTEXT_IS_DESTROYED);
    *ctx = (CUcontext)s->ctx;
    LEAVE();
}

/* ---- events --------------------------------------------------------------- */

static struct sim_event *find_event(CUevent h) { return sim_object_find(events, h); }

/* Complete: never recorded, recorded where work runs at once, or the
 * recorded stream has run up to the record. */
static int event_complete(const struct sim_event *e) { return !e->stream || e->stream->done >= e->seq; }

SIM_API CUresult cuEventCreate(CUevent *event, unsigned int flags)
{
    ENTER();
    CURRENT_CONTEXT(c);
    /* CU_EVENT_BLOCKING_SYNC, CU_EVENT_DISABLE_TIMING, CU_EVENT_INTERPROCESS */
    if (!event || flags & ~7u)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    struct sim_event *e = sim_object_new(&events, sizeof *e);
    if (!e)
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    e->ctx = c;
    COUNT(events_created);
    *event = (CUevent)e;
    LEAVE();
}

SIM_API CUresult cuEventDestroy_v2(CUevent event)
{
    ENTER();
    struct sim_event *e = find_event(event);
    if (!e)
        RETURN(CUDA_ERROR_INVALID_HANDLE);
    /* Waits already queued on it keep their point: they copied it. */
    e->o.live = 0;
    COUNT(events_destroyed);
    LEAVE();
}

/* The event and the stream must share a context, as the driver requires. */
SIM_API CUresult cuEventRecord(CUevent event, CUstream stream)
{
    ENTER();
    CURRENT_STREAM(c, s, stream);
    struct sim_event *e = find_event(event);
    if (!e || e->ctx != c)
        RETURN(CUDA_ERROR_INVALID_HANDLE);
    COUNT(event_records);
    if (!s) {
        /* The legacy stream runs work at once, after the blocking streams. */
        drain_blocking(c);
        e->stream = NULL;
        e->seq = 0;
    } else {
        e->stream = s;
        e->seq = s->queued;
    }
    LEAVE();
}

/* The event may come from another context, as the driver allows; the
 * waiting stream must be usable in the current one. */
SIM_API CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags)
{
    ENTER();
    CURRENT_STREAM(c, s, stream);
    struct sim_event *e = find_event(event);
    if (!e)
        RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (flags)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    COUNT(event_waits);
    if (event_complete(e))
        RETURN(CUDA_SUCCESS);
    /* On a deferred stream, a dependency; on the legacy stream, which runs
     * work at once, the recorded work runs now. */
    struct sim_op op = {.type = OP_WAIT, .on = e->stream, .upto = e->seq};
    RETURN(enqueue(s, c, &op));
    LEAVE();
}

SIM_API CUresult cuEventQuery(CUevent event)
{
    ENTER();
    struct sim_event *e = find_event(event);
    if (!e)
        RETURN(CUDA_ERROR_INVALID_HANDLE);
    RETURN(event_complete(e) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY);
    LEAVE();
}

/* A host wait for the event: counted as one. */
SIM_API CUresult cuEventSynchronize(CUevent event)
{
    ENTER();
    struct sim_event *e = find_event(event);
    if (!e)
        RETURN(CUDA_ERROR_INVALID_HANDLE);
    COUNT(event_syncs);
    if (e->stream) {
        drain_until(e->stream, e->seq);
        RETURN(e->stream->ctx->sticky);
    }
    LEAVE();
}

/* ---- device memory ---------------------------------------------------- */

SIM_API CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t size)
{
    ENTER();
    CURRENT_CONTEXT(c);
    CUresult r = device_alloc(size, c, ptr);
    if (!r)
        COUNT(allocs);
    RETURN(r);
    LEAVE();
}

/* The device allocation that starts at `ptr` and may be freed, or NULL:
 * an invalid free, counted. */
static struct sim_alloc *freeable(CUdeviceptr ptr)
{
    struct sim_alloc *a = find_alloc(ptr, 0);
    if (!a || a->base != ptr || a->kind != K_DEVICE || a->free_pending) {
        COUNT(invalid_frees);
        return NULL;
    }
    return a;
}

/* Synchronous frees wait for the work queued on the allocation's context. */
SIM_API CUresult cuMemFree_v2(CUdeviceptr ptr)
{
    ENTER();
    CURRENT_CONTEXT(c);
    struct sim_alloc *a = freeable(ptr);
    if (!a)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    for (struct sim_stream *s = (void *)streams; s; s = (void *)s->o.next)
        if (s->o.live && s->ctx == a->ctx)
            drain(s);
    COUNT(frees);
    alloc_destroy(a);
    LEAVE();
}

SIM_API CUresult cuMemAllocAsync(CUdeviceptr *ptr, size_t size, CUstream stream)
{
    ENTER();
    CURRENT_STREAM(c, s, stream);
    CUresult r = device_alloc(size, c, ptr);
    if (!r)
        COUNT(async_allocs);
    RETURN(r);
    LEAVE();
}

SIM_API CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream stream)
{
    ENTER();
    CURRENT_STREAM(c, s, stream);
    struct sim_alloc *a = freeable(ptr);
    if (!a)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    a->free_pending = 1;
    COUNT(async_frees);
    struct sim_op op = {.type = OP_FREE, .dst = ptr};
    RETURN(enqueue(s, c, &op));
    LEAVE();
}

/* Queues `op` on `stream` (a synchronous call passes the legacy stream, and
 * returns the context's pending fault). */
static CUresult queue_op(CUstream stream, struct sim_op *op, int sync)
{
    struct sim_ctx *c;
    struct sim_stream *s;
    CUresult r = require_stream(stream, &c, &s);
    if (r)
        return r;
    /* Addresses are checked when the call is made, as the driver does;
     * they are used when the operation runs. */
    switch (op->type) {
    case OP_HTOD:
        if (!device_bytes(op->dst, op->n) || in_device_range(op->src, op->n))
            return CUDA_ERROR_INVALID_VALUE;
        COUNT(copies_htod);
        break;
    case OP_DTOH:
        if (!device_bytes(op->src, op->n) || in_device_range(op->dst, op->n))
            return CUDA_ERROR_INVALID_VALUE;
        COUNT(copies_dtoh);
        break;
    case OP_DTOD:
        if (!device_bytes(op->src, op->n) || !device_bytes(op->dst, op->n))
            return CUDA_ERROR_INVALID_VALUE;
        COUNT(copies_dtod);
        break;
    case OP_MEMSET:
        if (!device_bytes(op->dst, op->n))
            return CUDA_ERROR_INVALID_VALUE;
        COUNT(memsets);
        break;
    default: break;
    }
    r = enqueue(s, c, op);
    if (!r && sync)
        r = c->sticky;
    return r;
}

SIM_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream)
{
    ENTER();
    struct sim_op op = {.type = OP_MEMSET, .dst = dst, .n = n, .value = value};
    RETURN(queue_op(stream, &op, 0));
    LEAVE();
}

SIM_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n)
{
    ENTER();
    struct sim_op op = {.type = OP_MEMSET, .dst = dst, .n = n, .value = value};
    RETURN(queue_op(NULL, &op, 1));
    LEAVE();
}

SIM_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream stream)
{
    ENTER();
    struct sim_op op = {.type = OP_HTOD, .dst = dst, .src = (uintptr_t)src, .n = n};
    RETURN(queue_op(stream, &op, 0));
    LEAVE();
}

SIM_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream stream)
{
    ENTER();
    struct sim_op op = {.type = OP_DTOH, .dst = (uintptr_t)dst, .src = src, .n = n};
    RETURN(queue_op(stream, &op, 0));
    LEAVE();
}

SIM_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
    ENTER();
    struct sim_op op = {.type = OP_DTOD, .dst = dst, .src = src, .n = n};
    RETURN(queue_op(stream, &op, 0));
    LEAVE();
}

SIM_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    ENTER();
    struct sim_op op = {.type = OP_HTOD, .dst = dst, .src = (uintptr_t)src, .n = n};
    RETURN(queue_op(NULL, &op, 1));
    LEAVE();
}

SIM_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    ENTER();
    struct sim_op op = {.type = OP_DTOH, .dst = (uintptr_t)dst, .src = src, .n = n};
    RETURN(queue_op(NULL, &op, 1));
    LEAVE();
}

SIM_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    ENTER();
    struct sim_op op = {.type = OP_DTOD, .dst = dst, .src = src, .n = n};
    RETURN(queue_op(NULL, &op, 1));
    LEAVE();
}

SIM_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    ENTER();
    *free_bytes = memory_budget - memory_used;
    *total = memory_budget;
    LEAVE();
}

/* ---- host and managed memory ------------------------------------------ */

static CUresult host_alloc(void **pp, size_t size, enum alloc_kind kind)
{
    struct sim_ctx *c;
    CUresult r = require_context(&c);
    if (r)
        return r;
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = NULL;
    if (posix_memalign(&p, 4096, size))
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(p, 0, size);
    struct sim_alloc *a = alloc_new(kind, (uintptr_t)p, size, c);
    if (!a) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemAllocHost_v2(void **pp, size_t size)
{
    ENTER();
    COUNT(host_allocs);
    RETURN(host_alloc(pp, size, K_PINNED));
    LEAVE();
}

SIM_API CUresult cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
    ENTER();
    (void)flags;
    COUNT(host_allocs);
    RETURN(host_alloc(pp, size, K_PINNED));
    LEAVE();
}

SIM_API CUresult cuMemFreeHost(void *p)
{
    ENTER();
    struct sim_alloc *a = find_alloc((uintptr_t)p, 0);
    if (!a || a->kind != K_PINNED || a->base != (uintptr_t)p)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    alloc_destroy(a);
    LEAVE();
}

SIM_API CUresult cuMemAllocManaged(CUdeviceptr *ptr, size_t size, unsigned int flags)
{
    ENTER();
    (void)flags;
    void *p;
    COUNT(managed_allocs);
    CHECK(host_alloc(&p, size, K_MANAGED));
    *ptr = (CUdeviceptr)(uintptr_t)p;
    LEAVE();
}

SIM_API CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
    ENTER();
    (void)flags;
    CURRENT_CONTEXT(c);
    if (!p || !size)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    for (struct sim_alloc *a = allocs; a; a = a->next)
        if ((uintptr_t)p < a->base + a->size && (uintptr_t)p + size > a->base)
            RETURN(HOST_MEMORY_ALREADY_REGISTERED);
    if (!alloc_new(K_REGISTERED, (uintptr_t)p, size, c))
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    COUNT(host_registers);
    LEAVE();
}

SIM_API CUresult cuMemHostUnregister(void *p)
{
    ENTER();
    struct sim_alloc *a = find_alloc((uintptr_t)p, 0);
    if (!a || a->kind != K_REGISTERED || a->base != (uintptr_t)p)
        RETURN(HOST_MEMORY_NOT_REGISTERED);
    alloc_destroy(a);
    LEAVE();
}

/* ---- pointer attributes -------------------------------------------------- */

SIM_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    ENTER();
    COUNT(pointer_queries);
    struct sim_alloc *a = find_alloc(ptr, 0);
    if (!a)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = a->kind == K_VMM ? NULL : (CUcontext)a->ctx;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data =
            a->kind == K_PINNED || a->kind == K_REGISTERED ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
    case 3: /* CU_POINTER_ATTRIBUTE_DEVICE_POINTER */ *(CUdeviceptr *)data = ptr; break;
    case 4: /* CU_POINTER_ATTRIBUTE_HOST_POINTER */
        if (a->store)
            RETURN(CUDA_ERROR_INVALID_VALUE);
        *(void **)data = (void *)(uintptr_t)ptr;
        break;
    case 7: /* CU_POINTER_ATTRIBUTE_BUFFER_ID */ *(unsigned long long *)data = a->buffer_id; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned int *)data = a->kind == K_MANAGED; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = a->device; break;
    case 11: /* CU_POINTER_ATTRIBUTE_RANGE_START_ADDR */ *(CUdeviceptr *)data = a->base; break;
    case 12: /* CU_POINTER_ATTRIBUTE_RANGE_SIZE */ *(size_t *)data = a->size; break;
    default: RETURN(CUDA_ERROR_INVALID_VALUE);
    }
    LEAVE();
}

/* ---- virtual memory management ------------------------------------------ */

static int valid_prop(const CUmemAllocationProp *prop)
{
    return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
           valid_device(prop->location.id) && !prop->win32HandleMetaData;
}

SIM_API CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option)
{
    ENTER();
    if (!valid_prop(prop) || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                              option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        RETURN(CUDA_ERROR_INVALID_VALUE);
    *g = granularity;
    LEAVE();
}

static struct sim_phys *find_phys(CUmemGenericAllocationHandle h)
{
    for (struct sim_phys *p = physicals; p; p = p->next)
        if ((CUmemGenericAllocationHandle)(uintptr_t)p == h && !p->released)
            return p;
    return NULL;
}

/* Physical memory of `size` bytes on `device` over descriptor `fd`, which
 * the simulator now owns (closed on failure), exportable as the handle
 * types `requested`: its handle in *handle. */
static CUresult phys_new(int fd, size_t size, int device, int requested, CUmemGenericAllocationHandle *handle)
{
    struct sim_phys *p = calloc(1, sizeof *p);
    if (!p) {
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->fd = fd;
    p->size = size;
    p->device = device;
    p->requested = requested;
    p->next = physicals;
    physicals = p;
    memory_used += size;
    COUNT(vmm_live);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                             unsigned long long flags)
{
    ENTER();
    if (!valid_prop(prop) || flags || size == 0 || size % granularity)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    if (prop->requestedHandleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        RETURN(CUDA_ERROR_NOT_SUPPORTED);
    if (size > memory_budget - memory_used)
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    int fd = memfd_create("tack-sim-cuda-vmm", MFD_CLOEXEC);
    if (fd < 0)
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    if (ftruncate(fd, (off_t)size)) {
        close(fd);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    /* Not zeros: whoever allocates must clear it. */
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        close(fd);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    memset(m, 0xA5, size);
    munmap(m, size);
    CUresult r = phys_new(fd, size, prop->location.id, prop->requestedHandleTypes, handle);
    if (!r)
        COUNT(vmm_creates);
    RETURN(r);
    LEAVE();
}

SIM_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    ENTER();
    struct sim_phys *p = find_phys(handle);
    if (!p)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    COUNT(vmm_releases);
    p->released = 1;
    /* Mappings keep the memory until they are unmapped. */
    if (p->maps == 0)
        phys_destroy(p);
    LEAVE();
}

SIM_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags)
{
    ENTER();
    (void)addr;
    if (size == 0 || size % granularity || flags || (alignment && alignment & (alignment - 1)))
        RETURN(CUDA_ERROR_INVALID_VALUE);
    void *va = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (va == MAP_FAILED)
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    struct sim_reservation *v = calloc(1, sizeof *v);
    if (!v) {
        munmap(va, size);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    v->base = (uintptr_t)va;
    v->size = size;
    v->next = reservations;
    reservations = v;
    *ptr = v->base;
    LEAVE();
}

SIM_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    ENTER();
    for (struct sim_reservation **p = &reservations; *p; p = &(*p)->next) {
        struct sim_reservation *v = *p;
        if (v->base == ptr && v->size == size) {
            for (struct sim_alloc *a = allocs; a; a = a->next)
                if (a->kind == K_VMM && a->base >= v->base && a->base < v->base + v->size)
                    RETURN(CUDA_ERROR_INVALID_VALUE); /* still mapped */
            *p = v->next;
            munmap((void *)v->base, v->size);
            free(v);
            RETURN(CUDA_SUCCESS);
        }
    }
    RETURN(CUDA_ERROR_INVALID_VALUE);
    LEAVE();
}

SIM_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags)
{
    ENTER();
    struct sim_phys *p = find_phys(handle);
    if (!p || flags || size == 0 || offset > p->size || size > p->size - offset || size % granularity)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    int reserved = 0;
    for (struct sim_reservation *v = reservations; v; v = v->next)
        if (ptr >= v->base && ptr + size <= v->base + v->size)
            reserved = 1;
    if (!reserved)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    for (struct sim_alloc *a = allocs; a; a = a->next)
        if (a->kind == K_VMM && ptr < a->base + a->size && ptr + size > a->base)
            RETURN(208); /* CUDA_ERROR_ALREADY_MAPPED */
    void *store = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, (off_t)offset);
    if (store == MAP_FAILED)
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    struct sim_alloc *a = alloc_new(K_VMM, ptr, size, NULL);
    if (!a) {
        munmap(store, size);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    a->device = p->device;
    a->map_size = size;
    a->store = store;
    a->phys = p;
    p->maps++;
    COUNT(vmm_maps);
    LEAVE();
}

SIM_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    ENTER();
    struct sim_alloc *a = find_alloc(ptr, 0);
    if (!a || a->kind != K_VMM || a->base != ptr || a->size != size)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    COUNT(vmm_unmaps);
    alloc_destroy(a);
    LEAVE();
}

SIM_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    ENTER();
    if (!desc || count == 0)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < count; i++)
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device(desc[i].location.id) ||
            (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE && desc[i].flags != 1 && desc[i].flags != 0))
            RETURN(CUDA_ERROR_INVALID_VALUE);
    /* The whole range must be mapped. */
    size_t covered = 0;
    for (struct sim_alloc *a = allocs; a; a = a->next)
        if (a->kind == K_VMM && a->base >= ptr && a->base + a->size <= ptr + size)
            covered += a->size;
    if (covered != size)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    for (struct sim_alloc *a = allocs; a; a = a->next)
        if (a->kind == K_VMM && a->base >= ptr && a->base + a->size <= ptr + size)
            for (size_t i = 0; i < count; i++)
                if (desc[i].location.id == a->device)
                    a->access = desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    LEAVE();
}

SIM_API CUresult cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle handle,
                                              CUmemAllocationHandleType type, unsigned long long flags)
{
    ENTER();
    struct sim_phys *p = find_phys(handle);
    if (!p || flags || !out)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !(p->requested & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        RETURN(CUDA_ERROR_INVALID_VALUE);
    /* Each export is a new descriptor the caller owns. */
    int fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    *(int *)out = fd;
    COUNT(exports);
    LEAVE();
}

SIM_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *os_handle,
                                                CUmemAllocationHandleType type)
{
    ENTER();
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    int fd = (int)(intptr_t)os_handle;
    struct stat st;
    if (fstat(fd, &st) || st.st_size <= 0)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult r = phys_new(own, (size_t)st.st_size, 0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, handle);
    if (!r)
        COUNT(imports);
    RETURN(r);
    LEAVE();
}

/* ---- modules and launches ---------------------------------------------- */

/* What a driver checks in PTX before it JITs it: the `.version` its JIT
 * reads, a `.target` (sm_NN, maybe with a suffix) the GPU can run. */
static CUresult check_ptx(const char *text)
{
    if (strstr(text, "tack-sim: invalid"))
        return CUDA_ERROR_INVALID_PTX;
    const char *v = strstr(text, ".version"), *t = strstr(text, ".target");
    int major, minor, target;
    if (!v || sscanf(v, ".version %d.%d", &major, &minor) != 2 || !t || sscanf(t, ".target sm_%d", &target) != 1)
        return CUDA_ERROR_INVALID_PTX;
    if (10 * major + minor > newest_ptx_isa(driver_version()))
        return UNSUPPORTED_PTX_VERSION;
    return target > compute_capability() ? CUDA_ERROR_INVALID_PTX : CUDA_SUCCESS;
}

/* The CUDA version, 10 * major + minor, of the toolkit that made a CUBIN,
 * from its .note.nv.cuinfo (owner "NVIDIA Corp", type 1000; the description
 * is 16-bit words: note version, architecture, toolkit version); 0 when it
 * has none. */
static int cubin_toolkit(const unsigned char *image, const Elf64_Ehdr *eh)
{
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, image + eh->e_shoff + (size_t)i * eh->e_shentsize, sizeof sh);
        if (sh.sh_type != SHT_NOTE || sh.sh_size < sizeof(Elf64_Nhdr))
            continue;
        Elf64_Nhdr nh;
        memcpy(&nh, image + sh.sh_offset, sizeof nh);
        size_t name = (nh.n_namesz + 3u) & ~3u;
        if (nh.n_type != 1000 || nh.n_namesz != 12 || memcmp(image + sh.sh_offset + sizeof nh, "NVIDIA Corp", 12) ||
            nh.n_descsz < 6 || sizeof nh + name + nh.n_descsz > sh.sh_size)
            continue;
        uint16_t words[3];
        memcpy(words, image + sh.sh_offset + sizeof nh + name, sizeof words);
        return words[2];
    }
    return 0;
}

/* What a driver checks in a CUBIN before it loads it; *size is set to the
 * file's length, which the ELF headers tell (the API passes no size). */
static CUresult check_cubin(const unsigned char *image, size_t *size)
{
    Elf64_Ehdr eh;
    memcpy(&eh, image, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_CUDA || eh.e_shentsize != sizeof(Elf64_Shdr))
        return CUDA_ERROR_INVALID_IMAGE;
    size_t end = eh.e_shoff + (size_t)eh.e_shnum * eh.e_shentsize;
    if (eh.e_phoff + (size_t)eh.e_phnum * eh.e_phentsize > end)
        end = eh.e_phoff + (size_t)eh.e_phnum * eh.e_phentsize;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, image + eh.e_shoff + (size_t)i * eh.e_shentsize, sizeof sh);
        if (sh.sh_type != SHT_NOBITS && sh.sh_offset + sh.sh_size > end)
            end = sh.sh_offset + sh.sh_size;
    }
    *size = end;
    /* The architecture sits in the flags' low byte in the first CUDA ELF
     * ABI (version 7), in their second byte from version 8 on. */
    unsigned arch = eh.e_ident[EI_ABIVERSION] < 8 ? eh.e_flags & 0xffu : (eh.e_flags >> 8) & 0xffu;
    int cc = compute_capability();
    if ((int)arch / 10 != cc / 10 || (int)arch % 10 > cc % 10)
        return NO_BINARY_FOR_GPU;
    int toolkit = cubin_toolkit(image, &eh);
    return toolkit / 10 > driver_version() / 1000 ? CUDA_ERROR_INVALID_IMAGE : CUDA_SUCCESS;
}

SIM_API CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    ENTER();
    CURRENT_CONTEXT(c);
    if (!image)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    /* The simulator cannot compile or run either kind; it checks what the
     * driver would refuse, and keeps the image to find entry points in. */
    int cubin = !memcmp(image, ELFMAG, SELFMAG);
    size_t size = 0;
    CUresult r = cubin ? check_cubin(image, &size) : check_ptx(image);
    if (r != CUDA_SUCCESS) {
        COUNT(modules_refused);
        RETURN(r);
    }
    if (!cubin)
        size = strlen(image) + 1;
    char *copy = malloc(size);
    struct sim_module *m = copy ? sim_object_new(&modules, sizeof *m) : NULL;
    if (!m) {
        free(copy);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    memcpy(copy, image, size);
    m->ctx = c;
    m->image = copy;
    m->size = size;
    COUNT(modules_loaded);
    if (cubin)
        COUNT(modules_cubin);
    else
        COUNT(modules_ptx);
    *module = (CUmodule)m;
    LEAVE();
}

static struct sim_module *find_module(CUmodule h) { return sim_object_find(modules, h); }

SIM_API CUresult cuModuleUnload(CUmodule module)
{
    ENTER();
    struct sim_module *m = find_module(module);
    if (!m)
        RETURN(CUDA_ERROR_INVALID_HANDLE);
    m->o.live = 0;
    LEAVE();
}

SIM_API CUresult cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name)
{
    ENTER();
    struct sim_module *m = find_module(module);
    if (!m)
        RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!name || !*name || strlen(name) >= sizeof functions->name || !memmem(m->image, m->size, name, strlen(name)))
        RETURN(CUDA_ERROR_NOT_FOUND);
    struct sim_function *f = calloc(1, sizeof *f);
    if (!f)
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    f->module = m;
    snprintf(f->name, sizeof f->name, "%s", name);
    f->next = functions;
    functions = f;
    *function = (CUfunction)f;
    LEAVE();
}

SIM_API CUresult cuLaunchKernel(CUfunction function, unsigned int gx, unsigned int gy, unsigned int gz,
                                unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                CUstream stream, void **params, void **extra)
{
    ENTER();
    (void)shared;
    (void)extra;
    CURRENT_STREAM(c, s, stream);
    struct sim_function *f = NULL;
    for (struct sim_function *k = functions; k; k = k->next)
        if ((CUfunction)k == function)
            f = k;
    if (!f || !f->module->o.live)
        RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (f->module->ctx != c)
        RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (!gx || !gy || !gz || !bx || !by || !bz || (unsigned long long)bx * by * bz > 1024)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    COUNT(launches);
    struct sim_op op = {.type = OP_LAUNCH};
    /* The driver copies the argument values at launch; a host kernel hook
     * captures what it needs now and runs when the stream does. */
    if (kernel_capture) {
        const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
        op.closure = kernel_capture(f->name, params, grid, block);
    }
    RETURN(enqueue(s, c, &op));
    LEAVE();
}

/* ---- test hooks ---------------------------------------------------------- */

/* The counter called `name`, or -1 for an unknown name. */
SIM_API long long tack_sim_cuda_stats(const char *name)
{
    return SIM_STAT(name);
}

/* Makes the nth next call (1: the next one) of entry point `symbol` (its
 * exported name, e.g. "cuMemAllocAsync") return `error`. Returns 0, or -1
 * when the table of pending failures is full. */
SIM_API int tack_sim_cuda_fail(const char *symbol, int error, int nth)
{
    return sim_failure_arm(&lock, &failures, symbol, error, nth);
}

/* The host storage behind [ptr, ptr + n) of device-visible memory, or NULL:
 * what a host kernel hook reads and writes. */
SIM_API void *tack_sim_cuda_host_address(CUdeviceptr ptr, size_t n)
{
    pthread_mutex_lock(&lock);
    void *p = device_bytes(ptr, n);
    pthread_mutex_unlock(&lock);
    return p;
}

/* Installs host implementations of kernels: `capture` is called at launch
 * with the function name, the launch's argument pointers and its geometry,
 * and returns a closure (malloc'd) that `run` executes, and frees, when the
 * stream reaches the launch. NULL uninstalls. */
SIM_API void tack_sim_cuda_set_kernel_hook(sim_capture_fn capture, sim_run_fn run)
{
    pthread_mutex_lock(&lock);
    kernel_capture = capture;
    kernel_run = run;
    pthread_mutex_unlock(&lock);
}
