/*
 * Cross-process arrays: importing exported memory, and passing an array's
 * descriptor with a small versioned header over a Unix-domain socket.
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

#if !defined(_WIN32)
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#endif

#include "internal.h"

_Static_assert(sizeof(tack_ipc_header) == 608, "tack_ipc_header version 1 is 608 bytes");
_Static_assert(offsetof(tack_ipc_header, size) == 32, "tack_ipc_header layout");
_Static_assert(offsetof(tack_ipc_header, device_uuid) == 80, "tack_ipc_header layout");
_Static_assert(offsetof(tack_ipc_header, shape) == 96, "tack_ipc_header layout");

/* How many devices of one backend device=NULL looks through for the UUID. */
#define SEARCH_DEVICES 64

static int terminated(const char *s, size_t cap) { return memchr(s, 0, cap) != NULL; }

static tack_status check_record(const tack_exported_memory *e)
{
    if (!terminated(e->backend, sizeof e->backend) || !terminated(e->handle_type, sizeof e->handle_type))
        return tack_error_set(TACK_EVALUE, "the export record's backend and handle_type are not terminated strings");
    if (strcmp(e->handle_type, "posix_fd") != 0)
        return tack_error_set(TACK_EVALUE, "a %s handle cannot be imported here: only posix_fd descriptors can",
                              e->handle_type);
    if (e->handle < 0 || e->handle > INT_MAX)
        return tack_error_set(TACK_EVALUE, "handle %lld is not a file descriptor", (long long)e->handle);
    if (e->allocation_size == 0 || e->size > e->allocation_size)
        return tack_error_set(TACK_EVALUE,
                              "the export record's sizes do not agree: size %zu, allocation_size %zu (an "
                              "allocation holds at least one byte and at least the array's)",
                              e->size, e->allocation_size);
    return TACK_OK;
}

/* Imports on one device; *foreign as the backend's import_memory sets it. */
static tack_status import_on(tack_device *d, const tack_exported_memory *e, tack_dtype dtype, int ndim,
                             const int64_t *shape, size_t size, size_t nbytes, int read_only, int *foreign,
                             tack_array **out)
{
    const struct tack_backend_ops *ops = d->ops;
    if (strcmp(ops->name, e->backend) != 0)
        return tack_error_set(TACK_EVALUE, "memory exported by the %s backend cannot be imported on %s", e->backend,
                              d->name);
    if (!ops->import_memory)
        return tack_error_set(TACK_ERUNTIME, "Backend %s does not support memory import", ops->name);
    void *data = NULL, *ctx = NULL;
    int writable = !read_only;
    tack_status st = ops->import_memory(d, e, &data, &ctx, &writable, foreign);
    if (st != TACK_OK)
        return st;
    tack_buffer *b;
    st = tack_buffer_wrap_extra(d, data, e->size, 0, &b);
    if (st != TACK_OK) {
        ops->free(d, data, ctx);
        return st;
    }
    /* Tack made the mapping and undoes it: an owned buffer whose free is the
     * backend's (wrap already marked it shared: the exporter may touch the
     * memory at any moment). */
    b->owned = 1;
    b->alloc_ctx = ctx;
    return tack_array_adopt_buffer(b, dtype, ndim, shape, size, nbytes, writable, out);
}

