/*
 * consumer_next.c: receiving frames (PROTOCOL.md 9 lossless, 10 live, 11 waiting on
 * frame_wake, 12.6 demotion, 13 epochs, 14 the end, 15.3 a dead producer) and releasing
 * them (9.3; from any thread, see consumer.h).
 */
#include "consumer.h"
#include "pixfmt.h"
#include "validate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zmq.h>

static void release_consumed(framesrv_frame *f);

/* What one look at shared memory found (besides FRAMESRV_OK: a frame, and errors < 0). */
/* Apart from the public statuses (FRAMESRV_TIMEOUT is 1): never returned to the caller. */
enum { LOOK_NOTHING = 101, LOOK_ENDED = 102, LOOK_BAD_FRAME = 103 };

static bool stream_ended(const fsi_attachment *a) { return fs_load_u32(&a->ctl->state) == FS_STREAM_ENDED; }

/* SYNC: fs_slot_release clears our bit with release ordering (pairs with the producer's
 * reserve) and says whether the producer sleeps on `wake`. */
static void release_slot(fsi_attachment *a, uint32_t slot)
{
    if (__atomic_load_n(&a->evicted, __ATOMIC_ACQUIRE)) return;
    if (fs_slot_release(a->ctl, fsi_att_slot(a, slot), a->bit)) fsi_futex_wake(&a->ctl->wake);
}

/* ---- delivering a held slot ------------------------------------------------------------- */

/* The frame's info from the validated header copy. */
static void fill_info(framesrv_frame_info *info, const fs_frame *h, uint8_t *slot_base, uint64_t publish_ns)
{
    info->seq = h->seq;
    info->epoch = h->epoch;
    info->width = h->width;
    info->height = h->height;
    memcpy(info->pix_fmt_name, h->pix_fmt_name, sizeof h->pix_fmt_name);
    info->pix_fmt_name[sizeof info->pix_fmt_name - 1] = '\0';
    info->pix_fmt = h->pix_fmt != FS_PIX_OTHER ? (int)h->pix_fmt : framesrv_pix_fmt_from_name(info->pix_fmt_name);
    if (!info->pix_fmt_name[0] && info->pix_fmt) snprintf(info->pix_fmt_name, sizeof info->pix_fmt_name, "%s", framesrv_pix_fmt_name(info->pix_fmt));
    info->media = h->media == FS_MEDIA_AUDIO ? FRAMESRV_MEDIA_AUDIO : FRAMESRV_MEDIA_VIDEO;
    if (info->media == FRAMESRV_MEDIA_AUDIO) fsi_describe_samples(info, h, slot_base);   /* 4.6: rows of samples */
    else fsi_describe_planes(info, h, slot_base);
    info->color_matrix = h->color_matrix;
    info->color_range = h->color_range;
    info->color_primaries = h->color_primaries;
    info->color_transfer = h->color_transfer;
    info->sar_num = h->sar_num;
    info->sar_den = h->sar_den;
    info->pts = h->pts;
    info->time_base_num = h->time_base_num;
    info->time_base_den = h->time_base_den;
    info->duration = h->duration;
    info->capture_ns = h->capture_ns;
    info->flags = h->flags;
    info->field_order = h->field_order;
    info->chroma_location = h->chroma_location;
    info->publish_ns = publish_ns;
    info->source_dropped = h->source_dropped;
}

/* The entry's statistics for ls/top (relaxed; under c->lock, so they have one writer at a time). */
static void record_delivery(fsi_attachment *a, uint64_t seq, uint64_t capture_ns, uint32_t source_dropped)
{
    fs_consumer *e = a->entry;
    uint64_t now = fsi_monotonic_ns(), latency = now > capture_ns ? now - capture_ns : 0, us = latency / 1000;
    fs_count(&e->latency_hist[fs_latency_bucket(us)], 1);
    fs_count(&e->latency_sum_ns, latency);
    fs_count(&e->delivered, 1);
    if (source_dropped) fs_count(&e->source_dropped, source_dropped);
    fs_stat_set(&e->last_seq, seq);
    fs_stat_set(&e->held, a->held);
    if (a->last_capture_ns && capture_ns > a->last_capture_ns) {   /* the pace, for the busy-poll window */
        uint64_t interval = capture_ns - a->last_capture_ns;
        a->capture_interval_ns = a->capture_interval_ns ? (a->capture_interval_ns * 7 + interval) / 8 : interval;
    }
    a->last_capture_ns = capture_ns;
    if (a->held == 1) fs_stat_set(&e->hold_since_ns, now);
}

