/*
 * Cross-process arrays: passing an array's descriptor with a small
 * versioned header over a Unix-domain socket; the receiver imports it as
 * import_memory.c imports any exported memory.
 *
 * SCM_RIGHTS is used rather than pidfd_getfd or /proc/<pid>/fd because it
 * needs no rights over the other process (ptrace access, same user): only
 * the connected socket, which both processes already chose to share.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "backend.h"
#include "internal.h"

_Static_assert(sizeof(tack_ipc_header) == 608, "tack_ipc_header version 1 is 608 bytes");
_Static_assert(offsetof(tack_ipc_header, size) == 32, "tack_ipc_header layout");
_Static_assert(offsetof(tack_ipc_header, device_uuid) == 80, "tack_ipc_header layout");
_Static_assert(offsetof(tack_ipc_header, shape) == 96, "tack_ipc_header layout");

static int terminated(const char *s, size_t cap) { return memchr(s, 0, cap) != NULL; }

#if defined(MSG_NOSIGNAL)
#define SEND_FLAGS MSG_NOSIGNAL
#else
#define SEND_FLAGS 0
#endif
#if defined(MSG_CMSG_CLOEXEC)
#define RECV_FLAGS MSG_CMSG_CLOEXEC
#else
#define RECV_FLAGS 0
#endif
/* Every call is tried without blocking and the waiting done by poll, which
 * a signal always interrupts and which takes what is left of the deadline:
 * a blocking recvmsg would be restarted after a signal (SA_RESTART) and
 * would wait past any deadline. Without MSG_DONTWAIT a blocking socket
 * blocks in the call itself. */
#if defined(MSG_DONTWAIT)
#define NOWAIT MSG_DONTWAIT
#else
#define NOWAIT 0
#endif

/* Descriptors one message may bring: a well-formed one brings one; room
 * for more so that extras are seen (and closed) rather than cut off. */
#define MAX_FDS 8

static const char *family_name(int family)
{
    switch (family) {
    case AF_INET:
        return "AF_INET";
    case AF_INET6:
        return "AF_INET6";
    default:
        return "not AF_UNIX";
    }
}

/* The first bytes of every version's header: enough to recognise it and to
 * know how long it is. */
#define PREFIX_SIZE 16

/* The most a refused header of a newer version may claim and still be
 * skipped; a longer one ends the stream's use. */
#define MAX_SKIP (1u << 20)

/* The socket's type (SOCK_STREAM, ...); TACK_EVALUE for a descriptor that
 * is no socket, or a socket of a family that cannot carry descriptors: a
 * TCP socket would send the header and silently drop the descriptor. */
static tack_status socket_type(int fd, int *type)
{
    socklen_t len = sizeof *type;
    if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_TYPE, type, &len) != 0)
        return tack_error_set(TACK_EVALUE, "descriptor %d is not a socket (%s): pass a connected Unix-domain socket",
                              fd, fd < 0 ? "negative" : strerror(errno));
    struct sockaddr_storage addr;
    socklen_t addr_len = sizeof addr;
    memset(&addr, 0, sizeof addr);
    if (getsockname(fd, (struct sockaddr *)&addr, &addr_len) != 0)
        return tack_error_set(TACK_EVALUE, "cannot tell the family of socket %d (%s): pass a connected Unix-domain "
                                           "socket",
                              fd, strerror(errno));
    if (addr.ss_family != AF_UNIX)
        return tack_error_set(TACK_EVALUE,
                              "socket %d is not a Unix-domain socket (its family is %s): only AF_UNIX sockets "
                              "carry descriptors, and an array travels as one; use socket.socketpair() or an "
                              "AF_UNIX socket",
                              fd, family_name(addr.ss_family));
    return TACK_OK;
}

/* One send or receive in progress: its socket, its deadline and how far it
 * got, for the messages. */
struct io {
    int sock;
    const char *verb;   /* "sending" or "receiving" */
    int64_t deadline;   /* CLOCK_MONOTONIC ns; < 0: none */
    int64_t timeout_ms; /* as given */
    tack_ipc_wait *wait;
    size_t moved; /* bytes sent or received so far */
    tack_status failure; /* of the last receive_some that failed */
};

