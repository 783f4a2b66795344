/*
 * test_files.c: the consumer against stream files written by hand: a control segment that
 * is garbage, truncated, empty, a FIFO, a symlink, has a bad field or a dead producer; and
 * a stream whose "producer" is this test itself (its pid in the control segment), with a
 * frame header whose plane lies outside its slot, a good frame, the live hold limit, a
 * lossless admission, the end and the detach.
 */
#include "check.h"
#include "common.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define SLOTS 2u
#define STRIDE 4096u

static char dir[64];

static void path_of(char *out, size_t size, const char *name, const char *suffix)
{
    snprintf(out, size, "%s/%s%s", dir, name, suffix);
}

/* A file of `size` bytes mapped read-write (zeroed), or NULL. */
static void *create_mapped(const char *path, size_t size)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) return NULL;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

/* A valid control segment of SLOTS slots for producer (pid, start). */
static fs_control *make_control(const char *name, int32_t pid, uint64_t start)
{
    char path[128];
    path_of(path, sizeof path, name, ".ctl");
    fs_control *c = create_mapped(path, fs_control_size(SLOTS));
    if (!c) return NULL;
    *c = (fs_control){ .magic = FS_MAGIC_CONTROL, .version = FS_PROTOCOL_VERSION, .header_size = sizeof(fs_control),
                       .slot_count = SLOTS, .max_consumers = FS_MAX_CONSUMERS, .slot_ctl_size = sizeof(fs_slot_ctl),
                       .consumer_size = sizeof(fs_consumer), .slot_ctl_offset = sizeof(fs_control),
                       .consumer_offset = sizeof(fs_control) + SLOTS * sizeof(fs_slot_ctl), .producer_pid = pid,
                       .producer_start_time = start, .state = FS_STREAM_RUNNING, .live_max_held = 1, .rate_num = 30, .rate_den = 1 };
    snprintf(c->name, sizeof c->name, "%s", name);
    return c;
}

static int open_consumer(const char *name, framesrv_mode mode, framesrv_consumer **c)
{
    framesrv_consumer_options o = { .mode = mode, .attach_timeout_ms = 0, .client_name = "test_files" };
    *c = NULL;
    return framesrv_consumer_open(c, name, &o);
}

static void expect_bad_control(const char *name, const char *message)
{
    framesrv_consumer *c;
    CHECK_STATUS(open_consumer(name, FRAMESRV_LOSSLESS, &c), FRAMESRV_E_BAD_DATA);
    CHECK(strstr(framesrv_last_error(), message) && strstr(framesrv_last_error(), name), "%s: message '%s' lacks '%s'", name,
          framesrv_last_error(), message);
    framesrv_consumer_close(c);
}

static void bad_control_files(void)
{
    char path[128], target[128];
    path_of(path, sizeof path, "garbage", ".ctl");
    uint8_t *g = create_mapped(path, 4096);
    for (int i = 0; g && i < 4096; i++) g[i] = (uint8_t)(i * 37 + 11);
    expect_bad_control("garbage", "not a framesrv control segment");
    fs_control *t = make_control("truncated", getpid(), 1);
    path_of(path, sizeof path, "truncated", ".ctl");
    CHECK(t && truncate(path, 600) == 0, "truncate");
    expect_bad_control("truncated", "it has 600 bytes");
    path_of(path, sizeof path, "empty", ".ctl");
    create_mapped(path, 0);
    expect_bad_control("empty", "is empty");
    path_of(path, sizeof path, "fifo", ".ctl");
    CHECK(mkfifo(path, 0600) == 0, "mkfifo");
    expect_bad_control("fifo", "not a regular file");
    make_control("real", getpid(), fsi_process_start_time(getpid()));
    path_of(path, sizeof path, "link", ".ctl");
    path_of(target, sizeof target, "real", ".ctl");
    CHECK(symlink(target, path) == 0, "symlink");
    expect_bad_control("link", "symbolic link");
    fs_control *s = make_control("slots", getpid(), fsi_process_start_time(getpid()));
    if (s) s->slot_count = 65;
    expect_bad_control("slots", "slot_count is 65");
    fs_control *o = make_control("offset", getpid(), fsi_process_start_time(getpid()));
    if (o) o->consumer_offset = 12;
    expect_bad_control("offset", "consumer_offset is 12");
    fs_control *m = make_control("media", getpid(), fsi_process_start_time(getpid()));
    if (m) m->media = 7;
    expect_bad_control("media", "media is 7");
    /* An audio stream (PROTOCOL.md 4.6): refused at open in one line, no entry taken. */
    fs_control *a = make_control("sound", getpid(), fsi_process_start_time(getpid()));
    if (a) a->media = FS_MEDIA_AUDIO;
    framesrv_consumer *c;
    CHECK_STATUS(open_consumer("sound", FRAMESRV_LOSSLESS, &c), FRAMESRV_E_MEDIA);
    CHECK(strstr(framesrv_last_error(), "stream 'sound' carries audio") && !strchr(framesrv_last_error(), '\n'), "%s",
          framesrv_last_error());
    for (uint32_t i = 0; a && i < FS_MAX_CONSUMERS; i++)
        CHECK(((fs_consumer *)((uint8_t *)a + a->consumer_offset))[i].pid == 0, "entry %u taken by a refused consumer", i);
    framesrv_consumer_close(c);
}

