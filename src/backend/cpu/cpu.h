/* What the files of the cpu backend share: cpu.c (the table, open,
 * describe, code generation and the kernel slots), memory.c, pool.c,
 * policy.c and atomics.c. Private to src/backend/cpu/.
 *
 * Functions and variables with external linkage here carry cpu_, except
 * those the kernel slots in cpu.c call by their old names (pool_run,
 * atomics_once, atomics_register_fork). */
#ifndef TACK_BACKEND_CPU_H
#define TACK_BACKEND_CPU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "../../core/internal.h"
#include "../../core/toolchain.h"

/* ---- the scheduling policy's constants ------------------------------------
 *
 * Every number that decides how a launch runs, in one place. Where the
 * history records the measurement that chose a number, it is given; the
 * others were re-measured with bench/cpu_pool.c, which prints the pool's
 * join times, the cost of timing a run and a probe's time:
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc/core bench/cpu_pool.c \
 *      src/backend/cpu/pool.c -lpthread -o /tmp/cpu_pool && /tmp/cpu_pool
 * on the two-core development machine, shared with other work (load
 * average 8 to 14, six runs): a polling worker joined in a median 0.3 us
 * when the other core was free and 9 to 13 us when it was busy; a sleeping
 * one in 11 to 24 us; two clock reads took 115 to 244 ns on average. */

/* Workers poll this long for the next launch before sleeping, so that a
 * loop of launches does not pay a wake-up each time; waiting launches
 * (the pool's, and a locked one behind a plain one) poll as long. Not
 * recorded; measured: a cold join costs 11 to 24 us against 0.3 us hot,
 * so 50 us keeps workers hot across a gap of two cold joins, and a worker
 * that polls in vain burns at most 50 us of a core after a launch. */
#define SPIN_NS 50000
/* Indices run serially to measure a kernel's cost on its first launch.
 * Not recorded; measured: 256 indices of saxpy, the cheapest kernel, took
 * 60 to 100 ns (best of 10^4, clock reads included), less than any join,
 * so a probe delays no launch that pays for threads by more than a join. */
#define PROBE 256
/* Chunks per thread: small enough to balance a busy core, large enough
 * that taking one costs nothing (one relaxed fetch-and-add). Not recorded
 * and not re-measured. */
#define CHUNKS_PER_THREAD 4
/* The time workers are taken to need to join before the pool has started
 * and measured it: a launch whose work exceeds this starts the pool.
 * Waking a thread takes microseconds on any machine. Not recorded;
 * measured: joins of 0.3 us (polling, idle core) to 24 us (asleep), so 8 us
 * lies between a hot and a cold join: no launch too short to gain from
 * even a hot worker starts threads. */
#define JOIN_GUESS_NS 8000
/* A launch whose work is under 1/UNTIMED_BELOW of a hot join is far from
 * paying for a fan-out (PAYS_OVER * UNTIMED_BELOW = 16 times short) and
 * runs untimed. Not recorded; measured: timing a run costs two clock
 * reads, 115 to 244 ns, more than such a launch's work on an idle machine
 * (0.3 us / 8 = 40 ns) and 7 to 15% of it on a busy one (13 us / 8). */
#define UNTIMED_BELOW 8
/* A launch runs in parallel when its work is more than PAYS_OVER times
 * the time its workers are expected to take to join. Recorded (README,
 * bench/kernels.py): for saxpy on two cores parallel first beat serial at
 * 65,536 to 131,072 elements from run to run, near there the choice was
 * within a factor of two of the better one, and from 2^20 elements up it
 * matched the better one. */
#define PAYS_OVER 2
/* A join measured later than LATE_JOIN_CAP times the expected counts as
 * that. Recorded: counted in full, one cold join half a millisecond late
 * (a worker descheduled) kept saxpy launches of 2^19 to 2^20 elements
 * serial until it had faded over hundreds of launches. */
#define LATE_JOIN_CAP 2
/* Launches kept on one thread because threads hindered each other count;
 * once they add up to RETRY_AFTER times what one parallel launch more
 * would lose by the last measure, the next one runs in parallel and
 * measures anew, so trying costs a thirty-second at most. Recorded: a
 * 10^7-value histogram with locked atomics took 164 ms on two threads
 * against 42 ms on one (2.64 ms with plain atomics): without the retry
 * bound every launch would pay that. 32 itself is a bound chosen, not a
 * measured optimum. */
#define RETRY_AFTER 32
/* A launch kept serial with work within NEAR_PAYING times of paying lets
 * the join estimate fade (so that a busy machine's estimate does not keep
 * launches near the threshold serial for good): by 1/FADE_NEAR when within
 * a factor PAYS_OVER of paying, since trying costs it little (the
 * launching thread works from the start, late workers take only what is
 * left), else by 1/FADE_FAR. Recorded: with 1/32 for all, saxpy of 2^20 to
 * 2^21 elements could stay on one thread for a whole run of launches. */
