/* The cpu backend's scheduling policy: whether a launch runs on one thread
 * or on the pool, from what each kernel's launches measured of it.
 *
 * Serial or parallel: a launch saves (T-1)/T of its work when workers join
 * at once, and the work is n times the kernel's cost per index, which each
 * kernel measures on its own launches (one index of saxpy and one of a ray
 * tracer differ a thousandfold). Workers take time to join: they poll for
 * SPIN_NS after a launch, then sleep. The time to join is measured when the
 * pool starts, for polling and for sleeping workers, and followed launch
 * by launch. A launch runs in parallel when its work is at least twice the
 * time its workers are expected to take to join.
 *
 * Its constants, each with the measurement that chose it, are in cpu.h,
 * in one block (the pool and the atomics registry poll for SPIN_NS too). */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cpu.h"

/* TACK_SERIAL_BELOW: a fixed threshold in place of the measured decision
 * (for benchmarks, and for users who want launches to behave the same every
 * time); -1 when unset, -2 before it is read. */
static atomic_llong serial_below = -2;

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

static void update(atomic_uint_fast64_t *estimate, uint64_t observed)
{
    uint64_t old = atomic_load_explicit(estimate, memory_order_relaxed);
    uint64_t v = old ? ((RATE_WEIGHT - 1) * old + observed) / RATE_WEIGHT : observed;
    atomic_store_explicit(estimate, v ? v : 1, memory_order_relaxed);
}

/* What a serial run measures: nothing, the work alone (cost_ps), or also
 * one thread's rate (serial_ps or plain_ps), which a run of one index
 * would not tell (the clock's own cost is most of it). A probe's rate,
 * from the domain's first indices, may be far from the whole domain's (a
 * Mandelbrot set's first row escapes at once): the first whole run
 * replaces it instead of blending with it. */
enum { UNTIMED, TIME_COST, TIME_PROBE, TIME_RATE };
#define PROBED_SERIAL 1
#define PROBED_PLAIN 2

/* Runs [begin, end) on this thread: with plain atomics when `plain_ok`,
 * the job has them and no other launch with atomics runs; else with
 * locked ones. */
static void run_serial(const struct job *j, uint64_t begin, uint64_t end, int timed, int plain_ok)
{
    struct run_costs *c = j->c;
    int plain = cpu_atomics_serial_begin(j, plain_ok);
    uint64_t t0 = timed ? now_ns() : 0;
    (plain ? j->plain : j->entry)((int64_t)begin, (int64_t)end, j->shape, j->args);
    uint64_t t1 = timed ? now_ns() : 0;
    cpu_atomics_serial_end(j, plain);
    if (timed == UNTIMED || end == begin)
        return;
    uint64_t ps = (t1 - t0) * 1000 / (end - begin);
    update(&c->cost_ps, ps);
    if (timed == TIME_COST)
        return;
    atomic_uint_fast64_t *rate = plain ? &c->plain_ps : &c->serial_ps;
    int bit = plain ? PROBED_PLAIN : PROBED_SERIAL;
    if (timed == TIME_PROBE) {
        if (!atomic_load_explicit(rate, memory_order_relaxed)) {
            atomic_store_explicit(rate, ps ? ps : 1, memory_order_relaxed);
            atomic_fetch_or_explicit(&c->probed, bit, memory_order_relaxed);
        }
    } else if (atomic_load_explicit(&c->probed, memory_order_relaxed) & bit) {
        atomic_fetch_and_explicit(&c->probed, ~bit, memory_order_relaxed);
        atomic_store_explicit(rate, ps ? ps : 1, memory_order_relaxed);
    } else {
        update(rate, ps);
    }
}


/* TACK_SERIAL_BELOW set: launches of `fixed` indices or more run on the
 * pool (when it starts), the others on one thread, untimed either way. */
static void run_fixed(const struct job *j, int64_t n, long long fixed)
{
    struct pool *p = n >= fixed ? cpu_pool_get() : NULL;
    int helped;
    if (!p) {
        run_serial(j, 0, (uint64_t)n, UNTIMED, 1);
        return;
    }
    if (j->atomics)
        locked_begin();
    cpu_pool_dispatch(p, j->entry, 0, (uint64_t)n, j->shape, j->args, &helped);
    if (j->atomics)
        locked_end();
}

