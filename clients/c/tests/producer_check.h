/*
 * producer_check.h: what the producer tests add to check.h (CHECK, CHECK_STATUS, a private
 * FRAMESRV_DIR): the Swift framesrv binary, and child processes started, awaited (bounded)
 * and read.
 */
#ifndef PRODUCER_CHECK_H
#define PRODUCER_CHECK_H

#include "check.h"
#include <framesrv.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
