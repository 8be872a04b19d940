/* File code in the store: built into it through a backend's compile,
 * sealed, published, and loaded so that the file checked is the file the
 * dynamic loader maps. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "kernel.h"
#include "store.h"

/* Objects this process has verified, by name and by what identifies a
 * file's contents: any write changes its size or modification time, a
 * chmod, chown, rename or touch its change time. An object loaded again
 * (another kernel of the same source) is then checked for trust but not
 * read and hashed again. */
struct verified {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
    char name[96];
};
#define VERIFIED_KEPT 32
static struct verified verified_files[VERIFIED_KEPT];
static unsigned verified_next;
static pthread_mutex_t verified_lock = PTHREAD_MUTEX_INITIALIZER;

/* 0 for a name too long to remember. */
static int identity(const char *name, const struct stat *st, struct verified *v)
{
    memset(v, 0, sizeof *v);
    if (strlen(name) >= sizeof v->name)
        return 0;
    v->dev = st->st_dev;
    v->ino = st->st_ino;
    v->size = st->st_size;
    v->mtime = st->st_mtim;
    v->ctime = st->st_ctim;
    memcpy(v->name, name, strlen(name));
    return 1;
}

static int was_verified(const char *name, const struct stat *st)
{
    struct verified v;
    if (!identity(name, st, &v))
        return 0;
    int found = 0;
    pthread_mutex_lock(&verified_lock);
    for (unsigned i = 0; i < VERIFIED_KEPT && !found; i++)
        found = !memcmp(&verified_files[i], &v, sizeof v);
    pthread_mutex_unlock(&verified_lock);
    return found;
}

static void remember_verified(const char *name, const struct stat *st)
{
    struct verified v;
    if (!identity(name, st, &v))
        return;
    pthread_mutex_lock(&verified_lock);
    verified_files[verified_next++ % VERIFIED_KEPT] = v;
    pthread_mutex_unlock(&verified_lock);
}

/* The mapping of the running process that holds `addr` is of the file
 * `st` identifies (from /proc/self/maps). */
static int mapped_from(const void *addr, const struct stat *st)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return 0;
    char line[512];
    int found = 0, at_start = 1;
    uintptr_t a = (uintptr_t)addr;
    while (!found && fgets(line, sizeof line, f)) {
        /* Only the start of a line (a long path continues it). */
        int starts = at_start;
        at_start = strchr(line, '\n') != NULL;
        unsigned long lo, hi, ino;
        unsigned major, minor;
        if (!starts || sscanf(line, "%lx-%lx %*s %*x %x:%x %lu", &lo, &hi, &major, &minor, &ino) != 5)
            continue;
        if (a >= lo && a < hi)
            found = (ino == (unsigned long)st->st_ino && makedev(major, minor) == st->st_dev) ? 1 : -1;
    }
    fclose(f);
    return found == 1;
}

/* Handles this process has seen to be of a file, by its device and inode:
 * so that a loaded object answering to a reused descriptor's path is told
 * from the right one without reading /proc/self/maps (milliseconds). */
struct loaded_file {
    void *handle;
    dev_t dev;
    ino_t ino;
};
#define LOADED_KEPT 64
static struct loaded_file loaded_files[LOADED_KEPT];
static unsigned loaded_next;
static pthread_mutex_t loaded_lock = PTHREAD_MUTEX_INITIALIZER;

/* 1 when `h` was seen to be the file st identifies, 0 when seen to be
 * another, -1 when not seen. */
static int loaded_from(void *h, const struct stat *st)
{
    int seen = -1;
    pthread_mutex_lock(&loaded_lock);
    for (unsigned i = 0; i < LOADED_KEPT && seen < 0; i++)
        if (loaded_files[i].handle == h)
            seen = loaded_files[i].dev == st->st_dev && loaded_files[i].ino == st->st_ino;
    pthread_mutex_unlock(&loaded_lock);
    return seen;
}

static void remember_loaded(void *h, const struct stat *st)
{
    pthread_mutex_lock(&loaded_lock);
    unsigned slot = loaded_next % LOADED_KEPT;
    for (unsigned i = 0; i < LOADED_KEPT; i++)
        if (loaded_files[i].handle == h)
            slot = i;
    if (slot == loaded_next % LOADED_KEPT)
        loaded_next++;
    loaded_files[slot] = (struct loaded_file){h, st->st_dev, st->st_ino};
    pthread_mutex_unlock(&loaded_lock);
}

/* dlopen of the open file `fd` through /proc/self/fd: the file checked is
 * the file loaded. The dynamic loader answers a path it has seen before
 * with the object it loaded under it, and a descriptor's number is used
 * again once closed, so an object loaded through the same number earlier
 * and still loaded would be taken for this one. Asked first without
 * loading (RTLD_NOLOAD): no answer means no object has the name nor is of
 * the file, and the load that follows maps this descriptor's file (no
 * other can take the name while the descriptor is held); an answer is
 * used only once it is seen to be of this file, else the load is repeated
 * through another number. NULL with *why set on failure. */
