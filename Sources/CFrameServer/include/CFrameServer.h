/*
 * CFrameServer.h: the framesrv shared-memory layout and wire format, protocol version 5.
 *
 * This header is the single source of truth for every byte that crosses a process
 * boundary: for offsets, sizes and constants it wins. For what a field means, the
 * comments here only summarise protocol/PROTOCOL.md, which wins. PROTOCOL.md quotes
 * these tables; the Swift library, the C client and the Python client (which checks
 * its own offsets against the FS_OFF_* values below) all use the same numbers. If a _Static_assert here fails, the wire layout
 * changed: bump FS_PROTOCOL_VERSION and update PROTOCOL.md and protocol/vectors/.
 *
 * Rules the layout follows (after PipeWire's spa ring buffer):
 *   - plain fixed-width little-endian fields, no pointers (each process maps the
 *     segments at a different address, so only offsets are stored);
 *   - no _Atomic qualifiers: the static inline accessors below do every access that
 *     races with another process through __atomic_* builtins with an explicit order,
 *     so any language that can do the same atomic operation on the same bytes can
 *     take part;
 *   - every ordering-sensitive access carries a "SYNC:" comment naming its pair.
 *
 * The header is C99 + GNU atomics builtins and compiles cleanly with GCC and Clang.
 * GNU-only system calls that Swift's Glibc module cannot see are declared at the end
 * and implemented in shim.c (prefix fs_sys_).
 */
#ifndef CFRAMESERVER_H
#define CFRAMESERVER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Under Clang every pointer in this header is non-null (so Swift imports them as
 * non-optional); GCC ignores the pragma. */
#if defined(__clang__)
#pragma clang assume_nonnull begin
#endif

/* ------------------------------------------------------------------------- */
/* Constants                                                                  */
/* ------------------------------------------------------------------------- */

#define FS_PROTOCOL_VERSION 5u

/* Magics are four ASCII bytes, stored little-endian: "FSCT" reads as F,S,C,T. */
#define FS_MAGIC_CONTROL  0x54435346u /* "FSCT": control segment            */
#define FS_MAGIC_FRAME    0x52465346u /* "FSFR": frame header in a pool slot */
#define FS_MAGIC_ANNOUNCE 0x4E415346u /* "FSAN": ZeroMQ announcement        */
#define FS_MAGIC_CUDA     0x55435346u /* "FSCU": NAME.cuda request and reply */

#define FS_MAX_CONSUMERS 63u          /* holder bits 0..62                        */
#define FS_MAX_SLOTS     64u
#define FS_MAX_PLANES    4u
#define FS_NAME_MAX      48u          /* stream names: [A-Za-z0-9._-]{1,48}       */
#define FS_HOLDER_WRITER (1ull << 63) /* holder bit 63: the producer is writing   */
#define FS_LATENCY_BUCKETS 128u       /* fs_latency_bucket: 1 us steps under 100 us, then 100 us,
                                       * 1 ms, 10 ms steps; 127 = 100 ms and more */

/* fs_control.state */
#define FS_STREAM_RUNNING 1u
#define FS_STREAM_ENDED   2u

/* fs_control.flags */
#define FS_CONTROL_LIVE_SOURCE 1u     /* producer drops at the source instead of waiting */
#define FS_CONTROL_END_FAILED  2u     /* set with state ENDED: the source failed (decode errors, a read error) */

/* fs_control.memory: where a stream's planes live (PROTOCOL.md 4.5) */
#define FS_MEMORY_HOST 0u             /* in the pool file, after each slot's fs_frame          */
#define FS_MEMORY_CUDA 1u             /* in one CUDA allocation per epoch, passed over NAME.cuda */
#define FS_CUDA_HEADER_SLOT 4096u     /* a CUDA stream's pool file: one page per slot, headers only */

/* fs_control.media and fs_frame.media: what a stream's frames are (PROTOCOL.md 4.6) */
#define FS_MEDIA_VIDEO 0u             /* pictures: width x height of a pixel format           */
#define FS_MEDIA_AUDIO 1u             /* sound: nb_samples x channels of a sample format      */

/* Audio frames (PROTOCOL.md 4.6): sample formats, codes as for pixel formats (protocol
 * constants, not AVSampleFormat values). A planar format keeps one row per channel. */
#define FS_SAMPLE_U8    1u
#define FS_SAMPLE_S16   2u
#define FS_SAMPLE_S32   3u
#define FS_SAMPLE_FLT   4u
#define FS_SAMPLE_DBL   5u
#define FS_SAMPLE_U8P   6u
#define FS_SAMPLE_S16P  7u
#define FS_SAMPLE_S32P  8u
#define FS_SAMPLE_FLTP  9u
#define FS_SAMPLE_DBLP 10u
#define FS_SAMPLE_S64  11u
#define FS_SAMPLE_S64P 12u
#define FS_SAMPLE_MAX  12u
#define FS_MAX_CHANNELS   64u         /* channels of an audio frame: 1..64                    */
#define FS_MAX_SAMPLES    (1u << 20)  /* nb_samples of an audio frame: 1..2^20                */
#define FS_MAX_SAMPLE_RATE 768000u    /* sample_rate: 1..768000                               */

/* fs_frame.channel_order: FFmpeg's AVChannelOrder values that travel (custom maps do not). */
#define FS_CHANNEL_ORDER_UNSPEC    0u /* only the count is known; channel_mask 0              */
#define FS_CHANNEL_ORDER_NATIVE    1u /* channel_mask: AV_CH_* bits, one per channel          */
#define FS_CHANNEL_ORDER_AMBISONIC 3u /* ambisonic components, channel_mask 0                 */

/* fs_cuda_reply.status */
#define FS_CUDA_OK       0
#define FS_CUDA_REFUSED  1            /* the peer is not that entry's process */
#define FS_CUDA_NO_EPOCH 2            /* no allocation of that epoch is kept */

/* fs_consumer.state */
#define FS_CONSUMER_FREE    0u
#define FS_CONSUMER_CLAIMED 1u        /* pid written, rest being filled in        */
#define FS_CONSUMER_ACTIVE  2u
#define FS_CONSUMER_CLOSING 3u        /* asked the producer to detach it          */

