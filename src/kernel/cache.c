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
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../backend/host_cpu.h"
#include "kernel.h"

extern char **environ;

/* The thread's last compile log. A thread-local pointer alone would leak
 * the log of every thread that exits with one; the key's destructor frees
 * it at thread exit (free itself: it stays valid if this library is
 * unloaded first). */
static _Thread_local char *compile_log;
static pthread_key_t log_key;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_key_made;

static void make_log_key(void) { log_key_made = pthread_key_create(&log_key, free) == 0; }

const char *tack_kernel_compile_log(void) { return compile_log ? compile_log : ""; }

void tack_compile_log_set(const char *text, size_t len)
{
    pthread_once(&log_once, make_log_key);
    free(compile_log);
    compile_log = NULL;
    if (log_key_made)
        (void)pthread_setspecific(log_key, NULL);
    if (!text)
        return;
    compile_log = malloc(len + 1);
    if (compile_log) {
        memcpy(compile_log, text, len);
        compile_log[len] = 0;
        if (log_key_made)
            (void)pthread_setspecific(log_key, compile_log);
    }
}

tack_status tack_compile_failed(const char *log, size_t log_len, const char *fmt, ...)
{
    char head[768];
    va_list ap;
    va_start(ap, fmt);
    int hl = vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    if (hl < 0)
        hl = 0;
    if ((size_t)hl >= sizeof head)
        hl = (int)sizeof head - 1;
    if (!log)
        log_len = 0;
    size_t total = (size_t)hl + log_len;
    char *full = malloc(total + 1);
    if (!full) {
        tack_compile_log_set(NULL, 0);
        return tack_error_set(TACK_ECOMPILE, "%s%.*s", head, (int)(log_len > INT_MAX ? INT_MAX : log_len),
                              log_len ? log : "");
    }
    memcpy(full, head, (size_t)hl);
    if (log_len)
        memcpy(full + hl, log, log_len);
    full[total] = 0;
    tack_compile_log_set(full, total);
    tack_status st = tack_error_set(TACK_ECOMPILE, "%s", full);
    free(full);
    return st;
}

/* The advice that goes with a file operation that failed with `err`: a
 * process out of descriptors or a full disk is not helped by another cache
 * directory. */
static const char *advice(int err)
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

