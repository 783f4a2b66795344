/*
 * producer_open.c: framesrv_producer_open. The stream's lock, then its files in the
 * order of PROTOCOL.md 3.2 (lock, leftovers, NAME.ctl.tmp.<pid>, the PUB socket, the
 * rename that makes the stream exist), then the background thread.
 */
#include "producer.h"
#include "pixfmt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b != 0) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* A video stream's size, format and default colour (framesrv.h). */
static int normalise_video(framesrv_producer_options *o)
{
    if (o->width < 1 || o->width > 16384 || o->height < 1 || o->height > 16384)
        return fsi_fail(FRAMESRV_E_INVALID, "producer: frame size %ux%u: width and height must be 1..16384",
                        o->width, o->height);
    const fsi_pix_format *f = fsi_pix_format_of(o->pix_fmt);
    if (f == NULL)
        return fsi_fail(FRAMESRV_E_INVALID, "producer: pix_fmt %d is not a format of the table (1..15)", o->pix_fmt);
    if (o->color_matrix == 0 && o->color_range == 0 && o->color_primaries == 0 && o->color_transfer == 0) {
        o->color_matrix = f->rgb ? FS_MATRIX_RGB : FS_MATRIX_UNSPECIFIED;
        o->color_primaries = 2;
        o->color_transfer = 2;
    }
    return FRAMESRV_OK;
}

/* Checks the options and fills in their defaults (framesrv.h); an audio stream's in producer_audio.c. */
static int normalise_options(framesrv_producer_options *o)
{
    int rc = fsp_audio_options(o);
    if (rc == FRAMESRV_OK && o->media == FRAMESRV_MEDIA_VIDEO) rc = normalise_video(o);
    if (rc != FRAMESRV_OK) return rc;
    if (o->slots == 0) o->slots = 8;
    if (o->slots > FS_MAX_SLOTS)
        return fsi_fail(FRAMESRV_E_INVALID, "producer: slots %u: must be 1..%u", o->slots, FS_MAX_SLOTS);
    if (o->rate_num < 0 || o->rate_den < 0 || (o->rate_num == 0) != (o->rate_den == 0))
        return fsi_fail(FRAMESRV_E_INVALID, "producer: rate %lld/%lld: both positive, or 0/0 (unknown)",
                        (long long)o->rate_num, (long long)o->rate_den);
    if (o->rate_num > 0) {   /* stored reduced (4.1) */
        int64_t g = gcd64(o->rate_num, o->rate_den);
        o->rate_num /= g;
        o->rate_den /= g;
    }
    if (o->live_max_held == 0) o->live_max_held = 1;
    if (o->live_source > 1)
        return fsi_fail(FRAMESRV_E_INVALID, "producer: live_source %u: must be 0 or 1", o->live_source);
    if (o->memory != FRAMESRV_MEMORY_HOST && o->memory != FRAMESRV_MEMORY_CUDA)
        return fsi_fail(FRAMESRV_E_INVALID, "producer: memory %d: use FRAMESRV_MEMORY_HOST (0) or FRAMESRV_MEMORY_CUDA (1)", o->memory);
    if (o->cuda_device < 0) return fsi_fail(FRAMESRV_E_INVALID, "producer: cuda_device %d: a device ordinal >= 0", o->cuda_device);
    return FRAMESRV_OK;
}

/* Whether NAME.ctl names a live producer (15.1). */
static bool live_producer_recorded(const char *ctl_path)
{
    void *base;
    size_t size;
    if (fsi_map_file(ctl_path, false, false, &base, &size) != FRAMESRV_OK) return false;
    bool alive = false;
    const fs_control *c = base;
    if (size >= sizeof(fs_control) && c->magic == FS_MAGIC_CONTROL) {
        int fd = fsi_open_pidfd(c->producer_pid, c->producer_start_time);
        alive = fd >= 0 && fsi_pidfd_alive(fd);
        if (fd >= 0) close(fd);
    }
    munmap(base, size);
    return alive;
}

/* One attempt at 3.2 step 1: 1 locked, 0 retry now (the file was unlinked), -1 would block. */
static int try_lock(const char *path, int *out)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return fsi_fail_errno("open %s", path);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return e == EWOULDBLOCK ? -1 : fsi_fail_errno("flock %s", path);
    }
    struct stat a, b;
    if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
        *out = fd;
        return 1;
    }
    close(fd);   /* `framesrv clean` unlinked it between open and flock: start again */
    return 0;
}

