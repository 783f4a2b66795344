/*
 * consumer_attach.c: a consumer's attachments (PROTOCOL.md 8): open, attach (8.1),
 * admission (9.1), reopen after a producer restart (15.3), detach (8.2), close, and the
 * stream's facts and the consumer's counters.
 */
#include "consumer.h"
#include "validate.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zmq.h>

static void request_detach(fsi_attachment *a);

/* ---- the doorbell (only for framesrv_consumer_fd) and the consumer entry ---------------- */

int fsi_connect_doorbell(framesrv_consumer *c, fsi_attachment *a)
{
    char path[PATH_MAX + 64], endpoint[PATH_MAX + 80];
    int status = fsi_path(path, sizeof path, c->dir, c->stream, ".sock");
    if (status != FRAMESRV_OK) return status;
    snprintf(endpoint, sizeof endpoint, "ipc://%s", path);
    if (!c->zctx && !(c->zctx = zmq_ctx_new()))
        return fsi_fail(FRAMESRV_E_ZMQ, "ZeroMQ could not create a context: %s", zmq_strerror(zmq_errno()));
    void *sock = zmq_socket(c->zctx, ZMQ_SUB);
    if (!sock) return fsi_fail(FRAMESRV_E_ZMQ, "ZeroMQ could not create a SUB socket: %s", zmq_strerror(zmq_errno()));
    int linger = 0, hwm = 1000;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(sock, ZMQ_SUBSCRIBE, "", 0);
    if (zmq_connect(sock, endpoint) != 0) {
        status = fsi_fail(FRAMESRV_E_ZMQ, "ZeroMQ could not connect to %s: %s", endpoint, zmq_strerror(zmq_errno()));
        zmq_close(sock);
        return status;
    }
    a->sock = sock;
    return FRAMESRV_OK;
}

/* Other live consumers (mode LIVE, state CLAIMED or ACTIVE) than entry `except`. */
static uint32_t live_consumers(const fsi_attachment *a, uint32_t except)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < FS_MAX_CONSUMERS; i++) {
        fs_consumer *e = fsi_att_entry(a, i);
        if (i == except || fs_load_i32(&e->pid) == 0 || fs_load_u32(&e->mode) != FS_MODE_LIVE) continue;
        uint32_t state = fs_load_u32(&e->state);
        n += state == FS_CONSUMER_CLAIMED || state == FS_CONSUMER_ACTIVE;
    }
    return n;
}

/* CLAIMED, the fields, ACTIVE, then bump and wake attach_seq (8.1 steps 6-8).
 * SYNC: the release store of ACTIVE publishes the fields; the producer's watcher reads
 * them after its acquire load of state. */
static void activate_entry(const framesrv_consumer *c, fsi_attachment *a)
{
    fs_consumer *e = a->entry;
    fs_store_u32(&e->state, FS_CONSUMER_CLAIMED);
    e->start_time = fsi_process_start_time(getpid());
    e->mode = (uint32_t)a->mode;
    e->flags = 0;
    e->first_seq = 0;
    e->attached_ns = fsi_monotonic_ns();
    e->delivered = e->missed = e->last_seq = e->held = e->hold_since_ns = e->latency_sum_ns = e->stale = 0;
    e->source_dropped = 0;
    memset(e->latency_hist, 0, sizeof e->latency_hist);
    memset(e->name, 0, sizeof e->name);
    memcpy(e->name, c->client_name, strnlen(c->client_name, sizeof e->name - 1));
    fs_store_u32(&e->state, FS_CONSUMER_ACTIVE);
    fs_bump(&a->ctl->attach_seq);
    fsi_futex_wake(&a->ctl->attach_seq);
}

/* Claims the first free entry (8.1 step 5), refusing a live consumer the pool cannot serve. */
static int claim_entry(framesrv_consumer *c, fsi_attachment *a)
{
    int32_t me = (int32_t)getpid();
    uint32_t i = 0;
    while (i < FS_MAX_CONSUMERS && !fs_consumer_claim(fsi_att_entry(a, i), me)) i++;
    if (i == FS_MAX_CONSUMERS)
        return fsi_fail(FRAMESRV_E_BUSY, "stream '%s' already has %u consumers, the most one stream supports", c->stream,
                        FS_MAX_CONSUMERS);
    a->index = i;
    a->bit = 1ull << i;
    a->pid = me;
    a->entry = fsi_att_entry(a, i);
    uint32_t others = a->mode == FS_MODE_LIVE ? live_consumers(a, i) : 0;
    if (others > 0 && (uint64_t)a->slot_count < (uint64_t)(others + 1) * a->live_max_held + 2) {
        fs_consumer_free(a->entry);
        a->entry = NULL;
        return fsi_fail(FRAMESRV_E_BUSY, "stream '%s' has %u slots: too few for another live consumer (%u attached, %u frames each)",
                        c->stream, a->slot_count, others, a->live_max_held);
    }
    activate_entry(c, a);
    return FRAMESRV_OK;
}

