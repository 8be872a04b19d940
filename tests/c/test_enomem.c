/* Every out-of-memory path of the C API, as Lua's test build checks its
 * own: for each call the other C tests make, allocation n inside libtack
 * is made to fail, for n = 0, 1, 2, ... until the call no longer reaches
 * an n-th allocation. Each failure must return TACK_ENOMEM with a message
 * and change nothing: no array, buffer, export or descriptor more, no
 * reference count moved, the output untouched, a producer's deleter not
 * called; ASan's leak checker (detect_leaks=1) ends every case's process
 * and fails it for any block left behind. Built against libtack compiled
 * with the failing allocator (src/core/test_hooks.c, meson
 * -Dtest_hooks=true). */
#include <dirent.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "check.h"
#include "../kernel/kernel.h"
#include "internal.h"
#include "kernels.h"
#include "tack/tack.h"
#include "test_hooks.h"

/* What a call must leave as it found it when it fails. */
#define MAX_WATCHED 4
struct state {
    long live[3];
    int fds;
    long refs[MAX_WATCHED];
};

static int fd_count(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* The output a call must leave untouched on failure. */
#define UNTOUCHED ((void *)0x1)

/* One swept call: prepare (optional) makes what the call needs with the
 * allocator working, call makes the call under test and keeps its result
 * in the context, undo (optional) releases all of it whatever the call
 * returned. watch names reference counts the call must not move. */
struct swept {
    const char *name;
    void (*prepare)(void *ctx);
    tack_status (*call)(void *ctx);
    void (*undo)(void *ctx, tack_status status);
    void *ctx;
    atomic_long *watch[MAX_WATCHED];
    /* Optional: the call's own state beside the counts (a deleter not
     * called); compared like them. */
    long (*extra)(void *ctx);
    /* What the call returns when no allocation fails: TACK_OK, or the
     * error of a call that fails anyway (a source that does not compile),
     * which a failed allocation may return instead of TACK_ENOMEM. */
    tack_status want;
};

static void state_read(const struct swept *s, struct state *out)
{
    memset(out, 0, sizeof *out);
    check_live_counts(out->live);
    out->fds = fd_count();
    for (int i = 0; i < MAX_WATCHED; i++)
        out->refs[i] = s->watch[i] ? atomic_load(s->watch[i]) : 0;
    if (s->extra)
        out->refs[MAX_WATCHED - 1] += 1000000 * s->extra(s->ctx);
}

/* Sweeps `s`; returns the number of allocations the successful call made. */
static long sweep_at(const char *file, int line, struct swept *s)
{
    long n = 0;
    for (;; n++) {
        if (s->prepare)
            s->prepare(s->ctx);
        struct state before, after;
        state_read(s, &before);
        tack_test_fail_allocation(n);
        tack_status st = s->call(s->ctx);
        int failed = tack_test_allocation_failed();
        tack_test_fail_allocation(-1);
        if (st != TACK_OK) {
            state_read(s, &after);
            int wrong = (st != TACK_ENOMEM && st != s->want) || !tack_last_error()[0];
            if (failed && (wrong || memcmp(&before, &after, sizeof before))) {
                fprintf(stderr,
                        "%s:%d: %s with allocation %ld failing: %s (%s); arrays %ld->%ld buffers %ld->%ld "
                        "exports %ld->%ld descriptors %d->%d refs %ld,%ld,%ld,%ld -> %ld,%ld,%ld,%ld\n",
                        file, line, s->name, n, tack_status_name(st), tack_last_error(), before.live[0],
                        after.live[0], before.live[1], after.live[1], before.live[2], after.live[2], before.fds,
                        after.fds, before.refs[0], before.refs[1], before.refs[2], before.refs[3], after.refs[0],
                        after.refs[1], after.refs[2], after.refs[3]);
                check_failures++;
            }
        }
        if (s->undo)
            s->undo(s->ctx, st);
        /* A success that no failure reached: the sweep is complete. A
         * success despite one is an allocation the call can do without. */
        if (!failed) {
            if (st != s->want) {
                fprintf(stderr, "%s:%d: %s returned %s with no allocation failing (%s)\n", file, line, s->name,
                        tack_status_name(st), tack_last_error());
                check_failures++;
            }
            break;
        }
        if (n > 100000) {
            fprintf(stderr, "%s:%d: %s: no end to its allocations\n", file, line, s->name);
            check_failures++;
            break;
        }
    }
    printf("%s: %ld allocations swept\n", s->name, n);
    return n;
}
#define SWEEP(s) sweep_at(__FILE__, __LINE__, (s))

static tack_device *cpu(void)
{
    tack_device *d = NULL;
    CHECK_OK(tack_device_open("cpu", NULL, 0, &d));
    return d;
}

/* ---- devices, buffers, arrays -------------------------------------------- */

struct open_ctx {
    const char *name;
    tack_device *out;
};

static tack_status call_open(void *p)
{
    struct open_ctx *c = p;
    c->out = UNTOUCHED;
    tack_status st = tack_device_open(c->name, NULL, 0, &c->out);
    if (st != TACK_OK && c->out != UNTOUCHED)
        return TACK_EBUFFER; /* reported as a wrong status */
    return st;
}

static void undo_open(void *p, tack_status st)
{
    struct open_ctx *c = p;
    if (st == TACK_OK)
        tack_device_release(c->out);
}

static void test_device_open(void)
{
    struct open_ctx c = {"cpu", NULL};
    struct swept s = {"tack_device_open(cpu)", NULL, call_open, undo_open, &c, {0}, NULL};
    SWEEP(&s);
}

/* Arrays and buffers on one device. */
struct array_ctx {
    tack_device *device;
    tack_array *array;  /* prepared */
    tack_buffer *buffer;
    void *out;
    int exportable;
    long released;
    float memory[64];
};

/* What a call gave, kept in *slot for its undo; a failed call that wrote
 * its result anyway is TACK_EBUFFER, reported as a wrong status. */
static tack_status finish(void **slot, tack_status st, void *out)
{
    if (st != TACK_OK && out != UNTOUCHED)
        return TACK_EBUFFER;
    *slot = out;
    return st;
}

static tack_status call_buffer_alloc(void *p)
{
    struct array_ctx *c = p;
    tack_buffer *b = UNTOUCHED;
    tack_status st = tack_buffer_alloc(c->device, 256, c->exportable, &b);
    return finish(&c->out, st, b);
}

static void undo_buffer(void *p, tack_status st)
{
    struct array_ctx *c = p;
    if (st == TACK_OK)
        tack_buffer_release(c->out);
}

static tack_status call_empty(void *p)
{
    struct array_ctx *c = p;
    int64_t shape[2] = {3, 4};
    tack_array *a = UNTOUCHED;
    tack_status st = tack_array_empty(c->device, TACK_F32, 2, shape, c->exportable, &a);
    return finish(&c->out, st, a);
}

static void undo_array(void *p, tack_status st)
{
    struct array_ctx *c = p;
    if (st == TACK_OK)
        tack_array_release(c->out);
}

static void test_alloc_and_empty(void)
{
    struct array_ctx c = {.device = cpu()};
    struct swept s = {"tack_buffer_alloc", NULL, call_buffer_alloc, undo_buffer, &c, {0}, NULL};
    SWEEP(&s);
    c.exportable = 1;
    s.name = "tack_buffer_alloc(exportable)";
    SWEEP(&s);
    struct swept e = {"tack_array_empty", NULL, call_empty, undo_array, &c, {0}, NULL};
    c.exportable = 0;
    SWEEP(&e);
    c.exportable = 1;
    e.name = "tack_array_empty(exportable)";
    SWEEP(&e);
    tack_device_release(c.device);
}

static tack_status call_from_buffer(void *p)
{
    struct array_ctx *c = p;
    int64_t shape[1] = {16};
    tack_array *a = UNTOUCHED;
    tack_status st = tack_array_from_buffer(c->buffer, TACK_I32, 1, shape, 1, &a);
    return finish(&c->out, st, a);
}

static tack_status call_reshape(void *p)
{
    struct array_ctx *c = p;
    int64_t shape[3] = {2, -1, 2};
    tack_array *a = UNTOUCHED;
    tack_status st = tack_array_reshape(c->array, 3, shape, &a);
    return finish(&c->out, st, a);
}

static tack_status call_wrap(void *p)
{
    struct array_ctx *c = p;
    int64_t shape[2] = {8, 8};
    tack_array *a = UNTOUCHED;
    tack_status st = tack_array_wrap(c->device, (uint64_t)(uintptr_t)c->memory, TACK_F32, 2, shape, 1, &a);
    return finish(&c->out, st, a);
}

static void count_release(void *p)
{
    ((struct array_ctx *)p)->released++;
}

static long released(void *p)
{
    return ((struct array_ctx *)p)->released;
}

static tack_status call_buffer_wrap(void *p)
{
    struct array_ctx *c = p;
    tack_buffer *b = UNTOUCHED;
    tack_status st = tack_buffer_wrap(c->device, c->memory, sizeof c->memory, count_release, c, &b);
    return finish(&c->out, st, b);
}

static void undo_buffer_wrap(void *p, tack_status st)
{
    struct array_ctx *c = p;
    if (st == TACK_OK) {
        long was = c->released;
        tack_buffer_release(c->out);
        CHECK(c->released == was + 1);
    }
}

static tack_status call_to_device(void *p)
{
    struct array_ctx *c = p;
    tack_array *a = UNTOUCHED;
    tack_status st = tack_array_to_device(c->array, c->device, &a);
    return finish(&c->out, st, a);
}

static void test_views_and_wraps(void)
{
    int64_t shape[1] = {12};
    struct array_ctx c = {.device = cpu()};
    CHECK_OK(tack_buffer_alloc(c.device, 64, 0, &c.buffer));
    CHECK_OK(tack_array_empty(c.device, TACK_F64, 1, shape, 0, &c.array));
    struct swept s1 = {"tack_array_from_buffer", NULL, call_from_buffer, undo_array, &c, {&c.buffer->refs}, NULL};
    SWEEP(&s1);
    struct swept s2 = {"tack_array_reshape", NULL, call_reshape, undo_array, &c,
                       {&c.array->refs, &c.array->buffer->refs}, NULL};
    SWEEP(&s2);
    struct swept s3 = {"tack_array_wrap", NULL, call_wrap, undo_array, &c, {0}, NULL};
    SWEEP(&s3);
    struct swept s4 = {"tack_buffer_wrap", NULL, call_buffer_wrap, undo_buffer_wrap, &c, {0}, released};
    SWEEP(&s4);
    struct swept s5 = {"tack_array_to_device", NULL, call_to_device, undo_array, &c, {&c.array->refs}, NULL};
    SWEEP(&s5);
    tack_array_release(c.array);
    tack_buffer_release(c.buffer);
    tack_device_release(c.device);
}

/* ---- DLPack ---------------------------------------------------------------- */

static tack_status call_to_dlpack(void *p)
{
    struct array_ctx *c = p;
    DLManagedTensor *m = UNTOUCHED;
    tack_status st = tack_array_to_dlpack(c->array, &m);
    return finish(&c->out, st, m);
}

static tack_status call_to_dlpack_versioned(void *p)
{
    struct array_ctx *c = p;
    DLManagedTensorVersioned *m = UNTOUCHED;
    tack_status st = tack_array_to_dlpack_versioned(c->array, &m);
    return finish(&c->out, st, m);
}

static void undo_tensor(void *p, tack_status st)
{
    struct array_ctx *c = p;
    if (st == TACK_OK) {
        DLManagedTensor *m = c->out;
        m->deleter(m);
    }
}

static void undo_tensor_versioned(void *p, tack_status st)
{
    struct array_ctx *c = p;
    if (st == TACK_OK) {
        DLManagedTensorVersioned *m = c->out;
        m->deleter(m);
    }
}

static tack_status call_allocate(void *p)
{
    struct array_ctx *c = p;
    int64_t shape[2] = {5, 3};
    DLTensor proto = {.data = NULL, .device = {.device_type = kDLCPU, .device_id = 0}, .ndim = 2,
                      .dtype = {.code = kDLFloat, .bits = 32, .lanes = 1}, .shape = shape, .strides = NULL,
                      .byte_offset = 0};
    DLManagedTensorVersioned *m = UNTOUCHED;
    tack_status st = tack_dlpack_allocate(&proto, &m);
    return finish(&c->out, st, m);
}

/* A producer's tensor over c->memory with a counting deleter. */
static DLManagedTensorVersioned producer;
static int64_t producer_shape[2] = {4, 16};

static void producer_deleter(DLManagedTensorVersioned *m)
{
    count_release(m->manager_ctx);
}

static tack_status call_from_dlpack(void *p)
{
    struct array_ctx *c = p;
    producer = (DLManagedTensorVersioned){
        .version = {.major = 1, .minor = 0},
        .manager_ctx = c,
        .deleter = producer_deleter,
        .dl_tensor = {.data = c->memory, .device = {.device_type = kDLCPU, .device_id = 0}, .ndim = 2,
                      .dtype = {.code = kDLFloat, .bits = 32, .lanes = 1}, .shape = producer_shape},
    };
    tack_array *a = UNTOUCHED;
    int deleted = 0;
    tack_status st = tack_array_from_dlpack_versioned(&producer, NULL, c->device, &a, &deleted);
    if (st != TACK_OK && deleted)
        return TACK_EBUFFER;
    return finish(&c->out, st, a);
}

static void undo_import(void *p, tack_status st)
{
    struct array_ctx *c = p;
    if (st == TACK_OK) {
        long was = c->released;
        tack_array_release(c->out);
        CHECK(c->released == was + 1); /* the deleter ran, once */
    }
}

static void test_dlpack(void)
{
    int64_t shape[2] = {3, 7};
    struct array_ctx c = {.device = cpu()};
    CHECK_OK(tack_array_empty(c.device, TACK_F32, 2, shape, 0, &c.array));
    struct swept s1 = {"tack_array_to_dlpack", NULL, call_to_dlpack, undo_tensor, &c, {&c.array->refs}, NULL};
    SWEEP(&s1);
    struct swept s2 = {"tack_array_to_dlpack_versioned", NULL, call_to_dlpack_versioned, undo_tensor_versioned, &c,
                       {&c.array->refs}, NULL};
    SWEEP(&s2);
    struct swept s3 = {"tack_dlpack_allocate", NULL, call_allocate, undo_tensor_versioned, &c, {0}, NULL};
    SWEEP(&s3);
    struct swept s4 = {"tack_array_from_dlpack_versioned", NULL, call_from_dlpack, undo_import, &c, {0}, released};
    SWEEP(&s4);
    tack_array_release(c.array);
    tack_device_release(c.device);
}

/* ---- memory export, import and passing -------------------------------------- */

static void prepare_exportable(void *p)
{
    struct array_ctx *c = p;
    int64_t shape[1] = {1000};
    c->array = NULL;
    CHECK_OK(tack_array_empty(c->device, TACK_F32, 1, shape, 1, &c->array));
}

static tack_exported_memory exported;

static tack_status call_export(void *p)
{
    struct array_ctx *c = p;
    memset(&exported, 0, sizeof exported);
    tack_status st = tack_array_export_memory(c->array, &exported);
    return finish(&c->out, st, UNTOUCHED);
}

static void undo_prepared(void *p, tack_status st)
{
    (void)st;
    struct array_ctx *c = p;
    tack_array_release(c->array);
}

static void prepare_exported(void *p)
{
    struct array_ctx *c = p;
    prepare_exportable(p);
    CHECK_OK(tack_array_export_memory(c->array, &exported));
}

static tack_status call_import(void *p)
{
    struct array_ctx *c = p;
    int64_t shape[2] = {10, 100};
    tack_array *a = UNTOUCHED;
    tack_status st = tack_array_import_memory(c->device, &exported, TACK_F32, 2, shape, &a);
    return finish(&c->out, st, a);
}

static void undo_import_memory(void *p, tack_status st)
{
    struct array_ctx *c = p;
    if (st == TACK_OK)
        tack_array_release(c->out);
    tack_array_release(c->array);
}

static int sockets[2] = {-1, -1};

static void prepare_sockets(void *p)
{
    prepare_exportable(p);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) == 0);
}

