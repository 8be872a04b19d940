/* Loads the CUDA driver once per process and resolves its entry points. */
#include "cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#include <windows.h>
#else
#include <dlfcn.h>
#include <pthread.h>
#endif

#include "../core/internal.h"

#if defined(_WIN32)
#define CUDA_DEFAULT_LIBRARY "nvcuda.dll"
#else
#define CUDA_DEFAULT_LIBRARY "libcuda.so.1"
#endif

static struct tack_cuda_api api;
/* The outcome of the one load, reported to every caller. */
static tack_status load_status;
static char load_message[512];

#if defined(_WIN32)
static INIT_ONCE load_once = INIT_ONCE_STATIC_INIT;
#else
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
#endif

static void *library_open(const char *path, char *why, size_t cap)
{
#if defined(_WIN32)
    void *h = (void *)LoadLibraryA(path);
    if (!h)
        snprintf(why, cap, "LoadLibrary failed with error %lu", (unsigned long)GetLastError());
    return h;
#else
    /* RTLD_LOCAL: the driver's symbols must not interpose on anyone else's. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, cap, "%s", e ? e : "dlopen failed");
    }
    return h;
#endif
}

static void *library_symbol(void *library, const char *name)
{
#if defined(_WIN32)
    return (void *)GetProcAddress((HMODULE)library, name);
#else
    return dlsym(library, name);
#endif
}

static tack_status fail(const char *fmt, const char *a, const char *b)
{
    snprintf(load_message, sizeof load_message, fmt, a, b);
    return TACK_ERUNTIME;
}

static tack_status load(void)
{
    const char *path = getenv("TACK_CUDA_LIBRARY");
    if (!path || !*path)
        path = CUDA_DEFAULT_LIBRARY;
    char why[256];
    /* The library is never closed: buffers and DLPack deleters may call
     * into the driver until the process exits. */
    void *library = library_open(path, why, sizeof why);
    if (!library)
        return fail("CUDA is not available: the driver library %s could not be loaded (%s). Install the NVIDIA "
                    "driver, or set TACK_CUDA_LIBRARY to the path of libcuda",
                    path, why);

    struct tack_cuda_api found;
    memset(&found, 0, sizeof found);
    /* Each symbol is converted through memcpy: ISO C has no cast from an
     * object pointer to a function pointer. */
#define TACK_CUDA_RESOLVE(field, symbol, required, params)                                                   \
    do {                                                                                                     \
        void *p_ = library_symbol(library, #symbol);                                                          \
        if (!p_ && (required))                                                                               \
            return fail("CUDA is not available: the driver %s has no %s; it is too old for Tack (CUDA 11 "   \
                        "or newer is needed)",                                                               \
                        path, #symbol);                                                                       \
        memcpy(&found.field, &p_, sizeof p_);                                                                \
    } while (0);
    TACK_CUDA_SYMBOLS(TACK_CUDA_RESOLVE)
#undef TACK_CUDA_RESOLVE

    CUresult r = found.cuInit(0);
    if (r != CUDA_SUCCESS) {
        const char *name = NULL;
        if (found.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
            name = "an unknown error";
        if (r == CUDA_ERROR_NO_DEVICE)
            return fail("CUDA is not available: the driver %s found no CUDA device (cuInit: %s)", path, name);
        return fail("CUDA is not available: cuInit in %s failed with %s", path, name);
    }
    if (found.cuDriverGetVersion(&found.driver_version) != CUDA_SUCCESS)
        found.driver_version = 0;
    api = found;
    return TACK_OK;
}

static void load_once_fn(void) { load_status = load(); }

#if defined(_WIN32)
static BOOL CALLBACK load_once_win(PINIT_ONCE once, PVOID param, PVOID *ctx)
{
    (void)once;
    (void)param;
    (void)ctx;
    load_once_fn();
    return TRUE;
}
#endif

tack_status tack_cuda_api_get(const struct tack_cuda_api **out)
{
#if defined(_WIN32)
    InitOnceExecuteOnce(&load_once, load_once_win, NULL, NULL);
#else
    pthread_once(&load_once, load_once_fn);
#endif
    if (load_status != TACK_OK)
        return tack_error_set(load_status, "%s", load_message);
    *out = &api;
    return TACK_OK;
}

const char *tack_cuda_error_text(CUresult r, char *buf, size_t cap)
{
    const char *name = NULL, *text = NULL;
    /* api.cuGetErrorName is set only once the load succeeded. */
    if (api.cuGetErrorName && api.cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (api.cuGetErrorString && api.cuGetErrorString(r, &text) != CUDA_SUCCESS)
        text = NULL;
    if (name && text)
        snprintf(buf, cap, "%s: %s", name, text);
    else if (name)
        snprintf(buf, cap, "%s", name);
    else
        snprintf(buf, cap, "CUDA error %d", (int)r);
    return buf;
}
