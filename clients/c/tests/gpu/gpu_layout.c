/*
 * gpu_layout.c: CFrameServerCUDA.h's declarations against NVIDIA's real cuda.h (the GPU
 * suite builds it with the CUDA toolkit's include directory): every struct's size and every
 * field's offset and width, and every value framesrv uses. Any difference is a failure.
 * Needs no device: it only compiles and compares.
 */
#include <cuda.h>
#include "CFrameServerCUDA.h"

#include <stdio.h>

static int failures, checks;

#define SAME(a, b)                                                                                         \
    do {                                                                                                   \
        checks++;                                                                                          \
        if ((long long)(a) != (long long)(b)) {                                                            \
            failures++;                                                                                    \
            fprintf(stderr, "gpu_layout: %s is %lld, cuda.h's %s is %lld\n", #a, (long long)(a), #b, (long long)(b)); \
        }                                                                                                  \
    } while (0)

/* Offset and size of one field of ours against cuda.h's. */
#define FIELD(ours, field, theirs, their_field)                                                           \
    do {                                                                                                   \
        SAME(offsetof(ours, field), offsetof(theirs, their_field));                                        \
        SAME(sizeof(((ours *)0)->field), sizeof(((theirs *)0)->their_field));                              \
    } while (0)

static void structs(void)
{
    SAME(sizeof(fs_cuda_result), sizeof(CUresult));
    SAME(sizeof(fs_cuda_device), sizeof(CUdevice));
    SAME(sizeof(fs_cuda_deviceptr), sizeof(CUdeviceptr));
    SAME(sizeof(fs_cuda_mem_handle), sizeof(CUmemGenericAllocationHandle));
    SAME(sizeof(fs_cuda_context), sizeof(CUcontext));
    SAME(sizeof(fs_cuda_stream), sizeof(CUstream));
    SAME(sizeof(fs_cuda_uuid), sizeof(CUuuid));
    FIELD(fs_cuda_uuid, bytes, CUuuid, bytes);
    SAME(sizeof(fs_cuda_mem_location), sizeof(CUmemLocation));
    FIELD(fs_cuda_mem_location, type, CUmemLocation, type);
    FIELD(fs_cuda_mem_location, id, CUmemLocation, id);
    SAME(sizeof(fs_cuda_alloc_prop), sizeof(CUmemAllocationProp));
    FIELD(fs_cuda_alloc_prop, type, CUmemAllocationProp, type);
    FIELD(fs_cuda_alloc_prop, requested_handle_types, CUmemAllocationProp, requestedHandleTypes);
    FIELD(fs_cuda_alloc_prop, location, CUmemAllocationProp, location);
    FIELD(fs_cuda_alloc_prop, win32_handle_meta_data, CUmemAllocationProp, win32HandleMetaData);
    FIELD(fs_cuda_alloc_prop, alloc_flags, CUmemAllocationProp, allocFlags);
    FIELD(fs_cuda_alloc_prop, alloc_flags.compression_type, CUmemAllocationProp, allocFlags.compressionType);
    FIELD(fs_cuda_alloc_prop, alloc_flags.gpu_direct_rdma_capable, CUmemAllocationProp, allocFlags.gpuDirectRDMACapable);
    FIELD(fs_cuda_alloc_prop, alloc_flags.usage, CUmemAllocationProp, allocFlags.usage);
    FIELD(fs_cuda_alloc_prop, alloc_flags.reserved, CUmemAllocationProp, allocFlags.reserved);
    SAME(sizeof(fs_cuda_access_desc), sizeof(CUmemAccessDesc));
    FIELD(fs_cuda_access_desc, location, CUmemAccessDesc, location);
    FIELD(fs_cuda_access_desc, flags, CUmemAccessDesc, flags);
    SAME(sizeof(fs_cuda_memcpy2d), sizeof(CUDA_MEMCPY2D));
    FIELD(fs_cuda_memcpy2d, src_x_in_bytes, CUDA_MEMCPY2D, srcXInBytes);
    FIELD(fs_cuda_memcpy2d, src_y, CUDA_MEMCPY2D, srcY);
    FIELD(fs_cuda_memcpy2d, src_memory_type, CUDA_MEMCPY2D, srcMemoryType);
    FIELD(fs_cuda_memcpy2d, src_host, CUDA_MEMCPY2D, srcHost);
    FIELD(fs_cuda_memcpy2d, src_device, CUDA_MEMCPY2D, srcDevice);
    FIELD(fs_cuda_memcpy2d, src_array, CUDA_MEMCPY2D, srcArray);
    FIELD(fs_cuda_memcpy2d, src_pitch, CUDA_MEMCPY2D, srcPitch);
    FIELD(fs_cuda_memcpy2d, dst_x_in_bytes, CUDA_MEMCPY2D, dstXInBytes);
    FIELD(fs_cuda_memcpy2d, dst_y, CUDA_MEMCPY2D, dstY);
    FIELD(fs_cuda_memcpy2d, dst_memory_type, CUDA_MEMCPY2D, dstMemoryType);
    FIELD(fs_cuda_memcpy2d, dst_host, CUDA_MEMCPY2D, dstHost);
    FIELD(fs_cuda_memcpy2d, dst_device, CUDA_MEMCPY2D, dstDevice);
    FIELD(fs_cuda_memcpy2d, dst_array, CUDA_MEMCPY2D, dstArray);
    FIELD(fs_cuda_memcpy2d, dst_pitch, CUDA_MEMCPY2D, dstPitch);
    FIELD(fs_cuda_memcpy2d, width_in_bytes, CUDA_MEMCPY2D, WidthInBytes);
    FIELD(fs_cuda_memcpy2d, height, CUDA_MEMCPY2D, Height);
    /* The enums our ints stand for are int-sized. */
    SAME(sizeof(int), sizeof(CUmemLocationType));
    SAME(sizeof(int), sizeof(CUmemAllocationType));
    SAME(sizeof(int), sizeof(CUmemAllocationHandleType));
    SAME(sizeof(int), sizeof(CUmemAccess_flags));
    SAME(sizeof(int), sizeof(CUmemorytype));
    SAME(sizeof(int), sizeof(CUdevice_attribute));
    SAME(sizeof(int), sizeof(CUmemAllocationGranularity_flags));
}

static void values(void)
{
    SAME(FS_CU_SUCCESS, CUDA_SUCCESS);
    SAME(FS_CU_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
    SAME(FS_CU_ERROR_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED);
    SAME(FS_CU_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
    SAME(FS_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED, CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    SAME(FS_CU_ERROR_NOT_SUPPORTED, CUDA_ERROR_NOT_SUPPORTED);
    SAME(FS_CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1);
    SAME(FS_CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
    SAME(FS_CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
         CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
    SAME(FS_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS);
    SAME(FS_CU_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_ALLOCATION_TYPE_PINNED);
    SAME(FS_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    SAME(FS_CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_DEVICE);
    SAME(FS_CU_MEM_ACCESS_FLAGS_PROT_READ, CU_MEM_ACCESS_FLAGS_PROT_READ);
    SAME(FS_CU_MEM_ACCESS_FLAGS_PROT_READWRITE, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    SAME(FS_CU_MEM_ALLOC_GRANULARITY_MINIMUM, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    SAME(FS_CU_MEMHOSTREGISTER_PORTABLE, CU_MEMHOSTREGISTER_PORTABLE);
    SAME(FS_CU_MEMHOSTREGISTER_DEVICEMAP, CU_MEMHOSTREGISTER_DEVICEMAP);
    SAME(FS_CU_MEMHOSTREGISTER_READ_ONLY, CU_MEMHOSTREGISTER_READ_ONLY);
    SAME(FS_CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_HOST);
    SAME(FS_CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE);
    SAME(FS_CU_STREAM_WAIT_VALUE_GEQ, CU_STREAM_WAIT_VALUE_GEQ);
    SAME(FS_CU_STREAM_WRITE_VALUE_DEFAULT, CU_STREAM_WRITE_VALUE_DEFAULT);
}

/* Each symbol framesrv loads has, in cuda.h, the prototype of its fs_cuda_api field with
 * cuda.h's types in place of ours (whose sizes structs() compared): a parameter of another
 * type or count fails to compile. The versioned symbols are the ones cuda.c loads. */
#define PROTOTYPE(symbol, type) _Static_assert(__builtin_types_compatible_p(__typeof__(&symbol), type), #symbol)
PROTOTYPE(cuInit, CUresult (*)(unsigned int));
PROTOTYPE(cuDriverGetVersion, CUresult (*)(int *));
PROTOTYPE(cuGetErrorName, CUresult (*)(CUresult, const char **));
PROTOTYPE(cuGetErrorString, CUresult (*)(CUresult, const char **));
PROTOTYPE(cuDeviceGetCount, CUresult (*)(int *));
PROTOTYPE(cuDeviceGet, CUresult (*)(CUdevice *, int));
PROTOTYPE(cuDeviceGetName, CUresult (*)(char *, int, CUdevice));
PROTOTYPE(cuDeviceGetUuid_v2, CUresult (*)(CUuuid *, CUdevice));
PROTOTYPE(cuDeviceGetAttribute, CUresult (*)(int *, CUdevice_attribute, CUdevice));
PROTOTYPE(cuDevicePrimaryCtxRetain, CUresult (*)(CUcontext *, CUdevice));
PROTOTYPE(cuDevicePrimaryCtxRelease_v2, CUresult (*)(CUdevice));
PROTOTYPE(cuCtxPushCurrent_v2, CUresult (*)(CUcontext));
PROTOTYPE(cuCtxPopCurrent_v2, CUresult (*)(CUcontext *));
PROTOTYPE(cuCtxSynchronize, CUresult (*)(void));
PROTOTYPE(cuMemGetInfo_v2, CUresult (*)(size_t *, size_t *));
PROTOTYPE(cuMemGetAllocationGranularity, CUresult (*)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags));
PROTOTYPE(cuMemCreate, CUresult (*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long));
PROTOTYPE(cuMemRelease, CUresult (*)(CUmemGenericAllocationHandle));
PROTOTYPE(cuMemExportToShareableHandle,
          CUresult (*)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long));
PROTOTYPE(cuMemImportFromShareableHandle, CUresult (*)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType));
PROTOTYPE(cuMemAddressReserve, CUresult (*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long));
PROTOTYPE(cuMemAddressFree, CUresult (*)(CUdeviceptr, size_t));
PROTOTYPE(cuMemMap, CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long));
PROTOTYPE(cuMemUnmap, CUresult (*)(CUdeviceptr, size_t));
PROTOTYPE(cuMemSetAccess, CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t));
PROTOTYPE(cuMemHostRegister_v2, CUresult (*)(void *, size_t, unsigned int));
PROTOTYPE(cuMemHostUnregister, CUresult (*)(void *));
PROTOTYPE(cuMemHostGetDevicePointer_v2, CUresult (*)(CUdeviceptr *, void *, unsigned int));
PROTOTYPE(cuStreamSynchronize, CUresult (*)(CUstream));
PROTOTYPE(cuMemcpy2DAsync_v2, CUresult (*)(const CUDA_MEMCPY2D *, CUstream));
PROTOTYPE(cuStreamWaitValue64_v2, CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int));
PROTOTYPE(cuStreamWriteValue64_v2, CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int));
/* cuuint64_t is our uint64_t. */
_Static_assert(__builtin_types_compatible_p(cuuint64_t, uint64_t), "cuuint64_t");

int main(void)
{
    structs();
    values();
    checks += 33;   /* the prototypes above, checked while compiling */
    printf("gpu_layout: %d checks against cuda.h %d.%d, %d failed\n", checks, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10,
           failures);
    return failures ? 1 : 0;
}
