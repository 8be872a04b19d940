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
 * that nobody can plant code under the name a kernel's hash predicts. */
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
            return tack_error_set(TACK_ERUNTIME,
                                  "cannot create the kernel cache directory %s: %s; set TACK_CACHE_DIR to a "
                                  "writable directory",
                                  path, strerror(err));
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

/* The directory, and every one above it, must keep other users out: the
 * cache itself this user's and writable by nobody else; those above it
 * this user's or root's, and writable by others only when sticky (/tmp),
 * where others cannot rename what is not theirs. */
static tack_status check_private(const char *dir)
{
    char real[PATH_MAX], why[PATH_MAX + 128];
    if (!realpath(dir, real))
        return tack_error_set(TACK_ERUNTIME, "cannot resolve the kernel cache directory %s: %s; set TACK_CACHE_DIR",
                              dir, strerror(errno));
    uid_t me = geteuid();
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
        return tack_error_set(TACK_ERUNTIME, "the kernel cache directory %s is not a directory; set TACK_CACHE_DIR",
                              dir);
    if (st.st_uid != me) {
        snprintf(why, sizeof why, "it belongs to uid %u, not to you (uid %u)", (unsigned)st.st_uid, (unsigned)me);
        return refuse_dir(dir, why);
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, sizeof why, "others can write it (mode %04o)", (unsigned)(st.st_mode & 07777));
        return refuse_dir(dir, why);
    }
    for (char *slash = strrchr(real, '/'); slash; slash = strrchr(real, '/')) {
        if (slash == real)
            slash[1] = 0; /* the root itself, last */
        else
            *slash = 0;
        if (stat(real, &st) != 0)
            return tack_error_set(TACK_ERUNTIME, "cannot check %s, above the kernel cache directory %s: %s", real, dir,
                                  strerror(errno));
        int foreign = st.st_uid != me && st.st_uid != 0;
        int open_to_others = (st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX);
        if (foreign || open_to_others) {
            snprintf(why, sizeof why, "%s above it %s", real,
                     foreign ? "belongs to another user" : "can be written by others and is not sticky");
            return refuse_dir(dir, why);
        }
        if (slash == real)
            break;
    }
    return TACK_OK;
}

tack_status tack_cache_dir(char *out, size_t cap, int *unsafe)
{
    *unsafe = 0;
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
    st = check_private(out);
    *unsafe = st != TACK_OK;
    return st;
}

/* The trailer every cached file ends with: "tack-cache-1 ", the size of the
 * bytes before it as 20 decimal digits, a space, their SHA-256 in hex and a
 * newline. Plain text, so that the same bytes mean the same on any host. */
#define TRAILER_TAG "tack-cache-1 "
#define TRAILER_SIZE (sizeof TRAILER_TAG - 1 + 20 + 1 + 64 + 1)
/* Larger cached files are not read (no kernel's code comes near). */
#define MAX_CACHED ((size_t)1 << 30)

static void make_trailer(const void *data, size_t size, char out[TRAILER_SIZE + 1])
{
    tack_sha256 h;
    tack_sha256_init(&h);
    tack_sha256_update(&h, data, size);
    char hex[65];
    tack_sha256_hex(&h, hex);
    snprintf(out, TRAILER_SIZE + 1, "%s%020llu %s\n", TRAILER_TAG, (unsigned long long)size, hex);
}

/* The size of what precedes a valid trailer at the end of data[0, len);
 * 0 when there is none or it does not match. */
static int trailer_matches(const char *data, size_t len, size_t *payload)
{
    if (len < TRAILER_SIZE)
        return 0;
    size_t size = len - TRAILER_SIZE;
    char want[TRAILER_SIZE + 1];
    make_trailer(data, size, want);
    if (memcmp(data + size, want, TRAILER_SIZE) != 0)
        return 0;
    *payload = size;
    return 1;
}

/* Opens a cached file if this user may trust it: a regular file, not a
 * link, that the user owns and nobody else can write. -1 otherwise. */
