/*
 * test_cuda_copy.c: framesrv_frame_copy_on and the framesrv-cuda tool (upload, download),
 * through the stand-in driver tests/fakecuda: a host frame uploaded into a CUDA slot and
 * downloaded into a host slot keeps every byte (the test pattern), one 2D copy per plane,
 * with both host pools registered (and unregistered when they go); a geometry mismatch is
 * refused in one line; framesrv_frame_read_on downloads into the caller's memory; and in real processes framesrv-produce -> framesrv-cuda upload ->
 * framesrv-cuda download -> framesrv-consume --verify-pattern delivers every frame intact.
 */
#include "check.h"
#include <framesrv.h>

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <sys/wait.h>
#include <stdlib.h>

#define STREAM ((void *)0x7)
#define W 64
#define H 32

static size_t (*fake_copies)(void);
static int (*fake_registered)(void);
static char tools[4096];

static framesrv_producer *open_producer(const char *name, int memory, uint32_t width)
{
    framesrv_producer_options o = { .width = width, .height = H, .pix_fmt = FRAMESRV_PIX_YUV420P, .slots = 2, .memory = memory };
    framesrv_producer *p = NULL;
    CHECK_STATUS(framesrv_producer_open(&p, name, &o), FRAMESRV_OK);
    return p;
}

static framesrv_consumer *open_consumer(const char *name, int memory)
{
    framesrv_consumer_options o = { .attach_timeout_ms = 2000, .memory = memory };
    framesrv_consumer *c = NULL;
    CHECK_STATUS(framesrv_consumer_open(&c, name, &o), FRAMESRV_OK);
    return c;
}

/* Publishes the pattern of seq 1 on host stream `p`. */
static void publish_pattern(framesrv_producer *p)
{
    framesrv_frame *f = NULL;
    CHECK_STATUS(framesrv_producer_reserve(p, 1000, &f), FRAMESRV_OK);
    framesrv_pattern_fill(f);
    CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_OK);
}

/* host -> CUDA -> host in one process: the bytes, the copies, the registrations. */
static void round_trip(void)
{
    int registered_before = fake_registered();
    framesrv_producer *src = open_producer("src", FRAMESRV_MEMORY_HOST, W), *gpu = open_producer("gpu", FRAMESRV_MEMORY_CUDA, W);
    framesrv_producer *back = open_producer("back", FRAMESRV_MEMORY_HOST, W), *small = open_producer("small", FRAMESRV_MEMORY_CUDA, W / 2);
    framesrv_consumer *from_src = open_consumer("src", FRAMESRV_MEMORY_HOST), *from_gpu = open_consumer("gpu", FRAMESRV_MEMORY_CUDA);
    publish_pattern(src);
    framesrv_frame *in = NULL, *up = NULL, *down = NULL, *wrong = NULL, *cf = NULL;
    CHECK_STATUS(framesrv_consumer_next(from_src, 1000, &in), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_reserve_on(gpu, STREAM, 1000, &up), FRAMESRV_OK);
    size_t copies = fake_copies();
    CHECK_STATUS(framesrv_frame_copy_on(up, in, STREAM), FRAMESRV_OK);
    CHECK(fake_copies() - copies == 3, "one copy per plane of yuv420p (%zu)", fake_copies() - copies);
    CHECK(framesrv_frame_pinned(in) == 1, "the consumer's host pool is registered for the upload");
    CHECK(framesrv_frame_pinned(up) == 0, "a CUDA frame is not a pinned host frame");
    CHECK_STATUS(framesrv_producer_reserve_on(small, STREAM, 1000, &wrong), FRAMESRV_OK);
    CHECK_STATUS(framesrv_frame_copy_on(wrong, in, STREAM), FRAMESRV_E_INVALID);
    CHECK(strstr(framesrv_last_error(), "differ in geometry") != NULL && !strchr(framesrv_last_error(), '\n'), "%s",
          framesrv_last_error());
    CHECK_STATUS(framesrv_frame_copy_on(in, in, STREAM), FRAMESRV_E_INVALID);   /* a consumed frame is not a destination */
    CHECK_STATUS(framesrv_producer_abandon(small, wrong), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_publish_on(gpu, up, STREAM), FRAMESRV_OK);
    framesrv_frame_release(in);
    CHECK_STATUS(framesrv_consumer_next_on(from_gpu, STREAM, 1000, &cf), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_reserve(back, 1000, &down), FRAMESRV_OK);
    CHECK_STATUS(framesrv_frame_copy_on(down, cf, STREAM), FRAMESRV_OK);
    CHECK(framesrv_pattern_check(down) == 0, "the downloaded frame is the uploaded pattern (%llu bytes differ)",
          (unsigned long long)framesrv_pattern_check(down));
    CHECK(framesrv_frame_pinned(down) == 1, "the producer's host pool is registered for the download");
    CHECK(fake_registered() == registered_before + 2 + 3, "two host pools and three control segments registered (%d, %d before)",
          fake_registered(), registered_before);
    CHECK_STATUS(framesrv_frame_release_on(cf, STREAM), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_publish(back, down), FRAMESRV_OK);
    framesrv_consumer_close(from_gpu);
    framesrv_consumer_close(from_src);
    framesrv_producer_close(small);
    framesrv_producer_close(back);
    framesrv_producer_close(gpu);
    framesrv_producer_close(src);
    CHECK(fake_registered() == registered_before, "every registration undone with its pool (%d, %d before)", fake_registered(),
          registered_before);
}

