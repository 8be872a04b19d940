/*
 * The Level Zero backend's kernels on the device: SPIR-V made a module and
 * a kernel with its group size, launched through the ring, and forgotten.
 * See src/backend/level_zero/level_zero.c.
 */
#include <stdlib.h>
#include <string.h>

#include "level_zero.h"

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

tack_status ze_kernel_load(tack_device *device, struct tack_kernel_code *code, void **out)
{
    struct ze_device_state *s = STATE(device);
    const struct tack_ze_api *ze = s->ze;
    if (code->kind != TACK_CODE_SPIRV)
        return tack_error_set(TACK_ERUNTIME, "%s runs OpenCL C kernels compiled to SPIR-V; it was given %s code",
                              device->name, tack_code_kind_name(code->kind));
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

tack_status ze_kernel_launch(tack_device *device, void *kernel, const struct tack_launch *l)
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
    struct launch_slot *slot;
    const char *call;
    tack_ze_result r = ze_slot_take(s, &slot, &call);
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

void ze_kernel_unload(tack_device *device, void *kernel)
{
    (void)device;
    free(kernel);
}