static int open_trusted(const char *path, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
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
        ssize_t n = read(fd, data + done, size - done);
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

/* A cached file's payload when the file is trusted and whole (malloc'd,
 * NUL added; *size excludes both it and the trailer). NULL when missing,
 * not trusted or damaged. */
char *tack_cache_load(const char *path, size_t *size)
{
    struct stat st;
    int fd = open_trusted(path, &st);
    if (fd < 0)
        return NULL;
    char *data = read_all(fd, (size_t)st.st_size);
    close(fd);
    size_t payload = 0;
    if (data && !trailer_matches(data, (size_t)st.st_size, &payload)) {
        free(data);
        return NULL;
    }
    if (data) {
        data[payload] = 0;
        *size = payload;
    }
    return data;
}

/* Objects this process has verified, by what identifies a file's contents:
 * any write changes its size or modification time, a chmod or chown its
 * change time. An object loaded again (another kernel of the same source)
 * is then checked for trust but not read and hashed again. */
struct verified {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
};
#define VERIFIED_KEPT 32
static struct verified verified_files[VERIFIED_KEPT];
static unsigned verified_next;
static pthread_mutex_t verified_lock = PTHREAD_MUTEX_INITIALIZER;

static struct verified identity(const struct stat *st)
{
    struct verified v;
    memset(&v, 0, sizeof v);
    v.dev = st->st_dev;
    v.ino = st->st_ino;
    v.size = st->st_size;
    v.mtime = st->st_mtim;
    v.ctime = st->st_ctim;
    return v;
}

static int was_verified(const struct stat *st)
{
    struct verified v = identity(st);
    int found = 0;
    pthread_mutex_lock(&verified_lock);
    for (unsigned i = 0; i < VERIFIED_KEPT && !found; i++)
        found = !memcmp(&verified_files[i], &v, sizeof v);
    pthread_mutex_unlock(&verified_lock);
    return found;
}

static void remember_verified(const struct stat *st)
{
    struct verified v = identity(st);
    pthread_mutex_lock(&verified_lock);
    verified_files[verified_next++ % VERIFIED_KEPT] = v;
    pthread_mutex_unlock(&verified_lock);
}

/* A cached object fit to load: trusted and whole, or trusted and the very
 * file verified before. */
static int object_verified(const char *path)
{
    struct stat st;
    int fd = open_trusted(path, &st);
    if (fd < 0)
        return 0;
    int ok = was_verified(&st);
    if (!ok) {
        char *data = read_all(fd, (size_t)st.st_size);
        size_t payload;
        ok = data && trailer_matches(data, (size_t)st.st_size, &payload);
        free(data);
        if (ok)
            remember_verified(&st);
    }
    close(fd);
    return ok;
}

static atomic_uint temp_counter;

/* A name in `dir` no other thread or process uses; 0 if it does not fit. */
static int temp_name(char *out, size_t cap, const char *dir, const char *suffix)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int n = snprintf(out, cap, "%s/tmp-%ld-%u-%lx%s", dir, (long)getpid(), atomic_fetch_add(&temp_counter, 1),
                     (unsigned long)ts.tv_nsec, suffix);
    return n > 0 && (size_t)n < cap;
}

