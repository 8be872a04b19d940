/*
 * The Level Zero backend (Intel GPUs through oneAPI).
 *
 * A USM pointer means something only in the context that allocated it, and
 * DLPack carries no context. So a device either has a context of Tack's own
 * (first driver, its device <ordinal>) or adopts all three handles of
 * another library's context with the option
 * external_context={"driver": d, "device": v, "context": c}; its memory
 * domain is the (context, device) pair, so arrays from two contexts never
 * meet in one launch.
 *
 * Tack destroys no Level Zero object, ever: not an adopted context (its
 * owner's), not its own context, command queue, command lists or fences (at
 * interpreter exit the driver may already be gone). Memory is freed;
 * objects are left, and reused rather than made again.
 *
 * Launches are queued, as on CUDA: each goes on a command list executed on
 * an asynchronous command queue, and the call returns without waiting.
 * Copies and fills go on a synchronous immediate list, which the driver
 * does not order against that queue; the core waits for a buffer's
 * launches (synchronize) before a host copy touches it, and before a free
 * that the driver cannot defer.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "../core/toolchain.h"
#include "../driver/level_zero.h"
#include "../driver/ocloc.h"
#include "tack/kernel.h"

/* Launches in flight before the host waits for the oldest. A command list
 * may be reset only once the queue has finished it, so each launch takes
 * the next list of a ring, each list with a fence that the execution
 * signals: reusing a slot waits on its fence (long done, unless the ring
 * is outrun), resets fence and list, and records afresh. Nothing is made
 * per launch, so nothing needs destroying; eight keeps a GPU busy without
 * holding many objects per device. */
#define LAUNCH_SLOTS 8

enum slot_state {
    SLOT_EMPTY,     /* list reset, fence unsignalled: ready to record */
    SLOT_RECORDED,  /* list holds commands never executed: reset it */
    SLOT_SUBMITTED, /* executed with the fence: wait on it, then reset both */
};

struct launch_slot {
    tack_ze_command_list list;
    tack_ze_fence fence;
    enum slot_state state;
};

struct ze_device_state {
    const struct tack_ze_api *ze;
    tack_ze_driver driver;
    tack_ze_device device;
    tack_ze_context context;
    /* Copies and zero-fills: an immediate, synchronous list, so each
     * returns complete. Level Zero command lists and queues are not
     * thread-safe: every call on them is made under `lock`. */
    tack_ze_command_list copies;
    /* Launches: an asynchronous queue and the ring of lists it executes. */
    tack_ze_command_queue queue;
    struct launch_slot slots[LAUNCH_SLOTS];
    unsigned next_slot;
    pthread_mutex_t lock;
    uint32_t compute_group;
    /* The driver frees memory once the work queued on it is done
     * (zeMemFreeExt with the deferred policy). */
    int deferred_free;
    int fp64;
    uint32_t device_id; /* PCI device id: what ocloc compiles for */
    tack_ze_device_compute_properties compute;
    char device_name[TACK_ZE_MAX_DEVICE_NAME];
};

#define STATE(d) ((struct ze_device_state *)(d)->impl)

static tack_status ze_fail(const char *call, tack_ze_result r)
{
    tack_status st = r == TACK_ZE_ERROR_OUT_OF_DEVICE_MEMORY || r == TACK_ZE_ERROR_OUT_OF_HOST_MEMORY
                         ? TACK_ENOMEM
                         : TACK_ERUNTIME;
    return tack_error_set(st, "Level Zero %s failed: %s (0x%" PRIx32 ")", call, tack_ze_result_name(r), r);
}

/* ---- external_context ------------------------------------------------ */

static const char *const handle_fields[3] = {"driver", "device", "context"};

/* Reads external_context's three handles. All three are required and must
 * be non-null: a driver or device Tack found on its own need not be the one
 * the context was made against, so Tack fills in nothing. */
static tack_status parse_external_context(const tack_option *options, size_t n, uint64_t handles[3])
{
    int seen[3] = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        const tack_option *o = &options[i];
        /* No field and no value: the option given with no handles at all
         * (None, an empty dict), reported below as all three missing. */
        if (!o->field && !o->value)
            continue;
        if (!o->field)
            return tack_error_set(TACK_EVALUE,
                                  "external_context must be a dict of integer handles: "
                                  "{'driver': ..., 'device': ..., 'context': ...}");
        int k = -1;
        for (int j = 0; j < 3; j++)
            if (!strcmp(o->field, handle_fields[j]))
                k = j;
        if (k < 0)
            return tack_error_set(TACK_EVALUE,
                                  "external_context has no field '%s'; it takes the 'driver', 'device' and "
                                  "'context' handles of the other library's Level Zero context",
                                  o->field);
        if (seen[k])
            return tack_error_set(TACK_EVALUE, "external_context gives '%s' twice", o->field);
        seen[k] = 1;
        handles[k] = o->value;
    }
    char missing[64] = "";
    size_t used = 0;
    for (int j = 0; j < 3; j++)
        if (!seen[j] || !handles[j])
            used += (size_t)snprintf(missing + used, sizeof missing - used, "%s'%s'", used ? ", " : "",
                                     handle_fields[j]);
    if (used)
        return tack_error_set(TACK_EVALUE,
                              "external_context needs all three handles, non-null; missing or null: %s. Pass "
                              "the driver, device and context of the other library's queue (Tack fills in none "
                              "of its own: a driver or device found separately need not be the context's)",
                              missing);
    return TACK_OK;
}

/* ---- process-wide bookkeeping ---------------------------------------- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

/* Tack's own context on the first driver: made once, shared by the plain
 * devices, never destroyed, so a failed open that is retried makes no
 * second one. */
static tack_ze_driver own_driver;
static tack_ze_context own_context;

/* One memory domain per (context, device): two Tack devices over the same
 * pair (external_context given twice) allocate the same kind of memory, a
 * device over another pair does not. */
#define DOMAINS_MAX 256
static struct {
    uint64_t context, device, domain;
} domains[DOMAINS_MAX];
static int domains_len;