static void io_start(struct io *io, int sock, const char *verb, tack_ipc_wait *wait)
{
    io->sock = sock;
    io->verb = verb;
    io->wait = wait;
    io->moved = 0;
    io->failure = TACK_OK;
    io->timeout_ms = wait ? wait->timeout_ms : -1;
    io->deadline = -1;
    if (io->timeout_ms >= 0) {
        int64_t ms = io->timeout_ms > INT64_MAX / 2000000 ? INT64_MAX / 2000000 : io->timeout_ms;
        io->deadline = tack_now_ns() + ms * 1000000;
    }
    if (wait)
        wait->os_error = 0;
}

/* A failure the system reported, with its errno kept for the caller. */
static tack_status os_failure(struct io *io, int err, const char *what)
{
    if (io->wait)
        io->wait->os_error = err;
    if (err == EPIPE || err == ECONNRESET)
        return tack_error_set(TACK_EIO, "%s an array failed: the other end closed socket %d (%s)", io->verb,
                              io->sock, strerror(err));
    if (err == ENOTCONN)
        return tack_error_set(TACK_EIO,
                              "%s an array on socket %d failed: it is not connected (%s); pass a connected socket "
                              "(socketpair, connect, or one that accept returned), not a listening one",
                              io->verb, io->sock, strerror(err));
    return tack_error_set(TACK_EIO, "%s an array on socket %d failed: %s: %s", io->verb, io->sock, what,
                          strerror(err));
}

static tack_status timed_out(struct io *io)
{
    if (io->timeout_ms == 0 && io->moved == 0) {
        if (io->wait)
            io->wait->os_error = EAGAIN;
        return tack_error_set(TACK_ETIMEOUT,
                              "%s an array on socket %d would block, and its time limit is 0 (a non-blocking "
                              "socket): wait until the socket is ready, or give it a timeout",
                              io->verb, io->sock);
    }
    if (io->wait)
        io->wait->os_error = ETIMEDOUT;
    return tack_error_set(TACK_ETIMEOUT, "timed out after %lld ms %s an array on socket %d (%zu bytes of the "
                                         "message had come through)%s",
                          (long long)io->timeout_ms, io->verb, io->sock, io->moved,
                          io->moved ? "; the rest of that message is still on the socket: close it" : "");
}

/* After EINTR: asks the caller whether to go on. */
static tack_status after_signal(struct io *io)
{
    tack_ipc_wait *w = io->wait;
    if (w && w->interrupted && w->interrupted(w->context)) {
        w->os_error = EINTR;
        return tack_error_set(TACK_ERUNTIME, "%s an array on socket %d was interrupted by a signal", io->verb,
                              io->sock);
    }
    return TACK_OK;
}

/* Waits until the socket is ready for `events` or the deadline passes. */
static tack_status wait_ready(struct io *io, short events)
{
    for (;;) {
        int ms = -1;
        if (io->deadline >= 0) {
            int64_t left = io->deadline - tack_now_ns();
            if (left <= 0)
                return timed_out(io);
            /* Rounded up: waking before the deadline only to wait again. */
            int64_t m = (left + 999999) / 1000000;
            ms = m > INT_MAX ? INT_MAX : (int)m;
        }
        struct pollfd p = {.fd = io->sock, .events = events};
        int n = poll(&p, 1, ms);
        if (n > 0)
            return TACK_OK; /* ready, or an error the next call reports */
        if (n < 0 && errno != EINTR)
            return os_failure(io, errno, "waiting for it");
        if (n < 0) {
            tack_status st = after_signal(io);
            if (st != TACK_OK)
                return st;
        }
        /* Timed out or interrupted: the deadline decides. */
    }
}

/* After a call that failed with `err`: wait for `events` when it would
 * have blocked, ask the caller after a signal, or fail. TACK_OK to try the
 * call again. */
