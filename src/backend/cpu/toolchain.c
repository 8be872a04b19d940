/* The cpu backend's toolchain: its key (the C compiler, its flags and the
 * host CPU), its compile (the system C compiler, run into the file the
 * code store gives it) and its entry points. Code generation is cpu.c's. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host_cpu.h"
#include "toolchain.h"

#if defined(__x86_64__)
#define TACK_CPU_ARCH "x86-64"
#elif defined(__aarch64__)
#define TACK_CPU_ARCH "AArch64"
#else
#define TACK_CPU_ARCH "this architecture"
#endif

const char *const tack_cpu_entry_names[] = {TACK_ENTRY_NAME, TACK_ENTRY_NAME "_restrict", TACK_ENTRY_NAME "_plain",
                                            NULL};

/* For the instruction set TACK_CPU_TARGET names (cpu_target), and
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
 * declarations too, and the link would fail. The entries say "default".
 * The target's -march word, where it has one, comes second. */
static const char *const flags[] = {"-O3", "-fno-math-errno", "-funroll-loops", "-fPIC", "-shared",
                                    "-fvisibility=hidden"};
#define NFLAGS (sizeof flags / sizeof *flags + 1)

/* What TACK_CPU_TARGET may name: code for this CPU (native, the default)
 * or for any CPU of its architecture (portable: what valgrind and another
 * node of a cluster run). Where the architecture has no baseline named
 * here, both are the compiler's default target, no -march at all. */
struct cpu_target {
    const char *name;
    const char *march; /* NULL: none */
    int native;        /* the code is this CPU's: the key names it */
};
static const struct cpu_target targets[] = {
#if defined(__x86_64__)
    {"native", "-march=native", 1},
    {"portable", "-march=x86-64-v2", 0},
#elif defined(__aarch64__)
    {"native", "-march=native", 1},
    {"portable", "-march=armv8-a", 0},
#else
    {"native", NULL, 1},
    {"portable", NULL, 0},
#endif
};

/* The target TACK_CPU_TARGET names; TACK_ERUNTIME, naming the variable
 * and the values it takes, for any other. */
static tack_status cpu_target(const struct cpu_target **out)
{
    const char *text = getenv("TACK_CPU_TARGET");
    *out = &targets[0];
    if (!text || !*text)
        return TACK_OK;
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
        if (!strcmp(text, targets[i].name)) {
            *out = &targets[i];
            return TACK_OK;
        }
    }
    return tack_error_set(TACK_ERUNTIME,
                          "TACK_CPU_TARGET=%s is not a target: set it to native (code for this CPU, the default) "
                          "or portable (code for any CPU of %s, %s: for valgrind, or a cache shared by other CPUs), "
                          "or unset it",
                          text, TACK_CPU_ARCH, targets[1].march ? targets[1].march + 7 : "the compiler's default");
}

/* Tack's flags for target t, into out (NFLAGS words at most): how many. */
static size_t target_flags(const struct cpu_target *t, const char **out)
{
    size_t n = 0;
    out[n++] = flags[0];
    if (t->march)
        out[n++] = t->march;
    for (size_t i = 1; i < sizeof flags / sizeof *flags; i++)
        out[n++] = flags[i];
    return n;
}

void tack_cpu_target_describe(char *out, size_t cap)
{
    const struct cpu_target *t;
    if (cpu_target(&t) != TACK_OK) {
        snprintf(out, cap, "%s", tack_last_error());
        tack_error_clear();
        return;
    }
    snprintf(out, cap, "%s (TACK_CPU_TARGET): %s%s%s", t->name,
             t->native ? "code for this CPU" : "code for any CPU of " TACK_CPU_ARCH, t->march ? ", " : "",
             t->march ? t->march : "");
}

/* The compiler's command as it is run, less Tack's own arguments. */
static void command_of(const struct tack_c_compiler *c, char *out, size_t cap)
{
    size_t used = (size_t)snprintf(out, cap, "%s", c->path);
    for (int i = 1; i < c->argc && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, " %s", c->argv[i]);
}

/* The compiler's command line for `src` into `obj` (names in the store's
 * directory, reached as /proc/self/fd/TACK_STORE_CHILD_FD): c's words, Tack's
 * flags for target t, every word of TACK_CFLAGS, the kernel's own options (`own`, one
 * word each: the process default first, so that the kernel's own win),
 * then the files. *paths holds what the words point into. NULL out of
 * memory. */