static uint64_t domain_for(tack_ze_context context, tack_ze_device device, uint64_t fresh)
{
    uint64_t c = (uint64_t)(uintptr_t)context, v = (uint64_t)(uintptr_t)device, domain = fresh;
    pthread_mutex_lock(&registry_lock);
    int i;
    for (i = 0; i < domains_len; i++) {
        if (domains[i].context == c && domains[i].device == v) {
            domain = domains[i].domain;
            break;
        }
    }
    /* A full table only costs sharing: later devices keep unique domains. */
    if (i == domains_len && domains_len < DOMAINS_MAX) {
        domains[domains_len].context = c;
        domains[domains_len].device = v;
        domains[domains_len].domain = fresh;
        domains_len++;
    }
    pthread_mutex_unlock(&registry_lock);
    return domain;
}

static tack_status own_context_get(const struct tack_ze_api *ze, tack_ze_driver driver, tack_ze_context *out)
{
    tack_status st = TACK_OK;
    pthread_mutex_lock(&registry_lock);
    if (!own_context || own_driver != driver) {
        tack_ze_context_desc desc = {TACK_ZE_STRUCTURE_TYPE_CONTEXT_DESC, NULL, 0};
        tack_ze_context c = NULL;
        tack_ze_result r = ze->zeContextCreate(driver, &desc, &c);
        if (r != TACK_ZE_SUCCESS) {
            st = ze_fail("zeContextCreate", r);
            goto done;
        }
        own_driver = driver;
        own_context = c;
    }
    *out = own_context;
done:
    pthread_mutex_unlock(&registry_lock);
    return st;
}

/* ---- open ------------------------------------------------------------ */

static tack_status find_plain(const struct tack_ze_api *ze, int ordinal, tack_ze_driver *driver,
                              tack_ze_device *device)
{
    uint32_t count = 1;
    tack_ze_driver first = NULL;
    tack_ze_result r = ze->zeDriverGet(&count, &first);
    if (r != TACK_ZE_SUCCESS)
        return ze_fail("zeDriverGet", r);
    if (count == 0 || !first)
        return tack_error_set(TACK_ENODEVICE,
                              "no Level Zero GPU driver found; install your GPU's Level Zero driver "
                              "(Debian/Ubuntu: intel-level-zero-gpu)");
    count = 0;
    r = ze->zeDeviceGet(first, &count, NULL);
    if (r != TACK_ZE_SUCCESS)
        return ze_fail("zeDeviceGet", r);
    if ((uint32_t)ordinal >= count)
        return tack_error_set(TACK_ENODEVICE, "no Level Zero device level_zero:%d: the first driver has %" PRIu32
                              " device(s)", ordinal, count);
    tack_ze_device *all = calloc(count, sizeof *all);
    if (!all)
        return tack_error_set(TACK_ENOMEM, "out of memory listing Level Zero devices");
    r = ze->zeDeviceGet(first, &count, all);
    tack_ze_device dev = (uint32_t)ordinal < count ? all[ordinal] : NULL;
    free(all);
    if (r != TACK_ZE_SUCCESS)
        return ze_fail("zeDeviceGet", r);
    if (!dev)
        return tack_error_set(TACK_ENODEVICE, "no Level Zero device level_zero:%d", ordinal);
    *driver = first;
    *device = dev;
    return TACK_OK;
}

/* The adopted device's index among its driver's devices, which DLPack
 * exports as the device id; -1 when it is not listed (a sub-device). */
static int adopted_ordinal(const struct tack_ze_api *ze, tack_ze_driver driver, tack_ze_device device)
{
    uint32_t count = 0;
    if (ze->zeDeviceGet(driver, &count, NULL) != TACK_ZE_SUCCESS || count == 0 || count > 4096)
        return -1;
    tack_ze_device *all = calloc(count, sizeof *all);
    if (!all)
        return -1;
    int found = -1;
    if (ze->zeDeviceGet(driver, &count, all) == TACK_ZE_SUCCESS)
        for (uint32_t i = 0; i < count && found < 0; i++)
            if (all[i] == device)
                found = (int)i;
    free(all);
    return found;
}

static tack_status query_device(struct ze_device_state *s)
{
    const struct tack_ze_api *ze = s->ze;
    tack_ze_device_properties props;
    memset(&props, 0, sizeof props);
    props.stype = TACK_ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    tack_ze_result r = ze->zeDeviceGetProperties(s->device, &props);
    if (r != TACK_ZE_SUCCESS)
        return ze_fail("zeDeviceGetProperties", r);
    memcpy(s->device_name, props.name, sizeof s->device_name);
    s->device_id = props.deviceId;
    s->device_name[sizeof s->device_name - 1] = 0;

    memset(&s->compute, 0, sizeof s->compute);
    s->compute.stype = TACK_ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES;
    r = ze->zeDeviceGetComputeProperties(s->device, &s->compute);
    if (r != TACK_ZE_SUCCESS)
        return ze_fail("zeDeviceGetComputeProperties", r);

    tack_ze_device_module_properties module;
    memset(&module, 0, sizeof module);
    module.stype = TACK_ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES;
    r = ze->zeDeviceGetModuleProperties(s->device, &module);
    if (r != TACK_ZE_SUCCESS)
        return ze_fail("zeDeviceGetModuleProperties", r);
    s->fp64 = (module.flags & TACK_ZE_DEVICE_MODULE_FLAG_FP64) != 0;

    /* Queues go to a group that runs kernels; on Intel GPUs that is usually,
     * but not by any rule, group 0. */
    uint32_t groups = 0;
    r = ze->zeDeviceGetCommandQueueGroupProperties(s->device, &groups, NULL);
    if (r != TACK_ZE_SUCCESS)
        return ze_fail("zeDeviceGetCommandQueueGroupProperties", r);
    if (groups == 0 || groups > 1024)
        return tack_error_set(TACK_ERUNTIME, "Level Zero device '%s' reports %" PRIu32 " command queue groups",
                              s->device_name, groups);
    tack_ze_command_queue_group_properties *g = calloc(groups, sizeof *g);
    if (!g)
        return tack_error_set(TACK_ENOMEM, "out of memory reading Level Zero queue groups");
    for (uint32_t i = 0; i < groups; i++)
        g[i].stype = TACK_ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
    r = ze->zeDeviceGetCommandQueueGroupProperties(s->device, &groups, g);
    int compute = -1;
    for (uint32_t i = 0; r == TACK_ZE_SUCCESS && i < groups && compute < 0; i++)
        if (g[i].flags & TACK_ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE)
            compute = (int)i;
    free(g);
    if (r != TACK_ZE_SUCCESS)
        return ze_fail("zeDeviceGetCommandQueueGroupProperties", r);
    if (compute < 0)
        return tack_error_set(TACK_ERUNTIME, "Level Zero device '%s' has no command queue group that computes",
                              s->device_name);
    s->compute_group = (uint32_t)compute;
    return TACK_OK;
}

