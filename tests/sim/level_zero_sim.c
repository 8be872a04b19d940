/*
 * A simulated Level Zero driver for CI machines without a GPU: the subset of
 * the API Tack calls (and tests call to play "another library"), over host
 * memory. Select it with TACK_LEVEL_ZERO_LIBRARY=<path to this library>.
 *
 * What it models, because Tack's design depends on it:
 * - one driver (TACK_SIM_ZE_DRIVERS=0: none) with TACK_SIM_ZE_DEVICES
 *   devices (default 2); TACK_SIM_ZE_INIT_ERROR=<code> makes zeInit fail;
 *   every call before zeInit fails with ZE_RESULT_ERROR_UNINITIALIZED;
 * - several contexts on one driver, allocations tagged by the context that
 *   made them and freed only in it (zeMemFree in another context is an
 *   error, and counted), and destroyed with it;
 * - zeMemGetAllocProperties reporting device memory for a pointer from ANY
 *   context, as the real driver does (the spec's Level Zero section), and
 *   ZE_MEMORY_TYPE_UNKNOWN, successfully, for memory it does not know;
 * - device memory at addresses the host cannot touch (PROT_NONE), backed by
 *   separate storage, so host code that dereferences a device pointer
 *   crashes as it would on a GPU; fresh device memory is filled with 0xA5;
 * - command queue groups: group 0 only copies, group 1 computes, so a
 *   queue made on "group 0 because it usually computes" is caught;
 * - immediate command lists (work done on return) and command queues whose
 *   executed lists run only when the host waits for them: at
 *   zeCommandQueueSynchronize (all of it) or zeFenceHostSynchronize (up to
 *   the fence's execution), never on their own and never because of a
 *   later immediate-list command, which the real driver does not order
 *   against a queue either. So a wait Tack leaves out reads stale memory.
 *   Resetting a command list or fence the queue has not finished with is
 *   counted (resets_in_flight) as a fault; launches are numbered as they
 *   are appended and the order they run in is logged;
 * - frees: zeMemFree of memory queued work still uses is counted as a
 *   fault, zeMemFreeExt's deferred policy frees it once that work has run;
 * - the memory-free-policies extension (TACK_SIM_ZE_FREE_POLICIES, default
 *   3 = blocking | defer; 0 models a driver without it), changeable at run
 *   time with tack_sim_ze_set_free_policies;
 * - counters of every ...Destroy call, so a test proves Tack destroys no
 *   Level Zero object.
 *
 * Test hooks (ctypes or dlsym): tack_sim_ze_stats(name) returns a counter;
 * tack_sim_ze_fail(symbol, result, nth) makes the nth next call of an entry
 * point fail; tack_sim_ze_create_context(device_index, handles) makes
 * "another library's" context; tack_sim_ze_alloc / tack_sim_ze_free allocate
 * as that library; tack_sim_ze_allocation_context(ptr) and
 * tack_sim_ze_allocations_in(context) say where memory lives,
 * tack_sim_ze_lists_in(context, group) where command lists were made;
 * tack_sim_ze_host_address(ptr, n) gives the storage behind device memory;
 * tack_sim_ze_set_fp64(0) makes devices report no fp64 in their module
 * properties from then on (a GPU without double precision);
 * tack_sim_ze_launches_pending() counts launches executed on a queue and
 * not yet run, tack_sim_ze_launch_run(i) gives the number (1, 2, ... in
 * append order) of the i-th launch to run; tack_sim_ze_queues_in(context,
 * group) and tack_sim_ze_immediate_lists_in(context) count queues and
 * immediate lists made there.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/driver/level_zero.h"
#include "sim_common.h"
#include "sim_memory.h"

/* The entry points, declared from the same list Tack loads, so a signature
 * that drifts from Tack's table does not compile. */
TACK_ZE_FUNCTIONS(SIM_PROTOTYPE)

/* Entry points Tack must never call, counted; and the test hooks. */
SIM_API tack_ze_result zeContextDestroy(tack_ze_context c);
SIM_API tack_ze_result zeCommandQueueDestroy(tack_ze_command_queue q);
SIM_API tack_ze_result zeCommandListDestroy(tack_ze_command_list l);
SIM_API tack_ze_result zeModuleDestroy(tack_ze_module m);
SIM_API tack_ze_result zeModuleBuildLogDestroy(tack_ze_module_build_log l);
SIM_API tack_ze_result zeKernelDestroy(tack_ze_kernel k);
SIM_API tack_ze_result zeEventDestroy(tack_ze_event e);
SIM_API tack_ze_result zeEventPoolDestroy(void *pool);
SIM_API tack_ze_result zeFenceDestroy(tack_ze_fence f);
SIM_API long long tack_sim_ze_stats(const char *name);
SIM_API int tack_sim_ze_fail(const char *symbol, uint32_t result, int nth);
SIM_API uint32_t tack_sim_ze_create_context(int device_index, uint64_t handles[3]);
SIM_API uint64_t tack_sim_ze_alloc(uint64_t context, uint64_t device, int kind, size_t size);
SIM_API uint32_t tack_sim_ze_free(uint64_t context, uint64_t ptr);
SIM_API uint64_t tack_sim_ze_allocation_context(uint64_t ptr);
SIM_API int tack_sim_ze_allocation_device(uint64_t ptr);
SIM_API long tack_sim_ze_allocations_in(uint64_t context);
SIM_API void *tack_sim_ze_host_address(uint64_t ptr, size_t n);
SIM_API void tack_sim_ze_set_free_policies(uint32_t policies);
SIM_API long tack_sim_ze_lists_in(uint64_t context, int group);
SIM_API void tack_sim_ze_set_fp64(int supported);
SIM_API long tack_sim_ze_launches_pending(void);
SIM_API long long tack_sim_ze_launch_run(long i);
SIM_API long tack_sim_ze_queues_in(uint64_t context, int group);
SIM_API long tack_sim_ze_immediate_lists_in(uint64_t context);

#define MAX_DEVICES 16
#define ZE_ERROR_UNSUPPORTED_ALIGNMENT 0x7800000au
#define ZE_ERROR_INVALID_SYNCHRONIZATION_OBJECT 0x7800000bu
#define ZE_ERROR_INVALID_KERNEL_NAME 0x78000011u
#define ZE_ERROR_INVALID_COMMAND_LIST_TYPE 0x78000019u
#define ZE_ERROR_NOT_AVAILABLE 0x70010001u
#define GROUPS 2
#define COPY_GROUP 0
#define COMPUTE_GROUP 1

/* ---- counters ---------------------------------------------------------- */

#define SIM_STATS(X)                                                                                          \
    X(init) X(contexts_created) X(contexts_destroyed) X(lists_created) X(immediate_lists_created)             \
        X(lists_destroyed) X(queues_created) X(queues_destroyed) X(modules_created) X(modules_destroyed)      \
            X(kernels_created) X(kernels_destroyed) X(build_logs_destroyed) X(events_destroyed)               \
                X(event_pools_destroyed) X(fences_destroyed) X(destroys) X(allocs) X(live_allocs) X(frees)    \
                    X(deferred_frees) X(blocking_frees) X(invalid_frees) X(wrong_context_frees)               \
                        X(frees_in_use) X(pointer_queries) X(copies) X(fills) X(executes) X(queue_syncs)      \
                            X(launches) X(launches_run) X(fences_created) X(fence_syncs)               \
                                X(fence_resets) X(list_resets) X(resets_in_flight) X(faults)            \
                                    X(injected_failures)

