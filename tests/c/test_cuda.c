/*
 * The CUDA backend against the simulated driver (tests/sim/cuda_sim.c,
 * named by TACK_CUDA_LIBRARY). Each case runs in a child process of its own,
 * because a process loads the driver and makes its CUDA devices once: a case
 * that needs no driver, two devices or a context current at open time needs
 * a fresh process.
 *
 * The simulator defers queued work until a sync and fills fresh device
 * memory with 0xA5, so a missing wait or a missing zero-fill reads wrong.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/core/backend.h"
#include "../../src/core/internal.h"
#include "../../src/core/queue.h"
#include "../../src/core/toolchain.h"
#include "../../src/driver/cuda.h"
#include "backend.h"
#include "check.h"
#include "cubin.h"
#include "cuda_fill.h"
#include "cuda_sim.h"
#include "sim.h"
#include "tack/tack.h"

static CUcontext current_context(void)
{
    CUcontext c = NULL;
    sim.cuCtxGetCurrent(&c);
    return c;
}

/* ---- helpers ------------------------------------------------------------- */

static void set_ramp(tack_array *a, float scale)
{
    size_t n = tack_array_size(a);
    float *v = malloc(n * sizeof *v + 1);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)i * scale + 1.0f;
    CHECK_OK(tack_array_copy_from_host(a, v, n * sizeof *v));
    free(v);
}

static int is_ramp(const float *v, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] != (float)i * scale + 1.0f)
            return 0;
    return 1;
}

static int array_is_ramp(tack_array *a, float scale)
{
    size_t n = tack_array_size(a);
    float *v = malloc(n * sizeof *v + 1);
    CHECK_OK(tack_array_copy_to_host(a, v, n * sizeof *v));
    int ok = is_ramp(v, n, scale);
    free(v);
    return ok;
}

/* ---- no driver, no device ------------------------------------------------ */

static void test_no_driver_is_a_runtime_error(void)
{
    check_open_fails("TACK_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", "cuda", "CUDA is not available",
                     "/nonexistent/libcuda.so.1");
    tack_device *d = NULL;
    /* The same answer every time, and everything else keeps working. */
    CHECK_STATUS(tack_device_open("cuda:0", NULL, 0, &d), TACK_ENODEVICE);
    tack_device *cpu = open_device("cpu");
    tack_array *a = f32_array(cpu, 4);
    tack_array_release(a);
    tack_device_release(cpu);
    DLDevice dl = {.device_type = kDLCUDA, .device_id = 0};
    CHECK_STATUS(tack_device_for_dlpack(dl, &d), TACK_ENODEVICE);
}

static void test_no_device_is_a_runtime_error(void)
{
    check_open_fails("TACK_SIM_CUDA_DEVICES", "0", "cuda", "no CUDA device");
}

static void test_failed_init_is_a_runtime_error(void)
{
    check_open_fails("TACK_SIM_CUDA_INIT_ERROR", "999", "cuda", "cuInit", "CUDA_ERROR_UNKNOWN");
}

static void test_ordinals(void)
{
    setenv("TACK_SIM_CUDA_DEVICES", "2", 1);
    sim_open();
    tack_device *d0 = open_device("cuda"), *d1 = open_device("cuda:1"), *again = open_device("cuda:0");
    CHECK(d0 == again);
    CHECK(d0 != d1);
    CHECK(!strcmp(tack_device_backend(d1), "cuda"));
    CHECK(tack_device_ordinal(d1) == 1);
    CHECK(!strcmp(tack_device_name(d1), "cuda:1"));
    DLDevice dl = tack_device_dl_device(d1);
    CHECK(dl.device_type == kDLCUDA && dl.device_id == 1);
    CHECK(tack_device_memory_domain(d0) != tack_device_memory_domain(d1));
    tack_device *none = NULL;
    CHECK_STATUS(tack_device_open("cuda:2", NULL, 0, &none), TACK_ENODEVICE);
    CHECK(contains(tack_last_error(), "no CUDA device 2"));
    tack_device_release(again);
    tack_device_release(d1);
    tack_device_release(d0);
}

/* ---- contexts ------------------------------------------------------------- */

static void test_retains_the_primary_context_without_a_current_one(void)
{
    sim_open();
    tack_device *d = open_device("cuda");
    CHECK(sim_stat("primary_retains") == 1);
    CHECK(sim_stat("contexts_created") == 0);
    CHECK(tack_device_shares_external_context(d) == 0);
    CUcontext primary = NULL;
    sim.cuDevicePrimaryCtxRetain(&primary, 0);
    CHECK((uint64_t)(uintptr_t)primary == tack_device_context_handle(d));
    sim.cuDevicePrimaryCtxRelease_v2(0);
    /* Tack made its context current only for its own calls. */
    CHECK(current_context() == NULL);
    tack_array *a = f32_array(d, 8);
    CHECK(current_context() == NULL);
    tack_array_release(a);
    tack_device_release(d);
}

static void test_adopts_the_current_context(void)
{
    sim_open();
    CUcontext mine = NULL;
    CHECK(sim.cuCtxCreate_v2(&mine, 0, 0) == CUDA_SUCCESS);
    tack_device *d = open_device("cuda");
    CHECK(tack_device_context_handle(d) == (uint64_t)(uintptr_t)mine);
    CHECK(tack_device_shares_external_context(d) == 1);
    CHECK(sim_stat("primary_retains") == 0);
    CHECK(current_context() == mine);
    tack_array *a = f32_array(d, 16);
    set_ramp(a, 2.0f);
    CHECK(array_is_ramp(a, 2.0f));
    tack_array_release(a);
    CHECK_OK(tack_device_synchronize(d));
    /* Tack never destroys a context it did not create. */
    CHECK(sim_stat("contexts_destroyed") == 0);
    tack_device_release(d);
    CHECK(sim_stat("contexts_destroyed") == 0);
    CHECK(sim.cuCtxDestroy_v2(mine) == CUDA_SUCCESS);
}

