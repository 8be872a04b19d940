/* Host kernels: the system C compiler, a cache of shared objects on disk,
 * dlopen. The cache is shared by every process of the user, so each file
 * appears under its final name only complete (written under a private
 * temporary name, then renamed): two processes compiling the same kernel at
 * once both succeed, and the second rename replaces a file with an
 * identical one.
 *
 * What the cache holds is code this process will run, so nothing in it is
 * trusted on sight. Every file ends in a trailer recording the size and
 * SHA-256 of what precedes it, written with the file and published by the
 * same rename, and a file is used only when the trailer matches: a file cut
 * short (a full disk, a killed writer, a crash before the data reached the
 * disk) or damaged is rebuilt instead of crashing dlopen. A file is used
 * only when this user owns it and nobody else can write it, and the cache
 * directory only when the same holds for it and no one else can replace it
 * (as ssh treats its keys): a directory others can write is refused, so
 * that nobody can plant code under the name a kernel's hash predicts.
 *
 * The directory is opened once, after that check, and checked again
 * through its descriptor; every file is then created, renamed, read and
 * loaded relative to that descriptor (never through its path again, which
 * a link changed meanwhile could send elsewhere), the compiler reaches it
 * as /proc/self/fd/N, and an object is loaded through /proc/self/fd of the
 * very descriptor its trailer was checked on. The trailer also binds the
 * file to its key, so an object under another kernel's name is rebuilt. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kernel.h"
#include "store.h"

/* The advice that goes with a file operation that failed with `err`: a
 * process out of descriptors or a full disk is not helped by another cache
 * directory. */
const char *tack_store_advice(int err)
{
    if (err == EMFILE || err == ENFILE)
        return "the process has no file descriptor free (too many open files): close some, or raise the limit "
               "(ulimit -n)";
    if (err == ENOSPC || err == EDQUOT)
        return "the disk is full: free some space, or lower TACK_CACHE_MAX";
    if (err == ENOMEM)
        return "the system is out of memory";
    return "set TACK_CACHE_DIR to a writable directory";
}

tack_status tack_store_cannot_write(const char *dir, const char *name, int err)
{
    return tack_error_set(TACK_ERUNTIME, "cannot write %s/%s in the kernel cache: %s; %s", dir, name, strerror(err),
                          tack_store_advice(err));
}

/* Creates the directories of `path` that are missing: the cache itself
 * private (0700), those above it as mkdir -p would but never writable by
 * others. */
static tack_status mkdirs(char *path)
{
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != 0)
            continue;
        char c = *p;
        *p = 0;
        int r = mkdir(path, c ? 0755 : 0700);
        int err = errno;
        *p = c;
        if (r != 0 && err != EEXIST)
            return tack_error_set(TACK_ERUNTIME, "cannot create the kernel cache directory %s: %s; %s", path,
                                  strerror(err), tack_store_advice(err));
        if (!c)
            return TACK_OK;
    }
}

static tack_status refuse_dir(const char *dir, const char *why)
{
    return tack_error_set(TACK_ERUNTIME,
                          "the kernel cache directory %s is not private: %s, so another user could put code there "
                          "that this process would run. Use a private one: set TACK_CACHE_DIR to a directory "
                          "that you own and only you can write (mkdir -m 700 DIR), or chmod go-w it",
                          dir, why);
}

/* Why a directory of this mode and owner is not private enough to hold the
 * cache itself, in why; 0 when it is. */
static int not_private(const struct stat *st, char *why, size_t cap)
{
    uid_t me = geteuid();
    if (st->st_uid != me) {
        snprintf(why, cap, "it belongs to uid %u, not to you (uid %u)", (unsigned)st->st_uid, (unsigned)me);
        return 1;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, cap, "others can write it (mode %04o)", (unsigned)(st->st_mode & 07777));
        return 1;
    }
    return 0;
}

/* The directory, and every one above it, must keep other users out: the
 * cache itself this user's and writable by nobody else; those above it
 * this user's or root's, and writable by others only when sticky (/tmp),
 * where others cannot rename what is not theirs. The resolved path goes
 * to real (PATH_MAX bytes). */
