/*
 * producer_audio.c: libframesrv produces audio (PROTOCOL.md 4.6). Bad options and a bad
 * nb_samples are FRAMESRV_E_INVALID with one line; a C consumer reads back every sample of
 * every format, planar frames shorter than max_samples included; and a 440 Hz sine
 * (s16 stereo, 48 kHz, 1024-sample frames and a short last one) read by
 * `framesrv sink --framemd5 -` is what `ffmpeg -f s16le -ar 48000 -ac 2 -i RAW -f framemd5 -`
 * writes for the same bytes, timestamps included.
 * The framemd5 part needs the Swift framesrv binary ($FRAMESRV) and ffmpeg (skipped if absent).
 */
#include "producer_check.h"

#include <inttypes.h>

static framesrv_producer_options audio(int sample_fmt, uint32_t channels, uint64_t mask, uint32_t max_samples)
{
    return (framesrv_producer_options){.media = FRAMESRV_MEDIA_AUDIO, .sample_fmt = sample_fmt, .sample_rate = 48000,
                                       .channels = channels, .channel_mask = mask, .max_samples = max_samples};
}

/* Opening with o fails with FRAMESRV_E_INVALID and a message naming `field`. */
static void refused(framesrv_producer_options o, const char *field)
{
    framesrv_producer *p = NULL;
    int rc = framesrv_producer_open(&p, "bad-audio", &o);
    CHECK(rc == FRAMESRV_E_INVALID && p == NULL, "%s: %s", field, framesrv_status_name(rc));
    CHECK(strstr(framesrv_last_error(), field) != NULL && strchr(framesrv_last_error(), '\n') == NULL,
          "%s: message '%s'", field, framesrv_last_error());
    framesrv_producer_close(p);
}

static void bad_options(void)
{
    refused(audio(0, 2, 0, 1024), "sample_fmt");
    refused(audio(13, 2, 0, 1024), "sample_fmt");
    refused(audio(FRAMESRV_SAMPLE_S16, 0, 0, 1024), "channels");
    refused(audio(FRAMESRV_SAMPLE_S16, 65, 0, 1024), "channels");
    refused(audio(FRAMESRV_SAMPLE_S16, 2, 0, 0), "max_samples");
    refused(audio(FRAMESRV_SAMPLE_S16, 2, 0, (1u << 20) + 1), "max_samples");
    refused(audio(FRAMESRV_SAMPLE_S16, 2, 0x7, 1024), "channel_mask");
    refused(audio(FRAMESRV_SAMPLE_S16, 6, 0x3, 1024), "channel_mask");
    framesrv_producer_options o = audio(FRAMESRV_SAMPLE_S16, 2, 0x3, 1024);
    o.sample_rate = 0;
    refused(o, "sample_rate");
    o.sample_rate = 768001;
    refused(o, "sample_rate");
    o = audio(FRAMESRV_SAMPLE_S16, 2, 0x3, 1024);
    o.width = 64;
    refused(o, "width");
    o = audio(FRAMESRV_SAMPLE_S16, 2, 0x3, 1024);
    o.media = 2;
    refused(o, "media");
    o = (framesrv_producer_options){.width = 64, .height = 64, .pix_fmt = FRAMESRV_PIX_GRAY, .channels = 2};
    refused(o, "media = FRAMESRV_MEDIA_AUDIO");   /* audio fields on a video stream */
}

/* nb_samples 0 or above max_samples: publish refuses it (the frame stays reserved). */
static void bad_nb_samples(void)
{
    framesrv_producer_options o = audio(FRAMESRV_SAMPLE_FLTP, 2, 0x3, 256);
    framesrv_producer *p;
    CHECK_STATUS(framesrv_producer_open(&p, "nb-samples", &o), FRAMESRV_OK);
    framesrv_frame *f;
    CHECK_STATUS(framesrv_producer_reserve(p, 1000, &f), FRAMESRV_OK);
    framesrv_frame_info *in = framesrv_frame_info_of(f);
    CHECK(in->nb_samples == 256 && in->planes[0].width == 256 && in->planes[0].height == 2 && in->planes[0].stride == 1024,
          "preset: nb_samples %u, plane %ux%u stride %zu", in->nb_samples, in->planes[0].width, in->planes[0].height,
          in->planes[0].stride);
    uint32_t bad[] = {0, 257};
    for (int i = 0; i < 2; i++) {
        in->nb_samples = bad[i];
        CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_E_INVALID);
        CHECK(strstr(framesrv_last_error(), "nb_samples") != NULL, "message '%s'", framesrv_last_error());
    }
    CHECK_STATUS(framesrv_producer_change_format(p, 64, 64, FRAMESRV_PIX_GRAY), FRAMESRV_E_STATE);
    CHECK_STATUS(framesrv_producer_abandon(p, f), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_change_format(p, 64, 64, FRAMESRV_PIX_GRAY), FRAMESRV_E_MEDIA);
    framesrv_producer_close(p);
}

