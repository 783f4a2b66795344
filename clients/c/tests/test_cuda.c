/*
 * test_cuda.c: CUDA streams (PROTOCOL.md 4.5) on a machine without a GPU, through the
 * stand-in driver tests/fakecuda (FRAMESRV_LIBCUDA): the control segment's CUDA fields and
 * its fence table, the headers-only pool, NAME.cuda and its leftover, the refusals of a host
 * consumer meeting a CUDA stream and of a CUDA consumer meeting a host one (one line each, no
 * entry claimed), frames through device planes with their ready and release fences, a
 * producer that waits for a reader's release fence (on a stream and on the CPU), a consumer
 * that polls a ready fence about to land instead of queueing a wait, and no mapping left at
 * the end. The driver missing altogether: test_cuda_peers.c.
 */
#include "check.h"
#include "common.h"
#include <framesrv.h>

#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define SLOTS 4u
#define W 64u
#define H 48u
#define STREAM ((void *)0x5)   /* the fake runs every stream's work at once: any value is a stream */

static char dir[64];
static size_t (*mapped_bytes)(void);
static uintptr_t (*last_stream)(int write);

static fs_control *map_ctl(const char *name, size_t *size)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s.ctl", dir, name);
    void *base = NULL;
    if (fsi_map_file(path, true, false, &base, size) != FRAMESRV_OK) return NULL;
    return base;
}

static framesrv_producer *open_producer(const char *name, int memory)
{
    framesrv_producer_options o = { .width = W, .height = H, .pix_fmt = FRAMESRV_PIX_YUV420P, .slots = SLOTS, .memory = memory };
    framesrv_producer *p = NULL;
    CHECK_STATUS(framesrv_producer_open(&p, name, &o), FRAMESRV_OK);
    return p;
}

static int open_polling_consumer(const char *name, int memory, uint32_t poll_us, framesrv_consumer **c)
{
    framesrv_consumer_options o = { .mode = FRAMESRV_LOSSLESS, .attach_timeout_ms = 2000, .memory = memory, .poll_us = poll_us };
    *c = NULL;
    return framesrv_consumer_open(c, name, &o);
}

static int open_consumer(const char *name, int memory, framesrv_consumer **c) { return open_polling_consumer(name, memory, 0, c); }

/* The pattern of framesrv_pattern_fill, through a frame's device planes (fake: host memory). */
static uint64_t pattern(framesrv_frame *f, bool fill)
{
    uint64_t bad = 0, seq = framesrv_frame_info_of(f)->seq;
    for (uint32_t p = 0; p < framesrv_frame_info_of(f)->plane_count; p++) {
        framesrv_device_plane d;
        CHECK_STATUS(framesrv_frame_device_plane(f, p, &d), FRAMESRV_OK);
        for (uint32_t y = 0; y < d.height; y++)
            for (size_t x = 0; x < d.row_bytes; x++) {
                uint8_t *b = (uint8_t *)(uintptr_t)(d.ptr + y * d.pitch + x), v = (uint8_t)(x + 2 * y + 3 * seq + 61 * p);
                if (fill) *b = v;
                else bad += *b != v;
            }
    }
    return bad;
}

static void publish(framesrv_producer *p, uint64_t expect_seq)
{
    framesrv_frame *f = NULL;
    CHECK_STATUS(framesrv_producer_reserve_on(p, STREAM, 1000, &f), FRAMESRV_OK);
    if (!f) return;
    CHECK(framesrv_frame_info_of(f)->seq == expect_seq && framesrv_frame_info_of(f)->planes[0].data == NULL,
          "reserved %llu, data %p", (unsigned long long)framesrv_frame_info_of(f)->seq, (void *)framesrv_frame_info_of(f)->planes[0].data);
    // The host pattern helpers leave device memory alone (its data pointers are NULL).
    framesrv_pattern_fill(f);
    CHECK(framesrv_pattern_check(f) == UINT64_MAX, "pattern_check of a CUDA frame");
    pattern(f, true);
    CHECK_STATUS(framesrv_producer_publish_on(p, f, STREAM), FRAMESRV_OK);
}

