/* The queue and share machinery, against a test backend whose "stream" is a
 * list of pending launches that runs only when synchronised: a launch that
 * should have completed before returning, and did not, shows up here as
 * memory that was not yet written. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "host_slots.h"
#include "kernels.h"
#include "internal.h"
#include "queue.h"
#include "tack/tack.h"
#include "toolchain.h"

#define QMAX 64

struct qkernel {
    tack_host_entry entry, entry_restrict;
    int nargs;
    size_t sizes[TACK_KERNEL_MAX_PARAMS];
};

struct qlaunch {
    struct qkernel *k;
    int64_t n;
    int ndim;
    int64_t shape[TACK_KERNEL_MAX_DIMS];
    int disjoint;
    /* Argument values copied at enqueue, as a real stream does. */
    uint64_t vals[TACK_KERNEL_MAX_PARAMS];
};

struct qstream {
    struct qlaunch pending[QMAX];
    int len;
    int ran;    /* launches executed */
    int syncs;  /* synchronize calls */
    int loads, unloads;
    struct qlaunch last; /* the last launch enqueued, kept after it ran */
};

static tack_status q_synchronize(tack_device *d)
{
    struct qstream *s = d->impl;
    s->syncs++;
    for (int i = 0; i < s->len; i++) {
        struct qlaunch *l = &s->pending[i];
        void *args[TACK_KERNEL_MAX_PARAMS];
        for (int a = 0; a < l->k->nargs; a++)
            args[a] = &l->vals[a];
        l->k->entry(0, l->n, l->shape, args);
        s->ran++;
    }
    s->len = 0;
    return TACK_OK;
}

static tack_status q_kernel_load(tack_device *d, struct tack_kernel_code *code, void **out)
{
    struct qstream *s = d->impl;
    /* The entry points by the names the code lists: the first, then the
     * cpu dialect's restrict variant where it wrote one. */
    void *entry = code->object && code->nentries > 1 ? dlsym(code->object, code->entries[0]) : NULL;
    void *restricted = entry ? dlsym(code->object, code->entries[1]) : NULL;
    if (code->kind != TACK_CODE_HOST || !entry)
        return tack_error_set(TACK_ERUNTIME, "test backend loads host code only");
    struct qkernel *k = calloc(1, sizeof *k);
    if (!k)
        return TACK_ENOMEM;
    memcpy(&k->entry, &entry, sizeof entry);
    memcpy(&k->entry_restrict, restricted ? &restricted : &entry, sizeof entry);
    k->nargs = code->nargs;
    memcpy(k->sizes, code->arg_sizes, (size_t)code->nargs * sizeof *k->sizes);
    s->loads++;
    *out = k;
    return TACK_OK;
}

static tack_status q_kernel_launch(tack_device *d, void *kernel, const struct tack_launch *launch)
{
    int64_t n = launch->n;
    void *const *args = launch->args;
    struct qstream *s = d->impl;
    struct qkernel *k = kernel;
    if (s->len == QMAX)
        return tack_error_set(TACK_ERUNTIME, "test queue full");
    struct qlaunch *l = &s->pending[s->len++];
    l->k = k;
    l->n = n;
    l->ndim = launch->ndim;
    memcpy(l->shape, launch->shape, (size_t)launch->ndim * sizeof *l->shape);
    l->disjoint = launch->disjoint;
    s->last = *l;
    for (int a = 0; a < k->nargs; a++) {
        l->vals[a] = 0;
        memcpy(&l->vals[a], args[a], k->sizes[a]);
    }
    return TACK_OK;
}

static void q_kernel_unload(tack_device *d, void *kernel)
{
    struct qstream *s = d->impl;
    s->unloads++;
    free(kernel);
}

static void q_close(tack_device *d) { free(d->impl); }

static const DLDeviceType q_wraps[] = {kDLCPU, 0};

/* Its dialect and toolchain are the cpu backend's (set in main): host
 * code, which this backend queues instead of running at once. */
