/* Live-object counters for leak tests, kept per thread.
 *
 * Every array, buffer and export changes a counter twice in its life; a
 * shared atomic would put a locked instruction on every DLPack crossing.
 * Each thread instead adds to a record of its own with plain (relaxed)
 * stores, and a reader sums the records. Records are never freed: a thread
 * that exits hands its record to the next thread that needs one, counts
 * and all, so the sums stay right however threads come and go, and the
 * number of records is the most threads ever alive at once. */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

struct counts {
    atomic_long n[TACK_COUNT_KINDS];
    struct counts *next_all;  /* every record, for the readers */
    struct counts *next_free; /* records whose thread has exited */
};

static struct counts *all_records, *free_records;
static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
/* The default (dynamic) TLS model, not initial-exec: initial-exec puts the
 * library's whole thread-local block into the small static reserve glibc
 * keeps for libraries loaded after start-up, and then a dlopened libtack
 * (a plugin, ctypes, beside the Python extension) can fail to load with
 * "cannot allocate memory in static TLS block". */
static _Thread_local struct counts *mine;
/* Used when no record can be had (out of memory): slower, still right. */
static atomic_long fallback[TACK_COUNT_KINDS];

static void thread_exit(void *p)
{
    struct counts *c = p;
    pthread_mutex_lock(&records_lock);
    c->next_free = free_records;
    free_records = c;
    pthread_mutex_unlock(&records_lock);
    /* A later destructor of this thread that releases a Tack object takes
     * a record again (and is handed to this one on its next exit). */
    mine = NULL;
}

static void make_key(void)
{
    if (pthread_key_create(&exit_key, thread_exit) != 0)
        exit_key = (pthread_key_t)-1;
}

/* A thread's first count: out of line, so that the path every count takes
 * saves no registers for it. */
#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
static struct counts *first_record(void)
{
    pthread_once(&key_once, make_key);
    pthread_mutex_lock(&records_lock);
    struct counts *c = free_records;
    if (c) {
        free_records = c->next_free;
    } else if ((c = calloc(1, sizeof *c)) != NULL) {
        c->next_all = all_records;
        all_records = c;
    }
    pthread_mutex_unlock(&records_lock);
    if (c && exit_key != (pthread_key_t)-1 && pthread_setspecific(exit_key, c) == 0)
        mine = c;
    return c;
}

/* Only this thread writes its record: load and store, no locked add. */
static inline void add_to(struct counts *c, enum tack_count_kind kind, long delta)
{
    long v = atomic_load_explicit(&c->n[kind], memory_order_relaxed);
    atomic_store_explicit(&c->n[kind], v + delta, memory_order_relaxed);
}

#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
static void count_add_first(enum tack_count_kind kind, long delta)
{
    struct counts *c = first_record();
    if (c)
        add_to(c, kind, delta);
    else
        atomic_fetch_add_explicit(&fallback[kind], delta, memory_order_relaxed);
}

void tack_count_add(enum tack_count_kind kind, long delta)
{
    struct counts *c = mine;
    if (c)
        add_to(c, kind, delta);
    else
        count_add_first(kind, delta);
}

long tack_count_total(enum tack_count_kind kind)
{
    long sum = atomic_load_explicit(&fallback[kind], memory_order_relaxed);
    pthread_mutex_lock(&records_lock);
    for (struct counts *c = all_records; c; c = c->next_all)
        sum += atomic_load_explicit(&c->n[kind], memory_order_relaxed);
    pthread_mutex_unlock(&records_lock);
    return sum;
}
