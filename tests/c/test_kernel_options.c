/* A kernel's own build options through the C API (tack_kernel_create_with):
 * definitions, include directories and further compiler words reach the
 * cpu backend's C compiler, each entry one word, and key the code kept
 * for it; a relative include directory is the creating call's. NVRTC's
 * share, through tack_kernel_ptx, runs where NVRTC is found. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "kernels.h"
#include "tack/tack.h"

static tack_device *cpu;
static char tmpdir[256];

static int contains(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

/* The value kernel `k` (one float array parameter) stores at index 0. */
static float stored(tack_kernel *k)
{
    int64_t n = 2;
    tack_array *y = NULL;
    float v = -1.0f;
    CHECK_OK(tack_array_empty(cpu, TACK_F32, 1, &n, 0, &y));
    if (!y)
        return v;
    tack_arg args[] = {tack_arg_array(y)};
    if (tack_kernel_launch(k, cpu, n, args, 1) == TACK_OK)
        v = ((const float *)tack_array_data(y))[0];
    else
        fprintf(stderr, "launch failed: %s\n%s\n", tack_last_error(), tack_kernel_compile_log());
    tack_array_release(y);
    return v;
}

static tack_kernel *with(const char *src, const tack_kernel_options *o)
{
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create_with(src, NULL, o, &k));
    return k;
}

