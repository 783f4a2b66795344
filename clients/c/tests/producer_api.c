/*
 * producer_api.c: the producer's API without other processes. Bad options are
 * FRAMESRV_E_INVALID with a message, a second producer of a name is FRAMESRV_E_BUSY,
 * calls out of order are FRAMESRV_E_STATE, publish_keep holds its slot until released,
 * the pixel-format table, the canonical layout (PROTOCOL.md 4.2) and the test pattern.
 */
#include "producer_check.h"
#include "producer.h"
#include "pixfmt.h"

#include <stdbool.h>
#include <sys/wait.h>

static framesrv_producer_options valid(void)
{
    return (framesrv_producer_options){.width = 64, .height = 48, .pix_fmt = FRAMESRV_PIX_YUV420P, .slots = 2};
}

static void expect_invalid(const char *what, const char *name, framesrv_producer_options o)
{
    framesrv_producer *p = (framesrv_producer *)1;
    int rc = framesrv_producer_open(&p, name, &o);
    CHECK(rc == FRAMESRV_E_INVALID, "%s: got %s", what, framesrv_status_name(rc));
    CHECK(p == NULL, "%s: *out is NULL after a failure", what);
    CHECK(strlen(framesrv_last_error()) > 0, "%s: a message", what);
    if (rc == FRAMESRV_OK) framesrv_producer_close(p);
}

static void bad_options(void)
{
    framesrv_producer_options o = valid();
    o.width = 0;
    expect_invalid("width 0", "bad", o);
    o = valid(), o.height = 16385;
    expect_invalid("height 16385", "bad", o);
    o = valid(), o.pix_fmt = 0;
    expect_invalid("pix_fmt 0", "bad", o);
    o = valid(), o.pix_fmt = 16;
    expect_invalid("pix_fmt 16", "bad", o);
    o = valid(), o.slots = 65;
    expect_invalid("slots 65", "bad", o);
    o = valid(), o.rate_num = 30;
    expect_invalid("rate 30/0", "bad", o);
    expect_invalid("name with /", "a/b", valid());
    expect_invalid("name starting with .", ".hidden", valid());
    expect_invalid("empty name", "", valid());
    expect_invalid("name of 49 bytes", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", valid());
    CHECK_STATUS(framesrv_producer_open(NULL, "x", NULL), FRAMESRV_E_INVALID);
    framesrv_producer *p;
    CHECK_STATUS(framesrv_producer_open(&p, NULL, NULL), FRAMESRV_E_INVALID);
}

static void busy_and_state(void)
{
    framesrv_producer_options o = valid();
    framesrv_producer *p, *q = NULL;
    CHECK_STATUS(framesrv_producer_open(&p, "api", &o), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_open(&q, "api", &o), FRAMESRV_E_BUSY);
    CHECK(strstr(framesrv_last_error(), "api") != NULL, "the message names the stream: %s", framesrv_last_error());
    framesrv_frame *f = NULL, *g = NULL;
    CHECK_STATUS(framesrv_producer_publish(p, (framesrv_frame *)&o), FRAMESRV_E_STATE);
    CHECK_STATUS(framesrv_producer_publish(p, NULL), FRAMESRV_E_INVALID);
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &f), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &g), FRAMESRV_E_STATE);
    CHECK_STATUS(framesrv_producer_change_format(p, 32, 32, FRAMESRV_PIX_GRAY), FRAMESRV_E_STATE);
    framesrv_frame_info *in = framesrv_frame_info_of(f);
    CHECK(in->seq == 1 && in->pts == 0 && in->time_base_den == 1000000, "preset seq %llu pts %lld tb %d/%d",
          (unsigned long long)in->seq, (long long)in->pts, in->time_base_num, in->time_base_den);
    CHECK(in->color_matrix == 2 && in->color_primaries == 2 && in->color_transfer == 2, "unspecified colour");
    in->duration = -1;
    CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_E_INVALID);   /* a consumer would reject it */
    in->duration = 0;
    CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_abandon(p, f), FRAMESRV_E_STATE);      /* published already */
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &f), FRAMESRV_OK);
    CHECK(framesrv_frame_info_of(f)->seq == 2, "the next frame is seq 2");
    CHECK_STATUS(framesrv_producer_abandon(p, f), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &f), FRAMESRV_OK);
    CHECK(framesrv_frame_info_of(f)->seq == 2, "an abandoned frame uses no sequence number");
    framesrv_frame_release(f);   /* a reserved frame released is abandoned */
    framesrv_producer_stats st;
    CHECK_STATUS(framesrv_producer_stats_of(p, &st), FRAMESRV_OK);
    CHECK(st.published == 1 && st.abandoned == 2, "published %llu abandoned %llu",
          (unsigned long long)st.published, (unsigned long long)st.abandoned);
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &f), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_end(p, 0), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_end(p, 0), FRAMESRV_E_STATE);
    CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_E_STATE);   /* after the end: stays reserved */
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &g), FRAMESRV_E_STATE);
    CHECK(p->ctl->end_seq == 1 && p->ctl->state == FS_STREAM_ENDED, "end_seq %llu", (unsigned long long)p->ctl->end_seq);
    framesrv_producer_close(p);   /* abandons the reserved frame */
    CHECK_STATUS(framesrv_producer_open(&q, "api", &o), FRAMESRV_OK);   /* the name is free again */
    framesrv_producer_close(q);
    framesrv_producer_close(NULL);
}

