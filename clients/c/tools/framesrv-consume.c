/*
 * framesrv-consume: a consumer of a framesrv stream on libframesrv, for tests.
 *
 *   framesrv-consume --in NAME [--audio] [--live] [--verify-pattern] [--seq-log FILE] [--count N]
 *                    [--wait SECONDS] [--poll-us N] [-v]
 *
 * Attaches to stream NAME (lossless, or --live), waiting up to --wait seconds for it to
 * appear (default: forever), spinning up to --poll-us microseconds (0..1000000, default 0)
 * before each sleep for a frame, receives frames until the stream ends (or N frames, or
 * SIGINT/SIGTERM), checks each against the test pattern with --verify-pattern, and prints
 *   c: received N frames, first F, last L, corrupt C
 * --audio reads a sound stream (FRAMESRV_MEDIA_AUDIO) instead, and the line ends with
 * ", samples S" (samples per channel received); -v says each frame's rate, channels and samples.
 * Exit status: 0; 1 if a frame failed the pattern; 2 on an error (the producer died
 * without ending the stream, a bad argument, no stream).
 */
#define _GNU_SOURCE
#include "framesrv.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct options {
    const char *stream, *seq_log;
    bool live, verify, verbose, audio;
    long long count;          /* -1: until the end */
    double wait_s;            /* -1: forever */
    uint32_t poll_us;         /* spin before sleeping for a frame */
} options;

typedef struct summary {
    unsigned long long received, corrupt, first, last, samples;
} summary;

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

static int usage(const char *why)
{
    fprintf(stderr, "c: error: %s\nusage: framesrv-consume --in NAME [--audio] [--live] [--verify-pattern] [--seq-log FILE] [--count N] "
                    "[--wait SECONDS] [--poll-us N] [-v]\n", why);
    return 2;
}

static bool parse_number(const char *text, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(text, &end);
    return errno == 0 && end != text && *end == '\0' && *out >= 0;
}

