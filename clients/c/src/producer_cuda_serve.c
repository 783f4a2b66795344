/*
 * producer_cuda_serve.c: NAME.cuda (PROTOCOL.md 4.5), the SOCK_SEQPACKET socket on which a
 * CUDA stream's producer hands each epoch's allocation, as a descriptor, to the process of a
 * consumer entry and to no one else: SO_PEERCRED's pid must be the entry's, the entry CLAIMED
 * or ACTIVE, and its start time the process's. One request per connection, served by a
 * thread of its own, each with a bounded wait so a silent peer cannot stall it.
 */
#include "cuda_wire.h"
#include "producer.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

int fsp_cuda_bind(framesrv_producer *p)
{
    fsp_cuda *k = p->cuda;
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    char path[PATH_MAX];
    int rc = fsi_path(path, sizeof path, p->dir, p->name, ".cuda");
    if (rc != FRAMESRV_OK) return rc;
    if (strlen(path) >= sizeof addr.sun_path)
        return fsi_fail(FRAMESRV_E_INVALID, "socket path %s is longer than 107 bytes: use a shorter FRAMESRV_DIR", path);
    memcpy(addr.sun_path, path, strlen(path) + 1);
    if ((k->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0) return fsi_fail_errno("eventfd for NAME.cuda");
    if ((k->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0) return fsi_fail_errno("socket for %s", path);
    unlink(path);   /* a leftover (3.2 step 2 removed ours already) */
    if (bind(k->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0) return fsi_fail_errno("bind %s", path);
    chmod(path, 0600);
    if (listen(k->listen_fd, 16) != 0) return fsi_fail_errno("listen on %s", path);
    return FRAMESRV_OK;
}

/* Whether `pid` is entry `entry`'s process (15.1): the claim word, the state, the start time. */
static bool entry_is(framesrv_producer *p, uint32_t entry, pid_t pid)
{
    fs_consumer *e = &p->consumers[entry];
    uint32_t state = fs_load_u32(&e->state);   /* SYNC: acquire, after which start_time is the claimer's */
    if (pid <= 0 || fs_load_i32(&e->pid) != pid || (state != FS_CONSUMER_CLAIMED && state != FS_CONSUMER_ACTIVE)) return false;
    uint64_t start = __atomic_load_n(&e->start_time, __ATOMIC_RELAXED);
    return start != 0 && start == fsi_process_start_time(pid);
}

/* A duplicate of epoch's descriptor and its size, -1 when it is not kept. */
static int export_of(framesrv_producer *p, uint64_t epoch, uint64_t *size)
{
    fsp_cuda *k = p->cuda;
    int fd = -1;
    pthread_mutex_lock(&k->lock);
    for (uint32_t i = 0; i < k->export_count && fd < 0; i++)
        if (k->exports[i].epoch == epoch) {
            fd = fcntl(k->exports[i].fd, F_DUPFD_CLOEXEC, 0);
            *size = k->exports[i].size;
        }
    pthread_mutex_unlock(&k->lock);
    return fd;
}

static void serve_one(framesrv_producer *p, int conn)
{
    struct timeval tv = { FSI_CUDA_WIRE_TIMEOUT_MS / 1000, 0 };
    setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    uint8_t buf[sizeof(fs_cuda_request) + 1];
    size_t length;
    int stray, fds;
    fs_cuda_request req;
    if (fsi_cuda_recv(conn, buf, sizeof buf, &length, &stray, &fds) != 0) return;
    if (stray >= 0) close(stray);
    if (fds != 0 || fsi_cuda_request_check(buf, length, &req) != FRAMESRV_OK) return;   /* not a request: no reply */
    struct ucred cred;
    socklen_t n = sizeof cred;
    fs_cuda_reply reply = { .magic = FS_MAGIC_CUDA, .version = FS_PROTOCOL_VERSION, .status = FS_CUDA_REFUSED, .epoch = req.epoch };
    int fd = -1;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &n) == 0 && entry_is(p, req.entry, cred.pid)) {
        fd = export_of(p, req.epoch, &reply.device_pool_size);
        reply.status = fd >= 0 ? FS_CUDA_OK : FS_CUDA_NO_EPOCH;
        if (fd < 0) reply.device_pool_size = 0;
    }
    fsi_cuda_send(conn, &reply, sizeof reply, fd);
    if (fd >= 0) close(fd);
}

void *fsp_cuda_serve_main(void *producer)
{
    framesrv_producer *p = producer;
    fsp_cuda *k = p->cuda;
    for (;;) {
        struct pollfd fds[2] = { { k->listen_fd, POLLIN, 0 }, { k->stop_fd, POLLIN, 0 } };
        if (poll(fds, 2, -1) < 0 && errno != EINTR) return NULL;
        if (fds[1].revents) return NULL;
        if (!(fds[0].revents & POLLIN)) continue;
        int conn = accept4(k->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0) continue;   /* EMFILE, a peer gone: the next one may do */
        serve_one(p, conn);
        close(conn);
    }
}
