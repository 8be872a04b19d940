/*
 * Kernels on the HIP backend, end to end, against the simulated runtime
 * (tests/sim/hip_sim.c) and the simulated hipRTC (tests/sim/hiprtc_sim.c).
 * The simulator cannot run GPU code, so a host implementation of saxpy,
 * installed as its kernel hook, stands in for the GPU when the launch runs;
 * what is checked is what Tack does: the source it generates, the
 * arguments it binds and their order, the geometry, the order against
 * copies, and the checks and errors around them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arrays.h"
#include "check.h"
#include "kernels.h"
#include "grid2d.h"
#include "sim.h"
#include "standin.h"
#include "tack/kernel.h"
#include "tack/tack.h"

typedef void *(*capture_fn)(const char *name, void **params, const unsigned grid[3], const unsigned block[3]);
typedef void (*run_fn)(void *closure);

static long long (*sim_stats)(const char *name);
static void (*sim_set_kernel_hook)(capture_fn capture, run_fn run);
static void (*sim_last_launch)(unsigned grid[3], unsigned block[3]);
static long long (*rtc_stats)(const char *name);
static const char *(*rtc_last_source)(void);
static const char *(*rtc_last_options)(void);

static void sim_open(void)
{
    void *lib = sim_library("TACK_HIP_LIBRARY", "the simulated runtime");
    void *rlib = sim_library("TACK_HIPRTC_LIBRARY", "the simulated hipRTC");
    SIM_SYMBOL(lib, sim_stats, "tack_sim_hip_stats");
    standin_install(lib, "tack_sim_hip_host_address", "tack_sim_hip_set_kernel_hook", STANDIN_PARAMS);
    SIM_SYMBOL(lib, sim_set_kernel_hook, "tack_sim_hip_set_kernel_hook");
    SIM_SYMBOL(lib, sim_last_launch, "tack_sim_hip_last_launch");
    SIM_SYMBOL(rlib, rtc_stats, "tack_sim_hiprtc_stats");
    SIM_SYMBOL(rlib, rtc_last_source, "tack_sim_hiprtc_last_source");
    SIM_SYMBOL(rlib, rtc_last_options, "tack_sim_hiprtc_last_options");
}

/* ---- the GPU's stand-in for saxpy (standin.h) ------------------------------ */

/* The copies the runtime had done when the last launch was captured. */
static long long copies_at_launch;

static void note_copies(void) { copies_at_launch = sim_stats("copies"); }

/* ---- helpers --------------------------------------------------------------- */

static tack_device *hip;
static tack_kernel *saxpy;

static tack_array *ramp(int64_t n, float scale) { return ramp_on(hip, n, scale); }

static tack_status call_saxpy(float a, tack_array *x, tack_array *y) { return saxpy_call(saxpy, a, x, y); }

/* ---- cases ----------------------------------------------------------------- */

/* Generated text, kept: the simulated hipRTC does not compile, so the
 * entry's parameter list (what the launch binds, in order) is checked here
 * and by its effect in test_conformance.c; the fault caught is an entry that
 * a real hipRTC would compile with other parameter types. */
static void test_generated_source_is_hip(void)
{
    const char *src = NULL;
    CHECK_OK(tack_kernel_generated_source(saxpy, "hip", &src));
    CHECK(src && strstr(src, "extern \"C\" __global__ void tack_kernel_entry(tack_index tack_n_, float tack_p0_, "
                             "const float *tack_p1_, float *tack_p2_)"));
    CHECK(src && strstr(src, "blockDim.x * gridDim.x"));
    /* What hipRTC compiled is that source. */
    CHECK(src && rtc_last_source() && !strcmp(rtc_last_source(), src));
}

static void test_launch_binds_arguments_in_order(void)
{
    tack_array *x = ramp(1000, 1.0f), *y = ramp(1000, 2.0f);
    long long launches = sim_stats("launches"), copies = sim_stats("copies");
    CHECK_OK(call_saxpy(3.0f, x, y));
    CHECK(sim_stats("launches") == launches + 1);
    const struct standin_launch *seen = &standin_last;
    CHECK(standin_i64(seen, 0) == 1000 && standin_f32(seen, 1) == 3.0f);
    CHECK(standin_i64(seen, 2) == (int64_t)(uintptr_t)tack_array_data(x));
    CHECK(standin_i64(seen, 3) == (int64_t)(uintptr_t)tack_array_data(y));
    /* The launch ran after the copies that filled x and y, before the read. */
    CHECK(copies_at_launch == copies);
    unsigned grid[3], block[3];
    sim_last_launch(grid, block);
    CHECK(block[0] * grid[0] >= 1000 && grid[1] == 1 && block[1] == 1);
    CHECK(element(y, 10) == 3.0f * 10.0f + 20.0f);
    /* Compiled and loaded once for every launch. */
    CHECK(sim_stats("modules_loaded") == 1 && rtc_stats("compiles") == 1);
    tack_array_release(x);
    tack_array_release(y);
}

static void test_missing_hiprtc_says_what_to_install(void)
{
    CHECK_MISSING_COMPILER(hip, "TACK_HIPRTC_LIBRARY", "/nonexistent/libhiprtc.so", "hipRTC", "TACK_HIPRTC_LIBRARY");
}

static void test_release_unloads_the_module(void)
{
    tack_kernel *k = NULL;
    long long unloaded = sim_stats("modules_unloaded");
    CHECK_OK(tack_kernel_compile("void h(tack_index i, double *y) { y[i] = 2.0; }", NULL, hip, &k));
    tack_kernel_release(k);
    CHECK(sim_stats("modules_unloaded") == unloaded + 1);
}

/* ---- a 2-D domain: the entry's extents, the grid, and its coverage -------- */

