/* hipRTC: loaded per library name on demand, never unloaded, since compiled
 * programs may be in flight on other threads. */
#include "hiprtc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "loaded.h"

#define HIPRTC_HINT                                                                                             \
    "Install ROCm's hipRTC (ROCm 6: the hiprtc package with libhiprtc.so; ROCm 5, e.g. Debian/Ubuntu "          \
    "libamdhip64-5, carries it in libamdhip64.so), or set TACK_HIPRTC_LIBRARY to the library's path"

static struct tack_loaded_set rtc_loaded = TACK_LOADED_SET_INIT;

static tack_status rtc_open(const char *name, void *api)
{
    struct tack_hiprtc_api *a = api;
    if (tack_library_open(name, &a->library) != 0)
        return tack_error_set(TACK_ERUNTIME, "cannot load hipRTC '%s' (%s). " HIPRTC_HINT, name,
                              tack_library_error(&a->library));
#define TACK_HIPRTC_RESOLVE(ret, field, symbol, required, params)                                              \
    if (tack_library_symbol(&a->library, #symbol, &a->field, sizeof a->field) != 0 && (required)) {            \
        tack_library_close(&a->library);                                                                       \
        return tack_error_set(TACK_ERUNTIME, "'%s' has no %s; it is not hipRTC. " HIPRTC_HINT, name, #symbol); \
    }
    TACK_HIPRTC_FUNCTIONS(TACK_HIPRTC_RESOLVE)
#undef TACK_HIPRTC_RESOLVE
    if (a->hiprtcVersion(&a->major, &a->minor) != TACK_HIPRTC_SUCCESS)
        a->major = a->minor = 0;
    snprintf(a->name, sizeof a->name, "%s", name);
    return TACK_OK;
}

tack_status tack_hiprtc_load(const struct tack_hiprtc_api **out)
{
    const char *env = getenv("TACK_HIPRTC_LIBRARY");
    static const char *const names[] = {"libhiprtc.so",    "libhiprtc.so.6",    "libhiprtc.so.5",
                                        "libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
    const char *const *try = names;
    size_t ntry = sizeof names / sizeof *names;
    if (env && *env) {
        try = &env;
        ntry = 1;
    }
    void *api;
    tack_status st = tack_loaded_get(&rtc_loaded, try, ntry, sizeof **out, rtc_open, "hipRTC", &api);
    if (st == TACK_OK)
        *out = api;
    return st;
}