/* fs_consumer.mode */
#define FS_MODE_LIVE     1u
#define FS_MODE_LOSSLESS 2u
#define FS_MODE_MONITOR  3u

/* fs_frame.flags and fs_announce.flags */
#define FS_FRAME_KEY           1u
#define FS_FRAME_END_OF_STREAM 2u
#define FS_FRAME_DISCONTINUITY 4u

/* fs_frame.field_order: FFmpeg's AVFieldOrder values. */
#define FS_FIELD_UNKNOWN     0u
#define FS_FIELD_PROGRESSIVE 1u
#define FS_FIELD_TT          2u   /* top field coded and shown first */
#define FS_FIELD_BB          3u   /* bottom field coded and shown first */
#define FS_FIELD_TB          4u   /* top coded first, bottom shown first */
#define FS_FIELD_BT          5u   /* bottom coded first, top shown first */
#define FS_FIELD_MAX         5u

/* fs_frame.chroma_location: FFmpeg's AVChromaLocation values. */
#define FS_CHROMA_UNSPECIFIED 0u
#define FS_CHROMA_LEFT        1u  /* MPEG-2/4, H.264 default */
#define FS_CHROMA_CENTER      2u  /* MPEG-1, JPEG */
#define FS_CHROMA_TOPLEFT     3u  /* DV */
#define FS_CHROMA_TOP         4u
#define FS_CHROMA_BOTTOMLEFT  5u
#define FS_CHROMA_BOTTOM      6u
#define FS_CHROMA_MAX         6u

/* fs_announce.kind */
#define FS_ANNOUNCE_FRAME 1u
#define FS_ANNOUNCE_END   2u
#define FS_ANNOUNCE_EPOCH 3u

/* Pixel formats. Codes are protocol constants (not AVPixelFormat values, which
 * change between FFmpeg versions); fs_frame.pix_fmt_name carries FFmpeg's name too,
 * and code 0 means "see the name". */
#define FS_PIX_OTHER        0u
#define FS_PIX_GRAY8        1u
#define FS_PIX_NV12         2u
#define FS_PIX_YUV420P      3u
#define FS_PIX_YUV422P      4u
#define FS_PIX_YUV444P      5u
#define FS_PIX_YUV420P10LE  6u
#define FS_PIX_RGB24        7u
#define FS_PIX_BGRA         8u
#define FS_PIX_RGBA         9u
#define FS_PIX_P010LE      10u
#define FS_PIX_YUV422P10LE 11u
#define FS_PIX_YUV444P10LE 12u
#define FS_PIX_GRAY16LE    13u
#define FS_PIX_BGR24       14u
#define FS_PIX_GBRP        15u

/* Colour description: ITU-T H.273 code points (the values FFmpeg's AVColorSpace,
 * AVColorPrimaries and AVColorTransferCharacteristic use). Range: 0 unspecified,
 * 1 limited ("tv", "mpeg"), 2 full ("pc", "jpeg"), as AVColorRange. */
#define FS_MATRIX_RGB         0u
#define FS_MATRIX_BT709       1u
#define FS_MATRIX_UNSPECIFIED 2u
#define FS_MATRIX_BT470BG     5u  /* BT.601 625-line */
#define FS_MATRIX_SMPTE170M   6u  /* BT.601 525-line */
#define FS_MATRIX_BT2020_NCL  9u
#define FS_RANGE_UNSPECIFIED  0u
#define FS_RANGE_LIMITED      1u
#define FS_RANGE_FULL         2u

#define FS_PTS_NONE INT64_MIN

/* ------------------------------------------------------------------------- */
/* The control segment: <dir>/<name>.ctl, mode 0600, mapped read-write by all */
/*                                                                            */
/*   offset 0                      fs_control            (512 bytes)          */
/*   offset slot_ctl_offset        fs_slot_ctl[slot_count]   (64 bytes each)  */
/*   offset consumer_offset        fs_consumer[max_consumers] (256 bytes each)*/
/* ------------------------------------------------------------------------- */

