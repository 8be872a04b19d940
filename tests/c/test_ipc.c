/* Cross-process arrays on the CPU backend: exportable memory from a memfd,
 * tack_array_import_memory, and tack_array_send / tack_array_receive over
 * Unix sockets between two processes (fork), with every descriptor counted
 * in /proc/self/fd. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <poll.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "tack/tack.h"

/* Open descriptors of this process (the directory's own included, which is
 * the same in every count). */
static int fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static int fd_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

/* A connected pair of Unix sockets of `type` (SOCK_STREAM or
 * SOCK_SEQPACKET) in sv, closed on exec; zero if there is none. */
static int connected(int type, int sv[2]) { return socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) == 0; }

static void disconnect(const int sv[2])
{
    close(sv[0]);
    close(sv[1]);
}

static tack_device *cpu(void)
{
    tack_device *d = NULL;
    CHECK_OK(tack_device_open("cpu", NULL, 0, &d));
    return d;
}

/* A 3x4 int32 exportable array holding base + i. */
static tack_array *exportable(tack_device *d, int32_t base)
{
    int64_t shape[2] = {3, 4};
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(d, TACK_I32, 2, shape, 1, &a));
    if (!a)
        return NULL;
    int32_t v[12];
    for (int i = 0; i < 12; i++)
        v[i] = base + i;
    CHECK_OK(tack_array_copy_from_host(a, v, sizeof v));
    return a;
}

static int holds(const tack_array *a, int32_t base)
{
    int32_t v[12];
    if (!a || tack_array_nbytes(a) != sizeof v || tack_array_copy_to_host(a, v, sizeof v) != TACK_OK)
        return 0;
    for (int i = 0; i < 12; i++)
        if (v[i] != base + i)
            return 0;
    return 1;
}

/* Sends raw bytes with `nfds` descriptors, as a broken or future sender
 * would. */
