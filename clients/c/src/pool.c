/*
 * pool.c: the reference counts of mapped pool files (pool.h).
 */
#include "pool.h"

#include <stdlib.h>
#include <sys/mman.h>

void fsi_pool_ref(fsi_pool *pool)
{
    if (pool) __atomic_fetch_add(&pool->refs, 1, __ATOMIC_RELAXED);
}

/* SYNC: acq_rel, so every access through the last reference happens before the munmap. */
void fsi_pool_unref(fsi_pool *pool)
{
    if (!pool || __atomic_sub_fetch(&pool->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    fsi_pinned_free(pool->pinned, false);
    if (pool->base) munmap(pool->base, pool->size);
    fsi_device_memory_free(pool->device);
    free(pool);
}
