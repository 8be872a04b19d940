#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "internal.h"

/* Process-wide devices, one per (backend, ordinal), made on first use and
 * kept until exit: every library in the process sees one Tack device. */
#define REGISTRY_MAX 64
static struct {
    const struct tack_backend_ops *ops;
    int ordinal;
    tack_device *device;
} registry[REGISTRY_MAX];
static int registry_len;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint_fast64_t next_domain = 1;

const struct tack_backend_ops *tack_backend_find(const char *name, size_t len)
{
    for (int i = 0; tack_backends[i]; i++) {
        const char *b = tack_backends[i]->name;
        if (strlen(b) == len && !strncmp(b, name, len))
            return tack_backends[i];
    }
    return NULL;
}

const char *const *tack_backend_options(const char *backend)
{
    static const char *const none[] = {NULL};
    const struct tack_backend_ops *ops = backend ? tack_backend_find(backend, strlen(backend)) : NULL;
    if (!ops)
        return NULL;
    return ops->options ? ops->options : none;
}

void tack_backend_list(char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; tack_backends[i] && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s'%s'", i ? ", " : "", tack_backends[i]->name);
}

static tack_status parse_name(const char *name, const struct tack_backend_ops **ops, int *ordinal)
{
    char known[256];
    if (!name)
        return tack_error_set(TACK_EVALUE, "device name is NULL; pass a backend name such as \"cpu\"");
    const char *colon = strchr(name, ':');
    size_t len = colon ? (size_t)(colon - name) : strlen(name);
    const struct tack_backend_ops *found = tack_backend_find(name, len);
    if (!found) {
        tack_backend_list(known, sizeof known);
        return tack_error_set(TACK_EVALUE, "unknown device '%s'; known backends: %s", name, known);
    }
    long ord = 0;
    if (colon) {
        char *end;
        errno = 0;
        ord = strtol(colon + 1, &end, 10);
        /* Digits only, no sign, space or leading zero: one spelling per device. */
        int canonical = colon[1] >= '0' && colon[1] <= '9' && !(colon[1] == '0' && colon[2] != 0);
        if (!canonical || *end != 0 || errno || ord < 0 || ord > 1 << 20)
            return tack_error_set(TACK_EVALUE,
                                  "malformed device name '%s'; write \"<backend>\" or \"<backend>:<index>\"",
                                  name);
    }
    *ops = found;
    *ordinal = (int)ord;
    return TACK_OK;
}

static tack_status check_options(const struct tack_backend_ops *ops, const tack_option *options, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int ok = 0;
        for (const char *const *o = ops->options; o && *o && !ok; o++)
            ok = options[i].name && !strcmp(*o, options[i].name);
        if (!ok) {
            char accepted[256] = "none";
            size_t used = 0;
            for (const char *const *o = ops->options; o && *o && used < sizeof accepted; o++)
                used += (size_t)snprintf(accepted + used, sizeof accepted - used, "%s'%s'",
                                         used ? ", " : "", *o);
            return tack_error_set(TACK_EVALUE, "backend '%s' does not accept the option '%s'; it accepts: %s",
                                  ops->name, options[i].name ? options[i].name : "(null)", accepted);
        }
    }
    return TACK_OK;
}

static tack_status make_device(const struct tack_backend_ops *ops, int ordinal, const tack_option *options,
                               size_t n, tack_device **out)
{
    tack_device *d = calloc(1, sizeof *d);
    if (!d)
        return tack_error_set(TACK_ENOMEM, "out of memory creating a device");
    atomic_init(&d->refs, 1);
    d->ops = ops;
    d->ordinal = ordinal;
    d->domain = atomic_fetch_add(&next_domain, 1);
    if (ordinal == 0 && ops->dl_type == kDLCPU)
        snprintf(d->name, sizeof d->name, "%s", ops->name);
    else
        snprintf(d->name, sizeof d->name, "%s:%d", ops->name, ordinal);
    tack_status st = ops->open(d, options, n);
    if (st != TACK_OK) {
        free(d);
        return st;
    }
    *out = d;
    return TACK_OK;
}

