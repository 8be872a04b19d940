/* The figures behind the cpu backend's scheduling constants (src/backend/
 * cpu/cpu.h): how long the pool's workers take to join a launch while they
 * poll and once asleep, what timing a run costs, and what PROBE indices of
 * saxpy take. Built against the pool alone, from the repository root:
 *
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc/core bench/cpu_pool.c \
 *      src/backend/cpu/pool.c -lpthread -o /tmp/cpu_pool && /tmp/cpu_pool
 *
 * Medians and quartiles, since a shared machine's outliers say more about
 * its other users than about the pool. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../src/backend/cpu/cpu.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* One index that spins until a worker has joined (or 10 ms), so that the
 * dispatch's latency is the join time. */
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

static void joins(struct pool *p, const char *label, int samples, long pause_ns)
{
    uint64_t t[201];
    void *args[1] = {p};
    for (int i = 0; i < samples; i++) {
        if (pause_ns) {
            struct timespec pause = {0, pause_ns};
            nanosleep(&pause, NULL);
        }
        int helped;
        t[i] = cpu_pool_dispatch(p, wait_for_join, 0, 1, NULL, args, &helped);
    }
    qsort(t, (size_t)samples, sizeof *t, cmp_u64);
    printf("%-34s median %8.2f us  quartiles %.2f .. %.2f us  (%d launches)\n", label, (double)t[samples / 2] / 1e3,
           (double)t[samples / 4] / 1e3, (double)t[3 * samples / 4] / 1e3, samples);
}

static void saxpy(int64_t n, float a, const float *x, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = a * x[i] + y[i];
}

int main(void)
{
    struct pool *p = cpu_pool_get();
    if (!p) {
        printf("no pool: one thread only\n");
        return 0;
    }
    printf("threads %d; the pool's own start-up measure: hot %.2f us, cold %.2f us\n", cpu_pool_threads(),
           (double)atomic_load(&p->hot_ns) / 1e3, (double)atomic_load(&p->cold_ns) / 1e3);
    joins(p, "join, workers polling", 201, 0);
    joins(p, "join, workers asleep (2 x SPIN_NS)", 41, 2 * SPIN_NS);

    enum { CLOCKS = 1000000 };
    uint64_t t0 = now_ns(), sink = 0;
    for (int i = 0; i < CLOCKS; i++)
        sink += now_ns();
    uint64_t t1 = now_ns();
    printf("two clock reads (a timed run)      %8.1f ns\n", 2.0 * (double)(t1 - t0) / CLOCKS);

    static float x[PROBE], y[PROBE];
    for (int i = 0; i < PROBE; i++)
        x[i] = (float)i, y[i] = 1.0f;
    uint64_t best = UINT64_MAX;
    for (int r = 0; r < 10000; r++) {
        uint64_t s = now_ns();
        saxpy(PROBE, 2.0f, x, y);
        uint64_t e = now_ns();
        __asm__ __volatile__("" : : "r"(y) : "memory");
        if (e - s < best)
            best = e - s;
    }
    printf("PROBE (%d) indices of saxpy, best   %8.1f ns (clock reads included)\n", PROBE, (double)best);
    return (int)(sink & 0);
}
