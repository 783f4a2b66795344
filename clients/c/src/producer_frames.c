/*
 * producer_frames.c: reserve, publish (and publish_keep), abandon (PROTOCOL.md 12.2, 12.3)
 * and the release of a kept frame.
 */
#include "producer.h"
#include "pixfmt.h"

#include <stdlib.h>
#include <string.h>

static void release_reserved(framesrv_frame *frame);

/* Finds and reserves a free slot (holders 0 and producer_hold 0), starting after the last
 * one used so frames rotate through the pool. UINT32_MAX when none is free. */
static uint32_t try_take_slot(framesrv_producer *p)
{
    uint32_t n = p->slot_count, taken = UINT32_MAX;
    uint64_t free_slots = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (p->next_hint + k) % n;
        if (!fs_slot_is_free(&p->slots[i])) continue;
        free_slots++;
        if (taken == UINT32_MAX && fs_slot_try_reserve(&p->slots[i])) taken = i;
    }
    if (taken == UINT32_MAX) return taken;
    fsp_retire_slot(p, taken);
    p->next_hint = (taken + 1) % n;
    if (free_slots - 1 < fs_peek_u64(&p->ctl->min_free)) fs_stat_set(&p->ctl->min_free, free_slots - 1);
    return taken;
}

static bool took_slot(framesrv_producer *p, void *arg)
{
    uint32_t *slot = arg;
    *slot = try_take_slot(p);
    return *slot != UINT32_MAX;
}

/* Looks for a free slot until `end` (CLOCK_MONOTONIC ns) without sleeping; the clock is read
 * every 16 scans. producer_waiting stays 0 meanwhile, so the consumers' releases make no
 * system call (PROTOCOL.md 12.3). */
static bool spin_for_slot(framesrv_producer *p, uint64_t end, uint32_t *slot)
{
    for (unsigned n = 1;; n++) {
        if ((*slot = try_take_slot(p)) != UINT32_MAX) return true;
        fsi_cpu_relax();
        if ((n & 15) == 0 && fsi_monotonic_ns() >= end) return false;
    }
}

/* A free slot within the timeout (12.3), UINT32_MAX with FRAMESRV_TIMEOUT otherwise: a spin of
 * FSP_SLOT_SPIN_NS (within the timeout), then sleeps on `wake`. */
static int take_slot(framesrv_producer *p, int timeout_ms, uint32_t *slot)
{
    *slot = try_take_slot(p);
    if (*slot != UINT32_MAX) return FRAMESRV_OK;
    if (p->opt.live_source) {   /* drop at the source: no sequence number is used */
        fs_count(&p->ctl->dropped, 1);
        p->stats.dropped++;
        p->dropped_since_publish++;   /* the next frame says so (PROTOCOL.md 4.2) */
        return FRAMESRV_TIMEOUT;
    }
    uint64_t deadline = fsi_deadline(timeout_ms), start = fsi_monotonic_ns();   /* timeout 0: no spin */
    uint64_t spin_end = start + FSP_SLOT_SPIN_NS < deadline ? start + FSP_SLOT_SPIN_NS : deadline;
    int rc = spin_end > start && spin_for_slot(p, spin_end, slot)
                 ? FRAMESRV_OK
                 : fsp_sleep_on_wake(p, deadline, true, took_slot, slot);
    uint64_t waited = fsi_monotonic_ns() - start;
    fs_count(&p->ctl->blocked_ns, waited);
    p->stats.blocked_ns += waited;
    return rc;
}

