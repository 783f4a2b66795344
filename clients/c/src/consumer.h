/*
 * consumer.h: the consumer's private state, shared by consumer_attach.c (open, attach,
 * reopen, detach, close, info) and consumer_next.c (next, deliver, release). Not installed.
 *
 * A consumer owns at most one current attachment (one producer instance of its stream)
 * and the retired ones whose frames the application still holds (after reopen): a frame
 * points at its attachment, so its release always reaches the control segment its slot
 * lives in, and an attachment is finished (CLOSING, unmapped) when its last frame goes.
 */
#ifndef FRAMESRV_CONSUMER_H
#define FRAMESRV_CONSUMER_H

#include "frame.h"
#include "device.h"

#include <limits.h>
#include <pthread.h>

/* The longest one sleep on frame_wake lasts (PROTOCOL.md 11): the producer's pidfd and the
 * truncation guard are looked at between sleeps, and an idle consumer wakes <= 2/s. */
#define FSI_FRAME_WAIT_MS 500
/* A frame interval under which a consumer spins before it sleeps without a poll_us of its
 * own (PROTOCOL.md 11.3's catch-up spin): 50 us, 20,000 frames a second. */
#define FSI_CATCH_UP_NS 50000u
/* poll_us is at most one second. */
#define FSI_POLL_US_MAX 1000000u
/* The longest one wait for the stream to appear sleeps (inotify may miss a leftover
 * control segment replaced by a new producer). */
#define FSI_ATTACH_POLL_MS 250
/* How long our own holds must block the producer before next says so on stderr. */
#define FSI_HELD_WARN_MS 500
#define FSI_HELD_TIMEOUT_MS 10000

/* A CUDA stream's attachment (PROTOCOL.md 4.5; consumer_cuda.c). */
typedef struct fsi_consumer_cuda {
    fsi_device device;             /* found by the stream's device UUID                          */
    fsi_fences fences;             /* the control segment, registered                            */
    fs_slot_fence *fence;          /* the fence table (validated fence_offset)                   */
    uint64_t ready_spin_ns;        /* how long next_on polls a ready fence before it queues a wait */
    uint32_t spin_rest;            /* frames left that queue their wait at once (a spin missed)    */
} fsi_consumer_cuda;

typedef struct fsi_attachment {
    fs_control *ctl;               /* NAME.ctl, mapped read-write                             */
    size_t ctl_size;
    uint32_t slot_count;           /* validated once; never re-read                            */
    uint32_t index;                /* our consumer entry                                       */
    uint64_t bit;                  /* 1 << index                                               */
    int32_t pid;                   /* ours, as claimed in the entry (no getpid per frame)      */
    fs_consumer *entry;
    int32_t producer_pid;
    uint64_t producer_start_time;
    int producer_fd;               /* pidfd: readable once the producer exits                  */
    bool producer_exited;
    void *sock;                    /* ZeroMQ SUB, connected by framesrv_consumer_fd only, else NULL */
    int mode;                      /* FS_MODE_LOSSLESS until demoted (12.6), or FS_MODE_LIVE    */
    uint32_t live_max_held;        /* max(1, ctl->live_max_held)                               */
    uint64_t expected;             /* lossless: next seq owed, 0 until admitted                */
    uint64_t last_delivered;       /* newest seq handed out (live: the miss count's base)      */
    bool count_misses_from_start;  /* demoted before delivering anything                        */
    uint32_t held_at_demotion;     /* frames held when demoted: not counted against the limit */
    uint32_t hint;                 /* slot to start the lossless scan at                        */
    uint32_t held;                 /* (lock) frames of this attachment the application holds   */
    fsi_pool *pool;                /* the current epoch's pool (one reference), NULL before    */
    bool retired;                  /* detach requested: CLOSING once held reaches 0             */
    bool evicted;                  /* (atomic) the producer freed our entry: its index may be another's
                                    * now, so neither releases nor CLOSING touch the segment again */
    struct fsi_attachment *next_retired;
    uint64_t last_capture_ns;      /* busy-poll pace: newest frame's capture time...           */
    uint64_t capture_interval_ns;  /* ...and the smoothed interval between captures (0: unknown) */
    fsi_consumer_cuda *cuda;       /* a CUDA stream's, else NULL                                  */
} fsi_attachment;

