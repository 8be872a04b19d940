/*
 * The Level Zero backend against the simulated driver
 * (tests/sim/level_zero_sim.c, found through TACK_SIM_LEVEL_ZERO_PATH).
 * Each case runs in a child process of its own, because a process loads the
 * driver once and keeps its plain devices until exit.
 *
 * The simulator reports device memory for a pointer from any context (as
 * the real driver does), keeps device memory where the host cannot touch
 * it, fills fresh memory with 0xA5 and counts every destroy call: so the
 * cases show that only Tack's own bookkeeping tells contexts apart, that
 * allocations are zeroed and copied through the driver, and that Tack
 * destroys nothing.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/driver/level_zero.h"
#include "backend.h"
#include "check.h"
#include "sim.h"
#include "tack/tack.h"

/* ---- the simulator, as another library in the process sees it -------- */

static struct sim {
    void *lib;
    long long (*stats)(const char *name);
    int (*fail)(const char *symbol, uint32_t result, int nth);
    uint32_t (*create_context)(int device_index, uint64_t handles[3]);
    uint64_t (*alloc)(uint64_t context, uint64_t device, int kind, size_t size);
    uint32_t (*free)(uint64_t context, uint64_t ptr);
    uint64_t (*allocation_context)(uint64_t ptr);
    int (*allocation_device)(uint64_t ptr);
    long (*allocations_in)(uint64_t context);
    long (*lists_in)(uint64_t context, int group);
    long (*queues_in)(uint64_t context, int group);
    long (*immediate_lists_in)(uint64_t context);
    void *(*host_address)(uint64_t ptr, size_t n);
    void (*set_free_policies)(uint32_t policies);
} sim;

/* One of the simulator's own hooks, into the field of its name. */
#define SIM_OWN(name) SIM_SYMBOL(sim.lib, sim.name, "tack_sim_ze_" #name)

/* Opens the same library Tack will: one instance per process. */
static void sim_open(void)
{
    sim.lib = sim_library("TACK_LEVEL_ZERO_LIBRARY", "the simulated driver");
    SIM_OWN(stats);
    SIM_OWN(fail);
    SIM_OWN(create_context);
    SIM_OWN(alloc);
    SIM_OWN(free);
    SIM_OWN(allocation_context);
    SIM_OWN(allocation_device);
    SIM_OWN(allocations_in);
    SIM_OWN(lists_in);
    SIM_OWN(queues_in);
    SIM_OWN(immediate_lists_in);
    SIM_OWN(host_address);
    SIM_OWN(set_free_policies);
}

static long long stat(const char *name)
{
    return sim_counter(sim.stats, name);
}

/* ---- helpers ------------------------------------------------------------- */

#define RUN_ISOLATED(test) RUN_AFTER(sim_open, test)

/* Another library's context on device `index`: its three handles. */
static void other_library(int index, uint64_t h[3])
{
    CHECK(sim.create_context(index, h) == 0);
    bail_if(!h[0] || !h[1] || !h[2]);
}

/* ---- opening ------------------------------------------------------------- */

