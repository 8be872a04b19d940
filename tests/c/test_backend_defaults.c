/* The defaults of the backend tables' optional slots (src/core/internal.h
 * states each, src/core/backend.c applies it): a backend that fills only
 * the required slots gets every one, through the calls a user makes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/backend.h"
#include "../../src/core/internal.h"
#include "../../src/core/toolchain.h"
#include "check.h"
#include "host_slots.h"
#include "tack/kernel.h"

static int syncs;

static tack_status m_synchronize(tack_device *d)
{
    (void)d;
    syncs++;
    return TACK_OK;
}

static const DLDeviceType m_wraps[] = {kDLCPU, 0};

/* Only what every backend must have: no close, no describe, no queue, and
 * a memory table of alloc and free alone. */
static const struct tack_backend_memory minimal_memory = {.alloc = host_alloc, .free = host_free};
static const struct tack_backend_ops minimal = {
    .name = "minimal", .dl_type = kDLCPU, .wraps = m_wraps, .open = host_open, .memory = &minimal_memory};

/* A queue of synchronize alone: the queue's own optional slots missing. */
static const struct tack_backend_queue sync_only_queue = {.synchronize = m_synchronize};
static const struct tack_backend_ops sync_only = {.name = "sync_only",
                                                  .dl_type = kDLCPU,
                                                  .wraps = m_wraps,
                                                  .open = host_open,
                                                  .memory = &minimal_memory,
                                                  .queue = &sync_only_queue};

/* Registered backends are opened by tack_device_open; these are not, so
 * their devices are made as tack_device_open makes one. */
static tack_device *make_device(const struct tack_backend_ops *ops)
{
    tack_device *d = calloc(1, sizeof *d);
    atomic_init(&d->refs, 1);
    d->ops = ops;
    d->domain = 0xdefa;
    snprintf(d->name, sizeof d->name, "%s:0", ops->name);
    return d;
}

static tack_array *vector(tack_device *d, int64_t n)
{
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(d, TACK_F32, 1, &n, 0, &a));
    return a;
}

/* Copies and fills: memcpy on memory the host addresses. */
static void test_copies_are_memcpy(void)
{
    tack_device *d = make_device(&minimal);
    tack_array *a = vector(d, 4);
    const float in[4] = {1, 2, 3, 4};
    float out[4] = {0};
    CHECK(tack_backend_host_addressable(d));
    CHECK_OK(tack_array_copy_from_host(a, in, sizeof in));
    CHECK(memcmp(tack_array_data(a), in, sizeof in) == 0);
    CHECK_OK(tack_array_copy_to_host(a, out, sizeof out));
    CHECK(memcmp(out, in, sizeof in) == 0);
    float seven = 7.0f;
    CHECK_OK(tack_array_fill(a, &seven));
    CHECK(((float *)tack_array_data(a))[3] == 7.0f);
    tack_array_release(a);
    tack_device_release(d);
}

/* check_pointer: every address accepted, so wrapping needs no driver. */
static void test_every_pointer_accepted(void)
{
    tack_device *d = make_device(&minimal);
    float mine[2];
    tack_buffer *b = NULL;
    CHECK_OK(tack_buffer_wrap(d, mine, sizeof mine, NULL, NULL, &b));
    CHECK(b && tack_buffer_data(b) == (void *)mine);
    CHECK_OK(tack_backend_check_pointer(d, 0x1234));
    tack_buffer_release(b);
    tack_device_release(d);
}

