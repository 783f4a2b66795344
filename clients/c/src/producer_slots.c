/*
 * producer_slots.c: the pool and its slots. Format and epochs (PROTOCOL.md 13), reserve
 * with the producer_waiting handshake (12.2, 12.3), and the doorbell-free wait on `wake`.
 */
#include "producer.h"
#include "pixfmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fsp_wake(framesrv_producer *p)
{
    fs_bump(&p->ctl->wake);
    fsi_futex_wake(&p->ctl->wake);
}

/* SYNC: seq_cst RMW of frame_wake, then the load of sleepers (fs_frame_ready): pairs with the
 * consumer's fs_consumer_wait_begin, so a consumer going to sleep either sees the change or is woken. */
void fsp_frame_ready(framesrv_producer *p)
{
    if (fs_frame_ready(p->ctl)) fsi_futex_wake(&p->ctl->frame_wake);
}

bool fsp_any_slot_held(framesrv_producer *p)
{
    for (uint32_t i = 0; i < p->slot_count; i++)
        if (__atomic_load_n(&p->slots[i].holders, __ATOMIC_ACQUIRE) != 0) return true;
    return false;
}

/* The header fields that depend only on the format (Swift's prepareTemplate). */
static void fill_template(framesrv_producer *p)
{
    fs_frame *h = &p->template_header;
    memset(h, 0, sizeof *h);
    h->magic = FS_MAGIC_FRAME;
    h->version = FS_PROTOCOL_VERSION;
    h->width = p->width;
    h->height = p->height;
    h->pix_fmt = (uint32_t)p->format->code;
    h->plane_count = p->layout.plane_count;
    /* A CUDA slot has no header before its planes: the same layout, 256 bytes earlier (4.5). */
    uint32_t shift = p->cuda ? (uint32_t)sizeof(fs_frame) : 0;
    for (uint32_t i = 0; i < p->layout.plane_count; i++) {
        h->plane_offset[i] = p->layout.offset[i] - shift;
        h->plane_stride[i] = p->layout.stride[i];
        h->plane_size[i] = p->layout.size[i];
    }
    h->payload_size = (uint32_t)(p->layout.slot_bytes - sizeof(fs_frame));
    h->field_order = FS_FIELD_PROGRESSIVE;
    snprintf(h->pix_fmt_name, sizeof h->pix_fmt_name, "%s", p->format->name);
}

int fsp_set_format(framesrv_producer *p, uint32_t width, uint32_t height, int pix_fmt)
{
    const fsi_pix_format *f = fsi_pix_format_of(pix_fmt);
    if (f == NULL)
        return fsi_fail(FRAMESRV_E_INVALID, "producer: pix_fmt %d is not a format of the table (1..15)", pix_fmt);
    fsi_layout layout;
    int rc = fsi_canonical_layout(f, width, height, &layout);
    if (rc != FRAMESRV_OK) return rc;
    p->format = f;
    p->width = width;
    p->height = height;
    p->layout = layout;
    fill_template(p);
    return FRAMESRV_OK;
}

/* Slot `slot` now holds a current-epoch frame: retired pools none of whose slots hold an
 * old frame any more are removed (13 step 2). */
void fsp_retire_slot(framesrv_producer *p, uint32_t slot)
{
    uint32_t kept = 0;
    for (uint32_t k = 0; k < p->retired_count; k++) {
        p->retired_slots[k] &= ~(1ull << slot);
        if (p->retired_slots[k] == 0) {
            fsp_unlink_pool(p, p->retired_epoch[k]);
            fsi_pool_unref(p->retired_pool[k]);   /* CUDA: the allocation goes with the pool file */
            continue;
        }
        p->retired_pool[kept] = p->retired_pool[k];
        p->retired_epoch[kept] = p->retired_epoch[k];
        p->retired_slots[kept++] = p->retired_slots[k];
    }
    p->retired_count = kept;
}

/* Creates NAME.pool.<epoch> of slot_count slots of `stride` bytes. */
static int create_pool(framesrv_producer *p, uint64_t epoch, size_t stride, fsi_pool **out)
{
    char path[PATH_MAX], suffix[40];
    snprintf(suffix, sizeof suffix, ".pool.%llu", (unsigned long long)epoch);
    int rc = fsi_path(path, sizeof path, p->dir, p->name, suffix);
    if (rc != FRAMESRV_OK) return rc;
    fsi_pool *pool = calloc(1, sizeof *pool);
    if (pool == NULL) return fsi_fail(FRAMESRV_E_NO_MEMORY, "pool %s: out of memory", path);
    void *base;
    rc = fsp_create_file(path, stride * p->slot_count, &base);
    if (rc != FRAMESRV_OK) {
        free(pool);
        return rc;
    }
    pool->epoch = epoch;
    pool->base = base;
    pool->size = stride * p->slot_count;
    pool->slot_stride = stride;
    pool->refs = 1;
    if (p->cuda && (rc = fsp_cuda_new_pool(p, pool, p->layout.slot_bytes - sizeof(fs_frame))) != FRAMESRV_OK) {
        unlink(path);
        fsp_cuda_forget_epoch(p, epoch);
        fsi_pool_unref(pool);
        return rc;
    }
    *out = pool;
    return FRAMESRV_OK;
}

