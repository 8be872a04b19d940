/* Kernels: creation, builds through the backends' toolchains, launches.
 * The warm launch is the path that matters for small arrays: binding checks
 * over the argument list, one atomic load to find the loaded code, and the
 * backend's launch; no lock, no allocation. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../core/queue.h"
#include "kernel.h"

tack_status tack_kernel_create(const char *source, const char *name, tack_kernel **out)
{
    TACK_PUBLIC_CALL();
    return tack_kernel_create_with(source, name, NULL, out);
}

/* The hidden parameters k's entry takes after its own
 * (tack_signature_hidden): the extents of each array the source asks them
 * of, of every array for a checked kernel, and a checked kernel's record;
 * their sizes in k->arg_sizes. TACK_EVALUE when they would take the
 * kernel past TACK_KERNEL_MAX_PARAMS. */
static tack_status hidden_params(tack_kernel *k)
{
    struct tack_signature *sig = &k->sig;
    sig->checked = k->options.checked;
    sig->extents_passed = sig->extents_used;
    for (int i = 0; sig->checked && i < sig->nparams; i++)
        if (sig->params[i].is_array)
            sig->extents_passed |= (uint64_t)1 << i;
    int n = sig->nparams;
    for (int i = 0; i < sig->nparams; i++) {
        if (!(sig->extents_passed >> i & 1))
            continue;
        if (n < TACK_KERNEL_MAX_PARAMS)
            k->arg_sizes[n] = TACK_EXTENTS_SIZE;
        n++;
    }
    if (sig->checked) {
        if (n < TACK_KERNEL_MAX_PARAMS)
            k->arg_sizes[n] = sizeof(void *);
        n++;
    }
    if (n > TACK_KERNEL_MAX_PARAMS)
        return tack_error_set(TACK_EVALUE,
                              "kernel '%s' has %d parameters, and its %s takes %d more than that (each array's "
                              "extents%s); a kernel takes at most %d in all: pass fewer arrays",
                              sig->name, sig->nparams, sig->checked ? "checked launch" : "use of tack_extent",
                              n - sig->nparams, sig->checked ? " and the bounds record" : "",
                              TACK_KERNEL_MAX_PARAMS);
    k->nhidden = n - sig->nparams;
    return TACK_OK;
}

tack_status tack_kernel_create_with(const char *source, const char *name, const tack_kernel_options *options,
                                    tack_kernel **out)
{
    TACK_PUBLIC_CALL();
    if (!source || !out)
        return tack_error_set(TACK_EVALUE, "source and out must not be NULL");
    tack_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return tack_error_set(TACK_ENOMEM, "out of memory creating a kernel");
    /* The options first: a checked kernel's body is rewritten as it is read. */
    tack_status st = tack_build_options_copy(options, &k->options);
    if (st == TACK_OK) {
        st = tack_signature_parse_checked(source, k->options.head, name, k->options.checked, &k->sig);
        if (st == TACK_OK && (st = tack_build_options_check_names(&k->options, k->sig.name)) != TACK_OK)
            tack_signature_free(&k->sig);
        if (st != TACK_OK)
            tack_build_options_free(&k->options);
    }
    if (st != TACK_OK) {
        free(k);
        return st;
    }
    st = hidden_params(k);
    if (st == TACK_OK && !(k->source = strdup(source)))
        st = tack_error_set(TACK_ENOMEM, "out of memory creating a kernel");
    if (st != TACK_OK) {
        tack_signature_free(&k->sig);
        tack_build_options_free(&k->options);
        free(k);
        return st;
    }
    atomic_init(&k->refs, 1);
    k->first_writable = -1;
    /* A reduction is an atomic to the plain-atomics rules: on private
     * memory a launch on one thread may run it as a plain update. */
    k->uses_atomics = k->sig.uses_atomics || k->sig.uses_reductions;
    for (int i = 0; i < k->sig.nparams; i++) {
        const struct tack_param *p = &k->sig.params[i];
        k->arg_sizes[i] = p->is_array ? sizeof(void *) : tack_dtype_size(p->dtype);
        if (p->writable && k->first_writable < 0)
            k->first_writable = i;
        k->uses_f64 |= p->dtype == TACK_F64;
        k->dtypes |= 1u << p->dtype;
        k->nwritten += p->writable;
    }
    for (int i = 0, w = 0, r = k->nwritten; i < k->sig.nparams; i++) {
        const struct tack_param *p = &k->sig.params[i];
        if (p->is_array)
            k->arrays[p->writable ? w++ : r++] = (unsigned char)i;
        k->narrays += p->is_array;
    }
    pthread_mutex_init(&k->lock, NULL);
    *out = k;
    return TACK_OK;
}

tack_kernel *tack_kernel_retain(tack_kernel *k)
{
    TACK_ONE_COPY_SKIP(k);
    if (k)
        atomic_fetch_add_explicit(&k->refs, 1, memory_order_relaxed);
    return k;
}

