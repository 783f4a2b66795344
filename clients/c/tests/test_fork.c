/*
 * test_fork.c: a consumer and a producer used in a forked child (issue 26 item 4). The child
 * inherits a lossless consumer holding a frame and its producer: next, reserve, stats and
 * release_on are refused in one line (FRAMESRV_E_FORKED), the release of the held frame is a
 * no-op, and the child's close of both touches nothing shared. The parent then still gets
 * every frame in order with missed 0, its entry still attached, its producer still admitting
 * consumers (its watcher thread) and, for a CUDA stream (tests/fakecuda), still serving
 * NAME.cuda. Before the check the child's next took frame 2 and the parent missed it.
 */
#include "check.h"
#include "common.h"
#include <framesrv.h>

#include <sys/wait.h>

#define SLOTS 4u

static void publish(framesrv_producer *p, uint64_t seq)
{
    framesrv_frame *f = NULL;
    CHECK_STATUS(framesrv_producer_reserve(p, 1000, &f), FRAMESRV_OK);
    if (!f) return;
    CHECK(framesrv_frame_info_of(f)->seq == seq, "reserved %llu", (unsigned long long)framesrv_frame_info_of(f)->seq);
    CHECK_STATUS(framesrv_producer_publish(p, f), FRAMESRV_OK);
}

static int open_consumer(const char *name, int memory, framesrv_consumer **c)
{
    framesrv_consumer_options o = { .mode = FRAMESRV_LOSSLESS, .attach_timeout_ms = 2000, .memory = memory };
    return framesrv_consumer_open(c, name, &o);
}

/* One refused call in the child: FRAMESRV_E_FORKED, one line naming the parent. */
static bool refused(int status, const char *what, pid_t parent)
{
    char want[64];
    snprintf(want, sizeof want, "was opened by pid %d; a forked child (pid %d)", (int)parent, (int)getpid());
    const char *e = framesrv_last_error();
    bool ok = status == FRAMESRV_E_FORKED && strstr(e, want) && strstr(e, "must open its own") && !strchr(e, '\n');
    if (!ok) fprintf(stderr, "test_fork child: %s: %s (%s)\n", what, framesrv_status_name(status), e);
    return ok;
}

/* The child: every call refused, the held frame's release and both closes without effect.
 * _exit: ZeroMQ's objects stay the parent's (LeakSanitizer would count them). */
static void child(framesrv_consumer *c, framesrv_producer *p, framesrv_frame *held, pid_t parent)
{
    framesrv_frame *f = NULL;
    framesrv_stream_info si;
    framesrv_producer_stats ps;
    bool ok = refused(framesrv_consumer_next(c, 200, &f), "next", parent) && f == NULL;
    ok &= refused(framesrv_consumer_next_on(c, NULL, 0, &f), "next_on", parent);
    ok &= refused(framesrv_consumer_stream_info(c, &si), "stream_info", parent);
    ok &= refused(framesrv_consumer_reopen(c, 0), "reopen", parent);
    ok &= refused(framesrv_frame_release_on(held, NULL), "release_on", parent);
    framesrv_frame_release(held);
    ok &= refused(framesrv_producer_reserve(p, 0, &f), "reserve", parent);
    ok &= refused(framesrv_producer_stats_of(p, &ps), "producer stats", parent);
    ok &= refused(framesrv_producer_end(p, 1), "end", parent);
    framesrv_consumer_close(c);
    framesrv_producer_close(p);
    _exit(ok ? 0 : 1);
}

static void parent_goes_on(const char *name, int memory, framesrv_producer *p, framesrv_consumer *c, framesrv_frame *held)
{
    framesrv_stream_info si;
    CHECK_STATUS(framesrv_consumer_stream_info(c, &si), FRAMESRV_OK);
    CHECK(framesrv_frame_info_of(held)->seq == 1, "the held frame is still frame 1");
    framesrv_frame_release(held);
    framesrv_frame *f = NULL;
    for (uint64_t seq = 2; seq <= 8; seq++) {
        if (seq > 2) publish(p, seq);
        CHECK_STATUS(framesrv_consumer_next(c, 1000, &f), FRAMESRV_OK);
        CHECK(f && framesrv_frame_info_of(f)->seq == seq, "frame %llu after the fork: got %llu", (unsigned long long)seq,
              f ? (unsigned long long)framesrv_frame_info_of(f)->seq : 0ull);
        framesrv_frame_release(f);
    }
    framesrv_consumer_stats st;
    framesrv_consumer_stats_of(c, &st);
    CHECK(st.missed == 0 && st.delivered == 8 && st.bad_frames == 0, "missed %llu delivered %llu",
          (unsigned long long)st.missed, (unsigned long long)st.delivered);
    /* The producer's thread still admits, and (CUDA) NAME.cuda still serves the allocation. */
    framesrv_consumer *late = NULL;
    CHECK_STATUS(open_consumer(name, memory, &late), FRAMESRV_OK);
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 2, 2000), FRAMESRV_OK);
    publish(p, 9);
    CHECK_STATUS(framesrv_consumer_next(late, 1000, &f), FRAMESRV_OK);
    CHECK(f && framesrv_frame_info_of(f)->seq == 9, "a consumer opened after the fork gets frame 9");
    framesrv_frame_release(f);
    CHECK_STATUS(framesrv_consumer_next(c, 1000, &f), FRAMESRV_OK);
    framesrv_frame_release(f);
    framesrv_consumer_close(late);
}

static void across_fork(const char *name, int memory)
{
    framesrv_producer_options o = { .width = 32, .height = 16, .pix_fmt = FRAMESRV_PIX_GRAY, .slots = SLOTS, .memory = memory };
    framesrv_producer *p = NULL;
    framesrv_consumer *c = NULL;
    CHECK_STATUS(framesrv_producer_open(&p, name, &o), FRAMESRV_OK);
    CHECK_STATUS(open_consumer(name, memory, &c), FRAMESRV_OK);
    if (!p || !c) return;
    CHECK_STATUS(framesrv_producer_wait_for_consumers(p, 1, 2000), FRAMESRV_OK);
    publish(p, 1);
    publish(p, 2);
    framesrv_frame *held = NULL;
    CHECK_STATUS(framesrv_consumer_next(c, 1000, &held), FRAMESRV_OK);
    if (!held) return;
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) child(c, p, held, parent);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the child's calls are refused in one line (status 0x%x)", name, st);
    parent_goes_on(name, memory, p, c, held);
    framesrv_consumer_close(c);
    framesrv_producer_close(p);
}

int main(int argc, char **argv)
{
    (void)argc;
    char lib[4096];
    const char *slash = strrchr(argv[0], '/');
    snprintf(lib, sizeof lib, "%.*s/libfakecuda.so", slash ? (int)(slash - argv[0]) : 1, slash ? argv[0] : ".");
    setenv("FRAMESRV_LIBCUDA", lib, 1);
    check_runtime_dir();
    across_fork("host", FRAMESRV_MEMORY_HOST);
    if (access(lib, R_OK) == 0) across_fork("cuda", FRAMESRV_MEMORY_CUDA);
    else CHECK(0, "no %s: build it with make tests", lib);
    return check_exit("test_fork");
}
