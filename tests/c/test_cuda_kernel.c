/*
 * Kernels on the CUDA backend, end to end, against the simulated driver:
 * real NVRTC makes a CUBIN, the simulator loads it and queues launches.
 * The simulator cannot run PTX, so a host implementation of the test's one
 * kernel, installed as the simulator's kernel hook, stands in for the GPU
 * when the stream reaches the launch; what is checked is what Tack does:
 * the arguments it binds, the order of launches against copies, exports and
 * waits, and the checks made before anything runs.
 * Skipped (exit 77) where NVRTC cannot be found.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/driver/cuda.h"
#include "arrays.h"
#include "check.h"
#include "kernels.h"
#include "grid2d.h"
#include "sim.h"
#include "standin.h"
#include "tack/kernel.h"
#include "tack/tack.h"

typedef void *(*capture_fn)(const char *name, void **params, const unsigned grid[3], const unsigned block[3]);
typedef void (*run_fn)(void *closure);

static long long (*sim_stats)(const char *name);
static void (*sim_set_kernel_hook)(capture_fn capture, run_fn run);
static CUresult (*sim_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*sim_cuMemFree)(CUdeviceptr);
static CUresult (*sim_cuCtxPushCurrent)(CUcontext);
static CUresult (*sim_cuCtxPopCurrent)(CUcontext *);

static void sim_open(void)
{
    void *lib = sim_library("TACK_CUDA_LIBRARY", "the simulated driver");
    SIM_SYMBOL(lib, sim_stats, "tack_sim_cuda_stats");
    standin_install(lib, "tack_sim_cuda_host_address", "tack_sim_cuda_set_kernel_hook", STANDIN_PARAMS);
    SIM_SYMBOL(lib, sim_set_kernel_hook, "tack_sim_cuda_set_kernel_hook");
    SIM_SYMBOL(lib, sim_cuMemAlloc, "cuMemAlloc_v2");
    SIM_SYMBOL(lib, sim_cuMemFree, "cuMemFree_v2");
    SIM_SYMBOL(lib, sim_cuCtxPushCurrent, "cuCtxPushCurrent_v2");
    SIM_SYMBOL(lib, sim_cuCtxPopCurrent, "cuCtxPopCurrent_v2");
}

/* ---- helpers --------------------------------------------------------------- */

static tack_device *cuda;
static tack_kernel *saxpy;

static tack_array *ramp(int64_t n, float scale) { return ramp_on(cuda, n, scale); }

static tack_status call_saxpy(float a, tack_array *x, tack_array *y) { return saxpy_call(saxpy, a, x, y); }

/* ---- cases ----------------------------------------------------------------- */

static void test_launch_is_queued_with_its_arguments(void)
{
    tack_array *x = ramp(1000, 1.0f), *y = ramp(1000, 2.0f);
    long long launches = sim_stats("launches"), done = sim_stats("launches_done");
    CHECK_OK(call_saxpy(3.0f, x, y));
    CHECK(sim_stats("launches") == launches + 1);
    CHECK(sim_stats("launches_done") == done);
    const struct standin_launch *seen = &standin_last;
    CHECK(standin_i64(seen, 0) == 1000 && standin_f32(seen, 1) == 3.0f);
    CHECK(standin_i64(seen, 2) == (int64_t)(uintptr_t)tack_array_data(x));
    CHECK(standin_i64(seen, 3) == (int64_t)(uintptr_t)tack_array_data(y));
    /* Reading y waits for the launch that writes it. */
    CHECK(element(y, 10) == 3.0f * 10.0f + 20.0f);
    CHECK(sim_stats("launches_done") == done + 1);
    tack_array_release(x);
    tack_array_release(y);
}

static void test_export_sees_queued_launches_complete(void)
{
    tack_array *x = ramp(128, 1.0f), *y = ramp(128, 1.0f);
    CHECK_OK(call_saxpy(2.0f, x, y));
    const float *raw = standin_host_of((uint64_t)(uintptr_t)tack_array_data(y), 512);
    CHECK(raw && raw[5] == 5.0f);
    DLManagedTensorVersioned *t = NULL;
    CHECK_OK(tack_array_to_dlpack_versioned(y, &t));
    /* The consumer reads at once, on its own stream. */
    CHECK(raw && raw[5] == 15.0f);
    /* y is shared now: the next launch is complete when the call returns. */
    CHECK_OK(call_saxpy(1.0f, x, y));
    CHECK(raw && raw[5] == 20.0f);
    CHECK(sim_stats("launches_done") == sim_stats("launches"));
    t->deleter(t);
    tack_array_release(x);
    tack_array_release(y);
}

