/*
 * CFrameServerCUDA.h: the few CUDA driver API declarations framesrv uses for CUDA streams
 * (PROTOCOL.md 4.5), and the loader that finds them in libcuda at run time (cuda.c).
 *
 * Nothing here needs CUDA's headers or libraries to build: libcuda.so.1 is opened with
 * dlopen the first time a CUDA stream is made or read, so a build without CUDA still runs
 * every host stream, and a CUDA stream on a machine without the driver is refused in one
 * line. The Swift library (this C target) and libframesrv (clients/c) share this one copy.
 *
 * The types and values are NVIDIA's public cuda.h (CUDA 11.7 and later, unchanged in 13),
 * renamed with the prefix fs_cuda_ / FS_CU_ so that a file may include both: the GPU test
 * suite compiles a file against the real cuda.h and checks every size, offset and value
 * below against it (clients/c/tests/gpu/gpu_layout.c). Each struct's comment names its
 * cuda.h original; field order and widths are exactly cuda.h's.
 */
#ifndef CFRAMESERVER_CUDA_H
#define CFRAMESERVER_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int fs_cuda_result;                       /* CUresult (an enum of cuda.h) */
typedef int fs_cuda_device;                       /* CUdevice */
typedef unsigned long long fs_cuda_deviceptr;     /* CUdeviceptr (CUdeviceptr_v2) */
typedef unsigned long long fs_cuda_mem_handle;    /* CUmemGenericAllocationHandle */
typedef struct fs_cuda_context_st *fs_cuda_context; /* CUcontext */
typedef struct fs_cuda_stream_st *fs_cuda_stream;   /* CUstream */

typedef struct fs_cuda_uuid { char bytes[16]; } fs_cuda_uuid;   /* CUuuid */

typedef struct fs_cuda_mem_location {             /* CUmemLocation */
    int type;                                     /* CUmemLocationType */
    int id;
} fs_cuda_mem_location;

typedef struct fs_cuda_alloc_prop {               /* CUmemAllocationProp */
    int type;                                     /* CUmemAllocationType */
    int requested_handle_types;                   /* CUmemAllocationHandleType */
    fs_cuda_mem_location location;
    void *win32_handle_meta_data;
    struct {
        unsigned char compression_type;
        unsigned char gpu_direct_rdma_capable;
        unsigned short usage;
        unsigned char reserved[4];
    } alloc_flags;
} fs_cuda_alloc_prop;

typedef struct fs_cuda_access_desc {              /* CUmemAccessDesc */
    fs_cuda_mem_location location;
    int flags;                                    /* CUmemAccess_flags */
} fs_cuda_access_desc;

typedef struct fs_cuda_memcpy2d {                 /* CUDA_MEMCPY2D (CUDA_MEMCPY2D_v2) */
    size_t src_x_in_bytes;
    size_t src_y;
    int src_memory_type;                          /* CUmemorytype */
    const void *src_host;
    fs_cuda_deviceptr src_device;
    void *src_array;                              /* CUarray */
    size_t src_pitch;
    size_t dst_x_in_bytes;
    size_t dst_y;
    int dst_memory_type;                          /* CUmemorytype */
    void *dst_host;
    fs_cuda_deviceptr dst_device;
    void *dst_array;                              /* CUarray */
    size_t dst_pitch;
    size_t width_in_bytes;
    size_t height;
} fs_cuda_memcpy2d;

/* CUresult values framesrv tells apart. */
#define FS_CU_SUCCESS 0
#define FS_CU_ERROR_INVALID_VALUE 1
#define FS_CU_ERROR_NOT_INITIALIZED 3
#define FS_CU_ERROR_NO_DEVICE 100
#define FS_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712
#define FS_CU_ERROR_NOT_SUPPORTED 801

/* CUdevice_attribute */
#define FS_CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 92         /* the v1 memops only (a module option) */
#define FS_CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED 102
#define FS_CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED 103
#define FS_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS 122    /* cuStream{Write,Wait}Value64_v2 */

/* Allocations (cuMemCreate and friends) */
#define FS_CU_MEM_ALLOCATION_TYPE_PINNED 1
#define FS_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR 1
#define FS_CU_MEM_LOCATION_TYPE_DEVICE 1
#define FS_CU_MEM_ACCESS_FLAGS_PROT_READ 1
#define FS_CU_MEM_ACCESS_FLAGS_PROT_READWRITE 3
#define FS_CU_MEM_ALLOC_GRANULARITY_MINIMUM 0
#define FS_CU_MEMHOSTREGISTER_PORTABLE 0x01
#define FS_CU_MEMHOSTREGISTER_DEVICEMAP 0x02
#define FS_CU_MEMHOSTREGISTER_READ_ONLY 0x08

/* CUmemorytype: where one side of a copy is */
#define FS_CU_MEMORYTYPE_HOST 1
#define FS_CU_MEMORYTYPE_DEVICE 2

/* Stream memory operations */
#define FS_CU_STREAM_WAIT_VALUE_GEQ 0x0
#define FS_CU_STREAM_WRITE_VALUE_DEFAULT 0x0