static int send_raw(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    union {
        char bytes[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds) {
        m.msg_control = control.bytes;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    return sendmsg(sock, &m, 0) == (ssize_t)len ? 0 : -1;
}

/* Reads one whole header tack_array_send wrote, and its descriptor. */
static int capture(int sock, tack_ipc_header *h, int *fd)
{
    struct iovec iov = {.iov_base = h, .iov_len = sizeof *h};
    union {
        char bytes[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.bytes,
                       .msg_controllen = sizeof control.bytes};
    if (recvmsg(sock, &m, MSG_WAITALL | MSG_CMSG_CLOEXEC) != (ssize_t)sizeof *h)
        return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (!c || c->cmsg_type != SCM_RIGHTS)
        return -1;
    memcpy(fd, CMSG_DATA(c), sizeof *fd);
    return 0;
}

/* ---- one process ---------------------------------------------------------- */

static void test_exportable_host_memory_exports_a_memfd(void)
{
    tack_device *d = cpu();
    int before = fd_count();
    tack_array *a = exportable(d, 0);
    CHECK(fd_count() == before + 1); /* the memfd, made with the allocation */
    tack_exported_memory e;
    CHECK_OK(tack_array_export_memory(a, &e));
    CHECK(!strcmp(e.backend, "cpu") && !strcmp(e.handle_type, "posix_fd"));
    long page = sysconf(_SC_PAGESIZE);
    CHECK(e.size == 48 && e.allocation_size == (size_t)page);
    static const uint8_t zeros[16];
    CHECK(!memcmp(e.device_uuid, zeros, 16));
    CHECK(tack_buffer_is_shared(tack_array_buffer(a)));
    /* Cached: the same descriptor every time, and no new one. */
    tack_exported_memory again;
    CHECK_OK(tack_array_export_memory(a, &again));
    CHECK(again.handle == e.handle && fd_count() == before + 1);
    /* Sealed against shrinking: a receiver cannot make the exporter's
     * pages vanish under it. */
    CHECK(ftruncate((int)e.handle, 0) == -1 && errno == EPERM);
    struct stat st;
    CHECK(fstat((int)e.handle, &st) == 0 && st.st_size == page);
    /* Zero-filled by construction, beyond the array too. */
    tack_exported_memory z;
    int64_t n = 1000;
    tack_array *b = NULL;
    CHECK_OK(tack_array_empty(d, TACK_U8, 1, &n, 1, &b));
    CHECK_OK(tack_array_export_memory(b, &z));
    CHECK(z.allocation_size == (size_t)((1000 + page - 1) / page * page));
    uint8_t buf[1000];
    CHECK_OK(tack_array_copy_to_host(b, buf, sizeof buf));
    int nonzero = 0;
    for (int i = 0; i < 1000; i++)
        nonzero |= buf[i];
    CHECK(!nonzero);
    tack_array_release(b);
    int fd = (int)e.handle;
    tack_array_release(a);
    CHECK(!fd_open(fd)); /* the buffer closed it */
    CHECK(fd_count() == before);
    /* A plain host array still has no OS handle. */
    CHECK_OK(tack_array_empty(d, TACK_U8, 1, &n, 0, &b));
    CHECK_STATUS(tack_array_export_memory(b, &z), TACK_ERUNTIME);
    CHECK(strstr(tack_last_error(), "Backend cpu does not support memory export") != NULL);
    CHECK(strstr(tack_last_error(), "exportable=True") != NULL);
    tack_array_release(b);
    tack_device_release(d);
}

static void test_import_memory_in_one_process(void)
{
    tack_device *d = cpu();
    int before = fd_count();
    tack_array *a = exportable(d, 10);
    tack_exported_memory e;
    CHECK_OK(tack_array_export_memory(a, &e));
    tack_array *b = NULL;
    int64_t flat = 12;
    CHECK_OK(tack_array_import_memory(NULL, &e, TACK_I32, 1, &flat, &b));
    CHECK(fd_count() == before + 2); /* the import maps its own duplicate */
    CHECK(fd_open((int)e.handle));   /* and leaves the caller's alone */
    CHECK(b && tack_array_device(b) == d && tack_array_writable(b));
    CHECK(tack_array_data(b) != tack_array_data(a));
    CHECK(holds(b, 10));
    int32_t seven = 7;
    CHECK_OK(tack_array_fill(b, &seven));
    int32_t v[12];
    CHECK_OK(tack_array_copy_to_host(a, v, sizeof v));
    CHECK(v[0] == 7 && v[11] == 7);
    CHECK(tack_buffer_is_shared(tack_array_buffer(b)));
    /* A smaller view over the start, of another dtype, is fine too. */
    tack_array *c = NULL;
    int64_t two = 2;
    CHECK_OK(tack_array_import_memory(d, &e, TACK_I64, 1, &two, &c));
    int64_t w[2];
    CHECK_OK(tack_array_copy_to_host(c, w, sizeof w));
    CHECK(w[0] == (int64_t)(((uint64_t)7 << 32) | 7));
    tack_array_release(c);
    /* The imported array can be exported again: its duplicate is the handle. */
    tack_exported_memory e2;
    CHECK_OK(tack_array_export_memory(b, &e2));
    CHECK(e2.handle != e.handle && e2.size == 48 && e2.allocation_size == e.allocation_size);
    tack_array_release(a);
    /* Still mapped: the memory outlives the exporter's array. */
    CHECK_OK(tack_array_copy_to_host(b, v, sizeof v));
    CHECK(v[5] == 7);
    tack_array_release(b);
    CHECK(fd_count() == before);
    tack_device_release(d);
}

static void test_read_only_descriptor_gives_a_read_only_array(void)
{
    tack_device *d = cpu();
    int before = fd_count();
    tack_array *a = exportable(d, 3);
    tack_exported_memory e;
    CHECK_OK(tack_array_export_memory(a, &e));
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", (int)e.handle);
    int ro = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(ro >= 0);
    tack_exported_memory r = e;
    r.handle = ro;
    tack_array *b = NULL;
    int64_t shape[2] = {3, 4};
    CHECK_OK(tack_array_import_memory(d, &r, TACK_I32, 2, shape, &b));
    CHECK(b && !tack_array_writable(b) && holds(b, 3));
    int32_t one = 1;
    CHECK_STATUS(tack_array_fill(b, &one), TACK_ERUNTIME);
    tack_array_release(b);
    close(ro);
    tack_array_release(a);
    CHECK(fd_count() == before);
    tack_device_release(d);
}

static void test_import_memory_refusals_leave_nothing(void)
{
    tack_device *d = cpu();
    tack_array *a = exportable(d, 0);
    tack_exported_memory e;
    CHECK_OK(tack_array_export_memory(a, &e));
    int before = fd_count();
    long arrays = tack_array_live_count(), buffers = tack_buffer_live_count();
    int64_t shape[1] = {12}, big[1] = {13};
    int pipe_fds[2];
    CHECK(pipe(pipe_fds) == 0);
    before += 2;
    int small = memfd_create("small", MFD_CLOEXEC);
    CHECK(small >= 0 && ftruncate(small, 16) == 0);
    before += 1;
    tack_array *out = (tack_array *)0x1;

    struct {
        const char *what;
        tack_exported_memory e;
        int64_t *shape;
        tack_status want;
    } cases[8];
    int n = 0;
    cases[n].what = "closed descriptor", cases[n].e = e, cases[n].e.handle = 1000, cases[n].shape = shape,
    cases[n++].want = TACK_EVALUE;
    cases[n].what = "negative handle", cases[n].e = e, cases[n].e.handle = -1, cases[n].shape = shape,
    cases[n++].want = TACK_EVALUE;
    cases[n].what = "a pipe", cases[n].e = e, cases[n].e.handle = pipe_fds[0], cases[n].shape = shape,
    cases[n++].want = TACK_EVALUE;
    cases[n].what = "too small", cases[n].e = e, cases[n].e.handle = small, cases[n].shape = shape,
    cases[n++].want = TACK_EVALUE;
    cases[n].what = "shape too big", cases[n].e = e, cases[n].shape = big, cases[n++].want = TACK_EVALUE;
    cases[n].what = "handle type", cases[n].e = e, cases[n].shape = shape, cases[n++].want = TACK_EVALUE;
    strcpy(cases[n - 1].e.handle_type, "win32_kmt");
    cases[n].what = "sizes", cases[n].e = e, cases[n].e.size = e.allocation_size + 1, cases[n].shape = shape,
    cases[n++].want = TACK_EVALUE;
    cases[n].what = "backend", cases[n].e = e, cases[n].shape = shape, cases[n++].want = TACK_EVALUE;
    strcpy(cases[n - 1].e.backend, "nope");
    for (int i = 0; i < n; i++) {
        tack_status st = tack_array_import_memory(NULL, &cases[i].e, TACK_I32, 1, cases[i].shape, &out);
        if (st != cases[i].want)
            fprintf(stderr, "case '%s': %s (%s)\n", cases[i].what, tack_status_name(st), tack_last_error());
        CHECK(st == cases[i].want);
        CHECK(out == (tack_array *)0x1);
        CHECK(fd_count() == before);
    }
    /* A cpu record on a device of another backend, and the reverse. */
    tack_exported_memory cuda = e;
    strcpy(cuda.backend, "cuda");
    CHECK_STATUS(tack_array_import_memory(d, &cuda, TACK_I32, 1, shape, &out), TACK_EVALUE);
    CHECK_STATUS(tack_array_import_memory(d, NULL, TACK_I32, 1, shape, &out), TACK_EVALUE);
    CHECK_STATUS(tack_array_import_memory(d, &e, TACK_I32, 1, shape, NULL), TACK_EVALUE);
    CHECK_STATUS(tack_array_import_memory(d, &e, (tack_dtype)99, 1, shape, &out), TACK_ETYPE);
    CHECK(out == (tack_array *)0x1);
    CHECK(fd_count() == before);
    CHECK(tack_array_live_count() == arrays && tack_buffer_live_count() == buffers);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    close(small);
    tack_array_release(a);
    tack_device_release(d);
}

/* Descriptors are closed exactly once: a descriptor closed twice would
 * close whatever reused its number by then, here a sentinel. */
static void test_descriptors_are_closed_exactly_once(void)
{
    tack_device *d = cpu();
    int sv[2];
    CHECK(connected(SOCK_STREAM, sv));
    int before = fd_count();
    tack_array *a = exportable(d, 5);
    CHECK_OK(tack_array_send(sv[0], a));
    CHECK(fd_count() == before + 1); /* the sender keeps only its own */
    tack_array *b = NULL;
    CHECK_OK(tack_array_receive(sv[1], NULL, &b));
    CHECK(fd_count() == before + 2); /* the received one closed, the mapping's kept */
    CHECK(holds(b, 5));
    int sentinel1 = dup(2); /* takes the number the received descriptor had */
    tack_array_release(b);
    CHECK(fd_open(sentinel1));
    int sentinel2 = dup(2); /* takes the number b's duplicate had */
    tack_array_release(a);
    CHECK(fd_open(sentinel1) && fd_open(sentinel2));
    close(sentinel1);
    close(sentinel2);
    CHECK(fd_count() == before);
    disconnect(sv);
    tack_device_release(d);
}

static void test_send_refusals_leave_nothing(void)
{
    tack_device *d = cpu();
    int sv[2], p[2];
    CHECK(connected(SOCK_STREAM, sv));
    CHECK(pipe(p) == 0);
    int64_t n = 4;
    tack_array *plain = NULL, *a = exportable(d, 0);
    CHECK_OK(tack_array_empty(d, TACK_F32, 1, &n, 0, &plain));
    int before = fd_count();
    CHECK_STATUS(tack_array_send(sv[0], plain), TACK_ERUNTIME);
    CHECK(strstr(tack_last_error(), "exportable=True") != NULL);
    CHECK_STATUS(tack_array_send(p[1], a), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "not a socket") != NULL);
    CHECK_STATUS(tack_array_send(-1, a), TACK_EVALUE);
    CHECK_STATUS(tack_array_send(sv[0], NULL), TACK_EVALUE);
    tack_array *out = (tack_array *)0x1;
    CHECK_STATUS(tack_array_receive(p[0], NULL, &out), TACK_EVALUE);
    CHECK_STATUS(tack_array_receive(sv[1], NULL, NULL), TACK_EVALUE);
    CHECK(out == (tack_array *)0x1);
    /* The peer gone: no SIGPIPE, an error. */
    close(sv[1]);
    CHECK_STATUS(tack_array_send(sv[0], a), TACK_EIO);
    CHECK(strstr(tack_last_error(), "closed") != NULL);
    CHECK(fd_count() == before - 1);
    close(sv[0]);
    close(p[0]);
    close(p[1]);
    tack_array_release(plain);
    tack_array_release(a);
    tack_device_release(d);
}

/* A whole header tack_array_send writes for `a`, and the descriptor that
 * came with it (the caller's to close). */
static int good_header(tack_array *a, tack_ipc_header *h, int *fd)
{
    int sv[2];
    if (!connected(SOCK_STREAM, sv))
        return -1;
    int r = tack_array_send(sv[0], a) == TACK_OK ? capture(sv[1], h, fd) : -1;
    disconnect(sv);
    return r;
}

/* Sends a raw message on a fresh socket pair of `type` and receives it:
 * the status of the receive. */
static tack_status receive_raw(int type, const void *buf, size_t len, const int *fds, int nfds)
{
    int sv[2];
    if (!connected(type, sv))
        return TACK_OK; /* reported as a failed check by the caller */
    tack_array *out = (tack_array *)0x1;
    tack_status st = TACK_OK;
    /* The sender is done: a short message ends at the end of the stream. */
    if (send_raw(sv[0], buf, len, fds, nfds) == 0 && shutdown(sv[0], SHUT_WR) == 0)
        st = tack_array_receive(sv[1], NULL, &out);
    if (st == TACK_OK)
        tack_array_release(out);
    else
        CHECK(out == (tack_array *)0x1);
    disconnect(sv);
    return st;
}

/* Headers that are not version 1, or do not agree with themselves, are
 * refused and their descriptor closed. */
static void test_bad_headers_are_refused(int type)
{
    tack_device *d = cpu();
    int sv[2];
    CHECK(connected(type, sv));
    tack_array *a = exportable(d, 20);
    tack_ipc_header good;
    int fd = -1;
    CHECK_OK(tack_array_send(sv[0], a));
    CHECK(capture(sv[1], &good, &fd) == 0);
    disconnect(sv);
    CHECK(!memcmp(good.magic, TACK_IPC_MAGIC, 8) && good.version == 1 && good.header_size == sizeof good);
    CHECK(good.ndim == 2 && good.shape[0] == 3 && good.shape[1] == 4 && good.shape[2] == 0);
    CHECK(good.size == 48 && good.flags == 0 && good.reserved == 0 && good.dtype_lanes == 1);
    CHECK(!strcmp(good.backend, "cpu") && !strcmp(good.handle_type, "posix_fd"));
    int before = fd_count();
    long arrays = tack_array_live_count(), buffers = tack_buffer_live_count();

    /* The captured header itself is good: the refusals below are the
     * changes' doing. */
    CHECK_STATUS(receive_raw(type, &good, sizeof good, &fd, 1), TACK_OK);
    CHECK(tack_array_live_count() == arrays);

    /* A future version, with a longer header. */
    struct {
        tack_ipc_header h;
        char more[100];
    } future;
    memset(&future, 0, sizeof future);
    future.h = good;
    future.h.version = 2;
    future.h.header_size = sizeof future;
    CHECK_STATUS(receive_raw(type, &future, sizeof future, &fd, 1), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "version 2") != NULL && strstr(tack_last_error(), "newer") != NULL);
    CHECK(fd_count() == before);

    for (int field = 0; field < 9; field++) {
        tack_ipc_header h = good;
        switch (field) {
        case 0: h.magic[0] = 'X'; break;
        case 1: h.version = 0; break;
        case 2: h.size = 44; break;
        case 3: h.allocation_size = 8; break;
        case 4: h.ndim = TACK_MAX_NDIM + 1; break;
        case 5: h.dtype_bits = 16, h.dtype_code = kDLFloat; break;
        case 6: h.flags = 0x80; break;
        case 7: h.shape[0] = -3; break;
        case 8: h.header_size = 600; break;
        }
        tack_status st = receive_raw(type, &h, sizeof h, &fd, 1);
        if (st != TACK_EVALUE)
            fprintf(stderr, "header change %d: %s (%s)\n", field, tack_status_name(st), tack_last_error());
        CHECK(st == TACK_EVALUE);
        CHECK(fd_count() == before);
    }
    /* No descriptor, and two. */
    CHECK_STATUS(receive_raw(type, &good, sizeof good, NULL, 0), TACK_EVALUE);
    int two[2] = {fd, fd};
    CHECK_STATUS(receive_raw(type, &good, sizeof good, two, 2), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "carried 2") != NULL);
    /* Too short to be a header at all, then the end of the stream. */
    CHECK_STATUS(receive_raw(type, &good, 10, &fd, 1), type == SOCK_STREAM ? TACK_EIO : TACK_EVALUE);
    CHECK_STATUS(receive_raw(type, &good, 0, NULL, 0), TACK_EIO);
    CHECK(fd_count() == before);
    CHECK(tack_array_live_count() == arrays && tack_buffer_live_count() == buffers);
    close(fd);
    tack_array_release(a);
    tack_device_release(d);
}