void tack_kernel_release(tack_kernel *k)
{
    TACK_ONE_COPY_SKIP();
    if (!k || !tack_ref_release_last(&k->refs, "tack_kernel_release", "kernel", k))
        return;
    for (struct tack_loaded *l = k->loaded, *next; l; l = next) {
        next = l->next;
        /* Queued launches still run the code being freed. */
        (void)tack_device_synchronize(l->device);
        tack_backend_kernel_unload(l->device, l->handle);
        tack_device_release(l->device);
        free(l);
    }
    for (struct tack_built *b = k->built, *next; b; b = next) {
        next = b->next;
        tack_built_free(b);
    }
    for (struct tack_generated *g = k->generated, *next; g; g = next) {
        next = g->next;
        free(g->text);
        free(g);
    }
    pthread_mutex_destroy(&k->lock);
    tack_signature_free(&k->sig);
    tack_build_options_free(&k->options);
    free(k->source);
    atomic_store_explicit(&k->refs, TACK_REFS_FREED, memory_order_relaxed);
    tack_handle_free(k);
}

const char *tack_kernel_name(const tack_kernel *k) { return k->sig.name; }
const char *tack_kernel_source(const tack_kernel *k) { return k->source; }
const char *tack_kernel_index_name(const tack_kernel *k) { return k->sig.index_names[0]; }
int tack_kernel_num_params(const tack_kernel *k) { return k->sig.nparams; }
int tack_kernel_first_writable(const tack_kernel *k) { return k->first_writable; }

tack_status tack_kernel_param_info(const tack_kernel *k, int i, tack_kernel_param *out)
{
    TACK_PUBLIC_CALL();
    if (!k || !out || i < 0 || i >= k->sig.nparams)
        return tack_error_set(TACK_EVALUE, "kernel parameter %d does not exist", i);
    const struct tack_param *p = &k->sig.params[i];
    out->name = p->name;
    out->dtype = p->dtype;
    out->is_array = p->is_array;
    out->writable = p->writable;
    return TACK_OK;
}

tack_status tack_kernel_compile(const char *source, const char *name, tack_device *device, tack_kernel **out)
{
    TACK_PUBLIC_CALL();
    if (!device || !out)
        return tack_error_set(TACK_EVALUE, "device and out must not be NULL");
    tack_kernel *k;
    tack_status st = tack_kernel_create(source, name, &k);
    if (st != TACK_OK)
        return st;
    st = tack_kernel_build(k, device);
    if (st != TACK_OK) {
        tack_kernel_release(k);
        return st;
    }
    *out = k;
    return TACK_OK;
}

static void domain_name(const tack_device *d, const tack_device *other, char *out, size_t cap)
{
    if (tack_device_shares_external_context(d))
        snprintf(out, cap, "%s (sharing another library's context)", d->name);
    else if (tack_device_shares_external_context(other) && !strcmp(d->name, other->name))
        snprintf(out, cap, "%s (Tack's own context)", d->name);
    else
        snprintf(out, cap, "%s", d->name);
}

static tack_status count_error(const tack_kernel *k, size_t nargs)
{
    char list[512];
    size_t used = 0;
    list[0] = 0;
    for (int i = 0; i < k->sig.nparams && used < sizeof list; i++) {
        char t[64];
        tack_param_describe(&k->sig.params[i], t, sizeof t);
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s%s%s", i ? ", " : "", t,
                                 k->sig.params[i].is_array ? "" : " ", k->sig.params[i].name);
    }
    return tack_error_set(TACK_ETYPE, "kernel '%s' takes %d argument%s (%s), %zu given", k->sig.name,
                          k->sig.nparams, k->sig.nparams == 1 ? "" : "s", list, nargs);
}

/* The tack_arg union's field for a dtype's value, which is also the
 * suffix of its tack_arg_ constructor (tack_arg_bool fills .boolean). */
static const char *arg_field(tack_dtype d)
{
    static const char *const fields[TACK_NDTYPES] = {
        [TACK_I8] = "i8",   [TACK_U8] = "u8",   [TACK_I16] = "i16", [TACK_U16] = "u16",
        [TACK_I32] = "i32", [TACK_U32] = "u32", [TACK_I64] = "i64", [TACK_U64] = "u64",
        [TACK_F32] = "f32", [TACK_F64] = "f64", [TACK_BOOL] = "boolean", [TACK_F16] = "f16",
        [TACK_BF16] = "bf16", [TACK_C64] = "c64", [TACK_C128] = "c128"};
    return (unsigned)d < TACK_NDTYPES ? fields[d] : "?";
}