static tack_status after_failure(struct io *io, int err, short events, const char *call)
{
    if (err == EINTR)
        return after_signal(io);
    if (err == EAGAIN || err == EWOULDBLOCK)
        return wait_ready(io, events);
    return os_failure(io, err, call);
}

static tack_status send_message(struct io *io, const void *buf, size_t len, int fd)
{
    while (io->moved < len) {
        struct iovec iov = {.iov_base = (char *)buf + io->moved, .iov_len = len - io->moved};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        union {
            char bytes[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } control;
        if (io->moved == 0) {
            /* The descriptor rides on the first byte; a later part of a
             * message cut short by the kernel goes without it. */
            memset(&control, 0, sizeof control);
            m.msg_control = control.bytes;
            m.msg_controllen = sizeof control.bytes;
            struct cmsghdr *c = CMSG_FIRSTHDR(&m);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &fd, sizeof fd);
        }
        ssize_t n = sendmsg(io->sock, &m, SEND_FLAGS | NOWAIT);
        if (n < 0) {
            tack_status st = after_failure(io, errno, POLLOUT, "sendmsg");
            if (st != TACK_OK)
                return st;
            continue;
        }
        io->moved += (size_t)n;
    }
    return TACK_OK;
}

/* What a send or receive checks first: the wait's error cleared, the
 * argument `what` given, and the socket's type into *type. */
static tack_status transfer_begin(int socket_fd, tack_ipc_wait *wait, int given, const char *what, int *type)
{
    if (wait)
        wait->os_error = 0;
    if (!given)
        return tack_error_set(TACK_EVALUE, "%s must not be NULL", what);
    return socket_type(socket_fd, type);
}

tack_status tack_array_send_wait(int socket_fd, tack_array *a, tack_ipc_wait *wait)
{
    TACK_PUBLIC_CALL();
    int type;
    tack_status st = transfer_begin(socket_fd, wait, a != NULL, "array", &type);
    if (st != TACK_OK)
        return st;
    tack_exported_memory e;
    st = tack_array_export_memory(a, &e);
    if (st != TACK_OK)
        return st;
    if (strcmp(e.handle_type, "posix_fd") != 0 || e.handle < 0 || e.handle > INT_MAX)
        return tack_error_set(TACK_ERUNTIME, "a %s handle cannot travel over a Unix socket", e.handle_type);

    tack_ipc_header h;
    /* Zeroed whole, padding and unused shape entries included: no stray
     * bytes of this process's memory go over the socket. */
    memset(&h, 0, sizeof h);
    memcpy(h.magic, TACK_IPC_MAGIC, sizeof h.magic);
    h.version = TACK_IPC_VERSION;
    h.header_size = (uint32_t)sizeof h;
    st = tack_dtype_to_dlpack(a->dtype, &h.dtype_code, &h.dtype_bits);
    if (st != TACK_OK)
        return st;
    h.dtype_lanes = 1;
    h.flags = a->writable ? 0 : TACK_IPC_READ_ONLY;
    h.ndim = a->ndim;
    h.size = e.size;
    h.allocation_size = e.allocation_size;
    memcpy(h.backend, e.backend, sizeof h.backend);
    memcpy(h.handle_type, e.handle_type, sizeof h.handle_type);
    memcpy(h.device_uuid, e.device_uuid, sizeof h.device_uuid);
    for (int i = 0; i < a->ndim; i++)
        h.shape[i] = a->shape[i];
    /* sendmsg passes a new reference to the descriptor; the buffer keeps
     * its own. */
    struct io io;
    io_start(&io, socket_fd, "sending", wait);
    return send_message(&io, &h, sizeof h, (int)e.handle);
}

tack_status tack_array_send(int socket_fd, tack_array *a)
{
    TACK_PUBLIC_CALL();
    return tack_array_send_wait(socket_fd, a, NULL);
}

struct received_fds {
    int fd[MAX_FDS];
    int n;
    int lost; /* the kernel dropped some (MSG_CTRUNC) */
};

static void close_all(struct received_fds *r)
{
    for (int i = 0; i < r->n; i++)
        close(r->fd[i]);
    r->n = 0;
}

