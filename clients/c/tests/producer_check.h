/*
 * producer_check.h: what the producer tests share. A CHECK that prints and counts, an
 * isolated runtime directory (FRAMESRV_DIR) removed at the end, and child processes.
 */
#ifndef PRODUCER_CHECK_H
#define PRODUCER_CHECK_H

#define _GNU_SOURCE
#include <framesrv.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int check_failures, check_count;

#define CHECK(cond, ...) do {                                                        \
        check_count++;                                                               \
        if (!(cond)) {                                                               \
            check_failures++;                                                        \
            fprintf(stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                            \
            fprintf(stderr, " (last error: %s)\n", framesrv_last_error());           \
        }                                                                            \
    } while (0)

/* An int status equal to the expected one, named in the message. */
#define CHECK_STATUS(expr, want) do {                                                \
        int got_ = (expr);                                                           \
        CHECK(got_ == (want), "%s returned %s, expected %s", #expr,                  \
              framesrv_status_name(got_), framesrv_status_name(want));               \
    } while (0)

static char check_dir[64];

__attribute__((unused)) static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

__attribute__((unused)) static void check_cleanup(void)
{
    if (check_dir[0]) nftw(check_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* A private runtime directory for this test program (FRAMESRV_DIR). */
__attribute__((unused)) static void check_setup(void)
{
    snprintf(check_dir, sizeof check_dir, "/dev/shm/fs-ptest.XXXXXX");
    if (mkdtemp(check_dir) == NULL) {
        perror("mkdtemp");
        exit(2);
    }
    setenv("FRAMESRV_DIR", check_dir, 1);
    atexit(check_cleanup);
}

__attribute__((unused)) static int check_finish(const char *program)
{
    printf("%s: %d checks, %d failed\n", program, check_count, check_failures);
    return check_failures ? 1 : 0;
}

/* The Swift framesrv binary: $FRAMESRV, else ../../.build/debug/framesrv. NULL if absent. */
__attribute__((unused)) static const char *check_framesrv(void)
{
    const char *f = getenv("FRAMESRV");
    if (f == NULL || *f == '\0') f = "../../.build/debug/framesrv";
    return access(f, X_OK) == 0 ? f : NULL;
}

/* Starts argv with its standard output in `out` (a file path, or NULL to inherit). */
__attribute__((unused)) static pid_t check_spawn(char *const argv[], const char *out)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out) posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    extern char **environ;
    pid_t pid;
    int e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0) {
        fprintf(stderr, "spawn %s: %s\n", argv[0], strerror(e));
        return -1;
    }
    return pid;
}

/* Waits for pid; its exit status, or 128 + signal, or -1. Gives up (killing it) after
 * `seconds`, so a broken test cannot hang. */
__attribute__((unused)) static int check_wait(pid_t pid, int seconds)
{
    for (int i = 0; i < seconds * 100; i++) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (r < 0) return -1;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fprintf(stderr, "check: process %d did not finish within %d s: killed\n", (int)pid, seconds);
    return -1;
}

/* The whole of a small file, NUL-terminated, in buf. */
__attribute__((unused)) static const char *check_read(const char *path, char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL) return buf;
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

#endif /* PRODUCER_CHECK_H */
