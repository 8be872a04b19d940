/* A minimal test harness: each test file is one executable, run by meson,
 * and each case in it runs in a child process with a timeout (RUN). POSIX
 * only, as the tests are. */
#ifndef TACK_CHECK_H
#define TACK_CHECK_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tack/tack.h"

static int check_failures;
static int check_passed;
static int check_failed_tests;

/* The checks report a failure at `file`:`line` and quote `text`, the
 * expression as the caller wrote it (before macro expansion). */
#define CHECK_TEXT_AT(file, line, cond, text)                                                         \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", (file), (line), (text));                     \
            check_failures++;                                                                         \
        }                                                                                             \
    } while (0)

#define CHECK_OK_TEXT_AT(file, line, expr, text)                                                      \
    do {                                                                                              \
        tack_status check_st_ = (expr);                                                               \
        if (check_st_ != TACK_OK) {                                                                   \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", (file), (line), (text),                    \
                    tack_status_name(check_st_), tack_last_error());                                  \
            check_failures++;                                                                         \
        }                                                                                             \
    } while (0)

#define CHECK(cond) CHECK_TEXT_AT(__FILE__, __LINE__, cond, #cond)
#define CHECK_OK(expr) CHECK_OK_TEXT_AT(__FILE__, __LINE__, expr, #expr)

/* For a helper that checks on behalf of a case: it takes its caller's
 * __FILE__ and __LINE__ and passes them here, so a failure names the
 * case's line rather than the helper's. */
#define CHECK_AT(file, line, cond) CHECK_TEXT_AT(file, line, cond, #cond)
#define CHECK_OK_AT(file, line, expr) CHECK_OK_TEXT_AT(file, line, expr, #expr)

#define CHECK_STATUS_TEXT_AT(file, line, expr, want, text)                                            \
    do {                                                                                              \
        tack_status check_st_ = (expr);                                                               \
        if (check_st_ != (want)) {                                                                    \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", (file), (line), (text),      \
                    tack_status_name(check_st_), tack_status_name(want), tack_last_error());          \
            check_failures++;                                                                         \
        }                                                                                             \
    } while (0)

#define CHECK_STATUS(expr, want) CHECK_STATUS_TEXT_AT(__FILE__, __LINE__, expr, want, #expr)
#define CHECK_STATUS_AT(file, line, expr, want) CHECK_STATUS_TEXT_AT(file, line, expr, want, #expr)

/* ---- running cases ------------------------------------------------------
 *
 * Every case runs in a child process of its own with a time limit, as
 * libuv's test runner does: a crash, an exit or a hang fails that case, by
 * name, and the file goes on with the next one. A child starts from the
 * parent's state, so what main sets up before the cases is every case's. */

/* Optional: runs in each case's child after the case (a file's check that
 * the case left nothing behind); its failures are the case's. */
static void (*check_after_each)(void);

/* The live arrays, buffers and DLPack exports, for leak checks. */
static inline void check_live_counts(long counts[3])
{
    counts[0] = tack_array_live_count();
    counts[1] = tack_buffer_live_count();
    counts[2] = tack_dlpack_live_exports();
}

/* The counts when main began: a child starts with them, and every case
 * must end with them too. */
static long check_live_at_start[3];

static inline void check_nothing_left(void)
{
    long now[3];
    check_live_counts(now);
    CHECK(now[0] == check_live_at_start[0]); /* arrays */
    CHECK(now[1] == check_live_at_start[1]); /* buffers */
    CHECK(now[2] == check_live_at_start[2]); /* DLPack exports */
}

/* For main, before the cases of a file whose cases must leave no array,
 * buffer or export behind. */
static inline void check_each_leaves_nothing(void)
{
    check_live_counts(check_live_at_start);
    check_after_each = check_nothing_left;
}

/* Seconds a case may run: CHECK_TIMEOUT from the environment (slow runs,
 * valgrind, raise it), else 30, well inside meson's limit for a file. */
static inline double check_timeout(void)
{
    const char *s = getenv("CHECK_TIMEOUT");
    double t = s ? strtod(s, NULL) : 0;
    return t > 0 ? t : 30;
}

static inline double check_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* How a child ended. */
enum check_end {
    CHECK_EXITED,      /* *detail: its exit status */
    CHECK_SIGNALLED,   /* *detail: the signal */
    CHECK_TIMED_OUT,   /* killed, with any process it started */
    CHECK_NO_CHILD,    /* *detail: errno of the fork or wait that failed */
};

/* Runs fn(ctx) in a child process (a process group of its own), which exits
 * with status 0 when fn returns; fn may exit with another status itself.
 * Waits at most `timeout` seconds, then kills the child's group. */
static inline enum check_end check_in_child(void (*fn)(void *), void *ctx, double timeout, int *detail)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        *detail = errno;
        return CHECK_NO_CHILD;
    }
    if (pid == 0) {
        setpgid(0, 0);
        fn(ctx);
        fflush(NULL);
        exit(0);
    }
    setpgid(pid, pid); /* as well, so that the group exists whichever runs first */
    /* Polled with growing naps (50 us to 10 ms): portable, and a quick case
     * costs almost no waiting. */
    double deadline = check_now() + timeout;
    long nap_ns = 50000;
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            *detail = errno;
            kill(-pid, SIGKILL);
            return CHECK_NO_CHILD;
        }
        if (check_now() >= deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            return CHECK_TIMED_OUT;
        }
        struct timespec nap = {0, nap_ns};
        nanosleep(&nap, NULL);
        if (nap_ns < 10000000)
            nap_ns *= 2;
    }
    if (WIFSIGNALED(status)) {
        *detail = WTERMSIG(status);
        return CHECK_SIGNALLED;
    }
    *detail = WEXITSTATUS(status);
    return CHECK_EXITED;
}

struct check_case {
    void (*setup)(void);
    void (*fn)(void);
};

/* A case's child: only the case's own failures decide its exit status. */
static inline void check_case_child(void *ctx)
{
    const struct check_case *c = ctx;
    check_failures = 0;
    if (c->setup)
        c->setup();
    c->fn();
    if (check_after_each)
        check_after_each();
    fflush(NULL);
    exit(check_failures ? 1 : 0);
}

/* Runs case `fn`, after `setup` (when not NULL) in the same child. */
static inline void check_run_child(const char *name, void (*setup)(void), void (*fn)(void))
{
    struct check_case c = {setup, fn};
    double timeout = check_timeout();
    int detail = 0;
    enum check_end end = check_in_child(check_case_child, &c, timeout, &detail);
    if (end == CHECK_EXITED && detail == 0) {
        check_passed++;
        return;
    }
    check_failures++;
    check_failed_tests++;
    if (end == CHECK_TIMED_OUT)
        fprintf(stderr, "FAILED %s (timed out after %g s; CHECK_TIMEOUT sets the limit)\n", name, timeout);
    else if (end == CHECK_SIGNALLED)
        fprintf(stderr, "FAILED %s (signal %d)\n", name, detail);
    else if (end == CHECK_NO_CHILD)
        fprintf(stderr, "FAILED %s (no child process: %s)\n", name, strerror(detail));
    else
        fprintf(stderr, "FAILED %s (exit %d)\n", name, detail);
}
#define RUN(test) check_run_child(#test, NULL, test)
#define RUN_AFTER(setup, test) check_run_child(#test, setup, test)

#define CHECK_DONE()                                                                                  \
    do {                                                                                              \
        printf("%s: %d passed, %d failed\n", __FILE__, check_passed, check_failed_tests);         \
        return check_failures ? 1 : 0;                                                                \
    } while (0)

#endif
