/* Bad input at every fallible C entry point: NULL pointers where an object
 * or an out-parameter is needed, out-of-range values, sizes that overflow.
 * Each call must return the documented status with a message, and change
 * nothing: no object made or lost, *out untouched.
 *
 * Each call runs first in a child process, so that a crash is reported as
 * one failed check instead of ending the file; only a call that survives
 * there is repeated here, where its effect on the live counters and on
 * *out is checked. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "tack/kernel.h"
#include "tack/tack.h"

/* A request for absurd sizes must come back as TACK_ENOMEM, not stop the
 * process: AddressSanitizer's allocator aborts on one unless told not to. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* Known defects, named by the call's source text: such a check reports
 * "known defect" instead of failing, and fails once the defect is gone, so
 * that the entry is removed here (as a strict expected failure would). */
static const char *const known[] = {
    NULL,
};

static int is_known(const char *call)
{
    for (int i = 0; known[i]; i++)
        if (!strcmp(known[i], call))
            return 1;
    return 0;
}

/* Whether `message` begins with the name of the call `text` makes
 * ("tack_array_reshape(e->a, ...)" -> "tack_array_reshape: "), as every
 * message of a public call must, so that a C user reading it knows which of
 * the calls in a statement failed. */
static int names_its_call(const char *text, const char *message)
{
    size_t n = strcspn(text, "(");
    return !strncmp(message, text, n) && !strncmp(message + n, ": ", 2) && message[n + 2];
}

static long counts[3];

struct call {
    tack_status (*fn)(void *);
    void *ctx;
    tack_status want;
    int quiet;
};

/* Exits 0 when the call returned `want` with a message, 10 + the status
 * otherwise; exit statuses below 10 are a sanitizer's or Tack's own. */
static void call_in_child(void *p)
{
    const struct call *c = p;
    if (c->quiet && !freopen("/dev/null", "w", stderr))
        _exit(3);
    tack_status st = c->fn(c->ctx);
    _exit(st == c->want && tack_last_error()[0] ? 0 : 10 + (int)st);
}

static void refused(const char *file, int line, const char *text, tack_status (*call)(void *), void *ctx,
                    tack_status want)
{
    int known_defect = is_known(text);
    struct call c = {call, ctx, want, known_defect};
    /* A third of a case's limit: a call that hangs is named before the
     * case around it is killed. */
    double timeout = check_timeout() / 3;
    int detail = 0;
    enum check_end end = check_in_child(call_in_child, &c, timeout, &detail);
    if (end != CHECK_EXITED || detail != 0) {
        if (known_defect) {
            printf("known defect: %s\n", text);
            return;
        }
        if (end == CHECK_SIGNALLED)
            fprintf(stderr, "%s:%d: %s crashed (signal %d); expected %s\n", file, line, text, detail,
                    tack_status_name(want));
        else if (end == CHECK_TIMED_OUT)
            fprintf(stderr, "%s:%d: %s did not return within %g s; expected %s\n", file, line, text, timeout,
                    tack_status_name(want));
        else if (end == CHECK_NO_CHILD)
            fprintf(stderr, "%s:%d: %s could not run in a child: %s\n", file, line, text, strerror(detail));
        else if (detail < 10 || detail > 10 + TACK_ENOMEM)
            fprintf(stderr, "%s:%d: %s ended the process (exit status %d, a sanitizer report above?); expected %s\n",
                    file, line, text, detail, tack_status_name(want));
        else if (detail == 10 + TACK_OK)
            fprintf(stderr, "%s:%d: %s succeeded; expected %s\n", file, line, text, tack_status_name(want));
        else
            fprintf(stderr, "%s:%d: %s returned %s (or no message); expected %s\n", file, line, text,
                    tack_status_name((tack_status)(detail - 10)), tack_status_name(want));
        check_failures++;
        return;
    }
    if (known_defect) {
        fprintf(stderr, "%s:%d: %s now behaves: remove it from the known defects\n", file, line, text);
        check_failures++;
        return;
    }
    long before[3], after[3];
    check_live_counts(before);
    tack_status st = call(ctx);
    check_live_counts(after);
    if (st != want) {
        fprintf(stderr, "%s:%d: %s returned %s here but %s in a child\n", file, line, text, tack_status_name(st),
                tack_status_name(want));
        check_failures++;
    }
    if (!names_its_call(text, tack_last_error())) {
        fprintf(stderr, "%s:%d: %s: the message does not begin with the call's name: \"%s\"\n", file, line, text,
                tack_last_error());
        check_failures++;
    }
    if (memcmp(before, after, sizeof before)) {
        fprintf(stderr, "%s:%d: %s changed the live counts (arrays %ld->%ld, buffers %ld->%ld, exports %ld->%ld)\n",
                file, line, text, before[0], after[0], before[1], after[1], before[2], after[2]);
        check_failures++;
    }
}

