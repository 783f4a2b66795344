/*
 * gpu_consume.c: the GPU suite's consumer. Each frame: next_on(stream), the kernel `verify`
 * over every row (SLEEP_NS after each), release_on(stream); mismatching bytes are counted on
 * the device and read back at the end, per producer instance, with the frames that had any.
 *   gpu_consume NAME lossless|live SLEEP_NS MAX_FRAMES [victim] [reopen] [nofence] [cpurelease]
 * victim: says "reading" once its first kernel is queued (then it is killed); reopen: after
 * the producer died, says "gone", reopens and goes on; nofence: the kernel runs on another
 * stream than the one next_on ordered (a control: it must see torn frames); cpurelease:
 * framesrv_frame_release while the kernel reads (a control: the producer overwrites it).
 * Prints "instance I frames= first= last= gaps= bad_frames= min_bad=" and "done mismatches=".
 */
#include "gpu.h"
#include <framesrv.h>

#include <string.h>

#define PER_FRAME (1u << 20)

typedef struct instance { unsigned long long frames, first, last, gaps; } instance;

static bool flag(int argc, char **argv, const char *name)
{
    for (int i = 5; i < argc; i++)
        if (!strcmp(argv[i], name)) return true;
    return false;
}

static void report(const instance *in, int n, unsigned long long *dev_mismatches, unsigned int *dev_per_frame)
{
    unsigned long long mismatches = 0;
    static unsigned int per_frame[PER_FRAME];
    GPU_CHECK(cudaMemcpy(&mismatches, dev_mismatches, sizeof mismatches, GPU_D2H));
    GPU_CHECK(cudaMemcpy(per_frame, dev_per_frame, sizeof per_frame, GPU_D2H));
    for (int i = 0; i < n; i++) {
        unsigned long long bad = 0, min_bad = 0, half = PER_FRAME / 2;
        for (unsigned long long s = 1; s <= in[i].last && s < half; s++)
            if (per_frame[i * half + s]) bad++, min_bad = min_bad ? min_bad : s;
        printf("instance %d frames=%llu first=%llu last=%llu gaps=%llu bad_frames=%llu min_bad=%llu\n", i, in[i].frames, in[i].first,
               in[i].last, in[i].gaps, bad, min_bad);
    }
    printf("done mismatches=%llu\n", mismatches);
}

int main(int argc, char **argv)
{
    if (argc < 5) GPU_DIE("usage: gpu_consume NAME lossless|live SLEEP_NS MAX_FRAMES [victim] [reopen] [nofence] [cpurelease]");
    uint32_t sleep_ns = (uint32_t)atoi(argv[3]);
    unsigned long long max = strtoull(argv[4], NULL, 10);
    bool victim = flag(argc, argv, "victim"), reopen = flag(argc, argv, "reopen"), nofence = flag(argc, argv, "nofence");
    bool cpurelease = flag(argc, argv, "cpurelease");
    void *stream, *other;
    unsigned long long *mismatches;
    unsigned int *per_frame;
    GPU_CHECK(cudaSetDevice(0));   /* the context exists before the stream does */
    GPU_CHECK(cudaStreamCreateWithFlags(&stream, GPU_NON_BLOCKING));
    GPU_CHECK(cudaStreamCreateWithFlags(&other, GPU_NON_BLOCKING));
    GPU_CHECK(cudaMalloc((void **)&mismatches, sizeof *mismatches));
    GPU_CHECK(cudaMalloc((void **)&per_frame, PER_FRAME * sizeof *per_frame));
    GPU_CHECK(cudaMemset(mismatches, 0, sizeof *mismatches));
    GPU_CHECK(cudaMemset(per_frame, 0, PER_FRAME * sizeof *per_frame));
    framesrv_consumer_options o = { .mode = strcmp(argv[2], "live") ? FRAMESRV_LOSSLESS : FRAMESRV_LIVE, .attach_timeout_ms = 60000,
                                    .memory = FRAMESRV_MEMORY_CUDA };
    framesrv_consumer *c;
    if (framesrv_consumer_open(&c, argv[1], &o) != FRAMESRV_OK) GPU_DIE("gpu_consume: %s", framesrv_last_error());
    instance in[2] = { { 0 } };
    int n = 0;
    for (;;) {
        framesrv_frame *f;
        int rc = framesrv_consumer_next_on(c, nofence ? other : stream, 2000, &f);
        if (rc == FRAMESRV_TIMEOUT) continue;
        if (rc == FRAMESRV_GONE && reopen && n == 0) {
            printf("gone last=%llu\n", in[0].last);
            fflush(stdout);
            if (framesrv_consumer_reopen(c, 60000) != FRAMESRV_OK) GPU_DIE("gpu_consume: reopen: %s", framesrv_last_error());
            printf("reopened\n");
            fflush(stdout);
            n = 1;
            continue;
        }
        if (rc == FRAMESRV_END || rc == FRAMESRV_GONE) break;
        if (rc != FRAMESRV_OK) GPU_DIE("gpu_consume: next_on: %s", framesrv_last_error());
        framesrv_device_plane d;
        uint64_t seq = framesrv_frame_info_of(f)->seq;
        if (framesrv_frame_device_plane(f, 0, &d) != FRAMESRV_OK) GPU_DIE("gpu_consume: %s", framesrv_last_error());
        GPU_CHECK(gpu_verify(d.ptr, d.pitch, (uint32_t)d.row_bytes, d.height, seq, 0, sleep_ns, mismatches,
                             per_frame + n * (PER_FRAME / 2), PER_FRAME / 2, stream));
        if (cpurelease) framesrv_frame_release(f);
        else if (framesrv_frame_release_on(f, stream) != FRAMESRV_OK) GPU_DIE("gpu_consume: release_on: %s", framesrv_last_error());
        instance *i = &in[n];
        if (i->frames && seq != i->last + 1) i->gaps += seq - i->last - 1;
        if (!i->frames) i->first = seq;
        i->last = seq;
        if (++i->frames == 1 && victim) printf("reading\n"), fflush(stdout);
        framesrv_stream_info info;
        if (i->frames == 1 && !victim && framesrv_consumer_stream_info(c, &info) == FRAMESRV_OK)
            fprintf(stderr, "gpu_consume %s: device %s, allocation mapped %s\n", argv[1], info.device_uuid,
                    info.device_read_only ? "read-only" : "read-write");
        if (max && i->frames >= max) break;
    }
    GPU_CHECK(cudaStreamSynchronize(stream));
    framesrv_consumer_stats stats;
    framesrv_consumer_stats_of(c, &stats);
    framesrv_consumer_close(c);
    report(in, n + 1, mismatches, per_frame);
    printf("stats bad_frames=%llu missed=%llu first_unready=%llu\n", (unsigned long long)stats.bad_frames,
           (unsigned long long)stats.missed, (unsigned long long)stats.first_unready);
    return 0;
}