static void test_bad_headers_are_refused_on_a_stream(void) { test_bad_headers_are_refused(SOCK_STREAM); }
static void test_bad_headers_are_refused_on_seqpacket(void) { test_bad_headers_are_refused(SOCK_SEQPACKET); }

/* On a stream, a refused future header is consumed whole: the next array
 * arrives. */
static void test_stream_stays_in_step_after_a_future_header(void)
{
    tack_device *d = cpu();
    int sv[2];
    CHECK(connected(SOCK_STREAM, sv));
    tack_array *a = exportable(d, 40);
    tack_ipc_header good;
    int fd = -1;
    CHECK_OK(tack_array_send(sv[0], a));
    CHECK(capture(sv[1], &good, &fd) == 0);
    struct {
        tack_ipc_header h;
        char more[1000];
    } future;
    memset(&future, 0, sizeof future);
    future.h = good;
    future.h.version = 7;
    future.h.header_size = sizeof future;
    CHECK(send_raw(sv[0], &future, sizeof future, &fd, 1) == 0);
    CHECK_OK(tack_array_send(sv[0], a));
    tack_array *out = NULL;
    CHECK_STATUS(tack_array_receive(sv[1], NULL, &out), TACK_EVALUE);
    CHECK_OK(tack_array_receive(sv[1], NULL, &out));
    CHECK(holds(out, 40));
    tack_array_release(out);
    close(fd);
    disconnect(sv);
    tack_array_release(a);
    tack_device_release(d);
}

