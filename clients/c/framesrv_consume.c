/*
 * framesrv_consume.c: a minimal lossless consumer of a framesrv stream, protocol v1.
 *
 *   framesrv_consume --in NAME [--verify-pattern] [--seq-log FILE] [--count N] [--wait SECONDS] [-v]
 *
 * Attaches to stream NAME, receives every frame published after the producer admits it,
 * in order, reading each one in place in shared memory, and prints
 *   c: received N frames, first F, last L, corrupt C
 * when the stream ends (or after N frames, or on SIGINT/SIGTERM).
 *
 * Everything about the bytes comes from CFrameServer.h, the protocol's single source of
 * truth; every cross-process access is one of its static inline accessors, whose SYNC:
 * comments explain the orderings. protocol/PROTOCOL.md describes the algorithm followed
 * here. It is C11 + GNU atomics builtins + Linux (futex, pidfd_open, inotify) + libzmq.
 *
 * Exit status: 0, 1 if any frame failed --verify-pattern, 2 on an error.
 */
#define _GNU_SOURCE
#include "CFrameServer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* Look at shared memory again after RECHECK_MS even without a doorbell, doubling on every
 * silent timeout up to RECHECK_MAX_MS and back to RECHECK_MS when a doorbell arrives.
 * ZeroMQ may drop announcements even for a subscriber that keeps up (before our
 * subscription reaches the producer, and at the high-water mark), and shared memory,
 * not the doorbell, is the truth (PROTOCOL.md section 11). */
#define RECHECK_MS 100
#define RECHECK_MAX_MS 1000

/* ------------------------------------------------------------------------- */
/* Small system helpers                                                       */
/* ------------------------------------------------------------------------- */

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("c: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* FUTEX_WAKE (not _PRIVATE: the waiter is another process) every waiter on `word`. */
static void futex_wake(uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Field 22 (starttime) of /proc/<pid>/stat, 0 if the process does not exist. The comm
 * field may contain spaces and ')', so count fields from the last ')'. */
static uint64_t process_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) return 0;
    p++;
    for (int field = 3; *p; field++) {          /* ')' ends field 2 */
        while (*p == ' ') p++;
        if (field == 22) return strtoull(p, NULL, 10);
        while (*p && *p != ' ') p++;
    }
    return 0;
}

/* A pidfd that polls readable when process (pid, start_time) exits, or -1 when it is not
 * alive: gone, the pid was reused (the start time is read after the pidfd pins the
 * process), or it exited and is a zombie not yet reaped (its pidfd is already readable). */
static int open_exit_descriptor(pid_t pid, uint64_t start_time)
{
    if (pid <= 0) return -1;
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0) return -1;
    struct pollfd p = { fd, POLLIN, 0 };
    if (process_start_time(pid) != start_time || poll(&p, 1, 0) != 0) { close(fd); return -1; }
    return fd;
}

/* FRAMESRV_DIR, else $XDG_RUNTIME_DIR/framesrv, else /dev/shm/framesrv-<uid>
 * (/tmp/framesrv-<uid> without /dev/shm). Created 0700 if missing; must be ours. */
static void runtime_dir(char *out, size_t size)
{
    const char *d = getenv("FRAMESRV_DIR"), *x = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    if (d && *d) snprintf(out, size, "%s", d);
    else if (x && *x) snprintf(out, size, "%s/framesrv", x);
    else if (stat("/dev/shm", &st) == 0) snprintf(out, size, "/dev/shm/framesrv-%u", (unsigned)getuid());
    else snprintf(out, size, "/tmp/framesrv-%u", (unsigned)getuid());
    if (mkdir(out, 0700) != 0 && errno != EEXIST) die("cannot create runtime directory %s: %s", out, strerror(errno));
    if (stat(out, &st) != 0 || !S_ISDIR(st.st_mode)) die("runtime directory %s is not a directory", out);
    if (st.st_uid != getuid())
        die("refusing runtime directory %s: it belongs to uid %u, not to you (uid %u); set FRAMESRV_DIR",
            out, (unsigned)st.st_uid, (unsigned)getuid());
    if ((st.st_mode & 077) != 0 && chmod(out, 0700) != 0) die("cannot restrict %s to mode 0700: %s", out, strerror(errno));
}