static tack_status check_private(const char *dir, char *real)
{
    char why[PATH_MAX + 128];
    if (!realpath(dir, real))
        return tack_error_set(TACK_ERUNTIME, "cannot resolve the kernel cache directory %s: %s; set TACK_CACHE_DIR",
                              dir, strerror(errno));
    uid_t me = geteuid();
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
        return tack_error_set(TACK_ERUNTIME, "the kernel cache directory %s is not a directory; set TACK_CACHE_DIR",
                              dir);
    if (not_private(&st, why, sizeof why))
        return refuse_dir(dir, why);
    char above[PATH_MAX];
    memcpy(above, real, strlen(real) + 1);
    for (char *slash = strrchr(above, '/'); slash; slash = strrchr(above, '/')) {
        if (slash == above)
            slash[1] = 0; /* the root itself, last */
        else
            *slash = 0;
        if (stat(above, &st) != 0)
            return tack_error_set(TACK_ERUNTIME, "cannot check %s, above the kernel cache directory %s: %s", above,
                                  dir, strerror(errno));
        int foreign = st.st_uid != me && st.st_uid != 0;
        int open_to_others = (st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX);
        if (foreign || open_to_others) {
            snprintf(why, sizeof why, "%s above it %s", above,
                     foreign ? "belongs to another user" : "can be written by others and is not sticky");
            return refuse_dir(dir, why);
        }
        if (slash == above)
            break;
    }
    return TACK_OK;
}

/* The cache's size bound when TACK_CACHE_MAX says none. */
#define CACHE_MAX_DEFAULT ((uint64_t)1 << 30)

/* The bound on the cache's size in bytes from TACK_CACHE_MAX (a number of
 * bytes, with an optional K, M or G suffix counted in 1024s; 0: no bound),
 * else CACHE_MAX_DEFAULT. TACK_ERUNTIME, naming the variable, for a value
 * that is not such a size; *bytes is then the default. */
tack_status tack_store_max(uint64_t *bytes)
{
    *bytes = CACHE_MAX_DEFAULT;
    const char *text = getenv("TACK_CACHE_MAX");
    if (!text || !*text)
        return TACK_OK;
    const char *p = text;
    while (*p == ' ' || *p == '\t')
        p++;
    uint64_t n = 0;
    int digits = 0, overflow = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        overflow |= n > (UINT64_MAX - 9) / 10;
        n = n * 10 + (uint64_t)(*p - '0');
    }
    unsigned shift = 0;
    switch (*p) {
    case 'K': case 'k': shift = 10; p++; break;
    case 'M': case 'm': shift = 20; p++; break;
    case 'G': case 'g': shift = 30; p++; break;
    default: break;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    if (!digits || *p || overflow || n > (UINT64_MAX >> shift))
        return tack_error_set(TACK_ERUNTIME,
                              "TACK_CACHE_MAX=%s is not a size: set it to the most bytes the kernel cache may hold, "
                              "with an optional K, M or G suffix (counted in 1024s; for example 512M or 2G), 0 for "
                              "no bound, or unset it for the default of 1G",
                              text);
    *bytes = n << shift;
    return TACK_OK;
}

tack_status tack_cache_dir(char *out, size_t cap, int *unsafe)
{
    *unsafe = 0;
    /* A bound that cannot be read is the user's to fix, as an unsafe
     * directory is: refused before anything is compiled or stored. */
    uint64_t max;
    if (tack_store_max(&max) != TACK_OK) {
        *unsafe = 1;
        return TACK_ERUNTIME;
    }
    const char *dir = getenv("TACK_CACHE_DIR");
    int n;
    if (dir && *dir) {
        n = snprintf(out, cap, "%s", dir);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home) {
            struct passwd *pw = getpwuid(getuid());
            home = pw ? pw->pw_dir : NULL;
        }
        if (!home)
            return tack_error_set(TACK_ERUNTIME, "no home directory for the kernel cache; set TACK_CACHE_DIR");
        n = snprintf(out, cap, "%s/.cache/tack", home);
    }
    if (n < 0 || (size_t)n >= cap - 80)
        return tack_error_set(TACK_ERUNTIME, "the kernel cache directory's path is too long; set TACK_CACHE_DIR");
    while (n > 1 && out[n - 1] == '/')
        out[--n] = 0;
    tack_status st = mkdirs(out);
    if (st != TACK_OK)
        return st;
    char real[PATH_MAX];
    st = check_private(out, real);
    *unsafe = st != TACK_OK;
    return st;
}

/* The cache directory `dir` (a path as tack_cache_dir made it) opened once
 * and checked through the descriptor itself: every file of the cache is
 * then reached relative to it, so that a link or a directory above it
 * changed after the check cannot redirect what is written or loaded. The
 * descriptor is above CHILD_DIR_FD, close-on-exec. -1 with the thread's
 * message set when the directory is not private or cannot be opened. */
