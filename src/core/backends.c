/* The backends Tack knows, in the order DLPack imports consult them: each
 * is a table in src/backend/<name>.c, tack_<name>_backend. */
#include "internal.h"

#define TACK_BACKENDS(X) X(cpu) X(cuda) X(hip) X(level_zero)

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