/* Takes NAME.lock (3.2 step 1): FRAMESRV_E_BUSY when a live producer holds it. */
static int take_lock(framesrv_producer *p)
{
    char lock_path[PATH_MAX], ctl_path[PATH_MAX];
    int rc = fsi_path(lock_path, sizeof lock_path, p->dir, p->name, ".lock");
    if (rc == FRAMESRV_OK) rc = fsi_path(ctl_path, sizeof ctl_path, p->dir, p->name, ".ctl");
    if (rc != FRAMESRV_OK) return rc;
    uint64_t deadline = fsi_monotonic_ns() + 1000000000ull;
    for (;;) {
        rc = try_lock(lock_path, &p->lock_fd);
        if (rc == 1) return FRAMESRV_OK;
        if (rc < -1) return rc;
        if (rc == 0) continue;
        if (live_producer_recorded(ctl_path) || fsi_monotonic_ns() > deadline)
            return fsi_fail(FRAMESRV_E_BUSY, "stream '%s' is busy: another producer holds %s", p->name, lock_path);
        usleep(10000);   /* `framesrv clean` or a starting producer holds it for a moment */
    }
}

/* Whether `file` is NAME + suffix, where suffix is one of 3.2's (lock excluded). */
static bool is_leftover(const char *file, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(file, name, n) != 0) return false;
    const char *s = file + n;
    if (strcmp(s, ".ctl") == 0 || strcmp(s, ".sock") == 0 || strcmp(s, ".cuda") == 0 || strcmp(s, ".ended") == 0 ||
        strcmp(s, ".control") == 0)
        return true;
    const char *digits = NULL;
    if (strncmp(s, ".pool.", 6) == 0) digits = s + 6;
    else if (strncmp(s, ".ctl.tmp.", 9) == 0) digits = s + 9;
    if (digits == NULL || *digits == '\0') return false;
    for (; *digits; digits++)
        if (*digits < '0' || *digits > '9') return false;
    return true;
}

/* 3.2 step 2: holding the lock proves every other file of the stream is a leftover. */
static int remove_leftovers(framesrv_producer *p)
{
    DIR *d = opendir(p->dir);
    if (d == NULL) return fsi_fail_errno("opendir %s", p->dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_leftover(e->d_name, p->name)) continue;
        char path[PATH_MAX];
        if (fsi_path(path, sizeof path, p->dir, e->d_name, "") == FRAMESRV_OK) unlink(path);
    }
    closedir(d);
    return FRAMESRV_OK;
}

int fsp_create_file(const char *path, size_t size, void **base)
{
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return fsi_fail_errno("create %s", path);
    if (ftruncate(fd, (off_t)size) != 0) {
        int rc = fsi_fail_errno("size %s to %zu bytes", path, size);
        close(fd);
        unlink(path);
        return rc;
    }
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int rc = m == MAP_FAILED ? fsi_fail_errno("map %s (%zu bytes)", path, size) : FRAMESRV_OK;
    close(fd);
    if (rc != FRAMESRV_OK) unlink(path);
    else *base = m;
    return rc;
}

/* 3.2 step 3: the control segment, initialised before anyone can see it. */
static int create_control(framesrv_producer *p, const char *tmp)
{
    p->ctl_size = p->cuda ? fs_control_size_cuda(p->slot_count) : fs_control_size(p->slot_count);
    void *base;
    int rc = fsp_create_file(tmp, p->ctl_size, &base);
    if (rc != FRAMESRV_OK) return rc;
    fs_control *c = p->ctl = base;
    c->magic = FS_MAGIC_CONTROL;
    c->version = FS_PROTOCOL_VERSION;
    c->header_size = sizeof(fs_control);
    c->slot_count = p->slot_count;
    c->max_consumers = FS_MAX_CONSUMERS;
    c->slot_ctl_size = sizeof(fs_slot_ctl);
    c->consumer_size = sizeof(fs_consumer);
    c->slot_ctl_offset = sizeof(fs_control);
    c->consumer_offset = (uint32_t)(sizeof(fs_control) + p->slot_count * sizeof(fs_slot_ctl));
    c->producer_pid = getpid();
    c->producer_start_time = p->start_time;
    c->created_ns = fsi_realtime_ns();
    c->state = FS_STREAM_RUNNING;
    c->min_free = p->slot_count;
    c->live_max_held = p->opt.live_max_held;
    c->flags = p->opt.live_source ? FS_CONTROL_LIVE_SOURCE : 0;
    c->rate_num = (uint64_t)p->opt.rate_num;
    c->rate_den = (uint64_t)p->opt.rate_den;
    c->media = p->samples ? FS_MEDIA_AUDIO : FS_MEDIA_VIDEO;
    memcpy(c->name, p->name, strlen(p->name) + 1);
    memcpy(c->producer_name, p->client_name,   /* what monitors show; NUL from the zeroed file */
           strnlen(p->client_name, sizeof c->producer_name - 1));
    p->slots = (fs_slot_ctl *)((uint8_t *)base + sizeof(fs_control));
    p->consumers = (fs_consumer *)((uint8_t *)base + c->consumer_offset);
    fsp_cuda_fill_control(p);
    return FRAMESRV_OK;
}

/* 3.2 step 4: the XPUB socket (SNDHWM 1000, LINGER 0), its file made 0600. XPUB is PUB on
 * the wire; it also tells how many subscribe, so nothing is sent to nobody (5). */
