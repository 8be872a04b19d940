/*
 * A simulated HIP runtime for CI machines without a GPU: the subset of the
 * API Tack calls (and tests call to play "another library"), over host
 * memory. Select it with TACK_HIP_LIBRARY=<path to this library>.
 *
 * What it models, because Tack's design depends on it:
 * - TACK_SIM_HIP_DEVICES devices (default 2; 0: hipInit fails with
 *   hipErrorNoDevice) and a current device per thread (0 at first);
 *   hipMalloc allocates on the calling thread's current device;
 * - device memory at addresses the host cannot touch (PROT_NONE), backed by
 *   separate storage, so host code that dereferences a device pointer
 *   crashes as it would on a GPU; fresh device memory is filled with 0xA5;
 * - pinned host memory (hipHostMalloc) and managed memory
 *   (hipMallocManaged), which are host-addressable;
 * - hipPointerGetAttributes as ROCm 6 answers it (memory it does not know is
 *   hipMemoryTypeUnregistered, successfully) or, with
 *   TACK_SIM_HIP_VERSION=5xxxxxxx, as ROCm 5 did (hipErrorInvalidValue,
 *   which also becomes the thread's sticky last error, and the older
 *   hipMemoryType values);
 * - the thread's last error, returned and cleared by hipGetLastError.
 * HIP has no context to destroy; the simulator counts frees so a test sees
 * that Tack frees what it allocated and nothing else.
 *
 * Test hooks (ctypes or dlsym): tack_sim_hip_stats(name) returns a counter;
 * tack_sim_hip_fail(symbol, error, nth) makes the nth next call of an entry
 * point fail; tack_sim_hip_host_address(ptr, n) gives the storage behind
 * device memory; tack_sim_hip_allocation_device(ptr) the device of an
 * allocation.
 *
 * Kernels: hipModuleLoadData accepts the code objects of the simulated
 * hipRTC (tests/sim/hiprtc_sim.c: a header line, then the source) and
 * refuses anything else with hipErrorInvalidImage; hipModuleGetFunction
 * finds an extern "C" entry named in that source. The simulator cannot run
 * GPU code: hipModuleLaunchKernel counts the launch and, when a test
 * installed a host stand-in with tack_sim_hip_set_kernel_hook, hands it the
 * entry's name, parameter pointers and geometry; the stand-in runs at once,
 * since the simulated null stream, like its copies, completes each call
 * before returning. tack_sim_hip_last_launch(grid, block) reports the last
 * geometry.
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

#include "../../src/driver/hip.h"
#include "sim_common.h"
#include "sim_memory.h"

/* The entry points, declared from the same list Tack loads, so a signature
 * that drifts from Tack's table does not compile. */
TACK_HIP_FUNCTIONS(SIM_PROTOTYPE)

/* Entry points tests call as another library would, and the test hooks. */
SIM_API tack_hip_error hipHostMalloc(void **ptr, size_t size, unsigned int flags);
SIM_API tack_hip_error hipHostFree(void *ptr);
SIM_API tack_hip_error hipMallocManaged(void **ptr, size_t size, unsigned int flags);
SIM_API long long tack_sim_hip_stats(const char *name);
SIM_API int tack_sim_hip_fail(const char *symbol, int error, int nth);
SIM_API void *tack_sim_hip_host_address(uint64_t ptr, size_t n);
SIM_API int tack_sim_hip_allocation_device(uint64_t ptr);
typedef void *(*sim_capture_fn)(const char *name, void **params, const unsigned grid[3], const unsigned block[3]);
typedef void (*sim_run_fn)(void *closure);
SIM_API void tack_sim_hip_set_kernel_hook(sim_capture_fn capture, sim_run_fn run);
SIM_API void tack_sim_hip_last_launch(unsigned grid[3], unsigned block[3]);

#define MAX_DEVICES 16
#define HIP_ERROR_INVALID_IMAGE 200
#define HIP_ERROR_NOT_FOUND 500
#define HIP_ERROR_INVALID_HANDLE 400

/* ---- counters ---------------------------------------------------------- */

#define SIM_STATS(X)                                                                                          \
    X(init) X(set_device) X(allocs) X(live_allocs) X(frees) X(invalid_frees) X(memsets) X(copies)             \
        X(device_syncs) X(pointer_queries) X(host_allocs) X(managed_allocs) X(faults) X(injected_failures)   \
            X(modules_loaded) X(modules_unloaded) X(launches) X(launches_done)