SIM_DEFINE_STATS(SIM_STATS);

#define COUNT_DESTROY(n)                                                                                      \
    do {                                                                                                      \
        COUNT(n);                                                                                             \
        COUNT(destroys);                                                                                      \
    } while (0)

/* ---- state ------------------------------------------------------------- */

struct tack_ze_driver_object {
    int unused;
};

struct tack_ze_device_object {
    int index;
};

/* Contexts, command lists and queues, fences and kernels are objects
 * (sim_common.h), listed by kind. */
struct tack_ze_context_object {
    struct sim_object o;
    unsigned long long id;
};

enum alloc_kind { K_HOST = 1, K_DEVICE = 2, K_SHARED = 3 }; /* the ze_memory_type_t values */

struct sim_alloc {
    struct sim_region r; /* first: the entry of `allocs` (host and shared kinds: base is the storage) */
    enum alloc_kind kind;
    struct tack_ze_context_object *ctx;
    int device;
    unsigned long long id;
    int free_deferred; /* freed once the queued work that uses it has run */
};

enum op_type { OP_COPY, OP_FILL, OP_LAUNCH };

struct sim_op {
    enum op_type type;
    unsigned long long seq;  /* the queue execution it belongs to */
    long long launch;        /* a launch's number, in append order */
    uintptr_t dst, src;
    size_t n;
    unsigned char pattern[16];
    size_t pattern_size;
    struct tack_ze_kernel_object *kernel;
    void *closure;
    struct sim_op *next;
};

struct tack_ze_command_list_object {
    struct sim_object o;
    struct tack_ze_context_object *ctx;
    int device;
    int immediate;
    uint32_t group;
    int closed;
    struct sim_op *head, *tail;
    /* The queue execution that last took this list: it may be reset only
     * once that has run. */
    struct tack_ze_command_queue_object *pending_queue;
    unsigned long long pending_seq;
};

struct tack_ze_command_queue_object {
    struct sim_object o;
    struct tack_ze_context_object *ctx;
    int device;
    uint32_t group;
    struct sim_op *head, *tail; /* executed, not yet run */
    unsigned long long executed; /* executions so far */
    unsigned long long done;     /* executions run to completion */
};

/* Unsignalled until reset; after an execution takes it, signalled once the
 * queue has run that far. */
struct tack_ze_fence_object {
    struct sim_object o; /* live while the simulator runs */
    struct tack_ze_command_queue_object *queue;
    int taken;
    unsigned long long seq;
};

struct tack_ze_module_object {
    struct tack_ze_context_object *ctx;
    int device;
    char *il;
    size_t size;
    int live;
};

struct tack_ze_module_build_log_object {
    char text[256];
};

struct tack_ze_kernel_object {
    struct sim_object o;
    struct tack_ze_module_object *module;
    char name[128];
    uint32_t group[3];
    void *args[64];
    size_t arg_sizes[64];
};

static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static int initialized;
static int configured;
static int n_drivers = 1;
static int n_devices = 2;
static tack_ze_result init_error;
static uint32_t free_policies = 3;
static int fp64 = 1;
static struct tack_ze_driver_object driver;
static struct tack_ze_device_object devices[MAX_DEVICES];
static unsigned long long next_id = 1;
/* Objects are never freed, so a stale handle stays readable. */
static struct sim_object *contexts, *lists, *queues, *fences;
/* The number of each launch as it runs, in run order. */
#define RUN_LOG 4096
static long long run_log[RUN_LOG];
static long run_count;
static struct sim_region *allocs;
/* Kernels, listed like every other object (never freed), so that one whose
 * module Tack leaves to the driver is still accounted for. */
static struct sim_object *kernels;

typedef void *(*sim_capture_fn)(const char *name, void *const *args, const size_t *sizes, int nargs,
                                const uint32_t groups[3], const uint32_t group_size[3]);
typedef void (*sim_run_fn)(void *closure);
SIM_API void tack_sim_ze_set_kernel_hook(sim_capture_fn capture, sim_run_fn run);
static sim_capture_fn kernel_capture;
static sim_run_fn kernel_run;

/* ---- failure injection --------------------------------------------------- */

static struct sim_failures failures;

/* The environment is read once, at the first call of any entry point. */
static void configure(void)
{
    if (configured)
        return;
    configured = 1;
    n_drivers = sim_env_int("TACK_SIM_ZE_DRIVERS", 1) > 0 ? 1 : 0;
    n_devices = sim_env_int("TACK_SIM_ZE_DEVICES", 2);
    if (n_devices < 0)
        n_devices = 0;
    if (n_devices > MAX_DEVICES)
        n_devices = MAX_DEVICES;
    for (int i = 0; i < MAX_DEVICES; i++)
        devices[i].index = i;
    init_error = (tack_ze_result)sim_env_int("TACK_SIM_ZE_INIT_ERROR", 0);
    free_policies = (uint32_t)sim_env_int("TACK_SIM_ZE_FREE_POLICIES", 3);
}

/* Every entry point takes the lock and may be told to fail. */
#define ENTER()                                                                                               \
    SIM_ENTER(tack_ze_result, TACK_ZE_SUCCESS);                                                               \
    configure();                                                                                              \
    SIM_INJECT(tack_ze_result);                                                                               \
    if (!initialized && strcmp(__func__, "zeInit"))                                                           \
        RETURN(TACK_ZE_ERROR_UNINITIALIZED)
#define LEAVE()                                                                                               \
    out:                                                                                                      \
    SIM_LEAVE()

/* ---- helpers ----------------------------------------------------------- */

static int device_index(tack_ze_device d)
{
    for (int i = 0; i < n_devices; i++)
        if (d == &devices[i])
            return i;
    return -1;
}

static int valid_driver(tack_ze_driver d) { return d == &driver && n_drivers; }

/* What a properties query checks first: its handle (`handle_ok`), then an
 * output structure of the type asked for (`props`, whose first member is
 * its type). */
static tack_ze_result check_query(int handle_ok, const void *props, uint32_t type)
{
    if (!handle_ok)
        return TACK_ZE_ERROR_INVALID_NULL_HANDLE;
    if (!props || *(const uint32_t *)props != type)
        return TACK_ZE_ERROR_INVALID_ARGUMENT;
    return TACK_ZE_SUCCESS;
}

/* What a create call checks first, in this order: its handles
 * (`handles_ok`), that it has a descriptor and somewhere to put what it
 * makes, and the descriptor's type (`desc`'s first member). */
static tack_ze_result check_create(int handles_ok, const void *desc, const void *out, uint32_t type)
{
    if (!handles_ok)
        return TACK_ZE_ERROR_INVALID_NULL_HANDLE;
    if (!desc || !out)
        return TACK_ZE_ERROR_INVALID_NULL_POINTER;
    if (*(const uint32_t *)desc != type)
        return TACK_ZE_ERROR_INVALID_ARGUMENT;
    return TACK_ZE_SUCCESS;
}