/* ---- attaching ------------------------------------------------------------------------- */

/* Frees an attachment that never got (or no longer has) its entry. */
static void attachment_free(fsi_attachment *a)
{
    if (a->sock) zmq_close(a->sock);
    if (a->producer_fd >= 0) close(a->producer_fd);
    fsi_pool_unref(a->pool);
    fsi_consumer_cuda_free(a);   /* before the control segment it registered goes */
    if (a->ctl) munmap(a->ctl, a->ctl_size);
    free(a);
}

/* NAME.ctl speaks another protocol version (16): only its identity prefix is read, at
 * offsets every version keeps. A live producer's version will not change: the version
 * error (its one line is already set). A dead one's file is a leftover, waited past. */
static int other_version(fsi_attachment *a, const char *path)
{
    char line[512];
    snprintf(line, sizeof line, "%s", framesrv_last_error());
    const uint8_t *bytes = (const uint8_t *)a->ctl;
    int32_t pid;
    uint64_t start;
    memcpy(&pid, bytes + offsetof(fs_control, producer_pid), sizeof pid);
    memcpy(&start, bytes + offsetof(fs_control, producer_start_time), sizeof start);
    int fd = fsi_open_pidfd(pid, start);
    if (fd < 0)
        return fsi_fail(FRAMESRV_E_NOT_FOUND, "%s is a leftover of a protocol version %u producer (pid %d) that is not running", path,
                        ((const fs_control *)bytes)->version, pid);
    close(fd);
    return fsi_fail(FRAMESRV_E_VERSION, "%s", line);
}

/* Maps and validates NAME.ctl and checks its producer is alive (8.1 steps 1-3): NOT_FOUND
 * for no file, a dead producer's leftover, or the previous producer after a reopen. */
static int open_control(framesrv_consumer *c, fsi_attachment *a)
{
    char path[PATH_MAX + 64];
    void *base;
    int status = fsi_path(path, sizeof path, c->dir, c->stream, ".ctl");
    if (status == FRAMESRV_OK) status = fsi_map_file(path, true, false, &base, &a->ctl_size);
    if (status != FRAMESRV_OK) return status;
    a->ctl = base;
    uint32_t memory;
    status = fsi_validate_control(base, a->ctl_size, path, &a->slot_count, &memory);
    if (status == FRAMESRV_E_VERSION) return other_version(a, path);
    if (status != FRAMESRV_OK) return status;
    a->producer_pid = fs_load_i32(&a->ctl->producer_pid);
    a->producer_start_time = a->ctl->producer_start_time;
    if (c->skip_pid != 0 && a->producer_pid == c->skip_pid && a->producer_start_time == c->skip_start)
        return fsi_fail(FRAMESRV_E_NOT_FOUND, "%s still belongs to the previous producer (pid %d)", path, a->producer_pid);
    if ((a->producer_fd = fsi_open_pidfd(a->producer_pid, a->producer_start_time)) < 0)
        return fsi_fail(FRAMESRV_E_NOT_FOUND, "%s is a leftover: its producer (pid %d) is not running", path, a->producer_pid);
    uint32_t max_held = a->ctl->live_max_held;
    a->live_max_held = max_held < 1 ? 1 : max_held > a->slot_count ? a->slot_count : max_held;
    return FRAMESRV_OK;
}

/* One attach attempt: c->att on success. */
static int try_attach(framesrv_consumer *c)
{
    fsi_attachment *a = calloc(1, sizeof *a);
    if (!a) return fsi_fail(FRAMESRV_E_NO_MEMORY, "out of memory attaching to stream '%s'", c->stream);
    a->producer_fd = -1;
    a->mode = c->mode;
    int status = open_control(c, a);
    if (status == FRAMESRV_OK) status = fsi_consumer_cuda_check(c, a);   /* before the claim (4.5) */
    if (status == FRAMESRV_OK) status = claim_entry(c, a);
    if (status == FRAMESRV_OK && (status = fsi_consumer_cuda_attached(a)) != FRAMESRV_OK) {
        request_detach(a);
        a->entry = NULL;
    }
    if (status != FRAMESRV_OK) {
        attachment_free(a);
        return status;
    }
    c->att = a;
    c->ended = 0;
    fsi_map_current_pool(c, a);
    return FRAMESRV_OK;
}

static void drain_inotify(int fd)
{
    char buf[4096] __attribute__((aligned(8)));
    while (fd >= 0 && read(fd, buf, sizeof buf) > 0) {}
}

/* The longest open waits for the admission, whatever its timeout: a producer admits at
 * once, so only a stuck one makes the wait end here (next() then waits on). */