static void collect(struct msghdr *m, struct received_fds *r)
{
    if (m->msg_flags & MSG_CTRUNC)
        r->lost = 1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (r->n < MAX_FDS)
                r->fd[r->n++] = fd;
            else
                close(fd); /* more than any message of ours carries */
        }
    }
}

/* One recvmsg into buf, collecting descriptors and waiting (within the
 * deadline) until something arrives. `flags` adds MSG_TRUNC on message
 * sockets, for the whole length of a longer message. Returns the bytes
 * read (0 at end of stream) or -1 with the error set. */
static ssize_t receive_some(struct io *io, void *buf, size_t len, int flags, struct received_fds *r)
{
    for (;;) {
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        union {
            char bytes[CMSG_SPACE(sizeof(int) * MAX_FDS)];
            struct cmsghdr align;
        } control;
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.bytes,
                           .msg_controllen = sizeof control.bytes};
        ssize_t n = recvmsg(io->sock, &m, RECV_FLAGS | NOWAIT | flags);
        if (n < 0) {
            if ((io->failure = after_failure(io, errno, POLLIN, "recvmsg")) != TACK_OK)
                return -1;
            continue;
        }
        collect(&m, r);
        io->moved += (size_t)n < len ? (size_t)n : len;
        return n;
    }
}

/* Reads exactly len bytes of a stream. */
static tack_status receive_exactly(struct io *io, void *buf, size_t len, struct received_fds *r)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = receive_some(io, (char *)buf + done, len - done, 0, r);
        if (n < 0)
            return io->failure;
        if (n == 0) {
            if (io->moved == 0)
                return tack_error_set(TACK_EIO, "socket %d was closed by the sending end before an array arrived",
                                      io->sock);
            return tack_error_set(TACK_EIO, "socket %d was closed in the middle of an array's header (%zu bytes "
                                                 "of it arrived)",
                                  io->sock, io->moved);
        }
        done += (size_t)n;
    }
    return TACK_OK;
}

/* Discards the rest of a refused header of another version, so that the
 * next message on a stream starts where it should. Within the deadline: a
 * peer that claims more than it sends cannot hold the receiver. */
static tack_status skip_bytes(struct io *io, size_t n, struct received_fds *r)
{
    char sink[512];
    while (n > 0) {
        size_t chunk = n < sizeof sink ? n : sizeof sink;
        ssize_t got = receive_some(io, sink, chunk, 0, r);
        if (got < 0)
            return io->failure;
        if (got == 0)
            return TACK_OK;
        n -= (size_t)got;
    }
    return TACK_OK;
}

/* Whether the other end of a connected socket has gone, or shut down its
 * writing side: nothing more will come. */
#if defined(POLLRDHUP)
#define HANGUPS (POLLHUP | POLLERR | POLLRDHUP)
#else
#define HANGUPS (POLLHUP | POLLERR)
#endif
static int peer_closed(int sock)
{
    struct pollfd p = {.fd = sock, .events = POLLIN | HANGUPS};
    return poll(&p, 1, 0) == 1 && (p.revents & HANGUPS);
}

/* Reads one message: the header (checked up to its version) and its
 * descriptors. */
