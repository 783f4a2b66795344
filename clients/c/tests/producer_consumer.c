/*
 * producer_consumer.c: libframesrv's producer with libframesrv's consumer, in separate
 * processes. Lossless delivery is exactly once and in order with every byte intact; a
 * consumer killed with SIGKILL is reclaimed and publishing goes on; a producer killed
 * with SIGKILL mid-stream is FRAMESRV_GONE to its consumer, whose reopen then attaches
 * to the next producer of the name (whose sequence numbers start at 1 again); a consumer
 * that spins (poll_us) gets the same frames, and so does one that releases its frames in
 * another thread while next runs; a consumer that detaches while the producer
 * waits in reserve for the slots reserved for it lets reserve go on.
 */
#include "producer_check.h"

#include <inttypes.h>
#include <libgen.h>
#include <pthread.h>
#include <stdbool.h>

static char produce_tool[4096];   /* framesrv-produce next to this test's build directory */

/* Frames handed from the consumer's thread to a releasing thread (a pipe of pointers). */
static int handoff[2];

static void *release_thread(void *unused)
{
    (void)unused;
    framesrv_frame *f;
    while (read(handoff[0], &f, sizeof f) == (ssize_t)sizeof f && f != NULL) framesrv_frame_release(f);
    return NULL;
}

/* The consumer child: reads `name` losslessly until the end; exit 0 when frames 1..expect
 * arrived once each, in order, intact; 1 otherwise; 2 on an error. With `elsewhere`, every
 * frame is released by another thread, concurrently with next (framesrv.h). */
static int consume_all(const char *name, uint64_t expect, uint32_t poll_us, bool elsewhere)
{
    framesrv_consumer_options o = {.mode = FRAMESRV_LOSSLESS, .attach_timeout_ms = 20000, .poll_us = poll_us};
    framesrv_consumer *c;
    pthread_t t;
    if ((elsewhere && pipe(handoff) != 0) || framesrv_consumer_open(&c, name, &o) != FRAMESRV_OK) return 2;
    if (elsewhere) pthread_create(&t, NULL, release_thread, NULL);
    uint64_t next = 1;
    int rc, status = 0;
    framesrv_frame *f;
    while ((rc = framesrv_consumer_next(c, 10000, &f)) == FRAMESRV_OK) {
        framesrv_frame_info *in = framesrv_frame_info_of(f);
        if (in->seq != next++ || framesrv_pattern_check(f) != 0) status = 1;
        if (!elsewhere) framesrv_frame_release(f);
        else if (write(handoff[1], &f, sizeof f) != (ssize_t)sizeof f) return 2;
    }
    f = NULL;
    if (elsewhere && write(handoff[1], &f, sizeof f) == (ssize_t)sizeof f) pthread_join(t, NULL);
    if (rc != FRAMESRV_END || next - 1 != expect) status = status ? status : 1;
    framesrv_consumer_close(c);
    return status;
}

/* poll_us 0 sleeps on frame_wake at once; 50 spins first: the same frames either way. */
static void exactly_once(const char *name, uint32_t poll_us, bool release_elsewhere)
{
    pid_t child = fork();
    if (child == 0) _exit(consume_all(name, 1000, poll_us, release_elsewhere));
    framesrv_producer_options o = {.width = 160, .height = 90, .pix_fmt = FRAMESRV_PIX_YUV422P, .slots = 3};
    framesrv_producer *p;
    CHECK_STATUS(framesrv_producer_open(&p, name, &o), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 20000), FRAMESRV_OK);
    CHECK(framesrv_producer_lossless_consumers(p) == 1, "one lossless consumer attached (%u)", framesrv_producer_lossless_consumers(p));
    CHECK(framesrv_producer_lossless_consumers(NULL) == 0, "NULL: 0");
    for (int i = 0; i < 1000; i++) {
        framesrv_frame *f;
        int rc = framesrv_producer_reserve(p, 10000, &f);
        CHECK(rc == FRAMESRV_OK, "reserve %d: %s", i, framesrv_status_name(rc));
        if (rc != FRAMESRV_OK) break;
        if (i == 500) {   /* mid-stream format change: a new epoch */
            framesrv_producer_abandon(p, f);
            CHECK_STATUS(framesrv_producer_change_format(p, 640, 360, FRAMESRV_PIX_YUV420P), FRAMESRV_OK);
            CHECK_STATUS(framesrv_producer_reserve(p, 10000, &f), FRAMESRV_OK);
        }
        framesrv_pattern_fill(f);
        CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_OK);
    }
    framesrv_producer_close(p);
    CHECK(check_wait(child, 60) == 0, "the C consumer (poll_us %u%s) got frames 1..1000 once each, in order, intact", poll_us,
          release_elsewhere ? ", releasing in another thread" : "");
}