/* The frame of a reserved slot: planes from the layout, (w) fields preset. */
static framesrv_frame *make_frame(framesrv_producer *p, uint32_t slot, uint64_t seq)
{
    framesrv_frame *f = calloc(1, sizeof *f);
    if (f == NULL) return NULL;
    f->release = release_reserved;
    f->slot = slot;
    f->pool = p->pool;
    fsi_pool_ref(p->pool);
    f->producer = p;
    framesrv_frame_info *in = &f->info;
    const fs_frame *h = &p->template_header;
    in->seq = seq;
    in->epoch = p->epoch;
    in->width = h->width;
    in->height = h->height;
    in->pix_fmt = (int)h->pix_fmt;
    memcpy(in->pix_fmt_name, h->pix_fmt_name, sizeof in->pix_fmt_name);
    /* A CUDA frame's planes are on the device (framesrv_frame_device_plane): no host bytes. */
    fsi_describe_planes(in, h, p->cuda ? NULL : p->pool->base + (size_t)slot * p->pool->slot_stride);
    for (uint32_t i = 0; p->cuda && i < h->plane_count; i++) f->device_offset[i] = h->plane_offset[i];
    if (p->cuda) f->wait_on = fsp_cuda_wait_on;
    in->color_matrix = p->opt.color_matrix;
    in->color_range = p->opt.color_range;
    in->color_primaries = p->opt.color_primaries;
    in->color_transfer = p->opt.color_transfer;
    in->sar_num = 0;
    in->sar_den = 1;
    /* The default time base (4.2): den/num of the rate when both fit an int32, else 1/1000000. */
    bool rate = p->opt.rate_num > 0 && p->opt.rate_num <= INT32_MAX && p->opt.rate_den <= INT32_MAX;
    in->time_base_num = rate ? (int32_t)p->opt.rate_den : 1;
    in->time_base_den = rate ? (int32_t)p->opt.rate_num : 1000000;
    in->pts = (int64_t)(seq - 1);
    in->duration = rate ? 1 : 0;
    in->field_order = FS_FIELD_PROGRESSIVE;
    in->chroma_location = FS_CHROMA_UNSPECIFIED;
    in->source_dropped = 0;
    if (p->samples) fsp_audio_preset(p, f);
    return f;
}

/* framesrv_producer_reserve and _reserve_on: CUDA fences on `stream`, or on the CPU. */
static int reserve(framesrv_producer *p, void *stream, bool on_stream, int timeout_ms, framesrv_frame **frame)
{
    if (p == NULL || frame == NULL)
        return fsi_fail(FRAMESRV_E_INVALID, "framesrv_producer_reserve: producer and frame must not be NULL");
    *frame = NULL;
    if (fsi_forked(p->opener)) return fsp_forked(p);
    if (on_stream && !p->cuda)
        return fsi_fail(FRAMESRV_E_MEMORY, "reserve_on on stream '%s': a host-memory stream has no GPU stream to order", p->name);
    if (p->ended) return fsi_fail(FRAMESRV_E_STATE, "reserve on stream '%s': the stream has ended", p->name);
    if (p->reserved != NULL)
        return fsi_fail(FRAMESRV_E_STATE, "reserve on stream '%s': a frame is already reserved (publish or abandon it)", p->name);
    fsp_count_subscribers(p, fsi_monotonic_ns());   /* here, not after publish's wake (producer_stream.c) */
    if (!fsp_pool_fits(p)) {
        int rc = fsp_start_epoch(p);
        if (rc != FRAMESRV_OK) return rc;
    }
    uint32_t slot;
    int rc = take_slot(p, timeout_ms, &slot);
    if (rc == FRAMESRV_OK && p->cuda) rc = fsp_cuda_after_take(p, slot, stream, on_stream);   /* 4.5 step 2 */
    if (rc != FRAMESRV_OK) return rc;
    pthread_mutex_lock(&p->lock);
    uint64_t seq = p->next_seq;
    framesrv_frame *f = make_frame(p, slot, seq);
    p->reserved = f;
    pthread_mutex_unlock(&p->lock);
    if (f == NULL) {
        fs_slot_abandon(&p->slots[slot]);
        fsp_wake(p);
        return fsi_fail(FRAMESRV_E_NO_MEMORY, "reserve: out of memory");
    }
    *frame = f;
    return FRAMESRV_OK;
}

int framesrv_producer_reserve(framesrv_producer *p, int timeout_ms, framesrv_frame **frame)
{
    return reserve(p, NULL, false, timeout_ms, frame);
}