typedef struct fs_control {
    uint32_t magic;               /*   0 FS_MAGIC_CONTROL                          */
    uint32_t version;             /*   4 FS_PROTOCOL_VERSION                       */
    uint32_t header_size;         /*   8 sizeof(fs_control) = 512                  */
    uint32_t slot_count;          /*  12 number of slots, 1..FS_MAX_SLOTS          */
    uint32_t max_consumers;       /*  16 FS_MAX_CONSUMERS                          */
    uint32_t slot_ctl_size;       /*  20 sizeof(fs_slot_ctl) = 64                  */
    uint32_t consumer_size;       /*  24 sizeof(fs_consumer) = 256                 */
    uint32_t slot_ctl_offset;     /*  28 = 512                                     */
    uint32_t consumer_offset;     /*  32 = 512 + 64 * slot_count                   */
    int32_t  producer_pid;        /*  36                                           */
    uint64_t producer_start_time; /*  40 field 22 of /proc/<pid>/stat (clock ticks) */
    uint64_t created_ns;          /*  48 CLOCK_REALTIME when the stream was created */
    uint64_t epoch;               /*  56 current pool epoch (atomic)               */
    uint64_t slot_stride;         /*  64 bytes per slot in the current pool         */
    uint64_t latest;              /*  72 (seq << 8) | slot of newest frame, 0 = none (atomic) */
    uint64_t published;           /*  80 frames published: stat, counted by the producer */
    uint64_t dropped;             /*  88 frames dropped at the source (atomic)     */
    uint64_t blocked_ns;          /*  96 time the producer waited for a slot       */
    uint64_t lossless_mask;       /* 104 consumers that receive reservations (atomic) */
    uint32_t wake;                /* 112 futex word the producer sleeps on: bumped on every release,
                                   *     failed live acquire, admission, reclaim, abandon,
                                   *     producer_hold clear, detach and end of stream */
    uint32_t state;               /* 116 FS_STREAM_* (atomic)                       */
    uint64_t end_seq;             /* 120 last sequence number once ENDED            */
    uint32_t attach_seq;          /* 128 futex word, bumped when a consumer entry changes */
    uint32_t producer_waiting;    /* 132 producer threads sleeping on `wake` (0 = none) */
    uint64_t min_free;            /* 136 fewest slots still free after the producer took one,
                                   *     over all reservations (slot_count until the first) */
    uint64_t reclaimed;           /* 144 consumers reclaimed after they died         */
    uint32_t live_max_held;       /* 152 frames a live consumer may hold at once      */
    uint32_t flags;               /* 156 FS_CONTROL_*                                */
    char     name[64];            /* 160 stream name, NUL-terminated                 */
    uint64_t pool_size;           /* 224 bytes of the current pool segment           */
    uint64_t last_publish_ns;     /* 232 CLOCK_MONOTONIC of the newest publish        */
    uint64_t reserved_240;        /* 240 zero (v1: rate x 1000, rounded)              */
    uint64_t demoted;             /* 248 lossless consumers demoted to live by the stall timeout */
    uint64_t rate_num;            /* 256 nominal frame rate, frames per second = num/den,  */
    uint64_t rate_den;            /* 264 reduced; 0/0 = unknown ("max") (const)            */
    char     producer_name[32];   /* 272 what the producer calls itself ("produce in.mp4"),
                                   *     NUL-terminated, written before the stream is visible */
    uint8_t  reserved1[16];       /* 304 .. 320 zero                                  */
    uint32_t frame_wake;          /* 320 futex word consumers sleep on: bumped by fs_frame_ready
                                   *     after every publish, admission, demotion, epoch, end */
    uint32_t reserved_324;        /* 324 zero                                          */
    uint64_t sleepers;            /* 328 bit i: consumer entry i sleeps on frame_wake (seq_cst) */
    uint8_t  reserved2[48];       /* 336 .. 384 zero: keeps the futex line private     */
    uint32_t memory;              /* 384 FS_MEMORY_* (const)                           */
    uint32_t fence_offset;        /* 388 CUDA: offset of fs_slot_fence[slot_count] in this
                                   *     segment, = consumer_offset + 1280 * 63; host: 0 (const) */
    uint8_t  device_uuid[16];     /* 392 CUDA: cuDeviceGetUuid of the device (const)  */
    uint32_t device_ordinal;      /* 408 CUDA: the producer's ordinal, informative (const) */
    uint32_t media;               /* 412 FS_MEDIA_*: video or audio (const, 4.6)       */
    uint64_t device_slot_stride;  /* 416 CUDA: bytes per slot of the current allocation
                                   *     (published by epoch)                          */
    uint64_t device_pool_size;    /* 424 CUDA: bytes of the current allocation (published by epoch) */
    uint8_t  reserved3[80];       /* 432 .. 512 zero                                   */
} fs_control;

typedef struct fs_slot_ctl {
    uint64_t holders;             /*   0 bit i: consumer i holds; bit 63: producer writing (atomic) */
    uint64_t seq;                 /*   8 sequence number of the frame in the slot, 0 = never used */
    uint64_t epoch;               /*  16 pool epoch the frame lives in              */
    uint64_t publish_ns;          /*  24 CLOCK_MONOTONIC at publish                  */
    uint64_t producer_hold;       /*  32 1 while the producer itself still references the
                                   *     published frame (its decoder keeps it as a reference
                                   *     picture): not reused until 0. Consumers ignore it. (atomic) */
    uint64_t readers;             /*  40 CUDA: bit i set by consumer i when it takes the frame,
                                   *     cleared by the producer's next reservation: whose
                                   *     release fence the next writer waits for (atomic) */
    uint64_t reserved[2];         /*  48 .. 64                                       */
} fs_slot_ctl;

/* CUDA streams only: at fence_offset, one per slot (PROTOCOL.md 4.5). Every word only grows
 * within an epoch; written by a GPU stream (cuStreamWriteValue64) or a CPU (store-release),
 * waited for by a stream (cuStreamWaitValue64 GEQ) or a CPU (load-acquire). */
typedef struct fs_slot_fence {
    uint64_t release[FS_MAX_CONSUMERS]; /*   0 newest seq of the slot consumer i released on its stream */
    uint64_t ready;                     /* 504 newest seq of the slot whose planes are written */
} fs_slot_fence;

typedef struct fs_consumer {
    int32_t  pid;                 /*   0 claim word: 0 = free; CAS 0 -> pid claims (atomic) */
    uint32_t state;               /*   4 FS_CONSUMER_* (atomic)                       */
    uint64_t start_time;          /*   8 field 22 of /proc/<pid>/stat                 */
    uint32_t mode;                /*  16 FS_MODE_*                                    */
    uint32_t flags;               /*  20 reserved, 0                                  */
    uint64_t first_seq;           /*  24 lossless: first reserved seq, 0 = not yet (atomic) */
    uint64_t attached_ns;         /*  32 CLOCK_MONOTONIC at attach                     */
    uint64_t delivered;           /*  40 frames handed to the application               */
    uint64_t missed;              /*  48 frames this consumer will never get: live, gaps it
                                   *     skipped; lossless, frames lost to a damaged slot or not
                                   *     taken after a demotion (stale refusals: `stale`) */
    uint64_t last_seq;            /*  56 newest delivered sequence number               */
    uint64_t held;                /*  64 frames held right now                           */
    uint64_t hold_since_ns;       /*  72 CLOCK_MONOTONIC of the last 0 -> 1 hold or of the last
                                   *     release while still holding; 0 = holds nothing */
    uint64_t source_dropped;      /*  80 frames the source dropped just before frames this
                                   *     consumer was delivered (sum of fs_frame.source_dropped) */
    uint64_t reserved_88[15];     /*  88 .. 208 zero                                 */
    char     name[32];            /* 208 what the consumer calls itself (argv[0], ...) */
    uint64_t latency_sum_ns;      /* 240 sum of all latencies                           */
    uint64_t stale;               /* 248 acquisitions refused because the slot was recycled */
    uint64_t latency_hist[FS_LATENCY_BUCKETS]; /* 256 publish-to-acquire latency histogram:
                                   *     latency_hist[fs_latency_bucket(us)] counts each frame */
} fs_consumer;