/* An enumeration's two calls: with no room (*count 0, or no array) it sets
 * *count to the `n` there are and returns 0; else it lowers *count to at
 * most n and returns 1, for the caller to fill that many. */
static int enumerate(uint32_t *count, const void *array, uint32_t n)
{
    if (*count == 0 || !array) {
        *count = n;
        return 0;
    }
    if (*count > n)
        *count = n;
    return 1;
}

static int live_context(tack_ze_context c)
{
    return sim_object_find(contexts, c) != NULL;
}

/* Whether `c` is a live context and `d` a device. */
static int context_and_device(tack_ze_context c, tack_ze_device d) { return live_context(c) && device_index(d) >= 0; }

static struct sim_alloc *alloc_of(struct sim_region *r) { return (struct sim_alloc *)r; }

static struct sim_alloc *find_alloc(uintptr_t addr, size_t n) { return alloc_of(sim_region_find(allocs, addr, n)); }

/* The host address of [addr, addr + n) as the device sees it: the storage
 * of a USM allocation, or host memory the device reads directly. NULL for a
 * range that runs off a device allocation. */
static char *bytes(uintptr_t addr, size_t n) { return sim_region_bytes(allocs, addr, n); }

static void alloc_destroy(struct sim_alloc *a)
{
    sim_region_remove(&allocs, &a->r);
    UNCOUNT(live_allocs);
    free(a);
}

static tack_ze_result alloc_new(enum alloc_kind kind, struct tack_ze_context_object *c, int device, size_t size,
                                size_t alignment, void **out)
{
    if (size == 0)
        return TACK_ZE_ERROR_UNSUPPORTED_SIZE;
    if (alignment & (alignment - 1))
        return ZE_ERROR_UNSUPPORTED_ALIGNMENT;
    if (size > ((size_t)1 << 32))
        return TACK_ZE_ERROR_OUT_OF_DEVICE_MEMORY;
    struct sim_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return TACK_ZE_ERROR_OUT_OF_HOST_MEMORY;
    if (sim_region_add(&allocs, &a->r, size, kind == K_DEVICE)) {
        free(a);
        return TACK_ZE_ERROR_OUT_OF_DEVICE_MEMORY;
    }
    a->kind = kind;
    a->ctx = c;
    a->device = device;
    a->id = next_id++;
    COUNT(allocs);
    COUNT(live_allocs);
    *out = (void *)a->r.base;
    return TACK_ZE_SUCCESS;
}

/* Whether work queued and not yet run touches the allocation. */
static int in_use(const struct sim_alloc *a)
{
    for (struct tack_ze_command_queue_object *q = (void *)queues; q; q = (void *)q->o.next) {
        for (struct sim_op *op = q->head; op; op = op->next) {
            if (op->type == OP_LAUNCH)
                return 1; /* a kernel may touch any memory it was given */
            if ((op->dst >= a->r.base && op->dst < a->r.base + a->r.size) ||
                (op->src >= a->r.base && op->src < a->r.base + a->r.size))
                return 1;
        }
    }
    return 0;
}

static tack_ze_result execute(struct sim_op *op)
{
    switch (op->type) {
    case OP_COPY: {
        char *d = bytes(op->dst, op->n), *s = bytes(op->src, op->n);
        if (!d || !s) {
            COUNT(faults);
            return TACK_ZE_ERROR_DEVICE_LOST;
        }
        memmove(d, s, op->n);
        return TACK_ZE_SUCCESS;
    }
    case OP_FILL: {
        char *d = bytes(op->dst, op->n);
        if (!d) {
            COUNT(faults);
            return TACK_ZE_ERROR_DEVICE_LOST;
        }
        for (size_t i = 0; i < op->n; i++)
            d[i] = (char)op->pattern[i % op->pattern_size];
        return TACK_ZE_SUCCESS;
    }
    case OP_LAUNCH:
        COUNT(launches_run);
        if (run_count < RUN_LOG)
            run_log[run_count] = op->launch;
        run_count++;
        if (kernel_run && op->closure)
            kernel_run(op->closure);
        return TACK_ZE_SUCCESS;
    }
    return TACK_ZE_SUCCESS;
}

/* Frees what a deferred free left behind, once nothing queued uses it. */
static void reap(void)
{
    for (struct sim_alloc *a = alloc_of(allocs), *next; a; a = next) {
        next = alloc_of(a->r.next);
        if (a->free_deferred && !in_use(a))
            alloc_destroy(a);
    }
}

/* Runs the queue's work up to and including execution `seq`, in order:
 * what a GPU would have finished by the time the host sees that execution
 * done. */
static tack_ze_result run_queue_until(struct tack_ze_command_queue_object *q, unsigned long long seq)
{
    tack_ze_result r = TACK_ZE_SUCCESS;
    while (q->head && q->head->seq <= seq) {
        struct sim_op *op = q->head;
        q->head = op->next;
        tack_ze_result e = execute(op);
        if (e && !r)
            r = e;
        free(op);
    }
    if (!q->head)
        q->tail = NULL;
    if (q->done < seq)
        q->done = seq;
    reap();
    return r;
}

static tack_ze_result run_queue(struct tack_ze_command_queue_object *q)
{
    return run_queue_until(q, q->executed);
}

static struct tack_ze_command_list_object *find_list(tack_ze_command_list h) { return sim_object_find(lists, h); }

static struct tack_ze_command_queue_object *find_queue(tack_ze_command_queue h) { return sim_object_find(queues, h); }

static struct tack_ze_fence_object *find_fence(tack_ze_fence h) { return sim_object_find(fences, h); }

static int fence_signalled(const struct tack_ze_fence_object *f)
{
    return f->taken && f->queue->done >= f->seq;
}

/* Runs an operation on an immediate list at once, or records it on a
 * regular one. */
static tack_ze_result append(tack_ze_command_list h, const struct sim_op *proto)
{
    struct tack_ze_command_list_object *l = find_list(h);
    if (!l)
        return TACK_ZE_ERROR_INVALID_NULL_HANDLE;
    if (!l->ctx->o.live)
        return TACK_ZE_ERROR_DEVICE_LOST;
    if (l->immediate)
        return execute((struct sim_op *)proto);
    if (l->closed)
        return TACK_ZE_ERROR_INVALID_ARGUMENT;
    struct sim_op *op = malloc(sizeof *op);
    if (!op)
        return TACK_ZE_ERROR_OUT_OF_HOST_MEMORY;
    *op = *proto;
    op->next = NULL;
    if (l->tail)
        l->tail->next = op;
    else
        l->head = op;
    l->tail = op;
    return TACK_ZE_SUCCESS;
}

/* ---- driver and devices -------------------------------------------------- */

SIM_API tack_ze_result zeInit(uint32_t flags)
{
    ENTER();
    (void)flags;
    COUNT(init);
    if (init_error)
        RETURN(init_error);
    initialized = 1;
    LEAVE();
}