static void test_plain_device_has_a_context_of_its_own(void)
{
    tack_device *d = open_device("level_zero");
    CHECK(!strcmp(tack_device_backend(d), "level_zero"));
    CHECK(!strcmp(tack_device_name(d), "level_zero:0"));
    CHECK(!tack_device_shares_external_context(d));
    DLDevice dl = tack_device_dl_device(d);
    CHECK(dl.device_type == kDLOneAPI && dl.device_id == 0);
    CHECK(stat("init") >= 1);
    CHECK(stat("contexts_created") == 1);
    uint64_t ctx = tack_device_context_handle(d);
    CHECK(ctx != 0);
    /* Tack's copy list, its launch queue and the lists that queue runs live
     * in its context, on a group that computes (the simulator's group 0
     * only copies). */
    CHECK(sim.immediate_lists_in(ctx) == 1);
    CHECK(sim.queues_in(ctx, 1) == 1 && sim.queues_in(ctx, -1) == 1);
    CHECK(sim.lists_in(ctx, 1) > 1 && sim.lists_in(ctx, -1) == sim.lists_in(ctx, 1));
    /* The process-wide device: one object, one context. */
    tack_device *again = open_device("level_zero:0");
    CHECK(again == d);
    tack_device_release(again);
    /* level_zero:1 shares Tack's context but is another memory domain. */
    tack_device *one = open_device("level_zero:1");
    CHECK(!strcmp(tack_device_name(one), "level_zero:1"));
    CHECK(tack_device_context_handle(one) == ctx);
    CHECK(stat("contexts_created") == 1);
    CHECK(tack_device_memory_domain(one) != tack_device_memory_domain(d));
    tack_array *a = f32_array(one, 4);
    CHECK(sim.allocation_device(address(a)) == 1);
    tack_array_release(a);
    tack_device_release(one);
    tack_device_release(d);
}

static void test_a_missing_device_is_a_runtime_error(void)
{
    tack_device *d = (tack_device *)0x1;
    CHECK_STATUS(tack_device_open("level_zero:2", NULL, 0, &d), TACK_ENODEVICE);
    CHECK(contains(tack_last_error(), "level_zero:2"));
    CHECK(d == (tack_device *)0x1);
}

static void test_a_failing_driver_is_a_runtime_error(void)
{
    tack_device *d = (tack_device *)0x1;
    sim.fail("zeInit", TACK_ZE_ERROR_UNINITIALIZED, 1);
    CHECK_STATUS(tack_device_open("level_zero", NULL, 0, &d), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "zeInit"));
    CHECK(d == (tack_device *)0x1);
    /* A failure after Tack's context exists keeps that context for the
     * retry instead of making (and never destroying) another. */
    sim.fail("zeCommandListCreateImmediate", TACK_ZE_ERROR_OUT_OF_HOST_MEMORY, 1);
    CHECK(tack_device_open("level_zero", NULL, 0, &d) != TACK_OK);
    CHECK(d == (tack_device *)0x1);
    d = open_device("level_zero");
    CHECK(stat("contexts_created") == 1);
    tack_device_release(d);
    CHECK(stat("destroys") == 0);
}

static void test_no_driver_library_is_a_runtime_error(void)
{
    check_open_fails("TACK_LEVEL_ZERO_LIBRARY", "/nonexistent/libze_loader.so.1", "level_zero",
                     "TACK_LEVEL_ZERO_LIBRARY", "/nonexistent/libze_loader.so.1");
    tack_device *d = NULL;
    /* The same answer later: the library is looked for once. */
    CHECK_STATUS(tack_device_open("level_zero", NULL, 0, &d), TACK_ENODEVICE);
    CHECK(d == NULL);
}

/* ---- external_context ------------------------------------------------------ */

static void expect_refused(const tack_option *o, size_t n, const char *const *mentions, const char *const *absent)
{
    tack_device *d = (tack_device *)0x1;
    long long contexts = stat("contexts_created"), lists = stat("lists_created");
    CHECK_STATUS(tack_device_open("level_zero", o, n, &d), TACK_EVALUE);
    for (const char *const *m = mentions; m && *m; m++)
        if (!contains(tack_last_error(), *m)) {
            fprintf(stderr, "  message lacks '%s': %s\n", *m, tack_last_error());
            CHECK(0);
        }
    for (const char *const *m = absent; m && *m; m++)
        if (contains(tack_last_error(), *m)) {
            fprintf(stderr, "  message names '%s': %s\n", *m, tack_last_error());
            CHECK(0);
        }
    /* Nothing constructed, nothing of Tack's own filled in. */
    CHECK(d == (tack_device *)0x1);
    CHECK(stat("contexts_created") == contexts);
    CHECK(stat("lists_created") == lists);
}

