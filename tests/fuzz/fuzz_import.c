/*
 * libFuzzer target over the C DLPack import entry points,
 * tack_array_from_dlpack and tack_array_from_dlpack_versioned.
 *
 * Each input describes one managed tensor with every field under the
 * input's control: version, flags, device, ndim, extents, strides, dtype,
 * data pointer and byte offset. The tensor is built the way a real producer
 * builds one -- everything malloc'ed, the deleter frees it all -- so that
 * AddressSanitizer sees any read of the tensor after its deleter ran, any
 * second deleter call, and any read past the shape or strides arrays.
 *
 * A model of the documented rules (include/tack/exchange.h) says for each
 * input whether Tack must refuse it, must accept it, or may do either, and
 * which statuses a refusal may carry. The target checks:
 *   - a refused tensor is not adopted: the deleter did not run, except for a
 *     versioned tensor of an unknown major version (TACK_EBUFFER), whose
 *     deleter ran exactly once, as *deleter_called says; *out is untouched;
 *     a message is left;
 *   - an accepted tensor becomes an array with its shape, dtype, address
 *     and writability, reads back the producer's bytes, and its deleter runs
 *     exactly once, when the last array over it (reshapes, and the import of
 *     Tack's own export of it) is released, in an input-chosen order;
 *   - the live-array, live-buffer and live-export counters end where they
 *     started.
 *
 * Input layout: see `struct recipe` and read_recipe(); tests/fuzz/seeds.py
 * writes the seed corpus in this layout. Short inputs read as zeros: the
 * empty input is a valid 0-d int8 tensor.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tack/tack.h"

#define MAX_VIEWS 7
#define READ_CAP (1u << 16) /* tensors claiming more than this get a small buffer that is never read */

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_import: invariant broken: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

#define REQUIRE(cond, what)                                                                                  \
    do {                                                                                                     \
        if (!(cond))                                                                                         \
            die(what, #cond);                                                                                \
    } while (0)

/* ------------------------------------------------------------------ input */

struct reader {
    const uint8_t *p;
    size_t n;
};

static uint8_t rd_u8(struct reader *r)
{
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}

static uint64_t rd_raw(struct reader *r, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)rd_u8(r) << (8 * i);
    return v;
}

/* Values that sit on the edges Tack's checks must hold. */
static const int64_t special64[16] = {
    -1,
    -2,
    INT64_MIN,
    INT64_MAX,
    INT64_C(1) << 62,
    (INT64_C(1) << 62) + 1,
    INT64_C(1) << 61,
    INT64_C(1) << 60,
    INT64_C(1) << 32,
    (INT64_C(1) << 32) + 1,
    INT64_C(1) << 31,
    INT64_C(3037000500), /* about sqrt(2^63): squares overflow int64 */
    INT64_MAX / 4,
    INT64_MAX / 8 + 1,
    65536,
    INT64_C(0x5555555555555555),
};

/* One tag byte: small values most of the time, edges often, raw bytes when
 * the fuzzer asks for them. */
static int64_t rd_i64(struct reader *r)
{
    uint8_t t = rd_u8(r);
    if (t < 0xA0)
        return t & 0x0F;
    if (t < 0xB0)
        return special64[t & 0x0F];
    if (t < 0xC0)
        return -(int64_t)(t & 0x0F);
    return (int64_t)rd_raw(r, 8);
}

enum data_kind { DATA_BUFFER, DATA_NULL, DATA_WILD, DATA_MISALIGNED };
enum strides_kind { STRIDES_NULL, STRIDES_C, STRIDES_RAW, STRIDES_C_PERTURBED };

enum {
    MODE_VERSIONED = 1 << 0,
    MODE_ASK_CPU = 1 << 1,    /* pass the cpu device as `device` */
    MODE_DEFAULT_CPU = 1 << 2, /* pass the cpu device as `default_device` */
    MODE_NULL_DELETER = 1 << 3,
    MODE_NULL_MASK = 3 << 4,  /* 0x20: NULL out, 0x30: NULL tensor */
    MODE_NO_CALLED = 1 << 6,  /* deleter_called == NULL */
    MODE_ROUND_TRIP = 1 << 7, /* export the array and import the export */
};

struct view_recipe {
    int kind; /* 0 flat (-1), 1 flat (size), 2 the shape with a -1, 3 arbitrary */
    int ndim;
    int64_t shape[5];
};

