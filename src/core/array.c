#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "internal.h"


long tack_array_live_count(void) { return tack_count_total(TACK_COUNT_ARRAYS); }

tack_status tack_ndim_refuse(int ndim)
{
    if (ndim < 0)
        return tack_error_set(TACK_EVALUE, "ndim is %d; a number of dimensions cannot be negative", ndim);
    if (ndim > TACK_MAX_NDIM)
        return tack_error_set(TACK_EVALUE, "ndim is %d; Tack arrays have at most %d dimensions", ndim,
                              TACK_MAX_NDIM);
    return tack_error_set(TACK_EVALUE, "a NULL shape for ndim %d; only 0-dimensional arrays have none", ndim);
}

tack_status tack_shape_check(tack_dtype dtype, int ndim, const int64_t *shape, size_t *size, size_t *nbytes)
{
    size_t itemsize = tack_dtype_size(dtype);
    if (!itemsize)
        return tack_error_set(TACK_ETYPE, "dtype %d is not a Tack dtype", (int)dtype);
    tack_status st = tack_ndim_check(ndim, shape);
    if (st != TACK_OK)
        return st;
    /* Products are bounded by INT64_MAX, not SIZE_MAX: extents and strides
     * are int64_t in DLPack, and an export computes the stride of every
     * extent, so even beside a zero extent the others' product must fit.
     * Overflow is checked with the multiplication itself: a division per
     * extent would be most of the cost of a small import. */
    int64_t n = 1;
    int zero = 0;
    for (int i = 0; i < ndim; i++) {
        int64_t e = shape[i];
        if (e < 0)
            return tack_error_set(TACK_EVALUE, "shape[%d] is negative (%lld); extents must be >= 0", i, (long long)e);
        if (e == 0)
            zero = 1;
        else if (__builtin_mul_overflow(n, e, &n))
            return tack_error_set(TACK_EVALUE, "shape is too large: the element count overflows");
    }
    int64_t bytes;
    if (__builtin_mul_overflow(n, (int64_t)itemsize, &bytes))
        return tack_error_set(TACK_EVALUE, "shape is too large: %lld elements of %zu bytes overflow", (long long)n,
                              itemsize);
    *size = zero ? 0 : (size_t)n;
    *nbytes = zero ? 0 : (size_t)bytes;
    return TACK_OK;
}

tack_status tack_array_check_shape(tack_dtype dtype, int ndim, const int64_t *shape, size_t *nbytes)
{
    TACK_PUBLIC_CALL();
    if (!nbytes)
        return tack_error_set(TACK_EVALUE, "nbytes must not be NULL");
    size_t size;
    return tack_shape_check(dtype, ndim, shape, &size, nbytes);
}

/* TACK_EVALUE, after tack_misuse_released, for an array already released:
 * going on would read or write a record that is no longer the array's. */
static tack_status refuse_released(const tack_array *a, const char *call)
{
    return tack_refuse_released(&a->refs, call, "array", a);
}

/* Fills a fresh array record `a` over `buffer`, whose reference it takes. */
static tack_array *array_init(tack_array *a, int in_buffer, tack_buffer *buffer, void *data, tack_dtype dtype,
                              int ndim, const int64_t *shape, size_t size, size_t nbytes, int writable)
{
    atomic_init(&a->refs, 1);
    a->in_buffer = in_buffer;
    a->buffer = buffer;
    a->data = data;
    a->dtype = dtype;
    a->ndim = ndim;
    a->writable = writable ? 1 : 0;
    a->size = size;
    a->nbytes = nbytes;
    if (ndim)
        memcpy(a->shape, shape, (size_t)ndim * sizeof *shape);
    tack_count_add(TACK_COUNT_ARRAYS, 1);
    return a;
}

/* Makes an array over `buffer`, taking over the caller's reference to it
 * (released on failure too). size and nbytes are the checked shape's. */
static tack_status array_adopt(tack_buffer *buffer, void *data, tack_dtype dtype, int ndim, const int64_t *shape,
                               size_t size, size_t nbytes, int writable, tack_array **out)
{
    tack_array *a = malloc(sizeof *a + (size_t)ndim * sizeof *shape);
    if (!a) {
        tack_buffer_release(buffer);
        return tack_error_set(TACK_ENOMEM, "out of memory allocating an array record");
    }
    *out = array_init(a, 0, buffer, data, dtype, ndim, shape, size, nbytes, writable);
    return TACK_OK;
}