static void test_external_context_needs_all_three_handles(void)
{
    uint64_t h[3];
    other_library(0, h);
    {
        tack_option o[1] = {{.name = "external_context", .field = "driver", .value = h[0]}};
        expect_refused(o, 1, (const char *[]){"'device'", "'context'", "missing", NULL},
                       (const char *[]){"'driver'", NULL});
    }
    {
        tack_option o[3] = {{.name = "external_context", .field = "driver", .value = h[0]},
                            {.name = "external_context", .field = "device", .value = h[1]},
                            {.name = "external_context", .field = "context", .value = 0}};
        expect_refused(o, 3, (const char *[]){"'context'", "null", NULL}, (const char *[]){"'device'", NULL});
    }
    {
        tack_option o[3] = {{.name = "external_context", .field = "driver", .value = 0},
                            {.name = "external_context", .field = "device", .value = 0},
                            {.name = "external_context", .field = "context", .value = 0}};
        expect_refused(o, 3, (const char *[]){"'driver'", "'device'", "'context'", NULL}, NULL);
    }
    {
        /* external_context=None: given, with no handles. */
        tack_option o[1] = {{.name = "external_context", .field = NULL, .value = 0}};
        expect_refused(o, 1, (const char *[]){"'driver'", "'device'", "'context'", NULL}, NULL);
    }
    {
        tack_option o[1] = {{.name = "external_context", .field = NULL, .value = h[2]}};
        expect_refused(o, 1, (const char *[]){"dict", NULL}, NULL);
    }
    {
        tack_option o[3] = {{.name = "external_context", .field = "driver", .value = h[0]},
                            {.name = "external_context", .field = "device", .value = h[1]},
                            {.name = "external_context", .field = "ctx", .value = h[2]}};
        expect_refused(o, 3, (const char *[]){"'ctx'", NULL}, NULL);
    }
    {
        tack_option o[4] = {{.name = "external_context", .field = "driver", .value = h[0]},
                            {.name = "external_context", .field = "device", .value = h[1]},
                            {.name = "external_context", .field = "context", .value = h[2]},
                            {.name = "external_context", .field = "context", .value = h[2]}};
        expect_refused(o, 4, (const char *[]){"twice", NULL}, NULL);
    }
    {
        /* A misspelled option is refused by name before anything is made. */
        tack_option o[3] = {{"external_contxt", "driver", h[0]},
                            {"external_contxt", "device", h[1]},
                            {"external_contxt", "context", h[2]}};
        expect_refused(o, 3, (const char *[]){"external_contxt", "external_context", NULL}, NULL);
    }
    /* And the cpu backend accepts no external_context at all. */
    tack_option o[3] = {{.name = "external_context", .field = "driver", .value = h[0]},
                        {.name = "external_context", .field = "device", .value = h[1]},
                        {.name = "external_context", .field = "context", .value = h[2]}};
    tack_device *d = (tack_device *)0x1;
    CHECK_STATUS(tack_device_open("cpu", o, 3, &d), TACK_EVALUE);
    CHECK(contains(tack_last_error(), "external_context"));
    CHECK(d == (tack_device *)0x1);
    /* None of this started the driver for Tack. */
    CHECK(stat("init") == 0);
}

static void test_options_are_checked_before_the_driver_is_needed(void)
{
    setenv("TACK_LEVEL_ZERO_LIBRARY", "/nonexistent/libze_loader.so.1", 1);
    tack_option o[1] = {{.name = "external_context", .field = "driver", .value = 5}};
    tack_device *d = NULL;
    CHECK_STATUS(tack_device_open("level_zero", o, 1, &d), TACK_EVALUE);
    CHECK(contains(tack_last_error(), "'device'"));
}

