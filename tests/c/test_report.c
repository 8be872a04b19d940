/* tack_backend_describe and tack_kernel_cache_dir: what a bug report is
 * made of, against the simulated drivers and compilers this test is run
 * with (TACK_CUDA_LIBRARY, TACK_HIP_LIBRARY, TACK_HIPRTC_LIBRARY,
 * TACK_LEVEL_ZERO_LIBRARY and TACK_OCLOC_LIBRARY name tests/sim builds).
 * Drivers load once per process, so each case runs in a child. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "tack/tack.h"

static int starts_with(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

static const char *sim(const char *variable)
{
    const char *path = getenv(variable);
    if (!path || !*path) {
        fprintf(stderr, "%s does not name a simulated library\n", variable);
        exit(1);
    }
    return path;
}

static void test_backend_names(void)
{
    const char *const *names = tack_backend_names();
    const char *want[] = {"cpu", "cuda", "hip", "level_zero", NULL};
    for (int i = 0; want[i]; i++)
        CHECK(names[i] && !strcmp(names[i], want[i]));
    CHECK(names[4] == NULL);
}

static void test_unknown_backend_changes_nothing(void)
{
    tack_backend_report r;
    memset(&r, 0x5a, sizeof r);
    tack_backend_report before = r;
    CHECK_STATUS(tack_backend_describe("vulkan", &r), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "'vulkan'") && strstr(tack_last_error(), "'level_zero'"));
    CHECK(!memcmp(&r, &before, sizeof r));
    CHECK_STATUS(tack_backend_describe(NULL, &r), TACK_EVALUE);
    CHECK(!memcmp(&r, &before, sizeof r));
}

static void test_cpu(void)
{
    tack_backend_report r;
    CHECK_OK(tack_backend_describe("cpu", &r));
    CHECK(!strcmp(r.backend, "cpu"));
    CHECK(r.driver.found && starts_with(r.driver.note, "none needed"));
    CHECK(r.device_count == 1 && strstr(r.devices[0], "thread"));
    CHECK(!strcmp(r.compiler.name, "C compiler"));
    /* The machines that run this test have a C compiler: they built it. */
    CHECK(r.compiler.found && r.compiler.path[0] == '/' && r.compiler.version[0]);
    CHECK(strstr(r.compiler.note, "on PATH") || strstr(r.compiler.note, "TACK_CC"));
}

/* The report of `backend` on its simulated driver, the library `variable`
 * names, at `version`. */
static tack_backend_report simulated(const char *backend, const char *variable, const char *version)
{
    tack_backend_report r;
    CHECK_OK(tack_backend_describe(backend, &r));
    CHECK(r.driver.found && !strcmp(r.driver.path, sim(variable)));
    CHECK(!strcmp(r.driver.version, version));
    return r;
}

/* The report's compiler is the simulated `name`, the library `variable`
 * names, at `version`. */
static void simulated_compiler(const tack_backend_report *r, const char *name, const char *variable,
                               const char *version)
{
    CHECK(!strcmp(r->compiler.name, name) && r->compiler.found);
    CHECK(!strcmp(r->compiler.path, sim(variable)) && !strcmp(r->compiler.version, version));
}

static void test_cuda_on_the_simulator(void)
{
    tack_backend_report r = simulated("cuda", "TACK_CUDA_LIBRARY", "13.0");
    CHECK(r.device_count == 1 && starts_with(r.devices[0], "Tack simulated GPU 0, compute capability "));
    CHECK(!strcmp(r.compiler.name, "NVRTC"));
    /* NVRTC is real where it is installed; missing, it says what to install. */
    CHECK(r.compiler.found ? r.compiler.path[0] != 0 : strstr(r.compiler.note, "NVRTC") != NULL);
}

static void test_hip_on_the_simulator(void)
{
    tack_backend_report r = simulated("hip", "TACK_HIP_LIBRARY", "6.2.0");
    CHECK(r.device_count == 2);
    CHECK(!strcmp(r.devices[0], "Tack simulated HIP GPU 0") && !strcmp(r.devices[1], "Tack simulated HIP GPU 1"));
    simulated_compiler(&r, "hipRTC", "TACK_HIPRTC_LIBRARY", "6.2");
}

static void test_level_zero_on_the_simulator(void)
{
    tack_backend_report r = simulated("level_zero", "TACK_LEVEL_ZERO_LIBRARY", "driverVersion 65536");
    CHECK(r.device_count == 2 && starts_with(r.devices[1], "Tack simulated Level Zero GPU 1, device id 0x"));
    simulated_compiler(&r, "ocloc", "TACK_OCLOC_LIBRARY", "0.0.0-tack-sim");
}

static void no_cuda_driver(void) { setenv("TACK_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1); }

/* A missing driver is a report, not a failure: why, and no message left
 * in the thread's (a call that succeeds leaves ""). */
static void test_missing_driver_says_why(void)
{
    tack_device *d = NULL;
    CHECK_STATUS(tack_device_open("no-such-backend", NULL, 0, &d), TACK_EVALUE);
    tack_backend_report r;
    CHECK_OK(tack_backend_describe("cuda", &r));
    CHECK(!r.driver.found && r.device_count == 0 && !r.driver.path[0]);
    CHECK(strstr(r.driver.note, "/nonexistent/libcuda.so.1") && strstr(r.driver.note, "No such file"));
    CHECK(strstr(r.driver.note, "TACK_CUDA_LIBRARY"));
    CHECK(!strcmp(tack_last_error(), ""));
    /* Opening the device afterwards fails the same way: one load. */
    CHECK_STATUS(tack_device_open("cuda", NULL, 0, &d), TACK_ENODEVICE);
    CHECK(strstr(tack_last_error(), "/nonexistent/libcuda.so.1"));
}

static char cache_root[] = "/tmp/tack-report-XXXXXX";

static void private_cache(void)
{
    if (!mkdtemp(cache_root))
        exit(1);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/a/b", cache_root);
    setenv("TACK_CACHE_DIR", dir, 1);
}

static void test_cache_dir(void)
{
    char dir[4096], want[128];
    snprintf(want, sizeof want, "%s/a/b", cache_root);
    CHECK_OK(tack_kernel_cache_dir(dir, sizeof dir));
    CHECK(!strcmp(dir, want));
    struct stat st;
    CHECK(stat(want, &st) == 0 && S_ISDIR(st.st_mode));
    char small[8] = "unset";
    CHECK_STATUS(tack_kernel_cache_dir(small, sizeof small), TACK_EVALUE);
    CHECK(!strcmp(small, "unset"));
    rmdir(want);
    snprintf(want, sizeof want, "%s/a", cache_root);
    rmdir(want);
    rmdir(cache_root);
}

int main(void)
{
    RUN(test_backend_names);
    RUN(test_unknown_backend_changes_nothing);
    RUN(test_cpu);
    RUN(test_cuda_on_the_simulator);
    RUN(test_hip_on_the_simulator);
    RUN(test_level_zero_on_the_simulator);
    RUN_AFTER(no_cuda_driver, test_missing_driver_says_why);
    RUN_AFTER(private_cache, test_cache_dir);
    CHECK_DONE();
}