/* A first launch measures one thread's rate on PROBE indices; one
 * that may use plain atomics measures them, and the locked ones too:
 * over the threads those are the best a parallel launch could do,
 * which tells a kernel whose plain atomics beat that without a
 * parallel launch to learn it. Returns where the rest of the launch
 * begins. */
static uint64_t probe_rates(const struct job *j, uint64_t begin, uint64_t end)
{
    struct run_costs *c = j->c;
    uint64_t cost = atomic_load_explicit(&c->cost_ps, memory_order_relaxed);
    int probe = !cost || (j->plain && !atomic_load_explicit(&c->plain_ps, memory_order_relaxed));
    int probe_locked = j->plain && !atomic_load_explicit(&c->serial_ps, memory_order_relaxed);
    for (int plain_ok = 1; plain_ok >= 0; plain_ok--) {
        if (!(plain_ok ? probe : probe_locked) || begin == end)
            continue;
        uint64_t to = end - begin < PROBE ? end : begin + PROBE;
        run_serial(j, begin, to, TIME_PROBE, plain_ok);
        begin = to;
    }
    return begin;
}

/* One thread against all: a kernel whose threads slow each other down
 * (contended atomics) runs faster alone, and faster still with plain
 * atomics where this launch may have them. Before any parallel launch
 * of such a kernel, the best one could do stands for it (one thread's
 * locked rate over the threads). Each launch kept on one thread counts;
 * once they add up to RETRY_AFTER times what one parallel launch more
 * would lose by the last measure, the next one runs in parallel again and
 * measures anew. Only a kernel with atomics is judged so: a kernel
 * without them gains from more threads all the same, and its rates
 * measured on launches of other sizes (in cache or not) do not compare. */
static int threads_hinder(const struct job *j, uint64_t serial_ps, uint64_t kept, int threads)
{
    struct run_costs *c = j->c;
    uint64_t alone = j->plain ? atomic_load_explicit(&c->plain_ps, memory_order_relaxed) : serial_ps;
    uint64_t joined = atomic_load_explicit(&c->joined_ps, memory_order_relaxed);
    if (!joined && j->plain)
        joined = serial_ps / (uint64_t)threads;
    return j->atomics && alone && joined >= alone && kept <= (joined - alone) * RETRY_AFTER / alone;
}

/* Runs [begin, end) on the pool and learns from it: how fast the workers
 * joined (into *join_ns, which `expected` was read from) and the kernel's
 * rates. `serial_ps` is one thread's locked rate as read before. */
static void run_parallel(const struct job *j, struct pool *p, uint64_t begin, uint64_t end,
                         atomic_uint_fast64_t *join_ns, uint64_t expected, uint64_t serial_ps)
{
    struct run_costs *c = j->c;
    uint64_t rest = end - begin;
    int helped;
    if (j->atomics)
        locked_begin();
    uint64_t t0 = now_ns();
    uint64_t latency = cpu_pool_dispatch(p, j->entry, begin, end, j->shape, j->args, &helped);
    uint64_t t1 = now_ns(), spent = t1 - t0;
    if (j->atomics)
        locked_end();
    atomic_store_explicit(&p->last_end_ns, t1, memory_order_relaxed);
    atomic_store_explicit(&c->kept, 0, memory_order_relaxed);
    /* How fast workers join moves with the machine's load; follow it,
     * a join at most LATE_JOIN_CAP times as slow as expected counting as
     * such: a cold join is measured seldom, and one very late one (a
     * worker descheduled for a millisecond) would keep launches that pay
     * for threads on one for hundreds of launches. A lasting change still
     * shows within a few. */
    update(join_ns, expected && latency > LATE_JOIN_CAP * expected ? LATE_JOIN_CAP * expected : latency);
    /* The launching thread worked alone until the workers joined, then
     * all shared the rest (as if evenly). */
    uint64_t first = helped && latency < spent ? latency : spent;
    uint64_t total = first + (spent - first) * (uint64_t)(p->nworkers + 1);
    update(&c->cost_ps, total * 1000 / rest);
    /* After the join: the indices left when the workers came (those
     * the launching thread ran alone at its serial rate, atomics
     * locked), over the time they took. */
    uint64_t before = serial_ps ? first * 1000 / serial_ps : 0;
    if (helped && before < rest && spent > first)
        update(&c->joined_ps, (spent - first) * 1000 / (rest - before));
}