SIM_API tack_ze_result zeDriverGet(uint32_t *count, tack_ze_driver *drivers)
{
    ENTER();
    if (!count)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_POINTER);
    if (enumerate(count, drivers, (uint32_t)n_drivers) && *count)
        drivers[0] = &driver;
    LEAVE();
}

SIM_API tack_ze_result zeDriverGetProperties(tack_ze_driver d, tack_ze_driver_properties *props)
{
    ENTER();
    CHECK(check_query(valid_driver(d), props, TACK_ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES));
    memset(props->uuid, 0x5a, sizeof props->uuid);
    props->driverVersion = 0x10000;
    /* Extensions answer through the chain; a driver that does not know a
     * structure leaves it alone. */
    for (void *p = props->pNext; p; p = ((tack_ze_driver_memory_free_ext_properties *)p)->pNext) {
        tack_ze_driver_memory_free_ext_properties *ext = p;
        if (ext->stype == TACK_ZE_STRUCTURE_TYPE_DRIVER_MEMORY_FREE_EXT_PROPERTIES && free_policies)
            ext->freePolicies = free_policies;
    }
    LEAVE();
}

SIM_API tack_ze_result zeDeviceGet(tack_ze_driver d, uint32_t *count, tack_ze_device *out)
{
    ENTER();
    if (!valid_driver(d))
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    if (!count)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_POINTER);
    if (enumerate(count, out, (uint32_t)n_devices))
        for (uint32_t i = 0; i < *count; i++)
            out[i] = &devices[i];
    LEAVE();
}

SIM_API tack_ze_result zeDeviceGetProperties(tack_ze_device d, tack_ze_device_properties *p)
{
    ENTER();
    int i = device_index(d);
    CHECK(check_query(i >= 0, p, TACK_ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES));
    p->type = 1; /* ZE_DEVICE_TYPE_GPU */
    p->vendorId = 0x8086;
    p->deviceId = 0x0bd5;
    p->maxMemAllocSize = (uint64_t)1 << 32;
    memset(p->uuid, 0, sizeof p->uuid);
    p->uuid[0] = (uint8_t)i;
    snprintf(p->name, sizeof p->name, "Tack simulated Level Zero GPU %d", i);
    LEAVE();
}

SIM_API tack_ze_result zeDeviceGetComputeProperties(tack_ze_device d, tack_ze_device_compute_properties *p)
{
    ENTER();
    CHECK(check_query(device_index(d) >= 0, p, TACK_ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES));
    p->maxTotalGroupSize = 1024;
    p->maxGroupSizeX = p->maxGroupSizeY = p->maxGroupSizeZ = 1024;
    p->maxGroupCountX = p->maxGroupCountY = p->maxGroupCountZ = 0xffffffffu;
    p->maxSharedLocalMemory = 65536;
    p->numSubGroupSizes = 2;
    p->subGroupSizes[0] = 16;
    p->subGroupSizes[1] = 32;
    LEAVE();
}

SIM_API tack_ze_result zeDeviceGetModuleProperties(tack_ze_device d, tack_ze_device_module_properties *p)
{
    ENTER();
    CHECK(check_query(device_index(d) >= 0, p, TACK_ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES));
    p->spirvVersionSupported = 0x10005;
    p->flags = fp64 ? TACK_ZE_DEVICE_MODULE_FLAG_FP64 : 0;
    p->maxArgumentsSize = 2048;
    LEAVE();
}

SIM_API tack_ze_result zeDeviceGetCommandQueueGroupProperties(tack_ze_device d, uint32_t *count,
                                                              tack_ze_command_queue_group_properties *p)
{
    ENTER();
    if (device_index(d) < 0)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    if (!count)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_POINTER);
    if (!enumerate(count, p, GROUPS))
        RETURN(TACK_ZE_SUCCESS);
    for (uint32_t i = 0; i < *count; i++) {
        if (p[i].stype != TACK_ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES)
            RETURN(TACK_ZE_ERROR_INVALID_ARGUMENT);
        p[i].flags = i == COPY_GROUP ? TACK_ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY
                                     : TACK_ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE |
                                           TACK_ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY;
        p[i].maxMemoryFillPatternSize = 16;
        p[i].numQueues = 1;
    }
    LEAVE();
}

/* ---- contexts ------------------------------------------------------------ */

static tack_ze_result context_new(tack_ze_context *out)
{
    struct tack_ze_context_object *c = sim_object_new(&contexts, sizeof *c);
    if (!c)
        return TACK_ZE_ERROR_OUT_OF_HOST_MEMORY;
    c->id = next_id++;
    COUNT(contexts_created);
    *out = c;
    return TACK_ZE_SUCCESS;
}

SIM_API tack_ze_result zeContextCreate(tack_ze_driver d, const tack_ze_context_desc *desc, tack_ze_context *out)
{
    ENTER();
    CHECK(check_create(valid_driver(d), desc, out, TACK_ZE_STRUCTURE_TYPE_CONTEXT_DESC));
    RETURN(context_new(out));
    LEAVE();
}

SIM_API tack_ze_result zeContextDestroy(tack_ze_context c)
{
    ENTER();
    COUNT_DESTROY(contexts_destroyed);
    if (!live_context(c))
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    c->o.live = 0;
    /* Its allocations go with it. */
    for (struct sim_alloc *a = alloc_of(allocs), *next; a; a = next) {
        next = alloc_of(a->r.next);
        if (a->ctx == c)
            alloc_destroy(a);
    }
    LEAVE();
}

/* ---- queues and lists ---------------------------------------------------- */

static tack_ze_result check_queue_desc(tack_ze_context c, tack_ze_device d, const tack_ze_command_queue_desc *desc)
{
    if (!context_and_device(c, d))
        return TACK_ZE_ERROR_INVALID_NULL_HANDLE;
    if (!desc)
        return TACK_ZE_ERROR_INVALID_NULL_POINTER;
    if (desc->stype != TACK_ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC || desc->ordinal >= GROUPS || desc->mode > 2)
        return TACK_ZE_ERROR_INVALID_ARGUMENT;
    return TACK_ZE_SUCCESS;
}

SIM_API tack_ze_result zeCommandQueueCreate(tack_ze_context c, tack_ze_device d, const tack_ze_command_queue_desc *desc,
                                            tack_ze_command_queue *out)
{
    ENTER();
    CHECK(check_queue_desc(c, d, desc));
    struct tack_ze_command_queue_object *q = sim_object_new(&queues, sizeof *q);
    if (!q)
        RETURN(TACK_ZE_ERROR_OUT_OF_HOST_MEMORY);
    q->ctx = c;
    q->device = device_index(d);
    q->group = desc->ordinal;
    COUNT(queues_created);
    *out = q;
    LEAVE();
}

SIM_API tack_ze_result zeCommandQueueDestroy(tack_ze_command_queue h)
{
    ENTER();
    COUNT_DESTROY(queues_destroyed);
    struct tack_ze_command_queue_object *q = find_queue(h);
    if (!q)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    run_queue(q);
    q->o.live = 0;
    LEAVE();
}

