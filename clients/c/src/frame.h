/*
 * frame.h: a frame, consumed or reserved, in the pool it lives in (frame.c). Not installed.
 *
 * frame.c knows neither side: whoever makes a frame says how it is released (`release`),
 * so the producer and consumer code depend on frames and pools, never the other way round,
 * and a static link of one side does not pull in the other.
 */
#ifndef FRAMESRV_FRAME_H
#define FRAMESRV_FRAME_H

#include "pool.h"

struct fsi_attachment;

struct framesrv_frame {
    framesrv_frame_info info;  /* consumers: the validated copy; producers: preset (w) fields */
    /* framesrv_frame_release's work, set by the side that made the frame: consumer_next.c
     * gives a consumed frame's slot back; producer_frames.c drops the producer's own
     * reference (producer_hold) to a frame published with framesrv_producer_publish_keep. */
    void (*release)(struct framesrv_frame *frame);
    /* framesrv_frame_wait_on's work for a CUDA frame, set by the same side; NULL for a host frame. */
    int (*wait_on)(struct framesrv_frame *frame, void *stream);
    uint32_t slot;
    fsi_pool *pool;            /* holds one reference */
    framesrv_consumer *consumer; /* a consumed frame's consumer */
    framesrv_producer *producer; /* a reserved frame's producer */
    struct framesrv_frame *next_held; /* the consumer's list of held frames */
    struct fsi_attachment *attachment; /* a consumed frame's producer instance (consumer.h) */
    bool fence_queued;         /* CUDA: release_on queued the release fence (release stores none) */
    uint32_t device_offset[FRAMESRV_MAX_PLANES]; /* CUDA: each plane's offset in the device slot */
};

/* CUDA: the device address of the frame's slot (pool->device), 0 for a host frame. */
static inline uint64_t fsi_frame_device_slot(const struct framesrv_frame *f)
{
    return f->pool && f->pool->device ? f->pool->device->base + (uint64_t)f->slot * f->pool->device->slot_stride : 0;
}

/* fsi_pool_unref in a forked child (frame.c): the mappings of the child go, and a CUDA pool's
 * allocation struct, without a driver call (its context does not survive a fork). */
FSI_HIDDEN void fsi_pool_unref_forked(fsi_pool *pool);

#endif /* FRAMESRV_FRAME_H */