/* framesrv_frame_write_on: host planes and device planes (the CUDA slot of a frame) into a reserved frame. */
static void write_planes(void)
{
    framesrv_producer *a = open_producer("wa", FRAMESRV_MEMORY_HOST, W), *g = open_producer("wg", FRAMESRV_MEMORY_CUDA, W);
    framesrv_producer *h = open_producer("wh", FRAMESRV_MEMORY_HOST, W);
    framesrv_consumer *c = open_consumer("wa", FRAMESRV_MEMORY_HOST);
    publish_pattern(a);
    framesrv_frame *in = NULL, *up = NULL, *down = NULL;
    CHECK_STATUS(framesrv_consumer_next(c, 1000, &in), FRAMESRV_OK);
    const framesrv_frame_info *info = framesrv_frame_info_of(in);
    uint64_t host[3], device[3];
    size_t pitch[3];
    for (int p = 0; p < 3; p++) host[p] = (uintptr_t)info->planes[p].data, pitch[p] = info->planes[p].stride;
    CHECK_STATUS(framesrv_producer_reserve_on(g, STREAM, 1000, &up), FRAMESRV_OK);
    size_t copies = fake_copies();
    CHECK_STATUS(framesrv_frame_write_on(up, FRAMESRV_MEMORY_HOST, host, pitch, 3, STREAM), FRAMESRV_OK);
    CHECK(fake_copies() - copies == 3, "one copy per plane");
    CHECK_STATUS(framesrv_frame_write_on(up, FRAMESRV_MEMORY_HOST, host, pitch, 2, STREAM), FRAMESRV_E_INVALID);
    size_t short_pitch[3] = { 1, 1, 1 };
    CHECK_STATUS(framesrv_frame_write_on(up, FRAMESRV_MEMORY_HOST, host, short_pitch, 3, STREAM), FRAMESRV_E_INVALID);
    for (int p = 0; p < 3; p++) {
        framesrv_device_plane d;
        CHECK_STATUS(framesrv_frame_device_plane(up, (uint32_t)p, &d), FRAMESRV_OK);
        device[p] = d.ptr, pitch[p] = d.pitch;
    }
    CHECK_STATUS(framesrv_producer_reserve(h, 1000, &down), FRAMESRV_OK);
    CHECK_STATUS(framesrv_frame_write_on(down, FRAMESRV_MEMORY_CUDA, device, pitch, 3, STREAM), FRAMESRV_E_MEMORY);
    /* fakecuda's device memory is this process's: the device planes read back as host ones */
    CHECK_STATUS(framesrv_frame_write_on(down, FRAMESRV_MEMORY_HOST, device, pitch, 3, STREAM), FRAMESRV_OK);
    CHECK(framesrv_pattern_check(down) == 0, "the pattern went through the device planes");
    CHECK_STATUS(framesrv_producer_abandon(h, down), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_abandon(g, up), FRAMESRV_OK);
    framesrv_frame_release(in);
    framesrv_consumer_close(c);
    framesrv_producer_close(h);
    framesrv_producer_close(g);
    framesrv_producer_close(a);
}

