/*
 * frame.c: the calls of the public API on any frame (frame.h), consumed or reserved.
 */
#include "frame.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

framesrv_frame_info *framesrv_frame_info_of(framesrv_frame *frame)
{
    return frame ? &frame->info : NULL;
}

void framesrv_frame_release(framesrv_frame *frame)
{
    if (frame && frame->release) frame->release(frame);
}

int framesrv_frame_memory(const framesrv_frame *frame)
{
    if (!frame) return -1;
    return frame->pool && frame->pool->device ? FRAMESRV_MEMORY_CUDA : FRAMESRV_MEMORY_HOST;
}

int framesrv_frame_wait_on(framesrv_frame *frame, void *stream)
{
    if (!frame) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_wait_on: frame is NULL");
    if (framesrv_frame_memory(frame) != FRAMESRV_MEMORY_CUDA || !frame->wait_on)
        return fsi_fail(FRAMESRV_E_MEMORY, "framesrv_frame_wait_on: frame %llu is in host memory: no GPU stream to order",
                        (unsigned long long)frame->info.seq);
    return frame->wait_on(frame, stream);
}

int framesrv_frame_device_plane(framesrv_frame *frame, uint32_t plane, framesrv_device_plane *out)
{
    if (!frame || !out) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_device_plane: NULL argument");
    if (framesrv_frame_memory(frame) != FRAMESRV_MEMORY_CUDA)
        return fsi_fail(FRAMESRV_E_MEMORY, "framesrv_frame_device_plane: frame %llu is in host memory: read framesrv_plane.data",
                        (unsigned long long)frame->info.seq);
    if (plane >= frame->info.plane_count)
        return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_device_plane: plane %u of a frame of %u planes", plane,
                        frame->info.plane_count);
    const framesrv_plane *p = &frame->info.planes[plane];
    *out = (framesrv_device_plane){ .ptr = fsi_frame_device_slot(frame) + frame->device_offset[plane], .pitch = p->stride,
                                    .size = p->size, .row_bytes = p->row_bytes, .width = p->width, .height = p->height,
                                    .components = p->components, .sample_bytes = p->sample_bytes };
    return FRAMESRV_OK;
}

void fsi_pool_unref_forked(fsi_pool *pool)
{
    if (!pool || __atomic_sub_fetch(&pool->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    fsi_pinned_free(pool->pinned, true);
    if (pool->base) munmap(pool->base, pool->size);
    if (pool->device && pool->device->fd >= 0) close(pool->device->fd);
    free(pool->device);
    free(pool);
}