/* Everything the calls below use; filled once. */
struct env {
    tack_device *cpu;
    tack_array *a;    /* f32 (4,), writable */
    tack_array *ro;   /* f32 (4,), read-only, over a's memory */
    tack_kernel *k;   /* void f(tack_index i, float *x) */
    tack_buffer *buf; /* a's buffer */
    /* out-parameters, preset to a sentinel and checked untouched */
    tack_device *dv;
    tack_buffer *bo;
    tack_array *ao;
    tack_kernel *ko;
    DLManagedTensor *m;
    DLManagedTensorVersioned *mv;
    tack_dtype dt;
    uint8_t code, bits;
    const char *text;
    size_t size;
    tack_exported_memory em;
    tack_kernel_param kp;
    DLTensor view;
    uint64_t u64;
    char typestr[8];
    /* inputs refused on their content */
    tack_exported_memory bad_export; /* a handle that is not a descriptor */
    struct tack_import strided;      /* not C-contiguous */
};

#define SENTINEL(type) ((type)(uintptr_t)0x5e17)

static void preset(struct env *e)
{
    e->dv = SENTINEL(tack_device *);
    e->bo = SENTINEL(tack_buffer *);
    e->ao = SENTINEL(tack_array *);
    e->ko = SENTINEL(tack_kernel *);
    e->m = SENTINEL(DLManagedTensor *);
    e->mv = SENTINEL(DLManagedTensorVersioned *);
    e->dt = (tack_dtype)77;
    e->code = e->bits = 0xEE;
    e->text = SENTINEL(const char *);
    e->size = 0x5e17;
    memset(&e->view, 0xA5, sizeof e->view);
    e->u64 = 0x5e17;
    memcpy(e->typestr, "sentinel", 8);
}

static int untouched(const struct env *e)
{
    return e->dv == SENTINEL(tack_device *) && e->bo == SENTINEL(tack_buffer *) && e->ao == SENTINEL(tack_array *) &&
           e->ko == SENTINEL(tack_kernel *) && e->m == SENTINEL(DLManagedTensor *) &&
           e->mv == SENTINEL(DLManagedTensorVersioned *) && e->dt == (tack_dtype)77 && e->code == 0xEE &&
           e->bits == 0xEE && e->text == SENTINEL(const char *) && e->size == 0x5e17 && e->u64 == 0x5e17 &&
           !memcmp(e->typestr, "sentinel", 8) && e->view.ndim == (int32_t)0xA5A5A5A5 &&
           e->view.data == (void *)(uintptr_t)(UINTPTR_MAX / 0xFF * 0xA5);
}

static int64_t shape4[1] = {4};
static int64_t shape_neg[2] = {2, -1};
static int64_t shape_overflow[2] = {INT64_MAX, 4};
static int64_t shape_2x3[2] = {2, 3};

/* A float tensor of `ndim` dimensions on `device_type` 0, over no data. */
#define FLOAT_TENSOR(device_type_, ndim_, bits_, shape_)                                                         \
    ((DLTensor){.device = {.device_type = (device_type_), .device_id = 0},                                       \
                .ndim = (ndim_),                                                                                 \
                .dtype = {.code = kDLFloat, .bits = (bits_), .lanes = 1},                                        \
                .shape = (shape_)})