/* ------------------------------------------------------------------------- */
/* The pool segment: <dir>/<name>.pool.<epoch>, mode 0600.                    */
/* The producer maps it read-write; consumers map it PROT_READ.                */
/* Slot i starts at i * slot_stride with an fs_frame, planes follow.          */
/* ------------------------------------------------------------------------- */

typedef struct fs_frame {
    uint32_t magic;               /*   0 FS_MAGIC_FRAME                  */
    uint32_t version;             /*   4 FS_PROTOCOL_VERSION             */
    uint64_t seq;                 /*   8                                 */
    uint64_t epoch;               /*  16                                 */
    uint32_t width;               /*  24                                 */
    uint32_t height;              /*  28                                 */
    uint32_t pix_fmt;             /*  32 FS_PIX_*                        */
    uint32_t plane_count;         /*  36 1..4                            */
    uint32_t plane_offset[FS_MAX_PLANES]; /* 40 from the slot's start    */
    uint32_t plane_stride[FS_MAX_PLANES]; /* 56 bytes per row            */
    uint32_t plane_size[FS_MAX_PLANES];   /* 72 bytes (stride x rows)    */
    uint32_t color_matrix;        /*  88 H.273 MatrixCoefficients        */
    uint32_t color_range;         /*  92 FS_RANGE_*                      */
    uint32_t color_primaries;     /*  96 H.273 ColourPrimaries           */
    uint32_t color_transfer;      /* 100 H.273 TransferCharacteristics   */
    int32_t  sar_num;             /* 104 sample aspect ratio, 0/1 = unknown */
    int32_t  sar_den;             /* 108                                 */
    int64_t  pts;                 /* 112 FS_PTS_NONE if unknown          */
    int32_t  time_base_num;       /* 120                                 */
    int32_t  time_base_den;       /* 124                                 */
    int64_t  duration;            /* 128 in time_base units, 0 = unknown */
    uint64_t capture_ns;          /* 136 producer's CLOCK_MONOTONIC at capture/decode */
    uint32_t flags;               /* 144 FS_FRAME_*                      */
    uint32_t payload_size;        /* 148 bytes from offset 256 to the end of the last plane */
    char     pix_fmt_name[32];    /* 152 FFmpeg's name, NUL-terminated   */
    uint32_t field_order;         /* 184 FS_FIELD_*, 0 = unknown         */
    uint32_t chroma_location;     /* 188 FS_CHROMA_*, 0 = unspecified    */
    uint32_t source_dropped;      /* 192 frames a live source dropped just before this one */
    uint32_t media;               /* 196 FS_MEDIA_*, the stream's (4.6)  */
    uint32_t sample_rate;         /* 200 audio: 1..FS_MAX_SAMPLE_RATE; video 0 */
    uint32_t channels;            /* 204 audio: 1..FS_MAX_CHANNELS; video 0 */
    uint32_t channel_order;       /* 208 audio: FS_CHANNEL_ORDER_*; video 0 */
    uint32_t nb_samples;          /* 212 audio: samples per channel, 1..FS_MAX_SAMPLES; video 0 */
    uint64_t channel_mask;        /* 216 audio, native order: AV_CH_* bits, popcount = channels; else 0 */
    uint8_t  reserved[32];        /* 224 .. 256 zero                     */
} fs_frame;

/* ------------------------------------------------------------------------- */
/* The announcement: one ZeroMQ message (one part) on the PUB socket          */
/* ipc://<dir>/<name>.sock, little-endian, 64 bytes + name_len bytes of name. */
/* ------------------------------------------------------------------------- */

typedef struct fs_announce {
    uint32_t magic;               /*   0 FS_MAGIC_ANNOUNCE               */
    uint16_t version;             /*   4 FS_PROTOCOL_VERSION             */
    uint16_t kind;                /*   6 FS_ANNOUNCE_*                   */
    uint64_t seq;                 /*   8                                 */
    uint32_t slot;                /*  16                                 */
    uint32_t flags;               /*  20 FS_FRAME_*                      */
    uint64_t epoch;               /*  24                                 */
    uint64_t capture_ns;          /*  32                                 */
    int64_t  pts;                 /*  40                                 */
    uint64_t publish_ns;          /*  48                                 */
    uint16_t name_len;            /*  56 bytes of stream name after the struct */
    uint16_t reserved0;           /*  58 0                               */
    uint32_t reserved1;           /*  60 0                               */
} fs_announce;

/* NAME.cuda (SOCK_SEQPACKET): one request, one reply with the allocation's descriptor
 * (SCM_RIGHTS) when status is FS_CUDA_OK (PROTOCOL.md 4.5). */
typedef struct fs_cuda_request {
    uint32_t magic;               /*   0 FS_MAGIC_CUDA                   */
    uint32_t version;             /*   4 FS_PROTOCOL_VERSION             */
    uint32_t entry;               /*   8 the asking consumer's entry     */
    uint32_t reserved0;           /*  12 0                               */
    uint64_t epoch;               /*  16 the epoch whose allocation it wants */
    uint64_t reserved1;           /*  24 0                               */
} fs_cuda_request;

typedef struct fs_cuda_reply {
    uint32_t magic;               /*   0 FS_MAGIC_CUDA                   */
    uint32_t version;             /*   4 FS_PROTOCOL_VERSION             */
    int32_t  status;              /*   8 FS_CUDA_*                       */
    uint32_t reserved0;           /*  12 0                               */
    uint64_t epoch;               /*  16 the epoch asked for             */
    uint64_t device_pool_size;    /*  24 bytes of that epoch's allocation */
} fs_cuda_reply;

