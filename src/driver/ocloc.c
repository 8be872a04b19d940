/* libocloc: loaded per library name on demand, never unloaded, since
 * outputs it returned may still be in use on another thread. */
#include "ocloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

static pthread_mutex_t ocloc_lock = PTHREAD_MUTEX_INITIALIZER;
/* Every library loaded so far, by name. */
struct ocloc_entry {
    struct tack_ocloc_api api;
    struct ocloc_entry *next;
};
static struct ocloc_entry *ocloc_loaded;

static tack_status ocloc_open(const char *name, struct tack_ocloc_api *a)
{
    if (tack_library_open(name, &a->library) != 0)
        return tack_error_set(TACK_ERUNTIME,
                              "kernels on level_zero are compiled to SPIR-V with libocloc, which cannot be "
                              "loaded from '%s' (%s). " TACK_OCLOC_INSTALL_HINT,
                              name, tack_library_error(&a->library));
#define TACK_OCLOC_RESOLVE(ret, field, symbol, required, params)                                              \
    if (tack_library_symbol(&a->library, #symbol, &a->field, sizeof a->field) != 0 && (required)) {           \
        tack_library_close(&a->library);                                                                      \
        return tack_error_set(TACK_ERUNTIME, "'%s' has no %s; it is not libocloc. " TACK_OCLOC_INSTALL_HINT,  \
                              name, #symbol);                                                                 \
    }
    TACK_OCLOC_FUNCTIONS(TACK_OCLOC_RESOLVE)
#undef TACK_OCLOC_RESOLVE
    snprintf(a->name, sizeof a->name, "%s", name);
    return TACK_OK;
}

tack_status tack_ocloc_load(const struct tack_ocloc_api **out)
{
    const char *env = getenv("TACK_OCLOC_LIBRARY");
    const char *name = env && *env ? env : "libocloc.so";
    pthread_mutex_lock(&ocloc_lock);
    tack_status st = TACK_OK;
    struct ocloc_entry *e;
    for (e = ocloc_loaded; e; e = e->next)
        if (!strcmp(e->api.name, name))
            break;
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
            st = tack_error_set(TACK_ENOMEM, "out of memory loading libocloc");
        } else if ((st = ocloc_open(name, &e->api)) != TACK_OK) {
            free(e);
            e = NULL;
        } else {
            e->next = ocloc_loaded;
            ocloc_loaded = e;
        }
    }
    if (e)
        *out = &e->api;
    pthread_mutex_unlock(&ocloc_lock);
    return st;
}