static void test_read_only_arrays_arrive_read_only(void)
{
    tack_device *d = cpu();
    int sv[2];
    CHECK(connected(SOCK_STREAM, sv));
    tack_array *a = exportable(d, 1), *ro = NULL, *out = NULL;
    int64_t shape[1] = {12};
    CHECK_OK(tack_array_from_buffer(tack_array_buffer(a), TACK_I32, 1, shape, 0, &ro));
    CHECK_OK(tack_array_send(sv[0], ro));
    CHECK_OK(tack_array_receive(sv[1], NULL, &out));
    CHECK(out && !tack_array_writable(out) && tack_array_ndim(out) == 1);
    int32_t zero = 0;
    CHECK_STATUS(tack_array_fill(out, &zero), TACK_ERUNTIME);
    tack_array_release(out);
    tack_array_release(ro);
    tack_array_release(a);
    disconnect(sv);
    tack_device_release(d);
}

/* ---- hostile peers ---------------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Mappings of this process whose name contains `tag`. */
static int mappings(const char *tag)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, tag) != NULL;
    fclose(f);
    return n;
}

/* A version-1 header for `nbytes` of uint8 on the cpu backend, as a peer
 * that is not Tack would write it. */
static tack_ipc_header forged(uint64_t nbytes)
{
    tack_ipc_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, TACK_IPC_MAGIC, sizeof h.magic);
    h.version = TACK_IPC_VERSION;
    h.header_size = sizeof h;
    h.dtype_code = kDLUInt;
    h.dtype_bits = 8;
    h.dtype_lanes = 1;
    h.ndim = 1;
    h.shape[0] = (int64_t)nbytes;
    h.size = h.allocation_size = nbytes;
    strcpy(h.backend, "cpu");
    strcpy(h.handle_type, "posix_fd");
    return h;
}