/* Offsets the Python client and the spec check against. */
#define FS_OFF_CONTROL_EPOCH        56
#define FS_OFF_CONTROL_LATEST       72
#define FS_OFF_CONTROL_WAKE        112
#define FS_OFF_CONTROL_STATE       116
#define FS_OFF_CONTROL_ATTACH_SEQ  128
#define FS_OFF_CONTROL_NAME        160
#define FS_OFF_FRAME_CAPTURE_NS    136
#define FS_OFF_CONSUMER_FIRST_SEQ   24
#define FS_OFF_CONTROL_RATE_NUM    256
#define FS_OFF_CONTROL_RATE_DEN    264
#define FS_OFF_CONTROL_FRAME_WAKE  320
#define FS_OFF_CONTROL_SLEEPERS    328
#define FS_OFF_FRAME_FIELD_ORDER   184
#define FS_OFF_FRAME_CHROMA_LOCATION 188
#define FS_OFF_FRAME_SOURCE_DROPPED 192
#define FS_OFF_CONTROL_MEMORY      384
#define FS_OFF_CONTROL_FENCE_OFFSET 388
#define FS_OFF_CONTROL_DEVICE_UUID 392
#define FS_OFF_SLOT_READERS         40
#define FS_OFF_CONTROL_MEDIA       412
#define FS_OFF_FRAME_MEDIA         196
#define FS_OFF_FRAME_CHANNEL_MASK  216

_Static_assert(sizeof(fs_control) == 512, "wire layout changed: bump FS_PROTOCOL_VERSION");
_Static_assert(offsetof(fs_control, epoch) == FS_OFF_CONTROL_EPOCH, "layout");
_Static_assert(offsetof(fs_control, latest) == FS_OFF_CONTROL_LATEST, "layout");
_Static_assert(offsetof(fs_control, wake) == FS_OFF_CONTROL_WAKE, "layout");
_Static_assert(offsetof(fs_control, state) == FS_OFF_CONTROL_STATE, "layout");
_Static_assert(offsetof(fs_control, attach_seq) == FS_OFF_CONTROL_ATTACH_SEQ, "layout");
_Static_assert(offsetof(fs_control, name) == FS_OFF_CONTROL_NAME, "layout");
_Static_assert(offsetof(fs_control, pool_size) == 224, "layout");
_Static_assert(offsetof(fs_control, demoted) == 248, "layout");
_Static_assert(offsetof(fs_control, rate_num) == FS_OFF_CONTROL_RATE_NUM, "layout");
_Static_assert(offsetof(fs_control, producer_name) == 272, "layout");
_Static_assert(offsetof(fs_control, rate_den) == FS_OFF_CONTROL_RATE_DEN, "layout");
_Static_assert(offsetof(fs_control, frame_wake) == FS_OFF_CONTROL_FRAME_WAKE, "layout");
_Static_assert(offsetof(fs_control, frame_wake) % 64 == 0, "frame_wake starts its own cache line");
_Static_assert(offsetof(fs_control, sleepers) == FS_OFF_CONTROL_SLEEPERS, "layout");
_Static_assert(offsetof(fs_control, producer_pid) == 36 && offsetof(fs_control, producer_start_time) == 40,
               "identity prefix: fixed in every protocol version (PROTOCOL.md 16)");
_Static_assert(offsetof(fs_control, memory) == FS_OFF_CONTROL_MEMORY, "layout");
_Static_assert(offsetof(fs_control, fence_offset) == FS_OFF_CONTROL_FENCE_OFFSET, "layout");
_Static_assert(offsetof(fs_control, device_uuid) == FS_OFF_CONTROL_DEVICE_UUID && offsetof(fs_control, device_pool_size) == 424, "layout");
_Static_assert(offsetof(fs_control, reserved3) == 432, "layout");
_Static_assert(sizeof(fs_slot_ctl) == 64, "wire layout changed: bump FS_PROTOCOL_VERSION");
_Static_assert(offsetof(fs_slot_ctl, readers) == FS_OFF_SLOT_READERS, "layout");
_Static_assert(sizeof(fs_slot_fence) == 512 && offsetof(fs_slot_fence, ready) == 504, "layout");
_Static_assert(sizeof(fs_cuda_request) == 32 && sizeof(fs_cuda_reply) == 32, "layout");
_Static_assert(offsetof(fs_slot_ctl, producer_hold) == 32, "wire layout changed: bump FS_PROTOCOL_VERSION");
_Static_assert(sizeof(fs_consumer) == 1280, "wire layout changed: bump FS_PROTOCOL_VERSION");
_Static_assert(offsetof(fs_consumer, first_seq) == FS_OFF_CONSUMER_FIRST_SEQ, "layout");
_Static_assert(offsetof(fs_consumer, latency_hist) == 256, "layout");
_Static_assert(offsetof(fs_consumer, source_dropped) == 80, "layout");
_Static_assert(offsetof(fs_consumer, name) == 208, "layout");
_Static_assert(offsetof(fs_consumer, stale) == 248, "layout");
_Static_assert(sizeof(fs_frame) == 256, "wire layout changed: bump FS_PROTOCOL_VERSION");
_Static_assert(offsetof(fs_frame, color_matrix) == 88, "layout");
_Static_assert(offsetof(fs_frame, capture_ns) == FS_OFF_FRAME_CAPTURE_NS, "layout");
_Static_assert(offsetof(fs_frame, pix_fmt_name) == 152, "layout");
_Static_assert(offsetof(fs_frame, field_order) == FS_OFF_FRAME_FIELD_ORDER, "layout");
_Static_assert(offsetof(fs_frame, chroma_location) == FS_OFF_FRAME_CHROMA_LOCATION, "layout");
_Static_assert(offsetof(fs_frame, source_dropped) == FS_OFF_FRAME_SOURCE_DROPPED, "layout");
_Static_assert(offsetof(fs_frame, media) == FS_OFF_FRAME_MEDIA && offsetof(fs_frame, nb_samples) == 212, "layout");
_Static_assert(offsetof(fs_frame, channel_mask) == FS_OFF_FRAME_CHANNEL_MASK, "layout");
_Static_assert(offsetof(fs_control, media) == FS_OFF_CONTROL_MEDIA, "layout");
_Static_assert(offsetof(fs_frame, reserved) == 224, "layout");
_Static_assert(sizeof(fs_announce) == 64, "wire layout changed: bump FS_PROTOCOL_VERSION");
_Static_assert(offsetof(fs_announce, name_len) == 56, "layout");

