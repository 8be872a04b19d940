/* The HIP table: loaded once, never unloaded (memory it handed out may be
 * freed at interpreter exit, after every Tack object but the buffers). */
#include "hip.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct tack_hip_api api;
static int loaded;
static char load_error[768];

#define INSTALL_HINT                                                                                            \
    "Install ROCm's HIP runtime (Debian/Ubuntu: libamdhip64-5 or ROCm's hip-runtime-amd) and a supported AMD "  \
    "GPU driver, or set TACK_HIP_LIBRARY to the library's path"

/* dlsym returns an object pointer; POSIX guarantees it converts to a
 * function pointer, and copying the bytes says so without a cast ISO C
 * would warn about. */
static int resolve(void *lib, const char *name, void *slot, size_t size, const char *path)
{
    void *sym = dlsym(lib, name);
    if (!sym) {
        snprintf(load_error, sizeof load_error, "the HIP library '%s' has no %s; it is not a HIP runtime. %s",
                 path, name, INSTALL_HINT);
        return -1;
    }
    memcpy(slot, &sym, size);
    return 0;
}

static void *open_library(const char **path)
{
    const char *env = getenv("TACK_HIP_LIBRARY");
    if (env && *env) {
        *path = env;
        return dlopen(env, RTLD_NOW | RTLD_LOCAL);
    }
    /* The unversioned name comes only with the development package; the
     * runtime packages install the versioned ones. */
    static const char *const names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            *path = names[i];
            return lib;
        }
    }
    *path = names[0];
    return dlopen(names[0], RTLD_NOW | RTLD_LOCAL); /* again, for dlerror's message */
}

static void load(void)
{
    const char *path;
    void *lib = open_library(&path);
    if (!lib) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error, "cannot load the HIP library '%s' (%s). %s", path,
                 why ? why : "unknown error", INSTALL_HINT);
        return;
    }
#define TACK_HIP_RESOLVE(ret, name, params)                                                                    \
    if (resolve(lib, #name, &api.name, sizeof api.name, path) < 0)                                           \
        return;
    TACK_HIP_FUNCTIONS(TACK_HIP_RESOLVE)
#undef TACK_HIP_RESOLVE
    tack_hip_error e = api.hipInit(0);
    if (e != TACK_HIP_SUCCESS) {
        snprintf(load_error, sizeof load_error, "hipInit failed in '%s': %s (hipError_t %d); is there an AMD GPU "
                 "and is its driver loaded?", path, tack_hip_error_string(&api, e), e);
        return;
    }
    int version = 0;
    e = api.hipRuntimeGetVersion(&version);
    if (e != TACK_HIP_SUCCESS) {
        snprintf(load_error, sizeof load_error, "hipRuntimeGetVersion failed in '%s': %s (hipError_t %d)", path,
                 tack_hip_error_string(&api, e), e);
        return;
    }
    /* HIP_VERSION is major * 10000000 + minor * 100000 + patch. */
    api.major_version = version / 10000000;
    loaded = 1;
}

tack_status tack_hip_load(const struct tack_hip_api **out)
{
    pthread_once(&load_once, load);
    if (!loaded)
        return tack_error_set(TACK_ERUNTIME, "%s", load_error);
    *out = &api;
    return TACK_OK;
}

const char *tack_hip_error_string(const struct tack_hip_api *a, tack_hip_error error)
{
    const char *s = a && a->hipGetErrorString ? a->hipGetErrorString(error) : NULL;
    return s ? s : "unknown HIP error";
}
