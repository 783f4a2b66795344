/*
 * framesrv-produce: publishes the test pattern (PROTOCOL.md 21) as a framesrv stream with
 * libframesrv, as `framesrv produce --pattern` does (same header fields, timing and colour).
 *
 *   framesrv-produce --out NAME [--size WxH] [--pix-fmt F] [--frames N] [--rate FPS|max]
 *                    [--slots K] [--wait-for C] [--live-source]
 *
 * Prints "c: published N frames" at the end. SIGINT/SIGTERM end the stream cleanly.
 * Exit status 0; 2 on a bad option or an error (one line on stderr).
 */
#define _GNU_SOURCE
#include <framesrv.h>

#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage[] =
    "usage: framesrv-produce --out NAME [--size WxH] [--pix-fmt F] [--frames N] [--rate FPS|max]\n"
    "                        [--slots K] [--wait-for C] [--live-source]\n"
    "Publishes the test pattern as stream NAME (default 640x360 yuv420p, 30 fps, until SIGINT,\n"
    "8 slots). --wait-for C publishes nothing until C lossless consumers are attached;\n"
    "--live-source never waits for consumers (drops and counts instead).\n"
    "Prints 'c: published N frames'. Exit status 0; 2 on an error.\n";

typedef struct options {
    const char *out;
    uint32_t width, height, slots, wait_for;
    int pix_fmt;
    double rate;            /* 0: max */
    uint64_t frames;        /* 0: until stopped */
    int live_source;
} options;

static volatile sig_atomic_t stop_requested;
static int is_whole(double r) { return r == (double)(int64_t)r; }
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

static int fail(const char *what, const char *value)
{
    fprintf(stderr, "framesrv-produce: %s '%s' (see --help)\n", what, value ? value : "");
    return 2;
}

static int parse_u(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s == NULL || *s < '0' || *s > '9') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max) return -1;
    *out = v;
    return 0;
}

/* One option with its value; returns 0, or 2 after printing the error. */
static int parse_option(options *o, const char *opt, const char *v)
{
    uint64_t n;
    if (v == NULL) return fail("missing value for", opt);
    if (strcmp(opt, "--out") == 0) o->out = v;
    else if (strcmp(opt, "--size") == 0) {
        char w[16];
        const char *x = strchr(v, 'x');
        uint64_t width, height;
        if (x == NULL || x - v >= (ptrdiff_t)sizeof w || parse_u(x + 1, 1000000, &height)) return fail("bad --size (WxH)", v);
        memcpy(w, v, (size_t)(x - v));
        w[x - v] = '\0';
        if (parse_u(w, 1000000, &width)) return fail("bad --size (WxH)", v);
        o->width = (uint32_t)width, o->height = (uint32_t)height;
    } else if (strcmp(opt, "--pix-fmt") == 0) {
        if ((o->pix_fmt = framesrv_pix_fmt_from_name(v)) == 0) return fail("unknown --pix-fmt", v);
    } else if (strcmp(opt, "--frames") == 0) {
        if (parse_u(v, UINT64_MAX, &o->frames) || o->frames == 0) return fail("bad --frames", v);
    } else if (strcmp(opt, "--rate") == 0) {
        char *end;
        o->rate = strcmp(v, "max") == 0 ? 0 : strtod(v, &end);
        if (strcmp(v, "max") != 0 && (*end || !(o->rate > 0 && o->rate <= 1e6))) return fail("bad --rate (FPS or max)", v);
    } else if (strcmp(opt, "--slots") == 0) {
        if (parse_u(v, 1000, &n)) return fail("bad --slots", v);
        o->slots = (uint32_t)n;
    } else if (strcmp(opt, "--wait-for") == 0) {
        if (parse_u(v, 63, &n)) return fail("bad --wait-for (0..63)", v);
        o->wait_for = (uint32_t)n;
    } else return fail("unknown option", opt);
    return 0;
}

static int parse(int argc, char **argv, options *o)
{
    *o = (options){.width = 640, .height = 360, .pix_fmt = FRAMESRV_PIX_YUV420P, .rate = 30, .slots = 8};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            exit(0);
        }
        if (strcmp(argv[i], "--live-source") == 0) {
            o->live_source = 1;
            continue;
        }
        int rc = parse_option(o, argv[i], i + 1 < argc ? argv[i + 1] : NULL);
        if (rc) return rc;
        i++;
    }
    return o->out ? 0 : fail("missing", "--out NAME");
}

