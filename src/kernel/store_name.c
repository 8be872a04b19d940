/* The store's names: a digest of everything that decides a piece of
 * code, remembered per source so that a kernel built again is not hashed
 * again. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"

/* The names already worked out in this process: a new Kernel of a
 * source loaded before (one per call of a function that builds its kernel,
 * say) would otherwise hash its whole generated source again, most of what
 * such a build costs. An entry says that everything else the name depends
 * on (the prefix's digest) and this source give this name. The sources
 * kept are bounded in bytes, the oldest going first, so that a process
 * making kernels of endless distinct or large sources keeps at most
 * NAME_MEMO_BYTES of them. Used only when its lock is free at once: a
 * child forked while another thread held it goes without, and a thread
 * that would wait hashes instead. */
struct name_memo {
    struct name_memo *next;
    char prefix[65], hex[65];
    size_t len;
    char source[];
};

#define NAME_MEMO_BYTES ((size_t)16 << 20)

static struct name_memo *name_memo_oldest, *name_memo_newest;
static size_t name_memo_bytes;
static pthread_mutex_t name_memo_lock = PTHREAD_MUTEX_INITIALIZER;

/* The name remembered for this prefix and source, into hex; 0 if none. */
static int name_memo_find(const char *prefix, const char *source, size_t len, char hex[65])
{
    if (pthread_mutex_trylock(&name_memo_lock) != 0)
        return 0;
    int found = 0;
    for (const struct name_memo *m = name_memo_oldest; m && !found; m = m->next)
        if (m->len == len && !strcmp(m->prefix, prefix) && !memcmp(m->source, source, len)) {
            memcpy(hex, m->hex, 65);
            found = 1;
        }
    pthread_mutex_unlock(&name_memo_lock);
    return found;
}

/* Remembers a name, forgetting the oldest past the bound; out of memory
 * or with the lock taken it is simply not remembered. */
static void name_memo_add(const char *prefix, const char *source, size_t len, const char *hex)
{
    if (len > NAME_MEMO_BYTES)
        return;
    struct name_memo *m = malloc(sizeof *m + len + 1);
    if (!m)
        return;
    memcpy(m->prefix, prefix, sizeof m->prefix);
    memcpy(m->hex, hex, sizeof m->hex);
    m->len = len;
    memcpy(m->source, source, len + 1);
    m->next = NULL;
    if (pthread_mutex_trylock(&name_memo_lock) != 0) {
        free(m);
        return;
    }
    while (name_memo_oldest && name_memo_bytes + len > NAME_MEMO_BYTES) {
        struct name_memo *gone = name_memo_oldest;
        name_memo_oldest = gone->next;
        if (!name_memo_oldest)
            name_memo_newest = NULL;
        name_memo_bytes -= gone->len;
        free(gone);
    }
    if (name_memo_newest)
        name_memo_newest->next = m;
    else
        name_memo_oldest = m;
    name_memo_newest = m;
    name_memo_bytes += len;
    pthread_mutex_unlock(&name_memo_lock);
}

void tack_store_name(const char *backend, const struct tack_compile *job, char *out, size_t cap)
{
    tack_sha256 h;
    tack_sha256_init(&h);
    tack_sha256_field(&h, "tack " TACK_VERSION_STRING);
    tack_sha256_field(&h, backend);
    tack_sha256_field(&h, tack_code_kind_name(job->kind));
    tack_sha256_field(&h, job->key);
    tack_sha256_field(&h, job->options ? job->options->text : "");
    /* All but the source, digested: what a remembered name was for. */
    char prefix[65], hex[65];
    tack_sha256 all_but_source = h;
    tack_sha256_hex(&all_but_source, prefix);
    size_t len = strlen(job->source);
    if (!name_memo_find(prefix, job->source, len, hex)) {
        tack_sha256_field(&h, job->source);
        tack_sha256_hex(&h, hex);
        name_memo_add(prefix, job->source, len, hex);
    }
    snprintf(out, cap, "%s-%s.%s", backend, hex, tack_code_kind_extension(job->kind));
}
