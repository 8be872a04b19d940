/* The Level Zero table: loaded once, never unloaded (a Level Zero object
 * may outlive every Tack object, and Tack never destroys one). */
#include "level_zero.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct tack_ze_api api;
static int loaded;
static char load_error[768];

static void load(void)
{
    const char *env = getenv("TACK_LEVEL_ZERO_LIBRARY");
    const char *path = env && *env ? env : "libze_loader.so.1";
    if (tack_library_open(path, &api.library) != 0) {
        snprintf(load_error, sizeof load_error,
                 "cannot load the Level Zero library '%s' (%s). Install the Level Zero loader and a GPU driver "
                 "(Debian/Ubuntu: libze1 and intel-level-zero-gpu), or set TACK_LEVEL_ZERO_LIBRARY to the "
                 "library's path",
                 path, tack_library_error(&api.library));
        return;
    }
#define TACK_ZE_RESOLVE(ret, field, symbol, required, params)                                                 \
    if (tack_library_symbol(&api.library, #symbol, &api.field, sizeof api.field) != 0 && (required)) {        \
        snprintf(load_error, sizeof load_error,                                                               \
                 "the Level Zero library '%s' has no %s; it is too old or not a Level Zero loader. Install "  \
                 "a current loader (Debian/Ubuntu: libze1 and your GPU's driver, e.g. intel-level-zero-gpu) " \
                 "or set TACK_LEVEL_ZERO_LIBRARY",                                                            \
                 path, #symbol);                                                                              \
        return;                                                                                               \
    }
    TACK_ZE_FUNCTIONS(TACK_ZE_RESOLVE)
#undef TACK_ZE_RESOLVE
    loaded = 1;
}

tack_status tack_ze_load(const struct tack_ze_api **out)
{
    pthread_once(&load_once, load);
    if (!loaded)
        return tack_error_set(TACK_ENODEVICE, "%s", load_error);
    *out = &api;
    return TACK_OK;
}

const char *tack_ze_result_name(tack_ze_result r)
{
    switch (r) {
    case TACK_ZE_SUCCESS: return "ZE_RESULT_SUCCESS";
    case TACK_ZE_NOT_READY: return "ZE_RESULT_NOT_READY";
    case TACK_ZE_ERROR_DEVICE_LOST: return "ZE_RESULT_ERROR_DEVICE_LOST";
    case TACK_ZE_ERROR_OUT_OF_HOST_MEMORY: return "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY";
    case TACK_ZE_ERROR_OUT_OF_DEVICE_MEMORY: return "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY";
    case TACK_ZE_ERROR_MODULE_BUILD_FAILURE: return "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE";
    case TACK_ZE_ERROR_UNINITIALIZED: return "ZE_RESULT_ERROR_UNINITIALIZED";
    case TACK_ZE_ERROR_UNSUPPORTED_FEATURE: return "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE";
    case TACK_ZE_ERROR_INVALID_ARGUMENT: return "ZE_RESULT_ERROR_INVALID_ARGUMENT";
    case TACK_ZE_ERROR_INVALID_NULL_HANDLE: return "ZE_RESULT_ERROR_INVALID_NULL_HANDLE";
    case TACK_ZE_ERROR_INVALID_NULL_POINTER: return "ZE_RESULT_ERROR_INVALID_NULL_POINTER";
    case TACK_ZE_ERROR_INVALID_SIZE: return "ZE_RESULT_ERROR_INVALID_SIZE";
    case TACK_ZE_ERROR_UNSUPPORTED_SIZE: return "ZE_RESULT_ERROR_UNSUPPORTED_SIZE";
    case TACK_ZE_ERROR_INVALID_ENUMERATION: return "ZE_RESULT_ERROR_INVALID_ENUMERATION";
    case TACK_ZE_ERROR_UNKNOWN: return "ZE_RESULT_ERROR_UNKNOWN";
    default: return "an unknown ze_result_t";
    }
}
