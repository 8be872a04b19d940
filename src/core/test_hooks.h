/* The failing allocator of test builds (meson -Dtest_hooks=true), as Lua's
 * test build has: a test tells it to fail the n-th allocation libtack makes
 * on the calling thread, and so runs every out-of-memory path. Not
 * installed; absent from release builds. */
#ifndef TACK_TEST_HOOKS_H
#define TACK_TEST_HOOKS_H

#include <stddef.h>

/* Makes the allocation `n` (0 is the next) made by libtack on the calling
 * thread fail, as malloc fails (NULL, errno ENOMEM), and that one alone;
 * n < 0 disarms. Resets the counts below. Other threads are untouched, so
 * a sweep over n is deterministic whatever the worker pool does. */
void tack_test_fail_allocation(long n);
/* Allocations the calling thread made since it was last armed. */
long tack_test_allocations(void);
/* 1 when the armed allocation was reached (and failed), else 0. */
int tack_test_allocation_failed(void);

void *tack_test_malloc(size_t size);
void *tack_test_calloc(size_t count, size_t size);
void *tack_test_realloc(void *p, size_t size);
char *tack_test_strdup(const char *s);

#endif