/* Whether the driver offers deferred frees; a driver without the extension
 * ignores the chained structure and leaves it zero. */
static int query_deferred_free(const struct tack_ze_api *ze, tack_ze_driver driver)
{
    if (!ze->zeMemFreeExt)
        return 0;
    tack_ze_driver_memory_free_ext_properties ext = {TACK_ZE_STRUCTURE_TYPE_DRIVER_MEMORY_FREE_EXT_PROPERTIES,
                                                     NULL, 0};
    tack_ze_driver_properties props;
    memset(&props, 0, sizeof props);
    props.stype = TACK_ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES;
    props.pNext = &ext;
    if (ze->zeDriverGetProperties(driver, &props) != TACK_ZE_SUCCESS)
        return 0;
    return (ext.freePolicies & TACK_ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE) != 0;
}

/* The copy list, the launch queue and the launch ring, all in the device's
 * context (Tack's own or the adopted one) on the group that computes. */
static tack_status create_queues(struct ze_device_state *s)
{
    const struct tack_ze_api *ze = s->ze;
    tack_ze_command_queue_desc desc = {TACK_ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, NULL, s->compute_group, 0, 0,
                                       TACK_ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS, 0};
    tack_ze_result r = ze->zeCommandListCreateImmediate(s->context, s->device, &desc, &s->copies);
    if (r != TACK_ZE_SUCCESS)
        return ze_fail("zeCommandListCreateImmediate", r);
    desc.mode = TACK_ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS;
    r = ze->zeCommandQueueCreate(s->context, s->device, &desc, &s->queue);
    if (r != TACK_ZE_SUCCESS)
        return ze_fail("zeCommandQueueCreate", r);
    tack_ze_command_list_desc list_desc = {TACK_ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, NULL, s->compute_group, 0};
    tack_ze_fence_desc fence_desc = {TACK_ZE_STRUCTURE_TYPE_FENCE_DESC, NULL, 0};
    for (int i = 0; i < LAUNCH_SLOTS; i++) {
        r = ze->zeCommandListCreate(s->context, s->device, &list_desc, &s->slots[i].list);
        if (r != TACK_ZE_SUCCESS)
            return ze_fail("zeCommandListCreate", r);
        r = ze->zeFenceCreate(s->queue, &fence_desc, &s->slots[i].fence);
        if (r != TACK_ZE_SUCCESS)
            return ze_fail("zeFenceCreate", r);
        s->slots[i].state = SLOT_EMPTY;
    }
    s->next_slot = 0;
    return TACK_OK;
}

static tack_status ze_open(tack_device *device, const tack_option *options, size_t n_options)
{
    uint64_t handles[3] = {0, 0, 0};
    int adopt = n_options > 0;
    /* A malformed option is the caller's mistake whether or not a driver is
     * installed, so it is reported first. */
    if (adopt) {
        tack_status st = parse_external_context(options, n_options, handles);
        if (st != TACK_OK)
            return st;
    }
    const struct tack_ze_api *ze;
    tack_status st = tack_ze_load(&ze);
    if (st != TACK_OK)
        return st;
    /* Idempotent; another library may have initialised the driver already. */
    tack_ze_result r = ze->zeInit(TACK_ZE_INIT_FLAG_GPU_ONLY);
    if (r != TACK_ZE_SUCCESS)
        return tack_error_set(TACK_ERUNTIME,
                              "Level Zero zeInit failed: %s (0x%" PRIx32 "); is an Intel GPU driver installed "
                              "(Debian/Ubuntu: intel-level-zero-gpu)?",
                              tack_ze_result_name(r), r);

    struct ze_device_state *s = calloc(1, sizeof *s);
    if (!s)
        return tack_error_set(TACK_ENOMEM, "out of memory opening a Level Zero device");
    s->ze = ze;
    int ordinal = device->ordinal;
    if (adopt) {
        s->driver = (tack_ze_driver)(uintptr_t)handles[0];
        s->device = (tack_ze_device)(uintptr_t)handles[1];
        s->context = (tack_ze_context)(uintptr_t)handles[2];
        int listed = adopted_ordinal(ze, s->driver, s->device);
        if (listed >= 0)
            ordinal = listed;
    } else {
        st = find_plain(ze, device->ordinal, &s->driver, &s->device);
        if (st != TACK_OK)
            goto fail;
    }
    st = query_device(s);
    if (st != TACK_OK)
        goto fail;
    if (!adopt) {
        st = own_context_get(ze, s->driver, &s->context);
        if (st != TACK_OK)
            goto fail;
    }
    s->deferred_free = query_deferred_free(ze, s->driver);
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        st = tack_error_set(TACK_ERUNTIME, "cannot initialise a mutex for a Level Zero device");
        goto fail;
    }
    /* Last, because these are the objects this open makes that a later
     * failure would strand (they are never destroyed; a failed open leaves
     * them to the driver, with the context). */
    st = create_queues(s);
    if (st != TACK_OK) {
        pthread_mutex_destroy(&s->lock);
        goto fail;
    }
    device->impl = s;
    device->external_context = adopt;
    device->domain = domain_for(s->context, s->device, device->domain);
    if (ordinal != device->ordinal) {
        /* The handles decide which device this is; the name follows. */
        device->ordinal = ordinal;
        snprintf(device->name, sizeof device->name, "level_zero:%d", ordinal);
    }
    return TACK_OK;
fail:
    free(s);
    return st;
}

static void ze_close(tack_device *device)
{
    /* Only Tack's own record goes: every Level Zero object stays. */
    struct ze_device_state *s = STATE(device);
    if (!s)
        return;
    pthread_mutex_destroy(&s->lock);
    free(s);
    device->impl = NULL;
}

/* ---- memory ---------------------------------------------------------- */