/* fsi_validate_frame (or _device_frame) of a delivered header. The pool's path, which only its
 * error line names, is made only for a bad frame: validation is pure, so a second pass with the
 * path says the same (the per-frame path makes no string). */
static int validate_frame(const framesrv_consumer *c, const fsi_pool *pool, const fs_frame *h, uint64_t seq, uint32_t slot)
{
    char path[PATH_MAX + 64], suffix[40];
    path[0] = '\0';
    for (int pass = 0;; pass++) {
        int status = pool->device ? fsi_validate_device_frame(h, seq, pool->device->slot_stride, path, slot)
                                  : fsi_validate_frame(h, seq, pool->slot_stride, c->media == FRAMESRV_MEDIA_AUDIO ? FS_MEDIA_AUDIO : FS_MEDIA_VIDEO,
                                                       path, slot);
        if (status == FRAMESRV_OK || pass == 1) return status;
        snprintf(suffix, sizeof suffix, ".pool.%llu", (unsigned long long)pool->epoch);
        fsi_path(path, sizeof path, c->dir, c->stream, suffix);
    }
}

/* Hands out slot `slot`, which holds frame `seq` for us. A frame that cannot be delivered
 * is released first: LOOK_BAD_FRAME for a header that fails validation (counted, skipped),
 * an error for a pool that cannot be mapped. */
static int deliver(framesrv_consumer *c, fsi_attachment *a, uint32_t slot, uint64_t seq, framesrv_frame **out)
{
    a->last_delivered = seq;   /* a frame refused below is skipped, not retried */
    fs_slot_ctl *s = fsi_att_slot(a, slot);
    fsi_pool *pool;
    int status = fsi_pool_of(c, a, fs_peek_u64(&s->epoch), &pool);
    if (status != FRAMESRV_OK) {
        release_slot(a, slot);
        /* A live consumer late to an ended stream: its producer removed the pool once no
         * slot was held (14), so this frame is nobody's any more. */
        return status == FRAMESRV_E_NOT_FOUND && stream_ended(a) && a->mode == FS_MODE_LIVE ? LOOK_ENDED : status;
    }
    uint8_t *base = pool->base + (size_t)slot * pool->slot_stride;
    fs_frame h;   /* one copy: what is validated is what the frame reports and reads through */
    memcpy(&h, base, sizeof h);
    framesrv_frame *f = NULL;
    if ((status = validate_frame(c, pool, &h, seq, slot)) != FRAMESRV_OK)
        status = LOOK_BAD_FRAME;
    else if (!(f = calloc(1, sizeof *f))) status = fsi_fail(FRAMESRV_E_NO_MEMORY, "out of memory delivering frame %llu", (unsigned long long)seq);
    if (status != FRAMESRV_OK) {
        release_slot(a, slot);
        fsi_pool_unref(pool);
        if (status == LOOK_BAD_FRAME) {
            pthread_mutex_lock(&c->lock);
            c->stats.bad_frames++;
            pthread_mutex_unlock(&c->lock);
        }
        return status;
    }
    /* A CUDA frame: no host bytes, the planes at their device offsets; we read it from now on
     * (4.5: the producer's next writer waits for our release fence). */
    fill_info(&f->info, &h, pool->device ? NULL : base, fs_peek_u64(&s->publish_ns));
    for (uint32_t i = 0; pool->device && i < h.plane_count; i++) f->device_offset[i] = h.plane_offset[i];
    if (pool->device) fs_slot_add_reader(s, a->bit);
    if (pool->device) f->wait_on = fsi_consumer_cuda_wait_on;
    f->info.epoch = pool->epoch;   /* the pool it was read from (the slot's epoch) */
    f->release = release_consumed;
    f->slot = slot;
    f->pool = pool;
    f->consumer = c;
    f->attachment = a;
    pthread_mutex_lock(&c->lock);
    f->next_held = c->held;
    c->held = f;
    a->held++;
    c->stats.held++;
    c->stats.delivered++;
    record_delivery(a, seq, h.capture_ns, h.source_dropped);
    pthread_mutex_unlock(&c->lock);
    *out = f;
    return FRAMESRV_OK;
}

