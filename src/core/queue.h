/* Launch queues: how launches are ordered against sharing. Not installed. */
#ifndef TACK_QUEUE_H
#define TACK_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "internal.h"

/* The part of tack_queue_launch that is not on every launch's path. */
tack_status tack_queue_record(tack_device *device, tack_buffer *const *buffers, size_t nbuffers);

/* Hands a launch to the device through its toolchain's kernel_launch. On a
 * backend with a queue table it also records the launch on every
 * buffer it uses, and waits for it when one of them is shared (another
 * library may touch that memory at any moment, with no Tack call in
 * between); a backend without one has completed the launch on return, so
 * there is nothing to record. `buffers` may repeat a buffer.
 * On error from the enqueue nothing is recorded; TACK_ERUNTIME from the
 * wait means the launch was queued but its completion is unknown.
 * Inline: it is most of the cost of a small launch on the host. */
static inline tack_status tack_queue_launch(tack_device *device, void *kernel, const struct tack_launch *launch,
                                            tack_buffer *const *buffers, size_t nbuffers)
{
    tack_status st = tack_backend_kernel_launch(device, kernel, launch);
    if (st != TACK_OK || !tack_backend_has_queue(device))
        return st;
    return tack_queue_record(device, buffers, nbuffers);
}

#endif
