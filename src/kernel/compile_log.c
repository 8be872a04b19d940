/* The thread's compile log, and a failed compile's message made of it. */
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"

/* The thread's last compile log. A thread-local pointer alone would leak
 * the log of every thread that exits with one; the key's destructor frees
 * it at thread exit (free itself: it stays valid if this library is
 * unloaded first). */
static _Thread_local char *compile_log;
static pthread_key_t log_key;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_key_made;

static void make_log_key(void) { log_key_made = pthread_key_create(&log_key, free) == 0; }

const char *tack_kernel_compile_log(void) { return compile_log ? compile_log : ""; }

void tack_compile_log_set(const char *text, size_t len)
{
    pthread_once(&log_once, make_log_key);
    free(compile_log);
    compile_log = NULL;
    if (log_key_made)
        (void)pthread_setspecific(log_key, NULL);
    if (!text)
        return;
    compile_log = malloc(len + 1);
    if (compile_log) {
        memcpy(compile_log, text, len);
        compile_log[len] = 0;
        if (log_key_made)
            (void)pthread_setspecific(log_key, compile_log);
    }
}

tack_status tack_compile_failed(const char *log, size_t log_len, const char *fmt, ...)
{
    char head[768];
    va_list ap;
    va_start(ap, fmt);
    int hl = vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    if (hl < 0)
        hl = 0;
    if ((size_t)hl >= sizeof head)
        hl = (int)sizeof head - 1;
    if (!log)
        log_len = 0;
    size_t total = (size_t)hl + log_len;
    char *full = malloc(total + 1);
    if (!full) {
        tack_compile_log_set(NULL, 0);
        return tack_error_set(TACK_ECOMPILE, "%s%.*s", head, (int)(log_len > INT_MAX ? INT_MAX : log_len),
                              log_len ? log : "");
    }
    memcpy(full, head, (size_t)hl);
    if (log_len)
        memcpy(full + hl, log, log_len);
    full[total] = 0;
    tack_compile_log_set(full, total);
    tack_status st = tack_error_set(TACK_ECOMPILE, "%s", full);
    free(full);
    return st;
}