/* export_memory and import_memory: the errors that say the backend has none. */
static void test_no_memory_exchange(void)
{
    tack_device *d = make_device(&minimal);
    tack_array *a = vector(d, 4);
    tack_exported_memory e;
    memset(&e, 0, sizeof e);
    CHECK_STATUS(tack_array_export_memory(a, &e), TACK_ERUNTIME);
    CHECK(strcmp(tack_last_error(), "tack_array_export_memory: Backend minimal does not support memory export") == 0);
    void *data = NULL, *ctx = NULL;
    int writable = 1, foreign = 0;
    CHECK_STATUS(tack_backend_import_memory(d, &e, &data, &ctx, &writable, &foreign), TACK_ERUNTIME);
    CHECK(strcmp(tack_last_error(), "Backend minimal does not support memory import") == 0);
    CHECK(!data && !ctx && writable == 1 && foreign == 0);
    /* release_export: nothing, even for a buffer carrying an export record. */
    tack_buffer *b = tack_array_buffer(a);
    b->export_ctx = &e;
    tack_backend_release_export(b);
    b->export_ctx = NULL;
    tack_array_release(a);
    tack_device_release(d);
}

/* memory_space: no driver to ask, so no device opened and no answer. */
static void test_memory_space_unknown(void)
{
    tack_device *d = make_device(&minimal);
    CHECK(!tack_backend_has_memory_space(&minimal));
    const char *space = "untouched";
    CHECK_OK(tack_backend_memory_space(d, 0x1234, &space));
    CHECK(space == NULL);
    tack_device_release(d);
}

/* No queue: nothing to wait for, no handles, share() marks at once. */
static void test_no_queue(void)
{
    tack_device *d = make_device(&minimal);
    CHECK(!tack_backend_has_queue(d));
    CHECK_OK(tack_device_synchronize(d));
    CHECK_OK(tack_backend_synchronize(d));
    CHECK(tack_device_context_handle(d) == 0);
    CHECK(tack_device_stream_handle(d) == 0);
    CHECK_OK(tack_device_wait_stream(d, 2));
    tack_array *a = vector(d, 4), *c = vector(d, 4);
    CHECK_OK(tack_buffer_share_with_stream(tack_array_buffer(a), 5));
    CHECK(tack_buffer_is_shared(tack_array_buffer(a)));
    CHECK_OK(tack_buffer_share_with_stream(tack_array_buffer(c), -1));
    CHECK(tack_buffer_is_shared(tack_array_buffer(c)));
    tack_array_release(a);
    tack_array_release(c);
    /* close: nothing to do; the release frees the device alone. */
    tack_device_release(d);
}

/* A queue without stream slots: handles 0, a producer's stream needs no
 * wait, and a consumer's stream, -1 included, is ordered by a host wait
 * for the buffer's launches. */
static void test_queue_without_streams(void)
{
    tack_device *d = make_device(&sync_only);
    CHECK(tack_backend_has_queue(d));
    CHECK(tack_device_context_handle(d) == 0);
    CHECK(tack_device_stream_handle(d) == 0);
    CHECK_OK(tack_device_wait_stream(d, 2));
    CHECK(syncs == 0);
    int64_t streams[2] = {5, -1};
    for (int i = 0; i < 2; i++) {
        tack_array *a = vector(d, 4);
        tack_buffer *b = tack_array_buffer(a);
        /* A launch queued on the buffer and not known complete. */
        atomic_store(&d->submitted, (uint64_t)i + 1);
        atomic_store(&b->last_launch, (uint64_t)i + 1);
        int before = syncs;
        CHECK_OK(tack_buffer_share_with_stream(b, streams[i]));
        CHECK(syncs == before + 1);
        CHECK(tack_buffer_is_shared(b));
        tack_array_release(a);
    }
    tack_device_release(d);
}

/* describe: no driver needed, one device named as the backend. */
static void test_report_without_describe(void)
{
    tack_backend_report r;
    memset(&r, 0, sizeof r);
    tack_backend_report_fill(&minimal, &r);
    CHECK(r.driver.found == 1);
    CHECK(strcmp(r.driver.note, "none needed") == 0);
    CHECK(r.device_count == 1);
    CHECK(strcmp(r.devices[0], "minimal") == 0);
}

/* A toolchain of the required slots alone (the cpu dialect's text; code
 * that is a counter): no kernel_key, no kernel_expected_ns, no
 * kernel_unload. */
static int compiles, loads, launches, begins;
static int loaded_kernel;