static const struct tack_backend_memory q_memory = {.alloc = host_alloc, .free = host_free};
static const struct tack_backend_queue q_queue = {.synchronize = q_synchronize};

static struct tack_backend_toolchain q_toolchain = {
    .kernel_load = q_kernel_load,
    .kernel_launch = q_kernel_launch,
    .kernel_unload = q_kernel_unload,
};

static const struct tack_backend_ops queue_backend = {
    .name = "queue",
    .dl_type = kDLCPU,
    .wraps = q_wraps,
    .open = host_open,
    .close = q_close,
    .memory = &q_memory,
    .queue = &q_queue,
    .toolchain = &q_toolchain,
};

static tack_device *qdev;
static struct qstream *qs;
static tack_device *cpu;

/* Devices are made by tack_device_open from the registered backends; the
 * test backend is not one of them, so its device is made by hand. */
static tack_device *make_queue_device(void)
{
    tack_device *d = calloc(1, sizeof *d);
    atomic_init(&d->refs, 1);
    d->ops = &queue_backend;
    d->impl = calloc(1, sizeof(struct qstream));
    d->domain = 0x7e57;
    snprintf(d->name, sizeof d->name, "queue:0");
    return d;
}

static tack_array *qvec(tack_dtype dt, int64_t n)
{
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(qdev, dt, 1, &n, 0, &a));
    return a;
}

static tack_kernel *inc_kernel(void)
{
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create("void inc(tack_index i, float v, float *y) { y[i] += v; }", NULL, &k));
    return k;
}

/* Calls k, an inc_kernel, adding v to every element of y. */
static tack_status inc(tack_kernel *k, float v, tack_array *y)
{
    return tack_kernel_call(k, (tack_arg[]){tack_arg_f32(v), tack_arg_array(y)}, 2);
}

static void test_launch_is_queued(void)
{
    tack_kernel *k = inc_kernel();
    tack_array *y = qvec(TACK_F32, 16);
    float *py = tack_array_data(y);
    tack_arg args[] = {tack_arg_f32(2.0f), tack_arg_array(y)};
    int syncs = qs->syncs;
    CHECK_OK(tack_kernel_call(k, args, 2));
    /* Queued, not run: the launch returned at once. */
    CHECK(qs->len == 1);
    CHECK(py[0] == 0.0f);
    CHECK(qs->syncs == syncs);
    /* The scalar was copied at enqueue: changing ours now changes nothing. */
    args[0] = tack_arg_f32(100.0f);
    CHECK_OK(inc(k, 3.0f, y));
    CHECK(qs->len == 2);
    /* A host read waits for the buffer's launches, in order. */
    float host[16];
    CHECK_OK(tack_array_copy_to_host(y, host, sizeof host));
    CHECK(qs->len == 0);
    CHECK(host[0] == 5.0f && host[15] == 5.0f);
    /* Nothing queued on it any more: the next read does not wait. */
    syncs = qs->syncs;
    CHECK_OK(tack_array_copy_to_host(y, host, sizeof host));
    CHECK(qs->syncs == syncs);
    tack_array_release(y);
    tack_kernel_release(k);
}

static void test_unrelated_buffer_does_not_wait(void)
{
    tack_kernel *k = inc_kernel();
    tack_array *y = qvec(TACK_F32, 4), *other = qvec(TACK_F32, 4);
    CHECK_OK(inc(k, 1.0f, y));
    int syncs = qs->syncs;
    float host[4];
    CHECK_OK(tack_array_copy_to_host(other, host, sizeof host));
    CHECK(qs->syncs == syncs);
    CHECK(qs->len == 1);
    CHECK_OK(tack_device_synchronize(qdev));
    CHECK(qs->len == 0);
    CHECK(((float *)tack_array_data(y))[3] == 1.0f);
    tack_array_release(y);
    tack_array_release(other);
    tack_kernel_release(k);
}