static void test_launch_over_wrapped_memory_completes_before_returning(void)
{
    CUdeviceptr p = 0;
    CUcontext ctx = (CUcontext)(uintptr_t)tack_device_context_handle(cuda);
    sim_cuCtxPushCurrent(ctx);
    CHECK(sim_cuMemAlloc(&p, 256) == CUDA_SUCCESS);
    CUcontext popped;
    sim_cuCtxPopCurrent(&popped);
    int64_t n = 64;
    tack_array *y = NULL, *x = ramp(64, 1.0f);
    CHECK_OK(tack_array_wrap(cuda, p, TACK_F32, 1, &n, 1, &y));
    float zeros[64] = {0};
    CHECK_OK(tack_array_copy_from_host(y, zeros, sizeof zeros));
    CHECK_OK(call_saxpy(4.0f, x, y));
    /* The owner may read it at any moment: no launch left queued. */
    CHECK(sim_stats("launches_done") == sim_stats("launches"));
    const float *raw = standin_host_of(p, 256);
    CHECK(raw && raw[3] == 12.0f);
    tack_array_release(y);
    tack_array_release(x);
    sim_cuCtxPushCurrent(ctx);
    CHECK(sim_cuMemFree(p) == CUDA_SUCCESS);
    sim_cuCtxPopCurrent(&popped);
}

/* ---- a 2-D domain: the entry's extents, the grid, and its coverage -------- */

static struct grid2d_launch seen2;

static void *grid2d_capture(const char *name, void **params, const unsigned grid[3], const unsigned block[3])
{
    return grid2d_capture_values(name, params[0], params[1], params[2], (uint64_t) * (CUdeviceptr *)params[3],
                                 standin_host_of, grid, block, &seen2);
}

static void test_2d_launch_geometry_covers_the_domain(void)
{
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create(GRID2D_SOURCE, NULL, &k));
    const char *src = NULL;
    CHECK_OK(tack_kernel_generated_source(k, "cuda", &src));
    CHECK(src && strstr(src, "tack_kernel_entry(tack_index tack_n0_, tack_index tack_n1_, tack_i64_ tack_p0_"));
    CHECK(src && strstr(src, "blockIdx.y") && strstr(src, "tack_i_ < tack_n0_") && strstr(src, "tack_j_ < tack_n1_"));
    tack_kernel_release(k);
    sim_set_kernel_hook(grid2d_capture, grid2d_run_and_free);
    grid2d_check(cuda, 1000, 70, &seen2);
    /* 32 threads along the contiguous index, 8 along the other. */
    CHECK(seen2.block[0] == 32 && seen2.block[1] == 8 && seen2.block[2] == 1);
    CHECK(seen2.grid[0] == 3 && seen2.grid[1] == 125 && seen2.grid[2] == 1);
    sim_set_kernel_hook(standin_capture_params, standin_run);
}

int main(void)
{
    char cache[] = "/tmp/tack-test-cuda-kernel-XXXXXX";
    int status = nvrtc_test_begin(cache);
    if (status)
        return status;
    sim_open();
    standin_model = &standin_saxpy;
    if (!saxpy_open("cuda", &cuda, &saxpy))
        CHECK_DONE();
    CHECK(sim_stats("modules_loaded") == 1);
    /* The simulated GPU is sm_90 under a CUDA 13.0 driver, which NVRTC 12
     * and 13 both make CUBINs for: no PTX to compile at load. */
    const char *target = NULL;
    CHECK_OK(tack_kernel_target(saxpy, cuda, &target));
    CHECK(target && !strncmp(target, "cubin sm_90 (CUDA 1", 19));
    CHECK(sim_stats("modules_cubin") == 1 && sim_stats("modules_ptx") == 0);
    RUN(test_launch_is_queued_with_its_arguments);
    RUN(test_export_sees_queued_launches_complete);
    RUN(test_launch_over_wrapped_memory_completes_before_returning);
    RUN(test_2d_launch_geometry_covers_the_domain);
    saxpy_close(cuda, saxpy);
    remove_tree(cache);
    CHECK_DONE();
}
