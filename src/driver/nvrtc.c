/* Finds the NVRTCs of the system once per process, and loads each the first
 * time it is asked for: most processes need only the first, and a library
 * of NVRTC is a hundred megabytes to map. */
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

/* Sonames, newest first: NVRTC 13 and 12 are what current drivers run. */
static const char *const sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so", NULL};

#define MAX_FOUND 32

/* What the search found: paths (a bare soname for the linker's search), and
 * where each leads, to count a file reached twice once. */
static struct {
    char path[1024];
    char real[1024];
} found[MAX_FOUND];
static int nfound;
static int forced;
static pthread_once_t find_once = PTHREAD_ONCE_INIT;

/* What has been loaded of it, in order; guarded by load_lock. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tack_nvrtc_api *loaded[MAX_FOUND];
static int nloaded, next_to_load;
static char first_failure[512];

/* ---- finding ------------------------------------------------------------- */

static void add(const char *path)
{
    char real[PATH_MAX];
    const char *where = path;
    if (strchr(path, '/')) {
        if (access(path, R_OK) != 0)
            return;
        if (realpath(path, real))
            where = real;
    }
    for (int i = 0; i < nfound; i++)
        if (!strcmp(found[i].real, where))
            return;
    size_t n = strlen(path), m = strlen(where);
    if (nfound == MAX_FOUND || n >= sizeof found[0].path || m >= sizeof found[0].real)
        return;
    memcpy(found[nfound].path, path, n + 1);
    memcpy(found[nfound].real, where, m + 1);
    nfound++;
}

static void add_dir(const char *dir)
{
    char path[PATH_MAX + 64];
    for (int i = 0; sonames[i]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, sonames[i]);
        add(path);
    }
}

static void add_toolkit(const char *root)
{
    char dir[PATH_MAX + 8];
    if (!root || !*root)
        return;
    snprintf(dir, sizeof dir, "%s/lib64", root);
    add_dir(dir);
    snprintf(dir, sizeof dir, "%s/lib", root);
    add_dir(dir);
}

static void dirname_of(char *path)
{
    char *slash = strrchr(path, '/');
    if (slash && slash != path)
        *slash = 0;
}

/* The toolkit of the first nvcc on PATH (bin/nvcc, through links). */
static void add_nvcc(void)
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
            add_toolkit(real);
            return;
        }
        path += len + (colon ? 1 : 0);
    }
}

/* 1000 * major + minor of a toolkit directory named cuda-X.Y; 0 otherwise. */
static int toolkit_version(const char *path)
{
    const char *base = strrchr(path, '/');
    int major, minor;
    return base && sscanf(base, "/cuda-%d.%d", &major, &minor) == 2 ? 1000 * major + minor : 0;
}

/* The toolkits installed side by side, newest first. */
static void add_versioned_toolkits(void)
{
    glob_t g;
    if (glob("/usr/local/cuda-*", GLOB_ONLYDIR, NULL, &g) != 0)
        return;
    for (size_t i = 1; i < g.gl_pathc; i++)
        for (size_t j = i; j > 0 && toolkit_version(g.gl_pathv[j - 1]) < toolkit_version(g.gl_pathv[j]); j--) {
            char *t = g.gl_pathv[j];
            g.gl_pathv[j] = g.gl_pathv[j - 1];
            g.gl_pathv[j - 1] = t;
        }
    for (size_t i = 0; i < g.gl_pathc; i++)
        add_toolkit(g.gl_pathv[i]);
    globfree(&g);
}

/* NVIDIA's wheels put NVRTC in site-packages/nvidia/...; the libtack of
 * Tack's Python package lives in site-packages/tack/lib/, so they are found
 * from where this code is. */
