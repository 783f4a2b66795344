/*
 * gpu_suite.c: the GPU suite (scripts/test-gpu): real processes, a CUDA producer
 * (gpu_produce) and CUDA consumers (gpu_consume) built on libframesrv, run once with stream
 * memory operations and once with FRAMESRV_CUDA_NO_MEMOPS=1 (PROTOCOL.md 4.5 step 4):
 *   write before read    a slow writer kernel, two verifying consumers, 10,000 frames;
 *   read before recycle  2 slots, a slow reader kernel released while it still reads;
 *   consumer SIGKILL     100 consumers killed mid-kernel beside a verifying survivor;
 *                        device memory flat (cuMemGetInfo);
 *   producer SIGKILL     consumers notice, drain, unmap, and read the next producer.
 * Each scenario prints its figures; controls (no fence) show that the checks can fail.
 *   gpu_suite BIN_DIR    (BIN_DIR holds gpu_produce and gpu_consume)
 */
#include "gpu_proc.h"
#include "CFrameServerCUDA.h"

#include <signal.h>
#include <string.h>
#include <time.h>

#define MIB (1024.0 * 1024.0)
#define SLACK (64ull << 20)   /* what device memory may differ by between two readings */

static char produce[4096], consume[4096];
static const char *mode;
static int passed, failed;

static void verdict(bool ok, const char *what)
{
    printf("gpu: %s [%s]: %s\n", what, mode, ok ? "ok" : "FAILED");
    fflush(stdout);
    ok ? passed++ : failed++;
}

/* Device memory free now (cuMemGetInfo in this process's primary context). */
static unsigned long long free_memory(void)
{
    static fs_cuda_context ctx;
    const fs_cuda_api *cu = fs_cuda_load() ? NULL : fs_cuda_api_get();
    size_t free_bytes = 0, total = 0;
    if (!cu || (!ctx && cu->cuDevicePrimaryCtxRetain(&ctx, 0) != FS_CU_SUCCESS)) return 0;
    cu->cuCtxPushCurrent(ctx);
    cu->cuMemGetInfo(&free_bytes, &total);
    cu->cuCtxPopCurrent(&ctx);
    return free_bytes;
}

/* Free memory once it is back within SLACK of `baseline` (teardown is asynchronous), or after 10 s. */
static unsigned long long settled(unsigned long long baseline)
{
    unsigned long long now = free_memory();
    for (int i = 0; i < 100 && now + SLACK < baseline; i++, usleep(100000)) now = free_memory();
    return now;
}

static proc producer(const char *name, const char *frames, const char *w, const char *h, const char *slots, const char *sleep_ns,
                     const char *wait_for)
{
    char *argv[] = { produce, (char *)name, (char *)frames, (char *)w, (char *)h, (char *)slots, (char *)sleep_ns, (char *)wait_for, NULL };
    proc p = proc_start(argv);
    proc_line(&p, "ready", 30000, NULL, 0);
    return p;
}

static proc consumer(const char *name, const char *sleep_ns, const char *max, const char *flag1, const char *flag2)
{
    char *argv[] = { consume, (char *)name, "lossless", (char *)sleep_ns, (char *)max, (char *)flag1, (char *)flag2, NULL };
    return proc_start(argv);
}

/* The producer's "published N reclaimed R" after it ended. */
static void producer_end(proc *p, int timeout_s, unsigned long long *published, unsigned long long *reclaimed)
{
    char line[256] = "";
    *published = *reclaimed = 0;
    if (proc_line(p, "published", timeout_s * 1000, line, sizeof line)) sscanf(line, "published %llu reclaimed %llu", published, reclaimed);
    proc_finish(p, 10);
}

