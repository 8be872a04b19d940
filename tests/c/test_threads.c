/* The C API from eight threads at once: exports of one shared array,
 * imports of those exports and of hand-built producer tensors, reshapes,
 * and releases and deleter calls made by a different thread from the one
 * that made the object. Every producer deleter runs exactly once, every
 * count ends where it started, every thread keeps its own error message.
 *
 * TACK_THREADS_ITERATIONS sets the rounds per thread (default 10000); the
 * stress run builds this file with ThreadSanitizer and runs it longer. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tack/tack.h"

#define THREADS 8
#define POOL 256

static tack_device *cpu;
static tack_array *shared; /* f32 (1024,), exported by every thread */
static atomic_int failures;

#define FAIL(...)                                                                                              \
    do {                                                                                                       \
        fprintf(stderr, __VA_ARGS__);                                                                          \
        fputc('\n', stderr);                                                                                   \
        atomic_fetch_add(&failures, 1);                                                                        \
    } while (0)

/* ------------------------------------------------------------- hand-offs */

enum item_kind { ITEM_ARRAY, ITEM_LEGACY, ITEM_VERSIONED };

struct item {
    enum item_kind kind;
    void *p;
};

static struct {
    pthread_mutex_t lock;
    struct item items[POOL];
    int n;
} pool = {PTHREAD_MUTEX_INITIALIZER, {{0, 0}}, 0};

static void drop(struct item it)
{
    if (it.kind == ITEM_ARRAY) {
        tack_array_release(it.p);
    } else if (it.kind == ITEM_LEGACY) {
        DLManagedTensor *m = it.p;
        m->deleter(m);
    } else {
        DLManagedTensorVersioned *m = it.p;
        m->deleter(m);
    }
}

/* Leaves the item for another thread; drops it here when the pool is full. */
static void give(struct item it)
{
    pthread_mutex_lock(&pool.lock);
    int kept = pool.n < POOL;
    if (kept)
        pool.items[pool.n++] = it;
    pthread_mutex_unlock(&pool.lock);
    if (!kept)
        drop(it);
}

/* Takes the item at a pseudo-random place and drops it on this thread. */
static void take(uint32_t r)
{
    struct item it;
    int have = 0;
    pthread_mutex_lock(&pool.lock);
    if (pool.n) {
        int i = (int)(r % (uint32_t)pool.n);
        it = pool.items[i];
        pool.items[i] = pool.items[--pool.n];
        have = 1;
    }
    pthread_mutex_unlock(&pool.lock);
    if (have)
        drop(it);
}

/* ------------------------------------------------------------- producer */

/* A producer tensor whose deleter counts its calls and frees it. */
struct produced {
    DLManagedTensorVersioned m;
    int64_t shape[2];
    float data[12];
    atomic_int *calls;
};

static void produced_deleter(DLManagedTensorVersioned *self)
{
    struct produced *p = (struct produced *)self;
    if (atomic_fetch_add(p->calls, 1) != 0)
        FAIL("a producer deleter ran twice");
    free(p);
}

static DLManagedTensorVersioned *produce(atomic_int *calls, int read_only)
{
    struct produced *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->m.version.major = DLPACK_MAJOR_VERSION;
    p->m.version.minor = DLPACK_MINOR_VERSION;
    p->m.deleter = produced_deleter;
    p->m.flags = read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
    p->m.dl_tensor.data = p->data;
    p->m.dl_tensor.device = (DLDevice){.device_type = kDLCPU, .device_id = 0};
    p->m.dl_tensor.ndim = 2;
    p->m.dl_tensor.dtype = (DLDataType){.code = kDLFloat, .bits = 32, .lanes = 1};
    p->shape[0] = 3;
    p->shape[1] = 4;
    p->m.dl_tensor.shape = p->shape;
    for (int i = 0; i < 12; i++)
        p->data[i] = (float)i;
    p->calls = calls;
    return &p->m;
}

/* ------------------------------------------------------------- worker */

struct worker {
    int index;
    long rounds;
    atomic_int *calls; /* one counter per produced tensor */
    long produced;
};