/* framesrv_frame_release of a consumed frame (frame.h). Any thread, concurrently with next:
 * the slot goes back in shared memory at once (that alone is what the producer waits for),
 * the bookkeeping under c->lock. */
static void release_consumed(framesrv_frame *f)
{
    framesrv_consumer *c = f->consumer;
    if (fsi_forked(c->opener)) return;   /* the parent's frame: close frees the child's copy */
    fsi_attachment *a = f->attachment;   /* alive until its held count reaches 0 below */
    /* All reads of the frame are done: the release-ordered clear publishes that (9.3). A CUDA
     * frame says so in its release fence first (release_on queued it on a stream). */
    if (f->pool->device && !f->fence_queued) fsi_consumer_cuda_released(f);
    release_slot(a, f->slot);
    pthread_mutex_lock(&c->lock);
    for (framesrv_frame **p = &c->held; *p; p = &(*p)->next_held)
        if (*p == f) {
            *p = f->next_held;
            break;
        }
    a->held--;
    c->stats.held--;
    if (!__atomic_load_n(&a->evicted, __ATOMIC_ACQUIRE)) {
        fs_stat_set(&a->entry->held, a->held);
        fs_stat_set(&a->entry->hold_since_ns, a->held == 0 ? 0 : fsi_monotonic_ns());
    }
    if (a->retired && a->held == 0) fsi_attachment_finish(c, a);
    pthread_mutex_unlock(&c->lock);
    fsi_pool_unref(f->pool);
    free(f);
}

/* Frames of attachment a held right now (releases run in other threads). */
static uint32_t held_now(framesrv_consumer *c, const fsi_attachment *a)
{
    pthread_mutex_lock(&c->lock);
    uint32_t n = a->held;
    pthread_mutex_unlock(&c->lock);
    return n;
}

/* ---- live (10) --------------------------------------------------------------------------- */

static void count_missed(framesrv_consumer *c, fsi_attachment *a, uint64_t n)
{
    pthread_mutex_lock(&c->lock);
    c->stats.missed += n;
    pthread_mutex_unlock(&c->lock);
    fs_count(&a->entry->missed, n);
}

static int next_live(framesrv_consumer *c, fsi_attachment *a, framesrv_frame **out)
{
    uint32_t held = held_now(c, a);
    if (held >= a->live_max_held + a->held_at_demotion)
        return fsi_fail(FRAMESRV_E_STATE, "live consumer of '%s' holds %u frames, the stream's limit: release a frame first",
                        c->stream, held);
    for (;;) {
        uint64_t word = fs_load_u64(&a->ctl->latest), seq = word >> 8;
        uint32_t slot = (uint32_t)(word & 0xFF);
        if (word == 0 || seq <= a->last_delivered) return LOOK_NOTHING;
        if (slot >= a->slot_count)
            return fsi_fail(FRAMESRV_E_BAD_DATA, "%s/%s.ctl: latest slot is %u, expected a slot below %u", c->dir, c->stream, slot,
                            a->slot_count);
        if (fs_slot_try_acquire(fsi_att_slot(a, slot), a->bit, seq)) {
            if (a->last_delivered > 0 || a->count_misses_from_start) count_missed(c, a, seq - a->last_delivered - 1);
            return deliver(c, a, slot, seq, out);
        }
        /* Stale: the slot was recycled since `latest` was stored. Our transient bit may
         * have failed the producer's reserve: tell it. */
        fs_count(&a->entry->stale, 1);
        if (fs_notify_producer(a->ctl)) fsi_futex_wake(&a->ctl->wake);
        if (fs_load_u64(&a->ctl->latest) == word) return LOOK_NOTHING;   /* being rewritten: wait */
    }
}