static tack_status receive_header(struct io *io, int type, tack_ipc_header *h, struct received_fds *r)
{
    size_t got;
    if (type == SOCK_STREAM) {
        /* A stream has no message boundaries: read the prefix, then as much
         * as its version says, never into the next message. */
        tack_status st = receive_exactly(io, h, PREFIX_SIZE, r);
        if (st != TACK_OK)
            return st;
        got = PREFIX_SIZE;
    } else {
        /* One message per receive; a longer one (a future version) is cut
         * off by the kernel and the rest discarded with it, and MSG_TRUNC
         * makes the call return the whole length. */
        ssize_t n = receive_some(io, h, sizeof *h, MSG_TRUNC, r);
        if (n < 0)
            return io->failure;
        /* recvmsg returns 0 both for an empty message and at the end of a
         * closed connection; only the latter hangs the socket up. */
        if (n == 0 && r->n == 0 && type == SOCK_SEQPACKET && peer_closed(io->sock))
            return tack_error_set(TACK_EIO, "socket %d was closed by the sending end before an array arrived",
                                  io->sock);
        if (n == 0)
            return tack_error_set(TACK_EVALUE,
                                  "socket %d delivered an empty message, not a Tack array header (a version %u "
                                  "header is %zu bytes): the other end did not send it with tack_array_send / "
                                  "tack.send_array",
                                  io->sock, TACK_IPC_VERSION, sizeof *h);
        got = (size_t)n;
        if (got < PREFIX_SIZE)
            return tack_error_set(TACK_EVALUE, "a message of %zu bytes is not a Tack array header (version %u is %zu "
                                               "bytes)",
                                  got, TACK_IPC_VERSION, sizeof *h);
    }
    if (memcmp(h->magic, TACK_IPC_MAGIC, sizeof h->magic) != 0)
        return tack_error_set(TACK_EVALUE,
                              "the message is not a Tack array header (bad magic): the other end did not send it "
                              "with tack_array_send / tack.send_array");
    if (h->version != TACK_IPC_VERSION) {
        uint32_t version = h->version, size = h->header_size;
        if (type == SOCK_STREAM && version > TACK_IPC_VERSION && size > PREFIX_SIZE && size <= MAX_SKIP) {
            tack_status st = skip_bytes(io, size - PREFIX_SIZE, r);
            if (st != TACK_OK)
                return st;
        }
        if (version > TACK_IPC_VERSION)
            return tack_error_set(TACK_EVALUE,
                                  "the array header is version %u, newer than this Tack reads (version %u): "
                                  "upgrade Tack in the receiving process",
                                  version, TACK_IPC_VERSION);
        return tack_error_set(TACK_EVALUE, "the array header's version is 0, which no Tack writes");
    }
    if (h->header_size != sizeof *h)
        return tack_error_set(TACK_EVALUE, "the array header says it is %u bytes, but a version %u header is %zu",
                              h->header_size, TACK_IPC_VERSION, sizeof *h);
    if (type == SOCK_STREAM)
        return receive_exactly(io, (char *)h + PREFIX_SIZE, sizeof *h - PREFIX_SIZE, r);
    if (got != sizeof *h)
        return tack_error_set(TACK_EVALUE, "a message of %zu bytes is not a version %u array header, which is %zu "
                                           "bytes",
                              got, TACK_IPC_VERSION, sizeof *h);
    return TACK_OK;
}

/* The message's descriptors: exactly one. Descriptors the kernel dropped
 * with room left for them were dropped because this process could take no
 * more (the kernel closes them and says only MSG_CTRUNC): ask for one to
 * tell which. */
static tack_status check_descriptors(struct io *io, const struct received_fds *r)
{
    if (r->lost && r->n < MAX_FDS) {
        int probe = fcntl(io->sock, F_DUPFD_CLOEXEC, 0);
        int err = probe < 0 ? errno : 0;
        if (probe >= 0)
            close(probe);
        if (err == EMFILE || err == ENFILE) {
            if (io->wait)
                io->wait->os_error = err;
            return tack_error_set(TACK_ERUNTIME,
                                  "the array's descriptor was dropped on arrival: %s (%s); close descriptors or "
                                  "raise the limit (ulimit -n, RLIMIT_NOFILE), then send the array again",
                                  err == EMFILE ? "this process has no descriptor free" : "the system has no file "
                                                                                          "free",
                                  strerror(err));
        }
    }
    if (r->n != 1 || r->lost)
        return tack_error_set(TACK_EVALUE, "an array message carries one descriptor; this one carried %d%s", r->n,
                              r->lost ? " and more that the system dropped" : "");
    return TACK_OK;
}

/* After a failed import of a received descriptor: when the process has
 * no descriptor left (the descriptor that arrived took the last one, and
 * mapping it needs another), that is the failure to report, as the errno
 * a socket call would give; else `st` stands. */
