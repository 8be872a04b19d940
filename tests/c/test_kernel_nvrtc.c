/* CUDA source generation and NVRTC compilation to PTX, for every dtype.
 * Needs NVRTC, not a GPU; skipped (exit 77) with the reason where NVRTC
 * cannot be found. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/driver/nvrtc.h"
#include "cache_files.h"
#include "check.h"
#include "kernels.h"
#include "tack/tack.h"

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
        char src[1024];
        if (d == TACK_F16 || d == TACK_BF16) {
            /* Arithmetic through the conversions, which every prelude has
             * whether or not it found the toolkit's half types. */
            const char *p = d == TACK_F16 ? "tack_f16" : "tack_bf16";
            snprintf(src, sizeof src,
                     "static float helper(%s v) { float f = %s_to_float(v); return f * f; }\n"
                     "void k(tack_index i, %s s, const %s *restrict x, %s *y) {\n"
                     "    y[i] = %s_from_float(helper(x[i]) * %s_to_float(s) + (float)i);\n}\n",
                     t, p, t, t, t, p, p);
        } else {
            snprintf(src, sizeof src,
                     "#define SQ(v) ((v) * (v))\n"
                     "static %s helper(%s v) { return SQ(v); }\n"
                     "void k(tack_index i, %s s, const %s *restrict x, %s *y) { y[i] = (%s)(helper(x[i]) * s + (%s)i); }\n",
                     t, t, t, t, t, t, t);
        }
        tack_kernel *k = NULL;
        CHECK_OK(tack_kernel_create(src, NULL, &k));
        if (!k)
            continue;
        const char *ptx = NULL;
        size_t size = 0;
        tack_status st = tack_kernel_ptx(k, NULL, &ptx, &size);
        if (d == TACK_C64 || d == TACK_C128) {
            /* CUDA C++ has no C99 complex type: refused, naming the backend. */
            CHECK(st == TACK_ETYPE && ptx == NULL);
            CHECK(strstr(tack_last_error(), "cuda backend") && strstr(tack_last_error(), tack_dtype_name(d)));
        } else if (st != TACK_OK) {
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

/* Compiles `source` with NVRTC as Tack would, with the include option or
 * without; the compile log goes to stderr on failure. */
static int nvrtc_compiles(const struct tack_nvrtc_api *api, const char *source, const char *include)
{
    char inc[4200];
    const char *opts[3] = {"--device-as-default-execution-space", "-DEXPECT_NATIVE=0", NULL};
    int n = 2;
    if (include) {
        opts[1] = "-DEXPECT_NATIVE=1";
        snprintf(inc, sizeof inc, "-I%s", include);
        opts[n++] = inc;
    }
    nvrtcProgram prog = NULL;
    if (api->nvrtcCreateProgram(&prog, source, "kernel.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
        return 0;
    nvrtcResult r = api->nvrtcCompileProgram(prog, n, opts);
    if (r != NVRTC_SUCCESS) {
        size_t size = 0;
        api->nvrtcGetProgramLogSize(prog, &size);
        char *log = malloc(size + 1);
        if (log && api->nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS) {
            log[size] = 0;
            fprintf(stderr, "%s\n", log);
        }
        free(log);
    }
    api->nvrtcDestroyProgram(&prog);
    return r == NVRTC_SUCCESS;
}

/* __half and __nv_bfloat16 come from the toolkit's headers, which NVRTC
 * does not carry: with them the prelude uses them, without them the
 * storage structs, and both compile a kernel that converts. */
static void test_half_types_with_and_without_the_toolkit_headers(void)
{
    const struct tack_nvrtc_api *api = NULL;
    CHECK_OK(tack_nvrtc_api_get(&api));
    if (!api)
        return;
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create(
        "static_assert(TACK_F16_NATIVE == EXPECT_NATIVE && TACK_BF16_NATIVE == EXPECT_NATIVE, \"half types\");\n"
        "void k(tack_index i, tack_f16 a, const tack_bf16 *x, tack_f16 *y, bool *z) {\n"
        "    float v = tack_f16_to_float(a) * tack_bf16_to_float(x[i]);\n"
        "    y[i] = tack_f16_from_float(v);\n"
        "    z[i] = tack_bf16_to_float(tack_bf16_from_float(v)) > 0.0f;\n}\n",
        NULL, &k));
    /* Where the usual toolkit has the headers, Tack found them there or
     * before (TACK_CUDA_INCLUDE chooses alone). */
    if (!getenv("TACK_CUDA_INCLUDE") && access("/usr/local/cuda/include/cuda_fp16.h", R_OK) == 0 &&
        access("/usr/local/cuda/include/cuda_bf16.h", R_OK) == 0)
        CHECK(api->include_dir[0] != 0);
    const char *source = NULL;
    CHECK_OK(tack_kernel_generated_source(k, "cuda", &source));
    if (source) {
        CHECK(nvrtc_compiles(api, source, NULL));
        if (api->include_dir[0])
            CHECK(nvrtc_compiles(api, source, api->include_dir));
        else
            printf("no cuda_fp16.h found: the toolkit's half types are not checked here\n");
    }
    tack_kernel_release(k);
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
    CHECK_STATUS(tack_kernel_ptx(k, NULL, &ptx, &size), TACK_ECOMPILE);
    CHECK(ptx == (const char *)0x1);
    CHECK(strstr(tack_last_error(), "kernel 'bad' failed to compile for CUDA") != NULL);
    /* NVRTC writes "kernel(2): error": the user's line. */
    CHECK(strstr(tack_kernel_compile_log(), "kernel(2)") != NULL);
    tack_kernel_release(k);
}

/* A cached PTX file that is damaged or not this user's to trust is not
 * used: the PTX is compiled again and the file replaced. */
static void test_a_spoiled_cached_ptx_is_rebuilt(void)
{
    char cache[] = "/tmp/tack-test-nvrtc-spoiled-XXXXXX", path[PATH_MAX];
    char *saved = strdup(getenv("TACK_CACHE_DIR"));
    if (!cache_dir_set(cache))
        return;
    const char *src = "void spoiled(tack_index i, float *y) { y[i] = 2.0f; }";
    char *first = NULL;
    for (int how = -1; how < SPOIL_WAYS; how++) {
        struct stat was;
        if (how >= 0 && (!cached_file("cuda-", path, sizeof path) || !spoil(path, how, &was)))
            continue;
        tack_kernel *k = NULL;
        const char *ptx = NULL;
        size_t size = 0;
        CHECK_OK(tack_kernel_create(src, NULL, &k));
        CHECK_OK(tack_kernel_ptx(k, NULL, &ptx, &size));
        if (how < 0) {
            first = ptx ? strdup(ptx) : NULL;
        } else {
            if (!(ptx && first && !strcmp(ptx, first) && rebuilt(path, &was)))
                fprintf(stderr, "a cached PTX file %s was used\n", spoil_names[how]);
            CHECK(ptx && first && !strcmp(ptx, first));
            CHECK(rebuilt(path, &was));
        }
        tack_kernel_release(k);
    }
    free(first);
    remove_tree(cache);
    setenv("TACK_CACHE_DIR", saved, 1);
    free(saved);
}

/* The generated entry asserts each parameter's type: a source the parser
 * reads one way and NVRTC another (a macro defined after a typedef of the
 * same name) is TACK_ETYPE naming the parameter, not code that runs. */
static void test_a_signature_nvrtc_reads_otherwise_is_a_type_error(void)
{
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create("typedef double real;\n#define real float\n"
                                "void k(tack_index i, const float *x, real *y) { y[i] = x[i]; }\n",
                                NULL, &k));
    const char *ptx = NULL;
    size_t size = 0;
    CHECK_STATUS(tack_kernel_ptx(k, NULL, &ptx, &size), TACK_ETYPE);
    CHECK(ptx == NULL);
    CHECK(strstr(tack_last_error(), "parameter 'y' of kernel 'k'") != NULL);
    CHECK(strstr(tack_kernel_compile_log(), "tack_signature_mismatch:2") != NULL);
    tack_kernel_release(k);
}

int main(void)
{
    char cache[] = "/tmp/tack-test-nvrtc-XXXXXX";
    int status = nvrtc_test_begin(cache);
    if (status)
        return status;
    RUN(test_every_dtype);
    RUN(test_half_types_with_and_without_the_toolkit_headers);
    RUN(test_arch_and_errors);
    RUN(test_a_spoiled_cached_ptx_is_rebuilt);
    RUN(test_a_signature_nvrtc_reads_otherwise_is_a_type_error);
    remove_tree(cache);
    CHECK_DONE();
}