/* ---- lossless (9) ------------------------------------------------------------------------- */

/* The slot holding frame `seq` reserved for us, scanning from the hint. */
static bool slot_reserved(const fsi_attachment *a, uint64_t seq, uint32_t *slot)
{
    for (uint32_t k = 0; k < a->slot_count; k++) {
        uint32_t i = (a->hint + k) % a->slot_count;
        if (fs_slot_held_by(fsi_att_slot(a, i), a->bit, seq)) {
            *slot = i;
            return true;
        }
    }
    return false;
}

/* Frame `expected` is in no slot reserved for us. Once a later published frame is, it can
 * no longer arrive (a damaged slot seq): skip to it, counting the lost ones as missed
 * (Consumer.swift skipLostFrames). Returns whether to look again. */
static bool skip_lost_frames(framesrv_consumer *c, fsi_attachment *a)
{
    uint64_t next = 0;
    for (uint32_t i = 0; i < a->slot_count; i++) {
        fs_slot_ctl *s = fsi_att_slot(a, i);
        uint64_t h = fs_load_u64(&s->holders), seq;
        if ((h & a->bit) == 0 || (h & FS_HOLDER_WRITER) != 0) continue;
        if ((seq = fs_peek_u64(&s->seq)) > a->expected && (next == 0 || seq < next)) next = seq;
    }
    uint32_t ignored;
    if (next == 0 || next > fs_load_u64(&a->ctl->latest) >> 8) return false;
    if (slot_reserved(a, a->expected, &ignored)) return true;   /* published meanwhile */
    count_missed(c, a, next - a->expected);
    a->expected = next;
    return true;
}

/* The producer's stall timeout demoted us (12.6): live from now on. */
static void demote(framesrv_consumer *c, fsi_attachment *a)
{
    a->mode = FS_MODE_LIVE;
    a->held_at_demotion = held_now(c, a);   /* frames taken while lossless do not count against the limit */
    if (a->last_delivered == 0) {
        uint64_t first = a->expected ? a->expected : fs_load_u64(&a->entry->first_seq);
        a->last_delivered = first > 0 ? first - 1 : 0;
        a->count_misses_from_start = true;
    }
}

static int next_lossless(framesrv_consumer *c, fsi_attachment *a, framesrv_frame **out)
{
    if (fs_load_u32(&a->entry->mode) == FS_MODE_LIVE) {
        demote(c, a);
        return next_live(c, a, out);
    }
    if (a->expected == 0) {
        /* SYNC: acquire, pairs with the producer's admission store (9.1). */
        uint64_t first = fs_load_u64(&a->entry->first_seq);
        if (first == 0) return stream_ended(a) ? LOOK_ENDED : LOOK_NOTHING;
        a->expected = first;
    }
    /* SYNC: the acquire load of state orders the read of end_seq after it. */
    if (stream_ended(a) && a->expected > a->ctl->end_seq) return LOOK_ENDED;
    for (int pass = 0; pass < 2; pass++) {
        uint32_t slot;
        if (slot_reserved(a, a->expected, &slot)) {
            a->hint = (slot + 1) % a->slot_count;
            return deliver(c, a, slot, a->expected++, out);
        }
        if (!skip_lost_frames(c, a)) break;
    }
    return LOOK_NOTHING;
}

/* ---- waiting (11) ------------------------------------------------------------------------- */

/* Announcements only say "look again" (5): drained (each decoded and checked, one that
 * fails ignored) only when framesrv_consumer_fd connected the SUB socket, so that its
 * descriptor keeps its edge-triggered meaning. */
static void drain_doorbell(fsi_attachment *a)
{
    uint8_t buf[sizeof(fs_announce) + FS_NAME_MAX + 1];
    int n;
    while ((n = zmq_recv(a->sock, buf, sizeof buf, ZMQ_DONTWAIT)) >= 0)
        (void)fsi_validate_announce(buf, (size_t)n <= sizeof buf ? (size_t)n : sizeof buf);
}