static tack_status ze_alloc(tack_device *device, size_t nbytes, int exportable, void **data, void **ctx)
{
    (void)exportable; /* Level Zero has no memory export; the core refuses it */
    struct ze_device_state *s = STATE(device);
    tack_ze_device_mem_alloc_desc desc = {TACK_ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, NULL, 0, 0};
    void *p = NULL;
    tack_ze_result r = s->ze->zeMemAllocDevice(s->context, &desc, nbytes ? nbytes : 1, 0, s->device, &p);
    if (r != TACK_ZE_SUCCESS) {
        if (r == TACK_ZE_ERROR_OUT_OF_DEVICE_MEMORY || r == TACK_ZE_ERROR_OUT_OF_HOST_MEMORY)
            return tack_error_set(TACK_ENOMEM, "out of Level Zero device memory allocating %zu bytes on %s (%s)",
                                  nbytes, device->name, tack_ze_result_name(r));
        return ze_fail("zeMemAllocDevice", r);
    }
    /* Device memory comes uninitialised; every Tack allocation is zeroed. */
    static const uint8_t zero = 0;
    pthread_mutex_lock(&s->lock);
    r = s->ze->zeCommandListAppendMemoryFill(s->copies, p, &zero, 1, nbytes ? nbytes : 1, NULL, 0, NULL);
    pthread_mutex_unlock(&s->lock);
    if (r != TACK_ZE_SUCCESS) {
        s->ze->zeMemFree(s->context, p);
        return ze_fail("zeCommandListAppendMemoryFill", r);
    }
    *data = p;
    *ctx = NULL;
    return TACK_OK;
}

static tack_status ze_synchronize(tack_device *device)
{
    /* Copies and fills run on a synchronous list and are complete on
     * return; launches wait on the queue. Every launch executed before
     * this call is covered, which is what the core's count assumes. */
    struct ze_device_state *s = STATE(device);
    pthread_mutex_lock(&s->lock);
    tack_ze_result r = s->ze->zeCommandQueueSynchronize(s->queue, UINT64_MAX);
    pthread_mutex_unlock(&s->lock);
    if (r != TACK_ZE_SUCCESS)
        return tack_error_set(TACK_ERUNTIME, "Level Zero zeCommandQueueSynchronize failed on %s: %s (0x%" PRIx32
                              "); queued kernels may not have run",
                              device->name, tack_ze_result_name(r), r);
    return TACK_OK;
}

static void ze_free(tack_device *device, void *data, void *ctx)
{
    (void)ctx;
    struct ze_device_state *s = STATE(device);
    if (s->deferred_free) {
        tack_ze_memory_free_ext_desc desc = {TACK_ZE_STRUCTURE_TYPE_MEMORY_FREE_EXT_DESC, NULL,
                                             TACK_ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE};
        if (s->ze->zeMemFreeExt(s->context, &desc, data) == TACK_ZE_SUCCESS)
            return;
    }
    /* An immediate free of memory a queued kernel still uses would be a use
     * after free on the device: wait first. A failure here has no caller to
     * report to, and the memory goes with the context either way. */
    (void)ze_synchronize(device);
    (void)s->ze->zeMemFree(s->context, data);
}

/* What the driver says of an address, in the device's context (which
 * reports allocations of any context on the device). The driver answers for
 * every address, so a failure is a fault, not a verdict on the memory:
 * TACK_ERUNTIME, *props and *owner then unspecified. */
static tack_status ze_alloc_properties(struct ze_device_state *s, uint64_t address,
                                       tack_ze_memory_allocation_properties *props, tack_ze_device *owner)
{
    memset(props, 0, sizeof *props);
    props->stype = TACK_ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES;
    *owner = NULL;
    tack_ze_result r = s->ze->zeMemGetAllocProperties(s->context, (const void *)(uintptr_t)address, props, owner);
    if (r != TACK_ZE_SUCCESS)
        return tack_error_set(TACK_ERUNTIME, "Level Zero zeMemGetAllocProperties failed for 0x%" PRIx64 ": %s (0x%"
                              PRIx32 ")", address, tack_ze_result_name(r), r);
    return TACK_OK;
}

static tack_status ze_check_pointer(tack_device *device, uint64_t address)
{
    struct ze_device_state *s = STATE(device);
    if (address == 0)
        return TACK_OK; /* only an empty array has it, and nothing is read */
    tack_ze_memory_allocation_properties props;
    tack_ze_device owner;
    tack_status st = ze_alloc_properties(s, address, &props, &owner);
    if (st != TACK_OK)
        return st;
    switch (props.type) {
    case TACK_ZE_MEMORY_TYPE_DEVICE:
        if (owner && owner != s->device)
            return tack_error_set(TACK_EVALUE,
                                  "0x%" PRIx64 " is device memory of another Level Zero device than %s; wrap it "
                                  "on the device that allocated it",
                                  address, device->name);
        return TACK_OK;
    case TACK_ZE_MEMORY_TYPE_SHARED:
        return TACK_OK;
    case TACK_ZE_MEMORY_TYPE_HOST:
        return tack_error_set(TACK_EVALUE,
                              "0x%" PRIx64 " is Level Zero host memory; %s wraps USM device or shared memory. "
                              "Wrap host memory on tack.device('cpu')",
                              address, device->name);
    default:
        return tack_error_set(TACK_EVALUE,
                              "0x%" PRIx64 " is not a Level Zero allocation (ordinary host memory?); %s wraps "
                              "USM device or shared memory. Wrap host memory on tack.device('cpu')",
                              address, device->name);
    }
}

/* tack_memory_space's answer from the driver (ze_alloc_properties);
 * TACK_ERUNTIME, *out untouched, when the query fails. */
static tack_status ze_memory_space(tack_device *device, uint64_t address, const char **out)
{
    struct ze_device_state *s = STATE(device);
    tack_ze_memory_allocation_properties props;
    tack_ze_device owner;
    tack_status st = ze_alloc_properties(s, address, &props, &owner);
    if (st != TACK_OK)
        return st;
    *out = props.type == TACK_ZE_MEMORY_TYPE_DEVICE   ? "level_zero"
           : props.type == TACK_ZE_MEMORY_TYPE_SHARED ? "level_zero_shared"
           : props.type == TACK_ZE_MEMORY_TYPE_HOST   ? "level_zero_host"
                                                      : NULL;
    return TACK_OK;
}

static tack_status ze_copy(tack_device *device, void *dst, const void *src, size_t nbytes, const char *what)
{
    struct ze_device_state *s = STATE(device);
    pthread_mutex_lock(&s->lock);
    tack_ze_result r = s->ze->zeCommandListAppendMemoryCopy(s->copies, dst, src, nbytes, NULL, 0, NULL);
    pthread_mutex_unlock(&s->lock);
    if (r != TACK_ZE_SUCCESS)
        return tack_error_set(TACK_ERUNTIME, "Level Zero copy %s of %zu bytes on %s failed: %s (0x%" PRIx32 ")",
                              what, nbytes, device->name, tack_ze_result_name(r), r);
    return TACK_OK;
}

