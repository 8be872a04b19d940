/* Kernels through the C API on the cpu backend: signatures, compilation and
 * its cache, launches and every check a launch makes before it runs. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_files.h"
#include "check.h"
#include "kernels.h"
#include "tack/tack.h"

static tack_device *cpu;
static char tmpdir[256];

static tack_array *vec(tack_dtype dt, int64_t n)
{
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(cpu, dt, 1, &n, 0, &a));
    return a;
}

static tack_kernel *compile(const char *src, const char *name)
{
    tack_kernel *k = NULL;
    tack_status st = tack_kernel_compile(src, name, cpu, &k);
    if (st != TACK_OK) {
        fprintf(stderr, "compile failed: %s\n%s\n", tack_last_error(), tack_kernel_compile_log());
        check_failures++;
    }
    return k;
}

static int contains(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

/* ---- signatures ---- */

static void test_signature(void)
{
    const char *src = "#include <math.h>\n"
                      "#define REAL float\n"
                      "typedef double real64;\n"
                      "struct pair { int a, b; };\n"
                      "static float helper(float v);   /* a prototype { not a body */\n"
                      "static float helper(float v) { const char *s = \"}{\"; (void)s; return v * 2; }\n"
                      "// void fake(tack_index i) {}\n"
                      "void scale(tack_index idx, REAL a, real64 b, const float *x,\n"
                      "           float *restrict y, const int8_t c[], uint64_t *const z)\n"
                      "{ y[idx] = helper(a * x[idx]) + (float)b + c[idx] + (float)z[idx]; }\n";
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create(src, NULL, &k));
    if (!k)
        return;
    CHECK(!strcmp(tack_kernel_name(k), "scale"));
    CHECK(!strcmp(tack_kernel_index_name(k), "idx"));
    CHECK(tack_kernel_num_params(k) == 6);
    struct {
        const char *name;
        tack_dtype dt;
        int is_array, writable;
    } want[] = {{"a", TACK_F32, 0, 0}, {"b", TACK_F64, 0, 0}, {"x", TACK_F32, 1, 0},
                {"y", TACK_F32, 1, 1}, {"c", TACK_I8, 1, 0},  {"z", TACK_U64, 1, 1}};
    for (int i = 0; i < 6; i++) {
        tack_kernel_param p;
        CHECK_OK(tack_kernel_param_info(k, i, &p));
        CHECK(!strcmp(p.name, want[i].name));
        CHECK(p.dtype == want[i].dt);
        CHECK(p.is_array == want[i].is_array);
        CHECK(p.writable == want[i].writable);
    }
    CHECK(tack_kernel_first_writable(k) == 3);
    tack_kernel_param p;
    CHECK_STATUS(tack_kernel_param_info(k, 6, &p), TACK_EVALUE);
    tack_kernel_release(k);

    /* The last function is the kernel; name= picks another. */
    const char *two = "void first(tack_index i, float *y) { y[i] = 1; }\n"
                      "void second(tack_index i, const double *x, double *y) { y[i] = x[i]; }\n";
    CHECK_OK(tack_kernel_create(two, NULL, &k));
    CHECK(k && !strcmp(tack_kernel_name(k), "second"));
    tack_kernel_release(k);
    CHECK_OK(tack_kernel_create(two, "first", &k));
    CHECK(k && !strcmp(tack_kernel_name(k), "first") && tack_kernel_num_params(k) == 1);
    tack_kernel_release(k);

    /* Only the index: allowed (a kernel that writes through nothing is odd,
     * but a valid signature). */
    CHECK_OK(tack_kernel_create("void noop(tack_index i) { (void)i; }", NULL, &k));
    CHECK(k && tack_kernel_num_params(k) == 0 && tack_kernel_first_writable(k) == -1);
    tack_kernel_release(k);
}

static void expect_parse_error(const char *src, const char *name, tack_status want, const char *fragment)
{
    tack_kernel *k = (tack_kernel *)0x1;
    tack_status st = tack_kernel_create(src, name, &k);
    CHECK(st == want);
    CHECK(k == (tack_kernel *)0x1);
    if (!contains(tack_last_error(), fragment)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", tack_last_error(), fragment);
        check_failures++;
    }
}

static void test_signature_errors(void)
{
    expect_parse_error("int x = 3;", NULL, TACK_EVALUE, "no function definition");
    expect_parse_error("void a(tack_index i, float *y) { y[i] = 0; }", "b", TACK_EVALUE, "no function named 'b'");
    expect_parse_error("\nfloat k(tack_index i, float *y) { return y[i]; }", NULL, TACK_EVALUE, "line 2");
    expect_parse_error("float k(tack_index i, float *y) { return y[i]; }", NULL, TACK_EVALUE, "returns 'float'");
    expect_parse_error("void k(float a, float *y) { y[0] = a; }", NULL, TACK_EVALUE, "tack_index");
    expect_parse_error("void k(int64_t i, float *y) { y[i] = 0; }", NULL, TACK_EVALUE, "tack_index");
    expect_parse_error("void k(void) { }", NULL, TACK_EVALUE, "first parameter");
    expect_parse_error("void k(tack_index i,\n  int *y) { y[i] = 0; }", NULL, TACK_ETYPE, "line 2: parameter 'y'");
    expect_parse_error("void k(tack_index i, unsigned int n, float *y) { y[i] = 0; }", NULL, TACK_ETYPE,
                       "'unsigned int'");
    expect_parse_error("void k(tack_index i, float **y) { }", NULL, TACK_ETYPE, "parameter 'y'");
    expect_parse_error("void k(tack_index i, struct s *y) { }", NULL, TACK_ETYPE, "parameter 'y'");
    expect_parse_error("void k(tack_index i, float *) { }", NULL, TACK_EVALUE, "has no name");
    expect_parse_error("void k(tack_index i, float *y) { y[i] = 0; ", NULL, TACK_EVALUE, "never closed");
    expect_parse_error("void k(tack_index i, _Complex int *y) { }", NULL, TACK_ETYPE, "'_Complex int *'");
    expect_parse_error("void k(tack_index i, _Complex _Complex float *y) { }", NULL, TACK_ETYPE, "parameter 'y'");
    expect_parse_error("void k(tack_index i, tack_f16 _Complex *y) { }", NULL, TACK_ETYPE, "parameter 'y'");
    expect_parse_error("void k(tack_index i, _Complex y) { }", NULL, TACK_ETYPE, "parameter 'y'");
    expect_parse_error("void k(tack_index i, bool float *y) { }", NULL, TACK_ETYPE, "parameter 'y'");
}

/* Every spelling of the newer dtypes' C types. */
static void test_signature_new_types(void)
{
    const char *src = "typedef double _Complex zd;\n"
                      "void k(tack_index i, bool a, _Bool *b, tack_f16 c, const _Float16 *d, __half *e,\n"
                      "       tack_bf16 f, const __bf16 *g, __nv_bfloat16 *h, __hip_bfloat16 *j,\n"
                      "       float _Complex l, const _Complex float *m, tack_c64 *n, _Complex double o,\n"
                      "       zd *p, const tack_c128 *q) { }\n";
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create(src, NULL, &k));
    if (!k)
        return;
    const tack_dtype want[] = {TACK_BOOL, TACK_BOOL, TACK_F16, TACK_F16,  TACK_F16,  TACK_BF16, TACK_BF16, TACK_BF16,
                               TACK_BF16, TACK_C64,  TACK_C64, TACK_C64,  TACK_C128, TACK_C128, TACK_C128};
    const int arrays[] = {0, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1};
    CHECK(tack_kernel_num_params(k) == 15);
    for (int i = 0; i < 15 && i < tack_kernel_num_params(k); i++) {
        tack_kernel_param p;
        CHECK_OK(tack_kernel_param_info(k, i, &p));
        if (p.dtype != want[i] || p.is_array != arrays[i])
            fprintf(stderr, "parameter %s: dtype %s\n", p.name, tack_dtype_name(p.dtype));
        CHECK(p.dtype == want[i] && p.is_array == arrays[i]);
    }
    tack_kernel_release(k);
}