static tack_status bind_error(const tack_kernel *k, int i, const tack_arg *a)
{
    const struct tack_param *p = &k->sig.params[i];
    char t[64];
    tack_param_describe(p, t, sizeof t);
    /* An uninitialised or garbled argument: saying "got an array" or "a
     * scalar" would send the reader after the wrong field. */
    if (a->kind != TACK_ARG_SCALAR && a->kind != TACK_ARG_ARRAY && a->kind != TACK_ARG_SCALAR_BITS)
        return tack_error_set(TACK_ETYPE,
                              "argument %d (parameter '%s' of kernel '%s') has kind %d, which is no tack_arg_kind: "
                              "set .kind to TACK_ARG_SCALAR (0), TACK_ARG_ARRAY (1) or TACK_ARG_SCALAR_BITS (2), "
                              "or build the argument with "
                              "%s%s",
                              i, p->name, k->sig.name, (int)a->kind, p->is_array ? "tack_arg_array" : "tack_arg_",
                              p->is_array ? "" : arg_field(p->dtype));
    if (p->is_array && (a->kind != TACK_ARG_ARRAY || !a->value.array))
        return tack_error_set(TACK_ETYPE, "parameter '%s' of kernel '%s' is an array (%s); got a scalar", p->name,
                              k->sig.name, t);
    if (p->is_array && tack_ref_peek(&a->value.array->refs) < 1)
        return tack_misuse_refuse("a kernel launch's arguments", "array", a->value.array);
    if (p->is_array)
        return tack_error_set(TACK_ETYPE, "parameter '%s' of kernel '%s' is %s, an array of %s; got an array of %s",
                              p->name, k->sig.name, t, tack_dtype_name(p->dtype),
                              tack_dtype_name(a->value.array->dtype));
    if (a->kind == TACK_ARG_ARRAY)
        return tack_error_set(TACK_ETYPE, "parameter '%s' of kernel '%s' is a scalar (%s); got an array", p->name,
                              k->sig.name, t);
    const char *given = tack_dtype_name(a->dtype);
    if (a->dtype == p->dtype) {
        /* The value's bits are an integer's (integer_bits): see tack_arg. */
        long long v = p->dtype == TACK_F64 ? (long long)a->value.i64 : (long long)a->value.i32;
        return tack_error_set(TACK_ETYPE,
                              "parameter '%s' of kernel '%s' is %s (%s), but the argument's bits are those of the "
                              "integer %lld written to an integer field (.value.i64, .value.i32), not of a %s: a "
                              "tack_arg is read through the field its .dtype names; fill .value.%s "
                              "(tack_arg_%s(%lld.0)), or set .kind to TACK_ARG_SCALAR_BITS for a subnormal meant "
                              "as one",
                              p->name, k->sig.name, t, tack_dtype_name(p->dtype), v, t, arg_field(p->dtype),
                              arg_field(p->dtype), v);
    }
    return tack_error_set(TACK_ETYPE, "parameter '%s' of kernel '%s' is %s (%s); got a %s value: fill .value.%s "
                          "and set .dtype to %s (tack_arg_%s)", p->name,
                          k->sig.name, t, tack_dtype_name(p->dtype), given ? given : "non-Tack",
                          arg_field(p->dtype), tack_dtype_name(p->dtype), arg_field(p->dtype));
}

/* Parameter i's array is on `ad`, whose memory domain is not that of `d`,
 * the launch's device or the earlier arrays' (all on d's domain). */
static tack_status domain_error(const tack_kernel *k, int i, const tack_device *ad, const tack_device *d)
{
    int first_array = 0;
    while (first_array < i && !k->sig.params[first_array].is_array)
        first_array++;
    char an[128], dn[128];
    domain_name(ad, d, an, sizeof an);
    domain_name(d, ad, dn, sizeof dn);
    if (first_array == i)
        return tack_error_set(TACK_EVALUE,
                              "parameter '%s' of kernel '%s': the array is on %s, another memory domain than the "
                              "launch's device %s",
                              k->sig.params[i].name, k->sig.name, an, dn);
    return tack_error_set(TACK_EVALUE,
                          "kernel '%s' got arrays from two memory domains: '%s' is on %s and '%s' on %s; one launch "
                          "uses one device's memory (copy with to_device first)",
                          k->sig.name, k->sig.params[first_array].name, dn, k->sig.params[i].name, an);
}

/* Whether an array the kernel may store through shares bytes with another
 * array argument (the same array twice, a view of it, or memory wrapped
 * twice): then the launch must keep program order between the pointers
 * within an index, and the restrict variant may not run. Each pair with a
 * written array in it is compared once: the written arrays come first in
 * k->arrays. */
static int overlapping(const tack_kernel *k, const tack_arg *args)
{
    for (int x = 0; x < k->nwritten; x++) {
        const tack_array *a = args[k->arrays[x]].value.array;
        uintptr_t a0 = (uintptr_t)a->data, a1 = a0 + a->nbytes;
        for (int y = x + 1; y < k->narrays; y++) {
            const tack_array *b = args[k->arrays[y]].value.array;
            uintptr_t b0 = (uintptr_t)b->data, b1 = b0 + b->nbytes;
            if (a0 < b1 && b0 < a1)
                return 1;
        }
    }
    return 0;
}