/* framesrv_frame_read_on: a CUDA frame's planes into the caller's host memory (one copy per
 * plane, at the caller's pitch), the same bytes as the host frame it was uploaded from; a
 * host frame's by the CPU; wrong counts and short pitches refused. */
static void read_planes(void)
{
    framesrv_producer *a = open_producer("ra", FRAMESRV_MEMORY_HOST, W), *g = open_producer("rg", FRAMESRV_MEMORY_CUDA, W);
    framesrv_consumer *c = open_consumer("ra", FRAMESRV_MEMORY_HOST), *cg = open_consumer("rg", FRAMESRV_MEMORY_CUDA);
    publish_pattern(a);
    framesrv_frame *in = NULL, *up = NULL, *cf = NULL;
    CHECK_STATUS(framesrv_consumer_next(c, 1000, &in), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_reserve_on(g, STREAM, 1000, &up), FRAMESRV_OK);
    CHECK_STATUS(framesrv_frame_copy_on(up, in, STREAM), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_publish_on(g, up, STREAM), FRAMESRV_OK);
    CHECK_STATUS(framesrv_consumer_next_on(cg, STREAM, 1000, &cf), FRAMESRV_OK);
    const framesrv_frame_info *info = framesrv_frame_info_of(in);
    enum { PITCH = W + 40 };   /* wider than any row: the caller's pitch is kept */
    static uint8_t memory[3][PITCH * H];
    memset(memory, 0xEE, sizeof memory);
    uint64_t planes[3];
    size_t pitches[3] = { PITCH, PITCH, PITCH };
    for (int p = 0; p < 3; p++) planes[p] = (uintptr_t)memory[p];
    size_t copies = fake_copies();
    CHECK_STATUS(framesrv_frame_read_on(cf, planes, pitches, 3, STREAM), FRAMESRV_OK);
    CHECK(fake_copies() - copies == 3, "one copy per plane (%zu)", fake_copies() - copies);
    for (int p = 0; p < 3; p++) {
        const framesrv_plane *pl = &info->planes[p];
        for (uint32_t y = 0; y < pl->height; y++) {
            CHECK(memcmp(memory[p] + y * PITCH, pl->data + y * pl->stride, pl->row_bytes) == 0, "plane %d row %u as uploaded", p, y);
            CHECK(memory[p][y * PITCH + pl->row_bytes] == 0xEE, "plane %d row %u: nothing written past the row", p, y);
        }
    }
    memset(memory, 0, sizeof memory);
    copies = fake_copies();
    CHECK_STATUS(framesrv_frame_read_on(in, planes, pitches, 3, STREAM), FRAMESRV_OK);
    CHECK(fake_copies() == copies, "a host frame is read by the CPU");
    CHECK(memcmp(memory[0], info->planes[0].data, info->planes[0].row_bytes) == 0, "the host frame's first row");
    CHECK_STATUS(framesrv_frame_read_on(cf, planes, pitches, 2, STREAM), FRAMESRV_E_INVALID);
    size_t short_pitch[3] = { 1, 1, 1 };
    CHECK_STATUS(framesrv_frame_read_on(cf, planes, short_pitch, 3, STREAM), FRAMESRV_E_INVALID);
    CHECK_STATUS(framesrv_frame_read_on(NULL, planes, pitches, 3, STREAM), FRAMESRV_E_INVALID);
    CHECK_STATUS(framesrv_frame_release_on(cf, STREAM), FRAMESRV_OK);
    framesrv_frame_release(in);
    framesrv_consumer_close(cg);
    framesrv_consumer_close(c);
    framesrv_producer_close(g);
    framesrv_producer_close(a);
}

/* Host -> host: rows copied by the CPU, no CUDA call. */
static void host_to_host(void)
{
    framesrv_producer *a = open_producer("ha", FRAMESRV_MEMORY_HOST, W), *b = open_producer("hb", FRAMESRV_MEMORY_HOST, W);
    framesrv_consumer *c = open_consumer("ha", FRAMESRV_MEMORY_HOST);
    publish_pattern(a);
    framesrv_frame *in = NULL, *out = NULL;
    CHECK_STATUS(framesrv_consumer_next(c, 1000, &in), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_reserve(b, 1000, &out), FRAMESRV_OK);
    size_t copies = fake_copies();
    CHECK_STATUS(framesrv_frame_copy_on(out, in, NULL), FRAMESRV_OK);
    CHECK(fake_copies() == copies && framesrv_pattern_check(out) == 0, "host rows copied without CUDA");
    framesrv_frame_release(in);
    CHECK_STATUS(framesrv_producer_abandon(b, out), FRAMESRV_OK);
    framesrv_consumer_close(c);
    framesrv_producer_close(b);
    framesrv_producer_close(a);
}