SIM_DEFINE_STATS(SIM_STATS);

/* ---- state ------------------------------------------------------------- */

enum alloc_kind { K_DEVICE, K_PINNED, K_MANAGED };

struct sim_alloc {
    struct sim_region r; /* first: the entry of `allocs` */
    enum alloc_kind kind;
    int device;
};

static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static int configured;
static int initialized;
static int n_devices = 2;
static int version = 60200000;
static struct sim_region *allocs;
static _Thread_local int current_device;
static _Thread_local tack_hip_error last_error;

/* Modules and functions are listed, never freed, so that a stale handle
 * stays readable. */
struct tack_hip_module_object {
    char *image;
    int device;
    int live;
    struct tack_hip_module_object *next;
};

struct tack_hip_function_object {
    struct tack_hip_module_object *module;
    char name[128];
    struct tack_hip_function_object *next;
};
static struct tack_hip_module_object *modules;
static struct tack_hip_function_object *functions;

static sim_capture_fn kernel_capture;
static sim_run_fn kernel_run;
static unsigned last_grid[3], last_block[3];

/* ---- failure injection --------------------------------------------------- */

static struct sim_failures failures;

static void configure(void)
{
    if (configured)
        return;
    configured = 1;
    n_devices = sim_env_int("TACK_SIM_HIP_DEVICES", 2);
    if (n_devices < 0)
        n_devices = 0;
    if (n_devices > MAX_DEVICES)
        n_devices = MAX_DEVICES;
    version = sim_env_int("TACK_SIM_HIP_VERSION", 60200000);
}

static int rocm5(void) { return version / 10000000 < 6; }

/* Every entry point takes the lock and may be told to fail; a failure also
 * becomes the thread's last error, as in the real runtime. */
#define ENTER()                                                                                               \
    SIM_ENTER(tack_hip_error, TACK_HIP_SUCCESS);                                                              \
    configure();                                                                                              \
    SIM_INJECT(tack_hip_error);                                                                               \
    if (!initialized && strcmp(__func__, "hipInit") && strcmp(__func__, "hipRuntimeGetVersion"))              \
        RETURN(TACK_HIP_ERROR_NOT_INITIALIZED)
#define LEAVE()                                                                                               \
    out:                                                                                                      \
    if (r_ != TACK_HIP_SUCCESS)                                                                               \
        last_error = r_;                                                                                      \
    SIM_LEAVE()

/* ---- helpers ----------------------------------------------------------- */

static struct sim_alloc *alloc_of(struct sim_region *r) { return (struct sim_alloc *)r; }

static struct sim_alloc *find_alloc(uintptr_t addr, size_t n) { return alloc_of(sim_region_find(allocs, addr, n)); }

/* The host address of [addr, addr + n) as the GPU sees it (unified
 * addressing), or NULL for a range that runs off a device allocation. */
static char *bytes(uintptr_t addr, size_t n) { return sim_region_bytes(allocs, addr, n); }

static tack_hip_error alloc_new(enum alloc_kind kind, size_t size, void **out)
{
    if (!out)
        return TACK_HIP_ERROR_INVALID_VALUE;
    if (size == 0) {
        *out = NULL;
        return TACK_HIP_SUCCESS; /* as hipMalloc does */
    }
    if (size > ((size_t)1 << 32))
        return TACK_HIP_ERROR_OUT_OF_MEMORY;
    struct sim_alloc *a = calloc(1, sizeof *a);
    if (!a || sim_region_add(&allocs, &a->r, size, kind == K_DEVICE)) {
        free(a);
        return TACK_HIP_ERROR_OUT_OF_MEMORY;
    }
    a->kind = kind;
    a->device = current_device;
    COUNT(live_allocs);
    *out = (void *)a->r.base;
    return TACK_HIP_SUCCESS;
}

static tack_hip_error free_kind(void *ptr, int host)
{
    if (!ptr)
        return TACK_HIP_SUCCESS;
    for (struct sim_alloc *a = alloc_of(allocs); a; a = alloc_of(a->r.next)) {
        if (a->r.base == (uintptr_t)ptr && (a->kind == K_PINNED) == host) {
            sim_region_remove(&allocs, &a->r);
            free(a);
            UNCOUNT(live_allocs);
            COUNT(frees);
            return TACK_HIP_SUCCESS;
        }
    }
    COUNT(invalid_frees);
    return TACK_HIP_ERROR_INVALID_VALUE;
}