/* Byte b of sample s of channel c in frame k: what round_trip writes and expects. */
static uint8_t byte_of(uint32_t k, uint32_t c, uint64_t b) { return (uint8_t)(k * 7 + c * 31 + b * 3 + (b >> 8)); }

/* Every format: frames of max_samples and shorter ones, read back by a C consumer. */
static void round_trip(int fmt)
{
    static const uint32_t counts[] = {100, 37, 1, 100, 64};
    const uint32_t channels = 3, max = 100;
    framesrv_producer_options o = audio(fmt, channels, 0, max);
    int planar = (fmt >= FRAMESRV_SAMPLE_U8P && fmt <= FRAMESRV_SAMPLE_DBLP) || fmt == FRAMESRV_SAMPLE_S64P;
    framesrv_producer *p;
    CHECK_STATUS(framesrv_producer_open(&p, "round-trip", &o), FRAMESRV_OK);
    framesrv_consumer_options co = {.attach_timeout_ms = 5000, .media = FRAMESRV_MEDIA_AUDIO};
    framesrv_consumer *c;
    CHECK_STATUS(framesrv_consumer_open(&c, "round-trip", &co), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 5000), FRAMESRV_OK);
    for (uint32_t k = 0; k < 5; k++) {
        framesrv_frame *f;
        CHECK_STATUS(framesrv_producer_reserve(p, 1000, &f), FRAMESRV_OK);
        framesrv_frame_info *in = framesrv_frame_info_of(f);
        const framesrv_plane *pl = &in->planes[0];
        for (uint32_t r = 0; r < pl->height; r++)   /* rows max_samples apart, as reserve gives them */
            for (size_t b = 0; b < pl->row_bytes; b++) pl->data[r * pl->stride + b] = byte_of(k, r, b);
        in->nb_samples = counts[k];
        CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_OK);
    }
    framesrv_producer_end(p, 0);
    int64_t pts = 0;
    for (uint32_t k = 0; k < 5; k++) {
        framesrv_frame *f;
        CHECK_STATUS(framesrv_consumer_next(c, 2000, &f), FRAMESRV_OK);
        if (f == NULL) break;
        const framesrv_frame_info *in = framesrv_frame_info_of(f);
        const framesrv_plane *pl = &in->planes[0];
        CHECK(in->media == FRAMESRV_MEDIA_AUDIO && in->sample_fmt == fmt && in->nb_samples == counts[k] &&
              in->channels == channels && in->channel_order == 0 && in->channel_mask == 0 && in->sample_rate == 48000,
              "%s frame %u: fmt %d nb_samples %u channels %u", framesrv_sample_fmt_name(fmt), k, in->sample_fmt,
              in->nb_samples, in->channels);
        CHECK(in->pts == pts && in->duration == counts[k] && in->time_base_num == 1 && in->time_base_den == 48000,
              "%s frame %u: pts %lld duration %lld tb %d/%d", framesrv_sample_fmt_name(fmt), k, (long long)in->pts,
              (long long)in->duration, in->time_base_num, in->time_base_den);
        CHECK(pl->height == (planar ? channels : 1) && pl->stride % 64 == 0 && pl->stride < pl->row_bytes + 64,
              "%s frame %u: %u rows, stride %zu for %zu bytes", framesrv_sample_fmt_name(fmt), k, pl->height, pl->stride,
              pl->row_bytes);
        uint64_t wrong = 0;
        for (uint32_t r = 0; r < pl->height; r++)
            for (size_t b = 0; b < pl->row_bytes; b++) wrong += pl->data[r * pl->stride + b] != byte_of(k, r, b);
        CHECK(wrong == 0, "%s frame %u: %" PRIu64 " bytes differ", framesrv_sample_fmt_name(fmt), k, wrong);
        pts += counts[k];
        framesrv_frame_release(f);
    }
    framesrv_frame *f;
    CHECK_STATUS(framesrv_consumer_next(c, 2000, &f), FRAMESRV_END);
    framesrv_consumer_close(c);
    framesrv_producer_close(p);
}