/* Whether every array the kernel may store through is private memory
 * (tack_buffer_is_private): reached by no other process, no other library
 * and no other mapping, so that only this process's launches can update
 * it and only an argument over the same addresses can alias it. */
static int private_written(const tack_kernel *k, const tack_arg *args)
{
    for (int x = 0; x < k->nwritten; x++)
        if (!tack_buffer_is_private(args[k->arrays[x]].value.array->buffer))
            return 0;
    return 1;
}

/* *n *= e, for n and e >= 0; 0, *n unchanged, where the product would
 * pass INT64_MAX. Two factors below 2^31 need no division to know. */
static inline int extent_mul(int64_t *n, int64_t e)
{
    if (((uint64_t)*n | (uint64_t)e) >> 31 && e && *n > INT64_MAX / e)
        return 0;
    *n *= e;
    return 1;
}

/* The number of indices in a domain of ndim extents; TACK_EVALUE for a
 * negative extent or more than 2^63 - 1 indices. */
static tack_status domain_size(const tack_kernel *k, int ndim, const int64_t *shape, int64_t *out)
{
    /* A negative extent anywhere is named before a product too large; the
     * product stops growing at an empty extent. */
    int64_t n = 1;
    int too_many = 0;
    for (int dim = 0; dim < ndim; dim++) {
        int64_t e = shape[dim];
        if (e < 0) {
            if (ndim == 1)
                return tack_error_set(TACK_EVALUE, "kernel '%s' launched over n = %lld indices; n must be >= 0",
                                      k->sig.name, (long long)e);
            return tack_error_set(TACK_EVALUE,
                                  "kernel '%s' launched with extent %lld for index '%s'; extents must be >= 0",
                                  k->sig.name, (long long)e, k->sig.index_names[dim]);
        }
        if (n && !too_many && !extent_mul(&n, e))
            too_many = 1;
    }
    if (too_many)
        return tack_error_set(TACK_EVALUE, "kernel '%s' launched over more than 2^63 - 1 indices", k->sig.name);
    *out = n;
    return TACK_OK;
}

/* One launch, its arguments bound: what the checks found and the backend
 * is handed. */
struct bound {
    void *vals[TACK_KERNEL_MAX_PARAMS]; /* vals[i] points at parameter i's value */
    tack_buffer *bufs[TACK_KERNEL_MAX_PARAMS]; /* the arrays' buffers, for the queue */
    size_t nbufs;
    tack_device *device; /* the launch's: the one given, else the arrays' */
    int ndim;
    const int64_t *shape;
    int64_t n; /* the domain's size; the extent itself for a domain of one index */
};

/* Whether a float scalar's bits are those of a small integer written to
 * the union's integer field (.i64 = 3 beside .dtype = TACK_F64), which C
 * cannot otherwise tell from a float: 1 to 2^32 reads as a subnormal
 * double below 2.2e-314 (1 to 2^16 as a float below 9.2e-41), -1 to
 * -2^32 as a NaN whose top 32 bits are all set (-1 to -2^16: top 16 of
 * a float's), values no arithmetic passes on purpose. Two compares per
 * float argument on the launch path. */
static inline int integer_bits(const tack_arg *a)
{
    if (a->dtype == TACK_F64) {
        uint64_t u = (uint64_t)a->value.i64;
        return (u - 1 < (uint64_t)1 << 32) || u >= ~(uint64_t)0 - ((uint64_t)1 << 32) + 1;
    }
    if (a->dtype == TACK_F32) {
        uint32_t u = (uint32_t)a->value.i32;
        return (u - 1 < (uint32_t)1 << 16) || u >= ~(uint32_t)0 - ((uint32_t)1 << 16) + 1;
    }
    return 0;
}

/* Binds args to the kernel's parameters: their number, each one's kind
 * and dtype, a writable array where the kernel may store, and one memory
 * domain for all arrays and `device` (NULL: the arrays'). TACK_ETYPE or
 * TACK_EVALUE naming the parameter. */
