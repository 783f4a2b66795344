/*
 * test_api.c: the API's answers to bad arguments, without any producer: status names,
 * NULL arguments, bad stream names and options, a stream that does not exist.
 */
#include "check.h"
#include "framesrv.h"

#include <stdint.h>

static void status_names(void)
{
    CHECK(!strcmp(framesrv_status_name(FRAMESRV_OK), "FRAMESRV_OK"), "%s", framesrv_status_name(FRAMESRV_OK));
    CHECK(!strcmp(framesrv_status_name(FRAMESRV_E_BAD_DATA), "FRAMESRV_E_BAD_DATA"), "bad data");
    CHECK(!strcmp(framesrv_status_name(FRAMESRV_E_ZMQ), "FRAMESRV_E_ZMQ"), "zmq");
    CHECK(!strcmp(framesrv_status_name(FRAMESRV_GONE), "FRAMESRV_GONE"), "gone");
    const int unknown[] = { 4, -10, 12345, INT32_MIN, INT32_MAX };
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        CHECK(framesrv_status_name(unknown[i]) != NULL && strstr(framesrv_status_name(unknown[i]), "UNKNOWN"), "status %d", unknown[i]);
    CHECK(!strcmp(framesrv_version(), "0.1.0"), "version %s", framesrv_version());
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
    return check_exit("test_api");
}
