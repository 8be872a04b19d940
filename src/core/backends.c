/* The backends Tack knows, in the order DLPack imports consult them. */
#include "internal.h"

extern const struct tack_backend_ops tack_cpu_backend;
extern const struct tack_backend_ops tack_cuda_backend;
extern const struct tack_backend_ops tack_hip_backend;
extern const struct tack_backend_ops tack_level_zero_backend;

const struct tack_backend_ops *const tack_backends[] = {
    &tack_cpu_backend,
    &tack_cuda_backend,
    &tack_hip_backend,
    &tack_level_zero_backend,
    NULL,
};
