/* Reaching a simulated driver (tests/sim/) from a C test: the same library
 * Tack loads, opened by the path in an environment variable, its symbols
 * and counters looked up by name. Any miss ends the test with status 2. */
#ifndef TACK_TEST_SIM_H
#define TACK_TEST_SIM_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#endif