/* Maps a whole file MAP_SHARED; returns NULL with errno set on failure. */
static void *map_file(const char *path, bool writable, size_t *size)
{
    int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        int e = errno;
        close(fd);
        errno = st.st_size <= 0 ? EINVAL : e;
        return NULL;
    }
    /* SECURITY: pools are mapped PROT_READ; a stray write faults instead of corrupting
     * what other consumers read. */
    void *p = mmap(NULL, (size_t)st.st_size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return NULL;
    *size = (size_t)st.st_size;
    return p;
}

/* ------------------------------------------------------------------------- */
/* Pixel formats: planes as (log2 x subsampling, log2 y subsampling, bytes per pixel) */
/* ------------------------------------------------------------------------- */

typedef struct { uint32_t code; int planes; int ws[FS_MAX_PLANES], hs[FS_MAX_PLANES], bpp[FS_MAX_PLANES]; } pix_layout;

static const pix_layout pix_layouts[] = {
    { FS_PIX_GRAY8,       1, {0},       {0},       {1} },
    { FS_PIX_NV12,        2, {0, 1},    {0, 1},    {1, 2} },
    { FS_PIX_YUV420P,     3, {0, 1, 1}, {0, 1, 1}, {1, 1, 1} },
    { FS_PIX_YUV422P,     3, {0, 1, 1}, {0, 0, 0}, {1, 1, 1} },
    { FS_PIX_YUV444P,     3, {0, 0, 0}, {0, 0, 0}, {1, 1, 1} },
    { FS_PIX_YUV420P10LE, 3, {0, 1, 1}, {0, 1, 1}, {2, 2, 2} },
    { FS_PIX_RGB24,       1, {0},       {0},       {3} },
    { FS_PIX_BGRA,        1, {0},       {0},       {4} },
    { FS_PIX_RGBA,        1, {0},       {0},       {4} },
    { FS_PIX_P010LE,      2, {0, 1},    {0, 1},    {2, 4} },
    { FS_PIX_YUV422P10LE, 3, {0, 1, 1}, {0, 0, 0}, {2, 2, 2} },
    { FS_PIX_YUV444P10LE, 3, {0, 0, 0}, {0, 0, 0}, {2, 2, 2} },
    { FS_PIX_GRAY16LE,    1, {0},       {0},       {2} },
    { FS_PIX_BGR24,       1, {0},       {0},       {3} },
    { FS_PIX_GBRP,        3, {0, 0, 0}, {0, 0, 0}, {1, 1, 1} },
};

static const pix_layout *find_layout(uint32_t code)
{
    for (size_t i = 0; i < sizeof pix_layouts / sizeof pix_layouts[0]; i++)
        if (pix_layouts[i].code == code) return &pix_layouts[i];
    return NULL;
}

/* The `framesrv produce --pattern` check: for plane p, row y, byte x < row bytes,
 * byte == (x + 2*y + 3*seq + 61*p) & 0xFF. */
