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

/* The objects this process loaded from the store and has not closed for
 * the last time, each with the file it was mapped from and the one name it
 * was loaded under. The dynamic loader answers a name it has seen with the
 * object it loaded under it, and a descriptor's number, hence the plain
 * /proc/self/fd/N, is used again once closed: so no name is used twice (a
 * count spelled into the path), and an object already loaded from the
 * file checked is loaded again under its own name, which then can answer
 * with nothing else. Unbounded: a program may hold any number of kernels. */
struct loaded_object {
    void *handle;
    dev_t dev;
    ino_t ino;
    unsigned long refs;
    char name[200];
};
static struct loaded_object *loaded;
static size_t nloaded, loaded_cap;
static unsigned long long names_made;
static pthread_mutex_t loaded_lock = PTHREAD_MUTEX_INITIALIZER;

/* /proc/self/fd/<fd> spelled the c-th way (c >= 1): the bits of c after its
 * leading 1 as path components before the number, "./" for a 1 and an
 * empty one ("/") for a 0. Every c gives another string, and every one
 * names the same descriptor. */
static void spell_fd(char *out, size_t cap, int fd, unsigned long long c)
{
    size_t used = (size_t)snprintf(out, cap, "/proc/self/fd/");
    int top = 63;
    while (top > 0 && !(c >> top))
        top--;
    for (int bit = top - 1; bit >= 0 && used + 3 < cap; bit--)
        used += (size_t)snprintf(out + used, cap - used, "%s", (c >> bit) & 1 ? "./" : "/");
    snprintf(out + used, cap - used, "%d", fd);
}

static struct loaded_object *loaded_find(void *h, const struct stat *st)
{
    for (size_t i = 0; i < nloaded; i++)
        if (h ? loaded[i].handle == h : (loaded[i].dev == st->st_dev && loaded[i].ino == st->st_ino))
            return &loaded[i];
    return NULL;
}

/* The object `h` of the file st identifies, loaded under `name` once more;
 * 0 out of memory (h is then closed). Under loaded_lock. */
static int loaded_add(void *h, const struct stat *st, const char *name)
{
    struct loaded_object *o = loaded_find(h, NULL);
    if (o) {
        o->refs++;
        return 1;
    }
    if (nloaded == loaded_cap) {
        size_t cap = loaded_cap ? 2 * loaded_cap : 16;
        struct loaded_object *grown = realloc(loaded, cap * sizeof *grown);
        if (!grown) {
            dlclose(h);
            return 0;
        }
        loaded = grown;
        loaded_cap = cap;
    }
    o = &loaded[nloaded++];
    *o = (struct loaded_object){.handle = h, .dev = st->st_dev, .ino = st->st_ino, .refs = 1};
    snprintf(o->name, sizeof o->name, "%s", name);
    return 1;
}

void tack_store_unload(void *h)
{
    pthread_mutex_lock(&loaded_lock);
    struct loaded_object *o = loaded_find(h, NULL);
    if (o && --o->refs == 0)
        *o = loaded[--nloaded];
    pthread_mutex_unlock(&loaded_lock);
    /* Once its name is forgotten: a load of the same file meanwhile takes a
     * new one, and the loader hands it this object until it is gone. */
    dlclose(h);
}

/* The object of the open file `fd` (st), loaded through /proc/self/fd: the
 * file checked is the file loaded. One already loaded from that file is
 * asked for under its own name without loading (RTLD_NOLOAD), which no
 * other object has. Else a name never used is asked first without loading:
 * no answer means no object has the name nor is of the file (another
 * loader in the process may have loaded any name), and the load that
 * follows maps this descriptor's file, or hands back an object of the same
 * file (the loader compares device and inode): no other can take the name
 * while the descriptor is held. An answer is used once seen to be of this
 * file (/proc/self/maps), else the name is another's and the next one is
 * tried. NULL with *why set on failure. */