static void dead_producer(void)
{
    make_control("leftover", getpid(), 12345);   /* our pid, another start time: a reused pid */
    framesrv_consumer *c;
    CHECK_STATUS(open_consumer("leftover", FRAMESRV_LOSSLESS, &c), FRAMESRV_E_NOT_FOUND);
    CHECK(strstr(framesrv_last_error(), "leftover") != NULL, "message: %s", framesrv_last_error());
}

/* A version 1 control segment: only the identity prefix is read (16). Every other byte is
 * garbage, so reading past it would fail differently. */
static fs_control *make_v1_control(const char *name, int32_t pid, uint64_t start)
{
    char path[128];
    path_of(path, sizeof path, name, ".ctl");
    uint8_t *b = create_mapped(path, fs_control_size(SLOTS));
    if (!b) return NULL;
    memset(b, 0xEE, fs_control_size(SLOTS));
    fs_control *c = (fs_control *)b;
    c->magic = FS_MAGIC_CONTROL;
    c->version = 1;
    c->producer_pid = pid;
    c->producer_start_time = start;
    return c;
}

static void other_version(void)
{
    make_v1_control("v1live", getpid(), fsi_process_start_time(getpid()));   /* its producer: this test, alive */
    framesrv_consumer *c;
    CHECK_STATUS(open_consumer("v1live", FRAMESRV_LOSSLESS, &c), FRAMESRV_E_VERSION);
    const char *e = framesrv_last_error();
    CHECK(strstr(e, "v1live.ctl speaks framesrv protocol version 1, but this program speaks version 5") && !strchr(e, '\n'),
          "one line naming both versions: %s", e);
    make_v1_control("v1dead", getpid(), 12345);   /* a dead producer's leftover: waited past */
    CHECK_STATUS(open_consumer("v1dead", FRAMESRV_LOSSLESS, &c), FRAMESRV_E_NOT_FOUND);
    fs_control *r = make_control("badrate", getpid(), fsi_process_start_time(getpid()));
    if (r) r->rate_den = 0;   /* 30/0 */
    expect_bad_control("badrate", "rate_num/rate_den is 30/0");
}

/* ---- a stream this test "produces" by hand ----------------------------------------------- */

typedef struct stream {
    fs_control *ctl;
    uint8_t *pool;
} stream;

static fs_slot_ctl *slot_of(stream *s, uint32_t i) { return (fs_slot_ctl *)((uint8_t *)s->ctl + sizeof(fs_control)) + i; }
static fs_consumer *entry_of(stream *s, uint32_t i) { return (fs_consumer *)((uint8_t *)s->ctl + sizeof(fs_control) + SLOTS * sizeof(fs_slot_ctl)) + i; }

