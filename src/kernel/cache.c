/* Host kernels: the system C compiler, a cache of shared objects on disk,
 * dlopen. The cache is shared by every process of the user, so each file
 * appears under its final name only complete (written under a private
 * temporary name, then renamed): two processes compiling the same kernel at
 * once both succeed, and the second rename replaces a file with an
 * identical one. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernel.h"

extern char **environ;

static _Thread_local char *compile_log;

const char *tack_kernel_compile_log(void) { return compile_log ? compile_log : ""; }

void tack_compile_log_set(const char *text, size_t len)
{
    free(compile_log);
    compile_log = NULL;
    if (!text)
        return;
    compile_log = malloc(len + 1);
    if (compile_log) {
        memcpy(compile_log, text, len);
        compile_log[len] = 0;
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
        return tack_error_set(TACK_ERUNTIME, "%s%.*s", head, (int)(log_len > INT_MAX ? INT_MAX : log_len),
                              log_len ? log : "");
    }
    memcpy(full, head, (size_t)hl);
    if (log_len)
        memcpy(full + hl, log, log_len);
    full[total] = 0;
    tack_compile_log_set(full, total);
    tack_status st = tack_error_set(TACK_ERUNTIME, "%s", full);
    free(full);
    return st;
}

static tack_status mkdirs(char *path)
{
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != 0)
            continue;
        char c = *p;
        *p = 0;
        int r = mkdir(path, 0777);
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

tack_status tack_cache_dir(char *out, size_t cap)
{
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
    return mkdirs(out);
}

char *tack_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *data = NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)len + 1))) {
        if (fread(data, 1, (size_t)len, f) != (size_t)len) {
            free(data);
            data = NULL;
        } else {
            data[len] = 0;
            *size = (size_t)len;
        }
    }
    fclose(f);
    return data;
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

tack_status tack_write_file_atomic(const char *dir, const char *path, const void *data, size_t size)
{
    char tmp[4096];
    if (!temp_name(tmp, sizeof tmp, dir, ".part"))
        return too_long(dir);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return tack_error_set(TACK_ERUNTIME, "cannot write %s: %s; set TACK_CACHE_DIR to a writable directory",
                              tmp, strerror(errno));
    int ok = fwrite(data, 1, size, f) == size;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return tack_error_set(TACK_ERUNTIME, "cannot write %s: %s", path, strerror(err));
    }
    return TACK_OK;
}

#define MAX_WORDS 32

struct compiler {
    char spec[1024]; /* TACK_CC as given (or "cc"), split in place into argv */
    char *argv[MAX_WORDS];
    int argc;
    char path[4096]; /* argv[0] found on PATH */
    struct stat st;
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

static tack_status find_compiler(struct compiler *c)
{
    const char *cc = getenv("TACK_CC");
    int from_env = cc && *cc;
    snprintf(c->spec, sizeof c->spec, "%s", from_env ? cc : "cc");
    char copy[sizeof c->spec];
    memcpy(copy, c->spec, sizeof copy);
    c->argc = split(c->spec, c->argv, MAX_WORDS);
    if (c->argc == 0 || !find_on_path(c->argv[0], c->path, sizeof c->path) || stat(c->path, &c->st) != 0)
        return tack_error_set(TACK_ERUNTIME,
                              "no C compiler found to build kernels for the cpu backend: '%s' %s. Install one "
                              "(gcc or clang) or set TACK_CC to a compiler command, e.g. TACK_CC=gcc or "
                              "TACK_CC=/usr/bin/clang",
                              copy, from_env ? "(from TACK_CC) cannot be run" : "is not on PATH");
    return TACK_OK;
}

static const char *const flags[] = {"-O2", "-fPIC", "-shared"};

/* Runs argv, collecting its standard output and error. Returns the exit
 * status (-1 if it could not be run, with errno in *err). */