/* ---- launches ---- */

static const char saxpy_src[] =
    "void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }\n";

static void test_saxpy(void)
{
    tack_kernel *k = compile(saxpy_src, NULL);
    if (!k)
        return;
    const int64_t n = 1000;
    tack_array *x = vec(TACK_F32, n), *y = vec(TACK_F32, n);
    float *px = tack_array_data(x), *py = tack_array_data(y);
    for (int64_t i = 0; i < n; i++) {
        px[i] = (float)i;
        py[i] = 1.0f;
    }
    tack_arg args[] = {tack_arg_f32(2.0f), tack_arg_array(x), tack_arg_array(y)};
    CHECK_OK(tack_kernel_call(k, args, 3));
    int ok = 1;
    for (int64_t i = 0; i < n; i++)
        ok &= py[i] == 2.0f * (float)i + 1.0f;
    CHECK(ok);
    /* launch over a prefix only */
    CHECK_OK(tack_kernel_launch(k, NULL, 10, args, 3));
    CHECK(py[9] == 4.0f * 9.0f + 1.0f);
    CHECK(py[10] == 2.0f * 10.0f + 1.0f); /* past n: untouched */
    /* n = 0 runs nothing */
    float before = py[0];
    CHECK_OK(tack_kernel_launch(k, NULL, 0, args, 3));
    CHECK(py[0] == before);
    tack_array_release(x);
    tack_array_release(y);
    tack_kernel_release(k);
}