tack_status tack_array_adopt_buffer(tack_buffer *buffer, tack_dtype dtype, int ndim, const int64_t *shape,
                                    size_t size, size_t nbytes, int writable, tack_array **out)
{
    return array_adopt(buffer, buffer->data, dtype, ndim, shape, size, nbytes, writable, out);
}

tack_status tack_array_wrap_memory(tack_device *device, void *data, tack_dtype dtype, int ndim, const int64_t *shape,
                                   size_t size, size_t nbytes, int writable, tack_release_fn release, void *context,
                                   tack_array **out)
{
    tack_buffer *b;
    tack_status st = tack_buffer_wrap_extra(device, data, nbytes, release, context,
                                            sizeof(tack_array) + (size_t)ndim * sizeof *shape, &b);
    if (st != TACK_OK)
        return st;
    *out = array_init((tack_array *)(void *)(b + 1), 1, b, data, dtype, ndim, shape, size, nbytes, writable);
    return TACK_OK;
}

static tack_status array_new(tack_buffer *buffer, void *data, tack_dtype dtype, int ndim, const int64_t *shape,
                             int writable, tack_array **out)
{
    size_t size, nbytes;
    tack_status st = tack_shape_check(dtype, ndim, shape, &size, &nbytes);
    if (st != TACK_OK)
        return st;
    if ((uintptr_t)data - (uintptr_t)buffer->data + nbytes > buffer->nbytes && !(nbytes == 0 && buffer->nbytes == 0))
        return tack_error_set(TACK_EVALUE, "an array of %zu bytes does not fit a buffer of %zu bytes", nbytes,
                              buffer->nbytes);
    return array_adopt(tack_buffer_retain(buffer), data, dtype, ndim, shape, size, nbytes, writable, out);
}

tack_status tack_array_empty(tack_device *device, tack_dtype dtype, int ndim, const int64_t *shape,
                             int exportable, tack_array **out)
{
    TACK_PUBLIC_CALL();
    if (!device || !out)
        return tack_error_set(TACK_EVALUE, "device and out must not be NULL");
    size_t size, nbytes;
    tack_status st = tack_refuse_released(&device->refs, "tack_array_empty", "device", device);
    if (st == TACK_OK)
        st = tack_shape_check(dtype, ndim, shape, &size, &nbytes);
    if (st != TACK_OK)
        return st;
    tack_buffer *b;
    st = tack_buffer_alloc(device, nbytes, exportable, &b);
    if (st != TACK_OK)
        return st;
    return array_adopt(b, b->data, dtype, ndim, shape, size, nbytes, 1, out);
}

tack_status tack_array_from_buffer(tack_buffer *buffer, tack_dtype dtype, int ndim, const int64_t *shape,
                                   int writable, tack_array **out)
{
    TACK_PUBLIC_CALL();
    if (!buffer || !out)
        return tack_error_set(TACK_EVALUE, "buffer and out must not be NULL");
    tack_status st = tack_refuse_released(&buffer->refs, "tack_array_from_buffer", "buffer", buffer);
    if (st != TACK_OK)
        return st;
    return array_new(buffer, buffer->data, dtype, ndim, shape, writable, out);
}

tack_status tack_array_wrap(tack_device *device, uint64_t address, tack_dtype dtype, int ndim,
                            const int64_t *shape, int writable, tack_array **out)
{
    TACK_PUBLIC_CALL();
    if (!device || !out)
        return tack_error_set(TACK_EVALUE, "device and out must not be NULL");
    tack_status live = tack_refuse_released(&device->refs, "tack_array_wrap", "device", device);
    if (live != TACK_OK)
        return live;
    if (address > UINTPTR_MAX)
        return tack_error_set(TACK_EVALUE, "address 0x%llx does not fit a pointer here",
                              (unsigned long long)address);
    size_t size, nbytes;
    tack_status st = tack_shape_check(dtype, ndim, shape, &size, &nbytes);
    if (st != TACK_OK)
        return st;
    if (address == 0 && nbytes)
        return tack_error_set(TACK_EVALUE, "address is NULL; pass the address of the memory to wrap");
    /* Kernels read elements through typed pointers, and DLPack imports
     * refuse the same: misaligned elements are undefined behaviour in C. */
    size_t align = tack_dtype_alignment(dtype);
    if (address % align)
        return tack_error_set(TACK_EVALUE, "address 0x%llx is not aligned to the %zu bytes its %s elements need",
                              (unsigned long long)address, align, tack_dtype_name(dtype));
    return tack_array_wrap_memory(device, (void *)(uintptr_t)address, dtype, ndim, shape, size, nbytes, writable, NULL,
                                  NULL, out);
}

