/* The C API of devices, buffers and arrays on the CPU backend. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"
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
    CHECK(tack_device_can_wrap(a, (DLDevice){.device_type = kDLCUDAHost, .device_id = 3}));
    CHECK(!tack_device_can_wrap(a, (DLDevice){.device_type = kDLCUDA, .device_id = 0}));
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
    tack_option opt = {.name = "external_context", .field = "context", .value = 7};
    CHECK_STATUS(tack_device_open("cpu", &opt, 1, &d), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "external_context") != NULL);
    CHECK(d == (tack_device *)0x1); /* untouched on failure */
    CHECK(tack_backend_options("cpu") && tack_backend_options("cpu")[0] == NULL);
    CHECK(tack_backend_options("metal") == NULL);
}

/* A binding that converts option values itself checks the names first by
 * the rule tack_device_open applies, so that a misspelled option is
 * refused as such whatever its value; the check opens nothing. */
static void test_option_names_checked_without_opening(void)
{
    tack_option good = {"external_context", "driver", 1}, bad = {"external_contxt", NULL, 0};
    tack_option both[2] = {good, bad};
    CHECK_OK(tack_device_check_options("level_zero", &good, 1));
    CHECK_OK(tack_device_check_options("cpu", NULL, 0));
    CHECK_STATUS(tack_device_check_options("level_zero", both, 2), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "'external_contxt'") != NULL);
    CHECK(strstr(tack_last_error(), "'external_context'") != NULL); /* what it accepts */
    CHECK_STATUS(tack_device_check_options("cpu", &good, 1), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "external_context") != NULL);
    CHECK_STATUS(tack_device_check_options("nope", NULL, 0), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "'cpu'") != NULL);
    CHECK_STATUS(tack_device_check_options(NULL, NULL, 0), TACK_EVALUE);
    CHECK_STATUS(tack_device_check_options("cpu", NULL, 1), TACK_EVALUE);
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

/* A C reader of a serialised array (as the extension's unpickler) refuses
 * a layout before it has memory for it, by the rule tack_array_empty
 * applies, and learns the bytes to expect. */
static void test_check_shape_without_memory(void)
{
    long arrays = tack_array_live_count(), buffers = tack_buffer_live_count();
    size_t nbytes = 7;
    int64_t shape[2] = {3, 5};
    CHECK_OK(tack_array_check_shape(TACK_F64, 2, shape, &nbytes));
    CHECK(nbytes == 120);
    CHECK_OK(tack_array_check_shape(TACK_U8, 0, NULL, &nbytes));
    CHECK(nbytes == 1);
    nbytes = 7;
    int64_t neg[2] = {3, -5};
    CHECK_STATUS(tack_array_check_shape(TACK_F32, 2, neg, &nbytes), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "negative") != NULL);
    int64_t huge[2] = {INT64_MAX / 2, 4};
    CHECK_STATUS(tack_array_check_shape(TACK_F32, 2, huge, &nbytes), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "overflow") != NULL);
    CHECK_STATUS(tack_array_check_shape(TACK_F32, TACK_MAX_NDIM + 1, shape, &nbytes), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "at most 64") != NULL);
    CHECK_STATUS(tack_array_check_shape(TACK_F32, 1, NULL, &nbytes), TACK_EVALUE);
    CHECK_STATUS(tack_array_check_shape((tack_dtype)99, 2, shape, &nbytes), TACK_ETYPE);
    CHECK_STATUS(tack_array_check_shape(TACK_F32, 2, shape, NULL), TACK_EVALUE);
    CHECK(nbytes == 7); /* untouched by every refusal */
    CHECK(tack_array_live_count() == arrays && tack_buffer_live_count() == buffers);
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
    const char *want = "tack_array_export_memory: Backend cpu does not support memory export";
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
    /* The DLPack codes the specification gives each of them. */
    static const struct {
        tack_dtype dtype;
        const char *name, *short_name;
        uint8_t code, bits;
        size_t size, align;
    } rows[] = {
        {TACK_BOOL, "bool", "bool", kDLBool, 8, 1, 1},
        {TACK_F16, "float16", "f16", kDLFloat, 16, 2, 2},
        {TACK_BF16, "bfloat16", "bf16", kDLBfloat, 16, 2, 2},
        {TACK_C64, "complex64", "c64", kDLComplex, 64, 8, 4},
        {TACK_C128, "complex128", "c128", kDLComplex, 128, 16, 8},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        uint8_t code = 0, bits = 0;
        tack_dtype back = TACK_NDTYPES;
        CHECK_OK(tack_dtype_to_dlpack(rows[i].dtype, &code, &bits));
        CHECK(code == rows[i].code && bits == rows[i].bits);
        CHECK(!strcmp(tack_dtype_name(rows[i].dtype), rows[i].name));
        CHECK(!strcmp(tack_dtype_short_name(rows[i].dtype), rows[i].short_name));
        CHECK_OK(tack_dtype_from_name(rows[i].short_name, &back));
        CHECK(back == rows[i].dtype);
        CHECK(tack_dtype_size(rows[i].dtype) == rows[i].size);
        CHECK(tack_dtype_alignment(rows[i].dtype) == rows[i].align);
    }
    tack_dtype d = TACK_I8;
    CHECK_STATUS(tack_dtype_from_dlpack(kDLFloat8_e4m3fn, 8, 1, &d), TACK_ETYPE);
    CHECK_STATUS(tack_dtype_from_dlpack(kDLComplex, 32, 1, &d), TACK_ETYPE);
    CHECK_STATUS(tack_dtype_from_dlpack(kDLBfloat, 32, 1, &d), TACK_ETYPE);
    CHECK_STATUS(tack_dtype_from_dlpack(kDLBool, 16, 1, &d), TACK_ETYPE);
    CHECK_STATUS(tack_dtype_from_dlpack(kDLFloat, 32, 4, &d), TACK_ETYPE);
    CHECK_STATUS(tack_dtype_from_name("complex32", &d), TACK_ETYPE);
    CHECK_STATUS(tack_dtype_from_name("float8_e4m3fn", &d), TACK_ETYPE);
    CHECK(d == TACK_I8);
}