static tack_status call_send(void *p)
{
    struct array_ctx *c = p;
    tack_status st = tack_array_send(sockets[0], c->array);
    return finish(&c->out, st, UNTOUCHED);
}

static void undo_sockets(void *p, tack_status st)
{
    undo_import_memory(p, st);
    close(sockets[0]);
    close(sockets[1]);
}

static void undo_send(void *p, tack_status st)
{
    (void)st;
    struct array_ctx *c = p;
    c->out = NULL;
    undo_sockets(p, TACK_ERUNTIME);
}

static void prepare_sent(void *p)
{
    struct array_ctx *c = p;
    prepare_sockets(p);
    CHECK_OK(tack_array_send(sockets[0], c->array));
}

static tack_status call_receive(void *p)
{
    struct array_ctx *c = p;
    tack_array *a = UNTOUCHED;
    tack_status st = tack_array_receive(sockets[1], c->device, &a);
    return finish(&c->out, st, a);
}

static void test_export_import(void)
{
    struct array_ctx c = {.device = cpu()};
    struct swept s1 = {"tack_array_export_memory", prepare_exportable, call_export, undo_prepared, &c, {0}, NULL};
    SWEEP(&s1);
    struct swept s2 = {"tack_array_import_memory", prepare_exported, call_import, undo_import_memory, &c, {0}, NULL};
    SWEEP(&s2);
    struct swept s3 = {"tack_array_send", prepare_sockets, call_send, undo_send, &c, {0}, NULL};
    SWEEP(&s3);
    /* A failed receive has taken its message off the socket (that is the
     * call's contract): what it must not do is keep a descriptor or an
     * array. */
    struct swept s4 = {"tack_array_receive", prepare_sent, call_receive, undo_sockets, &c, {0}, NULL};
    SWEEP(&s4);
    tack_device_release(c.device);
}

