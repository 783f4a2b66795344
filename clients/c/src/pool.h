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
    struct fsi_pinned *pinned;   /* a host pool registered with CUDA by framesrv_frame_copy_on, else NULL */
    int pin_state;               /* 0: not tried; 1: pinned; -1: the driver refused (copies are staged) */
    uint32_t refs;             /* the owner's current-pool reference + one per frame held */
} fsi_pool;

/* Atomic counts: a frame may be released from another thread than its owner's. */
FSI_HIDDEN void fsi_pool_ref(fsi_pool *pool);
FSI_HIDDEN void fsi_pool_unref(fsi_pool *pool);     /* munmap + free at 0; NULL ignored */

/* frame_copy.c: a host pool's registration with CUDA (cuMemHostRegister), undone before the
 * pool is unmapped: with its device's context pushed, or (forked: the context did not
 * survive the fork) with no driver call. */
typedef struct fsi_pinned {
    fsi_device device;           /* its own reference to the context */
    void *base;
} fsi_pinned;
FSI_HIDDEN void fsi_pinned_free(fsi_pinned *pinned, bool forked);

#endif /* FRAMESRV_POOL_H */