/* Each dtype: a scalar of it, a const array of it and one stored to. */
#define DTYPE_CASE(T, DT, SUFFIX)                                                                                \
    static void dtype_##SUFFIX(void)                                                                             \
    {                                                                                                            \
        char src[256];                                                                                           \
        snprintf(src, sizeof src,                                                                                \
                 "void k(tack_index i, %s s, const %s *x, %s *y) { y[i] = (%s)(x[i] * s + (%s)(i %% 5)); }", #T, \
                 #T, #T, #T, #T);                                                                                \
        tack_kernel *k = compile(src, NULL);                                                                     \
        if (!k)                                                                                                  \
            return;                                                                                              \
        const int64_t n = 4099;                                                                                  \
        tack_array *x = vec(DT, n), *y = vec(DT, n);                                                             \
        T *px = tack_array_data(x), *py = tack_array_data(y);                                                    \
        for (int64_t i = 0; i < n; i++)                                                                          \
            px[i] = (T)(i % 11);                                                                                 \
        T s = (T)3;                                                                                              \
        tack_arg args[] = {tack_arg_##SUFFIX(s), tack_arg_array(x), tack_arg_array(y)};                          \
        CHECK_OK(tack_kernel_call(k, args, 3));                                                                  \
        int ok = 1;                                                                                              \
        for (int64_t i = 0; i < n; i++)                                                                          \
            ok &= py[i] == (T)(px[i] * s + (T)(i % 5));                                                          \
        if (!ok)                                                                                                 \
            fprintf(stderr, "dtype %s: wrong results\n", #T);                                                    \
        CHECK(ok);                                                                                               \
        tack_array_release(x);                                                                                   \
        tack_array_release(y);                                                                                   \
        tack_kernel_release(k);                                                                                  \
    }
DTYPE_CASE(int8_t, TACK_I8, i8)
DTYPE_CASE(uint8_t, TACK_U8, u8)
DTYPE_CASE(int16_t, TACK_I16, i16)
DTYPE_CASE(uint16_t, TACK_U16, u16)
DTYPE_CASE(int32_t, TACK_I32, i32)
DTYPE_CASE(uint32_t, TACK_U32, u32)
DTYPE_CASE(int64_t, TACK_I64, i64)
DTYPE_CASE(uint64_t, TACK_U64, u64)
DTYPE_CASE(float, TACK_F32, f32)
DTYPE_CASE(double, TACK_F64, f64)

static void test_every_dtype(void)
{
    dtype_i8();
    dtype_u8();
    dtype_i16();
    dtype_u16();
    dtype_i32();
    dtype_u32();
    dtype_i64();
    dtype_u64();
    dtype_f32();
    dtype_f64();
}

static void expect_launch_error(tack_kernel *k, const tack_arg *args, size_t nargs, int64_t n, tack_status want,
                                const char *fragment);

/* bool, float16, bfloat16 and both complex types through a cpu kernel,
 * compiled by `cc` (NULL: the default), whose half types may be native
 * (_Float16 with GCC 12) or the storage structs (Clang 14, or __bf16
 * before GCC 13): the same source and the same bits either way. */
static void new_dtypes_with(const char *cc)
{
    if (cc) {
        char probe[300];
        snprintf(probe, sizeof probe, "command -v %s >/dev/null 2>&1", cc);
        if (system(probe) != 0) {
            printf("no %s: its kernel build is not checked\n", cc);
            return;
        }
        setenv("TACK_CC", cc, 1);
    }
    static const char src[] =
        "void k(tack_index i, bool flag, tack_f16 h, tack_bf16 b, tack_c64 z, tack_c128 w,\n"
        "       const bool *fx, const tack_f16 *hx, const tack_bf16 *bx, const float _Complex *zx,\n"
        "       const tack_c128 *wx, bool *fy, tack_f16 *hy, tack_bf16 *by, tack_c64 *zy, double _Complex *wy)\n"
        "{\n"
        "    fy[i] = fx[i] != flag;\n"
        "    hy[i] = tack_f16_from_float(tack_f16_to_float(hx[i]) * tack_f16_to_float(h));\n"
        "    by[i] = tack_bf16_from_float(tack_bf16_to_float(bx[i]) + tack_bf16_to_float(b));\n"
        "    zy[i] = zx[i] * z;\n"
        "    wy[i] = wx[i] + w;\n"
        "}\n";
    tack_kernel *k = compile(src, NULL);
    const tack_dtype dts[5] = {TACK_BOOL, TACK_F16, TACK_BF16, TACK_C64, TACK_C128};
    tack_array *in[5], *out[5];
    for (int j = 0; j < 5; j++) {
        in[j] = vec(dts[j], 3);
        out[j] = vec(dts[j], 3);
    }
    if (!k || !in[4] || !out[4])
        goto done;
    const uint8_t flags[3] = {0, 1, 1};
    const uint16_t halves[3] = {0x3c00, 0xc000, 0x3555}; /* 1, -2, 0.333 */
    const uint16_t bhalves[3] = {0x3f80, 0xc000, 0x3eab};
    const float zs[6] = {1, 2, -3, 0.5f, 0, 1};
    const double ws[6] = {1, 2, 3, 4, 5, 6};
    CHECK_OK(tack_array_copy_from_host(in[0], flags, sizeof flags));
    CHECK_OK(tack_array_copy_from_host(in[1], halves, sizeof halves));
    CHECK_OK(tack_array_copy_from_host(in[2], bhalves, sizeof bhalves));
    CHECK_OK(tack_array_copy_from_host(in[3], zs, sizeof zs));
    CHECK_OK(tack_array_copy_from_host(in[4], ws, sizeof ws));
    tack_arg args[15] = {
        tack_arg_bool(1),
        tack_arg_f16(tack_float16_from_double(3.0)),
        tack_arg_bf16(tack_bfloat16_from_double(0.5)),
        tack_arg_c64(0.0f, 1.0f), /* i */
        tack_arg_c128(-1.0, 0.25),
    };
    for (int j = 0; j < 5; j++) {
        args[5 + j] = tack_arg_array(in[j]);
        args[10 + j] = tack_arg_array(out[j]);
    }
    CHECK_OK(tack_kernel_launch(k, NULL, 3, args, 15));
    uint8_t f[3];
    uint16_t h[3], b[3];
    float z[6];
    double w[6];
    CHECK_OK(tack_array_copy_to_host(out[0], f, sizeof f));
    CHECK_OK(tack_array_copy_to_host(out[1], h, sizeof h));
    CHECK_OK(tack_array_copy_to_host(out[2], b, sizeof b));
    CHECK_OK(tack_array_copy_to_host(out[3], z, sizeof z));
    CHECK_OK(tack_array_copy_to_host(out[4], w, sizeof w));
    CHECK(f[0] == 1 && f[1] == 0 && f[2] == 0);
    /* 3, -6, and 0x3555 * 3 = 1 - 2^-12, a tie that goes to the even 1.0
     * (NumPy's float16 gives the same bits) */
    CHECK(h[0] == 0x4200 && h[1] == 0xc600 && h[2] == 0x3c00);
    /* 1.5, -1.5, and 0.333984375 + 0.5 rounded to bfloat16's 8 bits: 0x3f56
     * (as ml_dtypes rounds it) */
    CHECK(b[0] == 0x3fc0 && b[1] == 0xbfc0 && b[2] == 0x3f56);
    /* (1 + 2i) i = -2 + i, (-3 + 0.5i) i = -0.5 - 3i, (0 + i) i = -1 */
    CHECK(z[0] == -2 && z[1] == 1 && z[2] == -0.5f && z[3] == -3 && z[4] == -1 && z[5] == 0);
    CHECK(w[0] == 0 && w[1] == 2.25 && w[2] == 2 && w[3] == 4.25 && w[4] == 4 && w[5] == 6.25);
    /* A scalar of the wrong dtype is refused like any other. */
    args[1] = tack_arg_u16(0x3c00);
    expect_launch_error(k, args, 15, 3, TACK_ETYPE, "parameter 'h'");
done:
    for (int j = 0; j < 5; j++) {
        tack_array_release(in[j]);
        tack_array_release(out[j]);
    }
    tack_kernel_release(k);
    if (cc)
        unsetenv("TACK_CC");
}

static void test_new_dtypes(void)
{
    new_dtypes_with(NULL);
    new_dtypes_with("clang");
    new_dtypes_with("gcc");
}

static void expect_launch_error(tack_kernel *k, const tack_arg *args, size_t nargs, int64_t n, tack_status want,
                                const char *fragment)
{
    tack_status st = tack_kernel_launch(k, NULL, n, args, nargs);
    CHECK(st == want);
    if (!contains(tack_last_error(), fragment)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", tack_last_error(), fragment);
        check_failures++;
    }
}

static void test_launch_checks(void)
{
    tack_kernel *k = compile(saxpy_src, NULL);
    if (!k)
        return;
    tack_array *x = vec(TACK_F32, 8), *y = vec(TACK_F32, 8), *xi = vec(TACK_I32, 8);
    float *py = tack_array_data(y);
    tack_array *ro = NULL;
    CHECK_OK(tack_array_wrap(cpu, (uint64_t)(uintptr_t)tack_array_data(y), TACK_F32, 1, (int64_t[]){8}, 0, &ro));

    tack_arg good[] = {tack_arg_f32(1.0f), tack_arg_array(x), tack_arg_array(y)};
    expect_launch_error(k, good, 2, 8, TACK_ETYPE, "takes 3 arguments");
    expect_launch_error(k, good, 2, 8, TACK_ETYPE, "2 given");
    tack_arg scalar_for_array[] = {tack_arg_f32(1.0f), tack_arg_f32(1.0f), tack_arg_array(y)};
    expect_launch_error(k, scalar_for_array, 3, 8, TACK_ETYPE, "parameter 'x'");
    tack_arg array_for_scalar[] = {tack_arg_array(x), tack_arg_array(x), tack_arg_array(y)};
    expect_launch_error(k, array_for_scalar, 3, 8, TACK_ETYPE, "parameter 'a'");
    tack_arg wrong_scalar[] = {tack_arg_f64(1.0), tack_arg_array(x), tack_arg_array(y)};
    expect_launch_error(k, wrong_scalar, 3, 8, TACK_ETYPE, "float64");
    tack_arg wrong_array[] = {tack_arg_f32(1.0f), tack_arg_array(xi), tack_arg_array(y)};
    expect_launch_error(k, wrong_array, 3, 8, TACK_ETYPE, "int32");
    tack_arg null_array[] = {tack_arg_f32(1.0f), tack_arg_array(NULL), tack_arg_array(y)};
    expect_launch_error(k, null_array, 3, 8, TACK_ETYPE, "parameter 'x'");
    /* read-only bound where the kernel may store: refused, nothing ran */
    tack_arg readonly[] = {tack_arg_f32(5.0f), tack_arg_array(x), tack_arg_array(ro)};
    py[0] = 7.0f;
    expect_launch_error(k, readonly, 3, 8, TACK_EVALUE, "parameter 'y'");
    expect_launch_error(k, readonly, 3, 8, TACK_EVALUE, "read-only");
    CHECK(py[0] == 7.0f);
    /* read-only where the kernel only reads: fine */
    tack_arg ro_const[] = {tack_arg_f32(1.0f), tack_arg_array(ro), tack_arg_array(y)};
    CHECK_OK(tack_kernel_launch(k, NULL, 1, ro_const, 3));
    CHECK(py[0] == 14.0f);
    expect_launch_error(k, good, 3, -1, TACK_EVALUE, "n must be >= 0");
    CHECK(py[0] == 14.0f);
    /* no array to take a device from */
    tack_kernel *s = compile("void s(tack_index i, float a) { (void)i; (void)a; }", NULL);
    tack_arg only_scalar[] = {tack_arg_f32(1.0f)};
    if (s) {
        expect_launch_error(s, only_scalar, 1, 4, TACK_EVALUE, "no array");
        CHECK_OK(tack_kernel_launch(s, cpu, 4, only_scalar, 1));
        CHECK_STATUS(tack_kernel_call(s, only_scalar, 1), TACK_EVALUE);
    }
    tack_kernel_release(s);
    tack_array_release(ro);
    tack_array_release(x);
    tack_array_release(y);
    tack_array_release(xi);
    tack_kernel_release(k);
}

/* ---- the domain of a call without one ---- */

static tack_array *arr(tack_dtype dt, int ndim, const int64_t *shape)
{
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(cpu, dt, ndim, shape, 0, &a));
    return a;
}

/* tack_kernel_call fails with TACK_EVALUE, running nothing, and a message
 * holding each fragment. */
static void expect_call_refused(tack_kernel *k, const tack_arg *args, size_t nargs, const char *const *fragments)
{
    CHECK_STATUS(tack_kernel_call(k, args, nargs), TACK_EVALUE);
    for (; *fragments; fragments++)
        if (!contains(tack_last_error(), *fragments)) {
            fprintf(stderr, "  the message lacks \"%s\": %s\n", *fragments, tack_last_error());
            check_failures++;
        }
}

/* A call without a domain runs over the shape every array shares, and only
 * then: arrays that could mean two domains are refused, naming their
 * shapes and the calls that take one. */
static void test_call_domain(void)
{
    tack_kernel *hist = compile("void hist(tack_index i, const int32_t *v, int32_t *bins) "
                                "{ tack_atomic_add(&bins[v[i]], 1); }",
                                NULL);
    tack_kernel *per_point = compile("void norm(tack_index i, const float *p, float *out) "
                                     "{ out[i] = p[3 * i] + p[3 * i + 1] + p[3 * i + 2]; }",
                                     NULL);
    tack_kernel *fill2 = compile("void fill2(tack_index i, tack_index j, const float *c, float *y) "
                                 "{ y[i * 3 + j] = c[j]; }",
                                 NULL);
    tack_kernel *sum = compile("void sum(tack_index i, const float *x, const float *y, float a) "
                               "{ (void)x; (void)y; (void)a; }",
                               NULL);
    tack_kernel *none = compile("void none(tack_index i, float a) { (void)i; (void)a; }", NULL);
    tack_array *v = arr(TACK_I32, 1, (int64_t[]){1000}), *bins = arr(TACK_I32, 1, (int64_t[]){16});
    tack_array *points = arr(TACK_F32, 2, (int64_t[]){397, 3}), *out = arr(TACK_F32, 1, (int64_t[]){397});
    tack_array *grid = arr(TACK_F32, 2, (int64_t[]){4, 3}), *coef = arr(TACK_F32, 1, (int64_t[]){3});
    tack_array *grid2 = arr(TACK_F32, 2, (int64_t[]){4, 3});
    if (!hist || !per_point || !fill2 || !sum || !none || !v || !bins || !points || !out || !grid || !coef ||
        !grid2)
        goto done;
    int32_t *pv = tack_array_data(v), *pb = tack_array_data(bins);
    for (int i = 0; i < 1000; i++)
        pv[i] = i % 16;
    memset(pb, 0, 16 * sizeof *pb);

    /* hist(v, bins) once counted 16 of the 1000 values. */
    tack_arg hist_args[] = {tack_arg_array(v), tack_arg_array(bins)};
    expect_call_refused(hist, hist_args, 2,
                        (const char *const[]){"kernel 'hist'", "'v' is (1000,)", "'bins' is (16,)",
                                              ".launch(n, ...)", ".launch((h, w), ...)", "tack_kernel_launch", NULL});
    for (int b = 0; b < 16; b++)
        CHECK(pb[b] == 0);
    CHECK_OK(tack_kernel_launch(hist, NULL, 1000, hist_args, 2));
    long counted = 0;
    for (int b = 0; b < 16; b++)
        counted += pb[b];
    CHECK(counted == 1000);

    /* (N, 3) points for a kernel of one index: N points or 3N numbers. */
    tack_arg point_args[] = {tack_arg_array(points), tack_arg_array(out)};
    expect_call_refused(per_point, point_args, 2,
                        (const char *const[]){"'p' is (397, 3)", "'out' is (397,)", ".launch(n, ...)", NULL});
    tack_arg points_only[] = {tack_arg_array(points), tack_arg_array(points)};
    tack_kernel *copy = compile("void copy(tack_index i, const float *x, float *y) { y[i] = x[i]; }", NULL);
    if (copy) {
        expect_call_refused(copy, points_only, 2,
                            (const char *const[]){"takes 1 index", "(397, 3), 2-D", "397 rows", "1191 elements",
                                                  NULL});
        /* One 1-D shape: its size is the domain. */
        tack_arg same[] = {tack_arg_array(out), tack_arg_array(out)};
        CHECK_OK(tack_kernel_call(copy, same, 2));
    }
    tack_kernel_release(copy);

    /* A 2-D kernel: arrays of its rank and one shape give the domain. */
    float *pc = tack_array_data(coef), *py = tack_array_data(grid), *pg2 = tack_array_data(grid2);
    for (int j = 0; j < 3; j++)
        pc[j] = (float)(j + 1);
    for (int e = 0; e < 12; e++)
        pg2[e] = (float)(e % 3 + 1), py[e] = 0;
    tack_arg coef_args[] = {tack_arg_array(coef), tack_arg_array(grid)};
    expect_call_refused(fill2, coef_args, 2, (const char *const[]){"'c' is (3,)", "'y' is (4, 3)", NULL});
    CHECK(py[11] == 0);
    tack_arg grid_args[] = {tack_arg_array(grid2), tack_arg_array(grid)};
    CHECK_OK(tack_kernel_call(fill2, grid_args, 2));
    CHECK(py[0] == 1 && py[5] == 3 && py[11] == 3);
    tack_arg flat_args[] = {tack_arg_array(out), tack_arg_array(out)};
    expect_call_refused(fill2, flat_args, 2, (const char *const[]){"takes 2 indices", "(397,), 1-D", NULL});

    /* Arrays the kernel only reads give the domain too. */
    tack_arg read_args[] = {tack_arg_array(out), tack_arg_array(out), tack_arg_f32(1.0f)};
    CHECK_OK(tack_kernel_call(sum, read_args, 3));
    /* No array: nothing to take a domain from. */
    tack_arg scalar_only[] = {tack_arg_f32(1.0f)};
    expect_call_refused(none, scalar_only, 1, (const char *const[]){"no array parameter", NULL});

    /* A wrong count or type is reported as such, not as a domain. */
    CHECK_STATUS(tack_kernel_call(hist, hist_args, 1), TACK_ETYPE);
    tack_arg wrong_type[] = {tack_arg_array(out), tack_arg_array(bins)};
    CHECK_STATUS(tack_kernel_call(hist, wrong_type, 2), TACK_ETYPE);
    CHECK(contains(tack_last_error(), "parameter 'v'"));
    tack_arg scalar_for_array[] = {tack_arg_f32(1.0f), tack_arg_array(bins)};
    CHECK_STATUS(tack_kernel_call(hist, scalar_for_array, 2), TACK_ETYPE);

    /* tack_kernel_call_hooked is the same call. */
    CHECK_STATUS(tack_kernel_call_hooked(hist, hist_args, 2, NULL), TACK_EVALUE);
    CHECK(contains(tack_last_error(), "'bins' is (16,)"));
done:
    tack_array_release(v);
    tack_array_release(bins);
    tack_array_release(points);
    tack_array_release(out);
    tack_array_release(grid);
    tack_array_release(grid2);
    tack_array_release(coef);
    tack_kernel_release(hist);
    tack_kernel_release(per_point);
    tack_kernel_release(fill2);
    tack_kernel_release(sum);
    tack_kernel_release(none);
}

/* ---- hooks around what may take long ---- */

/* What the hooks saw: how often each ran, whether they ever nested or ran
 * out of turn, and whether on another thread than the launching one. */
struct hook_log {
    int begun, ended, out_of_turn, elsewhere;
    pthread_t thread;
};

static void hook_begin(void *context)
{
    struct hook_log *h = context;
    h->out_of_turn += h->begun != h->ended;
    h->elsewhere += !pthread_equal(pthread_self(), h->thread);
    h->begun++;
}

static void hook_end(void *context)
{
    struct hook_log *h = context;
    h->ended++;
    h->out_of_turn += h->begun != h->ended;
    h->elsewhere += !pthread_equal(pthread_self(), h->thread);
}

/* A launch calls its hooks around a build and around a run expected to
 * take longer than their limit, judged by the kernel's measured cost (a
 * slow kernel's one index counts); a short launch, a refused one and an
 * empty one call nothing. */
static void test_launch_hooks(void)
{
    struct hook_log h = {0, 0, 0, 0, pthread_self()};
    /* 100 us: far above what one index of saxpy takes, even its first
     * (cold) run on a busy machine under the sanitizers. */
    tack_launch_hooks hooks = {100000, hook_begin, hook_end, &h};
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create(saxpy_src, NULL, &k));
    tack_array *x = vec(TACK_F32, 8), *y = vec(TACK_F32, 8);
    float *px = tack_array_data(x), *py = tack_array_data(y);
    for (int i = 0; i < 8; i++)
        px[i] = (float)i, py[i] = 1.0f;
    tack_arg args[] = {tack_arg_f32(2.0f), tack_arg_array(x), tack_arg_array(y)};
    const int64_t one = 1, none = 0;
    /* The first launch builds (here from the disk cache): hooked. */
    CHECK_OK(tack_kernel_launch_hooked(k, NULL, 1, &one, args, 3, &hooks));
    CHECK(h.begun == 1 && h.ended == 1 && py[0] == 1.0f && py[1] == 1.0f);
    /* Built and measured, one index is short. */
    CHECK_OK(tack_kernel_launch_hooked(k, NULL, 1, &one, args, 3, &hooks));
    CHECK(h.begun == 1 && py[0] == 1.0f);
    /* No shape: over y, as tack_kernel_call. */
    CHECK_OK(tack_kernel_call_hooked(k, args, 3, &hooks));
    CHECK(h.begun == 1 && py[0] == 1.0f && py[7] == 15.0f);
    /* A launch names its domain: a call is the other entry, not a NULL shape. */
    CHECK_STATUS(tack_kernel_launch_hooked(k, NULL, 1, NULL, args, 3, &hooks), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "tack_kernel_call_hooked") != NULL);
    CHECK(h.begun == 1 && py[7] == 15.0f);
    CHECK_OK(tack_kernel_launch_hooked(k, NULL, 1, &none, args, 3, &hooks));
    CHECK_STATUS(tack_kernel_launch_hooked(k, NULL, 1, &one, args, 2, &hooks), TACK_ETYPE);
    CHECK(h.begun == 1 && h.ended == 1);
    tack_launch_hooks half = {0, hook_begin, NULL, &h};
    CHECK_STATUS(tack_kernel_launch_hooked(k, NULL, 1, &one, args, 3, &half), TACK_EVALUE);
    CHECK(h.begun == 1 && py[0] == 1.0f);
    tack_kernel_release(k);

    /* About a millisecond an index: one index is long, once measured. */
    tack_kernel *slow = compile("void spin(tack_index i, int64_t n, int64_t *y) { volatile int64_t s = 0; "
                                "for (int64_t j = 0; j < n; j++) s += j; y[i] = s; }",
                                NULL);
    tack_array *out = vec(TACK_I64, 1);
    tack_arg spins[] = {tack_arg_i64(1 << 20), tack_arg_array(out)};
    if (slow) {
        /* Built already, but not measured: not known to be short. */
        CHECK_OK(tack_kernel_launch_hooked(slow, NULL, 1, &one, spins, 2, &hooks));
        CHECK(h.begun == 2 && h.ended == 2);
        CHECK_OK(tack_kernel_launch_hooked(slow, NULL, 1, &one, spins, 2, &hooks));
        CHECK(h.begun == 3 && h.ended == 3);
        CHECK(((int64_t *)tack_array_data(out))[0] == ((int64_t)1 << 19) * ((1 << 20) - 1));
        /* Without hooks, the same launch runs all the same. */
        CHECK_OK(tack_kernel_launch_hooked(slow, NULL, 1, &one, spins, 2, NULL));
    }
    tack_kernel_release(slow);

    /* A build that fails ends what it began. */
    tack_kernel *bad = NULL;
    CHECK_OK(tack_kernel_create("void bad(tack_index i, int64_t n, int64_t *y) { y[i] = undeclared; }", NULL, &bad));
    CHECK_STATUS(tack_kernel_launch_hooked(bad, NULL, 1, &one, spins, 2, &hooks), TACK_ECOMPILE);
    CHECK(h.begun == 4 && h.ended == 4);
    CHECK(h.out_of_turn == 0 && h.elsewhere == 0);
    tack_kernel_release(bad);
    tack_array_release(out);
    tack_array_release(x);
    tack_array_release(y);
}

