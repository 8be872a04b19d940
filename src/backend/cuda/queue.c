/*
 * The CUDA backend's queue: waiting for Tack's stream, the handles other
 * libraries share, and ordering Tack's stream and another library's after
 * each other without the host waiting. See src/backend/cuda/cuda.c.
 */
#include "cuda.h"

tack_status cuda_synchronize(tack_device *d)
{
    struct cuda_device *cd = impl_of(d);
    int pushed;
    tack_status st = cuda_enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    CUresult r = cd->cu->cuStreamSynchronize(cd->stream);
    cuda_pop_context(cd->cu, pushed);
    return r == CUDA_SUCCESS ? TACK_OK : cuda_driver_error(TACK_ERUNTIME, r, "waiting for queued work", d);
}

uint64_t cuda_context_handle(const tack_device *d)
{
    const struct cuda_device *cd = d->impl;
    return cd ? (uint64_t)(uintptr_t)cd->ctx : 0;
}

uint64_t cuda_stream_handle(const tack_device *d)
{
    const struct cuda_device *cd = d->impl;
    return cd ? (uint64_t)(uintptr_t)cd->stream : 0;
}

/* The CUDA stream values of the array API's __dlpack__(stream=...): 1 and 2
 * are the driver's CU_STREAM_LEGACY and CU_STREAM_PER_THREAD handles. */
#define DLPACK_STREAM_LEGACY 1u
#define DLPACK_STREAM_PER_THREAD 2u

/* The context of the consumer's stream `value`, checked to be of this
 * device; called with the device's context current. A default stream (1,
 * 2) is `caller`'s, or Tack's when `caller` is NULL. Fails with
 * TACK_EVALUE for a stream the driver does not know or one of another
 * device, TACK_ERUNTIME when the driver fails; *out is then unspecified. */
static tack_status consumer_context(tack_device *d, struct cuda_device *cd, uint64_t value, CUcontext caller,
                                    CUcontext *out)
{
    const struct tack_cuda_api *cu = cd->cu;
    CUstream consumer = (CUstream)(uintptr_t)value;
    CUcontext sctx = NULL;
    CUresult r = CUDA_SUCCESS;
    if (value == DLPACK_STREAM_LEGACY || value == DLPACK_STREAM_PER_THREAD) {
        sctx = caller ? caller : cd->ctx;
    } else if ((r = cu->cuStreamGetCtx(consumer, &sctx)) != CUDA_SUCCESS) {
        char text[200];
        return tack_error_set(TACK_EVALUE, "stream=%llu is not a CUDA stream the driver knows (%s)",
                              (unsigned long long)value, tack_cuda_error_text(r, text, sizeof text));
    }
    *out = sctx;
    if (sctx == cd->ctx)
        return TACK_OK;
    /* Another context: its device must be this one. */
    CUdevice sdev = -1;
    int spushed;
    r = cuda_push_context(cu, sctx, &spushed);
    if (r == CUDA_SUCCESS) {
        r = cu->cuCtxGetDevice(&sdev);
        cuda_pop_context(cu, spushed);
    }
    if (r != CUDA_SUCCESS)
        return cuda_driver_error(TACK_ERUNTIME, r, "finding the device of the consumer's stream", d);
    if (sdev != cd->dev)
        return tack_error_set(TACK_EVALUE,
                              "stream=%llu is a stream of CUDA device %d, but the array is on %s: pass a "
                              "stream of %s, or copy the array there first",
                              (unsigned long long)value, (int)sdev, d->name, d->name);
    return TACK_OK;
}

/* Makes the consumer's stream `value` (of context `sctx`) wait for an event
 * recorded now on Tack's stream; called with the device's context current.
 * Fails with TACK_EVALUE when the driver refuses the stream, TACK_ERUNTIME
 * for other driver failures; no event is left behind either way. */
