/* A kernel's own build options: checked once, copied, and written as one
 * text that keys the kernel's kept code, so that two kernels of one source
 * built with other definitions never share an object. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel.h"

void tack_build_options_free(struct tack_build_options *o)
{
    char **lists[] = {o->defines, o->include_dirs, o->options};
    size_t counts[] = {o->ndefines, o->ninclude_dirs, o->noptions};
    for (int l = 0; l < 3; l++) {
        for (size_t i = 0; lists[l] && i < counts[l]; i++)
            free(lists[l][i]);
        free(lists[l]);
    }
    free(o->text);
    free(o->head);
    memset(o, 0, sizeof *o);
}

static int is_identifier(const char *s, size_t len)
{
    if (!len || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return 0;
    }
    return 1;
}

/* Whether a macro named `name` would take one of Tack's own names. */
static int reserved(const char *name) { return !strncmp(name, "tack_", 5) || !strncmp(name, "TACK_", 5); }

/* Why entry i of list `what` cannot be passed on, or NULL. A line break
 * would end a directive the compiler reads, or a line of the key's text. */
static const char *refusal(const char *what, const char *entry)
{
    if (!entry)
        return "is NULL";
    if (!entry[0])
        return "is empty";
    if (strpbrk(entry, "\n\r"))
        return "holds a line break";
    if (!strcmp(what, "defines")) {
        const char *eq = strchr(entry, '=');
        if (!is_identifier(entry, eq ? (size_t)(eq - entry) : strlen(entry)))
            return "does not begin with an identifier (write NAME or NAME=VALUE)";
        /* Written as a #define line: a comment begun there would run on
         * into the lines after it, a final backslash join the next (as
         * compilers read it, blanks after it or not). */
        if (eq && strstr(eq, "/*"))
            return "opens a comment (/*) in its value";
        size_t end = strlen(entry);
        while (eq && end > 0 && strchr(" \t\f\v", entry[end - 1]))
            end--;
        if (eq && end > 0 && entry[end - 1] == '\\')
            return "ends with a backslash, which would continue the definition onto the next line";
        /* Tack's generated code names its own types and helpers so; a
         * definition of one would reach Tack's side of the kernel. */
        if (reserved(entry))
            return "names a macro beginning tack_ or TACK_: those names are Tack's own (its prelude and generated "
                   "code use them); choose another name";
    }
    /* The same as a compiler's flag, -Dtack_x or -Utack_x. */
    if (!strcmp(what, "options") && (!strncmp(entry, "-D", 2) || !strncmp(entry, "-U", 2)) && reserved(entry + 2))
        return "defines or undefines a macro beginning tack_ or TACK_: those names are Tack's own (its prelude and "
               "generated code use them); choose another name";
    return NULL;
}

/* Copies list `what` of n entries into *out (NULL for none). */
static tack_status copy_list(const char *what, const char *const *in, size_t n, char ***out)
{
    *out = NULL;
    if (!n)
        return TACK_OK;
    if (!in)
        return tack_error_set(TACK_EVALUE, "kernel options: %s is NULL but its count is %zu", what, n);
    for (size_t i = 0; i < n; i++) {
        const char *why = refusal(what, in[i]);
        if (why)
            return tack_error_set(TACK_EVALUE, "kernel options: %s entry %zu %s", what, i, why);
    }
    char **copy = calloc(n, sizeof *copy);
    if (!copy)
        return tack_error_set(TACK_ENOMEM, "out of memory copying kernel options");
    for (size_t i = 0; i < n; i++) {
        if (!(copy[i] = strdup(in[i]))) {
            for (size_t j = 0; j < i; j++)
                free(copy[j]);
            free(copy);
            return tack_error_set(TACK_ENOMEM, "out of memory copying kernel options");
        }
    }
    *out = copy;
    return TACK_OK;
}

/* Makes each relative directory of dirs[0..n) absolute against the
 * working directory now: the C compiler runs later, in whatever directory
 * the process is in by then, and a compiler in process (NVRTC) has no
 * directory of its own to resolve against. The key then names the
 * directory meant. TACK_ERUNTIME when the working directory cannot be
 * read; TACK_ENOMEM. On error dirs is as it was. */