static void test_handles_the_driver_does_not_know_are_a_runtime_error(void)
{
    uint64_t h[3];
    other_library(0, h);
    tack_option o[3] = {{.name = "external_context", .field = "driver", .value = h[0]},
                        {.name = "external_context", .field = "device", .value = 0x1234},
                        {.name = "external_context", .field = "context", .value = h[2]}};
    tack_device *d = (tack_device *)0x1;
    long long lists = stat("lists_created");
    CHECK_STATUS(tack_device_open("level_zero", o, 3, &d), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "ZE_RESULT_ERROR_INVALID_NULL_HANDLE"));
    CHECK(d == (tack_device *)0x1);
    CHECK(stat("lists_created") == lists);
}

static void test_adopted_context_receives_every_allocation(void)
{
    uint64_t h[3];
    other_library(0, h);
    long long contexts = stat("contexts_created");
    tack_device *d = adopt(h);
    CHECK(tack_device_shares_external_context(d));
    CHECK(tack_device_context_handle(d) == h[2]);
    CHECK(!strcmp(tack_device_name(d), "level_zero:0"));
    /* Tack made no context of its own, and its copy list, launch queue and
     * launch lists are in the adopted one. */
    CHECK(stat("contexts_created") == contexts);
    CHECK(sim.immediate_lists_in(h[2]) == 1 && sim.queues_in(h[2], 1) == 1);
    CHECK(sim.lists_in(h[2], 1) > 1 && sim.lists_in(h[2], -1) == sim.lists_in(h[2], 1));
    tack_array *a = f32_array(d, 1000), *b = f32_array(d, 3);
    CHECK(sim.allocation_context(address(a)) == h[2]);
    CHECK(sim.allocation_context(address(b)) == h[2]);
    CHECK(sim.allocations_in(h[2]) == 2);
    /* Frees go to the same context. */
    tack_array_release(a);
    tack_array_release(b);
    CHECK(sim.allocations_in(h[2]) == 0);
    CHECK(stat("wrong_context_frees") == 0 && stat("invalid_frees") == 0);
    tack_device_release(d);
    CHECK(stat("destroys") == 0);
}

static void test_adopted_device_is_a_domain_of_its_own(void)
{
    tack_device *p = open_device("level_zero");
    uint64_t h[3], g[3];
    other_library(0, h);
    other_library(0, g);
    tack_device *d = adopt(h), *again = adopt(h), *other = adopt(g);
    CHECK(d != p && again != d);
    CHECK(tack_device_memory_domain(d) != tack_device_memory_domain(p));
    CHECK(tack_device_memory_domain(other) != tack_device_memory_domain(d));
    CHECK(tack_device_memory_domain(other) != tack_device_memory_domain(p));
    /* The same context adopted twice is the same memory. */
    CHECK(tack_device_memory_domain(again) == tack_device_memory_domain(d));
    /* Tack's own context adopted explicitly is the plain device's memory. */
    uint64_t own[3] = {h[0], h[1], tack_device_context_handle(p)};
    tack_device *mine = adopt(own);
    CHECK(tack_device_memory_domain(mine) == tack_device_memory_domain(p));
    tack_array *x = f32_array(p, 2), *y = f32_array(d, 2);
    CHECK(tack_device_memory_domain(tack_array_device(x)) != tack_device_memory_domain(tack_array_device(y)));
    tack_array_release(x);
    tack_array_release(y);
    tack_device_release(mine);
    tack_device_release(other);
    tack_device_release(again);
    tack_device_release(d);
    tack_device_release(p);
}

static void test_adopted_device_takes_its_ordinal_from_the_handles(void)
{
    uint64_t h[3];
    other_library(1, h);
    tack_device *d = adopt(h);
    CHECK(!strcmp(tack_device_name(d), "level_zero:1"));
    CHECK(tack_device_ordinal(d) == 1);
    DLDevice dl = tack_device_dl_device(d);
    CHECK(dl.device_type == kDLOneAPI && dl.device_id == 1);
    tack_array *a = f32_array(d, 8);
    CHECK(sim.allocation_device(address(a)) == 1);
    CHECK(sim.allocation_context(address(a)) == h[2]);
    tack_array_release(a);
    tack_device_release(d);
}

