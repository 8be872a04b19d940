/*
 * Queued launches on the Level Zero backend, against the simulated driver
 * (tests/sim/level_zero_sim.c), whose command queue runs nothing until the
 * host waits for it (a queue or fence synchronize) and which does not order
 * the immediate copy list against that queue, as the real driver does not.
 * So a wait Tack leaves out reads memory the launch has not written yet.
 * A host saxpy, installed as the simulator's kernel hook, stands in for the
 * GPU when the queue reaches a launch.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arrays.h"
#include "backend.h"
#include "check.h"
#include "kernels.h"
#include "sim.h"
#include "tack/exchange.h"
#include "tack/kernel.h"
#include "tack/tack.h"

typedef void *(*capture_fn)(const char *name, void *const *args, const size_t *sizes, int nargs,
                            const uint32_t groups[3], const uint32_t group_size[3]);
typedef void (*run_fn)(void *closure);

static long long (*sim_stats)(const char *name);
static void *(*sim_host_address)(uint64_t ptr, size_t n);
static void (*sim_set_kernel_hook)(capture_fn capture, run_fn run);
static uint32_t (*sim_create_context)(int device_index, uint64_t handles[3]);
static uint64_t (*sim_alloc)(uint64_t context, uint64_t device, int kind, size_t size);
static uint32_t (*sim_free)(uint64_t context, uint64_t ptr);
static void (*sim_set_free_policies)(uint32_t policies);
static int (*sim_fail)(const char *symbol, uint32_t result, int nth);
static long (*sim_launches_pending)(void);
static long long (*sim_launch_run)(long i);

static void sim_open(void)
{
    void *lib = sim_library("TACK_LEVEL_ZERO_LIBRARY", "the simulated driver");
    SIM_SYMBOL(lib, sim_stats, "tack_sim_ze_stats");
    SIM_SYMBOL(lib, sim_host_address, "tack_sim_ze_host_address");
    SIM_SYMBOL(lib, sim_set_kernel_hook, "tack_sim_ze_set_kernel_hook");
    SIM_SYMBOL(lib, sim_create_context, "tack_sim_ze_create_context");
    SIM_SYMBOL(lib, sim_alloc, "tack_sim_ze_alloc");
    SIM_SYMBOL(lib, sim_free, "tack_sim_ze_free");
    SIM_SYMBOL(lib, sim_set_free_policies, "tack_sim_ze_set_free_policies");
    SIM_SYMBOL(lib, sim_fail, "tack_sim_ze_fail");
    SIM_SYMBOL(lib, sim_launches_pending, "tack_sim_ze_launches_pending");
    SIM_SYMBOL(lib, sim_launch_run, "tack_sim_ze_launch_run");
}

static long long stat(const char *name) { return sim_counter(sim_stats, name); }

/* ---- the GPU's stand-in for saxpy ------------------------------------------ */

struct saxpy_launch {
    int64_t n;
    float a;
    uint64_t x, y;
};

/* Closures come from a pool rather than malloc: a launch whose list is
 * reset before it was ever executed never runs, and is never freed. */
static struct saxpy_launch pool[256];
static unsigned pool_next;

static void *saxpy_capture(const char *name, void *const *args, const size_t *sizes, int nargs,
                           const uint32_t groups[3], const uint32_t group_size[3])
{
    (void)sizes;
    (void)groups;
    (void)group_size;
    if (strcmp(name, "tack_kernel_entry") || nargs != 4)
        return NULL;
    struct saxpy_launch *c = &pool[pool_next++ % 256];
    memcpy(&c->n, args[0], sizeof c->n);
    memcpy(&c->a, args[1], sizeof c->a);
    memcpy(&c->x, args[2], sizeof c->x);
    memcpy(&c->y, args[3], sizeof c->y);
    return c;
}