/* Nothing to deliver now: the end, a dead producer, or 0 to wait. */
static int nothing_now(framesrv_consumer *c, fsi_attachment *a)
{
    if (a->producer_exited && a->cuda) fsi_consumer_cuda_producer_gone(c, a);
    if (stream_ended(a) && (a->mode == FS_MODE_LIVE || a->producer_exited)) return c->ended = FRAMESRV_END;
    if (!a->producer_exited) return 0;
    fsi_fail(FRAMESRV_GONE, "the producer of stream '%s' (pid %d) exited without ending the stream", c->stream, a->producer_pid);
    return c->ended = FRAMESRV_GONE;
}

/* One look at shared memory: a frame (FRAMESRV_OK), an error, FRAMESRV_END or
 * FRAMESRV_GONE, or LOOK_NOTHING. */
static int look(framesrv_consumer *c, fsi_attachment *a, framesrv_frame **frame)
{
    for (;;) {
        if (a->sock) drain_doorbell(a);
        fsi_map_current_pool(c, a);
        if (__atomic_load_n(&a->evicted, __ATOMIC_ACQUIRE) || fs_load_i32(&a->entry->pid) != a->pid) {
            __atomic_store_n(&a->evicted, true, __ATOMIC_RELEASE);
            return fsi_fail(FRAMESRV_E_DETACHED, "the producer of '%s' detached this consumer (entry %u): reopen to attach again",
                            c->stream, a->index);
        }
        int status = a->mode == FS_MODE_LOSSLESS ? next_lossless(c, a, frame) : next_live(c, a, frame);
        if (status == LOOK_BAD_FRAME) continue;   /* released, counted, skipped */
        if (status <= 0) return status;           /* a frame, or an error */
        if (status == LOOK_ENDED) return c->ended = FRAMESRV_END;
        return (status = nothing_now(c, a)) != 0 ? status : LOOK_NOTHING;
    }
}

/* How long to spin before sleeping (PROTOCOL.md 11.3), in ns: the user's poll_us; without
 * one, the catch-up spin: on a stream whose frames come less than FSI_CATCH_UP_NS apart (the
 * smoothed pace), twice that interval, at most FSI_CATCH_UP_NS, where a sleep and a wake per
 * frame cost more than the frame. 0: sleep at once. */
static uint64_t spin_window_ns(const framesrv_consumer *c, const fsi_attachment *a)
{
    static long online;   /* CPUs: on one the producer cannot publish while we spin, so never catch up */
    if (c->poll_us > 0) return (uint64_t)c->poll_us * 1000u;
    long cpus = __atomic_load_n(&online, __ATOMIC_RELAXED);
    if (cpus == 0) __atomic_store_n(&online, cpus = sysconf(_SC_NPROCESSORS_ONLN), __ATOMIC_RELAXED);
    if (cpus < 2 || a->capture_interval_ns == 0 || a->capture_interval_ns >= FSI_CATCH_UP_NS) return 0;
    return 2 * a->capture_interval_ns < FSI_CATCH_UP_NS ? 2 * a->capture_interval_ns : FSI_CATCH_UP_NS;
}

/* When this frame's busy-poll window opens (PROTOCOL.md 11.3): on a paced stream (frames
 * further apart than the window) half the window before the next frame is due; else 0 (now). */
static uint64_t poll_window_opens(const fsi_attachment *a, uint64_t window)
{
    if (a->last_capture_ns == 0 || a->capture_interval_ns <= window) return 0;
    return a->last_capture_ns + a->capture_interval_ns - window / 2;
}

/* Busy-poll (1.4): spins until `end` (within the deadline) while frame_wake still reads
 * `seen`. Whether it changed: then look again. The clock is read every 64 spins. */
static bool spin(const fsi_attachment *a, uint32_t seen, uint64_t end, uint64_t deadline)
{
    if (end > deadline) end = deadline;
    for (unsigned n = 1;; n++) {
        if (fs_frame_wake_peek(a->ctl) != seen) return true;
        fsi_cpu_relax();
        if ((n & 63) == 0 && fsi_monotonic_ns() >= end) return false;
    }
}

