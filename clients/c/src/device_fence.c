/*
 * device_fence.c: the fence words of a CUDA stream's control segment (PROTOCOL.md 4.5),
 * written and waited for on a GPU stream (cuStreamWriteValue64 / cuStreamWaitValue64 on the
 * registered mapping), or by a CPU where the device has no 64-bit stream memory
 * operations (4.5 step 4): synchronize, then store; load, then poll.
 */
#include "device.h"

#include <time.h>

int fsi_fences_register(const fsi_device *d, fsi_fences *f, void *host, size_t size)
{
    *f = (fsi_fences){ .host = host, .size = size };
    int rc = fsi_device_push(d);
    if (rc != FRAMESRV_OK) return rc;
    fs_cuda_result r = d->cu->cuMemHostRegister(host, size, FS_CU_MEMHOSTREGISTER_PORTABLE | FS_CU_MEMHOSTREGISTER_DEVICEMAP);
    if (r == FS_CU_SUCCESS) {
        f->registered = true;
        r = d->cu->cuMemHostGetDevicePointer(&f->dev, host, 0);
    }
    fsi_device_pop(d);
    if (r != FS_CU_SUCCESS) {
        fsi_fences_unregister(d, f);
        return fsi_cuda_fail(r, "register the control segment for stream memory operations (cuMemHostRegister)");
    }
    return FRAMESRV_OK;
}

void fsi_fences_unregister(const fsi_device *d, fsi_fences *f)
{
    if (!f->registered || fsi_device_push(d) != FRAMESRV_OK) return;
    d->cu->cuMemHostUnregister(f->host);
    fsi_device_pop(d);
    f->registered = false;
}

bool fsi_fence_spin(const uint64_t *word, uint64_t value, uint64_t end)
{
    for (unsigned n = 1;; n++) {
        if (fsi_fence_reached(word, value)) return true;
        fsi_cpu_relax();
        if ((n & 63) == 0 && fsi_monotonic_ns() >= end) return false;
    }
}

bool fsi_fence_cpu_wait(const uint64_t *word, uint64_t value, uint64_t timeout_ns)
{
    uint64_t now = fsi_monotonic_ns(), deadline = now + timeout_ns;
    /* a spin first: a fence just queued lands in microseconds */
    if (fsi_fence_spin(word, value, now + (timeout_ns < FSI_FENCE_CPU_SPIN_NS ? timeout_ns : FSI_FENCE_CPU_SPIN_NS))) return true;
    while (!fsi_fence_reached(word, value)) {
        if (fsi_monotonic_ns() >= deadline) return false;
        struct timespec ts = { 0, 100000 };
        nanosleep(&ts, NULL);
    }
    return true;
}

void fsi_fence_raise(uint64_t *word, uint64_t value)
{
    uint64_t old = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    while ((int64_t)(old - value) < 0 &&
           !__atomic_compare_exchange_n(word, &old, value, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {}
}

int fsi_fence_wait(const fsi_device *d, const fsi_fences *f, void *stream, uint64_t *word, uint64_t value)
{
    if (fsi_fence_reached(word, value)) return FRAMESRV_OK;   /* nothing to order: the write already happened */
    if (!d->memops || !f->registered)
        return fsi_fence_cpu_wait(word, value, FSI_FENCE_CPU_WAIT_NS) ? FRAMESRV_OK : FRAMESRV_TIMEOUT;
    int rc = fsi_device_push(d);
    if (rc != FRAMESRV_OK) return rc;
    fs_cuda_deviceptr at = f->dev + (fs_cuda_deviceptr)((uint8_t *)word - f->host);
    fs_cuda_result r = d->cu->cuStreamWaitValue64((fs_cuda_stream)stream, at, value, FS_CU_STREAM_WAIT_VALUE_GEQ);
    fsi_device_pop(d);
    return r == FS_CU_SUCCESS ? FRAMESRV_OK : fsi_cuda_fail(r, "cuStreamWaitValue64 on a fence");
}

int fsi_fence_signal(const fsi_device *d, const fsi_fences *f, void *stream, uint64_t *word, uint64_t value)
{
    int rc = fsi_device_push(d);
    if (rc != FRAMESRV_OK) return rc;
    fs_cuda_result r;
    if (d->memops && f->registered) {
        fs_cuda_deviceptr at = f->dev + (fs_cuda_deviceptr)((uint8_t *)word - f->host);
        r = d->cu->cuStreamWriteValue64((fs_cuda_stream)stream, at, value, FS_CU_STREAM_WRITE_VALUE_DEFAULT);
    } else if ((r = d->cu->cuStreamSynchronize((fs_cuda_stream)stream)) == FS_CU_SUCCESS) {
        fs_fence_store(word, value);   /* SYNC: release, after the stream's work ended */
    }
    fsi_device_pop(d);
    return r == FS_CU_SUCCESS ? FRAMESRV_OK : fsi_cuda_fail(r, d->memops ? "cuStreamWriteValue64 on a fence" : "cuStreamSynchronize");
}