static tack_status ze_copy_to_host(tack_device *device, void *dst, const void *src, size_t nbytes)
{
    return ze_copy(device, dst, src, nbytes, "to the host");
}

static tack_status ze_copy_from_host(tack_device *device, void *dst, const void *src, size_t nbytes)
{
    return ze_copy(device, dst, src, nbytes, "from the host");
}

static uint64_t ze_context_handle(const tack_device *device)
{
    return (uint64_t)(uintptr_t)STATE(device)->context;
}

/* ---- kernels: the dialect and ocloc -----------------------------------------
 *
 * The generated source is OpenCL C, which libocloc (oclocInvoke, the
 * library form of Intel's ocloc) compiles in process to SPIR-V for the
 * device's PCI id; the kernel layer keeps it on disk. SPIR-V is what
 * zeModuleCreate takes; the driver finishes it for the GPU. */

/* Work-items, each index one's, the last index along dimension 0; each
 * loop strides over its global size, so any group count covers the domain. */
static void ze_entry(struct tack_source *b, const struct tack_signature *sig, const char *source)
{
    tack_source_signature_check(b, sig, source, TACK_CHECK_OPENCL);
    static const char *const dims[TACK_KERNEL_MAX_DIMS] = {
        "(tack_index)get_global_id(0)", "(tack_index)get_global_id(1)", "(tack_index)get_global_id(2)"};
    static const char *const steps[TACK_KERNEL_MAX_DIMS] = {
        "(tack_index)get_global_size(0)", "(tack_index)get_global_size(1)", "(tack_index)get_global_size(2)"};
    tack_source_device_entry(b, sig, "__kernel void ", "__global ", dims, steps);
}

#define NO_COMPLEX "OpenCL C has no complex type; complex parameters work on the cpu backend"
static const char *const ze_lacks[TACK_NDTYPES] = {
    [TACK_BOOL] = "OpenCL C allows no bool kernel parameter (the size of its bool is the device's); pass 0 and 1 "
                  "as uint8_t",
    [TACK_C64] = NO_COMPLEX,
    [TACK_C128] = NO_COMPLEX,
};
#undef NO_COMPLEX

static const struct tack_dialect ze_dialect = {
    .name = "level_zero",
    .prelude = "#ifdef cl_khr_fp64\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#endif\n"
               "#ifdef cl_khr_int64_base_atomics\n#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable\n#endif\n"
               "#ifdef cl_khr_int64_extended_atomics\n"
               "#pragma OPENCL EXTENSION cl_khr_int64_extended_atomics : enable\n#endif\n"
               /* OpenCL C fixes its integer widths (char is signed 8 bits,
                * long 64) and has no stdint.h. */
               "typedef char int8_t;\ntypedef uchar uint8_t;\n"
               "typedef short int16_t;\ntypedef ushort uint16_t;\n"
               "typedef int int32_t;\ntypedef uint uint32_t;\n"
               "typedef long int64_t;\ntypedef ulong uint64_t;\n"
               "typedef long tack_index;\n"
               /* The atomics: OpenCL's own on 32 bits, the int64 extensions'
                * on 64, compare-and-swap loops for floating point. Every
                * array is __global (the entry's parameters are), so the
                * user's generic pointers cast to it. Overloadable, as every
                * OpenCL C compiler that Level Zero drives is clang. A 64-bit
                * one on a device without the extension does not compile. */
               "#define TACK_ATOMIC_(op, fn, T) static inline __attribute__((overloadable)) T "
               "tack_atomic_##op(T *p, T v) { return fn((volatile __global T *)p, v); }\n"
               "#define TACK_ATOMIC_FLOAT_(T, U, cas, as_t, as_u) static inline __attribute__((overloadable)) T "
               "tack_atomic_add(T *p, T v) { volatile __global U *q = (volatile __global U *)p; U old = *q, seen; "
               "do { seen = old; old = cas(q, seen, as_u(as_t(seen) + v)); } while (old != seen); "
               "return as_t(old); }\n"
               "TACK_ATOMIC_(add, atomic_add, int) TACK_ATOMIC_(add, atomic_add, uint)\n"
               "TACK_ATOMIC_(min, atomic_min, int) TACK_ATOMIC_(min, atomic_min, uint)\n"
               "TACK_ATOMIC_(max, atomic_max, int) TACK_ATOMIC_(max, atomic_max, uint)\n"
               "TACK_ATOMIC_FLOAT_(float, uint, atomic_cmpxchg, as_float, as_uint)\n"
               "#ifdef cl_khr_int64_base_atomics\n"
               "TACK_ATOMIC_(add, atom_add, long) TACK_ATOMIC_(add, atom_add, ulong)\n"
               "#ifdef cl_khr_fp64\nTACK_ATOMIC_FLOAT_(double, ulong, atom_cmpxchg, as_double, as_ulong)\n#endif\n"
               "#endif\n"
               "#ifdef cl_khr_int64_extended_atomics\n"
               "TACK_ATOMIC_(min, atom_min, long) TACK_ATOMIC_(min, atom_min, ulong)\n"
               "TACK_ATOMIC_(max, atom_max, long) TACK_ATOMIC_(max, atom_max, ulong)\n"
               "#endif\n"
               "#define TACK_BACKEND_LEVEL_ZERO 1\n"
               "#define TACK_INLINE_ static inline\n"
               "#define tack_bits_of_float_(f) as_uint(f)\n"
               "#define tack_float_of_bits_(u) as_float(u)\n"
               /* half is a type of its own, parameters and arithmetic, on a
                * device with cl_khr_fp16; OpenCL C has no bfloat16. */
               "#ifdef cl_khr_fp16\n#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n"
               "typedef half tack_f16;\n"
               "#define TACK_F16_NATIVE 1\n"
               "static inline float tack_f16_to_float(tack_f16 h) { return (float)h; }\n"
               "static inline tack_f16 tack_f16_from_float(float f) { return (tack_f16)f; }\n"
               "#else\n" TACK_PRELUDE_F16_STORAGE "#endif\n" TACK_PRELUDE_BF16_STORAGE,
    .entry = ze_entry,
    .offline = TACK_CODE_NONE,
    .lacks = ze_lacks,
};

