/*
 * producer_swift.c: a C producer is indistinguishable from `framesrv produce --pattern` for
 * Swift consumers. `framesrv sink --null --verify` (lossless and live) checks every byte of
 * every frame, across format changes (epochs); `framesrv inspect` reads the stream; a Swift
 * consumer killed with SIGKILL is reclaimed and publishing goes on.
 * Needs the Swift framesrv binary: $FRAMESRV, else ../../.build/debug/framesrv (skipped if absent).
 */
#include "producer_check.h"

#include <inttypes.h>
#include <stdbool.h>

static const char *framesrv;

static int open_producer(framesrv_producer **p, const char *name, uint32_t w, uint32_t h, int pix_fmt, uint32_t slots)
{
    framesrv_producer_options o = {.width = w, .height = h, .pix_fmt = pix_fmt, .slots = slots, .rate_num = 25, .rate_den = 1};
    return framesrv_producer_open(p, name, &o);
}

/* Publishes `count` pattern frames; returns how many were published. */
static uint64_t publish_pattern(framesrv_producer *p, uint64_t count)
{
    uint64_t n = 0;
    for (; n < count; n++) {
        framesrv_frame *f;
        int rc = framesrv_producer_reserve(p, 10000, &f);
        CHECK(rc == FRAMESRV_OK, "reserve frame %" PRIu64 ": %s", n + 1, framesrv_status_name(rc));
        if (rc != FRAMESRV_OK) break;
        framesrv_pattern_fill(f);
        CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_OK);
    }
    return n;
}

static pid_t start_sink(const char *name, const char *out, const char *extra)
{
    char *argv[] = {(char *)framesrv, "sink", "--in", (char *)name, "--null", "--verify", "--wait", "20",
                    (char *)extra, NULL};
    return check_spawn(argv, out);
}

/* The sink's summary: "received N frames ..., corrupt C". */
static void expect_sink(pid_t sink, const char *out, uint64_t frames, const char *what)
{
    int status = check_wait(sink, 60);
    char text[4096];
    check_read(out, text, sizeof text);
    unsigned long long received = 0, corrupt = 1;
    const char *r = strstr(text, "received "), *c = strstr(text, "corrupt ");
    if (r) sscanf(r, "received %llu", &received);
    if (c) sscanf(c, "corrupt %llu", &corrupt);
    CHECK(status == 0, "%s: sink exit status %d: %s", what, status, text);
    CHECK(received == frames && corrupt == 0, "%s: expected %" PRIu64 " frames intact: %s", what, frames, text);
}

static void lossless(int pix_fmt, uint32_t w, uint32_t h)
{
    char out[128];
    snprintf(out, sizeof out, "%s/sink.out", getenv("FRAMESRV_DIR"));
    pid_t sink = start_sink("lossless", out, NULL);
    framesrv_producer *p;
    CHECK_STATUS(open_producer(&p, "lossless", w, h, pix_fmt, 4), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 20000), FRAMESRV_OK);
    uint64_t n = publish_pattern(p, 300);
    framesrv_producer_close(p);
    expect_sink(sink, out, n, framesrv_pix_fmt_name(pix_fmt));
}

/* Epochs: a larger frame starts a new pool, a smaller one reuses it; the sink verifies all. */
static void format_changes(void)
{
    char out[128];
    snprintf(out, sizeof out, "%s/epochs.out", getenv("FRAMESRV_DIR"));
    pid_t sink = start_sink("epochs", out, NULL);
    framesrv_producer *p;
    CHECK_STATUS(open_producer(&p, "epochs", 64, 48, FRAMESRV_PIX_YUV420P, 3), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 20000), FRAMESRV_OK);
    uint64_t n = publish_pattern(p, 40);
    CHECK_STATUS(framesrv_producer_change_format(p, 320, 240, FRAMESRV_PIX_RGB24), FRAMESRV_OK);
    n += publish_pattern(p, 40);
    CHECK_STATUS(framesrv_producer_change_format(p, 32, 16, FRAMESRV_PIX_GRAY), FRAMESRV_OK);
    n += publish_pattern(p, 40);
    CHECK_STATUS(framesrv_producer_change_format(p, 0, 16, FRAMESRV_PIX_GRAY), FRAMESRV_E_INVALID);
    CHECK_STATUS(framesrv_producer_change_format(p, 1280, 720, FRAMESRV_PIX_YUV444P10LE), FRAMESRV_OK);
    n += publish_pattern(p, 40);
    framesrv_producer_close(p);
    expect_sink(sink, out, n, "format changes");
}