static void test_a_current_primary_context_is_retained_not_adopted(void)
{
    sim_open();
    /* As PyTorch leaves things: the primary context current on the thread. */
    CUcontext primary = NULL;
    sim.cuDevicePrimaryCtxRetain(&primary, 0);
    sim.cuCtxSetCurrent(primary);
    tack_device *d = open_device("cuda");
    CHECK(tack_device_context_handle(d) == (uint64_t)(uintptr_t)primary);
    CHECK(tack_device_shares_external_context(d) == 0);
    CHECK(sim_stat("primary_retains") == 2);
    /* The other library lets go of the primary context; Tack's reference
     * keeps it, and its arrays, alive. */
    sim.cuCtxSetCurrent(NULL);
    sim.cuDevicePrimaryCtxRelease_v2(0);
    tack_array *a = f32_array(d, 4);
    set_ramp(a, 1.0f);
    CHECK(array_is_ramp(a, 1.0f));
    tack_array_release(a);
    tack_device_release(d);
}

static void test_a_context_of_another_device_is_not_adopted(void)
{
    setenv("TACK_SIM_CUDA_DEVICES", "2", 1);
    sim_open();
    CUcontext other = NULL;
    sim.cuCtxCreate_v2(&other, 0, 1);
    tack_device *d = open_device("cuda:0");
    CHECK(tack_device_context_handle(d) != (uint64_t)(uintptr_t)other);
    CHECK(sim_stat("primary_retains") == 1);
    tack_device_release(d);
}

struct thread_job {
    tack_array *array;
    tack_status status;
    int ramp;
    CUcontext after;
};

static void *other_thread(void *p)
{
    struct thread_job *job = p;
    /* A fresh thread has no current context; Tack brings its own. */
    size_t n = tack_array_size(job->array);
    float *v = malloc(n * sizeof *v);
    job->status = tack_array_copy_to_host(job->array, v, n * sizeof *v);
    job->ramp = is_ramp(v, n, 3.0f);
    free(v);
    job->after = current_context();
    tack_array_release(job->array);
    return NULL;
}

static void test_works_from_any_thread(void)
{
    sim_open();
    tack_device *d = open_device("cuda");
    tack_array *a = f32_array(d, 100);
    set_ramp(a, 3.0f);
    struct thread_job job = {tack_array_retain(a), TACK_ERUNTIME, 0, (CUcontext)1};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, &job) == 0);
    pthread_join(t, NULL);
    CHECK(job.status == TACK_OK);
    CHECK(job.ramp);
    CHECK(job.after == NULL);
    tack_array_release(a);
    CHECK_OK(tack_device_synchronize(d));
    CHECK(sim_stat("invalid_frees") == 0);
    CHECK(sim_stat("live_allocs") == 0);
    tack_device_release(d);
}

static void test_use_after_the_context_is_destroyed(void)
{
    sim_open();
    CUcontext mine = NULL;
    sim.cuCtxCreate_v2(&mine, 0, 0);
    tack_device *d = open_device("cuda");
    tack_array *a = f32_array(d, 64), *b = f32_array(d, 64);
    CHECK(sim_stat("live_allocs") == 2);
    /* Its owner destroys the context; the allocations go with it. */
    CHECK(sim.cuCtxDestroy_v2(mine) == CUDA_SUCCESS);
    CHECK(sim_stat("live_allocs") == 0);
    float v[64];
    CHECK_STATUS(tack_array_copy_to_host(a, v, sizeof v), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "destroyed"));
    CHECK_STATUS(tack_array_copy_from_host(a, v, sizeof v), TACK_ERUNTIME);
    CHECK_STATUS(tack_device_synchronize(d), TACK_ERUNTIME);
    tack_array *c = NULL;
    int64_t n = 4;
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 1, &n, 0, &c), TACK_ERUNTIME);
    CHECK(c == NULL);
    tack_exported_memory rec;
    CHECK_STATUS(tack_array_export_memory(a, &rec), TACK_ERUNTIME);
    /* The frees are skipped: nothing reaches the driver for memory that
     * is gone, even with a new context current at the same place. */
    CUcontext next = NULL;
    sim.cuCtxCreate_v2(&next, 0, 0);
    tack_array_release(a);
    tack_array_release(b);
    CHECK(sim_stat("invalid_frees") == 0);
    CHECK(sim_stat("async_frees") == 0);
    CHECK(sim_stat("frees") == 0);
    CHECK(tack_buffer_live_count() == 0);
    tack_device_release(d);
}

static void test_use_after_the_primary_context_is_reset(void)
{
    sim_open();
    tack_device *d = open_device("cuda");
    tack_array *a = f32_array(d, 8);
    CHECK(sim.cuDevicePrimaryCtxReset_v2(0) == CUDA_SUCCESS);
    /* A new primary context at the same handle is not the old one. */
    CUcontext again = NULL;
    sim.cuDevicePrimaryCtxRetain(&again, 0);
    CHECK((uint64_t)(uintptr_t)again == tack_device_context_handle(d));
    float v[8];
    CHECK_STATUS(tack_array_copy_to_host(a, v, sizeof v), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "destroyed"));
    tack_array_release(a);
    CHECK(sim_stat("invalid_frees") == 0);
    CHECK(sim_stat("async_frees") == 0);
    sim.cuDevicePrimaryCtxRelease_v2(0);
    tack_device_release(d);
}

/* ---- memory ------------------------------------------------------------------ */

