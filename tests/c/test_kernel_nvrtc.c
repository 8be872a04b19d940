/* CUDA source generation and NVRTC compilation to PTX, for every dtype.
 * Needs NVRTC, not a GPU; skipped (exit 77) with the reason where NVRTC
 * cannot be found. */
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tack/tack.h"

/* The project's virtual environment may carry NVRTC (the nvidia-cuda-nvrtc
 * package); the test runs from build/<dir>/ inside the checkout. */
static void find_venv_nvrtc(void)
{
    if (getenv("TACK_NVRTC_LIBRARY"))
        return;
    char exe[PATH_MAX], pattern[PATH_MAX + 96];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = 0;
    for (int up = 0; up < 3; up++) {
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = 0;
    }
    snprintf(pattern, sizeof pattern, "%s/.venv/lib/python3*/site-packages/nvidia/cu*/lib/libnvrtc.so.*", exe);
    glob_t g;
    if (glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            if (!strstr(g.gl_pathv[i], "builtins") && !strstr(g.gl_pathv[i], ".alt.")) {
                setenv("TACK_NVRTC_LIBRARY", g.gl_pathv[i], 1);
                break;
            }
        }
        globfree(&g);
    }
}

static int count(const char *hay, const char *needle)
{
    int c = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        c++;
    return c;
}

static void test_every_dtype(void)
{
    for (int d = 0; d < TACK_NDTYPES; d++) {
        const char *t = tack_dtype_c_type((tack_dtype)d);
        char src[512];
        snprintf(src, sizeof src,
                 "#define SQ(v) ((v) * (v))\n"
                 "static %s helper(%s v) { return SQ(v); }\n"
                 "void k(tack_index i, %s s, const %s *restrict x, %s *y) { y[i] = (%s)(helper(x[i]) * s + (%s)i); }\n",
                 t, t, t, t, t, t, t);
        tack_kernel *k = NULL;
        CHECK_OK(tack_kernel_create(src, NULL, &k));
        if (!k)
            continue;
        const char *ptx = NULL;
        size_t size = 0;
        tack_status st = tack_kernel_ptx(k, NULL, &ptx, &size);
        if (st != TACK_OK) {
            fprintf(stderr, "%s: %s\n%s\n", t, tack_last_error(), tack_kernel_compile_log());
            check_failures++;
        } else {
            CHECK(size == strlen(ptx) + 1);
            CHECK(strstr(ptx, ".entry tack_kernel_entry") != NULL);
            /* n, then the kernel's three parameters */
            CHECK(count(ptx, ".param ") == 4);
            /* cached in the kernel: the same text again */
            const char *again = NULL;
            CHECK_OK(tack_kernel_ptx(k, NULL, &again, &size));
            CHECK(again == ptx);
        }
        tack_kernel_release(k);
    }
}

static void test_arch_and_errors(void)
{
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create("void k(tack_index i, float *y) { y[i] = 1.0f; }", NULL, &k));
    const char *ptx = NULL;
    size_t size = 0;
    CHECK_OK(tack_kernel_ptx(k, "compute_90", &ptx, &size));
    CHECK(ptx && strstr(ptx, ".target sm_90") != NULL);
    tack_kernel_release(k);

    CHECK_OK(tack_kernel_create("void bad(tack_index i, float *y) {\n  y[i] = nope;\n}", NULL, &k));
    ptx = (const char *)0x1;
    CHECK_STATUS(tack_kernel_ptx(k, NULL, &ptx, &size), TACK_ERUNTIME);
    CHECK(ptx == (const char *)0x1);
    CHECK(strstr(tack_last_error(), "kernel 'bad' failed to compile for CUDA") != NULL);
    /* NVRTC writes "kernel(2): error": the user's line. */
    CHECK(strstr(tack_kernel_compile_log(), "kernel(2)") != NULL);
    tack_kernel_release(k);
}

int main(void)
{
    char cache[] = "/tmp/tack-test-nvrtc-XXXXXX";
    if (!mkdtemp(cache))
        return 1;
    setenv("TACK_CACHE_DIR", cache, 1);
    find_venv_nvrtc();
    tack_kernel *probe = NULL;
    const char *ptx;
    size_t size;
    if (tack_kernel_create("void p(tack_index i, float *y) { y[i] = 0; }", NULL, &probe) != TACK_OK)
        return 1;
    tack_status st = tack_kernel_ptx(probe, NULL, &ptx, &size);
    tack_kernel_release(probe);
    if (st != TACK_OK && strstr(tack_last_error(), "NVRTC") && strstr(tack_last_error(), "not")) {
        printf("SKIP: NVRTC is not available here: %s\n", tack_last_error());
        return 77;
    }
    RUN(test_every_dtype);
    RUN(test_arch_and_errors);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cache);
    CHECK_DONE();
}
