#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The message lives on the heap, so the per-thread state is one pointer: a
 * library loaded late (dlopen, a plugin, a second copy beside the Python
 * extension) then needs almost no thread-local storage, and a message is as
 * long as its text. The key frees it when the thread exits. */
static _Thread_local char *last_message;

/* The public call under way on this thread (TACK_PUBLIC_CALL), or NULL. A
 * pointer to the function's __func__, which lives as long as the library. */
static _Thread_local const char *current_call;
static pthread_key_t message_key;
static pthread_once_t message_key_once = PTHREAD_ONCE_INIT;
static int message_key_made;

/* Shown when not even a short message could be allocated. */
static const char lost_message[] = "out of memory while recording the error message";

/* Stored in last_message when the allocation failed; never freed. */
static char *const lost = (char *)lost_message;

static void free_message(void *p)
{
    if (p != lost)
        free(p);
    /* A later destructor of this thread may fail a Tack call again; it
     * then allocates afresh and registers with the key once more. */
    last_message = NULL;
}

static void make_message_key(void)
{
    message_key_made = pthread_key_create(&message_key, free_message) == 0;
}

const char *tack_last_error(void) { return last_message ? last_message : ""; }

void tack_error_clear(void)
{
    if (!last_message)
        return;
    if (last_message != lost)
        free(last_message);
    last_message = NULL;
    if (message_key_made)
        (void)pthread_setspecific(message_key, NULL);
}

/* A call the caller made begins with no message: one it leaves was set by
 * it, and one that succeeds leaves "" (a message an earlier call left
 * would read as this one's). */
const char *tack_call_enter(const char *name)
{
    const char *outer = current_call;
    if (!outer) {
        current_call = name;
        tack_error_clear();
    }
    return outer;
}

void tack_call_leave(const char *const *outer) { current_call = *outer; }

/* The length of "name: " when the message is to begin with it: not when no
 * public call is under way, nor when the text already names it. */
static size_t call_prefix(const char *name, const char *fmt)
{
    if (!name)
        return 0;
    size_t n = strlen(name);
    if (!strncmp(fmt, name, n) && fmt[n] == ':')
        return 0;
    return n + 2;
}

/* The length of the longest prefix of s[0, n) that does not end inside a
 * UTF-8 sequence, so that a shortened message still decodes. */
static size_t utf8_prefix(const char *s, size_t n)
{
    size_t start = n;
    while (start > 0 && ((unsigned char)s[start - 1] & 0xC0) == 0x80 && n - start < 3)
        start--;
    if (start == 0)
        return n;
    unsigned char lead = (unsigned char)s[start - 1];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return n - (start - 1) >= need ? n : start - 1;
}

tack_status tack_error_set(tack_status status, const char *fmt, ...)
{
    /* The arguments may include tack_last_error() itself (a message that
     * wraps the one before), so the new text is formatted into a new block
     * and the old one freed only afterwards. */
    va_list ap, again;
    /* A NULL format is a caller's slip; it must not cost a crash while an
     * error is being reported. */
    if (!fmt)
        fmt = "";
    va_start(ap, fmt);
    va_copy(again, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    size_t head = call_prefix(current_call, fmt);
    size_t size = head + (len < 0 ? 1 : (size_t)len + 1);
    char *text = malloc(size);
    if (!text && size > 256) {
        /* Short of memory: the message's beginning is better than none. */
        size = 256;
        text = malloc(size);
    }
    if (text) {
        if (head) {
            /* Even the shortened block holds the name: the longest public
             * name is far below 256 bytes. */
            memcpy(text, current_call, head - 2);
            memcpy(text + head - 2, ": ", 2);
        }
        int written = vsnprintf(text + head, size - head, fmt, again);
        if (written < 0)
            text[head] = '\0';
        else if ((size_t)written >= size - head)
            text[head + utf8_prefix(text + head, size - head - 1)] = '\0';
    }
    va_end(again);
    char *old = last_message;
    last_message = text ? text : lost;
    if (old != lost)
        free(old);
    pthread_once(&message_key_once, make_message_key);
    if (message_key_made)
        (void)pthread_setspecific(message_key, text);
    return status;
}

tack_status tack_error_report(tack_status status, const char *message)
{
    /* As data, never a format: the text is the caller's. */
    return tack_error_set(status, "%s", message ? message : "");
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
    case TACK_EINDEX: return "TACK_EINDEX";
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
