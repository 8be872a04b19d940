/*
 * The Level Zero backend's memory: zero-filled USM device allocations,
 * frees (deferred by the driver where it can), what an address is, and
 * copies on the synchronous list. See src/backend/level_zero/level_zero.c.
 */
#include <string.h>

#include "level_zero.h"

tack_status ze_alloc(tack_device *device, size_t nbytes, int exportable, void **data, void **ctx)
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

void ze_free(tack_device *device, void *data, void *ctx)
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

tack_status ze_check_pointer(tack_device *device, uint64_t address)
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
tack_status ze_memory_space(tack_device *device, uint64_t address, const char **out)
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

tack_status ze_copy_to_host(tack_device *device, void *dst, const void *src, size_t nbytes)
{
    return ze_copy(device, dst, src, nbytes, "to the host");
}

tack_status ze_copy_from_host(tack_device *device, void *dst, const void *src, size_t nbytes)
{
    return ze_copy(device, dst, src, nbytes, "from the host");
}

const struct tack_backend_memory tack_level_zero_memory = {
    .alloc = ze_alloc,
    .free = ze_free,
    .check_pointer = ze_check_pointer,
    .copy_to_host = ze_copy_to_host,
    .copy_from_host = ze_copy_from_host,
    .memory_space = ze_memory_space,
};
