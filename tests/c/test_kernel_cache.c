/* The host kernel cache under the sanitizers: a compiler's command line of
 * any length, the cache held to TACK_CACHE_MAX, and a bound that is not a
 * size refused. Each case in a child process (check.h). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "../../src/core/backend.h"
#include "internal.h"
#include "kernels.h"
#include "tack/tack.h"
#include "toolchain.h"
#include "../../src/kernel/kernel.h"

static tack_device *cpu;
static char cache[256];

static const char value_source[] = "#ifndef VALUE\n#define VALUE 1\n#endif\n"
                                   "void value(tack_index i, int32_t *y) { y[i] = VALUE + 0 * (int32_t)i; }\n";

/* The kernel `src` run over 4 int32: its y[3], or -1 with the failure
 * reported at the caller's line. */
static int32_t run_at(const char *file, int line, const char *src)
{
    tack_kernel *k = NULL;
    tack_array *y = NULL;
    int64_t n = 4;
    int32_t got = -1;
    CHECK_OK_AT(file, line, tack_kernel_compile(src, NULL, cpu, &k));
    CHECK_OK_AT(file, line, tack_array_empty(cpu, TACK_I32, 1, &n, 0, &y));
    if (k && y) {
        tack_arg args[] = {tack_arg_array(y)};
        CHECK_OK_AT(file, line, tack_kernel_call(k, args, 1));
        got = ((int32_t *)tack_array_data(y))[3];
    }
    tack_array_release(y);
    tack_kernel_release(k);
    return got;
}
#define run_value(src) run_at(__FILE__, __LINE__, src)

/* Bytes in the cache directory's files. */
static long long cache_bytes(void)
{
    DIR *d = opendir(cache);
    long long total = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", cache, e->d_name);
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
            total += (long long)st.st_size;
    }
    if (d)
        closedir(d);
    return total;
}

/* 40 words of TACK_CC and 40 of TACK_CFLAGS overran a command line of 48
 * words on the stack; the 40th word of TACK_CFLAGS must take effect. */
static void test_a_long_command_line_reaches_the_compiler_whole(void)
{
    char cc[256] = "cc", flags[256] = "";
    for (int i = 1; i < 40; i++)
        strcat(cc, " -w");
    for (int i = 1; i < 40; i++)
        strcat(flags, "-w ");
    strcat(flags, "-DVALUE=40");
    setenv("TACK_CC", cc, 1);
    setenv("TACK_CFLAGS", flags, 1);
    CHECK(run_value(value_source) == 40);
    unsetenv("TACK_CFLAGS");
    CHECK(run_value(value_source) == 1);
}

/* Kernels stored one after another into a cache bounded at 48 KiB (about
 * two objects with their sources): the cache never holds more, and the
 * object just stored is there. */
static void test_the_cache_is_held_to_tack_cache_max(void)
{
    setenv("TACK_CACHE_MAX", "48K", 1);
    for (int i = 2; i < 8; i++) {
        char src[160];
        snprintf(src, sizeof src, "void bounded%d(tack_index i, int32_t *y) { y[i] = %d + 0 * (int32_t)i; }", i, i);
        CHECK(run_value(src) == i);
        CHECK(cache_bytes() <= 48 * 1024);
        CHECK(cache_bytes() > 0);
    }
}

/* A bound that is not a size is refused before anything is compiled,
 * naming the variable. */
static void test_a_tack_cache_max_that_is_not_a_size_is_refused(void)
{
    static const char *const bad[] = {"lots", "12Q", "-1", "1.5G", "99999999999999999999G"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("TACK_CACHE_MAX", bad[i], 1);
        tack_kernel *k = (tack_kernel *)0x1;
        CHECK_STATUS(tack_kernel_compile(value_source, NULL, cpu, &k), TACK_ERUNTIME);
        CHECK(k == (tack_kernel *)0x1);
        CHECK(strstr(tack_last_error(), "TACK_CACHE_MAX") && strstr(tack_last_error(), bad[i]));
    }
    setenv("TACK_CACHE_MAX", "1G", 1);
    CHECK(run_value(value_source) == 1);
}