/* Both slots hold frames reserved for a lossless consumer that takes neither; the producer
 * waits in reserve; the consumer detaches (close: CLOSING, then it notifies `wake`): the
 * producer reclaims its reservations and reserve goes on (PROTOCOL.md 8.2, 12.3). */
static void detach_wakes_reserve(void)
{
    int go[2];
    CHECK(pipe(go) == 0, "pipe");
    pid_t child = fork();
    if (child == 0) {
        framesrv_consumer_options co = {.mode = FRAMESRV_LOSSLESS, .attach_timeout_ms = 20000};
        framesrv_consumer *c;
        char byte;
        if (framesrv_consumer_open(&c, "detach", &co) != FRAMESRV_OK || read(go[0], &byte, 1) != 1) _exit(2);
        usleep(300000);   /* the producer is asleep in reserve by now */
        framesrv_consumer_close(c);
        _exit(0);
    }
    framesrv_producer_options o = {.width = 32, .height = 32, .pix_fmt = FRAMESRV_PIX_GRAY, .slots = 2};
    framesrv_producer *p;
    framesrv_frame *f = NULL;
    CHECK_STATUS(framesrv_producer_open(&p, "detach", &o), FRAMESRV_OK);
    if (p == NULL) return (void)check_wait(child, 10);
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 20000), FRAMESRV_OK);
    for (int i = 0; i < 2; i++) {
        CHECK_STATUS(framesrv_producer_reserve(p, 1000, &f), FRAMESRV_OK);
        if (f) framesrv_producer_publish(p, f);
    }
    CHECK(write(go[1], "g", 1) == 1, "tell the consumer to detach");
    f = NULL;
    CHECK_STATUS(framesrv_producer_reserve(p, 20000, &f), FRAMESRV_OK);
    if (f) CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_OK);
    CHECK(check_wait(child, 10) == 0, "the consumer detached cleanly");
    framesrv_producer_stats st;
    framesrv_producer_stats_of(p, &st);
    CHECK(st.reclaimed == 0 && st.consumers == 0, "a detach, not a death: reclaimed %" PRIu64 ", consumers %" PRIu64, st.reclaimed,
          st.consumers);
    framesrv_producer_close(p);
    close(go[0]);
    close(go[1]);
}

