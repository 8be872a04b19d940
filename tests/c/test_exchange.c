/* The C halves of DLPack's exchange table (the DLTensor view, the
 * allocator, the work stream), the dtype spellings of the Python array
 * protocols, and the import that the buffer protocol and the CUDA Array
 * Interface share with DLPack (tack/import.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "tack/tack.h"

#include "tack/import.h"

static tack_device *cpu(void)
{
    tack_device *d = NULL;
    CHECK_OK(tack_device_open("cpu", NULL, 0, &d));
    return d;
}

static void test_dltensor_view_is_the_arrays_own_record(void)
{
    tack_device *d = cpu();
    tack_array *a = NULL, *v = NULL;
    int64_t flat[1] = {24}, shape[3] = {2, 3, 4};
    CHECK_OK(tack_array_empty(d, TACK_I16, 1, flat, 0, &a));
    CHECK_OK(tack_array_reshape(a, 3, shape, &v));
    long arrays = tack_array_live_count(), exports = tack_dlpack_live_exports();
    DLTensor t;
    memset(&t, 0xA5, sizeof t);
    CHECK_OK(tack_array_to_dltensor(v, &t));
    CHECK(t.data == tack_array_data(a));
    CHECK(t.device.device_type == kDLCPU && t.device.device_id == 0);
    CHECK(t.ndim == 3 && t.dtype.code == kDLInt && t.dtype.bits == 16 && t.dtype.lanes == 1);
    /* No copy of the shape: the view lives as long as the array. */
    CHECK(t.shape == tack_array_shape(v));
    CHECK(t.strides == NULL && t.byte_offset == 0);
    /* A view takes nothing: no reference, no export, no shared mark. */
    CHECK(tack_array_live_count() == arrays && tack_dlpack_live_exports() == exports);
    CHECK(!tack_buffer_is_shared(tack_array_buffer(a)));
    memset(&t, 0xA5, sizeof t);
    DLTensor before = t;
    CHECK_STATUS(tack_array_to_dltensor(NULL, &t), TACK_EVALUE);
    CHECK(!memcmp(&t, &before, sizeof t));
    CHECK_STATUS(tack_array_to_dltensor(v, NULL), TACK_EVALUE);
    tack_array_release(v);
    tack_array_release(a);
    tack_device_release(d);
}

static void test_allocator_makes_zeroed_exports(void)
{
    int64_t shape[2] = {3, 5}, garbage[2] = {-7, 99};
    /* Data and strides are not read. */
    DLTensor proto = {.data = (void *)(uintptr_t)0x1234, .device = {.device_type = kDLCPU, .device_id = 0}, .ndim = 2,
                      .dtype = {.code = kDLUInt, .bits = 16, .lanes = 1}, .shape = shape, .strides = garbage,
                      .byte_offset = 3};
    long arrays = tack_array_live_count(), exports = tack_dlpack_live_exports();
    DLManagedTensorVersioned *m = NULL;
    CHECK_OK(tack_dlpack_allocate(&proto, &m));
    if (!m)
        return;
    CHECK(m->version.major == DLPACK_MAJOR_VERSION && m->flags == 0 && m->deleter);
    DLTensor *t = &m->dl_tensor;
    CHECK(t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == 5 && t->shape != shape);
    CHECK(t->dtype.code == kDLUInt && t->dtype.bits == 16 && t->device.device_type == kDLCPU);
    CHECK(t->data != proto.data && t->byte_offset == 0);
    int zero = 1;
    for (int i = 0; i < 15; i++)
        zero = zero && ((uint16_t *)t->data)[i] == 0;
    CHECK(zero);
    /* The export holds the only array. */
    CHECK(tack_dlpack_live_exports() == exports + 1 && tack_array_live_count() == arrays + 1);
    m->deleter(m);
    CHECK(tack_dlpack_live_exports() == exports && tack_array_live_count() == arrays);
}

