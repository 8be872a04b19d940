/* What the kernel tests share: a compile cache of their own, the saxpy
 * kernel they launch and the host loop that runs it where a simulated
 * driver stands in for the GPU, and finding NVRTC. A helper's failed check
 * is reported at the line of the test that called it. */
#ifndef TACK_TEST_KERNELS_H
#define TACK_TEST_KERNELS_H

#include <glob.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tack/kernel.h"
#include "tack/tack.h"

/* ---- the compile cache ----------------------------------------------------- */

/* Makes a fresh folder from `dir` (a mkdtemp template, rewritten in place)
 * and points TACK_CACHE_DIR at it, so a run neither reuses an earlier run's
 * kernels nor leaves its own in the user's cache. Zero if it cannot. */
static inline int cache_dir_set(char *dir)
{
    if (!mkdtemp(dir))
        return 0;
    setenv("TACK_CACHE_DIR", dir, 1);
    return 1;
}

/* Begins a kernel test on the cpu backend: a fresh folder
 * /tmp/tack-test-<name>-XXXXXX, its path written into `dir` (`cap` bytes),
 * holding the compile cache (the folder itself, or with `beside` its
 * subfolder `cache`, for a test that keeps files of its own beside it),
 * and *cpu opened with the compiler, flags and cache size Tack chooses
 * itself, whatever the environment the test runs in says. Zero, the
 * reason printed, if it cannot. */
static inline int cpu_test_begin(char *dir, size_t cap, const char *name, int beside, tack_device **cpu)
{
    snprintf(dir, cap, "/tmp/tack-test-%s-XXXXXX", name);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 0;
    }
    char cache[PATH_MAX];
    snprintf(cache, sizeof cache, beside ? "%s/cache" : "%s", dir);
    setenv("TACK_CACHE_DIR", cache, 1);
    unsetenv("TACK_CC");
    unsetenv("TACK_CFLAGS");
    unsetenv("TACK_CACHE_MAX");
    if (tack_device_open("cpu", NULL, 0, cpu) != TACK_OK) {
        fprintf(stderr, "%s\n", tack_last_error());
        return 0;
    }
    return 1;
}

/* Removes folder `dir` and everything in it. */
static inline void remove_tree(const char *dir)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* ---- saxpy ----------------------------------------------------------------- */

static const char saxpy_source[] =
    "void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }\n";

/* saxpy over n elements as the GPU would run it, on the simulator's host
 * copies of x and y (nothing when the simulator does not know either). */
static inline void saxpy_on_host(int64_t n, float a, const float *x, float *y)
{
    if (x && y)
        for (int64_t i = 0; i < n; i++)
            y[i] = a * x[i] + y[i];
}

/* Calls kernel k, a saxpy, over x and y. */
static inline tack_status saxpy_call(tack_kernel *k, float a, tack_array *x, tack_array *y)
{
    tack_arg args[3] = {tack_arg_f32(a), tack_arg_array(x), tack_arg_array(y)};
    return tack_kernel_call(k, args, 3);
}

static inline int kernels_saxpy_open(const char *file, int line, const char *name, tack_device **device,
                                     tack_kernel **kernel)
{
    CHECK_OK_AT(file, line, tack_device_open(name, NULL, 0, device));
    if (*device)
        CHECK_OK_AT(file, line, tack_kernel_compile(saxpy_source, NULL, *device, kernel));
    return *device && *kernel;
}

static inline void kernels_saxpy_close(const char *file, int line, tack_device *device, tack_kernel *kernel)
{
    tack_kernel_release(kernel);
    CHECK_OK_AT(file, line, tack_device_synchronize(device));
    tack_device_release(device);
}

/* Opens device `name` into *device and compiles saxpy there into *kernel;
 * whether both were made. */
#define saxpy_open(name, device, kernel) kernels_saxpy_open(__FILE__, __LINE__, (name), (device), (kernel))
/* Releases the kernel, then the device once everything queued on it ran. */
#define saxpy_close(device, kernel) kernels_saxpy_close(__FILE__, __LINE__, (device), (kernel))

