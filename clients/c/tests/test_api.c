/*
 * test_api.c: the API's answers to bad arguments, without any producer: status names,
 * NULL arguments, bad stream names and options, a stream that does not exist, and the
 * frame-header validator on headers v2 refuses.
 */
#include "check.h"
#include "validate.h"

#include <stdint.h>

static void status_names(void)
{
    CHECK(!strcmp(framesrv_status_name(FRAMESRV_OK), "FRAMESRV_OK"), "%s", framesrv_status_name(FRAMESRV_OK));
    CHECK(!strcmp(framesrv_status_name(FRAMESRV_E_BAD_DATA), "FRAMESRV_E_BAD_DATA"), "bad data");
    CHECK(!strcmp(framesrv_status_name(FRAMESRV_E_ZMQ), "FRAMESRV_E_ZMQ"), "zmq");
    CHECK(!strcmp(framesrv_status_name(FRAMESRV_GONE), "FRAMESRV_GONE"), "gone");
    CHECK(!strcmp(framesrv_status_name(FRAMESRV_E_VERSION), "FRAMESRV_E_VERSION"), "version");
    CHECK(!strcmp(framesrv_status_name(FRAMESRV_E_HELD), "FRAMESRV_E_HELD"), "held");
    CHECK(!strcmp(framesrv_status_name(FRAMESRV_E_MEMORY), "FRAMESRV_E_MEMORY"), "memory");
    CHECK(!strcmp(framesrv_status_name(FRAMESRV_E_FORKED), "FRAMESRV_E_FORKED"), "forked");
    CHECK(!strcmp(framesrv_status_name(FRAMESRV_E_MEDIA), "FRAMESRV_E_MEDIA"), "media");
    const int unknown[] = { 4, -15, 12345, INT32_MIN, INT32_MAX };
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        CHECK(framesrv_status_name(unknown[i]) != NULL && strstr(framesrv_status_name(unknown[i]), "UNKNOWN"), "status %d", unknown[i]);
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", FRAMESRV_VERSION_MAJOR, FRAMESRV_VERSION_MINOR, FRAMESRV_VERSION_PATCH);
    CHECK(!strcmp(framesrv_version(), version) && FRAMESRV_VERSION_MAJOR == 2, "version %s (header: %s)", framesrv_version(), version);
#ifdef FRAMESRV_MAKE_VERSION   /* the Makefile's VERSION (the .so file's name), read from the header */
    CHECK(!strcmp(FRAMESRV_MAKE_VERSION, version), "Makefile VERSION %s, header %s", FRAMESRV_MAKE_VERSION, version);
#endif
    CHECK(framesrv_last_error() != NULL, "last error is never NULL");
}

static void null_arguments(void)
{
    framesrv_consumer *c = (framesrv_consumer *)1;
    CHECK_STATUS(framesrv_consumer_open(NULL, "x", NULL), FRAMESRV_E_INVALID);
    CHECK_STATUS(framesrv_consumer_open(&c, NULL, NULL), FRAMESRV_E_INVALID);
    CHECK(c == NULL, "*out is NULL after a failed open");
    framesrv_frame *f = (framesrv_frame *)1;
    CHECK_STATUS(framesrv_consumer_next(NULL, 0, &f), FRAMESRV_E_INVALID);
    CHECK(f == NULL, "*frame is NULL after a failed next");
    CHECK_STATUS(framesrv_consumer_reopen(NULL, 0), FRAMESRV_E_INVALID);
    framesrv_stream_info info;
    framesrv_consumer_stats stats;
    CHECK_STATUS(framesrv_consumer_stream_info(NULL, &info), FRAMESRV_E_INVALID);
    CHECK_STATUS(framesrv_consumer_stats_of(NULL, &stats), FRAMESRV_E_INVALID);
    CHECK(framesrv_consumer_fd(NULL) == -1, "fd of NULL");
    CHECK(framesrv_frame_info_of(NULL) == NULL, "info of NULL");
    framesrv_frame_release(NULL);     /* ignored */
    framesrv_consumer_close(NULL);    /* ignored */
    CHECK(framesrv_pattern_check(NULL) == 0, "pattern check of NULL");
}