#define CASES(X)                                                                                                  \
    /* dtype.h */                                                                                                 \
    X(TACK_ETYPE, tack_dtype_from_name(NULL, &e->dt))                                                             \
    X(TACK_ETYPE, tack_dtype_from_name("float8", &e->dt))                                                         \
    X(TACK_ETYPE, tack_dtype_from_name("", &e->dt))                                                               \
    X(TACK_EVALUE, tack_dtype_from_name("float32", NULL))                                                         \
    X(TACK_ETYPE, tack_dtype_from_dlpack(kDLFloat, 8, 1, &e->dt))                                                 \
    X(TACK_ETYPE, tack_dtype_from_dlpack(kDLComplex, 32, 1, &e->dt))                                              \
    X(TACK_ETYPE, tack_dtype_from_dlpack(kDLFloat, 32, 0, &e->dt))                                                \
    X(TACK_EVALUE, tack_dtype_from_dlpack(kDLFloat, 32, 1, NULL))                                                 \
    X(TACK_ETYPE, tack_dtype_to_dlpack((tack_dtype)-1, &e->code, &e->bits))                                       \
    X(TACK_ETYPE, tack_dtype_to_dlpack(TACK_NDTYPES, &e->code, &e->bits))                                         \
    X(TACK_EVALUE, tack_dtype_to_dlpack(TACK_F32, NULL, &e->bits))                                                \
    X(TACK_EVALUE, tack_dtype_to_dlpack(TACK_F32, &e->code, NULL))                                                \
    X(TACK_ETYPE, tack_dtype_from_typestr(NULL, &e->dt))                                                          \
    X(TACK_ETYPE, tack_dtype_from_typestr("<f3", &e->dt))                                                         \
    X(TACK_ETYPE, tack_dtype_from_typestr("<f4\n", &e->dt))                                                      \
    X(TACK_EVALUE, tack_dtype_from_typestr("<f4", NULL))                                                          \
    X(TACK_ETYPE, tack_dtype_from_format("?", 4, &e->dt))                                                         \
    X(TACK_ETYPE, tack_dtype_from_typestr("|V2", &e->dt))                                                         \
    X(TACK_ETYPE, tack_dtype_from_format("i", 3, &e->dt))                                                         \
    X(TACK_EVALUE, tack_dtype_from_format("f", 4, NULL))                                                          \
    X(TACK_ETYPE, tack_dtype_typestr(TACK_NDTYPES, e->typestr, sizeof e->typestr))                                \
    X(TACK_EVALUE, tack_dtype_typestr(TACK_F32, NULL, 8))                                                         \
    X(TACK_EVALUE, tack_dtype_typestr(TACK_F32, e->typestr, 3))                                                   \
    /* device.h */                                                                                                \
    X(TACK_EVALUE, tack_device_open(NULL, NULL, 0, &e->dv))                                                       \
    X(TACK_EVALUE, tack_device_open("", NULL, 0, &e->dv))                                                         \
    X(TACK_EVALUE, tack_device_open("cpu:", NULL, 0, &e->dv))                                                     \
    X(TACK_EVALUE, tack_device_open("cpu:-1", NULL, 0, &e->dv))                                                   \
    X(TACK_EVALUE, tack_device_open("cpu:99999999999999999999", NULL, 0, &e->dv))                                 \
    X(TACK_EVALUE, tack_device_open("cpu", NULL, 1, &e->dv))                                                      \
    X(TACK_EVALUE, tack_device_open("cpu", &(tack_option){.name = NULL, .field = NULL, .value = 0}, 1, &e->dv))   \
    X(TACK_EVALUE, tack_device_open("cpu", NULL, 0, NULL))                                                        \
    X(TACK_EVALUE, tack_device_for_dlpack((DLDevice){.device_type = (DLDeviceType)12345, .device_id = 0}, &e->dv)) \
    X(TACK_EVALUE, tack_device_for_dlpack((DLDevice){.device_type = kDLMetal, .device_id = 0}, &e->dv))           \
    X(TACK_EVALUE, tack_device_for_dlpack((DLDevice){.device_type = kDLCPU, .device_id = 0}, NULL))               \
    X(TACK_EVALUE, tack_device_check_options(NULL, NULL, 0))                                                      \
    X(TACK_EVALUE, tack_device_check_options("tpu", NULL, 0))                                                     \
    X(TACK_EVALUE, tack_device_check_options("cpu", NULL, 1))                                                     \
    X(TACK_EVALUE, tack_device_check_options("cpu", &(tack_option){.name = NULL, .field = NULL, .value = 0}, 1))  \
    X(TACK_EVALUE, tack_device_check_options("cpu", &(tack_option){.name = "colour", .field = NULL, .value = 0}, 1)) \
    X(TACK_EVALUE, tack_device_synchronize(NULL))                                                                 \
    X(TACK_EVALUE, tack_device_wait_stream(NULL, 0))                                                              \
    X(TACK_EVALUE, tack_memory_space(4096, NULL))                                                                 \
    /* buffer.h */                                                                                                \
    X(TACK_EVALUE, tack_buffer_alloc(NULL, 4, 0, &e->bo))                                                         \
    X(TACK_EVALUE, tack_buffer_alloc(e->cpu, 4, 0, NULL))                                                         \
    X(TACK_ENOMEM, tack_buffer_alloc(e->cpu, SIZE_MAX / 2, 0, &e->bo))                                            \
    X(TACK_EVALUE, tack_buffer_wrap(NULL, e, 4, NULL, NULL, &e->bo))                                              \
    X(TACK_EVALUE, tack_buffer_wrap(e->cpu, e, 4, NULL, NULL, NULL))                                              \
    X(TACK_EVALUE, tack_buffer_share(NULL))                                                                       \
    X(TACK_EVALUE, tack_buffer_share_with_stream(NULL, -1))                                                       \
    X(TACK_EVALUE, tack_buffer_share_with_stream(e->buf, -2))                                                     \
    /* array.h */                                                                                                 \
    X(TACK_ETYPE, tack_array_check_shape(TACK_NDTYPES, 1, shape4, &e->size))                                      \
    X(TACK_EVALUE, tack_array_check_shape(TACK_F32, 2, shape_neg, &e->size))                                      \
    X(TACK_EVALUE, tack_array_check_shape(TACK_F32, 2, shape_overflow, &e->size))                                 \
    X(TACK_EVALUE, tack_array_check_shape(TACK_F32, TACK_MAX_NDIM + 1, shape4, &e->size))                         \
    X(TACK_EVALUE, tack_array_check_shape(TACK_F32, 1, NULL, &e->size))                                           \
    X(TACK_EVALUE, tack_array_check_shape(TACK_F32, 1, shape4, NULL))                                             \
    X(TACK_EVALUE, tack_array_empty(NULL, TACK_F32, 1, shape4, 0, &e->ao))                                        \
    X(TACK_EVALUE, tack_array_empty(e->cpu, TACK_F32, 1, shape4, 0, NULL))                                        \
    X(TACK_ETYPE, tack_array_empty(e->cpu, (tack_dtype)-1, 1, shape4, 0, &e->ao))                                 \
    X(TACK_ETYPE, tack_array_empty(e->cpu, TACK_NDTYPES, 1, shape4, 0, &e->ao))                                   \
    X(TACK_EVALUE, tack_array_empty(e->cpu, TACK_F32, -1, shape4, 0, &e->ao))                                     \
    X(TACK_EVALUE, tack_array_empty(e->cpu, TACK_F32, TACK_MAX_NDIM + 1, shape4, 0, &e->ao))                      \
    X(TACK_EVALUE, tack_array_empty(e->cpu, TACK_F32, 1, NULL, 0, &e->ao))                                        \
    X(TACK_EVALUE, tack_array_empty(e->cpu, TACK_F32, 2, shape_neg, 0, &e->ao))                                   \
    X(TACK_EVALUE, tack_array_empty(e->cpu, TACK_F32, 2, shape_overflow, 0, &e->ao))                              \
    X(TACK_ENOMEM, tack_array_empty(e->cpu, TACK_U8, 1, (int64_t[]){INT64_MAX / 2}, 0, &e->ao))                   \
    X(TACK_EVALUE, tack_array_from_buffer(NULL, TACK_F32, 1, shape4, 1, &e->ao))                                  \
    X(TACK_EVALUE, tack_array_from_buffer(e->buf, TACK_F32, 1, shape4, 1, NULL))                                  \
    X(TACK_EVALUE, tack_array_from_buffer(e->buf, TACK_F64, 1, shape4, 1, &e->ao))                                \
    X(TACK_EVALUE, tack_array_from_buffer(e->buf, TACK_F32, 2, shape_2x3, 1, &e->ao))                             \
    X(TACK_ETYPE, tack_array_from_buffer(e->buf, (tack_dtype)99, 1, shape4, 1, &e->ao))                           \
    X(TACK_EVALUE, tack_array_wrap(NULL, 4096, TACK_F32, 1, shape4, 0, &e->ao))                                   \
    X(TACK_EVALUE, tack_array_wrap(e->cpu, 4096, TACK_F32, 1, shape4, 0, NULL))                                   \
    X(TACK_EVALUE, tack_array_wrap(e->cpu, 0, TACK_F32, 1, shape4, 0, &e->ao))                                    \
    X(TACK_EVALUE, tack_array_wrap(e->cpu, 4096, TACK_F32, 2, shape_overflow, 0, &e->ao))                         \
    X(TACK_ETYPE, tack_array_wrap(e->cpu, 4096, (tack_dtype)-3, 1, shape4, 0, &e->ao))                            \
    X(TACK_EVALUE, tack_array_reshape(NULL, 1, shape4, &e->ao))                                                   \
    X(TACK_EVALUE, tack_array_reshape(e->a, 1, shape4, NULL))                                                     \
    X(TACK_EVALUE, tack_array_reshape(e->a, 1, NULL, &e->ao))                                                     \
    X(TACK_EVALUE, tack_array_reshape(e->a, -1, shape4, &e->ao))                                                  \
    X(TACK_EVALUE, tack_array_reshape(e->a, 2, shape_2x3, &e->ao))                                                \
    X(TACK_EVALUE, tack_array_reshape(e->a, 2, (int64_t[]){-1, -1}, &e->ao))                                      \
    X(TACK_EVALUE, tack_array_reshape(e->a, 2, (int64_t[]){-1, 0}, &e->ao))                                       \
    X(TACK_EVALUE, tack_array_reshape(e->a, 2, shape_overflow, &e->ao))                                           \
    X(TACK_EVALUE, tack_array_copy_to_host(NULL, &e->size, 0))                                                    \
    X(TACK_EVALUE, tack_array_copy_to_host(e->a, NULL, 16))                                                       \
    X(TACK_EVALUE, tack_array_copy_to_host(e->a, &e->em, 15))                                                     \
    X(TACK_EVALUE, tack_array_copy_from_host(NULL, &e->em, 16))                                                   \
    X(TACK_EVALUE, tack_array_copy_from_host(e->a, NULL, 16))                                                     \
    X(TACK_EVALUE, tack_array_copy_from_host(e->a, &e->em, 17))                                                   \
    X(TACK_ERUNTIME, tack_array_copy_from_host(e->ro, &e->em, 16))                                                \
    X(TACK_EVALUE, tack_array_fill(NULL, &e->size))                                                               \
    X(TACK_EVALUE, tack_array_fill(e->a, NULL))                                                                   \
    X(TACK_ERUNTIME, tack_array_fill(e->ro, &e->size))                                                            \
    X(TACK_EVALUE, tack_array_to_device(NULL, e->cpu, &e->ao))                                                    \
    X(TACK_EVALUE, tack_array_to_device(e->a, NULL, &e->ao))                                                      \
    X(TACK_EVALUE, tack_array_to_device(e->a, e->cpu, NULL))                                                      \
    X(TACK_EVALUE, tack_array_export_memory(NULL, &e->em))                                                        \
    X(TACK_EVALUE, tack_array_export_memory(e->a, NULL))                                                          \
    X(TACK_ERUNTIME, tack_array_export_memory(e->a, &e->em))                                                      \
    X(TACK_EVALUE, tack_array_import_memory(e->cpu, NULL, TACK_F32, 1, shape4, &e->ao))                           \
    X(TACK_EVALUE, tack_array_import_memory(e->cpu, &e->bad_export, TACK_F32, 1, shape4, &e->ao))                 \
    X(TACK_EVALUE, tack_array_send(-1, e->a))                                                                     \
    X(TACK_EVALUE, tack_array_send(0, NULL))                                                                      \
    X(TACK_EVALUE, tack_array_send_wait(-1, e->a, NULL))                                                          \
    X(TACK_EVALUE, tack_array_receive(-1, e->cpu, &e->ao))                                                        \
    X(TACK_EVALUE, tack_array_receive(0, e->cpu, NULL))                                                           \
    X(TACK_EVALUE, tack_array_receive_wait(-1, e->cpu, NULL, &e->ao))                                             \
    /* exchange.h */                                                                                              \
    X(TACK_EVALUE, tack_array_to_dlpack(NULL, &e->m))                                                             \
    X(TACK_EVALUE, tack_array_to_dlpack(e->a, NULL))                                                              \
    X(TACK_EVALUE, tack_array_to_dlpack_versioned(NULL, &e->mv))                                                  \
    X(TACK_EVALUE, tack_array_to_dlpack_versioned(e->a, NULL))                                                    \
    X(TACK_EVALUE, tack_array_from_dlpack(NULL, NULL, NULL, &e->ao))                                              \
    X(TACK_EVALUE, tack_array_from_dlpack_versioned(NULL, NULL, NULL, &e->ao, NULL))                              \
    X(TACK_EVALUE, tack_array_to_dlpack_stream(NULL, -1, &e->m))                                                  \
    X(TACK_EVALUE, tack_array_to_dlpack_versioned_stream(e->a, -1, NULL))                                         \
    X(TACK_EVALUE, tack_import_array(NULL, NULL, NULL, &e->ao))                                                   \
    X(TACK_EVALUE, tack_import_array(&e->strided, NULL, NULL, &e->ao))                                            \
    X(TACK_EVALUE, tack_array_to_dltensor(NULL, &e->view))                                                        \
    X(TACK_EVALUE, tack_array_to_dltensor(e->a, NULL))                                                            \
    X(TACK_EVALUE, tack_dlpack_allocate(NULL, &e->mv))                                                            \
    X(TACK_EVALUE, tack_dlpack_allocate(&FLOAT_TENSOR(kDLCPU, 1, 32, shape4), NULL))                              \
    X(TACK_ETYPE, tack_dlpack_allocate(&FLOAT_TENSOR(kDLCPU, 1, 24, shape4), &e->mv))                             \
    X(TACK_EVALUE, tack_dlpack_allocate(&FLOAT_TENSOR(kDLCPU, 2, 32, shape_overflow), &e->mv))                    \
    X(TACK_EVALUE, tack_dlpack_allocate(&FLOAT_TENSOR(kDLCPU, 1, 32, NULL), &e->mv))                              \
    X(TACK_EVALUE, tack_dlpack_allocate(&FLOAT_TENSOR(kDLCUDAHost, 1, 32, shape4), &e->mv))                       \
    X(TACK_EVALUE, tack_dlpack_work_stream((DLDevice){.device_type = (DLDeviceType)12345, .device_id = 0}, &e->u64)) \
    X(TACK_EVALUE, tack_dlpack_work_stream((DLDevice){.device_type = kDLCPU, .device_id = 0}, NULL))              \
    /* kernel.h */                                                                                                \
    X(TACK_EVALUE, tack_kernel_create(NULL, NULL, &e->ko))                                                        \
    X(TACK_EVALUE, tack_kernel_create("void f(tack_index i) { }", NULL, NULL))                                    \
    X(TACK_EVALUE, tack_kernel_create("", NULL, &e->ko))                                                          \
    X(TACK_EVALUE, tack_kernel_create("void f(tack_index i) { }", "g", &e->ko))                                   \
    X(TACK_EVALUE, tack_kernel_create("int f(tack_index i) { return 0; }", NULL, &e->ko))                         \
    X(TACK_EVALUE, tack_kernel_create("void f(int i) { }", NULL, &e->ko))                                         \
    X(TACK_ETYPE, tack_kernel_create("void f(tack_index i, char *c) { }", NULL, &e->ko))                          \
    X(TACK_EVALUE, tack_kernel_compile(NULL, NULL, e->cpu, &e->ko))                                               \
    X(TACK_EVALUE, tack_kernel_build(NULL, e->cpu))                                                               \
    X(TACK_EVALUE, tack_kernel_build(e->k, NULL))                                                                 \
    X(TACK_EVALUE, tack_kernel_target(NULL, e->cpu, &e->text))                                                    \
    X(TACK_EVALUE, tack_kernel_target(e->k, NULL, &e->text))                                                      \
    X(TACK_EVALUE, tack_kernel_target(e->k, e->cpu, NULL))                                                        \
    X(TACK_EVALUE, tack_kernel_launch(NULL, e->cpu, 1, &(tack_arg){TACK_ARG_ARRAY, TACK_F32, {.array = e->a}}, 1)) \
    X(TACK_EVALUE, tack_kernel_launch(e->k, NULL, 1, NULL, 1))                                                    \
    X(TACK_ETYPE, tack_kernel_launch(e->k, NULL, 1, NULL, 0))                                                     \
    X(TACK_EVALUE, tack_kernel_launch(e->k, NULL, -1, &(tack_arg){TACK_ARG_ARRAY, TACK_F32, {.array = e->a}}, 1)) \
    X(TACK_EVALUE, tack_kernel_launch(e->k, NULL, 1, &(tack_arg){TACK_ARG_ARRAY, TACK_F32, {.array = e->ro}}, 1)) \
    X(TACK_ETYPE, tack_kernel_launch(e->k, NULL, 1, &(tack_arg){TACK_ARG_SCALAR, TACK_F32, {.f32 = 1}}, 1))       \
    X(TACK_ETYPE, tack_kernel_launch(e->k, NULL, 1, &(tack_arg){TACK_ARG_ARRAY, TACK_F32, {.array = NULL}}, 1))   \
    X(TACK_EVALUE, tack_kernel_create("void f(tack_index a, tack_index b, tack_index c, tack_index d) { }", NULL,  \
                                      &e->ko))                                                                    \
    X(TACK_EVALUE, tack_kernel_launch_nd(NULL, e->cpu, 1, (int64_t[]){1}, &(tack_arg){TACK_ARG_ARRAY, TACK_F32,   \
                                                                                     {.array = e->a}}, 1))        \
    X(TACK_EVALUE, tack_kernel_launch_nd(e->k, NULL, 1, NULL, &(tack_arg){TACK_ARG_ARRAY, TACK_F32,                \
                                                                            {.array = e->a}}, 1))                 \
    X(TACK_EVALUE, tack_kernel_launch_nd(e->k, NULL, 2, (int64_t[]){2, 2}, &(tack_arg){TACK_ARG_ARRAY, TACK_F32,   \
                                                                                      {.array = e->a}}, 1))       \
    X(TACK_EVALUE, tack_kernel_launch_nd(e->k, NULL, 0, (int64_t[]){1}, &(tack_arg){TACK_ARG_ARRAY, TACK_F32,      \
                                                                                   {.array = e->a}}, 1))          \
    X(TACK_EVALUE, tack_kernel_launch_nd(e->k, NULL, 1, (int64_t[]){-4}, &(tack_arg){TACK_ARG_ARRAY, TACK_F32,     \
                                                                                    {.array = e->a}}, 1))         \
    X(TACK_EVALUE, tack_kernel_call(NULL, NULL, 0))                                                               \
    X(TACK_EVALUE, tack_kernel_call(e->k, NULL, 1))                                                               \
    X(TACK_EVALUE, tack_kernel_param_info(NULL, 0, &e->kp))                                                       \
    X(TACK_EVALUE, tack_kernel_param_info(e->k, 0, NULL))                                                         \
    X(TACK_EVALUE, tack_kernel_param_info(e->k, 1, &e->kp))                                                       \
    X(TACK_EVALUE, tack_kernel_param_info(e->k, -1, &e->kp))                                                      \
    X(TACK_EVALUE, tack_kernel_generated_source(NULL, "cpu", &e->text))                                           \
    X(TACK_EVALUE, tack_kernel_generated_source(e->k, NULL, &e->text))                                            \
    X(TACK_EVALUE, tack_kernel_generated_source(e->k, "cpu", NULL))                                               \
    X(TACK_EVALUE, tack_kernel_generated_source(e->k, "tpu", &e->text))                                           \
    X(TACK_EVALUE, tack_kernel_ptx(NULL, NULL, &e->text, &e->size))                                               \
    X(TACK_EVALUE, tack_kernel_ptx(e->k, NULL, NULL, &e->size))                                                   \
    X(TACK_EVALUE, tack_kernel_ptx(e->k, NULL, &e->text, NULL))