static void add_wheels(void)
{
    Dl_info info;
    tack_status (*fn)(const struct tack_nvrtc_api **) = tack_nvrtc_api_get;
    void *self;
    memcpy(&self, &fn, sizeof self);
    char base[PATH_MAX], dir[PATH_MAX + 32];
    if (!dladdr(self, &info) || !info.dli_fname || !realpath(info.dli_fname, base))
        return;
    dirname_of(base); /* site-packages/tack/lib */
    const char *last = strrchr(base, '/');
    if (last && !strcmp(last, "/lib"))
        dirname_of(base); /* site-packages/tack */
    dirname_of(base);     /* site-packages */
    static const char *const sub[] = {"nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cu12/lib", NULL};
    for (int i = 0; sub[i]; i++) {
        snprintf(dir, sizeof dir, "%s/%s", base, sub[i]);
        add_dir(dir);
    }
}

static void find(void)
{
    const char *named = getenv("TACK_NVRTC_LIBRARY");
    if (named && *named) {
        forced = 1;
        snprintf(found[0].path, sizeof found[0].path, "%s", named);
        memcpy(found[0].real, found[0].path, sizeof found[0].real);
        nfound = 1;
        return;
    }
    add_wheels();
    add_toolkit(getenv("CUDA_PATH"));
    add_toolkit(getenv("CUDA_HOME"));
    add_nvcc();
    add_toolkit("/usr/local/cuda");
    add_versioned_toolkits();
    for (int i = 0; sonames[i]; i++)
        add(sonames[i]);
}

/* ---- loading ------------------------------------------------------------- */

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

static void sort_archs(struct tack_nvrtc_api *api)
{
    for (int i = 1; i < api->narchs; i++)
        for (int j = i; j > 0 && api->archs[j - 1] > api->archs[j]; j--) {
            int t = api->archs[j];
            api->archs[j] = api->archs[j - 1];
            api->archs[j - 1] = t;
        }
}

/* Whether `dir` holds both half-precision headers; then it is api's. */
static int headers_in(struct tack_nvrtc_api *api, const char *dir)
{
    char path[PATH_MAX + 32];
    if (!dir || !*dir || strlen(dir) >= sizeof api->include_dir)
        return 0;
    snprintf(path, sizeof path, "%s/cuda_fp16.h", dir);
    if (access(path, R_OK) != 0)
        return 0;
    snprintf(path, sizeof path, "%s/cuda_bf16.h", dir);
    if (access(path, R_OK) != 0)
        return 0;
    snprintf(api->include_dir, sizeof api->include_dir, "%s", dir);
    return 1;
}

static int headers_under(struct tack_nvrtc_api *api, const char *root)
{
    char dir[PATH_MAX + 16];
    if (!root || !*root)
        return 0;
    snprintf(dir, sizeof dir, "%s/include", root);
    return headers_in(api, dir);
}

/* The half-precision headers for a loaded NVRTC. A toolkit's lie in
 * include/ beside its lib64/ (or lib/), and so do those of NVIDIA's wheels
 * beside their lib/. */
static void find_headers(struct tack_nvrtc_api *api)
{
    const char *given = getenv("TACK_CUDA_INCLUDE");
    if (given && *given) {
        (void)headers_in(api, given);
        return;
    }
    char lib[PATH_MAX];
    if (realpath(tack_library_path(&api->library), lib)) {
        dirname_of(lib); /* .../lib64 */
        dirname_of(lib); /* the toolkit or the wheel's directory */
        if (headers_under(api, lib))
            return;
    }
    (void)(headers_under(api, getenv("CUDA_PATH")) || headers_under(api, getenv("CUDA_HOME")) ||
           headers_under(api, "/usr/local/cuda"));
}

/* Opens `path` into *api; 0 (and why in `why` when it is empty) if it is no
 * usable NVRTC. */