static void test_allocations_are_zeroed(void)
{
    sim_open();
    tack_device *d = open_device("cuda");
    tack_array *a = f32_array(d, 1000);
    CHECK(sim_stat("async_allocs") == 1);
    CHECK(sim_stat("allocs") == 0);
    /* Zero before anyone else can read it: nothing left queued. */
    CHECK(sim_stat("pending_ops") == 0);
    CHECK(all_bytes(sim.host_address((CUdeviceptr)(uintptr_t)tack_array_data(a), 4000), 4000, 0));
    float v[1000];
    memset(v, 0xff, sizeof v);
    CHECK_OK(tack_array_copy_to_host(a, v, sizeof v));
    CHECK(all_bytes(v, sizeof v, 0));
    tack_array_release(a);
    tack_device_release(d);
}

static void test_copies_fill_and_to_device(void)
{
    sim_open();
    tack_device *d = open_device("cuda"), *cpu = open_device("cpu");
    tack_array *a = f32_array(d, 257);
    set_ramp(a, 0.5f);
    CHECK(array_is_ramp(a, 0.5f));
    float seven = 7.0f, v[257];
    CHECK_OK(tack_array_fill(a, &seven));
    CHECK_OK(tack_array_copy_to_host(a, v, sizeof v));
    int sevens = 1;
    for (int i = 0; i < 257; i++)
        sevens &= v[i] == 7.0f;
    CHECK(sevens);
    CHECK_STATUS(tack_array_copy_to_host(a, v, 8), TACK_EVALUE);
    /* Both ways through the host. */
    tack_array *h = NULL, *back = NULL;
    CHECK_OK(tack_array_to_device(a, cpu, &h));
    CHECK(h && ((float *)tack_array_data(h))[256] == 7.0f);
    CHECK_OK(tack_array_to_device(h, d, &back));
    CHECK(back && tack_array_device(back) == d);
    CHECK_OK(tack_array_copy_to_host(back, v, sizeof v));
    CHECK(v[0] == 7.0f && v[256] == 7.0f);
    tack_array_release(back);
    tack_array_release(h);
    tack_array_release(a);
    tack_device_release(cpu);
    tack_device_release(d);
}

static void test_frees_are_stream_ordered(void)
{
    sim_open();
    tack_device *d = open_device("cuda");
    tack_array *a = f32_array(d, 32);
    CHECK(sim_stat("live_allocs") == 1);
    tack_array_release(a);
    /* Queued behind the work on Tack's stream, not waited for. */
    CHECK(sim_stat("async_frees") == 1);
    CHECK(sim_stat("live_allocs") == 1);
    CHECK_OK(tack_device_synchronize(d));
    CHECK(sim_stat("live_allocs") == 0);
    CHECK(sim_stat("invalid_frees") == 0);
    CHECK(sim_stat("faults") == 0);
    CHECK(tack_buffer_live_count() == 0);
    tack_device_release(d);
}

static void test_without_memory_pools(void)
{
    setenv("TACK_SIM_CUDA_NO_POOLS", "1", 1);
    sim_open();
    tack_device *d = open_device("cuda");
    tack_array *a = f32_array(d, 10);
    CHECK(sim_stat("allocs") == 1);
    CHECK(sim_stat("async_allocs") == 0);
    float v[10];
    CHECK_OK(tack_array_copy_to_host(a, v, sizeof v));
    CHECK(all_bytes(v, sizeof v, 0));
    tack_array_release(a);
    CHECK(sim_stat("frees") == 1);
    CHECK(sim_stat("live_allocs") == 0);
    tack_device_release(d);
}

static void test_allocation_failures_keep_nothing(void)
{
    sim_open();
    tack_device *d = open_device("cuda");
    long buffers = tack_buffer_live_count();
    tack_array *a = NULL;
    int64_t n = 100;
    sim.fail("cuMemAllocAsync", CUDA_ERROR_OUT_OF_MEMORY, 1);
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 1, &n, 0, &a), TACK_ENOMEM);
    CHECK(contains(tack_last_error(), "cuda:0"));
    CHECK(a == NULL);
    /* A failing zero-fill gives the memory back. */
    sim.fail("cuMemsetD8Async", CUDA_ERROR_UNKNOWN, 1);
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 1, &n, 0, &a), TACK_ERUNTIME);
    CHECK(sim_stat("live_allocs") == 0);
    sim.fail("cuMemMap", CUDA_ERROR_OUT_OF_MEMORY, 1);
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 1, &n, 1, &a), TACK_ENOMEM);
    CHECK(sim_stat("vmm_live") == 0);
    CHECK(tack_buffer_live_count() == buffers);
    CHECK(sim_stat("injected_failures") == 3);
    /* And the device still works. */
    a = f32_array(d, 4);
    tack_array_release(a);
    tack_device_release(d);
}

/* ---- wrapping pointers --------------------------------------------------- */

/* Memory another library made in the primary context, one of each kind
 * the driver tells apart: device, pinned and managed allocations, and host
 * memory it registered. */
struct foreign_memory {
    CUcontext primary;
    CUdeviceptr dev, managed;
    void *pinned;
    float registered[16];
};

static void foreign_alloc(struct foreign_memory *m)
{
    memset(m, 0, sizeof *m);
    sim.cuDevicePrimaryCtxRetain(&m->primary, 0);
    sim.cuCtxPushCurrent_v2(m->primary);
    CHECK(sim.cuMemAlloc_v2(&m->dev, 64) == CUDA_SUCCESS);
    CHECK(sim.cuMemAllocHost_v2(&m->pinned, 64) == CUDA_SUCCESS);
    CHECK(sim.cuMemAllocManaged(&m->managed, 64, 1) == CUDA_SUCCESS);
    CHECK(sim.cuMemHostRegister_v2(m->registered, sizeof m->registered, 0) == CUDA_SUCCESS);
    sim.cuCtxPopCurrent_v2(&(CUcontext){NULL});
}

