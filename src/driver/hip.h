/*
 * The HIP runtime API, loaded at run time.
 *
 * Declared by Tack from AMD's hip_runtime_api.h: only the calls, values and
 * structures Tack uses, under tack_hip_ names so that a test can include
 * the vendor header beside this one and compare them
 * (tests/c/test_hip_abi.c). No HIP SDK is needed to build Tack.
 *
 * The library is libamdhip64.so (then its versioned names), or the file
 * named by the environment variable TACK_HIP_LIBRARY (the simulated runtime
 * in tests/sim/), opened through the loader (library.h). Its compiler,
 * hipRTC, is a library of its own (hiprtc.h).
 */
#ifndef TACK_DRIVER_HIP_H
#define TACK_DRIVER_HIP_H

#include <stddef.h>
#include <stdint.h>

#include "library.h"
#include "tack/status.h"

/* hipError_t */
typedef int tack_hip_error;
#define TACK_HIP_SUCCESS 0
#define TACK_HIP_ERROR_INVALID_VALUE 1
#define TACK_HIP_ERROR_OUT_OF_MEMORY 2
#define TACK_HIP_ERROR_NOT_INITIALIZED 3
#define TACK_HIP_ERROR_NO_DEVICE 100
#define TACK_HIP_ERROR_INVALID_DEVICE 101

/* hipMemcpyKind */
#define TACK_HIP_MEMCPY_HOST_TO_DEVICE 1
#define TACK_HIP_MEMCPY_DEVICE_TO_HOST 2
#define TACK_HIP_MEMCPY_DEFAULT 4

/*
 * hipMemoryType. Its values changed in ROCm 6 (to match CUDA's), so a
 * runtime is read according to hipRuntimeGetVersion's major version.
 * ROCm 5 also answered a failed query for memory it did not know, where
 * ROCm 6 succeeds with "unregistered".
 */
#define TACK_HIP5_MEMORY_TYPE_HOST 0
#define TACK_HIP5_MEMORY_TYPE_DEVICE 1
#define TACK_HIP5_MEMORY_TYPE_ARRAY 2
#define TACK_HIP5_MEMORY_TYPE_UNIFIED 3
#define TACK_HIP6_MEMORY_TYPE_UNREGISTERED 0
#define TACK_HIP6_MEMORY_TYPE_HOST 1
#define TACK_HIP6_MEMORY_TYPE_DEVICE 2
#define TACK_HIP6_MEMORY_TYPE_MANAGED 3
#define TACK_HIP6_MEMORY_TYPE_ARRAY 10
#define TACK_HIP6_MEMORY_TYPE_UNIFIED 11

/* hipPointerAttribute_t: the same layout in ROCm 5 (field memoryType) and
 * ROCm 6 (field type). */
typedef struct tack_hip_pointer_attributes {
    int type;
    int device;
    void *devicePointer;
    void *hostPointer;
    int isManaged;
    unsigned allocationFlags;
} tack_hip_pointer_attributes;

/* Opaque handles: hipModule_t, hipFunction_t, hipStream_t (NULL is the
 * null stream, ordered with hipMemcpy and hipMemset). */
typedef struct tack_hip_module_object *tack_hip_module;
typedef struct tack_hip_function_object *tack_hip_function;
typedef struct tack_hip_stream_object *tack_hip_stream;

/* Every entry point Tack calls, listed once in the drivers' shape
 * (src/driver/library.h); each is required but hipDeviceGetName, which
 * only reports name (a device without one is reported without). */
#define TACK_HIP_FUNCTIONS(X)                                                                                 \
    X(tack_hip_error, hipInit, hipInit, 1, (unsigned int flags))                                              \
    X(tack_hip_error, hipRuntimeGetVersion, hipRuntimeGetVersion, 1, (int *version))                          \
    X(tack_hip_error, hipGetDeviceCount, hipGetDeviceCount, 1, (int *count))                                  \
    X(tack_hip_error, hipDeviceGetName, hipDeviceGetName, 0, (char *name, int len, int device))               \
    X(tack_hip_error, hipGetDevice, hipGetDevice, 1, (int *device))                                           \
    X(tack_hip_error, hipSetDevice, hipSetDevice, 1, (int device))                                            \
    X(tack_hip_error, hipMalloc, hipMalloc, 1, (void **ptr, size_t size))                                     \
    X(tack_hip_error, hipFree, hipFree, 1, (void *ptr))                                                       \
    X(tack_hip_error, hipMemset, hipMemset, 1, (void *dst, int value, size_t size))                           \
    X(tack_hip_error, hipMemcpy, hipMemcpy, 1, (void *dst, const void *src, size_t size, int kind))           \
    X(tack_hip_error, hipDeviceSynchronize, hipDeviceSynchronize, 1, (void))                                  \
    X(tack_hip_error, hipPointerGetAttributes, hipPointerGetAttributes, 1,                                    \
      (tack_hip_pointer_attributes * attributes, const void *ptr))                                            \
    X(tack_hip_error, hipGetLastError, hipGetLastError, 1, (void))                                            \
    X(const char *, hipGetErrorString, hipGetErrorString, 1, (tack_hip_error error))                          \
    X(tack_hip_error, hipModuleLoadData, hipModuleLoadData, 1, (tack_hip_module * module, const void *image)) \
    X(tack_hip_error, hipModuleGetFunction, hipModuleGetFunction, 1,                                          \
      (tack_hip_function * function, tack_hip_module module, const char *name))                               \
    X(tack_hip_error, hipModuleLaunchKernel, hipModuleLaunchKernel, 1,                                        \
      (tack_hip_function f, unsigned int gridX, unsigned int gridY, unsigned int gridZ, unsigned int blockX,  \
       unsigned int blockY, unsigned int blockZ, unsigned int sharedMemBytes, tack_hip_stream stream,         \
       void **kernelParams, void **extra))                                                                    \
    X(tack_hip_error, hipModuleUnload, hipModuleUnload, 1, (tack_hip_module module))

/* The loaded entry points, and the runtime's major version. */
struct tack_hip_api {
#define TACK_HIP_POINTER(ret, field, symbol, required, params) ret(*field) params;
    TACK_HIP_FUNCTIONS(TACK_HIP_POINTER)
#undef TACK_HIP_POINTER
    int major_version;
    struct tack_library library;
};

/* Loads the runtime, resolves every entry point and reads its version, once
 * per process (thread-safe); later calls return the same table or the same
 * failure. On error (library missing, a symbol missing, hipInit failing:
 * no GPU) returns TACK_ERUNTIME with a message saying what to install or
 * set, and leaves *out untouched. The library is never unloaded. */
tack_status tack_hip_load(const struct tack_hip_api **out);

/* The runtime's description of an error; never NULL. Never fails. */
const char *tack_hip_error_string(const struct tack_hip_api *api, tack_hip_error error);

#endif
