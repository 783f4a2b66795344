/*
 * gpu_produce.c: the GPU suite's producer. A CUDA stream of gray frames whose every row the
 * kernel `fill` writes slowly on one stream (reserve_on, then the kernel, then publish_on: no
 * CPU wait), until FRAMES frames were published (0: until SIGTERM).
 *   gpu_produce NAME FRAMES WIDTH HEIGHT SLOTS SLEEP_NS WAIT_FOR
 * Says "ready" once the stream exists, "published N reclaimed R" at the end.
 */
#include "gpu.h"
#include <framesrv.h>

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t stop;
static void on_term(int sig) { (void)sig; stop = 1; }

int main(int argc, char **argv)
{
    if (argc != 8) GPU_DIE("usage: gpu_produce NAME FRAMES WIDTH HEIGHT SLOTS SLEEP_NS WAIT_FOR");
    unsigned long long frames = strtoull(argv[2], NULL, 10);
    uint32_t sleep_ns = (uint32_t)atoi(argv[6]), wait_for = (uint32_t)atoi(argv[7]);
    signal(SIGTERM, on_term);
    void *stream;
    GPU_CHECK(cudaSetDevice(0));
    GPU_CHECK(cudaStreamCreateWithFlags(&stream, GPU_NON_BLOCKING));
    framesrv_producer_options o = { .width = (uint32_t)atoi(argv[3]), .height = (uint32_t)atoi(argv[4]), .pix_fmt = FRAMESRV_PIX_GRAY,
                                     .slots = (uint32_t)atoi(argv[5]), .memory = FRAMESRV_MEMORY_CUDA, .cuda_device = 0 };
    framesrv_producer *p;
    int rc = framesrv_producer_open(&p, argv[1], &o);
    if (rc != FRAMESRV_OK) GPU_DIE("gpu_produce: %s", framesrv_last_error());
    printf("ready\n");
    fflush(stdout);
    if (wait_for && framesrv_producer_wait_for_consumers(p, wait_for, 60000) != FRAMESRV_OK) GPU_DIE("gpu_produce: no consumers");
    unsigned long long published = 0;
    while (!stop && (frames == 0 || published < frames)) {
        framesrv_frame *f;
        rc = framesrv_producer_reserve_on(p, stream, 500, &f);
        if (rc == FRAMESRV_TIMEOUT) continue;
        if (rc != FRAMESRV_OK) GPU_DIE("gpu_produce: reserve_on: %s", framesrv_last_error());
        framesrv_device_plane d;
        if (framesrv_frame_device_plane(f, 0, &d) != FRAMESRV_OK) GPU_DIE("gpu_produce: %s", framesrv_last_error());
        GPU_CHECK(gpu_fill(d.ptr, d.pitch, (uint32_t)d.row_bytes, d.height, framesrv_frame_info_of(f)->seq, 0, sleep_ns, stream));
        if (framesrv_producer_publish_on(p, f, stream) != FRAMESRV_OK) GPU_DIE("gpu_produce: publish_on: %s", framesrv_last_error());
        published++;
    }
    GPU_CHECK(cudaStreamSynchronize(stream));
    framesrv_producer_stats stats;
    framesrv_producer_stats_of(p, &stats);
    framesrv_producer_end(p, 0);
    framesrv_producer_close(p);
    printf("published %llu reclaimed %llu\n", published, (unsigned long long)stats.reclaimed);
    return 0;
}
