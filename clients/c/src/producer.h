/*
 * producer.h: the producer's private state, shared by producer_*.c. Not installed.
 *
 * Threads: the application's thread (one at a time: reserve, publish, ...) and the
 * producer's background thread (admission, reclaim: producer_watch.c). `lock` is the one
 * lock of PROTOCOL.md 12.2: admission, publishing and reclaim run under it, so first_seq,
 * the sequence numbers and the reservation masks agree exactly. Fields marked (L) are
 * read and written under `lock`; (A) only by the application's thread; (W) only by the
 * background thread (and by close once it has joined it). A CUDA stream's producer has a
 * third thread, NAME.cuda's server (producer_cuda_serve.c), and its state in `cuda`.
 */
#ifndef FRAMESRV_PRODUCER_H
#define FRAMESRV_PRODUCER_H

#include "frame.h"
#include "pixfmt.h"

#include <limits.h>
#include <pthread.h>

/* The longest a producer thread sleeps on a futex before it looks again (17: a segment
 * replaced by the SIGBUS guard's private pages no longer delivers wakes). */
#define FSP_LONGEST_WAIT_MS 1000
/* How long a producer that found no free slot looks again before it sleeps on `wake` (20 us,
 * Swift's Producer.slotSpinNanos). A consumer that keeps up releases a slot within
 * microseconds; catching that release awake spares both sides the futex round trip (this
 * FUTEX_WAIT, the consumer's FUTEX_WAKE, two context switches) that would otherwise come with
 * nearly every frame while the consumers are the slower side. */
#define FSP_SLOT_SPIN_NS 20000u
/* How often the background thread polls the pidfds of admitted consumers (12.5). */
#define FSP_WATCH_POLL_MS 20

/* One epoch's allocation as NAME.cuda serves it: its own duplicate of the descriptor. */
typedef struct fsp_export {
    uint64_t epoch;
    int fd;
    uint64_t size;
} fsp_export;

/* A CUDA stream's producer (PROTOCOL.md 4.5; producer_cuda*.c). */
typedef struct fsp_cuda {
    fsi_device device;
    fsi_fences fences;               /* the control segment, registered                         */
    fs_slot_fence *fence;            /* the fence table, at fence_offset                        */
    int listen_fd, stop_fd;          /* NAME.cuda and the eventfd that stops its server          */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;            /* exports: the server thread reads, the application thread changes */
    fsp_export exports[FS_MAX_SLOTS + 1];
    uint32_t export_count;
    uint64_t waited_mask[FS_MAX_SLOTS];   /* (L) whose release fences the last reserve of the slot waited for, */
    uint64_t waited_seq[FS_MAX_SLOTS];    /* (L) ... and the value (4.5 step 3 needs both for a dead reader) */
    uint64_t quarantine[FS_MAX_CONSUMERS];/* (L) slots whose fence was written for dead entry i: not reused before */
    pid_t quarantine_pid[FS_MAX_CONSUMERS];
    uint64_t quarantined;            /* (L, atomic reads) entries kept from reuse until their slots are reserved again */
} fsp_cuda;

struct framesrv_producer {
    char name[FS_NAME_MAX + 1];
    char client_name[32];            /* what monitors show (the control segment's producer_name) */
    char dir[PATH_MAX];
    framesrv_producer_options opt;   /* normalised: slots, live_max_held, colour set */
    int lock_fd;                     /* NAME.lock, held with flock for life */
    uint64_t start_time;             /* this process's field 22 */
    pid_t opener;                    /* this process: any other (a forked child) is refused */

    /* The control segment, with this producer's own count and record addresses (17). */
    fs_control *ctl;
    size_t ctl_size;
    uint32_t slot_count;
    fs_slot_ctl *slots;
    fs_consumer *consumers;

    void *zmq_context, *pub;         /* (A) ZeroMQ sockets are not thread-safe; pub is an XPUB */
    int64_t subscribers;             /* (A) subscriptions counted from pub (5): 0 = send nothing */
    uint64_t last_drain_ns;          /* (A) when pub's subscription messages were last read */