static void allocator_refuses(const char *file, int line, DLTensor proto, tack_status want, const char *says)
{
    long arrays = tack_array_live_count(), buffers = tack_buffer_live_count();
    DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)(uintptr_t)0x5e17;
    CHECK_STATUS_AT(file, line, tack_dlpack_allocate(&proto, &m), want);
    CHECK_AT(file, line, m == (DLManagedTensorVersioned *)(uintptr_t)0x5e17);
    CHECK_AT(file, line, strstr(tack_last_error(), says));
    CHECK_AT(file, line, tack_array_live_count() == arrays && tack_buffer_live_count() == buffers);
}

static void test_allocator_refusals_allocate_nothing(void)
{
    int64_t shape[1] = {4}, neg[2] = {2, -1};
    DLTensor ok = {.data = NULL, .device = {.device_type = kDLCPU, .device_id = 0}, .ndim = 1,
                   .dtype = {.code = kDLFloat, .bits = 32, .lanes = 1}, .shape = shape, .strides = NULL,
                   .byte_offset = 0}, p;
    p = ok, p.device.device_type = kDLCUDAHost; /* pinned memory is not plain host memory */
    allocator_refuses(__FILE__, __LINE__, p, TACK_EVALUE, "prototype");
    p = ok, p.device.device_type = kDLMetal;
    allocator_refuses(__FILE__, __LINE__, p, TACK_EVALUE, "not supported");
    p = ok, p.dtype.lanes = 4;
    allocator_refuses(__FILE__, __LINE__, p, TACK_ETYPE, "lanes");
    p = ok, p.dtype.bits = 8;
    allocator_refuses(__FILE__, __LINE__, p, TACK_ETYPE, "no Tack equivalent");
    p = ok, p.ndim = TACK_MAX_NDIM + 1;
    allocator_refuses(__FILE__, __LINE__, p, TACK_EVALUE, "at most");
    p = ok, p.shape = NULL;
    allocator_refuses(__FILE__, __LINE__, p, TACK_EVALUE, "NULL");
    p = ok, p.ndim = 2, p.shape = neg;
    allocator_refuses(__FILE__, __LINE__, p, TACK_EVALUE, "negative");
    DLManagedTensorVersioned *m = NULL;
    CHECK_STATUS(tack_dlpack_allocate(NULL, &m), TACK_EVALUE);
    CHECK_STATUS(tack_dlpack_allocate(&ok, NULL), TACK_EVALUE);
    CHECK(m == NULL);
}

static void test_work_stream_of_host_memory_is_none(void)
{
    uint64_t s = 77;
    CHECK_OK(tack_dlpack_work_stream((DLDevice){.device_type = kDLCPU, .device_id = 0}, &s));
    CHECK(s == 0);
    s = 77;
    CHECK_OK(tack_dlpack_work_stream((DLDevice){.device_type = kDLCUDAHost, .device_id = 3}, &s));
    CHECK(s == 0);
    s = 77;
    CHECK_STATUS(tack_dlpack_work_stream((DLDevice){.device_type = (DLDeviceType)12345,
                                                    .device_id = 0}, &s), TACK_EVALUE);
    CHECK_STATUS(tack_dlpack_work_stream((DLDevice){.device_type = kDLMetal, .device_id = 0}, &s), TACK_EVALUE);
    CHECK(s == 77);
    CHECK_STATUS(tack_dlpack_work_stream((DLDevice){.device_type = kDLCPU, .device_id = 0}, NULL), TACK_EVALUE);
}

static void test_every_dtype_round_trips_through_its_spellings(void)
{
    for (int i = 0; i < TACK_NDTYPES; i++) {
        tack_dtype d = (tack_dtype)i, back = (tack_dtype)77;
        size_t size = tack_dtype_size(d);
        char ts[8];
        CHECK_OK(tack_dtype_typestr(d, ts, sizeof ts));
        CHECK(ts[1] == tack_dtype_kind(d) && (size_t)atoi(ts + 2) == size);
        CHECK(ts[0] == (size == 1 ? '|' : (*(const uint8_t *)&(uint16_t){1} ? '<' : '>')));
        CHECK_OK(tack_dtype_from_typestr(ts, &back));
        CHECK(back == d);
        back = (tack_dtype)77;
        /* bfloat16 alone has no format (a NULL one would mean bytes). */
        if (d != TACK_BF16) {
            CHECK_OK(tack_dtype_from_format(tack_dtype_format(d), size, &back));
            CHECK(back == d);
        }
        /* The typestr and format name the same element as the DLPack code. */
        uint8_t code, bits;
        CHECK_OK(tack_dtype_to_dlpack(d, &code, &bits));
        CHECK((code == kDLFloat) == (tack_dtype_kind(d) == 'f') && (code == kDLUInt) == (tack_dtype_kind(d) == 'u'));
    }
    CHECK(!strcmp(tack_dtype_format(TACK_F64), "d") && !strcmp(tack_dtype_format(TACK_U8), "B"));
    CHECK(tack_dtype_kind((tack_dtype)-1) == 0 && tack_dtype_format(TACK_NDTYPES) == NULL);
}