static void layout(const char *name)
{
    size_t size = 0;
    fs_control *c = map_ctl(name, &size);
    CHECK(c != NULL, "map %s.ctl", name);
    if (!c) return;
    CHECK(c->memory == FS_MEMORY_CUDA && c->fence_offset == fs_control_fence_offset(SLOTS) && size == fs_control_size_cuda(SLOTS),
          "memory %u fence_offset %u size %zu", c->memory, c->fence_offset, size);
    CHECK((uint8_t)c->device_uuid[0] == 0xfa && (uint8_t)c->device_uuid[1] == 0xce && c->device_ordinal == 0, "device uuid");
    CHECK(fs_load_u64(&c->epoch) == 1 && c->device_slot_stride % 4096 == 0 && c->device_slot_stride >= W * H * 3 / 2 &&
          c->device_pool_size % 65536 == 0 && c->device_pool_size >= SLOTS * c->device_slot_stride, "stride %llu size %llu",
          (unsigned long long)c->device_slot_stride, (unsigned long long)c->device_pool_size);
    char path[160];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s.pool.1", dir, name);
    CHECK(stat(path, &st) == 0 && st.st_size == SLOTS * FS_CUDA_HEADER_SLOT, "headers-only pool: %lld bytes", (long long)st.st_size);
    snprintf(path, sizeof path, "%s/%s.cuda", dir, name);
    CHECK(stat(path, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0600, "NAME.cuda mode 0%o", st.st_mode & 0777);
    munmap(c, size);
}

/* A host consumer of a CUDA stream and a CUDA consumer of a host stream: refused in one line
 * before they claim an entry. */
static void refusals(const char *cuda_name, const char *host_name)
{
    framesrv_consumer *c;
    CHECK_STATUS(open_consumer(cuda_name, FRAMESRV_MEMORY_HOST, &c), FRAMESRV_E_MEMORY);
    const char *e = framesrv_last_error();
    CHECK(strstr(e, cuda_name) && strstr(e, "CUDA memory of device GPU-face0cda-0102-0304-0506-0708090a0b0c") &&
          strstr(e, "FRAMESRV_MEMORY_CUDA") && strstr(e, "framesrv-cuda download --in") && !strchr(e, '\n'), "host consumer: %s", e);
    CHECK_STATUS(open_consumer(host_name, FRAMESRV_MEMORY_CUDA, &c), FRAMESRV_E_MEMORY);
    e = framesrv_last_error();
    CHECK(strstr(e, host_name) && strstr(e, "host memory") && strstr(e, "FRAMESRV_MEMORY_HOST") && !strchr(e, '\n'), "cuda consumer: %s", e);
    size_t size;
    fs_control *ctl = map_ctl(cuda_name, &size);
    for (uint32_t i = 0; ctl && i < FS_MAX_CONSUMERS; i++)
        CHECK(fs_control_consumer(ctl, i)->pid == 0, "entry %u claimed by a refused consumer", i);
    if (ctl) munmap(ctl, size);
    CHECK_STATUS(open_consumer(host_name, FRAMESRV_MEMORY_HOST, &c), FRAMESRV_OK);
    framesrv_frame *f = NULL;
    CHECK_STATUS(framesrv_consumer_next_on(c, STREAM, 0, &f), FRAMESRV_E_MEMORY);
    framesrv_consumer_close(c);
    framesrv_producer *p = open_producer("plain-wait", FRAMESRV_MEMORY_HOST);
    CHECK_STATUS(framesrv_producer_reserve(p, 1000, &f), FRAMESRV_OK);
    CHECK_STATUS(framesrv_frame_wait_on(f, STREAM), FRAMESRV_E_MEMORY);
    CHECK_STATUS(framesrv_producer_publish_keep_on(p, f, STREAM), FRAMESRV_E_MEMORY);
    framesrv_producer_close(p);
}

/* framesrv_frame_wait_on: a second stream of a reserved and of a consumed frame; and
 * publish_keep_on, whose slot is not reused until the frame is released. */
static void second_stream(framesrv_producer *p, framesrv_consumer *c)
{
    framesrv_frame *f = NULL, *r = NULL;
    while (framesrv_consumer_next_on(c, STREAM, 0, &f) == FRAMESRV_OK) framesrv_frame_release_on(f, STREAM);
    CHECK_STATUS(framesrv_producer_reserve_on(p, STREAM, 1000, &r), FRAMESRV_OK);
    if (!r) return;
    uint64_t seq = framesrv_frame_info_of(r)->seq;
    CHECK_STATUS(framesrv_frame_wait_on(r, (void *)0x7), FRAMESRV_OK);
    pattern(r, true);
    CHECK_STATUS(framesrv_producer_publish_keep_on(p, r, STREAM), FRAMESRV_OK);
    CHECK_STATUS(framesrv_frame_wait_on(r, (void *)0x7), FRAMESRV_OK);   /* kept: nothing to wait for */
    CHECK_STATUS(framesrv_consumer_next_on(c, STREAM, 1000, &f), FRAMESRV_OK);
    CHECK(f && framesrv_frame_info_of(f)->seq == seq, "frame %llu after publish_keep_on", (unsigned long long)seq);
    if (f) CHECK_STATUS(framesrv_frame_wait_on(f, (void *)0x7), FRAMESRV_OK);
    if (f) CHECK_STATUS(framesrv_frame_release_on(f, (void *)0x7), FRAMESRV_OK);
    framesrv_frame_release(r);   /* the producer's own hold */
}

/* us 0: 200 ms; after_wait_on: not before a stream wait on it was queued (at most 10 s). */
typedef struct delayed { uint64_t *word, value; unsigned us; uintptr_t after_wait_on; } delayed;
static void *write_later(void *arg)
{
    delayed *d = arg;
    usleep(d->us ? d->us : 200000);
    for (int i = 0; d->after_wait_on && last_stream(0) != d->after_wait_on && i < 10000; i++) usleep(1000);
    fs_fence_store(d->word, d->value);
    return NULL;
}

/* Read before recycle: the producer's reserve of a slot waits for its reader's release fence
 * (rewound here as if the reader's stream had not got there yet), on a stream or the CPU. */
static void waits_for_release(framesrv_producer *p, fs_control *ctl, uint32_t slot, uint32_t entry, uint64_t seq)
{
    fs_slot_fence *fence = fs_control_fence(ctl, slot);
    fs_fence_store(&fence->release[entry], seq - 1);
    fs_slot_add_reader(fs_control_slot(ctl, slot), 1ull << entry);
    delayed d = { &fence->release[entry], seq, 0, 0 };
    pthread_t t;
    pthread_create(&t, NULL, write_later, &d);
    uint64_t start = fsi_monotonic_ns();
    publish(p, (fs_load_u64(&ctl->latest) >> 8) + 1);
    uint64_t waited = fsi_monotonic_ns() - start;
    pthread_join(t, NULL);
    CHECK(waited >= 150000000ull, "the reserve of slot %u waited %llu ms for the release fence", slot, (unsigned long long)(waited / 1000000));
}

static void frames(const char *name, bool memops)
{
    framesrv_producer *p = open_producer(name, FRAMESRV_MEMORY_CUDA);
    if (!p) return;
    framesrv_consumer *c;
    CHECK_STATUS(open_consumer(name, FRAMESRV_MEMORY_CUDA, &c), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 2000), FRAMESRV_OK);
    publish(p, 1);
    layout(name);   /* the first reserve made epoch 1 */
    framesrv_frame *f = NULL;
    CHECK_STATUS(framesrv_consumer_next_on(c, STREAM, 1000, &f), FRAMESRV_OK);
    framesrv_stream_info info;
    CHECK_STATUS(framesrv_consumer_stream_info(c, &info), FRAMESRV_OK);
    framesrv_frame_release_on(f, STREAM);
    CHECK(info.memory == FRAMESRV_MEMORY_CUDA && !strcmp(info.device_uuid, "GPU-face0cda-0102-0304-0506-0708090a0b0c") &&
          info.device_ordinal == 0 && info.device_read_only == 1, "stream info: %d %s %d ro %d", info.memory, info.device_uuid,
          info.device_ordinal, info.device_read_only);
    size_t size;
    fs_control *ctl = map_ctl(name, &size);
    uint32_t entry = 0;
    for (uint64_t seq = 2; seq <= 3 * SLOTS && ctl; seq++) {
        publish(p, seq);
        CHECK_STATUS(framesrv_consumer_next_on(c, STREAM, 1000, &f), FRAMESRV_OK);
        if (!f) break;
        uint32_t slot = (uint32_t)(fs_load_u64(&ctl->latest) & 0xff);
        CHECK(framesrv_frame_info_of(f)->seq == seq && pattern(f, false) == 0, "frame %llu intact", (unsigned long long)seq);
        CHECK(fs_fence_load(&fs_control_fence(ctl, slot)->ready) == seq, "ready fence of slot %u", slot);
        CHECK(fs_load_u64(&fs_control_slot(ctl, slot)->readers) != 0, "readers bit of slot %u", slot);
        entry = (uint32_t)__builtin_ctzll(fs_load_u64(&fs_control_slot(ctl, slot)->readers));
        CHECK_STATUS(framesrv_frame_release_on(f, STREAM), FRAMESRV_OK);
        CHECK(fs_fence_load(&fs_control_fence(ctl, slot)->release[entry]) == seq, "release fence of slot %u (memops %d)", slot, memops);
    }
    if (ctl) {   /* the next reserve takes the slot after the newest frame's */
        uint32_t next = ((uint32_t)(fs_load_u64(&ctl->latest) & 0xff) + 1) % SLOTS;
        waits_for_release(p, ctl, next, entry, fs_peek_u64(&fs_control_slot(ctl, next)->seq));
    }
    second_stream(p, c);
    /* A bigger format: a new epoch, a new allocation; the old one goes once nothing holds it. */
    CHECK_STATUS(framesrv_producer_change_format(p, 2 * W, 2 * H, FRAMESRV_PIX_YUV420P), FRAMESRV_OK);
    while (framesrv_consumer_next_on(c, STREAM, 200, &f) == FRAMESRV_OK) framesrv_frame_release_on(f, STREAM);
    publish(p, 3 * SLOTS + 3);   /* after the loop's, waits_for_release's and second_stream's */
    CHECK_STATUS(framesrv_consumer_next_on(c, STREAM, 1000, &f), FRAMESRV_OK);
    CHECK(f && framesrv_frame_info_of(f)->epoch == 2 && framesrv_frame_info_of(f)->width == 2 * W && pattern(f, false) == 0, "epoch 2 frame");
    framesrv_frame_release_on(f, STREAM);
    if (ctl) munmap(ctl, size);
    framesrv_consumer_close(c);
    framesrv_producer_close(p);
    char path[160];
    snprintf(path, sizeof path, "%s/%s.cuda", dir, name);
    CHECK(access(path, F_OK) != 0, "NAME.cuda removed at close");
    CHECK(mapped_bytes() == 0, "device memory still mapped after close: %zu bytes", mapped_bytes());
}

