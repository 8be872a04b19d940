/*
 * The HIP backend against the simulated runtime (tests/sim/hip_sim.c,
 * found through TACK_SIM_HIP_PATH). Each case runs in a child process of
 * its own, because a process loads the runtime once.
 *
 * The simulator keeps device memory where the host cannot touch it, fills
 * fresh memory with 0xA5, tracks a current device per thread and answers
 * pointer queries as ROCm 6 does, or as ROCm 5 did with
 * TACK_SIM_HIP_VERSION=5xxxxxxx.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/driver/hip.h"
#include "backend.h"
#include "check.h"
#include "sim.h"
#include "tack/tack.h"

/* ---- the simulator, as another library in the process sees it -------- */

static struct sim {
    void *lib;
    long long (*stats)(const char *name);
    int (*fail)(const char *symbol, int error, int nth);
    void *(*host_address)(uint64_t ptr, size_t n);
    int (*allocation_device)(uint64_t ptr);
    tack_hip_error (*hipInit)(unsigned int flags);
    tack_hip_error (*hipGetDevice)(int *device);
    tack_hip_error (*hipSetDevice)(int device);
    tack_hip_error (*hipMalloc)(void **ptr, size_t size);
    tack_hip_error (*hipFree)(void *ptr);
    tack_hip_error (*hipHostMalloc)(void **ptr, size_t size, unsigned int flags);
    tack_hip_error (*hipHostFree)(void *ptr);
    tack_hip_error (*hipMallocManaged)(void **ptr, size_t size, unsigned int flags);
    tack_hip_error (*hipGetLastError)(void);
} sim;

/* A driver entry point, and one of the simulator's own hooks. */
#define SIM_LOAD(name) SIM_SYMBOL(sim.lib, sim.name, #name)
#define SIM_OWN(name) SIM_SYMBOL(sim.lib, sim.name, "tack_sim_hip_" #name)

/* Opens the same library Tack will: one instance per process. Nothing is
 * called yet, so a case may still set the simulator's environment. */
static void sim_open(void)
{
    sim.lib = sim_library("TACK_HIP_LIBRARY", "the simulated runtime");
    SIM_OWN(stats);
    SIM_OWN(fail);
    SIM_OWN(host_address);
    SIM_OWN(allocation_device);
    SIM_LOAD(hipInit);
    SIM_LOAD(hipGetDevice);
    SIM_LOAD(hipSetDevice);
    SIM_LOAD(hipMalloc);
    SIM_LOAD(hipFree);
    SIM_LOAD(hipHostMalloc);
    SIM_LOAD(hipHostFree);
    SIM_LOAD(hipMallocManaged);
    SIM_LOAD(hipGetLastError);
}

static long long stat(const char *name)
{
    return sim_counter(sim.stats, name);
}

/* ---- helpers ------------------------------------------------------------- */

#define RUN_ISOLATED(test) RUN_AFTER(sim_open, test)

static int current_device(void)
{
    int d = -1;
    CHECK(sim.hipGetDevice(&d) == TACK_HIP_SUCCESS);
    return d;
}

/* ---- opening ------------------------------------------------------------- */

static void test_devices_are_the_runtimes(void)
{
    tack_device *d = open_device("hip");
    CHECK(!strcmp(tack_device_backend(d), "hip"));
    CHECK(!strcmp(tack_device_name(d), "hip:0"));
    CHECK(!tack_device_shares_external_context(d));
    CHECK(tack_device_context_handle(d) == 0);
    DLDevice dl = tack_device_dl_device(d);
    CHECK(dl.device_type == kDLROCM && dl.device_id == 0);
    CHECK(tack_device_can_wrap(d, (DLDevice){.device_type = kDLROCM, .device_id = 0}));
    CHECK(!tack_device_can_wrap(d, (DLDevice){.device_type = kDLROCM, .device_id = 1}));
    CHECK(!tack_device_can_wrap(d, (DLDevice){.device_type = kDLROCMHost, .device_id = 0}));
    tack_device *again = open_device("hip:0"), *one = open_device("hip:1");
    CHECK(again == d && one != d);
    CHECK(tack_device_memory_domain(one) != tack_device_memory_domain(d));
    tack_device *none = (tack_device *)0x1;
    CHECK_STATUS(tack_device_open("hip:2", NULL, 0, &none), TACK_ENODEVICE);
    CHECK(contains(tack_last_error(), "hip:2"));
    CHECK(none == (tack_device *)0x1);
    /* HIP takes no options: an external_context would be silently unused. */
    tack_option o = {.name = "external_context", .field = "context", .value = 1};
    CHECK_STATUS(tack_device_open("hip", &o, 1, &none), TACK_EVALUE);
    CHECK(contains(tack_last_error(), "external_context"));
    tack_device_release(one);
    tack_device_release(again);
    tack_device_release(d);
}

static void test_no_runtime_library_is_a_runtime_error(void)
{
    check_open_fails("TACK_HIP_LIBRARY", "/nonexistent/libamdhip64.so", "hip", "TACK_HIP_LIBRARY",
                     "/nonexistent/libamdhip64.so");
}