/* The consumer child: takes one frame, keeps it, and waits to be killed. */
static void consumer_killed(void)
{
    pid_t child = fork();
    if (child == 0) {
        framesrv_consumer_options o = {.mode = FRAMESRV_LOSSLESS, .attach_timeout_ms = 20000};
        framesrv_consumer *c;
        framesrv_frame *f;
        if (framesrv_consumer_open(&c, "victim", &o) != FRAMESRV_OK) _exit(2);
        if (framesrv_consumer_next(c, 20000, &f) != FRAMESRV_OK) _exit(2);
        for (;;) pause();
    }
    framesrv_producer_options o = {.width = 32, .height = 32, .pix_fmt = FRAMESRV_PIX_GRAY, .slots = 2};
    framesrv_producer *p;
    framesrv_frame *f = NULL;
    CHECK_STATUS(framesrv_producer_open(&p, "victim", &o), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 20000), FRAMESRV_OK);
    for (int i = 0; i < 2; i++) {
        CHECK_STATUS(framesrv_producer_reserve(p, 1000, &f), FRAMESRV_OK);
        if (f) framesrv_producer_publish(p, f);
    }
    f = NULL;
    CHECK_STATUS(framesrv_producer_reserve(p, 100, &f), FRAMESRV_TIMEOUT);   /* both reserved for it */
    if (f) framesrv_producer_abandon(p, f);
    kill(child, SIGKILL);
    check_wait(child, 10);
    f = NULL;
    CHECK_STATUS(framesrv_producer_reserve(p, 10000, &f), FRAMESRV_OK);
    if (f) CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_OK);
    framesrv_producer_stats st;
    framesrv_producer_stats_of(p, &st);
    CHECK(st.reclaimed == 1 && st.consumers == 0 && st.published == 3, "reclaimed %" PRIu64 ", consumers %" PRIu64
          ", published %" PRIu64, st.reclaimed, st.consumers, st.published);
    framesrv_producer_close(p);
}

static pid_t start_producer(char *frames, char *rate)
{
    char *argv[] = {produce_tool, "--out", "phoenix", "--size", "64x48", "--rate", rate, "--wait-for", "1",
                    frames ? "--frames" : NULL, frames, NULL};
    return check_spawn(argv, "/dev/null");
}

/* Reads until something other than a frame; counts and checks the frames. */
static int drain(framesrv_consumer *c, uint64_t *frames, uint64_t *first, uint64_t *corrupt)
{
    framesrv_frame *f;
    int rc;
    while ((rc = framesrv_consumer_next(c, 10000, &f)) == FRAMESRV_OK) {
        if ((*frames)++ == 0) *first = framesrv_frame_info_of(f)->seq;
        *corrupt += framesrv_pattern_check(f) != 0;
        framesrv_frame_release(f);
    }
    return rc;
}

static void producer_killed(void)
{
    pid_t first_producer = start_producer(NULL, "200");
    framesrv_consumer_options o = {.mode = FRAMESRV_LOSSLESS, .attach_timeout_ms = 20000};
    framesrv_consumer *c;
    CHECK_STATUS(framesrv_consumer_open(&c, "phoenix", &o), FRAMESRV_OK);
    if (c == NULL) return;
    framesrv_frame *f;
    for (int i = 0; i < 20; i++) {
        CHECK_STATUS(framesrv_consumer_next(c, 10000, &f), FRAMESRV_OK);
        framesrv_frame_release(f);
    }
    kill(first_producer, SIGKILL);
    check_wait(first_producer, 10);
    uint64_t frames = 0, first = 0, corrupt = 0;
    CHECK_STATUS(drain(c, &frames, &first, &corrupt), FRAMESRV_GONE);
    CHECK(corrupt == 0, "frames still owed after the kill are intact");
    pid_t second = start_producer("50", "max");
    CHECK_STATUS(framesrv_consumer_reopen(c, 20000), FRAMESRV_OK);
    frames = first = corrupt = 0;
    CHECK_STATUS(drain(c, &frames, &first, &corrupt), FRAMESRV_END);
    CHECK(frames == 50 && first == 1 && corrupt == 0, "the new producer's frames: %" PRIu64 " from %" PRIu64
          ", corrupt %" PRIu64, frames, first, corrupt);
    framesrv_consumer_stats st;
    framesrv_consumer_stats_of(c, &st);
    CHECK(st.restarts == 1, "restarts %" PRIu64, st.restarts);
    framesrv_consumer_close(c);
    CHECK(check_wait(second, 30) == 0, "the second producer ended cleanly");
}