/* OpenCL C 2.0 for its generic address space: the user's functions take
 * unqualified pointers, which the entry's __global ones convert to. */
#define OCLOC_OPTIONS "-cl-std=CL2.0"

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

/* What both steps check first: a device to compile for, and fp64 when the
 * kernel needs it (checked before compiling: the device would refuse the
 * module anyway, with a less useful message). Then loads libocloc, and
 * names the device as ocloc does: by its PCI device id (as well as by its
 * code name). */
static tack_status prepare(const struct tack_compile *job, const struct tack_ocloc_api **api, char device[32])
{
    if (!job->device)
        return tack_error_set(TACK_EVALUE, "Level Zero kernels compile for a device; kernel '%s' was given none",
                              job->name);
    struct ze_device_state *s = STATE(job->device);
    if (job->uses_f64 && !s->fp64)
        return tack_error_set(TACK_ERUNTIME,
                              "kernel '%s' takes float64 values, but Level Zero device %s (%s) has no fp64 "
                              "support (its module properties lack ZE_DEVICE_MODULE_FLAG_FP64); use float32 "
                              "on this device",
                              job->name, job->device->name, s->device_name);
    snprintf(device, 32, "0x%04" PRIx32, s->device_id);
    return tack_ocloc_load(api);
}

/* libocloc's version, as `ocloc query OCL_DRIVER_VERSION` gives it; ""
 * from a libocloc without that query. */
static void ocloc_version(const struct tack_ocloc_api *api, char *out, size_t cap)
{
    const char *argv[] = {"ocloc", "query", "OCL_DRIVER_VERSION"};
    uint32_t nout = 0;
    uint8_t **outputs = NULL;
    uint64_t *lens = NULL;
    char **names = NULL;
    out[0] = 0;
    int rc = api->oclocInvoke((unsigned)(sizeof argv / sizeof *argv), argv, 0, NULL, NULL, NULL, 0, NULL, NULL, NULL,
                              &nout, &outputs, &lens, &names);
    for (uint32_t i = 0; rc == 0 && outputs && names && lens && i < nout; i++) {
        if (!names[i] || strcmp(names[i], "OCL_DRIVER_VERSION") || !outputs[i])
            continue;
        size_t n = 0;
        while (n < lens[i] && n + 1 < cap && outputs[i][n] && outputs[i][n] != '\n' && outputs[i][n] != '\r')
            n++;
        memcpy(out, outputs[i], n);
        out[n] = 0;
    }
    if (outputs || names || lens)
        api->oclocFreeOutput(&nout, &outputs, &lens, &names);
}

/* The version of the libocloc loaded, asked once: the library stays
 * loaded for the process, and every kernel's key needs it. */
static pthread_mutex_t ocloc_version_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct tack_ocloc_api *ocloc_version_api;
static char ocloc_version_text[128];

static void loaded_ocloc_version(const struct tack_ocloc_api *api, char *out, size_t cap)
{
    pthread_mutex_lock(&ocloc_version_lock);
    if (ocloc_version_api != api) {
        ocloc_version(api, ocloc_version_text, sizeof ocloc_version_text);
        ocloc_version_api = api;
    }
    snprintf(out, cap, "%s", ocloc_version_text);
    pthread_mutex_unlock(&ocloc_version_lock);
}

/* SPIR-V depends on libocloc (its path, and its version, so that an
 * upgraded ocloc in the same place compiles again), the options and the
 * device. */
static tack_status ze_kernel_key(struct tack_compile *job)
{
    const struct tack_ocloc_api *api;
    char device[32], version[128];
    tack_status st = prepare(job, &api, device);
    if (st != TACK_OK)
        return st;
    loaded_ocloc_version(api, version, sizeof version);
    snprintf(job->key, sizeof job->key, "%s %s %s %s", tack_library_path(&api->library), version, OCLOC_OPTIONS,
             device);
    job->kind = TACK_CODE_SPIRV;
    return TACK_OK;
}

static tack_status ze_kernel_compile(const struct tack_compile *job, struct tack_kernel_code *out)
{
    const struct tack_ocloc_api *api;
    char device[32];
    tack_status st = prepare(job, &api, device);
    if (st != TACK_OK)
        return st;
    const char *argv[] = {"ocloc", "compile", "-file", "kernel.cl", "-spv_only", "-device", device,
                          "-options", OCLOC_OPTIONS};
    const uint8_t *data[1] = {(const uint8_t *)job->source};
    const uint64_t len[1] = {strlen(job->source) + 1};
    const char *names[1] = {"kernel.cl"};
    uint32_t nout = 0;
    uint8_t **outputs = NULL;
    uint64_t *out_len = NULL;
    char **out_names = NULL;
    int rc = api->oclocInvoke((unsigned)(sizeof argv / sizeof *argv), argv, 1, data, len, names, 0, NULL, NULL, NULL,
                              &nout, &outputs, &out_len, &out_names);
    const unsigned char *bin = NULL;
    size_t bin_size = 0;
    const char *log = NULL;
    size_t log_size = 0;
    for (uint32_t i = 0; outputs && out_names && i < nout; i++) {
        if (!out_names[i])
            continue;
        if (ends_with(out_names[i], ".spv")) {
            bin = outputs[i];
            bin_size = (size_t)out_len[i];
        } else if (ends_with(out_names[i], ".log")) {
            log = (const char *)outputs[i];
            log_size = (size_t)out_len[i];
        }
    }
    /* The log need not be NUL-terminated. */
    while (log_size && log && log[log_size - 1] == 0)
        log_size--;
    unsigned char *spirv = NULL;
    if (rc != 0 || !bin || !bin_size) {
        /* The log is ocloc's, freed below: the kernel layer gets a copy. */
        out->failed = 1;
        if (log_size && (out->log = malloc(log_size))) {
            memcpy(out->log, log, log_size);
            out->log_size = log_size;
        }
        st = tack_error_set(TACK_ECOMPILE,
                            "kernel '%s' failed to compile for level_zero (libocloc '%s', ocloc returned %d):\n",
                            job->name, tack_library_path(&api->library), rc);
    } else if (!(spirv = malloc(bin_size))) {
        st = tack_error_set(TACK_ENOMEM, "out of memory holding %zu bytes of SPIR-V", bin_size);
    } else {
        memcpy(spirv, bin, bin_size);
        out->kind = TACK_CODE_SPIRV;
        out->data = spirv;
        out->size = bin_size;
    }
    if (outputs || out_names || out_len)
        api->oclocFreeOutput(&nout, &outputs, &out_len, &out_names);
    return st;
}