static struct grid2d_launch seen2;

static void *grid2d_capture(const char *name, void **params, const unsigned grid[3], const unsigned block[3])
{
    return grid2d_capture_values(name, params[0], params[1], params[2], (uint64_t)(uintptr_t) * (void **)params[3],
                                 standin_host_of, grid, block, &seen2);
}

static void test_2d_launch_geometry_covers_the_domain(void)
{
    sim_set_kernel_hook(grid2d_capture, grid2d_run_and_free);
    grid2d_check(hip, 1000, 70, &seen2);
    CHECK(seen2.block[0] == 32 && seen2.block[1] == 8 && seen2.block[2] == 1);
    CHECK(seen2.grid[0] == 3 && seen2.grid[1] == 125 && seen2.grid[2] == 1);
    sim_set_kernel_hook(standin_capture_params, standin_run);
}

/* The values a launch of the half-precision kernel below bound. */
static struct {
    int seen;
    uint16_t a, b;
} halves;

static void *halves_capture(const char *name, void **params, const unsigned grid[3], const unsigned block[3])
{
    (void)grid;
    (void)block;
    if (!strcmp(name, "tack_kernel_entry")) {
        halves.seen = 1;
        memcpy(&halves.a, params[1], sizeof halves.a);
        memcpy(&halves.b, params[2], sizeof halves.b);
    }
    return &halves;
}

static void halves_run(void *closure) { (void)closure; }

/* __half, and __hip_bfloat16 where hipRTC has its header (the storage
 * struct otherwise): two bytes by value either way. HIP C++ has no C99
 * complex type, so complex parameters are refused, naming the backend. */
static void test_half_parameters_and_complex_refusal(void)
{
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create("void h(tack_index i, tack_f16 a, tack_bf16 b, tack_bf16 *y) {\n"
                                "    y[i] = tack_bf16_from_float(tack_f16_to_float(a) * tack_bf16_to_float(b));\n}\n",
                                NULL, &k));
    const char *src = NULL;
    CHECK_OK(tack_kernel_generated_source(k, "hip", &src));
    CHECK(src && strstr(src, "typedef __half tack_f16;") && strstr(src, "typedef __hip_bfloat16 tack_bf16;") &&
          strstr(src, "typedef struct { uint16_t bits; } tack_bf16;"));
    tack_array *y = NULL;
    CHECK_OK(tack_array_empty(hip, TACK_BF16, 1, (int64_t[]){4}, 0, &y));
    tack_arg args[3] = {tack_arg_f16(0x4000), tack_arg_bf16(0xbf80), tack_arg_array(y)};
    sim_set_kernel_hook(halves_capture, halves_run);
    memset(&halves, 0, sizeof halves);
    CHECK_OK(tack_kernel_launch(k, NULL, 4, args, 3));
    CHECK_OK(tack_device_synchronize(hip));
    sim_set_kernel_hook(standin_capture_params, standin_run);
    CHECK(halves.seen && halves.a == 0x4000 && halves.b == 0xbf80);
    tack_array_release(y);
    tack_kernel_release(k);
    k = (tack_kernel *)0x1;
    CHECK_STATUS(tack_kernel_compile("void z(tack_index i, tack_c64 *y) { }", NULL, hip, &k), TACK_ETYPE);
    CHECK(k == (tack_kernel *)0x1 && strstr(tack_last_error(), "on the hip backend") &&
          strstr(tack_last_error(), "complex64"));
}

/* The kernel's own options reach hipRTC after Tack's, each entry one
 * option, blanks and all, and its definitions the source, before the
 * kernel's; one option hipRTC refuses is a compile error with its log. */
static void test_kernel_options_reach_hiprtc(void)
{
    const char *src = "void opt(tack_index i, float *y) { y[i] = V; }";
    const char *defines[] = {"V=1.0f + 2.0f", "N=4"}, *dirs[] = {"/tmp/tack-headers"}, *opts[] = {"-ffast-math"};
    tack_kernel_options o = {.defines = defines, .ndefines = 2, .include_dirs = dirs, .ninclude_dirs = 1,
                             .options = opts, .noptions = 1};
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create_with(src, NULL, &o, &k));
    CHECK_OK(tack_kernel_build(k, hip));
    CHECK(!strcmp(rtc_last_options(), "-O3\n-I/tmp/tack-headers\n-ffast-math"));
    const char *text = rtc_last_source(), *defs = text ? strstr(text, "#define V 1.0f + 2.0f\n#define N 4\n") : NULL;
    CHECK(defs && strstr(defs, "#line 1 \"kernel\"\nvoid opt("));
    tack_kernel_release(k);
    const char *bad[] = {"no-dash"};
    tack_kernel_options ob = {.options = bad, .noptions = 1};
    CHECK_OK(tack_kernel_create_with(src, NULL, &ob, &k));
    CHECK_STATUS(tack_kernel_build(k, hip), TACK_ECOMPILE);
    CHECK(strstr(tack_kernel_compile_log(), "unknown option 'no-dash'"));
    tack_kernel_release(k);
}

int main(void)
{
    sim_open();
    standin_model = &standin_saxpy;
    standin_on_capture = note_copies;
    if (!saxpy_open("hip", &hip, &saxpy))
        CHECK_DONE();
    RUN(test_generated_source_is_hip);
    RUN(test_launch_binds_arguments_in_order);
    RUN(test_missing_hiprtc_says_what_to_install);
    RUN(test_release_unloads_the_module);
    RUN(test_2d_launch_geometry_covers_the_domain);
    RUN(test_half_parameters_and_complex_refusal);
    RUN(test_kernel_options_reach_hiprtc);
    saxpy_close(hip, saxpy);
    CHECK_DONE();
}