/* Writes a gray 16x16 frame `seq` into slot i, with the test pattern. */
static fs_frame *write_frame(stream *s, uint32_t i, uint64_t seq)
{
    uint8_t *base = s->pool + (size_t)i * STRIDE;
    fs_frame *h = (fs_frame *)base;
    *h = (fs_frame){ .magic = FS_MAGIC_FRAME, .version = FS_PROTOCOL_VERSION, .seq = seq, .epoch = 1, .width = 16, .height = 16,
                     .pix_fmt = FS_PIX_GRAY8, .plane_count = 1, .plane_offset = { 256 }, .plane_stride = { 64 },
                     .plane_size = { 64 * 16 }, .color_matrix = 2, .pts = (int64_t)seq - 1, .time_base_num = 1, .time_base_den = 30,
                     .duration = 1 };
    snprintf(h->pix_fmt_name, sizeof h->pix_fmt_name, "gray");
    for (int y = 0; y < 16; y++)
        for (int x = 0; x < 16; x++) base[256 + y * 64 + x] = (uint8_t)(x + 2 * y + 3 * seq);
    fs_slot_ctl *sc = slot_of(s, i);
    sc->seq = seq;
    sc->epoch = 1;
    return h;
}

static bool make_stream(const char *name, stream *s)
{
    char path[128];
    s->ctl = make_control(name, getpid(), fsi_process_start_time(getpid()));
    path_of(path, sizeof path, name, ".pool.1");
    s->pool = create_mapped(path, SLOTS * STRIDE);
    if (!s->ctl || !s->pool) return false;
    s->ctl->slot_stride = STRIDE;
    s->ctl->pool_size = SLOTS * STRIDE;
    s->ctl->epoch = 1;
    return true;
}

static void live_bad_then_good(stream *s)
{
    framesrv_consumer *c;
    CHECK_STATUS(open_consumer("hand", FRAMESRV_LIVE, &c), FRAMESRV_OK);
    if (!c) return;
    framesrv_stream_info info;
    CHECK_STATUS(framesrv_consumer_stream_info(c, &info), FRAMESRV_OK);
    CHECK(info.slot_count == SLOTS && info.rate_num == 30 && info.rate_den == 1 && info.producer_pid == getpid(), "info %u %lld/%lld",
          info.slot_count, (long long)info.rate_num, (long long)info.rate_den);
    framesrv_frame *f;
    write_frame(s, 0, 1)->plane_size[0] = STRIDE;   /* 256 + 4096 > the slot's 4096 bytes */
    s->ctl->latest = 1 << 8 | 0;
    CHECK_STATUS(framesrv_consumer_next(c, 0, &f), FRAMESRV_TIMEOUT);
    framesrv_consumer_stats st;
    framesrv_consumer_stats_of(c, &st);
    CHECK(st.bad_frames == 1 && st.held == 0, "bad %llu held %llu", (unsigned long long)st.bad_frames, (unsigned long long)st.held);
    CHECK(strstr(framesrv_last_error(), "plane_size[0]") && strstr(framesrv_last_error(), "hand.pool.1"), "message: %s",
          framesrv_last_error());
    CHECK(slot_of(s, 0)->holders == 0, "the bad frame's slot was released");
    write_frame(s, 1, 2);
    s->ctl->latest = 2 << 8 | 1;
    CHECK_STATUS(framesrv_consumer_next(c, 0, &f), FRAMESRV_OK);
    const framesrv_frame_info *fi = framesrv_frame_info_of(f);
    CHECK(fi && fi->seq == 2 && fi->width == 16 && fi->pix_fmt == FRAMESRV_PIX_GRAY && fi->planes[0].stride == 64 &&
          fi->planes[0].row_bytes == 16 && fi->time_base_den == 30, "info of frame 2");
    CHECK(framesrv_pattern_check(f) == 0, "frame 2 carries its pattern");
    s->ctl->latest = 3 << 8 | 0;
    framesrv_frame *g;
    CHECK_STATUS(framesrv_consumer_next(c, 0, &g), FRAMESRV_E_STATE);   /* live_max_held 1 */
    framesrv_frame_release(f);
    CHECK(slot_of(s, 1)->holders == 0, "released");
    s->ctl->latest = 9 << 8 | 7;   /* slot 7 of 2 */
    CHECK_STATUS(framesrv_consumer_next(c, 0, &g), FRAMESRV_E_BAD_DATA);
    framesrv_consumer_close(c);
}

/* A consumer of the hand-written stream (no frame announced yet) and its ACTIVE entry. */
static framesrv_consumer *open_on(stream *s, const char *name, framesrv_mode mode, uint32_t *entry)
{
    framesrv_consumer *c;
    s->ctl->latest = 0;
    CHECK_STATUS(open_consumer(name, mode, &c), FRAMESRV_OK);
    uint32_t i = 0;
    while (i < FS_MAX_CONSUMERS && !(entry_of(s, i)->pid == getpid() && entry_of(s, i)->state == FS_CONSUMER_ACTIVE)) i++;
    CHECK(i < FS_MAX_CONSUMERS, "an active entry of ours");
    if (c && i < FS_MAX_CONSUMERS) {
        *entry = i;
        return c;
    }
    framesrv_consumer_close(c);
    return NULL;
}

