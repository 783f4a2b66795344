/*
 * frame.c: frames and the pools they live in, shared by the consumer and the producer.
 *
 * A pool is mapped once per epoch and reference-counted: its owner (consumer or producer)
 * keeps one reference to its current pool and every frame keeps one to the pool it lives
 * in, so an epoch change never unmaps the memory of a frame still held.
 */
#include "internal.h"

#include <stdlib.h>
#include <sys/mman.h>

/* Weak references: a consumed frame exists only in a program that linked consumer.o
 * (framesrv_consumer_next), a kept producer frame only in one that linked producer.o, so
 * a static link pulls in neither side just because it releases frames. */
extern void fsi_consumer_release(framesrv_frame *frame) __attribute__((weak));
extern void fsi_producer_release_kept(framesrv_frame *frame) __attribute__((weak));

void fsi_pool_ref(fsi_pool *pool)
{
    if (pool) __atomic_fetch_add(&pool->refs, 1, __ATOMIC_RELAXED);
}

/* SYNC: acq_rel, so every access through the last reference happens before the munmap. */
void fsi_pool_unref(fsi_pool *pool)
{
    if (!pool || __atomic_sub_fetch(&pool->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (pool->base) munmap(pool->base, pool->size);
    free(pool);
}

framesrv_frame_info *framesrv_frame_info_of(framesrv_frame *frame)
{
    return frame ? &frame->info : NULL;
}

void framesrv_frame_release(framesrv_frame *frame)
{
    if (!frame) return;
    if (frame->kind == FSI_FRAME_CONSUMED && fsi_consumer_release) fsi_consumer_release(frame);
    else if (frame->kind == FSI_FRAME_RESERVED && fsi_producer_release_kept) fsi_producer_release_kept(frame);
}