/* Runs [begin, end) on this thread although the pool has started. A join
 * time measured while the machine was busy would otherwise keep launches
 * near the threshold serial for good: let it fade, so that one of them
 * tries the pool again and measures anew; faster for a launch within a
 * factor of PAYS_OVER of paying, since trying costs it little (the
 * launching thread works from the start, and late workers only take what
 * is left). */
static void run_kept(const struct job *j, uint64_t begin, uint64_t end, uint64_t work_ns,
                     atomic_uint_fast64_t *join_ns, uint64_t expected)
{
    run_serial(j, begin, end, TIME_RATE, 1);
    if (work_ns * NEAR_PAYING > PAYS_OVER * expected)
        atomic_store_explicit(join_ns, expected - expected / (work_ns > expected ? FADE_NEAR : FADE_FAR),
                              memory_order_relaxed);
}

/* [begin, end) of a launch whose cost is known, once the pool has started:
 * in parallel when that pays and the kernel's threads do not hinder each
 * other, else on this thread. */
static void run_decided(const struct job *j, struct pool *p, uint64_t begin, uint64_t end, uint64_t work_ns,
                        int threads)
{
    struct run_costs *c = j->c;
    int hot = now_ns() - atomic_load_explicit(&p->last_end_ns, memory_order_relaxed) < SPIN_NS;
    atomic_uint_fast64_t *join_ns = hot ? &p->hot_ns : &p->cold_ns;
    uint64_t expected = atomic_load_explicit(join_ns, memory_order_relaxed);
    uint64_t serial_ps = atomic_load_explicit(&c->serial_ps, memory_order_relaxed);
    uint64_t kept = atomic_load_explicit(&c->kept, memory_order_relaxed);
    int pays = work_ns > PAYS_OVER * expected;
    int hinders = threads_hinder(j, serial_ps, kept, threads);
    if (pays && hinders)
        atomic_store_explicit(&c->kept, kept + 1, memory_order_relaxed);
    if (pays && !hinders)
        run_parallel(j, p, begin, end, join_ns, expected, serial_ps);
    else
        run_kept(j, begin, end, work_ns, join_ns, expected);
}

void pool_run(const struct job *j, int64_t n)
{
    struct run_costs *c = j->c;
    int threads = cpu_pool_threads();
    if (n < 2 || threads == 1) {
        /* Timed while no cost is known: the cost also says whether a
         * launch is long enough to let other threads run meanwhile
         * (cpu_kernel_expected_ns). */
        run_serial(j, 0, (uint64_t)(n > 0 ? n : 0),
                   atomic_load_explicit(&c->cost_ps, memory_order_relaxed) ? UNTIMED : TIME_COST, 1);
        return;
    }
    long long fixed = fixed_threshold();
    if (fixed >= 0) {
        run_fixed(j, n, fixed);
        return;
    }
    uint64_t end = (uint64_t)n, begin = probe_rates(j, 0, end);
    if (begin == end)
        return;
    uint64_t cost = atomic_load_explicit(&c->cost_ps, memory_order_relaxed);
    uint64_t rest = end - begin;
    uint64_t work_ns = rest > UINT64_MAX / cost ? UINT64_MAX / 1000 : rest * cost / 1000;
    /* Waking a thread takes microseconds on any machine: a launch this
     * small does not start the pool. */
    struct pool *p = cpu_pool_started();
    uint64_t least = p ? atomic_load_explicit(&p->hot_ns, memory_order_relaxed) : JOIN_GUESS_NS;
    if (work_ns * UNTIMED_BELOW < least) {
        /* Far from paying for a fan-out: not even worth timing. */
        run_serial(j, begin, end, UNTIMED, 1);
        return;
    }
    if (!p && work_ns > JOIN_GUESS_NS)
        p = cpu_pool_get();
    if (!p) {
        run_serial(j, begin, end, TIME_RATE, 1);
        return;
    }
    run_decided(j, p, begin, end, work_ns, threads);
}