/* Memory of 4096 bytes another process could shrink: `kind` 0 an unsealed
 * memfd, 1 a memfd sealed against growing only, 2 a regular file. */
static int shrinkable(int kind)
{
    int fd;
    if (kind == 2) {
        char path[] = "/tmp/tack-test-ipc-file-XXXXXX";
        fd = mkstemp(path);
        if (fd >= 0)
            unlink(path);
    } else {
        fd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    }
    if (fd < 0 || ftruncate(fd, 4096) != 0)
        return -1;
    if (kind == 1 && fcntl(fd, F_ADD_SEALS, F_SEAL_GROW) != 0)
        return -1;
    return fd;
}

/* A child sends a header and memory it can shrink, then shrinks it once it
 * hears the receiver mapped it. The receiver must refuse it, or read the
 * lost pages and die of SIGBUS (this runs in a child of its own). */
static void test_memory_that_can_shrink_is_refused(void)
{
    tack_device *d = cpu();
    for (int kind = 0; kind < 3; kind++) {
        int sv[2];
        CHECK(connected(SOCK_STREAM, sv));
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            close(sv[1]);
            int fd = shrinkable(kind);
            tack_ipc_header h = forged(4096);
            char word = 0;
            if (fd < 0 || send_raw(sv[0], &h, sizeof h, &fd, 1) != 0 || read(sv[0], &word, 1) != 1)
                _exit(2);
            if (word == 'm' && (ftruncate(fd, 0) != 0 || write(sv[0], "s", 1) != 1))
                _exit(3);
            _exit(0);
        }
        close(sv[0]);
        int before = fd_count(), maps = mappings("hostile");
        long arrays = tack_array_live_count();
        tack_array *out = (tack_array *)0x1;
        tack_status st = tack_array_receive(sv[1], NULL, &out);
        CHECK(st == TACK_EVALUE);
        if (st == TACK_OK) {
            char word;
            CHECK(write(sv[1], "m", 1) == 1 && read(sv[1], &word, 1) == 1);
            volatile const uint8_t *lost = tack_array_data(out);
            CHECK(lost[0] == 0); /* SIGBUS here */
            tack_array_release(out);
        } else {
            CHECK(strstr(tack_last_error(), "F_SEAL_SHRINK") != NULL);
            CHECK(write(sv[1], "r", 1) == 1);
        }
        CHECK(out == (tack_array *)0x1);
        CHECK(fd_count() == before && mappings("hostile") == maps && tack_array_live_count() == arrays);
        int status = -1;
        CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        close(sv[1]);
    }
    /* The same descriptors given to import directly. */
    for (int kind = 0; kind < 3; kind++) {
        int fd = shrinkable(kind);
        tack_exported_memory e;
        memset(&e, 0, sizeof e);
        strcpy(e.backend, "cpu");
        strcpy(e.handle_type, "posix_fd");
        e.size = e.allocation_size = 4096;
        e.handle = fd;
        int64_t n = 4096;
        int before = fd_count();
        tack_array *out = (tack_array *)0x1;
        CHECK_STATUS(tack_array_import_memory(d, &e, TACK_U8, 1, &n, &out), TACK_EVALUE);
        CHECK(out == (tack_array *)0x1 && fd_count() == before && fd_open(fd));
        close(fd);
    }
    tack_device_release(d);
}

