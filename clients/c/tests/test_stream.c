/*
 * test_stream.c: the consumer against a real Swift producer (`framesrv produce --pattern`;
 * FRAMESRV=/path/to/framesrv, default ../../.build/debug/framesrv): lossless exactly-once
 * with every byte checked, a frame held across two pool epochs, live, the stream's rate,
 * a producer killed under the consumer (GONE) and reopen on the next producer. And the
 * one-hop wake (libframesrv's producer in this process): a consumer asleep for seconds gets
 * a frame published after its sleep began, with the ZeroMQ path saturated and stalled, and
 * with nobody subscribed at all (nothing sent); and a consumer woken with a frame clears its
 * sleeper bit while it holds the frame (PROTOCOL.md 11.1).
 */
#include "check.h"
#include "producer.h"

#include <signal.h>
#include <stdbool.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <zmq.h>

extern char **environ;
static const char *framesrv_bin;

/* `framesrv produce --pattern --out NAME --quiet ARGS...` in the background. */
static pid_t produce(const char *name, const char *const *args)
{
    const char *argv[32] = { framesrv_bin, "produce", "--pattern", "--out", name, "--quiet" };
    int n = 6;
    while (*args && n < 31) argv[n++] = *args++;
    argv[n] = NULL;
    pid_t pid;
    if (posix_spawn(&pid, framesrv_bin, NULL, NULL, (char *const *)argv, environ) != 0) return -1;
    return pid;
}

static int reap(pid_t pid)
{
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    return status;
}

static framesrv_consumer *open_stream(const char *name, framesrv_mode mode)
{
    framesrv_consumer_options o = { .mode = mode, .attach_timeout_ms = 20000, .client_name = "test_stream" };
    framesrv_consumer *c = NULL;
    CHECK_STATUS(framesrv_consumer_open(&c, name, &o), FRAMESRV_OK);
    return c;
}

/* Receives until END (or an error); checks order (lossless: consecutive) and patterns.
 * `keep` (a seq) is not released but returned in *kept. Returns the frames received. */
static uint64_t receive_all(framesrv_consumer *c, bool lossless, uint64_t keep, framesrv_frame **kept)
{
    uint64_t received = 0, last = 0;
    for (;;) {
        framesrv_frame *f;
        int status = framesrv_consumer_next(c, 10000, &f);
        if (status == FRAMESRV_END) return received;
        CHECK_STATUS(status, FRAMESRV_OK);
        if (status != FRAMESRV_OK) return received;
        const framesrv_frame_info *i = framesrv_frame_info_of(f);
        CHECK(lossless ? i->seq == last + 1 : i->seq > last, "seq %llu after %llu", (unsigned long long)i->seq, (unsigned long long)last);
        CHECK(framesrv_pattern_check(f) == 0, "frame %llu fails the pattern", (unsigned long long)i->seq);
        last = i->seq;
        received++;
        if (i->seq == keep && kept) *kept = f;
        else framesrv_frame_release(f);
    }
}

static void lossless_with_epochs(void)
{
    const char *args[] = { "--size", "64x48", "--pix-fmt", "yuv420p", "--rate", "max", "--frames", "60", "--slots", "4",
                           "--wait-for", "1", "--size-change-at", "20:160x90,40:32x32", NULL };
    pid_t p = produce("epochs", args);
    framesrv_consumer *c = open_stream("epochs", FRAMESRV_LOSSLESS);
    if (!c) return (void)kill(p, SIGKILL), (void)reap(p);
    framesrv_frame *kept = NULL;
    CHECK(receive_all(c, true, 5, &kept) == 60, "60 frames");
    /* Frame 5 lives in epoch 1's pool, two epochs ago: still mapped, still intact. */
    CHECK(kept && framesrv_frame_info_of(kept)->width == 64 && framesrv_pattern_check(kept) == 0, "frame 5 held across epochs");
    framesrv_consumer_stats st;
    framesrv_consumer_stats_of(c, &st);
    CHECK(st.delivered == 60 && st.held == 1 && st.bad_frames == 0 && st.missed == 0, "stats %llu %llu",
          (unsigned long long)st.delivered, (unsigned long long)st.held);
    framesrv_consumer_close(c);   /* releases frame 5 */
    CHECK(WIFEXITED(reap(p)), "producer exited");
}

