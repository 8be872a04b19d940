/* Calls on objects already released, caught where the check costs nothing. */
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