/* ---- kernels: modules and launches ---------------------------------------- */

/* A loaded kernel. The module and kernel objects are never destroyed (Tack
 * destroys no Level Zero object); kernel_unload frees only this record. */
struct ze_loaded_kernel {
    tack_ze_kernel kernel;
    uint32_t group; /* work-items per group, x only */
    int nargs;
    size_t arg_sizes[TACK_KERNEL_MAX_PARAMS];
};

/* The build log of a failed zeModuleCreate, malloc'd, or NULL. */
static char *build_log(const struct tack_ze_api *ze, tack_ze_module_build_log log)
{
    size_t n = 0;
    if (!log || ze->zeModuleBuildLogGetString(log, &n, NULL) != TACK_ZE_SUCCESS || n == 0)
        return NULL;
    char *text = malloc(n + 1);
    if (text && ze->zeModuleBuildLogGetString(log, &n, text) != TACK_ZE_SUCCESS) {
        free(text);
        return NULL;
    }
    if (text)
        text[n] = 0;
    return text;
}

static tack_status ze_kernel_load(tack_device *device, struct tack_kernel_code *code, void **out)
{
    struct ze_device_state *s = STATE(device);
    const struct tack_ze_api *ze = s->ze;
    if (code->kind != TACK_CODE_SPIRV)
        return tack_error_set(TACK_ERUNTIME, "%s runs OpenCL C kernels compiled to SPIR-V; it was given %s code",
                              device->name, tack_code_kind_name(code->kind));
    if (code->nargs < 0 || code->nargs > TACK_KERNEL_MAX_PARAMS)
        return tack_error_set(TACK_EVALUE, "a kernel has at most %d parameters, not %d", TACK_KERNEL_MAX_PARAMS,
                              code->nargs);
    struct ze_loaded_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return tack_error_set(TACK_ENOMEM, "out of memory loading a kernel");
    tack_ze_module_desc desc = {TACK_ZE_STRUCTURE_TYPE_MODULE_DESC, NULL, TACK_ZE_MODULE_FORMAT_IL_SPIRV, code->size,
                                code->data, "", NULL};
    tack_ze_module module = NULL;
    tack_ze_module_build_log log = NULL;
    tack_ze_result r = ze->zeModuleCreate(s->context, s->device, &desc, &module, &log);
    if (r != TACK_ZE_SUCCESS) {
        /* The log object is left to the driver with everything else Tack
         * made; its text goes to the kernel layer. */
        char *text = build_log(ze, log);
        code->failed = 1;
        code->log = text;
        code->log_size = text ? strlen(text) : 0;
        free(k);
        return tack_error_set(r == TACK_ZE_ERROR_OUT_OF_HOST_MEMORY || r == TACK_ZE_ERROR_OUT_OF_DEVICE_MEMORY
                                  ? TACK_ENOMEM
                                  : TACK_ECOMPILE,
                              "kernel '%s': Level Zero zeModuleCreate failed on %s: %s (0x%" PRIx32 ")%s",
                              code->name, device->name, tack_ze_result_name(r), r, text ? ":\n" : "");
    }
    tack_ze_kernel_desc kdesc = {TACK_ZE_STRUCTURE_TYPE_KERNEL_DESC, NULL, 0, code->entry};
    r = ze->zeKernelCreate(module, &kdesc, &k->kernel);
    if (r != TACK_ZE_SUCCESS) {
        free(k);
        return ze_fail("zeKernelCreate", r);
    }
    /* The driver's choice of group size for a large launch; the entry's
     * grid-stride loop makes any group count cover [0, n). */
    uint32_t want = s->compute.maxTotalGroupSize ? s->compute.maxTotalGroupSize : 256, x = 0, y = 0, z = 0;
    if (want > 256)
        want = 256;
    r = ze->zeKernelSuggestGroupSize(k->kernel, want, 1, 1, &x, &y, &z);
    if (r != TACK_ZE_SUCCESS || x == 0)
        x = 1;
    r = ze->zeKernelSetGroupSize(k->kernel, x, 1, 1);
    if (r != TACK_ZE_SUCCESS) {
        free(k);
        return ze_fail("zeKernelSetGroupSize", r);
    }
    k->group = x;
    k->nargs = code->nargs;
    for (int i = 0; i < code->nargs; i++)
        k->arg_sizes[i] = code->arg_sizes[i];
    *out = k;
    return TACK_OK;
}