/* ------------------------------------------------------------------------- */
/* Segment addressing                                                         */
/* ------------------------------------------------------------------------- */

/* The latency_hist bucket of a latency in whole microseconds: [us, us+1) under 100 us
 * (buckets 0..99), then steps of 100 us under 1 ms (100..108), of 1 ms under 10 ms
 * (109..117), of 10 ms under 100 ms (118..126); 127 holds 100 ms and more. */
static inline uint32_t fs_latency_bucket(uint64_t us)
{
    if (us < 100) return (uint32_t)us;
    if (us < 1000) return (uint32_t)(99 + us / 100);
    if (us < 10000) return (uint32_t)(108 + us / 1000);
    if (us < 100000) return (uint32_t)(117 + us / 10000);
    return FS_LATENCY_BUCKETS - 1;
}

/* The exclusive upper bound in microseconds of bucket b; 0 for the open last bucket. */
static inline uint64_t fs_latency_bucket_bound(uint32_t b)
{
    if (b < 100) return b + 1;
    if (b < 109) return (uint64_t)(b - 98) * 100;
    if (b < 118) return (uint64_t)(b - 107) * 1000;
    if (b < 127) return (uint64_t)(b - 116) * 10000;
    return 0;
}

static inline fs_slot_ctl *fs_control_slot(fs_control *c, uint32_t i)
{ return (fs_slot_ctl *)((uint8_t *)c + c->slot_ctl_offset + (size_t)i * sizeof(fs_slot_ctl)); }

static inline fs_consumer *fs_control_consumer(fs_control *c, uint32_t i)
{ return (fs_consumer *)((uint8_t *)c + c->consumer_offset + (size_t)i * sizeof(fs_consumer)); }

static inline size_t fs_control_size(uint32_t slot_count)
{ return sizeof(fs_control) + (size_t)slot_count * sizeof(fs_slot_ctl) + FS_MAX_CONSUMERS * sizeof(fs_consumer); }

/* A CUDA stream's segment: the host layout, then the fence table at fence_offset (4.5). */
static inline size_t fs_control_fence_offset(uint32_t slot_count) { return fs_control_size(slot_count); }
static inline size_t fs_control_size_cuda(uint32_t slot_count)
{ return fs_control_fence_offset(slot_count) + (size_t)slot_count * sizeof(fs_slot_fence); }

/* Only for a CUDA segment already validated (fence_offset checked, 4.5). */
static inline fs_slot_fence *fs_control_fence(fs_control *c, uint32_t i)
{ return (fs_slot_fence *)((uint8_t *)c + c->fence_offset + (size_t)i * sizeof(fs_slot_fence)); }

/* ------------------------------------------------------------------------- */
/* Atomic accessors. Every cross-process access goes through one of these.   */
/* ------------------------------------------------------------------------- */