static void test_arrays_made_before_adoption_keep_their_device(void)
{
    tack_device *p = open_device("level_zero");
    uint64_t before = tack_device_memory_domain(p), own = tack_device_context_handle(p);
    tack_array *a = f32_array(p, 4);
    const float values[4] = {1, 2, 3, 4};
    CHECK_OK(tack_array_copy_from_host(a, values, sizeof values));
    uint64_t h[3];
    other_library(0, h);
    tack_device *d = adopt(h);
    tack_array *b = f32_array(d, 4);
    /* a stays where it was made: device, domain, context and contents. */
    CHECK(tack_array_device(a) == p);
    CHECK(tack_device_memory_domain(tack_array_device(a)) == before);
    CHECK(sim.allocation_context(address(a)) == own);
    CHECK(sim.allocation_context(address(b)) == h[2]);
    CHECK(tack_device_memory_domain(tack_array_device(b)) != before);
    float back[4] = {0};
    CHECK_OK(tack_array_copy_to_host(a, back, sizeof back));
    CHECK(!memcmp(back, values, sizeof back));
    /* Moving it over goes through the host into the adopted context. */
    tack_array *c = NULL;
    CHECK_OK(tack_array_to_device(a, d, &c));
    bail_if(!c);
    CHECK(tack_array_device(c) == d);
    CHECK(sim.allocation_context(address(c)) == h[2]);
    memset(back, 0, sizeof back);
    CHECK_OK(tack_array_copy_to_host(c, back, sizeof back));
    CHECK(!memcmp(back, values, sizeof back));
    tack_array_release(c);
    tack_array_release(b);
    tack_array_release(a);
    tack_device_release(d);
    tack_device_release(p);
}

/* ---- memory ---------------------------------------------------------------- */

static void test_allocations_are_zeroed_and_copied_through_the_driver(void)
{
    tack_device *d = open_device("level_zero");
    tack_array *a = f32_array(d, 1000);
    /* The memory is the driver's: the host cannot address it, and the
     * driver filled it with 0xA5 before Tack zeroed it. */
    const unsigned char *store = sim.host_address(address(a), 4000);
    CHECK(store != NULL && (const void *)store != tack_array_data(a));
    CHECK(all_bytes(store, 4000, 0));
    float v = 2.5f, back[1000];
    CHECK_OK(tack_array_fill(a, &v));
    CHECK_OK(tack_array_copy_to_host(a, back, sizeof back));
    int wrong = 0;
    for (int i = 0; i < 1000; i++)
        wrong += back[i] != 2.5f;
    CHECK(wrong == 0);
    /* A zero-size array still gets an address of its own. */
    int64_t zero = 0;
    tack_array *e = NULL;
    CHECK_OK(tack_array_empty(d, TACK_F64, 1, &zero, 0, &e));
    CHECK(e && tack_array_data(e) != NULL && sim.allocation_context(address(e)) == tack_device_context_handle(d));
    tack_array_release(e);
    tack_array_release(a);
    tack_device_release(d);
}

static void test_frees_are_deferred_when_the_driver_can(void)
{
    tack_device *d = open_device("level_zero");
    long long frees = stat("frees"), deferred = stat("deferred_frees"), live = stat("live_allocs");
    tack_array *a = f32_array(d, 16);
    CHECK(stat("live_allocs") == live + 1);
    tack_array_release(a);
    CHECK(stat("frees") == frees + 1);
    CHECK(stat("deferred_frees") == deferred + 1);
    CHECK(stat("live_allocs") == live);
    tack_device_release(d);
}

static void test_frees_without_the_extension(void)
{
    /* A driver that predates the memory-free-policies extension. */
    sim.set_free_policies(0);
    tack_device *d = open_device("level_zero");
    long long frees = stat("frees"), live = stat("live_allocs");
    tack_array *a = f32_array(d, 16);
    tack_array_release(a);
    CHECK(stat("frees") == frees + 1);
    CHECK(stat("deferred_frees") == 0);
    CHECK(stat("frees_in_use") == 0);
    CHECK(stat("live_allocs") == live);
    tack_device_release(d);
}

