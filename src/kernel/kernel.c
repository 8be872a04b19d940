/* Kernels: creation, per-backend builds and launches. The warm launch is
 * the path that matters for small arrays: binding checks over the argument
 * list, one atomic load to find the compiled code, and the call; no lock,
 * no allocation. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"

tack_status tack_kernel_create(const char *source, const char *name, tack_kernel **out)
{
    if (!source || !out)
        return tack_error_set(TACK_EVALUE, "tack_kernel_create: source and out must not be NULL");
    tack_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return tack_error_set(TACK_ENOMEM, "out of memory creating a kernel");
    tack_status st = tack_signature_parse(source, name, &k->sig);
    if (st != TACK_OK) {
        free(k);
        return st;
    }
    k->source = strdup(source);
    if (!k->source) {
        free(k);
        return tack_error_set(TACK_ENOMEM, "out of memory creating a kernel");
    }
    atomic_init(&k->refs, 1);
    k->first_writable = -1;
    for (int i = 0; i < k->sig.nparams; i++) {
        const struct tack_param *p = &k->sig.params[i];
        k->arg_sizes[i] = p->is_array ? sizeof(void *) : tack_dtype_size(p->dtype);
        if (p->writable && k->first_writable < 0)
            k->first_writable = i;
    }
    pthread_mutex_init(&k->lock, NULL);
    *out = k;
    return TACK_OK;
}

tack_kernel *tack_kernel_retain(tack_kernel *k)
{
    if (k)
        atomic_fetch_add_explicit(&k->refs, 1, memory_order_relaxed);
    return k;
}

void tack_kernel_release(tack_kernel *k)
{
    if (!k)
        return;
    long left = atomic_fetch_sub_explicit(&k->refs, 1, memory_order_acq_rel) - 1;
    if (left > 0)
        return;
    if (left < 0)
        tack_refcount_underflow("kernel");
    for (struct tack_loaded *l = k->loaded, *next; l; l = next) {
        next = l->next;
        /* Queued launches still run the code being freed. */
        (void)tack_device_synchronize(l->device);
        if (l->device->ops->kernel_unload)
            l->device->ops->kernel_unload(l->device, l->handle);
        tack_device_release(l->device);
        free(l);
    }
    for (struct tack_ptx *p = k->ptx, *next; p; p = next) {
        next = p->next;
        free(p->text);
        free(p);
    }
    if (k->dl_handle)
        dlclose(k->dl_handle);
    pthread_mutex_destroy(&k->lock);
    free(k->host_source);
    free(k->cuda_source);
    free(k->opencl_source);
    free(k->hip_source);
    free(k->source);
    free(k);
}

const char *tack_kernel_name(const tack_kernel *k) { return k->sig.name; }
const char *tack_kernel_source(const tack_kernel *k) { return k->source; }
const char *tack_kernel_index_name(const tack_kernel *k) { return k->sig.index_name; }
int tack_kernel_num_params(const tack_kernel *k) { return k->sig.nparams; }
int tack_kernel_first_writable(const tack_kernel *k) { return k->first_writable; }

tack_status tack_kernel_param_info(const tack_kernel *k, int i, tack_kernel_param *out)
{
    if (!k || !out || i < 0 || i >= k->sig.nparams)
        return tack_error_set(TACK_EVALUE, "kernel parameter %d does not exist", i);
    const struct tack_param *p = &k->sig.params[i];
    out->name = p->name;
    out->dtype = p->dtype;
    out->is_array = p->is_array;
    out->writable = p->writable;
    return TACK_OK;
}

/* The backends with generated source, as generated_locked takes them. */
enum { GEN_HOST, GEN_CUDA, GEN_OPENCL, GEN_HIP };

static tack_status generated_locked(tack_kernel *k, int which, const char **out)
{
    char **slot = which == GEN_CUDA     ? &k->cuda_source
                  : which == GEN_OPENCL ? &k->opencl_source
                  : which == GEN_HIP    ? &k->hip_source
                                        : &k->host_source;
    if (!*slot) {
        switch (which) {
        case GEN_CUDA: *slot = tack_generate_cuda(&k->sig, k->source); break;
        case GEN_OPENCL: *slot = tack_generate_opencl(&k->sig, k->source); break;
        case GEN_HIP: *slot = tack_generate_hip(&k->sig, k->source); break;
        default: *slot = tack_generate_host(&k->sig, k->source); break;
        }
    }
    if (!*slot)
        return tack_error_set(TACK_ENOMEM, "out of memory generating the source of kernel '%s'", k->sig.name);
    *out = *slot;
    return TACK_OK;
}