/* Within one index, the kernel's statements run in program order even
 * when two parameters are the same memory. */
static void test_aliasing(void)
{
    tack_kernel *k = compile("void k(tack_index i, float *a, const float *b) { a[i] = a[i] + 1.0f; a[i] = a[i] * "
                             "b[i]; }",
                             NULL);
    if (!k)
        return;
    const int64_t n = 1 << 16;
    tack_array *x = vec(TACK_F32, n);
    float *px = tack_array_data(x);
    for (int64_t i = 0; i < n; i++)
        px[i] = (float)(i % 100);
    tack_arg same[] = {tack_arg_array(x), tack_arg_array(x)};
    CHECK_OK(tack_kernel_call(k, same, 2));
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(i % 100);
        ok &= px[i] == (v + 1) * (v + 1);
    }
    CHECK(ok);
    /* two reshaped views of one buffer */
    tack_array *v1 = NULL, *v2 = NULL;
    CHECK_OK(tack_array_reshape(x, 2, (int64_t[]){256, -1}, &v1));
    CHECK_OK(tack_array_reshape(x, 2, (int64_t[]){-1, 256}, &v2));
    for (int64_t i = 0; i < n; i++)
        px[i] = 2.0f;
    tack_arg views[] = {tack_arg_array(v1), tack_arg_array(v2)};
    CHECK_OK(tack_kernel_launch(k, NULL, n, views, 2));
    ok = 1;
    for (int64_t i = 0; i < n; i++)
        ok &= px[i] == 9.0f;
    CHECK(ok);
    tack_array_release(v1);
    tack_array_release(v2);
    tack_array_release(x);
    tack_kernel_release(k);
}