#define NEAR_PAYING 8
#define FADE_NEAR 8
#define FADE_FAR 32
/* A measured rate or join time moves 1/RATE_WEIGHT of the way to each new
 * observation, so an outlier is half forgotten after three launches. Not
 * recorded and not re-measured. */
#define RATE_WEIGHT 4

/* ---- shared helpers ------------------------------------------------------ */

static inline uint64_t now_ns(void) { return (uint64_t)tack_now_ns(); }

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* ---- memory (memory.c) --------------------------------------------------- */

tack_status cpu_alloc(tack_device *device, size_t nbytes, int exportable, void **data, void **ctx);
void cpu_free(tack_device *device, void *data, void *ctx);
tack_status cpu_export_memory(tack_buffer *b, tack_exported_memory *out);
tack_status cpu_import_memory(tack_device *device, const tack_exported_memory *e, void **data, void **ctx,
                              int *writable, int *foreign);
/* The memory table: no copies, no pointer checks (the host addresses it). */
extern const struct tack_backend_memory tack_cpu_memory;

/* ---- the thread pool (pool.c) -------------------------------------------- */

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
    const int64_t *shape;
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

/* The threads a launch is split over: TACK_NUM_THREADS, else the cores
 * this process may run on (1 to 256). Read once. */
int cpu_pool_threads(void);
/* The pool, started on first use with its join times measured; NULL when
 * no worker could be started (then launches run serially: still correct). */
struct pool *cpu_pool_get(void);
/* The pool if it has started, else NULL; starts nothing. */
struct pool *cpu_pool_started(void);
/* Runs [begin, end) on the pool. Returns how long the workers took to
 * join, or, if none did (*helped = 0), how long the launch took: they
 * would have taken longer still. */
uint64_t cpu_pool_dispatch(struct pool *p, tack_host_entry entry, uint64_t begin, uint64_t end, const int64_t *shape,
                           void *const *args, int *helped);

/* ---- the scheduling policy (policy.c) ------------------------------------ */

/* What a kernel's launches measured of it, picoseconds an index; 0 = not
 * measured yet. */
struct run_costs {
    /* Work: one thread's time, and a parallel launch's time on all its
     * threads (they agree for a kernel that scales). */
    atomic_uint_fast64_t cost_ps;
    /* One thread's time alone, from serial runs only: with locked atomics
     * (serial_ps) and with plain ones (plain_ps). */
    atomic_uint_fast64_t serial_ps, plain_ps;
    /* A parallel launch's time once its workers had joined: less than
     * serial_ps where threads help, more where they hinder each other
     * (a histogram's threads contending for the same counters ran four
     * times slower than one thread alone). */
    atomic_uint_fast64_t joined_ps;
    /* Launches kept on one thread since the last parallel one because
     * that was faster (see pool_run). */
    atomic_uint_fast64_t kept;
    /* PROBED_*: the rate is a probe's alone so far. */
    atomic_int probed;
};

/* A launch as the pool runs it. */
struct job {
    tack_host_entry entry; /* with locked atomics, if any */
    /* With plain atomics: for a kernel that has them, on memory no other
     * process can write; else NULL. */
    tack_host_entry plain;
    int atomics; /* registers its runs (the kernel uses Tack's atomics) */
    const int64_t *shape;
    void *const *args;
    struct run_costs *c;
};

/* Runs entry over [0, n), in parallel when the measured costs say it pays. */
void pool_run(const struct job *j, int64_t n);

/* ---- plain atomics (atomics.c) ------------------------------------------- */

/* >= 0: launches running with locked atomics; -1: one runs with plain atomics. */
extern atomic_long cpu_atomics_users;
/* Registers the registry's fork handler: pthread_once(&atomics_once,
 * atomics_register_fork) before the first launch that may run plain. */
extern pthread_once_t atomics_once;
void atomics_register_fork(void);
/* Waits while a plain launch runs, then registers a locked one. */
void cpu_locked_wait(void);

/* Registers a launch with locked atomics, waiting while a plain one runs. */
static inline void locked_begin(void)
{
    long v = atomic_load_explicit(&cpu_atomics_users, memory_order_relaxed);
    if (v < 0 || !atomic_compare_exchange_strong_explicit(&cpu_atomics_users, &v, v + 1, memory_order_acquire,
                                                          memory_order_relaxed))
        cpu_locked_wait();
}

static inline void locked_end(void) { atomic_fetch_sub_explicit(&cpu_atomics_users, 1, memory_order_release); }

/* Registers a serial run of `j` on this thread: with plain atomics when
 * `plain_ok`, the job has them and no other launch with atomics runs
 * (returns 1, counted as a plain run), else with locked ones if it has
 * atomics at all (returns 0; a refused plain run is counted). End it with
 * cpu_atomics_serial_end(j, what this returned). */
int cpu_atomics_serial_begin(const struct job *j, int plain_ok);
void cpu_atomics_serial_end(const struct job *j, int plain);

#endif