/* ---- entry points -------------------------------------------------------- */

SIM_API tack_hip_error hipInit(unsigned int flags)
{
    ENTER();
    COUNT(init);
    if (flags)
        RETURN(TACK_HIP_ERROR_INVALID_VALUE);
    if (n_devices == 0)
        RETURN(TACK_HIP_ERROR_NO_DEVICE);
    initialized = 1;
    LEAVE();
}

SIM_API tack_hip_error hipRuntimeGetVersion(int *v)
{
    ENTER();
    if (!v)
        RETURN(TACK_HIP_ERROR_INVALID_VALUE);
    *v = version;
    LEAVE();
}

SIM_API tack_hip_error hipGetDeviceCount(int *count)
{
    ENTER();
    if (!count)
        RETURN(TACK_HIP_ERROR_INVALID_VALUE);
    *count = n_devices;
    LEAVE();
}

SIM_API tack_hip_error hipDeviceGetName(char *name, int len, int device)
{
    ENTER();
    if (!name || len <= 0)
        RETURN(TACK_HIP_ERROR_INVALID_VALUE);
    if (device < 0 || device >= n_devices)
        RETURN(TACK_HIP_ERROR_INVALID_DEVICE);
    snprintf(name, (size_t)len, "Tack simulated HIP GPU %d", device);
    LEAVE();
}

SIM_API tack_hip_error hipGetDevice(int *device)
{
    ENTER();
    if (!device)
        RETURN(TACK_HIP_ERROR_INVALID_VALUE);
    *device = current_device;
    LEAVE();
}

SIM_API tack_hip_error hipSetDevice(int device)
{
    ENTER();
    if (device < 0 || device >= n_devices)
        RETURN(TACK_HIP_ERROR_INVALID_DEVICE);
    COUNT(set_device);
    current_device = device;
    LEAVE();
}

SIM_API tack_hip_error hipMalloc(void **ptr, size_t size)
{
    ENTER();
    tack_hip_error r = alloc_new(K_DEVICE, size, ptr);
    if (!r && size)
        COUNT(allocs);
    RETURN(r);
    LEAVE();
}

SIM_API tack_hip_error hipHostMalloc(void **ptr, size_t size, unsigned int flags)
{
    ENTER();
    (void)flags;
    tack_hip_error r = alloc_new(K_PINNED, size, ptr);
    if (!r)
        COUNT(host_allocs);
    RETURN(r);
    LEAVE();
}

SIM_API tack_hip_error hipMallocManaged(void **ptr, size_t size, unsigned int flags)
{
    ENTER();
    (void)flags;
    tack_hip_error r = alloc_new(K_MANAGED, size, ptr);
    if (!r)
        COUNT(managed_allocs);
    RETURN(r);
    LEAVE();
}

SIM_API tack_hip_error hipFree(void *ptr)
{
    ENTER();
    RETURN(free_kind(ptr, 0));
    LEAVE();
}

SIM_API tack_hip_error hipHostFree(void *ptr)
{
    ENTER();
    RETURN(free_kind(ptr, 1));
    LEAVE();
}

SIM_API tack_hip_error hipMemset(void *dst, int value, size_t size)
{
    ENTER();
    char *d = bytes((uintptr_t)dst, size);
    if (!dst || !d)
        RETURN(TACK_HIP_ERROR_INVALID_VALUE);
    COUNT(memsets);
    memset(d, value, size);
    LEAVE();
}

SIM_API tack_hip_error hipMemcpy(void *dst, const void *src, size_t size, int kind)
{
    ENTER();
    if (kind < 0 || kind > 4)
        RETURN(TACK_HIP_ERROR_INVALID_VALUE);
    if (!size)
        RETURN(TACK_HIP_SUCCESS);
    char *d = bytes((uintptr_t)dst, size), *s = bytes((uintptr_t)src, size);
    if (!dst || !src || !d || !s) {
        COUNT(faults);
        RETURN(TACK_HIP_ERROR_INVALID_VALUE);
    }
    COUNT(copies);
    memmove(d, s, size);
    LEAVE();
}

SIM_API tack_hip_error hipDeviceSynchronize(void)
{
    ENTER();
    COUNT(device_syncs);
    LEAVE();
}