/* Large and small, cheap and costly: the pool decides serial or parallel;
 * every index runs exactly once either way. */
static void test_parallel_coverage(void)
{
    tack_kernel *k = compile("void k(tack_index i, uint32_t *hits) { hits[i] += 1; }", NULL);
    tack_kernel *heavy = compile("void h(tack_index i, int32_t work, double *y) {\n"
                                 "  double acc = 0; for (int32_t j = 0; j < work; j++) acc += (double)((i + j) % 7);\n"
                                 "  y[i] = acc; }",
                                 NULL);
    if (!k || !heavy)
        return;
    const int64_t sizes[] = {1, 2, 3, 255, 256, 257, 4097, 100003, 1 << 21};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t n = sizes[s];
        tack_array *h = vec(TACK_U32, n);
        tack_arg args[] = {tack_arg_array(h)};
        for (int r = 0; r < 3; r++)
            CHECK_OK(tack_kernel_call(k, args, 1));
        uint32_t *ph = tack_array_data(h);
        int ok = 1;
        for (int64_t i = 0; i < n; i++)
            ok &= ph[i] == 3;
        if (!ok)
            fprintf(stderr, "n = %lld: some index did not run exactly 3 times\n", (long long)n);
        CHECK(ok);
        tack_array_release(h);
    }
    /* few indices, each costly: worth splitting */
    const int64_t n = 64;
    tack_array *y = vec(TACK_F64, n);
    tack_arg args[] = {tack_arg_i32(200000), tack_arg_array(y)};
    for (int r = 0; r < 3; r++)
        CHECK_OK(tack_kernel_call(heavy, args, 2));
    double *py = tack_array_data(y);
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        double acc = 0;
        for (int32_t j = 0; j < 200000; j++)
            acc += (double)((i + j) % 7);
        ok &= py[i] == acc;
    }
    CHECK(ok);
    tack_array_release(y);
    tack_kernel_release(k);
    tack_kernel_release(heavy);
}

struct thread_job {
    tack_kernel *k;
    int ok;
};

static void *launch_many(void *arg)
{
    struct thread_job *job = arg;
    const int64_t n = 1 << 17;
    tack_array *y = vec(TACK_I64, n);
    tack_arg args[] = {tack_arg_array(y)};
    job->ok = 1;
    for (int r = 0; r < 20; r++)
        job->ok &= tack_kernel_call(job->k, args, 1) == TACK_OK;
    int64_t *py = tack_array_data(y);
    for (int64_t i = 0; i < n; i++)
        job->ok &= py[i] == 20 * i;
    tack_array_release(y);
    return NULL;
}