static tack_status cannot_write(const char *dir, const char *name, int err)
{
    return tack_error_set(TACK_ERUNTIME, "cannot write %s/%s in the kernel cache: %s; %s", dir, name, strerror(err),
                          advice(err));
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
                                  strerror(err), advice(err));
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
static tack_status cache_max(uint64_t *bytes)
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
    if (cache_max(&max) != TACK_OK) {
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

/* The descriptor a compiler run reaches the cache directory by, as
 * /proc/self/fd/CHILD_DIR_FD: the directory Tack checked, whatever its
 * path names by then. */
#define CHILD_DIR_FD 3

/* The cache directory `dir` (a path as tack_cache_dir made it) opened once
 * and checked through the descriptor itself: every file of the cache is
 * then reached relative to it, so that a link or a directory above it
 * changed after the check cannot redirect what is written or loaded. The
 * descriptor is above CHILD_DIR_FD, close-on-exec. -1 with the thread's
 * message set when the directory is not private or cannot be opened. */
static int open_dir_checked(const char *dir)
{
    char real[PATH_MAX], why[PATH_MAX + 128];
    if (check_private(dir, real) != TACK_OK)
        return -1;
    int fd = open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        tack_error_set(TACK_ERUNTIME, "cannot open the kernel cache directory %s: %s; %s", dir, strerror(err),
                       advice(err));
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
    if (fd <= CHILD_DIR_FD) {
        /* A compiler run receives it as CHILD_DIR_FD, which must not be
         * the descriptor itself (dup2 onto itself keeps close-on-exec). */
        int high = fcntl(fd, F_DUPFD_CLOEXEC, CHILD_DIR_FD + 1);
        int err = errno;
        close(fd);
        if (high < 0) {
            tack_error_set(TACK_ERUNTIME, "cannot open the kernel cache directory %s: %s; %s", dir, strerror(err),
                           advice(err));
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
static int trailer_matches(const char *name, const char *data, size_t len, size_t *payload)
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
static int open_trusted(int dirfd, const char *name, struct stat *st)
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

static char *read_all(int fd, size_t size)
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
static void touch(int fd) { (void)futimens(fd, NULL); }

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
    return open_dir_checked(dir);
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
    int fd = open_trusted(dirfd, name, &st);
    close(dirfd);
    if (fd < 0)
        return NULL;
    char *data = read_all(fd, (size_t)st.st_size);
    size_t payload = 0;
    if (data && !trailer_matches(name, data, (size_t)st.st_size, &payload)) {
        free(data);
        data = NULL;
    }
    if (data) {
        touch(fd);
        data[payload] = 0;
        *size = payload;
    }
    close(fd);
    return data;
}

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

static atomic_uint temp_counter;

/* A name no other thread or process uses in the cache directory. */
static void temp_name(char *out, size_t cap, const char *suffix)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, cap, "tmp-%ld-%u-%lx%s", (long)getpid(), atomic_fetch_add(&temp_counter, 1),
             (unsigned long)ts.tv_nsec, suffix);
}

static int write_all(int fd, const void *data, size_t size)
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
static void evict(int dirfd, const char *keep, uint64_t max)
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
    temp_name(tmp, sizeof tmp, ".part");
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return cannot_write(dir, tmp, errno);
    make_trailer(name, data, size, trailer);
    int ok = write_all(fd, data, size) && write_all(fd, trailer, TRAILER_SIZE) && fchmod(fd, 0644) == 0;
    int err = errno;
    ok = (close(fd) == 0) && ok;
    if (!ok || renameat(dirfd, tmp, dirfd, name) != 0) {
        err = ok ? errno : err;
        unlinkat(dirfd, tmp, 0);
        return cannot_write(dir, name, err);
    }
    uint64_t max;
    if (cache_max(&max) == TACK_OK)
        evict(dirfd, name, max);
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
static int seal_object(int dirfd, const char *tmp, const char *name)
{
    int fd = openat(dirfd, tmp, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct stat st;
    char *data = NULL, trailer[TRAILER_SIZE + 1];
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 && (uint64_t)st.st_size <= MAX_CACHED &&
             (data = read_all(fd, (size_t)st.st_size)) != NULL;
    if (ok) {
        make_trailer(name, data, (size_t)st.st_size, trailer);
        ok = write_all(fd, trailer, TRAILER_SIZE) && fchmod(fd, 0644) == 0;
    }
    free(data);
    return (close(fd) == 0) && ok;
}

struct compiler {
    char *spec;  /* TACK_CC as given (or a compiler's name), split in place into argv; malloc'd */
    char **argv; /* argc words, then NULL; malloc'd */
    int argc;
    char path[4096]; /* argv[0] as run: found on PATH, or the interpreter that runs zig */
    struct stat st;
    /* What else tells this compiler from another that the key must: zig's
     * version, run by an interpreter whose file says nothing of it. */
    char identity[96];
    const char *display; /* its name in messages */
    char how[PATH_MAX + 160]; /* how it was chosen, for reports */
};

static void compiler_free(struct compiler *c)
{
    free(c->spec);
    free(c->argv);
    c->spec = NULL;
    c->argv = NULL;
    c->argc = 0;
}

static int is_blank(char ch) { return ch == ' ' || ch == '\t' || ch == '\n'; }

static int count_words(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        n += !is_blank(*p) && (p == s || is_blank(p[-1]));
    return n;
}

/* Splits `s` in place at blanks into words[0, n): every word, however
 * many (words has count_words(s) slots). */
static int split(char *s, char **words)
{
    int n = 0;
    char *save = NULL;
    for (char *p = strtok_r(s, " \t\n", &save); p; p = strtok_r(NULL, " \t\n", &save))
        words[n++] = p;
    return n;
}

/* c's spec and argv for `command`, every word of it. 0 out of memory. */
static int compiler_words(struct compiler *c, const char *command)
{
    c->spec = strdup(command);
    c->argv = c->spec ? calloc((size_t)count_words(command) + 1, sizeof *c->argv) : NULL;
    if (!c->argv) {
        compiler_free(c);
        return 0;
    }
    c->argc = split(c->spec, c->argv);
    return 1;
}

static int find_on_path(const char *name, char *out, size_t cap)
{
    if (strchr(name, '/')) {
        snprintf(out, cap, "%s", name);
        return access(out, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        snprintf(out, cap, "%.*s%s%s", (int)len, len ? path : ".", "/", name);
        if (access(out, X_OK) == 0)
            return 1;
        path += len + (colon ? 1 : 0);
    }
    return 0;
}

/* For the host's own instruction set (the cache key names the CPU), and
 * without errno from the math functions: a kernel cannot use errno (its
 * indices run on several threads at once, as on a GPU, which has none),
 * and setting it is what keeps sqrt a call instead of one instruction, in
 * a loop that would otherwise vectorise (an n-body step: 34 ms to 20).
 * Unrolled: a loop whose trip count only the data knows (a Mandelbrot
 * point's) took 11% less, an n-body step 5%, for 5 ms more compile.
 * Hidden by default, the kernel's own functions bind inside the object (a
 * helper named like a function already in the process, add or norm, is
 * still its own, and calls to it can be inlined) while what it declares
 * and does not define, printf or stderr from the C library, stays the
 * library's: `#pragma GCC visibility push(hidden)` would hide those
 * declarations too, and the link would fail. The entries say "default". */
#if defined(__x86_64__) || defined(__aarch64__)
static const char *const flags[] = {"-O3", "-march=native", "-fno-math-errno", "-funroll-loops", "-fPIC", "-shared",
                                    "-fvisibility=hidden"};
#else
static const char *const flags[] = {"-O3", "-fno-math-errno", "-funroll-loops", "-fPIC", "-shared",
                                    "-fvisibility=hidden"};
#endif

/* ---- running the compiler --------------------------------------------------
 *
 * A compiler is a program like any other input: it may hang (a compiler
 * reading a file on a dead network mount, a wrapper waiting for a licence
 * server, a TACK_CC that never exits). So it runs against a deadline on the
 * monotonic clock, in a process group of its own so that what it started
 * (cc1, as, ld, the shell's children) goes with it, and the wait lets the
 * calling thread's interrupt check run when a signal arrives. */

/* A compile's limit unless TACK_COMPILE_TIMEOUT says otherwise, and the
 * most a question such as `--version` may take. */
#define COMPILE_LIMIT_S 600
#define QUERY_LIMIT_S 10
/* While waiting, the interrupt check runs at least this often, since a
 * signal may have been delivered to another thread of the process, and a
 * compiler that has exited is noticed even though something it left
 * running still holds its output open. */
#define TICK_MS 100
/* A compiler stopped early gets SIGTERM first, which lets gcc and clang
 * delete their temporary files as they do on Ctrl-C; whatever of its
 * process group still runs this much later is killed. */
#define GRACE_MS 500
/* The most of a compiler's output that is kept. */
#define MAX_OUTPUT ((size_t)16 << 20)

static _Thread_local int (*interrupt_check)(void *context);
static _Thread_local void *interrupt_context;

void tack_kernel_set_interrupt(int (*interrupted)(void *context), void *context)
{
    interrupt_check = interrupted;
    interrupt_context = interrupted ? context : NULL;
}

static int interrupted_now(void) { return interrupt_check && interrupt_check(interrupt_context); }

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The limit on one compile in ns, -1 for none: TACK_COMPILE_TIMEOUT
 * seconds (0: none), else COMPILE_LIMIT_S. TACK_ERUNTIME for a value that
 * is not a number of seconds. */
static tack_status compile_limit(int64_t *ns)
{
    const char *text = getenv("TACK_COMPILE_TIMEOUT");
    *ns = (int64_t)COMPILE_LIMIT_S * 1000000000;
    if (!text || !*text)
        return TACK_OK;
    char *end;
    errno = 0;
    double s = strtod(text, &end);
    while (end != text && (*end == ' ' || *end == '\t'))
        end++;
    /* !(s >= 0) is also true of NaN; 1e9 s keeps the sum in range. */
    if (errno || end == text || *end || !(s >= 0) || s > 1e9)
        return tack_error_set(TACK_ERUNTIME,
                              "TACK_COMPILE_TIMEOUT=%s is not a number of seconds: set it to the longest a "
                              "kernel's compile may take (for example 600), 0 for no limit, or unset it for the "
                              "default of %d s",
                              text, COMPILE_LIMIT_S);
    *ns = s == 0 ? -1 : (int64_t)(s * 1e9) + 1;
    return TACK_OK;
}

/* A question's limit: QUERY_LIMIT_S, or the compile limit when that is
 * shorter (one that cannot be read leaves the question its own). */
static int64_t query_limit(void)
{
    int64_t compile, query = (int64_t)QUERY_LIMIT_S * 1000000000;
    if (compile_limit(&compile) != TACK_OK)
        return query;
    return compile >= 0 && compile < query ? compile : query;
}

/* "600 s", "0.5 s": a limit as TACK_COMPILE_TIMEOUT would say it. */
static void limit_text(int64_t ns, char *out, size_t cap) { snprintf(out, cap, "%.3g s", (double)ns / 1e9); }

/* How a run ended. */
enum run_end { RUN_EXITED, RUN_NOT_STARTED, RUN_TIMED_OUT, RUN_INTERRUPTED };

struct run_result {
    enum run_end end;
    int status;   /* RUN_EXITED: the exit status, 128 + the signal that ended it */
    int err;      /* RUN_NOT_STARTED: why (an errno) */
    char *output; /* standard output and error together, NUL-terminated, malloc'd; may be NULL */
    size_t output_len;
};

/* 1 once `pid` has exited, leaving it to be reaped (so that its process
 * group's number cannot be taken by another). A child that SIGCHLD's
 * disposition reaped already counts as exited. */
static int has_exited(pid_t pid)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0)
        return errno != EINTR;
    return info.si_pid == pid;
}

static void sleep_ms(int ms) { (void)poll(NULL, 0, ms); }

/* Ends the process group `pid` leads: SIGTERM, GRACE_MS for the leader to
 * go, then SIGKILL for everything of the group still there. */
static void stop_group(pid_t pid)
{
    (void)kill(-pid, SIGTERM);
    for (int waited = 0; waited < GRACE_MS && !has_exited(pid); waited += 5)
        sleep_ms(5);
    (void)kill(-pid, SIGKILL);
}

/* Waits for `pid`'s exit status. */
static int reap(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno == EINTR)
            continue;
        /* SIGCHLD ignored by the application: the child was reaped for us
         * and its status is lost; the output file tells. */
        return 0;
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* Appends what `fd` has to *r; 0 at end of file or on an error. */
static int take_output(int fd, struct run_result *r, size_t *cap)
{
    char sink[4096];
    for (;;) {
        char *into = sink;
        size_t room = sizeof sink;
        if (r->output_len + 4096 > *cap && *cap < MAX_OUTPUT) {
            size_t ncap = *cap ? *cap * 2 : 8192;
            char *nb = realloc(r->output, ncap);
            if (nb) {
                r->output = nb;
                *cap = ncap;
            }
        }
        /* Past what is kept (or out of memory) the rest is read and
         * dropped, so that the compiler never blocks on a full pipe. */
        if (r->output && r->output_len + 1 < *cap) {
            into = r->output + r->output_len;
            room = *cap - r->output_len - 1;
        }
        ssize_t got = read(fd, into, room);
        if (got > 0) {
            if (into != sink)
                r->output_len += (size_t)got;
            continue;
        }
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 1;
        return 0;
    }
}

/* Runs argv (argv[0] a path), collecting its standard output and error,
 * for at most limit_ns (-1: no limit). A run that passes its limit, or
 * whose wait the thread's interrupt check stops, has its process group
 * ended (stop_group) and reaped before this returns: no process of it is
 * left running, and none is left unreaped. A `dirfd` other than -1 (above
 * CHILD_DIR_FD) is the program's CHILD_DIR_FD, and stays open for what it
 * starts. */
static void run(char *const *argv, int64_t limit_ns, int dirfd, struct run_result *r)
{
    memset(r, 0, sizeof *r);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        r->end = RUN_NOT_STARTED;
        r->err = errno;
        return;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    if (dirfd >= 0)
        posix_spawn_file_actions_adddup2(&fa, dirfd, CHILD_DIR_FD);
    /* Its own process group, to be ended whole; no signal blocked, and the
     * signals that end it at their default, whatever this thread has (an
     * interpreter ignores SIGPIPE), so that SIGTERM lets it clean up. */
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGHUP);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int e = posix_spawn(&pid, argv[0], &fa, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (e != 0) {
        close(fds[0]);
        r->end = RUN_NOT_STARTED;
        r->err = e;
        return;
    }
    (void)fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    int64_t deadline = limit_ns < 0 ? -1 : now_ns() + limit_ns, next_check = now_ns() + (int64_t)TICK_MS * 1000000;
    size_t cap = 0;
    int reading = 1, pause = 1;
    r->end = RUN_EXITED;
    for (;;) {
        /* Exited with its output closed; or exited while something it
         * started holds its output open, which the wait need not outlast. */
        if (has_exited(pid)) {
            if (reading)
                (void)take_output(fds[0], r, &cap);
            break;
        }
        int ms = TICK_MS;
        if (!reading) {
            /* The output closed just before the exit: brief waits. */
            ms = pause;
            pause = pause < 16 ? pause * 2 : pause;
        }
        int64_t now = now_ns();
        if (deadline >= 0 && deadline - now <= 0) {
            r->end = RUN_TIMED_OUT;
            break;
        }
        if (deadline >= 0 && deadline - now < (int64_t)ms * 1000000)
            ms = (int)((deadline - now + 999999) / 1000000);
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int n = reading ? poll(&p, 1, ms) : poll(NULL, 0, ms);
        int signalled = n < 0 && errno == EINTR;
        if (n < 0 && !signalled)
            sleep_ms(ms); /* no poll (ENOMEM): wait all the same */
        if (signalled || now_ns() >= next_check) {
            next_check = now_ns() + (int64_t)TICK_MS * 1000000;
            if (interrupted_now()) {
                r->end = RUN_INTERRUPTED;
                break;
            }
        }
        if (n > 0 && reading)
            reading = take_output(fds[0], r, &cap);
    }
    close(fds[0]);
    if (r->end != RUN_EXITED)
        stop_group(pid);
    r->status = reap(pid);
    if (r->output)
        r->output[r->output_len] = 0;
}

/* Without a system C compiler, zig's serves: the ziglang package (pip
 * install tack-arrays[cc]) run as `<python> -P -m ziglang cc` by the
 * interpreter Tack runs in, which the Python extension names here; a C
 * program has none. zig's version, once an interpreter has shown it can run
 * zig, is kept for the process; a failure is not, so that a package
 * installed meanwhile serves the next compile. */
static char zig_python[PATH_MAX];
static char zig_version[64];
static pthread_mutex_t zig_lock = PTHREAD_MUTEX_INITIALIZER;

void tack_kernel_set_python(const char *executable)
{
    pthread_mutex_lock(&zig_lock);
    if (executable && strlen(executable) < sizeof zig_python)
        snprintf(zig_python, sizeof zig_python, "%s", executable);
    else
        zig_python[0] = 0;
    zig_version[0] = 0;
    pthread_mutex_unlock(&zig_lock);
}

/* The first line of `text`, without surrounding blanks, into out. */
static void first_line(const char *text, char *out, size_t cap)
{
    while (text && (*text == ' ' || *text == '\n' || *text == '\r' || *text == '\t'))
        text++;
    size_t n = text ? strcspn(text, "\r\n") : 0;
    while (n && (text[n - 1] == ' ' || text[n - 1] == '\t'))
        n--;
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), n ? text : "");
}