int tack_store_open_dir(const char *dir)
{
    char real[PATH_MAX], why[PATH_MAX + 128];
    if (check_private(dir, real) != TACK_OK)
        return -1;
    int fd = open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        tack_error_set(TACK_ERUNTIME, "cannot open the kernel cache directory %s: %s; %s", dir, strerror(err),
                       tack_store_advice(err));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
        close(fd);
        tack_error_set(TACK_ERUNTIME, "the kernel cache directory %s is not a directory; set TACK_CACHE_DIR", dir);
        return -1;
    }
    if (not_private(&st, why, sizeof why)) {
        close(fd);
        refuse_dir(dir, why);
        return -1;
    }
    if (fd <= TACK_STORE_CHILD_FD) {
        /* A compiler run receives it as CHILD_DIR_FD, which must not be
         * the descriptor itself (dup2 onto itself keeps close-on-exec). */
        int high = fcntl(fd, F_DUPFD_CLOEXEC, TACK_STORE_CHILD_FD + 1);
        int err = errno;
        close(fd);
        if (high < 0) {
            tack_error_set(TACK_ERUNTIME, "cannot open the kernel cache directory %s: %s; %s", dir, strerror(err),
                           tack_store_advice(err));
            return -1;
        }
        fd = high;
    }
    return fd;
}

/* The trailer every cached file ends with: "tack-cache-2 ", the size of the
 * bytes before it as 20 decimal digits, a space, the SHA-256 of the file's
 * name in the cache, a space, the SHA-256 of the bytes before it, and a
 * newline. The name is the digest of the file's whole key (source, backend,
 * compiler, options, target), so the trailer binds the contents to that
 * key: a file copied or renamed under another key's name does not match
 * and is rebuilt. Plain text, so that the same bytes mean the same on any
 * host. */
#define TRAILER_TAG "tack-cache-2 "
#define TRAILER_SIZE (sizeof TRAILER_TAG - 1 + 20 + 1 + 64 + 1 + 64 + 1)
/* Larger cached files are not read (no kernel's code comes near). */
#define MAX_CACHED ((size_t)1 << 30)

static void make_trailer(const char *name, const void *data, size_t size, char out[TRAILER_SIZE + 1])
{
    tack_sha256 h;
    char key[65], hex[65];
    tack_sha256_init(&h);
    tack_sha256_update(&h, name, strlen(name));
    tack_sha256_hex(&h, key);
    tack_sha256_init(&h);
    tack_sha256_update(&h, data, size);
    tack_sha256_hex(&h, hex);
    snprintf(out, TRAILER_SIZE + 1, "%s%020llu %s %s\n", TRAILER_TAG, (unsigned long long)size, key, hex);
}

/* The size of what precedes a valid trailer for `name` at the end of
 * data[0, len); 0 when there is none or it does not match. */
int tack_store_trailer_matches(const char *name, const char *data, size_t len, size_t *payload)
{
    if (len < TRAILER_SIZE)
        return 0;
    size_t size = len - TRAILER_SIZE;
    char want[TRAILER_SIZE + 1];
    make_trailer(name, data, size, want);
    if (memcmp(data + size, want, TRAILER_SIZE) != 0)
        return 0;
    *payload = size;
    return 1;
}

/* Opens `name` in the cache directory if this user may trust it: a
 * regular file, not a link (nor a FIFO to block on), that the user owns
 * and nobody else can write. -1 otherwise. */
int tack_store_open_trusted(int dirfd, const char *name, struct stat *st)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || st->st_uid != geteuid() ||
        (st->st_mode & (S_IWGRP | S_IWOTH)) || st->st_size < 0 || (uint64_t)st->st_size > MAX_CACHED) {
        close(fd);
        return -1;
    }
    return fd;
}

char *tack_store_read_all(int fd, size_t size)
{
    char *data = malloc(size + 1);
    size_t done = 0;
    while (data && done < size) {
        ssize_t n = pread(fd, data + done, size - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(data);
            return NULL;
        }
        done += (size_t)n;
    }
    return data;
}

/* Marks a cached file used now, for the least-recently-used eviction (its
 * modification time, as ccache keeps it). Best effort: a file that cannot
 * be touched is only evicted sooner. */
