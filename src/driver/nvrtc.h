/*
 * NVRTC, the CUDA runtime compiler, loaded at run time.
 *
 * The declarations below are written by Tack from NVIDIA's public NVRTC
 * reference (nvrtc.h of the CUDA toolkit): only the types and entry points
 * Tack calls. Building Tack needs no CUDA SDK; the library is found on
 * first use (see tack_nvrtc_api_get), opened through the loader (library.h),
 * and every entry point is resolved once.
 */
#ifndef TACK_DRIVER_NVRTC_H
#define TACK_DRIVER_NVRTC_H

#include <stddef.h>

#include "library.h"
#include "tack/status.h"

/* nvrtcResult is a C enum in nvrtc.h: int-sized. */
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

enum {
    NVRTC_SUCCESS = 0,
    NVRTC_ERROR_OUT_OF_MEMORY = 1,
    NVRTC_ERROR_PROGRAM_CREATION_FAILURE = 2,
    NVRTC_ERROR_INVALID_INPUT = 3,
    NVRTC_ERROR_INVALID_PROGRAM = 4,
    NVRTC_ERROR_INVALID_OPTION = 5,
    NVRTC_ERROR_COMPILATION = 6,
};

/*
 * The entry points, listed once in the drivers' shape (src/driver/library.h):
 * X(return type, field, symbol, required, parameters). A required symbol
 * missing from the library fails the load; an optional one leaves the
 * member NULL and the caller takes the documented fallback.
 */
#define TACK_NVRTC_SYMBOLS(X)                                                                               \
    X(nvrtcResult, nvrtcVersion, nvrtcVersion, 1, (int *major, int *minor))                                 \
    X(const char *, nvrtcGetErrorString, nvrtcGetErrorString, 1, (nvrtcResult result))                      \
    X(nvrtcResult, nvrtcCreateProgram, nvrtcCreateProgram, 1,                                               \
      (nvrtcProgram * prog, const char *src, const char *name, int num_headers, const char *const *headers, \
       const char *const *include_names))                                                                   \
    X(nvrtcResult, nvrtcDestroyProgram, nvrtcDestroyProgram, 1, (nvrtcProgram * prog))                      \
    X(nvrtcResult, nvrtcCompileProgram, nvrtcCompileProgram, 1,                                             \
      (nvrtcProgram prog, int num_options, const char *const *options))                                     \
    X(nvrtcResult, nvrtcGetPTXSize, nvrtcGetPTXSize, 1, (nvrtcProgram prog, size_t *size))                  \
    X(nvrtcResult, nvrtcGetPTX, nvrtcGetPTX, 1, (nvrtcProgram prog, char *ptx))                             \
    X(nvrtcResult, nvrtcGetProgramLogSize, nvrtcGetProgramLogSize, 1, (nvrtcProgram prog, size_t *size))    \
    X(nvrtcResult, nvrtcGetProgramLog, nvrtcGetProgramLog, 1, (nvrtcProgram prog, char *log))               \
    /* CUDA 11.2: the architectures this NVRTC targets; without them Tack                                   \
     * leaves the choice to NVRTC's default. */                                                             \
    X(nvrtcResult, nvrtcGetNumSupportedArchs, nvrtcGetNumSupportedArchs, 0, (int *count))                   \
    X(nvrtcResult, nvrtcGetSupportedArchs, nvrtcGetSupportedArchs, 0, (int *archs))

/* The process-wide table of NVRTC entry points. Optional members may be
 * NULL (see TACK_NVRTC_SYMBOLS). */
struct tack_nvrtc_api {
#define TACK_NVRTC_MEMBER(ret, field, symbol, required, params) ret(*field) params;
    TACK_NVRTC_SYMBOLS(TACK_NVRTC_MEMBER)
#undef TACK_NVRTC_MEMBER
    int major, minor; /* nvrtcVersion */
    struct tack_library library;
};

/* Loads NVRTC on first call (thread-safe: exactly one thread loads it).
 * Where: the library named by TACK_NVRTC_LIBRARY, and only it, if set;
 * otherwise the first that loads of: NVIDIA's Python wheels beside Tack's
 * own (site-packages/nvidia/cu13/lib, nvidia/cuda_nvrtc/lib), $CUDA_PATH and
 * $CUDA_HOME, the toolkit of the nvcc on PATH, /usr/local/cuda, then the
 * dynamic linker's search (libnvrtc.so.13, .so.12, .so).
 * On success sets *api and returns TACK_OK. On failure returns TACK_ERUNTIME
 * with a message saying where Tack looked and how to point it at NVRTC,
 * leaves *api untouched, and every later call fails the same way. */
tack_status tack_nvrtc_api_get(const struct tack_nvrtc_api **api);

#endif
