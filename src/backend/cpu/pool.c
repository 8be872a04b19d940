/* The cpu backend's thread pool.
 *
 * Host code runs on persistent workers, woken per launch, which take
 * chunks of the index range from a shared counter; the launching thread
 * works too. A worker joins a launch only while it is open; the launching thread
 * closes it once it has run out of chunks and then waits only for the
 * workers that joined. So a worker that is slow to wake (asleep, or its
 * core busy with another process) never holds a launch up: the launching
 * thread just did its share, and a parallel launch costs at worst a serial
 * one plus the wake-up call.
 *
 * Whether a launch goes to the pool at all is the scheduling policy's
 * choice (policy.c), from the join times the pool measures when it starts
 * (hot_ns, cold_ns) and the policy then follows launch by launch. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "cpu.h"

/* A launch's state word: generation << 32 | OPEN | workers in it. */
#define OPEN (UINT64_C(1) << 31)
#define ACTIVE (OPEN - 1)

static _Atomic(struct pool *) the_pool;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int pool_failed;
static atomic_int nthreads;

int cpu_pool_threads(void)
{
    int n = atomic_load_explicit(&nthreads, memory_order_relaxed);
    if (n)
        return n;
    const char *env = getenv("TACK_NUM_THREADS");
    char *end;
    long v = env && *env ? strtol(env, &end, 10) : 0;
    if (v <= 0 || (env && *end)) {
        cpu_set_t set;
        v = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    }
    n = v < 1 ? 1 : v > 256 ? 256 : (int)v;
    atomic_store(&nthreads, n);
    return n;
}

int tack_kernel_num_threads(void) { return cpu_pool_threads(); }

static void work(struct pool *p)
{
    for (;;) {
        uint64_t b = atomic_fetch_add_explicit(&p->next, p->chunk, memory_order_relaxed);
        if (b >= p->end)
            return;
        uint64_t e = p->end - b > p->chunk ? b + p->chunk : p->end;
        p->entry((int64_t)b, (int64_t)e, p->shape, p->args);
    }
}

/* Joins launch `gen` if it is still open; 0 if it is gone or closed, in
 * which case the worker must not touch it. */
static int join(struct pool *p, unsigned gen)
{
    uint64_t s = atomic_load_explicit(&p->state, memory_order_acquire);
    while ((unsigned)(s >> 32) == gen && (s & OPEN)) {
        if (atomic_compare_exchange_weak_explicit(&p->state, &s, s + 1, memory_order_acq_rel, memory_order_acquire))
            return 1;
    }
    return 0;
}

static void *worker(void *arg)
{
    struct pool *p = arg;
    unsigned seen = 0;
    for (;;) {
        uint64_t t0 = now_ns();
        for (int i = 0; atomic_load_explicit(&p->generation, memory_order_acquire) == seen; i++) {
            if ((i & 63) == 63 && now_ns() - t0 > SPIN_NS) {
                pthread_mutex_lock(&p->lock);
                p->sleepers++;
                while (atomic_load_explicit(&p->generation, memory_order_acquire) == seen)
                    pthread_cond_wait(&p->wake, &p->lock);
                p->sleepers--;
                pthread_mutex_unlock(&p->lock);
                break;
            }
            cpu_relax();
        }
        seen = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (!join(p, seen))
            continue;
        uint64_t now = now_ns(), prev = atomic_load_explicit(&p->joined_ns, memory_order_relaxed);
        while (prev < now && !atomic_compare_exchange_weak(&p->joined_ns, &prev, now)) {
        }
        work(p);
        uint64_t s = atomic_fetch_sub_explicit(&p->state, 1, memory_order_acq_rel);
        if ((s & ACTIVE) == 1 && !(s & OPEN)) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->lock);
        }
    }
    return NULL;
}

/* Runs [begin, end) on the pool. Returns how long the workers took to
 * join, or, if none did (*helped = 0), how long the launch took: they
 * would have taken longer still. */