/* 13 steps 2 to 5 once the free slots are reserved (`reserved`; `kept`: the others). */
static void switch_pool(framesrv_producer *p, fsi_pool *pool, uint64_t reserved, uint64_t kept)
{
    if (p->pool != NULL) {
        bool keep = kept != 0 && p->retired_count < FS_MAX_SLOTS;
        if (keep) {
            /* CUDA: the allocation stays for NAME.cuda while a slot holds a frame of it. */
            p->retired_pool[p->retired_count] = p->cuda ? p->pool : NULL;
            p->retired_epoch[p->retired_count] = p->epoch;
            p->retired_slots[p->retired_count++] = kept;
        } else {
            fsp_unlink_pool(p, p->epoch);
        }
        if (!keep || !p->cuda) fsi_pool_unref(p->pool);   /* frames held keep their own reference */
    }
    fsp_cuda_reset_slots(p, reserved);
    for (uint32_t i = 0; i < p->slot_count; i++)
        if (reserved & (1ull << i)) fsp_retire_slot(p, i);
    p->pool = pool;
    p->epoch = pool->epoch;
    fs_stat_set(&p->ctl->slot_stride, pool->slot_stride);
    fs_stat_set(&p->ctl->pool_size, pool->size);
    if (pool->device) {   /* published by the epoch's release store, as slot_stride (4.5) */
        fs_stat_set(&p->ctl->device_slot_stride, pool->device->slot_stride);
        fs_stat_set(&p->ctl->device_pool_size, pool->device->size);
    }
    fs_store_u64(&p->ctl->latest, 0);   /* a live consumer never starts from an old-pool frame */
    p->has_latest = false;
    for (uint32_t i = 0; i < p->slot_count; i++)
        if (reserved & (1ull << i)) __atomic_store_n(&p->slots[i].seq, 0, __ATOMIC_RELAXED);
    fs_store_u64(&p->ctl->epoch, p->epoch);   /* SYNC: release, after stride and size */
    fsp_frame_ready(p);
    for (uint32_t i = 0; i < p->slot_count; i++)
        if (reserved & (1ull << i)) fs_slot_abandon(&p->slots[i]);
    pthread_mutex_lock(&p->lock);
    uint64_t next = p->next_seq;
    pthread_mutex_unlock(&p->lock);
    fsp_announce(p, FS_ANNOUNCE_EPOCH, next, 0, 0, 0, FS_PTS_NONE, true);
}

int fsp_start_epoch(framesrv_producer *p)
{
    uint64_t reserved = 0, kept = 0;
    if (p->pool != NULL)
        for (uint32_t i = 0; i < p->slot_count; i++) {
            if (fs_slot_try_reserve(&p->slots[i])) reserved |= 1ull << i;
            else kept |= 1ull << i;
        }
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    size_t stride = (size_t)((p->layout.slot_bytes + (uint64_t)page - 1) / (uint64_t)page * (uint64_t)page);
    if (p->cuda) stride = FS_CUDA_HEADER_SLOT;   /* headers only: the planes are on the device */
    fsi_pool *pool;
    int rc = create_pool(p, p->epoch + 1, stride, &pool);
    if (rc != FRAMESRV_OK) {
        for (uint32_t i = 0; i < p->slot_count; i++)
            if (reserved & (1ull << i)) fs_slot_abandon(&p->slots[i]);   /* the old epoch goes on */
        return rc;
    }
    switch_pool(p, pool, reserved, kept);
    return FRAMESRV_OK;
}

int fsp_sleep_on_wake(framesrv_producer *p, uint64_t deadline, bool reannounce,
                      bool (*ready)(framesrv_producer *p, void *arg), void *arg)
{
    for (;;) {
        uint32_t w = fs_producer_wait_begin(p->ctl);
        if (ready(p, arg)) {
            fs_producer_wait_end(p->ctl);
            return FRAMESRV_OK;
        }
        int ms = fsi_remaining_ms(deadline, FSP_LONGEST_WAIT_MS);
        if (ms == 0) {
            fs_producer_wait_end(p->ctl);
            return FRAMESRV_TIMEOUT;
        }
        if (reannounce) fsp_reannounce_latest(p);   /* for subscribers only (fd-mode consumers): 1.5 */
        fsi_futex_wait(&p->ctl->wake, w, ms);
        fs_producer_wait_end(p->ctl);
    }
}