/* Each case is one branch of a dispatcher, so the expression is written once. */
struct one_case {
    const char *text;
    tack_status want;
};

#define ENTRY(want, expr) {#expr, want},
static const struct one_case cases[] = {CASES(ENTRY)};
#undef ENTRY
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static int current;

static tack_status dispatch(void *ctx)
{
    struct env *e = ctx;
    int i = 0;
#define BRANCH(want, expr)                                                                                        \
    if (i++ == current)                                                                                           \
        return (expr);
    CASES(BRANCH)
#undef BRANCH
    return TACK_OK;
}

static struct env env;

static void setup(void)
{
    struct env *e = &env;
    CHECK_OK(tack_device_open("cpu", NULL, 0, &e->cpu));
    CHECK_OK(tack_array_empty(e->cpu, TACK_F32, 1, shape4, 0, &e->a));
    CHECK_OK(tack_array_wrap(e->cpu, (uint64_t)(uintptr_t)tack_array_data(e->a), TACK_F32, 1, shape4, 0, &e->ro));
    CHECK_OK(tack_kernel_create("void f(tack_index i, float *x) { x[i] = 1.0f; }", NULL, &e->k));
    e->buf = tack_array_buffer(e->a);
    snprintf(e->bad_export.backend, sizeof e->bad_export.backend, "cpu");
    snprintf(e->bad_export.handle_type, sizeof e->bad_export.handle_type, "posix_fd");
    e->bad_export.handle = -1;
    e->bad_export.size = e->bad_export.allocation_size = 16;
    static const int64_t strides[1] = {8};
    e->strided = (struct tack_import){.what = "a strided view", .data = tack_array_data(e->a), .device = {kDLCPU, 0},
                                      .dtype = TACK_F32, .ndim = 1, .shape = shape4, .strides = strides,
                                      .max_bytes = 64};
}