static tack_status ze_kernel_launch(tack_device *device, void *kernel, const struct tack_launch *l)
{
    struct ze_device_state *s = STATE(device);
    const struct tack_ze_api *ze = s->ze;
    struct ze_loaded_kernel *k = kernel;
    uint64_t cap = s->compute.maxGroupCountX ? s->compute.maxGroupCountX : 65535;
    if (cap > 65536)
        cap = 65536; /* enough to fill any GPU; the loops do the rest */
    /* Groups of k->group work-items along the last index (the group size
     * is set once, at load), one work-item deep in the others. */
    uint32_t grid[3];
    for (int g = 0; g < 3; g++) {
        uint64_t extent = g < l->ndim ? (uint64_t)l->shape[l->ndim - 1 - g] : 1;
        uint64_t groups = g == 0 ? (extent + k->group - 1) / k->group : extent;
        uint64_t most = g == 0 ? cap : 65535;
        grid[g] = (uint32_t)(groups > most ? most : groups ? groups : 1);
    }
    tack_ze_group_count count = {grid[0], grid[1], grid[2]};
    void *values[TACK_KERNEL_MAX_DIMS + TACK_KERNEL_MAX_PARAMS];
    int nvalues = tack_launch_params(l, k->nargs, values);
    /* Arguments live on the kernel object until the append copies them, so
     * setting them and appending is one step for other threads. */
    pthread_mutex_lock(&s->lock);
    struct launch_slot *slot = &s->slots[s->next_slot];
    tack_ze_result r = TACK_ZE_SUCCESS;
    const char *call = "zeFenceHostSynchronize";
    if (slot->state == SLOT_SUBMITTED) {
        /* The queue may still be running this list: wait for it, as the
         * driver forbids resetting a list or fence it still uses. */
        r = ze->zeFenceHostSynchronize(slot->fence, UINT64_MAX);
        if (r == TACK_ZE_SUCCESS) {
            call = "zeFenceReset";
            r = ze->zeFenceReset(slot->fence);
        }
        if (r == TACK_ZE_SUCCESS)
            slot->state = SLOT_RECORDED;
    }
    if (r == TACK_ZE_SUCCESS && slot->state == SLOT_RECORDED) {
        call = "zeCommandListReset";
        r = ze->zeCommandListReset(slot->list);
        if (r == TACK_ZE_SUCCESS)
            slot->state = SLOT_EMPTY;
    }
    /* The extents, then the kernel's parameters. */
    const int nextents = nvalues - k->nargs;
    if (r == TACK_ZE_SUCCESS)
        call = "zeKernelSetArgumentValue";
    for (int i = 0; r == TACK_ZE_SUCCESS && i < nvalues; i++)
        r = ze->zeKernelSetArgumentValue(k->kernel, (uint32_t)i,
                                         i < nextents ? sizeof(int64_t) : k->arg_sizes[i - nextents], values[i]);
    if (r == TACK_ZE_SUCCESS) {
        /* From here the list holds something: a failure leaves it to be
         * reset by the next launch, which takes this same slot. */
        slot->state = SLOT_RECORDED;
        call = "zeCommandListAppendLaunchKernel";
        r = ze->zeCommandListAppendLaunchKernel(slot->list, k->kernel, &count, NULL, 0, NULL);
    }
    if (r == TACK_ZE_SUCCESS) {
        call = "zeCommandListClose";
        r = ze->zeCommandListClose(slot->list);
    }
    if (r == TACK_ZE_SUCCESS) {
        call = "zeCommandQueueExecuteCommandLists";
        r = ze->zeCommandQueueExecuteCommandLists(s->queue, 1, &slot->list, slot->fence);
    }
    if (r == TACK_ZE_SUCCESS) {
        /* Queued, not waited for: the core waits before the host reads. */
        slot->state = SLOT_SUBMITTED;
        s->next_slot = (s->next_slot + 1) % LAUNCH_SLOTS;
    }
    pthread_mutex_unlock(&s->lock);
    return r == TACK_ZE_SUCCESS ? TACK_OK : ze_fail(call, r);
}

static void ze_kernel_unload(tack_device *device, void *kernel)
{
    (void)device;
    free(kernel);
}

static const char *const ze_options[] = {"external_context", NULL};
static const DLDeviceType ze_wraps[] = {kDLOneAPI, 0};

/* ---- describe --------------------------------------------------------------- */

/* The first driver's devices, which level_zero:<n> names; a note on why
 * there are none. */
static void ze_describe_devices(const struct tack_ze_api *ze, tack_backend_report *out)
{
    tack_ze_result r = ze->zeInit(TACK_ZE_INIT_FLAG_GPU_ONLY);
    uint32_t count = 1;
    tack_ze_driver driver = NULL;
    if (r == TACK_ZE_SUCCESS)
        r = ze->zeDriverGet(&count, &driver);
    if (r != TACK_ZE_SUCCESS || count == 0 || !driver) {
        snprintf(out->driver.note, sizeof out->driver.note, "no GPU driver behind the loader (%s)",
                 r != TACK_ZE_SUCCESS ? tack_ze_result_name(r) : "zeDriverGet found none");
        return;
    }
    tack_ze_driver_properties props;
    memset(&props, 0, sizeof props);
    props.stype = TACK_ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES;
    if (ze->zeDriverGetProperties(driver, &props) == TACK_ZE_SUCCESS)
        snprintf(out->driver.version, sizeof out->driver.version, "driverVersion %" PRIu32, props.driverVersion);
    count = 0;
    if (ze->zeDeviceGet(driver, &count, NULL) != TACK_ZE_SUCCESS || count > 4096)
        return;
    tack_ze_device *all = calloc(count ? count : 1, sizeof *all);
    if (!all || ze->zeDeviceGet(driver, &count, all) != TACK_ZE_SUCCESS) {
        free(all);
        return;
    }
    out->device_count = (int)count;
    for (uint32_t i = 0; i < count && i < TACK_REPORT_DEVICES; i++) {
        tack_ze_device_properties dp;
        memset(&dp, 0, sizeof dp);
        dp.stype = TACK_ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
        if (ze->zeDeviceGetProperties(all[i], &dp) == TACK_ZE_SUCCESS) {
            dp.name[sizeof dp.name - 1] = 0;
            snprintf(out->devices[i], sizeof out->devices[i], "%.96s, device id 0x%04" PRIx32, dp.name,
                     dp.deviceId);
        } else {
            snprintf(out->devices[i], sizeof out->devices[i], "(no properties)");
        }
    }
    free(all);
}

static void ze_describe(tack_backend_report *out)
{
    const struct tack_ze_api *ze;
    tack_status st = tack_ze_load(&ze);
    tack_report_component(&out->driver, "driver", st, st == TACK_OK ? tack_library_path(&ze->library) : NULL, "");
    if (st == TACK_OK)
        ze_describe_devices(ze, out);
    const struct tack_ocloc_api *ocloc;
    char version[sizeof out->compiler.version] = "";
    st = tack_ocloc_load(&ocloc);
    if (st == TACK_OK)
        loaded_ocloc_version(ocloc, version, sizeof version);
    tack_report_component(&out->compiler, "ocloc", st, st == TACK_OK ? tack_library_path(&ocloc->library) : NULL,
                          version);
}

const struct tack_backend_ops tack_level_zero_backend = {
    .name = "level_zero",
    .dl_type = kDLOneAPI,
    .wraps = ze_wraps,
    .options = ze_options,
    .describe = ze_describe,
    .open = ze_open,
    .close = ze_close,
    .alloc = ze_alloc,
    .free = ze_free,
    .memory_space = ze_memory_space,
    .check_pointer = ze_check_pointer,
    .copy_to_host = ze_copy_to_host,
    .copy_from_host = ze_copy_from_host,
    .synchronize = ze_synchronize,
    .context_handle = ze_context_handle,
    .dialect = &ze_dialect,
    .kernel_key = ze_kernel_key,
    .kernel_compile = ze_kernel_compile,
    .kernel_load = ze_kernel_load,
    .kernel_launch = ze_kernel_launch,
    .kernel_unload = ze_kernel_unload,
};