/* next_on's poll of a ready fence not yet written (consumer_cuda.c spin_for_ready): a consumer
 * with $FRAMESRV_READY_SPIN_US `spin_us` (NULL: unset) and `poll_us` takes a frame whose ready
 * fence lands `later_ms` after next_on began or (`after_wait`) only once a stream wait was
 * queued, however late next_on ran (no race on a loaded machine); the fence is waited for on
 * the stream (the fake's wait records its stream) or not. */
static void ready_spin(const char *spin_us, uint32_t poll_us, unsigned later_ms, bool after_wait, bool expect_stream_wait,
                       uintptr_t stream_id)
{
    if (spin_us) setenv("FRAMESRV_READY_SPIN_US", spin_us, 1);
    framesrv_producer *p = open_producer("spin", FRAMESRV_MEMORY_CUDA);
    framesrv_consumer *c = NULL;
    CHECK_STATUS(open_polling_consumer("spin", FRAMESRV_MEMORY_CUDA, poll_us, &c), FRAMESRV_OK);
    unsetenv("FRAMESRV_READY_SPIN_US");
    size_t size;
    fs_control *ctl = map_ctl("spin", &size);
    if (!p || !c || !ctl) return;
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 2000), FRAMESRV_OK);
    publish(p, 1);
    uint64_t *ready = &fs_control_fence(ctl, (uint32_t)(fs_load_u64(&ctl->latest) & 0xff))->ready;
    fs_fence_store(ready, 0);   /* as if the producer's stream had not got there yet */
    void *stream = (void *)stream_id;
    delayed d = { ready, 1, later_ms * 1000u, after_wait ? stream_id : 0 };
    pthread_t t;
    pthread_create(&t, NULL, write_later, &d);
    framesrv_frame *f = NULL;
    CHECK_STATUS(framesrv_consumer_next_on(c, stream, 5000, &f), FRAMESRV_OK);
    pthread_join(t, NULL);
    bool waited_on_stream = last_stream(0) == (uintptr_t)stream;
    CHECK(waited_on_stream == expect_stream_wait, "spin %s us, poll_us %u, the fence %u ms later: a stream wait %s",
          spin_us ? spin_us : "(default)", poll_us, later_ms, waited_on_stream ? "was queued" : "was not queued");
    if (f) framesrv_frame_release_on(f, stream);
    munmap(ctl, size);
    framesrv_consumer_close(c);
    framesrv_producer_close(p);
}