uint64_t cpu_pool_dispatch(struct pool *p, tack_host_entry entry, uint64_t begin, uint64_t end, const int64_t *shape,
                           void *const *args, int *helped)
{
    pthread_mutex_lock(&p->dispatch);
    uint64_t chunk = (end - begin) / ((uint64_t)(p->nworkers + 1) * CHUNKS_PER_THREAD);
    p->entry = entry;
    p->shape = shape;
    p->args = args;
    p->end = end;
    p->chunk = chunk ? chunk : 1;
    atomic_store_explicit(&p->next, begin, memory_order_relaxed);
    unsigned gen = atomic_load_explicit(&p->generation, memory_order_relaxed) + 1;
    uint64_t published = now_ns();
    atomic_store_explicit(&p->joined_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&p->state, (uint64_t)gen << 32 | OPEN, memory_order_release);
    pthread_mutex_lock(&p->lock);
    atomic_store_explicit(&p->generation, gen, memory_order_release);
    if (p->sleepers)
        pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    work(p);
    /* Out of chunks: whoever has not joined yet has nothing to do. */
    uint64_t s = atomic_fetch_and_explicit(&p->state, ~OPEN, memory_order_acq_rel) & ~OPEN;
    uint64_t t0 = now_ns();
    for (int i = 0; (s & ACTIVE) != 0; i++) {
        if ((i & 63) == 63 && now_ns() - t0 > SPIN_NS) {
            pthread_mutex_lock(&p->lock);
            while (atomic_load_explicit(&p->state, memory_order_acquire) & ACTIVE)
                pthread_cond_wait(&p->done, &p->lock);
            pthread_mutex_unlock(&p->lock);
            break;
        }
        cpu_relax();
        s = atomic_load_explicit(&p->state, memory_order_acquire);
    }
    uint64_t joined = atomic_load_explicit(&p->joined_ns, memory_order_relaxed);
    uint64_t latency = joined ? joined - published : now_ns() - published;
    *helped = joined != 0;
    pthread_mutex_unlock(&p->dispatch);
    return latency;
}

/* A launch that waits until a worker has joined it (or 10 ms), to measure
 * how long joining takes. */
static void wait_for_join(int64_t begin, int64_t end, const int64_t *shape, void *const *args)
{
    (void)begin;
    (void)end;
    (void)shape;
    struct pool *p = args[0];
    uint64_t t0 = now_ns();
    while (!atomic_load_explicit(&p->joined_ns, memory_order_relaxed) && now_ns() - t0 < 10000000)
        cpu_relax();
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The fork child has only the forking thread: the workers are gone. Start
 * afresh (the old pool's memory is abandoned, not freed: its mutexes may be
 * held by threads that no longer exist). */
static void after_fork_child(void)
{
    atomic_store(&the_pool, NULL);
    atomic_store(&pool_failed, 0);
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&pool_lock, &fresh, sizeof fresh);
}

static uint64_t median_join(struct pool *p, int samples, long pause_ns)
{
    uint64_t t[15];
    void *args[1] = {p};
    for (int i = 0; i < samples; i++) {
        if (pause_ns) {
            struct timespec pause = {0, pause_ns};
            nanosleep(&pause, NULL);
        }
        /* One index: the launching thread spins in it until a worker joins. */
        int helped;
        t[i] = cpu_pool_dispatch(p, wait_for_join, 0, 1, NULL, args, &helped);
    }
    qsort(t, (size_t)samples, sizeof *t, cmp_u64);
    return t[samples / 2] ? t[samples / 2] : 1;
}

struct pool *cpu_pool_get(void)
{
    struct pool *p = atomic_load_explicit(&the_pool, memory_order_acquire);
    if (p || atomic_load_explicit(&pool_failed, memory_order_relaxed))
        return p;
    pthread_mutex_lock(&pool_lock);
    p = atomic_load(&the_pool);
    if (p || atomic_load(&pool_failed))
        goto out;
    static int registered;
    if (!registered) {
        pthread_atfork(NULL, NULL, after_fork_child);
        registered = 1;
    }
    int workers = cpu_pool_threads() - 1;
    p = calloc(1, sizeof *p);
    if (!p)
        goto fail;
    pthread_mutex_init(&p->dispatch, NULL);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 0; i < workers; i++) {
        pthread_t t;
        /* Workers block every signal: a signal meant for the application
         * (SIGINT in Python) must reach a thread that handles it. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int r = pthread_create(&t, &attr, worker, p);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r != 0)
            break;
        p->nworkers++;
    }
    pthread_attr_destroy(&attr);
    if (p->nworkers == 0) {
        /* Nothing references p; running serially is always correct. */
        pthread_mutex_destroy(&p->dispatch);
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->wake);
        pthread_cond_destroy(&p->done);
        free(p);
        p = NULL;
        goto fail;
    }
    /* A new thread takes a while to be scheduled at all; then measure
     * joining with the workers polling, and asleep. */
    (void)median_join(p, 3, 0);
    atomic_store(&p->hot_ns, median_join(p, 15, 0));
    uint64_t cold = median_join(p, 5, 2 * SPIN_NS);
    atomic_store(&p->cold_ns, cold > atomic_load(&p->hot_ns) ? cold : atomic_load(&p->hot_ns));
    atomic_store_explicit(&the_pool, p, memory_order_release);
    goto out;
fail:
    atomic_store(&pool_failed, 1);
out:
    pthread_mutex_unlock(&pool_lock);
    return p;
}

struct pool *cpu_pool_started(void) { return atomic_load_explicit(&the_pool, memory_order_acquire); }
