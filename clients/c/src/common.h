/*
 * common.h: what every part of libframesrv uses (common.c): errors, clocks, the runtime
 * directory and names, process identity, futex, pidfd and mapping files. Not installed.
 *
 * The bottom of the library's internal headers, each including only those below it:
 *   common.h <- pixfmt.h, validate.h, device.h <- pool.h <- frame.h <- producer.h, consumer.h
 *
 * The layout is CFrameServer.h's (the protocol's single source of truth); every access
 * that races with another process is one of its fs_* accessors.
 */
#ifndef FRAMESRV_COMMON_H
#define FRAMESRV_COMMON_H

#define _GNU_SOURCE
/* The public API is the only thing the shared library exports: built with
 * -fvisibility=hidden, the declarations of framesrv.h keep default visibility. */
#pragma GCC visibility push(default)
#include "framesrv.h"
#pragma GCC visibility pop
#include "CFrameServer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FSI_HIDDEN __attribute__((visibility("hidden")))
#define FSI_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ---- errors (common.c) --------------------------------------------------- */

/* Sets this thread's last error to the formatted one-line message and returns status. */
FSI_HIDDEN int fsi_fail(int status, const char *fmt, ...) FSI_PRINTF(2, 3);
/* fsi_fail(FRAMESRV_E_SYSTEM, "<what>: <strerror(errno)>"); keeps errno. */
FSI_HIDDEN int fsi_fail_errno(const char *fmt, ...) FSI_PRINTF(1, 2);

/* ---- clocks and time ----------------------------------------------------- */

FSI_HIDDEN uint64_t fsi_monotonic_ns(void);
FSI_HIDDEN uint64_t fsi_realtime_ns(void);
/* The deadline (CLOCK_MONOTONIC ns) of a timeout in ms; UINT64_MAX for -1. */
FSI_HIDDEN uint64_t fsi_deadline(int timeout_ms);
/* Milliseconds left until deadline, clamped to [0, cap_ms]; cap_ms for UINT64_MAX. */
FSI_HIDDEN int fsi_remaining_ms(uint64_t deadline, int cap_ms);

/* A spin loop's pause (`pause` on x86-64, `yield` on aarch64; PROTOCOL.md 11.3). */
static inline void fsi_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* ---- runtime directory and names ------------------------------------------ */

/* $FRAMESRV_DIR, else $XDG_RUNTIME_DIR/framesrv, else /dev/shm/framesrv-<uid> (else
 * /tmp/framesrv-<uid>) (PROTOCOL.md 3.1, RuntimeDirectory.swift): created 0700 if missing
 * when `create`; always checked to be a directory owned by us (FRAMESRV_E_NOT_FOUND if it
 * does not exist and not `create`), tightened to 0700. */
FSI_HIDDEN int fsi_runtime_dir(char *out, size_t size, bool create);
/* [A-Za-z0-9._-]{1,48}, not "." or ".." (3.3). */
FSI_HIDDEN int fsi_check_name(const char *name);
/* out = "<dir>/<name><suffix>"; FRAMESRV_E_INVALID if it does not fit. */
FSI_HIDDEN int fsi_path(char *out, size_t size, const char *dir, const char *name, const char *suffix);

/* ---- processes (15.1) ------------------------------------------------------ */

/* Field 22 of /proc/<pid>/stat, 0 if the process does not exist. */
FSI_HIDDEN uint64_t fsi_process_start_time(pid_t pid);
/* A pidfd of pid if it is alive and started at start_time, else -1. */
FSI_HIDDEN int fsi_open_pidfd(pid_t pid, uint64_t start_time);
/* true while the pidfd's process has not exited (pidfd not readable). */
FSI_HIDDEN bool fsi_pidfd_alive(int pidfd);

/* ---- forks: a consumer or producer is used only by the process that opened it ---------- */

/* This process's pid as the fork watch keeps it (a pthread_atfork handler stores the child's). */
FSI_HIDDEN extern pid_t fsi_pid;
/* getpid() for an opener to record; the first call starts the fork watch. */
FSI_HIDDEN pid_t fsi_opener_pid(void);
/* Whether this process is not `opener` (a forked child): no system call, for every call. */
static inline bool fsi_forked(pid_t opener) { return __atomic_load_n(&fsi_pid, __ATOMIC_RELAXED) != opener; }
/* The same, also checked with getpid() (for close, which must never get it wrong). */
FSI_HIDDEN bool fsi_forked_child(pid_t opener);
/* FRAMESRV_E_FORKED: "this <what> of stream 'S' was opened by pid P; a forked child (pid C) must open its own". */
FSI_HIDDEN int fsi_fail_forked(const char *what, const char *stream, pid_t opener);

/* ---- futex ------------------------------------------------------------------ */

/* FUTEX_WAKE (shared) every waiter on word. */
FSI_HIDDEN void fsi_futex_wake(uint32_t *word);
/* FUTEX_WAIT (shared) while *word == expected, up to timeout_ms (-1 forever): 0 when woken,
 * else the errno (EAGAIN: the word differed, ETIMEDOUT, EINTR: a signal). */
FSI_HIDDEN int fsi_futex_wait(uint32_t *word, uint32_t expected, int timeout_ms);

/* ---- mapping files ------------------------------------------------------------ */

/* Opens path O_RDONLY|O_NONBLOCK|O_NOFOLLOW (or O_RDWR when writable), checks it is a
 * regular file of a non-zero size, and maps all of it (MAP_SHARED). FRAMESRV_E_NOT_FOUND
 * (errno ENOENT) when it does not exist, FRAMESRV_E_BAD_DATA for a link, a FIFO, a
 * directory or an empty file, FRAMESRV_E_SYSTEM otherwise; the last error says which. */
FSI_HIDDEN int fsi_map_file(const char *path, bool writable, bool populate, void **base, size_t *size);

#endif /* FRAMESRV_COMMON_H */
