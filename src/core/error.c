#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static _Thread_local char last_message[1024];

const char *tack_last_error(void) { return last_message; }

tack_status tack_error_set(tack_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    return status;
}

const char *tack_status_name(tack_status status)
{
    switch (status) {
    case TACK_OK: return "TACK_OK";
    case TACK_EVALUE: return "TACK_EVALUE";
    case TACK_ETYPE: return "TACK_ETYPE";
    case TACK_ERUNTIME: return "TACK_ERUNTIME";
    case TACK_EBUFFER: return "TACK_EBUFFER";
    case TACK_ENOMEM: return "TACK_ENOMEM";
    case TACK_ENODEVICE: return "TACK_ENODEVICE";
    case TACK_ECOMPILE: return "TACK_ECOMPILE";
    case TACK_ETIMEOUT: return "TACK_ETIMEOUT";
    case TACK_EIO: return "TACK_EIO";
    }
    return "TACK_E?";
}

void tack_refcount_underflow(const char *what)
{
    /* A count below zero means an object was released once too often; going
     * on would free it twice. Stop where the mistake is visible. */
    fprintf(stderr, "tack: reference count of a %s went below zero (released twice)\n", what);
    abort();
}