static void live_and_rate(void)
{
    const char *args[] = { "--size", "32x32", "--pix-fmt", "rgb24", "--rate", "25", "--frames", "25", NULL };
    framesrv_consumer_options o = { .mode = FRAMESRV_LIVE, .attach_timeout_ms = 20000 };
    pid_t p = produce("live", args);
    framesrv_consumer *c = NULL;
    CHECK_STATUS(framesrv_consumer_open(&c, "live", &o), FRAMESRV_OK);
    if (!c) return (void)kill(p, SIGKILL), (void)reap(p);
    framesrv_stream_info info;
    CHECK_STATUS(framesrv_consumer_stream_info(c, &info), FRAMESRV_OK);
    CHECK(info.rate_num == 25 && info.rate_den == 1 && info.producer_pid == p && !strcmp(info.name, "live"), "rate %lld/%lld pid %d",
          (long long)info.rate_num, (long long)info.rate_den, info.producer_pid);
    CHECK(framesrv_consumer_fd(c) >= 0, "fd: %s", framesrv_last_error());
    CHECK(receive_all(c, false, 0, NULL) > 0, "some live frames");
    framesrv_consumer_close(c);
    reap(p);
}

static void killed_then_reopen(void)
{
    const char *forever[] = { "--size", "32x32", "--rate", "100", "--frames", "100000", "--wait-for", "1", NULL };
    pid_t a = produce("restart", forever);
    framesrv_consumer *c = open_stream("restart", FRAMESRV_LOSSLESS);
    if (!c) return (void)kill(a, SIGKILL), (void)reap(a);
    framesrv_frame *f;
    for (int i = 0; i < 5; i++) {
        CHECK_STATUS(framesrv_consumer_next(c, 10000, &f), FRAMESRV_OK);
        framesrv_frame_release(f);
    }
    kill(a, SIGKILL);
    reap(a);
    int status;
    while ((status = framesrv_consumer_next(c, 10000, &f)) == FRAMESRV_OK) framesrv_frame_release(f);   /* frames owed */
    CHECK_STATUS(status, FRAMESRV_GONE);
    CHECK_STATUS(framesrv_consumer_next(c, 0, &f), FRAMESRV_GONE);   /* sticky */
    const char *next[] = { "--size", "48x16", "--rate", "max", "--frames", "10", "--wait-for", "1", NULL };
    pid_t b = produce("restart", next);
    CHECK_STATUS(framesrv_consumer_reopen(c, 20000), FRAMESRV_OK);
    CHECK(receive_all(c, true, 0, NULL) == 10, "10 frames from the new producer");
    framesrv_consumer_stats st;
    framesrv_consumer_stats_of(c, &st);
    CHECK(st.restarts == 1, "restarts %llu", (unsigned long long)st.restarts);
    framesrv_consumer_close(c);
    reap(b);
}

/* A lossless consumer that stalls while holding a frame is demoted to live by the
 * producer's stall timeout (PROTOCOL.md 12.6): it goes on with newer frames, counting the
 * ones it skipped, and still sees the end. */
static void demoted_to_live(void)
{
    const char *args[] = { "--size", "32x32", "--rate", "max", "--frames", "400", "--slots", "3", "--wait-for", "1",
                           "--stall-timeout", "0.3", NULL };
    pid_t p = produce("stall", args);
    framesrv_consumer *c = open_stream("stall", FRAMESRV_LOSSLESS);
    if (!c) return (void)kill(p, SIGKILL), (void)reap(p);
    framesrv_frame *held, *f;
    CHECK_STATUS(framesrv_consumer_next(c, 10000, &held), FRAMESRV_OK);
    struct timespec pause = { 1, 500000000 };
    nanosleep(&pause, NULL);   /* no progress: the producer demotes us */
    uint64_t last = held ? framesrv_frame_info_of(held)->seq : 0;
    int status;
    while ((status = framesrv_consumer_next(c, 10000, &f)) == FRAMESRV_OK) {
        CHECK(framesrv_frame_info_of(f)->seq > last && framesrv_pattern_check(f) == 0, "frame %llu after %llu",
              (unsigned long long)framesrv_frame_info_of(f)->seq, (unsigned long long)last);
        last = framesrv_frame_info_of(f)->seq;
        framesrv_frame_release(f);
    }
    CHECK_STATUS(status, FRAMESRV_END);
    CHECK(held && framesrv_pattern_check(held) == 0, "the frame held across the demotion is intact");
    framesrv_consumer_stats st;
    framesrv_consumer_stats_of(c, &st);
    CHECK(st.missed > 0 && st.delivered + st.missed <= 400, "delivered %llu missed %llu", (unsigned long long)st.delivered,
          (unsigned long long)st.missed);
    framesrv_frame_release(held);
    framesrv_consumer_close(c);
    reap(p);
}

