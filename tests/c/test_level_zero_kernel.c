/*
 * Kernels on the Level Zero backend, end to end, against the simulated
 * driver (tests/sim/level_zero_sim.c) and the simulated libocloc
 * (tests/sim/ocloc_sim.c). The simulator cannot run SPIR-V, so a host
 * implementation of saxpy, installed as its kernel hook, stands in for the
 * GPU when the command list reaches the launch; what is checked is what
 * Tack does: the OpenCL C it generates, how it calls ocloc, the arguments
 * it binds and their order, the group geometry, the order against copies,
 * and the checks and errors around them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arrays.h"
#include "backend.h"
#include "cache_files.h"
#include "check.h"
#include "kernels.h"
#include "grid2d.h"
#include "sim.h"
#include "standin.h"
#include "tack/kernel.h"
#include "tack/tack.h"

typedef void *(*capture_fn)(const char *name, void *const *args, const size_t *sizes, int nargs,
                            const uint32_t groups[3], const uint32_t group_size[3]);
typedef void (*run_fn)(void *closure);

static long long (*sim_stats)(const char *name);
static void (*sim_set_kernel_hook)(capture_fn capture, run_fn run);
static uint32_t (*sim_create_context)(int device_index, uint64_t handles[3]);
static void (*sim_set_fp64)(int supported);
static long long (*ocloc_stats)(const char *name);
static const char *(*ocloc_last_args)(void);

static void sim_open(void)
{
    void *lib = sim_library("TACK_LEVEL_ZERO_LIBRARY", "the simulated driver");
    void *olib = sim_library("TACK_OCLOC_LIBRARY", "the simulated libocloc");
    SIM_SYMBOL(lib, sim_stats, "tack_sim_ze_stats");
    standin_install(lib, "tack_sim_ze_host_address", "tack_sim_ze_set_kernel_hook", STANDIN_ARGS);
    SIM_SYMBOL(lib, sim_set_kernel_hook, "tack_sim_ze_set_kernel_hook");
    SIM_SYMBOL(lib, sim_create_context, "tack_sim_ze_create_context");
    SIM_SYMBOL(lib, sim_set_fp64, "tack_sim_ze_set_fp64");
    SIM_SYMBOL(olib, ocloc_stats, "tack_sim_ocloc_stats");
    SIM_SYMBOL(olib, ocloc_last_args, "tack_sim_ocloc_last_args");
}

/* ---- the GPU's stand-in for saxpy (standin.h) ------------------------------ */

/* The copies the driver had done when the last launch was captured. */
static long long copies_at_launch;

static void note_copies(void) { copies_at_launch = sim_stats("copies"); }

/* ---- helpers --------------------------------------------------------------- */

static tack_device *ze;
static tack_kernel *saxpy;

static tack_status call_saxpy(float a, tack_array *x, tack_array *y) { return saxpy_call(saxpy, a, x, y); }

static tack_device *adopt_new_context(void)
{
    uint64_t h[3];
    CHECK(sim_create_context(0, h) == 0);
    return adopt_or_null(h);
}

/* ---- cases ----------------------------------------------------------------- */

/* Generated text, kept: the simulated ocloc does not compile, so the
 * entry's OpenCL parameter list (__global, the sizes the launch binds) and
 * ocloc's options are checked here; test_conformance.c checks the binding by
 * its effect. The fault caught is code a real ocloc would refuse or bind
 * at other widths. */
static void test_generated_source_is_opencl(void)
{
    const char *src = NULL;
    CHECK_OK(tack_kernel_generated_source(saxpy, "level_zero", &src));
    CHECK(src && strstr(src, "__kernel void tack_kernel_entry(tack_index tack_n_, float tack_p0_, "
                             "__global const float *tack_p1_, __global float *tack_p2_)"));
    CHECK(src && strstr(src, "tack_global_id_(0)") && strstr(src, "typedef int64_t tack_i64_;"));
    /* ocloc compiled it to SPIR-V only, for the device's PCI id. */
    const char *args = ocloc_last_args();
    CHECK(strstr(args, "compile") && strstr(args, "-spv_only") && strstr(args, "-device 0x0bd5") &&
          strstr(args, "-cl-std=CL2.0"));
}