/* Files of the cpu backend's code in the store. */
static int kept_objects(void)
{
    char pattern[400];
    snprintf(pattern, sizeof pattern, "%s/cache/cpu-*.so", tmpdir);
    glob_t g;
    int n = glob(pattern, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    globfree(&g);
    return n;
}

static void test_definitions_and_the_key(void)
{
    const char *src = "void scale(tack_index i, float *y) { y[i] = (float)N * V; }";
    const char *four[] = {"N=4", "V=1.5f"}, *eight[] = {"N=8", "V=0.5f + 1.0f"};
    tack_kernel_options o4 = {.defines = four, .ndefines = 2}, o8 = {.defines = eight, .ndefines = 2};
    int before = kept_objects();
    tack_kernel *a = with(src, &o4), *b = with(src, &o8), *c = with(src, &o4);
    /* "V=0.5f + 1.0f" is one word (split, the compiler would take "+" for
     * a file), and a macro's text: 8 * 0.5f + 1.0f. */
    CHECK(a && stored(a) == 6.0f);
    CHECK(b && stored(b) == 5.0f);
    CHECK(c && stored(c) == 6.0f);
    CHECK(kept_objects() == before + 2);
    tack_kernel_release(a);
    tack_kernel_release(b);
    tack_kernel_release(c);
}

static void test_include_dirs_and_options(void)
{
    char dir[400], header[450];
    snprintf(dir, sizeof dir, "%s/inc", tmpdir);
    CHECK(mkdir(dir, 0700) == 0);
    snprintf(header, sizeof header, "%s/phys.h", dir);
    FILE *f = fopen(header, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("#define PHYS_G (9.5f + EXTRA)\n", f);
    fclose(f);
    const char *src = "#include \"phys.h\"\nvoid g(tack_index i, float *y) { y[i] = PHYS_G; }";
    /* Relative to the directory of the call that creates the kernel, not
     * of the compile, which comes later from elsewhere. */
    char was[PATH_MAX];
    CHECK(getcwd(was, sizeof was) != NULL);
    CHECK(chdir(tmpdir) == 0);
    const char *dirs[] = {"inc"}, *opts[] = {"-DEXTRA=0.5f"};
    tack_kernel_options o = {.include_dirs = dirs, .ninclude_dirs = 1, .options = opts, .noptions = 1};
    tack_kernel *k = with(src, &o);
    CHECK(chdir("/") == 0);
    CHECK(k && stored(k) == 10.0f);
    tack_kernel_release(k);
    CHECK(chdir(was) == 0);
}

static void test_a_bad_option_is_a_compile_error(void)
{
    const char *opts[] = {"--no-such-tack-option"};
    tack_kernel_options o = {.options = opts, .noptions = 1};
    tack_kernel *k = with("void b(tack_index i, float *y) { y[i] = 1; }", &o);
    if (!k)
        return;
    CHECK_STATUS(tack_kernel_build(k, cpu), TACK_ECOMPILE);
    CHECK(contains(tack_last_error(), "failed to compile"));
    CHECK(contains(tack_kernel_compile_log(), "--no-such-tack-option"));
    tack_kernel_release(k);
}

/* The element type kernel k's parameter i reads (TACK_BOOL when none). */
static tack_dtype param_dtype(const tack_kernel *k, int i)
{
    tack_kernel_param p;
    return k && tack_kernel_param_info(k, i, &p) == TACK_OK ? p.dtype : TACK_BOOL;
}

/* The definitions are source before the kernel's: they steer a signature
 * under #if as the compiler reads it, and reach the user's code only, so
 * that names Tack's own functions use inside (n, p, v, old, sum, in the
 * reductions' table and the plain atomics) compile. */
static void test_definitions_are_the_kernels_alone(void)
{
    const char *src = "#if WIDE\ntypedef double real;\n#else\ntypedef float real;\n#endif\n"
                      "void w(tack_index i, real *y, uint32_t *c) { y[i] = (real)K; tack_reduce_add(&c[i % 4], 1u); "
                      "tack_atomic_add(&c[4], 2u); }";
    const char *wide[] = {"WIDE", "K=3", "n=bad", "p", "v=(", "old=)", "sum=;", "t", "e=}"},
               *narrow[] = {"WIDE=0", "K=5"};
    tack_kernel_options ow = {.defines = wide, .ndefines = 9}, on = {.defines = narrow, .ndefines = 2};
    tack_kernel *k = with(src, &ow);
    CHECK(k && param_dtype(k, 0) == TACK_F64);
    int64_t n = 10, five = 5;
    tack_array *y = NULL, *c = NULL;
    CHECK_OK(tack_array_empty(cpu, TACK_F64, 1, &n, 0, &y));
    CHECK_OK(tack_array_empty(cpu, TACK_U32, 1, &five, 0, &c));
    if (c)
        memset(tack_array_data(c), 0, 5 * sizeof(uint32_t));
    if (k && y && c) {
        tack_arg args[] = {tack_arg_array(y), tack_arg_array(c)};
        if (tack_kernel_launch(k, cpu, n, args, 2) != TACK_OK)
            fprintf(stderr, "launch failed: %s\n%s\n", tack_last_error(), tack_kernel_compile_log());
        const uint32_t *counts = tack_array_data(c);
        CHECK(((const double *)tack_array_data(y))[9] == 3.0);
        CHECK(counts[0] == 3 && counts[1] == 3 && counts[2] == 2 && counts[3] == 2 && counts[4] == 20);
    }
    tack_array_release(y);
    tack_array_release(c);
    tack_kernel_release(k);
    k = with(src, &on);
    CHECK(k && param_dtype(k, 0) == TACK_F32);
    tack_kernel_release(k);
    /* Without them, the signature's condition is the compiler's to settle:
     * refused, saying where to define the macro. */
    tack_kernel *none = NULL;
    CHECK_STATUS(tack_kernel_create(src, NULL, &none), TACK_EVALUE);
    CHECK(contains(tack_last_error(), "kernel's defines"));
}

/* A definition that would not stay one line of source is refused, naming
 * its entry: a line break, a comment it opens, a final backslash. */
static void test_definitions_that_are_not_one_line(void)
{
    const char *bad[][1] = {{"A=1\nint x;"}, {"A=1 /* 2"}, {"A=1 \\"}, {"A=1\\ \t "}, {""}, {"1A=2"}};
    const char *why[] = {"line break", "comment", "backslash", "backslash", "empty", "identifier"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tack_kernel_options o = {.defines = bad[i], .ndefines = 1};
        tack_kernel *k = NULL;
        CHECK_STATUS(tack_kernel_create_with("void f(tack_index i, float *y) { y[i] = 1; }", NULL, &o, &k),
                     TACK_EVALUE);
        CHECK(!k && contains(tack_last_error(), "defines entry 0") && contains(tack_last_error(), why[i]));
    }
}

/* NVRTC: the definition reaches it (the stored constant's bits are in the
 * PTX), and an option it does not know is its error, with its log. */
static void test_nvrtc_takes_them(void)
{
    const char *one[] = {"VAL=2.0f + 1.0f", "N=4"}, *bad[] = {"-Wall"};
    tack_kernel_options o = {.defines = one, .ndefines = 2};
    tack_kernel_options ob = {.defines = one, .ndefines = 1, .options = bad, .noptions = 1};
    tack_kernel *k = with("void c(tack_index i, float *y) { y[i] = VAL; }", &o);
    const char *ptx = NULL;
    size_t size = 0;
    tack_status st = k ? tack_kernel_ptx(k, NULL, &ptx, &size) : TACK_ERUNTIME;
    if (st != TACK_OK && contains(tack_last_error(), "NVRTC") && !contains(tack_last_error(), "compile")) {
        printf("  (NVRTC not found: %s)\n", tack_last_error());
        tack_kernel_release(k);
        return;
    }
    CHECK_OK(st);
    CHECK(contains(ptx, "1077936128")); /* 3.0f */
    tack_kernel_release(k);
    k = with("void c(tack_index i, float *y) { y[i] = VAL; }", &ob);
    CHECK_STATUS(k ? tack_kernel_ptx(k, NULL, &ptx, &size) : TACK_OK, TACK_ECOMPILE);
    CHECK(contains(tack_last_error(), "-Wall"));
    tack_kernel_release(k);
}

int main(void)
{
    if (!cpu_test_begin(tmpdir, sizeof tmpdir, "kernel-options", 1, &cpu))
        return 1;
    find_venv_nvrtc();
    RUN(test_definitions_and_the_key);
    RUN(test_include_dirs_and_options);
    RUN(test_a_bad_option_is_a_compile_error);
    RUN(test_definitions_are_the_kernels_alone);
    RUN(test_definitions_that_are_not_one_line);
    RUN(test_nvrtc_takes_them);
    tack_device_release(cpu);
    remove_tree(tmpdir);
    CHECK_DONE();
}
