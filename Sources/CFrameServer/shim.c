// GNU-only system calls for Swift, behind the fs_sys_ prefix. _GNU_SOURCE is set here,
// never in the public header.
#define _GNU_SOURCE
#include "CFrameServer.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

int fs_sys_futex_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns)
{
    struct timespec ts, *tp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000;
        ts.tv_nsec = timeout_ns % 1000000000;
        tp = &ts;
    }
    // FUTEX_WAIT (not _PRIVATE): the word lives in a segment shared between processes.
    long r = syscall(SYS_futex, word, FUTEX_WAIT, expected, tp, NULL, 0);
    return r == 0 ? 0 : -1;
}

int fs_sys_futex_wake(uint32_t *word)
{
    return (int)syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int fs_sys_pidfd_open(int32_t pid)
{
    return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
}

int fs_sys_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

int fs_sys_eventfd_signal(int fd)
{
    uint64_t one = 1;
    return write(fd, &one, sizeof one) == sizeof one ? 0 : -1;
}

int fs_sys_eventfd_drain(int fd)
{
    uint64_t v;
    return read(fd, &v, sizeof v) == sizeof v ? 0 : -1;
}

int fs_sys_inotify_dir(const char *path)
{
    int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd < 0) return -1;
    if (inotify_add_watch(fd, path, IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int fs_sys_inotify_drain(int fd)
{
    char buf[4096];
    ssize_t n;
    int total = 0;
    while ((n = read(fd, buf, sizeof buf)) > 0) total += (int)n;
    return total;
}

uint64_t fs_sys_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t fs_sys_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// Reads /proc/<pid>/stat and returns the whitespace-separated field `index` (1-based),
// skipping the parenthesised comm (which may itself contain spaces).
static int read_stat_fields(int32_t pid, unsigned long long *out, const int *indexes, int count)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    p++;
    int field = 2; // the ')' ends field 2
    int found = 0;
    while (*p && found < count) {
        while (*p == ' ') p++;
        field++;
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        for (int i = 0; i < count; i++) if (indexes[i] == field) { out[i] = v; found++; }
        while (*p && *p != ' ') p++;
    }
    return found == count ? 0 : -1;
}

uint64_t fs_sys_process_start_time(int32_t pid)
{
    int idx[1] = { 22 };
    unsigned long long v[1];
    return read_stat_fields(pid, v, idx, 1) == 0 ? (uint64_t)v[0] : 0;
}