static void test_launch_binds_arguments_in_order(void)
{
    tack_array *x = ramp_on(ze, 1000, 1.0f), *y = ramp_on(ze, 1000, 2.0f);
    long long launches = sim_stats("launches"), copies = sim_stats("copies");
    CHECK_OK(call_saxpy(3.0f, x, y));
    CHECK(sim_stats("launches") == launches + 1);
    /* The capture refuses (counts a mismatch) any size but the model's 8, 4, 8, 8. */
    const struct standin_launch *seen = &standin_last;
    CHECK(standin_mismatches == 0);
    CHECK(standin_i64(seen, 0) == 1000 && standin_f32(seen, 1) == 3.0f);
    CHECK(standin_i64(seen, 2) == (int64_t)(uintptr_t)tack_array_data(x));
    CHECK(standin_i64(seen, 3) == (int64_t)(uintptr_t)tack_array_data(y));
    CHECK(seen->block[0] > 0 && (uint64_t)seen->grid[0] * seen->block[0] >= 1000);
    /* After the copies that filled x and y; done before the read below. */
    CHECK(copies_at_launch == copies);
    CHECK(element(y, 10) == 3.0f * 10.0f + 20.0f);
    CHECK(sim_stats("modules_created") == 1 && sim_stats("kernels_created") == 1);
    tack_array_release(x);
    tack_array_release(y);
}

static void test_compile_is_memoised_by_source_and_device(void)
{
    long long before = ocloc_stats("invocations");
    tack_kernel *again = NULL;
    CHECK_OK(tack_kernel_compile(saxpy_source, NULL, ze, &again));
    /* The same source for the same device comes from the cache. */
    CHECK(ocloc_stats("invocations") == before);
    tack_kernel_release(again);
    CHECK(ocloc_stats("freed") == ocloc_stats("invocations"));
}

/* The kernel's own options go into ocloc's -options string after Tack's,
 * a word with blanks quoted whole (ocloc's front end splits at blanks
 * outside quotes), and key the SPIR-V kept; a double quote, which that
 * string cannot carry, is refused before ocloc runs. Its definitions are
 * source, which a string's quotes reach. */
static void test_kernel_options_reach_ocloc(void)
{
    const char *src = "void opt(tack_index i, float *y) { y[i] = V; }";
    const char *defines[] = {"V=1.0f + 2.0f", "N=4"}, *dirs[] = {"/tmp/tack-headers"}, *opts[] = {"-cl-mad-enable"};
    tack_kernel_options o = {.defines = defines, .ndefines = 2, .include_dirs = dirs, .ninclude_dirs = 1,
                             .options = opts, .noptions = 1};
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create_with(src, NULL, &o, &k));
    long long before = ocloc_stats("invocations");
    CHECK_OK(tack_kernel_build(k, ze));
    const char *args = ocloc_last_args();
    CHECK(strstr(args, "-options -cl-std=CL2.0 -I/tmp/tack-headers -cl-mad-enable"));
    CHECK(!strstr(args, "-DV"));
    tack_kernel_release(k);
    long long after = ocloc_stats("invocations");
    CHECK(after > before);
    /* The same options again: the kept SPIR-V. Others: compiled. */
    CHECK_OK(tack_kernel_create_with(src, NULL, &o, &k));
    CHECK_OK(tack_kernel_build(k, ze));
    CHECK(ocloc_stats("invocations") == after);
    tack_kernel_release(k);
    o.ndefines = 1;
    CHECK_OK(tack_kernel_create_with(src, NULL, &o, &k));
    CHECK_OK(tack_kernel_build(k, ze));
    CHECK(ocloc_stats("invocations") > after);
    tack_kernel_release(k);
    const char *quoted[] = {"MSG=\"hi\""};
    tack_kernel_options q = {.defines = quoted, .ndefines = 1}, qo = {.options = quoted, .noptions = 1};
    CHECK_OK(tack_kernel_create_with(src, NULL, &q, &k));
    CHECK_OK(tack_kernel_build(k, ze));
    tack_kernel_release(k);
    CHECK_OK(tack_kernel_create_with(src, NULL, &qo, &k));
    before = ocloc_stats("invocations");
    CHECK_STATUS(tack_kernel_build(k, ze), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "double quote") && strstr(tack_last_error(), "MSG"));
    CHECK(ocloc_stats("invocations") == before);
    tack_kernel_release(k);
}

/* A cached SPIR-V file that is damaged or not this user's to trust is not
 * used: ocloc compiles it again and the file is replaced. */