static tack_status bind(const tack_kernel *k, tack_device *device, const tack_arg *args, size_t nargs,
                        struct bound *b)
{
    const int np = k->sig.nparams;
    if (nargs != (size_t)np)
        return count_error(k, nargs);
    b->nbufs = 0;
    b->device = device;
    for (int i = 0; i < np; i++) {
        const struct tack_param *p = &k->sig.params[i];
        const tack_arg *a = &args[i];
        if (!p->is_array) {
            int taken = a->kind == TACK_ARG_SCALAR_BITS || (a->kind == TACK_ARG_SCALAR && !integer_bits(a));
            if (!taken || a->dtype != p->dtype)
                return bind_error(k, i, a);
            b->vals[i] = (void *)&a->value;
            continue;
        }
        tack_array *arr = a->value.array;
        if (a->kind != TACK_ARG_ARRAY || !arr || tack_ref_peek(&arr->refs) < 1 || arr->dtype != p->dtype)
            return bind_error(k, i, a);
        if (p->writable && !arr->writable)
            return tack_error_set(TACK_EVALUE,
                                  "parameter '%s' of kernel '%s' is %s *, which the kernel may store through, "
                                  "but the array bound to it is read-only; pass a writable array, or declare "
                                  "the parameter const %s * if the kernel only reads it",
                                  p->name, k->sig.name, tack_dtype_c_type(p->dtype), tack_dtype_c_type(p->dtype));
        tack_buffer *buf = arr->buffer;
        tack_device *ad = buf->device;
        if (ad != b->device) {
            if (!b->device)
                b->device = ad;
            else if (ad->domain != b->device->domain)
                return domain_error(k, i, ad, b->device);
        }
        /* The array's own data pointer, as an argument value: it never
         * changes, and the backend reads the values before returning. */
        b->vals[i] = &arr->data;
        b->bufs[b->nbufs++] = buf;
    }
    return TACK_OK;
}

/* Checks the bound launch's domain (b->ndim extents at b->shape, b->n the
 * first) and its device, and sizes it. TACK_EVALUE for a domain of another
 * rank than the kernel's, a negative extent, more than 2^63 - 1 indices,
 * or no device. */
static tack_status check(const tack_kernel *k, struct bound *b)
{
    if (b->ndim != k->sig.ndim)
        return tack_error_set(TACK_EVALUE, "kernel '%s' takes %d ind%s; launch it over a shape of %d extent%s, not %d",
                              k->sig.name, k->sig.ndim, k->sig.ndim == 1 ? "ex" : "ices", k->sig.ndim,
                              k->sig.ndim == 1 ? "" : "s", b->ndim);
    /* One extent, the common case, is its own product. */
    if (b->ndim > 1 || b->n < 0) {
        tack_status st = domain_size(k, b->ndim, b->shape, &b->n);
        if (st != TACK_OK)
            return st;
    }
    if (!b->device)
        return tack_error_set(TACK_EVALUE, "kernel '%s' has no array argument to take a device from; pass the "
                                           "device to launch on",
                              k->sig.name);
    return TACK_OK;
}

/* The kernel loaded on d: the last one used, found without a lock, or
 * built (a compiler, a driver's JIT, a disk), with the hooks begun around
 * it (*begun). */
static tack_status build(tack_kernel *k, tack_device *d, const tack_launch_hooks *hooks, struct tack_loaded **out,
                         int *begun)
{
    struct tack_loaded *l = atomic_load_explicit(&k->last, memory_order_acquire);
    *begun = 0;
    if (!l || l->device != d) {
        if (hooks) {
            hooks->begin(hooks->context);
            *begun = 1;
        }
        pthread_mutex_lock(&k->lock);
        tack_status st = tack_kernel_build_locked(k, d, &l);
        pthread_mutex_unlock(&k->lock);
        if (st != TACK_OK)
            return st;
        atomic_store_explicit(&k->last, l, memory_order_release);
    }
    *out = l;
    return TACK_OK;
}

/* Runs the bound launch of loaded kernel l, its hooks called around a run
 * the backend expects to take longer than they say (around every run of a
 * backend that does not measure), unless a build has begun them. */
static tack_status run(const tack_kernel *k, const struct tack_loaded *l, const struct bound *b, const tack_arg *args,
                       const tack_launch_hooks *hooks, int begun)
{
    tack_device *d = b->device;
    if (hooks && !begun) {
        if (tack_backend_kernel_expected_ns(d, l->handle, b->n) > hooks->above_ns) {
            hooks->begin(hooks->context);
            begun = 1;
        }
    }
    /* Restrict pays mostly across indices (vector lanes); for a launch of
     * one index it would save some reloads within the body, while the
     * check is a good part of what such a launch costs: not checked. */
    /* Addresses alone cannot prove two arrays distinct: memory mapped
     * twice (an import of this process's own export) has two. Private
     * memory has one mapping, so for it the address check is the whole
     * answer; any other written array is assumed to alias. */
    const int written_private = (b->n > 1 || k->uses_atomics) && private_written(k, args);
    struct tack_launch launch = {.ndim = b->ndim,
                                 .shape = b->shape,
                                 .n = b->n,
                                 .args = b->vals,
                                 .disjoint = b->n > 1 && written_private && !overlapping(k, args),
                                 .private_memory = k->uses_atomics && written_private};
    tack_status st = tack_queue_launch(d, l->handle, &launch, b->bufs, b->nbufs);
    if (begun)
        hooks->end(hooks->context);
    return st;
}

