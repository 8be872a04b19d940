/* The backends Tack knows, in the order DLPack imports consult them. */
#include "internal.h"

extern const struct tack_backend_ops tack_cpu_backend;

const struct tack_backend_ops *const tack_backends[] = {
    &tack_cpu_backend,
    NULL,
};
