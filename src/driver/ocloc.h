/*
 * Intel's offline compiler as a library (libocloc.so), loaded at run time.
 *
 * Declared by Tack from its public ocloc_api.h: oclocInvoke takes ocloc's
 * command line and in-memory sources and returns in-memory outputs (the
 * SPIR-V, and "stdout.log"), which oclocFreeOutput frees. TACK_OCLOC_LIBRARY
 * names another file (the simulated compiler in tests/sim/). Opened through
 * the loader (library.h).
 */
#ifndef TACK_DRIVER_OCLOC_H
#define TACK_DRIVER_OCLOC_H

#include <stdint.h>

#include "library.h"
#include "tack/status.h"

/* Every entry point Tack calls, listed once in the drivers' shape
 * (src/driver/library.h); each is required. */
#define TACK_OCLOC_FUNCTIONS(X)                                                                                \
    X(int, oclocInvoke, oclocInvoke, 1,                                                                        \
      (unsigned int numArgs, const char *argv[], const uint32_t numSources, const uint8_t **dataSources,       \
       const uint64_t *lenSources, const char **nameSources, const uint32_t numInputHeaders,                   \
       const uint8_t **dataInputHeaders, const uint64_t *lenInputHeaders, const char **nameInputHeaders,       \
       uint32_t *numOutputs, uint8_t ***dataOutputs, uint64_t **lenOutputs, char ***nameOutputs))              \
    X(int, oclocFreeOutput, oclocFreeOutput, 1,                                                                \
      (uint32_t * numOutputs, uint8_t ***dataOutputs, uint64_t **lenOutputs, char ***nameOutputs))

/* One loaded libocloc. */
struct tack_ocloc_api {
#define TACK_OCLOC_POINTER(ret, field, symbol, required, params) ret(*field) params;
    TACK_OCLOC_FUNCTIONS(TACK_OCLOC_POINTER)
#undef TACK_OCLOC_POINTER
    /* The name it was asked for, by which a later load finds it again. */
    char name[512];
    struct tack_library library;
};

/* What to install for libocloc, for messages. */
#define TACK_OCLOC_INSTALL_HINT                                                                              \
    "Install Intel's OpenCL compiler library libocloc.so (Debian/Ubuntu: apt-get install intel-opencl-icd, " \
    "which ships ocloc and libocloc.so; Intel's own compute-runtime packages: intel-ocloc), or set "         \
    "TACK_OCLOC_LIBRARY to its path"

/* Loads libocloc from TACK_OCLOC_LIBRARY when set, else libocloc.so.
 * Thread-safe. A library once loaded stays loaded and is returned again for
 * the same name; a failure is not remembered, so a later call (after the
 * variable changed, or the package was installed) tries again. On error
 * returns TACK_ERUNTIME naming what to install, *out untouched. */
tack_status tack_ocloc_load(const struct tack_ocloc_api **out);

#endif