static void bad_names(void)
{
    const char *bad[] = { "", ".", "..", ".hidden", "a/b", "a b", "é", "name\n",
                          "0123456789012345678901234567890123456789012345678", /* 49 */ "../etc" };
    framesrv_consumer_options o = { .attach_timeout_ms = 0 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        framesrv_consumer *c = NULL;
        int status = framesrv_consumer_open(&c, bad[i], &o);
        CHECK(status == FRAMESRV_E_INVALID && c == NULL, "name '%s': %s (%s)", bad[i], framesrv_status_name(status), framesrv_last_error());
        CHECK(strstr(framesrv_last_error(), "invalid stream name") != NULL, "message: %s", framesrv_last_error());
    }
    framesrv_consumer_options mode = { .mode = 7, .attach_timeout_ms = 0 };
    framesrv_consumer *c = NULL;
    CHECK_STATUS(framesrv_consumer_open(&c, "fine", &mode), FRAMESRV_E_INVALID);
    CHECK(strstr(framesrv_last_error(), "mode 7") != NULL, "message: %s", framesrv_last_error());
    framesrv_consumer_options poll = { .poll_us = 1000001, .attach_timeout_ms = 0 };
    CHECK_STATUS(framesrv_consumer_open(&c, "fine", &poll), FRAMESRV_E_INVALID);
    CHECK(strstr(framesrv_last_error(), "poll_us 1000001") != NULL, "message: %s", framesrv_last_error());
}

/* A valid gray 16x16 header in a 4096-byte slot (frame 1). */
static fs_frame good_header(void)
{
    fs_frame h = { .magic = FS_MAGIC_FRAME, .version = FS_PROTOCOL_VERSION, .seq = 1, .epoch = 1, .width = 16, .height = 16,
                   .pix_fmt = FS_PIX_GRAY8, .plane_count = 1, .plane_offset = { 256 }, .plane_stride = { 16 },
                   .plane_size = { 256 }, .time_base_num = 1, .time_base_den = 30, .field_order = FS_FIELD_BB,
                   .chroma_location = FS_CHROMA_LEFT };
    snprintf(h.pix_fmt_name, sizeof h.pix_fmt_name, "gray");
    return h;
}

/* One bad field of a frame on a stream of `media` in slots of `slot_bytes`: rejected (BAD_DATA)
 * with a message naming it. */
static void expect_bad(const fs_frame *h, uint32_t media, uint64_t slot_bytes, const char *field)
{
    int status = fsi_validate_frame(h, 1, slot_bytes, media, "test.pool.1", 0);
    CHECK(status == FRAMESRV_E_BAD_DATA && strstr(framesrv_last_error(), field), "%s: %s (%s)", field, framesrv_status_name(status),
          framesrv_last_error());
}

static void expect_bad_frame(const fs_frame *h, const char *field) { expect_bad(h, FS_MEDIA_VIDEO, 4096, field); }

static void bad_frame_headers(void)
{
    fs_frame h = good_header();
    CHECK_STATUS(fsi_validate_frame(&h, 1, 4096, FS_MEDIA_VIDEO, "test.pool.1", 0), FRAMESRV_OK);
    h.time_base_num = 0;
    expect_bad_frame(&h, "time_base_num is 0");
    h = good_header();
    h.time_base_den = 0;
    expect_bad_frame(&h, "time_base_den is 0");
    h = good_header();
    h.field_order = 6;
    expect_bad_frame(&h, "field_order is 6");
    h = good_header();
    h.chroma_location = 7;
    expect_bad_frame(&h, "chroma_location is 7");
    h = (fs_frame){ .magic = FS_MAGIC_FRAME, .version = FS_PROTOCOL_VERSION, .seq = 1, .width = 16, .height = 16,
                    .pix_fmt = FS_PIX_OTHER, .plane_count = 3, .plane_offset = { 256, 512, 576 }, .plane_stride = { 16, 8, 8 },
                    .plane_size = { 256, 64, 64 }, .time_base_num = 1, .time_base_den = 30 };
    snprintf(h.pix_fmt_name, sizeof h.pix_fmt_name, "yuv420p");   /* a table name under code 0 */
    expect_bad_frame(&h, "pix_fmt is 0");
    snprintf(h.pix_fmt_name, sizeof h.pix_fmt_name, "yuv410p");   /* not in the table: code 0 is right */
    CHECK_STATUS(fsi_validate_frame(&h, 1, 4096, FS_MEDIA_VIDEO, "test.pool.1", 0), FRAMESRV_OK);
}

/* An audio frame (PROTOCOL.md 4.6): 1024 fltp stereo samples, two rows of 4096 bytes. */
static fs_frame audio_header(void)
{
    fs_frame h = { .magic = FS_MAGIC_FRAME, .version = FS_PROTOCOL_VERSION, .seq = 1, .epoch = 1, .media = FS_MEDIA_AUDIO,
                   .pix_fmt = FS_SAMPLE_FLTP, .plane_count = 1, .plane_offset = { 256 }, .plane_stride = { 4096 },
                   .plane_size = { 8192 }, .time_base_num = 1, .time_base_den = 48000, .sample_rate = 48000, .channels = 2,
                   .channel_order = FS_CHANNEL_ORDER_NATIVE, .channel_mask = 3, .nb_samples = 1024 };
    snprintf(h.pix_fmt_name, sizeof h.pix_fmt_name, "fltp");
    return h;
}

