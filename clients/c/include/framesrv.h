/*
 * framesrv.h: libframesrv, the C API of framesrv (protocol version 5; soname libframesrv.so.2).
 *
 * One C library that publishes and consumes framesrv streams. A stream made or read
 * through it is indistinguishable from one made or read by the framesrv command or the
 * Swift library. Every other language (Python, ...) binds this library; the protocol
 * itself lives only here and in the Swift library (protocol/PROTOCOL.md).
 *
 * This is the stable, public API: it never exposes the shared-memory layout
 * (Sources/CFrameServer/include/CFrameServer.h, which stays private to the library).
 *
 *   pkg-config --cflags --libs framesrv
 *
 * Conventions
 *   - A consumer or producer belongs to the process that opened it. In a forked child every
 *     call on it returns FRAMESRV_E_FORKED (one line naming both pids) and does nothing, but
 *     close, which frees the child's copy (ZeroMQ's objects stay: the parent's I/O threads own
 *     them), and framesrv_frame_release of a frame held or kept across the fork, a no-op there
 *     (framesrv_frame_release_on returns FRAMESRV_E_FORKED). Nothing the parent uses (shared
 *     memory, the stream's files and sockets, its threads, the CUDA driver) is touched, so the
 *     parent's consumer or producer goes on as if the child never was. The check costs no
 *     system call: a pthread_atfork handler keeps the process's pid.
 *   - Every function that can fail returns an int status: FRAMESRV_OK (0), a positive
 *     status that is not an error (FRAMESRV_TIMEOUT, FRAMESRV_END, FRAMESRV_GONE), or a
 *     negative FRAMESRV_E_* error. framesrv_last_error() then gives one line naming the
 *     file, the field and the value. Nothing aborts on bad input (bad arguments, bad
 *     shared memory, a dead peer): it is an error code.
 *   - Thread safety is stated per function. "One thread at a time" means per object:
 *     different objects may be used from different threads concurrently.
 *   - Timeouts are in milliseconds; -1 waits forever, 0 does not wait.
 *   - All memory a function returns is owned by the library unless stated.
 */
#ifndef FRAMESRV_H
#define FRAMESRV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libframesrv's version: the one place it is written (the Makefile's VERSION and soname, and
 * framesrv_version(), are read from these). */
#define FRAMESRV_VERSION_MAJOR 2
#define FRAMESRV_VERSION_MINOR 4
#define FRAMESRV_VERSION_PATCH 2
#define FRAMESRV_PROTOCOL_VERSION 5   /* = FS_PROTOCOL_VERSION of the layout header (common.c asserts it) */
#define FRAMESRV_MAX_PLANES 4

/* ------------------------------------------------------------------------- */
/* Status codes and errors                                                    */
/* ------------------------------------------------------------------------- */

typedef enum framesrv_status {
    FRAMESRV_OK = 0,
    FRAMESRV_TIMEOUT = 1,        /* nothing happened within the timeout                      */
    FRAMESRV_END = 2,            /* the stream ended; every frame was delivered                */
    FRAMESRV_GONE = 3,           /* the producer died (or the stream was removed)              */

    FRAMESRV_E_INVALID = -1,     /* a bad argument (NULL, a bad name, size, format, state)     */
    FRAMESRV_E_NOT_FOUND = -2,   /* no such stream (or no running producer) within the timeout */
    FRAMESRV_E_BAD_DATA = -3,    /* shared memory failed validation (file, field, value)       */
    FRAMESRV_E_SYSTEM = -4,      /* a system call failed (the message names it and errno)      */
    FRAMESRV_E_BUSY = -5,        /* the name is taken by a live producer; no free consumer entry */
    FRAMESRV_E_STATE = -6,       /* not valid now (publish twice, too many frames held, ...)   */
    FRAMESRV_E_NO_MEMORY = -7,
    FRAMESRV_E_DETACHED = -8,    /* this consumer was detached by the producer (stall timeout) */
    FRAMESRV_E_ZMQ = -9,         /* ZeroMQ failed                                               */
    FRAMESRV_E_VERSION = -10,    /* the stream's producer speaks another protocol version (the
                                  * message names both); run the same framesrv version on both sides */
    FRAMESRV_E_HELD = -11,       /* lossless next: this consumer's own held frames keep the producer
                                  * from publishing (framesrv_consumer_set_held_timeout) */
    FRAMESRV_E_MEMORY = -12,     /* the stream's frames are in another kind of memory than this consumer
                                  * reads (host or CUDA), or this process cannot use the stream's CUDA
                                  * device (no driver, device not visible); the message names the stream,
                                  * its memory and device, and what to do */
    FRAMESRV_E_FORKED = -13,     /* this consumer or producer was opened by another process (this is a
                                  * forked child): the message names both pids. Nothing is done; the
                                  * child must open its own. Its close (and a release of a frame held
                                  * across the fork) frees the child's memory and touches nothing shared */
    FRAMESRV_E_MEDIA = -14,      /* the stream carries another kind of frames (video or audio, PROTOCOL.md 4.6)
                                  * than this consumer reads (framesrv_consumer_options.media), or a
                                  * call is for the other kind (change_format on an audio stream);
                                  * the message names the stream and its kind */
} framesrv_status;

