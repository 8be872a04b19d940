/*
 * The CUDA driver API, loaded at run time.
 *
 * The declarations below are written by Tack from NVIDIA's public CUDA
 * driver API reference (cuda.h of the CUDA toolkit): only the types, enum
 * values and entry points Tack calls. Building Tack needs no CUDA SDK; the
 * driver (libcuda.so.1, or the library named by TACK_CUDA_LIBRARY) is opened
 * through the loader (library.h) on first use and every entry point is
 * resolved once.
 *
 * Entry points whose ABI changed are resolved by their versioned symbol
 * (cuMemAlloc_v2, cuCtxPushCurrent_v2, ...): the unversioned symbol still
 * exported by libcuda is the old ABI (32-bit sizes, for example), which is
 * what cuda.h's #defines steer compiled code away from.
 *
 * tests/c/test_cuda_abi.c compiles against the toolkit's cuda.h, when one is
 * installed, and checks that these declarations agree with it.
 */
#ifndef TACK_DRIVER_CUDA_H
#define TACK_DRIVER_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "library.h"
#include "tack/status.h"

/* The ABI test (tests/c/test_cuda_abi_sdk.c) defines TACK_CUDA_SDK_TYPES
 * after including the toolkit's cuda.h, to check the entry points below
 * against the toolkit's own types and declarations. */
#ifndef TACK_CUDA_SDK_TYPES

/* Types. CUresult and the other enums are C enums in cuda.h: int-sized, so
 * int carries them across the ABI. */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;

typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999,
};

/* CUdevice_attribute (only those Tack reads). */
typedef int CUdevice_attribute;
enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
    CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103,
    CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED = 105,
    CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
};

/* CUpointer_attribute (only those Tack reads). */
typedef int CUpointer_attribute;
enum {
    CU_POINTER_ATTRIBUTE_CONTEXT = 1,
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
};

/* CUmemorytype */
enum {
    CU_MEMORYTYPE_HOST = 1,
    CU_MEMORYTYPE_DEVICE = 2,
    CU_MEMORYTYPE_ARRAY = 3,
    CU_MEMORYTYPE_UNIFIED = 4,
};

/* CUstream_flags */
enum {
    CU_STREAM_DEFAULT = 0,
    CU_STREAM_NON_BLOCKING = 1,
};

/* CUevent_flags, CUevent_wait_flags */
enum {
    CU_EVENT_DEFAULT = 0,
    CU_EVENT_DISABLE_TIMING = 2,
    CU_EVENT_WAIT_DEFAULT = 0,
};

/* Virtual memory management: CUmemAllocationType, CUmemAllocationHandleType,
 * CUmemLocationType, CUmemAccess_flags, CUmemAllocationGranularity_flags. */
typedef int CUmemAllocationType;
typedef int CUmemAllocationHandleType;
typedef int CUmemLocationType;
typedef int CUmemAccess_flags;
typedef int CUmemAllocationGranularity_flags;
enum {
    CU_MEM_ALLOCATION_TYPE_PINNED = 1,
    CU_MEM_HANDLE_TYPE_NONE = 0,
    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1,
    CU_MEM_HANDLE_TYPE_WIN32 = 2,
    CU_MEM_HANDLE_TYPE_WIN32_KMT = 4,
    CU_MEM_LOCATION_TYPE_DEVICE = 1,
    CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
    CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
    CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1,
};

