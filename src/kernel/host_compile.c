/* Host code: the system C compiler's build of generated source into the
 * store, and its load. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../backend/host_cpu.h"
#include "kernel.h"
#include "store.h"

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

/* The compiler's command as it is run, less Tack's own arguments. */
static void command_of(const struct tack_c_compiler *c, char *out, size_t cap)
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

/* The compiler's command line for `src` into `obj` (names in the cache
 * directory, reached as /proc/self/fd/CHILD_DIR_FD): c's words, Tack's
 * flags, every word of TACK_CFLAGS, then the files. *paths holds what the
 * words point into. NULL out of memory. */
static char **compile_argv(const struct tack_c_compiler *c, const char *src, const char *obj, char **paths)
{
    const char *cflags = getenv("TACK_CFLAGS");
    size_t nflags = sizeof flags / sizeof *flags, ncflags = cflags ? (size_t)tack_words_count(cflags) : 0;
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
    n += (size_t)tack_words_split(room, argv + n);
    char *objpath = room + cfl, *srcpath = objpath + dirlen + objlen + 1;
    snprintf(objpath, dirlen + objlen + 1, "/proc/self/fd/%d/%s", TACK_STORE_CHILD_FD, obj);
    snprintf(srcpath, dirlen + srclen + 1, "/proc/self/fd/%d/%s", TACK_STORE_CHILD_FD, src);
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
static tack_status compile_to(const struct tack_c_compiler *c, const char *name, int dirfd, const char *dir,
                              const char *hex, const char *source, const char *final, int64_t limit_ns)
{
    char src[96], obj[96], kept[96];
    tack_store_temp_name(src, sizeof src, ".c");
    tack_store_temp_name(obj, sizeof obj, ".so");
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
    struct tack_run_result r;
    tack_run(argv, limit_ns, dirfd, &r);
    struct stat sb;
    int made = 0;
    const char *no_object = "missing";
    if (r.end == TACK_RUN_EXITED && r.status == 0 && fstatat(dirfd, obj, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
        made = S_ISREG(sb.st_mode) && sb.st_size > 0;
        no_object = "empty or not a file";
    }
    char command[1200], limit[32];
    command_of(c, command, sizeof command);
    tack_limit_text(limit_ns, limit, sizeof limit);
    if (r.end == TACK_RUN_NOT_STARTED && (r.err == EMFILE || r.err == ENFILE)) {
        st = tack_error_set(TACK_ERUNTIME, "kernel '%s': cannot run the C compiler %s: %s; %s", name, c->path,
                            strerror(r.err), tack_store_advice(r.err));
    } else if (r.end == TACK_RUN_NOT_STARTED) {
        st = tack_error_set(TACK_ERUNTIME,
                            "cannot run the C compiler %s: %s. Install one (gcc or clang) or set TACK_CC to a "
                            "compiler command",
                            c->path, strerror(r.err));
    } else if (r.end == TACK_RUN_TIMED_OUT) {
        st = tack_error_set(TACK_ERUNTIME,
                            "kernel '%s': the C compiler (%s) did not finish within its time limit of %s and was "
                            "stopped; nothing was cached. If it is only slow, set TACK_COMPILE_TIMEOUT to more "
                            "seconds (0: no limit); if it hangs, see what it waits for, or choose another with "
                            "TACK_CC",
                            name, command, limit);
    } else if (r.end == TACK_RUN_INTERRUPTED) {
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
    } else if (!tack_store_seal(dirfd, obj, final)) {
        int err = errno;
        st = tack_error_set(TACK_ERUNTIME, "cannot store the compiled kernel %s/%s: %s; %s", dir, obj,
                            strerror(err), tack_store_advice(err));
    } else if (renameat(dirfd, obj, dirfd, final) != 0) {
        int err = errno;
        st = tack_error_set(TACK_ERUNTIME, "cannot store the compiled kernel as %s/%s: %s; %s", dir, final,
                            strerror(err), tack_store_advice(err));
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
        if (tack_store_max(&max) == TACK_OK)
            tack_store_evict(dirfd, final, max);
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
static tack_status host_compile(const struct tack_c_compiler *c, const char *name, const char *source, int64_t limit_ns,
                                void **handle, struct tack_kernel_code *code)
{
    char dir[4096];
    int unsafe;
    tack_status st = tack_cache_dir(dir, sizeof dir, &unsafe);
    if (st != TACK_OK)
        return st;
    /* The one descriptor every file of this build is reached through. */
    int dirfd = tack_store_open_dir(dir);
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
    st = tack_store_load_object(dirfd, dir, final, handle, code);
    if (st != TACK_OK) {
        /* Missing, damaged, built for another key, or not this user's:
         * built again, and the rename replaces what was there. */
        st = compile_to(c, name, dirfd, dir, hex, source, final, limit_ns);
        if (st == TACK_OK)
            st = tack_store_load_object(dirfd, dir, final, handle, code);
    }
    close(dirfd);
    return st;
}

tack_status tack_host_compile(const char *name, const char *source, void **handle, struct tack_kernel_code *code)
{
    /* Read first, so that a limit that cannot be read is refused whether
     * or not this kernel needs compiling. */
    int64_t limit_ns;
    tack_status st = tack_compile_limit(&limit_ns);
    if (st != TACK_OK)
        return st;
    struct tack_c_compiler c;
    st = tack_c_compiler_find(&c);
    if (st != TACK_OK)
        return st;
    st = host_compile(&c, name, source, limit_ns, handle, code);
    tack_c_compiler_free(&c);
    return st;
}