/* framesrv's own commands around the stages (cuda_stages.sh): a decoded clip through upload
 * and download, its framemd5 equal to the host path's and to ffmpeg's. */
static void stages(void)
{
    const char *f = getenv("FRAMESRV");
    if (!f || !*f) f = "../../.build/debug/framesrv";
    if (access(f, X_OK) != 0 || system("ffmpeg -version > /dev/null 2>&1") != 0) {
        printf("test_cuda_copy: stages skipped (needs the Swift framesrv ($FRAMESRV) and ffmpeg)\n");
        return;
    }
    char command[16384];
    snprintf(command, sizeof command,
             "set -e; d=$(mktemp -d /tmp/framesrv-stages.XXXXXX); trap 'rm -rf \"$d\"' EXIT; "
             "ffmpeg -v error -f lavfi -i testsrc2=size=96x64:rate=25 -frames:v 30 -pix_fmt yuv420p -c:v libx264 \"$d/clip.mp4\"; "
             "ffmpeg -v error -i \"$d/clip.mp4\" -f framemd5 \"$d/ffmpeg.framemd5\"; "
             "timeout 120 '%s/../tests/cuda_stages.sh' '%s' '%s' \"$d/clip.mp4\" \"$d/ffmpeg.framemd5\"", tools, f, tools);
    char *sh[] = {"/bin/bash", "-c", command, NULL};
    pid_t pid = fork();
    if (pid == 0) {
        execv(sh[0], sh);
        _exit(127);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "cuda_stages.sh: the chain framesrv produce -> upload -> download -> "
          "sink (status %d)", status);
}

/* Real processes: produce -> upload -> download -> consume, 100 frames, the pattern checked. */
static void tools_chain(void)
{
    char command[16384];
    snprintf(command, sizeof command,
             "T='%s' && ( \"$T/framesrv-cuda\" download --in chain-gpu --out chain-back --wait-for 1 --wait 30 > /dev/null & "
             "\"$T/framesrv-cuda\" upload --in chain --out chain-gpu --wait-for 1 --wait 30 > /dev/null & "
             "\"$T/framesrv-produce\" --out chain --size 64x32 --pix-fmt nv12 --frames 100 --wait-for 1 > /dev/null & "
             "\"$T/framesrv-consume\" --in chain-back --verify-pattern --wait 30; s=$?; wait; exit $s )", tools);
    FILE *out = popen(command, "r");
    char line[512] = "";
    if (out) {
        if (!fgets(line, sizeof line, out)) line[0] = '\0';
        int status = pclose(out);
        CHECK(status == 0, "the chain's consumer exited %d", status);
    }
    CHECK(strstr(line, "received 100 frames, first 1, last 100, corrupt 0") != NULL, "consume said: %s", line);
}

int main(int argc, char **argv)
{
    (void)argc;
    char self[4096], lib[4200];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(lib, sizeof lib, "%s/libfakecuda.so", dirname(self));
    char *dir = realpath(self, NULL);
    snprintf(tools, sizeof tools, "%s/..", dir ? dir : ".");
    free(dir);
    setenv("FRAMESRV_LIBCUDA", lib, 1);
    void *fake = dlopen(lib, RTLD_NOW);
    fake_copies = fake ? (size_t (*)(void))dlsym(fake, "fakecuda_copies") : NULL;
    fake_registered = fake ? (int (*)(void))dlsym(fake, "fakecuda_registered") : NULL;
    if (!fake_copies || !fake_registered) {
        fprintf(stderr, "test_cuda_copy: cannot load %s\n", lib);
        return 2;
    }
    check_runtime_dir();
    round_trip();
    host_to_host();
    write_planes();
    read_planes();
    tools_chain();
    stages();
    return check_exit("test_cuda_copy");
}
