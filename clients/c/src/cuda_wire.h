/*
 * cuda_wire.h: the messages of NAME.cuda (PROTOCOL.md 4.5), a SOCK_SEQPACKET socket on which
 * a CUDA stream's producer passes each epoch's allocation, as a descriptor, to the consumers
 * whose entries it can check (cuda_wire.c). Not installed.
 */
#ifndef FRAMESRV_CUDA_WIRE_H
#define FRAMESRV_CUDA_WIRE_H

#include "common.h"

#include <sys/types.h>

/* How long either side waits for the other's message. */
#define FSI_CUDA_WIRE_TIMEOUT_MS 2000

/* A request of `length` bytes: 32 bytes, magic, version, reserved fields zero, entry < 63.
 * FRAMESRV_E_BAD_DATA (FRAMESRV_E_VERSION for another version) with one line. */
FSI_HIDDEN int fsi_cuda_request_check(const void *bytes, size_t length, fs_cuda_request *out);
/* A reply of `length` bytes that came with `fds` descriptors, to a request for `epoch`:
 * 32 bytes, magic, version, the epoch asked for, a known status, exactly one descriptor with
 * status 0 and none otherwise, and a non-zero size with status 0. */
FSI_HIDDEN int fsi_cuda_reply_check(const void *bytes, size_t length, int fds, uint64_t epoch, fs_cuda_reply *out);
/* One message (and `fd` in an SCM_RIGHTS message when >= 0). 0, or -1 with errno. */
FSI_HIDDEN int fsi_cuda_send(int sock, const void *message, size_t length, int fd);
/* One message into buf; *length its real length (more than size: truncated), *fd the first
 * descriptor that came with it (-1 none; any other is closed), *fds how many came.
 * 0, or -1 with errno (EAGAIN: the timeout set on the socket passed). */
FSI_HIDDEN int fsi_cuda_recv(int sock, void *buf, size_t size, size_t *length, int *fd, int *fds);
/* The consumer side: asks the producer listening at `path` for `epoch`'s allocation on
 * behalf of consumer entry `entry`. FRAMESRV_OK with *fd (the caller's to close) and *size;
 * FRAMESRV_E_MEMORY for a refusal, naming `stream` (the status says why); other errors with
 * their line. */
FSI_HIDDEN int fsi_cuda_ask(const char *path, const char *stream, uint32_t entry, uint64_t epoch, int *fd, uint64_t *size);

#endif /* FRAMESRV_CUDA_WIRE_H */