/* ---- kernels ------------------------------------------------------------------ */

struct kernel_ctx {
    tack_device *device;
    tack_kernel *kernel; /* prepared */
    void *out;
    tack_array *x, *y;
};

static tack_status call_create(void *p)
{
    struct kernel_ctx *c = p;
    tack_kernel *k = UNTOUCHED;
    tack_status st = tack_kernel_create(saxpy_source, NULL, &k);
    return finish(&c->out, st, k);
}

static void undo_kernel(void *p, tack_status st)
{
    struct kernel_ctx *c = p;
    if (st == TACK_OK)
        tack_kernel_release(c->out);
}

static tack_status call_compile(void *p)
{
    struct kernel_ctx *c = p;
    tack_kernel *k = UNTOUCHED;
    tack_status st = tack_kernel_compile(saxpy_source, NULL, c->device, &k);
    return finish(&c->out, st, k);
}

static void prepare_kernel(void *p)
{
    struct kernel_ctx *c = p;
    c->kernel = NULL;
    CHECK_OK(tack_kernel_create(saxpy_source, NULL, &c->kernel));
}

static void undo_prepared_kernel(void *p, tack_status st)
{
    (void)st;
    struct kernel_ctx *c = p;
    tack_kernel_release(c->kernel);
}

static tack_status call_build(void *p)
{
    struct kernel_ctx *c = p;
    return tack_kernel_build(c->kernel, c->device);
}