/* ---- the one-hop wake ---------------------------------------------------------------------- */

/* A subscriber that connects with RCVHWM 1 and never reads (it is then SIGSTOPped). */
static pid_t stalled_subscriber(const char *dir, const char *name)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    void *ctx = zmq_ctx_new(), *sub = zmq_socket(ctx, ZMQ_SUB);
    int hwm = 1;
    char endpoint[256];
    snprintf(endpoint, sizeof endpoint, "ipc://%s/%s.sock", dir, name);
    zmq_setsockopt(sub, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0);
    zmq_connect(sub, endpoint);   /* retried by ZeroMQ until the producer binds */
    for (;;) pause();
}

/* The consumer child: every frame from 1 in order, the last one flagged END_OF_STREAM, then END. */
static int await_last_frame(const char *name)
{
    framesrv_consumer_options o = { .mode = FRAMESRV_LOSSLESS, .attach_timeout_ms = 20000 };
    framesrv_consumer *c;
    if (framesrv_consumer_open(&c, name, &o) != FRAMESRV_OK) return 2;
    framesrv_frame *f;
    uint64_t next = 1;
    bool last = false;
    int status;
    while ((status = framesrv_consumer_next(c, 20000, &f)) == FRAMESRV_OK) {
        const framesrv_frame_info *i = framesrv_frame_info_of(f);
        if (i->seq != next++) return 1;
        last = (i->flags & FRAMESRV_FRAME_END_OF_STREAM) != 0;
        framesrv_frame_release(f);
    }
    framesrv_consumer_close(c);
    return status == FRAMESRV_END && last ? 0 : 1;
}

static void publish_frames(framesrv_producer *p, int n, uint32_t flags)
{
    for (int i = 0; i < n; i++) {
        framesrv_frame *f = NULL;
        CHECK_STATUS(framesrv_producer_reserve(p, 10000, &f), FRAMESRV_OK);
        if (!f) return;
        framesrv_frame_info_of(f)->flags = flags;
        CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_OK);
    }
}

/* Publishes (the consumer takes them) until the subscriber's subscription is counted. */
static bool saturate_subscriber(framesrv_producer *p, pid_t peer)
{
    for (int i = 0; i < 5000 && p->subscribers == 0; i++) {
        publish_frames(p, 1, 0);
        usleep(2000);
    }
    CHECK(p->subscribers > 0, "the stalled subscriber was counted");
    publish_frames(p, 50, 0);   /* SNDHWM 1, RCVHWM 1: the ZeroMQ path is full */
    return kill(peer, SIGSTOP) == 0;
}

/* The wake tests' producer (32x32 gray, 2 slots) of stream NAME; NULL (and a failed check) if it cannot open. */
static framesrv_producer *open_wake_producer(const char *name)
{
    framesrv_producer_options o = { .width = 32, .height = 32, .pix_fmt = FRAMESRV_PIX_GRAY, .slots = 2 };
    framesrv_producer *p = NULL;
    CHECK_STATUS(framesrv_producer_open(&p, name, &o), FRAMESRV_OK);
    return p;
}

/* Waits (up to 10 s) until a consumer of p sleeps on frame_wake (its sleepers bit set). */
static void expect_a_sleeper(framesrv_producer *p)
{
    for (int i = 0; i < 1000 && fs_load_u64(&p->ctl->sleepers) == 0; i++) usleep(10000);
    CHECK(fs_load_u64(&p->ctl->sleepers) != 0, "the consumer sleeps on frame_wake");
}

