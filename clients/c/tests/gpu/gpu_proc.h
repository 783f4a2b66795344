/*
 * gpu_proc.h: the GPU suite's child processes: started with their standard output on a pipe,
 * read line by line with a deadline, awaited (killed past a bound), and gpu_consume's report.
 */
#ifndef FRAMESRV_GPU_PROC_H
#define FRAMESRV_GPU_PROC_H

#include "gpu.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct proc { pid_t pid; int fd; char buf[16384]; size_t len; } proc;

static inline proc proc_start(char *const argv[])
{
    proc p = { .pid = -1, .fd = -1 };
    int fds[2];
    if (pipe(fds) != 0) return p;
    p.pid = fork();
    if (p.pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    p.fd = fds[0];
    return p;
}

static inline uint64_t proc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The next line that starts with `prefix` (others are skipped) within timeout_ms, copied to out. */
static inline bool proc_line(proc *p, const char *prefix, int timeout_ms, char *out, size_t size)
{
    uint64_t deadline = proc_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        char *nl;
        while ((nl = memchr(p->buf, '\n', p->len))) {
            size_t n = (size_t)(nl - p->buf) + 1;
            bool match = strncmp(p->buf, prefix, strlen(prefix)) == 0;
            if (match && out) snprintf(out, size, "%.*s", (int)(n - 1), p->buf);
            memmove(p->buf, p->buf + n, p->len - n);
            p->len -= n;
            if (match) return true;
        }
        uint64_t now = proc_now_ms();
        if (p->fd < 0 || now >= deadline || p->len == sizeof p->buf) return false;
        struct pollfd pfd = { p->fd, POLLIN, 0 };
        if (poll(&pfd, 1, (int)(deadline - now)) <= 0) continue;
        ssize_t r = read(p->fd, p->buf + p->len, sizeof p->buf - p->len);
        if (r <= 0) return false;
        p->len += (size_t)r;
    }
}

/* Its exit status (128 + signal), killing it after timeout_s. */
static inline int proc_finish(proc *p, int timeout_s)
{
    int st = 0;
    for (int i = 0; i < timeout_s * 100; i++, usleep(10000))
        if (waitpid(p->pid, &st, WNOHANG) == p->pid) goto done;
    kill(p->pid, SIGKILL);
    waitpid(p->pid, &st, 0);
    fprintf(stderr, "gpu_suite: process %d did not finish within %d s: killed\n", (int)p->pid, timeout_s);
done:
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* gpu_consume's report, per producer instance. */
typedef struct result {
    bool ok;   /* it reported and exited 0 */
    unsigned long long frames[2], first[2], last[2], gaps[2], bad[2], min_bad[2], mismatches, first_unready;
} result;

static inline result proc_result(proc *p, int timeout_s)
{
    result r = { 0 };
    char line[512];
    int reported = 0;
    while (proc_line(p, "", timeout_s * 1000, line, sizeof line)) {
        int i;
        if (sscanf(line, "instance %d", &i) == 1 && i >= 0 && i < 2)
            reported += sscanf(line, "instance %d frames=%llu first=%llu last=%llu gaps=%llu bad_frames=%llu min_bad=%llu", &i,
                               &r.frames[i], &r.first[i], &r.last[i], &r.gaps[i], &r.bad[i], &r.min_bad[i]) == 7;
        if (sscanf(line, "done mismatches=%llu", &r.mismatches) == 1) reported++;
        if (strncmp(line, "stats", 5) == 0) {
            const char *u = strstr(line, "first_unready=");
            if (u) r.first_unready = strtoull(u + 14, NULL, 10);
            break;
        }
    }
    r.ok = proc_finish(p, 10) == 0 && reported >= 2;
    return r;
}

#endif
