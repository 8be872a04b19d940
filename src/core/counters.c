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

#if defined(__SANITIZE_ADDRESS__)
#define TACK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TACK_ASAN 1
#endif
#endif
#include <malloc.h>
#ifdef TACK_ASAN
#include <sanitizer/asan_interface.h>
/* The whole record (ASan's usable size is the size asked for), so that a
 * stale read of any field of a held record is reported as one of freed
 * memory would be; the count is read past the poison (tack_ref_peek). */
static void hold_poison(void *p) { ASAN_POISON_MEMORY_REGION(p, malloc_usable_size(p)); }
static void hold_unpoison(void *p) { ASAN_UNPOISON_MEMORY_REGION(p, malloc_usable_size(p)); }
#else
static void hold_poison(void *p) { (void)p; }
static void hold_unpoison(void *p) { (void)p; }
#endif

struct counts {
    atomic_long n[TACK_COUNT_KINDS];
    struct counts *next_all;  /* every record, for the readers */
    struct counts *next_free; /* records whose thread has exited */
    /* The thread's quarantine (tack_handle_free): the records it freed
     * last, `nheld` of them from the oldest at `first`, `held_bytes` in
     * all. Handed on with the record when the thread exits, so a record
     * stays held for the same number of frees whoever makes them, and
     * nothing is freed at a thread's exit. */
    void *held[TACK_QUARANTINE];
    size_t held_size[TACK_QUARANTINE];
    size_t held_bytes;
    unsigned first, nheld;
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

/* Frees the oldest record c holds. */
static void release_oldest(struct counts *c)
{
    unsigned i = c->first;
    void *old = c->held[i];
    c->held[i] = NULL;
    c->held_bytes -= c->held_size[i];
    c->first = (i + 1) % TACK_QUARANTINE;
    c->nheld--;
    hold_unpoison(old);
    free(old);
}

/* Holds `record` in c's quarantine and frees the oldest ones it displaces,
 * by count or by bytes: a few stores, and the frees the records would have
 * had anyway. The byte bound keeps a thread that releases many kernels (a
 * record of several KiB each) from holding megabytes. */
static void hold(struct counts *c, void *record)
{
    size_t size = malloc_usable_size(record);
    while (c->nheld && (c->nheld == TACK_QUARANTINE || c->held_bytes + size > TACK_QUARANTINE_BYTES))
        release_oldest(c);
    hold_poison(record);
    unsigned i = (c->first + c->nheld) % TACK_QUARANTINE;
    c->held[i] = record;
    c->held_size[i] = size;
    c->held_bytes += size;
    c->nheld++;
}

#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
static void handle_free_first(void *record)
{
    struct counts *c = first_record();
    /* No record to hold it in (out of memory): freed at once, as before. */
    if (c)
        hold(c, record);
    else
        free(record);
}

void tack_handle_free(void *record)
{
    struct counts *c = mine;
    if (c)
        hold(c, record);
    else
        handle_free_first(record);
}

void tack_count_free(enum tack_count_kind kind, void *record)
{
    struct counts *c = mine;
    if (c) {
        add_to(c, kind, -1);
        hold(c, record);
        return;
    }
    tack_count_add(kind, -1);
    tack_handle_free(record);
}
