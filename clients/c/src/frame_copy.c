/*
 * frame_copy.c: framesrv_frame_copy_on, the copy between a host frame and a CUDA frame (or
 * two of one kind) that upload and download stages are made of, and the registration of a
 * host pool with CUDA that lets the copy engine read and write the slots themselves.
 */
#include "frame.h"

#include <stdlib.h>
#include <string.h>

static bool is_cuda(const framesrv_frame *f) { return framesrv_frame_memory(f) == FRAMESRV_MEMORY_CUDA; }

void fsi_pinned_free(fsi_pinned *pinned, bool forked)
{
    if (!pinned) return;
    if (!forked && fsi_device_push(&pinned->device) == FRAMESRV_OK) {
        pinned->device.cu->cuMemHostUnregister(pinned->base);
        fsi_device_pop(&pinned->device);
    }
    if (!forked) fsi_device_release(&pinned->device);
    free(pinned);
}

/* Registers a host frame's pool with `d` (its context pushed) once; a refusal is remembered,
 * and the copies of that pool are then staged by the driver. A consumer's pool is mapped
 * PROT_READ: it is registered read-only. */
static void pin(framesrv_frame *f, const fsi_device *d)
{
    fsi_pool *pool = f->pool;
    if (!pool || !pool->base || pool->pin_state != 0) return;
    pool->pin_state = -1;
    fsi_pinned *pinned = calloc(1, sizeof *pinned);
    if (!pinned) return;
    if (fsi_device_copy(&pinned->device, d) != FRAMESRV_OK) {
        free(pinned);
        return;
    }
    unsigned flags = FS_CU_MEMHOSTREGISTER_PORTABLE | (f->consumer ? FS_CU_MEMHOSTREGISTER_READ_ONLY : 0);
    if (d->cu->cuMemHostRegister(pool->base, pool->size, flags) != FS_CU_SUCCESS) {
        fsi_device_release(&pinned->device);
        free(pinned);
        return;
    }
    pinned->base = pool->base;
    pool->pinned = pinned;
    pool->pin_state = 1;
}

int framesrv_frame_pinned(const framesrv_frame *frame)
{
    return frame && frame->pool && frame->pool->pin_state == 1;
}

static bool same_geometry(const framesrv_frame_info *a, const framesrv_frame_info *b)
{
    if (a->plane_count != b->plane_count || a->plane_count > FRAMESRV_MAX_PLANES) return false;
    for (uint32_t p = 0; p < a->plane_count; p++)
        if (a->planes[p].row_bytes != b->planes[p].row_bytes || a->planes[p].height != b->planes[p].height) return false;
    return true;
}

/* The device whose context the copy runs in: the CUDA frame's (both frames': one device); NULL for two host frames. */
static int copy_device(const framesrv_frame *dst, const framesrv_frame *src, const fsi_device **out)
{
    const fsi_device *s = is_cuda(src) ? &src->pool->device->device : NULL;
    const fsi_device *d = is_cuda(dst) ? &dst->pool->device->device : NULL;
    if (s && d && memcmp(s->uuid, d->uuid, sizeof s->uuid) != 0)
        return fsi_fail(FRAMESRV_E_MEMORY, "framesrv_frame_copy_on: the source is on CUDA device %s and the destination on %s: "
                        "copy between devices through a host stream", s->uuid_text, d->uuid_text);
    *out = s ? s : d;
    return FRAMESRV_OK;
}

/* One side of a copy: a frame's planes, or planes a caller names (framesrv_frame_write_on). */
typedef struct side {
    int type;                             /* FS_CU_MEMORYTYPE_HOST or _DEVICE */
    uint64_t at[FRAMESRV_MAX_PLANES];     /* host addresses or CUdeviceptr values */
    size_t pitch[FRAMESRV_MAX_PLANES];
} side;

