/*
 * common.c: what every part of libframesrv shares: errors (a thread-local last error),
 * clocks, the runtime directory, stream names, process identity, futex, pidfd and
 * mapping another process's files. The one layer that talks to the system.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

_Static_assert(FRAMESRV_PROTOCOL_VERSION == FS_PROTOCOL_VERSION,
               "framesrv.h names another protocol version than the layout header");
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* ---- errors ------------------------------------------------------------------- */

static _Thread_local char last_error[512];

static int fail_v(int status, const char *suffix, const char *fmt, va_list ap)
{
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    if (n >= 0 && (size_t)n < sizeof last_error && suffix)
        snprintf(last_error + n, sizeof last_error - (size_t)n, ": %s", suffix);
    return status;
}

int fsi_fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(status, NULL, fmt, ap);
    va_end(ap);
    return status;
}

int fsi_fail_errno(const char *fmt, ...)
{
    int saved = errno;
    char text[128];
    /* The GNU strerror_r returns the message, not always in text. */
    const char *message = strerror_r(saved, text, sizeof text);
    va_list ap;
    va_start(ap, fmt);
    fail_v(FRAMESRV_E_SYSTEM, message, fmt, ap);
    va_end(ap);
    errno = saved;
    return FRAMESRV_E_SYSTEM;
}

const char *framesrv_last_error(void) { return last_error; }

#define FSI_TEXT(x) #x
#define FSI_VERSION_TEXT(a, b, c) FSI_TEXT(a) "." FSI_TEXT(b) "." FSI_TEXT(c)
const char *framesrv_version(void)
{
    return FSI_VERSION_TEXT(FRAMESRV_VERSION_MAJOR, FRAMESRV_VERSION_MINOR, FRAMESRV_VERSION_PATCH);
}

const char *framesrv_status_name(int status)
{
    switch (status) {
    case FRAMESRV_OK: return "FRAMESRV_OK";
    case FRAMESRV_TIMEOUT: return "FRAMESRV_TIMEOUT";
    case FRAMESRV_END: return "FRAMESRV_END";
    case FRAMESRV_GONE: return "FRAMESRV_GONE";
    case FRAMESRV_E_INVALID: return "FRAMESRV_E_INVALID";
    case FRAMESRV_E_NOT_FOUND: return "FRAMESRV_E_NOT_FOUND";
    case FRAMESRV_E_BAD_DATA: return "FRAMESRV_E_BAD_DATA";
    case FRAMESRV_E_SYSTEM: return "FRAMESRV_E_SYSTEM";
    case FRAMESRV_E_BUSY: return "FRAMESRV_E_BUSY";
    case FRAMESRV_E_STATE: return "FRAMESRV_E_STATE";
    case FRAMESRV_E_NO_MEMORY: return "FRAMESRV_E_NO_MEMORY";
    case FRAMESRV_E_DETACHED: return "FRAMESRV_E_DETACHED";
    case FRAMESRV_E_ZMQ: return "FRAMESRV_E_ZMQ";
    case FRAMESRV_E_VERSION: return "FRAMESRV_E_VERSION";
    case FRAMESRV_E_HELD: return "FRAMESRV_E_HELD";
    case FRAMESRV_E_MEMORY: return "FRAMESRV_E_MEMORY";
    case FRAMESRV_E_FORKED: return "FRAMESRV_E_FORKED";
    case FRAMESRV_E_MEDIA: return "FRAMESRV_E_MEDIA";
    default: return "FRAMESRV_UNKNOWN_STATUS";
    }
}

/* ---- clocks and time ---------------------------------------------------------- */

static uint64_t clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t fsi_monotonic_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
uint64_t fsi_realtime_ns(void) { return clock_ns(CLOCK_REALTIME); }

uint64_t fsi_deadline(int timeout_ms)
{
    if (timeout_ms < 0) return UINT64_MAX;
    return fsi_monotonic_ns() + (uint64_t)timeout_ms * 1000000ull;
}

int fsi_remaining_ms(uint64_t deadline, int cap_ms)
{
    if (deadline == UINT64_MAX) return cap_ms;
    uint64_t now = fsi_monotonic_ns();
    if (now >= deadline) return 0;
    uint64_t ms = (deadline - now + 999999ull) / 1000000ull;   /* round up: never spin at 0 */
    return ms > (uint64_t)cap_ms ? cap_ms : (int)ms;
}

/* ---- runtime directory and names ------------------------------------------------ */

