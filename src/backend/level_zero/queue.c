/*
 * The Level Zero backend's queue: the synchronous copy list, the
 * asynchronous launch queue and its ring of command lists with fences, and
 * waiting for it. See src/backend/level_zero/level_zero.c.
 */
#include "level_zero.h"

/* The copy list, the launch queue and the launch ring, all in the device's
 * context (Tack's own or the adopted one) on the group that computes. */
tack_status ze_create_queues(struct ze_device_state *s)
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

tack_status ze_synchronize(tack_device *device)
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

/* The ring's next slot, made ready to record: a submitted one waited for
 * and its fence reset, a recorded one's list reset. Called with s->lock
 * held. On failure returns the driver's result with *call naming the call
 * that failed; the slot keeps the state it reached, so the next launch,
 * which takes the same slot, resumes from there. */
tack_ze_result ze_slot_take(struct ze_device_state *s, struct launch_slot **out, const char **call)
{
    const struct tack_ze_api *ze = s->ze;
    struct launch_slot *slot = &s->slots[s->next_slot];
    tack_ze_result r = TACK_ZE_SUCCESS;
    *out = slot;
    *call = "zeFenceHostSynchronize";
    if (slot->state == SLOT_SUBMITTED) {
        /* The queue may still be running this list: wait for it, as the
         * driver forbids resetting a list or fence it still uses. */
        r = ze->zeFenceHostSynchronize(slot->fence, UINT64_MAX);
        if (r == TACK_ZE_SUCCESS) {
            *call = "zeFenceReset";
            r = ze->zeFenceReset(slot->fence);
        }
        if (r == TACK_ZE_SUCCESS)
            slot->state = SLOT_RECORDED;
    }
    if (r == TACK_ZE_SUCCESS && slot->state == SLOT_RECORDED) {
        *call = "zeCommandListReset";
        r = ze->zeCommandListReset(slot->list);
        if (r == TACK_ZE_SUCCESS)
            slot->state = SLOT_EMPTY;
    }
    return r;
}

const struct tack_backend_queue tack_level_zero_queue = {
    .synchronize = ze_synchronize,
    .context_handle = ze_context_handle,
};
