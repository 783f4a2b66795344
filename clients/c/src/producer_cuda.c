/*
 * producer_cuda.c: a CUDA stream's producer (PROTOCOL.md 4.5): the device, the control
 * segment's CUDA fields and fence table, one device allocation per epoch (kept while a slot
 * holds a frame of it, for NAME.cuda), the fences of reserve (read before recycle) and publish
 * (write before read), and a dead consumer's fences (4.5 step 3). NAME.cuda's server is
 * producer_cuda_serve.c.
 */
#include "producer.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fsp_cuda_open(framesrv_producer *p)
{
    if (p->opt.memory != FRAMESRV_MEMORY_CUDA) return FRAMESRV_OK;
    fsp_cuda *k = calloc(1, sizeof *k);
    if (!k) return fsi_fail(FRAMESRV_E_NO_MEMORY, "producer: out of memory");
    k->listen_fd = k->stop_fd = -1;
    pthread_mutex_init(&k->lock, NULL);
    p->cuda = k;
    return fsi_device_by_ordinal(&k->device, p->opt.cuda_device);
}

void fsp_cuda_fill_control(framesrv_producer *p)
{
    if (!p->cuda) return;
    fs_control *c = p->ctl;
    c->memory = FS_MEMORY_CUDA;
    c->fence_offset = (uint32_t)fs_control_fence_offset(p->slot_count);
    memcpy(c->device_uuid, p->cuda->device.uuid, sizeof c->device_uuid);
    c->device_ordinal = (uint32_t)p->cuda->device.ordinal;
    p->cuda->fence = (fs_slot_fence *)((uint8_t *)c + c->fence_offset);
}

int fsp_cuda_start(framesrv_producer *p)
{
    fsp_cuda *k = p->cuda;
    if (!k) return FRAMESRV_OK;
    int rc = fsi_fences_register(&k->device, &k->fences, p->ctl, p->ctl_size);
    if (rc == FRAMESRV_OK) rc = fsp_cuda_bind(p);
    if (rc != FRAMESRV_OK) return rc;
    int e = pthread_create(&k->thread, NULL, fsp_cuda_serve_main, p);
    if (e != 0) return fsi_fail(FRAMESRV_E_SYSTEM, "start the NAME.cuda server thread: error %d", e);
    k->thread_started = true;
    return FRAMESRV_OK;
}

void fsp_cuda_close(framesrv_producer *p)
{
    fsp_cuda *k = p->cuda;
    if (!k) return;
    if (k->thread_started) {
        uint64_t one = 1;
        if (write(k->stop_fd, &one, sizeof one) != (ssize_t)sizeof one) {}   /* the server polls it */
        pthread_join(k->thread, NULL);
        k->thread_started = false;
    }
    if (k->listen_fd >= 0) {
        char path[PATH_MAX];
        if (fsi_path(path, sizeof path, p->dir, p->name, ".cuda") == FRAMESRV_OK) unlink(path);
        close(k->listen_fd);
        k->listen_fd = -1;
    }
}

void fsp_cuda_free(framesrv_producer *p)
{
    fsp_cuda *k = p->cuda;
    if (!k) return;
    fsp_cuda_close(p);
    if (k->stop_fd >= 0) close(k->stop_fd);
    for (uint32_t i = 0; i < k->export_count; i++) close(k->exports[i].fd);
    for (uint32_t i = 0; i < p->retired_count; i++) fsi_pool_unref(p->retired_pool[i]);
    p->retired_count = 0;
    fsi_fences_unregister(&k->device, &k->fences);
    fsi_device_release(&k->device);
    pthread_mutex_destroy(&k->lock);
    free(k);
    p->cuda = NULL;
}

int fsp_cuda_new_pool(framesrv_producer *p, fsi_pool *pool, uint64_t slot_bytes)
{
    fsp_cuda *k = p->cuda;
    int rc = fsi_device_memory_create(&k->device, slot_bytes, p->slot_count, &pool->device);
    if (rc != FRAMESRV_OK) return rc;
    int fd = dup(pool->device->fd);
    if (fd < 0) return fsi_fail_errno("dup the allocation's descriptor");
    pthread_mutex_lock(&k->lock);
    k->exports[k->export_count++] = (fsp_export){ .epoch = pool->epoch, .fd = fd, .size = pool->device->size };
    pthread_mutex_unlock(&k->lock);
    return FRAMESRV_OK;
}

void fsp_cuda_forget_epoch(framesrv_producer *p, uint64_t epoch)
{
    fsp_cuda *k = p->cuda;
    if (!k) return;
    pthread_mutex_lock(&k->lock);
    for (uint32_t i = 0; i < k->export_count; i++)
        if (k->exports[i].epoch == epoch) {
            close(k->exports[i].fd);
            k->exports[i] = k->exports[--k->export_count];
            break;
        }
    pthread_mutex_unlock(&k->lock);
}

void fsp_cuda_reset_slots(framesrv_producer *p, uint64_t reserved)
{
    fsp_cuda *k = p->cuda;
    if (!k) return;
    pthread_mutex_lock(&p->lock);
    for (uint32_t s = 0; s < p->slot_count; s++) {
        if (!(reserved & (1ull << s))) continue;
        fs_slot_take_readers(&p->slots[s]);
        for (uint32_t i = 0; i < FS_MAX_CONSUMERS; i++) fs_fence_store(&k->fence[s].release[i], 0);
        fs_fence_store(&k->fence[s].ready, 0);
        k->waited_mask[s] = 0;
    }
    pthread_mutex_unlock(&p->lock);
}

/* A reservation given up before anything was written: the readers go back and the slot
 * keeps its frame and seq (unlike fs_slot_abandon: nothing was overwritten). */