/* sin(2 pi t / period), without libm: the angle reduced to -pi..pi, then Taylor to x^13. */
static double sine(uint64_t t, double period)
{
    const double pi = 3.14159265358979323846;
    double x = 2 * pi * ((double)t / period - (double)(uint64_t)((double)t / period + 0.5)), term = x, sum = x;
    for (int n = 1; n <= 6; n++) sum += term *= -x * x / ((2 * n) * (2 * n + 1));
    return sum;
}

/* The sine of the framemd5 test: s16 stereo, 48 kHz, frames of 1024 samples and a last of 500. */
static void framemd5(const char *framesrv)
{
    const char *dir = getenv("FRAMESRV_DIR");
    char raw[256], got[256], want[256], command[1024];
    snprintf(raw, sizeof raw, "%s/sine.s16", dir);
    snprintf(got, sizeof got, "%s/sink.framemd5", dir);
    snprintf(want, sizeof want, "%s/ffmpeg.framemd5", dir);
    framesrv_producer_options o = audio(FRAMESRV_SAMPLE_S16, 2, 0x3, 1024);
    framesrv_producer *p;
    CHECK_STATUS(framesrv_producer_open(&p, "sine", &o), FRAMESRV_OK);
    char *argv[] = {(char *)framesrv, "sink", "--in", "sine", "--framemd5", "-", "--wait", "20", NULL};
    pid_t sink = check_spawn(argv, got);
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 20000), FRAMESRV_OK);
    FILE *out = fopen(raw, "wb");
    CHECK(out != NULL, "open %s", raw);
    uint64_t t = 0;
    for (int k = 0; k < 20 && out; k++) {
        framesrv_frame *f;
        CHECK_STATUS(framesrv_producer_reserve(p, 5000, &f), FRAMESRV_OK);
        framesrv_frame_info *in = framesrv_frame_info_of(f);
        in->nb_samples = k == 19 ? 500 : 1024;
        int16_t *s = (int16_t *)in->planes[0].data;
        for (uint32_t i = 0; i < in->nb_samples; i++, t++)
            s[2 * i] = s[2 * i + 1] = (int16_t)(8000 * sine(t, 48000 / 440.0));
        fwrite(s, 4, in->nb_samples, out);
        CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_OK);
    }
    if (out) fclose(out);
    framesrv_producer_close(p);
    CHECK(check_wait(sink, 30) == 0, "framesrv sink --framemd5 failed");
    snprintf(command, sizeof command, "ffmpeg -v error -f s16le -ar 48000 -ac 2 -i %s -f framemd5 - > %s", raw, want);
    CHECK(system(command) == 0, "%s", command);
    /* Both without their comment lines (#software: ... names the writer). */
    snprintf(command, sizeof command, "grep -q '^0, *0, *0, *1024,' %s && diff <(grep -v '^#software' %s) "
             "<(grep -v '^#software' %s) >&2", got, got, want);
    char *sh[] = {"/bin/bash", "-c", command, NULL};
    CHECK(check_wait(check_spawn(sh, NULL), 10) == 0, "framemd5 of the sink (%s) differs from ffmpeg's (%s)", got, want);
}

int main(void)
{
    check_runtime_dir();
    bad_options();
    bad_nb_samples();
    for (int fmt = 1; fmt <= 12; fmt++) round_trip(fmt);
    const char *framesrv = check_framesrv();
    if (framesrv == NULL || system("ffmpeg -version > /dev/null 2>&1") != 0)
        printf("producer_audio: framemd5 skipped (needs the Swift framesrv ($FRAMESRV) and ffmpeg)\n");
    else
        framemd5(framesrv);
    return check_exit("producer_audio");
}