/* publish_keep: the slot is not reused until the frame is released, even after close. */
static void keep(void)
{
    framesrv_producer_options o = valid();
    framesrv_producer *p;
    CHECK_STATUS(framesrv_producer_open(&p, "keep", &o), FRAMESRV_OK);
    framesrv_frame *a, *b, *c;
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &a), FRAMESRV_OK);
    framesrv_pattern_fill(a);
    CHECK_STATUS(framesrv_producer_publish_keep(p, a), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &b), FRAMESRV_OK);
    framesrv_pattern_fill(b);
    CHECK_STATUS(framesrv_producer_publish_keep(p, b), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_reserve(p, 50, &c), FRAMESRV_TIMEOUT);   /* both slots held */
    CHECK(framesrv_pattern_check(a) == 0 && framesrv_frame_info_of(a)->seq == 1, "a kept frame stays intact");
    uint32_t slot_a = a->slot;
    framesrv_frame_release(a);
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &c), FRAMESRV_OK);
    CHECK(c->slot == slot_a, "the released slot is free again");
    CHECK_STATUS(framesrv_producer_publish(p, c), FRAMESRV_OK);
    framesrv_producer_close(p);
    CHECK(framesrv_pattern_check(b) == 0, "a kept frame outlives close");
    framesrv_frame_release(b);   /* frees the producer */
}

/* A live source's drops (no free slot) go into the next frame's header: source_dropped
 * and FRAMESRV_FRAME_DISCONTINUITY (PROTOCOL.md 4.2). */
static void source_drops(void)
{
    framesrv_producer_options o = valid();
    o.live_source = 1;
    framesrv_producer *p;
    CHECK_STATUS(framesrv_producer_open(&p, "drops", &o), FRAMESRV_OK);
    framesrv_frame *a, *b, *c;
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &a), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_publish_keep(p, a), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &b), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_publish_keep(p, b), FRAMESRV_OK);
    for (int i = 0; i < 3; i++) CHECK_STATUS(framesrv_producer_reserve(p, 0, &c), FRAMESRV_TIMEOUT);
    framesrv_frame_release(a);
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &c), FRAMESRV_OK);
    uint32_t slot = c->slot;
    CHECK_STATUS(framesrv_producer_publish(p, c), FRAMESRV_OK);
    const fs_frame *h = (const fs_frame *)(p->pool->base + (size_t)slot * p->pool->slot_stride);
    CHECK(h->seq == 3 && h->source_dropped == 3 && (h->flags & FS_FRAME_DISCONTINUITY),
          "seq %llu source_dropped %u flags %u", (unsigned long long)h->seq, h->source_dropped, h->flags);
    CHECK(framesrv_frame_info_of(b)->seq == 2, "the kept frame is intact");
    framesrv_frame_release(b);
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &c), FRAMESRV_OK);
    slot = c->slot;
    CHECK_STATUS(framesrv_producer_publish(p, c), FRAMESRV_OK);
    h = (const fs_frame *)(p->pool->base + (size_t)slot * p->pool->slot_stride);
    CHECK(h->source_dropped == 0 && !(h->flags & FS_FRAME_DISCONTINUITY), "no drop before frame %llu",
          (unsigned long long)h->seq);
    framesrv_producer_close(p);
}

static bool pool_exists(const char *name, int epoch)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s.pool.%d", check_dir, name, epoch);
    return access(path, F_OK) == 0;
}