/* PROTOCOL.md 11: the producer wakes a sleeping consumer through frame_wake, not ZeroMQ. */
static void wake_without_doorbell(const char *dir, bool with_subscriber)
{
    const char *name = with_subscriber ? "wake-stalled" : "wake-alone";
    pid_t peer = with_subscriber ? stalled_subscriber(dir, name) : 0;
    pid_t consumer = fork();
    if (consumer == 0) _exit(await_last_frame(name));
    framesrv_producer *p = open_wake_producer(name);
    if (p) {
        int hwm = 1;   /* for every pipe from now on: the subscriber's */
        zmq_setsockopt(p->pub, ZMQ_SNDHWM, &hwm, sizeof hwm);
        CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 20000), FRAMESRV_OK);
        if (with_subscriber) CHECK(saturate_subscriber(p, peer), "SIGSTOP the subscriber");
        else CHECK(p->subscribers == 0, "nobody subscribes: nothing is sent");
        expect_a_sleeper(p);
        sleep(2);
        publish_frames(p, 1, FRAMESRV_FRAME_END_OF_STREAM);   /* after its sleep began */
        framesrv_producer_close(p);
    }
    CHECK(reap(consumer) == 0, "the sleeping consumer got the frame published after %s", with_subscriber ? "ZeroMQ stalled" : "2 s");
    if (peer > 0) {
        kill(peer, SIGKILL);
        reap(peer);
    }
}

/* The consumer child of woken_clears_its_bit: takes the first frame and holds it 3 s. */
static int hold_first_frame(const char *name)
{
    framesrv_consumer_options o = { .mode = FRAMESRV_LOSSLESS, .attach_timeout_ms = 20000 };
    framesrv_consumer *c;
    if (framesrv_consumer_open(&c, name, &o) != FRAMESRV_OK) return 2;
    framesrv_frame *f;
    if (framesrv_consumer_next(c, 20000, &f) != FRAMESRV_OK) return 1;
    sleep(3);
    framesrv_frame_release(f);
    framesrv_consumer_close(c);
    return 0;
}

static bool any_slot_held(framesrv_producer *p)
{
    for (uint32_t k = 0; k < p->opt.slots; k++)
        if (fs_load_u64(&p->slots[k].holders) != 0) return true;
    return false;
}

/* PROTOCOL.md 11.1: a consumer woken with its frame may take it before it clears its sleepers
 * bit, but clears it then: while it holds the frame the producer sees nobody asleep (a bit left
 * set costs a FUTEX_WAKE at every publish). */
static void woken_clears_its_bit(void)
{
    const char *name = "wake-bit";
    pid_t consumer = fork();
    if (consumer == 0) _exit(hold_first_frame(name));
    framesrv_producer *p = open_wake_producer(name);
    if (p) {
        CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 20000), FRAMESRV_OK);
        expect_a_sleeper(p);
        publish_frames(p, 1, 0);
        bool held = false;
        for (int i = 0; i < 1000 && !held; i++, usleep(1000)) held = any_slot_held(p);
        CHECK(held, "the consumer holds the frame");
        /* (It holds it 3 s; the bit is cleared microseconds after it took the frame.) */
        for (int i = 0; i < 200 && fs_load_u64(&p->ctl->sleepers) != 0; i++) usleep(10000);
        CHECK(fs_load_u64(&p->ctl->sleepers) == 0 && any_slot_held(p),
              "the consumer holds its frame with its sleeper bit cleared");
        framesrv_producer_close(p);
    }
    CHECK(reap(consumer) == 0, "the consumer took and released its frame");
}

int main(void)
{
    const char *dir = check_runtime_dir();
    wake_without_doorbell(dir, true);
    wake_without_doorbell(dir, false);
    woken_clears_its_bit();
    framesrv_bin = getenv("FRAMESRV") ? getenv("FRAMESRV") : "../../.build/debug/framesrv";
    if (access(framesrv_bin, X_OK) != 0) {
        printf("test_stream: the Swift producer's tests SKIPPED: no framesrv binary at %s (set FRAMESRV=/path/to/framesrv)\n",
               framesrv_bin);
        return check_exit("test_stream");
    }
    lossless_with_epochs();
    live_and_rate();
    killed_then_reopen();
    demoted_to_live();
    return check_exit("test_stream");
}