/* A static name such as "FRAMESRV_E_BAD_DATA". Any thread. */
const char *framesrv_status_name(int status);

/* The message of the last error returned to this thread (thread-local; valid until the
 * next failing call in this thread), "" if none. Any thread. */
const char *framesrv_last_error(void);

/* The library's version, "MAJOR.MINOR.PATCH" of the macros above as the library was built
 * ("2.4.2"). */
const char *framesrv_version(void);

/* ------------------------------------------------------------------------- */
/* Pixel formats (protocol codes; FFmpeg's names)                             */
/* ------------------------------------------------------------------------- */

typedef enum framesrv_pix_fmt {
    FRAMESRV_PIX_OTHER = 0,
    FRAMESRV_PIX_GRAY = 1,
    FRAMESRV_PIX_NV12 = 2,
    FRAMESRV_PIX_YUV420P = 3,
    FRAMESRV_PIX_YUV422P = 4,
    FRAMESRV_PIX_YUV444P = 5,
    FRAMESRV_PIX_YUV420P10LE = 6,
    FRAMESRV_PIX_RGB24 = 7,
    FRAMESRV_PIX_BGRA = 8,
    FRAMESRV_PIX_RGBA = 9,
    FRAMESRV_PIX_P010LE = 10,
    FRAMESRV_PIX_YUV422P10LE = 11,
    FRAMESRV_PIX_YUV444P10LE = 12,
    FRAMESRV_PIX_GRAY16LE = 13,
    FRAMESRV_PIX_BGR24 = 14,
    FRAMESRV_PIX_GBRP = 15,
} framesrv_pix_fmt;

/* FFmpeg's name of a code ("yuv420p"), NULL for an unknown code. Any thread. */
const char *framesrv_pix_fmt_name(int pix_fmt);

/* What a stream carries (PROTOCOL.md 4.6): framesrv_consumer_options.media, framesrv_stream_info.media,
 * framesrv_frame_info.media. */
#define FRAMESRV_MEDIA_VIDEO 0
#define FRAMESRV_MEDIA_AUDIO 1

/* Sample formats of audio frames (framesrv_frame_info.sample_fmt): the protocol's FS_SAMPLE_*
 * codes; the names are FFmpeg's. A planar format keeps one row per channel (plane 0's rows);
 * a packed one interleaves the channels in one row. */
typedef enum framesrv_sample_fmt {
    FRAMESRV_SAMPLE_U8 = 1, FRAMESRV_SAMPLE_S16 = 2, FRAMESRV_SAMPLE_S32 = 3, FRAMESRV_SAMPLE_FLT = 4,
    FRAMESRV_SAMPLE_DBL = 5, FRAMESRV_SAMPLE_U8P = 6, FRAMESRV_SAMPLE_S16P = 7, FRAMESRV_SAMPLE_S32P = 8,
    FRAMESRV_SAMPLE_FLTP = 9, FRAMESRV_SAMPLE_DBLP = 10, FRAMESRV_SAMPLE_S64 = 11, FRAMESRV_SAMPLE_S64P = 12,
} framesrv_sample_fmt;

/* FFmpeg's name of a sample format ("fltp"); NULL for a code outside the table. */
const char *framesrv_sample_fmt_name(int sample_fmt);
/* The code of an FFmpeg name, FRAMESRV_PIX_OTHER (0) if it is not one of the table's. */
int framesrv_pix_fmt_from_name(const char *name);

/* ------------------------------------------------------------------------- */
/* Frames                                                                     */
/* ------------------------------------------------------------------------- */

/* One plane of a frame, as the frame's header describes it (validated: every plane lies
 * inside its slot). `data` points into the shared pool: read-only for a consumer (the
 * pool is mapped PROT_READ), writable for a producer between reserve and publish. A frame
 * of a CUDA stream has no host bytes: `data` is NULL, the geometry is as here, and
 * framesrv_frame_device_plane gives the plane's device address. */
typedef struct framesrv_plane {
    uint8_t *data;             /* first byte of row 0                                     */
    size_t stride;             /* bytes from one row to the next (>= row_bytes)            */
    size_t size;               /* stride * height                                          */
    size_t row_bytes;          /* bytes of pixels in a row: width * components * sample_bytes */
    uint32_t width;            /* samples per row: the frame's width >> the plane's shift  */
    uint32_t height;           /* rows                                                     */
    uint32_t components;       /* interleaved components per sample: 1 (Y, U), 2 (nv12 UV), 3 (rgb24), 4 (bgra) */
    uint32_t sample_bytes;     /* bytes per component: 1, or 2 (little-endian 16-bit words) */
} framesrv_plane;

/* Frame flags (framesrv_frame_info.flags). */
#define FRAMESRV_FRAME_KEY 1u
#define FRAMESRV_FRAME_END_OF_STREAM 2u
#define FRAMESRV_FRAME_DISCONTINUITY 4u

#define FRAMESRV_PTS_NONE INT64_MIN

/* Everything a frame's header says. For a consumer: a validated copy, read-only.
 * For a producer: the fields marked (w) may be set between reserve and publish; publish
 * writes them into the slot's header (the others are the library's and are ignored). */