static void *dlopen_fd(int fd, const struct stat *st, void **entry, const char **why)
{
    enum { TRIES = 16 };
    void *h = NULL;
    char name[sizeof loaded->name];
    *why = "the dynamic loader has an object under every name tried for it";
    pthread_mutex_lock(&loaded_lock);
    struct loaded_object *o = loaded_find(NULL, st);
    if (o) {
        h = dlopen(o->name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (h && h != o->handle) {
            dlclose(h);
            h = NULL;
        }
        if (h)
            snprintf(name, sizeof name, "%s", o->name);
    }
    for (int attempt = 0; attempt < TRIES && !h; attempt++) {
        spell_fd(name, sizeof name, fd, ++names_made);
        h = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (h) {
            /* Rare, so the slow look is affordable: an object of this file
             * the loader kept (one it may not unload), else another's. */
            void *sym = dlsym(h, TACK_ENTRY_NAME);
            if (sym && mapped_from(sym, st))
                break;
            dlclose(h);
            h = NULL;
            continue;
        }
        (void)dlerror();
        h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            *why = dlerror();
            break;
        }
    }
    if (h) {
        *entry = dlsym(h, TACK_ENTRY_NAME);
        if (!*entry) {
            *why = "it has no " TACK_ENTRY_NAME;
            dlclose(h);
            h = NULL;
        } else if (!loaded_add(h, st, name)) {
            *why = "out of memory";
            h = NULL;
        }
    }
    pthread_mutex_unlock(&loaded_lock);
    return h;
}

/* Loads the object open as `fd` (st as tack_store_open_trusted filled it;
 * -1 for none), stored as `name`, after checking it is trusted, whole and
 * made for this key, from the one descriptor that is then loaded: what is
 * checked is what runs. Closes fd. When it is missing or unfit (to be
 * built) *unfit is set and no message; else TACK_ERUNTIME when it cannot
 * be loaded. */
static tack_status load_from(int fd, struct stat *st, const char *dir, const char *name, void **handle, int *unfit)
{
    int ok = fd >= 0 && was_verified(name, st);
    if (fd >= 0 && !ok) {
        char *data = tack_store_read_all(fd, (size_t)st->st_size);
        size_t payload;
        ok = data && tack_store_trailer_matches(name, data, (size_t)st->st_size, &payload);
        free(data);
    }
    *unfit = !ok;
    if (!ok) {
        if (fd >= 0)
            close(fd);
        return TACK_ERUNTIME;
    }
    tack_store_touch(fd);
    if (fstat(fd, st) == 0)
        remember_verified(name, st);
    void *sym = NULL;
    const char *why;
    void *h = dlopen_fd(fd, st, &sym, &why);
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
 * publishes it under that name, keeping it open (*held, -1 when it is not
 * this user's to trust; *st as tack_store_open_trusted fills it): another
 * process holding the store to its bound may remove it from the directory
 * before it is loaded, and the file just built is then loaded all the
 * same. */
static tack_status publish(int dirfd, const char *dir, const char *obj, const char *final, int *held,
                           struct stat *st)
{
    if (!tack_store_seal(dirfd, obj, final)) {
        int err = errno;
        return tack_error_set(TACK_ERUNTIME, "cannot store the compiled kernel %s/%s: %s; %s", dir, obj,
                              strerror(err), tack_store_advice(err));
    }
    *held = tack_store_open_trusted(dirfd, obj, st);
    if (renameat(dirfd, obj, dirfd, final) != 0) {
        int err = errno;
        if (*held >= 0)
            close(*held);
        *held = -1;
        return tack_error_set(TACK_ERUNTIME, "cannot store the compiled kernel as %s/%s: %s; %s", dir, final,
                              strerror(err), tack_store_advice(err));
    }
    return TACK_OK;
}

/* Compiles job's source into the store as `final` (the backend's compile
 * writes a temporary file there, sealed with its trailer, then renamed),
 * and holds the store to its bound; the file stays open as *held (see
 * publish). On error nothing new is left in the directory. */
static tack_status build_object(int dirfd, const char *dir, const char *final, struct tack_compile *job,
                                tack_status (*compile)(const struct tack_compile *, struct tack_kernel_code *),
                                struct tack_kernel_code *code, int *held, struct stat *sb)
{
    char src[96], obj[96], kept[160];
    *held = -1;
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
        st = publish(dirfd, dir, obj, final, held, sb);
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
    struct stat sb;
    int unfit, fd = tack_store_open_trusted(dirfd, name, &sb);
    tack_status st = load_from(fd, &sb, dir, name, &code->object, &unfit);
    if (unfit) {
        /* Missing, damaged, built for another key, or not this user's:
         * built again, and the rename replaces what was there. */
        st = build_object(dirfd, dir, name, job, compile, code, &fd, &sb);
        unfit = 0;
        if (st == TACK_OK)
            st = load_from(fd, &sb, dir, name, &code->object, &unfit);
        if (unfit)
            st = tack_error_set(TACK_ERUNTIME,
                                "the kernel just compiled as %s/%s is refused: it changed after it was sealed, or "
                                "is not this user's to trust (owned by another user or writable by others); see "
                                "what the C compiler (TACK_CC) does with the files it writes",
                                dir, name);
    }
    close(dirfd);
    return st;
}
