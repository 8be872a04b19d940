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

/* ---- hipRTC ----------------------------------------------------------- */

#define HIPRTC_HINT                                                                                             \
    "Install ROCm's hipRTC (ROCm 6: the hiprtc package with libhiprtc.so; ROCm 5, e.g. Debian/Ubuntu "          \
    "libamdhip64-5, carries it in libamdhip64.so), or set TACK_HIPRTC_LIBRARY to the library's path"

static pthread_mutex_t rtc_lock = PTHREAD_MUTEX_INITIALIZER;
/* Every library loaded so far, by path: a loaded one is never unloaded,
 * since compiled programs may be in flight on other threads. */
struct rtc_entry {
    struct tack_hiprtc_api api;
    struct rtc_entry *next;
};
static struct rtc_entry *rtc_loaded;

static tack_status rtc_open(const char *path, struct tack_hiprtc_api *a)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        return tack_error_set(TACK_ERUNTIME, "cannot load hipRTC '%s' (%s). " HIPRTC_HINT, path,
                              why ? why : "unknown error");
    }
#define TACK_HIPRTC_RESOLVE(ret, name, params)                                                                 \
    {                                                                                                         \
        void *sym = dlsym(lib, #name);                                                                        \
        if (!sym) {                                                                                           \
            dlclose(lib);                                                                                     \
            return tack_error_set(TACK_ERUNTIME, "'%s' has no %s; it is not hipRTC. " HIPRTC_HINT, path, #name); \
        }                                                                                                     \
        memcpy(&a->name, &sym, sizeof a->name);                                                               \
    }
    TACK_HIPRTC_FUNCTIONS(TACK_HIPRTC_RESOLVE)
#undef TACK_HIPRTC_RESOLVE
    if (a->hiprtcVersion(&a->major, &a->minor) != TACK_HIPRTC_SUCCESS)
        a->major = a->minor = 0;
    snprintf(a->path, sizeof a->path, "%s", path);
    return TACK_OK;
}

tack_status tack_hiprtc_load(const struct tack_hiprtc_api **out)
{
    const char *env = getenv("TACK_HIPRTC_LIBRARY");
    static const char *const names[] = {"libhiprtc.so",    "libhiprtc.so.6",    "libhiprtc.so.5",
                                        "libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
    const char *const *try = names;
    size_t ntry = sizeof names / sizeof *names;
    if (env && *env) {
        try = &env;
        ntry = 1;
    }
    pthread_mutex_lock(&rtc_lock);
    tack_status st = TACK_ERUNTIME;
    for (size_t i = 0; i < ntry; i++) {
        for (struct rtc_entry *e = rtc_loaded; e; e = e->next) {
            if (!strcmp(e->api.path, try[i])) {
                *out = &e->api;
                pthread_mutex_unlock(&rtc_lock);
                return TACK_OK;
            }
        }
    }
    /* The first failure is the one reported: the variable's, or the
     * preferred library's name. */
    char first[768] = "";
    for (size_t i = 0; i < ntry; i++) {
        struct rtc_entry *e = calloc(1, sizeof *e);
        if (!e) {
            st = tack_error_set(TACK_ENOMEM, "out of memory loading hipRTC");
            break;
        }
        st = rtc_open(try[i], &e->api);
        if (st == TACK_OK) {
            e->next = rtc_loaded;
            rtc_loaded = e;
            *out = &e->api;
            break;
        }
        free(e);
        if (!first[0])
            snprintf(first, sizeof first, "%s", tack_last_error());
    }
    pthread_mutex_unlock(&rtc_lock);
    if (st == TACK_ERUNTIME)
        return tack_error_set(TACK_ERUNTIME, "%s", first);
    return st;
}
