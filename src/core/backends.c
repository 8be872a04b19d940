/* The backends Tack knows, in the order DLPack imports consult them: each
 * is a table in src/backend/<name>/<name>.c, tack_<name>_backend. The list
 * itself is src/backend/meson.build's, given as TACK_BACKENDS(X), which
 * applies X to each name in that order. */
#include "internal.h"

#ifndef TACK_BACKENDS
#error "TACK_BACKENDS(X) comes from the build (src/backend/meson.build)"
#endif

#define TACK_BACKEND_DECLARE(name) extern const struct tack_backend_ops tack_##name##_backend;
TACK_BACKENDS(TACK_BACKEND_DECLARE)
#undef TACK_BACKEND_DECLARE

const struct tack_backend_ops *const tack_backends[] = {
#define TACK_BACKEND_ENTRY(name) &tack_##name##_backend,
    TACK_BACKENDS(TACK_BACKEND_ENTRY)
#undef TACK_BACKEND_ENTRY
    NULL,
};

const char *const *tack_backend_names(void)
{
    static const char *const names[] = {
#define TACK_BACKEND_NAME(name) #name,
        TACK_BACKENDS(TACK_BACKEND_NAME)
#undef TACK_BACKEND_NAME
            NULL,
    };
    return names;
}