/* The spellings NumPy, the struct module, ml_dtypes and PyTorch use. */
static void test_the_new_dtypes_spell_as_the_ecosystem_does(void)
{
    int little = *(const uint8_t *)&(uint16_t){1};
    static const struct {
        tack_dtype dtype;
        const char *typestr, *format;
    } rows[] = {
        {TACK_BOOL, "|b1", "?"}, {TACK_F16, "<f2", "e"}, {TACK_BF16, "<V2", NULL},
        {TACK_C64, "<c8", "Zf"}, {TACK_C128, "<c16", "Zd"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        char ts[8], want[8];
        snprintf(want, sizeof want, "%s", rows[i].typestr);
        if (!little && want[0] == '<')
            want[0] = '>';
        CHECK_OK(tack_dtype_typestr(rows[i].dtype, ts, sizeof ts));
        CHECK(!strcmp(ts, want));
        const char *f = tack_dtype_format(rows[i].dtype);
        CHECK(rows[i].format ? f && !strcmp(f, rows[i].format) : f == NULL);
    }
    static const struct {
        const char *format;
        size_t itemsize;
        tack_dtype want;
    } formats[] = {{"?", 1, TACK_BOOL}, {"=?", 1, TACK_BOOL}, {"e", 2, TACK_F16}, {"@e", 2, TACK_F16},
                   {"Zf", 8, TACK_C64}, {"Zd", 16, TACK_C128}, {"=Zd", 16, TACK_C128}};
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++) {
        tack_dtype got = (tack_dtype)77;
        CHECK_OK(tack_dtype_from_format(formats[i].format, formats[i].itemsize, &got));
        CHECK(got == formats[i].want);
    }
}

static void test_format_integer_codes_go_by_itemsize(void)
{
    static const struct {
        const char *format;
        size_t itemsize;
        tack_dtype want;
    } cases[] = {
        {"l", 8, TACK_I64}, {"l", 4, TACK_I32}, {"q", 8, TACK_I64}, {"=q", 8, TACK_I64}, {"<i", 4, TACK_I32},
        {"h", 2, TACK_I16}, {"b", 1, TACK_I8},  {"B", 1, TACK_U8},  {"L", 8, TACK_U64}, {"N", 8, TACK_U64},
        {NULL, 1, TACK_U8}, {"f", 4, TACK_F32}, {"@d", 8, TACK_F64}, {">B", 1, TACK_U8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tack_dtype got = (tack_dtype)77;
        CHECK_OK(tack_dtype_from_format(cases[i].format, cases[i].itemsize, &got));
        CHECK(got == cases[i].want);
    }
}

static void test_other_spellings_have_no_dtype(void)
{
    /* Multi-byte elements of the other byte order, and what Tack lacks. */
    int little = *(const uint8_t *)&(uint16_t){1};
    const char *foreign_ts = little ? ">f4" : "<f4", *foreign_fmt = little ? ">i" : "<i";
    /* "|V2" is NumPy's void of two bytes, which may be anything. */
    const char *typestrs[] = {foreign_ts, "<c4", "|b2", "|V2", "=V2", "<V4", "<V1", "<f1", "<c32", "", "<", "<f",
                              "<f0", "<f04", "<f4x", "xf4", "<x4", "<f4 ", "<f+4", "<i16"};
    for (size_t i = 0; i < sizeof typestrs / sizeof *typestrs; i++) {
        tack_dtype got = (tack_dtype)77;
        CHECK_STATUS(tack_dtype_from_typestr(typestrs[i], &got), TACK_ETYPE);
        CHECK(got == (tack_dtype)77 && strstr(tack_last_error(), "no Tack dtype"));
    }
    CHECK_STATUS(tack_dtype_from_typestr(foreign_ts, &(tack_dtype){0}), TACK_ETYPE);
    CHECK(strstr(tack_last_error(), "byte order"));
    const struct {
        const char *format;
        size_t itemsize;
    } formats[] = {{foreign_fmt, 4}, {"!i", 4}, {"?", 2}, {"c", 1}, {"e", 4}, {"Ze", 4}, {"Zf", 4}, {"Zi", 8},
                   {"Z", 8},         {"ff", 4}, {"f", 2}, {"i", 3}, {"", 1}, {"x", 1}, {"s", 1}};
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++) {
        tack_dtype got = (tack_dtype)77;
        if (!little && !strcmp(formats[i].format, "!i"))
            continue; /* network order is this machine's */
        CHECK_STATUS(tack_dtype_from_format(formats[i].format, formats[i].itemsize, &got), TACK_ETYPE);
        CHECK(got == (tack_dtype)77);
    }
    CHECK_STATUS(tack_dtype_from_format(foreign_fmt, 4, &(tack_dtype){0}), TACK_ETYPE);
    CHECK(strstr(tack_last_error(), "byte order"));
    char small[3] = "xy";
    CHECK_STATUS(tack_dtype_typestr(TACK_F32, small, sizeof small), TACK_EVALUE);
    CHECK(!strcmp(small, "xy"));
    CHECK_STATUS(tack_dtype_typestr(TACK_NDTYPES, small, sizeof small), TACK_ETYPE);
    CHECK_STATUS(tack_dtype_from_typestr("<f4", NULL), TACK_EVALUE);
    CHECK_STATUS(tack_dtype_from_format("f", 4, NULL), TACK_EVALUE);
}

