/* Calls on objects already released, caught where the check costs nothing:
 * a released record keeps TACK_REFS_FREED in its count while it sits in
 * the quarantine (tack_handle_free), so a stale pointer finds it there. */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

void tack_misuse_released(const char *call, const char *what, const void *object)
{
    fprintf(stderr,
            "tack: %s: the %s at %p was already released (its reference count is spent): a release after the "
            "last one, or a use after it; retain the %s (tack_%s_retain) for each extra owner\n",
            call, what, object, what, what);
#ifndef NDEBUG
    /* Going on would free the object twice or write freed memory: stop
     * where the mistake is visible. */
    abort();
#endif
}

tack_status tack_misuse_refuse(const char *call, const char *what, const void *object)
{
    tack_misuse_released(call, what, object);
    return tack_error_set(TACK_EVALUE, "the %s at %p was already released; retain it (tack_%s_retain) for each "
                          "extra owner",
                          what, object, what);
}