/* The directory this process would use (RuntimeDirectory.defaultPath). */
static int default_dir(char *out, size_t size)
{
    const char *d = getenv("FRAMESRV_DIR"), *x = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    int n;
    if (d && *d) n = snprintf(out, size, "%s", d);
    else if (x && *x) n = snprintf(out, size, "%s/framesrv", x);
    else if (stat("/dev/shm", &st) == 0) n = snprintf(out, size, "/dev/shm/framesrv-%u", (unsigned)getuid());
    else n = snprintf(out, size, "/tmp/framesrv-%u", (unsigned)getuid());
    if (n < 0 || (size_t)n >= size) return fsi_fail(FRAMESRV_E_INVALID, "runtime directory path is too long (%d bytes)", n);
    return FRAMESRV_OK;
}

/* Checks that dir is a directory of ours (following a link only when the link is ours
 * too) and tightens it to 0700, through one descriptor. */
static int check_dir(const char *dir)
{
    struct stat link, st;
    if (lstat(dir, &link) != 0) {
        if (errno == ENOENT) return fsi_fail(FRAMESRV_E_NOT_FOUND, "runtime directory %s does not exist", dir);
        return fsi_fail_errno("stat runtime directory %s", dir);
    }
    bool is_link = S_ISLNK(link.st_mode);
    if (is_link && link.st_uid != getuid())
        return fsi_fail(FRAMESRV_E_INVALID, "refusing runtime directory %s: it is a symbolic link owned by uid %u, not by you (uid %u)",
                        dir, (unsigned)link.st_uid, (unsigned)getuid());
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC | (is_link ? 0 : O_NOFOLLOW));
    if (fd < 0) {
        if (errno == ENOTDIR || errno == ELOOP) return fsi_fail(FRAMESRV_E_INVALID, "runtime directory %s is not a directory", dir);
        return fsi_fail_errno("open runtime directory %s", dir);
    }
    int status = FRAMESRV_OK;
    if (fstat(fd, &st) != 0) status = fsi_fail_errno("stat runtime directory %s", dir);
    else if (!S_ISDIR(st.st_mode)) status = fsi_fail(FRAMESRV_E_INVALID, "runtime directory %s is not a directory", dir);
    else if (st.st_uid != getuid())
        status = fsi_fail(FRAMESRV_E_INVALID, "refusing runtime directory %s: it belongs to uid %u, not to you (uid %u); set FRAMESRV_DIR",
                          dir, (unsigned)st.st_uid, (unsigned)getuid());
    else if ((st.st_mode & 077) != 0 && fchmod(fd, 0700) != 0)
        status = fsi_fail_errno("restrict runtime directory %s to mode 0700", dir);
    close(fd);
    return status;
}

int fsi_runtime_dir(char *out, size_t size, bool create)
{
    int status = default_dir(out, size);
    if (status != FRAMESRV_OK) return status;
    if (create && mkdir(out, 0700) != 0 && errno != EEXIST)
        return fsi_fail_errno("create runtime directory %s", out);
    return check_dir(out);
}

int fsi_check_name(const char *name)
{
    if (!name) return fsi_fail(FRAMESRV_E_INVALID, "stream name is NULL");
    size_t len = strnlen(name, FS_NAME_MAX + 1);
    bool ok = len >= 1 && len <= FS_NAME_MAX && name[0] != '.';
    for (size_t i = 0; ok && i < len; i++) {
        char c = name[i];
        ok = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '.' || c == '_' || c == '-';
    }
    if (!ok)
        return fsi_fail(FRAMESRV_E_INVALID, "invalid stream name '%.64s%s': use 1 to 48 letters, digits, '.', '_' or '-', not starting with '.'",
                        name, len > FS_NAME_MAX ? "..." : "");
    return FRAMESRV_OK;
}

int fsi_path(char *out, size_t size, const char *dir, const char *name, const char *suffix)
{
    int n = snprintf(out, size, "%s/%s%s", dir, name, suffix);
    if (n < 0 || (size_t)n >= size) return fsi_fail(FRAMESRV_E_INVALID, "path %s/%s%s is too long", dir, name, suffix);
    return FRAMESRV_OK;
}

/* ---- processes ------------------------------------------------------------------- */

