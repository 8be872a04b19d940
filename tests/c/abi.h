/* Comparing Tack's driver declarations (src/driver/) with a vendor's
 * header, compiled into one file with both: each mismatch is reported with
 * both names and counted as a failure of the running case. */
#ifndef TACK_TEST_ABI_H
#define TACK_TEST_ABI_H

#include <stddef.h>
#include <stdio.h>

#include "check.h"

/* Both types have the same size. */
#define SAME_SIZE(ours, theirs)                                                                               \
    do {                                                                                                      \
        if (sizeof(ours) != sizeof(theirs)) {                                                                 \
            fprintf(stderr, "%s:%d: sizeof %s is %zu, %s is %zu\n", __FILE__, __LINE__, #ours, sizeof(ours),  \
                    #theirs, sizeof(theirs));                                                                 \
            check_failures++;                                                                                 \
        }                                                                                                     \
    } while (0)

/* Both structures have `field` at the same offset, with the same size. */
#define SAME_FIELD(ours, theirs, field)                                                                       \
    do {                                                                                                      \
        if (offsetof(ours, field) != offsetof(theirs, field) ||                                              \
            sizeof(((ours *)0)->field) != sizeof(((theirs *)0)->field)) {                                     \
            fprintf(stderr, "%s:%d: %s.%s differs from %s.%s\n", __FILE__, __LINE__, #ours, #field, #theirs,  \
                    #field);                                                                                  \
            check_failures++;                                                                                 \
        }                                                                                                     \
    } while (0)

/* Both constants have the same value (compared as 64-bit patterns, so a
 * negative enum and a flag with the top bit set compare alike). */
#define SAME_VALUE(ours, theirs)                                                                              \
    do {                                                                                                      \
        if ((unsigned long long)(ours) != (unsigned long long)(theirs)) {                                     \
            fprintf(stderr, "%s:%d: %s is %lld (0x%llx), %s is %lld (0x%llx)\n", __FILE__, __LINE__, #ours,   \
                    (long long)(ours), (unsigned long long)(ours), #theirs, (long long)(theirs),              \
                    (unsigned long long)(theirs));                                                            \
            check_failures++;                                                                                 \
        }                                                                                                     \
    } while (0)

/* SAME_FIELD for each of up to ten fields. */
#define ABI_FIELDS_1(o, t, f) SAME_FIELD(o, t, f);
#define ABI_FIELDS_2(o, t, f, ...) SAME_FIELD(o, t, f); ABI_FIELDS_1(o, t, __VA_ARGS__)
#define ABI_FIELDS_3(o, t, f, ...) SAME_FIELD(o, t, f); ABI_FIELDS_2(o, t, __VA_ARGS__)
#define ABI_FIELDS_4(o, t, f, ...) SAME_FIELD(o, t, f); ABI_FIELDS_3(o, t, __VA_ARGS__)
#define ABI_FIELDS_5(o, t, f, ...) SAME_FIELD(o, t, f); ABI_FIELDS_4(o, t, __VA_ARGS__)
#define ABI_FIELDS_6(o, t, f, ...) SAME_FIELD(o, t, f); ABI_FIELDS_5(o, t, __VA_ARGS__)
#define ABI_FIELDS_7(o, t, f, ...) SAME_FIELD(o, t, f); ABI_FIELDS_6(o, t, __VA_ARGS__)
#define ABI_FIELDS_8(o, t, f, ...) SAME_FIELD(o, t, f); ABI_FIELDS_7(o, t, __VA_ARGS__)
#define ABI_FIELDS_9(o, t, f, ...) SAME_FIELD(o, t, f); ABI_FIELDS_8(o, t, __VA_ARGS__)
#define ABI_FIELDS_10(o, t, f, ...) SAME_FIELD(o, t, f); ABI_FIELDS_9(o, t, __VA_ARGS__)
#define ABI_PICK(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, n, ...) n
#define ABI_FIELDS(o, t, ...)                                                                                 \
    ABI_PICK(__VA_ARGS__, ABI_FIELDS_10, ABI_FIELDS_9, ABI_FIELDS_8, ABI_FIELDS_7, ABI_FIELDS_6, ABI_FIELDS_5, \
             ABI_FIELDS_4, ABI_FIELDS_3, ABI_FIELDS_2, ABI_FIELDS_1, none)(o, t, __VA_ARGS__)

/* Both structures have the same size, and each named field (one to ten of
 * them) the same offset and size. */
#define SAME_STRUCT(ours, theirs, ...)                                                                        \
    do {                                                                                                      \
        SAME_SIZE(ours, theirs);                                                                              \
        ABI_FIELDS(ours, theirs, __VA_ARGS__)                                                                 \
    } while (0)

#endif
