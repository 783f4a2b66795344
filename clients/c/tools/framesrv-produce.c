/*
 * framesrv-produce: publishes the test pattern (PROTOCOL.md 21) as a framesrv stream with
 * libframesrv, as `framesrv produce --pattern` does (same header fields, timing and colour).
 *
 *   framesrv-produce --out NAME [--size WxH] [--pix-fmt F] [--frames N] [--rate R]
 *                    [--slots K] [--wait-for C] [--live-source] [--fill every|once]
 *
 * --rate is max, an integer, N/D (exact: 30000/1001) or a decimal, read as FFmpeg's
 * av_d2q(x, 1001000) and framesrv produce read it (29.97 is 2997/100).
 *
 * --fill once paints each slot the first time it is reserved and no more (later frames do
 * not carry their own pattern): the transport alone, as `framesrv produce --fill once`.
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
    "usage: framesrv-produce --out NAME [--size WxH] [--pix-fmt F] [--frames N] [--rate R]\n"
    "                        [--slots K] [--wait-for C] [--live-source] [--fill every|once]\n"
    "Publishes the test pattern as stream NAME (default 640x360 yuv420p, 30 fps, until SIGINT,\n"
    "8 slots). --rate R: max, an integer, N/D (exact, 30000/1001) or a decimal (29.97 = 2997/100).\n"
    "--wait-for C publishes nothing until C lossless consumers are attached;\n"
    "--live-source never waits for consumers (drops and counts instead).\n"
    "--fill once paints each slot only the first time (the transport alone; default every).\n"
    "Prints 'c: published N frames'. Exit status 0; 2 on an error.\n";

typedef struct options {
    const char *out;
    uint32_t width, height, slots, wait_for;
    int pix_fmt;
    int64_t rate_num, rate_den; /* frames per second, exact; 0/0: max */
    uint64_t frames;        /* 0: until stopped */
    int live_source;
    int fill_once;          /* --fill once: paint each slot the first time only */
} options;

static volatile sig_atomic_t stop_requested;
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

/* The best fraction of num/den with both terms <= limit (continued fractions), as
 * framesrv's Rational.closest, so a decimal --rate means the same in both tools. */
static void closest(uint64_t num, uint64_t den, uint64_t limit, int64_t *out_num, int64_t *out_den)
{
    uint64_t a = num, b = den, p0 = 0, q0 = 1, p1 = 1, q1 = 0;
    while (b != 0) {
        uint64_t t = a / b, p2, q2;
        if (__builtin_mul_overflow(t, p1, &p2) || __builtin_mul_overflow(t, q1, &q2) || p2 > limit || q2 > limit ||
            p2 + p0 > limit || q2 + q0 > limit)
            break;
        uint64_t r = a % b;
        p2 += p0, q2 += q0;
        p0 = p1, q0 = q1, p1 = p2, q1 = q2;
        a = b, b = r;
    }
    *out_num = q1 == 0 ? INT32_MAX : (int64_t)p1;
    *out_den = q1 == 0 ? 1 : (int64_t)q1;
}

/* --rate: max, N, N/D or a decimal (av_d2q(x, 1001000)); 0..1e6 frames per second. */
static int parse_rate(const char *v, int64_t *num, int64_t *den)
{
    uint64_t n, d = 1;
    const char *slash = strchr(v, '/');
    char head[32];
    *num = *den = 0;
    if (strcmp(v, "max") == 0) return 0;
    if (slash != NULL && (size_t)(slash - v) < sizeof head) {
        memcpy(head, v, (size_t)(slash - v));
        head[slash - v] = '\0';
        if (parse_u(head, INT64_MAX, &n) || parse_u(slash + 1, INT64_MAX, &d)) return -1;
    } else if (parse_u(v, INT64_MAX, &n)) {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (errno || *end || !(x > 0 && x <= 1e6)) return -1;
        closest((uint64_t)(x * 4294967296.0 + 0.5), 4294967296u, 1001000, num, den);
        return 0;
    }
    if (n == 0 || d == 0 || n / d >= 1000000 + (n % d == 0 ? 1 : 0)) return -1;
    *num = (int64_t)n, *den = (int64_t)d;
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
        if (parse_rate(v, &o->rate_num, &o->rate_den)) return fail("bad --rate (max, N, N/D or a decimal; up to 1000000 fps)", v);
    } else if (strcmp(opt, "--slots") == 0) {
        if (parse_u(v, 1000, &n)) return fail("bad --slots", v);
        o->slots = (uint32_t)n;
    } else if (strcmp(opt, "--wait-for") == 0) {
        if (parse_u(v, 63, &n)) return fail("bad --wait-for (0..63)", v);
        o->wait_for = (uint32_t)n;
    } else if (strcmp(opt, "--fill") == 0) {
        if (strcmp(v, "once") != 0 && strcmp(v, "every") != 0) return fail("bad --fill (every or once)", v);
        o->fill_once = strcmp(v, "once") == 0;
    } else return fail("unknown option", opt);
    return 0;
}

static int parse(int argc, char **argv, options *o)
{
    *o = (options){.width = 640, .height = 360, .pix_fmt = FRAMESRV_PIX_YUV420P, .rate_num = 30, .rate_den = 1, .slots = 8};
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

/* The pattern's frame description (Swift's PatternPublisher.description). Timing is the
 * library's default: time base rate_den/rate_num, pts index - 1, duration 1 (max: 1/1000000,
 * duration 0); progressive, chroma location unspecified. */
static void describe(framesrv_frame_info *in, const options *o, uint64_t index, int rgb)
{
    in->color_matrix = rgb ? 0 : 1;
    in->color_range = rgb ? 2 : 1;
    in->color_primaries = 1;
    in->color_transfer = 1;
    in->sar_num = 1, in->sar_den = 1;
    in->pts = (int64_t)(index - 1);
    in->flags = FRAMESRV_FRAME_KEY | (o->frames && index == o->frames ? FRAMESRV_FRAME_END_OF_STREAM : 0);
}

static void sleep_until(uint64_t start_ns, uint64_t index, const options *o)
{
    uint64_t t = start_ns + (uint64_t)((unsigned __int128)index * 1000000000u * (uint64_t)o->rate_den / (uint64_t)o->rate_num);
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u)};
    while (!stop_requested && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --fill once: whether this slot (known by its plane 0, per pool epoch) is painted already;
 * notes it as painted. */
static int painted_before(const framesrv_frame_info *in)
{
    static const void *painted[64];
    static uint64_t epoch;
    static size_t count;
    if (in->epoch != epoch) count = 0, epoch = in->epoch;
    for (size_t i = 0; i < count; i++)
        if (painted[i] == in->planes[0].data) return 1;
    if (count < sizeof painted / sizeof painted[0]) painted[count++] = in->planes[0].data;
    return 0;
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
    if (!o->fill_once || !painted_before(in)) framesrv_pattern_fill(f);
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
        if (o->rate_num > 0) sleep_until(start, index, o);
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
        .live_source = (uint32_t)o.live_source, .live_max_held = 2, .rate_num = o.rate_num, .rate_den = o.rate_den,
    };
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
