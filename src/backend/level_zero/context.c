/*
 * The Level Zero backend's contexts: the external_context option that
 * adopts another library's, Tack's own (one per process), and the memory
 * domain of each (context, device) pair. See src/backend/level_zero/level_zero.c.
 */
#include <stdio.h>
#include <string.h>

#include "level_zero.h"

/* ---- external_context ------------------------------------------------ */

static const char *const handle_fields[3] = {"driver", "device", "context"};

/* Reads external_context's three handles. All three are required and must
 * be non-null: a driver or device Tack found on its own need not be the one
 * the context was made against, so Tack fills in nothing. */
tack_status ze_parse_external_context(const tack_option *options, size_t n, uint64_t handles[3])
{
    int seen[3] = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        const tack_option *o = &options[i];
        /* No field and no value: the option given with no handles at all
         * (None, an empty dict), reported below as all three missing. */
        if (!o->field && !o->value)
            continue;
        if (!o->field)
            return tack_error_set(TACK_EVALUE,
                                  "external_context must be a dict of integer handles: "
                                  "{'driver': ..., 'device': ..., 'context': ...}");
        int k = -1;
        for (int j = 0; j < 3; j++)
            if (!strcmp(o->field, handle_fields[j]))
                k = j;
        if (k < 0)
            return tack_error_set(TACK_EVALUE,
                                  "external_context has no field '%s'; it takes the 'driver', 'device' and "
                                  "'context' handles of the other library's Level Zero context",
                                  o->field);
        if (seen[k])
            return tack_error_set(TACK_EVALUE, "external_context gives '%s' twice", o->field);
        seen[k] = 1;
        handles[k] = o->value;
    }
    char missing[64] = "";
    size_t used = 0;
    for (int j = 0; j < 3; j++)
        if (!seen[j] || !handles[j])
            used += (size_t)snprintf(missing + used, sizeof missing - used, "%s'%s'", used ? ", " : "",
                                     handle_fields[j]);
    if (used)
        return tack_error_set(TACK_EVALUE,
                              "external_context needs all three handles, non-null; missing or null: %s. Pass "
                              "the driver, device and context of the other library's queue (Tack fills in none "
                              "of its own: a driver or device found separately need not be the context's)",
                              missing);
    return TACK_OK;
}

/* ---- process-wide bookkeeping ---------------------------------------- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

/* Tack's own context on the first driver: made once, shared by the plain
 * devices, never destroyed, so a failed open that is retried makes no
 * second one. */
static tack_ze_driver own_driver;
static tack_ze_context own_context;

/* One memory domain per (context, device): two Tack devices over the same
 * pair (external_context given twice) allocate the same kind of memory, a
 * device over another pair does not. */
#define DOMAINS_MAX 256
static struct {
    uint64_t context, device, domain;
} domains[DOMAINS_MAX];
static int domains_len;

uint64_t ze_domain_for(tack_ze_context context, tack_ze_device device, uint64_t fresh)
{
    uint64_t c = (uint64_t)(uintptr_t)context, v = (uint64_t)(uintptr_t)device, domain = fresh;
    pthread_mutex_lock(&registry_lock);
    int i;
    for (i = 0; i < domains_len; i++) {
        if (domains[i].context == c && domains[i].device == v) {
            domain = domains[i].domain;
            break;
        }
    }
    /* A full table only costs sharing: later devices keep unique domains. */
    if (i == domains_len && domains_len < DOMAINS_MAX) {
        domains[domains_len].context = c;
        domains[domains_len].device = v;
        domains[domains_len].domain = fresh;
        domains_len++;
    }
    pthread_mutex_unlock(&registry_lock);
    return domain;
}

tack_status ze_own_context_get(const struct tack_ze_api *ze, tack_ze_driver driver, tack_ze_context *out)
{
    tack_status st = TACK_OK;
    pthread_mutex_lock(&registry_lock);
    if (!own_context || own_driver != driver) {
        tack_ze_context_desc desc = {TACK_ZE_STRUCTURE_TYPE_CONTEXT_DESC, NULL, 0};
        tack_ze_context c = NULL;
        tack_ze_result r = ze->zeContextCreate(driver, &desc, &c);
        if (r != TACK_ZE_SUCCESS) {
            st = ze_fail("zeContextCreate", r);
            goto done;
        }
        own_driver = driver;
        own_context = c;
    }
    *out = own_context;
done:
    pthread_mutex_unlock(&registry_lock);
    return st;
}

uint64_t ze_context_handle(const tack_device *device)
{
    return (uint64_t)(uintptr_t)STATE(device)->context;
}