static void saxpy_run(void *p)
{
    struct saxpy_launch *c = p;
    size_t bytes = (size_t)c->n * sizeof(float);
    saxpy_on_host(c->n, c->a, sim_host_address(c->x, bytes), sim_host_address(c->y, bytes));
}

/* ---- helpers --------------------------------------------------------------- */

static tack_device *ze;
static tack_kernel *saxpy;

static tack_array *filled(tack_device *d, int64_t n, float value)
{
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(d, TACK_F32, 1, &n, 0, &a));
    if (!a)
        exit(1);
    CHECK_OK(tack_array_fill(a, &value));
    return a;
}

/* What the simulated GPU holds at element i, read from its storage without
 * any Tack call (so without any wait). */
static float stored(const tack_array *a, size_t i)
{
    const float *v = sim_host_address((uint64_t)(uintptr_t)tack_array_data(a), tack_array_nbytes(a));
    return v ? v[i] : -1.0f;
}

static tack_status call_saxpy(float a, tack_array *x, tack_array *y) { return saxpy_call(saxpy, a, x, y); }

static tack_device *adopt_new_context(uint64_t h[3])
{
    CHECK(sim_create_context(0, h) == 0);
    return adopt(h);
}

/* ---- cases ----------------------------------------------------------------- */

static void test_a_launch_returns_before_it_has_run(void)
{
    tack_array *x = filled(ze, 64, 1.0f), *y = filled(ze, 64, 2.0f);
    long long launches = stat("launches"), run = stat("launches_run"), syncs = stat("queue_syncs");
    CHECK_OK(call_saxpy(3.0f, x, y));
    /* Executed on the queue, not run: the device memory is untouched. */
    CHECK(stat("launches") == launches + 1);
    CHECK(stat("launches_run") == run);
    CHECK(sim_launches_pending() == 1);
    CHECK(stored(y, 5) == 2.0f);
    /* The host read waits for it, so it sees the result. */
    CHECK(element(y, 5) == 5.0f);
    CHECK(stat("launches_run") == run + 1 && sim_launches_pending() == 0);
    CHECK(stat("queue_syncs") == syncs + 1);
    /* Nothing more to wait for: a second read waits for nothing. */
    CHECK(element(y, 6) == 5.0f);
    CHECK(stat("queue_syncs") == syncs + 1);
    tack_array_release(x);
    tack_array_release(y);
}

static void test_many_launches_run_in_order(void)
{
    /* More launches than a ring of lists holds, each reading what the one
     * before it wrote: only in-order execution, with no list reset while
     * the queue still runs it, gives y = 1 + 40 * 0.5 * x. */
    tack_array *x = filled(ze, 1000, 2.0f), *y = filled(ze, 1000, 1.0f);
    long first = (long)stat("launches_run");
    long long launches = stat("launches"), in_flight = stat("resets_in_flight"), faults = stat("faults");
    for (int i = 0; i < 40; i++)
        CHECK_OK(call_saxpy(0.5f, x, y));
    CHECK(sim_launches_pending() >= 1);
    CHECK(element(y, 999) == 41.0f);
    CHECK(sim_launches_pending() == 0);
    for (long i = 0; i < 40; i++)
        CHECK(sim_launch_run(first + i) == launches + 1 + i);
    CHECK(stat("resets_in_flight") == in_flight && stat("faults") == faults);
    tack_array_release(x);
    tack_array_release(y);
}

static void test_a_copy_into_an_array_waits_for_its_launches(void)
{
    /* The queued launch still reads x: a host write into x must wait. */
    tack_array *x = filled(ze, 16, 1.0f), *y = filled(ze, 16, 0.0f);
    CHECK_OK(call_saxpy(1.0f, x, y));
    float seven = 7.0f;
    CHECK_OK(tack_array_fill(x, &seven));
    CHECK(element(y, 3) == 1.0f);
    CHECK(element(x, 3) == 7.0f);
    tack_array_release(x);
    tack_array_release(y);
}