static tack_status call_launch(void *p)
{
    struct kernel_ctx *c = p;
    tack_arg args[3] = {tack_arg_f32(2.0f), tack_arg_array(c->x), tack_arg_array(c->y)};
    return tack_kernel_launch(c->kernel, c->device, 100, args, 3);
}

static tack_status call_generated(void *p)
{
    struct kernel_ctx *c = p;
    const char *text = UNTOUCHED;
    tack_status st = tack_kernel_generated_source(c->kernel, "cpu", &text);
    if (st != TACK_OK && text != UNTOUCHED)
        return TACK_EBUFFER;
    return st;
}

static const char broken_source[] = "#error no such thing\nvoid f(tack_index i, float *y) { y[i] = 0; }\n";

static tack_status call_compile_broken(void *p)
{
    struct kernel_ctx *c = p;
    tack_kernel *k = UNTOUCHED;
    tack_status st = tack_kernel_compile(broken_source, NULL, c->device, &k);
    return finish(&c->out, st, k);
}

static void test_kernels(void)
{
    char dir[] = "/tmp/tack-enomem-XXXXXX";
    if (!cache_dir_set(dir)) {
        CHECK(!"a cache directory");
        return;
    }
    struct kernel_ctx c = {.device = cpu()};
    int64_t n = 100;
    CHECK_OK(tack_array_empty(c.device, TACK_F32, 1, &n, 0, &c.x));
    CHECK_OK(tack_array_empty(c.device, TACK_F32, 1, &n, 0, &c.y));
    struct swept s1 = {"tack_kernel_create", NULL, call_create, undo_kernel, &c, {0}, NULL};
    SWEEP(&s1);
    struct swept s2 = {"tack_kernel_generated_source", prepare_kernel, call_generated, undo_prepared_kernel, &c,
                       {0}, NULL};
    SWEEP(&s2);
    /* A cold cache: the compiler runs (until a success stores the object). */
    struct swept s3 = {"tack_kernel_build", prepare_kernel, call_build, undo_prepared_kernel, &c, {0}, NULL};
    SWEEP(&s3);
    /* Then the warm path: the object is loaded from the cache. */
    s3.name = "tack_kernel_build(cached)";
    SWEEP(&s3);
    struct swept s4 = {"tack_kernel_compile", NULL, call_compile, undo_kernel, &c, {0}, NULL};
    SWEEP(&s4);
    /* A source that does not compile: the compiler's log is kept. */
    struct swept s6 = {"tack_kernel_compile(error)", NULL, call_compile_broken, undo_kernel, &c, {0}, NULL,
                       TACK_ECOMPILE};
    SWEEP(&s6);
    CHECK_OK(tack_kernel_create(saxpy_source, NULL, &c.kernel));
    struct swept s5 = {"tack_kernel_launch", NULL, call_launch, NULL, &c,
                       {&c.x->refs, &c.y->refs, &c.kernel->refs}, NULL};
    SWEEP(&s5);
    tack_kernel_release(c.kernel);
    tack_array_release(c.x);
    tack_array_release(c.y);
    tack_device_release(c.device);
    remove_tree(dir);
}

