/* libocloc: loaded per library name on demand, never unloaded, since
 * outputs it returned may still be in use on another thread. */
#include "ocloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "loaded.h"

static struct tack_loaded_set ocloc_loaded = TACK_LOADED_SET_INIT;

static tack_status ocloc_open(const char *name, void *api)
{
    struct tack_ocloc_api *a = api;
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
    void *api;
    tack_status st = tack_loaded_get(&ocloc_loaded, &name, 1, sizeof **out, ocloc_open, "libocloc", &api);
    if (st == TACK_OK)
        *out = api;
    return st;
}
