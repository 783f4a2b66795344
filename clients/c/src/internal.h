/*
 * internal.h: what libframesrv's source files share. Not installed.
 *
 * The layout is CFrameServer.h's (the protocol's single source of truth); every access
 * that races with another process is one of its fs_* accessors.
 *
 * Owners: common.c (errors, clocks, runtime directory, names, process identity, futex,
 * pidfd, mapping files), pixfmt.c (the pixel-format table and the canonical layout),
 * consumer.c / frame.c (consumer side), producer*.c (producer side), pattern.c.
 */
#ifndef FRAMESRV_INTERNAL_H
#define FRAMESRV_INTERNAL_H

#define _GNU_SOURCE
/* The public API is the only thing the shared library exports: built with
 * -fvisibility=hidden, the declarations of framesrv.h keep default visibility. */
#pragma GCC visibility push(default)
#include "framesrv.h"
#pragma GCC visibility pop
#include "CFrameServer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FSI_HIDDEN __attribute__((visibility("hidden")))
#define FSI_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ---- errors (common.c) --------------------------------------------------- */

/* Sets this thread's last error to the formatted one-line message and returns status. */
FSI_HIDDEN int fsi_fail(int status, const char *fmt, ...) FSI_PRINTF(2, 3);
/* fsi_fail(FRAMESRV_E_SYSTEM, "<what>: <strerror(errno)>"); keeps errno. */
FSI_HIDDEN int fsi_fail_errno(const char *fmt, ...) FSI_PRINTF(1, 2);

/* ---- clocks and time ----------------------------------------------------- */

FSI_HIDDEN uint64_t fsi_monotonic_ns(void);
FSI_HIDDEN uint64_t fsi_realtime_ns(void);
/* The deadline (CLOCK_MONOTONIC ns) of a timeout in ms; UINT64_MAX for -1. */
FSI_HIDDEN uint64_t fsi_deadline(int timeout_ms);
/* Milliseconds left until deadline, clamped to [0, cap_ms]; cap_ms for UINT64_MAX. */
FSI_HIDDEN int fsi_remaining_ms(uint64_t deadline, int cap_ms);

/* ---- runtime directory and names ------------------------------------------ */

/* $FRAMESRV_DIR, else $XDG_RUNTIME_DIR/framesrv, else /dev/shm/framesrv-<uid> (else
 * /tmp/framesrv-<uid>) (PROTOCOL.md 3.1, RuntimeDirectory.swift): created 0700 if missing
 * when `create`; always checked to be a directory owned by us (FRAMESRV_E_NOT_FOUND if it
 * does not exist and not `create`), tightened to 0700. */
FSI_HIDDEN int fsi_runtime_dir(char *out, size_t size, bool create);
/* [A-Za-z0-9._-]{1,48}, not "." or ".." (3.3). */
FSI_HIDDEN int fsi_check_name(const char *name);
/* out = "<dir>/<name><suffix>"; FRAMESRV_E_INVALID if it does not fit. */
FSI_HIDDEN int fsi_path(char *out, size_t size, const char *dir, const char *name, const char *suffix);

/* ---- processes (15.1) ------------------------------------------------------ */

/* Field 22 of /proc/<pid>/stat, 0 if the process does not exist. */
FSI_HIDDEN uint64_t fsi_process_start_time(pid_t pid);
/* A pidfd of pid if it is alive and started at start_time, else -1. */
FSI_HIDDEN int fsi_open_pidfd(pid_t pid, uint64_t start_time);
/* true while the pidfd's process has not exited (pidfd not readable). */
FSI_HIDDEN bool fsi_pidfd_alive(int pidfd);

/* ---- futex ------------------------------------------------------------------ */

/* FUTEX_WAKE (shared) every waiter on word. */
FSI_HIDDEN void fsi_futex_wake(uint32_t *word);
/* FUTEX_WAIT (shared) while *word == expected, up to timeout_ms (-1 forever): 0 when woken,
 * else the errno (EAGAIN: the word differed, ETIMEDOUT, EINTR: a signal). */
FSI_HIDDEN int fsi_futex_wait(uint32_t *word, uint32_t expected, int timeout_ms);

/* ---- mapping files ------------------------------------------------------------ */

/* Opens path O_RDONLY|O_NONBLOCK|O_NOFOLLOW (or O_RDWR when writable), checks it is a
 * regular file of a non-zero size, and maps all of it (MAP_SHARED). FRAMESRV_E_NOT_FOUND
 * (errno ENOENT) when it does not exist, FRAMESRV_E_BAD_DATA for a link, a FIFO, a
 * directory or an empty file, FRAMESRV_E_SYSTEM otherwise; the last error says which. */
FSI_HIDDEN int fsi_map_file(const char *path, bool writable, void **base, size_t *size);

/* ---- pixel formats and layout (pixfmt.c) -------------------------------------- */

typedef struct fsi_plane_shape {
    uint8_t ws, hs;            /* subsampling shifts            */
    uint8_t components;        /* interleaved components        */
    uint8_t sample_bytes;      /* bytes per component           */
} fsi_plane_shape;

typedef struct fsi_pix_format {
    int code;
    const char *name;
    uint32_t plane_count;
    fsi_plane_shape planes[FRAMESRV_MAX_PLANES];
    bool rgb;                  /* matrix 0 by default           */
} fsi_pix_format;

