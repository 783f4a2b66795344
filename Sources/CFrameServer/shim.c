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

/* ------------------------------------------------------------------------- */
/* system helper: the file-descriptor limit and the accept() guard            */
/* ------------------------------------------------------------------------- */
// libzmq 4.3.4 aborts the whole process when accept() on an ipc:// listener fails with
// EMFILE (errno_assert in ipc_listener_t::accept tolerates only EAGAIN, EINTR,
// ECONNABORTED, EPROTO and ENFILE), so a local client that opens ~1,000 connections to a
// producer's NAME.sock kills it with SIGABRT. libzmq calls accept4 through the PLT, and
// this definition in the executable interposes it (the dynamic linker binds libzmq's
// reference to the executable's symbol first). It refuses a connection, closing it at
// once (the client sees EOF; a ZeroMQ client reconnects) and telling libzmq ECONNABORTED,
// which libzmq ignores:
// - when the accepted descriptor is one of the last `fs_keep_free` below the soft limit:
//   descriptors are handed out lowest first, so every lower one is in use, and a flood of
//   connections would leave the producer none for pools, pidfds and ZeroMQ's own;
// - when accept itself fails with EMFILE: it closes a reserved descriptor, accepts the
//   pending connection into it, closes both and reopens the reserve.
// Refusals are counted (fs_sys_refused_connections) and logged, one line a second.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

typedef int (*fs_accept4_fn)(int, __SOCKADDR_ARG, socklen_t *restrict, int);

static int fs_reserve_fd = -1;
static uint64_t fs_refused_connections;
static uint64_t fs_refused_logged_ns;
static uint64_t fs_refused_logged_count;
static int fs_refusal_summary_registered;
static char fs_refused_socket[sizeof ((struct sockaddr_un *)0)->sun_path] = "a socket";   // as last logged

int64_t fs_sys_raise_nofile_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    }
    return rl.rlim_cur == RLIM_INFINITY ? INT64_MAX : (int64_t)rl.rlim_cur;
}