tack_status tack_kernel_generated_source(tack_kernel *k, const char *backend, const char **out)
{
    if (!k || !backend || !out)
        return tack_error_set(TACK_EVALUE, "tack_kernel_generated_source: arguments must not be NULL");
    int which = !strcmp(backend, "cuda")         ? GEN_CUDA
                : !strcmp(backend, "level_zero") ? GEN_OPENCL
                : !strcmp(backend, "hip")        ? GEN_HIP
                : !strcmp(backend, "cpu")        ? GEN_HOST
                                                 : -1;
    if (which < 0)
        return tack_error_set(TACK_EVALUE,
                              "no generated source for backend '%s'; Tack generates 'cpu', 'cuda', 'level_zero' "
                              "and 'hip'",
                              backend);
    pthread_mutex_lock(&k->lock);
    tack_status st = generated_locked(k, which, out);
    pthread_mutex_unlock(&k->lock);
    return st;
}

static tack_status ptx_locked(tack_kernel *k, const char *arch, struct tack_ptx **out)
{
    const char *key = arch ? arch : "";
    for (struct tack_ptx *p = k->ptx; p; p = p->next) {
        if (!strcmp(p->arch, key)) {
            *out = p;
            return TACK_OK;
        }
    }
    if (strlen(key) >= sizeof k->ptx->arch)
        return tack_error_set(TACK_EVALUE, "'%s' is not a CUDA architecture name such as compute_90", key);
    const char *src = NULL;
    tack_status st = generated_locked(k, GEN_CUDA, &src);
    if (st != TACK_OK)
        return st;
    struct tack_ptx *p = calloc(1, sizeof *p);
    if (!p)
        return tack_error_set(TACK_ENOMEM, "out of memory compiling kernel '%s'", k->sig.name);
    st = tack_cuda_compile(k->sig.name, src, arch, &p->text, &p->size);
    if (st != TACK_OK) {
        free(p);
        return st;
    }
    snprintf(p->arch, sizeof p->arch, "%s", key);
    p->next = k->ptx;
    k->ptx = p;
    *out = p;
    return TACK_OK;
}

tack_status tack_kernel_ptx(tack_kernel *k, const char *arch, const char **ptx, size_t *size)
{
    if (!k || !ptx || !size)
        return tack_error_set(TACK_EVALUE, "tack_kernel_ptx: kernel, ptx and size must not be NULL");
    struct tack_ptx *p;
    pthread_mutex_lock(&k->lock);
    tack_status st = ptx_locked(k, arch, &p);
    pthread_mutex_unlock(&k->lock);
    if (st == TACK_OK) {
        *ptx = p->text;
        *size = p->size;
    }
    return st;
}

static tack_status host_locked(tack_kernel *k, tack_host_entry *out)
{
    tack_host_entry e = atomic_load_explicit(&k->host_entry, memory_order_acquire);
    if (!e) {
        const char *src = NULL;
        tack_status st = generated_locked(k, GEN_HOST, &src);
        if (st != TACK_OK)
            return st;
        void *handle;
        st = tack_host_compile(k->sig.name, src, &handle, &e);
        if (st != TACK_OK)
            return st;
        k->dl_handle = handle;
        atomic_store_explicit(&k->host_entry, e, memory_order_release);
    }
    *out = e;
    return TACK_OK;
}

/* The host runner applies to a backend whose memory the host addresses
 * and which loads no code of its own (the kernel_load slot's default). */
static int runs_on_pool(const tack_device *d) { return d->ops->dl_type == kDLCPU && !d->ops->kernel_load; }

static tack_status unsupported(const tack_device *d)
{
    return tack_error_set(TACK_ERUNTIME, "kernels cannot be launched on the %s backend yet (device %s)",
                          d->ops->name, d->name);
}

