/* Launch arguments a C caller fills by hand: a kind that is neither, and a
 * float parameter given the bits of an integer field. Each is refused
 * before anything runs, with a message that says which field to fill.
 * Nothing here compiles a kernel: a launch checks its arguments first. */
#include <limits.h>

#include "check.h"
#include "kernels.h"

static const char *src = "void k(tack_index i, double a, float b, double *y) { y[i] = a + b; }";

static tack_device *cpu;
static tack_kernel *kernel;
static tack_array *y;

static void setup(void)
{
    CHECK_OK(tack_device_open("cpu", NULL, 0, &cpu));
    CHECK_OK(tack_kernel_create(src, NULL, &kernel));
    int64_t n = 4;
    CHECK_OK(tack_array_empty(cpu, TACK_F64, 1, &n, 0, &y));
}

static void teardown(void)
{
    tack_array_release(y);
    tack_kernel_release(kernel);
    tack_device_release(cpu);
}

#define EXPECT_REFUSED(args, status, text) expect_refused(__FILE__, __LINE__, args, status, text)
static void expect_refused(const char *file, int line, tack_arg *args, tack_status status, const char *text)
{
    double *py = tack_array_data(y);
    py[0] = 42;
    CHECK_STATUS_AT(file, line, tack_kernel_launch(kernel, NULL, 4, args, 3), status);
    CHECK_AT(file, line, strstr(tack_last_error(), text) != NULL);
    if (!strstr(tack_last_error(), text))
        fprintf(stderr, "%s:%d: the message was: %s\n", file, line, tack_last_error());
    CHECK_AT(file, line, py[0] == 42); /* nothing ran */
}

static void test_an_invalid_kind_is_named_with_the_valid_ones(void)
{
    setup();
    tack_arg args[] = {tack_arg_f64(1), tack_arg_f32(2), tack_arg_array(y)};
    args[0].kind = (tack_arg_kind)7;
    EXPECT_REFUSED(args, TACK_ETYPE, "has kind 7, which is no tack_arg_kind");
    EXPECT_REFUSED(args, TACK_ETYPE, "TACK_ARG_SCALAR (0), TACK_ARG_ARRAY (1) or TACK_ARG_SCALAR_BITS (2), or "
                                     "build the argument with tack_arg_f64");
    args[0] = tack_arg_f64(1);
    args[2].kind = (tack_arg_kind)-3;
    EXPECT_REFUSED(args, TACK_ETYPE, "argument 2 (parameter 'y' of kernel 'k') has kind -3");
    teardown();
}

static void test_an_integer_field_for_a_double_is_refused(void)
{
    setup();
    tack_arg args[] = {{TACK_ARG_SCALAR, TACK_F64, {.i64 = 3}}, tack_arg_f32(2), tack_arg_array(y)};
    EXPECT_REFUSED(args, TACK_ETYPE, "the integer 3 written to an integer field");
    EXPECT_REFUSED(args, TACK_ETYPE, "fill .value.f64 (tack_arg_f64(3.0))");
    args[0].value.i64 = -5;
    EXPECT_REFUSED(args, TACK_ETYPE, "the integer -5");
    /* Another dtype than the parameter's names the field to fill. */
    args[0] = tack_arg_i64(3);
    EXPECT_REFUSED(args, TACK_ETYPE, "got a int64 value: fill .value.f64 and set .dtype to float64 (tack_arg_f64)");
    teardown();
}

static void test_an_integer_field_for_a_float_is_refused(void)
{
    setup();
    tack_arg args[] = {tack_arg_f64(1), {TACK_ARG_SCALAR, TACK_F32, {.i32 = 2}}, tack_arg_array(y)};
    EXPECT_REFUSED(args, TACK_ETYPE, "parameter 'b' of kernel 'k' is float (float32)");
    EXPECT_REFUSED(args, TACK_ETYPE, "the integer 2 written");
    EXPECT_REFUSED(args, TACK_ETYPE, "fill .value.f32 (tack_arg_f32(2.0))");
    teardown();
}

/* The bits of an integer meant as a float (the smallest subnormals):
 * taken as they are with TACK_ARG_SCALAR_BITS. */
static void test_a_subnormal_passes_as_bits(void)
{
    setup();
    tack_arg args[] = {tack_arg_f64(5e-324), tack_arg_f32(1e-45f), tack_arg_array(y)};
    EXPECT_REFUSED(args, TACK_ETYPE, "set .kind to TACK_ARG_SCALAR_BITS for a subnormal meant as one");
    args[0].kind = TACK_ARG_SCALAR_BITS;
    EXPECT_REFUSED(args, TACK_ETYPE, "parameter 'b'");
    args[1].kind = TACK_ARG_SCALAR_BITS;
    tack_status st = tack_kernel_launch(kernel, NULL, 4, args, 3);
    CHECK(st == TACK_OK || !strstr(tack_last_error(), "integer"));
    /* A scalar kind, still: an array parameter refuses it. */
    args[2] = (tack_arg){TACK_ARG_SCALAR_BITS, TACK_F64, {.f64 = 1}};
    EXPECT_REFUSED(args, TACK_ETYPE, "parameter 'y' of kernel 'k' is an array");
    teardown();
}

/* Ordinary values pass, the smallest normal numbers and NaN among them. */
static void test_float_values_are_not_mistaken_for_integers(void)
{
    setup();
    const double doubles[] = {0.0, -0.0, 1.0, -2.5, 2.2250738585072014e-308, __builtin_nan(""),
                              -__builtin_nan(""), __builtin_inf(), 1e300};
    for (size_t i = 0; i < sizeof doubles / sizeof doubles[0]; i++) {
        tack_arg args[] = {tack_arg_f64(doubles[i]), tack_arg_f32(1.17549435e-38f), tack_arg_array(y)};
        tack_status st = tack_kernel_launch(kernel, NULL, 4, args, 3);
        /* Past the argument checks: a build may fail where no compiler is. */
        CHECK(st == TACK_OK || !strstr(tack_last_error(), "integer"));
    }
    teardown();
}

int main(void)
{
    /* The launches that pass the checks build into a cache of their own. */
    static char dir[PATH_MAX];
    tack_device *d = NULL;
    if (!cpu_test_begin(dir, sizeof dir, "launch-args", 1, &d))
        return 1;
    tack_device_release(d);
    RUN(test_an_invalid_kind_is_named_with_the_valid_ones);
    RUN(test_an_integer_field_for_a_double_is_refused);
    RUN(test_an_integer_field_for_a_float_is_refused);
    RUN(test_float_values_are_not_mistaken_for_integers);
    RUN(test_a_subnormal_passes_as_bits);
    remove_tree(dir);
    CHECK_DONE();
}