tack_status tack_array_reshape(const tack_array *a, int ndim, const int64_t *shape, tack_array **out)
{
    TACK_PUBLIC_CALL();
    if (!a || !out)
        return tack_error_set(TACK_EVALUE, "array and out must not be NULL");
    tack_status st = refuse_released(a, "tack_array_reshape");
    if (st == TACK_OK)
        st = tack_ndim_check(ndim, shape);
    if (st != TACK_OK)
        return st;
    int64_t s[TACK_MAX_NDIM];
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        s[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0)
                return tack_error_set(TACK_EVALUE, "only one extent can be -1; give the others");
            infer = i;
            s[i] = 1;
        }
    }
    if (infer >= 0) {
        size_t known, unused;
        st = tack_shape_check(TACK_U8, ndim, s, &known, &unused); /* one-byte elements: known counts them */
        if (st != TACK_OK)
            return st;
        if (known == 0 || a->size % known)
            return tack_error_set(TACK_EVALUE, "cannot reshape an array of size %zu so that -1 is a whole extent",
                                  a->size);
        s[infer] = (int64_t)(a->size / known);
    }
    size_t size, nbytes;
    st = tack_shape_check(a->dtype, ndim, s, &size, &nbytes);
    if (st != TACK_OK)
        return st;
    if (size != a->size)
        return tack_error_set(TACK_EVALUE, "cannot reshape an array of size %zu into a shape of size %zu",
                              a->size, size);
    return array_new(a->buffer, a->data, a->dtype, ndim, s, a->writable, out);
}

tack_array *tack_array_retain(tack_array *a)
{
    TACK_ONE_COPY_SKIP(a);
    if (a)
        atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
    return a;
}

void tack_array_release(tack_array *a)
{
    TACK_ONE_COPY_SKIP();
    if (!a || !tack_ref_release_last(&a->refs, "tack_array_release", "array", a))
        return;
    tack_buffer *b = a->buffer;
    int in_buffer = a->in_buffer;
    atomic_store_explicit(&a->refs, TACK_REFS_FREED, memory_order_relaxed);
    /* A record in its buffer's allocation is held with the buffer's. */
    if (in_buffer)
        tack_count_add(TACK_COUNT_ARRAYS, -1);
    else
        tack_count_free(TACK_COUNT_ARRAYS, a);
    tack_buffer_release(b);
}

tack_dtype tack_array_dtype(const tack_array *a) { return a->dtype; }
int tack_array_ndim(const tack_array *a) { return a->ndim; }
const int64_t *tack_array_shape(const tack_array *a) { return a->shape; }
size_t tack_array_size(const tack_array *a) { return a->size; }
size_t tack_array_nbytes(const tack_array *a) { return a->nbytes; }
int tack_array_writable(const tack_array *a) { return a->writable; }
void *tack_array_data(const tack_array *a) { return a->data; }
tack_buffer *tack_array_buffer(const tack_array *a) { return a->buffer; }
tack_device *tack_array_device(const tack_array *a) { return a->buffer->device; }

static tack_status require_writable(const tack_array *a, const char *what)
{
    if (a->writable)
        return TACK_OK;
    return tack_error_set(TACK_ERUNTIME,
                          "cannot %s a read-only array; it was wrapped read-only (array_from_ptr defaults to "
                          "writable=False) or imported from a read-only producer",
                          what);
}

/* The checks a copy between `a` and `nbytes` of host memory at `host`
 * makes before it moves anything (`into`: the copy writes the array), then
 * the wait for queued work on the array's buffer where there is anything
 * to copy. An error, nothing moved, if a check or the wait fails. */