/* A memfd sealed against shrinking, from a peer that is not Tack, is
 * mapped, and stays: the peer cannot shrink it. */
static void test_memory_sealed_against_shrinking_is_mapped(void)
{
    tack_device *d = cpu();
    int fd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    CHECK(fd >= 0 && ftruncate(fd, 4096) == 0 && pwrite(fd, "\x07", 1, 5) == 1);
    CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
    int sv[2];
    CHECK(connected(SOCK_SEQPACKET, sv));
    tack_ipc_header h = forged(4096);
    CHECK(send_raw(sv[0], &h, sizeof h, &fd, 1) == 0);
    tack_array *out = NULL;
    CHECK_OK(tack_array_receive(sv[1], NULL, &out));
    CHECK(out && ((uint8_t *)tack_array_data(out))[5] == 7);
    CHECK(ftruncate(fd, 0) == -1 && errno == EPERM);
    tack_array_release(out);
    close(fd);
    disconnect(sv);
    tack_device_release(d);
}

static int stop_on_signal(void *context)
{
    (*(int *)context)++;
    return 1;
}

static int go_on_after_signal(void *context)
{
    (*(int *)context)++;
    return 0;
}

static void on_alarm(int sig) { (void)sig; }

/* Receives on a socket whose peer sent `len` bytes of a header and then
 * nothing: returns the status, with the wait's errno and how long it took. */
static tack_status stalled_receive(int type, const void *buf, size_t len, tack_ipc_wait *w, int64_t *took)
{
    int sv[2];
    if (!connected(type, sv))
        return TACK_OK;
    if (len)
        CHECK(send_raw(sv[0], buf, len, NULL, 0) == 0);
    tack_array *out = (tack_array *)0x1;
    int64_t t0 = now_ms();
    tack_status st = tack_array_receive_wait(sv[1], NULL, w, &out);
    *took = now_ms() - t0;
    CHECK(out == (tack_array *)0x1);
    disconnect(sv);
    return st;
}

/* A message that never ends: the deadline holds for all of it, a signal
 * asks the caller, and a time limit of 0 takes only what is there. */
static void test_the_deadline_holds_for_the_whole_message(void)
{
    tack_ipc_header h = forged(16);
    tack_ipc_header future = h;
    future.version = 2;
    future.header_size = 4096;
    int before = fd_count();
    struct {
        const void *buf;
        size_t len;
    } stalls[] = {{NULL, 0}, {&h, 8}, {&h, 300}, {&future, sizeof future}};
    for (size_t i = 0; i < sizeof stalls / sizeof *stalls; i++) {
        tack_ipc_wait w = {.timeout_ms = 300};
        int64_t took = 0;
        CHECK_STATUS(stalled_receive(SOCK_STREAM, stalls[i].buf, stalls[i].len, &w, &took), TACK_ETIMEOUT);
        CHECK(w.os_error == ETIMEDOUT && took >= 300 && took < 800);
        CHECK(strstr(tack_last_error(), "timed out") != NULL);
    }
    /* Nothing there and no time to wait: EAGAIN, as a non-blocking socket. */
    tack_ipc_wait now = {.timeout_ms = 0};
    int64_t took = 0;
    CHECK_STATUS(stalled_receive(SOCK_SEQPACKET, NULL, 0, &now, &took), TACK_ETIMEOUT);
    CHECK(now.os_error == EAGAIN && took < 100);
    /* A signal: the callback decides. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART */
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval every = {{0, 50000}, {0, 50000}}, off = {{0, 0}, {0, 0}};
    int calls = 0;
    tack_ipc_wait stop = {.timeout_ms = -1, .interrupted = stop_on_signal, .context = &calls};
    setitimer(ITIMER_REAL, &every, NULL);
    CHECK_STATUS(stalled_receive(SOCK_STREAM, &h, 8, &stop, &took), TACK_ERUNTIME);
    setitimer(ITIMER_REAL, &off, NULL);
    CHECK(stop.os_error == EINTR && calls == 1 && took < 500);
    calls = 0;
    tack_ipc_wait go_on = {.timeout_ms = 300, .interrupted = go_on_after_signal, .context = &calls};
    setitimer(ITIMER_REAL, &every, NULL);
    CHECK_STATUS(stalled_receive(SOCK_STREAM, &h, 8, &go_on, &took), TACK_ETIMEOUT);
    setitimer(ITIMER_REAL, &off, NULL);
    CHECK(go_on.os_error == ETIMEDOUT && calls >= 2 && took >= 300 && took < 800);
    /* A send with no room: the same deadline. */
    tack_device *d = cpu();
    tack_array *a = exportable(d, 0);
    int sv[2];
    CHECK(connected(SOCK_STREAM, sv));
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    char junk[4096] = {0};
    while (send(sv[0], junk, sizeof junk, MSG_DONTWAIT) > 0) {
    }
    tack_ipc_wait w = {.timeout_ms = 200};
    int64_t t0 = now_ms();
    CHECK_STATUS(tack_array_send_wait(sv[0], a, &w), TACK_ETIMEOUT);
    CHECK(w.os_error == ETIMEDOUT && now_ms() - t0 >= 200 && now_ms() - t0 < 700);
    disconnect(sv);
    tack_array_release(a);
    tack_device_release(d);
    CHECK(fd_count() == before);
}

