/*
 * consumer_held.c: a lossless consumer whose own held frames keep the producer from
 * publishing (framesrv_consumer_set_held_timeout in framesrv.h). A producer needs a free
 * slot (fs_slot_is_free: no holder bit, no producer_hold) for its next frame; a consumer
 * waiting in next knows its own bit, so one scan of the slot table tells whether its holds
 * are what stops the frame it waits for.
 */
#include "consumer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char DEFAULT_ADVICE[] = "release frames, copy what you keep, or give the producer more slots (--slots)";

/* $FRAMESRV_HELD_TIMEOUT: seconds (a decimal >= 0) or "never"; unset or empty: 10 s. */
static int timeout_from_env(int *out)
{
    const char *v = getenv("FRAMESRV_HELD_TIMEOUT");
    *out = FSI_HELD_TIMEOUT_MS;
    if (!v || !*v) return FRAMESRV_OK;
    if (strcmp(v, "never") == 0) {
        *out = -1;
        return FRAMESRV_OK;
    }
    char *end;
    errno = 0;
    double s = strtod(v, &end);
    if (errno != 0 || *end != '\0' || !(s >= 0) || s > 2000000.0)
        return fsi_fail(FRAMESRV_E_INVALID, "FRAMESRV_HELD_TIMEOUT is '%.40s': use seconds (0..2000000, e.g. 10 or 2.5) or 'never'", v);
    *out = (int)(s * 1000.0 + 0.5);
    return FRAMESRV_OK;
}

int fsi_held_defaults(framesrv_consumer *c)
{
    snprintf(c->held_advice, sizeof c->held_advice, "%s", DEFAULT_ADVICE);
    return timeout_from_env(&c->held_timeout_ms);
}

int framesrv_consumer_set_held_timeout(framesrv_consumer *c, int timeout_ms, const char *advice)
{
    if (!c) return fsi_fail(FRAMESRV_E_INVALID, "framesrv_consumer_set_held_timeout: consumer is NULL");
    if (fsi_forked(c->opener)) return fsi_consumer_forked(c);
    if (timeout_ms < FRAMESRV_HELD_KEEP)
        return fsi_fail(FRAMESRV_E_INVALID, "held timeout %d ms: use >= 0 ms, -1 (never) or FRAMESRV_HELD_KEEP (-2)", timeout_ms);
    if (advice && strlen(advice) >= sizeof c->held_advice)
        return fsi_fail(FRAMESRV_E_INVALID, "held advice is %zu bytes: at most %zu", strlen(advice), sizeof c->held_advice - 1);
    if (timeout_ms != FRAMESRV_HELD_KEEP) c->held_timeout_ms = timeout_ms;
    if (advice) snprintf(c->held_advice, sizeof c->held_advice, "%s", advice);
    return FRAMESRV_OK;
}

/* Whether our holds block the producer: no slot is free or being written, we hold some,
 * and either one of ours is held by us alone (releasing it frees a slot) or every slot the
 * producer could reuse (no producer_hold) carries our bit. *ours: the slots we hold. */
static bool own_holds_block(const fsi_attachment *a, uint32_t *ours)
{
    uint32_t mine = 0, alone = 0, others_only = 0;
    for (uint32_t i = 0; i < a->slot_count; i++) {
        fs_slot_ctl *s = fsi_att_slot(a, i);
        uint64_t holders = fs_load_u64(&s->holders), hold = fs_load_u64(&s->producer_hold);
        if ((holders & FS_HOLDER_WRITER) != 0 || (holders == 0 && hold == 0)) return false;
        if (holders & a->bit) {
            mine++;
            alone += holders == a->bit && hold == 0;
        } else {
            others_only += hold == 0;
        }
    }
    *ours = mine;
    return mine > 0 && (alone > 0 || others_only == 0);
}

static bool stream_going(const fsi_attachment *a)
{
    return fs_load_u32(&a->ctl->state) != FS_STREAM_ENDED && !a->producer_exited && !a->evicted;
}

int fsi_held_check(framesrv_consumer *c, const fsi_attachment *a)
{
    uint32_t ours = 0;
    if (a->mode != FS_MODE_LOSSLESS || !stream_going(a) || !own_holds_block(a, &ours)) {
        fsi_held_clear(c);
        return FRAMESRV_OK;
    }
    uint64_t now = fsi_monotonic_ns();
    if (c->stuck_since_ns == 0) c->stuck_since_ns = now;
    uint64_t ms = (now - c->stuck_since_ns) / 1000000u;
    if (ms < FSI_HELD_WARN_MS && (c->held_timeout_ms < 0 || ms < (uint64_t)c->held_timeout_ms)) return FRAMESRV_OK;
    char line[512];
    snprintf(line, sizeof line,
             "consumer '%s' holds %u of %u slots of stream '%s' (frames or arrays still referenced); "
             "the producer cannot publish until one is released: %s",
             c->client_name, ours, a->slot_count, c->stream, c->held_advice);
    if (!c->stuck_warned) {
        c->stuck_warned = true;
        fprintf(stderr, "framesrv: %s\n", line);
        fflush(stderr);
    }
    if (c->held_timeout_ms < 0 || ms < (uint64_t)c->held_timeout_ms) return FRAMESRV_OK;
    c->stuck_since_ns = 0;   /* a retry without a release waits (and fails) again, without a second line */
    return fsi_fail(FRAMESRV_E_HELD, "%s (waited %llu ms)", line, (unsigned long long)ms);
}