/* The check record as the generated code lays it out
 * (tack_source_hidden): the first violation, and where an address out of
 * bounds (&y[e]) points. */
struct check_record {
    uint32_t flag, param;
    int64_t index, extent, line;
    uint64_t sink, unused;
};
_Static_assert(sizeof(struct check_record) == TACK_CHECK_RECORD_SIZE,
               "the check record's layout is the generated code's");

/* Where &y[e] out of bounds points on a device whose memory the host
 * addresses: the middle of a mapping of its own, TACK_CHECK_SINK_HOST bytes
 * between two inaccessible pages. A row written through that pointer
 * (float *row = &y[e]; row[c] = ...) lands there, in memory no array or
 * allocation owns, up to half the mapping either way; a run further meets
 * an inaccessible page and stops the process with SIGSEGV instead of
 * writing over whatever lies beyond. One mapping for the process, never
 * unmapped: what lands there is never read as anyone's data, so launches
 * (concurrent ones too) share it. */
#define TACK_CHECK_SINK_HOST ((size_t)2 << 20)
static pthread_once_t host_sink_once = PTHREAD_ONCE_INIT;
static char *host_sink_middle;

/* The sink's two guard pages, and the SIGSEGV action there was before
 * Tack's, which a fault anywhere else goes on to. A fault in a guard page
 * says which mistake it was before the process stops the way it would have
 * without Tack (the previous handler, Python's fault handler say, or the
 * default): a bare "Segmentation fault" would send the user after the
 * wrong pointer. */
static uintptr_t guard_low, guard_high, guard_size;
static struct sigaction fault_before;

static void sink_fault(int sig, siginfo_t *info, void *context)
{
    uintptr_t a = (uintptr_t)info->si_addr;
    if ((a >= guard_low && a < guard_low + guard_size) || (a >= guard_high && a < guard_high + guard_size)) {
        static const char msg[] =
            "tack: a checked kernel ran more than 1 MiB past an address out of bounds (&y[e] points into "
            "a guarded sink when e is out of bounds): a pointer taken that way and walked in a loop; "
            "test the index before taking the address. Stopping.\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
    }
    if ((fault_before.sa_flags & SA_SIGINFO) && fault_before.sa_sigaction) {
        fault_before.sa_sigaction(sig, info, context);
        return;
    }
    if (fault_before.sa_handler != SIG_DFL && fault_before.sa_handler != SIG_IGN) {
        fault_before.sa_handler(sig);
        return;
    }
    /* The default action: put it back, and the access faults again on
     * return, now to end the process as it would have. */
    sigaction(SIGSEGV, &fault_before, NULL);
}

/* Names the guard pages of the sink mapping `m` to a fault handler, which
 * goes on to whatever handled SIGSEGV before. */
static void sink_fault_install(char *m, size_t page)
{
    guard_low = (uintptr_t)m;
    guard_high = (uintptr_t)(m + page + TACK_CHECK_SINK_HOST);
    guard_size = page;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = sink_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &fault_before);
}

static void host_sink_map(void)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_NORESERVE
    flags |= MAP_NORESERVE; /* pages are taken only where a violation writes */
#endif
    char *m = mmap(NULL, TACK_CHECK_SINK_HOST + 2 * page, PROT_NONE, flags, -1, 0);
    if (m == MAP_FAILED)
        return;
    if (mprotect(m + page, TACK_CHECK_SINK_HOST, PROT_READ | PROT_WRITE) != 0) {
        munmap(m, TACK_CHECK_SINK_HOST + 2 * page);
        return;
    }
    host_sink_middle = m + page + TACK_CHECK_SINK_HOST / 2;
    sink_fault_install(m, page);
}

/* On a device the host cannot address the sink is an allocation of its
 * own per launch, TACK_CHECK_SINK_DEVICE bytes of device memory, the
 * address in its middle: a run of more than half of it goes past the
 * allocation unguarded (the drivers' allocations have no guard pages). */
#define TACK_CHECK_SINK_DEVICE ((size_t)64 << 10)

/* What a launch of a kernel with hidden parameters passes besides the
 * arguments: the arrays' extents (tack_extents_), and a checked launch's
 * record, zeroed but for where its sink is, on the launch's device. */
struct hidden {
    int64_t extents[TACK_KERNEL_MAX_PARAMS][TACK_EXTENTS_SIZE / 8];
    tack_array *record, *sink;
    void *record_data;
};

/* Fills h and appends the hidden values to b's (and the record's buffer
 * to its buffers). TACK_EVALUE for an array of more than TACK_EXTENT_DIMS
 * dimensions whose extents the kernel asks for; TACK_ENOMEM when the sink
 * cannot be mapped; an allocation's or copy's error for the record. On
 * error nothing is held. */