static tack_status import_array(tack_device *device, const tack_exported_memory *e, tack_dtype dtype, int ndim,
                                const int64_t *shape, int read_only, tack_array **out)
{
    size_t itemsize, size, nbytes;
    tack_status st = tack_layout_check(dtype, ndim, shape, &itemsize, &size, &nbytes);
    if (st != TACK_OK)
        return st;
    st = check_record(e);
    if (st != TACK_OK)
        return st;
    if (nbytes > e->size)
        return tack_error_set(TACK_EVALUE, "an array of %zu bytes does not fit the %zu exported bytes", nbytes,
                              e->size);
    int foreign = 0;
    if (device)
        return import_on(device, e, dtype, ndim, shape, size, nbytes, read_only, &foreign, out);

    /* The record names its backend, and its device by UUID: ordinals differ
     * between processes (CUDA_VISIBLE_DEVICES), UUIDs do not. */
    const struct tack_backend_ops *ops = tack_backend_find(e->backend, strlen(e->backend));
    if (!ops)
        return tack_error_set(TACK_EVALUE, "the memory was exported by a backend named '%s', which Tack does not have",
                              e->backend);
    for (int i = 0; i < SEARCH_DEVICES; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s:%d", ops->name, i);
        tack_device *d;
        st = tack_device_open(name, NULL, 0, &d);
        if (st != TACK_OK) {
            if (i == 0)
                return st;
            break;
        }
        foreign = 0;
        st = import_on(d, e, dtype, ndim, shape, size, nbytes, read_only, &foreign, out);
        tack_device_release(d);
        if (!foreign)
            return st;
    }
    char uuid[33];
    for (int i = 0; i < 16; i++)
        snprintf(uuid + 2 * i, 3, "%02x", e->device_uuid[i]);
    return tack_error_set(TACK_EVALUE,
                          "no %s device in this process has UUID %s, the device the memory was exported on (is "
                          "it hidden here, by CUDA_VISIBLE_DEVICES for example?)",
                          ops->name, uuid);
}

tack_status tack_array_import_memory(tack_device *device, const tack_exported_memory *exported, tack_dtype dtype,
                                     int ndim, const int64_t *shape, tack_array **out)
{
    if (!exported || !out)
        return tack_error_set(TACK_EVALUE, "tack_array_import_memory: exported and out must not be NULL");
    return import_array(device, exported, dtype, ndim, shape, 0, out);
}

#if defined(_WIN32)

tack_status tack_array_send(int socket_fd, tack_array *array)
{
    (void)socket_fd;
    (void)array;
    return tack_error_set(TACK_ERUNTIME, "tack_array_send needs Unix-domain sockets with SCM_RIGHTS");
}

tack_status tack_array_receive(int socket_fd, tack_device *device, tack_array **out)
{
    (void)socket_fd;
    (void)device;
    (void)out;
    return tack_error_set(TACK_ERUNTIME, "tack_array_receive needs Unix-domain sockets with SCM_RIGHTS");
}

#else

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

/* Descriptors one message may bring: a well-formed one brings one; room
 * for more so that extras are seen (and closed) rather than cut off. */
#define MAX_FDS 8

/* The first bytes of every version's header: enough to recognise it and to
 * know how long it is. */
#define PREFIX_SIZE 16

static tack_status socket_type(int fd, int *type)
{
    socklen_t len = sizeof *type;
    if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_TYPE, type, &len) != 0)
        return tack_error_set(TACK_EVALUE, "descriptor %d is not a socket (%s): pass a connected Unix-domain socket",
                              fd, fd < 0 ? "negative" : strerror(errno));
    return TACK_OK;
}

/* Waits until the socket is ready for `events`: a non-blocking socket is
 * waited on, as a blocking one would be. */
static tack_status wait_ready(int fd, short events)
{
    struct pollfd p = {.fd = fd, .events = events};
    while (poll(&p, 1, -1) < 0) {
        if (errno != EINTR)
            return tack_error_set(TACK_ERUNTIME, "waiting on socket %d failed: %s", fd, strerror(errno));
    }
    return TACK_OK;
}

