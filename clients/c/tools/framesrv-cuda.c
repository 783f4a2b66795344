/*
 * framesrv-cuda: the stages between host streams and CUDA streams, on libframesrv.
 *
 *   framesrv-cuda upload   --in NAME --out NAME [--device N] [--slots N] [--wait-for C] [--wait SECONDS]
 *   framesrv-cuda download --in NAME --out NAME [--slots N] [--wait-for C] [--wait SECONDS]
 *
 * upload reads host stream IN and publishes its frames as CUDA stream OUT on device N (default
 * 0); download reads CUDA stream IN and publishes them as host stream OUT, so every stage,
 * sink and recorder of framesrv works with a GPU stream (and ffmpeg stays the oracle). Each
 * frame is one framesrv_frame_copy_on (one 2D copy per plane): the host pool is registered
 * with CUDA, so the copy engine reads (upload) or writes (download) the slot itself. Every
 * header field is carried (pts, time base, duration, capture time, flags, colour, aspect,
 * field order, chroma location, source drops); a format change of IN is one of OUT.
 * Lossless both ways: OUT's lossless consumers pace IN. --wait-for C publishes nothing until C
 * lossless consumers of OUT are attached (as `framesrv produce --wait-for`), said after 2 s.
 *
 * Waits up to --wait seconds for IN (default forever, said after 2 s), ends OUT when IN
 * ends, ends it as failed when IN's producer dies (exit 1). Prints at the end
 *   framesrv-cuda: upload: N frames WxH FMT, C copies, host pool registered with CUDA: yes|no
 * Exit status: 0; 1 when IN's producer died; 2 on an error (one line).
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
    bool upload;
    const char *in, *out;
    int device;
    uint32_t slots, wait_for;
    double wait_s;            /* -1: forever */
} options;

typedef struct stage {
    const options *o;
    framesrv_consumer *in;
    framesrv_producer *out;
    framesrv_frame_info format;   /* OUT's current size and format */
    unsigned long long frames, copies;
    int pinned;
} stage;

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

static int usage(const char *why)
{
    fprintf(stderr, "framesrv-cuda: error: %s\nusage: framesrv-cuda upload --in NAME --out NAME [--device N] [--slots N] "
                    "[--wait-for C] [--wait SECONDS]\n       framesrv-cuda download --in NAME --out NAME [--slots N] [--wait-for C] "
                    "[--wait SECONDS]\n", why);
    return 2;
}

static bool parse_number(const char *text, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(text, &end);
    return errno == 0 && end != text && *end == '\0' && *out >= 0 && *out < 1e9;
}

static int parse(int argc, char **argv, options *o)
{
    *o = (options){ .wait_s = -1 };
    if (argc < 2 || (strcmp(argv[1], "upload") && strcmp(argv[1], "download"))) return usage("say upload or download");
    o->upload = !strcmp(argv[1], "upload");
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        double n;
        if (!value) return usage(strncmp(a, "--", 2) ? "unexpected argument" : "option needs a value");
        i++;
        if (!strcmp(a, "--in")) o->in = value;
        else if (!strcmp(a, "--out")) o->out = value;
        else if (!strcmp(a, "--device") && o->upload && parse_number(value, &n) && n == (int)n) o->device = (int)n;
        else if (!strcmp(a, "--slots") && parse_number(value, &n) && n == (uint32_t)n && n >= 1 && n <= 64) o->slots = (uint32_t)n;
        else if (!strcmp(a, "--wait-for") && parse_number(value, &n) && n == (uint32_t)n && n <= 64) o->wait_for = (uint32_t)n;
        else if (!strcmp(a, "--wait") && parse_number(value, &n)) o->wait_s = n;
        else return usage("unknown option or bad value");
    }
    return o->in && o->out ? 0 : usage("--in NAME and --out NAME are required");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail(const char *what)
{
    fprintf(stderr, "framesrv-cuda: error: %s\n", what ? what : framesrv_last_error());
    return 2;
}