static int bind_socket(framesrv_producer *p)
{
    char sock[PATH_MAX], endpoint[PATH_MAX + 8];
    int rc = fsi_path(sock, sizeof sock, p->dir, p->name, ".sock");
    if (rc != FRAMESRV_OK) return rc;
    if (strlen(sock) > 107)
        return fsi_fail(FRAMESRV_E_INVALID, "socket path %s is longer than 107 bytes: use a shorter FRAMESRV_DIR", sock);
    snprintf(endpoint, sizeof endpoint, "ipc://%s", sock);
    p->zmq_context = zmq_ctx_new();
    if (p->zmq_context == NULL) return fsi_fail(FRAMESRV_E_ZMQ, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    p->pub = zmq_socket(p->zmq_context, ZMQ_XPUB);
    if (p->pub == NULL) return fsi_fail(FRAMESRV_E_ZMQ, "zmq_socket(XPUB): %s", zmq_strerror(zmq_errno()));
    int hwm = 1000, linger = 0;
    zmq_setsockopt(p->pub, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(p->pub, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(p->pub, endpoint) != 0)
        return fsi_fail(FRAMESRV_E_ZMQ, "bind %s: %s", endpoint, zmq_strerror(zmq_errno()));
    chmod(sock, 0600);   /* harmless if it fails: the directory is 0700 */
    return FRAMESRV_OK;
}

/* 3.2 steps 3 to 5, then the background thread. */
static int create_stream(framesrv_producer *p)
{
    char tmp[PATH_MAX], ctl[PATH_MAX], suffix[32];
    snprintf(suffix, sizeof suffix, ".ctl.tmp.%d", (int)getpid());
    int rc = fsi_path(tmp, sizeof tmp, p->dir, p->name, suffix);
    if (rc == FRAMESRV_OK) rc = fsi_path(ctl, sizeof ctl, p->dir, p->name, ".ctl");
    if (rc == FRAMESRV_OK) rc = create_control(p, tmp);
    if (rc != FRAMESRV_OK) return rc;
    rc = bind_socket(p);
    if (rc == FRAMESRV_OK) rc = fsp_cuda_start(p);   /* NAME.cuda before the rename too (4.5) */
    if (rc == FRAMESRV_OK && rename(tmp, ctl) != 0) rc = fsi_fail_errno("rename %s to %s", tmp, ctl);
    if (rc != FRAMESRV_OK) {
        unlink(tmp);
        fsp_cuda_close(p);
        return rc;
    }
    p->running = true;
    int e = pthread_create(&p->thread, NULL, fsp_watch_main, p);
    if (e != 0) {
        unlink(ctl);
        errno = e;
        return fsi_fail_errno("start the producer's thread");
    }
    p->thread_started = true;
    return FRAMESRV_OK;
}

static framesrv_producer *allocate(void)
{
    framesrv_producer *p = calloc(1, sizeof *p);
    if (p == NULL) return NULL;
    p->lock_fd = -1;
    p->next_seq = 1;
    for (uint32_t i = 0; i < FS_MAX_CONSUMERS; i++) p->watched_fd[i] = -1;
    pthread_mutex_init(&p->lock, NULL);
    return p;
}

int framesrv_producer_open(framesrv_producer **out, const char *name, const framesrv_producer_options *options)
{
    return framesrv_producer_open_as(out, name, options, NULL);
}

int framesrv_producer_open_as(framesrv_producer **out, const char *name, const framesrv_producer_options *options,
                              const char *client_name)
{
    if (out == NULL || name == NULL || options == NULL)
        return fsi_fail(FRAMESRV_E_INVALID, "framesrv_producer_open: out, name and options must not be NULL");
    *out = NULL;
    framesrv_producer_options opt = *options;
    int rc = fsi_check_name(name);
    if (rc == FRAMESRV_OK) rc = normalise_options(&opt);
    if (rc != FRAMESRV_OK) return rc;
    framesrv_producer *p = allocate();
    if (p == NULL) return fsi_fail(FRAMESRV_E_NO_MEMORY, "framesrv_producer_open: out of memory");
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->client_name, sizeof p->client_name, "%s",
             client_name && *client_name ? client_name : program_invocation_short_name);
    p->opt = opt;
    p->slot_count = opt.slots;
    p->opener = fsi_opener_pid();
    p->start_time = fsi_process_start_time(p->opener);
    rc = fsi_runtime_dir(p->dir, sizeof p->dir, true);
    if (rc == FRAMESRV_OK) rc = fsp_cuda_open(p);
    if (rc == FRAMESRV_OK)
        rc = opt.media == FRAMESRV_MEDIA_AUDIO ? fsp_audio_set_format(p) : fsp_set_format(p, opt.width, opt.height, opt.pix_fmt);
    if (rc == FRAMESRV_OK) rc = take_lock(p);
    if (rc == FRAMESRV_OK) rc = remove_leftovers(p);
    if (rc == FRAMESRV_OK) rc = create_stream(p);
    if (rc != FRAMESRV_OK) {
        fsp_free(p);
        return rc;
    }
    *out = p;
    return FRAMESRV_OK;
}
