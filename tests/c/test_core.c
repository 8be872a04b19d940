/* The C API of devices, buffers and arrays on the CPU backend. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "tack/tack.h"

static tack_device *cpu(void)
{
    tack_device *d = NULL;
    CHECK_OK(tack_device_open("cpu", NULL, 0, &d));
    return d;
}

static void test_device_registry(void)
{
    tack_device *a = cpu(), *b = cpu();
    CHECK(a && a == b);
    CHECK(!strcmp(tack_device_backend(a), "cpu"));
    CHECK(!strcmp(tack_device_name(a), "cpu"));
    DLDevice dl = tack_device_dl_device(a);
    CHECK(dl.device_type == kDLCPU && dl.device_id == 0);
    CHECK(tack_device_can_wrap(a, (DLDevice){kDLCUDAHost, 3}));
    CHECK(!tack_device_can_wrap(a, (DLDevice){kDLCUDA, 0}));
    tack_device_release(a);
    tack_device_release(b);
}

static void test_device_errors(void)
{
    tack_device *d = (tack_device *)0x1;
    CHECK_STATUS(tack_device_open("nope", NULL, 0, &d), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "'cpu'") != NULL);
    CHECK_STATUS(tack_device_open("cpu:x", NULL, 0, &d), TACK_EVALUE);
    CHECK_STATUS(tack_device_open("cpu:1", NULL, 0, &d), TACK_EVALUE);
    CHECK_STATUS(tack_device_open(NULL, NULL, 0, &d), TACK_EVALUE);
    tack_option opt = {"external_context", "context", 7};
    CHECK_STATUS(tack_device_open("cpu", &opt, 1, &d), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "external_context") != NULL);
    CHECK(d == (tack_device *)0x1); /* untouched on failure */
    CHECK(tack_backend_options("cpu") && tack_backend_options("cpu")[0] == NULL);
    CHECK(tack_backend_options("metal") == NULL);
}

static void test_empty_is_zeroed(void)
{
    tack_device *d = cpu();
    int64_t shape[2] = {3, 5};
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(d, TACK_F64, 2, shape, 0, &a));
    CHECK(tack_array_size(a) == 15 && tack_array_nbytes(a) == 120 && tack_array_ndim(a) == 2);
    const double *p = tack_array_data(a);
    double sum = 0;
    for (int i = 0; i < 15; i++)
        sum += p[i] != 0.0;
    CHECK(sum == 0);
    CHECK(tack_array_writable(a));
    CHECK(tack_buffer_is_owned(tack_array_buffer(a)));
    CHECK(!tack_buffer_is_shared(tack_array_buffer(a)));
    tack_array_release(a);
    tack_device_release(d);
}

static void test_shape_validation(void)
{
    tack_device *d = cpu();
    tack_array *a = NULL;
    int64_t neg[1] = {-1};
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 1, neg, 0, &a), TACK_EVALUE);
    int64_t huge[2] = {INT64_MAX, 4};
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 2, huge, 0, &a), TACK_EVALUE);
    int64_t big_bytes[1] = {INT64_MAX / 2};
    CHECK_STATUS(tack_array_empty(d, TACK_F64, 1, big_bytes, 0, &a), TACK_EVALUE);
    int64_t zero_and_huge[2] = {0, INT64_MAX};
    CHECK_STATUS(tack_array_empty(d, TACK_F32, 2, zero_and_huge, 0, &a), TACK_EVALUE);
    CHECK_STATUS(tack_array_empty(d, TACK_F32, TACK_MAX_NDIM + 1, neg, 0, &a), TACK_EVALUE);
    CHECK_STATUS(tack_array_empty(d, TACK_F32, -1, neg, 0, &a), TACK_EVALUE);
    CHECK_STATUS(tack_array_empty(d, (tack_dtype)99, 1, neg, 0, &a), TACK_ETYPE);
    CHECK(a == NULL);
    int64_t zero[1] = {0};
    CHECK_OK(tack_array_empty(d, TACK_U8, 1, zero, 0, &a));
    CHECK(a && tack_array_size(a) == 0 && tack_array_data(a) != NULL);
    tack_array_release(a);
    CHECK_OK(tack_array_empty(d, TACK_U8, 0, NULL, 0, &a)); /* 0-d: one element */
    CHECK(a && tack_array_size(a) == 1);
    tack_array_release(a);
    tack_device_release(d);
}

static void test_reshape_shares_buffer(void)
{
    tack_device *d = cpu();
    int64_t shape[1] = {12}, s2[2] = {3, -1}, bad[2] = {5, -1}, two[2] = {-1, -1};
    tack_array *a = NULL, *b = NULL, *c = NULL;
    long buffers = tack_buffer_live_count();
    CHECK_OK(tack_array_empty(d, TACK_I32, 1, shape, 0, &a));
    CHECK_OK(tack_array_reshape(a, 2, s2, &b));
    CHECK(b && tack_array_shape(b)[1] == 4 && tack_array_data(b) == tack_array_data(a));
    CHECK(tack_array_buffer(b) == tack_array_buffer(a));
    CHECK_STATUS(tack_array_reshape(a, 2, bad, &c), TACK_EVALUE);
    CHECK_STATUS(tack_array_reshape(a, 2, two, &c), TACK_EVALUE);
    tack_array_release(a); /* the view keeps the buffer */
    CHECK(tack_buffer_live_count() == buffers + 1);
    tack_array_release(b);
    CHECK(tack_buffer_live_count() == buffers);
    tack_device_release(d);
}

