/* Finds NVRTC once per process and resolves its entry points. */
#include "nvrtc.h"

#include <dlfcn.h> /* dladdr: where Tack's own code lies, to look beside it */
#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/internal.h"
#include "library.h"

static struct tack_nvrtc_api api;
static tack_status load_status;
static char load_message[1024];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* Sonames, newest first: NVRTC 13 and 12 are what current drivers run. */
static const char *const sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so", NULL};

/* NVRTC opens its builtins library by bare name and relies on its own
 * RUNPATH to find it beside itself; an interposed dlopen (under a sanitizer)
 * searches from the wrong object and fails the compile. Loaded first, the
 * builtins are found by their soname whoever asks. They stay loaded. */
static void preload_builtins(const char *path)
{
    char pattern[PATH_MAX + 64];
    const char *slash = strrchr(path, '/');
    if (!slash)
        return;
    snprintf(pattern, sizeof pattern, "%.*s/libnvrtc-builtins.so*", (int)(slash - path), path);
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0)
        return;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        struct tack_library builtins;
        if (!strstr(g.gl_pathv[i] + (slash - path), ".alt."))
            (void)tack_library_open(g.gl_pathv[i], &builtins);
    }
    globfree(&g);
}

static int try_open(const char *path, char *why, size_t cap)
{
    /* The library is never closed: programs it made may be in use until
     * exit. */
    struct tack_nvrtc_api found;
    memset(&found, 0, sizeof found);
    if (tack_library_open(path, &found.library) != 0) {
        if (why && !*why)
            snprintf(why, cap, "%s", tack_library_error(&found.library));
        return 0;
    }
#define TACK_NVRTC_RESOLVE(ret, field, symbol, required, params)                                             \
    if (tack_library_symbol(&found.library, #symbol, &found.field, sizeof found.field) != 0 && (required)) { \
        snprintf(why, cap, "%s has no %s", path, #symbol);                                                   \
        tack_library_close(&found.library);                                                                  \
        return 0;                                                                                            \
    }
    TACK_NVRTC_SYMBOLS(TACK_NVRTC_RESOLVE)
#undef TACK_NVRTC_RESOLVE
    if (found.nvrtcVersion(&found.major, &found.minor) != NVRTC_SUCCESS) {
        snprintf(why, cap, "nvrtcVersion failed in %s", path);
        tack_library_close(&found.library);
        return 0;
    }
    preload_builtins(path);
    api = found;
    return 1;
}

/* Tries each soname in `dir`. */
static int try_dir(const char *dir, char *why, size_t cap)
{
    char path[PATH_MAX + 64];
    for (int i = 0; sonames[i]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, sonames[i]);
        if (access(path, R_OK) == 0 && try_open(path, why, cap))
            return 1;
    }
    return 0;
}

static void dirname_of(char *path)
{
    char *slash = strrchr(path, '/');
    if (slash && slash != path)
        *slash = 0;
}

static int try_toolkit(const char *root, char *why, size_t cap)
{
    char dir[PATH_MAX + 8];
    if (!root || !*root)
        return 0;
    snprintf(dir, sizeof dir, "%s/lib64", root);
    if (try_dir(dir, why, cap))
        return 1;
    snprintf(dir, sizeof dir, "%s/lib", root);
    return try_dir(dir, why, cap);
}

/* The toolkit root of the nvcc on PATH (bin/nvcc, through links). */
static int try_nvcc(char *why, size_t cap)
{
    const char *path = getenv("PATH");
    char cand[PATH_MAX], real[PATH_MAX];
    while (path && *path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        snprintf(cand, sizeof cand, "%.*s/nvcc", (int)len, path);
        if (len && access(cand, X_OK) == 0 && realpath(cand, real)) {
            dirname_of(real); /* .../bin */
            dirname_of(real); /* the toolkit */
            if (try_toolkit(real, why, cap))
                return 1;
        }
        path += len + (colon ? 1 : 0);
    }
    return 0;
}

/* NVIDIA's wheels put NVRTC in site-packages/nvidia/...; Tack's extension
 * lives in site-packages/tack/, so they are found from where this code is. */
static int try_wheels(char *why, size_t cap)
{
    Dl_info info;
    tack_status (*fn)(const struct tack_nvrtc_api **) = tack_nvrtc_api_get;
    void *self;
    memcpy(&self, &fn, sizeof self);
    char base[PATH_MAX], dir[PATH_MAX + 32];
    if (!dladdr(self, &info) || !info.dli_fname || !realpath(info.dli_fname, base))
        return 0;
    dirname_of(base); /* site-packages/tack */
    dirname_of(base); /* site-packages */
    static const char *const sub[] = {"nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cu12/lib", NULL};
    for (int i = 0; sub[i]; i++) {
        snprintf(dir, sizeof dir, "%s/%s", base, sub[i]);
        if (try_dir(dir, why, cap))
            return 1;
    }
    return 0;
}

static tack_status load(void)
{
    char why[512] = "";
    const char *forced = getenv("TACK_NVRTC_LIBRARY");
    if (forced && *forced) {
        if (try_open(forced, why, sizeof why))
            return TACK_OK;
        snprintf(load_message, sizeof load_message,
                 "NVRTC could not be loaded from TACK_NVRTC_LIBRARY=%s (%s); point it at libnvrtc.so of a CUDA "
                 "toolkit or of the nvidia-cuda-nvrtc Python package",
                 forced, why);
        return TACK_ERUNTIME;
    }
    if (try_wheels(why, sizeof why) || try_toolkit(getenv("CUDA_PATH"), why, sizeof why) ||
        try_toolkit(getenv("CUDA_HOME"), why, sizeof why) || try_nvcc(why, sizeof why) ||
        try_toolkit("/usr/local/cuda", why, sizeof why))
        return TACK_OK;
    for (int i = 0; sonames[i]; i++)
        if (try_open(sonames[i], why, sizeof why))
            return TACK_OK;
    snprintf(load_message, sizeof load_message,
             "NVRTC (libnvrtc) was not found: Tack looked beside its Python package (nvidia/cu13/lib), in "
             "$CUDA_PATH, $CUDA_HOME, the toolkit of nvcc on PATH, /usr/local/cuda and the dynamic linker's path "
             "(%s). Install the CUDA toolkit or `pip install nvidia-cuda-nvrtc`, or set TACK_NVRTC_LIBRARY to the "
             "path of libnvrtc.so",
             why[0] ? why : "nothing found");
    return TACK_ERUNTIME;
}

static void load_once_fn(void) { load_status = load(); }

tack_status tack_nvrtc_api_get(const struct tack_nvrtc_api **out)
{
    pthread_once(&load_once, load_once_fn);
    if (load_status != TACK_OK)
        return tack_error_set(load_status, "%s", load_message);
    *out = &api;
    return TACK_OK;
}