/* Records addressed with the validated slot count, never the segment's own offsets. */
static inline fs_slot_ctl *fsi_att_slot(const fsi_attachment *a, uint32_t i)
{
    return (fs_slot_ctl *)((uint8_t *)a->ctl + sizeof(fs_control) + (size_t)i * sizeof(fs_slot_ctl));
}
static inline fs_consumer *fsi_att_entry(const fsi_attachment *a, uint32_t i)
{
    return (fs_consumer *)((uint8_t *)a->ctl + sizeof(fs_control) + (size_t)a->slot_count * sizeof(fs_slot_ctl) +
                           (size_t)i * sizeof(fs_consumer));
}

/* Threads: next, reopen, stream_info, stats, fd and close run in one thread at a time (the
 * consumer's thread). framesrv_frame_release may run in any thread, concurrently with next:
 * it gives the slot back in shared memory at once, and does its bookkeeping under `lock`
 * (fields marked (lock)), which next takes only around its own bookkeeping, never while it
 * sleeps or spins. */
struct framesrv_consumer {
    pthread_mutex_t lock;
    pid_t opener;                  /* the process that opened it: any other (a forked child) is refused */
    char dir[PATH_MAX];
    char stream[FS_NAME_MAX + 1];
    char client_name[32];
    int mode;                      /* the requested FS_MODE_*                                   */
    int memory;                    /* the requested FRAMESRV_MEMORY_*                           */
    int media;                     /* the requested FRAMESRV_MEDIA_*                            */
    void *zctx;
    int inotify_fd;                /* the runtime directory: a control segment renamed in      */
    fsi_attachment *att;           /* current, NULL between a failed reopen and the next       */
    fsi_attachment *retired;       /* (lock) attachments with frames still held                */
    framesrv_frame *held;          /* (lock) every frame held, all attachments                  */
    int ended;                     /* 0, FRAMESRV_END or FRAMESRV_GONE: sticky until reopen    */
    int32_t skip_pid;              /* after reopen: the previous producer, not attached again  */
    uint64_t skip_start;
    uint32_t poll_us;              /* next spins this long on frame_wake before it sleeps       */
    framesrv_consumer_stats stats; /* (lock) */
    int held_timeout_ms;           /* FRAMESRV_E_HELD after this long stuck on our own holds; -1 never */
    char held_advice[160];         /* the line's "ways out"                                     */
    uint64_t stuck_since_ns;       /* when next first found our holds blocking the producer; 0 not */
    bool stuck_warned;             /* the line was printed for this wait                        */
};

/* FRAMESRV_E_FORKED with its line when this process did not open c (a forked child), else OK. */
static inline int fsi_consumer_forked(const framesrv_consumer *c)
{
    return fsi_forked(c->opener) ? fsi_fail_forked("consumer", c->stream, c->opener) : FRAMESRV_OK;
}
/* consumer_fork.c: framesrv_consumer_close in a forked child (the child's memory only). */
FSI_HIDDEN void fsi_consumer_close_forked(framesrv_consumer *c);

/* consumer_attach.c */
/* Waits until deadline for a live producer of the stream (other than the previous one,
 * c->skip_pid / c->skip_start) and attaches to it (c->att); lossless, then waits (within
 * the same deadline) for the admission. FRAMESRV_E_NOT_FOUND when none appeared. */
FSI_HIDDEN int fsi_consumer_attach(framesrv_consumer *c, uint64_t deadline);
/* Asks the producer to take the attachment out once nothing of it is held (8.2), then
 * frees it; with frames still held it waits on c->retired for the last release. */
