/*
 * producer.c: a minimal framesrv producer in C on libframesrv.
 *
 * What it shows: creating a stream (size, pixel format, rate), the reserve -> write the
 * planes -> publish loop, timestamps and colour in the frame's header, and ending the
 * stream cleanly on Ctrl-C. It publishes a moving colour gradient, 320x240 yuv420p at
 * 30 fps, as stream "gradient" (or the name given), for 300 frames (or until Ctrl-C).
 *
 * Run it:
 *   make -C clients/c install PREFIX=$HOME/.local     # libframesrv + framesrv.pc
 *   export PKG_CONFIG_PATH=$HOME/.local/lib/pkgconfig
 *   make -C examples/c                                # cc producer.c $(pkg-config --cflags --libs framesrv)
 *   examples/c/producer gradient &
 *   examples/c/consumer gradient                      # or: framesrv sink --in gradient --y4m - | ffplay -
 */
#define _POSIX_C_SOURCE 200809L
#include <framesrv.h>

#include <signal.h>
#include <stdio.h>
#include <time.h>

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

/* Writes frame `n` of the gradient: luma moves right, chroma moves down. Each plane has
 * its own width, height and stride (rows may be padded past width * sample size). */
static void paint(framesrv_frame_info *info, uint64_t n)
{
    for (uint32_t p = 0; p < info->plane_count; p++) {
        framesrv_plane *pl = &info->planes[p];
        for (uint32_t y = 0; y < pl->height; y++) {
            uint8_t *row = pl->data + (size_t)y * pl->stride;
            for (uint32_t x = 0; x < pl->width; x++)
                row[x] = p == 0 ? (uint8_t)(16 + (x + 4 * n) % 220) : (uint8_t)(64 + (y + 2 * n + 64 * p) % 128);
        }
    }
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "gradient";
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    /* The stream's format. rate 30/1 is also the default time base of every frame (1/30):
     * reserve presets pts = seq - 1 and duration 1. Colour: BT.709, limited range. */
    framesrv_producer_options options = {
        .width = 320, .height = 240, .pix_fmt = FRAMESRV_PIX_YUV420P, .slots = 8,
        .rate_num = 30, .rate_den = 1,
        .color_matrix = 1, .color_range = 1, .color_primaries = 1, .color_transfer = 1,
    };
    framesrv_producer *producer;
    if (framesrv_producer_open(&producer, name, &options) != FRAMESRV_OK) {
        fprintf(stderr, "producer: %s\n", framesrv_last_error());
        return 1;
    }
    printf("producer: publishing stream '%s' (Ctrl-C to stop)\n", name);

    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    int status = 0;
    for (uint64_t n = 0; n < 300 && !stop; n++) {
        /* Reserve a free slot. Without consumers every slot is free; a lossless consumer
         * that falls behind makes reserve wait (here up to 1 s, then we try again). */
        framesrv_frame *frame;
        int rc = framesrv_producer_reserve(producer, 1000, &frame);
        if (rc == FRAMESRV_TIMEOUT) continue;
        if (rc != FRAMESRV_OK) {
            fprintf(stderr, "producer: %s\n", framesrv_last_error());
            status = 1;
            break;
        }
        framesrv_frame_info *info = framesrv_frame_info_of(frame);
        paint(info, n);
        info->flags = FRAMESRV_FRAME_KEY;   /* every raw frame stands alone */
        /* Publish: consumers see the frame now; `frame` is invalid afterwards. */
        if (framesrv_producer_publish(producer, frame) != FRAMESRV_OK) {
            fprintf(stderr, "producer: %s\n", framesrv_last_error());
            status = 1;
            break;
        }
        /* Pace at 30 fps on the monotonic clock. */
        next.tv_nsec += 1000000000L / 30;
        if (next.tv_nsec >= 1000000000L) next.tv_sec++, next.tv_nsec -= 1000000000L;
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }

    framesrv_producer_stats stats;
    framesrv_producer_stats_of(producer, &stats);
    /* Ends the stream (consumers get every frame, then the end) and removes its files. */
    framesrv_producer_close(producer);
    printf("producer: published %llu frames\n", (unsigned long long)stats.published);
    return status;
}