static void test_host_copies_and_readonly(void)
{
    tack_device *d = cpu();
    float host[4] = {1, 2, 3, 4}, back[4] = {0};
    int64_t shape[1] = {4};
    tack_array *w = NULL, *r = NULL;
    CHECK_OK(tack_array_wrap(d, (uint64_t)(uintptr_t)host, TACK_F32, 1, shape, 0, &r));
    CHECK(r && tack_array_data(r) == host && !tack_array_writable(r));
    CHECK(tack_buffer_is_shared(tack_array_buffer(r)));
    float v = 9;
    CHECK_STATUS(tack_array_fill(r, &v), TACK_ERUNTIME);
    CHECK_STATUS(tack_array_copy_from_host(r, back, sizeof back), TACK_ERUNTIME);
    CHECK(host[0] == 1); /* nothing written */
    CHECK_OK(tack_array_copy_to_host(r, back, sizeof back));
    CHECK(back[3] == 4);
    CHECK_STATUS(tack_array_copy_to_host(r, back, 8), TACK_EVALUE);
    CHECK_OK(tack_array_wrap(d, (uint64_t)(uintptr_t)host, TACK_F32, 1, shape, 1, &w));
    CHECK_OK(tack_array_fill(w, &v));
    CHECK(host[0] == 9 && host[3] == 9);
    tack_array *moved = NULL;
    CHECK_OK(tack_array_to_device(w, d, &moved));
    CHECK(moved && tack_array_data(moved) != host && ((float *)tack_array_data(moved))[2] == 9);
    tack_array_release(moved);
    tack_array_release(w);
    tack_array_release(r);
    CHECK(host[1] == 9); /* wrapped memory is never freed by Tack */
    CHECK_STATUS(tack_array_wrap(d, 0, TACK_F32, 1, shape, 0, &r), TACK_EVALUE);
    tack_device_release(d);
}

static int released;
static void on_release(void *ctx)
{
    released += *(int *)ctx;
}

static void test_wrap_release_runs_once(void)
{
    tack_device *d = cpu();
    static char mem[64];
    int one = 1;
    tack_buffer *b = NULL;
    CHECK_OK(tack_buffer_wrap(d, mem, sizeof mem, on_release, &one, &b));
    int64_t shape[1] = {16};
    tack_array *a = NULL;
    CHECK_OK(tack_array_from_buffer(b, TACK_U32, 1, shape, 1, &a));
    int64_t too_big[1] = {17};
    tack_array *x = NULL;
    CHECK_STATUS(tack_array_from_buffer(b, TACK_U32, 1, too_big, 1, &x), TACK_EVALUE);
    tack_buffer_release(b);
    CHECK(released == 0);
    tack_array_release(a);
    CHECK(released == 1);
    tack_device_release(d);
}

static void test_export_memory_unsupported(void)
{
    tack_device *d = cpu();
    int64_t shape[1] = {4};
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(d, TACK_F32, 1, shape, 0, &a)); /* not exportable */
    tack_exported_memory rec;
    CHECK_STATUS(tack_array_export_memory(a, &rec), TACK_ERUNTIME);
    const char *want = "Backend cpu does not support memory export";
    CHECK(!strncmp(tack_last_error(), want, strlen(want)));
    tack_array_release(a);
    tack_device_release(d);
}

static void test_dtypes(void)
{
    for (int i = 0; i < TACK_NDTYPES; i++) {
        uint8_t code, bits;
        tack_dtype back;
        CHECK_OK(tack_dtype_to_dlpack((tack_dtype)i, &code, &bits));
        CHECK_OK(tack_dtype_from_dlpack(code, bits, 1, &back));
        CHECK(back == (tack_dtype)i);
        CHECK(tack_dtype_size((tack_dtype)i) * 8 == bits);
        CHECK_OK(tack_dtype_from_name(tack_dtype_name((tack_dtype)i), &back));
        CHECK(back == (tack_dtype)i);
    }
    tack_dtype d = TACK_I8;
    CHECK_STATUS(tack_dtype_from_dlpack(kDLFloat, 16, 1, &d), TACK_ETYPE);
    CHECK_STATUS(tack_dtype_from_dlpack(kDLFloat, 32, 4, &d), TACK_ETYPE);
    CHECK_STATUS(tack_dtype_from_dlpack(kDLBool, 8, 1, &d), TACK_ETYPE);
    CHECK_STATUS(tack_dtype_from_name("complex64", &d), TACK_ETYPE);
    CHECK(d == TACK_I8);
}


int main(void)
{
    check_each_leaves_nothing();
    RUN(test_device_registry);
    RUN(test_device_errors);
    RUN(test_empty_is_zeroed);
    RUN(test_shape_validation);
    RUN(test_reshape_shares_buffer);
    RUN(test_host_copies_and_readonly);
    RUN(test_wrap_release_runs_once);
    RUN(test_export_memory_unsupported);
    RUN(test_dtypes);
    CHECK_DONE();
}
