/* Which C compiler builds host code: TACK_CC, the system's, or zig's. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel.h"

void tack_c_compiler_free(struct tack_c_compiler *c)
{
    free(c->spec);
    free(c->argv);
    c->spec = NULL;
    c->argv = NULL;
    c->argc = 0;
}

static int is_blank(char ch) { return ch == ' ' || ch == '\t' || ch == '\n'; }

int tack_words_count(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        n += !is_blank(*p) && (p == s || is_blank(p[-1]));
    return n;
}

/* Splits `s` in place at blanks into words[0, n): every word, however
 * many (words has count_words(s) slots). */
int tack_words_split(char *s, char **words)
{
    int n = 0;
    char *save = NULL;
    for (char *p = strtok_r(s, " \t\n", &save); p; p = strtok_r(NULL, " \t\n", &save))
        words[n++] = p;
    return n;
}

/* c's spec and argv for `command`, every word of it. 0 out of memory. */
static int compiler_words(struct tack_c_compiler *c, const char *command)
{
    c->spec = strdup(command);
    c->argv = c->spec ? calloc((size_t)tack_words_count(command) + 1, sizeof *c->argv) : NULL;
    if (!c->argv) {
        tack_c_compiler_free(c);
        return 0;
    }
    c->argc = tack_words_split(c->spec, c->argv);
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

/* -P: python -m puts the working directory first on the module path, so a
 * directory holding a "ziglang" of someone else's would run in its place. */
static char arg_safe[] = "-P", arg_m[] = "-m", arg_ziglang[] = "ziglang", arg_cc[] = "cc",
            arg_version[] = "version";

/* zig's C compiler as c, if the interpreter can run it; 0 with why (if
 * there is an interpreter) otherwise. */
static int find_zig(struct tack_c_compiler *c, char *why, size_t cap)
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
        struct tack_run_result r;
        tack_run(argv, tack_query_limit(), -1, &r);
        int ok = r.end == TACK_RUN_EXITED && r.status == 0 && r.output;
        if (ok)
            tack_first_line(r.output, version, sizeof version);
        if (!ok || version[0] < '0' || version[0] > '9') {
            char said[256];
            tack_run_trouble(&r, "version", said, sizeof said);
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
tack_status tack_c_compiler_find(struct tack_c_compiler *c)
{
    memset(c, 0, sizeof *c);
    const char *cc = getenv("TACK_CC");
    if (cc && *cc) {
        if (!compiler_words(c, cc))
            return out_of_memory();
        if (c->argc == 0 || !find_on_path(c->argv[0], c->path, sizeof c->path) || stat(c->path, &c->st) != 0) {
            tack_c_compiler_free(c);
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
    tack_c_compiler_free(c);
    memset(c, 0, sizeof *c);
    return tack_error_set(TACK_ERUNTIME,
                          "no C compiler found to build kernels for the cpu backend: none of cc, gcc and clang is "
                          "on PATH%s%s. Install one (gcc or clang; Debian and Ubuntu: apt-get install gcc), or "
                          "zig's for Python: pip install tack-arrays[cc] (the ziglang package, in the environment "
                          "of the Python that runs Tack); or set TACK_CC to a compiler command",
                          why[0] ? ", and " : "", why);
}

void tack_c_compiler_describe(tack_component_report *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "C compiler");
    struct tack_c_compiler c;
    if (tack_c_compiler_find(&c) != TACK_OK) {
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
        tack_c_compiler_free(&c);
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
    struct tack_run_result r;
    tack_run(argv, tack_query_limit(), -1, &r);
    if (r.end == TACK_RUN_EXITED && r.status == 0 && r.output) {
        tack_first_line(r.output, line, sizeof line);
    } else if (r.end != TACK_RUN_EXITED) {
        char why[sizeof line - 2];
        tack_run_trouble(&r, "--version", why, sizeof why);
        snprintf(line, sizeof line, "(%s)", why);
    }
    free(r.output);
    free(argv);
    tack_c_compiler_free(&c);
    if (c.identity[0])
        snprintf(out->version, sizeof out->version, "%.40s%s%.80s", c.identity, line[0] ? ", " : "", line);
    else
        snprintf(out->version, sizeof out->version, "%s", line);
}