static void *dlopen_fd(int fd, const struct stat *st, void **entry, const char **why)
{
    enum { TRIES = 8 };
    int held[TRIES], nheld = 0, use = fd;
    void *h = NULL;
    *why = NULL;
    for (int attempt = 0; attempt < TRIES && !h; attempt++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", use);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        int fresh = !h;
        if (fresh) {
            (void)dlerror();
            h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
        if (!h) {
            *why = dlerror();
            break;
        }
        *entry = dlsym(h, TACK_ENTRY_NAME);
        if (!*entry) {
            *why = "it has no " TACK_ENTRY_NAME;
            dlclose(h);
            h = NULL;
            break;
        }
        if (fresh || loaded_from(h, st) == 1 || mapped_from(*entry, st)) {
            remember_loaded(h, st);
            break;
        }
        dlclose(h);
        h = NULL;
        /* The old number stays taken while the next one is tried. */
        use = fcntl(fd, F_DUPFD_CLOEXEC, TACK_STORE_CHILD_FD + 1);
        if (use < 0) {
            *why = strerror(errno);
            break;
        }
        held[nheld++] = use;
        *why = "the dynamic loader gave another object for it";
    }
    for (int i = 0; i < nheld; i++)
        close(held[i]);
    return h;
}

/* Loads the cached object `name` after checking it is trusted, whole and
 * made for this key, from the one descriptor that is then loaded: what is
 * checked is what runs. TACK_ERUNTIME when it is missing or unfit (to be
 * rebuilt) or cannot be loaded. */
static tack_status load_object(int dirfd, const char *dir, const char *name, void **handle)
{
    struct stat st;
    int fd = tack_store_open_trusted(dirfd, name, &st);
    int ok = fd >= 0 && was_verified(name, &st);
    if (fd >= 0 && !ok) {
        char *data = tack_store_read_all(fd, (size_t)st.st_size);
        size_t payload;
        ok = data && tack_store_trailer_matches(name, data, (size_t)st.st_size, &payload);
        free(data);
    }
    if (!ok) {
        if (fd >= 0)
            close(fd);
        return tack_error_set(TACK_ERUNTIME,
                              "the compiled kernel %s/%s is missing or damaged, was built for another key, or is "
                              "not this user's to trust (owned by another user or writable by others); it was "
                              "rebuilt and is still refused: remove it",
                              dir, name);
    }
    tack_store_touch(fd);
    if (fstat(fd, &st) == 0)
        remember_verified(name, &st);
    void *sym = NULL;
    const char *why;
    void *h = dlopen_fd(fd, &st, &sym, &why);
    close(fd);
    if (!h)
        return tack_error_set(TACK_ERUNTIME, "cannot load the compiled kernel %s/%s: %s", dir, name,
                              why ? why : "?");
    *handle = h;
    return TACK_OK;
}

/* Writes the kernel's source as `name` in the cache directory.
 * TACK_ERUNTIME, saying why, when it cannot; nothing is then left. */
static tack_status write_source(int dirfd, const char *dir, const char *name, const char *source)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return tack_store_cannot_write(dir, name, errno);
    int ok = tack_store_write_all(fd, source, strlen(source));
    int err = errno;
    ok = (close(fd) == 0) && ok;
    if (!ok) {
        unlinkat(dirfd, name, 0);
        return tack_store_cannot_write(dir, name, err);
    }
    return TACK_OK;
}

/* Seals the compile's output `obj` with its trailer for `final` and
 * publishes it under that name. */
static tack_status publish(int dirfd, const char *dir, const char *obj, const char *final)
{
    if (!tack_store_seal(dirfd, obj, final)) {
        int err = errno;
        return tack_error_set(TACK_ERUNTIME, "cannot store the compiled kernel %s/%s: %s; %s", dir, obj,
                              strerror(err), tack_store_advice(err));
    }
    if (renameat(dirfd, obj, dirfd, final) != 0) {
        int err = errno;
        return tack_error_set(TACK_ERUNTIME, "cannot store the compiled kernel as %s/%s: %s; %s", dir, final,
                              strerror(err), tack_store_advice(err));
    }
    return TACK_OK;
}

/* Compiles job's source into the store as `final` (the backend's compile
 * writes a temporary file there, sealed with its trailer, then renamed),
 * and holds the store to its bound. On error nothing new is left in the
 * directory. */
static tack_status build_object(int dirfd, const char *dir, const char *final, struct tack_compile *job,
                                tack_status (*compile)(const struct tack_compile *, struct tack_kernel_code *),
                                struct tack_kernel_code *code)
{
    char src[96], obj[96], kept[160];
    tack_store_temp_name(src, sizeof src, ".c");
    char ext[16];
    snprintf(ext, sizeof ext, ".%s", tack_code_kind_extension(job->kind));
    tack_store_temp_name(obj, sizeof obj, ext);
    /* The generated source is kept beside its object, as
     * "<backend>-<hex>.c", for whoever wonders what was compiled. */
    snprintf(kept, sizeof kept, "%.*s.c", (int)(strrchr(final, '.') - final), final);
    tack_status st = write_source(dirfd, dir, src, job->source);
    if (st != TACK_OK)
        return st;
    job->dirfd = dirfd;
    job->source_file = src;
    job->output = obj;
    st = compile(job, code);
    if (st == TACK_OK)
        st = publish(dirfd, dir, obj, final);
    unlinkat(dirfd, obj, 0);
    if (st != TACK_OK || renameat(dirfd, src, dirfd, kept) != 0)
        unlinkat(dirfd, src, 0);
    if (st == TACK_OK) {
        uint64_t max;
        if (tack_store_max(&max) == TACK_OK)
            tack_store_evict(dirfd, final, max);
    }
    return st;
}

tack_status tack_store_object(const char *dir, const char *name, struct tack_compile *job,
                              tack_status (*compile)(const struct tack_compile *, struct tack_kernel_code *),
                              struct tack_kernel_code *code)
{
    /* The one descriptor every file of this build is reached through. */
    int dirfd = tack_store_open_dir(dir);
    if (dirfd < 0)
        return TACK_ERUNTIME;
    tack_status st = load_object(dirfd, dir, name, &code->object);
    if (st != TACK_OK) {
        /* Missing, damaged, built for another key, or not this user's:
         * built again, and the rename replaces what was there. */
        st = build_object(dirfd, dir, name, job, compile, code);
        if (st == TACK_OK)
            st = load_object(dirfd, dir, name, &code->object);
    }
    close(dirfd);
    return st;
}