SIM_API tack_hip_error hipPointerGetAttributes(tack_hip_pointer_attributes *attr, const void *ptr)
{
    ENTER();
    if (!attr || !ptr)
        RETURN(TACK_HIP_ERROR_INVALID_VALUE);
    COUNT(pointer_queries);
    struct sim_alloc *a = find_alloc((uintptr_t)ptr, 1);
    memset(attr, 0, sizeof *attr);
    if (!a) {
        if (rocm5())
            RETURN(TACK_HIP_ERROR_INVALID_VALUE);
        attr->type = TACK_HIP6_MEMORY_TYPE_UNREGISTERED;
        attr->device = -1;
        RETURN(TACK_HIP_SUCCESS);
    }
    attr->device = a->device;
    attr->devicePointer = (void *)a->r.base;
    attr->hostPointer = a->kind == K_DEVICE ? NULL : (void *)a->r.base;
    attr->isManaged = a->kind == K_MANAGED;
    switch (a->kind) {
    case K_DEVICE:
        attr->type = rocm5() ? TACK_HIP5_MEMORY_TYPE_DEVICE : TACK_HIP6_MEMORY_TYPE_DEVICE;
        break;
    case K_PINNED:
        attr->type = rocm5() ? TACK_HIP5_MEMORY_TYPE_HOST : TACK_HIP6_MEMORY_TYPE_HOST;
        break;
    case K_MANAGED:
        /* ROCm 5 reports managed memory as device memory with isManaged set. */
        attr->type = rocm5() ? TACK_HIP5_MEMORY_TYPE_DEVICE : TACK_HIP6_MEMORY_TYPE_MANAGED;
        break;
    }
    LEAVE();
}

SIM_API tack_hip_error hipGetLastError(void)
{
    pthread_mutex_lock(&lock);
    tack_hip_error e = last_error;
    last_error = TACK_HIP_SUCCESS;
    pthread_mutex_unlock(&lock);
    return e;
}

SIM_API const char *hipGetErrorString(tack_hip_error error)
{
    switch (error) {
    case TACK_HIP_SUCCESS: return "no error";
    case TACK_HIP_ERROR_INVALID_VALUE: return "invalid argument";
    case TACK_HIP_ERROR_OUT_OF_MEMORY: return "out of memory";
    case TACK_HIP_ERROR_NOT_INITIALIZED: return "initialization error";
    case TACK_HIP_ERROR_NO_DEVICE: return "no ROCm-capable device is detected";
    case TACK_HIP_ERROR_INVALID_DEVICE: return "invalid device ordinal";
    case HIP_ERROR_INVALID_IMAGE: return "device kernel image is invalid";
    case HIP_ERROR_INVALID_HANDLE: return "invalid resource handle";
    case HIP_ERROR_NOT_FOUND: return "named symbol not found";
    default: return "unknown error";
    }
}

/* ---- modules and launches ------------------------------------------------ */

SIM_API tack_hip_error hipModuleLoadData(tack_hip_module *module, const void *image)
{
    ENTER();
    if (!module || !image)
        RETURN(TACK_HIP_ERROR_INVALID_VALUE);
    if (strncmp(image, SIM_HIP_CODE_OBJECT_MAGIC, strlen(SIM_HIP_CODE_OBJECT_MAGIC)))
        RETURN(HIP_ERROR_INVALID_IMAGE);
    struct tack_hip_module_object *m = calloc(1, sizeof *m);
    if (!m || !(m->image = strdup(image))) {
        free(m);
        RETURN(TACK_HIP_ERROR_OUT_OF_MEMORY);
    }
    m->device = current_device;
    m->live = 1;
    m->next = modules;
    modules = m;
    COUNT(modules_loaded);
    *module = m;
    LEAVE();
}

SIM_API tack_hip_error hipModuleGetFunction(tack_hip_function *function, tack_hip_module module, const char *name)
{
    ENTER();
    if (!function || !name || strlen(name) >= sizeof ((struct tack_hip_function_object *)0)->name)
        RETURN(TACK_HIP_ERROR_INVALID_VALUE);
    if (!module || !module->live)
        RETURN(HIP_ERROR_INVALID_HANDLE);
    /* The entry is an extern "C" __global__ function of that name. */
    char decl[192];
    snprintf(decl, sizeof decl, "__global__ void %s(", name);
    if (!strstr(module->image, decl))
        RETURN(HIP_ERROR_NOT_FOUND);
    struct tack_hip_function_object *f = calloc(1, sizeof *f);
    if (!f)
        RETURN(TACK_HIP_ERROR_OUT_OF_MEMORY);
    f->module = module;
    snprintf(f->name, sizeof f->name, "%s", name);
    f->next = functions;
    functions = f;
    *function = f;
    LEAVE();
}

