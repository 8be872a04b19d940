/* Launch queues and sharing. A device has one stream; launches on it run
 * in order, so a buffer needs only the sequence number of the last launch
 * that used it: waiting for the buffer is waiting until the device has
 * completed that many. */
#include "queue.h"

static void record(tack_buffer *b, uint64_t seq)
{
    uint64_t old = atomic_load_explicit(&b->last_launch, memory_order_relaxed);
    while (old < seq && !atomic_compare_exchange_weak(&b->last_launch, &old, seq)) {
    }
}

tack_status tack_queue_record(tack_device *d, tack_buffer *const *buffers, size_t nbuffers)
{
    /* Numbered after it is enqueued: a synchronize that reads `submitted`
     * as covering this launch is then sure to be issued after it. */
    uint64_t seq = atomic_fetch_add(&d->submitted, 1) + 1;
    int shared = 0;
    for (size_t i = 0; i < nbuffers; i++) {
        record(buffers[i], seq);
        shared |= atomic_load_explicit(&buffers[i]->shared, memory_order_relaxed);
    }
    if (shared)
        return tack_device_synchronize(d);
    return TACK_OK;
}
