/*
 * _fsatomic.c: the atomic operations the Python client needs, as exported functions.
 *
 * Python has no atomics on shared memory, so framesrv_client.py compiles this file on
 * first use (cc -shared -fPIC -O2, into a cache directory) and calls it through ctypes.
 * Every function is a thin, non-inline wrapper around the static inline accessor of the
 * same name in CFrameServer.h, so the Python client performs exactly the header's atomic
 * operations with exactly its memory orderings; the SYNC: comments live there.
 * Pointers are addresses inside the caller's mappings of the control segment.
 *
 * Also exported: futex wake (the header declares it but implements it in the Swift
 * target's shim.c, which this library does not link), and a table of every field's
 * offsetof/sizeof as the compiler sees it, which the Python tests compare with the
 * client's own layout.
 */
#define _GNU_SOURCE
#include "CFrameServer.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FSA_EXPORT __attribute__((visibility("default")))

/* --- plain atomic loads and stores (acquire / release, as the header) --- */
FSA_EXPORT uint64_t fsa_load_u64(const uint64_t *p) { return fs_load_u64(p); }
FSA_EXPORT uint32_t fsa_load_u32(const uint32_t *p) { return fs_load_u32(p); }
FSA_EXPORT int32_t  fsa_load_i32(const int32_t *p) { return fs_load_i32(p); }
FSA_EXPORT void fsa_store_u64(uint64_t *p, uint64_t v) { fs_store_u64(p, v); }
FSA_EXPORT void fsa_store_u32(uint32_t *p, uint32_t v) { fs_store_u32(p, v); }
/* Statistics (relaxed). */
FSA_EXPORT void fsa_count(uint64_t *p, uint64_t n) { fs_count(p, n); }
FSA_EXPORT uint64_t fsa_peek_u64(const uint64_t *p) { return fs_peek_u64(p); }

/* --- the protocol's operations --- */
FSA_EXPORT int fsa_consumer_claim(fs_consumer *e, int32_t pid) { return fs_consumer_claim(e, pid); }
FSA_EXPORT int fsa_slot_try_acquire(fs_slot_ctl *s, uint64_t bit, uint64_t seq) { return fs_slot_try_acquire(s, bit, seq); }
FSA_EXPORT int fsa_slot_held_by(fs_slot_ctl *s, uint64_t bit, uint64_t seq) { return fs_slot_held_by(s, bit, seq); }
FSA_EXPORT int fsa_slot_release(fs_control *c, fs_slot_ctl *s, uint64_t bit) { return fs_slot_release(c, s, bit); }
FSA_EXPORT int fsa_notify_producer(fs_control *c) { return fs_notify_producer(c); }
FSA_EXPORT void fsa_bump(uint32_t *word) { fs_bump(word); }

/* FUTEX_WAKE every waiter on a word of a MAP_SHARED segment (not _PRIVATE: the waiter
 * is another process). Returns the number woken or -1. */
FSA_EXPORT int fsa_futex_wake(uint32_t *word)
{
    return (int)syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* After a failed fs_slot_try_acquire (a stale announcement) the undo may have freed the
 * slot the producer is waiting for, but fs_slot_try_acquire bumps nothing.
 * SYNC: fs_notify_producer (the tail of fs_slot_release: seq_cst bump of `wake`, then a
 * seq_cst load of producer_waiting, pairing with fs_producer_wait_begin), then the futex
 * wake it asks for. */
FSA_EXPORT void fsa_wake_producer(fs_control *c)
{
    if (fs_notify_producer(c))
        fsa_futex_wake(&c->wake);
}

/* --- the layout as this compiler sees it --- */
typedef struct fsa_field {
    const char *strct;
    const char *field;
    uint32_t offset;
    uint32_t size;
} fsa_field;

#define F(s, f) { #s, #f, (uint32_t)offsetof(s, f), (uint32_t)sizeof(((s *)0)->f) }
#define S(s) { #s, "", 0, (uint32_t)sizeof(s) }

static const fsa_field fsa_fields[] = {
    S(fs_control),
    F(fs_control, magic), F(fs_control, version), F(fs_control, header_size),
    F(fs_control, slot_count), F(fs_control, max_consumers), F(fs_control, slot_ctl_size),
    F(fs_control, consumer_size), F(fs_control, slot_ctl_offset), F(fs_control, consumer_offset),
    F(fs_control, producer_pid), F(fs_control, producer_start_time), F(fs_control, created_ns),
    F(fs_control, epoch), F(fs_control, slot_stride), F(fs_control, latest), F(fs_control, published),
    F(fs_control, dropped), F(fs_control, blocked_ns), F(fs_control, lossless_mask), F(fs_control, wake),
    F(fs_control, state), F(fs_control, end_seq), F(fs_control, attach_seq),
    F(fs_control, producer_waiting), F(fs_control, min_free), F(fs_control, reclaimed),
    F(fs_control, live_max_held), F(fs_control, flags), F(fs_control, name), F(fs_control, pool_size),
    F(fs_control, last_publish_ns), F(fs_control, rate_milli), F(fs_control, demoted), F(fs_control, reserved),
    S(fs_slot_ctl),
    F(fs_slot_ctl, holders), F(fs_slot_ctl, seq), F(fs_slot_ctl, epoch), F(fs_slot_ctl, publish_ns),
    F(fs_slot_ctl, producer_hold), F(fs_slot_ctl, reserved),
    S(fs_consumer),
    F(fs_consumer, pid), F(fs_consumer, state), F(fs_consumer, start_time), F(fs_consumer, mode),
    F(fs_consumer, flags), F(fs_consumer, first_seq), F(fs_consumer, attached_ns),
    F(fs_consumer, delivered), F(fs_consumer, missed), F(fs_consumer, last_seq), F(fs_consumer, held),
    F(fs_consumer, hold_since_ns), F(fs_consumer, latency_hist), F(fs_consumer, name),
    F(fs_consumer, latency_sum_ns), F(fs_consumer, stale),
    S(fs_frame),
    F(fs_frame, magic), F(fs_frame, version), F(fs_frame, seq), F(fs_frame, epoch), F(fs_frame, width),
    F(fs_frame, height), F(fs_frame, pix_fmt), F(fs_frame, plane_count), F(fs_frame, plane_offset),
    F(fs_frame, plane_stride), F(fs_frame, plane_size), F(fs_frame, color_matrix),
    F(fs_frame, color_range), F(fs_frame, color_primaries), F(fs_frame, color_transfer),
    F(fs_frame, sar_num), F(fs_frame, sar_den), F(fs_frame, pts), F(fs_frame, time_base_num),
    F(fs_frame, time_base_den), F(fs_frame, duration), F(fs_frame, capture_ns), F(fs_frame, flags),
    F(fs_frame, payload_size), F(fs_frame, pix_fmt_name), F(fs_frame, reserved),
    S(fs_announce),
    F(fs_announce, magic), F(fs_announce, version), F(fs_announce, kind), F(fs_announce, seq),
    F(fs_announce, slot), F(fs_announce, flags), F(fs_announce, epoch), F(fs_announce, capture_ns),
    F(fs_announce, pts), F(fs_announce, publish_ns), F(fs_announce, name_len),
    F(fs_announce, reserved0), F(fs_announce, reserved1),
};

/* The table above: each struct's size (field "") followed by its fields. */
FSA_EXPORT const fsa_field *fsa_layout(uint32_t *count)
{
    *count = (uint32_t)(sizeof fsa_fields / sizeof fsa_fields[0]);
    return fsa_fields;
}