static void publish_one(framesrv_producer *p)
{
    framesrv_frame *f;
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &f), FRAMESRV_OK);
    if (f) CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_OK);
}

/* PROTOCOL.md 13: a pool whose slots still hold frames consumers have stays until those
 * slots are taken again; a pool nobody holds goes at once. (A consumer's hold is
 * simulated by setting its bit in the slot's holders word.) */
static void epochs(void)
{
    framesrv_producer_options o = valid();
    framesrv_producer *p;
    CHECK_STATUS(framesrv_producer_open(&p, "epochs", &o), FRAMESRV_OK);
    CHECK(!pool_exists("epochs", 1), "no pool before the first reserve");
    publish_one(p);
    CHECK(pool_exists("epochs", 1) && p->ctl->epoch == 1, "epoch 1");
    uint32_t held = (uint32_t)(p->ctl->latest & 0xFF);
    __atomic_fetch_or(&p->slots[held].holders, 1ull << 5, __ATOMIC_SEQ_CST);
    CHECK_STATUS(framesrv_producer_change_format(p, 640, 480, FRAMESRV_PIX_YUV444P), FRAMESRV_OK);
    CHECK(p->ctl->epoch == 2 && p->ctl->latest == 0, "epoch 2, latest cleared");
    CHECK(pool_exists("epochs", 1) && pool_exists("epochs", 2), "pool 1 stays while slot %u is held", held);
    CHECK(p->slots[held].seq == 1 && p->slots[held].epoch == 1, "the held slot keeps its frame");
    publish_one(p);   /* takes the other slot */
    CHECK(pool_exists("epochs", 1), "pool 1 still held");
    __atomic_fetch_and(&p->slots[held].holders, ~(1ull << 5), __ATOMIC_SEQ_CST);
    publish_one(p);   /* takes the released slot for epoch 2 */
    CHECK(!pool_exists("epochs", 1), "pool 1 removed once its last slot is reused");
    CHECK_STATUS(framesrv_producer_change_format(p, 64, 48, FRAMESRV_PIX_GRAY), FRAMESRV_OK);
    CHECK(p->ctl->epoch == 2, "a smaller format reuses the pool");
    CHECK_STATUS(framesrv_producer_change_format(p, 2000, 2000, FRAMESRV_PIX_GRAY), FRAMESRV_OK);
    CHECK(p->ctl->epoch == 3 && !pool_exists("epochs", 2) && pool_exists("epochs", 3), "nobody held pool 2: removed");
    publish_one(p);
    framesrv_producer_close(p);
    CHECK(!pool_exists("epochs", 3), "close removes the pool nobody holds");
}

/* Polls (bounded) until entry i's pid is `want`; the watcher acts on a bump of attach_seq. */
static bool entry_pid_becomes(framesrv_producer *p, uint32_t i, pid_t want)
{
    fs_bump(&p->ctl->attach_seq);
    fsi_futex_wake(&p->ctl->attach_seq);
    for (int k = 0; k < 1000 && fs_load_i32(&p->consumers[i].pid) != want; k++) usleep(10000);
    return fs_load_i32(&p->consumers[i].pid) == want;
}

static bool first_seq_set(framesrv_producer *p, uint32_t i)
{
    for (int k = 0; k < 1000 && fs_load_u64(&p->consumers[i].first_seq) == 0; k++) usleep(10000);
    return fs_load_u64(&p->consumers[i].first_seq) != 0;
}

/* The background thread (PROTOCOL.md 12.1, 12.4): admission of a lossless entry, a detach
 * (CLOSING, not counted), and a consumer that died half-registered (counted). Entries are
 * written by hand, as a consumer would. */