SIM_API tack_ze_result zeCommandQueueExecuteCommandLists(tack_ze_command_queue h, uint32_t n,
                                                         tack_ze_command_list *handles, tack_ze_fence fence)
{
    ENTER();
    struct tack_ze_command_queue_object *q = find_queue(h);
    if (!q)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    if (!n || !handles)
        RETURN(TACK_ZE_ERROR_INVALID_ARGUMENT);
    /* A fence belongs to one queue and must be reset before it is given to
     * another execution. */
    if (fence && (!find_fence(fence) || fence->queue != q || fence->taken))
        RETURN(ZE_ERROR_INVALID_SYNCHRONIZATION_OBJECT);
    for (uint32_t i = 0; i < n; i++) {
        struct tack_ze_command_list_object *l = find_list(handles[i]);
        if (!l || l->immediate || !l->closed || l->ctx != q->ctx)
            RETURN(TACK_ZE_ERROR_INVALID_ARGUMENT);
        if (l->group != q->group)
            RETURN(ZE_ERROR_INVALID_COMMAND_LIST_TYPE);
    }
    /* The queue gets copies of the recorded work, so the simulator itself
     * survives a list reset too early; the reset is counted as a fault. */
    unsigned long long seq = ++q->executed;
    for (uint32_t i = 0; i < n; i++) {
        struct tack_ze_command_list_object *l = handles[i];
        l->pending_queue = q;
        l->pending_seq = seq;
        for (struct sim_op *op = l->head; op; op = op->next) {
            struct sim_op *c = malloc(sizeof *c);
            if (!c)
                RETURN(TACK_ZE_ERROR_OUT_OF_HOST_MEMORY);
            *c = *op;
            c->seq = seq;
            c->next = NULL;
            /* The host stand-in's closure runs (and is freed) once: a list
             * executed again runs its launches without it. */
            op->closure = NULL;
            if (q->tail)
                q->tail->next = c;
            else
                q->head = c;
            q->tail = c;
        }
    }
    if (fence) {
        fence->taken = 1;
        fence->seq = seq;
    }
    COUNT(executes);
    LEAVE();
}

SIM_API tack_ze_result zeCommandQueueSynchronize(tack_ze_command_queue h, uint64_t timeout)
{
    ENTER();
    (void)timeout;
    struct tack_ze_command_queue_object *q = find_queue(h);
    if (!q)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    COUNT(queue_syncs);
    RETURN(run_queue(q));
    LEAVE();
}

SIM_API tack_ze_result zeFenceCreate(tack_ze_command_queue h, const tack_ze_fence_desc *desc, tack_ze_fence *out)
{
    ENTER();
    struct tack_ze_command_queue_object *q = find_queue(h);
    CHECK(check_create(q != NULL, desc, out, TACK_ZE_STRUCTURE_TYPE_FENCE_DESC));
    /* flags: 0, or ZE_FENCE_FLAG_SIGNALED (1) for one made signalled */
    if (desc->flags > 1)
        RETURN(TACK_ZE_ERROR_INVALID_ARGUMENT);
    struct tack_ze_fence_object *f = sim_object_new(&fences, sizeof *f);
    if (!f)
        RETURN(TACK_ZE_ERROR_OUT_OF_HOST_MEMORY);
    f->queue = q;
    f->taken = (int)desc->flags;
    f->seq = 0;
    COUNT(fences_created);
    *out = f;
    LEAVE();
}

SIM_API tack_ze_result zeFenceHostSynchronize(tack_ze_fence h, uint64_t timeout)
{
    ENTER();
    struct tack_ze_fence_object *f = find_fence(h);
    if (!f)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    if (!f->taken) {
        /* Nothing will ever signal it: a real wait without a timeout would
         * never return. */
        if (timeout == UINT64_MAX)
            COUNT(faults);
        RETURN(TACK_ZE_NOT_READY);
    }
    COUNT(fence_syncs);
    /* Timeout 0 only asks; the simulated GPU runs nothing unless waited. */
    if (!fence_signalled(f) && timeout == 0)
        RETURN(TACK_ZE_NOT_READY);
    RETURN(run_queue_until(f->queue, f->seq));
    LEAVE();
}

SIM_API tack_ze_result zeFenceReset(tack_ze_fence h)
{
    ENTER();
    struct tack_ze_fence_object *f = find_fence(h);
    if (!f)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    COUNT(fence_resets);
    if (f->taken && !fence_signalled(f)) {
        COUNT(resets_in_flight);
        COUNT(faults);
    }
    f->taken = 0;
    LEAVE();
}

static tack_ze_result list_new(tack_ze_context c, tack_ze_device d, uint32_t group, int immediate,
                               tack_ze_command_list *out)
{
    struct tack_ze_command_list_object *l = sim_object_new(&lists, sizeof *l);
    if (!l)
        return TACK_ZE_ERROR_OUT_OF_HOST_MEMORY;
    l->ctx = c;
    l->device = device_index(d);
    l->group = group;
    l->immediate = immediate;
    COUNT(lists_created);
    if (immediate)
        COUNT(immediate_lists_created);
    *out = l;
    return TACK_ZE_SUCCESS;
}

SIM_API tack_ze_result zeCommandListCreate(tack_ze_context c, tack_ze_device d, const tack_ze_command_list_desc *desc,
                                           tack_ze_command_list *out)
{
    ENTER();
    CHECK(check_create(context_and_device(c, d), desc, out, TACK_ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC));
    if (desc->commandQueueGroupOrdinal >= GROUPS)
        RETURN(TACK_ZE_ERROR_INVALID_ARGUMENT);
    RETURN(list_new(c, d, desc->commandQueueGroupOrdinal, 0, out));
    LEAVE();
}

SIM_API tack_ze_result zeCommandListCreateImmediate(tack_ze_context c, tack_ze_device d,
                                                    const tack_ze_command_queue_desc *desc, tack_ze_command_list *out)
{
    ENTER();
    CHECK(check_queue_desc(c, d, desc));
    if (!out)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_POINTER);
    RETURN(list_new(c, d, desc->ordinal, 1, out));
    LEAVE();
}

SIM_API tack_ze_result zeCommandListDestroy(tack_ze_command_list h)
{
    ENTER();
    COUNT_DESTROY(lists_destroyed);
    struct tack_ze_command_list_object *l = find_list(h);
    if (!l)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    l->o.live = 0;
    LEAVE();
}

SIM_API tack_ze_result zeCommandListClose(tack_ze_command_list h)
{
    ENTER();
    struct tack_ze_command_list_object *l = find_list(h);
    if (!l || l->immediate)
        RETURN(TACK_ZE_ERROR_INVALID_ARGUMENT);
    l->closed = 1;
    LEAVE();
}

SIM_API tack_ze_result zeCommandListReset(tack_ze_command_list h)
{
    ENTER();
    struct tack_ze_command_list_object *l = find_list(h);
    if (!l)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    COUNT(list_resets);
    /* On a GPU, the queue would run a list rewritten under its feet. */
    if (l->pending_queue && l->pending_queue->done < l->pending_seq) {
        COUNT(resets_in_flight);
        COUNT(faults);
    }
    l->pending_queue = NULL;
    while (l->head) {
        struct sim_op *op = l->head;
        l->head = op->next;
        free(op);
    }
    l->tail = NULL;
    l->closed = 0;
    LEAVE();
}