static tack_status host_copy_begin(const tack_array *a, const void *host, size_t nbytes, int into, const char *call)
{
    if (!a || (!host && nbytes))
        return tack_error_set(TACK_EVALUE, "array and %s must not be NULL", into ? "source" : "destination");
    tack_status st = refuse_released(a, call);
    if (st == TACK_OK && into)
        st = require_writable(a, "write to");
    if (st != TACK_OK)
        return st;
    if (nbytes != a->nbytes)
        return tack_error_set(TACK_EVALUE, "copy of %zu bytes %s an array of %zu bytes", nbytes,
                              into ? "into" : "from", a->nbytes);
    return nbytes ? tack_buffer_wait(a->buffer) : TACK_OK;
}

tack_status tack_array_copy_to_host(const tack_array *a, void *dst, size_t nbytes)
{
    TACK_PUBLIC_CALL();
    tack_status st = host_copy_begin(a, dst, nbytes, 0, "tack_array_copy_to_host");
    if (st != TACK_OK || !nbytes)
        return st;
    return tack_backend_copy_to_host(a->buffer->device, dst, a->data, nbytes);
}

tack_status tack_array_copy_from_host(tack_array *a, const void *src, size_t nbytes)
{
    TACK_PUBLIC_CALL();
    tack_status st = host_copy_begin(a, src, nbytes, 1, "tack_array_copy_from_host");
    if (st != TACK_OK || !nbytes)
        return st;
    return tack_backend_copy_from_host(a->buffer->device, a->data, src, nbytes);
}

tack_status tack_array_fill(tack_array *a, const void *value)
{
    TACK_PUBLIC_CALL();
    if (!a || !value)
        return tack_error_set(TACK_EVALUE, "array and value must not be NULL");
    tack_status live = refuse_released(a, "tack_array_fill");
    if (live != TACK_OK)
        return live;
    tack_status st = require_writable(a, "fill");
    if (st != TACK_OK)
        return st;
    size_t item = tack_dtype_size(a->dtype);
    tack_device *d = a->buffer->device;
    if (tack_backend_host_addressable(d)) {
        st = tack_buffer_wait(a->buffer);
        if (st != TACK_OK)
            return st;
        for (size_t i = 0; i < a->size; i++)
            memcpy((char *)a->data + i * item, value, item);
        return TACK_OK;
    }
    /* Device memory: build the pattern on the host, copy it once. */
    if (!a->nbytes)
        return TACK_OK;
    char *host = malloc(a->nbytes);
    if (!host)
        return tack_error_set(TACK_ENOMEM, "out of memory staging a fill of %zu bytes", a->nbytes);
    for (size_t i = 0; i < a->size; i++)
        memcpy(host + i * item, value, item);
    st = tack_array_copy_from_host(a, host, a->nbytes);
    free(host);
    return st;
}

tack_status tack_array_to_device(const tack_array *a, tack_device *device, tack_array **out)
{
    TACK_PUBLIC_CALL();
    if (!a || !device || !out)
        return tack_error_set(TACK_EVALUE, "array, device and out must not be NULL");
    tack_status live = refuse_released(a, "tack_array_to_device");
    if (live != TACK_OK)
        return live;
    tack_array *r = NULL;
    tack_status st = tack_array_empty(device, a->dtype, a->ndim, a->shape, 0, &r);
    if (st != TACK_OK)
        return st;
    if (a->nbytes) {
        void *host = malloc(a->nbytes);
        st = host ? tack_array_copy_to_host(a, host, a->nbytes)
                  : tack_error_set(TACK_ENOMEM, "out of memory staging a copy of %zu bytes", a->nbytes);
        if (st == TACK_OK)
            st = tack_array_copy_from_host(r, host, a->nbytes);
        free(host);
    }
    if (st != TACK_OK) {
        tack_array_release(r);
        return st;
    }
    *out = r;
    return TACK_OK;
}

tack_status tack_array_export_memory(tack_array *a, tack_exported_memory *out)
{
    TACK_PUBLIC_CALL();
    if (!a || !out)
        return tack_error_set(TACK_EVALUE, "array and out must not be NULL");
    tack_status live = refuse_released(a, "tack_array_export_memory");
    if (live != TACK_OK)
        return live;
    tack_exported_memory rec;
    memset(&rec, 0, sizeof rec);
    tack_status st = tack_backend_export_memory(a->buffer, &rec);
    if (st != TACK_OK)
        return st;
    rec.size = a->nbytes;
    *out = rec;
    return TACK_OK;
}