int framesrv_producer_reserve_on(framesrv_producer *p, void *stream, int timeout_ms, framesrv_frame **frame)
{
    return reserve(p, stream, true, timeout_ms, frame);
}

/* The (w) fields a consumer's validation would reject (PROTOCOL.md 16). */
static int check_info(framesrv_producer *p, const framesrv_frame_info *in)
{
    int rc = fsp_audio_check(p, in);
    if (rc != FRAMESRV_OK) return rc;
    const int64_t bound = (int64_t)1 << 62;
    if (in->pts != FRAMESRV_PTS_NONE && (in->pts < -bound || in->pts > bound))
        return fsi_fail(FRAMESRV_E_INVALID, "publish: pts %lld outside -2^62..2^62", (long long)in->pts);
    if (in->duration < 0 || in->duration > bound)
        return fsi_fail(FRAMESRV_E_INVALID, "publish: duration %lld outside 0..2^62", (long long)in->duration);
    if (in->time_base_num < 1 || in->time_base_den < 1)
        return fsi_fail(FRAMESRV_E_INVALID, "publish: time base %d/%d: both must be >= 1", in->time_base_num, in->time_base_den);
    if (in->field_order > FS_FIELD_MAX || in->chroma_location > FS_CHROMA_MAX)
        return fsi_fail(FRAMESRV_E_INVALID, "publish: field_order %u (0..%u) or chroma_location %u (0..%u) out of range",
                        in->field_order, FS_FIELD_MAX, in->chroma_location, FS_CHROMA_MAX);
    return FRAMESRV_OK;
}

/* The frame's header: the format's template plus the (w) fields. */
static void write_header(framesrv_producer *p, framesrv_frame *f, fs_frame *h)
{
    const framesrv_frame_info *in = &f->info;
    *h = p->template_header;
    h->epoch = p->epoch;
    h->color_matrix = in->color_matrix;
    h->color_range = in->color_range;
    h->color_primaries = in->color_primaries;
    h->color_transfer = in->color_transfer;
    h->sar_num = in->sar_num;
    h->sar_den = in->sar_den;
    h->pts = in->pts;
    h->time_base_num = in->time_base_num;
    h->time_base_den = in->time_base_den;
    h->duration = in->duration;
    h->capture_ns = in->capture_ns ? in->capture_ns : fsi_monotonic_ns();
    h->flags = in->flags;
    h->field_order = in->field_order;
    h->chroma_location = in->chroma_location;
    /* A live source's drops since its last frame: counted here, flagged as a discontinuity. */
    h->source_dropped = in->source_dropped + p->dropped_since_publish;
    if (h->source_dropped) h->flags |= FS_FRAME_DISCONTINUITY;
    p->dropped_since_publish = 0;
    if (p->samples) fsp_audio_header(p, f, h);
}

/* 12.2's publish, under the lock shared with admission and reclaim; a CUDA frame's ready
 * fence first (4.5 step 1), on `stream` or now. */