typedef struct framesrv_frame_info {
    uint64_t seq;              /* sequence number, 1, 2, ... per stream                    */
    uint64_t epoch;            /* pool epoch (changes with the format)                     */
    uint32_t width, height;
    int pix_fmt;               /* framesrv_pix_fmt; 0: see pix_fmt_name                     */
    char pix_fmt_name[32];     /* FFmpeg's name                                            */
    uint32_t plane_count;
    framesrv_plane planes[FRAMESRV_MAX_PLANES];
    uint32_t color_matrix;     /* (w) H.273 MatrixCoefficients (2 unspecified)             */
    uint32_t color_range;      /* (w) 0 unspecified, 1 limited, 2 full                     */
    uint32_t color_primaries;  /* (w) H.273 ColourPrimaries                                */
    uint32_t color_transfer;   /* (w) H.273 TransferCharacteristics                        */
    int32_t sar_num, sar_den;  /* (w) sample aspect ratio, 0/1 unknown                      */
    int64_t pts;               /* (w) in time_base units, FRAMESRV_PTS_NONE unknown         */
    int32_t time_base_num;     /* (w)                                                      */
    int32_t time_base_den;     /* (w)                                                      */
    int64_t duration;          /* (w) in time_base units, 0 unknown                         */
    uint64_t capture_ns;       /* (w) CLOCK_MONOTONIC at capture/decode; 0: publish time    */
    uint32_t flags;            /* (w) FRAMESRV_FRAME_*                                      */
    uint32_t field_order;      /* (w) FFmpeg's AVFieldOrder: 0 unknown, 1 progressive, 2 tt, 3 bb, 4 tb, 5 bt */
    uint32_t chroma_location;  /* (w) FFmpeg's AVChromaLocation: 0 unspecified, 1 left, 2 center, 3 topleft, 4 top, 5 bottomleft, 6 bottom */
    uint64_t publish_ns;       /* CLOCK_MONOTONIC at publish (consumers)                    */
    uint32_t source_dropped;   /* (w) frames a live source dropped just before this one (with
                                  FRAMESRV_FRAME_DISCONTINUITY); a live producer adds its own drops */
    /* Audio frames (media FRAMESRV_MEDIA_AUDIO, PROTOCOL.md 4.6): width, height and pix_fmt are 0,
     * pix_fmt_name is the sample format's name, and plane 0 holds the samples: planar, one row
     * per channel (height = channels, width = nb_samples, components 1); packed, one row
     * (height 1, width = nb_samples, components = channels); sample_bytes 1, 2, 4 or 8. */
    int media;                 /* FRAMESRV_MEDIA_VIDEO or FRAMESRV_MEDIA_AUDIO                */
    int sample_fmt;            /* audio: framesrv_sample_fmt                                  */
    uint32_t sample_rate;      /* audio: samples per second per channel                       */
    uint32_t channels;         /* audio: 1..64                                                */
    uint32_t channel_order;    /* audio: FFmpeg's AVChannelOrder: 0 unspecified, 1 native, 3 ambisonic */
    uint32_t nb_samples;       /* audio: samples per channel in this frame. (w) for a producer: preset
                                  to max_samples, plane 0 then covers max_samples; set it to
                                  1..max_samples before publish, which publishes that many (the
                                  first nb_samples of each row, see framesrv_producer_publish) */
    uint64_t channel_mask;     /* audio, native order: AV_CH_* bits, one per channel          */
} framesrv_frame_info;

typedef struct framesrv_frame framesrv_frame;

/* The frame's header. Valid until the frame is released, published or abandoned.
 * A consumer must not write through it; a producer may set the (w) fields.
 * Any thread that owns the frame. */
framesrv_frame_info *framesrv_frame_info_of(framesrv_frame *frame);

/* ------------------------------------------------------------------------- */
/* CUDA streams (PROTOCOL.md 4.5)                                             */
/*                                                                            */
/* A stream's frames live in host memory (the default) or in the memory of one */
/* CUDA device: one allocation per pool epoch, shared between the processes.  */
/* libframesrv loads the CUDA driver (libcuda.so.1) at run time, only for a    */
/* CUDA stream; it needs no CUDA to build. Every call that takes a stream      */
/* (a CUstream passed as void *; 0 is the legacy default stream) expects one   */
/* of the device's primary context, the context of the CUDA runtime, PyTorch   */
/* and CuPy. Ordering is done with fence words in shared memory that the      */
/* streams themselves write and wait for (cuStreamWriteValue64 and            */
/* cuStreamWaitValue64): no CPU waits for the GPU. A device without 64-bit   */
/* stream memory operations (or FRAMESRV_CUDA_NO_MEMOPS=1) does the same with */
/* cuStreamSynchronize and CPU loads and stores (4.5 step 4).                 */
/* ------------------------------------------------------------------------- */

#define FRAMESRV_MEMORY_HOST 0   /* planes in the shared pool file, read through framesrv_plane.data */
#define FRAMESRV_MEMORY_CUDA 1   /* planes in CUDA device memory, read through framesrv_frame_device_plane */