static void test_no_gpu_is_a_runtime_error(void)
{
    check_open_fails("TACK_SIM_HIP_DEVICES", "0", "hip", "hipInit", "no ROCm-capable device");
}

/* ---- memory ---------------------------------------------------------------- */

static void test_allocations_are_zeroed_on_their_device(void)
{
    tack_device *d = open_device("hip"), *one = open_device("hip:1");
    tack_array *a = f32_array(d, 1000);
    const unsigned char *store = sim.host_address(address(a), 4000);
    CHECK(store != NULL && (const void *)store != tack_array_data(a));
    CHECK(all_bytes(store, 4000, 0));
    CHECK(sim.allocation_device(address(a)) == 0);
    /* hip:1 allocates on device 1 and leaves the thread's current device
     * as the application set it. */
    CHECK(current_device() == 0);
    tack_array *b = f32_array(one, 8);
    CHECK(sim.allocation_device(address(b)) == 1);
    CHECK(current_device() == 0);
    CHECK(sim.hipSetDevice(1) == TACK_HIP_SUCCESS);
    tack_array *c = f32_array(d, 8);
    CHECK(sim.allocation_device(address(c)) == 0);
    CHECK(current_device() == 1);
    tack_array_release(c);
    tack_array_release(b);
    tack_array_release(a);
    tack_device_release(one);
    tack_device_release(d);
}

static void test_copies_fill_and_frees(void)
{
    tack_device *d = open_device("hip"), *one = open_device("hip:1");
    long long live = stat("live_allocs"), frees = stat("frees");
    tack_array *a = f32_array(d, 100);
    float v = -1.5f, back[100];
    CHECK_OK(tack_array_fill(a, &v));
    CHECK_OK(tack_array_copy_to_host(a, back, sizeof back));
    int wrong = 0;
    for (int i = 0; i < 100; i++)
        wrong += back[i] != -1.5f;
    CHECK(wrong == 0);
    tack_array *b = NULL;
    CHECK_OK(tack_array_to_device(a, one, &b));
    bail_if(!b);
    memset(back, 0, sizeof back);
    CHECK_OK(tack_array_copy_to_host(b, back, sizeof back));
    CHECK(back[0] == -1.5f && back[99] == -1.5f);
    CHECK_OK(tack_device_synchronize(d));
    CHECK(stat("device_syncs") >= 1);
    tack_array_release(a);
    tack_array_release(b);
    CHECK(stat("live_allocs") == live);
    CHECK(stat("frees") == frees + 2);
    CHECK(stat("invalid_frees") == 0);
    tack_device_release(one);
    tack_device_release(d);
}

static void test_failures_keep_nothing(void)
{
    tack_device *d = open_device("hip");
    long long live = stat("live_allocs");
    int64_t n = 16;
    tack_array *a = (tack_array *)0x1;
    sim.fail("hipMalloc", TACK_HIP_ERROR_OUT_OF_MEMORY, 1);
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 1, &n, 0, &a), TACK_ENOMEM);
    sim.fail("hipMalloc", TACK_HIP_ERROR_INVALID_VALUE, 1);
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 1, &n, 0, &a), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "hipMalloc"));
    sim.fail("hipMemset", TACK_HIP_ERROR_INVALID_VALUE, 1);
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 1, &n, 0, &a), TACK_ERUNTIME);
    CHECK(a == (tack_array *)0x1);
    CHECK(stat("live_allocs") == live);
    CHECK(tack_buffer_live_count() == 0);
    tack_array *b = f32_array(d, 4);
    float host[4];
    sim.fail("hipMemcpy", TACK_HIP_ERROR_INVALID_VALUE, 1);
    CHECK_STATUS(tack_array_copy_to_host(b, host, sizeof host), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "invalid argument"));
    tack_array_release(b);
    tack_device_release(d);
}

/* ---- memory spaces ----------------------------------------------------------- */

