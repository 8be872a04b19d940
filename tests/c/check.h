/* A minimal test harness: each test file is one executable, run by meson in
 * its own process with a timeout, so one crash fails one file. */
#ifndef TACK_CHECK_H
#define TACK_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#define RUN(test)                                                                                     \
    do {                                                                                              \
        int before_ = check_failures;                                                                 \
        test();                                                                                       \
        if (check_failures == before_)                                                                \
            check_passed++;                                                                           \
        else {                                                                                        \
            check_failed_tests++;                                                                     \
            fprintf(stderr, "FAILED %s\n", #test);                                                    \
        }                                                                                             \
    } while (0)

#ifndef _WIN32
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs one case in a child process of its own, after `setup` (when not NULL)
 * there too: a crash or exit in the case fails that case only, and only the
 * case's own failures decide its exit status. */
static inline void check_run_child(const char *name, void (*setup)(void), void (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        check_failures++;
        return;
    }
    if (pid == 0) {
        check_failures = 0; /* the parent's count is not this case's */
        if (setup)
            setup();
        fn();
        fflush(NULL);
        exit(check_failures ? 1 : 0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        check_passed++;
    } else {
        check_failures++;
        check_failed_tests++;
        if (WIFSIGNALED(status))
            fprintf(stderr, "FAILED %s (signal %d)\n", name, WTERMSIG(status));
        else
            fprintf(stderr, "FAILED %s (exit %d)\n", name, WEXITSTATUS(status));
    }
}
#define RUN_CHILD(test) check_run_child(#test, NULL, test)
#define RUN_CHILD_AFTER(setup, test) check_run_child(#test, setup, test)
#endif

#define CHECK_DONE()                                                                                  \
    do {                                                                                              \
        printf("%s: %d passed, %d failed\n", __FILE__, check_passed, check_failed_tests);         \
        return check_failures ? 1 : 0;                                                                \
    } while (0)

#endif
