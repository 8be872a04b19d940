/* DLPack export and import through the C API, with hand-built tensors. */
#include <pthread.h>
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

static tack_array *arange(tack_device *d, int64_t n)
{
    tack_array *a = NULL;
    int64_t shape[1] = {n};
    CHECK_OK(tack_array_empty(d, TACK_F32, 1, shape, 0, &a));
    for (int64_t i = 0; i < n; i++)
        ((float *)tack_array_data(a))[i] = (float)i;
    return a;
}

static void test_export_legacy_fields(void)
{
    tack_device *d = cpu();
    tack_array *a = arange(d, 24), *v = NULL;
    int64_t shape[3] = {2, 3, 4};
    CHECK_OK(tack_array_reshape(a, 3, shape, &v));
    DLManagedTensor *m = NULL;
    long before = tack_dlpack_live_exports();
    CHECK_OK(tack_array_to_dlpack(v, &m));
    CHECK(tack_dlpack_live_exports() == before + 1);
    DLTensor *t = &m->dl_tensor;
    CHECK(t->data == tack_array_data(a));
    CHECK(t->device.device_type == kDLCPU && t->device.device_id == 0);
    CHECK(t->ndim == 3 && t->shape[0] == 2 && t->shape[1] == 3 && t->shape[2] == 4);
    CHECK(t->strides[0] == 12 && t->strides[1] == 4 && t->strides[2] == 1);
    CHECK(t->byte_offset == 0);
    CHECK(t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1);
    /* shape and strides live in the same allocation as the tensor */
    CHECK((char *)t->shape > (char *)m && (char *)t->shape < (char *)m + 256);
    CHECK(tack_buffer_is_shared(tack_array_buffer(a)));
    tack_array_release(v);
    tack_array_release(a); /* the export keeps the memory */
    CHECK(((float *)t->data)[23] == 23.0f);
    m->deleter(m);
    CHECK(tack_dlpack_live_exports() == before);
    tack_device_release(d);
}