static tack_status hidden_bind(const tack_kernel *k, struct bound *b, const tack_arg *args, struct hidden *h)
{
    const struct tack_signature *sig = &k->sig;
    int at = sig->nparams;
    h->record = NULL;
    for (int i = 0; i < sig->nparams; i++) {
        if (!(sig->extents_passed >> i & 1))
            continue;
        const tack_array *a = args[i].value.array;
        if ((sig->extents_used >> i & 1) && a->ndim > TACK_EXTENT_DIMS)
            return tack_error_set(TACK_EVALUE,
                                  "kernel '%s' asks the extents of parameter '%s', whose array has %d dimensions; "
                                  "tack_extent reads at most %d: reshape the array, or pass its extents as "
                                  "arguments",
                                  sig->name, sig->params[i].name, a->ndim, TACK_EXTENT_DIMS);
        int64_t *e = h->extents[i];
        e[0] = (int64_t)a->size;
        e[1] = a->ndim;
        for (int d = 0; d < TACK_EXTENT_DIMS; d++)
            e[2 + d] = d < a->ndim ? a->shape[d] : 0;
        b->vals[at++] = e;
    }
    if (!sig->checked)
        return TACK_OK;
    const int host = tack_backend_host_addressable(b->device);
    if (host) {
        pthread_once(&host_sink_once, host_sink_map);
        if (!host_sink_middle)
            return tack_error_set(TACK_ENOMEM,
                                  "kernel '%s' (checked): cannot map the %zu KiB where accesses out of bounds go "
                                  "(mmap refused it): free memory or address space, or launch it unchecked",
                                  sig->name, TACK_CHECK_SINK_HOST >> 10);
    }
    h->sink = NULL;
    const int64_t n = TACK_CHECK_RECORD_SIZE / 8, sink_n = (int64_t)TACK_CHECK_SINK_DEVICE;
    tack_status st = host ? TACK_OK : tack_array_empty(b->device, TACK_U8, 1, &sink_n, 0, &h->sink);
    if (st == TACK_OK)
        st = tack_array_empty(b->device, TACK_I64, 1, &n, 0, &h->record);
    struct check_record r = {0};
    r.sink = host ? (uint64_t)(uintptr_t)host_sink_middle
                  : (uint64_t)(uintptr_t)h->sink->data + TACK_CHECK_SINK_DEVICE / 2;
    if (st == TACK_OK)
        st = tack_array_copy_from_host(h->record, &r, sizeof r);
    if (st != TACK_OK) {
        if (h->record)
            tack_array_release(h->record);
        if (h->sink)
            tack_array_release(h->sink);
        h->record = h->sink = NULL;
        return st;
    }
    h->record_data = h->record->data;
    b->vals[at] = &h->record_data;
    b->bufs[b->nbufs++] = h->record->buffer;
    if (h->sink)
        b->bufs[b->nbufs++] = h->sink->buffer;
    return TACK_OK;
}

/* After a checked launch: TACK_EINDEX naming the first access out of
 * bounds its record holds, if any. Waits for the launch (a GPU's record is
 * read back). Releases the record. */
static tack_status hidden_done(const tack_kernel *k, struct hidden *h, tack_status st)
{
    if (!h->record)
        return st;
    struct check_record r;
    if (st == TACK_OK)
        st = tack_array_copy_to_host(h->record, &r, sizeof r);
    tack_array_release(h->record);
    if (h->sink)
        tack_array_release(h->sink);
    h->record = h->sink = NULL;
    if (st != TACK_OK || !r.flag)
        return st;
    const char *name = r.param < (uint32_t)k->sig.nparams ? k->sig.params[r.param].name : "?";
    return tack_error_set(TACK_EINDEX,
                          "kernel '%s' (checked): index %lld of parameter '%s' at line %lld of the kernel's source "
                          "is out of bounds: the array has %lld element%s (indices 0 to %lld); that access was "
                          "skipped (a load read 0, a store was dropped) and the rest of the launch ran",
                          k->sig.name, (long long)r.index, name, (long long)r.line, (long long)r.extent,
                          r.extent == 1 ? "" : "s", (long long)r.extent - 1);
}

/* A launch, its arguments bound (bind): checked, built, run. */
static tack_status launch_bound(tack_kernel *k, struct bound *b, const tack_arg *args,
                                const tack_launch_hooks *hooks)
{
    tack_status st = check(k, b);
    if (st != TACK_OK || b->n == 0)
        return st;
    struct hidden hidden_values, *h = NULL;
    if (k->nhidden) {
        h = &hidden_values;
        st = hidden_bind(k, b, args, h);
        if (st != TACK_OK)
            return st;
    }
    struct tack_loaded *l;
    int begun;
    st = build(k, b->device, hooks, &l, &begun);
    if (st != TACK_OK) {
        if (begun)
            hooks->end(hooks->context);
        return h ? hidden_done(k, h, st) : st;
    }
    st = run(k, l, b, args, hooks, begun);
    return h ? hidden_done(k, h, st) : st;
}