static void foreign_free(struct foreign_memory *m)
{
    sim.cuCtxPushCurrent_v2(m->primary);
    CHECK(sim.cuMemFree_v2(m->dev) == CUDA_SUCCESS);
    CHECK(sim.cuMemFreeHost(m->pinned) == CUDA_SUCCESS);
    CHECK(sim.cuMemHostUnregister(m->registered) == CUDA_SUCCESS);
    sim.cuCtxPopCurrent_v2(&(CUcontext){NULL});
    sim.cuDevicePrimaryCtxRelease_v2(0);
}

static void test_wrap_accepts_device_pinned_and_managed_memory(void)
{
    sim_open();
    tack_device *d = open_device("cuda");
    int64_t n = 16;
    tack_array *a = NULL;
    /* Another library, in the same (primary) context. */
    struct foreign_memory m;
    foreign_alloc(&m);
    CHECK((uint64_t)(uintptr_t)m.primary == tack_device_context_handle(d));

    CHECK_OK(tack_array_wrap(d, m.dev, TACK_F32, 1, &n, 1, &a));
    CHECK(a && tack_buffer_is_shared(tack_array_buffer(a)) && !tack_buffer_is_owned(tack_array_buffer(a)));
    set_ramp(a, 1.0f);
    float v[16];
    sim.cuCtxPushCurrent_v2(m.primary);
    sim.cuMemcpyDtoH_v2(v, m.dev, sizeof v);
    sim.cuCtxPopCurrent_v2(&(CUcontext){NULL});
    CHECK(is_ramp(v, 16, 1.0f));
    tack_array_release(a);
    /* An address inside an allocation is device memory too. */
    int64_t half = 8;
    CHECK_OK(tack_array_wrap(d, m.dev + 32, TACK_F32, 1, &half, 0, &a));
    CHECK(a && !tack_array_writable(a));
    tack_array_release(a);
    CHECK_OK(tack_array_wrap(d, (uint64_t)(uintptr_t)m.pinned, TACK_F32, 1, &n, 1, &a));
    tack_array_release(a);
    CHECK_OK(tack_array_wrap(d, m.managed, TACK_F32, 1, &n, 1, &a));
    tack_array_release(a);
    CHECK_OK(tack_array_wrap(d, (uint64_t)(uintptr_t)m.registered, TACK_F32, 1, &n, 1, &a));
    tack_array_release(a);
    CHECK_OK(tack_device_synchronize(d));
    /* Wrapped memory is the caller's: Tack freed none of it. */
    CHECK(sim_stat("frees") == 0 && sim_stat("async_frees") == 0 && sim_stat("invalid_frees") == 0);
    foreign_free(&m);
    tack_device_release(d);
}

/* tack_memory_space answers from cuPointerGetAttribute: device, pinned
 * (allocated or registered) and managed memory, and the host's for an
 * address the driver does not know. */
static void test_memory_space_is_the_drivers_answer(void)
{
    sim_open();
    tack_device *d = open_device("cuda");
    struct foreign_memory m;
    foreign_alloc(&m);
    float host[16];
    const struct sim_space_case cases[] = {{m.dev, "cuda"},
                                           {m.dev + 32, "cuda"},
                                           {(uint64_t)(uintptr_t)m.pinned, "cuda_pinned"},
                                           {(uint64_t)(uintptr_t)m.registered, "cuda_pinned"},
                                           {m.managed, "cuda_managed"},
                                           {(uint64_t)(uintptr_t)host, "cpu"}};
    CHECK_MEMORY_SPACES(cases, sim_stat);
    CHECK_STATUS(tack_memory_space(m.dev, NULL), TACK_EVALUE);
    foreign_free(&m);
    tack_device_release(d);
}

static void test_wrap_refuses_host_memory(void)
{
    sim_open();
    tack_device *d = open_device("cuda");
    float *host = malloc(64);
    int64_t n = 16;
    tack_array *a = NULL;
    long queries = sim_stat("pointer_queries");
    CHECK_STATUS(tack_array_wrap(d, (uint64_t)(uintptr_t)host, TACK_F32, 1, &n, 1, &a), TACK_EVALUE);
    CHECK(a == NULL);
    CHECK(contains(tack_last_error(), "host memory"));
    CHECK(sim_stat("pointer_queries") > queries);
    /* Memory freed by its owner is host memory to the driver, too. */
    tack_array *owned = f32_array(d, 4);
    uint64_t gone = (uint64_t)(uintptr_t)tack_array_data(owned);
    tack_array_release(owned);
    CHECK_OK(tack_device_synchronize(d));
    int64_t four = 4;
    CHECK_STATUS(tack_array_wrap(d, gone, TACK_F32, 1, &four, 1, &a), TACK_EVALUE);
    free(host);
    tack_device_release(d);
}

static void test_wrap_refuses_another_devices_memory(void)
{
    setenv("TACK_SIM_CUDA_DEVICES", "2", 1);
    sim_open();
    tack_device *d0 = open_device("cuda:0"), *d1 = open_device("cuda:1");
    tack_array *on1 = f32_array(d1, 4), *a = NULL;
    int64_t n = 4;
    CHECK_STATUS(tack_array_wrap(d0, (uint64_t)(uintptr_t)tack_array_data(on1), TACK_F32, 1, &n, 1, &a),
                 TACK_EVALUE);
    CHECK(contains(tack_last_error(), "cuda:1"));
    CHECK_OK(tack_array_wrap(d1, (uint64_t)(uintptr_t)tack_array_data(on1), TACK_F32, 1, &n, 1, &a));
    tack_array_release(a);
    tack_array_release(on1);
    tack_device_release(d1);
    tack_device_release(d0);
}

