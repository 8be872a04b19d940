/* The C error contract in a user's program: a call that returns a
 * tack_status and succeeds leaves tack_last_error() "", whatever an earlier
 * call left there, and a call that cannot fail leaves the message as it
 * was (so that cleanup after a failure keeps it). Every public function of
 * include/tack/ is called here on its success path, each after a failure
 * that left a message. */
#include <stdint.h>
#include <sys/socket.h>

#include "check.h"
#include "kernels.h"

/* A failure, so that the call checked next finds a message to clear. */
static void fail_first(void)
{
    tack_device *d = NULL;
    (void)tack_device_open("no-such-backend", NULL, 0, &d);
}

/* `expr` succeeds after a failure, and leaves no message behind. */
#define CLEAN(expr) clean_at(__FILE__, __LINE__, #expr, (fail_first(), (expr)))
static void clean_at(const char *file, int line, const char *text, tack_status st)
{
    if (st != TACK_OK) {
        fprintf(stderr, "%s:%d: %s returned %s: %s\n", file, line, text, tack_status_name(st), tack_last_error());
        check_failures++;
    } else if (tack_last_error()[0]) {
        fprintf(stderr, "%s:%d: %s succeeded and left the message \"%s\"\n", file, line, text, tack_last_error());
        check_failures++;
    }
}

static tack_device *cpu(void)
{
    tack_device *d = NULL;
    CHECK_OK(tack_device_open("cpu", NULL, 0, &d));
    return d;
}

static tack_array *vector(tack_device *d, int exportable)
{
    int64_t n = 4;
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(d, TACK_F32, 1, &n, exportable, &a));
    return a;
}

static void test_device_calls(void)
{
    tack_device *d = NULL, *again = NULL;
    CLEAN(tack_device_open("cpu", NULL, 0, &d));
    DLDevice host = {kDLCPU, 0};
    CLEAN(tack_device_for_dlpack(host, &again));
    CLEAN(tack_device_check_options("cpu", NULL, 0));
    CLEAN(tack_device_synchronize(d));
    CLEAN(tack_device_wait_stream(d, 1));
    float x = 0;
    const char *space = NULL;
    CLEAN(tack_memory_space((uint64_t)(uintptr_t)&x, &space));
    tack_device_release(again);
    tack_device_release(d);
}

static void test_buffer_calls(void)
{
    tack_device *d = cpu();
    tack_buffer *b = NULL, *w = NULL;
    static float host[4];
    CLEAN(tack_buffer_alloc(d, 64, 0, &b));
    CLEAN(tack_buffer_wrap(d, host, sizeof host, NULL, NULL, &w));
    CLEAN(tack_buffer_share(b));
    CLEAN(tack_buffer_share_with_stream(w, -1));
    tack_buffer_release(w);
    tack_buffer_release(b);
    tack_device_release(d);
}

static void test_array_calls(void)
{
    tack_device *d = cpu();
    int64_t n = 4, two[2] = {2, 2};
    size_t nbytes = 0;
    tack_array *a = NULL, *r = NULL, *f = NULL, *w = NULL, *c = NULL;
    float host[4] = {1, 2, 3, 4}, back[4], seven = 7;
    CLEAN(tack_array_check_shape(TACK_F32, 1, &n, &nbytes));
    CLEAN(tack_array_empty(d, TACK_F32, 1, &n, 1, &a));
    CLEAN(tack_array_reshape(a, 2, two, &r));
    CLEAN(tack_array_from_buffer(tack_array_buffer(a), TACK_F32, 1, &n, 1, &f));
    CLEAN(tack_array_wrap(d, (uint64_t)(uintptr_t)host, TACK_F32, 1, &n, 1, &w));
    CLEAN(tack_array_copy_from_host(a, host, sizeof host));
    CLEAN(tack_array_copy_to_host(a, back, sizeof back));
    CLEAN(tack_array_fill(a, &seven));
    CLEAN(tack_array_to_device(a, d, &c));
    tack_exported_memory e;
    tack_array *imported = NULL;
    CLEAN(tack_array_export_memory(a, &e));
    CLEAN(tack_array_import_memory(d, &e, TACK_F32, 1, &n, &imported));
    tack_array_release(imported);
    tack_array_release(c);
    tack_array_release(w);
    tack_array_release(f);
    tack_array_release(r);
    tack_array_release(a);
    tack_device_release(d);
}