    pthread_mutex_t lock;
    pthread_t thread;
    bool thread_started;
    bool running;                    /* (L) the background thread goes on */
    uint64_t next_seq;               /* (L) */
    uint64_t lossless_mask;          /* (L) */
    int watched_fd[FS_MAX_CONSUMERS];/* (L, written by W) pidfd of an admitted consumer, -1 */
    pid_t watched_pid[FS_MAX_CONSUMERS];
    uint64_t consumers_now;          /* (L) entries watched */
    uint64_t reclaimed;              /* (L) */
    framesrv_frame *reserved;        /* (L, written by A) the frame between reserve and publish */
    uint32_t kept;                   /* (L) frames published with publish_keep, not released */
    bool closed;                     /* (L) close ran: the last kept release frees the producer */

    /* (A) the pool, the format and the newest frame */
    fsi_pool *pool;                  /* the current epoch's, one reference */
    uint64_t epoch;
    uint64_t retired_epoch[FS_MAX_SLOTS];   /* older pools whose files stay (13 step 2) */
    uint64_t retired_slots[FS_MAX_SLOTS];   /* their slots still holding old frames */
    uint32_t retired_count;
    const fsi_pix_format *format;
    uint32_t width, height;
    fsi_layout layout;
    fs_frame template_header;        /* the fields that depend only on the format */
    uint32_t next_hint;              /* reservation rotates from here (12.2) */
    bool has_latest;
    uint64_t latest_seq;
    uint32_t latest_slot;
    bool ended;
    framesrv_producer_stats stats;   /* published, dropped, abandoned, blocked_ns */
    fsp_cuda *cuda;                  /* CUDA streams only, else NULL                          */
    fsi_pool *retired_pool[FS_MAX_SLOTS];   /* CUDA: the retired epochs' allocations (served while kept) */
    uint32_t dropped_since_publish;  /* live source: drops the next frame's header reports */
    /* (A) an audio stream (opt.media FRAMESRV_MEDIA_AUDIO; producer_audio.c) */
    const fsi_sample_format *samples;/* its sample format, NULL for a video stream */
    int64_t audio_pts;               /* the default pts of the next frame: samples published so far */
};

/* Whether the current pool holds a frame of the current format (else a new epoch, 13). A
 * CUDA slot's planes start at its device slot, without the 256-byte header. */
static inline bool fsp_pool_fits(const framesrv_producer *p)
{
    if (p->pool == NULL) return false;
    if (p->pool->device) return p->layout.slot_bytes - sizeof(fs_frame) <= p->pool->device->slot_stride;
    return p->layout.slot_bytes <= p->pool->slot_stride;
}

/* FRAMESRV_E_FORKED with its line when this process did not open p (a forked child), else OK. */
static inline int fsp_forked(const framesrv_producer *p)
{
    return fsi_forked(p->opener) ? fsi_fail_forked("producer", p->name, p->opener) : FRAMESRV_OK;
}
/* producer_fork.c: in a forked child, close and a kept frame's release free the child's copies only. */
FSI_HIDDEN void fsp_close_forked(framesrv_producer *p);
FSI_HIDDEN void fsp_release_forked(framesrv_frame *frame);

/* producer_open.c */
FSI_HIDDEN int fsp_create_file(const char *path, size_t size, void **base);

/* producer_slots.c */
FSI_HIDDEN int fsp_set_format(framesrv_producer *p, uint32_t width, uint32_t height, int pix_fmt);
FSI_HIDDEN int fsp_start_epoch(framesrv_producer *p);
FSI_HIDDEN bool fsp_any_slot_held(framesrv_producer *p);
/* Slot `slot` was taken for a current-epoch frame: it no longer keeps a retired pool. */
FSI_HIDDEN void fsp_retire_slot(framesrv_producer *p, uint32_t slot);
/* Bumps `wake` and futex-wakes whoever sleeps on it. */
FSI_HIDDEN void fsp_wake(framesrv_producer *p);
/* fs_frame_ready, and FUTEX_WAKE on frame_wake when a consumer sleeps there (11): after every
 * publish, admission, epoch, end and close. Any thread. */
FSI_HIDDEN void fsp_frame_ready(framesrv_producer *p);
/* Sleeps on `wake` (the producer_waiting handshake of 12.3) until ready(p, arg) returns
 * true (FRAMESRV_OK) or the deadline passes (FRAMESRV_TIMEOUT). */
FSI_HIDDEN int fsp_sleep_on_wake(framesrv_producer *p, uint64_t deadline, bool reannounce,
                                 bool (*ready)(framesrv_producer *p, void *arg), void *arg);

