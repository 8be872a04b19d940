/* What the simulated drivers (cuda_sim.c, hip_sim.c, level_zero_sim.c)
 * share: named counters read by a stats hook (the simulated compilers,
 * hiprtc_sim.c and ocloc_sim.c, keep theirs the same way), failure
 * injection by entry point name and call number, the frame of an entry
 * point, lists of the objects handles name, and integer settings from the
 * environment. Header only, so each simulator still builds from its one
 * source file. */
#ifndef TACK_SIM_COMMON_H
#define TACK_SIM_COMMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_API __attribute__((visibility("default")))

/* Declares an exported entry point from an entry of one of Tack's X-macro
 * lists of driver functions (src/driver/library.h), so that a definition
 * that drifts from Tack's declaration does not compile. */
#define SIM_PROTOTYPE(ret, field, symbol, required, params) SIM_API ret symbol params;

/* What the simulated hipRTC (hiprtc_sim.c) puts before the source in a code
 * object, and the simulated HIP runtime (hip_sim.c) looks for. */
#define SIM_HIP_CODE_OBJECT_MAGIC "TACK-SIM-HIP-CODE-OBJECT\n"

/* ---- counters ------------------------------------------------------------ */

/* Defines the counters an X-macro `list` names: STAT_<name> for each,
 * STAT_COUNT, their names in stat_names and their values in stats, which
 * COUNT(name) and UNCOUNT(name) change. */
#define SIM_STAT_ENUM(n) STAT_##n,
#define SIM_STAT_NAME(n) #n,
#define SIM_DEFINE_STATS(list)                                                                                \
    enum { list(SIM_STAT_ENUM) STAT_COUNT };                                                                  \
    static const char *const stat_names[] = {list(SIM_STAT_NAME)};                                           \
    static atomic_llong stats[STAT_COUNT]

#define COUNT(n) atomic_fetch_add(&stats[STAT_##n], 1)
#define UNCOUNT(n) atomic_fetch_sub(&stats[STAT_##n], 1)

/* The counter called `name` among `count` of them, or -1 for an unknown name. */
static inline long long sim_stat_lookup(const char *const *names, atomic_llong *values, int count, const char *name)
{
    for (int i = 0; i < count; i++)
        if (name && !strcmp(name, names[i]))
            return atomic_load(&values[i]);
    return -1;
}
#define SIM_STAT(name) sim_stat_lookup(stat_names, stats, STAT_COUNT, name)

/* ---- failure injection --------------------------------------------------- */

/* Pending failures: the `countdown`th next call of entry point `symbol`
 * returns `code`. Guarded by its simulator's lock. */
struct sim_failures {
    struct {
        char symbol[64];
        long long code;
        int countdown;
    } slot[16];
};

/* Arms a failure of the nth next call (1: the next one) of `symbol`, taking
 * `lock`: what each simulator's fail hook does. Returns 0, or -1 when the
 * table is full. */
static inline int sim_failure_arm(pthread_mutex_t *lock, struct sim_failures *t, const char *symbol, long long code,
                                  int nth)
{
    int r = -1;
    pthread_mutex_lock(lock);
    for (size_t i = 0; i < sizeof t->slot / sizeof t->slot[0]; i++) {
        if (t->slot[i].countdown <= 0) {
            snprintf(t->slot[i].symbol, sizeof t->slot[i].symbol, "%s", symbol);
            t->slot[i].code = code;
            t->slot[i].countdown = nth > 0 ? nth : 1;
            r = 0;
            break;
        }
    }
    pthread_mutex_unlock(lock);
    return r;
}

/* Counts a call of `symbol`: 1, with its code in *code, when this call is
 * one armed to fail; else 0. */
static inline int sim_failure_due(struct sim_failures *t, const char *symbol, long long *code)
{
    for (size_t i = 0; i < sizeof t->slot / sizeof t->slot[0]; i++) {
        if (t->slot[i].countdown > 0 && !strcmp(t->slot[i].symbol, symbol) && --t->slot[i].countdown == 0) {
            *code = t->slot[i].code;
            return 1;
        }
    }
    return 0;
}

/* ---- entry points -------------------------------------------------------- */

/* An entry point of a simulated driver runs from ENTER() to LEAVE() with
 * the simulator's `lock` held, and RETURN(v) ends it with result v. Each
 * simulator defines its ENTER() and LEAVE() from these pieces, around what
 * it adds (reading its configuration, refusing calls before its init):
 * SIM_ENTER declares the result r_ of type `type`, starting at `ok`, and
 * takes `lock`; SIM_INJECT ends the call with the armed code when it is one
 * of those `failures` says must fail, counted as injected_failures;
 * SIM_LEAVE, after the label `out` that RETURN jumps to, releases `lock`
 * and returns r_. CHECK(call) ends the entry point with the result of
 * `call` unless that is 0, success in every API simulated. */
#define SIM_ENTER(type, ok)                                                                                   \
    type r_ = (ok);                                                                                           \
    pthread_mutex_lock(&lock)
#define SIM_INJECT(type)                                                                                      \
    do {                                                                                                      \
        long long code_;                                                                                      \
        if (sim_failure_due(&failures, __func__, &code_)) {                                                   \
            COUNT(injected_failures);                                                                         \
            RETURN((type)code_);                                                                              \
        }                                                                                                     \
    } while (0)
#define RETURN(v)                                                                                             \
    do {                                                                                                      \
        r_ = (v);                                                                                             \
        goto out;                                                                                             \
    } while (0)
#define CHECK(call)                                                                                           \
    do {                                                                                                      \
        if ((r_ = (call)) != 0)                                                                               \
            goto out;                                                                                         \
    } while (0)
#define SIM_LEAVE()                                                                                           \
    pthread_mutex_unlock(&lock);                                                                              \
    return r_

/* ---- objects ------------------------------------------------------------- */

/* The first member of an object a simulator hands out handles to (a
 * stream, a command list...): whether it is alive, and its place on the
 * list of its kind. The lists are never freed, so that a stale handle stays
 * readable; they are walked from one object to the next by casting, the
 * object being first. */
struct sim_object {
    int live;
    struct sim_object *next;
};

/* A new live object of `size` bytes, zeroed (a struct that begins with its
 * struct sim_object), first on `list`; NULL when out of memory. */
static inline void *sim_object_new(struct sim_object **list, size_t size)
{
    struct sim_object *o = calloc(1, size);
    if (!o)
        return NULL;
    o->live = 1;
    o->next = *list;
    *list = o;
    return o;
}

/* The live object on `list` whose handle is `h`, or NULL. */
static inline void *sim_object_find(struct sim_object *list, const void *h)
{
    for (struct sim_object *o = list; o; o = o->next)
        if ((const void *)o == h && o->live)
            return o;
    return NULL;
}

/* ---- configuration ------------------------------------------------------- */

/* Environment variable `name` as an integer, or `fallback` when it is
 * unset, empty or not a number. */
static inline int sim_env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return fallback;
    char *end;
    long x = strtol(v, &end, 0);
    return *end ? fallback : (int)x;
}

#endif
