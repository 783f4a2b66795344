/*
 * producer_stream.c: announcements (PROTOCOL.md 5), the end of the stream (14), format
 * changes (13), waiting for consumers and the producer's counters.
 */
#include "producer.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

/* XPUB (non-verbose) passes the first subscription (first byte 1) and the last
 * unsubscription (0; also when a subscriber goes away): read at most once per ms, on the
 * publishing thread. A new subscriber may miss a millisecond of announcements (hints).
 * Reserve calls this, and a frame's announcement after publish's wake sends by that count:
 * ZeroMQ's check costs two system calls, and a consumer woken onto this CPU runs only once
 * this thread sleeps (Producer+Announce.swift's refreshSubscribers). */
void fsp_count_subscribers(framesrv_producer *p, uint64_t now)
{
    if (now - p->last_drain_ns < 1000000u) return;
    p->last_drain_ns = now;
    uint8_t buf[FS_NAME_MAX + 8];
    int n;
    while ((n = zmq_recv(p->pub, buf, sizeof buf, ZMQ_DONTWAIT)) >= 1) p->subscribers += buf[0] == 1 ? 1 : buf[0] == 0 ? -1 : 0;
    if (p->subscribers < 0) p->subscribers = 0;
}

/* Nothing is sent while nobody subscribes (local consumers sleep on frame_wake). */
void fsp_announce(framesrv_producer *p, uint16_t kind, uint64_t seq, uint32_t slot,
                  uint32_t flags, uint64_t capture_ns, int64_t pts, bool count)
{
    uint64_t now = fsi_monotonic_ns();
    if (count) fsp_count_subscribers(p, now);
    if (p->subscribers == 0) return;
    uint8_t message[sizeof(fs_announce) + FS_NAME_MAX];
    size_t name_len = strlen(p->name);
    fs_announce a = {
        .magic = FS_MAGIC_ANNOUNCE, .version = FS_PROTOCOL_VERSION, .kind = kind, .seq = seq,
        .slot = slot, .flags = flags, .epoch = p->epoch, .capture_ns = capture_ns, .pts = pts,
        .publish_ns = now, .name_len = (uint16_t)name_len,
    };
    memcpy(message, &a, sizeof a);
    memcpy(message + sizeof a, p->name, name_len);
    /* Never blocks: a subscriber at its high-water mark loses the doorbell, not the frame. */
    zmq_send(p->pub, message, sizeof a + name_len, ZMQ_DONTWAIT);
}

void fsp_reannounce_latest(framesrv_producer *p)
{
    if (p->has_latest) fsp_announce(p, FS_ANNOUNCE_FRAME, p->latest_seq, p->latest_slot, 0, 0, FS_PTS_NONE, true);
}

void fsp_unlink_pool(framesrv_producer *p, uint64_t epoch)
{
    char path[PATH_MAX], suffix[40];
    snprintf(suffix, sizeof suffix, ".pool.%llu", (unsigned long long)epoch);
    if (fsi_path(path, sizeof path, p->dir, p->name, suffix) == FRAMESRV_OK) unlink(path);
    fsp_cuda_forget_epoch(p, epoch);   /* NAME.cuda serves it no more */
}

int framesrv_producer_end(framesrv_producer *p, int failed)
{
    if (p == NULL) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_producer_end: producer must not be NULL");
    if (fsi_forked(p->opener)) return fsp_forked(p);
    if (p->ended) return fsi_fail(FRAMESRV_E_STATE, "end on stream '%s': the stream has already ended", p->name);
    pthread_mutex_lock(&p->lock);
    uint64_t last = p->next_seq - 1;
    pthread_mutex_unlock(&p->lock);
    p->ended = true;
    p->ctl->end_seq = last;
    if (failed) p->ctl->flags |= FS_CONTROL_END_FAILED;
    fs_store_u32(&p->ctl->state, FS_STREAM_ENDED);   /* SYNC: release, publishes end_seq and flags */
    fsp_frame_ready(p);
    fsp_announce(p, FS_ANNOUNCE_END, last, 0, 0, 0, FS_PTS_NONE, true);
    fsp_wake(p);
    return FRAMESRV_OK;
}

int framesrv_producer_change_format(framesrv_producer *p, uint32_t width, uint32_t height, int pix_fmt)
{
    if (p == NULL) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_producer_change_format: producer must not be NULL");
    if (fsi_forked(p->opener)) return fsp_forked(p);
    if (p->ended) return fsi_fail(FRAMESRV_E_STATE, "change_format on stream '%s': the stream has ended", p->name);
    if (p->reserved != NULL)
        return fsi_fail(FRAMESRV_E_STATE, "change_format on stream '%s': a frame is reserved (publish or abandon it first)",
                        p->name);
    if (p->samples)
        return fsi_fail(FRAMESRV_E_MEDIA, "change_format on stream '%s': it carries audio, whose format is fixed at open", p->name);
    int rc = fsp_set_format(p, width, height, pix_fmt);
    if (rc != FRAMESRV_OK) return rc;
    /* A larger frame starts a new epoch; a smaller one reuses the pool (13). */
    if (p->pool != NULL && !fsp_pool_fits(p)) return fsp_start_epoch(p);
    return FRAMESRV_OK;
}

static uint32_t lossless_count(framesrv_producer *p)
{
    pthread_mutex_lock(&p->lock);
    uint32_t n = (uint32_t)__builtin_popcountll(p->lossless_mask);
    pthread_mutex_unlock(&p->lock);
    return n;
}

static bool enough_consumers(framesrv_producer *p, void *arg)
{
    return lossless_count(p) >= *(uint32_t *)arg;
}

uint32_t framesrv_producer_lossless_consumers(framesrv_producer *p)
{
    return p == NULL || fsi_forked(p->opener) ? 0 : lossless_count(p);
}

int framesrv_producer_wait_for_consumers(framesrv_producer *p, uint32_t count, int timeout_ms)
{
    if (p == NULL) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_producer_wait_for_consumers: producer must not be NULL");
    if (fsi_forked(p->opener)) return fsp_forked(p);
    return fsp_sleep_on_wake(p, fsi_deadline(timeout_ms), false, enough_consumers, &count);
}

int framesrv_producer_stats_of(framesrv_producer *p, framesrv_producer_stats *stats)
{
    if (p == NULL || stats == NULL)
        return fsi_fail(FRAMESRV_E_INVALID, "framesrv_producer_stats_of: producer and stats must not be NULL");
    if (fsi_forked(p->opener)) return fsp_forked(p);
    *stats = p->stats;
    pthread_mutex_lock(&p->lock);
    stats->consumers = p->consumers_now;
    stats->reclaimed = p->reclaimed;
    pthread_mutex_unlock(&p->lock);
    return FRAMESRV_OK;
}