struct recipe {
    uint8_t mode;
    int data_kind, misalign, strides_kind;
    uint32_t major, minor;
    uint64_t flags;
    int32_t device_type, device_id;
    int32_t ndim;
    uint8_t code, bits;
    uint16_t lanes;
    int null_shape;
    uint64_t byte_offset;
    uint64_t wild;
    int n_views;
    uint32_t drop_seed;
    int64_t extents[TACK_MAX_NDIM];
    int64_t strides[TACK_MAX_NDIM];
    struct view_recipe views[MAX_VIEWS];
};

/* (code, bits, alignment): a complex number is aligned as its parts. */
#define N_DTYPES 15
static const uint8_t valid_dtypes[N_DTYPES][3] = {
    {kDLInt, 8, 1},    {kDLUInt, 8, 1},   {kDLInt, 16, 2},    {kDLUInt, 16, 2},      {kDLInt, 32, 4},
    {kDLUInt, 32, 4},  {kDLInt, 64, 8},   {kDLUInt, 64, 8},   {kDLFloat, 32, 4},     {kDLFloat, 64, 8},
    {kDLBool, 8, 1},   {kDLFloat, 16, 2}, {kDLBfloat, 16, 2}, {kDLComplex, 64, 4}, {kDLComplex, 128, 8},
};

static const int32_t device_types[16] = {
    kDLCPU, kDLCUDA, kDLCUDAHost, kDLOpenCL, kDLVulkan, kDLMetal, kDLVPI, kDLROCM,
    kDLROCMHost, kDLExtDev, kDLCUDAManaged, kDLOneAPI, kDLWebGPU, kDLHexagon, 0, 19,
};

static const int32_t special_ndim[16] = {
    -1, -2, INT32_MIN, INT32_MAX, 64, 65, 66, 127, 128, 255, 256, 1 << 16, 1 << 20, 63, 1000, -64,
};

static int ndim_entries(int32_t ndim) { return ndim < 0 ? 0 : ndim > TACK_MAX_NDIM ? TACK_MAX_NDIM : ndim; }

