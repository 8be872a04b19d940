/*
 * The CUDA backend's context: which one a device adopts, and making it
 * current for the length of a call (one push and one pop for every context
 * Tack makes current: the device's, an allocation's or a kernel's at their
 * release, a consumer stream's). See src/backend/cuda/cuda.c.
 */
#include "cuda.h"

tack_status cuda_driver_error(tack_status st, CUresult r, const char *what, const tack_device *d)
{
    char text[200];
    return tack_error_set(st, "%s on %s failed: %s", what, d->name, tack_cuda_error_text(r, text, sizeof text));
}

/* 1 while `ctx` is the live context that had `id` when it was recorded. A
 * driver without cuCtxGetId cannot tell; then the calls themselves fail. */
int cuda_context_alive(const struct cuda_device *cd, CUcontext ctx, unsigned long long id)
{
    if (!cd->cu->cuCtxGetId)
        return 1;
    unsigned long long now = 0;
    return cd->cu->cuCtxGetId(ctx, &now) == CUDA_SUCCESS && now == id;
}

int cuda_device_usable(struct cuda_device *cd)
{
    if (atomic_load(&cd->gone))
        return 0;
    if (cuda_context_alive(cd, cd->ctx, cd->ctx_id))
        return 1;
    /* Once destroyed, always destroyed: a context at the same address later
     * is someone else's. */
    atomic_store(&cd->gone, 1);
    return 0;
}

static tack_status gone_error(const tack_device *d)
{
    return tack_error_set(TACK_ERUNTIME,
                          "the CUDA context of %s was destroyed (by the library that created it, or by a reset "
                          "of the device's primary context), and the arrays allocated in it went with it; keep "
                          "that context alive while Tack uses it",
                          d->name);
}

/* Makes `ctx` current for one call if it is not; *pushed for
 * cuda_pop_context. Returns the driver's failure, nothing pushed. */
CUresult cuda_push_context(const struct tack_cuda_api *cu, CUcontext ctx, int *pushed)
{
    CUcontext current = NULL;
    *pushed = 0;
    if (cu->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == ctx)
        return CUDA_SUCCESS;
    CUresult r = cu->cuCtxPushCurrent(ctx);
    *pushed = r == CUDA_SUCCESS;
    return r;
}

void cuda_pop_context(const struct tack_cuda_api *cu, int pushed)
{
    if (pushed) {
        CUcontext popped;
        cu->cuCtxPopCurrent(&popped);
    }
}

/* Makes the device's context current on this thread if it is not already;
 * *pushed says whether cuda_pop_context must restore the caller's. Fails
 * with TACK_ERUNTIME, nothing pushed, when the context is gone. */
tack_status cuda_enter(const tack_device *d, struct cuda_device *cd, int *pushed)
{
    *pushed = 0;
    if (!cuda_device_usable(cd))
        return gone_error(d);
    CUresult r = cuda_push_context(cd->cu, cd->ctx, pushed);
    if (r != CUDA_SUCCESS)
        return cuda_driver_error(TACK_ERUNTIME, r, "making the CUDA context current", d);
    return TACK_OK;
}

/* Adopts the calling thread's context if it belongs to `dev`, else retains
 * the primary context. Sets cd->ctx, cd->primary and *external. */
tack_status cuda_choose_context(tack_device *d, struct cuda_device *cd, int *external)
{
    const struct tack_cuda_api *cu = cd->cu;
    CUcontext current = NULL;
    CUdevice current_dev = -1;
    *external = 0;
    if (cu->cuCtxGetCurrent(&current) != CUDA_SUCCESS)
        current = NULL;
    if (current && cu->cuCtxGetDevice(&current_dev) == CUDA_SUCCESS && current_dev == cd->dev) {
        /* The current context may be the primary one (made current by the
         * CUDA runtime, PyTorch, CuPy): then take a reference to it like any
         * user of the primary context. Only an active primary context can be
         * current, and checking the state first avoids creating one. */
        unsigned int flags;
        int active = 0;
        if (cu->cuDevicePrimaryCtxGetState(cd->dev, &flags, &active) == CUDA_SUCCESS && active) {
            CUcontext primary;
            if (cu->cuDevicePrimaryCtxRetain(&primary, cd->dev) == CUDA_SUCCESS) {
                if (primary == current) {
                    cd->ctx = primary;
                    cd->primary = 1;
                    return TACK_OK;
                }
                cu->cuDevicePrimaryCtxRelease(cd->dev);
            }
        }
        cd->ctx = current;
        *external = 1;
        return TACK_OK;
    }
    CUresult r = cu->cuDevicePrimaryCtxRetain(&cd->ctx, cd->dev);
    if (r != CUDA_SUCCESS)
        return cuda_driver_error(TACK_ERUNTIME, r, "retaining the primary CUDA context", d);
    cd->primary = 1;
    return TACK_OK;
}
