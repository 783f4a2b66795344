/*
 * device.h: one CUDA device as libframesrv uses it for CUDA streams (PROTOCOL.md 4.5): the
 * device and its primary context (device.c), the fences in the control segment
 * (device_fence.c) and one epoch's device allocation (device_memory.c). Not installed.
 *
 * The driver is CFrameServerCUDA.h's table, loaded at run time: nothing here runs for a
 * host stream. Every CUDA call is made with the device's primary context pushed (the
 * context the CUDA runtime, PyTorch and CuPy use), so the streams an application passes
 * are expected to be of that context (or 0, its legacy default stream).
 */
#ifndef FRAMESRV_DEVICE_H
#define FRAMESRV_DEVICE_H

#include "common.h"
#include "CFrameServerCUDA.h"

typedef struct fsi_device {
    const fs_cuda_api *cu;
    fs_cuda_device dev;
    int ordinal;
    fs_cuda_context ctx;          /* the primary context, retained once per fsi_device */
    uint8_t uuid[16];
    char uuid_text[41];           /* "GPU-..." as nvidia-smi prints it */
    bool memops;                  /* 64-bit stream memory operations (else 4.5 step 4's CPU path) */
} fsi_device;

/* ---- device.c ------------------------------------------------------------------------- */

/* FRAMESRV_E_SYSTEM with "what: <the driver's error>". */
FSI_HIDDEN int fsi_cuda_fail(fs_cuda_result result, const char *what);
/* The device of `ordinal` (producer), ready for VMM allocations exported as descriptors:
 * FRAMESRV_E_MEMORY with one line when the driver, the device or a capability is missing. */
FSI_HIDDEN int fsi_device_by_ordinal(fsi_device *d, int ordinal);
/* The device whose UUID is `uuid` (consumer): FRAMESRV_E_MEMORY naming `stream`, the
 * device and what to do when this process cannot use it. */
FSI_HIDDEN int fsi_device_by_uuid(fsi_device *d, const uint8_t uuid[16], const char *stream);
/* Another reference to the same device and context (for memory that outlives its owner). */
FSI_HIDDEN int fsi_device_copy(fsi_device *to, const fsi_device *from);
FSI_HIDDEN void fsi_device_release(fsi_device *d);   /* its primary-context reference; NULL cu ignored */
FSI_HIDDEN int fsi_device_push(const fsi_device *d);
FSI_HIDDEN void fsi_device_pop(const fsi_device *d);

/* ---- device_fence.c: the fence words (4.5), written and waited for on a stream or a CPU -- */

typedef struct fsi_fences {
    uint8_t *host;                /* the control segment's mapping                              */
    size_t size;
    fs_cuda_deviceptr dev;        /* its address for streams (cuMemHostGetDevicePointer)         */
    bool registered;
} fsi_fences;

/* cuMemHostRegister (PORTABLE | DEVICEMAP) of the control segment's mapping. */
FSI_HIDDEN int fsi_fences_register(const fsi_device *d, fsi_fences *f, void *host, size_t size);
FSI_HIDDEN void fsi_fences_unregister(const fsi_device *d, fsi_fences *f);
/* How long a CPU waits for a fence before the slot counts as damaged (4.5 step 4). */
#define FSI_FENCE_CPU_WAIT_NS 2000000000ull
/* How long a CPU wait for a fence spins before it polls every 100 us (4.5 step 4). */
#define FSI_FENCE_CPU_SPIN_NS 50000ull
/* Whether *word has reached value (cyclic >=, as the GPU compares; load-acquire). */
static inline bool fsi_fence_reached(const uint64_t *word, uint64_t value)
{
    return (int64_t)(fs_fence_load(word) - value) >= 0;
}
/* Whether *word reached value before CLOCK_MONOTONIC `end`, spinning (the clock read every
 * 64 pauses). */
FSI_HIDDEN bool fsi_fence_spin(const uint64_t *word, uint64_t value, uint64_t end);
/* Whether *word reached value within timeout_ns: spinning for FSI_FENCE_CPU_SPIN_NS, then polling
 * every 100 us. */
FSI_HIDDEN bool fsi_fence_cpu_wait(const uint64_t *word, uint64_t value, uint64_t timeout_ns);
/* *word = max(*word, value), for a CPU that writes on behalf of a dead process. */
FSI_HIDDEN void fsi_fence_raise(uint64_t *word, uint64_t value);
/* Work queued on `stream` after this waits until *word >= value: cuStreamWaitValue64, or
 * (no memops, or stream_ok false) a CPU wait. FRAMESRV_TIMEOUT when the CPU wait ran out. */
FSI_HIDDEN int fsi_fence_wait(const fsi_device *d, const fsi_fences *f, void *stream, uint64_t *word, uint64_t value);
/* *word = value once the work queued on `stream` so far is done: cuStreamWriteValue64, or
 * cuStreamSynchronize and a CPU store. */
FSI_HIDDEN int fsi_fence_signal(const fsi_device *d, const fsi_fences *f, void *stream, uint64_t *word, uint64_t value);

/* ---- device_memory.c: one epoch's allocation --------------------------------------------- */

typedef struct fsi_device_memory {
    fsi_device device;            /* its own reference to the context                            */
    fs_cuda_deviceptr base;       /* mapped at base .. base + size                               */
    size_t size;
    size_t slot_stride;           /* slot i's planes at base + i * slot_stride                   */
    fs_cuda_mem_handle handle;    /* the producer's, released at free; a consumer releases its import at once */
    bool has_handle;
    int fd;                       /* the producer's exported descriptor (served over NAME.cuda), else -1 */
    bool read_only;               /* a consumer's import mapped PROT_READ (else read-write: the device refused) */
} fsi_device_memory;

/* cuMemCreate of slots x stride (stride: slot_bytes rounded up to 4096), rounded up to the
 * granularity, exported once as a descriptor and mapped read-write here. */
FSI_HIDDEN int fsi_device_memory_create(const fsi_device *d, uint64_t slot_bytes, uint32_t slots, fsi_device_memory **out);
/* Imports the descriptor (the caller keeps and closes it) and maps `size` bytes: read-only
 * where the device allows it, else read-write. */
FSI_HIDDEN int fsi_device_memory_import(const fsi_device *d, int fd, size_t size, size_t slot_stride,
                                        fsi_device_memory **out);
/* Waits for the context's queued work (a kernel may still read the memory), unmaps,
 * releases and frees. NULL ignored. */
FSI_HIDDEN void fsi_device_memory_free(fsi_device_memory *m);

#endif /* FRAMESRV_DEVICE_H */