/* The pattern's frame description (Swift's PatternPublisher.description). */
static void describe(framesrv_frame_info *in, const options *o, uint64_t index, int rgb)
{
    in->color_matrix = rgb ? 0 : 1;
    in->color_range = rgb ? 2 : 1;
    in->color_primaries = 1;
    in->color_transfer = 1;
    in->sar_num = 1, in->sar_den = 1;
    if (o->rate > 0 && is_whole(o->rate)) {
        in->time_base_num = 1, in->time_base_den = (int32_t)o->rate;
        in->pts = (int64_t)(index - 1), in->duration = 1;
    } else {
        in->time_base_num = 1, in->time_base_den = 1000000;
        in->pts = (int64_t)((index - 1) * (uint64_t)(1000000 / (o->rate > 0 ? o->rate : 1000000)));
        in->duration = 0;
    }
    in->flags = FRAMESRV_FRAME_KEY | (o->frames && index == o->frames ? FRAMESRV_FRAME_END_OF_STREAM : 0);
}

static void sleep_until(uint64_t start_ns, uint64_t index, double rate)
{
    uint64_t t = start_ns + (uint64_t)((double)index * 1e9 / rate);
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u)};
    while (!stop_requested && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Reserve (retrying while waiting for consumers, so a signal is noticed), paint, publish.
 * Returns 0, 1 (dropped at a live source or stopped) or a negative status. */
static int publish_one(framesrv_producer *p, const options *o, uint64_t index)
{
    framesrv_frame *f = NULL;
    int rc;
    while ((rc = framesrv_producer_reserve(p, 200, &f)) == FRAMESRV_TIMEOUT && !o->live_source && !stop_requested) {}
    if (rc != FRAMESRV_OK) return rc < 0 ? rc : 1;
    framesrv_frame_info *in = framesrv_frame_info_of(f);
    framesrv_pattern_fill(f);
    int fmt = o->pix_fmt;
    describe(in, o, index, (fmt >= FRAMESRV_PIX_RGB24 && fmt <= FRAMESRV_PIX_RGBA) || fmt == FRAMESRV_PIX_BGR24 ||
                               fmt == FRAMESRV_PIX_GBRP);
    return framesrv_producer_publish(p, f);
}

static int run(framesrv_producer *p, const options *o)
{
    while (o->wait_for > 0 && !stop_requested && framesrv_producer_wait_for_consumers(p, o->wait_for, 500) != FRAMESRV_OK) {}
    uint64_t start = now_ns();
    for (uint64_t index = 0; !stop_requested && (o->frames == 0 || index < o->frames);) {
        if (o->rate > 0) sleep_until(start, index, o->rate);
        if (stop_requested) break;
        index++;
        int rc = publish_one(p, o, index);
        if (rc < 0) {
            fprintf(stderr, "framesrv-produce: %s\n", framesrv_last_error());
            return 2;
        }
    }
    return 0;
}

static void install_handlers(void)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);   /* no SA_RESTART: a signal ends the sleeps at once */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    install_handlers();
    framesrv_producer_options po = {
        .width = o.width, .height = o.height, .pix_fmt = o.pix_fmt, .slots = o.slots,
        .live_source = (uint32_t)o.live_source, .live_max_held = 2,
    };
    if (o.rate > 0 && is_whole(o.rate)) po.rate_num = (int32_t)o.rate, po.rate_den = 1;
    else if (o.rate > 0) po.rate_num = (int32_t)(o.rate * 1000 + 0.5), po.rate_den = 1000;
    framesrv_producer *p;
    if (framesrv_producer_open(&p, o.out, &po) != FRAMESRV_OK) {
        fprintf(stderr, "framesrv-produce: %s\n", framesrv_last_error());
        return 2;
    }
    rc = run(p, &o);
    framesrv_producer_stats stats;
    framesrv_producer_stats_of(p, &stats);
    framesrv_producer_close(p);
    printf("c: published %llu frames\n", (unsigned long long)stats.published);
    return rc;
}