static tack_status send_message(int sock, const void *buf, size_t len, int fd)
{
    size_t done = 0;
    while (done < len) {
        struct iovec iov = {.iov_base = (char *)buf + done, .iov_len = len - done};
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        union {
            char bytes[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } control;
        if (done == 0) {
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
        ssize_t n = sendmsg(sock, &m, SEND_FLAGS);
        if (n < 0) {
            int e = errno;
            if (e == EINTR)
                continue;
            if (e == EAGAIN || e == EWOULDBLOCK) {
                tack_status st = wait_ready(sock, POLLOUT);
                if (st != TACK_OK)
                    return st;
                continue;
            }
            if (e == EPIPE || e == ECONNRESET)
                return tack_error_set(TACK_ERUNTIME, "sending an array failed: the receiving end closed socket %d",
                                      sock);
            return tack_error_set(TACK_ERUNTIME, "sending an array on socket %d failed: %s", sock, strerror(e));
        }
        done += (size_t)n;
    }
    return TACK_OK;
}

tack_status tack_array_send(int socket_fd, tack_array *a)
{
    if (!a)
        return tack_error_set(TACK_EVALUE, "tack_array_send: array must not be NULL");
    int type;
    tack_status st = socket_type(socket_fd, &type);
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
    return send_message(socket_fd, &h, sizeof h, (int)e.handle);
}

struct received_fds {
    int fd[MAX_FDS];
    int n;
    int lost; /* the kernel dropped some: the control buffer was too small */
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

/* One recvmsg into buf, collecting descriptors; EINTR retried and a
 * non-blocking socket waited on. Returns the bytes read (0 at end of
 * stream) or -1 with the error set. */
static ssize_t receive_some(int sock, void *buf, size_t len, struct received_fds *r, int *truncated)
{
    for (;;) {
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        union {
            char bytes[CMSG_SPACE(sizeof(int) * MAX_FDS)];
            struct cmsghdr align;
        } control;
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = control.bytes;
        m.msg_controllen = sizeof control.bytes;
        ssize_t n = recvmsg(sock, &m, RECV_FLAGS);
        if (n < 0) {
            int e = errno;
            if (e == EINTR)
                continue;
            if (e == EAGAIN || e == EWOULDBLOCK) {
                if (wait_ready(sock, POLLIN) != TACK_OK)
                    return -1;
                continue;
            }
            tack_error_set(TACK_ERUNTIME, "receiving an array on socket %d failed: %s", sock, strerror(e));
            return -1;
        }
        collect(&m, r);
        if (truncated)
            *truncated = (m.msg_flags & MSG_TRUNC) != 0;
        return n;
    }
}

/* Reads exactly len bytes of a stream. */
static tack_status receive_exactly(int sock, void *buf, size_t len, size_t offset, struct received_fds *r)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = receive_some(sock, (char *)buf + done, len - done, r, NULL);
        if (n < 0)
            return TACK_ERUNTIME;
        if (n == 0) {
            if (offset + done == 0)
                return tack_error_set(TACK_ERUNTIME, "socket %d was closed by the sending end before an array arrived",
                                      sock);
            return tack_error_set(TACK_ERUNTIME, "socket %d was closed in the middle of an array's header (%zu bytes "
                                                 "of it arrived)",
                                  sock, offset + done);
        }
        done += (size_t)n;
    }
    return TACK_OK;
}

/* Discards the rest of a refused header of another version, so that the
 * next message on a stream starts where it should. */
static void skip_bytes(int sock, size_t n, struct received_fds *r)
{
    char sink[512];
    while (n > 0) {
        size_t chunk = n < sizeof sink ? n : sizeof sink;
        ssize_t got = receive_some(sock, sink, chunk, r, NULL);
        if (got <= 0)
            return;
        n -= (size_t)got;
    }
}

/* Reads one message: the header (checked up to its version) and its
 * descriptors. */
static tack_status receive_header(int sock, int type, tack_ipc_header *h, struct received_fds *r)
{
    size_t got;
    int truncated = 0;
    if (type == SOCK_STREAM) {
        /* A stream has no message boundaries: read the prefix, then as much
         * as its version says, never into the next message. */
        tack_status st = receive_exactly(sock, h, PREFIX_SIZE, 0, r);
        if (st != TACK_OK)
            return st;
        got = PREFIX_SIZE;
    } else {
        /* One message per receive; a longer one (a future version) is cut
         * off by the kernel and the rest discarded with it. */
        ssize_t n = receive_some(sock, h, sizeof *h, r, &truncated);
        if (n < 0)
            return TACK_ERUNTIME;
        if (n == 0 && r->n == 0)
            return tack_error_set(TACK_ERUNTIME, "socket %d was closed by the sending end before an array arrived",
                                  sock);
        got = (size_t)n;
        if (got < PREFIX_SIZE)
            return tack_error_set(TACK_EVALUE, "a message of %zu bytes is not a Tack array header", got);
    }
    if (memcmp(h->magic, TACK_IPC_MAGIC, sizeof h->magic) != 0)
        return tack_error_set(TACK_EVALUE,
                              "the message is not a Tack array header (bad magic): the other end did not send it "
                              "with tack_array_send / tack.send_array");
    if (h->version != TACK_IPC_VERSION) {
        uint32_t version = h->version, size = h->header_size;
        if (type == SOCK_STREAM && version > TACK_IPC_VERSION && size > PREFIX_SIZE && size <= (1u << 20))
            skip_bytes(sock, size - PREFIX_SIZE, r);
        if (version > TACK_IPC_VERSION)
            return tack_error_set(TACK_EVALUE,
                                  "the array header is version %u, newer than this Tack reads (version %u): "
                                  "upgrade Tack in the receiving process",
                                  version, TACK_IPC_VERSION);
        return tack_error_set(TACK_EVALUE, "the array header's version is 0, which no Tack writes");
    }
    if (h->header_size != sizeof *h || truncated)
        return tack_error_set(TACK_EVALUE, "a version %u array header is %zu bytes, not %u", TACK_IPC_VERSION,
                              sizeof *h, h->header_size);
    if (type == SOCK_STREAM)
        return receive_exactly(sock, (char *)h + PREFIX_SIZE, sizeof *h - PREFIX_SIZE, PREFIX_SIZE, r);
    if (got != sizeof *h)
        return tack_error_set(TACK_EVALUE, "a version %u array header is %zu bytes; %zu arrived", TACK_IPC_VERSION,
                              sizeof *h, got);
    return TACK_OK;
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
    if (h->ndim < 0 || h->ndim > TACK_MAX_NDIM)
        return tack_error_set(TACK_EVALUE, "the array header's ndim is %d; an array has 0 to %d dimensions", h->ndim,
                              TACK_MAX_NDIM);
    size_t size, nbytes;
    tack_status st = tack_shape_check(h->ndim, h->shape, tack_dtype_size(*dtype), &size, &nbytes);
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

tack_status tack_array_receive(int socket_fd, tack_device *device, tack_array **out)
{
    if (!out)
        return tack_error_set(TACK_EVALUE, "tack_array_receive: out must not be NULL");
    int type;
    tack_status st = socket_type(socket_fd, &type);
    if (st != TACK_OK)
        return st;
    tack_ipc_header h;
    memset(&h, 0, sizeof h);
    struct received_fds r = {.n = 0, .lost = 0};
    st = receive_header(socket_fd, type, &h, &r);
    if (st == TACK_OK && (r.n != 1 || r.lost))
        st = tack_error_set(TACK_EVALUE, "an array message carries one descriptor; this one carried %d%s", r.n,
                            r.lost ? " and more that were dropped" : "");
    tack_dtype dtype = TACK_U8;
    tack_exported_memory e;
    if (st == TACK_OK)
        st = parse_header(&h, r.fd[0], &dtype, &e);
    if (st == TACK_OK)
        st = import_array(device, &e, dtype, h.ndim, h.shape, (h.flags & TACK_IPC_READ_ONLY) != 0, out);
    /* The import mapped a duplicate (cpu) or the driver's own import
     * (cuda): the received descriptor is done with either way. */
    close_all(&r);
    return st;
}

#endif