static void test_ipc_calls(void)
{
    tack_device *d = cpu();
    tack_array *a = vector(d, 1), *got = NULL, *got2 = NULL;
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    CLEAN(tack_array_send(sv[0], a));
    CLEAN(tack_array_receive(sv[1], d, &got));
    tack_ipc_wait wait = {.timeout_ms = 10000};
    CLEAN(tack_array_send_wait(sv[0], a, &wait));
    CLEAN(tack_array_receive_wait(sv[1], d, &wait, &got2));
    close(sv[0]);
    close(sv[1]);
    tack_array_release(got2);
    tack_array_release(got);
    tack_array_release(a);
    tack_device_release(d);
}

static void test_dtype_calls(void)
{
    tack_dtype t;
    uint8_t code, bits;
    char typestr[16];
    CLEAN(tack_dtype_from_name("float32", &t));
    CLEAN(tack_dtype_from_dlpack(kDLFloat, 32, 1, &t));
    CLEAN(tack_dtype_to_dlpack(TACK_F32, &code, &bits));
    CLEAN(tack_dtype_typestr(TACK_F32, typestr, sizeof typestr));
    CLEAN(tack_dtype_from_typestr("<f4", &t));
    CLEAN(tack_dtype_from_format("f", 4, &t));
}

static void test_dlpack_calls(void)
{
    tack_device *d = cpu();
    tack_array *a = vector(d, 0), *in = NULL, *in2 = NULL;
    DLManagedTensor *m = NULL, *ms = NULL;
    DLManagedTensorVersioned *v = NULL, *vs = NULL, *made = NULL;
    CLEAN(tack_array_to_dlpack(a, &m));
    CLEAN(tack_array_to_dlpack_versioned(a, &v));
    CLEAN(tack_array_to_dlpack_stream(a, -1, &ms));
    CLEAN(tack_array_to_dlpack_versioned_stream(a, -1, &vs));
    CLEAN(tack_array_from_dlpack(m, NULL, NULL, &in));
    int deleter_called = 0;
    CLEAN(tack_array_from_dlpack_versioned(v, NULL, NULL, &in2, &deleter_called));
    DLTensor t;
    CLEAN(tack_array_to_dltensor(a, &t));
    CLEAN(tack_dlpack_allocate(&t, &made));
    uint64_t stream = 1;
    DLDevice host = {kDLCPU, 0};
    CLEAN(tack_dlpack_work_stream(host, &stream));
    made->deleter(made);
    ms->deleter(ms);
    vs->deleter(vs);
    tack_array_release(in2);
    tack_array_release(in);
    tack_array_release(a);
    tack_device_release(d);
}

static void test_import_calls(void)
{
    tack_device *d = cpu();
    static float host[4];
    int64_t n = 4;
    struct tack_import im = {.what = "the buffer", .data = host, .device = {kDLCPU, 0}, .dtype = TACK_F32,
                             .ndim = 1, .shape = &n, .max_bytes = sizeof host, .writable = 1};
    tack_array *a = NULL;
    CLEAN(tack_import_array(&im, d, NULL, &a));
    tack_array_release(a);
    tack_device_release(d);
}

static const char *const SOURCE = "void fill(tack_index i, float v, float *y) { y[i] = v; }";

/* A fresh cache, so that the first compile finds nothing there: the
 * store's miss is not a failure of the call. */
static void fresh_cache(void)
{
    static char dir[] = "/tmp/tack-last-error-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    setenv("TACK_CACHE_DIR", dir, 1);
}