void tack_store_touch(int fd) { (void)futimens(fd, NULL); }

/* Splits a cached file's path into its directory, opened and checked, and
 * its name; -1 with the thread's message set when the directory is not
 * usable. */
static int open_parent(const char *path, char *dir, size_t cap, const char **name)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path || (size_t)(slash - path) >= cap) {
        tack_error_set(TACK_ERUNTIME, "%s is not a path in the kernel cache", path);
        return -1;
    }
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = 0;
    *name = slash + 1;
    return tack_store_open_dir(dir);
}

/* A cached file's payload when the file is trusted and whole (malloc'd,
 * NUL added; *size excludes both it and the trailer). NULL when missing,
 * not trusted or damaged. */
char *tack_cache_load(const char *path, size_t *size)
{
    char dir[PATH_MAX];
    const char *name;
    int dirfd = open_parent(path, dir, sizeof dir, &name);
    if (dirfd < 0)
        return NULL;
    struct stat st;
    int fd = tack_store_open_trusted(dirfd, name, &st);
    close(dirfd);
    if (fd < 0)
        return NULL;
    char *data = tack_store_read_all(fd, (size_t)st.st_size);
    size_t payload = 0;
    if (data && !tack_store_trailer_matches(name, data, (size_t)st.st_size, &payload)) {
        free(data);
        data = NULL;
    }
    if (data) {
        tack_store_touch(fd);
        data[payload] = 0;
        *size = payload;
    }
    close(fd);
    return data;
}

static atomic_uint temp_counter;

/* A name no other thread or process uses in the cache directory. */
void tack_store_temp_name(char *out, size_t cap, const char *suffix)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, cap, "tmp-%ld-%u-%lx%s", (long)getpid(), atomic_fetch_add(&temp_counter, 1),
             (unsigned long)ts.tv_nsec, suffix);
}