/* A NAME.cuda left by a dead producer is replaced. */
static void leftover(void)
{
    char path[160];
    snprintf(path, sizeof path, "%s/left.cuda", dir);
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
    framesrv_producer *p = open_producer("left", FRAMESRV_MEMORY_CUDA);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISSOCK(st.st_mode), "the leftover NAME.cuda is replaced by the socket");
    framesrv_producer_close(p);
}

int main(int argc, char **argv)
{
    (void)argc;
    char lib[4096];
    snprintf(lib, sizeof lib, "%.*s/libfakecuda.so", (int)(strrchr(argv[0], '/') ? strrchr(argv[0], '/') - argv[0] : 1),
             strrchr(argv[0], '/') ? argv[0] : ".");
    setenv("FRAMESRV_LIBCUDA", lib, 1);
    void *fake = dlopen(lib, RTLD_NOW);
    mapped_bytes = fake ? (size_t (*)(void))dlsym(fake, "fakecuda_mapped_bytes") : NULL;
    last_stream = fake ? (uintptr_t (*)(int))dlsym(fake, "fakecuda_last_stream") : NULL;
    if (!mapped_bytes || !last_stream) {
        fprintf(stderr, "test_cuda: cannot load %s\n", lib);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", check_runtime_dir());
    framesrv_producer *host = open_producer("plain", FRAMESRV_MEMORY_HOST);
    framesrv_producer *cuda = open_producer("gpu", FRAMESRV_MEMORY_CUDA);
    refusals("gpu", "plain");
    framesrv_producer_close(cuda);
    framesrv_producer_close(host);
    frames("memops", true);
    setenv("FRAMESRV_CUDA_NO_MEMOPS", "1", 1);   /* 4.5 step 4: the same through CPU loads and stores */
    frames("cpu", false);
    unsetenv("FRAMESRV_CUDA_NO_MEMOPS");
    ready_spin("1000000", 0, 20, false, false, 0x201);   /* polled until it landed: no wait queued */
    ready_spin("50", 0, 200, true, true, 0x202);         /* 50 us of polling missed it: the stream waits */
    ready_spin("0", 0, 20, true, true, 0x203);           /* no polling at all */
    /* Without FRAMESRV_READY_SPIN_US no poll (none as long as 20 ms): the fence lands 20 ms later
     * regardless, and the stream waits for it. */
    ready_spin(NULL, 0, 20, false, true, 0x204);
    /* A consumer busy-polling for frames never polls the fence, even with a 1 s window asked for. */
    ready_spin("1000000", 1000, 20, false, true, 0x205);
    leftover();
    return check_exit("test_cuda");
}
