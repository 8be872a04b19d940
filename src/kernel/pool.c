/* The host thread pool. Persistent workers, woken per launch, take chunks of
 * the index range from a shared counter, and the launching thread works
 * too. A worker joins a launch only while it is open; the launching thread
 * closes it once it has run out of chunks and then waits only for the
 * workers that joined. So a worker that is slow to wake (asleep, or its
 * core busy with another process) never holds a launch up: the launching
 * thread just did its share, and a parallel launch costs at worst a serial
 * one plus the wake-up call.
 *
 * Serial or parallel: a launch saves (T-1)/T of its work when workers join
 * at once, and the work is n times the kernel's cost per index, which each
 * kernel measures on its own launches (one index of saxpy and one of a ray
 * tracer differ a thousandfold). Workers take time to join: they poll for
 * SPIN_NS after a launch, then sleep. The time to join is measured when the
 * pool starts, for polling and for sleeping workers, and followed launch
 * by launch. A launch runs in parallel when its work is at least twice the
 * time its workers are expected to take to join. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernel.h"

/* Workers poll this long for the next launch before sleeping, so that a
 * loop of launches does not pay a wake-up each time. */
#define SPIN_NS 50000
/* Indices run serially to measure a kernel's cost on its first launch. */
#define PROBE 256
/* Chunks per thread: small enough to balance a busy core, large enough
 * that taking one costs nothing. */
#define CHUNKS_PER_THREAD 4

/* A launch's state word: generation << 32 | OPEN | workers in it. */
#define OPEN (UINT64_C(1) << 31)
#define ACTIVE (OPEN - 1)

struct pool {
    int nworkers;
    pthread_mutex_t dispatch; /* one parallel launch at a time */
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    atomic_uint generation; /* what sleeping and polling workers watch */
    atomic_uint_fast64_t state;
    int sleepers;
    /* The launch, written before its generation is published. */
    tack_host_entry entry;
    void *const *args;
    atomic_uint_fast64_t next;
    uint64_t end, chunk;
    atomic_uint_fast64_t joined_ns; /* when the last worker joined */
    /* Expected time for workers to join, polling (hot) and asleep (cold). */
    atomic_uint_fast64_t hot_ns, cold_ns;
    /* When the last parallel launch ended: workers poll until SPIN_NS
     * after it. */
    atomic_uint_fast64_t last_end_ns;
};

static _Atomic(struct pool *) the_pool;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int pool_failed;
static atomic_int nthreads;
/* TACK_SERIAL_BELOW: a fixed threshold in place of the measured decision
 * (for benchmarks, and for users who want launches to behave the same every
 * time); -1 when unset, -2 before it is read. */
static atomic_llong serial_below = -2;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

int tack_pool_threads(void)
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

int tack_kernel_num_threads(void) { return tack_pool_threads(); }

static long long fixed_threshold(void)
{
    long long v = atomic_load_explicit(&serial_below, memory_order_relaxed);
    if (v != -2)
        return v;
    const char *env = getenv("TACK_SERIAL_BELOW");
    char *end;
    v = env && *env ? strtoll(env, &end, 10) : -1;
    if (env && *env && (*end || v < 0))
        v = -1;
    atomic_store(&serial_below, v);
    return v;
}