FSI_HIDDEN void fsi_attachment_retire(framesrv_consumer *c, fsi_attachment *a);
/* Called (under c->lock) by a release that made a retired attachment's held count 0. */
FSI_HIDDEN void fsi_attachment_finish(framesrv_consumer *c, fsi_attachment *a);
/* SUB to ipc://DIR/NAME.sock (every message), for framesrv_consumer_fd: connected on its
 * first call, never by next (v2 consumers sleep on frame_wake). */
FSI_HIDDEN int fsi_connect_doorbell(framesrv_consumer *c, fsi_attachment *a);

/* consumer_held.c */
/* The held-frame defaults ($FRAMESRV_HELD_TIMEOUT); FRAMESRV_E_INVALID for a bad value. */
FSI_HIDDEN int fsi_held_defaults(framesrv_consumer *c);
/* Called by next with nothing to deliver: FRAMESRV_E_HELD once our own holds have blocked
 * the producer for held_timeout_ms (the stderr line after FSI_HELD_WARN_MS), else OK. */
FSI_HIDDEN int fsi_held_check(framesrv_consumer *c, const fsi_attachment *a);
/* The wait is over (a frame came, or the holds no longer block). */
static inline void fsi_held_clear(framesrv_consumer *c)
{
    c->stuck_since_ns = 0;
    c->stuck_warned = false;
}

/* consumer_pool.c */
/* Maps the current epoch's pool if it changed (8.1); keeps the old one while frames use it. */
FSI_HIDDEN void fsi_map_current_pool(framesrv_consumer *c, fsi_attachment *a);
/* A reference to the pool of `epoch`: the current one, one a held frame uses, or a new mapping. */
FSI_HIDDEN int fsi_pool_of(framesrv_consumer *c, fsi_attachment *a, uint64_t epoch, fsi_pool **out);

/* consumer_next.c */
/* One frame as framesrv_consumer_next finds it, before any CUDA fence. */
FSI_HIDDEN int fsi_consumer_next_frame(framesrv_consumer *c, int timeout_ms, framesrv_frame **frame);

/* consumer_cuda.c: a CUDA stream's consumer; each a no-op for a host attachment. */
/* Before the claim (8.1 step 2): the stream's memory kind against the consumer's, and the
 * device by its UUID (a->cuda). FRAMESRV_E_MEMORY with one line on a mismatch. */
FSI_HIDDEN int fsi_consumer_cuda_check(framesrv_consumer *c, fsi_attachment *a);
/* After the claim: the fences registered. */
FSI_HIDDEN int fsi_consumer_cuda_attached(fsi_attachment *a);
FSI_HIDDEN void fsi_consumer_cuda_free(fsi_attachment *a);
/* The device part of mapping epoch's pool: its allocation over NAME.cuda, imported. */
FSI_HIDDEN int fsi_consumer_cuda_import(framesrv_consumer *c, fsi_attachment *a, fsi_pool *pool);
/* The producer died: every slot's ready fence written, so no stream of ours waits forever
 * for a frame whose writes died with it (those frames' planes may be incomplete; the lowest
 * such seq goes to c->stats.first_unready). */
FSI_HIDDEN void fsi_consumer_cuda_producer_gone(framesrv_consumer *c, fsi_attachment *a);
/* Before the detach: our streams' queued release fences written (cuCtxSynchronize). */
FSI_HIDDEN void fsi_consumer_cuda_quiesce(framesrv_consumer *c, fsi_attachment *a);
/* framesrv_consumer_next(_on) of a CUDA consumer: the next frame with its ready fence waited
 * for on `stream` (on_stream) or on the CPU; a frame whose fence does not come is skipped. */
FSI_HIDDEN int fsi_consumer_next_ready(framesrv_consumer *c, void *stream, bool on_stream, int timeout_ms, framesrv_frame **frame);
/* framesrv_frame_wait_on of a consumed CUDA frame: its ready fence, waited for on `stream`. */
FSI_HIDDEN int fsi_consumer_cuda_wait_on(framesrv_frame *f, void *stream);
/* A consumed CUDA frame's release without a stream: its release fence, stored now. */
FSI_HIDDEN void fsi_consumer_cuda_released(framesrv_frame *f);

#endif /* FRAMESRV_CONSUMER_H */