/* ---- the GPU backends, on their simulated drivers ----------------------------- */

static tack_status call_fill(void *p)
{
    struct array_ctx *c = p;
    float one = 1.0f;
    return tack_array_fill(c->array, &one);
}

static void sweep_backend(const char *name, int kernels)
{
    struct open_ctx o = {name, NULL};
    struct swept s1 = {"tack_device_open", NULL, call_open, undo_open, &o, {0}, NULL};
    printf("%s: ", name);
    SWEEP(&s1);
    struct array_ctx c = {0};
    if (tack_device_open(name, NULL, 0, &c.device) != TACK_OK) {
        fprintf(stderr, "%s: %s\n", name, tack_last_error());
        check_failures++;
        return;
    }
    struct swept s2 = {"tack_array_empty", NULL, call_empty, undo_array, &c, {0}, NULL};
    printf("%s: ", name);
    SWEEP(&s2);
    c.exportable = 1;
    printf("%s: ", name);
    s2.name = "tack_array_empty(exportable)";
    SWEEP(&s2);
    int64_t shape[2] = {3, 7};
    tack_device *host = cpu();
    CHECK_OK(tack_array_empty(host, TACK_F32, 2, shape, 0, &c.array));
    struct swept s3 = {"tack_array_to_device", NULL, call_to_device, undo_array, &c, {&c.array->refs}, NULL};
    printf("%s: ", name);
    SWEEP(&s3);
    tack_array_release(c.array);
    CHECK_OK(tack_array_empty(c.device, TACK_F32, 2, shape, 0, &c.array));
    struct swept s9 = {"tack_array_fill", NULL, call_fill, NULL, &c, {&c.array->refs}, NULL};
    printf("%s: ", name);
    SWEEP(&s9);
    struct swept s4 = {"tack_array_to_dlpack_versioned", NULL, call_to_dlpack_versioned, undo_tensor_versioned,
                       &c, {&c.array->refs}, NULL};
    printf("%s: ", name);
    SWEEP(&s4);
    tack_array_release(c.array);
    c.array = NULL;
    struct swept s5 = {"tack_array_export_memory", prepare_exportable, call_export, undo_prepared, &c, {0}, NULL};
    prepare_exportable(&c);
    memset(&exported, 0, sizeof exported);
    int exports = tack_array_export_memory(c.array, &exported) == TACK_OK;
    tack_array_release(c.array);
    if (exports) {
        printf("%s: ", name);
        SWEEP(&s5);
        struct swept s6 = {"tack_array_import_memory", prepare_exported, call_import, undo_import_memory, &c, {0},
                           NULL};
        printf("%s: ", name);
        SWEEP(&s6);
    }
    if (kernels) {
        char dir[] = "/tmp/tack-enomem-XXXXXX";
        CHECK(cache_dir_set(dir));
        struct kernel_ctx k = {.device = c.device};
        struct swept s7 = {"tack_kernel_build", prepare_kernel, call_build, undo_prepared_kernel, &k, {0}, NULL};
        printf("%s: ", name);
        SWEEP(&s7);
        s7.name = "tack_kernel_build(cached)";
        printf("%s: ", name);
        SWEEP(&s7);
        CHECK_OK(tack_array_empty(c.device, TACK_F32, 1, shape, 0, &k.x));
        CHECK_OK(tack_array_empty(c.device, TACK_F32, 1, shape, 0, &k.y));
        CHECK_OK(tack_kernel_create(saxpy_source, NULL, &k.kernel));
        struct swept s8 = {"tack_kernel_launch", NULL, call_launch, NULL, &k, {&k.x->refs, &k.y->refs, &k.kernel->refs},
                           NULL};
        printf("%s: ", name);
        SWEEP(&s8);
        tack_kernel_release(k.kernel);
        tack_array_release(k.x);
        tack_array_release(k.y);
        CHECK_OK(tack_device_synchronize(c.device));
        remove_tree(dir);
    }
    tack_device_release(c.device);
    tack_device_release(host);
}