static uint32_t step(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    uint32_t seed = 0x9e3779b9u * (uint32_t)(w->index + 1);
    char name[32];
    for (long r = 0; r < w->rounds; r++) {
        uint32_t op = step(&seed) % 8;
        if (op < 3) {
            /* export the shared array; import the export; reshape it */
            tack_array *in = NULL, *view = NULL;
            if (op == 0) {
                DLManagedTensor *m = NULL;
                if (tack_array_to_dlpack(shared, &m) != TACK_OK)
                    FAIL("export failed: %s", tack_last_error());
                else if (tack_array_from_dlpack(m, NULL, NULL, &in) != TACK_OK)
                    FAIL("import of an export failed: %s", tack_last_error());
            } else {
                DLManagedTensorVersioned *m = NULL;
                if (tack_array_to_dlpack_versioned(shared, &m) != TACK_OK)
                    FAIL("export failed: %s", tack_last_error());
                else if (op == 2) {
                    give((struct item){ITEM_VERSIONED, m}); /* someone else deletes it */
                    continue;
                } else if (tack_array_from_dlpack_versioned(m, cpu, NULL, &in, NULL) != TACK_OK)
                    FAIL("import of an export failed: %s", tack_last_error());
            }
            if (!in)
                continue;
            if (tack_array_data(in) != tack_array_data(shared))
                FAIL("an import of an export moved the data");
            int64_t shape[2] = {32, -1};
            if (tack_array_reshape(in, 2, shape, &view) != TACK_OK)
                FAIL("reshape failed: %s", tack_last_error());
            if (step(&seed) & 1) {
                tack_array_release(in);
                give((struct item){ITEM_ARRAY, view});
            } else {
                give((struct item){ITEM_ARRAY, in});
                tack_array_release(view);
            }
        } else if (op < 5) {
            /* import a producer's tensor; hand its views to other threads */
            long k = w->produced++;
            DLManagedTensorVersioned *m = produce(&w->calls[k], op == 4);
            tack_array *in = NULL, *view = NULL;
            int called = 0;
            if (!m) {
                FAIL("out of memory");
                continue;
            }
            if (tack_array_from_dlpack_versioned(m, NULL, cpu, &in, &called) != TACK_OK) {
                FAIL("import of a producer tensor failed: %s", tack_last_error());
                m->deleter(m);
                continue;
            }
            if (tack_array_writable(in) != (op != 4))
                FAIL("writability does not follow the producer's flag");
            int64_t flat[1] = {-1};
            if (tack_array_reshape(in, 1, flat, &view) != TACK_OK)
                FAIL("reshape failed: %s", tack_last_error());
            give((struct item){ITEM_ARRAY, in});
            give((struct item){ITEM_ARRAY, view});
        } else if (op < 7) {
            take(step(&seed));
        } else {
            /* the failing thread's own message, whatever the others do */
            snprintf(name, sizeof name, "no-such-backend-%d", w->index);
            tack_device *d;
            if (tack_device_open(name, NULL, 0, &d) != TACK_EVALUE)
                FAIL("a bad device name was accepted");
            else if (!strstr(tack_last_error(), name))
                FAIL("thread %d read another thread's error: %s", w->index, tack_last_error());
            if (tack_device_open("cpu", NULL, 0, &d) != TACK_OK || d != cpu)
                FAIL("the cpu device is not one device across threads");
            tack_device_release(d);
        }
    }
    return NULL;
}

static void test_eight_threads(void)
{
    long rounds = 10000;
    const char *env = getenv("TACK_THREADS_ITERATIONS");
    if (env && atol(env) > 0)
        rounds = atol(env);
    long arrays0 = tack_array_live_count(), buffers0 = tack_buffer_live_count(),
         exports0 = tack_dlpack_live_exports();
    CHECK_OK(tack_device_open("cpu", NULL, 0, &cpu));
    int64_t shape[1] = {1024};
    CHECK_OK(tack_array_empty(cpu, TACK_F32, 1, shape, 0, &shared));

    struct worker w[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){i, rounds, calloc((size_t)rounds, sizeof(atomic_int)), 0};
        CHECK(w[i].calls != NULL);
    }
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    while (pool.n)
        take(0);

    long produced = 0, once = 0;
    for (int i = 0; i < THREADS; i++) {
        for (long k = 0; k < w[i].produced; k++)
            once += atomic_load(&w[i].calls[k]) == 1;
        produced += w[i].produced;
        free(w[i].calls);
    }
    printf("%d threads x %ld rounds: %ld producer tensors\n", THREADS, rounds, produced);
    CHECK(produced > 0);
    CHECK(once == produced); /* every producer deleter ran exactly once */
    CHECK(atomic_load(&failures) == 0);
    CHECK(tack_dlpack_live_exports() == exports0);
    tack_array_release(shared);
    tack_device_release(cpu);
    CHECK(tack_array_live_count() == arrays0);
    CHECK(tack_buffer_live_count() == buffers0);
}

int main(void)
{
    RUN(test_eight_threads);
    CHECK_DONE();
}