int fs_sys_connection_guard_arm(void)
{
    if (__atomic_load_n(&fs_reserve_fd, __ATOMIC_ACQUIRE) >= 0) return 0;
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int expected = -1;
    if (!__atomic_compare_exchange_n(&fs_reserve_fd, &expected, fd, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        close(fd);   // another thread armed it first
    return 0;
}

uint64_t fs_sys_refused_connections(void)
{
    return __atomic_load_n(&fs_refused_connections, __ATOMIC_RELAXED);
}

// How many descriptors below the soft limit connections may not take: a quarter of the
// limit, at most 128 (63 consumer pidfds, pools, the control segment, ZeroMQ's eventfds).
static uint64_t fs_keep_free(uint64_t limit)
{
    uint64_t keep = limit / 4;
    return keep > 128 ? 128 : keep;
}

static uint64_t fs_soft_nofile(void)
{
    struct rlimit rl = { 0, 0 };
    getrlimit(RLIMIT_NOFILE, &rl);
    return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
}

static void fs_write_refusal_line(const char *socket_path, uint64_t n, const char *what)
{
    char line[512];
    int k = snprintf(line, sizeof line, "framesrv: connection flood on %s: near the limit of %llu open files, "
                     "refused %llu connection(s) %s\n",
                     socket_path, (unsigned long long)fs_soft_nofile(), (unsigned long long)n, what);
    if (k > 0) {
        ssize_t w = write(2, line, (size_t)k < sizeof line ? (size_t)k : sizeof line - 1);
        (void)w;
    }
    __atomic_store_n(&fs_refused_logged_count, n, __ATOMIC_RELAXED);
}

// At exit: the total, when refusals came after the last line (lines are a second apart).
static void fs_log_refusal_total(void)
{
    uint64_t n = fs_sys_refused_connections();
    if (n > __atomic_load_n(&fs_refused_logged_count, __ATOMIC_RELAXED))
        fs_write_refusal_line(fs_refused_socket, n, "in all");
}

static void fs_log_refusal(int listener)
{
    uint64_t n = __atomic_add_fetch(&fs_refused_connections, 1, __ATOMIC_RELAXED);
    if (!__atomic_exchange_n(&fs_refusal_summary_registered, 1, __ATOMIC_RELAXED)) atexit(fs_log_refusal_total);
    uint64_t now = fs_sys_monotonic_ns(), last = __atomic_load_n(&fs_refused_logged_ns, __ATOMIC_RELAXED);
    if (last != 0 && now - last < 1000000000ull) return;
    if (!__atomic_compare_exchange_n(&fs_refused_logged_ns, &last, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return;
    struct sockaddr_un sa;
    socklen_t len = sizeof sa;
    memset(&sa, 0, sizeof sa);
    if (getsockname(listener, (struct sockaddr *)&sa, &len) != 0 || sa.sun_family != AF_UNIX) sa.sun_path[0] = 0;
    sa.sun_path[sizeof sa.sun_path - 1] = 0;
    if (sa.sun_path[0]) memcpy(fs_refused_socket, sa.sun_path, sizeof fs_refused_socket);
    fs_write_refusal_line(fs_refused_socket, n, "so far");
}

// Refuses one pending connection on `listener` using the reserved descriptor.
static void fs_refuse_one(int listener, fs_accept4_fn real)
{
    int reserve = __atomic_exchange_n(&fs_reserve_fd, -1, __ATOMIC_ACQ_REL);
    if (reserve >= 0) close(reserve);
    int c = real(listener, (struct sockaddr *)NULL, NULL, SOCK_CLOEXEC);
    if (c >= 0) {
        close(c);
        fs_log_refusal(listener);
    }
    fs_sys_connection_guard_arm();
}

static int fs_guarded_accept(int fd, __SOCKADDR_ARG addr, socklen_t *restrict len, int flags)
{
    static fs_accept4_fn real;
    fs_accept4_fn f = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (!f) {
        // Under ThreadSanitizer (tests built with -sanitize=thread) this definition replaces
        // the runtime's weak accept4 interceptor: call the interceptor so it still tracks
        // the descriptor. Otherwise the C library's, found after this executable.
        f = (fs_accept4_fn)dlsym(RTLD_DEFAULT, "__interceptor_accept4");
        if (!f) f = (fs_accept4_fn)dlsym(RTLD_NEXT, "accept4");
        if (!f) { errno = ENOSYS; return -1; }
        __atomic_store_n(&real, f, __ATOMIC_RELEASE);
    }
    int r = f(fd, addr, len, flags);
    if (r >= 0) {
        uint64_t limit = fs_soft_nofile();
        if ((uint64_t)r + fs_keep_free(limit) < limit) {
            // A reserve given up at EMFILE and not taken back then: take it back now that
            // descriptors are free again, or the next EMFILE could not refuse (libzmq would
            // then find the connection still pending and spin).
            if (__atomic_load_n(&fs_reserve_fd, __ATOMIC_ACQUIRE) < 0) (void)fs_sys_connection_guard_arm();
            return r;
        }
        close(r);
        fs_log_refusal(fd);
        errno = ECONNABORTED;
        return -1;
    }
    if (errno != EMFILE) return r;
    fs_refuse_one(fd, f);
    errno = ECONNABORTED;   // "the connection went away": every accept loop ignores it
    return -1;
}

int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *restrict len, int flags)
{
    return fs_guarded_accept(fd, addr, len, flags);
}

int accept(int fd, __SOCKADDR_ARG addr, socklen_t *restrict len)
{
    return fs_guarded_accept(fd, addr, len, 0);
}

// ---------------------------------------------------------------------------
// Truncation guard: see CFrameServer.h. Everything the handler touches is a lock-free
// atomic in a static table, and it calls only mmap and sigaction (async-signal-safe).

#include <signal.h>
#include <sys/mman.h>

typedef struct {
    uintptr_t start;     // 0 = free, 1 = being registered, else the mapping's first byte
    uintptr_t end;       // one past its last byte
    uint32_t writable;
    uint64_t faults;
} fs_guard_entry;

static fs_guard_entry fs_guard_table[FS_GUARD_ENTRIES];
static uint64_t fs_guard_total;
static struct sigaction fs_guard_previous;
static int fs_guard_state; // 0 not installed, 1 installing, 2 installed

static void fs_guard_handler(int sig, siginfo_t *info, void *context)
{
    int saved_errno = errno;
    uintptr_t addr = (uintptr_t)info->si_addr;
    /* Only a fault (si_code > 0) has a meaningful si_addr; a SIGBUS sent with kill() is not ours. */
    for (unsigned i = 0; info->si_code > 0 && i < FS_GUARD_ENTRIES; i++) {
        fs_guard_entry *e = &fs_guard_table[i];
        uintptr_t start = __atomic_load_n(&e->start, __ATOMIC_ACQUIRE);
        if (start <= 1) continue;
        uintptr_t end = __atomic_load_n(&e->end, __ATOMIC_RELAXED);
        if (addr < start || addr >= end) continue;
        int prot = PROT_READ | (e->writable ? PROT_WRITE : 0);
        void *p = mmap((void *)start, end - start, prot, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) break;
        __atomic_fetch_add(&e->faults, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&fs_guard_total, 1, __ATOMIC_RELAXED);
        errno = saved_errno;
        return; // the access is retried and now reads zeros
    }
    // Not ours: put the previous action back (the guard is off from now on: the next
    // register installs it again) and let the access fault again under it; a signal that
    // was sent rather than caused by an access is raised again, to be delivered under it.
    (void)context;
    sigaction(SIGBUS, &fs_guard_previous, NULL);
    __atomic_store_n(&fs_guard_state, 0, __ATOMIC_RELEASE);
    if (info->si_code <= 0) raise(sig);
    errno = saved_errno;
}

int fs_guard_install(void)
{
    int expected = 0;
    if (!__atomic_compare_exchange_n(&fs_guard_state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        int state;
        while ((state = __atomic_load_n(&fs_guard_state, __ATOMIC_ACQUIRE)) == 1) {}
        return state == 2 ? 0 : -1;   /* another thread installed it, or failed to */
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fs_guard_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &fs_guard_previous) != 0) {
        __atomic_store_n(&fs_guard_state, 0, __ATOMIC_RELEASE);
        return -1;
    }
    __atomic_store_n(&fs_guard_state, 2, __ATOMIC_RELEASE);
    return 0;
}

int fs_guard_register(void *base, size_t length, int writable)
{
    if (fs_guard_install() != 0) return -1;
    for (unsigned i = 0; i < FS_GUARD_ENTRIES; i++) {
        fs_guard_entry *e = &fs_guard_table[i];
        uintptr_t expected = 0;
        if (!__atomic_compare_exchange_n(&e->start, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) continue;
        e->writable = writable != 0;
        __atomic_store_n(&e->faults, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&e->end, (uintptr_t)base + length, __ATOMIC_RELAXED);
        // SYNC: release, pairs with the handler's acquire load of start (it then sees end).
        __atomic_store_n(&e->start, (uintptr_t)base, __ATOMIC_RELEASE);
        return (int)i;
    }
    return -1;
}

void fs_guard_unregister(int entry)
{
    if (entry < 0 || (unsigned)entry >= FS_GUARD_ENTRIES) return;
    __atomic_store_n(&fs_guard_table[entry].start, 0, __ATOMIC_RELEASE);
}

uint64_t fs_guard_faults(int entry)
{
    if (entry < 0 || (unsigned)entry >= FS_GUARD_ENTRIES) return 0;
    return __atomic_load_n(&fs_guard_table[entry].faults, __ATOMIC_RELAXED);
}

uint64_t fs_guard_total_faults(void) { return __atomic_load_n(&fs_guard_total, __ATOMIC_RELAXED); }