uint64_t fsi_process_start_time(pid_t pid)
{
    char path[64], buf[1024];
    if (pid <= 0) return 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n;
    do n = read(fd, buf, sizeof buf - 1); while (n < 0 && errno == EINTR);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    /* The comm field may contain spaces and ')': count fields from the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p) return 0;
    p++;
    for (int field = 3; *p; field++) {
        while (*p == ' ') p++;
        if (field == 22) return strtoull(p, NULL, 10);
        while (*p && *p != ' ') p++;
    }
    return 0;
}

bool fsi_pidfd_alive(int pidfd)
{
    if (pidfd < 0) return false;
    struct pollfd p = { pidfd, POLLIN, 0 };
    int n;
    do n = poll(&p, 1, 0); while (n < 0 && errno == EINTR);
    return n == 0;
}

/* The start time is read after the pidfd pins the process, so a reused pid is caught;
 * a zombie not yet reaped already polls readable and counts as gone. */
int fsi_open_pidfd(pid_t pid, uint64_t start_time)
{
    if (pid <= 0) return -1;
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0) return -1;
    if (fsi_process_start_time(pid) != start_time || !fsi_pidfd_alive(fd)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- forks ------------------------------------------------------------------------ */

pid_t fsi_pid;
static pthread_once_t fork_watch = PTHREAD_ONCE_INIT;

static void note_pid(void) { __atomic_store_n(&fsi_pid, getpid(), __ATOMIC_RELAXED); }
static void watch_forks(void)
{
    note_pid();
    pthread_atfork(NULL, NULL, note_pid);   /* in the child, before anything else of it runs */
}

pid_t fsi_opener_pid(void)
{
    pthread_once(&fork_watch, watch_forks);
    return __atomic_load_n(&fsi_pid, __ATOMIC_RELAXED);
}

bool fsi_forked_child(pid_t opener)
{
    return fsi_forked(opener) || getpid() != opener;
}

int fsi_fail_forked(const char *what, const char *stream, pid_t opener)
{
    return fsi_fail(FRAMESRV_E_FORKED, "this %s of stream '%s' was opened by pid %d; a forked child (pid %d) must open its own",
                    what, stream, (int)opener, (int)getpid());
}

/* ---- futex (not _PRIVATE: the other side is another process) ---------------------- */

void fsi_futex_wake(uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int fsi_futex_wait(uint32_t *word, uint32_t expected, int timeout_ms)
{
    struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
    return syscall(SYS_futex, word, FUTEX_WAIT, expected, timeout_ms < 0 ? NULL : &ts, NULL, 0) == 0 ? 0 : errno;
}

/* ---- mapping files ------------------------------------------------------------------ */

/* populate: fault every page in at once (MAP_POPULATE) when the file's memory is all there
 * (a producer's pool is: it posix_fallocates it), so a frame's first reads take no page
 * fault per 4 KiB; a sparse file maps lazily, since faulting its holes in would allocate
 * them (tmpfs) on a hostile file's word (Segment.swift's open does the same). */
int fsi_map_file(const char *path, bool writable, bool populate, void **base, size_t *size)
{
    /* O_NONBLOCK: a FIFO in the file's place must not block the open; O_NOFOLLOW: a
     * link planted in the directory is refused. */
    int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return fsi_fail(FRAMESRV_E_NOT_FOUND, "%s does not exist", path);
        if (errno == ELOOP) return fsi_fail(FRAMESRV_E_BAD_DATA, "%s is a symbolic link, not a framesrv segment", path);
        return fsi_fail_errno("open %s", path);
    }
    struct stat st;
    int status = FRAMESRV_OK;
    if (fstat(fd, &st) != 0) status = fsi_fail_errno("stat %s", path);
    else if (!S_ISREG(st.st_mode)) status = fsi_fail(FRAMESRV_E_BAD_DATA, "%s is not a regular file (mode 0%o)", path, (unsigned)st.st_mode);
    else if (st.st_size <= 0) status = fsi_fail(FRAMESRV_E_BAD_DATA, "%s is empty", path);
    else if ((uint64_t)st.st_size > SIZE_MAX) status = fsi_fail(FRAMESRV_E_BAD_DATA, "%s is too large (%lld bytes)", path, (long long)st.st_size);
    if (status == FRAMESRV_OK) {
        /* SECURITY: a consumer maps pools PROT_READ; a stray write faults instead of
         * corrupting what other consumers read. */
        bool whole = populate && st.st_blocks >= 0 && (uint64_t)st.st_blocks >= ((uint64_t)st.st_size + 511) / 512;
        void *p = mmap(NULL, (size_t)st.st_size, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                       MAP_SHARED | (whole ? MAP_POPULATE : 0), fd, 0);
        if (p == MAP_FAILED) status = fsi_fail_errno("map %s", path);
        else {
            *base = p;
            *size = (size_t)st.st_size;
        }
    }
    close(fd);
    return status;
}
