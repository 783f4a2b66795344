/*
 * fakecuda.c: a stand-in for libcuda.so.1 with the entry points libframesrv loads, for the
 * C tests on machines without a GPU (FRAMESRV_LIBCUDA=build-asan/tests/libfakecuda.so).
 * "Device memory" is a memfd mapped into the process, so a test reads and writes planes
 * through their device addresses; an export is a dup of the memfd, an import maps it; access
 * PROT_READ is mprotect. Streams run every operation at once: a write stores, a wait spins
 * (at most 10 s). Enough to run every CPU-side path of a CUDA stream; the GPU suite
 * (tests/gpu) runs the same paths on a real device.
 *   FAKECUDA_NO_MEMOPS=1    the device reports no 64-bit stream memory operations
 *   FAKECUDA_NO_READONLY=1  cuMemSetAccess refuses PROT_READ (the read-write fallback)
 * A 2D copy (cuMemcpy2DAsync) copies its rows at once; device and host addresses are both
 * this process's, so it reads and writes through either. fakecuda_copies() counts them.
 * fakecuda_last_stream(1) is the stream of the last cuStreamWriteValue64 (0: of the last
 * cuStreamWaitValue64), for tests of which stream a binding orders its fences on.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "CFrameServerCUDA.h"   /* fs_cuda_memcpy2d, cuda.h's CUDA_MEMCPY2D */

#define EXPORT __attribute__((visibility("default")))
typedef int R;
enum { OK = 0, INVALID_VALUE = 1, INVALID_DEVICE = 101, ALREADY_REGISTERED = 712, NOT_SUPPORTED = 801, UNKNOWN = 999 };

static int handles[256];            /* memfd + 1 per handle (0: free); handle = index + 1 */
static size_t mapped;               /* bytes mapped now, for cuMemGetInfo and the tests */
static void *registered[64];

static int env(const char *name) { const char *v = getenv(name); return v && strcmp(v, "1") == 0; }

static void *last_stream[2];         /* [0] the last wait's stream, [1] the last write's */

EXPORT size_t fakecuda_mapped_bytes(void) { return __atomic_load_n(&mapped, __ATOMIC_SEQ_CST); }
EXPORT uintptr_t fakecuda_last_stream(int write) { return (uintptr_t)__atomic_load_n(&last_stream[write != 0], __ATOMIC_SEQ_CST); }

EXPORT R cuInit(unsigned int f) { (void)f; return OK; }
EXPORT R cuDriverGetVersion(int *v) { *v = 13000; return OK; }
EXPORT R cuGetErrorName(R e, const char **s) { *s = e == OK ? "CUDA_SUCCESS" : e == NOT_SUPPORTED ? "CUDA_ERROR_NOT_SUPPORTED" : "CUDA_ERROR_FAKE"; return OK; }
EXPORT R cuGetErrorString(R e, const char **s) { *s = e == OK ? "no error" : "fake error"; return OK; }
EXPORT R cuDeviceGetCount(int *n) { *n = 1; return OK; }
EXPORT R cuDeviceGet(int *d, int ordinal) { if (ordinal != 0) return INVALID_DEVICE; *d = 0; return OK; }
EXPORT R cuDeviceGetName(char *name, int len, int d) { (void)d; strncpy(name, "fakecuda", (size_t)len); return OK; }
EXPORT R cuDeviceGetUuid_v2(char *uuid, int d)
{
    static const char bytes[16] = { (char)0xfa, (char)0xce, 0x0c, (char)0xda, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
    memcpy(uuid, bytes, 16);
    uuid[15] = (char)(12 + d);
    return OK;
}
EXPORT R cuDeviceGetAttribute(int *v, int attribute, int d)
{
    (void)d;
    *v = attribute == 122 ? !env("FAKECUDA_NO_MEMOPS") : attribute == 102 || attribute == 103;
    return OK;
}
EXPORT R cuDevicePrimaryCtxRetain(void **ctx, int d) { *ctx = (void *)(uintptr_t)(0x1000 + d); return OK; }
EXPORT R cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return OK; }
EXPORT R cuCtxPushCurrent_v2(void *ctx) { (void)ctx; return OK; }
EXPORT R cuCtxPopCurrent_v2(void **ctx) { *ctx = NULL; return OK; }
EXPORT R cuCtxSynchronize(void) { return OK; }
EXPORT R cuCtxSetCurrent(void *ctx) { (void)ctx; return OK; }   /* bench gpu's C transport makes its stream so */
EXPORT R cuStreamCreate(void **s, unsigned int flags) { *s = (void *)(uintptr_t)(0x2000 + flags); return OK; }
EXPORT R cuMemGetInfo_v2(size_t *free_bytes, size_t *total) { *total = 1ull << 34; *free_bytes = *total - fakecuda_mapped_bytes(); return OK; }
EXPORT R cuMemGetAllocationGranularity(size_t *g, const void *prop, int option) { (void)prop, (void)option; *g = 65536; return OK; }