static void test_export_versioned_readonly(void)
{
    tack_device *d = cpu();
    float host[3] = {1, 2, 3};
    int64_t shape[1] = {3};
    tack_array *ro = NULL, *rw = arange(d, 3);
    CHECK_OK(tack_array_wrap(d, (uint64_t)(uintptr_t)host, TACK_F32, 1, shape, 0, &ro));
    DLManagedTensorVersioned *m1 = NULL, *m2 = NULL;
    CHECK_OK(tack_array_to_dlpack_versioned(ro, &m1));
    CHECK_OK(tack_array_to_dlpack_versioned(rw, &m2));
    CHECK(m1->version.major == 1);
    CHECK(m1->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
    CHECK(!(m2->flags & DLPACK_FLAG_BITMASK_READ_ONLY));
    CHECK(m1->dl_tensor.data == host);
    tack_array_release(ro);
    tack_array_release(rw);
    m1->deleter(m1);
    m2->deleter(m2);
    tack_device_release(d);
}

/* A producer's tensor with a counting deleter. */
struct producer {
    DLManagedTensorVersioned v;
    DLManagedTensor l;
    int64_t shape[4], strides[4];
    float data[64];
    int deleted;
};

static void del_v(DLManagedTensorVersioned *m) { ((struct producer *)m->manager_ctx)->deleted++; }
static void del_l(DLManagedTensor *m) { ((struct producer *)m->manager_ctx)->deleted++; }

static void producer_init(struct producer *p)
{
    memset(p, 0, sizeof *p);
    p->shape[0] = 4;
    p->shape[1] = 8;
    DLTensor t = {.data = p->data, .device = {.device_type = kDLCPU, .device_id = 0}, .ndim = 2,
                  .dtype = {.code = kDLFloat, .bits = 32, .lanes = 1}, .shape = p->shape, .strides = NULL,
                  .byte_offset = 0};
    p->v.version.major = 1;
    p->v.version.minor = 0;
    p->v.manager_ctx = p;
    p->v.deleter = del_v;
    p->v.dl_tensor = t;
    p->l.manager_ctx = p;
    p->l.deleter = del_l;
    p->l.dl_tensor = t;
}

static void test_import_lifetime_over_reshapes(void)
{
    tack_device *d = cpu();
    struct producer p;
    producer_init(&p);
    tack_array *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(tack_array_from_dlpack_versioned(&p.v, NULL, d, &a, NULL));
    CHECK(a && tack_array_data(a) == p.data && tack_array_writable(a));
    int64_t flat[1] = {32}, sq[2] = {2, 16};
    CHECK_OK(tack_array_reshape(a, 1, flat, &b));
    CHECK_OK(tack_array_reshape(b, 2, sq, &c));
    tack_array_release(a);
    tack_array_release(c);
    CHECK(p.deleted == 0);
    tack_array_release(b);
    CHECK(p.deleted == 1);
    /* legacy: the same rules */
    CHECK_OK(tack_array_from_dlpack(&p.l, NULL, NULL, &a));
    CHECK(a && tack_array_data(a) == p.data);
    tack_array_release(a);
    CHECK(p.deleted == 2);
    tack_device_release(d);
}

static void test_import_readonly_and_offset(void)
{
    struct producer p;
    producer_init(&p);
    p.v.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    p.v.dl_tensor.byte_offset = 16;
    p.shape[1] = 7;
    tack_array *a = NULL;
    CHECK_OK(tack_array_from_dlpack_versioned(&p.v, NULL, NULL, &a, NULL));
    CHECK(a && !tack_array_writable(a));
    CHECK(a && tack_array_data(a) == (char *)p.data + 16);
    float v = 1;
    CHECK_STATUS(tack_array_fill(a, &v), TACK_ERUNTIME);
    tack_array_release(a);
    CHECK(p.deleted == 1);
}

struct bad_case {
    const char *what;
    tack_status want;
    void (*mutate)(struct producer *);
};

static void null_data(struct producer *p) { p->v.dl_tensor.data = NULL; }
static void bad_strides(struct producer *p)
{
    p->strides[0] = 1;
    p->strides[1] = 4;
    p->v.dl_tensor.strides = p->strides;
}
static void unknown_device(struct producer *p) { p->v.dl_tensor.device.device_type = (DLDeviceType)99; }
static void metal(struct producer *p) { p->v.dl_tensor.device.device_type = kDLMetal; }
static void float8(struct producer *p)
{
    p->v.dl_tensor.dtype = (DLDataType){.code = kDLFloat8_e4m3fn, .bits = 8, .lanes = 1};
}
static void lanes(struct producer *p) { p->v.dl_tensor.dtype.lanes = 4; }
static void odd_bits(struct producer *p) { p->v.dl_tensor.dtype.bits = 7; }
static void neg_ndim(struct producer *p) { p->v.dl_tensor.ndim = -1; }
static void huge_ndim(struct producer *p) { p->v.dl_tensor.ndim = 1 << 30; }
static void neg_shape(struct producer *p) { p->shape[0] = -4; }
static void overflow_shape(struct producer *p)
{
    p->shape[0] = INT64_MAX;
    p->shape[1] = INT64_MAX;
}
static void null_shape(struct producer *p) { p->v.dl_tensor.shape = NULL; }
static void misaligned(struct producer *p) { p->v.dl_tensor.byte_offset = 2; }

static void test_import_refusals(void)
{
    const struct bad_case cases[] = {
        {"null data", TACK_EVALUE, null_data},
        {"strides", TACK_EVALUE, bad_strides},
        {"device 99", TACK_EVALUE, unknown_device},
        {"metal", TACK_EVALUE, metal},
        {"float8_e4m3fn", TACK_ETYPE, float8},
        {"lanes", TACK_ETYPE, lanes},
        {"7 bits", TACK_ETYPE, odd_bits},
        {"ndim -1", TACK_EVALUE, neg_ndim},
        {"ndim huge", TACK_EVALUE, huge_ndim},
        {"negative extent", TACK_EVALUE, neg_shape},
        {"overflow", TACK_EVALUE, overflow_shape},
        {"null shape", TACK_EVALUE, null_shape},
        {"misaligned", TACK_EVALUE, misaligned},
    };
    long arrays = tack_array_live_count(), buffers = tack_buffer_live_count();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct producer p;
        producer_init(&p);
        cases[i].mutate(&p);
        tack_array *a = NULL;
        int called = -1;
        tack_status st = tack_array_from_dlpack_versioned(&p.v, NULL, NULL, &a, &called);
        if (st != cases[i].want)
            fprintf(stderr, "case %s: got %s (%s)\n", cases[i].what, tack_status_name(st), tack_last_error());
        CHECK(st == cases[i].want);
        CHECK(a == NULL);
        CHECK(p.deleted == 0 && called == 0); /* not adopted: still the caller's */
        CHECK(strlen(tack_last_error()) > 10);
    }
    struct producer p;
    producer_init(&p);
    metal(&p);
    tack_array *a = NULL;
    tack_array_from_dlpack_versioned(&p.v, NULL, NULL, &a, NULL);
    CHECK(strstr(tack_last_error(), "copy=True") != NULL);
    CHECK(tack_array_live_count() == arrays && tack_buffer_live_count() == buffers);
}