static tack_status registry_get(const struct tack_backend_ops *ops, int ordinal, tack_device **out)
{
    tack_status st = TACK_OK;
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < registry_len; i++) {
        if (registry[i].ops == ops && registry[i].ordinal == ordinal) {
            *out = tack_device_retain(registry[i].device);
            goto done;
        }
    }
    if (registry_len == REGISTRY_MAX) {
        st = tack_error_set(TACK_ERUNTIME, "too many devices open (%d)", REGISTRY_MAX);
        goto done;
    }
    tack_device *d;
    st = make_device(ops, ordinal, NULL, 0, &d);
    if (st == TACK_OK) {
        registry[registry_len].ops = ops;
        registry[registry_len].ordinal = ordinal;
        d->immortal = 1; /* the registry keeps it until exit */
        atomic_store_explicit(&d->refs, 2, memory_order_relaxed); /* the registry's and the caller's */
        registry[registry_len].device = d;
        registry_len++;
        *out = d;
    }
done:
    pthread_mutex_unlock(&registry_lock);
    return st;
}

/* The backend and ordinal `name` names, with `options` checked against
 * the backend's. TACK_EVALUE for a bad name or option; nothing set. */
static tack_status check_name_and_options(const char *name, const tack_option *options, size_t n_options,
                                          const struct tack_backend_ops **ops, int *ordinal)
{
    tack_status st = parse_name(name, ops, ordinal);
    if (st != TACK_OK)
        return st;
    if (n_options && !options)
        return tack_error_set(TACK_EVALUE, "%zu options given but the option array is NULL", n_options);
    return check_options(*ops, options, n_options);
}

tack_status tack_device_open(const char *name, const tack_option *options, size_t n_options, tack_device **out)
{
    TACK_PUBLIC_CALL();
    const struct tack_backend_ops *ops;
    int ordinal;
    tack_status st = check_name_and_options(name, options, n_options, &ops, &ordinal);
    if (st != TACK_OK)
        return st;
    if (!out)
        return tack_error_set(TACK_EVALUE, "out is NULL");
    if (n_options == 0)
        return registry_get(ops, ordinal, out);
    return make_device(ops, ordinal, options, n_options, out);
}

tack_status tack_device_check_options(const char *name, const tack_option *options, size_t n_options)
{
    TACK_PUBLIC_CALL();
    const struct tack_backend_ops *ops;
    int ordinal;
    return check_name_and_options(name, options, n_options, &ops, &ordinal);
}

tack_status tack_device_for_dlpack(DLDevice dl, tack_device **out)
{
    TACK_PUBLIC_CALL();
    if (!out)
        return tack_error_set(TACK_EVALUE, "out is NULL");
    /* The first backend in the table that wraps this device type. */
    for (int i = 0; tack_backends[i]; i++) {
        for (const DLDeviceType *t = tack_backends[i]->wraps; t && *t; t++) {
            if (*t == dl.device_type) {
                int ordinal = tack_backends[i]->dl_type == kDLCPU ? 0 : dl.device_id;
                if (ordinal < 0)
                    return tack_error_set(TACK_EVALUE, "DLPack device id %d is negative", (int)dl.device_id);
                return registry_get(tack_backends[i], ordinal, out);
            }
        }
    }
    return tack_error_set(TACK_EVALUE, "DLPack device type %d is not supported by Tack", (int)dl.device_type);
}

tack_device *tack_device_retain(tack_device *d)
{
    TACK_ONE_COPY_SKIP(d);
    if (d)
        atomic_fetch_add_explicit(&d->refs, 1, memory_order_relaxed);
    return d;
}

/* A process-wide device's release: its count never goes below the
 * registry's own reference, so a release after the caller's last is
 * reported as an array's is (and changes nothing) rather than ignored. */