/* Compiles for the device's backend and loads the code there. */
static tack_status build_locked(tack_kernel *k, tack_device *d, struct tack_loaded **loaded)
{
    *loaded = NULL;
    struct tack_kernel_code code = {
        .entry = TACK_ENTRY_NAME, .nargs = k->sig.nparams, .arg_sizes = k->arg_sizes, .name = k->sig.name};
    for (int i = 0; i < k->sig.nparams; i++)
        code.uses_f64 |= k->sig.params[i].dtype == TACK_F64;
    tack_status st;
    if (d->ops->dl_type == kDLCPU) {
        st = host_locked(k, &code.host);
        if (st != TACK_OK || runs_on_pool(d))
            return st;
        code.format = "host";
    } else if (d->ops->dl_type == kDLCUDA && d->ops->kernel_load) {
        struct tack_ptx *p;
        st = ptx_locked(k, NULL, &p);
        if (st != TACK_OK)
            return st;
        code.format = "ptx";
        code.data = p->text;
        code.size = p->size;
    } else if ((d->ops->dl_type == kDLOneAPI || d->ops->dl_type == kDLROCM) && d->ops->kernel_load) {
        /* Source: the compile needs the device (its id, its architecture),
         * so the backend runs it. */
        int opencl = d->ops->dl_type == kDLOneAPI;
        const char *src = NULL;
        st = generated_locked(k, opencl ? GEN_OPENCL : GEN_HIP, &src);
        if (st != TACK_OK)
            return st;
        code.format = opencl ? "opencl" : "hip";
        code.data = src;
        code.size = strlen(src) + 1;
    } else {
        return unsupported(d);
    }
    for (struct tack_loaded *l = k->loaded; l; l = l->next) {
        if (l->device == d) {
            *loaded = l;
            return TACK_OK;
        }
    }
    struct tack_loaded *l = calloc(1, sizeof *l);
    if (!l)
        return tack_error_set(TACK_ENOMEM, "out of memory loading kernel '%s'", k->sig.name);
    st = d->ops->kernel_load(d, &code, &l->handle);
    if (st != TACK_OK) {
        free(l);
        return st;
    }
    l->device = tack_device_retain(d);
    l->next = k->loaded;
    k->loaded = l;
    *loaded = l;
    return TACK_OK;
}

tack_status tack_kernel_build(tack_kernel *k, tack_device *d)
{
    if (!k || !d)
        return tack_error_set(TACK_EVALUE, "tack_kernel_build: kernel and device must not be NULL");
    struct tack_loaded *l;
    pthread_mutex_lock(&k->lock);
    tack_status st = build_locked(k, d, &l);
    pthread_mutex_unlock(&k->lock);
    if (st == TACK_OK && l)
        atomic_store_explicit(&k->last, l, memory_order_release);
    return st;
}

tack_status tack_kernel_compile(const char *source, const char *name, tack_device *device, tack_kernel **out)
{
    if (!device || !out)
        return tack_error_set(TACK_EVALUE, "tack_kernel_compile: device and out must not be NULL");
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

static void describe(const struct tack_param *p, char *out, size_t cap)
{
    if (p->is_array)
        snprintf(out, cap, "%s%s *", p->writable ? "" : "const ", tack_dtype_c_type(p->dtype));
    else
        snprintf(out, cap, "%s", tack_dtype_c_type(p->dtype));
}

/* A device as a domain-mismatch message names it. A level_zero device that
 * adopted another library's context has the same name as the plain one on
 * the same GPU, so the context tells them apart. */
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
        describe(&k->sig.params[i], t, sizeof t);
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s%s%s", i ? ", " : "", t,
                                 k->sig.params[i].is_array ? "" : " ", k->sig.params[i].name);
    }
    return tack_error_set(TACK_ETYPE, "kernel '%s' takes %d argument%s (%s), %zu given", k->sig.name,
                          k->sig.nparams, k->sig.nparams == 1 ? "" : "s", list, nargs);
}

static tack_status bind_error(const tack_kernel *k, int i, const tack_arg *a)
{
    const struct tack_param *p = &k->sig.params[i];
    char t[64];
    describe(p, t, sizeof t);
    if (p->is_array && (a->kind != TACK_ARG_ARRAY || !a->value.array))
        return tack_error_set(TACK_ETYPE, "parameter '%s' of kernel '%s' is an array (%s); got a scalar", p->name,
                              k->sig.name, t);
    if (p->is_array)
        return tack_error_set(TACK_ETYPE, "parameter '%s' of kernel '%s' is %s, an array of %s; got an array of %s",
                              p->name, k->sig.name, t, tack_dtype_name(p->dtype),
                              tack_dtype_name(a->value.array->dtype));
    if (a->kind != TACK_ARG_SCALAR)
        return tack_error_set(TACK_ETYPE, "parameter '%s' of kernel '%s' is a scalar (%s); got an array", p->name,
                              k->sig.name, t);
    const char *given = tack_dtype_name(a->dtype);
    return tack_error_set(TACK_ETYPE, "parameter '%s' of kernel '%s' is %s (%s); got a %s value", p->name,
                          k->sig.name, t, tack_dtype_name(p->dtype), given ? given : "non-Tack");
}