static void test_share(void)
{
    tack_kernel *k = inc_kernel();
    tack_array *y = qvec(TACK_F32, 8);
    float *py = tack_array_data(y);
    tack_buffer *b = tack_array_buffer(y);
    CHECK(!tack_buffer_is_shared(b));
    CHECK_OK(inc(k, 1.0f, y));
    CHECK(qs->len == 1 && py[0] == 0.0f);
    /* share() waits for what is queued on the buffer, then marks it. */
    CHECK_OK(tack_buffer_share(b));
    CHECK(tack_buffer_is_shared(b));
    CHECK(qs->len == 0 && py[0] == 1.0f);
    /* From now on every launch using it is complete when it returns. */
    CHECK_OK(inc(k, 1.0f, y));
    CHECK(qs->len == 0 && py[7] == 2.0f);
    /* Also when the shared buffer is only read, beside an unshared one. */
    tack_kernel *copy = NULL;
    CHECK_OK(tack_kernel_create("void cp(tack_index i, const float *x, float *y) { y[i] = x[i]; }", NULL, &copy));
    tack_array *dst = qvec(TACK_F32, 8);
    CHECK_OK(tack_kernel_call(copy, (tack_arg[]){tack_arg_array(y), tack_arg_array(dst)}, 2));
    CHECK(qs->len == 0 && ((float *)tack_array_data(dst))[7] == 2.0f);
    /* The unshared one alone queues again. */
    CHECK_OK(inc(k, 1.0f, dst));
    CHECK(qs->len == 1);
    CHECK_OK(tack_device_synchronize(qdev));
    tack_array_release(dst);
    tack_array_release(y);
    tack_kernel_release(copy);
    tack_kernel_release(k);
}

static void test_wrapped_is_shared(void)
{
    tack_kernel *k = inc_kernel();
    float *mem = calloc(8, sizeof *mem);
    tack_array *w = NULL;
    CHECK_OK(tack_array_wrap(qdev, (uint64_t)(uintptr_t)mem, TACK_F32, 1, (int64_t[]){8}, 1, &w));
    CHECK(w && tack_buffer_is_shared(tack_array_buffer(w)));
    CHECK_OK(inc(k, 4.0f, w));
    CHECK(qs->len == 0);
    CHECK(mem[0] == 4.0f && mem[7] == 4.0f);
    tack_array_release(w);
    free(mem);
    tack_kernel_release(k);
}

static void test_dlpack_export_shares(void)
{
    tack_kernel *k = inc_kernel();
    tack_array *y = qvec(TACK_F32, 8);
    CHECK_OK(inc(k, 1.0f, y));
    CHECK(qs->len == 1);
    DLManagedTensorVersioned *t = NULL;
    CHECK_OK(tack_array_to_dlpack_versioned(y, &t));
    /* The consumer may read at once: the export waited. */
    CHECK(qs->len == 0);
    CHECK(t && ((float *)t->dl_tensor.data)[0] == 1.0f);
    CHECK(tack_buffer_is_shared(tack_array_buffer(y)));
    CHECK_OK(inc(k, 1.0f, y));
    CHECK(qs->len == 0 && ((float *)t->dl_tensor.data)[0] == 2.0f);
    if (t)
        t->deleter(t);
    tack_array_release(y);
    tack_kernel_release(k);
}

