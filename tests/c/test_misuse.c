/* Misuse from C caught where the check costs nothing: a release after the
 * last one and a use after it (reported and, in builds with assertions,
 * aborted with a message naming the call and the object), and memory
 * wrapped at NULL. Each misuse runs in a child process whose stderr is
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
    RUN(test_correct_use_is_not_reported);
    RUN(test_wrapping_null_is_refused);
    CHECK_DONE();
}