static void audio_frame_headers(void)
{
    fs_frame h = audio_header();
    CHECK_STATUS(fsi_validate_frame(&h, 1, 16384, FS_MEDIA_AUDIO, "test.pool.1", 0), FRAMESRV_OK);
    expect_bad_frame(&h, "media is 1");   /* an audio frame on a video stream */
    /* One damaged field each: the channel count 0 and 255, a code past the table, a code the
     * name contradicts, a sample count whose row overflows, a stride too small for a row, a
     * mask with 3 channels for 2, a width, a plane past the slot. */
    const struct { uint32_t channels, pix_fmt, nb_samples, stride, width, size; uint64_t mask; const char *field; } bad[] = {
        {0, FS_SAMPLE_FLTP, 1024, 4096, 0, 8192, 3, "channels is 0"},
        {255, FS_SAMPLE_FLTP, 1024, 4096, 0, 8192, 3, "channels is 255"},
        {2, FS_SAMPLE_MAX + 1, 1024, 4096, 0, 8192, 3, "pix_fmt is 13"},
        {2, FS_SAMPLE_S16, 1024, 4096, 0, 8192, 3, "pix_fmt is 2"},
        {2, FS_SAMPLE_FLTP, UINT32_MAX, 4096, 0, 8192, 3, "nb_samples"},
        {2, FS_SAMPLE_FLTP, 1024, 64, 0, 8192, 3, "plane_stride[0] is 64"},
        {2, FS_SAMPLE_FLTP, 1024, 4096, 0, 8192, 7, "channel_mask is 7"},
        {2, FS_SAMPLE_FLTP, 1024, 4096, 16, 8192, 3, "width is 16"},
        {2, FS_SAMPLE_FLTP, 1024, 4096, 0, 1u << 31, 3, "plane_size[0]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        h = audio_header();
        h.channels = bad[i].channels, h.pix_fmt = bad[i].pix_fmt, h.nb_samples = bad[i].nb_samples;
        h.plane_stride[0] = bad[i].stride, h.width = bad[i].width, h.plane_size[0] = bad[i].size, h.channel_mask = bad[i].mask;
        expect_bad(&h, FS_MEDIA_AUDIO, 16384, bad[i].field);
    }
    CHECK(!strcmp(framesrv_sample_fmt_name(FRAMESRV_SAMPLE_FLTP), "fltp") && framesrv_sample_fmt_name(13) == NULL, "sample names");
}

static void missing_stream(void)
{
    framesrv_consumer_options o = { .attach_timeout_ms = 0 };
    framesrv_consumer *c = NULL;
    CHECK_STATUS(framesrv_consumer_open(&c, "nobody-publishes-this", &o), FRAMESRV_E_NOT_FOUND);
    CHECK(strstr(framesrv_last_error(), "nobody-publishes-this") != NULL, "message names the stream: %s", framesrv_last_error());
    o.attach_timeout_ms = 100;
    o.mode = FRAMESRV_LIVE;
    CHECK_STATUS(framesrv_consumer_open(&c, "nobody-publishes-this", &o), FRAMESRV_E_NOT_FOUND);
    CHECK(c == NULL, "no consumer");
}

static void pixel_formats(void)
{
    CHECK(!strcmp(framesrv_pix_fmt_name(FRAMESRV_PIX_YUV420P), "yuv420p"), "yuv420p");
    CHECK(framesrv_pix_fmt_name(0) == NULL && framesrv_pix_fmt_name(99) == NULL && framesrv_pix_fmt_name(-1) == NULL, "unknown codes");
    CHECK(framesrv_pix_fmt_from_name("gbrp") == FRAMESRV_PIX_GBRP, "gbrp");
    CHECK(framesrv_pix_fmt_from_name("nope") == 0 && framesrv_pix_fmt_from_name(NULL) == 0, "unknown names");
}

static void runtime_directory(void)
{
    /* FRAMESRV_DIR pointing at a file, not a directory. */
    char file[96];
    snprintf(file, sizeof file, "%s/not-a-dir", check_dir);
    FILE *f = fopen(file, "w");
    if (f) fclose(f);
    setenv("FRAMESRV_DIR", file, 1);
    framesrv_consumer_options o = { .attach_timeout_ms = 0 };
    framesrv_consumer *c = NULL;
    int status = framesrv_consumer_open(&c, "x", &o);
    CHECK(status == FRAMESRV_E_SYSTEM || status == FRAMESRV_E_INVALID, "%s (%s)", framesrv_status_name(status), framesrv_last_error());
    CHECK(strstr(framesrv_last_error(), "not-a-dir") != NULL, "message names the directory: %s", framesrv_last_error());
    setenv("FRAMESRV_DIR", check_dir, 1);
}

int main(void)
{
    check_runtime_dir();
    status_names();
    null_arguments();
    bad_names();
    missing_stream();
    pixel_formats();
    runtime_directory();
    bad_frame_headers();
    audio_frame_headers();
    return check_exit("test_api");
}