/* One plane of a CUDA frame. */
typedef struct framesrv_device_plane {
    uint64_t ptr;              /* CUdeviceptr of row 0 (read-only for a consumer: mapped so where the device allows it) */
    size_t pitch;              /* bytes from one row to the next (>= row_bytes)            */
    size_t size;               /* pitch * height                                           */
    size_t row_bytes;          /* bytes of pixels in a row                                 */
    uint32_t width, height;    /* as framesrv_plane                                        */
    uint32_t components, sample_bytes;
} framesrv_device_plane;

/* Plane `plane` (0..plane_count-1) of a frame of a CUDA stream (consumed or reserved):
 * FRAMESRV_OK, FRAMESRV_E_INVALID (NULL, no such plane), FRAMESRV_E_MEMORY (a host frame).
 * Valid while the frame is. Any thread that owns the frame. */
int framesrv_frame_device_plane(framesrv_frame *frame, uint32_t plane, framesrv_device_plane *out);

/* FRAMESRV_MEMORY_HOST or FRAMESRV_MEMORY_CUDA: where the frame's planes are (-1 for NULL). */
int framesrv_frame_memory(const framesrv_frame *frame);

/* Gives a consumed frame back once the work queued on `stream` so far is done: the stream
 * writes the frame's release fence after that work (the CPU does not wait), then the slot
 * goes back as framesrv_frame_release does, at once. The producer's stream waits for the
 * fence before it overwrites the slot, so a kernel still reading it is safe. A host frame
 * (or a producer's kept frame) is released as by framesrv_frame_release. The frame is
 * released in every case; an error (a failed CUDA call: then the library synchronized the
 * stream itself, or could not) is returned. Any thread, as framesrv_frame_release. */
int framesrv_frame_release_on(framesrv_frame *frame, void *stream);

/* Makes work queued on `stream` from now on safe on a CUDA frame's planes, as the stream given
 * to framesrv_consumer_next_on or framesrv_producer_reserve_on already is: for a consumed frame
 * it queues the wait for the frame's ready fence, for a reserved one the waits for the release
 * fences of its slot's previous readers (a frame published with publish_keep needs none). For a
 * second stream of the same frame, such as the one a DLPack consumer names. The CPU does not
 * wait. FRAMESRV_E_MEMORY for a host frame. Any thread that owns the frame. */
int framesrv_frame_wait_on(framesrv_frame *frame, void *stream);

/* Copies the planes of `src` into `dst`, a reserved frame of the same geometry (plane count,
 * rows and bytes per row: the same size and pixel format), each in the memory it is in: host
 * to CUDA (an upload), CUDA to host (a download), CUDA to CUDA on one device, or host to
 * host. No header field is copied: set dst's (w) fields. The copies (one cuMemcpy2DAsync per
 * plane, pitch to pitch) are queued on `stream`, a CUstream of the device's primary context
 * (NULL: its legacy default stream), which must already be ordered after src's ready fence
 * and dst's readers (framesrv_consumer_next_on and framesrv_producer_reserve_on on the same
 * stream do both). When either frame is in host memory the call returns once the copy has
 * ended (it synchronizes `stream`): a host source may be released and a host destination
 * published at once. CUDA to CUDA only queues: publish dst with framesrv_producer_publish_on
 * and release src with framesrv_frame_release_on, on the same stream.
 * A host frame's pool is registered with CUDA (cuMemHostRegister, once per pool epoch,
 * read-only for a consumer's pool), so the copy engine reads and writes the slot itself;
 * where the driver refuses, the driver stages the copy (framesrv_frame_pinned says which).
 * FRAMESRV_E_INVALID when the geometries differ, FRAMESRV_E_MEMORY for frames on two CUDA
 * devices, FRAMESRV_E_SYSTEM with the driver's error when a copy fails. */
int framesrv_frame_copy_on(framesrv_frame *dst, framesrv_frame *src, void *stream);

/* Fills reserved frame `dst`'s planes from `count` source planes (its plane count) of the same
 * geometry that live elsewhere: `planes[i]` is a host address (memory FRAMESRV_MEMORY_HOST) or a
 * CUdeviceptr of dst's device (FRAMESRV_MEMORY_CUDA: an NVDEC surface of FFmpeg's, a tensor),
 * `pitches[i]` the bytes from one of its rows to the next. Into a CUDA frame: one
 * cuMemcpy2DAsync per plane on `stream`, as framesrv_frame_copy_on (a host source is
 * synchronized before the call returns; a device source only queued: publish with
 * framesrv_producer_publish_on on the same stream). Into a host frame: host planes only, copied
 * by the CPU (device planes: FRAMESRV_E_MEMORY). FRAMESRV_E_INVALID for a wrong count, a NULL
 * plane or a pitch under a row's bytes. */
int framesrv_frame_write_on(framesrv_frame *dst, int memory, const uint64_t *planes, const size_t *pitches, uint32_t count,
                            void *stream);

/* Copies the planes of `src` (a consumed or reserved frame, CUDA or host) into `count` planes
 * (its plane count) of the caller's host memory of the same geometry: `planes[i]` a host
 * address, `pitches[i]` the bytes from one of its rows to the next. From a CUDA frame: one
 * cuMemcpy2DAsync per plane on `stream` (which must already be ordered after src's ready
 * fence: framesrv_consumer_next_on on the same stream is), then the stream is synchronized,
 * so the memory holds the frame when the call returns and src may be released at once. From
 * a host frame: rows copied by the CPU. A download for a viewer (framesrv web's previews of a
 * CUDA stream) that needs no host stream of its own. FRAMESRV_E_INVALID for a wrong count, a
 * NULL plane or a pitch under a row's bytes; FRAMESRV_E_SYSTEM with the driver's error. */