static int run(char *const *argv, char **output, size_t *output_len, int *err)
{
    int fds[2];
    *output = NULL;
    *output_len = 0;
    if (pipe2(fds, O_CLOEXEC) != 0) {
        *err = errno;
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    pid_t pid;
    int r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (r != 0) {
        close(fds[0]);
        *err = r;
        return -1;
    }
    size_t cap = 0, len = 0;
    char *buf = NULL;
    for (;;) {
        if (len + 4096 > cap) {
            size_t ncap = cap ? cap * 2 : 8192;
            char *nb = ncap <= (16u << 20) ? realloc(buf, ncap) : NULL;
            if (!nb)
                break; /* keep what we have; the rest of a huge log adds nothing */
            buf = nb;
            cap = ncap;
        }
        ssize_t got = read(fds[0], buf + len, cap - len - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    /* Drain whatever a runaway compiler still writes so it never blocks. */
    char sink[4096];
    while (read(fds[0], sink, sizeof sink) > 0) {
    }
    close(fds[0]);
    if (buf)
        buf[len] = 0;
    *output = buf;
    *output_len = len;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno == EINTR)
            continue;
        /* SIGCHLD ignored by the application: the child was reaped for us
         * and its status is lost; the output file tells. */
        return errno == ECHILD ? 0 : -1;
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static tack_status load(const char *path, void **handle, tack_host_entry *entry)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return tack_error_set(TACK_ERUNTIME, "cannot load the compiled kernel %s: %s", path, why ? why : "?");
    }
    void *sym = dlsym(h, TACK_ENTRY_NAME);
    if (!sym) {
        dlclose(h);
        return tack_error_set(TACK_ERUNTIME, "the compiled kernel %s has no %s", path, TACK_ENTRY_NAME);
    }
    *handle = h;
    /* dlsym returns an object pointer; POSIX guarantees the conversion. */
    memcpy(entry, &sym, sizeof sym);
    return TACK_OK;
}

static tack_status compile_to(const struct compiler *c, const char *name, const char *dir, const char *hex,
                              const char *source, const char *final)
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

    char *log = NULL;
    size_t log_len = 0;
    int err = 0;
    int status = run(argv, &log, &log_len, &err);
    tack_status st = TACK_OK;
    struct stat sb;
    if (status < 0) {
        st = tack_error_set(TACK_ERUNTIME,
                            "cannot run the C compiler %s: %s. Install one (gcc or clang) or set TACK_CC to a "
                            "compiler command",
                            c->path, strerror(err));
    } else if (status != 0 || stat(obj, &sb) != 0) {
        /* The message carries the start of the log; the whole of it is
         * kept for tack_kernel_compile_log(). */
        st = tack_compile_failed(log, log_len, "kernel '%s' failed to compile (%s exited with status %d):\n", name,
                                 c->argv[0], status);
    } else if (rename(obj, final) != 0) {
        st = tack_error_set(TACK_ERUNTIME, "cannot store the compiled kernel as %s: %s", final, strerror(errno));
    }
    free(log);
    unlink(obj);
    /* The generated source stays beside its object, for whoever wonders
     * what was compiled. */
    if (st != TACK_OK || rename(src, kept) != 0)
        unlink(src);
    return st;
}

tack_status tack_host_compile(const char *name, const char *source, void **handle, tack_host_entry *entry)
{
    struct compiler c;
    tack_status st = find_compiler(&c);
    if (st != TACK_OK)
        return st;
    char dir[4096];
    st = tack_cache_dir(dir, sizeof dir);
    if (st != TACK_OK)
        return st;

    tack_sha256 h;
    tack_sha256_init(&h);
    tack_sha256_field(&h, "tack " TACK_VERSION_STRING " cpu");
    for (int i = 0; i < c.argc; i++)
        tack_sha256_field(&h, c.argv[i]);
    /* The compiler itself: an upgrade in place changes its size or time. */
    char ident[4400];
    snprintf(ident, sizeof ident, "%s %lld %lld.%09ld", c.path, (long long)c.st.st_size,
             (long long)c.st.st_mtim.tv_sec, (long)c.st.st_mtim.tv_nsec);
    tack_sha256_field(&h, ident);
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        tack_sha256_field(&h, flags[i]);
    tack_sha256_field(&h, getenv("TACK_CFLAGS"));
    tack_sha256_field(&h, source);
    char hex[65];
    tack_sha256_hex(&h, hex);

    char final[4200];
    if (snprintf(final, sizeof final, "%s/cpu-%s.so", dir, hex) >= (int)sizeof final)
        return too_long(dir);
    if (access(final, R_OK) == 0) {
        st = load(final, handle, entry);
        if (st == TACK_OK)
            return st;
        /* A damaged file (a full disk, a stray write): build it again. */
    }
    st = compile_to(&c, name, dir, hex, source, final);
    if (st != TACK_OK)
        return st;
    return load(final, handle, entry);
}