/* A socket that is not connected fails at once, with the errno the system
 * gave, as send(2) and recv(2) would. */
static void test_a_listening_socket_fails_at_once(void)
{
    tack_device *d = cpu();
    tack_array *a = exportable(d, 0);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof addr.sun_path, "/tmp/tack-test-ipc-%ld", (long)getpid());
    unlink(addr.sun_path);
    CHECK(bind(s, (struct sockaddr *)&addr, sizeof addr) == 0 && listen(s, 1) == 0);
    tack_ipc_wait w = {.timeout_ms = -1};
    int64_t t0 = now_ms();
    CHECK_STATUS(tack_array_send_wait(s, a, &w), TACK_EIO);
    CHECK(w.os_error == ENOTCONN && strstr(tack_last_error(), "not connected") != NULL);
    tack_array *out = (tack_array *)0x1;
    CHECK_STATUS(tack_array_receive_wait(s, NULL, &w, &out), TACK_EIO);
    CHECK(w.os_error == EINVAL && out == (tack_array *)0x1);
    CHECK(now_ms() - t0 < 100);
    /* The plain calls too (no time limit). */
    CHECK_STATUS(tack_array_send(s, a), TACK_EIO);
    close(s);
    unlink(addr.sun_path);
    tack_array_release(a);
    tack_device_release(d);
}

/* A TCP socket would carry the header and drop the descriptor: the sender
 * refuses it, and nothing reaches the other end. */
static void test_only_unix_sockets_carry_arrays(void)
{
    tack_device *d = cpu();
    tack_array *a = exportable(d, 0);
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    CHECK(bind(listener, (struct sockaddr *)&addr, sizeof addr) == 0 && listen(listener, 1) == 0);
    CHECK(getsockname(listener, (struct sockaddr *)&addr, &len) == 0);
    int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(connect(client, (struct sockaddr *)&addr, sizeof addr) == 0);
    int server = accept(listener, NULL, NULL);
    CHECK(server >= 0);
    int before = fd_count();
    CHECK_STATUS(tack_array_send(client, a), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "only AF_UNIX sockets carry descriptors") != NULL);
    char byte;
    CHECK(recv(server, &byte, 1, MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    tack_array *out = (tack_array *)0x1;
    CHECK_STATUS(tack_array_receive(server, NULL, &out), TACK_EVALUE);
    CHECK(out == (tack_array *)0x1 && fd_count() == before);
    close(server);
    close(client);
    close(listener);
    tack_array_release(a);
    tack_device_release(d);
}

/* recvmsg returns 0 for an empty message as for a closed peer; only the
 * closed peer is reported as closed. */
static void test_an_empty_message_is_not_a_closed_peer(void)
{
    int sv[2];
    CHECK(connected(SOCK_SEQPACKET, sv));
    CHECK(send(sv[0], "", 0, 0) == 0);
    tack_array *out = (tack_array *)0x1;
    CHECK_STATUS(tack_array_receive(sv[1], NULL, &out), TACK_EVALUE);
    CHECK(strstr(tack_last_error(), "empty message") != NULL && out == (tack_array *)0x1);
    close(sv[0]);
    CHECK_STATUS(tack_array_receive(sv[1], NULL, &out), TACK_EIO);
    CHECK(strstr(tack_last_error(), "closed by the sending end") != NULL);
    close(sv[1]);
}

/* The messages say what was wrong: a message longer than a header gives
 * its real length, and a descriptor the system dropped for want of a free
 * one names EMFILE. */
static void test_messages_say_what_was_wrong(void)
{
    tack_device *d = cpu();
    tack_array *a = exportable(d, 0);
    tack_ipc_header good;
    int fd = -1, sv[2];
    CHECK(good_header(a, &good, &fd) == 0);
    struct {
        tack_ipc_header h;
        char more[92];
    } longer;
    memset(&longer, 0, sizeof longer);
    longer.h = good;
    for (int type = SOCK_DGRAM; type <= SOCK_SEQPACKET; type += SOCK_SEQPACKET - SOCK_DGRAM) {
        CHECK_STATUS(receive_raw(type, &longer, sizeof longer.h + sizeof longer.more, &fd, 1), TACK_EVALUE);
        CHECK(strstr(tack_last_error(), "a message of 700 bytes is not a version 1 array header, which is 608") !=
              NULL);
        CHECK_STATUS(receive_raw(type, &good, 300, &fd, 1), TACK_EVALUE);
        CHECK(strstr(tack_last_error(), "a message of 300 bytes") != NULL);
    }
    /* Out of descriptors when the message arrives. */
    CHECK(connected(SOCK_STREAM, sv));
    CHECK_OK(tack_array_send(sv[0], a));
    struct rlimit old, low;
    CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
    low = old;
    low.rlim_cur = (rlim_t)fd_count() + 8;
    CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
    int held[64], nheld = 0;
    while (nheld < 64 && (held[nheld] = dup(0)) >= 0)
        nheld++;
    tack_ipc_wait w = {.timeout_ms = 1000};
    tack_array *out = (tack_array *)0x1;
    tack_status st = tack_array_receive_wait(sv[1], NULL, &w, &out);
    for (int i = 0; i < nheld; i++)
        close(held[i]);
    setrlimit(RLIMIT_NOFILE, &old);
    CHECK(st == TACK_ERUNTIME && w.os_error == EMFILE && out == (tack_array *)0x1);
    CHECK(strstr(tack_last_error(), "EMFILE") != NULL || strstr(tack_last_error(), "descriptor") != NULL);
    CHECK(strstr(tack_last_error(), "ulimit") != NULL);
    disconnect(sv);
    close(fd);
    tack_array_release(a);
    tack_device_release(d);
}

/* ---- two processes ---------------------------------------------------------- */

/* The child: receives the parent's array, checks it, writes its own values
 * into it, sends back an array of its own, and checks the parent's write
 * into that one. Every step a byte on the socket orders the two. Returns
 * the exit status: 0 when all was seen. */
static int child(int sock)
{
    int failures = 0;
#define EXPECT(c)                                                                                             \
    do {                                                                                                      \
        if (!(c)) {                                                                                           \
            fprintf(stderr, "child: %s:%d: %s\n", __FILE__, __LINE__, #c);                                    \
            failures++;                                                                                       \
        }                                                                                                     \
    } while (0)
    int before = fd_count();
    tack_device *d = NULL;
    EXPECT(tack_device_open("cpu", NULL, 0, &d) == TACK_OK);
    /* A non-blocking socket is waited on, not refused. */
    fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) | O_NONBLOCK);
    tack_array *got = NULL;
    EXPECT(tack_array_receive(sock, NULL, &got) == TACK_OK);
    EXPECT(holds(got, 100));
    EXPECT(got && tack_array_ndim(got) == 2 && tack_array_shape(got)[1] == 4);
    int32_t v[12];
    for (int i = 0; i < 12; i++)
        v[i] = 200 + i;
    EXPECT(tack_array_copy_from_host(got, v, sizeof v) == TACK_OK);
    tack_array *mine = exportable(d, 300);
    EXPECT(tack_array_send(sock, mine) == TACK_OK);
    char byte;
    struct pollfd p = {.fd = sock, .events = POLLIN};
    EXPECT(poll(&p, 1, 30000) == 1 && read(sock, &byte, 1) == 1); /* the parent wrote into mine */
    EXPECT(holds(mine, 400));
    tack_array_release(got);
    tack_array_release(mine);
    tack_device_release(d);
    EXPECT(fd_count() == before);
    EXPECT(tack_array_live_count() == 0 && tack_buffer_live_count() == 0);
    return failures ? 1 : 0;
#undef EXPECT
}

