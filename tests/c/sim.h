/* Reaching a simulated driver (tests/sim/) from a C test: the same library
 * Tack loads, opened by the path in an environment variable, its symbols
 * and counters looked up by name. Any miss ends the test with status 2. */
#ifndef TACK_TEST_SIM_H
#define TACK_TEST_SIM_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tack/tack.h"

/* Opens the library named by environment variable `variable`; `what` says
 * what it must be, for the message when it cannot be opened. */
static inline void *sim_library(const char *variable, const char *what)
{
    const char *path = getenv(variable);
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!lib) {
        fprintf(stderr, "%s must name %s: %s\n", variable, what, path ? dlerror() : "unset");
        exit(2);
    }
    return lib;
}

/* Stores symbol `name` of `lib` into the function pointer at `slot`. */
static inline void sim_symbol(void *lib, const char *name, void *slot)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "the simulator has no %s\n", name);
        exit(2);
    }
    memcpy(slot, &p, sizeof p);
}
#define SIM_SYMBOL(lib, var, name) sim_symbol((lib), (name), &(var))

/* The simulator's counter `name`, read through its stats hook. */
static inline long long sim_counter(long long (*stats)(const char *name), const char *name)
{
    long long v = stats(name);
    if (v < 0) {
        fprintf(stderr, "the simulator has no counter %s\n", name);
        exit(2);
    }
    return v;
}

/* An address and the memory space tack_memory_space must name for it. */
struct sim_space_case {
    uint64_t address;
    const char *space;
};

/* tack_memory_space names each case's space, and asks the driver for every
 * one: the simulator's counter pointer_queries, read through `stat`, moves.
 * A failed check is reported at the caller's line. */
static inline void check_memory_spaces_at(const char *file, int line, const struct sim_space_case *cases, size_t n,
                                          long long (*stat)(const char *name))
{
    for (size_t i = 0; i < n; i++) {
        long long queries = stat("pointer_queries");
        const char *space = NULL;
        CHECK_OK_AT(file, line, tack_memory_space(cases[i].address, &space));
        CHECK_AT(file, line, space && !strcmp(space, cases[i].space));
        CHECK_AT(file, line, stat("pointer_queries") > queries);
    }
}
#define CHECK_MEMORY_SPACES(cases, stat)                                                                      \
    check_memory_spaces_at(__FILE__, __LINE__, (cases), sizeof(cases) / sizeof *(cases), (stat))

#endif