static tack_status consumer_waits(tack_device *d, struct cuda_device *cd, uint64_t value, CUcontext sctx)
{
    const struct tack_cuda_api *cu = cd->cu;
    CUstream consumer = (CUstream)(uintptr_t)value;
    tack_status st = TACK_OK;
    CUevent event;
    CUresult r = cu->cuEventCreate(&event, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS)
        return cuda_driver_error(TACK_ERUNTIME, r, "creating a CUDA event", d);
    r = cu->cuEventRecord(event, cd->stream);
    if (r == CUDA_SUCCESS) {
        int spushed = 0;
        r = sctx == cd->ctx ? CUDA_SUCCESS : cuda_push_context(cu, sctx, &spushed);
        if (r == CUDA_SUCCESS)
            r = cu->cuStreamWaitEvent(consumer, event, CU_EVENT_WAIT_DEFAULT);
        cuda_pop_context(cu, spushed);
        if (r == CUDA_ERROR_INVALID_HANDLE)
            st = tack_error_set(TACK_EVALUE, "stream=%llu cannot be ordered after %s's work: the driver refused "
                                "it as a stream handle", (unsigned long long)value, d->name);
        else if (r != CUDA_SUCCESS)
            st = cuda_driver_error(TACK_ERUNTIME, r, "ordering the consumer's stream after Tack's", d);
    } else {
        st = cuda_driver_error(TACK_ERUNTIME, r, "recording a CUDA event", d);
    }
    /* Released once the wait no longer needs it: the driver keeps a
     * recorded event alive until it completes. */
    cu->cuEventDestroy(event);
    return st;
}

/* Stream-ordered export: the consumer's stream waits for an event recorded
 * on Tack's stream after the buffer's queued launches, so the consumer's
 * work comes after them on the GPU and the host waits for nothing. Streams
 * of another context on the same device are accepted (CUDA lets a stream
 * wait for an event of any context); the wait is issued with the stream's
 * own context current, as the driver requires of a stream's work. */
tack_status cuda_order_stream(tack_buffer *b, uint64_t value)
{
    tack_device *d = b->device;
    struct cuda_device *cd = impl_of(d);
    const struct tack_cuda_api *cu = cd->cu;
    if (value == 0)
        return tack_error_set(TACK_EVALUE,
                              "stream=0 is ambiguous for CUDA and the array API disallows it: pass 1 for the "
                              "legacy default stream, 2 for the per-thread default stream, or a stream handle");
    CUstream consumer = (CUstream)(uintptr_t)value;
    /* Work on Tack's own stream is already in order after Tack's. */
    if (consumer == cd->stream)
        return TACK_OK;
    /* A default stream belongs to the consumer's context: the one current
     * on its thread, which is this one; with none current, Tack's. */
    CUcontext caller = NULL;
    if (cu->cuCtxGetCurrent(&caller) != CUDA_SUCCESS)
        caller = NULL;
    int pushed;
    tack_status st = cuda_enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    CUcontext sctx = NULL;
    st = consumer_context(d, cd, value, caller, &sctx);
    /* Nothing queued on the buffer is unfinished: nothing to order. */
    if (st == TACK_OK && atomic_load(&b->last_launch) > atomic_load(&d->completed))
        st = consumer_waits(d, cd, value, sctx);
    cuda_pop_context(cu, pushed);
    return st;
}

/* Tack's stream waits for what is queued on a producer's stream: an event
 * recorded there, waited for on Tack's stream; the host does not wait. */
tack_status cuda_wait_stream(tack_device *d, uint64_t value)
{
    struct cuda_device *cd = impl_of(d);
    const struct tack_cuda_api *cu = cd->cu;
    if (value == 0)
        return tack_error_set(TACK_EVALUE,
                              "stream 0 is ambiguous for CUDA: pass 1 for the legacy default stream, 2 for the "
                              "per-thread default stream, or a stream handle");
    CUstream producer = (CUstream)(uintptr_t)value;
    if (producer == cd->stream)
        return TACK_OK; /* already in order */
    int pushed;
    tack_status st = cuda_enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    CUevent event;
    CUresult r = cu->cuEventCreate(&event, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) {
        st = cuda_driver_error(TACK_ERUNTIME, r, "creating a CUDA event", d);
        goto done;
    }
    r = cu->cuEventRecord(event, producer);
    if (r == CUDA_SUCCESS)
        r = cu->cuStreamWaitEvent(cd->stream, event, CU_EVENT_WAIT_DEFAULT);
    if (r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_VALUE)
        st = tack_error_set(TACK_EVALUE, "stream %llu is not a CUDA stream %s can wait for",
                            (unsigned long long)value, d->name);
    else if (r != CUDA_SUCCESS)
        st = cuda_driver_error(TACK_ERUNTIME, r, "ordering Tack's stream after the producer's", d);
    /* The driver keeps a recorded event alive until the wait is done. */
    cu->cuEventDestroy(event);
done:
    cuda_pop_context(cd->cu, pushed);
    return st;
}

const struct tack_backend_queue tack_cuda_queue = {
    .synchronize = cuda_synchronize,
    .context_handle = cuda_context_handle,
    .stream_handle = cuda_stream_handle,
    .order_stream = cuda_order_stream,
    .wait_stream = cuda_wait_stream,
};