static inline uint64_t fs_load_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline uint32_t fs_load_u32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline int32_t  fs_load_i32(const int32_t *p)  { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void fs_store_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static inline void fs_store_u32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static inline void fs_store_i32(int32_t *p, int32_t v)   { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
/* Statistics: relaxed, they order nothing. A statistic has one writer (fs_stat_set). */
static inline void fs_count(uint64_t *p, uint64_t n) { __atomic_fetch_add(p, n, __ATOMIC_RELAXED); }
static inline void fs_stat_set(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static inline uint64_t fs_peek_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

/* --- producer: reserve a slot for writing ---------------------------------
 * SYNC: succeeds only when no consumer holds the slot. Pairs with the consumer's
 * release (fs_slot_release): the acquire here sees every read the last holder made
 * finished before its release, so overwriting the pixels cannot tear a read. */
static inline int fs_slot_try_reserve(fs_slot_ctl *s)
{
    uint64_t expected = 0;
    return __atomic_compare_exchange_n(&s->holders, &expected, FS_HOLDER_WRITER, 0,
                                       __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/* --- producer: publish a written slot ---------------------------------------
 * SYNC: the release store of `holders` publishes the pixels, the fs_frame header and
 * slot->seq/epoch written before it. Pairs with the acquire in fs_slot_try_acquire
 * (live) and fs_slot_held_by (lossless). `reserved` is the set of lossless consumers
 * this frame is reserved for; it replaces FS_HOLDER_WRITER in one store. */
static inline void fs_slot_publish(fs_slot_ctl *s, uint64_t seq, uint64_t epoch,
                                   uint64_t publish_ns, uint64_t reserved)
{
    __atomic_store_n(&s->seq, seq, __ATOMIC_RELAXED);
    __atomic_store_n(&s->epoch, epoch, __ATOMIC_RELAXED);
    __atomic_store_n(&s->publish_ns, publish_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&s->holders, reserved, __ATOMIC_RELEASE);
}

/* --- producer: give up a reservation without publishing ---------------------
 * The slot's pixels may be half-overwritten, so its old sequence number is cleared
 * first: no live consumer can then match a stale announcement of the old frame.
 * SYNC: the release store of holders orders the seq store before it. */
static inline void fs_slot_abandon(fs_slot_ctl *s)
{
    __atomic_store_n(&s->seq, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->holders, 0, __ATOMIC_RELEASE);
}

/* --- live consumer: acquire a published frame -------------------------------
 * Returns 1 when `bit` now holds the slot and it still carries frame `seq`;
 * 0 when the slot is being rewritten or already holds a newer frame (a stale
 * announcement: count a miss), in which case nothing is held.
 * SYNC: the acq_rel fetch_or pairs with fs_slot_publish's release store (we see the
 * frame's bytes) and blocks fs_slot_try_reserve (which needs holders == 0) from then
 * on, so the seq check after it is stable. */
static inline int fs_slot_try_acquire(fs_slot_ctl *s, uint64_t bit, uint64_t seq)
{
    uint64_t old = __atomic_fetch_or(&s->holders, bit, __ATOMIC_ACQ_REL);
    if ((old & FS_HOLDER_WRITER) == 0 && __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) == seq)
        return 1;
    /* Undo. If the producer's publish store already replaced our bit this is a no-op. */
    if ((old & bit) == 0)
        __atomic_fetch_and(&s->holders, ~bit, __ATOMIC_RELEASE);
    return 0;
}

/* --- lossless consumer: is frame `seq` in this slot reserved for `bit`? -----
 * SYNC: the acquire load of holders pairs with fs_slot_publish's release store. */
static inline int fs_slot_held_by(fs_slot_ctl *s, uint64_t bit, uint64_t seq)
{
    uint64_t h = __atomic_load_n(&s->holders, __ATOMIC_ACQUIRE);
    return (h & bit) != 0 && (h & FS_HOLDER_WRITER) == 0 &&
           __atomic_load_n(&s->seq, __ATOMIC_RELAXED) == seq;
}

/* --- consumer: release a held slot ------------------------------------------
 * SYNC: the release orders every read of the frame before the bit clears; pairs with
 * fs_slot_try_reserve's acquire. Then bump `wake` (seq_cst, so a producer that went to
 * sleep on the old value is woken: see fs_producer_wait_begin) and return whether the
 * producer is waiting, in which case the caller must futex-wake `wake`.
 * fs_notify_producer is the second half alone, for any other change a waiting
 * producer must see (a failed live acquire that briefly set a bit, an attach). */
static inline int fs_notify_producer(fs_control *c)
{
    __atomic_fetch_add(&c->wake, 1, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&c->producer_waiting, __ATOMIC_SEQ_CST) != 0;
}
static inline int fs_slot_release(fs_control *c, fs_slot_ctl *s, uint64_t bit)
{
    __atomic_fetch_and(&s->holders, ~bit, __ATOMIC_SEQ_CST);
    return fs_notify_producer(c);
}

/* --- producer: prepare to sleep on `wake` ------------------------------------
 * Returns the value to pass to futex-wait. The caller rescans the slots after this
 * call and sleeps only if still nothing is free; any release after this point
 * changes `wake`, so the futex wait returns at once (no lost wake-up). */
static inline uint32_t fs_producer_wait_begin(fs_control *c)
{
    uint32_t w = __atomic_load_n(&c->wake, __ATOMIC_SEQ_CST);
    /* A count, not a flag: a producer may wait in two threads at once (its own and its
     * decoder's, which allocates frames in slots). */
    __atomic_fetch_add(&c->producer_waiting, 1, __ATOMIC_SEQ_CST);
    return w;
}
static inline void fs_producer_wait_end(fs_control *c)
{ __atomic_fetch_sub(&c->producer_waiting, 1, __ATOMIC_SEQ_CST); }

/* --- the one-hop wake: producer -> sleeping consumers (PROTOCOL.md 11) ---------
 * The producer calls fs_frame_ready after every change a consumer waits for (a publish
 * after its `latest` store, an admission, a demotion, an epoch, the end of the stream,
 * close) and futex-wakes `frame_wake` (all waiters) when it returns true. With nobody
 * asleep that is one uncontended RMW and one load: no system call.
 * A consumer about to sleep calls fs_consumer_wait_begin, looks at the slots once more,
 * and sleeps on the value it returned (bounded, 500 ms); then fs_consumer_wait_end.
 * SYNC: every access is seq_cst, so either the consumer's last look sees the frame, or
 * the producer's load of `sleepers` sees the consumer's bit, or the futex word already
 * differs from the consumer's value when it sleeps (no lost wake-up). A wake only means
 * "look again": the slot table decides, as without it. */
static inline int fs_frame_ready(fs_control *c)
{
    __atomic_fetch_add(&c->frame_wake, 1, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&c->sleepers, __ATOMIC_SEQ_CST) != 0;
}
static inline uint32_t fs_consumer_wait_begin(fs_control *c, uint64_t bit)
{
    uint32_t w = __atomic_load_n(&c->frame_wake, __ATOMIC_SEQ_CST);
    __atomic_fetch_or(&c->sleepers, bit, __ATOMIC_SEQ_CST);
    return w;
}
static inline void fs_consumer_wait_end(fs_control *c, uint64_t bit)
{ __atomic_fetch_and(&c->sleepers, ~bit, __ATOMIC_SEQ_CST); }
/* Busy-poll: spin while this still equals the value seen, then look. The acquire
 * orders the look after the producer's publish. */
static inline uint32_t fs_frame_wake_peek(const fs_control *c)
{ return __atomic_load_n(&c->frame_wake, __ATOMIC_ACQUIRE); }

/* --- producer: its own references to published frames -------------------------
 * A slot is free for a new frame only when no consumer holds it AND the producer has
 * no reference left (producer_hold == 0). Only the producer writes producer_hold: it sets
 * it while it holds bit 63 (before fs_slot_publish) and clears it from whatever thread
 * drops its last reference, then bumps `wake`.
 * SYNC: the release store in fs_slot_hold_clear orders the producer's last reads of the
 * slot before the slot can be reserved again (fs_slot_is_free's acquire load). */
static inline void fs_slot_hold_set(fs_slot_ctl *s)
{ __atomic_store_n(&s->producer_hold, 1, __ATOMIC_RELAXED); }
static inline void fs_slot_hold_clear(fs_slot_ctl *s)
{ __atomic_store_n(&s->producer_hold, 0, __ATOMIC_RELEASE); }
static inline int fs_slot_is_free(fs_slot_ctl *s)
{
    return __atomic_load_n(&s->producer_hold, __ATOMIC_ACQUIRE) == 0 &&
           __atomic_load_n(&s->holders, __ATOMIC_RELAXED) == 0;
}

/* Bump a futex word (wake or attach_seq) before futex-waking it. */
static inline void fs_bump(uint32_t *word) { __atomic_fetch_add(word, 1, __ATOMIC_SEQ_CST); }

/* --- consumer table ---------------------------------------------------------- */
/* Claim entry i for `pid`: CAS 0 -> pid. SYNC: acquire, pairs with fs_consumer_free. */
static inline int fs_consumer_claim(fs_consumer *e, int32_t pid)
{
    int32_t expected = 0;
    return __atomic_compare_exchange_n(&e->pid, &expected, pid, 0,
                                       __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}
/* SYNC: release, so the next claimer sees the entry's fields reset. */
static inline void fs_consumer_free(fs_consumer *e)
{
    __atomic_store_n(&e->state, FS_CONSUMER_FREE, __ATOMIC_RELAXED);
    __atomic_store_n(&e->pid, 0, __ATOMIC_RELEASE);
}

/* --- CUDA fences (PROTOCOL.md 4.5) ------------------------------------------------ */
/* A consumer marks itself a reader of the slot's frame before its first use of the planes.
 * SYNC: release; the producer's acquire exchange in fs_slot_take_readers (after it saw the
 * slot free, which this consumer's later release made so) sees the bit. */
static inline void fs_slot_add_reader(fs_slot_ctl *s, uint64_t bit)
{ __atomic_fetch_or(&s->readers, bit, __ATOMIC_RELEASE); }
/* The producer, holding bit 63 of a slot it just reserved: whose release fences to wait for. */
static inline uint64_t fs_slot_take_readers(fs_slot_ctl *s)
{ return __atomic_exchange_n(&s->readers, 0, __ATOMIC_ACQ_REL); }
/* A CPU's write and read of a fence word (the no-stream-memory-operations path, reclaim). */
static inline void fs_fence_store(uint64_t *word, uint64_t seq) { __atomic_store_n(word, seq, __ATOMIC_RELEASE); }
static inline uint64_t fs_fence_load(const uint64_t *word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

/* Clear consumer `bit` from one slot (reclaim or detach); returns whether it was set.
 * SYNC: seq_cst, like fs_slot_release (a waiting producer rescans after it). */
static inline int fs_slot_clear_holder(fs_slot_ctl *s, uint64_t bit)
{ return (__atomic_fetch_and(&s->holders, ~bit, __ATOMIC_SEQ_CST) & bit) != 0; }

/* Clear consumer `bit` from every slot (reclaim or detach). Returns how many it held.
 * Reads slot_count from the segment: only for a segment already validated (PROTOCOL.md
 * 4.1); the Swift library loops over its own validated count instead. */
static inline uint32_t fs_control_clear_holder(fs_control *c, uint64_t bit)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->slot_count; i++) {
        uint64_t old = __atomic_fetch_and(&fs_control_slot(c, i)->holders, ~bit, __ATOMIC_SEQ_CST);
        if (old & bit) n++;
    }
    return n;
}

/* ------------------------------------------------------------------------- */
/* System calls Swift's Glibc module does not expose (implemented in shim.c) */
/* ------------------------------------------------------------------------- */

/* futex(FUTEX_WAIT) on a shared word; timeout_ns < 0 waits forever.
 * Returns 0 when woken, -1 with errno EAGAIN (value changed), ETIMEDOUT or EINTR. */
int fs_sys_futex_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns);
/* futex(FUTEX_WAKE) all waiters. Returns the number woken or -1. */
int fs_sys_futex_wake(uint32_t *word);
/* pidfd_open(2): a descriptor that polls readable when the process exits. */
int fs_sys_pidfd_open(int32_t pid);
/* eventfd(2) wrappers. */
int fs_sys_eventfd(void);
int fs_sys_eventfd_signal(int fd);
int fs_sys_eventfd_drain(int fd);
/* inotify on a directory for created/renamed-in entries; returns the fd. */
int fs_sys_inotify_dir(const char *path);
int fs_sys_inotify_drain(int fd);
/* CLOCK_MONOTONIC in ns. */
uint64_t fs_sys_monotonic_ns(void);
uint64_t fs_sys_realtime_ns(void);
/* Field 22 (starttime) of /proc/<pid>/stat, 0 if the process does not exist. */
uint64_t fs_sys_process_start_time(int32_t pid);

/* --- system helper: file-descriptor limit and the accept() guard (shim.c's last block) --- */
/* Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now, -1 on error. */
int64_t fs_sys_raise_nofile_limit(void);
/* Opens the descriptor the accept() guard keeps in reserve (idempotent); 0, or -1 with errno. */
int fs_sys_connection_guard_arm(void);
/* How many connections the accept() guard refused because the process was out of descriptors. */
uint64_t fs_sys_refused_connections(void);

/* ------------------------------------------------------------------------- */
/* Truncation guard (SIGBUS), after wlroots and weston                        */
/*                                                                            */
/* A mapped file that another process truncates makes every access past the  */
/* new end raise SIGBUS; validation cannot prevent it. A mapper registers its */
/* mapping here; the handler, when the faulting address lies inside a        */
/* registered range, maps anonymous zero pages MAP_FIXED over the whole range */
/* (same protection), counts the fault on that entry and returns, so the      */
/* access is retried and reads zeros. Any other SIGBUS restores the previous  */
/* action and re-faults. The table is fixed and lock-free (async-signal-safe).*/
/* ------------------------------------------------------------------------- */

#define FS_GUARD_ENTRIES 1024u

/* Installs the handler once (idempotent, thread-safe). 0 on success, -1 with errno. */
int fs_guard_install(void);
/* Registers [base, base+length) mapped with `writable` protection. Returns the entry
 * (>= 0) or -1 when the table is full (the mapping is then unguarded). */
int fs_guard_register(void *base, size_t length, int writable);
/* Forgets an entry; call before unmapping. Entry -1 is ignored. */
void fs_guard_unregister(int entry);
/* SIGBUS faults caught on this entry since it was registered (0 for entry -1). */
uint64_t fs_guard_faults(int entry);
/* SIGBUS faults caught in the whole process. */
uint64_t fs_guard_total_faults(void);

#if defined(__clang__)
#pragma clang assume_nonnull end
#endif

#ifdef __cplusplus
}
#endif
#endif /* CFRAMESERVER_H */