static void test_writes_are_seen_across_processes(void)
{
    tack_device *d = cpu();
    int sv[2];
    CHECK(connected(SOCK_STREAM, sv));
    int before = fd_count();
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        _exit(child(sv[1]));
    }
    tack_array *a = exportable(d, 100);
    CHECK_OK(tack_array_send(sv[0], a));
    tack_array *theirs = NULL;
    CHECK_OK(tack_array_receive(sv[0], NULL, &theirs));
    /* The child wrote into a before it sent its own array. */
    CHECK(holds(a, 200));
    CHECK(holds(theirs, 300));
    int32_t v[12];
    for (int i = 0; i < 12; i++)
        v[i] = 400 + i;
    CHECK_OK(tack_array_copy_from_host(theirs, v, sizeof v));
    CHECK(write(sv[0], "w", 1) == 1);
    int status = -1;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The child's memory outlives the child: the mapping holds it. */
    CHECK(holds(theirs, 400));
    tack_array_release(theirs);
    tack_array_release(a);
    CHECK(fd_count() == before);
    disconnect(sv);
    tack_device_release(d);
}


int main(void)
{
    /* A peer that goes away must be an error, never a signal. */
    signal(SIGPIPE, SIG_DFL);
    check_each_leaves_nothing();
    RUN(test_exportable_host_memory_exports_a_memfd);
    RUN(test_import_memory_in_one_process);
    RUN(test_read_only_descriptor_gives_a_read_only_array);
    RUN(test_import_memory_refusals_leave_nothing);
    RUN(test_descriptors_are_closed_exactly_once);
    RUN(test_send_refusals_leave_nothing);
    RUN(test_bad_headers_are_refused_on_a_stream);
    RUN(test_bad_headers_are_refused_on_seqpacket);
    RUN(test_stream_stays_in_step_after_a_future_header);
    RUN(test_read_only_arrays_arrive_read_only);
    RUN(test_writes_are_seen_across_processes);
    RUN(test_memory_that_can_shrink_is_refused);
    RUN(test_memory_sealed_against_shrinking_is_mapped);
    RUN(test_the_deadline_holds_for_the_whole_message);
    RUN(test_a_listening_socket_fails_at_once);
    RUN(test_messages_say_what_was_wrong);
    RUN(test_only_unix_sockets_carry_arrays);
    RUN(test_an_empty_message_is_not_a_closed_peer);
    CHECK_DONE();
}