typedef struct CUmemLocation_st {
    CUmemLocationType type;
    int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
    CUmemAllocationType type;
    CUmemAllocationHandleType requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData; /* must be NULL except for CU_MEM_HANDLE_TYPE_WIN32 */
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;

typedef struct CUmemAccessDesc_st {
    CUmemLocation location;
    CUmemAccess_flags flags;
} CUmemAccessDesc;

#endif /* TACK_CUDA_SDK_TYPES */

/*
 * The entry points, listed once in the drivers' shape (src/driver/library.h):
 * X(return type, field, symbol, required, parameters). The ABI test compares
 * each signature with the toolkit's declaration of `symbol`. A required
 * symbol missing from the driver fails the load (the driver is too old); an
 * optional one leaves the member NULL and the caller takes the documented
 * fallback.
 */
#define TACK_CUDA_SYMBOLS(X)                                                                                   \
    X(CUresult, cuInit, cuInit, 1, (unsigned int flags))                                                       \
    X(CUresult, cuDriverGetVersion, cuDriverGetVersion, 1, (int *version))                                     \
    X(CUresult, cuGetErrorName, cuGetErrorName, 1, (CUresult error, const char **name))                        \
    X(CUresult, cuGetErrorString, cuGetErrorString, 1, (CUresult error, const char **text))                    \
    X(CUresult, cuDeviceGetCount, cuDeviceGetCount, 1, (int *count))                                           \
    X(CUresult, cuDeviceGet, cuDeviceGet, 1, (CUdevice * device, int ordinal))                                 \
    X(CUresult, cuDeviceGetName, cuDeviceGetName, 1, (char *name, int len, CUdevice dev))                      \
    X(CUresult, cuDeviceGetAttribute, cuDeviceGetAttribute, 1,                                                 \
      (int *value, CUdevice_attribute attrib, CUdevice dev))                                                   \
    /* _v2 (CUDA 11.4) reports the MIG instance's UUID under MIG; the older one is the fallback. */            \
    X(CUresult, cuDeviceGetUuid, cuDeviceGetUuid_v2, 0, (CUuuid * uuid, CUdevice dev))                         \
    X(CUresult, cuDeviceGetUuid_v1, cuDeviceGetUuid, 0, (CUuuid * uuid, CUdevice dev))                         \
    X(CUresult, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 1, (CUcontext * ctx, CUdevice dev))        \
    X(CUresult, cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, 1, (CUdevice dev))                    \
    X(CUresult, cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState, 1,                                     \
      (CUdevice dev, unsigned int *flags, int *active))                                                        \
    X(CUresult, cuCtxGetCurrent, cuCtxGetCurrent, 1, (CUcontext * ctx))                                        \
    X(CUresult, cuCtxPushCurrent, cuCtxPushCurrent_v2, 1, (CUcontext ctx))                                     \
    X(CUresult, cuCtxPopCurrent, cuCtxPopCurrent_v2, 1, (CUcontext * ctx))                                     \
    X(CUresult, cuCtxGetDevice, cuCtxGetDevice, 1, (CUdevice * device))                                        \
    /* CUDA 12.0: lets Tack tell a live context from a destroyed one. */                                       \
    X(CUresult, cuCtxGetId, cuCtxGetId, 0, (CUcontext ctx, unsigned long long *id))                            \
    X(CUresult, cuCtxSynchronize, cuCtxSynchronize, 1, (void))                                                 \
    X(CUresult, cuStreamCreate, cuStreamCreate, 1, (CUstream * stream, unsigned int flags))                    \
    X(CUresult, cuStreamDestroy, cuStreamDestroy_v2, 1, (CUstream stream))                                     \
    X(CUresult, cuStreamSynchronize, cuStreamSynchronize, 1, (CUstream stream))                                \
    /* Stream-ordered DLPack export: a consumer's stream waits for an event on Tack's. */                      \
    X(CUresult, cuStreamGetCtx, cuStreamGetCtx, 1, (CUstream stream, CUcontext * ctx))                         \
    X(CUresult, cuEventCreate, cuEventCreate, 1, (CUevent * event, unsigned int flags))                        \
    X(CUresult, cuEventRecord, cuEventRecord, 1, (CUevent event, CUstream stream))                             \
    X(CUresult, cuEventDestroy, cuEventDestroy_v2, 1, (CUevent event))                                         \
    X(CUresult, cuStreamWaitEvent, cuStreamWaitEvent, 1, (CUstream stream, CUevent event, unsigned int flags)) \
    X(CUresult, cuMemAlloc, cuMemAlloc_v2, 1, (CUdeviceptr * ptr, size_t size))                                \
    X(CUresult, cuMemFree, cuMemFree_v2, 1, (CUdeviceptr ptr))                                                 \
    /* CUDA 11.2: stream-ordered allocation; without it Tack uses cuMemAlloc. */                               \
    X(CUresult, cuMemAllocAsync, cuMemAllocAsync, 0, (CUdeviceptr * ptr, size_t size, CUstream stream))        \
    X(CUresult, cuMemFreeAsync, cuMemFreeAsync, 0, (CUdeviceptr ptr, CUstream stream))                         \
    X(CUresult, cuMemsetD8Async, cuMemsetD8Async, 1,                                                           \
      (CUdeviceptr dst, unsigned char value, size_t n, CUstream stream))                                       \
    X(CUresult, cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, 1,                                                    \
      (CUdeviceptr dst, const void *src, size_t size, CUstream stream))                                        \
    X(CUresult, cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, 1,                                                    \
      (void *dst, CUdeviceptr src, size_t size, CUstream stream))                                              \
    X(CUresult, cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, 1,                                                    \
      (CUdeviceptr dst, CUdeviceptr src, size_t size, CUstream stream))                                        \
    X(CUresult, cuPointerGetAttribute, cuPointerGetAttribute, 1,                                               \
      (void *data, CUpointer_attribute attribute, CUdeviceptr ptr))                                            \
    /* CUDA 10.2: virtual memory management, for exportable allocations. */                                    \
    X(CUresult, cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, 0,                               \
      (size_t * granularity, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags option))        \
    X(CUresult, cuMemCreate, cuMemCreate, 0,                                                                   \
      (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop,                    \
       unsigned long long flags))                                                                              \
    X(CUresult, cuMemRelease, cuMemRelease, 0, (CUmemGenericAllocationHandle handle))                          \
    X(CUresult, cuMemAddressReserve, cuMemAddressReserve, 0,                                                   \
      (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags))          \
    X(CUresult, cuMemAddressFree, cuMemAddressFree, 0, (CUdeviceptr ptr, size_t size))                         \
    X(CUresult, cuMemMap, cuMemMap, 0,                                                                         \
      (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,                       \
       unsigned long long flags))                                                                              \
    X(CUresult, cuMemUnmap, cuMemUnmap, 0, (CUdeviceptr ptr, size_t size))                                     \
    X(CUresult, cuMemSetAccess, cuMemSetAccess, 0,                                                             \
      (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count))                               \
    X(CUresult, cuMemExportToShareableHandle, cuMemExportToShareableHandle, 0,                                 \
      (void *handle_out, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType type,                  \
       unsigned long long flags))                                                                              \
    /* Cross-process arrays: maps another process's exported allocation. */                                    \
    X(CUresult, cuMemImportFromShareableHandle, cuMemImportFromShareableHandle, 0,                             \
      (CUmemGenericAllocationHandle * handle, void *os_handle, CUmemAllocationHandleType type))                \
    /* Kernels: PTX modules loaded and launched on Tack's stream. */                                           \
    X(CUresult, cuModuleLoadData, cuModuleLoadData, 1, (CUmodule * module, const void *image))                 \
    X(CUresult, cuModuleUnload, cuModuleUnload, 1, (CUmodule module))                                          \
    X(CUresult, cuModuleGetFunction, cuModuleGetFunction, 1,                                                   \
      (CUfunction * function, CUmodule module, const char *name))                                              \
    X(CUresult, cuLaunchKernel, cuLaunchKernel, 1,                                                             \
      (CUfunction f, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z, unsigned int block_x,      \
       unsigned int block_y, unsigned int block_z, unsigned int shared_bytes, CUstream stream, void **params,  \
       void **extra))

/* The process-wide table of driver entry points. Optional members may be
 * NULL (see TACK_CUDA_SYMBOLS). */
struct tack_cuda_api {
#define TACK_CUDA_MEMBER(ret, field, symbol, required, params) ret(*field) params;
    TACK_CUDA_SYMBOLS(TACK_CUDA_MEMBER)
#undef TACK_CUDA_MEMBER
    int driver_version; /* cuDriverGetVersion: 12040 is CUDA 12.4 */
    struct tack_library library;
};

/* Opens the driver on first call (thread-safe: exactly one thread loads it)
 * and calls cuInit(0). On success sets *api to the process-wide table and
 * returns TACK_OK. On failure returns TACK_ERUNTIME with a message naming
 * the library and what went wrong (not found, a required entry point
 * missing, cuInit failing, for example with no device), leaves *api
 * untouched, and every later call fails the same way: the driver is loaded
 * at most once per process. */
tack_status tack_cuda_api_get(const struct tack_cuda_api **api);

/* Writes "CUDA_ERROR_NAME: description" for a driver result into buf and
 * returns buf. Works (with the number alone) before or without a loaded
 * driver. Never fails. */
const char *tack_cuda_error_text(CUresult result, char *buf, size_t cap);

#endif