static void test_a_launch_over_wrapped_memory_completes_before_returning(void)
{
    /* array_from_ptr: its owner may read it at any moment. */
    tack_array *x = filled(ze, 32, 1.0f), *owned = filled(ze, 32, 4.0f), *y = NULL;
    int64_t n = 32;
    CHECK_OK(tack_array_wrap(ze, (uint64_t)(uintptr_t)tack_array_data(owned), TACK_F32, 1, &n, 1, &y));
    if (!y)
        return;
    CHECK_OK(call_saxpy(2.0f, x, y));
    CHECK(sim_launches_pending() == 0);
    CHECK(stored(y, 0) == 6.0f);
    tack_array_release(y);
    tack_array_release(owned);
    tack_array_release(x);
}

static void dl_deleter(DLManagedTensor *t)
{
    free(t);
}

static void test_a_launch_over_an_imported_tensor_completes_before_returning(void)
{
    /* Device memory another library allocated in its context, imported
     * through DLPack on a device sharing that context: the library keeps
     * using the memory with no Tack call in between. */
    uint64_t h[3];
    tack_device *d = adopt_new_context(h);
    uint64_t mem = sim_alloc(h[2], h[1], 2, 16 * sizeof(float));
    CHECK(mem != 0);
    float *storage = mem ? sim_host_address(mem, 16 * sizeof(float)) : NULL;
    if (!storage) {
        tack_device_release(d);
        return;
    }
    for (int i = 0; i < 16; i++)
        storage[i] = 10.0f;
    static int64_t shape[1] = {16};
    DLManagedTensor *t = calloc(1, sizeof *t);
    f32_vector_tensor(&t->dl_tensor, (void *)(uintptr_t)mem, (DLDevice){.device_type = kDLOneAPI,
                                                                        .device_id = 0}, shape);
    t->deleter = dl_deleter;
    tack_array *y = NULL, *x = filled(d, 16, 1.0f);
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_compile(saxpy_source, NULL, d, &k));
    CHECK_OK(tack_array_from_dlpack(t, d, NULL, &y));
    if (!y)
        free(t); /* not adopted: still ours */
    if (y && k) {
        tack_arg args[3] = {tack_arg_f32(1.0f), tack_arg_array(x), tack_arg_array(y)};
        CHECK_OK(tack_kernel_call(k, args, 3));
        CHECK(sim_launches_pending() == 0);
        CHECK(storage[15] == 11.0f);
    }
    tack_array_release(y);
    tack_array_release(x);
    tack_kernel_release(k);
    CHECK(sim_free(h[2], mem) == 0);
    tack_device_release(d);
}

static void test_export_waits_and_later_launches_complete(void)
{
    tack_array *x = filled(ze, 8, 1.0f), *y = filled(ze, 8, 0.0f);
    CHECK_OK(call_saxpy(2.0f, x, y));
    CHECK(sim_launches_pending() == 1);
    /* __dlpack__: the consumer reads y at once, so the launch has run. */
    DLManagedTensor *t = NULL;
    CHECK_OK(tack_array_to_dlpack(y, &t));
    CHECK(sim_launches_pending() == 0);
    CHECK(stored(y, 7) == 2.0f);
    /* And from now on every launch on y completes before returning. */
    CHECK_OK(call_saxpy(2.0f, x, y));
    CHECK(sim_launches_pending() == 0);
    CHECK(stored(y, 7) == 4.0f);
    if (t)
        t->deleter(t);
    tack_array_release(x);
    tack_array_release(y);
}

static void test_synchronize_runs_everything_queued(void)
{
    tack_array *x = filled(ze, 8, 1.0f), *y = filled(ze, 8, 0.0f);
    CHECK_OK(call_saxpy(1.0f, x, y));
    CHECK_OK(call_saxpy(1.0f, x, y));
    CHECK(sim_launches_pending() == 2);
    CHECK_OK(tack_device_synchronize(ze));
    CHECK(sim_launches_pending() == 0);
    CHECK(stored(y, 0) == 2.0f);
    tack_array_release(x);
    tack_array_release(y);
}