static void write_before_read(void)
{
    proc p = producer("wbr", "10000", "1024", "256", "4", "2000", "2");
    proc a = consumer("wbr", "0", "0", NULL, NULL), b = consumer("wbr", "0", "0", NULL, NULL);
    unsigned long long published, reclaimed;
    producer_end(&p, 90, &published, &reclaimed);
    result ra = proc_result(&a, 60), rb = proc_result(&b, 60);
    printf("gpu: write before read [%s]: published %llu (1024x256 gray, 4 slots, writer sleeps 2 us a row); consumer A %llu frames, "
           "%llu gaps, %llu mismatching bytes, %llu torn frames; consumer B %llu, %llu, %llu, %llu\n", mode, published, ra.frames[0],
           ra.gaps[0], ra.mismatches, ra.bad[0], rb.frames[0], rb.gaps[0], rb.mismatches, rb.bad[0]);
    verdict(published == 10000 && ra.frames[0] == 10000 && rb.frames[0] == 10000 && ra.gaps[0] + rb.gaps[0] == 0 &&
            ra.mismatches + rb.mismatches == 0 && ra.ok && rb.ok, "write before read");
    /* Control: the kernel on a stream that did not wait for the ready fence. */
    p = producer("wbr-control", "300", "1024", "256", "4", "2000", "1");
    a = consumer("wbr-control", "0", "0", "nofence", NULL);
    producer_end(&p, 60, &published, &reclaimed);
    ra = proc_result(&a, 60);
    printf("gpu: control [%s]: without the wait for the ready fence %llu of %llu frames were torn (%llu bytes)\n", mode, ra.bad[0],
           ra.frames[0], ra.mismatches);
}

static void read_before_recycle(void)
{
    proc p = producer("rbr", "2000", "1024", "256", "2", "0", "1");
    proc a = consumer("rbr", "4000", "0", NULL, NULL);
    unsigned long long published, reclaimed;
    producer_end(&p, 90, &published, &reclaimed);
    result ra = proc_result(&a, 60);
    printf("gpu: read before recycle [%s]: published %llu (2 slots, reader sleeps 4 us a row and releases at once); consumer %llu "
           "frames, %llu gaps, %llu mismatching bytes, %llu overwritten frames\n", mode, published, ra.frames[0], ra.gaps[0],
           ra.mismatches, ra.bad[0]);
    verdict(published == 2000 && ra.frames[0] == 2000 && ra.gaps[0] == 0 && ra.mismatches == 0 && ra.ok, "read before recycle");
    p = producer("rbr-control", "300", "1024", "256", "2", "0", "1");
    a = consumer("rbr-control", "4000", "0", "cpurelease", NULL);
    producer_end(&p, 60, &published, &reclaimed);
    ra = proc_result(&a, 60);
    printf("gpu: control [%s]: released on the CPU while the kernel read, %llu of %llu frames were overwritten (%llu bytes)\n", mode,
           ra.bad[0], ra.frames[0], ra.mismatches);
}

/* Four victims at a time, each killed 5..40 ms into its kernels. Returns how many got to reading. */
static unsigned long long kill_four(void)
{
    proc v[4];
    unsigned long long reading = 0;
    for (int i = 0; i < 4; i++) v[i] = consumer("kill", "8000", "0", "victim", NULL);
    for (int i = 0; i < 4; i++) {
        reading += proc_line(&v[i], "reading", 30000, NULL, 0);
        usleep(5000 + (useconds_t)(rand() % 35000));
        kill(v[i].pid, SIGKILL);
    }
    for (int i = 0; i < 4; i++) proc_finish(&v[i], 10);
    return reading;
}

static void consumer_kills(void)
{
    proc p = producer("kill", "0", "1024", "256", "6", "0", "1");
    proc s = consumer("kill", "0", "0", NULL, NULL);
    usleep(1500000);
    unsigned long long before = free_memory(), kills = 0, reading = 0;
    for (; kills < 100; kills += 4) reading += kill_four();
    unsigned long long after = settled(before), published, reclaimed;
    kill(p.pid, SIGTERM);
    producer_end(&p, 60, &published, &reclaimed);
    result rs = proc_result(&s, 60);
    printf("gpu: consumer SIGKILL [%s]: %llu consumers killed mid-kernel (%llu had queued a kernel), producer reclaimed %llu; published "
           "%llu; survivor %llu frames, %llu gaps, %llu mismatching bytes; free device memory %.1f MiB before, %.1f MiB after (slack %llu MiB)\n",
           mode, kills, reading, reclaimed, published, rs.frames[0], rs.gaps[0], rs.mismatches, before / MIB, after / MIB, SLACK >> 20);
    verdict(reading == 100 && reclaimed == 100 && published > 0 && rs.frames[0] == published && rs.gaps[0] == 0 && rs.mismatches == 0 &&
            rs.ok && after + SLACK >= before, "consumer SIGKILL x100");
}