/* ---- DLPack ---------------------------------------------------------------- */

static void test_dlpack_export_and_import(void)
{
    setenv("TACK_SIM_CUDA_DEVICES", "2", 1);
    sim_open();
    tack_device *d0 = open_device("cuda"), *d1 = open_device("cuda:1"), *cpu = open_device("cpu");
    tack_array *a = f32_array(d1, 12);
    set_ramp(a, 1.0f);
    DLManagedTensorVersioned *t = NULL;
    CHECK_OK(tack_array_to_dlpack_versioned(a, &t));
    CHECK(t && t->dl_tensor.device.device_type == kDLCUDA && t->dl_tensor.device.device_id == 1);
    CHECK(t->dl_tensor.data == tack_array_data(a));
    CHECK(tack_buffer_is_shared(tack_array_buffer(a)));
    /* CUDA memory with the CPU as the default device stays a CUDA array. */
    tack_array *b = NULL;
    CHECK_OK(tack_array_from_dlpack_versioned(t, NULL, cpu, &b, NULL));
    CHECK(b && tack_array_device(b) == d1);
    CHECK(tack_array_data(b) == tack_array_data(a));
    CHECK(array_is_ramp(b, 1.0f));
    /* A device that cannot wrap it says which one can. */
    DLManagedTensor *legacy = NULL;
    CHECK_OK(tack_array_to_dlpack(a, &legacy));
    CHECK(legacy && legacy->dl_tensor.device.device_id == 1);
    tack_array *c = NULL;
    CHECK_STATUS(tack_array_from_dlpack(legacy, d0, NULL, &c), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "cuda:1"));
    CHECK_OK(tack_array_from_dlpack(legacy, d1, NULL, &c));
    tack_array_release(c);
    tack_array_release(b);
    tack_array_release(a);
    CHECK(tack_dlpack_live_exports() == 0);
    tack_device_release(cpu);
    tack_device_release(d1);
    tack_device_release(d0);
}

static int deleter_calls;
static void count_deleter(DLManagedTensor *m)
{
    (void)m;
    deleter_calls++;
}

static void test_dlpack_import_of_pinned_and_host_tensors(void)
{
    sim_open();
    tack_device *d = open_device("cuda"), *cpu = open_device("cpu");
    CUcontext primary = NULL;
    sim.cuDevicePrimaryCtxRetain(&primary, 0);
    sim.cuCtxPushCurrent_v2(primary);
    void *pinned = NULL;
    sim.cuMemAllocHost_v2(&pinned, 64);
    sim.cuCtxPopCurrent_v2(&(CUcontext){NULL});
    int64_t shape[1] = {16};
    DLManagedTensor m;
    memset(&m, 0, sizeof m);
    f32_vector_tensor(&m.dl_tensor, pinned, (DLDevice){.device_type = kDLCUDAHost, .device_id = 0}, shape);
    m.deleter = count_deleter;
    /* kDLCUDAHost is host memory: a cpu array, even with cuda as default. */
    tack_array *a = NULL;
    CHECK_OK(tack_array_from_dlpack(&m, NULL, d, &a));
    CHECK(a && tack_array_device(a) == cpu);
    tack_array_release(a);
    CHECK(deleter_calls == 1);
    /* Host memory labelled kDLCUDA is refused by the driver's answer. */
    float host[16];
    m.dl_tensor.data = host;
    m.dl_tensor.device.device_type = kDLCUDA;
    CHECK_STATUS(tack_array_from_dlpack(&m, NULL, NULL, &a), TACK_EVALUE);
    CHECK(deleter_calls == 1);
    /* Managed memory arrives as kDLCUDAManaged. */
    CUdeviceptr managed = 0;
    sim.cuCtxPushCurrent_v2(primary);
    sim.cuMemAllocManaged(&managed, 64, 1);
    sim.cuCtxPopCurrent_v2(&(CUcontext){NULL});
    m.dl_tensor.data = (void *)(uintptr_t)managed;
    m.dl_tensor.device.device_type = kDLCUDAManaged;
    CHECK_OK(tack_array_from_dlpack(&m, NULL, cpu, &a));
    CHECK(a && tack_array_device(a) == d);
    tack_array_release(a);
    CHECK(deleter_calls == 2);
    sim.cuDevicePrimaryCtxRelease_v2(0);
    tack_device_release(cpu);
    tack_device_release(d);
}

/* ---- launches, through the backend's kernel slots ---------------------------- */

/* Launches as the queue does: the buffer records the launch's number. */
static tack_status launch_fill(tack_device *d, void *k, tack_array *a, float value)
{
    void *data = tack_array_data(a);
    void *const args[2] = {&data, &value};
    int64_t n = (int64_t)tack_array_size(a);
    struct tack_launch l = {.ndim = 1, .shape = &n, .n = n, .args = args};
    tack_status st = tack_backend_kernel_launch(d, k, &l);
    if (st == TACK_OK)
        atomic_store(&tack_array_buffer(a)->last_launch, atomic_fetch_add(&d->submitted, 1) + 1);
    return st;
}

static void test_launches_are_queued_and_ordered(void)
{
    sim_open();
    sim.set_kernel_hook(fill_capture, fill_run);
    tack_device *d = open_device("cuda");
    tack_array *a = f32_array(d, 1000);
    void *k = load_fill(d);
    CHECK(sim_stat("modules_loaded") == 1);
    CHECK(current_context() == NULL);
    float value = 2.5f;
    CHECK_OK(launch_fill(d, k, a, value));
    /* Queued: returned before it ran. */
    CHECK(sim_stat("launches") == 1);
    CHECK(sim_stat("launches_done") == 0);
    CHECK(all_bytes(sim.host_address((CUdeviceptr)(uintptr_t)tack_array_data(a), 4000), 4000, 0));
    CHECK(fill_last.n == 1000 && fill_last.value == 2.5f);
    CHECK(fill_last.block == 256 && fill_last.grid == 4);
    /* A copy to the host comes after it on Tack's stream, without any
     * other wait. */
    float v[1000];
    CHECK_OK(tack_backend_copy_to_host(d, v, tack_array_data(a), sizeof v));
    CHECK(v[0] == 2.5f && v[999] == 2.5f);
    CHECK(sim_stat("launches_done") == 1);
    tack_backend_kernel_unload(d, k);
    tack_array_release(a);
    tack_device_release(d);
}