SIM_API tack_ze_result zeCommandListAppendMemoryCopy(tack_ze_command_list h, void *dst, const void *src, size_t n,
                                                     tack_ze_event signal, uint32_t nwait, tack_ze_event *wait)
{
    ENTER();
    if (signal || nwait || wait)
        RETURN(ZE_ERROR_INVALID_SYNCHRONIZATION_OBJECT); /* the simulator has no events */
    if (!dst || !src)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_POINTER);
    COUNT(copies);
    struct sim_op op = {.type = OP_COPY, .dst = (uintptr_t)dst, .src = (uintptr_t)src, .n = n};
    RETURN(append(h, &op));
    LEAVE();
}

SIM_API tack_ze_result zeCommandListAppendMemoryFill(tack_ze_command_list h, void *ptr, const void *pattern,
                                                     size_t pattern_size, size_t n, tack_ze_event signal,
                                                     uint32_t nwait, tack_ze_event *wait)
{
    ENTER();
    if (signal || nwait || wait)
        RETURN(ZE_ERROR_INVALID_SYNCHRONIZATION_OBJECT);
    if (!ptr || !pattern)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_POINTER);
    if (pattern_size == 0 || pattern_size > 16 || (pattern_size & (pattern_size - 1)) || n % pattern_size)
        RETURN(TACK_ZE_ERROR_INVALID_SIZE);
    COUNT(fills);
    struct sim_op op = {.type = OP_FILL, .dst = (uintptr_t)ptr, .n = n, .pattern_size = pattern_size};
    memcpy(op.pattern, pattern, pattern_size);
    RETURN(append(h, &op));
    LEAVE();
}

/* ---- memory -------------------------------------------------------------- */

SIM_API tack_ze_result zeMemAllocDevice(tack_ze_context c, const tack_ze_device_mem_alloc_desc *desc, size_t size,
                                        size_t alignment, tack_ze_device d, void **out)
{
    ENTER();
    CHECK(check_create(context_and_device(c, d), desc, out, TACK_ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC));
    RETURN(alloc_new(K_DEVICE, c, device_index(d), size, alignment, out));
    LEAVE();
}

static tack_ze_result free_in(tack_ze_context c, void *ptr, uint32_t policy)
{
    if (!live_context(c))
        return TACK_ZE_ERROR_INVALID_NULL_HANDLE;
    if (!ptr)
        return TACK_ZE_ERROR_INVALID_NULL_POINTER;
    struct sim_alloc *a = NULL;
    for (struct sim_alloc *k = alloc_of(allocs); k; k = alloc_of(k->r.next))
        if (k->r.base == (uintptr_t)ptr && !k->free_deferred)
            a = k;
    if (!a) {
        COUNT(invalid_frees);
        return TACK_ZE_ERROR_INVALID_ARGUMENT;
    }
    /* Memory belongs to the context that allocated it. */
    if (a->ctx != c) {
        COUNT(wrong_context_frees);
        return TACK_ZE_ERROR_INVALID_ARGUMENT;
    }
    COUNT(frees);
    if (policy & TACK_ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE) {
        COUNT(deferred_frees);
        a->free_deferred = 1;
        reap();
        return TACK_ZE_SUCCESS;
    }
    if (policy & TACK_ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE) {
        COUNT(blocking_frees);
        for (struct tack_ze_command_queue_object *q = (void *)queues; q; q = (void *)q->o.next)
            if (q->o.live)
                run_queue(q);
    } else if (in_use(a)) {
        /* Freed under the feet of queued work: on a GPU, a fault later. */
        COUNT(frees_in_use);
        COUNT(faults);
    }
    alloc_destroy(a);
    return TACK_ZE_SUCCESS;
}

SIM_API tack_ze_result zeMemFree(tack_ze_context c, void *ptr)
{
    ENTER();
    RETURN(free_in(c, ptr, 0));
    LEAVE();
}

SIM_API tack_ze_result zeMemFreeExt(tack_ze_context c, const tack_ze_memory_free_ext_desc *desc, void *ptr)
{
    ENTER();
    if (!desc)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_POINTER);
    if (desc->stype != TACK_ZE_STRUCTURE_TYPE_MEMORY_FREE_EXT_DESC)
        RETURN(TACK_ZE_ERROR_INVALID_ARGUMENT);
    if (desc->freePolicy > 3 || (desc->freePolicy & ~free_policies))
        RETURN(TACK_ZE_ERROR_INVALID_ENUMERATION);
    RETURN(free_in(c, ptr, desc->freePolicy));
    LEAVE();
}

SIM_API tack_ze_result zeMemGetAllocProperties(tack_ze_context c, const void *ptr,
                                               tack_ze_memory_allocation_properties *props, tack_ze_device *device)
{
    ENTER();
    if (!live_context(c))
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    if (!props)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_POINTER);
    if (props->stype != TACK_ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES)
        RETURN(TACK_ZE_ERROR_INVALID_ARGUMENT);
    COUNT(pointer_queries);
    /* The driver does not tell contexts apart: an allocation from any
     * context is reported, whichever context is asked. */
    struct sim_alloc *a = find_alloc((uintptr_t)ptr, 1);
    if (a && a->free_deferred)
        a = NULL;
    props->type = a ? (uint32_t)a->kind : TACK_ZE_MEMORY_TYPE_UNKNOWN;
    props->id = a ? a->id : 0;
    props->pageSize = a ? (uint64_t)sysconf(_SC_PAGESIZE) : 0;
    if (device)
        *device = a && a->kind != K_HOST ? &devices[a->device] : NULL;
    LEAVE();
}

/* ---- modules and kernels ------------------------------------------------- */

SIM_API tack_ze_result zeModuleCreate(tack_ze_context c, tack_ze_device d, const tack_ze_module_desc *desc,
                                      tack_ze_module *out, tack_ze_module_build_log *log)
{
    ENTER();
    if (log)
        *log = NULL;
    CHECK(check_create(context_and_device(c, d), desc, out, TACK_ZE_STRUCTURE_TYPE_MODULE_DESC));
    if (desc->format != TACK_ZE_MODULE_FORMAT_IL_SPIRV || !desc->pInputModule || desc->inputSize < 4)
        RETURN(TACK_ZE_ERROR_INVALID_ARGUMENT);
    /* SPIR-V begins with its magic number; the simulator cannot compile the
     * rest, but a test can ask for the failure a broken module gives. */
    uint32_t magic;
    memcpy(&magic, desc->pInputModule, sizeof magic);
    if (magic != 0x07230203u || memmem(desc->pInputModule, desc->inputSize, "tack-sim: invalid", 17)) {
        if (log) {
            struct tack_ze_module_build_log_object *l = calloc(1, sizeof *l);
            if (l)
                snprintf(l->text, sizeof l->text, "simulated build failure: not a valid SPIR-V module");
            *log = l;
        }
        RETURN(TACK_ZE_ERROR_MODULE_BUILD_FAILURE);
    }
    struct tack_ze_module_object *m = calloc(1, sizeof *m);
    if (!m || !(m->il = malloc(desc->inputSize))) {
        free(m);
        RETURN(TACK_ZE_ERROR_OUT_OF_HOST_MEMORY);
    }
    memcpy(m->il, desc->pInputModule, desc->inputSize);
    m->size = desc->inputSize;
    m->ctx = c;
    m->device = device_index(d);
    m->live = 1;
    COUNT(modules_created);
    *out = m;
    LEAVE();
}