int framesrv_frame_read_on(framesrv_frame *src, const uint64_t *planes, const size_t *pitches, uint32_t count, void *stream);

/* 1 when `frame` is a host frame whose pool framesrv_frame_copy_on registered with CUDA
 * (copies go straight to and from the slot), 0 otherwise (a CUDA frame, a pool never copied
 * with CUDA, or one the driver would not register). */
int framesrv_frame_pinned(const framesrv_frame *frame);

/* ------------------------------------------------------------------------- */
/* Consumer                                                                   */
/* ------------------------------------------------------------------------- */

typedef enum framesrv_mode {
    FRAMESRV_LIVE = 1,         /* the newest frame; skips (and counts) what it could not keep up with */
    FRAMESRV_LOSSLESS = 2,     /* every frame from admission on, in order; the producer waits for it */
} framesrv_mode;

typedef struct framesrv_consumer_options {
    framesrv_mode mode;        /* 0 = FRAMESRV_LOSSLESS                                     */
    const char *client_name;   /* what monitors show (<= 31 bytes), NULL = the program name */
    int attach_timeout_ms;     /* how long open waits for the stream to appear; -1 forever (default when options is NULL) */
    uint32_t poll_us;          /* next() may busy-poll up to this many microseconds per call (0..1000000; 0: only the catch-up spin, on a stream faster than 20,000 frames/s); on a paced stream the window is centred on when the next frame is due (PROTOCOL.md 11.3) */
    int memory;                /* FRAMESRV_MEMORY_HOST (0, the default) or FRAMESRV_MEMORY_CUDA: the memory this
                                  consumer reads. A stream of the other kind is refused at open (FRAMESRV_E_MEMORY) */
    int media;                 /* FRAMESRV_MEDIA_VIDEO (0, the default) or FRAMESRV_MEDIA_AUDIO: what this consumer
                                  reads. A stream of the other kind is refused at open (FRAMESRV_E_MEDIA) */
} framesrv_consumer_options;

typedef struct framesrv_consumer framesrv_consumer;

/* Stream-wide facts of the attached stream. */
typedef struct framesrv_stream_info {
    char name[49];
    uint32_t slot_count;
    int64_t rate_num, rate_den;   /* nominal frame rate in frames per second, exact and reduced; 0/0 unknown (as fast as possible) */
    int32_t producer_pid;
    uint32_t live_source;         /* 1: the producer never waits for consumers               */
    uint64_t epoch;               /* the current pool epoch                                  */
    int memory;                   /* FRAMESRV_MEMORY_HOST or FRAMESRV_MEMORY_CUDA             */
    char device_uuid[41];         /* CUDA: the device, "GPU-..." as nvidia-smi names it; else "" */
    int device_ordinal;           /* CUDA: the device's ordinal in this process; else -1      */
    int device_read_only;         /* CUDA: 1 when the current epoch's allocation is mapped read-only here */
    int media;                    /* FRAMESRV_MEDIA_VIDEO or FRAMESRV_MEDIA_AUDIO               */
} framesrv_stream_info;

/* Counters of one consumer. */
typedef struct framesrv_consumer_stats {
    uint64_t delivered;        /* frames returned by next                                   */
    uint64_t missed;           /* live: frames skipped; lossless: frames lost to damaged slots */
    uint64_t bad_frames;       /* frames that failed validation (released and skipped)      */
    uint64_t held;             /* frames held right now                                      */
    uint64_t restarts;         /* times reopen attached to a new producer                    */
    uint64_t first_unready;    /* CUDA: when a producer died, the lowest seq its stream may not have finished
                                  writing: frames from there on may be incomplete (their ready fences were
                                  written for it, so no stream waits forever); 0 = none since open, or another consumer
                                  of the stream wrote them first (its figure holds for this one too) */
} framesrv_consumer_stats;

/* Attaches to stream NAME in the runtime directory ($FRAMESRV_DIR, else
 * /dev/shm/framesrv-<uid>), waiting up to options->attach_timeout_ms for it to appear
 * (and, lossless, for the producer to admit it). options may be NULL (lossless, wait
 * forever). On success *out is the consumer. Any thread; the consumer is then used by
 * one thread at a time. */
int framesrv_consumer_open(framesrv_consumer **out, const char *name,
                           const framesrv_consumer_options *options);

/* The next frame: FRAMESRV_OK with *frame set, FRAMESRV_TIMEOUT, FRAMESRV_END (the
 * stream ended and every frame due was delivered), FRAMESRV_GONE (the producer died),
 * or an error. Lossless: in order, exactly once. Live: the newest frame not yet seen.
 * A live consumer may hold at most the stream's live_max_held frames at once
 * (FRAMESRV_E_STATE beyond). With nothing to deliver it busy-polls up to options.poll_us
 * (on a paced stream around when the next frame is due), then
 * sleeps on a futex in shared memory that the producer wakes directly at every publish
 * (no ZeroMQ, no other thread), at most 500 ms at a time (a producer killed with SIGKILL
 * is noticed within that). A signal ends the wait with FRAMESRV_TIMEOUT.
 * One thread at a time per consumer. */