/* ---- compiler failures ------------------------------------------------------ */

static inline void kernels_missing_compiler(const char *file, int line, tack_device *device, const char *variable,
                                            const char *path, const char *says, const char *says_too)
{
    const char *src = "void g(tack_index i, int32_t *y) { y[i] = 1; }";
    char *saved = strdup(getenv(variable));
    setenv(variable, path, 1);
    tack_kernel *k = NULL;
    CHECK_STATUS_AT(file, line, tack_kernel_compile(src, NULL, device, &k), TACK_ERUNTIME);
    CHECK_AT(file, line, strstr(tack_last_error(), says) && strstr(tack_last_error(), says_too));
    /* Not remembered: with the compiler back, the same kernel builds. */
    setenv(variable, saved, 1);
    CHECK_OK_AT(file, line, tack_kernel_compile(src, NULL, device, &k));
    tack_kernel_release(k);
    free(saved);
}

/* Checks that with environment variable `variable` naming `path`, where no
 * compiler library is, compiling on `device` is a runtime error whose
 * message contains `says` and `says_too`; and that once the variable is
 * restored the same kernel compiles. */
#define CHECK_MISSING_COMPILER(device, variable, path, says, says_too)                                       \
    kernels_missing_compiler(__FILE__, __LINE__, (device), (variable), (path), (says), (says_too))

/* ---- NVRTC ------------------------------------------------------------------- */

/* The project's virtual environment may carry NVRTC (the nvidia-cuda-nvrtc
 * package): unless TACK_NVRTC_LIBRARY names one, look for it in the folders
 * above the test executable, which is built inside the checkout. */
static inline void find_venv_nvrtc(void)
{
    if (getenv("TACK_NVRTC_LIBRARY"))
        return;
    char dir[PATH_MAX], pattern[PATH_MAX + 96];
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0)
        return;
    dir[n] = 0;
    for (char *slash = strrchr(dir, '/'); slash && slash != dir; slash = strrchr(dir, '/')) {
        *slash = 0;
        snprintf(pattern, sizeof pattern, "%s/.venv/lib/python3*/site-packages/nvidia/cu*/lib/libnvrtc.so.*", dir);
        glob_t g;
        if (glob(pattern, 0, NULL, &g) != 0)
            continue;
        for (size_t i = 0; i < g.gl_pathc; i++) {
            if (!strstr(g.gl_pathv[i], "builtins") && !strstr(g.gl_pathv[i], ".alt.")) {
                setenv("TACK_NVRTC_LIBRARY", g.gl_pathv[i], 1);
                break;
            }
        }
        globfree(&g);
        return;
    }
}

/* Finds NVRTC and compiles saxpy to PTX with it. 0 when that works; 77
 * (the skip status), having said why, when NVRTC cannot be loaded; 1 when
 * no kernel can be made at all. A PTX compile that fails for another
 * reason is not a skip: the test's cases then fail. */
static inline int nvrtc_probe(void)
{
    find_venv_nvrtc();
    tack_kernel *probe = NULL;
    const char *ptx;
    size_t size;
    if (tack_kernel_create(saxpy_source, NULL, &probe) != TACK_OK)
        return 1;
    tack_status st = tack_kernel_ptx(probe, NULL, &ptx, &size);
    tack_kernel_release(probe);
    if (st != TACK_OK && strstr(tack_last_error(), "NVRTC") && strstr(tack_last_error(), "not")) {
        printf("SKIP: NVRTC is not available here: %s\n", tack_last_error());
        return 77;
    }
    return 0;
}

/* Begins a test that needs NVRTC: a fresh compile cache made from the
 * template `cache` (as cache_dir_set does), then nvrtc_probe. 0 to go on;
 * otherwise the status to exit with, the cache already removed. */
static inline int nvrtc_test_begin(char *cache)
{
    if (!cache_dir_set(cache))
        return 1;
    int status = nvrtc_probe();
    if (status)
        remove_tree(cache);
    return status;
}

#endif