/* Files in the cache directory whose names end in `suffix`; the last
 * one's name into last. */
static int count_files(const char *suffix, char *last, size_t cap)
{
    DIR *d = opendir(cache);
    int n = 0;
    size_t sl = strlen(suffix);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len > sl && !strcmp(e->d_name + len - sl, suffix) && strncmp(e->d_name, "tmp-", 4)) {
            n++;
            snprintf(last, cap, "%s", e->d_name);
        }
    }
    if (d)
        closedir(d);
    return n;
}

/* The cpu backend builds through the toolchain slots of its table, as
 * every backend does: its kernel_key gives host code a key, and the object
 * lands in the store once, under the name the kernel layer gives every
 * backend's code (a digest of Tack's version, the backend, the kind, the
 * key, the kernel's options and the generated source). A second kernel of
 * the same source finds it there: nothing is compiled again. */
static void test_the_cpu_backend_builds_through_its_table(void)
{
    remove_tree(cache);
    CHECK(mkdir(cache, 0700) == 0);
    const struct tack_backend_ops *ops = tack_backend_find("cpu", 3);
    CHECK(ops && tack_backend_dialect(ops) && tack_backend_keeps_code(ops));
    if (!ops || !tack_backend_dialect(ops) || !tack_backend_keeps_code(ops))
        return;
    tack_kernel *k = NULL;
    const char *generated = NULL;
    CHECK_OK(tack_kernel_create(value_source, NULL, &k));
    CHECK_OK(tack_kernel_generated_source(k, "cpu", &generated));
    /* A kernel's options as the kernel layer keeps them: none given. */
    struct tack_build_options none;
    CHECK_OK(tack_build_options_copy(NULL, &none));
    struct tack_compile job = {.name = "value", .source = generated, .options = &none};
    CHECK_OK(tack_backend_kernel_key(ops, &job));
    CHECK(job.kind == TACK_CODE_HOST && job.key[0]);

    CHECK(run_value(value_source) == 1);
    char name[256] = "", want[256];
    CHECK(count_files(".so", name, sizeof name) == 1);
    tack_sha256 h;
    char hex[65];
    tack_sha256_init(&h);
    tack_sha256_field(&h, "tack " TACK_VERSION_STRING);
    tack_sha256_field(&h, "cpu");
    tack_sha256_field(&h, tack_code_kind_name(TACK_CODE_HOST));
    tack_sha256_field(&h, job.key);
    tack_sha256_field(&h, none.text);
    tack_sha256_field(&h, generated);
    tack_sha256_hex(&h, hex);
    snprintf(want, sizeof want, "cpu-%s.so", hex);
    CHECK(!strcmp(name, want));

    /* Found again, not rebuilt: the object keeps its inode. */
    char path[PATH_MAX];
    struct stat before, after;
    snprintf(path, sizeof path, "%s/%s", cache, want);
    CHECK(stat(path, &before) == 0);
    CHECK(run_value(value_source) == 1);
    CHECK(stat(path, &after) == 0);
    CHECK(before.st_ino == after.st_ino);
    CHECK(count_files(".so", name, sizeof name) == 1);
    tack_build_options_free(&none);
    tack_kernel_release(k);
}

int main(void)
{
    if (!cpu_test_begin(cache, sizeof cache, "kernel-cache", 0, &cpu))
        return 1;
    RUN(test_a_long_command_line_reaches_the_compiler_whole);
    RUN(test_the_cache_is_held_to_tack_cache_max);
    RUN(test_a_tack_cache_max_that_is_not_a_size_is_refused);
    RUN(test_the_cpu_backend_builds_through_its_table);
    tack_device_release(cpu);
    remove_tree(cache);
    CHECK_DONE();
}