/* The last non-empty line of `text` (what an interpreter says last is why
 * it failed). */
static void last_line(const char *text, size_t len, char *out, size_t cap)
{
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
        len--;
    size_t start = len;
    while (start && text[start - 1] != '\n')
        start--;
    snprintf(out, cap, "%.*s", (int)(len - start < cap ? len - start : cap - 1), text + start);
}

/* Why a question put to a program (`asked`: its argument) got no answer:
 * it could not be run, ran out of time or was interrupted, or what it said
 * last. */
static void run_trouble(const struct run_result *r, const char *asked, char *out, size_t cap)
{
    char limit[32];
    limit_text(query_limit(), limit, sizeof limit);
    if (r->end == RUN_NOT_STARTED)
        snprintf(out, cap, "%s", strerror(r->err));
    else if (r->end == RUN_TIMED_OUT)
        snprintf(out, cap, "no answer to %s within %s; it was stopped", asked, limit);
    else if (r->end == RUN_INTERRUPTED)
        snprintf(out, cap, "interrupted while it answered %s", asked);
    else if (r->output && r->output_len)
        last_line(r->output, r->output_len, out, cap);
    else
        snprintf(out, cap, "no output");
}

/* -P: python -m puts the working directory first on the module path, so a
 * directory holding a "ziglang" of someone else's would run in its place. */
