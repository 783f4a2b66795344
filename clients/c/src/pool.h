/*
 * pool.h: a mapped pool file, shared by the frames that live in it (pool.c). Not installed.
 *
 * A pool is mapped once per epoch and reference-counted: its owner (consumer or producer)
 * keeps one reference to its current pool and every frame keeps one to the pool it lives
 * in, so an epoch change never unmaps the memory of a frame still held. A CUDA stream's pool
 * file holds the headers only; its planes are in `device`, freed with the last reference.
 */
#ifndef FRAMESRV_POOL_H
#define FRAMESRV_POOL_H

#include "device.h"

/* One mapped pool file, shared by the frames that live in it: unmapped when the last
 * reference goes (frames held across an epoch change keep their old pool). */
typedef struct fsi_pool {
    uint64_t epoch;
    uint8_t *base;
    size_t size;
    size_t slot_stride;
    fsi_device_memory *device;   /* CUDA: the epoch's allocation (the planes), else NULL */
    uint32_t refs;             /* the owner's current-pool reference + one per frame held */
} fsi_pool;

/* Atomic counts: a frame may be released from another thread than its owner's. */
FSI_HIDDEN void fsi_pool_ref(fsi_pool *pool);
FSI_HIDDEN void fsi_pool_unref(fsi_pool *pool);     /* munmap + free at 0; NULL ignored */

#endif /* FRAMESRV_POOL_H */