int framesrv_consumer_next(framesrv_consumer *consumer, int timeout_ms, framesrv_frame **frame);

/* A CUDA consumer's next frame, ordered on `stream`: as framesrv_consumer_next, and before it
 * returns the frame it queues on `stream` a wait for the frame's ready fence, so work queued
 * on `stream` afterwards sees the finished planes (the CPU does not wait; with
 * $FRAMESRV_READY_SPIN_US=N, 0..1000000, a consumer without poll_us first polls a fence not yet
 * written for up to N us, so that a frame whose fence lands meanwhile needs no stream wait: off by
 * default, as bench gpu showed no gain). Release it with
 * framesrv_frame_release_on on the stream of the last work that reads it. (framesrv_consumer_next
 * on a CUDA consumer waits on the CPU instead, and framesrv_frame_release then means "no work
 * of mine reads it any more".) A frame whose ready fence does not come (no stream memory
 * operations: 2 s) is skipped and counted as a bad frame. FRAMESRV_E_MEMORY for a host
 * consumer. One thread at a time per consumer. */
int framesrv_consumer_next_on(framesrv_consumer *consumer, void *stream, int timeout_ms, framesrv_frame **frame);

/* Frames held by a lossless consumer keep their slots: a consumer that holds every slot the
 * producer could reuse (or enough that no slot is free) waits in next for a frame that can
 * never come. next notices that: within 0.5 s it prints one line on stderr ("framesrv:
 * consumer 'NAME' holds H of N slots of stream 'S' ...; the producer cannot publish until
 * one is released: ADVICE"), once per such wait, and once it has lasted timeout_ms (in
 * total, over any number of next calls) it returns FRAMESRV_E_HELD with the same line.
 * A frame released meanwhile (from another thread) ends the wait. timeout_ms: -1 never
 * fails (the line is still printed), FRAMESRV_HELD_KEEP keeps the current value; the
 * default is $FRAMESRV_HELD_TIMEOUT (seconds, a decimal, or "never"), else 10 s. advice:
 * what the line tells the application to do (<= 159 bytes), NULL keeps it; the default is
 * "release frames, copy what you keep, or give the producer more slots (--slots)".
 * One thread at a time (with next). */
#define FRAMESRV_HELD_KEEP (-2)
int framesrv_consumer_set_held_timeout(framesrv_consumer *consumer, int timeout_ms, const char *advice);

/* Gives the frame's slot back. The frame (its info and planes) is invalid afterwards.
 * Frames may be released in any order, from any thread, also while another thread is
 * inside framesrv_consumer_next (or reopen, stream_info, stats, fd) of the same consumer:
 * the slot goes back at once, the consumer's bookkeeping takes a small lock that next never
 * holds while it waits. Not concurrently with framesrv_consumer_close. Each frame is
 * released once. NULL is ignored. */
void framesrv_frame_release(framesrv_frame *frame);

/* After FRAMESRV_END or FRAMESRV_GONE (or any time): detaches, then waits up to
 * timeout_ms for the next producer of the same name and attaches to it. Frames still
 * held stay valid until released. One thread at a time per consumer. */
int framesrv_consumer_reopen(framesrv_consumer *consumer, int timeout_ms);

/* The attached stream's facts and this consumer's counters. One thread at a time. */
int framesrv_consumer_stream_info(framesrv_consumer *consumer, framesrv_stream_info *info);
int framesrv_consumer_stats_of(framesrv_consumer *consumer, framesrv_consumer_stats *stats);

/* For event loops: a descriptor that becomes readable when next may have something (the
 * ZeroMQ SUB socket's ZMQ_FD). A futex is not a descriptor, so the first call connects a
 * SUB socket to the stream's announcements (consumers that never call this never touch
 * ZeroMQ); from then on next also drains it. Edge-triggered: call next with timeout 0
 * until FRAMESRV_TIMEOUT, then poll the descriptor with a bounded timeout (<= 1 s: an
 * announcement can be dropped; shared memory is the truth). next with a timeout > 0 still
 * sleeps on the futex. -1 on error. One thread at a time (with next). */
int framesrv_consumer_fd(framesrv_consumer *consumer);

/* Releases every frame still held, detaches (CLOSING, so the producer frees the entry)
 * and frees the consumer. Frames and planes of this consumer are invalid afterwards.
 * NULL is ignored. Not concurrently with any other call on this consumer. */
void framesrv_consumer_close(framesrv_consumer *consumer);

/* ------------------------------------------------------------------------- */
/* Producer                                                                   */
/* ------------------------------------------------------------------------- */