static R new_handle(unsigned long long *h, int fd)
{
    for (int i = 0; i < 256; i++)
        if (__atomic_compare_exchange_n(&handles[i], &(int){ 0 }, fd + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            *h = (unsigned long long)i + 1;
            return OK;
        }
    close(fd);
    return UNKNOWN;
}
static int fd_of(unsigned long long h) { return h >= 1 && h <= 256 ? handles[h - 1] - 1 : -1; }

EXPORT R cuMemCreate(unsigned long long *h, size_t size, const void *prop, unsigned long long flags)
{
    (void)prop, (void)flags;
    int fd = memfd_create("fakecuda", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) return UNKNOWN;
    return new_handle(h, fd);
}
EXPORT R cuMemRelease(unsigned long long h)
{
    int fd = fd_of(h);
    if (fd < 0) return INVALID_VALUE;
    handles[h - 1] = 0;
    close(fd);
    return OK;
}
EXPORT R cuMemExportToShareableHandle(void *out, unsigned long long h, int type, unsigned long long flags)
{
    (void)flags;
    int fd = fd_of(h);
    if (fd < 0 || type != 1) return INVALID_VALUE;
    *(int *)out = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    return OK;
}
EXPORT R cuMemImportFromShareableHandle(unsigned long long *h, void *os_handle, int type)
{
    int fd = (int)(intptr_t)os_handle;
    struct stat st;
    if (type != 1 || fstat(fd, &st) != 0) return INVALID_VALUE;
    return new_handle(h, fcntl(fd, F_DUPFD_CLOEXEC, 0));
}
EXPORT R cuMemAddressReserve(unsigned long long *p, size_t size, size_t align, unsigned long long addr, unsigned long long f)
{
    (void)align, (void)addr, (void)f;
    void *m = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return UNKNOWN;
    *p = (uintptr_t)m;
    return OK;
}
EXPORT R cuMemAddressFree(unsigned long long p, size_t size) { return munmap((void *)(uintptr_t)p, size) == 0 ? OK : INVALID_VALUE; }
EXPORT R cuMemMap(unsigned long long p, size_t size, size_t offset, unsigned long long h, unsigned long long f)
{
    (void)f;
    int fd = fd_of(h);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || offset + size > (size_t)st.st_size) return INVALID_VALUE;
    if (mmap((void *)(uintptr_t)p, size, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, (off_t)offset) == MAP_FAILED) return UNKNOWN;
    __atomic_fetch_add(&mapped, size, __ATOMIC_SEQ_CST);
    return OK;
}
EXPORT R cuMemUnmap(unsigned long long p, size_t size)
{
    if (mmap((void *)(uintptr_t)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED)
        return INVALID_VALUE;
    __atomic_fetch_sub(&mapped, size, __ATOMIC_SEQ_CST);
    return OK;
}
struct access { int type, id, flags; };
EXPORT R cuMemSetAccess(unsigned long long p, size_t size, const struct access *a, size_t count)
{
    if (count != 1 || (a->flags != 1 && a->flags != 3)) return INVALID_VALUE;
    if (a->flags == 1 && env("FAKECUDA_NO_READONLY")) return NOT_SUPPORTED;
    return mprotect((void *)(uintptr_t)p, size, a->flags == 3 ? PROT_READ | PROT_WRITE : PROT_READ) == 0 ? OK : INVALID_VALUE;
}
EXPORT int fakecuda_registered(void)
{
    int n = 0;
    for (int i = 0; i < 64; i++) n += __atomic_load_n(&registered[i], __ATOMIC_SEQ_CST) != NULL;
    return n;
}
EXPORT R cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
    (void)size, (void)flags;
    for (int i = 0; i < 64; i++)
        if (registered[i] == p) return ALREADY_REGISTERED;
    for (int i = 0; i < 64; i++)
        if (__atomic_compare_exchange_n(&registered[i], &(void *){ NULL }, p, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return OK;
    return UNKNOWN;
}
EXPORT R cuMemHostUnregister(void *p)
{
    for (int i = 0; i < 64; i++)
        if (__atomic_compare_exchange_n(&registered[i], &(void *){ p }, NULL, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return OK;
    return INVALID_VALUE;
}
EXPORT R cuMemHostGetDevicePointer_v2(unsigned long long *d, void *p, unsigned int f) { (void)f; *d = (uintptr_t)p; return OK; }
EXPORT R cuStreamSynchronize(void *s) { (void)s; return OK; }
EXPORT R cuStreamWaitValue64_v2(void *s, unsigned long long addr, uint64_t value, unsigned int flags)
{
    __atomic_store_n(&last_stream[0], s, __ATOMIC_SEQ_CST);
    if (flags != 0) return INVALID_VALUE;
    for (int i = 0; i < 100000; i++) {   /* 10 s */
        if ((int64_t)(__atomic_load_n((uint64_t *)(uintptr_t)addr, __ATOMIC_ACQUIRE) - value) >= 0) return OK;
        nanosleep(&(struct timespec){ 0, 100000 }, NULL);
    }
    return UNKNOWN;
}
EXPORT R cuStreamWriteValue64_v2(void *s, unsigned long long addr, uint64_t value, unsigned int flags)
{
    __atomic_store_n(&last_stream[1], s, __ATOMIC_SEQ_CST);
    if (flags != 0) return INVALID_VALUE;
    __atomic_store_n((uint64_t *)(uintptr_t)addr, value, __ATOMIC_RELEASE);
    return OK;
}

static size_t copies;
EXPORT size_t fakecuda_copies(void) { return __atomic_load_n(&copies, __ATOMIC_SEQ_CST); }
EXPORT R cuMemcpy2DAsync_v2(const fs_cuda_memcpy2d *c, void *s)
{
    (void)s;
    bool kinds_ok = (c->src_memory_type == FS_CU_MEMORYTYPE_HOST || c->src_memory_type == FS_CU_MEMORYTYPE_DEVICE) &&
                    (c->dst_memory_type == FS_CU_MEMORYTYPE_HOST || c->dst_memory_type == FS_CU_MEMORYTYPE_DEVICE);
    if (!kinds_ok || c->src_pitch < c->width_in_bytes || c->dst_pitch < c->width_in_bytes) return INVALID_VALUE;
    const uint8_t *from = c->src_memory_type == FS_CU_MEMORYTYPE_HOST ? c->src_host : (const uint8_t *)(uintptr_t)c->src_device;
    uint8_t *to = c->dst_memory_type == FS_CU_MEMORYTYPE_HOST ? c->dst_host : (uint8_t *)(uintptr_t)c->dst_device;
    for (size_t y = 0; y < c->height; y++)
        memcpy(to + (c->dst_y + y) * c->dst_pitch + c->dst_x_in_bytes, from + (c->src_y + y) * c->src_pitch + c->src_x_in_bytes,
               c->width_in_bytes);
    __atomic_add_fetch(&copies, 1, __ATOMIC_SEQ_CST);
    return OK;
}