/* Attaches in short waits (a signal is seen while IN does not exist), saying after 2 s what it waits for. */
static int open_input(stage *s)
{
    const options *o = s->o;
    framesrv_consumer_options co = { .client_name = o->upload ? "upload" : "download",
                                     .memory = o->upload ? FRAMESRV_MEMORY_HOST : FRAMESRV_MEMORY_CUDA };
    double start = now_s();
    bool said = false;
    for (;;) {
        double left = o->wait_s < 0 ? 0.25 : start + o->wait_s - now_s();
        co.attach_timeout_ms = left <= 0 ? 0 : left > 0.25 ? 250 : (int)(left * 1000);
        int status = framesrv_consumer_open(&s->in, o->in, &co);
        if (status == FRAMESRV_OK) return 0;
        if (stop_requested) return 0;
        if (status != FRAMESRV_E_NOT_FOUND) return fail(NULL);
        if (o->wait_s >= 0 && now_s() - start >= o->wait_s) {
            fprintf(stderr, "framesrv-cuda: error: no stream named '%s' appeared within %g s (check FRAMESRV_DIR)\n", o->in, o->wait_s);
            return 2;
        }
        if (!said && now_s() - start >= 2) {
            fprintf(stderr, "framesrv-cuda: waiting for stream '%s' to appear (--wait SECONDS to give up)\n", o->in);
            said = true;
        }
    }
}

/* --wait-for: OUT's first frame waits for C lossless consumers (-1 on a stop). */
static int wait_for_consumers(stage *s)
{
    double start = now_s();
    bool said = false;
    while (s->o->wait_for > 0) {
        int status = framesrv_producer_wait_for_consumers(s->out, s->o->wait_for, 250);
        if (status == FRAMESRV_OK) return 0;
        if (status != FRAMESRV_TIMEOUT) return fail(NULL);
        if (stop_requested) return -1;
        if (!said && now_s() - start >= 2) {
            fprintf(stderr, "framesrv-cuda: waiting for %u lossless consumer(s) of '%s' (--wait-for)\n", s->o->wait_for, s->o->out);
            said = true;
        }
    }
    return 0;
}

/* OUT, in the other memory, with IN's rate and the first frame's size and format. */
static int open_output(stage *s, const framesrv_frame_info *first)
{
    const options *o = s->o;
    framesrv_stream_info in;
    if (framesrv_consumer_stream_info(s->in, &in) != FRAMESRV_OK) return fail(NULL);
    int pix_fmt = first->pix_fmt ? first->pix_fmt : framesrv_pix_fmt_from_name(first->pix_fmt_name);
    if (first->media != FRAMESRV_MEDIA_VIDEO || pix_fmt == FRAMESRV_PIX_OTHER) {
        fprintf(stderr, "framesrv-cuda: error: stream '%s' carries %s, which a CUDA stream cannot hold (video of framesrv's "
                        "pixel formats only)\n", o->in, first->media == FRAMESRV_MEDIA_VIDEO ? first->pix_fmt_name : "audio");
        return 2;
    }
    framesrv_producer_options po = { .width = first->width, .height = first->height, .pix_fmt = pix_fmt,
                                     .slots = o->slots, .rate_num = in.rate_num, .rate_den = in.rate_den,
                                     .memory = o->upload ? FRAMESRV_MEMORY_CUDA : FRAMESRV_MEMORY_HOST,
                                     .cuda_device = o->device };
    if (framesrv_producer_open_as(&s->out, o->out, &po, o->upload ? "upload" : "download") != FRAMESRV_OK) return fail(NULL);
    s->format = *first;
    return wait_for_consumers(s);
}

/* A format change of IN becomes one of OUT (a new pool epoch there too). */
static int follow_format(stage *s, const framesrv_frame_info *f)
{
    if (f->width == s->format.width && f->height == s->format.height && !strcmp(f->pix_fmt_name, s->format.pix_fmt_name)) return 0;
    int pix_fmt = f->pix_fmt ? f->pix_fmt : framesrv_pix_fmt_from_name(f->pix_fmt_name);
    if (framesrv_producer_change_format(s->out, f->width, f->height, pix_fmt) != FRAMESRV_OK) return fail(NULL);
    s->format = *f;
    return 0;
}

