/* What both orders must be able to do: pass tensors of the one DLPack
 * declaration in force to Tack's API, and fill in an exchange table. */
#ifndef TACK_TEST_USES_H
#define TACK_TEST_USES_H

static int work_stream(DLDeviceType type, int32_t id, void **stream)
{
    (void)type;
    (void)id;
    *stream = NULL;
    return 0;
}

int tack_test_uses(tack_array *array, tack_device *cpu);
int tack_test_uses(tack_array *array, tack_device *cpu)
{
    DLManagedTensorVersioned *out = NULL;
    tack_array *back = NULL;
    if (tack_array_to_dlpack_versioned(array, &out) != TACK_OK)
        return 1;
    int read_only = (out->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    if (tack_array_from_dlpack_versioned(out, cpu, NULL, &back, NULL) != TACK_OK)
        return 1;
    tack_array_release(back);

    DLPackExchangeAPI api;
    api.header.version.major = DLPACK_MAJOR_VERSION;
    api.header.version.minor = DLPACK_MINOR_VERSION;
    api.header.prev_api = NULL;
    api.current_work_stream = work_stream;
    DLDevice dev = tack_device_dl_device(cpu);
    void *stream = NULL;
    return read_only || dev.device_type != kDLCPU ||
           api.current_work_stream(dev.device_type, dev.device_id, &stream) != 0;
}

#endif
