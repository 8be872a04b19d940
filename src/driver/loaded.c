/* Compiler libraries loaded once per name and kept for the process: code
 * they compiled, or output they returned, may be in use on another thread
 * when a later call asks again. */
#include "loaded.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

struct tack_loaded {
    struct tack_loaded *next;
    char *name;
    alignas(max_align_t) unsigned char api[];
};

tack_status tack_loaded_get(struct tack_loaded_set *set, const char *const *names, size_t n, size_t api_size,
                            tack_status (*open)(const char *name, void *api), const char *what, void **out)
{
    pthread_mutex_lock(&set->lock);
    for (size_t i = 0; i < n; i++) {
        for (struct tack_loaded *e = set->first; e; e = e->next) {
            if (!strcmp(e->name, names[i])) {
                *out = e->api;
                pthread_mutex_unlock(&set->lock);
                return TACK_OK;
            }
        }
    }
    /* The first failure is the one reported: the variable's, or the
     * preferred library's name. */
    char first[768] = "";
    tack_status st = TACK_ERUNTIME;
    for (size_t i = 0; i < n; i++) {
        struct tack_loaded *e = calloc(1, sizeof *e + api_size);
        if (e)
            e->name = strdup(names[i]);
        if (!e || !e->name) {
            free(e);
            st = tack_error_set(TACK_ENOMEM, "out of memory loading %s", what);
            break;
        }
        st = open(names[i], e->api);
        if (st == TACK_OK) {
            e->next = set->first;
            set->first = e;
            *out = e->api;
            break;
        }
        free(e->name);
        free(e);
        if (!first[0])
            snprintf(first, sizeof first, "%s", tack_last_error());
    }
    pthread_mutex_unlock(&set->lock);
    if (st == TACK_ERUNTIME && n > 1)
        return tack_error_set(TACK_ERUNTIME, "%s", first);
    return st;
}