static void test_a_spoiled_cached_spirv_is_rebuilt(void)
{
    char path[PATH_MAX];
    CHECK(cached_file("level_zero-", path, sizeof path));
    for (int how = 0; how < SPOIL_WAYS; how++) {
        struct stat was;
        if (!cached_file("level_zero-", path, sizeof path) || !spoil(path, how, &was))
            continue;
        long long before = ocloc_stats("invocations");
        tack_kernel *k = NULL;
        CHECK_OK(tack_kernel_compile(saxpy_source, NULL, ze, &k));
        if (ocloc_stats("invocations") != before + 1)
            fprintf(stderr, "a cached SPIR-V file %s was used\n", spoil_names[how]);
        CHECK(ocloc_stats("invocations") == before + 1);
        CHECK(rebuilt(path, &was));
        tack_kernel_release(k);
    }
}

static void test_two_contexts_never_meet(void)
{
    tack_device *shared = adopt_new_context();
    if (!shared)
        return;
    tack_array *x = ramp_on(ze, 8, 1.0f), *y = ramp_on(shared, 8, 1.0f);
    long long launches = sim_stats("launches");
    CHECK_STATUS(call_saxpy(1.0f, x, y), TACK_EVALUE);
    /* Both are level_zero:0; the message says which shares a context. */
    CHECK(strstr(tack_last_error(), "memory domain"));
    CHECK(strstr(tack_last_error(), "level_zero:0 (sharing another library's context)"));
    CHECK(strstr(tack_last_error(), "level_zero:0 (Tack's own context)"));
    CHECK(sim_stats("launches") == launches);
    /* Within the adopted context, kernels run. */
    tack_array *x2 = ramp_on(shared, 8, 1.0f);
    CHECK_OK(call_saxpy(2.0f, x2, y));
    CHECK(element(y, 3) == 9.0f);
    tack_array_release(x2);
    tack_array_release(x);
    tack_array_release(y);
    tack_device_release(shared);
}

static void test_f64_needs_a_device_with_fp64(void)
{
    sim_set_fp64(0);
    tack_device *no_fp64 = adopt_new_context();
    sim_set_fp64(1);
    if (!no_fp64)
        return;
    tack_kernel *k = NULL;
    CHECK_STATUS(tack_kernel_compile("void d(tack_index i, double *y) { y[i] = 1.0; }", NULL, no_fp64, &k),
                 TACK_ERUNTIME);
    CHECK(strstr(tack_last_error(), "fp64") && strstr(tack_last_error(), "float64"));
    /* float32 kernels still run there. */
    CHECK_OK(tack_kernel_compile(saxpy_source, NULL, no_fp64, &k));
    tack_kernel_release(k);
    tack_device_release(no_fp64);
}

/* What a launch of the half-precision kernel below bound. */
static struct {
    int nargs;
    size_t sizes[4];
    uint16_t a, b;
} halves;

static void *halves_capture(const char *name, void *const *args, const size_t *sizes, int nargs,
                            const uint32_t groups[3], const uint32_t group_size[3])
{
    (void)name;
    (void)groups;
    (void)group_size;
    halves.nargs = nargs;
    for (int i = 0; i < nargs && i < 4; i++)
        halves.sizes[i] = sizes[i];
    if (nargs == 4) {
        memcpy(&halves.a, args[1], sizeof halves.a);
        memcpy(&halves.b, args[2], sizeof halves.b);
    }
    return &halves;
}

static void halves_run(void *closure) { (void)closure; }

/* float16 is OpenCL's half where the device has cl_khr_fp16, bfloat16 a
 * storage struct: both pass as two bytes. bool and the complex types have
 * no OpenCL C kernel parameter, and are refused before anything compiles. */