tack_status tack_kernel_check_live(const tack_kernel *k, const tack_device *device, const char *call)
{
    tack_status st = tack_refuse_released(&k->refs, call, "kernel", k);
    if (st == TACK_OK && device)
        st = tack_refuse_released(&device->refs, call, "device", device);
    return st;
}

static tack_status refuse_released(const tack_kernel *k, const tack_device *device)
{
    return tack_kernel_check_live(k, device, "a kernel launch");
}

/* Launches over the domain of ndim extents `shape`. */
static tack_status launch(tack_kernel *k, tack_device *device, int ndim, const int64_t *shape, const tack_arg *args,
                          size_t nargs, const tack_launch_hooks *hooks)
{
    struct bound b;
    tack_status st = refuse_released(k, device);
    if (st == TACK_OK)
        st = bind(k, device, args, nargs, &b);
    if (st != TACK_OK)
        return st;
    b.ndim = ndim;
    b.shape = shape;
    b.n = ndim >= 1 ? shape[0] : 0; /* another rank than the kernel's is refused */
    return launch_bound(k, &b, args, hooks);
}

/* Launches a call without a domain over the one its arrays' shared shape
 * gives (domain.c says when that is unambiguous). */
static tack_status call(tack_kernel *k, const tack_arg *args, size_t nargs, const tack_launch_hooks *hooks)
{
    int64_t shape[TACK_KERNEL_MAX_DIMS];
    tack_status st = refuse_released(k, NULL);
    if (st == TACK_OK)
        st = tack_kernel_call_domain(k, args, nargs, shape);
    return st != TACK_OK ? st : launch(k, NULL, k->sig.ndim, shape, args, nargs, hooks);
}

tack_status tack_kernel_launch(tack_kernel *k, tack_device *device, int64_t n, const tack_arg *args, size_t nargs)
{
    TACK_PUBLIC_CALL();
    if (!k || (nargs && !args))
        return tack_error_set(TACK_EVALUE, "kernel and args must not be NULL");
    return launch(k, device, 1, &n, args, nargs, NULL);
}

uint64_t tack_kernel_expected_ns(tack_kernel *k, const tack_device *device, int64_t n)
{
    if (n <= 0)
        return 0;
    /* The kernel last launched, without a lock as a warm launch finds it;
     * any other has not run (or not lately): not known. */
    struct tack_loaded *l = k ? atomic_load_explicit(&k->last, memory_order_acquire) : NULL;
    if (!l || !device || l->device != device)
        return UINT64_MAX;
    return tack_backend_kernel_expected_ns(device, l->handle, n);
}

tack_status tack_kernel_call(tack_kernel *k, const tack_arg *args, size_t nargs)
{
    TACK_PUBLIC_CALL();
    if (!k || (nargs && !args))
        return tack_error_set(TACK_EVALUE, "kernel and args must not be NULL");
    return call(k, args, nargs, NULL);
}

tack_status tack_kernel_call_hooked(tack_kernel *k, const tack_arg *args, size_t nargs, const tack_launch_hooks *hooks)
{
    TACK_PUBLIC_CALL();
    if (!k || (nargs && !args) || (hooks && (!hooks->begin || !hooks->end)))
        return tack_error_set(TACK_EVALUE, "kernel, args and the hooks' functions must not be NULL");
    return call(k, args, nargs, hooks);
}

int tack_kernel_ndim(const tack_kernel *k) { return k->sig.ndim; }

const char *tack_kernel_dim_name(const tack_kernel *k, int d)
{
    return d >= 0 && d < k->sig.ndim ? k->sig.index_names[d] : NULL;
}

tack_status tack_kernel_launch_nd(tack_kernel *k, tack_device *device, int ndim, const int64_t *shape,
                                  const tack_arg *args, size_t nargs)
{
    TACK_PUBLIC_CALL();
    if (!k || !shape || (nargs && !args))
        return tack_error_set(TACK_EVALUE, "kernel, shape and args must not be NULL");
    return launch(k, device, ndim, shape, args, nargs, NULL);
}

tack_status tack_kernel_launch_hooked(tack_kernel *k, tack_device *device, int ndim, const int64_t *shape,
                                      const tack_arg *args, size_t nargs, const tack_launch_hooks *hooks)
{
    TACK_PUBLIC_CALL();
    if (!k || !shape || (nargs && !args) || (hooks && (!hooks->begin || !hooks->end)))
        return tack_error_set(TACK_EVALUE, "kernel, shape, args and the hooks' functions must not be NULL "
                                           "(tack_kernel_call_hooked launches over the arguments' shape)");
    return launch(k, device, ndim, shape, args, nargs, hooks);
}