static int parse(int argc, char **argv, options *o)
{
    *o = (options){ .count = -1, .wait_s = -1 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        double n;
        if (!strcmp(a, "--live")) o->live = true;
        else if (!strcmp(a, "--audio")) o->audio = true;
        else if (!strcmp(a, "--verify-pattern")) o->verify = true;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = true;
        else if (!value) return usage(strncmp(a, "--", 2) ? "unexpected argument" : "option needs a value");
        else if (!strcmp(a, "--in")) o->stream = argv[++i];
        else if (!strcmp(a, "--seq-log")) o->seq_log = argv[++i];
        else if (!strcmp(a, "--count") && parse_number(argv[++i], &n) && n == (long long)n) o->count = (long long)n;
        else if (!strcmp(a, "--wait") && parse_number(argv[++i], &n)) o->wait_s = n;
        else if (!strcmp(a, "--poll-us") && parse_number(argv[++i], &n) && n == (uint32_t)n && n <= 1000000) o->poll_us = (uint32_t)n;
        else return usage("unknown option or bad value");
    }
    if (o->audio && o->verify) return usage("--verify-pattern checks pictures: not with --audio");
    return o->stream ? 0 : usage("--in NAME is required");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Attaches in short waits, so SIGINT/SIGTERM is seen while the stream does not exist. */
static int open_stream(const options *o, framesrv_consumer **c)
{
    framesrv_consumer_options co = { .mode = o->live ? FRAMESRV_LIVE : FRAMESRV_LOSSLESS, .client_name = "framesrv-consume",
                                     .poll_us = o->poll_us, .media = o->audio ? FRAMESRV_MEDIA_AUDIO : FRAMESRV_MEDIA_VIDEO };
    double deadline = o->wait_s < 0 ? -1 : now_s() + o->wait_s;
    for (;;) {
        double left = deadline < 0 ? 0.25 : deadline - now_s();
        co.attach_timeout_ms = left <= 0 ? 0 : left > 0.25 ? 250 : (int)(left * 1000);
        int status = framesrv_consumer_open(c, o->stream, &co);
        if (status != FRAMESRV_E_NOT_FOUND || stop_requested || (deadline >= 0 && now_s() >= deadline)) return status;
    }
}

static void take(const options *o, framesrv_frame *f, summary *s, FILE *log)
{
    const framesrv_frame_info *info = framesrv_frame_info_of(f);
    uint64_t bad = o->verify ? framesrv_pattern_check(f) : 0;
    s->received++;
    s->corrupt += bad != 0;
    if (!s->first) s->first = info->seq;
    s->last = info->seq;
    if (log) fprintf(log, "%llu\n", (unsigned long long)info->seq);
    if (info->media == FRAMESRV_MEDIA_AUDIO) {
        s->samples += info->nb_samples;
        if (o->verbose)
            fprintf(stderr, "c: frame %llu slot-epoch %llu %u Hz %u ch %s %u samples pts %lld\n", (unsigned long long)info->seq,
                    (unsigned long long)info->epoch, info->sample_rate, info->channels, framesrv_sample_fmt_name(info->sample_fmt),
                    info->nb_samples, (long long)info->pts);
        return;
    }
    if (o->verbose || bad)
        fprintf(stderr, "c: frame %llu slot-epoch %llu %ux%u %s tb %d/%d field %u chroma %u%s\n", (unsigned long long)info->seq,
                (unsigned long long)info->epoch, info->width, info->height, info->pix_fmt_name, info->time_base_num, info->time_base_den,
                info->field_order, info->chroma_location, bad ? " CORRUPT" : "");
}

/* Receives until the end, N frames or a stop; 0, or 2 after an error (printed). */
static int receive(const options *o, framesrv_consumer *c, summary *s, FILE *log)
{
    while (!stop_requested && (o->count < 0 || (long long)s->received < o->count)) {
        framesrv_frame *f;
        int status = framesrv_consumer_next(c, 250, &f);
        if (status == FRAMESRV_TIMEOUT) continue;
        if (status == FRAMESRV_END) return 0;
        if (status != FRAMESRV_OK) {
            fprintf(stderr, "c: error: %s\n", framesrv_last_error());
            return 2;
        }
        take(o, f, s, log);
        framesrv_frame_release(f);
    }
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc != 0) return rc;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;   /* no SA_RESTART: a wait returns early */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    FILE *log = NULL;
    if (o.seq_log && !(log = fopen(o.seq_log, "w"))) {
        fprintf(stderr, "c: error: cannot open %s: %s\n", o.seq_log, strerror(errno));
        return 2;
    }
    summary s = { 0 };
    framesrv_consumer *c = NULL;
    int status = open_stream(&o, &c);
    if (status == FRAMESRV_E_NOT_FOUND && !stop_requested) {
        fprintf(stderr, "c: error: no stream named '%s' appeared within %g s; start a producer with --out %s (or check FRAMESRV_DIR)\n",
                o.stream, o.wait_s, o.stream);
        rc = 2;
    } else if (status != FRAMESRV_OK && !stop_requested) {
        fprintf(stderr, "c: error: %s\n", framesrv_last_error());
        rc = 2;
    } else if (c) {
        framesrv_stream_info info;
        if (o.verbose && framesrv_consumer_stream_info(c, &info) == FRAMESRV_OK)
            fprintf(stderr, "c: stream %s rate %lld/%lld\n", info.name, (long long)info.rate_num, (long long)info.rate_den);
        rc = receive(&o, c, &s, log);
        framesrv_consumer_stats stats;
        if (framesrv_consumer_stats_of(c, &stats) == FRAMESRV_OK && (stats.bad_frames || (o.verbose && stats.missed)))
            fprintf(stderr, "c: %llu bad frames skipped, %llu missed\n", (unsigned long long)stats.bad_frames,
                    (unsigned long long)stats.missed);
    }
    framesrv_consumer_close(c);
    if (log) fclose(log);
    printf("c: received %llu frames, first %llu, last %llu, corrupt %llu", s.received, s.first, s.last, s.corrupt);
    if (o.audio) printf(", samples %llu", s.samples);
    printf("\n");
    return rc ? rc : s.corrupt ? 1 : 0;
}