static void test_checks_before_enqueue(void)
{
    tack_kernel *k = inc_kernel();
    tack_kernel *two = NULL;
    CHECK_OK(tack_kernel_create("void two(tack_index i, const float *x, float *y) { y[i] = x[i]; }", NULL, &two));
    tack_array *y = qvec(TACK_F32, 8), *host = NULL, *ro = NULL;
    int64_t n = 8;
    CHECK_OK(tack_array_empty(cpu, TACK_F32, 1, &n, 0, &host));
    CHECK_OK(tack_array_wrap(qdev, (uint64_t)(uintptr_t)tack_array_data(y), TACK_F32, 1, &n, 0, &ro));
    int len = qs->len;
    /* two memory domains */
    CHECK_STATUS(tack_kernel_call(two, (tack_arg[]){tack_arg_array(host), tack_arg_array(y)}, 2), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "two memory domains") != NULL);
    /* an explicit device from another domain than the arrays */
    CHECK_STATUS(tack_kernel_launch(k, cpu, 8, (tack_arg[]){tack_arg_f32(1.0f), tack_arg_array(y)}, 2),
                 TACK_EVALUE);
    /* read-only where the kernel stores */
    CHECK_STATUS(inc(k, 1.0f, ro), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "'y'") != NULL);
    CHECK_STATUS(tack_kernel_launch(k, NULL, -5, (tack_arg[]){tack_arg_f32(1.0f), tack_arg_array(y)}, 2),
                 TACK_EVALUE);
    CHECK_OK(tack_kernel_launch(k, NULL, 0, (tack_arg[]){tack_arg_f32(1.0f), tack_arg_array(y)}, 2));
    CHECK(qs->len == len);
    tack_array_release(ro);
    tack_array_release(host);
    tack_array_release(y);
    tack_kernel_release(two);
    tack_kernel_release(k);
}

static void test_release_waits(void)
{
    tack_kernel *k = inc_kernel();
    tack_array *y = qvec(TACK_F32, 4);
    int loads = qs->loads, unloads = qs->unloads;
    CHECK_OK(inc(k, 1.0f, y));
    CHECK_OK(inc(k, 1.0f, y));
    CHECK(qs->loads == loads + 1); /* loaded once per device */
    CHECK(qs->len == 2);
    /* The code is freed only after the queued launches of it ran. */
    tack_kernel_release(k);
    CHECK(qs->len == 0);
    CHECK(qs->unloads == unloads + 1);
    CHECK(((float *)tack_array_data(y))[0] == 2.0f);
    tack_array_release(y);
}

/* The same kernel on two devices: built once, loaded per device. */
static void test_two_devices(void)
{
    tack_kernel *k = inc_kernel();
    tack_array *y = qvec(TACK_F32, 4), *h = NULL;
    int64_t n = 4;
    CHECK_OK(tack_array_empty(cpu, TACK_F32, 1, &n, 0, &h));
    for (int r = 0; r < 3; r++) {
        CHECK_OK(inc(k, 1.0f, h));
        CHECK_OK(inc(k, 1.0f, y));
    }
    CHECK(((float *)tack_array_data(h))[3] == 3.0f); /* cpu: synchronous */
    CHECK(qs->len == 3);
    CHECK_OK(tack_device_synchronize(qdev));
    CHECK(((float *)tack_array_data(y))[3] == 3.0f);
    tack_array_release(h);
    tack_array_release(y);
    tack_kernel_release(k);
}

/* A backend whose table has no toolchain runs no kernels, even one whose
 * memory the host addresses: running host code on the host's thread pool
 * is the cpu backend's own toolchain, not a default of the table. */
static void test_backend_without_toolchain_runs_none(void)
{
    static const struct tack_backend_ops bare = {
        .name = "bare", .dl_type = kDLCPU, .wraps = q_wraps, .open = host_open, .memory = &q_memory};
    tack_device *d = make_queue_device();
    free(d->impl);
    d->impl = NULL;
    d->ops = &bare;
    snprintf(d->name, sizeof d->name, "bare:0");
    tack_kernel *k = inc_kernel();
    CHECK_STATUS(tack_kernel_build(k, d), TACK_ERUNTIME);
    CHECK(strstr(tack_last_error(), "kernels cannot be launched on the bare backend") != NULL);
    tack_array *y = NULL;
    int64_t n = 4;
    CHECK_OK(tack_array_empty(d, TACK_F32, 1, &n, 0, &y));
    CHECK_STATUS(inc(k, 1.0f, y), TACK_ERUNTIME);
    CHECK(((float *)tack_array_data(y))[0] == 0.0f);
    tack_array_release(y);
    tack_kernel_release(k);
    tack_device_release(d);
}