SIM_API tack_hip_error hipModuleLaunchKernel(tack_hip_function f, unsigned int gridX, unsigned int gridY,
                                             unsigned int gridZ, unsigned int blockX, unsigned int blockY,
                                             unsigned int blockZ, unsigned int sharedMemBytes, tack_hip_stream stream,
                                             void **kernelParams, void **extra)
{
    ENTER();
    if (!f || !f->module->live)
        RETURN(HIP_ERROR_INVALID_HANDLE);
    if (stream)
        RETURN(HIP_ERROR_INVALID_HANDLE); /* the simulator has only the null stream */
    if (!kernelParams || extra || !gridX || !gridY || !gridZ || !blockX || !blockY || !blockZ ||
        (unsigned long long)blockX * blockY * blockZ > 1024 || sharedMemBytes > 65536)
        RETURN(TACK_HIP_ERROR_INVALID_VALUE);
    if (f->module->device != current_device)
        RETURN(HIP_ERROR_INVALID_HANDLE); /* a module is loaded on one device */
    COUNT(launches);
    const unsigned grid[3] = {gridX, gridY, gridZ}, block[3] = {blockX, blockY, blockZ};
    memcpy(last_grid, grid, sizeof grid);
    memcpy(last_block, block, sizeof block);
    void *closure = kernel_capture ? kernel_capture(f->name, kernelParams, grid, block) : NULL;
    if (kernel_run && closure)
        kernel_run(closure);
    COUNT(launches_done);
    LEAVE();
}

SIM_API tack_hip_error hipModuleUnload(tack_hip_module module)
{
    ENTER();
    if (!module || !module->live)
        RETURN(HIP_ERROR_INVALID_HANDLE);
    module->live = 0;
    COUNT(modules_unloaded);
    LEAVE();
}

/* ---- test hooks ---------------------------------------------------------- */

/* Installs a host stand-in for the GPU: at each launch `capture` is called
 * with the entry's name, the parameter pointers (as hipModuleLaunchKernel
 * got them: read them now) and the geometry, and returns a closure that
 * `run` executes, and frees; NULL from capture runs nothing. NULL
 * uninstalls. */
SIM_API void tack_sim_hip_set_kernel_hook(sim_capture_fn capture, sim_run_fn run)
{
    pthread_mutex_lock(&lock);
    kernel_capture = capture;
    kernel_run = run;
    pthread_mutex_unlock(&lock);
}

/* The grid and block of the last launch (zeros before any). */
SIM_API void tack_sim_hip_last_launch(unsigned grid[3], unsigned block[3])
{
    pthread_mutex_lock(&lock);
    memcpy(grid, last_grid, sizeof last_grid);
    memcpy(block, last_block, sizeof last_block);
    pthread_mutex_unlock(&lock);
}

/* The counter called `name`, or -1 for an unknown name. */
SIM_API long long tack_sim_hip_stats(const char *name)
{
    return SIM_STAT(name);
}

/* Makes the nth next call (1: the next one) of entry point `symbol` (its
 * exported name, e.g. "hipMalloc") return `error`. Returns 0, or -1 when
 * the table of pending failures is full. */
SIM_API int tack_sim_hip_fail(const char *symbol, int error, int nth)
{
    return sim_failure_arm(&lock, &failures, symbol, error, nth);
}

/* The host storage behind [ptr, ptr + n) of an allocation, or NULL. */
SIM_API void *tack_sim_hip_host_address(uint64_t ptr, size_t n)
{
    pthread_mutex_lock(&lock);
    void *p = sim_region_store(allocs, (uintptr_t)ptr, n);
    pthread_mutex_unlock(&lock);
    return p;
}

/* The device of the allocation that holds `ptr`, or -1. */
SIM_API int tack_sim_hip_allocation_device(uint64_t ptr)
{
    pthread_mutex_lock(&lock);
    struct sim_alloc *a = find_alloc((uintptr_t)ptr, 1);
    int d = a ? a->device : -1;
    pthread_mutex_unlock(&lock);
    return d;
}