/* Sleeps on frame_wake (1.3): announce the sleep (sleepers bit), look once more, check the
 * producer's pidfd, then FUTEX_WAIT bounded by FSI_FRAME_WAIT_MS and the deadline. Returns
 * what the last look found, LOOK_NOTHING to look again, or FRAMESRV_TIMEOUT (the deadline,
 * or a signal, so the caller can check its own flags).
 * SYNC: fs_consumer_wait_begin pairs with the producer's fs_frame_ready: a frame published
 * after the last look either is seen by it or changes the word before the wait. */
static int wait_frame(framesrv_consumer *c, fsi_attachment *a, uint32_t seen, uint64_t deadline,
                      bool *spun, framesrv_frame **frame)
{
    int ms = fsi_remaining_ms(deadline, FSI_FRAME_WAIT_MS);
    uint64_t window = *spun ? 0 : spin_window_ns(c, a);
    if (window > 0) {   /* one window per call: it opens now, or we sleep until it does */
        uint64_t now = fsi_monotonic_ns(), opens = poll_window_opens(a, window);
        if (opens <= now + 1000000u) {   /* futex waits are in ms: spin from now to the window's end */
            *spun = true;
            if (spin(a, seen, (opens > now ? opens : now) + window, deadline)) return LOOK_NOTHING;
        } else if ((opens - now) / 1000000u < (uint64_t)ms) {
            ms = (int)((opens - now) / 1000000u);
        }
    }
    if (ms == 0) return FRAMESRV_TIMEOUT;
    uint32_t w = fs_consumer_wait_begin(a->ctl, a->bit);
    int status = look(c, a, frame);
    if (status == LOOK_NOTHING && !fsi_pidfd_alive(a->producer_fd)) a->producer_exited = true;   /* look again: frames owed, then GONE */
    else if (status == LOOK_NOTHING) {
        if (fsi_futex_wait(&a->ctl->frame_wake, w, ms) == EINTR) status = FRAMESRV_TIMEOUT;
        else status = look(c, a, frame);   /* the frame that woke us before wait_end's RMW (PROTOCOL.md 11.1) */
    }
    fs_consumer_wait_end(a->ctl, a->bit);
    return status;
}

int fsi_consumer_next_frame(framesrv_consumer *c, int timeout_ms, framesrv_frame **frame)
{
    if (frame) *frame = NULL;
    if (!frame || !c) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_consumer_next: NULL argument");
    if (c->ended) return c->ended;
    uint64_t deadline = fsi_deadline(timeout_ms);
    if (!c->att) {   /* a reopen that found no producer yet: keep looking */
        int status = fsi_consumer_attach(c, deadline);
        if (status != FRAMESRV_OK) return status == FRAMESRV_E_NOT_FOUND ? FRAMESRV_TIMEOUT : status;
    }
    fsi_attachment *a = c->att;
    bool spun = false;
    for (;;) {
        uint32_t seen = fs_frame_wake_peek(a->ctl);   /* before the look: a spin then misses no publish */
        int status = look(c, a, frame);
        if (status == LOOK_NOTHING) {   /* before sleeping: are our own holds what stops the frame? */
            int held = fsi_held_check(c, a);
            status = held != FRAMESRV_OK ? held : wait_frame(c, a, seen, deadline, &spun, frame);
        }
        if (status == FRAMESRV_OK) fsi_held_clear(c);
        if (status != LOOK_NOTHING) return status;
    }
}

int framesrv_consumer_next(framesrv_consumer *c, int timeout_ms, framesrv_frame **frame)
{
    if (c && fsi_forked(c->opener)) {
        if (frame) *frame = NULL;
        return fsi_consumer_forked(c);
    }
    if (c && c->memory == FRAMESRV_MEMORY_CUDA) return fsi_consumer_next_ready(c, NULL, false, timeout_ms, frame);
    return fsi_consumer_next_frame(c, timeout_ms, frame);
}