static void test_import_future_version(void)
{
    struct producer p;
    producer_init(&p);
    p.v.version.major = 2;
    tack_array *a = NULL;
    int called = 0;
    CHECK_STATUS(tack_array_from_dlpack_versioned(&p.v, NULL, NULL, &a, &called), TACK_EBUFFER);
    CHECK(called == 1 && p.deleted == 1 && a == NULL);
}

static void test_import_device_rules(void)
{
    tack_device *d = cpu();
    struct producer p;
    producer_init(&p);
    p.v.dl_tensor.device.device_type = kDLCUDAHost; /* pinned host memory: a cpu array */
    tack_array *a = NULL;
    CHECK_OK(tack_array_from_dlpack_versioned(&p.v, d, d, &a, NULL));
    CHECK(a && tack_array_device(a) == d);
    tack_array_release(a);
    CHECK(p.deleted == 1);
    tack_device_release(d);
}

static void *call_deleter(void *arg)
{
    DLManagedTensorVersioned *m = arg;
    m->deleter(m);
    return NULL;
}

static void test_deleter_on_another_thread(void)
{
    tack_device *d = cpu();
    tack_array *a = arange(d, 1000);
    DLManagedTensorVersioned *m = NULL;
    CHECK_OK(tack_array_to_dlpack_versioned(a, &m));
    long arrays = tack_array_live_count();
    tack_array_release(a);
    CHECK(tack_array_live_count() == arrays); /* kept alive by the export */
    pthread_t th;
    CHECK(pthread_create(&th, NULL, call_deleter, m) == 0);
    pthread_join(th, NULL);
    CHECK(tack_array_live_count() == arrays - 1);
    tack_device_release(d);
}

static void test_export_null_out_changes_nothing(void)
{
    tack_device *d = cpu();
    tack_array *a = arange(d, 4);
    long exports = tack_dlpack_live_exports();
    CHECK_STATUS(tack_array_to_dlpack(a, NULL), TACK_EVALUE);
    CHECK_STATUS(tack_array_to_dlpack_versioned(a, NULL), TACK_EVALUE);
    CHECK_STATUS(tack_array_to_dlpack_stream(a, -1, NULL), TACK_EVALUE);
    CHECK_STATUS(tack_array_to_dlpack_versioned_stream(a, -1, NULL), TACK_EVALUE);
    CHECK(tack_dlpack_live_exports() == exports);
    CHECK(!tack_buffer_is_shared(tack_array_buffer(a))); /* no share() either */
    long arrays = tack_array_live_count();
    tack_array_release(a); /* the only reference: nothing was retained */
    CHECK(tack_array_live_count() == arrays - 1);
    tack_device_release(d);
}

static void test_round_trip(void)
{
    tack_device *d = cpu();
    tack_array *a = arange(d, 10), *b = NULL;
    DLManagedTensorVersioned *m = NULL;
    CHECK_OK(tack_array_to_dlpack_versioned(a, &m));
    CHECK_OK(tack_array_from_dlpack_versioned(m, NULL, d, &b, NULL));
    CHECK(b && tack_array_data(b) == tack_array_data(a));
    long exports = tack_dlpack_live_exports();
    tack_array_release(a);
    tack_array_release(b); /* calls our own deleter, which releases a */
    CHECK(tack_dlpack_live_exports() == exports - 1);
    tack_device_release(d);
}


int main(void)
{
    check_each_leaves_nothing();
    RUN(test_export_legacy_fields);
    RUN(test_export_versioned_readonly);
    RUN(test_import_lifetime_over_reshapes);
    RUN(test_import_readonly_and_offset);
    RUN(test_import_refusals);
    RUN(test_import_future_version);
    RUN(test_import_device_rules);
    RUN(test_deleter_on_another_thread);
    RUN(test_export_null_out_changes_nothing);
    RUN(test_round_trip);
    CHECK_DONE();
}