static void read_recipe(struct reader *r, struct recipe *c)
{
    memset(c, 0, sizeof *c);
    c->mode = rd_u8(r);
    c->data_kind = rd_u8(r) % 4;
    c->misalign = rd_u8(r) % 8;
    c->strides_kind = rd_u8(r) % 4;

    uint8_t s = rd_u8(r);
    c->major = s < 0x80 ? DLPACK_MAJOR_VERSION : s < 0xC0 ? (uint32_t)(s - 0x80) : (uint32_t)rd_raw(r, 4);
    s = rd_u8(r);
    c->minor = s < 0xF0 ? (uint32_t)(s & 0x0F) : (uint32_t)rd_raw(r, 4);
    s = rd_u8(r);
    c->flags = (uint64_t)(s & 0x07) | (s & 0x80 ? rd_raw(r, 8) : 0);

    s = rd_u8(r);
    c->device_type = s < 0x80 ? kDLCPU : s < 0xC0 ? device_types[s & 0x0F] : (int32_t)rd_raw(r, 4);
    s = rd_u8(r);
    c->device_id = s < 0x80 ? 0 : s < 0xC0 ? (int32_t)(s & 0x0F) - 4 : (int32_t)rd_raw(r, 4);

    s = rd_u8(r);
    if (s < 0xC0)
        c->ndim = s % 8;
    else if (s < 0xE0)
        c->ndim = (int32_t)(s - 0xC0) + 50; /* 50..81: across TACK_MAX_NDIM */
    else if (s < 0xF0)
        c->ndim = special_ndim[s & 0x0F];
    else
        c->ndim = (int32_t)rd_raw(r, 4);

    s = rd_u8(r);
    if (s < 0xE0) {
        c->code = valid_dtypes[s % N_DTYPES][0];
        c->bits = valid_dtypes[s % N_DTYPES][1];
    } else {
        c->code = rd_u8(r);
        c->bits = rd_u8(r);
    }
    s = rd_u8(r);
    c->lanes = s < 0xF0 ? 1 : (uint16_t)rd_raw(r, 2);

    c->null_shape = rd_u8(r) == 0xFF;

    s = rd_u8(r);
    if (s < 0x80)
        c->byte_offset = 0;
    else if (s < 0xC0)
        c->byte_offset = s & 0x3F;
    else if (s < 0xD0)
        c->byte_offset = (uint64_t)special64[s & 0x0F];
    else
        c->byte_offset = rd_raw(r, 8);

    if (c->data_kind == DATA_WILD) {
        s = rd_u8(r);
        if (s < 0x40)
            c->wild = UINTPTR_MAX - (uintptr_t)(s & 0x3F);
        else if (s < 0x80)
            c->wild = (uint64_t)(s & 0x3F);
        else
            c->wild = rd_raw(r, 8);
    }

    s = rd_u8(r);
    c->n_views = s % (MAX_VIEWS + 1);
    c->drop_seed = (uint32_t)rd_raw(r, 4);

    int n = ndim_entries(c->ndim);
    for (int i = 0; i < n; i++)
        c->extents[i] = rd_i64(r);
    if (c->strides_kind == STRIDES_RAW) {
        for (int i = 0; i < n; i++)
            c->strides[i] = rd_i64(r);
    }
    int perturb_dim = 0;
    int64_t perturb_value = 0;
    if (c->strides_kind == STRIDES_C_PERTURBED) {
        perturb_dim = n ? rd_u8(r) % n : 0;
        perturb_value = rd_i64(r);
    }
    if (c->strides_kind == STRIDES_C || c->strides_kind == STRIDES_C_PERTURBED) {
        /* Element strides of a C-contiguous layout; wraps silently for
         * absurd shapes, which is itself a hostile input. */
        uint64_t step = 1;
        for (int i = n - 1; i >= 0; i--) {
            c->strides[i] = (int64_t)step;
            step *= (uint64_t)c->extents[i];
        }
        if (n && c->strides_kind == STRIDES_C_PERTURBED)
            c->strides[perturb_dim] = perturb_value;
    }

    for (int v = 0; v < c->n_views; v++) {
        struct view_recipe *vr = &c->views[v];
        vr->kind = rd_u8(r) % 4;
        if (vr->kind == 2) {
            vr->ndim = rd_u8(r); /* position of the -1, reduced later */
        } else if (vr->kind == 3) {
            vr->ndim = rd_u8(r) % 6;
            for (int i = 0; i < vr->ndim; i++)
                vr->shape[i] = rd_i64(r);
        }
    }
}

/* ------------------------------------------------------------------ producer */

/* What the producer knows about its tensor; lives on the target's stack. */
struct owner {
    void *tensor;
    int64_t *shape;
    int64_t *strides;
    unsigned char *buffer;
    long calls;
};

static void owner_free_parts(struct owner *o)
{
    free(o->shape);
    free(o->strides);
    free(o->buffer);
    free(o->tensor);
    o->shape = o->strides = NULL;
    o->buffer = NULL;
    o->tensor = NULL;
}

static void owner_deleted(struct owner *o, void *self)
{
    if (o->tensor != self)
        die("a deleter was called with a tensor it was not given", NULL);
    if (++o->calls > 1)
        die("a deleter was called twice", NULL);
    owner_free_parts(o);
}

static void delete_legacy(DLManagedTensor *self) { owner_deleted(self->manager_ctx, self); }
static void delete_versioned(DLManagedTensorVersioned *self) { owner_deleted(self->manager_ctx, self); }

/* ------------------------------------------------------------------ model */

enum { EITHER, MUST_REFUSE, MUST_ACCEPT };

struct model {
    int verdict;
    unsigned allowed; /* bit per tack_status a refusal may carry */
    int known_size;   /* size and nbytes are meaningful */
    uint64_t size, nbytes;
    int64_t item, align;
};

#define BIT(s) (1u << (s))

static void refuse(struct model *m, tack_status st)
{
    m->verdict = MUST_REFUSE;
    m->allowed |= BIT(st);
}

static int host_type(int32_t t) { return t == kDLCPU || t == kDLCUDAHost || t == kDLROCMHost; }
static int gpu_type(int32_t t) { return t == kDLCUDA || t == kDLCUDAManaged || t == kDLROCM || t == kDLOneAPI; }

/* The documented rules, written from exchange.h and the spec's failure
 * table, not from import.c. */
static void judge(const struct recipe *c, const void *data, const int64_t *shape, const int64_t *strides,
                  struct model *m)
{
    memset(m, 0, sizeof *m);
    m->verdict = MUST_ACCEPT;
    int lenient = 0; /* the rules leave this input's outcome open */