/* The launch a backend gets: the domain's rank and extents, their product,
 * and whether its arrays are disjoint (which lets the CPU backend run the
 * restrict variant the host code carries beside the plain entry). */
static void test_launch_describes_domain_and_aliasing(void)
{
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create("void f(tack_index i, tack_index j, const float *a, const float *b, float *y) "
                                "{ y[i * 5 + j] = a[i * 5 + j] + b[i * 5 + j]; }",
                                NULL, &k));
    tack_array *a = qvec(TACK_F32, 15), *b = qvec(TACK_F32, 15), *y = qvec(TACK_F32, 15);
    const int64_t shape[2] = {3, 5};
    tack_arg sep[3] = {tack_arg_array(a), tack_arg_array(b), tack_arg_array(y)};
    CHECK_OK(tack_kernel_launch_nd(k, NULL, 2, shape, sep, 3));
    struct qlaunch *l = &qs->last;
    CHECK(l->ndim == 2 && l->shape[0] == 3 && l->shape[1] == 5 && l->n == 15 && l->disjoint == 1);
    CHECK(l->k->entry_restrict && l->k->entry_restrict != l->k->entry);
    /* One array read through two parameters: nothing it is written through. */
    tack_arg reread[3] = {tack_arg_array(a), tack_arg_array(a), tack_arg_array(y)};
    CHECK_OK(tack_kernel_launch_nd(k, NULL, 2, shape, reread, 3));
    CHECK(qs->last.disjoint == 1);
    /* Written and read through two parameters. */
    tack_arg same[3] = {tack_arg_array(y), tack_arg_array(b), tack_arg_array(y)};
    CHECK_OK(tack_kernel_launch_nd(k, NULL, 2, shape, same, 3));
    CHECK(qs->last.disjoint == 0);
    /* A view of part of the written array, one element in. */
    tack_array *view = NULL;
    int64_t fourteen = 14;
    CHECK_OK(tack_array_wrap(qdev, (uint64_t)(uintptr_t)((float *)tack_array_data(y) + 1), TACK_F32, 1, &fourteen,
                             1, &view));
    tack_arg shifted[3] = {tack_arg_array(a), tack_arg_array(view), tack_arg_array(y)};
    CHECK_OK(tack_kernel_launch_nd(k, NULL, 2, (int64_t[]){2, 5}, shifted, 3));
    CHECK(qs->last.disjoint == 0);
    /* Adjacent but not overlapping. */
    tack_array *next = NULL;
    CHECK_OK(tack_array_wrap(qdev, (uint64_t)(uintptr_t)((float *)tack_array_data(y) + 10), TACK_F32, 1,
                             (int64_t[]){5}, 1, &next));
    tack_array *first = NULL;
    CHECK_OK(tack_array_wrap(qdev, (uint64_t)(uintptr_t)tack_array_data(y), TACK_F32, 1, (int64_t[]){10}, 1,
                             &first));
    tack_arg adjacent[3] = {tack_arg_array(next), tack_arg_array(b), tack_arg_array(first)};
    CHECK_OK(tack_kernel_launch_nd(k, NULL, 2, (int64_t[]){1, 5}, adjacent, 3));
    /* Disjoint addresses, but the written array is wrapped memory, which
     * may be a second mapping of anything: assumed to alias. */
    CHECK(qs->last.disjoint == 0);
    /* Refused before anything is queued: the wrong rank, a negative extent,
     * more than 2^63 - 1 indices. */
    int queued = qs->len + qs->ran;
    CHECK_STATUS(tack_kernel_launch(k, NULL, 15, sep, 3), TACK_EVALUE);
    CHECK_STATUS(tack_kernel_launch_nd(k, NULL, 3, (int64_t[]){1, 3, 5}, sep, 3), TACK_EVALUE);
    CHECK_STATUS(tack_kernel_launch_nd(k, NULL, 2, (int64_t[]){3, -5}, sep, 3), TACK_EVALUE);
    CHECK_STATUS(tack_kernel_launch_nd(k, NULL, 2, (int64_t[]){(int64_t)1 << 32, (int64_t)1 << 32}, sep, 3),
                 TACK_EVALUE);
    CHECK_OK(tack_kernel_launch_nd(k, NULL, 2, (int64_t[]){0, (int64_t)1 << 62}, sep, 3));
    CHECK(qs->len + qs->ran == queued);
    CHECK_OK(tack_device_synchronize(qdev));
    tack_array_release(first);
    tack_array_release(next);
    tack_array_release(view);
    tack_array_release(a);
    tack_array_release(b);
    tack_array_release(y);
    tack_kernel_release(k);
}

