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

/* The ABI test (tests/c/test_nvrtc_abi.c) defines TACK_NVRTC_SDK_TYPES
 * after including the toolkit's nvrtc.h, to check the entry points below
 * against its own types and declarations. */
#ifndef TACK_NVRTC_SDK_TYPES

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

#endif /* TACK_NVRTC_SDK_TYPES */

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
    X(nvrtcResult, nvrtcGetSupportedArchs, nvrtcGetSupportedArchs, 0, (int *archs))                         \
    /* CUDA 11.1: a CUBIN for a real architecture (sm_XY); without them the                                 \
     * NVRTC makes PTX only. */                                                                             \
    X(nvrtcResult, nvrtcGetCUBINSize, nvrtcGetCUBINSize, 0, (nvrtcProgram prog, size_t *size))              \
    X(nvrtcResult, nvrtcGetCUBIN, nvrtcGetCUBIN, 0, (nvrtcProgram prog, char *cubin))

/* The most architectures an NVRTC lists that Tack keeps (NVRTC 13 lists 13). */
#define TACK_NVRTC_MAX_ARCHS 64

/* One NVRTC library's entry points, version and architectures. Optional
 * members may be NULL (see TACK_NVRTC_SYMBOLS). Never freed: code an NVRTC
 * made may be in use until the process exits. */
struct tack_nvrtc_api {
#define TACK_NVRTC_MEMBER(ret, field, symbol, required, params) ret(*field) params;
    TACK_NVRTC_SYMBOLS(TACK_NVRTC_MEMBER)
#undef TACK_NVRTC_MEMBER
    int major, minor; /* nvrtcVersion */
    /* The architectures it targets, as nvrtcGetSupportedArchs lists them
     * (90 for sm_90 and compute_90), ascending; none without that call. */
    int archs[TACK_NVRTC_MAX_ARCHS];
    int narchs;
    struct tack_library library;
    /* The directory holding the CUDA toolkit's cuda_fp16.h and cuda_bf16.h,
     * which NVRTC does not carry; "" when none was found. */
    char include_dir[4096];
};

/*
 * The NVRTCs Tack finds, in the order it looks, each loaded on first use:
 * the library named by TACK_NVRTC_LIBRARY, and only it, if set; otherwise
 * NVIDIA's Python packages beside Tack's own (site-packages/nvidia/cu13/lib
 * of nvidia-cuda-nvrtc, nvidia/cuda_nvrtc/lib of nvidia-cuda-nvrtc-cu12 and
 * -cu11), the toolkits of $CUDA_PATH, $CUDA_HOME and the nvcc on PATH,
 * /usr/local/cuda and the versioned /usr/local/cuda-X.Y (newest first),
 * then the dynamic linker's search (libnvrtc.so.13, .so.12, .so.11.2,
 * .so). A library found twice (through a link, or by the linker) counts
 * once, and one that does not load is passed over.
 *
 * Each NVRTC's half-precision headers are looked for when it loads: in
 * $TACK_CUDA_INCLUDE alone if set, otherwise in the include directory
 * beside the library (../include), $CUDA_PATH/include, $CUDA_HOME/include
 * and /usr/local/cuda/include.
 */

/* The first NVRTC found. Thread-safe. On success sets *api and returns
 * TACK_OK. On failure returns TACK_ERUNTIME with a message saying where
 * Tack looked and how to point it at NVRTC, leaves *api untouched, and
 * every later call fails the same way. */
tack_status tack_nvrtc_api_get(const struct tack_nvrtc_api **api);

/* The NVRTC number `i` (0 is tack_nvrtc_api_get's) in the order above,
 * loaded on first use. Thread-safe. TACK_OK and *api; TACK_ERUNTIME when
 * fewer are found (for i = 0, with tack_nvrtc_api_get's message), *api
 * untouched. */
tack_status tack_nvrtc_api_at(int i, const struct tack_nvrtc_api **api);

/* 1 when TACK_NVRTC_LIBRARY names the one NVRTC Tack uses. Never fails. */
int tack_nvrtc_forced(void);

#endif