static void test_cuda(void)
{
    sweep_backend("cuda", 0);
}

static void test_level_zero(void)
{
    sweep_backend("level_zero", 1);
}

static void test_hip(void)
{
    sweep_backend("hip", 1);
}

/* ---- reports -------------------------------------------------------------------- */

static tack_backend_report report;

static tack_status call_describe(void *p)
{
    (void)p;
    return tack_backend_describe("cpu", &report);
}

static void test_describe(void)
{
    struct swept s = {"tack_backend_describe(cpu)", NULL, call_describe, NULL, NULL, {0}, NULL};
    SWEEP(&s);
}

/* The hook itself: armed, it fails the allocation it was told to. */
static void test_the_hook_fails_allocations(void)
{
    tack_device *d = cpu();
    int64_t n = 4;
    tack_array *a = UNTOUCHED;
    tack_test_fail_allocation(0);
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 1, &n, 0, &a), TACK_ENOMEM);
    CHECK(tack_test_allocation_failed() && tack_test_allocations() >= 1);
    tack_test_fail_allocation(-1);
    CHECK(a == UNTOUCHED);
    CHECK_OK(tack_array_empty(d, TACK_F32, 1, &n, 0, &a));
    tack_array_release(a);
    tack_device_release(d);
}

int main(void)
{
    check_each_leaves_nothing();
    RUN(test_the_hook_fails_allocations);
    RUN(test_device_open);
    RUN(test_alloc_and_empty);
    RUN(test_views_and_wraps);
    RUN(test_dlpack);
    RUN(test_export_import);
    RUN(test_kernels);
    RUN(test_describe);
    RUN(test_cuda);
    RUN(test_level_zero);
    RUN(test_hip);
    CHECK_DONE();
}