static void producer_kill(void)
{
    proc a = consumer("pk", "0", "0", "reopen", NULL), b = consumer("pk", "0", "0", "reopen", NULL);
    usleep(2000000);
    unsigned long long f0 = free_memory(), published, reclaimed;
    proc p1 = producer("pk", "0", "4096", "4096", "16", "0", "2");   /* 16 slots of 16 MiB */
    usleep(1500000);
    unsigned long long f1 = free_memory();
    kill(p1.pid, SIGKILL);
    proc_finish(&p1, 10);
    bool gone = proc_line(&a, "gone", 30000, NULL, 0) && proc_line(&b, "gone", 30000, NULL, 0);
    usleep(500000);
    unsigned long long f2 = settled(f0);
    proc p2 = producer("pk", "300", "4096", "4096", "16", "0", "2");
    producer_end(&p2, 120, &published, &reclaimed);
    result ra = proc_result(&a, 60), rb = proc_result(&b, 60);
    unsigned long long f3 = settled(f0);
    printf("gpu: producer SIGKILL [%s]: free device memory %.1f MiB with the consumers, %.1f with the first producer's 256 MiB pool, "
           "%.1f once it was killed and the consumers had reopened, %.1f at the end; consumer A read %llu frames of the first (%llu torn, "
           "the first at %llu of %llu; its stream had finished every frame below %llu), %llu of the second (%llu torn); consumer B %llu "
           "(%llu, %llu of %llu, below %llu), %llu (%llu); second producer published %llu\n", mode, f0 / MIB, f1 / MIB, f2 / MIB,
           f3 / MIB, ra.frames[0], ra.bad[0], ra.min_bad[0], ra.last[0], ra.first_unready, ra.frames[1], ra.bad[1], rb.frames[0],
           rb.bad[0], rb.min_bad[0], rb.last[0], rb.first_unready, rb.frames[1], rb.bad[1], published);
    /* Only frames the dead producer's stream had not finished may be torn: none below first_unready,
     * which the consumer that found the fences unfinished reports (they are the stream's, shared). */
    unsigned long long bound = ra.first_unready && (!rb.first_unready || ra.first_unready < rb.first_unready) ? ra.first_unready
                                                                                                              : rb.first_unready;
    bool tail_only = (ra.bad[0] == 0 || (bound && ra.min_bad[0] >= bound)) && (rb.bad[0] == 0 || (bound && rb.min_bad[0] >= bound));
    verdict(gone && ra.ok && rb.ok && ra.frames[0] > 0 && rb.frames[0] > 0 && tail_only && ra.frames[1] == 300 && rb.frames[1] == 300 &&
            ra.bad[1] + rb.bad[1] + ra.gaps[1] + rb.gaps[1] == 0 && published == 300 && f1 + (200ull << 20) < f0 && f2 + SLACK >= f0 &&
            f3 + SLACK >= f0, "producer SIGKILL");
}

int main(int argc, char **argv)
{
    if (argc != 2) GPU_DIE("usage: gpu_suite BIN_DIR");
    snprintf(produce, sizeof produce, "%s/gpu_produce", argv[1]);
    snprintf(consume, sizeof consume, "%s/gpu_consume", argv[1]);
    srand((unsigned)time(NULL));
    if (fs_cuda_load()) GPU_DIE("gpu_suite: %s", fs_cuda_load());
    uint64_t start = proc_now_ms();
    const fs_cuda_api *cu = fs_cuda_api_get();
    int driver = 0, v1 = -1, v2 = -1, vmm = -1;
    char name[128] = "";
    cu->cuDriverGetVersion(&driver);
    cu->cuDeviceGetName(name, sizeof name, 0);
    cu->cuDeviceGetAttribute(&v1, FS_CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, 0);
    cu->cuDeviceGetAttribute(&v2, FS_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 0);
    cu->cuDeviceGetAttribute(&vmm, FS_CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0);
    printf("gpu: device 0 %s, driver CUDA %d.%d; CAN_USE_STREAM_MEM_OPS_V1 %d, CAN_USE_64_BIT_STREAM_MEM_OPS %d, POSIX fd handles %d\n", name,
           driver / 1000, driver % 1000 / 10, v1, v2, vmm);
    fflush(stdout);
    const char *modes[] = { "memops", "fallback" }, *only = getenv("FRAMESRV_GPU_MODE");   /* one of them, else both */
    for (int m = 0; m < 2; m++) {
        mode = modes[m];
        if (only && *only && strcmp(only, mode) != 0) continue;
        if (m == 1) setenv("FRAMESRV_CUDA_NO_MEMOPS", "1", 1);
        write_before_read();
        read_before_recycle();
        consumer_kills();
        producer_kill();
        printf("gpu: [%s] done after %llu s\n", mode, (unsigned long long)(proc_now_ms() - start) / 1000);
    }
    printf("gpu_suite: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
