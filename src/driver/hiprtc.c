/* hipRTC: loaded per library name on demand, never unloaded, since compiled
 * programs may be in flight on other threads. */
#include "hiprtc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

#define HIPRTC_HINT                                                                                             \
    "Install ROCm's hipRTC (ROCm 6: the hiprtc package with libhiprtc.so; ROCm 5, e.g. Debian/Ubuntu "          \
    "libamdhip64-5, carries it in libamdhip64.so), or set TACK_HIPRTC_LIBRARY to the library's path"

static pthread_mutex_t rtc_lock = PTHREAD_MUTEX_INITIALIZER;
/* Every library loaded so far, by name. */
struct rtc_entry {
    struct tack_hiprtc_api api;
    struct rtc_entry *next;
};
static struct rtc_entry *rtc_loaded;

static tack_status rtc_open(const char *name, struct tack_hiprtc_api *a)
{
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
    pthread_mutex_lock(&rtc_lock);
    tack_status st = TACK_ERUNTIME;
    for (size_t i = 0; i < ntry; i++) {
        for (struct rtc_entry *e = rtc_loaded; e; e = e->next) {
            if (!strcmp(e->api.name, try[i])) {
                *out = &e->api;
                pthread_mutex_unlock(&rtc_lock);
                return TACK_OK;
            }
        }
    }
    /* The first failure is the one reported: the variable's, or the
     * preferred library's name. */
    char first[768] = "";
    for (size_t i = 0; i < ntry; i++) {
        struct rtc_entry *e = calloc(1, sizeof *e);
        if (!e) {
            st = tack_error_set(TACK_ENOMEM, "out of memory loading hipRTC");
            break;
        }
        st = rtc_open(try[i], &e->api);
        if (st == TACK_OK) {
            e->next = rtc_loaded;
            rtc_loaded = e;
            *out = &e->api;
            break;
        }
        free(e);
        if (!first[0])
            snprintf(first, sizeof first, "%s", tack_last_error());
    }
    pthread_mutex_unlock(&rtc_lock);
    if (st == TACK_ERUNTIME)
        return tack_error_set(TACK_ERUNTIME, "%s", first);
    return st;
}