/* The consumer child of source_drops: holds frames 1 and 2 until told, then expects frame 3
 * to carry the live source's 3 drops (source_dropped, FRAMESRV_FRAME_DISCONTINUITY). */
static int hold_then_expect_drops(int ready, int go)
{
    framesrv_consumer_options o = {.mode = FRAMESRV_LOSSLESS, .attach_timeout_ms = 20000};
    framesrv_consumer *c;
    framesrv_frame *a, *b, *f;
    char byte = 1;
    if (framesrv_consumer_open(&c, "cdrops", &o) != FRAMESRV_OK) return 2;
    if (framesrv_consumer_next(c, 20000, &a) != FRAMESRV_OK || framesrv_consumer_next(c, 20000, &b) != FRAMESRV_OK) return 2;
    if (write(ready, &byte, 1) != 1 || read(go, &byte, 1) != 1) return 2;
    framesrv_frame_release(a);
    framesrv_frame_release(b);
    if (write(ready, &byte, 1) != 1) return 2;   /* both slots free: the next reserve succeeds */
    if (framesrv_consumer_next(c, 20000, &f) != FRAMESRV_OK) return 2;
    framesrv_frame_info *in = framesrv_frame_info_of(f);
    int status = in->seq == 3 && in->source_dropped == 3 && (in->flags & FRAMESRV_FRAME_DISCONTINUITY) ? 0 : 1;
    if (status) fprintf(stderr, "seq %llu source_dropped %u flags %u\n", (unsigned long long)in->seq, in->source_dropped, in->flags);
    framesrv_frame_release(f);
    framesrv_consumer_close(c);
    return status;
}

/* A live source's drops reach a lossless consumer in the next frame's header (PROTOCOL.md 4.2). */
static void source_drops(void)
{
    int ready[2], go[2];
    CHECK(pipe(ready) == 0 && pipe(go) == 0, "pipes");
    pid_t child = fork();
    if (child == 0) _exit(hold_then_expect_drops(ready[1], go[0]));
    framesrv_producer_options o = {.width = 64, .height = 48, .pix_fmt = FRAMESRV_PIX_GRAY, .slots = 2, .live_source = 1};
    framesrv_producer *p;
    framesrv_frame *f;
    char byte = 1;
    CHECK_STATUS(framesrv_producer_open(&p, "cdrops", &o), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 20000), FRAMESRV_OK);
    for (int i = 0; i < 2; i++) {
        CHECK_STATUS(framesrv_producer_reserve(p, 0, &f), FRAMESRV_OK);
        CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_OK);
    }
    CHECK(read(ready[0], &byte, 1) == 1, "the consumer holds both frames");
    for (int i = 0; i < 3; i++) CHECK_STATUS(framesrv_producer_reserve(p, 0, &f), FRAMESRV_TIMEOUT);
    CHECK(write(go[1], &byte, 1) == 1, "go");
    CHECK(read(ready[0], &byte, 1) == 1, "the consumer released both frames");
    CHECK_STATUS(framesrv_producer_reserve(p, 0, &f), FRAMESRV_OK);   /* a live source never waits: no retry */
    CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_OK);
    int st = check_wait(child, 30);
    CHECK(st == 0, "the consumer saw frame 3 with the source's 3 drops (status %d)", st);
    framesrv_producer_close(p);
}

int main(int argc, char **argv)
{
    (void)argc;
    char self[4096];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(produce_tool, sizeof produce_tool, "%s/../framesrv-produce", dirname(self));
    check_runtime_dir();
    exactly_once("once", 0, false);
    exactly_once("spin", 50, false);
    exactly_once("threads", 0, true);
    consumer_killed();
    detach_wakes_reserve();
    source_drops();
    if (access(produce_tool, X_OK) == 0) producer_killed();
    else printf("producer_consumer: producer_killed skipped (no %s)\n", produce_tool);
    return check_exit("producer_consumer");
}
