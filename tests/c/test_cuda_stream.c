/*
 * Stream-ordered DLPack export on the CUDA backend, against the simulated
 * driver (tests/sim/cuda_sim.c, named by TACK_CUDA_LIBRARY): a consumer that
 * names its stream gets that stream ordered after Tack's queued launches
 * with an event, and the host does not wait.
 *
 * The simulator runs queued work only when something waits for it, so the
 * difference shows: after the export the launch has not run (no host wait
 * happened), and it runs when the consumer's own stream reaches the event
 * wait. Its counters tell event waits from host syncs. Each case runs in a
 * child process of its own: a process loads the driver once.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/core/internal.h"
#include "../../src/core/queue.h"
#include "../../src/core/toolchain.h"
#include "../../src/driver/cuda.h"
#include "backend.h"
#include "check.h"
#include "cuda_fill.h"
#include "cuda_sim.h"
#include "sim.h"
#include "tack/tack.h"

/* The host waits the simulator has seen: stream, context and event syncs. */
static long long host_waits(void)
{
    return sim_stat("stream_syncs") + sim_stat("ctx_syncs") + sim_stat("event_syncs");
}


/* A stream of the consumer's own in `ctx`, made the way another library
 * makes one. */
static CUstream consumer_stream(CUcontext ctx)
{
    CUstream s = NULL;
    CUcontext popped;
    CHECK(sim.cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
    CHECK(sim.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    sim.cuCtxPopCurrent_v2(&popped);
    return s;
}

static CUresult in_context(CUcontext ctx, CUresult (*fn)(CUstream), CUstream s)
{
    CUcontext popped;
    if (sim.cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult r = fn(s);
    sim.cuCtxPopCurrent_v2(&popped);
    return r;
}

static CUcontext primary_context(int device)
{
    CUcontext c = NULL;
    CHECK(sim.cuDevicePrimaryCtxRetain(&c, device) == CUDA_SUCCESS);
    return c;
}

static int64_t stream_value(CUstream s) { return (int64_t)(uintptr_t)s; }

/* ---- the fill kernel (cuda_fill.h), launched through the queue ---------- */

/* A launch through the queue, as tack_kernel_launch makes it: recorded on
 * the buffer, and waited for when the buffer is shared. */
static tack_status launch_fill(tack_device *d, void *k, tack_array *a, float value)
{
    void *data = tack_array_data(a);
    void *const args[2] = {&data, &value};
    tack_buffer *b = tack_array_buffer(a);
    int64_t n = (int64_t)tack_array_size(a);
    struct tack_launch l = {.ndim = 1, .shape = &n, .n = n, .args = args};
    return tack_queue_launch(d, k, &l, &b, 1);
}

static const float *device_floats(tack_array *a)
{
    return sim.host_address((CUdeviceptr)(uintptr_t)tack_array_data(a), tack_array_nbytes(a));
}

struct fixture {
    tack_device *d;
    tack_array *a;
    void *k;
    CUcontext primary;
};

/* A CUDA device, a 64-element array and a fill of `value` queued on it. */
static struct fixture setup(float value)
{
    struct fixture f;
    sim_open();
    sim.set_kernel_hook(fill_capture, fill_run);
    f.d = open_device("cuda");
    f.a = f32_array(f.d, 64);
    f.k = load_fill(f.d);
    f.primary = primary_context(0);
    CHECK_OK(launch_fill(f.d, f.k, f.a, value));
    CHECK(sim_stat("launches_done") == 0);
    CHECK(!tack_buffer_is_shared(tack_array_buffer(f.a)));
    return f;
}

static void teardown(struct fixture *f)
{
    tack_backend_kernel_unload(f->d, f->k);
    tack_array_release(f->a);
    tack_device_release(f->d);
    sim.cuDevicePrimaryCtxRelease_v2(0);
    CHECK(tack_dlpack_live_exports() == 0);
}

/* Exports f's array for the consumer's stream `value` (versioned), which
 * orders the consumer without making the host wait. */
static DLManagedTensorVersioned *export_for(struct fixture *f, int64_t value)
{
    long long waits = host_waits();
    DLManagedTensorVersioned *m = NULL;
    CHECK_OK(tack_array_to_dlpack_versioned_stream(f->a, value, &m));
    CHECK(host_waits() == waits);
    return m;
}

/* ---- the cases -------------------------------------------------------------- */

static void test_the_consumer_stream_waits_for_an_event_not_the_host(void)
{
    struct fixture f = setup(4.0f);
    CUstream cs = consumer_stream(f.primary);
    DLManagedTensorVersioned *m = export_for(&f, stream_value(cs));
    /* The launch has not run: the order is on the GPU. */
    CHECK(sim_stat("launches_done") == 0);
    CHECK(device_floats(f.a)[0] == 0.0f);
    CHECK(sim_stat("event_records") == 1 && sim_stat("event_waits") == 1);
    CHECK(sim_stat("event_waits_done") == 0);
    /* The event is released at once; the queued wait keeps its point. */
    CHECK(sim_stat("events_created") == 1 && sim_stat("events_destroyed") == 1);
    /* Marked shared for the launches to come. */
    CHECK(tack_buffer_is_shared(tack_array_buffer(f.a)));
    CHECK(m && m->dl_tensor.data == tack_array_data(f.a) && m->dl_tensor.device.device_type == kDLCUDA);

    /* The consumer reads on its own stream: the copy comes after Tack's
     * launch because its stream reaches the event wait first. */
    float seen[64];
    memset(seen, 0xff, sizeof seen);
    CUcontext popped;
    CHECK(sim.cuCtxPushCurrent_v2(f.primary) == CUDA_SUCCESS);
    CHECK(sim.cuMemcpyDtoHAsync_v2(seen, (CUdeviceptr)(uintptr_t)m->dl_tensor.data, sizeof seen, cs) ==
          CUDA_SUCCESS);
    CHECK(sim_stat("launches_done") == 0);
    CHECK(sim.cuStreamSynchronize(cs) == CUDA_SUCCESS);
    sim.cuCtxPopCurrent_v2(&popped);
    CHECK(sim_stat("event_waits_done") == 1);
    CHECK(sim_stat("launches_done") == 1);
    CHECK(seen[0] == 4.0f && seen[63] == 4.0f);
    m->deleter(m);
    CHECK(in_context(f.primary, sim.cuStreamDestroy_v2, cs) == CUDA_SUCCESS);
    teardown(&f);
}

static void test_later_launches_complete_before_returning(void)
{
    struct fixture f = setup(1.0f);
    CUstream cs = consumer_stream(f.primary);
    DLManagedTensorVersioned *m = NULL;
    CHECK_OK(tack_array_to_dlpack_versioned_stream(f.a, stream_value(cs), &m));
    /* The consumer may read at any moment from now on: a launch over the
     * buffer completes (with the one before it) before it returns. */
    CHECK_OK(launch_fill(f.d, f.k, f.a, 9.0f));
    CHECK(sim_stat("launches_done") == 2);
    CHECK(device_floats(f.a)[0] == 9.0f);
    m->deleter(m);
    CHECK(in_context(f.primary, sim.cuStreamDestroy_v2, cs) == CUDA_SUCCESS);
    teardown(&f);
}

static void test_nothing_queued_needs_no_event(void)
{
    struct fixture f = setup(2.0f);
    CHECK_OK(tack_device_synchronize(f.d));
    CUstream cs = consumer_stream(f.primary);
    DLManagedTensorVersioned *m = export_for(&f, stream_value(cs));
    CHECK(sim_stat("events_created") == 0 && sim_stat("event_waits") == 0);
    CHECK(tack_buffer_is_shared(tack_array_buffer(f.a)));
    m->deleter(m);
    CHECK(in_context(f.primary, sim.cuStreamDestroy_v2, cs) == CUDA_SUCCESS);
    teardown(&f);
}

static void test_the_legacy_export_takes_a_stream_too(void)
{
    struct fixture f = setup(3.0f);
    CUstream cs = consumer_stream(f.primary);
    long long waits = host_waits();
    DLManagedTensor *m = NULL;
    CHECK_OK(tack_array_to_dlpack_stream(f.a, stream_value(cs), &m));
    CHECK(host_waits() == waits);
    CHECK(sim_stat("event_waits") == 1 && sim_stat("launches_done") == 0);
    CHECK(in_context(f.primary, sim.cuStreamSynchronize, cs) == CUDA_SUCCESS);
    CHECK(device_floats(f.a)[0] == 3.0f);
    m->deleter(m);
    CHECK(in_context(f.primary, sim.cuStreamDestroy_v2, cs) == CUDA_SUCCESS);
    teardown(&f);
}

static void test_minus_one_synchronises_nothing(void)
{
    struct fixture f = setup(5.0f);
    DLManagedTensorVersioned *m = export_for(&f, -1);
    CHECK(sim_stat("events_created") == 0 && sim_stat("launches_done") == 0);
    CHECK(tack_buffer_is_shared(tack_array_buffer(f.a)));
    m->deleter(m);
    teardown(&f);
}

/* 1 and 2 are the legacy and per-thread default streams of the consumer's
 * context (here no context is current: Tack's). The simulator runs
 * default-stream work at once, so the recorded launch runs when the wait is
 * issued; it is still an event wait, not a host sync. */
static void default_stream(int64_t stream)
{
    const float value = (float)stream;
    struct fixture f = setup(value);
    DLManagedTensorVersioned *m = export_for(&f, stream);
    CHECK(sim_stat("event_waits") == 1 && sim_stat("event_waits_done") == 1);
    CHECK(device_floats(f.a)[0] == value);
    m->deleter(m);
    teardown(&f);
}

static void test_legacy_default_stream(void) { default_stream(1); }
static void test_per_thread_default_stream(void) { default_stream(2); }

/* A refused stream value leaves everything as it was: no export, no mark,
 * nothing enqueued, the launch still queued. */
static void check_refused(struct fixture *f, int64_t value, tack_status want, const char *says)
{
    DLManagedTensorVersioned *m = NULL;
    DLManagedTensor *legacy = NULL;
    CHECK_STATUS(tack_array_to_dlpack_versioned_stream(f->a, value, &m), want);
    CHECK(contains(tack_last_error(), says));
    CHECK_STATUS(tack_array_to_dlpack_stream(f->a, value, &legacy), want);
    CHECK(m == NULL && legacy == NULL);
    CHECK(tack_dlpack_live_exports() == 0);
    CHECK(!tack_buffer_is_shared(tack_array_buffer(f->a)));
    CHECK(sim_stat("event_waits") == 0);
    CHECK(sim_stat("launches_done") == 0);
}

static void test_invalid_stream_values_are_refused(void)
{
    struct fixture f = setup(1.0f);
    check_refused(&f, 0, TACK_EVALUE, "ambiguous");
    check_refused(&f, -2, TACK_EVALUE, "not a stream value");
    check_refused(&f, INT64_MIN, TACK_EVALUE, "not a stream value");
    CHECK_STATUS(tack_buffer_share_with_stream(NULL, 1), TACK_EVALUE);
    teardown(&f);
}

/* Simulator behaviour, not a promise: a handle that is no live stream
 * (never made, or destroyed) is the caller's error, as in CUDA, whose
 * driver may crash on it instead of returning an error. The simulated
 * driver knows its streams and refuses such a handle; this checks that
 * Tack's refusal then changes nothing. These cases never run on a GPU. */
static void test_sim_only_unknown_and_destroyed_streams_are_refused(void)
{
    struct fixture f = setup(1.0f);
    check_refused(&f, 0x1234, TACK_EVALUE, "not a CUDA stream");
    CUstream gone = consumer_stream(f.primary);
    CHECK(in_context(f.primary, sim.cuStreamDestroy_v2, gone) == CUDA_SUCCESS);
    check_refused(&f, stream_value(gone), TACK_EVALUE, "not a CUDA stream");
    teardown(&f);
}

static void test_a_stream_of_another_device_is_refused(void)
{
    setenv("TACK_SIM_CUDA_DEVICES", "2", 1);
    struct fixture f = setup(1.0f);
    CUcontext other = primary_context(1);
    CUstream cs = consumer_stream(other);
    check_refused(&f, stream_value(cs), TACK_EVALUE, "device 1");
    CHECK(sim_stat("events_created") == 0);
    CHECK(in_context(other, sim.cuStreamDestroy_v2, cs) == CUDA_SUCCESS);
    sim.cuDevicePrimaryCtxRelease_v2(1);
    teardown(&f);
}

/* CUDA lets a stream wait for an event of another context on the device:
 * a consumer in a context of its own is ordered, not refused. */
static void test_a_stream_of_another_context_on_the_device_is_ordered(void)
{
    struct fixture f = setup(6.0f);
    CUcontext own = NULL, popped;
    CHECK(sim.cuCtxCreate_v2(&own, 0, 0) == CUDA_SUCCESS);
    sim.cuCtxPopCurrent_v2(&popped);
    CUstream cs = consumer_stream(own);
    DLManagedTensorVersioned *m = export_for(&f, stream_value(cs));
    CHECK(sim_stat("event_waits") == 1 && sim_stat("launches_done") == 0);
    CHECK(in_context(own, sim.cuStreamSynchronize, cs) == CUDA_SUCCESS);
    CHECK(sim_stat("launches_done") == 1 && device_floats(f.a)[0] == 6.0f);
    m->deleter(m);
    CHECK(in_context(own, sim.cuStreamDestroy_v2, cs) == CUDA_SUCCESS);
    CHECK(sim.cuCtxDestroy_v2(own) == CUDA_SUCCESS);
    teardown(&f);
}

static void test_a_driver_failure_keeps_nothing(void)
{
    struct fixture f = setup(1.0f);
    CUstream cs = consumer_stream(f.primary);
    CHECK(sim.fail("cuStreamWaitEvent", CUDA_ERROR_UNKNOWN, 1) == 0);
    DLManagedTensorVersioned *m = NULL;
    CHECK_STATUS(tack_array_to_dlpack_versioned_stream(f.a, stream_value(cs), &m), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "CUDA_ERROR_UNKNOWN"));
    CHECK(m == NULL && tack_dlpack_live_exports() == 0);
    CHECK(!tack_buffer_is_shared(tack_array_buffer(f.a)));
    CHECK(sim_stat("events_created") == sim_stat("events_destroyed"));
    CHECK(sim.fail("cuEventCreate", CUDA_ERROR_OUT_OF_MEMORY, 1) == 0);
    CHECK_STATUS(tack_array_to_dlpack_versioned_stream(f.a, stream_value(cs), &m), TACK_ERUNTIME);
    CHECK(m == NULL && !tack_buffer_is_shared(tack_array_buffer(f.a)));
    /* The next export works. */
    CHECK_OK(tack_array_to_dlpack_versioned_stream(f.a, stream_value(cs), &m));
    CHECK(m != NULL);
    if (m)
        m->deleter(m);
    CHECK(in_context(f.primary, sim.cuStreamDestroy_v2, cs) == CUDA_SUCCESS);
    teardown(&f);
}

static void test_a_destroyed_context_is_a_runtime_error(void)
{
    sim_open();
    CUcontext own = NULL, popped;
    CHECK(sim.cuCtxCreate_v2(&own, 0, 0) == CUDA_SUCCESS);
    /* Tack adopts the context current when it opens the device. */
    tack_device *d = open_device("cuda");
    sim.cuCtxPopCurrent_v2(&popped);
    tack_array *a = f32_array(d, 8);
    CHECK(sim.cuCtxDestroy_v2(own) == CUDA_SUCCESS);
    DLManagedTensorVersioned *m = NULL;
    CHECK_STATUS(tack_array_to_dlpack_versioned_stream(a, 1, &m), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "destroyed"));
    CHECK(m == NULL);
    tack_array_release(a);
    tack_device_release(d);
}

/* Without a way to order streams (the cpu backend), a named stream is
 * served by share(): the host waits, which on the cpu costs nothing. */
static void test_other_backends_wait_on_the_host(void)
{
    tack_device *cpu = open_device("cpu");
    int64_t n = 4;
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(cpu, TACK_F32, 1, &n, 0, &a));
    tack_buffer *b = tack_array_buffer(a);
    CHECK(!tack_buffer_is_shared(b));
    CHECK_STATUS(tack_buffer_share_with_stream(b, -5), TACK_EVALUE);
    CHECK(!tack_buffer_is_shared(b));
    CHECK_OK(tack_buffer_share_with_stream(b, 7));
    CHECK(tack_buffer_is_shared(b));
    DLManagedTensorVersioned *m = NULL;
    DLManagedTensor *legacy = NULL;
    CHECK_STATUS(tack_array_to_dlpack_versioned_stream(NULL, 1, &m), TACK_EVALUE);
    CHECK_STATUS(tack_array_to_dlpack_stream(NULL, 1, &legacy), TACK_EVALUE);
    CHECK(m == NULL && legacy == NULL);
    CHECK_OK(tack_array_to_dlpack_versioned_stream(a, -1, &m));
    CHECK(m && m->dl_tensor.data == tack_array_data(a) && m->dl_tensor.device.device_type == kDLCPU);
    if (m)
        m->deleter(m);
    tack_array_release(a);
    tack_device_release(cpu);
    CHECK(tack_dlpack_live_exports() == 0);
}

int main(void)
{
    if (!cuda_sim_named())
        return 1;
    RUN(test_the_consumer_stream_waits_for_an_event_not_the_host);
    RUN(test_later_launches_complete_before_returning);
    RUN(test_nothing_queued_needs_no_event);
    RUN(test_the_legacy_export_takes_a_stream_too);
    RUN(test_minus_one_synchronises_nothing);
    RUN(test_legacy_default_stream);
    RUN(test_per_thread_default_stream);
    RUN(test_invalid_stream_values_are_refused);
    RUN(test_sim_only_unknown_and_destroyed_streams_are_refused);
    RUN(test_a_stream_of_another_device_is_refused);
    RUN(test_a_stream_of_another_context_on_the_device_is_ordered);
    RUN(test_a_driver_failure_keeps_nothing);
    RUN(test_a_destroyed_context_is_a_runtime_error);
    RUN(test_other_backends_wait_on_the_host);
    CHECK_DONE();
}