static char arg_safe[] = "-P", arg_m[] = "-m", arg_ziglang[] = "ziglang", arg_cc[] = "cc",
            arg_version[] = "version";

/* zig's C compiler as c, if the interpreter can run it; 0 with why (if
 * there is an interpreter) otherwise. */
static int find_zig(struct compiler *c, char *why, size_t cap)
{
    char python[sizeof zig_python], version[sizeof zig_version];
    pthread_mutex_lock(&zig_lock);
    memcpy(python, zig_python, sizeof python);
    memcpy(version, zig_version, sizeof version);
    pthread_mutex_unlock(&zig_lock);
    why[0] = 0;
    if (!python[0])
        return 0;
    if (!version[0]) {
        char *argv[] = {python, arg_safe, arg_m, arg_ziglang, arg_version, NULL};
        struct run_result r;
        run(argv, query_limit(), -1, &r);
        int ok = r.end == RUN_EXITED && r.status == 0 && r.output;
        if (ok)
            first_line(r.output, version, sizeof version);
        if (!ok || version[0] < '0' || version[0] > '9') {
            char said[256];
            run_trouble(&r, "version", said, sizeof said);
            snprintf(why, cap, "%s -P -m ziglang cannot run zig (%s)", python, said);
            free(r.output);
            return 0;
        }
        free(r.output);
        pthread_mutex_lock(&zig_lock);
        if (!strcmp(zig_python, python))
            memcpy(zig_version, version, sizeof version);
        pthread_mutex_unlock(&zig_lock);
    }
    c->argv = calloc(6, sizeof *c->argv);
    if (!c->argv) {
        snprintf(why, cap, "out of memory");
        return 0;
    }
    snprintf(c->path, sizeof c->path, "%s", python);
    if (stat(c->path, &c->st) != 0)
        memset(&c->st, 0, sizeof c->st);
    c->argv[0] = c->path;
    c->argv[1] = arg_safe;
    c->argv[2] = arg_m;
    c->argv[3] = arg_ziglang;
    c->argv[4] = arg_cc;
    c->argc = 5;
    snprintf(c->identity, sizeof c->identity, "zig %s", version);
    c->display = "zig cc";
    snprintf(c->how, sizeof c->how,
             "no C compiler on PATH: zig %s's, from the ziglang package, run as %s -P -m ziglang cc", version,
             python);
    return 1;
}