static void release_immortal(tack_device *d)
{
    long n = tack_ref_peek(&d->refs);
    do {
        if (n <= 1) {
            tack_misuse_released("tack_device_release", "device", d);
            return;
        }
    } while (!atomic_compare_exchange_weak_explicit(&d->refs, &n, n - 1, memory_order_acq_rel,
                                                    memory_order_acquire));
}

void tack_device_release(tack_device *d)
{
    TACK_ONE_COPY_SKIP();
    if (!d)
        return;
    if (d->immortal) {
        release_immortal(d);
        return;
    }
    if (!tack_ref_release_last(&d->refs, "tack_device_release", "device", d))
        return;
    tack_backend_close(d);
    atomic_store_explicit(&d->refs, TACK_REFS_FREED, memory_order_relaxed);
    tack_handle_free(d);
}

const char *tack_device_backend(const tack_device *d) { return d->ops->name; }
int tack_device_ordinal(const tack_device *d) { return d->ordinal; }
const char *tack_device_name(const tack_device *d) { return d->name; }
uint64_t tack_device_memory_domain(const tack_device *d) { return d->domain; }
int tack_device_shares_external_context(const tack_device *d) { return d->external_context; }
tack_status tack_device_wait_stream(tack_device *d, uint64_t stream)
{
    TACK_PUBLIC_CALL();
    if (!d)
        return tack_error_set(TACK_EVALUE, "device is NULL");
    tack_status st = tack_refuse_released(&d->refs, "tack_device_wait_stream", "device", d);
    if (st != TACK_OK)
        return st;
    return tack_backend_wait_stream(d, stream);
}

uint64_t tack_device_stream_handle(const tack_device *d)
{
    return tack_backend_stream_handle(d);
}

uint64_t tack_device_context_handle(const tack_device *d)
{
    return tack_backend_context_handle(d);
}

DLDevice tack_device_dl_device(const tack_device *d)
{
    DLDevice dl = {d->ops->dl_type, d->ops->dl_type == kDLCPU ? 0 : d->ordinal};
    return dl;
}

int tack_device_can_wrap(const tack_device *d, DLDevice dl)
{
    for (const DLDeviceType *t = d->ops->wraps; t && *t; t++) {
        if (*t != dl.device_type)
            continue;
        /* Host memory is host memory whichever id it carries; device memory
         * must be on this device's ordinal. */
        if (d->ops->dl_type == kDLCPU)
            return 1;
        return dl.device_id == d->ordinal;
    }
    return 0;
}

tack_status tack_device_synchronize(tack_device *d)
{
    TACK_PUBLIC_CALL();
    if (!d)
        return tack_error_set(TACK_EVALUE, "device is NULL");
    tack_status st = tack_refuse_released(&d->refs, "tack_device_synchronize", "device", d);
    if (st != TACK_OK)
        return st;
    uint64_t target = atomic_load(&d->submitted);
    st = tack_backend_synchronize(d);
    if (st == TACK_OK) {
        uint64_t done = atomic_load(&d->completed);
        while (done < target && !atomic_compare_exchange_weak(&d->completed, &done, target)) {
        }
    }
    return st;
}

tack_status tack_memory_space(uint64_t address, const char **out)
{
    TACK_PUBLIC_CALL();
    if (!out)
        return tack_error_set(TACK_EVALUE, "out is NULL");
    for (int i = 0; tack_backends[i]; i++) {
        if (!tack_backend_has_memory_space(tack_backends[i]))
            continue;
        tack_device *d;
        /* A backend that cannot open (no driver, no device) holds no
         * memory that an address could be (nor leaves a message). */
        if (registry_get(tack_backends[i], 0, &d) != TACK_OK) {
            tack_error_clear();
            continue;
        }
        const char *space = NULL;
        tack_status st = tack_backend_memory_space(d, address, &space);
        tack_device_release(d);
        if (st != TACK_OK)
            return st;
        if (space) {
            *out = space;
            return TACK_OK;
        }
    }
    *out = "cpu";
    return TACK_OK;
}