/* The table entry of a code, NULL for 0 or an unknown code. */
FSI_HIDDEN const fsi_pix_format *fsi_pix_format_of(int code);

/* The canonical layout of PROTOCOL.md 4.2: offsets, strides, sizes and the slot's bytes.
 * FRAMESRV_E_INVALID on overflow or a bad size. */
typedef struct fsi_layout {
    uint32_t plane_count;
    uint32_t offset[FRAMESRV_MAX_PLANES], stride[FRAMESRV_MAX_PLANES], size[FRAMESRV_MAX_PLANES];
    uint64_t slot_bytes;       /* offset(last) + size(last)     */
} fsi_layout;
FSI_HIDDEN int fsi_canonical_layout(const fsi_pix_format *format, uint32_t width, uint32_t height, fsi_layout *out);

/* Fills info->planes[] (data = slot + offset, geometry from the format) from a
 * validated header. For pix_fmt 0 every plane is 1 component of 1 byte, width = stride. */
FSI_HIDDEN void fsi_describe_planes(framesrv_frame_info *info, const fs_frame *header, uint8_t *slot);

/* ---- validation of what another process wrote (validate.c) -------------------------
 * Each returns FRAMESRV_OK or FRAMESRV_E_BAD_DATA with one line naming the file, the
 * field and the value (framesrv_last_error). Pure: they read only what they are given. */

/* The control segment's header (PROTOCOL.md 4.1; ControlSegment.validate): magic, version,
 * every fixed size and offset, slot_count 1..64, a file large enough for the tables and a
 * rate pair 0/0 or both >= 1. Another version is FRAMESRV_E_VERSION, read no further than
 * the identity prefix (magic, version, producer_pid @36, producer_start_time @40). */
FSI_HIDDEN int fsi_validate_control(const void *bytes, size_t size, const char *path, uint32_t *slot_count);
/* A pool file of `size` bytes holds slot_count slots of a multiple of 64 bytes, each at
 * least a frame header (Segment.openPool): *slot_bytes is its slot stride. */
FSI_HIDDEN int fsi_validate_pool(size_t size, uint32_t slot_count, const char *path, size_t *slot_bytes);
/* A frame header (a copy taken once: validate the copy, then use only it), as
 * FrameHeader.validate: magic, version, seq == the slot's seq, 1..16384 size, plane_count,
 * every plane inside the slot (offset >= 256), pix_fmt and its name agree (code 0 only for a
 * name outside the table), a known format's rows fit their planes, pts and duration within
 * +-2^62, time base >= 1/1, field_order 0..5, chroma_location 0..6. `path`/`slot` name it. */
FSI_HIDDEN int fsi_validate_frame(const fs_frame *header, uint64_t seq, uint64_t slot_bytes, const char *path, uint32_t slot);

/* An announcement of `length` bytes (PROTOCOL.md 5), checked in the spec's order: short,
 * bad-magic, version, kind, name-len (1..48), length (the vectors' error names appear in
 * the message). A version mismatch is FRAMESRV_E_VERSION (fatal), the rest BAD_DATA (ignored). */
FSI_HIDDEN int fsi_validate_announce(const void *message, size_t length);

/* ---- frames (frame.c) ----------------------------------------------------------- */

/* One mapped pool file, shared by the frames that live in it: unmapped when the last
 * reference goes (frames held across an epoch change keep their old pool). */
typedef struct fsi_pool {
    uint64_t epoch;
    uint8_t *base;
    size_t size;
    size_t slot_stride;
    uint32_t refs;             /* the owner's current-pool reference + one per frame held */
} fsi_pool;

/* Atomic counts: a frame may be released from another thread than its owner's. */
FSI_HIDDEN void fsi_pool_ref(fsi_pool *pool);
FSI_HIDDEN void fsi_pool_unref(fsi_pool *pool);     /* munmap + free at 0; NULL ignored */

enum fsi_frame_kind { FSI_FRAME_CONSUMED = 1, FSI_FRAME_RESERVED = 2 };

struct framesrv_frame {
    framesrv_frame_info info;  /* consumers: the validated copy; producers: preset (w) fields */
    int kind;                  /* fsi_frame_kind */
    uint32_t slot;
    fsi_pool *pool;            /* holds one reference */
    framesrv_consumer *consumer; /* FSI_FRAME_CONSUMED */
    framesrv_producer *producer; /* FSI_FRAME_RESERVED */
    struct framesrv_frame *next_held; /* the consumer's list of held frames */
    struct fsi_attachment *attachment; /* FSI_FRAME_CONSUMED: the producer instance it came from (consumer.h) */
};

/* framesrv_frame_release's two sides (frame.c dispatches on frame->kind; both are weak
 * references there, so a program linking one side statically does not need the other):
 * consumer.c gives a consumed frame's slot back; producer.c drops the producer's own
 * reference (producer_hold) to a frame published with framesrv_producer_publish_keep. */
FSI_HIDDEN void fsi_consumer_release(framesrv_frame *frame);
FSI_HIDDEN void fsi_producer_release_kept(framesrv_frame *frame);

#endif /* FRAMESRV_INTERNAL_H */