typedef struct framesrv_producer_options {
    uint32_t width, height;    /* 1..16384                                                  */
    int pix_fmt;               /* framesrv_pix_fmt, one of the table's (not OTHER)          */
    uint32_t slots;            /* 1..64; 0 = 8                                              */
    int64_t rate_num, rate_den;/* nominal frame rate, exact (stored reduced); 0/0 = unknown. Also the default time base (den/num) */
    uint32_t live_source;      /* 1: reserve never waits for consumers: it returns FRAMESRV_TIMEOUT (drop the frame; counted) */
    uint32_t live_max_held;    /* frames a live consumer may hold at once; 0 = 1            */
    uint32_t color_matrix, color_range, color_primaries, color_transfer; /* defaults for every frame; 0,0,0,0 = "unspecified" (2,0,2,2; matrix 0 for RGB formats) */
    int memory;                /* FRAMESRV_MEMORY_HOST (0, the default) or FRAMESRV_MEMORY_CUDA: frames in the memory
                                  of CUDA device `cuda_device`, written through framesrv_frame_device_plane */
    int cuda_device;           /* CUDA: the device's ordinal in this process (0 = the first)  */
    /* Audio streams (PROTOCOL.md 4.6): media FRAMESRV_MEDIA_AUDIO, with width, height and pix_fmt 0
     * and host memory. Every frame has this format and 1..max_samples samples per channel
     * (framesrv_frame_info.nb_samples, set between reserve and publish). rate_num/rate_den
     * stay the nominal frame rate (frames per second, 0/0 unknown); the time base is 1/sample_rate.
     * A bad value is FRAMESRV_E_INVALID with one line naming it. */
    int media;                 /* FRAMESRV_MEDIA_VIDEO (0, the default) or FRAMESRV_MEDIA_AUDIO */
    int sample_fmt;            /* audio: framesrv_sample_fmt, 1..12                           */
    uint32_t sample_rate;      /* audio: samples per second per channel, 1..768000            */
    uint32_t channels;         /* audio: 1..64                                                */
    uint64_t channel_mask;     /* audio: FFmpeg's AV_CH_* bits, exactly `channels` of them (native
                                  order, e.g. 0x3 stereo); 0: the order is unspecified (only the count
                                  is known: libframesrv does not know FFmpeg's default layouts) */
    uint32_t max_samples;      /* audio: the most samples per channel of one frame, 1..2^20: slots are
                                  sized for it (e.g. 1024)                                     */
} framesrv_producer_options;

typedef struct framesrv_producer framesrv_producer;

/* Counters of one producer. */
typedef struct framesrv_producer_stats {
    uint64_t published;
    uint64_t dropped;          /* live source: reserve found no free slot                   */
    uint64_t abandoned;
    uint64_t consumers;        /* attached right now                                        */
    uint64_t reclaimed;        /* consumers reclaimed because they died                     */
    uint64_t blocked_ns;       /* time reserve waited for a free slot                       */
} framesrv_producer_stats;

/* Creates stream NAME (taking NAME.lock; FRAMESRV_E_BUSY if a live producer holds it;
 * leftovers of a dead one are replaced), binds its ZeroMQ announcements and starts the
 * producer's one background thread (admission of consumers, reclaiming dead ones).
 * Any thread; the producer is then used by one thread at a time. */
int framesrv_producer_open(framesrv_producer **out, const char *name,
                           const framesrv_producer_options *options);

/* framesrv_producer_open, with `client_name` as what monitors (ls, top, inspect, web) call the
 * producer (at most 31 bytes kept; NULL or "": the program's name, as framesrv_producer_open). */
int framesrv_producer_open_as(framesrv_producer **out, const char *name,
                              const framesrv_producer_options *options, const char *client_name);

/* Reserves a free slot: FRAMESRV_OK with *frame (its planes writable, its info's (w)
 * fields preset: pts = seq-1 in the default time base (rate_den/rate_num, duration 1, when
 * both fit an int32; else 1/1000000, duration 0), sample aspect ratio 0/1, flags 0, the
 * options' colour, field_order 1 (progressive), chroma_location 0 (unspecified)),
 * FRAMESRV_TIMEOUT when no slot became free within timeout_ms (a live source never
 * waits: the frame is dropped and counted), or an error. One frame reserved at a time.
 * With every slot held it looks again for up to 20 us (within timeout_ms; 0 never does)
 * before it sleeps, so consumers that keep up make no system call to wake it.
 * An audio stream's frame: plane 0 as a consumer's (framesrv_frame_info, Audio frames) for
 * max_samples samples (planar: one row per channel, rows planes[0].stride apart), nb_samples
 * = max_samples, time base 1/sample_rate, pts = the samples published before it, duration 0
 * (publish writes nb_samples), flags 0; the video fields are not used (written 0). */
int framesrv_producer_reserve(framesrv_producer *producer, int timeout_ms, framesrv_frame **frame);

/* A CUDA producer's reserve, ordered on `stream`: as framesrv_producer_reserve, and before it
 * returns it queues on `stream` a wait for the release fence of every consumer that read the
 * slot's previous frame, so the writes queued afterwards start only once their kernels ended
 * (the CPU does not wait). (framesrv_producer_reserve on a CUDA producer waits on the CPU
 * instead: at most 2 s, then FRAMESRV_TIMEOUT.) FRAMESRV_E_MEMORY for a host producer. */
int framesrv_producer_reserve_on(framesrv_producer *producer, void *stream, int timeout_ms, framesrv_frame **frame);