    if (c->ndim < 0 || c->ndim > TACK_MAX_NDIM)
        refuse(m, TACK_EVALUE);
    else if (c->ndim > 0 && !shape)
        refuse(m, TACK_EVALUE);

    int dtype_ok = 0, align = 0;
    for (int i = 0; i < N_DTYPES; i++) {
        if (valid_dtypes[i][0] == c->code && valid_dtypes[i][1] == c->bits) {
            dtype_ok = 1;
            align = valid_dtypes[i][2];
        }
    }
    if (!dtype_ok || c->lanes != 1)
        refuse(m, TACK_ETYPE);
    m->item = dtype_ok ? c->bits / 8 : 0;
    m->align = align;

    if (!host_type(c->device_type)) {
        if (gpu_type(c->device_type)) {
            /* A GPU tensor on the cpu device is a RuntimeError; without
             * `device`, whether it imports depends on the GPU driver. */
            m->allowed |= BIT(TACK_EVALUE) | BIT(TACK_ERUNTIME);
            if (c->mode & MODE_ASK_CPU)
                m->verdict = MUST_REFUSE;
            else
                lenient = 1;
        } else {
            refuse(m, TACK_EVALUE); /* unknown, Metal, or no backend wraps it */
        }
    }

    if (c->ndim < 0 || c->ndim > TACK_MAX_NDIM || (c->ndim > 0 && !shape))
        goto done;

    int zero = 0, negative = 0;
    for (int i = 0; i < c->ndim; i++) {
        negative |= shape[i] < 0;
        zero |= shape[i] == 0;
    }
    if (negative) {
        refuse(m, TACK_EVALUE);
        goto done;
    }
    unsigned __int128 count = 1;
    int overflow = 0;
    for (int i = 0; i < c->ndim && !overflow; i++) {
        count *= (unsigned __int128)(uint64_t)shape[i];
        overflow = count > (unsigned __int128)INT64_MAX;
    }
    if (zero) {
        /* Zero elements, but absurd extents beside the zero may be refused. */
        for (int i = 0; i < c->ndim; i++)
            if ((uint64_t)shape[i] > (uint64_t)1 << 40) {
                lenient = 1;
                m->allowed |= BIT(TACK_EVALUE);
            }
        count = 0;
        overflow = 0;
        /* So may extents whose nonzero product, in bytes, overflows: such
         * an array has no strides a consumer could represent. */
        unsigned __int128 nz = m->item ? (unsigned __int128)m->item : 1;
        for (int i = 0; i < c->ndim; i++)
            if (shape[i]) {
                nz *= (unsigned __int128)(uint64_t)shape[i];
                if (nz > (unsigned __int128)INT64_MAX) {
                    lenient = 1;
                    m->allowed |= BIT(TACK_EVALUE);
                    break;
                }
            }
    }
    if (overflow || (m->item && count * (unsigned __int128)m->item > (unsigned __int128)INT64_MAX)) {
        refuse(m, TACK_EVALUE);
        goto done;
    }
    m->known_size = 1;
    m->size = (uint64_t)count;
    m->nbytes = m->size * (uint64_t)(m->item ? m->item : 1);

    if (m->size == 0) {
        /* Nothing is ever read: data, strides and alignment may go either
         * way, but a refusal must still be a ValueError. */
        if (!data || strides || c->byte_offset) {
            lenient = 1;
            m->allowed |= BIT(TACK_EVALUE);
        }
        goto done;
    }
    if (!data)
        refuse(m, TACK_EVALUE);
    if (strides) {
        uint64_t expect = 1;
        for (int i = c->ndim - 1; i >= 0; i--) {
            if (shape[i] != 1 && (uint64_t)strides[i] != expect)
                refuse(m, TACK_EVALUE);
            expect *= (uint64_t)shape[i];
        }
    }
    if (data && m->item) {
        uintptr_t base = (uintptr_t)data;
        if (c->byte_offset > (uint64_t)(UINTPTR_MAX - base) || (base + c->byte_offset) % (uint64_t)m->align)
            refuse(m, TACK_EVALUE);
        /* Memory that would run past the end of the address space cannot
         * be a real tensor; Tack may or may not notice. */
        else if (m->nbytes > UINTPTR_MAX - (base + c->byte_offset)) {
            lenient = 1;
            m->allowed |= BIT(TACK_EVALUE);
        }
    }
done:
    if (m->verdict == MUST_ACCEPT && lenient)
        m->verdict = EITHER;
}