static void test_allocation_failures_keep_nothing(void)
{
    tack_device *d = open_device("level_zero");
    long long live = stat("live_allocs");
    int64_t n = 16;
    tack_array *a = (tack_array *)0x1;
    sim.fail("zeMemAllocDevice", TACK_ZE_ERROR_OUT_OF_DEVICE_MEMORY, 1);
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 1, &n, 0, &a), TACK_ENOMEM);
    CHECK(a == (tack_array *)0x1);
    sim.fail("zeMemAllocDevice", TACK_ZE_ERROR_DEVICE_LOST, 1);
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 1, &n, 0, &a), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "ZE_RESULT_ERROR_DEVICE_LOST"));
    /* A failed zero-fill returns the memory. */
    sim.fail("zeCommandListAppendMemoryFill", TACK_ZE_ERROR_DEVICE_LOST, 1);
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 1, &n, 0, &a), TACK_ERUNTIME);
    CHECK(a == (tack_array *)0x1);
    CHECK(stat("live_allocs") == live);
    CHECK(tack_buffer_live_count() == 0 && tack_array_live_count() == 0);
    /* A failed copy is reported, not ignored. */
    tack_array *b = f32_array(d, 4);
    float host[4] = {0};
    sim.fail("zeCommandListAppendMemoryCopy", TACK_ZE_ERROR_DEVICE_LOST, 1);
    CHECK_STATUS(tack_array_copy_to_host(b, host, sizeof host), TACK_ERUNTIME);
    tack_array_release(b);
    tack_device_release(d);
}

static void test_wrap_accepts_device_and_shared_memory(void)
{
    tack_device *d = open_device("level_zero");
    uint64_t ctx = tack_device_context_handle(d), h[3];
    other_library(0, h);
    uint64_t dev = sim.alloc(ctx, h[1], 2, 64), shared = sim.alloc(ctx, h[1], 3, 64);
    /* Device memory from another library's context passes: the driver
     * cannot tell contexts apart, which is why adoption exists. */
    uint64_t foreign = sim.alloc(h[2], h[1], 2, 64);
    CHECK(dev && shared && foreign);
    int64_t n = 16;
    tack_array *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(tack_array_wrap(d, dev, TACK_F32, 1, &n, 1, &a));
    CHECK_OK(tack_array_wrap(d, shared, TACK_F32, 1, &n, 0, &b));
    CHECK_OK(tack_array_wrap(d, foreign, TACK_F32, 1, &n, 0, &c));
    CHECK(a && !tack_buffer_is_owned(tack_array_buffer(a)) && tack_buffer_is_shared(tack_array_buffer(a)));
    /* Wrapped memory is never freed by Tack. */
    long long frees = stat("frees");
    tack_array_release(a);
    tack_array_release(b);
    tack_array_release(c);
    CHECK(stat("frees") == frees);
    CHECK(sim.free(ctx, dev) == 0 && sim.free(ctx, shared) == 0 && sim.free(h[2], foreign) == 0);
    tack_device_release(d);
}