static side side_of(const framesrv_frame *f)
{
    side s = { .type = is_cuda(f) ? FS_CU_MEMORYTYPE_DEVICE : FS_CU_MEMORYTYPE_HOST };
    for (uint32_t p = 0; p < f->info.plane_count && p < FRAMESRV_MAX_PLANES; p++) {
        s.pitch[p] = f->info.planes[p].stride;
        s.at[p] = is_cuda(f) ? fsi_frame_device_slot(f) + f->device_offset[p] : (uint64_t)(uintptr_t)f->info.planes[p].data;
    }
    return s;
}

static void place(const side *s, uint32_t p, int *type, const void **host, fs_cuda_deviceptr *device, size_t *pitch)
{
    *type = s->type;
    *pitch = s->pitch[p];
    if (s->type == FS_CU_MEMORYTYPE_DEVICE) *device = s->at[p];
    else *host = (const void *)(uintptr_t)s->at[p];
}

/* One cuMemcpy2DAsync per plane of geometry `g`. */
static int queue_planes(const fsi_device *d, const framesrv_frame_info *g, const side *to, const side *from, void *stream)
{
    for (uint32_t p = 0; p < g->plane_count; p++) {
        fs_cuda_memcpy2d c = { .width_in_bytes = g->planes[p].row_bytes, .height = g->planes[p].height };
        const void *dst_host = NULL;
        place(from, p, &c.src_memory_type, &c.src_host, &c.src_device, &c.src_pitch);
        place(to, p, &c.dst_memory_type, &dst_host, &c.dst_device, &c.dst_pitch);
        c.dst_host = (void *)dst_host;   /* a reserved frame's planes, or the caller's memory: writable */
        fs_cuda_result r = d->cu->cuMemcpy2DAsync(&c, stream);
        if (r != FS_CU_SUCCESS) return fsi_cuda_fail(r, "cuMemcpy2DAsync");
    }
    return FRAMESRV_OK;
}

/* The copy in `d`'s context; a host side is synchronized before it returns. */
static int copy_with_cuda(const fsi_device *d, framesrv_frame *dst, const side *from, framesrv_frame *src_frame, void *stream)
{
    int rc = fsi_device_push(d);
    if (rc != FRAMESRV_OK) return rc;
    if (src_frame && !is_cuda(src_frame)) pin(src_frame, d);
    if (!is_cuda(dst)) pin(dst, d);
    side to = side_of(dst);
    rc = queue_planes(d, &dst->info, &to, from, stream);
    bool host_side = from->type == FS_CU_MEMORYTYPE_HOST || !is_cuda(dst);
    fs_cuda_result r = host_side ? d->cu->cuStreamSynchronize(stream) : FS_CU_SUCCESS;
    if (rc == FRAMESRV_OK && r != FS_CU_SUCCESS) rc = fsi_cuda_fail(r, "cuStreamSynchronize");
    fsi_device_pop(d);
    return rc;
}

/* Rows of host planes of geometry `g` into other host planes, by the CPU. */
static void host_rows(const framesrv_frame_info *g, const side *to, const side *from)
{
    for (uint32_t p = 0; p < g->plane_count; p++) {
        uint8_t *out = (uint8_t *)(uintptr_t)to->at[p];
        const uint8_t *in = (const uint8_t *)(uintptr_t)from->at[p];
        for (size_t y = 0; y < g->planes[p].height; y++) memcpy(out + y * to->pitch[p], in + y * from->pitch[p], g->planes[p].row_bytes);
    }
}

/* `from` into dst: rows by the CPU when both are in host memory, else CUDA copies in `d`'s context. */
static int copy_from(const fsi_device *d, framesrv_frame *dst, const side *from, framesrv_frame *src_frame, void *stream)
{
    if (!is_cuda(dst) && from->type == FS_CU_MEMORYTYPE_HOST) {
        side to = side_of(dst);
        host_rows(&dst->info, &to, from);
        return FRAMESRV_OK;
    }
    return copy_with_cuda(d, dst, from, src_frame, stream);
}