static void test_threads(void)
{
    tack_kernel *k = compile("void k(tack_index i, int64_t *y) { y[i] += i; }", NULL);
    if (!k)
        return;
    pthread_t t[4];
    struct thread_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i].k = k;
        pthread_create(&t[i], NULL, launch_many, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK(jobs[i].ok);
    }
    tack_kernel_release(k);
}

/* ---- compilation and its cache ---- */

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* Points TACK_CACHE_DIR at a fresh `name` folder and TACK_CC at cc behind
 * a script that logs one line to `log` per call. Zero if it cannot. */
static int counting_compiler(const char *name, char *log, size_t cap)
{
    char dir[300], script[350];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, name);
    snprintf(script, sizeof script, "%s/%s-cc.sh", tmpdir, name);
    snprintf(log, cap, "%s/%s-cc.log", tmpdir, name);
    FILE *f = fopen(script, "w");
    CHECK(f != NULL);
    if (!f)
        return 0;
    fprintf(f, "#!/bin/sh\necho \"$@\" >> '%s'\nexec cc \"$@\"\n", log);
    fclose(f);
    chmod(script, 0755);
    setenv("TACK_CACHE_DIR", dir, 1);
    setenv("TACK_CC", script, 1);
    return 1;
}

static void test_cache(void)
{
    char dir[300], log[350];
    if (!counting_compiler("cache-test", log, sizeof log))
        return;

    const char *src = "void c1(tack_index i, float *y) { y[i] = 42.0f; }";
    tack_kernel *k = compile(src, NULL);
    CHECK(count_lines(log) == 1);
    tack_kernel_release(k);
    /* a second kernel from the same source: loaded from the cache */
    k = compile(src, NULL);
    CHECK(count_lines(log) == 1);
    if (k) {
        tack_array *y = vec(TACK_F32, 3);
        tack_arg args[] = {tack_arg_array(y)};
        CHECK_OK(tack_kernel_call(k, args, 1));
        CHECK(((float *)tack_array_data(y))[2] == 42.0f);
        tack_array_release(y);
    }
    tack_kernel_release(k);
    /* another source, or other flags: compiled */
    k = compile("void c2(tack_index i, float *y) { y[i] = 43.0f; }", NULL);
    CHECK(count_lines(log) == 2);
    tack_kernel_release(k);
    setenv("TACK_CFLAGS", "-DTACK_TEST_FLAG=1", 1);
    k = compile(src, NULL);
    CHECK(count_lines(log) == 3);
    tack_kernel_release(k);
    unsetenv("TACK_CFLAGS");

    /* A compile error: the log, with the user's line numbers. */
    const char *bad = "// line 1\nvoid bad(tack_index i, float *y) {\n  y[i] = undefined_name;\n}\n";
    k = (tack_kernel *)0x1;
    CHECK_STATUS(tack_kernel_compile(bad, NULL, cpu, &k), TACK_ECOMPILE);
    CHECK(k == (tack_kernel *)0x1);
    CHECK(contains(tack_last_error(), "kernel 'bad' failed to compile"));
    CHECK(contains(tack_kernel_compile_log(), "kernel:3:"));
    CHECK(contains(tack_kernel_compile_log(), "undefined_name"));

    /* No compiler: says how to set TACK_CC. */
    setenv("TACK_CC", "/nonexistent/tack-test-cc", 1);
    CHECK_STATUS(tack_kernel_compile("void c3(tack_index i, float *y) { y[i] = 1; }", NULL, cpu, &k),
                 TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "TACK_CC"));
    unsetenv("TACK_CC");
    /* An unusable cache directory is an error that names TACK_CACHE_DIR. */
    setenv("TACK_CACHE_DIR", "/proc/tack-no-such-dir", 1);
    CHECK_STATUS(tack_kernel_compile("void c4(tack_index i, float *y) { y[i] = 1; }", NULL, cpu, &k),
                 TACK_ERUNTIME);
    CHECK(contains(tack_last_error(), "TACK_CACHE_DIR"));
    snprintf(dir, sizeof dir, "%s/cache", tmpdir);
    setenv("TACK_CACHE_DIR", dir, 1);
}

/* A cached object that is damaged or not this user's to trust is not
 * loaded (a cut one would fault inside dlopen): it is compiled again and
 * replaced. In a child of its own, for that fault. */
static void test_a_spoiled_cached_object_is_rebuilt(void)
{
    char path[PATH_MAX], log[350];
    if (!counting_compiler("spoiled", log, sizeof log))
        return;
    const char *src = "void spoiled(tack_index i, int32_t *y) { y[i] = (int32_t)i + 5; }";
    tack_kernel_release(compile(src, NULL));
    for (int how = 0; how < SPOIL_WAYS; how++) {
        struct stat was;
        if (!cached_file("cpu-", path, sizeof path) || !spoil(path, how, &was))
            continue;
        int before = count_lines(log);
        tack_kernel *k = compile(src, NULL);
        if (count_lines(log) != before + 1)
            fprintf(stderr, "a cached object %s was used\n", spoil_names[how]);
        CHECK(count_lines(log) == before + 1);
        CHECK(rebuilt(path, &was));
        if (k) {
            tack_array *y = vec(TACK_I32, 4);
            tack_arg args[] = {tack_arg_array(y)};
            CHECK_OK(tack_kernel_call(k, args, 1));
            CHECK(((int32_t *)tack_array_data(y))[3] == 8);
            tack_array_release(y);
        }
        tack_kernel_release(k);
    }
}

/* A cache directory others can write is refused, naming it. */
static void test_a_cache_directory_others_can_write_is_refused(void)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/shared", tmpdir);
    CHECK(mkdir(dir, 0700) == 0 && chmod(dir, 01777) == 0);
    setenv("TACK_CACHE_DIR", dir, 1);
    tack_kernel *k = (tack_kernel *)0x1;
    CHECK_STATUS(tack_kernel_compile("void shared(tack_index i, float *y) { y[i] = 1; }", NULL, cpu, &k),
                 TACK_ERUNTIME);
    CHECK(k == (tack_kernel *)0x1);
    CHECK(contains(tack_last_error(), dir) && contains(tack_last_error(), "private"));
    CHECK(contains(tack_last_error(), "TACK_CACHE_DIR"));
}

/* A thread's compile log is freed when the thread exits (LeakSanitizer
 * reports it at exit otherwise). */
static void *fail_to_compile(void *arg)
{
    (void)arg;
    tack_kernel *k = NULL;
    if (tack_kernel_compile("void doomed(tack_index i, float *y) { y[i] = nope; }", NULL, cpu, &k) != TACK_OK &&
        contains(tack_kernel_compile_log(), "nope"))
        return (void *)1;
    return NULL;
}

static void test_a_threads_compile_log_goes_with_it(void)
{
    for (int i = 0; i < 4; i++) {
        pthread_t t;
        void *failed = NULL;
        CHECK(pthread_create(&t, NULL, fail_to_compile, NULL) == 0 && pthread_join(t, &failed) == 0);
        CHECK(failed == (void *)1);
    }
}