static void untake(framesrv_producer *p, uint32_t slot, uint64_t readers)
{
    fs_slot_add_reader(&p->slots[slot], readers);
    __atomic_store_n(&p->slots[slot].holders, 0, __ATOMIC_RELEASE);
    fsp_wake(p);
}

int fsp_cuda_after_take(framesrv_producer *p, uint32_t slot, void *stream, bool on_stream)
{
    fsp_cuda *k = p->cuda;
    fs_slot_ctl *s = &p->slots[slot];
    uint64_t readers = fs_slot_take_readers(s), previous = fs_peek_u64(&s->seq);
    pthread_mutex_lock(&p->lock);
    k->waited_mask[slot] = readers;
    k->waited_seq[slot] = previous;
    fsp_cuda_slot_retaken(p, slot);
    pthread_mutex_unlock(&p->lock);
    for (uint64_t left = readers; left; left &= left - 1) {
        uint64_t *word = &k->fence[slot].release[__builtin_ctzll(left)];
        int rc = on_stream ? fsi_fence_wait(&k->device, &k->fences, stream, word, previous)
                           : fsi_fence_cpu_wait(word, previous, FSI_FENCE_CPU_WAIT_NS) ? FRAMESRV_OK : FRAMESRV_TIMEOUT;
        if (rc == FRAMESRV_TIMEOUT)
            fsi_fail(FRAMESRV_TIMEOUT, "reserve on stream '%s': slot %u's consumer entry %d did not release frame %llu within 2 s",
                     p->name, slot, __builtin_ctzll(left), (unsigned long long)previous);
        if (rc != FRAMESRV_OK) {
            untake(p, slot, readers);
            return rc;
        }
    }
    return FRAMESRV_OK;
}

/* The waits fsp_cuda_after_take queued for the slot's previous readers, on another stream. */
int fsp_cuda_wait_on(framesrv_frame *f, void *stream)
{
    framesrv_producer *p = f->producer;
    if (fsi_forked(p->opener)) return fsp_forked(p);
    pthread_mutex_lock(&p->lock);
    bool reserved = f == p->reserved;
    uint64_t readers = p->cuda->waited_mask[f->slot], previous = p->cuda->waited_seq[f->slot];
    pthread_mutex_unlock(&p->lock);
    if (!reserved) return FRAMESRV_OK;   /* published (kept): its planes are done being written */
    for (uint64_t left = readers; left; left &= left - 1) {
        uint64_t *word = &p->cuda->fence[f->slot].release[__builtin_ctzll(left)];
        int rc = fsi_fence_wait(&p->cuda->device, &p->cuda->fences, stream, word, previous);
        if (rc == FRAMESRV_TIMEOUT)
            return fsi_fail(FRAMESRV_E_BAD_DATA, "framesrv_frame_wait_on: stream '%s' slot %u: consumer entry %d did not release "
                            "frame %llu within 2 s", p->name, f->slot, __builtin_ctzll(left), (unsigned long long)previous);
        if (rc != FRAMESRV_OK) return rc;
    }
    return FRAMESRV_OK;
}

int fsp_cuda_ready(framesrv_producer *p, uint32_t slot, uint64_t seq, void *stream, bool on_stream)
{
    fsp_cuda *k = p->cuda;
    uint64_t *word = &k->fence[slot].ready;
    if (on_stream) return fsi_fence_signal(&k->device, &k->fences, stream, word, seq);
    fs_fence_store(word, seq);   /* SYNC: release: the caller's writes are complete */
    return FRAMESRV_OK;
}

bool fsp_cuda_reclaim(framesrv_producer *p, uint32_t entry, pid_t pid, bool died)
{
    fsp_cuda *k = p->cuda;
    if (!k || !died) return false;
    uint64_t bit = 1ull << entry;
    for (uint32_t s = 0; s < p->slot_count; s++) {
        uint64_t *word = &k->fence[s].release[entry];
        /* A stream of ours may already wait for this fence (the slot was reserved again). */
        if (k->waited_mask[s] & bit) fsi_fence_raise(word, k->waited_seq[s]);
        k->waited_mask[s] &= ~bit;
        if (!(__atomic_load_n(&p->slots[s].readers, __ATOMIC_ACQUIRE) & bit)) continue;
        /* The next reserve of the slot waits for this value: written for the dead reader,
         * whose kernels the driver ended. Until then no new consumer may be entry `entry`,
         * or its wait for the same frame would pass on our value. */
        fsi_fence_raise(word, fs_peek_u64(&p->slots[s].seq));
        k->quarantine[entry] |= 1ull << s;
    }
    if (k->quarantine[entry] == 0) return false;
    k->quarantine_pid[entry] = pid;
    __atomic_fetch_or(&k->quarantined, bit, __ATOMIC_RELEASE);
    return true;
}

void fsp_cuda_slot_retaken(framesrv_producer *p, uint32_t slot)
{
    fsp_cuda *k = p->cuda;
    for (uint64_t left = __atomic_load_n(&k->quarantined, __ATOMIC_ACQUIRE); left; left &= left - 1) {
        uint32_t i = (uint32_t)__builtin_ctzll(left);
        if ((k->quarantine[i] &= ~(1ull << slot)) != 0) continue;
        __atomic_fetch_and(&k->quarantined, ~(1ull << i), __ATOMIC_RELEASE);
        if (fs_load_i32(&p->consumers[i].pid) == k->quarantine_pid[i]) fs_consumer_free(&p->consumers[i]);
    }
}

bool fsp_cuda_quarantined(const framesrv_producer *p, uint32_t entry)
{
    return p->cuda && (__atomic_load_n(&p->cuda->quarantined, __ATOMIC_ACQUIRE) & (1ull << entry)) != 0;
}
