/*
 * hipRTC, HIP's runtime compiler, loaded at run time.
 *
 * Declared by Tack from AMD's hiprtc.h: only the calls and values Tack
 * uses, under tack_hiprtc_ names. The library is libhiprtc.so (then its
 * versioned names, then the HIP runtime, which carries hipRTC in ROCm 5),
 * or the file named by TACK_HIPRTC_LIBRARY (the simulated compiler in
 * tests/sim/), opened through the loader (library.h).
 */
#ifndef TACK_DRIVER_HIPRTC_H
#define TACK_DRIVER_HIPRTC_H

#include <stddef.h>

#include "library.h"
#include "tack/status.h"

/* hiprtcResult */
typedef int tack_hiprtc_result;
#define TACK_HIPRTC_SUCCESS 0
#define TACK_HIPRTC_ERROR_OUT_OF_MEMORY 1
#define TACK_HIPRTC_ERROR_INVALID_OPTION 5
#define TACK_HIPRTC_ERROR_COMPILATION 6

typedef struct tack_hiprtc_program_object *tack_hiprtc_program;

/* Every entry point Tack calls, listed once in the drivers' shape
 * (src/driver/library.h); each is required. */
#define TACK_HIPRTC_FUNCTIONS(X)                                                                              \
    X(tack_hiprtc_result, hiprtcVersion, hiprtcVersion, 1, (int *major, int *minor))                          \
    X(const char *, hiprtcGetErrorString, hiprtcGetErrorString, 1, (tack_hiprtc_result result))               \
    X(tack_hiprtc_result, hiprtcCreateProgram, hiprtcCreateProgram, 1,                                        \
      (tack_hiprtc_program * prog, const char *src, const char *name, int numHeaders, const char **headers,   \
       const char **includeNames))                                                                            \
    X(tack_hiprtc_result, hiprtcCompileProgram, hiprtcCompileProgram, 1,                                      \
      (tack_hiprtc_program prog, int numOptions, const char **options))                                       \
    X(tack_hiprtc_result, hiprtcGetCodeSize, hiprtcGetCodeSize, 1, (tack_hiprtc_program prog, size_t * size)) \
    X(tack_hiprtc_result, hiprtcGetCode, hiprtcGetCode, 1, (tack_hiprtc_program prog, char *code))            \
    X(tack_hiprtc_result, hiprtcGetProgramLogSize, hiprtcGetProgramLogSize, 1,                                \
      (tack_hiprtc_program prog, size_t * size))                                                              \
    X(tack_hiprtc_result, hiprtcGetProgramLog, hiprtcGetProgramLog, 1, (tack_hiprtc_program prog, char *log)) \
    X(tack_hiprtc_result, hiprtcDestroyProgram, hiprtcDestroyProgram, 1, (tack_hiprtc_program * prog))

/* One loaded hipRTC. */
struct tack_hiprtc_api {
#define TACK_HIPRTC_POINTER(ret, field, symbol, required, params) ret(*field) params;
    TACK_HIPRTC_FUNCTIONS(TACK_HIPRTC_POINTER)
#undef TACK_HIPRTC_POINTER
    int major, minor;
    /* The name it was asked for (TACK_HIPRTC_LIBRARY's value or one of the
     * usual names), by which a later load finds it again. */
    char name[512];
    struct tack_library library;
};

/* Loads hipRTC from TACK_HIPRTC_LIBRARY when set, else the usual names.
 * Thread-safe. A library once loaded stays loaded and is returned again for
 * the same name; a failure is not remembered, so a later call (after the
 * variable changed, or the package was installed) tries again. On error
 * returns TACK_ERUNTIME saying what to install or set, *out untouched. */
tack_status tack_hiprtc_load(const struct tack_hiprtc_api **out);

#endif