/* Publishes the reserved frame to every consumer (lossless ones receive it for sure), wakes
 * the consumers asleep for a frame (one futex call, none when nobody sleeps), then announces
 * it over ZeroMQ when anyone subscribes. FRAMESRV_E_INVALID for (w) fields a consumer would
 * reject (time base < 1/1, field_order > 5, chroma_location > 6, pts or duration beyond
 * 2^62). The frame is invalid afterwards.
 * An audio frame publishes its first nb_samples (1..max_samples, else FRAMESRV_E_INVALID) of each
 * row, with the header framesrv's own producer writes: plane_stride = the row's bytes rounded up to
 * 64, plane_size = stride x rows, duration nb_samples when left 0 in time base 1/sample_rate. A
 * planar frame shorter than max_samples has its rows moved together for that stride (a kept
 * frame's planes[0] then describes them as published). */
int framesrv_producer_publish(framesrv_producer *producer, framesrv_frame *frame);

/* Publishes like framesrv_producer_publish, but the frame stays valid and its slot is not
 * reused (fs_slot_ctl.producer_hold; monitors show "reference") until
 * framesrv_frame_release(frame). For bindings whose arrays may outlive the frame: they keep
 * reading exactly this frame, never a recycled slot. Reserve skips held slots (and returns
 * FRAMESRV_TIMEOUT if every slot stays held). framesrv_frame_release may then be called
 * from any thread. */
int framesrv_producer_publish_keep(framesrv_producer *producer, framesrv_frame *frame);

/* A CUDA producer's publish, ordered on `stream`: queues on `stream` the write of the frame's
 * ready fence (after the work that wrote the planes), then publishes as framesrv_producer_publish
 * at once; consumers' streams wait for the fence, the CPU never does. (framesrv_producer_publish
 * on a CUDA producer means the planes are complete now.) FRAMESRV_E_MEMORY for a host producer. */
int framesrv_producer_publish_on(framesrv_producer *producer, framesrv_frame *frame, void *stream);

/* framesrv_producer_publish_keep ordered on `stream` as framesrv_producer_publish_on: the frame
 * stays valid and its slot unused until framesrv_frame_release(frame). */
int framesrv_producer_publish_keep_on(framesrv_producer *producer, framesrv_frame *frame, void *stream);

/* Gives the reserved frame back unpublished (its sequence number is not used). */
int framesrv_producer_abandon(framesrv_producer *producer, framesrv_frame *frame);

/* Blocks until `count` lossless consumers are attached (admitted), up to timeout_ms:
 * FRAMESRV_OK or FRAMESRV_TIMEOUT. (framesrv produce --wait-for.) */
int framesrv_producer_wait_for_consumers(framesrv_producer *producer, uint32_t count, int timeout_ms);

/* Lossless consumers attached (admitted) right now, without waiting; 0 for NULL or in a
 * forked child. (libframesrv 2.3.0.) */
uint32_t framesrv_producer_lossless_consumers(framesrv_producer *producer);

/* A mid-stream format change: a new pool epoch with this size and format (the other
 * options stay). No frame may be reserved. Frames held by consumers stay valid. An audio
 * stream's format is fixed: FRAMESRV_E_MEDIA. */
int framesrv_producer_change_format(framesrv_producer *producer, uint32_t width, uint32_t height, int pix_fmt);

/* Ends the stream (failed != 0: the source failed, FS_CONTROL_END_FAILED): consumers
 * receive every frame published, then FRAMESRV_END. No more frames after it: a frame still
 * reserved stays reserved (publishing it is FRAMESRV_E_STATE; abandon it). FRAMESRV_E_STATE
 * if the stream has already ended. */
int framesrv_producer_end(framesrv_producer *producer, int failed);

/* The producer's counters. One thread at a time (with the producer's other calls). */
int framesrv_producer_stats_of(framesrv_producer *producer, framesrv_producer_stats *stats);

/* Ends the stream if it is not ended, stops the background thread, removes the stream's
 * files once no consumer holds a frame (or leaves them for the consumers; a later
 * producer or `framesrv clean` removes them), releases the lock and frees the producer.
 * A frame still reserved is abandoned. Frames kept by framesrv_producer_publish_keep stay
 * valid until released (the producer's memory goes with the last of them). Waits up to
 * 2 s for consumers to release what they hold, as the framesrv command does.
 * NULL is ignored. Not concurrently with any other call on this producer. */
void framesrv_producer_close(framesrv_producer *producer);

/* ------------------------------------------------------------------------- */
/* Test pattern (PROTOCOL.md section 21)                                      */
/* ------------------------------------------------------------------------- */

/* Fills every plane of a reserved frame with the test pattern of its seq:
 * byte (plane p, row y, byte x) = (x + 2y + 3 seq + 61 p) mod 256. Any thread. A CUDA frame's
 * planes are device memory: nothing is written (fill them with a kernel). */
void framesrv_pattern_fill(framesrv_frame *frame);
/* Counts the bytes of a frame that differ from the pattern of its seq (0 = intact); a CUDA
 * frame (device memory, not readable here) counts as UINT64_MAX: check it with a kernel. */
uint64_t framesrv_pattern_check(framesrv_frame *frame);

#ifdef __cplusplus
}
#endif
#endif /* FRAMESRV_H */