/* ------------------------------------------------------------------ checks */

static tack_device *cpu_device(void)
{
    static tack_device *cpu;
    if (!cpu && tack_device_open("cpu", NULL, 0, &cpu) != TACK_OK)
        die("cannot open the cpu device", tack_last_error());
    return cpu;
}

/* FUZZ_IMPORT_VERBOSE=1 describes each input and its outcome on stderr. */
static int verbose(void)
{
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("FUZZ_IMPORT_VERBOSE");
        v = e && *e && *e != '0';
    }
    return v;
}

static int documented(tack_status st)
{
    return st == TACK_EVALUE || st == TACK_ETYPE || st == TACK_ERUNTIME || st == TACK_EBUFFER;
}

static tack_array *const UNTOUCHED = (tack_array *)(uintptr_t)0x7ac0;

static uint32_t next_rand(uint32_t *s)
{
    /* xorshift32; never 0 */
    uint32_t x = *s ? *s : 0x9e3779b9u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

/* Reshapes the import as the recipe says; every reshape that fails must
 * leave nothing behind. Returns the number of views added to holders. */
static int make_views(const struct recipe *c, tack_array *a, tack_array **holders)
{
    int made = 0;
    int nd = tack_array_ndim(a);
    size_t size = tack_array_size(a);
    for (int v = 0; v < c->n_views; v++) {
        const struct view_recipe *vr = &c->views[v];
        int64_t shape[TACK_MAX_NDIM];
        int ndim;
        switch (vr->kind) {
        case 0:
            ndim = 1;
            shape[0] = -1;
            break;
        case 1:
            ndim = 1;
            shape[0] = (int64_t)size;
            break;
        case 2:
            ndim = nd;
            memcpy(shape, tack_array_shape(a), (size_t)nd * sizeof *shape);
            if (nd)
                shape[vr->ndim % nd] = -1;
            break;
        default:
            ndim = vr->ndim;
            memcpy(shape, vr->shape, (size_t)ndim * sizeof *shape);
            break;
        }
        long arrays = tack_array_live_count(), buffers = tack_buffer_live_count();
        tack_array *out = UNTOUCHED;
        tack_status st = tack_array_reshape(a, ndim, shape, &out);
        if (st == TACK_OK) {
            REQUIRE(tack_array_size(out) == size, "a reshape changed the element count");
            REQUIRE(tack_array_data(out) == tack_array_data(a), "a reshape moved the data");
            REQUIRE(tack_array_buffer(out) == tack_array_buffer(a), "a reshape changed the buffer");
            REQUIRE(tack_array_writable(out) == tack_array_writable(a), "a reshape changed writability");
            holders[made++] = out;
        } else {
            REQUIRE(st == TACK_EVALUE, "a refused reshape is not a ValueError");
            REQUIRE(out == UNTOUCHED, "a refused reshape wrote *out");
            REQUIRE(tack_array_live_count() == arrays && tack_buffer_live_count() == buffers,
                    "a refused reshape left objects behind");
            REQUIRE(tack_last_error()[0], "a refused reshape left no message");
        }
    }
    return made;
}

/* Exports the array as Tack does for any consumer and imports the export:
 * the producer's memory must now also wait for that second import. */
static tack_array *round_trip(tack_array *a, int versioned)
{
    tack_array *b = NULL;
    long exports = tack_dlpack_live_exports();
    if (versioned) {
        DLManagedTensorVersioned *m = NULL;
        if (tack_array_to_dlpack_versioned(a, &m) != TACK_OK)
            die("exporting an imported array failed", tack_last_error());
        REQUIRE(!!(m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) == !tack_array_writable(a),
                "the export's read-only flag does not match the array");
        int called = -1;
        if (tack_array_from_dlpack_versioned(m, NULL, NULL, &b, &called) != TACK_OK)
            die("importing Tack's own export failed", tack_last_error());
        REQUIRE(called == 0, "importing Tack's own export called its deleter");
    } else {
        DLManagedTensor *m = NULL;
        if (tack_array_to_dlpack(a, &m) != TACK_OK)
            die("exporting an imported array failed", tack_last_error());
        REQUIRE(m->dl_tensor.ndim == tack_array_ndim(a), "the export's ndim differs");
        if (tack_array_from_dlpack(m, NULL, NULL, &b) != TACK_OK)
            die("importing Tack's own export failed", tack_last_error());
    }
    REQUIRE(tack_dlpack_live_exports() == exports + 1, "an adopted export is not counted live");
    REQUIRE(tack_array_data(b) == tack_array_data(a), "a round trip moved the data");
    REQUIRE(tack_array_size(b) == tack_array_size(a), "a round trip changed the size");
    REQUIRE(tack_array_ndim(b) == tack_array_ndim(a), "a round trip changed ndim");
    REQUIRE(tack_array_dtype(b) == tack_array_dtype(a), "a round trip changed the dtype");
    return b;
}

static void check_accepted(const struct recipe *c, const struct model *m, tack_array *a, const void *data,
                           const int64_t *shape, int readable)
{
    REQUIRE(a && a != UNTOUCHED, "an accepted import returned no array");
    REQUIRE(tack_array_ndim(a) == c->ndim, "the array's ndim differs from the tensor's");
    for (int i = 0; i < c->ndim; i++)
        REQUIRE(tack_array_shape(a)[i] == shape[i], "the array's shape differs from the tensor's");
    uint8_t code = 0, bits = 0;
    REQUIRE(tack_dtype_to_dlpack(tack_array_dtype(a), &code, &bits) == TACK_OK && code == c->code &&
                bits == c->bits,
            "the array's dtype differs from the tensor's");
    if (m->known_size) {
        REQUIRE(tack_array_size(a) == m->size, "the array's size differs from the product of the extents");
        REQUIRE(tack_array_nbytes(a) == m->size * (uint64_t)m->item, "the array's byte size is wrong");
    }
    REQUIRE((uintptr_t)tack_array_data(a) == (uintptr_t)data + (uintptr_t)c->byte_offset ||
                tack_array_size(a) == 0,
            "the array does not start at data + byte_offset");
    int writable = (c->mode & MODE_VERSIONED) ? !(c->flags & DLPACK_FLAG_BITMASK_READ_ONLY) : 1;
    REQUIRE(tack_array_writable(a) == writable, "the array's writability does not follow the flags");
    if (host_type(c->device_type))
        REQUIRE(!strcmp(tack_device_backend(tack_array_device(a)), "cpu"), "a host tensor was not imported on cpu");
    if (readable && tack_array_nbytes(a)) {
        size_t n = tack_array_nbytes(a);
        unsigned char *copy = malloc(n);
        REQUIRE(copy, "out of memory in the fuzz target");
        if (tack_array_copy_to_host(a, copy, n) != TACK_OK)
            die("reading an accepted host tensor failed", tack_last_error());
        REQUIRE(!memcmp(copy, (const char *)data + c->byte_offset, n), "the array does not read the producer's bytes");
        free(copy);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size)
{
    struct reader r = {bytes, size};
    static struct recipe c; /* large; one input at a time */
    read_recipe(&r, &c);
    tack_device *cpu = cpu_device();
    long arrays0 = tack_array_live_count(), buffers0 = tack_buffer_live_count(),
         exports0 = tack_dlpack_live_exports();

    int versioned = c.mode & MODE_VERSIONED;
    int null_tensor = (c.mode & MODE_NULL_MASK) == (3 << 4);
    int null_out = (c.mode & MODE_NULL_MASK) == (2 << 4);

    /* ---- build the tensor as a producer would: all on the heap */
    struct owner o = {0};
    int n = ndim_entries(c.ndim);
    if (!c.null_shape) {
        /* Exactly ndim entries (within range), so a read past them is caught. */
        o.shape = malloc((size_t)n * sizeof(int64_t) + (n ? 0 : 1));
        REQUIRE(o.shape, "out of memory in the fuzz target");
        memcpy(o.shape, c.extents, (size_t)n * sizeof(int64_t));
    }
    if (c.strides_kind != STRIDES_NULL) {
        o.strides = malloc((size_t)n * sizeof(int64_t) + (n ? 0 : 1));
        REQUIRE(o.strides, "out of memory in the fuzz target");
        memcpy(o.strides, c.strides, (size_t)n * sizeof(int64_t));
    }

    /* The buffer holds exactly the bytes the tensor claims when that is
     * small, so that reading one byte too many is caught; a tensor claiming
     * more gets a small buffer that nothing reads. */
    void *data = NULL;
    int readable = 0;
    if (c.data_kind == DATA_BUFFER || c.data_kind == DATA_MISALIGNED) {
        unsigned __int128 claim = 0;
        int small = c.ndim >= 0 && c.ndim <= TACK_MAX_NDIM && !c.null_shape;
        if (small) {
            claim = (unsigned __int128)(c.bits / 8 ? c.bits / 8 : 1) * (c.lanes ? c.lanes : 1);
            for (int i = 0; i < c.ndim && small; i++) {
                small = c.extents[i] >= 0;
                claim *= (unsigned __int128)(uint64_t)(small ? c.extents[i] : 0);
                small = small && claim <= READ_CAP;
            }
            claim += c.byte_offset;
            small = small && claim <= READ_CAP;
        }
        size_t misalign = c.data_kind == DATA_MISALIGNED ? (size_t)c.misalign : 0;
        size_t len = misalign + (small ? (size_t)claim : 64);
        o.buffer = malloc(len ? len : 1);
        REQUIRE(o.buffer, "out of memory in the fuzz target");
        for (size_t i = 0; i < len; i++)
            o.buffer[i] = (unsigned char)(i * 131u + 7u);
        data = o.buffer + misalign;
        readable = small;
    } else if (c.data_kind == DATA_WILD) {
        data = (void *)(uintptr_t)c.wild;
    }

    DLManagedTensor *legacy = NULL;
    DLManagedTensorVersioned *ver = NULL;
    DLTensor *t;
    if (versioned) {
        ver = calloc(1, sizeof *ver);
        REQUIRE(ver, "out of memory in the fuzz target");
        ver->version.major = c.major;
        ver->version.minor = c.minor;
        ver->manager_ctx = &o;
        ver->deleter = (c.mode & MODE_NULL_DELETER) ? NULL : delete_versioned;
        ver->flags = c.flags;
        t = &ver->dl_tensor;
        o.tensor = ver;
    } else {
        legacy = calloc(1, sizeof *legacy);
        REQUIRE(legacy, "out of memory in the fuzz target");
        legacy->manager_ctx = &o;
        legacy->deleter = (c.mode & MODE_NULL_DELETER) ? NULL : delete_legacy;
        t = &legacy->dl_tensor;
        o.tensor = legacy;
    }
    t->data = data;
    t->device.device_type = (DLDeviceType)c.device_type;
    t->device.device_id = c.device_id;
    t->ndim = c.ndim;
    t->dtype.code = c.code;
    t->dtype.bits = c.bits;
    t->dtype.lanes = c.lanes;
    t->shape = o.shape;
    t->strides = o.strides;
    t->byte_offset = c.byte_offset;

    /* ---- what the rules say */
    struct model m;
    judge(&c, data, o.shape, o.strides, &m);
    int future = versioned && c.major != DLPACK_MAJOR_VERSION;
    if (null_tensor) {
        m.verdict = MUST_REFUSE;
        m.allowed = BIT(TACK_EVALUE);
    } else if (future) {
        m.verdict = MUST_REFUSE;
        m.allowed = BIT(TACK_EBUFFER) | (null_out ? BIT(TACK_EVALUE) : 0);
    } else if (null_out) {
        m.verdict = MUST_REFUSE;
        m.allowed = BIT(TACK_EVALUE);
    }

    if (verbose()) {
        fprintf(stderr,
                "tensor: %s mode=0x%02x version=%u.%u flags=0x%llx device=(%d,%d) ndim=%d dtype=(%u,%u,%u) "
                "data=%p offset=%llu strides=%s shape=%s views=%d; rules: %s\n",
                versioned ? "versioned" : "legacy", c.mode, c.major, c.minor, (unsigned long long)c.flags,
                c.device_type, c.device_id, c.ndim, c.code, c.bits, c.lanes, data,
                (unsigned long long)c.byte_offset, o.strides ? "given" : "NULL", o.shape ? "given" : "NULL",
                c.n_views, m.verdict == MUST_ACCEPT ? "accept" : m.verdict == MUST_REFUSE ? "refuse" : "either");
        for (int i = 0; i < n; i++)
            fprintf(stderr, "  extent[%d]=%lld stride[%d]=%lld\n", i, (long long)c.extents[i], i,
                    (long long)(o.strides ? c.strides[i] : 0));
    }

    /* ---- import */
    tack_device *asked = (c.mode & MODE_ASK_CPU) ? cpu : NULL;
    tack_device *fallback = (c.mode & MODE_DEFAULT_CPU) ? cpu : NULL;
    tack_array *a = UNTOUCHED;
    tack_array **out = null_out ? NULL : &a;
    int called = -7;
    int *called_p = (c.mode & MODE_NO_CALLED) ? NULL : &called;
    tack_status st;
    if (versioned)
        st = tack_array_from_dlpack_versioned(null_tensor ? NULL : ver, asked, fallback, out, called_p);
    else
        st = tack_array_from_dlpack(null_tensor ? NULL : legacy, asked, fallback, out);

    int deleter = !(c.mode & MODE_NULL_DELETER);
    if (verbose())
        fprintf(stderr, "import: %s %s\n", tack_status_name(st), st == TACK_OK ? "" : tack_last_error());
    if (st != TACK_OK) {
        char why[160];
        snprintf(why, sizeof why, "%s: %s", tack_status_name(st), tack_last_error());
        if (m.verdict == MUST_ACCEPT)
            die("a tensor the rules accept was refused", why);
        if (!documented(st) || !(m.allowed & BIT(st)))
            die("a refusal carries a status the rules do not give for this tensor", why);
        REQUIRE(tack_last_error()[0], "a refusal left no message");
        REQUIRE(a == UNTOUCHED, "a refused import wrote *out");
        if (versioned && called_p)
            REQUIRE(called == 0 || called == 1, "*deleter_called is neither 0 nor 1");
        if (st == TACK_EBUFFER && future && !null_tensor) {
            /* The one refusal that takes ownership: released exactly once. */
            REQUIRE(o.calls == (deleter ? 1 : 0), "a tensor of an unknown major version was not released once");
            if (called_p)
                REQUIRE(called == 1, "*deleter_called does not report the release");
        } else {
            REQUIRE(o.calls == 0, "a refused tensor's deleter ran: the tensor was not the consumer's");
            if (versioned && called_p)
                REQUIRE(called == 0, "*deleter_called reports a release that did not happen");
        }
        if (o.calls == 0)
            owner_free_parts(&o);
        else
            REQUIRE(!o.tensor, "a deleter ran without freeing the tensor");
    } else {
        if (m.verdict == MUST_REFUSE)
            die("a tensor the rules refuse was accepted", NULL);
        REQUIRE(o.calls == 0, "an accepted tensor's deleter ran at import");
        if (versioned && called_p)
            REQUIRE(called == 0, "*deleter_called is set on an accepted import");
        check_accepted(&c, &m, a, data, o.shape, readable);

        tack_array *holders[MAX_VIEWS + 2];
        int nh = 0;
        holders[nh++] = a;
        nh += make_views(&c, a, holders + nh);
        if (c.mode & MODE_ROUND_TRIP) {
            tack_array *last = holders[nh - 1];
            holders[nh++] = round_trip(last, (c.drop_seed & 1) != 0);
        }
        REQUIRE(o.calls == 0, "the deleter ran while arrays were alive");

        uint32_t seed = c.drop_seed;
        for (int i = nh - 1; i > 0; i--) {
            int j = (int)(next_rand(&seed) % (uint32_t)(i + 1));
            tack_array *tmp = holders[i];
            holders[i] = holders[j];
            holders[j] = tmp;
        }
        for (int i = 0; i < nh; i++) {
            tack_array_release(holders[i]);
            if (i < nh - 1)
                REQUIRE(o.calls == 0, "the deleter ran before the last array over the memory went");
        }
        REQUIRE(o.calls == (deleter ? 1 : 0), "the deleter did not run exactly once after the last array went");
        if (!deleter)
            owner_free_parts(&o); /* a producer without a deleter frees by itself, after the consumer */
    }

    REQUIRE(tack_array_live_count() == arrays0, "live arrays did not return to where they started");
    REQUIRE(tack_buffer_live_count() == buffers0, "live buffers did not return to where they started");
    REQUIRE(tack_dlpack_live_exports() == exports0, "live exports did not return to where they started");
    return 0;
}
