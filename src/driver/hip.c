/* The HIP table: loaded once, never unloaded (memory it handed out may be
 * freed at interpreter exit, after every Tack object but the buffers). */
#include "hip.h"

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

/* The first of the usual names that loads; on failure, `lib` holds the
 * preferred name's reason. */
static int open_library(struct tack_library *lib, const char **path)
{
    const char *env = getenv("TACK_HIP_LIBRARY");
    if (env && *env) {
        *path = env;
        return tack_library_open(env, lib);
    }
    /* The unversioned name comes only with the development package; the
     * runtime packages install the versioned ones. */
    static const char *const names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (tack_library_open(names[i], lib) == 0) {
            *path = names[i];
            return 0;
        }
    }
    *path = names[0];
    return tack_library_open(names[0], lib); /* again, for its reason */
}

static void load(void)
{
    const char *path;
    if (open_library(&api.library, &path) != 0) {
        snprintf(load_error, sizeof load_error, "cannot load the HIP library '%s' (%s). %s", path,
                 tack_library_error(&api.library), INSTALL_HINT);
        return;
    }
#define TACK_HIP_RESOLVE(ret, field, symbol, required, params)                                                 \
    if (tack_library_symbol(&api.library, #symbol, &api.field, sizeof api.field) != 0 && (required)) {         \
        snprintf(load_error, sizeof load_error, "the HIP library '%s' has no %s; it is not a HIP runtime. %s", \
                 path, #symbol, INSTALL_HINT);                                                                 \
        return;                                                                                                \
    }
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
        return tack_error_set(TACK_ENODEVICE, "%s", load_error);
    *out = &api;
    return TACK_OK;
}

const char *tack_hip_error_string(const struct tack_hip_api *a, tack_hip_error error)
{
    const char *s = a && a->hipGetErrorString ? a->hipGetErrorString(error) : NULL;
    return s ? s : "unknown HIP error";
}
