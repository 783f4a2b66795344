/*
 * consumer_cuda.c: a CUDA stream's consumer (PROTOCOL.md 4.5): the memory kinds checked at
 * attach, the device found by its UUID, each epoch's allocation asked for over NAME.cuda and
 * imported, and the fences: the wait for a frame's ready fence before its planes are used
 * (on the application's stream, or on the CPU), and the release fence after the last use.
 */
#include "consumer.h"
#include "cuda_wire.h"
#include "validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long next polls a ready fence not yet written before it queues the stream's wait
 * (PROTOCOL.md 4.5 step 1): $FRAMESRV_READY_SPIN_US (0..1000000 microseconds), else never.
 * bench gpu's A/B of a 50 us poll, three H100 runs: asleep between frames, publish -> ready p50
 * moved by -9 to +8 us (within the runs' spread) for up to 50 us of CPU a frame; busy-polling,
 * it got worse (60 fps: 26 us with it, 17 without; p99 68 and 38 us): such a consumer takes
 * frames before their fences land, and the poll only moves the wait from the GPU to this CPU.
 * So it is off by default, and a consumer with poll_us never polls the fence. */
static uint64_t ready_spin_ns(const framesrv_consumer *c)
{
    if (c->poll_us > 0) return 0;
    const char *v = getenv("FRAMESRV_READY_SPIN_US");
    char *end;
    long us = v && *v ? strtol(v, &end, 10) : -1;
    return us >= 0 && us <= 1000000 && *end == '\0' ? (uint64_t)us * 1000u : 0;
}

int fsi_consumer_cuda_check(framesrv_consumer *c, fsi_attachment *a)
{
    uint32_t kind = a->ctl->memory;   /* const, validated */
    uint32_t media = a->ctl->media;   /* const, validated (4.6) */
    if (media == FS_MEDIA_AUDIO && c->media != FRAMESRV_MEDIA_AUDIO)
        return fsi_fail(FRAMESRV_E_MEDIA, "stream '%s' carries audio, which this consumer (video frames) cannot read; open it "
                        "with media = FRAMESRV_MEDIA_AUDIO (Python: Consumer(..., media=\"audio\"))", c->stream);
    if (media == FS_MEDIA_VIDEO && c->media == FRAMESRV_MEDIA_AUDIO)
        return fsi_fail(FRAMESRV_E_MEDIA, "stream '%s' carries video, not audio; give this consumer an audio stream "
                        "(framesrv produce's --audio-out NAME)", c->stream);
    char uuid[41];
    fs_cuda_uuid_text(a->ctl->device_uuid, uuid);
    if (kind == FS_MEMORY_CUDA && c->memory != FRAMESRV_MEMORY_CUDA)
        return fsi_fail(FRAMESRV_E_MEMORY, "stream '%s' holds its frames in CUDA memory of device %s, which this consumer (host "
                        "memory) cannot map; open it with memory = FRAMESRV_MEMORY_CUDA and read it with framesrv_consumer_next_on, "
                        "or read a host copy of the stream (framesrv-cuda download --in %s --out %s-host)", c->stream, uuid, c->stream, c->stream);
    if (kind == FS_MEMORY_HOST && c->memory == FRAMESRV_MEMORY_CUDA)
        return fsi_fail(FRAMESRV_E_MEMORY, "stream '%s' holds its frames in host memory, but this consumer asked for CUDA memory; "
                        "open it with memory = FRAMESRV_MEMORY_HOST (the default) and copy the planes to the device, or have its "
                        "producer write CUDA memory (framesrv-cuda upload --in %s --out %s-cuda)", c->stream, c->stream, c->stream);
    if (kind == FS_MEMORY_HOST) return FRAMESRV_OK;
    if (!(a->cuda = calloc(1, sizeof *a->cuda))) return fsi_fail(FRAMESRV_E_NO_MEMORY, "out of memory attaching to '%s'", c->stream);
    a->cuda->fence = (fs_slot_fence *)((uint8_t *)a->ctl + a->ctl->fence_offset);
    a->cuda->ready_spin_ns = ready_spin_ns(c);
    return fsi_device_by_uuid(&a->cuda->device, a->ctl->device_uuid, c->stream);
}

int fsi_consumer_cuda_attached(fsi_attachment *a)
{
    if (!a->cuda) return FRAMESRV_OK;
    return fsi_fences_register(&a->cuda->device, &a->cuda->fences, a->ctl, a->ctl_size);
}

void fsi_consumer_cuda_free(fsi_attachment *a)
{
    if (!a->cuda) return;
    fsi_fences_unregister(&a->cuda->device, &a->cuda->fences);
    fsi_device_release(&a->cuda->device);
    free(a->cuda);
    a->cuda = NULL;
}

/* The current epoch's device slot stride and pool size, read while `epoch` is current
 * (published by it, 4.5); 0 when another epoch is current by then. */
static uint64_t device_stride(const fsi_attachment *a, uint64_t epoch, uint64_t *pool_size)
{
    if (fs_load_u64(&a->ctl->epoch) != epoch) return 0;   /* SYNC: acquire, pairs with the epoch's store */
    *pool_size = fs_peek_u64(&a->ctl->device_pool_size);
    uint64_t stride = fs_peek_u64(&a->ctl->device_slot_stride);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return fs_peek_u64(&a->ctl->epoch) == epoch ? stride : 0;
}

int fsi_consumer_cuda_import(framesrv_consumer *c, fsi_attachment *a, fsi_pool *pool)
{
    char path[PATH_MAX + 64];
    uint64_t published = 0, stride = device_stride(a, pool->epoch, &published), size = 0;
    if (stride == 0)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "%s/%s.ctl: epoch %llu is no longer current, so its device slot stride is not "
                        "published: its frames are skipped", c->dir, c->stream, (unsigned long long)pool->epoch);
    int fd = -1, rc = fsi_path(path, sizeof path, c->dir, c->stream, ".cuda");
    if (rc == FRAMESRV_OK) rc = fsi_cuda_ask(path, c->stream, a->index, pool->epoch, &fd, &size);
    if (rc != FRAMESRV_OK) return rc;
    /* The reply's size is the allocation's: it must be the one the epoch published and hold every slot. */
    if (size != published || stride > size / a->slot_count)
        rc = fsi_fail(FRAMESRV_E_BAD_DATA, "%s: epoch %llu's allocation has %llu bytes, the control segment says %llu for %u "
                      "slots of %llu", path, (unsigned long long)pool->epoch, (unsigned long long)size,
                      (unsigned long long)published, a->slot_count, (unsigned long long)stride);
    if (rc == FRAMESRV_OK) rc = fsi_device_memory_import(&a->cuda->device, fd, (size_t)size, (size_t)stride, &pool->device);
    close(fd);
    return rc;
}