static tack_status out_of_descriptors(struct io *io, tack_status st)
{
    int probe = fcntl(io->sock, F_DUPFD_CLOEXEC, 0);
    int err = probe < 0 ? errno : 0;
    if (probe >= 0)
        close(probe);
    if (err != EMFILE && err != ENFILE)
        return st;
    if (io->wait)
        io->wait->os_error = err;
    return tack_error_set(TACK_ERUNTIME,
                          "the array arrived, but %s to map it (%s); close descriptors or raise the limit "
                          "(ulimit -n, RLIMIT_NOFILE), then send the array again",
                          err == EMFILE ? "this process has no descriptor free" : "the system has no file free",
                          strerror(err));
}

/* Checks a version-1 header and makes the record its descriptor goes with. */
static tack_status parse_header(const tack_ipc_header *h, int fd, tack_dtype *dtype, tack_exported_memory *e)
{
    if (tack_dtype_from_dlpack(h->dtype_code, h->dtype_bits, h->dtype_lanes, dtype) != TACK_OK)
        return tack_error_set(TACK_EVALUE, "the array header's dtype (DLPack code %u, %u bits, %u lanes) is not a Tack dtype",
                              h->dtype_code, h->dtype_bits, h->dtype_lanes);
    if (h->flags & ~TACK_IPC_READ_ONLY || h->reserved)
        return tack_error_set(TACK_EVALUE, "the array header sets flags (0x%x) or reserved bits a version %u header has not",
                              h->flags, TACK_IPC_VERSION);
    size_t size, nbytes;
    tack_status st = tack_shape_check(*dtype, h->ndim, h->shape, &size, &nbytes);
    if (st != TACK_OK)
        return st;
    if (h->size != nbytes || h->allocation_size < h->size || h->allocation_size == 0 ||
        h->allocation_size > SIZE_MAX)
        return tack_error_set(TACK_EVALUE,
                              "the array header's sizes do not agree: its shape holds %zu bytes, size says %llu and "
                              "allocation_size %llu",
                              nbytes, (unsigned long long)h->size, (unsigned long long)h->allocation_size);
    if (!terminated(h->backend, sizeof h->backend) || !terminated(h->handle_type, sizeof h->handle_type))
        return tack_error_set(TACK_EVALUE, "the array header's backend and handle_type are not terminated strings");
    memset(e, 0, sizeof *e);
    memcpy(e->backend, h->backend, sizeof e->backend);
    memcpy(e->handle_type, h->handle_type, sizeof e->handle_type);
    memcpy(e->device_uuid, h->device_uuid, sizeof e->device_uuid);
    e->size = (size_t)h->size;
    e->allocation_size = (size_t)h->allocation_size;
    e->handle = fd;
    return TACK_OK;
}

tack_status tack_array_receive_wait(int socket_fd, tack_device *device, tack_ipc_wait *wait, tack_array **out)
{
    TACK_PUBLIC_CALL();
    int type;
    tack_status st = transfer_begin(socket_fd, wait, out != NULL, "out", &type);
    if (st != TACK_OK)
        return st;
    tack_ipc_header h;
    memset(&h, 0, sizeof h);
    struct received_fds r = {.n = 0, .lost = 0};
    struct io io;
    io_start(&io, socket_fd, "receiving", wait);
    st = receive_header(&io, type, &h, &r);
    if (st == TACK_OK)
        st = check_descriptors(&io, &r);
    tack_dtype dtype = TACK_U8;
    tack_exported_memory e;
    if (st == TACK_OK)
        st = parse_header(&h, r.fd[0], &dtype, &e);
    if (st == TACK_OK) {
        st = tack_exported_import(device, &e, dtype, h.ndim, h.shape, (h.flags & TACK_IPC_READ_ONLY) != 0, out);
        if (st != TACK_OK)
            st = out_of_descriptors(&io, st);
    }
    /* The import mapped a duplicate (cpu) or the driver's own import
     * (cuda): the received descriptor is done with either way. */
    close_all(&r);
    return st;
}

tack_status tack_array_receive(int socket_fd, tack_device *device, tack_array **out)
{
    TACK_PUBLIC_CALL();
    return tack_array_receive_wait(socket_fd, device, NULL, out);
}