static void test_generated_source(void)
{
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create(saxpy_src, NULL, &k));
    if (!k)
        return;
    const char *host = NULL, *cuda = NULL, *none = (const char *)0x1;
    CHECK_OK(tack_kernel_generated_source(k, "cpu", &host));
    CHECK_OK(tack_kernel_generated_source(k, "cuda", &cuda));
    CHECK_STATUS(tack_kernel_generated_source(k, "metal", &none), TACK_EVALUE);
    CHECK(none == (const char *)0x1);
    CHECK(contains(host, "#line 1 \"kernel\"") && contains(host, "tack_kernel_entry"));
    CHECK(contains(cuda, "__global__") && contains(cuda, "#line 1 \"kernel\""));
    tack_kernel_release(k);

    /* A dtype a backend's compiler lacks is refused there, naming it; the
     * others generate as usual. */
    static const struct {
        const char *src, *refused_by[4];
    } cases[] = {
        {"void k(tack_index i, const tack_c64 *x, tack_c128 *y) { y[i] = x[i]; }", {"cuda", "hip", "level_zero"}},
        {"void k(tack_index i, bool b, bool *y) { y[i] = b; }", {"level_zero"}},
        {"void k(tack_index i, tack_f16 a, const __bf16 *x, _Float16 *y) { y[i] = a; }", {NULL}},
    };
    static const char *const backends[] = {"cpu", "cuda", "hip", "level_zero"};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        CHECK_OK(tack_kernel_create(cases[c].src, NULL, &k));
        if (!k)
            continue;
        for (int b = 0; b < 4; b++) {
            int refused = 0;
            for (int r = 0; r < 4 && cases[c].refused_by[r]; r++)
                refused |= !strcmp(cases[c].refused_by[r], backends[b]);
            const char *text = (const char *)0x1;
            tack_status st = tack_kernel_generated_source(k, backends[b], &text);
            if (refused) {
                CHECK(st == TACK_ETYPE && text == (const char *)0x1);
                char says[64];
                snprintf(says, sizeof says, "on the %s backend", backends[b]);
                CHECK(contains(tack_last_error(), says));
            } else {
                CHECK(st == TACK_OK && contains(text, "tack_kernel_entry"));
            }
        }
        tack_kernel_release(k);
    }
}

/* The parser follows the conditionals it can evaluate and refuses a
 * signature under one it cannot; malformed directives and deep nesting
 * neither crash it nor make it read a wrong type; its work is bounded. */