static tack_status too_long(const char *dir)
{
    return tack_error_set(TACK_ERUNTIME, "the kernel cache directory's path %s is too long; set TACK_CACHE_DIR",
                          dir);
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

tack_status tack_cache_store(const char *dir, const char *path, const void *data, size_t size)
{
    char tmp[4096], trailer[TRAILER_SIZE + 1];
    if (!temp_name(tmp, sizeof tmp, dir, ".part"))
        return too_long(dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return tack_error_set(TACK_ERUNTIME, "cannot write %s: %s; set TACK_CACHE_DIR to a writable directory",
                              tmp, strerror(errno));
    make_trailer(data, size, trailer);
    int ok = write_all(fd, data, size) && write_all(fd, trailer, TRAILER_SIZE);
    int err = errno;
    ok = (close(fd) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        err = ok ? errno : err;
        unlink(tmp);
        return tack_error_set(TACK_ERUNTIME, "cannot write %s: %s", path, strerror(err));
    }
    return TACK_OK;
}

/* Ends the compiler's output with its trailer, and takes from it any
 * write permission the umask left for others, before it is published. */
static int seal_object(const char *path)
{
    int fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    struct stat st;
    char *data = NULL, trailer[TRAILER_SIZE + 1];
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 && (uint64_t)st.st_size <= MAX_CACHED &&
             (data = read_all(fd, (size_t)st.st_size)) != NULL;
    if (ok) {
        make_trailer(data, (size_t)st.st_size, trailer);
        ok = write_all(fd, trailer, TRAILER_SIZE) && fchmod(fd, 0644) == 0;
    }
    free(data);
    return (close(fd) == 0) && ok;
}

#define MAX_WORDS 32

struct compiler {
    char spec[1024]; /* TACK_CC as given (or a compiler's name), split in place into argv */
    char *argv[MAX_WORDS];
    int argc;
    char path[4096]; /* argv[0] as run: found on PATH, or the interpreter that runs zig */
    struct stat st;
    /* What else tells this compiler from another that the key must: zig's
     * version, run by an interpreter whose file says nothing of it. */
    char identity[96];
    const char *display; /* its name in messages */
    char how[PATH_MAX + 160]; /* how it was chosen, for reports */
};

static int split(char *s, char **argv, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *p = strtok_r(s, " \t\n", &save); p && n < max; p = strtok_r(NULL, " \t\n", &save))
        argv[n++] = p;
    return n;
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
 * point's) took 11% less, an n-body step 5%, for 5 ms more compile. */
#if defined(__x86_64__) || defined(__aarch64__)
static const char *const flags[] = {"-O3", "-march=native", "-fno-math-errno", "-funroll-loops", "-fPIC", "-shared"};
#else
static const char *const flags[] = {"-O3", "-fno-math-errno", "-funroll-loops", "-fPIC", "-shared"};
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
 * left running, and none is left unreaped. */
static void run(char *const *argv, int64_t limit_ns, struct run_result *r)
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
        run(argv, query_limit(), &r);
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

static tack_status find_compiler(struct compiler *c)
{
    memset(c, 0, sizeof *c);
    const char *cc = getenv("TACK_CC");
    if (cc && *cc) {
        snprintf(c->spec, sizeof c->spec, "%s", cc);
        c->argc = split(c->spec, c->argv, MAX_WORDS);
        if (c->argc == 0 || !find_on_path(c->argv[0], c->path, sizeof c->path) || stat(c->path, &c->st) != 0)
            return tack_error_set(TACK_ERUNTIME,
                                  "no C compiler found to build kernels for the cpu backend: '%s' (from TACK_CC) "
                                  "cannot be run. Set TACK_CC to a compiler command, e.g. TACK_CC=gcc or "
                                  "TACK_CC=/usr/bin/clang, or unset it to use the system's",
                                  cc);
        c->display = c->argv[0];
        snprintf(c->how, sizeof c->how, "TACK_CC=%s", cc);
        return TACK_OK;
    }
    for (int i = 0; system_compilers[i]; i++) {
        if (!find_on_path(system_compilers[i], c->path, sizeof c->path) || stat(c->path, &c->st) != 0)
            continue;
        snprintf(c->spec, sizeof c->spec, "%s", system_compilers[i]);
        c->argc = split(c->spec, c->argv, MAX_WORDS);
        c->display = c->argv[0];
        snprintf(c->how, sizeof c->how, "%s on PATH", system_compilers[i]);
        return TACK_OK;
    }
    char why[600];
    if (find_zig(c, why, sizeof why))
        return TACK_OK;
    memset(c, 0, sizeof *c);
    return tack_error_set(TACK_ERUNTIME,
                          "no C compiler found to build kernels for the cpu backend: none of cc, gcc and clang is "
                          "on PATH%s%s. Install one (gcc or clang; Debian and Ubuntu: apt-get install gcc), or "
                          "zig's for Python: pip install tack-arrays[cc] (the ziglang package, in the environment "
                          "of the Python that runs Tack); or set TACK_CC to a compiler command",
                          why[0] ? ", and " : "", why);
}

/* Loads a cached object after checking it is trusted and whole. Between
 * the check and dlopen only this user could replace it (the directory is
 * private), and Tack replaces a file only with another whole one. */
static tack_status load(const char *path, void **handle, struct tack_kernel_code *code)
{
    if (!object_verified(path))
        return tack_error_set(TACK_ERUNTIME,
                              "the compiled kernel %s is damaged, or not this user's to trust (owned by another "
                              "user or writable by others); it was rebuilt and is still refused: remove it",
                              path);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return tack_error_set(TACK_ERUNTIME, "cannot load the compiled kernel %s: %s", path, why ? why : "?");
    }
    /* The restrict variant is there only where restrict can matter, the
     * plain one only for a kernel with atomics. */
    void *sym = dlsym(h, TACK_ENTRY_NAME), *rsym = dlsym(h, TACK_ENTRY_NAME "_restrict"),
         *psym = dlsym(h, TACK_ENTRY_NAME "_plain");
    if (!sym) {
        dlclose(h);
        return tack_error_set(TACK_ERUNTIME, "the compiled kernel %s has no %s", path, TACK_ENTRY_NAME);
    }
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

static tack_status compile_to(const struct compiler *c, const char *name, const char *dir, const char *hex,
                              const char *source, const char *final, int64_t limit_ns)
{
    char src[4096], obj[4096], kept[4096];
    if (!temp_name(src, sizeof src, dir, ".c") || !temp_name(obj, sizeof obj, dir, ".so") ||
        snprintf(kept, sizeof kept, "%s/cpu-%s.c", dir, hex) >= (int)sizeof kept)
        return too_long(dir);
    FILE *f = fopen(src, "wb");
    if (!f)
        return tack_error_set(TACK_ERUNTIME, "cannot write %s: %s; set TACK_CACHE_DIR to a writable directory",
                              src, strerror(errno));
    int ok = fputs(source, f) >= 0;
    if (fclose(f) != 0 || !ok) {
        unlink(src);
        return tack_error_set(TACK_ERUNTIME, "cannot write %s", src);
    }
    char *argv[MAX_WORDS + 16];
    int n = 0;
    argv[n++] = (char *)c->path;
    for (int i = 1; i < c->argc; i++)
        argv[n++] = c->argv[i];
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        argv[n++] = (char *)flags[i];
    char extra[1024] = "";
    const char *cflags = getenv("TACK_CFLAGS");
    if (cflags)
        snprintf(extra, sizeof extra, "%s", cflags);
    n += split(extra, argv + n, MAX_WORDS / 2);
    argv[n++] = "-o";
    argv[n++] = obj;
    argv[n++] = src;
    argv[n++] = "-lm";
    argv[n] = NULL;

    struct run_result r;
    run(argv, limit_ns, &r);
    tack_status st = TACK_OK;
    struct stat sb;
    char command[1200], limit[32];
    command_of(c, command, sizeof command);
    limit_text(limit_ns, limit, sizeof limit);
    if (r.end == RUN_NOT_STARTED) {
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
    } else if (r.status != 0 || stat(obj, &sb) != 0) {
        /* The message carries the start of the log; the whole of it is
         * kept for tack_kernel_compile_log(). */
        st = tack_compile_failed(r.output, r.output_len, "kernel '%s' failed to compile (%s exited with status %d):\n",
                                 name, c->display, r.status);
    } else if (!seal_object(obj)) {
        st = tack_error_set(TACK_ERUNTIME, "cannot store the compiled kernel %s: %s", obj, strerror(errno));
    } else if (rename(obj, final) != 0) {
        st = tack_error_set(TACK_ERUNTIME, "cannot store the compiled kernel as %s: %s", final, strerror(errno));
    }
    free(r.output);
    unlink(obj);
    /* The generated source stays beside its object, for whoever wonders
     * what was compiled. */
    if (st != TACK_OK || rename(src, kept) != 0)
        unlink(src);
    return st;
}

/* The object names already worked out in this process: a new Kernel of a
 * source loaded before (one per call of a function that builds its kernel,
 * say) would otherwise hash its whole generated source again, most of what
 * such a build costs. An entry says that everything else the name depends
 * on (the prefix's digest) and this source give this name: true forever,
 * so entries are never removed, and a list that only grows at its head
 * needs no lock (nor any care across fork). Bounded, so that a process
 * making kernels of endless distinct sources keeps only the first. */
struct name_memo {
    struct name_memo *next;
    char prefix[65], hex[65];
    size_t len;
    char source[];
};

#define NAME_MEMO_MAX 256

static _Atomic(struct name_memo *) name_memos;
static atomic_int name_memo_count;

static const struct name_memo *name_memo_find(const char *prefix, const char *source, size_t len)
{
    for (const struct name_memo *m = atomic_load_explicit(&name_memos, memory_order_acquire); m; m = m->next)
        if (m->len == len && !strcmp(m->prefix, prefix) && !memcmp(m->source, source, len))
            return m;
    return NULL;
}

/* Remembers a name; out of memory or past the bound it is simply not
 * remembered. */
static void name_memo_add(const char *prefix, const char *source, size_t len, const char *hex)
{
    /* Looked at first, so that the count stops growing at the bound. */
    if (atomic_load_explicit(&name_memo_count, memory_order_relaxed) >= NAME_MEMO_MAX ||
        atomic_fetch_add_explicit(&name_memo_count, 1, memory_order_relaxed) >= NAME_MEMO_MAX)
        return;
    struct name_memo *m = malloc(sizeof *m + len + 1);
    if (!m)
        return;
    memcpy(m->prefix, prefix, sizeof m->prefix);
    memcpy(m->hex, hex, sizeof m->hex);
    m->len = len;
    memcpy(m->source, source, len + 1);
    m->next = atomic_load_explicit(&name_memos, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&name_memos, &m->next, m, memory_order_release,
                                                  memory_order_relaxed)) {
    }
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
    char dir[4096];
    int unsafe;
    st = tack_cache_dir(dir, sizeof dir, &unsafe);
    if (st != TACK_OK)
        return st;

    tack_sha256 h;
    tack_sha256_init(&h);
    tack_sha256_field(&h, "tack " TACK_VERSION_STRING " cpu");
    for (int i = 0; i < c.argc; i++)
        tack_sha256_field(&h, c.argv[i]);
    /* The compiler itself: an upgrade in place changes its size or time. */
    char ident[4400];
    snprintf(ident, sizeof ident, "%s %lld %lld.%09ld %s", c.path, (long long)c.st.st_size,
             (long long)c.st.st_mtim.tv_sec, (long)c.st.st_mtim.tv_nsec, c.identity);
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
    const struct name_memo *known = name_memo_find(prefix, source, len);
    if (known) {
        memcpy(hex, known->hex, sizeof hex);
    } else {
        tack_sha256_field(&h, source);
        tack_sha256_hex(&h, hex);
        name_memo_add(prefix, source, len, hex);
    }

    char final[4200];
    if (snprintf(final, sizeof final, "%s/cpu-%s.so", dir, hex) >= (int)sizeof final)
        return too_long(dir);
    if (load(final, handle, code) == TACK_OK)
        return TACK_OK;
    /* Missing, damaged, or not this user's: built again, and the rename
     * replaces what was there. */
    st = compile_to(&c, name, dir, hex, source, final, limit_ns);
    if (st != TACK_OK)
        return st;
    return load(final, handle, code);
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

    char *argv[MAX_WORDS + 2];
    int n = 0;
    argv[n++] = c.path;
    for (int i = 1; i < c.argc; i++)
        argv[n++] = c.argv[i];
    char dash_version[] = "--version";
    argv[n++] = dash_version;
    argv[n] = NULL;
    char line[sizeof out->version] = "";
    struct run_result r;
    run(argv, query_limit(), &r);
    if (r.end == RUN_EXITED && r.status == 0 && r.output) {
        first_line(r.output, line, sizeof line);
    } else if (r.end != RUN_EXITED) {
        char why[sizeof line - 2];
        run_trouble(&r, "--version", why, sizeof why);
        snprintf(line, sizeof line, "(%s)", why);
    }
    free(r.output);
    if (c.identity[0])
        snprintf(out->version, sizeof out->version, "%.40s%s%.80s", c.identity, line[0] ? ", " : "", line);
    else
        snprintf(out->version, sizeof out->version, "%s", line);
}