/* Until a consumer (live ones included) is attached, up to 20 s. */
static bool wait_attached(framesrv_producer *p)
{
    framesrv_producer_stats st = {0};
    for (int i = 0; i < 2000 && st.consumers == 0; i++) {
        usleep(10000);
        framesrv_producer_stats_of(p, &st);
    }
    return st.consumers > 0;
}

static void live_and_inspect(void)
{
    char out[128], inspect_out[128], text[4096];
    snprintf(out, sizeof out, "%s/live.out", getenv("FRAMESRV_DIR"));
    snprintf(inspect_out, sizeof inspect_out, "%s/inspect.out", getenv("FRAMESRV_DIR"));
    framesrv_producer *p;
    CHECK_STATUS(open_producer(&p, "live", 160, 120, FRAMESRV_PIX_NV12, 8), FRAMESRV_OK);
    pid_t sink = start_sink("live", out, "--live");
    CHECK(wait_attached(p), "the live sink attached");
    publish_pattern(p, 20);
    char *argv[] = {(char *)framesrv, "inspect", "live", NULL};
    CHECK(check_wait(check_spawn(argv, inspect_out), 30) == 0, "inspect exit status");
    check_read(inspect_out, text, sizeof text);
    CHECK(strstr(text, "running") && strstr(text, "160x120 nv12"), "inspect: %s", text);
    publish_pattern(p, 200);
    framesrv_producer_close(p);
    int status = check_wait(sink, 60);
    check_read(out, text, sizeof text);
    CHECK(status == 0 && strstr(text, "corrupt 0"), "live sink: status %d: %s", status, text);
}

/* A lossless Swift consumer that holds its frames is killed: its slots come back. */
static void consumer_killed(void)
{
    char out[128];
    snprintf(out, sizeof out, "%s/killed.out", getenv("FRAMESRV_DIR"));
    framesrv_producer *p;
    CHECK_STATUS(open_producer(&p, "killed", 64, 48, FRAMESRV_PIX_GRAY, 2), FRAMESRV_OK);
    char *argv[] = {(char *)framesrv, "sink", "--in", "killed", "--null", "--hold-us", "10000000", NULL};
    pid_t sink = check_spawn(argv, out);
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 20000), FRAMESRV_OK);
    publish_pattern(p, 2);   /* both slots now reserved for (or held by) the sink */
    framesrv_frame *f = NULL;
    CHECK_STATUS(framesrv_producer_reserve(p, 200, &f), FRAMESRV_TIMEOUT);
    if (f) framesrv_producer_abandon(p, f);
    kill(sink, SIGKILL);
    check_wait(sink, 10);
    CHECK_STATUS(framesrv_producer_reserve(p, 5000, &f), FRAMESRV_OK);
    if (f) CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_OK);
    CHECK(publish_pattern(p, 10) == 10, "publishing goes on");
    framesrv_producer_stats st;
    framesrv_producer_stats_of(p, &st);
    CHECK(st.reclaimed == 1 && st.consumers == 0, "reclaimed %" PRIu64 ", consumers %" PRIu64, st.reclaimed, st.consumers);
    framesrv_producer_close(p);
}

int main(void)
{
    framesrv = check_framesrv();
    if (framesrv == NULL) {
        printf("producer_swift: skipped (no Swift framesrv: set FRAMESRV)\n");
        return 0;
    }
    check_runtime_dir();
    lossless(FRAMESRV_PIX_YUV420P, 320, 240);
    lossless(FRAMESRV_PIX_P010LE, 99, 37);
    lossless(FRAMESRV_PIX_BGRA, 33, 17);
    format_changes();
    live_and_inspect();
    consumer_killed();
    return check_exit("producer_swift");
}