static void test_wrap_refuses_host_memory_and_faults(void)
{
    tack_device *d = open_device("level_zero");
    uint64_t ctx = tack_device_context_handle(d), h[3];
    other_library(1, h);
    int64_t n = 4;
    tack_array *a = (tack_array *)0x1;
    float local[4];
    CHECK_STATUS(tack_array_wrap(d, (uint64_t)(uintptr_t)local, TACK_F32, 1, &n, 0, &a), TACK_EVALUE);
    CHECK(contains(tack_last_error(), "not a Level Zero allocation"));
    CHECK(contains(tack_last_error(), "cpu"));
    uint64_t host = sim.alloc(ctx, 0, 1, 64);
    CHECK_STATUS(tack_array_wrap(d, host, TACK_F32, 1, &n, 0, &a), TACK_EVALUE);
    CHECK(contains(tack_last_error(), "host memory"));
    /* Device memory of another device. */
    uint64_t other = sim.alloc(h[2], h[1], 2, 64);
    CHECK_STATUS(tack_array_wrap(d, other, TACK_F32, 1, &n, 0, &a), TACK_EVALUE);
    CHECK(contains(tack_last_error(), "another Level Zero device"));
    /* A query that fails is a fault, not a verdict on the memory. */
    uint64_t dev = sim.alloc(ctx, h[1], 2, 64);
    sim.fail("zeMemGetAllocProperties", TACK_ZE_ERROR_DEVICE_LOST, 1);
    CHECK_STATUS(tack_array_wrap(d, dev, TACK_F32, 1, &n, 0, &a), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "zeMemGetAllocProperties"));
    CHECK(a == (tack_array *)0x1);
    CHECK(tack_buffer_live_count() == 0);
    tack_device_release(d);
}

/* tack_memory_space answers from zeMemGetAllocProperties, and reports a
 * failed query as the fault it is. */
static void test_memory_space_is_the_drivers_answer(void)
{
    tack_device *d = open_device("level_zero");
    uint64_t ctx = tack_device_context_handle(d), h[3];
    other_library(0, h);
    uint64_t dev = sim.alloc(ctx, h[1], 2, 64), shared = sim.alloc(ctx, h[1], 3, 64), host = sim.alloc(ctx, 0, 1, 64);
    float local[4];
    const struct sim_space_case cases[] = {{dev, "level_zero"},
                                           {dev + 16, "level_zero"},
                                           {shared, "level_zero_shared"},
                                           {host, "level_zero_host"},
                                           {(uint64_t)(uintptr_t)local, "cpu"}};
    CHECK_MEMORY_SPACES(cases, stat);
    const char *untouched = "untouched";
    sim.fail("zeMemGetAllocProperties", TACK_ZE_ERROR_DEVICE_LOST, 1);
    CHECK_STATUS(tack_memory_space(dev, &untouched), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "zeMemGetAllocProperties"));
    CHECK(!strcmp(untouched, "untouched"));
    CHECK_STATUS(tack_memory_space(dev, NULL), TACK_EVALUE);
    CHECK(sim.free(ctx, dev) == 0 && sim.free(ctx, shared) == 0 && sim.free(ctx, host) == 0);
    tack_device_release(d);
}

/* ---- DLPack ------------------------------------------------------------------ */

static void test_dlpack_into_an_adopted_context(void)
{
    uint64_t h[3];
    other_library(0, h);
    tack_device *d = adopt(h), *p = open_device("level_zero"), *cpu = NULL;
    CHECK_OK(tack_device_open("cpu", NULL, 0, &cpu));
    /* Another library's kDLOneAPI tensor, in its own context. */
    uint64_t mem = sim.alloc(h[2], h[1], 2, 64);
    int64_t shape[1] = {16};
    DLManagedTensor m;
    memset(&m, 0, sizeof m);
    f32_vector_tensor(&m.dl_tensor, (void *)(uintptr_t)mem, (DLDevice){.device_type = kDLOneAPI,
                                                                       .device_id = 0}, shape);
    tack_array *a = NULL;
    CHECK_OK(tack_array_from_dlpack(&m, d, NULL, &a));
    bail_if(!a);
    CHECK(tack_array_device(a) == d);
    CHECK(address(a) == mem);
    CHECK(tack_device_memory_domain(tack_array_device(a)) == tack_device_memory_domain(d));
    tack_array_release(a);
    /* Without device=, the driver vouches for the pointer whatever its
     * context: it lands on the plain device, and only the domain says it
     * is not Tack's context's memory there. */
    CHECK_OK(tack_array_from_dlpack(&m, NULL, cpu, &a));
    bail_if(!a);
    CHECK(tack_array_device(a) == p);
    CHECK(tack_device_memory_domain(tack_array_device(a)) != tack_device_memory_domain(d));
    tack_array_release(a);
    /* The cpu device cannot wrap it: RuntimeError naming level_zero. */
    a = (tack_array *)0x1;
    CHECK_STATUS(tack_array_from_dlpack(&m, cpu, NULL, &a), TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "level_zero"));
    CHECK(a == (tack_array *)0x1);
    /* Host memory labelled kDLOneAPI is refused by the memory-space check. */
    float host[16];
    m.dl_tensor.data = host;
    CHECK_STATUS(tack_array_from_dlpack(&m, d, NULL, &a), TACK_EVALUE);
    CHECK(sim.free(h[2], mem) == 0);
    tack_device_release(cpu);
    tack_device_release(p);
    tack_device_release(d);
}