static bool verify_pattern(const fs_frame *h, const uint8_t *slot)
{
    const pix_layout *l = find_layout(h->pix_fmt);
    if (!l || h->plane_count != (uint32_t)l->planes) return false;
    for (int p = 0; p < l->planes; p++) {
        size_t row_bytes = (size_t)((h->width + (1u << l->ws[p]) - 1) >> l->ws[p]) * (size_t)l->bpp[p];
        size_t rows = (h->height + (1u << l->hs[p]) - 1) >> l->hs[p];
        size_t stride = h->plane_stride[p];
        if (stride < row_bytes || (rows > 0 && stride * (rows - 1) + row_bytes > h->plane_size[p])) return false;
        const uint8_t *plane = slot + h->plane_offset[p];
        for (size_t y = 0; y < rows; y++) {
            const uint8_t *row = plane + y * stride;
            unsigned c = (unsigned)(2 * y + 3 * h->seq + 61 * (uint64_t)p);
            for (size_t x = 0; x < row_bytes; x++)
                if (row[x] != (uint8_t)(x + c)) return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------------------- */
/* The consumer                                                               */
/* ------------------------------------------------------------------------- */

typedef struct consumer {
    char dir[PATH_MAX], stream[FS_NAME_MAX + 1];
    fs_control *ctl;
    size_t ctl_size;
    fs_consumer *entry;
    uint32_t index;
    uint64_t bit;
    int producer_fd;             /* pidfd of the producer */
    bool producer_exited;
    void *zctx, *sock;
    uint64_t expected;           /* next sequence number owed, 0 until admitted */
    uint32_t hint;               /* slot to start the next scan at */
    uint64_t pool_epoch;         /* the one pool mapped (frames are released before the next) */
    uint8_t *pool;
    size_t pool_size;
    int recheck_ms;              /* current doorbell timeout (RECHECK_MS .. RECHECK_MAX_MS) */
} consumer;

static void path_of(const consumer *c, char *out, size_t size, const char *suffix)
{
    int n = snprintf(out, size, "%s/%s%s", c->dir, c->stream, suffix);
    if (n < 0 || (size_t)n >= size) die("path %s/%s%s is too long", c->dir, c->stream, suffix);
}

/* Checks magic and version first, so a mismatch is reported as one (naming both versions). */
static void validate_control(const char *path, const fs_control *ctl, size_t size)
{
    if (size < sizeof(fs_control)) die("shared-memory segment %s is unusable: it is too small", path);
    if (ctl->magic != FS_MAGIC_CONTROL)
        die("control segment %s is not a framesrv control segment (magic 0x%08x)", path, ctl->magic);
    if (ctl->version != FS_PROTOCOL_VERSION)
        die("control segment %s speaks framesrv protocol version %u, but this client speaks version %u; "
            "run the same framesrv version on both sides", path, ctl->version, FS_PROTOCOL_VERSION);
    uint32_t n = ctl->slot_count;
    if (n < 1 || n > FS_MAX_SLOTS || ctl->max_consumers != FS_MAX_CONSUMERS || size < fs_control_size(n)
        || ctl->slot_ctl_offset + (size_t)n * sizeof(fs_slot_ctl) > size
        || ctl->consumer_offset + (size_t)FS_MAX_CONSUMERS * sizeof(fs_consumer) > size)
        die("shared-memory segment %s is unusable: its header describes %u slots in %zu bytes; "
            "run 'framesrv clean' to remove leftovers", path, n, size);
}

/* One attach attempt: false when there is no stream yet or only a dead producer's files. */
static bool try_attach(consumer *c)
{
    char path[PATH_MAX + 64];
    path_of(c, path, sizeof path, ".ctl");
    size_t size = 0;
    fs_control *ctl = map_file(path, true, &size);
    if (!ctl) {
        if (errno == ENOENT) return false;
        die("cannot map %s: %s", path, strerror(errno));
    }
    validate_control(path, ctl, size);
    int pfd = open_exit_descriptor(ctl->producer_pid, ctl->producer_start_time);
    if (pfd < 0) { munmap(ctl, size); return false; }   /* a dead producer's leftover */

    /* The doorbell: SUB to ipc://DIR/NAME.sock, every message. */
    char endpoint[PATH_MAX + 80];
    path_of(c, path, sizeof path, ".sock");
    int n = snprintf(endpoint, sizeof endpoint, "ipc://%s", path);
    if (n < 0 || (size_t)n >= sizeof endpoint) die("endpoint ipc://%s is too long", path);
    c->sock = zmq_socket(c->zctx, ZMQ_SUB);
    int linger = 0, hwm = 1000;
    zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(c->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(c->sock, ZMQ_SUBSCRIBE, "", 0);
    if (zmq_connect(c->sock, endpoint) != 0) die("ZeroMQ could not connect to %s: %s", endpoint, zmq_strerror(zmq_errno()));

    /* Claim an entry: CAS pid 0 -> our pid (SYNC: acquire, pairs with fs_consumer_free). */
    pid_t me = getpid();
    uint32_t i;
    for (i = 0; i < FS_MAX_CONSUMERS; i++)
        if (fs_consumer_claim(fs_control_consumer(ctl, i), me)) break;
    if (i == FS_MAX_CONSUMERS)
        die("stream '%s' already has %u consumers, the most one stream supports", c->stream, FS_MAX_CONSUMERS);
    fs_consumer *e = fs_control_consumer(ctl, i);
    fs_store_u32(&e->state, FS_CONSUMER_CLAIMED);
    e->start_time = process_start_time(me);
    e->mode = FS_MODE_LOSSLESS;
    e->flags = 0;
    e->first_seq = 0;
    e->attached_ns = monotonic_ns();
    e->delivered = e->missed = e->last_seq = e->held = e->hold_since_ns = e->latency_sum_ns = e->stale = 0;
    memset(e->latency_hist, 0, sizeof e->latency_hist);
    memset(e->name, 0, sizeof e->name);
    memcpy(e->name, "c-consumer", sizeof "c-consumer");
    /* SYNC: release; the producer's watcher reads the fields above after it sees ACTIVE. */
    fs_store_u32(&e->state, FS_CONSUMER_ACTIVE);
    fs_bump(&ctl->attach_seq);
    futex_wake(&ctl->attach_seq);

    c->ctl = ctl;
    c->ctl_size = size;
    c->entry = e;
    c->index = i;
    c->bit = 1ull << i;
    c->producer_fd = pfd;
    c->recheck_ms = RECHECK_MS;
    return true;
}

/* Waits for NAME.ctl (inotify on the directory: the producer renames it into place) and
 * attaches. timeout_s < 0 waits forever. */
static void attach(consumer *c, double timeout_s)
{
    int ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (ino >= 0) inotify_add_watch(ino, c->dir, IN_CREATE | IN_MOVED_TO);
    uint64_t deadline = timeout_s < 0 ? UINT64_MAX : monotonic_ns() + (uint64_t)(timeout_s * 1e9);
    while (!try_attach(c)) {
        if (stop_requested) exit(0);
        if (monotonic_ns() >= deadline)
            die("no stream named '%s' appeared in %s within %g s; start a producer with --out %s (or check FRAMESRV_DIR)",
                c->stream, c->dir, timeout_s, c->stream);
        /* inotify wakes us at the rename; the timeout also covers a leftover control
         * segment of a dead producer that a new producer replaces. */
        struct pollfd p = { ino, POLLIN, 0 };
        if (ino >= 0 && poll(&p, 1, 200) > 0) {
            char buf[4096];
            while (read(ino, buf, sizeof buf) > 0) {}
        } else if (ino < 0) {
            usleep(50000);
        }
    }
    if (ino >= 0) close(ino);
}

/* Reads every pending announcement: each only says "look again", but is validated so that a
 * protocol mismatch is reported. */
static void drain_doorbell(consumer *c)
{
    uint8_t buf[256];
    int n;
    while ((n = zmq_recv(c->sock, buf, sizeof buf, ZMQ_DONTWAIT)) >= 0) {
        fs_announce a;
        if ((size_t)n < sizeof a) die("announcement of %d bytes is shorter than the 64-byte header", n);
        memcpy(&a, buf, sizeof a);                       /* little-endian host assumed */
        if (a.magic != FS_MAGIC_ANNOUNCE) die("announcement is not a framesrv announcement (magic 0x%08x)", a.magic);
        if (a.version != FS_PROTOCOL_VERSION)
            die("announcement speaks framesrv protocol version %u, but this client speaks version %u; "
                "run the same framesrv version on both sides", a.version, FS_PROTOCOL_VERSION);
        if (a.kind < FS_ANNOUNCE_FRAME || a.kind > FS_ANNOUNCE_EPOCH) die("announcement of unknown kind %u", a.kind);
        if ((size_t)n != sizeof a + a.name_len)
            die("announcement length %d does not match its name length %u", n, a.name_len);
    }
}

static bool stream_ended(consumer *c) { return fs_load_u32(&c->ctl->state) == FS_STREAM_ENDED; }

/* Maps NAME.pool.<epoch> read-only, unmapping the previous pool (nothing is held from it:
 * this client releases each frame before taking the next). */
static bool map_pool(consumer *c, uint64_t epoch)
{
    if (c->pool && c->pool_epoch == epoch) return true;
    char path[PATH_MAX + 64], suffix[32];
    snprintf(suffix, sizeof suffix, ".pool.%llu", (unsigned long long)epoch);
    path_of(c, path, sizeof path, suffix);
    size_t size = 0;
    uint8_t *p = map_file(path, false, &size);
    if (!p) return false;
    if (c->pool) munmap(c->pool, c->pool_size);
    c->pool = p;
    c->pool_size = size;
    c->pool_epoch = epoch;
    return true;
}

/* Releases slot `slot`. SYNC: fs_slot_release clears our bit with release ordering (pairs
 * with the producer's reserve), bumps `wake` and says whether the producer sleeps on it. */
static void release_slot(consumer *c, uint32_t slot)
{
    if (fs_slot_release(c->ctl, fs_control_slot(c->ctl, slot), c->bit)) futex_wake(&c->ctl->wake);
    fs_store_u64(&c->entry->held, 0);
    fs_store_u64(&c->entry->hold_since_ns, 0);
}

typedef enum { NEXT_FRAME, NEXT_NONE, NEXT_ENDED, NEXT_PRODUCER_GONE } next_result;

/* Lossless: the frame with sequence number `expected`, reserved for us by the producer. */
static next_result try_next(consumer *c, uint32_t *slot_out, const fs_frame **header_out)
{
    if (c->expected == 0) {
        /* SYNC: acquire, pairs with the producer's release store of first_seq, made before
         * it publishes any frame with our bit. */
        uint64_t first = fs_load_u64(&c->entry->first_seq);
        if (first == 0) return stream_ended(c) ? NEXT_ENDED : NEXT_NONE;
        c->expected = first;
    }
    /* SYNC: the acquire load of state orders the read of end_seq after it. */
    if (stream_ended(c) && c->expected > c->ctl->end_seq) return NEXT_ENDED;
    uint32_t n = c->ctl->slot_count;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (c->hint + k) % n;
        fs_slot_ctl *s = fs_control_slot(c->ctl, i);
        /* SYNC: acquire load of holders, pairs with fs_slot_publish's release store. */
        if (!fs_slot_held_by(s, c->bit, c->expected)) continue;
        uint64_t epoch = s->epoch;
        if (!map_pool(c, epoch)) {
            int e = errno;
            release_slot(c, i);
            die("cannot map pool epoch %llu of stream '%s': %s", (unsigned long long)epoch, c->stream, strerror(e));
        }
        /* Each epoch's pool has its own slot size: derive it from the file. */
        size_t slot_bytes = c->pool_size / n;
        const fs_frame *h = (const fs_frame *)(c->pool + (size_t)i * slot_bytes);
        /* Any error about a held slot releases it before it is reported. */
        uint32_t magic = h->magic, version = h->version, planes = h->plane_count;
        uint64_t seq = h->seq;
        if (magic != FS_MAGIC_FRAME) {
            release_slot(c, i);
            die("frame header is not a framesrv frame header (magic 0x%08x)", magic);
        }
        if (version != FS_PROTOCOL_VERSION) {
            release_slot(c, i);
            die("frame header speaks framesrv protocol version %u, but this client speaks version %u; "
                "run the same framesrv version on both sides", version, FS_PROTOCOL_VERSION);
        }
        if (seq != c->expected) {
            release_slot(c, i);
            die("frame header carries frame %llu where the slot table says %llu", (unsigned long long)seq,
                (unsigned long long)c->expected);
        }
        if (planes < 1 || planes > FS_MAX_PLANES) {
            release_slot(c, i);
            die("frame header has %u planes", planes);
        }
        for (uint32_t p = 0; p < planes; p++) {
            uint64_t off = h->plane_offset[p], size = h->plane_size[p];
            if (off < sizeof(fs_frame) || off + size > slot_bytes) {
                release_slot(c, i);
                die("plane %u of frame %llu lies outside its %zu-byte slot", p, (unsigned long long)seq, slot_bytes);
            }
        }
        /* Statistics for framesrv ls/top (relaxed counters, plain stores). */
        uint64_t now = monotonic_ns(), latency = now > h->capture_ns ? now - h->capture_ns : 0, us = latency / 1000;
        unsigned bucket = us == 0 ? 0 : (unsigned)(64 - __builtin_clzll(us));
        if (bucket > FS_LATENCY_BUCKETS - 1) bucket = FS_LATENCY_BUCKETS - 1;
        fs_count(&c->entry->latency_hist[bucket], 1);
        fs_count(&c->entry->latency_sum_ns, latency);
        fs_count(&c->entry->delivered, 1);
        fs_store_u64(&c->entry->last_seq, c->expected);
        fs_store_u64(&c->entry->held, 1);
        fs_store_u64(&c->entry->hold_since_ns, now);
        c->expected++;
        c->hint = (i + 1) % n;
        *slot_out = i;
        *header_out = h;
        return NEXT_FRAME;
    }
    return NEXT_NONE;
}

/* Blocks until a frame is held (NEXT_FRAME), the stream is over (NEXT_ENDED) or the
 * producer exited without ending it (NEXT_PRODUCER_GONE, once every frame still reserved
 * for us was delivered). Sleeps in zmq_poll on the doorbell and the producer's pidfd, with
 * a timeout after which it looks at shared memory again (doorbells can be lost). */
static next_result next_frame(consumer *c, uint32_t *slot, const fs_frame **header)
{
    for (;;) {
        drain_doorbell(c);
        /* Map the current pool as soon as it exists, so frames owed to us stay readable
         * whatever happens to the file once the producer exits. */
        uint64_t epoch = fs_load_u64(&c->ctl->epoch);
        if (epoch) map_pool(c, epoch);
        next_result r = try_next(c, slot, header);
        if (r != NEXT_NONE) return r;
        if (c->producer_exited) return stream_ended(c) ? NEXT_ENDED : NEXT_PRODUCER_GONE;
        if (stop_requested) return NEXT_ENDED;
        zmq_pollitem_t items[2] = {
            { c->sock, 0, ZMQ_POLLIN, 0 },
            { NULL, c->producer_fd, ZMQ_POLLIN, 0 },
        };
        int n = zmq_poll(items, 2, c->recheck_ms);
        if (n > 0 && items[1].revents) c->producer_exited = true;
        else if (n > 0) c->recheck_ms = RECHECK_MS;                        /* a doorbell */
        else c->recheck_ms = c->recheck_ms * 2 > RECHECK_MAX_MS ? RECHECK_MAX_MS : c->recheck_ms * 2;
    }
}

/* Asks the producer to take us out: state CLOSING, then ring attach_seq. Called only once
 * this client holds no frame (it releases each before taking the next). */
static void detach(consumer *c)
{
    if (!c->producer_exited) {
        /* SYNC: release; the producer's watcher clears our bit from every slot and frees the entry. */
        fs_store_u32(&c->entry->state, FS_CONSUMER_CLOSING);
        fs_bump(&c->ctl->attach_seq);
        futex_wake(&c->ctl->attach_seq);
    }
    zmq_close(c->sock);
    zmq_ctx_term(c->zctx);
    close(c->producer_fd);
    if (c->pool) munmap(c->pool, c->pool_size);
    munmap(c->ctl, c->ctl_size);
}

/* ------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: framesrv_consume --in NAME [--verify-pattern] [--seq-log FILE] [--count N] "
                    "[--wait SECONDS] [-v]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *stream = NULL, *seq_log = NULL;
    bool verify = false, verbose = false;
    long long count = -1;
    double wait_s = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--in") && i + 1 < argc) stream = argv[++i];
        else if (!strcmp(argv[i], "--verify-pattern")) verify = true;
        else if (!strcmp(argv[i], "--seq-log") && i + 1 < argc) seq_log = argv[++i];
        else if (!strcmp(argv[i], "--count") && i + 1 < argc) count = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--wait") && i + 1 < argc) wait_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) verbose = true;
        else usage();
    }
    if (!stream) usage();
    size_t len = strlen(stream);
    bool ok = len >= 1 && len <= FS_NAME_MAX && stream[0] != '.';
    for (size_t i = 0; ok && i < len; i++)
        ok = (stream[i] >= '0' && stream[i] <= '9') || (stream[i] >= 'A' && stream[i] <= 'Z') ||
             (stream[i] >= 'a' && stream[i] <= 'z') || stream[i] == '.' || stream[i] == '_' || stream[i] == '-';
    if (!ok) die("invalid stream name '%s': use 1 to 48 letters, digits, '.', '_' or '-', not starting with '.'", stream);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;            /* no SA_RESTART: zmq_poll returns EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    static consumer c;
    runtime_dir(c.dir, sizeof c.dir);
    snprintf(c.stream, sizeof c.stream, "%s", stream);
    c.zctx = zmq_ctx_new();
    FILE *log = NULL;
    if (seq_log && !(log = fopen(seq_log, "w"))) die("cannot open %s: %s", seq_log, strerror(errno));

    attach(&c, wait_s);
    unsigned long long received = 0, corrupt = 0, first = 0, last = 0;
    uint32_t slot;
    const fs_frame *h;
    next_result r = NEXT_NONE;
    while ((count < 0 || (long long)received < count) && (r = next_frame(&c, &slot, &h)) == NEXT_FRAME) {
        bool bad = verify && !verify_pattern(h, (const uint8_t *)h);
        received++;
        corrupt += bad;
        if (!first) first = h->seq;
        last = h->seq;
        if (log) fprintf(log, "%llu\n", (unsigned long long)h->seq);
        if (verbose || bad)
            fprintf(stderr, "c: frame %llu slot %u %ux%u %.32s%s\n", (unsigned long long)h->seq, slot, h->width,
                    h->height, h->pix_fmt_name, bad ? " CORRUPT" : "");
        release_slot(&c, slot);
    }
    if (r == NEXT_PRODUCER_GONE)
        fprintf(stderr, "c: error: the producer of stream '%s' (pid %d) exited without ending the stream\n",
                c.stream, c.ctl->producer_pid);
    detach(&c);
    if (log) fclose(log);
    printf("c: received %llu frames, first %llu, last %llu, corrupt %llu\n", received, first, last, corrupt);
    return r == NEXT_PRODUCER_GONE ? 2 : corrupt ? 1 : 0;
}