static void test_kernel_calls(void)
{
    tack_device *d = cpu();
    tack_kernel *k = NULL, *kw = NULL, *kc = NULL;
    tack_array *y = vector(d, 0);
    /* Compiled first, into the fresh cache. */
    CLEAN(tack_kernel_compile(SOURCE, "fill", d, &kc));
    CLEAN(tack_kernel_create(SOURCE, NULL, &k));
    const char *defines[] = {"UNUSED=1"};
    tack_kernel_options o = {.defines = defines, .ndefines = 1};
    CLEAN(tack_kernel_create_with(SOURCE, "fill", &o, &kw));
    CLEAN(tack_kernel_build(kw, d));
    const char *target = NULL, *generated = NULL;
    CLEAN(tack_kernel_target(k, d, &target));
    tack_arg args[2] = {tack_arg_f32(2), tack_arg_array(y)};
    int64_t shape = 4;
    CLEAN(tack_kernel_launch(k, d, 4, args, 2));
    CLEAN(tack_kernel_launch_nd(k, d, 1, &shape, args, 2));
    CLEAN(tack_kernel_call(k, args, 2));
    CLEAN(tack_kernel_launch_hooked(k, d, 1, &shape, args, 2, NULL));
    CLEAN(tack_kernel_call_hooked(k, args, 2, NULL));
    tack_kernel_param p;
    CLEAN(tack_kernel_param_info(k, 0, &p));
    CLEAN(tack_kernel_generated_source(k, "cpu", &generated));
    /* PTX needs NVRTC, which a machine may lack: checked where it works. */
    const char *ptx = NULL;
    size_t size = 0;
    fail_first();
    if (tack_kernel_ptx(k, NULL, &ptx, &size) == TACK_OK)
        CHECK(tack_last_error()[0] == 0);
    tack_kernel_release(kc);
    tack_kernel_release(kw);
    tack_kernel_release(k);
    tack_array_release(y);
    tack_device_release(d);
}

/* The same on the CUDA backend (the simulated driver, which
 * TACK_CUDA_LIBRARY names): a GPU device's queue, its memory, its
 * kernels where NVRTC is found. */
static void test_cuda_calls(void)
{
    tack_device *d = NULL, *host = cpu();
    CLEAN(tack_device_open("cuda", NULL, 0, &d));
    if (!d)
        return;
    int64_t n = 4;
    float ones[4] = {1, 1, 1, 1}, back[4], two = 2;
    tack_array *a = NULL, *h = vector(host, 0), *moved = NULL;
    CLEAN(tack_array_empty(d, TACK_F32, 1, &n, 0, &a));
    CLEAN(tack_array_copy_from_host(a, ones, sizeof ones));
    CLEAN(tack_array_fill(a, &two));
    CLEAN(tack_array_copy_to_host(a, back, sizeof back));
    CLEAN(tack_array_to_device(h, d, &moved));
    const char *space = NULL;
    CLEAN(tack_memory_space((uint64_t)(uintptr_t)tack_array_data(a), &space));
    CLEAN(tack_buffer_share_with_stream(tack_array_buffer(a), 1));
    CLEAN(tack_device_wait_stream(d, 2));
    DLManagedTensor *m = NULL;
    CLEAN(tack_array_to_dlpack_stream(a, 1, &m));
    m->deleter(m);
    CLEAN(tack_device_synchronize(d));
    find_venv_nvrtc();
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create(SOURCE, NULL, &k));
    const char *ptx = NULL;
    size_t size = 0;
    if (k && tack_kernel_ptx(k, NULL, &ptx, &size) == TACK_OK) {
        tack_arg args[2] = {tack_arg_f32(3), tack_arg_array(a)};
        CLEAN(tack_kernel_build(k, d));
        CLEAN(tack_kernel_launch(k, d, 4, args, 2));
        CLEAN(tack_kernel_ptx(k, NULL, &ptx, &size));
    } else {
        printf("no NVRTC here: the CUDA kernel calls are not checked\n");
    }
    tack_kernel_release(k);
    tack_array_release(moved);
    tack_array_release(h);
    tack_array_release(a);
    tack_device_release(d);
    tack_device_release(host);
}