static int load_one(const char *path, struct tack_nvrtc_api *api, char *why, size_t cap)
{
    memset(api, 0, sizeof *api);
    if (tack_library_open(path, &api->library) != 0) {
        if (!*why)
            snprintf(why, cap, "%s", tack_library_error(&api->library));
        return 0;
    }
#define TACK_NVRTC_RESOLVE(ret, field, symbol, required, params)                                             \
    if (tack_library_symbol(&api->library, #symbol, &api->field, sizeof api->field) != 0 && (required)) {    \
        if (!*why)                                                                                           \
            snprintf(why, cap, "%s has no %s", path, #symbol);                                               \
        tack_library_close(&api->library);                                                                   \
        return 0;                                                                                            \
    }
    TACK_NVRTC_SYMBOLS(TACK_NVRTC_RESOLVE)
#undef TACK_NVRTC_RESOLVE
    if (api->nvrtcVersion(&api->major, &api->minor) != NVRTC_SUCCESS) {
        if (!*why)
            snprintf(why, cap, "nvrtcVersion failed in %s", path);
        tack_library_close(&api->library);
        return 0;
    }
    int n = 0;
    if (api->nvrtcGetNumSupportedArchs && api->nvrtcGetSupportedArchs &&
        api->nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 && n <= TACK_NVRTC_MAX_ARCHS &&
        api->nvrtcGetSupportedArchs(api->archs) == NVRTC_SUCCESS)
        api->narchs = n;
    sort_archs(api);
    preload_builtins(tack_library_path(&api->library));
    find_headers(api);
    return 1;
}

/* Loads what was found, in order, until there are `want`; under load_lock. */
static void load_up_to(int want)
{
    while (nloaded < want && next_to_load < nfound) {
        struct tack_nvrtc_api *api = calloc(1, sizeof *api);
        if (!api)
            return;
        const char *path = found[next_to_load++].path;
        int fresh = load_one(path, api, first_failure, sizeof first_failure);
        /* A soname the linker resolved to a library already loaded. */
        for (int i = 0; fresh && i < nloaded; i++)
            if (loaded[i]->library.handle == api->library.handle)
                fresh = 0;
        if (!fresh) {
            if (api->library.handle)
                tack_library_close(&api->library);
            free(api);
            continue;
        }
        loaded[nloaded++] = api;
    }
}

static tack_status none_found(const char *why)
{
    if (forced)
        return tack_error_set(TACK_ERUNTIME,
                              "NVRTC could not be loaded from TACK_NVRTC_LIBRARY=%s (%s); point it at libnvrtc.so "
                              "of a CUDA toolkit or of the nvidia-cuda-nvrtc Python package",
                              found[0].path, why);
    return tack_error_set(TACK_ERUNTIME,
                          "NVRTC (libnvrtc) was not found: Tack looked beside its Python package (nvidia/cu13/lib, "
                          "nvidia/cuda_nvrtc/lib), in $CUDA_PATH, $CUDA_HOME, the toolkit of nvcc on PATH, "
                          "/usr/local/cuda and /usr/local/cuda-X.Y, and the dynamic linker's path (%s). Install "
                          "the CUDA toolkit or `pip install nvidia-cuda-nvrtc`, or set TACK_NVRTC_LIBRARY to the "
                          "path of libnvrtc.so",
                          why[0] ? why : "nothing found");
}

tack_status tack_nvrtc_api_at(int i, const struct tack_nvrtc_api **out)
{
    pthread_once(&find_once, find);
    const struct tack_nvrtc_api *api = NULL;
    pthread_mutex_lock(&load_lock);
    if (i >= 0 && i < MAX_FOUND)
        load_up_to(i + 1);
    if (i >= 0 && i < nloaded)
        api = loaded[i];
    int count = nloaded;
    char why[sizeof first_failure];
    memcpy(why, first_failure, sizeof why);
    pthread_mutex_unlock(&load_lock);
    if (api) {
        *out = api;
        return TACK_OK;
    }
    if (count == 0)
        return none_found(why);
    return tack_error_set(TACK_ERUNTIME, "Tack found %d NVRTC librar%s, not %d", count, count == 1 ? "y" : "ies",
                          i + 1);
}

tack_status tack_nvrtc_api_get(const struct tack_nvrtc_api **out) { return tack_nvrtc_api_at(0, out); }

int tack_nvrtc_forced(void)
{
    pthread_once(&find_once, find);
    return forced;
}
