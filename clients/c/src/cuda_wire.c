/*
 * cuda_wire.c: NAME.cuda's request and reply (PROTOCOL.md 4.5): building, checking, sending
 * and receiving them with the allocation's descriptor, and the consumer's one request.
 */
#include "cuda_wire.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

int fsi_cuda_request_check(const void *bytes, size_t length, fs_cuda_request *out)
{
    if (length != sizeof *out)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "NAME.cuda request: %zu bytes, expected %zu", length, sizeof *out);
    memcpy(out, bytes, sizeof *out);
    if (out->magic != FS_MAGIC_CUDA) return fsi_fail(FRAMESRV_E_BAD_DATA, "NAME.cuda request: magic is 0x%x", out->magic);
    if (out->version != FS_PROTOCOL_VERSION)
        return fsi_fail(FRAMESRV_E_VERSION, "NAME.cuda request speaks protocol version %u, expected %u", out->version,
                        FS_PROTOCOL_VERSION);
    if (out->reserved0 != 0 || out->reserved1 != 0)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "NAME.cuda request: reserved fields are %u and %llu, expected 0", out->reserved0,
                        (unsigned long long)out->reserved1);
    if (out->entry >= FS_MAX_CONSUMERS)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "NAME.cuda request: entry is %u, expected 0..%u", out->entry, FS_MAX_CONSUMERS - 1);
    return FRAMESRV_OK;
}

int fsi_cuda_reply_check(const void *bytes, size_t length, int fds, uint64_t epoch, fs_cuda_reply *out)
{
    if (length != sizeof *out) return fsi_fail(FRAMESRV_E_BAD_DATA, "NAME.cuda reply: %zu bytes, expected %zu", length, sizeof *out);
    memcpy(out, bytes, sizeof *out);
    if (out->magic != FS_MAGIC_CUDA) return fsi_fail(FRAMESRV_E_BAD_DATA, "NAME.cuda reply: magic is 0x%x", out->magic);
    if (out->version != FS_PROTOCOL_VERSION)
        return fsi_fail(FRAMESRV_E_VERSION, "NAME.cuda reply speaks protocol version %u, expected %u", out->version,
                        FS_PROTOCOL_VERSION);
    if (out->epoch != epoch)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "NAME.cuda reply: epoch is %llu, expected %llu, the one asked for",
                        (unsigned long long)out->epoch, (unsigned long long)epoch);
    if (out->status != FS_CUDA_OK && out->status != FS_CUDA_REFUSED && out->status != FS_CUDA_NO_EPOCH)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "NAME.cuda reply: status is %d, expected 0..2", out->status);
    if (fds != (out->status == FS_CUDA_OK ? 1 : 0))
        return fsi_fail(FRAMESRV_E_BAD_DATA, "NAME.cuda reply: status %d came with %d descriptors", out->status, fds);
    if (out->status == FS_CUDA_OK && out->device_pool_size == 0)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "NAME.cuda reply: device_pool_size is 0");
    return FRAMESRV_OK;
}

int fsi_cuda_send(int sock, const void *message, size_t length, int fd)
{
    struct iovec iov = { (void *)message, length };
    union { struct cmsghdr align; char buf[CMSG_SPACE(sizeof(int))]; } control;
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (fd >= 0) {
        m.msg_control = control.buf;
        m.msg_controllen = sizeof control.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    ssize_t n;
    do n = sendmsg(sock, &m, MSG_NOSIGNAL); while (n < 0 && errno == EINTR);
    return n == (ssize_t)length ? 0 : -1;
}

/* Keeps the first descriptor of the control messages in *fd, closes the others. */
static void take_descriptors(struct msghdr *m, int *fd, int *fds)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int one;
            memcpy(&one, CMSG_DATA(c) + i * sizeof(int), sizeof one);
            if (*fd < 0) *fd = one;
            else close(one);
            (*fds)++;
        }
    }
}

int fsi_cuda_recv(int sock, void *buf, size_t size, size_t *length, int *fd, int *fds)
{
    struct iovec iov = { buf, size };
    union { struct cmsghdr align; char buf[CMSG_SPACE(4 * sizeof(int))]; } control;
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf };
    *fd = -1;
    *fds = 0;
    ssize_t n;
    do n = recvmsg(sock, &m, MSG_TRUNC | MSG_CMSG_CLOEXEC); while (n < 0 && errno == EINTR);
    if (n < 0) return -1;
    take_descriptors(&m, fd, fds);
    if (m.msg_flags & MSG_CTRUNC) (*fds)++;   /* more than we take: the reply is refused for it */
    *length = (size_t)n;
    return 0;
}

static void set_timeouts(int sock)
{
    struct timeval tv = { FSI_CUDA_WIRE_TIMEOUT_MS / 1000, (FSI_CUDA_WIRE_TIMEOUT_MS % 1000) * 1000 };
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int connect_to(const char *path)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof addr.sun_path) return fsi_fail(FRAMESRV_E_INVALID, "socket path %s is too long", path);
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (sock < 0) return fsi_fail_errno("socket for %s", path);
    set_timeouts(sock);
    if (connect(sock, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int rc = fsi_fail_errno("connect to %s", path);
        close(sock);
        return rc;
    }
    return sock;
}

static int refused(const char *stream, const fs_cuda_reply *reply, uint32_t entry)
{
    return fsi_fail(FRAMESRV_E_MEMORY, "the producer of stream '%s' refused its allocation of epoch %llu to consumer entry %u (%s)",
                    stream, (unsigned long long)reply->epoch, entry,
                    reply->status == FS_CUDA_REFUSED ? "not that entry's process" : "no allocation of that epoch any more");
}

int fsi_cuda_ask(const char *path, const char *stream, uint32_t entry, uint64_t epoch, int *fd, uint64_t *size)
{
    int sock = connect_to(path);
    if (sock < 0) return sock;
    fs_cuda_request req = { .magic = FS_MAGIC_CUDA, .version = FS_PROTOCOL_VERSION, .entry = entry, .epoch = epoch };
    uint8_t buf[sizeof(fs_cuda_reply) + 1];
    size_t length = 0;
    int fds = 0, rc = FRAMESRV_OK;
    *fd = -1;
    if (fsi_cuda_send(sock, &req, sizeof req, -1) != 0) rc = fsi_fail_errno("send the request to %s", path);
    else if (fsi_cuda_recv(sock, buf, sizeof buf, &length, fd, &fds) != 0) rc = fsi_fail_errno("receive the reply from %s", path);
    close(sock);
    fs_cuda_reply reply;
    if (rc == FRAMESRV_OK && (rc = fsi_cuda_reply_check(buf, length, fds, epoch, &reply)) == FRAMESRV_OK &&
        reply.status != FS_CUDA_OK)
        rc = refused(stream, &reply, entry);
    if (rc != FRAMESRV_OK && *fd >= 0) close(*fd);
    if (rc != FRAMESRV_OK) *fd = -1;
    else *size = reply.device_pool_size;
    return rc;
}