static void lossless_admission_end(stream *s)
{
    uint32_t i;
    framesrv_consumer *c = open_on(s, "hand", FRAMESRV_LOSSLESS, &i);
    if (!c) return;
    CHECK(entry_of(s, i)->mode == FS_MODE_LOSSLESS, "a lossless entry");
    framesrv_frame *f;
    CHECK_STATUS(framesrv_consumer_next(c, 0, &f), FRAMESRV_TIMEOUT);   /* not admitted yet */
    fs_store_u64(&entry_of(s, i)->first_seq, 3);
    write_frame(s, 0, 3)->plane_offset[0] = 100;    /* inside the header */
    fs_store_u64(&slot_of(s, 0)->holders, 1ull << i);
    write_frame(s, 1, 4);
    fs_store_u64(&slot_of(s, 1)->holders, 1ull << i);
    s->ctl->latest = 4 << 8 | 1;
    CHECK_STATUS(framesrv_consumer_next(c, 0, &f), FRAMESRV_OK);
    CHECK(f && framesrv_frame_info_of(f)->seq == 4 && framesrv_pattern_check(f) == 0, "frame 4 after the bad frame 3");
    CHECK(strstr(framesrv_last_error(), "plane_offset[0] is 100") != NULL, "message: %s", framesrv_last_error());
    CHECK(slot_of(s, 0)->holders == 0, "bad frame 3 released");
    s->ctl->end_seq = 4;
    fs_store_u32(&s->ctl->state, FS_STREAM_ENDED);
    framesrv_frame *g;
    CHECK_STATUS(framesrv_consumer_next(c, 0, &g), FRAMESRV_END);
    CHECK_STATUS(framesrv_consumer_next(c, 0, &g), FRAMESRV_END);
    framesrv_consumer_close(c);   /* releases frame 4, then CLOSING */
    CHECK(slot_of(s, 1)->holders == 0, "close released frame 4");
    CHECK(entry_of(s, i)->state == FS_CONSUMER_CLOSING, "entry %u CLOSING after close (state %u)", i, entry_of(s, i)->state);
}

/* The producer freed our entry (a stall-timeout detach) and another process claimed its
 * index: next says DETACHED, and neither the release of a held frame nor close touches
 * the new owner's bit or entry. */
static void evicted(stream *s)
{
    uint32_t i;
    framesrv_consumer *c = open_on(s, "hand2", FRAMESRV_LIVE, &i);
    if (!c) return;
    framesrv_frame *f, *g;
    write_frame(s, 0, 1);
    s->ctl->latest = 1 << 8 | 0;
    CHECK_STATUS(framesrv_consumer_next(c, 0, &f), FRAMESRV_OK);
    fs_store_i32(&entry_of(s, i)->pid, 99999);   /* freed, then claimed by pid 99999 */
    fs_store_u32(&entry_of(s, i)->state, FS_CONSUMER_ACTIVE);
    CHECK_STATUS(framesrv_consumer_next(c, 0, &g), FRAMESRV_E_DETACHED);
    CHECK_STATUS(framesrv_consumer_next(c, 0, &g), FRAMESRV_E_DETACHED);
    framesrv_frame_release(f);
    CHECK(slot_of(s, 0)->holders == 1ull << i, "the new owner's bit stays (holders 0x%llx)", (unsigned long long)slot_of(s, 0)->holders);
    framesrv_consumer_close(c);
    CHECK(entry_of(s, i)->state == FS_CONSUMER_ACTIVE, "the new owner's entry stays ACTIVE");
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", check_runtime_dir());
    bad_control_files();
    dead_producer();
    other_version();
    stream s;
    CHECK(make_stream("hand", &s), "make the hand-written stream");
    if (s.ctl && s.pool) {
        live_bad_then_good(&s);
        lossless_admission_end(&s);
    }
    stream s2;
    CHECK(make_stream("hand2", &s2), "make the second hand-written stream");
    if (s2.ctl && s2.pool) evicted(&s2);
    return check_exit("test_files");
}