static void wrap_kinds(void)
{
    tack_device *d = open_device("hip");
    void *dev = NULL, *pinned = NULL, *managed = NULL;
    CHECK(sim.hipMalloc(&dev, 64) == 0 && sim.hipHostMalloc(&pinned, 64, 0) == 0 &&
          sim.hipMallocManaged(&managed, 64, 1) == 0);
    int64_t n = 16;
    tack_array *a = NULL;
    /* Device, pinned host and managed memory are what a kernel addresses. */
    CHECK_OK(tack_array_wrap(d, (uint64_t)(uintptr_t)dev, TACK_F32, 1, &n, 1, &a));
    CHECK(a && !tack_buffer_is_owned(tack_array_buffer(a)) && tack_buffer_is_shared(tack_array_buffer(a)));
    tack_array_release(a);
    CHECK_OK(tack_array_wrap(d, (uint64_t)(uintptr_t)pinned, TACK_F32, 1, &n, 1, &a));
    tack_array_release(a);
    CHECK_OK(tack_array_wrap(d, (uint64_t)(uintptr_t)managed, TACK_F32, 1, &n, 1, &a));
    tack_array_release(a);
    /* tack_memory_space: the runtime's answer in either numbering of
     * hipMemoryType, and host memory it does not know is the cpu's. */
    float unknown[4];
    struct {
        void *address;
        const char *space;
    } cases[] = {{dev, "hip"}, {pinned, "hip_pinned"}, {managed, "hip_managed"}, {unknown, "cpu"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        long long queries = stat("pointer_queries");
        const char *space = NULL;
        CHECK_OK(tack_memory_space((uint64_t)(uintptr_t)cases[i].address, &space));
        CHECK(space && !strcmp(space, cases[i].space));
        CHECK(stat("pointer_queries") > queries);
        CHECK(sim.hipGetLastError() == TACK_HIP_SUCCESS);
    }
    /* Ordinary host memory is refused, and the failed query leaves no
     * error behind for the application's next HIP call. */
    float local[16];
    a = (tack_array *)0x1;
    CHECK_STATUS(tack_array_wrap(d, (uint64_t)(uintptr_t)local, TACK_F32, 1, &n, 0, &a), TACK_EVALUE);
    CHECK(contains(tack_last_error(), "host memory"));
    CHECK(contains(tack_last_error(), "cpu"));
    CHECK(sim.hipGetLastError() == TACK_HIP_SUCCESS);
    /* Device memory of another device. */
    void *other = NULL;
    CHECK(sim.hipSetDevice(1) == 0 && sim.hipMalloc(&other, 64) == 0 && sim.hipSetDevice(0) == 0);
    CHECK_STATUS(tack_array_wrap(d, (uint64_t)(uintptr_t)other, TACK_F32, 1, &n, 0, &a), TACK_EVALUE);
    CHECK(contains(tack_last_error(), "hip:1"));
    CHECK(a == (tack_array *)0x1);
    /* Tack frees none of it. */
    CHECK(sim.hipFree(dev) == 0 && sim.hipHostFree(pinned) == 0 && sim.hipFree(managed) == 0 &&
          sim.hipFree(other) == 0);
    CHECK(stat("invalid_frees") == 0);
    tack_device_release(d);
}

static void test_wrap_checks_memory_spaces(void) { wrap_kinds(); }

static void test_wrap_checks_memory_spaces_on_rocm5(void)
{
    /* ROCm 5: the older hipMemoryType values, and a failed query (with a
     * sticky error) for memory the runtime does not know. */
    setenv("TACK_SIM_HIP_VERSION", "50200000", 1);
    wrap_kinds();
}

/* ---- DLPack -------------------------------------------------------------------- */

static void test_dlpack_rocm_host_memory_goes_to_cpu(void)
{
    tack_device *d = open_device("hip");
    void *pinned = NULL;
    CHECK(sim.hipHostMalloc(&pinned, 64, 0) == 0);
    int64_t shape[1] = {16};
    DLManagedTensor m;
    memset(&m, 0, sizeof m);
    f32_vector_tensor(&m.dl_tensor, pinned, (DLDevice){.device_type = kDLROCMHost, .device_id = 0}, shape);
    tack_array *a = NULL;
    CHECK_OK(tack_array_from_dlpack(&m, NULL, d, &a));
    bail_if(!a);
    CHECK(!strcmp(tack_device_backend(tack_array_device(a)), "cpu"));
    tack_array_release(a);
    /* The hip device itself cannot wrap a kDLROCMHost tensor. */
    a = (tack_array *)0x1;
    CHECK_STATUS(tack_array_from_dlpack(&m, d, NULL, &a), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "cpu"));
    /* A kDLROCM tensor over host memory is refused by the memory check. */
    float host[16];
    m.dl_tensor.data = host;
    m.dl_tensor.device = (DLDevice){.device_type = kDLROCM, .device_id = 0};
    CHECK_STATUS(tack_array_from_dlpack(&m, d, NULL, &a), TACK_EVALUE);
    CHECK(a == (tack_array *)0x1);
    CHECK(sim.hipHostFree(pinned) == 0);
    tack_device_release(d);
}

int main(void)
{
    const char *path = getenv("TACK_SIM_HIP_PATH");
    if (!path || !*path) {
        printf("skipped: TACK_SIM_HIP_PATH does not name the simulated HIP runtime\n");
        return 77;
    }
    setenv("TACK_HIP_LIBRARY", path, 1);
    RUN_ISOLATED(test_devices_are_the_runtimes);
    RUN_ISOLATED(test_no_runtime_library_is_a_runtime_error);
    RUN_ISOLATED(test_no_gpu_is_a_runtime_error);
    RUN_ISOLATED(test_allocations_are_zeroed_on_their_device);
    RUN_ISOLATED(test_copies_fill_and_frees);
    RUN_ISOLATED(test_failures_keep_nothing);
    RUN_ISOLATED(test_wrap_checks_memory_spaces);
    RUN_ISOLATED(test_wrap_checks_memory_spaces_on_rocm5);
    RUN_ISOLATED(test_dlpack_rocm_host_memory_goes_to_cpu);
    CHECK_DONE();
}