tack_status tack_kernel_launch(tack_kernel *k, tack_device *device, int64_t n, const tack_arg *args, size_t nargs)
{
    if (!k || (nargs && !args))
        return tack_error_set(TACK_EVALUE, "tack_kernel_launch: kernel and args must not be NULL");
    const int np = k->sig.nparams;
    if (nargs != (size_t)np)
        return count_error(k, nargs);
    void *vals[TACK_KERNEL_MAX_PARAMS];
    void *ptrs[TACK_KERNEL_MAX_PARAMS];
    tack_buffer *bufs[TACK_KERNEL_MAX_PARAMS];
    size_t nbufs = 0;
    tack_device *d = device;
    int first_array = -1;
    for (int i = 0; i < np; i++) {
        const struct tack_param *p = &k->sig.params[i];
        const tack_arg *a = &args[i];
        if (!p->is_array) {
            if (a->kind != TACK_ARG_SCALAR || a->dtype != p->dtype)
                return bind_error(k, i, a);
            vals[i] = (void *)&a->value;
            continue;
        }
        tack_array *arr = a->value.array;
        if (a->kind != TACK_ARG_ARRAY || !arr || arr->dtype != p->dtype)
            return bind_error(k, i, a);
        if (p->writable && !arr->writable)
            return tack_error_set(TACK_EVALUE,
                                  "parameter '%s' of kernel '%s' is %s *, which the kernel may store through, "
                                  "but the array bound to it is read-only; pass a writable array, or declare "
                                  "the parameter const %s * if the kernel only reads it",
                                  p->name, k->sig.name, tack_dtype_c_type(p->dtype), tack_dtype_c_type(p->dtype));
        tack_device *ad = arr->buffer->device;
        if (!d) {
            d = ad;
        } else if (ad->domain != d->domain) {
            char an[128], dn[128];
            domain_name(ad, d, an, sizeof an);
            domain_name(d, ad, dn, sizeof dn);
            if (first_array < 0)
                return tack_error_set(TACK_EVALUE,
                                      "parameter '%s' of kernel '%s': the array is on %s, another memory domain "
                                      "than the launch's device %s",
                                      p->name, k->sig.name, an, dn);
            return tack_error_set(TACK_EVALUE,
                                  "kernel '%s' got arrays from two memory domains: '%s' is on %s and '%s' on %s; "
                                  "one launch uses one device's memory (copy with to_device first)",
                                  k->sig.name, k->sig.params[first_array].name, dn, p->name, an);
        }
        if (first_array < 0)
            first_array = i;
        ptrs[i] = arr->data;
        vals[i] = &ptrs[i];
        bufs[nbufs++] = arr->buffer;
    }
    if (n < 0)
        return tack_error_set(TACK_EVALUE, "kernel '%s' launched over n = %lld indices; n must be >= 0", k->sig.name,
                              (long long)n);
    if (!d)
        return tack_error_set(TACK_EVALUE, "kernel '%s' has no array argument to take a device from; pass the "
                                           "device to launch on",
                              k->sig.name);
    if (n == 0)
        return TACK_OK;

    if (runs_on_pool(d)) {
        tack_host_entry e = atomic_load_explicit(&k->host_entry, memory_order_acquire);
        if (!e) {
            tack_status st = tack_kernel_build(k, d);
            if (st != TACK_OK)
                return st;
            e = atomic_load_explicit(&k->host_entry, memory_order_acquire);
        }
        tack_pool_run(e, n, vals, &k->host_cost_ps);
        return TACK_OK;
    }
    struct tack_loaded *l = atomic_load_explicit(&k->last, memory_order_acquire);
    if (!l || l->device != d) {
        pthread_mutex_lock(&k->lock);
        tack_status st = build_locked(k, d, &l);
        pthread_mutex_unlock(&k->lock);
        if (st != TACK_OK)
            return st;
        atomic_store_explicit(&k->last, l, memory_order_release);
    }
    return tack_queue_launch(d, l->handle, n, vals, bufs, nbufs);
}

tack_status tack_kernel_call(tack_kernel *k, const tack_arg *args, size_t nargs)
{
    if (!k || (nargs && !args))
        return tack_error_set(TACK_EVALUE, "tack_kernel_call: kernel and args must not be NULL");
    int w = k->first_writable;
    if (w < 0)
        return tack_error_set(TACK_ETYPE,
                              "kernel '%s' has no parameter it may store through, so no array gives the launch's "
                              "size; launch it with an explicit n",
                              k->sig.name);
    /* A missing or wrong argument is reported by the launch's checks. */
    int64_t n = 0;
    if ((size_t)w < nargs && args[w].kind == TACK_ARG_ARRAY && args[w].value.array)
        n = (int64_t)args[w].value.array->size;
    return tack_kernel_launch(k, NULL, n, args, nargs);
}