static void test_launch_geometry_strides_over_large_ranges(void)
{
    sim_open();
    sim.set_kernel_hook(fill_capture, NULL);
    tack_device *d = open_device("cuda");
    void *k = load_fill(d);
    void *data = NULL;
    float value = 1.0f;
    void *const args[2] = {&data, &value};
    int64_t huge = (int64_t)1 << 40, none = 0;
    CHECK_OK(tack_backend_kernel_launch(d, k, &(struct tack_launch){1, &huge, huge, args, 0}));
    CHECK(fill_last.n == (int64_t)1 << 40);
    /* Filling the GPU (4 multiprocessors here), the entry strides over the rest. */
    CHECK(fill_last.grid == 4 * 32 && fill_last.block == 256);
    CHECK_OK(tack_backend_kernel_launch(d, k, &(struct tack_launch){1, &none, none, args, 0}));
    CHECK(sim_stat("launches") == 1);
    sim.set_kernel_hook(NULL, NULL);
    CHECK_OK(tack_device_synchronize(d));
    tack_backend_kernel_unload(d, k);
    tack_device_release(d);
}

static void test_kernel_load_errors(void)
{
    sim_open();
    tack_device *d = open_device("cuda");
    void *k = NULL;
    struct tack_kernel_code host = {.kind = TACK_CODE_HOST, .entry = "tack_kernel_entry"};
    CHECK_STATUS(tack_backend_kernel_load(d, &host, &k), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "PTX"));
    static const char bad[] = "// tack-sim: invalid\n";
    struct tack_kernel_code broken = {.kind = TACK_CODE_PTX, .data = bad, .size = sizeof bad,
                                      .entry = "tack_kernel_entry"};
    CHECK_STATUS(tack_backend_kernel_load(d, &broken, &k), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "CUDA_ERROR_INVALID_PTX"));
    struct tack_kernel_code missing = {.kind = TACK_CODE_PTX, .data = fake_ptx, .size = sizeof fake_ptx,
                                       .entry = "no_such_entry"};
    CHECK_STATUS(tack_backend_kernel_load(d, &missing, &k), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "CUDA_ERROR_NOT_FOUND"));
    CHECK(k == NULL);
    tack_device_release(d);
}

/* A CUBIN goes to the driver whole, and says what it is; one the driver
 * refuses is marked refused (the kernel layer then asks for other code),
 * and PTX the driver refuses says which NVRTC would do. The simulated
 * driver is CUDA 13.0 on a 9.0 GPU. */
static void test_kernel_load_of_cubins(void)
{
    sim_open();
    tack_device *d = open_device("cuda");
    void *k = NULL;
    size_t size = 0;
    unsigned char *image = cubin(90, 135, 8, 1, &size);
    bail_if(!image);
    struct tack_kernel_code code = {.kind = TACK_CODE_CUBIN, .data = image, .size = size, .entry = "tack_kernel_entry"};
    CHECK_OK(tack_backend_kernel_load(d, &code, &k));
    CHECK(sim_stat("modules_cubin") == 1 && sim_stat("modules_ptx") == 0);
    CHECK(!strcmp(code.target, "cubin sm_90 (CUDA 13.5)"));
    CHECK(!code.refused);
    tack_backend_kernel_unload(d, k);
    k = NULL;

    /* Shorter than its headers say: a driver, which takes no size, would
     * read past it. */
    long long loads = sim_stat("modules_loaded");
    struct tack_kernel_code cut = code;
    cut.size = size - 1;
    CHECK_STATUS(tack_backend_kernel_load(d, &cut, &k), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "damaged"));
    cut.size = 40;
    CHECK_STATUS(tack_backend_kernel_load(d, &cut, &k), TACK_ERUNTIME);
    /* A section reaching past the end (the third's size, in the table at
     * the end of the file, grown). */
    struct tack_kernel_code long_section = code;
    unsigned char *table = image + size - 4 * sizeof(Elf64_Shdr);
    Elf64_Shdr third;
    memcpy(&third, table + 3 * sizeof third, sizeof third);
    third.sh_size += 4096;
    unsigned char *grown = malloc(size);
    bail_if(!grown);
    memcpy(grown, image, size);
    memcpy(grown + (table - image) + 3 * sizeof third, &third, sizeof third);
    long_section.data = grown;
    CHECK_STATUS(tack_backend_kernel_load(d, &long_section, &k), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "damaged"));
    free(grown);
    memcpy(image, "\177ELX", 4);
    CHECK_STATUS(tack_backend_kernel_load(d, &code, &k), TACK_ERUNTIME);
    CHECK(sim_stat("modules_loaded") == loads);
    CHECK(!cut.refused && !code.refused && k == NULL);
    free(image);

    /* Another architecture: the driver refuses it, for what it is. */
    bail_if(!(image = cubin(80, 130, 8, 1, &size)));
    struct tack_kernel_code other = {.kind = TACK_CODE_CUBIN, .data = image, .size = size,
                                     .entry = "tack_kernel_entry"};
    CHECK_STATUS(tack_backend_kernel_load(d, &other, &k), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "CUDA_ERROR_NO_BINARY_FOR_GPU"));
    CHECK(contains(tack_last_error(), "cubin sm_80 (CUDA 13.0)"));
    CHECK(other.refused == 1 && k == NULL);
    free(image);

    /* PTX newer than the driver: refused, and nothing else to try. */
    static const char newer[] = "// Cuda compilation tools, release 13.5, V13.5.37\n.version 9.5\n.target sm_90\n"
                                ".visible .entry tack_kernel_entry()\n";
    struct tack_kernel_code ptx = {.kind = TACK_CODE_PTX, .data = newer, .size = sizeof newer,
                                   .entry = "tack_kernel_entry"};
    CHECK_STATUS(tack_backend_kernel_load(d, &ptx, &k), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"));
    CHECK(contains(tack_last_error(), "ptx compute_90 (PTX ISA 9.5, CUDA 13.5)"));
    CHECK(contains(tack_last_error(), "pip install \"nvidia-cuda-nvrtc==13.0.*\""));
    CHECK(!ptx.refused && k == NULL);
    tack_device_release(d);
}