/* Bit patterns NumPy (float16) and ml_dtypes (bfloat16) give, and the
 * cases where one rounding from double differs from rounding to float32
 * first, as PyTorch and ml_dtypes do. */
static void test_half_conversions(void)
{
    static const struct {
        double v;
        uint16_t f16, bf16;
    } cases[] = {
        {1.0, 0x3c00, 0x3f80},
        {-2.0, 0xc000, 0xc000},
        {0.0, 0x0000, 0x0000},
        {-0.0, 0x8000, 0x8000},
        {65504.0, 0x7bff, 0x4780},
        {65519.99, 0x7bff, 0x4780},
        {65520.0, 0x7c00, 0x4780},      /* the tie above float16's largest goes to even: infinity */
        {0x1p-24, 0x0001, 0x3380},      /* float16's smallest subnormal */
        {0x1p-25, 0x0000, 0x3300},      /* half of it: a tie, to even */
        {0x1.0000000001p-25, 0x0001, 0x3300},
        {0x1.8p-24, 0x0002, 0x33c0},    /* 1.5 subnormal units: a tie, to even (2) */
        {0x1.ffcp-15, 0x0400, 0x3880},  /* rounds up out of the subnormals */
        {1 + 0x1p-11, 0x3c00, 0x3f80},  /* a tie: even */
        {1 + 0x1p-11 + 0x1p-40, 0x3c01, 0x3f80}, /* above the tie; float32 would make it one */
        {1.00390625, 0x3c04, 0x3f80},   /* bfloat16's tie between 1 and 1 + 2^-7: even */
        {1.00390625 + 0x1p-40, 0x3c04, 0x3f81},
        {1.01171875, 0x3c0c, 0x3f82},   /* a tie to the even 0x3f82 */
        {0x1.fep127, 0x7c00, 0x7f7f},   /* bfloat16's largest */
        {0x1.ffp127, 0x7c00, 0x7f80},   /* the tie above it: infinity */
        {1e300, 0x7c00, 0x7f80},
        {-1e300, 0xfc00, 0xff80},
        {0x1p-133, 0x0000, 0x0001},     /* bfloat16's smallest subnormal */
        {0x1p-134, 0x0000, 0x0000},
        {5e-324, 0x0000, 0x0000},
        {INFINITY, 0x7c00, 0x7f80},
        {-INFINITY, 0xfc00, 0xff80},
        {NAN, 0x7e00, 0x7fc0},
        {-NAN, 0xfe00, 0xffc0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint16_t h = tack_float16_from_double(cases[i].v), b = tack_bfloat16_from_double(cases[i].v);
        if (h != cases[i].f16 || b != cases[i].bf16)
            fprintf(stderr, "%a: float16 %#06x (want %#06x), bfloat16 %#06x (want %#06x)\n", cases[i].v, h,
                    cases[i].f16, b, cases[i].bf16);
        CHECK(h == cases[i].f16 && b == cases[i].bf16);
    }
    /* A NaN of float16 never becomes an infinity, whatever its payload. */
    uint64_t signaling = 0x7ff0000000000001u;
    double s;
    memcpy(&s, &signaling, sizeof s);
    CHECK(tack_float16_from_double(s) == 0x7c01 && tack_bfloat16_from_double(s) == 0x7fc0);
    /* Every value of both formats comes back as it was. */
    int exact = 1;
    for (uint32_t bits = 0; bits <= 0xffff; bits++) {
        uint16_t b16 = (uint16_t)bits;
        double h = tack_float16_to_double(b16), b = tack_bfloat16_to_double(b16);
        exact &= isnan(h) ? (b16 & 0x7c00) == 0x7c00 && (b16 & 0x3ff) : tack_float16_from_double(h) == b16;
        exact &= isnan(b) ? (b16 & 0x7f80) == 0x7f80 && (b16 & 0x7f) : tack_bfloat16_from_double(b) == b16;
    }
    CHECK(exact);
    CHECK(tack_float16_to_double(0x0001) == 0x1p-24 && tack_float16_to_double(0x7bff) == 65504.0);
    CHECK(tack_bfloat16_to_double(0x3f81) == 1.0078125 && tack_bfloat16_to_double(0x0001) == 0x1p-133);
}

/* A fill stores the element's bytes, whatever the dtype. */
static void test_fill_new_dtypes(void)
{
    tack_device *d = cpu();
    int64_t shape[1] = {3};
    struct {
        tack_dtype dtype;
        unsigned char value[16];
    } cases[] = {
        {TACK_BOOL, {1}},
        {TACK_F16, {0x00, 0x3c}},
        {TACK_BF16, {0x80, 0x3f}},
        {TACK_C64, {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}},
        {TACK_C128, {0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x40}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tack_array *a = NULL;
        CHECK_OK(tack_array_empty(d, cases[i].dtype, 1, shape, 0, &a));
        if (!a)
            continue;
        size_t item = tack_dtype_size(cases[i].dtype);
        CHECK(tack_array_nbytes(a) == 3 * item);
        CHECK_OK(tack_array_fill(a, cases[i].value));
        unsigned char host[48];
        CHECK_OK(tack_array_copy_to_host(a, host, 3 * item));
        for (int k = 0; k < 3; k++)
            CHECK(!memcmp(host + (size_t)k * item, cases[i].value, item));
        tack_array_release(a);
    }
    /* A complex128 wrap needs its parts' alignment, not its size. */
    double mem[5];
    tack_array *w = NULL;
    CHECK_OK(tack_array_wrap(d, (uint64_t)(uintptr_t)(mem + 1), TACK_C128, 1, (int64_t[]){2}, 0, &w));
    tack_array_release(w);
    w = NULL;
    CHECK_STATUS(tack_array_wrap(d, (uint64_t)(uintptr_t)mem + 4, TACK_C128, 1, (int64_t[]){1}, 0, &w),
                 TACK_EVALUE);
    CHECK(w == NULL && strstr(tack_last_error(), "8 bytes its complex128"));
    tack_device_release(d);
}

/* The message has no fixed size: a 5,000-byte device name comes back whole,
 * UTF-8 intact (a 1,024-byte buffer once cut it inside a character). */
static void test_long_error_message(void)
{
    size_t n = 2500;
    char *name = malloc(2 * n + 1);
    CHECK(name != NULL);
    if (!name)
        return;
    for (size_t i = 0; i < n; i++)
        memcpy(name + 2 * i, "\xc3\xa9", 2); /* é */
    name[2 * n] = '\0';
    tack_device *d = NULL;
    CHECK_STATUS(tack_device_open(name, NULL, 0, &d), TACK_EVALUE);
    CHECK(d == NULL && strstr(tack_last_error(), name) != NULL);
    CHECK(strlen(tack_last_error()) > 2 * n);
    free(name);
}

/* A message may quote the one before it (tack_last_error() as an argument):
 * the old text must stay readable while the new one is formatted (ASan
 * reports a use after free otherwise). */
static void test_message_quoting_the_last(void)
{
    tack_error_set(TACK_EVALUE, "first %0600d", 1);
    for (int i = 0; i < 4; i++)
        tack_error_set(TACK_ERUNTIME, "again: %s", tack_last_error());
    const char *m = tack_last_error();
    CHECK(!strncmp(m, "again: again: again: again: first 000", 37));
    CHECK(strlen(m) == 4 * strlen("again: ") + strlen("first ") + 600);
}

/* A message names the public call that set it and only that one: once the
 * call has returned, by whichever return, a message set outside any public
 * call carries no name left over from it. */
static void test_message_names_only_the_call_under_way(void)
{
    tack_device *d = cpu();
    int64_t shape[1] = {4}, bad[1] = {5};
    tack_array *a = NULL, *r = NULL;
    CHECK_OK(tack_array_empty(d, TACK_F32, 1, shape, 0, &a));
    CHECK_STATUS(tack_array_reshape(a, 1, bad, &r), TACK_EVALUE); /* a return after the shape check */
    CHECK(!strncmp(tack_last_error(), "tack_array_reshape: ", 20));
    CHECK_STATUS(tack_array_reshape(a, 1, bad, NULL), TACK_EVALUE); /* the first return */
    CHECK(!strncmp(tack_last_error(), "tack_array_reshape: ", 20));
    tack_error_set(TACK_EVALUE, "set outside any call");
    CHECK(!strcmp(tack_last_error(), "set outside any call"));
    /* Named once, ahead of what was wrong. */
    CHECK_STATUS(tack_array_fill(a, NULL), TACK_EVALUE);
    CHECK(!strcmp(tack_last_error(), "tack_array_fill: array and value must not be NULL"));
    tack_array_release(a);
    tack_device_release(d);
}

/* tack_error_report leaves its text as given, never read as a format
 * (a %n in it would write through a missing argument), named after no
 * call, and hands back the status it was given. */
static void test_error_report_leaves_the_text_as_given(void)
{
    CHECK(tack_error_report(TACK_ERUNTIME, "100% of %s %n: no interpreter") == TACK_ERUNTIME);
    CHECK(!strcmp(tack_last_error(), "100% of %s %n: no interpreter"));
    CHECK(tack_error_report(TACK_EVALUE, NULL) == TACK_EVALUE);
    CHECK(!strcmp(tack_last_error(), ""));
}

/* A thread's message is freed when the thread exits (LeakSanitizer would
 * report it otherwise) and is not seen by other threads. */
static void *fail_in_thread(void *arg)
{
    (void)arg;
    tack_device *d = NULL;
    (void)tack_device_open("no-such-backend-in-a-thread", NULL, 0, &d);
    return (void *)(uintptr_t)(strstr(tack_last_error(), "no-such-backend-in-a-thread") != NULL);
}

static void test_message_per_thread(void)
{
    tack_error_set(TACK_EVALUE, "main thread's message");
    pthread_t t;
    void *seen = NULL;
    CHECK(pthread_create(&t, NULL, fail_in_thread, NULL) == 0);
    CHECK(pthread_join(t, &seen) == 0);
    CHECK(seen == (void *)1);
    CHECK(!strcmp(tack_last_error(), "main thread's message"));
}

/* The loaded library's version is the one these headers describe. */
static void test_version(void)
{
    CHECK(!strcmp(tack_version(), TACK_VERSION_STRING));
    CHECK(tack_version_number() == TACK_VERSION_NUMBER);
    CHECK(TACK_VERSION_NUMBER == TACK_VERSION_MAJOR * 10000 + TACK_VERSION_MINOR * 100 + TACK_VERSION_PATCH);
    char text[32];
    snprintf(text, sizeof text, "%d.%d.%d", TACK_VERSION_MAJOR, TACK_VERSION_MINOR, TACK_VERSION_PATCH);
    CHECK(!strcmp(tack_version(), text));
}

/* The finer statuses have names of their own, and stay apart from the
 * six (C code switches on them). */
static void test_status_names(void)
{
    CHECK(!strcmp(tack_status_name(TACK_ENODEVICE), "TACK_ENODEVICE"));
    CHECK(!strcmp(tack_status_name(TACK_ECOMPILE), "TACK_ECOMPILE"));
    CHECK(!strcmp(tack_status_name(TACK_ETIMEOUT), "TACK_ETIMEOUT"));
    CHECK(!strcmp(tack_status_name(TACK_EIO), "TACK_EIO"));
    CHECK(TACK_ENODEVICE > TACK_ENOMEM && TACK_EIO > TACK_ETIMEOUT);
}

int main(void)
{
    check_each_leaves_nothing();
    RUN(test_version);
    RUN(test_long_error_message);
    RUN(test_message_quoting_the_last);
    RUN(test_message_names_only_the_call_under_way);
    RUN(test_error_report_leaves_the_text_as_given);
    RUN(test_message_per_thread);
    RUN(test_status_names);
    RUN(test_device_registry);
    RUN(test_device_errors);
    RUN(test_option_names_checked_without_opening);
    RUN(test_empty_is_zeroed);
    RUN(test_shape_validation);
    RUN(test_check_shape_without_memory);
    RUN(test_reshape_shares_buffer);
    RUN(test_host_copies_and_readonly);
    RUN(test_wrap_release_runs_once);
    RUN(test_export_memory_unsupported);
    RUN(test_dtypes);
    RUN(test_half_conversions);
    RUN(test_fill_new_dtypes);
    CHECK_DONE();
}
