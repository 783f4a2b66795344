/*
 * test_cuda_peers.c: what a CUDA stream's producer does about other processes (PROTOCOL.md
 * 4.5), through the stand-in driver tests/fakecuda: no driver at all (one line), NAME.cuda's
 * message checks, its refusal of a stranger (SO_PEERCRED), of a free entry and of an unknown
 * epoch, and a consumer SIGKILLed while it read (its fences written by the reclaim, its entry
 * kept from reuse until its slots were reserved again) or while the producer's stream waited
 * for its release fence.
 */
#include "check.h"
#include "common.h"
#include "cuda_wire.h"
#include <framesrv.h>

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#define SLOTS 4u
#define STREAM ((void *)0x5)

static char dir[64], self[4096];

static framesrv_producer *open_producer(const char *name)
{
    framesrv_producer_options o = { .width = 32, .height = 16, .pix_fmt = FRAMESRV_PIX_GRAY, .slots = SLOTS,
                                     .memory = FRAMESRV_MEMORY_CUDA };
    framesrv_producer *p = NULL;
    CHECK_STATUS(framesrv_producer_open(&p, name, &o), FRAMESRV_OK);
    return p;
}

static void publish(framesrv_producer *p)
{
    framesrv_frame *f = NULL;
    CHECK_STATUS(framesrv_producer_reserve_on(p, STREAM, 2000, &f), FRAMESRV_OK);
    if (f) CHECK_STATUS(framesrv_producer_publish_on(p, f, STREAM), FRAMESRV_OK);
}

static fs_control *map_ctl(const char *name, size_t *size)
{
    char path[160];
    void *base = NULL;
    snprintf(path, sizeof path, "%s/%s.ctl", dir, name);
    return fsi_map_file(path, true, false, &base, size) == FRAMESRV_OK ? base : NULL;
}