int tack_store_write_all(int fd, const void *data, size_t size)
{
    const char *p = data;
    while (size) {
        ssize_t n = write(fd, p, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        p += n;
        size -= (size_t)n;
    }
    return 1;
}

/* ---- the size bound ----------------------------------------------------------
 *
 * Past TACK_CACHE_MAX, the files used longest ago go first, as ccache
 * evicts: each is marked used (touch) when it is loaded, and the bound is
 * enforced whenever a new file is stored. Only names Tack gives its own
 * files are counted or removed ("<kind>-<64 hex digits>.<ext>"), so a
 * TACK_CACHE_DIR shared with anything else loses nothing else. */

struct cached_entry {
    char *name;
    uint64_t size;
    struct timespec used;
};

static int is_cache_name(const char *name)
{
    const char *dash = strrchr(name, '-');
    if (!dash || dash == name)
        return 0;
    for (const char *p = name; p < dash; p++)
        if (!((*p >= 'a' && *p <= 'z') || *p == '_'))
            return 0;
    if (strspn(dash + 1, "0123456789abcdef") != 64 || dash[65] != '.' || !dash[66])
        return 0;
    return strspn(dash + 66, "abcdefghijklmnopqrstuvwxyz") == strlen(dash + 66);
}

/* A name temp_name gives: "tmp-<pid>-<count>-<hex>" and .c, .so or .part. */
static int is_temp_name(const char *name)
{
    if (strncmp(name, "tmp-", 4))
        return 0;
    const char *p = name + 4;
    size_t n = strspn(p, "0123456789");
    if (!n || p[n] != '-')
        return 0;
    p += n + 1;
    n = strspn(p, "0123456789");
    if (!n || p[n] != '-')
        return 0;
    p += n + 1;
    n = strspn(p, "0123456789abcdef");
    if (!n)
        return 0;
    p += n;
    return !strcmp(p, ".c") || !strcmp(p, ".so") || !strcmp(p, ".part");
}

static int older_first(const void *a, const void *b)
{
    const struct cached_entry *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    return (x->used.tv_nsec > y->used.tv_nsec) - (x->used.tv_nsec < y->used.tv_nsec);
}

/* A temporary file this old was left by a writer that died (a compile
 * has 600 s unless TACK_COMPILE_TIMEOUT says otherwise). */
#define STALE_TEMP_S (24 * 3600)

/* Removes the files used longest ago until the cache holds at most `max`
 * bytes (0: no bound), and temporary files left by writers that died;
 * never `keep` (the file just stored). Best effort: out of memory or
 * descriptors, nothing is removed this time. */
void tack_store_evict(int dirfd, const char *keep, uint64_t max)
{
    /* A description of its own: reading it moves no offset of dirfd's. */
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct cached_entry *all = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    int ok = 1;
    time_t stale = time(NULL) - STALE_TEMP_S;
    for (struct dirent *e; ok && (e = readdir(d));) {
        struct stat st;
        int temp = is_temp_name(e->d_name);
        if ((!temp && !is_cache_name(e->d_name)) || fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        if (temp) {
            if (st.st_mtim.tv_sec < stale)
                (void)unlinkat(dirfd, e->d_name, 0);
            continue;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            struct cached_entry *grown = realloc(all, ncap * sizeof *all);
            ok = grown != NULL;
            if (!ok)
                break;
            all = grown;
            cap = ncap;
        }
        all[n].name = strdup(e->d_name);
        ok = all[n].name != NULL;
        if (!ok)
            break;
        all[n].size = (uint64_t)st.st_size;
        all[n].used = st.st_mtim;
        total += all[n].size;
        n++;
    }
    closedir(d);
    if (ok && max && total > max) {
        qsort(all, n, sizeof *all, older_first);
        for (size_t i = 0; i < n && total > max; i++) {
            if (!strcmp(all[i].name, keep))
                continue;
            if (unlinkat(dirfd, all[i].name, 0) == 0 || errno == ENOENT)
                total -= all[i].size;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(all[i].name);
    free(all);
}

/* Writes `data` and its trailer as `name` in the cache directory through a
 * temporary name and a rename, then holds the cache to its bound.
 * TACK_ERUNTIME when it cannot be written, saying why; nothing is then
 * left under the temporary name and `name` is as it was. */
static tack_status store_at(int dirfd, const char *dir, const char *name, const void *data, size_t size)
{
    char tmp[96], trailer[TRAILER_SIZE + 1];
    tack_store_temp_name(tmp, sizeof tmp, ".part");
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return tack_store_cannot_write(dir, tmp, errno);
    make_trailer(name, data, size, trailer);
    int ok = tack_store_write_all(fd, data, size) && tack_store_write_all(fd, trailer, TRAILER_SIZE) && fchmod(fd, 0644) == 0;
    int err = errno;
    ok = (close(fd) == 0) && ok;
    if (!ok || renameat(dirfd, tmp, dirfd, name) != 0) {
        err = ok ? errno : err;
        unlinkat(dirfd, tmp, 0);
        return tack_store_cannot_write(dir, name, err);
    }
    uint64_t max;
    if (tack_store_max(&max) == TACK_OK)
        tack_store_evict(dirfd, name, max);
    return TACK_OK;
}

tack_status tack_cache_store(const char *dir, const char *path, const void *data, size_t size)
{
    char parent[PATH_MAX];
    const char *name;
    (void)dir; /* the path's own directory, checked again */
    int dirfd = open_parent(path, parent, sizeof parent, &name);
    if (dirfd < 0)
        return TACK_ERUNTIME;
    tack_status st = store_at(dirfd, parent, name, data, size);
    close(dirfd);
    return st;
}

/* Ends the compiler's output `tmp` with its trailer for `name`, and takes
 * from it any write permission the umask left for others, before it is
 * published. */
int tack_store_seal(int dirfd, const char *tmp, const char *name)
{
    int fd = openat(dirfd, tmp, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct stat st;
    char *data = NULL, trailer[TRAILER_SIZE + 1];
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 && (uint64_t)st.st_size <= MAX_CACHED &&
             (data = tack_store_read_all(fd, (size_t)st.st_size)) != NULL;
    if (ok) {
        make_trailer(name, data, (size_t)st.st_size, trailer);
        ok = tack_store_write_all(fd, trailer, TRAILER_SIZE) && fchmod(fd, 0644) == 0;
    }
    free(data);
    return (close(fd) == 0) && ok;
}

tack_status tack_kernel_cache_dir(char *out, size_t cap)
{
    TACK_PUBLIC_CALL();
    char dir[4096];
    int unsafe;
    tack_status st = tack_cache_dir(dir, sizeof dir, &unsafe);
    if (st != TACK_OK)
        return st;
    size_t len = strlen(dir);
    if (!out || len >= cap)
        return tack_error_set(TACK_EVALUE, "the kernel cache directory's path %s does not fit in %zu bytes", dir,
                              cap);
    memcpy(out, dir, len + 1);
    return TACK_OK;
}