/* Every frame below the lowest unfinished one was written: a slot's frames up to its ready fence were. */
void fsi_consumer_cuda_producer_gone(framesrv_consumer *c, fsi_attachment *a)
{
    uint64_t first = 0;
    for (uint32_t k = 0; a->cuda && k < a->slot_count; k++) {
        uint64_t seq = fs_peek_u64(&fsi_att_slot(a, k)->seq), ready = fs_fence_load(&a->cuda->fence[k].ready);
        if (seq == 0 || (int64_t)(ready - seq) >= 0) continue;
        if (first == 0 || ready + 1 < first) first = ready + 1;
        fsi_fence_raise(&a->cuda->fence[k].ready, seq);
    }
    if (first == 0) return;
    pthread_mutex_lock(&c->lock);
    c->stats.first_unready = first;
    pthread_mutex_unlock(&c->lock);
}

void fsi_consumer_cuda_quiesce(framesrv_consumer *c, fsi_attachment *a)
{
    if (!a->cuda || !a->cuda->device.ctx) return;
    if (!fsi_pidfd_alive(a->producer_fd)) fsi_consumer_cuda_producer_gone(c, a);
    if (fsi_device_push(&a->cuda->device) != FRAMESRV_OK) return;
    a->cuda->device.cu->cuCtxSynchronize();
    fsi_device_pop(&a->cuda->device);
}

void fsi_consumer_cuda_released(framesrv_frame *f)
{
    fsi_attachment *a = f->attachment;
    if (!a->cuda || __atomic_load_n(&a->evicted, __ATOMIC_ACQUIRE)) return;
    fsi_fence_raise(&a->cuda->fence[f->slot].release[a->index], f->info.seq);
}

/* PROTOCOL.md 4.5 step 1: a ready fence that has not landed yet is polled on the CPU for up
 * to ready_spin_ns (0 unless $FRAMESRV_READY_SPIN_US asks) before a wait is queued. A spin that
 * misses (the producer's stream is still writing) has the next 64 frames queue their waits at
 * once. Only next's thread calls it (spin_rest is not shared). */
static bool spin_for_ready(fsi_consumer_cuda *cu, const uint64_t *word, uint64_t seq)
{
    if (cu->ready_spin_ns == 0) return false;
    if (cu->spin_rest > 0) {
        cu->spin_rest--;
        return false;
    }
    if (fsi_fence_spin(word, seq, fsi_monotonic_ns() + cu->ready_spin_ns)) return true;
    cu->spin_rest = 64;
    return false;
}

