/*
 * check.h: the C tests' tiny harness. CHECK prints every failed condition (file:line,
 * the condition, a formatted note) and counts it; check_exit() ends the program with
 * the summary and a non-zero status when anything failed. Plain C, no framework.
 */
#ifndef FRAMESRV_TEST_CHECK_H
#define FRAMESRV_TEST_CHECK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int check_failures, check_count;

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        check_count++;                                                                      \
        if (!(cond)) {                                                                      \
            check_failures++;                                                               \
            fprintf(stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond);             \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fputc('\n', stderr);                                                            \
        }                                                                                   \
    } while (0)

/* status == expected, naming both and the library's last error. */
#define CHECK_STATUS(status, expected)                                                      \
    do {                                                                                    \
        int check_s_ = (status);                                                            \
        CHECK(check_s_ == (expected), "got %s, expected %s (%s)", framesrv_status_name(check_s_), \
              framesrv_status_name(expected), framesrv_last_error());                       \
    } while (0)

static char check_dir[64];

static void check_remove_dir(void)
{
    char cmd[128];
    if (!check_dir[0]) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", check_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", check_dir);
}

/* A fresh FRAMESRV_DIR for this program, removed at exit. */
static inline const char *check_runtime_dir(void)
{
    snprintf(check_dir, sizeof check_dir, "/dev/shm/framesrv-ctest.XXXXXX");
    if (!mkdtemp(check_dir)) {
        perror("mkdtemp");
        exit(2);
    }
    setenv("FRAMESRV_DIR", check_dir, 1);
    atexit(check_remove_dir);
    return check_dir;
}

static inline int check_exit(const char *program)
{
    printf("%s: %d checks, %d failed\n", program, check_count, check_failures);
    return check_failures ? 1 : 0;
}

#endif