static void test_dlpack_export_waits_for_queued_launches(void)
{
    sim_open();
    sim.set_kernel_hook(fill_capture, fill_run);
    tack_device *d = open_device("cuda");
    tack_array *a = f32_array(d, 64);
    void *k = load_fill(d);
    CHECK_OK(launch_fill(d, k, a, 4.0f));
    const float *raw = sim.host_address((CUdeviceptr)(uintptr_t)tack_array_data(a), 256);
    CHECK(raw[0] == 0.0f);
    /* The consumer reads the memory the moment it has the tensor, with no
     * Tack call in between: the launch must be complete by then. */
    DLManagedTensor *t = NULL;
    CHECK_OK(tack_array_to_dlpack(a, &t));
    CHECK(raw[0] == 4.0f && raw[63] == 4.0f);
    CHECK(sim_stat("launches_done") == 1);
    CHECK(tack_buffer_is_shared(tack_array_buffer(a)));
    t->deleter(t);
    tack_backend_kernel_unload(d, k);
    tack_array_release(a);
    tack_device_release(d);
}

/* ---- export_memory --------------------------------------------------------- */

static int fd_is_open(int fd) { return fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

static void test_exportable_array_exports_its_memory(void)
{
    sim_open();
    tack_device *d = open_device("cuda");
    tack_array *a = f32_array_exportable(d, 1000);
    CHECK(sim_stat("vmm_creates") == 1);
    CHECK(sim_stat("async_allocs") == 0);
    set_ramp(a, 1.0f);
    tack_exported_memory rec;
    CHECK_OK(tack_array_export_memory(a, &rec));
    CHECK(!strcmp(rec.backend, "cuda"));
    CHECK(!strcmp(rec.handle_type, "posix_fd"));
    CHECK(rec.size == 4000);
    CHECK(rec.allocation_size == 2u << 20);
    CUuuid uuid;
    sim.cuDeviceGetUuid_v2(&uuid, 0);
    CHECK(!memcmp(rec.device_uuid, uuid.bytes, 16));
    int fd = (int)rec.handle;
    CHECK(fd >= 0 && fd_is_open(fd));
    CHECK(tack_buffer_is_shared(tack_array_buffer(a)));
    /* The same memory, not a copy: later writes show through the descriptor. */
    float *mapped = mmap(NULL, rec.allocation_size, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(mapped != MAP_FAILED);
    if (mapped != MAP_FAILED) {
        CHECK(is_ramp(mapped, 1000, 1.0f));
        /* Rounded up to the granularity, and zeroed past the array. */
        CHECK(all_bytes(mapped + 1000, rec.allocation_size - 4000, 0));
        set_ramp(a, 5.0f);
        CHECK(is_ramp(mapped, 1000, 5.0f));
        munmap(mapped, rec.allocation_size);
    }
    /* Made once, then cached. */
    tack_exported_memory again;
    CHECK_OK(tack_array_export_memory(a, &again));
    CHECK(again.handle == rec.handle);
    CHECK(sim_stat("exports") == 1);
    /* A reshape is the same buffer, and the same export. */
    int64_t shape[2] = {10, 100};
    tack_array *r = NULL;
    CHECK_OK(tack_array_reshape(a, 2, shape, &r));
    CHECK_OK(tack_array_export_memory(r, &again));
    CHECK(again.handle == rec.handle);
    tack_array_release(r);
    /* The buffer closes the descriptor it exported when it goes. */
    tack_array_release(a);
    CHECK(!fd_is_open(fd));
    CHECK(sim_stat("vmm_live") == 0);
    CHECK(sim_stat("vmm_unmaps") == 1);
    tack_device_release(d);
}

static void test_plain_array_exports_a_copy(void)
{
    sim_open();
    sim.set_kernel_hook(fill_capture, fill_run);
    tack_device *d = open_device("cuda");
    tack_array *a = f32_array(d, 300);
    set_ramp(a, 1.0f);
    void *k = load_fill(d);
    /* The export waits for the launches queued on the array. */
    CHECK_OK(launch_fill(d, k, a, 9.0f));
    tack_exported_memory rec;
    CHECK_OK(tack_array_export_memory(a, &rec));
    CHECK(!strcmp(rec.backend, "cuda") && !strcmp(rec.handle_type, "posix_fd"));
    CHECK(rec.size == 1200 && rec.allocation_size == 2u << 20);
    CHECK(sim_stat("copies_dtod") == 1);
    int fd = (int)rec.handle;
    float *mapped = mmap(NULL, rec.allocation_size, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(mapped != MAP_FAILED);
    if (mapped != MAP_FAILED) {
        CHECK(mapped[0] == 9.0f && mapped[299] == 9.0f);
        /* A copy: later writes to the original are not reflected. */
        set_ramp(a, 2.0f);
        CHECK(mapped[0] == 9.0f && mapped[299] == 9.0f);
        munmap(mapped, rec.allocation_size);
    }
    /* Copied once: the second export hands out the same copy. */
    tack_exported_memory again;
    CHECK_OK(tack_array_export_memory(a, &again));
    CHECK(again.handle == rec.handle);
    CHECK(sim_stat("copies_dtod") == 1 && sim_stat("exports") == 1);
    tack_backend_kernel_unload(d, k);
    tack_array_release(a);
    CHECK(!fd_is_open(fd));
    CHECK(sim_stat("vmm_live") == 0);
    tack_device_release(d);
}

static void test_export_memory_without_vmm(void)
{
    setenv("TACK_SIM_CUDA_NO_VMM", "1", 1);
    sim_open();
    tack_device *d = open_device("cuda");
    tack_array *a = NULL;
    int64_t n = 4;
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 1, &n, 1, &a), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "exportable"));
    a = f32_array(d, 4);
    tack_exported_memory rec;
    CHECK_STATUS(tack_array_export_memory(a, &rec), TACK_ERUNTIME);
    /* Nothing kept from the failed export. */
    CHECK(tack_array_buffer(a)->export_ctx == NULL);
    tack_array_release(a);
    tack_device_release(d);
}