/* In a child: no libcuda at all. */
static void no_driver(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("FRAMESRV_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
        framesrv_producer_options o = { .width = 32, .height = 16, .pix_fmt = FRAMESRV_PIX_GRAY, .memory = FRAMESRV_MEMORY_CUDA };
        framesrv_producer *p = NULL;
        int rc = framesrv_producer_open(&p, "nodriver", &o);
        const char *e = framesrv_last_error();
        _exit(rc == FRAMESRV_E_MEMORY && strstr(e, "cannot load the CUDA driver /nonexistent/libcuda.so.1") && !strchr(e, '\n') ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a CUDA producer without a driver: FRAMESRV_E_MEMORY, one line");
}

static void wire_checks(void)
{
    fs_cuda_request q = { .magic = FS_MAGIC_CUDA, .version = FS_PROTOCOL_VERSION, .entry = 3, .epoch = 7 }, out;
    CHECK_STATUS(fsi_cuda_request_check(&q, sizeof q, &out), FRAMESRV_OK);
    CHECK_STATUS(fsi_cuda_request_check(&q, sizeof q - 1, &out), FRAMESRV_E_BAD_DATA);
    fs_cuda_request bad = q;
    bad.magic++;
    CHECK_STATUS(fsi_cuda_request_check(&bad, sizeof bad, &out), FRAMESRV_E_BAD_DATA);
    bad = q, bad.version = 3;
    CHECK_STATUS(fsi_cuda_request_check(&bad, sizeof bad, &out), FRAMESRV_E_VERSION);
    bad = q, bad.entry = 63;
    CHECK_STATUS(fsi_cuda_request_check(&bad, sizeof bad, &out), FRAMESRV_E_BAD_DATA);
    bad = q, bad.reserved1 = 1;
    CHECK_STATUS(fsi_cuda_request_check(&bad, sizeof bad, &out), FRAMESRV_E_BAD_DATA);
    fs_cuda_reply r = { .magic = FS_MAGIC_CUDA, .version = FS_PROTOCOL_VERSION, .status = FS_CUDA_OK, .epoch = 7, .device_pool_size = 1 << 20 }, o;
    CHECK_STATUS(fsi_cuda_reply_check(&r, sizeof r, 1, 7, &o), FRAMESRV_OK);
    CHECK_STATUS(fsi_cuda_reply_check(&r, sizeof r, 0, 7, &o), FRAMESRV_E_BAD_DATA);   /* OK without a descriptor */
    CHECK_STATUS(fsi_cuda_reply_check(&r, sizeof r, 2, 7, &o), FRAMESRV_E_BAD_DATA);
    CHECK_STATUS(fsi_cuda_reply_check(&r, sizeof r, 1, 8, &o), FRAMESRV_E_BAD_DATA);   /* another epoch */
    CHECK(strstr(framesrv_last_error(), "epoch is 7, expected 8"), "%s", framesrv_last_error());
    fs_cuda_reply refused = r;
    refused.status = FS_CUDA_REFUSED;
    CHECK_STATUS(fsi_cuda_reply_check(&refused, sizeof refused, 1, 7, &o), FRAMESRV_E_BAD_DATA);   /* a refusal with a descriptor */
    CHECK_STATUS(fsi_cuda_reply_check(&refused, sizeof refused, 0, 7, &o), FRAMESRV_OK);
    refused.status = 9;
    CHECK_STATUS(fsi_cuda_reply_check(&refused, sizeof refused, 0, 7, &o), FRAMESRV_E_BAD_DATA);
    r.device_pool_size = 0;
    CHECK_STATUS(fsi_cuda_reply_check(&r, sizeof r, 1, 7, &o), FRAMESRV_E_BAD_DATA);
}

/* NAME.cuda answers entry 0's process (us), and refuses everyone else. */
static void who_may_ask(void)
{
    framesrv_producer *p = open_producer("ask");
    framesrv_consumer_options co = { .attach_timeout_ms = 2000, .memory = FRAMESRV_MEMORY_CUDA };
    framesrv_consumer *c = NULL;
    CHECK_STATUS(framesrv_consumer_open(&c, "ask", &co), FRAMESRV_OK);
    publish(p);
    char path[160];
    snprintf(path, sizeof path, "%s/ask.cuda", dir);
    int fd = -1;
    uint64_t size = 0;
    CHECK_STATUS(fsi_cuda_ask(path, "ask", 0, 1, &fd, &size), FRAMESRV_OK);
    CHECK(fd >= 0 && size > 0, "entry 0's process gets the descriptor (%d, %llu bytes)", fd, (unsigned long long)size);
    if (fd >= 0) close(fd);
    CHECK_STATUS(fsi_cuda_ask(path, "ask", 0, 99, &fd, &size), FRAMESRV_E_MEMORY);
    CHECK(strstr(framesrv_last_error(), "no allocation of that epoch"), "%s", framesrv_last_error());
    CHECK_STATUS(fsi_cuda_ask(path, "ask", 5, 1, &fd, &size), FRAMESRV_E_MEMORY);   /* a free entry */
    CHECK(strstr(framesrv_last_error(), "not that entry's process"), "%s", framesrv_last_error());
    pid_t pid = fork();
    if (pid == 0) {   /* a stranger asking for entry 0's allocation */
        int rc = fsi_cuda_ask(path, "ask", 0, 1, &fd, &size);
        _exit(rc == FRAMESRV_E_MEMORY && fd < 0 && strstr(framesrv_last_error(), "not that entry's process") ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "another process than entry 0's is refused (SO_PEERCRED)");
    /* Not a request: no reply, the connection closed. */
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    CHECK(s >= 0 && connect(s, (struct sockaddr *)&addr, sizeof addr) == 0 && send(s, "garbage", 7, 0) == 7, "connect");
    char buf[64];
    CHECK(recv(s, buf, sizeof buf, 0) == 0, "a malformed request gets no reply");
    close(s);
    framesrv_consumer_close(c);
    framesrv_producer_close(p);
}

/* The child: a CUDA consumer that takes one frame, says "<seq>", releases it on a stream when
 * `release`, says "released", then waits to be killed. */
static int child(const char *name, bool release)
{
    framesrv_consumer_options co = { .attach_timeout_ms = 5000, .memory = FRAMESRV_MEMORY_CUDA };
    framesrv_consumer *c = NULL;
    framesrv_frame *f = NULL;
    if (framesrv_consumer_open(&c, name, &co) != FRAMESRV_OK || framesrv_consumer_next_on(c, STREAM, 5000, &f) != FRAMESRV_OK) return 1;
    printf("%llu\n", (unsigned long long)framesrv_frame_info_of(f)->seq);
    fflush(stdout);
    if (release) framesrv_frame_release_on(f, STREAM);
    if (release) printf("released\n");
    fflush(stdout);
    for (;;) pause();
}

static pid_t spawn_child(const char *name, bool release, FILE **out)
{
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        execl(self, self, release ? "child-release" : "child-hold", name, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    *out = fdopen(fds[0], "r");
    return pid;
}

static uint32_t slot_of_seq(fs_control *ctl, uint64_t seq)
{
    for (uint32_t k = 0; k < SLOTS; k++)
        if (fs_peek_u64(&fs_control_slot(ctl, k)->seq) == seq) return k;
    return 0;
}

static bool eventually(bool (*ok)(fs_control *, uint32_t, uint32_t, uint64_t), fs_control *c, uint32_t k, uint32_t e, uint64_t v)
{
    for (int i = 0; i < 300; i++, usleep(10000))
        if (ok(c, k, e, v)) return true;
    return false;
}
static bool fence_is(fs_control *c, uint32_t k, uint32_t e, uint64_t v) { return fs_fence_load(&fs_control_fence(c, k)->release[e]) == v; }
static bool entry_pid(fs_control *c, uint32_t k, uint32_t e, uint64_t v) { (void)k; return (uint64_t)fs_load_i32(&fs_control_consumer(c, e)->pid) == v; }

/* Killed holding a frame: the reclaim writes its release fence, the entry stays taken until
 * the slot was reserved again (a new consumer in it could wait for the same frame). */
static void killed_holding(void)
{
    framesrv_producer *p = open_producer("hold");
    FILE *out;
    pid_t pid = spawn_child("hold", false, &out);
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 5000), FRAMESRV_OK);
    for (int i = 0; i < 3; i++) publish(p);
    unsigned long long seq = 0;
    CHECK(fscanf(out, "%llu", &seq) == 1 && seq == 1, "the child took frame %llu", seq);
    size_t size;
    fs_control *ctl = map_ctl("hold", &size);
    uint32_t k = slot_of_seq(ctl, seq);
    CHECK(fs_load_u64(&fs_control_slot(ctl, k)->readers) == 1, "the child is entry 0, a reader of slot %u", k);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    CHECK(eventually(fence_is, ctl, k, 0, seq), "the reclaim wrote the dead reader's release fence");
    CHECK(entry_pid(ctl, k, 0, (uint64_t)pid), "entry 0 is kept from reuse while slot %u holds frame %llu", k, seq);
    for (uint32_t i = 0; i < SLOTS; i++) publish(p);   /* every slot reserved again */
    CHECK(eventually(entry_pid, ctl, k, 0, 0), "entry 0 freed once its slot was reserved again");
    munmap(ctl, size);
    fclose(out);
    framesrv_producer_close(p);
}

typedef struct killer { pid_t pid; } killer;
static void *kill_later(void *arg)
{
    usleep(300000);
    kill(((killer *)arg)->pid, SIGKILL);
    return NULL;
}

/* Killed after its release, before its stream wrote the release fence (rewound here): the
 * producer's stream that waits for it goes on once the reclaim wrote it. */
static void killed_before_its_fence(void)
{
    framesrv_producer *p = open_producer("fence");
    FILE *out;
    pid_t pid = spawn_child("fence", true, &out);
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 5000), FRAMESRV_OK);
    publish(p);
    unsigned long long seq = 0;
    char word[16] = "";
    CHECK(fscanf(out, "%llu %15s", &seq, word) == 2 && !strcmp(word, "released"), "the child released frame %llu", seq);
    size_t size;
    fs_control *ctl = map_ctl("fence", &size);
    fs_fence_store(&fs_control_fence(ctl, 0)->release[0], seq - 1);   /* its stream "has not got there" */
    killer k = { pid };
    pthread_t t;
    pthread_create(&t, NULL, kill_later, &k);
    uint64_t start = fsi_monotonic_ns();
    for (uint32_t i = 0; i < SLOTS; i++) publish(p);   /* the last one reserves slot 0 again */
    uint64_t waited = (fsi_monotonic_ns() - start) / 1000000;
    pthread_join(t, NULL);
    waitpid(pid, NULL, 0);
    CHECK(waited >= 250 && waited < 5000, "slot 0's reserve waited %llu ms, until the reclaim wrote the fence", (unsigned long long)waited);
    munmap(ctl, size);
    fclose(out);
    framesrv_producer_close(p);
}

int main(int argc, char **argv)
{
    snprintf(self, sizeof self, "%s", argv[0]);
    if (argc == 3) return child(argv[2], strcmp(argv[1], "child-release") == 0);
    char lib[4096];
    const char *slash = strrchr(argv[0], '/');
    snprintf(lib, sizeof lib, "%.*s/libfakecuda.so", slash ? (int)(slash - argv[0]) : 1, slash ? argv[0] : ".");
    no_driver();
    setenv("FRAMESRV_LIBCUDA", lib, 1);
    snprintf(dir, sizeof dir, "%s", check_runtime_dir());
    wire_checks();
    who_may_ask();
    killed_holding();
    killed_before_its_fence();
    return check_exit("test_cuda_peers");
}