#define ADMISSION_WAIT_MAX_NS 2000000000ull

static bool admitted_or_ended(const fsi_attachment *a)
{
    return a->mode != FS_MODE_LOSSLESS || fs_load_u64(&a->entry->first_seq) != 0 || fs_load_u32(&a->ctl->state) == FS_STREAM_ENDED;
}

/* Lossless: waits (bounded) until the producer admitted us, the stream ended or the
 * producer exited, so that frames published right after open are ours. Not an error
 * when the deadline passes first: next() waits on. The admission bumps frame_wake
 * (fs_frame_ready), so this sleeps there as next does (11). */
static void wait_admission(framesrv_consumer *c, uint64_t deadline)
{
    fsi_attachment *a = c->att;
    uint64_t cap = fsi_monotonic_ns() + ADMISSION_WAIT_MAX_NS;
    if (deadline > cap) deadline = cap;
    while (!admitted_or_ended(a)) {
        int ms = fsi_remaining_ms(deadline, FSI_FRAME_WAIT_MS);
        if (ms == 0) return;
        uint32_t w = fs_consumer_wait_begin(a->ctl, a->bit);
        bool done = admitted_or_ended(a) || !fsi_pidfd_alive(a->producer_fd);
        if (!done) fsi_futex_wait(&a->ctl->frame_wake, w, ms);
        fs_consumer_wait_end(a->ctl, a->bit);
        if (done) return;
    }
}

int fsi_consumer_attach(framesrv_consumer *c, uint64_t deadline)
{
    uint64_t start = fsi_monotonic_ns();
    for (;;) {
        drain_inotify(c->inotify_fd);
        int status = try_attach(c);
        if (status == FRAMESRV_OK) {
            wait_admission(c, deadline);
            return FRAMESRV_OK;
        }
        if (status != FRAMESRV_E_NOT_FOUND) return status;
        int ms = fsi_remaining_ms(deadline, FSI_ATTACH_POLL_MS);
        if (ms == 0)
            return fsi_fail(FRAMESRV_E_NOT_FOUND, "no %sstream named '%s' appeared in %s within %llu ms; start a producer with --out %s "
                            "(or check FRAMESRV_DIR)", c->skip_pid ? "new producer of the " : "", c->stream, c->dir,
                            (unsigned long long)((fsi_monotonic_ns() - start) / 1000000), c->stream);
        /* inotify wakes us at the rename; the bound also covers a leftover control segment
         * that a new producer replaces, and a directory inotify could not watch. */
        struct pollfd p = { c->inotify_fd, POLLIN, 0 };
        if (c->inotify_fd < 0 || poll(&p, 1, ms) < 0) usleep((useconds_t)ms * 1000);
    }
}

/* ---- detaching ---------------------------------------------------------------------------- */

/* The producer's watcher frees the entry; notifying `wake` (8.2, 12.3) also wakes a producer
 * asleep in reserve at once, even one without a watcher thread. */
static void request_detach(fsi_attachment *a)
{
    fs_store_u32(&a->entry->state, FS_CONSUMER_CLOSING);
    fs_bump(&a->ctl->attach_seq);
    fsi_futex_wake(&a->ctl->attach_seq);
    if (fs_notify_producer(a->ctl)) fsi_futex_wake(&a->ctl->wake);
}

void fsi_attachment_finish(framesrv_consumer *c, fsi_attachment *a)
{
    for (fsi_attachment **p = &c->retired; *p; p = &(*p)->next_retired)
        if (*p == a) {
            *p = a->next_retired;
            break;
        }
    /* 8.2 / 15.3: CLOSING only to a producer that can act on it, and only now that we
     * hold nothing. SYNC: release store; the producer's watcher clears our bit from every
     * slot and frees the entry. */
    if (a->entry && !__atomic_load_n(&a->evicted, __ATOMIC_ACQUIRE)) fsi_consumer_cuda_quiesce(c, a);   /* fences written first */
    if (a->entry && !__atomic_load_n(&a->evicted, __ATOMIC_ACQUIRE) && !a->producer_exited && fsi_pidfd_alive(a->producer_fd))
        request_detach(a);
    attachment_free(a);
}

void fsi_attachment_retire(framesrv_consumer *c, fsi_attachment *a)
{
    if (c->att == a) {
        c->att = NULL;
        c->skip_pid = a->producer_pid;
        c->skip_start = a->producer_start_time;
    }
    pthread_mutex_lock(&c->lock);   /* against releases in other threads */
    a->retired = true;
    if (a->held == 0) {
        fsi_attachment_finish(c, a);
    } else {
        a->next_retired = c->retired;
        c->retired = a;
    }
    pthread_mutex_unlock(&c->lock);
}
