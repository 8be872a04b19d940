/* What this machine offers each backend, for bug reports. Each backend
 * describes its own driver, devices and compiler (describe in its
 * table). */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "internal.h"
#include "toolchain.h"

void tack_report_component(tack_component_report *c, const char *name, tack_status loaded, const char *path,
                           const char *version)
{
    snprintf(c->name, sizeof c->name, "%s", name);
    c->found = loaded == TACK_OK;
    if (!c->found) {
        snprintf(c->note, sizeof c->note, "%s", tack_last_error());
        return;
    }
    snprintf(c->path, sizeof c->path, "%s", path ? path : "");
    snprintf(c->version, sizeof c->version, "%s", version ? version : "");
}

/* No TACK_PUBLIC_CALL: the notes quote the lookups' messages, which are
 * about the driver, not this call. */
tack_status tack_backend_describe(const char *backend, tack_backend_report *out)
{
    const struct tack_backend_ops *ops = backend ? tack_backend_find(backend, strlen(backend)) : NULL;
    if (!ops) {
        char known[256];
        tack_backend_list(known, sizeof known);
        return tack_error_set(TACK_EVALUE, "no backend is called '%s'; the backends are %s",
                              backend ? backend : "(null)", known);
    }
    tack_backend_report r;
    memset(&r, 0, sizeof r);
    snprintf(r.backend, sizeof r.backend, "%s", ops->name);
    snprintf(r.driver.name, sizeof r.driver.name, "driver");
    tack_backend_report_fill(ops, &r);

    /* A report is not a failure: what the lookups leave in the thread's
     * message is in the report, and the call leaves "". */
    tack_error_clear();
    *out = r;
    return TACK_OK;
}
