/*
 * What the files of the Level Zero backend share (src/backend/level_zero/):
 * the device record with its launch ring, and the functions one topic calls in another. Private to the backend.
 */
#ifndef TACK_BACKEND_LEVEL_ZERO_LEVEL_ZERO_H
#define TACK_BACKEND_LEVEL_ZERO_LEVEL_ZERO_H

#include <inttypes.h>
#include <pthread.h>

#include "../../core/internal.h"
#include "../../core/toolchain.h"
#include "../../driver/level_zero.h"
#include "../../driver/ocloc.h"
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

/* Sets TACK_ENOMEM for the driver's out-of-memory results, else
 * TACK_ERUNTIME, naming `call`; returns that status. */
tack_status ze_fail(const char *call, tack_ze_result r);

/* ---- contexts (context.c) ----------------------------------------------- */

/* TACK_EVALUE, handles[] partly written, unless every handle is given once
 * and non-null. */
tack_status ze_parse_external_context(const tack_option *options, size_t n, uint64_t handles[3]);
/* The memory domain of (context, device): the first one given for the
 * pair, `fresh` for a new pair. */
uint64_t ze_domain_for(tack_ze_context context, tack_ze_device device, uint64_t fresh);
/* Tack's own context on `driver`, made on first use; ze_fail's status when
 * zeContextCreate fails, nothing made. */
tack_status ze_own_context_get(const struct tack_ze_api *ze, tack_ze_driver driver, tack_ze_context *out);
uint64_t ze_context_handle(const tack_device *device);

/* ---- memory (memory.c) -------------------------------------------------- */

tack_status ze_alloc(tack_device *device, size_t nbytes, int exportable, void **data, void **ctx);
void ze_free(tack_device *device, void *data, void *ctx);
tack_status ze_check_pointer(tack_device *device, uint64_t address);
tack_status ze_memory_space(tack_device *device, uint64_t address, const char **out);
tack_status ze_copy_to_host(tack_device *device, void *dst, const void *src, size_t nbytes);
tack_status ze_copy_from_host(tack_device *device, void *dst, const void *src, size_t nbytes);
/* The memory table: no export or import. */
extern const struct tack_backend_memory tack_level_zero_memory;

/* ---- the queue and the launch ring (queue.c) ---------------------------- */

/* ze_fail's status for the first call that fails; what was made stays
 * (Tack destroys no Level Zero object). */
tack_status ze_create_queues(struct ze_device_state *s);
tack_status ze_synchronize(tack_device *device);
/* The queue table: no stream a consumer could name, so no stream slots. */
extern const struct tack_backend_queue tack_level_zero_queue;
/* The ring's next slot ready to record, under s->lock; on failure the
 * driver's result, *call naming the failing call. */
tack_ze_result ze_slot_take(struct ze_device_state *s, struct launch_slot **out, const char **call);

/* ---- kernels: the dialect (dialect.c), ocloc (toolchain.c), modules
 * (module.c) --------------------------------------------------------------- */

extern const struct tack_dialect ze_dialect;
/* libocloc's version, asked once per library; "" when it does not say. */
void ze_loaded_ocloc_version(const struct tack_ocloc_api *api, char *out, size_t cap);
tack_status ze_kernel_key(struct tack_compile *job);
tack_status ze_kernel_compile(const struct tack_compile *job, struct tack_kernel_code *out);
tack_status ze_kernel_load(tack_device *device, struct tack_kernel_code *code, void **out);
tack_status ze_kernel_launch(tack_device *device, void *kernel, const struct tack_launch *l);
void ze_kernel_unload(tack_device *device, void *kernel);
extern const struct tack_backend_toolchain tack_level_zero_toolchain;

/* ---- describe (describe.c) ---------------------------------------------- */

void ze_describe(tack_backend_report *out);

#endif
