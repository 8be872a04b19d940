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

#define CHECK(cond)                                                                                   \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                  \
            check_failures++;                                                                         \
        }                                                                                             \
    } while (0)

#define CHECK_OK(expr)                                                                                \
    do {                                                                                              \
        tack_status check_st_ = (expr);                                                               \
        if (check_st_ != TACK_OK) {                                                                   \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #expr,                 \
                    tack_status_name(check_st_), tack_last_error());                                  \
            check_failures++;                                                                         \
        }                                                                                             \
    } while (0)

#define CHECK_STATUS(expr, want)                                                                      \
    do {                                                                                              \
        tack_status check_st_ = (expr);                                                               \
        if (check_st_ != (want)) {                                                                    \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", __FILE__, __LINE__, #expr,   \
                    tack_status_name(check_st_), tack_status_name(want), tack_last_error());          \
            check_failures++;                                                                         \
        }                                                                                             \
    } while (0)

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

#define CHECK_DONE()                                                                                  \
    do {                                                                                              \
        printf("%s: %d passed, %d failed\n", __FILE__, check_passed, check_failed_tests);         \
        return check_failures ? 1 : 0;                                                                \
    } while (0)

#endif