/* Compilers a system has, by the names they are installed under. */
static const char *const system_compilers[] = {"cc", "gcc", "clang", NULL};

static tack_status out_of_memory(void)
{
    return tack_error_set(TACK_ENOMEM, "out of memory choosing the C compiler for kernels");
}

/* The compiler host kernels are built with: TACK_CC (every word of it), a
 * system compiler on PATH, or zig's. On error nothing is left to free;
 * on success compiler_free releases c. */
static tack_status find_compiler(struct compiler *c)
{
    memset(c, 0, sizeof *c);
    const char *cc = getenv("TACK_CC");
    if (cc && *cc) {
        if (!compiler_words(c, cc))
            return out_of_memory();
        if (c->argc == 0 || !find_on_path(c->argv[0], c->path, sizeof c->path) || stat(c->path, &c->st) != 0) {
            compiler_free(c);
            return tack_error_set(TACK_ERUNTIME,
                                  "no C compiler found to build kernels for the cpu backend: '%s' (from TACK_CC) "
                                  "cannot be run. Set TACK_CC to a compiler command, e.g. TACK_CC=gcc or "
                                  "TACK_CC=/usr/bin/clang, or unset it to use the system's",
                                  cc);
        }
        c->display = c->argv[0];
        snprintf(c->how, sizeof c->how, "TACK_CC=%s", cc);
        return TACK_OK;
    }
    for (int i = 0; system_compilers[i]; i++) {
        if (!find_on_path(system_compilers[i], c->path, sizeof c->path) || stat(c->path, &c->st) != 0)
            continue;
        if (!compiler_words(c, system_compilers[i]))
            return out_of_memory();
        c->display = c->argv[0];
        snprintf(c->how, sizeof c->how, "%s on PATH", system_compilers[i]);
        return TACK_OK;
    }
    char why[600];
    if (find_zig(c, why, sizeof why))
        return TACK_OK;
    compiler_free(c);
    memset(c, 0, sizeof *c);
    return tack_error_set(TACK_ERUNTIME,
                          "no C compiler found to build kernels for the cpu backend: none of cc, gcc and clang is "
                          "on PATH%s%s. Install one (gcc or clang; Debian and Ubuntu: apt-get install gcc), or "
                          "zig's for Python: pip install tack-arrays[cc] (the ziglang package, in the environment "
                          "of the Python that runs Tack); or set TACK_CC to a compiler command",
                          why[0] ? ", and " : "", why);
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
        use = fcntl(fd, F_DUPFD_CLOEXEC, CHILD_DIR_FD + 1);
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
static tack_status load(int dirfd, const char *dir, const char *name, void **handle, struct tack_kernel_code *code)
{
    struct stat st;
    int fd = open_trusted(dirfd, name, &st);
    int ok = fd >= 0 && was_verified(name, &st);
    if (fd >= 0 && !ok) {
        char *data = read_all(fd, (size_t)st.st_size);
        size_t payload;
        ok = data && trailer_matches(name, data, (size_t)st.st_size, &payload);
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
    touch(fd);
    if (fstat(fd, &st) == 0)
        remember_verified(name, &st);
    void *sym = NULL;
    const char *why;
    void *h = dlopen_fd(fd, &st, &sym, &why);
    close(fd);
    if (!h)
        return tack_error_set(TACK_ERUNTIME, "cannot load the compiled kernel %s/%s: %s", dir, name,
                              why ? why : "?");
    /* The restrict variant is there only where restrict can matter, the
     * plain one only for a kernel with atomics. */
    void *rsym = dlsym(h, TACK_ENTRY_NAME "_restrict"), *psym = dlsym(h, TACK_ENTRY_NAME "_plain");
    *handle = h;
    /* dlsym returns an object pointer; POSIX guarantees the conversion. */
    memcpy(&code->host, &sym, sizeof sym);
    if (!rsym)
        rsym = sym;
    memcpy(&code->host_restrict, &rsym, sizeof rsym);
    memcpy(&code->host_plain, &psym, sizeof psym);
    return TACK_OK;
}

/* The compiler's command as it is run, less Tack's own arguments. */
static void command_of(const struct compiler *c, char *out, size_t cap)
{
    size_t used = (size_t)snprintf(out, cap, "%s", c->path);
    for (int i = 1; i < c->argc && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, " %s", c->argv[i]);
}

/* Writes the kernel's source as `name` in the cache directory.
 * TACK_ERUNTIME, saying why, when it cannot; nothing is then left. */
static tack_status write_source(int dirfd, const char *dir, const char *name, const char *source)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return cannot_write(dir, name, errno);
    int ok = write_all(fd, source, strlen(source));
    int err = errno;
    ok = (close(fd) == 0) && ok;
    if (!ok) {
        unlinkat(dirfd, name, 0);
        return cannot_write(dir, name, err);
    }
    return TACK_OK;
}

/* The compiler's command line for `src` into `obj` (names in the cache
 * directory, reached as /proc/self/fd/CHILD_DIR_FD): c's words, Tack's
 * flags, every word of TACK_CFLAGS, then the files. *paths holds what the
 * words point into. NULL out of memory. */
static char **compile_argv(const struct compiler *c, const char *src, const char *obj, char **paths)
{
    const char *cflags = getenv("TACK_CFLAGS");
    size_t nflags = sizeof flags / sizeof *flags, ncflags = cflags ? (size_t)count_words(cflags) : 0;
    size_t srclen = strlen(src), objlen = strlen(obj), dirlen = sizeof "/proc/self/fd/" + 16;
    size_t cfl = cflags ? strlen(cflags) + 1 : 1;
    char **argv = calloc((size_t)c->argc + nflags + ncflags + 5, sizeof *argv);
    char *room = malloc(cfl + 2 * dirlen + srclen + objlen + 2);
    if (!argv || !room) {
        free(argv);
        free(room);
        return NULL;
    }
    size_t n = 0;
    argv[n++] = (char *)c->path;
    for (int i = 1; i < c->argc; i++)
        argv[n++] = c->argv[i];
    for (size_t i = 0; i < nflags; i++)
        argv[n++] = (char *)flags[i];
    memcpy(room, cflags ? cflags : "", cfl);
    n += (size_t)split(room, argv + n);
    char *objpath = room + cfl, *srcpath = objpath + dirlen + objlen + 1;
    snprintf(objpath, dirlen + objlen + 1, "/proc/self/fd/%d/%s", CHILD_DIR_FD, obj);
    snprintf(srcpath, dirlen + srclen + 1, "/proc/self/fd/%d/%s", CHILD_DIR_FD, src);
    argv[n++] = "-o";
    argv[n++] = objpath;
    argv[n++] = srcpath;
    argv[n++] = "-lm";
    argv[n] = NULL;
    *paths = room;
    return argv;
}

/* Compiles `source` into the cache directory as `final`, sealed with its
 * trailer, and holds the cache to its bound. On error nothing new is left
 * in the directory. */
static tack_status compile_to(const struct compiler *c, const char *name, int dirfd, const char *dir,
                              const char *hex, const char *source, const char *final, int64_t limit_ns)
{
    char src[96], obj[96], kept[96];
    temp_name(src, sizeof src, ".c");
    temp_name(obj, sizeof obj, ".so");
    snprintf(kept, sizeof kept, "cpu-%s.c", hex);
    tack_status st = write_source(dirfd, dir, src, source);
    if (st != TACK_OK)
        return st;
    char *paths = NULL;
    char **argv = compile_argv(c, src, obj, &paths);
    if (!argv) {
        unlinkat(dirfd, src, 0);
        return tack_error_set(TACK_ENOMEM, "out of memory compiling kernel '%s'", name);
    }
    struct run_result r;
    run(argv, limit_ns, dirfd, &r);
    struct stat sb;
    int made = 0;
    const char *no_object = "missing";
    if (r.end == RUN_EXITED && r.status == 0 && fstatat(dirfd, obj, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
        made = S_ISREG(sb.st_mode) && sb.st_size > 0;
        no_object = "empty or not a file";
    }
    char command[1200], limit[32];
    command_of(c, command, sizeof command);
    limit_text(limit_ns, limit, sizeof limit);
    if (r.end == RUN_NOT_STARTED && (r.err == EMFILE || r.err == ENFILE)) {
        st = tack_error_set(TACK_ERUNTIME, "kernel '%s': cannot run the C compiler %s: %s; %s", name, c->path,
                            strerror(r.err), advice(r.err));
    } else if (r.end == RUN_NOT_STARTED) {
        st = tack_error_set(TACK_ERUNTIME,
                            "cannot run the C compiler %s: %s. Install one (gcc or clang) or set TACK_CC to a "
                            "compiler command",
                            c->path, strerror(r.err));
    } else if (r.end == RUN_TIMED_OUT) {
        st = tack_error_set(TACK_ERUNTIME,
                            "kernel '%s': the C compiler (%s) did not finish within its time limit of %s and was "
                            "stopped; nothing was cached. If it is only slow, set TACK_COMPILE_TIMEOUT to more "
                            "seconds (0: no limit); if it hangs, see what it waits for, or choose another with "
                            "TACK_CC",
                            name, command, limit);
    } else if (r.end == RUN_INTERRUPTED) {
        st = tack_error_set(TACK_ERUNTIME,
                            "kernel '%s': compiling was interrupted by a signal; the C compiler (%s) was stopped "
                            "and nothing was cached",
                            name, command);
    } else if (r.status != 0) {
        /* The message carries the start of the log; the whole of it is
         * kept for tack_kernel_compile_log(). */
        st = tack_compile_failed(r.output, r.output_len, "kernel '%s' failed to compile (%s exited with status %d):\n",
                                 name, c->display, r.status);
    } else if (!made) {
        /* The whole command, less the files' names in the cache. */
        char whole[2048];
        size_t used = 0, words = 0;
        while (argv[words])
            words++;
        for (size_t i = 0; i + 4 < words && used < sizeof whole; i++)
            used += (size_t)snprintf(whole + used, sizeof whole - used, "%s%s", i ? " " : "", argv[i]);
        st = tack_compile_failed(r.output, r.output_len,
                                 "kernel '%s': the C compiler %s exited with status 0 but produced no object (the "
                                 "file named after -o is %s); the command was %s -o <object> <source> -lm. Set "
                                 "TACK_CC to a C compiler that writes the file -o names%s",
                                 name, c->display, no_object, whole, r.output_len ? ". It said:\n" : "");
    } else if (!seal_object(dirfd, obj, final)) {
        int err = errno;
        st = tack_error_set(TACK_ERUNTIME, "cannot store the compiled kernel %s/%s: %s; %s", dir, obj,
                            strerror(err), advice(err));
    } else if (renameat(dirfd, obj, dirfd, final) != 0) {
        int err = errno;
        st = tack_error_set(TACK_ERUNTIME, "cannot store the compiled kernel as %s/%s: %s; %s", dir, final,
                            strerror(err), advice(err));
    }
    free(r.output);
    free(argv);
    free(paths);
    unlinkat(dirfd, obj, 0);
    /* The generated source stays beside its object, for whoever wonders
     * what was compiled. */
    if (st != TACK_OK || renameat(dirfd, src, dirfd, kept) != 0)
        unlinkat(dirfd, src, 0);
    if (st == TACK_OK) {
        uint64_t max;
        if (cache_max(&max) == TACK_OK)
            evict(dirfd, final, max);
    }
    return st;
}

/* The object names already worked out in this process: a new Kernel of a
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

/* tack_host_compile with the compiler chosen: every file of the build is
 * reached through one descriptor of the checked cache directory, closed
 * before this returns. */
static tack_status host_compile(const struct compiler *c, const char *name, const char *source, int64_t limit_ns,
                                void **handle, struct tack_kernel_code *code)
{
    char dir[4096];
    int unsafe;
    tack_status st = tack_cache_dir(dir, sizeof dir, &unsafe);
    if (st != TACK_OK)
        return st;
    /* The one descriptor every file of this build is reached through. */
    int dirfd = open_dir_checked(dir);
    if (dirfd < 0)
        return TACK_ERUNTIME;

    tack_sha256 h;
    tack_sha256_init(&h);
    tack_sha256_field(&h, "tack " TACK_VERSION_STRING " cpu");
    for (int i = 0; i < c->argc; i++)
        tack_sha256_field(&h, c->argv[i]);
    /* The compiler itself: an upgrade in place changes its size or time. */
    char ident[4400];
    snprintf(ident, sizeof ident, "%s %lld %lld.%09ld %s", c->path, (long long)c->st.st_size,
             (long long)c->st.st_mtim.tv_sec, (long)c->st.st_mtim.tv_nsec, c->identity);
    tack_sha256_field(&h, ident);
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        tack_sha256_field(&h, flags[i]);
    tack_sha256_field(&h, getenv("TACK_CFLAGS"));
    /* -march=native: code for this CPU, which another CPU sharing the
     * cache (a home directory across a cluster's nodes) may not run. */
    tack_sha256_field(&h, tack_host_cpu());
    /* All but the source, digested: what a remembered name was for. */
    char prefix[65], hex[65];
    tack_sha256 all_but_source = h;
    tack_sha256_hex(&all_but_source, prefix);
    size_t len = strlen(source);
    if (!name_memo_find(prefix, source, len, hex)) {
        tack_sha256_field(&h, source);
        tack_sha256_hex(&h, hex);
        name_memo_add(prefix, source, len, hex);
    }

    char final[96];
    snprintf(final, sizeof final, "cpu-%s.so", hex);
    st = load(dirfd, dir, final, handle, code);
    if (st != TACK_OK) {
        /* Missing, damaged, built for another key, or not this user's:
         * built again, and the rename replaces what was there. */
        st = compile_to(c, name, dirfd, dir, hex, source, final, limit_ns);
        if (st == TACK_OK)
            st = load(dirfd, dir, final, handle, code);
    }
    close(dirfd);
    return st;
}

tack_status tack_host_compile(const char *name, const char *source, void **handle, struct tack_kernel_code *code)
{
    /* Read first, so that a limit that cannot be read is refused whether
     * or not this kernel needs compiling. */
    int64_t limit_ns;
    tack_status st = compile_limit(&limit_ns);
    if (st != TACK_OK)
        return st;
    struct compiler c;
    st = find_compiler(&c);
    if (st != TACK_OK)
        return st;
    st = host_compile(&c, name, source, limit_ns, handle, code);
    compiler_free(&c);
    return st;
}

tack_status tack_kernel_cache_dir(char *out, size_t cap)
{
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

void tack_host_compiler_describe(tack_component_report *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "C compiler");
    struct compiler c;
    if (find_compiler(&c) != TACK_OK) {
        snprintf(out->note, sizeof out->note, "%s", tack_last_error());
        return;
    }
    out->found = 1;
    snprintf(out->note, sizeof out->note, "%.*s", (int)sizeof out->note - 1, c.how);
    /* The file that runs, through the links a system keeps (cc ->
     * /etc/alternatives/cc -> gcc-12), then the command's other words. */
    char real[PATH_MAX];
    size_t used = (size_t)snprintf(out->path, sizeof out->path, "%s", realpath(c.path, real) ? real : c.path);
    for (int i = 1; i < c.argc && used < sizeof out->path; i++)
        used += (size_t)snprintf(out->path + used, sizeof out->path - used, " %s", c.argv[i]);

    char **argv = calloc((size_t)c.argc + 2, sizeof *argv);
    if (!argv) {
        compiler_free(&c);
        snprintf(out->version, sizeof out->version, "(out of memory)");
        return;
    }
    int n = 0;
    argv[n++] = c.path;
    for (int i = 1; i < c.argc; i++)
        argv[n++] = c.argv[i];
    char dash_version[] = "--version";
    argv[n++] = dash_version;
    argv[n] = NULL;
    char line[sizeof out->version] = "";
    struct run_result r;
    run(argv, query_limit(), -1, &r);
    if (r.end == RUN_EXITED && r.status == 0 && r.output) {
        first_line(r.output, line, sizeof line);
    } else if (r.end != RUN_EXITED) {
        char why[sizeof line - 2];
        run_trouble(&r, "--version", why, sizeof why);
        snprintf(line, sizeof line, "(%s)", why);
    }
    free(r.output);
    free(argv);
    compiler_free(&c);
    if (c.identity[0])
        snprintf(out->version, sizeof out->version, "%.40s%s%.80s", c.identity, line[0] ? ", " : "", line);
    else
        snprintf(out->version, sizeof out->version, "%s", line);
}
