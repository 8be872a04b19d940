/* Compiler libraries (hipRTC, libocloc) loaded once per name and never
 * unloaded (loaded.c). */
#ifndef TACK_DRIVER_LOADED_H
#define TACK_DRIVER_LOADED_H

#include <pthread.h>
#include <stddef.h>

#include "tack/status.h"

struct tack_loaded;

/* The libraries of one kind loaded so far, by name. */
struct tack_loaded_set {
    pthread_mutex_t lock;
    struct tack_loaded *first;
};
#define TACK_LOADED_SET_INIT {PTHREAD_MUTEX_INITIALIZER, NULL}

/* The API table (`api_size` bytes) of the first of `names` (n of them,
 * in order of preference) that is loaded already, or else that `open`
 * loads into a zeroed table; the table stays for the process. `what`
 * names the kind in an out-of-memory message. Where none opens, the
 * first one's failure is the message. */
tack_status tack_loaded_get(struct tack_loaded_set *set, const char *const *names, size_t n, size_t api_size,
                            tack_status (*open)(const char *name, void *api), const char *what, void **out);

#endif
