/* The Level Zero table: loaded once, never unloaded (a Level Zero object
 * may outlive every Tack object, and Tack never destroys one). */
#include "level_zero.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct tack_ze_api api;
static int loaded;
static char load_error[768];

/* dlsym returns an object pointer; POSIX guarantees it converts to a
 * function pointer, and copying the bytes says so without a cast ISO C
 * would warn about. */
static int resolve(void *lib, const char *name, void *slot, size_t size, int required, const char *path)
{
    void *sym = dlsym(lib, name);
    if (!sym && required) {
        snprintf(load_error, sizeof load_error,
                 "the Level Zero library '%s' has no %s; it is too old or not a Level Zero loader. Install "
                 "a current loader (Debian/Ubuntu: libze1 and your GPU's driver, e.g. intel-level-zero-gpu) "
                 "or set TACK_LEVEL_ZERO_LIBRARY",
                 path, name);
        return -1;
    }
    memcpy(slot, &sym, size);
    return 0;
}

static void load(void)
{
    const char *env = getenv("TACK_LEVEL_ZERO_LIBRARY");
    const char *path = env && *env ? env : "libze_loader.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error,
                 "cannot load the Level Zero library '%s' (%s). Install the Level Zero loader and a GPU driver "
                 "(Debian/Ubuntu: libze1 and intel-level-zero-gpu), or set TACK_LEVEL_ZERO_LIBRARY to the "
                 "library's path",
                 path, why ? why : "unknown error");
        return;
    }
#define TACK_ZE_RESOLVE(required, ret, name, params)                                                            \
    if (resolve(lib, #name, &api.name, sizeof api.name, required, path) < 0)                                 \
        return;
    TACK_ZE_FUNCTIONS(TACK_ZE_RESOLVE)
#undef TACK_ZE_RESOLVE
    loaded = 1;
}

tack_status tack_ze_load(const struct tack_ze_api **out)
{
    pthread_once(&load_once, load);
    if (!loaded)
        return tack_error_set(TACK_ERUNTIME, "%s", load_error);
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

/* ---- ocloc ------------------------------------------------------------ */

static pthread_mutex_t ocloc_lock = PTHREAD_MUTEX_INITIALIZER;
/* Every library loaded so far, by path, never unloaded: outputs it
 * returned may still be in use on another thread. */
struct ocloc_entry {
    struct tack_ocloc_api api;
    struct ocloc_entry *next;
};
static struct ocloc_entry *ocloc_loaded;

static tack_status ocloc_open(const char *path, struct tack_ocloc_api *a)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        return tack_error_set(TACK_ERUNTIME,
                              "kernels on level_zero are compiled to SPIR-V with libocloc, which cannot be "
                              "loaded from '%s' (%s). " TACK_OCLOC_INSTALL_HINT,
                              path, why ? why : "unknown error");
    }
#define TACK_OCLOC_RESOLVE(ret, name, params)                                                                  \
    {                                                                                                         \
        void *sym = dlsym(lib, #name);                                                                        \
        if (!sym) {                                                                                           \
            dlclose(lib);                                                                                     \
            return tack_error_set(TACK_ERUNTIME, "'%s' has no %s; it is not libocloc. " TACK_OCLOC_INSTALL_HINT, \
                                  path, #name);                                                               \
        }                                                                                                     \
        memcpy(&a->name, &sym, sizeof a->name);                                                               \
    }
    TACK_OCLOC_FUNCTIONS(TACK_OCLOC_RESOLVE)
#undef TACK_OCLOC_RESOLVE
    snprintf(a->path, sizeof a->path, "%s", path);
    return TACK_OK;
}

tack_status tack_ocloc_load(const struct tack_ocloc_api **out)
{
    const char *env = getenv("TACK_OCLOC_LIBRARY");
    const char *path = env && *env ? env : "libocloc.so";
    pthread_mutex_lock(&ocloc_lock);
    tack_status st = TACK_OK;
    struct ocloc_entry *e;
    for (e = ocloc_loaded; e; e = e->next)
        if (!strcmp(e->api.path, path))
            break;
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
            st = tack_error_set(TACK_ENOMEM, "out of memory loading libocloc");
        } else if ((st = ocloc_open(path, &e->api)) != TACK_OK) {
            free(e);
            e = NULL;
        } else {
            e->next = ocloc_loaded;
            ocloc_loaded = e;
        }
    }
    if (e)
        *out = &e->api;
    pthread_mutex_unlock(&ocloc_lock);
    return st;
}
