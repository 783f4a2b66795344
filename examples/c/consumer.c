/*
 * consumer.c: a minimal framesrv consumer in C on libframesrv.
 *
 * What it shows: attaching to a stream (lossless: every frame, in order; or live: the
 * newest), reading a frame's planes in place in shared memory (no copy) and its header
 * (size, format, pts in its time base), releasing it, the end of the stream, and
 * re-attaching when its producer restarts. For each frame it prints the mean of the
 * first plane (the luma of a YUV frame).
 *
 * Run it:
 *   make -C clients/c install PREFIX=$HOME/.local     # libframesrv + framesrv.pc
 *   export PKG_CONFIG_PATH=$HOME/.local/lib/pkgconfig
 *   make -C examples/c                                # cc consumer.c $(pkg-config --cflags --libs framesrv)
 *   examples/c/consumer gradient &                    # or: examples/c/consumer gradient --live
 *   examples/c/producer gradient                      # or: framesrv produce --pattern --out gradient
 */
#define _POSIX_C_SOURCE 200809L
#include <framesrv.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

/* The mean sample of plane 0, read row by row at the plane's stride (rows may be padded). */
static double mean_of_plane0(const framesrv_frame_info *info)
{
    const framesrv_plane *pl = &info->planes[0];
    uint64_t sum = 0;
    for (uint32_t y = 0; y < pl->height; y++) {
        const uint8_t *row = pl->data + (size_t)y * pl->stride;
        for (size_t x = 0; x < pl->row_bytes; x++) sum += row[x];
    }
    return pl->height && pl->row_bytes ? (double)sum / ((double)pl->height * (double)pl->row_bytes) : 0;
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "gradient";
    int live = argc > 2 && strcmp(argv[2], "--live") == 0;
    struct sigaction sa = {.sa_handler = on_signal};   /* no SA_RESTART: next returns early */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    /* Waits up to 10 s for the stream to appear (-1: forever). */
    framesrv_consumer_options options = { .mode = live ? FRAMESRV_LIVE : FRAMESRV_LOSSLESS, .attach_timeout_ms = 10000 };
    framesrv_consumer *consumer;
    if (framesrv_consumer_open(&consumer, name, &options) != FRAMESRV_OK) {
        fprintf(stderr, "consumer: %s\n", framesrv_last_error());
        return 1;
    }
    int status = 0;
    while (!stop) {
        framesrv_frame *frame;
        int rc = framesrv_consumer_next(consumer, 500, &frame);
        if (rc == FRAMESRV_TIMEOUT) continue;           /* nothing yet (or a signal) */
        if (rc == FRAMESRV_END) break;                  /* every frame was delivered */
        if (rc == FRAMESRV_GONE) {                      /* the producer died: wait for the next one */
            fprintf(stderr, "consumer: %s; waiting for a new producer\n", framesrv_last_error());
            if (framesrv_consumer_reopen(consumer, 10000) == FRAMESRV_OK) continue;
        }
        if (rc != FRAMESRV_OK) {
            fprintf(stderr, "consumer: %s\n", framesrv_last_error());
            status = 1;
            break;
        }
        /* The planes point into the pool, mapped read-only: valid until the release. */
        const framesrv_frame_info *info = framesrv_frame_info_of(frame);
        printf("frame %llu  %ux%u %s  pts %lld (%d/%d)  mean %.1f\n", (unsigned long long)info->seq, info->width,
               info->height, info->pix_fmt_name, (long long)info->pts, info->time_base_num, info->time_base_den,
               mean_of_plane0(info));
        framesrv_frame_release(frame);   /* the slot goes back to the producer */
    }
    framesrv_consumer_stats stats;
    framesrv_consumer_stats_of(consumer, &stats);
    framesrv_consumer_close(consumer);   /* detaches: the producer frees our entry */
    printf("consumer: received %llu frames, missed %llu\n", (unsigned long long)stats.delivered,
           (unsigned long long)stats.missed);
    return status;
}