static void test_report_calls(void)
{
    tack_backend_report r;
    char dir[4096];
    CLEAN(tack_backend_describe("cpu", &r));
    CLEAN(tack_kernel_cache_dir(dir, sizeof dir));
}

/* Calls that cannot fail keep the message of the failure before them. */
static void test_calls_that_cannot_fail_keep_the_message(void)
{
    tack_device *d = cpu();
    tack_array *a = vector(d, 0);
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create(SOURCE, NULL, &k));
    fail_first();
    char before[1024];
    snprintf(before, sizeof before, "%s", tack_last_error());
    CHECK(before[0] != 0);
    tack_array_release(tack_array_retain(a));
    tack_buffer_release(tack_buffer_retain(tack_array_buffer(a)));
    tack_device_release(tack_device_retain(d));
    tack_kernel_release(tack_kernel_retain(k));
    (void)tack_array_dtype(a);
    (void)tack_array_ndim(a);
    (void)tack_array_shape(a);
    (void)tack_array_size(a);
    (void)tack_array_nbytes(a);
    (void)tack_array_writable(a);
    (void)tack_array_data(a);
    (void)tack_array_device(a);
    (void)tack_array_live_count();
    (void)tack_buffer_data(tack_array_buffer(a));
    (void)tack_buffer_size(tack_array_buffer(a));
    (void)tack_buffer_device(tack_array_buffer(a));
    (void)tack_buffer_is_owned(tack_array_buffer(a));
    (void)tack_buffer_is_shared(tack_array_buffer(a));
    (void)tack_buffer_live_count();
    (void)tack_device_backend(d);
    (void)tack_device_ordinal(d);
    (void)tack_device_name(d);
    (void)tack_device_dl_device(d);
    (void)tack_device_memory_domain(d);
    (void)tack_device_shares_external_context(d);
    (void)tack_device_context_handle(d);
    (void)tack_device_stream_handle(d);
    (void)tack_device_can_wrap(d, (DLDevice){kDLCPU, 0});
    (void)tack_backend_options("cpu");
    (void)tack_dtype_size(TACK_F32);
    (void)tack_dtype_name(TACK_F32);
    (void)tack_dtype_short_name(TACK_F32);
    (void)tack_dtype_c_type(TACK_F32);
    (void)tack_dtype_kind(TACK_F32);
    (void)tack_dtype_format(TACK_F32);
    (void)tack_float16_to_double(tack_float16_from_double(1.5));
    (void)tack_bfloat16_to_double(tack_bfloat16_from_double(1.5));
    (void)tack_dlpack_live_exports();
    (void)tack_dlpack_consumer_stream((DLDevice){kDLCPU, 0}, d, NULL);
    (void)tack_kernel_name(k);
    (void)tack_kernel_source(k);
    (void)tack_kernel_index_name(k);
    (void)tack_kernel_ndim(k);
    (void)tack_kernel_dim_name(k, 0);
    (void)tack_kernel_num_params(k);
    (void)tack_kernel_first_writable(k);
    (void)tack_kernel_compile_log();
    (void)tack_kernel_expected_ns(k, d, 4);
    (void)tack_kernel_num_threads();
    tack_kernel_atomic_runs(NULL, NULL, NULL);
    tack_kernel_set_interrupt(NULL, NULL);
    (void)tack_backend_names();
    (void)tack_version();
    (void)tack_version_number();
    (void)tack_status_name(TACK_EVALUE);
    CHECK(!strcmp(tack_last_error(), before));
    tack_kernel_release(k);
    tack_array_release(a);
    tack_device_release(d);
}

int main(void)
{
    check_each_leaves_nothing();
    RUN(test_device_calls);
    RUN(test_buffer_calls);
    RUN(test_array_calls);
    RUN(test_ipc_calls);
    RUN(test_dtype_calls);
    RUN(test_dlpack_calls);
    RUN(test_import_calls);
    RUN_AFTER(fresh_cache, test_kernel_calls);
    RUN_AFTER(fresh_cache, test_cuda_calls);
    RUN(test_report_calls);
    RUN(test_calls_that_cannot_fail_keep_the_message);
    CHECK_DONE();
}