static void test_every_bad_call_is_refused(void)
{
    for (current = 0; current < NCASES; current++) {
        preset(&env);
        refused(__FILE__, __LINE__, cases[current].text, dispatch, &env, cases[current].want);
        if (!untouched(&env) && !is_known(cases[current].text)) {
            fprintf(stderr, "%s: a refused call wrote an out-parameter\n", cases[current].text);
            check_failures++;
        }
    }
    printf("%d bad calls\n", NCASES);
}

static void test_statuses_never_fail(void)
{
    CHECK(tack_status_name((tack_status)99) != NULL);
    CHECK(tack_status_name((tack_status)-1) != NULL);
    CHECK(tack_dtype_size((tack_dtype)-1) == 0 && tack_dtype_size(TACK_NDTYPES) == 0);
    CHECK(tack_dtype_name((tack_dtype)-1) == NULL && tack_dtype_name(TACK_NDTYPES) == NULL);
    CHECK(tack_dtype_short_name((tack_dtype)1000) == NULL && tack_dtype_c_type((tack_dtype)1000) == NULL);
    CHECK(tack_backend_options(NULL) == NULL && tack_backend_options("tpu") == NULL);
    /* the NULL-accepting releases */
    tack_array_release(NULL);
    tack_buffer_release(NULL);
    tack_device_release(NULL);
    tack_kernel_release(NULL);
    CHECK(tack_array_retain(NULL) == NULL && tack_buffer_retain(NULL) == NULL);
    CHECK(tack_device_retain(NULL) == NULL && tack_kernel_retain(NULL) == NULL);
}

/* The message of a failure belongs to the thread that failed: a later
 * success leaves it, another thread's failure does not replace it. */
static void *fail_elsewhere(void *unused)
{
    (void)unused;
    tack_device *d;
    tack_device_open("elsewhere", NULL, 0, &d);
    return NULL;
}

static void test_error_message_is_per_thread(void)
{
    tack_device *d;
    CHECK_STATUS(tack_device_open("tpu", NULL, 0, &d), TACK_EVALUE);
    char mine[256];
    snprintf(mine, sizeof mine, "%s", tack_last_error());
    CHECK(strstr(mine, "tpu") != NULL);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fail_elsewhere, NULL) == 0);
    pthread_join(t, NULL);
    CHECK(!strcmp(tack_last_error(), mine));
}

int main(void)
{
    long start[3];
    check_live_counts(start);
    setup();
    RUN(test_every_bad_call_is_refused);
    RUN(test_statuses_never_fail);
    RUN(test_error_message_is_per_thread);
    tack_kernel_release(env.k);
    tack_array_release(env.ro);
    tack_array_release(env.a);
    tack_device_release(env.cpu);
    check_live_counts(counts);
    CHECK(!memcmp(start, counts, sizeof start));
    CHECK_DONE();
}
