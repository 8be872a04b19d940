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
 *
 * This file opens and closes a device and holds the backend's table; the
 * rest is in src/backend/level_zero/, a file per topic: context.c
 * (external_context, Tack's own context, memory domains), memory.c,
 * queue.c (the copy list, the launch queue and its ring), dialect.c (the
 * OpenCL C the kernel layer generates), toolchain.c (libocloc), module.c
 * (loading and launching), describe.c (tack_report).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "level_zero.h"

tack_status ze_fail(const char *call, tack_ze_result r)
{
    tack_status st = r == TACK_ZE_ERROR_OUT_OF_DEVICE_MEMORY || r == TACK_ZE_ERROR_OUT_OF_HOST_MEMORY
                         ? TACK_ENOMEM
                         : TACK_ERUNTIME;
    return tack_error_set(st, "Level Zero %s failed: %s (0x%" PRIx32 ")", call, tack_ze_result_name(r), r);
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

static tack_status ze_open(tack_device *device, const tack_option *options, size_t n_options)
{
    uint64_t handles[3] = {0, 0, 0};
    int adopt = n_options > 0;
    /* A malformed option is the caller's mistake whether or not a driver is
     * installed, so it is reported first. */
    if (adopt) {
        tack_status st = ze_parse_external_context(options, n_options, handles);
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
        st = ze_own_context_get(ze, s->driver, &s->context);
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
    st = ze_create_queues(s);
    if (st != TACK_OK) {
        pthread_mutex_destroy(&s->lock);
        goto fail;
    }
    device->impl = s;
    device->external_context = adopt;
    device->domain = ze_domain_for(s->context, s->device, device->domain);
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

static const char *const ze_options[] = {"external_context", NULL};
static const DLDeviceType ze_wraps[] = {kDLOneAPI, 0};

const struct tack_backend_ops tack_level_zero_backend = {
    .name = "level_zero",
    .dl_type = kDLOneAPI,
    .wraps = ze_wraps,
    .options = ze_options,
    .describe = ze_describe,
    .open = ze_open,
    .close = ze_close,
    .memory = &tack_level_zero_memory,
    .queue = &tack_level_zero_queue,
    .toolchain = &tack_level_zero_toolchain,
};
