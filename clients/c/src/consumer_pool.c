/*
 * consumer_pool.c: a consumer's pools (PROTOCOL.md 4.2, 13): each epoch's pool file mapped
 * read-only once and shared by the frames that live in it; a CUDA stream's pool file holds
 * the headers only, and its planes come with the epoch's allocation (4.5, consumer_cuda.c).
 */
#include "consumer.h"
#include "validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Maps NAME.pool.<epoch> read-only, its slot size from its file size (4.2, 13); a CUDA
 * stream's headers-only file (4.5) and its allocation. */
static int map_pool(framesrv_consumer *c, fsi_attachment *a, uint64_t epoch, fsi_pool **out)
{
    char path[PATH_MAX + 64], suffix[40];
    snprintf(suffix, sizeof suffix, ".pool.%llu", (unsigned long long)epoch);
    void *base;
    size_t size, slot_bytes = FS_CUDA_HEADER_SLOT;
    int status = fsi_path(path, sizeof path, c->dir, c->stream, suffix);
    if (status == FRAMESRV_OK) status = fsi_map_file(path, false, true, &base, &size);
    if (status != FRAMESRV_OK) return status;
    status = a->cuda ? fsi_validate_header_pool(size, a->slot_count, path) : fsi_validate_pool(size, a->slot_count, path, &slot_bytes);
    if (status == FRAMESRV_OK && !(*out = calloc(1, sizeof **out)))
        status = fsi_fail(FRAMESRV_E_NO_MEMORY, "out of memory mapping %s", path);
    if (status != FRAMESRV_OK) {
        munmap(base, size);
        return status;
    }
    **out = (fsi_pool){ .epoch = epoch, .base = base, .size = size, .slot_stride = slot_bytes, .refs = 1 };
    if (a->cuda && (status = fsi_consumer_cuda_import(c, a, *out)) != FRAMESRV_OK) {
        fsi_pool_unref(*out);
        *out = NULL;
    }
    return status;
}

void fsi_map_current_pool(framesrv_consumer *c, fsi_attachment *a)
{
    uint64_t epoch = fs_load_u64(&a->ctl->epoch);
    fsi_pool *pool;
    if (epoch == 0 || (a->pool && a->pool->epoch == epoch) || map_pool(c, a, epoch, &pool) != FRAMESRV_OK) return;
    fsi_pool_unref(a->pool);   /* frames of the old epoch keep their own references */
    a->pool = pool;
}

/* SYNC: a held frame's pool is referenced under c->lock, before a release in another
 * thread can take the frame off the list and drop its reference. */
int fsi_pool_of(framesrv_consumer *c, fsi_attachment *a, uint64_t epoch, fsi_pool **out)
{
    pthread_mutex_lock(&c->lock);
    fsi_pool *found = a->pool && a->pool->epoch == epoch ? a->pool : NULL;
    for (framesrv_frame *f = c->held; !found && f; f = f->next_held)
        if (f->attachment == a && f->pool->epoch == epoch) found = f->pool;
    if (found) fsi_pool_ref(found);
    pthread_mutex_unlock(&c->lock);
    if (!found) return map_pool(c, a, epoch, out);
    *out = found;
    return FRAMESRV_OK;
}