SIM_API tack_ze_result zeModuleDestroy(tack_ze_module m)
{
    ENTER();
    COUNT_DESTROY(modules_destroyed);
    if (m)
        m->live = 0;
    LEAVE();
}

SIM_API tack_ze_result zeModuleBuildLogGetString(tack_ze_module_build_log l, size_t *size, char *text)
{
    ENTER();
    if (!size)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_POINTER);
    const char *s = l ? l->text : "";
    size_t need = strlen(s) + 1;
    if (!text || *size == 0) {
        *size = need;
        RETURN(TACK_ZE_SUCCESS);
    }
    snprintf(text, *size, "%s", s);
    LEAVE();
}

SIM_API tack_ze_result zeModuleBuildLogDestroy(tack_ze_module_build_log l)
{
    ENTER();
    (void)l;
    COUNT_DESTROY(build_logs_destroyed);
    LEAVE();
}

SIM_API tack_ze_result zeKernelCreate(tack_ze_module m, const tack_ze_kernel_desc *desc, tack_ze_kernel *out)
{
    ENTER();
    if (!m || !m->live)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    if (!desc || !out || !desc->pKernelName)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_POINTER);
    size_t len = strlen(desc->pKernelName);
    if (desc->stype != TACK_ZE_STRUCTURE_TYPE_KERNEL_DESC || !len || len >= sizeof ((struct tack_ze_kernel_object *)0)->name ||
        !memmem(m->il, m->size, desc->pKernelName, len))
        RETURN(ZE_ERROR_INVALID_KERNEL_NAME);
    struct tack_ze_kernel_object *k = sim_object_new(&kernels, sizeof *k);
    if (!k)
        RETURN(TACK_ZE_ERROR_OUT_OF_HOST_MEMORY);
    k->module = m;
    snprintf(k->name, sizeof k->name, "%s", desc->pKernelName);
    k->group[0] = k->group[1] = k->group[2] = 1;
    COUNT(kernels_created);
    *out = k;
    LEAVE();
}

SIM_API tack_ze_result zeKernelDestroy(tack_ze_kernel k)
{
    ENTER();
    COUNT_DESTROY(kernels_destroyed);
    if (k)
        k->o.live = 0;
    LEAVE();
}

SIM_API tack_ze_result zeKernelSetArgumentValue(tack_ze_kernel k, uint32_t index, size_t size, const void *value)
{
    ENTER();
    if (!k || !k->o.live)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    if (index >= 64 || !size || size > 64)
        RETURN(TACK_ZE_ERROR_INVALID_ARGUMENT);
    void *copy = malloc(size);
    if (!copy)
        RETURN(TACK_ZE_ERROR_OUT_OF_HOST_MEMORY);
    if (value)
        memcpy(copy, value, size);
    else
        memset(copy, 0, size);
    free(k->args[index]);
    k->args[index] = copy;
    k->arg_sizes[index] = size;
    LEAVE();
}

SIM_API tack_ze_result zeKernelSetGroupSize(tack_ze_kernel k, uint32_t x, uint32_t y, uint32_t z)
{
    ENTER();
    if (!k || !k->o.live)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    if (!x || !y || !z || (uint64_t)x * y * z > 1024)
        RETURN(TACK_ZE_ERROR_INVALID_ARGUMENT);
    k->group[0] = x;
    k->group[1] = y;
    k->group[2] = z;
    LEAVE();
}

SIM_API tack_ze_result zeKernelSuggestGroupSize(tack_ze_kernel k, uint32_t gx, uint32_t gy, uint32_t gz,
                                                uint32_t *x, uint32_t *y, uint32_t *z)
{
    ENTER();
    if (!k || !k->o.live)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    if (!x || !y || !z)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_POINTER);
    /* The largest power of two up to 256 that divides the global size. */
    uint32_t g = 256;
    while (g > 1 && gx % g)
        g /= 2;
    *x = g;
    *y = gy ? 1 : 0;
    *z = gz ? 1 : 0;
    LEAVE();
}

SIM_API tack_ze_result zeCommandListAppendLaunchKernel(tack_ze_command_list h, tack_ze_kernel k,
                                                       const tack_ze_group_count *count, tack_ze_event signal,
                                                       uint32_t nwait, tack_ze_event *wait)
{
    ENTER();
    if (signal || nwait || wait)
        RETURN(ZE_ERROR_INVALID_SYNCHRONIZATION_OBJECT);
    struct tack_ze_command_list_object *l = find_list(h);
    if (!l || !k || !k->o.live)
        RETURN(TACK_ZE_ERROR_INVALID_NULL_HANDLE);
    if (!count || !count->groupCountX || !count->groupCountY || !count->groupCountZ)
        RETURN(TACK_ZE_ERROR_INVALID_ARGUMENT);
    if (l->group != COMPUTE_GROUP)
        RETURN(ZE_ERROR_INVALID_COMMAND_LIST_TYPE); /* a copy engine runs no kernels */
    if (k->module->ctx != l->ctx)
        RETURN(TACK_ZE_ERROR_INVALID_ARGUMENT);
    int nargs = 0;
    while (nargs < 64 && k->args[nargs])
        nargs++;
    struct sim_op op = {.type = OP_LAUNCH, .kernel = k, .launch = COUNT(launches) + 1};
    /* The driver copies the argument values at append; a host kernel hook
     * captures what it needs now and runs when the queue does. */
    if (kernel_capture) {
        const uint32_t groups[3] = {count->groupCountX, count->groupCountY, count->groupCountZ};
        op.closure = kernel_capture(k->name, k->args, k->arg_sizes, nargs, groups, k->group);
    }
    RETURN(append(h, &op));
    LEAVE();
}

/* Other destroy calls, so that a test sees any call Tack might make. */
SIM_API tack_ze_result zeEventDestroy(tack_ze_event e)
{
    (void)e;
    COUNT_DESTROY(events_destroyed);
    return TACK_ZE_SUCCESS;
}

SIM_API tack_ze_result zeEventPoolDestroy(void *pool)
{
    (void)pool;
    COUNT_DESTROY(event_pools_destroyed);
    return TACK_ZE_SUCCESS;
}

SIM_API tack_ze_result zeFenceDestroy(tack_ze_fence f)
{
    (void)f;
    COUNT_DESTROY(fences_destroyed);
    return TACK_ZE_SUCCESS;
}

/* ---- test hooks ---------------------------------------------------------- */

/* The counter called `name`, or -1 for an unknown name. */
SIM_API long long tack_sim_ze_stats(const char *name)
{
    return SIM_STAT(name);
}

/* Makes the nth next call (1: the next one) of entry point `symbol` (its
 * exported name, e.g. "zeMemAllocDevice") return `result`. Returns 0, or -1
 * when the table of pending failures is full. */
SIM_API int tack_sim_ze_fail(const char *symbol, uint32_t result, int nth)
{
    return sim_failure_arm(&lock, &failures, symbol, result, nth);
}