/* Every (w) field of the header: what the frame is, besides its planes. */
static void carry_header(framesrv_frame_info *to, const framesrv_frame_info *from)
{
    to->color_matrix = from->color_matrix, to->color_range = from->color_range;
    to->color_primaries = from->color_primaries, to->color_transfer = from->color_transfer;
    to->sar_num = from->sar_num, to->sar_den = from->sar_den;
    to->pts = from->pts, to->time_base_num = from->time_base_num, to->time_base_den = from->time_base_den;
    to->duration = from->duration, to->capture_ns = from->capture_ns, to->flags = from->flags;
    to->field_order = from->field_order, to->chroma_location = from->chroma_location;
    to->source_dropped = from->source_dropped;
}

/* Reserves OUT's next slot (on the default stream for a CUDA OUT: after its readers' kernels). */
static int reserve(stage *s, framesrv_frame **out)
{
    for (;;) {
        int status = s->o->upload ? framesrv_producer_reserve_on(s->out, NULL, 250, out) : framesrv_producer_reserve(s->out, 250, out);
        if (status == FRAMESRV_OK) return 0;
        if (status != FRAMESRV_TIMEOUT) return fail(NULL);
        if (stop_requested) return -1;
    }
}

/* One frame of IN into OUT: reserve, copy, header, publish, release. */
static int pass(stage *s, framesrv_frame *f)
{
    const framesrv_frame_info *info = framesrv_frame_info_of(f);
    int rc = s->out ? follow_format(s, info) : open_output(s, info);
    framesrv_frame *dst = NULL;
    if (rc == 0) rc = reserve(s, &dst);
    if (rc == 0 && framesrv_frame_copy_on(dst, f, NULL) != FRAMESRV_OK) {
        framesrv_producer_abandon(s->out, dst);
        rc = fail(NULL);
    }
    if (rc == 0) {
        s->pinned = framesrv_frame_pinned(s->o->upload ? f : dst);
        carry_header(framesrv_frame_info_of(dst), info);
        s->copies += info->plane_count;
        rc = (s->o->upload ? framesrv_producer_publish_on(s->out, dst, NULL) : framesrv_producer_publish(s->out, dst)) == FRAMESRV_OK
                 ? 0 : fail(NULL);
    }
    framesrv_frame_release(f);   /* the copy has ended: host frames are synchronized */
    if (rc == 0) s->frames++;
    return rc;
}

/* IN to OUT until IN ends (0), its producer dies (1), a stop (0) or an error (2). */
static int run(stage *s)
{
    while (!stop_requested) {
        framesrv_frame *f;
        int status = s->o->upload ? framesrv_consumer_next(s->in, 250, &f) : framesrv_consumer_next_on(s->in, NULL, 250, &f);
        if (status == FRAMESRV_TIMEOUT) continue;
        if (status == FRAMESRV_END) return 0;
        if (status == FRAMESRV_GONE) {
            fprintf(stderr, "framesrv-cuda: error: the producer of '%s' died; '%s' ends as failed\n", s->o->in, s->o->out);
            return 1;
        }
        if (status != FRAMESRV_OK) return fail(NULL);
        int rc = pass(s, f);
        if (rc != 0) return rc < 0 ? 0 : rc;
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
    stage s = { .o = &o };
    rc = open_input(&s);
    if (rc == 0 && s.in) rc = run(&s);
    if (s.out) framesrv_producer_end(s.out, rc != 0);
    framesrv_producer_close(s.out);
    framesrv_consumer_close(s.in);
    printf("framesrv-cuda: %s: %llu frames %ux%u %s, %llu copies, host pool registered with CUDA: %s\n",
           o.upload ? "upload" : "download", s.frames, s.format.width, s.format.height, s.frames ? s.format.pix_fmt_name : "-",
           s.copies, s.pinned ? "yes" : "no (copies staged by the driver)");
    return rc;
}
