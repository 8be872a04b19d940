/* The cpu backend's plain atomics: the process-wide registry of launches
 * with atomics, and its fork handler.
 *
 * A locked read-modify-write costs some sixteen plain ones (10^7 of a
 * histogram's tack_atomic_add took 42.4 ms on one thread, plain ones
 * 2.64 ms), and a launch the pool runs on one thread has only one index
 * running at a time: its atomics need no lock against each other. So a
 * kernel whose source uses Tack's atomics has a third entry in which they
 * are plain loads and stores (CPU_PLAIN_ATOMICS, cpu.c), and a launch that runs
 * on one thread takes it when two more things hold:
 *   - no other process can write the memory it stores to
 *     (tack_launch.private_memory): Tack allocated it, not exportable,
 *     and never handed it out (DLPack, the array interfaces);
 *   - no other launch with atomics runs in this process meanwhile, on any
 *     thread: every launch of a kernel with atomics registers in one
 *     process-wide word, those with locked atomics together (a count),
 *     one with plain atomics alone (-1). A plain launch only tries: when
 *     the word is not free, or a locked launch is waiting, it runs with
 *     locked atomics instead, so it never waits and never keeps waiting
 *     launches out for long. A locked launch that finds a plain one waits
 *     for it to end.
 * Not per array: a kernel may reach memory through a static array of its
 * own or an address passed as an integer, and a word per process costs
 * one uncontended compare-and-swap a launch.
 *
 * What the other layers hold of this, since each is what that layer
 * knows: the kernel layer finds that a kernel uses atomics (kernel.c),
 * sets tack_launch.private_memory (toolchain.h) from
 * tack_buffer_is_private (internal.h), and loads the "_plain" entry into
 * tack_kernel_code.host_plain (cache.c); code generation (cpu.c) writes
 * the plain copy of the kernel and its entry; the counts behind
 * tack_kernel_atomic_runs are core's per-thread counters (internal.h).
 * The registry's fast paths (locked_begin, locked_end) are inline in
 * cpu.h, since a one-index launch pays them. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "cpu.h"

/* >= 0: launches running with locked atomics; -1: one runs with plain atomics. */
atomic_long cpu_atomics_users;
/* Launches with locked atomics waiting for a plain one to end. */
static atomic_int atomics_waiting;
static pthread_mutex_t atomics_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t atomics_free = PTHREAD_COND_INITIALIZER;
pthread_once_t atomics_once = PTHREAD_ONCE_INIT;

/* The fork child has only the forking thread, which was in no launch: the
 * launches the word counted belong to threads that are gone. */
static void atomics_after_fork_child(void)
{
    atomic_store(&cpu_atomics_users, 0);
    atomic_store(&atomics_waiting, 0);
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    memcpy(&atomics_lock, &m, sizeof m);
    memcpy(&atomics_free, &c, sizeof c);
}

void atomics_register_fork(void) { pthread_atfork(NULL, NULL, atomics_after_fork_child); }

/* 1 if this thread may now run plain atomics, alone. */
static int plain_begin(void)
{
    long none = 0;
    return !atomic_load_explicit(&atomics_waiting, memory_order_seq_cst) &&
           atomic_compare_exchange_strong_explicit(&cpu_atomics_users, &none, -1, memory_order_seq_cst,
                                                   memory_order_relaxed);
}

static void plain_end(void)
{
    /* The store publishes the launch's plain stores to the next launch
     * that registers; a waiter that counted itself before it is woken. */
    atomic_store_explicit(&cpu_atomics_users, 0, memory_order_seq_cst);
    if (atomic_load_explicit(&atomics_waiting, memory_order_seq_cst)) {
        pthread_mutex_lock(&atomics_lock);
        pthread_cond_broadcast(&atomics_free);
        pthread_mutex_unlock(&atomics_lock);
    }
}

#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
void cpu_locked_wait(void)
{
    /* Counted first, so that no plain launch starts from now on. */
    atomic_fetch_add_explicit(&atomics_waiting, 1, memory_order_seq_cst);
    uint64_t t0 = now_ns();
    long v = atomic_load_explicit(&cpu_atomics_users, memory_order_seq_cst);
    int waited = 0;
    for (int i = 0;; i++) {
        if (v >= 0) {
            if (atomic_compare_exchange_weak_explicit(&cpu_atomics_users, &v, v + 1, memory_order_seq_cst,
                                                      memory_order_seq_cst))
                break;
            continue;
        }
        waited = 1;
        if ((i & 63) == 63 && now_ns() - t0 > SPIN_NS) {
            pthread_mutex_lock(&atomics_lock);
            while (atomic_load_explicit(&cpu_atomics_users, memory_order_seq_cst) < 0)
                pthread_cond_wait(&atomics_free, &atomics_lock);
            pthread_mutex_unlock(&atomics_lock);
        } else {
            cpu_relax();
        }
        v = atomic_load_explicit(&cpu_atomics_users, memory_order_seq_cst);
    }
    atomic_fetch_sub_explicit(&atomics_waiting, 1, memory_order_seq_cst);
    if (waited)
        tack_count_add(TACK_COUNT_LOCKED_WAITS, 1);
}

int cpu_atomics_serial_begin(const struct job *j, int plain_ok)
{
    int plain = plain_ok && j->plain && plain_begin();
    if (j->plain && plain_ok)
        tack_count_add(plain ? TACK_COUNT_PLAIN_RUNS : TACK_COUNT_PLAIN_REFUSED, 1);
    if (!plain && j->atomics)
        locked_begin();
    return plain;
}

void cpu_atomics_serial_end(const struct job *j, int plain)
{
    if (plain)
        plain_end();
    else if (j->atomics)
        locked_end();
}

void tack_kernel_atomic_runs(long *plain, long *refused, long *waited)
{
    if (plain)
        *plain = tack_count_total(TACK_COUNT_PLAIN_RUNS);
    if (refused)
        *refused = tack_count_total(TACK_COUNT_PLAIN_REFUSED);
    if (waited)
        *waited = tack_count_total(TACK_COUNT_LOCKED_WAITS);
}
