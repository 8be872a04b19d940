/* Loads the CUDA driver once per process and resolves its entry points. */
#include "cuda.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "library.h"

static struct tack_cuda_api api;
/* The outcome of the one load, reported to every caller. */
static tack_status load_status;
static char load_message[512];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static tack_status fail(const char *fmt, const char *a, const char *b)
{
    snprintf(load_message, sizeof load_message, fmt, a, b);
    return TACK_ENODEVICE;
}

static tack_status load(void)
{
    const char *path = getenv("TACK_CUDA_LIBRARY");
    if (!path || !*path)
        path = "libcuda.so.1";
    /* The library is never closed: buffers and DLPack deleters may call
     * into the driver until the process exits. */
    if (tack_library_open(path, &api.library) != 0)
        return fail("CUDA is not available: the driver library %s could not be loaded (%s). Install the NVIDIA "
                    "driver, or set TACK_CUDA_LIBRARY to the path of libcuda",
                    path, tack_library_error(&api.library));

    /* The table is filled in a copy and published whole, so that
     * tack_cuda_error_text never sees half a table. */
    struct tack_cuda_api found = api;
#define TACK_CUDA_RESOLVE(ret, field, symbol, required, params)                                                 \
    if (tack_library_symbol(&found.library, #symbol, &found.field, sizeof found.field) != 0 && (required))      \
        return fail("CUDA is not available: the driver %s has no %s; it is too old for Tack (CUDA 11 or newer " \
                    "is needed)",                                                                               \
                    path, #symbol);
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

tack_status tack_cuda_api_get(const struct tack_cuda_api **out)
{
    pthread_once(&load_once, load_once_fn);
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