/* The restrict entry runs only where every written array is private
 * memory: Tack's own allocation, never exportable, never handed out. */
static void test_aliasing_follows_memory(void)
{
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create("void f(tack_index i, const float *a, float *y) { y[i] = a[i]; }", NULL, &k));
    tack_array *a = qvec(TACK_F32, 8), *y = qvec(TACK_F32, 8), *e = NULL;
    const int64_t n = 8;
    CHECK_OK(tack_array_empty(qdev, TACK_F32, 1, &n, 1, &e));
    tack_arg own[2] = {tack_arg_array(a), tack_arg_array(y)};
    CHECK_OK(tack_kernel_launch(k, NULL, 8, own, 2));
    CHECK(qs->last.disjoint == 1);
    /* Reading exportable memory: the written array is still private. */
    tack_arg read_exportable[2] = {tack_arg_array(e), tack_arg_array(y)};
    CHECK_OK(tack_kernel_launch(k, NULL, 8, read_exportable, 2));
    CHECK(qs->last.disjoint == 1);
    /* Writing exportable memory: another mapping of it may be the input. */
    tack_arg write_exportable[2] = {tack_arg_array(a), tack_arg_array(e)};
    CHECK_OK(tack_kernel_launch(k, NULL, 8, write_exportable, 2));
    CHECK(qs->last.disjoint == 0);
    /* Handed out (share(), as DLPack and the array interfaces do): no
     * longer private, for good. */
    CHECK_OK(tack_buffer_share(tack_array_buffer(y)));
    CHECK_OK(tack_kernel_launch(k, NULL, 8, own, 2));
    CHECK(qs->last.disjoint == 0);
    CHECK_OK(tack_device_synchronize(qdev));
    tack_array_release(a);
    tack_array_release(y);
    tack_array_release(e);
    tack_kernel_release(k);
}

int main(void)
{
    char cache[PATH_MAX];
    if (!cpu_test_begin(cache, sizeof cache, "queue", 0, &cpu))
        return 1;
    /* The cpu backend's dialect and toolchain slots, through its table. */
    const struct tack_backend_ops *cpu_ops = tack_backend_find("cpu", 3);
    q_toolchain.dialect = cpu_ops->toolchain->dialect;
    q_toolchain.kernel_key = cpu_ops->toolchain->kernel_key;
    q_toolchain.kernel_compile = cpu_ops->toolchain->kernel_compile;
    qdev = make_queue_device();
    qs = qdev->impl;
    RUN(test_launch_is_queued);
    RUN(test_unrelated_buffer_does_not_wait);
    RUN(test_share);
    RUN(test_wrapped_is_shared);
    RUN(test_dlpack_export_shares);
    RUN(test_checks_before_enqueue);
    RUN(test_release_waits);
    RUN(test_two_devices);
    RUN(test_backend_without_toolchain_runs_none);
    RUN(test_launch_describes_domain_and_aliasing);
    RUN(test_aliasing_follows_memory);
    tack_device_release(qdev);
    tack_device_release(cpu);
    remove_tree(cache);
    CHECK_DONE();
}