/* ------------------------------------------------- imports of other protocols */

static int released;
static void count_release(void *ctx) { *(int *)ctx += 1; }

static struct tack_import host_import(void *data, int ndim, const int64_t *shape, const int64_t *strides)
{
    struct tack_import im = {
        .what = "the test's memory",
        .data = data,
        .device = {kDLCPU, 0},
        .dtype = TACK_F32,
        .ndim = ndim,
        .shape = shape,
        .strides = strides,
        .max_bytes = SIZE_MAX,
        .writable = 1,
        .release = count_release,
        .context = &released,
    };
    return im;
}

static void test_import_takes_byte_strides_and_releases_once(void)
{
    tack_device *d = cpu();
    float data[12] = {0};
    int64_t shape[2] = {3, 4}, strides[2] = {16, 4};
    released = 0;
    struct tack_import im = host_import(data, 2, shape, strides);
    tack_array *a = NULL, *v = NULL;
    CHECK_OK(tack_import_array(&im, NULL, d, &a));
    if (!a)
        return;
    CHECK(tack_array_data(a) == data && tack_array_ndim(a) == 2 && tack_array_shape(a)[1] == 4);
    CHECK(tack_array_writable(a) && tack_buffer_is_shared(tack_array_buffer(a)));
    int64_t flat[1] = {12};
    CHECK_OK(tack_array_reshape(a, 1, flat, &v));
    tack_array_release(a);
    CHECK(released == 0);
    tack_array_release(v);
    CHECK(released == 1);

    /* An extent of 1 leaves its stride free; a zero-size shape all of them. */
    int64_t one[2] = {1, 12}, free_stride[2] = {999, 4}, empty[2] = {0, 4}, any[2] = {-5, 3};
    im = host_import(data, 2, one, free_stride);
    CHECK_OK(tack_import_array(&im, NULL, d, &a));
    tack_array_release(a);
    im = host_import(NULL, 2, empty, any);
    CHECK_OK(tack_import_array(&im, NULL, d, &a));
    CHECK(tack_array_size(a) == 0);
    tack_array_release(a);
    /* Read-only memory is a read-only array. */
    im = host_import(data, 2, shape, NULL);
    im.writable = 0;
    CHECK_OK(tack_import_array(&im, d, NULL, &a));
    CHECK(!tack_array_writable(a) && tack_array_device(a) == d);
    tack_array_release(a);
    CHECK(released == 4);
    tack_device_release(d);
}