/* producer_audio.c: an audio stream's format (PROTOCOL.md 4.6). */
FSI_HIDDEN int fsp_audio_options(framesrv_producer_options *o);      /* checks them (media audio only) */
FSI_HIDDEN int fsp_audio_set_format(framesrv_producer *p);           /* the layout and header template */
FSI_HIDDEN void fsp_audio_preset(framesrv_producer *p, framesrv_frame *f);   /* reserve's (w) fields */
FSI_HIDDEN int fsp_audio_check(framesrv_producer *p, const framesrv_frame_info *in);
/* publish: the header's audio fields for in->nb_samples (a planar frame's rows moved together). */
FSI_HIDDEN void fsp_audio_header(framesrv_producer *p, framesrv_frame *f, fs_frame *h);

/* producer_stream.c */
FSI_HIDDEN void fsp_count_subscribers(framesrv_producer *p, uint64_t now);
/* count: drain subscriptions first (at most once per ms); a frame's announcement goes by
 * the count its reserve took. */
FSI_HIDDEN void fsp_announce(framesrv_producer *p, uint16_t kind, uint64_t seq, uint32_t slot,
                             uint32_t flags, uint64_t capture_ns, int64_t pts, bool count);
FSI_HIDDEN void fsp_reannounce_latest(framesrv_producer *p);
FSI_HIDDEN void fsp_unlink_pool(framesrv_producer *p, uint64_t epoch);

/* producer_watch.c */
FSI_HIDDEN void *fsp_watch_main(void *producer);
FSI_HIDDEN void fsp_stop_watching(framesrv_producer *p);

/* producer.c */
FSI_HIDDEN void fsp_free(framesrv_producer *p);

/* producer_cuda.c: a CUDA stream's producer. Each is a no-op (or host behaviour) when
 * p->cuda is NULL, so the host path pays one pointer test. */
FSI_HIDDEN int fsp_cuda_open(framesrv_producer *p);                  /* the device, before any file */
FSI_HIDDEN void fsp_cuda_fill_control(framesrv_producer *p);         /* memory, fence_offset, device fields */
FSI_HIDDEN int fsp_cuda_start(framesrv_producer *p);                 /* fences registered, NAME.cuda bound and served */
FSI_HIDDEN void fsp_cuda_close(framesrv_producer *p);                /* server stopped, NAME.cuda removed */
FSI_HIDDEN void fsp_cuda_free(framesrv_producer *p);
/* The epoch's device allocation for a new pool, and its export for NAME.cuda. */
FSI_HIDDEN int fsp_cuda_new_pool(framesrv_producer *p, fsi_pool *pool, uint64_t slot_bytes);
FSI_HIDDEN void fsp_cuda_forget_epoch(framesrv_producer *p, uint64_t epoch);
/* 4.5 step 5: the fences and readers of the slots reserved for an epoch change. */
FSI_HIDDEN void fsp_cuda_reset_slots(framesrv_producer *p, uint64_t reserved);
/* 4.5 step 2 after slot `slot` was taken: queue (stream) or wait (CPU) for the release fences
 * of its previous frame's readers. FRAMESRV_TIMEOUT when a CPU wait ran out. */
FSI_HIDDEN int fsp_cuda_after_take(framesrv_producer *p, uint32_t slot, void *stream, bool on_stream);
/* 4.5 step 1 before publishing frame seq in slot: the ready fence, on the stream or now. */
/* framesrv_frame_wait_on of a CUDA producer's frame: its slot's reader fences, on `stream`. */
FSI_HIDDEN int fsp_cuda_wait_on(framesrv_frame *frame, void *stream);
FSI_HIDDEN int fsp_cuda_ready(framesrv_producer *p, uint32_t slot, uint64_t seq, void *stream, bool on_stream);
/* 4.5 step 3, under p->lock, before a dead consumer's holder bits are cleared: its fences;
 * returns whether its entry must stay out of use for now (the quarantine). */
FSI_HIDDEN bool fsp_cuda_reclaim(framesrv_producer *p, uint32_t entry, pid_t pid, bool died);
/* Slot `slot` was reserved again: quarantined entries waiting for it may go. Under p->lock. */
FSI_HIDDEN void fsp_cuda_slot_retaken(framesrv_producer *p, uint32_t slot);
FSI_HIDDEN bool fsp_cuda_quarantined(const framesrv_producer *p, uint32_t entry);

/* producer_cuda_serve.c: NAME.cuda */
FSI_HIDDEN int fsp_cuda_bind(framesrv_producer *p);
FSI_HIDDEN void *fsp_cuda_serve_main(void *producer);

#endif /* FRAMESRV_PRODUCER_H */
