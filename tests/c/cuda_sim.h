/*
 * The simulated CUDA driver (tests/sim/cuda_sim.c, named by
 * TACK_CUDA_LIBRARY) as another library in the process sees it: the driver
 * entry points the CUDA tests call themselves, and the simulator's own
 * hooks. Include after cuda_fill.h; one instance per test program.
 */
#ifndef TACK_TEST_CUDA_SIM_H
#define TACK_TEST_CUDA_SIM_H

#include <stdio.h>
#include <stdlib.h>

#include "../../src/driver/cuda.h"
#include "cuda_fill.h"
#include "sim.h"

typedef void *(*capture_fn)(const char *name, void **params, const unsigned grid[3], const unsigned block[3]);
typedef void (*run_fn)(void *closure);

static struct sim {
    void *lib;
    long long (*stats)(const char *name);
    int (*fail)(const char *symbol, int error, int nth);
    void *(*host_address)(CUdeviceptr ptr, size_t n);
    void (*set_kernel_hook)(capture_fn capture, run_fn run);
    CUresult (*cuInit)(unsigned int);
    CUresult (*cuCtxCreate_v2)(CUcontext *, unsigned int, CUdevice);
    CUresult (*cuCtxDestroy_v2)(CUcontext);
    CUresult (*cuCtxGetCurrent)(CUcontext *);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxPushCurrent_v2)(CUcontext);
    CUresult (*cuCtxPopCurrent_v2)(CUcontext *);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice);
    CUresult (*cuDevicePrimaryCtxReset_v2)(CUdevice);
    CUresult (*cuDeviceGetUuid_v2)(CUuuid *, CUdevice);
    CUresult (*cuMemAlloc_v2)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree_v2)(CUdeviceptr);
    CUresult (*cuMemAllocHost_v2)(void **, size_t);
    CUresult (*cuMemFreeHost)(void *);
    CUresult (*cuMemAllocManaged)(CUdeviceptr *, size_t, unsigned int);
    CUresult (*cuMemHostRegister_v2)(void *, size_t, unsigned int);
    CUresult (*cuMemHostUnregister)(void *);
    CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyDtoH_v2)(void *, CUdeviceptr, size_t);
    CUresult (*cuMemcpyDtoHAsync_v2)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemImportFromShareableHandle)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
    CUresult (*cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*cuMemAddressFree)(CUdeviceptr, size_t);
    CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*cuMemUnmap)(CUdeviceptr, size_t);
    CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*cuMemRelease)(CUmemGenericAllocationHandle);
    CUresult (*cuStreamCreate)(CUstream *, unsigned int);
    CUresult (*cuStreamDestroy_v2)(CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
} sim;

/* A driver entry point, and one of the simulator's own hooks. */
#define SIM_LOAD(name) SIM_SYMBOL(sim.lib, sim.name, #name)
#define SIM_OWN(name) SIM_SYMBOL(sim.lib, sim.name, "tack_sim_cuda_" #name)

/* Opens the same library Tack will (one instance per process) and, like
 * any library using CUDA, initialises it. */
static void sim_open(void)
{
    sim.lib = sim_library("TACK_CUDA_LIBRARY", "the simulated driver");
    SIM_OWN(stats);
    SIM_OWN(fail);
    SIM_OWN(host_address);
    SIM_OWN(set_kernel_hook);
    fill_host_address = sim.host_address;
    SIM_LOAD(cuInit);
    SIM_LOAD(cuCtxCreate_v2);
    SIM_LOAD(cuCtxDestroy_v2);
    SIM_LOAD(cuCtxGetCurrent);
    SIM_LOAD(cuCtxSetCurrent);
    SIM_LOAD(cuCtxPushCurrent_v2);
    SIM_LOAD(cuCtxPopCurrent_v2);
    SIM_LOAD(cuDevicePrimaryCtxRetain);
    SIM_LOAD(cuDevicePrimaryCtxRelease_v2);
    SIM_LOAD(cuDevicePrimaryCtxReset_v2);
    SIM_LOAD(cuDeviceGetUuid_v2);
    SIM_LOAD(cuMemAlloc_v2);
    SIM_LOAD(cuMemFree_v2);
    SIM_LOAD(cuMemAllocHost_v2);
    SIM_LOAD(cuMemFreeHost);
    SIM_LOAD(cuMemAllocManaged);
    SIM_LOAD(cuMemHostRegister_v2);
    SIM_LOAD(cuMemHostUnregister);
    SIM_LOAD(cuMemcpyHtoD_v2);
    SIM_LOAD(cuMemcpyDtoH_v2);
    SIM_LOAD(cuMemcpyDtoHAsync_v2);
    SIM_LOAD(cuMemImportFromShareableHandle);
    SIM_LOAD(cuMemAddressReserve);
    SIM_LOAD(cuMemAddressFree);
    SIM_LOAD(cuMemMap);
    SIM_LOAD(cuMemUnmap);
    SIM_LOAD(cuMemSetAccess);
    SIM_LOAD(cuMemRelease);
    SIM_LOAD(cuStreamCreate);
    SIM_LOAD(cuStreamDestroy_v2);
    SIM_LOAD(cuStreamSynchronize);
    if (sim.cuInit(0) != CUDA_SUCCESS) {
        fprintf(stderr, "the simulated driver did not initialise\n");
        exit(2);
    }
}

static long long sim_stat(const char *name) { return sim_counter(sim.stats, name); }

/* For a test's main: whether TACK_CUDA_LIBRARY is set, as every case needs;
 * if not, says where it must point. */
static inline int cuda_sim_named(void)
{
    if (getenv("TACK_CUDA_LIBRARY"))
        return 1;
    fprintf(stderr, "set TACK_CUDA_LIBRARY to the simulated driver (tests/sim/cuda_sim.c)\n");
    return 0;
}

#endif