static void test_freeing_an_array_a_launch_still_uses(void)
{
    /* With deferred frees, the driver keeps the memory until the launch ran. */
    long long deferred = stat("deferred_frees"), in_use = stat("frees_in_use");
    tack_array *x = filled(ze, 8, 1.0f), *y = filled(ze, 8, 0.0f);
    CHECK_OK(call_saxpy(1.0f, x, y));
    tack_array_release(x);
    tack_array_release(y);
    CHECK(stat("deferred_frees") == deferred + 2 && stat("frees_in_use") == in_use);
    CHECK_OK(tack_device_synchronize(ze));
    CHECK(stat("faults") == 0);

    /* Without them, Tack waits for the queue before zeMemFree. */
    sim_set_free_policies(0);
    uint64_t h[3];
    tack_device *old = adopt_new_context(h);
    sim_set_free_policies(3);
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_compile(saxpy_source, NULL, old, &k));
    tack_array *a = filled(old, 8, 1.0f), *b = filled(old, 8, 0.0f);
    tack_arg args[3] = {tack_arg_f32(1.0f), tack_arg_array(a), tack_arg_array(b)};
    CHECK_OK(tack_kernel_call(k, args, 3));
    CHECK(sim_launches_pending() == 1);
    tack_array_release(a);
    CHECK(sim_launches_pending() == 0);
    CHECK(stat("frees_in_use") == in_use && stat("faults") == 0);
    tack_array_release(b);
    tack_kernel_release(k);
    tack_device_release(old);
}

static void test_a_failed_submission_leaves_the_next_launch_working(void)
{
    tack_array *x = filled(ze, 8, 1.0f), *y = filled(ze, 8, 0.0f);
    long long resets = stat("list_resets");
    sim_fail("zeCommandQueueExecuteCommandLists", 0x70000001u /* device lost */, 1);
    CHECK_STATUS(call_saxpy(1.0f, x, y), TACK_ERUNTIME);
    CHECK(strstr(tack_last_error(), "zeCommandQueueExecuteCommandLists"));
    /* The recorded, never executed list is reset and used again. */
    CHECK_OK(call_saxpy(1.0f, x, y));
    CHECK(stat("list_resets") > resets);
    CHECK(element(y, 0) == 1.0f);
    CHECK(stat("resets_in_flight") == 0);
    tack_array_release(x);
    tack_array_release(y);
}

/* Tack destroys no Level Zero object: not its queue, lists or fences; and
 * no case leaves a fault or a list reset while in flight. */
static void nothing_destroyed_or_faulted(void)
{
    CHECK(stat("destroys") == 0);
    CHECK(stat("resets_in_flight") == 0 && stat("faults") == 0);
}

int main(void)
{
    char cache[] = "/tmp/tack-test-ze-queue-XXXXXX";
    if (!cache_dir_set(cache))
        return 1;
    sim_open();
    sim_set_kernel_hook(saxpy_capture, saxpy_run);
    if (!saxpy_open("level_zero", &ze, &saxpy))
        CHECK_DONE();
    check_after_each = nothing_destroyed_or_faulted;
    RUN(test_a_launch_returns_before_it_has_run);
    RUN(test_many_launches_run_in_order);
    RUN(test_a_copy_into_an_array_waits_for_its_launches);
    RUN(test_a_launch_over_wrapped_memory_completes_before_returning);
    RUN(test_a_launch_over_an_imported_tensor_completes_before_returning);
    RUN(test_export_waits_and_later_launches_complete);
    RUN(test_synchronize_runs_everything_queued);
    RUN(test_freeing_an_array_a_launch_still_uses);
    RUN(test_a_failed_submission_leaves_the_next_launch_working);
    saxpy_close(ze, saxpy);
    nothing_destroyed_or_faulted();
    remove_tree(cache);
    CHECK_DONE();
}