static tack_status t_compile(const struct tack_compile *job, struct tack_kernel_code *out)
{
    (void)job;
    compiles++;
    out->kind = TACK_CODE_OPENCL_C;
    out->data = strdup("code");
    out->size = 5;
    return out->data ? TACK_OK : TACK_ENOMEM;
}

static tack_status t_load(tack_device *d, struct tack_kernel_code *code, void **kernel)
{
    (void)d;
    (void)code;
    loads++;
    *kernel = &loaded_kernel;
    return TACK_OK;
}

static tack_status t_launch(tack_device *d, void *kernel, const struct tack_launch *l)
{
    (void)d;
    (void)l;
    CHECK(kernel == &loaded_kernel);
    launches++;
    return TACK_OK;
}

static void t_begin(void *c)
{
    (void)c;
    begins++;
}

static void t_end(void *c) { (void)c; }

static struct tack_backend_toolchain required_toolchain = {
    .kernel_compile = t_compile, .kernel_load = t_load, .kernel_launch = t_launch};
/* The minimal backend with that toolchain (set in the case). */
static struct tack_backend_ops with_toolchain;

static const char fill_source[] = "void fill(tack_index i, float *y) { y[i] = 1; }";

/* No toolchain: the backend runs no kernels, and says so. */
static void test_no_toolchain(void)
{
    tack_device *d = make_device(&minimal);
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create(fill_source, NULL, &k));
    CHECK(tack_backend_dialect(&minimal) == NULL);
    CHECK_STATUS(tack_kernel_build(k, d), TACK_ERUNTIME);
    CHECK(strstr(tack_last_error(), "kernels cannot be launched on the minimal backend") != NULL);
    tack_array *y = vector(d, 4);
    tack_arg args[1] = {tack_arg_array(y)};
    CHECK_STATUS(tack_kernel_launch(k, NULL, 4, args, 1), TACK_ERUNTIME);
    CHECK(tack_kernel_expected_ns(k, d, 4) == UINT64_MAX);
    tack_array_release(y);
    tack_kernel_release(k);
    tack_device_release(d);
}

/* No kernel_key: code is not kept, so each device compiles its own; no
 * kernel_expected_ns: not known, so hooks run around every launch; no
 * kernel_unload: the release frees nothing of the backend's. */
static void test_toolchain_without_optional_slots(void)
{
    required_toolchain.dialect = tack_backend_dialect(tack_backend_find("cpu", 3));
    with_toolchain = minimal;
    with_toolchain.name = "with_toolchain";
    with_toolchain.toolchain = &required_toolchain;
    tack_device *a = make_device(&with_toolchain), *b = make_device(&with_toolchain);
    CHECK(!tack_backend_keeps_code(&with_toolchain));
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create(fill_source, NULL, &k));
    CHECK_OK(tack_kernel_build(k, a));
    CHECK_OK(tack_kernel_build(k, a));
    CHECK(compiles == 1 && loads == 1);
    CHECK_OK(tack_kernel_build(k, b));
    CHECK(compiles == 2 && loads == 2);
    tack_array *y = vector(a, 4);
    tack_arg args[1] = {tack_arg_array(y)};
    const int64_t shape[1] = {4};
    tack_launch_hooks hooks = {.above_ns = 0, .begin = t_begin, .end = t_end};
    for (int i = 0; i < 2; i++)
        CHECK_OK(tack_kernel_launch_hooked(k, NULL, 1, shape, args, 1, &hooks));
    CHECK(launches == 2 && begins == 2);
    CHECK(tack_kernel_expected_ns(k, a, 4) == UINT64_MAX);
    tack_array_release(y);
    tack_kernel_release(k);
    tack_device_release(a);
    tack_device_release(b);
}

int main(void)
{
    RUN(test_copies_are_memcpy);
    RUN(test_every_pointer_accepted);
    RUN(test_no_memory_exchange);
    RUN(test_memory_space_unknown);
    RUN(test_no_queue);
    RUN(test_queue_without_streams);
    RUN(test_report_without_describe);
    RUN(test_no_toolchain);
    RUN(test_toolchain_without_optional_slots);
    CHECK_DONE();
}