/* ---- nothing destroyed ----------------------------------------------------- */

static void test_tack_destroys_no_level_zero_object(void)
{
    tack_device *p = open_device("level_zero"), *q = open_device("level_zero:1");
    uint64_t h[3];
    other_library(0, h);
    for (int round = 0; round < 3; round++) {
        tack_device *d = adopt(h);
        tack_array *a = f32_array(d, 32), *b = f32_array(p, 32), *c = NULL;
        CHECK_OK(tack_array_to_device(b, q, &c));
        tack_array_release(a);
        tack_array_release(b);
        tack_array_release(c);
        tack_device_release(d); /* closes the adopted device */
    }
    tack_device_release(q);
    tack_device_release(p);
    CHECK(stat("destroys") == 0);
    CHECK(stat("contexts_destroyed") == 0 && stat("lists_destroyed") == 0 && stat("queues_destroyed") == 0);
    /* The adopted context still works for its owner. */
    uint64_t mem = sim.alloc(h[2], h[1], 2, 64);
    CHECK(mem != 0);
    CHECK(sim.free(h[2], mem) == 0);
}

int main(void)
{
    const char *path = getenv("TACK_SIM_LEVEL_ZERO_PATH");
    if (!path || !*path) {
        printf("skipped: TACK_SIM_LEVEL_ZERO_PATH does not name the simulated Level Zero driver\n");
        return 77;
    }
    setenv("TACK_LEVEL_ZERO_LIBRARY", path, 1);
    RUN_ISOLATED(test_plain_device_has_a_context_of_its_own);
    RUN_ISOLATED(test_a_missing_device_is_a_runtime_error);
    RUN_ISOLATED(test_a_failing_driver_is_a_runtime_error);
    RUN_ISOLATED(test_no_driver_library_is_a_runtime_error);
    RUN_ISOLATED(test_external_context_needs_all_three_handles);
    RUN_ISOLATED(test_options_are_checked_before_the_driver_is_needed);
    RUN_ISOLATED(test_handles_the_driver_does_not_know_are_a_runtime_error);
    RUN_ISOLATED(test_adopted_context_receives_every_allocation);
    RUN_ISOLATED(test_adopted_device_is_a_domain_of_its_own);
    RUN_ISOLATED(test_adopted_device_takes_its_ordinal_from_the_handles);
    RUN_ISOLATED(test_arrays_made_before_adoption_keep_their_device);
    RUN_ISOLATED(test_allocations_are_zeroed_and_copied_through_the_driver);
    RUN_ISOLATED(test_frees_are_deferred_when_the_driver_can);
    RUN_ISOLATED(test_frees_without_the_extension);
    RUN_ISOLATED(test_allocation_failures_keep_nothing);
    RUN_ISOLATED(test_wrap_accepts_device_and_shared_memory);
    RUN_ISOLATED(test_wrap_refuses_host_memory_and_faults);
    RUN_ISOLATED(test_memory_space_is_the_drivers_answer);
    RUN_ISOLATED(test_dlpack_into_an_adopted_context);
    RUN_ISOLATED(test_tack_destroys_no_level_zero_object);
    CHECK_DONE();
}