static int send_fd(int sock, int fd, size_t size)
{
    char control[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {&size, sizeof size};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    memset(control, 0, sizeof control);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    return sendmsg(sock, &msg, 0) == (ssize_t)sizeof size ? 0 : -1;
}

static int recv_fd(int sock, size_t *size)
{
    char control[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {size, sizeof *size};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (recvmsg(sock, &msg, 0) != (ssize_t)sizeof *size)
        return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (!c || c->cmsg_type != SCM_RIGHTS)
        return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

/* The consumer: another process that gets the descriptor over a socket,
 * reads it directly and through the driver, as a Vulkan or CUDA importer
 * would, and answers with its exit status. */
static int importer(int sock)
{
    size_t size = 0;
    int fd = recv_fd(sock, &size);
    if (fd < 0)
        return 10;
    float *mapped = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED || !is_ramp(mapped, 500, 4.0f))
        return 11;
    munmap(mapped, size);
    sim_open();
    CUcontext ctx = NULL;
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr p = 0;
    sim.cuDevicePrimaryCtxRetain(&ctx, 0);
    sim.cuCtxPushCurrent_v2(ctx);
    if (sim.cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return 12;
    close(fd);
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (sim.cuMemAddressReserve(&p, size, 0, 0, 0) || sim.cuMemMap(p, size, 0, h, 0) ||
        sim.cuMemSetAccess(p, size, &access, 1))
        return 13;
    float v[500];
    if (sim.cuMemcpyDtoH_v2(v, p, sizeof v) || !is_ramp(v, 500, 4.0f))
        return 14;
    sim.cuMemUnmap(p, size);
    sim.cuMemAddressFree(p, size);
    sim.cuMemRelease(h);
    return 0;
}

static void test_export_memory_reaches_another_process(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    /* Forked before anything is exported, so the descriptor can only
     * arrive through the socket. */
    pid_t child = fork();
    if (child == 0) {
        close(sv[0]);
        int r = importer(sv[1]);
        fflush(NULL);
        _exit(r);
    }
    close(sv[1]);
    sim_open();
    tack_device *d = open_device("cuda");
    tack_array *a = f32_array_exportable(d, 500);
    set_ramp(a, 4.0f);
    tack_exported_memory rec;
    CHECK_OK(tack_array_export_memory(a, &rec));
    CHECK(send_fd(sv[0], (int)rec.handle, rec.allocation_size) == 0);
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status));
    if (!WIFEXITED(status) || WEXITSTATUS(status))
        fprintf(stderr, "importer exited with %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(sv[0]);
    tack_array_release(a);
    tack_device_release(d);
}

int main(void)
{
    if (!cuda_sim_named())
        return 1;
    RUN(test_no_driver_is_a_runtime_error);
    RUN(test_no_device_is_a_runtime_error);
    RUN(test_failed_init_is_a_runtime_error);
    RUN(test_ordinals);
    RUN(test_retains_the_primary_context_without_a_current_one);
    RUN(test_adopts_the_current_context);
    RUN(test_a_current_primary_context_is_retained_not_adopted);
    RUN(test_a_context_of_another_device_is_not_adopted);
    RUN(test_works_from_any_thread);
    RUN(test_use_after_the_context_is_destroyed);
    RUN(test_use_after_the_primary_context_is_reset);
    RUN(test_allocations_are_zeroed);
    RUN(test_copies_fill_and_to_device);
    RUN(test_frees_are_stream_ordered);
    RUN(test_without_memory_pools);
    RUN(test_allocation_failures_keep_nothing);
    RUN(test_wrap_accepts_device_pinned_and_managed_memory);
    RUN(test_wrap_refuses_host_memory);
    RUN(test_memory_space_is_the_drivers_answer);
    RUN(test_wrap_refuses_another_devices_memory);
    RUN(test_dlpack_export_and_import);
    RUN(test_dlpack_import_of_pinned_and_host_tensors);
    RUN(test_launches_are_queued_and_ordered);
    RUN(test_launch_geometry_strides_over_large_ranges);
    RUN(test_kernel_load_errors);
    RUN(test_kernel_load_of_cubins);
    RUN(test_dlpack_export_waits_for_queued_launches);
    RUN(test_exportable_array_exports_its_memory);
    RUN(test_plain_array_exports_a_copy);
    RUN(test_export_memory_without_vmm);
    RUN(test_export_memory_reaches_another_process);
    CHECK_DONE();
}