/* Plays another library (a SYCL runtime): initialises the driver and makes
 * a context of its own, returning the driver, device `device_index` and the
 * context in handles[0..2]. Returns 0, or a ze_result_t. */
SIM_API uint32_t tack_sim_ze_create_context(int device_index_, uint64_t handles[3])
{
    pthread_mutex_lock(&lock);
    configure();
    tack_ze_result r = TACK_ZE_SUCCESS;
    if (init_error) {
        r = init_error;
    } else if (!n_drivers || device_index_ < 0 || device_index_ >= n_devices) {
        r = TACK_ZE_ERROR_INVALID_ARGUMENT;
    } else {
        initialized = 1;
        tack_ze_context c;
        r = context_new(&c);
        if (!r) {
            handles[0] = (uint64_t)(uintptr_t)&driver;
            handles[1] = (uint64_t)(uintptr_t)&devices[device_index_];
            handles[2] = (uint64_t)(uintptr_t)c;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Allocates as another library would: `kind` 1 host, 2 device, 3 shared,
 * in `context` on `device` (ignored for host memory). Returns the address,
 * or 0 on failure. */
SIM_API uint64_t tack_sim_ze_alloc(uint64_t context, uint64_t device, int kind, size_t size)
{
    pthread_mutex_lock(&lock);
    configure();
    void *p = NULL;
    tack_ze_context c = (tack_ze_context)(uintptr_t)context;
    int d = kind == K_HOST ? 0 : device_index((tack_ze_device)(uintptr_t)device);
    if (live_context(c) && d >= 0 && kind >= K_HOST && kind <= K_SHARED &&
        alloc_new((enum alloc_kind)kind, c, d, size, 0, &p) != TACK_ZE_SUCCESS)
        p = NULL;
    pthread_mutex_unlock(&lock);
    return (uint64_t)(uintptr_t)p;
}

/* Frees as another library would. Returns 0 or a ze_result_t. */
SIM_API uint32_t tack_sim_ze_free(uint64_t context, uint64_t ptr)
{
    pthread_mutex_lock(&lock);
    tack_ze_result r = free_in((tack_ze_context)(uintptr_t)context, (void *)(uintptr_t)ptr, 0);
    pthread_mutex_unlock(&lock);
    return r;
}

/* The context of the live allocation that holds `ptr`, or 0. */
SIM_API uint64_t tack_sim_ze_allocation_context(uint64_t ptr)
{
    pthread_mutex_lock(&lock);
    struct sim_alloc *a = find_alloc((uintptr_t)ptr, 1);
    uint64_t c = a && !a->free_deferred ? (uint64_t)(uintptr_t)a->ctx : 0;
    pthread_mutex_unlock(&lock);
    return c;
}

/* The device index of the live allocation that holds `ptr`, or -1. */
SIM_API int tack_sim_ze_allocation_device(uint64_t ptr)
{
    pthread_mutex_lock(&lock);
    struct sim_alloc *a = find_alloc((uintptr_t)ptr, 1);
    int d = a && !a->free_deferred ? a->device : -1;
    pthread_mutex_unlock(&lock);
    return d;
}

/* Live allocations made in `context`. */
SIM_API long tack_sim_ze_allocations_in(uint64_t context)
{
    pthread_mutex_lock(&lock);
    long n = 0;
    for (struct sim_alloc *a = alloc_of(allocs); a; a = alloc_of(a->r.next))
        if ((uint64_t)(uintptr_t)a->ctx == context && !a->free_deferred)
            n++;
    pthread_mutex_unlock(&lock);
    return n;
}

/* The host storage behind [ptr, ptr + n) of a USM allocation, or NULL. */
SIM_API void *tack_sim_ze_host_address(uint64_t ptr, size_t n)
{
    pthread_mutex_lock(&lock);
    void *p = sim_region_store(allocs, (uintptr_t)ptr, n);
    pthread_mutex_unlock(&lock);
    return p;
}

/* The free policies the driver reports from now on (0: none, the driver
 * predates the extension). */
SIM_API void tack_sim_ze_set_free_policies(uint32_t policies)
{
    pthread_mutex_lock(&lock);
    configure();
    free_policies = policies;
    pthread_mutex_unlock(&lock);
}

/* Command lists made in `context` on queue group `group` (-1: any). */
SIM_API long tack_sim_ze_lists_in(uint64_t context, int group)
{
    pthread_mutex_lock(&lock);
    long n = 0;
    for (struct tack_ze_command_list_object *l = (void *)lists; l; l = (void *)l->o.next)
        if ((uint64_t)(uintptr_t)l->ctx == context && (group < 0 || l->group == (uint32_t)group))
            n++;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Installs host implementations of kernels: `capture` is called at append
 * with the kernel's name, its argument values and the launch geometry, and
 * returns a closure (malloc'd) that `run` executes, and frees, when the
 * queue reaches the launch. NULL uninstalls. */
SIM_API void tack_sim_ze_set_kernel_hook(sim_capture_fn capture, sim_run_fn run)
{
    pthread_mutex_lock(&lock);
    kernel_capture = capture;
    kernel_run = run;
    pthread_mutex_unlock(&lock);
}

SIM_API void tack_sim_ze_set_fp64(int supported)
{
    pthread_mutex_lock(&lock);
    fp64 = supported != 0;
    pthread_mutex_unlock(&lock);
}

/* Launches executed on a queue that have not run yet. */
SIM_API long tack_sim_ze_launches_pending(void)
{
    pthread_mutex_lock(&lock);
    long n = 0;
    for (struct tack_ze_command_queue_object *q = (void *)queues; q; q = (void *)q->o.next)
        for (struct sim_op *op = q->head; op; op = op->next)
            n += op->type == OP_LAUNCH;
    pthread_mutex_unlock(&lock);
    return n;
}

/* The number (1, 2, ... in append order) of the i-th launch to run (from
 * 0), or -1 when fewer have run or the log has overflowed. */
SIM_API long long tack_sim_ze_launch_run(long i)
{
    pthread_mutex_lock(&lock);
    long long v = i >= 0 && i < run_count && i < RUN_LOG ? run_log[i] : -1;
    pthread_mutex_unlock(&lock);
    return v;
}

/* Command queues made in `context` on queue group `group` (-1: any). */
SIM_API long tack_sim_ze_queues_in(uint64_t context, int group)
{
    pthread_mutex_lock(&lock);
    long n = 0;
    for (struct tack_ze_command_queue_object *q = (void *)queues; q; q = (void *)q->o.next)
        if ((uint64_t)(uintptr_t)q->ctx == context && (group < 0 || q->group == (uint32_t)group))
            n++;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Immediate command lists made in `context`. */
SIM_API long tack_sim_ze_immediate_lists_in(uint64_t context)
{
    pthread_mutex_lock(&lock);
    long n = 0;
    for (struct tack_ze_command_list_object *l = (void *)lists; l; l = (void *)l->o.next)
        if ((uint64_t)(uintptr_t)l->ctx == context && l->immediate)
            n++;
    pthread_mutex_unlock(&lock);
    return n;
}