static void watcher(void)
{
    framesrv_producer_options o = valid();
    framesrv_producer *p;
    CHECK_STATUS(framesrv_producer_open(&p, "watch", &o), FRAMESRV_OK);
    publish_one(p);
    fs_consumer *e = &p->consumers[3];
    CHECK(fs_consumer_claim(e, getpid()), "claim entry 3");
    fs_store_u32(&e->state, FS_CONSUMER_CLAIMED);
    e->start_time = fsi_process_start_time(getpid());
    e->mode = FS_MODE_LOSSLESS;
    fs_store_u32(&e->state, FS_CONSUMER_ACTIVE);
    fs_bump(&p->ctl->attach_seq);
    fsi_futex_wake(&p->ctl->attach_seq);
    CHECK(first_seq_set(p, 3) && e->first_seq == 2, "admitted from the next frame: first_seq %llu",
          (unsigned long long)e->first_seq);
    CHECK(fs_load_u64(&p->ctl->lossless_mask) == 1u << 3, "lossless_mask");
    publish_one(p);
    uint32_t slot = (uint32_t)(p->ctl->latest & 0xFF);
    CHECK(p->slots[slot].holders == 1u << 3, "frame 2 reserved for entry 3");
    fs_store_u32(&e->state, FS_CONSUMER_CLOSING);
    CHECK(entry_pid_becomes(p, 3, 0), "a CLOSING entry is freed");
    CHECK(p->slots[slot].holders == 0 && p->ctl->lossless_mask == 0 && p->ctl->reclaimed == 0,
          "its reservations are cleared; a detach is not counted");
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    CHECK(fs_consumer_claim(&p->consumers[7], dead), "claim entry 7 for a dead pid");
    fs_store_u32(&p->consumers[7].state, FS_CONSUMER_CLAIMED);
    CHECK(entry_pid_becomes(p, 7, 0), "a half-registered entry of a dead process is freed");
    framesrv_producer_stats st;
    framesrv_producer_stats_of(p, &st);
    CHECK(st.reclaimed == 1 && p->ctl->reclaimed == 1 && st.consumers == 0, "one death counted: %llu",
          (unsigned long long)st.reclaimed);
    framesrv_producer_close(p);
}

static void formats(void)
{
    for (int code = 1; code <= 15; code++) {
        const char *name = framesrv_pix_fmt_name(code);
        CHECK(name && framesrv_pix_fmt_from_name(name) == code, "code %d round-trips", code);
    }
    CHECK(framesrv_pix_fmt_name(0) == NULL && framesrv_pix_fmt_name(16) == NULL, "unknown codes");
    CHECK(framesrv_pix_fmt_from_name("yuv411p") == 0 && framesrv_pix_fmt_from_name(NULL) == 0, "unknown names");
    fsi_layout l;   /* PROTOCOL.md 4.2's example */
    CHECK_STATUS(fsi_canonical_layout(fsi_pix_format_of(FRAMESRV_PIX_YUV420P), 100, 50, &l), FRAMESRV_OK);
    CHECK(l.stride[0] == 128 && l.offset[0] == 256 && l.size[0] == 6400 && l.stride[1] == 64 && l.offset[1] == 6656 &&
          l.size[1] == 1600 && l.offset[2] == 8256 && l.slot_bytes == 9856, "yuv420p 100x50 layout");
    CHECK_STATUS(fsi_canonical_layout(fsi_pix_format_of(FRAMESRV_PIX_RGB24), 16385, 1, &l), FRAMESRV_E_INVALID);
    CHECK_STATUS(fsi_canonical_layout(fsi_pix_format_of(FRAMESRV_PIX_RGB24), 1, 0, &l), FRAMESRV_E_INVALID);
    CHECK_STATUS(fsi_canonical_layout(NULL, 1, 1, &l), FRAMESRV_E_INVALID);
    /* The largest frame of the widest format still fits the header's 32-bit offsets. */
    CHECK_STATUS(fsi_canonical_layout(fsi_pix_format_of(FRAMESRV_PIX_YUV444P10LE), 16384, 16384, &l), FRAMESRV_OK);
    CHECK(l.slot_bytes == 256 + 3ull * 32768 * 16384, "yuv444p10le 16384x16384: %llu bytes", (unsigned long long)l.slot_bytes);
}

static void pattern(void)
{
    uint8_t bytes[2 * 300 + 64] = {0};
    framesrv_frame f = {.info = {.seq = 7, .plane_count = 1}};
    f.info.planes[0] = (framesrv_plane){.data = bytes, .stride = 320, .row_bytes = 300, .height = 2};
    framesrv_pattern_fill(&f);
    CHECK(bytes[0] == 21 && bytes[299] == (uint8_t)(299 + 21) && bytes[320] == 23, "pattern bytes");
    CHECK(bytes[300] == 0, "padding untouched");
    CHECK(framesrv_pattern_check(&f) == 0, "a filled frame checks");
    bytes[330] ^= 1;
    bytes[5] ^= 1;
    CHECK(framesrv_pattern_check(&f) == 2, "two bad bytes counted");
}

int main(void)
{
    check_runtime_dir();
    bad_options();
    busy_and_state();
    keep();
    source_drops();
    epochs();
    watcher();
    formats();
    pattern();
    return check_exit("producer_api");
}