/* The driver entry points framesrv calls. Each field is named after the cuda.h macro a
 * program would call; the comment names the exported symbol it is loaded from (the
 * versioned one where cuda.h's macro maps to one). */
typedef struct fs_cuda_api {
    fs_cuda_result (*cuInit)(unsigned int flags);
    fs_cuda_result (*cuDriverGetVersion)(int *version);
    fs_cuda_result (*cuGetErrorName)(fs_cuda_result error, const char **text);
    fs_cuda_result (*cuGetErrorString)(fs_cuda_result error, const char **text);
    fs_cuda_result (*cuDeviceGetCount)(int *count);
    fs_cuda_result (*cuDeviceGet)(fs_cuda_device *device, int ordinal);
    fs_cuda_result (*cuDeviceGetName)(char *name, int length, fs_cuda_device device);
    fs_cuda_result (*cuDeviceGetUuid)(fs_cuda_uuid *uuid, fs_cuda_device device);          /* cuDeviceGetUuid_v2 */
    fs_cuda_result (*cuDeviceGetAttribute)(int *value, int attribute, fs_cuda_device device);
    fs_cuda_result (*cuDevicePrimaryCtxRetain)(fs_cuda_context *context, fs_cuda_device device);
    fs_cuda_result (*cuDevicePrimaryCtxRelease)(fs_cuda_device device);                    /* _v2 */
    fs_cuda_result (*cuCtxPushCurrent)(fs_cuda_context context);                           /* _v2 */
    fs_cuda_result (*cuCtxPopCurrent)(fs_cuda_context *context);                           /* _v2 */
    fs_cuda_result (*cuCtxSynchronize)(void);
    fs_cuda_result (*cuMemGetInfo)(size_t *free_bytes, size_t *total_bytes);               /* _v2 */
    fs_cuda_result (*cuMemGetAllocationGranularity)(size_t *granularity, const fs_cuda_alloc_prop *prop, int option);
    fs_cuda_result (*cuMemCreate)(fs_cuda_mem_handle *handle, size_t size, const fs_cuda_alloc_prop *prop,
                                  unsigned long long flags);
    fs_cuda_result (*cuMemRelease)(fs_cuda_mem_handle handle);
    fs_cuda_result (*cuMemExportToShareableHandle)(void *shareable, fs_cuda_mem_handle handle, int type,
                                                   unsigned long long flags);
    fs_cuda_result (*cuMemImportFromShareableHandle)(fs_cuda_mem_handle *handle, void *os_handle, int type);
    fs_cuda_result (*cuMemAddressReserve)(fs_cuda_deviceptr *ptr, size_t size, size_t alignment, fs_cuda_deviceptr addr,
                                          unsigned long long flags);
    fs_cuda_result (*cuMemAddressFree)(fs_cuda_deviceptr ptr, size_t size);
    fs_cuda_result (*cuMemMap)(fs_cuda_deviceptr ptr, size_t size, size_t offset, fs_cuda_mem_handle handle,
                               unsigned long long flags);
    fs_cuda_result (*cuMemUnmap)(fs_cuda_deviceptr ptr, size_t size);
    fs_cuda_result (*cuMemSetAccess)(fs_cuda_deviceptr ptr, size_t size, const fs_cuda_access_desc *desc, size_t count);
    fs_cuda_result (*cuMemHostRegister)(void *p, size_t size, unsigned int flags);         /* _v2 */
    fs_cuda_result (*cuMemHostUnregister)(void *p);
    fs_cuda_result (*cuMemHostGetDevicePointer)(fs_cuda_deviceptr *ptr, void *p, unsigned int flags); /* _v2 */
    fs_cuda_result (*cuStreamSynchronize)(fs_cuda_stream stream);
    fs_cuda_result (*cuMemcpy2DAsync)(const fs_cuda_memcpy2d *copy, fs_cuda_stream stream); /* _v2 */
    fs_cuda_result (*cuStreamWaitValue64)(fs_cuda_stream stream, fs_cuda_deviceptr addr, uint64_t value,
                                          unsigned int flags);                             /* _v2 */
    fs_cuda_result (*cuStreamWriteValue64)(fs_cuda_stream stream, fs_cuda_deviceptr addr, uint64_t value,
                                           unsigned int flags);                            /* _v2 */
} fs_cuda_api;

/* Loads libcuda.so.1 (or $FRAMESRV_LIBCUDA, a path, for tests and unusual installs) and
 * every entry point above, once per process (thread-safe). NULL on success, else one line
 * saying what is missing (the library, or a symbol: a driver older than CUDA 11.7). */
const char *fs_cuda_load(void);
/* The table, after fs_cuda_load returned NULL (else NULL). */
const fs_cuda_api *fs_cuda_api_get(void);
/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", from the driver when it is loaded, else
 * "CUresult N". Valid until the next call in the same thread. Any thread. */
const char *fs_cuda_error_text(fs_cuda_result result);
/* A device UUID as nvidia-smi prints it: "GPU-" + 8-4-4-4-12 hex digits (41 bytes with NUL). */
void fs_cuda_uuid_text(const uint8_t uuid[16], char out[41]);

#ifdef __cplusplus
}
#endif
#endif /* CFRAMESERVER_CUDA_H */