/* Orders the use of f's planes after its ready fence: queued on `stream` (`spin`: after a
 * short poll on the CPU, see spin_for_ready), or waited for on the CPU. A dead producer's
 * frames are readied here (their writes died with it). */
static int wait_ready(framesrv_frame *f, void *stream, bool on_stream, bool spin)
{
    fsi_attachment *a = f->attachment;
    uint64_t *word = &a->cuda->fence[f->slot].ready;
    if (fsi_fence_reached(word, f->info.seq)) return FRAMESRV_OK;
    if (!fsi_pidfd_alive(a->producer_fd)) {
        fsi_consumer_cuda_producer_gone(f->consumer, a);
        return FRAMESRV_OK;
    }
    if (on_stream && spin && spin_for_ready(a->cuda, word, f->info.seq)) return FRAMESRV_OK;
    int rc = on_stream ? fsi_fence_wait(&a->cuda->device, &a->cuda->fences, stream, word, f->info.seq)
                       : fsi_fence_cpu_wait(word, f->info.seq, FSI_FENCE_CPU_WAIT_NS) ? FRAMESRV_OK : FRAMESRV_TIMEOUT;
    if (rc == FRAMESRV_TIMEOUT)
        fsi_fail(FRAMESRV_E_BAD_DATA, "stream '%s' slot %u: frame %llu's ready fence did not come within 2 s: frame skipped",
                 f->consumer->stream, f->slot, (unsigned long long)f->info.seq);
    return rc;
}

int fsi_consumer_cuda_wait_on(framesrv_frame *f, void *stream)
{
    if (fsi_forked(f->consumer->opener)) return fsi_consumer_forked(f->consumer);
    int rc = wait_ready(f, stream, true, false);   /* any thread: no spin (spin_rest is next's) */
    return rc == FRAMESRV_TIMEOUT ? FRAMESRV_E_BAD_DATA : rc;
}

int fsi_consumer_next_ready(framesrv_consumer *c, void *stream, bool on_stream, int timeout_ms, framesrv_frame **frame)
{
    uint64_t deadline = fsi_deadline(timeout_ms);
    for (;;) {
        int rc = fsi_consumer_next_frame(c, timeout_ms < 0 ? -1 : fsi_remaining_ms(deadline, INT32_MAX), frame);
        if (rc != FRAMESRV_OK || !(*frame)->pool->device) return rc;
        if ((rc = wait_ready(*frame, stream, on_stream, true)) == FRAMESRV_OK) return rc;
        framesrv_frame_release(*frame);   /* nothing of ours uses it: its release fence is stored */
        *frame = NULL;
        if (rc != FRAMESRV_TIMEOUT) return rc;
        pthread_mutex_lock(&c->lock);
        c->stats.bad_frames++;
        pthread_mutex_unlock(&c->lock);
    }
}

int framesrv_consumer_next_on(framesrv_consumer *c, void *stream, int timeout_ms, framesrv_frame **frame)
{
    if (frame) *frame = NULL;
    if (!c || !frame) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_consumer_next_on: NULL argument");
    if (fsi_forked(c->opener)) return fsi_consumer_forked(c);
    if (c->memory != FRAMESRV_MEMORY_CUDA)
        return fsi_fail(FRAMESRV_E_MEMORY, "framesrv_consumer_next_on: the consumer of '%s' reads host memory: use "
                        "framesrv_consumer_next (or open it with memory = FRAMESRV_MEMORY_CUDA)", c->stream);
    return fsi_consumer_next_ready(c, stream, true, timeout_ms, frame);
}

int framesrv_frame_release_on(framesrv_frame *f, void *stream)
{
    if (!f) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_frame_release_on: frame is NULL");
    if (f->consumer && fsi_forked(f->consumer->opener)) return fsi_consumer_forked(f->consumer);   /* a no-op */
    fsi_attachment *a = f->attachment;
    int rc = FRAMESRV_OK;
    if (f->consumer && a->cuda && f->pool->device && !__atomic_load_n(&a->evicted, __ATOMIC_ACQUIRE)) {
        rc = fsi_fence_signal(&a->cuda->device, &a->cuda->fences, stream, &a->cuda->fence[f->slot].release[a->index], f->info.seq);
        f->fence_queued = rc == FRAMESRV_OK;
        if (rc != FRAMESRV_OK && fsi_device_push(&a->cuda->device) == FRAMESRV_OK) {
            a->cuda->device.cu->cuStreamSynchronize((fs_cuda_stream)stream);   /* then the CPU stores it */
            fsi_device_pop(&a->cuda->device);
        }
    }
    framesrv_frame_release(f);
    return rc;
}