static void test_half_parameters_pass_two_bytes(void)
{
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create("void h(tack_index i, tack_f16 a, tack_bf16 b, tack_f16 *y) {\n"
                                "    y[i] = tack_f16_from_float(tack_f16_to_float(a) + tack_bf16_to_float(b));\n}\n",
                                NULL, &k));
    const char *src = NULL;
    CHECK_OK(tack_kernel_generated_source(k, "level_zero", &src));
    CHECK(src && strstr(src, "#ifdef cl_khr_fp16") && strstr(src, "typedef half tack_f16;") &&
          strstr(src, "typedef struct { uint16_t bits; } tack_bf16;"));
    CHECK(src && strstr(src, "tack_f16 tack_p0_, tack_bf16 tack_p1_, __global tack_f16 *tack_p2_)"));
    tack_array *y = NULL;
    CHECK_OK(tack_array_empty(ze, TACK_F16, 1, (int64_t[]){8}, 0, &y));
    tack_arg args[3] = {tack_arg_f16(0x3c00), tack_arg_bf16(0x3f80), tack_arg_array(y)};
    sim_set_kernel_hook(halves_capture, halves_run);
    memset(&halves, 0, sizeof halves);
    CHECK_OK(tack_kernel_launch(k, NULL, 8, args, 3));
    CHECK_OK(tack_device_synchronize(ze));
    sim_set_kernel_hook(standin_capture_args, standin_run);
    CHECK(halves.nargs == 4 && halves.sizes[0] == 8 && halves.sizes[1] == 2 && halves.sizes[2] == 2 &&
          halves.sizes[3] == 8);
    CHECK(halves.a == 0x3c00 && halves.b == 0x3f80);
    tack_array_release(y);
    tack_kernel_release(k);

    static const char *const refused[] = {
        "void b(tack_index i, bool *y) { y[i] = 1; }",
        "void c(tack_index i, const tack_c64 *x, float *y) { y[i] = 0; }",
        "void d(tack_index i, double _Complex z, double *y) { y[i] = 0; }",
    };
    for (int i = 0; i < 3; i++) {
        k = (tack_kernel *)0x1;
        CHECK_STATUS(tack_kernel_compile(refused[i], NULL, ze, &k), TACK_ETYPE);
        CHECK(k == (tack_kernel *)0x1 && strstr(tack_last_error(), "on the level_zero backend"));
    }
}

static void test_missing_libocloc_says_what_to_install(void)
{
    CHECK_MISSING_COMPILER(ze, "TACK_OCLOC_LIBRARY", "/nonexistent/libocloc.so", "libocloc",
                           "apt-get install intel-opencl-icd");
}

/* Tack destroys no Level Zero object, kernels included. */
static void nothing_destroyed(void) { CHECK(sim_stats("destroys") == 0); }

/* ---- a 2-D domain: the entry's extents, the groups, and their coverage ----- */

static struct grid2d_launch seen2;

static void *grid2d_capture(const char *name, void *const *args, const size_t *sizes, int nargs,
                            const uint32_t groups[3], const uint32_t group_size[3])
{
    if (nargs != 4 || sizes[0] != sizeof(int64_t) || sizes[1] != sizeof(int64_t))
        return NULL;
    uint64_t y;
    memcpy(&y, args[3], sizeof y);
    const unsigned grid[3] = {groups[0], groups[1], groups[2]};
    const unsigned block[3] = {group_size[0], group_size[1], group_size[2]};
    return grid2d_capture_values(name, args[0], args[1], args[2], y, standin_host_of, grid, block, &seen2);
}

static void test_2d_launch_geometry_covers_the_domain(void)
{
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create(GRID2D_SOURCE, NULL, &k));
    const char *src = NULL;
    CHECK_OK(tack_kernel_generated_source(k, "level_zero", &src));
    CHECK(src && strstr(src, "tack_global_id_(1)") && strstr(src, "tack_global_size_(0)"));
    tack_kernel_release(k);
    sim_set_kernel_hook(grid2d_capture, grid2d_run_and_free);
    grid2d_check(ze, 1000, 70, &seen2);
    /* Groups along the contiguous index, one work-item deep in the other. */
    CHECK(seen2.block[1] == 1 && seen2.grid[1] == 1000);
    CHECK(seen2.grid[0] == (70 + seen2.block[0] - 1) / seen2.block[0]);
    sim_set_kernel_hook(standin_capture_args, standin_run);
}

int main(void)
{
    char cache[] = "/tmp/tack-test-ze-kernel-XXXXXX";
    if (!cache_dir_set(cache))
        return 1;
    sim_open();
    standin_model = &standin_saxpy;
    standin_on_capture = note_copies;
    if (!saxpy_open("level_zero", &ze, &saxpy))
        CHECK_DONE();
    check_after_each = nothing_destroyed;
    RUN(test_generated_source_is_opencl);
    RUN(test_launch_binds_arguments_in_order);
    RUN(test_compile_is_memoised_by_source_and_device);
    RUN(test_a_spoiled_cached_spirv_is_rebuilt);
    RUN(test_two_contexts_never_meet);
    RUN(test_f64_needs_a_device_with_fp64);
    RUN(test_half_parameters_pass_two_bytes);
    RUN(test_missing_libocloc_says_what_to_install);
    RUN(test_2d_launch_geometry_covers_the_domain);
    /* After the cases that expect one kept SPIR-V file. */
    RUN(test_kernel_options_reach_ocloc);
    saxpy_close(ze, saxpy);
    nothing_destroyed();
    remove_tree(cache);
    CHECK_DONE();
}