static int publish(framesrv_producer *p, framesrv_frame *f, bool keep, void *stream, bool on_stream)
{
    if (p == NULL || f == NULL)
        return fsi_fail(FRAMESRV_E_INVALID, "framesrv_producer_publish: producer and frame must not be NULL");
    if (fsi_forked(p->opener)) return fsp_forked(p);
    if (f != p->reserved)
        return fsi_fail(FRAMESRV_E_STATE, "publish on stream '%s': the frame is not this producer's reserved frame", p->name);
    if (p->ended)   /* the frame stays reserved: abandon it */
        return fsi_fail(FRAMESRV_E_STATE, "publish on stream '%s': the stream has ended", p->name);
    if (on_stream && !p->cuda)
        return fsi_fail(FRAMESRV_E_MEMORY, "publish_on on stream '%s': a host-memory stream has no GPU stream to order", p->name);
    int rc = check_info(p, &f->info);
    if (rc == FRAMESRV_OK && p->cuda) {   /* the seq taken below: only this thread publishes */
        pthread_mutex_lock(&p->lock);
        uint64_t next = p->next_seq;
        pthread_mutex_unlock(&p->lock);
        rc = fsp_cuda_ready(p, f->slot, next, stream, on_stream);
    }
    if (rc != FRAMESRV_OK) return rc;
    fs_frame h;
    write_header(p, f, &h);
    fs_slot_ctl *s = &p->slots[f->slot];
    uint64_t now = fsi_monotonic_ns();
    pthread_mutex_lock(&p->lock);
    uint64_t seq = p->next_seq++;
    h.seq = seq;
    memcpy(f->pool->base + (size_t)f->slot * f->pool->slot_stride, &h, sizeof h);
    if (keep) fs_slot_hold_set(s);
    fs_slot_publish(s, seq, p->epoch, now, p->lossless_mask);   /* SYNC: release: header and pixels */
    fs_store_u64(&p->ctl->latest, seq << 8 | f->slot);
    p->reserved = NULL;
    if (keep) p->kept++;
    pthread_mutex_unlock(&p->lock);
    fsp_frame_ready(p);   /* the one-hop wake, before any ZeroMQ work (11) */
    p->has_latest = true;
    p->latest_seq = seq;
    p->latest_slot = f->slot;
    p->stats.published++;
    fs_count(&p->ctl->published, 1);
    fs_stat_set(&p->ctl->last_publish_ns, now);
    fsp_announce(p, FS_ANNOUNCE_FRAME, seq, f->slot, h.flags, h.capture_ns, h.pts, false);   /* counted at reserve */
    if (!keep) {
        fsi_pool_unref(f->pool);
        free(f);
    }
    return FRAMESRV_OK;
}

int framesrv_producer_publish(framesrv_producer *p, framesrv_frame *frame) { return publish(p, frame, false, NULL, false); }
int framesrv_producer_publish_keep(framesrv_producer *p, framesrv_frame *frame) { return publish(p, frame, true, NULL, false); }
int framesrv_producer_publish_on(framesrv_producer *p, framesrv_frame *frame, void *stream)
{
    return publish(p, frame, false, stream, true);
}
int framesrv_producer_publish_keep_on(framesrv_producer *p, framesrv_frame *frame, void *stream)
{
    return publish(p, frame, true, stream, true);
}

int framesrv_producer_abandon(framesrv_producer *p, framesrv_frame *frame)
{
    if (p == NULL || frame == NULL)
        return fsi_fail(FRAMESRV_E_INVALID, "framesrv_producer_abandon: producer and frame must not be NULL");
    if (fsi_forked(p->opener)) return fsp_forked(p);
    pthread_mutex_lock(&p->lock);
    bool mine = frame == p->reserved;
    if (mine) p->reserved = NULL;
    pthread_mutex_unlock(&p->lock);
    if (!mine)
        return fsi_fail(FRAMESRV_E_STATE, "abandon on stream '%s': the frame is not this producer's reserved frame", p->name);
    fs_slot_abandon(&p->slots[frame->slot]);   /* seq 0 first: no stale match of the old frame */
    fsp_wake(p);
    p->stats.abandoned++;
    fsi_pool_unref(frame->pool);
    free(frame);
    return FRAMESRV_OK;
}

/* framesrv_frame_release of a producer's frame (frame.h): a kept frame gives its slot back
 * (producer_hold 0); a frame still reserved is abandoned. Any thread. */
static void release_reserved(framesrv_frame *frame)
{
    framesrv_producer *p = frame->producer;
    if (fsi_forked(p->opener)) {
        fsp_release_forked(frame);
        return;
    }
    pthread_mutex_lock(&p->lock);
    bool reserved = frame == p->reserved;
    pthread_mutex_unlock(&p->lock);
    if (reserved) {
        framesrv_producer_abandon(p, frame);
        return;
    }
    fs_slot_hold_clear(&p->slots[frame->slot]);   /* SYNC: release, pairs with fs_slot_is_free */
    fsp_wake(p);
    fsi_pool_unref(frame->pool);
    free(frame);
    pthread_mutex_lock(&p->lock);
    bool last = --p->kept == 0 && p->closed;
    pthread_mutex_unlock(&p->lock);
    if (last) fsp_free(p);
}