static void work(struct pool *p)
{
    for (;;) {
        uint64_t b = atomic_fetch_add_explicit(&p->next, p->chunk, memory_order_relaxed);
        if (b >= p->end)
            return;
        uint64_t e = p->end - b > p->chunk ? b + p->chunk : p->end;
        p->entry((int64_t)b, (int64_t)e, p->args);
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
static uint64_t dispatch(struct pool *p, tack_host_entry entry, uint64_t begin, uint64_t end, void *const *args,
                         int *helped)
{
    pthread_mutex_lock(&p->dispatch);
    uint64_t chunk = (end - begin) / ((uint64_t)(p->nworkers + 1) * CHUNKS_PER_THREAD);
    p->entry = entry;
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
static void wait_for_join(int64_t begin, int64_t end, void *const *args)
{
    (void)begin;
    (void)end;
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
        t[i] = dispatch(p, wait_for_join, 0, 1, args, &helped);
    }
    qsort(t, (size_t)samples, sizeof *t, cmp_u64);
    return t[samples / 2] ? t[samples / 2] : 1;
}

static struct pool *pool_get(void)
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
    int workers = tack_pool_threads() - 1;
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

uint64_t tack_pool_overhead_ns(int cold)
{
    struct pool *p = pool_get();
    return p ? atomic_load(cold ? &p->cold_ns : &p->hot_ns) : 0;
}

static void update(atomic_uint_fast64_t *estimate, uint64_t observed)
{
    uint64_t old = atomic_load_explicit(estimate, memory_order_relaxed);
    uint64_t v = old ? (3 * old + observed) / 4 : observed;
    atomic_store_explicit(estimate, v ? v : 1, memory_order_relaxed);
}

void tack_pool_run(tack_host_entry entry, int64_t n, void *const *args, atomic_uint_fast64_t *cost_ps)
{
    int threads = tack_pool_threads();
    if (n < 2 || threads == 1) {
        entry(0, n, args);
        return;
    }
    long long fixed = fixed_threshold();
    if (fixed >= 0) {
        struct pool *p = n >= fixed ? pool_get() : NULL;
        int helped;
        if (p)
            dispatch(p, entry, 0, (uint64_t)n, args, &helped);
        else
            entry(0, n, args);
        return;
    }
    uint64_t begin = 0, end = (uint64_t)n;
    uint64_t cost = atomic_load_explicit(cost_ps, memory_order_relaxed);
    if (!cost) {
        begin = end < PROBE ? end : PROBE;
        uint64_t t0 = now_ns();
        entry(0, (int64_t)begin, args);
        update(cost_ps, (now_ns() - t0) * 1000 / begin);
        if (begin == end)
            return;
        cost = atomic_load_explicit(cost_ps, memory_order_relaxed);
    }
    uint64_t rest = end - begin;
    uint64_t work_ns = rest > UINT64_MAX / cost ? UINT64_MAX / 1000 : rest * cost / 1000;
    /* Waking a thread takes microseconds on any machine: a launch this
     * small does not start the pool. */
    struct pool *p = atomic_load_explicit(&the_pool, memory_order_acquire);
    uint64_t least = p ? atomic_load_explicit(&p->hot_ns, memory_order_relaxed) : 8000;
    if (work_ns * 8 < least) {
        /* Far from paying for a fan-out: not even worth timing. */
        entry((int64_t)begin, (int64_t)end, args);
        return;
    }
    if (!p && work_ns > 8000)
        p = pool_get();
    if (!p) {
        uint64_t t0 = now_ns();
        entry((int64_t)begin, (int64_t)end, args);
        update(cost_ps, (now_ns() - t0) * 1000 / rest);
        return;
    }
    uint64_t t0 = now_ns();
    int hot = t0 - atomic_load_explicit(&p->last_end_ns, memory_order_relaxed) < SPIN_NS;
    atomic_uint_fast64_t *join_ns = hot ? &p->hot_ns : &p->cold_ns;
    uint64_t expected = atomic_load_explicit(join_ns, memory_order_relaxed);
    if (work_ns > 2 * expected) {
        int helped;
        uint64_t latency = dispatch(p, entry, begin, end, args, &helped);
        uint64_t t1 = now_ns(), spent = t1 - t0;
        atomic_store_explicit(&p->last_end_ns, t1, memory_order_relaxed);
        /* How fast workers join moves with the machine's load; follow it. */
        update(join_ns, latency);
        /* The launching thread worked alone until the workers joined, then
         * all shared the rest (as if evenly: a kernel that scales worse
         * looks costlier, which keeps it parallel only where that pays). */
        uint64_t alone = helped && latency < spent ? latency : spent;
        uint64_t total = alone + (spent - alone) * (uint64_t)(p->nworkers + 1);
        update(cost_ps, total * 1000 / rest);
    } else {
        entry((int64_t)begin, (int64_t)end, args);
        update(cost_ps, (now_ns() - t0) * 1000 / rest);
        /* A join time measured while the machine was busy would otherwise
         * keep launches near the threshold serial for good: let it fade,
         * so that one of them tries the pool again and measures anew. */
        if (work_ns * 8 > 2 * expected)
            atomic_store_explicit(join_ns, expected - expected / 32, memory_order_relaxed);
    }
}
