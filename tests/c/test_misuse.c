/* Misuse from C caught where the check costs nothing: a release after the
 * last one and a use after it, of every handle type, also once the address
 * could have gone to a new object (reported and, in builds with
 * assertions, aborted with a message naming the call and the object), and
 * memory wrapped at NULL. Each misuse runs in a child process whose stderr is
 * read here. */
#include <fcntl.h>

#include "check.h"

struct misuse {
    void (*fn)(void);
    int fd; /* the pipe's write end, the child's stderr */
};

static void misuse_child(void *ctx)
{
    struct misuse *m = ctx;
    dup2(m->fd, STDERR_FILENO);
    m->fn();
}

/* Runs fn in a child and checks how it ended: aborted (SIGABRT) in builds
 * with assertions, else returned; either way with `message` on stderr. */
#define EXPECT_CAUGHT(fn, message) expect_caught(__FILE__, __LINE__, fn, message)
static void expect_caught(const char *file, int line, void (*fn)(void), const char *message)
{
    int fds[2];
    CHECK_AT(file, line, pipe(fds) == 0);
    struct misuse m = {fn, fds[1]};
    int detail = 0;
    enum check_end end = check_in_child(misuse_child, &m, check_timeout(), &detail);
    close(fds[1]);
    char out[4096];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof out - 1 && (r = read(fds[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(fds[0]);
#ifdef NDEBUG
    CHECK_AT(file, line, end == CHECK_EXITED && detail == 0);
#else
    CHECK_AT(file, line, end == CHECK_SIGNALLED && detail == SIGABRT);
#endif
    CHECK_AT(file, line, strstr(out, message) != NULL);
    if (!strstr(out, message) || end == CHECK_TIMED_OUT)
        fprintf(stderr, "%s:%d: the child (end %d, %d) said:\n%s\n", file, line, (int)end, detail, out);
}

static tack_device *cpu(void)
{
    tack_device *d = NULL;
    CHECK_OK(tack_device_open("cpu", NULL, 0, &d));
    return d;
}

static tack_array *new_array(void)
{
    tack_device *d = cpu();
    int64_t n = 8;
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(d, TACK_F32, 1, &n, 0, &a));
    tack_device_release(d);
    return a;
}

static void release_twice(void)
{
    tack_array *a = new_array();
    tack_array_release(a);
    tack_array_release(a);
}

static void test_an_array_released_twice_is_caught(void)
{
    EXPECT_CAUGHT(release_twice, "tack: tack_array_release: the array at 0x");
    EXPECT_CAUGHT(release_twice, "was already released");
}

static void retained_then_released_three_times(void)
{
    tack_array *a = new_array();
    tack_array_retain(a);
    tack_array_release(a);
    tack_array_release(a);
    tack_array_release(a);
}

static void test_one_release_more_than_retained_is_caught(void)
{
    EXPECT_CAUGHT(retained_then_released_three_times, "tack_array_release: the array at");
}

/* An array made in its buffer's allocation (memory someone else owns). */
static float wrapped_memory[4];
static void wrapped_released_twice(void)
{
    tack_device *d = cpu();
    int64_t n = 4;
    tack_array *a = NULL;
    CHECK_OK(tack_array_wrap(d, (uint64_t)(uintptr_t)wrapped_memory, TACK_F32, 1, &n, 1, &a));
    tack_device_release(d);
    tack_array_release(a);
    tack_array_release(a);
}

static void test_a_wrapped_array_released_twice_is_caught(void)
{
    EXPECT_CAUGHT(wrapped_released_twice, "tack_array_release: the array at");
}

static void fill_after_release(void)
{
    tack_array *a = new_array();
    tack_array_release(a);
    float one = 1;
    /* Without assertions, refused rather than written. */
    tack_status st = tack_array_fill(a, &one);
    fprintf(stderr, "fill returned %s\n", tack_status_name(st));
}

static void test_fill_after_release_is_caught(void)
{
    EXPECT_CAUGHT(fill_after_release, "tack: tack_array_fill: the array at 0x");
#ifdef NDEBUG
    EXPECT_CAUGHT(fill_after_release, "fill returned TACK_EVALUE");
#endif
}

static void buffer_released_twice(void)
{
    tack_device *d = cpu();
    tack_buffer *b = NULL;
    CHECK_OK(tack_buffer_alloc(d, 64, 0, &b));
    tack_device_release(d);
    tack_buffer_release(b);
    tack_buffer_release(b);
}

static void test_a_buffer_released_twice_is_caught(void)
{
    EXPECT_CAUGHT(buffer_released_twice, "tack: tack_buffer_release: the buffer at 0x");
}

/* A release through a stale pointer after the address could have gone to
 * a new array: the record is still held, so the new array is elsewhere,
 * and the stale release is caught rather than freeing the new one. */
static void stale_release_after_reuse(void)
{
    tack_array *a = new_array();
    tack_array_release(a);
    tack_array *b = new_array();
    if (b == a)
        fprintf(stderr, "the new array took the released one's address\n");
    tack_array_release(a);
    float one = 1;
    /* Without assertions the stale release returned: b is still live. */
    fprintf(stderr, "fill of the new array returned %s\n", tack_status_name(tack_array_fill(b, &one)));
    tack_array_release(b);
}

static void test_a_stale_release_never_frees_a_new_array(void)
{
    EXPECT_CAUGHT(stale_release_after_reuse, "tack: tack_array_release: the array at 0x");
#ifdef NDEBUG
    EXPECT_CAUGHT(stale_release_after_reuse, "fill of the new array returned TACK_OK");
#endif
}

/* Records released lately are held, not handed out again: no new array,
 * buffer or kernel takes the address of one of the last ones released. */
static void test_released_addresses_are_not_reused_at_once(void)
{
    enum { N = 24 }; /* 96 records: an array frees its buffer too */
    void *old[3 * N], *fresh[3 * N];
    tack_device *d = cpu();
    int64_t n = 4;
    for (int round = 0; round < 2; round++) {
        void **into = round ? fresh : old;
        for (int i = 0; i < N; i++) {
            tack_array *a = NULL;
            tack_buffer *b = NULL;
            tack_kernel *k = NULL;
            CHECK_OK(tack_array_empty(d, TACK_F32, 1, &n, 0, &a));
            CHECK_OK(tack_buffer_alloc(d, 16, 0, &b));
            CHECK_OK(tack_kernel_create("void k(tack_index i, float *y) { y[i] = 1; }", NULL, &k));
            into[3 * i] = a;
            into[3 * i + 1] = b;
            into[3 * i + 2] = k;
        }
        if (!round)
            for (int i = 0; i < N; i++) {
                tack_array_release(old[3 * i]);
                tack_buffer_release(old[3 * i + 1]);
                tack_kernel_release(old[3 * i + 2]);
            }
    }
    int reused = 0;
    for (int i = 0; i < 3 * N; i++)
        for (int j = 0; j < 3 * N; j++)
            reused += fresh[i] == old[j];
    CHECK(reused == 0);
    for (int i = 0; i < N; i++) {
        tack_array_release(fresh[3 * i]);
        tack_buffer_release(fresh[3 * i + 1]);
        tack_kernel_release(fresh[3 * i + 2]);
    }
    tack_device_release(d);
}

/* The cpu device is the process's, never freed: a release after the
 * caller's last is reported as an array's is, not ignored. */
static void device_released_twice(void)
{
    tack_device *d = cpu();
    tack_device_release(d);
    tack_device_release(d);
}

static void test_a_device_released_once_too_often_is_caught(void)
{
    EXPECT_CAUGHT(device_released_twice, "tack: tack_device_release: the device at 0x");
    EXPECT_CAUGHT(device_released_twice, "was already released");
}

/* Three opens, three releases: balanced, and the device still works. */
static void test_balanced_device_references_are_not_reported(void)
{
    tack_device *d[3];
    for (int i = 0; i < 3; i++)
        d[i] = cpu();
    CHECK(d[0] == d[1] && d[1] == d[2]);
    tack_device_retain(d[0]);
    for (int i = 0; i < 3; i++)
        tack_device_release(d[i]);
    tack_device_release(d[0]);
    /* Buffers hold the device without counting: still one reference left
     * to no one, and a fresh open works. */
    tack_array *a = new_array();
    tack_array_release(a);
}

static tack_kernel *new_kernel(void)
{
    tack_kernel *k = NULL;
    CHECK_OK(tack_kernel_create("void k(tack_index i, float *y) { y[i] = 1; }", NULL, &k));
    return k;
}

static void kernel_released_twice(void)
{
    tack_kernel *k = new_kernel();
    tack_kernel_release(k);
    tack_kernel_release(k);
}

static void test_a_kernel_released_twice_is_caught(void)
{
    EXPECT_CAUGHT(kernel_released_twice, "tack: tack_kernel_release: the kernel at 0x");
}

static void kernel_launched_after_release(void)
{
    tack_kernel *k = new_kernel();
    tack_array *a = new_array();
    tack_kernel_release(k);
    tack_arg arg = tack_arg_array(a);
    tack_status st = tack_kernel_launch(k, NULL, 8, &arg, 1);
    fprintf(stderr, "launch returned %s\n", tack_status_name(st));
    tack_array_release(a);
}

static void test_a_launch_of_a_released_kernel_is_caught(void)
{
    EXPECT_CAUGHT(kernel_launched_after_release, "the kernel at 0x");
#ifdef NDEBUG
    EXPECT_CAUGHT(kernel_launched_after_release, "launch returned TACK_EVALUE");
#endif
}

static void kernel_built_after_release(void)
{
    tack_kernel *k = new_kernel();
    tack_device *d = cpu();
    tack_kernel_release(k);
    fprintf(stderr, "build returned %s\n", tack_status_name(tack_kernel_build(k, d)));
    tack_device_release(d);
}

static void test_a_build_of_a_released_kernel_is_caught(void)
{
    EXPECT_CAUGHT(kernel_built_after_release, "tack: tack_kernel_build: the kernel at 0x");
}

static void launch_on_a_released_array(void)
{
    tack_kernel *k = new_kernel();
    tack_array *a = new_array();
    tack_array_release(a);
    tack_arg arg = tack_arg_array(a);
    tack_status st = tack_kernel_launch(k, NULL, 8, &arg, 1);
    fprintf(stderr, "launch returned %s\n", tack_status_name(st));
    tack_kernel_release(k);
}

static void test_a_released_array_as_an_argument_is_caught(void)
{
    EXPECT_CAUGHT(launch_on_a_released_array, "the array at 0x");
#ifdef NDEBUG
    EXPECT_CAUGHT(launch_on_a_released_array, "launch returned TACK_EVALUE");
#endif
}

static void buffer_shared_after_release(void)
{
    tack_device *d = cpu();
    tack_buffer *b = NULL;
    CHECK_OK(tack_buffer_alloc(d, 64, 0, &b));
    tack_device_release(d);
    tack_buffer_release(b);
    fprintf(stderr, "share returned %s\n", tack_status_name(tack_buffer_share(b)));
}

static void test_a_use_of_a_released_buffer_is_caught(void)
{
    EXPECT_CAUGHT(buffer_shared_after_release, "tack: tack_buffer_share: the buffer at 0x");
}

#if defined(__SANITIZE_ADDRESS__)
#define MISUSE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MISUSE_ASAN 1
#endif
#endif
#ifdef MISUSE_ASAN
/* A read that Tack does not check (an accessor), of a record Tack holds
 * back from malloc: AddressSanitizer still reports it, as it would a
 * read of freed memory, because held records are poisoned. */
static void accessor_after_release(void)
{
    tack_array *a = new_array();
    tack_array_release(a);
    fprintf(stderr, "dtype %d\n", (int)tack_array_dtype(a));
}

static void test_asan_still_reports_a_read_of_a_held_record(void)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    struct misuse m = {accessor_after_release, fds[1]};
    int detail = 0;
    enum check_end end = check_in_child(misuse_child, &m, check_timeout(), &detail);
    close(fds[1]);
    char out[8192];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof out - 1 && (r = read(fds[0], out + got, sizeof out - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = '\0';
    close(fds[0]);
    /* ASan exits with 1, or aborts with abort_on_error=1 (as meson runs it). */
    CHECK((end == CHECK_EXITED && detail != 0) || (end == CHECK_SIGNALLED && detail == SIGABRT));
    CHECK(strstr(out, "AddressSanitizer: use-after-poison") != NULL);
}
#endif

static void test_correct_use_is_not_reported(void)
{
    tack_array *a = new_array();
    tack_array_retain(a);
    tack_array_release(a);
    float one = 1;
    CHECK_OK(tack_array_fill(a, &one));
    tack_array_release(a);
}

static void test_wrapping_null_is_refused(void)
{
    tack_device *d = cpu();
    tack_buffer *b = (tack_buffer *)(uintptr_t)1;
    CHECK_STATUS(tack_buffer_wrap(d, NULL, 16, NULL, NULL, &b), TACK_EVALUE);
    CHECK(b == (tack_buffer *)(uintptr_t)1);
    CHECK(strstr(tack_last_error(), "tack_buffer_wrap: data is NULL") != NULL);
    /* Nothing to point at: an empty buffer may be NULL, as an empty array's. */
    CHECK_OK(tack_buffer_wrap(d, NULL, 0, NULL, NULL, &b));
    tack_buffer_release(b);
    tack_device_release(d);
}

int main(void)
{
    check_each_leaves_nothing();
    RUN(test_an_array_released_twice_is_caught);
    RUN(test_one_release_more_than_retained_is_caught);
    RUN(test_a_wrapped_array_released_twice_is_caught);
    RUN(test_fill_after_release_is_caught);
    RUN(test_a_buffer_released_twice_is_caught);
    RUN(test_a_stale_release_never_frees_a_new_array);
    RUN(test_released_addresses_are_not_reused_at_once);
    RUN(test_a_device_released_once_too_often_is_caught);
    RUN(test_balanced_device_references_are_not_reported);
    RUN(test_a_kernel_released_twice_is_caught);
    RUN(test_a_launch_of_a_released_kernel_is_caught);
    RUN(test_a_build_of_a_released_kernel_is_caught);
    RUN(test_a_released_array_as_an_argument_is_caught);
    RUN(test_a_use_of_a_released_buffer_is_caught);
#ifdef MISUSE_ASAN
    RUN(test_asan_still_reports_a_read_of_a_held_record);
#endif
    RUN(test_correct_use_is_not_reported);
    RUN(test_wrapping_null_is_refused);
    CHECK_DONE();
}