static tack_status absolute_dirs(char **dirs, size_t n)
{
    size_t relative = 0;
    for (size_t i = 0; i < n; i++)
        relative += dirs[i][0] != '/';
    if (!relative)
        return TACK_OK;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        return tack_error_set(TACK_ERUNTIME,
                              "kernel options: include_dirs holds a relative directory, and the working directory "
                              "it is relative to cannot be read (%s); give the directory as an absolute path",
                              strerror(errno));
    char **made = calloc(n, sizeof *made);
    if (!made)
        return tack_error_set(TACK_ENOMEM, "out of memory copying kernel options");
    for (size_t i = 0; i < n; i++) {
        if (dirs[i][0] == '/')
            continue;
        size_t len = strlen(cwd) + 1 + strlen(dirs[i]) + 1;
        if (!(made[i] = malloc(len))) {
            for (size_t j = 0; j < i; j++)
                free(made[j]);
            free(made);
            return tack_error_set(TACK_ENOMEM, "out of memory copying kernel options");
        }
        /* "." stays the directory itself, not "<cwd>/.": one key for both. */
        if (!strcmp(dirs[i], "."))
            snprintf(made[i], len, "%s", cwd);
        else
            snprintf(made[i], len, "%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "", dirs[i]);
    }
    for (size_t i = 0; i < n; i++) {
        if (made[i]) {
            free(dirs[i]);
            dirs[i] = made[i];
        }
    }
    free(made);
    return TACK_OK;
}

/* What a compile job made without options (a backend's own test) reads. */
static const struct tack_build_options no_options;

char **tack_build_options_words(const struct tack_build_options *o, size_t *count)
{
    if (!o)
        o = &no_options;
    size_t n = o->ninclude_dirs + o->noptions, bytes = (n + 1) * sizeof(char *);
    for (size_t i = 0; i < o->ninclude_dirs; i++)
        bytes += 2 + strlen(o->include_dirs[i]) + 1;
    for (size_t i = 0; i < o->noptions; i++)
        bytes += strlen(o->options[i]) + 1;
    char **words = malloc(bytes);
    if (!words)
        return NULL;
    char *room = (char *)(words + n + 1), *end = (char *)words + bytes;
    size_t w = 0;
    for (size_t i = 0; i < o->ninclude_dirs; i++, w++)
        room += snprintf(words[w] = room, (size_t)(end - room), "-I%s", o->include_dirs[i]) + 1;
    for (size_t i = 0; i < o->noptions; i++, w++)
        room += snprintf(words[w] = room, (size_t)(end - room), "%s", o->options[i]) + 1;
    words[n] = NULL;
    *count = n;
    return words;
}

/* How far into an include directory its files key the code: deep and
 * wide enough for a project's headers, bounded for a directory such as
 * /usr/include, which a kernel's key would otherwise read whole. */
#define HEADER_DEPTH 4
#define HEADER_FILES 4096

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Digests what each file under directory `path` is (its name, size,
 * modification time and inode), in name order, down to HEADER_DEPTH
 * levels and *budget entries, so that an edited or replaced header keys
 * other code. A directory that cannot be read digests as such (the
 * compile will say more). */
static void digest_dir(tack_sha256 *h, const char *path, int depth, size_t *budget)
{
    DIR *d = opendir(path);
    if (!d) {
        tack_sha256_field(h, "unreadable");
        return;
    }
    size_t n = 0, cap = 0;
    char **names = NULL;
    for (struct dirent *e; *budget && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (n == cap) {
            size_t more = cap ? 2 * cap : 64;
            char **grown = realloc(names, more * sizeof *grown);
            if (!grown)
                break;
            names = grown;
            cap = more;
        }
        if (!(names[n] = strdup(e->d_name)))
            break;
        n++;
        (*budget)--;
    }
    if (n)
        qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        char line[PATH_MAX + 96];
        if (fstatat(dirfd(d), names[i], &st, 0) != 0) {
            snprintf(line, sizeof line, "%s ?", names[i]);
            tack_sha256_field(h, line);
        } else if (S_ISREG(st.st_mode)) {
            snprintf(line, sizeof line, "%s %lld %lld.%09ld %llu", names[i], (long long)st.st_size,
                     (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec, (unsigned long long)st.st_ino);
            tack_sha256_field(h, line);
        } else if (S_ISDIR(st.st_mode) && depth > 1) {
            snprintf(line, sizeof line, "%s/", names[i]);
            tack_sha256_field(h, line);
            char sub[PATH_MAX];
            if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path, names[i]) < sizeof sub)
                digest_dir(h, sub, depth - 1, budget);
            tack_sha256_field(h, "..");
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(d);
}

void tack_build_options_digest(const struct tack_build_options *o, char out[65])
{
    if (!o)
        o = &no_options;
    tack_sha256 h;
    tack_sha256_init(&h);
    tack_sha256_field(&h, o->text ? o->text : "");
    size_t budget = HEADER_FILES;
    for (size_t i = 0; i < o->ninclude_dirs; i++) {
        tack_sha256_field(&h, o->include_dirs[i]);
        digest_dir(&h, o->include_dirs[i], HEADER_DEPTH, &budget);
    }
    tack_sha256_hex(&h, out);
}

/* The definitions as #define lines (tack_build_options.head). */
static char *defines_head(const struct tack_build_options *o)
{
    struct tack_source t = {0};
    for (size_t i = 0; i < o->ndefines; i++) {
        const char *d = o->defines[i], *eq = strchr(d, '=');
        if (eq)
            tack_source_put(&t, "#define %.*s %s\n", (int)(eq - d), d, eq + 1);
        else
            tack_source_put(&t, "#define %s 1\n", d);
    }
    return tack_source_finish(&t);
}

/* "checked\n" then one line per entry, each tagged with its list. */
static char *options_text(const struct tack_build_options *o)
{
    struct tack_source t = {0};
    tack_source_put(&t, "checked %d\n", o->checked);
    for (size_t i = 0; i < o->ndefines; i++)
        tack_source_put(&t, "D %s\n", o->defines[i]);
    for (size_t i = 0; i < o->ninclude_dirs; i++)
        tack_source_put(&t, "I %s\n", o->include_dirs[i]);
    for (size_t i = 0; i < o->noptions; i++)
        tack_source_put(&t, "O %s\n", o->options[i]);
    return tack_source_finish(&t);
}

tack_status tack_build_options_check_names(const struct tack_build_options *o, const char *kernel)
{
    size_t n = strlen(kernel);
    for (size_t i = 0; i < o->ndefines; i++) {
        const char *d = o->defines[i];
        if (!strncmp(d, kernel, n) && !strncmp(d + n, "_tack_", 6))
            return tack_error_set(TACK_EVALUE,
                                  "kernel options: defines entry %zu names a macro beginning %s_tack_: names of "
                                  "kernel '%s' followed by _tack_ are Tack's own (its copies of the kernel); "
                                  "choose another name",
                                  i, kernel, kernel);
    }
    return TACK_OK;
}

tack_status tack_build_options_copy(const tack_kernel_options *in, struct tack_build_options *out)
{
    static const tack_kernel_options none;
    if (!in)
        in = &none;
    memset(out, 0, sizeof *out);
    tack_status st = copy_list("defines", in->defines, in->ndefines, &out->defines);
    out->ndefines = out->defines ? in->ndefines : 0;
    if (st == TACK_OK)
        st = copy_list("include_dirs", in->include_dirs, in->ninclude_dirs, &out->include_dirs);
    out->ninclude_dirs = out->include_dirs ? in->ninclude_dirs : 0;
    if (st == TACK_OK)
        st = copy_list("options", in->options, in->noptions, &out->options);
    out->noptions = out->options ? in->noptions : 0;
    if (st == TACK_OK)
        st = absolute_dirs(out->include_dirs, out->ninclude_dirs);
    const char *env = getenv("TACK_CHECKED");
    out->checked = in->checked || (env && env[0] && strcmp(env, "0") != 0);
    if (st == TACK_OK && (!(out->text = options_text(out)) || (out->ndefines && !(out->head = defines_head(out)))))
        st = tack_error_set(TACK_ENOMEM, "out of memory copying kernel options");
    if (st != TACK_OK)
        tack_build_options_free(out);
    return st;
}