static void import_refuses(const char *file, int line, struct tack_import im, tack_device *asked,
                           tack_status want, const char *says)
{
    tack_device *d = cpu();
    long arrays = tack_array_live_count(), buffers = tack_buffer_live_count();
    released = 0;
    tack_array *a = (tack_array *)(uintptr_t)0x5e17;
    CHECK_STATUS_AT(file, line, tack_import_array(&im, asked, d, &a), want);
    CHECK_AT(file, line, a == (tack_array *)(uintptr_t)0x5e17);
    CHECK_AT(file, line, released == 0);
    CHECK_AT(file, line, strstr(tack_last_error(), says));
    CHECK_AT(file, line, tack_array_live_count() == arrays && tack_buffer_live_count() == buffers);
    tack_device_release(d);
}

static void test_import_refusals_keep_nothing(void)
{
    float data[16];
    int64_t shape[2] = {3, 4}, f_order[2] = {4, 12}, gap[2] = {32, 4}, neg[2] = {3, -4};
    struct tack_import im = host_import(data, 2, shape, f_order);
    import_refuses(__FILE__, __LINE__, im, NULL, TACK_EVALUE, "the test's memory is not C-contiguous");
    /* Element strides would pass here: these are bytes. */
    int64_t elements[2] = {4, 1};
    im = host_import(data, 2, shape, elements);
    import_refuses(__FILE__, __LINE__, im, NULL, TACK_EVALUE, "not C-contiguous");
    im = host_import(data, 2, shape, gap);
    import_refuses(__FILE__, __LINE__, im, NULL, TACK_EVALUE, "not C-contiguous");
    im = host_import(NULL, 2, shape, NULL);
    import_refuses(__FILE__, __LINE__, im, NULL, TACK_EVALUE, "NULL data pointer");
    im = host_import((char *)data + 2, 2, shape, NULL);
    import_refuses(__FILE__, __LINE__, im, NULL, TACK_EVALUE, "not aligned");
    im = host_import(data, 2, shape, NULL);
    im.max_bytes = 47;
    import_refuses(__FILE__, __LINE__, im, NULL, TACK_EVALUE, "48 bytes over 47");
    im = host_import(data, TACK_MAX_NDIM + 1, shape, NULL);
    import_refuses(__FILE__, __LINE__, im, NULL, TACK_EVALUE, "at most 64");
    im = host_import(data, -1, shape, NULL);
    import_refuses(__FILE__, __LINE__, im, NULL, TACK_EVALUE, "negative");
    im = host_import(data, 2, neg, NULL);
    import_refuses(__FILE__, __LINE__, im, NULL, TACK_EVALUE, "negative");
    im = host_import(data, 2, shape, NULL);
    im.dtype = TACK_NDTYPES;
    import_refuses(__FILE__, __LINE__, im, NULL, TACK_ETYPE, "not a Tack dtype");
    /* Memory on a device type no backend wraps. */
    im = host_import(data, 2, shape, NULL);
    im.device.device_type = kDLVulkan;
    import_refuses(__FILE__, __LINE__, im, NULL, TACK_EVALUE, "not supported");
    CHECK_STATUS(tack_import_array(NULL, NULL, NULL, &(tack_array *){NULL}), TACK_EVALUE);
    im = host_import(data, 2, shape, NULL);
    CHECK_STATUS(tack_import_array(&im, NULL, NULL, NULL), TACK_EVALUE);
}


int main(void)
{
    check_each_leaves_nothing();
    RUN(test_dltensor_view_is_the_arrays_own_record);
    RUN(test_allocator_makes_zeroed_exports);
    RUN(test_allocator_refusals_allocate_nothing);
    RUN(test_work_stream_of_host_memory_is_none);
    RUN(test_every_dtype_round_trips_through_its_spellings);
    RUN(test_the_new_dtypes_spell_as_the_ecosystem_does);
    RUN(test_format_integer_codes_go_by_itemsize);
    RUN(test_other_spellings_have_no_dtype);
    RUN(test_import_takes_byte_strides_and_releases_once);
    RUN(test_import_refusals_keep_nothing);
    CHECK_DONE();
}