static void test_conditionals_and_budget(void)
{
    static const struct {
        const char *src;
        tack_status want;
        tack_dtype dtype; /* of the last parameter, where want is TACK_OK */
    } cases[] = {
        {"#if 1\ntypedef double real;\n#else\ntypedef float real;\n#endif\nvoid k(tack_index i, real *y) { y[i] = 1; }",
         TACK_OK, TACK_F64},
        {"#if 0\ntypedef double real;\n#elif 2 > 1\ntypedef float real;\n#else\ntypedef int8_t real;\n#endif\n"
         "void k(tack_index i, real *y) { y[i] = 1; }",
         TACK_OK, TACK_F32},
        {"#define A 1\n#undef A\n#if defined A || A\nvoid k(tack_index i, double *y) { y[i] = 1; }\n#else\n"
         "void k(tack_index i, int32_t *y) { y[i] = 1; }\n#endif",
         TACK_OK, TACK_I32},
        {"#if 0\n#if X\n#else\ntypedef double real;\n#endif\n#else\ntypedef uint16_t real;\n#endif\n"
         "void k(tack_index i, real *y) { y[i] = 1; }",
         TACK_OK, TACK_U16},
        {"#if 1 / 0\ntypedef double real;\n#endif\nvoid k(tack_index i, real *y) { y[i] = 1; }", TACK_EVALUE, 0},
        /* A number too long to read whole is not read as its first digits. */
        {"#if 0x00000000000000000000000000000000000001\ntypedef double real;\n#else\ntypedef float real;\n#endif\n"
         "void k(tack_index i, real *y) { y[i] = 1; }",
         TACK_EVALUE, 0},
        {"#ifdef X\nvoid k(tack_index i, double *y) { y[i] = 1; }\n#endif", TACK_EVALUE, 0},
        {"#if defined(\ntypedef double real;\n#endif\nvoid k(tack_index i, real *y) { y[i] = 1; }", TACK_EVALUE, 0},
        /* Directives out of place: an #endif alone, an #if never closed. */
        {"#endif\n#else\nvoid k(tack_index i, float *y) { y[i] = 1; }\n#if 1\n", TACK_OK, TACK_F32},
        {"#if 0\nvoid k(tack_index i, float *y) { y[i] = 1; }", TACK_EVALUE, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        tack_kernel *k = NULL;
        tack_status st = tack_kernel_create(cases[c].src, NULL, &k);
        if (st != cases[c].want) {
            fprintf(stderr, "case %zu: status %d, want %d: %s\n", c, st, cases[c].want, tack_last_error());
            check_failures++;
        }
        if (k) {
            tack_kernel_param p;
            CHECK_OK(tack_kernel_param_info(k, tack_kernel_num_params(k) - 1, &p));
            CHECK(p.dtype == cases[c].dtype);
            tack_kernel_release(k);
        }
    }
    /* Deep nesting: of parentheses in a condition, of #if groups, of
     * macros in a condition. */
    size_t cap = 1 << 20;
    char *src = malloc(cap);
    CHECK(src != NULL);
    if (!src)
        return;
    size_t n = (size_t)snprintf(src, cap, "#if ");
    for (int i = 0; i < 100000; i++)
        src[n++] = '(';
    n += (size_t)snprintf(src + n, cap - n, "1\nvoid k(tack_index i, float *y) { y[i] = 1; }\n#endif\n");
    tack_kernel *k = NULL;
    CHECK_STATUS(tack_kernel_create(src, NULL, &k), TACK_EVALUE);
    n = 0;
    for (int i = 0; i < 2000; i++)
        n += (size_t)snprintf(src + n, cap - n, "#if 1\n");
    n += (size_t)snprintf(src + n, cap - n, "void k(tack_index i, float *y) { y[i] = 1; }\n");
    for (int i = 0; i < 2000; i++)
        n += (size_t)snprintf(src + n, cap - n, "#endif\n");
    CHECK_OK(tack_kernel_create(src, NULL, &k));
    tack_kernel_release(k);
    k = NULL;
    n = (size_t)snprintf(src, cap, "#define M7 1\n");
    for (int l = 6; l >= 0; l--) {
        n += (size_t)snprintf(src + n, cap - n, "#define M%d", l);
        for (int w = 0; w < 24; w++)
            n += (size_t)snprintf(src + n, cap - n, " M%d +", l + 1);
        n += (size_t)snprintf(src + n, cap - n, " 0\n");
    }
    n += (size_t)snprintf(src + n, cap - n, "#if M0\ntypedef double real;\n#endif\n"
                                            "void k(tack_index i, real *y) { y[i] = 1; }\n");
    /* Evaluated with the budget, or given up on: either way refused
     * (unknown condition or too complex), never a long wait. */
    CHECK_STATUS(tack_kernel_create(src, NULL, &k), TACK_EVALUE);
    free(src);
}

/* Tack's atomics are read from the source's tokens: a kernel that names
 * tack_atomic_ only in a comment or a string has no atomics (no plain
 * entry is generated for it, and its launches are not treated as ones with
 * atomics); one whose helper calls them, or whose macro names them, has. */
static int has_plain_entry(const char *src)
{
    tack_kernel *k = NULL;
    const char *generated = NULL;
    int has = -1;
    if (tack_kernel_create(src, NULL, &k) == TACK_OK && tack_kernel_generated_source(k, "cpu", &generated) == TACK_OK)
        has = strstr(generated, "tack_kernel_entry_plain") != NULL;
    tack_kernel_release(k);
    return has;
}

static void test_atomics_are_read_from_tokens(void)
{
    CHECK(has_plain_entry("/* no tack_atomic_add here */\n"
                          "void one(tack_index i, int32_t *y) { y[i] = 1; }\n") == 0);
    CHECK(has_plain_entry("static const char *note = \"tack_atomic_add\";\n"
                          "void two(tack_index i, int32_t *y) { y[i] = note[0]; }\n") == 0);
    CHECK(has_plain_entry("static void bump(int32_t *c) { tack_atomic_add(c, 1); }\n"
                          "void three(tack_index i, int32_t *c) { (void)i; bump(c); }\n") == 1);
    CHECK(has_plain_entry("#define ADD tack_atomic_add\n"
                          "void four(tack_index i, int32_t *c) { (void)i; ADD(c, 1); }\n") == 1);
    CHECK(has_plain_entry("void five(tack_index i, int32_t *c) { (void)i; tack_atomic_add(c, 1); }\n") == 1);
}

/* ---- extents and checked launches ---- */

static void test_extents_and_checked_launches(void)
{
    /* tack_extent and tack_size read the array each launch is given. */
    tack_kernel *k = compile("void rows(tack_index i, tack_index j, float *y)\n"
                             "{\n    y[i * tack_extent(y, 1) + j] = (float)(tack_size(y) * 1000 + "
                             "tack_extent(y, 0) * 10 + tack_extent(y, 7));\n}\n",
                             "rows");
    int64_t shape[2] = {3, 5};
    tack_array *m = NULL;
    CHECK_OK(tack_array_empty(cpu, TACK_F32, 2, shape, 0, &m));
    tack_arg a[3] = {tack_arg_array(m)};
    CHECK_OK(tack_kernel_launch_nd(k, NULL, 2, shape, a, 1));
    float out[15];
    CHECK_OK(tack_array_copy_to_host(m, out, sizeof out));
    for (int i = 0; i < 15; i++)
        CHECK(out[i] == 15030.0f);
    tack_kernel_release(k);
    tack_array_release(m);

    /* A checked launch one index past the end: the store is dropped, the
     * others run, and the error names the kernel, parameter, index,
     * extent and line. */
    tack_kernel_options o = {0};
    o.checked = 1;
    CHECK_OK(tack_kernel_create_with("void past(tack_index i, const float *x, float *y)\n"
                                     "{\n    y[i] = x[i] + 1.0f;\n}\n",
                                     NULL, &o, &k));
    tack_array *x = vec(TACK_F32, 9), *y = vec(TACK_F32, 8);
    a[0] = tack_arg_array(x);
    a[1] = tack_arg_array(y);
    CHECK_STATUS(tack_kernel_launch(k, cpu, 9, a, 2), TACK_EINDEX);
    const char *msg = tack_last_error();
    CHECK(contains(msg, "kernel 'past'") && contains(msg, "parameter 'y'") && contains(msg, "index 8 ") &&
          contains(msg, "8 elements") && contains(msg, "line 3 "));
    CHECK(!strcmp(tack_status_name(TACK_EINDEX), "TACK_EINDEX"));
    float got[8];
    CHECK_OK(tack_array_copy_to_host(y, got, sizeof got));
    for (int i = 0; i < 8; i++)
        CHECK(got[i] == 1.0f);
    /* In bounds, the same kernel runs clean. */
    CHECK_OK(tack_kernel_launch(k, cpu, 8, a, 2));
    tack_kernel_release(k);
    tack_array_release(x);
    tack_array_release(y);
}

/* Reductions: every contribution reaches its target by the end of the
 * launch, exactly for integers, on targets few (a window of partial sums)
 * and many (5000 bins: more than the range's table holds, so it flushes
 * as it goes), from the kernel's body and from a helper it calls; a
 * kernel without them gets no table. */
static void test_reductions(void)
{
    const char *src = "static void low(int64_t *m, int64_t v) { tack_reduce_min(m, v); }\n"
                      "void red(tack_index i, const int64_t *v, int64_t *s, int64_t *bins, float *f)\n"
                      "{\n"
                      "    tack_reduce_add(&s[0], v[i]);\n"
                      "    low(&s[1], v[i]);\n"
                      "    tack_reduce_max(&s[2], v[i]);\n"
                      "    tack_reduce_add(&bins[(v[i] % 5000 + 5000) % 5000], (int64_t)1);\n"
                      "    tack_reduce_add(&f[0], 0.5f);\n"
                      "    tack_reduce_min(&f[1], (float)v[i]);\n"
                      "}\n";
    tack_kernel *k = compile(src, NULL);
    if (!k)
        return;
    const int64_t n = 200003, nbins = 5000;
    tack_array *v = vec(TACK_I64, n), *s = vec(TACK_I64, 3), *bins = vec(TACK_I64, nbins), *f = vec(TACK_F32, 2);
    int64_t *pv = tack_array_data(v), *ps = tack_array_data(s), *pb = tack_array_data(bins);
    float *pf = tack_array_data(f);
    int64_t sum = 0, lo = INT64_MAX, hi = INT64_MIN;
    int64_t *want = calloc((size_t)nbins, sizeof *want);
    uint64_t x = 12345;
    for (int64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        pv[i] = (int64_t)(x >> 20) - ((int64_t)1 << 43);
        sum += pv[i];
        lo = pv[i] < lo ? pv[i] : lo;
        hi = pv[i] > hi ? pv[i] : hi;
        want[(pv[i] % nbins + nbins) % nbins]++;
    }
    ps[0] = 7;
    ps[1] = INT64_MAX;
    ps[2] = INT64_MIN;
    memset(pb, 0, (size_t)nbins * sizeof *pb);
    pf[0] = 0.0f;
    pf[1] = 1e30f;
    tack_arg args[] = {tack_arg_array(v), tack_arg_array(s), tack_arg_array(bins), tack_arg_array(f)};
    CHECK_OK(tack_kernel_launch(k, NULL, n, args, 4));
    CHECK(ps[0] == sum + 7);
    CHECK(ps[1] == lo);
    CHECK(ps[2] == hi);
    CHECK(!memcmp(pb, want, (size_t)nbins * sizeof *pb));
    CHECK(pf[0] == 0.5f * (float)n); /* a multiple of 0.5 below 2^24: exact */
    CHECK(pf[1] == (float)lo);
    const char *generated = NULL;
    CHECK_OK(tack_kernel_generated_source(k, "cpu", &generated));
    CHECK(contains(generated, "tack_rtab_"));
    free(want);
    tack_array_release(v);
    tack_array_release(s);
    tack_array_release(bins);
    tack_array_release(f);
    tack_kernel_release(k);
    tack_kernel *plain = compile(saxpy_src, NULL);
    if (plain && tack_kernel_generated_source(plain, "cpu", &generated) == TACK_OK)
        CHECK(!contains(generated, "tack_rtab_"));
    tack_kernel_release(plain);
}

int main(void)
{
    if (!cpu_test_begin(tmpdir, sizeof tmpdir, "kernel", 1, &cpu))
        return 1;
    RUN(test_signature);
    RUN(test_signature_errors);
    RUN(test_conditionals_and_budget);
    RUN(test_signature_new_types);
    RUN(test_saxpy);
    RUN(test_every_dtype);
    RUN(test_new_dtypes);
    RUN(test_launch_checks);
    RUN(test_call_domain);
    RUN(test_launch_hooks);
    RUN(test_aliasing);
    RUN(test_parallel_coverage);
    RUN(test_threads);
    RUN(test_cache);
    RUN(test_generated_source);
    RUN(test_atomics_are_read_from_tokens);
    RUN(test_extents_and_checked_launches);
    RUN(test_reductions);
    RUN(test_a_threads_compile_log_goes_with_it);
    RUN(test_a_spoiled_cached_object_is_rebuilt);
    RUN(test_a_cache_directory_others_can_write_is_refused);
    tack_device_release(cpu);
    remove_tree(tmpdir);
    CHECK_DONE();
}