int framesrv_frame_write_on(framesrv_frame *dst, int memory, const uint64_t *planes, const size_t *pitches, uint32_t count,
                            void *stream)
{
    if (!dst || !planes || !pitches) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_write_on: NULL argument");
    if (!dst->producer) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_write_on: the destination must be a reserved frame");
    if (count != dst->info.plane_count || count > FRAMESRV_MAX_PLANES)
        return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_write_on: %u source planes for a frame of %u", count, dst->info.plane_count);
    if (memory != FRAMESRV_MEMORY_HOST && memory != FRAMESRV_MEMORY_CUDA)
        return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_write_on: memory %d is neither host nor CUDA", memory);
    if (memory == FRAMESRV_MEMORY_CUDA && !is_cuda(dst))
        return fsi_fail(FRAMESRV_E_MEMORY, "framesrv_frame_write_on: device planes go into a CUDA frame (this one is in host memory)");
    side from = { .type = memory == FRAMESRV_MEMORY_CUDA ? FS_CU_MEMORYTYPE_DEVICE : FS_CU_MEMORYTYPE_HOST };
    for (uint32_t p = 0; p < count; p++) {
        if (planes[p] == 0 || pitches[p] < dst->info.planes[p].row_bytes)
            return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_write_on: source plane %u is NULL or its pitch %zu is under "
                            "the %zu bytes of a row", p, pitches[p], dst->info.planes[p].row_bytes);
        from.at[p] = planes[p], from.pitch[p] = pitches[p];
    }
    return copy_from(is_cuda(dst) ? &dst->pool->device->device : NULL, dst, &from, NULL, stream);
}

int framesrv_frame_copy_on(framesrv_frame *dst, framesrv_frame *src, void *stream)
{
    if (!dst || !src) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_copy_on: NULL frame");
    if (!dst->producer) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_copy_on: the destination must be a reserved frame");
    if (!same_geometry(&dst->info, &src->info))
        return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_copy_on: frame %llu (%ux%u %s) and the reserved frame (%ux%u %s) "
                        "differ in geometry", (unsigned long long)src->info.seq, src->info.width, src->info.height,
                        src->info.pix_fmt_name, dst->info.width, dst->info.height, dst->info.pix_fmt_name);
    side from = side_of(src);
    const fsi_device *d = NULL;   /* NULL for two host frames */
    int rc = copy_device(dst, src, &d);
    return rc != FRAMESRV_OK ? rc : copy_from(d, dst, &from, src, stream);
}

int framesrv_frame_read_on(framesrv_frame *src, const uint64_t *planes, const size_t *pitches, uint32_t count, void *stream)
{
    if (!src || !planes || !pitches) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_read_on: NULL argument");
    if (count != src->info.plane_count || count > FRAMESRV_MAX_PLANES)
        return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_read_on: %u destination planes for a frame of %u", count, src->info.plane_count);
    side to = { .type = FS_CU_MEMORYTYPE_HOST }, from = side_of(src);
    for (uint32_t p = 0; p < count; p++) {
        if (planes[p] == 0 || pitches[p] < src->info.planes[p].row_bytes)
            return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_read_on: destination plane %u is NULL or its pitch %zu is under "
                            "the %zu bytes of a row", p, pitches[p], src->info.planes[p].row_bytes);
        to.at[p] = planes[p], to.pitch[p] = pitches[p];
    }
    if (!is_cuda(src)) {
        host_rows(&src->info, &to, &from);
        return FRAMESRV_OK;
    }
    const fsi_device *d = &src->pool->device->device;
    int rc = fsi_device_push(d);
    if (rc != FRAMESRV_OK) return rc;
    rc = queue_planes(d, &src->info, &to, &from, stream);
    fs_cuda_result r = d->cu->cuStreamSynchronize(stream);   /* the caller's memory is written when the call returns */
    if (rc == FRAMESRV_OK && r != FS_CU_SUCCESS) rc = fsi_cuda_fail(r, "cuStreamSynchronize");
    fsi_device_pop(d);
    return rc;
}
