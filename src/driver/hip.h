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
 * in tests/sim/).
 */
#ifndef TACK_DRIVER_HIP_H
#define TACK_DRIVER_HIP_H

#include <stddef.h>
#include <stdint.h>

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

/* Every entry point Tack calls, listed once: X(return type, name, parameters). */
#define TACK_HIP_FUNCTIONS(X)                                                                                   \
    X(tack_hip_error, hipInit, (unsigned int flags))                                                           \
    X(tack_hip_error, hipRuntimeGetVersion, (int *version))                                                    \
    X(tack_hip_error, hipGetDeviceCount, (int *count))                                                         \
    X(tack_hip_error, hipGetDevice, (int *device))                                                             \
    X(tack_hip_error, hipSetDevice, (int device))                                                              \
    X(tack_hip_error, hipMalloc, (void **ptr, size_t size))                                                    \
    X(tack_hip_error, hipFree, (void *ptr))                                                                    \
    X(tack_hip_error, hipMemset, (void *dst, int value, size_t size))                                          \
    X(tack_hip_error, hipMemcpy, (void *dst, const void *src, size_t size, int kind))                          \
    X(tack_hip_error, hipDeviceSynchronize, (void))                                                            \
    X(tack_hip_error, hipPointerGetAttributes, (tack_hip_pointer_attributes * attributes, const void *ptr))   \
    X(tack_hip_error, hipGetLastError, (void))                                                                 \
    X(const char *, hipGetErrorString, (tack_hip_error error))                                                 \
    X(tack_hip_error, hipModuleLoadData, (tack_hip_module * module, const void *image))                        \
    X(tack_hip_error, hipModuleGetFunction, (tack_hip_function * function, tack_hip_module module,            \
                                             const char *name))                                               \
    X(tack_hip_error, hipModuleLaunchKernel,                                                                   \
      (tack_hip_function f, unsigned int gridX, unsigned int gridY, unsigned int gridZ, unsigned int blockX,   \
       unsigned int blockY, unsigned int blockZ, unsigned int sharedMemBytes, tack_hip_stream stream,          \
       void **kernelParams, void **extra))                                                                     \
    X(tack_hip_error, hipModuleUnload, (tack_hip_module module))

/* The loaded entry points, and the runtime's major version. */
struct tack_hip_api {
#define TACK_HIP_POINTER(ret, name, params) ret(*name) params;
    TACK_HIP_FUNCTIONS(TACK_HIP_POINTER)
#undef TACK_HIP_POINTER
    int major_version;
};

/* Loads the runtime, resolves every entry point and reads its version, once
 * per process (thread-safe); later calls return the same table or the same
 * failure. On error (library missing, a symbol missing, hipInit failing:
 * no GPU) returns TACK_ERUNTIME with a message saying what to install or
 * set, and leaves *out untouched. The library is never unloaded. */
tack_status tack_hip_load(const struct tack_hip_api **out);

/* The runtime's description of an error; never NULL. Never fails. */
const char *tack_hip_error_string(const struct tack_hip_api *api, tack_hip_error error);

/* ---- hipRTC ---------------------------------------------------------------
 * The runtime compiler, from AMD's hiprtc.h: a separate library,
 * libhiprtc.so (then its versioned names), or the file named by
 * TACK_HIPRTC_LIBRARY (the simulated compiler in tests/sim/). */

/* hiprtcResult */
typedef int tack_hiprtc_result;
#define TACK_HIPRTC_SUCCESS 0
#define TACK_HIPRTC_ERROR_OUT_OF_MEMORY 1
#define TACK_HIPRTC_ERROR_INVALID_OPTION 5
#define TACK_HIPRTC_ERROR_COMPILATION 6

typedef struct tack_hiprtc_program_object *tack_hiprtc_program;

#define TACK_HIPRTC_FUNCTIONS(X)                                                                                \
    X(tack_hiprtc_result, hiprtcVersion, (int *major, int *minor))                                             \
    X(const char *, hiprtcGetErrorString, (tack_hiprtc_result result))                                         \
    X(tack_hiprtc_result, hiprtcCreateProgram,                                                                 \
      (tack_hiprtc_program * prog, const char *src, const char *name, int numHeaders, const char **headers,    \
       const char **includeNames))                                                                            \
    X(tack_hiprtc_result, hiprtcCompileProgram, (tack_hiprtc_program prog, int numOptions, const char **options)) \
    X(tack_hiprtc_result, hiprtcGetCodeSize, (tack_hiprtc_program prog, size_t * size))                        \
    X(tack_hiprtc_result, hiprtcGetCode, (tack_hiprtc_program prog, char *code))                               \
    X(tack_hiprtc_result, hiprtcGetProgramLogSize, (tack_hiprtc_program prog, size_t * size))                  \
    X(tack_hiprtc_result, hiprtcGetProgramLog, (tack_hiprtc_program prog, char *log))                          \
    X(tack_hiprtc_result, hiprtcDestroyProgram, (tack_hiprtc_program * prog))

struct tack_hiprtc_api {
#define TACK_HIPRTC_POINTER(ret, name, params) ret(*name) params;
    TACK_HIPRTC_FUNCTIONS(TACK_HIPRTC_POINTER)
#undef TACK_HIPRTC_POINTER
    int major, minor;
    char path[512];
};

/* Loads hipRTC from TACK_HIPRTC_LIBRARY when set, else the usual names.
 * Thread-safe. A library once loaded stays loaded and is returned again for
 * the same path; a failure is not remembered, so a later call (after the
 * variable changed, or the package was installed) tries again. On error
 * returns TACK_ERUNTIME saying what to install or set, *out untouched. */
tack_status tack_hiprtc_load(const struct tack_hiprtc_api **out);

#endif
