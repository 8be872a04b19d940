/* The failing allocator of test builds: see test_hooks.h. This file alone
 * in libtack calls the C library's allocator by name; internal.h sends
 * every other file's calls here. */
#include "test_hooks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Per thread: a worker's allocations would otherwise shift the count from
 * one run to the next. -1: disarmed. */
static _Thread_local long fail_at = -1;
static _Thread_local long made;
static _Thread_local int failed;

void tack_test_fail_allocation(long n)
{
    fail_at = n < 0 ? -1 : n;
    made = 0;
    failed = 0;
}

long tack_test_allocations(void)
{
    return made;
}

int tack_test_allocation_failed(void)
{
    return failed;
}

/* Counts one allocation; 1 when it is the one to fail. */
static int refuse(void)
{
    if (fail_at < 0)
        return 0;
    if (made++ != fail_at)
        return 0;
    failed = 1;
    errno = ENOMEM;
    return 1;
}

void *tack_test_malloc(size_t size)
{
    return refuse() ? NULL : malloc(size);
}

void *tack_test_calloc(size_t count, size_t size)
{
    return refuse() ? NULL : calloc(count, size);
}

void *tack_test_realloc(void *p, size_t size)
{
    return refuse() ? NULL : realloc(p, size);
}

char *tack_test_strdup(const char *s)
{
    return refuse() ? NULL : strdup(s);
}
