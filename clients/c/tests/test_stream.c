/*
 * test_stream.c: the consumer against a real Swift producer (`framesrv produce --pattern`;
 * FRAMESRV=/path/to/framesrv, default ../../.build/debug/framesrv): lossless exactly-once
 * with every byte checked, a frame held across two pool epochs, live, the stream's rate,
 * a producer killed under the consumer (GONE) and reopen on the next producer.
 */
#include "check.h"
#include "framesrv.h"

#include <signal.h>
#include <stdbool.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>

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

int main(void)
{
    framesrv_bin = getenv("FRAMESRV") ? getenv("FRAMESRV") : "../../.build/debug/framesrv";
    if (access(framesrv_bin, X_OK) != 0) {
        printf("test_stream: SKIPPED: no framesrv binary at %s (set FRAMESRV=/path/to/framesrv)\n", framesrv_bin);
        return 0;
    }
    check_runtime_dir();
    lossless_with_epochs();
    live_and_rate();
    killed_then_reopen();
    demoted_to_live();
    return check_exit("test_stream");
}