static char **compile_argv(const struct tack_c_compiler *c, const struct cpu_target *t, char *const *own,
                           size_t nown, const char *src, const char *obj, char **paths)
{
    const char *cflags = getenv("TACK_CFLAGS");
    const char *mine[NFLAGS];
    size_t nflags = target_flags(t, mine), ncflags = cflags ? (size_t)tack_words_count(cflags) : 0;
    size_t srclen = strlen(src), objlen = strlen(obj), dirlen = sizeof "/proc/self/fd/" + 16;
    size_t cfl = cflags ? strlen(cflags) + 1 : 1;
    char **argv = calloc((size_t)c->argc + nflags + ncflags + nown + 5, sizeof *argv);
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
        argv[n++] = (char *)mine[i];
    memcpy(room, cflags ? cflags : "", cfl);
    n += (size_t)tack_words_split(room, argv + n);
    for (size_t i = 0; i < nown; i++)
        argv[n++] = own[i];
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

/* The compile's time limit, the target and the C compiler, as both slots
 * need them: errors as tack_compile_limit, cpu_target and
 * tack_c_compiler_find. */
static tack_status limit_and_compiler(int64_t *limit_ns, const struct cpu_target **t, struct tack_c_compiler *c)
{
    tack_status st = tack_compile_limit(limit_ns);
    if (st == TACK_OK)
        st = cpu_target(t);
    return st != TACK_OK ? st : tack_c_compiler_find(c);
}

tack_status tack_cpu_kernel_key(struct tack_compile *job)
{
    /* The limit is read first, so that one that cannot be read is refused
     * whether or not this kernel needs compiling. */
    int64_t limit_ns;
    const struct cpu_target *t;
    struct tack_c_compiler c;
    tack_status st = limit_and_compiler(&limit_ns, &t, &c);
    if (st != TACK_OK)
        return st;
    tack_sha256 h;
    tack_sha256_init(&h);
    for (int i = 0; i < c.argc; i++)
        tack_sha256_field(&h, c.argv[i]);
    /* The compiler itself: an upgrade in place changes its size or time. */
    char ident[4400];
    snprintf(ident, sizeof ident, "%s %lld %lld.%09ld %s", c.path, (long long)c.st.st_size,
             (long long)c.st.st_mtim.tv_sec, (long)c.st.st_mtim.tv_nsec, c.identity);
    tack_sha256_field(&h, ident);
    const char *mine[NFLAGS];
    size_t nflags = target_flags(t, mine);
    for (size_t i = 0; i < nflags; i++)
        tack_sha256_field(&h, mine[i]);
    tack_sha256_field(&h, getenv("TACK_CFLAGS"));
    char own[65];
    tack_build_options_digest(job->options, own);
    tack_sha256_field(&h, own);
    /* Native code is this CPU's, which another CPU sharing the cache (a
     * home directory across a cluster's nodes) may not run; portable code
     * is every such CPU's, and shared by them. */
    tack_sha256_field(&h, t->name);
    tack_sha256_field(&h, t->native ? tack_host_cpu() : TACK_CPU_ARCH);
    tack_c_compiler_free(&c);
    job->kind = TACK_CODE_HOST;
    char hex[65];
    tack_sha256_hex(&h, hex);
    snprintf(job->key, sizeof job->key, "cc %s", hex);
    return TACK_OK;
}

/* The status of compile `r` of kernel `name` by c (`argv`, into the file
 * `obj` of directory `dirfd`): TACK_OK when the compiler exited with 0 and
 * wrote the object, else the error, saying why and what to do. */
static tack_status outcome(const struct tack_c_compiler *c, const char *name, char **argv, int dirfd,
                           const char *obj, int64_t limit_ns, const struct tack_run_result *r)
{
    tack_status st = TACK_OK;
    struct stat sb;
    int made = 0;
    const char *no_object = "missing";
    if (r->end == TACK_RUN_EXITED && r->status == 0 && fstatat(dirfd, obj, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
        made = S_ISREG(sb.st_mode) && sb.st_size > 0;
        no_object = "empty or not a file";
    }
    char command[1200], limit[32];
    command_of(c, command, sizeof command);
    tack_limit_text(limit_ns, limit, sizeof limit);
    if (r->end == TACK_RUN_NOT_STARTED && (r->err == EMFILE || r->err == ENFILE)) {
        st = tack_error_set(TACK_ERUNTIME, "kernel '%s': cannot run the C compiler %s: %s; %s", name, c->path,
                            strerror(r->err), tack_store_advice(r->err));
    } else if (r->end == TACK_RUN_NOT_STARTED) {
        st = tack_error_set(TACK_ERUNTIME,
                            "cannot run the C compiler %s: %s. Install one (gcc or clang) or set TACK_CC to a "
                            "compiler command",
                            c->path, strerror(r->err));
    } else if (r->end == TACK_RUN_TIMED_OUT) {
        st = tack_error_set(TACK_ERUNTIME,
                            "kernel '%s': the C compiler (%s) did not finish within its time limit of %s and was "
                            "stopped; nothing was cached. If it is only slow, set TACK_COMPILE_TIMEOUT to more "
                            "seconds (0: no limit); if it hangs, see what it waits for, or choose another with "
                            "TACK_CC",
                            name, command, limit);
    } else if (r->end == TACK_RUN_INTERRUPTED) {
        st = tack_error_set(TACK_ERUNTIME,
                            "kernel '%s': compiling was interrupted by a signal; the C compiler (%s) was stopped "
                            "and nothing was cached",
                            name, command);
    } else if (r->status != 0) {
        /* The message carries the start of the log; the whole of it is
         * kept for tack_kernel_compile_log(). */
        st = tack_compile_failed(r->output, r->output_len, "kernel '%s' failed to compile (%s exited with status %d):\n",
                                 name, c->display, r->status);
    } else if (!made) {
        /* The whole command, less the files' names in the cache. */
        char whole[2048];
        size_t used = 0, words = 0;
        while (argv[words])
            words++;
        for (size_t i = 0; i + 4 < words && used < sizeof whole; i++)
            used += (size_t)snprintf(whole + used, sizeof whole - used, "%s%s", i ? " " : "", argv[i]);
        st = tack_compile_failed(r->output, r->output_len,
                                 "kernel '%s': the C compiler %s exited with status 0 but produced no object (the "
                                 "file named after -o is %s); the command was %s -o <object> <source> -lm. Set "
                                 "TACK_CC to a C compiler that writes the file -o names%s",
                                 name, c->display, no_object, whole, r->output_len ? ". It said:\n" : "");
    }
    return st;
}

tack_status tack_cpu_kernel_compile(const struct tack_compile *job, struct tack_kernel_code *code)
{
    (void)code; /* the code is the file job->output, which the store keeps */
    int64_t limit_ns;
    const struct cpu_target *t;
    struct tack_c_compiler c;
    tack_status st = limit_and_compiler(&limit_ns, &t, &c);
    if (st != TACK_OK)
        return st;
    char *paths = NULL, **argv = NULL;
    size_t nown = 0;
    char **own = tack_build_options_words(job->options, &nown);
    if (own)
        argv = compile_argv(&c, t, own, nown, job->source_file, job->output, &paths);
    if (!argv) {
        free(own);
        tack_c_compiler_free(&c);
        return tack_error_set(TACK_ENOMEM, "out of memory compiling kernel '%s'", job->name);
    }
    struct tack_run_result r;
    tack_run(argv, limit_ns, job->dirfd, &r);
    st = outcome(&c, job->name, argv, job->dirfd, job->output, limit_ns, &r);
    free(r.output);
    free(argv);
    free(own);
    free(paths);
    tack_c_compiler_free(&c);
    return st;
}

void tack_cpu_entries(const struct tack_kernel_code *code, tack_host_entry out[TACK_CPU_ENTRIES])
{
    for (int i = 0; i < TACK_CPU_ENTRIES; i++) {
        void *sym = i < code->nentries && code->object ? dlsym(code->object, code->entries[i]) : NULL;
        /* dlsym returns an object pointer; POSIX guarantees the conversion. */
        memcpy(&out[i], &sym, sizeof sym);
    }
}

/* The system C compiler's shared objects, kept in the store and run on the
 * pool (cpu.c). */
const struct tack_backend_toolchain tack_cpu_toolchain = {
    .dialect = &cpu_dialect,
    .kernel_key = tack_cpu_kernel_key,
    .kernel_compile = tack_cpu_kernel_compile,
    .kernel_load = cpu_kernel_load,
    .kernel_launch = cpu_kernel_launch,
    .kernel_expected_ns = cpu_kernel_expected_ns,
    .kernel_unload = cpu_kernel_unload,
};
