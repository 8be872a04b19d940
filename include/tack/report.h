/* What Tack finds on this machine at run time, for bug reports: each
 * backend's driver (where the dynamic loader found it, its version), its
 * devices, the compiler its kernels are built with, and the kernel cache.
 * `python -m tack` (tack.show_config()) prints it. */
#ifndef TACK_REPORT_H
#define TACK_REPORT_H

#include <stddef.h>

#include "tack/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Devices named in a backend's report, at most (device_count counts all). */
#define TACK_REPORT_DEVICES 8
/* Compiler libraries listed in a backend's report, at most. */
#define TACK_REPORT_COMPILERS 8

/* A library or program Tack uses at run time: a backend's driver, or the
 * compiler of its kernels. Strings are NUL-terminated, "" when unknown. */
typedef struct tack_component_report {
    char name[32];     /* what it is: "driver", "C compiler", "NVRTC", "hipRTC", "ocloc" */
    int found;         /* 1 when Tack could load it (a compiler: found and runnable) */
    char path[1024];   /* found: where, as the dynamic loader resolved it; a compiler's command */
    char version[128]; /* found: as it reports itself */
    char note[1024];   /* found: how it was chosen, where that matters; else why not, and what to do */
} tack_component_report;

typedef struct tack_backend_report {
    char backend[16];              /* "cuda" */
    tack_component_report driver;  /* the cpu backend needs none: found, with a note saying so */
    tack_component_report compiler; /* name "" for a backend that builds no kernels */
    int device_count;              /* devices the driver lists; 0 without a driver */
    char devices[TACK_REPORT_DEVICES][128]; /* the first ones' names, as the driver gives them */
    /* Every library of the compiler found, in the order Tack tries them,
     * where a backend looks for several and chooses among them by device
     * and driver (cuda: each NVRTC); `compiler` is the first. 0 and none
     * listed for the other backends. */
    int compiler_count;
    tack_component_report compilers[TACK_REPORT_COMPILERS];
    /* For each device named, what its kernels would be built as and by
     * which of those libraries ("CUBIN sm_90 from NVRTC 13.0 (<path>)",
     * "PTX compute_90 from ..."), or why none fits its driver; "" where a
     * backend does not choose. */
    char kernel_code[TACK_REPORT_DEVICES][1024];
} tack_backend_report;

/* The backends Tack was built with ("cpu", "cuda", ...), NULL-terminated.
 * Never fails. */
TACK_API const char *const *tack_backend_names(void);

/* Fills *out with what this machine offers `backend`: its driver, loaded
 * as opening a device would load it (once per process, so a later open
 * finds the same), its devices and the compiler of its kernels, each
 * asked for its version. Creates no context and allocates nothing on a
 * device; may run the C compiler (for its version). What is missing is
 * written down in *out, not reported as an error, and tack_last_error()
 * is left as it was. On error returns TACK_EVALUE for a name that is no
 * backend and leaves *out untouched. Thread-safe. */
TACK_API tack_status tack_backend_describe(const char *backend, tack_backend_report *out);

/* Writes the directory compiled kernels are kept in (TACK_CACHE_DIR, else
 * ~/.cache/tack) to out, creating it if it is missing. On error returns
 * TACK_ERUNTIME when it cannot be used (the message says why and what to
 * set), or TACK_EVALUE when it does not fit in `cap` bytes, and leaves
 * out untouched. Thread-safe. */
TACK_API tack_status tack_kernel_cache_dir(char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
